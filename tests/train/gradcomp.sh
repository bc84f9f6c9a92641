#!/bin/sh
# tests/train/gradcomp.sh: --grad-compress (issue 29) at 2 ranks under
# mpirun, on the batchnorm-free small.cfg, 20 steps at --lr 0.05:
#  - bf16 and fp16, with the ring and with MPI's all-reduce: every step's
#    loss within relative 5e-3 of the uncompressed run's (the rounding of
#    the gradients, 2^-8 or 2^-11 relative, compounds over the steps), and
#    not bit for bit equal to it (the uncompressed run equals 1 process
#    with the global batch to 1e-6, buckets.sh; a compressed one cannot);
#  - train.log names the format on its gradients line;
#  - staged through a host mirror (CDP_DIST_STAGE=1, as on a GPU), ring bf16
#    takes the unstaged run's losses bit for bit;
#  - a bf16 run stopped after 9 steps and resumed to 20 takes the
#    uninterrupted run's losses bit for bit (compression keeps no state);
#  - fp16 overflow is a non-finite gradient: at --loss-scale 1e9 the fp16
#    sums overflow, the loss scaler skips those steps and halves its
#    scale (train.log), where the float32 run at the same scale skips none;
#  - refused with exit 2 and one line: an unknown format, and any format
#    with --sync average or admm (they exchange parameters, not gradients).
. "$CDP_SRCDIR/tests/train/train_common.sh"
[ -n "$MP" ] || { echo "SKIP: no MPIRUN" >&2; exit 77; }
P="--db $T/pool --keys $T/train.keys --threads 1 -q --model $SMALL:depth=6,width=8"
P="$P --batch 4 --log-every 1 --lr 0.05 --schedule constant"

expect_fail 2 "--grad-compress: 'fp8' is not" cdp-train $P --steps 1 --out "$T/x" --grad-compress fp8
expect_fail 2 "--grad-compress needs --sync allreduce" \
	cdp-train $P --steps 1 --out "$T/x" --grad-compress bf16 --sync average:2
expect_fail 2 "--grad-compress needs --sync allreduce" \
	cdp-train $P --steps 1 --out "$T/x" --grad-compress fp16 --sync admm:2:0.01
[ "$(wc -l <"$T/err")" -le 2 ] || fail "the refusal says more than a line: $(cat "$T/err")"

for algo in ring mpi; do
	$MP cdp-train $P --steps 20 --allreduce "$algo" --out "$T/$algo.none" ||
		fail "$algo: uncompressed run"
	losses "$T/$algo.none/metrics.jsonl" >"$T/l.none"
	[ "$(wc -l <"$T/l.none")" -eq 20 ] || fail "$algo: $(wc -l <"$T/l.none") step lines"
	for comp in bf16 fp16; do
		d=$T/$algo.$comp
		$MP cdp-train $P --steps 20 --allreduce "$algo" --grad-compress "$comp" --out "$d" ||
			fail "$algo $comp: run"
		grep -q "sent as $comp (--grad-compress)" "$d/train.log" ||
			fail "$algo $comp: train.log: $(grep gradients "$d/train.log")"
		losses "$d/metrics.jsonl" >"$T/l.$comp"
		losses_close "$T/l.none" "$T/l.$comp" 5e-3 ||
			fail "$algo $comp: losses off the uncompressed run's"
		! cmp -s "$T/l.none" "$T/l.$comp" ||
			fail "$algo $comp: the losses equal the uncompressed run's bit for bit"
		echo "$algo $comp: step 20 loss $(tail -1 "$T/l.$comp"), uncompressed $(tail -1 "$T/l.none")"
	done
done

echo "== ring bf16 staged (CDP_DIST_STAGE=1: the GPU backends' path through a host mirror)"
CDP_DIST_STAGE=1 $MP cdp-train $P --steps 20 --allreduce ring --grad-compress bf16 --out "$T/staged" ||
	fail "staged: run"
losses "$T/ring.bf16/metrics.jsonl" >"$T/la"
losses "$T/staged/metrics.jsonl" >"$T/lb"
cmp -s "$T/la" "$T/lb" || fail "staged: the losses differ: $(diff "$T/la" "$T/lb" | head -4)"

echo "== bf16: 9 steps, then --resume to 20"
$MP cdp-train $P --steps 9 --allreduce ring --grad-compress bf16 --out "$T/res" || fail "resume: first part"
$MP cdp-train $P --steps 20 --allreduce ring --grad-compress bf16 --out "$T/res" --resume 2>"$T/err" ||
	fail "resume: $(cat "$T/err")"
losses "$T/ring.bf16/metrics.jsonl" >"$T/la"
losses "$T/res/metrics.jsonl" >"$T/lb"
cmp -s "$T/la" "$T/lb" || fail "the resumed losses differ: $(diff "$T/la" "$T/lb" | head -4)"

echo "== fp16 overflow under the loss scaler"
for comp in none fp16; do
	$MP cdp-train $P --steps 4 --loss-scale 1e9 --grad-compress "$comp" --out "$T/ls.$comp" ||
		fail "loss scale 1e9, $comp: run"
done
! grep -q "overflowed" "$T/ls.none/train.log" || fail "float32 overflowed at loss scale 1e9"
grep -q "step 1: the gradients overflowed at loss scale 1e+09, step skipped" "$T/ls.fp16/train.log" ||
	fail "fp16 at loss scale 1e9: no skipped step in train.log"
