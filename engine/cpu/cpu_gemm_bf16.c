/* cpu_gemm_bf16.c: the kernels of cpu_gemm.c for CDP_PREC_BF16: the same
 * five products (nn, nn_tab, nt, nt_tab, nt_seg, same arguments, fp32 in
 * memory), with every element of A and B rounded to bf16 (round to nearest
 * even, as VCVTNE2PS2BF16 does) and the products summed in fp32. A product
 * of two bf16 values is exact in fp32, so the only rounding besides the
 * operands' is that of the fp32 sums, as in PyTorch's CPU autocast.
 *
 * Three sets:
 *  - amx (AMX-TILE and AMX-BF16, granted by the kernel; Sapphire Rapids and
 *    later): nn and nt on tiles (amx_nn, amx_nts below: TDPBF16PS,
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

#define KC 128               /* even: pairs of k never straddle a block */
#define NT_KC 1024

/* ---- the bf16 stash of activations (backend.h to_bf16 / from_bf16) ----
 * The same rounding as the GEMM operands', so a stashed tensor holds the
 * values a bf16 convolution would have read from it. Plain C: one pass
 * over memory, which bounds it on any instruction set. */

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

/* ---- the emulated set ---- */

#define R cpu_bf16_round

static void nn_emu_any(int m, int n, int k, const float *a, long rs, long cs, const float *b,
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

static void nts_emu_any(int m, int n, int ns, int seg, const float *a, long lda, long as,
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

BF16_ENTRIES(cpu_bf16e, nn_emu_any, nts_emu_any)

/* ---- the avx512bf16 set ---- */
#ifdef CPU_BF16_KERNELS
#include <immintrin.h>

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

/* this thread's buffers; NULL when out of memory */
static pack_buf *this_buf(void)
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

/* A packed (pack_a) in this thread's buffer; NULL when out of memory */
static void pack_a(int m, int k, const float *a, long rs, long cs, uint32_t *ap);

/* The row stride of packed A in pairs: K/2 rounded up to whole AMX tile
 * rows (16 pairs); the rows are padded to 16 as well, with zeros. */
static long pack_stride(int k) { return ((k + 1) / 2 + 15) / 16 * 16; }

static const uint32_t *pack_get(int m, int k, const float *a, long rs, long cs)
{
	size_t n = (size_t)(m + 15) / 16 * 16 * pack_stride(k);
	unsigned long op = __atomic_load_n(&op_count, __ATOMIC_RELAXED);
	pack_buf *pb = this_buf();

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

#define NN_MR 8

/* Column j of a row zipped in pairs (cpu_bf16f_nn_cp's B, cpu_bf16f_nn_zip's
 * C) at row + (j / cpr) rstep + 2 (j % cpr), its two values side by side */
typedef struct zip_geo { int cpr; long rstep; } zip_geo;

static inline long zip_at(const zip_geo *g, long col)
{
	return col / g->cpr * g->rstep + 2 * (col % g->cpr);
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
 * columns at bp + p ldbp (Winograd's V, cpu_conv_wino.c); K blocks as
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
	if (k <= 0 || !(ap = pack_get(m, k, a, rs, cs))) {
		nn_emu_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
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
	    !(ap = pack_get(m, k, a, rs, cs)))
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
	    !(ap = pack_get(m, k, a, rs, cs)))
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

/* 32 floats (masks m0, m1 for the two halves) as 32 bf16 */
BF_INLINE __m512bh cvt32(const float *p, __mmask16 m0, __mmask16 m1)
{
	return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, p + 16), _mm512_maskz_loadu_ps(m0, p));
}

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

/* ---- AMX: nn on tiles ----
 * C in blocks of 16 x 16 (tiles, fp32), summed over K in steps of 32
 * (16 pairs) by TDPBF16PS from a tile of packed A (16 rows of 16 pairs,
 * straight from pack_a's rows) and a tile of B's 16 columns in pairs
 * (VNNI layout: row p holds (B[2p, j], B[2p+1, j]) for each j), which is
 * built once per column block for all rows of C. A whole tile with beta 0
 * is stored straight into C; others go through a small buffer, masked at
 * the edges, with beta C added. */
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_amx.h"
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* the CPU reports AMX-TILE and AMX-BF16, and the kernel lets this process
 * use the tile data (Linux 5.16 and later) */
static void amx_probe(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
		return;
#ifdef SYS_arch_prctl
	amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

int cpu_bf16_amx_usable(void)
{
	pthread_once(&amx_once, amx_probe);
	return amx_ok;
}

/* All eight tiles 16 rows of 64 bytes: 0-3 the C blocks of a 2 x 2 step,
 * 4-5 two tiles of A (or of the first operand), 6-7 two of B. A constant
 * in memory: GCC 12's _tile_loadconfig tells the compiler it reads only
 * the first 8 bytes, so the stores that build a configuration on the
 * stack may be dropped. */
static const unsigned char amx_tiles[64] __attribute__((aligned(64))) = {
	[0] = 1,                                      /* palette 1 */
	[16] = 64, [18] = 64, [20] = 64, [22] = 64,   /* bytes per row */
	[24] = 64, [26] = 64, [28] = 64, [30] = 64,
	[48] = 16, [49] = 16, [50] = 16, [51] = 16,   /* rows */
	[52] = 16, [53] = 16, [54] = 16, [55] = 16,
};

AMX_TARGET static void amx_config(pack_buf *pb)
{
	if (pb->tiles)
		return;
	_tile_loadconfig(amx_tiles);
	pb->tiles = 1;
}

int cpu_bf16_amx_tiles(void)
{
	pack_buf *pb = this_buf();

	if (!pb)
		return -1;
	amx_config(pb);
	return 0;
}

/* TDPBF16PS takes about three times as long to finish as to issue (Intel's
 * tables: latency 52 cycles, one every 16), so one chain of sums into one
 * C tile runs at a third of the unit's rate. The steps below keep two or
 * four C tiles in flight, each summed over K in the same order as alone,
 * so a C element's bits do not depend on which step computed it; the
 * 2 x 2 step also loads each A and B tile once for two products. With 16
 * rows of C or fewer (16 filters) the conversion of B into pairs costs
 * more than the tiles, and pairing column blocks there was slower (fwd of
 * 16 -> 16 channels at 256x256: 22 against 19 ms), so such a C goes one
 * column block at a time, its chain overlapping the next block's
 * conversion. conv_bench -b -t 1, 8 x C x H x H, 3x3, best of 15, Sapphire
 * Rapids VM: fwd 64 -> 64 at 64x64 7.2 -> 5.6 ms, 128 at 32x32 5.5 -> 4.4,
 * 256 at 16x16 6.9 -> 4.8; 16 and 32 channels unchanged. */

/* C tile T (16 x 16 fp32) into c (rows, columns masked mk), beta c added:
 * straight from the tile where the block is whole and beta is 0 */
#define AMX_PUT(T, c, ldc, rows, mk, beta, cb)                                          \
	do {                                                                            \
		if ((rows) == 16 && (mk) == (__mmask16)0xffff && (beta) == 0.0f) {     \
			_tile_stored(T, c, (ldc) * 4);                                  \
		} else {                                                                \
			_tile_stored(T, cb, 64);                                        \
			amx_put(cb, c, ldc, rows, mk, beta);                            \
		}                                                                       \
	} while (0)

AMX_TARGET static void amx_put(const float *cb, float *c, long ldc, int rows, __mmask16 mk,
                               float beta)
{
	for (int r = 0; r < rows; r++) {
		float *cr = c + r * ldc;
		__m512 v = _mm512_loadu_ps(cb + 16 * r);
		if (beta != 0.0f)
			v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, cr), v);
		_mm512_mask_storeu_ps(cr, mk, v);
	}
}

/* B's columns [j, j + 16) (mask mk) in VNNI pairs: bv[p*16 + c] =
 * (B[2p, j+c], B[2p+1, j+c]), k2 rows, zeros past K */
AMX_TARGET static void amx_pair_block(int k, long k2, const float *b, long ldb,
                                      const long *tab, int j, __mmask16 mk, __m512i idx,
                                      uint32_t *bv)
{
	for (long p = 0; p < k2; p++) {
		__m512bh v;
		if (2 * p + 1 < k)
			v = pair_rows(b + (tab ? tab[2 * p] : 2 * p * ldb) + j,
			              b + (tab ? tab[2 * p + 1] : (2 * p + 1) * ldb) + j, mk, idx);
		else if (2 * p < k)
			v = pair_rows(b + (tab ? tab[2 * p] : 2 * p * ldb) + j, NULL, mk, idx);
		else
			v = (__m512bh)_mm512_setzero_si512();
		_mm512_store_si512(bv + p * 16, (__m512i)v);
	}
}

AMX_TARGET static void amx_nn(int m, int n, int k, const float *a, long rs, long cs,
                              const float *b, long ldb, const long *tab, float beta,
                              float *c, long ldc)
{
	long k2 = pack_stride(k), sa = k2 * 4;
	const uint32_t *ap;
	pack_buf *pb;
	float cb[16 * 16] __attribute__((aligned(64)));
	__m512i idx = pair_idx();

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0 || !(ap = pack_get(m, k, a, rs, cs)) || !(pb = this_buf())) {
		nn_emu_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
		return;
	}
	if (pb->bvcap < (size_t)k2 * 32) {
		free(pb->bv);
		pb->bvcap = 0;
		if (!(pb->bv = aligned_alloc(64, (size_t)k2 * 32 * sizeof *pb->bv))) {
			nn_emu_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
			return;
		}
		pb->bvcap = (size_t)k2 * 32;
	}
	amx_config(pb);
	/* two column blocks (bv0, bv1) at a time, then two row blocks */
	for (int j = 0; j < n; j += m > 16 ? 32 : 16) {
		int two = n - j > 16 && m > 16;
		__mmask16 m0 = mask_of(n - j), m1 = mask_of(n - j - 16);
		uint32_t *bv0 = pb->bv, *bv1 = bv0 + k2 * 16;
		amx_pair_block(k, k2, b, ldb, tab, j, m0, idx, bv0);
		if (two)
			amx_pair_block(k, k2, b, ldb, tab, j + 16, m1, idx, bv1);
		for (int i = 0; i < m; i += 32) {
			const uint32_t *a0 = ap + (size_t)i * k2, *a1 = a0 + 16 * k2;
			int r0 = m - i < 16 ? m - i : 16, r1 = m - i - 16 < 16 ? m - i - 16 : 16;
			float *c00 = c + (long)i * ldc + j, *c10 = c00 + 16 * ldc;
			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			if (r1 > 0 && two) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(5, a1 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_loadd(7, bv1 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(1, 4, 7);
					_tile_dpbf16ps(2, 5, 6);
					_tile_dpbf16ps(3, 5, 7);
				}
			} else if (r1 > 0) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(5, a1 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(2, 5, 6);
				}
			} else if (two) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_loadd(7, bv1 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(1, 4, 7);
				}
			} else {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
				}
			}
			AMX_PUT(0, c00, ldc, r0, m0, beta, cb);
			if (two)
				AMX_PUT(1, c00 + 16, ldc, r0, m1, beta, cb);
			if (r1 > 0) {
				AMX_PUT(2, c10, ldc, r1, m0, beta, cb);
				if (two)
					AMX_PUT(3, c10 + 16, ldc, r1, m1, beta, cb);
			}
		}
	}
}

