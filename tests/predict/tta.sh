#!/bin/sh
# tests/predict/tta.sh: cdp-predict --tta (predict_tta.c). Test-time
# augmentation averages, per window, the probabilities of the net on the
# window transformed by each of a dihedral set and mapped back, so on a
# raster the windows tile exactly (overlap 0, a square raster of 2 x 2
# windows, which every flip and transpose maps onto the grid) it must equal
# the mean of separate --prob predictions of the transformed rasters (NumPy
# flips and transposes written by GDAL), each mapped back by NumPy:
#  - flips (identity, h, v, hv) and d4 (those and their transposes), for a
#    softmax head (2 classes) and a sigmoid head (1), within 1e-5;
#  - the class map is the arg max of the TTA probabilities; with blending
#    (overlap) the probabilities of every pixel still sum to 1;
#  - a classifier's chips (CSV): the probabilities of --tta d4 are the
#    mean of those of the 8 transformed chip folders;
#  - --tta none is the plain prediction, byte for byte; a bad name is a
#    usage error.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
D="$CDP_SRCDIR/tests/predict"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
"$PYTHON" "$D/mkthreshold.py" "$T/a.tif" 128 128 1
"$PYTHON" "$D/mkthreshold.py" "$T/b.tif" 64 64 2
cdp-tile -q --size 32 --label-suffix _mask "$T/a.tif" | cdp-lmdbpack -q "$T/segpool"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/segpool"
cdp-train -q --db "$T/segpool" --keys "$T/keys" --model "$SMALL:channels=1,in_h=32,in_w=32" \
	--out "$T/ce" --steps 8 --batch 4 --threads 1 --lr 0.05 || fail "training (ce) failed"
cdp-train -q --db "$T/segpool" --keys "$T/keys" \
	--model "$SMALL:channels=1,in_h=32,in_w=32,outputs=1,loss=bce" \
	--out "$T/bce" --steps 8 --batch 4 --threads 1 --lr 0.05 || fail "training (bce) failed"

# tr.py IN OUT T [inverse]: OUT = transform T of IN's bands (or, with
# "inverse", the map whose transform T is IN), same georeference
cat >"$T/tr.py" <<'EOF'
import sys, numpy as np
from osgeo import gdal
def fwd(a, t):            # out(y, x) = in(y', x'), predict_tta.c's order
    if t & 4: a = np.swapaxes(a, -1, -2)
    if t & 2: a = a[..., ::-1, :]
    if t & 1: a = a[..., :, ::-1]
    return a
def inv(a, t):
    if t & 1: a = a[..., :, ::-1]
    if t & 2: a = a[..., ::-1, :]
    if t & 4: a = np.swapaxes(a, -1, -2)
    return a
src = gdal.Open(sys.argv[1])
a = src.ReadAsArray()
a = (inv if len(sys.argv) > 4 else fwd)(a, int(sys.argv[3]))
a = np.ascontiguousarray(a).reshape((-1,) + a.shape[-2:])
d = gdal.GetDriverByName("GTiff").Create(sys.argv[2], a.shape[2], a.shape[1], a.shape[0],
                                         src.GetRasterBand(1).DataType)
d.SetGeoTransform(src.GetGeoTransform()); d.SetProjection(src.GetProjection())
for i in range(a.shape[0]):
    d.GetRasterBand(i + 1).WriteArray(a[i])
d = None
EOF
# cmp.py TTA N REF...: TTA's bands equal the mean of the N REF maps
cat >"$T/cmp.py" <<'EOF'
import sys, numpy as np
from osgeo import gdal
tta = gdal.Open(sys.argv[1]).ReadAsArray().astype(np.float64)
refs = [gdal.Open(f).ReadAsArray().astype(np.float64) for f in sys.argv[3:]]
assert len(refs) == int(sys.argv[2])
mean = np.mean(refs, axis=0)
err = np.abs(tta - mean).max()
spread = max(np.abs(r - mean).max() for r in refs)
print("%s: largest difference %.2g from the mean of %d, whose members differ by up to %.2g"
      % (sys.argv[1].rsplit("/", 1)[-1], err, len(refs), spread))
sys.exit(0 if err < 1e-5 and spread > 1e-3 else 1)
EOF

