#!/bin/sh
# cdp-predict's class maps as GIS tools read them (GDAL's own reading):
#  - a GeoTIFF of 256x256 deflate tiles with overviews (mode of the
#    classes), a colour table (the fixed palette; nodata 255 transparent),
#    category names and a raster attribute table ("class K" by default);
#  - --vector-class takes an id, a class name or all (each polygon with its
#    class and name), on a 3-class model;
#  - --colors FILE names and colours the classes, in the --preview PNG
#    too (whose stretch leaves nodata out); --vector polygons carry
#    the name beside the id; --prob bands are described by the names;
#  - the same map under a GDAL block cache smaller than the map (the
#    palette set before the first row);
#  - --cog writes a Cloud Optimized GeoTIFF that GDAL's validator accepts;
#  - a pool packed with --classes names the classes (UTF-8 passes) through
#    the checkpoint, without --colors: category names, attribute table,
#    polygons' names, probability bands' descriptions; cdp-train leaves
#    out the names beyond the model's classes, and all when one cannot be
#    kept (a tab), saying so in one line;
#  - a bad --colors file is refused, naming the line, and nothing written
#    (a control character such as a NUL or an escape, a name not UTF-8);
#  - a segmentation model with -o x.csv is refused (it writes a raster);
#  - a raster georeferenced by GCPs only (no geotransform) keeps them: the
#    class map, the --prob COG list the same GCPs in the same CRS, and the
#    --vector polygons lie in that CRS within the GCPs' extent;
#  - a model trained on GCP scenes (--time dates and a label with the same
#    GCPs) records their CRS and no pixel size (not GDAL's default 1 x 1),
#    so a georeferenced raster draws no pixel-size warning; --time dates
#    placed by GCPs, or by nothing, are predicted, the map keeping the
#    first date's GCPs; a date placed by GCPs against a first date on a
#    geotransform, or the reverse, is warped through the GCPs (their
#    polynomial, or with --tps their spline; --tps without --time is a
#    usage error): with GCPs that encode b.tif's geotransform the map is
#    b.tif's own;
#  - a raster placed by RPCs keeps them in the class map and the --prob COG
#    (gdalwarp -rpc orthorectifies the map);
#  - no temporary file is left beside the outputs;
#  - cdp-evaluate --png draws the confusion matrix: a grid of shaded cells
#    with the counts, the classes named from the prediction's categories
#    (a prediction without them draws "class K" instead: only the labels
#    change, not the cells).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
D="$CDP_SRCDIR/tests/predict"
"$PYTHON" "$D/mkthreshold.py" "$T/a.tif" 256 256 1
"$PYTHON" "$D/mkthreshold.py" "$T/b.tif" 600 520 2 --nodata-rect 10,20,30,15
cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" | cdp-lmdbpack -q "$T/pool"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$CDP_SRCDIR/tests/train/small.cfg:channels=1" \
	--out "$T/run" --steps 100 --batch 4 --threads 1 --lr 0.05 || fail "training failed"
mkdir "$T/o"
# py CODE: Python with numpy, gdal and ogr, and info(PATH): gdalinfo's JSON
py() {
	"$PYTHON" -c "import sys, numpy as np; from osgeo import gdal, ogr; gdal.UseExceptions()
def info(p): return gdal.Info(p, format='json')
$1"
}

echo "== a tiled class map with overviews, colours and names"
cdp-predict -q "$T/run" "$T/b.tif" -o "$T/o/map.tif" || fail "prediction failed"
py "
i = info('$T/o/map.tif'); b = i['bands'][0]
assert b['block'] == [256, 256], b['block']
assert i['metadata']['IMAGE_STRUCTURE']['COMPRESSION'] == 'DEFLATE', i['metadata']
assert [o['size'] for o in b['overviews']] == [[300, 260], [150, 130]], b['overviews']
assert b['colorInterpretation'] == 'Palette', b['colorInterpretation']
e = b['colorTable']['entries']
assert e[0] == [210, 210, 210, 255] and e[1] == [228, 26, 28, 255] and e[255][3] == 0, e[:2]
assert b['categories'] == ['class 0', 'class 1'], b.get('categories')
d = gdal.Open('$T/o/map.tif')  # kept: a RAT outliving its dataset crashes Python
rat = d.GetRasterBand(1).GetDefaultRAT()
assert [rat.GetNameOfCol(c) for c in range(5)] == ['Value', 'Class', 'Red', 'Green', 'Blue']
assert [rat.GetValueAsString(r, 1) for r in range(rat.GetRowCount())] == ['class 0', 'class 1']
o = d.GetRasterBand(1).GetOverview(0).ReadAsArray()
assert set(np.unique(o)) <= {0, 1, 255} and (o == 1).any(), 'the overview is not of classes'
" || fail "the class map is not tiled, with overviews, colours and names"

