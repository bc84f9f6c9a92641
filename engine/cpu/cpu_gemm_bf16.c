/* cpu_gemm_bf16.c: the kernels of cpu_gemm.c for CDP_PREC_BF16: the same
 * five products (nn, nn_tab, nt, nt_tab, nt_seg, same arguments, fp32 in
 * memory), with every element of A and B rounded to bf16 (round to nearest
 * even, as VCVTNE2PS2BF16 does) and the products summed in fp32. A product
 * of two bf16 values is exact in fp32, so the only rounding besides the
 * operands' is that of the fp32 sums, as in PyTorch's CPU autocast.
 *
 * Three sets:
 *  - amx (AMX-TILE and AMX-BF16, granted by the kernel; Sapphire Rapids and
 *    later): nn and nt on tiles (cpu_gemm_amx.c: TDPBF16PS,
 *    16 x 16 x 32 per instruction); the implicit convolutions' forward and
 *    data gradient go to cpu_conv_pairs.c instead, whose slice is already in
 *    the tiles' pairs.
 *  - avx512bf16 (the CPU has AVX512_BF16, AVX512F and AVX512BW): VDPBF16PS
 *    adds two products of bf16 pairs to each fp32 lane.
 *    nn: A (the filters) is packed into bf16 pairs along k in a buffer
 *      per thread, once per op (cpu_bf16_new_op); each pair of B's rows
 *      k, k+1 is converted (VCVTNE2PS2BF16) and interleaved (VPERMW) into
 *      16 column pairs, and a tile of 8 rows x 32 columns of C takes 16
 *      VDPBF16PS per pair of k, where fp32 takes 32 FMAs. Columns past
 *      the last 16 use masked loads and stores, so there is no scalar tail.
 *      The implicit convolutions' forward and data gradient of more than
 *      8 channels go to cpu_conv_pairs.c, whose slice is already in
 *      pairs: no conversion in its products.
 *    nt: dot products along k, A's and B's rows converted 32 floats at a
 *      time (the same permutation on both sides leaves a dot product
 *      unchanged), 4 x 6 per tile, the last partial step masked.
 *    Where VDPBF16PS issues at half the rate of FMA (measured on a
 *    Sapphire Rapids VM), this set is slower than fp32; see
 *    doc/PERFORMANCE.md. There the avx512bf16-fma set (cpu_gemm_bf16r.c,
 *    the default on Intel CPUs without AMX) computes the same products
 *    with cpu_gemm.c's FMAs on rounded operands.
 *  - emulated: plain C with the rounding done in software. It exists for
 *    the tests of CPUs without AVX512_BF16 (cpu_gemm.c uses it only with
 *    CDP_CPU_BF16_EMU=1 in the environment) and is slow.
 * Every sum is in a fixed order that depends on K only, as in cpu_gemm.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_bf16_pack.h"

#define KC 128               /* even: pairs of k never straddle a block */

/* ---- the emulated set ---- */

#define R cpu_bf16_round

void cpu_bf16e_nn_any(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                      long ldb, const long *tab, float beta, float *c, long ldc)
{
	for (int i = 0; i < m; i++) {
		float *ci = c + i * ldc;
		for (int j = 0; j < n; j++)
			ci[j] = beta != 0.0f ? beta * ci[j] : 0.0f;
		for (int q = 0; q < k; q++) {
			float ra = R(a[i * rs + q * cs]);
			const float *bq = b + (tab ? tab[q] : q * ldb);
			for (int j = 0; j < n; j++)
				ci[j] += ra * R(bq[j]);
		}
	}
}

void cpu_bf16e_nts_any(int m, int n, int ns, int seg, const float *a, long lda, long as,
                       const float *b, long ldb, const long *tab, long bs, float *c, long ldc)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			const float *bj = b + (tab ? tab[j] : j * ldb);
			float s = 0.0f;
			for (int t = 0; t < ns; t++)
				for (int q = 0; q < seg; q++)
					s += R(a[i * lda + t * as + q]) * R(bj[t * bs + q]);
			c[i * ldc + j] += s;
		}
}

#undef R

