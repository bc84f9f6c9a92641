/* cuda_algo.h: which of cuDNN's convolution algorithms a plan may use, and
 * in which order it tries them (cuda_conv.c). Plain C without CUDA, so
 * that tests/gpu/test_conv_algo.c checks the rules on any machine.
 *
 * cuDNN lists candidates per direction, best first (its heuristics' order,
 * or measured times with CDP_CUDNN_BENCHMARK=1). A listed algorithm may
 * still fail when it runs (PyTorch tries each in turn for that reason,
 * NHWC bf16/fp16 with 3 to 6 input channels being the usual case), so a
 * plan keeps the whole usable list, runs each once on scratch tensors when
 * it is made and takes the first that succeeds; at run time a failure moves
 * on to the next candidate whose workspace fits what the plan reserved.
 */
#ifndef CDP_CUDA_ALGO_H
#define CDP_CUDA_ALGO_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"

#define CU_MAXC 16   /* candidates per direction */

/* cuDNN's math types, as a candidate was rated with (cudnnMathType_t) */
enum { CU_MATH_DEFAULT, CU_MATH_TENSOR, CU_MATH_TENSOR_CONV, CU_MATH_FMA };

typedef struct cu_cand {
	int algo;     /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
	int ok;       /* cuDNN rated it with CUDNN_STATUS_SUCCESS */
	int det;      /* CUDNN_DETERMINISTIC */
	int math;     /* CU_MATH_* */
	size_t ws;    /* its workspace in the math type it runs in; SIZE_MAX: cuDNN cannot say */
	int transform; /* an FFT or non-fused Winograd algorithm (cu_algo_transform) */
} cu_cand;

/* Whether algorithm algo of direction dir (0 forward, 1 backward data,
 * 2 backward filter; cuDNN's enum values) computes in a transformed
 * domain: FFT, FFT_TILING or WINOGRAD_NONFUSED. In float32 these lose
 * more than the 1e-4 fp32 promises against the CPU (measured on an H200:
 * WINOGRAD_NONFUSED's filter gradient of a 3x3 layer 5e-4 to 8e-4, FFT's
 * forward 1.1e-3 after a few layers of a ResNet), so fp32 takes none of
 * them; tf32 and the half types, whose tolerances are wider, may. The
 * fused WINOGRAD (F(2x2,3x3)) stays within it. */
static inline int cu_algo_transform(int dir, int algo)
{
	static const unsigned mask[3] = {
		1u << 4 | 1u << 5 | 1u << 7, /* fwd: FFT, FFT_TILING, WINOGRAD_NONFUSED */
		1u << 2 | 1u << 3 | 1u << 5, /* data: FFT, FFT_TILING, WINOGRAD_NONFUSED */
		1u << 2 | 1u << 5 | 1u << 6, /* filter: FFT, WINOGRAD_NONFUSED, FFT_TILING */
	};
	return dir >= 0 && dir < 3 && algo >= 0 && algo < 32 && (mask[dir] >> algo & 1);
}

/* Whether precision prec may run a candidate of math type math: fp32 takes
 * no tensor-core (TF32) kernel, tf32 none that converts float tensors
 * down to fp16 (tf32 promises TF32 rounding, not fp16 range). */
static inline int cu_math_allowed(int prec, int math)
{
	if (prec == CDP_PREC_FP32)
		return math != CU_MATH_TENSOR && math != CU_MATH_TENSOR_CONV;
	if (prec == CDP_PREC_TF32)
		return math != CU_MATH_TENSOR_CONV;
	return 1;
}

/* The candidates of c[0..n) a plan may use, in the order it tries them:
 * rated ok, math allowed for prec, no transform in fp32, workspace within
 * limit; with want_det
 * the deterministic ones first (reruns then give the same bits), then the
 * rest, each group in cuDNN's order. Writes their indices to order[] (n
 * entries at most) and returns how many. */
static inline int cu_algo_order(const cu_cand *c, int n, int prec, int want_det, size_t limit,
                                int *order)
{
	int k = 0;

	for (int pass = want_det ? 0 : 1; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			if (!c[i].ok || !cu_math_allowed(prec, c[i].math) || c[i].ws == SIZE_MAX ||
			    c[i].ws > limit || (prec == CDP_PREC_FP32 && c[i].transform))
				continue;
			if (want_det && (pass == 0) != (c[i].det != 0))
				continue;
			order[k++] = i;
		}
	return k;
}

/* The position in list[0..n) of the first candidate that run(ctx, c)
 * accepts (returns 0 for), each tried once in order, or -1: the choice
 * when a plan is made, run being one convolution on scratch tensors. */
static inline int cu_algo_first(const cu_cand *list, int n,
                                int (*run)(void *ctx, const cu_cand *c), void *ctx)
{
	for (int i = 0; i < n; i++)
		if (run(ctx, &list[i]) == 0)
			return i;
	return -1;
}

/* The position in list[from..n) of the first candidate whose workspace
 * fits cap bytes, or -1: where a plan goes on when list[from - 1] failed. */
static inline int cu_algo_next(const cu_cand *list, int n, int from, size_t cap)
{
	for (int i = from; i < n; i++)
		if (list[i].ws <= cap)
			return i;
	return -1;
}

#endif
