"""parity.py: replays a model_dump parity run (tests/engine/model_dump.c) in
PyTorch and compares every result with the engine's.

    python3 parity.py MODEL.json DIR [--tol 1e-4] [--channels-last]
    python3 parity.py MODEL.json DIR --bf16 [--factor 2] [--floor 2**-8]

The PyTorch model is cdpool.torch_model's EngineNet (python/cdpool; the
driver sets PYTHONPATH), loaded with the
engine's initial parameter and buffer blocks, fed the same input and
labels, in float32 and in float64 (the reference). Compared, per tensor:
the training-mode logits, the loss, the gradient of every parameter tensor,
the input gradient, the batchnorm running statistics after that forward,
the eval-mode logits after it, and the parameters after each step of
torch.optim.SGD and torch.optim.AdamW with the engine's settings (run.json).

Relative error of the engine's tensor a against a reference b:
    max|a - b| / max(max|b|, tiny)
tiny is 1e-12, except for the parameter gradients and the updates of one
step, where it is 1e-3 times the largest |b| over all parameter tensors: a
tensor whose exact value is 0 (the beta gradient of a batchnorm all of
whose consumers are normalised again, as ResUNet's shortcut bns) holds
rounding noise on both sides and is measured on the scale of the block.
Each is checked against the float64 reference and against PyTorch float32;
both must be <= tol (--tol32 sets another tolerance for the float32
column: a deep net's training-mode batchnorm over a few values magnifies
PyTorch float32's own rounding, so float64 is then the measure; --forward-only
compares the logits, the loss and the batchnorm statistics alone). For the optimizer steps the parameters are compared
and, more strictly, the update p_k - p_0 (whose scale is lr*|g|, not |p|):
there the limit is tol plus a float32 rounding of the stored parameter on
each side, 2 * 2^-24 max|p_k| / max|p_k - p_0| (a batchnorm gamma near 1
moved by 1e-4 keeps only ~3 significant digits of its update in float32,
whoever computes it).
With --bf16 DIR is a bf16 run (model_dump --precision bf16) and the
other side is PyTorch float32 under torch.autocast("cpu",
dtype=torch.bfloat16): each side's error against float64 is measured
over whole blocks (compare_bf16), and the engine's may be at most
--factor (2) times autocast's.
Exit 0 when every check passes, 1 otherwise, with a table of errors.
"""
import argparse
import contextlib
import json
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
from cdpool.torch_model import EngineNet, loss_fn  # noqa: E402  (PYTHONPATH=python)

TINY = 1e-12


def rel_err(a, b, tiny=TINY):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), tiny)) if b.size else 0.0


def block_tiny(block):
    """tiny for the tensors of a whole block (see the top)."""
    return max(1e-3 * float(np.max(np.abs(block))), TINY)


class Run:
    """The engine's files in DIR."""

    def __init__(self, model, d):
        self.d = d
        with open(os.path.join(d, "run.json")) as f:
            self.run = json.load(f)
        n = model["batch"]
        c, h, w = model["input"]
        out = model["layers"][model["out_layer"]]["out"]
        self.x = self.f32("input.f32").reshape(n, c, h, w)
        self.labels = np.fromfile(os.path.join(d, "labels.i32"), dtype="<i4").reshape(n, -1)
        self.out_shape = (n, out[0], out[1], out[2])
        self.p0 = self.f32("params0.f32")
        self.b0 = self.f32("buffers0.f32")

    def f32(self, name):
        return np.fromfile(os.path.join(self.d, name), dtype="<f4")


def torch_side(model, r, dtype, channels_last, forward_only=False, bf16=False):
    """All the compared results from PyTorch at dtype, as numpy float64;
    with forward_only those compare() then looks at: no backward, no steps;
    with bf16 every forward and loss under torch.autocast("cpu",
    dtype=torch.bfloat16), as cdpool.torch_model's bench --bf16."""
    res = {}

    def ac():
        return (torch.autocast("cpu", dtype=torch.bfloat16) if bf16
                else contextlib.nullcontext())

    fmt = torch.channels_last if channels_last else torch.contiguous_format
    net = EngineNet(model, r.run["dropout_seeds"]).to(dtype)
    smooth = r.run["dice_smooth"]

    def fresh():
        net.load_blocks(r.p0, r.b0)
        net.to(memory_format=fmt)
        net.train()

    def xin(grad=False):
        x = torch.from_numpy(r.x).to(dtype).contiguous(memory_format=fmt)
        return x.requires_grad_(grad)

    lab = torch.from_numpy(r.labels.astype(np.int64))
    fresh()
    x = xin(not forward_only)
    with ac():
        logits = net(x)
        loss = loss_fn(model, logits, lab, smooth)
    res["logits"] = logits.detach().double().numpy()
    res["loss"] = float(loss.detach())
    if not forward_only:
        loss.backward()
        res["dx"] = x.grad.double().numpy()
        res["grads"] = np.concatenate([p.grad.double().reshape(-1).numpy()
                                       for p in net.parameters()])
    res["bn"] = {L["name"]: (m.running_mean.double().numpy().copy(),
                             m.running_var.double().numpy().copy()) for L, m in net.bn_modules()}
    net.eval()
    with torch.no_grad(), ac():
        res["eval"] = net(xin()).double().numpy()

    for kind in ("sgd", "adamw") if not forward_only else ():
        s = r.run[kind]
        fresh()
        if kind == "sgd":
            opt = torch.optim.SGD(net.parameters(), lr=s["lr"], momentum=s["momentum"],
                                  nesterov=bool(s["nesterov"]), weight_decay=s["weight_decay"])
        else:
            opt = torch.optim.AdamW(net.parameters(), lr=s["lr"], betas=(s["beta1"], s["beta2"]),
                                    eps=s["eps"], weight_decay=s["weight_decay"])
        res[kind] = []
        for _ in range(r.run["steps"]):
            opt.zero_grad()
            with ac():
                loss = loss_fn(model, net(xin()), lab, smooth)
            loss.backward()
            opt.step()
            res[kind].append(net.param_block())
    return res


