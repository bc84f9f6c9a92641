#!/bin/sh
# reg_losses.sh: the regression losses of loss.h (mse, l1, huber with its
# huber_delta; cdp-model(5), LOSSES) and their gradients against PyTorch's
# MSELoss, L1Loss and HuberLoss (reg_ref.py, float64, autograd) over the
# elements with a target: loss_dump's batch of 3 samples of T outputs and
# 45 pixels, a fifth of the targets NaN and the third sample all but NaN,
# whole and split over two "ranks" ({0} and {1, 2}, their sums added).
# Also: a reference with another huber_delta is refused, and the loss
# options that do not apply are refused.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# find_spec: found without the import's seconds of CPU
"$PYTHON" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null ||
	{ echo "SKIP: no torch in $PYTHON" >&2; exit 77; }
DUMP=$CDP_BUILDDIR/tests/engine/loss_dump
REF=$CDP_SRCDIR/tests/engine/reg_ref.py

# check NAME OUTPUTS KEY=VALUE...: the loss of [net] KEYS with OUTPUTS
# targets, dumped; reg_ref.py compares them all at the end (one torch import)
cases=
check() {
	name=$1 outputs=$2; shift 2
	mkdir "$T/$name"
	{ echo "[net]"; for kv in "$@"; do echo "$kv"; done; } >"$T/$name.cfg"
	"$DUMP" "$T/$name.cfg" "$outputs" "$T/$name" || fail "$name: loss_dump failed"
	cases="$cases $T/$name.cfg $T/$name"
}

check mse 1 loss=mse
check mse3 3 loss=mse
check l1 2 loss=l1
check huber 2 loss=huber
check huber_d 1 loss=huber huber_delta=0.4
check huber_w 2 loss=huber huber_delta=3 loss_weights=0.5
"$PYTHON" "$REF" $cases || fail "differs from PyTorch"

# the comparison can fail: the reference with another delta
sed 's/^huber_delta=0.4$/huber_delta=0.5/' "$T/huber_d.cfg" >"$T/other.cfg"
if "$PYTHON" "$REF" "$T/other.cfg" "$T/huber_d" >"$T/out" 2>&1; then
	fail "reg_ref.py accepts a huber loss computed with another delta"
fi
# refusals: company, class options, a delta of 0
for bad in "loss=mse+dice:stands alone" "loss=huber\nhuber_delta=0:huber_delta" \
	"loss=l1\nclass_weights=1,2:class losses" "loss=mse\nlabel_smoothing=0.1:class losses"; do
	printf '[net]\n%b\n' "${bad%%:*}" >"$T/bad.cfg"
	mkdir -p "$T/bad"
	expect_fail 1 "${bad##*:}" "$DUMP" "$T/bad.cfg" 2 "$T/bad"
done
exit 0
