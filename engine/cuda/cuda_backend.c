/* cuda_backend.c: the CUDA backend's constructor and table, device
 * memory, the data path, precision and error reporting (cuda.h lists the
 * other files).
 *
 * Streams: every op is queued on one compute stream, so ops run in the
 * order the layers call them and need no events between them. A second
 * stream carries to_device_async, so the next batch's upload overlaps the
 * current step; copy_fence records an event on it that the compute stream
 * waits for. Both are ordinary (blocking) streams: any stray work on the
 * legacy default stream still orders with them, and we queue none.
 *
 * Synchronous ops (to_device, to_host, sumsq, the losses, confusion) wait
 * for the compute stream: their result, or their host buffer, must be
 * ready when they return, as on the CPU.
 *
 * Threads: the backend is used by one thread, except the data path
 * (host_alloc, to_device_async, copy_wait), which a prefetch thread may
 * call; those bind the device on the calling thread first.
 */
#define _GNU_SOURCE
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda.h"
#include "cuda_kern.h"

/* ---- errors ---- */

_Noreturn void cu_fail(const char *file, int line, const char *call, const char *status,
                       const char *msg)
{
	const char *base = strrchr(file, '/');

	fprintf(stderr, "%s: %s:%d: %.*s: %s%s%s\n", program_invocation_short_name,
	        base ? base + 1 : file, line, (int)strcspn(call, "("), call, status,
	        msg && *msg ? ": " : "", msg ? msg : "");
	/* every stream: stdout into a file is block-buffered, and what it holds
	 * (the results before the failure) would die with abort() */
	fflush(NULL);
	abort();
}

const char *cu_dnn_msg(void)
{
	static __thread char buf[512];

	buf[0] = '\0';
	cudnnGetLastErrorString(buf, sizeof buf);
	return buf;
}

/* The data path may run on a thread that has not used the device yet. */
static void cu_bind(const cu_impl *im)
{
	int cur = -1;

	CDP_CUDA_CHECK(cudaGetDevice(&cur));
	if (cur != im->device)
		CDP_CUDA_CHECK(cudaSetDevice(im->device));
}

/* ---- memory ---- */

static void *cu_alloc(cdp_backend *be, size_t bytes)
{
	cu_impl *im = cu_im(be);
	void *p = NULL;

	if (bytes == 0)
		bytes = 64;
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		cudaGetLastError();     /* out of memory is not sticky: clear it */
		return NULL;
	}
	/* Zeroed before return: the buffer may next be written by the copy
	 * stream, which a memset queued on the compute stream would race. */
	CDP_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	return p;
}

/* Queued work may still use p: wait for both streams first. */
static void cu_free(cdp_backend *be, void *p)
{
	cu_impl *im = cu_im(be);

	if (!p)
		return;
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->copy));
	CDP_CUDA_CHECK(cudaFree(p));
}

void cu_buf_reserve(cdp_backend *be, cu_buf *b, size_t bytes)
{
	cu_impl *im = cu_im(be);

	if (b->p && b->bytes >= bytes)
		return;
	bytes = (bytes + 255) / 256 * 256;
	if (bytes < 256)
		bytes = 256;
	if (b->p) {
		CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
		CDP_CUDA_CHECK(cudaFree(b->p));
		b->p = NULL;
		b->bytes = 0;
	}
	CDP_CUDA_CHECK(cudaMalloc(&b->p, bytes));
	b->bytes = bytes;
}

void *cu_scratch(cdp_backend *be, size_t n)
{
	cu_impl *im = cu_im(be);

	cu_buf_reserve(be, &im->scratch, cdk_reduce_scratch_bytes(n));
	return im->scratch.p;
}

void cu_fetch_results(cdp_backend *be)
{
	cu_impl *im = cu_im(be);

	CDP_CUDA_CHECK(cudaMemcpyAsync(im->hres, im->dres, 2 * sizeof(double),
	                               cudaMemcpyDeviceToHost, im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
}

/* The caller may reuse src at once (CPU semantics), so wait. */
static void cu_to_device(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	cu_impl *im = cu_im(be);

	if (bytes == 0)
		return;
	CDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
}

static void cu_to_host(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	cu_impl *im = cu_im(be);

	if (bytes == 0)
		return;
	CDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, im->comp));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
}

