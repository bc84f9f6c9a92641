/* cuda_dnn.c: batchnorm and pooling on cuDNN, and the activations on our
 * kernels (cuDNN lacks leaky ReLU, and its ReLU's NaN rule is undocumented).
 *
 * The descriptors are set per call from the op's shapes (host-side work
 * of a microsecond); all tensors are NCHW float32 in every precision.
 *
 * Batchnorm is CUDNN_BATCHNORM_SPATIAL: statistics per channel over
 * (N, H, W), viewed as (N, C, 1, HW). cuDNN's definitions are PyTorch's:
 * running = (1 - factor) running + factor batch with factor = momentum
 * (cudnn_ops.h: "runningMean = newMean*factor + runningMean*(1-factor)"),
 * the running variance unbiased (PyTorch's cudnn_batch_norm passes its
 * momentum and running_var to cuDNN unchanged), the saved statistics mean
 * and 1/sqrt(var + eps) (backend.h's save_mean, save_invstd). The fused
 * activation of the bn ops is cuDNN's batchnorm followed by our activation
 * kernel on its output (cuDNN's own fused mode, CUDNN_BATCHNORM_OPS_BN_ACTIVATION
 * of the *Ex calls deprecated in cuDNN 9, is documented for NHWC half-
 * precision tensors only); in backward the activation's gradient is
 * written over dy, which backend.h allows, and cuDNN's batchnorm backward
 * reads it from there. A training forward over one value per channel
 * (N*H*W = 1) is our kernel (cdk_bn_train1), as the CPU computes it: the
 * batch variance 0 also for the running one, where cuDNN's unbiased
 * estimate would divide by zero. Its backward stays cuDNN's (the batch
 * statistics are finite: dx = 0, dgamma = 0, dbeta = dy).
 *
 * Max pooling is CUDNN_POOLING_MAX_DETERMINISTIC with NaN propagation;
 * padding never wins. Its backward finds the maximum again from x and y
 * (the argmax index of backend.h is not needed); where several inputs tie
 * one of them gets the gradient, as backend.h allows (cuDNN gives it to
 * one input only: Theano issues #5248, #5404 compare the conventions).
 * Average pooling counts the padding (PyTorch's count_include_pad=True):
 * with floor-mode output sizes no window reaches past the padded image, so
 * cuDNN's divisor k*k is PyTorch's.
 *
 * cuDNN describes a tensor with int sizes and strides and refuses one of
 * more than 2 Giga-elements (cudnnSetTensor4dDescriptor, "The total size
 * of a tensor ... is limited to 2 Giga-elements"): the others fail with
 * that reason (set4d); the activations' kernels have no such limit.
 */
#include <config.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuda.h"
#include "cuda_kern.h"

/* An NCHW float descriptor; a tensor past cuDNN's limit fails here with a
 * hint instead of inside cuDNN with CUDNN_STATUS_NOT_SUPPORTED. */
static void set4d(cudnnTensorDescriptor_t t, int n, int c, int h, int w)
{
	char msg[160];

	if ((size_t)n * c * h * w > INT_MAX) {
		snprintf(msg, sizeof msg, "tensor (%d,%d,%d,%d) has more than 2^31-1 elements, "
		         "cuDNN's limit; use a smaller batch", n, c, h, w);
		cu_fail(__FILE__, __LINE__, "cudnnSetTensor4dDescriptor", "too large", msg);
	}
	CDP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

/* ---- activations ----
 * Our kernels (cuda_kern_elem.cu), for ReLU too: they agree with the CPU
 * bit for bit (kernel_emu.sh), NaN included, where cuDNN's ReLU backward
 * leaves undocumented what it does for a NaN y. They take any size_t n. */

static void cu_act_fwd(cdp_backend *be, int kind, float slope, const float *x, float *y, size_t n)
{
	cdk_act_fwd(cu_im(be)->comp, kind, slope, x, y, n);
	CDP_KERNEL_CHECK();
}

static void cu_act_bwd(cdp_backend *be, int kind, float slope, const float *y,
                       const float *dy, float *dx, float beta, size_t n)
{
	cdk_act_bwd(cu_im(be)->comp, kind, slope, y, dy, dx, beta, n);
	CDP_KERNEL_CHECK();
}

/* ---- batch norm ---- */

static void bn_descs(cu_impl *im, int n, int c, int hw)
{
	set4d(im->ta, n, c, 1, hw);
	CDP_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(im->tbn, im->ta, CUDNN_BATCHNORM_SPATIAL));
}

