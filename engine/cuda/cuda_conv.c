/* cuda_conv.c: convolution on cuDNN's legacy cudnnConvolution* API, one
 * cached plan per (descriptor, precision).
 *
 * A plan holds the tensor, filter and convolution descriptors and, per
 * direction (forward, backward-data, backward-filter), the list of
 * algorithms it may use (cuda_algo.h): cuDNN's candidates by its
 * heuristics (cudnnGet*Algorithm_v7), or measured (cudnnFind*AlgorithmEx
 * on scratch tensors, PyTorch's cudnn.benchmark) when CDP_CUDNN_BENCHMARK=1,
 * less those that break a precision's math rule or want too much
 * workspace. Without measuring, backward algorithms that cuDNN flags
 * deterministic come first, so reruns give the same bits. When the plan
 * is made each candidate is run once, in that order, on zeroed scratch
 * tensors until one succeeds, and that one is used; should it fail later
 * (a cuDNN error status), the op goes on to the next candidate that fits
 * the plan's workspace, with a note on stderr, instead of aborting.
 * CDP_CUDNN_VERBOSE=1 prints each plan's choice (one line per plan); a
 * candidate that failed is always reported.
 *
 * Plans are made only by conv_workspace(), which the net calls for every
 * conv layer when it is built or its precision changes
 * (cdp_net_set_precision), so that plans (trials, measuring) are made
 * then, not during a step, and the caller's workspace is known to hold
 * the plan. An op for which conv_workspace() was not called in the current
 * precision aborts with that reason instead of writing past a workspace
 * sized for another precision.
 *
 * Precision (backend.h):
 *   fp32       NCHW float, CUDNN_FMA_MATH: no TF32 and no FFT or non-fused
 *              Winograd algorithm (cu_algo_transform), the CPU within 1e-4;
 *   tf32       NCHW float, tensor-op math (cuDNN uses TF32 for float); with
 *              CDP_CUDNN_NHWC=1 NHWC float staged as below (a transpose);
 *   bf16/fp16  NHWC half tensors, tensor-op math, float accumulation
 *              (cuDNN's PSEUDO_BFLOAT16/HALF configurations). The float32
 *              NCHW operands are converted into NHWC staging in the
 *              caller's workspace (cdk_to_nhwc_half) and the result back
 *              (cdk_from_nhwc_half, which also applies beta in float).
 *
 * Workspace layout (conv_workspace bytes, base 256-aligned), each part
 * 256-aligned:
 *   [0, ws)  cuDNN's workspace: the largest of the three chosen ones;
 *   W        the weights or their gradient: (F,KH,KW,C) half for bf16/fp16
 *            (float for staged tf32);
 *            in fp32/tf32 (F,C,KH,KW) float, used only when w or dw is not
 *            16-byte aligned (the net packs its parameters back to back, so
 *            a layer's weights may start at any float), since cuDNN's
 *            vectorized kernels want aligned operands;
 *   X, Y     staged plans only (bf16/fp16, tf32 with CDP_CUDNN_NHWC=1):
 *            (N,H,W,C) for x or dx, (N,OH,OW,F) for y or dy.
 * Bias: forward adds it afterwards (cdk_bias_add); dbias comes from the
 * float32 dy (cdk_bias_grad), in every precision.
 * The data gradient of a 2x2 stride-2 convolution whose windows tile the
 * input (the U-Net's transposed convolution's forward) is our kernel in
 * fp32 and tf32 (cdk_deconv2), cuDNN's in the staged precisions.
 */
#define _GNU_SOURCE  /* program_invocation_short_name */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda.h"
#include "cuda_algo.h"
#include "cuda_kern.h"

/* The most workspace one algorithm may take. Measured or not, a faster
 * algorithm that wants more is passed over: the net allocates the largest
 * layer's workspace once, next to every activation. */
#define WS_MAX ((size_t)1 << 30)

enum { DIR_FWD, DIR_DATA, DIR_FILT, NDIR };
static const char *const dir_name[NDIR] = { "fwd", "data", "filter" };

