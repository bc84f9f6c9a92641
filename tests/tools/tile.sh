#!/bin/sh
# tile.sh: cdp-tile end to end. Every stream is decoded and compared with
# GDAL's own reading of the source by crosscheck.py (pixels, padding, mask,
# label, geotransform, the exact key set); tile files are read back with
# GDAL; each failure case must exit non-zero with a one-line message naming
# the file and leave no output behind.
set -eu

if [ -z "${PYTHON:-}" ] || ! "$PYTHON" -c 'import osgeo.gdal, numpy' 2>/dev/null; then
	echo "skip: no Python with osgeo.gdal and numpy"
	exit 77
fi
command -v cdp-tile >/dev/null || { echo "cdp-tile not on PATH" >&2; exit 99; }

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
MK="$PYTHON $CDP_SRCDIR/tests/tools/mkraster.py"
XC="$PYTHON $CDP_SRCDIR/tests/tools/crosscheck.py"
fail() { echo "FAIL: $*" >&2; exit 1; }

# xcheck STREAM CROSSCHECK-ARGS...: the stream must match its sources.
xcheck() {
	s=$1
	shift
	$XC --stream "$s" "$@" || fail "crosscheck of $s ($*)"
}

# expect_fail RC PATTERN CMD...: CMD exits RC (1 or 2) with exactly one line
# on stderr that contains PATTERN and writes nothing to stdout.
expect_fail() {
	want=$1 pat=$2
	shift 2
	set +e
	"$@" >"$T/fail.out" 2>"$T/fail.err"
	rc=$?
	set -e
	[ "$rc" -eq "$want" ] || fail "$* exited $rc, want $want: $(cat "$T/fail.err")"
	[ "$(wc -l <"$T/fail.err")" -eq 1 ] || fail "$*: not one line: $(cat "$T/fail.err")"
	grep -qF -- "$pat" "$T/fail.err" || fail "$*: '$(cat "$T/fail.err")' lacks '$pat'"
	grep -q '^cdp-tile: ' "$T/fail.err" || fail "$*: message lacks the program name"
	[ ! -s "$T/fail.out" ] || fail "$*: wrote to stdout on failure"
}

cd "$T"

# --- dtypes, band counts, edge modes, overlap, nodata, labels --------------
# u8, 1 band, 50x37 (16 divides neither), nodata 0: shift, pad and drop.
$MK u8.tif --width 50 --height 37 --dtype u8 --nodata 0 --nodata-frac 0.2 --seed 2
for e in shift pad drop; do
	cdp-tile -q -s 16 --edge $e u8.tif >u8.$e
	xcheck u8.$e --raster u8=u8.tif --size 16 --edge $e
done

# u16, 3 bands, overlap, pad, a label found by --label-suffix.
$MK u16.tif --width 45 --height 33 --bands 3 --dtype u16 --nodata 65535 \
	--nodata-frac 0.1 --label u16_mask.tif --classes 7 --seed 3 --tiled
cdp-tile -q -s 16 --overlap 4 --edge pad --label-suffix _mask u16.tif >u16.s
xcheck u16.s --raster u16=u16.tif --label u16=u16_mask.tif --size 16 \
	--overlap 4 --edge pad
cdp-tile -q -s 16 --overlap 5 --label-suffix _mask --ignore 9 u16.tif >u16i.s
xcheck u16i.s --raster u16=u16.tif --label u16=u16_mask.tif --size 16 \
	--overlap 5 --ignore 9

# i16, 6 bands, a --bands subset in a new order, drop.
$MK i16.tif --width 40 --height 40 --bands 6 --dtype i16 --seed 4
cdp-tile -q -s 16 --edge drop --bands 6,2,4 i16.tif >i16.s
xcheck i16.s --raster i16=i16.tif --size 16 --edge drop --bands 6,2,4

# f32 with NaN nodata and an all-nodata corner (its tile is dropped), zlib,
# an explicit --label, and --max-nodata.
$MK f32.tif --width 48 --height 40 --bands 2 --dtype f32 --nodata nan \
	--nodata-frac 0.3 --nodata-rect 0,0,16,16 --label f32lab.tif --seed 5
