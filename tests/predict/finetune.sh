#!/bin/sh
# tests/predict/finetune.sh: the fine-tuning controls of cdp-train end to
# end (cdp-train(1), Fine-tuning) on chips.sh's 20 scene chips of 16x16:
# torchvision's resnet18 (seeded) imported by python3 -m cdpool import-torch,
# then cdp-train --init with --freeze conv1,bn1,layer* (the encoder):
#  - after 2 epochs (4 steps at a constant lr 0.05 (resnet18.cfg's cosine
#    schedule depends on the run's length), momentum, weight decay) every
#    encoder tensor, batchnorm running statistics included, still equals
#    torchvision's bit for bit;
#  - --resume with --unfreeze-at 2 and --epochs 3: the encoder trains in
#    epoch 2 (weights and running statistics change), train.log says so;
#  - that resumed run's weights and statistics equal an uninterrupted
#    3-epoch run's bit for bit;
#  - on 2 ranks under mpirun (when $MPIRUN is set) the frozen encoder stays
#    torchvision's too;
#  - [net] lr_mult= of several patterns given in an override, separated by
#    ';' (lr_mult=conv1:0;bn1:0;layer*:0), holds the encoder's weights;
#  - a pattern matching no layer, and --unfreeze-at without --freeze, are
#    refused; so is an override whose value holds a comma, in the words of
#    the cfg parser, by cdp-train and import-torch alike.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/predict/r18_init.sh"
CFG="$R18:classes=5"
ENC='conv1,bn1,layer*'
cdp-keyshuffle -q -o "$T/k" "$T/pool"
train() {
	out=$1
	shift
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/$out" --batch 10 --threads 1 \
		--lr 0.05 --schedule constant --warmup 0 --weight-decay 0.001 --model "$CFG" "$@" ||
		fail "cdp-train $out $*"
}
# check RUN 1|0 MESSAGE: RUN's checkpoint as it is now, with 1: the encoder
# as torchvision's, the head not; 0: the encoder not as torchvision's. The
# checks run together in check_all, in one Python (torch's import costs
# seconds of CPU a start).
check() {
	n=$(($(wc -l <"$T/checks") + 1))
	cp "$T/$1/checkpoint.cdpt" "$T/check$n.cdpt"
	printf '%s\t%s\t%s\n' "$T/check$n.cdpt" "$2" "$1: $3" >>"$T/checks"
}
: >"$T/checks"
check_all() {
	"$PYTHON" -c '
import sys, numpy as np, torch
from cdpool import load_checkpoint
sd = torch.load(sys.argv[1])
names = {"w": "weight", "b": "bias", "mean": "running_mean", "var": "running_var"}
bad_runs = []
for line in open(sys.argv[2]):
    path, frozen, what = line.rstrip("\n").split("\t")
    ck = load_checkpoint(path)
    same = {}
    for d in (ck.params, ck.buffers):
        for name, t in d.items():
            layer, suf = name.rsplit(".", 1)
            if layer != "fc":
                same[name] = np.array_equal(t, sd[layer + "." + names[suf]].numpy())
    if len(same) != 60 + 40:
        bad_runs.append("%s (%d tensors)" % (what, len(same)))
    elif frozen == "1":
        bad = [k for k, v in same.items() if not v]
        if bad:
            bad_runs.append("%s (frozen tensors changed: %s)" % (what, bad[:5]))
    else:
        bad = [k for k in ("conv1.w", "layer1.0.conv1.w", "layer4.1.bn2.w", "bn1.mean",
                           "layer2.0.bn1.var") if same[k]]
        if bad:
            bad_runs.append("%s (%s did not train after the unfreeze)" % (what, bad))
assert not bad_runs, "; ".join(bad_runs)' "$T/r18.pth" "$T/checks" || fail "the encoder checks"
}