/* The five entry points of a set over its nn and segmented nt code. */
#define BF16_ENTRIES(p, nn_any, nts_any) \
	void p##_nn(int m, int n, int k, const float *a, long rs, long cs, const float *b, \
	            long ldb, float beta, float *c, long ldc) \
	{ nn_any(m, n, k, a, rs, cs, b, ldb, NULL, beta, c, ldc); } \
	void p##_nn_tab(int m, int n, int k, const float *a, long rs, long cs, const float *b, \
	                const long *tab, float beta, float *c, long ldc) \
	{ nn_any(m, n, k, a, rs, cs, b, 0, tab, beta, c, ldc); } \
	void p##_nt(int m, int n, int k, const float *a, long lda, const float *b, long ldb, \
	            float *c, long ldc) \
	{ nts_any(m, n, 1, k, a, lda, 0, b, ldb, NULL, 0, c, ldc); } \
	void p##_nt_tab(int m, int n, int k, const float *a, long lda, const float *b, \
	                const long *tab, float *c, long ldc) \
	{ nts_any(m, n, 1, k, a, lda, 0, b, 0, tab, 0, c, ldc); } \
	void p##_nt_seg(int m, int n, int ns, int seg, const float *a, long lda, long as, \
	                const float *b, const long *tab, long bs, float *c, long ldc) \
	{ nts_any(m, n, ns, seg, a, lda, as, b, 0, tab, bs, c, ldc); }

BF16_ENTRIES(cpu_bf16e, cpu_bf16e_nn_any, cpu_bf16e_nts_any)

/* ---- the avx512bf16 set ---- */
#ifdef CPU_BF16_KERNELS
#include <immintrin.h>

/* Numbers the ops (cpu_bf16_new_op): the products of one op read the same
 * A (the weights) many times, each call of an implicit convolution's
 * output row for instance, so a thread packs it once per op; a weight
 * can only change between ops. */
static unsigned long op_count;

void cpu_bf16_new_op(void)
{
	__atomic_add_fetch(&op_count, 1, __ATOMIC_RELAXED);
}

unsigned long cpu_bf16_op(void)
{
	return __atomic_load_n(&op_count, __ATOMIC_RELAXED);
}

static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;

static void pack_free(void *v)
{
	pack_buf *pb = v;
	free(pb->bv);
	free(pb->p);
	free(pb);
}

static void pack_key_make(void) { pthread_key_create(&pack_key, pack_free); }

/* this thread's buffers (cpu_bf16_pack.h) */
pack_buf *cpu_bf16_buf(void)
{
	pack_buf *pb;

	pthread_once(&pack_once, pack_key_make);
	if (!(pb = pthread_getspecific(pack_key))) {
		if (!(pb = calloc(1, sizeof *pb)))
			return NULL;
		if (pthread_setspecific(pack_key, pb) != 0) {
			free(pb);
			return NULL;
		}
	}
	return pb;
}

static void pack_a(int m, int k, const float *a, long rs, long cs, uint32_t *ap);

/* cpu_bf16_pack.h: A packed (pack_a) in this thread's buffer, once per op */
const uint32_t *cpu_bf16_pack_get(int m, int k, const float *a, long rs, long cs)
{
	size_t n = (size_t)(m + 15) / 16 * 16 * pack_stride(k);
	unsigned long op = __atomic_load_n(&op_count, __ATOMIC_RELAXED);
	pack_buf *pb = cpu_bf16_buf();

	if (!pb)
		return NULL;
	if (pb->p && pb->a == a && pb->m == m && pb->k == k && pb->rs == rs && pb->cs == cs &&
	    pb->op == op)
		return pb->p;
	if (pb->cap < n) {
		free(pb->p);
		pb->cap = 0;
		pb->a = NULL;
		if (!(pb->p = malloc(n * sizeof *pb->p)))
			return NULL;
		pb->cap = n;
	}
	pack_a(m, k, a, rs, cs, pb->p);
	pb->a = a;
	pb->m = m;
	pb->k = k;
	pb->rs = rs;
	pb->cs = cs;
	pb->op = op;
	return pb->p;
}

/* One row: ap[p] = bf16(a[2p cs]) | bf16(a[(2p+1) cs]) << 16 for the
 * pack_stride(k) pairs, 0 past K */
static void pack_row(int k, const float *a, long cs, uint32_t *ap)
{
	for (long p = 0; p < pack_stride(k); p++) {
		uint32_t lo = 2 * p < k ? cpu_bf16_bits(a[2 * p * cs]) : 0;
		uint32_t hi = 2 * p + 1 < k ? cpu_bf16_bits(a[(2 * p + 1) * cs]) : 0;
		ap[p] = lo | hi << 16;
	}
}

/* ap[i*k2 + p] = bf16(A[i, 2p]) | bf16(A[i, 2p+1]) << 16, 0 past K and
 * past M (k2 = pack_stride(k), rows to a multiple of 16) */
