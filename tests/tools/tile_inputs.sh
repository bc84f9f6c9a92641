#!/bin/sh
# tile_inputs.sh: what cdp-tile makes of its inputs' nodata, georeference
# and colours (cdp-tile(1)):
#  - each band's own nodata: bands whose nodata differ make a pixel
#    invalid where one band holds its own (crosscheck.py), their -O tiles
#    carry no nodata value (a GeoTIFF holds one), the same one is kept;
#  - a nodata value the type cannot hold: --nodata refused naming the file
#    and type (with its article: "an i16"); a file's own matched as GDAL's mask matches it (3.5 of u8 is
#    3, 300 nothing) and carried as it was;
#  - --standardize: a valid infinite or NaN pixel, or a value too large to
#    standardize, is an error with --stats as without, each named;
#  - -O tiles of a GCP raster keep its GCPs moved by the tile's offset and
#    their CRS; those of a raster without georeference get none;
#  - a GCP label or --time date with the image's GCPs is cut on its grid,
#    one without any georeference too; one placed elsewhere (other GCPs, a
#    geotransform) is warped through the GCPs as gdalwarp warps it: an
#    image's twin placed by GCPs that encode its geotransform exactly gets
#    the label tiles of the image (a raster label on another grid, one in
#    EPSG:4326, a value label, a label itself placed by GCPs, with a
#    --label-map too, --tps, a vector label) and its --time date's warp;
#    --tps is in label_options where GCPs placed the label;
#    gdalwarp [-tps]'s warp of a label placed by GCPs no affine fits; a
#    label elsewhere is refused as not overlapping, a date elsewhere
#    leaves every tile dropped; on an image placed by GCPs no affine fits
#    a label on its corner is taken (as gdalwarp labels it) and one off
#    it refused, and overlapping tiles agree on the pixels they share
#    (bilinear, mode); a GCP that is not a number is refused naming it,
#    as is a geotransform that is not finite (or whose corners are not),
#    before the stream starts;
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
# warps through GCPs: an image of 10 m pixels; classes and values on a grid
# of 7 m pixels shifted so that no image pixel centre falls on a label
# pixel edge (nearest and mode are then not decided by rounding); features
make("geo.tif", rng.integers(1, 250, (3, 64, 96)).astype(np.uint8), gdal.GDT_Byte)
g7 = (499990.5, 7, 0, 5800012.25, 0, -7)
make("lab7.tif", rng.integers(0, 5, (100, 150)).astype(np.uint8), gdal.GDT_Byte, gt=g7)
make("val7.tif", rng.normal(0, 1, (100, 150)).astype(np.float32), gdal.GDT_Float32, gt=g7)
from osgeo import ogr
v = ogr.GetDriverByName("GeoJSON").CreateDataSource("feat.geojson")
lay = v.CreateLayer("feat", srs, ogr.wkbPolygon)
lay.CreateField(ogr.FieldDefn("cls", ogr.OFTInteger))
for i in range(12):
    x, y, r = 500000 + rng.uniform(-50, 900), 5800000 - rng.uniform(-50, 600), rng.uniform(20, 200)
    f = ogr.Feature(lay.GetLayerDefn()); f.SetField("cls", i % 4 + 1)
    f.SetGeometry(ogr.CreateGeometryFromWkt("POLYGON((%r %r,%r %r,%r %r,%r %r))" % (
        x, y, x + r, y + r / 3, x + r / 2, y - r, x, y)))
    lay.CreateFeature(f)
