#!/bin/sh
# tests/train/loss_scale.sh: cdp-train's dynamic loss scaling (--loss-scale)
# on the CPU, with the batchnorm-free tests/train/small.cfg:
#  - off by default in fp32 (loss_scale null in metrics.jsonl); --loss-scale
#    dynamic starts at 65536, a power of two, so scaling and unscaling are
#    exact and the losses equal the unscaled run's bit for bit;
#  - --loss-scale 1e40: float32 ends at 3.4e38, so the scaled loss gradient
#    overflows at once; each such step is skipped (train.log names it,
#    metrics.jsonl counts it in skipped_steps) and halves the scale, until
#    the gradients are finite and training goes on;
#  - skipped steps advance the learning-rate schedule (cosine with warm-up:
#    the rates of the run without skips);
#  - the checkpoint keeps the scale and its counters: a run stopped right
#    after the skips and resumed with the same option gives the
#    uninterrupted losses bit for bit; resumed with --loss-scale off it gives
#    them to relative 1e-5 (the skipped steps changed nothing, later steps
#    were unscaled before the optimizer);
#  - the same at 2 ranks: --sync allreduce (the verdict comes from the
#    reduced gradients) skips at least the 5 steps whose scale exceeds
#    float32, and resumed with --loss-scale off after them gives its losses
#    to relative 1e-5; --sync average:3 (local gradients: the ranks agree on
#    each verdict by a reduction) skips and then trains.
# The 2-rank cases skip without $MPIRUN.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --threads 1 -q --model $SMALL --log-every 1"
# scales FILE: "step loss_scale skipped_steps" of every step line
scales() {
	sed -n 's/^{"type":"step","step":\([0-9]*\),.*"loss_scale":\([^,]*\),"skipped_steps":\([0-9]*\).*/\1 \2 \3/p' "$1"
}

echo "== off and dynamic"
cdp-train $C --batch 4 --steps 12 --out "$T/off" || fail "unscaled run"
cdp-train $C --batch 4 --steps 12 --out "$T/dyn" --loss-scale dynamic || fail "dynamic run"
[ "$(scales "$T/off/metrics.jsonl" | grep -c ' null 0$')" -eq 12 ] ||
	fail "fp32 scales the loss by default: $(scales "$T/off/metrics.jsonl" | head -3)"
[ "$(scales "$T/dyn/metrics.jsonl" | grep -c ' 65536 0$')" -eq 12 ] ||
	fail "dynamic: want scale 65536 and no skips: $(scales "$T/dyn/metrics.jsonl" | head -3)"
losses "$T/off/metrics.jsonl" >"$T/l.off"
losses "$T/dyn/metrics.jsonl" >"$T/l.dyn"
cmp -s "$T/l.off" "$T/l.dyn" || fail "a power-of-two scale changed the losses"

echo "== overflow at 1e40"
cdp-train $C --batch 4 --steps 24 --out "$T/big" --loss-scale 1e40 || fail "1e40 run"
scales "$T/big/metrics.jsonl" >"$T/s.big"
k=$(tail -1 "$T/s.big" | cut -d' ' -f3)
[ "$k" -ge 5 ] && [ "$k" -lt 24 ] || fail "want at least 5 skipped steps (1e40 to 6.25e38), got $k"
[ "$(grep -c 'overflowed at loss scale' "$T/big/train.log")" -eq "$k" ] ||
	fail "train.log does not name the $k skipped steps"
# the scale halves at every skip, then holds
awk -v k="$k" 'NR <= k && $3 != NR { exit 1 } NR > k && $3 != k { exit 1 }
	{ want = 1e40 / 2 ^ (NR <= k ? NR : k); d = $2 - want; if (d < 0) d = -d;
	  if (d > 1e-9 * want) exit 1 }' "$T/s.big" || fail "scales: $(head -8 "$T/s.big")"
echo "skipped $k steps, then trained at scale $(tail -1 "$T/s.big" | cut -d' ' -f2)"