cdp-tile -q -s 16 -z 6 --label f32lab.tif f32.tif >f32.s
xcheck f32.s --raster f32=f32.tif --label f32=f32lab.tif --size 16 --zlib
cdp-tile -q -s 16 --max-nodata 0.3 --edge pad f32.tif >f32m.s
xcheck f32m.s --raster f32=f32.tif --size 16 --edge pad --max-nodata 0.3
# a u16 label and a --nodata override on f64
$MK f64.tif --width 30 --height 20 --dtype f64 --label f64lab.tif \
	--label-dtype u16 --classes 300 --seed 6
cdp-tile -q -s 8 --overlap 3 --nodata 100 --label f64lab.tif f64.tif >f64.s
xcheck f64.s --raster f64=f64.tif --label f64=f64lab.tif --size 8 --overlap 3 \
	--nodata 100

# u32 and i32 rasters smaller than one tile: one padded tile each.
$MK u32.tif --width 10 --height 7 --dtype u32 --nodata 5 --nodata-frac 0.2
$MK i32.tif --width 7 --height 12 --bands 2 --dtype i32
cdp-tile -q -s 16 --edge pad u32.tif i32.tif >small.s
xcheck small.s --raster u32=u32.tif --raster i32=i32.tif --size 16 --edge pad

# A GDAL per-dataset mask marks pixels invalid without a nodata value.
$MK msk.tif --width 32 --height 32 --bands 3 --mask-rect 3,3,10,20 --seed 7
cdp-tile -q -s 16 msk.tif >msk.s
xcheck msk.s --raster msk=msk.tif --size 16

# Any raster GDAL opens: a VRT and a COG of the u16 raster.
"$PYTHON" -c 'from osgeo import gdal; gdal.UseExceptions()
gdal.Translate("v.vrt", "u16.tif", format="VRT")
gdal.Translate("cog.tif", "u16.tif", format="COG")'
cdp-tile -q -s 16 v.vrt cog.tif >vc.s
xcheck vc.s --raster v=v.vrt --raster cog=cog.tif --size 16

# The checker itself must notice a mismatch (wrong edge policy).
if $XC --stream u8.pad --raster u8=u8.tif --size 16 --edge shift 2>xc.err; then
	fail "crosscheck accepted a pad stream as shift"
fi
grep -q 'crosscheck.py: ' xc.err || fail "crosscheck gave no reason"

# --- keys ------------------------------------------------------------------
# 11 rows and 3 columns of tiles: rows get 2 digits, columns 1.
$MK dig.tif --width 24 --height 88 --seed 8
cdp-tile -q -s 8 --edge drop dig.tif >dig.s
keys=$(LC_ALL=C grep -ao 'dig_[0-9]*_[0-9]*' dig.s | sort -u)
[ "$(echo "$keys" | wc -l)" -eq 33 ] || fail "expected 33 keys, got: $keys"
echo "$keys" | grep -qx 'dig_00_0' || fail "no dig_00_0 key"
echo "$keys" | grep -qx 'dig_10_2' || fail "no dig_10_2 key"
xcheck dig.s --raster dig=dig.tif --size 8 --edge drop

# Two inputs with one stem, told apart by --name.
mkdir a b
$MK a/x.tif --width 20 --height 20 --seed 9
$MK b/x.tif --width 20 --height 20 --seed 10
cdp-tile -q -s 10 --name left --name right a/x.tif b/x.tif >ab.s
xcheck ab.s --raster left=a/x.tif --raster right=b/x.tif --size 10

