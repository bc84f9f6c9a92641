#!/bin/sh
# cdp-predict end to end. A tiny net is trained with cdp-train on a
# trivially learnable target (label = band value > 128, mkthreshold.py) and
# must then:
#  - reproduce it on a new raster of another size (road IoU >= 0.9, by
#    cdp-evaluate), with the input's size, geotransform and CRS, and 255
#    where the input has nodata (a nodata value or a mask);
#  - leave no seam: against a reference from one window over the whole
#    raster, tiles without overlap differ along their borders, blended
#    windows (overlap 16) by less than a tenth of that;
#  - write probabilities (--prob: float32, one band per class, summing to
#    1, NaN at nodata; one band of P(class 1) for a sigmoid head), polygons (--vector: ogrinfo lists features in the
#    CRS) and a PNG preview (--preview);
#  - work on a raster one pixel wide and one smaller than a window;
#  - read the bands cdp-tile --bands 3,1 chose (recorded in the pool's
#    sources and the checkpoint) from the raw 3-band scene, exactly as a
#    model trained on the 2-band raster of those bands reads that raster;
#    and the recorded bands (all of a 2-band or 1-band raster's) from a
#    scene with more, refusing one with fewer;
#  - mark nodata where one band holds its own nodata when the bands'
#    differ;
#  - stream: the peak memory does not grow with the raster's height;
#  - on several ranks: tests/predict/ranks.sh;
#  - refuse an output that is the input (also through a symlink, a hard
#    link or a VRT's sources), the checkpoint or another output;
#  - refuse a raster in another CRS than the training data's (not the same
#    CRS in another text; a GCP raster's is its GCPs') unless --any-crs,
#    warn on another pixel size; refuse a paletted raster;
#  - refuse a raster with the wrong band count or data type, a missing or
#    damaged checkpoint, one holding a NaN weight (naming it), a GPU that does
#    not exist, bad options; write nothing then.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
. "$CDP_SRCDIR/tests/predict/threshold_common.sh"
threshold_run 256 300 --lr 0.05

echo "== a new raster"
cdp-predict -q "$T/run" "$T/b.tif" -o "$T/pred.tif" || fail "prediction failed"
cdp-evaluate --json "$T/pred.tif" "$T/b_mask.tif" >"$T/eval.json" || fail "cdp-evaluate failed"
py "import json; e = json.load(open('$T/eval.json')); iou = e['per_class'][1]['iou']
print('threshold target: IoU %.4f, F1 %.4f' % (iou, e['per_class'][1]['f1']))
sys.exit(0 if iou >= 0.9 and e['unpredicted'] == 450 else 1)" ||
	fail "IoU below 0.9 or nodata not kept: $(cat "$T/eval.json")"
py "
a, b = gdal.Open('$T/b.tif'), gdal.Open('$T/pred.tif')
assert (a.RasterXSize, a.RasterYSize) == (b.RasterXSize, b.RasterYSize), 'size'
assert a.GetGeoTransform() == b.GetGeoTransform(), 'geotransform'
assert a.GetSpatialRef().IsSame(b.GetSpatialRef()), 'crs'
r = b.GetRasterBand(1)
assert b.RasterCount == 1 and r.DataType == gdal.GDT_Byte and r.GetNoDataValue() == 255, 'type'
p = r.ReadAsArray()
assert (p[20:35, 10:40] == 255).all() and (p[:20] != 255).all(), 'nodata'
assert set(np.unique(p)) <= {0, 1, 255}, 'classes'
" || fail "the prediction's georeference, type or nodata differs from the input's"

# a per-dataset mask instead of a nodata value
"$PYTHON" "$CDP_SRCDIR/tests/tools/mkraster.py" "$T/mr.tif" --width 90 --height 70 --bands 1 \
	--dtype u8 --mask-rect 5,6,20,10 --seed 3