/* memmove semantics, as on the CPU: overlapping ranges are copied in
 * pieces no longer than their distance, in the order that reads every
 * piece before it is overwritten. */
static void cu_copy(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	cu_impl *im = cu_im(be);
	char *d = dst;
	const char *s = src;
	uintptr_t ud = (uintptr_t)dst, us = (uintptr_t)src;
	size_t gap = ud > us ? ud - us : us - ud;

	if (bytes == 0 || d == s)
		return;
	if (gap >= bytes) {
		CDP_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, im->comp));
		return;
	}
	for (size_t done = 0; done < bytes; done += gap) {
		size_t len = bytes - done < gap ? bytes - done : gap;
		size_t off = ud < us ? done : bytes - done - len;
		CDP_CUDA_CHECK(cudaMemcpyAsync(d + off, s + off, len, cudaMemcpyDeviceToDevice,
		                               im->comp));
	}
}

static void cu_sync(cdp_backend *be)
{
	CDP_CUDA_CHECK(cudaStreamSynchronize(cu_im(be)->comp));
}

/* The work runs on the device; there are no CPU workers to size. */
static void cu_set_threads(cdp_backend *be, int n) { be->threads = 1; }

/* Every precision of backend.h: fp32 strict, tf32 tensor cores, and
 * bf16/fp16 rounding of convolution and GEMM inputs (cuda_conv.c,
 * cuda_ops.c read be->precision per call; plans are cached per precision). */
static int cu_set_precision(cdp_backend *be, int prec)
{
	if (prec != CDP_PREC_FP32 && prec != CDP_PREC_TF32 && prec != CDP_PREC_BF16 &&
	    prec != CDP_PREC_FP16)
		return -1;
	be->precision = prec;
	return 0;
}

/* ---- the data path ---- */

static void *cu_host_alloc(cdp_backend *be, size_t bytes)
{
	void *p = NULL;

	cu_bind(cu_im(be));
	if (bytes == 0)
		bytes = 64;
	if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	memset(p, 0, bytes);
	return p;
}

/* As cu_free: a copy queued from or into p may still run (cudaFreeHost
 * is not documented to wait for it), so wait for both streams first. */
static void cu_host_free(cdp_backend *be, void *p)
{
	cu_impl *im = cu_im(be);

	if (!p)
		return;
	cu_bind(im);
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->copy));
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->comp));
	CDP_CUDA_CHECK(cudaFreeHost(p));
}

static void cu_to_device_async(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	cu_impl *im = cu_im(be);

	if (bytes == 0)
		return;
	cu_bind(im);
	CDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, im->copy));
}

static void cu_copy_fence(cdp_backend *be)
{
	cu_impl *im = cu_im(be);

	CDP_CUDA_CHECK(cudaEventRecord(im->fence, im->copy));
	CDP_CUDA_CHECK(cudaStreamWaitEvent(im->comp, im->fence, 0));
}

static void cu_copy_wait(cdp_backend *be)
{
	cu_impl *im = cu_im(be);

	cu_bind(im);
	CDP_CUDA_CHECK(cudaStreamSynchronize(im->copy));
}

static void *cu_stream(cdp_backend *be) { return (void *)cu_im(be)->comp; }

/* aug is a host array; the kernel wants it on the device. It goes through
 * pinned staging, which is rewritten only after the previous upload from
 * it has finished (aug_done), so the copy can stay asynchronous. */
static void cu_prep_batch(cdp_backend *be, int dt, int n, int c, int h, int w, const void *raw,
                          const float *mean, const float *inv, const cdp_prep_aug *aug,
                          int oh, int ow, float *img, const int32_t *lab_raw, int32_t *lab)
{
	cu_impl *im = cu_im(be);
	size_t bytes = (size_t)n * sizeof *aug;

	if (n <= 0 || c <= 0 || oh <= 0 || ow <= 0)
		return;
	CDP_CUDA_CHECK(cudaEventSynchronize(im->aug_done));
	if (im->haug_n < (size_t)n) {
		/* cudaFreeHost documents no NULL case: free only what we have */
		if (im->haug)
			CDP_CUDA_CHECK(cudaFreeHost(im->haug));
		im->haug = NULL;
		im->haug_n = 0;
		CDP_CUDA_CHECK(cudaHostAlloc((void **)&im->haug, bytes, cudaHostAllocPortable));
		im->haug_n = (size_t)n;
	}
	cu_buf_reserve(be, &im->aug, bytes);
	memcpy(im->haug, aug, bytes);
	CDP_CUDA_CHECK(cudaMemcpyAsync(im->aug.p, im->haug, bytes, cudaMemcpyHostToDevice,
	                               im->comp));
	CDP_CUDA_CHECK(cudaEventRecord(im->aug_done, im->comp));
	cdk_prep_batch(im->comp, dt, n, c, h, w, raw, mean, inv, im->aug.p, oh, ow, img,
	               lab_raw, lab);
	CDP_KERNEL_CHECK();
}

