#!/bin/sh
# tests/predict/multilabel.sh: multi-label chips end to end (issue 31).
#  - 160 generated 16x16 chips holding any of water, building and tree
#    (share/cdpool/examples/genmulti.py), packed with cdp-lmdbpack --multi-label, split 3:1, learnt
#    by classifier.cfg with loss=bce and classes=3 (one sigmoid per class) in
#    8 epochs to a validation micro F1 of at least 0.85 (stated budget:
#    a few seconds of training);
#  - the validation metrics do not depend on the batch or the ranks: loss,
#    micro and macro F1 and mAP of a batchnorm-free net at batch 8, batch 3
#    and 2 ranks x 3 agree to 1e-9 (AP needs every score: the ranks'
#    scores are gathered);
#  - --keep-best f1 keeps best.cdpt;
#  - --class-weights are per-class positive weights: the validation loss
#    with 3,0.5,2 is NumPy's mean of -(w y log p + (1 - y) log(1 - p))
#    over the predicted probabilities (1e-4), and auto gives each class
#    (N - n_k) / n_k over the training keys; so are the model's
#    class_weights=3,0.5,2 ([net], cdp-model(5)), which --class-weights
#    replaces (class_weights=9,9,9 under --class-weights 3,0.5,2 gives the
#    same loss), and a list of another length is refused;
#  - cdp-predict writes path,classes,p_NAME... with the classes at or over
#    --threshold joined by '|' (a name holding a quote is CSV-quoted), to a
#    file or to standard output (-o -), and
#    cdp-evaluate's text and --json scores equal an independent NumPy
#    computation on the same CSV and list (precision, recall, F1, AP as
#    scikit-learn's average_precision_score, micro and macro F1, mAP), to
#    1e-6; a reference CSV scores the same;
#  - python/cdpool's PyTorch twin (Deployed) of the checkpoint gives the
#    CSV's sigmoid probabilities (2e-6; skipped without torch);
#  - refusals in one line: loss=ce on a multi-label pool, a multi-label
#    head on a single-label pool, too many outputs, --keep-best miou,
#    CDP_TRAIN_DATA=device (multi-hot labels take the host data path),
#    a multi-label model on a scene, a folder as a multi-label reference.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
export CDP_DIST_TIMEOUT=60
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
MODEL="$CDP_SRCDIR/share/cdpool/models/classifier.cfg"
ML="$MODEL:width=8,blocks=2,loss=bce,classes=3,lr=0.05"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genmulti.py" "$T/chips" --count 160 --seed 7
# the building class named bui"lding: a name a CSV must quote
sed 's/building/bui"lding/g' "$T/chips/list.txt" >"$T/chips/q.txt"
cdp-lmdbpack -q --multi-label --classes 'water,bui"lding,tree' --list "$T/chips/q.txt" "$T/pool"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$T/val.keys" -o "$T/train.keys" "$T/pool"
C="-q --db $T/pool --keys $T/train.keys --threads 1"

echo "== trained to a micro F1 of 0.85"
cdp-train $C --val-keys "$T/val.keys" --out "$T/run" --batch 8 --epochs 8 --keep-best f1 \
	--model "$ML" || fail "cdp-train"
last=$(grep '"type":"val"' "$T/run/metrics.jsonl" | tail -1)
f1=$(echo "$last" | sed 's/.*"micro_f1":\([^,]*\),.*/\1/')
awk -v f="$f1" 'BEGIN { exit !(f >= 0.85) }' || fail "micro F1 $f1 < 0.85: $last"
for k in micro_precision micro_recall macro_f1 map '"precision":\[' '"recall":\[' '"ap":\['; do
	echo "$last" | grep -q "$k" || fail "no $k in $last"
done
[ -f "$T/run/best.cdpt" ] || fail "--keep-best f1 kept no best.cdpt"
grep -q "best micro_f1 so far" "$T/run/train.log" || fail "$(tail -3 "$T/run/train.log")"
echo "micro F1 $f1"

sed -n 's/^\(c_[0-9]*\)$/\1.tif/p' "$T/val.keys" >"$T/vnames"
grep -F -f "$T/vnames" "$T/chips/q.txt" >"$T/chips/val.txt"

echo "== validation metrics at batch 8, 3 and 2 ranks x 3"
MP=
if [ -n "${MPIRUN:-}" ] && command -v "$MPIRUN" >/dev/null 2>&1; then
	MP="$MPIRUN --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || MP="$MPIRUN --allow-run-as-root --oversubscribe -np 2"
