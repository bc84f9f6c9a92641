/* cpu_ops.c: the CPU backend's activations and pooling (batchnorm is in
 * cpu_bn.c, the simpler layer ops in cpu_elem.c).
 *
 * Every op follows PyTorch's definition (backend.h spells them out). The
 * work is split over the thread pool by a unit that owns its outputs: an
 * (n,c) plane for pooling, a block of elements for the elementwise ops.
 * Results therefore do not depend on the thread count.
 *
 * `beta` arguments: 0 overwrites the output, 1 adds to it.
 */
#include <math.h>
#include <string.h>
#include "cpu.h"

/* The loops here are simple streams over large arrays: let GCC vectorize
 * them even at -O2 (which does not, or only when no remainder loop is
 * needed), and if-convert selects (which trapping math forbids; we never
 * read floating-point exception flags). Vectorization does not reorder
 * the window sums of average pooling: GCC reorders a float sum only under
 * -fassociative-math. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

/* ---- activations (in place allowed: y may be x, dx may be dy) ---- */

typedef struct act_job {
	int kind;
	float slope, beta;
	const float *x, *dy;
	float *y, *dx;
	size_t n;
} act_job;

/* Both candidates are computed unconditionally so the loops vectorize as
 * selects (a conditional multiply would not: it might trap). */
static void act_fwd_block(void *ctx, int b)
{
	const act_job *j = ctx;
	const float *x = j->x;
	float *y = j->y, slope = j->slope;
	size_t lo, hi;

	cpu_block_range(j->n, b, &lo, &hi);
	if (j->kind == CDP_ACT_RELU)
		for (size_t i = lo; i < hi; i++) {
			float v = x[i];
			y[i] = v < 0.0f ? 0.0f : v;     /* NaN passes, as in PyTorch */
		}
	else
		for (size_t i = lo; i < hi; i++) {
			float v = x[i], neg = v * slope;
			y[i] = v < 0.0f ? neg : v;
		}
}

/* The mask comes from y: for relu and leaky (slope >= 0), y > 0 exactly
 * when x > 0. relu passes the gradient unless y <= 0, as PyTorch's
 * threshold_backward on its output (so a NaN passes). */
static void act_bwd_block(void *ctx, int b)
{
	const act_job *j = ctx;
	const float *y = j->x, *dy = j->dy;
	float *dx = j->dx, slope = j->slope;
	size_t lo, hi;

	cpu_block_range(j->n, b, &lo, &hi);
	if (j->kind == CDP_ACT_RELU && j->beta == 0.0f)
		for (size_t i = lo; i < hi; i++) {
			float g = dy[i];
			dx[i] = y[i] <= 0.0f ? 0.0f : g;
		}
	else if (j->kind == CDP_ACT_RELU)
		for (size_t i = lo; i < hi; i++) {
			float g = dy[i];
			dx[i] += y[i] <= 0.0f ? 0.0f : g;
		}
	else if (j->beta == 0.0f)
		for (size_t i = lo; i < hi; i++) {
			float g = dy[i], neg = g * slope;
			dx[i] = y[i] > 0.0f ? g : neg;
		}
	else
		for (size_t i = lo; i < hi; i++) {
			float g = dy[i], neg = g * slope;
			dx[i] += y[i] > 0.0f ? g : neg;
		}
}

void cpu_act_fwd(cdp_backend *be, int kind, float slope, const float *x, float *y, size_t n)
{
	act_job j = { kind, slope, 0.0f, x, NULL, y, NULL, n };
	cpu_parallel_for(be, cpu_nblocks(n), act_fwd_block, &j);
}

void cpu_act_bwd(cdp_backend *be, int kind, float slope, const float *y,
                 const float *dy, float *dx, float beta, size_t n)
{
	act_job j = { kind, slope, beta, y, dy, NULL, dx, n };
	cpu_parallel_for(be, cpu_nblocks(n), act_bwd_block, &j);
}

/* ---- pooling: one job per (n,c) plane; idx is h*W+w within the plane ---- */

typedef struct pool_job {
	const cdp_pool_desc *d;
	const float *x, *dy;
	float *y, *dx;
	int32_t *idx;
	const int32_t *cidx;
	float beta;
} pool_job;

