/* cpu_bf16_stash.c: the bf16 stash of activations (backend.h to_bf16 /
 * from_bf16) and the row conversions the CPU's passes share
 * (cpu_bf16_narrow_run, cpu_bf16_widen_run). The same rounding as the
 * GEMM operands' (cpu_gemm_bf16.c), so a stashed tensor holds the values a
 * bf16 convolution would have read from it. Plain C: one pass over
 * memory, which bounds it on any instruction set.
 */
#include <stdint.h>
#include <string.h>
#include "cpu.h"

typedef struct stash_job {
	const float *x; uint16_t *h; const uint16_t *ch; float *y; size_t n;
} stash_job;

/* AVX-512F forms of the two loops (GCC leaves cpu_bf16_bits's NaN test
 * scalar): cpu_bf16_bits on 16 lanes in integers (cpu_bf16x16.h), so the
 * bits are the scalar loop's, NaN and denormals included; the passes then
 * run at memory speed (on the classifier the scalar ones cost 7% of a
 * bf16 step). */
#include "cpu_bf16x16.h"
#ifdef CPU_BF16X16
#define STASH_AVX512 1

__attribute__((target("avx512f"))) static size_t to_bf16_avx512(const float *x, uint16_t *h,
                                                                 size_t n)
{
	size_t t = 0;

	for (; t + 16 <= n; t += 16)
		_mm256_storeu_si256((__m256i *)(h + t), cpu_bf16_bits16(_mm512_loadu_si512(x + t)));
	return t;
}

/* The same bits by VCVTNEPS2BF16 (round to nearest even; a NaN's top
 * half with the quiet bit set, as cpu_bf16_bits), which reads denormal
 * inputs as zeros: a vector holding one goes the integer way. Half the
 * instructions of to_bf16_avx512: its 3% of a classifier step on a Zen 4
 * (the batchnorm forward's copies, rounded while in L1) was compute. */
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static size_t to_bf16_cvt(
	const float *x, uint16_t *h, size_t n)
{
	const __m512i expo = _mm512_set1_epi32(0x7f800000), mant = _mm512_set1_epi32(0x007fffff);
	size_t t = 0;

	for (; t + 16 <= n; t += 16) {
		__m512i u = _mm512_loadu_si512(x + t);
		__m256i r = (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(u));
		if (_mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, expo), u, mant))
			r = cpu_bf16_bits16(u);
		_mm256_storeu_si256((__m256i *)(h + t), r);
	}
	return t;
}

__attribute__((target("avx512f"))) static size_t from_bf16_avx512(const uint16_t *h, float *y,
                                                                   size_t n)
{
	size_t t = 0;

	for (; t + 16 <= n; t += 16) {
		__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + t)));
		_mm512_storeu_si512(y + t, _mm512_slli_epi32(w, 16));
	}
	return t;
}

/* 1: AVX-512F; 2: and AVX512_BF16 (to_bf16_cvt) */
static int stash_avx512(void)
{
	static int has = -1;

	if (has < 0)
		has = !__builtin_cpu_supports("avx512f") ? 0 :
		      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl") ? 2 :
		      1;
	return has;
}
#endif

void cpu_bf16_narrow_run(uint16_t *h, const float *x, size_t n)
{
	size_t t = 0;

#ifdef STASH_AVX512
	if (stash_avx512() == 2)
		t = to_bf16_cvt(x, h, n);
	else if (stash_avx512())
		t = to_bf16_avx512(x, h, n);
#endif
	for (; t < n; t++)
		h[t] = cpu_bf16_bits(x[t]);
}

static void to_bf16_block(void *ctx, int i)
{
	stash_job *j = ctx;
	size_t lo, hi;

	cpu_block_range(j->n, i, &lo, &hi);
	cpu_bf16_narrow_run(j->h + lo, j->x + lo, hi - lo);
}

void cpu_bf16_widen_run(float *y, const uint16_t *h, size_t n)
{
	size_t t = 0;

#ifdef STASH_AVX512
	if (stash_avx512())
		t = from_bf16_avx512(h, y, n);
#endif
	for (; t < n; t++) {
		uint32_t u = (uint32_t)h[t] << 16;
		memcpy(&y[t], &u, sizeof u);
	}
}

static void from_bf16_block(void *ctx, int i)
{
	stash_job *j = ctx;
	size_t lo, hi;

	cpu_block_range(j->n, i, &lo, &hi);
	cpu_bf16_widen_run(j->y + lo, j->ch + lo, hi - lo);
}

void cpu_to_bf16(cdp_backend *be, const float *x, uint16_t *y, size_t n)
{
	stash_job j = { x, y, NULL, NULL, n };

	cpu_parallel_for(be, cpu_nblocks(n), to_bf16_block, &j);
}

void cpu_from_bf16(cdp_backend *be, const uint16_t *x, float *y, size_t n)
{
	stash_job j = { NULL, NULL, x, y, n };

	cpu_parallel_for(be, cpu_nblocks(n), from_bf16_block, &j);
}