# --- tile files ---------------------------------------------------------------
# png: 8-bit for u8, 16-bit for u16; labels alongside.
$MK rgb.tif --width 40 --height 24 --bands 3 --label rgb_mask.tif --seed 11
cdp-tile -q -s 16 --edge pad -O png8 --format png --label-suffix _mask rgb.tif
cdp-tile -q -s 16 -O png16 --format png --bands 2 u16.tif
[ "$(ls png8 | wc -l)" -eq 12 ] || fail "png8 has $(ls png8 | wc -l) files, want 12"
[ "$(ls png16 | wc -l)" -eq 9 ] || fail "png16 has $(ls png16 | wc -l) files, want 9"
# tif: georeferenced tiles.
cdp-tile -q -s 16 --overlap 2 -O tifs --format tif --label-suffix _mask u16.tif
[ "$(ls tifs | wc -l)" -eq 24 ] || fail "tifs has $(ls tifs | wc -l) files, want 24"
[ -z "$(find png8 png16 tifs -name '*.cdp-tmp.*')" ] || fail "temporary files left behind"
$PYTHON - <<'EOF' || fail "tile files differ from their source"
import numpy as np
from osgeo import gdal
gdal.UseExceptions()

def same(tile, src, x0, y0, bands=None, geo=True, depth=gdal.GDT_Byte,
         lab=None, image=None):
    """tile equals src's window at (x0, y0); label tiles (lab = ignore value)
    have lab where the image is nodata in every band."""
    t, s = gdal.Open(tile), gdal.Open(src)
    S = t.RasterXSize
    win = (x0, y0, min(S, s.RasterXSize - x0), min(S, s.RasterYSize - y0))
    a = s.ReadAsArray(*win)
    if a.ndim == 2:
        a = a[None]
    a = a if bands is None else a[[b - 1 for b in bands]]
    if image is not None:
        i = gdal.Open(image)
        nd = i.GetRasterBand(1).GetNoDataValue()
        a = np.where((i.ReadAsArray(*win) == nd).all(axis=0), lab, a)
    b = t.ReadAsArray()
    b = b[None] if b.ndim == 2 else b
    assert t.GetRasterBand(1).DataType == depth, (tile, t.GetRasterBand(1).DataType)
    assert np.array_equal(b[:, :a.shape[1], :a.shape[2]], a), tile
    if lab is not None:
        assert (b[:, a.shape[1]:, :] == lab).all() and (b[:, :, a.shape[2]:] == lab).all(), tile
    if geo:
        g, tg = s.GetGeoTransform(), t.GetGeoTransform()
        want = (g[0] + x0 * g[1] + y0 * g[2], g[1], g[2],
                g[3] + x0 * g[4] + y0 * g[5], g[4], g[5])
        assert np.allclose(tg, want, rtol=1e-12), (tile, tg, want)
        assert t.GetSpatialRef().IsSame(s.GetSpatialRef()), tile

same("png8/rgb_0_0.png", "rgb.tif", 0, 0, geo=False)
same("png8/rgb_1_2.png", "rgb.tif", 32, 16, geo=False)
same("png8/rgb_1_2_label.png", "rgb_mask.tif", 32, 16, geo=False, lab=255)
same("png16/u16_1_2.png", "u16.tif", 29, 16, bands=[2], geo=False,
     depth=gdal.GDT_UInt16)
# u16.tif is 45x33, size 16, stride 14, shift: columns 0,14,28,29
same("tifs/u16_2_3.tif", "u16.tif", 29, 17, depth=gdal.GDT_UInt16)
same("tifs/u16_1_1.tif", "u16.tif", 14, 14, depth=gdal.GDT_UInt16)
same("tifs/u16_1_1_label.tif", "u16_mask.tif", 14, 14, lab=255, image="u16.tif")
t = gdal.Open("tifs/u16_1_1.tif")   # bands need their dataset alive
assert t.GetRasterBand(1).GetNoDataValue() == 65535
# a class label tile's ignore value is its nodata value, so GDAL does not
# count padding and invalid pixels as a class
t = gdal.Open("tifs/u16_1_1_label.tif")
assert t.GetRasterBand(1).GetNoDataValue() == 255, t.GetRasterBand(1).GetNoDataValue()
EOF

# --- standardize -----------------------------------------------------------
$MK st.tif --width 40 --height 32 --bands 3 --dtype i16 --nodata -1 \
	--nodata-frac 0.2 --seed 12
