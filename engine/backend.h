/* backend.h: the one interface between layers and the device that runs them.
 *
 * Layers never touch memory directly: they call these ops on device pointers.
 * The CPU backend (cpu/) is the readable reference; the CUDA backend (cuda/,
 * built when configure finds CUDA) implements the same table with cuDNN,
 * cuBLAS and our kernels, and is tested op by op against the CPU one
 * (tests/gpu/). The descriptors' output sizes are computed once, for both,
 * in backend.c.
 *
 * Layout: every activation is NCHW float32, dense: element (n,c,h,w) sits at
 * ((n*C + c)*H + h)*W + w. Convolution weights are (F, C, KH, KW) as in
 * PyTorch; transposed-convolution weights are (C_in, F, KH, KW) as in
 * PyTorch's ConvTranspose2d; dense weights are (OUT, IN) and y = x W^T + b.
 *
 * Descriptors carry shapes once (like cuDNN's), so a backend can cache plans
 * and size a workspace: conv ops take a workspace of at least
 * conv_workspace(desc) bytes in the precision in effect, provided by the
 * caller (the net owns one shared workspace sized for its largest layer,
 * grown by cdp_net_set_precision).
 *
 * Every op is synchronous on the CPU; on CUDA ops are queued on the backend's
 * compute stream and be->sync() waits for them.
 *
 * Precision (set_precision): every op reads and writes float32 tensors on
 * every backend. CDP_PREC_FP32 computes in IEEE float32 (the reference). The CPU
 * backend also computes CDP_PREC_BF16 where the CPU has AVX512_BF16
 * (cpu/cpu_gemm_bf16.c: the same rounding of the inputs of convolutions
 * and GEMMs, fp32 sums). In CDP_PREC_BF16 on either backend the net keeps
 * the activations that backward reads as bf16 between forward and backward
 * (to_bf16 / from_bf16 below; which tensors: net_plan.c's "bf16 stash"), so
 * ops see float32 (but for the two that say they read the bf16 copy),
 * only the values backward reads are rounded, and the activation memory
 * is about halved. A CDP_PREC_BF16 convolution
 * depends on its input x only through x's bf16 values (the CPU's sets
 * round x, or Winograd's input before its transform; CUDA converts x to
 * bf16), which lets the stash hand it the widened copy, the same bits, or
 * the copy itself where conv_takes_xh says so (bn_bwd: bn_takes_xh). Where
 * conv_writes_yh says a convolution's output can be written as bf16 (the
 * CPU's Winograd, paired VDPBF16PS and row-by-row plans), its y holds
 * bf16 values in every conv_fwd and conv_fwd_bn (rounded after the bias, before the batchnorm),
 * written alone (d->yh) or not, so the results do not depend on which
 * (as PyTorch's autocast's convolution returns bf16; CUDA's staging
 * converts every y from bf16); a stash copy of that y loses nothing, and
 * bn_fwd_train_h reads it as it is (bn_takes_xh). So, as in PyTorch's
 * autocast, is its gradient: where conv_takes_dyh, conv_writes_dxh and
 * bn_takes_gh say so (the CPU), the gradients between a convolution and
 * a batchnorm are bf16 too (net_plan.c's "bf16 gradients"), rounded where
 * they are written and widened exactly where they are read. On
 * CUDA, CDP_PREC_TF32 lets convolutions and
 * GEMMs use TF32 tensor cores (PyTorch's default for cuDNN convolutions),
 * and CDP_PREC_BF16 / CDP_PREC_FP16 round the inputs of convolutions and
 * GEMMs to bf16 / fp16 (channels-last for cuDNN's tensor-core kernels) and
 * accumulate in float32; everything else (batchnorm, losses, optimizer
 * steps) stays float32, so master weights are float32 by construction.
 * Loss scaling for fp16 is the trainer's business (train.c), not the
 * backend's.
 */
#ifndef CDP_BACKEND_H
#define CDP_BACKEND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The small rules below that the CPU backend and the CUDA kernels must
 * apply alike are written once, for both (host and device under nvcc). */
#ifdef __CUDACC__
#define CDP_HOST_DEVICE __host__ __device__
#else
#define CDP_HOST_DEVICE
#endif

#define CDP_CONV_SEGS 8           /* a concat's inputs at most (net.h's CDP_MAX_FROM) */

typedef struct cdp_conv_desc {
	int n, c, h, w;          /* input (N, C, H, W) */
	int f, kh, kw;           /* output channels and kernel */
	int stride, pad, dil;    /* same along both axes */
	int oh, ow;              /* output size, filled by cdp_conv_desc_init */
	/* 1: x of conv_fwd, conv_fwd_bn and conv_bwd_filter is bf16 (uint16_t
	 * (N,C,H,W), the stash's copy), where conv_takes_xh says the backend
	 * reads it so; 0 (the default): float */
	int xh;
	/* 1: conv_fwd writes y as bf16 (uint16_t (N,F,OH,OW), the bits of
	 * its values, as to_bf16 gives them), where conv_writes_yh says the
	 * backend writes it so; 0 (the default): float */
	int yh;
	/* nseg > 0: conv_fwd and conv_fwd_bn read x's channels from nseg
	 * tensors in order, seg[i] (N, segc[i], H, W) float, the segc[i]
	 * summing to c, and take no x (NULL): the inputs of an inference
	 * net's concat read where they lie, with no copy made (net_plan.c), where
	 * conv_takes_split says the backend reads them so. 0: x (the
	 * default). */
	int nseg;
	const float *seg[CDP_CONV_SEGS];
	int segc[CDP_CONV_SEGS];
	/* 1: dy of conv_bwd_data and conv_bwd_filter is bf16 (uint16_t
	 * (N,F,OH,OW)), where conv_takes_dyh says the backend reads it so;
	 * 0 (the default): float */
	int dyh;
	/* 1: conv_bwd_data writes dx as bf16 (uint16_t (N,C,H,W), its values
	 * rounded to nearest even), beta 0, where conv_writes_dxh says the
	 * backend writes it so; 0 (the default): float */
	int dxh;
} cdp_conv_desc;