def tensors(model, r, ref, t32, forward_only=False):
    """The compared tensors: (what, block, ours, reference, other, tiny,
    extra), ours from DIR, the reference and the other side from PyTorch;
    block names the whole the tensor is part of for compare_bf16 (None:
    left out there, a step's parameters, whose updates say it on their own
    scale); extra is the float32 rounding a step's update is allowed on top
    of the limit."""
    out = []
    names = EngineNet(model).tensor_names()

    def add(what, ours, a64, a32, tiny=TINY, extra=0.0, block=None):
        out.append((what, block or what, ours, a64, a32, tiny, extra))

    add("logits (train)", r.f32("logits.f32").reshape(r.out_shape), ref["logits"], t32["logits"])
    add("loss", r.run["loss"], ref["loss"], t32["loss"])
    if not forward_only:
        add("input gradient", r.f32("dx.f32").reshape(r.x.shape), ref["dx"], t32["dx"])
        g = r.f32("grads.f32")
        tiny = block_tiny(ref["grads"])
    for name, off, n in names if not forward_only else ():
        add("grad " + name, g[off:off + n], ref["grads"][off:off + n], t32["grads"][off:off + n],
            tiny=tiny, block="parameter gradients")
    b1 = r.f32("buffers1.f32")
    for L in model["layers"]:
        for i, b in enumerate(L["buffers"]):
            n = int(np.prod(b["shape"]))
            add("%s.%s" % (L["name"], b["name"]), b1[b["off"]:b["off"] + n],
                ref["bn"][L["name"]][i], t32["bn"][L["name"]][i],
                block="batchnorm statistics")
    add("logits (eval)", r.f32("eval.f32").reshape(r.out_shape), ref["eval"], t32["eval"])
    p0 = r.p0.astype(np.float64)
    for kind in ("sgd", "adamw"):
        for k in range(r.run["steps"] if not forward_only else 0):
            ours = r.f32("%s%d.f32" % (kind, k + 1)).astype(np.float64)
            out.append(("%s step %d params" % (kind, k + 1), None, ours, ref[kind][k],
                        t32[kind][k], TINY, 0.0))
            tiny = block_tiny(ref[kind][k] - p0)
            for name, off, n in names:
                sl = slice(off, off + n)
                upd = ref[kind][k][sl] - p0[sl]
                ulp = 2.0 ** -23 * float(np.max(np.abs(ref[kind][k][sl])))
                add("%s step %d update %s" % (kind, k + 1, name), ours[sl] - p0[sl], upd,
                    t32[kind][k][sl] - p0[sl], tiny, ulp / max(float(np.max(np.abs(upd))), tiny),
                    "%s step %d updates" % (kind, k + 1))
    return out


def compare(model, r, ref, t32, tol, tol32=None, forward_only=False):
    """Rows (what, err vs float64, err vs float32, limit, float32 limit); the
    engine's side from DIR. tol32 (default tol) stands for tol in the float32
    column's limit; forward_only compares the logits, the loss and the
    batchnorm statistics, not the gradients and steps."""
    tol32 = tol if tol32 is None else tol32
    return [(what, rel_err(ours, a64, tiny), rel_err(ours, a32, tiny), tol + extra, tol32 + extra)
            for what, _b, ours, a64, a32, tiny, extra in tensors(model, r, ref, t32, forward_only)]