for head in ce bce; do
	for t in 0 1 2 3 4 5 6 7; do
		"$PYTHON" "$T/tr.py" "$T/b.tif" "$T/b$t.tif" $t
		cdp-predict -q --prob --overlap 0 --size 32 --threads 1 "$T/$head" "$T/b$t.tif" \
			-o "$T/p$t.tif" || fail "$head: prediction of transform $t failed"
		"$PYTHON" "$T/tr.py" "$T/p$t.tif" "$T/$head.q$t.tif" $t inverse
	done
	echo "== $head: flips, d4"
	cdp-predict -q --prob --overlap 0 --size 32 --threads 1 --tta flips "$T/$head" "$T/b.tif" \
		-o "$T/$head.flips.tif" || fail "$head: --tta flips failed"
	cdp-predict -q --prob --overlap 0 --size 32 --threads 1 --batch 3 --tta d4 "$T/$head" \
		"$T/b.tif" -o "$T/$head.d4.tif" || fail "$head: --tta d4 failed"
	"$PYTHON" "$T/cmp.py" "$T/$head.flips.tif" 4 "$T/$head".q[0-3].tif ||
		fail "$head: --tta flips is not the mean of the 4 flipped predictions"
	"$PYTHON" "$T/cmp.py" "$T/$head.d4.tif" 8 "$T/$head".q[0-7].tif ||
		fail "$head: --tta d4 is not the mean of the 8 transformed predictions"
done

echo "== the class map, blending, --tta none"
cdp-predict -q --overlap 0 --size 32 --threads 1 --tta d4 "$T/ce" "$T/b.tif" -o "$T/cls.tif"
cdp-predict -q --prob --size 32 --overlap 12 --threads 1 --tta d4 "$T/ce" "$T/b.tif" \
	-o "$T/blend.tif" || fail "--tta d4 with overlap failed"
"$PYTHON" -c "
import numpy as np
from osgeo import gdal
p = gdal.Open('$T/ce.d4.tif').ReadAsArray(); c = gdal.Open('$T/cls.tif').ReadAsArray()
assert (c == p.argmax(0)).all(), 'class map'
b = gdal.Open('$T/blend.tif').ReadAsArray()
assert np.abs(b.sum(0) - 1).max() < 1e-5, 'sums'
" || fail "the TTA class map is not the arg max, or blended probabilities do not sum to 1"
cdp-predict -q --prob --threads 1 "$T/ce" "$T/b.tif" -o "$T/plain.tif"
cdp-predict -q --prob --threads 1 --tta none "$T/ce" "$T/b.tif" -o "$T/none.tif"
cmp -s "$T/plain.tif" "$T/none.tif" || fail "--tta none differs from no --tta"
expect_fail 2 "tta" cdp-predict --tta d8 "$T/ce" "$T/b.tif" -o "$T/x.tif"

echo "== a classifier's chips"
. "$CDP_SRCDIR/tests/predict/chips.sh"
cat >"$T/chiptr.sh" <<EOF
for f in "$T"/F/*/*.tif; do
	c=\${f%/*}; c=\${c##*/}
	mkdir -p "$T/Ft\$1/\$c"
	"$PYTHON" "$T/tr.py" "\$f" "$T/Ft\$1/\$c/\${f##*/}" \$1
done
EOF
for t in 0 1 2 3 4 5 6 7; do
	sh "$T/chiptr.sh" $t
	cdp-predict -q --threads 1 "$T/run" "$T/Ft$t" -o "$T/c$t.csv" || fail "chips $t"
done
cdp-predict -q --threads 1 --batch 3 --tta d4 "$T/run" "$T/F" -o "$T/ctta.csv" ||
	fail "chips: --tta d4 failed"
"$PYTHON" - "$T" <<'EOF' || fail "chips: --tta d4 is not the mean of the 8 transformed chips"
import csv, sys, numpy as np
T = sys.argv[1]
def probs(f):
    rows = list(csv.reader(open(f)))
    return [r[0].rsplit("/", 2)[-2:] for r in rows[1:]], np.array(
        [[float(v) for v in r[2:]] for r in rows[1:]])
names, tta = probs(T + "/ctta.csv")
refs = [probs(T + "/c%d.csv" % t) for t in range(8)]
assert all(n == names for n, _ in refs), "row order"
mean = np.mean([p for _, p in refs], axis=0)
err = np.abs(tta - mean).max()
print("chips: largest difference %.2g from the mean of 8" % err)
assert err < 1e-5 and max(np.abs(p - mean).max() for _, p in refs) > 1e-4
EOF
echo ok
