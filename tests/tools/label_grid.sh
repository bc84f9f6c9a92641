#!/bin/sh
# label_grid.sh: cdp-tile's labels on another grid and class codes
# (cdp-tile(1) LABELS, cdp-labelmap(5)), checked against GDAL's own tools:
#  - label rasters in another CRS (EPSG:4326, EPSG:32632), coarser, finer
#    and shifted: every tile's label equals gdalwarp -r near|mode -et E of
#    that tile's window (-te, -ts; E 0, the default 0.125, and 2: the
#    warper gives the same pixels for the same window, so no tolerance),
#    the label's nodata and the pixels it does not cover are the ignore
#    value;
#  - a label on the image's grid is cut as before: each tile equals
#    gdal_translate -srcwin of the label;
#  - --edge pad: padding is the ignore value;
#  - --label-map inline and as a file (a u16 label mapped to u8 ids; class
#    names reach the pool's class_names through the stream's source frame,
#    read by cdpool; cdp-lmdbpack --classes must agree),
#    --label-map-other ignore against the refusal naming value and pixel,
#    and the refusals of malformed maps with their line;
#  - each label-only option without a label is a usage error.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"

"$PYTHON" - <<'EOF'
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()

def wkt(epsg):
    s = osr.SpatialReference()
    s.ImportFromEPSG(epsg)
    return s.ExportToWkt()

