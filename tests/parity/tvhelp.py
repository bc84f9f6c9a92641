"""tvhelp.py: what resnet_import.py and unet_resnet.py share: the check
log, python3 -m cdpool import-torch, torchvision ResNets with seeded random
weights and batchnorm statistics, the relative error."""
import subprocess
import sys

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
    return subprocess.run([PY, "-m", "cdpool", "import-torch", sd_path, "--model", model,
                           "-o", out] + list(extra), capture_output=True, text=True)


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
