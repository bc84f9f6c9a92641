#!/bin/sh
# cdp-evaluate on regression maps (float rasters, the prediction tagged
# CDP_TASK=regression as cdp-predict's regression maps are, or
# --task regression): RMSE, MAE, bias, R-squared and the count over the
# pixels valid in both (NaN and either band's nodata skipped), against an
# independent NumPy computation; 300 rows so the rasters are read in more
# than one band of rows; a reference far from zero (1e6 + small values),
# where a naive sum of squares loses the R-squared; a constant reference
# (R-squared undefined); --png a PNG of the stated size with the histogram
# drawn; and the refusals (a class reference, nothing valid in both, class
# options, --task regression on a CSV, a bad --task).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# mk OUT KIND [TAG]: float rasters of 240x300 made here with NumPy; KIND
# picks the values (see below); TAG "reg" sets CDP_TASK=regression.
mk() {
	"$PYTHON" - "$@" <<'PY'
import sys, numpy as np
from osgeo import gdal
out, kind = sys.argv[1], sys.argv[2]
tag = len(sys.argv) > 3 and sys.argv[3] == "reg"
rng = np.random.default_rng(7)
h, w = 300, 240
y, x = np.mgrid[0:h, 0:w]
ref = (np.sin(x / 17.0) * 3 + y / 40.0).astype(np.float64)
dt, nodata = gdal.GDT_Float32, None
if kind == "ref":            # reference: nodata -9999 in a block, NaN in a stripe
    a = ref.copy(); a[10:20, 30:50] = -9999; a[:, 7] = np.nan; nodata = -9999
elif kind == "pred":         # prediction: the reference plus noise and a bias, NaN here and there
    a = ref + 0.4 * rng.standard_normal(ref.shape) + 0.25; a[150:160, :] = np.nan
elif kind == "bigref":       # float64, far from zero
    a = 1e6 + ref * 1e-3; dt = gdal.GDT_Float64
elif kind == "bigpred":
    a = 1e6 + ref * 1e-3 + 1e-4 * rng.standard_normal(ref.shape); dt = gdal.GDT_Float64
elif kind == "const":
    a = np.full(ref.shape, 5.0)
elif kind == "nan":
    a = np.full(ref.shape, np.nan)
elif kind == "u8":
    a = (ref > 1).astype(np.uint8); dt = gdal.GDT_Byte
d = gdal.GetDriverByName("GTiff").Create(out, w, h, 1, dt)
d.GetRasterBand(1).WriteArray(a)
if nodata is not None:
    d.GetRasterBand(1).SetNoDataValue(nodata)
if tag:
    d.SetMetadataItem("CDP_TASK", "regression")
d = None
PY
}
# check JSON PRED REF: the JSON report against NumPy's figures
check() {
	"$PYTHON" - "$@" <<'PY' || fail "figures of $2 against $3: $(cat "$1")"
import json, sys, numpy as np
from osgeo import gdal
e = json.load(open(sys.argv[1]))
def rd(p):
    ds = gdal.Open(p); b = ds.GetRasterBand(1)
    a = b.ReadAsArray().astype(np.float64); nd = b.GetNoDataValue()
    v = np.isfinite(a) & (a != nd if nd is not None else True)
    if not b.GetMaskFlags() & (gdal.GMF_ALL_VALID | gdal.GMF_NODATA):
        v &= b.GetMaskBand().ReadAsArray() != 0     # GDAL's mask band (.msk, internal)
    return a, v
p, vp = rd(sys.argv[2]); r, vr = rd(sys.argv[3])
v = vp & vr
p, r = p[v], r[v]
d = p - r
ss_tot = ((r - r.mean()) ** 2).sum()
want = {"count": int(v.sum()), "rmse": np.sqrt((d ** 2).mean()), "mae": np.abs(d).mean(),
        "bias": d.mean(), "r2": 1 - (d ** 2).sum() / ss_tot if ss_tot > 0 else None}
assert sorted(e) == ["bias", "count", "mae", "r2", "rmse", "skipped", "task"], sorted(e)
assert e["task"] == "regression" and e["count"] == want["count"], (e, want)
assert e["skipped"] == v.size - want["count"]
for k in ("rmse", "mae", "bias", "r2"):
    if want[k] is None:
        assert e[k] is None, (k, e[k])
    else:
        assert abs(e[k] - want[k]) <= 1e-9 * max(1.0, abs(want[k])), (k, e[k], want[k])
print("ok", want)
PY
}
mk "$T/ref.tif" ref
mk "$T/pred.tif" pred reg
mk "$T/untagged.tif" pred