fi
# without batchnorm, which would normalise with each batch of the one step
cat >"$T/nobn.cfg" <<'CFGEOF'
[net]
channels=3
in_h=16
in_w=16
classes=3
loss=bce
[conv]
filters=6
activation=relu
[gap]
[dense]
output=3
CFGEOF
# trained a little, so that its scores decide something
cdp-train $C --model "$T/nobn.cfg" --out "$T/nobn" --batch 8 --steps 10 --lr 0.2 --seed 3 ||
	fail "the batchnorm-free net"
V="$C --model $T/nobn.cfg --init $T/nobn/checkpoint.cdpt --val-keys $T/val.keys --steps 1 --lr 0"
cdp-train $V --batch 8 --out "$T/v8" || fail "batch 8"
cdp-train $V --batch 3 --out "$T/v3" || fail "batch 3"
runs="v3"
if [ -n "$MP" ]; then
	$MP cdp-train $V --batch 3 --out "$T/v2x3" || fail "2 ranks"
	runs="v3 v2x3"
fi
"$PYTHON" - "$T" $runs <<'PYEOF' || fail "validation depends on the batch or the ranks"
import json, sys
def val(run):
    return [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (sys.argv[1], run))
            if '"type":"val"' in l][-1]
a = val("v8")
assert 0 < a["micro_f1"] < 1 and 0 < a["map"] < 1, a
for r in sys.argv[2:]:
    b = val(r)
    for k in ("loss", "micro_f1", "macro_f1", "map"):
        x, y = a[k], b[k]
        assert abs(x - y) <= 1e-9 * max(abs(x), 1e-12), (r, k, x, y)
    assert a["ap"] == b["ap"] or all(abs(x - y) < 1e-12 for x, y in zip(a["ap"], b["ap"])), r
print("loss %.6f micro_f1 %.4f map %.4f at batch 8 and %s" % (a["loss"], a["micro_f1"], a["map"],
      ", ".join(sys.argv[2:])))
PYEOF

# truth.py: the class names and every validation chip's multi-hot truth,
# by its real path, for the NumPy checks below
cat >"$T/truth.py" <<'PYEOF'
import os, sys
T = os.path.dirname(os.path.abspath(__file__))
names = ["water", 'bui"lding', "tree"]
truth = {}
for line in open(T + "/chips/val.txt"):
    img, s = line.split()
    truth[os.path.realpath(os.path.join(T, "chips", img))] = [int(n in s.split(",")) for n in names]
PYEOF

echo "== --class-weights: per-class positive weights"
cdp-train $V --batch 8 --class-weights 3,0.5,2 --out "$T/w" || fail "--class-weights 3,0.5,2"
cdp-train $V --batch 8 --class-weights auto --out "$T/wa" || fail "--class-weights auto"
# the same weights from the model's [net] class_weights=, and replaced
sed 's/^loss=bce$/loss=bce\nclass_weights=3,0.5,2/' "$T/nobn.cfg" >"$T/cw.cfg"
sed 's/^loss=bce$/loss=bce\nclass_weights=9,9,9/' "$T/nobn.cfg" >"$T/cw9.cfg"
sed 's/^loss=bce$/loss=bce\nclass_weights=1,2/' "$T/nobn.cfg" >"$T/cw2.cfg"
grep -q "class_weights=3,0.5,2" "$T/cw.cfg" || fail "cw.cfg: $(cat "$T/cw.cfg")"
W="$C --init $T/nobn/checkpoint.cdpt --val-keys $T/val.keys --steps 1 --lr 0 --batch 8"
cdp-train $W --model "$T/cw.cfg" --out "$T/wc" || fail "class_weights=3,0.5,2"
cdp-train $W --model "$T/cw9.cfg" --class-weights 3,0.5,2 --out "$T/wo" ||
	fail "class_weights=9,9,9 and --class-weights 3,0.5,2"
expect_fail 1 "cw2.cfg:7: \[net\]: 2 class weights for the 3 labels of a multi-label head" \
	cdp-train $W --model "$T/cw2.cfg" --out "$T/wbad"
