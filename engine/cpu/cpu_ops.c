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
#include <stdlib.h>
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
 * row-major window order wins ties, and NaN propagates, as in PyTorch: a
 * candidate replaces the best so far when it is greater or NaN, unless the
 * best already is NaN (the first NaN wins). One output, the oracle of the
 * vectorized paths below; *bi is h*W+w within the plane. */
static float max_window(const cdp_pool_desc *d, const float *x, int oh, int ow, int32_t *bi)
{
	int h0 = oh * d->stride - d->pad, h1 = h0 + d->k;
	int w0 = ow * d->stride - d->pad, w1 = w0 + d->k;
	if (h0 < 0) h0 = 0;
	if (h1 > d->h) h1 = d->h;
	if (w0 < 0) w0 = 0;
	if (w1 > d->w) w1 = d->w;
	float best = -INFINITY;
	*bi = h0 * d->w + w0;
	for (int h = h0; h < h1; h++)
		for (int w = w0; w < w1; w++) {
			float v = x[h * d->w + w];
			if (best == best && (v > best || v != v)) {
				best = v;
				*bi = h * d->w + w;
			}
		}
	return best;
}

static void maxpool_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;
	int32_t *ix = j->idx + (size_t)t * d->oh * d->ow;

	for (int oh = 0; oh < d->oh; oh++)
		for (int ow = 0; ow < d->ow; ow++)
			y[oh * d->ow + ow] = max_window(d, x, oh, ow, &ix[oh * d->ow + ow]);
}

/* Stride 2 (U-Net's 2x2 and ResNet's 3x3 pad 1), 8 outputs at a time,
 * then 4: window column j of outputs ow..ow+V-1 is input columns c, c+2,
 * ..., c+2(V-1) (c = 2 ow - pad + j), the even lanes of the 2V floats from
 * c. The window's cells are taken in row-major order, as in max_window,
 * so ties and NaNs come out the same; outputs whose window leaves the
 * image sideways (or whose 2V floats would) take max_window. GCC's
 * vectors of 8 become AVX in those clones of maxpool_s2_plane (2 SSE
 * registers in the baseline one): the U-Net's max pools' forward 23%
 * faster, the classifier's 13%, on the AMD EPYC; vectors of 16 spilled
 * and took twice as long. */
typedef float v4f __attribute__((vector_size(16), aligned(4)));
typedef int32_t v4i __attribute__((vector_size(16), aligned(4)));
typedef float v8f __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4)));

/* The even lanes of a:b (2V floats). GCC's __builtin_shuffle takes a mask
 * vector, clang only __builtin_shufflevector's constant indices. */
#ifdef __clang__
#define EVEN4(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define EVEN8(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define ODD4(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7)
#define ODD8(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#else
#define EVEN4(a, b) __builtin_shuffle(a, b, (v4i){ 0, 2, 4, 6 })
#define EVEN8(a, b) __builtin_shuffle(a, b, (v8i){ 0, 2, 4, 6, 8, 10, 12, 14 })
#define ODD4(a, b) __builtin_shuffle(a, b, (v4i){ 1, 3, 5, 7 })
#define ODD8(a, b) __builtin_shuffle(a, b, (v8i){ 1, 3, 5, 7, 9, 11, 13, 15 })
#endif

/* best, bi = v, vi where v is greater or NaN, unless best is NaN */
#define PICK(VI, best, bi, v, vi) do { \
		VI take_ = ((best) == (best)) & (((v) > (best)) | ((v) != (v))); \
		(best) = (__typeof__(best))(((VI)(v) & take_) | ((VI)(best) & ~take_)); \
		(bi) = ((vi) & take_) | ((bi) & ~take_); \
	} while (0)

/* p0, p1 = the 2V floats of row h from column c on */
#define ROW_PAIR(h, c, V) do { \
		memcpy(&p0, x + (size_t)(h) * d->w + (c), sizeof p0); \
		memcpy(&p1, x + (size_t)(h) * d->w + (c) + (V), sizeof p1); \
	} while (0)

/* outputs ow.. of row oh, V at a time while the 2V floats stay in the row */
#define S2_GROUPS(VF, VI, V, EVEN, evens) \
	for (; ow + (V) <= d->ow && 2 * ow <= d->w - k - 2 * (V) + 1 + d->pad; ow += (V)) { \
		int c0 = 2 * ow - d->pad; \
		VF best, p0, p1; \
		VI bi; \
		ROW_PAIR(h0, c0, V); \
		best = EVEN(p0, p1); \
		bi = h0 * d->w + c0 + (evens); \
		for (int h = h0; h < h1; h++) \
			for (int c = h == h0 ? c0 + 1 : c0; c < c0 + k; c++) { \
				ROW_PAIR(h, c, V); \
				PICK(VI, best, bi, EVEN(p0, p1), h * d->w + c + (evens)); \
			} \
		memcpy(yr + ow, &best, sizeof best); \
		memcpy(ir + ow, &bi, sizeof bi); \
	}

