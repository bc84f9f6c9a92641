/* cpu_data.c: the CPU backend's data path and precision: host memory is
 * device memory, copies happen at once, and there is no stream. prep_batch
 * is the readable reference for the CUDA kernel (cuda/), not the trainer's
 * CPU path: the loader's prefetch thread standardizes and augments on the
 * host (loader.c, augment.c) so that the CPU step never waits for it.
 */
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cdp_dtype.h"

/* fp32, and bf16 where the kernels have it (cpu_kgemm_bf16: the CPU's
 * AVX512_BF16, or for tests the emulation): the products of convolutions
 * and GEMMs then take bf16 operands and sum in fp32, every other op is
 * the same as in fp32. */
static int cpu_set_precision(cdp_backend *be, int prec)
{
	if (prec != CDP_PREC_FP32 && !(prec == CDP_PREC_BF16 && cpu_kgemm_bf16()))
		return -1;
	be->precision = prec;
	return 0;
}

static void *cpu_host_alloc(cdp_backend *be, size_t bytes) { return cpu_alloc(be, bytes); }
static void cpu_host_free(cdp_backend *be, void *p) { free(p); }

static void cpu_to_device_async(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

static void cpu_copy_fence(cdp_backend *be) { }
static void cpu_copy_wait(cdp_backend *be) { }
static void *cpu_stream(cdp_backend *be) { return NULL; }

/* raw (n, c, h, w) of dt -> img (n, c, oh, ow); lab_raw (n, h, w) -> lab (n, oh, ow) */
static void cpu_prep_batch(cdp_backend *be, int dt, int n, int c, int h, int w, const void *raw,
                           const float *mean, const float *inv, const cdp_prep_aug *aug,
                           int oh, int ow, float *img, const int32_t *lab_raw, int32_t *lab)
{
	size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;

	for (int s = 0; s < n; s++)
		for (int p = 0; p < oh; p++)
			for (int q = 0; q < ow; q++) {
				int sy, sx;
				size_t src, dst = (size_t)p * ow + q;

				cdp_prep_src(&aug[s], oh, ow, p, q, &sy, &sx);
				src = (size_t)sy * w + sx;
				for (int ch = 0; ch < c; ch++) {
					size_t k = ((size_t)s * c + ch) * hw + src;
					double v = cdp_dtype_get(dt, raw, k);
					img[((size_t)s * c + ch) * ohw + dst] =
						(float)(((float)v - mean[ch]) * inv[ch]);
				}
				if (lab_raw)
					lab[(size_t)s * ohw + dst] = lab_raw[(size_t)s * hw + src];
			}
}

void cpu_data_ops(cdp_backend *be)
{
	be->set_precision = cpu_set_precision;
	be->host_alloc = cpu_host_alloc;
	be->host_free = cpu_host_free;
	be->to_device_async = cpu_to_device_async;
	be->copy_fence = cpu_copy_fence;
	be->copy_wait = cpu_copy_wait;
	be->stream = cpu_stream;
	be->prep_batch = cpu_prep_batch;
}
