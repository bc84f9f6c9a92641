#!/bin/sh
# unet_parity.sh: the training engine against PyTorch on whole models.
# tests/engine/model_dump runs a model through the engine (init, forward,
# loss, backward, two SGD steps, two AdamW steps) and writes every result;
# parity.py replays it in PyTorch (float32, and float64 as the reference)
# from the model's JSON and compares each tensor: relative error
# max|a-b| / max(max|b|, tiny) <= 1e-4 (parity.py states tiny and the
# allowance for the optimizer updates).
# Cases, all with batchnorm in training mode:
#   1. unet.cfg width=4 depth=2, 3x32x32, batch 2, 2 classes, loss=ce with
#      10% of the labels ignored (ignore=255), 2 threads;
#   2. the same U-Net with one output and loss=bce+dice, ignore=255;
#   3. classifier.cfg width=4 blocks=2, 3x16x16, batch 4: gap, dropout
#      (PyTorch replays the engine's mask) and dense;
#   4. resunet.cfg width=4 depth=2 (its default loss=bce+dice), 3x32x32,
#      batch 2, ignore=255: residual units ([add]), strided convs, 1x1
#      shortcuts with batchnorm, upsample and concat. AdamW eps 0.1 here:
#      the shortcut batchnorms' betas have an exact gradient of 0 (all
#      their consumers are normalised again), so both sides hold rounding
#      noise there, and AdamW's lr g/(|g| + eps) magnifies it by 1/eps;
#   5. siamese-unet.cfg width=4 depth=2, 6x32x32 (two dates of 3 bands),
#      batch 2, ignore=255: [slice] and weights=, the second date's encoder
#      using the first's parameters and batchnorm statistics. PyTorch's
#      twin calls one module per shared layer twice, so its gradients are
#      the sums over both dates and its running statistics are updated
#      twice, as the engine's must be; model.json lists each shared tensor
#      once (the second branch's layers name the first's in "weights").
#   5b. the same with fusion=2 and fusion=1: the dates' features fused by
#      [diff] abs=1 (|a - b|) and abs=0 (a - b) in place of concatenation,
#      so the shared encoder's gradients come through both signs;
#   6. tests/parity/upsample.cfg, 3x24x24, batch 2: the upsampling of the
#      fpn and deeplabv3plus cfgs (by factors 2 and 3, to a reference's
#      size at ratios 3 and 12/11, nearest and bilinear, a pooled map
#      broadcast) with dilated convs and a 5-way concat.
# Also: a comparison that must fail does (gradients scaled by 1.001), and
# model_dump reports a model that cannot be built.
# Needs torch and numpy in $PYTHON (/usr/bin/python3); skips (77) without.
set -eu
. "${CDP_SRCDIR:-$(dirname "$0")/../..}/tests/parity/parity_env.sh"
models=$src/share/cdpool/models
need_torch unet_parity
[ -x "$dump" ] || { echo "unet_parity: no $dump" >&2; exit 99; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# case NAME CFG MODEL_DUMP-ARGS...: dump into $tmp/NAME, compare
case_run() {
	name=$1 cfg=$2
	shift 2
	mkdir "$tmp/$name"
	# AdamW's first update is lr*g/(|g|+eps): with eps 1e-3 it stays a smooth
	# function of g, so float32 rounding of a near-zero gradient cannot flip it
	# by 2 lr (as it can with 1e-8) and it is comparable to 1e-4.
	if ! "$dump" -s 7 --adam-eps 1e-2 -p "$tmp/$name" "$@" "$cfg" >"$tmp/$name/model.json"; then
		echo "FAIL $name: model_dump failed"
		fail=1
		return
	fi
	if "$PY" "$src/tests/parity/parity.py" "$tmp/$name/model.json" "$tmp/$name"; then
		echo "ok   $name"
	else
		echo "FAIL $name"
		fail=1
	fi
}

case_run unet_ce "$models/unet.cfg" -D width=4 -D depth=2 -D ignore=255 -i 3,32,32 -b 2 \
	-t 2 --ignore-frac 0.1
case_run unet_bce_dice "$models/unet.cfg" -D width=4 -D depth=2 -D outputs=1 \
	-D loss=bce+dice -D ignore=255 -i 3,32,32 -b 2 --ignore-frac 0.1
case_run classifier "$models/classifier.cfg" -D width=4 -D blocks=2 -i 3,16,16 -b 4
case_run resunet "$models/resunet.cfg" -D width=4 -D depth=2 -D ignore=255 -i 3,32,32 -b 2 \
	--ignore-frac 0.1 --adam-eps 0.1
case_run siamese "$models/siamese-unet.cfg" -D width=4 -D depth=2 -D ignore=255 -i 6,32,32 -b 2 \
	--ignore-frac 0.1
if [ -f "$tmp/siamese/model.json" ] && "$PY" -c 'import json, sys
m = json.load(open(sys.argv[1]))
sh = [L for L in m["layers"] if "weights" in L]
assert len(sh) == 8 and all(not L["params"] and not L["buffers"] for L in sh), sh
for L in sh:
    src = m["layers"][L["weights"]]
    assert src["name"] == "a" + L["name"][1:] and src["params"], (L["name"], src["name"])' \
	"$tmp/siamese/model.json"; then
	echo "ok   siamese: 8 layers use the first branch's tensors, listed once"
else
	echo "FAIL siamese: the second branch's layers do not share the first's tensors"
	fail=1
fi
case_run siamese_absdiff "$models/siamese-unet.cfg" -D width=4 -D depth=2 -D fusion=2 \
	-D ignore=255 -i 6,32,32 -b 2 --ignore-frac 0.1
case_run siamese_diff "$models/siamese-unet.cfg" -D width=4 -D depth=2 -D fusion=1 \
	-D ignore=255 -i 6,32,32 -b 2 --ignore-frac 0.1
case_run upsample "$src/tests/parity/upsample.cfg" -i 3,24,24 -b 2

# the comparison catches a gradient off by 0.1%
if [ -f "$tmp/unet_ce/grads.f32" ]; then
	scale_f32 "$tmp/unet_ce/grads.f32" 1.001
	must_fail "negative control" "grad conv0.weight .* FAIL" \
		"$PY" "$src/tests/parity/parity.py" "$tmp/unet_ce/model.json" "$tmp/unet_ce"
fi

# a model that cannot be built: exit 1, the message names file and line
printf '[net]\nchannels=3\nin_h=8\nin_w=8\n[conv]\nfilters=4\n[maxpool]\n' >"$tmp/bad.cfg"
printf '[concat]\nfrom=conv0,maxpool1\n' >>"$tmp/bad.cfg"
must_fail "bad cfg" "bad.cfg:8: layer 'concat2' (concat)" "$dump" "$tmp/bad.cfg"
exit $fail
