/* cuda_conv.c: convolution on cuDNN's legacy cudnnConvolution* API, one
 * cached plan per (descriptor, precision).
 *
 * A plan holds the tensor, filter and convolution descriptors and the
 * algorithm of each direction (forward, backward-data, backward-filter),
 * chosen once: by cuDNN's heuristics (cudnnGet*Algorithm_v7), or measured
 * (cudnnFind*AlgorithmEx on scratch tensors, PyTorch's cudnn.benchmark)
 * when CDP_CUDNN_BENCHMARK=1. Without measuring, backward algorithms that
 * cuDNN flags deterministic are preferred, so reruns give the same bits.
 * The net calls conv_workspace() for every conv layer when it is built, so
 * plans (and any measuring) are made then, not during a step.
 *
 * Precision (backend.h):
 *   fp32       NCHW float, CUDNN_FMA_MATH: no TF32, the CPU within 1e-4;
 *   tf32       NCHW float, tensor-op math (cuDNN uses TF32 for float);
 *   bf16/fp16  NHWC half tensors, tensor-op math, float accumulation
 *              (cuDNN's PSEUDO_BFLOAT16/HALF configurations). The float32
 *              NCHW operands are converted into NHWC staging in the
 *              caller's workspace (cdk_to_nhwc_half) and the result back
 *              (cdk_from_nhwc_half, which also applies beta in float).
 *
 * Workspace layout (conv_workspace bytes, base 256-aligned), each part
 * 256-aligned:
 *   [0, ws)  cuDNN's workspace: the largest of the three directions;
 *   W        the weights or their gradient: (F,KH,KW,C) half for bf16/fp16;
 *            in fp32/tf32 (F,C,KH,KW) float, used only when w or dw is not
 *            16-byte aligned (the net packs its parameters back to back, so
 *            a layer's weights may start at any float), since cuDNN's
 *            vectorized kernels want aligned operands;
 *   X, Y     bf16/fp16 only: (N,H,W,C) for x or dx, (N,OH,OW,F) for y or dy.
 * The size depends on the precision, so set_precision comes before the net
 * is built (the trainer, cdp-predict and the tests all do so).
 * Bias: forward adds it afterwards (cdk_bias_add); dbias comes from the
 * float32 dy (cdk_bias_grad), in every precision.
 */
#define _GNU_SOURCE  /* program_invocation_short_name */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda.h"
#include "cuda_kern.h"

/* The most workspace one algorithm may take. Measured or not, a faster
 * algorithm that wants more is passed over: the net allocates the largest
 * layer's workspace once, next to every activation. */
#define WS_MAX ((size_t)1 << 30)

enum { DIR_FWD, DIR_DATA, DIR_FILT, NDIR };

struct cu_plan {
	cdp_conv_desc d;
	int req;                               /* the precision asked for (the cache key) */
	int prec;                              /* the one it runs in (see plan_new) */
	cudnnTensorDescriptor_t x, y;          /* (N,C,H,W), (N,F,OH,OW) */
	cudnnFilterDescriptor_t w;             /* (F,C,KH,KW) */
	cudnnConvolutionDescriptor_t cv[NDIR]; /* each with its algorithm's math type */
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t data;
	cudnnConvolutionBwdFilterAlgo_t filt;
	size_t ws[NDIR];                       /* cuDNN workspace of each direction */
	size_t off_w;                          /* weight staging */
	size_t off_x, off_y;                   /* half staging (bf16/fp16) */
	size_t total;                          /* conv_workspace() */
};

static int is_half(int prec) { return prec == CDP_PREC_BF16 || prec == CDP_PREC_FP16; }
static size_t align256(size_t v) { return (v + 255) / 256 * 256; }

static int same_desc(const cdp_conv_desc *a, const cdp_conv_desc *b)
{
	return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w &&
	       a->f == b->f && a->kh == b->kh && a->kw == b->kw && a->stride == b->stride &&
	       a->pad == b->pad && a->dil == b->dil && a->oh == b->oh && a->ow == b->ow;
}