/* 2x2 windows without padding: the 2V floats from 2 ow are both window
 * columns (even lanes column 0, odd lanes column 1), so nothing past the
 * window is read and a row of even width is vectors to its end. S2_GROUPS
 * reads V floats from column 1 on, one past the window, and so left the
 * last group of every row to max_window: 4 of 32 outputs at 64x64, half
 * of them at 16x16, which made the classifier's max pools (64, 32, 16
 * wide) 32% of a bf16 step on a Sapphire Rapids VM (perf). */
#define S2K2_GROUPS(VF, VI, V, EVEN, ODD, evens) \
	for (; ow + (V) <= d->ow && 2 * (ow + (V)) <= d->w; ow += (V)) { \
		int c0 = 2 * ow; \
		VF best, p0, p1; \
		VI bi; \
		ROW_PAIR(h0, c0, V); \
		best = EVEN(p0, p1); \
		bi = h0 * d->w + c0 + (evens); \
		PICK(VI, best, bi, ODD(p0, p1), h0 * d->w + c0 + 1 + (evens)); \
		for (int h = h0 + 1; h < h1; h++) { \
			ROW_PAIR(h, c0, V); \
			PICK(VI, best, bi, EVEN(p0, p1), h * d->w + c0 + (evens)); \
			PICK(VI, best, bi, ODD(p0, p1), h * d->w + c0 + 1 + (evens)); \
		} \
		memcpy(yr + ow, &best, sizeof best); \
		memcpy(ir + ow, &bi, sizeof bi); \
	}

/* k is a constant in the callers below, so the window loops unroll */
static inline __attribute__((always_inline)) void maxpool_s2(const pool_job *j, int t, int k)
{
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;
	int32_t *ix = j->idx + (size_t)t * d->oh * d->ow;
	const v4i even4 = { 0, 2, 4, 6 };
	const v8i even8 = { 0, 2, 4, 6, 8, 10, 12, 14 };
	int vlo = (d->pad + 1) / 2;

	for (int oh = 0; oh < d->oh; oh++) {
		int h0 = 2 * oh - d->pad, h1 = h0 + k;
		float *yr = y + (size_t)oh * d->ow;
		int32_t *ir = ix + (size_t)oh * d->ow;
		int ow = 0;
		if (h0 < 0) h0 = 0;
		if (h1 > d->h) h1 = d->h;
		for (; ow < d->ow && ow < vlo; ow++)
			yr[ow] = max_window(d, x, oh, ow, &ir[ow]);
		if (k == 2 && d->pad == 0) {
			S2K2_GROUPS(v8f, v8i, 8, EVEN8, ODD8, even8)
			S2K2_GROUPS(v4f, v4i, 4, EVEN4, ODD4, even4)
		}
		S2_GROUPS(v8f, v8i, 8, EVEN8, even8)
		S2_GROUPS(v4f, v4i, 4, EVEN4, even4)
		for (; ow < d->ow; ow++)
			yr[ow] = max_window(d, x, oh, ow, &ir[ow]);
	}
}

CPU_CLONES
static void maxpool_s2_plane(void *ctx, int t)
{
	const pool_job *j = ctx;

	switch (j->d->k) {
	case 2: maxpool_s2(j, t, 2); break;
	case 3: maxpool_s2(j, t, 3); break;
	default: maxpool_s2(j, t, j->d->k);
	}
}

/* An inference net's max pools keep no argmax (idx NULL): 2x2 windows of
 * stride 2 without padding (U-Net's) as S2K2_GROUPS without the index, 8
 * outputs at a time (PICK's rule on the values: the same outputs), the
 * rest of a row and other windows by max_window (cpu_maxpool_fwd gives
 * those a scratch index, and comes here for them only out of memory). */
#define PICKV(VI, best, v) do { \
		VI take_ = ((best) == (best)) & (((v) > (best)) | ((v) != (v))); \
		(best) = (__typeof__(best))(((VI)(v) & take_) | ((VI)(best) & ~take_)); \
	} while (0)

CPU_CLONES static void maxpool_values(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;
	float *y = j->y + (size_t)t * d->oh * d->ow;
	int k2 = d->k == 2 && d->stride == 2 && d->pad == 0;
	int32_t bi;

	for (int oh = 0; oh < d->oh; oh++) {
		int h0 = 2 * oh;
		float *yr = y + (size_t)oh * d->ow;
		int ow = 0;
		for (; k2 && ow + 8 <= d->ow && 2 * (ow + 8) <= d->w; ow += 8) {
			v8f best, p0, p1;
			int c0 = 2 * ow;
			ROW_PAIR(h0, c0, 8);
			best = EVEN8(p0, p1);
			PICKV(v8i, best, ODD8(p0, p1));
			ROW_PAIR(h0 + 1, c0, 8);
			PICKV(v8i, best, EVEN8(p0, p1));
			PICKV(v8i, best, ODD8(p0, p1));
			memcpy(yr + ow, &best, sizeof best);
		}
		for (; ow < d->ow; ow++)
			yr[ow] = max_window(d, x, oh, ow, &bi);
	}
}