cdp-predict -q --threads 1 "$T/w" "$T/chips/val.txt" -o "$T/w.csv" || fail "cdp-predict of w"
grep "positive weights (auto" "$T/wa/train.log" | sed 's/.*: //' >"$T/wa.txt"
"$PYTHON" - "$T" <<'PYEOF' || fail "positive weights differ from BCEWithLogitsLoss(pos_weight)"
import csv, json, os, sys
import numpy as np
from cdpool import Pool
T = sys.argv[1]
sys.path.insert(0, T)
from truth import names, truth
rows = list(csv.reader(open(T + "/w.csv", newline="")))[1:]
Y = np.array([truth[os.path.realpath(r[0])] for r in rows], float)
P = np.array([[float(v) for v in r[2:]] for r in rows])
w = np.array([3, 0.5, 2])
want = np.mean(-(w * Y * np.log(P) + (1 - Y) * np.log(1 - P)))
for run in ("w", "wc", "wo"):
    got = [json.loads(l) for l in open(T + "/" + run + "/metrics.jsonl")
           if '"type":"val"' in l][-1]["loss"]
    assert abs(got - want) < 1e-4, (run, got, want)
p = Pool(T + "/pool")
keys = [l.strip() for l in open(T + "/train.keys") if l.strip() and not l.startswith("#")]
n = np.array([p[k][1] for k in keys]).sum(0)
auto = (len(keys) - n) / n
got = np.array([float(v) for v in open(T + "/wa.txt").read().split(",")])
assert np.allclose(got, auto, rtol=1e-5), (got, auto)
print("weighted validation loss (--class-weights, class_weights=) as NumPy computes it, %.6f; "
      "auto weights %s" % (want,
      np.round(auto, 4)))
PYEOF

echo "== cdp-predict's CSV and cdp-evaluate against NumPy"
cdp-predict -q --threads 1 "$T/run" "$T/chips/val.txt" -o "$T/p.csv" || fail "cdp-predict"
cdp-predict -q --threads 1 --threshold 0.9 "$T/run" "$T/chips/val.txt" -o "$T/p9.csv" ||
	fail "cdp-predict --threshold 0.9"
head -1 "$T/p.csv" | grep -qx 'path,classes,p_water,"p_bui""lding",p_tree' ||
	fail "header: $(head -1 "$T/p.csv")"
# a streamed CSV: - is standard output (once refused as not a CSV)
cdp-predict -q --threads 1 "$T/run" "$T/chips/val.txt" -o - >"$T/p-.csv" || fail "cdp-predict -o -"
cmp -s "$T/p.csv" "$T/p-.csv" || fail "-o - differs from -o p.csv: $(head -2 "$T/p-.csv")"
cdp-evaluate --json "$T/p.csv" "$T/chips/val.txt" >"$T/e.json" || fail "cdp-evaluate --json"
cdp-evaluate "$T/p.csv" "$T/chips/val.txt" >"$T/e.txt" || fail "cdp-evaluate"
cdp-evaluate --json "$T/p9.csv" "$T/chips/val.txt" >"$T/e9.json" || fail "cdp-evaluate 0.9"
# the same chips, their truth from a CSV: the prediction against itself
cdp-evaluate --json "$T/p.csv" "$T/p.csv" >"$T/self.json" || fail "a reference CSV"
grep -q '"micro_f1":1.000000,"macro_f1":1.000000' "$T/self.json" || fail "$(cat "$T/self.json")"
"$PYTHON" - "$T" <<'PYEOF' || fail "cdp-evaluate differs from NumPy"
import csv, json, os, sys
import numpy as np
T = sys.argv[1]
sys.path.insert(0, T)
from truth import names, truth

def ap(y, s):
    # scikit-learn's average_precision_score: sum over the distinct scores,
    # highest first, of (R_n - R_n-1) P_n
    r0, a = 0.0, 0.0
    for t in sorted(set(s.tolist()), reverse=True):
        sel = s >= t
        tp = float((y & sel).sum())
        p, r = tp / sel.sum(), tp / y.sum()
        a += (r - r0) * p
        r0 = r
    return a