static void pack_a(int m, int k, const float *a, long rs, long cs, uint32_t *ap)
{
	long k2 = pack_stride(k);
	int mp = (m + 15) / 16 * 16;

	for (int i = 0; i < m; i++)
		pack_row(k, a + i * rs, cs, ap + (size_t)i * k2);
	memset(ap + (size_t)m * k2, 0, (size_t)(mp - m) * k2 * sizeof *ap);
}

#define NN_MR 8

/* Column j of a row zipped in pairs (cpu_bf16f_nn_cp's B, cpu_bf16f_nn_zip's
 * C) at row + (j / cpr) rstep + 2 (j % cpr), its two values side by side */
typedef struct zip_geo { int cpr; long rstep; } zip_geo;

static inline long zip_at(const zip_geo *g, long col)
{
	return col / g->cpr * g->rstep + 2 * (col % g->cpr);
}

/* 16 columns from col on of a contiguous pair row (masks: cols valid) */
BF_INLINE __m512bh pair_cont(const float *base, const zip_geo *g, long col, __mmask16 msk)
{
	const float *p = base + zip_at(g, col);
	int cols = __builtin_popcount(msk);
	__m512 x0 = _mm512_maskz_loadu_ps(mask_of(2 * cols), p);
	__m512 x1 = cols > 8 ? _mm512_maskz_loadu_ps(mask_of(2 * cols - 16), p + 16)
	                     : _mm512_setzero_ps();
	return _mm512_cvtne2ps_pbh(x1, x0);
}

/* bv[v]: B's rows q and q + 1 (none past k1) at columns [j0 + 16 v,
 * j0 + 16 v + 16) (masks mk) as bf16 pairs; cp: B's pairs side by side
 * (pair_cont, q even) */
BF_INLINE void b_pairs(__m512bh *bv, const int nv, const __mmask16 *mk, int q, int k1,
                       const float *b, long ldb, const long *tab, __m512i idx, const int cp,
                       const zip_geo *g, long j0)
{
	if (cp) {
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++)
			bv[v] = pair_cont(b + tab[q / 2], g, j0 + 16 * v, mk[v]);
	} else {
		const float *r0 = b + j0 + (tab ? tab[q] : q * ldb);
		const float *r1 = q + 1 < k1 ? b + j0 + (tab ? tab[q + 1] : (q + 1) * ldb) : NULL;
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++)
			bv[v] = pair_rows(r0 + 16 * v, r1 ? r1 + 16 * v : NULL, mk[v], idx);
	}
}

/* A strip of B, rows [k0, k1) by 32 columns from j0 (STRIP_U32 words),
 * as b_pairs gives it: pair p's 32 columns at bp + 32 p */
#define STRIP_U32 (KC / 2 * 32)

BF_INLINE void pack_strip(uint32_t *bp, const int nv, const __mmask16 *mk, int k0, int k1,
                          const float *b, long ldb, const long *tab, __m512i idx,
                          const int cp, const zip_geo *g, long j0)
{
	for (int q = k0; q < k1; q += 2) {
		__m512bh bv[2];
		b_pairs(bv, nv, mk, q, k1, b, ldb, tab, idx, cp, g, j0);
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++)
			_mm512_store_si512(bp + (q - k0) / 2 * 32 + 16 * v, (__m512i)bv[v]);
	}
}

/* acc[i][v] += the products of A's row i (pairs ap + i k2) and B's columns
 * [j0 + 16 v, j0 + 16 v + 16) (masks mk) over k in [k0, k1), in order of k;
 * B's pairs from b_pairs, or from bp, pair (q - k0) / 2's columns at
 * bp + (q - k0) / 2 * bs (pack_strip's, the same values, or the caller's) */
BF_INLINE void sum_nn(const int mr, const int nv, const __mmask16 *mk, int k0, int k1,
                      const uint32_t *ap, long k2, const float *b, long ldb, const long *tab,
                      __m512 acc[][2], __m512i idx, const int cp, const zip_geo *g, long j0,
                      const uint32_t *bp, long bs)
{
	if (bp) {
		/* its own loop, B's vectors in locals: with bv[] (whose address
		 * b_pairs takes) GCC kept them on the stack and reloaded one
		 * for every VDPBF16PS, a load per product */
		for (int q = k0; q < k1; q += 2, bp += bs) {
			__m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(mk[0], bp);
			__m512bh b1 = nv > 1 ? (__m512bh)_mm512_maskz_loadu_epi32(mk[1], bp + 16) : b0;
			#pragma GCC unroll 16
			for (int i = 0; i < mr; i++) {
				__m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[i * k2 + q / 2]);
				acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
				if (nv > 1)
					acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
			}
		}
		return;
	}
	for (int q = k0; q < k1; q += 2) {
		__m512bh bv[2];
		b_pairs(bv, nv, mk, q, k1, b, ldb, tab, idx, cp, g, j0);
		#pragma GCC unroll 16
		for (int i = 0; i < mr; i++) {
			__m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[i * k2 + q / 2]);
			#pragma GCC unroll 2
			for (int v = 0; v < nv; v++)
				acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
		}
	}
}

