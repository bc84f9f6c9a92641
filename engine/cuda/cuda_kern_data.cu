/* cuda_kern_data.cu: batch preparation on the device (backend.h
 * prep_batch), the CUDA twin of cpu_data.c, so the host uploads raw pixels
 * as stored in the pool and the GPU converts, standardizes, crops and
 * transforms them.
 *
 * raw (n, c, h, w) of pool type dt, aligned to its element size (as any
 * device buffer it sits at the start of is); mean, inv (c) float; aug (n)
 * cdp_prep_aug, all on the device. Output img (n, c, oh, ow) =
 * (raw - mean[ch]) * inv[ch] in float, and lab (n, oh, ow) from lab_raw
 * (n, h, w) int32 when lab_raw is not NULL, both through aug[s]'s crop,
 * flips and quarter turns (engine/augment.h's convention). Each raw
 * value becomes a float with one rounding, as the CPU's double-then-float
 * path gives, so img agrees with cpu_data.c bit for bit.
 *
 * Launch shape: one thread per output pixel (s, p, q) for all c channels
 * and the label, in a grid-stride loop of cdk_grid(n*oh*ow) blocks of
 * CDK_THREADS; neighbouring threads write neighbouring q of each plane.
 */
#include "cuda_kern_int.cuh"
#include "cdp_dtype.h"

/* sample k of raw as a float (0 for an unknown type, as cdp_dtype_get) */
static __host__ __device__ inline float raw_get(int dt, const void *raw, size_t k)
{
	switch (dt) {
	case CDP_DT_U8:  return (float)((const uint8_t *)raw)[k];
	case CDP_DT_U16: return (float)((const uint16_t *)raw)[k];
	case CDP_DT_I16: return (float)((const int16_t *)raw)[k];
	case CDP_DT_U32: return (float)((const uint32_t *)raw)[k];
	case CDP_DT_I32: return (float)((const int32_t *)raw)[k];
	case CDP_DT_F32: return ((const float *)raw)[k];
	case CDP_DT_F64: return (float)((const double *)raw)[k];
	default:         return 0.0f;
	}
}

static __global__ void prep_k(int dt, size_t len, int c, int h, int w, const void *raw,
                              const float *mean, const float *inv, const cdp_prep_aug *aug,
                              int oh, int ow, float *img, const int32_t *lab_raw, int32_t *lab)
{
	size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;

	CDK_FOR_EACH(i, len) {
		size_t r, s = cdk_divmod(i, (unsigned)ohw, &r);
		int sy, sx, p = (int)(r / ow), q = (int)(r % ow);
		cdp_prep_aug a = aug[s];

		cdp_prep_src(&a, oh, ow, p, q, &sy, &sx);
		size_t src = (size_t)sy * w + sx;
		for (int ch = 0; ch < c; ch++) {
			float v = raw_get(dt, raw, (s * c + ch) * hw + src);
			img[(s * c + ch) * ohw + r] = cdk_mul(cdk_sub(v, mean[ch]), inv[ch]);
		}
		if (lab_raw)
			lab[i] = lab_raw[s * hw + src];
	}
}

void cdk_prep_batch(cudaStream_t s, int dt, int n, int c, int h, int w, const void *raw,
                    const float *mean, const float *inv, const cdp_prep_aug *aug, int oh, int ow,
                    float *img, const int32_t *lab_raw, int32_t *lab)
{
	size_t len = (size_t)(n > 0 ? n : 0) * (size_t)(oh > 0 ? oh : 0) * (size_t)(ow > 0 ? ow : 0);

	if (len == 0)
		return;
	prep_k<<<cdk_grid(len), CDK_THREADS, 0, s>>>(dt, len, c, h, w, raw, mean, inv, aug, oh, ow,
	                                             img, lab_raw, lab);
	CDK_CHECK_LAUNCH();
}