/* Fills oh, ow (backend.c); returns -1 when the output would be empty. */
int cdp_conv_desc_init(cdp_conv_desc *d);

typedef struct cdp_pool_desc {
	int n, c, h, w;
	int k, stride, pad;      /* square window */
	int oh, ow;
} cdp_pool_desc;
/* Fills oh, ow (backend.c) by PyTorch's rule; returns -1 when the output
 * would be empty or pad > k/2. */
int cdp_pool_desc_init(cdp_pool_desc *d);

/* A max pool fused into the training batchnorm before it (net_plan.c): d, 2x2
 * windows of stride 2 without padding over the batchnorm's output (N, C,
 * H, W), H = 2 OH and W = 2 OW, where bn_pool_takes says the backend fuses
 * it. Device pointers. */
typedef struct cdp_bn_pool {
	cdp_pool_desc d;
	float *y;            /* the pool's output (N, C, OH, OW) */
	int32_t *idx;        /* its argmax, as maxpool_fwd writes it */
	/* bn_bwd_pool: the gradient of y, float, or bf16 with CDP_H_DY in its h */
	const void *dy;
} cdp_bn_pool;

enum { CDP_ACT_RELU = 1, CDP_ACT_LEAKY = 2 };
/* bn_bwd's h: which of x, dy, dx are bf16 (bn_takes_xh, bn_takes_gh) */
enum { CDP_H_X = 1, CDP_H_DY = 2, CDP_H_DX = 4 };
/* An eval-mode batchnorm as bn_fwd_infer takes it (device pointers, C
 * each) and its activation (0 or CDP_ACT_*), for conv_fwd_bn */
typedef struct cdp_bn_infer {
	const float *gamma, *beta, *mean, *var;
	float eps, slope;
	int act;
} cdp_bn_infer;
enum { CDP_PREC_FP32 = 0, CDP_PREC_TF32 = 1, CDP_PREC_BF16 = 2, CDP_PREC_FP16 = 3 };
/* The names of --precision (precision.c): "fp32", "tf32", "bf16", "fp16".
 * cdp_precision_name gives "?" for a value that is none of them;
 * cdp_precision_parse gives the CDP_PREC_* of a name, or -1. */
extern const char *const cdp_precision_names[];   /* NULL-terminated */
const char *cdp_precision_name(int prec);
int cdp_precision_parse(const char *s);

/* One sample's geometric transform for prep_batch (the fields of augment.h's
 * cdp_aug, repeated here so that backends need not include the trainer's
 * headers): crop window (y0, x0) of the output size, then hflip, vflip, then
 * rot quarter turns counter-clockwise. */
typedef struct cdp_prep_aug {
	int y0, x0, hflip, vflip, rot;
} cdp_prep_aug;

/* prep_batch's geometry: output pixel (p, q) of an (oh, ow) output comes
 * from input pixel (*sy, *sx): undo the rotation into B (bh x bw), the
 * flips into A, then add the crop origin. */
static inline CDP_HOST_DEVICE void cdp_prep_src(const cdp_prep_aug *a, int oh, int ow, int p,
                                                int q, int *sy, int *sx)
{
	int odd = a->rot & 1, bh = odd ? ow : oh, bw = odd ? oh : ow, i, j;

	switch (a->rot & 3) {
	case 0:  i = p;          j = q;          break;
	case 1:  i = q;          j = bw - 1 - p; break;
	case 2:  i = bh - 1 - p; j = bw - 1 - q; break;
	default: i = bh - 1 - q; j = p;          break;
	}
	if (a->vflip)
		i = bh - 1 - i;
	if (a->hflip)
		j = bw - 1 - j;
	*sy = a->y0 + i;
	*sx = a->x0 + j;
}

/* dropout_fwd's keep test for element `index` under `seed` (also
 * python/cdpool/torch_model.py's): h = SplitMix64(seed ^ (index *
 * 0x9E3779B97F4A7C15)), keep when (h >> 40) * 2^-24 >= p. */
static inline CDP_HOST_DEVICE int cdp_dropout_keep(uint64_t seed, uint64_t index, float p)
{
	uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ULL);

	z += 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}
enum { CDP_UP_NEAREST = 1, CDP_UP_BILINEAR = 2 };  /* bilinear: align_corners=False */
enum { CDP_REG_MSE = 0, CDP_REG_L1 = 1, CDP_REG_HUBER = 2 };

/* reg_loss's one element, shared by the backends so that they compute the
 * same doubles: the loss of d = pred - target and its derivative *g. */
static inline CDP_HOST_DEVICE double cdp_reg_elem(int kind, double d, double delta, double *g)
{
	double a = d < 0 ? -d : d, s = d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;

	if (kind == CDP_REG_MSE) {
		*g = 2 * d;
		return d * d;
	}
	if (kind == CDP_REG_L1 || a >= delta) {
		*g = kind == CDP_REG_L1 ? s : delta * s;
		return kind == CDP_REG_L1 ? a : delta * (a - 0.5 * delta);
	}
	*g = d;
	return 0.5 * d * d;
}

