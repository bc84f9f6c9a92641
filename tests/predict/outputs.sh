#!/bin/sh
# tests/predict/outputs.sh: cdp-predict's outputs under the output policy
# (cdpool(7) OUTPUTS, cdp-predict(1)):
#  - a SIGTERM at the first, second or third of the final renames (the
#    GeoTIFF, its .aux.xml, --vector's GeoPackage, --preview's PNG), sent
#    by strace's injection, ends the run only after the last: every output
#    new, none old beside them (it once left a new GeoTIFF beside the old
#    side file, GeoPackage and preview); skipped without an strace that
#    injects signals;
#  - --vector or --preview aimed at the GeoTIFF's own OUT.tif.aux.xml is
#    refused before anything is written (it once became that side file);
#  - -o through a symbolic link: the class names go into LINK.aux.xml
#    beside the link, where GDAL opening the link reads them (they were
#    written beside the target, invisible through the link), the link
#    stays a link and the target's stale side file goes;
#  - a classifier's CSV to standard output (-o -: it was read as a scene's
#    GeoTIFF, a failing GDAL open of the list, or a file named '-') and
#    into a FIFO, the same bytes as into a file; a segmentation model's
#    -o - is refused in one line, and no file named '-' is made;
#  - CDP_CPU_ISA and CDP_CPU_BF16_EMU values the backend does not know are
#    refused before anything runs, as cdp-train refuses them;
#  - a checkpoint and a pool's data.mdb given as an output are refused,
#    and stay as they were;
#  - a CRS that GDAL keeps only in .aux.xml (Equal Earth) stays the class
#    map's and the --cog map's (the class names rewrote the side file
#    without it);
#  - a map replacing an earlier one takes away that one's .ovr and .msk
#    (GDAL served the old overviews, and the old mask hid every pixel);
#  - an output whose extension names another format (-o map.png, map.vrt,
#    --vector roads.shp, --preview prev.jpg) is refused naming it, and one
#    named as a side file of the input (in.tif.ovr, .msk, .aux.xml) too;
#    .TIFF, .GeoJSON (GeoJSON polygons) and .PNG are written; an output
#    in a GDAL virtual file system (/vsimem/, /vsizip/) is refused saying so;
#    --preview into a read-only folder is refused before predicting (it
#    failed after the whole prediction).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# the classifier $T/run over the chips $T/chips (list.txt), pool $T/pool
. "$CDP_SRCDIR/tests/predict/chips.sh"
D="$CDP_SRCDIR/tests/predict"
"$PYTHON" "$D/mkthreshold.py" "$T/a.tif" 128 128 1
"$PYTHON" "$D/mkthreshold.py" "$T/b.tif" 96 80 2
cdp-tile -q --size 32 --label-suffix _mask "$T/a.tif" | cdp-lmdbpack -q "$T/spool"
cdp-keyshuffle -q --seed 1 -o "$T/skeys" "$T/spool"
cdp-train -q --db "$T/spool" --keys "$T/skeys" --model "$CDP_SRCDIR/tests/train/small.cfg:channels=1" \
	--out "$T/seg" --steps 5 --batch 4 --threads 1 || fail "training failed"
