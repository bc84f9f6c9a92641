#!/bin/sh
# cdp-evaluate on hand-made 4x3 rasters whose figures are worked out here:
#   reference  0 0 1 1    prediction  0 1 1 0
#              0 1 1 1                0 1 1 1
#              0 0 0 1                1 0 0 1
# confusion (rows reference): [[4 2] [1 5]]; class 1: TP 5 FP 2 FN 1, IoU
# 5/8, precision 5/7, recall 5/6, F1 10/13; class 0: IoU 4/7, precision
# 4/5, recall 4/6, F1 8/11; accuracy 9/12, mean IoU (5/8 + 4/7) / 2.
# Then: --ignore and the reference's nodata or GDAL mask (a .msk) leave
# pixels out, the prediction's nodata or mask (internal) counts as
# unpredicted (no pixel valid in both is refused), K comes from the data or
# --classes (values beyond it are "outside"; at most 1024, where a count of
# 20000 once wrote an 800 MB report), and bad input is refused, as
# are rasters of another georeference (CRS by OGR's comparison,
# geotransform, GCPs, none against some) and a standard output that is one
# of the inputs; a closed standard output is a write error, not an input;
# a float map of values in [0, 1] is said to look like a --prob map;
# a --png not named .png, named as a side file of an input (PRED.tif.msk),
# in a GDAL virtual file system, or in a folder where no file can be made
# is refused before the report.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# mk OUT ROWS [NODATA] [BANDS]: a u8 GeoTIFF from "a b c d;e f g h;..."
mk() {
	"$PYTHON" -c "
import sys, numpy as np
from osgeo import gdal
a = np.array([[int(v) for v in r.split()] for r in sys.argv[2].split(';')], np.uint8)
nb = int(sys.argv[4]) if len(sys.argv) > 4 else 1
d = gdal.GetDriverByName('GTiff').Create(sys.argv[1], a.shape[1], a.shape[0], nb, gdal.GDT_Byte)
for b in range(nb):
    d.GetRasterBand(b + 1).WriteArray(a)
    if len(sys.argv) > 3 and sys.argv[3] != '-': d.GetRasterBand(b + 1).SetNoDataValue(float(sys.argv[3]))
" "$@"
}
mk "$T/ref.tif" "0 0 1 1;0 1 1 1;0 0 0 1"
mk "$T/pred.tif" "0 1 1 0;0 1 1 1;1 0 0 1"

echo "== text"
cdp-evaluate "$T/pred.tif" "$T/ref.tif" >"$T/out" || fail "cdp-evaluate failed"
cat "$T/out"
grep -q '^pixels: 12 counted, 0 ignored, 0 unpredicted, 0 outside \[0, 2)$' "$T/out" || fail "pixels line"
grep -Eq '^ +0 +4 +2$' "$T/out" && grep -Eq '^ +1 +1 +5$' "$T/out" || fail "confusion matrix"
grep -Eq '^ +1 +0\.6250 +0\.7692 +0\.7143 +0\.8333 +6$' "$T/out" || fail "class 1 figures"
grep -Eq '^ +0 +0\.5714 +0\.7273 +0\.8000 +0\.6667 +6$' "$T/out" || fail "class 0 figures"
grep -q '^accuracy 0.7500$' "$T/out" && grep -q '^mean iou 0.5982$' "$T/out" || fail "overall figures"

echo "== GDAL's mask band: the reference's row 0 (a .msk), the prediction's row 2 (internal)"
# mask PATH ROW INTERNAL: a per-dataset mask invalid on row ROW
mask() {
	"$PYTHON" -c "
import sys, numpy as np
from osgeo import gdal
gdal.SetConfigOption('GDAL_TIFF_INTERNAL_MASK', sys.argv[3])
d = gdal.Open(sys.argv[1], gdal.GA_Update); d.CreateMaskBand(gdal.GMF_PER_DATASET)
m = np.full((3, 4), 255, np.uint8); m[int(sys.argv[2])] = 0
d.GetRasterBand(1).GetMaskBand().WriteArray(m)
" "$@"
}
mkdir "$T/m" && cp "$T/ref.tif" "$T/pred.tif" "$T/m/" && mask "$T/m/ref.tif" 0 NO &&
	mask "$T/m/pred.tif" 2 YES && [ -e "$T/m/ref.tif.msk" ] || fail "masked fixtures"
