/* cuda_kern_bn.cu: batchnorm's training forward and backward (backend.h
 * bn_fwd_train, bn_fwd_train_h, bn_bwd) in cpu_bn.c's arithmetic, over a
 * (channel, part) grid.
 *
 * Why not cuDNN's: its NCHW batchnorm (cudnnBatchNormalization*, the
 * legacy API, which wants NHWC for its fast kernels) took 4.1 ms forward
 * and 11.4 ms backward for 32 channels of 32x512^2 floats on an H200
 * (doc/PERFORMANCE.md), 0.5-0.8 TB/s where the card copies at 4.3, and a
 * separate pass for the activation each way. Here each channel's N*HW
 * values are split into parts of BN_CHUNK for the sums, so that a layer of
 * 32 channels still fills the GPU, and the activation rides in the passes:
 *   forward   stats_k  (C, parts) blocks: shifted sums of x in double
 *             fin_k    one block per channel: the parts added in order,
 *                      mean, invstd, running statistics (cpu_bn.c's
 *                      bn_train_chan, every float operation rounded alone)
 *             apply_k  y = act((x - m) * a + b), a = gamma * invstd; with
 *                      the stash's bf16 copies of x and y in the same pass
 *   backward  gsum_k   (C, parts): sums of g and g * (x - m) * invstd,
 *                      g = dy through the activation's mask, which comes
 *                      from bn(x) computed again (as the CPU does: y is not
 *                      read, dy is not written)
 *             gfin_k   per channel: dgamma, dbeta += the sums; their means
 *             dx_k     dx (+)= a * (g - mean g - (x - m) invstd mean gx)
 * Shapes NCHW float (hw = H*W, m = N*hw values per channel); the sums are
 * in double in a fixed order, so a rerun gives the same bits. Scratch:
 * cdk_bn_scratch_bytes(c).
 */
#include <math.h>
#include <cuda_bf16.h>
#include "cuda_kern_int.cuh"

#define BN_CHUNK 4096     /* values of one channel per block of a first pass */

/* partials the scratch holds: CDK_RED_PARTS blocks, or C of one part */
static size_t bn_blocks(int c)
{
	return (size_t)c > CDK_RED_PARTS ? (size_t)c : CDK_RED_PARTS;
}

/* parts per channel: m / BN_CHUNK, at most CDK_RED_PARTS blocks in all
 * (one part per channel when C exceeds that) */
static unsigned bn_parts(int c, size_t m)
{
	size_t p = (m + BN_CHUNK - 1) / BN_CHUNK, cap = CDK_RED_PARTS / (size_t)c;

	if (p > cap)
		p = cap;
	return p < 1 ? 1 : (unsigned)p;
}

size_t cdk_bn_scratch_bytes(int c)
{
	/* the head, 2 doubles per block, then 2C floats of per-channel results */
	return (CDK_RED_HEAD + 2 * bn_blocks(c)) * sizeof(double) + 2 * (size_t)c * sizeof(float);
}

/* the per-channel floats after the partials */
static float *bn_chan(void *scratch, int c)
{
	return (float *)(cdk_parts(scratch) + 2 * bn_blocks(c));
}

/* value j of channel ch's n*hw: sample j / hw, position j % hw */
static __device__ __forceinline__ size_t bn_at(size_t j, int c, int ch, unsigned hw)
{
	size_t i, nn = cdk_divmod(j, hw, &i);

	return (nn * (size_t)c + ch) * hw + i;
}

/* the gradient before the activation from p = bn(x), cpu_bn.c's grad1 */
static __host__ __device__ __forceinline__ float bn_grad(int act, float slope, float p, float g)
{
	if (act == CDP_ACT_RELU)
		return p <= 0.0f ? 0.0f : g;
	if (act == CDP_ACT_LEAKY)
		return p > 0.0f ? g : cdk_mul(g, slope);
	return g;
}

/* block (ch, b)'s two sums v over the block to part (2 doubles per
 * (ch, b)); every thread of the block calls it */
static __device__ void put_part(double *part, int ch, int parts, double v[2])
{
	cdk_block_sum<2>(v);
	if (threadIdx.x == 0) {
		part[2 * ((size_t)ch * parts + blockIdx.y)] = v[0];
		part[2 * ((size_t)ch * parts + blockIdx.y) + 1] = v[1];
	}
}

