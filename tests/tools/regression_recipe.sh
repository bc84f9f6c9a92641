#!/bin/sh
# tests/tools/regression_recipe.sh: the pixel-regression recipe of
# README.md, its commands as written there, run in an empty folder on a
# smaller set: the block after "<!-- recipe: regression -->" with the
# 256-pixel scenes made 128 (each substitution must match once; see
# run_recipe in common.sh). Then what a user relies on: a float32 map of
# the held-out scene on its grid, tagged a regression map, with R^2 >= 0.9
# by NumPy against the scene's true target, and cdp-evaluate's report of
# that same R^2. Budget: about 20 s on two loaded cores (32 tiles, 300
# steps).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
run_recipe regression "--size 256 --seed 1" "--size 128 --seed 1" \
	"--size 256 --seed 2" "--size 128 --seed 2" "--size 256 --seed 3" "--size 128 --seed 3"
W="$T/work"
"$PYTHON" - "$W" "$T/out" <<'PYEOF' || fail "map or report"
import re, sys
import numpy as np
from osgeo import gdal
w = sys.argv[1]
a, m = gdal.Open(w + "/held.tif"), gdal.Open(w + "/held_pred.tif")
assert (m.RasterXSize, m.RasterYSize) == (a.RasterXSize, a.RasterYSize) == (128, 128)
assert m.GetGeoTransform() == a.GetGeoTransform(), m.GetGeoTransform()
assert m.GetMetadataItem("CDP_TASK") == "regression"
p = m.ReadAsArray().astype(np.float64)
t = gdal.Open(w + "/held_value.tif").ReadAsArray().astype(np.float64)
r2 = 1 - ((p - t) ** 2).sum() / ((t - t.mean()) ** 2).sum()
assert r2 >= 0.9, r2
rep = open(sys.argv[2]).read()
row = re.search(r"^r2 +([-0-9.]+)$", rep, re.M)
assert row and abs(float(row.group(1)) - r2) < 1e-6, (rep, r2)
print("held-out scene: R^2 %.4f" % r2)
PYEOF
exit 0
