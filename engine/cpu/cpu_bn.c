/* cpu_bn.c: the CPU backend's batch normalisation with its activation
 * fused in: y = act(bn(x)) over x (N,C,HW), statistics per channel over N
 * and HW (backend.h defines the ops; act 0 is the identity).
 *
 * Batchnorm is memory-bound: a channel of an 8x256x256 batch is 2 MiB,
 * more than a core's L2 holds next to its other inputs, so each pass over
 * it goes to memory. The passes per channel:
 *   forward:  1. the shifted sums of x (mean and variance at once),
 *             2. y = act(p), p = (x - mean) * gamma * invstd + beta;
 *   backward: 1. the sums of g and g * xh, where g = dy masked by the
 *                activation's derivative and xh = (x - mean) * invstd,
 *             2. dx = gamma * invstd * (g - mean(g) - xh * mean(g * xh)).
 * The backward's mask is computed again from x (p > 0, by the forward's
 * own expression, pre1) instead of read from y, so its passes read only x
 * and dy. Counting each array read or written once per pass, separate bn
 * and activation ops (with a second pass about the mean for the variance)
 * moved 6 arrays forward and 8 backward; here it is 3 and 5. Pass 2 walks
 * the samples in the reverse order of pass 1, so it starts on what pass 1
 * left in the caches.
 *
 * Sums: each sample plane is summed in 16 float lanes over blocks of
 * BLOCK values, each block's lanes then added in order into a double (a
 * plane of 65536 values is 64 blocks; a lane sums 64 values). The
 * variance uses sums about a shift k = the channel's first value: var =
 * E[(x-k)^2] - E[x-k]^2 loses only ~(mean-k)^2/var of the double's
 * precision, nothing like the float cancellation of E[x^2] - E[x]^2 for
 * data far from zero. Every sum runs in a fixed order that depends on
 * the shape only: results do not depend on the thread count.
 *
 * One job per channel (it owns that channel's outputs and statistics).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"

/* as in cpu_ops.c: vectorize the streams, if-convert the selects; and no
 * contraction of x*a + b into an FMA, so that the AVX clones below give
 * the baseline's bits (backward recomputes bn(x) for the activation's
 * mask: it must match forward's) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                      "fp-contract=off")
#endif

/* The sums run on NV vectors of 4 floats (SSE2, which every x86-64 has:
 * GCC would split wider vectors, and their comparisons into scalars), 16
 * lanes in all. */
#define NV 4
#define VL (4 * NV)
#define BLOCK 1024
#define XH_CHUNK (2 * BLOCK)   /* bn_bwd's widened run of a bf16 x */
typedef float v4f __attribute__((vector_size(16), aligned(4)));
typedef int32_t v4i __attribute__((vector_size(16), aligned(4)));

/* the lanes of acc[0..NV) added in order */
static double lanes(const v4f *acc)
{
	double s = 0.0;
	for (int v = 0; v < NV; v++)
		for (int l = 0; l < 4; l++)
			s += acc[v][l];
	return s;
}

/* the 16 lanes of one vector: lane 4v + l is lanes()'s acc[v][l] */
typedef float v16f __attribute__((vector_size(64), aligned(4)));

static double lanes16(const v16f *acc)
{
	double s = 0.0;
	for (int l = 0; l < VL; l++)
		s += (*acc)[l];
	return s;
}

/* s1 += sum of (x - k), s2 += sum of (x - k)^2 over x[0..n). The 16
 * lanes as one vector (split in halves or quarters below AVX-512: no
 * comparisons here for GCC to scalarize), so that they stay in registers:
 * as an array of 4 v4f GCC kept them in memory, a store and a load per
 * step (6% of a bf16 classifier step on AMX); the same sums either way */
CPU_CLONES static void shifted_sums(const float *x, size_t n, float k, double *s1, double *s2)
{
	size_t i = 0;

	while (i + VL <= n) {
		size_t end = i + BLOCK < n ? i + BLOCK : n;
		v16f a = { 0 }, b = { 0 };
		for (; i + VL <= end; i += VL) {
			v16f t;
			memcpy(&t, x + i, sizeof t);
			t -= k;
			a += t;
			b += t * t;
		}
		*s1 += lanes16(&a);
		*s2 += lanes16(&b);
	}
	for (; i < n; i++) {
		double v = (double)x[i] - k;
		*s1 += v;
		*s2 += v * v;
	}
}

/* bn(x) before the activation: the one expression the forward and the
 * backward both use, so that the backward's mask is the forward's. */
static inline __attribute__((always_inline)) float pre1(float x, float m, float a, float b)
{
	return (x - m) * a + b;
}

static inline __attribute__((always_inline)) v4f pre4(v4f x, float m, float a, float b)
{
	return (x - m) * a + b;
}

/* The gradient before the activation, from bn(x) = p and the gradient g
 * after it: act_bwd's rule on y = act(p), with y <= 0 exactly when p <= 0
 * (slope >= 0): relu passes g unless p <= 0 (so NaN passes), leaky passes
 * it where p > 0 and scales it by slope elsewhere. */
static inline __attribute__((always_inline)) float grad1(const int act, float slope, float p,
                                                        float g)
{
	if (act == CDP_ACT_RELU)
		return p <= 0.0f ? 0.0f : g;
	if (act == CDP_ACT_LEAKY)
		return p > 0.0f ? g : g * slope;
	return g;
}

