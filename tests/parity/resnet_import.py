"""resnet_import.py DUMP MODELS TMP: torchvision's resnet18/34/50 against the
engine after python3 -m cdpool import-torch (see resnet_import.sh)."""
import json
import os
import subprocess
import sys

import numpy as np
import torch

dump, models, tmp = sys.argv[1:4]
from tvhelp import check, failed, imp, rel, seeded  # noqa: E402


# how each state dict is saved: as torchvision's state_dict(), under
# "state_dict" with DataParallel's "module." prefix, under "model" with a
# "backbone." prefix
wraps = {18: lambda sd: sd,
         34: lambda sd: {"state_dict": {"module." + k: v for k, v in sd.items()}, "epoch": 3},
         50: lambda sd: {"model": {"backbone." + k: v for k, v in sd.items()}}}
for depth in (18, 34, 50):
    m = seeded(depth, 10)
    sd_path = os.path.join(tmp, "r%d.pth" % depth)
    torch.save(wraps[depth](m.state_dict()), sd_path)
    cfg = os.path.join(models, "resnet%d.cfg" % depth)
    init = os.path.join(tmp, "r%d.cdpt" % depth)
    r = imp(sd_path, cfg + ":classes=10", init)
    check(r.returncode == 0, "resnet%d: import-torch exits 0 (%s)" % (depth, r.stderr.strip()))
    d = os.path.join(tmp, "d%d" % depth)
    os.mkdir(d)
    out = subprocess.run([dump, "-i", "3,64,64", "-b", "2", "-D", "classes=10", "--steps", "1",
                          "--init", init, "-p", d, cfg], capture_output=True, text=True)
    check(out.returncode == 0 and out.stderr == "",
          "resnet%d: model_dump --init takes every tensor (%s)" % (depth, out.stderr.strip()))
    model = json.loads(out.stdout)
    check(model["nparams"] == sum(p.numel() for p in m.parameters()),
          "resnet%d: %d parameters, torchvision's count" % (depth, model["nparams"]))
    x = torch.from_numpy(np.fromfile(os.path.join(d, "input.f32"), "<f4").reshape(2, 3, 64, 64))
    m.eval()
    with torch.no_grad():
        want = m(x).numpy()
    got = np.fromfile(os.path.join(d, "eval0.f32"), "<f4").reshape(2, 10)
    e = rel(got, want)
    check(e <= 1e-4, "resnet%d: eval logits equal torchvision's (relative error %.2g)"
          % (depth, e))
    # training mode: batch statistics, and the running ones updated as torchvision does
    m.train()
    with torch.no_grad():
        want = m(x).numpy()
        m.eval()
        want_eval = m(x).numpy()
    got = np.fromfile(os.path.join(d, "logits.f32"), "<f4").reshape(2, 10)
    # batch statistics of 2 samples over layer4's 2x2 maps (8 values) magnify
    # float32 rounding: 1e-3 there
    check(rel(got, want) <= 1e-3, "resnet%d: training-mode logits equal torchvision's (%.2g)"
          % (depth, rel(got, want)))
    got = np.fromfile(os.path.join(d, "eval.f32"), "<f4").reshape(2, 10)
    check(rel(got, want_eval) <= 1e-4, "resnet%d: eval logits after the running statistics' "
          "update equal torchvision's (%.2g)" % (depth, rel(got, want_eval)))

# a head of another shape is left out with a note; the rest is taken
m = seeded(18, 1000)
sd = m.state_dict()
torch.save(sd, os.path.join(tmp, "in1k.pth"))
cfg = os.path.join(models, "resnet18.cfg")
init = os.path.join(tmp, "head.cdpt")
r = imp(os.path.join(tmp, "in1k.pth"), cfg + ":classes=5", init)
check(r.returncode == 0 and "head tensor fc.weight: (1000,512) in the state dict, the net has "
      "(5,512): left out" in r.stderr, "a 1000-class head is left out for 5 classes (%s)"
      % r.stderr.strip())
d = os.path.join(tmp, "dhead")
os.mkdir(d)
out = subprocess.run([dump, "-i", "3,32,32", "-D", "classes=5", "--steps", "1", "--init", init,
                      "-p", d, cfg], capture_output=True, text=True)
check(out.returncode == 0 and sorted(out.stderr.split("\n")) == sorted(
    ["", "model_dump: fc.w: not in '%s'" % init, "model_dump: fc.b: not in '%s'" % init]),
    "only the head is not taken (%s)" % out.stderr.strip())

# an encoder tensor missing refuses the import, names it and writes nothing
bad = dict(sd)
del bad["layer2.1.bn1.running_var"]
bad["extra.weight"] = torch.zeros(3)
torch.save(bad, os.path.join(tmp, "bad.pth"))
init = os.path.join(tmp, "bad.cdpt")
r = imp(os.path.join(tmp, "bad.pth"), cfg, init)
check(r.returncode == 1 and "encoder tensor layer2.1.bn1.running_var: missing" in r.stderr
      and "1 state dict tensor the net has no place for (extra.weight (3))" in r.stderr
      and not os.path.exists(init),
      "a missing encoder tensor refuses the import (%s)" % r.stderr.strip())

# --in-channels 4: timm's adapt_input_conv, the RGB filters repeated and scaled by 3/4
init = os.path.join(tmp, "four.cdpt")
r = imp(os.path.join(tmp, "in1k.pth"), cfg, init, "--in-channels", "4")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from cdpool import load_checkpoint  # noqa: E402
w = sd["conv1.weight"].numpy()
want = np.concatenate([w, w[:, :1]], axis=1) * 0.75
ck = load_checkpoint(init) if r.returncode == 0 else None
check(ck is not None and ck.in_shape[0] == 4 and ck.initial
      and np.allclose(ck.params["conv1.w"], want, rtol=1e-6, atol=0),
      "--in-channels 4 adapts conv1 as timm does (%s)" % r.stderr.strip())
sys.exit(1 if failed else 0)