echo "== tagged map, nodata and NaN skipped"
cdp-evaluate --json "$T/pred.tif" "$T/ref.tif" >"$T/j" || fail "cdp-evaluate --json failed"
cat "$T/j"
check "$T/j" "$T/pred.tif" "$T/ref.tif"
# 300 x 240 = 72000; the nodata block 200, the NaN column 300 (apart from
# the block), the NaN rows 2400 (10 of them in the column): 69110 left
grep -q '"count":69110,"skipped":2890,' "$T/j" || fail "count: $(cat "$T/j")"

echo "== GDAL's mask band: the reference's rows 0-49 (a .msk, beside its nodata), the prediction's columns 0-9 (internal)"
mkdir "$T/m" && cp "$T/ref.tif" "$T/pred.tif" "$T/m/" || fail "masked copies"
"$PYTHON" - "$T/m/ref.tif" "$T/m/pred.tif" <<'PY' || fail "masked fixtures"
import sys, numpy as np
from osgeo import gdal
for path, internal, cut in ((sys.argv[1], "NO", np.s_[0:50, :]), (sys.argv[2], "YES", np.s_[:, 0:10])):
    gdal.SetConfigOption("GDAL_TIFF_INTERNAL_MASK", internal)
    d = gdal.Open(path, gdal.GA_Update); d.CreateMaskBand(gdal.GMF_PER_DATASET)
    m = np.full((300, 240), 255, np.uint8); m[cut] = 0
    d.GetRasterBand(1).GetMaskBand().WriteArray(m); d = None
PY
[ -e "$T/m/ref.tif.msk" ] || fail "no .msk beside the masked reference"
cdp-evaluate --json "$T/m/pred.tif" "$T/m/ref.tif" >"$T/jm" || fail "cdp-evaluate --json (masked) failed"
cat "$T/jm"
check "$T/jm" "$T/m/pred.tif" "$T/m/ref.tif"
grep -q '"count":69110,' "$T/jm" && fail "the mask bands were not applied: $(cat "$T/jm")"

echo "== text"
cdp-evaluate "$T/pred.tif" "$T/ref.tif" >"$T/t" || fail "text report failed"
cat "$T/t"
grep -q '^pixels: 69110 counted, 2890 skipped (invalid in either)$' "$T/t" || fail "pixels line"
"$PYTHON" - "$T/t" "$T/j" <<'PY' || fail "text and JSON figures differ"
import json, sys
e = json.load(open(sys.argv[2]))
t = dict(l.split() for l in open(sys.argv[1]) if not l.startswith("pixels"))
assert sorted(t) == ["bias", "mae", "r2", "rmse"], t
for k in t:
    assert abs(float(t[k]) - e[k]) <= 1e-8 * max(1, abs(e[k])), (k, t[k], e[k])
PY

echo "== --task: the default without the tag is a class map"
# the message names the raster of the value, and for a float map the option
expect_fail 1 "^cdp-evaluate: '$T/untagged.tif': value [-0-9.e]* at pixel (0, 0) is not a class id (a map of values is scored with --task regression)\$" \
	cdp-evaluate "$T/untagged.tif" "$T/ref.tif"
expect_fail 1 "'$T/pred.tif': value .* is not a class id (a map of values" \
	cdp-evaluate --task class "$T/pred.tif" "$T/ref.tif"
cdp-evaluate --json --task regression "$T/untagged.tif" "$T/ref.tif" >"$T/ju" || fail "--task regression failed"
check "$T/ju" "$T/untagged.tif" "$T/ref.tif"

echo "== a reference far from zero (float64)"
mk "$T/bigref.tif" bigref
mk "$T/bigpred.tif" bigpred reg
cdp-evaluate --json "$T/bigpred.tif" "$T/bigref.tif" >"$T/jb" || fail "far from zero failed"
cat "$T/jb"
check "$T/jb" "$T/bigpred.tif" "$T/bigref.tif"

echo "== a constant reference: R-squared undefined"
mk "$T/const.tif" const
cdp-evaluate --json "$T/pred.tif" "$T/const.tif" >"$T/jc" || fail "constant reference failed"
check "$T/jc" "$T/pred.tif" "$T/const.tif"
grep -q '"r2":null}' "$T/jc" || fail "r2 not null: $(cat "$T/jc")"
cdp-evaluate "$T/pred.tif" "$T/const.tif" >"$T/tc" || fail "constant reference, text"
grep -q '^r2    undefined$' "$T/tc" || fail "r2 not undefined: $(cat "$T/tc")"

