"""tvhelp.py: what resnet_import.py, unet_resnet.py and fpn_deeplab.py
share: the check log, python3 -m cdpool import-torch (its main, in this
process), torchvision ResNets
with seeded random weights and batchnorm statistics, the relative error,
the comparison of a model_dump run with cdpool.torch_model's twin."""
import contextlib
import io
import os
import subprocess
import sys
import types

import numpy as np
import torch
import torchvision

PY = sys.executable
failed = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failed.append(what)


def imp(sd_path, model, out, *extra):
    """python3 -m cdpool import-torch SD_PATH --model MODEL -o OUT EXTRA..:
    its exit status (returncode) and stderr. The command's main runs in
    this process: a Python start that imports torch costs seconds of CPU,
    and these tests import a dozen times (the command line itself is run
    by tests/predict and tests/train)."""
    from cdpool.__main__ import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(["import-torch", sd_path, "--model", model, "-o", out] + list(extra))
        except SystemExit as e:         # argparse's refusals
            rc = e.code
    return types.SimpleNamespace(returncode=rc, stderr=err.getvalue())


def seeded(depth, classes):
    torch.manual_seed(depth)
    m = getattr(torchvision.models, "resnet%d" % depth)(num_classes=classes)
    # batchnorm statistics and affine parameters away from the identity
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def twin(tag, d, model_json, control=False):
    """parity.py --forward-only on model_dump's run in d (model_json: its
    stdout): the logits, loss and batchnorm statistics equal the twin's
    within 3e-4 of PyTorch float64 and 1e-2 of float32. With control, the
    eval logits scaled by 1.001 must then fail it."""
    with open(os.path.join(d, "model.json"), "w") as f:
        f.write(model_json)
    par = [PY, os.path.join(os.path.dirname(os.path.abspath(__file__)), "parity.py"),
           os.path.join(d, "model.json"), d, "--tol", "3e-4", "--tol32", "1e-2", "--forward-only"]
    p = subprocess.run(par, capture_output=True, text=True)
    out = p.stdout.split("\n")
    check(p.returncode == 0, "%s: the engine equals cdpool.torch_model's twin: %s"
          % (tag, out[1] if p.returncode == 0 else "\n".join(
              out[:2] + [l for l in out if l.endswith("FAIL")]) + p.stderr[-500:]))
    if control and p.returncode == 0:
        g = os.path.join(d, "eval.f32")
        (np.fromfile(g, "<f4") * np.float32(1.001)).astype("<f4").tofile(g)
        p = subprocess.run(par, capture_output=True, text=True)
        check(p.returncode == 1 and "logits (eval)" in p.stdout,
              "%s: eval logits scaled by 1.001 fail the comparison" % tag)
