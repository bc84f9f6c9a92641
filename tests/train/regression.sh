#!/bin/sh
# regression.sh: pixel regression end to end (cdp-train(1) "Pixel
# regression"), on two generated 128x128 scenes (genvalue.py: 3 float bands
# of smooth fields plus texture, the target y = 1 + 3 b1 - 2 b2 + 4 b1 b3)
# cut into 32 tiles of 32x32 with their value labels (cdp-tile
# --label-suffix, a float label raster is a value label):
#  - small.cfg with loss=mse, classes=1 learns the target to a validation
#    R^2 >= 0.95 on the original scale (budget: 300 adamw steps at batch 4
#    with flips and quarter turns, a few seconds on 2 cores), train.log and
#    metrics.jsonl say rmse, mae, bias, r2 and count, --keep-best rmse keeps
#    best.cdpt;
#  - the checkpoints' TASK, read by Python (cdpool.checkpoint): regression,
#    the target mean and std of train.log, NumPy's over the training
#    sources' tiles;
#  - cdp-predict of a new scene with best.cdpt: a float32 map, one band,
#    nodata NaN, overviews, tagged CDP_TASK=regression, scored by
#    cdp-evaluate --json to R^2 >= 0.95 (and equal to NumPy's), and its
#    class-map options refused;
#  - 2 ranks at batch 2 give the validation loss, rmse, mae, bias, r2 and
#    count of one process at batch 4 (1e-6 relative);
#  - --resume at step 5 of 10 gives the uninterrupted run's losses bit for
#    bit, keeping the checkpoint's target standardization;
#  - with the warp (aug_rotate, aug_scale, a 24x24 crop) it still learns
#    (R^2 >= 0.7 in 100 steps) and validation counts the crops' pixels;
#  - refusals: a class loss on a value pool, a regression loss on a class
#    pool, ignore= with a regression loss, a head of another T, --keep-best
#    miou on a value pool and rmse on a class pool, --keep-best f1 on a value
#    pool (the hint names rmse, r2 or loss), CDP_TRAIN_DATA=device on a value
#    pool.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genvalue.py"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
. "$CDP_SRCDIR/tests/train/metrics.sh"
export CDP_DIST_TIMEOUT=60
cd "$T"
for s in 1 2; do "$PYTHON" "$GEN" --size 128 --seed "$s" "s$s.tif" "s${s}_value.tif"; done
cdp-tile -q --size 32 --label-suffix _value s1.tif s2.tif | cdp-lmdbpack -q pool ||
	fail "cdp-tile | cdp-lmdbpack"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out val.keys -o train.keys pool
M="$SMALL:loss=mse,classes=1,width=16,depth=3"
C="--db pool --keys train.keys --val-keys val.keys --optimizer adamw --lr 0.01 -q"

