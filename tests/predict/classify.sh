#!/bin/sh
# tests/predict/classify.sh: cdp-predict with a classifier checkpoint
# (predict_classify.c), checked against the checkpoint's PyTorch twin
# (cdpool.torch_model.Deployed: raw bands in, softmax out):
#  - chips of a folder (DIR/CLASS/*.tif) and of a list file: CSV
#    path,class,p_green..p_road (the folders' names), one row per chip in
#    input order, class = the name of the arg max,
#    probabilities within 1e-5 of PyTorch's; the two inputs agree;
#  - a scene: one pixel per cell of the window size, the last column and
#    row from the window shifted to the raster's edge, class ids (u8) or
#    with --prob the probabilities (float32) of PyTorch's on those windows,
#    the geotransform scaled by the window size and the raster's CRS; a
#    cell without a valid pixel is nodata (255, NaN);
#  - the class names of --folders travel in the checkpoint (cdpool reads
#    them) into the scene's class map without --colors, as GDAL reads it:
#    category names, raster attribute table, a colour table of the default
#    palette, 256x256 tiles; a --colors line overrides its class's colour,
#    and its name when it gives one, the others keep the folders' names;
#    --resume keeps the checkpoint's names, and says so in one line when
#    the pool's differ; resumed on a pool of per-pixel labels it is refused
#    naming the checkpoint;
#  - refusals: chips of another size, --vector with a classifier.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
"$PYTHON" -c "import torch" 2>/dev/null || { echo "SKIP: no torch" >&2; exit 77; }
. "$CDP_SRCDIR/tests/predict/chips.sh"

echo "== chips"
cdp-predict -q --threads 1 --batch 3 "$T/run" "$T/F" -o "$T/f.csv"
cdp-predict -q --threads 1 "$T/run" "$T/chips/list.txt" -o "$T/l.csv"
[ "$(head -1 "$T/f.csv")" = "path,class,p_green,p_lake,p_land,p_residential,p_road" ] ||
	fail "header: $(head -1 "$T/f.csv")"