static void plan_descs_free(cu_plan *p)
{
	if (p->x)
		cudnnDestroyTensorDescriptor(p->x);
	if (p->y)
		cudnnDestroyTensorDescriptor(p->y);
	if (p->w)
		cudnnDestroyFilterDescriptor(p->w);
	for (int i = 0; i < NDIR; i++) {
		if (p->cv[i])
			cudnnDestroyConvolutionDescriptor(p->cv[i]);
		p->cv[i] = NULL;
	}
	p->x = p->y = NULL;
	p->w = NULL;
}

static void plan_free(cu_plan *p)
{
	if (!p)
		return;
	plan_descs_free(p);
	free(p);
}

/* fp32 must stay FMA whatever cuDNN suggests; otherwise take the math type
 * the algorithm was rated with. */
static cudnnMathType_t math_for(int prec, cudnnMathType_t suggested)
{
	return prec == CDP_PREC_FP32 ? CUDNN_FMA_MATH : suggested;
}

/* The candidate lists of the three directions, in cuDNN's order (fastest
 * expected or measured first), reduced to what the choice needs. */
typedef struct cand {
	int algo;
	cudnnStatus_t status;
	cudnnDeterminism_t det;
	cudnnMathType_t math;
} cand;

#define MAXC 16

/* scratch tensors for measuring (benchmark mode only) */
typedef struct find_bufs {
	void *x, *w, *y, *ws;
	size_t ws_bytes;
} find_bufs;

static int cands_fwd(cu_impl *im, cu_plan *p, const find_bufs *fb, cand *c)
{
	cudnnConvolutionFwdAlgoPerf_t r[MAXC];
	int n = 0;

	if (fb)
		CDP_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(im->dnn, p->x, fb->x, p->w,
			fb->w, p->cv[DIR_FWD], p->y, fb->y, MAXC, &n, r, fb->ws, fb->ws_bytes));
	else
		CDP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(im->dnn, p->x, p->w,
			p->cv[DIR_FWD], p->y, MAXC, &n, r));
	for (int i = 0; i < n; i++)
		c[i] = (cand){ r[i].algo, r[i].status, r[i].determinism, r[i].mathType };
	return n;
}

static int cands_data(cu_impl *im, cu_plan *p, const find_bufs *fb, cand *c)
{
	cudnnConvolutionBwdDataAlgoPerf_t r[MAXC];
	int n = 0;

	if (fb)
		CDP_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(im->dnn, p->w, fb->w,
			p->y, fb->y, p->cv[DIR_DATA], p->x, fb->x, MAXC, &n, r, fb->ws, fb->ws_bytes));
	else
		CDP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(im->dnn, p->w, p->y,
			p->cv[DIR_DATA], p->x, MAXC, &n, r));
	for (int i = 0; i < n; i++)
		c[i] = (cand){ r[i].algo, r[i].status, r[i].determinism, r[i].mathType };
	return n;
}

static int cands_filt(cu_impl *im, cu_plan *p, const find_bufs *fb, cand *c)
{
	cudnnConvolutionBwdFilterAlgoPerf_t r[MAXC];
	int n = 0;

	if (fb)
		CDP_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(im->dnn, p->x, fb->x,
			p->y, fb->y, p->cv[DIR_FILT], p->w, fb->w, MAXC, &n, r, fb->ws, fb->ws_bytes));
	else
		CDP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(im->dnn, p->x, p->y,
			p->cv[DIR_FILT], p->w, MAXC, &n, r));
	for (int i = 0; i < n; i++)
		c[i] = (cand){ r[i].algo, r[i].status, r[i].determinism, r[i].mathType };
	return n;
}

/* The workspace of algorithm a in direction dir with the descriptor's
 * current math type; a status other than success rules the algorithm out. */
static cudnnStatus_t ws_size(cu_impl *im, cu_plan *p, int dir, int a, size_t *bytes)
{
	*bytes = 0;
	switch (dir) {
	case DIR_FWD:
		return cudnnGetConvolutionForwardWorkspaceSize(im->dnn, p->x, p->w, p->cv[dir],
			p->y, (cudnnConvolutionFwdAlgo_t)a, bytes);
	case DIR_DATA:
		return cudnnGetConvolutionBackwardDataWorkspaceSize(im->dnn, p->w, p->y, p->cv[dir],
			p->x, (cudnnConvolutionBwdDataAlgo_t)a, bytes);
	default:
		return cudnnGetConvolutionBackwardFilterWorkspaceSize(im->dnn, p->x, p->y, p->cv[dir],
			p->w, (cudnnConvolutionBwdFilterAlgo_t)a, bytes);
	}
}