/* diff_bwd's factor: d|a - b| / da, the sign of a - b, 0 where a == b
 * (torch.abs's gradient at 0) and where either is NaN; 1 without absval
 * (d(a - b) / da). */
static inline CDP_HOST_DEVICE float cdp_diff_sgn(int absval, float a, float b)
{
	if (!absval)
		return 1.0f;
	return a > b ? 1.0f : a < b ? -1.0f : 0.0f;
}

/* upsample's source pixels along one axis, PyTorch's rules for an output of
 * `out` pixels from `in` (out >= in), scale = (float)in / out (what
 * F.interpolate(size=) uses, and scale_factor=F's 1/F for F = out / in a
 * power of 2; other factors may differ by a rounding of the scale).
 * Nearest: dst when out == in, dst >> 1 when out == 2 in, else
 * min(floorf(dst * scale), in - 1). Bilinear (align_corners=False): src =
 * (dst + 0.5) * scale - 0.5 clamped at 0, i0 = (int)src, i1 = i0 + 1
 * unless i0 is the last pixel, weights l0 = 1 - (src - i0), l1 = src - i0.
 * The products are rounded on their own (no fused multiply-add on the
 * device), so both backends find the same pixels and weights. */
#ifdef __CUDA_ARCH__
#define CDP_FMUL(a, b) __fmul_rn(a, b)
#else
#define CDP_FMUL(a, b) ((a) * (b))
#endif
static inline CDP_HOST_DEVICE int cdp_up_nearest(int dst, int in, int out, float scale)
{
	int i;

	if (out == in)
		return dst;
	if (out == 2 * in)
		return dst >> 1;
	i = (int)floorf(CDP_FMUL((float)dst, scale));
	return i < in - 1 ? i : in - 1;
}

static inline CDP_HOST_DEVICE void cdp_up_bilinear(int dst, int in, float scale, int *i0,
                                                   int *i1, float *l0, float *l1)
{
	float src = CDP_FMUL((float)dst + 0.5f, scale) - 0.5f;

	if (src < 0.0f)
		src = 0.0f;
	*i0 = (int)src;
	*i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
	*l1 = src - (float)*i0;
	*l0 = 1.0f - *l1;
}

typedef struct cdp_backend cdp_backend;

struct cdp_backend {
	const char *name;        /* "cpu", "cuda" */
	int threads;             /* CPU worker threads (set by set_threads) */
	int precision;           /* CDP_PREC_*, set by set_precision */
	int device;              /* CUDA device ordinal; -1 on the CPU */
	void *impl;

	/* memory (device pointers; on the CPU plain host memory, 64-byte aligned) */
	void *(*alloc)(cdp_backend *be, size_t bytes);   /* zeroed; NULL on failure */
	void  (*free)(cdp_backend *be, void *p);
	void  (*to_device)(cdp_backend *be, void *dst, const void *src, size_t bytes);
	void  (*to_host)(cdp_backend *be, void *dst, const void *src, size_t bytes);
	void  (*copy)(cdp_backend *be, void *dst, const void *src, size_t bytes);
	void  (*sync)(cdp_backend *be);
	void  (*set_threads)(cdp_backend *be, int n);
	/* 0, or -1 when this backend cannot compute in that precision */
	int   (*set_precision)(cdp_backend *be, int prec);
	void  (*destroy)(cdp_backend *be);
	/* Bytes of activations an inference net (cdp_net_build_infer) should
	 * keep live at once: it runs its layers over the batch in passes of
	 * as many samples as fit (cdp_net.pass), at least one; 0: the whole
	 * batch in one pass (CUDA: a GPU wants its batch whole). */
	size_t (*infer_pass_bytes)(cdp_backend *be);

	/* The data path. host_alloc: host memory the device copies from fastest
	 * (pinned on CUDA, 64-byte aligned on the CPU), zeroed; NULL on failure.
	 * to_device_async queues a copy on the copy stream (the CPU copies at
	 * once); copy_fence makes compute ops queued after it wait for every copy
	 * queued before it, without blocking the host; copy_wait blocks the host
	 * until those copies are done, after which their sources may be reused.
	 * stream: the compute stream (cudaStream_t) for code that must order its
	 * own work with the ops (NCCL); NULL on the CPU. */
	void *(*host_alloc)(cdp_backend *be, size_t bytes);
	void  (*host_free)(cdp_backend *be, void *p);
	void  (*to_device_async)(cdp_backend *be, void *dst, const void *src, size_t bytes);
	void  (*copy_fence)(cdp_backend *be);
	void  (*copy_wait)(cdp_backend *be);
	void *(*stream)(cdp_backend *be);

	/* BLAS-like, row-major: C = alpha * op(A) op(B) + beta * C, op(A) is MxK */
	void (*gemm)(cdp_backend *be, int ta, int tb, int m, int n, int k,
	             float alpha, const float *a, int lda, const float *b, int ldb,
	             float beta, float *c, int ldc);
	void (*fill)(cdp_backend *be, float *x, float v, size_t n);
	void (*scale)(cdp_backend *be, float *x, float a, size_t n);       /* x *= a */
	void (*axpy)(cdp_backend *be, float a, const float *x, float *y, size_t n); /* y += a x */
	/* sum of squares of x[0..n) in double (for gradient clipping by norm) */
	double (*sumsq)(cdp_backend *be, const float *x, size_t n);

