#!/bin/sh
# vector_labels.sh: cdp-tile's vector labels. A UTM image (EPSG:32633) is
# labelled from features stored in EPSG:4326 (GeoPackage), EPSG:32632
# (Shapefile) and EPSG:4326 GeoJSON (the label extent); every tile's label
# in each stream is compared by vlabels.py with gdal_rasterize's of the
# whole image grid (-te/-ts), cut at the tile's window, after ogr2ogr
# -t_srs into the image's CRS: burn, attribute, string classes, where,
# all-touched, buffers, lines, points, lines along the strips' seams,
# background, extent, u16. --classes must reach the pool's class names, and
# cdp-evaluate's report against the vector must equal its report against
# gdal_rasterize's raster of it, also along the seams of its bands of rows.
# The twin of the image placed by GCPs that encode its geotransform (no
# geotransform) gets the image's labels, rasterized through the GCPs;
# GCPs that place nothing are refused before the stream starts.
# A --label-where on two lines is recorded in label_options as $'...'.
# A layer with no feature over a scene is a warning per such scene.
# Each refusal is checked with its message; a --label-crs that is no CRS is
# a usage error even beside a layer's own CRS, which wins with a warning.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$PYTHON $CDP_SRCDIR/tests/tools/mkraster.py"
VL="$PYTHON $CDP_SRCDIR/tests/tools/vlabels.py"
cd "$T"

# refused RC PATTERN CMD...: as expect_fail, and the message is one line
# that names the program, with nothing on stdout.
refused() {
	expect_fail "$@"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$*: not one line: $(cat "$T/err")"
	grep -q '^cdp-tile: ' "$T/err" || fail "$*: message lacks the program name"
	[ ! -s "$T/out" ] || fail "$*: wrote to stdout on failure"
}

# 96x80 at 10 m: 32-pixel tiles are 3x3 with the last row shifted.
$MK img.tif --width 96 --height 80 --dtype u8 --seed 1
$VL gen img.tif .

# tile VECTOR TILE-OPTS -- CHECK-OPTS: one stream, checked tile by tile.
n=0
tile() {
	v=$1
	shift
	to=""
	while [ "$1" != "--" ]; do to="$to $1"; shift; done
	shift
	n=$((n + 1))
	# shellcheck disable=SC2086
	cdp-tile -q -s 32 --label "$v" $to img.tif >"s$n" || fail "cdp-tile --label $v$to"
	$VL check "s$n" img.tif "$v" "$@" >/dev/null || fail "labels of --label $v$to"
}

tile feat.gpkg --
tile feat.gpkg --label-field cls -- --field cls
tile feat.gpkg --label-field kind --classes bg,house,road,field -- --field kind \
	--classes bg,house,road,field
tile feat.gpkg --label-where "cls>=2" --burn 3 -- --where "cls>=2" --burn 3
tile feat.gpkg --all-touched --label-field cls -- --all-touched --field cls
tile feat.gpkg --buffer 12 --burn 2 -- --buffer 12 --burn 2
tile feat.gpkg --buffer-field w --label-field cls -- --buffer-field w --field cls
tile poly32.shp --label-extent extent.geojson --background 2 -- \
	--extent extent.geojson --background 2
tile feat.gpkg --label-type u16 --ignore 9 --label-field cls -- --field cls \
	--ignore 9 --type u16
tile feat.gpkg --burn 300 -- --burn 300 --ignore 65535 --type u16
tile nocrs.shp --label-crs EPSG:32633 -- --s-srs EPSG:32633
# --background ignore: pixels no feature covers get the ignore value (255)
tile feat.gpkg --label-field kind --classes bg,house,road,field --background ignore -- \
	--field kind --classes bg,house,road,field --background 255