cdp-tile -q -s 8 --edge drop --standardize st.tif >st.s
xcheck st.s --raster st=st.tif --size 8 --edge drop --standardize
printf '# mean std per band\n10 2\n\n-5 0.5  # band 2\n1e3 4e2\n' >st.txt
cdp-tile -q -s 8 --edge drop --standardize --stats st.txt st.tif >stf.s
xcheck stf.s --raster st=st.tif --size 8 --edge drop --standardize --stats st.txt
# Over every valid pixel (drop, no overlap: each pixel once) each band has
# mean 0 and std 1; with the file's statistics it does not.
$PYTHON - "$CDP_SRCDIR/tests/tools" <<'EOF' || fail "standardized moments"
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import crosscheck as xc
for path, want in (("st.s", True), ("stf.s", False)):
    recs, _ = xc.read_stream(path)
    vals = [[], [], []]
    for key, body in recs:
        r = xc.decode(key, body)
        assert r["dtype"] == 6, r["dtype"]
        v = np.ones((8, 8), bool) if r["mask"] is None else r["mask"] != 0
        for b in range(3):
            vals[b].append(r["image"][b][v])
            assert (r["image"][b][~v] == 0).all()
    for b in range(3):
        x = np.concatenate(vals[b]).astype(np.float64)
        ok = abs(x.mean()) < 1e-5 and abs(x.std() - 1) < 1e-5
        assert ok == want, (path, b, x.mean(), x.std())
EOF

# NaN nodata in one band only: with --standardize such a pixel is invalid
# (masked, 0 in every band), not a NaN that poisons the statistics.
$PYTHON - <<'EOF'
import numpy as np
from osgeo import gdal
d = gdal.GetDriverByName("GTiff").Create("nan1.tif", 40, 32, 2, gdal.GDT_Float32)
d.SetGeoTransform((500000, 10, 0, 6000000, 0, -10))
for b in (1, 2):
    a = np.random.default_rng(b).normal(100, 30, (32, 40)).astype(np.float32)
    if b == 1:
        a[3:9, 5:12] = np.nan
    d.GetRasterBand(b).WriteArray(a)
    d.GetRasterBand(b).SetNoDataValue(float("nan"))
EOF
cdp-tile -q -s 8 --edge drop --standardize --nodata nan nan1.tif >nan1.s ||
	fail "--standardize with NaN nodata in one band"
xcheck nan1.s --raster nan1=nan1.tif --size 8 --edge drop --standardize --nodata nan
# an infinite valid pixel: the advice does not ask for the nodata it has
$PYTHON -c "
from osgeo import gdal
d = gdal.Open('nan1.tif', gdal.GA_Update); b = d.GetRasterBand(2)
a = b.ReadAsArray(); a[20, 20] = float('inf'); b.WriteArray(a)"
# (a failing producer ends its stream with an F frame: stdout is not empty)
set +e
cdp-tile -s 8 --standardize --nodata nan nan1.tif >/dev/null 2>nan1.err
rc=$?
set -e
[ "$rc" -eq 1 ] && [ "$(cat nan1.err)" = "cdp-tile: 'nan1.tif': band 2 has infinite valid pixels" ] ||
	fail "an infinite pixel: exit $rc, $(cat nan1.err)"

# --- output refusals and write errors --------------------------------------
cdp-tile -s 16 u8.tif 2>sum.err >/dev/null
grep -q '^cdp-tile: [0-9]* tiles written, [0-9]* dropped, [0-9]* bytes$' sum.err ||
	fail "no summary line: $(cat sum.err)"
