"""cdpool.cfg: the model cfg language of cdp-model(5), the preprocessor and
parser of engine/cfg/cfg.c and cfg_expr.c in Python:

    parse(text, path="<cfg>", overrides=()) -> [Section, ...]   ([net] first)

whole-line comments (# ;), [section] headers, key=value options, [net]
keys with integer values, an optional [vars] section of integer variables
directly after [net], and integer overrides as variables, ${EXPR} in
64-bit integers where overflow is an error (+ - * / % ** ( ), unary -; /
and % truncate toward 0; ** right-associative, binding tighter than a
unary minus on its left), @for VAR A B [STEP], @if EXPR, @end, overrides
replacing [net] or [vars] keys before expansion and appended to [net] when the file
lacks them (line 0); a [net] key not in NET_KEYS raises CfgUnknownKey (a
CfgError) unless old_rule. A text the C parser refuses raises CfgError with its
message, "PATH:LINE: reason". cdpool.model builds the net from the sections.
Nesting is bounded as in C (CDP_CFG_NEST_MAX): 64 directives inside the
file, and 64 levels of '(', unary '-' and '**' in one expression, so a
hostile cfg is a CfgError and never a RecursionError.
"""
import re

MAX_EXPANDED = 1000000
MAX_NESTING = 64
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class CfgError(ValueError):
    """A cfg the C parser or net builder refuses; str() is its message."""


_DEC = re.compile(r"[+-]?[0-9]+\Z")
_FLT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")


def _is_ident(c):
    return c.isascii() and (c.isalnum() or c == "_")


def _is_ident_start(c):
    return c.isascii() and (c.isalpha() or c == "_")


def _parse_i64(s):
    """cdp_parse_i64 over the whole int64 range: an int or None."""
    if not _DEC.match(s):
        return None
    v = int(s)
    return v if I64_MIN <= v <= I64_MAX else None


def _trim(s):
    return s.strip(" \t\r")


def _valid_key(k):
    return bool(k) and all(_is_ident(c) or c in ".-" for c in k)


# ---- ${} expressions (cfg_expr.c) -----------------------------------------------------
class _ExprError(Exception):
    def __init__(self, why, name=""):
        super().__init__(why)
        self.why, self.name = why, name


def _chk(v):
    if not I64_MIN <= v <= I64_MAX:
        raise _ExprError("overflow")
    return v


