#!/bin/sh
# losses.sh: cdp-train with the losses of cdp-model(5) beyond ce and bce
# (their values and gradients: tests/engine/losses.sh):
#  - loss=focal (one sigmoid channel) and loss=ce+dice with
#    loss_weights=1,0.5 (softmax over 2 channels, smp's multiclass Dice)
#    train: the mean loss of the last 3 of 40 steps is below 0.8 times that
#    of the first 3, and the road IoU of the validation keys beats the
#    untrained model's;
#  - 2 ranks with batch 4 give the loss curve of 1 process with batch 8
#    (relative 1e-6) for focal, jaccard, tversky, lovasz (per image, but a
#    mean over the global batch's images) and ce with label smoothing plus
#    Dice: the sums each term needs are added over the ranks;
#  - --class-weights on loss=ce+dice with label smoothing gives the losses
#    of class_weights= in the cfg (the sum set up again keeps its keys);
#  - the validation loss of ce+dice (Dice of the whole validation list) is
#    the same at batch 8, 3 and 2 ranks x 3 (relative 1e-9).
# The MPI cases are skipped when $MPIRUN is empty.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --threads 1 -q"
# a value with a comma cannot be an override: the sums in cfgs of their own
sed 's/^loss=ce$/loss=ce+dice\nloss_weights=1,0.5/' "$SMALL" >"$T/ce_dice.cfg"
sed 's/^loss=ce$/loss=ce+dice\nlabel_smoothing=0.1\nclass_weights=1,3/' "$SMALL" >"$T/ls_dice.cfg"
grep -q '^loss_weights=1,0.5$' "$T/ce_dice.cfg" || fail "ce_dice.cfg: no loss_weights"

echo "== focal and ce+dice train"
for m in focal ce_dice; do
	case $m in
	focal) M="$SMALL:loss=focal,outputs=1,width=8" ;;
	ce_dice) M="$T/ce_dice.cfg:width=8" ;;
	esac
	cdp-train $C --model "$M" --val-keys "$T/val.keys" --batch 4 --steps 40 --lr 0.05 \
		--log-every 1 --val-every 40 --out "$T/$m" || fail "$m: training run failed"
	cdp-train $C --model "$M" --val-keys "$T/val.keys" --batch 4 --steps 1 --lr 0 \
		--out "$T/$m.0" || fail "$m: untrained run failed"
	losses "$T/$m/metrics.jsonl" | awk 'NR <= 3 {a += $2} {b[NR] = $2} END {
		e = b[NR] + b[NR-1] + b[NR-2]; print "loss " a/3 " -> " e/3; exit !(NR == 40 && e < 0.8 * a) }' ||
		fail "$m: the loss did not fall"
	i1=$(lastval "$T/$m/metrics.jsonl") i0=$(lastval "$T/$m.0/metrics.jsonl")
	awk -v a="$i1" -v b="$i0" 'BEGIN { exit !(a > b + 0.05) }' ||
		fail "$m: road IoU $i1 after 40 steps, $i0 untrained"
	echo "$m: road IoU $i0 untrained, $i1 after 40 steps"
done

echo "== --class-weights on a sum"
# --class-weights sets up the loss again: the sum keeps its terms, weights
# and keys (the first losses equal those of the weights in the cfg)
sed 's/^loss=ce$/loss=ce+dice\nloss_weights=1,0.5\nlabel_smoothing=0.1\nclass_weights=1,3/' "$SMALL" >"$T/cw_cfg.cfg"
sed 's/^loss=ce$/loss=ce+dice\nloss_weights=1,0.5\nlabel_smoothing=0.1/' "$SMALL" >"$T/cw_opt.cfg"
cdp-train $C --model "$T/cw_cfg.cfg" --batch 4 --steps 3 --log-every 1 --out "$T/cw1" ||
	fail "class weights in the cfg"
cdp-train $C --model "$T/cw_opt.cfg" --batch 4 --steps 3 --log-every 1 --class-weights 1,3 \
	--out "$T/cw2" || fail "--class-weights"
cdp-train $C --model "$T/cw_opt.cfg" --batch 4 --steps 3 --log-every 1 --out "$T/cw3" ||
	fail "no class weights"
losses "$T/cw1/metrics.jsonl" >"$T/l1"
losses "$T/cw2/metrics.jsonl" >"$T/l2"
losses "$T/cw3/metrics.jsonl" >"$T/l3"
losses_close "$T/l1" "$T/l2" 1e-6 || fail "--class-weights 1,3 differs from class_weights=1,3"
losses_close "$T/l1" "$T/l3" 1e-6 >/dev/null && fail "the class weights change nothing"
echo "--class-weights 1,3 on ce+dice: the losses of class_weights=1,3"

if [ -z "$MP" ]; then
	echo "SKIP: MPI cases (no MPIRUN)"
	exit 0
fi

echo "== 2 ranks x batch 4 = 1 process x batch 8"
for m in focal jaccard tversky lovasz ls_dice; do
	case $m in
	focal) M="$SMALL:loss=focal,outputs=1,focal_alpha=0.25" ;;
	jaccard) M="$SMALL:loss=jaccard,outputs=1" ;;
	tversky) M="$SMALL:loss=tversky,outputs=1,tversky_alpha=0.3,tversky_beta=0.7" ;;
	lovasz) M="$SMALL:loss=lovasz,outputs=1" ;;
	ls_dice) M="$T/ls_dice.cfg" ;;
	esac
	L="$C --model $M --steps 12 --log-every 1"
	cdp-train $L --batch 8 --out "$T/one.$m" || fail "$m: 1 process"
	$MP cdp-train $L --batch 4 --out "$T/two.$m" || fail "$m: 2 ranks"
	losses "$T/one.$m/metrics.jsonl" >"$T/l1"
	losses "$T/two.$m/metrics.jsonl" >"$T/l2"
	[ "$(wc -l <"$T/l1")" -eq 12 ] || fail "$m: want 12 losses"
	losses_close "$T/l1" "$T/l2" 1e-6 || fail "$m: 2-rank losses differ from 1 process"
	echo "$m: 12 losses agree to 1e-6"
done

val_invariant "$T/ce_dice.cfg" ce+dice