/* grad1 on 4 lanes */
static inline __attribute__((always_inline)) v4f grad4(const int act, float slope, v4f p, v4f g)
{
	if (act == CDP_ACT_RELU)
		return (v4f)((v4i)g & ~(v4i)(p <= 0.0f));
	if (act == CDP_ACT_LEAKY) {
		v4i pos = (v4i)(p > 0.0f);
		return (v4f)(((v4i)g & pos) | ((v4i)(g * slope) & ~pos));
	}
	return g;
}

/* sg += sum of g, sgx += sum of g * (x - m) * is over a plane of n, the
 * activation's mask from bn(x) = (x - m) * a + b */
static inline __attribute__((always_inline)) void
grad_sums(const int act, float slope, const float *x, const float *dy, size_t n, float m,
          float is, float a, float b, double *sg, double *sgx)
{
	size_t i = 0;

	while (i + VL <= n) {
		size_t end = i + BLOCK < n ? i + BLOCK : n;
		v4f s1[NV] = { { 0 } }, s2[NV] = { { 0 } };
		for (; i + VL <= end; i += VL)
			for (int v = 0; v < NV; v++) {
				v4f xv, gv;
				memcpy(&xv, x + i + 4 * v, sizeof xv);
				memcpy(&gv, dy + i + 4 * v, sizeof gv);
				if (act)
					gv = grad4(act, slope, pre4(xv, m, a, b), gv);
				s1[v] += gv;
				s2[v] += gv * ((xv - m) * is);
			}
		*sg += lanes(s1);
		*sgx += lanes(s2);
	}
	for (; i < n; i++) {
		float g = grad1(act, slope, act ? pre1(x[i], m, a, b) : 0.0f, dy[i]);
		*sg += g;
		*sgx += (double)g * ((x[i] - m) * is);
	}
}

/* y = act((x - m) * a + b) over a plane of n (y may be x) */
static inline __attribute__((always_inline)) void
norm_plane(const int act, float slope, const float *x, float *y, size_t n, float m, float a,
           float b)
{
	for (size_t i = 0; i < n; i++) {
		float v = pre1(x[i], m, a, b), neg = v * slope;
		if (act == CDP_ACT_RELU)
			v = v < 0.0f ? 0.0f : v;        /* NaN passes, as in PyTorch */
		else if (act == CDP_ACT_LEAKY)
			v = v < 0.0f ? neg : v;
		y[i] = v;
	}
}

/* dx (+)= a * (g - mg - (x - m) * is * mgx) over a plane of n */
static inline __attribute__((always_inline)) void
dx_plane(const int act, float slope, const float *x, const float *dy, float *dx, size_t n,
         float m, float is, float a, float b, float mg, float mgx, int add)
{
	if (add)
		for (size_t i = 0; i < n; i++)
			dx[i] += a * (grad1(act, slope, act ? pre1(x[i], m, a, b) : 0.0f, dy[i]) - mg -
			              (x[i] - m) * is * mgx);
	else
		for (size_t i = 0; i < n; i++)
			dx[i] = a * (grad1(act, slope, act ? pre1(x[i], m, a, b) : 0.0f, dy[i]) - mg -
			             (x[i] - m) * is * mgx);
}

/* ---- the backward's passes on AVX-512 (cpu_kgemm_wide): the 16 lanes
 * of grad_sums as one vector, where GCC keeps the sums in registers (as
 * 4 v4f it kept them in memory, a store and a load per step: 7% of a bf16
 * classifier step), and a bf16 x widened in the register as it is read
 * instead of into a buffer first (3.5%). The same operations on the same
 * lanes in the same order as grad_sums and dx_plane: the same bits. ---- */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BN512 1
#define BN512_TARGET __attribute__((target("avx512f,avx512bw")))
typedef int32_t v16i __attribute__((vector_size(64), aligned(4)));
typedef uint16_t v16h __attribute__((vector_size(32), aligned(2)));

/* x[i, i + 16) as floats: from x, else the bf16 xh widened (exact) */
static inline __attribute__((always_inline)) BN512_TARGET v16f load16(const float *x,
                                                                       const uint16_t *xh,
                                                                       size_t i)
{
	v16f v;

	if (xh) {
		v16h h;
		memcpy(&h, xh + i, sizeof h);
		v16i w = __builtin_convertvector(h, v16i) << 16;
		memcpy(&v, &w, sizeof v);
	} else {
		memcpy(&v, x + i, sizeof v);
	}
	return v;
}