[ "$(sed 1d "$T/f.csv" | wc -l)" -eq 20 ] || fail "$(sed 1d "$T/f.csv" | wc -l) rows, want 20"
# folder order: classes, then files, in byte order
sed '1d; s/,.*//' "$T/f.csv" >"$T/f.paths"
(cd "$T/F" && ls -d */*.tif | sort | sed "s|^|$T/F/|") | cmp -s - "$T/f.paths" ||
	fail "the folder's rows: $(head -3 "$T/f.paths")"
cat >"$T/check.py" <<'PYEOF'
import csv, os, sys
import numpy as np
import torch
from osgeo import gdal
sys.path.insert(0, os.path.join(os.environ["CDP_SRCDIR"], "python"))
import cdpool
from cdpool.torch_model import Deployed
ck = cdpool.load_checkpoint(sys.argv[2])
net = Deployed(ck).eval()   # the model from the checkpoint's own cfg (cdpool.model)
def probs(x):
    with torch.no_grad():
        return net(torch.from_numpy(x.astype(np.float32))).numpy().reshape(len(x), -1)
mode = sys.argv[1]
if mode == "csv":
    rows = list(csv.reader(open(sys.argv[3])))
    names, rows = [c[2:] for c in rows[0][2:]], rows[1:]
    want = probs(np.stack([gdal.Open(r[0]).ReadAsArray() for r in rows]))
    got = np.array([[float(v) for v in r[2:]] for r in rows])
    err = np.abs(got - want).max()
    assert err <= 1e-5, "probabilities differ by %g" % err
    assert all(r[1] == names[int(np.argmax(g))] for r, g in zip(rows, got)), "class is not the arg max"
    assert np.abs(got.sum(1) - 1).max() < 1e-5
    print("csv: %d chips within %.1e of PyTorch" % (len(rows), err))
else:
    raster, out, prob = sys.argv[3], sys.argv[4], mode == "prob"
    src, dst = gdal.Open(raster), gdal.Open(out)
    a = src.ReadAsArray()
    S = ck.in_shape[1]
    H, W = a.shape[1:]
    ny, nx = -(-H // S), -(-W // S)
    assert (dst.RasterYSize, dst.RasterXSize) == (ny, nx), (dst.RasterYSize, dst.RasterXSize)
    gt, g = src.GetGeoTransform(), dst.GetGeoTransform()
    assert np.allclose(g, (gt[0], gt[1] * S, gt[2] * S, gt[3], gt[4] * S, gt[5] * S)), g
    assert dst.GetProjection() == src.GetProjection()
    x0 = [min(i * S, W - S) for i in range(nx)]
    y0 = [min(i * S, H - S) for i in range(ny)]
    win = np.stack([a[:, y:y + S, x:x + S] for y in y0 for x in x0])
    want = probs(win).reshape(ny, nx, -1)
    got = dst.ReadAsArray().astype(np.float64)
    if prob:
        err = np.abs(np.moveaxis(got, 0, -1) - want).max()
        assert err <= 1e-5, "probabilities differ by %g" % err
        assert dst.GetRasterBand(1).DataType == gdal.GDT_Float32
    else:
        assert (got == want.argmax(-1)).all(), (got, want.argmax(-1))
        assert dst.GetRasterBand(1).GetNoDataValue() == 255
    print("%s: %dx%d cells agree with PyTorch" % (mode, nx, ny))
PYEOF
"$PYTHON" "$T/check.py" csv "$T/run/checkpoint.cdpt" "$T/f.csv" || fail "folder CSV"
"$PYTHON" "$T/check.py" csv "$T/run/checkpoint.cdpt" "$T/l.csv" || fail "list CSV"
sed 1d "$T/f.csv" | sed "s|^$T/F/[a-z]*/||" | sort >"$T/f.rows"
sed 1d "$T/l.csv" | sed "s|^$T/chips/||" | sort >"$T/l.rows"
cmp -s "$T/f.rows" "$T/l.rows" || fail "folder and list differ: $(diff "$T/f.rows" "$T/l.rows" | head -3)"

echo "== a scene"
# 40 x 56 pixels, windows of 16: 3 x 4 cells, the last ones shifted inwards
"$PYTHON" "$GEN" "$T/s.tif" --size 40 --height 56 --seed 9
cdp-predict -q --threads 1 "$T/run" "$T/s.tif" -o "$T/map.tif"
"$PYTHON" "$T/check.py" map "$T/run/checkpoint.cdpt" "$T/s.tif" "$T/map.tif" || fail "class map"
cdp-predict -q --threads 1 --prob --batch 2 "$T/run" "$T/s.tif" -o "$T/prob.tif"
"$PYTHON" "$T/check.py" prob "$T/run/checkpoint.cdpt" "$T/s.tif" "$T/prob.tif" || fail "--prob"

echo "== the folders' class names, from the checkpoint"
# folder order: the sorted names; class 1 recoloured and renamed, class 2
# recoloured only
printf '1 0 0 255 water\n2 10 20 30\n' >"$T/lake.colors"
cdp-predict -q --threads 1 --colors "$T/lake.colors" "$T/run" "$T/s.tif" -o "$T/named.tif"
"$PYTHON" - "$T/run/checkpoint.cdpt" "$T/map.tif" "$T/named.tif" "$T/prob.tif" $NAMES <<'PYEOF' ||
import os, sys
from osgeo import gdal
sys.path.insert(0, os.path.join(os.environ["CDP_SRCDIR"], "python"))
import cdpool
gdal.UseExceptions()
names = sorted(sys.argv[5:])
ck = cdpool.load_checkpoint(sys.argv[1])
assert ck.version == 8 and ck.class_names == names, (ck.version, ck.class_names)
palette = [[210, 210, 210, 255], [228, 26, 28, 255], [55, 126, 184, 255], [77, 175, 74, 255],
           [152, 78, 163, 255]]
def band(p):
    return gdal.Info(p, format="json")["bands"][0]
b = band(sys.argv[2])
assert b["categories"] == names, b.get("categories")
assert b["colorInterpretation"] == "Palette" and b["colorTable"]["entries"][:5] == palette, b
assert b["colorTable"]["entries"][255][3] == 0 and b["block"] == [256, 256], b
d = gdal.Open(sys.argv[2])  # kept: a RAT outliving its dataset crashes Python
rat = d.GetRasterBand(1).GetDefaultRAT()
assert [rat.GetValueAsString(r, 1) for r in range(rat.GetRowCount())] == names
b = band(sys.argv[3])
want = [names[0], "water"] + names[2:]
assert b["categories"] == want, b.get("categories")
e = b["colorTable"]["entries"]
assert e[0] == palette[0] and e[1] == [0, 0, 255, 255] and e[2] == [10, 20, 30, 255], e[:3]
assert [x["description"] for x in gdal.Info(sys.argv[4], format="json")["bands"]] == names
print("class names %s in the class map, the table and the probability bands" % names)
PYEOF
	fail "the folders' class names are not the class map's"
# ckn RUNDIR: the class names of its checkpoint, one line
ckn() {
	"$PYTHON" -c "import sys; sys.path.insert(0, '$CDP_SRCDIR/python'); import cdpool
print(' '.join(cdpool.load_checkpoint('$1/checkpoint.cdpt').class_names))"
}
cp -r "$T/run" "$T/run2"
cdp-train -q --db "$T/pool" --keys "$T/run.keys" --out "$T/run2" --batch 4 --steps 8 \
	--threads 1 --resume 2>"$T/err" || fail "--resume: $(cat "$T/err")"
# (a longer run re-plans its cosine schedule, and says so: nothing else)
! grep -v 'schedule is re-planned over' "$T/err" || fail "--resume said: $(cat "$T/err")"
[ "$(ckn "$T/run2")" = "green lake land residential road" ] || fail "resumed: $(ckn "$T/run2")"
# the same pool (its uuid) with other names in its class_names meta
cp -r "$T/pool" "$T/pool2" && cp -r "$T/run" "$T/run3"
"$PYTHON" - "$T/pool2" <<'PYEOF' || fail "cannot rename the classes of the pool copy"
import sys, zlib, lmdb
env = lmdb.open(sys.argv[1], max_dbs=2)
text = b"".join(b"class.%d=%s\n" % (k, n) for k, n in enumerate([b"a", b"b", b"c", b"d", b"e"]))
with env.begin(write=True, db=env.open_db(b"meta")) as txn:
    txn.put(b"class_names", text + b"crc32=%08x\n" % zlib.crc32(text))
PYEOF
cdp-train -q --db "$T/pool2" --keys "$T/run.keys" --out "$T/run3" --batch 4 --steps 8 \
	--threads 1 --resume 2>"$T/err" || fail "--resume, other names: $(cat "$T/err")"
[ "$(grep -v 'schedule is re-planned over' "$T/err")" = "cdp-train: resume: using the checkpoint's class names ('green', 'lake', 'land', 'residential', 'road'), not the pool's ('a', 'b', 'c', 'd', 'e')" ] ||
	fail "--resume, other names: $(cat "$T/err")"
[ "$(ckn "$T/run3")" = "green lake land residential road" ] || fail "resumed: $(ckn "$T/run3")"
# resumed on a pool of another kind (per-pixel labels): the model is named
# by the checkpoint it comes from (before: model '(checkpoint)')
"$PYTHON" "$GEN" "$T/seg.tif" --size 64 --seed 5 --mask "$T/seg_mask.tif"
cdp-tile -q --size 16 --label-suffix _mask "$T/seg.tif" | cdp-lmdbpack -q "$T/segpool"
cdp-keyshuffle -q -o "$T/seg.keys" "$T/segpool"
cp -r "$T/run" "$T/run4"
expect_fail 1 "^cdp-train: model '$T/run4/checkpoint.cdpt' gives a 1x1 output, the pool's per-pixel labels are 16x16 (a segmentation head is needed)\$" \
	cdp-train -q --db "$T/segpool" --keys "$T/seg.keys" --out "$T/run4" --batch 4 --steps 8 \
	--threads 1 --resume
# cell (1, 1) all nodata, and cells (0, 2) and (3, 0) of the last column and
# row too, whose windows (shifted inwards) still hold their neighbours'
# valid pixels: nodata all three
"$PYTHON" - "$T/s.tif" "$T/nd.tif" <<'PYEOF'
import sys
from osgeo import gdal
ds = gdal.Translate(sys.argv[2], sys.argv[1])
for b in range(1, ds.RasterCount + 1):
    band = ds.GetRasterBand(b)
    a = band.ReadAsArray()
    a[16:32, 16:32] = 0
    a[0:16, 32:40] = 0
    a[48:56, 0:16] = 0
    band.WriteArray(a)
    band.SetNoDataValue(0)
ds = None
PYEOF
cdp-predict -q --threads 1 "$T/run" "$T/nd.tif" -o "$T/nd_map.tif"
cdp-predict -q --threads 1 --prob "$T/run" "$T/nd.tif" -o "$T/nd_prob.tif"
"$PYTHON" - "$T/nd_map.tif" "$T/nd_prob.tif" <<'PYEOF' || fail "nodata cell"
import sys
import numpy as np
from osgeo import gdal
m, p = gdal.Open(sys.argv[1]).ReadAsArray(), gdal.Open(sys.argv[2]).ReadAsArray()
nd = [(1, 1), (0, 2), (3, 0)]
assert all(m[c] == 255 for c in nd) and (m[m != 255] < 5).all() and (m == 255).sum() == 3, m
assert all(np.isnan(p[(slice(None),) + c]).all() for c in nd), p
assert np.isfinite(p[:, 0, 0]).all() and np.isfinite(p[:, 3, 2]).all(), p
PYEOF

echo "== refusals"
"$PYTHON" "$GEN" --scene-tiles "$T/big" --count 2 --size 24 --seed 1
expect_fail 1 "^cdp-predict: '$T/big/.*' is 24x24, the model takes chips of 16x16 (--size)\$" \
	cdp-predict -q "$T/run" "$T/big" -o "$T/x.csv"
expect_fail 1 "is a classifier: --vector and --preview are for segmentation models" \
	cdp-predict -q --vector "$T/x.gpkg" "$T/run" "$T/s.tif" -o "$T/x.tif"
! ls "$T"/x.csv* >/dev/null 2>&1 || fail "a failed run left $(ls "$T"/x.csv*)"
echo ok
