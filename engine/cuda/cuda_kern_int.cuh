/* cuda_kern_int.cuh: what the cuda_kern_*.cu files share, private to them:
 * launch shapes, the check after every launch, float arithmetic that
 * rounds like the CPU backend's, and the deterministic reduction in double
 * with its scratch layout.
 *
 * Launch shapes. Every kernel runs CDK_THREADS threads per block. Plain
 * element kernels are grid-stride loops over at most CDK_MAX_GRID blocks,
 * so any size_t length fits one launch. A reduction's first pass runs
 * cdk_red_grid(items) blocks, a number that depends only on the length:
 * each thread then always sums the same items in the same order, each
 * block reduces its threads in a fixed tree, and the second pass (one
 * block) adds the per-block partials in block order. No float atomics
 * anywhere, so a result depends on the input alone.
 *
 * Scratch (cdk_reduce_scratch_bytes): CDK_RED_HEAD doubles for totals that a
 * later kernel reads (dice), then up to 3 partials per first-pass block.
 *
 * Rounding. nvcc contracts a*b + c into one fused multiply-add; the CPU
 * backend (plain x86-64 gcc) rounds the product first. The elementwise ops,
 * upsampling and the optimizer steps use cdk_mul / cdk_add, which round
 * each operation (IEEE round to nearest, also under --use_fast_math), so
 * they agree with the CPU bit for bit. They are __host__ __device__ like
 * the per-element functions of the .cu files, which lets those be checked
 * against the CPU backend on a host without a GPU.
 */
#ifndef CDP_CUDA_KERN_INT_CUH
#define CDP_CUDA_KERN_INT_CUH

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuda_kern.h"

#define CDK_THREADS   256      /* threads per block, every kernel */
#define CDK_MAX_GRID  8192     /* blocks of a grid-stride loop (2M threads) */
#define CDK_RED_PARTS 1024     /* most blocks in a reduction's first pass */
#define CDK_RED_HEAD  8        /* doubles before the partials in the scratch */

/* Blocks for a grid-stride loop over n items (n > 0). */
static inline unsigned cdk_grid(size_t n)
{
	size_t g = (n + CDK_THREADS - 1) / CDK_THREADS;
	return g > CDK_MAX_GRID ? CDK_MAX_GRID : (unsigned)g;
}

/* Blocks of a reduction's first pass over n items: 1 .. CDK_RED_PARTS. */
static inline unsigned cdk_red_grid(size_t n)
{
	size_t g = (n + CDK_THREADS - 1) / CDK_THREADS;
	return g < 1 ? 1 : g > CDK_RED_PARTS ? CDK_RED_PARTS : (unsigned)g;
}

/* for (size_t i ...) over [0, n) in a grid-stride loop */
#define CDK_FOR_EACH(i, n) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

/* q = i / d, *r = i % d, in 32 bits when i fits (nearly every tensor): a
 * 64-bit division is a long software routine on the GPU. */
static __host__ __device__ __forceinline__ size_t cdk_divmod(size_t i, unsigned d, size_t *r)
{
	if (i <= 0xffffffffu) {
		unsigned q = (unsigned)i / d;
		*r = (unsigned)i - q * d;
		return q;
	}
	*r = i % d;
	return i / d;
}

/* The launchers cannot return an error, and a launch that fails (a bad
 * shape, no usable device) would leave no trace until much later: report
 * which launch failed and abort, as the backend does for a failed CUDA call
 * (cuda.h; under mpirun that ends the job). abort() flushes no stdio
 * stream, and a program's stdout into a file is block-buffered: every
 * stream is flushed first, so the results printed before the failure
 * (the test programs' "ok" lines, a trainer's log) are not lost. */
#define CDK_CHECK_LAUNCH() cdk_check_launch(__FILE__, __LINE__)

static inline void cdk_check_launch(const char *file, int line)
{
	cudaError_t e = cudaGetLastError();

	if (e == cudaSuccess)
		return;
	fprintf(stderr, "%s: %s:%d: kernel launch: %s: %s\n", program_invocation_short_name,
	        file, line, cudaGetErrorName(e), cudaGetErrorString(e));
	fflush(NULL);
	abort();
}

/* For a launcher given a value it has no kernel for (a programming error). */
static inline void cdk_die(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s: %s:%d: %s\n", program_invocation_short_name, file, line, what);
	fflush(NULL);
	abort();
}

static __host__ __device__ __forceinline__ float cdk_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

static __host__ __device__ __forceinline__ float cdk_add(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(a, b);
#else
	return a + b;
#endif
}

