#!/bin/sh
# multitarget.sh: pixel regression of two targets at once (cdp-train(1)
# "Pixel regression", T = 2). Three generated 128x128 scenes of three
# float bands, each with one 2-band target raster (genvalue.py --targets 2:
# band 1 y1 = 1 + 3 b1 - 2 b2 + 4 b1 b3, about 1 to 6, band 2
# y2 = 200 + 30 (b2 - b3) b1 + 20 b3, about 190 to 230: another offset and
# spread, so a target taken for the other scores far below 0), two cut into
# 32x32 tiles with cdp-tile --label-bands 1,2, the third mapped. Budget:
# 300 adamw steps at batch 4 plus two runs of 20 (one at 2 ranks), about
# 20 s on 2 cores.
#  - validation: metrics.jsonl has target_rmse, target_mae, target_bias,
#    target_r2 and target_count arrays of 2, each target's R^2 >= 0.85; the
#    pooled figures are the per-target sums' (count, rmse, mae, bias, and
#    r2 = 1 - sum SS_res / sum SS_tot); train.log says target_rmse= and
#    target_r2= lists; --keep-best r2 keeps best.cdpt;
#  - 2 ranks at batch 2 give one process's per-target figures (1e-6);
#  - cdp-predict of the third scene: 2 float32 bands described "target 1",
#    "target 2"; each band's R^2 against the same band of the true targets
#    >= 0.85 by NumPy, and cdp-evaluate --json's targets[] equal NumPy's,
#    band by band, its top-level keys the pooled figures; against the
#    reference with its bands swapped both R^2 are below 0 (the bands are
#    not mixed up); the text report has a line a band, and a 1-band
#    reference is refused.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genvalue.py"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
export CDP_DIST_TIMEOUT=60
cd "$T"
for s in 1 2 7; do
	"$PYTHON" "$GEN" --size 128 --seed "$s" --targets 2 "s$s.tif" "s${s}_two.tif" || fail "scene $s"
done
"$PYTHON" "$GEN" --size 128 --seed 7 one7.tif one7_value.tif || fail "a 1-band reference"
cdp-tile -q --size 32 --label-suffix _two --label-bands 1,2 s1.tif s2.tif |
	cdp-lmdbpack -q pool || fail "cdp-tile --label-bands 1,2 | cdp-lmdbpack"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out val.keys -o train.keys pool
M="$SMALL:loss=mse,classes=2,width=16,depth=3"
C="--db pool --keys train.keys --val-keys val.keys --optimizer adamw --lr 0.01 -q"

cdp-train $C --model "$M,aug_hflip=1,aug_rot90=1" --batch 4 --steps 300 --val-every 100 \
	--keep-best r2 --out run || fail "cdp-train of two targets"
grep -q "validation at step 300: loss .* r2=[^ ]* target_rmse=[^ ,]*,[^ ,]* target_r2=[^ ,]*,[^ ,]* count 16384" \
	run/train.log || fail "train.log lacks the per-target scores: $(grep validation run/train.log | tail -1)"
# the last val line: per-target arrays of 2, and the pooled figures theirs
"$PYTHON" - <<'EOF' || fail "the per-target validation figures"
import json
import numpy as np
v = [json.loads(l) for l in open("run/metrics.jsonl") if '"type":"val"' in l][-1]
keys = ("target_rmse", "target_mae", "target_bias", "target_r2", "target_count")
assert all(len(v[k]) == 2 for k in keys), v
n = np.array(v["target_count"], float)
rmse, mae, bias, r2 = (np.array(v[k], float) for k in keys[:4])
assert n.sum() == v["count"] == 16384, v
assert min(r2) >= 0.85, "per-target validation R^2 %s < 0.85" % r2
assert np.isclose(v["rmse"], np.sqrt((rmse ** 2 * n).sum() / n.sum()), rtol=1e-9), v
assert np.isclose(v["mae"], (mae * n).sum() / n.sum(), rtol=1e-9), v
assert np.isclose(v["bias"], (bias * n).sum() / n.sum(), rtol=1e-9, atol=1e-12), v
# SS_tot,t = SS_res,t / (1 - r2_t), SS_res,t = rmse_t^2 n_t
ssres = rmse ** 2 * n
assert np.isclose(v["r2"], 1 - ssres.sum() / (ssres / (1 - r2)).sum(), rtol=1e-9), v
assert v["metric"] == v["r2"], v
print("validation: target r2 %s rmse %s; pooled r2 %.4f" % (r2.round(4), rmse.round(4), v["r2"]))
EOF
grep -q "best r2 so far" run/train.log || fail "--keep-best r2 kept nothing"

