#!/bin/sh
# cdp-train end to end on a generated road pool (train_common.sh):
#  - the summaries on stderr: "epoch N" at each epoch's end, "done: epoch
#    N (K of M steps)" after a last validation mid-epoch;
#  - a step line's loss (metrics.jsonl and train.log) with --log-every 2 is
#    the mean of its 2 steps' losses (--log-every 1);
#  - a run writes metrics.jsonl (step, validation and epoch lines with their
#    fields), train.log, a loss.png and a checkpoint, and learns;
#  - --resume after a shorter run continues bit for bit: the losses after
#    the resume equal the uninterrupted run's exactly (1 process, 2 ranks);
#  - SIGTERM finishes the step, writes a checkpoint, exits 1; --resume then
#    finishes the run;
#  - --keep-best loss keeps best.cdpt at the step of the lowest validation
#    loss, also across a resume, and cdp-predict reads it;
#  - 2 ranks with batch b give the loss curve of 1 process with batch 2b
#    (relative 1e-6), with MPI's all-reduce and with the ring, and with
#    loss=bce, dice and bce+dice; the validation loss of bce+dice is the
#    same at batch 8, 3 and 2 ranks x 3 (relative 1e-9);
#  - across 2 ranks every sample of an epoch is served exactly once, and the
#    global batches are those of 1 process (CDP_TRAIN_LOG_KEYS);
#  - average:5 and admm:5:0.01 converge: road IoU >= 0.5 after 60 steps,
#    printed beside the synchronous runs' on the same budget.
# The MPI cases are skipped when $MPIRUN is empty.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --threads 1 -q"

echo "== the summaries on stderr: each epoch's, and the last validation's mid-epoch"
cdp-train --db "$T/pool" --keys "$T/train.keys" --threads 1 --val-keys "$T/val.keys" \
	--model "$SMALL" --out "$T/summ" --batch 4 --steps 8 2>"$T/summ.err" || fail "summary run"
grep -q '^cdp-train: epoch 1 step 6/8 loss [0-9.]*, val loss ' "$T/summ.err" ||
	fail "no epoch line: $(cat "$T/summ.err")"
# it said "done: 0 step 8/8" (the epoch's number bare, 0-based)
grep -q '^cdp-train: done: epoch 2 (2 of 6 steps) step 8/8 loss [0-9.]*, val loss ' "$T/summ.err" ||
	fail "no done line: $(cat "$T/summ.err")"

echo "== a step line's loss with --log-every 2: the mean of its 2 steps' losses"
for le in 1 2; do
	cdp-train $C --model "$SMALL" --out "$T/le$le" --batch 4 --steps 4 --seed 7 --lr 0.01 \
		--log-every $le || fail "--log-every $le"
done
l1=$(losses "$T/le1/metrics.jsonl" | cut -d' ' -f2 | tr '\n' ' ')
l2=$(losses "$T/le2/metrics.jsonl" | cut -d' ' -f2 | tr '\n' ' ')
echo "$l1 $l2" | awk '{ for (i = 1; i <= 2; i++) { m = ($(2 * i - 1) + $(2 * i)) / 2; d = m - $(4 + i)
	if ((d < 0 ? -d : d) > 1e-12 * m) exit 1 } exit NF != 6 }' ||
	fail "--log-every 2 gives '$l2', the steps' losses are '$l1'"
grep -q "step 4 loss $(printf '%.6f' "$(echo "$l2" | cut -d' ' -f2)") " "$T/le2/train.log" ||
	fail "train.log's step 4 line is not metrics.jsonl's: $(grep 'step 4 ' "$T/le2/train.log")"

echo "== a run and its outputs"
cdp-train $C --val-keys "$T/val.keys" --model "$UNET" --out "$T/run" --batch 4 --epochs 3 \
	--lr 0.01 --warmup 2 --log-every 1 || fail "training run failed"
for f in metrics.jsonl train.log loss.png checkpoint.cdpt; do
	[ -s "$T/run/$f" ] || fail "run left no $f"
done
[ "$(od -An -c -N4 "$T/run/loss.png" | tr -d ' ')" = '211PNG' ] || fail "loss.png is not a PNG"
[ "$(grep -c '"type":"step"' "$T/run/metrics.jsonl")" -eq 18 ] || fail "want 18 step lines (3 epochs of 6)"
[ "$(grep -c '"type":"epoch"' "$T/run/metrics.jsonl")" -eq 3 ] || fail "want 3 epoch lines"
[ "$(grep -c '"type":"val"' "$T/run/metrics.jsonl")" -eq 3 ] || fail "want 3 validation lines"
for k in loss lr samples_per_s data_wait_s allreduce_s rss_anon_kb; do
	grep '"type":"step"' "$T/run/metrics.jsonl" | grep -vq "\"$k\":" && fail "a step line lacks $k"
