"""python3 -m cdpool import-torch STATE_DICT --model CFG[:K=V,...] -o INIT.cdpt:
an initial-weights checkpoint (cdp-checkpoint(5), META's kind 1) from a
PyTorch state dict, for cdp-train --init.

The state dict is read by torch.load (a .pth/.pt file): model.state_dict()
as saved, or a dict holding it under "state_dict" or "model"; a "module.",
"encoder." or "backbone." prefix of every key is taken off. The net is
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
does not use are listed (num_batches_tracked silently).

--in-channels N builds the net for N input bands and adapts the first
layer's weight (from the input, dimension 1 of 3) as timm's
adapt_input_conv does: N = 1 sums the RGB filters, any other N repeats
them to N channels and scales them by 3/N.
"""
import math
import os
import sys

import numpy as np

from .checkpoint import encode_initial
from .model import CKPT_SUFFIX, CfgError, build

PREFIXES = ("module.", "encoder.", "backbone.")


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
    """The state dict inside a checkpoint-like dict, its keys without a
    module./encoder./backbone. prefix (taken off while every key has it)."""
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
    return sd


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
    sd = unwrap(sd)
    arr = {}
    for k, v in sd.items():
        if hasattr(v, "detach"):
            v = v.detach().cpu().float().numpy()
        arr[k] = np.asarray(v)
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
    for k in arr:
        if k not in used and not k.endswith("num_batches_tracked"):
            note("unused tensor %s %s" % (k, shape_str(arr[k].shape)))
    for b in bad:
        note("encoder tensor %s" % b)
    if bad:
        raise ImportError_("%d of the net's encoder tensors not matched, nothing written"
                           % len(bad))
    return out["params"], out["buffers"], model


def _write(path, data):
    """data to path through a temporary beside it and a rename."""
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_state_dict(path):
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:                   # a torch without weights_only
        return torch.load(path, map_location="cpu")


def run(args, prog):
    """The import-torch command: 0, 1 on failure (message on stderr)."""
    def note(line):
        print("%s: import-torch: %s" % (prog, line), file=sys.stderr)

    cfg_path, overrides = split_model(args.model)
    try:
        with open(cfg_path, "rb") as f:
            cfg_text = f.read().decode("utf-8", "surrogateescape")
    except OSError as e:
        print("%s: cannot read '%s': %s" % (prog, cfg_path, e.strerror), file=sys.stderr)
        return 1
    try:
        sd = load_state_dict(args.state_dict)
    except Exception as e:                                  # torch raises many kinds
        print("%s: cannot read '%s': %s" % (prog, args.state_dict, str(e).splitlines()[0]
                                             if str(e) else type(e).__name__), file=sys.stderr)
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
    data = encode_initial(cfg_text, overrides, tuple(model["input"]), params, buffers)
    try:
        _write(args.output, data)
    except OSError as e:
        print("%s: cannot write '%s': %s" % (prog, args.output, e.strerror), file=sys.stderr)
        return 1
    note("%d of %d parameter tensors and %d of %d buffer tensors written to %s" % (
        len(params), sum(len(L["params"]) for L in model["layers"]), len(buffers),
        sum(len(L["buffers"]) for L in model["layers"]), args.output))
    return 0