/* block (ch, b): sums of x - k and its square over channel ch's values
 * [b*chunk, (b+1)*chunk), k = the channel's first value (cpu_bn.c's shift) */
static __global__ void stats_k(int c, unsigned hw, size_t m, size_t chunk, const float *x,
                               double *part)
{
	int ch = blockIdx.x, parts = gridDim.y;
	size_t lo = blockIdx.y * chunk, hi = lo + chunk < m ? lo + chunk : m;
	double v[2] = { 0.0, 0.0 }, k = x[(size_t)ch * hw];

	for (size_t j = lo + threadIdx.x; j < hi; j += CDK_THREADS) {
		double d = (double)x[bn_at(j, c, ch, hw)] - k;
		v[0] += d;
		v[1] += d * d;
	}
	put_part(part, ch, parts, v);
}

/* v = channel ch's two sums: its parts added in a fixed order (valid in
 * thread 0; every thread of the block calls it) */
static __device__ void chan_sums(const double *part, int ch, int parts, double v[2])
{
	v[0] = v[1] = 0.0;
	for (int b = threadIdx.x; b < parts; b += CDK_THREADS) {
		v[0] += part[2 * ((size_t)ch * parts + b)];
		v[1] += part[2 * ((size_t)ch * parts + b) + 1];
	}
	cdk_block_sum<2>(v);
}

/* block ch: the statistics of bn_train_chan from the parts' sums; mean and
 * invstd to mo, io (save_* or the scratch's) */
static __global__ void fin_k(int c, unsigned hw, size_t m, int parts, const double *part,
                             const float *x, float momentum, float eps, float *run_mean,
                             float *run_var, float *mo, float *io)
{
	int ch = blockIdx.x;
	double v[2];

	chan_sums(part, ch, parts, v);
	if (threadIdx.x != 0)
		return;
	double d = v[0] / (double)m;

	cdk_bn_stats(x[(size_t)ch * hw], d, v[1] / (double)m - d * d, m, eps, momentum, run_mean,
	             run_var, (size_t)ch, &mo[ch], &io[ch]);
}

/* y = act(bn(x)), and the bf16 copies of x and y where not NULL */
static __global__ void apply_k(size_t len, int c, unsigned hw, const float *x,
                               const float *gamma, const float *beta, const float *mean,
                               const float *invstd, int act, float slope, float *y,
                               __nv_bfloat16 *xh, __nv_bfloat16 *yh)
{
	CDK_FOR_EACH(i, len) {
		size_t r, t = cdk_divmod(i, hw, &r);
		int ch = (int)(t % (size_t)c);
		float xv = x[i];
		float v = cdk_bn_out(xv, mean[ch], cdk_mul(gamma[ch], invstd[ch]), beta[ch], act, slope);
		y[i] = v;
		if (xh)
			xh[i] = __float2bfloat16_rn(xv);
		if (yh)
			yh[i] = __float2bfloat16_rn(v);
	}
}

void cdk_bn_train(cudaStream_t s, int n, int c, int hw, const float *x, const float *gamma,
                  const float *beta, float *y, uint16_t *xh, uint16_t *yh, float *run_mean,
                  float *run_var, float momentum, float eps, float *save_mean,
                  float *save_invstd, int act, float slope, void *scratch)
{
	size_t m = (size_t)n * hw, len = m * (size_t)c;
	unsigned parts;
	float *mo = save_mean, *io = save_invstd;

	if (len == 0)
		return;
	parts = bn_parts(c, m);
	if (!mo || !io) {
		mo = bn_chan(scratch, c);
		io = mo + c;
	}
	dim3 grid((unsigned)c, parts);
	stats_k<<<grid, CDK_THREADS, 0, s>>>(c, (unsigned)hw, m, (m + parts - 1) / parts, x,
	                                      cdk_parts(scratch));
	CDK_CHECK_LAUNCH();
	fin_k<<<(unsigned)c, CDK_THREADS, 0, s>>>(c, (unsigned)hw, m, (int)parts, cdk_parts(scratch),
	                                          x, momentum, eps, run_mean, run_var, mo, io);
	CDK_CHECK_LAUNCH();
	apply_k<<<cdk_grid(len), CDK_THREADS, 0, s>>>(len, c, (unsigned)hw, x, gamma, beta, mo, io,
	                                              act, slope, y, (__nv_bfloat16 *)xh,
	                                              (__nv_bfloat16 *)yh);
	CDK_CHECK_LAUNCH();
}

