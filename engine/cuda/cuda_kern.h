/* cuda_kern.h: our CUDA C kernels (cuda_kern_*.cu), behind C-callable
 * launchers that the CUDA backend (cuda_backend.c, cuda_conv.c, cuda_dnn.c)
 * puts in the cdp_backend table. cuDNN does convolution, batchnorm's
 * inference (and, with CDP_CUDNN_BN=1, its training) and pooling; cuBLAS
 * does GEMM; everything else is here.
 *
 * Every launcher queues work on stream s and returns at once (no sync, no
 * allocation). Pointers are device pointers unless said otherwise. Each
 * kernel computes exactly what the CPU backend's op of the same name
 * computes (engine/backend.h states the semantics, cpu/ is the
 * reference): tests/gpu compares them. beta: 0 overwrites the output, 1
 * accumulates into it.
 *
 * Reductions (sumsq, losses, bias_grad, gap_fwd's sums, batchnorm's) use
 * fixed-shape block reductions in double (two-pass through a scratch
 * buffer where one block per output would not fill the GPU), never float
 * atomics, so a result depends only on the input and the launch shape: the
 * same run gives bitwise the same result twice. Scratch needs are given by
 * cdk_reduce_scratch_bytes(n); the backend owns one scratch buffer. The
 * elementwise ops, upsampling, pooling, prep_batch and the optimizers
 * round like the CPU backend and agree with it bit for bit.
 *
 * Sources: cuda_kern_elem.cu (fill .. act, sumsq), cuda_kern_layers.cu
 * (upsample, chan slices, dropout, gap, bias, bn over one value per
 * channel), cuda_kern_bn.cu (batchnorm in training), cuda_kern_deconv.cu
 * (the 2x2 stride-2 transposed convolution in float32), cuda_kern_pool.cu
 * (maxpool), cuda_kern_loss.cu (losses, argmax, confusion),
 * cuda_kern_optim.cu, cuda_kern_prec.cu (half staging), cuda_kern_data.cu
 * (prep_batch), cuda_kern_window.cu (cdp-predict's windows), and their
 * private header cuda_kern_int.cuh. A
 * failed launch prints the file and line, flushes every stream and aborts
 * (a launcher cannot return an error).
 */
#ifndef CDP_CUDA_KERN_H
#define CDP_CUDA_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* backend.h is C: its functions keep C linkage in the .cu files too */
#include "backend.h"

/* Bytes of scratch a reduction over n elements needs (>= 64): n is the
 * length of the reduced input (sumsq: n; bias_grad: n*f*hw; losses: N*HW,
 * or anything larger such as N*K*HW). It grows with n, so one buffer sized
 * for the largest n serves every smaller one. Results (out) must not lie
 * in the scratch. */
size_t cdk_reduce_scratch_bytes(size_t n);

/* elementwise */
void cdk_fill(cudaStream_t s, float *x, float v, size_t n);
void cdk_scale(cudaStream_t s, float *x, float a, size_t n);
void cdk_axpy(cudaStream_t s, float a, const float *x, float *y, size_t n);
/* *out (device double) = sum x[i]^2, accumulated in double */
void cdk_sumsq(cudaStream_t s, const float *x, size_t n, void *scratch, double *out);
void cdk_add(cudaStream_t s, const float *a, const float *b, float *y, size_t n);
/* backend.h diff_fwd, diff_bwd */
void cdk_diff_fwd(cudaStream_t s, int absval, const float *a, const float *b, float *y, size_t n);
void cdk_diff_bwd(cudaStream_t s, int absval, const float *a, const float *b, const float *dy,
                  float sign, float *dx, float beta, size_t n);
/* kind CDP_ACT_RELU or CDP_ACT_LEAKY; y may equal x; dx may equal dy */
void cdk_act_fwd(cudaStream_t s, int kind, float slope, const float *x, float *y, size_t n);
void cdk_act_bwd(cudaStream_t s, int kind, float slope, const float *y, const float *dy,
                 float *dx, float beta, size_t n);

/* layers */
void cdk_upsample_fwd(cudaStream_t s, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *x, float *y);
void cdk_upsample_bwd(cudaStream_t s, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *dy, float *dx, float beta);
void cdk_chan_copy(cudaStream_t s, int n, int c, int hw, const float *src, float *dst,
                   int dst_c, int dst_off, float beta);