v = None
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
# each type with its article ("is not a i16 value" read wrong)
for t in Int16:i16 Int32:i32 UInt16:u16 UInt32:u32 Float32:f32; do
	gdal_translate -q -ot "${t%:*}" same.tif "t_${t#*:}.tif"
	case ${t#*:} in u*) a=a ;; *) a=an ;; esac
	expect_fail 1 "^cdp-tile: 't_${t#*:}.tif': --nodata 1e+300 is not $a ${t#*:} value\$" \
		cdp-tile -s 16 --nodata 1e300 "t_${t#*:}.tif"
done
expect_fail 1 "^cdp-tile: 't_i16.tif': --nodata nan is not an i16 value\$" \
	cdp-tile -s 16 --nodata nan t_i16.tif
# a stem too long for a tile name says so (it said only "cannot make a tile
# name from the file name")
long=$(printf '%0201d' 0)
cp same.tif "$long.tif"
expect_fail 1 "^cdp-tile: '$long.tif': cannot make a tile name from the file name: without its extension it is longer than the 200 characters of a tile name (use --name)\$" \
	cdp-tile -s 16 "$long.tif"
cdp-tile -q -s 16 --name long "$long.tif" >/dev/null || fail "--name did not name a long file's tiles"
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
cdp-tile -q -s 16 --time nogt.tif,nogt.tif >/dev/null || fail "--time dates with the same GCPs"
# a date of another place, as one with a geotransform: nothing valid
cdp-tile -s 16 --time nogt.tif,nogt_far.tif >/dev/null 2>err.far || fail "--time far GCPs"
grep -q " 0 tiles written, 6 dropped" err.far || fail "--time far GCPs: $(cat err.far)"

# The twin of geo.tif placed by GCPs at its corners and centre that encode
# its geotransform exactly, without one; lab7.tif, its warp into EPSG:4326
# and d7.tif (geo.tif warped onto lab7.tif's grid, a --time date) placed
# by GCPs the same way. 5 GCPs make GDAL's automatic polynomial order 1, a
# least-squares affine that is the geotransform to rounding, and the thin
# plate spline through them is that affine too: tiles equal to the last
# bit (values to 1e-5, which rounding could reach).
gcps() {   # gcps W H GT0 GT1 GT3 GT5: -gcp at the corners and the centre
	awk -v w="$1" -v h="$2" -v x="$3" -v px="$4" -v y="$5" -v py="$6" 'BEGIN {
		split("0 0 1 0 0 1 1 1 0.5 0.5", f)
		for (i = 1; i < 10; i += 2)
			printf "-gcp %.17g %.17g %.17g %.17g ", f[i] * w, f[i + 1] * h,
			       x + f[i] * w * px, y + f[i + 1] * h * py }'
}
gdalwarp -q -t_srs EPSG:4326 -r near lab7.tif lab4326.tif &&
	gdalwarp -q -tr 7 7 -te 499990.5 5799312.25 500640.5 5800012.25 geo.tif d7.tif &&
	# shellcheck disable=SC2046
	gdal_translate -q -a_srs EPSG:32633 $(gcps 96 64 500000 10 5800000 -10) geo.tif twin.tif &&
	# shellcheck disable=SC2046
	gdal_translate -q -a_srs EPSG:32633 $(gcps 150 100 499990.5 7 5800012.25 -7) lab7.tif \
		lab7g.tif &&
	# shellcheck disable=SC2046
	gdal_translate -q -a_srs EPSG:32633 $(gcps 93 100 499990.5 7 5800012.25 -7) d7.tif \
		d7g.tif || fail "GCP twins"
# other GCPs are warped through (gl_far.tif and gl_4326.tif lie 5 km and
# 37 km away); IMAGE LABEL WHY: cdp-tile refuses LABEL on IMAGE saying WHY
nothing="nothing places the label on the image's grid"
while read -r img lab why; do
	expect_fail 1 "^cdp-tile: '$img': label '$lab' $why\$" \
		cdp-tile -s 16 -O glx --label "$lab" "$img" </dev/null
done <<EOF
nogt.tif gl_far.tif does not overlap the image
nogt.tif gl_4326.tif does not overlap the image
twin.tif lab_far.tif does not overlap the image
bare.tif lab7.tif has a geotransform, the image neither a geotransform nor GCPs: $nothing
twin.tif bare.tif has neither a geotransform nor GCPs, the image has GCPs: $nothing
bare.tif lab7g.tif has GCPs, the image neither a geotransform nor GCPs: $nothing
EOF
[ ! -e glx ] || fail "a refused label placed by GCPs, or of a GCP image, left tiles"
"$PYTHON" - <<'PYCK' || fail "GCP twins are placed by GCPs only"
from osgeo import gdal
for f in ("twin.tif", "lab7g.tif", "d7g.tif"):
    d = gdal.Open(f)
    assert d.GetGeoTransform(can_return_null=True) is None and d.GetGCPCount() == 5, f
PYCK
cat >same_tiles.py <<'PYCK'
"""same_tiles.py A B GLOB [ATOL]: every GLOB tile of A is the same tile of B
(NaN matching NaN, values to 1e-5, or to ATOL in at most 1% of them), and
A's labels are not all one value."""
import glob, os, sys
import numpy as np
from osgeo import gdal
a, b, pat = sys.argv[1:4]
atol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
files = sorted(glob.glob(os.path.join(a, pat)))
assert files, "no tiles in " + a
seen = set()
for f in files:
    da, db = gdal.Open(f), gdal.Open(os.path.join(b, os.path.basename(f)))
    x, y = da.ReadAsArray().astype(float), db.ReadAsArray().astype(float)
    assert np.allclose(x, y, rtol=0, atol=atol, equal_nan=True), (f, np.argwhere(x != y)[:5])
    assert (~np.isclose(x, y, rtol=0, atol=1e-5, equal_nan=True)).mean() <= 0.01, (f, "ties")
    for k in range(1, da.RasterCount + 1):
        mx = da.GetRasterBand(k).GetMaskBand().ReadAsArray()
        assert (mx == db.GetRasterBand(k).GetMaskBand().ReadAsArray()).all(), (f, "mask")
    seen |= set(np.unique(x[np.isfinite(x)]).tolist()[:8])
