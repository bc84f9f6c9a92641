/* cuda_ops.c: the CUDA backend's GEMM (cuBLAS) and every op that is one of
 * our kernels (cuda_kern.h): the BLAS-like ops, upsampling, concat slices,
 * dropout, global average pooling, bias, add, diff, cdp-predict's window gather
 * and blend, losses, argmax, confusion
 * and the optimizers.
 *
 * Each op queues its kernel on the compute stream and checks the launch.
 * Ops that return a value (sumsq, the losses) or fill host memory
 * (confusion) copy a few bytes back and wait for the stream. Reductions
 * use the backend's one scratch buffer (cu_scratch), sized for the
 * largest reduction seen so far: it is grown when conv_workspace() sees
 * the net's shapes and, failing that, on the first step that needs more.
 */
#include <config.h>
#include <math.h>
#include <string.h>
#include "cuda.h"
#include "cuda_kern.h"

/* ---- GEMM ---- */

/* fp32 stays IEEE float32 (CUBLAS_COMPUTE_32F, default math: no TF32);
 * tf32 allows TF32 tensor cores; bf16/fp16 let cuBLAS round the float32
 * inputs to bf16/fp16 for the tensor cores and accumulate in float32.
 * cuBLAS's cublasComputeType_t: the FAST_* types "allow the library to use
 * Tensor Cores with automatic down-conversion ... for 32-bit input and
 * output matrices" (CUDA_R_32F A, B, C as here: allow, so it may also stay
 * in float32); CUBLAS_DEFAULT_MATH keeps "at least the same number of
 * mantissa and exponent bits as requested", so COMPUTE_32F gets no TF32.
 * alpha and beta are host floats (the default CUBLAS_POINTER_MODE_HOST);
 * with beta 0 cuBLAS does not read C, as on the CPU. */
static cublasComputeType_t gemm_compute(int prec)
{
	switch (prec) {
	case CDP_PREC_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
	case CDP_PREC_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
	case CDP_PREC_FP16: return CUBLAS_COMPUTE_32F_FAST_16F;
	default:            return CUBLAS_COMPUTE_32F;
	}
}

/* Row-major C (M,N) = alpha op(A) op(B) + beta C. cuBLAS is column-major:
 * a row-major matrix with leading dimension ld is its transpose in column
 * major, so compute C^T (N,M) = op(B)^T op(A)^T, i.e. swap the operands
 * and the sizes and keep the transpose flags. */
static void cu_gemm(cdp_backend *be, int ta, int tb, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb,
                    float beta, float *c, int ldc)
{
	cu_impl *im = cu_im(be);
	const float zero = 0.0f;

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0) {
		/* an empty product: C = beta C, with C not read when beta is 0 */
		if (beta == 0.0f)
			CDP_CUDA_CHECK(cudaMemset2DAsync(c, (size_t)ldc * sizeof *c, 0,
			                                 (size_t)n * sizeof *c, (size_t)m, im->comp));
		else if (beta != 1.0f)
			CDP_CUBLAS_CHECK(cublasSgeam(im->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m,
			                             &beta, c, ldc, &zero, c, ldc, c, ldc));
		return;
	}
	CDP_CUBLAS_CHECK(cublasGemmEx(im->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
	                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
	                              b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta,
	                              c, CUDA_R_32F, ldc, gemm_compute(be->precision),
	                              CUBLAS_GEMM_DEFAULT));
}

/* ---- BLAS-like ---- */

static void cu_fill(cdp_backend *be, float *x, float v, size_t n)
{
	cudaStream_t s = cu_im(be)->comp;

	if (n == 0)
		return;
	if (v == 0.0f && !signbit(v)) {         /* +0.0 is all zero bytes */
		CDP_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof *x, s));
		return;
	}
	cdk_fill(s, x, v, n);
	CDP_KERNEL_CHECK();
}

static void cu_scale(cdp_backend *be, float *x, float a, size_t n)
{
	if (n == 0)
		return;
	cdk_scale(cu_im(be)->comp, x, a, n);
	CDP_KERNEL_CHECK();
}

static void cu_axpy(cdp_backend *be, float a, const float *x, float *y, size_t n)
{
	if (n == 0)
		return;
	cdk_axpy(cu_im(be)->comp, a, x, y, n);
	CDP_KERNEL_CHECK();
}

/* the bf16 stash (backend.h): cuda_kern_prec.cu's plain conversions, whose
 * __float2bfloat16_rn rounds to nearest even as the CPU's does */