#ifdef __clang__
#define ZIP8_LO(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define ZIP8_HI(a, b) __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#else
#define ZIP8_LO(a, b) __builtin_shuffle(a, b, (v8i){ 0, 8, 1, 9, 2, 10, 3, 11 })
#define ZIP8_HI(a, b) __builtin_shuffle(a, b, (v8i){ 4, 12, 5, 13, 6, 14, 7, 15 })
#endif

/* dx's 16 floats from column c0 of row h: dy (8 outputs) where the
 * argmax ix is that pixel, else 0.0f + 0.0f (the sum the scatter below
 * makes into a zeroed dx, so -0.0f gives +0.0f as there) */
#define ROW_OF_DY(h, c0) do { 		v8i at_ = (h) * d->w + (c0) + even8; 		v8f l_ = (v8f)((v8i)g & (ix8 == at_)) + 0.0f; 		v8f r_ = (v8f)((v8i)g & (ix8 == at_ + 1)) + 0.0f; 		v8f lo_ = ZIP8_LO(l_, r_), hi_ = ZIP8_HI(l_, r_); 		memcpy(dx + (size_t)(h) * d->w + (c0), &lo_, sizeof lo_); 		memcpy(dx + (size_t)(h) * d->w + (c0) + 8, &hi_, sizeof hi_); 	} while (0)

/* 2x2 windows of stride 2 without padding that tile the plane (the
 * classifier's and U-Net's pools), into a dx not added to: every dx value
 * belongs to one window, so it is written once, from 8 outputs at a time,
 * in place of a memset and a scatter over the plane (1.2% and 0.9% of a
 * bf16 classifier step on a Zen 4, perf). Returns 0 for other pools. */
CPU_CLONES static int maxpool_bwd_tiled(const pool_job *j, float *dx, const float *dy,
                                        const int32_t *ix)
{
	const cdp_pool_desc *d = j->d;
	const v8i even8 = { 0, 2, 4, 6, 8, 10, 12, 14 };

	if (!(d->k == 2 && d->stride == 2 && d->pad == 0 && d->h == 2 * d->oh &&
	      d->w == 2 * d->ow && j->beta == 0.0f))
		return 0;
	for (int oh = 0; oh < d->oh; oh++) {
		const float *dyr = dy + (size_t)oh * d->ow;
		const int32_t *ir = ix + (size_t)oh * d->ow;
		int ow = 0;
		for (; ow + 8 <= d->ow; ow += 8) {
			v8f g;
			v8i ix8;
			memcpy(&g, dyr + ow, sizeof g);
			memcpy(&ix8, ir + ow, sizeof ix8);
			ROW_OF_DY(2 * oh, 2 * ow);
			ROW_OF_DY(2 * oh + 1, 2 * ow);
		}
		for (; ow < d->ow; ow++)
			for (int h = 2 * oh; h < 2 * oh + 2; h++)
				for (int w = 2 * ow; w < 2 * ow + 2; w++)
					dx[(size_t)h * d->w + w] = (ir[ow] == h * d->w + w ? dyr[ow] : 0.0f)
					                           + 0.0f;
	}
	return 1;
}

static void maxpool_bwd_plane(void *ctx, int t)
{
	const pool_job *j = ctx;
	const cdp_pool_desc *d = j->d;
	size_t plane = (size_t)d->h * d->w, op = (size_t)d->oh * d->ow;
	float *dx = j->dx + (size_t)t * plane;
	const float *dy = j->dy + (size_t)t * op;
	const int32_t *ix = j->cidx + (size_t)t * op;

	if (maxpool_bwd_tiled(j, dx, dy, ix))
		return;
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
	int32_t *scratch = NULL;

	/* no argmax wanted: the vector paths other than 2x2's keep one anyway */
	if (!idx && !(d->k == 2 && d->stride == 2 && d->pad == 0))
		j.idx = scratch = malloc((size_t)d->n * d->c * d->oh * d->ow * sizeof *scratch);
	if (!j.idx)
		cpu_parallel_for(be, d->n * d->c, maxpool_values, &j);
	else
		cpu_parallel_for(be, d->n * d->c, d->stride == 2 ? maxpool_s2_plane : maxpool_plane,
		                 &j);
	free(scratch);
}

/* x and y are not needed: idx says where each maximum came from. */
int cpu_maxpool_bwd_needs_xy(cdp_backend *be)
{
	(void)be;
	return 0;
}

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
