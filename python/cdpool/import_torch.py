"""python3 -m cdpool import-torch STATE_DICT --model CFG[:K=V,...] -o INIT.cdpt:
an initial-weights checkpoint (cdp-checkpoint(5), META's kind 1) from a
PyTorch state dict, for cdp-train --init.

The state dict is read by torch.load (a .pth/.pt file): model.state_dict()
as saved, or a dict holding it under "state_dict" or "model"; a "module."
or "backbone." prefix of every key is taken off, then "encoder." of every
key that has it (an smp model's layout, unwrap()). The net is
built from the cfg (cdpool.model, as the C tools build it); each of its
tensors LAYER.w, .b, .mean, .var is looked up as LAYER.weight, .bias,
.running_mean, .running_var (torchvision's names, which the cfgs in
share/cdpool/models use), and taken when the shapes agree. The head is
the last layer with parameters (the output layer, or the conv before the
fpn and deeplabv3plus cfgs' closing [upsample]): a head tensor missing or
of another shape is left out
with a note (cdp-train --init initializes it), and so is a decoder tensor,
one of a layer named decoder.* (the unet-resnet cfgs' decoders); any other
(encoder) tensor missing or of another shape refuses the import. State dict tensors the net
does not use are listed (num_batches_tracked silently) when they are a head's
or a decoder's (LEFT_OUT); any other refuses the import, as torch's strict
load_state_dict would (a deeper model's state dict).

--in-channels N builds the net for N input bands and adapts the first
layer's weight (from the input, dimension 1 of 3) as timm's
adapt_input_conv does: N = 1 sums the RGB filters, any other N repeats
them to N channels and scales them by 3/N.

--input-norm imagenet|none|MEAN,..:STD,.. records the input normalization
the weights expect (the NORM chunk, cdp-checkpoint(5)): channel c is
(band value / S - MEAN[c]) / STD[c], imagenet being (0.485, 0.456, 0.406)
and (0.229, 0.224, 0.225) on 3 channels, none 0 and 1; one MEAN and STD
stand for every channel. S is --input-scale: a number, or dtype (the
default): the largest value of the training pool's data type (255 for u8,
65535 for u16, 1 for floats), resolved by cdp-train. --bands names the
bands the channels expect, in order (names or 1-based indices). The FROM
chunk records the state dict's file name and SHA-256.
"""
import hashlib
import math
import os
import re
import sys

import numpy as np

from . import out
from .checkpoint import BAND_NAME, encode_initial, load_checkpoint
from .model import CKPT_SUFFIX, CfgError, build

PREFIXES = ("module.", "backbone.")
ENCODER = "encoder."
# state dict tensors the net may leave unused: a classifier head (torchvision's
# and timm's fc, of any class count) and smp's decoder and heads, which a net
# without them (a ResNet classifier for smp's weights) has no place for
LEFT_OUT = ("fc.", "decoder.", "segmentation_head.", "classification_head.")


class ImportError_(Exception):
    pass


def split_model(spec):
    """CFG[:K=V,...] as cdp-train splits --model: the colon counts after the
    last '/' and when an '=' follows it."""
    base = spec.rfind("/") + 1
    c = spec.find(":", base)
    if c >= 0 and "=" in spec[c + 1:]:
        return spec[:c], [o for o in spec[c + 1:].split(",") if o]
    return spec, []


def unwrap(sd):
    """The state dict inside a checkpoint-like dict, its keys as the cfgs
    name the layers: a module. or backbone. prefix is taken off while every
    key has it (DDP's module., on top of any layout); then encoder. is taken
    off every key that has it, so an encoder's own state dict (every key
    encoder.*) and an smp model's (encoder.*, decoder.*, segmentation_head.*:
    the cfgs name the decoder and head as smp does) both fit."""
    for key in ("state_dict", "model"):
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
            break
    if not isinstance(sd, dict) or not sd:
        raise ImportError_("no state dict in it (a dict of tensors, or one under "
                           "'state_dict' or 'model', expected)")
    changed = True
    while changed:
        changed = False
        for p in PREFIXES:
            if all(k.startswith(p) for k in sd):
                sd = {k[len(p):]: v for k, v in sd.items()}
                changed = True
    enc = {k[len(ENCODER):]: v for k, v in sd.items() if k.startswith(ENCODER)}
    if enc and not any(k in enc for k in sd):
        sd = dict(enc, **{k: v for k, v in sd.items() if not k.startswith(ENCODER)})
    return sd


