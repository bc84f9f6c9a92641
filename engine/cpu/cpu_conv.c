/* cpu_conv.c: 2-D convolution on the CPU by im2col/col2im and sgemm.
 *
 * Shapes (backend.h): x (N,C,H,W), w (F,C,KH,KW), y (N,F,OH,OW); K = C*KH*KW
 * is the gemm depth and P = OH*OW the pixels of one output plane. Row
 * r = (c*KH + i)*KW + j of a column matrix holds x[c, oh*s - pad + i*dil,
 * ow*s - pad + j*dil] for each output pixel (0 outside the image).
 *
 * Four plans, chosen from the descriptor alone, in this order:
 *  - PLAN_1X1 (1x1 kernel, stride 1, no padding; one sample or planes of
 *    more than BATCH_MAX_P pixels): x_n (C,P) already is the column
 *    matrix.
 *  - PLAN_IMPLICIT (other stride-1 convolutions with pad <= dil*(K-1), the
 *    usual case): no column matrix at all, see cpu_conv_implicit.c.
 *  - PLAN_BATCH (N > 1, P <= BATCH_MAX_P): small planes make thin gemms,
 *    so the whole batch goes into one, with col (K, N*P) and a (F, N*P)
 *    (1x1 kernels too: per sample, ResNet-50's 7x7 and 14x14 stages read
 *    all of w for 49 or 196 columns, 1.4-3x slower in every op)
 *    matrix (y or dy with the batch moved next to the pixels) in the
 *    caller's workspace; the gemms are split over the workers by blocks
 *    of C.
 *  - PLAN_ROWS (the rest: strided convolutions of large planes): the
 *    output plane is cut into chunks of whole rows whose column matrix
 *    (K, R*OW) fits in about 1 MB, so it stays in cache between im2col and
 *    the gemm that reads it. The items are (sample, chunk) pairs, taken
 *    by whichever thread is free, each using that thread's column buffer
 *    (cpu_scratch):
 *        fwd:    y_n[:, chunk] (F,R*OW)  = w (F,K) col (K,R*OW)
 *        data:   dcol (K,R*OW) = w^T (K,F) dy_n[:, chunk]; dx_n += col2im
 *                (whole samples per item: the chunks' dx rows overlap)
 *        filter: dw_t (F,K) += dy_n[:, chunk] col^T over the items of part
 *                t (CPU_FILTER_PARTS per thread); dw += sum over t of dw_t
 *                in order t = 0, 1, ...
 *    PLAN_1X1 runs the same way, without im2col.
 * The gemms run single-threaded inside each job (cpu_gemm.c's kernels).
 * Only the filter gradients of PLAN_ROWS, PLAN_1X1 and PLAN_IMPLICIT
 * depend on the thread count (their parts' partial sums).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_iconv.h"

/* The loops here are simple streams over large arrays: let GCC vectorize
 * them even at -O2 (which does not, or only when no remainder loop is
 * needed), and if-convert selects (which trapping math forbids; we never
 * read floating-point exception flags). Vectorization does not reorder any
 * sum in this file: the reductions accumulate in double or across separate
 * outputs. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#define BATCH_MAX_P 1024
#define CHUNK_FLOATS (256 * 1024)
#define ZIP_MAX_C 1024            /* the items' row tables on their stacks (16 KiB) */
#define ZIP_COLS 512              /* zip_rows */

enum { PLAN_1X1, PLAN_ROWS, PLAN_BATCH, PLAN_IMPLICIT };

static int conv_plan(const cdp_conv_desc *d)
{
	if (d->kh == 1 && d->kw == 1 && d->stride == 1 && d->pad == 0 &&
	    !(d->n > 1 && d->oh * d->ow <= BATCH_MAX_P))
		return PLAN_1X1;
	if (cpu_iconv_usable(d))
		return PLAN_IMPLICIT;
	if (d->n > 1 && d->oh * d->ow <= BATCH_MAX_P)
		return PLAN_BATCH;
	return PLAN_ROWS;
}