	/* The bf16 stash of the activations kept for backward (net_plan.c, in
	 * CDP_PREC_BF16): to_bf16 rounds x[0..n) to bf16 (round to nearest
	 * even; a NaN stays a NaN) into y, the top 16 bits of each float;
	 * from_bf16 widens them back exactly (y[i] = x[i] << 16 as a float
	 * bit pattern). Whatever the precision set. */
	void (*to_bf16)(cdp_backend *be, const float *x, uint16_t *y, size_t n);
	void (*from_bf16)(cdp_backend *be, const uint16_t *x, float *y, size_t n);

	/* convolution; y (N,F,OH,OW), w (F,C,KH,KW), bias (F) or NULL; x
	 * float, or bf16 with d->xh (conv_takes_xh) */
	size_t (*conv_workspace)(cdp_backend *be, const cdp_conv_desc *d);
	/* 1: in the precision set, conv_fwd, conv_fwd_bn and conv_bwd_filter
	 * of d read x as bf16 with d->xh = 1 (the same results as x widened:
	 * a bf16 convolution depends on x only through its bf16 values), so
	 * the stash need not widen it (net_plan.c); 0: they take float only (the
	 * CPU's plans but the implicit one, CUDA). d->xh is not read. */
	int (*conv_takes_xh)(cdp_backend *be, const cdp_conv_desc *d);
	/* 1: conv_fwd and conv_fwd_bn of d read x from d->nseg segments
	 * (cdp_conv_desc) in the precision set: the CPU's implicit plan, whose
	 * slices are copied from x channel by channel anyway; 0: one x only
	 * (the CPU's other plans, CUDA). d->nseg is not read. */
	int (*conv_takes_split)(cdp_backend *be, const cdp_conv_desc *d);
	/* 1: in the precision set (bf16), conv_fwd of d writes y as bf16
	 * with d->yh = 1 (its values' bits: no fp32 y is made), so the stash
	 * keeps only that copy of a convolution's output that a batchnorm
	 * reads (net_plan.c); 0: float only (the CPU's plans but Winograd's, CUDA).
	 * d->yh is not read. */
	int (*conv_writes_yh)(cdp_backend *be, const cdp_conv_desc *d);
	void (*conv_fwd)(cdp_backend *be, const cdp_conv_desc *d, const void *x,
	                 const float *w, const float *bias, void *y, void *ws);
	/* conv_fwd followed by bn_fwd_infer (with its activation) of bn on y,
	 * in place: the same numbers, for inference (a net built by
	 * cdp_net_build_infer fuses each convolution whose only reader is an
	 * eval-mode batchnorm). The CPU applies the batchnorm to each block of
	 * output while it is in the cache; CUDA runs the two ops. */
	void (*conv_fwd_bn)(cdp_backend *be, const cdp_conv_desc *d, const void *x,
	                    const float *w, const float *bias, const cdp_bn_infer *bn, float *y,
	                    void *ws);
	/* The gradients between a convolution and a batchnorm in bf16, as
	 * PyTorch's autocast has them (the gradient of a bf16 tensor is bf16;
	 * net_plan.c's "bf16 gradients"). conv_takes_dyh: 1 when, in the
	 * precision set (bf16), conv_bwd_data and conv_bwd_filter of d read
	 * dy as bf16 with d->dyh = 1, with the results of dy widened (the
	 * CPU's implicit plan where its filter gradient is the grid's: their
	 * fills widen it exactly, or take its bits as they are); 0: float
	 * only (CUDA). conv_writes_dxh: 1 when conv_bwd_data of d writes dx
	 * as bf16 with d->dxh = 1 and beta 0, the float result rounded to
	 * nearest even (the CPU's Winograd and paired slice, rounding in the
	 * register); 0: float only. d->dyh, d->dxh are not read. */
	int (*conv_takes_dyh)(cdp_backend *be, const cdp_conv_desc *d);
	int (*conv_writes_dxh)(cdp_backend *be, const cdp_conv_desc *d);
	/* dx (+)= conv_transpose(dy, w); accumulate when beta == 1, overwrite
	 * when 0; dy float or bf16 (d->dyh), dx float or bf16 (d->dxh) */
	void (*conv_bwd_data)(cdp_backend *be, const cdp_conv_desc *d, const void *dy,
	                      const float *w, void *dx, float beta, void *ws);
	/* dw += dW(x, dy); dbias += sum over N,OH,OW of dy (dbias may be
	 * NULL); dy float or bf16 (d->dyh) */
	void (*conv_bwd_filter)(cdp_backend *be, const cdp_conv_desc *d, const void *x,
	                        const void *dy, float *dw, float *dbias, void *ws);

