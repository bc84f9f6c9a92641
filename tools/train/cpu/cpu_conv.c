/* cpu_conv.c: 2-D convolution on the CPU by im2col/col2im and sgemm.
 *
 * Shapes (backend.h): x (N,C,H,W), w (F,C,KH,KW), y (N,F,OH,OW); K = C*KH*KW
 * is the gemm depth and P = OH*OW the pixels of one output plane. Row
 * r = (c*KH + i)*KW + j of a column matrix holds x[c, oh*s - pad + i*dil,
 * ow*s - pad + j*dil] for each output pixel (0 outside the image).
 *
 * Four plans, chosen from the descriptor alone, in this order:
 *  - PLAN_1X1 (1x1 kernel, stride 1, no padding): x_n (C,P) already is the
 *    column matrix.
 *  - PLAN_IMPLICIT (other stride-1 convolutions with pad <= dil*(K-1), the
 *    usual case): no column matrix at all, see cpu_conv_implicit.c.
 *  - PLAN_BATCH (N > 1, P <= BATCH_MAX_P): small planes make thin gemms,
 *    so the whole batch goes into one, with col (K, N*P) and a (F, N*P)
 *    matrix (y or dy with the batch moved next to the pixels) in the
 *    caller's workspace; the gemms are split over the workers by blocks
 *    of C.
 *  - PLAN_ROWS (the rest: strided convolutions of large planes): the
 *    output plane is cut into chunks of whole rows whose column matrix
 *    (K, R*OW) fits in about 1 MB, so it stays in cache between im2col and
 *    the gemm that reads it. The jobs are (sample, chunk) pairs, split over
 *    the workers, each with its own column buffer (cpu_scratch):
 *        fwd:    y_n[:, chunk] (F,R*OW)  = w (F,K) col (K,R*OW)
 *        data:   dcol (K,R*OW) = w^T (K,F) dy_n[:, chunk]; dx_n += col2im
 *                (whole samples per worker: the chunks' dx rows overlap)
 *        filter: dw_t (F,K) += dy_n[:, chunk] col^T; dw += sum over t of
 *                dw_t in order t = 0, 1, ...
 *    PLAN_1X1 runs the same way, without im2col.
 * The gemms run single-threaded inside each job (cpu_gemm.c's kernels).
 * Only the filter gradients of PLAN_ROWS, PLAN_1X1 and PLAN_IMPLICIT
 * depend on the thread count (their per-worker partial sums).
 */
#include <stdint.h>
#include <string.h>
#include "cpu.h"

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

enum { PLAN_1X1, PLAN_ROWS, PLAN_BATCH, PLAN_IMPLICIT };

static int conv_plan(const cdp_conv_desc *d)
{
	if (d->kh == 1 && d->kw == 1 && d->stride == 1 && d->pad == 0)
		return PLAN_1X1;
	if (cpu_iconv_usable(d))
		return PLAN_IMPLICIT;
	if (d->n > 1 && d->oh * d->ow <= BATCH_MAX_P)
		return PLAN_BATCH;
	return PLAN_ROWS;
}

/* Output rows per chunk: the column chunk (K, R*OW) near CHUNK_FLOATS. */
static int chunk_rows(const cdp_conv_desc *d)
{
	long k = (long)d->c * d->kh * d->kw, r = CHUNK_FLOATS / (k * d->ow);
	if (r < 1)
		r = 1;
	return r > d->oh ? d->oh : (int)r;
}

int cdp_conv_desc_init(cdp_conv_desc *d)
{
	long eh, ew;

	if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->f < 1 ||
	    d->kh < 1 || d->kw < 1 || d->stride < 1 || d->pad < 0 || d->dil < 1)
		return -1;
	eh = (long)d->dil * (d->kh - 1) + 1;
	ew = (long)d->dil * (d->kw - 1) + 1;
	if (d->h + 2L * d->pad < eh || d->w + 2L * d->pad < ew)
		return -1;
	d->oh = (int)((d->h + 2L * d->pad - eh) / d->stride + 1);
	d->ow = (int)((d->w + 2L * d->pad - ew) / d->stride + 1);
	return 0;
}

/* The caller's workspace holds PLAN_BATCH's matrices; each worker's column
 * chunk and partial filter gradient live in the backend's scratch, which
 * this call reserves (SIZE_MAX when that memory cannot be had, so that
 * the caller's allocation fails too). */