void cdk_chan_slice(cudaStream_t s, int n, int c, int hw, const float *src, int src_c,
                    int src_off, float *dst, float beta);
/* the same counter-based hash of (seed, index) as cpu_elem.c, so masks match */
void cdk_dropout_fwd(cudaStream_t s, float p, uint64_t seed, const float *x, float *y,
                     uint8_t *mask, size_t n);
void cdk_dropout_bwd(cudaStream_t s, float p, const uint8_t *mask, const float *dy, float *dx,
                     float beta, size_t n);
void cdk_gap_fwd(cudaStream_t s, int n, int c, int hw, const float *x, float *y);
void cdk_gap_bwd(cudaStream_t s, int n, int c, int hw, const float *dy, float *dx, float beta);
void cdk_bias_add(cudaStream_t s, int n, int f, int hw, const float *bias, float *y);
/* dbias (f) += sum over n, hw of dy */
void cdk_bias_grad(cudaStream_t s, int n, int f, int hw, const float *dy, float *dbias,
                   void *scratch);
/* batchnorm's training forward over one value per channel (N*H*W = 1):
 * x, y (1, c, 1, 1), bit for bit cpu_bn.c's, whose running variance takes
 * the batch's (0) for the unbiased one that cuDNN would divide by N*H*W - 1
 * = 0 for; run_* (both or neither) and save_* may be NULL */
void cdk_bn_train1(cudaStream_t s, int c, const float *x, const float *gamma, const float *beta,
                   float *y, float *run_mean, float *run_var, float momentum, float eps,
                   float *save_mean, float *save_invstd, int act, float slope);
/* the data gradient of a 2x2 stride-2 convolution whose windows tile its
 * input (the U-Net's transposed convolution's forward), float32
 * (cuda_kern_deconv.cu): dx (n, c, 2 oh, 2 ow) (+)= per beta, from dy
 * (n, f, oh, ow) and w (f, c, 2, 2); for f that cdk_deconv2_fits (1..1024) */
int cdk_deconv2_fits(int f);
void cdk_deconv2(cudaStream_t s, int n, int c, int f, int oh, int ow, const float *dy,
                 const float *w, float *dx, float beta);
/* batchnorm in training (cuda_kern_bn.cu): backend.h's bn_fwd_train with
 * bn_fwd_train_h's bf16 copies (xh, yh where not NULL), and bn_bwd with
 * the activation's mask from bn(x) computed again (y is not read, dy not
 * written), in cpu_bn.c's arithmetic, the per-channel sums in double over
 * a (channel, part) grid; run_* (both or neither) and save_* may be NULL.
 * scratch: cdk_bn_scratch_bytes(c) */
size_t cdk_bn_scratch_bytes(int c);
void cdk_bn_train(cudaStream_t s, int n, int c, int hw, const float *x, const float *gamma,
                  const float *beta, float *y, uint16_t *xh, uint16_t *yh, float *run_mean,
                  float *run_var, float momentum, float eps, float *save_mean,
                  float *save_invstd, int act, float slope, void *scratch);
void cdk_bn_bwd(cudaStream_t s, int n, int c, int hw, const float *x, const float *dy,
                const float *gamma, const float *beta, const float *mean, const float *invstd,
                int act, float slope, float *dx, float dxbeta, float *dgamma, float *dbeta,
                void *scratch);
/* synchronized batchnorm's parts (backend.h bn_sums, bn_grad_sums,
 * bn_bwd_dx): one block per channel sums in double into out (2C device
 * doubles: the first sum of every channel, then the second); dx from the
 * means m (2C) */
void cdk_bn_sums(cudaStream_t s, int n, int c, int hw, const float *x, const float *shift,
                 double *out);
void cdk_bn_grad_sums(cudaStream_t s, int n, int c, int hw, const float *x, const float *dy,
                      const float *mean, const float *invstd, double *out);
void cdk_bn_bwd_dx(cudaStream_t s, int n, int c, int hw, const float *x, const float *dy,
                   const float *gamma, const float *mean, const float *invstd, const float *m,
                   float *dx, float beta);
/* maxpool backward from the argmax indices of cdk_maxpool_fwd (own kernels,
 * used where cuDNN's pooling does not fit, e.g. ties must go to the first) */