cdp-predict -q "$T/run" "$T/mr.tif" -o "$T/mrp.tif" || fail "masked raster: prediction failed"
py "p = gdal.Open('$T/mrp.tif').ReadAsArray(); d = gdal.Open('$T/mr.tif')
m = d.GetRasterBand(1).GetMaskBand().ReadAsArray()
assert (m == 0).sum() == 200 and ((p == 255) == (m == 0)).all()" ||
	fail "the output's nodata is not the input's mask"

echo "== blending"
cdp-predict -q --prob --size 256 "$T/run" "$T/b.tif" -o "$T/ref.tif"
cdp-predict -q --prob --overlap 0 "$T/run" "$T/b.tif" -o "$T/p0.tif"
cdp-predict -q --prob --overlap 16 --batch 3 "$T/run" "$T/b.tif" -o "$T/p16.tif"
s=$("$PYTHON" "$D/seam.py" "$T/ref.tif" "$T/p0.tif" "$T/p16.tif")
echo "largest border error: tiles $s (blended)"
echo "$s" | awk '{ exit !($1 > 0.02 && $2 < $1 / 10) }' || fail "seam: tiles vs blended $s"

echo "== batches and passes"
# --batch 3 leaves short last batches, which run only their own windows;
# the net runs a batch in passes of CDP_INFER_PASS samples: the same bits
cdp-predict -q --prob --overlap 16 --batch 1 "$T/run" "$T/b.tif" -o "$T/p16b1.tif"
CDP_INFER_PASS=2 cdp-predict -q --prob --overlap 16 --batch 3 "$T/run" "$T/b.tif" \
	-o "$T/p16p2.tif" || fail "prediction in passes of 2 failed"
py "
a = [gdal.Open('$T/' + f).ReadAsArray() for f in ('p16.tif', 'p16b1.tif', 'p16p2.tif')]
assert all(np.array_equal(a[0], b, equal_nan=True) for b in a[1:])
" || fail "the probabilities depend on --batch or on the passes"
expect_fail 1 "^cdp-predict: CDP_INFER_PASS: '2x': want a whole number of samples from 1$" \
	env CDP_INFER_PASS=2x cdp-predict "$T/run" "$T/b.tif" -o "$T/x.tif"
[ ! -e "$T/x.tif" ] || fail "a refused run left $T/x.tif"

echo "== --prob, --vector, --preview"
cdp-predict -q --prob --vector "$T/v.gpkg" --preview "$T/v.png" "$T/run/checkpoint.cdpt" \
	"$T/b.tif" -o "$T/prob.tif" || fail "--prob --vector --preview failed"
py "
d = gdal.Open('$T/prob.tif'); p = d.ReadAsArray()
assert d.RasterCount == 2 and d.GetRasterBand(1).DataType == gdal.GDT_Float32, 'type'
assert np.isnan(d.GetRasterBand(2).GetNoDataValue()), 'nodata value'
assert np.isnan(p[:, 20:35, 10:40]).all() and not np.isnan(p[:, :20]).any(), 'nodata'
v = p[:, :20]
assert ((v >= 0) & (v <= 1)).all() and np.allclose(v.sum(0), 1, atol=1e-5), 'probabilities'
c = gdal.Open('$T/pred.tif').ReadAsArray()
assert ((p[1] > p[0]) == (c == 1))[c != 255].all(), 'argmax'
" || fail "--prob output is wrong"
ogrinfo -so -al "$T/v.gpkg" >"$T/ogr" 2>&1 || fail "ogrinfo cannot read the GeoPackage"
n=$(sed -n 's/^Feature Count: //p' "$T/ogr")
[ "${n:-0}" -gt 0 ] || fail "no polygons: $(cat "$T/ogr")"
grep -q 'UTM zone 33N' "$T/ogr" || fail "the polygons lack the CRS"
py "
ds = ogr.Open('$T/v.gpkg'); l = ds.GetLayer(0)
fs = list(l)
area = sum(f.GetGeometryRef().GetArea() for f in fs)
cls = {f.GetField('class') for f in fs}
c = gdal.Open('$T/pred.tif').ReadAsArray()
assert cls == {1}, cls
assert abs(area - (c == 1).sum() * 0.25) < 1e-6, (area, (c == 1).sum() * 0.25)
" || fail "the polygons do not cover the class-1 pixels"
[ "$(od -An -c -N4 "$T/v.png" | tr -d ' ')" = '211PNG' ] || fail "preview is not a PNG"
py "d = gdal.Open('$T/v.png'); assert (d.RasterXSize, d.RasterYSize, d.RasterCount) == (200, 170, 3)" ||
	fail "preview size"

