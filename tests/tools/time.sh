#!/bin/sh
# time.sh: cdp-tile --time (cdp-tile(1), "Several dates"): each tile stacks
# the dates as bands in time order, cut from the same window of every date;
#  - on the first date's grid each date's bands equal gdal_translate
#    -srcwin of that date, and the label the change mask's window;
#  - a date on a finer grid, covering part of the first, equals gdalwarp
#    -r bilinear -dstalpha -wo XSCALE=0.4 -wo YSCALE=0.4 (the grids' pixel
#    ratio, fixed) onto the first date's grid (-te, -ts), and the pixels
#    it does not cover, or where a date holds its nodata, are invalid (the
#    ignore label), for dates of any band count and data type (2 bands of
#    u8, 1 of float32);
#  - --bands selects each date's bands; the stream's source frame and the
#    pool record the dates and the band names t0:b1 ...; the pool's
#    statistics are per date and band (NumPy's means of each date's band);
#  - --label-suffix pairs the label with the first date; --stats takes one
#    line per stacked band;
#  - refusals: one date, a date with other bands or another data type,
#    --time mixed with plain rasters, a date that does not open.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"
B=$CDP_BUILDDIR

"$PYTHON" - <<'EOF'
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
s = osr.SpatialReference()
s.ImportFromEPSG(32633)
WKT = s.ExportToWkt()

def mk(path, a, gt, dt=gdal.GDT_Byte, nodata=None):
    d = gdal.GetDriverByName("GTiff").Create(path, a.shape[2], a.shape[1], a.shape[0], dt)
    d.SetGeoTransform(gt)
    d.SetProjection(WKT)
    for b in range(a.shape[0]):
        d.GetRasterBand(b + 1).WriteArray(a[b])
        if nodata is not None:
            d.GetRasterBand(b + 1).SetNoDataValue(nodata)

rng = np.random.default_rng(7)
H, W = 96, 96
gt = (500000.0, 10, 0, 5000000.0, 0, -10)
a = rng.integers(40, 90, (3, H, W)).astype(np.uint8)
b = a.copy()
ch = np.zeros((H, W), np.uint8)
for k in range(8):
    y, x = rng.integers(0, H - 12, 2)
    b[:, y:y + 10, x:x + 10] = 220
    ch[y:y + 10, x:x + 10] = 1