tile feat.gpkg --burn 2 --background ignore --ignore 7 -- --burn 2 --background 7 --ignore 7
# lines and points alone, as they are and all touched
tile lines.geojson --label-field cls -- --field cls
tile lines.geojson --label-field cls --all-touched -- --field cls --all-touched
# lines that rise from a pixel corner on the seams of the strips of tiles
# (rows 32 and 48), all touched: the scene's label burns the pixel below
# the corner, which a strip that begins at the seam did not; each tile is
# its window of the scene's label, whatever strip it is cut from
seam_lines() {
	"$PYTHON" -c "
import sys
from osgeo import ogr, osr
s = osr.SpatialReference()
s.ImportFromEPSG(32633)
ds = ogr.GetDriverByName('GPKG').CreateDataSource(sys.argv[1])
l = ds.CreateLayer('seam', s, ogr.wkbLineString)
r = float(sys.argv[2])
for x, y in zip(sys.argv[3::2], sys.argv[4::2]):
    x, y = float(x), float(y)
    f = ogr.Feature(l.GetLayerDefn())
    f.SetGeometry(ogr.CreateGeometryFromWkt('LINESTRING(%r %r,%r %r)'
                                            % (x, y, x + 13.3 * r, y + 3.1 * r)))
    l.CreateFeature(f)" "$@"
}
seam_lines seam.gpkg 10 500000 5999680 500200 5999680 500500 5999520
tile seam.gpkg --all-touched -- --all-touched
# --label-all: one vector for two images; --label-suffix finds imgx.gpkg
cp img.tif img2.tif
cdp-tile -q -s 32 --label-all feat.gpkg --name a --name b img.tif img2.tif >all.s
cdp-tile -q -s 32 --label feat.gpkg img.tif >one.s
[ "$(wc -c <all.s)" -gt "$(wc -c <one.s)" ] || fail "--label-all wrote one image"
cp feat.gpkg imgx.gpkg
cdp-tile -q -s 32 --label-suffix x img.tif >suf.s
grep -aq '^label=imgx.gpkg$' suf.s || fail "--label-suffix x did not use imgx.gpkg"
$VL check suf.s img.tif imgx.gpkg >/dev/null || fail "labels of --label-suffix x"
# over /vsizip/
$PYTHON -c 'import zipfile; zipfile.ZipFile("f.zip", "w").write("feat.gpkg")'
cdp-tile -q -s 32 --label /vsizip/f.zip/feat.gpkg img.tif >zip.s
$VL check zip.s img.tif /vsizip/f.zip/feat.gpkg >/dev/null || fail "labels of a /vsizip/ label"