size_t cpu_conv_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	size_t k = (size_t)d->c * d->kh * d->kw, p = (size_t)d->oh * d->ow, per = 0, ws = 0;

	switch (conv_plan(d)) {
	case PLAN_1X1:
		per = (size_t)d->f * d->c;
		break;
	case PLAN_BATCH:
		ws = (k + (size_t)d->f) * (size_t)d->n * p * sizeof(float);
		break;
	case PLAN_IMPLICIT:
		if (cpu_scratch_reserve(be, cpu_iconv_scratch(d)) < 0)
			return SIZE_MAX;
		return cpu_iconv_workspace(d);
	default:
		per = k * (size_t)chunk_rows(d) * d->ow + (size_t)d->f * k;
	}
	if (cpu_scratch_reserve(be, per * sizeof(float)) < 0)
		return SIZE_MAX;
	return ws;
}

/* ---- im2col / col2im over output rows [r0, r1) of `nsamp` samples ----
 * The chunk's columns start at col + r*ld; sample s's pixels at s*(r1-r0)*OW. */

typedef struct col_job {
	const cdp_conv_desc *d;
	const float *x;          /* (nsamp, C, H, W) */
	float *col;              /* (K, ld) */
	int nsamp, r0, r1;
	size_t ld;
	float beta;              /* col2im: 0 overwrite, 1 accumulate */
} col_job;

/* Output columns [lo, hi) of a row whose input column is ow*s + start
 * stay inside [0, w). */
static void valid_cols(int ow_n, int s, int start, int w, int *lo, int *hi)
{
	int a = 0, b = ow_n;
	if (start < 0)
		a = (-start + s - 1) / s;
	if (start + (long)(ow_n - 1) * s >= w)
		b = (w - 1 - start) < 0 ? 0 : (w - 1 - start) / s + 1;
	if (a > b)
		a = b;
	*lo = a;
	*hi = b;
}

static void im2col_row(void *ctx, int r)
{
	const col_job *jb = ctx;
	const cdp_conv_desc *d = jb->d;
	int kk = d->kh * d->kw, c = r / kk, i = (r % kk) / d->kw, j = r % d->kw;
	int s = d->stride, wstart = j * d->dil - d->pad, lo, hi;
	size_t plane = (size_t)d->h * d->w, rows = (size_t)(jb->r1 - jb->r0) * d->ow;

	valid_cols(d->ow, s, wstart, d->w, &lo, &hi);
	for (int n = 0; n < jb->nsamp; n++) {
		const float *xc = jb->x + ((size_t)n * d->c + c) * plane;
		float *out = jb->col + (size_t)r * jb->ld + (size_t)n * rows;
		for (int oh = jb->r0; oh < jb->r1; oh++, out += d->ow) {
			int ih = oh * s - d->pad + i * d->dil;
			if (ih < 0 || ih >= d->h) {
				memset(out, 0, (size_t)d->ow * sizeof *out);
				continue;
			}
			const float *xr = xc + (size_t)ih * d->w;
			for (int ow = 0; ow < lo; ow++)
				out[ow] = 0.0f;
			if (s == 1)
				memcpy(out + lo, xr + lo + wstart, (size_t)(hi - lo) * sizeof *out);
			else
				for (int ow = lo; ow < hi; ow++)
					out[ow] = xr[ow * s + wstart];
			for (int ow = hi; ow < d->ow; ow++)
				out[ow] = 0.0f;
		}
	}
}

/* One (sample, channel) plane of dx, summing its KH*KW rows in a fixed
 * order; with beta 0 the plane is cleared first. */
static void col2im_plane(void *ctx, int t)
{
	const col_job *jb = ctx;
	const cdp_conv_desc *d = jb->d;
	int n = t / d->c, c = t % d->c, s = d->stride;
	size_t plane = (size_t)d->h * d->w, rows = (size_t)(jb->r1 - jb->r0) * d->ow;
	float *xc = (float *)jb->x + ((size_t)n * d->c + c) * plane;

	if (jb->beta == 0.0f)
		memset(xc, 0, plane * sizeof *xc);
	for (int i = 0; i < d->kh; i++) {
		for (int j = 0; j < d->kw; j++) {
			int r = (c * d->kh + i) * d->kw + j, wstart = j * d->dil - d->pad, lo, hi;
			const float *in = jb->col + (size_t)r * jb->ld + (size_t)n * rows;
			valid_cols(d->ow, s, wstart, d->w, &lo, &hi);
			for (int oh = jb->r0; oh < jb->r1; oh++, in += d->ow) {
				int ih = oh * s - d->pad + i * d->dil;
				if (ih < 0 || ih >= d->h || lo >= hi)
					continue;
				float *xr = xc + (size_t)ih * d->w + (wstart + lo * s);
				const float *ir = in + lo;
				if (s == 1)
					for (int m = 0; m < hi - lo; m++)
						xr[m] += ir[m];
				else
					for (int m = 0; m < hi - lo; m++)
						xr[m * s] += ir[m];
			}
		}
	}
}

