/* cpu_gemm_bf16r.c: the "avx512bf16-fma" set of bf16 kernels: the same
 * five products as cpu_gemm_bf16.c (bf16 operands, fp32 sums), computed by
 * cpu_gemm.c's fp32 AVX-512 kernels on operands rounded to bf16 first.
 *
 * Why: a product of two bf16 values is exact in fp32, so an FMA on rounded
 * operands gives what VDPBF16PS gives, lane for lane, up to the order of
 * the fp32 sums. Where VDPBF16PS issues at half the rate of an FMA (the
 * Intel Xeons without AMX measured here: its two products per lane then
 * buy nothing, and converting B's rows inside the register tile costs
 * extra), the fp32 kernels on rounded operands are the faster bf16.
 *
 * Where the rounding happens (once per element, never in the inner loop):
 *  - A (the filters in nn and nn_tab): rounded into a buffer per thread,
 *    once per op (cpu_bf16_new_op), like the avx512bf16 set's packing;
 *    in nt, nt_tab and nt_seg A (dy, read in place by the filter
 *    gradient) is rounded per call, as it streams past: M x K values
 *    against M x N x K products.
 *  - B in nn and nt: rounded per call into the buffer, in panels of columns
 *    (nn) or whole (nt). These products come from im2col'd columns and
 *    from dense layers, where B is read once per row tile of C anyway.
 *  - B in nn_tab, nt_tab and nt_seg: the implicit convolution's slice,
 *    which cpu_conv_implicit.c and cpu_conv_kcol.c fill from the input;
 *    they round it as they fill it (cpu_bf16_rounds_copies), so the nine
 *    taps of a 3x3 kernel do not round the same value nine times. A
 *    caller of these three must hand them B in bf16 values.
 * The fp32 kernels sum each element of C in an order that depends on K
 * only, so panels and copies change nothing in the result.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"

#ifdef CPU_BF16_KERNELS
#include <immintrin.h>

#define BF_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw")))
#define NB 256               /* nn: columns of B per panel */

/* VCVTNEPS2BF16 rounds to nearest even, as cpu_bf16_round does (it also
 * flushes denormals to zero, as VDPBF16PS reads them). */
BF_TARGET static void round_run(float *y, const float *x, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
		__m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16);
		_mm512_storeu_ps(y + i, _mm512_castsi512_ps(w));
	}
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		__m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
		__m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16);
		_mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(w));
	}
}

void cpu_bf16_round_run(float *y, const float *x, size_t n)
{
	round_run(y, x, n);
}

/* ---- this thread's buffers ---- */

typedef struct rbuf {
	float *a;                /* A rounded, m x k, for the op `op` */
	size_t acap;
	const float *akey;
	int m, k;
	long rs, cs;
	unsigned long op;
	float *b;                /* the per-call copies */
	size_t bcap;
} rbuf;

static pthread_key_t rkey;
static pthread_once_t ronce = PTHREAD_ONCE_INIT;

static void rbuf_free(void *v)
{
	rbuf *r = v;
	free(r->a);
	free(r->b);
	free(r);
}

static void rkey_make(void) { pthread_key_create(&rkey, rbuf_free); }

static rbuf *this_rbuf(void)
{
	rbuf *r;

	pthread_once(&ronce, rkey_make);
	if (!(r = pthread_getspecific(rkey))) {
		if (!(r = calloc(1, sizeof *r)))
			return NULL;
		if (pthread_setspecific(rkey, r) != 0) {
			free(r);
			return NULL;
		}
	}
	return r;
}

static int grow(float **p, size_t *cap, size_t n)
{
	float *q;

	if (*cap >= n)
		return 0;
	free(*p);
	*cap = 0;
	if (!(q = aligned_alloc(64, (n * sizeof *q + 63) / 64 * 64)))
		return (*p = NULL), -1;
	*p = q;
	*cap = n;
	return 0;
}

/* A (M,K), A[i,q] = a[i*rs + q*cs], rounded into r->a row-major (K
 * apart), kept for the rest of the op. NULL when out of memory. */
