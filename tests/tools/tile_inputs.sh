#!/bin/sh
# tile_inputs.sh: what cdp-tile makes of its inputs' nodata, georeference
# and colours (cdp-tile(1)):
#  - each band's own nodata: bands whose nodata differ make a pixel
#    invalid where one band holds its own (crosscheck.py), their -O tiles
#    carry no nodata value (a GeoTIFF holds one), the same one is kept;
#  - a nodata value the type cannot hold: --nodata refused naming the file
#    and type; a file's own matched as GDAL's mask matches it (3.5 of u8 is
#    3, 300 nothing) and carried as it was;
#  - --standardize: a valid infinite or NaN pixel, or a value too large to
#    standardize, is an error with --stats as without, each named;
#  - -O tiles of a GCP raster keep its GCPs moved by the tile's offset and
#    their CRS; those of a raster without georeference get none;
#  - a paletted image is refused; a label of another place is refused.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"

"$PYTHON" - <<'PYFX'
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
G = gdal.GetDriverByName("GTiff")
srs = osr.SpatialReference(); srs.ImportFromEPSG(32633)
rng = np.random.default_rng(3)

def make(path, a, dt, gt=(500000, 10, 0, 5800000, 0, -10), nd=None):
    a = a if a.ndim == 3 else a[None]
    d = G.Create(path, a.shape[2], a.shape[1], a.shape[0], dt)
    if gt:
        d.SetGeoTransform(gt)
        d.SetProjection(srs.ExportToWkt())
    for b in range(a.shape[0]):
        d.GetRasterBand(b + 1).WriteArray(a[b])
        if nd is not None:
            d.GetRasterBand(b + 1).SetNoDataValue(nd)
    return d

# two bands, nodata 0 and 7 (a VRT: a GeoTIFF has one for all bands)
a = rng.integers(1, 250, (2, 32, 48)).astype(np.uint8)
a[a == 7] = 8
a[0, :4] = 0            # band 1's nodata only
a[1, 10:12] = 7         # band 2's nodata only
a[0, 20, :8], a[1, 20, :8] = 0, 7   # both
make("pb_raw.tif", a, gdal.GDT_Byte)
v = gdal.Translate("pb.vrt", "pb_raw.tif", format="VRT")
v.GetRasterBand(1).SetNoDataValue(0); v.GetRasterBand(2).SetNoDataValue(7); v = None
# one nodata on every band, 3.5 and 300 on u8
b = rng.integers(0, 8, (3, 32, 48)).astype(np.uint8)
make("same.tif", b, gdal.GDT_Byte, nd=0)
make("frac.tif", b[0], gdal.GDT_Byte, nd=3.5)
make("out.tif", b[0], gdal.GDT_Byte, nd=300)
# float32 with an infinite and a NaN valid pixel; finite f64 extremes
f = rng.normal(0, 1, (32, 48)).astype(np.float32)
make("ok_f32.tif", f, gdal.GDT_Float32)
g = f.copy(); g[5, 5] = np.inf
make("inf_f32.tif", g, gdal.GDT_Float32)
g = f.copy(); g[6, 6] = np.nan
make("nan_f32.tif", g, gdal.GDT_Float32)
h = f.astype(np.float64); h[0, 0] = 1.7e308; h[0, 1] = -1.7e308
make("big_f64.tif", h, gdal.GDT_Float64)
# GCPs only, and no georeference at all
d = make("nogt.tif", b, gdal.GDT_Byte, gt=None)
gcps = [gdal.GCP(500000 + 10 * p, 5800000 - 10 * l, 0, p, l)
        for p, l in ((0, 0), (48, 0), (0, 32), (48, 32))]
d.SetGCPs(gcps, srs.ExportToWkt()); d = None
make("bare.tif", b, gdal.GDT_Byte, gt=None)
# paletted
d = make("pal.tif", b[0], gdal.GDT_Byte)
ct = gdal.ColorTable()
for i in range(256):
    ct.SetColorEntry(i, (i, 255 - i, 0, 255))
d.GetRasterBand(1).SetColorTable(ct); d = None
# labels: elsewhere, and half on the image
make("lab_far.tif", b[0], gdal.GDT_Byte, gt=(600000, 10, 0, 5900000, 0, -10))
make("lab_half.tif", b[0], gdal.GDT_Byte, gt=(500240, 10, 0, 5800000, 0, -10))
PYFX

XC="$PYTHON $CDP_SRCDIR/tests/tools/crosscheck.py"
# --- per-band nodata --------------------------------------------------------
cdp-tile -q -s 16 pb.vrt >pb.s || fail "per-band nodata"
$XC --stream pb.s --raster pb=pb.vrt --size 16 || fail "per-band nodata: crosscheck"
cdp-tile -q -s 16 same.tif >same.s || fail "one nodata"
$XC --stream same.s --raster same=same.tif --size 16 || fail "one nodata: crosscheck"
cdp-tile -q -s 16 -O pbt pb.vrt && cdp-tile -q -s 16 -O samet same.tif ||
	fail "per-band nodata: -O"
"$PYTHON" - <<'PYCK' || fail "per-band nodata: -O tiles"
import numpy as np
from osgeo import gdal
t = gdal.Open("pbt/pb_0_0.tif")
assert [t.GetRasterBand(b).GetNoDataValue() for b in (1, 2)] == [None, None]
m = t.GetRasterBand(1).GetMaskBand().ReadAsArray()
assert (m[:4] == 0).all() and (m[10:12] == 0).all() and (m[4:10] == 255).any(), m
t = gdal.Open("samet/same_0_0.tif")
assert [t.GetRasterBand(b).GetNoDataValue() for b in (1, 2, 3)] == [0, 0, 0]
PYCK
# cdp-lmdbpack --list takes a whole raster as one chip by the same rule:
# its record's mask equals that of the same pixels tiled (the 32x32 tile at 0,0)
for r in pb.vrt frac.tif; do
	echo "$r" >"${r%.*}.txt"
	cdp-lmdbpack -q --list "${r%.*}.txt" "c_${r%.*}" && cdp-tile -q -s 32 "$r" |
		cdp-lmdbpack -q "t_${r%.*}" || fail "per-band nodata: --list $r"