echo "== a sigmoid head"
cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$SMALL:channels=1,loss=bce,outputs=1" \
	--out "$T/runb" --steps 300 --batch 4 --threads 1 --lr 0.05 ||
	fail "training the sigmoid head failed"
cdp-predict -q "$T/runb" "$T/b.tif" -o "$T/bc.tif" && cdp-predict -q --prob "$T/runb" "$T/b.tif" \
	-o "$T/bp.tif" || fail "sigmoid head: prediction failed"
cdp-evaluate --json "$T/bc.tif" "$T/b_mask.tif" >"$T/b.json"
py "import json
iou = json.load(open('$T/b.json'))['per_class'][1]['iou']
d = gdal.Open('$T/bp.tif'); p = d.ReadAsArray(); c = gdal.Open('$T/bc.tif').ReadAsArray()
assert d.RasterCount == 1 and iou >= 0.9, (d.RasterCount, iou)
assert ((p > 0.5) == (c == 1))[c != 255].all(), 'class ids are not P > 0.5'" ||
	fail "sigmoid head: $(cat "$T/b.json")"

echo "== tiny rasters"
mk "$T/w1.tif" 1 50 3
mk "$T/s.tif" 20 30 4
for r in w1 s; do
	cdp-predict -q "$T/run" "$T/$r.tif" -o "$T/${r}p.tif" || fail "$r: prediction failed"
	py "a, b = gdal.Open('$T/$r.tif'), gdal.Open('$T/${r}p.tif')
assert (a.RasterXSize, a.RasterYSize) == (b.RasterXSize, b.RasterYSize)" || fail "$r: wrong size"
done
cdp-evaluate --json "$T/sp.tif" "$T/s_mask.tif" >"$T/s.json"
py "import json; sys.exit(json.load(open('$T/s.json'))['accuracy'] < 0.9)" ||
	fail "the small raster is mispredicted: $(cat "$T/s.json")"

echo "== bands chosen by cdp-tile --bands"
# m3: three different bands; m31: its bands 3 and 1. Tiled with --bands 3,1
# and tiled whole, both pools hold the same tiles, so the same short
# training gives the same weights; only the checkpoints' bands differ.
py "
s = gdal.Open('$T/a.tif'); a = s.ReadAsArray().astype(np.int32)
d = gdal.GetDriverByName('GTiff').Create('$T/m3.tif', 256, 256, 3, gdal.GDT_Byte)
d.SetGeoTransform(s.GetGeoTransform()); d.SetProjection(s.GetProjection())
for i, b in enumerate([255 - a, a * 7 % 256, a]): d.GetRasterBand(i + 1).WriteArray(b.astype(np.uint8))"
gdal_translate -q -b 3 -b 1 "$T/m3.tif" "$T/m31.tif"
for r in m3 m31; do
	cp "$T/a_mask.tif" "$T/${r}_mask.tif"
	b=; [ $r = m31 ] || b="--bands 3,1"
	cdp-tile -q --size 64 $b --label-suffix _mask "$T/$r.tif" | cdp-lmdbpack -q "$T/p$r"
	cdp-keyshuffle -q --seed 1 -o "$T/k$r" "$T/p$r"
	cdp-train -q --db "$T/p$r" --keys "$T/k$r" --model "$SMALL:channels=2" --out "$T/r$r" --steps 5 \
		--batch 4 --threads 1 || fail "$r: training failed"
