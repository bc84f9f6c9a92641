/* cpu_bn512.c: the batchnorm's passes on AVX-512 (cpu_bn_pass.h), which
 * cpu_bn.c runs where cpu_kgemm_wide: the same operations on the same
 * lanes in the same order as its generic passes, so the same bits
 * (test_bf16_sets compares them).
 */
#include "cpu_bn_pass.h"

#if BN512
/* ---- the backward's passes on AVX-512 (cpu_kgemm_wide): the 16 lanes
 * of grad_sums as one vector, where GCC keeps the sums in registers (as
 * 4 v4f it kept them in memory, a store and a load per step: 7% of a bf16
 * classifier step), and a bf16 x widened in the register as it is read
 * instead of into a buffer first (3.5%). The same operations on the same
 * lanes in the same order as grad_sums and dx_plane: the same bits. ---- */
typedef int32_t v16i __attribute__((vector_size(64), aligned(4)));
typedef uint16_t v16h __attribute__((vector_size(32), aligned(2)));
typedef uint32_t v16u __attribute__((vector_size(64), aligned(4)));

/* v's 16 values rounded to bf16 (cpu_bf16_bits) into h[0..16) */
static inline __attribute__((always_inline)) BN512_TARGET void store_h16(uint16_t *h, v16f v)
{
	v16u u = (v16u)v, nan = (v16u)((u & 0x7fffffffu) > 0x7f800000u);
	v16u r = u + 0x7fffu + ((u >> 16) & 1u);
	v16h hv = __builtin_convertvector(((r & ~nan) | ((u | 0x400000u) & nan)) >> 16, v16h);

	memcpy(h, &hv, sizeof hv);
}


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


typedef float v8f_bn __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i_bn __attribute__((vector_size(32), aligned(4)));
typedef uint16_t v8h_bn __attribute__((vector_size(16), aligned(2)));

