"""cdpool.model: the model cfg language of cdp-model(5) in Python, so that a
checkpoint's cfg text becomes a model without the C tools.

    build(text, path="<cfg>", overrides=(), in_shape=None, batch=1)
    model_of(ckpt)
    fit_checkpoint(ckpt, model)

give the dict that tests/engine/model_dump prints as JSON for the same cfg:
per layer its index, type, name, cfg line, from indices (-1 = the net
input), in/out shapes (C, H, W), hyper-parameters and the offsets and
PyTorch shapes of its parameters and buffers in the engine's blocks; and
"loss_opts", the [net] options of the loss, which model_dump does not
print. It is what cdpool.torch_model.EngineNet and loss_fn take.

cdpool.cfg expands and parses the text as engine/cfg/cfg.c does; this
module is the net builder of engine/net.c and engine/layers/*.c: [net]'s
input, classes, loss and ignore, each layer's options with their defaults
and ranges, from= resolution, shapes, the head check, unknown options. A
refused cfg raises CfgError with the C message ("PATH:LINE: reason").
"""
import math
import re

import numpy as np

import warnings

from .cfg import _DEC, _FLT, CfgError, CfgUnknownKey, _parse_i64, old_rule_warning, parse

MAX_FROM = 8
# the checkpoint's tensor name suffix of each engine tensor (checkpoint.h)
CKPT_SUFFIX = {"weight": "w", "bias": "b", "running_mean": "mean", "running_var": "var"}
LAYER_NAME = 64
LAYER_TYPES = ("conv", "deconv", "bn", "relu", "leaky", "maxpool", "avgpool", "gap",
               "upsample", "concat", "add", "dropout", "dense", "slice", "diff")


def float_str(x):
    """A float32 bound as cdp_float_str (lib/cdp_num.c) prints it: the fewest
    significant digits from 6 to 9 that read back as the float, the exponent
    without '+' or leading zeros (0.99999994, 1e6, 1e-30)."""
    for digits in range(6, 10):
        s = "%.*g" % (digits, x)
        if np.float32(float(s)) == np.float32(x):
            break
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", s)


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
        # compared as the float32 it is kept in (cdp_parse_float), so that a
        # bound accepts the decimal it was written as
        with np.errstate(over="ignore"):
            v32 = float(np.float32(v))
        if (math.isinf(v32) and not math.isinf(v)) or not lo <= v32 <= hi:
            self._fail(kv, "%s is outside [%s, %s]" % (s[:64], float_str(lo), float_str(hi)))
        return v32

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


MAX_LAYERS = 10000   # CDP_NET_MAX_LAYERS (engine/net.h): layers of a net at most


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
            if len(ins) > 2:
                raise _LayerError("takes one input and a size reference, from= names %d"
                                  % len(ins))
            if m not in ("nearest", "bilinear"):
                raise _LayerError("mode '%s' is not nearest or bilinear" % m[:32])
            L["mode"] = m
            if len(ins) == 2:
                if o.str("factor") is not None:
                    raise _LayerError("factor= and a size reference in from= exclude each other")
                if ins[1][1] < h or ins[1][2] < w:
                    raise _LayerError("the size reference (%d,%d,%d) is smaller than the input "
                                      "(%d,%d,%d)" % (tuple(ins[1]) + (c, h, w)))
                L["factor"] = 0
                L["out"] = [c, ins[1][1], ins[1][2]]
            else:
                f = o.int("factor", 2, 1, 64)
                if h > (1 << 24) // f or w > (1 << 24) // f:
                    raise _LayerError("input (%d,%d,%d) is too large" % (c, h, w))
                L["factor"] = f
                L["out"] = [c, f * h, f * w]
        elif t in ("concat", "add"):
            if len(ins) < 2:
                raise _LayerError("needs at least two inputs in from=")
            for s in ins[1:]:
                if (t == "add" and s != ins[0]) or s[1:] != ins[0][1:]:
                    raise _LayerError("shapes (%d,%d,%d) and (%d,%d,%d) differ%s" % (
                        tuple(ins[0]) + tuple(s) + ("" if t == "add" else " in height or width",)))
            L["out"] = [sum(s[0] for s in ins) if t == "concat" else c, h, w]
        elif t == "diff":
            if len(ins) != 2:
                raise _LayerError("needs two inputs in from=, not %d" % len(ins))
            if ins[1] != ins[0]:
                raise _LayerError("shapes (%d,%d,%d) and (%d,%d,%d) differ"
                                  % (tuple(ins[0]) + tuple(ins[1])))
            L["abs"] = o.int("abs", 0, 0, 1)
            L["out"] = list(ins[0])
        elif t == "dropout":
            _one_input(L)
            L["p"] = o.float("p", 0.5, 0.0, 0.999)
            L["out"] = list(ins[0])
        elif t == "slice":
            _one_input(L)
            start = o.int("start", 0, 0, c - 1)
            end = o.int("end", c, 1, c)
            if end <= start:
                raise _LayerError("end=%d must be above start=%d" % (end, start))
            L.update(start=start, end=end)
            L["out"] = [end - start, h, w]

    def share(self, layers, L, spec, np0, nb0):
        """net.c's share_weights: weights=spec, L's tensors the last declared
        (from np0, nb0) taken back for those of the layer it names."""
        src = next((q for q in layers if q["name"] == spec), None)
        if src is None:
            raise _LayerError("weights: no layer named '%s' before this one" % spec[:64])
        if "weights" in src:
            src = layers[src["weights"]]

        def lens(q, kind):
            return [int(np.prod(t["shape"])) for t in q[kind]]
        sl = [sum(lens(src, "params")[:1]), sum(lens(src, "params")[1:]), sum(lens(src, "buffers"))]
        ll = [sum(lens(L, "params")[:1]), sum(lens(L, "params")[1:]), sum(lens(L, "buffers"))]
        if src["type"] != L["type"] or sl != ll:
            raise _LayerError("weights=%s: '%s' is [%s] with %d+%d parameters, this layer [%s] "
                              "with %d+%d: the same type and shapes are needed"
                              % (spec[:64], src["name"], src["type"], sl[0], sl[1], L["type"],
                                 ll[0], ll[1]))
        if not any(sl):
            raise _LayerError("weights=%s: '%s' has no parameters to share"
                              % (spec[:64], src["name"]))
        self.nparams, self.nbuffers = np0, nb0
        L["params"], L["buffers"] = [], []
        L["weights"] = src["index"]

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


