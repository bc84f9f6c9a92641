/* cpu_elem.c: the CPU backend's simple layer ops: upsampling, channel
 * slices for concat, dropout, global average pooling, bias, add and diff.
 *
 * Each is split over the thread pool by (n,c) planes or blocks of elements
 * that own their outputs, so results do not depend on the thread count.
 * `beta` arguments: 0 overwrites the output, 1 adds to it.
 */
#include <math.h>
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

/* ---- upsampling: x (N,C,H,W) -> y (N,C,OH,OW); one job per plane ---- */

typedef struct up_job {
	int mode, h, w, oh, ow;
	float sy, sx;            /* the scales H/OH, W/OW (backend.h) */
	const float *x;
	float *y;
	float beta;
} up_job;

static void up_fwd_plane(void *ctx, int t)
{
	const up_job *j = ctx;
	int h = j->h, w = j->w, oh = j->oh, ow = j->ow;
	const float *x = j->x + (size_t)t * h * w;
	float *y = j->y + (size_t)t * oh * ow;

	if (j->mode == CDP_UP_NEAREST) {
		for (int oy = 0; oy < oh; oy++) {
			const float *xr = x + (size_t)cdp_up_nearest(oy, h, oh, j->sy) * w;
			float *yr = y + (size_t)oy * ow;
			for (int ox = 0; ox < ow; ox++)
				yr[ox] = xr[cdp_up_nearest(ox, w, ow, j->sx)];
		}
		return;
	}
	for (int oy = 0; oy < oh; oy++) {
		int y0, y1;
		float a0, a1;
		cdp_up_bilinear(oy, h, j->sy, &y0, &y1, &a0, &a1);
		const float *r0 = x + (size_t)y0 * w, *r1 = x + (size_t)y1 * w;
		float *yr = y + (size_t)oy * ow;
		for (int ox = 0; ox < ow; ox++) {
			int x0, x1;
			float b0, b1;
			cdp_up_bilinear(ox, w, j->sx, &x0, &x1, &b0, &b1);
			yr[ox] = a0 * (b0 * r0[x0] + b1 * r0[x1]) + a1 * (b0 * r1[x0] + b1 * r1[x1]);
		}
	}
}

/* Here x is dy (N,C,OH,OW) and y is dx (N,C,H,W): the forward's weights
 * scattered by output pixel, row-major, in the order of its terms (the
 * order the CUDA gather adds them in). */
static void up_bwd_plane(void *ctx, int t)
{
	const up_job *j = ctx;
	int h = j->h, w = j->w, oh = j->oh, ow = j->ow;
	const float *dy = j->x + (size_t)t * oh * ow;
	float *dx = j->y + (size_t)t * h * w;

	if (j->beta == 0.0f)
		memset(dx, 0, (size_t)h * w * sizeof *dx);
	for (int oy = 0; oy < oh; oy++) {
		const float *g = dy + (size_t)oy * ow;
		if (j->mode == CDP_UP_NEAREST) {
			float *r = dx + (size_t)cdp_up_nearest(oy, h, oh, j->sy) * w;
			for (int ox = 0; ox < ow; ox++)
				r[cdp_up_nearest(ox, w, ow, j->sx)] += g[ox];
			continue;
		}
		int y0, y1;
		float a0, a1;
		cdp_up_bilinear(oy, h, j->sy, &y0, &y1, &a0, &a1);
		float *r0 = dx + (size_t)y0 * w, *r1 = dx + (size_t)y1 * w;
		for (int ox = 0; ox < ow; ox++) {
			int x0, x1;
			float b0, b1;
			cdp_up_bilinear(ox, w, j->sx, &x0, &x1, &b0, &b1);
			r0[x0] += a0 * b0 * g[ox];
			r0[x1] += a0 * b1 * g[ox];
			r1[x0] += a1 * b0 * g[ox];
			r1[x1] += a1 * b1 * g[ox];
		}
	}
}

void cpu_upsample_fwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *x, float *y)
{
	up_job j = { mode, h, w, oh, ow, (float)h / (float)oh, (float)w / (float)ow, x, y, 0.0f };
	cpu_parallel_for(be, n * c, up_fwd_plane, &j);
}