assert len(seen) > 2, (a, seen)
PYCK
# twin NAME OPTIONS...: geo.tif and twin.tif tiled alike into gt_NAME and gcp_NAME
twin() {
	n=$1; shift
	cdp-tile -q -s 32 --name s -O "gt_$n" "$@" geo.tif &&
		cdp-tile -q -s 32 --name s -O "gcp_$n" "$@" twin.tif || fail "twin $n: tiling"
	"$PYTHON" same_tiles.py "gt_$n" "gcp_$n" '*_label.tif' || fail "twin $n: label tiles differ"
}
twin near --label lab7.tif
twin mode --label lab7.tif --label-resample mode
twin 4326 --label lab4326.tif
twin value --label val7.tif --label-resample bilinear
twin tps --label lab7.tif --tps
twin gcplab --label lab7g.tif
twin gcptps --label lab7g.tif --tps
# a label map's renumbered view of a label placed by GCPs is placed by them
twin gcpmap --label lab7g.tif --label-map 0:0,1:1,2:1,3:2,4:2 --label-resample mode
twin vector --label feat.geojson --label-field cls
twin touched --label feat.geojson --label-field cls --all-touched --tps
# --tps is in the source's label_options where GCPs placed the label, and
# only there (between two geotransforms it changes nothing)
cdp-tile -q -s 32 --tps --label lab7.tif twin.tif >tps.cdps &&
	cdp-tile -q -s 32 --tps --label lab7.tif geo.tif >tps_gt.cdps || fail "--tps streams"
grep -a -q "^label_options=--tps\$" tps.cdps || fail "--tps is not in the label options"
! grep -a -q "^label_options=" tps_gt.cdps || fail "--tps recorded where no GCP placed the label"
# a label placed by GCPs on the geotransformed image: as the label itself
"$PYTHON" same_tiles.py gt_near gt_gcplab '*_label.tif' || fail "a label placed by GCPs"
# GCPs that no affine fits (the centre one 20 m off): the label placed by
# them is cut as gdalwarp [-tps] -et 0 warps it onto geo.tif's grid, and
# the spline differs from the polynomial
# shellcheck disable=SC2046
gdal_translate -q -a_srs EPSG:32633 $(gcps 150 100 499990.5 7 5800012.25 -7 |
	sed 's/ 5799662.25 / 5799642.25 /') lab7.tif lab7b.tif || fail "bent GCPs"
grep -q 5799642.25 lab7b.tif.aux.xml 2>/dev/null || gdalinfo lab7b.tif | grep -q 5799642.25 ||
	fail "bent GCPs: the centre GCP was not moved"
for m in poly tps; do
	opt=; [ $m = poly ] || opt=--tps
	# shellcheck disable=SC2086
	cdp-tile -q -s 32 --name s -O "b_$m" --label lab7b.tif --label-error-threshold 0 $opt \
		geo.tif || fail "bent GCPs: $m tiles"
	# shellcheck disable=SC2086
	gdalwarp -q -et 0 -r near ${opt:+-tps} -te 500000 5799360 500960 5800000 -tr 10 10 \
		-dstnodata 255 -ot Byte lab7b.tif "b_$m.tif" || fail "bent GCPs: gdalwarp $m"
done
"$PYTHON" - <<'PYCK' || fail "bent GCPs: not gdalwarp's warp"
import numpy as np
from osgeo import gdal
got = {}
for m in ("poly", "tps"):
    want = gdal.Open("b_%s.tif" % m).ReadAsArray()
    a = np.zeros_like(want)
    for r in range(2):
        for c in range(3):
            a[32 * r:32 * r + 32, 32 * c:32 * c + 32] = \
                gdal.Open("b_%s/s_%d_%d_label.tif" % (m, r, c)).ReadAsArray()
    assert (a == want).all(), (m, np.argwhere(a != want)[:5])
    got[m] = a