/* eps as cuDNN takes it: the float the CPU adds, widened, and at least
 * CUDNN_BN_MIN_EPSILON (cudnn_ops.h: "Has to be >= CUDNN_BN_MIN_EPSILON";
 * 0.0 in cuDNN 9, 1e-5 in old ones, where PyTorch then skips cuDNN). */
static double bn_eps(float eps)
{
	return (double)eps < CUDNN_BN_MIN_EPSILON ? CUDNN_BN_MIN_EPSILON : (double)eps;
}

/* Training batchnorm by our kernels (cuda_kern_bn.cu), the default:
 * cuDNN's NCHW batchnorm ran at a fraction of the memory bandwidth on an
 * H200 (doc/PERFORMANCE.md); CDP_CUDNN_BN=1 takes cuDNN's. */
static void bn_train_ours(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                          const float *gamma, const float *beta, float *y, uint16_t *yh,
                          float *run_mean, float *run_var, float momentum, float eps,
                          float *save_mean, float *save_invstd, int act, float slope)
{
	cu_impl *im = cu_im(be);

	cu_buf_reserve(be, &im->scratch, cdk_bn_scratch_bytes(c));
	cdk_bn_train(im->comp, n, c, hw, x, gamma, beta, y, xh, yh, run_mean, run_var, momentum,
	             eps, save_mean, save_invstd, act, slope, im->scratch.p);
	CDP_KERNEL_CHECK();
}

/* cuDNN's training batchnorm (CDP_CUDNN_BN=1), or ours over one value per
 * channel */
static void bn_train_cudnn(cdp_backend *be, int n, int c, int hw, const float *x,
                           const float *gamma, const float *beta, float *y,
                           float *run_mean, float *run_var, float momentum, float eps,
                           float *save_mean, float *save_invstd, int act, float slope)
{
	cu_impl *im = cu_im(be);
	const float one = 1.0f, zero = 0.0f;

	/* cuDNN takes both running (or both saved) pointers, or neither */
	if (!run_mean || !run_var)
		run_mean = run_var = NULL;
	if (!save_mean || !save_invstd)
		save_mean = save_invstd = NULL;
	/* one value per channel: cuDNN's unbiased running variance would
	 * divide by N*H*W - 1 = 0; our kernel does what the CPU does */
	if ((size_t)n * hw == 1) {
		cdk_bn_train1(im->comp, c, x, gamma, beta, y, run_mean, run_var, momentum, eps,
		              save_mean, save_invstd, act, slope);
		CDP_KERNEL_CHECK();
		return;
	}
	bn_descs(im, n, c, hw);
	CDP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(im->dnn, CUDNN_BATCHNORM_SPATIAL,
		&one, &zero, im->ta, x, im->ta, y, im->tbn, gamma, beta, (double)momentum,
		run_mean, run_var, bn_eps(eps), save_mean, save_invstd));
	if (act)
		cu_act_fwd(be, act, slope, y, y, (size_t)n * c * hw);
}

/* both paths write y: the stash keeps it (bn_fwd_train_h never gets y NULL) */
static int cu_bn_fwd_h_alone(cdp_backend *be)
{
	(void)be;
	return 0;
}

/* bn_fwd_train and the copies from y and x where not NULL: from the pass
 * that writes y (ours), or two more passes (cuDNN's, and one value per
 * channel) */
static void cu_bn_fwd_train_h(cdp_backend *be, int n, int c, int hw, const float *x,
                              uint16_t *xh, const float *gamma, const float *beta, float *y,
                              uint16_t *yh, float *run_mean, float *run_var, float momentum,
                              float eps, float *save_mean, float *save_invstd, int act,
                              float slope)
{
	size_t count = (size_t)n * c * hw;

	if (!x)     /* cu_bn_takes_xh is 0 */
		cu_fail(__FILE__, __LINE__, "bn_fwd_train_h", "bf16 input",
		        "batchnorm's forward was given its input in bf16 (bn_takes_xh is 0)");
	if (!cu_im(be)->bn_cudnn && (size_t)n * hw > 1) {
		bn_train_ours(be, n, c, hw, x, xh, gamma, beta, y, yh, run_mean, run_var, momentum,
		              eps, save_mean, save_invstd, act, slope);
		return;
	}
	bn_train_cudnn(be, n, c, hw, x, gamma, beta, y, run_mean, run_var, momentum, eps, save_mean,
	               save_invstd, act, slope);
	if (xh)
		be->to_bf16(be, x, xh, count);
	if (yh)
		be->to_bf16(be, y, yh, count);
}