LOSS_TERMS = ("ce", "bce", "dice", "jaccard", "tversky", "focal", "lovasz")
REG_LOSSES = ("mse", "l1", "huber")    # regression: each alone, one channel a target


def _loss_terms(path, line, loss, classes):
    """loss= split into its terms as engine/loss.c cdp_loss_parse does"""
    terms = loss.split("+")
    for t in terms:
        if not t or len(t) >= 16:
            raise CfgError("%s:%d: [net]: loss '%s': want terms ce, bce, dice, jaccard, tversky, "
                           "focal or lovasz joined by '+', or one of mse, l1, huber"
                           % (path, line, loss[:32]))
        if t not in LOSS_TERMS + REG_LOSSES:
            raise CfgError("%s:%d: [net]: loss '%s': '%s' is not ce, bce, dice, jaccard, "
                           "tversky, focal, lovasz, mse, l1 or huber" % (path, line, loss[:32], t))
    if len(set(terms)) != len(terms):
        dup = next(t for t in terms if terms.count(t) > 1)
        raise CfgError("%s:%d: [net]: loss '%s': '%s' twice" % (path, line, loss[:32], dup))
    if len(terms) > 4:
        raise CfgError("%s:%d: [net]: loss '%s': more than 4 terms" % (path, line, loss[:32]))
    for t in terms:
        if t in REG_LOSSES and len(terms) > 1:
            raise CfgError("%s:%d: [net]: loss '%s': the regression loss %s stands alone"
                           % (path, line, loss[:32], t))
    if terms[0] in REG_LOSSES:
        return terms
    if "ce" in terms and "bce" in terms:
        raise CfgError("%s:%d: [net]: loss '%s': ce (softmax) and bce (sigmoid) do not mix"
                       % (path, line, loss[:32]))
    if "bce" in terms and classes > 2:
        raise CfgError("%s:%d: [net]: loss=%s is binary: classes must be 2, not %d"
                       % (path, line, loss[:32], classes))
    return terms


def _loss_softmax(path, line, loss, classes):
    """True for a softmax head over K channels, False for one sigmoid channel (loss.h)"""
    terms = _loss_terms(path, line, loss, classes)
    return "ce" in terms or ("bce" not in terms and classes > 2)


def _lr_mult(spec, name):
    """net.c's net_lr_mult: M of [net] lr_mult=PATTERN:M,...'s first glob
    matching name (items separated by ',' or ';'), else 1.0; a malformed
    list raises _LayerError."""
    import fnmatch
    for item in (re.split("[,;]", spec) if spec else []):
        if len(item.encode()) >= 160:
            raise _LayerError("[net] lr_mult=: item '%s...' is too long" % item[:40])
        pat, colon, m = item.rpartition(":")
        if not colon or not pat:
            raise _LayerError("[net] lr_mult=: '%s' is not PATTERN:M" % item)
        try:
            v = float(m)
        except ValueError:
            v = float("nan")
        if not v >= 0 or v > 1e6:
            raise _LayerError("[net] lr_mult=: '%s' is not a number in [0, 1e6]" % m)
        if fnmatch.fnmatchcase(name, pat):
            return v
    return 1.0


# [net]'s options of the loss (engine/loss.c cdp_loss_init_cfg) besides
# loss= and ignore=
LOSS_OPTS = ("loss_weights", "class_weights", "dice_smooth", "focal_gamma", "focal_alpha",
             "tversky_alpha", "tversky_beta", "label_smoothing", "huber_delta")