cdp-evaluate "$T/pred.tif" "$T/m/ref.tif" >"$T/out" || fail "cdp-evaluate (masked reference) failed"
grep -q '^pixels: 8 counted, 4 ignored, 0 unpredicted, 0 outside \[0, 2)$' "$T/out" ||
	fail "masked reference pixels: $(cat "$T/out")"
grep -Eq '^ +0 +3 +1$' "$T/out" && grep -Eq '^ +1 +0 +4$' "$T/out" || fail "masked reference: confusion"
cdp-evaluate "$T/m/pred.tif" "$T/m/ref.tif" >"$T/out" || fail "cdp-evaluate (both masked) failed"
grep -q '^pixels: 4 counted, 4 ignored, 4 unpredicted, 0 outside \[0, 2)$' "$T/out" ||
	fail "masked prediction pixels: $(cat "$T/out")"
# a one-band --prob map given for the class map: said to look like one
# (it was told to use --task regression)
"$PYTHON" -c "
import sys, numpy as np
from osgeo import gdal
d = gdal.GetDriverByName('GTiff').Create(sys.argv[1], 4, 3, 1, gdal.GDT_Float32)
d.GetRasterBand(1).WriteArray(np.full((3, 4), 0.25, np.float32))" "$T/prob.tif"
expect_fail 1 "^cdp-evaluate: '$T/prob.tif': value 0.25 at pixel (0, 0) is not a class id (it looks like a probability map, cdp-predict --prob: score the class map; a map of values is scored with --task regression)\$" \
	cdp-evaluate "$T/prob.tif" "$T/ref.tif"
# a class id past the 1024 counted without --classes: the raster that
# holds it is named (it said "'PRED' or 'REF'"), on either side
"$PYTHON" -c "
import sys, numpy as np
from osgeo import gdal
d = gdal.GetDriverByName('GTiff').Create(sys.argv[1], 4, 3, 1, gdal.GDT_UInt16)
d.GetRasterBand(1).WriteArray(np.array([[0, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 5000]], np.uint16))" \
	"$T/p16.tif"
for pair in "$T/p16.tif $T/ref.tif" "$T/ref.tif $T/p16.tif"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-evaluate: '$T/p16.tif' holds class 5000, past the 1024 classes counted without --classes: give --classes K (at most 1024) to count ids from K on as outside\$" \
		cdp-evaluate $pair
done
cdp-evaluate --classes 2 "$T/p16.tif" "$T/ref.tif" >"$T/out" || fail "--classes 2 with an id of 5000"
grep -q '^pixels: 11 counted, 0 ignored, 0 unpredicted, 1 outside \[0, 2)$' "$T/out" ||
	fail "an id of 5000 past --classes 2: $(cat "$T/out")"
# no pixel valid in both: nothing to score, refused as a regression map's
# is (it reported 0 pixels and nulls, exit 0)
mk "$T/empty.tif" "9 9 9 9;9 9 9 9;9 9 9 9" 9
for j in "" --json; do
	expect_fail 1 "^cdp-evaluate: '$T/pred.tif' and '$T/empty.tif' have no pixel valid in both (all 12 are nodata, masked or ignored in one): nothing to score\$" \
		cdp-evaluate $j "$T/pred.tif" "$T/empty.tif"
	[ ! -s "$T/out" ] || fail "nothing to score printed a report: $(cat "$T/out")"
done
# a map whose categories name its classes: the names beside the ids (the
# default "class K" of cdp-predict names none)
cp "$T/pred.tif" "$T/npred.tif"
"$PYTHON" -c "
import sys; from osgeo import gdal
d = gdal.Open(sys.argv[1], gdal.GA_Update); d.GetRasterBand(1).SetCategoryNames(['land', 'water'])" \
	"$T/npred.tif"