static __host__ __device__ __forceinline__ float cdk_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fsub_rn(a, b);
#else
	return a - b;
#endif
}

static __host__ __device__ __forceinline__ float cdk_div(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fdiv_rn(a, b);
#else
	return a / b;
#endif
}

/* out = v + beta * out, reading out only when beta != 0 (it may hold
 * anything, even NaN, when the caller overwrites) */
static __host__ __device__ __forceinline__ void cdk_put(float *out, float v, float beta)
{
	*out = beta == 0.0f ? v : cdk_add(cdk_mul(beta, *out), v);
}

/* Batchnorm in cpu_bn.c's arithmetic, every float operation rounded alone
 * (cuda_kern_bn.cu, and cuda_kern_layers.cu's one value per channel).
 * bn_train_chan's statistics of channel ch from its shifted sums about k
 * over m values, d = s1/m and var = s2/m - d^2: the saved mean *fm and
 * invstd *fi, the running statistics updated (both or neither; the
 * unbiased variance is var itself for m = 1, where N*H*W - 1 = 0). */
static __host__ __device__ inline void cdk_bn_stats(float k, double d, double var, size_t m,
                                                    float eps, float momentum, float *run_mean,
                                                    float *run_var, size_t ch, float *fm,
                                                    float *fi)
{
	if (var < 0.0)          /* rounding, for a constant channel */
		var = 0.0;
	*fm = (float)(k + d);
	*fi = (float)(1.0 / sqrt(var + (double)eps));
	if (run_mean && run_var) {
		double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
		float keep = cdk_sub(1.0f, momentum);
		run_mean[ch] = cdk_add(cdk_mul(keep, run_mean[ch]), cdk_mul(momentum, *fm));
		run_var[ch] = cdk_add(cdk_mul(keep, run_var[ch]), cdk_mul(momentum, (float)unbiased));
	}
}

/* bn(x) before the activation, pre1: (x - m) a + b, a = gamma * invstd */
static __host__ __device__ __forceinline__ float cdk_bn_pre(float x, float m, float a, float b)
{
	return cdk_add(cdk_mul(cdk_sub(x, m), a), b);
}

/* the forward's output act(bn(x)), norm_plane's (NaN passes) */
static __host__ __device__ __forceinline__ float cdk_bn_out(float x, float m, float a, float b,
                                                            int act, float slope)
{
	float v = cdk_bn_pre(x, m, a, b);

	if (act == CDP_ACT_RELU)
		return v < 0.0f ? 0.0f : v;
	if (act == CDP_ACT_LEAKY)
		return v < 0.0f ? cdk_mul(v, slope) : v;
	return v;
}

/* Sums each of v[0..M) over the block, in a fixed order: a shuffle tree in
 * each warp, then one over the warps' sums. Every thread must call it
 * (blockDim.x == CDK_THREADS); the sums are valid in thread 0. */
template <int M>
static __device__ void cdk_block_sum(double v[M])
{
	__shared__ double warp[M][CDK_THREADS / 32];
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;

	for (int j = 0; j < M; j++)
		for (int o = 16; o > 0; o >>= 1)
			v[j] += __shfl_down_sync(0xffffffffu, v[j], o);
	if (lane == 0)
		for (int j = 0; j < M; j++)
			warp[j][wid] = v[j];
	__syncthreads();
	if (wid == 0) {
		for (int j = 0; j < M; j++) {
			v[j] = lane < CDK_THREADS / 32 ? warp[j][lane] : 0.0;
			for (int o = 16; o > 0; o >>= 1)
				v[j] += __shfl_down_sync(0xffffffffu, v[j], o);
		}
	}
	/* warp[] may be used again by a later call in the same kernel */
	__syncthreads();
}

/* Second pass: out[j] = sum over the g blocks of part[b*M + j], one block. */
template <int M>
static __global__ void cdk_sum_parts(const double *part, unsigned g, double *out)
{
	double v[M];

	for (int j = 0; j < M; j++)
		v[j] = 0.0;
	for (unsigned b = threadIdx.x; b < g; b += CDK_THREADS)
		for (int j = 0; j < M; j++)
			v[j] += part[(size_t)b * M + j];
	cdk_block_sum<M>(v);
	if (threadIdx.x == 0)
		for (int j = 0; j < M; j++)
			out[j] = v[j];
}

/* The partials area of the backend's scratch buffer. */
static inline double *cdk_parts(void *scratch)
{
	return (double *)scratch + CDK_RED_HEAD;
}

#endif