static void cu_bn_fwd_train(cdp_backend *be, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, float *y,
                            float *run_mean, float *run_var, float momentum, float eps,
                            float *save_mean, float *save_invstd, int act, float slope)
{
	cu_bn_fwd_train_h(be, n, c, hw, x, NULL, gamma, beta, y, NULL, run_mean, run_var, momentum,
	                  eps, save_mean, save_invstd, act, slope);
}

static void cu_bn_fwd_infer(cdp_backend *be, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, float *y,
                            const float *run_mean, const float *run_var, float eps, int act,
                            float slope)
{
	cu_impl *im = cu_im(be);
	const float one = 1.0f, zero = 0.0f;

	bn_descs(im, n, c, hw);
	CDP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(im->dnn, CUDNN_BATCHNORM_SPATIAL,
		&one, &zero, im->ta, x, im->ta, y, im->tbn, gamma, beta, run_mean, run_var,
		bn_eps(eps)));
	if (act)
		cu_act_fwd(be, act, slope, y, y, (size_t)n * c * hw);
}

/* dx = beta dx + the input gradient; dgamma, dbeta accumulate (beta 1).
 * With act, dy first becomes the gradient before the activation, in place,
 * masked by y (bn_beta is not needed). dx is never dy (net_plan.c's gradient
 * slots give a layer's dy and its input's dy different buffers). */
/* cuDNN's backward takes the activation's gradient from y (act_bwd);
 * ours computes bn(x) again, as the CPU does */
static int cu_bn_bwd_needs_y(cdp_backend *be)
{
	return cu_im(be)->bn_cudnn;
}

/* cuDNN's backward takes a float x */
/* No fused max pool: cuDNN's batchnorm and pooling run as two ops (a
 * kernel of our own would be needed, not written) */
static int cu_bn_pool_takes(cdp_backend *be, const cdp_pool_desc *d)
{
	(void)be;
	(void)d;
	return 0;
}

static void cu_bn_fwd_train_pool(cdp_backend *be, int n, int c, int hw, const float *x,
                                 uint16_t *xh, const float *gamma, const float *beta,
                                 float *run_mean, float *run_var, float momentum, float eps,
                                 float *save_mean, float *save_invstd, int act, float slope,
                                 const cdp_bn_pool *p)
{
	(void)be, (void)n, (void)c, (void)hw, (void)x, (void)xh, (void)gamma, (void)beta;
	(void)run_mean, (void)run_var, (void)momentum, (void)eps, (void)save_mean;
	(void)save_invstd, (void)act, (void)slope, (void)p;
	cu_fail(__FILE__, __LINE__, "bn_fwd_train_pool", "fused max pool",
	        "a max pool was fused into batchnorm (bn_pool_takes is 0)");
}

static void cu_bn_bwd_pool(cdp_backend *be, int n, int c, int hw, const void *x, int xh,
                           const float *gamma, const float *bn_beta, const float *save_mean,
                           const float *save_invstd, float eps, int act, float slope, void *dx,
                           float beta, float *dgamma, float *dbeta, const cdp_bn_pool *p)
{
	(void)be, (void)n, (void)c, (void)hw, (void)x, (void)xh, (void)gamma, (void)bn_beta;
	(void)save_mean, (void)save_invstd, (void)eps, (void)act, (void)slope, (void)dx;
	(void)beta, (void)dgamma, (void)dbeta, (void)p;
	cu_fail(__FILE__, __LINE__, "bn_bwd_pool", "fused max pool",
	        "a max pool was fused into batchnorm (bn_pool_takes is 0)");
}

static int cu_bn_takes_xh(cdp_backend *be)
{
	(void)be;
	return 0;
}

/* bf16 gradients (CDP_H_DY, CDP_H_DX) would need kernels of their own,
 * not written: float only */
static int cu_bn_takes_gh(cdp_backend *be)
{
	(void)be;
	return 0;
}