/* C[0..mr, up to 16*nv columns (masks m0, m1)) for k in [k0, k1) */
BF_INLINE void tile_nn(const int mr, const int nv, __mmask16 m0, __mmask16 m1, int k0, int k1,
                       const uint32_t *ap, long k2, const float *b, long ldb, const long *tab,
                       float beta, float *c, long ldc, __m512i idx, const int cp,
                       const zip_geo *g, long j0, const uint32_t *bp, long bs)
{
	__m512 acc[NN_MR][2];
	__mmask16 mk[2] = { m0, m1 };

	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++) {
			if (k0 > 0 || beta != 0.0f) {
				acc[i][v] = _mm512_maskz_loadu_ps(mk[v], c + i * ldc + 16 * v);
				if (k0 == 0 && beta != 1.0f)
					acc[i][v] = _mm512_mul_ps(acc[i][v], _mm512_set1_ps(beta));
			} else {
				acc[i][v] = _mm512_setzero_ps();
			}
		}
	sum_nn(mr, nv, mk, k0, k1, ap, k2, b, ldb, tab, acc, idx, cp, g, j0, bp, bs);
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++)
			_mm512_mask_storeu_ps(c + i * ldc + 16 * v, mk[v], acc[i][v]);
}

/* tile_nn's full tile from pairs (bp), in a function of its own: inlined
 * into nn_blocks, GCC 12 kept B's two vectors on the stack and reloaded
 * one for every VDPBF16PS (16 loads a pair of k, where 8 broadcasts are
 * needed) */
BF_TARGET __attribute__((noinline)) static void tile_full_bp(int k0, int k1, const uint32_t *ap,
                                                            long k2, float beta, float *c,
                                                            long ldc, const uint32_t *bp, long bs)
{
	tile_nn(NN_MR, 2, 0xffff, 0xffff, k0, k1, ap, k2, NULL, 0, NULL, beta, c, ldc,
	        _mm512_setzero_si512(), 0, NULL, 0, bp, bs);
}

BF_INLINE void rows_nn(const int nv, __mmask16 m0, __mmask16 m1, int m, int k0, int k1,
                       const uint32_t *ap, long k2, const float *b, long ldb, const long *tab,
                       float beta, float *c, long ldc, __m512i idx, const int cp,
                       const zip_geo *g, long j0, const uint32_t *bp, long bs)
{
	int i0 = 0;

	if (bp && nv == 2 && m1 == 0xffff)
		for (; i0 + NN_MR <= m; i0 += NN_MR)
			tile_full_bp(k0, k1, ap + i0 * k2, k2, beta, c + i0 * ldc, ldc, bp, bs);
	for (; i0 + NN_MR <= m; i0 += NN_MR)
		tile_nn(NN_MR, nv, m0, m1, k0, k1, ap + i0 * k2, k2, b, ldb, tab, beta,
		        c + i0 * ldc, ldc, idx, cp, g, j0, bp, bs);
	for (; i0 + 4 <= m; i0 += 4)
		tile_nn(4, nv, m0, m1, k0, k1, ap + i0 * k2, k2, b, ldb, tab, beta,
		        c + i0 * ldc, ldc, idx, cp, g, j0, bp, bs);
	for (; i0 < m; i0++)
		tile_nn(1, nv, m0, m1, k0, k1, ap + i0 * k2, k2, b, ldb, tab, beta,
		        c + i0 * ldc, ldc, idx, cp, g, j0, bp, bs);
}

/* rows_nn over one strip of B: converted to pairs once, into bp, where
 * more than one block of NN_MR rows reads it (every block converted it
 * again: ceil(m / 8) times per strip) */
BF_INLINE void strip_nn(const int nv, __mmask16 m0, __mmask16 m1, int m, int k0, int k1,
                        const uint32_t *ap, long k2, const float *b, long ldb, const long *tab,
                        float beta, float *c, long ldc, __m512i idx, const int cp,
                        const zip_geo *g, long j0, uint32_t *bp)
{
	__mmask16 mk[2] = { m0, m1 };

	if (m <= NN_MR) {
		rows_nn(nv, m0, m1, m, k0, k1, ap, k2, b, ldb, tab, beta, c, ldc, idx, cp, g, j0,
		        NULL, 0);
		return;
	}
	pack_strip(bp, nv, mk, k0, k1, b, ldb, tab, idx, cp, g, j0);
	rows_nn(nv, m0, m1, m, k0, k1, ap, k2, b, ldb, tab, beta, c, ldc, idx, cp, g, j0, bp, 32);
}