cdp-evaluate "$T/npred.tif" "$T/ref.tif" >"$T/nout" || fail "cdp-evaluate of a named map failed"
grep -q '^class      iou       f1  precision   recall      support  name$' "$T/nout" &&
	grep -Eq '^ +1 +0\.6250 +0\.7692 +0\.7143 +0\.8333 +6  water$' "$T/nout" &&
	grep -Eq '^ +0 +0\.5714 +0\.7273 +0\.8000 +0\.6667 +6  land$' "$T/nout" ||
	fail "the report does not name the classes: $(cat "$T/nout")"
! grep -q "name" "$T/out" || fail "a map without names got a name column"

echo "== json"
cdp-evaluate --json "$T/pred.tif" "$T/ref.tif" >"$T/json" || fail "--json failed"
"$PYTHON" - "$T/json" <<'PY' || fail "JSON figures: $(cat "$T/json")"
import json, sys
e = json.load(open(sys.argv[1]))
ok = lambda a, b: abs(a - b) < 1e-6
assert e["classes"] == 2 and e["pixels"] == 12 and e["confusion"] == [[4, 2], [1, 5]]
c0, c1 = e["per_class"]
assert ok(c1["iou"], 5 / 8) and ok(c1["precision"], 5 / 7) and ok(c1["recall"], 5 / 6)
assert ok(c1["f1"], 10 / 13) and (c1["tp"], c1["fp"], c1["fn"], c1["support"]) == (5, 2, 1, 6)
assert ok(c0["iou"], 4 / 7) and ok(c0["precision"], 4 / 5) and ok(c0["recall"], 4 / 6)
assert ok(c0["f1"], 8 / 11)
assert ok(e["accuracy"], 9 / 12) and ok(e["mean_iou"], (5 / 8 + 4 / 7) / 2)
PY

echo "== ignore, nodata, classes"
mk "$T/ref9.tif" "0 0 1 1;0 1 1 1;0 0 0 9"
cdp-evaluate --json --ignore 9 "$T/pred.tif" "$T/ref9.tif" >"$T/j9"
grep -q '"pixels":11,"ignored":1,' "$T/j9" && grep -q '"confusion":\[\[4,2\],\[1,4\]\]' "$T/j9" ||
	fail "--ignore: $(cat "$T/j9")"
mk "$T/refnd.tif" "0 0 1 1;0 1 1 1;0 0 0 9" 9
cdp-evaluate --json "$T/pred.tif" "$T/refnd.tif" >"$T/jnd"
grep -q '"pixels":11,"ignored":1,' "$T/jnd" || fail "reference nodata: $(cat "$T/jnd")"
mk "$T/prednd.tif" "0 1 1 0;0 1 1 1;255 0 0 1" 255
cdp-evaluate --json "$T/prednd.tif" "$T/ref.tif" >"$T/jp"
grep -q '"pixels":11,"ignored":0,"unpredicted":1,' "$T/jp" || fail "prediction nodata: $(cat "$T/jp")"
# class 2 appears only in the prediction: K = 3 and its IoU is 0, its recall undefined
mk "$T/pred3.tif" "0 1 1 0;0 1 1 2;1 0 0 1"
cdp-evaluate --json "$T/pred3.tif" "$T/ref.tif" >"$T/j3"
grep -q '"classes":3,' "$T/j3" && grep -q '{"class":2,"iou":0.000000,"f1":0.000000,"precision":0.000000,"recall":null,' "$T/j3" ||
	fail "3 classes: $(cat "$T/j3")"
cdp-evaluate --json --classes 2 "$T/pred3.tif" "$T/ref.tif" >"$T/j2"
grep -q '"pixels":11,"ignored":0,"unpredicted":0,"outside":1,' "$T/j2" || fail "--classes 2: $(cat "$T/j2")"

echo "== failures"
mk "$T/small.tif" "0 1;1 0"
expect_fail 1 "'$T/pred.tif' is 4x3, '$T/small.tif' is 2x2: not the same size" \
	cdp-evaluate "$T/pred.tif" "$T/small.tif"
# memory for the rows of a raster 2^31-1 pixels wide (two VRTs over
# pred.tif): the message names the file and the size (it said "out of
# memory"); under ulimit -v 1 GB, so that no allocation succeeds
for v in wide wide2; do
	"$PYTHON" -c "from osgeo import gdal