done
py "import struct
def bands(p):
    b = open(p, 'rb').read(); i = b.rindex(b'DATA') + 16
    n = struct.unpack_from('<I', b, i)[0]
    return list(struct.unpack_from('<%dI' % n, b, i + 8))
got = bands('$T/rm3/checkpoint.cdpt'), bands('$T/rm31/checkpoint.cdpt')
assert got == ([3, 1], [1, 2]), got" || fail "the checkpoints' bands are not 3,1 and 1,2"
cdp-predict -q --prob "$T/rm3" "$T/m3.tif" -o "$T/m3p.tif" || fail "--bands 3,1: prediction failed"
cdp-predict -q --prob "$T/rm31" "$T/m31.tif" -o "$T/m31p.tif" || fail "2 bands: prediction failed"
py "a, b = gdal.Open('$T/m3p.tif').ReadAsArray(), gdal.Open('$T/m31p.tif').ReadAsArray()
assert np.array_equal(a, b, equal_nan=True)" ||
	fail "bands 3,1 of the scene predict otherwise than the 2-band raster of them"
expect_fail 1 "'$T/m31.tif' has 2 bands, the model in '$T/rm3.*' reads band 3" \
	cdp-predict -q "$T/rm3" "$T/m31.tif" -o "$T/x.tif"
[ ! -e "$T/x.tif" ] || fail "a refused prediction left '$T/x.tif'"
# the recorded bands 1,2 (all of m31's: a pool does not tell them from
# --bands 1,2) are read from a scene with more, whose first two are m31's
gdal_translate -q -b 3 -b 1 -b 2 "$T/m3.tif" "$T/m312.tif"
cdp-predict -q --prob "$T/rm31" "$T/m312.tif" -o "$T/m312p.tif" ||
	fail "bands 1,2 of a 3-band scene: prediction failed"
cmp -s "$T/m312p.tif" "$T/m31p.tif" || fail "bands 1,2 of a 3-band scene predict otherwise"
gdal_translate -q -b 1 "$T/m31.tif" "$T/m1.tif"
expect_fail 1 "'$T/m1.tif' has 1 band, the model in '$T/rm31/checkpoint.cdpt' takes 2" \
	cdp-predict -q "$T/rm31" "$T/m1.tif" -o "$T/x.tif"
# each band's own nodata: a pixel is nodata where one band holds its own
py "
s = gdal.Open('$T/m31.tif'); a = s.ReadAsArray()
a[0, :10, :10] = 0; a[1, 20:30, :10] = 9
d = gdal.GetDriverByName('GTiff').CreateCopy('$T/m31nd_raw.tif', s)
for b in (0, 1): d.GetRasterBand(b + 1).WriteArray(a[b])
d = None
v = gdal.Translate('$T/m31nd.vrt', '$T/m31nd_raw.tif', format='VRT')
v.GetRasterBand(1).SetNoDataValue(0); v.GetRasterBand(2).SetNoDataValue(9); v = None"
cdp-predict -q "$T/rm31" "$T/m31nd.vrt" -o "$T/m31nd.tif" || fail "per-band nodata: prediction failed"
py "a = gdal.Open('$T/m31nd_raw.tif').ReadAsArray(); m = gdal.Open('$T/m31nd.tif').ReadAsArray()
bad = (a[0] == 0) | (a[1] == 9)
assert ((m == 255) == bad).all(), (int((m == 255).sum()), int(bad.sum()))" ||
	fail "per-band nodata: the map's nodata is not where a band holds its own"

echo "== streaming"
# The peak memory must not grow with the raster's height: 24000 rows of
# probabilities are 58 MB, 2400 rows 6 MB (GDAL's own block cache is held
# at 4 MB so that only cdp-predict's buffers count; both rasters fill it,
# as the copy into tiles and overviews passes them through it). The peak
# varies by up to 12 MB from run to run at one size (glibc's heap under
# GDAL's cache of tiles), so the bound is 20 MB, which holding the tall
# raster's probabilities (58 MB) would exceed.
if sanitized cdp-predict; then
	echo "a sanitizer build: skipped (its quarantine holds what is freed)"