static void cu_to_bf16(cdp_backend *be, const float *x, uint16_t *y, size_t n)
{
	if (n == 0)
		return;
	cdk_to_half(cu_im(be)->comp, CDP_PREC_BF16, x, y, n);
	CDP_KERNEL_CHECK();
}

static void cu_from_bf16(cdp_backend *be, const uint16_t *x, float *y, size_t n)
{
	if (n == 0)
		return;
	cdk_from_half(cu_im(be)->comp, CDP_PREC_BF16, x, y, 0.0f, n);
	CDP_KERNEL_CHECK();
}

static double cu_sumsq(cdp_backend *be, const float *x, size_t n)
{
	cu_impl *im = cu_im(be);

	if (n == 0)
		return 0.0;
	cdk_sumsq(im->comp, x, n, cu_scratch(be, n), im->dres);
	CDP_KERNEL_CHECK();
	cu_fetch_results(be);
	return im->hres[0];
}

/* ---- layer ops on our kernels ---- */

static void cu_upsample_fwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh,
                            int ow, const float *x, float *y)
{
	if ((size_t)n * c * h * w == 0)
		return;
	cdk_upsample_fwd(cu_im(be)->comp, mode, n, c, h, w, oh, ow, x, y);
	CDP_KERNEL_CHECK();
}

static void cu_upsample_bwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh,
                            int ow, const float *dy, float *dx, float beta)
{
	if ((size_t)n * c * h * w == 0)
		return;
	cdk_upsample_bwd(cu_im(be)->comp, mode, n, c, h, w, oh, ow, dy, dx, beta);
	CDP_KERNEL_CHECK();
}

static void cu_chan_copy(cdp_backend *be, int n, int c, int hw, const float *src,
                         float *dst, int dst_c, int dst_off, float beta)
{
	if ((size_t)n * c * hw == 0)
		return;
	cdk_chan_copy(cu_im(be)->comp, n, c, hw, src, dst, dst_c, dst_off, beta);
	CDP_KERNEL_CHECK();
}

static void cu_chan_slice(cdp_backend *be, int n, int c, int hw, const float *src,
                          int src_c, int src_off, float *dst, float beta)
{
	if ((size_t)n * c * hw == 0)
		return;
	cdk_chan_slice(cu_im(be)->comp, n, c, hw, src, src_c, src_off, dst, beta);
	CDP_KERNEL_CHECK();
}

static void cu_dropout_fwd(cdp_backend *be, float p, uint64_t seed, const float *x, float *y,
                           uint8_t *mask, size_t n)
{
	if (n == 0)
		return;
	cdk_dropout_fwd(cu_im(be)->comp, p, seed, x, y, mask, n);
	CDP_KERNEL_CHECK();
}

static void cu_dropout_bwd(cdp_backend *be, float p, const uint8_t *mask, const float *dy,
                           float *dx, float beta, size_t n)
{
	if (n == 0)
		return;
	cdk_dropout_bwd(cu_im(be)->comp, p, mask, dy, dx, beta, n);
	CDP_KERNEL_CHECK();
}

static void cu_gap_fwd(cdp_backend *be, int n, int c, int hw, const float *x, float *y)
{
	if ((size_t)n * c * hw == 0)
		return;
	cdk_gap_fwd(cu_im(be)->comp, n, c, hw, x, y);
	CDP_KERNEL_CHECK();
}

static void cu_gap_bwd(cdp_backend *be, int n, int c, int hw, const float *dy, float *dx,
                       float beta)
{
	if ((size_t)n * c * hw == 0)
		return;
	cdk_gap_bwd(cu_im(be)->comp, n, c, hw, dy, dx, beta);
	CDP_KERNEL_CHECK();
}

static void cu_bias_add(cdp_backend *be, int n, int f, int hw, const float *bias, float *y)
{
	if ((size_t)n * f * hw == 0)
		return;
	cdk_bias_add(cu_im(be)->comp, n, f, hw, bias, y);
	CDP_KERNEL_CHECK();
}

static void cu_bias_grad(cdp_backend *be, int n, int f, int hw, const float *dy, float *dbias)
{
	size_t count = (size_t)n * f * hw;

	if (count == 0)
		return;
	cdk_bias_grad(cu_im(be)->comp, n, f, hw, dy, dbias, cu_scratch(be, count));
	CDP_KERNEL_CHECK();
}

static void cu_add(cdp_backend *be, const float *a, const float *b, float *y, size_t n)
{
	if (n == 0)
		return;
	cdk_add(cu_im(be)->comp, a, b, y, n);
	CDP_KERNEL_CHECK();
}