void cdk_maxpool_fwd(cudaStream_t s, const cdp_pool_desc *d, const float *x, float *y, int32_t *idx);
void cdk_maxpool_bwd(cudaStream_t s, const cdp_pool_desc *d, const float *dy, const int32_t *idx,
                     float *dx, float beta);

/* Losses: as backend.h; the loss sum and the count land in out[0], out[1]
 * (device doubles); the backend copies them back. dlogits are written
 * (ignored pixels get 0), except by dice_logits. */
void cdk_softmax_ce(cudaStream_t s, int n, int k, int hw, const float *logits,
                    const int32_t *labels, int ignore, const float *class_w, float *dlogits,
                    float gscale, void *scratch, double *out);
void cdk_bce_logits(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                    int ignore, float *dlogits, float gscale, void *scratch, double *out);
/* out[0] = loss; dlogits accumulate (+=) as backend.h says; tot: NULL, or
 * the host totals of a larger batch (backend.h), used in their place (out
 * is then not written: the loss is 1 - (2 tot[0] + smooth) / D) */
void cdk_dice_logits(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                     int ignore, float smooth, const double *tot, float *dlogits, float gscale,
                     void *scratch, double *out);
/* sum p t, sum p, sum t into out[0..3) (device doubles) */
void cdk_dice_sums(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                   int ignore, void *scratch, double *out);
/* regression over n elements (N*T*HW): loss sum, count into out[0..2) */
void cdk_reg_loss(cudaStream_t s, int kind, size_t n, const float *pred, const float *target,
                  float delta, float *dpred, float gscale, void *scratch, double *out);
void cdk_argmax(cudaStream_t s, int n, int k, int hw, const float *logits, int32_t *pred);
/* conf (k*k, device uint64) += counts (integer atomics are exact) */
void cdk_confusion(cudaStream_t s, int n_elems, int k, const int32_t *labels, const int32_t *pred,
                   int ignore, unsigned long long *conf);

/* fused optimizers over the whole parameter block (backend.h semantics) */
void cdk_sgd_step(cudaStream_t s, float *w, const float *g, float *v, size_t n, float lr,
                  float mu, float wd, int nesterov, int first);
void cdk_adamw_step(cudaStream_t s, float *w, const float *g, float *m, float *v, size_t n,
                    float lr, float b1, float b2, float eps, float wd, long t);

/* Mixed precision staging: prec CDP_PREC_BF16 or CDP_PREC_FP16, or
 * CDP_PREC_TF32 for float channels-last staging (a transpose alone).
 * to_nhwc: x (n, c, h, w) float -> y (n, h, w, c) bf16/fp16 (round to nearest).
 * Used for activations and for weights (F, C, KH, KW) -> (F, KH, KW, C).
 * from_nhwc: x (n, h, w, c) half -> y (n, c, h, w) float, y = x + beta*y. */
void cdk_to_nhwc_half(cudaStream_t s, int prec, int n, int c, int h, int w, const float *x, void *y);
void cdk_from_nhwc_half(cudaStream_t s, int prec, int n, int c, int h, int w, const void *x,
                        float *y, float beta);
/* Plain conversions (GEMM inputs), same layout. */
void cdk_to_half(cudaStream_t s, int prec, const float *x, void *y, size_t n);
void cdk_from_half(cudaStream_t s, int prec, const void *x, float *y, float beta, size_t n);

/* The data path (backend.h prep_batch); aug is a DEVICE array of n here,
 * and raw must be aligned to its element size (dt). */
void cdk_prep_batch(cudaStream_t s, int dt, int n, int c, int h, int w, const void *raw,
                    const float *mean, const float *inv, const cdp_prep_aug *aug, int oh, int ow,
                    float *img, const int32_t *lab_raw, int32_t *lab);

/* cdp-predict's sliding windows (backend.h win_gather, win_blend; srow, x0
 * and w1 are device arrays). gather: strip (c, r, w) -> x (nb, c, s, s),
 * bitwise the CPU's; blend: logits (nb, k, s, s) -> sum (k, s, w) +=,
 * the CPU's rounding but the device's expf. */
void cdk_win_gather(cudaStream_t s, int c, int r, int w, int sz, const float *strip,
                    const int32_t *srow, int nb, const int32_t *x0, float *x);
void cdk_win_blend(cudaStream_t s, int k, int sz, int w, int nb, const float *logits,
                   const int32_t *x0, const float *w1, float *sum);

#ifdef __cplusplus
}
#endif
#endif