def mk(path, w, h, gt, epsg, dt=gdal.GDT_Byte, nodata=None, seed=1, block=1):
    """Class values 1..5 in blocks of block x block pixels; a tenth of the
    pixels nodata when nodata is given."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, size=(-(-h // block), -(-w // block)))
    a = np.kron(a, np.ones((block, block), int))[:h, :w]
    if nodata is not None:
        a[rng.random((h, w)) < 0.1] = nodata
    d = gdal.GetDriverByName("GTiff").Create(path, w, h, 1, dt)
    d.SetGeoTransform(gt)
    if epsg:
        d.SetProjection(wkt(epsg))
    if nodata is not None:
        d.GetRasterBand(1).SetNoDataValue(nodata)
    d.GetRasterBand(1).WriteArray(a)

X0, Y0 = 500000.0, 5000000.0
mk("img.tif", 60, 45, (X0, 10, 0, Y0, 0, -10), 32633, seed=9)
# the image's grid
mk("same.tif", 60, 45, (X0, 10, 0, Y0, 0, -10), 32633, seed=2)
# coarser (30 m), shifted by 7 m, covering part of the image, nodata 0
mk("coarse.tif", 15, 12, (X0 + 107, 30, 0, Y0 - 7, 0, -30), 32633, nodata=0, seed=3)
# finer (2.5 m), shifted by 1.3 m, in 3x3 blocks: for mode
mk("fine.tif", 250, 190, (X0 - 10.3, 2.5, 0, Y0 + 11.3, 0, -2.5), 32633, seed=4, block=3)
# EPSG:4326 around part of the image, nodata 0
t = osr.CoordinateTransformation(osr.SpatialReference(wkt(32633)),
                                 osr.SpatialReference(wkt(4326)))
lat, lon, _ = t.TransformPoint(X0, Y0)
mk("geo.tif", 80, 70, (lon - 0.0008, 0.0001, 0, lat + 0.0003, 0, -0.00007), 4326,
   nodata=0, seed=5)
# EPSG:32632, u16, over all but the image's west (its corner seen from zone 32)
t = osr.CoordinateTransformation(osr.SpatialReference(wkt(32633)),
                                 osr.SpatialReference(wkt(32632)))
x, y, _ = t.TransformPoint(X0, Y0)
mk("utm32.tif", 70, 60, (x + 150, 10, 0, y + 80, 0, -10), 32632, dt=gdal.GDT_UInt16, seed=6)
EOF

cat >cmp.py <<'EOF'
"""cmp.py DIR LABEL IMAGE near|mode|cut IGNORE ET: each DIR/*_label.tif
equals gdalwarp -r ALG -et ET of LABEL over the tile's window (-te/-ts,
the image's CRS), uncovered and nodata pixels IGNORE; or, for cut, the
label's own pixels at the tile's offset (gdal_translate -srcwin)."""
import glob, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d, lab, img, alg, ign, et = sys.argv[1:7]
ign, et = int(ign), float(et)
im = gdal.Open(img)
wkt, ig = im.GetProjection(), im.GetGeoTransform()
files = sorted(glob.glob(d + "/*_label.tif"))
assert files, "no label tiles"
seen = set()
for f in files:
    t = gdal.Open(f)
    g, w, h = t.GetGeoTransform(), t.RasterXSize, t.RasterYSize
    got = t.ReadAsArray()
    if alg == "cut":
        xo, yo = round((g[0] - ig[0]) / ig[1]), round((g[3] - ig[3]) / ig[5])
        ref = gdal.Translate("", lab, format="MEM", srcWin=[xo, yo, w, h]).ReadAsArray()
    else:
        # Int32 with nodata -1: GDAL nudges a value equal to the nodata
        # value, which IGNORE might be
        ref = gdal.Warp("", lab, format="MEM", dstSRS=wkt, errorThreshold=et,
                        outputBounds=(g[0], g[3] + h * g[5], g[0] + w * g[1], g[3]),
                        width=w, height=h, resampleAlg=alg, dstNodata=-1,
                        outputType=gdal.GDT_Int32).ReadAsArray()
        ref[ref < 0] = ign
    n = int((ref != got).sum())
    assert n == 0, "%s: %d of %d pixels differ from GDAL's" % (f, n, got.size)
    seen |= set(np.unique(got).tolist())
print(" ".join(str(v) for v in sorted(seen)))
EOF

# check NAME LABEL ALG IGNORE ET [cdp-tile options]: tiles img.tif with LABEL
# and compares every tile's label with GDAL's (gdalwarp -et ET); prints the
# values seen.
check() {
	name=$1 lab=$2 alg=$3 ign=$4 et=$5
	shift 5
	cdp-tile -q -s 16 -O "$name" --label "$lab" "$@" img.tif || fail "cdp-tile --label $lab $*"
	"$PYTHON" cmp.py "$name" "$lab" img.tif "$alg" "$ign" "$et" >"$name.seen" ||
		fail "$lab ($alg, -et $et): tiles differ from GDAL's"
}
E0="--label-error-threshold 0"
check same same.tif cut 255 0
[ "$(cat same.seen)" = "1 2 3 4 5" ] || fail "same grid: values $(cat same.seen)"
check coarse coarse.tif near 255 0 $E0
[ "$(cat coarse.seen)" = "1 2 3 4 5 255" ] || fail "coarse: values $(cat coarse.seen)"
check coarsemode coarse.tif mode 255 0 --label-resample mode $E0
check fine fine.tif near 255 0 $E0
check finemode fine.tif mode 255 0 --label-resample mode $E0
"$PYTHON" cmp.py finemode fine.tif img.tif near 255 0 >/dev/null 2>&1 &&
	fail "mode gave nearest neighbour's labels"
check geo geo.tif near 255 0 $E0
[ "$(cat geo.seen)" = "1 2 3 4 5 255" ] || fail "EPSG:4326: values $(cat geo.seen)"
check geomode geo.tif mode 255 0 --label-resample mode $E0
check utm32 utm32.tif near 65535 0 $E0
[ "$(cat utm32.seen)" = "1 2 3 4 5 65535" ] || fail "EPSG:32632: values $(cat utm32.seen)"
check ign7 coarse.tif near 7 0 --ignore 7 $E0
# --edge pad: the padding is the ignore value, the rest the warp's
cdp-tile -q -s 16 --edge pad -O pad --label geo.tif $E0 img.tif || fail "--edge pad"
"$PYTHON" - <<'EOF2' || fail "--edge pad: labels differ from GDAL's"
import glob
from osgeo import gdal
gdal.UseExceptions()
im = gdal.Open("img.tif")
ig, W, H = im.GetGeoTransform(), im.RasterXSize, im.RasterYSize
n = 0
for f in glob.glob("pad/*_label.tif"):
    t = gdal.Open(f)
    g, got = t.GetGeoTransform(), t.ReadAsArray()
    x0, y0 = round((g[0] - ig[0]) / ig[1]), round((g[3] - ig[3]) / ig[5])
    w, h = min(16, W - x0), min(16, H - y0)
    ref = gdal.Warp("", "geo.tif", format="MEM", dstSRS=im.GetProjection(),
                    errorThreshold=0, outputBounds=(g[0], g[3] + h * g[5], g[0] + w * g[1], g[3]),
                    width=w, height=h, dstNodata=-1, outputType=gdal.GDT_Int32).ReadAsArray()
    ref[ref < 0] = 255
    assert (got[:h, :w] == ref).all(), f
    assert (got[h:, :] == 255).all() and (got[:, w:] == 255).all(), f
    n += (h < 16) + (w < 16)
assert n > 0, "no padded tile"
EOF2
# by default, gdalwarp's default approximation (-et 0.125), and a coarser one
check geodef geo.tif near 255 0.125
check geomodedef geo.tif mode 255 0.125 --label-resample mode
check utm32et utm32.tif near 65535 2 --label-error-threshold 2
expect_fail 2 "--label-error-threshold: '-1'" \
	cdp-tile -s 16 --label geo.tif --label-error-threshold -1 img.tif

# bilinear, cubic and average interpolate values (value_labels.sh)
expect_fail 2 "--label-resample bilinear, cubic and average are for value labels" \
	cdp-tile -s 16 --label-kind class --label coarse.tif --label-resample cubic img.tif
# neither a geotransform nor GCPs on the label: nothing places it on the image's grid
"$PYTHON" -c 'from osgeo import gdal; gdal.GetDriverByName("GTiff").Create("nogt.tif", 30, 20, 1, gdal.GDT_Byte)'
expect_fail 1 "'img.tif': label 'nogt.tif' has neither a geotransform nor GCPs, the image has a geotransform: nothing places the label on the image's grid" \
	cdp-tile -s 16 --label nogt.tif img.tif
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "not one line: $(cat "$T/err")"

# --- --label-map: renumbering, names to the pool, other values ---
cat >mapcmp.py <<'EOF'
"""mapcmp.py DIR PLAIN IGNORE MAP [PLAIN_IGNORE]: each DIR/*_label.tif (u8)
equals the same tile of PLAIN (tiles of the label without a map, ignore
PLAIN_IGNORE, default 255) renumbered by MAP ("V:ID,..."; a value absent
from it IGNORE; PLAIN_IGNORE becomes IGNORE)."""
import glob, os, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d, plain, ign, spec = sys.argv[1:5]
ign = int(ign)
pign = int(sys.argv[5]) if len(sys.argv) > 5 else 255
lut = np.full(65536, ign, np.int64)
for item in spec.split(","):
    v, i = item.split(":")
    lut[int(v)] = int(i)
files = sorted(glob.glob(d + "/*_label.tif"))
assert files
for f in files:
    got = gdal.Open(f).ReadAsArray()
    src = gdal.Open(os.path.join(plain, os.path.basename(f))).ReadAsArray().astype(np.int64)
    want = np.where(src == pign, ign, lut[src])
    assert got.dtype == np.uint8, got.dtype
    assert (got == want).all(), "%s: %d pixels differ" % (f, int((got != want).sum()))
EOF
# inline, on the image's grid and on a warped one
cdp-tile -q -s 16 -O mapsame --label same.tif --label-map '1:0,2:1, 3:2,4:3,5:4' img.tif ||
	fail "inline --label-map"
"$PYTHON" mapcmp.py mapsame same 255 1:0,2:1,3:2,4:3,5:4 || fail "inline map on the image's grid"
cdp-tile -q -s 16 -O mapgeo --label geo.tif $E0 --label-map 1:3,2:3,3:0,4:1,5:2 img.tif ||
	fail "inline --label-map, warped"
"$PYTHON" mapcmp.py mapgeo geo 255 1:3,2:3,3:0,4:1,5:2 || fail "inline map on a warped label"
# the map comes before the warp: mode counts classes, not codes (gdalwarp
# -r mode of the label renumbered by numpy); a value the map lacks, with
# --label-map-other ignore, is left out of the mode as nodata is
"$PYTHON" - <<'EOF2' || fail "renumbering fine.tif with numpy"
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
for name, lut in (("fine_m.tif", [-1, 0, 0, 1, 1, 2]), ("geo_m.tif", [-1, 0, 0, 1, -1, -1])):
    src = gdal.Open(name.replace("_m", ""))
    a = src.ReadAsArray()
    d = gdal.GetDriverByName("GTiff").Create(name, src.RasterXSize, src.RasterYSize, 1,
                                             gdal.GDT_Int32)
    d.SetGeoTransform(src.GetGeoTransform())
    d.SetProjection(src.GetProjection())
    d.GetRasterBand(1).SetNoDataValue(-1)
    d.GetRasterBand(1).WriteArray(np.array(lut)[a])
EOF2
cdp-tile -q -s 16 -O mapmode --label fine.tif $E0 --label-resample mode \
	--label-map 1:0,2:0,3:1,4:1,5:2 img.tif || fail "--label-map with mode"
"$PYTHON" cmp.py mapmode fine_m.tif img.tif mode 255 0 >/dev/null ||
	fail "--label-map with mode: not the mode of the renumbered label"
"$PYTHON" mapcmp.py mapmode finemode 255 1:0,2:0,3:1,4:1,5:2 >/dev/null 2>&1 &&
	fail "mode renumbered after the warp gives the same tiles: the test cannot tell"
cdp-tile -q -s 16 -O mapmodegeo --label geo.tif $E0 --label-resample mode \
	--label-map 1:0,2:0,3:1 --label-map-other ignore img.tif || fail "--label-map-other ignore, mode"
"$PYTHON" cmp.py mapmodegeo geo_m.tif img.tif mode 255 0 >/dev/null ||
	fail "--label-map-other ignore with mode: not the mode of the renumbered label"
# a u16 label whose ids fit below 255 gives u8 labels
cdp-tile -q -s 16 -O maputm --label utm32.tif $E0 --label-map 1:0,2:1,3:2,4:3,5:4 img.tif ||
	fail "--label-map on a u16 label"
"$PYTHON" mapcmp.py maputm utm32 255 1:0,2:1,3:2,4:3,5:4 65535 || fail "u16 label mapped to u8"
# a value absent from the map: refused naming it and a pixel that holds it,
# or ignored
expect_fail 1 "'img.tif': label 'same.tif': value 5 at pixel (" \
	cdp-tile -q -s 16 -O refused --label same.tif --label-map 1:0,2:1,3:2,4:3 img.tif
[ ! -e refused ] || fail "a refused label value left tiles"
px=$(sed -n 's/.*at pixel (\([0-9]*\), \([0-9]*\)).*/\1 \2/p' "$T/err")
"$PYTHON" -c 'import sys
from osgeo import gdal
x, y = map(int, sys.argv[1:3])
assert gdal.Open("same.tif").ReadAsArray()[y, x] == 5' $px || fail "the refused pixel ($px) does not hold 5"
cdp-tile -q -s 16 -O mapother --label same.tif --label-map 1:0,2:1,3:2,4:3 \
	--label-map-other ignore img.tif || fail "--label-map-other ignore"