_ENGINE_KEY = re.compile(r"layers\.([0-9]+)\.(.+)")


def engine_names(sd, model):
    """A state dict of cdpool.torch_model.EngineNet (its modules are
    layers.N, N the layer's index in the cfg) with its keys named as the
    cfg names the layers ("layers.3.weight" -> "layer1.0.conv1.weight"),
    so that the package's own PyTorch twin of a model imports back; any
    other state dict as it is (also one that already uses the cfg's names).
    A layer that shares another's weights (weights=) is that layer's
    module in EngineNet, so PyTorch lists the tensors under both indices:
    the sharing layer's copies are left out when they equal the owner's,
    ImportError_ when they differ (no state dict of this net)."""
    layers = {L["index"]: L for L in model["layers"]}
    wanted = {"%s.%s" % (L["name"], t["name"]) for L in model["layers"]
              for kind in ("params", "buffers") for t in L[kind]}
    if any(k in wanted for k in sd):
        return sd
    got, shared = {}, []
    for k, v in sd.items():
        m = _ENGINE_KEY.fullmatch(k)
        if not m or int(m.group(1)) not in layers:
            return sd
        L = layers[int(m.group(1))]
        if "weights" in L:
            shared.append((k, L, m.group(2), v))
        else:
            got["%s.%s" % (L["name"], m.group(2))] = v
    for k, L, t, v in shared:
        src = layers[L["weights"]]
        own = "%s.%s" % (src["name"], t)
        if own not in got:
            got[own] = v
        elif not _same_tensor(got[own], v):
            raise ImportError_("%s (layer '%s', which shares the weights of '%s') differs from "
                               "layers.%d.%s, its owner's: not a state dict of this net's shared "
                               "weights, nothing written" % (k, L["name"], src["name"],
                                                             src["index"], t))
    return got


def _array(v):
    """A state dict's tensor (torch or numpy) as a numpy array, float32 for torch."""
    if hasattr(v, "detach"):
        v = v.detach().cpu().float().numpy()
    return np.asarray(v)


