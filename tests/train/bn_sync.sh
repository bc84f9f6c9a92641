#!/bin/sh
# tests/train/bn_sync.sh: synchronized batch normalization ([net] bn_sync=1,
# engine/layers/bn.c) on the road pool of train_common.sh with the U-Net
# (6 bn layers):
#  - 2 ranks of batch 2 with bn_sync=1 give, step by step, the losses of one
#    process with batch 4 (relative 1e-5; the sums only add in another
#    order), and its weights and running statistics (1e-4 of the largest);
#  - without bn_sync the 2 ranks' losses and weights are another run's
#    (each rank normalizes its own 2 samples): some loss differs by more
#    than 1e-3 and the weights by more than 1e-3;
#  - bn_sync=1 with --sync average:1 is refused.
. "$CDP_SRCDIR/tests/train/train_common.sh"
[ -n "$MP" ] || { echo "SKIP: no MPIRUN" >&2; exit 77; }
R="--db $T/pool --keys $T/train.keys --threads 1 -q --seed 3 --log-every 1 --steps 6"
R="$R --schedule constant --lr 0.05"
cdp-train $R --model "$UNET,bn_sync=1" --batch 4 --out "$T/s1" || fail "one process, bn_sync"
$MP cdp-train $R --model "$UNET,bn_sync=1" --batch 2 --out "$T/s2" || fail "2 ranks, bn_sync"
$MP cdp-train $R --model "$UNET" --batch 2 --out "$T/n2" || fail "2 ranks without bn_sync"
for r in s1 s2 n2; do losses "$T/$r/metrics.jsonl" >"$T/$r.l"; done
[ "$(wc -l <"$T/s1.l")" -eq 6 ] || fail "$(wc -l <"$T/s1.l") step lines, want 6"
losses_close "$T/s1.l" "$T/s2.l" 1e-5 || fail "2 ranks with bn_sync: other losses than batch 4"
losses_close "$T/s1.l" "$T/n2.l" 1e-3 >/dev/null && fail "2 ranks without bn_sync: the losses of batch 4"
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - "$T/s1" "$T/s2" "$T/n2" <<'PYEOF' || fail "weights"
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
one, sync, plain = (load_checkpoint(d + "/checkpoint.cdpt") for d in sys.argv[1:])
def diff(a, b):
    pa, pb = a.param_block(), b.param_block()
    ba = np.concatenate([t.ravel() for t in a.buffers.values()])
    bb = np.concatenate([t.ravel() for t in b.buffers.values()])
    return (np.abs(pa - pb).max() / np.abs(pa).max(), np.abs(ba - bb).max() / np.abs(ba).max())
w, b = diff(one, sync)
assert w <= 1e-4 and b <= 1e-4, "bn_sync at 2 ranks: weights %.3g, buffers %.3g from batch 4" % (w, b)
wp, bp = diff(one, plain)
assert wp > 1e-3, "without bn_sync: weights only %.3g from batch 4" % wp
print("weights %.2g and running statistics %.2g from batch 4 with bn_sync; %.2g and %.2g without"
      % (w, b, wp, bp))
PYEOF
echo "2 ranks x 2 with bn_sync=1: the losses of batch 4 (1e-5), not without"
cdp-train $R --model "$UNET,bn_sync=1" --batch 2 --sync average:1 --out "$T/avg" 2>"$T/err" &&
	fail "bn_sync with --sync average:1 ran"
grep -q "bn_sync=1 needs --sync allreduce" "$T/err" || fail "--sync average: $(cat "$T/err")"
echo "refused: $(cat "$T/err")"
