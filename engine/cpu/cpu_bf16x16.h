/* cpu_bf16x16.h: cpu_bf16_bits (cpu.h) on 16 lanes of AVX-512F, in
 * integers, so the bits are the scalar function's, NaN and denormals
 * included (VCVTNEPS2BF16 reads denormals as zeros): for the stash's
 * conversions (cpu_bf16_stash.c) and the kernels that store their output
 * as bf16 (cpu_conv_pairs.c). Where GCC targets x86 (CPU_BF16X16). */
#ifndef CDP_CPU_BF16X16_H
#define CDP_CPU_BF16X16_H

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CPU_BF16X16 1

/* the 16 floats of u (their bits) rounded to bf16, the bits a lane */
__attribute__((target("avx512f"), always_inline)) static inline __m256i cpu_bf16_bits16(__m512i u)
{
	const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i quiet = _mm512_set1_epi32(0x40);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
	__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half,
	                             _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));

	r = _mm512_srli_epi32(r, 16);
	r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
	return _mm512_cvtepi32_epi16(r);
}
#endif

#endif
