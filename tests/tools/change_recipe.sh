#!/bin/sh
# tests/tools/change_recipe.sh: the change-detection recipe of README.md, its
# commands as written there, run in an empty folder on a smaller set: the
# block after "<!-- recipe: change -->" with the 1024-pixel pair made 512,
# the 512-pixel held-out pair 256 and 300 steps 150 (each substitution must
# match once; see run_recipe in common.sh). Then what a user relies on: a
# change map of the held-out pair on its first date's grid, with the
# change IoU >= 0.8 by NumPy against the pair's own mask, and cdp-evaluate's
# report of that same IoU. Budget: about 40 s on two loaded cores.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
run_recipe change "--size 1024 " "--size 512 " "--size 512 --seed 2" "--size 256 --seed 2" \
	"--steps 300 " "--steps 150 "
W="$T/work"
"$PYTHON" - "$W" "$T/out" <<'PYEOF' || fail "map or report"
import re, sys
import numpy as np
from osgeo import gdal
w = sys.argv[1]
a, m = gdal.Open(w + "/east_a.tif"), gdal.Open(w + "/east_change_map.tif")
assert (m.RasterXSize, m.RasterYSize) == (a.RasterXSize, a.RasterYSize) == (256, 256)
assert m.GetGeoTransform() == a.GetGeoTransform(), m.GetGeoTransform()
assert m.GetProjection() == a.GetProjection()
pred = m.ReadAsArray() == 1
ref = gdal.Open(w + "/east_change.tif").ReadAsArray() == 1
iou = (pred & ref).sum() / (pred | ref).sum()
assert iou >= 0.8, iou
rep = open(sys.argv[2]).read()
row = re.search(r"^ +1 +([0-9]+\.[0-9]+) ", rep, re.M)
assert row and abs(float(row.group(1)) - iou) < 1e-4, (rep, iou)
PYEOF
exit 0