	/* batch norm over (N,H,W) per channel, then the activation act (0: none,
	 * or CDP_ACT_*, slope for leaky, as act_fwd) fused in: y = act(bn(x)).
	 * eps as PyTorch (1e-5 default); running stats: r = (1-momentum) r +
	 * momentum * batch (unbiased var), as PyTorch. save_mean/save_invstd (C)
	 * are kept for backward. */
	void (*bn_fwd_train)(cdp_backend *be, int n, int c, int hw, const float *x,
	                     const float *gamma, const float *beta, float *y,
	                     float *run_mean, float *run_var, float momentum, float eps,
	                     float *save_mean, float *save_invstd, int act, float slope);
	/* bn_fwd_train, which also writes the bf16 copies (as to_bf16 rounds)
	 * of x into xh and of y into yh, each where not NULL: the stash's
	 * copies of a batchnorm's input and output (net_plan.c), written from the
	 * pass that reads x and writes y (the CPU's) instead of two more
	 * passes over them (CUDA's: bn_fwd_train, then to_bf16). y, save_* and
	 * the running statistics are bn_fwd_train's, bit for bit. x NULL
	 * (where bn_takes_xh): the input is xh, bf16, read and not written
	 * (a convolution's output written so: conv_writes_yh), with the
	 * results of bn_fwd_train_h of xh widened. */
	void (*bn_fwd_train_h)(cdp_backend *be, int n, int c, int hw, const float *x,
	                       uint16_t *xh, const float *gamma, const float *beta, float *y,
	                       uint16_t *yh, float *run_mean, float *run_var, float momentum,
	                       float eps, float *save_mean, float *save_invstd, int act,
	                       float slope);
	/* 1 when bn_fwd_train_h takes y NULL and writes its output to yh
	 * alone (the CPU): the stash then keeps no fp32 output for a batchnorm
	 * whose readers all take its copy (net_plan.c); 0: y is always written */
	int (*bn_fwd_h_alone)(cdp_backend *be);
	void (*bn_fwd_infer)(cdp_backend *be, int n, int c, int hw, const float *x,
	                     const float *gamma, const float *beta, float *y,
	                     const float *run_mean, const float *run_var, float eps,
	                     int act, float slope);
	/* The training-mode gradient of y = act(bn(x)): x, gamma, bn_beta and y
	 * as in and out of bn_fwd_train, dy the gradient of y. The activation
	 * passes dy where bn(x) > 0 (scaled by slope elsewhere for leaky, zeroed
	 * for relu): a backend reads that from y, as act_bwd does (CUDA), or
	 * computes bn(x) again from x, gamma, bn_beta and the saved statistics,
	 * in the forward's arithmetic (the CPU: two fewer passes over memory
	 * than reading y). With act != 0 the backend may overwrite dy (CUDA
	 * leaves the gradient before the activation there); with act 0, y and
	 * bn_beta are not read (they may be NULL). eps is the forward's (cuDNN's
	 * backward wants it). dx (+)= per beta; dgamma, dbeta accumulate. */
	/* 1: bn_bwd with an activation reads y (CUDA); 0: it computes bn(x)
	 * again and never reads y (the CPU), so y may be NULL: the bf16 stash
	 * then need not widen it (net_plan.c) */
	int (*bn_bwd_needs_y)(cdp_backend *be);
	/* 1: bn_bwd reads x as bf16 with xh = 1, and bn_fwd_train_h with x
	 * NULL (the stash's copy, the same results as x widened), so the
	 * stash need not widen it (the CPU); 0: float only, xh must be 0 and
	 * x not NULL (CUDA) */
	int (*bn_takes_xh)(cdp_backend *be);
	/* 1: bn_bwd and bn_bwd_pool take the flags CDP_H_DY (dy bf16: the
	 * pool's p->dy with the pool) and CDP_H_DX (dx written as bf16,
	 * rounded to nearest even, beta 0) in h, with the results of dy
	 * widened and of dx rounded (the CPU); 0: neither (CUDA) */
	int (*bn_takes_gh)(cdp_backend *be);
	/* h: CDP_H_X where x is bf16 (bn_takes_xh), | CDP_H_DY, CDP_H_DX
	 * (bn_takes_gh); 0: all float */
	void (*bn_bwd)(cdp_backend *be, int n, int c, int hw, const void *x, int h, const float *y,
	               void *dy, const float *gamma, const float *bn_beta,
	               const float *save_mean, const float *save_invstd, float eps, int act,
	               float slope, void *dx, float beta, float *dgamma, float *dbeta);
	/* A training batchnorm and the max pool p->d after it as one op each
	 * way, where bn_pool_takes(p->d) (the CPU: the planes 16-float vectors
	 * wide, with AVX-512; CUDA: never): its output, which only the pool
	 * reads, is never made. bn_fwd_train_pool: bn_fwd_train_h with y and
	 * yh NULL (x float, or x NULL and xh its bf16 copy, read; else xh
	 * NULL or x's copy, written), then maxpool_fwd of its output into
	 * p->y and p->idx; bn_bwd_pool: maxpool_bwd of p->dy (beta 0) into
	 * the batchnorm's dy, then bn_bwd; each the two ops' results bit for
	 * bit. */
	int (*bn_pool_takes)(cdp_backend *be, const cdp_pool_desc *d);
	void (*bn_fwd_train_pool)(cdp_backend *be, int n, int c, int hw, const float *x,
	                          uint16_t *xh, const float *gamma, const float *beta,
	                          float *run_mean, float *run_var, float momentum, float eps,
	                          float *save_mean, float *save_invstd, int act, float slope,
	                          const cdp_bn_pool *p);
	void (*bn_bwd_pool)(cdp_backend *be, int n, int c, int hw, const void *x, int h,
	                    const float *gamma, const float *bn_beta, const float *save_mean,
	                    const float *save_invstd, float eps, int act, float slope, void *dx,
	                    float beta, float *dgamma, float *dbeta, const cdp_bn_pool *p);