echo "== --png"
cdp-evaluate --png "$T/h.png" "$T/pred.tif" "$T/ref.tif" >/dev/null || fail "--png failed"
"$PYTHON" - "$T/h.png" <<'PY' || fail "--png: not the histogram PNG"
import struct, sys, numpy as np
from osgeo import gdal
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b[:16]
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (760, 660), (w, h)
ds = gdal.Open(sys.argv[1]); a = ds.ReadAsArray().astype(int)  # (3, h, w)
# the cells: blue (b well above r) inside the plot's panel, along its diagonal
panel = a[:, 56:596, 96:636]
blue = (panel[2] - panel[0] > 60)
assert blue.sum() > 2000, blue.sum()
ys, xs = np.nonzero(blue)
assert np.corrcoef(xs, -ys)[0, 1] > 0.9   # predicted grows with reference
PY

# values a few ulps apart: the axes' tick step is below an ulp of the
# values (the tick loop never advanced: cdp-evaluate hung)
"$PYTHON" - "$T/p1.tif" "$T/r1.tif" <<'PY' || fail "cannot make the ulp maps"
import sys, numpy as np
from osgeo import gdal
a = np.full((4, 4), 1e6); b = a.copy(); b[0, 0] = np.nextafter(1e6, 2e6)
for name, arr in zip(sys.argv[1:], (a, b)):
    ds = gdal.GetDriverByName("GTiff").Create(name, 4, 4, 1, gdal.GDT_Float64)
    ds.SetGeoTransform((0, 1, 0, 4, 0, -1)); ds.GetRasterBand(1).WriteArray(arr); ds = None
PY
timeout 60 cdp-evaluate --task regression --png "$T/h1.png" "$T/p1.tif" "$T/r1.tif" >/dev/null ||
	fail "--png of values an ulp apart: exit $? (124: it hung)"
[ -s "$T/h1.png" ] || fail "--png of values an ulp apart: no PNG"

echo "== refusals"
mk "$T/u8.tif" u8
expect_fail 1 "^cdp-evaluate: '$T/u8.tif' holds u8 values, not a float32 or float64 raster of values that a regression map is scored against\$" \
	cdp-evaluate "$T/pred.tif" "$T/u8.tif"
expect_fail 1 "^cdp-evaluate: '$T/u8.tif' holds u8 values: a regression map is a float32 or float64 raster of values\$" \
	cdp-evaluate --task regression "$T/u8.tif" "$T/ref.tif"
mk "$T/nan.tif" nan
expect_fail 1 "^cdp-evaluate: '$T/pred.tif' and '$T/nan.tif' have no pixel valid in both (all 72000 are NaN or nodata in one): nothing to score\$" \
	cdp-evaluate --png "$T/h2.png" "$T/pred.tif" "$T/nan.tif"
expect_fail 1 "is a regression map: --classes, --ignore and a vector reference are for class maps" \
	cdp-evaluate --classes 3 "$T/pred.tif" "$T/ref.tif"
expect_fail 1 "is a regression map" cdp-evaluate --ignore 0 "$T/pred.tif" "$T/ref.tif"
# asked for by --task, the map is not called a regression map (it was
# said of a u8 class map)
expect_fail 1 "^cdp-evaluate: --task regression scores '$T/u8.tif' as a map of values: --classes, --ignore and a vector reference are for class maps; give a raster of reference values\$" \
	cdp-evaluate --task regression --ignore 9 "$T/u8.tif" "$T/u8.tif"
printf 'path,class\n' >"$T/p.csv"
expect_fail 2 "^cdp-evaluate: --task regression scores a raster, not the CSV '$T/p.csv'\$" \
	cdp-evaluate --task regression "$T/p.csv" "$T"
expect_fail 2 "--task: 'value' is not" cdp-evaluate --task value "$T/pred.tif" "$T/ref.tif"
[ ! -e "$T/h2.png" ] && [ -z "$(ls -A "$T" | grep cdp-tmp)" ] || fail "a PNG or a temporary after a refusal"
# a single value on both sides: the histogram's range is widened, not 0 wide
cdp-evaluate --task regression --png "$T/h3.png" "$T/const.tif" "$T/const.tif" >"$T/t3" || fail "--png of one value"
grep -q '^rmse  0$' "$T/t3" && grep -q '^r2    undefined$' "$T/t3" || fail "one value: $(cat "$T/t3")"
[ -s "$T/h3.png" ] || fail "--png of one value: no PNG"
exit 0
