#!/bin/sh
# value_labels.sh: pixel-regression targets through cdp-tile and
# cdp-lmdbpack (cdp-tile(1) LABELS, cdp-record(5) label kind 4, cdp-pool(5)
# targets):
#  - a float label raster is a value label by default: its tiles are the
#    raster's values as float32, NaN where the label is its band's nodata,
#    NaN or infinite and where the image is invalid;
#  - --label-bands 2,1 takes two targets, in that order (T = 2 planes);
#  - a coarser target warped with --label-resample bilinear equals
#    gdalwarp -r bilinear -et 0 of each tile's window (1e-5), average on a
#    finer one gdalwarp -r average;
#  - through the record stream into a pool: shape label=f32 label_len=2, the
#    records' targets as tiled, and the target statistics (stats and
#    srcstats, read by cdpool's Pool) equal NumPy's over every tile's finite
#    targets;
#  - refusals: class-only options with values and value-only options with
#    classes, a float label as a class label, PNG tiles, a missing target
#    band, a pool of other targets.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"

"$PYTHON" - <<'EOF'
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
s = osr.SpatialReference()
s.ImportFromEPSG(32633)
X0, Y0 = 500000.0, 5000000.0

def mk(path, a, gt, dt=gdal.GDT_Float32, nodata=None, driver="GTiff"):
    a = a[None] if a.ndim == 2 else a
    d = gdal.GetDriverByName(driver).Create(path, a.shape[2], a.shape[1], a.shape[0], dt)
    d.SetGeoTransform(gt)
    d.SetProjection(s.ExportToWkt())
    for b in range(a.shape[0]):
        if nodata is not None:
            d.GetRasterBand(b + 1).SetNoDataValue(nodata)
        d.GetRasterBand(b + 1).WriteArray(a[b])

rng = np.random.default_rng(3)
img = rng.integers(1, 255, size=(3, 40, 56)).astype(np.uint8)
img[:, 0, :5] = 0                           # invalid image pixels (nodata 0)
mk("img.tif", img, (X0, 10, 0, Y0, 0, -10), gdal.GDT_Byte, nodata=0)
yy, xx = np.mgrid[0:40, 0:56]
t1 = (np.sin(xx / 7.0) + yy / 13.0).astype(np.float32)
t1[5, 7] = -9999                            # nodata
t1[9, 20] = np.nan                          # no target
t2 = (xx * 0.5 - yy).astype(np.float32)
t2[11, 3] = 12345                           # band 2's own nodata
t2[12, 4] = np.inf                          # not a target either
# Erdas Imagine: a nodata value per band (a GeoTIFF has one for all)
mk("tgt.img", np.stack([t1, t2]), (X0, 10, 0, Y0, 0, -10), nodata=-9999, driver="HFA")
d = gdal.Open("tgt.img", gdal.GA_Update)
d.GetRasterBand(2).SetNoDataValue(12345)
d = None
# coarser (30 m, shifted 7 m) and finer (2.5 m): smooth, so interpolation shows
cy, cx = np.mgrid[0:16, 0:21]
mk("coarse.tif", (cx * 1.5 + np.cos(cy / 3.0)).astype(np.float32),
   (X0 - 23, 30, 0, Y0 + 7, 0, -30))
fy, fx = np.mgrid[0:170, 0:230]
mk("fine.tif", (fx * 0.1 + fy * 0.05).astype(np.float32), (X0 - 3.7, 2.5, 0, Y0 + 4.1, 0, -2.5))
mk("u8lab.tif", (xx % 3).astype(np.uint8), (X0, 10, 0, Y0, 0, -10), gdal.GDT_Byte)
EOF

