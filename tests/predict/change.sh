#!/bin/sh
# change.sh: change detection by early fusion (cdp-tile(1), "Several
# dates"; cdp-predict --time). A generated pair (genpair.py: buildings
# built between the dates, under other light) is tiled with --time, and the
# shipped unet.cfg, unchanged but for its size variables, learns the change
# mask from the stacked dates; cdp-predict --time then maps a held-out pair
# with a change IoU >= 0.8 (NumPy's, against the pair's own mask), also when
# its second date lies on another grid (warped as cdp-tile warps it), and
# is nodata where that date does not cover (also for dates of 2 bands).
# Budget: 150 steps of batch 8 on 64x64 tiles, about 35 s on two loaded
# cores. Refusals: --time with one date, with a RASTER too, a plain raster
# to a model of stacked dates, a chip classifier.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
cd "$T"
change_pair
"$PYTHON" "$G" --size 256 --seed 2 --origin 501000,5800000 --warp ha.tif hbw.tif hchange.tif
change_train "$CDP_SRCDIR/share/cdpool/models/unet.cfg:width=8,depth=3,in_h=64,in_w=64"
cdp-predict -q run --time ha.tif,hb.tif -o map.tif
cdp-predict -q run --time ha.tif,hbw.tif -o mapw.tif --preview mapw.png
"$PYTHON" - <<'EOF' || fail "change maps"
import numpy as np
from osgeo import gdal
t = gdal.Open("hchange.tif").ReadAsArray() == 1
for f in ("map.tif", "mapw.tif"):
    d = gdal.Open(f)
    assert d.GetGeoTransform() == gdal.Open("ha.tif").GetGeoTransform(), f
    m = d.ReadAsArray() == 1
    iou = (m & t).sum() / (m | t).sum()
    print(f, "change IoU %.3f" % iou)
    assert iou >= 0.8, (f, iou)
EOF
[ -s mapw.png ] || fail "no preview of the warped pair"
# dates of 2 bands (GDAL takes a warp's alpha band for the mask only of 2
# or 4 bands): the map is nodata where the warped date does not cover
"$PYTHON" - <<'EOF'
import numpy as np
from osgeo import gdal, osr
s = osr.SpatialReference()
s.ImportFromEPSG(32633)
rng = np.random.default_rng(2)
def mk(path, a, gt):
    d = gdal.GetDriverByName("GTiff").Create(path, a.shape[2], a.shape[1], a.shape[0])
    d.SetGeoTransform(gt)
    d.SetProjection(s.ExportToWkt())
    for b in range(a.shape[0]):
        d.GetRasterBand(b + 1).WriteArray(a[b])
mk("t0.tif", rng.integers(1, 250, (2, 64, 64)).astype(np.uint8), (500000, 10, 0, 5800000, 0, -10))
mk("t0m.tif", rng.integers(0, 2, (1, 64, 64)).astype(np.uint8), (500000, 10, 0, 5800000, 0, -10))
# the right half, on a grid 1e-5 finer in y: warped
mk("t1.tif", rng.integers(1, 250, (2, 64, 32)).astype(np.uint8), (500320, 10, 0, 5800000, 0, -10.0001))
EOF
cdp-tile -q -s 32 --label t0m.tif --time t0.tif,t0.tif | cdp-lmdbpack -q tpool
cdp-keyshuffle -q --seed 1 -o tkeys tpool
cdp-train -q --db tpool --keys tkeys --model "$CDP_SRCDIR/tests/train/small.cfg:in_h=32,in_w=32,channels=4" \
	--out trun --steps 2 --batch 2 --threads 1 || fail "training on 2-band dates failed"
cdp-predict -q trun --time t0.tif,t1.tif -o tmap.tif
"$PYTHON" -c "
from osgeo import gdal
a = gdal.Open('tmap.tif').ReadAsArray()
assert (a[:, :32] == 255).all() and (a[:, 32:] != 255).all(), (a[:, :32] != 255).sum()" ||
	fail "the map of a warped 2-band date is not nodata where it does not cover"
expect_fail 2 "two or more rasters" cdp-predict run --time ha.tif -o x.tif
expect_fail 2 "^cdp-predict: extra operand 'ha.tif'\$" cdp-predict run ha.tif --time ha.tif,hb.tif -o x.tif
expect_fail 1 "has 3 bands, the model in 'run/checkpoint.cdpt' takes 6" cdp-predict run ha.tif -o x.tif
expect_fail 1 "cannot open date 'nope.tif'" cdp-predict run --time ha.tif,nope.tif -o x.tif
# a window the U-Net of depth 3 cannot take: the sizes it can named (the
# message named only a concat layer whose shapes differ)
expect_fail 1 "^cdp-predict: run/checkpoint.cdpt:[0-9]*: layer 'concat[0-9]*' (concat): .* (--size 60 does not fit the model: sizes that do are multiples of 8, as 56 and 64)\$" \
	cdp-predict --size 60 run --time ha.tif,hb.tif -o x.tif
expect_fail 1 "(--size 5 does not fit the model: the next size that does is 8)\$" \
	cdp-predict --size 5 run --time ha.tif,hb.tif -o x.tif
[ ! -e x.tif ] || fail "a refused --size wrote the map"
[ ! -e x.tif ] || fail "a refused run wrote its output"
exit 0
