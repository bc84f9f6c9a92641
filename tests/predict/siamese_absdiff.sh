#!/bin/sh
# siamese_absdiff.sh: siamese-unet.cfg with fusion=2 (FC-Siam-diff: the
# absolute difference of the dates' features, [diff] abs=1, cdp-model(5))
# on the generated pair of siamese_change.sh:
#  - it learns the change: cdp-predict --time maps a held-out pair with a
#    change IoU >= 0.8 (NumPy's, against the pair's own mask);
#  - its checkpoint holds each shared tensor once (no b* tensors), and its
#    [diff] layers read abs=1;
#  - the PyTorch twin (cdpool.torch_model.Deployed) of the checkpoint gives
#    cdp-predict --prob's probabilities on one 64x64 window of the pair
#    (--overlap 0: no mirrored context, no blending) to 1e-5, and so does
#    its ONNX export (export_onnx: Sub and Abs nodes), run by
#    tests/python/onnx_eval.py (skipped without torch or onnx).
# Budget: 150 steps of batch 8 on 64x64 tiles, about 40 s on two loaded
# cores. unet_parity.sh holds the fused U-Net's forward, gradients (summed
# over the two branches) and steps against PyTorch; test_grad [diff]'s
# gradients against finite differences.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"
change_pair
change_train "$CDP_SRCDIR/share/cdpool/models/siamese-unet.cfg:width=8,depth=3,in_h=64,in_w=64,fusion=2"
cdp-predict -q run --time ha.tif,hb.tif -o map.tif
"$PYTHON" - <<'EOF2' || fail "windows"
from osgeo import gdal
for f in ("ha", "hb"):
    gdal.Translate(f + "w.tif", f + ".tif", srcWin=[96, 32, 64, 64])
EOF2
cdp-predict -q --prob --overlap 0 --threads 1 run --time haw.tif,hbw.tif -o prob.tif ||
	fail "cdp-predict --prob of one window"
PYTHONPATH=$CDP_SRCDIR/python "$PYTHON" - "$CDP_SRCDIR/tests/python" <<'EOF2' || fail "map, checkpoint or twin"
import re, sys
import numpy as np
from osgeo import gdal
import cdpool
from cdpool.model import model_of
t = gdal.Open("hchange.tif").ReadAsArray() == 1
m = gdal.Open("map.tif").ReadAsArray() == 1
iou = (m & t).sum() / (m | t).sum()
print("siamese absdiff change IoU %.3f" % iou)
assert iou >= 0.8, iou
c = cdpool.load_checkpoint("run/checkpoint.cdpt")
names = list(c.params)
assert "a0.conv1.w" in names and not [k for k in names if re.match(r"b[0-9]+\.", k)], names
model = model_of(c)
fuse = [L for L in model["layers"] if L["type"] == "diff"]
assert len(fuse) == 4 and all(L["abs"] == 1 for L in fuse), fuse
try:
    import torch
    from cdpool.torch_model import export_onnx
except ImportError:
    print("no torch: the twin is not checked")
    sys.exit(0)
want = gdal.Open("prob.tif").ReadAsArray().astype(np.float64)          # (2, 64, 64)
raw = np.concatenate([gdal.Open(f).ReadAsArray() for f in ("haw.tif", "hbw.tif")])
dep = export_onnx(c, "run.onnx")
with torch.no_grad():
    got = dep(torch.from_numpy(raw[None].astype(np.float32)))[0].numpy()
err = float(np.max(np.abs(got - want)))
print("twin against cdp-predict --prob: %.1e" % err)
assert got.shape == want.shape and err <= 1e-5, (got.shape, err)
try:
    import onnx
except ImportError:
    print("no onnx: the ONNX file is not checked")
    sys.exit(0)
sys.path.insert(0, sys.argv[1])
import onnx_eval
g = onnx.load("run.onnx")
ops = {n.op_type for n in g.graph.node}
assert {"Sub", "Abs"} <= ops, sorted(ops)
got = onnx_eval.run(g, {"bands": raw[None].astype(np.float32)})["prob"][0]
err = float(np.max(np.abs(got - want)))
print("ONNX graph (onnx_eval) against cdp-predict --prob: %.1e" % err)
assert err <= 1e-5, err
EOF2
exit 0