static inline __attribute__((always_inline)) float load1(const float *x, const uint16_t *xh,
                                                        size_t i)
{
	uint32_t u;
	float v;

	if (!xh)
		return x[i];
	u = (uint32_t)xh[i] << 16;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* grad4 on 16 lanes */
static inline __attribute__((always_inline)) BN512_TARGET v16f grad16(const int act, float slope,
                                                                       v16f p, v16f g)
{
	if (act == CDP_ACT_RELU)
		return (v16f)((v16i)g & ~(v16i)(p <= 0.0f));
	if (act == CDP_ACT_LEAKY) {
		v16i pos = (v16i)(p > 0.0f);
		return (v16f)(((v16i)g & pos) | ((v16i)(g * slope) & ~pos));
	}
	return g;
}

/* Where the backward's dy comes from: a plane of it (dy), or (dyp) the
 * gradient of a max pool fused after the batchnorm (bn_bwd_pool: 2x2
 * windows of stride 2 tiling a plane w wide, w a multiple of 16, ow = w /
 * 2), with its argmax ix, expanded as maxpool_bwd's tiled path writes dy */
typedef struct dy_src {
	const float *dy, *dyp;
	const int32_t *ix;
	int w, ow;
} dy_src;

typedef float v8f_bn __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i_bn __attribute__((vector_size(32), aligned(4)));

/* dy[i, i + 16), i = h w + c0 (the row and column kept by the caller) */
static inline __attribute__((always_inline)) BN512_TARGET v16f
dy16(const int pooled, const dy_src *s, size_t i, int h, int c0)
{
	v16f g;

	if (!pooled) {
		memcpy(&g, s->dy + i, sizeof g);
		return g;
	}
	size_t q = (size_t)(h >> 1) * s->ow + (c0 >> 1);
	const v8i_bn even = { 0, 2, 4, 6, 8, 10, 12, 14 };
	v8i_bn ix, at = h * s->w + c0 + even;
	v8f_bn gp, l, r;
	memcpy(&gp, s->dyp + q, sizeof gp);
	memcpy(&ix, s->ix + q, sizeof ix);
	l = (v8f_bn)((v8i_bn)gp & (ix == at)) + 0.0f;
	r = (v8f_bn)((v8i_bn)gp & (ix == at + 1)) + 0.0f;
	return __builtin_shufflevector(l, r, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* the row and column of the next 16 values (pooled: whole rows of 16s) */
#define DY_STEP(pooled, s, h, c0) do { \
	if (pooled && ((c0) += 16) == (s)->w) { \
		(c0) = 0; \
		(h)++; \
	} \
} while (0)

static inline __attribute__((always_inline)) BN512_TARGET void
grad_sums16_act(const int act, const int pooled, float slope, const float *x, const uint16_t *xh,
                const dy_src *ds, size_t n, float m, float is, float a, float b, double *sg,
                double *sgx)
{
	size_t i = 0;
	int h = 0, c0 = 0;

	while (i + VL <= n) {
		size_t end = i + BLOCK < n ? i + BLOCK : n;
		v16f s1 = { 0 }, s2 = { 0 };
		for (; i + VL <= end; i += VL) {
			v16f xv = load16(x, xh, i), gv = dy16(pooled, ds, i, h, c0);
			DY_STEP(pooled, ds, h, c0);
			if (act)
				gv = grad16(act, slope, (xv - m) * a + b, gv);
			s1 += gv;
			s2 += gv * ((xv - m) * is);
		}
		*sg += lanes16(&s1);
		*sgx += lanes16(&s2);
	}
	for (; !pooled && i < n; i++) {     /* pooled planes are whole vectors */
		float xi = load1(x, xh, i);
		float g = grad1(act, slope, act ? pre1(xi, m, a, b) : 0.0f, ds->dy[i]);
		*sg += g;
		*sgx += (double)g * ((xi - m) * is);
	}
}

static inline __attribute__((always_inline)) BN512_TARGET void
dx_plane16_act(const int act, const int pooled, float slope, const float *x, const uint16_t *xh,
               const dy_src *ds, float *dx, size_t n, float m, float is, float a, float b,
               float mg, float mgx, int add)
{
	size_t i = 0;
	int h = 0, c0 = 0;

	for (; i + 16 <= n; i += 16) {
		v16f xv = load16(x, xh, i), gv = dy16(pooled, ds, i, h, c0), d;
		DY_STEP(pooled, ds, h, c0);
		if (act)
			gv = grad16(act, slope, (xv - m) * a + b, gv);
		d = a * (gv - mg - (xv - m) * is * mgx);
		if (add) {
			v16f o;
			memcpy(&o, dx + i, sizeof o);
			d = o + d;
		}
		memcpy(dx + i, &d, sizeof d);
	}
	for (; !pooled && i < n; i++) {
		float xi = load1(x, xh, i);
		float d = a * (grad1(act, slope, act ? pre1(xi, m, a, b) : 0.0f, ds->dy[i]) - mg -
		               (xi - m) * is * mgx);
		dx[i] = add ? dx[i] + d : d;
	}
}

/* x or xh (one of them NULL) over a plane of n, the activation a variable,
 * dy a plane or a pooled one */
#define BN_ACTS(fn, pooled, ...) do { \
	switch (act) { \
	case CDP_ACT_RELU: fn(CDP_ACT_RELU, pooled, 0.0f, __VA_ARGS__); break; \
	case CDP_ACT_LEAKY: fn(CDP_ACT_LEAKY, pooled, slope, __VA_ARGS__); break; \
	default: fn(0, pooled, 0.0f, __VA_ARGS__); \
	} \
} while (0)

__attribute__((noinline)) BN512_TARGET static void
grad_sums16(int act, float slope, const float *x, const uint16_t *xh, const dy_src *ds, size_t n,
            float m, float is, float a, float b, double *sg, double *sgx)
{
	if (ds->dyp)
		BN_ACTS(grad_sums16_act, 1, x, xh, ds, n, m, is, a, b, sg, sgx);
	else
		BN_ACTS(grad_sums16_act, 0, x, xh, ds, n, m, is, a, b, sg, sgx);
}

__attribute__((noinline)) BN512_TARGET static void
dx_plane16(int act, float slope, const float *x, const uint16_t *xh, const dy_src *ds, float *dx,
           size_t n, float m, float is, float a, float b, float mg, float mgx, int add)
{
	if (ds->dyp)
		BN_ACTS(dx_plane16_act, 1, x, xh, ds, dx, n, m, is, a, b, mg, mgx, add);
	else
		BN_ACTS(dx_plane16_act, 0, x, xh, ds, dx, n, m, is, a, b, mg, mgx, add);
}

/* ---- the forward's passes on AVX-512 (cpu_kgemm_wide), as the
 * backward's: x read as it lies, a bf16 one widened in the register, and
 * the copies rounded in the register as they are stored, where the
 * generic passes widened and rounded chunks through L1 buffers (the
 * batchnorm forward moved 15 GB/s where its backward moved 28). The same
 * operations on the same lanes in the same order as shifted_sums,
 * norm_plane and cpu_bf16_bits: the same bits. ---- */
typedef uint32_t v16u __attribute__((vector_size(64), aligned(4)));

/* v's 16 values rounded to bf16 (cpu_bf16_bits) into h[0..16) */
static inline __attribute__((always_inline)) BN512_TARGET void store_h16(uint16_t *h, v16f v)
{
	v16u u = (v16u)v, nan = (v16u)((u & 0x7fffffffu) > 0x7f800000u);
	v16u r = u + 0x7fffu + ((u >> 16) & 1u);
	v16h hv = __builtin_convertvector(((r & ~nan) | ((u | 0x400000u) & nan)) >> 16, v16h);

	memcpy(h, &hv, sizeof hv);
}

/* norm_plane's value of 16 x (pre1, then the activation: a NaN passes) */
static inline __attribute__((always_inline)) BN512_TARGET v16f
norm_vec(const int act, float slope, v16f xv, float m, float a, float b)
{
	v16f v = (xv - m) * a + b;

	if (act == CDP_ACT_RELU)
		v = (v16f)((v16i)v & ~(v16i)(v < 0.0f));
	else if (act == CDP_ACT_LEAKY)
		v = (v16f)(((v16i)v & ~(v16i)(v < 0.0f)) | ((v16i)(v * slope) & (v16i)(v < 0.0f)));
	return v;
}

/* shifted_sums of x or xh (one of them NULL) */
__attribute__((noinline)) BN512_TARGET static void
shifted_sums16(const float *x, const uint16_t *xh, size_t n, float k, double *s1, double *s2)
{
	size_t i = 0;

	while (i + VL <= n) {
		size_t end = i + BLOCK < n ? i + BLOCK : n;
		v16f a = { 0 }, b = { 0 };
		for (; i + VL <= end; i += VL) {
			v16f t = load16(x, xh, i);
			t -= k;
			a += t;
			b += t * t;
		}
		*s1 += lanes16(&a);
		*s2 += lanes16(&b);
	}
	for (; i < n; i++) {
		double v = (double)load1(x, xh, i) - k;
		*s1 += v;
		*s2 += v * v;
	}
}

/* norm_plane of x or xh into y and/or its copy yh, and x's copy into
 * xo, each where not NULL */
static inline __attribute__((always_inline)) BN512_TARGET void
norm16_act(const int act, float slope, const float *x, const uint16_t *xh, float *y,
           uint16_t *yh, uint16_t *xo, size_t n, float m, float a, float b)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		v16f xv = load16(x, xh, i), v = norm_vec(act, slope, xv, m, a, b);
		if (y)
			memcpy(y + i, &v, sizeof v);
		if (yh)
			store_h16(yh + i, v);
		if (xo)
			store_h16(xo + i, xv);
	}
	for (; i < n; i++) {
		float xi = load1(x, xh, i), v = pre1(xi, m, a, b), neg = v * slope;
		if (act == CDP_ACT_RELU)
			v = v < 0.0f ? 0.0f : v;
		else if (act == CDP_ACT_LEAKY)
			v = v < 0.0f ? neg : v;
		if (y)
			y[i] = v;
		if (yh)
			yh[i] = cpu_bf16_bits(v);
		if (xo)
			xo[i] = cpu_bf16_bits(xi);
	}
}