elif [ -x /usr/bin/time ]; then
	mk "$T/short.tif" 300 2400 7
	mk "$T/tall.tif" 300 24000 7
	for r in short tall; do
		GDAL_CACHEMAX=4 /usr/bin/time -f %M -o "$T/$r.rss" cdp-predict -q --prob --threads 1 \
			"$T/run" "$T/$r.tif" -o "$T/${r}p.tif" || fail "$r: prediction failed"
	done
	echo "peak RSS: $(cat "$T/short.rss") KB for 2400 rows, $(cat "$T/tall.rss") KB for 24000"
	[ $(($(cat "$T/tall.rss") - $(cat "$T/short.rss"))) -lt 20000 ] ||
		fail "memory grows with the height of the raster"
else
	echo "no /usr/bin/time: skipped"
fi

echo "== outputs that are inputs"
# -o, --vector and --preview may not name the input (by any name: a
# symlink, a hard link), a file a VRT input reads, the checkpoint, or each
# other; every file is left as it was
cp "$T/b.tif" "$T/in.tif"
cp "$T/b.tif" "$T/in.orig"
cp "$T/run/checkpoint.cdpt" "$T/ck.orig"
ln -s in.tif "$T/sym.tif"
ln "$T/in.tif" "$T/hard.tif"
gdalbuildvrt -q "$T/in.vrt" "$T/in.tif"
refused() { # PATTERN ARGS...: refused with PATTERN, the input and checkpoint intact
	pat=$1; shift
	expect_fail 1 "^cdp-predict: $pat" cdp-predict -q "$@"
	cmp -s "$T/in.tif" "$T/in.orig" || fail "'cdp-predict $*' changed the input"
	cmp -s "$T/run/checkpoint.cdpt" "$T/ck.orig" || fail "'cdp-predict $*' changed the checkpoint"
}
refused "refusing to write '$T/in.tif': it is the input '$T/in.tif'\$" "$T/run" "$T/in.tif" -o "$T/in.tif"
refused "refusing to write '$T/./in.tif': it is the input" "$T/run" "$T/in.tif" -o "$T/./in.tif"
refused "refusing to write '$T/sym.tif': it is the input '$T/in.tif'" "$T/run" "$T/in.tif" -o "$T/sym.tif"
refused "refusing to write '$T/in.tif': it is the input '$T/sym.tif'" "$T/run" "$T/sym.tif" -o "$T/in.tif"
refused "refusing to write '$T/hard.tif': it is the input" "$T/run" "$T/in.tif" -o "$T/hard.tif"
refused "refusing to write '$T/in.tif': it is '.*in.tif', read through the input '$T/in.vrt'" \
	"$T/run" "$T/in.vrt" -o "$T/in.tif"
refused "refusing to write '$T/run/checkpoint.cdpt': it is the model '$T/run/checkpoint.cdpt'" \
	"$T/run" "$T/in.tif" -o "$T/run/checkpoint.cdpt"
refused "refusing to write '$T/in.tif': it is the input" "$T/run" "$T/in.tif" -o "$T/x.tif" \
	--preview "$T/in.tif"
refused "refusing to write '$T/sym.tif': it is the input" "$T/run" "$T/in.tif" -o "$T/x.tif" \
	--vector "$T/sym.tif"
refused "-o '$T/x.tif' and --preview '$T/./x.tif' are the same file" "$T/run" "$T/in.tif" \
	-o "$T/x.tif" --preview "$T/./x.tif"
[ ! -e "$T/x.tif" ] || fail "a refused prediction left '$T/x.tif'"
cdp-predict -q "$T/run" "$T/in.vrt" -o "$T/vrtp.tif" || fail "a VRT input is not predicted"
cmp -s "$T/vrtp.tif" "$T/pred.tif" || fail "the VRT of b.tif predicts otherwise than b.tif"