echo "== frozen encoder"
train a --epochs 2 --init "$T/init.cdpt" --freeze "$ENC" --unfreeze-at 2
check a 1 "the frozen encoder changed, or the head did not train"
grep -qF "frozen: 48 layers (--freeze $ENC) until epoch 2" "$T/a/train.log" ||
	fail "train.log: $(cat "$T/a/train.log")"
"$PYTHON" -c '
import sys
from cdpool import load_checkpoint
ck = load_checkpoint(sys.argv[1])
assert ck.step == 4 and ck.epoch == 2, (ck.step, ck.epoch)' "$T/a/checkpoint.cdpt" ||
	fail "run a did not stop after 2 epochs"

# two ranks (when $MPIRUN is set): the frozen tensors' zero gradients go
# through the all-reduce and they stay torchvision's
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	echo "== frozen encoder, 2 ranks"
	mp="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || mp="$mpirun --allow-run-as-root --oversubscribe -np 2"
	CDP_DIST_TIMEOUT=60 $mp cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/m" --batch 5 \
		--threads 1 --lr 0.05 --epochs 1 --model "$CFG" --init "$T/init.cdpt" --freeze "$ENC" ||
		fail "cdp-train on 2 ranks"
	check m 1 "the frozen encoder changed on 2 ranks"
fi

echo "== --resume, unfrozen at epoch 2"
train a --epochs 3 --resume --freeze "$ENC" --unfreeze-at 2
check a 0 "the encoder did not train after --unfreeze-at"
grep -qF "unfrozen at epoch 2: every layer trains" "$T/a/train.log" ||
	fail "train.log: $(cat "$T/a/train.log")"

echo "== uninterrupted run equals the resumed one"
train b --epochs 3 --init "$T/init.cdpt" --freeze "$ENC" --unfreeze-at 2
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
a, b = load_checkpoint(sys.argv[1]), load_checkpoint(sys.argv[2])
assert a.step == b.step == 6
for d, e in ((a.params, b.params), (a.buffers, b.buffers)):
    bad = [k for k in d if not np.array_equal(d[k], e[k])]
    assert not bad, bad[:5]
assert np.array_equal(a.optim["v"], b.optim["v"])' "$T/a/checkpoint.cdpt" "$T/b/checkpoint.cdpt" ||
	fail "the resumed run differs from the uninterrupted one"
check_all

echo "== lr_mult of several patterns in an override (';')"
cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/lm" --batch 10 --threads 1 --steps 2 \
	--lr 0.05 --schedule constant --warmup 0 --weight-decay 0.001 --init "$T/init.cdpt" \
	--model "$R18:classes=5,lr_mult=conv1:0;bn1:0;layer*:0" || fail "lr_mult with ';'"
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
a, b = load_checkpoint(sys.argv[1]), load_checkpoint(sys.argv[2])
moved = [k for k in a.params if not np.array_equal(a.params[k], b.params[k])]
assert len(a.params) == 60 and not moved, moved[:5]' "$T/init.cdpt" "$T/lm/checkpoint.cdpt" ||
	fail "lr_mult=conv1:0;bn1:0;layer*:0 moved the encoder"

echo "== refusals"
# a comma inside an override's value splits it: both tools name the item
expect_fail 2 "^cdp-train: $R18: override 'bn1:0.1': expected key=value\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/c" --batch 10 --steps 1 \
	--model "$R18:classes=5,lr_mult=conv1:0.1,bn1:0.1"
expect_fail 1 "^cdpool: $R18: override 'bn1:0.1': expected key=value\$" \
	"$PYTHON" -m cdpool import-torch "$T/r18.pth" --model "$R18:classes=5,lr_mult=conv1:0.1,bn1:0.1" \
	-o "$T/c.cdpt"
expect_fail 1 "--freeze: 'encoder.' matches no layer name" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/c" --batch 10 --steps 1 --threads 1 \
	--model "$CFG" --freeze 'conv1,encoder*'
expect_fail 2 "--unfreeze-at needs --freeze" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/c" --batch 10 --steps 1 --unfreeze-at 1 \
	--model "$CFG"
exit 0