__attribute__((noinline)) BN512_TARGET static void
norm16(int act, float slope, const float *x, const uint16_t *xh, float *y, uint16_t *yh,
       uint16_t *xo, size_t n, float m, float a, float b)
{
	switch (act) {
	case CDP_ACT_RELU: norm16_act(CDP_ACT_RELU, 0.0f, x, xh, y, yh, xo, n, m, a, b); break;
	case CDP_ACT_LEAKY: norm16_act(CDP_ACT_LEAKY, slope, x, xh, y, yh, xo, n, m, a, b); break;
	default: norm16_act(0, 0.0f, x, xh, y, yh, xo, n, m, a, b);
	}
}

/* norm16 of a plane h x w (w a multiple of 16) whose output goes only to
 * the max pool fused after it (bn_fwd_train_pool): each pair of rows
 * pooled as it is computed, 8 windows a vector, into py and pix
 * (maxpool_s2's S2K2_GROUPS: the window's cells in row-major order,
 * PICK's rule for ties and NaN: the same outputs and argmax), x's copy
 * into xo where not NULL; the output itself never stored */
#define BN_PICK(best, bi, v, vi) do { \
	v8i_bn take_ = ((best) == (best)) & (((v) > (best)) | ((v) != (v))); \
	(best) = (v8f_bn)(((v8i_bn)(v) & take_) | ((v8i_bn)(best) & ~take_)); \
	(bi) = ((vi) & take_) | ((bi) & ~take_); \
} while (0)