cdp-tile -q -s 16 u8.tif 2>q.err >/dev/null
[ ! -s q.err ] || fail "-q still wrote: $(cat q.err)"
cdp-tile --progress -s 16 u8.tif 2>p.err >/dev/null
grep -q 'tiling' p.err || fail "--progress drew nothing: $(cat p.err)"
cdp-tile --progress -q -s 16 u8.tif 2>q.err >/dev/null
[ ! -s q.err ] || fail "-q still wrote: $(cat q.err)"
# --standardize's first pass reads the whole raster before the first tile:
# it has a progress line of its own, in rows (it showed nothing)
cdp-tile --progress --standardize -s 16 u8.tif 2>ps.err >/dev/null
grep -q '^cdp-tile: statistics 37/37 (100%) .*, done$' ps.err ||
	fail "--progress --standardize: no statistics line: $(cat ps.err)"
# a run that fails ends its progress line without ", done" (it claimed
# "done" on a line of its own before the error)
expect_fail 1 'No space left on device' sh -c 'cdp-tile --progress -s 8 u16.tif >/dev/full'
expect_fail 1 'No space left on device' sh -c 'cdp-tile -q -s 8 u16.tif >/dev/full'
# ~7 MB of records: more than the 1 MiB pipe cdp-tile asks for, so head closes it mid-stream
$MK big.tif --width 1200 --height 1000 --bands 3 --dtype u16
( set +e; cdp-tile -q -s 16 big.tif 2>pipe.err; echo $? >pipe.rc ) | head -c 100 >/dev/null
[ "$(cat pipe.rc)" -eq 1 ] || fail "a closed pipe gave exit $(cat pipe.rc)"
grep -q 'Broken pipe' pipe.err || fail "no EPIPE message: $(cat pipe.err)"
$PYTHON - <<'EOF' || fail "a terminal on stdout was not refused"
import os, subprocess, sys
try:
    m, s = os.openpty()
except OSError:
    sys.exit(0)    # no pseudo-terminals here: nothing to check
p = subprocess.run(["cdp-tile", "-q", "-s", "16", "u8.tif"], stdout=s,
                   stderr=subprocess.PIPE)
os.close(s)
os.close(m)
assert p.returncode == 1 and b"terminal" in p.stderr, (p.returncode, p.stderr)
EOF

# --- failures: one line naming the file, exit 1 (2 for usage), no output ---
echo 'not a raster' >text.tif
$MK i16lab.tif --width 50 --height 37 --dtype i16
$MK tiny.tif --width 10 --height 40
mkdir c
$MK c/u8.tif --width 20 --height 20
"$PYTHON" -c 'from osgeo import gdal; gdal.GetDriverByName("GTiff").Create("cplx.tif", 4, 4, 1, gdal.GDT_CInt16)'
expect_fail 1 "cannot open 'nope.tif'" cdp-tile -s 16 nope.tif
expect_fail 1 "cannot open 'text.tif'" cdp-tile -s 16 text.tif
expect_fail 1 "label 'i16lab.tif' is i16, need u8 or u16" \
	cdp-tile -s 16 --label i16lab.tif u8.tif
# A label with u8.tif's geotransform in another CRS is another grid: it is
# placed by its CRS, never cut as if it were on the image's grid (its
# numbers, read as EPSG:32632 metres, lie six degrees of longitude west of
# the image: it covers none of it, and is refused). One without a CRS is
# taken to be in the image's (cdp-tile(1)). label_grid.sh compares warped
# labels with gdalwarp; tile_inputs.sh a label covering half the image.
$MK lab_32632.tif --width 50 --height 37 --epsg 32632 --dtype u8
$MK lab_nocrs.tif --width 50 --height 37 --epsg 0
expect_fail 1 "'u8.tif': label 'lab_32632.tif' does not overlap the image" \
	cdp-tile -s 16 -O crswarp --label lab_32632.tif u8.tif
[ ! -e crswarp ] || fail "a refused label left tiles"
cdp-tile -q -s 16 --label lab_nocrs.tif u8.tif >nocrs.cdps || fail "a label without a CRS was refused"
[ -s nocrs.cdps ] || fail "a label without a CRS gave no records"
expect_fail 1 "'c/u8.tif': name 'u8' is also used by 'u8.tif'" \
	cdp-tile -s 16 u8.tif c/u8.tif