echo "== a class map larger than GDAL's block cache"
# GDAL_CACHEMAX of 200 kB (in bytes): blocks of the map are flushed while
# rows are still written, so its palette must be set before the first row
# (libtiff refuses it later): the same map, colours and all
GDAL_CACHEMAX=200000 cdp-predict -q "$T/run" "$T/b.tif" -o "$T/o/small_cache.tif" ||
	fail "a class map larger than the block cache"
py "
a, b = gdal.Open('$T/o/map.tif'), gdal.Open('$T/o/small_cache.tif')
assert np.array_equal(a.ReadAsArray(), b.ReadAsArray()), 'the maps differ'
assert b.GetRasterBand(1).GetColorTable().GetCount() == 256, 'no colour table'
assert b.GetRasterBand(1).GetCategoryNames() == ['class 0', 'class 1']
" || fail "the class map written under a small block cache"

echo "== --colors, --vector, --prob"
cat >"$T/roads.colors" <<'END'
# class value, red, green, blue, name
0 240 240 240 background
1   200 0 0   paved road
END
cdp-predict -q --colors "$T/roads.colors" --vector "$T/o/v.gpkg" "$T/run" "$T/b.tif" \
	-o "$T/o/named.tif" --preview "$T/o/named.png" || fail "--colors --vector failed"
# the preview paints the class map's colours (--colors included) and
# stretches the band between the 2nd and 98th percentiles of its valid
# pixels only (the nodata rectangle left out)
py "
m = gdal.Open('$T/o/named.tif').ReadAsArray()
p = gdal.Open('$T/o/named.png').ReadAsArray()
d = gdal.Open('$T/b.tif'); b = d.GetRasterBand(1)  # d kept while b is used
v = b.ReadAsArray().astype(np.float32)
assert p.shape == (3,) + m.shape, p.shape
assert (m == 1).any() and (m == 255).any(), 'want both a class 1 and nodata'
assert (p[:, m == 1] == np.array([[200], [0], [0]])).all(), 'class 1 not in its --colors colour'
assert (p[:, m == 255] == 0).all(), 'nodata not black'
ok = (m != 255) & (v != np.float32(b.GetNoDataValue()))
s = np.sort(v[ok]); lo, hi = s[int(0.02 * (len(s) - 1))], s[int(0.98 * (len(s) - 1))]
want = np.rint(255 * np.clip((v - lo) / (hi - lo), 0, 1)).astype(np.uint8)
z = m == 0
assert (p[0][z] == want[z]).all() and (p[2][z] == want[z]).all(), 'class 0 not the stretch of the valid pixels'
" || fail "the preview is not painted in the map's colours, or stretched over nodata"
# --preview-bands: the input's bands as red, green and blue (here a
# 3-band copy of b.tif whose bands differ), or one as gray
mkdir "$T/pb"
py "
d = gdal.Open('$T/b.tif'); b = d.GetRasterBand(1); v = b.ReadAsArray().astype(np.float32)
nd = b.GetNoDataValue()
o = gdal.GetDriverByName('GTiff').Create('$T/b3.tif', d.RasterXSize, d.RasterYSize, 3, gdal.GDT_Byte)
o.SetGeoTransform(d.GetGeoTransform()); o.SetProjection(d.GetProjection())
for i, x in enumerate([v, 254 - v, np.sqrt(v) * 15]):
    x = np.where(v == nd, nd, x)
    o.GetRasterBand(i + 1).WriteArray(x); o.GetRasterBand(i + 1).SetNoDataValue(nd)
o = None
" || fail "cannot make the 3-band scene"
cdp-predict -q --colors "$T/roads.colors" "$T/run" "$T/b3.tif" -o "$T/pb/b3.tif" \
	--preview "$T/pb/b3.png" --preview-bands 3,2,1 || fail "--preview-bands 3,2,1 failed"
cdp-predict -q "$T/run" "$T/b3.tif" -o "$T/pb/b3g.tif" --preview "$T/pb/b3g.png" \
	--preview-bands 2 || fail "--preview-bands 2 failed"