/* The 3x3 stride-2 layers (ResNet's downsampling ones) go to
 * cpu_conv_phase.c, op by op, where it was measured faster than the plan
 * above (bench/conv_bench -s 2, batch 32, 2 threads; doc/PERFORMANCE.md):
 * every op from output planes of 28x28, the data gradient from 14x14
 * (there its forward was even and its filter gradient, four thin sums
 * over 196 pixels a sample, twice as slow); at 7x7 none. */
enum { OP_FWD, OP_DATA, OP_FILTER };

static int phase_op(const cdp_conv_desc *d, int op)
{
	long p = (long)d->oh * d->ow;

	return cpu_phase_usable(d) && p >= (op == OP_DATA ? 144 : 400);
}

/* Output rows per chunk: the column chunk (K, R*OW) near CHUNK_FLOATS. */
static int chunk_rows(const cdp_conv_desc *d)
{
	long k = (long)d->c * d->kh * d->kw, r = CHUNK_FLOATS / (k * d->ow);
	if (r < 1)
		r = 1;
	return r > d->oh ? d->oh : (int)r;
}

/* The filter gradient of disjoint 2x2 windows (cpu_col2im_disjoint: a
 * transposed convolution's) in bf16 with the amx or avx512bf16 set: a 1x1
 * correlation of x's windows as channels (space to depth) with dy, on
 * cpu_conv_grid_filter.c's grid, which reads every other value of x's
 * rows as it lays its slice: no column matrix. The plans' im2col and nt
 * gemm took 2-3x its time (doc/PERFORMANCE.md, session 45). */
static cpu_corr s2d_prob(const cdp_conv_desc *d)
{
	cpu_corr p = { 4 * d->c, d->oh, d->ow, d->f, d->oh, d->ow, 1, 1, 1, 0, 0 };
	return p;
}

static int s2d_filter(const cdp_backend *be, const cdp_conv_desc *d)
{
	return be->precision == CDP_PREC_BF16 && cpu_col2im_disjoint(d) &&
	       cpu_grid_filter_s2d_takes(be);
}

/* The plan's workspace (cpu_conv_workspace) */
static size_t plan_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	size_t k = (size_t)d->c * d->kh * d->kw, p = (size_t)d->oh * d->ow, per = 0, ws = 0;

	switch (conv_plan(d)) {
	case PLAN_1X1:
		per = CPU_FILTER_PARTS * (size_t)d->f * d->c;
		break;
	case PLAN_BATCH:
		ws = (k + (size_t)d->f) * (size_t)d->n * p * sizeof(float);
		break;
	case PLAN_IMPLICIT:
		if (cpu_scratch_reserve(be, cpu_iconv_scratch(be, d)) < 0)
			return SIZE_MAX;
		return cpu_iconv_workspace(be, d);
	default:
		per = k * (size_t)chunk_rows(d) * d->ow + CPU_FILTER_PARTS * (size_t)d->f * k;
	}
	if (cpu_scratch_reserve(be, per * sizeof(float)) < 0)
		return SIZE_MAX;
	if (s2d_filter(be, d)) {
		cpu_corr sp = s2d_prob(d);
		if (cpu_scratch_reserve(be, cpu_grid_filter_scratch(be, &sp)) < 0)
			return SIZE_MAX;
	}
	return ws;
}

/* The caller's workspace holds PLAN_BATCH's matrices (or the phases of
 * cpu_conv_phase.c, or both when some ops take each); each worker's
 * column chunk and partial filter gradient live in the backend's scratch,
 * which this call reserves (SIZE_MAX when that memory cannot be had, so
 * that the caller's allocation fails too). */
size_t cpu_conv_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	size_t a, b;

	if (!phase_op(d, OP_DATA))
		return plan_workspace(be, d);
	if ((a = cpu_phase_workspace(be, d)) == SIZE_MAX || phase_op(d, OP_FWD))
		return a;       /* every op (phase_op's thresholds) */
	if ((b = plan_workspace(be, d)) == SIZE_MAX)
		return SIZE_MAX;
	return a > b ? a : b;
}

/* ---- PLAN_ROWS and PLAN_1X1: jobs over (sample, chunk) items ---- */