echo "== failures"
# the model's recorded band 1 is read from a scene of 3
mk "$T/c3.tif" 40 40 5 --bands 3
gdal_translate -q -b 1 "$T/c3.tif" "$T/c1.tif"
cdp-predict -q "$T/run" "$T/c3.tif" -o "$T/c3p.tif" && cdp-predict -q "$T/run" "$T/c1.tif" -o "$T/c1p.tif" ||
	fail "band 1 of a 3-band scene: prediction failed"
cmp -s "$T/c3p.tif" "$T/c1p.tif" || fail "band 1 of a 3-band scene predicts otherwise than band 1 alone"
# a paletted scene: colour indices, refused with the way out
py "s = gdal.Open('$T/b.tif'); d = gdal.GetDriverByName('GTiff').CreateCopy('$T/pal.tif', s)
ct = gdal.ColorTable()
for i in range(256): ct.SetColorEntry(i, (i, 255 - i, 0, 255))
d.GetRasterBand(1).SetColorTable(ct); d = None"
expect_fail 1 "^cdp-predict: '$T/pal.tif': band 1 is paletted (colour table indices): expand it first (gdal_translate -expand rgb IN OUT, or a VRT)\$" \
	cdp-predict "$T/run" "$T/pal.tif" -o "$T/x.tif"
# the checkpoint records the pool's data type: a u16 raster of the same band
# count is refused, although its values could hold the training data's
gdal_translate -q -ot UInt16 "$T/b.tif" "$T/b16.tif"
expect_fail 1 "'$T/b16.tif' is u16, the model in '$T/run/checkpoint.cdpt' was trained on u8 data" \
	cdp-predict "$T/run" "$T/b16.tif" -o "$T/x.tif"
"$PYTHON" - "$T/run/checkpoint.cdpt" "$T/big.cdpt" <<'PY'
# the checkpoint as version 1 wrote it (no data type: the DATA chunk, last,
# without its trailing u32), with band 1's training mean set to 1000, as if
# trained on u16: then the mean is the type check
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
v = struct.unpack_from("<I", b, 8)[0]
assert v in (2, 3, 4, 5, 6, 7, 8), "not a version 2 to 8 checkpoint"
def chunk(tag):                         # offset of a chunk's header
    o = 24
    while b[o:o + 4] != tag:
        o += 16 + struct.unpack_from("<Q", b, o + 8)[0]
    return o
if v >= 7:                              # the optional chunks after DATA go (SUMS, PLAN)
    d = chunk(b"DATA")
    del b[d + 16 + struct.unpack_from("<Q", b, d + 8)[0]:-4]
    struct.pack_into("<I", b, 12, 7)
if v >= 5:                              # DATA's origin and georeference go,
    d = chunk(b"DATA")                  # and version 6's class names (DATA's end)
    n, ns = struct.unpack_from("<II", b, d + 16)
    e = d + 16 + 8 + 4 * n + 16 * ns + 4  # past the data type
    cut = d + 16 + struct.unpack_from("<Q", b, d + 8)[0] - e
    del b[e:e + cut]
    struct.pack_into("<Q", b, d + 8, struct.unpack_from("<Q", b, d + 8)[0] - cut)
if v >= 3:                              # META's loss scaler (f64, u64, u64) and
    meta = {3: 104, 4: 120, 5: 120, 6: 120, 7: 120, 8: 120}[v]  # global batch (4 u32) go
    assert b[24:28] == b"META" and struct.unpack_from("<Q", b, 32)[0] == meta
    del b[40 + 80:40 + meta]
    struct.pack_into("<Q", b, 32, 80)