static inline __attribute__((always_inline)) BN512_TARGET void
norm_pool16_act(const int act, float slope, const float *x, const uint16_t *xh, uint16_t *xo,
                int h, int w, float m, float a, float b, float *py, int32_t *pix)
{
	const v8i_bn even = { 0, 2, 4, 6, 8, 10, 12, 14 };
	int ow = w / 2;

	for (int r = 0; r + 1 < h; r += 2)
		for (int c0 = 0; c0 < w; c0 += 16) {
			size_t i0 = (size_t)r * w + c0, i1 = i0 + (size_t)w;
			v16f x0 = load16(x, xh, i0), x1 = load16(x, xh, i1);
			v16f v0 = norm_vec(act, slope, x0, m, a, b), v1 = norm_vec(act, slope, x1, m, a, b);
			v8i_bn at = r * w + c0 + even, bi = at;
			v8f_bn best = __builtin_shufflevector(v0, v0, 0, 2, 4, 6, 8, 10, 12, 14);
			size_t q = (size_t)(r / 2) * ow + c0 / 2;
			if (xo) {
				store_h16(xo + i0, x0);
				store_h16(xo + i1, x1);
			}
			BN_PICK(best, bi, __builtin_shufflevector(v0, v0, 1, 3, 5, 7, 9, 11, 13, 15), at + 1);
			BN_PICK(best, bi, __builtin_shufflevector(v1, v1, 0, 2, 4, 6, 8, 10, 12, 14), at + w);
			BN_PICK(best, bi, __builtin_shufflevector(v1, v1, 1, 3, 5, 7, 9, 11, 13, 15),
			        at + w + 1);
			memcpy(py + q, &best, sizeof best);
			memcpy(pix + q, &bi, sizeof bi);
		}
}

__attribute__((noinline)) BN512_TARGET static void
norm_pool16(int act, float slope, const float *x, const uint16_t *xh, uint16_t *xo, int h, int w,
            float m, float a, float b, float *py, int32_t *pix)
{
	switch (act) {
	case CDP_ACT_RELU: norm_pool16_act(CDP_ACT_RELU, 0.0f, x, xh, xo, h, w, m, a, b, py, pix); break;
	case CDP_ACT_LEAKY: norm_pool16_act(CDP_ACT_LEAKY, slope, x, xh, xo, h, w, m, a, b, py, pix); break;
	default: norm_pool16_act(0, 0.0f, x, xh, xo, h, w, m, a, b, py, pix);
	}
}
#else
#define BN512 0
#endif

typedef struct bn_job {
	int n, c, act;
	size_t hw;
	float slope, momentum, eps, dxbeta;
	const float *x, *dy, *gamma, *beta, *mean, *var, *invstd;
	/* bn_bwd, bn_fwd_train_h with x NULL: x as bf16 (the stash's copy,
	 * a convolution's output written so: conv_writes_yh), or NULL */
	const uint16_t *xh;
	uint16_t *xh_out, *yh_out;   /* bn_fwd_train_h: the copies, or NULL */
	float *y, *dx, *run_mean, *run_var, *save_mean, *save_invstd, *dgamma, *dbeta;
	double *sums;       /* the synchronized parts' (2C) */
	const cdp_bn_pool *pool;  /* the fused max pool (bn_*_pool), or NULL */
	int wide;           /* the AVX-512 passes (cpu_kgemm_wide) */
} bn_job;

static size_t plane(const bn_job *j, int n, int c)
{
	return ((size_t)n * j->c + c) * j->hw;
}

#if BN512
/* sample n's dy of channel c: the plane, or the fused pool's (j->pool) */
static dy_src plane_dy(const bn_job *j, int n, int c)
{
	dy_src s = { NULL, NULL, NULL, 0, 0 };

	if (!j->pool) {
		s.dy = j->dy + plane(j, n, c);
		return s;
	}
	size_t q = ((size_t)n * j->c + c) * j->pool->d.oh * j->pool->d.ow;
	s.dyp = j->pool->dy + q;
	s.ix = j->pool->idx + q;
	s.w = j->pool->d.w;
	s.ow = j->pool->d.ow;
	return s;
}
#endif

/* y = act(bn(x)) over n values, specialised per activation */
static inline __attribute__((always_inline)) void
norm_run(const bn_job *j, const float *x, float *y, size_t n, float m, float a, float b)
{
	switch (j->act) {
	case CDP_ACT_RELU: norm_plane(CDP_ACT_RELU, 0.0f, x, y, n, m, a, b); break;
	case CDP_ACT_LEAKY: norm_plane(CDP_ACT_LEAKY, j->slope, x, y, n, m, a, b); break;
	default: norm_plane(0, 0.0f, x, y, n, m, a, b);
	}
}

/* pass 2 of the forward for channel c; with the copies, XH_CHUNK values
 * at a time, so that x and y are rounded while in L1 (y NULL: each chunk
 * of y in tmp, for its copy alone); a bf16 x (j->xh) widened a chunk at a
 * time into wide */
CPU_CLONES static void norm_chan(const bn_job *j, int c, float m, float a, float b)
{
	size_t step = j->xh_out || j->yh_out || j->xh ? XH_CHUNK : j->hw;
	float tmp[XH_CHUNK], wide[XH_CHUNK];

#if BN512
	if (j->wide) {
		for (int n = j->n - 1; n >= 0; n--) {
			size_t o = plane(j, n, c);
			norm16(j->act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
			       j->y ? j->y + o : NULL, j->yh_out ? j->yh_out + o : NULL,
			       j->xh_out ? j->xh_out + o : NULL, j->hw, m, a, b);
		}
		return;
	}
#endif
	for (int n = j->n - 1; n >= 0; n--) {
		size_t o = plane(j, n, c);
		for (size_t i = 0; i < j->hw; i += step) {
			size_t len = j->hw - i < step ? j->hw - i : step;
			float *yo = j->y ? j->y + o + i : tmp;
			const float *xi = j->x ? j->x + o + i : wide;
			if (!j->x)
				cpu_bf16_widen_run(wide, j->xh + o + i, len);
			norm_run(j, xi, yo, len, m, a, b);
			if (j->xh_out)
				cpu_bf16_narrow_run(j->xh_out + o + i, j->x + o + i, len);
			if (j->yh_out)
				cpu_bf16_narrow_run(j->yh_out + o + i, yo, len);
		}
	}
}