# a val line's KEY
val_of() { sed -n "s/^{\"type\":\"val\",.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tail -1; }

cdp-train $C --model "$M,aug_hflip=1,aug_rot90=1" --batch 4 --steps 300 --val-every 100 \
	--keep-best rmse --out run || fail "cdp-train on the value pool"
r2=$(val_of run/metrics.jsonl r2)
echo "validation r2 $r2 rmse $(val_of run/metrics.jsonl rmse) after 300 steps"
awk -v r="$r2" 'BEGIN { exit !(r >= 0.95) }' || fail "validation r2 $r2 < 0.95"
grep -q "targets standardized by the training sources' statistics: target 1 mean" run/train.log ||
	fail "train.log does not say the targets' standardization"
grep -q "validation at step 300: loss .* rmse=.* mae=.* bias=.* r2=.* count 8192" run/train.log ||
	fail "train.log lacks the regression metrics: $(grep validation run/train.log | tail -1)"
grep -q "best rmse so far" run/train.log || fail "--keep-best rmse kept nothing"
[ -s run/best.cdpt ] || fail "no best.cdpt"
# the checkpoint's TASK: the targets' mean and std of train.log, which are
# NumPy's over every tile of the training sources (population std)
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - <<'EOF' || fail "the checkpoint's target statistics"
import re
import numpy as np
from cdpool.checkpoint import load_checkpoint
from cdpool.pool import Pool
m = re.search(r"target 1 mean (\S+) std (\S+)", open("run/train.log").read())
for f in ("run/best.cdpt", "run/checkpoint.cdpt"):
    t = load_checkpoint(f).task
    assert t is not None and t["task"] == "regression", (f, t)
    assert np.allclose([t["target_mean"][0], t["target_std"][0]],
                       [float(m.group(1)), float(m.group(2))], rtol=1e-5), (t, m.groups())
keys = [k for f in ("train.keys", "val.keys") for k in open(f).read().split("\n")[1:] if k.strip()]
with Pool("pool") as p:
    y = np.concatenate([np.asarray(p[k][1], np.float64).ravel() for k in keys])
y = y[np.isfinite(y)]
assert np.allclose(t["target_mean"], y.mean(), rtol=1e-6), (t, y.mean())
assert np.allclose(t["target_std"], y.std(), rtol=1e-5), (t, y.std())
print("checkpoint TASK: regression, target mean %.6g std %.6g (NumPy's over the sources' tiles)"
      % (t["target_mean"][0], t["target_std"][0]))
EOF

# cdp-predict on a third scene: a float32 map tagged CDP_TASK=regression,
# nodata NaN, with averaged overviews; cdp-evaluate --json scores it
# against the scene's true target (R^2 >= 0.95), and its numbers are
# NumPy's of the two rasters
"$PYTHON" "$GEN" --size 300 --seed 7 s7.tif s7_value.tif
cdp-predict -q run/best.cdpt s7.tif -o pred.tif || fail "cdp-predict"
cdp-evaluate --json pred.tif s7_value.tif >eval.json || fail "cdp-evaluate"
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - <<'EOF' || fail "the regression map"
import json
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open("pred.tif")
assert d.GetMetadataItem("CDP_TASK") == "regression", d.GetMetadata()
b = d.GetRasterBand(1)
assert d.RasterCount == 1 and b.DataType == gdal.GDT_Float32, (d.RasterCount, b.DataType)
assert np.isnan(b.GetNoDataValue()) and b.GetOverviewCount() >= 1, b.GetNoDataValue()
assert gdal.Open("s7.tif").GetGeoTransform() == d.GetGeoTransform()
p = b.ReadAsArray().astype(np.float64)
t = gdal.Open("s7_value.tif").ReadAsArray().astype(np.float64)
e = json.load(open("eval.json"))
r2 = 1 - ((p - t) ** 2).sum() / ((t - t.mean()) ** 2).sum()
assert e["task"] == "regression" and e["count"] == p.size, e
assert abs(e["r2"] - r2) < 1e-6 and abs(e["rmse"] - np.sqrt(((p - t) ** 2).mean())) < 1e-6, (e, r2)
assert r2 >= 0.95, "R^2 %g < 0.95 on a new scene" % r2
print("cdp-predict on a new 300x300 scene: R^2 %.4f rmse %.4f (cdp-evaluate = NumPy)"
      % (r2, e["rmse"]))
EOF
for opt in "--prob" "--vector v.gpkg" "--colors c.txt" "--preview p.png"; do
	expect_fail 1 "${opt%% *}: 'run/best.cdpt' is a regression net" \
		cdp-predict -q $opt run/best.cdpt s7.tif -o bad.tif
done
# checkpoints that say regression of targets other than the net's outputs,
# or of a net whose output is 1x1 (the same weights, a [gap] head: a
# classifier), both written by tests/engine/ckpt_edit: refused, no map
EDIT="$CDP_BUILDDIR/tests/engine/ckpt_edit"
"$EDIT" -T 2 run/best.cdpt t2.cdpt || fail "ckpt_edit -T 2"
expect_fail 1 "'t2.cdpt': the checkpoint records 2 targets, the net gives 1" \
	cdp-predict -q t2.cdpt s7.tif -o bad.tif
{ cat "$SMALL"; printf '\n[gap]\n'; } >gap.cfg
"$EDIT" -c gap.cfg run/best.cdpt gap.cdpt || fail "ckpt_edit -c gap.cfg"
expect_fail 1 "'gap.cdpt': a regression net with a 1x1 output is not a segmentation model" \
	cdp-predict -q gap.cdpt s7.tif -o bad.tif
[ ! -e bad.tif ] || fail "a refused prediction left bad.tif"

PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -m cdpool info run/best.cdpt >info.txt
grep -q "^task: regression, 1 targets$" info.txt && grep -q "^target 1: mean " info.txt ||
	fail "python3 -m cdpool info does not print the task: $(grep -i task info.txt)"

# 2 ranks x 2 = 1 x 4: the same validation numbers (batchnorm-free small.cfg)
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	MP="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
	cdp-train $C --model "$M" --batch 4 --steps 20 --val-every 20 --out j1 || fail "1 x 4"
	$MP cdp-train $C --model "$M" --batch 2 --steps 20 --val-every 20 --out j2 || fail "2 x 2"
	for k in loss rmse mae bias r2 count; do
		a=$(val_of j1/metrics.jsonl $k) b=$(val_of j2/metrics.jsonl $k)
		awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; d = d < 0 ? -d : d; s = a < 0 ? -a : a;
			exit !(a != "" && d <= 1e-6 * s + 1e-9) }' ||
			fail "validation $k at 2 ranks x 2: $b, at 1 x 4: $a"
	done
	echo "validation rmse $(val_of j1/metrics.jsonl rmse) r2 $(val_of j1/metrics.jsonl r2) at 1 x 4 and 2 x 2"
