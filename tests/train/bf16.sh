#!/bin/sh
# tests/train/bf16.sh: cdp-train and cdp-predict with --precision bf16 on
# the CPU (convolution and GEMM operands rounded to bf16, fp32 sums, fp32
# master weights, batchnorm, losses and optimizer), on the U-Net with
# batchnorm of train_common.sh:
#  - the loss curve of 16 steps follows fp32's: every step within relative
#    0.05 of it, yet not equal to it bit for bit (bf16 is in effect), and
#    train.log names the precision;
#  - with the bf16 stash of activations (net_plan.c; the default) the curve
#    stays within relative 0.02 of bf16's without it (CDP_BF16_STASH=0)
#    (bit for bit where the stash keeps only bf16 values: convolutions'
#    outputs, and what only convolutions read), and train.log says the
#    activations took less memory with it;
#  - bitwise resume in bf16: 8 steps, then --resume to 16, give the losses
#    and the checkpoint's weights of the 16-step run bit for bit;
#  - cdp-predict --precision bf16 maps the scene with fp32's classes on all
#    but 0.5% of the pixels.
# Run on the AVX512_BF16 kernels where the CPU has them, else on the
# emulated ones (CDP_CPU_BF16_EMU=1, for tests): the numbers are bf16's
# either way.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --threads 2 -q --model $UNET --log-every 1 --batch 4 --seed 5"
C="$C --schedule constant --lr 0.01"
if env CDP_CPU_BF16_EMU=0 cdp-train $C --steps 1 --out "$T/probe" --precision bf16 2>/dev/null; then
	echo "AVX512_BF16 kernels"
else
	echo "this CPU has no AVX512_BF16: the emulated bf16 kernels"
	CDP_CPU_BF16_EMU=1
	export CDP_CPU_BF16_EMU
fi

echo "== loss curve, fp32 and bf16"
cdp-train $C --steps 16 --out "$T/fp32" || fail "fp32 run"
cdp-train $C --steps 16 --out "$T/bf16" --precision bf16 || fail "bf16 run"
grep -q 'precision bf16' "$T/bf16/train.log" || fail "train.log does not say bf16"
losses "$T/fp32/metrics.jsonl" >"$T/l.fp32"
losses "$T/bf16/metrics.jsonl" >"$T/l.bf16"
[ "$(wc -l <"$T/l.bf16")" -eq 16 ] || fail "want 16 step lines"
paste "$T/l.fp32" "$T/l.bf16"
! cmp -s "$T/l.fp32" "$T/l.bf16" || fail "bf16 gave fp32's losses bit for bit: not in effect"
losses_close "$T/l.fp32" "$T/l.bf16" 0.05 || fail "bf16's loss curve leaves fp32's by more than 5%"
awk 'NR == 1 { a = $2 } END { exit !($2 < a) }' "$T/l.bf16" || fail "bf16's loss did not fall"

echo "== bf16 without the stash of activations (CDP_BF16_STASH=0)"
CDP_BF16_STASH=0 cdp-train $C --steps 16 --out "$T/nostash" --precision bf16 || fail "bf16 run, no stash"
losses "$T/nostash/metrics.jsonl" >"$T/l.nostash"
paste "$T/l.bf16" "$T/l.nostash"
losses_close "$T/l.nostash" "$T/l.bf16" 0.02 ||
	fail "bf16's loss curve with the stash leaves the one without by more than 2%"
act() { sed -n 's/.*activations \([0-9.]*\) MiB a batch (\([^)]*\)).*/\1 \2/p' "$1/train.log"; }
echo "activations: $(act "$T/bf16"); without the stash: $(act "$T/nostash")"
act "$T/bf16" | grep -q 'bf16 stash' || fail "train.log does not name the stash"
act "$T/nostash" | grep -q 'fp32' || fail "train.log does not say fp32 activations without the stash"
awk -v a="$(act "$T/bf16" | cut -d' ' -f1)" -v b="$(act "$T/nostash" | cut -d' ' -f1)" \
	'BEGIN { exit !(a > 0 && a < 0.8 * b) }' ||
	fail "the stash's activations are not under 0.8 of those without: not in effect"

echo "== resume in bf16"
cdp-train $C --steps 8 --out "$T/half" --precision bf16 || fail "8 steps"
cdp-train $C --steps 16 --out "$T/half" --precision bf16 --resume || fail "resume to 16"
losses "$T/half/metrics.jsonl" >"$T/l.half"
cmp -s "$T/l.bf16" "$T/l.half" || fail "resumed losses differ: $(diff "$T/l.bf16" "$T/l.half" | head -4)"
cmp -s "$T/bf16/checkpoint.cdpt" "$T/half/checkpoint.cdpt" ||
	fail "the resumed checkpoint differs from the uninterrupted one"

echo "== cdp-predict"
cdp-predict -q --device cpu "$T/fp32" "$T/c3.tif" -o "$T/p32.tif" || fail "predict fp32"
cdp-predict -q --device cpu --precision bf16 "$T/fp32" "$T/c3.tif" -o "$T/p16.tif" ||
	fail "predict bf16"
"$PYTHON" - "$T/p32.tif" "$T/p16.tif" <<'PY' || fail "the bf16 map differs from fp32's"
import sys
from osgeo import gdal
a = gdal.Open(sys.argv[1]).ReadAsArray()
b = gdal.Open(sys.argv[2]).ReadAsArray()
same = (a == b).mean()
print("bf16 map agrees with fp32 on %.4f of the pixels" % same)
sys.exit(0 if a.shape == b.shape and same >= 0.995 else 1)
PY