ds = gdal.GetDriverByName('VRT').Create('$T/$v.vrt', 2147483647, 3, 1, gdal.GDT_Byte); ds = None"
done
# (a sanitizer build cannot start under the limit: its shadow memory)
if sh -c 'ulimit -v 1000000 && exec cdp-evaluate --version' >/dev/null 2>&1; then
	expect_fail 1 "^cdp-evaluate: '$T/wide.vrt': out of memory for 256 rows x 2147483647 pixels (1099511627264 bytes)\$" \
		sh -c 'ulimit -v 1000000; exec cdp-evaluate "$@"' sh "$T/wide.vrt" "$T/wide2.vrt"
fi
# georeference: the same CRS (also in another text: OGR's comparison) and
# geotransform pass; another CRS, none against one, or a shift are refused
gdal_translate -q -a_srs EPSG:32633 -a_ullr 500000 5800003 500004 5800000 "$T/pred.tif" "$T/pg.tif"
gdal_translate -q -a_srs "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs" \
	-a_ullr 500000 5800003 500004 5800000 "$T/ref.tif" "$T/rg.tif"
cdp-evaluate --json "$T/pg.tif" "$T/rg.tif" >"$T/jg" || fail "the same georeference refused"
grep -q '"pixels":12,' "$T/jg" || fail "georeferenced: $(cat "$T/jg")"
gdal_translate -q -a_srs EPSG:4326 -a_ullr 15 52 15.0004 51.9997 "$T/ref.tif" "$T/r4326.tif"
expect_fail 1 "^cdp-evaluate: '$T/pg.tif' is in CRS EPSG:32633, '$T/r4326.tif' in EPSG:4326: not the same georeference\$" \
	cdp-evaluate "$T/pg.tif" "$T/r4326.tif"
expect_fail 1 "^cdp-evaluate: '$T/pg.tif' is in CRS EPSG:32633, '$T/ref.tif' in none: not the same georeference\$" \
	cdp-evaluate "$T/pg.tif" "$T/ref.tif"
gdal_translate -q -a_srs EPSG:32633 -a_ullr 500001 5800003 500005 5800000 "$T/ref.tif" "$T/rs.tif"
expect_fail 1 "^cdp-evaluate: '$T/pg.tif' has geotransform (500000, 1, 0, 5800003, 0, -1), '$T/rs.tif' (500001, 1, 0, 5800003, 0, -1): not the same georeference\$" \
	cdp-evaluate "$T/pg.tif" "$T/rs.tif"
# a shift of 2e-6 pixel: each number in the digits that tell it apart
"$PYTHON" -c "
from osgeo import gdal
d = gdal.Translate('$T/rs2.tif', '$T/pg.tif')
d.SetGeoTransform((500000.000002, 1, 0, 5800003, 0, -1))"
expect_fail 1 "^cdp-evaluate: '$T/pg.tif' has geotransform (500000, 1, 0, 5800003, 0, -1), '$T/rs2.tif' (500000.000002, 1, 0, 5800003, 0, -1): not the same georeference\$" \
	cdp-evaluate "$T/pg.tif" "$T/rs2.tif"
# GCPs (a map of a GCP scene, cdp-predict(1)): the same GCPs in the same
# CRS, else refused as another georeference; a vector reference is
# rasterized through them (GCPs that place nothing refused up front); one
# without a CRS names the prediction
G="-gcp 0 0 500000 5800003 -gcp 4 0 500004 5800003 -gcp 0 3 500000 5800000"
# shellcheck disable=SC2086
gdal_translate -q $G -a_srs EPSG:32633 "$T/pred.tif" "$T/pgcp.tif"
# shellcheck disable=SC2086
gdal_translate -q $G -a_srs EPSG:32633 "$T/ref.tif" "$T/rgcp.tif"
gdal_translate -q -gcp 0 0 600000 5900003 -gcp 4 0 600004 5900003 -gcp 0 3 600000 5900000 \
	-a_srs EPSG:32633 "$T/ref.tif" "$T/rgcpx.tif"
