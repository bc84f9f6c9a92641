#!/bin/sh
# tests/train/mix.sh: MixUp and CutMix in cdp-train (mixup_alpha=,
# cutmix_alpha=, engine/augment.h), on scene chips of 16x16 in 5 classes
# with the classifier cfg:
#  - a run with both mixings learns: its validation accuracy after 60 steps
#    is at least 0.5 (chance 0.2);
#  - its losses differ from the same run's without mixing (the batches and
#    the loss are mixed);
#  - cut at step 4 and resumed to 10, its losses equal the uninterrupted
#    run's bit for bit (lam and the box come from (seed, epoch, step));
#  - 2 ranks (with MPI) train with mixing, each rank mixing its own batch
#    (their sums of the two labels' loss parts stay matched);
#  - a multi-label pool (loss=bce over its K classes) trains with mixing,
#    its label sets mixed as the chips, and its losses differ from the
#    unmixed run's;
#  - a segmentation model with mixup_alpha is refused, naming classifiers.
. "$CDP_SRCDIR/tests/train/train_common.sh"
CLS="$CDP_SRCDIR/share/cdpool/models/classifier.cfg"
"$PYTHON" "$GEN" --scene-tiles "$T/chips" --count 80 --size 16 --seed 4
cdp-lmdbpack -q --classes residential,road,green,lake,land --list "$T/chips/list.txt" "$T/cpool"
cdp-keyshuffle -q --seed 1 --val 0.25 --stratify --val-out "$T/c.val" -o "$T/c.keys" "$T/cpool"
MIX="$CLS:width=4,blocks=1,classes=5,mixup_alpha=0.4,cutmix_alpha=1"
R="--db $T/cpool --keys $T/c.keys --threads 1 -q --seed 5 --batch 8 --log-every 1"

cdp-train $R --model "$MIX" --val-keys "$T/c.val" --steps 60 --val-every 60 --out "$T/learn" ||
	fail "run with mixing"
acc=$(sed -n 's/^{"type":"val",.*"accuracy":\([^,]*\),.*/\1/p' "$T/learn/metrics.jsonl" | tail -1)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.5) }' || fail "validation accuracy $acc after 60 steps"
echo "mixed run: validation accuracy $acc after 60 steps (chance 0.2)"

R="$R --schedule constant --lr 0.01 --checkpoint-every 2"
resumed_same "$R" "$MIX" "$CLS:width=4,blocks=1,classes=5" "mixing"

if [ -n "$MP" ]; then
	$MP cdp-train $R --model "$MIX" --batch 4 --steps 4 --out "$T/j2" || fail "2 ranks with mixing"
	[ "$(losses "$T/j2/metrics.jsonl" | wc -l)" -eq 4 ] || fail "2 ranks: not 4 step lines"
	echo "2 ranks with mixing: 4 steps"
fi

# a multi-label pool mixes its label sets too (bce: lam y + (1 - lam) y')
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genmulti.py" "$T/multi" --count 24 --size 16 --seed 3 \
	>/dev/null
cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/multi/list.txt" "$T/mpool"
cdp-keyshuffle -q --seed 1 -o "$T/m.keys" "$T/mpool"
ML="$CLS:width=4,blocks=1,loss=bce,classes=3"
R="--db $T/mpool --keys $T/m.keys --threads 1 -q --seed 5 --batch 8 --log-every 1 --steps 4"
cdp-train $R --model "$ML,mixup_alpha=0.4,cutmix_alpha=1" --out "$T/mmix" ||
	fail "multi-label run with mixing"
cdp-train $R --model "$ML" --out "$T/mplain" || fail "multi-label run without mixing"
[ "$(losses "$T/mmix/metrics.jsonl" | wc -l)" -eq 4 ] || fail "multi-label mixing: not 4 step lines"
losses "$T/mmix/metrics.jsonl" | awk '$2 + 0 > 0 && $2 + 0 < 10 { n++ } END { exit n != 4 }' ||
	fail "multi-label mixing: losses $(losses "$T/mmix/metrics.jsonl" | tr '\n' ' ')"
[ "$(losses "$T/mmix/metrics.jsonl")" != "$(losses "$T/mplain/metrics.jsonl")" ] ||
	fail "multi-label: mixing changed nothing"
echo "multi-label pool: mixed label sets train"

cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$UNET,mixup_alpha=0.2" --steps 1 -q \
	--threads 1 --out "$T/seg" 2>"$T/err" && fail "mixup_alpha on a segmentation model ran"
grep -q "mixup_alpha and cutmix_alpha are for classifiers" "$T/err" ||
	fail "segmentation: $(cat "$T/err")"
echo "segmentation refused: $(cat "$T/err")"