/* Max padding is -inf: padded cells never win. The first maximum in
 * row-major window order wins ties, and NaN propagates, as in PyTorch. */
static void maxpool_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;
	int32_t *ix = j->idx + (size_t)t * d->oh * d->ow;

	for (int oh = 0; oh < d->oh; oh++) {
		int h0 = oh * d->stride - d->pad, h1 = h0 + d->k;
		if (h0 < 0) h0 = 0;
		if (h1 > d->h) h1 = d->h;
		for (int ow = 0; ow < d->ow; ow++) {
			int w0 = ow * d->stride - d->pad, w1 = w0 + d->k;
			if (w0 < 0) w0 = 0;
			if (w1 > d->w) w1 = d->w;
			float best = -INFINITY;
			int bi = h0 * d->w + w0;
			for (int h = h0; h < h1; h++)
				for (int w = w0; w < w1; w++) {
					float v = x[h * d->w + w];
					if (v > best || isnan(v)) {
						best = v;
						bi = h * d->w + w;
						if (isnan(v))
							goto found;
					}
				}
found:
			y[oh * d->ow + ow] = best;
			ix[oh * d->ow + ow] = bi;
		}
	}
}

/* The usual 2x2 window at stride 2 without padding (always inside the
 * image): the same rule as maxpool_plane without its branches, 4 outputs
 * at a time. A candidate replaces the best so far when it is greater or
 * NaN, unless the best already is NaN (the first NaN wins). */
typedef float v4f __attribute__((vector_size(16), aligned(4)));
typedef int32_t v4i __attribute__((vector_size(16), aligned(4)));

/* The even and odd lanes of a:b (8 floats). GCC's __builtin_shuffle takes
 * a mask vector, clang only __builtin_shufflevector's constant indices. */
#ifdef __clang__
#define EVEN4(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define ODD4(a, b)  __builtin_shufflevector(a, b, 1, 3, 5, 7)
#else
#define EVEN4(a, b) __builtin_shuffle(a, b, (v4i){ 0, 2, 4, 6 })
#define ODD4(a, b)  __builtin_shuffle(a, b, (v4i){ 1, 3, 5, 7 })
#endif

static inline void pick4(v4f *best, v4i *bi, v4f v, v4i vi)
{
	v4i take = (*best == *best) & ((v > *best) | (v != v));
	*best = (v4f)(((v4i)v & take) | ((v4i)*best & ~take));
	*bi = (vi & take) | (*bi & ~take);
}

static void maxpool2_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;
	int32_t *ix = j->idx + (size_t)t * d->oh * d->ow;
	const v4i even = { 0, 2, 4, 6 };

	for (int oh = 0; oh < d->oh; oh++) {
		const float *r0 = x + (size_t)2 * oh * d->w, *r1 = r0 + d->w;
		float *yr = y + (size_t)oh * d->ow;
		int32_t *ir = ix + (size_t)oh * d->ow, base = 2 * oh * d->w;
		int ow = 0;
		for (; ow + 4 <= d->ow; ow += 4) {
			v4f p0, p1, q0, q1, best;
			v4i bi, i0 = base + 2 * ow + even;
			memcpy(&p0, r0 + 2 * ow, sizeof p0);
			memcpy(&p1, r0 + 2 * ow + 4, sizeof p1);
			memcpy(&q0, r1 + 2 * ow, sizeof q0);
			memcpy(&q1, r1 + 2 * ow + 4, sizeof q1);
			best = EVEN4(p0, p1);
			bi = i0;
			pick4(&best, &bi, ODD4(p0, p1), i0 + 1);
			pick4(&best, &bi, EVEN4(q0, q1), i0 + d->w);
			pick4(&best, &bi, ODD4(q0, q1), i0 + d->w + 1);
			memcpy(yr + ow, &best, sizeof best);
			memcpy(ir + ow, &bi, sizeof bi);
		}
		for (; ow < d->ow; ow++) {
			float best = r0[2 * ow], v;
			int32_t bi = base + 2 * ow;
			int take;
			v = r0[2 * ow + 1];
			take = (best == best) & ((v > best) | (v != v));
			best = take ? v : best;
			bi = take ? base + 2 * ow + 1 : bi;
			v = r1[2 * ow];
			take = (best == best) & ((v > best) | (v != v));
			best = take ? v : best;
			bi = take ? base + d->w + 2 * ow : bi;
			v = r1[2 * ow + 1];
			take = (best == best) & ((v > best) | (v != v));
			best = take ? v : best;
			bi = take ? base + d->w + 2 * ow + 1 : bi;
			yr[ow] = best;
			ir[ow] = bi;
		}
	}
}