	/* Synchronized batch norm (bn.c, bn_sync=1) in parts, so that the
	 * per-channel sums can be added over ranks between them; no
	 * activation (the layer applies it: bn_fwd_infer's, act_bwd's).
	 * bn_sums: sums[c] = the sum over (N, HW) of x - shift[c], sums[c + C]
	 * that of its square (shift (C) on the device, sums (2C) host
	 * doubles; the op waits for the device). bn_grad_sums: sums[c] = the
	 * sum of dy, sums[c + C] that of dy (x - mean) invstd (mean, invstd
	 * (C) device). bn_bwd_dx: dx (+)= per beta gamma invstd (dy - m[c] -
	 * (x - mean) invstd m[c + C]), m (2C) on the device: the means of the
	 * two sums over the whole batch. */
	void (*bn_sums)(cdp_backend *be, int n, int c, int hw, const float *x,
	                const float *shift, double *sums);
	void (*bn_grad_sums)(cdp_backend *be, int n, int c, int hw, const float *x,
	                     const float *dy, const float *mean, const float *invstd,
	                     double *sums);
	void (*bn_bwd_dx)(cdp_backend *be, int n, int c, int hw, const float *x, const float *dy,
	                  const float *gamma, const float *mean, const float *invstd,
	                  const float *m, float *dx, float beta);

	/* activations, elementwise over n values; dx (+)= per beta */
	void (*act_fwd)(cdp_backend *be, int kind, float slope, const float *x, float *y, size_t n);
	void (*act_bwd)(cdp_backend *be, int kind, float slope, const float *y,
	                const float *dy, float *dx, float beta, size_t n);

	/* pooling; max keeps an argmax index (int32, OH*OW per (n,c)) for backward,
	 * none where idx is NULL (an inference net's, cdp_net_build_infer); avg
	 * counts padding like PyTorch's count_include_pad=True */
	void (*maxpool_fwd)(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y, int32_t *idx);
	/* x, y: the forward's input and output (cuDNN's backward wants them; the
	 * CPU uses idx, and takes NULL for both). Where several inputs of a
	 * window tie for the maximum, the gradient goes to one of them (the
	 * first on the CPU). */
	void (*maxpool_bwd)(cdp_backend *be, const cdp_pool_desc *d, const float *x, const float *y,
	                    const float *dy, const int32_t *idx, float *dx, float beta);
	/* 1 when maxpool_bwd reads x and y (CUDA), 0 when idx is all it reads
	 * (the CPU): the bf16 stash then widens neither for it (net_plan.c) */
	int (*maxpool_bwd_needs_xy)(cdp_backend *be);
	void (*avgpool_fwd)(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y);
	void (*avgpool_bwd)(cdp_backend *be, const cdp_pool_desc *d, const float *dy, float *dx, float beta);

	/* upsample of (N,C,H,W) to (N,C,OH,OW), OH >= H, OW >= W, by
	 * cdp_up_nearest / cdp_up_bilinear's pixels and weights (scale H/OH,
	 * W/OW); bwd: dx (+)= the transpose, dy (N,C,OH,OW) */
	void (*upsample_fwd)(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
	                     const float *x, float *y);
	void (*upsample_bwd)(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
	                     const float *dy, float *dx, float beta);

	/* channel slice copy for concat: dst(N, dc_total, HW)[:, off:off+c] (+)= src(N, c, HW) */
	void (*chan_copy)(cdp_backend *be, int n, int c, int hw, const float *src,
	                  float *dst, int dst_c, int dst_off, float beta);
	/* the reverse: dst(N, c, HW) (+)= src(N, src_c, HW)[:, off:off+c] */
	void (*chan_slice)(cdp_backend *be, int n, int c, int hw, const float *src,
	                   int src_c, int src_off, float *dst, float beta);

	/* dropout with keep mask from a counter-based hash of (seed, index), so
	 * both backends draw the same mask: keep when hash01 >= p, scale 1/(1-p) */
	void (*dropout_fwd)(cdp_backend *be, float p, uint64_t seed, const float *x, float *y, uint8_t *mask, size_t n);
	void (*dropout_bwd)(cdp_backend *be, float p, const uint8_t *mask, const float *dy, float *dx, float beta, size_t n);

	/* global average pool: x (N,C,H,W) -> y (N,C) */
	void (*gap_fwd)(cdp_backend *be, int n, int c, int hw, const float *x, float *y);
	void (*gap_bwd)(cdp_backend *be, int n, int c, int hw, const float *dy, float *dx, float beta);
	/* y (N,F) (+)= bias broadcast; dbias (F) += sum over N of dy */
	void (*bias_add)(cdp_backend *be, int n, int f, int hw, const float *bias, float *y);
	void (*bias_grad)(cdp_backend *be, int n, int f, int hw, const float *dy, float *dbias);
	/* y = a + b elementwise (residual add); backward is two axpy/copies */
	void (*add)(cdp_backend *be, const float *a, const float *b, float *y, size_t n);
	/* the diff layer: y = a - b elementwise, or |a - b| with absval 1.
	 * diff_bwd: dx (+)= per beta sign * cdp_diff_sgn(absval, a, b) * dy, a
	 * and b the forward's inputs: sign 1 gives a's gradient, -1 b's */
	void (*diff_fwd)(cdp_backend *be, int absval, const float *a, const float *b, float *y,
	                 size_t n);
	void (*diff_bwd)(cdp_backend *be, int absval, const float *a, const float *b,
	                 const float *dy, float sign, float *dx, float beta, size_t n);