# --classes reach the pool's class names through the stream's source frame
# (version 2); cdp-lmdbpack's own --classes must agree
names() {
	PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
print(",".join(cdpool.Pool(sys.argv[1], lock=False).class_names))' "$1"
}
cdp-lmdbpack -q p1 <s3 || fail "cdp-lmdbpack of a stream with class names"
[ "$(names p1)" = "bg,house,road,field" ] || fail "pool class names '$(names p1)'"
cdp-lmdbpack -q --classes bg,house,road,field p2 <s3 || fail "agreeing --classes refused"
[ "$(names p2)" = "bg,house,road,field" ] || fail "pool class names '$(names p2)'"
# the pool's source meta says where the labels came from and how
got=$(PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
s = cdpool.Pool(sys.argv[1], lock=False).sources[0]
print(s["label"], "|", s["label_options"])' p1)
[ "$got" = "feat.gpkg | --label-field kind --background 0" ] || fail "source label: '$got'"
# a filter on two lines, as gdal_rasterize -where takes it (it stopped the
# stream after its start, "cannot describe the label options"): the labels
# are gdal_rasterize's, and label_options, one line, gives the filter back
# to a shell byte for byte as $'...'
W=$(printf "cls = 1\n OR kind = 'road'")
cdp-tile -q -s 32 --label feat.gpkg --label-where "$W" img.tif >wnl.s ||
	fail "cdp-tile --label-where on two lines"
$VL check wnl.s img.tif feat.gpkg --where "$W" >/dev/null || fail "labels of a two-line --label-where"
cdp-lmdbpack -q pwnl <wnl.s || fail "cdp-lmdbpack of a two-line --label-where's stream"
got=$(PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
print(cdpool.Pool(sys.argv[1], lock=False).sources[0]["label_options"])' pwnl)
[ "$got" = "--burn 1 --label-where \$'cls = 1\\n OR kind = \\'road\\'' --background 0" ] ||
	fail "label_options of a two-line --label-where: '$got'"
if command -v bash >/dev/null; then
	bash -c 'w=$2; eval "set -- $1"; [ "$4" = "$w" ]' sh "$got" "$W" ||
		fail "bash does not read the two-line --label-where back from '$got'"
fi
expect_fail 1 "source 'img' names class 2 'road', --classes names it 'street'" \
	cdp-lmdbpack -q --classes bg,house,street,field p3 <s3
[ ! -e p3 ] || fail "a refused pack left p3"
cdp-lmdbpack -q p4 <s1 || fail "cdp-lmdbpack of a stream without class names"
[ -z "$(names p4)" ] || fail "a stream without names gave the pool '$(names p4)'"

# cdp-evaluate scores a map against the vector itself: the same report as
# against gdal_rasterize's raster of it on the map's grid
$MK im.tif --width 96 --height 80 --dtype u8 --seed 3 --label pred.tif --classes 4
# evaluate VLABELS-OPTS -- CDP-OPTS: both reports, byte for byte
evaluate() {
	vo=""
	while [ "$1" != "--" ]; do vo="$vo $1"; shift; done
	shift
	# shellcheck disable=SC2086
	$VL rasterize ref.tif img.tif $vo >/dev/null || fail "vlabels.py rasterize$vo"
	cdp-evaluate --json pred.tif ref.tif >want.json || fail "cdp-evaluate of ref.tif"
	cdp-evaluate --json "$@" pred.tif "$v" >got.json || fail "cdp-evaluate $* $v"
	cmp -s want.json got.json || fail "cdp-evaluate $* $v: $(cat got.json), want $(cat want.json)"
}
v=feat.gpkg
evaluate feat.gpkg --field cls -- --label-field cls
evaluate feat.gpkg --field kind --classes bg,house,road,field --all-touched -- \
	--label-field kind --classes bg,house,road,field --all-touched
evaluate feat.gpkg --field kind --classes bg,house,road,field --background 255 -- \
	--label-field kind --classes bg,house,road,field --background ignore
grep -q '"ignored":[1-9]' got.json || fail "--background ignore ignored nothing"
v=poly32.shp
evaluate poly32.shp --extent extent.geojson --burn 2 -- --label-extent extent.geojson --burn 2
grep -q '"ignored":[1-9]' got.json || fail "the extent ignored nothing"
# lines that rise from a pixel corner on the seams of cdp-evaluate's
# 256-row bands (rows 256 and 512), all touched: the reference is
# gdal_rasterize -at's of the whole grid, so a map that is that raster
# scores every pixel right
seam_lines bseam.gpkg 1 500000 5799488 500020 5799488 500030 5799744
gdal_rasterize -q -at -burn 1 -te 500000 5799300 500060 5800000 -ts 60 700 -ot Byte -init 0 \
	-a_srs EPSG:32633 bseam.gpkg bseam.tif
cdp-evaluate --json --all-touched bseam.tif bseam.gpkg >got.json || fail "cdp-evaluate of bseam.gpkg"
grep -q '"pixels":42000,.*"accuracy":1.000000,' got.json ||
	fail "the vector reference differs from gdal_rasterize -at of the grid: $(cat got.json)"

# --- refusals ----------------------------------------------------------------
cp extent.geojson imgx.geojson
refused 1 "2 labels match --label-suffix 'x': 'imgx.gpkg', 'imgx.geojson'" \
	cdp-tile -s 32 --label-suffix x img.tif
refused 1 "2 layers, choose one with --label-layer: 'a', 'b'" \
	cdp-tile -s 32 --label two.gpkg img.tif
refused 1 "no layer 'c' (its layers: 'a', 'b')" \
	cdp-tile -s 32 --label two.gpkg --label-layer c img.tif
refused 1 "layer 'nocrs' has no CRS (give it with --label-crs)" \
	cdp-tile -s 32 --label nocrs.shp img.tif
# an image placed by GCPs (in a CRS) without a geotransform: its features
# are rasterized through them, so img.tif's twin whose GCPs (corners and
# centre) encode its geotransform gets img.tif's labels, gdal_rasterize's
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 6000000 -gcp 96 0 500960 6000000 \
	-gcp 0 80 500000 5999200 -gcp 96 80 500960 5999200 -gcp 48 40 500480 5999600 \
	img.tif gcp.tif || fail "the GCP twin"
# (checked above against it: the same tiles of img.tif are compared here)
for to in "" "--all-touched --label-field cls"; do
	rm -rf vgt vgcp
	# shellcheck disable=SC2086
	cdp-tile -q -s 32 --name img -O vgt --label feat.gpkg $to img.tif &&
		cdp-tile -q -s 32 --name img -O vgcp --label feat.gpkg $to gcp.tif ||
		fail "cdp-tile --label feat.gpkg $to of an image placed by GCPs"
	"$PYTHON" - <<'PYCK' || fail "labels of an image placed by GCPs ($to)"
import glob, os
import numpy as np
from osgeo import gdal
fs = sorted(glob.glob("vgt/*_label.tif"))
assert len(fs) == 9, fs
for f in fs:
    a = gdal.Open(f).ReadAsArray()
    b = gdal.Open(os.path.join("vgcp", os.path.basename(f))).ReadAsArray()
    assert (a == b).all(), (f, np.argwhere(a != b)[:5])
PYCK
done
# --tps is in label_options where GCPs place the image, not elsewhere
cdp-tile -q -s 32 --tps --label feat.gpkg gcp.tif >tps.cdps &&
	cdp-tile -q -s 32 --tps --label feat.gpkg img.tif >tps_gt.cdps || fail "--tps streams"
grep -a -q "^label_options=--burn 1 --background 0 --tps\$" tps.cdps ||
	fail "--tps is not in the label options: $(grep -a label_options tps.cdps)"
grep -a -q "^label_options=--burn 1 --background 0\$" tps_gt.cdps ||
	fail "--tps recorded where no GCP placed the image"
# GCPs that place nothing (one, collinear) are refused when the label is
# opened, before the stream starts, as the image's fault
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 6000000 img.tif gcp1.tif &&
	gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 6000000 -gcp 48 40 500480 5999600 \
		-gcp 96 80 500960 5999200 img.tif gcpcol.tif || fail "GCPs that place nothing"
for g in gcp1.tif gcpcol.tif; do
	refused 1 "^cdp-tile: '$g': label 'feat.gpkg': the GCPs of '$g' cannot place it: " \
		cdp-tile -s 32 --label feat.gpkg "$g"
done
# --label-crs is checked up front, a usage error, also where the layer
# declares a CRS of its own (which wins) and would never need it
for v in nocrs.shp feat.gpkg; do
	refused 2 "^cdp-tile: --label-crs: 'foo' is not a CRS (such as EPSG:32633, a WKT or a PROJ string)\$" \
		cdp-tile -s 32 --label "$v" --label-crs foo img.tif
done
# a valid --label-crs other than the layer's own is ignored with a warning
# (-q or not); the layer's own CRS says nothing
cdp-tile -q -s 32 --label feat.gpkg --label-crs EPSG:32633 img.tif >"$T/w.cdps" 2>"$T/err" ||
	fail "--label-crs beside a declared CRS: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-tile: warning: label 'feat.gpkg': layer 'feat' declares a CRS of its own, which wins: --label-crs 'EPSG:32633' (another CRS) is ignored" ] ||
	fail "the warning: $(cat "$T/err")"
cdp-tile -q -s 32 --label feat.gpkg --label-crs EPSG:4326 img.tif >"$T/w.cdps" 2>"$T/err" ||
	fail "--label-crs of the layer's own CRS: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "--label-crs of the layer's own CRS: $(cat "$T/err")"
refused 1 "attribute 'kind' is a string: give its values' ids with --classes" \
	cdp-tile -s 32 --label feat.gpkg --label-field kind img.tif
refused 1 "'kind' = 'field' is none of --classes" \
	cdp-tile -s 32 --label feat.gpkg --label-field kind --classes bg,house,road img.tif
refused 1 "id 3 but only 2 --classes" \
	cdp-tile -s 32 --label feat.gpkg --label-field cls --classes a,b img.tif
refused 1 "layer 'feat' has no attribute 'nope'" \
	cdp-tile -s 32 --label feat.gpkg --label-field nope img.tif
refused 1 "attribute 'w' is Real, need an integer or a string" \
	cdp-tile -s 32 --label feat.gpkg --label-field w img.tif
refused 1 "attribute 'kind' is String, need a number" \
	cdp-tile -s 32 --label feat.gpkg --buffer-field kind img.tif
# a --buffer-field value that --buffer would refuse: refused naming the
# feature (GEOS crashed on NaN; an infinite one dropped the feature)
# (GeoJSON, which writes NaN and Infinity; a GeoPackage stores NaN as NULL)
for v in nan inf -1 2e9; do
	rm -f bufv.geojson
	"$PYTHON" - "$v" <<'PYEOF' || fail "cannot make bufv.geojson"
import json, sys
from osgeo import gdal
gdal.UseExceptions()
gdal.VectorTranslate("bufv.geojson", "feat.gpkg", format="GeoJSON")
j = json.load(open("bufv.geojson"))
j["features"][0]["properties"]["w"] = float(sys.argv[1])
open("bufv.geojson", "w").write(json.dumps(j))
PYEOF
	refused 1 "feature [0-9]*: 'w' = [-a-z0-9+e]* is not a --buffer-field distance (0 to 1e9)\$" \
		cdp-tile -s 32 --label bufv.geojson --buffer-field w img.tif
done
refused 1 "cannot read with --label-where" \
	cdp-tile -s 32 --label feat.gpkg --label-where "nope > 1" img.tif
refused 1 "id 300 does not fit a u8 label" \
	cdp-tile -s 32 --label feat.gpkg --burn 300 --label-type u8 img.tif
refused 1 "extent 'nocrs.shp': layer 'nocrs' has no CRS" \
	cdp-tile -s 32 --label feat.gpkg --label-extent nocrs.shp img.tif
refused 1 "label 'img2.tif' is not a vector dataset" \
	cdp-tile -s 32 --label img2.tif --burn 3 img.tif
refused 1 "ignore value 300 does not fit the u8 label" \
	cdp-tile -s 32 --label feat.gpkg --ignore 300 img.tif
# a label that is not there is said so, vector options or not
refused 1 "^cdp-tile: 'img.tif': cannot open label 'nope.gpkg': No such file or directory\$" \
	cdp-tile -s 32 --label nope.gpkg --label-field kind --classes a,b,c,d img.tif
refused 1 "^cdp-tile: 'img.tif': cannot open label 'nope.gpkg': No such file or directory\$" \
	cdp-tile -s 32 --label nope.gpkg img.tif
# names that a --burn of 1 can never give are a usage error
refused 2 "^cdp-tile: --classes names 4 classes but every feature burns 1 (--burn): give --label-field\$" \
	cdp-tile -s 32 --label feat.gpkg --classes bg,house,road,field img.tif
cdp-tile -q -s 32 --label feat.gpkg --classes bg,house img.tif >/dev/null ||
	fail "--classes of 2 names with --burn's default refused"
cdp-tile -q -s 32 --label feat.gpkg --burn 3 --classes bg,house,road,field img.tif >/dev/null ||
	fail "--classes of 4 names with --burn 3 refused"
refused 2 "^cdp-tile: --background: 'ignor' is not an id in 0\.\.65534 or ignore\$" \
	cdp-tile -s 32 --label feat.gpkg --background ignor img.tif
# names with an attribute and the default background: a note, not with -q
# or an explicit --background
cdp-tile -s 32 --label feat.gpkg --label-field kind --classes bg,house,road,field img.tif \
	>/dev/null 2>note.err || fail "cdp-tile with --classes names"
grep -q "^cdp-tile: note: pixels no feature covers became class 0 'bg' (--background 0); --background ignore leaves them out of the loss, --label-extent bounds the labelled area\$" \
	note.err || fail "no note of the background's class: $(cat note.err)"
for q in -q "--background 0"; do
	# shellcheck disable=SC2086
	cdp-tile -s 32 $q --label feat.gpkg --label-field kind --classes bg,house,road,field \
		img.tif 2>note.err >/dev/null || fail "cdp-tile $q with --classes names"
	! grep -q "note:" note.err || fail "a note with $q: $(cat note.err)"
done
# an ignore value that is also a burned id would make that class vanish
refused 1 "'img.tif': the ignore value 1 is also the --burn value (default 1) of the label 'feat.gpkg'" \
	cdp-tile -s 32 --label feat.gpkg --ignore 1 img.tif
refused 1 "the ignore value 3 is also the --burn value of" \
	cdp-tile -s 32 --label feat.gpkg --burn 3 --ignore 3 img.tif
refused 1 "the ignore value 2 is also the --background value of" \
	cdp-tile -s 32 --label feat.gpkg --background 2 --ignore 2 img.tif
refused 1 "the ignore value 3 is also a value of the label attribute 'cls' of" \
	cdp-tile -s 32 --label feat.gpkg --label-field cls --ignore 3 img.tif
refused 1 "the ignore value 3 is also the id of --classes name 'field' of" \
	cdp-tile -s 32 --label feat.gpkg --label-field kind --classes bg,house,road,field \
	--ignore 3 img.tif
# no feature that passes the filter burns 3: it may be the ignore value
cdp-tile -q -s 32 --label feat.gpkg --label-field cls --label-where "cls < 3" --ignore 3 \
	img.tif >/dev/null || fail "--ignore 3 with only ids 0..2 burned"
refused 2 "the vector label options need --label, --label-all or --label-suffix" \
	cdp-tile --burn 3 img.tif
refused 2 "--burn and --label-field exclude each other" \
	cdp-tile --burn 3 --label-field cls --label feat.gpkg img.tif
# a distance of infinity once passed, then broke GEOS after the stream began
for d in inf 1e10 -1; do
	refused 2 "^cdp-tile: --buffer: '$d' is not a number in 0\.\.1e9\$" \
		cdp-tile -s 32 --label feat.gpkg --buffer "$d" img.tif
done
refused 2 "--buffer and --buffer-field exclude each other" \
	cdp-tile --buffer 3 --buffer-field w --label feat.gpkg img.tif
refused 2 "--label, --label-all and --label-suffix exclude each other" \
	cdp-tile --label feat.gpkg --label-all feat.gpkg img.tif
refused 2 "'a' names both class 0 and class 1" \
	cdp-tile --classes a,a --label feat.gpkg img.tif
refused 2 "--label-type" cdp-tile --label-type u32 --label feat.gpkg img.tif
# --label-map is for label rasters: refused with a vector label, and with
# --classes (both would name the ids), cdp-tile(1) LABELS
refused 1 "'img.tif': label 'feat.gpkg' is a vector dataset, and --label-map applies to label rasters only" \
	cdp-tile -s 32 --label feat.gpkg --label-map 1:0 img.tif
refused 2 "--classes names a vector label's attribute values and --label-map renumbers a label raster's: give one" \
	cdp-tile -s 32 --label feat.gpkg --label-field kind --classes bg,house,road,field \
	--label-map 1:0 img.tif

# one run, both kinds: --label-suffix finds a vector for one input and a label
# raster on another grid (20 m, warped by lib/cdp_label) for the other; each
# input's labels are what it gets alone
cp img.tif img3.tif
rm -f imgx.geojson
gdal_rasterize -q -ot Byte -tr 20 20 -burn 2 poly32.shp img3x.tif ||
	fail "gdal_rasterize of a label raster in EPSG:32632"
cdp-tile -q -s 32 --label-suffix x img.tif img3.tif >mixed.s ||
	fail "cdp-tile of a vector and a raster label"
grep -aq '^label=imgx.gpkg$' mixed.s || fail "mixed: the vector label's source line"
grep -aq '^label=img3x.tif$' mixed.s || fail "mixed: the raster label's source line"
[ "$(grep -ac '^label_options=' mixed.s)" -eq 1 ] || fail "mixed: label_options only for the vector"
cdp-tile -q -s 32 --label imgx.gpkg img.tif >m1.s || fail "cdp-tile --label imgx.gpkg"
cdp-tile -q -s 32 --label img3x.tif img3.tif >m2.s || fail "cdp-tile --label img3x.tif"
PYTHONPATH="$CDP_SRCDIR/tests/tools" "$PYTHON" - mixed.s m1.s m2.s <<'PYEOF' ||
import sys
import crosscheck
def labels(path):
    recs, _ = crosscheck.read_stream(path)
    return {k: crosscheck.decode(k, b)["label"].tobytes() for k, b in recs}
mixed, a, b = (labels(p) for p in sys.argv[1:4])
assert a and b and len(mixed) == len(a) + len(b), (len(mixed), len(a), len(b))
for k, v in list(a.items()) + list(b.items()):
    assert mixed[k] == v, k
# the warped raster label keeps the burned value
assert 2 in set(b"".join(b.values()))
PYEOF
	fail "mixed labels differ from each input's alone"
expect_fail 1 "the vector label options apply to a vector reference only" \
	cdp-evaluate --burn 2 pred.tif img.tif
expect_fail 1 "reference 'two.gpkg': 2 layers, choose one with --label-layer" \
	cdp-evaluate pred.tif two.gpkg
# --label-crs as cdp-tile checks it: garbage a usage error beside a layer's
# own CRS, another valid CRS ignored with a warning
expect_fail 2 "^cdp-evaluate: --label-crs: 'foo' is not a CRS (such as EPSG:32633, a WKT or a PROJ string)\$" \
	cdp-evaluate --label-crs foo pred.tif feat.gpkg
cdp-evaluate --label-crs EPSG:32633 pred.tif feat.gpkg >/dev/null 2>"$T/err" ||
	fail "cdp-evaluate --label-crs beside a declared CRS: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-evaluate: warning: reference 'feat.gpkg': layer 'feat' declares a CRS of its own, which wins: --label-crs 'EPSG:32633' (another CRS) is ignored" ] ||
	fail "cdp-evaluate's warning: $(cat "$T/err")"