/* ---- construction ---- */

int cdp_cuda_device_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();     /* no driver or no GPU: not an error here */
		return 0;
	}
	return n;
}

int cdp_cuda_device_uuid(int device, unsigned char uuid[16])
{
	struct cudaDeviceProp prop;

	if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	memcpy(uuid, prop.uuid.bytes, 16);
	return 0;
}

/* Why the runtime found no device, in the words a user acts on: the
 * runtime says "CUDA driver version is insufficient" where there is no
 * driver at all. */
static void no_device(cudaError_t e, char *err, size_t cap)
{
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	int drv = 0, rt = 0;

	if (e == cudaErrorInsufficientDriver && access("/proc/driver/nvidia/version", F_OK) != 0) {
		snprintf(err, cap, "no NVIDIA driver is loaded on this host (no "
		         "/proc/driver/nvidia/version), so it has no usable GPU");
	} else if (e == cudaErrorInsufficientDriver) {
		cudaDriverGetVersion(&drv);
		cudaRuntimeGetVersion(&rt);
		snprintf(err, cap, "the NVIDIA driver supports CUDA %d.%d, this build needs CUDA %d.%d: "
		         "update the driver", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
	} else if (e == cudaErrorNoDevice && vis) {
		snprintf(err, cap, "no CUDA GPU is visible (CUDA_VISIBLE_DEVICES='%s')", vis);
	} else if (e == cudaErrorNoDevice) {
		snprintf(err, cap, "the NVIDIA driver sees no CUDA GPU on this host");
	} else {
		snprintf(err, cap, "no usable CUDA device: %s", cudaGetErrorString(e));
	}
	cudaGetLastError();
}

/* a GPU runs an inference batch whole (net.h, pass) */
static size_t cu_infer_pass_bytes(cdp_backend *be)
{
	(void)be;
	return 0;
}

static void cu_destroy(cdp_backend *be)
{
	cu_impl *im;

	if (!be)
		return;
	im = be->impl;
	if (im) {
		if (im->comp)
			cudaStreamSynchronize(im->comp);
		if (im->copy)
			cudaStreamSynchronize(im->copy);
		cu_conv_free(be);
		cu_dnn_free(be);
		cudaFree(im->scratch.p);
		cudaFree(im->conf.p);
		cudaFree(im->aug.p);
		cudaFree(im->dres);
		if (im->hres)
			cudaFreeHost(im->hres);
		if (im->hconf)
			cudaFreeHost(im->hconf);
		if (im->haug)
			cudaFreeHost(im->haug);
		if (im->blas)
			cublasDestroy(im->blas);
		if (im->dnn)
			cudnnDestroy(im->dnn);
		if (im->fence)
			cudaEventDestroy(im->fence);
		if (im->aug_done)
			cudaEventDestroy(im->aug_done);
		if (im->comp)
			cudaStreamDestroy(im->comp);
		if (im->copy)
			cudaStreamDestroy(im->copy);
		free(im);
		/* Teardown errors are not checked; leave none pending for the
		 * next backend's launch checks on this thread. */
		cudaGetLastError();
	}
	free(be);
}

/* Checks for the constructor, which reports instead of aborting. */
#define TRY_CUDA(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { \
		cudaGetLastError(); \
		snprintf(err, cap, "cannot set up GPU cuda:%d: %s", device, cudaGetErrorString(e_)); \
		goto fail; \
	} \
} while (0)

