/* cuda_kern_pool.cu: max pooling with argmax indices, the CUDA twin of
 * cpu_ops.c's maxpool, for where cuDNN's pooling does not fit (e.g. when
 * a tie must go to the first maximum, as on the CPU).
 *
 * x (N,C,H,W) -> y (N,C,OH,OW) and idx (N,C,OH,OW) int32, the argmax as
 * h*W + w within its (H,W) plane. Windows are k x k at `stride`, padded by
 * `pad` with -inf (pad <= k/2, so every window meets the image). The first
 * maximum in row-major window order wins, and the first NaN wins over
 * everything, as in PyTorch.
 *
 * Backward gathers: one thread per input pixel adds dy of every window
 * whose idx names it, in row-major window order, as cpu_ops.c's scatter
 * does, so overlapping windows need no atomics and the sums agree with the
 * CPU bit for bit. Launch shapes: grid-stride loops over the outputs
 * (forward) or the inputs (backward), cdk_grid blocks of CDK_THREADS.
 */
#include <math.h>
#include "cuda_kern_int.cuh"

/* output (oh, ow) of the (H, W) plane x: writes *best and returns its index */
static __host__ __device__ inline int32_t pool_fwd1(const cdp_pool_desc d, const float *x,
                                                    int oh, int ow, float *best)
{
	int h0 = oh * d.stride - d.pad, h1 = h0 + d.k;
	int w0 = ow * d.stride - d.pad, w1 = w0 + d.k;

	if (h0 < 0) h0 = 0;
	if (h1 > d.h) h1 = d.h;
	if (w0 < 0) w0 = 0;
	if (w1 > d.w) w1 = d.w;
	float b = -INFINITY;
	int32_t bi = h0 * d.w + w0;
	for (int h = h0; h < h1; h++)
		for (int w = w0; w < w1; w++) {
			float v = x[h * d.w + w];
			if (v > b || v != v) {
				b = v;
				bi = h * d.w + w;
				if (v != v)
					goto found;
			}
		}
found:
	*best = b;
	return bi;
}

/* acc + dy of every window whose argmax is input pixel (h, w); dy, idx:
 * the (OH, OW) planes of its (n, c). The windows holding row h are
 * oh in [ceil((h + pad - k + 1) / stride), floor((h + pad) / stride)]. */
static __host__ __device__ inline float pool_bwd1(const cdp_pool_desc d, const float *dy,
                                                  const int32_t *idx, int h, int w, float acc)
{
	int lo_h = h + d.pad - d.k + 1, lo_w = w + d.pad - d.k + 1;
	int oh0 = lo_h <= 0 ? 0 : (lo_h + d.stride - 1) / d.stride;
	int ow0 = lo_w <= 0 ? 0 : (lo_w + d.stride - 1) / d.stride;
	int oh1 = (h + d.pad) / d.stride, ow1 = (w + d.pad) / d.stride;
	int32_t me = h * d.w + w;

	if (oh1 > d.oh - 1) oh1 = d.oh - 1;
	if (ow1 > d.ow - 1) ow1 = d.ow - 1;
	for (int oh = oh0; oh <= oh1; oh++)
		for (int ow = ow0; ow <= ow1; ow++)
			if (idx[oh * d.ow + ow] == me)
				acc = cdk_add(acc, dy[oh * d.ow + ow]);
	return acc;
}

static __global__ void pool_fwd_k(const cdp_pool_desc d, size_t len, const float *x, float *y,
                                  int32_t *idx)
{
	size_t ohw = (size_t)d.oh * d.ow, hw = (size_t)d.h * d.w;

	CDK_FOR_EACH(i, len) {
		size_t r, t = cdk_divmod(i, (unsigned)ohw, &r);
		idx[i] = pool_fwd1(d, x + t * hw, (int)(r / d.ow), (int)(r % d.ow), &y[i]);
	}
}

static __global__ void pool_bwd_k(const cdp_pool_desc d, size_t len, const float *dy,
                                  const int32_t *idx, float *dx, float beta)
{
	size_t ohw = (size_t)d.oh * d.ow, hw = (size_t)d.h * d.w;

	CDK_FOR_EACH(i, len) {
		size_t r, t = cdk_divmod(i, (unsigned)hw, &r);
		float acc = beta == 0.0f ? 0.0f : cdk_mul(beta, dx[i]);
		dx[i] = pool_bwd1(d, dy + t * ohw, idx + t * ohw, (int)(r / d.w), (int)(r % d.w), acc);
	}
}

void cdk_maxpool_fwd(cudaStream_t s, const cdp_pool_desc *d, const float *x, float *y, int32_t *idx)
{
	size_t len = (size_t)d->n * d->c * d->oh * d->ow;

	if (len == 0)
		return;
	pool_fwd_k<<<cdk_grid(len), CDK_THREADS, 0, s>>>(*d, len, x, y, idx);
	CDK_CHECK_LAUNCH();
}

void cdk_maxpool_bwd(cudaStream_t s, const cdp_pool_desc *d, const float *dy, const int32_t *idx,
                     float *dx, float beta)
{
	size_t len = (size_t)d->n * d->c * d->h * d->w;

	if (len == 0)
		return;
	pool_bwd_k<<<cdk_grid(len), CDK_THREADS, 0, s>>>(*d, len, dy, idx, dx, beta);
	CDK_CHECK_LAUNCH();
}