# shellcheck disable=SC2086
gdal_translate -q $G -a_srs EPSG:32632 "$T/ref.tif" "$T/rgcp32.tif"
cdp-evaluate --json "$T/pgcp.tif" "$T/rgcp.tif" >"$T/jgcp" || fail "the same GCPs refused"
grep -q '"pixels":12,' "$T/jgcp" || fail "GCPs: $(cat "$T/jgcp")"
expect_fail 1 "^cdp-evaluate: '$T/pgcp.tif' and '$T/rgcpx.tif' have other GCPs (GCP 1 is pixel 0 line 0 at (500000, 5800003) against pixel 0 line 0 at (600000, 5900003)): not the same georeference\$" \
	cdp-evaluate "$T/pgcp.tif" "$T/rgcpx.tif"
expect_fail 1 "^cdp-evaluate: '$T/pgcp.tif' and '$T/rgcp32.tif' have other GCPs (GCPs in CRS EPSG:32633 against EPSG:32632): not the same georeference\$" \
	cdp-evaluate "$T/pgcp.tif" "$T/rgcp32.tif"
expect_fail 1 "^cdp-evaluate: '$T/ref.tif' has no georeference, '$T/pgcp.tif' has GCPs: not the same georeference\$" \
	cdp-evaluate "$T/pgcp.tif" "$T/ref.tif"
# a map placed by GCPs against one with a geotransform: the GCPs' CRS
# named as theirs (it once said "in CRS none")
expect_fail 1 "^cdp-evaluate: '$T/pgcp.tif' is placed by GCPs in EPSG:32633, '$T/pg.tif' in EPSG:32633: not the same georeference\$" \
	cdp-evaluate "$T/pgcp.tif" "$T/pg.tif"
expect_fail 1 "^cdp-evaluate: '$T/ref.tif' has no georeference, '$T/rgcp.tif' has GCPs: not the same georeference\$" \
	cdp-evaluate "$T/ref.tif" "$T/rgcp.tif"
printf '{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[15,52]}}]}\n' >"$T/v.geojson"
# a vector reference of a map placed by GCPs is rasterized through them:
# pgcp.tif's GCPs encode pg.tif's geotransform, and the scores agree (a
# polygon over columns 1-2 of rows 0-1, in the map's CRS)
printf '{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},"features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[500001,5800003],[500003,5800003],[500003,5800001],[500001,5800001],[500001,5800003]]]}}]}\n' >"$T/vp.geojson"
cdp-evaluate --json "$T/pg.tif" "$T/vp.geojson" >"$T/jvg" &&
	cdp-evaluate --json "$T/pgcp.tif" "$T/vp.geojson" >"$T/jvgcp" ||
	fail "a vector reference of a map placed by GCPs"
grep -q '"confusion":\[\[5,3\],\[0,4\]\]' "$T/jvg" || fail "vector reference: $(cat "$T/jvg")"
sed "s|pgcp.tif|pg.tif|g" "$T/jvgcp" | cmp -s - "$T/jvg" ||
	fail "GCPs against a geotransform: $(cat "$T/jvgcp") against $(cat "$T/jvg")"
expect_fail 1 "^cdp-evaluate: reference '$T/v.geojson': the prediction '$T/pred.tif' has no CRS to reproject layer 'v' into\$" \
	cdp-evaluate "$T/pred.tif" "$T/v.geojson"
# GCPs that place nothing (one) are refused before anything is written
gdal_translate -q -gcp 0 0 500000 5800003 -a_srs EPSG:32633 "$T/pred.tif" "$T/pg1.tif"
expect_fail 1 "^cdp-evaluate: reference '$T/vp.geojson': the GCPs of the prediction '$T/pg1.tif' cannot place it: " \
	cdp-evaluate --json "$T/pg1.tif" "$T/vp.geojson"