d = chunk(b"DATA")
assert struct.unpack_from("<I", b, len(b) - 8)[0] == 1, "data type not u8"
del b[-8:-4]                            # the data type
struct.pack_into("<I", b, 8, 1)         # version
struct.pack_into("<Q", b, 16, len(b))   # file size
struct.pack_into("<Q", b, d + 8, struct.unpack_from("<Q", b, d + 8)[0] - 4)
i = d + 16 + 12                         # tag, 0, length; nbands, nstats, band index
b[i:i + 8] = struct.pack("<d", 1000.0)
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
PY
expect_fail 1 "'$T/b.tif' is u8, but the model in '$T/big.cdpt' was trained on band 1 values around 1000" \
	cdp-predict "$T/big.cdpt" "$T/b.tif" -o "$T/x.tif"
# another CRS (not only another text of the same: OGR's comparison) and
# another pixel size than the training data's (checkpoint version 5)
gdal_translate -q -a_srs EPSG:4326 "$T/b.tif" "$T/b4326.tif"
expect_fail 1 "^cdp-predict: '$T/b4326.tif' is in CRS EPSG:4326, the model in '$T/run/checkpoint.cdpt' was trained on data in EPSG:32633 (--any-crs to predict it anyway)\$" \
	cdp-predict -q "$T/run" "$T/b4326.tif" -o "$T/x.tif"
[ ! -e "$T/x.tif" ] || fail "a refused CRS left an output"
cdp-predict -q --any-crs "$T/run" "$T/b4326.tif" -o "$T/x.tif" 2>"$T/err" || fail "--any-crs: $(cat "$T/err")"
rm -f "$T/x.tif"
# a raster georeferenced by GCPs only is in their CRS
gdal_translate -q -gcp 0 0 15 52 -gcp 200 0 15.03 52 -gcp 0 170 15 51.98 -a_srs EPSG:4326 \
	"$T/b.tif" "$T/bgcp.tif"
expect_fail 1 "^cdp-predict: '$T/bgcp.tif' is in CRS EPSG:4326, the model in '$T/run/checkpoint.cdpt' was trained on data in EPSG:32633 (--any-crs to predict it anyway)\$" \
	cdp-predict -q "$T/run" "$T/bgcp.tif" -o "$T/x.tif"
cdp-predict -q --any-crs "$T/run" "$T/bgcp.tif" -o "$T/x.tif" || fail "--any-crs of a GCP raster"
rm -f "$T/x.tif"
gdal_translate -q -a_srs "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs" "$T/b.tif" "$T/bproj.tif"
cdp-predict -q "$T/run" "$T/bproj.tif" -o "$T/x.tif" 2>"$T/err" || fail "the same CRS as a PROJ string: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "the same CRS as a PROJ string: $(cat "$T/err")"
rm -f "$T/x.tif"
py "ds = gdal.Open('$T/b.tif'); gt = list(ds.GetGeoTransform()); gt[1] *= 2; gt[5] *= 2
out = gdal.GetDriverByName('GTiff').CreateCopy('$T/b2m.tif', ds); out.SetGeoTransform(gt); out = None"
cdp-predict -q "$T/run" "$T/b2m.tif" -o "$T/x.tif" 2>"$T/err" || fail "another pixel size: $(cat "$T/err")"
grep -q "^cdp-predict: warning: '$T/b2m.tif' has pixels of [0-9.]* x [0-9.]*, the model in '$T/run/checkpoint.cdpt' was trained on [0-9.]* x [0-9.]*\$" "$T/err" ||
	fail "no pixel size warning: $(cat "$T/err")"
rm -f "$T/x.tif"
expect_fail 1 "cannot read '$T/nope.cdpt'" cdp-predict "$T/nope.cdpt" "$T/b.tif" -o "$T/x.tif"
head -c 300 "$T/run/checkpoint.cdpt" >"$T/cut.cdpt"
expect_fail 1 "cannot read '$T/cut.cdpt'" cdp-predict "$T/cut.cdpt" "$T/b.tif" -o "$T/x.tif"
# a NaN weight under a valid CRC (before: a constant map, exit 0)
name=$("$PYTHON" "$CDP_SRCDIR/tests/train/ckpt_nan.py" "$T/run/checkpoint.cdpt" "$T/nan.cdpt")
expect_fail 1 "^cdp-predict: cannot read '$T/nan.cdpt': parameter tensor '$name' holds NaN at element 0\$" \
	cdp-predict "$T/nan.cdpt" "$T/b.tif" -o "$T/x.tif"