done
"$PYTHON" - "$CDP_SRCDIR" <<'PYLIST' || fail "per-band nodata: --list records"
import sys
sys.path.insert(0, sys.argv[1] + "/python")
import cdpool
for ck in ("pb", "frac"):
    a, b = cdpool.Pool("c_" + ck).record(ck), cdpool.Pool("t_" + ck).record(ck + "_0_0")
    assert a.mask is not None and (a.mask[:, :32] == b.mask).all(), (ck, a.mask, b.mask)
    assert (a.has_nodata, a.nodata) == (b.has_nodata, b.nodata), (ck, a.nodata, b.nodata)
    assert a.has_nodata == (ck == "frac") and (ck == "pb" or a.nodata == 3.5)
PYLIST

# --- nodata values the type cannot hold -------------------------------------
for v in 300 -1 nan 3.5; do
	expect_fail 1 "'same.tif': --nodata $v is not a u8 value" cdp-tile -s 16 --nodata $v same.tif
done
cdp-tile -q -s 16 --nodata 255 same.tif >/dev/null || fail "--nodata 255 of u8 refused"
for f in frac out; do
	cdp-tile -q -s 16 $f.tif >$f.s || fail "$f.tif"
	$XC --stream $f.s --raster $f=$f.tif --size 16 || fail "$f.tif: crosscheck"
	cdp-tile -q -s 16 -O ${f}t $f.tif || fail "$f.tif: -O"
done
"$PYTHON" - <<'PYCK' || fail "a file's own nodata: -O tiles"
import glob
import numpy as np
from osgeo import gdal
for f, nd, text in (("frac", 3.5, "3.5"), ("out", 300, "300")):
    ds = gdal.Open(f + ".tif")
    want = int((ds.GetRasterBand(1).GetMaskBand().ReadAsArray() == 0).sum())
    got = 0
    for t in glob.glob(f + "t/*.tif"):
        td = gdal.Open(t)
        b = td.GetRasterBand(1)
        assert b.GetNoDataValue() == nd, (t, b.GetNoDataValue())
        assert gdal.Info(t).count("NoData Value=" + text) == 1 or nd == 300, t
        got += int((b.GetMaskBand().ReadAsArray() == 0).sum())
    assert got == want, (f, got, want)   # tiles do not overlap at -s 16
PYCK

# --- --standardize: non-finite and too large values -------------------------
printf '0 1\n' >st.txt
cdp-tile -q -s 16 --standardize --stats st.txt ok_f32.tif >/dev/null || fail "--stats"
for st in "" "--stats st.txt"; do
	# shellcheck disable=SC2086
	expect_fail 1 "'inf_f32.tif': band 1 has infinite valid pixels" \
		cdp-tile -s 16 --standardize $st -O o inf_f32.tif
	# shellcheck disable=SC2086
	expect_fail 1 "'nan_f32.tif': band 1 has NaN valid pixels (set --nodata nan" \
		cdp-tile -s 16 --standardize $st -O o nan_f32.tif
	# shellcheck disable=SC2086
	expect_fail 1 "'big_f64.tif': band 1 has values too large to standardize" \
		cdp-tile -s 16 --standardize $st -O o big_f64.tif
done
[ ! -e o ] || fail "a failed --standardize left tiles"
cdp-tile -q -s 16 --standardize --stats st.txt --nodata nan -O o nan_f32.tif ||
	fail "--nodata nan: a NaN pixel is invalid, not an error"

# --- georeference of -O tiles -----------------------------------------------
cdp-tile -q -s 16 -O gcp nogt.tif && cdp-tile -q -s 16 -O bare bare.tif || fail "-O georef"
"$PYTHON" - <<'PYCK' || fail "-O tiles' georeference"
from osgeo import gdal
s = gdal.Open("nogt.tif")
t = gdal.Open("gcp/nogt_1_2.tif")
assert t.GetGeoTransform(can_return_null=True) is None
assert t.GetGCPSpatialRef().IsSame(s.GetGCPSpatialRef())
for a, b in zip(s.GetGCPs(), t.GetGCPs()):
    assert (b.GCPPixel, b.GCPLine) == (a.GCPPixel - 32, a.GCPLine - 16), (b.GCPPixel, b.GCPLine)
    assert (b.GCPX, b.GCPY) == (a.GCPX, a.GCPY)
t = gdal.Open("bare/bare_1_2.tif")
assert t.GetGeoTransform(can_return_null=True) is None and t.GetGCPCount() == 0
PYCK

# --- paletted images, labels elsewhere ---------------------------------------
expect_fail 1 "'pal.tif': band 1 is paletted (colour table indices): expand it first (gdal_translate -expand rgb IN OUT, or a VRT)" \
	cdp-tile -s 16 pal.tif
cdp-tile -q -s 16 --label pal.tif same.tif >/dev/null || fail "a paletted label was refused"
expect_fail 1 "'same.tif': label 'lab_far.tif' does not overlap the image" \
	cdp-tile -s 16 --label lab_far.tif same.tif
cdp-tile -q -s 16 --label lab_half.tif same.tif >/dev/null || fail "a label half on the image"
exit 0
