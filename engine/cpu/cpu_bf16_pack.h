/* cpu_bf16_pack.h: what the two sets of bf16 products on AVX-512 share
 * (cpu_gemm_bf16.c's VDPBF16PS kernels, cpu_gemm_amx.c's tiles): A packed
 * into bf16 pairs along k in a buffer per thread, the conversions of fp32
 * rows into pairs (where the compiler has the intrinsics: CPU_BF16_KERNELS,
 * cpu.h), and the emulated products both fall back to. Private to those
 * two files.
 */
#ifndef CDP_CPU_BF16_PACK_H
#define CDP_CPU_BF16_PACK_H

#include "cpu.h"

/* The emulated set's products (cpu_gemm_bf16.c), B by rows ldb apart or by
 * row offsets tab (nts: ns segments of seg, as apart in A, bs in B): what
 * the fast sets fall back to when out of memory. */
void cpu_bf16e_nn_any(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                      long ldb, const long *tab, float beta, float *c, long ldc);
void cpu_bf16e_nts_any(int m, int n, int ns, int seg, const float *a, long lda, long as,
                       const float *b, long ldb, const long *tab, long bs, float *c, long ldc);

#ifdef CPU_BF16_KERNELS
#include <immintrin.h>
#include <stdint.h>

/* nt's block of k (in floats) over which one pass sums */
#define NT_KC 1024

/* A packed as bf16 pairs: a buffer per thread, freed when the thread ends */
typedef struct pack_buf {
	uint32_t *p;
	size_t cap;
	uint32_t *bv;            /* AMX: B's column block in pairs (amx_nn) */
	size_t bvcap;
	int tiles;               /* AMX: this thread's tiles are configured */
	/* what p holds: A's address, shape and strides, and the op */
	const float *a;
	int m, k;
	long rs, cs;
	unsigned long op;
} pack_buf;

/* this thread's buffers (freed when the thread ends); NULL when out of
 * memory */
pack_buf *cpu_bf16_buf(void);

/* A (m x k, rows rs apart, columns cs) packed into this thread's buffer:
 * ap[i * pack_stride(k) + p] = bf16(A[i, 2p]) | bf16(A[i, 2p+1]) << 16, 0
 * past K and past M (rows to a multiple of 16); packed once per op
 * (cpu_bf16_new_op) for the same A. NULL when out of memory. */
const uint32_t *cpu_bf16_pack_get(int m, int k, const float *a, long rs, long cs);

/* The row stride of packed A in pairs: K/2 rounded up to whole AMX tile
 * rows (16 pairs); the rows are padded to 16 as well, with zeros. */
static inline long pack_stride(int k)
{
	return ((k + 1) / 2 + 15) / 16 * 16;
}

#define BF_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw")))
#define BF_INLINE BF_TARGET __attribute__((always_inline)) static inline

/* 16 columns of rows r0 and r1 (NULL: zeros) as (r0[j], r1[j]) bf16 pairs */
BF_INLINE __m512bh pair_rows(const float *r0, const float *r1, __mmask16 msk, __m512i idx)
{
	__m512 x0 = _mm512_maskz_loadu_ps(msk, r0);
	__m512 x1 = r1 ? _mm512_maskz_loadu_ps(msk, r1) : _mm512_setzero_ps();
	__m512bh h = _mm512_cvtne2ps_pbh(x1, x0);
	return (__m512bh)_mm512_permutexvar_epi16(idx, (__m512i)h);
}

static inline __mmask16 mask_of(int r)
{
	return r <= 0 ? 0 : r >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << r) - 1u);
}

/* The permutation that turns VCVTNE2PS2BF16's halves (row k's 16 values,
 * then row k+1's) into 16 pairs (k, k+1) */
BF_INLINE __m512i pair_idx(void)
{
	int16_t ix[32];

	for (int j = 0; j < 16; j++) {
		ix[2 * j] = (int16_t)j;
		ix[2 * j + 1] = (int16_t)(16 + j);
	}
	return _mm512_loadu_si512(ix);
}

/* 32 floats (masks m0, m1 for the two halves) as 32 bf16 */
BF_INLINE __m512bh cvt32(const float *p, __mmask16 m0, __mmask16 m1)
{
	return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, p + 16), _mm512_maskz_loadu_ps(m0, p));
}
#endif
#endif