typedef struct conv_job {
	cdp_backend *be;
	const cdp_conv_desc *d;
	const float *x, *w, *bias, *dy;
	const cdp_bn_infer *bn;   /* forward: the batchnorm after it, or NULL */
	float *y, *dx, *dw;
	float beta;
	int plan, rows, nchunk, parts;
} conv_job;

static void item_range(const conv_job *j, int t, int items, int *lo, int *hi)
{
	*lo = (int)((long)items * t / j->parts);
	*hi = (int)((long)items * (t + 1) / j->parts);
}

/* One (sample, chunk) item of the forward, in the running thread's column
 * buffer (items write disjoint rows of y: any thread may take any). */
static void fwd_item(void *ctx, int it)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow;
	int n = it / j->nchunk, r0 = (it % j->nchunk) * j->rows;
	int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow, ldb = p;
	const float *xn = j->x + (size_t)n * d->c * d->h * d->w, *b = xn + (size_t)r0 * d->ow;
	float *col = cpu_scratch(j->be, cpu_worker());
	float *yn = j->y + (size_t)n * d->f * p + (size_t)r0 * d->ow;

	if (j->plan == PLAN_ROWS) {
		cpu_im2col_rows(d, xn, r0, r1, col);
		b = col;
		ldb = np;
	}
	cpu_kgemm_nn(j->be, d->f, np, k, j->w, k, 1, b, ldb, 0.0f, yn, p);
	if (j->bias)
		for (int f = 0; f < d->f; f++) {
			float *yr = yn + (size_t)f * p, bf = j->bias[f];
			for (int q = 0; q < np; q++)
				yr[q] += bf;
		}
	for (int f = 0; j->bn && f < d->f; f++)
		cpu_bn_post_run(j->bn, f, yn + (size_t)f * p, (size_t)np);
}

/* One item of the data gradient: PLAN_1X1's (sample, chunk) items own dx
 * columns; PLAN_ROWS's are whole samples, whose chunks overlap in dx. */
static int data_items(const conv_job *j)
{
	return j->plan == PLAN_1X1 ? j->d->n * j->nchunk : j->d->n;
}

static void data_item(void *ctx, int it)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow;
	float *col = cpu_scratch(j->be, cpu_worker()), *dxn;

	if (j->plan == PLAN_1X1) {
		int n = it / j->nchunk, q0 = (it % j->nchunk) * j->rows * d->ow;
		int q1 = q0 + j->rows * d->ow < p ? q0 + j->rows * d->ow : p;
		cpu_kgemm_nn(j->be, d->c, q1 - q0, d->f, j->w, 1, k, j->dy + (size_t)n * d->f * p + q0, p,
		             j->beta, j->dx + (size_t)n * d->c * p + q0, p);
		return;
	}
	dxn = j->dx + (size_t)it * d->c * d->h * d->w;
	for (int r0 = 0; r0 < d->oh; r0 += j->rows) {
		int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow;
		cpu_kgemm_nn(j->be, k, np, d->f, j->w, 1, k,
		             j->dy + (size_t)it * d->f * p + (size_t)r0 * d->ow, p, 0.0f, col, np);
		/* after the first chunk the rest add to dx, unless the chunks'
		 * rows of dx are their own */
		cpu_col2im_rows(d, col, r0, r1, dxn, r0 == 0 || cpu_col2im_disjoint(d) ? j->beta : 1.0f);
	}
}

/* Part t's partial dw: number t % CPU_FILTER_PARTS in the scratch of
 * thread t / CPU_FILTER_PARTS (a thread's column buffer or slice follows
 * those partials). */
float *cpu_filter_partial(cdp_backend *be, size_t fk, int t)
{
	return cpu_scratch(be, t / CPU_FILTER_PARTS) + (size_t)(t % CPU_FILTER_PARTS) * fk;
}

typedef struct reduce_job {
	cdp_backend *be;
	int parts;
	size_t fk;
	float *dw;
} reduce_job;

/* dw[i] += sum over t of partial_t[i], in order t = 0, 1, ..., over
 * be->threads ranges of dw */
static void reduce_range(void *ctx, int r)
{
	const reduce_job *j = ctx;
	size_t lo = j->fk * r / j->be->threads, hi = j->fk * (r + 1) / j->be->threads;

	for (int u = 0; u < j->parts; u++) {
		const float *s = cpu_filter_partial(j->be, j->fk, u);
		for (size_t i = lo; i < hi; i++)
			j->dw[i] += s[i];
	}
}

