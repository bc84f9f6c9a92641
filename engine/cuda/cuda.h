/* cuda.h: the CUDA backend's private header (engine/cuda/ only).
 *
 * The backend fills the cdp_backend table (backend.h) with cuDNN for
 * convolution, batchnorm and pooling, cuBLAS for GEMM, and our own kernels
 * (cuda_kern.h) for everything else, the activations included. The files:
 *   cuda_backend.c  the table, device binding, memory, the data path,
 *                   precision, error reporting
 *   cuda_ops.c      GEMM, the BLAS-like ops, the layer ops that are our
 *                   kernels, losses, metrics, optimizers
 *   cuda_conv.c     cuDNN convolution: per-shape plans, algorithms, the
 *                   bf16/fp16 channels-last staging
 *   cuda_dnn.c      cuDNN batchnorm and pooling, the activations
 *
 * Every op queues work on the compute stream and returns; an op cannot
 * return an error, so a failed CUDA, cuDNN or cuBLAS call (a bug, or a
 * dead device) prints "prog: file.c:LINE: call: STATUS_NAME: message",
 * flushes every stdio stream (abort() does not) and aborts. Under mpirun
 * that ends the job.
 */
#ifndef CDP_CUDA_H
#define CDP_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cublas_v2.h>
#include "backend.h"

/* Prints the failure (call is the stringized expression; only the
 * function name before '(' is printed) and aborts. */
_Noreturn void cu_fail(const char *file, int line, const char *call, const char *status,
                       const char *msg);
/* cuDNN's last error message (thread-local in cuDNN), for cu_fail */
const char *cu_dnn_msg(void);

#define CDP_CUDA_CHECK(call) do { \
	cudaError_t cu_e_ = (call); \
	if (cu_e_ != cudaSuccess) \
		cu_fail(__FILE__, __LINE__, #call, cudaGetErrorName(cu_e_), cudaGetErrorString(cu_e_)); \
} while (0)
#define CDP_CUDNN_CHECK(call) do { \
	cudnnStatus_t cu_s_ = (call); \
	if (cu_s_ != CUDNN_STATUS_SUCCESS) \
		cu_fail(__FILE__, __LINE__, #call, cudnnGetErrorString(cu_s_), cu_dnn_msg()); \
} while (0)
#define CDP_CUBLAS_CHECK(call) do { \
	cublasStatus_t cu_b_ = (call); \
	if (cu_b_ != CUBLAS_STATUS_SUCCESS) \
		cu_fail(__FILE__, __LINE__, #call, cublasGetStatusName(cu_b_), cublasGetStatusString(cu_b_)); \
} while (0)
/* After our own kernel launchers: a bad launch shows up here. */
#define CDP_KERNEL_CHECK() CDP_CUDA_CHECK(cudaPeekAtLastError())

typedef struct cu_plan cu_plan;      /* cuda_conv.c */

/* A device buffer that only grows; `bytes` is its size. */
typedef struct cu_buf {
	void *p;
	size_t bytes;
} cu_buf;

typedef struct cu_impl {
	int device;
	cudaStream_t comp;       /* every op */
	cudaStream_t copy;       /* to_device_async */
	cudaEvent_t fence;       /* copy_fence: recorded on copy, waited on by comp */
	cudnnHandle_t dnn;       /* bound to comp */
	cublasHandle_t blas;     /* bound to comp */
	int benchmark;           /* CDP_CUDNN_BENCHMARK=1: measure conv algorithms */
	int bn_cudnn;            /* CDP_CUDNN_BN=1: cuDNN's batchnorm in training, not ours */
	int nhwc_tf32;           /* CDP_CUDNN_NHWC=1: tf32 convolutions staged channels-last */

	cu_buf scratch;          /* reductions (cdk_reduce_scratch_bytes) */
	double *dres;            /* device: [0] a sum, [1] a count (sumsq, losses) */
	double *hres;            /* pinned host copy of dres */
	cu_buf conf;             /* device uint64 confusion counts (k*k) */
	uint64_t *hconf;         /* pinned host copy of conf */
	size_t hconf_n;
	cu_buf aug;              /* device copy of prep_batch's aug array */
	cdp_prep_aug *haug;      /* pinned staging for it */
	size_t haug_n;
	cudaEvent_t aug_done;    /* the last upload from haug has finished */

	/* cuDNN descriptors of the non-convolution ops, set per call (cuda_dnn.c) */
	cudnnTensorDescriptor_t ta, tb, tbn;
	cudnnPoolingDescriptor_t pool;

	cu_plan **plans;         /* convolution plans, one per (desc, precision) */
	int nplans, cap_plans;
} cu_impl;

static inline cu_impl *cu_im(cdp_backend *be) { return (cu_impl *)be->impl; }

/* cuda_backend.c: grows a device buffer to at least `bytes` (waits for the
 * compute stream before freeing the old one); aborts when memory runs out. */
void cu_buf_reserve(cdp_backend *be, cu_buf *b, size_t bytes);
/* The reduction scratch, grown for a reduction over n elements. */
void *cu_scratch(cdp_backend *be, size_t n);
/* Copies dres to hres and waits for the compute stream. */
void cu_fetch_results(cdp_backend *be);

/* cuda_ops.c, cuda_conv.c, cuda_dnn.c: put their ops into the table;
 * cuda_conv.c and cuda_dnn.c also create and free their own state. */
void cu_ops_init(cdp_backend *be);
void cu_conv_init(cdp_backend *be);
void cu_conv_free(cdp_backend *be);
void cu_dnn_ops(cdp_backend *be);
int cu_dnn_init(cdp_backend *be, char *err, size_t cap);   /* 0 or -1 with a reason */
void cu_dnn_free(cdp_backend *be);
/* cuda_backend.c: puts every op of the backend into be's table and nothing
 * else, touching no device: cdp_backend_cuda's last step, and how
 * tests/engine/test_backend_table.c checks without a GPU that no op is
 * missing. */
void cu_table(cdp_backend *be);

#endif