/* C = A B + beta C with A already packed (ap, row stride k2 pairs), k > 0;
 * cp: B's pairs side by side (sum_nn), tab then per pair */
BF_INLINE void nn_blocks(int m, int n, int k, const uint32_t *ap, long k2, const float *b,
                         long ldb, const long *tab, float beta, float *c, long ldc,
                         const int cp, const zip_geo *g)
{
	__m512i idx = pair_idx();
	uint32_t bp[STRIP_U32] __attribute__((aligned(64)));

	for (int k0 = 0; k0 < k; k0 += KC) {
		int k1 = k0 + KC < k ? k0 + KC : k, j = 0;
		for (; j + 32 <= n; j += 32)
			strip_nn(2, 0xffff, 0xffff, m, k0, k1, ap, k2, b, ldb, tab, beta, c + j, ldc,
			         idx, cp, g, j, bp);
		if (n - j > 16)
			strip_nn(2, 0xffff, mask_of(n - j - 16), m, k0, k1, ap, k2, b, ldb, tab, beta,
			         c + j, ldc, idx, cp, g, j, bp);
		else if (n > j)
			strip_nn(1, mask_of(n - j), 0, m, k0, k1, ap, k2, b, ldb, tab, beta, c + j,
			         ldc, idx, cp, g, j, bp);
	}
}

BF_TARGET static void nn_packed(int m, int n, int k, const uint32_t *ap, long k2, const float *b,
                                long ldb, const long *tab, float beta, float *c, long ldc)
{
	nn_blocks(m, n, k, ap, k2, b, ldb, tab, beta, c, ldc, 0, NULL);
}

/* C = A B with A packed (ap, k2) and B already in pairs: pair p's n
 * columns at bp + p ldbp (Winograd's V, cpu_wino_input.c); K blocks as
 * nn_blocks', so the same sums in the same order as nn_packed on B's
 * floats */
BF_TARGET static void nn_pp(int m, int n, int k, const uint32_t *ap, long k2, const uint32_t *bp,
                            long ldbp, float beta, float *c, long ldc)
{
	__m512i idx = pair_idx();

	for (int k0 = 0; k0 < k; k0 += KC) {
		int k1 = k0 + KC < k ? k0 + KC : k, j = 0;
		const uint32_t *bk = bp + (long)k0 / 2 * ldbp;
		/* beta applies at k0 = 0: tile_nn adds to C's sums for k0 > 0 */
		for (; j + 32 <= n; j += 32)
			rows_nn(2, 0xffff, 0xffff, m, k0, k1, ap, k2, NULL, 0, NULL, beta, c + j, ldc,
			        idx, 0, NULL, j, bk + j, ldbp);
		if (n - j > 16)
			rows_nn(2, 0xffff, mask_of(n - j - 16), m, k0, k1, ap, k2, NULL, 0, NULL, beta,
			        c + j, ldc, idx, 0, NULL, j, bk + j, ldbp);
		else if (n > j)
			rows_nn(1, mask_of(n - j), 0, m, k0, k1, ap, k2, NULL, 0, NULL, beta, c + j,
			        ldc, idx, 0, NULL, j, bk + j, ldbp);
	}
}

BF_TARGET static void nn_fast(int m, int n, int k, const float *a, long rs, long cs,
                              const float *b, long ldb, const long *tab, float beta,
                              float *c, long ldc)
{
	const uint32_t *ap;

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0 || !(ap = cpu_bf16_pack_get(m, k, a, rs, cs))) {
		cpu_bf16e_nn_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
		return;
	}
	nn_packed(m, n, k, ap, pack_stride(k), b, ldb, tab, beta, c, ldc);
}

/* ---- nn with C's rows zipped in pairs (cpu_bf16f_nn_zip) ----
 * A tile of mr rows (mr/2 pairs) x 16 nv columns summed over all of K at
 * once (no K blocks: C is never read back), each pair (2r, 2r + 1) stored
 * interleaved: C[2r][j] at c + ctab[r] + zip_at(j), C[2r + 1][j] next to it. */