expect_fail 1 "'tiny.tif': 10x40 is smaller than the 16x16 tile" \
	cdp-tile -s 16 tiny.tif
expect_fail 1 "'cplx.tif': unsupported data type CInt16" cdp-tile -s 2 cplx.tif
expect_fail 1 "'u8.tif': band 2 requested, raster has 1" \
	cdp-tile -s 16 --bands 1,2 u8.tif
expect_fail 1 "'st.txt': 3 lines of statistics for 1 bands" \
	cdp-tile -s 16 --standardize --stats st.txt u8.tif
expect_fail 1 "use --format tif" cdp-tile -s 16 -O pngfail --format png i16.tif
[ ! -e pngfail ] || fail "a failed -O run left its directory"
# a 4th band that is not alpha (a NIR band) became the PNG's transparency;
# one that is alpha stays allowed, and --bands can leave it out
$MK nir.tif --width 32 --height 16 --bands 4 --seed 23
"$PYTHON" -c "
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open('nir.tif', gdal.GA_Update)
for b in (1, 2, 3, 4):
    d.GetRasterBand(b).SetColorInterpretation(gdal.GCI_GrayIndex if b == 1 else gdal.GCI_Undefined)"
expect_fail 1 "'nir.tif': band 4 is not an alpha band, and png tiles of 4 bands take their last for transparency (use --format tif, or --bands to leave it out)" \
	cdp-tile -s 16 -O pngnir --format png nir.tif
expect_fail 1 "'nir.tif': band 2 is not an alpha band, and png tiles of 2 bands" \
	cdp-tile -s 16 -O pngnir --format png --bands 1,2 nir.tif
[ ! -e pngnir ] || fail "a refused png -O left its directory"
cdp-tile -q -s 16 -O pngnir --format png --bands 1,2,3 nir.tif || fail "3 bands of nir.tif as png"
"$PYTHON" -c "
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open('nir.tif', gdal.GA_Update)
d.GetRasterBand(4).SetColorInterpretation(gdal.GCI_AlphaBand)"
cdp-tile -q -s 16 -O pngrgba --format png nir.tif || fail "an alpha 4th band as png"
expect_fail 1 "cannot open 'nope.tif'" cdp-tile -s 16 -O tiffail u8.tif nope.tif
[ ! -e tiffail ] || fail "a failed -O run left files"
# Sizes are checked with everything else before the stream starts (the
# checks ran at each input's turn, after the earlier inputs' tiles were
# written): an uncompressed record past a frame's 2 GiB (a 1x1 f64 raster
# padded to 16385x16385 read 4.8 GB first), and a strip the memory cannot
# hold (a VRT 2^31-1 pixels wide: 137 GB for 64 rows; u8.tif's frames came
# out first). Under ulimit -v 1 GB, so that the old order fails fast.
$MK px1.tif --width 1 --height 1 --dtype f64
"$PYTHON" - <<'VRT'
from osgeo import gdal
src = gdal.Open("u8.tif")
ds = gdal.GetDriverByName("VRT").Create("wide.vrt", 2147483647, 64, 1, gdal.GDT_Byte)
ds.SetGeoTransform(src.GetGeoTransform())
ds.SetProjection(src.GetProjection())
ds.GetRasterBand(1).SetMetadata({"source_0": '<SimpleSource><SourceFilename relativeToVRT="1">'
    'u8.tif</SourceFilename><SourceBand>1</SourceBand><SrcRect xOff="0" yOff="0" xSize="50" '
    'ySize="37"/><DstRect xOff="0" yOff="0" xSize="50" ySize="37"/></SimpleSource>'},
    "new_vrt_sources")
ds = None
VRT
ulim() { sh -c 'ulimit -v 1000000 || exit 98; exec "$@"' sh "$@"; }
# (a sanitizer build cannot start under the limit: its shadow memory)
if ulim cdp-tile --version >/dev/null 2>&1; then
	expect_fail 1 "cdp-tile: 'px1.tif': a tile of 16385x16385 pixels takes up to 2416214189 bytes, a stream frame holds at most 2147483648 (use -z, a smaller -s, or -O DIR)" \
		ulim cdp-tile -q -s 16385 --edge pad px1.tif
	expect_fail 1 "cdp-tile: 'wide.vrt': out of memory for a strip of 64 rows" \
		ulim cdp-tile -q -s 64 --edge pad u8.tif wide.vrt