/* nt over segments on tiles: C^T blocks (16 columns j of C as tile rows,
 * 16 rows i as tile columns) = B's rows (bf16, natural) times A's rows in
 * pairs (VNNI: A transposed, 16 rows at a time through a small buffer),
 * so that each 16 x 32 piece of A is converted and transposed once per
 * block of k for all of C's columns, and each 16 x 32 piece of B once per
 * block for all of C's rows. The sum over k runs in blocks as nts_fast's
 * (whole segments, or pieces of one), each segment padded with zeros to
 * whole steps of 32; C += each block's tile, in block order.
 * Up to NTS_BLOCKS column blocks of C share each tile of A's pairs, each
 * its own chain of sums in the same order as alone (the bits do not
 * change): one chain ran at TDPBF16PS's latency, a third of its rate, and
 * the filter gradients' C is 16 rows where a layer has 16 filters, so the
 * second row block amx_nn pairs with is not there (perf of the bf16
 * U-Net step: the chain's wait was half of amx_nts). */
#define NTS_BLOCKS 3

/* c (rows x cols, ldc apart; cols capped at 16) += cb transposed, cb a
 * stored C^T tile: cb[16j + i] is c[i][j] */
AMX_TARGET static void nts_add(const float *cb, float *c, long ldc, int rows, int cols)
{
	__m512i r[16];
	float t[16 * 16] __attribute__((aligned(64)));
	__mmask16 mk = mask_of(cols);

	for (int j = 0; j < 16; j++)
		r[j] = _mm512_load_si512(cb + 16 * j);
	cpu_amx_transpose16(r, (uint32_t *)t);
	for (int i = 0; i < rows; i++) {
		float *ci = c + i * ldc;
		_mm512_mask_storeu_ps(ci, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, ci),
		                                            _mm512_load_ps(t + 16 * i)));
	}
}

