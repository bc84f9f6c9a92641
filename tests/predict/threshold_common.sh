# tests/predict/threshold_common.sh: sourced by predict.sh and ranks.sh
# after tests/tools/common.sh. mk: mkthreshold.py (label = band value >
# 128, trivially learnable); SMALL: tests/train/small.cfg; py CODE: Python
# with numpy and gdal imported.
D="$CDP_SRCDIR/tests/predict"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
mk() { "$PYTHON" "$D/mkthreshold.py" "$@"; }
py() { "$PYTHON" -c "import sys, numpy as np; from osgeo import gdal, ogr; $1"; }
# threshold_run SIZE STEPS [cdp-train options]: $T/a.tif (SIZE x SIZE, 1
# band) cut into 64x64 tiles in $T/pool, the small net trained on it for
# STEPS steps of batch 4 into $T/run, and $T/b.tif (200 x 170, other
# pixels, a nodata rectangle) to map
threshold_run() {
	tr_size=$1 tr_steps=$2
	shift 2
	mk "$T/a.tif" "$tr_size" "$tr_size" 1
	mk "$T/b.tif" 200 170 2 --nodata-rect 10,20,30,15
	cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" | cdp-lmdbpack -q "$T/pool"
	cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
	cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$SMALL:channels=1" --out "$T/run" \
		--steps "$tr_steps" --batch 4 --threads 1 "$@" || fail "training failed"
}
