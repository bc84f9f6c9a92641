/* cpu_backend.c: the CPU backend's table, memory and BLAS-like ops (the
 * thread pool and the per-thread scratch are in cpu_pool.c).
 *
 * A GEMM is split into blocks of C, one per thread, each computed
 * single-threaded (by our kernels, cpu_gemm.c, or OpenBLAS with
 * openblas_set_num_threads(1) for the cases they do not cover); the
 * convolutions give each thread whole samples or row chunks with its own
 * im2col buffer, which keeps that buffer in cache (cpu_conv.c).
 */
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "cpu.h"

/* ---- memory ---- */

void *cpu_alloc(cdp_backend *be, size_t bytes)
{
	void *p = NULL;

	if (bytes == 0)
		bytes = 64;
	if (posix_memalign(&p, 64, bytes) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

void cpu_free(cdp_backend *be, void *p) { free(p); }

void cpu_to_device(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

void cpu_to_host(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

void cpu_copy(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	if (dst != src)
		memmove(dst, src, bytes);
}

void cpu_sync(cdp_backend *be) { }

/* ---- BLAS-like ---- */

/* A copy of the rows x cols matrix x (leading dimension ld) rounded to
 * bf16, for OpenBLAS in CDP_PREC_BF16; NULL when out of memory. */
static float *bf16_copy(int rows, int cols, const float *x, int ld)
{
	float *y = malloc((size_t)rows * ld * sizeof *y);

	for (int i = 0; y && i < rows; i++)
		for (int j = 0; j < cols; j++)
			y[(size_t)i * ld + j] = cpu_bf16_round(x[(size_t)i * ld + j]);
	return y;
}

/* alpha = 1 goes to our kernels (cpu_gemm.c), which beat OpenBLAS's
 * packing for the thin products of convolutions; the rest to OpenBLAS
 * (in bf16 on copies of A and B rounded to bf16: no layer of ours makes
 * such products, so their speed does not matter). */
void cpu_sgemm1(const cdp_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	float *ra = NULL, *rb = NULL;

	if (m <= 0 || n <= 0)
		return;
	if (alpha == 1.0f && !tb) {
		cpu_kgemm_nn(be, m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, beta, c, ldc);
		return;
	}
	if (alpha == 1.0f && !ta && (beta == 0.0f || beta == 1.0f)) {
		if (beta == 0.0f)
			for (int i = 0; i < m; i++)
				memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof *c);
		cpu_kgemm_nt(be, m, n, k, a, lda, b, ldb, c, ldc);
		return;
	}
	if (be->precision == CDP_PREC_BF16 && k > 0) {
		ra = bf16_copy(ta ? k : m, ta ? m : k, a, lda);
		rb = bf16_copy(tb ? n : k, tb ? k : n, b, ldb);
		if (ra && rb) {
			a = ra;
			b = rb;
		} else {
			/* out of memory: the products one at a time */
			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					float s = 0.0f;
					for (int q = 0; q < k; q++)
						s += cpu_bf16_round(ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]) *
						     cpu_bf16_round(tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]);
					c[(size_t)i * ldc + j] = alpha * s + (beta != 0.0f ? beta * c[(size_t)i * ldc + j] : 0.0f);
				}
			free(ra);
			free(rb);
			return;
		}
	}
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
	            tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
	            b, ldb, beta, c, ldc);
	free(ra);
	free(rb);
}

typedef struct gemm_job {
	const cdp_backend *be;
	int ta, tb, m, n, k, lda, ldb, ldc, by_rows, parts;
	float alpha, beta;
	const float *a, *b;
	float *c;
} gemm_job;

/* Part t of C: a block of rows (or columns), a multiple of 16 wide. */
static void gemm_part(void *ctx, int t)
{
	const gemm_job *g = ctx;
	int len = g->by_rows ? g->m : g->n;
	int step = ((len + g->parts - 1) / g->parts + 15) / 16 * 16;
	int lo = t * step, hi = lo + step < len ? lo + step : len;

	if (lo >= hi)
		return;
	if (g->by_rows)
		cpu_sgemm1(g->be, g->ta, g->tb, hi - lo, g->n, g->k, g->alpha,
		           g->a + (size_t)lo * (g->ta ? 1 : g->lda), g->lda, g->b, g->ldb,
		           g->beta, g->c + (size_t)lo * g->ldc, g->ldc);
	else
		cpu_sgemm1(g->be, g->ta, g->tb, g->m, hi - lo, g->k, g->alpha, g->a, g->lda,
		           g->b + (size_t)lo * (g->tb ? g->ldb : 1), g->ldb,
		           g->beta, g->c + lo, g->ldc);
}

