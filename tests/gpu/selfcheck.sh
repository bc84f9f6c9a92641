#!/bin/sh
# tests/gpu/selfcheck.sh: the GPU tests' harness on any machine. Runs
# tests/gpu/test_ops and test_model with CDP_GPU_TEST_PEER=cpu, where the
# "device" side is a second CPU backend at another thread count, so every
# test body and every comparison runs without a GPU. Passes when both
# programs pass, no comparison failed, every op of the backend table was
# compared (the list below names each one's output line), an op made
# wrong on purpose on the peer side (CDP_GPU_TEST_BREAK) is caught, and an
# abort on the peer side (CDP_GPU_TEST_BREAK=abort) leaves every result
# printed before it in the log.
. "$CDP_SRCDIR/tests/tools/common.sh"
ops=$CDP_BUILDDIR/tests/gpu/test_ops
model=$CDP_BUILDDIR/tests/gpu/test_model

n=$("$ops" --count-devices) || fail "test_ops --count-devices failed"
case $n in ''|*[!0-9]*) fail "test_ops --count-devices printed '$n'" ;; esac
echo "CUDA devices: $n"

for p in "$ops" "$model"; do
	name=$(basename "$p")
	CDP_GPU_TEST_PEER=cpu "$p" >"$T/$name.out" 2>"$T/$name.err" ||
		fail "$name with the CPU peer: $(tail -20 "$T/$name.err")"
	tail -1 "$T/$name.out"
	! grep -q '^FAIL' "$T/$name.out" || fail "$name: $(grep '^FAIL' "$T/$name.out" | head)"
done

# one pattern per op (or op mode) of backend.h; each must have compared ok
missing=
for pat in 'gemm .* t00' 'gemm .* t01' 'gemm .* t10' 'gemm .* t11' 'axpy + scale' ' add n=' ' add (' \
	'sumsq' 'fill' 'conv fwd ' 'conv fwd no bias' 'conv bwd_data beta 0' 'conv bwd_data beta 1' \
	'conv bwd_filter dw' 'conv bwd_filter dbias' 'conv bwd_filter without dbias' \
	'bn train y' 'bn running var' 'bn saved invstd' 'bn bwd dx beta 0' 'bn bwd dx beta 1' \
	'bn bwd dgamma' 'bn infer y' 'bn relu train y' 'bn relu bwd dx beta 0' \
	'bn relu bwd dgamma' 'bn leaky 0.1 bwd dx beta 1' 'bn leaky 0.1 infer y' 'relu fwd' 'relu bwd beta 0' 'leaky 0.1 fwd' \
	'leaky 0.1 bwd beta 1' 'maxpool fwd' 'maxpool bwd beta 0' 'maxpool bwd window sums' \
	'avgpool fwd' 'avgpool bwd beta 1' 'upsample nearest fwd' 'upsample nearest bwd beta 0' \
	'upsample bilinear fwd' 'upsample bilinear bwd beta 1' 'upsample bilinear bwd beta 0 .* -> (7,9)' \
	'upsample nearest fwd .* -> (20,16)' 'upsample bilinear fwd (2,5,1,1) -> (16,16)' 'chan_copy beta 0' \
	'chan_copy beta 1' 'chan_slice beta 0' 'chan_slice beta 1' 'dropout mask' 'dropout fwd' \
	'dropout bwd beta 0' 'gap fwd' 'gap bwd beta 1' 'bias_add' 'bias_grad' \
	'softmax_ce loss .*weighted' 'softmax_ce dlogits .*ignore 255' 'softmax_ce count' \
	'bce loss' 'bce dlogits' 'dice loss smooth 0' 'dice dlogits' 'argmax (.,1,' 'argmax' \
	'confusion' 'sgd 3 steps: update .*nesterov' 'sgd 3 steps: momentum' 'adamw step 3' \
	'adamw 3 steps: v' 'prep_batch img u8' 'prep_batch img i16' 'prep_batch img f32' \
	'prep_batch labels' 'win_gather .* grid' 'win_gather .* scattered' 'win_blend k 1 ' \
	'win_blend k 40 ' 'data path: host_alloc' 'data path: both sides'; do
	grep -q "^ok .*$pat" "$T/test_ops.out" || missing="$missing '$pat'"
done
for m in unet classifier; do
	for pat in 'params after init' 'forward logits (train mode)' 'batchnorm running' 'loss (ce)' \
		'grad .*weight' 'sgd update' 'adamw update (' 'adamw update near' \
		'forward logits (eval mode)'; do
		grep -q "^ok   $m $pat" "$T/test_model.out" || missing="$missing '$m $pat'"
	done
done
[ -z "$missing" ] || fail "not compared:$missing"
# an op made wrong on purpose (CDP_GPU_TEST_BREAK) must fail its comparison
for op in 'conv_bwd_filter:conv bwd_filter dw' 'dropout_fwd:dropout mask' \
	'adamw_step:adamw step 1: update'; do
	name=${op%%:*} pat=${op#*:}
	set +e
	CDP_GPU_TEST_PEER=cpu CDP_GPU_TEST_BREAK=$name "$ops" >"$T/broken.out" 2>&1
	rc=$?
	set -e
	[ "$rc" -eq 1 ] || fail "$name broken on purpose: test_ops exited $rc, want 1"
	grep -q "^FAIL $pat" "$T/broken.out" || fail "$name broken on purpose: no FAIL '$pat'"
	echo "$name broken on purpose: caught ($(grep -c '^FAIL' "$T/broken.out") comparisons failed)"
done
# an abort (what a failed CUDA call does) must not lose the results printed
# before it, with stdout a file as under run-device.sh: the log ends with
# the comparison made just before the first convolution
set +e
CDP_GPU_TEST_PEER=cpu CDP_GPU_TEST_BREAK=abort "$ops" >"$T/abort.out" 2>"$T/abort.err"
rc=$?
set -e
[ "$rc" -gt 128 ] || fail "CDP_GPU_TEST_BREAK=abort: test_ops exited $rc, want a signal (abort)"
want=$(sed -n '/^ok   conv fwd /{g;p;q;};h' "$T/test_ops.out")
[ -n "$want" ] || fail "no conv fwd line in the normal run"
[ "$(tail -n 1 "$T/abort.out")" = "$want" ] ||
	fail "after an abort the log ends with '$(tail -n 1 "$T/abort.out" | cut -c1-60)', want '$want'"
echo "an abort in conv_fwd: the $(wc -l <"$T/abort.out") lines before it are in the log"
# the reduced-precision cases are the only ones the CPU peer may skip
grep '^skip' "$T/test_ops.out" "$T/test_model.out" | grep -v 'the CPU peer refuses this precision' &&
	fail "unexpected skips"
echo "every op compared on both sides: $(grep -c '^ok' "$T/test_ops.out") op comparisons," \
	"$(grep -c '^ok' "$T/test_model.out") model comparisons"
exit 0
