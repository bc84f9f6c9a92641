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
#  - a GCP label or --time date with the image's GCPs is cut on its grid,
#    one whose GCPs lie elsewhere or in another CRS is refused in one line
#    naming both files and the first GCP that differs (never cut pixel for
#    pixel); one without any georeference is cut on the image's grid;
#  - -O tiles keep the RPCs with LINE_OFF and SAMP_OFF moved by the tile's
#    offset (as gdal_translate -srcwin), and each band's scale, offset,
#    unit and description (a VRT's too), but not with --standardize;
#  - a label pixel that the label's GDAL mask (.msk) marks invalid is the
#    ignore value;
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
# labels by GCPs: the image's, 5 km away, the same place in EPSG:4326
def gcp_label(path, g, crs):
    d = make(path, b[0], gdal.GDT_Byte, gt=None); d.SetGCPs(g, crs.ExportToWkt()); d = None
gcp_label("gl_same.tif", gcps, srs)
gcp_label("gl_far.tif", [gdal.GCP(g.GCPX + 5000, g.GCPY, 0, g.GCPPixel, g.GCPLine)
                         for g in gcps], srs)
wgs = osr.SpatialReference(); wgs.ImportFromEPSG(4326)
gcp_label("gl_4326.tif", [gdal.GCP(15 + g.GCPPixel * 1e-4, 52 - g.GCPLine * 1e-4, 0,
                                   g.GCPPixel, g.GCPLine) for g in gcps], wgs)
d = make("nogt_far.tif", b, gdal.GDT_Byte, gt=None)
d.SetGCPs([gdal.GCP(g.GCPX + 5000, g.GCPY, 0, g.GCPPixel, g.GCPLine) for g in gcps],
          srs.ExportToWkt()); d = None
# RPCs only; scale, offset, unit and description on a GeoTIFF and a VRT
d = make("rpc.tif", b, gdal.GDT_Byte, gt=None)
z = "0 " * 17
d.SetMetadata({"LINE_OFF": "16", "SAMP_OFF": "24", "LAT_OFF": "52.3", "LONG_OFF": "15",
               "HEIGHT_OFF": "0", "LINE_SCALE": "16", "SAMP_SCALE": "24",
               "LAT_SCALE": "0.001", "LONG_SCALE": "0.001", "HEIGHT_SCALE": "100",
               "LINE_NUM_COEFF": "0 0 -1 " + z, "LINE_DEN_COEFF": "1 " + "0 " * 19,
               "SAMP_NUM_COEFF": "0 1 0 " + z, "SAMP_DEN_COEFF": "1 " + "0 " * 19}, "RPC")
d = None
d = make("scaled.tif", b[:2].astype(np.int16), gdal.GDT_Int16)
for i, (sc, of) in enumerate(((0.0001, -0.1), (2.5, 3))):
    d.GetRasterBand(i + 1).SetScale(sc); d.GetRasterBand(i + 1).SetOffset(of)
    d.GetRasterBand(i + 1).SetUnitType("m"); d.GetRasterBand(i + 1).SetDescription("b%d" % i)
d = None
v = gdal.Translate("scaled_raw.vrt", "same.tif", format="VRT", bandList=[1])
v.GetRasterBand(1).SetScale(0.5); v.GetRasterBand(1).SetOffset(10); v = None
# a label whose GDAL mask (a .msk) leaves out its first 4 rows
d = make("lab_msk.tif", np.ones((32, 48), np.uint8), gdal.GDT_Byte)
d.CreateMaskBand(gdal.GMF_PER_DATASET)
m = np.full((32, 48), 255, np.uint8); m[:4] = 0
d.GetRasterBand(1).GetMaskBand().WriteArray(m); d = None
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

# --- labels and dates placed by GCPs ----------------------------------------
cdp-tile -q -s 16 -O gl --label gl_same.tif nogt.tif || fail "a label with the image's GCPs"
[ "$(ls gl | grep -c _label)" -eq 6 ] || fail "GCP label tiles: $(ls gl)"
cdp-tile -q -s 16 --label bare.tif nogt.tif >/dev/null || fail "a label without georeference"
expect_fail 1 "^cdp-tile: 'nogt.tif': label 'gl_far.tif' has other GCPs than the image (GCP 1 is pixel 0 line 0 at (500000, 5800000) against pixel 0 line 0 at (505000, 5800000)): not the same georeference, and labels are warped only by a geotransform\$" \
	cdp-tile -s 16 -O glx --label gl_far.tif nogt.tif