BF_INLINE void tile_zip(const int mr, const int nv, __mmask16 m0, __mmask16 m1, int k,
                        const uint32_t *ap, long k2, const float *b, long ldb, float *c,
                        const long *ctab, const zip_geo *g, long j0, __m512i idx,
                        __m512i zlo, __m512i zhi, const uint32_t *bp)
{
	__m512 acc[NN_MR][2];
	__mmask16 mk[2] = { m0, m1 };

	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++)
			acc[i][v] = _mm512_setzero_ps();
	sum_nn(mr, nv, mk, 0, k, ap, k2, b, ldb, NULL, acc, idx, 0, NULL, j0, bp, 32);
	#pragma GCC unroll 8
	for (int r = 0; r < mr / 2; r++)
		#pragma GCC unroll 2
		for (int v = 0; v < nv; v++) {
			/* 2 cols floats of the row: cols = the mask's bits */
			int cols = __builtin_popcount(mk[v]);
			float *o = c + ctab[r] + zip_at(g, j0 + 16 * v);
			__m512 lo = _mm512_permutex2var_ps(acc[2 * r][v], zlo, acc[2 * r + 1][v]);
			__m512 hi = _mm512_permutex2var_ps(acc[2 * r][v], zhi, acc[2 * r + 1][v]);
			if (cols == 16) {
				_mm512_storeu_ps(o, lo);
				_mm512_storeu_ps(o + 16, hi);
			} else {
				_mm512_mask_storeu_ps(o, mask_of(2 * cols), lo);
				if (cols > 8)
					_mm512_mask_storeu_ps(o + 16, mask_of(2 * cols - 16), hi);
			}
		}
}

BF_INLINE void rows_zip(const int nv, __mmask16 m0, __mmask16 m1, int m, int k,
                        const uint32_t *ap, long k2, const float *b, long ldb, float *c,
                        const long *ctab, const zip_geo *g, long j0, __m512i idx,
                        __m512i zlo, __m512i zhi, const uint32_t *bp)
{
	int i0 = 0;

	for (; i0 + NN_MR <= m; i0 += NN_MR)
		tile_zip(NN_MR, nv, m0, m1, k, ap + i0 * k2, k2, b, ldb, c, ctab + i0 / 2, g, j0,
		         idx, zlo, zhi, bp);
	for (; i0 + 4 <= m; i0 += 4)
		tile_zip(4, nv, m0, m1, k, ap + i0 * k2, k2, b, ldb, c, ctab + i0 / 2, g, j0, idx,
		         zlo, zhi, bp);
	for (; i0 < m; i0 += 2)
		tile_zip(2, nv, m0, m1, k, ap + i0 * k2, k2, b, ldb, c, ctab + i0 / 2, g, j0, idx,
		         zlo, zhi, bp);
}

/* rows_zip over one strip of B (all of K), converted once into bp where
 * more than one block of NN_MR rows reads it and it fits (ZIP_PACK_K) */
#define ZIP_PACK_K 512          /* 32 KiB of stack */

BF_INLINE void strip_zip(const int nv, __mmask16 m0, __mmask16 m1, int m, int k,
                         const uint32_t *ap, long k2, const float *b, long ldb, float *c,
                         const long *ctab, const zip_geo *g, long j0, __m512i idx,
                         __m512i zlo, __m512i zhi, uint32_t *bp)
{
	__mmask16 mk[2] = { m0, m1 };

	if (m <= NN_MR || k > ZIP_PACK_K) {
		rows_zip(nv, m0, m1, m, k, ap, k2, b, ldb, c, ctab, g, j0, idx, zlo, zhi, NULL);
		return;
	}
	pack_strip(bp, nv, mk, 0, k, b, ldb, NULL, idx, 0, NULL, j0);
	rows_zip(nv, m0, m1, m, k, ap, k2, b, ldb, c, ctab, g, j0, idx, zlo, zhi, bp);
}

BF_TARGET int cpu_bf16f_nn_cp(int m, int n, int k, const float *a, long rs, long cs,
                              const float *b, const long *ptab, int cpr, long rstep, float beta,
                              float *c, long ldc)
{
	zip_geo g = { cpr, rstep };
	const uint32_t *ap;

	if (m <= 0 || n <= 0 || k <= 0 || k % 2 || cpr <= 0 || (n > cpr && cpr % 16) ||
	    !(ap = cpu_bf16_pack_get(m, k, a, rs, cs)))
		return -1;
	nn_blocks(m, n, k, ap, pack_stride(k), b, 0, ptab, beta, c, ldc, 1, &g);
	return 0;
}