/* Picks the first usable candidate: status success, workspace within
 * limit, and (pass 0, when want_det) deterministic. Sets the descriptor's
 * math type for it. Returns the algorithm, or -1. */
static int choose(cu_impl *im, cu_plan *p, int dir, const cand *c, int n, int want_det,
                  size_t limit)
{
	for (int pass = want_det ? 0 : 1; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			size_t bytes;
			if (c[i].status != CUDNN_STATUS_SUCCESS)
				continue;
			if (pass == 0 && c[i].det != CUDNN_DETERMINISTIC)
				continue;
			/* fp32 never takes a tensor-core (TF32) kernel */
			if (p->prec == CDP_PREC_FP32 && (c[i].math == CUDNN_TENSOR_OP_MATH ||
			    c[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
				continue;
			/* nor tf32 one that converts its float tensors down to fp16
			 * (cudnnMathType_t): tf32 promises TF32 rounding, not fp16 range */
			if (p->prec == CDP_PREC_TF32 && c[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
				continue;
			CDP_CUDNN_CHECK(cudnnSetConvolutionMathType(p->cv[dir],
			                                            math_for(p->prec, c[i].math)));
			if (ws_size(im, p, dir, c[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
			    bytes > limit)
				continue;
			p->ws[dir] = bytes;
			return c[i].algo;
		}
	return -1;
}

/* Bytes of x (N,C,H,W), w (F,C,KH,KW) or y (N,F,OH,OW) in the plan's type */
static size_t tensor_bytes(const cu_plan *p, int which)
{
	const cdp_conv_desc *d = &p->d;
	size_t es = is_half(p->prec) ? 2 : 4;

	if (which == 'x')
		return (size_t)d->n * d->c * d->h * d->w * es;
	if (which == 'w')
		return (size_t)d->f * d->c * d->kh * d->kw * es;
	return (size_t)d->n * d->f * d->oh * d->ow * es;
}

static void find_free(find_bufs *fb)
{
	cudaFree(fb->x);
	cudaFree(fb->w);
	cudaFree(fb->y);
	cudaFree(fb->ws);
}

/* Scratch x, w, y (plus a workspace of up to `limit` bytes) for measuring;
 * returns -1 when there is no memory for them (then the heuristics choose). */
static int find_alloc(const cu_plan *p, size_t limit, find_bufs *fb)
{
	memset(fb, 0, sizeof *fb);
	if (cudaMalloc(&fb->x, tensor_bytes(p, 'x')) != cudaSuccess ||
	    cudaMalloc(&fb->w, tensor_bytes(p, 'w')) != cudaSuccess ||
	    cudaMalloc(&fb->y, tensor_bytes(p, 'y')) != cudaSuccess) {
		cudaGetLastError();
		find_free(fb);
		return -1;
	}
	/* Each failed try is cleared at once: a successful call does not reset
	 * the runtime's last error, and the next launch check would report it. */
	for (fb->ws_bytes = limit; fb->ws_bytes >= ((size_t)1 << 20); fb->ws_bytes /= 2) {
		if (cudaMalloc(&fb->ws, fb->ws_bytes) == cudaSuccess)
			return 0;
		cudaGetLastError();
	}
	fb->ws = NULL;
	fb->ws_bytes = 0;
	return 0;
}

/* Chooses the three algorithms, measuring when asked to (and there is
 * memory to measure with). Returns -1 when a direction has no usable
 * algorithm: cuDNN always has one for a valid float 2-d convolution, but
 * not necessarily for every half-precision channels-last shape. */
static int plan_algos(cdp_backend *be, cu_plan *p)
{
	cu_impl *im = cu_im(be);
	size_t free_b = 0, total_b = 0, limit = WS_MAX;
	find_bufs fb, *fbp = NULL;
	cand c[MAXC] = { { 0 } };
	int n, a[NDIR];

	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
		cudaGetLastError();     /* keep WS_MAX; leave no error for the next check */
	else if (free_b / 4 < limit)
		limit = free_b / 4;
	if (im->benchmark && find_alloc(p, limit, &fb) == 0) {
		fbp = &fb;
		limit = fb.ws_bytes;
		/* Find times real convolutions: give them finite data (zeros) */
		CDP_CUDA_CHECK(cudaMemsetAsync(fb.x, 0, tensor_bytes(p, 'x'), im->comp));
		CDP_CUDA_CHECK(cudaMemsetAsync(fb.w, 0, tensor_bytes(p, 'w'), im->comp));
		CDP_CUDA_CHECK(cudaMemsetAsync(fb.y, 0, tensor_bytes(p, 'y'), im->comp));
		CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	}
	n = cands_fwd(im, p, fbp, c);
	a[DIR_FWD] = choose(im, p, DIR_FWD, c, n, 0, limit);
	n = cands_data(im, p, fbp, c);
	a[DIR_DATA] = choose(im, p, DIR_DATA, c, n, !fbp, limit);
	n = cands_filt(im, p, fbp, c);
	a[DIR_FILT] = choose(im, p, DIR_FILT, c, n, !fbp, limit);
	if (fbp) {
		CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
		find_free(fbp);
	}
	for (int dir = 0; dir < NDIR; dir++)
		if (a[dir] < 0)
			return -1;
	p->fwd = (cudnnConvolutionFwdAlgo_t)a[DIR_FWD];
	p->data = (cudnnConvolutionBwdDataAlgo_t)a[DIR_DATA];
	p->filt = (cudnnConvolutionBwdFilterAlgo_t)a[DIR_FILT];
	return 0;
}

/* The descriptors of p for precision p->prec and its algorithms; -1 when
 * cuDNN has no algorithm for some direction. */
static int plan_setup(cdp_backend *be, cu_plan *p)
{
	const cdp_conv_desc *d = &p->d;
	int on, oc, ohh, oww;
	cudnnDataType_t dt = p->prec == CDP_PREC_BF16 ? CUDNN_DATA_BFLOAT16 :
	                     p->prec == CDP_PREC_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
	cudnnTensorFormat_t fmt = is_half(p->prec) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;

	CDP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
	CDP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
	CDP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
	CDP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, fmt, dt, d->n, d->c, d->h, d->w));
	CDP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, fmt, dt, d->n, d->f, d->oh, d->ow));
	CDP_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, dt, fmt, d->f, d->c, d->kh, d->kw));
	for (int i = 0; i < NDIR; i++) {
		CDP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cv[i]));
		CDP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->cv[i], d->pad, d->pad,
			d->stride, d->stride, d->dil, d->dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
		CDP_CUDNN_CHECK(cudnnSetConvolutionMathType(p->cv[i], p->prec == CDP_PREC_FP32 ?
			CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
	}
	/* cdp_conv_desc_init and cuDNN must agree on the output size */
	CDP_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cv[0], p->x, p->w, &on, &oc,
	                                                      &ohh, &oww));
	if (on != d->n || oc != d->f || ohh != d->oh || oww != d->ow)
		cu_fail(__FILE__, __LINE__, "cudnnGetConvolution2dForwardOutputDim", "mismatch",
		        "cuDNN's output size differs from the descriptor's");
	return plan_algos(be, p);
}