cat >cmp.py <<'EOF'
"""cmp.py DIR LABEL BANDS ALG: each DIR/*_label.tif is float32 with the
bands BANDS (1-based, comma-separated) of LABEL: cut from it on the image's
grid (ALG cut: nodata and NaN become NaN) or gdalwarp -r ALG -et 0 of the
tile's window (1e-5); NaN where the image is invalid."""
import glob, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d, lab, bands, alg = sys.argv[1:5]
bands = [int(b) for b in bands.split(",")]
im = gdal.Open("img.tif")
ig = im.GetGeoTransform()
files = sorted(glob.glob(d + "/*_label.tif"))
assert files, "no label tiles"
nan = 0
for f in files:
    t = gdal.Open(f)
    assert t.RasterCount == len(bands), (f, t.RasterCount)
    assert t.GetRasterBand(1).DataType == gdal.GDT_Float32, f
    g, w, h = t.GetGeoTransform(), t.RasterXSize, t.RasterYSize
    got = t.ReadAsArray().reshape(len(bands), h, w)
    xo, yo = round((g[0] - ig[0]) / ig[1]), round((g[3] - ig[3]) / ig[5])
    valid = gdal.Translate("", "img.tif", format="MEM", srcWin=[xo, yo, w, h]).ReadAsArray()
    valid = (valid != 0).any(axis=0)
    if alg == "cut":
        # --edge pad: padding (outside the label) is NaN
        src = gdal.Open(lab)
        cw, ch = min(w, src.RasterXSize - xo), min(h, src.RasterYSize - yo)
        ref = np.full((len(bands), h, w), np.nan)
        for i, b in enumerate(bands):
            ref[i, :ch, :cw] = src.GetRasterBand(b).ReadAsArray(xo, yo, cw, ch)
            nd = src.GetRasterBand(b).GetNoDataValue()
            if nd is not None:
                ref[i][ref[i] == nd] = np.nan
        ref[~np.isfinite(ref)] = np.nan
    else:
        ref = gdal.Warp("", lab, format="MEM", errorThreshold=0,
                        outputBounds=(g[0], g[3] + h * g[5], g[0] + w * g[1], g[3]),
                        width=w, height=h, resampleAlg=alg, dstNodata=np.nan,
                        outputType=gdal.GDT_Float32).ReadAsArray()
        ref = ref.reshape(len(bands), h, w).astype(np.float64)
    ref[:, ~valid] = np.nan
    assert (np.isnan(got) == np.isnan(ref)).all(), "%s: NaN where GDAL has none or back" % f
    ok = ~np.isnan(ref)
    err = np.abs(got[ok] - ref[ok]).max() if ok.any() else 0
    assert err <= 1e-5 * max(1, np.abs(ref[ok]).max()), "%s: off by %g" % (f, err)
    nan += int(np.isnan(got).sum())
print(nan)
EOF

# on the image's grid: the float label is a value label by itself
cdp-tile -q -s 16 -O same --label tgt.img img.tif || fail "cdp-tile --label tgt.img"
n=$("$PYTHON" cmp.py same tgt.img 1 cut) || fail "value tiles differ from the label"
[ "$n" -ge 7 ] || fail "value tiles: only $n NaN (nodata, NaN, invalid image pixels)"
cdp-tile -q -s 16 -O two --label tgt.img --label-bands 2,1 --edge pad img.tif ||
	fail "--label-bands 2,1"
"$PYTHON" cmp.py two tgt.img 2,1 cut >/dev/null || fail "--label-bands 2,1: tiles differ"
# warped: bilinear from a coarser target, average from a finer one
cdp-tile -q -s 16 -O bil --label coarse.tif --label-resample bilinear \
	--label-error-threshold 0 img.tif || fail "--label-resample bilinear"
"$PYTHON" cmp.py bil coarse.tif 1 bilinear >/dev/null || fail "bilinear differs from gdalwarp's"
"$PYTHON" cmp.py bil coarse.tif 1 near >/dev/null 2>&1 && fail "bilinear gave nearest's values"
cdp-tile -q -s 16 -O avg --label fine.tif --label-resample average --label-kind value \
	--label-error-threshold 0 img.tif || fail "--label-resample average"
"$PYTHON" cmp.py avg fine.tif 1 average >/dev/null || fail "average differs from gdalwarp's"
cdp-tile -q -s 16 -O cub --label coarse.tif --label-resample cubic \
	--label-error-threshold 0 img.tif || fail "--label-resample cubic"
"$PYTHON" cmp.py cub coarse.tif 1 cubic >/dev/null || fail "cubic differs from gdalwarp's"

# into a pool: records, shape and target statistics
cdp-tile -q -s 16 --label tgt.img --label-bands 2,1 --name a img.tif >a.cdps || fail "stream a"
cp img.tif img2.tif   # another source (a source is its path)
cdp-tile -q -s 16 --label tgt.img --label-bands 2,1 --name b --overlap 4 img2.tif >b.cdps ||
	fail "stream b"