/* dy[i, i + 16), i = h w + c0 (the row and column kept by the caller) */
static inline __attribute__((always_inline)) BN512_TARGET v16f
dy16(const int pooled, const dy_src *s, size_t i, int h, int c0)
{
	if (!pooled)         /* a bf16 dy (CDP_H_DY) widened in the register */
		return load16(s->dy, s->dyh, i);
	size_t q = (size_t)(h >> 1) * s->ow + (c0 >> 1);
	const v8i_bn even = { 0, 2, 4, 6, 8, 10, 12, 14 };
	v8i_bn ix, at = h * s->w + c0 + even;
	v8f_bn gp, l, r;
	if (s->dyph) {       /* bf16, widened */
		v8h_bn hv;
		memcpy(&hv, s->dyph + q, sizeof hv);
		v8i_bn w = __builtin_convertvector(hv, v8i_bn) << 16;
		memcpy(&gp, &w, sizeof gp);
	} else {
		memcpy(&gp, s->dyp + q, sizeof gp);
	}
	memcpy(&ix, s->ix + q, sizeof ix);
	l = (v8f_bn)((v8i_bn)gp & (ix == at)) + 0.0f;
	r = (v8f_bn)((v8i_bn)gp & (ix == at + 1)) + 0.0f;
	return __builtin_shufflevector(l, r, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* The next plane's values where this pass reads x[i, i + 16) and their
 * dy, fetched into the caches (s->pf, cpu_bn.c's next_plane): a plane of
 * 64x64 bf16 is two pages, and the hardware's prefetchers start again on
 * each, its first lines read from memory at full latency (the backward's
 * pass 1 over 64x64 planes took 18% less time with this) */
static inline __attribute__((always_inline)) void fetch_x(const float *x, const uint16_t *xh,
                                                        size_t i, long pf)
{
	if (xh)
		__builtin_prefetch(xh + i + pf);
	else
		__builtin_prefetch(x + i + pf);
}

static inline __attribute__((always_inline)) BN512_TARGET void
fetch_next(const int pooled, const float *x, const uint16_t *xh, const dy_src *s, size_t i,
           int h, int c0)
{
	if (!s->pf)
		return;
	fetch_x(x, xh, i, s->pf);
	if (!pooled) {
		if (s->dyh)
			__builtin_prefetch(s->dyh + i + s->pf);
		else
			__builtin_prefetch(s->dy + i + s->pf);
		return;
	}
	/* the pooled planes are a quarter of the plane, at the same place */
	size_t q = (size_t)(h >> 1) * s->ow + (c0 >> 1);
	if (s->dyph)
		__builtin_prefetch(s->dyph + q + s->pf / 4);
	else
		__builtin_prefetch(s->dyp + q + s->pf / 4);
	__builtin_prefetch(s->ix + q + s->pf / 4);
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
			fetch_next(pooled, x, xh, ds, i, h, c0);
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
		float g = grad1(act, slope, act ? pre1(xi, m, a, b) : 0.0f, load1(ds->dy, ds->dyh, i));
		*sg += g;
		*sgx += (double)g * ((xi - m) * is);
	}
}

static inline __attribute__((always_inline)) BN512_TARGET void
dx_plane16_act(const int act, const int pooled, float slope, const float *x, const uint16_t *xh,
               const dy_src *ds, float *dx, uint16_t *dxh, size_t n, float m, float is,
               float a, float b, float mg, float mgx, int add)
{
	size_t i = 0;
	int h = 0, c0 = 0;

	for (; i + 16 <= n; i += 16) {
		v16f xv = load16(x, xh, i), gv = dy16(pooled, ds, i, h, c0), d;
		fetch_next(pooled, x, xh, ds, i, h, c0);
		DY_STEP(pooled, ds, h, c0);
		if (act)
			gv = grad16(act, slope, (xv - m) * a + b, gv);
		d = a * (gv - mg - (xv - m) * is * mgx);
		if (add) {
			v16f o;
			memcpy(&o, dx + i, sizeof o);
			d = o + d;
		}
		if (dxh)
			store_h16(dxh + i, d);
		else
			memcpy(dx + i, &d, sizeof d);
	}
	for (; !pooled && i < n; i++) {
		float xi = load1(x, xh, i);
		float d = a * (grad1(act, slope, act ? pre1(xi, m, a, b) : 0.0f,
		                     load1(ds->dy, ds->dyh, i)) - mg - (xi - m) * is * mgx);
		if (dxh)
			dxh[i] = cpu_bf16_bits(d);
		else
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

BN512_TARGET void
cpu_bn_grad_sums16(int act, float slope, const float *x, const uint16_t *xh, const dy_src *ds, size_t n,
            float m, float is, float a, float b, double *sg, double *sgx)
{
	if (ds->dyp || ds->dyph)
		BN_ACTS(grad_sums16_act, 1, x, xh, ds, n, m, is, a, b, sg, sgx);
	else
		BN_ACTS(grad_sums16_act, 0, x, xh, ds, n, m, is, a, b, sg, sgx);
}

BN512_TARGET void
cpu_bn_dx_plane16(int act, float slope, const float *x, const uint16_t *xh, const dy_src *ds, float *dx,
           uint16_t *dxh, size_t n, float m, float is, float a, float b, float mg, float mgx,
           int add)
{
	if (ds->dyp || ds->dyph)
		BN_ACTS(dx_plane16_act, 1, x, xh, ds, dx, dxh, n, m, is, a, b, mg, mgx, add);
	else
		BN_ACTS(dx_plane16_act, 0, x, xh, ds, dx, dxh, n, m, is, a, b, mg, mgx, add);
}

/* ---- the forward's passes on AVX-512 (cpu_kgemm_wide), as the
 * backward's: x read as it lies, a bf16 one widened in the register, and
 * the copies rounded in the register as they are stored, where the
 * generic passes widened and rounded chunks through L1 buffers (the
 * batchnorm forward moved 15 GB/s where its backward moved 28). The same
 * operations on the same lanes in the same order as shifted_sums,
 * norm_plane and cpu_bf16_bits: the same bits. ---- */
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
BN512_TARGET void
cpu_bn_shifted_sums16(const float *x, const uint16_t *xh, size_t n, long pf, float k, double *s1,
                      double *s2)
{
	size_t i = 0;

	while (i + VL <= n) {
		size_t end = i + BLOCK < n ? i + BLOCK : n;
		v16f a = { 0 }, b = { 0 };
		for (; i + VL <= end; i += VL) {
			v16f t = load16(x, xh, i);
			if (pf)
				fetch_x(x, xh, i, pf);
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

BN512_TARGET void
cpu_bn_norm16(int act, float slope, const float *x, const uint16_t *xh, float *y, uint16_t *yh,
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

BN512_TARGET void
cpu_bn_norm_pool16(int act, float slope, const float *x, const uint16_t *xh, uint16_t *xo, int h, int w,
            float m, float a, float b, float *py, int32_t *pix)
{
	switch (act) {
	case CDP_ACT_RELU: norm_pool16_act(CDP_ACT_RELU, 0.0f, x, xh, xo, h, w, m, a, b, py, pix); break;
	case CDP_ACT_LEAKY: norm_pool16_act(CDP_ACT_LEAKY, slope, x, xh, xo, h, w, m, a, b, py, pix); break;
	default: norm_pool16_act(0, 0.0f, x, xh, xo, h, w, m, a, b, py, pix);
	}
}
#endif