/* A plan for d in be->precision. A bf16/fp16 shape for which cuDNN has no
 * channels-last algorithm (a first layer with 3 input channels is the
 * likely case) runs in tf32 instead, with a note on stderr: the layer is
 * then slower and its operands rounded to TF32 rather than bf16/fp16, but
 * the run goes on, as PyTorch's autocast would. */
static cu_plan *plan_new(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_plan *p = calloc(1, sizeof *p);
	size_t ws;
	int rc;

	if (!p)
		cu_fail(__FILE__, __LINE__, "calloc", "ENOMEM", "out of memory for a conv plan");
	p->d = *d;
	p->req = p->prec = be->precision;
	rc = plan_setup(be, p);
	if (rc < 0 && is_half(p->prec)) {
		fprintf(stderr, "%s: note: cuDNN has no %s channels-last algorithm for the "
		        "convolution %dx%dx%d -> %d (%dx%d, stride %d); it runs in tf32\n",
		        program_invocation_short_name, p->prec == CDP_PREC_BF16 ? "bf16" : "fp16",
		        d->c, d->h, d->w, d->f, d->kh, d->kw, d->stride);
		plan_descs_free(p);
		p->prec = CDP_PREC_TF32;
		rc = plan_setup(be, p);
	}
	if (rc < 0)
		cu_fail(__FILE__, __LINE__, "cudnnGetConvolutionAlgorithm", "no algorithm",
		        "no convolution algorithm fits this shape and workspace limit");
	ws = p->ws[DIR_FWD];
	if (p->ws[DIR_DATA] > ws)
		ws = p->ws[DIR_DATA];
	if (p->ws[DIR_FILT] > ws)
		ws = p->ws[DIR_FILT];
	p->off_w = align256(ws);
	p->total = p->off_w + align256(tensor_bytes(p, 'w'));
	if (is_half(p->prec)) {
		p->off_x = p->total;
		p->off_y = p->off_x + align256(tensor_bytes(p, 'x'));
		p->total = p->off_y + align256(tensor_bytes(p, 'y'));
	}
	return p;
}