static void cu_diff_fwd(cdp_backend *be, int absval, const float *a, const float *b, float *y,
                        size_t n)
{
	if (n == 0)
		return;
	cdk_diff_fwd(cu_im(be)->comp, absval, a, b, y, n);
	CDP_KERNEL_CHECK();
}

static void cu_diff_bwd(cdp_backend *be, int absval, const float *a, const float *b,
                        const float *dy, float sign, float *dx, float beta, size_t n)
{
	if (n == 0)
		return;
	cdk_diff_bwd(cu_im(be)->comp, absval, a, b, dy, sign, dx, beta, n);
	CDP_KERNEL_CHECK();
}

/* ---- cdp-predict's sliding windows ---- */

static void cu_win_gather(cdp_backend *be, int c, int r, int w, int s, const float *strip,
                          const int32_t *srow, int nb, const int32_t *x0, float *x)
{
	if ((size_t)(nb > 0 ? nb : 0) * (c > 0 ? c : 0) * (s > 0 ? s : 0) == 0)
		return;
	cdk_win_gather(cu_im(be)->comp, c, r, w, s, strip, srow, nb, x0, x);
	CDP_KERNEL_CHECK();
}

static void cu_win_blend(cdp_backend *be, int k, int s, int w, int nb, const float *logits,
                         const int32_t *x0, const float *w1, float *sum)
{
	if (nb <= 0 || k == 0 || s <= 0 || w <= 0)
		return;
	cdk_win_blend(cu_im(be)->comp, k, s, w, nb, logits, x0, w1, sum);
	CDP_KERNEL_CHECK();
}

/* ---- losses and metrics: the sums come back through dres ---- */

/* After a loss launcher: its sum, and its count into *count. */
static double cu_sum_count(cdp_backend *be, double *count)
{
	cu_impl *im = cu_im(be);

	CDP_KERNEL_CHECK();
	cu_fetch_results(be);
	*count = im->hres[1];
	return im->hres[0];
}

static double cu_softmax_ce(cdp_backend *be, int n, int k, int hw, const float *logits,
                            const int32_t *labels, int ignore, const float *class_w,
                            float *dlogits, float gscale, double *count)
{
	cu_impl *im = cu_im(be);
	size_t elems = (size_t)n * k * hw;

	*count = 0.0;
	if (elems == 0)
		return 0.0;
	cdk_softmax_ce(im->comp, n, k, hw, logits, labels, ignore, class_w, dlogits, gscale,
	               cu_scratch(be, elems), im->dres);
	return cu_sum_count(be, count);
}

static double cu_bce_logits(cdp_backend *be, int n, int hw, const float *logits,
                            const int32_t *labels, int ignore, float *dlogits,
                            float gscale, double *count)
{
	cu_impl *im = cu_im(be);
	size_t elems = (size_t)n * hw;

	*count = 0.0;
	if (elems == 0)
		return 0.0;
	cdk_bce_logits(im->comp, n, hw, logits, labels, ignore, dlogits, gscale,
	               cu_scratch(be, elems), im->dres);
	return cu_sum_count(be, count);
}

static double cu_reg_loss(cdp_backend *be, int kind, int n, int t, int hw, const float *pred,
                          const float *target, float delta, float *dpred, float gscale,
                          double *count)
{
	cu_impl *im = cu_im(be);
	size_t elems = (size_t)n * t * hw;

	*count = 0.0;
	if (elems == 0)
		return 0.0;
	cdk_reg_loss(im->comp, kind, elems, pred, target, delta, dpred, gscale,
	             cu_scratch(be, elems), im->dres);
	return cu_sum_count(be, count);
}

static double cu_dice_logits(cdp_backend *be, int n, int hw, const float *logits,
                             const int32_t *labels, int ignore, float smooth, const double *tot,
                             float *dlogits, float gscale)
{
	cu_impl *im = cu_im(be);
	size_t elems = (size_t)n * hw;
	double d = tot ? tot[1] + tot[2] + smooth : 0;

	if (elems == 0)
		return tot && d > 0 ? 1.0 - (2 * tot[0] + smooth) / d : 0.0;
	cdk_dice_logits(im->comp, n, hw, logits, labels, ignore, smooth, tot, dlogits, gscale,
	                cu_scratch(be, elems), im->dres);
	CDP_KERNEL_CHECK();
	if (tot)
		return d > 0 ? 1.0 - (2 * tot[0] + smooth) / d : 0.0;
	cu_fetch_results(be);
	return im->hres[0];
}