def build(text, path="<cfg>", overrides=(), in_shape=None, batch=1, old_rule=False):
    """The model of a cfg text as model_dump's JSON (a dict): cdp_net_build
    with the caller's input shape (C, H, W; entries 0 or None keep the
    cfg's) and batch, with "loss_opts": the [net] options of the loss
    (LOSS_OPTS given, as strings), which model_dump does not print and
    cdpool.torch_model.loss_fn() applies. Raises CfgError with the C
    builder's message; old_rule reads the cfg under the rule before [vars]
    (cdpool.cfg)."""
    secs = parse(text, path, overrides, old_rule)
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
    terms = _loss_terms(path, secs[0].line, loss, 0)
    # the other options of the loss, as written, for torch_model.loss_fn:
    # the model of a cfg then trains with the loss cdp-train would
    loss_opts = {k: net.str(k) for k in LOSS_OPTS if net.str(k) is not None}
    if len(secs) < 2:
        raise CfgError("%s: no layers after [net]" % path)
    if len(secs) - 1 > MAX_LAYERS:                  # CDP_NET_MAX_LAYERS
        raise CfgError("%s: %d layers, more than %d" % (path, len(secs) - 1, MAX_LAYERS))
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
                np0, nb0 = b.nparams, b.nbuffers
                b.make(L, o)
                if min(L["out"]) < 1:
                    raise _LayerError("empty output (%d,%d,%d)" % tuple(L["out"]))
                spec = o.str("weights")
                if spec is not None:
                    b.share(layers, L, spec, np0, nb0)
                o.float("lr_mult", _lr_mult(net.str("lr_mult"), L["name"]), 0.0, 1e6)
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
    reg = terms[0] in REG_LOSSES
    # loss=bce on as many channels as classes=: one sigmoid per class, a
    # multi-label head (net.c's check_head; the binary head is one channel)
    multi = list(terms) == ["bce"] and bool(classes) and head["out"][0] == classes
    if not multi and not classes:
        classes = head["out"][0] if "ce" in terms else 2 if "bce" in terms else \
            2 if head["out"][0] == 1 and not reg else head["out"][0]
    if not multi:
        # regression: classes counts the targets, one channel each
        softmax = reg or _loss_softmax(path, secs[0].line, loss, classes)
        if not softmax and classes != 2:
            raise CfgError("%s:%d: [net]: loss=%s is binary, classes=%d should be 2"
                           % (path, secs[0].line, loss, classes))
        want = classes if softmax else 1
        if head["out"][0] != want:
            b.layer_err(head, "the output has %d channels, loss=%s needs %d"
                        % (head["out"][0], loss, want))
    return {"cfg": path, "overrides": list(overrides), "batch": batch, "input": shape,
            "classes": classes, "loss": loss, "ignore": ignore, "nparams": b.nparams,
            "nbuffers": b.nbuffers, "out_layer": len(layers) - 1, "layers": layers,
            "multi": multi, "loss_opts": loss_opts}


def model_of(ckpt, batch=1):
    """The model of a checkpoint (cdpool.load_checkpoint()): its cfg text and
    overrides at its input shape, as cdp_ckpt_to_net() builds it (build()),
    its "loss_opts" those of the cfg, so that cdpool.torch_model.loss_fn()
    gives the loss cdp-train trained with. A cfg naming an unknown [net] key was
    written under the old rule, before [vars] (cdp-checkpoint(5)): it is
    read under it, with a warning, as cdp_net_build_ckpt() does."""
    try:
        return build(ckpt.cfg_text, "<checkpoint>", ckpt.overrides, ckpt.in_shape, batch)
    except CfgUnknownKey as e:
        net = parse(ckpt.cfg_text, "<checkpoint>", ckpt.overrides, old_rule=True)[0]
        warnings.warn(old_rule_warning(e, net.old_vars))
        return build(ckpt.cfg_text, "<checkpoint>", ckpt.overrides, ckpt.in_shape, batch,
                     old_rule=True)


def fit_checkpoint(ckpt, model):
    """What cdp_ckpt_to_net() refuses in loading ckpt into model (model_of
    (ckpt)): its message, "the checkpoint names 6 classes, the net has 5",
    or None when the tensors' names and shapes are the model's, in block
    order, and the class names no more than its classes (max(classes, 2):
    a sigmoid head gives classes 0 and 1)."""
    def shape(s):
        return "(%s)" % ",".join(map(str, s))

    for what, kind, tensors in (("parameter", "params", ckpt.params),
                                ("buffer", "buffers", ckpt.buffers)):
        want = [("%s.%s" % (L["name"], CKPT_SUFFIX.get(t["name"], "buf")), tuple(t["shape"]))
                for L in model["layers"] for t in L[kind]]
        got = [(k, tuple(v.shape)) for k, v in tensors.items()]
        if len(got) != len(want):
            return "the checkpoint has %d %s tensors, the net %d" % (len(got), what, len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                return "%s tensor %d: the checkpoint has '%s' %s, the net '%s' %s" % (
                    what, i + 1, g[0], shape(g[1]), w[0], shape(w[1]))
    classes = max(model["classes"], 2)
    if len(ckpt.class_names) > classes:
        return "the checkpoint names %d classes, the net has %d" % (len(ckpt.class_names),
                                                                    classes)
    return None
