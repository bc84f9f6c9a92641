#!/bin/sh
# losses.sh: every loss of loss.h (cdp-model(5), LOSSES) and its gradient
# against PyTorch. tests/engine/loss_dump computes one loss on a generated
# batch (3 samples of 45 pixels, a fifth of the labels ignored, the last
# class absent, the third sample all but ignored) and as two "ranks"
# ({0} and {1, 2}, their sums added, each finishing with the totals);
# loss_ref.py recomputes it with cdpool's PyTorch twin (torch_model.loss_fn,
# written from the definitions; PyTorch 1.13, float64, autograd) and wants the loss to 1e-9 relative and both gradients to
# 2e-5 of their largest entry. Softmax cases have 4 classes (3 in the
# three-term sum), sigmoid cases 2 (one channel). Also: loss_ref.py
# rejects a loss whose gradient is off (focal_gamma changed on one side).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# find_spec: found without the import's seconds of CPU
"$PYTHON" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null ||
	{ echo "SKIP: no torch in $PYTHON" >&2; exit 77; }
DUMP=$CDP_BUILDDIR/tests/engine/loss_dump
REF=$CDP_SRCDIR/tests/engine/loss_ref.py
# loss_ref.py imports the torch twin, python/cdpool/torch_model.py
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE

# check NAME CLASSES KEY=VALUE...: the loss of [net] KEYS at CLASSES,
# dumped; loss_ref.py compares them all at the end (one torch import)
cases=
check() {
	name=$1 classes=$2; shift 2
	mkdir "$T/$name"
	{ echo "[net]"; echo "ignore=255"; for kv in "$@"; do echo "$kv"; done; } >"$T/$name.cfg"
	"$DUMP" "$T/$name.cfg" "$classes" "$T/$name" || fail "$name: loss_dump failed"
	cases="$cases $T/$name.cfg $T/$name"
}

check ce 4 loss=ce
check ce_ls 4 loss=ce label_smoothing=0.1 class_weights=1,2,0.5,3
check focal 4 loss=focal
check focal_alpha 4 loss=focal focal_gamma=1.5 focal_alpha=0.25,0.5,1,2
check focal_g0 4 loss=focal focal_gamma=0 focal_alpha=0.5
check focal_bin 2 loss=focal focal_gamma=2 focal_alpha=0.25
check focal_bin2 2 loss=focal focal_gamma=0.5 focal_alpha=0.3,0.7
check dice 4 loss=dice dice_smooth=0
check dice_s 4 loss=dice
check jaccard 4 loss=jaccard dice_smooth=0.5
check tversky 4 loss=tversky tversky_alpha=0.3 tversky_beta=0.7 dice_smooth=0
check lovasz 4 loss=lovasz
check dice_bin 2 loss=dice
check jaccard_bin 2 loss=jaccard
check tversky_bin 2 loss=tversky tversky_alpha=0.7 tversky_beta=0.3
check lovasz_bin 2 loss=lovasz
check ce_dice 4 loss=ce+dice loss_weights=1,0.5
check bce_dice 2 loss=bce+dice loss_weights=0.7,0.3
check three 3 loss=focal+lovasz+jaccard loss_weights=1,0.25,2 dice_smooth=0
check ce_ls_tv 4 loss=ce+tversky label_smoothing=0.2
# semicolons between a list's items, as a --model override must give them
check semi 4 loss=ce+dice 'loss_weights=1;0.5' 'class_weights=1;2;0.5;3'
check semi_focal 4 loss=focal focal_gamma=1.5 'focal_alpha=0.25;0.5;1;2'
"$PYTHON" "$REF" $cases || fail "differs from PyTorch"

# the comparison can fail: the reference with another gamma
sed 's/^focal_gamma=1.5$/focal_gamma=1.6/' "$T/focal_alpha.cfg" >"$T/other.cfg"
if "$PYTHON" "$REF" "$T/other.cfg" "$T/focal_alpha" >"$T/out" 2>&1; then
	fail "loss_ref.py accepts a focal loss computed with another gamma"
fi
echo "a loss computed with another focal_gamma is refused"