/* The plan for (d, be->precision), made on first use. A net has a few
 * dozen distinct shapes: a linear search from the most recent is enough. */
static cu_plan *plan_get(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_impl *im = cu_im(be);
	cu_plan *p;

	for (int i = im->nplans - 1; i >= 0; i--)
		if (im->plans[i]->req == be->precision && same_desc(&im->plans[i]->d, d))
			return im->plans[i];
	if (im->nplans == im->cap_plans) {
		int cap = im->cap_plans ? 2 * im->cap_plans : 32;
		cu_plan **np = realloc(im->plans, (size_t)cap * sizeof *np);
		if (!np)
			cu_fail(__FILE__, __LINE__, "realloc", "ENOMEM", "out of memory for conv plans");
		im->plans = np;
		im->cap_plans = cap;
	}
	p = plan_new(be, d);
	im->plans[im->nplans++] = p;
	return p;
}

/* Called for every conv layer when the net is built: makes the plan and
 * grows the reduction scratch for the layer's bias gradient (over the
 * output, or over the input for a transposed convolution), so that steps
 * allocate nothing. */
static size_t cu_conv_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_plan *p = plan_get(be, d);
	size_t out = (size_t)d->n * d->f * d->oh * d->ow, in = (size_t)d->n * d->c * d->h * d->w;

	cu_scratch(be, out > in ? out : in);
	return p->total;
}

static int misaligned(const void *ptr) { return ((uintptr_t)ptr & 15) != 0; }

/* fp32/tf32: w itself when it is 16-byte aligned, else a copy in the W slot */
static const float *aligned_w(cu_impl *im, const cu_plan *p, const float *w, void *ws)
{
	void *slot = (char *)ws + p->off_w;

	if (!misaligned(w))
		return w;
	CDP_CUDA_CHECK(cudaMemcpyAsync(slot, w, tensor_bytes(p, 'w'), cudaMemcpyDeviceToDevice,
	                               im->comp));
	return slot;
}

static void cu_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                        const float *w, const float *bias, float *y, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_get(be, d);
	const float one = 1.0f, zero = 0.0f;

	if (!is_half(p->prec)) {
		w = aligned_w(im, p, w, ws);
		CDP_CUDNN_CHECK(cudnnConvolutionForward(im->dnn, &one, p->x, x, p->w, w,
			p->cv[DIR_FWD], p->fwd, ws, p->ws[DIR_FWD], &zero, p->y, y));
	} else {
		char *b = ws;
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, x, b + p->off_x);
		cdk_to_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, w, b + p->off_w);
		CDP_KERNEL_CHECK();
		CDP_CUDNN_CHECK(cudnnConvolutionForward(im->dnn, &one, p->x, b + p->off_x, p->w,
			b + p->off_w, p->cv[DIR_FWD], p->fwd, ws, p->ws[DIR_FWD], &zero, p->y,
			b + p->off_y));
		cdk_from_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, b + p->off_y, y, 0.0f);
		CDP_KERNEL_CHECK();
	}
	if (bias) {
		cdk_bias_add(im->comp, d->n, d->f, d->oh * d->ow, bias, y);
		CDP_KERNEL_CHECK();
	}
}