[ ! -s "$T/out" ] || fail "GCPs that place nothing: wrote $(cat "$T/out")"
mk "$T/two.tif" "0 0 1 1;0 1 1 1;0 0 0 1" - 2
expect_fail 1 "'$T/two.tif' has 2 bands" cdp-evaluate "$T/two.tif" "$T/ref.tif"
expect_fail 1 "cannot open '$T/none.tif'" cdp-evaluate "$T/pred.tif" "$T/none.tif"
expect_fail 2 "^cdp-evaluate: missing REFERENCE\$" cdp-evaluate "$T/pred.tif"
expect_fail 2 "^cdp-evaluate: extra operand '$T/ref.tif'\$" cdp-evaluate "$T/pred.tif" "$T/ref.tif" "$T/ref.tif"
expect_fail 2 "^cdp-evaluate: --png: an empty file name\$" cdp-evaluate --png '' "$T/pred.tif" "$T/ref.tif"
expect_fail 2 "--classes: '1' is not an integer in 2\.\.1024" cdp-evaluate --classes 1 "$T/pred.tif" "$T/ref.tif"
# a count far beyond any class map's: once an 800 MB report of a 2-class map
expect_fail 2 "^cdp-evaluate: --classes: '20000' is not an integer in 2\.\.1024\$" \
	cdp-evaluate --classes 20000 --json "$T/pred.tif" "$T/ref.tif"
[ ! -s "$T/out" ] || fail "--classes 20000 wrote $(wc -c <"$T/out") bytes"
expect_fail 2 "--ignore: 'x' is not an integer in 0\.\.65535" cdp-evaluate --ignore x "$T/pred.tif" "$T/ref.tif"
# the report appended to an input (by a symlink or a VRT's source too) is refused
cp "$T/pred.tif" "$T/pred.orig"
expect_fail 1 "^cdp-evaluate: refusing to write the report: standard output is the prediction '$T/pred.tif'\$" \
	sh -c 'cdp-evaluate "$1" "$2" >>"$1"' sh "$T/pred.tif" "$T/ref.tif"
ln -s pred.tif "$T/pl.tif"
gdal_translate -q -of VRT "$T/pred.tif" "$T/p.vrt"
expect_fail 1 "standard output is '.*pred.tif', read for '$T/p.vrt'" \
	sh -c 'cdp-evaluate "$1" "$2" >>"$3"' sh "$T/p.vrt" "$T/ref.tif" "$T/pl.tif"
cmp -s "$T/pred.tif" "$T/pred.orig" || fail "cdp-evaluate appended to its input"

echo "== --png refused before the report"
# named as the input it is, not by its own name twice
expect_fail 1 "^cdp-evaluate: refusing to write '$T/ref.tif': it is the reference '$T/ref.tif'\$" \
	cdp-evaluate --png "$T/ref.tif" "$T/pred.tif" "$T/ref.tif"
# each once printed the whole report, then failed on the PNG
expect_fail 1 "^cdp-evaluate: cannot draw '$T/c.png': 65 classes, at most 64 fit\$" \
	cdp-evaluate --json --classes 65 --png "$T/c.png" "$T/pred.tif" "$T/ref.tif"
[ ! -s "$T/out" ] && [ ! -e "$T/c.png" ] || fail "--classes 65 --png: $(wc -c <"$T/out") bytes of report"
mk "$T/k70.tif" "0 70 1 1;0 1 1 1;0 0 0 1"
expect_fail 1 "^cdp-evaluate: cannot draw '$T/c.png': 71 classes, at most 64 fit\$" \
	cdp-evaluate --png "$T/c.png" "$T/k70.tif" "$T/ref.tif"
[ ! -s "$T/out" ] && [ ! -e "$T/c.png" ] || fail "71 classes found, --png: $(wc -c <"$T/out") bytes of report"
expect_fail 1 "^cdp-evaluate: cannot create '$T/nodir/c.png': No such file or directory\$" \
	cdp-evaluate --png "$T/nodir/c.png" "$T/pred.tif" "$T/ref.tif"
[ ! -s "$T/out" ] || fail "--png in a missing folder: $(wc -l <"$T/out") lines of report"
# a mistyped --png onto a checkpoint (the format's magic) or an LMDB pool's data file
printf 'CDPCKPT\n\007\000\000\000 the rest of a checkpoint' >"$T/model.cdpt"
cp "$T/model.cdpt" "$T/model.orig"
expect_fail 1 "^cdp-evaluate: refusing to replace '$T/model.cdpt': it is a cdpool checkpoint\$" \
	cdp-evaluate --png "$T/model.cdpt" "$T/pred.tif" "$T/ref.tif"