static void cu_bn_bwd(cdp_backend *be, int n, int c, int hw, const void *xv, int h,
                      const float *y, void *dyv, const float *gamma, const float *bn_beta,
                      const float *save_mean, const float *save_invstd, float eps, int act,
                      float slope, void *dxv, float beta, float *dgamma, float *dbeta)
{
	cu_impl *im = cu_im(be);
	const float one = 1.0f, *x = xv;
	float *dy = dyv, *dx = dxv;

	if (h & CDP_H_X)
		cu_fail(__FILE__, __LINE__, "bn_bwd", "bf16 input",
		        "batchnorm's backward was given its input in bf16 (bn_takes_xh is 0)");
	if (h & (CDP_H_DY | CDP_H_DX))
		cu_fail(__FILE__, __LINE__, "bn_bwd", "bf16 gradient",
		        "batchnorm's backward was given or asked for a bf16 gradient "
		        "(bn_takes_gh is 0)");

	if (!im->bn_cudnn) {
		cu_buf_reserve(be, &im->scratch, cdk_bn_scratch_bytes(c));
		cdk_bn_bwd(im->comp, n, c, hw, x, dy, gamma, bn_beta, save_mean, save_invstd, act, slope,
		           dx, beta, dgamma, dbeta, im->scratch.p);
		CDP_KERNEL_CHECK();
		return;
	}
	if (act)
		cu_act_bwd(be, act, slope, y, dy, dy, 0.0f, (size_t)n * c * hw);
	bn_descs(im, n, c, hw);
	CDP_CUDNN_CHECK(cudnnBatchNormalizationBackward(im->dnn, CUDNN_BATCHNORM_SPATIAL,
		&one, &beta, &one, &one, im->ta, x, im->ta, dy, im->ta, dx, im->tbn, gamma,
		dgamma, dbeta, bn_eps(eps), save_mean, save_invstd));
}

/* Synchronized batchnorm's parts (backend.h): our kernels; the sums come
 * back through the scratch buffer, which the host waits for. */
static void sums_back(cdp_backend *be, int c, double *sums)
{
	cu_impl *im = cu_im(be);

	CDP_KERNEL_CHECK();
	CDP_CUDA_CHECK(cudaMemcpyAsync(sums, im->scratch.p, 2 * (size_t)c * sizeof(double),
	                               cudaMemcpyDeviceToHost, im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
}

static void cu_bn_sums(cdp_backend *be, int n, int c, int hw, const float *x,
                       const float *shift, double *sums)
{
	cu_impl *im = cu_im(be);

	cu_buf_reserve(be, &im->scratch, 2 * (size_t)c * sizeof(double));
	cdk_bn_sums(im->comp, n, c, hw, x, shift, im->scratch.p);
	sums_back(be, c, sums);
}

static void cu_bn_grad_sums(cdp_backend *be, int n, int c, int hw, const float *x,
                            const float *dy, const float *mean, const float *invstd,
                            double *sums)
{
	cu_impl *im = cu_im(be);

	cu_buf_reserve(be, &im->scratch, 2 * (size_t)c * sizeof(double));
	cdk_bn_grad_sums(im->comp, n, c, hw, x, dy, mean, invstd, im->scratch.p);
	sums_back(be, c, sums);
}

static void cu_bn_bwd_dx(cdp_backend *be, int n, int c, int hw, const float *x,
                         const float *dy, const float *gamma, const float *mean,
                         const float *invstd, const float *m, float *dx, float beta)
{
	cdk_bn_bwd_dx(cu_im(be)->comp, n, c, hw, x, dy, gamma, mean, invstd, m, dx, beta);
	CDP_KERNEL_CHECK();
}

/* ---- pooling: x (N,C,H,W), y (N,C,OH,OW) ---- */

static void pool_descs(cu_impl *im, const cdp_pool_desc *d, cudnnPoolingMode_t mode)
{
	set4d(im->ta, d->n, d->c, d->h, d->w);
	set4d(im->tb, d->n, d->c, d->oh, d->ow);
	CDP_CUDNN_CHECK(cudnnSetPooling2dDescriptor(im->pool, mode, CUDNN_PROPAGATE_NAN, d->k,
	                                            d->k, d->pad, d->pad, d->stride, d->stride));
}

/* y = pool(x) in cuDNN's mode */
static void pool_fwd(cdp_backend *be, const cdp_pool_desc *d, cudnnPoolingMode_t mode,
                     const float *x, float *y)
{
	cu_impl *im = cu_im(be);
	const float one = 1.0f, zero = 0.0f;

	pool_descs(im, d, mode);
	CDP_CUDNN_CHECK(cudnnPoolingForward(im->dnn, im->pool, &one, im->ta, x, &zero, im->tb, y));
}

/* dx = beta dx + the gradient of pool from y, dy and x */
static void pool_bwd(cdp_backend *be, const cdp_pool_desc *d, cudnnPoolingMode_t mode,
                     const float *x, const float *y, const float *dy, float *dx, float beta)
{
	cu_impl *im = cu_im(be);
	const float one = 1.0f;

	pool_descs(im, d, mode);
	CDP_CUDNN_CHECK(cudnnPoolingBackward(im->dnn, im->pool, &one, im->tb, y, im->tb, dy,
	                                     im->ta, x, &beta, im->ta, dx));
}

/* cuDNN's max pooling needs no argmax: idx is not written nor read */
static void cu_maxpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y,
                           int32_t *idx)
{
	pool_fwd(be, d, CUDNN_POOLING_MAX_DETERMINISTIC, x, y);
}

static void cu_maxpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *x,
                           const float *y, const float *dy, const int32_t *idx, float *dx,
                           float beta)
{
	pool_bwd(be, d, CUDNN_POOLING_MAX_DETERMINISTIC, x, y, dy, dx, beta);
}