# a mistyped reference is said to be missing before --classes names are read
# by what it is; names with a raster reference say what names are for
for vo in "--label-field kind" ""; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-evaluate: cannot open 'nope.gpkg': No such file or directory\$" \
		cdp-evaluate $vo --classes bg,house,road,field pred.tif nope.gpkg
done
expect_fail 1 "^cdp-evaluate: cannot open 'nope.tif': No such file or directory\$" \
	cdp-evaluate pred.tif nope.tif
expect_fail 2 "^cdp-evaluate: --classes a,b,c: names are the values of a vector reference's --label-field, and 'img.tif' is a raster: give the count (--classes 3); the report names classes by the maps' categories\$" \
	cdp-evaluate --classes a,b,c pred.tif img.tif
expect_fail 2 "^cdp-evaluate: --classes names 4 classes but every feature burns 1 (--burn): give --label-field\$" \
	cdp-evaluate --classes bg,house,road,field pred.tif feat.gpkg
# cdp-evaluate refuses what cdp-tile refuses: --ignore on a burned id would
# drop that class out of every score; an id nothing burns may be ignored
expect_fail 1 "the ignore value 1 is also the --burn value (default 1) of the reference 'feat.gpkg'" \
	cdp-evaluate --ignore 1 pred.tif feat.gpkg