expect_fail 1 "^cdp-tile: 'nogt.tif': label 'gl_4326.tif' has other GCPs than the image (GCPs in CRS EPSG:32633 against EPSG:4326): not the same georeference, and labels are warped only by a geotransform\$" \
	cdp-tile -s 16 -O glx --label gl_4326.tif nogt.tif
cdp-tile -q -s 16 --time nogt.tif,nogt.tif >/dev/null || fail "--time dates with the same GCPs"
expect_fail 1 "^cdp-tile: --time 'nogt.tif,nogt_far.tif': date 'nogt_far.tif' has other GCPs than the first date (GCP 1 is pixel 0 line 0 at (500000, 5800000) against pixel 0 line 0 at (505000, 5800000)): not the same georeference, and dates are warped only by a geotransform\$" \
	cdp-tile -s 16 -O glx --time nogt.tif,nogt_far.tif
[ ! -e glx ] || fail "a refused GCP label or date left tiles"

# --- RPCs, scale and offset of -O tiles -------------------------------------
cdp-tile -q -s 16 -O rpc rpc.tif && gdal_translate -q -srcwin 32 16 16 16 rpc.tif rpc_gt.tif &&
	cdp-tile -q -s 16 -O sc scaled.tif scaled_raw.vrt &&
	cdp-tile -q -s 16 --standardize -O scs scaled.tif || fail "-O RPC, scale"
"$PYTHON" - <<'PYCK' || fail "-O tiles' RPCs, scale and offset"
from osgeo import gdal
t, g = gdal.Open("rpc/rpc_1_2.tif").GetMetadata("RPC"), gdal.Open("rpc_gt.tif").GetMetadata("RPC")
assert float(t["LINE_OFF"]) == 0 and float(t["SAMP_OFF"]) == -8, t
assert {k: float(t[k]) for k in t if "COEFF" not in k} == {k: float(g[k]) for k in g if "COEFF" not in k}, (t, g)
t = gdal.Open("sc/scaled_1_1.tif")
for i, (sc, of) in enumerate(((0.0001, -0.1), (2.5, 3))):
    b = t.GetRasterBand(i + 1)
    assert (b.GetScale(), b.GetOffset(), b.GetUnitType(), b.GetDescription()) == (sc, of, "m", "b%d" % i)
d = gdal.Open("sc/scaled_raw_0_0.tif"); b = d.GetRasterBand(1)
assert (b.GetScale(), b.GetOffset()) == (0.5, 10), (b.GetScale(), b.GetOffset())
d = gdal.Open("scs/scaled_0_0.tif"); b = d.GetRasterBand(1)
assert b.GetScale() in (None, 1) and b.GetOffset() in (None, 0), "standardized values keep no scale"
PYCK

# --- a label's GDAL mask -----------------------------------------------------
cdp-tile -q -s 16 -O lm --label lab_msk.tif ok_f32.tif || fail "a masked label"
"$PYTHON" - <<'PYCK' || fail "masked label pixels are not the ignore value"
from osgeo import gdal
a = gdal.Open("lm/ok_f32_0_0_label.tif").ReadAsArray()
assert (a[:4] == 255).all() and (a[4:] == 1).all(), a
PYCK

# --- paletted images, labels elsewhere ---------------------------------------
expect_fail 1 "'pal.tif': band 1 is paletted (colour table indices): expand it first (gdal_translate -expand rgb IN OUT, or a VRT)" \
	cdp-tile -s 16 pal.tif
cdp-tile -q -s 16 --label pal.tif same.tif >/dev/null || fail "a paletted label was refused"
expect_fail 1 "'same.tif': label 'lab_far.tif' does not overlap the image" \
	cdp-tile -s 16 --label lab_far.tif same.tif
cdp-tile -q -s 16 --label lab_half.tif same.tif >/dev/null || fail "a label half on the image"
exit 0