b[:, 50:53, 5:9] = 0          # date 1's nodata: invalid there only
mk("A.tif", a, gt)
mk("B.tif", b, gt, nodata=0)
mk("change.tif", ch[None], gt)
mk("A_chg.tif", ch[None], gt)
# date 1 on a finer grid (4 m), shifted, covering the first date's top 70 rows
f = np.kron(b.astype(float), np.ones((1, 5, 5)))[:, :, :]
f = (f + rng.integers(0, 9, f.shape)).clip(1, 255).astype(np.uint8)
mk("Bfine.tif", f[:, :175, :], (500000.0 - 1.3, 4, 0, 5000000.0 + 0.7, 0, -4))
mk("C4.tif", rng.integers(0, 255, (4, H, W)).astype(np.uint8), gt)
mk("D16.tif", a.astype(np.uint16), gt, gdal.GDT_UInt16)
# dates of 2 bands of u8 and of 1 band of float32, the second on a grid
# 1e-5 finer in y that covers only the right half: GDAL takes a warp's
# alpha band for the mask only of 2 or 4 bands of Byte or UInt16
for name, nb, dt, npt in (("h2", 2, gdal.GDT_Byte, np.uint8),
                          ("h1f", 1, gdal.GDT_Float32, np.float32)):
    mk(name + "a.tif", rng.integers(1, 250, (nb, H, W)).astype(npt), gt, dt)
    mk(name + "b.tif", rng.integers(1, 250, (nb, H, W // 2)).astype(npt),
       (500480.0, 10, 0, 5000000.0, 0, -10.0001), dt)
EOF

"$B/cdp-tile" -q -s 32 -O same --time A.tif,B.tif --label change.tif
"$B/cdp-tile" -q -s 32 -O fine --time A.tif,Bfine.tif --label change.tif
"$PYTHON" - <<'EOF' || fail "tiles differ from GDAL's windows"
import glob, subprocess, numpy as np
from osgeo import gdal
gdal.UseExceptions()
A = gdal.Open("A.tif").ReadAsArray()
Bd = gdal.Open("B.tif").ReadAsArray()
C = gdal.Open("change.tif").ReadAsArray()
tiles = sorted(glob.glob("same/A_*_*.tif"))
tiles = [t for t in tiles if not t.endswith("_label.tif")]
assert len(tiles) == 9, tiles
for t in tiles:
    d = gdal.Open(t)
    g = d.GetGeoTransform()
    x0, y0 = int(round((g[0] - 500000) / 10)), int(round((5000000 - g[3]) / 10))
    a = d.ReadAsArray()
    lab = gdal.Open(t[:-4] + "_label.tif").ReadAsArray()
    assert a.shape == (6, 32, 32), a.shape
    w = np.s_[y0:y0 + 32, x0:x0 + 32]
    assert (a[:3] == A[(slice(None),) + w]).all(), t + ": date 0"
    assert (a[3:] == Bd[(slice(None),) + w]).all(), t + ": date 1"
    nd = (Bd[(slice(None),) + w] == 0).all(0)
    assert ((lab == 255) == nd).all(), t + ": invalid where date 1 is nodata"
    assert (lab[~nd] == C[w][~nd]).all(), t + ": label"
# the warped date against gdalwarp onto the first date's whole grid, with
# the kernel scaled as cdp-tile fixes it for the grid (4 m pixels under
# 10 m: -wo XSCALE=0.4 -wo YSCALE=0.4), not by gdalwarp's estimate from
# the 175 rows that the 96 rows it covers in part read
ref = gdal.Warp("", "Bfine.tif", format="MEM", outputBounds=[500000, 5000000 - 960,
                500000 + 960, 5000000], width=96, height=96, resampleAlg="bilinear",
                errorThreshold=0.125, dstAlpha=True,
                warpOptions=["XSCALE=0.4", "YSCALE=0.4"]).ReadAsArray().astype(int)
for t in sorted(glob.glob("fine/A_*_*.tif")):
    if t.endswith("_label.tif"):
        continue
    d = gdal.Open(t)
    g = d.GetGeoTransform()
    a = d.ReadAsArray().astype(int)
    lab = gdal.Open(t[:-4] + "_label.tif").ReadAsArray()
    x0, y0 = int(round((g[0] - 500000) / 10)), int(round((5000000 - g[3]) / 10))
    r = ref[:, y0:y0 + 32, x0:x0 + 32]
    valid = r[3] > 0
    assert (a[:3] == A[:, y0:y0 + 32, x0:x0 + 32]).all(), t + ": date 0 warped"
    assert (a[3:][:, valid] == r[:3][:, valid]).all(), t + ": date 1 is not gdalwarp's"
    assert ((lab == 255) == ~valid).all(), t + ": uncovered pixels not invalid"
    assert (lab[valid] == C[y0:y0 + 32, x0:x0 + 32][valid]).all(), t + ": label"
    if y0 == 64:
        assert (~valid).any() and valid.any(), t + ": the bottom row is part covered"
EOF

# any band count and data type: the pixels a warped date does not cover
# are invalid (the ignore label), as gdalwarp -dstalpha's alpha says
for h in h2 h1f; do
	"$B/cdp-tile" -q -s 32 -O "$h" --time "${h}a.tif,${h}b.tif" --label change.tif
	"$PYTHON" - "$h" <<'EOF' || fail "$h: pixels outside the warped date left valid"
import glob, sys, numpy as np
from osgeo import gdal
gdal.UseExceptions()
h = sys.argv[1]
ref = gdal.Warp("", h + "b.tif", format="MEM", outputBounds=[500000, 5000000 - 960,
                500000 + 960, 5000000], width=96, height=96, resampleAlg="bilinear",
                errorThreshold=0.125, dstAlpha=True).ReadAsArray()
valid = ref[-1] > 0
assert valid[:, 48:].all() and not valid[:, :47].any(), "the fixture's coverage"
n = 0
for t in sorted(glob.glob(h + "/" + h + "a_*_*_label.tif")):
    d = gdal.Open(t)
    g = d.GetGeoTransform()
    x0, y0 = int(round((g[0] - 500000) / 10)), int(round((5000000 - g[3]) / 10))
    lab = d.ReadAsArray()
    n += 1
    assert ((lab == 255) == ~valid[y0:y0 + 32, x0:x0 + 32]).all(), t
# the left column of tiles holds no valid pixel: not written
assert n == 6, n
EOF
done

# the stream and the pool: dates, band names, per date and band statistics
"$B/cdp-tile" -q -s 32 --time A.tif,B.tif --label-suffix _chg >s.cdps
"$B/cdp-lmdbpack" -q pool <s.cdps
"$B/cdp-tile" -q -s 32 --bands 3,1 --time A.tif,B.tif --label change.tif | "$B/cdp-lmdbpack" -q pool31
PYTHONPATH=$CDP_SRCDIR/python "$PYTHON" - <<'EOF' || fail "pool meta or statistics"
import numpy as np, cdpool
from osgeo import gdal
p = cdpool.Pool("pool", lock=False)
s = p.sources[0]
assert s["time"] == ["A.tif", "B.tif"], s
assert s["band_names"] == ["t0:b1", "t0:b2", "t0:b3", "t1:b1", "t1:b2", "t1:b3"], s
assert s["band_list"] == [1, 2, 3, 4, 5, 6] and s["label"] == "A_chg.tif", s
assert p.bands == 6 and p.label_kind is not None
A = gdal.Open("A.tif").ReadAsArray().astype(float)
Bd = gdal.Open("B.tif").ReadAsArray().astype(float)
valid = ~(Bd == 0).all(0)
want = [A[k][valid].mean() for k in range(3)] + [Bd[k][valid].mean() for k in range(3)]
assert np.allclose(p.mean, want, rtol=0, atol=1e-6), (p.mean, want)
q = cdpool.Pool("pool31", lock=False).sources[0]
assert q["band_names"] == ["t0:b3", "t0:b1", "t1:b3", "t1:b1"], q
assert q["band_list"] == [3, 1, 6, 4], q
EOF

# --stats: one line per stacked band (a date's bands, then the next date's)
printf '60 10\n60 10\n60 10\n100 50\n100 50\n100 50\n' >stats6
"$B/cdp-tile" -q -s 32 -O std --format tif --standardize --stats stats6 --time A.tif,B.tif
"$PYTHON" - <<'EOF' || fail "--standardize of a multi-date input"
import numpy as np
from osgeo import gdal
a = gdal.Open("std/A_0_0.tif").ReadAsArray()
A = gdal.Open("A.tif").ReadAsArray()[:, :32, :32].astype(float)
Bd = gdal.Open("B.tif").ReadAsArray()[:, :32, :32].astype(float)
v = ~(Bd == 0).all(0)
assert np.allclose(a[:3][:, v], ((A - 60) / 10)[:, v], atol=1e-5)
assert np.allclose(a[3:][:, v], ((Bd - 100) / 50)[:, v], atol=1e-5)
EOF
printf '60 10\n60 10\n60 10\n' >stats3
expect_fail 1 "3 lines of statistics for 6 bands" "$B/cdp-tile" -q -s 32 -O x --standardize --stats stats3 \
	--time A.tif,B.tif
expect_fail 2 "two or more rasters" "$B/cdp-tile" -q --time A.tif
expect_fail 2 "do not mix" "$B/cdp-tile" -q -O x --time A.tif,B.tif C4.tif
expect_fail 1 "every date needs the same bands" "$B/cdp-tile" -q -O x --time A.tif,C4.tif
expect_fail 1 "u16.*every date needs the same bands" "$B/cdp-tile" -q -O x --time A.tif,D16.tif
expect_fail 1 "cannot open date 'nope.tif'" "$B/cdp-tile" -q -O x --time A.tif,nope.tif
[ ! -e x ] || fail "a refused run left its output folder"
exit 0
