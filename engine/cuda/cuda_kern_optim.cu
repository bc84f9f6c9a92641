/* cuda_kern_optim.cu: the fused SGD and AdamW steps of cuda_kern.h over the
 * whole contiguous parameter block w (n floats) with its gradient g and
 * state (v; m and v), the CUDA twins of cpu_optim.c (backend.h states
 * PyTorch's semantics).
 *
 * The scalars (bias corrections, decay factor) are computed on the host in
 * double exactly as cpu_optim.c computes them, and the per-element float
 * arithmetic is done in the CPU's order with each operation rounded
 * (cdk_mul and friends, cuda_kern_int.cuh), so both backends take the same
 * step bit for bit. Launch shape: a grid-stride loop, cdk_grid(n) blocks of
 * CDK_THREADS, one element per thread at a time.
 *
 * Not done (as on the CPU): SGD dampening, AMSGrad, parameter groups.
 */
#include <math.h>
#include "cuda_kern_int.cuh"

/* One SGD element: g' = g + wd w; v = mu v + g' (v = g' at the first step;
 * no buffer when v is NULL); d = g' + mu v (nesterov) or v; w -= lr d. */
static __host__ __device__ inline void sgd1(float *w, float gr, float *v, float lr, float mu,
                                            float wd, int nesterov, int first)
{
	float g = cdk_add(gr, cdk_mul(wd, *w)), d = g;

	if (v) {
		float nv = first ? g : cdk_add(cdk_mul(mu, *v), g);
		*v = nv;
		d = nesterov ? cdk_add(g, cdk_mul(mu, nv)) : nv;
	}
	*w = cdk_sub(*w, cdk_mul(lr, d));
}

static __global__ void sgd_k(float *w, const float *g, float *v, size_t n, float lr, float mu,
                             float wd, int nesterov, int first)
{
	CDK_FOR_EACH(i, n)
		sgd1(&w[i], g[i], v ? &v[i] : NULL, lr, mu, wd, nesterov, first);
}

void cdk_sgd_step(cudaStream_t s, float *w, const float *g, float *v, size_t n, float lr,
                  float mu, float wd, int nesterov, int first)
{
	if (n == 0)
		return;
	/* without momentum PyTorch keeps no buffer: d = g' */
	sgd_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(w, g, mu != 0.0f ? v : NULL, n, lr, mu, wd,
	                                          nesterov, first);
	CDK_CHECK_LAUNCH();
}

/* AdamW's per-step constants, as cpu_adamw_step derives them */
typedef struct adamw_c {
	float decay;     /* 1 - lr wd */
	float w1, w1c;   /* 1 - b1 (lerp weight), and 1 - w1 in float */
	float b2, c2;    /* b2, 1 - b2 */
	float step;      /* lr / (1 - b1^t) */
	float bc2s;      /* sqrt(1 - b2^t) */
	float eps;
} adamw_c;

/* w = w decay; m = lerp(m, g, w1) in the form torch.lerp picks for the
 * weight; v = v b2 + c2 g g; w -= step * m / (sqrt(v) / bc2s + eps) */
static __host__ __device__ inline void adamw1(const adamw_c c, float *wp, float g, float *mp,
                                              float *vp)
{
	float w = cdk_mul(*wp, c.decay);
	float m = c.w1 < 0.5f ? cdk_add(*mp, cdk_mul(c.w1, cdk_sub(g, *mp)))
	                      : cdk_sub(g, cdk_mul(cdk_sub(g, *mp), c.w1c));
	float v = cdk_add(cdk_mul(*vp, c.b2), cdk_mul(cdk_mul(c.c2, g), g));
#ifdef __CUDA_ARCH__
	float root = __fsqrt_rn(v);
#else
	float root = sqrtf(v);
#endif
	float denom = cdk_add(cdk_div(root, c.bc2s), c.eps);
	*mp = m;
	*vp = v;
	*wp = cdk_sub(w, cdk_mul(c.step, cdk_div(m, denom)));
}

static __global__ void adamw_k(const adamw_c c, float *w, const float *g, float *m, float *v,
                               size_t n)
{
	CDK_FOR_EACH(i, n)
		adamw1(c, &w[i], g[i], &m[i], &v[i]);
}

static adamw_c adamw_consts(float lr, float b1, float b2, float eps, float wd, long t)
{
	double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
	adamw_c c;

	c.decay = (float)(1.0 - (double)lr * wd);
	c.w1 = (float)(1.0 - b1);
	c.w1c = 1.0f - c.w1;
	c.b2 = b2;
	c.c2 = (float)(1.0 - b2);
	c.step = (float)(lr / bc1);
	c.bc2s = (float)sqrt(bc2);
	c.eps = eps;
	return c;
}

void cdk_adamw_step(cudaStream_t s, float *w, const float *g, float *m, float *v, size_t n,
                    float lr, float b1, float b2, float eps, float wd, long t)
{
	if (n == 0)
		return;
	adamw_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(adamw_consts(lr, b1, b2, eps, wd, t), w, g, m,
	                                            v, n);
	CDK_CHECK_LAUNCH();
}