[ ! -s "$T/out" ] && cmp -s "$T/model.cdpt" "$T/model.orig" || fail "--png replaced a checkpoint"
"$PYTHON" -c "import lmdb, sys; e = lmdb.open(sys.argv[1]); e.close()" "$T/pool"
cp "$T/pool/data.mdb" "$T/data.orig"
expect_fail 1 "^cdp-evaluate: refusing to replace '$T/pool/data.mdb': it is an LMDB database file\$" \
	cdp-evaluate --png "$T/pool/data.mdb" "$T/pred.tif" "$T/ref.tif"
cmp -s "$T/pool/data.mdb" "$T/data.orig" || fail "--png replaced a pool's data.mdb"
# a name that is not a PNG's (a PNG was written as cm.jpg), and a side file
# of an input, which GDAL would read with it (the mask of the prediction)
expect_fail 1 "^cdp-evaluate: --png '$T/cm.jpg': the drawing is a PNG, which '.jpg' does not name: give --png FILE.png\$" \
	cdp-evaluate --png "$T/cm.jpg" "$T/pred.tif" "$T/ref.tif"
expect_fail 1 "^cdp-evaluate: refusing to write '$T/pred.tif.msk': GDAL would read it as part of the prediction '$T/pred.tif'\$" \
	cdp-evaluate --png "$T/pred.tif.msk" "$T/pred.tif" "$T/ref.tif"
[ ! -s "$T/out" ] && [ ! -e "$T/cm.jpg" ] && [ ! -e "$T/pred.tif.msk" ] || fail "a refused --png wrote"
cdp-evaluate --png "$T/c.PNG" "$T/pred.tif" "$T/ref.tif" >/dev/null || fail "--png c.PNG"
# GDAL's virtual file systems said so (it was "No such file or directory")
expect_fail 1 "^cdp-evaluate: refusing to write '/vsimem/c.png': GDAL virtual file systems (/vsi...) are not supported for outputs\$" \
	cdp-evaluate --png /vsimem/c.png "$T/pred.tif" "$T/ref.tif"
# a folder where no file can be made (a read-only mount, as root; else the
# write bits taken away): refused before the report, which it once
# printed in full before the PNG failed
mkdir "$T/ro"
if unshare -m true 2>/dev/null; then
	set +e
	unshare -m sh -c 'mount -t tmpfs -o ro none "$1" && exec cdp-evaluate --png "$1/c.png" "$2" "$3"' \
		sh "$T/ro" "$T/pred.tif" "$T/ref.tif" >"$T/out" 2>"$T/err"
	rc=$?
	set -e
	[ "$rc" -eq 1 ] && grep -q "^cdp-evaluate: cannot create '$T/ro/c.png': Read-only file system\$" "$T/err" ||
		fail "--png into a read-only folder: exit $rc: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "--png into a read-only folder printed the report first"
else
	echo "SKIP (this case): no unshare -m for a read-only mount"
fi

echo "== closed standard descriptors"
# a closed standard output is a write error; the raster opened first took
# the free fd 1 and the report was refused as "standard output is
# 'pred.tif'" (cdp_cli_std_fds holds 0, 1 and 2 on /dev/null, read-only)
expect_fail 1 "^cdp-evaluate: cannot write the report: Bad file descriptor\$" \
	sh -c 'exec cdp-evaluate "$1" "$2" >&-' sh "$T/pred.tif" "$T/ref.tif"
# a closed standard input is an empty one (the raster took fd 0 unseen)
cdp-evaluate "$T/pred.tif" "$T/ref.tif" >"$T/out1" || fail "cdp-evaluate failed"
cdp-evaluate "$T/pred.tif" "$T/ref.tif" <&- >"$T/out2" || fail "a closed stdin: $(cat "$T/out2")"
cmp -s "$T/out1" "$T/out2" || fail "a closed stdin changed the report"
exit 0