class _Expr:
    def __init__(self, s, lookup):
        self.s, self.p, self.lookup, self.depth = s, 0, lookup, 0

    def nested(self, fn):
        """fn() one level deeper: each '(', unary '-' and '**' recurses."""
        if self.depth >= MAX_NESTING:
            raise _ExprError("nested deeper than %d" % MAX_NESTING)
        self.depth += 1
        v = fn()
        self.depth -= 1
        return v

    def ws(self):
        while self.p < len(self.s) and self.s[self.p] in " \t":
            self.p += 1

    def peek(self, n=1):
        return self.s[self.p:self.p + n]

    def primary(self):
        self.ws()
        c = self.peek()
        if c == "(":
            self.p += 1
            v = self.nested(self.sum)
            self.ws()
            if self.peek() != ")":
                raise _ExprError("missing ')'")
            self.p += 1
            return v
        if c.isascii() and c.isdigit():
            x = 0
            while self.p < len(self.s) and self.s[self.p].isascii() and self.s[self.p].isdigit():
                x = x * 10 + int(self.s[self.p])
                if x > I64_MAX:
                    raise _ExprError("number too large")
                self.p += 1
            if self.p < len(self.s) and _is_ident(self.s[self.p]):
                raise _ExprError("bad number")
            return x
        if c and _is_ident_start(c):
            q = self.p
            while self.p < len(self.s) and _is_ident(self.s[self.p]):
                self.p += 1
            v = self.lookup(self.s[q:self.p])
            if v is None:
                raise _ExprError("unknown variable", self.s[q:self.p][:63])
            return v
        raise _ExprError("expected a number, a variable or '('")

    def power(self):
        b = self.primary()
        self.ws()
        if self.peek(2) != "**":
            return b
        self.p += 2
        x = self.nested(self.unary)
        if x < 0:
            raise _ExprError("negative exponent")
        if b == 0:
            return int(x == 0)
        if b in (1, -1):
            return -1 if b == -1 and x & 1 else 1
        r = 1
        for _ in range(x):
            r = _chk(r * b)
        return r

    def unary(self):
        self.ws()
        if self.peek() == "-":
            self.p += 1
            return _chk(-self.nested(self.unary))
        return self.power()

    def product(self):
        v = self.unary()
        while True:
            self.ws()
            op = self.peek()
            if op not in ("*", "/", "%") or op == "" or self.peek(2) == "**":
                return v
            self.p += 1
            r = self.unary()
            if op == "*":
                v = _chk(v * r)
                continue
            if r == 0:
                raise _ExprError("division by zero")
            q = _chk(abs(v) // abs(r) * (1 if (v < 0) == (r < 0) else -1))
            v = q if op == "/" else v - r * q        # C: toward zero

    def sum(self):
        v = self.product()
        while True:
            self.ws()
            op = self.peek()
            if op not in ("+", "-") or op == "":
                return v
            self.p += 1
            r = self.product()
            v = _chk(v + r if op == "+" else v - r)

    def run(self):
        v = self.sum()
        self.ws()
        if self.p == len(self.s):
            return v
        raise _ExprError("unbalanced ')'" if self.s[self.p] == ")" else
                         "unexpected text after the expression")


# ---- the preprocessor and parser (cfg.c) ------------------------------------------------
class Section:
    """One [type] section: kv is a list of [key, value, line, used]."""

    def __init__(self, type_, line):
        self.type, self.line, self.kv = type_, line, []

    def find(self, key, mark=True):
        for kv in self.kv:
            if kv[0] == key:
                if mark:
                    kv[3] = True
                return kv
        return None

    def __repr__(self):
        return "Section(%r, %d, %r)" % (self.type, self.line, [kv[:3] for kv in self.kv])


def _classify(t):
    if not t or t[0] in "#;":
        return "blank"
    if t[0] != "@":
        return "text"
    for w in ("@for", "@if", "@end"):
        if t.startswith(w) and (len(t) == len(w) or t[len(w)] in " \t"):
            return w[1:]
    return "baddir"


# Every [net] key some part of the engine reads: engine/cfg/netkeys.h, in its
# order (tests/python/test_cdpool.py checks the two agree). Add a key to both.
NET_KEYS = (
    "channels", "in_h", "in_w", "classes", "ignore", "lr_mult", "bn_sync",
    "loss", "loss_weights", "class_weights", "dice_smooth", "focal_gamma", "focal_alpha",
    "tversky_alpha", "tversky_beta", "label_smoothing", "huber_delta",
    "aug_hflip", "aug_vflip", "aug_rot90", "crop_h", "crop_w",
    "aug_brightness", "aug_brightness_p", "aug_contrast", "aug_contrast_p",
    "aug_gamma", "aug_gamma_p", "aug_band_jitter", "aug_band_jitter_p",
    "aug_noise", "aug_noise_p", "aug_scale", "aug_scale_p", "aug_rotate", "aug_rotate_p",
    "mixup_alpha", "cutmix_alpha", "mix_prob", "mix_switch_prob",
    "optimizer", "lr_policy", "lr", "momentum", "nesterov", "weight_decay", "beta1",
    "beta2", "adam_eps", "lr_step", "lr_gamma", "lr_min", "warmup", "warmup_factor",
    "clip_norm", "accumulate", "ema",
)
# The keys of NET_KEYS that the engine came to read after the old rule ended
# (netkeys.h's CDP_NETKEY_NEW): under the old rule they were variables, and
# parse(old_rule=True) drops them from [net] (Section.old_vars names them).
NET_KEYS_NEW = (
    "lr_mult", "bn_sync", "huber_delta",
    "aug_brightness", "aug_brightness_p", "aug_contrast", "aug_contrast_p",
    "aug_gamma", "aug_gamma_p", "aug_band_jitter", "aug_band_jitter_p",
    "aug_noise", "aug_noise_p", "aug_scale", "aug_scale_p", "aug_rotate", "aug_rotate_p",
    "mixup_alpha", "cutmix_alpha", "mix_prob", "mix_switch_prob", "ema",
)


def old_rule_warning(why, names):
    """The warning of a cfg read under the old rule (cdp_cfg_old_rule_warning):
    why (the new rule's refusal), the rule, and the keys it kept variables."""
    w = "%s; read under the old rule (a checkpoint written before [vars]): [net] keys no part " \
        "of the engine reads are variables" % why
    if not names:
        return w
    many = len(names) > 1
    return w + "; [net] %s %s when the checkpoint was written and %s, not the setting%s of " \
        "that name now" % (", ".join(names), "were variables" if many else "was a variable",
                           "stay so" if many else "stays one", "s" if many else "")


class CfgUnknownKey(CfgError):
    """A [net] key no part of the engine reads (cdp_cfg_parse's CDP_CFG_EUNKNOWN):
    the cfg parses under the old rule (old_rule=True)."""


def _osa(a, b):
    """Damerau-Levenshtein distance, optimal string alignment (cfg_keys.c)."""
    a, b = a[:63], b[:63]
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            c = min(d[i - 1][j - 1] + (a[i - 1] != b[j - 1]), d[i - 1][j] + 1, d[i][j - 1] + 1)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                c = min(c, d[i - 2][j - 2] + 1)
            d[i][j] = c
    return d[len(a)][len(b)]


def nearest_net_key(key):
    """The known [net] key nearest to key (cdp_cfg_net_key_nearest), or None."""
    limit, best, bd = max(len(key.encode()) // 3, 1), None, 0
    for k in NET_KEYS:
        d = _osa(key, k)
        if d <= limit and (best is None or d < bd):
            best, bd = k, d
    return best


class _Parser:
    def __init__(self, text, path, overrides, old_rule=False):
        self.path, self.ov, self.old_rule = path, list(overrides), old_rule
        self.in_vars, self.vsec = False, None
        self.ov_used = [False] * len(self.ov)
        self.sections, self.vars, self.budget, self.depth = [], [], 0, 0
        if "\0" in text:                         # cdp_cfg_read refuses it
            self.fail(text.count("\n", 0, text.index("\0")) + 1, "a NUL byte: a cfg is text")
        self.lines = [(_trim(s), i + 1) for i, s in enumerate(text.split("\n"))]
        if self.lines and self.lines[-1][0] == "" and text.endswith("\n"):
            self.lines.pop()

    def fail(self, line, msg):
        raise CfgError("%s:%d: %s" % (self.path, line, msg) if line > 0 else
                       "%s: %s" % (self.path, msg))

    def var(self, name):
        for n, v in reversed(self.vars):
            if n == name:
                return v
        return None

    def eval(self, line, s):
        try:
            return _Expr(s, self.var).run()
        except _ExprError as e:
            if e.name:
                self.fail(line, "expression '%s': unknown variable '%s'" % (s[:200], e.name))
            self.fail(line, "expression '%s': %s" % (s[:200], e.why))

    def expand(self, line, s):
        out, i = [], 0
        while i < len(s):
            if s.startswith("${", i):
                j = s.find("}", i + 2)
                if j < 0:
                    self.fail(line, "unterminated '${'")
                out.append(str(self.eval(line, s[i + 2:j])))
                i = j + 1
            else:
                out.append(s[i])
                i += 1
        return "".join(out)

    def ov_find(self, key):
        for i, o in enumerate(self.ov):
            if o.startswith(key + "="):
                return i
        return -1

    def check_overrides(self):
        for i, o in enumerate(self.ov):
            eq = o.find("=")
            if eq <= 0 or eq + 1 == len(o) or eq >= 256:
                self.fail(0, "override '%s': expected key=value" % o[:100])
            if not _valid_key(o[:eq]):
                self.fail(0, "override '%s': bad option name" % o[:100])
            if self.ov_find(o[:eq]) != i:
                self.fail(0, "override '%s' given twice" % o[:eq][:64])
            v = _parse_i64(o[eq + 1:])
            if v is not None:
                self.vars.append((o[:eq], v))

    def close_net(self):
        net = self.sections[0]
        for i, o in enumerate(self.ov):
            if not self.ov_used[i]:
                k, v = o.split("=", 1)
                net.kv.append([k, v, 0, False])
                self.ov_used[i] = True

    def header(self, line, t):
        if not t.endswith("]"):
            self.fail(line, "bad section header '%s': missing ']'" % t[:100])
        type_ = _trim(t[1:-1])
        if not _valid_key(type_):
            self.fail(line, "bad section name '%s'" % type_[:100])
        if not self.sections and type_ != "net":
            self.fail(line, "the first section must be [net], not [%s]" % type_[:64])
        if self.sections and type_ == "net":
            self.fail(line, "duplicate [net] section (the first is at line %d)"
                      % self.sections[0].line)
        if type_ == "vars":
            if self.vsec is not None:
                self.fail(line, "duplicate [vars] section (the first is at line %d)"
                          % self.vsec.line)
            if len(self.sections) != 1:
                self.fail(line, "[vars] must directly follow [net]")
            self.in_vars, self.vsec = True, Section("vars", line)
            return
        self.in_vars = False
        if len(self.sections) == 1:
            self.close_net()
        self.sections.append(Section(type_, line))

    def emit(self, line, raw):
        self.budget += 1
        if self.budget > MAX_EXPANDED:
            self.fail(line, "expansion exceeds %d lines" % MAX_EXPANDED)
        sec = self.vsec if self.in_vars else self.sections[-1] if self.sections else None
        ov = -1
        if sec is not None and len(self.sections) == 1 and "=" in raw and raw[0] != "[":
            ov = self.ov_find(raw[:raw.index("=")].rstrip(" \t"))
        if ov >= 0:
            k, v = self.ov[ov].split("=", 1)
            self.ov_used[ov] = True
        else:
            t = _trim(self.expand(line, raw))
            if t.startswith("["):
                return self.header(line, t)
            if "=" not in t:
                self.fail(line, "expected '[section]' or 'key=value', not '%s'" % t[:100])
            k, v = (_trim(x) for x in t.split("=", 1))
        if not _valid_key(k):
            self.fail(line, "bad option name '%s'" % k[:100])
        if sec is None:
            self.fail(line, "option '%s' outside any section" % k[:64])
        if not v:
            self.fail(line, "option '%s' has no value" % k[:64])
        dup = sec.find(k, mark=False)
        if not dup and self.in_vars:
            dup = self.sections[0].find(k, mark=False)
            if dup:
                self.fail(line, "[vars] key '%s' is also a [net] key (line %d)"
                          % (k[:64], dup[2]))
        if dup:
            self.fail(line, "duplicate option '%s' (first at line %d)" % (k[:64], dup[2]))
        sec.kv.append([k, v, line, False])
        if len(self.sections) == 1:
            iv = _parse_i64(v)
            if self.in_vars and iv is None:
                self.fail(line, "[vars] key '%s': '%s' is not an integer" % (k[:64], v[:64]))
            if iv is not None:
                self.vars.append((k, iv))

    def find_end(self, i, hi):
        depth = 0
        for j in range(i + 1, hi):
            c = _classify(self.lines[j][0])
            if c in ("for", "if"):
                depth += 1
            elif c == "end":
                if depth == 0:
                    return j
                depth -= 1
        return -1

    def do_for(self, i, end):
        line = self.lines[i][1]
        tok = [t for t in re.split("[ \t]+", self.expand(line, self.lines[i][0][4:])) if t][:5]
        if not 3 <= len(tok) <= 4:
            self.fail(line, "@for: expected 'VAR A B [STEP]'")
        name = tok[0]
        if not _is_ident_start(name[0]) or not all(_is_ident(c) for c in name):
            self.fail(line, "@for: bad variable name '%s'" % name[:64])
        if self.var(name) is not None:
            self.fail(line, "@for: variable '%s' is already defined" % name[:64])
        b = [self.eval(line, t) for t in tok[1:]] + [1]
        a, z, step = b[0], b[1], b[2]
        if step == 0:
            self.fail(line, "@for: step is 0")
        li = len(self.vars)
        self.vars.append((name, a))
        x = a
        while (x <= z) if step > 0 else (x >= z):
            self.vars[li] = (name, x)
            self.budget += 1
            if self.budget > MAX_EXPANDED:
                self.fail(line, "expansion exceeds %d lines" % MAX_EXPANDED)
            self.run(i + 1, end)
            x += step
            if not I64_MIN <= x <= I64_MAX:
                break
        del self.vars[li]      # [net] keys defined in the body stay

    def do_if(self, i, end):
        line = self.lines[i][1]
        if self.eval(line, _trim(self.expand(line, self.lines[i][0][3:]))) != 0:
            self.run(i + 1, end)

    def run(self, lo, hi):
        self.depth += 1              # the file itself is 1
        if self.depth > MAX_NESTING + 1:
            self.fail(self.lines[lo - 1 if lo > 0 else 0][1],
                      "directives nested deeper than %d" % MAX_NESTING)
        i = lo
        while i < hi:
            s, no = self.lines[i]
            c = _classify(s)
            if c == "text":
                self.emit(no, s)
            elif c == "end":
                self.fail(no, "@end without @for or @if")
            elif c == "baddir":
                self.fail(no, "unknown directive '%s'" % s[:32])
            elif c in ("for", "if"):
                end = self.find_end(i, hi)
                if end < 0:
                    self.fail(no, "unterminated @%s" % c)
                (self.do_for if c == "for" else self.do_if)(i, end)
                i = end
            i += 1
        self.depth -= 1

    def parse(self):
        self.check_overrides()
        self.run(0, len(self.lines))
        if not self.sections:
            self.fail(0, "no [net] section")
        if len(self.sections) == 1:
            self.close_net()
        net = self.sections[0]
        net.old_vars = [kv[0] for kv in net.kv if kv[0] in NET_KEYS_NEW] if self.old_rule else []
        net.kv = [kv for kv in net.kv if kv[0] not in net.old_vars]
        for k, _, line, _ in [] if self.old_rule else self.sections[0].kv:
            if k not in NET_KEYS:
                near = nearest_net_key(k)
                hint = ("did you mean '%s'?" % near if near else
                        "no such key; a cfg's own variables go in [vars]")
                msg = "unknown [net] key '%s'%s (%s)" % (k[:64], "" if line > 0 else
                                                         " (override)", hint)
                raise CfgUnknownKey("%s:%d: %s" % (self.path, line, msg) if line > 0 else
                                    "%s: %s" % (self.path, msg))
        return self.sections


def parse(text, path="<cfg>", overrides=(), old_rule=False):
    """The expanded sections of a cfg text: a list of Section, [net] first
    (cdp_cfg_parse); [vars] is not among them. overrides: "key=value" strings.
    A [net] key no part of the engine reads raises CfgUnknownKey, unless
    old_rule (the rule before [vars], for an old checkpoint's cfg)."""
    return _Parser(text, path, overrides, old_rule).parse()
