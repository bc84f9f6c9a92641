#!/bin/sh
# tests/train/emastop.sh: cdp-train's own controls of a run (issue 30):
#  - --patience N --min-delta D stops the run after N validations without
#    an improvement of the --keep-best metric by more than D: the run ends
#    at the step a Python reading of metrics.jsonl's validations predicts,
#    exits 0, writes its checkpoint there and says why in train.log,
#    metrics.jsonl and one line on stderr (even with -q); a run resumed
#    before that step stops at the same one, also one chunked with --steps
#    off the --val-every grid (its end-of-chunk validations count for
#    neither --patience nor --keep-best: the same stop, val lines and
#    best.cdpt);
#  - the closing "done:" line on stderr follows a last validation off an
#    epoch's end (--val-every, a --patience stop there) too;
#  - the usage errors of --patience and --min-delta;
#  - [net] ema=D: checkpoints hold the moving average of the weights in PARM
#    and the trained ones in LIVE; at --lr 0 the average is exactly the
#    weights; a run taken one step at a time through --resume has, at each
#    step, the average NumPy recomputes from the step before's average and
#    this step's trained weights (float32, one rounding), and ends bit for
#    bit as the uninterrupted run; validation evaluates the average (a run
#    started from the average at --lr 0 validates to the same loss);
#  - at 2 ranks every rank keeps the same average: the run's validation,
#    which each rank computes on its share with its own average, equals
#    one process's of the checkpointed average (relative 1e-9), and the run
#    resumed at step 2 ends bit for bit as the uninterrupted one (skipped
#    without $MPIRUN).
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --val-keys $T/val.keys --threads 1 -q --model $SMALL --batch 4"
# step STEP FILE: the step a checkpoint records (META, cdp-checkpoint(5))
ckstep() { "$PYTHON" -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(), 56)[0])" "$1"; }
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
PY="$CDP_SRCDIR/tests/train/emastop.py"
# predict FILE PATIENCE DELTA: the step the run stops at (emastop.py)
predict() { "$PYTHON" "$PY" predict "$@"; }

echo "== --patience stops the run"
P="--lr 0.5 --val-every 1 --keep-best loss --patience 3 --min-delta 0.002"
cdp-train $C $P --out "$T/stop" --steps 40 2>"$T/perr" || fail "--patience: the run failed"
at=$(predict "$T/stop/metrics.jsonl" 3 0.002)
grep -q "^cdp-train: stopped at step $at: val loss did not improve by more than 0.002 in 3 validations (best [0-9.]* at step [0-9]*)\$" "$T/perr" ||
	fail "--patience: stderr does not say why the run stopped: $(cat "$T/perr")"
[ "$at" != none ] || fail "the validations of the run never trigger --patience 3: the test wants them to"
last=$(sed -n 's/^{"type":"val","step":\([0-9]*\),.*/\1/p' "$T/stop/metrics.jsonl" | tail -1)
[ "$last" = "$at" ] || fail "the run validated up to step $last, Python predicts the stop after step $at"
[ "$at" -lt 40 ] || fail "the run did not stop early"
[ "$(ckstep "$T/stop/checkpoint.cdpt")" = "$at" ] || fail "checkpoint.cdpt is not of step $at"
grep -q "^{\"type\":\"stop\",\"step\":$at,\"reason\":\"patience\",\"metric\":\"loss\"" "$T/stop/metrics.jsonl" ||
	fail "metrics.jsonl has no stop line at step $at"
grep -q "stopping early at step $at: loss has not improved by more than 0.002 for 3 validations" \
	"$T/stop/train.log" || fail "train.log does not say why the run stopped"
grep -q "done at step $at (stopped early" "$T/stop/train.log" || fail "train.log: no done line"
echo "stopped at step $at of 40, as predicted: $(cat "$T/perr")"

echo "== the closing summary after a --val-every validation off an epoch's end"
cdp-train $(echo "$C" | sed 's/ -q / /') --out "$T/ve" --steps 9 --val-every 3 2>"$T/err" ||
	fail "--val-every 3: the run failed"