struct cu_plan {
	cdp_conv_desc d;
	int req;                               /* the precision asked for (the cache key) */
	int prec;                              /* the one it runs in (see plan_new) */
	cudnnTensorDescriptor_t x, y;          /* (N,C,H,W), (N,F,OH,OW) */
	cudnnFilterDescriptor_t w;             /* (F,C,KH,KW) */
	cudnnConvolutionDescriptor_t cv[NDIR]; /* each with its algorithm's math type */
	cu_cand list[NDIR][CU_MAXC];           /* usable candidates, in trial order */
	int nlist[NDIR];
	int cur[NDIR];                         /* the one in use: list[dir][cur[dir]] */
	size_t ws[NDIR];                       /* cuDNN workspace of the one in use */
	size_t off_w;                          /* weight staging; [0, off_w) for cuDNN */
	size_t off_x, off_y;                   /* channels-last staging (staged) */
	int staged;                            /* NHWC staging: bf16/fp16, or tf32 with
	                                        * CDP_CUDNN_NHWC=1 (float) */
	size_t total;                          /* conv_workspace() */
};

static int is_half(int prec) { return prec == CDP_PREC_BF16 || prec == CDP_PREC_FP16; }

/* Whether a plan in prec stages its operands channels-last: the half types
 * always, tf32 when asked (CDP_CUDNN_NHWC=1: cuDNN's NHWC float kernels,
 * which PyTorch's channels_last reaches, against the NCHW ones that took
 * about 3x PyTorch's time on an H200; doc/PERFORMANCE.md), at the cost of a
 * transpose of each operand each way. */
static int staged_prec(const cu_impl *im, int prec)
{
	return is_half(prec) || (prec == CDP_PREC_TF32 && im->nhwc_tf32);
}
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
static cudnnMathType_t math_for(int prec, int math)
{
	static const cudnnMathType_t type[] = { CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH,
	                                        CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
	                                        CUDNN_FMA_MATH };
	return prec == CDP_PREC_FP32 ? CUDNN_FMA_MATH : type[math];
}

static int math_of(cudnnMathType_t m)
{
	return m == CUDNN_TENSOR_OP_MATH ? CU_MATH_TENSOR :
	       m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? CU_MATH_TENSOR_CONV :
	       m == CUDNN_FMA_MATH ? CU_MATH_FMA : CU_MATH_DEFAULT;
}

/* cuDNN's names, for the notes */
static const char *algo_name(int dir, int a)
{
	static const char *const fwd[] = { "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM",
	                                   "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
	                                   "WINOGRAD_NONFUSED" };
	static const char *const data[] = { "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
	                                    "WINOGRAD_NONFUSED" };
	static const char *const filt[] = { "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
	                                    "WINOGRAD_NONFUSED", "FFT_TILING" };
	const char *const *t = dir == DIR_FWD ? fwd : dir == DIR_DATA ? data : filt;
	int n = dir == DIR_FWD ? 8 : dir == DIR_DATA ? 6 : 7;

	return a >= 0 && a < n ? t[a] : "?";
}

/* scratch tensors for trying and measuring algorithms */
typedef struct find_bufs {
	void *x, *w, *y, *ws;
	size_t ws_bytes;
} find_bufs;

/* cuDNN's candidates for direction dir (measured on fb when `measure`),
 * reduced to what the choice needs; the workspace is filled in later. */