/* Sequential versions for one chunk inside a worker's job. */
static void im2col_seq(const cdp_conv_desc *d, const float *xn, int r0, int r1, float *col)
{
	col_job jb = { d, xn, col, 1, r0, r1, (size_t)(r1 - r0) * d->ow, 0.0f };
	for (int r = 0; r < d->c * d->kh * d->kw; r++)
		im2col_row(&jb, r);
}

static void col2im_seq(const cdp_conv_desc *d, const float *col, int r0, int r1,
                       float *dxn, float beta)
{
	col_job jb = { d, dxn, (float *)col, 1, r0, r1, (size_t)(r1 - r0) * d->ow, beta };
	for (int c = 0; c < d->c; c++)
		col2im_plane(&jb, c);
}

/* ---- PLAN_ROWS and PLAN_1X1: jobs over (sample, chunk) items ---- */

typedef struct conv_job {
	cdp_backend *be;
	const cdp_conv_desc *d;
	const float *x, *w, *bias, *dy;
	float *y, *dx, *dw;
	float beta;
	int plan, rows, nchunk, parts;
} conv_job;

static void item_range(const conv_job *j, int t, int items, int *lo, int *hi)
{
	*lo = (int)((long)items * t / j->parts);
	*hi = (int)((long)items * (t + 1) / j->parts);
}

static void fwd_part(void *ctx, int t)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow, lo, hi;
	float *col = cpu_scratch(j->be, t);

	item_range(j, t, d->n * j->nchunk, &lo, &hi);
	for (int it = lo; it < hi; it++) {
		int n = it / j->nchunk, r0 = (it % j->nchunk) * j->rows;
		int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow;
		const float *xn = j->x + (size_t)n * d->c * d->h * d->w;
		float *yn = j->y + (size_t)n * d->f * p + (size_t)r0 * d->ow;
		const float *b = xn + (size_t)r0 * d->ow;
		int ldb = p;
		if (j->plan == PLAN_ROWS) {
			im2col_seq(d, xn, r0, r1, col);
			b = col;
			ldb = np;
		}
		cpu_kgemm_nn(d->f, np, k, j->w, k, 1, b, ldb, 0.0f, yn, p);
		if (j->bias)
			for (int f = 0; f < d->f; f++) {
				float *yr = yn + (size_t)f * p, bf = j->bias[f];
				for (int q = 0; q < np; q++)
					yr[q] += bf;
			}
	}
}

static void data_part(void *ctx, int t)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow, lo, hi;
	float *col = cpu_scratch(j->be, t);

	if (j->plan == PLAN_1X1) {      /* (sample, chunk) items own dx columns */
		item_range(j, t, d->n * j->nchunk, &lo, &hi);
		for (int it = lo; it < hi; it++) {
			int n = it / j->nchunk, q0 = (it % j->nchunk) * j->rows * d->ow;
			int q1 = q0 + j->rows * d->ow < p ? q0 + j->rows * d->ow : p;
			cpu_kgemm_nn(d->c, q1 - q0, d->f, j->w, 1, k,
			             j->dy + (size_t)n * d->f * p + q0, p, j->beta,
			             j->dx + (size_t)n * d->c * p + q0, p);
		}
		return;
	}
	item_range(j, t, d->n, &lo, &hi);   /* whole samples: chunks overlap in dx */
	for (int n = lo; n < hi; n++) {
		float *dxn = j->dx + (size_t)n * d->c * d->h * d->w;
		for (int r0 = 0; r0 < d->oh; r0 += j->rows) {
			int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow;
			cpu_kgemm_nn(k, np, d->f, j->w, 1, k,
			             j->dy + (size_t)n * d->f * p + (size_t)r0 * d->ow, p, 0.0f, col, np);
			col2im_seq(d, col, r0, r1, dxn, r0 == 0 ? j->beta : 1.0f);
		}
	}
}

static void filter_part(void *ctx, int t)
{
	const conv_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	int k = d->c * d->kh * d->kw, p = d->oh * d->ow, lo, hi;
	float *dwt = cpu_scratch(j->be, t), *col = dwt + (size_t)d->f * k;

	memset(dwt, 0, (size_t)d->f * k * sizeof *dwt);
	item_range(j, t, d->n * j->nchunk, &lo, &hi);
	for (int it = lo; it < hi; it++) {
		int n = it / j->nchunk, r0 = (it % j->nchunk) * j->rows;
		int r1 = r0 + j->rows < d->oh ? r0 + j->rows : d->oh, np = (r1 - r0) * d->ow;
		const float *xn = j->x + (size_t)n * d->c * d->h * d->w;
		const float *b = xn + (size_t)r0 * d->ow;
		int ldb = p;
		if (j->plan == PLAN_ROWS) {
			im2col_seq(d, xn, r0, r1, col);
			b = col;
			ldb = np;
		}
		cpu_kgemm_nt(d->f, k, np, j->dy + (size_t)n * d->f * p + (size_t)r0 * d->ow,
		             p, b, ldb, dwt, k);
	}
}