void cpu_filter_reduce(cdp_backend *be, int parts, size_t fk, float *dw)
{
	reduce_job j = { be, parts, fk, dw };
	cpu_parallel_for(be, be->threads, reduce_range, &j);
}

static void filter_part(void *ctx, int t)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow, lo, hi;
	float *dwt = cpu_filter_partial(j->be, (size_t)d->f * k, t);
	float *col = cpu_scratch(j->be, cpu_worker()) + CPU_FILTER_PARTS * (size_t)d->f * k;

	memset(dwt, 0, (size_t)d->f * k * sizeof *dwt);
	item_range(j, t, d->n * j->nchunk, &lo, &hi);
	for (int it = lo; it < hi; it++) {
		int n = it / j->nchunk, r0 = (it % j->nchunk) * j->rows;
		int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow;
		const float *xn = j->x + (size_t)n * d->c * d->h * d->w;
		const float *b = xn + (size_t)r0 * d->ow;
		int ldb = p;
		if (j->plan == PLAN_ROWS) {
			cpu_im2col_rows(d, xn, r0, r1, col);
			b = col;
			ldb = np;
		}
		cpu_kgemm_nt(j->be, d->f, k, np, j->dy + (size_t)n * d->f * p + (size_t)r0 * d->ow,
		             p, b, ldb, dwt, k);
	}
}

/* ---- PLAN_BATCH: moving the batch between (N,F,P) and (F,N*P) ---- */

typedef struct perm_job {
	const float *src;
	float *dst;
	const float *bias;
	const cdp_bn_infer *bn;
	int n, f;
	size_t p;
} perm_job;

/* (F, N*P) -> (N, F, P) plus bias; job index = (n, f) */
static void unbatch_plane(void *ctx, int t)
{
	const perm_job *jb = ctx;
	int n = t / jb->f, f = t % jb->f;
	const float *s = jb->src + ((size_t)f * jb->n + n) * jb->p;
	float *o = jb->dst + ((size_t)n * jb->f + f) * jb->p;
	float b = jb->bias ? jb->bias[f] : 0.0f;

	for (size_t i = 0; i < jb->p; i++)
		o[i] = s[i] + b;
	if (jb->bn)
		cpu_bn_post_run(jb->bn, f, o, jb->p);
}

/* (N, F, P) -> (F, N*P); job index = (n, f) */
static void batch_plane(void *ctx, int t)
{
	const perm_job *jb = ctx;
	int n = t / jb->f, f = t % jb->f;
	memcpy(jb->dst + ((size_t)f * jb->n + n) * jb->p,
	       jb->src + ((size_t)n * jb->f + f) * jb->p, jb->p * sizeof(float));
}

/* ---- the three ops ---- */

static conv_job make_job(cdp_backend *be, const cdp_conv_desc *d)
{
	conv_job j = { .be = be, .d = d, .plan = conv_plan(d), .parts = be->threads };
	j.rows = j.plan == PLAN_1X1 ? (int)(CHUNK_FLOATS / ((long)d->c * d->ow)) : chunk_rows(d);
	if (j.rows < 1)
		j.rows = 1;
	if (j.rows > d->oh)
		j.rows = d->oh;
	j.nchunk = (d->oh + j.rows - 1) / j.rows;
	return j;
}

/* The implicit plan (its kcol and Winograd halves too) fills its slices
 * from x through cpu_src, so it reads the stash's bf16 copy as it is;
 * the others read x as float (backend.h). */
int cpu_conv_takes_xh(cdp_backend *be, const cdp_conv_desc *d)
{
	return be->precision == CDP_PREC_BF16 && conv_plan(d) == PLAN_IMPLICIT;
}

/* The forward's y as bf16 (d->yh, backend.h): where the implicit plan's
 * Winograd, its paired slice's VDPBF16PS rows or its row-by-row gemm
 * writes it (cpu_iconv_writes_h) */