static const float *round_a(rbuf *r, int m, int k, const float *a, long rs, long cs)
{
	unsigned long op = cpu_bf16_op();

	if (r->a && r->akey == a && r->m == m && r->k == k && r->rs == rs && r->cs == cs &&
	    r->op == op)
		return r->a;
	r->akey = NULL;
	if (grow(&r->a, &r->acap, (size_t)m * k))
		return NULL;
	for (int i = 0; i < m; i++) {
		float *o = r->a + (size_t)i * k;
		if (cs == 1) {
			round_run(o, a + i * rs, (size_t)k);
			continue;
		}
		for (int q = 0; q < k; q++)
			o[q] = cpu_bf16_round(a[i * rs + q * cs]);
	}
	r->akey = a;
	r->m = m;
	r->k = k;
	r->rs = rs;
	r->cs = cs;
	r->op = op;
	return r->a;
}

/* Out of memory for a buffer: the emulated kernels, which need none. */

void cpu_bf16r_nn(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                  long ldb, float beta, float *c, long ldc)
{
	rbuf *r = this_rbuf();
	const float *ra = r ? round_a(r, m, k, a, rs, cs) : NULL;

	if (!ra || grow(&r->b, &r->bcap, (size_t)k * NB)) {
		cpu_bf16e_nn(m, n, k, a, rs, cs, b, ldb, beta, c, ldc);
		return;
	}
	for (int j0 = 0; j0 < n; j0 += NB) {
		int nb = n - j0 < NB ? n - j0 : NB;
		for (int q = 0; q < k; q++)
			round_run(r->b + (size_t)q * nb, b + q * ldb + j0, (size_t)nb);
		cpu_kgemm_fp32_nn(m, nb, k, ra, k, 1, r->b, nb, beta, c + j0, ldc);
	}
}

void cpu_bf16r_nn_tab(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                      const long *boff, float beta, float *c, long ldc)
{
	rbuf *r = this_rbuf();
	const float *ra = r ? round_a(r, m, k, a, rs, cs) : NULL;

	if (!ra) {
		cpu_bf16e_nn_tab(m, n, k, a, rs, cs, b, boff, beta, c, ldc);
		return;
	}
	cpu_kgemm_fp32_nn_tab(m, n, k, ra, k, 1, b, boff, beta, c, ldc);
}

void cpu_bf16r_nt(int m, int n, int k, const float *a, long lda, const float *b, long ldb,
                  float *c, long ldc)
{
	rbuf *r = this_rbuf();
	size_t na = (size_t)m * k;

	if (!r || grow(&r->b, &r->bcap, na + (size_t)n * k)) {
		cpu_bf16e_nt(m, n, k, a, lda, b, ldb, c, ldc);
		return;
	}
	for (int i = 0; i < m; i++)
		round_run(r->b + (size_t)i * k, a + i * lda, (size_t)k);
	for (int j = 0; j < n; j++)
		round_run(r->b + na + (size_t)j * k, b + j * ldb, (size_t)k);
	cpu_kgemm_fp32_nt(m, n, k, r->b, k, r->b + na, k, c, ldc);
}

void cpu_bf16r_nt_tab(int m, int n, int k, const float *a, long lda, const float *b,
                      const long *boff, float *c, long ldc)
{
	rbuf *r = this_rbuf();

	if (!r || grow(&r->b, &r->bcap, (size_t)m * k)) {
		cpu_bf16e_nt_tab(m, n, k, a, lda, b, boff, c, ldc);
		return;
	}
	for (int i = 0; i < m; i++)
		round_run(r->b + (size_t)i * k, a + i * lda, (size_t)k);
	cpu_kgemm_fp32_nt_tab(m, n, k, r->b, k, b, boff, c, ldc);
}

void cpu_bf16r_nt_seg(int m, int n, int ns, int seg, const float *a, long lda, long as,
                      const float *b, const long *boff, long bs, float *c, long ldc)
{
	rbuf *r = this_rbuf();
	size_t row = (size_t)ns * seg;

	if (!r || grow(&r->b, &r->bcap, (size_t)m * row)) {
		cpu_bf16e_nt_seg(m, n, ns, seg, a, lda, as, b, boff, bs, c, ldc);
		return;
	}
	/* A's segments side by side: row i of the copy is (ns, seg) */
	for (int i = 0; i < m; i++)
		for (int s = 0; s < ns; s++)
			round_run(r->b + i * row + (size_t)s * seg, a + i * lda + s * as, (size_t)seg);
	cpu_kgemm_fp32_nt_seg(m, n, ns, seg, r->b, (long)row, seg, b, boff, bs, c, ldc);
}

#else
void cpu_bf16_round_run(float *y, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = cpu_bf16_round(x[i]);
}
#endif