assert (got["poly"] != got["tps"]).mean() > 0.05, "--tps changed nothing"
PYCK
for d in d7 d7g; do
	for i in geo twin; do
		cdp-tile -q -s 32 --name s -O "t_${i}_$d" --time "$i.tif,$d.tif" ||
			fail "--time $i.tif,$d.tif"
	done
done
# (to 1 in a few pixels: bilinear at the grid's fixed scale, 0.7 here,
# gives values of exactly x.5 that a GCP polynomial's 1e-9 rounds either way)
for o in t_twin_d7 t_geo_d7g t_twin_d7g; do
	"$PYTHON" same_tiles.py t_geo_d7 "$o" '*.tif' 1 || fail "--time: $o differs from t_geo_d7"
done

# An image placed by 12 GCPs that no affine fits (order 2): whether a label
# overlaps it is decided as the warp goes, from the image's pixels by the
# forward polynomial, not back by the separately fitted inverse one, which
# missed a label on the image's corner and took one 1 km off for on it.
# A GCP that is not a number is refused naming it.
"$PYTHON" - <<'PYFX' || fail "bent GCP fixtures"
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
W, H = 200, 150
s = osr.SpatialReference(); s.ImportFromEPSG(32633)
def ground(p, l):
    return (500000 + 10 * p + 3 * (p - W / 2) * (l - H / 2) / 50,
            5800000 - 10 * l + 3 * (p - W / 2) ** 2 / 200)
gc = [gdal.GCP(*ground(p, l), 0, p, l) for p in np.linspace(0, W, 4) for l in np.linspace(0, H, 3)]
G = gdal.GetDriverByName("GTiff")
d = G.Create("bent.tif", W, H, 1); d.SetGCPs(gc, s.ExportToWkt())
d.GetRasterBand(1).WriteArray(np.full((H, W), 9, np.uint8)); d = None
d = G.Create("bentnan.tif", W, H, 1)
d.SetGCPs(gc[:3] + [gdal.GCP(float("nan"), gc[3].GCPY, 0, gc[3].GCPPixel, gc[3].GCPLine)] + gc[4:],
          s.ExportToWkt()); d = None
for name, gt, n in (("corner", (501800, 10, 0, 5799800, 0, -10), 20),
                    ("off", (502950, 10, 0, 5800040, 0, -10), 224)):
    d = G.Create("lab_%s.tif" % name, n, n, 1); d.SetGeoTransform(gt)
    d.SetProjection(s.ExportToWkt())
    d.GetRasterBand(1).WriteArray(np.full((n, n), 3, np.uint8)); d = None
PYFX
cdp-tile -q -s 64 --name s -O bent_c --label lab_corner.tif bent.tif ||
	fail "a label on the corner of an image placed by bent GCPs was refused"
# gdalwarp onto the image's own grid: a copy filled with nodata
gdal_translate -q bent.tif bent_w.tif &&
	"$PYTHON" -c "from osgeo import gdal; d = gdal.Open('bent_w.tif', 1)
d.GetRasterBand(1).SetNoDataValue(255); d.GetRasterBand(1).Fill(255)" &&
	gdalwarp -q -et 0 lab_corner.tif bent_w.tif || fail "bent GCPs: gdalwarp of the corner"
"$PYTHON" - <<'PYCK' || fail "bent GCPs: the corner label is not gdalwarp's"
import glob
import numpy as np
from osgeo import gdal
want = int((gdal.Open("bent_w.tif").ReadAsArray() == 3).sum())
got = sum(int((gdal.Open(f).ReadAsArray() == 3).sum()) for f in glob.glob("bent_c/*_label.tif"))
assert want > 0 and got == want, (got, want)
PYCK
expect_fail 1 "^cdp-tile: 'bent.tif': label 'lab_off.tif' does not overlap the image\$" \
	cdp-tile -s 64 -O bent_o --label lab_off.tif bent.tif
[ ! -e bent_o ] || fail "a label off an image placed by bent GCPs left tiles"
# overlapping tiles warp a shared pixel alike at E = 0: the GCPs are
# fitted once for the image, and the resampling scale is the image's, not
# GDAL's estimate per window (which moved a bilinear value by up to 0.16)
"$PYTHON" - <<'PYFX' || fail "bent GCPs: the value label"
import numpy as np
from osgeo import gdal, osr
s = osr.SpatialReference(); s.ImportFromEPSG(32633)
d = gdal.GetDriverByName("GTiff").Create("val_bent.tif", 320, 240, 1, gdal.GDT_Float32)
d.SetGeoTransform((499950.5, 7, 0, 5800040.25, 0, -7)); d.SetProjection(s.ExportToWkt())
y, x = np.mgrid[0:240, 0:320]
d.GetRasterBand(1).WriteArray((50 + 10 * np.sin(x / 9.0) * np.cos(y / 7.0) + x / 5.0).astype(np.float32))
d = None
PYFX
for r in bilinear mode; do
	lab=val_bent.tif; [ $r = bilinear ] || lab=lab7.tif
	cdp-tile -q -s 64 --overlap 16 --name s -O "bent_$r" --label "$lab" --label-resample $r \
		--label-error-threshold 0 bent.tif || fail "bent GCPs: overlapping $r tiles"