expect_fail 1 "cannot open '$T/none.tif'" cdp-predict "$T/run" "$T/none.tif" -o "$T/x.tif"
# a side past 2^30 pixels: the message says the limit (cdp-predict(1))
py "ds = gdal.GetDriverByName('VRT').Create('$T/tall.vrt', 64, 1073741825, 1, gdal.GDT_Byte)
ds.SetGeoTransform(gdal.Open('$T/b.tif').GetGeoTransform()); ds = None"
expect_fail 1 "^cdp-predict: '$T/tall.vrt': 64x1073741825 pixels is too large (at most 1073741824 pixels on a side)\$" \
	cdp-predict "$T/run" "$T/tall.vrt" -o "$T/x.tif"
# a read that fails part-way (a damaged tile of a deflate GeoTIFF) with
# --progress: the error alone, no progress line claiming ", done" first
py "ds = gdal.Translate('$T/dmg.tif', '$T/b.tif', creationOptions=['TILED=YES', 'BLOCKXSIZE=16',
    'BLOCKYSIZE=16', 'COMPRESS=DEFLATE']); ds = None; ds = gdal.Open('$T/dmg.tif')
off = int(ds.GetRasterBand(1).GetMetadataItem('BLOCK_OFFSET_5_10', 'TIFF')); ds = None
f = open('$T/dmg.tif', 'r+b'); f.seek(off); f.write(b'\\xff' * 8); f.close()"
expect_fail 1 "^cdp-predict: cannot read '$T/dmg.tif': .*TIFFReadEncodedTile" \
	cdp-predict --progress "$T/run" "$T/dmg.tif" -o "$T/x.tif"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a failed run with --progress: $(cat "$T/err")"
[ ! -e "$T/x.tif" ] || fail "a failed run left its map"
expect_fail 1 "device cuda:1023 does not exist" cdp-predict --device cuda:1023 "$T/run" "$T/b.tif" \
	-o "$T/x.tif"
expect_fail 1 "overlap 64: must be smaller" cdp-predict --overlap 64 "$T/run" "$T/b.tif" -o "$T/x.tif"
expect_fail 1 "vector-class 2" cdp-predict --vector "$T/x.gpkg" --vector-class 2 "$T/run" \
	"$T/b.tif" -o "$T/x.tif"
expect_fail 1 "cannot create '$T/no/dir/x.tif'" cdp-predict "$T/run" "$T/b.tif" -o "$T/no/dir/x.tif"
expect_fail 2 "missing -o" cdp-predict "$T/run" "$T/b.tif"
# before: accepted, and nothing polygonized
expect_fail 2 "^cdp-predict: --vector-class needs --vector (the class it polygonizes)\$" \
	cdp-predict --vector-class 1 "$T/run" "$T/b.tif" -o "$T/x.tif"
expect_fail 2 "^cdp-predict: missing RASTER\$" cdp-predict "$T/run" -o "$T/x.tif"
expect_fail 2 "--batch: '0' is not an integer in 1\.\.4096" cdp-predict --batch 0 "$T/run" "$T/b.tif" -o "$T/x.tif"
expect_fail 2 "--device: 'tpu' is not" cdp-predict --device tpu "$T/run" "$T/b.tif" -o "$T/x.tif"
[ ! -e "$T/x.tif" ] || fail "a failed run left x.tif"
[ -z "$(ls -A "$T" | grep '\.cdp-tmp\.')" ] || fail "a failed run left a temporary: $(ls -A "$T")"
exit 0