cdp-lmdbpack -q pool <a.cdps || fail "cdp-lmdbpack a"
cdp-lmdbpack -q pool <b.cdps || fail "cdp-lmdbpack b"
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - <<'EOF' || fail "the pool's targets or their statistics"
import numpy as np
from cdpool.pool import Pool
from cdpool import record
p = Pool("pool")
assert p.label_kind == "f32" and p.label_len == 2, (p.label_kind, p.label_len)
assert "label_len=2" in p.meta["shape"], p.meta["shape"]
allt = {0: [], 1: []}
for k in p.keys():
    img, lab = p[k]
    assert lab.shape == (2, 16, 16) and lab.dtype == np.float32, lab.shape
    src = 0 if k.startswith("a") else 1
    allt[src].append(lab)
def check(st, labs, what):
    a = np.stack(labs)
    assert len(st) == 2, what
    for t in range(2):
        v = a[:, t][np.isfinite(a[:, t])].astype(np.float64)
        want = (v.size, v.mean(), v.std(), v.min(), v.max())
        got = tuple(st[t][n] for n in ("count", "mean", "std", "min", "max"))
        assert got[0] == want[0], (what, t, got, want)
        assert np.allclose(got[1:], want[1:], rtol=1e-9, atol=1e-9), (what, t, got, want)
check(p.target_stats, allt[0] + allt[1], "stats")
# per source, in the srcstats text
for s in (0, 1):
    text = p.meta["srcstats.%06d" % s]
    assert "targets=2\n" in text, text
    f = dict(l.split("=", 1) for l in text.splitlines())
    st = [{n: float(f["target.%d.%s" % (t + 1, n)]) for n in ("count", "mean", "std", "min", "max")}
          for t in range(2)]
    check(st, allt[s], "srcstats.%d" % s)
# the same values as tiled (band 2 first), each band's nodata NaN
first = sorted(p.keys())[0]
assert np.isnan(p[first][1][1][5, 7]), "band 1's nodata target is not NaN"
assert np.isnan(p[first][1][0][11, 3]), "band 2's nodata target is not NaN"
assert np.isnan(p[first][1][0][12, 4]), "an infinite target is not NaN"
EOF

# refusals
expect_fail 1 "need u8 or u16 for class labels" \
	cdp-tile -s 16 --label-kind class --label tgt.img img.tif
expect_fail 2 "are for value labels" \
	cdp-tile -s 16 --label-kind class --label u8lab.tif --label-resample bilinear img.tif
expect_fail 2 "mode is for class labels" \
	cdp-tile -s 16 --label-kind value --label tgt.img --label-resample mode img.tif
expect_fail 1 "mode is for class labels" \
	cdp-tile -s 16 --label tgt.img --label-resample mode img.tif
expect_fail 2 "--ignore is for class labels" \
	cdp-tile -s 16 --label-kind value --ignore 3 --label tgt.img img.tif
expect_fail 2 "--label-bands takes targets of a value label" \
	cdp-tile -s 16 --label-kind class --label-bands 1 --label u8lab.tif img.tif
expect_fail 1 "target band 3 requested, it has 2" \
	cdp-tile -s 16 --label-bands 3 --label tgt.img img.tif
expect_fail 1 "needs float tiles (use --format tif)" \
	cdp-tile -s 16 -O png --format png --label tgt.img img.tif
expect_fail 2 "--label-kind: 'float'" cdp-tile -s 16 --label-kind float --label tgt.img img.tif
# a u8 raster taken as values
cdp-tile -q -s 16 -O u8v --label-kind value --label u8lab.tif img.tif || fail "u8 as values"
"$PYTHON" cmp.py u8v u8lab.tif 1 cut >/dev/null || fail "u8 values differ"
# a pool of two targets takes no record of one
cdp-tile -q -s 16 --label tgt.img --name c img.tif >c.cdps || fail "stream c"
expect_fail 1 "label f32 (1 target); the pool holds .*label f32 (2 targets)" \
	cdp-lmdbpack -q pool <c.cdps
# cdp-train (built with MPI) refuses a class loss on a value pool instead of
# misreading its targets as class ids (tests/train/regression.sh trains one)
if [ -x "$CDP_BUILDDIR/cdp-train" ]; then
	cdp-keyshuffle -q -o k.keys pool || fail "cdp-keyshuffle of a value pool"
	expect_fail 1 "'pool' holds value labels (2 targets a pixel): train it with \\[net\\] loss=mse, l1 or huber" \
		cdp-train --db pool --keys k.keys --model "$CDP_SRCDIR/tests/train/small.cfg" \
		--out run --steps 1 -q
fi
exit 0