# 2 ranks x 2 = 1 x 4: the same per-target validation figures
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	MP="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
	cdp-train $C --model "$M" --batch 4 --steps 20 --val-every 20 --out j1 || fail "1 x 4"
	$MP cdp-train $C --model "$M" --batch 2 --steps 20 --val-every 20 --out j2 || fail "2 x 2"
	"$PYTHON" - <<'EOF' || fail "per-target figures at 2 ranks differ from 1"
import json
import numpy as np
a, b = ([json.loads(l) for l in open(d + "/metrics.jsonl") if '"type":"val"' in l][-1]
        for d in ("j1", "j2"))
for k in ("target_rmse", "target_mae", "target_bias", "target_r2", "target_count", "r2"):
    assert np.allclose(a[k], b[k], rtol=1e-6, atol=1e-9), (k, a[k], b[k])
print("per-target r2 %s at 1 x 4 and 2 x 2" % a["target_r2"])
EOF
fi

# the map of a new scene: two bands, each scored against its own target
cdp-predict -q run/best.cdpt s7.tif -o pred.tif || fail "cdp-predict"
cdp-evaluate --json pred.tif s7_two.tif >eval.json || fail "cdp-evaluate"
gdal_translate -q -b 2 -b 1 s7_two.tif swapped.tif || fail "gdal_translate"
cdp-evaluate --json pred.tif swapped.tif >swapped.json || fail "cdp-evaluate, swapped"
"$PYTHON" - <<'EOF' || fail "the 2-target map"
import json
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
d = gdal.Open("pred.tif")
assert d.RasterCount == 2 and d.GetMetadataItem("CDP_TASK") == "regression", d.RasterCount
assert [d.GetRasterBand(i).GetDescription() for i in (1, 2)] == ["target 1", "target 2"]
assert all(d.GetRasterBand(i).DataType == gdal.GDT_Float32 for i in (1, 2))
p = d.ReadAsArray().astype(np.float64)
t = gdal.Open("s7_two.tif").ReadAsArray().astype(np.float64)
def scores(p, t):
    e = p - t
    return dict(count=e.size, rmse=np.sqrt((e ** 2).mean()), mae=np.abs(e).mean(), bias=e.mean(),
                r2=1 - (e ** 2).sum() / ((t - t.mean()) ** 2).sum())
want = [scores(p[i], t[i]) for i in range(2)]
e = json.load(open("eval.json"))
assert [x["band"] for x in e["targets"]] == [1, 2], e
for w, g in zip(want, e["targets"]):
    assert g["count"] == w["count"] and g["skipped"] == 0, (g, w)
    for k in ("rmse", "mae", "bias", "r2"):
        assert abs(g[k] - w[k]) <= 1e-6 * max(1, abs(w[k])), (k, g, w)
r2 = [w["r2"] for w in want]
assert min(r2) >= 0.85, "per-target R^2 %s < 0.85 on a new scene" % r2
# the top-level keys: every band's pixels pooled
err = (p - t).ravel()
sst = sum(((t[i] - t[i].mean()) ** 2).sum() for i in range(2))
assert e["count"] == p.size and abs(e["rmse"] - np.sqrt((err ** 2).mean())) < 1e-6, e
assert abs(e["r2"] - (1 - (err ** 2).sum() / sst)) < 1e-6, e
s = json.load(open("swapped.json"))
assert all(x["r2"] < 0 for x in s["targets"]), s["targets"]
print("new scene: R^2 of target 1 %.4f, target 2 %.4f (cdp-evaluate = NumPy); bands swapped: %s"
      % (r2[0], r2[1], [round(x["r2"], 1) for x in s["targets"]]))
EOF
cdp-evaluate pred.tif s7_two.tif >eval.txt || fail "cdp-evaluate, text"
grep -q "^band 2: 16384 counted, 0 skipped rmse [^ ]* mae [^ ]* bias [^ ]* r2 " eval.txt ||
	fail "the text report lacks band 2: $(cat eval.txt)"
expect_fail 1 "'pred.tif' has 2 bands, 'one7_value.tif' has 1: a regression map is scored band by band" \
	cdp-evaluate pred.tif one7_value.tif
echo ok
