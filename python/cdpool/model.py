"""cdpool.model: the model cfg language of cdp-model(5) in Python, so that a
checkpoint's cfg text becomes a model without the C tools.

    build(text, path="<cfg>", overrides=(), in_shape=None, batch=1)
    model_of(ckpt)

give the dict that tests/engine/model_dump prints as JSON for the same cfg:
per layer its index, type, name, cfg line, from indices (-1 = the net
input), in/out shapes (C, H, W), hyper-parameters and the offsets and
PyTorch shapes of its parameters and buffers in the engine's blocks. It is
what cdpool.torch_model.EngineNet takes. parse() gives the expanded
sections alone.

Two halves, as in the C sources:
  - the preprocessor and parser of engine/cfg/cfg.c and cfg_expr.c: whole-
    line comments, [net] keys and integer overrides as variables, ${EXPR}
    in 64-bit integers where overflow is an error, @for VAR A B [STEP],
    @if EXPR, @end, overrides replacing [net] keys before expansion;
  - the net builder of engine/net.c and engine/layers/*.c: [net]'s input,
    classes, loss and ignore, each layer's options with their defaults and
    ranges, from= resolution, shapes, the head check, unknown options.
A refused cfg raises CfgError with the C message ("PATH:LINE: reason").
"""
import math
import re

import numpy as np

MAX_EXPANDED = 1000000
MAX_NESTING = 64
MAX_FROM = 4
LAYER_NAME = 64
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
LAYER_TYPES = ("conv", "deconv", "bn", "relu", "leaky", "maxpool", "avgpool", "gap",
               "upsample", "concat", "add", "dropout", "dense")


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
        self.s, self.p, self.lookup = s, 0, lookup

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
            v = self.sum()
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
        x = self.unary()
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
            return _chk(-self.unary())
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


class _Parser:
    def __init__(self, text, path, overrides):
        self.path, self.ov = path, list(overrides)
        self.ov_used = [False] * len(self.ov)
        self.sections, self.vars, self.budget, self.depth = [], [], 0, 0
        text = text.split("\0")[0]               # C strings end at a NUL
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
        if len(self.sections) == 1:
            self.close_net()
        self.sections.append(Section(type_, line))

    def emit(self, line, raw):
        self.budget += 1
        if self.budget > MAX_EXPANDED:
            self.fail(line, "expansion exceeds %d lines" % MAX_EXPANDED)
        sec = self.sections[-1] if self.sections else None
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
        if dup:
            self.fail(line, "duplicate option '%s' (first at line %d)" % (k[:64], dup[2]))
        sec.kv.append([k, v, line, False])
        if len(self.sections) == 1:
            iv = _parse_i64(v)
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
        self.depth += 1
        if self.depth > MAX_NESTING:
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
        return self.sections


def parse(text, path="<cfg>", overrides=()):
    """The expanded sections of a cfg text: a list of Section, [net] first
    (cdp_cfg_parse). overrides: "key=value" strings."""
    return _Parser(text, path, overrides).parse()


# ---- the net builder (net.c, layers/*.c) ---------------------------------------------------
class _Opts:
    """Typed lookups in one section, marking keys used (cfg_opt.c)."""

    def __init__(self, path, sec):
        self.path, self.sec = path, sec

    def _fail(self, kv, msg):
        if kv[2] > 0:
            raise CfgError("%s:%d: option '%s': %s" % (self.path, kv[2], kv[0], msg))
        raise CfgError("%s: option '%s' (override): %s" % (self.path, kv[0], msg))

    def str(self, key, default=None):
        kv = self.sec.find(key)
        return kv[1] if kv else default

    def int(self, key, default, lo, hi):
        kv = self.sec.find(key)
        if not kv:
            return default
        if not _DEC.match(kv[1]):
            self._fail(kv, "'%s' is not an integer" % kv[1][:64])
        v = int(kv[1])
        if not lo <= v <= hi:
            self._fail(kv, "%s is outside [%d, %d]" % (kv[1][:64], lo, hi))
        return v

    def float(self, key, default, lo, hi):
        """A float32 option; lo, hi are float32 constants (C's 0.999f)."""
        kv = self.sec.find(key)
        if not kv:
            return float(np.float32(default))
        s = kv[1]
        lo, hi = float(np.float32(lo)), float(np.float32(hi))
        if re.fullmatch(r"[+-]?inf(inity)?", s, re.I):
            v = -math.inf if s[0] == "-" else math.inf
        elif _FLT.match(s):
            v = float(s)
        else:
            self._fail(kv, "'%s' is not a number" % s[:64])
        if not lo <= v <= hi:
            self._fail(kv, "%s is outside [%g, %g]" % (s[:64], lo, hi))
        return float(np.float32(v))

    def act(self, L):
        a = self.str("activation", "linear")
        L["slope"] = 0.0
        if a == "leaky":
            L["slope"] = self.float("slope", 0.01, 0.0, 1.0)
        elif a not in ("linear", "relu"):
            raise _LayerError("activation '%s' is not linear, relu or leaky" % a[:32])
        L["activation"] = a