echo "== skipped steps advance the schedule"
# a cosine schedule with warm-up: the run whose first steps overflow gives
# each step the rate of the run without skips (a PyTorch scheduler steps
# every iteration), not the rate of the updates applied so far
lrs() { sed -n 's/^{"type":"step","step":\([0-9]*\),.*"lr":\([^,]*\),.*/\1 \2/p' "$1"; }
S="$SMALL:lr_policy=cosine,warmup=4,lr_min=0.0001"
cdp-train $C --model "$S" --batch 4 --steps 12 --out "$T/cos" || fail "cosine run"
cdp-train $C --model "$S" --batch 4 --steps 12 --out "$T/cos.big" --loss-scale 1e40 ||
	fail "cosine run at 1e40"
[ "$(scales "$T/cos.big/metrics.jsonl" | tail -1 | cut -d' ' -f3)" -ge 5 ] || fail "cosine: no skips"
lrs "$T/cos/metrics.jsonl" >"$T/lr.cos"
lrs "$T/cos.big/metrics.jsonl" >"$T/lr.big"
[ "$(wc -l <"$T/lr.cos")" -eq 12 ] && cmp -s "$T/lr.cos" "$T/lr.big" ||
	fail "skipped steps shifted the schedule: $(paste "$T/lr.cos" "$T/lr.big" | head -8)"

echo "== resume after the skips"
cdp-train $C --batch 4 --steps "$k" --out "$T/cut" --loss-scale 1e40 || fail "run to step $k"
cp -r "$T/cut" "$T/cut2"
cdp-train $C --batch 4 --steps 24 --out "$T/cut" --loss-scale 1e40 --resume || fail "resume, scaled"
cdp-train $C --batch 4 --steps 24 --out "$T/cut2" --loss-scale off --resume || fail "resume, off"
losses "$T/big/metrics.jsonl" >"$T/l.big"
losses "$T/cut/metrics.jsonl" >"$T/l.cut"
losses "$T/cut2/metrics.jsonl" >"$T/l.cut2"
[ "$(wc -l <"$T/l.big")" -eq 24 ] || fail "want 24 step lines"
cmp -s "$T/l.big" "$T/l.cut" || fail "resumed scaled losses differ: $(diff "$T/l.big" "$T/l.cut" | head -4)"
scales "$T/cut/metrics.jsonl" | cmp -s - "$T/s.big" || fail "the resumed run lost the scale or counts"
losses_close "$T/l.big" "$T/l.cut2" 1e-5 || fail "unscaled after the skips differs beyond 1e-5"
echo "resumed at step $k: bit for bit with the scale, within 1e-5 without"

if [ -z "$MP" ]; then
	echo "SKIP: 2 ranks (no MPIRUN)"
	exit 0
fi
echo "== 2 ranks"
$MP cdp-train $C --batch 2 --steps 24 --out "$T/two" --loss-scale 1e40 || fail "2 ranks"
k2=$(scales "$T/two/metrics.jsonl" | tail -1 | cut -d' ' -f3)
[ "$k2" -ge 5 ] && [ "$k2" -lt 24 ] || fail "2 ranks: $k2 skipped steps"
$MP cdp-train $C --batch 2 --steps "$k2" --out "$T/two.cut" --loss-scale 1e40 || fail "2 ranks to $k2"
$MP cdp-train $C --batch 2 --steps 24 --out "$T/two.cut" --loss-scale off --resume ||
	fail "2 ranks: resume, off"
losses "$T/two/metrics.jsonl" >"$T/l.two"
losses "$T/two.cut/metrics.jsonl" >"$T/l.two.cut"
losses_close "$T/l.two" "$T/l.two.cut" 1e-5 ||
	fail "2 ranks: unscaled after the skips differs beyond 1e-5"
$MP cdp-train $C --batch 2 --steps 12 --out "$T/avg" --sync average:3 --loss-scale 1e40 ||
	fail "2 ranks, average:3"
ka=$(scales "$T/avg/metrics.jsonl" | tail -1 | cut -d' ' -f3)
[ "$ka" -ge 5 ] && [ "$ka" -lt 12 ] || fail "average:3: $ka skipped steps"
losses "$T/avg/metrics.jsonl" | awk '$2 != $2 + 0 || $2 == "null" { exit 1 }' ||
	fail "average:3: a loss is not a number"
echo "2 ranks: skipped $k2, then within 1e-5 of unscaled; average:3 skipped $ka"
exit 0