int cpu_conv_writes_yh(cdp_backend *be, const cdp_conv_desc *d)
{
	return conv_plan(d) == PLAN_IMPLICIT && cpu_iconv_writes_h(be, d);
}

/* The same plan reads x through cpu_src channel by channel, so it takes
 * a concat's inputs where they lie (backend.h) */
int cpu_conv_takes_split(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	return !phase_op(d, OP_FWD) && conv_plan(d) == PLAN_IMPLICIT;
}

static void bias_grad(cdp_backend *be, int n, int f, int hw, const void *dy, int h,
                      float *dbias);

/* dy as bf16 (d->dyh, backend.h): where both backward ops run the
 * implicit plan, whose data gradient fills its slices from dy through
 * cpu_src as the forward does from x, and whose filter gradient is the
 * grid's, which lays dy as bf16 pairs anyway, or Winograd's, which widens
 * it as it loads it for its transform (cpu_iconv_filter_takes_h); dx as
 * bf16 (d->dxh): where that data gradient is Winograd's or the paired
 * slice's, which round it in the register (cpu_iconv_data_writes_h).
 * phase_op's strided layers are not the implicit plan's. */
static int implicit_bwd(const cdp_backend *be, const cdp_conv_desc *d)
{
	return be->precision == CDP_PREC_BF16 && conv_plan(d) == PLAN_IMPLICIT &&
	       !phase_op(d, OP_DATA) && !phase_op(d, OP_FILTER);
}

int cpu_conv_takes_dyh(cdp_backend *be, const cdp_conv_desc *d)
{
	return implicit_bwd(be, d) && cpu_iconv_filter_takes_h(be, d);
}

int cpu_conv_writes_dxh(cdp_backend *be, const cdp_conv_desc *d)
{
	return implicit_bwd(be, d) && cpu_iconv_data_writes_h(be, d);
}

/* dy or dx as bf16 where this backend does not take them so, or dx as
 * bf16 to be added to: the caller's bug */
static void check_grads(cdp_backend *be, const cdp_conv_desc *d, float beta)
{
	if ((d->dyh && !cpu_conv_takes_dyh(be, d)) || (d->dxh && !cpu_conv_writes_dxh(be, d)) ||
	    (d->dxh && beta != 0.0f)) {
		fprintf(stderr, "cpu backend: a convolution's gradient given or asked for in bf16 "
		        "where it cannot take it so (conv_takes_dyh, conv_writes_dxh are 0, or "
		        "beta is not 0)\n");
		abort();
	}
}

/* x given as bf16, or in segments, where this backend does not take it
 * (fwd 0: the filter gradient, which never takes segments): the
 * caller's bug */
static void check_xh(cdp_backend *be, const cdp_conv_desc *d, int fwd)
{
	if (d->xh && !cpu_conv_takes_xh(be, d)) {
		fprintf(stderr, "cpu backend: a convolution given its input in bf16 that it "
		        "cannot read so (conv_takes_xh is 0)\n");
		abort();
	}
	if (d->nseg > 0 && (!fwd || d->xh || !cpu_conv_takes_split(be, d))) {
		fprintf(stderr, "cpu backend: a convolution given its input in segments that it "
		        "cannot read so (conv_takes_split is 0)\n");
		abort();
	}
}

#ifdef CPU_BF16_KERNELS
/* The 2x2 stride-2 windows that tile the input (cpu_col2im_disjoint: the
 * U-Net's transposed convolution) with VDPBF16PS, over (sample, rows)
 * items, forward and data gradient without a column matrix (the column
 * path took 2.7x the gemm's time on 8x32x128^2 -> 16x256^2;
 * doc/PERFORMANCE.md). beta 0 only (dx is written, not added to). */
static int zip_takes(const cdp_backend *be, const cdp_conv_desc *d, float beta)
{
	return beta == 0.0f && cpu_bf16_packs_pairs(be) && cpu_col2im_disjoint(d) &&
	       d->c <= ZIP_MAX_C;
}

/* rows of dy per item: about ZIP_COLS columns where whole rows of 16
 * columns allow, so that a deep layer's A is read for wide gemms */
static int zip_rows(const cdp_conv_desc *d)
{
	int r = d->ow % 16 ? 1 : ZIP_COLS / d->ow;

	return r < 1 ? 1 : r > d->oh ? d->oh : r;
}