py "
m = gdal.Open('$T/pb/b3.tif').ReadAsArray()
d = gdal.Open('$T/b3.tif')
def want(k):
    b = d.GetRasterBand(k); v = b.ReadAsArray().astype(np.float32)
    ok = (m != 255) & (v != np.float32(b.GetNoDataValue()))
    s = np.sort(v[ok]); lo, hi = s[int(0.02 * (len(s) - 1))], s[int(0.98 * (len(s) - 1))]
    return np.rint(255 * np.clip((v - lo) / (hi - lo), 0, 1)).astype(np.uint8)
z = m == 0
p = gdal.Open('$T/pb/b3.png').ReadAsArray()
for c, k in enumerate([3, 2, 1]):
    assert (p[c][z] == want(k)[z]).all(), 'channel %d is not band %d' % (c, k)
g = gdal.Open('$T/pb/b3g.png').ReadAsArray()
for c in range(3):
    assert (g[c][z] == want(2)[z]).all(), 'gray channel %d is not band 2' % c
" || fail "--preview-bands did not show the bands asked for"
expect_fail 1 "cdp-predict: --preview-bands 4: '$T/b3.tif' has 3 bands" \
	cdp-predict -q "$T/run" "$T/b3.tif" -o "$T/pb/x.tif" --preview "$T/pb/x.png" --preview-bands 3,4,1
[ ! -e "$T/pb/x.tif" ] && [ ! -e "$T/pb/x.png" ] || fail "a refused --preview-bands left outputs"
expect_fail 2 "cdp-predict: --preview-bands: '1,2' is not one band (gray) or three" \
	cdp-predict -q "$T/run" "$T/b3.tif" -o "$T/pb/x.tif" --preview "$T/pb/x.png" --preview-bands 1,2
expect_fail 2 "cdp-predict: --preview-bands needs --preview" \
	cdp-predict -q "$T/run" "$T/b3.tif" -o "$T/pb/x.tif" --preview-bands 1
py "
b = info('$T/o/named.tif')['bands'][0]
assert b['categories'] == ['background', 'paved road'], b.get('categories')
assert b['colorTable']['entries'][:2] == [[240, 240, 240, 255], [200, 0, 0, 255]]
v = ogr.Open('$T/o/v.gpkg')
fs = list(v.GetLayer(0))
assert fs and {(f.GetField('class'), f.GetField('name')) for f in fs} == {(1, 'paved road')}
" || fail "--colors names and colours, or the polygons' names, are wrong"
cdp-predict -q --prob --colors "$T/roads.colors" "$T/run" "$T/b.tif" -o "$T/o/prob.tif" ||
	fail "--prob failed"
py "
i = info('$T/o/prob.tif')
assert [b['description'] for b in i['bands']] == ['background', 'paved road'], i['bands']
assert all(b['block'] == [256, 256] and len(b['overviews']) == 2 for b in i['bands'])
" || fail "the probability bands are not described by the class names"

echo "== --cog"
cdp-predict -q --cog --colors "$T/roads.colors" "$T/run" "$T/b.tif" -o "$T/o/cog.tif" ||
	fail "--cog failed"
py "
i = info('$T/o/cog.tif'); b = i['bands'][0]
assert i['metadata']['IMAGE_STRUCTURE'].get('LAYOUT') == 'COG', i['metadata']
assert b['block'] == [256, 256] and len(b['overviews']) == 2, b
assert b['categories'] == ['background', 'paved road'] and b['colorTable']['entries'][1][:3] == [200, 0, 0]
try:
    from osgeo_utils.samples.validate_cloud_optimized_geotiff import validate
except ImportError:
    print('no GDAL COG validator: checked LAYOUT=COG only'); sys.exit(0)
w, e, _ = validate('$T/o/cog.tif', full_check=True)
assert not e and not w, (w, e)
print('GDAL validates the COG')
" || fail "--cog is not a valid Cloud Optimized GeoTIFF with colours and names"
left=$(ls -A "$T/o" | grep -v -x -e map.tif -e map.tif.aux.xml -e named.tif -e named.tif.aux.xml \
	-e named.png -e prob.tif -e v.gpkg -e cog.tif -e cog.tif.aux.xml -e small_cache.tif \
	-e small_cache.tif.aux.xml || true)
[ -z "$left" ] || fail "files left beside the outputs: $left"

echo "== a pool's class names (--classes), through the checkpoint"
cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" |
	cdp-lmdbpack -q --classes 'background,route pavée' "$T/npool"