expect_fail 1 "the ignore value 3 is also a value of the label attribute 'cls' of the reference" \
	cdp-evaluate --label-field cls --ignore 3 pred.tif feat.gpkg
cdp-evaluate --label-field cls --label-where "cls < 3" --ignore 3 pred.tif feat.gpkg >/dev/null ||
	fail "cdp-evaluate --ignore 3 with only ids 0..2 burned"
# a layer that no feature reaches over the scene (GeoJSON written with the
# scene's UTM coordinates, read as EPSG:4326; a filter that passes none)
# gives all-background tiles: a warning naming both files, -q or not, one
# per such scene of a run (gave none); none where a feature lies over it
"$PYTHON" - <<'PYEOF' || fail "cannot make utm.geojson"
import json
from osgeo import gdal
g = gdal.Open("img.tif").GetGeoTransform()
x, y = g[0] + 10 * g[1], g[3] + 10 * g[5]
ring = [[x, y], [x + 100, y], [x + 100, y - 100], [x, y - 100], [x, y]]
json.dump({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
           "geometry": {"type": "Polygon", "coordinates": [ring]}}]}, open("utm.geojson", "w"))
PYEOF
warned() {
	"$@" >wn.s 2>wn.err || fail "$*: $(cat wn.err)"
	[ -s wn.s ] || fail "$*: no stream"
}
warned cdp-tile -q -s 32 --label utm.geojson img.tif
[ "$(cat wn.err)" = "cdp-tile: warning: 'utm.geojson': no feature of the layer lies over 'img.tif': all its labels are background" ] ||
	fail "a layer beside the scene: '$(cat wn.err)'"