	/* Losses. logits (N,K,HW); labels (N,HW) int32 class ids (per pixel) or
	 * (N) (classification, HW = 1). Pixels whose label == ignore are not
	 * counted. Each returns the summed loss over counted elements in double
	 * and the count in *count, and writes dlogits = d(sum)/d(logits) * gscale
	 * (the caller passes gscale = 1/total_count for a mean). class_w (K) or
	 * NULL weights each counted element by class_w[label] (and the count by the
	 * same weights, as PyTorch's weighted mean does). A softmax_ce label
	 * outside [0, K) other than ignore is skipped like an ignored one (zero
	 * gradient, not counted): callers validate labels first (loss.h). */
	double (*softmax_ce)(cdp_backend *be, int n, int k, int hw, const float *logits,
	                     const int32_t *labels, int ignore, const float *class_w,
	                     float *dlogits, float gscale, double *count);
	/* sigmoid BCE with logits, K = 1: target = (label != 0) */
	double (*bce_logits)(cdp_backend *be, int n, int hw, const float *logits,
	                     const int32_t *labels, int ignore, float *dlogits,
	                     float gscale, double *count);
	/* soft Dice on sigmoid(logits) vs (label != 0), ignored pixels excluded,
	 * over the whole batch: loss = 1 - (2 sum(p t) + smooth) / (sum p + sum t + smooth);
	 * dlogits (+)= gscale * d(loss)/d(logits) (accumulates, so BCE+Dice adds).
	 * tot: NULL, or the totals {sum p t, sum p, sum t} of a larger batch
	 * this one is a part of (dice_sums of every part, added: a batch split
	 * over ranks), used in place of this batch's own; the loss returned
	 * and the gradient are then the larger batch's */
	double (*dice_logits)(cdp_backend *be, int n, int hw, const float *logits,
	                      const int32_t *labels, int ignore, float smooth, const double *tot,
	                      float *dlogits, float gscale);
	/* tot[0..3) = {sum p t, sum p, sum t} over this batch's counted pixels */
	void (*dice_sums)(cdp_backend *be, int n, int hw, const float *logits,
	                  const int32_t *labels, int ignore, double tot[3]);
	/* Regression (pixel values): pred and target (N,T,HW) float, target NaN
	 * where there is no target (not counted: zero gradient). kind
	 * CDP_REG_MSE (d^2), CDP_REG_L1 (|d|) or CDP_REG_HUBER (0.5 d^2 where
	 * |d| < delta, else delta (|d| - 0.5 delta): PyTorch's HuberLoss), with
	 * d = pred - target. Returns the summed loss over counted elements in
	 * double and their number in *count; dpred = gscale * d(sum)/d(pred)
	 * (L1's derivative at d = 0 is 0, as torch.sign's). */
	double (*reg_loss)(cdp_backend *be, int kind, int n, int t, int hw, const float *pred,
	                   const float *target, float delta, float *dpred, float gscale,
	                   double *count);
	/* argmax over K (K==1: logit > 0) -> pred (N,HW) int32 */
	void (*argmax)(cdp_backend *be, int n, int k, int hw, const float *logits, int32_t *pred);
	/* confusion counts: conf[K*K] (row = label, col = pred) += over pixels whose label != ignore;
	 * a label or prediction outside [0, K) is not counted */
	void (*confusion)(cdp_backend *be, int n_elems, int k, const int32_t *labels,
	                  const int32_t *pred, int ignore, uint64_t *conf_host);

	/* Optimizers over the whole contiguous parameter block (n floats).
	 * SGD (PyTorch semantics): g' = g + wd*w; v = mu*v + g' (v = g' at step 1);
	 * nesterov: d = g' + mu*v else d = v; w -= lr*d.
	 * AdamW (PyTorch): w -= lr*wd*w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
	 * w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps). t is 1-based.
	 * With mu == 0 SGD keeps no buffer (d = g', as PyTorch) and v may be NULL. */
	void (*sgd_step)(cdp_backend *be, float *w, const float *g, float *v, size_t n,
	                 float lr, float mu, float wd, int nesterov, int first);
	void (*adamw_step)(cdp_backend *be, float *w, const float *g, float *m, float *v,
	                   size_t n, float lr, float b1, float b2, float eps, float wd, long t);

	/* Batch preparation on the device: raw holds n samples of (c, h, w)
	 * pixels of type dt (lib/cdp_dtype.h, as stored in the pool), uploaded
	 * unconverted. img (n, c, oh, ow) = (raw - mean[ch]) * inv[ch] in float,
	 * cropped and transformed per sample by aug[i] (a HOST array of n):
	 *   A = raw[i][:, y0:y0+oh', x0:x0+ow'] (oh', ow' = oh, ow, or ow, oh
	 *       for odd rot), B = A flipped along W if hflip, then along H if
	 *       vflip, img[i] = rot90(B, rot) counter-clockwise over (H, W), i.e.
	 *   img[i][ch][p][q] = B[ch][p][q], B[ch][q][ow'-1-p], B[ch][oh'-1-p][ow'-1-q],
	 *                      B[ch][oh'-1-q][p]  for rot = 0, 1, 2, 3
	 * (engine/augment.h's convention). mean, inv: device (c). lab_raw
	 * (n, h, w) int32 or NULL -> lab (n, oh, ow) with the same transform. */
	void (*prep_batch)(cdp_backend *be, int dt, int n, int c, int h, int w, const void *raw,
	                   const float *mean, const float *inv, const cdp_prep_aug *aug,
	                   int oh, int ow, float *img, const int32_t *lab_raw, int32_t *lab);