void cpu_upsample_bwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *dy, float *dx, float beta)
{
	up_job j = { mode, h, w, oh, ow, (float)h / (float)oh, (float)w / (float)ow, dy, dx, beta };
	cpu_parallel_for(be, n * c, up_bwd_plane, &j);
}

/* ---- channel slices: one job per (n, channel of the slice) plane ---- */

typedef struct chan_job {
	int c, hw, big_c, off;
	const float *src;
	float *dst;
	float beta;
	int to_big;              /* 1: src (N,c) -> dst (N,big_c); 0: reverse */
} chan_job;

static void chan_plane(void *ctx, int t)
{
	const chan_job *j = ctx;
	int n = t / j->c, ch = t % j->c;
	size_t hw = (size_t)j->hw;
	size_t small = ((size_t)n * j->c + ch) * hw;
	size_t big = ((size_t)n * j->big_c + j->off + ch) * hw;
	const float *s = j->src + (j->to_big ? small : big);
	float *d = j->dst + (j->to_big ? big : small);

	if (j->beta == 0.0f)
		memcpy(d, s, hw * sizeof *d);
	else
		for (size_t i = 0; i < hw; i++)
			d[i] += s[i];
}

void cpu_chan_copy(cdp_backend *be, int n, int c, int hw, const float *src,
                   float *dst, int dst_c, int dst_off, float beta)
{
	chan_job j = { c, hw, dst_c, dst_off, src, dst, beta, 1 };
	cpu_parallel_for(be, n * c, chan_plane, &j);
}

void cpu_chan_slice(cdp_backend *be, int n, int c, int hw, const float *src,
                    int src_c, int src_off, float *dst, float beta)
{
	chan_job j = { c, hw, src_c, src_off, src, dst, beta, 0 };
	cpu_parallel_for(be, n * c, chan_plane, &j);
}

/* ---- dropout: the mask depends only on (seed, element index) ---- */

typedef struct drop_job {
	float p, scale, beta;
	uint64_t seed;
	const float *x;
	float *y;
	uint8_t *mask;
	const uint8_t *cmask;
	size_t n;
} drop_job;

static void drop_fwd_block(void *ctx, int b)
{
	const drop_job *j = ctx;
	size_t lo, hi;
	cpu_block_range(j->n, b, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		int keep = cdp_dropout_keep(j->seed, i, j->p);
		j->mask[i] = (uint8_t)keep;
		j->y[i] = keep ? j->x[i] * j->scale : 0.0f;
	}
}

static void drop_bwd_block(void *ctx, int b)
{
	const drop_job *j = ctx;
	size_t lo, hi;
	cpu_block_range(j->n, b, &lo, &hi);
	if (j->beta == 0.0f)
		for (size_t i = lo; i < hi; i++)
			j->y[i] = j->cmask[i] ? j->x[i] * j->scale : 0.0f;
	else
		for (size_t i = lo; i < hi; i++)
			j->y[i] += j->cmask[i] ? j->x[i] * j->scale : 0.0f;
}

void cpu_dropout_fwd(cdp_backend *be, float p, uint64_t seed, const float *x, float *y, uint8_t *mask, size_t n)
{
	drop_job j = { .p = p, .scale = 1.0f / (1.0f - p), .seed = seed, .x = x,
	               .y = y, .mask = mask, .n = n };
	cpu_parallel_for(be, cpu_nblocks(n), drop_fwd_block, &j);
}

void cpu_dropout_bwd(cdp_backend *be, float p, const uint8_t *mask, const float *dy, float *dx, float beta, size_t n)
{
	drop_job j = { .p = p, .scale = 1.0f / (1.0f - p), .beta = beta, .x = dy,
	               .y = dx, .cmask = mask, .n = n };
	cpu_parallel_for(be, cpu_nblocks(n), drop_bwd_block, &j);
}

/* ---- global average pool: x (N,C,HW) -> y (N,C); one job per plane ---- */

typedef struct gap_job {
	int hw;
	const float *x;
	float *y;
	float beta;
} gap_job;

/* The plane's sum in 16 double lanes (cpu_sum16_run, as cpu_conv.c's
 * bias gradient sums): one double sum in order took 5.4 ms for a batch
 * of 64 x 32 planes of 64x64 on two threads, twice the batchnorm before
 * it. The order moves the double sum by a few of its ulps, far below
 * the float mean's. */
