/* cuda_kern_elem.cu: the elementwise launchers of cuda_kern.h (fill, scale,
 * axpy, add, diff, activations) and the sum of squares, over flat arrays of n
 * floats. Each computes what cpu_backend.c / cpu_ops.c / cpu_elem.c compute,
 * rounding each operation as they do (cdk_mul, cdk_add), so results agree
 * bit for bit; sumsq accumulates in double like cpu_sumsq, in a different
 * but fixed order (cuda_kern_int.cuh).
 *
 * Launch shapes: grid-stride loops, cdk_grid(n) blocks of CDK_THREADS;
 * sumsq: cdk_red_grid(n) blocks, then one block.
 */
#include "cuda_kern_int.cuh"

size_t cdk_reduce_scratch_bytes(size_t n)
{
	return (CDK_RED_HEAD + 3 * (size_t)cdk_red_grid(n)) * sizeof(double);
}

static __global__ void fill_k(float *x, float v, size_t n)
{
	CDK_FOR_EACH(i, n)
		x[i] = v;
}

static __global__ void scale_k(float *x, float a, size_t n)
{
	CDK_FOR_EACH(i, n)
		x[i] = cdk_mul(x[i], a);
}

static __global__ void axpy_k(float a, const float *x, float *y, size_t n)
{
	CDK_FOR_EACH(i, n)
		y[i] = cdk_add(y[i], cdk_mul(a, x[i]));
}

static __global__ void add_k(const float *a, const float *b, float *y, size_t n)
{
	CDK_FOR_EACH(i, n)
		y[i] = cdk_add(a[i], b[i]);
}

/* the diff layer: y = a - b or |a - b|; dx (+)= sign * sgn * dy */
static __global__ void diff_fwd_k(int absval, const float *a, const float *b, float *y, size_t n)
{
	CDK_FOR_EACH(i, n) {
		float d = a[i] - b[i];
		y[i] = absval ? fabsf(d) : d;
	}
}

static __global__ void diff_bwd_k(int absval, const float *a, const float *b, const float *dy,
                                  float sign, float *dx, float beta, size_t n)
{
	CDK_FOR_EACH(i, n)
		cdk_put(&dx[i], cdk_mul(sign * cdp_diff_sgn(absval, a[i], b[i]), dy[i]), beta);
}

void cdk_fill(cudaStream_t s, float *x, float v, size_t n)
{
	if (n == 0)
		return;
	fill_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(x, v, n);
	CDK_CHECK_LAUNCH();
}

void cdk_scale(cudaStream_t s, float *x, float a, size_t n)
{
	if (n == 0)
		return;
	scale_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(x, a, n);
	CDK_CHECK_LAUNCH();
}

void cdk_axpy(cudaStream_t s, float a, const float *x, float *y, size_t n)
{
	if (n == 0)
		return;
	axpy_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(a, x, y, n);
	CDK_CHECK_LAUNCH();
}

void cdk_add(cudaStream_t s, const float *a, const float *b, float *y, size_t n)
{
	if (n == 0)
		return;
	add_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(a, b, y, n);
	CDK_CHECK_LAUNCH();
}

void cdk_diff_fwd(cudaStream_t s, int absval, const float *a, const float *b, float *y, size_t n)
{
	if (n == 0)
		return;
	diff_fwd_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(absval, a, b, y, n);
	CDK_CHECK_LAUNCH();
}

void cdk_diff_bwd(cudaStream_t s, int absval, const float *a, const float *b, const float *dy,
                  float sign, float *dx, float beta, size_t n)
{
	if (n == 0)
		return;
	diff_bwd_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(absval, a, b, dy, sign, dx, beta, n);
	CDK_CHECK_LAUNCH();
}

/* ---- sum of squares: part[b] per block, then out[0] ---- */

static __global__ void sumsq_k(const float *x, size_t n, double *part)
{
	double v[1] = { 0.0 };

	CDK_FOR_EACH(i, n)
		v[0] += (double)x[i] * x[i];
	cdk_block_sum<1>(v);
	if (threadIdx.x == 0)
		part[blockIdx.x] = v[0];
}

void cdk_sumsq(cudaStream_t s, const float *x, size_t n, void *scratch, double *out)
{
	unsigned g = cdk_red_grid(n);
	double *part = cdk_parts(scratch);

	sumsq_k<<<g, CDK_THREADS, 0, s>>>(x, n, part);
	CDK_CHECK_LAUNCH();
	cdk_sum_parts<1><<<1, CDK_THREADS, 0, s>>>(part, g, out);
	CDK_CHECK_LAUNCH();
}

/* ---- activations (cpu_ops.c): relu lets NaN through; leaky for any other
 * kind; backward masks by the output y, which for relu and leaky (slope >= 0)
 * is positive exactly where x is ---- */

static __host__ __device__ inline float act_fwd1(int kind, float slope, float v)
{
	if (kind == CDP_ACT_RELU)
		return v < 0.0f ? 0.0f : v;
	return v < 0.0f ? cdk_mul(v, slope) : v;
}

static __host__ __device__ inline float act_bwd1(int kind, float slope, float y, float g)
{
	if (kind == CDP_ACT_RELU)
		return y <= 0.0f ? 0.0f : g;
	return y > 0.0f ? g : cdk_mul(g, slope);
}

static __global__ void act_fwd_k(int kind, float slope, const float *x, float *y, size_t n)
{
	CDK_FOR_EACH(i, n)
		y[i] = act_fwd1(kind, slope, x[i]);
}

static __global__ void act_bwd_k(int kind, float slope, const float *y, const float *dy,
                                 float *dx, float beta, size_t n)
{
	CDK_FOR_EACH(i, n)
		cdk_put(&dx[i], act_bwd1(kind, slope, y[i], dy[i]), beta);
}

void cdk_act_fwd(cudaStream_t s, int kind, float slope, const float *x, float *y, size_t n)
{
	if (n == 0)
		return;
	act_fwd_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(kind, slope, x, y, n);
	CDK_CHECK_LAUNCH();
}

void cdk_act_bwd(cudaStream_t s, int kind, float slope, const float *y, const float *dy,
                 float *dx, float beta, size_t n)
{
	if (n == 0)
		return;
	act_bwd_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(kind, slope, y, dy, dx, beta, n);
	CDK_CHECK_LAUNCH();
}
