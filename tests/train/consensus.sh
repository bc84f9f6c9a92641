#!/bin/sh
# The consensus modes' arithmetic, checked number by number: cdp-train at
# 2 ranks with --sync average:2, admm:2:0.5 and admm:2:1000 for 5 steps
# (two averaging rounds and one local step after them) and admm:100:0.5
# (no round) on a one-layer classifier (a dense layer on 8x8 scene tiles,
# plain SGD), against consensus.py's NumPy replay of the same steps on the
# batches each rank logged (CDP_TRAIN_LOG_KEYS): the checkpoint's model
# (for admm the consensus estimate mean(w + u) of the last step, not z of
# the last round: the model after 5 steps of admm:100 is no longer the
# initial one), z, and every rank's own parameters and ADMM dual within
# 1e-5. The replay starts from the parameters of a run at --lr 0. A replay
# without ADMM's dual update must not match (the check can fail). Also:
#  - admm:2:1000 at lr 0.2 (lr rho 200, where the penalty's gradient step
#    diverged) stays finite, its ranks' parameters near z, and its
#    validation loss falls;
#  - admm:100:0.5 validated every step evaluates the step's consensus
#    estimate: five different validation losses (z alone gave the initial
#    model's five times); resumed by one process (the ranks' own state
#    dropped) it starts from that estimate, not from z (its LIVE);
#  - admm:4:1e-9 (rho -> 0) equals average:4 (local steps, one average)
#    within 1e-6;
#  - at one rank admm:1:0.5 and admm:3:0.5 train as allreduce, bit for bit
#    (the rank's own parameters and the model);
#  - train.log's start line names the --sync mode.
# Needs MPI (skipped without) and NumPy in $PYTHON.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" >/dev/null 2>&1; then
	echo "SKIP: no MPIRUN"
	exit 77
fi
MP="$MPIRUN --oversubscribe -np 2"
[ "$(id -u)" -ne 0 ] || MP="$MPIRUN --allow-run-as-root --oversubscribe -np 2"
export CDP_DIST_TIMEOUT=60
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH

"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" --scene-tiles "$T/sc" --count 20 \
	--size 8 --seed 5
# chip i of the list becomes sc_i_0.tif, a key every tool parses
"$PYTHON" -c 'import os, sys
d = sys.argv[1]
with open(d + "/keys.txt", "w") as out:
    for i, line in enumerate(open(d + "/list.txt")):
        f, c = line.split()
        os.rename(os.path.join(d, f), "%s/sc_%d_0.tif" % (d, i))
        out.write("sc_%d_0.tif %s\n" % (i, c))' "$T/sc"
cdp-lmdbpack -q --classes residential,road,green,lake,land --list "$T/sc/keys.txt" "$T/pool"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
cat >"$T/tiny.cfg" <<'CFG'
[net]
channels=3
in_h=8
in_w=8
classes=5
loss=ce
optimizer=sgd
momentum=0
[dense]
output=5
CFG
R="--db $T/pool --keys $T/keys --model $T/tiny.cfg --threads 1 -q --schedule constant --warmup 0"
cdp-train $R --out "$T/init" --batch 8 --steps 1 --lr 0 || fail "the run at --lr 0 failed"
for sync in average:2 admm:2:0.5 admm:2:1000 admm:100:0.5; do
	CDP_TRAIN_LOG_KEYS="$T/k.$sync" $MP cdp-train $R --out "$T/$sync" --batch 4 --steps 5 \
		--lr 0.2 --sync "$sync" --val-keys "$T/keys" --val-every 1 ||
		fail "$sync: training failed"
	grep -q "start at step 0 of 5 (.*), 2 ranks, global batch 8, --sync $sync\$" \
		"$T/$sync/train.log" ||
		fail "$sync: train.log does not name it: $(grep 'start at' "$T/$sync/train.log")"
	"$PYTHON" "$CDP_SRCDIR/tests/train/consensus.py" "$T/pool" "$T/init/checkpoint.cdpt" \
		"$T/$sync/checkpoint.cdpt" "$T/k.$sync" 0.2 || fail "$sync: cdp-train differs from the replay"