static int cands(cu_impl *im, cu_plan *p, int dir, const find_bufs *fb, int measure,
                 cu_cand *c)
{
	int n = 0;

#define CANDS_COPY(r) \
	for (int i = 0; i < n; i++) \
		c[i] = (cu_cand){ (int)r[i].algo, r[i].status == CUDNN_STATUS_SUCCESS, \
		                  r[i].determinism == CUDNN_DETERMINISTIC, math_of(r[i].mathType), 0, \
		                  cu_algo_transform(dir, (int)r[i].algo) }
	if (dir == DIR_FWD) {
		cudnnConvolutionFwdAlgoPerf_t r[CU_MAXC];
		if (measure)
			CDP_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(im->dnn, p->x, fb->x, p->w,
				fb->w, p->cv[dir], p->y, fb->y, CU_MAXC, &n, r, fb->ws, fb->ws_bytes));
		else
			CDP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(im->dnn, p->x, p->w,
				p->cv[dir], p->y, CU_MAXC, &n, r));
		CANDS_COPY(r);
	} else if (dir == DIR_DATA) {
		cudnnConvolutionBwdDataAlgoPerf_t r[CU_MAXC];
		if (measure)
			CDP_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(im->dnn, p->w, fb->w,
				p->y, fb->y, p->cv[dir], p->x, fb->x, CU_MAXC, &n, r, fb->ws, fb->ws_bytes));
		else
			CDP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(im->dnn, p->w, p->y,
				p->cv[dir], p->x, CU_MAXC, &n, r));
		CANDS_COPY(r);
	} else {
		cudnnConvolutionBwdFilterAlgoPerf_t r[CU_MAXC];
		if (measure)
			CDP_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(im->dnn, p->x, fb->x,
				p->y, fb->y, p->cv[dir], p->w, fb->w, CU_MAXC, &n, r, fb->ws, fb->ws_bytes));
		else
			CDP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(im->dnn, p->x, p->y,
				p->cv[dir], p->w, CU_MAXC, &n, r));
		CANDS_COPY(r);
	}
#undef CANDS_COPY
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

/* Makes candidate c the one direction dir runs: its math type on the
 * direction's descriptor. */
static void use_cand(cu_plan *p, int dir, const cu_cand *c)
{
	CDP_CUDNN_CHECK(cudnnSetConvolutionMathType(p->cv[dir], math_for(p->prec, c->math)));
}

/* One convolution of direction dir with candidate c: out = conv(a, b) +
 * beta out, a and b being (x, w) forward, (w, dy) backward-data and (x, dy)
 * backward-filter, in the plan's tensor types. Returns cuDNN's status. */
static cudnnStatus_t conv_exec(cu_impl *im, cu_plan *p, int dir, const cu_cand *c,
                               const void *a, const void *b, void *out, const float *beta,
                               void *ws)
{
	const float one = 1.0f;

	switch (dir) {
	case DIR_FWD:
		return cudnnConvolutionForward(im->dnn, &one, p->x, a, p->w, b, p->cv[dir],
			(cudnnConvolutionFwdAlgo_t)c->algo, ws, c->ws, beta, p->y, out);
	case DIR_DATA:
		return cudnnConvolutionBackwardData(im->dnn, &one, p->w, a, p->y, b, p->cv[dir],
			(cudnnConvolutionBwdDataAlgo_t)c->algo, ws, c->ws, beta, p->x, out);
	default:
		return cudnnConvolutionBackwardFilter(im->dnn, &one, p->x, a, p->y, b, p->cv[dir],
			(cudnnConvolutionBwdFilterAlgo_t)c->algo, ws, c->ws, beta, p->w, out);
	}
}

/* Bytes of x (N,C,H,W), w (F,C,KH,KW) or y (N,F,OH,OW) in the plan's type */
static size_t tensor_bytes(const cu_plan *p, int which)
{
	const cdp_conv_desc *d = &p->d;
	size_t es = is_half(p->prec) ? 2 : 4;   /* tf32 staging is float */

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
	memset(fb, 0, sizeof *fb);
}

/* Grows the scratch workspace to `bytes`; -1 when there is no memory. Each
 * failed allocation is cleared at once: a successful call does not reset
 * the runtime's last error, and the next launch check would report it. */
static int find_ws(find_bufs *fb, size_t bytes)
{
	if (fb->ws_bytes >= bytes && (fb->ws || !bytes))
		return 0;
	cudaFree(fb->ws);
	fb->ws = NULL;
	fb->ws_bytes = 0;
	if (cudaMalloc(&fb->ws, bytes) != cudaSuccess) {
		cudaGetLastError();
		fb->ws = NULL;
		return -1;
	}
	fb->ws_bytes = bytes;
	return 0;
}

/* Zeroed scratch x, w, y (finite data for timing and trials), plus for
 * measuring a workspace of up to `limit` bytes (halved until it fits);
 * -1 when there is no memory for x, w, y. */