static void maxpool_bwd_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	size_t plane = (size_t)d->h * d->w, op = (size_t)d->oh * d->ow;
	float *dx = j->dx + (size_t)t * plane;
	const float *dy = j->dy + (size_t)t * op;
	const int32_t *ix = j->cidx + (size_t)t * op;

	if (j->beta == 0.0f)
		memset(dx, 0, plane * sizeof *dx);
	for (size_t i = 0; i < op; i++)
		dx[ix[i]] += dy[i];
}

/* PyTorch's count_include_pad=True divisor: the window clipped to the
 * padded image, (h1-h0)*(w1-w0) before clipping to the image itself. */
static void avg_window(const cdp_pool_desc *d, int oh, int ow, int *h0, int *h1,
                       int *w0, int *w1, float *inv)
{
	*h0 = oh * d->stride - d->pad;
	*w0 = ow * d->stride - d->pad;
	*h1 = *h0 + d->k < d->h + d->pad ? *h0 + d->k : d->h + d->pad;
	*w1 = *w0 + d->k < d->w + d->pad ? *w0 + d->k : d->w + d->pad;
	*inv = 1.0f / (float)((*h1 - *h0) * (*w1 - *w0));
	if (*h0 < 0) *h0 = 0;
	if (*w0 < 0) *w0 = 0;
	if (*h1 > d->h) *h1 = d->h;
	if (*w1 > d->w) *w1 = d->w;
}

static void avgpool_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;

	for (int oh = 0; oh < d->oh; oh++)
		for (int ow = 0; ow < d->ow; ow++) {
			int h0, h1, w0, w1;
			float inv, s = 0.0f;
			avg_window(d, oh, ow, &h0, &h1, &w0, &w1, &inv);
			for (int h = h0; h < h1; h++)
				for (int w = w0; w < w1; w++)
					s += x[h * d->w + w];
			y[oh * d->ow + ow] = s * inv;
		}
}

static void avgpool_bwd_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	size_t plane = (size_t)d->h * d->w;
	float *dx = j->dx + (size_t)t * plane;
	const float *dy = j->dy + (size_t)t * d->oh * d->ow;

	if (j->beta == 0.0f)
		memset(dx, 0, plane * sizeof *dx);
	for (int oh = 0; oh < d->oh; oh++)
		for (int ow = 0; ow < d->ow; ow++) {
			int h0, h1, w0, w1;
			float inv;
			avg_window(d, oh, ow, &h0, &h1, &w0, &w1, &inv);
			float g = dy[oh * d->ow + ow] * inv;
			for (int h = h0; h < h1; h++)
				for (int w = w0; w < w1; w++)
					dx[h * d->w + w] += g;
		}
}

void cpu_maxpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y, int32_t *idx)
{
	pool_job j = { .d = d, .x = x, .y = y, .idx = idx };
	int two = d->k == 2 && d->stride == 2 && d->pad == 0;
	cpu_parallel_for(be, d->n * d->c, two ? maxpool2_plane : maxpool_plane, &j);
}

/* x and y are not needed: idx says where each maximum came from. */
void cpu_maxpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, const float *y,
                     const float *dy, const int32_t *idx, float *dx, float beta)
{
	pool_job j = { .d = d, .dy = dy, .dx = dx, .cidx = idx, .beta = beta };
	cpu_parallel_for(be, d->n * d->c, maxpool_bwd_plane, &j);
}

void cpu_avgpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y)
{
	pool_job j = { .d = d, .x = x, .y = y };
	cpu_parallel_for(be, d->n * d->c, avgpool_plane, &j);
}

void cpu_avgpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *dy, float *dx, float beta)
{
	pool_job j = { .d = d, .dy = dy, .dx = dx, .beta = beta };
	cpu_parallel_for(be, d->n * d->c, avgpool_bwd_plane, &j);
}