grep -q "^cdp-train: done: epoch 2 (3 of 6 steps) step 9/9 loss [0-9.]*, val loss " "$T/err" ||
	fail "--val-every 3: no closing summary of the step-9 validation: $(cat "$T/err")"

echo "== --patience across a resume"
half=$((at - 2))
cdp-train $C $P --out "$T/res" --steps "$half" || fail "the short run failed"
cdp-train $C $P --out "$T/res" --steps 40 --resume || fail "the resumed run failed"
[ "$(ckstep "$T/res/checkpoint.cdpt")" = "$at" ] ||
	fail "resumed at step $half, the run stopped at step $(ckstep "$T/res/checkpoint.cdpt"), not $at"
# the same model and optimizer state (the loss sums differ: the short run
# wrote a step line at its last step, which the long one did not)
"$PYTHON" "$PY" same "$T/res/checkpoint.cdpt" "$T/stop/checkpoint.cdpt" ||
	fail "the resumed run's checkpoint differs"
echo "resumed at step $half, stopped at step $at too"

echo "== --patience and --keep-best over a run chunked with --steps off the --val-every grid"
# each chunk ends at an odd step, between validations: its validation
# there is logged but counts for neither, and the next chunk drops its
# line, so the chunked run stops where the uninterrupted one does with
# the same best.cdpt and val lines (before: chunk 1's end-of-run
# validation at step 5 counted, and the run stopped 2 validations later)
P2="--lr 0.5 --val-every 2 --keep-best loss --patience 3 --min-delta 0.001"
cdp-train $C $P2 --out "$T/g1" --steps 40 2>/dev/null || fail "the run of --val-every 2 failed"
at2=$(ckstep "$T/g1/checkpoint.cdpt")
[ "$at2" -lt 40 ] || fail "--val-every 2: --patience 3 never stops the run: the test wants it to"
cdp-train $C $P2 --out "$T/g2" --steps 5 || fail "chunk 1 (--steps 5) failed"
grep -q '"type":"val","step":5,' "$T/g2/metrics.jsonl" || fail "chunk 1 did not validate at its last step"
s=5
while [ "$(ckstep "$T/g2/checkpoint.cdpt")" = "$s" ] && [ "$s" -lt 40 ]; do
	s=$((s + 4))
	cdp-train $C $P2 --out "$T/g2" --steps "$s" --resume 2>/dev/null || fail "the chunk to step $s failed"
done
[ "$(ckstep "$T/g2/checkpoint.cdpt")" = "$at2" ] ||
	fail "chunked by --steps, the run stopped at step $(ckstep "$T/g2/checkpoint.cdpt"), not $at2"