/* pass 2 of the forward for channel c into the fused max pool (j->pool,
 * bn_pool_takes: the AVX-512 passes) */
static void pool_chan(const bn_job *j, int c, float m, float a, float b)
{
#if BN512
	const cdp_pool_desc *d = &j->pool->d;

	for (int n = j->n - 1; n >= 0; n--) {
		size_t o = plane(j, n, c), q = ((size_t)n * j->c + c) * d->oh * d->ow;
		norm_pool16(j->act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
		            j->xh_out ? j->xh_out + o : NULL, d->h, d->w, m, a, b, j->pool->y + q,
		            j->pool->idx + q);
	}
#else
	(void)j, (void)c, (void)m, (void)a, (void)b;
#endif
}

/* shifted_sums of a bf16 plane, widened XH_CHUNK values (whole BLOCKs)
 * at a time: the same sums in the same order as of the plane widened */
static void shifted_sums_h(const uint16_t *xh, size_t n, float k, double *s1, double *s2)
{
	float w[XH_CHUNK];

	for (size_t i = 0; i < n; i += XH_CHUNK) {
		size_t len = n - i < XH_CHUNK ? n - i : XH_CHUNK;
		cpu_bf16_widen_run(w, xh + i, len);
		shifted_sums(w, len, k, s1, s2);
	}
}

static void bn_train_chan(void *ctx, int c)
{
	const bn_job *j = ctx;
	size_t m = (size_t)j->n * j->hw;
	float k, fm, fi;
	double s1 = 0.0, s2 = 0.0, d, var;

	if (BN512 && j->wide) {
#if BN512
		k = load1(j->x, j->xh, plane(j, 0, c));
		for (int n = 0; n < j->n; n++)
			shifted_sums16(j->x ? j->x + plane(j, n, c) : NULL,
			               j->xh ? j->xh + plane(j, n, c) : NULL, j->hw, k, &s1, &s2);
#endif
	} else if (j->x) {
		k = j->x[plane(j, 0, c)];
		for (int n = 0; n < j->n; n++)
			shifted_sums(j->x + plane(j, n, c), j->hw, k, &s1, &s2);
	} else {
		cpu_bf16_widen_run(&k, j->xh + plane(j, 0, c), 1);
		for (int n = 0; n < j->n; n++)
			shifted_sums_h(j->xh + plane(j, n, c), j->hw, k, &s1, &s2);
	}
	d = s1 / (double)m;
	var = s2 / (double)m - d * d;
	if (var < 0.0)          /* rounding, for a constant channel */
		var = 0.0;
	fm = (float)(k + d);
	fi = (float)(1.0 / sqrt(var + j->eps));
	if (j->pool)
		pool_chan(j, c, fm, j->gamma[c] * fi, j->beta[c]);
	else
		norm_chan(j, c, fm, j->gamma[c] * fi, j->beta[c]);
	j->save_mean[c] = fm;
	j->save_invstd[c] = fi;
	if (j->run_mean) {
		double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
		j->run_mean[c] = (1.0f - j->momentum) * j->run_mean[c] + j->momentum * fm;
		j->run_var[c] = (1.0f - j->momentum) * j->run_var[c] + j->momentum * (float)unbiased;
	}
}

/* x NULL: the input is xh, read (bn_takes_xh), not written */
void cpu_bn_fwd_train_h(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                        const float *gamma, const float *beta, float *y, uint16_t *yh,
                        float *run_mean, float *run_var, float momentum, float eps,
                        float *save_mean, float *save_invstd, int act, float slope)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope, .x = x,
	             .gamma = gamma, .beta = beta, .y = y, .run_mean = run_mean,
	             .run_var = run_var, .momentum = momentum, .eps = eps,
	             .save_mean = save_mean, .save_invstd = save_invstd,
	             .xh = x ? NULL : xh, .xh_out = x ? xh : NULL, .yh_out = yh,
	             .wide = BN512 && cpu_kgemm_wide() };
	cpu_parallel_for(be, c, bn_train_chan, &j);
}

/* The fused max pool (backend.h): 2x2 windows of stride 2 tiling planes
 * whose rows are whole 16-float vectors, on the AVX-512 passes */
int cpu_bn_pool_takes(cdp_backend *be, const cdp_pool_desc *d)
{
	(void)be;
	return BN512 && cpu_kgemm_wide() && d->k == 2 && d->stride == 2 && d->pad == 0 &&
	       d->h == 2 * d->oh && d->w == 2 * d->ow && d->w % 16 == 0;
}

/* p is a pool of this batchnorm's output that the backend fuses: else
 * the caller's bug */
static void check_pool(cdp_backend *be, const cdp_bn_pool *p, int n, int c, int hw)
{
	if (!cpu_bn_pool_takes(be, &p->d) || (size_t)p->d.h * p->d.w != (size_t)hw ||
	    p->d.n != n || p->d.c != c) {
		fprintf(stderr, "cpu backend: a max pool fused into batchnorm that it cannot take "
		        "(bn_pool_takes is 0)\n");
		abort();
	}
}

void cpu_bn_fwd_train_pool(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                           const float *gamma, const float *beta, float *run_mean,
                           float *run_var, float momentum, float eps, float *save_mean,
                           float *save_invstd, int act, float slope, const cdp_bn_pool *p)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope, .x = x,
	             .gamma = gamma, .beta = beta, .run_mean = run_mean, .run_var = run_var,
	             .momentum = momentum, .eps = eps, .save_mean = save_mean,
	             .save_invstd = save_invstd, .xh = x ? NULL : xh, .xh_out = x ? xh : NULL,
	             .wide = 1, .pool = p };

	check_pool(be, p, n, c, hw);
	cpu_parallel_for(be, c, bn_train_chan, &j);
}