/* block (ch, b): sums of g and g * (x - m) * invstd, g through the mask */
static __global__ void gsum_k(int c, unsigned hw, size_t m, size_t chunk, const float *x,
                              const float *dy, const float *gamma, const float *beta,
                              const float *mean, const float *invstd, int act, float slope,
                              double *part)
{
	int ch = blockIdx.x, parts = gridDim.y;
	size_t lo = blockIdx.y * chunk, hi = lo + chunk < m ? lo + chunk : m;
	double v[2] = { 0.0, 0.0 };
	float mu = mean[ch], is = invstd[ch], a = cdk_mul(gamma[ch], is), b = act ? beta[ch] : 0.0f;

	for (size_t j = lo + threadIdx.x; j < hi; j += CDK_THREADS) {
		size_t o = bn_at(j, c, ch, hw);
		float xv = x[o], g = dy[o];
		if (act)
			g = bn_grad(act, slope, cdk_bn_pre(xv, mu, a, b), g);
		v[0] += g;
		v[1] += (double)g * cdk_mul(cdk_sub(xv, mu), is);
	}
	put_part(part, ch, parts, v);
}

/* block ch: dgamma, dbeta += the sums (as floats, as the CPU adds them);
 * the sums' means to mg (2C: mean g, then mean g x-hat) */
static __global__ void gfin_k(int c, size_t m, int parts, const double *part, float *dgamma,
                              float *dbeta, float *mg)
{
	int ch = blockIdx.x;
	double v[2];

	chan_sums(part, ch, parts, v);
	if (threadIdx.x != 0)
		return;
	mg[ch] = (float)(v[0] / (double)m);
	mg[ch + c] = (float)(v[1] / (double)m);
	dgamma[ch] = cdk_add(dgamma[ch], (float)v[1]);
	dbeta[ch] = cdk_add(dbeta[ch], (float)v[0]);
}

static __global__ void dx_k(size_t len, int c, unsigned hw, const float *x, const float *dy,
                            const float *gamma, const float *beta, const float *mean,
                            const float *invstd, const float *mg, int act, float slope,
                            float *dx, float dxbeta)
{
	CDK_FOR_EACH(i, len) {
		size_t r, t = cdk_divmod(i, hw, &r);
		int ch = (int)(t % (size_t)c);
		float mu = mean[ch], is = invstd[ch], a = cdk_mul(gamma[ch], is), xv = x[i], g = dy[i];
		if (act)
			g = bn_grad(act, slope, cdk_bn_pre(xv, mu, a, beta[ch]), g);
		float v = cdk_sub(cdk_sub(g, mg[ch]), cdk_mul(cdk_mul(cdk_sub(xv, mu), is), mg[ch + c]));
		cdk_put(&dx[i], cdk_mul(a, v), dxbeta);
	}
}

void cdk_bn_bwd(cudaStream_t s, int n, int c, int hw, const float *x, const float *dy,
                const float *gamma, const float *beta, const float *mean, const float *invstd,
                int act, float slope, float *dx, float dxbeta, float *dgamma, float *dbeta,
                void *scratch)
{
	size_t m = (size_t)n * hw, len = m * (size_t)c;
	unsigned parts;
	float *mg = bn_chan(scratch, c);

	if (len == 0)
		return;
	parts = bn_parts(c, m);
	dim3 grid((unsigned)c, parts);
	gsum_k<<<grid, CDK_THREADS, 0, s>>>(c, (unsigned)hw, m, (m + parts - 1) / parts, x, dy,
	                                     gamma, beta, mean, invstd, act, slope,
	                                     cdk_parts(scratch));
	CDK_CHECK_LAUNCH();
	gfin_k<<<(unsigned)c, CDK_THREADS, 0, s>>>(c, m, (int)parts, cdk_parts(scratch), dgamma,
	                                           dbeta, mg);
	CDK_CHECK_LAUNCH();
	dx_k<<<cdk_grid(len), CDK_THREADS, 0, s>>>(len, c, (unsigned)hw, x, dy, gamma, beta, mean,
	                                           invstd, mg, act, slope, dx, dxbeta);
	CDK_CHECK_LAUNCH();
}