class _LayerError(Exception):
    pass


def _one_input(L):
    if len(L["from"]) != 1:
        raise _LayerError("takes one input, from= names %d" % len(L["from"]))


def _conv_opts(L, o, size, stride, dilated):
    """conv.c's and deconv.c's options, in their order: (F, K, S, P, D, bias)."""
    _one_input(L)
    f = o.int("filters", 0, 1, 1 << 16)
    k = o.int("size", size, 1, 1 << 10)
    stride = o.int("stride", stride, 1, 1 << 10)
    dil = o.int("dilation", 1, 1, 1 << 10) if dilated else 1
    pad = o.int("pad", k // 2 * dil if dilated else 0, 0, 1 << 10)
    bias = o.int("bias", 1, 0, 1)
    o.act(L)
    if f == 0:
        raise _LayerError("filters= is required")
    return f, k, stride, pad, dil, bias


def _conv_out(h, w, k, stride, pad, dil):
    e = dil * (k - 1) + 1
    if h + 2 * pad < e or w + 2 * pad < e:
        return None
    return (h + 2 * pad - e) // stride + 1, (w + 2 * pad - e) // stride + 1


class _Builder:
    def __init__(self, path):
        self.path, self.nparams, self.nbuffers = path, 0, 0

    def param(self, L, name, shape):
        L["params"].append({"name": name, "off": self.nparams, "shape": list(shape)})
        self.nparams += int(np.prod(shape))

    def buffer(self, L, name, shape):
        L["buffers"].append({"name": name, "off": self.nbuffers, "shape": list(shape)})
        self.nbuffers += int(np.prod(shape))

    def make(self, L, o):
        t, ins = L["type"], L["in"]
        c, h, w = ins[0]
        if t == "conv":
            f, k, stride, pad, dil, bias = _conv_opts(L, o, 3, 1, True)
            oh = _conv_out(h, w, k, stride, pad, dil)
            if oh is None:
                raise _LayerError("input (%d,%d,%d) is smaller than the kernel %d (dilation %d, "
                                  "pad %d)" % (c, h, w, k, dil, pad))
            L.update(filters=f, size=k, stride=stride, pad=pad, dilation=dil, bias=bias)
            L["out"] = [f, oh[0], oh[1]]
            self.param(L, "weight", (f, c, k, k))
            if bias:
                self.param(L, "bias", (f,))
        elif t == "deconv":
            f, k, stride, pad, _, bias = _conv_opts(L, o, 2, 2, False)
            oh, ow = (h - 1) * stride - 2 * pad + k, (w - 1) * stride - 2 * pad + k
            if oh < 1 or ow < 1 or oh > 1 << 24 or ow > 1 << 24:
                raise _LayerError("output size %dx%d from input (%d,%d,%d) is not valid"
                                  % (oh, ow, c, h, w))
            if _conv_out(oh, ow, k, stride, pad, 1) != (h, w):
                raise _LayerError("pad %d is too large for kernel %d" % (pad, k))
            L.update(filters=f, size=k, stride=stride, pad=pad, dilation=1, bias=bias)
            L["out"] = [f, oh, ow]
            self.param(L, "weight", (c, f, k, k))
            if bias:
                self.param(L, "bias", (f,))
        elif t == "dense":
            _one_input(L)
            out = o.int("output", 0, 1, 1 << 24)
            bias = o.int("bias", 1, 0, 1)
            o.act(L)
            if out == 0:
                raise _LayerError("output= is required")
            if c * h * w > 1 << 30:
                raise _LayerError("input (%d,%d,%d) is too large to flatten" % (c, h, w))
            L.update(output=out, bias=bias)
            L["out"] = [out, 1, 1]
            self.param(L, "weight", (out, c * h * w))
            if bias:
                self.param(L, "bias", (out,))
        elif t == "bn":
            _one_input(L)
            L["momentum"] = o.float("momentum", 0.1, 0.0, 1.0)
            L["eps"] = o.float("eps", 1e-5, 1e-12, 1.0)
            o.act(L)
            L["out"] = list(ins[0])
            self.param(L, "weight", (c,))
            self.param(L, "bias", (c,))
            self.buffer(L, "running_mean", (c,))
            self.buffer(L, "running_var", (c,))
        elif t in ("relu", "leaky"):
            _one_input(L)
            L["slope"] = o.float("slope", 0.01, 0.0, 1.0) if t == "leaky" else 0.0
            L["activation"] = t
            L["out"] = list(ins[0])
        elif t in ("maxpool", "avgpool"):
            _one_input(L)
            k = o.int("size", 2, 1, 1 << 10)
            stride = o.int("stride", k, 1, 1 << 10)
            pad = o.int("pad", 0, 0, k // 2)
            if h + 2 * pad < k or w + 2 * pad < k:
                raise _LayerError("input (%d,%d,%d) is smaller than the window %d (pad %d)"
                                  % (c, h, w, k, pad))
            L.update(size=k, stride=stride, pad=pad)
            L["out"] = [c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1]
        elif t == "gap":
            _one_input(L)
            L["out"] = [c, 1, 1]
        elif t == "upsample":
            m = o.str("mode", "nearest")
            _one_input(L)
            if m not in ("nearest", "bilinear"):
                raise _LayerError("mode '%s' is not nearest or bilinear" % m[:32])
            if h > 1 << 24 or w > 1 << 24:
                raise _LayerError("input (%d,%d,%d) is too large" % (c, h, w))
            L["mode"] = m
            L["out"] = [c, 2 * h, 2 * w]
        elif t in ("concat", "add"):
            if len(ins) < 2:
                raise _LayerError("needs at least two inputs in from=")
            for s in ins[1:]:
                if (t == "add" and s != ins[0]) or s[1:] != ins[0][1:]:
                    raise _LayerError("shapes (%d,%d,%d) and (%d,%d,%d) differ%s" % (
                        tuple(ins[0]) + tuple(s) + ("" if t == "add" else " in height or width",)))
            L["out"] = [sum(s[0] for s in ins) if t == "concat" else c, h, w]
        elif t == "dropout":
            _one_input(L)
            L["p"] = o.float("p", 0.5, 0.0, 0.999)
            L["out"] = list(ins[0])

    def layer_err(self, L, why):
        """net.c's layer_err: the layer after a reason's own PATH:LINE: prefix."""
        m = re.match(re.escape(self.path) + r":[0-9]*:? ?", why)
        if m:
            raise CfgError("%slayer '%s' (%s): %s" % (m.group(0), L["name"], L["type"],
                                                       why[m.end():]))
        raise CfgError("%s:%d: layer '%s' (%s): %s" % (self.path, L["line"], L["name"],
                                                        L["type"], why))


def _parse_from(layers, i, spec):
    if spec is None:
        return [i - 1]
    if len(spec) >= 512:
        raise _LayerError("from= is too long")
    out = []
    for t in (x.strip(" \t") for x in spec.split(",") if x):
        if len(out) == MAX_FROM:
            raise _LayerError("from= names more than %d inputs" % MAX_FROM)
        m = re.match(r"-[0-9]", t)
        if m:
            v = _parse_i64(t) if re.fullmatch(r"-[0-9]+", t) else None
            if v is None or v == 0 or i + v < -1:
                raise _LayerError("from=%s does not name a layer before this one" % t)
            out.append(i + v)
        elif t == "input":
            out.append(-1)
        else:
            src = next((k for k in range(i) if layers[k]["name"] == t), None)
            if src is None:
                raise _LayerError("from: no layer named '%s' before this one" % t[:64])
            out.append(src)
    if not out:
        raise _LayerError("from= names no layer")
    return out


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")


def build(text, path="<cfg>", overrides=(), in_shape=None, batch=1):
    """The model of a cfg text as model_dump's JSON (a dict): cdp_net_build
    with the caller's input shape (C, H, W; entries 0 or None keep the
    cfg's) and batch. Raises CfgError with the C builder's message."""
    secs = parse(text, path, overrides)
    net = _Opts(path, secs[0])
    c = net.int("channels", 0, 1, 1 << 20)
    h = net.int("in_h", 0, 1, 1 << 20)
    w = net.int("in_w", 0, 1, 1 << 20)
    classes = net.int("classes", 0, 1, 1 << 20)
    ignore = net.int("ignore", -1, -1, 1 << 30)
    shape = [c, h, w]
    for j, v in enumerate(in_shape or ()):
        if v:
            shape[j] = int(v)
    if not all(shape):
        raise CfgError("%s:%d: [net]: the input shape is unknown (set channels=, in_h=, in_w= or "
                       "pass them)" % (path, secs[0].line))
    loss = net.str("loss", "ce")
    if loss not in ("ce", "bce", "dice", "bce+dice"):
        raise CfgError("%s:%d: [net]: loss '%s' is not ce, bce, dice or bce+dice"
                       % (path, secs[0].line, loss[:32]))
    if len(secs) < 2:
        raise CfgError("%s: no layers after [net]" % path)
    b = _Builder(path)
    layers = []
    for i, s in enumerate(secs[1:]):
        L = {"index": i, "type": s.type, "name": "%s%d" % (s.type, i), "line": s.line,
             "params": [], "buffers": []}
        if s.type not in LAYER_TYPES:
            raise CfgError("%s:%d: unknown layer type [%s]" % (path, s.line, s.type[:64]))
        o = _Opts(path, s)
        try:
            try:
                name = o.str("name")
                if name is not None:
                    if len(name.encode()) >= LAYER_NAME or not _NAME.match(name) or \
                            name == "input":
                        raise _LayerError("bad name '%s' (a letter or _, then letters, digits, "
                                          "_ . -; at most %d; not 'input')"
                                          % (name[:64], LAYER_NAME - 1))
                    L["name"] = name
                prev = next((q for q in layers if q["name"] == L["name"]), None)
                if prev:
                    raise _LayerError("the name is already used at line %d" % prev["line"])
                L["from"] = _parse_from(layers, i, o.str("from"))
                L["in"] = [list(shape) if f < 0 else list(layers[f]["out"]) for f in L["from"]]
                b.make(L, o)
                if min(L["out"]) < 1:
                    raise _LayerError("empty output (%d,%d,%d)" % tuple(L["out"]))
                unused = next((kv for kv in s.kv if not kv[3]), None)
                if unused:
                    if unused[2] > 0:
                        raise _LayerError("%s:%d: unknown option '%s' in [%s]"
                                          % (path, unused[2], unused[0], s.type))
                    raise _LayerError("%s: unknown option '%s' in [%s] (override)"
                                      % (path, unused[0], s.type))
            except CfgError as e:           # an option's own "PATH:LINE: option ..."
                raise _LayerError(str(e))
        except _LayerError as e:
            b.layer_err(L, str(e))
        layers.append(L)
    head = layers[-1]
    ce = loss == "ce"
    want = (classes or head["out"][0]) if ce else 1
    if not ce and classes and classes != 2:
        raise CfgError("%s:%d: [net]: loss=%s is binary, classes=%d should be 2"
                       % (path, secs[0].line, loss, classes))
    if head["out"][0] != want:
        b.layer_err(head, "the output has %d channels, loss=%s needs %d"
                    % (head["out"][0], loss, want))
    if not classes:
        classes = head["out"][0] if ce else 2
    return {"cfg": path, "overrides": list(overrides), "batch": batch, "input": shape,
            "classes": classes, "loss": loss, "ignore": ignore, "nparams": b.nparams,
            "nbuffers": b.nbuffers, "out_layer": len(layers) - 1, "layers": layers}


def model_of(ckpt, batch=1):
    """The model of a checkpoint (cdpool.load_checkpoint()): its cfg text and
    overrides at its input shape, as cdp_ckpt_to_net() builds it."""
    return build(ckpt.cfg_text, "<checkpoint>", ckpt.overrides, ckpt.in_shape, batch)