/* y NULL with yh: the output's copy alone */
int cpu_bn_fwd_h_alone(cdp_backend *be)
{
	(void)be;
	return 1;
}

void cpu_bn_fwd_train(cdp_backend *be, int n, int c, int hw, const float *x,
                      const float *gamma, const float *beta, float *y,
                      float *run_mean, float *run_var, float momentum, float eps,
                      float *save_mean, float *save_invstd, int act, float slope)
{
	cpu_bn_fwd_train_h(be, n, c, hw, x, NULL, gamma, beta, y, NULL, run_mean, run_var,
	                   momentum, eps, save_mean, save_invstd, act, slope);
}

/* eval mode's scale of channel c, gamma / sqrt(var + eps) */
static float infer_scale(const float *gamma, const float *var, float eps, int c)
{
	float fi = (float)(1.0 / sqrt((double)var[c] + eps));

	return gamma[c] * fi;
}

static void bn_infer_chan(void *ctx, int c)
{
	const bn_job *j = ctx;

	norm_chan(j, c, j->mean[c], infer_scale(j->gamma, j->var, j->eps, c), j->beta[c]);
}

void cpu_bn_post_coef(const cdp_bn_infer *bn, int o, float *m, float *a, float *b)
{
	*m = bn->mean[o];
	*a = infer_scale(bn->gamma, bn->var, bn->eps, o);
	*b = bn->beta[o];
}

/* norm_chan's planes, one run of channel o in place; called on each block
 * of a convolution's output while it is in L1 or L2, so the arithmetic
 * counts: in 16-float vectors where the CPU has them (the same bits) */
CPU_CLONES void cpu_bn_post_run(const cdp_bn_infer *bn, int o, float *y, size_t n)
{
	float m = bn->mean[o], a = infer_scale(bn->gamma, bn->var, bn->eps, o), b = bn->beta[o];

	switch (bn->act) {
	case CDP_ACT_RELU: norm_plane(CDP_ACT_RELU, 0.0f, y, y, n, m, a, b); break;
	case CDP_ACT_LEAKY: norm_plane(CDP_ACT_LEAKY, bn->slope, y, y, n, m, a, b); break;
	default: norm_plane(0, 0.0f, y, y, n, m, a, b);
	}
}

void cpu_bn_fwd_infer(cdp_backend *be, int n, int c, int hw, const float *x,
                      const float *gamma, const float *beta, float *y,
                      const float *run_mean, const float *run_var, float eps, int act,
                      float slope)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope, .x = x,
	             .gamma = gamma, .beta = beta, .y = y, .mean = run_mean, .var = run_var,
	             .eps = eps, .wide = BN512 && cpu_kgemm_wide() };
	cpu_parallel_for(be, c, bn_infer_chan, &j);
}

/* x's run [o, o + len): in place, or its bf16 copy widened into wide */
static inline const float *x_run(const bn_job *j, size_t o, size_t len, float *wide)
{
	if (!j->xh)
		return j->x + o;
	cpu_bf16_widen_run(wide, j->xh + o, len);
	return wide;
}

/* Both passes of the backward for channel c with the activation a constant
 * (so each specialisation is a straight vector loop). a = gamma * invstd is
 * the forward's scale (bn_train_chan's), and dx's factor. */
static inline __attribute__((always_inline)) void
bwd_chan(const int act, const bn_job *j, int c)
{
	size_t m = (size_t)j->n * j->hw;
	double sg = 0.0, sgx = 0.0;
	float mean = j->mean[c], is = j->invstd[c], a = j->gamma[c] * is, mg, mgx;
	float b = act ? j->beta[c] : 0.0f;

	/* a plane at once, or a bf16 x XH_CHUNK values at a time (whole
	 * BLOCKs of grad_sums: the same sums in the same order) */
	size_t step = j->xh ? XH_CHUNK : j->hw;
	float wide[XH_CHUNK];

#if BN512
	if (j->wide) {           /* the same passes on AVX-512, x read as it lies */
		for (int n = 0; n < j->n; n++) {
			size_t o = plane(j, n, c);
			dy_src ds = plane_dy(j, n, c);
			grad_sums16(act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
			            &ds, j->hw, mean, is, a, b, &sg, &sgx);
		}
		mg = (float)(sg / (double)m);
		mgx = (float)(sgx / (double)m);
		for (int n = j->n - 1; n >= 0; n--) {
			size_t o = plane(j, n, c);
			dy_src ds = plane_dy(j, n, c);
			dx_plane16(act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
			           &ds, j->dx + o, j->hw, mean, is, a, b, mg, mgx, j->dxbeta != 0.0f);
		}
		j->dgamma[c] += (float)sgx;
		j->dbeta[c] += (float)sg;
		return;
	}
#endif
	for (int n = 0; n < j->n; n++) {
		size_t o = plane(j, n, c);
		for (size_t q = 0; q < j->hw; q += step) {
			size_t len = j->hw - q < step ? j->hw - q : step;
			const float *xr = x_run(j, o + q, len, wide);
			grad_sums(act, j->slope, xr, j->dy + o + q, len, mean, is, a, b, &sg, &sgx);
		}
	}
	mg = (float)(sg / (double)m);
	mgx = (float)(sgx / (double)m);
	for (int n = j->n - 1; n >= 0; n--) {
		size_t o = plane(j, n, c);
		for (size_t q = 0; q < j->hw; q += step) {
			size_t len = j->hw - q < step ? j->hw - q : step;
			const float *xr = x_run(j, o + q, len, wide);
			dx_plane(act, j->slope, xr, j->dy + o + q, j->dx + o + q, len, mean, is, a, b, mg,
			         mgx, j->dxbeta != 0.0f);
		}
	}
	j->dgamma[c] += (float)sgx;
	j->dbeta[c] += (float)sg;
}