done
# the validation losses of steps 1 to 5, one a line
vals() { sed -n 's/^{"type":"val","step":[0-9]*,.*"loss":\([^,}]*\).*/\1/p' "$1/metrics.jsonl"; }
[ "$(vals "$T/admm:100:0.5" | sort -u | wc -l)" -eq 5 ] ||
	fail "admm:100:0.5 validated a stale model: $(vals "$T/admm:100:0.5" | tr '\n' ' ')"
# one step at --lr 0 keeps the model where the resume started it
cp -r "$T/admm:100:0.5" "$T/fallback"
cdp-train $R --out "$T/fallback" --batch 8 --steps 6 --lr 0 --resume 2>"$T/err" ||
	fail "admm:100:0.5 resumed by one process: $(cat "$T/err")"
"$PYTHON" - "$T/admm:100:0.5/checkpoint.cdpt" "$T/fallback/checkpoint.cdpt" <<'PY' ||
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
a, b = (load_checkpoint(p).param_block() for p in sys.argv[1:])
sys.exit(0 if np.array_equal(a, b) else 1)
PY
	fail "admm:100:0.5 resumed by one process did not start from its consensus estimate"
"$PYTHON" - "$T/admm:2:1000/checkpoint.cdpt" "$(vals "$T/admm:2:1000" | head -1)" \
	"$(vals "$T/admm:2:1000" | tail -1)" <<'PY' || fail "admm:2:1000 did not converge"
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
ck, first, last = load_checkpoint(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
P = ck.param_block().size
z = ck.live.astype(np.float64)
far = max(float(np.max(np.abs(w[:P] - z))) for w in ck.ranks["data"]) / float(np.max(np.abs(z)))
print("admm:2:1000: validation loss %.4g -> %.4g, ranks' w within %.3g of z" % (first, last, far))
sys.exit(0 if np.isfinite(last) and last < first and far < 0.01 else 1)
PY
for sync in average:4 admm:4:1e-9; do
	$MP cdp-train $R --out "$T/$sync" --batch 4 --steps 4 --lr 0.2 --sync "$sync" ||
		fail "$sync: training failed"
done
"$PYTHON" - "$T/average:4/checkpoint.cdpt" "$T/admm:4:1e-9/checkpoint.cdpt" <<'PY' ||
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
a, b = (load_checkpoint(p).param_block().astype(np.float64) for p in sys.argv[1:])
sys.exit(0 if np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(a)) else 1)
PY
	fail "admm:4:1e-9 differs from average:4"
for sync in allreduce admm:1:0.5 admm:3:0.5; do
	cdp-train $R --out "$T/one.$sync" --batch 4 --steps 5 --lr 0.2 --sync "$sync" ||
		fail "$sync at one rank: training failed"
done
for sync in admm:1:0.5 admm:3:0.5; do
	"$PYTHON" - "$T/one.allreduce/checkpoint.cdpt" "$T/one.$sync/checkpoint.cdpt" <<'PY' ||
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
a, b = (load_checkpoint(p) for p in sys.argv[1:])
w = b.ranks["data"][0][:a.param_block().size]
sys.exit(0 if np.array_equal(a.param_block(), w) and
         np.array_equal(a.param_block(), b.param_block()) else 1)
PY
		fail "$sync at one rank differs from allreduce"
done
if "$PYTHON" "$CDP_SRCDIR/tests/train/consensus.py" "$T/pool" "$T/init/checkpoint.cdpt" \
	"$T/admm:2:0.5/checkpoint.cdpt" "$T/k.admm:2:0.5" 0.2 --drop-dual >"$T/neg"; then
	fail "ADMM without its dual update matched cdp-train"
fi
grep -q 'rank 0 u .*FAIL' "$T/neg" || fail "the negative control failed for another reason: $(cat "$T/neg")"
echo "negative control: ADMM without the dual update does not match"
exit 0
