#!/bin/sh
# bf16_parity.sh: the engine's --precision bf16 against PyTorch's bf16
# autocast on whole models, each held to float64.
# tests/engine/model_dump --precision bf16 runs a model as unet_parity.sh's
# cases do (forward, loss, backward, two SGD and two AdamW steps from the
# same start); parity.py --bf16 replays the run in PyTorch float64 (the
# reference) and in float32 under torch.autocast("cpu",
# dtype=torch.bfloat16), and requires the engine's error against float64
# to be at most twice autocast's, block by block: the training logits, the
# loss (or within 2^-8 of float64's), the input gradient, every parameter
# gradient, every batchnorm statistic, the eval logits and each step's
# updates (||a - b|| / ||b|| over the block; one tensor of a few values is
# mostly rounding noise in bf16, on both sides).
# Cases: unet_parity.sh's five models (4 channels a layer: the engine's
# small-channel paths) on the CPU's default bf16 set, and two wider ones
# (a U-Net of 16 and 32 channels at 64x64, a classifier of 32 to 128
# channels: Winograd, the direct pairs, the grid's filter gradient) on every
# set the CPU runs: its default, and where it has AVX512_BF16 the dp and
# fma sets (cdp-train(1) CDP_CPU_BF16); without AVX512_BF16, the emulated
# kernels (CDP_CPU_BF16_EMU=1, for tests). Engine errors measured here were
# 0.5 to 1.4 times autocast's (doc/PERFORMANCE.md); bf16 rounding by
# truncation in place of round-to-nearest-even fails the check.
# Also: a comparison that must fail does (the gradients scaled by 1.5).
# Needs torch and numpy in $PYTHON (/usr/bin/python3); skips (77) without.
set -eu
. "${CDP_SRCDIR:-$(dirname "$0")/../..}/tests/parity/parity_env.sh"
models=$src/share/cdpool/models
need_torch bf16_parity
[ -x "$dump" ] || { echo "bf16_parity: no $dump" >&2; exit 99; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

if env CDP_CPU_BF16_EMU=0 "$dump" --precision bf16 -i 3,16,16 -D width=4 -D blocks=1 \
	"$models/classifier.cfg" >/dev/null 2>&1; then
	echo "AVX512_BF16: the default set, dp and fma"
	sets="default dp fma"
else
	echo "no AVX512_BF16: the emulated bf16 kernels"
	CDP_CPU_BF16_EMU=1
	export CDP_CPU_BF16_EMU
	sets=default
fi

# case NAME SET CFG MODEL_DUMP-ARGS...: dump into $tmp/NAME.SET, compare
case_run() {
	name=$1 set=$2 cfg=$3
	shift 3
	d=$tmp/$name.$set
	mkdir "$d"
	case $set in
	default) env= ;;
	*) env="CDP_CPU_ISA=avx512bf16 CDP_CPU_BF16=$set" ;;
	esac
	# AdamW's eps as unet_parity.sh's: its first update a smooth function of g
	if ! env $env "$dump" -s 7 --adam-eps 1e-2 --precision bf16 -p "$d" "$@" "$cfg" \
		>"$d/model.json"; then
		echo "FAIL $name ($set): model_dump failed"
		fail=1
		return
	fi
	if "$PY" "$src/tests/parity/parity.py" "$d/model.json" "$d" --bf16 >"$d/out"; then
		echo "ok   $name ($set): $(sed -n 2p "$d/out")"
	else
		echo "FAIL $name ($set)"
		cat "$d/out"
		fail=1
	fi
}

case_run unet_ce default "$models/unet.cfg" -D width=4 -D depth=2 -D ignore=255 -i 3,32,32 \
	-b 2 -t 2 --ignore-frac 0.1
case_run classifier default "$models/classifier.cfg" -D width=4 -D blocks=2 -i 3,16,16 -b 4
case_run resunet default "$models/resunet.cfg" -D width=4 -D depth=2 -D ignore=255 -i 3,32,32 \
	-b 2 --ignore-frac 0.1
case_run siamese default "$models/siamese-unet.cfg" -D width=4 -D depth=2 -D ignore=255 \
	-i 6,32,32 -b 2 --ignore-frac 0.1
case_run upsample default "$src/tests/parity/upsample.cfg" -i 3,24,24 -b 2
for s in $sets; do
	case_run unet16 "$s" "$models/unet.cfg" -D width=16 -D depth=2 -D ignore=255 -i 3,64,64 \
		-b 2 -t 2 --ignore-frac 0.1
	case_run classifier32 "$s" "$models/classifier.cfg" -D width=32 -D blocks=3 -i 3,32,32 \
		-b 4 -t 2
done

# the comparison catches gradients half again too large
g=$tmp/unet16.default/grads.f32
if [ -f "$g" ]; then
	scale_f32 "$g" 1.5
	must_fail "negative control" "parameter gradients .* FAIL" \
		"$PY" "$src/tests/parity/parity.py" "$tmp/unet16.default/model.json" \
		"$tmp/unet16.default" --bf16
fi
# and a run that is not bf16
mkdir "$tmp/fp32"
"$dump" -s 7 -p "$tmp/fp32" -D width=4 -D blocks=1 -i 3,16,16 "$models/classifier.cfg" \
	>"$tmp/fp32/model.json"
must_fail "an fp32 run is refused" "says precision fp32" \
	"$PY" "$src/tests/parity/parity.py" "$tmp/fp32/model.json" "$tmp/fp32" --bf16
exit $fail