def _same_tensor(a, b):
    a, b = _array(a), _array(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def adapt_input_conv(w, n):
    """timm.models.helpers.adapt_input_conv on a float32 (F, 3, K, K)."""
    if n == 1:
        return w.sum(axis=1, keepdims=True)
    if w.shape[1] != 3:
        raise ImportError_("--in-channels adapts 3-channel (RGB) filters, the first layer's "
                           "have %d" % w.shape[1])
    rep = int(math.ceil(n / 3))
    return (np.tile(w, (1, rep, 1, 1))[:, :n] * (3.0 / float(n))).astype(np.float32)


def shape_str(s):
    return "(%s)" % ",".join(map(str, s))


def import_state_dict(sd, cfg_text, cfg_path, overrides, in_channels=None, note=print):
    """(params, buffers, model): the net's tensors taken from sd (name ->
    numpy array or torch tensor) in block order; note(line) for each
    unused, missing or left out tensor. Raises ImportError_ when an encoder
    tensor is missing or of another shape."""
    model = build(cfg_text, cfg_path, overrides, (in_channels or 0, 0, 0))
    sd = engine_names(unwrap(sd), model)
    arr = {k: _array(v) for k, v in sd.items()}
    used, bad = set(), []
    out = {"params": {}, "buffers": {}}
    head = max((L["index"] for L in model["layers"] if L["params"]), default=-1)
    first = {L["index"] for L in model["layers"] if -1 in L["from"]}
    for L in model["layers"]:
        for kind in ("params", "buffers"):
            for t in L[kind]:
                name = "%s.%s" % (L["name"], CKPT_SUFFIX.get(t["name"], "buf"))
                key = "%s.%s" % (L["name"], t["name"])
                want = tuple(t["shape"])
                v = arr.get(key)
                if v is not None:
                    used.add(key)
                    if (in_channels and L["index"] in first and t["name"] == "weight"
                            and v.ndim == 4 and tuple(v.shape) != want):
                        v = adapt_input_conv(v.astype(np.float32), in_channels)
                        note("%s: adapted from %d to %d input channels" % (key, arr[key].shape[1],
                                                                          in_channels))
                if v is not None and tuple(v.shape) == want:
                    out[kind][name] = np.ascontiguousarray(v, dtype=np.float32)
                    continue
                why = "missing" if v is None else "%s in the state dict, the net has %s" % (
                    shape_str(v.shape), shape_str(want))
                if L["index"] == head:
                    note("head tensor %s: %s: left out (cdp-train --init initializes it)"
                         % (key, why))
                elif L["name"].startswith("decoder."):
                    note("decoder tensor %s: %s: left out (cdp-train --init initializes it)"
                         % (key, why))
                else:
                    bad.append("%s: %s" % (key, why))
    extra = []
    for k in arr:
        if k in used or k.endswith("num_batches_tracked"):
            continue
        if k.startswith(LEFT_OUT):
            note("unused tensor %s %s" % (k, shape_str(arr[k].shape)))
        else:
            extra.append("%s %s" % (k, shape_str(arr[k].shape)))
    # as torch's load_state_dict(strict=True): an encoder tensor the net has
    # no place for is a state dict of another model (resnet34's for resnet18)
    why = ("%d state dict tensor%s the net has no place for (%s%s): a state dict of "
           "another model" % (len(extra), "s" if len(extra) > 1 else "", ", ".join(extra[:3]),
                              ", ..." if len(extra) > 3 else "")) if extra else None
    for b in bad:
        note("encoder tensor %s" % b)
    if bad:
        if why:
            note(why)
        raise ImportError_("%d of the net's encoder tensors not matched, nothing written"
                           % len(bad))
    if why:
        raise ImportError_(why + ", nothing written")
    return out["params"], out["buffers"], model


IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


# a decimal number as the C parsers take one: no blanks, no underscores
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _number(text):
    """text as a finite float when it is a plain decimal number, else None."""
    if not _NUMBER.fullmatch(text):
        return None
    v = float(text)
    return v if math.isfinite(v) else None


def _floats(text, what):
    v = [_number(x) for x in text.split(",")]
    if not v or None in v:
        raise ImportError_("--input-norm: %s '%s' is not a list of numbers" % (what, text))
    return v


def option_error(args):
    """What is wrong with import-torch's options on their own (a usage
    error, exit 2, before anything is read), or None. What depends on the
    net (the channel count) is checked by input_norm()."""
    spec, scale, bands = args.input_norm, args.input_scale, args.bands
    if spec is None:
        for opt, v in (("--input-scale", scale), ("--bands", bands)):
            if v is not None:
                return "%s: describes an --input-norm, and none is given" % opt
        return None
    if spec not in ("imagenet", "none"):
        if spec.count(":") != 1:
            return "--input-norm: '%s' is not imagenet, none or MEAN,..:STD,.." % spec
        try:
            m, sd = spec.split(":")
            _floats(m, "MEAN")
            std = _floats(sd, "STD")
        except ImportError_ as e:
            return str(e)
        if min(std) <= 0:
            return "--input-norm: a deviation of %g (> 0 expected)" % min(std)
    if scale is not None and scale != "dtype":
        v = _number(scale)
        if v is None or v <= 0:
            return "--input-scale: '%s' is not dtype or a number > 0" % scale
    if bands is not None:
        bad = [b for b in bands.split(",") if not BAND_NAME.fullmatch(b.encode())]
        if bad:
            return ("--bands: '%s' is not a band name (1 to 255 printable characters, no space)"
                    % bad[0])
    return None


def input_norm(spec, scale, bands, channels):
    """The NORM chunk's dict (checkpoint.encode_norm's arguments) for
    --input-norm spec, --input-scale scale ("dtype" or a number > 0) and
    --bands (a comma list or None) on a net of `channels` inputs, or None
    without --input-norm. Raises ImportError_ with a one-line reason."""
    if spec is None:
        if scale is not None or bands is not None:
            raise ImportError_("--input-scale and --bands describe an --input-norm: give one")
        return None
    if spec == "imagenet":
        kind, mean, std = "imagenet", list(IMAGENET[0]), list(IMAGENET[1])
        if channels != 3:
            raise ImportError_("--input-norm imagenet is for 3 bands (RGB), the net has %d "
                               "(give MEAN,..:STD,.. for %d)" % (channels, channels))
    elif spec == "none":
        kind, mean, std = "none", [0.0] * channels, [1.0] * channels
    else:
        if spec.count(":") != 1:
            raise ImportError_("--input-norm '%s' is not imagenet, none or MEAN,..:STD,.."
                               % spec)
        m, sd = spec.split(":")
        kind, mean, std = "given", _floats(m, "MEAN"), _floats(sd, "STD")
        for what, v in (("means", mean), ("deviations", std)):
            if len(v) not in (1, channels):
                raise ImportError_("--input-norm: %d %s for a net of %d bands (1 or %d "
                                   "expected)" % (len(v), what, channels, channels))
        mean = mean * channels if len(mean) == 1 else mean
        std = std * channels if len(std) == 1 else std
        if min(std) <= 0:
            raise ImportError_("--input-norm: a deviation of %g (> 0 expected)" % min(std))
    if scale is None or scale == "dtype":
        s = 0.0
    else:
        s = _number(scale)
        if s is None or s <= 0:
            raise ImportError_("--input-scale '%s' is not dtype or a number > 0" % scale)
    names = []
    if bands is not None:
        names = bands.split(",")
        bad = [b for b in names if not BAND_NAME.fullmatch(b.encode())]
        if bad:
            raise ImportError_("--bands: '%s' is not a band name (1 to 255 printable "
                               "characters, no space)" % bad[0])
        if len(names) != channels:
            raise ImportError_("--bands names %d bands, the net has %d" % (len(names),
                                                                          channels))
    return dict(kind=kind, scale=s, mean=mean, std=std, bands=names)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_state_dict(path):
    """torch.load(path) with weights_only=True (a pickle runs no code): a
    state dict, or a training checkpoint holding one. torchvision's
    reference train.py saves its argparse.Namespace beside the weights
    ({"model": ..., "args": Namespace, ...}); torch 2.4 and later let that
    class through (torch.serialization's safe globals), an older torch
    refuses it (load_refusal gives the one-liner that extracts the state
    dict)."""
    import argparse
    import contextlib
    import torch
    ser = torch.serialization
    allow = contextlib.nullcontext()
    if hasattr(ser, "safe_globals"):
        allow = ser.safe_globals([argparse.Namespace])
    elif hasattr(ser, "add_safe_globals"):
        ser.add_safe_globals([argparse.Namespace])
    with allow:
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except TypeError as e:          # a torch without weights_only (before 1.13)
            if "weights_only" not in str(e):
                raise
            raise RuntimeError("torch %s cannot load a file without running the code it "
                               "pickles (weights_only needs torch 1.13 or later)"
                               % torch.__version__) from None


ZIP = b"PK\x03\x04"                    # torch.save's format since torch 1.6
PICKLE = b"\x80"                       # a pickle (torch.save's legacy format)


def load_refusal(e, path):
    """One line for what torch.load raised on a file it could open. What it
    raises says little (KeyError(101) for a text file, OSError(EINVAL) for a
    zip cut short, a "weights only" refusal of many lines with terminal
    escapes and advice to load with weights_only=False, for any pickle that
    holds more than tensors, even for text), so the file's first bytes say
    which kind of file it is first."""
    import zipfile
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        whole = not head.startswith(ZIP) or zipfile.is_zipfile(path)
    except OSError as err:
        return err.strerror or str(err)
    if not head.startswith((ZIP, PICKLE)):
        return "not a PyTorch checkpoint (neither torch.save's zip archive nor a pickle)"
    if not whole or isinstance(e, (OSError, EOFError)):
        return "truncated or damaged: %s cannot be read (%s%s)" % (
            "its zip archive" if head.startswith(ZIP) else "its pickle", type(e).__name__,
            ": " + e.strerror if isinstance(e, OSError) and e.strerror else "")
    text = str(e)
    if "weights only" in text.lower():
        cls = re.search(r"Unsupported (?:class|global: GLOBAL) ([\w.]+)", text)
        cls = cls.group(1) if cls else None
        if cls == "argparse.Namespace":
            import torch
            # torchvision's train.py: {"model": state dict, "args": Namespace, ...}
            return ("a training checkpoint that pickles argparse.Namespace besides its weights "
                    "(torchvision's train.py), which torch %s does not load safely (torch 2.4 "
                    "and later do): if you trust the file, extract its state dict with python3 "
                    "-c 'import torch; torch.save(torch.load(\"%s\", weights_only=False)"
                    "[\"model\"], \"%s\")' and import that"
                    % (torch.__version__, path, _model_name(path)))
        if cls and not cls.startswith(("torch.nn.", "torchvision.", "timm.",
                                       "segmentation_models_pytorch.")):
            return ("it pickles %s besides tensors, which torch.load(weights_only=True) does "
                    "not load: save the state dict alone (model.state_dict())" % cls)
        return "a pickled model, not a state dict: save model.state_dict()%s" % (
            " (it pickles %s, which torch.load(weights_only=True) does not load)"
            % cls if cls else "")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip().splitlines()
    return "not a PyTorch checkpoint (%s%s)" % (type(e).__name__, ": " + text[0] if text else "")


def _model_name(path):
    """Where the extracting one-liner puts a checkpoint's state dict:
    "x.pth" -> "x-model.pth" beside it."""
    base, ext = os.path.splitext(path)
    return base + "-model" + (ext or ".pth")


def _initial(path):
    """True when path is an initial-weights checkpoint (this command's own
    output, which it may replace); a run's checkpoint is cdp-train's, and a
    folder (load_checkpoint reads a run folder's checkpoint) is none."""
    if os.path.isdir(path):
        return False
    try:
        return bool(load_checkpoint(path, finite=False).initial)
    except Exception:
        return False


def run(args, prog):
    """The import-torch command: 0, 1 on failure (message on stderr)."""
    def note(line):
        print("%s: import-torch: %s" % (prog, line), file=sys.stderr)

    why = option_error(args)
    if why:
        print("%s: %s" % (prog, why), file=sys.stderr)
        return 2
    cfg_path, overrides = split_model(args.model)
    # the output policy of the C tools (cdpool(7), OUTPUTS), before anything
    # is read: never over an input, a pool's file, a run's checkpoint, a
    # FIFO or a device
    try:
        out.check(args.output, [(args.state_dict, "the state dict '%s'" % args.state_dict),
                                (cfg_path, "the model cfg '%s'" % cfg_path)], _initial)
    except out.OutputError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    try:
        with open(cfg_path, "rb") as f:
            cfg_text = f.read().decode("utf-8", "surrogateescape")
    except OSError as e:
        print("%s: cannot read '%s': %s" % (prog, cfg_path, e.strerror), file=sys.stderr)
        return 1
    try:
        with open(args.state_dict, "rb"):
            pass
    except OSError as e:
        print("%s: cannot read '%s': %s" % (prog, args.state_dict, e.strerror or e),
              file=sys.stderr)
        return 1
    try:
        sd = load_state_dict(args.state_dict)
    except Exception as e:                                  # torch raises many kinds
        print("%s: cannot read '%s': %s" % (prog, args.state_dict,
                                              load_refusal(e, args.state_dict)), file=sys.stderr)
        return 1
    try:
        params, buffers, model = import_state_dict(sd, cfg_text, cfg_path, overrides,
                                                   args.in_channels, note)
    except CfgError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    except ImportError_ as e:
        print("%s: cannot import '%s': %s" % (prog, args.state_dict, e), file=sys.stderr)
        return 1
    try:
        norm = input_norm(args.input_norm, args.input_scale, args.bands, model["input"][0])
        sha = sha256_file(args.state_dict)
    except ImportError_ as e:
        print("%s: cannot import '%s': %s" % (prog, args.state_dict, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: cannot read '%s': %s" % (prog, args.state_dict, e.strerror), file=sys.stderr)
        return 1
    data = encode_initial(cfg_text, overrides, tuple(model["input"]), params, buffers, norm,
                          [("state dict", args.state_dict, sha)])
    try:
        out.write(args.output, data, [(args.state_dict, "the state dict '%s'" % args.state_dict),
                                      (cfg_path, "the model cfg '%s'" % cfg_path)], _initial)
    except out.OutputError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    note("%d of %d parameter tensors and %d of %d buffer tensors written to %s" % (
        len(params), sum(len(L["params"]) for L in model["layers"]), len(buffers),
        sum(len(L["buffers"]) for L in model["layers"]), args.output))
    return 0