/* the three totals land in the scratch's head (dres holds two) */
static void cu_dice_sums(cdp_backend *be, int n, int hw, const float *logits,
                         const int32_t *labels, int ignore, double tot[3])
{
	cu_impl *im = cu_im(be);
	size_t elems = (size_t)n * hw;
	double *dev;

	tot[0] = tot[1] = tot[2] = 0;
	if (elems == 0)
		return;
	dev = cu_scratch(be, elems);
	cdk_dice_sums(im->comp, n, hw, logits, labels, ignore, dev, dev);
	CDP_KERNEL_CHECK();
	CDP_CUDA_CHECK(cudaMemcpyAsync(tot, dev, 3 * sizeof(double), cudaMemcpyDeviceToHost,
	                               im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
}

static void cu_argmax(cdp_backend *be, int n, int k, int hw, const float *logits, int32_t *pred)
{
	if ((size_t)n * k * hw == 0)
		return;
	cdk_argmax(cu_im(be)->comp, n, k, hw, logits, pred);
	CDP_KERNEL_CHECK();
}

/* conf_host (K*K, host) += the counts, made on the device from zero. */
static void cu_confusion(cdp_backend *be, int n_elems, int k, const int32_t *labels,
                         const int32_t *pred, int ignore, uint64_t *conf_host)
{
	cu_impl *im = cu_im(be);
	size_t kk = (size_t)k * k, bytes = kk * sizeof(uint64_t);

	if (n_elems <= 0 || k <= 0)
		return;
	cu_buf_reserve(be, &im->conf, bytes);
	if (im->hconf_n < kk) {
		/* the previous fetch into hconf ended with a stream sync;
		 * cudaFreeHost documents no NULL case (the first call has none) */
		if (im->hconf)
			CDP_CUDA_CHECK(cudaFreeHost(im->hconf));
		im->hconf = NULL;
		im->hconf_n = 0;
		CDP_CUDA_CHECK(cudaHostAlloc((void **)&im->hconf, bytes, cudaHostAllocPortable));
		im->hconf_n = kk;
	}
	CDP_CUDA_CHECK(cudaMemsetAsync(im->conf.p, 0, bytes, im->comp));
	cdk_confusion(im->comp, n_elems, k, labels, pred, ignore, im->conf.p);
	CDP_KERNEL_CHECK();
	CDP_CUDA_CHECK(cudaMemcpyAsync(im->hconf, im->conf.p, bytes, cudaMemcpyDeviceToHost,
	                               im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	for (size_t i = 0; i < kk; i++)
		conf_host[i] += im->hconf[i];
}

/* ---- optimizers ---- */

static void cu_sgd_step(cdp_backend *be, float *w, const float *g, float *v, size_t n,
                        float lr, float mu, float wd, int nesterov, int first)
{
	if (n == 0)
		return;
	cdk_sgd_step(cu_im(be)->comp, w, g, v, n, lr, mu, wd, nesterov, first);
	CDP_KERNEL_CHECK();
}

static void cu_adamw_step(cdp_backend *be, float *w, const float *g, float *m, float *v,
                          size_t n, float lr, float b1, float b2, float eps, float wd, long t)
{
	if (n == 0)
		return;
	cdk_adamw_step(cu_im(be)->comp, w, g, m, v, n, lr, b1, b2, eps, wd, t);
	CDP_KERNEL_CHECK();
}

void cu_ops_init(cdp_backend *be)
{
	be->gemm = cu_gemm;
	be->fill = cu_fill;
	be->scale = cu_scale;
	be->axpy = cu_axpy;
	be->sumsq = cu_sumsq;
	be->to_bf16 = cu_to_bf16;
	be->from_bf16 = cu_from_bf16;

	be->upsample_fwd = cu_upsample_fwd;
	be->upsample_bwd = cu_upsample_bwd;
	be->chan_copy = cu_chan_copy;
	be->chan_slice = cu_chan_slice;
	be->dropout_fwd = cu_dropout_fwd;
	be->dropout_bwd = cu_dropout_bwd;
	be->gap_fwd = cu_gap_fwd;
	be->gap_bwd = cu_gap_bwd;
	be->bias_add = cu_bias_add;
	be->bias_grad = cu_bias_grad;
	be->add = cu_add;
	be->diff_fwd = cu_diff_fwd;
	be->diff_bwd = cu_diff_bwd;
	be->win_gather = cu_win_gather;
	be->win_blend = cu_win_blend;

	be->softmax_ce = cu_softmax_ce;
	be->bce_logits = cu_bce_logits;
	be->dice_logits = cu_dice_logits;
	be->dice_sums = cu_dice_sums;
	be->reg_loss = cu_reg_loss;
	be->argmax = cu_argmax;
	be->confusion = cu_confusion;

	be->sgd_step = cu_sgd_step;
	be->adamw_step = cu_adamw_step;
}
