#!/bin/sh
# tests/gpu/emu/mutate.sh BUILDDIR: checks the checks of kernel_check. Seeds
# one bug at a time (the list below: races, lost barriers, wrong indexing,
# rounding and tie rules) into a copy of the rewritten kernels, builds
# kernel_check with it and runs the group that covers that code. A bug is
# caught when kernel_check fails (a FAIL line or an emulator abort).
# Run by hand, not by make check (one build per bug: a few minutes), after
#   make check TESTS=tests/gpu/kernel_emu.sh
# in BUILDDIR, which writes the build command (BUILDDIR/tests/gpu/emu/build.sh).
# Prints one line per bug: caught, MISSED, STALE (its pattern is no longer
# in the source: update the list) or BROKEN (the mutant does not compile).
# Exits 0 when every bug is caught, 1 otherwise, 2 on a usage error.
set -eu
[ $# -eq 1 ] || { echo "usage: mutate.sh BUILDDIR" >&2; exit 2; }
E=$(cd "$(dirname "$0")" && pwd)
S=$(cd "$E/../../.." && pwd)
build=$1/tests/gpu/emu/build.sh
if [ ! -f "$build" ]; then
	echo "mutate.sh: no '$build': run make check TESTS=tests/gpu/kernel_emu.sh in '$1' first" >&2
	exit 2
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cdpmutate.XXXXXX")
trap 'rm -rf "$T"' EXIT
python3 "$E/mkemu.py" "$S/engine/cuda" "$T/orig" >/dev/null

# file @ kernel_check group @ sed expression @ the bug
bad=0 n=0
while IFS='@' read -r file group expr what; do
	[ -n "$file" ] || continue
	n=$((n + 1))
	rm -rf "$T/gen"
	cp -r "$T/orig" "$T/gen"
	if ! sed -i "$expr" "$T/gen/$file" 2>"$T/sed.err"; then
		echo "BROKEN  $file: $what: sed: $(cat "$T/sed.err")"
		bad=$((bad + 1))
		continue
	fi
	if cmp -s "$T/orig/$file" "$T/gen/$file"; then
		echo "STALE   $file: $what (pattern not found)"
		bad=$((bad + 1))
		continue
	fi
	if ! sh "$build" "$T/gen" "$T/kc" >"$T/build.log" 2>&1; then
		echo "BROKEN  $file: $what: $(grep -m1 error "$T/build.log")"
		bad=$((bad + 1))
		continue
	fi
	set +e
	"$T/kc" "$group" >"$T/out" 2>"$T/err"
	rc=$?
	set -e
	if [ "$rc" -eq 0 ]; then
		echo "MISSED  $file: $what"
		bad=$((bad + 1))
	elif grep -q '^FAIL' "$T/out"; then
		echo "caught  $file: $what ($(grep -c '^FAIL' "$T/out") FAIL lines, first: $(grep -m1 '^FAIL' "$T/out" | cut -c1-90))"
	else
		echo "caught  $file: $what (exit $rc: $(grep -m1 . "$T/err" | cut -c1-90))"
	fi
done <<'EOF'
cuda_kern_int.cuh@losses@0,/__syncthreads();/s//;/@block sum: no barrier between the warps' sums and warp 0 reading them
cuda_kern_int.cuh@elementwise@0,/o = 16; o > 0/s//o = 8; o > 0/@block sum: the shuffle tree starts at 8 lanes, not 16
cuda_kern_int.cuh@losses@s/for (unsigned b = threadIdx.x; b < g;/for (unsigned b = threadIdx.x + 1; b < g;/@second pass skips block 0's partial
cuda_kern_int.cuh@elementwise@s/i += (size_t)gridDim.x \* blockDim.x/i += blockDim.x/@grid-stride loop steps by one block, not the grid
cuda_kern_int.cuh@elementwise@s/\*out = beta == 0.0f ? v : /*out = /@cdk_put reads the output when beta is 0 (garbage leaks)
cuda_kern_elem.cu@elementwise@s/return v < 0.0f ? 0.0f : v;/return v > 0.0f ? v : 0.0f;/@relu turns NaN into 0
cuda_kern_layers.cu@layers@s/if (y0 != iy && y1 != iy)/if ((y0 != iy || a0 == 0.0f) \&\& (y1 != iy || a1 == 0.0f))/@bilinear backward skips a row of weight 0 (inf and NaN in dy, -0)
cuda_kern_layers.cu@layers@s/(nn \* big_c + off + ch)/(nn * big_c + ch)/@channel slices ignore the channel offset
cuda_kern_layers.cu@dropout@s/int keep = cdp_dropout_keep(seed, i, p);/int keep = cdp_dropout_keep(seed + 1, i, p);/@dropout mask drawn from another hash than the CPU's
cuda_kern_int.cuh@batchnorm1@s/double unbiased = m > 1 ? var \* (double)m \/ (double)(m - 1) : var;/double unbiased = var * (double)m \/ (double)(m - 1);/@bn over one value: running variance divided by N*H*W - 1 = 0
cuda_kern_int.cuh@emulator@s/^\tfflush(NULL);$//@a failed launch aborts without flushing stdout
cuda_kern_layers.cu@bias_grad@s/dbias\[ch\] += (float)v\[0\];/dbias[ch] = (float)v[0];/@one-part bias_grad overwrites dbias
cuda_kern_layers.cu@bias_grad@s/b < parts; b += CDK_THREADS/b < parts - 1; b += CDK_THREADS/@bias_grad second pass drops the last part
cuda_kern_pool.cu@maxpool@s/if (v > b || v != v)/if (v >= b || v != v)/@maxpool ties go to the last maximum
cuda_kern_loss.cu@losses@s/\*cnt += w;/*cnt += 1;/@weighted softmax_ce counts pixels, not weights
cuda_kern_loss.cu@losses@s/out\[0\] = d <= 0 ? 0.0/out[0] = d < 0 ? 0.0/@dice: 0/0 when every pixel is ignored and smooth is 0
cuda_kern_loss.cu@losses@/hist\[j\] = 0;/,/__syncthreads();/s/__syncthreads();/;/@confusion: counting starts before the histogram is cleared
cuda_kern_loss.cu@losses@/atomicAdd(&hist/,/__syncthreads();/s/__syncthreads();/;/@confusion: flushing starts before every thread has counted
cuda_kern_prec.cu@half@s/to16(t\[threadIdx.x\]\[j\], /to16(t[j][threadIdx.x], /@to_nhwc tile written untransposed
cuda_kern_prec.cu@half@/from_nhwc_tile_k/,/__syncthreads();/s/__syncthreads();/;/@from_nhwc tile read before it is filled
cuda_kern_optim.cu@optimizers@s/float denom = cdk_add(cdk_div(root, c.bc2s), c.eps)/float denom = cdk_div(cdk_add(root, c.eps), c.bc2s)/@adamw: eps inside the bias correction
cuda_kern_bn.cu@bn_train@s/for (int b = threadIdx.x; b < parts; b += CDK_THREADS) {/for (int b = threadIdx.x + 1; b < parts; b += CDK_THREADS) {/@batchnorm's second passes skip each channel's first part
cuda_kern_bn.cu@bn_train@s/return (nn \* (size_t)c + ch) \* hw + i;/return (nn + ch) * hw + i;/@batchnorm's sums read the wrong planes past the first sample
cuda_kern_bn.cu@bn_train@s/cdk_bn_out(xv, mean\[ch\], cdk_mul(gamma\[ch\], invstd\[ch\]), beta\[ch\], act, slope)/cdk_bn_out(xv, mean[ch], invstd[ch], beta[ch], act, slope)/@batchnorm's forward ignores gamma
cuda_kern_int.cuh@bn_train@s/var \* (double)m \/ (double)(m - 1) : var/var : var/@batchnorm's running variance left biased
cuda_kern_bn.cu@bn_train@s/g = bn_grad(act, slope, cdk_bn_pre(xv, mu, a, beta\[ch\]), g);/;/@batchnorm's dx ignores the activation's mask
cuda_kern_bn.cu@bn_train@s/cdk_put(&dx\[i\], cdk_mul(a, v), dxbeta);/dx[i] = cdk_mul(a, v);/@batchnorm's dx overwrites with beta 1
cuda_kern_deconv.cu@deconv2@s/cdk_put(&o\[2 \* ow\], s2, beta);/cdk_put(\&o[2 * ow], s3, beta);/@deconv2 writes a wrong tap into the second row
cuda_kern_deconv.cu@deconv2@s/w\[((size_t)(t >> 2) \* c + ch) \* 4 + (t & 3)\]/w[((size_t)(t >> 2) * c) * 4 + (t \& 3)]/@deconv2 takes channel 0's weights for every channel
cuda_kern_deconv.cu@deconv2@s/for (int k = 0; k < f; k++)/for (int k = 0; k < f - 1; k++)/@deconv2 drops the last filter
cuda_kern_deconv.cu@deconv2@0,/__syncthreads();/s//;/@deconv2 reads the shared weights before they are loaded
cuda_kern_data.cu@prep_batch@s/cdp_prep_src(\&a, oh, ow, p, q, \&sy, \&sx);/cdp_prep_src(\&a, oh, ow, q, p, \&sy, \&sx);/@prep_batch: output row and column swapped (the geometry itself is backend.h's, the CPU's too)
EOF
echo "mutate.sh: $((n - bad)) of $n seeded bugs caught"
[ "$bad" -eq 0 ]
