/* cpu_optim.c: the CPU backend's optimizer steps over the whole contiguous
 * parameter block (backend.h states the PyTorch semantics).
 *
 * Both updates are elementwise, so the block is cut into fixed chunks spread
 * over the thread pool and the result does not depend on the thread count.
 * Scalars (bias corrections, decay factors) are computed in double and then
 * used in float arithmetic in the order torch.optim's single-tensor code
 * uses them (lerp for the first moment, sqrt(v)/sqrt(bc2) + eps), so a few
 * steps agree with PyTorch to float rounding.
 *
 * Not done: SGD dampening, AMSGrad, per-parameter-group settings (weight
 * decay applies to every parameter, as with model.parameters()).
 */
#include <math.h>
#include "cpu.h"

#define CHUNK 16384

typedef struct opt_ctx {
	float *w, *m, *v;
	const float *g;
	size_t n;
	int nesterov, first;
	float lr, mu, wd;
	/* adamw */
	float decay, w1, b2, c2, step, bc2s, eps;
} opt_ctx;

static void range(const opt_ctx *c, int i, size_t *lo, size_t *hi)
{
	*lo = (size_t)i * CHUNK;
	*hi = *lo + CHUNK < c->n ? *lo + CHUNK : c->n;
}

static int nchunks(size_t n)
{
	return (int)((n + CHUNK - 1) / CHUNK);
}

static void sgd_chunk(void *vc, int i)
{
	const opt_ctx *c = vc;
	size_t lo, hi;

	range(c, i, &lo, &hi);
	for (size_t j = lo; j < hi; j++) {
		float g = c->g[j] + c->wd * c->w[j];   /* g' = g + wd w */
		float d = g;
		if (c->v) {
			float v = c->first ? g : c->mu * c->v[j] + g;
			c->v[j] = v;
			d = c->nesterov ? g + c->mu * v : v;
		}
		c->w[j] -= c->lr * d;
	}
}

void cpu_sgd_step(cdp_backend *be, float *w, const float *g, float *v, size_t n,
                  float lr, float mu, float wd, int nesterov, int first)
{
	/* Without momentum PyTorch keeps no buffer and steps along g'; the
	 * buffer formula gives the same, so v may be NULL then. */
	opt_ctx c = { .w = w, .g = g, .v = mu != 0 ? v : NULL, .n = n, .lr = lr, .mu = mu,
	              .wd = wd, .nesterov = nesterov, .first = first };

	cpu_parallel_for(be, nchunks(n), sgd_chunk, &c);
}

static void adamw_chunk(void *vc, int i)
{
	const opt_ctx *c = vc;
	size_t lo, hi;

	range(c, i, &lo, &hi);
	for (size_t j = lo; j < hi; j++) {
		float g = c->g[j], w = c->w[j] * c->decay;     /* w -= lr wd w */
		/* lerp(m, g, 1-b1), in the form torch.lerp picks for the weight */
		float m = c->w1 < 0.5f ? c->m[j] + c->w1 * (g - c->m[j])
		                       : g - (g - c->m[j]) * (1.0f - c->w1);
		float v = c->v[j] * c->b2 + c->c2 * g * g;
		float denom = sqrtf(v) / c->bc2s + c->eps;
		c->m[j] = m;
		c->v[j] = v;
		c->w[j] = w - c->step * (m / denom);
	}
}

void cpu_adamw_step(cdp_backend *be, float *w, const float *g, float *m, float *v,
                    size_t n, float lr, float b1, float b2, float eps, float wd, long t)
{
	double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
	opt_ctx c = { .w = w, .g = g, .m = m, .v = v, .n = n,
	              .decay = (float)(1.0 - (double)lr * wd), .w1 = (float)(1.0 - b1),
	              .b2 = b2, .c2 = (float)(1.0 - b2), .step = (float)(lr / bc1),
	              .bc2s = (float)sqrt(bc2), .eps = eps };

	cpu_parallel_for(be, nchunks(n), adamw_chunk, &c);
}