fi

# --resume keeps the checkpoint's target standardization: 5 steps, then
# resumed to 10, give the 10 losses of an uninterrupted run bit for bit
R="$C --model $M --batch 4 --log-every 1 --checkpoint-every 5"
cdp-train $R --steps 10 --out ra || fail "10 steps"
cdp-train $R --steps 5 --out rb && cdp-train $R --steps 10 --out rb --resume || fail "5, resumed to 10"
losses ra/metrics.jsonl >ra.l
losses rb/metrics.jsonl >rb.l
[ "$(wc -l <ra.l)" -eq 10 ] && cmp -s ra.l rb.l || fail "resumed losses differ: $(diff ra.l rb.l | head -4)"
grep -q "resume: the checkpoint's target standardization" rb/train.log ||
	fail "the resumed run does not say it keeps the checkpoint's target standardization"
echo "10 losses bit for bit after resuming at step 5"

# the warp resamples the targets with the bands (NaN outside the tile)
cdp-train $C --model "$M,aug_rotate=20,aug_scale=0.2,crop_h=24,crop_w=24" --batch 4 \
	--steps 100 --val-every 100 --out warp || fail "cdp-train with the warp"
r2=$(val_of warp/metrics.jsonl r2)
awk -v r="$r2" 'BEGIN { exit !(r >= 0.7) }' || fail "with the warp: validation r2 $r2 < 0.7"
[ "$(val_of warp/metrics.jsonl count)" = 4608 ] || fail "the 24x24 crops: count $(val_of warp/metrics.jsonl count)"

# refusals
expect_fail 1 "holds value labels (1 target a pixel): train it with \[net\] loss=mse, l1 or huber" \
	cdp-train $C --model "$SMALL" --steps 1 --out bad
expect_fail 1 "gives a 2x32x32 output, the pool's targets are 1x32x32" \
	cdp-train $C --model "$SMALL:loss=mse,classes=2" --steps 1 --out bad
expect_fail 1 "^cdp-train: model '.*small.cfg': ignore=3 is for class labels; loss=mse counts every target that is not NaN\$" \
	cdp-train $C --model "$M,ignore=3" --steps 1 --out bad
expect_fail 1 "a regression run keeps rmse, r2 or loss" \
	cdp-train $C --model "$M" --steps 1 --keep-best miou --out bad
# the hint names what a value pool keeps, not a classifier's metrics
expect_fail 1 "keep-best f1: a multi-label pool's metric; '.*' is not one (keep rmse, r2 or loss)\$" \
	cdp-train $C --model "$M" --steps 1 --keep-best f1 --out bad
CDP_TRAIN_DATA=device expect_fail 1 "holds value labels (regression targets), which take the host path" \
	cdp-train $C --model "$M" --steps 1 --out bad
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" c.tif --size 64 --seed 3 --mask c_mask.tif
cdp-tile -q --size 32 --label-suffix _mask c.tif | cdp-lmdbpack -q cpool
cdp-keyshuffle -q --seed 1 -o c.keys cpool
expect_fail 1 "has the regression loss mse: it trains on a pool of value labels" \
	cdp-train --db cpool --keys c.keys -q --model "$M" --batch 2 --steps 1 --out bad
expect_fail 1 "keep-best rmse: a regression metric" \
	cdp-train --db cpool --keys c.keys --val-keys c.keys -q --model "$SMALL" --batch 2 --steps 1 \
	--keep-best rmse --out bad
echo "refusals named"
