/* cpu_bn_pass.h: what the batchnorm's passes share, private to
 * cpu_bn.c (the ops, and the passes in generic vectors) and cpu_bn512.c
 * (the same passes on AVX-512, chosen where cpu_kgemm_wide): the sums'
 * blocks, the arithmetic both must do alike for the same bits, and the
 * AVX-512 passes' declarations. cpu_bn.c's head says how the passes go.
 */
#ifndef CDP_CPU_BN_PASS_H
#define CDP_CPU_BN_PASS_H

#include <string.h>
#include "cpu.h"

/* as in cpu_ops.c: vectorize the streams, if-convert the selects; and no
 * contraction of x*a + b into an FMA, so that the AVX clones and the
 * AVX-512 passes give the baseline's bits (backward recomputes bn(x) for
 * the activation's mask: it must match forward's) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                      "fp-contract=off")
#endif

/* The sums run on NV vectors of 4 floats (SSE2, which every x86-64 has:
 * GCC would split wider vectors, and their comparisons into scalars), 16
 * lanes in all, over blocks of BLOCK values */
#define NV 4
#define VL (4 * NV)
#define BLOCK 1024
#define XH_CHUNK (2 * BLOCK)   /* the generic passes' widened run of a bf16 x */

/* the 16 lanes of one vector: lane 4v + l is cpu_bn.c's lanes()'s acc[v][l] */
typedef float v16f __attribute__((vector_size(64), aligned(4)));

static inline double lanes16(const v16f *acc)
{
	double s = 0.0;
	for (int l = 0; l < VL; l++)
		s += (*acc)[l];
	return s;
}

/* bn(x) before the activation: the one expression the forward and the
 * backward both use, so that the backward's mask is the forward's. */
static inline __attribute__((always_inline)) float pre1(float x, float m, float a, float b)
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

/* x[i] of x, else of the bf16 xh widened (exact) */
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

/* Where the backward's dy comes from: a plane of it (dy), or (dyp) the
 * gradient of a max pool fused after the batchnorm (bn_bwd_pool: 2x2
 * windows of stride 2 tiling a plane w wide, w a multiple of 16, ow = w /
 * 2), with its argmax ix, expanded as maxpool_bwd's tiled path writes dy */
typedef struct dy_src {
	const float *dy, *dyp;
	/* or the plane (dyh), the pool's gradient (dyph) as bf16 (CDP_H_DY) */
	const uint16_t *dyh, *dyph;
	const int32_t *ix;
	int w, ow;
	/* the plane the pass reads next, pf values on from this one where the
	 * prefetchers would not find it (next_plane), else 0 */
	long pf;
} dy_src;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BN512 1
#define BN512_TARGET __attribute__((target("avx512f,avx512bw")))
/* The AVX-512 passes (cpu_bn512.c), x or xh (one of them NULL) over a
 * plane of n, act 0 or CDP_ACT_*: shifted_sums (the next plane pf
 * values on fetched as it goes: dy_src.pf), norm_plane into y and/or
 * its copy yh and x's copy into xo (each where not NULL), the same over
 * a plane h x w pooled as it goes (bn_fwd_train_pool), grad_sums and
 * dx_plane (dy from ds) */
BN512_TARGET void cpu_bn_shifted_sums16(const float *x, const uint16_t *xh, size_t n, long pf,
                                        float k, double *s1, double *s2);
BN512_TARGET void cpu_bn_norm16(int act, float slope, const float *x, const uint16_t *xh, float *y,
                                uint16_t *yh, uint16_t *xo, size_t n, float m, float a, float b);
BN512_TARGET void cpu_bn_norm_pool16(int act, float slope, const float *x, const uint16_t *xh,
                                     uint16_t *xo, int h, int w, float m, float a, float b,
                                     float *py, int32_t *pix);
BN512_TARGET void cpu_bn_grad_sums16(int act, float slope, const float *x, const uint16_t *xh,
                                     const dy_src *ds, size_t n, float m, float is, float a,
                                     float b, double *sg, double *sgx);
BN512_TARGET void cpu_bn_dx_plane16(int act, float slope, const float *x, const uint16_t *xh,
                                    const dy_src *ds, float *dx, uint16_t *dxh, size_t n,
                                    float m, float is, float a, float b, float mg, float mgx,
                                    int add);
#else
#define BN512 0
#endif

#endif