def l2_err(a, b):
    """||a - b|| / ||b|| over a whole block (0 where b is all zeros and a is b)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    d = float(np.linalg.norm(a - b))
    return d / float(np.linalg.norm(b)) if d else 0.0


def compare_bf16(model, r, ref, peer, factor, floor, forward_only=False):
    """Rows (block, the engine's error, autocast's error, limit): a bf16 run
    of the engine and PyTorch's autocast (peer), each against float64, as
    l2_err over whole blocks (the logits, the loss, the input gradient,
    every parameter gradient, every batchnorm statistic, each step's
    updates of every parameter). One tensor of a few values is mostly
    rounding noise in bf16, on both sides (a batchnorm bias's gradient
    0.28 off float64 in one, 0.06 in the other, and the other way round
    with another seed); a block is steady. The limit is factor times
    autocast's error; the loss's at least floor (relative; autocast's loss
    can land on float64's by chance)."""
    blocks = {}
    for _what, b, ours, a64, a16, _tiny, _extra in tensors(model, r, ref, peer, forward_only):
        if b is not None:
            blocks.setdefault(b, ([], [], []))
            for lst, v in zip(blocks[b], (ours, a64, a16)):
                lst.append(np.asarray(v, dtype=np.float64).ravel())
    rows = []
    for b, (ours, a64, a16) in blocks.items():
        ours, a64, a16 = (np.concatenate(v) for v in (ours, a64, a16))
        e_peer = l2_err(a16, a64)
        lim = factor * e_peer
        if b == "loss":
            lim = max(lim, floor)
        rows.append((b, l2_err(ours, a64), e_peer, lim))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tol32", type=float, default=None,
                    help="tolerance against PyTorch float32 (default --tol)")
    ap.add_argument("--forward-only", action="store_true",
                    help="compare the logits, loss and statistics, not gradients and steps")
    ap.add_argument("--channels-last", action="store_true",
                    help="run the PyTorch float32 model in channels_last")
    ap.add_argument("--verbose", action="store_true", help="print every row, not just failures")
    ap.add_argument("--bf16", action="store_true",
                    help="DIR is a bf16 run (model_dump --precision bf16): hold its error "
                    "against float64 to PyTorch autocast's")
    ap.add_argument("--factor", type=float, default=2.0,
                    help="with --bf16: the most the engine's error may be, in autocast's")
    ap.add_argument("--floor", type=float, default=2.0 ** -8,
                    help="with --bf16: the least limit of the loss's relative error")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(args.model) as f:
        model = json.load(f)
    r = Run(model, args.dir)
    if args.bf16:
        return main_bf16(model, r, args)
    ref = torch_side(model, r, torch.float64, False, args.forward_only)
    t32 = torch_side(model, r, torch.float32, args.channels_last, args.forward_only)
    rows = compare(model, r, ref, t32, args.tol, args.tol32, args.forward_only)
    bad = [row for row in rows if not (row[1] <= row[3] and row[2] <= row[4])]
    worst = max(rows, key=lambda row: max(row[1] / row[3], row[2] / row[4]))
    print("%s: %d tensors compared, loss %.9g (torch float64 %.9g); relative error "
          "max|a-b|/max(max|b|,tiny), tolerance %g" % (model["cfg"], len(rows), r.run["loss"],
                                                       ref["loss"], args.tol))
    print("worst: %s: %.3g vs float64, %.3g vs float32 (limits %.3g, %.3g)" % worst)
    show = rows if (args.verbose or bad) else []
    if show:
        print("%-48s %11s %11s %11s %11s" % ("tensor", "vs float64", "vs float32", "limit",
                                            "limit f32"))
        for what, e64, e32, lim, lim32 in show:
            flag = "" if (e64 <= lim and e32 <= lim32) else "  FAIL"
            print("%-48s %11.3g %11.3g %11.3g %11.3g%s" % (what, e64, e32, lim, lim32, flag))
    if bad:
        print("%d of %d comparisons exceed their limit" % (len(bad), len(rows)))
        return 1
    return 0


def main_bf16(model, r, args):
    """--bf16: the engine's bf16 run and autocast's, each against float64."""
    if r.run.get("precision") != "bf16":
        print("%s: --bf16, but run.json says precision %s" % (args.dir, r.run.get("precision")))
        return 1
    ref = torch_side(model, r, torch.float64, False, args.forward_only)
    peer = torch_side(model, r, torch.float32, args.channels_last, args.forward_only, bf16=True)
    rows = compare_bf16(model, r, ref, peer, args.factor, args.floor, args.forward_only)
    bad = [row for row in rows if not row[1] <= row[3]]
    worst = max(rows, key=lambda row: row[1] / row[3])
    print("%s: bf16, %d blocks compared, loss %.9g (autocast %.9g, float64 %.9g); error "
          "||a-b||/||b|| against float64, limit %g x autocast's (the loss's at least %g)" % (
              model["cfg"], len(rows), r.run["loss"], peer["loss"], ref["loss"], args.factor,
              args.floor))
    print("worst: %s: %.3g (autocast %.3g, limit %.3g)" % worst)
    if args.verbose or bad:
        print("%-28s %11s %11s %11s" % ("block", "cdpool bf16", "autocast", "limit"))
        for what, ours, ac, lim in rows if args.verbose else bad:
            print("%-28s %11.3g %11.3g %11.3g%s" % (what, ours, ac, lim,
                                                   "" if ours <= lim else "  FAIL"))
    if bad:
        print("%d of %d comparisons exceed their limit" % (len(bad), len(rows)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