"$PYTHON" mapcmp.py mapother same 255 1:0,2:1,3:2,4:3 || fail "--label-map-other ignore"
expect_fail 1 "the ignore value 2 is also the class id of label value 3" \
	cdp-tile -q -s 16 --label same.tif --label-map 1:0,2:1,3:2 --ignore 2 img.tif

# a file with names: they become the pool's class names
cat >classes.map <<'EOF'
# ESA-like codes to class ids
1 0 bare ground
2 1 water
3 1 water
4 2 built-up
5 2
EOF
cdp-tile -q -s 16 --label coarse.tif --label-map classes.map img.tif >named.cdps ||
	fail "--label-map FILE"
cdp-lmdbpack -q pool <named.cdps || fail "cdp-lmdbpack of a stream with class names"
names=$(PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
print("|".join(cdpool.Pool(sys.argv[1], lock=False).class_names))' pool) ||
	fail "cdpool.Pool: $names"
[ "$names" = "bare ground|water|built-up" ] || fail "the pool's class names: '$names'"
# the pool's own --classes must agree with them
expect_fail 1 "source 'img' names class 1 'water', --classes names it 'lake'" \
	cdp-lmdbpack -q --classes 'bare ground,lake,built-up' pool2 <named.cdps
cdp-lmdbpack -q --classes 'bare ground,water,built-up' pool3 <named.cdps ||
	fail "cdp-lmdbpack --classes equal to the stream's"

# malformed maps: refused naming the line, before any output
printf '1 0 a\n2 1 b\n1 2 c\n' >dup.map
expect_fail 1 "label map 'dup.map' line 3: value 1 is given twice (first at 1)" \
	cdp-tile -q -s 16 --label same.tif --label-map dup.map img.tif
printf '1 0 a\n2 2 c\n' >hole.map
expect_fail 1 "label map 'hole.map': names some ids but not id 1" \
	cdp-tile -q -s 16 --label same.tif --label-map hole.map img.tif
printf '1 0 a\n2 0 b\n' >clash.map
expect_fail 1 "label map 'clash.map' line 2: id 0 is named both 'a' and 'b'" \
	cdp-tile -q -s 16 --label same.tif --label-map clash.map img.tif
printf '1 x\n' >syntax.map
expect_fail 1 "label map 'syntax.map' line 1: not VALUE ID" \
	cdp-tile -q -s 16 --label same.tif --label-map syntax.map img.tif
expect_fail 1 "cannot read label map 'nope.map'" \
	cdp-tile -q -s 16 --label same.tif --label-map nope.map img.tif
expect_fail 2 "--label-map: '1:0,70000:1': item 2: a value above 65535" \
	cdp-tile -q -s 16 --label same.tif --label-map 1:0,70000:1 img.tif
expect_fail 2 "--label-map: '1:0,,': item 2: not VALUE:ID" \
	cdp-tile -q -s 16 --label same.tif --label-map 1:0,, img.tif
expect_fail 2 "--label-map needs --label, --label-all or --label-suffix" \
	cdp-tile -q -s 16 --label-map 1:0 img.tif
# every option that only a label uses is a usage error without one, as
# --label-map is (they were ignored without a word, exit 0); the first
# given is named
for lo in "--ignore 3" "--label-kind value" "--label-bands 1" "--label-resample mode" \
	"--label-error-threshold 0" "--label-map-other ignore"; do
	# shellcheck disable=SC2086
	expect_fail 2 "^cdp-tile: ${lo% *} needs --label, --label-all or --label-suffix\$" \
		cdp-tile -q -s 16 $lo img.tif
	[ ! -s "$T/out" ] || fail "cdp-tile $lo without a label wrote a stream"
done
expect_fail 2 "^cdp-tile: --label-kind needs --label, --label-all or --label-suffix\$" \
	cdp-tile -q -s 16 --label-kind value --ignore 3 img.tif
# --tps also places --time dates: not a label's only, but alone it would
# do nothing (it was taken without a word)
expect_fail 2 "^cdp-tile: --tps needs a label (--label, --label-all or --label-suffix) or --time dates, which it places on the image's grid\$" \
	cdp-tile -q -s 16 --tps img.tif
cdp-tile -q -s 16 --tps --time img.tif,img.tif >/dev/null || fail "--tps with --time dates refused"
cdp-tile -q -s 16 --tps --label same.tif img.tif >/dev/null || fail "--tps with a label refused"
exit 0
