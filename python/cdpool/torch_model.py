"""cdpool.torch_model: the PyTorch twin of a cdpool model, built from the
model of a cfg: cdpool.model.build()'s dict, the JSON that
tests/engine/model_dump prints.

EngineNet(model) holds one torch module per engine layer, in layer order,
so model.parameters() yields the tensors in the order of the engine's
parameter block (net.h: layer order, weight then bias / gamma then beta).
load_blocks() copies the engine's params and buffers blocks (float32 numpy
arrays, offsets from the JSON) into it; param_block() reads them back in
block order. Layer semantics follow engine/backend.h:

  conv      Conv2d (weight (F,C,K,K))      deconv   ConvTranspose2d (C,F,K,K)
  bn        BatchNorm2d(eps, momentum)     dense    Linear on the flattened
  maxpool   MaxPool2d                                input, output (N,OUT,1,1)
  avgpool   AvgPool2d(count_include_pad)   gap      AdaptiveAvgPool2d(1)
  upsample  interpolate by factor= or to a reference's size (nearest, or
            bilinear with align_corners=False; a (1,1) map broadcast)
  concat    cat(dim=1)                     add      sum of the inputs
  slice     x[:, start:end]
  diff      a - b, or (a - b).abs() with abs=1 (ONNX Sub, Abs)
  weights=  a layer with "weights": SRC is SRC's module itself, called again
            (its parameters and batchnorm statistics shared, their gradients
            summed over both calls; parameters() yields them once)
  relu, leaky and the fused activation= of conv/deconv/bn/dense
  dropout   Dropout(p), or with dropout_seeds the engine's own mask
            (backend.h cdp_dropout_keep: a SplitMix64 hash of seed and element
            index), so a training step can be compared exactly.

loss_fn() is the engine's loss (loss.h) in PyTorch terms, cdp-train's for the
model (the options of its cfg in model["loss_opts"], from cdpool.model.build()
or model_of(); PoolDataset's ignored label, ignore=ds.ignore, skipped).
to_torch() builds the EngineNet of a cdp-train checkpoint
(cdpool.load_checkpoint()) from the cfg it holds (cdpool.model reads the cfg
language) and loads its tensors. Deployed wraps it for raw band values (the
standardization inside, probabilities, or a regression net's values, out)
and export_onnx() writes that as ONNX.

Run as a program it is the PyTorch side of bench/engine.sh: it times
training steps (forward, loss, backward, SGD step) and prints one JSON line.
    python3 -m cdpool.torch_model bench MODEL.json [--threads T] [--steps S]
                           [--warmup W] [--channels-last]
"""
import argparse
import inspect
import io
import json
import re
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import fit_checkpoint, model_of

M64 = (1 << 64) - 1