AMX_TARGET static void amx_nts(int m, int n, int ns, int seg, const float *a, long lda, long as,
                               const float *b, long ldb, const long *tab, long bs, float *c,
                               long ldc)
{
	int per = NT_KC / seg > 1 ? NT_KC / seg : 1, piece = seg, mp = (m + 15) / 16 * 16;
	long kbmax;
	size_t need;
	pack_buf *pb;
	float cb[16 * 16] __attribute__((aligned(64)));

	if (m <= 0 || n <= 0 || seg <= 0)
		return;
	if (ns == 1 && seg > NT_KC) {
		int nblk = seg / NT_KC;
		piece = ((seg + nblk - 1) / nblk + 31) / 32 * 32;
	}
	/* the largest block: (sn segments) x (len rounded up to 32) */
	kbmax = (long)(ns < per ? ns : per) * ((piece + 31) / 32 * 32);
	/* A's pairs (mp x kb/2) then B's 16 * NTS_BLOCKS rows of kb bf16 */
	need = (size_t)mp * (kbmax / 2) + 8 * NTS_BLOCKS * (size_t)kbmax;
	if (!(pb = this_buf())) {
		nts_emu_any(m, n, ns, seg, a, lda, as, b, ldb, tab, bs, c, ldc);
		return;
	}
	if (pb->bvcap < need) {
		free(pb->bv);
		pb->bvcap = 0;
		if (!(pb->bv = aligned_alloc(64, (need * sizeof *pb->bv + 63) / 64 * 64))) {
			nts_emu_any(m, n, ns, seg, a, lda, as, b, ldb, tab, bs, c, ldc);
			return;
		}
		pb->bvcap = need;
	}
	amx_config(pb);
	for (int s0 = 0; s0 < ns; s0 += per)
		for (int q0 = 0; q0 < seg; q0 += piece) {
			int sn = ns - s0 < per ? ns - s0 : per, len = seg - q0 < piece ? seg - q0 : piece;
			long segp = (len + 31) / 32 * 32, kb = sn * segp, kp = kb / 2;
			uint32_t *av = pb->bv, *bn = av + (size_t)mp * kp;
			/* A: av[ib*16*kp + p*16 + r] = (A[16ib+r, 2p], A[16ib+r, 2p+1]) */
			for (int ib = 0; ib < mp; ib += 16)
				for (int t = 0; t < sn; t++)
					for (int q = 0; q < segp; q += 32) {
						int rest = len - q;
						__mmask16 m0 = mask_of(rest), m1 = rest > 16 ? mask_of(rest - 16) : 0;
						__m512i rv[16];
						for (int r = 0; r < 16; r++)
							rv[r] = ib + r < m ? (__m512i)cvt32(a + (ib + r) * lda +
							                                    (s0 + t) * as + q0 + q, m0, m1) :
							                     _mm512_setzero_si512();
						cpu_amx_transpose16(rv, av + (size_t)ib * kp + (size_t)(t * segp + q) / 2 * 16);
					}
			for (int jb = 0; jb < n; jb += 16 * NTS_BLOCKS) {
				int nj = (n - jb + 15) / 16 < NTS_BLOCKS ? (n - jb + 15) / 16 : NTS_BLOCKS;
				/* B: row r of bn (kb bf16, kp pairs) = B[jb + r, block];
				 * column block q is rows [16q, 16q + 16) */
				for (int r = 0; r < 16 * nj; r++) {
					const float *bj = jb + r < n ?
						b + (tab ? tab[jb + r] : (jb + r) * ldb) + s0 * bs + q0 : NULL;
					for (int t = 0; t < sn; t++)
						for (int q = 0; q < segp; q += 32) {
							int rest = len - q;
							__m512bh v = bj ? cvt32(bj + t * bs + q, mask_of(rest),
							                        rest > 16 ? mask_of(rest - 16) : 0) :
							                  (__m512bh)_mm512_setzero_si512();
							_mm512_storeu_si512(bn + (size_t)r * kp + (t * segp + q) / 2,
							                    (__m512i)v);
						}
				}
				for (int ib = 0; ib < m; ib += 16) {
					int rows = m - ib < 16 ? m - ib : 16;
					const uint32_t *ai = av + (size_t)ib * kp;
					float *ci = c + (long)ib * ldc + jb;
					const void *bq[3] = { bn, bn + 16 * kp, bn + 32 * kp };
					cpu_amx_chains(nj, kp / 16, ai, bq, kp * 4);
					_tile_stored(0, cb, 64);
					nts_add(cb, ci, ldc, rows, n - jb);
					if (nj > 1) {
						_tile_stored(1, cb, 64);
						nts_add(cb, ci + 16, ldc, rows, n - jb - 16);
					}
					if (nj > 2) {
						_tile_stored(2, cb, 64);
						nts_add(cb, ci + 32, ldc, rows, n - jb - 32);
					}
				}
			}
		}
}

