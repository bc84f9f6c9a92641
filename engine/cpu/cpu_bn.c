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
 * One job per channel, or per group of channels where planes are small
 * (group_size): it owns their outputs and statistics.
 * The passes are here in generic vectors and in cpu_bn512.c on AVX-512
 * (where cpu_kgemm_wide), alike to the bit; a training batchnorm whose
 * only reader is a 2x2 max pool also runs the pool (bn_*_pool, there).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_bn_pass.h"

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

static inline __attribute__((always_inline)) v4f pre4(v4f x, float m, float a, float b)
{
	return (x - m) * a + b;
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

typedef struct bn_job {
	int n, c, act;
	size_t hw;
	float slope, momentum, eps, dxbeta;
	const float *x, *dy, *gamma, *beta, *mean, *var, *invstd;
	/* bn_bwd, bn_fwd_train_h with x NULL: x as bf16 (the stash's copy,
	 * a convolution's output written so: conv_writes_yh), or NULL */
	const uint16_t *xh;
	uint16_t *xh_out, *yh_out;   /* bn_fwd_train_h: the copies, or NULL */
	/* bn_bwd: dy as bf16 (CDP_H_DY: the plane's, or the fused pool's
	 * p->dy), dx written as bf16 (CDP_H_DX), or NULL */
	const uint16_t *dyh;
	uint16_t *dxh;
	float *y, *dx, *run_mean, *run_var, *save_mean, *save_invstd, *dgamma, *dbeta;
	double *sums;       /* the synchronized parts' (2C) */
	const cdp_bn_pool *pool;  /* the fused max pool (bn_*_pool), or NULL */
	int wide;           /* the AVX-512 passes (cpu_kgemm_wide) */
	int group;          /* channels a job takes (group_size) */
} bn_job;

static size_t plane(const bn_job *j, int n, int c)
{
	return ((size_t)n * j->c + c) * j->hw;
}

#if BN512
/* sample n's dy of channel c: the plane, or the fused pool's (j->pool) */
static dy_src plane_dy(const bn_job *j, int n, int c)
{
	dy_src s = { .dy = NULL };

	if (!j->pool) {
		if (j->dyh)
			s.dyh = j->dyh + plane(j, n, c);
		else
			s.dy = j->dy + plane(j, n, c);
		return s;
	}
	size_t q = ((size_t)n * j->c + c) * j->pool->d.oh * j->pool->d.ow;
	if (j->dyh)
		s.dyph = j->dyh + q;
	else
		s.dyp = (const float *)j->pool->dy + q;
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

/* pass 2 of the forward for sample n's plane of channel c; with the
 * copies, XH_CHUNK values at a time, so that x and y are rounded while in
 * L1 (y NULL: each chunk of y in tmp, for its copy alone); a bf16 x
 * (j->xh) widened a chunk at a time into wide */
static inline __attribute__((always_inline)) void
norm_at(const bn_job *j, int n, int c, float m, float a, float b)
{
	size_t step = j->xh_out || j->yh_out || j->xh ? XH_CHUNK : j->hw, o = plane(j, n, c);
	float tmp[XH_CHUNK], wide[XH_CHUNK];

#if BN512
	if (j->wide) {
		cpu_bn_norm16(j->act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
		              j->y ? j->y + o : NULL, j->yh_out ? j->yh_out + o : NULL,
		              j->xh_out ? j->xh_out + o : NULL, j->hw, m, a, b);
		return;
	}
#endif
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

/* pass 2 of the forward for sample n's plane of channel c into the fused
 * max pool (j->pool, bn_pool_takes: the AVX-512 passes) */
static void pool_at(const bn_job *j, int n, int c, float m, float a, float b)
{
#if BN512
	const cdp_pool_desc *d = &j->pool->d;
	size_t o = plane(j, n, c), q = ((size_t)n * j->c + c) * d->oh * d->ow;

	cpu_bn_norm_pool16(j->act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
	                   j->xh_out ? j->xh_out + o : NULL, d->h, d->w, m, a, b, j->pool->y + q,
	                   j->pool->idx + q);
#else
	(void)j, (void)n, (void)c, (void)m, (void)a, (void)b;
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

/* pass 1 of the forward over sample n's plane of channel c (pf:
 * next_plane's) */
static void sums_at(const bn_job *j, int n, int c, long pf, float k, double *s1, double *s2)
{
	size_t o = plane(j, n, c);

#if BN512
	if (j->wide)
		cpu_bn_shifted_sums16(j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL, j->hw, pf,
		                      k, s1, s2);
	else
#endif
	if (j->x)
		shifted_sums(j->x + o, j->hw, k, s1, s2);
	else
		shifted_sums_h(j->xh + o, j->hw, k, s1, s2);
}

/* Channels a job takes together (1 where a plane is GROUP_VALUES or more):
 * its passes walk the samples, and in each sample the group's planes,
 * which lie one after the other in memory. Small planes one channel at a
 * time were a short run every C * HW values, each a fresh start for the
 * prefetchers: at 8x8 the passes took 2.7x the time per value of those of
 * 64x64 planes. Every channel's sums still run over its planes in the
 * same order: the group changes no result, only where the job's time
 * goes. At least 2 groups a thread, for the balance. */
#define GROUP_VALUES 2048
#define GROUP_MAX 64
static int group_size(cdp_backend *be, int c, size_t hw)
{
	size_t g = hw >= GROUP_VALUES || hw == 0 ? 1 : (GROUP_VALUES + hw - 1) / hw;
	int most = c / (2 * (be->threads > 0 ? be->threads : 1));

	if (g > GROUP_MAX)
		g = GROUP_MAX;
	return (int)g < most ? (int)g : most > 1 ? most : 1;
}

static int groups(const bn_job *j)
{
	return (j->c + j->group - 1) / j->group;
}

/* group g's first channel, and its count in *nc (the last may be short) */
static int group_at(const bn_job *j, int g, int *nc)
{
	int c0 = g * j->group;

	*nc = j->c - c0 < j->group ? j->c - c0 : j->group;
	return c0;
}

/* Values from plane (n, c0 + i) of a group of nc channels to the plane a
 * pass walking the samples in direction dir (1 or -1) reads after it,
 * where the prefetchers would not find that one (it does not follow in
 * memory): the first of the group in the next sample; else 0. */
static long next_plane(const bn_job *j, int n, int i, int nc, int dir)
{
	if (i + 1 < nc || n + dir < 0 || n + dir >= j->n)
		return 0;
	return dir * (long)j->c * (long)j->hw - (long)(nc - 1) * (long)j->hw;
}

CPU_CLONES static void bn_train_group(void *ctx, int g)
{
	const bn_job *j = ctx;
	size_t m = (size_t)j->n * j->hw;
	int nc, c0 = group_at(j, g, &nc);
	double s1[GROUP_MAX] = { 0 }, s2[GROUP_MAX] = { 0 };
	float k[GROUP_MAX], fm[GROUP_MAX], fa[GROUP_MAX];

	for (int i = 0; i < nc; i++)
		k[i] = load1(j->x, j->xh, plane(j, 0, c0 + i));
	for (int n = 0; n < j->n; n++)
		for (int i = 0; i < nc; i++)
			sums_at(j, n, c0 + i, next_plane(j, n, i, nc, 1), k[i], &s1[i], &s2[i]);
	for (int i = 0; i < nc; i++) {
		int c = c0 + i;
		double d = s1[i] / (double)m, var = s2[i] / (double)m - d * d;
		if (var < 0.0)          /* rounding, for a constant channel */
			var = 0.0;
		float fi = (float)(1.0 / sqrt(var + j->eps));
		fm[i] = (float)(k[i] + d);
		fa[i] = j->gamma[c] * fi;
		j->save_mean[c] = fm[i];
		j->save_invstd[c] = fi;
		if (j->run_mean) {
			double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
			j->run_mean[c] = (1.0f - j->momentum) * j->run_mean[c] + j->momentum * fm[i];
			j->run_var[c] = (1.0f - j->momentum) * j->run_var[c] +
			                j->momentum * (float)unbiased;
		}
	}
	for (int n = j->n - 1; n >= 0; n--)
		for (int i = 0; i < nc; i++) {
			if (j->pool)
				pool_at(j, n, c0 + i, fm[i], fa[i], j->beta[c0 + i]);
			else
				norm_at(j, n, c0 + i, fm[i], fa[i], j->beta[c0 + i]);
		}
}

/* bn_fwd_train_h, into the fused pool p where not NULL; x NULL: the
 * input is xh, read (bn_takes_xh), not written */
static void train(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                  const float *gamma, const float *beta, float *y, uint16_t *yh,
                  float *run_mean, float *run_var, float momentum, float eps, float *save_mean,
                  float *save_invstd, int act, float slope, const cdp_bn_pool *p)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope, .x = x,
	             .gamma = gamma, .beta = beta, .y = y, .run_mean = run_mean,
	             .run_var = run_var, .momentum = momentum, .eps = eps,
	             .save_mean = save_mean, .save_invstd = save_invstd,
	             .xh = x ? NULL : xh, .xh_out = x ? xh : NULL, .yh_out = yh,
	             .pool = p, .wide = BN512 && cpu_kgemm_wide(),
	             .group = group_size(be, c, (size_t)hw) };
	cpu_parallel_for(be, groups(&j), bn_train_group, &j);
}

void cpu_bn_fwd_train_h(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                        const float *gamma, const float *beta, float *y, uint16_t *yh,
                        float *run_mean, float *run_var, float momentum, float eps,
                        float *save_mean, float *save_invstd, int act, float slope)
{
	train(be, n, c, hw, x, xh, gamma, beta, y, yh, run_mean, run_var, momentum, eps, save_mean,
	      save_invstd, act, slope, NULL);
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
	check_pool(be, p, n, c, hw);
	train(be, n, c, hw, x, xh, gamma, beta, NULL, NULL, run_mean, run_var, momentum, eps,
	      save_mean, save_invstd, act, slope, p);
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

CPU_CLONES static void bn_infer_chan(void *ctx, int c)
{
	const bn_job *j = ctx;
	float a = infer_scale(j->gamma, j->var, j->eps, c);

	for (int n = j->n - 1; n >= 0; n--)
		norm_at(j, n, c, j->mean[c], a, j->beta[c]);
}

void cpu_bn_post_coef(const cdp_bn_infer *bn, int o, float *m, float *a, float *b)
{
	*m = bn->mean[o];
	*a = infer_scale(bn->gamma, bn->var, bn->eps, o);
	*b = bn->beta[o];
}

/* norm_at's planes, one run of channel o in place; called on each block
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

/* dy's run [o, o + len): in place, or its bf16 copy widened into wide */
static inline const float *dy_run(const bn_job *j, size_t o, size_t len, float *wide)
{
	if (!j->dyh)
		return j->dy + o;
	cpu_bf16_widen_run(wide, j->dyh + o, len);
	return wide;
}

/* Pass 1 of the backward over sample n's plane of channel c, the
 * activation a constant (so each specialisation is a straight vector
 * loop): a plane at once, or with a bf16 x, dy or dx XH_CHUNK values at a
 * time (whole BLOCKs of grad_sums: the same sums in the same order).
 * a = gamma * invstd is the forward's scale (bn_train_group's), and dx's
 * factor. */
static inline __attribute__((always_inline)) void
grad_at(const int act, const bn_job *j, int n, int c, long pf, double *sg, double *sgx)
{
	size_t o = plane(j, n, c), step = j->xh || j->dyh || j->dxh ? XH_CHUNK : j->hw;
	float mean = j->mean[c], is = j->invstd[c], a = j->gamma[c] * is;
	float b = act ? j->beta[c] : 0.0f, wide[XH_CHUNK], gwide[XH_CHUNK];

#if BN512
	if (j->wide) {           /* the same passes on AVX-512, x read as it lies */
		dy_src ds = plane_dy(j, n, c);
		ds.pf = pf;
		cpu_bn_grad_sums16(act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
		                   &ds, j->hw, mean, is, a, b, sg, sgx);
		return;
	}
#endif
	for (size_t q = 0; q < j->hw; q += step) {
		size_t len = j->hw - q < step ? j->hw - q : step;
		const float *xr = x_run(j, o + q, len, wide);
		grad_sums(act, j->slope, xr, dy_run(j, o + q, len, gwide), len, mean, is, a, b, sg,
		          sgx);
	}
}

/* pass 2 of the backward over sample n's plane of channel c, the means
 * mg and mgx from pass 1 (pf: next_plane's, for both) */
static inline __attribute__((always_inline)) void
dx_at(const int act, const bn_job *j, int n, int c, long pf, float mg, float mgx)
{
	size_t o = plane(j, n, c), step = j->xh || j->dyh || j->dxh ? XH_CHUNK : j->hw;
	float mean = j->mean[c], is = j->invstd[c], a = j->gamma[c] * is;
	float b = act ? j->beta[c] : 0.0f, wide[XH_CHUNK], gwide[XH_CHUNK], dxt[XH_CHUNK];

#if BN512
	if (j->wide) {
		dy_src ds = plane_dy(j, n, c);
		ds.pf = pf;
		cpu_bn_dx_plane16(act, j->slope, j->x ? j->x + o : NULL, j->xh ? j->xh + o : NULL,
		                  &ds, j->dxh ? NULL : j->dx + o, j->dxh ? j->dxh + o : NULL, j->hw,
		                  mean, is, a, b, mg, mgx, j->dxbeta != 0.0f);
		return;
	}
#endif
	for (size_t q = 0; q < j->hw; q += step) {
		size_t len = j->hw - q < step ? j->hw - q : step;
		const float *xr = x_run(j, o + q, len, wide);
		dx_plane(act, j->slope, xr, dy_run(j, o + q, len, gwide),
		         j->dxh ? dxt : j->dx + o + q, len, mean, is, a, b, mg, mgx,
		         j->dxbeta != 0.0f);
		if (j->dxh)
			cpu_bf16_narrow_run(j->dxh + o + q, dxt, len);
	}
}

/* both passes for group g's channels (group_size) */
static inline __attribute__((always_inline)) void bwd_group(const int act, const bn_job *j, int g)
{
	size_t m = (size_t)j->n * j->hw;
	int nc, c0 = group_at(j, g, &nc);
	double sg[GROUP_MAX] = { 0 }, sgx[GROUP_MAX] = { 0 };
	float mg[GROUP_MAX], mgx[GROUP_MAX];

	for (int n = 0; n < j->n; n++)
		for (int i = 0; i < nc; i++)
			grad_at(act, j, n, c0 + i, next_plane(j, n, i, nc, 1), &sg[i], &sgx[i]);
	for (int i = 0; i < nc; i++) {
		mg[i] = (float)(sg[i] / (double)m);
		mgx[i] = (float)(sgx[i] / (double)m);
	}
	for (int n = j->n - 1; n >= 0; n--)
		for (int i = 0; i < nc; i++)
			dx_at(act, j, n, c0 + i, next_plane(j, n, i, nc, -1), mg[i], mgx[i]);
	for (int i = 0; i < nc; i++) {
		j->dgamma[c0 + i] += (float)sgx[i];
		j->dbeta[c0 + i] += (float)sg[i];
	}
}

CPU_CLONES static void bn_bwd_group(void *ctx, int g)
{
	const bn_job *j = ctx;

	switch (j->act) {
	case CDP_ACT_RELU: bwd_group(CDP_ACT_RELU, j, g); break;
	case CDP_ACT_LEAKY: bwd_group(CDP_ACT_LEAKY, j, g); break;
	default: bwd_group(0, j, g);
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

/* and it reads dy and writes dx in bf16 where asked (CDP_H_DY, CDP_H_DX),
 * widening dy as it loads it and rounding dx as it stores it */
int cpu_bn_takes_gh(cdp_backend *be)
{
	(void)be;
	return 1;
}

/* The activation's mask comes from x, gamma and bn_beta (pre1), not y:
 * the passes read x and dy only. dy is only read. */
/* bn_bwd of dy, or of the fused pool p's gradient where p is not NULL
 * (save_invstd already holds 1/sqrt(var + eps)); h: CDP_H_* */
static void bwd(cdp_backend *be, int n, int c, int hw, const void *x, int h, const void *dy,
                const float *gamma, const float *bn_beta, const float *save_mean,
                const float *save_invstd, int act, float slope, void *dx, float beta,
                float *dgamma, float *dbeta, const cdp_bn_pool *p)
{
	bn_job j = { .n = n, .c = c, .hw = (size_t)hw, .act = act, .slope = slope,
	             .x = h & CDP_H_X ? NULL : x, .xh = h & CDP_H_X ? x : NULL,
	             .dy = h & CDP_H_DY ? NULL : dy,
	             .dyh = h & CDP_H_DY ? (p ? p->dy : dy) : NULL,
	             .gamma = gamma, .beta = bn_beta, .mean = save_mean,
	             .invstd = save_invstd, .dx = h & CDP_H_DX ? NULL : dx,
	             .dxh = h & CDP_H_DX ? dx : NULL, .dxbeta = beta, .dgamma = dgamma,
	             .dbeta = dbeta, .pool = p, .wide = BN512 && cpu_kgemm_wide(),
	             .group = group_size(be, c, (size_t)hw) };

	if (h & CDP_H_DX && beta != 0.0f) {
		fprintf(stderr, "cpu backend: batchnorm's backward asked to add to a bf16 dx\n");
		abort();
	}
	cpu_parallel_for(be, groups(&j), bn_bwd_group, &j);
}

void cpu_bn_bwd(cdp_backend *be, int n, int c, int hw, const void *x, int h, const float *y,
                void *dy, const float *gamma, const float *bn_beta, const float *save_mean,
                const float *save_invstd, float eps, int act, float slope, void *dx,
                float beta, float *dgamma, float *dbeta)
{
	(void)eps;
	(void)y;
	bwd(be, n, c, hw, x, h, dy, gamma, bn_beta, save_mean, save_invstd, act, slope, dx, beta,
	    dgamma, dbeta, NULL);
}

/* bn_bwd whose dy is the fused max pool's gradient, expanded as it is
 * read (bn_pool_takes) */
void cpu_bn_bwd_pool(cdp_backend *be, int n, int c, int hw, const void *x, int h,
                     const float *gamma, const float *bn_beta, const float *save_mean,
                     const float *save_invstd, float eps, int act, float slope, void *dx,
                     float beta, float *dgamma, float *dbeta, const cdp_bn_pool *p)
{
	(void)eps;
	check_pool(be, p, n, c, hw);
	bwd(be, n, c, hw, x, h, NULL, gamma, bn_beta, save_mean, save_invstd, act, slope, dx, beta,
	    dgamma, dbeta, p);
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
