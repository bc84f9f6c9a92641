"""zoo_deep.py DUMP MODELS TMP: the whole networks of unet-, fpn- and
deeplabv3plus-resnet34 and -resnet50 on torchvision's ResNet weights (python3
-m cdpool import-torch) run by the engine as cdpool.torch_model's twin runs
them, forward (see zoo_deep.sh)."""
import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import torch

dump, models, tmp = sys.argv[1:4]
from tvhelp import check, failed, seeded  # noqa: E402
from parity import Run, rel_err  # noqa: E402
from cdpool.__main__ import main as cdpool_main  # noqa: E402
from cdpool.torch_model import EngineNet, loss_fn  # noqa: E402

torch.set_num_threads(1)


def twin_forward(model, r, dtype):
    """The twin at dtype from the engine's initial blocks: training-mode
    logits and loss, the batchnorm running statistics after that forward
    (name -> (mean, var)), eval-mode logits; as float64 numpy."""
    net = EngineNet(model, r.run["dropout_seeds"]).to(dtype)
    net.load_blocks(r.p0, r.b0)
    net.train()
    x = torch.from_numpy(r.x).to(dtype)
    lab = torch.from_numpy(r.labels.astype(np.int64))
    with torch.no_grad():
        logits = net(x)
        loss = loss_fn(model, logits, lab, r.run["dice_smooth"])
        bn = {L["name"]: [m.running_mean.double().numpy().copy(),
                          m.running_var.double().numpy().copy()] for L, m in net.bn_modules()}
        net.eval()
        ev = net(x)
    return {"logits": logits.double().numpy(), "loss": float(loss), "bn": bn,
            "eval": ev.double().numpy()}


def compare(model, r, t):
    """(what, relative error) of the engine's results in r against t"""
    rows = [("logits (train)", rel_err(r.f32("logits.f32").reshape(r.out_shape), t["logits"])),
            ("loss", rel_err(r.run["loss"], t["loss"])),
            ("logits (eval)", rel_err(r.f32("eval.f32").reshape(r.out_shape), t["eval"]))]
    b1 = r.f32("buffers1.f32")
    for L in model["layers"]:
        for i, b in enumerate(L["buffers"]):
            n = int(np.prod(b["shape"]))
            rows.append(("%s.%s" % (L["name"], b["name"]),
                         rel_err(b1[b["off"]:b["off"] + n], t["bn"][L["name"]][i])))
    return rows


def float32_err(t64, t32):
    """PyTorch float32's own largest relative error against float64 over the
    compared tensors"""
    e = [rel_err(t32[k], t64[k]) for k in ("logits", "loss", "eval")]
    e += [rel_err(t32["bn"][n][i], t64["bn"][n][i]) for n in t64["bn"] for i in (0, 1)]
    return max(e)


for depth in (34, 50):
    sd_path = os.path.join(tmp, "r%d.pth" % depth)
    torch.save(seeded(depth, 1000).state_dict(), sd_path)
    for kind in ("unet", "fpn", "deeplabv3plus"):
        tag = "%s-resnet%d" % (kind, depth)
        cfg = os.path.join(models, tag + ".cfg")
        init = os.path.join(tmp, tag + ".cdpt")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cdpool_main(["import-torch", sd_path, "--model", cfg, "-o", init])
        check(rc == 0, "%s: import-torch of torchvision's resnet%d (%s)"
              % (tag, depth, err.getvalue().strip().split("\n")[-1]))
        if rc != 0:
            continue
        d = os.path.join(tmp, tag)
        os.mkdir(d)
        out = subprocess.run([dump, "-s", "7", "-i", "3,64,64", "-b", "2", "--steps", "1",
                              "--init", init, "-p", d, cfg], capture_output=True, text=True)
        taken = [l for l in out.stderr.strip().split("\n") if l]
        check(out.returncode == 0 and all(l.split(":")[1].strip().startswith(
            ("decoder.", "segmentation_head.")) for l in taken),
              "%s: model_dump --init takes every encoder tensor (%s)"
              % (tag, out.stderr.strip()[-200:] if out.returncode else "%d others: decoder, head"
                 % len(taken)))
        if out.returncode != 0:
            continue
        model = json.loads(out.stdout)
        r = Run(model, d)
        t64 = twin_forward(model, r, torch.float64)
        t32 = twin_forward(model, r, torch.float32)
        # the limit: 3e-4, or three times PyTorch float32's own error against
        # float64 where training-mode batchnorm over few values magnifies
        # float32 rounding further (deeplabv3plus-resnet50's ASPP projection)
        f32 = float32_err(t64, t32)
        tol = max(3e-4, 3 * f32)
        rows = compare(model, r, t64)
        what, worst = max(rows, key=lambda row: row[1])
        check(worst <= tol and len(rows) == 3 + 2 * len(t64["bn"]),
              "%s: the engine equals cdpool.torch_model's twin (float64) over %d tensors: worst "
              "%s %.3g, limit %.3g (PyTorch float32 %.3g)" % (tag, len(rows), what, worst, tol, f32))
        if depth == 50 and kind == "unet":
            # the comparison catches eval logits off by 0.2%
            r.f32 = (lambda f: lambda name: f(name) * (1.002 if name == "eval.f32" else 1.0))(r.f32)
            what, worst = max(compare(model, r, t64), key=lambda row: row[1])
            check(worst > tol and what == "logits (eval)",
                  "%s: eval logits scaled by 1.002 fail the comparison (%.3g)" % (tag, worst))
sys.exit(1 if failed else 0)
