#!/bin/sh
# tests/predict/tta_reg.sh: cdp-predict --tta with a regression net
# (predict_tta.c, cdp-predict(1) "Pixel regression"). A net of two targets
# (genvalue.py --targets 2: the second another offset and spread,
# --label-bands 1,2) trained for 12 steps: its values are far from
# symmetric, which is all this test needs. Budget: a few seconds on 2
# cores (one 12-step run and 24 predictions of 80x80 rasters).
# Each window's values are averaged over the transforms, mapped back, and
# blended linearly, so on a raster whose window grid every transform maps
# onto itself the map must equal the mean of the maps of the transformed
# rasters (NumPy flips and transposes written by GDAL), each mapped back
# by NumPy, within 1e-5 of the values' size:
#  - overlap 0 on a 64x64 raster (2 x 2 windows of 32): flips and d4;
#  - overlap 12 on an 80x80 raster (4 x 4 windows of 32 at a stride of 20,
#    the grid symmetric), so the sin^2 blend is the one without --tta: d4;
#  - the map is still two float32 bands tagged CDP_TASK=regression, and
#    --tta none is the plain prediction, byte for byte.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genvalue.py"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
cd "$T"
# tr.py IN OUT T [inverse]: OUT = transform T of IN's bands (predict_tta.c's
# out(y, x) = in(y', x')), or with "inverse" the raster whose transform T is IN
cat >tr.py <<'EOF'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
src, t = gdal.Open(sys.argv[1]), int(sys.argv[3])
a = src.ReadAsArray()
a = a.reshape((-1,) + a.shape[-2:])
steps = [(4, lambda a: np.swapaxes(a, 1, 2)), (2, lambda a: a[:, ::-1, :]), (1, lambda a: a[:, :, ::-1])]
for bit, f in (steps[::-1] if len(sys.argv) > 4 else steps):
    if t & bit:
        a = f(a)
d = gdal.GetDriverByName("GTiff").Create(sys.argv[2], a.shape[2], a.shape[1], a.shape[0],
                                         src.GetRasterBand(1).DataType)
d.SetGeoTransform(src.GetGeoTransform())
d.SetProjection(src.GetProjection())
for i in range(a.shape[0]):
    d.GetRasterBand(i + 1).WriteArray(np.ascontiguousarray(a[i]))
EOF
# cmp.py TTA N MAP...: TTA's bands equal the mean of the N MAPs
cat >cmp.py <<'EOF'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open(sys.argv[1])
assert d.RasterCount == 2 and d.GetMetadataItem("CDP_TASK") == "regression"
assert d.GetRasterBand(1).DataType == gdal.GDT_Float32
tta = d.ReadAsArray().astype(np.float64)
maps = [gdal.Open(f).ReadAsArray().astype(np.float64) for f in sys.argv[3:]]
assert len(maps) == int(sys.argv[2])
mean = np.mean(maps, axis=0)
err = (np.abs(tta - mean) / np.maximum(1, np.abs(mean))).max()
spread = max((np.abs(m - mean) / np.maximum(1, np.abs(mean))).max() for m in maps)
print("%s: largest difference %.2g (relative) from the mean of %d maps, which differ by up to %.2g"
      % (sys.argv[1], err, len(maps), spread))
sys.exit(0 if err <= 1e-5 and spread > 1e-3 else 1)
EOF
for s in 1 2; do
	"$PYTHON" "$GEN" --size 64 --seed "$s" --targets 2 "s$s.tif" "s${s}_two.tif" || fail "scene $s"
done
"$PYTHON" "$GEN" --size 64 --seed 5 a.tif a_value.tif &&
	"$PYTHON" "$GEN" --size 80 --seed 6 b.tif b_value.tif || fail "the rasters to map"
cdp-tile -q --size 32 --label-suffix _two --label-bands 1,2 s1.tif s2.tif |
	cdp-lmdbpack -q pool || fail "cdp-tile | cdp-lmdbpack"
cdp-keyshuffle -q --seed 1 -o train.keys pool
cdp-train -q --db pool --keys train.keys --optimizer adamw --lr 0.01 --batch 4 --steps 12 \
	--threads 1 --model "$SMALL:loss=mse,classes=2,width=8,depth=2" --out run ||
	fail "training 2 targets"

# tta NAME RASTER OVERLAP SET N: --tta SET against the N transformed maps
tta() {
	for t in $(seq 0 $(($5 - 1))); do
		"$PYTHON" tr.py "$2" "$1.in$t.tif" $t &&
			cdp-predict -q --overlap "$3" --size 32 --threads 1 run/checkpoint.cdpt \
				"$1.in$t.tif" -o "$1.p$t.tif" &&
			"$PYTHON" tr.py "$1.p$t.tif" "$1.q$t.tif" $t inverse ||
			fail "$1: the map of transform $t"
	done
	cdp-predict -q --overlap "$3" --size 32 --threads 1 --batch 3 --tta "$4" run/checkpoint.cdpt \
		"$2" -o "$1.tta.tif" || fail "$1: --tta $4"
	"$PYTHON" cmp.py "$1.tta.tif" "$5" $(for t in $(seq 0 $(($5 - 1))); do echo "$1.q$t.tif"; done) ||
		fail "$1: --tta $4 is not the mean of the $5 transformed maps"
}
tta flips a.tif 0 flips 4
tta d4 a.tif 0 d4 8
tta blend b.tif 12 d4 8

cdp-predict -q --threads 1 run/checkpoint.cdpt b.tif -o plain.tif &&
	cdp-predict -q --threads 1 --tta none run/checkpoint.cdpt b.tif -o none.tif ||
	fail "--tta none"
cmp -s plain.tif none.tif || fail "--tta none differs from no --tta"
echo ok