static int find_alloc(cu_impl *im, const cu_plan *p, int measure, size_t limit, find_bufs *fb)
{
	memset(fb, 0, sizeof *fb);
	if (cudaMalloc(&fb->x, tensor_bytes(p, 'x')) != cudaSuccess ||
	    cudaMalloc(&fb->w, tensor_bytes(p, 'w')) != cudaSuccess ||
	    cudaMalloc(&fb->y, tensor_bytes(p, 'y')) != cudaSuccess) {
		cudaGetLastError();
		find_free(fb);
		return -1;
	}
	CDP_CUDA_CHECK(cudaMemsetAsync(fb->x, 0, tensor_bytes(p, 'x'), im->comp));
	CDP_CUDA_CHECK(cudaMemsetAsync(fb->w, 0, tensor_bytes(p, 'w'), im->comp));
	CDP_CUDA_CHECK(cudaMemsetAsync(fb->y, 0, tensor_bytes(p, 'y'), im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	if (measure)
		for (size_t b = limit; b >= ((size_t)1 << 20) && !fb->ws; b /= 2)
			find_ws(fb, b);
	return 0;
}

/* One trial (cu_algo_first's run) of a candidate of direction dir on the
 * scratch tensors: 0 when it runs; one whose workspace cannot be had now
 * is passed over. Without scratch (no memory) every candidate is taken
 * untried. */
typedef struct trial {
	cu_impl *im;
	cu_plan *p;
	int dir;
	find_bufs *fb;
} trial;

static int try_cand(void *ctx, const cu_cand *c)
{
	trial *t = ctx;
	cu_plan *p = t->p;
	find_bufs *fb = t->fb;
	const float zero = 0.0f;
	const void *a[NDIR] = { fb->x, fb->w, fb->x }, *b[NDIR] = { fb->w, fb->y, fb->y };
	void *out[NDIR] = { fb->y, fb->x, fb->w };
	cudnnStatus_t st;

	use_cand(p, t->dir, c);
	if (!fb->x)
		return 0;
	if (find_ws(fb, c->ws) < 0)
		return -1;
	st = conv_exec(t->im, p, t->dir, c, a[t->dir], b[t->dir], out[t->dir], &zero, fb->ws);
	if (st == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(t->im->comp) != cudaSuccess) {
		cudaGetLastError();
		st = CUDNN_STATUS_EXECUTION_FAILED;
	}
	if (st == CUDNN_STATUS_SUCCESS)
		return 0;
	fprintf(stderr, "%s: note: cuDNN's %s algorithm %d (%s) failed on the convolution "
	        "%dx%dx%dx%d -> %d (%dx%d, stride %d) in %s: %s; trying the next\n",
	        program_invocation_short_name, dir_name[t->dir], c->algo, algo_name(t->dir, c->algo),
	        p->d.n, p->d.c, p->d.h, p->d.w, p->d.f, p->d.kh, p->d.kw, p->d.stride,
	        cdp_precision_name(p->prec), cudnnGetErrorString(st));
	return -1;
}

/* Tries the candidates of direction dir in order and keeps the first that
 * runs (its math type set); 0, or -1 when none does. */
static int try_dir(cu_impl *im, cu_plan *p, int dir, find_bufs *fb)
{
	trial t = { im, p, dir, fb };
	int i = cu_algo_first(p->list[dir], p->nlist[dir], try_cand, &t);

	if (i < 0)
		return -1;
	p->cur[dir] = i;
	use_cand(p, dir, &p->list[dir][i]);
	return 0;
}

/* Lists, tries and chooses the algorithms of the three directions,
 * measuring when asked to (and there is memory to measure with). Returns
 * -1 when a direction has no algorithm that runs: cuDNN always has one for
 * a valid float 2-d convolution, but not necessarily for every
 * half-precision channels-last shape. */
static int plan_algos(cdp_backend *be, cu_plan *p)
{
	cu_impl *im = cu_im(be);
	size_t free_b = 0, total_b = 0, limit = WS_MAX;
	find_bufs fb;
	cu_cand c[CU_MAXC];
	int order[CU_MAXC], measure, rc = 0;

	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
		cudaGetLastError();     /* keep WS_MAX; leave no error for the next check */
	else if (free_b / 4 < limit)
		limit = free_b / 4;
	if (find_alloc(im, p, im->benchmark, limit, &fb) < 0)
		memset(&fb, 0, sizeof fb);
	measure = im->benchmark && fb.ws;
	if (measure)
		limit = fb.ws_bytes;
	for (int dir = 0; dir < NDIR && rc == 0; dir++) {
		int n = cands(im, p, dir, &fb, measure, c), k;
		for (int i = 0; i < n; i++) {
			c[i].ws = SIZE_MAX;
			if (c[i].ok && cu_math_allowed(p->prec, c[i].math)) {
				use_cand(p, dir, &c[i]);
				if (ws_size(im, p, dir, c[i].algo, &c[i].ws) != CUDNN_STATUS_SUCCESS)
					c[i].ws = SIZE_MAX;
			}
		}
		k = cu_algo_order(c, n, p->prec, dir != DIR_FWD && !measure, limit, order);
		p->nlist[dir] = k;
		for (int i = 0; i < k; i++)
			p->list[dir][i] = c[order[i]];
		rc = try_dir(im, p, dir, &fb);
		if (rc == 0)
			p->ws[dir] = p->list[dir][p->cur[dir]].ws;
	}
	find_free(&fb);
	if (rc == 0 && getenv("CDP_CUDNN_VERBOSE") && !strcmp(getenv("CDP_CUDNN_VERBOSE"), "1"))
		fprintf(stderr, "%s: cuDNN plan %dx%dx%dx%d -> %d (%dx%d, stride %d, pad %d, dil %d) "
		        "%s%s: fwd %s, data %s, filter %s (of %d, %d, %d usable)\n",
		        program_invocation_short_name, p->d.n, p->d.c, p->d.h, p->d.w, p->d.f,
		        p->d.kh, p->d.kw, p->d.stride, p->d.pad, p->d.dil, cdp_precision_name(p->prec),
		        measure ? " measured" : "",
		        algo_name(DIR_FWD, p->list[DIR_FWD][p->cur[DIR_FWD]].algo),
		        algo_name(DIR_DATA, p->list[DIR_DATA][p->cur[DIR_DATA]].algo),
		        algo_name(DIR_FILT, p->list[DIR_FILT][p->cur[DIR_FILT]].algo),
		        p->nlist[DIR_FWD], p->nlist[DIR_DATA], p->nlist[DIR_FILT]);
	return rc;
}

/* The descriptors of p for precision p->prec and its algorithms; -1 when
 * cuDNN has no algorithm for some direction. */
static int plan_setup(cdp_backend *be, cu_plan *p)
{
	const cdp_conv_desc *d = &p->d;
	int on, oc, ohh, oww;
	cudnnDataType_t dt = p->prec == CDP_PREC_BF16 ? CUDNN_DATA_BFLOAT16 :
	                     p->prec == CDP_PREC_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
	cudnnTensorFormat_t fmt = p->staged ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;

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
 * channels-last algorithm that runs (a first layer with 3 input channels
 * is the likely case) runs in tf32 instead, with a note on stderr: the
 * layer is then slower and its operands rounded to TF32 rather than
 * bf16/fp16, but the run goes on, as PyTorch's autocast would. */
static cu_plan *plan_new(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_plan *p = calloc(1, sizeof *p);
	size_t ws;
	int rc;

	if (!p)
		cu_fail(__FILE__, __LINE__, "calloc", "ENOMEM", "out of memory for a conv plan");
	p->d = *d;
	p->req = p->prec = be->precision;
	p->staged = staged_prec(cu_im(be), p->prec);
	rc = plan_setup(be, p);
	if (rc < 0 && p->staged && p->prec == CDP_PREC_TF32) {
		fprintf(stderr, "%s: note: cuDNN has no tf32 channels-last algorithm for the "
		        "convolution %dx%dx%d -> %d (%dx%d, stride %d); it runs NCHW\n",
		        program_invocation_short_name, d->c, d->h, d->w, d->f, d->kh, d->kw, d->stride);
		plan_descs_free(p);
		p->staged = 0;
		rc = plan_setup(be, p);
	} else if (rc < 0 && is_half(p->prec)) {
		fprintf(stderr, "%s: note: cuDNN has no %s channels-last algorithm for the "
		        "convolution %dx%dx%d -> %d (%dx%d, stride %d); it runs in tf32\n",
		        program_invocation_short_name, cdp_precision_name(p->prec), d->c, d->h, d->w, d->f,
		        d->kh, d->kw, d->stride);
		plan_descs_free(p);
		p->prec = CDP_PREC_TF32;
		p->staged = 0;
		rc = plan_setup(be, p);
	}
	if (rc < 0)
		cu_fail(__FILE__, __LINE__, "cudnnGetConvolutionAlgorithm", "no algorithm",
		        "no convolution algorithm runs with this shape and workspace limit");
	ws = p->ws[DIR_FWD];
	if (p->ws[DIR_DATA] > ws)
		ws = p->ws[DIR_DATA];
	if (p->ws[DIR_FILT] > ws)
		ws = p->ws[DIR_FILT];
	p->off_w = align256(ws);
	p->total = p->off_w + align256(tensor_bytes(p, 'w'));
	if (p->staged) {
		p->off_x = p->total;
		p->off_y = p->off_x + align256(tensor_bytes(p, 'x'));
		p->total = p->off_y + align256(tensor_bytes(p, 'y'));
	}
	return p;
}

/* The plan for (d, be->precision), or NULL. A net has a few dozen distinct
 * shapes: a linear search from the most recent is enough. */
static cu_plan *plan_find(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_impl *im = cu_im(be);

	for (int i = im->nplans - 1; i >= 0; i--)
		if (im->plans[i]->req == be->precision && same_desc(&im->plans[i]->d, d))
			return im->plans[i];
	return NULL;
}

/* The plan an op runs. Only conv_workspace() makes plans: an op without
 * one was never sized for this precision, and its caller's workspace (sized
 * for another precision, say fp32 while bf16 adds the staging) may be too
 * small for what the plan would write. */
static cu_plan *plan_need(cdp_backend *be, const cdp_conv_desc *d, const char *op)
{
	cu_plan *p = plan_find(be, d);
	char msg[320];

	if (p)
		return p;
	snprintf(msg, sizeof msg, "no workspace was sized for the convolution %dx%dx%dx%d -> %d "
	         "(%dx%d, stride %d) in %s: call conv_workspace() after set_precision() (a net: "
	         "cdp_net_set_precision)", d->n, d->c, d->h, d->w, d->f, d->kh, d->kw, d->stride,
	         cdp_precision_name(be->precision));
	cu_fail(__FILE__, __LINE__, op, "unsized plan", msg);
}

/* Called for every conv layer when the net is built or changes precision:
 * makes the plan and grows the reduction scratch for the layer's bias
 * gradient (over the output, or over the input for a transposed
 * convolution), so that steps allocate nothing. */
static size_t cu_conv_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_find(be, d);
	size_t out = (size_t)d->n * d->f * d->oh * d->ow, in = (size_t)d->n * d->c * d->h * d->w;

	if (!p) {
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
	}
	cu_scratch(be, out > in ? out : in);
	return p->total;
}

/* Runs direction dir with the plan's candidate; when cuDNN refuses it
 * (an error status), goes on to the next candidate whose workspace fits
 * the plan's cuDNN part [0, off_w) and keeps that one, with a note. */
static void run_dir(cu_impl *im, cu_plan *p, int dir, const void *a, const void *b, void *out,
                    float beta, void *ws, const char *op)
{
	for (;;) {
		const cu_cand *c = &p->list[dir][p->cur[dir]];
		cudnnStatus_t st = conv_exec(im, p, dir, c, a, b, out, &beta, ws);
		int next;

		if (st == CUDNN_STATUS_SUCCESS)
			return;
		next = cu_algo_next(p->list[dir], p->nlist[dir], p->cur[dir] + 1, p->off_w);
		if (next < 0)
			cu_fail(__FILE__, __LINE__, op, cudnnGetErrorString(st), cu_dnn_msg());
		fprintf(stderr, "%s: note: cuDNN's %s algorithm %d (%s) failed at run time: %s; "
		        "using %d (%s) from now on\n", program_invocation_short_name, dir_name[dir],
		        c->algo, algo_name(dir, c->algo), cudnnGetErrorString(st),
		        p->list[dir][next].algo, algo_name(dir, p->list[dir][next].algo));
		p->cur[dir] = next;
		p->ws[dir] = p->list[dir][next].ws;
		use_cand(p, dir, &p->list[dir][next]);
	}
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

/* cuDNN's staging converts a float x (cdk_to_nhwc_half); a bf16 input
 * would need its own conversion, not written: the stash widens it
 * (backend.h) */
static int cu_conv_takes_xh(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	(void)d;
	return 0;
}

/* cuDNN reads one x: a concat's output is made (net_plan.c) */
static int cu_conv_takes_split(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	(void)d;
	return 0;
}

/* cuDNN's staging converts y from bf16 into a float y (cdk_from_nhwc_half,
 * which adds beta): writing the bf16 alone would need a conversion of its
 * own, not written; the stash's batchnorm reads a float y (backend.h) */
static int cu_conv_writes_yh(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	(void)d;
	return 0;
}

/* cuDNN's staging converts a float dy and writes a float dx: bf16
 * gradients would need conversions of their own, not written; the net
 * keeps them float (net_plan.c, backend.h). Both conv_takes_dyh and
 * conv_writes_dxh. */
static int cu_conv_float_grads(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	(void)d;
	return 0;
}

/* gradients as float (d->dyh, d->dxh 0: cu_conv_float_grads) */
static void float_grads(const cdp_conv_desc *d)
{
	if (d->dyh || d->dxh)
		cu_fail(__FILE__, __LINE__, "conv", "bf16 gradient",
		        "a convolution's gradient was given or asked for in bf16 "
		        "(conv_takes_dyh, conv_writes_dxh are 0)");
}

/* x as float (d->xh 0: cu_conv_takes_xh; d->nseg 0: cu_conv_takes_split) */
static const float *float_x(const cdp_conv_desc *d, const void *x)
{
	if (d->xh)
		cu_fail(__FILE__, __LINE__, "conv", "bf16 input",
		        "a convolution was given its input in bf16 (conv_takes_xh is 0)");
	if (d->nseg > 0)
		cu_fail(__FILE__, __LINE__, "conv", "input in segments",
		        "a convolution was given its input in segments (conv_takes_split is 0)");
	return x;
}

static void cu_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *xv,
                        const float *w, const float *bias, void *yv, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_need(be, d, "conv_fwd");
	const float *x = float_x(d, xv);
	float *y = yv;

	if (d->yh)
		cu_fail(__FILE__, __LINE__, "conv", "bf16 output",
		        "a convolution was asked for its output in bf16 (conv_writes_yh is 0)");

	if (!p->staged) {
		w = aligned_w(im, p, w, ws);
		run_dir(im, p, DIR_FWD, x, w, y, 0.0f, ws, "cudnnConvolutionForward");
	} else {
		char *b = ws;
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, x, b + p->off_x);
		cdk_to_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, w, b + p->off_w);
		CDP_KERNEL_CHECK();
		run_dir(im, p, DIR_FWD, b + p->off_x, b + p->off_w, b + p->off_y, 0.0f, ws,
		        "cudnnConvolutionForward");
		cdk_from_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, b + p->off_y, y, 0.0f);
		CDP_KERNEL_CHECK();
	}
	if (bias) {
		cdk_bias_add(im->comp, d->n, d->f, d->oh * d->ow, bias, y);
		CDP_KERNEL_CHECK();
	}
}