vals() { sed -n 's/^{"type":"val","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
vals "$T/g1/metrics.jsonl" >"$T/v1"; vals "$T/g2/metrics.jsonl" >"$T/v2"
cmp -s "$T/v1" "$T/v2" || fail "chunked: the val lines differ: $(diff "$T/v1" "$T/v2" | head -4)"
grep -q '"type":"stop","step":'"$at2"',' "$T/g2/metrics.jsonl" || fail "chunked: no stop line at step $at2"
"$PYTHON" "$PY" same "$T/g1/best.cdpt" "$T/g2/best.cdpt" || fail "chunked: best.cdpt differs"
echo "chunked at steps 5, 9, 13, ...: stopped at step $at2 with the same val lines and best.cdpt"

echo "== ema: the average at --lr 0 is the weights"
E="--lr 0.5 --val-every 1"
cdp-train $C --model "$SMALL:ema=0.9" --lr 0 --out "$T/e0" --steps 3 || fail "ema at --lr 0 failed"
"$PYTHON" "$PY" ema_equal "$T/e0/checkpoint.cdpt" || fail "at --lr 0 the average is not the weights"
grep -q "ema 0.9: validation and checkpoints use the moving average" "$T/e0/train.log" ||
	fail "train.log does not name the ema"

echo "== ema: one step at a time, recomputed"
cdp-train $C --model "$SMALL:ema=0.9" $E --out "$T/ema1" --steps 3 || fail "the ema run failed"
cdp-train $C --model "$SMALL:ema=0.9" $E --out "$T/emas" --steps 1 || fail "ema: step 1 failed"
cp "$T/emas/checkpoint.cdpt" "$T/ema.1"
for k in 2 3; do
	cdp-train $C --model "$SMALL:ema=0.9" $E --out "$T/emas" --steps $k --resume ||
		fail "ema: the resume to step $k failed"
	cp "$T/emas/checkpoint.cdpt" "$T/ema.$k"
	"$PYTHON" "$PY" ema_step "$T/ema.$((k - 1))" "$T/ema.$k" 0.9 ||
		fail "the average at step $k is not NumPy's"
done
"$PYTHON" "$PY" same "$T/ema.3" "$T/ema1/checkpoint.cdpt" ||
	fail "resumed step by step, the ema run's checkpoint differs from the uninterrupted one's"
echo "the average follows NumPy's recurrence, resumed bit for bit"

echo "== ema: validation evaluates the average"
cdp-train $C --init "$T/ema.3" --lr 0 --val-every 1 --out "$T/avg" --steps 1 ||
	fail "the run from the average failed"
vloss() { sed -n 's/^{"type":"val","step":'"$2"',.*"loss":\([^,]*\),.*/\1/p' "$1"; }
a=$(vloss "$T/ema1/metrics.jsonl" 3) b=$(vloss "$T/avg/metrics.jsonl" 1)
[ -n "$a" ] && [ "$a" = "$b" ] ||
	fail "the ema run validated to $a at step 3, its average to $b"
echo "validation loss $a of the average"

if [ -n "$MP" ]; then
	echo "== ema at 2 ranks"
	M="--model $SMALL:ema=0.9 --lr 0.5 --val-every 1 --batch 2"
	$MP cdp-train $C $M --out "$T/r2" --steps 3 || fail "ema at 2 ranks failed"
	cdp-train $C --init "$T/r2/checkpoint.cdpt" --lr 0 --val-every 1 --out "$T/r2avg" --steps 1 ||
		fail "the run from the 2-rank average failed"
	a=$(vloss "$T/r2/metrics.jsonl" 3) b=$(vloss "$T/r2avg/metrics.jsonl" 1)
	awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-9 * a) }' ||
		fail "2 ranks validated their averages to $a, one process the checkpointed one to $b"
	$MP cdp-train $C $M --out "$T/r2s" --steps 2 || fail "ema at 2 ranks: 2 steps failed"
	$MP cdp-train $C $M --out "$T/r2s" --steps 3 --resume || fail "ema at 2 ranks: the resume failed"
	"$PYTHON" "$PY" same "$T/r2s/checkpoint.cdpt" "$T/r2/checkpoint.cdpt" ||
		fail "ema at 2 ranks: the resumed run's checkpoint differs"
	echo "2 ranks: validation loss $a, one process $b; resumed bit for bit"
else
	echo "SKIP: ema at 2 ranks (no MPIRUN)"
fi

echo "== usage"
expect_fail 2 "--patience needs --keep-best" cdp-train $C --out "$T/u" --steps 1 --patience 2
expect_fail 2 "--min-delta needs --patience" cdp-train $C --out "$T/u" --steps 1 --keep-best loss --min-delta 0.1
expect_fail 2 "--patience" cdp-train $C --out "$T/u" --steps 1 --keep-best loss --patience 0
expect_fail 2 "--min-delta" cdp-train $C --out "$T/u" --steps 1 --keep-best loss --patience 1 --min-delta -1
expect_fail 1 "ema" cdp-train $C --model "$SMALL:ema=1" --out "$T/u" --steps 1
exit 0