else
	echo "SKIP (this case): cdp-tile cannot start under ulimit -v (not settable, or a sanitizer build)"
fi
# A write that fails midway (a directory where a tile should go: refused
# by the output policy, cdpool(7)) removes the tiles already written.
mkdir -p mid/u8_1_1.tif
expect_fail 1 "refusing to write 'mid/u8_1_1.tif': it is a directory, not a regular file" cdp-tile -s 16 -O mid u8.tif
[ "$(ls mid)" = u8_1_1.tif ] || fail "a failed -O run left: $(ls mid)"
# Two -O runs starting into one new folder both succeed: the one whose
# mkdir found it made by the other said "cannot create 'race': File
# exists" (between its stat and its mkdir; cdp_file_mkdir in test_file
# holds the rule deterministically).
for i in 1 2 3 4 5 6 7 8 9 10; do
	rm -rf race
	cdp-tile -q -s 16 -O race u8.tif 2>race1.err &
	a=$!
	cdp-tile -q -s 16 --name u8b -O race u8.tif 2>race2.err &
	b=$!
	wait "$a" || fail "-O race $i: $(cat race1.err)"
	wait "$b" || fail "-O race $i: $(cat race2.err)"
done
[ "$(ls race | grep -c '^u8_')" = "$(ls race | grep -c '^u8b_')" ] || fail "-O race: $(ls race)"
# The tiles of -O are one set (cdpool(7), OUTPUTS): a SIGTERM sent by
# strace's injection at the 1st, 5th or 12th of the 12 renames ends the
# run only after the last, so the folder holds every new tile and no old
# one beside them (it once stopped at that rename: half new, half old). A
# rename that fails part-way (EIO injected at the 5th) stops the set there:
# reported, naming its tile, the 4 before it new, the rest old, no
# temporary left.
R='rename,renameat,renameat2'
if command -v strace >/dev/null 2>&1 &&
	strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=1 true 2>/dev/null; then
	$MK set.tif --width 48 --height 32 --label set_mask.tif --seed 12
	$MK set2.tif --width 48 --height 32 --label set2_mask.tif --seed 13
	cdp-tile -q -s 16 --label-suffix _mask -O setnew set.tif
	for n in 1 5 12 fail; do
		rm -rf setdir
		cdp-tile -q -s 16 --label-suffix _mask --name set -O setdir set2.tif
		(cd setdir && md5sum * >../set.old)
		set +e
		if [ $n = fail ]; then
			strace -f -o /dev/null -e trace=$R -e inject=$R:error=EIO:when=5 \
				cdp-tile -q -s 16 --label-suffix _mask -O setdir set.tif 2>set.err
		else
			strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=$n \
				cdp-tile -q -s 16 --label-suffix _mask -O setdir set.tif 2>set.err
		fi
		rc=$?
		set -e
		[ -z "$(ls -A setdir | grep cdp-tmp)" ] || fail "rename $n: a temporary left: $(ls -A setdir)"
		[ "$(ls setdir | wc -l)" -eq 12 ] || fail "rename $n: $(ls setdir | wc -l) files, want 12"
		new=0
		for f in setdir/*; do
			cmp -s "$f" "setnew/${f#setdir/}" && new=$((new + 1))
		done
		if [ $n = fail ]; then
			[ "$rc" -eq 1 ] || fail "a failed rename: exit $rc: $(cat set.err)"
			grep -q "^cdp-tile: cannot write 'setdir/set_[0-9_]*\(_label\)\?\.tif': Input/output error\$" set.err ||
				fail "a failed rename: $(cat set.err)"
			[ $new -eq 4 ] || fail "a failed rename at the 5th: $new tiles new, want 4"
			(cd setdir && md5sum -c --quiet ../set.old 2>/dev/null | wc -l) >set.n
			[ "$(cat set.n)" -eq 4 ] || fail "a failed rename: $(cat set.n) old tiles replaced, want 4"
		else
			[ "$rc" -eq 143 ] || fail "a SIGTERM at rename $n: exit $rc, want 143: $(cat set.err)"
			[ $new -eq 12 ] || fail "a SIGTERM at rename $n left $((12 - new)) old tiles beside $new new ones"
		fi
	done
else
	echo "SKIP (this case): no strace that can inject a signal at a rename"
fi
# -O tiles are GDAL rasters with their side files: a CRS that GeoTIFF keys
# cannot hold (Equal Earth, kept in .aux.xml) stays the tiles' (it was lost,
# and each tile's temporary left its .aux.xml behind); a re-run replacing a
# tile takes away the old one's statistics (.aux.xml) and overviews (.ovr),
# which GDAL would serve as the new tile's.
$MK ee.tif --width 32 --height 16 --dtype u16 --seed 21
"$PYTHON" - <<'PYEOF'
from osgeo import gdal, osr
gdal.UseExceptions()
s = osr.SpatialReference(); s.ImportFromProj4("+proj=eqearth +datum=WGS84 +units=m")
gdal.Open("ee.tif", gdal.GA_Update).SetProjection(s.ExportToWkt())
PYEOF
cdp-tile -q -s 16 -O eet ee.tif
[ -z "$(ls -A eet | grep cdp-tmp)" ] || fail "-O left temporaries: $(ls -A eet)"
"$PYTHON" - <<'PYEOF' || fail "-O tiles lost a CRS kept in .aux.xml"
from osgeo import gdal
gdal.UseExceptions()
for t in ("eet/ee_0_0.tif", "eet/ee_0_1.tif"):
    assert "+proj=eqearth" in gdal.Open(t).GetSpatialRef().ExportToProj4(), t
PYEOF
"$PYTHON" - <<'PYEOF'
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open("eet/ee_0_0.tif")
b = d.GetRasterBand(1)
b.ComputeStatistics(False)
b = None
d.BuildOverviews("NEAREST", [2])
PYEOF
[ -e eet/ee_0_0.tif.ovr ] || fail "no .ovr made for the test"
$MK ee.tif --width 32 --height 16 --dtype u16 --seed 22
cdp-tile -q -s 16 -O eet ee.tif
[ ! -e eet/ee_0_0.tif.ovr ] || fail "a replaced tile's .ovr survived"
! grep -q STATISTICS_ eet/ee_0_0.tif.aux.xml 2>/dev/null || fail "a replaced tile's statistics survived"
# -O in a GDAL virtual file system is said to be one
expect_fail 1 "cdp-tile: refusing to write '/vsimem/t': GDAL virtual file systems (/vsi...) are not supported for outputs" \
	cdp-tile -s 16 -O /vsimem/t u8.tif
# -z with -O compressed nothing, silently
expect_fail 2 "cdp-tile: --zlib compresses the record stream, which -O DIR does not write" \
	cdp-tile -s 16 -z 6 -O zdir u8.tif
[ ! -e zdir ] || fail "a refused -z -O made its folder"
expect_fail 2 "--size: '0'" cdp-tile -s 0 u8.tif
expect_fail 2 "--edge: 'wrap'" cdp-tile --edge wrap u8.tif
expect_fail 2 "--overlap 16 must be less than the tile size 16" \
	cdp-tile -s 16 --overlap 16 u8.tif
expect_fail 2 "--max-nodata: '1.5'" cdp-tile --max-nodata 1.5 u8.tif
expect_fail 2 "2 --name for 1 rasters" cdp-tile --name a --name b u8.tif
expect_fail 2 "cdp-tile: --name: invalid name 'my scene' (1-200 of A-Z a-z 0-9 . _ + -)" \
	cdp-tile --name 'my scene' u8.tif
exit 0