cdp-keyshuffle -q --seed 1 -o "$T/nkeys" "$T/npool"
cdp-train -q --db "$T/npool" --keys "$T/nkeys" --model "$CDP_SRCDIR/tests/train/small.cfg:channels=1" \
	--out "$T/nrun" --steps 100 --batch 4 --threads 1 --lr 0.05 || fail "training on --classes failed"
mkdir "$T/n"
cdp-predict -q --vector "$T/n/v.gpkg" "$T/nrun" "$T/b.tif" -o "$T/n/map.tif" ||
	fail "prediction (--classes) failed"
cdp-predict -q --prob "$T/nrun" "$T/b.tif" -o "$T/n/prob.tif" || fail "--prob (--classes) failed"
py "
names = ['background', 'route pav\u00e9e']
b = info('$T/n/map.tif')['bands'][0]
assert b['categories'] == names, b.get('categories')
e = b['colorTable']['entries']
assert e[0] == [210, 210, 210, 255] and e[1] == [228, 26, 28, 255] and e[255][3] == 0, e[:2]
d = gdal.Open('$T/n/map.tif')
rat = d.GetRasterBand(1).GetDefaultRAT()
assert [rat.GetValueAsString(r, 1) for r in range(rat.GetRowCount())] == names
v = ogr.Open('$T/n/v.gpkg')  # kept: its features outlive it otherwise
fs = list(v.GetLayer(0))
assert fs and {(f.GetField('class'), f.GetField('name')) for f in fs} == {(1, names[1])}
assert [x['description'] for x in info('$T/n/prob.tif')['bands']] == names
" || fail "the pool's class names are not the class map's"
# ckn RUNDIR: its checkpoint's class names, one a line
ckn() {
	"$PYTHON" -c "import sys; sys.path.insert(0, '$CDP_SRCDIR/python'); import cdpool
print('\n'.join(cdpool.load_checkpoint('$1/checkpoint.cdpt').class_names))"
}
for names in 'a,b,c' "$(printf 'a\tb,c')"; do
	rm -rf "$T/xpool" "$T/xrun"
	case $names in
	a,b,c) cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" |
		cdp-lmdbpack -q --classes "$names" "$T/xpool" ;;
	*) # cdp-lmdbpack refuses such a name now (tests/tools/pool_fix.sh): a pool
	   # packed before that rule has it in its meta, forged here under a good CRC
		cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" |
			cdp-lmdbpack -q --classes "x,c" "$T/xpool"
		py "
import lmdb, zlib
env = lmdb.open('$T/xpool', max_dbs=4)
with env.begin(write=True) as t:
    body = b'class.0=a\\tb\\nclass.1=c\\n'
    t.put(b'class_names', body + b'crc32=%08x\\n' % zlib.crc32(body), db=env.open_db(b'meta', txn=t))
" || fail "cannot forge the class names" ;;
	esac
	cdp-keyshuffle -q --seed 1 -o "$T/xkeys" "$T/xpool"
	cdp-train -q --db "$T/xpool" --keys "$T/xkeys" --model "$CDP_SRCDIR/tests/train/small.cfg:channels=1" \
		--out "$T/xrun" --steps 1 --batch 4 --threads 1 2>"$T/err" || fail "training on '$names': $(cat "$T/err")"
	case $names in
	a,b,c) want="cdp-train: '$T/xpool' names 3 classes (meta 'class_names'), the model has 2: the names of classes 2 and on are not kept"
		kept="a
b" ;;
	*) want="cdp-train: '$T/xpool': class 0's name has a control character at byte 2 (meta 'class_names'): the class names are not kept"
		kept= ;;
	esac
	[ "$(cat "$T/err")" = "$want" ] || fail "training on '$names' said: $(cat "$T/err")"
	[ "$(ckn "$T/xrun")" = "$kept" ] || fail "training on '$names' kept: $(ckn "$T/xrun")"
done

echo "== bad --colors files"
printf '0 1 2\n' >"$T/short.colors"
expect_fail 1 "'$T/short.colors' line 1: want VALUE R G B" cdp-predict -q --colors "$T/short.colors" \
	"$T/run" "$T/b.tif" -o "$T/o/x.tif"
printf '# ok\n1 300 0 0 road\n' >"$T/big.colors"
expect_fail 1 "'$T/big.colors' line 2: want VALUE R G B" cdp-predict -q --colors "$T/big.colors" \
	"$T/run" "$T/b.tif" -o "$T/o/x.tif"