/* dw[i] += sum over t of partial_t[i], in order t = 0, 1, ... */
static void reduce_part(void *ctx, int t)
{
	const conv_job *j = ctx;
	size_t n = (size_t)j->d->f * j->d->c * j->d->kh * j->d->kw;
	size_t lo = n * t / j->parts, hi = n * (t + 1) / j->parts;

	for (int u = 0; u < j->parts; u++) {
		const float *s = cpu_scratch(j->be, u);
		for (size_t i = lo; i < hi; i++)
			j->dw[i] += s[i];
	}
}

/* ---- PLAN_BATCH: moving the batch between (N,F,P) and (F,N*P) ---- */

typedef struct perm_job {
	const float *src;
	float *dst;
	const float *bias;
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
}

/* (N, F, P) -> (F, N*P); job index = (n, f) */
static void batch_plane(void *ctx, int t)
{
	const perm_job *jb = ctx;
	int n = t / jb->f, f = t % jb->f;
	memcpy(jb->dst + ((size_t)f * jb->n + n) * jb->p,
	       jb->src + ((size_t)n * jb->f + f) * jb->p, jb->p * sizeof(float));
}

static void im2col_all(cdp_backend *be, const cdp_conv_desc *d, const float *x, float *col)
{
	col_job jb = { d, x, col, d->n, 0, d->oh, (size_t)d->n * d->oh * d->ow, 0.0f };
	cpu_parallel_for(be, d->c * d->kh * d->kw, im2col_row, &jb);
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

void cpu_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                  const float *w, const float *bias, float *y, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);

	if (j.plan == PLAN_BATCH) {
		float *col = ws, *ym = col + (size_t)k * np;    /* (K, N*P), (F, N*P) */
		perm_job pj = { ym, y, bias, d->n, d->f, (size_t)d->oh * d->ow };
		im2col_all(be, d, x, col);
		cpu_gemm(be, 0, 0, d->f, np, k, 1.0f, w, k, col, np, 0.0f, ym, np);
		cpu_parallel_for(be, d->n * d->f, unbatch_plane, &pj);
		return;
	}
	if (j.plan == PLAN_IMPLICIT) {
		cpu_iconv_fwd(be, d, x, w, bias, y, ws);
		return;
	}
	j.x = x;
	j.w = w;
	j.bias = bias;
	j.y = y;
	cpu_parallel_for(be, j.parts, fwd_part, &j);
}

void cpu_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const float *dy,
                       const float *w, float *dx, float beta, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);

	if (j.plan == PLAN_BATCH) {
		float *col = ws, *dym = col + (size_t)k * np;
		perm_job pj = { dy, dym, NULL, d->n, d->f, (size_t)d->oh * d->ow };
		col_job cj = { d, dx, col, d->n, 0, d->oh, (size_t)np, beta };
		cpu_parallel_for(be, d->n * d->f, batch_plane, &pj);
		cpu_gemm(be, 1, 0, k, np, d->f, 1.0f, w, k, dym, np, 0.0f, col, np);
		cpu_parallel_for(be, d->n * d->c, col2im_plane, &cj);
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
	cpu_parallel_for(be, j.parts, data_part, &j);
}

void cpu_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                         const float *dy, float *dw, float *dbias, void *ws)
{
	int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
	conv_job j = make_job(be, d);

	if (dbias)
		cpu_bias_grad(be, d->n, d->f, d->oh * d->ow, dy, dbias);
	if (j.plan == PLAN_BATCH) {
		float *col = ws, *dym = col + (size_t)k * np;
		perm_job pj = { dy, dym, NULL, d->n, d->f, (size_t)d->oh * d->ow };
		im2col_all(be, d, x, col);
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
	cpu_parallel_for(be, j.parts, filter_part, &j);
	cpu_parallel_for(be, j.parts, reduce_part, &j);
}

/* The sum over N and the pixels of dy (N,F,P) per f, in double, one f per
 * job (also the bias gradient of the deconv and dense layers). */
typedef struct dbias_job {
	const float *dy;
	float *dbias;
	int n, f;
	size_t p;
} dbias_job;

static void dbias_one(void *ctx, int f)
{
	const dbias_job *jb = ctx;
	double s = 0.0;
	for (int n = 0; n < jb->n; n++) {
		const float *g = jb->dy + ((size_t)n * jb->f + f) * jb->p;
		for (size_t i = 0; i < jb->p; i++)
			s += g[i];
	}
	jb->dbias[f] += (float)s;
}

void cpu_bias_grad(cdp_backend *be, int n, int f, int hw, const float *dy, float *dbias)
{
	dbias_job jb = { dy, dbias, n, f, (size_t)hw };
	cpu_parallel_for(be, f, dbias_one, &jb);
}