/* item over (sample, zip_rows rows of the output) */
static void by_windows(cdp_backend *be, const cdp_conv_desc *d, conv_job *j,
                       void (*item)(void *, int))
{
	j->rows = zip_rows(d);
	cpu_parallel_for(be, d->n * ((d->oh + j->rows - 1) / j->rows), item, j);
}

/* Item it's sample n and rows [i, i1) of the output, and where in a
 * sample of the input the rows (c, a) of the windows start: row 2 i + a of
 * channel c (the two taps b of a window row lie side by side in it) */
static void window_rows(const conv_job *j, int it, int *n, int *i, int *i1, long *rows)
{
	const cdp_conv_desc *d = j->d;
	int per = (d->oh + j->rows - 1) / j->rows;
	size_t plane = (size_t)d->h * d->w;

	*n = it / per;
	*i = it % per * j->rows;
	*i1 = *i + j->rows < d->oh ? *i + j->rows : d->oh;
	for (int c = 0; c < d->c; c++)
		for (int a = 0; a < 2; a++)
			rows[2 * c + a] = (long)(c * plane + (size_t)(2 * *i + a) * d->w);
}

/* The forward of the same windows (the transposed convolution's data
 * gradient): pair (c, a) of the columns is x's row 2 i + a, whose even and
 * odd values are its taps b = 0 and 1, read side by side
 * (cpu_bf16f_nn_cp): no column matrix. */
static void cp_item(void *ctx, int it)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * 4, n, i, i1;
	size_t p = (size_t)d->oh * d->ow;
	long rows[2 * ZIP_MAX_C];
	const float *xn;
	float *yn, *col;

	window_rows(j, it, &n, &i, &i1, rows);
	xn = j->x + (size_t)n * d->c * d->h * d->w;
	yn = j->y + (size_t)n * d->f * p + (size_t)i * d->ow;
	if (cpu_bf16f_nn_cp(d->f, (i1 - i) * d->ow, k, j->w, k, 1, xn, rows, d->ow, 2L * d->w,
	                    0.0f, yn, (long)p) == 0)
		return;
	/* A could not be packed: the rows through the column path */
	col = cpu_scratch(j->be, cpu_worker());
	cpu_im2col_rows(d, xn, i, i1, col);
	cpu_kgemm_nn(j->be, d->f, (i1 - i) * d->ow, k, j->w, k, 1, col, (long)(i1 - i) * d->ow,
	             0.0f, yn, (long)p);
}

/* Its data gradient (the transposed convolution's forward): rows (c, a, 0)
 * and (c, a, 1) of W^T dy, zipped, are dx's row 2 i + a
 * (cpu_bf16f_nn_zip): no column matrix, no col2im. */
static void zip_item(void *ctx, int it)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * 4, n, i, i1;
	size_t p = (size_t)d->oh * d->ow;
	long rows[2 * ZIP_MAX_C];
	const float *b;
	float *dxn, *col;

	window_rows(j, it, &n, &i, &i1, rows);
	dxn = j->dx + (size_t)n * d->c * d->h * d->w;
	b = j->dy + (size_t)n * d->f * p + (size_t)i * d->ow;
	if (cpu_bf16f_nn_zip(k, (i1 - i) * d->ow, d->f, j->w, 1, k, b, (long)p, dxn, rows, d->ow,
	                     2L * d->w) == 0)
		return;
	/* A could not be packed: the rows through the column path */
	col = cpu_scratch(j->be, cpu_worker());
	cpu_kgemm_nn(j->be, k, (i1 - i) * d->ow, d->f, j->w, 1, k, b, (long)p, 0.0f, col,
	             (long)(i1 - i) * d->ow);
	cpu_col2im_rows(d, col, i, i1, dxn, 0.0f);
}
#endif

/* The forward, with bn applied to each block of y as it is written; y as
 * bf16 with d->yh (cpu_conv_writes_yh, whose plans round y to bf16 after
 * the bias, before bn, either way: backend.h) */