done
cat >agree.py <<'PYCK'
"""agree.py DIR OV T,RIGHT,BELOW ...: of DIR's tiles s_T_label.tif, T's last
OV columns are RIGHT's first and its last OV rows BELOW's first (NaN
matching NaN), and some of them are labelled (neither NaN nor 255)."""
import sys
import numpy as np
from osgeo import gdal
d, ov = sys.argv[1], int(sys.argv[2])
t = lambda n: gdal.Open("%s/s_%s_label.tif" % (d, n)).ReadAsArray().astype(float)
for trio in sys.argv[3:]:
    n0, right, below = trio.split(",")
    a = t(n0)
    for n, mine, theirs in ((right, a[:, -ov:], t(right)[:, :ov]), (below, a[-ov:], t(below)[:ov])):
        assert (np.isfinite(mine) & (mine != 255)).any(), (d, n0, n, "nothing labelled")
        same = (mine == theirs) | (np.isnan(mine) & np.isnan(theirs))
        assert same.all(), (d, n0, n, int((~same).sum()))
PYCK
for r in bilinear mode; do
	"$PYTHON" agree.py "bent_$r" 16 0_0,0_1,1_0 ||
		fail "bent GCPs: overlapping $r tiles disagree on a warped label"
done
# the same for a label in another CRS, no GCPs: the value label in
# EPSG:4326 on geo.tif (UTM), whose pixel ratio varies over the image
gdalwarp -q -t_srs EPSG:4326 -r bilinear val_bent.tif val4326.tif || fail "val4326.tif"
for r in bilinear average; do
	cdp-tile -q -s 32 --overlap 16 --name s -O "ll_$r" --label val4326.tif --label-resample $r \
		--label-error-threshold 0 geo.tif || fail "EPSG:4326: overlapping $r tiles"
done
for r in bilinear average; do
	"$PYTHON" agree.py "ll_$r" 16 0_2,0_3,1_2 1_3,1_4,2_3 ||
		fail "EPSG:4326: overlapping $r tiles disagree on a warped label"
done
expect_fail 1 "^cdp-tile: cannot open 'bentnan.tif': GCP 4 of 12 ('4') is not a number: pixel 66.6667, line 0, x nan, y " \
	cdp-tile -s 64 bentnan.tif
expect_fail 1 "^cdp-tile: 'bent.tif': cannot open label 'bentnan.tif': GCP 4 of 12 ('4') is not a number" \
	cdp-tile -s 64 --label bentnan.tif bent.tif
# A geotransform that is not finite (a NaN term in a VRT, or terms whose
# corners overflow) is refused when the input is checked, before the stream
# starts (it stopped the stream after the inputs before it, the huge one
# reaching cdp-lmdbpack as "geotransform[0] is inf"), raster, label or date.
for g in "nan, 10, 0, 5800000, 0, -10" "1e308, 1e308, 0, 1e308, 0, 1e308"; do
	gdal_translate -q -of VRT same.tif gt.vrt
	sed -i "s|<GeoTransform>.*</GeoTransform>|<GeoTransform>$g</GeoTransform>|" gt.vrt
	gt=$(echo "$g" | sed 's/1e308/1e+308/g')
	case $g in
	nan*) at="" ;;
	*) at=" at the corners of the raster's [0-9]*x[0-9]* pixels" ;;
	esac
	expect_fail 1 "^cdp-tile: cannot open 'gt.vrt': the geotransform ($gt) is not finite$at\$" \
		cdp-tile -s 16 same.tif gt.vrt
	[ ! -s "$T/out" ] || fail "a geotransform ($g) refused after the stream began"
	expect_fail 1 "^cdp-tile: 'same.tif': cannot open label 'gt.vrt': the geotransform ($gt) is not finite$at\$" \
		cdp-tile -s 16 --label gt.vrt same.tif
	expect_fail 1 "^cdp-tile: --time 'same.tif,gt.vrt': cannot open date 'gt.vrt': the geotransform ($gt) is not finite$at\$" \
		cdp-tile -s 16 --time same.tif,gt.vrt
done

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