/* dx (N,C,H,W) = beta dx + conv_transpose(dy, w) */
static void cu_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const float *dy,
                             const float *w, float *dx, float beta, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_get(be, d);
	const float one = 1.0f, zero = 0.0f;

	if (!is_half(p->prec)) {
		w = aligned_w(im, p, w, ws);
		CDP_CUDNN_CHECK(cudnnConvolutionBackwardData(im->dnn, &one, p->w, w, p->y, dy,
			p->cv[DIR_DATA], p->data, ws, p->ws[DIR_DATA], &beta, p->x, dx));
		return;
	}
	char *b = ws;
	cdk_to_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, dy, b + p->off_y);
	cdk_to_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, w, b + p->off_w);
	CDP_KERNEL_CHECK();
	CDP_CUDNN_CHECK(cudnnConvolutionBackwardData(im->dnn, &one, p->w, b + p->off_w, p->y,
		b + p->off_y, p->cv[DIR_DATA], p->data, ws, p->ws[DIR_DATA], &zero, p->x,
		b + p->off_x));
	cdk_from_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, b + p->off_x, dx, beta);
	CDP_KERNEL_CHECK();
}

/* dw (F,C,KH,KW) += dW(x, dy); dbias (F) += sum of dy over N, OH, OW */
static void cu_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                               const float *dy, float *dw, float *dbias, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_get(be, d);
	const float one = 1.0f, zero = 0.0f;

	if (!is_half(p->prec) && misaligned(dw)) {
		/* into the aligned W slot, then added: dw + sum, as beta = 1 does */
		float *tmp = (float *)((char *)ws + p->off_w);
		CDP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(im->dnn, &one, p->x, x, p->y, dy,
			p->cv[DIR_FILT], p->filt, ws, p->ws[DIR_FILT], &zero, p->w, tmp));
		cdk_axpy(im->comp, 1.0f, tmp, dw, (size_t)d->f * d->c * d->kh * d->kw);
		CDP_KERNEL_CHECK();
	} else if (!is_half(p->prec)) {
		CDP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(im->dnn, &one, p->x, x, p->y, dy,
			p->cv[DIR_FILT], p->filt, ws, p->ws[DIR_FILT], &one, p->w, dw));
	} else {
		char *b = ws;
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, x, b + p->off_x);
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, dy, b + p->off_y);
		CDP_KERNEL_CHECK();
		CDP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(im->dnn, &one, p->x, b + p->off_x,
			p->y, b + p->off_y, p->cv[DIR_FILT], p->filt, ws, p->ws[DIR_FILT], &zero, p->w,
			b + p->off_w));
		/* dw in (F,KH,KW,C) half: back to (F,C,KH,KW) float, accumulating */
		cdk_from_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, b + p->off_w, dw, 1.0f);
		CDP_KERNEL_CHECK();
	}
	if (dbias) {
		size_t count = (size_t)d->n * d->f * d->oh * d->ow;
		cdk_bias_grad(im->comp, d->n, d->f, d->oh * d->ow, dy, dbias, cu_scratch(be, count));
		CDP_KERNEL_CHECK();
	}
}

void cu_conv_init(cdp_backend *be)
{
	be->conv_workspace = cu_conv_workspace;
	be->conv_fwd = cu_conv_fwd;
	be->conv_bwd_data = cu_conv_bwd_data;
	be->conv_bwd_filter = cu_conv_bwd_filter;
}

void cu_conv_free(cdp_backend *be)
{
	cu_impl *im = cu_im(be);

	for (int i = 0; i < im->nplans; i++)
		plan_free(im->plans[i]);
	free(im->plans);
	im->plans = NULL;
	im->nplans = im->cap_plans = 0;
}