def dropout_keep(seed, n, p):
    """cdp_dropout_keep over element indices 0..n-1: bool array (n)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) ^ (np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return u >= np.float32(p)


def _act(x, name, slope):
    if name == "relu":
        return F.relu(x)
    if name == "leaky":
        return F.leaky_relu(x, slope)
    return x


def _upsample(xs, L):
    """[upsample]: F.interpolate by L["factor"], or to the size of xs[1]
    (factor 0); a (1,1) map is broadcast (expand: what bilinear and nearest
    give there, and an ONNX Expand that follows the reference's size)."""
    x = xs[0]
    if L["factor"] == 0 and list(L["in"][0][1:]) == [1, 1]:
        return x.expand(-1, -1, xs[1].shape[2], xs[1].shape[3])
    how = dict(size=tuple(xs[1].shape[2:])) if L["factor"] == 0 else \
        dict(scale_factor=L["factor"])
    if L["mode"] == "bilinear":
        return F.interpolate(x, mode="bilinear", align_corners=False, **how)
    return F.interpolate(x, mode="nearest", **how)


class EngineNet(nn.Module):
    def __init__(self, model, dropout_seeds=None):
        super().__init__()
        self.model = model
        self.dropout_seeds = {int(k): int(v) for k, v in (dropout_seeds or {}).items()}
        mods = []
        for L in model["layers"]:
            t, cin = L["type"], L["in"][0][0]
            if "weights" in L:
                m = mods[L["weights"]]
            elif t == "conv":
                m = nn.Conv2d(cin, L["filters"], L["size"], L["stride"], L["pad"],
                              L["dilation"], bias=bool(L["bias"]))
            elif t == "deconv":
                m = nn.ConvTranspose2d(cin, L["filters"], L["size"], L["stride"], L["pad"],
                                       bias=bool(L["bias"]))
            elif t == "bn":
                m = nn.BatchNorm2d(cin, eps=L["eps"], momentum=L["momentum"])
            elif t == "dense":
                c, h, w = L["in"][0]
                m = nn.Linear(c * h * w, L["output"], bias=bool(L["bias"]))
            elif t == "maxpool":
                m = nn.MaxPool2d(L["size"], L["stride"], L["pad"])
            elif t == "avgpool":
                m = nn.AvgPool2d(L["size"], L["stride"], L["pad"], count_include_pad=True)
            elif t == "gap":
                m = nn.AdaptiveAvgPool2d(1)
            elif t == "dropout":
                m = nn.Dropout(L["p"])
            elif t in ("relu", "leaky", "upsample", "concat", "add", "slice", "diff"):
                m = nn.Identity()
            else:
                raise ValueError("layer %d: unknown type %r" % (L["index"], t))
            mods.append(m)
        self.layers = nn.ModuleList(mods)
        self._check_order()

    def _check_order(self):
        """named_parameters() order must be the block order (net.h)."""
        offs = [(p["off"], p["shape"]) for L in self.model["layers"] for p in L["params"]]
        mine = list(self.parameters())
        if len(offs) != len(mine):
            raise ValueError("%d parameter tensors, the JSON lists %d" % (len(mine), len(offs)))
        at = 0
        for (off, shape), p in zip(offs, mine):
            if off != at or list(p.shape) != list(shape):
                raise ValueError("parameter at %d %s: block order has %d %s"
                                 % (at, list(p.shape), off, shape))
            at += p.numel()
        if at != self.model["nparams"]:
            raise ValueError("%d parameters, the JSON says %d" % (at, self.model["nparams"]))

    def forward(self, x):
        outs = []
        for L, m in zip(self.model["layers"], self.layers):
            xs = [x if f < 0 else outs[f] for f in L["from"]]
            t = L["type"]
            if t == "concat":
                y = torch.cat(xs, dim=1)
            elif t == "add":
                y = xs[0]
                for z in xs[1:]:
                    y = y + z
            elif t == "upsample":
                y = _upsample(xs, L)
            elif t == "slice":
                y = xs[0][:, L["start"]:L["end"]]
            elif t == "diff":
                y = xs[0] - xs[1]
                if L["abs"]:
                    y = y.abs()
            elif t == "relu":
                y = F.relu(xs[0])
            elif t == "leaky":
                y = F.leaky_relu(xs[0], L["slope"])
            elif t == "dense":
                y = m(xs[0].flatten(1)).reshape(xs[0].shape[0], -1, 1, 1)
            elif t == "dropout" and self.training and L["index"] in self.dropout_seeds:
                keep = dropout_keep(self.dropout_seeds[L["index"]], xs[0].numel(), L["p"])
                mask = torch.from_numpy(keep.reshape(tuple(xs[0].shape))).to(xs[0].dtype)
                y = xs[0] * mask * (1.0 / (1.0 - np.float32(L["p"])))
            else:
                y = m(xs[0])
            if "activation" in L and t not in ("relu", "leaky"):
                y = _act(y, L["activation"], L["slope"])
            outs.append(y)
        return outs[self.model["out_layer"]]

    def bn_modules(self):
        return [(L, m) for L, m in zip(self.model["layers"], self.layers)
                if L["type"] == "bn" and "weights" not in L]

    @torch.no_grad()
    def load_blocks(self, params, buffers=None):
        """Copy the engine's blocks (flat numpy arrays) into the modules."""
        for p, t in zip(self.parameters(), self._param_specs()):
            p.copy_(torch.from_numpy(params[t["off"]:t["off"] + p.numel()].reshape(p.shape)))
        if buffers is not None:
            for L, m in self.bn_modules():
                for b in L["buffers"]:
                    dst = getattr(m, b["name"])
                    dst.copy_(torch.from_numpy(buffers[b["off"]:b["off"] + dst.numel()]))

    def _param_specs(self):
        return [p for L in self.model["layers"] for p in L["params"]]

    def param_block(self):
        """The parameters as one float64 numpy block in engine order."""
        return np.concatenate([p.detach().double().reshape(-1).numpy() for p in self.parameters()])

    def tensor_names(self):
        """(name, offset, size) of every parameter tensor, block order."""
        out = []
        for L in self.model["layers"]:
            for p in L["params"]:
                out.append(("%s.%s" % (L["name"], p["name"]), p["off"], int(np.prod(p["shape"]))))
        return out


LOSS_EPS = 1e-7


def _f32(v):
    """a cfg number as the engine holds it (float)"""
    return float(np.float32(v))


def _floats(v):
    if v is None or torch.is_tensor(v) or isinstance(v, (list, tuple)):
        return v
    # commas or semicolons, as the engine (an override cannot hold a comma)
    return [_f32(x) for x in re.split("[,;]", str(v))]


def _loss_term(kind, z, y, valid, o):
    """one term of loss.h on logits z (N,k,HW), labels y (N,HW), valid (N,HW)"""
    n, k = z.shape[0], z.shape[1]
    dt = z.dtype
    p = torch.sigmoid(z) if k == 1 else torch.softmax(z, dim=1)
    if kind == "ce":
        w = o.get("class_weights")
        if w is not None and not torch.is_tensor(w):
            w = torch.tensor(_floats(w), dtype=dt)
        if not valid.any():
            return z.sum() * 0
        return F.cross_entropy(z, torch.where(valid, y, torch.full_like(y, -100)), weight=w,
                               ignore_index=-100,
                               label_smoothing=_f32(o.get("label_smoothing", 0)))
    if kind == "bce":
        m = valid.to(dt)
        if not valid.any():
            return z.sum() * 0
        l = F.binary_cross_entropy_with_logits(z[:, 0], (y != 0).to(dt), reduction="none")
        return (l * m).sum() / m.sum()
    if kind == "focal":
        g = _f32(o.get("focal_gamma", 2))
        al = _floats(o.get("focal_alpha"))
        yc = torch.where(valid, y, torch.zeros_like(y))
        if k == 1:
            pos = yc != 0
            logpt = torch.where(pos, F.logsigmoid(z[:, 0]), F.logsigmoid(-z[:, 0]))
            a = torch.ones_like(logpt) if al is None else \
                torch.where(pos, al[0], 1 - al[0]).to(dt) if len(al) == 1 else \
                torch.tensor(al, dtype=dt)[pos.long()]
        else:
            logpt = F.log_softmax(z, dim=1).gather(1, yc.unsqueeze(1))[:, 0]
            a = torch.ones_like(logpt) if al is None else \
                torch.full_like(logpt, al[0]) if len(al) == 1 else torch.tensor(al, dtype=dt)[yc]
        if not valid.any():
            return z.sum() * 0
        l = -a * (1 - logpt.exp()) ** g * logpt
        return (l * valid).sum() / valid.sum()
    if kind in ("dice", "jaccard", "tversky"):
        # smp's soft scores over the batch, per class
        s = _f32(o.get("dice_smooth", 1))
        if k == 1:
            t = ((y != 0) & valid).to(dt).unsqueeze(1)
        else:
            t = F.one_hot(torch.where(valid, y, torch.zeros_like(y)), k).permute(0, 2, 1).to(dt)
            t = t * valid.unsqueeze(1)
        pm = p * valid.unsqueeze(1)
        inter = (pm * t).sum(dim=(0, 2))
        card = (pm + t).sum(dim=(0, 2))
        if kind == "dice":
            score = (2 * inter + s) / (card + s).clamp_min(LOSS_EPS)
        elif kind == "jaccard":
            score = (inter + s) / (card - inter + s).clamp_min(LOSS_EPS)
        else:
            a, b = _f32(o.get("tversky_alpha", 0.5)), _f32(o.get("tversky_beta", 0.5))
            fp = (pm * (1 - t)).sum(dim=(0, 2))
            fn = ((1 - pm) * t).sum(dim=(0, 2))
            score = (inter + s) / (inter + a * fp + b * fn + s).clamp_min(LOSS_EPS)
        loss = 1 - score
        if k > 1:
            loss = loss * (t.sum(dim=(0, 2)) > 0).to(dt)
        return loss.mean()
    if kind == "lovasz":
        # Berman's lovasz_softmax(per_image=True, classes='present'); one
        # channel: the class label != 0 only (classes=[1])
        total = z.sum() * 0
        for i in range(n):
            v = valid[i]
            losses = []
            for c in ([1] if k == 1 else range(k)):
                fg = ((y[i][v] != 0) if k == 1 else (y[i][v] == c)).to(dt)
                if k > 1 and fg.sum() == 0:
                    continue
                err = (fg - p[i, 0 if k == 1 else c][v]).abs()
                es, perm = torch.sort(err, descending=True)
                fs = fg[perm]
                gts = fs.sum()
                jac = 1 - (gts - fs.cumsum(0)) / (gts + (1 - fs).cumsum(0))
                if len(fs) > 1:
                    jac[1:] = jac[1:] - jac[:-1].clone()
                losses.append(torch.dot(es, jac))
            if losses:
                total = total + sum(losses) / len(losses)
        return total / n
    raise ValueError("unknown loss term '%s'" % kind)


# loss_fn's ignore= by default: cdp-tile's ignore value of u8 labels; u16
# labels have 65535, and cdp-tile --ignore sets another (cdp-tile(1))
POOL_IGNORE = 255


def _reg_loss(kind, z, t, o):
    """loss.h's regression terms: predictions z and float targets t, NaN
    where there is no target (not counted), the mean over counted values"""
    v = ~torch.isnan(t)
    if not v.any():
        return z.sum() * 0
    d = z[v] - t[v]
    if kind == "mse":
        return (d * d).mean()
    if kind == "l1":
        return d.abs().mean()
    return F.huber_loss(z[v], t[v], delta=_f32(o.get("huber_delta", 1)))


def loss_fn(model, logits, labels, smooth=1.0, class_w=None, opts=None, ignore=None):
    """The engine's loss (loss.h), cdp-train's for the model, on logits
    (N,k,H,W) (or (N,k,HW)) and labels: int class labels (N,H*W) (or
    (N,H,W)); a multi-label head's (model["multi"]) multi-hot (N,K); a
    regression loss's float targets (N,T,H,W), NaN where there is none.
    model["loss"] (TERM[+TERM...] or one of mse, l1, huber) and
    model["ignore"]; the loss options are model["loss_opts"] (model_of()
    carries a checkpoint's cfg's) updated by opts: the [net] keys
    (loss_weights, class_weights, label_smoothing, dice_smooth, focal_gamma,
    focal_alpha, tversky_alpha, tversky_beta, huber_delta; strings as in
    the cfg or numbers), dice_smooth defaulting to smooth and class_weights
    to class_w; a multi-label head's class_weights are its positive weights
    (BCEWithLogitsLoss(pos_weight=)).

    ignore is the label the data gives ignored pixels: PoolDataset's
    ds.ignore (the pool's ignore value, the model's ignore= where the
    dataset was made with it, -1 for a scalar-class pool), or -1 where no
    label is ignored. The loss skips it, and with model["ignore"] = V >= 0
    also V, as cdp-train, whose loader gives the pool's ignored pixels V,
    does. Left None it is POOL_IGNORE, 255, cdp-tile's ignore value of u8
    labels only (u16 labels have 65535, cdp-tile --ignore sets another), so
    then every label the loss counts must be a class of the head (0 to
    K-1, 0 or 1 for one channel): any other raises ValueError asking for
    ignore=, rather than count the pool's ignored pixels (a binary head
    would take them for its class 1). A class the pool's ignore value
    could be (cdp-tile --ignore 0) is counted: pass ignore= for such a
    pool."""
    o = dict(model.get("loss_opts") or {})
    o.update(opts or {})
    o.setdefault("dice_smooth", smooth)
    if class_w is not None:
        o.setdefault("class_weights", class_w)
    n, k = logits.shape[0], logits.shape[1]
    z = logits.reshape(n, k, -1)
    terms = model["loss"].split("+")
    w = _floats(o.get("loss_weights")) or [1.0] * len(terms)
    if terms[0] in ("mse", "l1", "huber"):
        return w[0] * _reg_loss(terms[0], z, labels.reshape(n, k, -1).to(z.dtype), o)
    if model.get("multi"):
        pw = _floats(o.get("class_weights"))
        pw = None if pw is None else torch.as_tensor(pw, dtype=z.dtype)
        return w[0] * F.binary_cross_entropy_with_logits(
            z.reshape(n, k), labels.reshape(n, k).to(z.dtype), pos_weight=pw)
    y = labels.reshape(n, -1).long()
    valid = y != (POOL_IGNORE if ignore is None else ignore)
    if model["ignore"] >= 0:
        valid &= y != model["ignore"]
    if ignore is None:
        # the default guesses the pool's ignore value: a counted label no
        # class of the head is most likely the pool's own (the check syncs
        # a GPU once a call: ignore= spares it)
        bad = y[valid & ((y < 0) | (y >= max(k, 2)))]
        if bad.numel():
            raise ValueError("loss_fn: label %d is not ignored and no class of the head (0 to "
                             "%d): pass ignore=, the label the data gives ignored pixels "
                             "(PoolDataset's ds.ignore; the default 255 is cdp-tile's for u8 "
                             "labels only), or -1 for none" % (int(bad[0]), max(k, 2) - 1))
    return sum(wi * _loss_term(t, z, y, valid, o) for wi, t in zip(w, terms))


def to_torch(ckpt, model=None):
    """The EngineNet of a checkpoint (cdpool.load_checkpoint()) in eval mode,
    holding its parameters and batchnorm statistics. model is the model of
    the checkpoint's cfg as model_dump prints it; by default
    cdpool.model.model_of(ckpt) reads it from the cfg text, overrides and
    input shape the checkpoint holds. Every tensor's name and shape must be
    the model's, in block order, and the class names no more than its
    classes, as cdp_ckpt_to_net() requires (ValueError with its message,
    cdpool.model.fit_checkpoint()). Its input is
    standardized: ckpt.standardize(raw)."""
    if model is None:
        model = model_of(ckpt)
    if list(model["input"]) != list(ckpt.in_shape):
        raise ValueError("the model takes %s, the checkpoint %s" % (model["input"],
                                                                     list(ckpt.in_shape)))
    why = fit_checkpoint(ckpt, model)
    if why:
        raise ValueError(why)
    net = EngineNet(model)
    blocks = [np.concatenate([t.ravel() for t in d.values()]) if d else np.zeros(0, np.float32)
              for d in (ckpt.params, ckpt.buffers)]
    with torch.no_grad():
        net.load_blocks(blocks[0], blocks[1])
    return net.eval()


class Deployed(nn.Module):
    """A checkpoint's model for raw band values: (N, C, H, W) of the pool's
    type (as float) in, what cdp-predict writes for a window out: for a
    classifier its probabilities (--prob), (N, K, H, W) softmax for a
    softmax loss, (N, 1, H, W) sigmoid for the binary ones, (N, K, 1, 1)
    sigmoids for a multi-label head (cdp-predict's CSV); for a regression
    net (ckpt.task) its values on the targets' scale, (N, T, H, W) output *
    target_std + target_mean (in double, as predict.c's finish_values).
    Inside: (x - mean) * (1 / std) in float32 with the checkpoint's
    statistics (a constant band, std 0, only centred), a value that is not
    finite as a float32 0 (pr_standardize), the net in eval mode. A change
    model's input is its dates' bands stacked, as it trained on them.
    Nodata pixels are the caller's to mask (cdp-predict writes NaN there).
    ValueError with cdp-predict's message for a checkpoint it refuses:
    initial weights without a standardization (Checkpoint.check_standardization),
    a regression net with a 1x1 output or targets other than its outputs."""

    def __init__(self, ckpt, model=None):
        super().__init__()
        ckpt.check_standardization()
        if model is None:
            model = model_of(ckpt)
        self.net = to_torch(ckpt, model)
        c = ckpt.in_shape[0]
        mean = ckpt.mean if ckpt.mean is not None else np.zeros(c)
        std = ckpt.std if ckpt.std is not None else np.ones(c)
        # predict_setup.c: inv = (float)(1.0 / sd), 1 for a constant band
        inv = np.array([np.float32(1.0 / s) if s > 0 else np.float32(1) for s in std], np.float32)
        self.register_buffer("mean", torch.from_numpy(mean.astype(np.float32)).reshape(1, c, 1, 1))
        self.register_buffer("inv", torch.from_numpy(inv).reshape(1, c, 1, 1))
        out = model["layers"][model["out_layer"]]["out"]
        task = getattr(ckpt, "task", None)
        self.regression = bool(task and task["task"] == "regression")
        if self.regression:
            if out[1] == 1 and out[2] == 1 and ckpt.in_shape[1] > 1:
                raise ValueError("a regression net with a 1x1 output is not a segmentation model")
            if len(task["target_mean"]) != out[0]:
                raise ValueError("the checkpoint records %d targets, the net gives %d"
                                 % (len(task["target_mean"]), out[0]))
            k = out[0]
            self.register_buffer("tstd", torch.from_numpy(
                np.asarray(task["target_std"], np.float64)).reshape(1, k, 1, 1))
            self.register_buffer("tmean", torch.from_numpy(
                np.asarray(task["target_mean"], np.float64)).reshape(1, k, 1, 1))
        # a multi-label head: one sigmoid per class, as cdp-predict's CSV
        self.sigmoid = model.get("multi") or out[0] == 1

    def forward(self, x):
        x = x.float()
        y = (x - self.mean) * self.inv
        y = torch.where(torch.isfinite(x), y, torch.zeros_like(y))
        z = self.net(y)
        if self.regression:
            return (z.double() * self.tstd + self.tmean).float()
        return torch.sigmoid(z) if self.sigmoid else torch.softmax(z, 1)


def export_onnx(ckpt, path, model=None, opset=13):
    """Writes Deployed(ckpt, model) as ONNX to path: input "bands" (N, C, H,
    W) float32 raw values, output "prob" (a regression net's: "value"); N,
    H and W are dynamic (a U-Net of depth d still needs multiples of 2^d).
    Returns the Deployed module. path follows the C tools' output policy
    (cdpool.out, cdpool(7) OUTPUTS): an output it refuses (the checkpoint
    itself, a pool's file, a checkpoint, a FIFO, a device) is
    cdpool.out.OutputError, an OSError, before anything is exported."""
    m = Deployed(ckpt, model).eval()
    c, h, w = ckpt.in_shape
    out = "value" if m.regression else "prob"
    # torch 2.x's export defaults to the dynamo exporter, which writes its
    # own opset (18) whatever opset_version asks; the TorchScript one obeys
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # the C tools' output policy (cdpool.out): never over the checkpoint
    # read, a pool's file, another checkpoint, a FIFO or a device; written
    # whole to a temporary beside the target, then renamed
    src = getattr(ckpt, "subject", None)
    inputs = [(src, "the checkpoint '%s'" % src)] if isinstance(src, str) else []
    from . import out as out_policy
    out_policy.check(path, inputs)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(m, torch.zeros(1, c, h, w), buf, opset_version=opset,
                          input_names=["bands"], output_names=[out],
                          dynamic_axes={"bands": {0: "n", 2: "h", 3: "w"},
                                        out: {0: "n", 2: "h", 3: "w"}}, **kw)
    out_policy.write(path, buf.getvalue(), inputs)
    return m


def bench(args):
    torch.set_num_threads(args.threads)
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(args.model) as f:
        model = json.load(f)
    net = EngineNet(model)
    n = model["batch"]
    c, h, w = model["input"]
    out = model["layers"][model["out_layer"]]["out"]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, c, h, w, generator=g)
    k = model["classes"]
    # every label a class: ignore=-1 (none) spares loss_fn the default's check
    labels = torch.randint(0, k, (n, out[1] * out[2]), generator=g)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    x = x.contiguous(memory_format=fmt)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-4)

    def step():
        opt.zero_grad(set_to_none=False)
        if args.bf16:
            # autocast: convolutions and matmuls in bf16 (fp32 weights),
            # batchnorm, softmax and the loss in fp32
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model, net(x), labels, ignore=-1)
        else:
            loss = loss_fn(model, net(x), labels, ignore=-1)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    dt = time.perf_counter() - t0
    print(json.dumps({
        "impl": "torch " + torch.__version__,
        "precision": "bf16" if args.bf16 else "fp32",
        "layout": "channels_last" if args.channels_last else "nchw",
        "threads": torch.get_num_threads(), "batch": n, "steps": args.steps,
        "seconds": dt, "samples_per_s": args.steps * n / dt,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "base_kib": base_kib}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="time training steps of the model")
    b.add_argument("model")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--steps", type=int, default=5)
    b.add_argument("--warmup", type=int, default=2)
    b.add_argument("--channels-last", action="store_true")
    b.add_argument("--bf16", action="store_true",
                   help="torch.autocast('cpu', dtype=torch.bfloat16) around the forward and loss")
    args = ap.parse_args()
    if args.cmd == "bench":
        bench(args)


if __name__ == "__main__":
    sys.exit(main())
