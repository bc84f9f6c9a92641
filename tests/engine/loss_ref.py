"""loss_ref.py: the losses of loss.h in PyTorch (float64, autograd for the
gradient), against loss_dump's output.

    loss_ref.py CFG DIR [CFG DIR]...

CFG: the cfg loss_dump read (its [net] key=value lines); DIR: loss_dump's
output; each pair checked in turn (one Python start, one torch import). The loss is cdpool's PyTorch twin, torch_model.loss_fn, written
from the papers and smp's documented formulas, not from loss.c: ce with
label smoothing as torch.nn.functional.cross_entropy (PyTorch's own), focal as -a_t (1-p_t)^g log p_t, dice/jaccard/tversky as
smp's multiclass soft scores (absent classes 0, mean over all classes),
Lovasz-softmax as Berman's lovasz_softmax(per_image=True,
classes='present'). Checks the loss (relative 1e-9) and the gradient of
the whole batch and of the two-rank split (max error <= 2e-5 of the
largest entry, float rounding). Exit 0, or 1 with the differences (and
for which DIR).
"""
import sys

import numpy as np
import torch

from cdpool.torch_model import loss_fn  # PYTHONPATH=python


def read_cfg(path):
    kv = {}
    for line in open(path):
        line = line.strip()
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            kv[k.strip()] = v.strip()
    return kv


def check(cfg, d):
    """0 when DIR's loss and gradients equal PyTorch's, else 1 (printed)."""
    o = read_cfg(cfg)
    n, k, hw, l_c, l_r0, l_r1 = open(d + "/loss.txt").read().split()
    n, k, hw = int(n), int(k), int(hw)
    z = np.fromfile(d + "/logits.f32", np.float32).astype(np.float64).reshape(n, k, hw)
    z = torch.tensor(z, requires_grad=True)
    y = torch.tensor(np.fromfile(d + "/labels.i32", np.int32).astype(np.int64).reshape(n, hw))
    model = {"loss": o.get("loss", "ce"), "ignore": int(o.get("ignore", -1))}
    loss = loss_fn(model, z, y, opts=o)
    loss.backward()
    g = z.grad.numpy().astype(np.float64)
    bad = 0
    for name, v in (("loss", float(l_c)), ("rank 0 loss", float(l_r0)),
                    ("rank 1 loss", float(l_r1))):
        if not abs(v - loss.item()) <= 1e-9 * max(abs(loss.item()), 1e-12):
            print("%s: %s %.17g, PyTorch %.17g" % (d, name, v, loss.item()))
            bad = 1
    scale = max(np.abs(g).max(), 1e-12)
    for f in ("grad.f32", "split.f32"):
        c = np.fromfile(d + "/" + f, np.float32).astype(np.float64).reshape(n, k, hw)
        e = np.abs(c - g).max() / scale
        if not e <= 2e-5:
            i = np.unravel_index(np.abs(c - g).argmax(), g.shape)
            print("%s: %s max error %.3g of %.3g at %s: %.9g, PyTorch %.9g"
                  % (d, f, e, scale, i, c[i], g[i]))
            bad = 1
    print("%s: loss %.9g, gradient max %.3g" % (o.get("loss"), loss.item(), scale))
    return bad


args = sys.argv[1:]
results = [check(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
sys.exit(1 if not args or any(results) else 0)