CPU_CLONES static void gap_fwd_plane(void *ctx, int t)
{
	const gap_job *j = ctx;
	double lane[16] = { 0.0 };

	cpu_sum16_run(lane, j->x + (size_t)t * j->hw, (size_t)j->hw);
	j->y[t] = (float)(cpu_sum16_fold(lane) / j->hw);
}

static void gap_bwd_plane(void *ctx, int t)
{
	const gap_job *j = ctx;
	float *dx = j->y + (size_t)t * j->hw;
	float g = j->x[t] / (float)j->hw;
	if (j->beta == 0.0f)
		for (int i = 0; i < j->hw; i++)
			dx[i] = g;
	else
		for (int i = 0; i < j->hw; i++)
			dx[i] += g;
}

void cpu_gap_fwd(cdp_backend *be, int n, int c, int hw, const float *x, float *y)
{
	gap_job j = { hw, x, y, 0.0f };
	cpu_parallel_for(be, n * c, gap_fwd_plane, &j);
}

void cpu_gap_bwd(cdp_backend *be, int n, int c, int hw, const float *dy, float *dx, float beta)
{
	gap_job j = { hw, dy, dx, beta };
	cpu_parallel_for(be, n * c, gap_bwd_plane, &j);
}

/* ---- bias and add ---- */

typedef struct bias_job {
	int f, hw;
	const float *bias;
	float *y;
} bias_job;

/* a plane the convolution has just written, from L2: in the widest
 * vectors the CPU has (one add per value, the same bits) */
CPU_CLONES
static void bias_plane(void *ctx, int t)
{
	const bias_job *j = ctx;
	float *y = j->y + (size_t)t * j->hw, b = j->bias[t % j->f];
	for (int i = 0; i < j->hw; i++)
		y[i] += b;
}

void cpu_bias_add(cdp_backend *be, int n, int f, int hw, const float *bias, float *y)
{
	bias_job j = { f, hw, bias, y };
	cpu_parallel_for(be, n * f, bias_plane, &j);
}

typedef struct add_job {
	const float *a, *b;
	float *y;
	size_t n;
} add_job;

static void add_block(void *ctx, int bl)
{
	const add_job *j = ctx;
	size_t lo, hi;
	cpu_block_range(j->n, bl, &lo, &hi);
	for (size_t i = lo; i < hi; i++)
		j->y[i] = j->a[i] + j->b[i];
}

void cpu_add(cdp_backend *be, const float *a, const float *b, float *y, size_t n)
{
	add_job j = { a, b, y, n };
	cpu_parallel_for(be, cpu_nblocks(n), add_block, &j);
}

/* ---- diff: y = a - b or |a - b|; blocks of elements ---- */

typedef struct diff_job {
	int absval;
	const float *a, *b, *dy;
	float *y, sign, beta;
	size_t n;
} diff_job;

static void diff_fwd_block(void *ctx, int bl)
{
	const diff_job *j = ctx;
	size_t lo, hi;
	cpu_block_range(j->n, bl, &lo, &hi);
	if (j->absval)
		for (size_t i = lo; i < hi; i++)
			j->y[i] = fabsf(j->a[i] - j->b[i]);
	else
		for (size_t i = lo; i < hi; i++)
			j->y[i] = j->a[i] - j->b[i];
}

void cpu_diff_fwd(cdp_backend *be, int absval, const float *a, const float *b, float *y,
                  size_t n)
{
	diff_job j = { absval, a, b, NULL, y, 0.0f, 0.0f, n };
	cpu_parallel_for(be, cpu_nblocks(n), diff_fwd_block, &j);
}

/* y is dx here */
static void diff_bwd_block(void *ctx, int bl)
{
	const diff_job *j = ctx;
	size_t lo, hi;
	cpu_block_range(j->n, bl, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		float g = j->sign * cdp_diff_sgn(j->absval, j->a[i], j->b[i]) * j->dy[i];
		j->y[i] = j->beta != 0.0f ? j->y[i] + g : g;
	}
}

void cpu_diff_bwd(cdp_backend *be, int absval, const float *a, const float *b, const float *dy,
                  float sign, float *dx, float beta, size_t n)
{
	diff_job j = { absval, a, b, dy, dx, sign, beta, n };
	cpu_parallel_for(be, cpu_nblocks(n), diff_bwd_block, &j);
}