done
for k in accuracy miou iou f1; do
	grep '"type":"val"' "$T/run/metrics.jsonl" | grep -vq "\"$k\":" && fail "a val line lacks $k"
done
losses "$T/run/metrics.jsonl" | awk 'NR <= 3 {a += $2} {b[NR] = $2} END {
	e = b[NR] + b[NR-1] + b[NR-2]; if (!(e < 0.8 * a)) { print "loss " a/3 " -> " e/3; exit 1 } }' ||
	fail "the loss did not fall"

# resume_exact NAME LAUNCHER...: 18 steps in one go against 8 + resume to 18
resume_exact() {
	name=$1; shift
	R="$C --val-keys $T/val.keys --model $UNET --batch 4 --log-every 1 --schedule constant --lr 0.01"
	"$@" cdp-train $R --checkpoint-every 6 --out "$T/$name.a" --steps 18 || fail "$name: run a"
	"$@" cdp-train $R --checkpoint-every 6 --out "$T/$name.b" --steps 8 || fail "$name: run b"
	"$@" cdp-train $R --checkpoint-every 6 --out "$T/$name.b" --steps 18 --resume || fail "$name: resume"
	losses "$T/$name.a/metrics.jsonl" >"$T/la"
	losses "$T/$name.b/metrics.jsonl" >"$T/lb"
	[ "$(wc -l <"$T/la")" -eq 18 ] || fail "$name: $(wc -l <"$T/la") step lines"
	cmp -s "$T/la" "$T/lb" || fail "$name: resumed losses differ: $(diff "$T/la" "$T/lb" | head -4)"
	echo "$name: 18 losses equal bit for bit after resuming at step 8"
}
echo "== resume"
resume_exact resume1

echo "== SIGTERM"
cdp-train $C --model "$UNET" --batch 4 --out "$T/sig" --steps 100000 --log-every 1 &
pid=$!
wait_step $pid "$T/sig/metrics.jsonl" 5 30
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "SIGTERM: exit $rc, want 1"
grep -q 'interrupted: checkpoint at step' "$T/sig/train.log" || fail "SIGTERM: no checkpoint logged"
at=$(sed -n 's/.*interrupted: checkpoint at step \([0-9]*\).*/\1/p' "$T/sig/train.log")
cdp-train $C --model "$UNET" --batch 4 --out "$T/sig" --steps $((at + 3)) --log-every 1 --resume ||
	fail "SIGTERM: resume failed"
[ "$(losses "$T/sig/metrics.jsonl" | tail -1 | cut -d' ' -f1)" -eq $((at + 3)) ] ||
	fail "SIGTERM: the resumed run did not reach step $((at + 3))"
echo "stopped at step $at, resumed to $((at + 3))"

echo "== --keep-best"
# best.cdpt is the model of the best validation so far (here the lowest
# validation loss, SMALL at a high learning rate so the loss goes up and
# down), beside checkpoint.cdpt, also across a resume; cdp-predict reads it
# step STEP FILE: the step a checkpoint records (META, cdp-checkpoint(5))
ckstep() { "$PYTHON" -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(), 56)[0])" "$1"; }
# argmin FILE: the step of the lowest validation loss (the first of equals)
argmin() {
	sed -n 's/^{"type":"val","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1" |
		awk 'NR == 1 || $2 < m { m = $2; s = $1 } END { print s }'
}
B="$C --val-keys $T/val.keys --model $SMALL --batch 4 --lr 0.5 --val-every 1 --keep-best loss"
cdp-train $B --out "$T/best" --steps 6 || fail "--keep-best loss failed"
[ -s "$T/best/best.cdpt" ] || fail "--keep-best left no best.cdpt"
[ "$(ckstep "$T/best/best.cdpt")" = "$(argmin "$T/best/metrics.jsonl")" ] ||
	fail "best.cdpt is of step $(ckstep "$T/best/best.cdpt"), the lowest validation loss at $(argmin "$T/best/metrics.jsonl")"
first=$(ckstep "$T/best/best.cdpt")
[ "$first" -lt 6 ] || fail "the test wants a validation loss that rises: best at step $first of 6"
cp "$T/best/best.cdpt" "$T/best.first"
# resumed at a learning rate that makes every later validation worse: the
# best (read back from metrics.jsonl) stays, best.cdpt untouched
cdp-train $B --out "$T/best" --steps 10 --resume --lr 20 || fail "--keep-best: resume failed"
[ "$(argmin "$T/best/metrics.jsonl")" = "$first" ] ||
	fail "the resumed run at --lr 20 did improve the validation loss: this test wants it not to"