# two lines for one class: refused naming both (the last one won)
printf '1 200 0 0 road\n0 1 1 1 land\n1 0 0 200 river\n' >"$T/twice.colors"
expect_fail 1 "^cdp-predict: '$T/twice.colors' line 3: class 1 again (line 1 gave it)\$" \
	cdp-predict -q --colors "$T/twice.colors" "$T/run" "$T/b.tif" -o "$T/o/x.tif"
printf '2 1 2 3 water\n' >"$T/k.colors"
expect_fail 1 "'$T/k.colors' line 1: class 2, but the model has 2 classes" cdp-predict -q \
	--colors "$T/k.colors" "$T/run" "$T/b.tif" -o "$T/o/x.tif"
expect_fail 1 "cannot open '$T/none.colors'" cdp-predict -q --colors "$T/none.colors" \
	"$T/run" "$T/b.tif" -o "$T/o/x.tif"
# a NUL (once "longer than 510 bytes") and an escape (once a name)
printf '1 200 0 0 ro\000ad\n' >"$T/nul.colors"
expect_fail 1 "^cdp-predict: '$T/nul.colors' line 1: control character 0x00 at byte 13\$" \
	cdp-predict -q --colors "$T/nul.colors" "$T/run" "$T/b.tif" -o "$T/o/x.tif"
printf '1 200 0 0 \033[31mroad\n' >"$T/esc.colors"
expect_fail 1 "^cdp-predict: '$T/esc.colors' line 1: control character 0x1b at byte 11\$" \
	cdp-predict -q --colors "$T/esc.colors" "$T/run" "$T/b.tif" -o "$T/o/x.tif"
printf '1 200 0 0 r\377d\n' >"$T/utf.colors"
expect_fail 1 "^cdp-predict: '$T/utf.colors' line 1: the name is not UTF-8 at byte 2\$" \
	cdp-predict -q --colors "$T/utf.colors" "$T/run" "$T/b.tif" -o "$T/o/x.tif"
[ ! -e "$T/o/x.tif" ] || fail "a refused --colors left an output"
# the --colors file is an input: no output may be it, or be a file whose
# side file it is (once replaced by the map's class names, the preview)
cp "$T/roads.colors" "$T/o/m.tif.aux.xml"
cp "$T/roads.colors" "$T/o/c.png"
expect_fail 1 "^cdp-predict: refusing to write '$T/o/c.png': it is the --colors file '$T/o/c.png'\$" \
	cdp-predict -q --colors "$T/o/c.png" "$T/run" "$T/b.tif" -o "$T/o/m.tif" --preview "$T/o/c.png"
expect_fail 1 "^cdp-predict: refusing to write '$T/o/m.tif': .*--colors file '$T/o/m.tif.aux.xml'" \
	cdp-predict -q --colors "$T/o/m.tif.aux.xml" "$T/run" "$T/b.tif" -o "$T/o/m.tif"
cmp -s "$T/roads.colors" "$T/o/c.png" && cmp -s "$T/roads.colors" "$T/o/m.tif.aux.xml" ||
	fail "an output overwrote the --colors file"
[ ! -e "$T/o/m.tif" ] || fail "a refused output over --colors was written"
rm -f "$T/o/c.png" "$T/o/m.tif.aux.xml"

echo "== a segmentation model asked for a CSV"
expect_fail 1 "^cdp-predict: '$T/run/checkpoint.cdpt' is a segmentation model, which writes a raster, not the CSV that -o '$T/o/x.csv' names (.csv): give -o OUT.tif\$" \
	cdp-predict -q "$T/run" "$T/b.tif" -o "$T/o/x.csv"
[ ! -e "$T/o/x.csv" ] || fail "a refused -o x.csv was written"

echo "== a raster georeferenced by GCPs only"
# corners of b.tif (600 x 520) on a UTM grid of 2 m, no geotransform
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 5800000 -gcp 600 0 501200 5800000 \
	-gcp 0 520 500000 5798960 -gcp 600 520 501200 5798960 "$T/b.tif" "$T/gcp.tif"
cdp-predict -q --vector "$T/o/gv.gpkg" "$T/run" "$T/gcp.tif" -o "$T/o/g.tif" ||
	fail "prediction of the GCP raster failed"
cdp-predict -q --prob --cog "$T/run" "$T/gcp.tif" -o "$T/o/gp.tif" ||
	fail "--prob --cog of the GCP raster failed"