SEG="$T/seg/checkpoint.cdpt"
# is_new DIR: m.tif with its categories (its new side file), m.gpkg a
# GeoPackage with the layer, m.png a PNG: none of them the old file
is_new() {
	"$PYTHON" - "$1" <<'PYEOF'
import sys
from osgeo import gdal, ogr
gdal.UseExceptions()
d = sys.argv[1]
b = gdal.Info(d + "/m.tif", format="json")["bands"][0]
assert b.get("categories") == ["class 0", "class 1"], "m.tif.aux.xml is not the new one"
v = ogr.Open(d + "/m.gpkg")
assert v is not None and v.GetLayerByName("prediction") is not None, "m.gpkg is not the new one"
assert open(d + "/m.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n", "m.png is not the new one"
PYEOF
}
old() {
	rm -rf "$1" && mkdir "$1"
	echo old >"$1/m.tif"
	echo old >"$1/m.gpkg"
	echo old >"$1/m.png"
	echo '<PAMDataset/>' >"$1/m.tif.aux.xml"
}

echo "== a SIGTERM among the final renames"
R='rename,renameat,renameat2'
if command -v strace >/dev/null 2>&1 &&
	strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=1 true 2>/dev/null; then
	for n in 1 2 3; do
		old "$T/k"
		set +e
		strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=$n \
			cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/k/m.tif" --vector "$T/k/m.gpkg" \
			--preview "$T/k/m.png" 2>"$T/err"
		rc=$?
		set -e
		# the signal must have come, and ended the run
		[ "$rc" -eq 143 ] || fail "a SIGTERM at rename $n: exit $rc, want 143: $(cat "$T/err")"
		is_new "$T/k" || fail "a SIGTERM at rename $n left old files beside new ones: $(ls -A "$T/k")"
		[ -z "$(ls -A "$T/k" | grep cdp-tmp)" ] || fail "a temporary after SIGTERM: $(ls -A "$T/k")"
	done
else
	echo "SKIP (this case): no strace that can inject a signal at a rename"
fi
old "$T/k"
cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/k/m.tif" --vector "$T/k/m.gpkg" \
	--preview "$T/k/m.png" || fail "prediction failed"
is_new "$T/k" || fail "an undisturbed run left old files"

echo "== --vector or --preview onto the GeoTIFF's side file"
mkdir "$T/o"
for opt in --vector --preview; do
	expect_fail 1 "^cdp-predict: refusing to write '$T/o/x.tif.aux.xml': it is the side file of -o '$T/o/x.tif', which holds its class names\$" \
		cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/o/x.tif" $opt "$T/o/x.tif.aux.xml"
	expect_fail 1 "^cdp-predict: refusing to write '$T/o/./x.tif.aux.xml': it is the side file" \
		cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/o/x.tif" $opt "$T/o/./x.tif.aux.xml"
done
[ -z "$(ls -A "$T/o")" ] || fail "a refused run wrote $(ls -A "$T/o")"

echo "== -o through a symbolic link"
mkdir "$T/o/sub"
echo old >"$T/o/sub/real.tif"
echo '<PAMDataset/>' >"$T/o/sub/real.tif.aux.xml"
ln -s sub/real.tif "$T/o/link.tif"
cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/o/link.tif" || fail "prediction through a link"
[ -L "$T/o/link.tif" ] || fail "the link was replaced"
[ -f "$T/o/link.tif.aux.xml" ] && [ ! -e "$T/o/sub/real.tif.aux.xml" ] ||
	fail "the side file is not beside the link alone: $(ls -A "$T/o" "$T/o/sub")"
"$PYTHON" -c "
from osgeo import gdal; gdal.UseExceptions()
b = gdal.Info('$T/o/link.tif', format='json')['bands'][0]
assert b.get('categories') == ['class 0', 'class 1'], b.get('categories')
" || fail "GDAL does not see the class names through the link"

echo "== a CRS kept only in .aux.xml"
# Equal Earth, which GeoTIFF keys cannot hold: GDAL keeps it in
# FILE.aux.xml, which the class names rewrote without it
"$PYTHON" - "$T/b.tif" "$T/ee.tif" <<'PYEOF'
import sys
from osgeo import gdal, osr
gdal.UseExceptions()
s = osr.SpatialReference(); s.ImportFromProj4("+proj=eqearth +datum=WGS84 +units=m")
gdal.Translate(sys.argv[2], sys.argv[1], outputSRS=s.ExportToWkt())
PYEOF
cdp-predict -q --threads 1 --any-crs "$SEG" "$T/ee.tif" -o "$T/o/ee.tif" || fail "prediction of ee.tif"
cdp-predict -q --threads 1 --any-crs --cog "$SEG" "$T/ee.tif" -o "$T/o/eecog.tif" || fail "--cog of ee.tif"
"$PYTHON" - "$T/o/ee.tif" "$T/o/eecog.tif" <<'PYEOF' || fail "the class map lost a CRS kept in .aux.xml"
import sys
from osgeo import gdal
gdal.UseExceptions()
for f in sys.argv[1:]:
    d = gdal.Open(f)
    assert d.GetSpatialRef() is not None and "+proj=eqearth" in d.GetSpatialRef().ExportToProj4(), f
    assert d.GetRasterBand(1).GetCategoryNames() == ["class 0", "class 1"], f
PYEOF

echo "== stale side files of a replaced map"
# a user's external overviews (.ovr) and mask (.msk, all invalid) of an
# earlier map: GDAL served them as the new map's own
"$PYTHON" - "$T/o/ee.tif" <<'PYEOF'
import sys
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open(sys.argv[1])
d.BuildOverviews("NEAREST", [2])
d.CreateMaskBand(gdal.GMF_PER_DATASET)
PYEOF
[ -e "$T/o/ee.tif.ovr" ] && [ -e "$T/o/ee.tif.msk" ] || fail "no .ovr and .msk made for the test"
cdp-predict -q --threads 1 --any-crs "$SEG" "$T/ee.tif" -o "$T/o/ee.tif" || fail "prediction over ee.tif"
[ ! -e "$T/o/ee.tif.ovr" ] && [ ! -e "$T/o/ee.tif.msk" ] ||
	fail "a replaced map's side files survived: $(ls -A "$T/o")"
[ -z "$(ls -A "$T/o" | grep cdp-tmp)" ] || fail "a temporary left: $(ls -A "$T/o")"

echo "== outputs named as another format, or as an input's side file"
# -o map.png and map.vrt wrote a GeoTIFF, --vector roads.shp a GeoPackage,
# --preview prev.jpg a PNG; -o b.tif.ovr became the input's overviews
mkdir "$T/x"
cp "$T/b.tif" "$T/x/in.tif"
X="$T/x"
for o in map.png map.vrt; do
	expect_fail 1 "^cdp-predict: -o '$X/$o': the map is a GeoTIFF, which '\.${o#map.}' does not name: give -o OUT.tif (or .tiff)\$" \
		cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/$o"
done
expect_fail 1 "^cdp-predict: -o '$X/map': the map is a GeoTIFF, which a name without an extension does not say" \
	cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/map"
expect_fail 1 "^cdp-predict: --vector '$X/roads.shp': cdp-predict writes a GeoPackage or GeoJSON, which '.shp' does not name: give OUT.gpkg or OUT.geojson\$" \
	cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/m.tif" --vector "$X/roads.shp"
expect_fail 1 "^cdp-predict: --preview '$X/prev.jpg': the preview is a PNG, which '.jpg' does not name: give --preview FILE.png\$" \
	cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/m.tif" --preview "$X/prev.jpg"
for s in .ovr .msk .aux.xml; do
	expect_fail 1 "^cdp-predict: refusing to write '$X/in.tif$s': GDAL would read it as part of the input '$X/in.tif'\$" \
		cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/in.tif$s"
done
expect_fail 1 "^cdp-predict: refusing to write '$X/in.tif.ovr': GDAL would read it as part of the input" \
	cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/m.tif" --preview "$X/in.tif.ovr"
# GDAL's virtual file systems said so (it was "No such file or directory")
for a in "-o /vsizip/$X/z.zip/x.tif" "-o $X/m.tif --vector /vsimem/v.gpkg" \
	"-o $X/m.tif --preview /vsimem/p.png"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-predict: refusing to write '/vsi[a-z]*/.*': GDAL virtual file systems (/vsi...) are not supported for outputs\$" \
		cdp-predict -q --threads 1 "$SEG" "$X/in.tif" $a
done
[ "$(ls -A "$X")" = in.tif ] || fail "a refused name wrote: $(ls -A "$X")"
# --preview into a folder where no file can be made (a read-only mount, as
# root): refused before predicting (the preview's file was first made
# after the whole prediction, which --progress shows ending ", done")
mkdir "$T/ro"
if unshare -m true 2>/dev/null; then
	set +e
	unshare -m sh -c 'mount -t tmpfs -o ro none "$1" && shift && exec "$@"' sh "$T/ro" \
		cdp-predict --progress --threads 1 "$SEG" "$X/in.tif" -o "$X/m.tif" \
		--preview "$T/ro/p.png" >"$T/out" 2>"$T/err"
	rc=$?
	set -e
	[ "$rc" -eq 1 ] && [ "$(cat "$T/err")" = "cdp-predict: cannot create '$T/ro/p.png': Read-only file system" ] ||
		fail "--preview into a read-only folder: exit $rc: $(cat "$T/err")"
	[ "$(ls -A "$X")" = in.tif ] || fail "--preview into a read-only folder wrote: $(ls -A "$X")"
else
	echo "SKIP (this case): no unshare -m for a read-only mount"
fi
# any case; GeoJSON polygons as the GeoPackage's, in the map's CRS
cdp-predict -q --threads 1 "$SEG" "$X/in.tif" -o "$X/m.TIFF" --vector "$X/r.GeoJSON" \
	--vector-class all --preview "$X/p.PNG" || fail "-o m.TIFF --vector r.GeoJSON --preview p.PNG"
"$PYTHON" - "$X" <<'PYEOF' || fail "the GeoJSON polygons"
import sys
from osgeo import gdal, ogr
gdal.UseExceptions()
d = sys.argv[1]
v = ogr.Open(d + "/r.GeoJSON")
assert v.GetDriver().GetName() == "GeoJSON", v.GetDriver().GetName()
layer = v.GetLayer(0)
assert layer.GetFeatureCount() > 0
f = layer.GetNextFeature()
assert f.GetField("name") == "class %d" % f.GetField("class"), f.items()
assert layer.GetSpatialRef().IsSame(gdal.Open(d + "/m.TIFF").GetSpatialRef())
assert gdal.Open(d + "/p.PNG").GetDriver().ShortName == "PNG"
PYEOF

echo "== a classifier's CSV streamed; a segmentation model's -o - refused"
cd "$T"
cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o "$T/c.csv" || fail "CSV to a file"
cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o - >"$T/c-.csv" || fail "CSV to -"
cmp -s "$T/c.csv" "$T/c-.csv" || fail "-o - differs from a file: $(head -2 "$T/c-.csv")"
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/cf.csv" &
reader=$!
# a failed run never opens the FIFO: open it here, so that the reader ends
cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o "$T/fifo" ||
	{ : >"$T/fifo"; wait "$reader"; fail "CSV to a FIFO"; }
wait "$reader"
cmp -s "$T/c.csv" "$T/cf.csv" || fail "a FIFO got other bytes: $(head -2 "$T/cf.csv")"
expect_fail 1 "^cdp-predict: '$SEG' is a segmentation model, whose GeoTIFF is not streamed: -o - (standard output) is for a classifier's CSV; give -o OUT.tif\$" \
	cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o -
[ ! -s "$T/out" ] || fail "a refused -o - wrote $(wc -c <"$T/out") bytes"
expect_fail 1 "^cdp-predict: '$T/b.tif' is a raster, but -o '-' asks for a CSV of chips" \
	cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o -
[ ! -e "$T/-" ] || fail "a file named '-'"

echo "== CDP_CPU_* values the backend does not know"
expect_fail 1 "^cdp-predict: CDP_CPU_ISA: 'foo': want .*avx2" \
	env CDP_CPU_ISA=foo cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/e.tif"
expect_fail 1 "^cdp-predict: CDP_CPU_BF16_EMU: 'yes': want 0 or 1\$" \
	env CDP_CPU_BF16_EMU=yes cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/e.tif"
expect_fail 1 "^cdp-predict: CDP_CPU_BF16: 'x': want dp or fma\$" \
	env CDP_CPU_BF16=x cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o "$T/e.csv"
expect_fail 1 "^cdp-predict: CDP_CPU_SPIN_US: '-1': want microseconds from 0 to 1000000\$" \
	env CDP_CPU_SPIN_US=-1 cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/e.tif"
[ ! -e "$T/e.tif" ] && [ ! -e "$T/e.csv" ] || fail "a refused environment wrote an output"

echo "== a checkpoint or a pool's data.mdb as an output"
cp "$SEG" "$T/other.cdpt"
expect_fail 1 "^cdp-predict: refusing to replace '$T/other.cdpt': it is a cdpool checkpoint\$" \
	cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/other.cdpt"
cmp -s "$SEG" "$T/other.cdpt" || fail "a checkpoint was replaced"
# a CSV is a streamed output: a regular file is replaced by rename all the same
cp "$SEG" "$T/other.csv"
expect_fail 1 "^cdp-predict: refusing to replace '$T/other.csv': it is a cdpool checkpoint\$" \
	cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o "$T/other.csv"
cmp -s "$SEG" "$T/other.csv" || fail "a checkpoint was replaced by a CSV"
cp "$T/pool/data.mdb" "$T/data.orig"
expect_fail 1 "^cdp-predict: refusing to replace '$T/pool/data.mdb': it is an LMDB database file\$" \
	cdp-predict -q --threads 1 "$SEG" "$T/b.tif" -o "$T/m2.tif" --preview "$T/pool/data.mdb"
cmp -s "$T/pool/data.mdb" "$T/data.orig" && [ ! -e "$T/m2.tif" ] || fail "a pool's data.mdb was replaced"
echo ok