	/* Sliding-window inference (cdp-predict, tools/predict/predict.h), so
	 * that a strip is uploaded once and only its weighted sums come back.
	 * win_gather: strip (c, r, w) float, srow (s) int32 row indices into
	 * [0, r), x0 (nb) int32 window origins (columns; they may lie before 0
	 * or run past w) -> x (nb, c, s, s):
	 *   x[b][ch][i][j] = strip[ch][srow[i]][cdp_reflect(x0[b] + j, w)]
	 * (an exact copy). srow and x0 are device arrays. */
	void (*win_gather)(cdp_backend *be, int c, int r, int w, int s, const float *strip,
	                   const int32_t *srow, int nb, const int32_t *x0, float *x);
	/* win_blend: logits (nb, k, s, s) -> probabilities p: for k == 1
	 * p = 1 / (1 + expf(-l)), else per pixel mx = max over classes (fmaxf
	 * from class 0 up), e_j = expf(l_j - mx), t = e_0 + e_1 + ... (float,
	 * in class order), p_j = e_j / t. Then for every window b = 0..nb-1 in
	 * order, sum (k, s, w) [j][i][x0[b] + q] += (w1[i] * w1[q]) * p[b][j][i][q]
	 * for the columns x0[b] + q inside [0, w) (the rest is dropped). x0
	 * (nb) int32 and w1 (s) float are device arrays; logits are not
	 * changed. The CPU rounds exactly as written (cdp-predict's output on
	 * the CPU depends on it); CUDA differs only by its expf (a few ulp),
	 * and each element of sum is owned by one thread (no atomics), so the
	 * result is the same run to run. With k < 0 the -k channels are
	 * values, not logits (a regression head, cdp-predict): p = l, blended
	 * linearly the same way (float, w1[i] * w1[q] first). */
	void (*win_blend)(cdp_backend *be, int k, int s, int w, int nb, const float *logits,
	                  const int32_t *x0, const float *w1, float *sum);
};

/* Every op of struct cdp_backend, in declaration order: a backend sets them
 * all. An op added to the struct goes here too (tests/engine/test_backend_table.c
 * checks the list against the struct's size, and that both backends set
 * every entry). */
#define CDP_BACKEND_OPS(X) \
	X(alloc) X(free) X(to_device) X(to_host) X(copy) X(sync) X(set_threads) \
	X(set_precision) X(destroy) X(infer_pass_bytes) \
	X(host_alloc) X(host_free) X(to_device_async) X(copy_fence) X(copy_wait) X(stream) \
	X(gemm) X(fill) X(scale) X(axpy) X(sumsq) \
	X(to_bf16) X(from_bf16) \
	X(conv_workspace) X(conv_takes_xh) X(conv_takes_split) X(conv_writes_yh) X(conv_takes_dyh) X(conv_writes_dxh) X(conv_fwd) X(conv_fwd_bn) X(conv_bwd_data) X(conv_bwd_filter) \
	X(bn_fwd_train) X(bn_fwd_train_h) X(bn_fwd_h_alone) X(bn_fwd_infer) X(bn_bwd_needs_y) X(bn_takes_xh) X(bn_takes_gh) X(bn_bwd) X(bn_pool_takes) X(bn_fwd_train_pool) X(bn_bwd_pool) X(bn_sums) X(bn_grad_sums) X(bn_bwd_dx) \
	X(act_fwd) X(act_bwd) \
	X(maxpool_fwd) X(maxpool_bwd) X(maxpool_bwd_needs_xy) X(avgpool_fwd) X(avgpool_bwd) \
	X(upsample_fwd) X(upsample_bwd) X(chan_copy) X(chan_slice) \
	X(dropout_fwd) X(dropout_bwd) X(gap_fwd) X(gap_bwd) X(bias_add) X(bias_grad) X(add) \
	X(diff_fwd) X(diff_bwd) \
	X(softmax_ce) X(bce_logits) X(dice_logits) X(dice_sums) X(reg_loss) X(argmax) X(confusion) \
	X(sgd_step) X(adamw_step) X(prep_batch) X(win_gather) X(win_blend)

/* numpy's "reflect" padding (no edge repeated) of index i into [0, n),
 * n >= 1: the column rule of win_gather, and cdp-predict's for rows. */
static inline CDP_HOST_DEVICE int cdp_reflect(long i, long n)
{
	long p = 2 * (n - 1);

	if (n == 1)
		return 0;
	i %= p;
	if (i < 0)
		i += p;
	return (int)(i < n ? i : p - i);
}

/* The most CPU threads a backend runs: --threads above it is refused, a
 * default (the cores) above it is cut to it. */
#define CDP_MAX_THREADS 256

/* The CPU backend (cpu/cpu_backend.c). threads <= 0: OpenBLAS's default. */
cdp_backend *cdp_backend_cpu(int threads);

/* The CUDA backend (cuda/, built only with HAVE_CUDA). Binds `device` on the
 * calling thread and creates its streams and cuDNN/cuBLAS handles. Returns
 * NULL with a one-line reason in err (no device, driver too old, out of
 * memory). cdp_cuda_device_count returns the number of usable devices, 0
 * when there is no driver or no GPU (never an error), and always 0 in a
 * build without CUDA, so `--device auto` needs no #ifdef. */
cdp_backend *cdp_backend_cuda(int device, char *err, size_t cap);
int cdp_cuda_device_count(void);
/* The 16 bytes that name GPU `device` (of those this process sees) among
 * every GPU of the node, as CUDA_VISIBLE_DEVICES=GPU-... names it: two
 * ranks that see one GPU under different indices get the same. 0, or -1
 * (no such device, or a build without CUDA). */
int cdp_cuda_device_uuid(int device, unsigned char uuid[16]);

/* What this build of the engine was compiled against, for --version
 * (features.c): "CUDA: runtime 12.4, cuDNN 9.1.0" (or "CUDA: not built")
 * and "OpenBLAS: 0.3.21", on two lines. The headers' versions, not the
 * libraries found at run time. */
const char *cdp_engine_features(void);

#endif