py "
src = gdal.Open('$T/gcp.tif')
want = [(g.GCPPixel, g.GCPLine, g.GCPX, g.GCPY) for g in src.GetGCPs()]
assert src.GetGeoTransform(can_return_null=True) is None and len(want) == 4
for p in ('$T/o/g.tif', '$T/o/gp.tif'):
    d = gdal.Open(p)
    got = [(g.GCPPixel, g.GCPLine, g.GCPX, g.GCPY) for g in d.GetGCPs()]
    assert got == want, (p, got)
    assert d.GetGCPSpatialRef().GetAuthorityCode(None) == '32633', p
v = ogr.Open('$T/o/gv.gpkg'); l = v.GetLayer(0)
assert l.GetSpatialRef().GetAuthorityCode(None) == '32633'
x0, x1, y0, y1 = l.GetExtent()
assert 500000 <= x0 < x1 <= 501200 and 5798960 <= y0 < y1 <= 5800000, l.GetExtent()
print('GCPs and their CRS in the class map, the probabilities (COG) and the polygons')
" || fail "the GCPs did not reach every output"
[ "$(gdalinfo "$T/o/g.tif" | grep -c '^GCP\[')" -eq 4 ] || fail "gdalinfo lists no GCPs: $(gdalinfo "$T/o/g.tif")"

echo "== GCP scenes: training, --time, the pixel size"
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 5800000 -gcp 256 0 500128 5800000 \
	-gcp 0 256 500000 5799872 -gcp 256 256 500128 5799872 "$T/a.tif" "$T/ag.tif"
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 5800000 -gcp 256 0 500128 5800000 \
	-gcp 0 256 500000 5799872 -gcp 256 256 500128 5799872 "$T/a_mask.tif" "$T/ag_mask.tif"
py "s = gdal.Open('$T/b.tif'); d = gdal.GetDriverByName('GTiff').Create('$T/bare.tif', s.RasterXSize, s.RasterYSize, 1); d.WriteRaster(0, 0, s.RasterXSize, s.RasterYSize, s.ReadRaster())"
cdp-tile -q --size 64 --label "$T/ag_mask.tif" --time "$T/ag.tif,$T/ag.tif" |
	cdp-lmdbpack -q "$T/gpool" && cdp-keyshuffle -q --seed 1 -o "$T/gkeys" "$T/gpool" &&
	cdp-train -q --db "$T/gpool" --keys "$T/gkeys" --out "$T/grun" --steps 3 --batch 2 \
		--threads 1 --model "$CDP_SRCDIR/tests/train/small.cfg:channels=2" ||
	fail "training on GCP scenes failed"
py "
sys.path.insert(0, '$CDP_SRCDIR/python'); import cdpool
from osgeo import osr
ck = cdpool.load_checkpoint('$T/grun/checkpoint.cdpt')
assert tuple(ck.res) == (0, 0), ck.res
s = osr.SpatialReference(); s.ImportFromWkt(ck.crs)
assert s.GetAuthorityCode(None) == '32633', ck.crs
" || fail "the GCP-trained checkpoint's CRS and pixel size"
cdp-predict -q "$T/grun" --time "$T/gcp.tif,$T/gcp.tif" -o "$T/o/gt.tif" 2>"$T/err" ||
	fail "--time of GCP dates: $(cat "$T/err")"
[ "$(gdalinfo "$T/o/gt.tif" | grep -c '^GCP\[')" -eq 4 ] || fail "--time map lists no GCPs"
cdp-predict -q "$T/grun" --time "$T/bare.tif,$T/bare.tif" -o "$T/o/bt.tif" 2>"$T/err" ||
	fail "--time of dates without georeference: $(cat "$T/err")"
cdp-predict -q "$T/grun" --time "$T/b.tif,$T/b.tif" -o "$T/o/btg.tif" 2>"$T/err" ||
	fail "--time of georeferenced dates: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "a model without a pixel size warned: $(cat "$T/err")"
gdal_translate -q -a_srs EPSG:32633 -gcp 0 0 500000 5800000 -gcp 600 0 500300 5800000 \
	-gcp 0 520 500000 5799740 -gcp 600 520 500300 5799740 -gcp 300 260 500150 5799870 \
	"$T/b.tif" "$T/bgcp2.tif" || fail "b.tif's GCP twin"
# and by the thin plate spline through them with --tps, which through GCPs
# that encode a geotransform is that geotransform too
for d in "bgcp2.tif,b.tif" "b.tif,bgcp2.tif"; do
	for tps in "" --tps; do
		cdp-predict -q $tps "$T/grun" --time "$T/${d%,*},$T/${d#*,}" -o "$T/o/tw.tif" ||
			fail "--time $d $tps: a date warped through GCPs"
		py "