def check(path, got, thr):
    rows = list(csv.reader(open(path, newline="")))
    assert rows[0] == ["path", "classes"] + ["p_" + n for n in names], rows[0]
    Y, P, S = [], [], []
    for r in rows[1:]:
        p = np.array([float(v) for v in r[2:]])
        want = "|".join(n for n, v in zip(names, p) if v >= thr)
        assert r[1] == want, (r, want)
        Y.append(truth[os.path.realpath(r[0])])
        P.append([int(n in r[1].split("|")) for n in names] if r[1] else [0] * 3)
        S.append(p)
    Y, P, S = np.array(Y), np.array(P), np.array(S)
    tp, fp, fn = (Y & P).sum(0), ((1 - Y) & P).sum(0), (Y & (1 - P)).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec, rec, f1 = tp / (tp + fp), tp / (tp + fn), 2 * tp / (2 * tp + fp + fn)
    aps = np.array([ap(Y[:, c], S[:, c]) if Y[:, c].any() else np.nan for c in range(3)])
    micro = 2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum())
    want = {"micro_precision": tp.sum() / (tp.sum() + fp.sum()),
            "micro_recall": tp.sum() / (tp.sum() + fn.sum()), "micro_f1": micro,
            "macro_f1": np.nanmean(f1), "map": np.nanmean(aps)}
    assert got["chips"] == len(Y) and got["names"] == names, got
    for k, v in want.items():
        assert abs(got[k] - v) < 1e-6, (path, k, got[k], v)
    for c, pc in enumerate(got["per_class"]):
        for k, v in (("precision", prec[c]), ("recall", rec[c]), ("f1", f1[c]), ("ap", aps[c])):
            assert (pc[k] is None and np.isnan(v)) or abs(pc[k] - v) < 1e-6, (path, c, k, pc[k], v)
        assert pc["support"] == Y[:, c].sum(), pc
    return want

w = check(T + "/p.csv", json.load(open(T + "/e.json")), 0.5)
check(T + "/p9.csv", json.load(open(T + "/e9.json")), 0.9)
text = open(T + "/e.txt").read()
assert "micro f1 %.4f" % w["micro_f1"] in text and "map %.4f" % w["map"] in text, text
print("%d chips: micro F1 %.4f, macro F1 %.4f, mAP %.4f as NumPy computes them" % (
    len(truth), w["micro_f1"], w["macro_f1"], w["map"]))
PYEOF

echo "== the PyTorch twin gives cdp-predict's probabilities"
if "$PYTHON" -c "import torch" 2>/dev/null; then
	"$PYTHON" - "$T" <<'PYEOF' || fail "python/cdpool's Deployed differs from cdp-predict"
import csv, sys
import numpy as np
import torch
from osgeo import gdal
from cdpool import load_checkpoint
from cdpool.torch_model import Deployed
T = sys.argv[1]
net = Deployed(load_checkpoint(T + "/run/checkpoint.cdpt")).eval()
rows = list(csv.reader(open(T + "/p.csv", newline="")))[1:]
x = np.stack([gdal.Open(r[0]).ReadAsArray() for r in rows]).astype(np.float32)
with torch.no_grad():
    p = net(torch.from_numpy(x)).numpy().reshape(len(rows), -1)
want = np.array([[float(v) for v in r[2:]] for r in rows])
assert p.shape == want.shape and np.abs(p - want).max() < 2e-6, np.abs(p - want).max()
print("Deployed: %d chips, the CSV's probabilities to %.1e" % (len(rows), np.abs(p - want).max()))
PYEOF
fi

echo "== refusals"
expect_fail 1 "is a multi-label pool (3 classes): train it with \[net\] loss=bce and classes=3" \
	cdp-train $C --out "$T/r1" --batch 8 --steps 1 --model "$MODEL:width=4,blocks=1,classes=3"
expect_fail 1 "has 4 outputs (classes=4), the multi-label pool .* has 3 classes" \
	cdp-train $C --out "$T/r2" --batch 8 --steps 1 --model "$MODEL:width=4,blocks=1,loss=bce,classes=4"
expect_fail 1 "keep-best miou: a multi-label run keeps f1, map or loss" \
	cdp-train $C --out "$T/r3" --batch 8 --steps 1 --val-keys "$T/val.keys" --keep-best miou \
	--model "$ML"
mkdir -p "$T/F/a" "$T/F/b"
cp "$T/chips/c_0000.tif" "$T/F/a/"
cp "$T/chips/c_0001.tif" "$T/F/b/"
cdp-lmdbpack -q --folders "$T/F" "$T/single"
cdp-keyshuffle -q -o "$T/s.keys" "$T/single"
expect_fail 1 "has a multi-label head (loss=bce on 3 outputs, classes=3): it trains on a multi-label pool" \
	cdp-train -q --db "$T/single" --keys "$T/s.keys" --out "$T/r4" --batch 2 --steps 1 \
	--threads 1 --model "$ML"
expect_fail 1 "a multi-label pool, which takes the host path" \
	env CDP_TRAIN_DATA=device cdp-train $C --out "$T/r5" --batch 8 --steps 1 --model "$ML"
expect_fail 1 "is a multi-label classifier: it predicts chips into a CSV" \
	cdp-predict -q "$T/run" "$T/chips/c_0000.tif" -o "$T/x.tif"
expect_fail 1 "a chip in a class folder has one class" cdp-evaluate "$T/p.csv" "$T/F"
exit 0