void cpu_bf16a_nn(int m, int n, int k, const float *a, long rs, long cs,
                  const float *b, long ldb, float beta, float *c, long ldc)
{
	amx_nn(m, n, k, a, rs, cs, b, ldb, NULL, beta, c, ldc);
}

void cpu_bf16a_nn_tab(int m, int n, int k, const float *a, long rs, long cs,
                      const float *b, const long *tab, float beta, float *c, long ldc)
{
	amx_nn(m, n, k, a, rs, cs, b, 0, tab, beta, c, ldc);
}

void cpu_bf16a_nt(int m, int n, int k, const float *a, long lda, const float *b,
                  long ldb, float *c, long ldc)
{
	amx_nts(m, n, 1, k, a, lda, 0, b, ldb, NULL, 0, c, ldc);
}

void cpu_bf16a_nt_tab(int m, int n, int k, const float *a, long lda, const float *b,
                      const long *tab, float *c, long ldc)
{
	amx_nts(m, n, 1, k, a, lda, 0, b, 0, tab, 0, c, ldc);
}

void cpu_bf16a_nt_seg(int m, int n, int ns, int seg, const float *a, long lda, long as,
                      const float *b, const long *tab, long bs, float *c, long ldc)
{
	amx_nts(m, n, ns, seg, a, lda, as, b, 0, tab, bs, c, ldc);
}

BF16_ENTRIES(cpu_bf16f, nn_fast, nts_fast)

#else
/* without the intrinsics only the emulated set is built (cpu.h) */
void cpu_bf16_new_op(void) { }
unsigned long cpu_bf16_op(void) { return 0; }
#endif