/* Every element of C is computed by one single-threaded sgemm call, and
 * the split depends only on the shape and the thread count. */
void cpu_gemm(cdp_backend *be, int ta, int tb, int m, int n, int k,
              float alpha, const float *a, int lda, const float *b, int ldb,
              float beta, float *c, int ldc)
{
	gemm_job g = { be, ta, tb, m, n, k, lda, ldb, ldc, m > n, be->threads, alpha, beta, a, b, c };

	if (be->precision == CDP_PREC_BF16)
		cpu_bf16_new_op();
	if (be->threads <= 1 || (double)m * n * k < 1e6 || (m < 32 && n < 32)) {
		cpu_sgemm1(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	cpu_parallel_for(be, be->threads, gemm_part, &g);
}

typedef struct elem_job {
	float *x; const float *cx; float v; size_t n;
} elem_job;

static void fill_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo, hi;

	cpu_block_range(j->n, i, &lo, &hi);
	for (size_t t = lo; t < hi; t++)
		j->x[t] = j->v;
}

static void scale_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo, hi;

	cpu_block_range(j->n, i, &lo, &hi);
	for (size_t t = lo; t < hi; t++)
		j->x[t] *= j->v;
}

static void axpy_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo, hi;

	cpu_block_range(j->n, i, &lo, &hi);
	for (size_t t = lo; t < hi; t++)
		j->x[t] += j->v * j->cx[t];
}

void cpu_fill(cdp_backend *be, float *x, float v, size_t n)
{
	elem_job j = { x, NULL, v, n };
	if (v == 0.0f && n < CPU_ELEM_BLOCK) {
		memset(x, 0, n * sizeof *x);
		return;
	}
	cpu_parallel_for(be, cpu_nblocks(n), fill_block, &j);
}

void cpu_scale(cdp_backend *be, float *x, float a, size_t n)
{
	elem_job j = { x, NULL, a, n };
	cpu_parallel_for(be, cpu_nblocks(n), scale_block, &j);
}

void cpu_axpy(cdp_backend *be, float a, const float *x, float *y, size_t n)
{
	elem_job j = { y, x, a, n };
	cpu_parallel_for(be, cpu_nblocks(n), axpy_block, &j);
}

/* Single-threaded on purpose: the result must not depend on the thread
 * count, and the parameter block is small next to a training step. Eight
 * running sums, x[i] into sum i % 8, added pairwise at the end: a fixed
 * order (the same bits on any CPU: the vector lanes are those eight sums),
 * and eight additions in flight instead of one chain of n. */