BF_TARGET int cpu_bf16f_nn_zip(int m, int n, int k, const float *a, long rs, long cs,
                               const float *b, long ldb, float *c, const long *ctab, int cpr,
                               long rstep)
{
	zip_geo g = { cpr, rstep };
	const uint32_t *ap;
	__m512i idx = pair_idx(), zlo, zhi;
	int32_t il[16], ih[16];
	uint32_t bp[ZIP_PACK_K / 2 * 32] __attribute__((aligned(64)));
	long k2;
	int j = 0;

	if (m <= 0 || n <= 0 || m % 2 || k <= 0 || cpr <= 0 || (n > cpr && cpr % 16) ||
	    !(ap = cpu_bf16_pack_get(m, k, a, rs, cs)))
		return -1;
	k2 = pack_stride(k);
	for (int t = 0; t < 16; t++) {
		il[t] = t / 2 + (t % 2 ? 16 : 0);     /* a0 b0 a1 b1 ... a7 b7 */
		ih[t] = 8 + t / 2 + (t % 2 ? 16 : 0); /* a8 b8 ... a15 b15 */
	}
	zlo = _mm512_loadu_si512(il);
	zhi = _mm512_loadu_si512(ih);
	for (; j + 32 <= n; j += 32)
		strip_zip(2, 0xffff, 0xffff, m, k, ap, k2, b, ldb, c, ctab, &g, j, idx, zlo, zhi,
		          bp);
	if (n - j > 16)
		strip_zip(2, 0xffff, mask_of(n - j - 16), m, k, ap, k2, b, ldb, c, ctab, &g, j, idx,
		          zlo, zhi, bp);
	else if (n > j)
		strip_zip(1, mask_of(n - j), 0, m, k, ap, k2, b, ldb, c, ctab, &g, j, idx, zlo, zhi,
		          bp);
	return 0;
}

long cpu_bf16_pack_stride(int k)
{
	return pack_stride(k);
}

void cpu_bf16_pack_row(int k, const float *a, uint32_t *ap)
{
	pack_row(k, a, 1, ap);
}

void cpu_bf16f_nn_packed(int m, int n, int k, const uint32_t *ap, long k2, const float *b,
                         long ldb, float beta, float *c, long ldc)
{
	if (m > 0 && n > 0 && k > 0)
		nn_packed(m, n, k, ap, k2, b, ldb, NULL, beta, c, ldc);
}

void cpu_bf16_nn_pp(int m, int n, int k, const uint32_t *ap, long k2, const uint32_t *bp,
                    long ldbp, float beta, float *c, long ldc)
{
	if (m > 0 && n > 0 && k > 0)
		nn_pp(m, n, k, ap, k2, bp, ldbp, beta, c, ldc);
}

BF_TARGET static void pair_run(const float *r0, const float *r1, int n, uint32_t *d)
{
	__m512i idx = pair_idx();

	for (int j = 0; j < n; j += 16) {
		__mmask16 mk = mask_of(n - j);
		_mm512_mask_storeu_epi32(d + j, mk,
		                         (__m512i)pair_rows(r0 + j, r1 ? r1 + j : NULL, mk, idx));
	}
}

void cpu_bf16_pair_run(const float *r0, const float *r1, int n, uint32_t *d)
{
	pair_run(r0, r1, n, d);
}

/* Front to back, 32 values a step, so that it may run in place (h at
 * row): value i's bf16 goes to bytes 2i, 2i + 1, which every later
 * step's floats (bytes 4i' on, i' past the step) lie past; a step loads
 * before it stores. Rounded by VCVTNE2PS2BF16, as the gemms round B
 * (pair_rows) and the forward Winograd's V (cpu_bf16_pair_run): to
 * nearest even, a denormal to a signed 0. The stash's integer rounding
 * (cpu_bf16_bits: denormals kept) took 3 times the instructions: 2% of a
 * classifier step with VDPBF16PS's time taken out (doc/PERFORMANCE.md,
 * session 38). */
BF_TARGET static void pack_run(uint16_t *h, const float *row, int n)
{
	for (int t = 0; t < n; t += 32) {
		int r = n - t;
		__m512 lo = _mm512_maskz_loadu_ps(mask_of(r), row + t);
		__m512 hi = _mm512_maskz_loadu_ps(mask_of(r - 16), row + t + 16);
		__mmask32 m = r >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << r) - 1u);
		_mm512_mask_storeu_epi16(h + t, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
	}
}

void cpu_bf16_pack_run(uint16_t *h, const float *x, int n)
{
	pack_run(h, x, n);
}