/* 2x2 windows at stride 2 that tile the input (cpu_col2im_disjoint), with
 * weights that cdk_deconv2 holds: the float32 data gradient is ours */
static int disjoint2(const cdp_conv_desc *d)
{
	return d->kh == 2 && d->kw == 2 && d->stride == 2 && d->pad == 0 && d->dil == 1 &&
	       d->h == 2 * d->oh && d->w == 2 * d->ow && cdk_deconv2_fits(d->f) &&
	       d->n <= 65535 && d->c <= 65535;
}

/* dx (N,C,H,W) = beta dx + conv_transpose(dy, w) */
static void cu_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const void *dyv,
                             const float *w, void *dxv, float beta, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_need(be, d, "conv_bwd_data");
	const float *dy = dyv;
	float *dx = dxv;

	float_grads(d);

	if (!p->staged && disjoint2(d)) {
		/* our kernel: cuDNN's took 122 ms on an H200 for the U-Net's top one */
		cdk_deconv2(im->comp, d->n, d->c, d->f, d->oh, d->ow, dy, w, dx, beta);
		CDP_KERNEL_CHECK();
		return;
	}
	if (!p->staged) {
		w = aligned_w(im, p, w, ws);
		run_dir(im, p, DIR_DATA, w, dy, dx, beta, ws, "cudnnConvolutionBackwardData");
		return;
	}
	char *b = ws;
	cdk_to_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, dy, b + p->off_y);
	cdk_to_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, w, b + p->off_w);
	CDP_KERNEL_CHECK();
	run_dir(im, p, DIR_DATA, b + p->off_w, b + p->off_y, b + p->off_x, 0.0f, ws,
	        "cudnnConvolutionBackwardData");
	cdk_from_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, b + p->off_x, dx, beta);
	CDP_KERNEL_CHECK();
}