a, b = gdal.Open('$T/o/btg.tif').ReadAsArray(), gdal.Open('$T/o/tw.tif').ReadAsArray()
assert (a == b).all(), ('$d', (a != b).sum())
" || fail "--time $d $tps: not the map of b.tif,b.tif"
	done
done
expect_fail 2 "^cdp-predict: --tps needs --time (it places the dates that GCPs place)\$" \
	cdp-predict --tps "$T/grun" "$T/b.tif" -o "$T/o/x.tif"

echo "== a raster placed by RPCs"
py "
s = gdal.Open('$T/b.tif')
d = gdal.GetDriverByName('GTiff').Create('$T/rpc.tif', s.RasterXSize, s.RasterYSize, 1)
d.WriteRaster(0, 0, s.RasterXSize, s.RasterYSize, s.ReadRaster())
z = '0 ' * 17
d.SetMetadata({'LINE_OFF': '260', 'SAMP_OFF': '300', 'LAT_OFF': '52.3', 'LONG_OFF': '15.0',
  'HEIGHT_OFF': '0', 'LINE_SCALE': '260', 'SAMP_SCALE': '300', 'LAT_SCALE': '0.001',
  'LONG_SCALE': '0.001', 'HEIGHT_SCALE': '100', 'LINE_NUM_COEFF': '0 0 -1 ' + z,
  'LINE_DEN_COEFF': '1 ' + '0 ' * 19, 'SAMP_NUM_COEFF': '0 1 0 ' + z,
  'SAMP_DEN_COEFF': '1 ' + '0 ' * 19}, 'RPC')
"
cdp-predict -q "$T/run" "$T/rpc.tif" -o "$T/o/rpc.tif" &&
	cdp-predict -q --prob --cog "$T/run" "$T/rpc.tif" -o "$T/o/rpcp.tif" ||
	fail "prediction of the RPC raster failed"
py "
want = gdal.Open('$T/rpc.tif').GetMetadata('RPC')
for p in ('$T/o/rpc.tif', '$T/o/rpcp.tif'):
    got = gdal.Open(p).GetMetadata('RPC')
    assert {k: float(got[k]) for k in got if 'COEFF' not in k} == {k: float(want[k]) for k in want if 'COEFF' not in k}, (p, got)
    assert got['LINE_NUM_COEFF'].split()[:3] == ['0', '0', '-1'] or [float(v) for v in got['LINE_NUM_COEFF'].split()[:3]] == [0, 0, -1], got
" || fail "the RPCs did not reach the maps"
gdalwarp -q -rpc "$T/o/rpc.tif" "$T/o/ortho.tif" || fail "gdalwarp -rpc of the map"

echo "== cdp-evaluate --png"
cdp-evaluate --png "$T/cm.png" "$T/o/named.tif" "$T/b_mask.tif" >"$T/report" ||
	fail "cdp-evaluate --png failed"
# the same file name (the title names it) without the category names
mkdir "$T/plain" && gdal_translate -q "$T/o/named.tif" "$T/plain/named.tif" &&
	rm -f "$T/plain/named.tif.aux.xml"
cdp-evaluate --png "$T/cm_plain.png" "$T/plain/named.tif" "$T/b_mask.tif" >/dev/null ||
	fail "cdp-evaluate --png (no names) failed"
py "
def load(p):
    d = gdal.Open(p)
    return np.moveaxis(d.ReadAsArray(), 0, -1).astype(int)
a, b = load('$T/cm.png'), load('$T/cm_plain.png')
assert a.shape == b.shape and a.shape[2] == 3, (a.shape, b.shape)
# the cells: inside the frame, the longest neutral dark lines (cells are blue)
dark = (a.sum(2) < 500) & (a.max(2) - a.min(2) < 30)
cols = np.where(dark.mean(0) > 0.3)[0]; x0, x1 = cols[0], cols[-1]
rows = np.where(dark[:, x0:x1].mean(1) > 0.9)[0]; y0, y1 = rows[0], rows[-1]
cell = (y1 - y0) // 2
assert abs((x1 - x0) - (y1 - y0)) <= 2 and cell > 30, (y0, y1, x0, x1)
conf = [[int(v) for v in l.split()[1:]] for l in open('$T/report') if l.split()[:1] in (['0'], ['1']) and len(l.split()) == 3]
shade = [[a[y0 + cell * i + 4, x0 + cell * j + 4].sum() for j in range(2)] for i in range(2)]
for i in range(2):  # the larger count of a row is the darker cell
    assert (conf[i][0] > conf[i][1]) == (shade[i][0] < shade[i][1]), (conf, shade)
    for j in range(2):  # its count, as text, in the cell: pixels off the cell's shade
        c = a[y0 + cell * i + 4:y0 + cell * (i + 1) - 4, x0 + cell * j + 4:x0 + cell * (j + 1) - 4]
        assert (np.abs(c - c[0, 0]).max(2) > 60).sum() > 20, ('no count in cell', i, j)