cmp -s "$T/best/best.cdpt" "$T/best.first" || fail "after the resume a worse model replaced best.cdpt"
[ "$(ckstep "$T/best/checkpoint.cdpt")" = 10 ] || fail "checkpoint.cdpt is not the last step"
echo "best.cdpt at step $first of 6, kept through a resume to 10"
cdp-predict -q "$T/best/best.cdpt" "$T/c3.tif" -o "$T/best.tif" || fail "cdp-predict best.cdpt failed"
expect_fail 2 "--keep-best: 'kappa' is not" cdp-train $B --out "$T/best" --steps 1 --keep-best kappa

if [ -z "$MP" ]; then
	echo "SKIP: MPI cases (no MPIRUN)"
	exit 0
fi

echo "== 2 ranks x batch 4 = 1 process x batch 8"
P="$C --model $SMALL --steps 12 --log-every 1"
cdp-train $P --batch 8 --out "$T/one" || fail "1 process"
losses "$T/one/metrics.jsonl" >"$T/l1"
for algo in mpi ring; do
	$MP cdp-train $P --batch 4 --allreduce $algo --out "$T/two.$algo" || fail "2 ranks ($algo)"
	losses "$T/two.$algo/metrics.jsonl" >"$T/l2"
	[ "$(wc -l <"$T/l1")" -eq 12 ] || fail "want 12 losses"
	losses_close "$T/l1" "$T/l2" 1e-6 || fail "$algo: 2-rank losses differ from 1 process"
	echo "$algo: 12 losses agree to 1e-6"
done
# the sigmoid losses, Dice included (not a mean over samples: 2 ranks take
# the gradient of the Dice of the global batch's sums)
for loss in bce dice bce+dice; do
	L="$C --model $SMALL:loss=$loss,outputs=1 --steps 12 --log-every 1"
	cdp-train $L --batch 8 --out "$T/one.$loss" || fail "$loss: 1 process"
	$MP cdp-train $L --batch 4 --out "$T/two.$loss" || fail "$loss: 2 ranks"
	losses "$T/one.$loss/metrics.jsonl" >"$T/l1"
	losses "$T/two.$loss/metrics.jsonl" >"$T/l2"
	losses_close "$T/l1" "$T/l2" 1e-6 || fail "loss=$loss: 2-rank losses differ from 1 process"
	echo "loss=$loss: 12 losses agree to 1e-6"
done
# the validation loss (bce+dice: Dice of the whole validation list) does
# not depend on the batch or the ranks: the same model (--lr 0) at batch
# 8, 3 and 2 ranks x 3 (8 keys: batches of 8; 3, 3, 2; 3 + 1 and 3)
val_invariant "$SMALL:loss=bce+dice,outputs=1" bce+dice

echo "== every sample once per epoch"
CDP_TRAIN_LOG_KEYS="$T/k2" $MP cdp-train $P --batch 4 --epochs 2 --out "$T/keys2" || fail "keys 2 ranks"
CDP_TRAIN_LOG_KEYS="$T/k1" cdp-train $P --batch 8 --epochs 2 --out "$T/keys1" || fail "keys 1 process"
[ -s "$T/k2.0" ] && [ -s "$T/k2.1" ] || fail "no per-rank key logs"
sort "$T/k2.0" "$T/k2.1" >"$T/k2"
sort "$T/k1.0" >"$T/k1"
cmp -s "$T/k1" "$T/k2" || fail "2 ranks saw other (epoch, step, key) than 1 process"
for e in 0 1; do
	awk -v e=$e '$1 == e {print $3}' "$T/k2" | sort >"$T/ek"
	[ "$(wc -l <"$T/ek")" -eq 24 ] || fail "epoch $e: $(wc -l <"$T/ek") samples, want 24"
	[ -z "$(uniq -d "$T/ek")" ] || fail "epoch $e: samples seen twice: $(uniq -d "$T/ek")"
	sed 1d "$T/train.keys" | sort | cmp -s - "$T/ek" || fail "epoch $e: not every key seen"
done
echo "each of 24 keys once per epoch across 2 ranks, the same batches as 1 process"

echo "== resume at 2 ranks"
resume_exact resume2 $MP

echo "== average and admm converge"
V="$C --val-keys $T/val.keys --model $CDP_SRCDIR/share/cdpool/models/unet.cfg:width=8,depth=2,aug_rot90=0"
V="$V --steps 60 --lr 0.01 --warmup 5 --val-every 60"
cdp-train $V --batch 8 --out "$T/s1" || fail "single process"
for sync in allreduce average:5 admm:5:0.01; do
	$MP cdp-train $V --batch 4 --sync $sync --out "$T/s.$sync" || fail "$sync"
done
single=$(lastval "$T/s1/metrics.jsonl")
for sync in allreduce average:5 admm:5:0.01; do
	m=$(lastval "$T/s.$sync/metrics.jsonl")
	echo "road IoU after 60 steps: $sync (2 ranks x 4) $m, single process (batch 8) $single"
	awk -v m="$m" 'BEGIN { exit !(m >= 0.5) }' || fail "$sync: road IoU $m < 0.5"
done
exit 0