static void conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x, const float *w,
                     const float *bias, const cdp_bn_infer *bn, void *y, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);

	check_xh(be, d, 1);
	if (d->yh && (bn || !cpu_conv_writes_yh(be, d))) {
		fprintf(stderr, "cpu backend: a convolution asked to write its output in bf16 "
		        "that it cannot write so (conv_writes_yh is 0)\n");
		abort();
	}
	if (be->precision == CDP_PREC_BF16)
		cpu_bf16_new_op();

	if (phase_op(d, OP_FWD)) {
		cpu_phase_fwd(be, d, x, w, bias, bn, y, ws);
		return;
	}
#ifdef CPU_BF16_KERNELS
	if (!bias && !bn && zip_takes(be, d, 0.0f)) {   /* small planes too */
		j.x = x;
		j.w = w;
		j.y = y;
		by_windows(be, d, &j, cp_item);
		return;
	}
#endif
	if (j.plan == PLAN_BATCH) {
		float *col = ws, *ym = col + (size_t)k * np;    /* (K, N*P), (F, N*P) */
		perm_job pj = { ym, y, bias, bn, d->n, d->f, (size_t)d->oh * d->ow };
		cpu_im2col_all(be, d, x, col);
		cpu_gemm(be, 0, 0, d->f, np, k, 1.0f, w, k, col, np, 0.0f, ym, np);
		cpu_parallel_for(be, d->n * d->f, unbatch_plane, &pj);
		return;
	}
	if (j.plan == PLAN_IMPLICIT) {
		cpu_iconv_fwd(be, d, x, w, bias, bn, y, ws);
		return;
	}
	j.x = x;
	j.w = w;
	j.bias = bias;
	j.bn = bn;
	j.y = y;
	cpu_parallel_for(be, d->n * j.nchunk, fwd_item, &j);
}

void cpu_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                  const float *w, const float *bias, void *y, void *ws)
{
	conv_fwd(be, d, x, w, bias, NULL, y, ws);
}

void cpu_conv_fwd_bn(cdp_backend *be, const cdp_conv_desc *d, const void *x, const float *w,
                     const float *bias, const cdp_bn_infer *bn, float *y, void *ws)
{
	conv_fwd(be, d, x, w, bias, bn, y, ws);
}


void cpu_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const void *dyv,
                       const float *w, void *dxv, float beta, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);
	const float *dy = dyv;
	float *dx = dxv;

	check_grads(be, d, beta);
	if (be->precision == CDP_PREC_BF16)
		cpu_bf16_new_op();
	if (d->dyh || d->dxh) {          /* implicit_bwd */
		cpu_iconv_data(be, d, dyv, w, dxv, beta, ws);
		return;
	}

	if (phase_op(d, OP_DATA)) {
		cpu_phase_data(be, d, dy, w, dx, beta, ws);
		return;
	}
#ifdef CPU_BF16_KERNELS
	if (zip_takes(be, d, beta)) {     /* small planes too: no batched copy */
		j.w = w;
		j.dy = dy;
		j.dx = dx;
		by_windows(be, d, &j, zip_item);
		return;
	}
#endif
	if (j.plan == PLAN_BATCH) {
		float *col = ws, *dym = col + (size_t)k * np;
		perm_job pj = { dy, dym, NULL, NULL, d->n, d->f, (size_t)d->oh * d->ow };
		cpu_parallel_for(be, d->n * d->f, batch_plane, &pj);
		cpu_gemm(be, 1, 0, k, np, d->f, 1.0f, w, k, dym, np, 0.0f, col, np);
		cpu_col2im_all(be, d, col, dx, beta);
		return;
	}
	if (j.plan == PLAN_IMPLICIT) {
		cpu_iconv_data(be, d, dy, w, dx, beta, ws);
		return;
	}
	j.w = w;
	j.dy = dy;
	j.dx = dx;
	j.beta = beta;

	cpu_parallel_for(be, data_items(&j), data_item, &j);
}

