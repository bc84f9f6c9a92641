#!/bin/sh
# tests/train/class_weights.sh: cdp-train --class-weights (train_weights.c).
#  - auto: the weights N / (K' n_k) over the training keys' labels, computed
#    here in Python from the records (scalar classes of chips packed by
#    --folders with an unbalanced class; label pixels of a segmentation pool
#    other than the ignore value, and without the model's ignore= label,
#    which gets weight 0), are the ones train.log states;
#  - they reach the loss: training with --class-weights auto gives the
#    step losses, bit for bit, of the cfg's class_weights= with the same
#    numbers, and others than no weights (classification and
#    segmentation); an explicit list does the same;
#  - refusals: a list of the wrong length, loss=bce, a malformed list.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
CLS="$CDP_SRCDIR/share/cdpool/models/classifier.cfg"

"$PYTHON" "$GEN" --scene-tiles "$T/chips" --count 30 --size 16 --seed 8
# three classes, the first twice as large: the folders a, b, c
mkdir -p "$T/F/a" "$T/F/b" "$T/F/c"
i=0
for f in "$T"/chips/*.tif; do
	d=$(echo a a b c | cut -d' ' -f$((i % 4 + 1)))
	cp "$f" "$T/F/$d/"
	i=$((i + 1))
done
cdp-lmdbpack -q --folders "$T/F" "$T/cls"
cdp-keyshuffle -q -s 1 --val 0.2 --stratify --val-out "$T/cls.val" -o "$T/cls.keys" "$T/cls"
"$PYTHON" "$GEN" "$T/r.tif" --size 128 --seed 3 --mask "$T/r_mask.tif"
cdp-tile -q --size 32 --label-suffix _mask "$T/r.tif" | cdp-lmdbpack -q "$T/seg"
cdp-keyshuffle -q -s 1 --val 0.25 --val-out "$T/seg.val" -o "$T/seg.keys" "$T/seg"

# weights.py POOL KEYS K [IGNORE]: the auto weights, %.9g (float32
# round-trips); the model's ignore= label counts for nothing
cat >"$T/weights.py" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from cdpool import Pool, read_keys
pool = Pool(sys.argv[1])
n = np.zeros(int(sys.argv[3]), np.int64)
for k in read_keys(sys.argv[2]):
    r = pool.record(k)
    if r.label is None:
        n[r.class_id] += 1
    else:
        lab = r.label[r.label != r.label_ignore]
        n += np.bincount(lab.ravel(), minlength=len(n))[:len(n)]
if len(sys.argv) > 5:
    n[int(sys.argv[5])] = 0
present = int((n > 0).sum())
w = [np.float32(n.sum() / (present * c)) if c else np.float32(0) for c in n]
print(",".join("%.9g" % x for x in w))
PYEOF
weights() { "$PYTHON" "$T/weights.py" "$1" "$2" "$3" "$CDP_SRCDIR/python" ${4:+"$4"}; }
# run NAME POOL MODEL [options]
run() {
	n=$1 p=$2 m=$3
	shift 3
	cdp-train --db "$T/$p" --keys "$T/$p.keys" --model "$m" --out "$T/$n" --batch 4 --steps 4 \
		--threads 1 --seed 5 --log-every 1 -q "$@" || fail "$n did not train"
}
# same A B: the runs' step losses agree (their checkpoints hold their cfg
# texts, which differ)
losses() { sed -n 's/^{"type":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$T/$1/metrics.jsonl"; }
same() {
	losses "$1" >"$T/$1.l"
	losses "$2" >"$T/$2.l"
	[ "$(wc -l <"$T/$1.l")" -eq 4 ] || fail "$1: $(wc -l <"$T/$1.l") step lines, want 4"
	cmp -s "$T/$1.l" "$T/$2.l"
}
# withw CFG OUT W: CFG with class_weights=W in [net] (--model's overrides
# split at commas, so a list cannot go there)
withw() { sed "/^\[net\]/a class_weights=$3" "$1" >"$2"; }

echo "== classification"
M="$CLS:width=4,blocks=1,classes=3"
want=$(weights "$T/cls" "$T/cls.keys" 3)
echo "auto weights: $want"
run c_auto cls "$M" --class-weights auto
got=$(sed -n 's/.*class weights (auto, inverse frequency over the training keys): //p' \
	"$T/c_auto/train.log")
"$PYTHON" -c "import sys; a, b = (list(map(float, s.split(','))) for s in sys.argv[1:]);
assert len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * y for x, y in zip(a, b)), (a, b)" \
	"$got" "$want" || fail "train.log says '$got', want '$want'"
# the unbalanced class gets the lower weight
"$PYTHON" -c "import sys; w = list(map(float, sys.argv[1].split(','))); assert w[0] < w[1] and w[0] < w[2], w" \
	"$want" || fail "weights $want do not favour the small classes"
withw "$CLS" "$T/cls_w.cfg" "$want"
run c_cfg cls "$T/cls_w.cfg:width=4,blocks=1,classes=3"
same c_auto c_cfg || fail "auto and class_weights=$want train differently"
run c_none cls "$M"
same c_auto c_none && fail "the weights changed nothing"
run c_list cls "$M" --class-weights "$want"
same c_auto c_list || fail "the list $want and auto train differently"
grep -q "class weights (--class-weights): " "$T/c_list/train.log" || fail "the list is not in train.log"

echo "== segmentation"
S="$CDP_SRCDIR/tests/train/small.cfg"
want=$(weights "$T/seg" "$T/seg.keys" 2)
echo "auto weights: $want"
run s_auto seg "$S" --class-weights auto
grep -q "class weights (auto" "$T/s_auto/train.log" || fail "no weights in train.log"
withw "$S" "$T/seg_w.cfg" "$want"
run s_cfg seg "$T/seg_w.cfg"
same s_auto s_cfg || fail "segmentation: auto and class_weights=$want train differently"
run s_none seg "$S"
same s_auto s_none && fail "segmentation: the weights changed nothing"

# ignore=1: the loss skips class 1, so auto neither counts it nor weighs it
want=$(weights "$T/seg" "$T/seg.keys" 2 1)
[ "$want" = 1,0 ] || fail "weights.py with ignore 1: $want"
run s_ign seg "$S:ignore=1" --class-weights auto
got=$(sed -n 's/.*class weights (auto, inverse frequency over the training keys): //p' \
	"$T/s_ign/train.log")
[ "$got" = "$want" ] || fail "ignore=1: train.log says '$got', want '$want'"

echo "== refusals"
expect_fail 1 "^cdp-train: --class-weights '1,2': want auto or 3 numbers >= 0 separated by commas, one per class of the model\$" \
	cdp-train --db "$T/cls" --keys "$T/cls.keys" --model "$M" --out "$T/x" --steps 1 -q \
	--threads 1 --class-weights 1,2
# malformed is a usage error before any pool is read (exit 2); a count
# that does not fit the model (above) is known only after the build (1)
expect_fail 2 "^cdp-train: --class-weights: '1,,2' is not auto" \
	cdp-train --db "$T/cls" --keys "$T/cls.keys" --model "$M" --out "$T/x" --steps 1 -q \
	--threads 1 --class-weights 1,,2
expect_fail 1 "^cdp-train: --class-weights: class weights need a term ce, not loss=bce\$" \
	cdp-train --db "$T/seg" --keys "$T/seg.keys" --model "$S:loss=bce,outputs=1" --out "$T/x" --steps 1 -q \
	--threads 1 --class-weights auto
echo ok