static int cu_maxpool_bwd_needs_xy(cdp_backend *be)
{
	(void)be;
	return 1;
}

static void cu_avgpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y)
{
	pool_fwd(be, d, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, x, y);
}

/* Average pooling's gradient needs neither x nor y; cuDNN's call takes
 * them, and gets dx and dy (valid tensors of those shapes) in their place.
 * cuDNN does not read them in this mode: TensorFlow's AvgPoolGrad hands it
 * uninitialized buffers there ("For AvgPoolGrad, the original input tensor
 * is not necessary. However, cudnn still requires them to run, although
 * they do not affect the results", pooling_ops_common.cc). */
static void cu_avgpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *dy, float *dx,
                           float beta)
{
	pool_bwd(be, d, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, dx, dy, dy, dx, beta);
}

int cu_dnn_init(cdp_backend *be, char *err, size_t cap)
{
	cu_impl *im = cu_im(be);
	cudnnStatus_t s;

	if ((s = cudnnCreateTensorDescriptor(&im->ta)) != CUDNN_STATUS_SUCCESS ||
	    (s = cudnnCreateTensorDescriptor(&im->tb)) != CUDNN_STATUS_SUCCESS ||
	    (s = cudnnCreateTensorDescriptor(&im->tbn)) != CUDNN_STATUS_SUCCESS ||
	    (s = cudnnCreatePoolingDescriptor(&im->pool)) != CUDNN_STATUS_SUCCESS) {
		snprintf(err, cap, "cannot set up cuDNN descriptors: %s", cudnnGetErrorString(s));
		return -1;
	}
	return 0;
}

void cu_dnn_ops(cdp_backend *be)
{
	be->bn_fwd_train = cu_bn_fwd_train;
	be->bn_fwd_train_h = cu_bn_fwd_train_h;
	be->bn_fwd_h_alone = cu_bn_fwd_h_alone;
	be->bn_fwd_infer = cu_bn_fwd_infer;
	be->bn_bwd_needs_y = cu_bn_bwd_needs_y;
	be->bn_takes_xh = cu_bn_takes_xh;
	be->bn_takes_gh = cu_bn_takes_gh;
	be->bn_pool_takes = cu_bn_pool_takes;
	be->bn_fwd_train_pool = cu_bn_fwd_train_pool;
	be->bn_bwd_pool = cu_bn_bwd_pool;
	be->bn_bwd = cu_bn_bwd;
	be->bn_sums = cu_bn_sums;
	be->bn_grad_sums = cu_bn_grad_sums;
	be->bn_bwd_dx = cu_bn_bwd_dx;
	be->act_fwd = cu_act_fwd;
	be->act_bwd = cu_act_bwd;
	be->maxpool_fwd = cu_maxpool_fwd;
	be->maxpool_bwd = cu_maxpool_bwd;
	be->maxpool_bwd_needs_xy = cu_maxpool_bwd_needs_xy;
	be->avgpool_fwd = cu_avgpool_fwd;
	be->avgpool_bwd = cu_avgpool_bwd;
}

void cu_dnn_free(cdp_backend *be)
{
	cu_impl *im = cu_im(be);

	if (im->ta)
		cudnnDestroyTensorDescriptor(im->ta);
	if (im->tb)
		cudnnDestroyTensorDescriptor(im->tb);
	if (im->tbn)
		cudnnDestroyTensorDescriptor(im->tbn);
	if (im->pool)
		cudnnDestroyPoolingDescriptor(im->pool);
	im->ta = im->tb = im->tbn = NULL;
	im->pool = NULL;
}