void cpu_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                         const void *dyv, float *dw, float *dbias, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);
	const float *dy = dyv;

	check_xh(be, d, 0);
	check_grads(be, d, 0.0f);
	if (be->precision == CDP_PREC_BF16)
		cpu_bf16_new_op();

	if (dbias)
		bias_grad(be, d->n, d->f, d->oh * d->ow, dyv, d->dyh, dbias);
	if (d->dyh) {                    /* implicit_bwd */
		cpu_iconv_filter(be, d, x, dyv, dw, ws);
		return;
	}
	if (s2d_filter(be, d)) {
		cpu_corr p = s2d_prob(d);
		if (cpu_grid_filter_s2d(be, &p, d->n, cpu_src_of(x, d->xh), cpu_src_of(dy, 0),
		                        dw) == 0)
			return;
	}
	if (phase_op(d, OP_FILTER)) {
		cpu_phase_filter(be, d, x, dy, dw, ws);
		return;
	}
	if (j.plan == PLAN_BATCH) {
		float *col = ws, *dym = col + (size_t)k * np;
		perm_job pj = { dy, dym, NULL, NULL, d->n, d->f, (size_t)d->oh * d->ow };
		cpu_im2col_all(be, d, x, col);
		cpu_parallel_for(be, d->n * d->f, batch_plane, &pj);
		/* dw (F,K) += dym (F,N*P) col^T: split over dw's columns */
		cpu_gemm(be, 0, 1, d->f, k, np, 1.0f, dym, np, col, np, 1.0f, dw, k);
		return;
	}
	if (j.plan == PLAN_IMPLICIT) {
		cpu_iconv_filter(be, d, x, dy, dw, ws);
		return;
	}
	j.x = x;
	j.dy = dy;
	j.dw = dw;
	j.parts = cpu_filter_parts(be->threads, d->n * j.nchunk, (long)d->n * d->oh * d->ow);
	cpu_parallel_for(be, j.parts, filter_part, &j);
	cpu_filter_reduce(be, j.parts, (size_t)d->f * k, dw);
}

/* The sum over N and the pixels of dy (N,F,P) per f, in double, one f per
 * job (also the bias gradient of the deconv and dense layers). */
typedef struct dbias_job {
	const float *dy;
	const uint16_t *dyh;     /* or dy as bf16 (conv_bwd_filter's d->dyh) */
	float *dbias;
	int n, f;
	size_t p;
} dbias_job;

/* Sixteen running sums, value i of a plane in sum i % 16 (cpu_sum16_run;
 * a bf16 dy widened 16 values at a time into the same lanes), added in a
 * fixed tree at the end (cpu_sum16_fold): the order depends on P alone,
 * as one sum's did, and the loop vectorizes. One sum was a chain of dependent additions,
 * one value per add's latency: 6% of a biased layer's three ops in
 * bench/conv_bench, 1% of a U-Net step (its deconvolutions and head). */
#define DBIAS_LANES 16            /* cpu_sum16_run's lanes */

static void dbias_one(void *ctx, int f)
{
	const dbias_job *jb = ctx;
	double acc[DBIAS_LANES] = { 0.0 };

	for (int n = 0; n < jb->n && jb->dyh; n++) {     /* the same sums of the widened */
		const uint16_t *g = jb->dyh + ((size_t)n * jb->f + f) * jb->p;
		float t[DBIAS_LANES];
		for (size_t i = 0; i < jb->p; i += DBIAS_LANES) {
			size_t m = jb->p - i < DBIAS_LANES ? jb->p - i : DBIAS_LANES;
			cpu_bf16_widen_run(t, g + i, m);
			for (size_t l = 0; l < m; l++)
				acc[l] += t[l];
		}
	}
	for (int n = 0; n < jb->n && !jb->dyh; n++)
		cpu_sum16_run(acc, jb->dy + ((size_t)n * jb->f + f) * jb->p, jb->p);
	jb->dbias[f] += (float)cpu_sum16_fold(acc);
}

static void bias_grad(cdp_backend *be, int n, int f, int hw, const void *dy, int h,
                      float *dbias)
{
	dbias_job jb = { h ? NULL : dy, h ? dy : NULL, dbias, n, f, (size_t)hw };
	cpu_parallel_for(be, f, dbias_one, &jb);
}

void cpu_bias_grad(cdp_backend *be, int n, int f, int hw, const float *dy, float *dbias)
{
	bias_grad(be, n, f, hw, dy, 0, dbias);
}