CPU_CLONES static void bn_bwd_chan(void *ctx, int c)
{
	const bn_job *j = ctx;

	switch (j->act) {
	case CDP_ACT_RELU: bwd_chan(CDP_ACT_RELU, j, c); break;
	case CDP_ACT_LEAKY: bwd_chan(CDP_ACT_LEAKY, j, c); break;
	default: bwd_chan(0, j, c);
	}
}

/* bn_bwd computes bn(x) again for the activation's mask: y is not read */
int cpu_bn_bwd_needs_y(cdp_backend *be)
{
	(void)be;
	return 0;
}

/* and it widens a bf16 x as it goes */
int cpu_bn_takes_xh(cdp_backend *be)
{
	(void)be;
	return 1;
}

/* The activation's mask comes from x, gamma and bn_beta (pre1), not y:
 * the passes read x and dy only. dy is only read. */
void cpu_bn_bwd(cdp_backend *be, int n, int c, int hw, const void *x, int xh, const float *y,
                float *dy, const float *gamma, const float *bn_beta, const float *save_mean,
                const float *save_invstd, float eps, int act, float slope, float *dx,
                float beta, float *dgamma, float *dbeta)
{
	(void)eps;   /* save_invstd already holds 1/sqrt(var + eps) */
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope,
	             .x = xh ? NULL : x, .xh = xh ? x : NULL,
	             .dy = dy, .gamma = gamma, .beta = bn_beta, .mean = save_mean,
	             .invstd = save_invstd, .dx = dx, .dxbeta = beta, .dgamma = dgamma,
	             .dbeta = dbeta, .wide = BN512 && cpu_kgemm_wide() };
	(void)y;
	cpu_parallel_for(be, c, bn_bwd_chan, &j);
}

/* bn_bwd whose dy is the fused max pool's gradient, expanded as it is
 * read (bn_pool_takes) */
void cpu_bn_bwd_pool(cdp_backend *be, int n, int c, int hw, const void *x, int xh,
                     const float *gamma, const float *bn_beta, const float *save_mean,
                     const float *save_invstd, float eps, int act, float slope, float *dx,
                     float beta, float *dgamma, float *dbeta, const cdp_bn_pool *p)
{
	(void)eps;
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope,
	             .x = xh ? NULL : x, .xh = xh ? x : NULL, .gamma = gamma, .beta = bn_beta,
	             .mean = save_mean, .invstd = save_invstd, .dx = dx, .dxbeta = beta,
	             .dgamma = dgamma, .dbeta = dbeta, .wide = 1, .pool = p };

	check_pool(be, p, n, c, hw);
	cpu_parallel_for(be, c, bn_bwd_chan, &j);
}

/* ---- synchronized batch norm in parts (backend.h): the passes above, the
 * sums between them left to the caller ---- */

static void sums_chan(void *ctx, int c)
{
	const bn_job *j = ctx;
	double s1 = 0.0, s2 = 0.0;

	for (int n = 0; n < j->n; n++)
		shifted_sums(j->x + plane(j, n, c), j->hw, j->mean[c], &s1, &s2);
	j->sums[c] = s1;
	j->sums[c + j->c] = s2;
}

void cpu_bn_sums(cdp_backend *be, int n, int c, int hw, const float *x, const float *shift,
                 double *sums)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .x = x, .mean = shift, .sums = sums };
	cpu_parallel_for(be, c, sums_chan, &j);
}

static void grad_sums_chan(void *ctx, int c)
{
	const bn_job *j = ctx;
	double sg = 0.0, sgx = 0.0;

	for (int n = 0; n < j->n; n++) {
		size_t o = plane(j, n, c);
		grad_sums(0, 0.0f, j->x + o, j->dy + o, j->hw, j->mean[c], j->invstd[c], 0.0f, 0.0f,
		          &sg, &sgx);
	}
	j->sums[c] = sg;
	j->sums[c + j->c] = sgx;
}

void cpu_bn_grad_sums(cdp_backend *be, int n, int c, int hw, const float *x, const float *dy,
                      const float *mean, const float *invstd, double *sums)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .x = x, .dy = dy, .mean = mean,
	             .invstd = invstd, .sums = sums };
	cpu_parallel_for(be, c, grad_sums_chan, &j);
}

/* m: var holds the two means (2C) */
static void dx_chan(void *ctx, int c)
{
	const bn_job *j = ctx;
	float is = j->invstd[c];

	for (int n = j->n - 1; n >= 0; n--) {
		size_t o = plane(j, n, c);
		dx_plane(0, 0.0f, j->x + o, j->dy + o, j->dx + o, j->hw, j->mean[c], is,
		         j->gamma[c] * is, 0.0f, j->var[c], j->var[c + j->c], j->dxbeta != 0.0f);
	}
}

void cpu_bn_bwd_dx(cdp_backend *be, int n, int c, int hw, const float *x, const float *dy,
                   const float *gamma, const float *mean, const float *invstd, const float *m,
                   float *dx, float beta)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .x = x, .dy = dy, .gamma = gamma,
	             .mean = mean, .invstd = invstd, .var = m, .dx = dx, .dxbeta = beta };
	cpu_parallel_for(be, c, dx_chan, &j);
}