/* dw (F,C,KH,KW) += dW(x, dy); dbias (F) += sum of dy over N, OH, OW */
static void cu_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const void *xv,
                               const void *dyv, float *dw, float *dbias, void *ws)
{
	cu_impl *im = cu_im(be);
	cu_plan *p = plan_need(be, d, "conv_bwd_filter");
	const float *x = float_x(d, xv), *dy = dyv;

	float_grads(d);

	if (!p->staged && misaligned(dw)) {
		/* into the aligned W slot, then added: dw + sum, as beta = 1 does */
		float *tmp = (float *)((char *)ws + p->off_w);
		run_dir(im, p, DIR_FILT, x, dy, tmp, 0.0f, ws, "cudnnConvolutionBackwardFilter");
		cdk_axpy(im->comp, 1.0f, tmp, dw, (size_t)d->f * d->c * d->kh * d->kw);
		CDP_KERNEL_CHECK();
	} else if (!p->staged) {
		run_dir(im, p, DIR_FILT, x, dy, dw, 1.0f, ws, "cudnnConvolutionBackwardFilter");
	} else {
		char *b = ws;
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->c, d->h, d->w, x, b + p->off_x);
		cdk_to_nhwc_half(im->comp, p->prec, d->n, d->f, d->oh, d->ow, dy, b + p->off_y);
		CDP_KERNEL_CHECK();
		run_dir(im, p, DIR_FILT, b + p->off_x, b + p->off_y, b + p->off_w, 0.0f, ws,
		        "cudnnConvolutionBackwardFilter");
		/* dw in (F,KH,KW,C) half (or float): back to (F,C,KH,KW) float, accumulating */
		cdk_from_nhwc_half(im->comp, p->prec, d->f, d->c, d->kh, d->kw, b + p->off_w, dw, 1.0f);
		CDP_KERNEL_CHECK();
	}
	if (dbias) {
		size_t count = (size_t)d->n * d->f * d->oh * d->ow;
		cdk_bias_grad(im->comp, d->n, d->f, d->oh * d->ow, dy, dbias, cu_scratch(be, count));
		CDP_KERNEL_CHECK();
	}
}

/* The two ops, the batchnorm in place (cuDNN's inference batchnorm is
 * elementwise per channel); the fusion is the CPU backend's. */
static void cu_conv_fwd_bn(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                           const float *w, const float *bias, const cdp_bn_infer *bn, float *y,
                           void *ws)
{
	cu_conv_fwd(be, d, x, w, bias, y, ws);
	be->bn_fwd_infer(be, d->n, d->f, d->oh * d->ow, y, bn->gamma, bn->beta, y, bn->mean,
	                 bn->var, bn->eps, bn->act, bn->slope);
}

void cu_conv_init(cdp_backend *be)
{
	be->conv_workspace = cu_conv_workspace;
	be->conv_takes_xh = cu_conv_takes_xh;
	be->conv_writes_yh = cu_conv_writes_yh;
	be->conv_takes_dyh = cu_conv_float_grads;
	be->conv_writes_dxh = cu_conv_float_grads;
	be->conv_takes_split = cu_conv_takes_split;
	be->conv_fwd = cu_conv_fwd;
	be->conv_fwd_bn = cu_conv_fwd_bn;
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