void cpu_bf16_pairs_inplace(float *row, int n)
{
	pack_run((uint16_t *)row, row, n);
	if (n % 2)
		((uint16_t *)row)[n] = 0;
}

/* ---- C += A B^T over segments (nt: one segment) ---- */

#define NT_MR 4
#define NT_NR 6

BF_INLINE void step_nt(const int mr, const int nr, __m512 acc[NT_MR][NT_NR], const float *a,
                       long lda, const float *const *bp, long q, __mmask16 m0, __mmask16 m1)
{
	__m512bh av[NT_MR];

	#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
		av[i] = cvt32(a + i * lda + q, m0, m1);
	#pragma GCC unroll 8
	for (int j = 0; j < nr; j++) {
		__m512bh bv = cvt32(bp[j] + q, m0, m1);
		#pragma GCC unroll 8
		for (int i = 0; i < mr; i++)
			acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av[i], bv);
	}
}

BF_INLINE void tile_nt(const int mr, const int nr, int ns, int seg, const float *a, long lda,
                       long as, const float *b, long ldb, const long *tab, long bs, float *c,
                       long ldc)
{
	__m512 acc[NT_MR][NT_NR];
	const float *bp[NT_NR];
	int segv = seg / 32 * 32;

	#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 8
		for (int j = 0; j < nr; j++)
			acc[i][j] = _mm512_setzero_ps();
	for (int s = 0; s < ns; s++) {
		const float *as0 = a + s * as;
		#pragma GCC unroll 8
		for (int j = 0; j < nr; j++)
			bp[j] = b + (tab ? tab[j] : j * ldb) + s * bs;
		for (int q = 0; q < segv; q += 32)
			step_nt(mr, nr, acc, as0, lda, bp, q, 0xffff, 0xffff);
		if (segv < seg)
			step_nt(mr, nr, acc, as0, lda, bp, segv, mask_of(seg - segv),
			        seg - segv > 16 ? mask_of(seg - segv - 16) : 0);
	}
	#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 8
		for (int j = 0; j < nr; j++)
			c[i * ldc + j] += _mm512_reduce_add_ps(acc[i][j]);
}

BF_INLINE void rows_nt(const int nr, int m, int ns, int seg, const float *a, long lda, long as,
                       const float *b, long ldb, const long *tab, long bs, float *c, long ldc)
{
	int i0 = 0;

	for (; i0 + NT_MR <= m; i0 += NT_MR)
		tile_nt(NT_MR, nr, ns, seg, a + i0 * lda, lda, as, b, ldb, tab, bs, c + i0 * ldc, ldc);
	for (; i0 < m; i0++)
		tile_nt(1, nr, ns, seg, a + i0 * lda, lda, as, b, ldb, tab, bs, c + i0 * ldc, ldc);
}

/* over blocks of about NT_KC floats: whole segments, or one segment cut
 * into pieces of whole 32-float steps (the B rows of a tile stay in L1
 * while the rows of A go by) */
BF_TARGET static void nts_fast(int m, int n, int ns, int seg, const float *a, long lda, long as,
                               const float *b, long ldb, const long *tab, long bs, float *c,
                               long ldc)
{
	int per = NT_KC / seg > 1 ? NT_KC / seg : 1, piece = seg;

	if (m <= 0 || n <= 0 || seg <= 0)
		return;
	if (ns == 1 && seg > NT_KC) {
		int nblk = seg / NT_KC;
		piece = ((seg + nblk - 1) / nblk + 31) / 32 * 32;
	}
	for (int s0 = 0; s0 < ns; s0 += per)
		for (int q0 = 0; q0 < seg; q0 += piece) {
			int sn = ns - s0 < per ? ns - s0 : per, len = seg - q0 < piece ? seg - q0 : piece;
			const float *ab = a + s0 * as + q0, *bb = b + s0 * bs + q0;
			int j = 0;
			for (; j + NT_NR <= n; j += NT_NR)
				rows_nt(NT_NR, m, sn, len, ab, lda, as, tab ? bb : bb + j * ldb, ldb,
				        tab ? tab + j : NULL, bs, c + j, ldc);
			for (; j < n; j++)
				rows_nt(1, m, sn, len, ab, lda, as, tab ? bb : bb + j * ldb, ldb,
				        tab ? tab + j : NULL, bs, c + j, ldc);
		}
}

BF16_ENTRIES(cpu_bf16f, nn_fast, nts_fast)

#else
/* without the intrinsics only the emulated set is built (cpu.h) */
void cpu_bf16_new_op(void) { }
unsigned long cpu_bf16_op(void) { return 0; }
#endif
