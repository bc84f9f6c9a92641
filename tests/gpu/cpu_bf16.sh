#!/bin/sh
# tests/gpu/cpu_bf16.sh and cpu_bf16_emu.sh: the CPU backend's bf16 against
# its fp32, op by op and on whole models, with the tables and tolerances of
# the CUDA tests (test_ops: conv and GEMM within 8 * 2^-8 of the largest
# output; test_model: logits within 0.1, losses 0.05). The "device" side
# is a second CPU backend in bf16 (CDP_GPU_TEST_PEER=cpu).
#  - cpu_bf16.sh: the AMX kernels and the AVX512_BF16 ones (CDP_CPU_ISA=amx,
#    avx512bf16, the latter with CDP_CPU_BF16=dp and =fma), each where the
#    CPU has it; skipped (77) where it has neither;
#  - cpu_bf16_emu.sh: the emulated kernels (CDP_CPU_BF16_EMU=1 with
#    CDP_CPU_ISA=avx2, below any bf16 instructions), on every CPU.
# Each passes when no comparison failed and every bf16 case of the GEMM,
# convolution and model tables compared ok (none skipped).
. "$CDP_SRCDIR/tests/tools/common.sh"
ops=$CDP_BUILDDIR/tests/gpu/test_ops
model=$CDP_BUILDDIR/tests/gpu/test_model
# check ISA: test_ops and test_model with CDP_CPU_ISA=ISA (empty: as set);
# 1 when that ISA has no bf16 kernels here (the bf16 cases skipped)
check() {
	for p in "$ops" "$model"; do
		name=$(basename "$p")
		env ${1:+CDP_CPU_ISA=$1} CDP_GPU_TEST_PEER=cpu "$p" >"$T/$name.out" 2>"$T/$name.err" ||
			fail "$name with the CPU peer ($1): $(tail -20 "$T/$name.err")"
		! grep -q '^FAIL' "$T/$name.out" || fail "$name ($1): $(grep '^FAIL' "$T/$name.out" | head)"
	done
	grep -q '^skip .*bf16' "$T/test_ops.out" && return 1
	missing=
	for pat in 'gemm .* t00 .*bf16' 'gemm .* t01 .*bf16' 'gemm .* t10 .*bf16' \
		'gemm .* t11 .*bf16' 'conv fwd .* k3 s1 .*bf16' 'conv fwd .* k1 s1 .*bf16' \
		'conv fwd .* k2 s2 .*bf16' 'conv bwd_data beta 0 .*bf16' 'conv bwd_data beta 1 .*bf16' \
		'conv bwd_filter dw .*bf16'; do
		grep -q "^ok .*$pat" "$T/test_ops.out" || missing="$missing '$pat'"
	done
	for m in unet classifier; do
		for pat in "$m loss (eval) bf16" "$m forward logits (eval) bf16"; do
			grep -q "^ok   $pat" "$T/test_model.out" || missing="$missing '$pat'"
		done
	done
	[ -z "$missing" ] || fail "not compared in bf16 ($1):$missing"
	echo "bf16 $1${CDP_CPU_BF16:+ ($CDP_CPU_BF16)}${BF16_EMU:+ (emulated)}: $(grep -c '^ok .*bf16' "$T/test_ops.out") op and" \
		"$(grep -c '^ok .*bf16' "$T/test_model.out") model comparisons ok"
	return 0
}

if [ -n "${BF16_EMU:-}" ]; then
	CDP_CPU_BF16_EMU=1
	export CDP_CPU_BF16_EMU
	check avx2 || fail "the emulated bf16 was refused: $(grep '^skip .*bf16' "$T/test_ops.out" | head -2)"
	exit 0
fi
unset CDP_CPU_BF16_EMU
ran=
# avx512bf16 twice: VDPBF16PS's products and the FMAs on rounded operands
# (CDP_CPU_BF16=dp, fma)
for isa in amx avx512bf16:dp avx512bf16:fma; do
	unset CDP_CPU_BF16
	case $isa in *:*) CDP_CPU_BF16=${isa#*:}; export CDP_CPU_BF16 ;; esac
	if check "${isa%:*}"; then
		ran="$ran $isa"
	else
		echo "no $isa kernels on this CPU"
	fi
done
unset CDP_CPU_BF16
[ -n "$ran" ] || { echo "SKIP: this CPU has no AVX512_BF16: the fast bf16 kernels untested"; exit 77; }