warned cdp-tile -q -s 32 --label feat.gpkg --label-where "cls > 100" --background ignore img.tif
[ "$(cat wn.err)" = "cdp-tile: warning: 'feat.gpkg': no feature of the layer (after --label-where) lies over 'img.tif': all its labels are the ignore value" ] ||
	fail "a filter that passes no feature: '$(cat wn.err)'"
"$PYTHON" -c 'from osgeo import gdal
d = gdal.Translate("away.tif", "img.tif")
g = d.GetGeoTransform()
d.SetGeoTransform((g[0] + 100000,) + g[1:])' || fail "cannot make away.tif"
warned cdp-tile -q -s 32 --label-all feat.gpkg img.tif away.tif
[ "$(cat wn.err)" = "cdp-tile: warning: 'feat.gpkg': no feature of the layer lies over 'away.tif': all its labels are background" ] ||
	fail "one scene of two without features: '$(cat wn.err)'"
warned cdp-tile -q -s 32 --label feat.gpkg img.tif
[ ! -s wn.err ] || fail "a warning with features over the scene: $(cat wn.err)"
# a >> onto the --label-extent file or a --label-crs file is refused, named
# as that option's file (the extent's was named "read through the input
# 'feat.gpkg'", the --label-crs file was overwritten); the extent's side
# files are read through it
cp extent.geojson ext.geojson
refused 1 "^cdp-tile: refusing to write the record stream: standard output is the --label-extent file 'ext.geojson'\$" \
	sh -c 'cdp-tile -q -s 32 --label feat.gpkg --label-extent ext.geojson img.tif >>ext.geojson'
cmp -s ext.geojson extent.geojson || fail "cdp-tile >> its --label-extent file changed it"
ogr2ogr -q ext.shp extent.geojson
cp ext.dbf ext.dbf.orig
refused 1 "^cdp-tile: refusing to write the record stream: standard output is '.*ext.dbf', read through the --label-extent file 'ext.shp'\$" \
	sh -c 'cdp-tile -q -s 32 --label feat.gpkg --label-extent ext.shp img.tif >>ext.dbf'
cmp -s ext.dbf ext.dbf.orig || fail "cdp-tile >> the --label-extent's .dbf changed it"
gdalsrsinfo -o wkt EPSG:32633 >crs.wkt
cp crs.wkt crs.orig
refused 1 "^cdp-tile: refusing to write the record stream: standard output is the --label-crs file 'crs.wkt'\$" \
	sh -c 'cdp-tile -q -s 32 --label nocrs.shp --label-crs crs.wkt img.tif >>crs.wkt'
cmp -s crs.wkt crs.orig || fail "cdp-tile >> its --label-crs file changed it"
echo "vector_labels.sh: ok"