same = (a == b).all(2)
assert same[y0 + 2:y1 - 1, x0 + 2:x1 - 1].all(), 'the cells differ with the names'
assert not same[:, :x0].all(), 'the row labels do not change with the names'
assert not same[:y0].all(), 'the column labels do not change with the names'
assert dark[:25].sum() > 30, 'no title'
print('confusion matrix %dx%d: cells, counts and names found' % (a.shape[1], a.shape[0]))
" || fail "cdp-evaluate --png does not draw the matrix with names and counts"

echo "== --vector-class: an id, a class name, all (a 3-class model)"
cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" |
	cdp-lmdbpack -q --classes bg,road,water "$T/tpool"
cdp-keyshuffle -q --seed 1 -o "$T/tkeys" "$T/tpool"
cdp-train -q --db "$T/tpool" --keys "$T/tkeys" \
	--model "$CDP_SRCDIR/tests/train/small.cfg:channels=1,classes=3" \
	--out "$T/trun" --steps 60 --batch 4 --threads 1 --lr 0.05 2>/dev/null ||
	fail "training a 3-class model failed"
mkdir "$T/t"
cdp-predict -q --vector "$T/t/all.gpkg" --vector-class all "$T/trun" "$T/b.tif" \
	-o "$T/t/map.tif" || fail "--vector-class all failed"
cdp-predict -q --vector "$T/t/road.gpkg" --vector-class road "$T/trun" "$T/b.tif" \
	-o "$T/t/map2.tif" || fail "--vector-class road failed"
py "
m = gdal.Open('$T/t/map.tif').ReadAsArray()
names = ['bg', 'road', 'water']
got = set(int(k) for k in np.unique(m)) - {255}
assert {0, 1} <= got, got
a = ogr.Open('$T/t/all.gpkg')  # kept: its features outlive it otherwise
fa = {(f.GetField('class'), f.GetField('name')) for f in a.GetLayer(0)}
assert fa == {(k, names[k]) for k in got}, (fa, got)
r = ogr.Open('$T/t/road.gpkg')
fr = {(f.GetField('class'), f.GetField('name')) for f in r.GetLayer(0)}
assert fr == {(1, 'road')}, fr
" || fail "--vector-class all or a name polygonized the wrong classes"
expect_fail 1 "^cdp-predict: --vector-class 'lake': the model in '$T/trun/checkpoint.cdpt' has no class of that name (its classes: 'bg', 'road', 'water')\$" \
	cdp-predict -q --vector "$T/t/x.gpkg" --vector-class lake "$T/trun" "$T/b.tif" -o "$T/t/x.tif"
expect_fail 1 "^cdp-predict: --vector-class 'road': the model in '$T/run/checkpoint.cdpt' names no class (give an id or all, or name them with --colors)\$" \
	cdp-predict -q --vector "$T/t/x.gpkg" --vector-class road "$T/run" "$T/b.tif" -o "$T/t/x.tif"
# the names of --colors, which name the map's classes and its polygons, name
# the class polygonized too (they were refused as "names no class")
printf '1 200 0 0 street\n' >"$T/t/street.colors"
cdp-predict -q --colors "$T/t/street.colors" --vector "$T/t/st.gpkg" --vector-class street \
	"$T/run" "$T/b.tif" -o "$T/t/st.tif" || fail "--vector-class by a --colors name"
py "
r = ogr.Open('$T/t/st.gpkg')
f = {(f.GetField('class'), f.GetField('name')) for f in r.GetLayer(0)}
assert f == {(1, 'street')}, f
" || fail "--vector-class street polygonized the wrong class"
expect_fail 1 "^cdp-predict: --vector-class 'road': no class has that name in the model in '$T/run/checkpoint.cdpt' with --colors '$T/t/street.colors' (its classes: 'class 0', 'street')\$" \
	cdp-predict -q --colors "$T/t/street.colors" --vector "$T/t/x.gpkg" --vector-class road \
	"$T/run" "$T/b.tif" -o "$T/t/x.tif"
