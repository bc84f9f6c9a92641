#!/bin/sh
# siamese_change.sh: siamese-unet.cfg (weights=, cdp-model(5)) on a
# generated pair of dates (genpair.py, tiled with cdp-tile --time):
#  - it learns the change: cdp-predict --time maps a held-out pair with a
#    change IoU >= 0.8 (NumPy's, against the pair's own mask);
#  - its checkpoint holds each shared tensor once, under the first
#    branch's name (a0.conv1.w, no b0.*), the tensors the model lists, and
#    the PyTorch twin built from it (cdpool.torch_model.to_torch) calls one
#    module for both branches.
# Budget: 150 steps of batch 8 on 64x64 tiles, about 40 s on two loaded
# cores. unet_parity.sh holds its forward, gradients (summed over the two
# branches) and steps against PyTorch; test_grad its gradients against
# finite differences.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"
change_pair
change_train "$CDP_SRCDIR/share/cdpool/models/siamese-unet.cfg:width=8,depth=3,in_h=64,in_w=64"
cdp-predict -q run --time ha.tif,hb.tif -o map.tif
PYTHONPATH=$CDP_SRCDIR/python "$PYTHON" - <<'EOF' || fail "map or checkpoint"
import re
import numpy as np
from osgeo import gdal
import cdpool
from cdpool.model import model_of
t = gdal.Open("hchange.tif").ReadAsArray() == 1
m = gdal.Open("map.tif").ReadAsArray() == 1
iou = (m & t).sum() / (m | t).sum()
print("siamese change IoU %.3f" % iou)
assert iou >= 0.8, iou
c = cdpool.load_checkpoint("run/checkpoint.cdpt")
names = list(c.params)
assert "a0.conv1.w" in names and "a2.bn2.w" in names, names
assert not [k for k in names if re.match(r"b[0-9]+\.", k)], names
model = model_of(c)
shared = [L for L in model["layers"] if "weights" in L]
assert len(shared) == 12, len(shared)
assert len(names) == sum(len(L["params"]) for L in model["layers"])
try:
    from cdpool.torch_model import to_torch
except ImportError:
    print("no torch: the twin is not checked")
else:
    net = to_torch(c, model)
    byname = {L["name"]: i for i, L in enumerate(model["layers"])}
    assert net.layers[byname["b1.conv2"]] is net.layers[byname["a1.conv2"]]
    assert len(list(net.parameters())) == len(names)
EOF
exit 0