typedef double v4d __attribute__((vector_size(32), aligned(8)));

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))   /* x * x + s rounded twice, as always */
#endif
double cpu_sumsq(cdp_backend *be, const float *x, size_t n)
{
	v4d a = { 0, 0, 0, 0 }, b = { 0, 0, 0, 0 };
	size_t i = 0;
	double s[8];

	for (; i + 8 <= n; i += 8) {
		v4d lo = { x[i], x[i + 1], x[i + 2], x[i + 3] };
		v4d hi = { x[i + 4], x[i + 5], x[i + 6], x[i + 7] };
		a += lo * lo;
		b += hi * hi;
	}
	for (int k = 0; k < 4; k++) {
		s[k] = a[k];
		s[k + 4] = b[k];
	}
	for (int k = 0; i < n; i++, k++)
		s[k] += (double)x[i] * x[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* An inference pass's activations. A U-Net's (width 16, depth 4) on
 * 256x256 windows are 12.5 MiB a window: a batch of 8 (100 MiB) runs
 * whole. Smaller passes were slower on the 2-core Xeon of
 * doc/PERFORMANCE.md (session 39), by 4% in passes of 4 and 10% in
 * passes of 2 with VDPBF16PS (within noise in the FMA model of a Zen 4,
 * once Winograd's U was kept between calls), 20% in passes of 1. So
 * passes bound the memory of a large --batch; they are not for speed. */
#define CPU_INFER_PASS_BYTES (128UL << 20)

static size_t cpu_infer_pass_bytes(cdp_backend *be)
{
	(void)be;
	return CPU_INFER_PASS_BYTES;
}

cdp_backend *cdp_backend_cpu(int threads)
{
	cdp_backend *be = calloc(1, sizeof *be);
	void *im = cpu_impl_new();

	if (!be || !im) {
		free(be);
		free(im);
		return NULL;
	}
	be->name = "cpu";
	be->impl = im;

	be->alloc = cpu_alloc;
	be->free = cpu_free;
	be->to_device = cpu_to_device;
	be->to_host = cpu_to_host;
	be->copy = cpu_copy;
	be->sync = cpu_sync;
	be->set_threads = cpu_set_threads;
	be->destroy = cpu_destroy;
	be->infer_pass_bytes = cpu_infer_pass_bytes;

	be->gemm = cpu_gemm;
	be->fill = cpu_fill;
	be->scale = cpu_scale;
	be->axpy = cpu_axpy;
	be->sumsq = cpu_sumsq;
	be->to_bf16 = cpu_to_bf16;
	be->from_bf16 = cpu_from_bf16;

	be->conv_workspace = cpu_conv_workspace;
	be->conv_takes_xh = cpu_conv_takes_xh;
	be->conv_takes_split = cpu_conv_takes_split;
	be->conv_writes_yh = cpu_conv_writes_yh;
	be->conv_takes_dyh = cpu_conv_takes_dyh;
	be->conv_writes_dxh = cpu_conv_writes_dxh;
	be->conv_fwd = cpu_conv_fwd;
	be->conv_fwd_bn = cpu_conv_fwd_bn;
	be->conv_bwd_data = cpu_conv_bwd_data;
	be->conv_bwd_filter = cpu_conv_bwd_filter;

	be->bn_fwd_train = cpu_bn_fwd_train;
	be->bn_fwd_train_h = cpu_bn_fwd_train_h;
	be->bn_fwd_h_alone = cpu_bn_fwd_h_alone;
	be->bn_fwd_infer = cpu_bn_fwd_infer;
	be->bn_bwd_needs_y = cpu_bn_bwd_needs_y;
	be->bn_takes_xh = cpu_bn_takes_xh;
	be->bn_takes_gh = cpu_bn_takes_gh;
	be->bn_bwd = cpu_bn_bwd;
	be->bn_pool_takes = cpu_bn_pool_takes;
	be->bn_fwd_train_pool = cpu_bn_fwd_train_pool;
	be->bn_bwd_pool = cpu_bn_bwd_pool;
	be->bn_sums = cpu_bn_sums;
	be->bn_grad_sums = cpu_bn_grad_sums;
	be->bn_bwd_dx = cpu_bn_bwd_dx;
	be->act_fwd = cpu_act_fwd;
	be->act_bwd = cpu_act_bwd;
	be->maxpool_fwd = cpu_maxpool_fwd;
	be->maxpool_bwd = cpu_maxpool_bwd;
	be->maxpool_bwd_needs_xy = cpu_maxpool_bwd_needs_xy;
	be->avgpool_fwd = cpu_avgpool_fwd;
	be->avgpool_bwd = cpu_avgpool_bwd;
	be->upsample_fwd = cpu_upsample_fwd;
	be->upsample_bwd = cpu_upsample_bwd;
	be->chan_copy = cpu_chan_copy;
	be->chan_slice = cpu_chan_slice;
	be->dropout_fwd = cpu_dropout_fwd;
	be->dropout_bwd = cpu_dropout_bwd;
	be->gap_fwd = cpu_gap_fwd;
	be->gap_bwd = cpu_gap_bwd;
	be->bias_add = cpu_bias_add;
	be->bias_grad = cpu_bias_grad;
	be->add = cpu_add;
	be->diff_fwd = cpu_diff_fwd;
	be->diff_bwd = cpu_diff_bwd;

	be->softmax_ce = cpu_softmax_ce;
	be->bce_logits = cpu_bce_logits;
	be->dice_logits = cpu_dice_logits;
	be->dice_sums = cpu_dice_sums;
	be->reg_loss = cpu_reg_loss;
	be->argmax = cpu_argmax;
	be->confusion = cpu_confusion;

	be->sgd_step = cpu_sgd_step;
	be->adamw_step = cpu_adamw_step;

	be->device = -1;
	cpu_data_ops(be);
	cpu_window_ops(be);
	cpu_set_threads(be, threads);
	return be;
}