static int cu_libs(cdp_backend *be, int device, char *err, size_t cap)
{
	cu_impl *im = cu_im(be);
	cudnnStatus_t ds;
	cublasStatus_t bs;

	if ((ds = cudnnCreate(&im->dnn)) != CUDNN_STATUS_SUCCESS ||
	    (ds = cudnnSetStream(im->dnn, im->comp)) != CUDNN_STATUS_SUCCESS) {
		snprintf(err, cap, "cannot set up cuDNN on GPU cuda:%d: %s", device,
		         cudnnGetErrorString(ds));
		return -1;
	}
	if ((bs = cublasCreate(&im->blas)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetStream(im->blas, im->comp)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetMathMode(im->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, cap, "cannot set up cuBLAS on GPU cuda:%d: %s", device,
		         cublasGetStatusString(bs));
		return -1;
	}
	return cu_dnn_init(be, err, cap);
}

void cu_table(cdp_backend *be)
{
	be->alloc = cu_alloc;
	be->free = cu_free;
	be->to_device = cu_to_device;
	be->to_host = cu_to_host;
	be->copy = cu_copy;
	be->sync = cu_sync;
	be->set_threads = cu_set_threads;
	be->set_precision = cu_set_precision;
	be->destroy = cu_destroy;
	be->infer_pass_bytes = cu_infer_pass_bytes;
	be->host_alloc = cu_host_alloc;
	be->host_free = cu_host_free;
	be->to_device_async = cu_to_device_async;
	be->copy_fence = cu_copy_fence;
	be->copy_wait = cu_copy_wait;
	be->stream = cu_stream;
	be->prep_batch = cu_prep_batch;
	cu_ops_init(be);
	cu_conv_init(be);
	cu_dnn_ops(be);
}

cdp_backend *cdp_backend_cuda(int device, char *err, size_t cap)
{
	cdp_backend *be = NULL;
	cu_impl *im;
	struct cudaDeviceProp prop;
	int n = 0;
	cudaError_t e;
	const char *bench = getenv("CDP_CUDNN_BENCHMARK");
	const char *bn = getenv("CDP_CUDNN_BN"), *nhwc = getenv("CDP_CUDNN_NHWC");

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess) {
		no_device(e, err, cap);
		return NULL;
	}
	if (device < 0 || device >= n) {
		snprintf(err, cap, "device cuda:%d does not exist (%d GPU%s visible)", device, n,
		         n == 1 ? "" : "s");
		return NULL;
	}
	TRY_CUDA(cudaGetDeviceProperties(&prop, device));
	/* The kernels are built for sm_80, sm_90 and compute_90 PTX (NVCCFLAGS),
	 * and bf16 convolutions need sm_80: older GPUs cannot run them. */
	if (prop.major < 8) {
		snprintf(err, cap, "GPU cuda:%d (%s) has compute capability %d.%d; the CUDA "
		         "backend needs 8.0 or later", device, prop.name, prop.major, prop.minor);
		return NULL;
	}
	TRY_CUDA(cudaSetDevice(device));
	be = calloc(1, sizeof *be);
	im = calloc(1, sizeof *im);
	if (!be || !im) {
		free(im);
		snprintf(err, cap, "cannot create the CUDA backend: out of memory");
		goto fail;
	}
	be->impl = im;
	be->name = "cuda";
	be->device = im->device = device;
	be->threads = 1;
	be->precision = CDP_PREC_FP32;
	im->benchmark = bench && !strcmp(bench, "1");
	im->bn_cudnn = bn && !strcmp(bn, "1");
	im->nhwc_tf32 = nhwc && !strcmp(nhwc, "1");

	TRY_CUDA(cudaStreamCreate(&im->comp));
	TRY_CUDA(cudaStreamCreate(&im->copy));
	TRY_CUDA(cudaEventCreateWithFlags(&im->fence, cudaEventDisableTiming));
	TRY_CUDA(cudaEventCreateWithFlags(&im->aug_done, cudaEventDisableTiming));
	TRY_CUDA(cudaMalloc((void **)&im->dres, 2 * sizeof(double)));
	TRY_CUDA(cudaHostAlloc((void **)&im->hres, 2 * sizeof(double), cudaHostAllocPortable));
	if (cu_libs(be, device, err, cap) < 0)
		goto fail;
	cu_table(be);
	return be;
fail:
	cu_destroy(be);
	return NULL;
}
