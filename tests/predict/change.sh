#!/bin/sh
# change.sh: change detection by early fusion (cdp-tile(1), "Several
# dates"; cdp-predict --time). A generated pair (genpair.py: buildings
# built between the dates, under other light) is tiled with --time, and the
# shipped unet.cfg, unchanged but for its size variables, learns the change
# mask from the stacked dates; cdp-predict --time then maps a held-out pair
# with a change IoU >= 0.8 (NumPy's, against the pair's own mask), also when
# its second date lies on another grid (warped as cdp-tile warps it).
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
expect_fail 2 "two or more rasters" cdp-predict run --time ha.tif -o x.tif
expect_fail 2 "^cdp-predict: extra operand 'ha.tif'\$" cdp-predict run ha.tif --time ha.tif,hb.tif -o x.tif
expect_fail 1 "has 3 bands, the model in 'run/checkpoint.cdpt' takes 6" cdp-predict run ha.tif -o x.tif
expect_fail 1 "cannot open date 'nope.tif'" cdp-predict run --time ha.tif,nope.tif -o x.tif
[ ! -e x.tif ] || fail "a refused run wrote its output"
exit 0
