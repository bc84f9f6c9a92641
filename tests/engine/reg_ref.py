"""reg_ref.py CFG DIR [CFG DIR]...: each regression loss of loss_dump (mse,
l1 or huber of CFG's [net], huber_delta, times loss_weights) recomputed in
float64 by PyTorch's own MSELoss, L1Loss and HuberLoss over the elements
whose target is not NaN, with autograd for the gradient. The loss must
agree to 1e-9 relative (the split's "ranks" too), both gradients to 2e-5
of their largest entry, and the gradient must be 0 where the target is
NaN. Exit 0, or 1 saying what differs (and for which DIR)."""
import sys

import numpy as np
import torch


def check(cfg, d):
    kv = dict(line.strip().split("=", 1) for line in open(cfg) if "=" in line)
    n, k, hw, loss, l0, l1 = open(d + "/loss.txt").read().split()
    n, k, hw = int(n), int(k), int(hw)
    loss, l0, l1 = float(loss), float(l0), float(l1)

    def load(name):
        return np.fromfile("%s/%s" % (d, name), "<f4").reshape(n, k, hw).astype(np.float64)

    x = torch.tensor(load("logits.f32"), requires_grad=True)
    t = torch.tensor(load("targets.f32"))
    mask = ~torch.isnan(t)
    # the delta and the weight as the engine holds them: float32
    fn = {"mse": torch.nn.MSELoss(), "l1": torch.nn.L1Loss(),
          "huber": torch.nn.HuberLoss(delta=float(np.float32(kv.get("huber_delta", 1.0))))}
    ref = float(np.float32(kv.get("loss_weights", 1.0))) * fn[kv["loss"]](x[mask], t[mask])
    ref.backward()
    g = x.grad.numpy()
    ok = True
    for name, v in (("loss", loss), ("rank 0's loss", l0), ("rank 1's loss", l1)):
        if abs(v - ref.item()) > 1e-9 * max(1.0, abs(ref.item())):
            print("%s: %s %.17g, PyTorch %.17g" % (d, name, v, ref.item()))
            ok = False
    for name in ("grad.f32", "split.f32"):
        got = load(name)
        err = np.abs(got - g).max()
        if err > 2e-5 * np.abs(g).max():
            print("%s: %s off by %g (largest entry %g)" % (d, name, err, np.abs(g).max()))
            ok = False
        if (got[~mask.numpy()] != 0).any():
            print("%s: %s: a gradient where there is no target" % (d, name))
            ok = False
    return ok


args = sys.argv[1:]
results = [check(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
sys.exit(0 if args and all(results) else 1)
