/* cuda_kern_prec.cu: the mixed-precision staging of cuda_kern.h. Tensors
 * live in float32 (backend.h); for CDP_PREC_BF16 / CDP_PREC_FP16 the
 * backend rounds the inputs of a convolution or GEMM to 16 bits, in the
 * channels-last layout that cuDNN's tensor-core kernels prefer, and brings
 * 16-bit results back to float32 NCHW.
 *
 *   to_nhwc:   x (n, c, h, w) float -> y (n, h, w, c) half, round to nearest
 *              (weights (F, C, KH, KW) -> (F, KH, KW, C) the same way);
 *              with CDP_PREC_TF32, y float (the transpose alone: tf32's
 *              channels-last staging, CDP_CUDNN_NHWC=1)
 *   from_nhwc: x (n, h, w, c) half (or float) -> y (n, c, h, w) float,
 *              y = x + beta y
 *   to_half / from_half: the same conversions without a layout change
 *
 * Each (n) image is a transpose of a (c, h*w) matrix. With 16 or more
 * channels a block moves a 32 x 32 tile through shared memory, so reads
 * and writes both stay coalesced; with fewer (an RGB input) a tile would
 * leave most threads idle, and one thread per element already reads c
 * contiguous runs and writes contiguously (also the fallback for more
 * than 65535 images, the limit of a grid's z). Tile grid: (ceil(hw/32),
 * ceil(c/32), n) blocks of 32 x 8 threads; the others grid-stride loops of
 * cdk_grid blocks of CDK_THREADS.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "cuda_kern_int.cuh"

#define TILE 32
#define TILE_ROWS 8          /* threads per block: TILE x TILE_ROWS */
#define SMALL_C 16           /* below this many channels: no tiles */

static __host__ __device__ inline void to16(float v, __half *o) { *o = __float2half_rn(v); }
static __host__ __device__ inline void to16(float v, __nv_bfloat16 *o) { *o = __float2bfloat16_rn(v); }
static __host__ __device__ inline float to32(__half v) { return __half2float(v); }
static __host__ __device__ inline float to32(__nv_bfloat16 v) { return __bfloat162float(v); }
/* float staging (tf32 channels-last, CDP_CUDNN_NHWC=1): a transpose only */
static __host__ __device__ inline void to16(float v, float *o) { *o = v; }
static __host__ __device__ inline float to32(float v) { return v; }

/* ---- layout changes: one image is (c, hw) in NCHW and (hw, c) in NHWC ---- */

/* one thread per NHWC element i = (s*hw + p)*c + ch */
template <typename T>
static __global__ void to_nhwc_k(size_t len, int c, int hw, const float *x, T *y)
{
	CDK_FOR_EACH(i, len) {
		size_t ch, sp = cdk_divmod(i, (unsigned)c, &ch), p, s = cdk_divmod(sp, (unsigned)hw, &p);
		to16(x[(s * c + ch) * hw + p], &y[i]);
	}
}

/* one thread per NCHW element i = (s*c + ch)*hw + p */
template <typename T>
static __global__ void from_nhwc_k(size_t len, int c, int hw, const T *x, float *y, float beta)
{
	CDK_FOR_EACH(i, len) {
		size_t p, sc = cdk_divmod(i, (unsigned)hw, &p), ch, s = cdk_divmod(sc, (unsigned)c, &ch);
		cdk_put(&y[i], to32(x[(s * hw + p) * c + ch]), beta);
	}
}

/* Block (bx, by, s) moves the tile p in [bx*32, +32), ch in [by*32, +32)
 * of image s: read along p from NCHW, write along ch to NHWC. */
template <typename T>
static __global__ void to_nhwc_tile_k(int c, int hw, const float *x, T *y)
{
	__shared__ float t[TILE][TILE + 1];     /* +1: no bank conflicts */
	int p0 = blockIdx.x * TILE, c0 = blockIdx.y * TILE;
	const float *xs = x + (size_t)blockIdx.z * c * hw;
	T *ys = y + (size_t)blockIdx.z * c * hw;

	for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
		int ch = c0 + j, p = p0 + threadIdx.x;
		if (ch < c && p < hw)
			t[j][threadIdx.x] = xs[(size_t)ch * hw + p];
	}
	__syncthreads();
	for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
		int p = p0 + j, ch = c0 + threadIdx.x;
		if (p < hw && ch < c)
			to16(t[threadIdx.x][j], &ys[(size_t)p * c + ch]);
	}
}

/* the reverse: read along ch from NHWC, write along p to NCHW */
template <typename T>
static __global__ void from_nhwc_tile_k(int c, int hw, const T *x, float *y, float beta)
{
	__shared__ float t[TILE][TILE + 1];
	int p0 = blockIdx.x * TILE, c0 = blockIdx.y * TILE;
	const T *xs = x + (size_t)blockIdx.z * c * hw;
	float *ys = y + (size_t)blockIdx.z * c * hw;

	for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
		int p = p0 + j, ch = c0 + threadIdx.x;
		if (p < hw && ch < c)
			t[j][threadIdx.x] = to32(xs[(size_t)p * c + ch]);
	}
	__syncthreads();
	for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
		int ch = c0 + j, p = p0 + threadIdx.x;
		if (ch < c && p < hw)
			cdk_put(&ys[(size_t)ch * hw + p], t[threadIdx.x][j], beta);
	}
}

template <typename T>
static void to_nhwc(cudaStream_t s, int n, int c, int hw, const float *x, T *y)
{
	if (c < SMALL_C || n > 65535) {   /* gridDim.z <= 65535 */
		size_t len = (size_t)n * c * hw;
		to_nhwc_k<T><<<cdk_grid(len), CDK_THREADS, 0, s>>>(len, c, hw, x, y);
	} else {
		dim3 grid((unsigned)((hw + TILE - 1) / TILE), (unsigned)((c + TILE - 1) / TILE), (unsigned)n);
		to_nhwc_tile_k<T><<<grid, dim3(TILE, TILE_ROWS), 0, s>>>(c, hw, x, y);
	}
	CDK_CHECK_LAUNCH();
}

template <typename T>
static void from_nhwc(cudaStream_t s, int n, int c, int hw, const T *x, float *y, float beta)
{
	if (c < SMALL_C || n > 65535) {   /* gridDim.z <= 65535 */
		size_t len = (size_t)n * c * hw;
		from_nhwc_k<T><<<cdk_grid(len), CDK_THREADS, 0, s>>>(len, c, hw, x, y, beta);
	} else {
		dim3 grid((unsigned)((hw + TILE - 1) / TILE), (unsigned)((c + TILE - 1) / TILE), (unsigned)n);
		from_nhwc_tile_k<T><<<grid, dim3(TILE, TILE_ROWS), 0, s>>>(c, hw, x, y, beta);
	}
	CDK_CHECK_LAUNCH();
}

void cdk_to_nhwc_half(cudaStream_t s, int prec, int n, int c, int h, int w, const float *x, void *y)
{
	int hw = h * w;

	if (n <= 0 || c <= 0 || hw <= 0)
		return;
	if (prec == CDP_PREC_BF16)
		to_nhwc(s, n, c, hw, x, (__nv_bfloat16 *)y);
	else if (prec == CDP_PREC_FP16)
		to_nhwc(s, n, c, hw, x, (__half *)y);
	else if (prec == CDP_PREC_TF32)
		to_nhwc(s, n, c, hw, x, (float *)y);
	else
		cdk_die(__FILE__, __LINE__, "cdk_to_nhwc_half: precision is not bf16, fp16 or tf32");
}

void cdk_from_nhwc_half(cudaStream_t s, int prec, int n, int c, int h, int w, const void *x,
                        float *y, float beta)
{
	int hw = h * w;

	if (n <= 0 || c <= 0 || hw <= 0)
		return;
	if (prec == CDP_PREC_BF16)
		from_nhwc(s, n, c, hw, (const __nv_bfloat16 *)x, y, beta);
	else if (prec == CDP_PREC_FP16)
		from_nhwc(s, n, c, hw, (const __half *)x, y, beta);
	else if (prec == CDP_PREC_TF32)
		from_nhwc(s, n, c, hw, (const float *)x, y, beta);
	else
		cdk_die(__FILE__, __LINE__, "cdk_from_nhwc_half: precision is not bf16, fp16 or tf32");
}

/* ---- plain conversions ---- */

template <typename T>
static __global__ void to_half_k(const float *x, T *y, size_t n)
{
	CDK_FOR_EACH(i, n)
		to16(x[i], &y[i]);
}

template <typename T>
static __global__ void from_half_k(const T *x, float *y, float beta, size_t n)
{
	CDK_FOR_EACH(i, n)
		cdk_put(&y[i], to32(x[i]), beta);
}

void cdk_to_half(cudaStream_t s, int prec, const float *x, void *y, size_t n)
{
	if (n == 0)
		return;
	if (prec == CDP_PREC_BF16)
		to_half_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(x, (__nv_bfloat16 *)y, n);
	else if (prec == CDP_PREC_FP16)
		to_half_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(x, (__half *)y, n);
	else
		cdk_die(__FILE__, __LINE__, "cdk_to_half: precision is neither bf16 nor fp16");
	CDK_CHECK_LAUNCH();
}

void cdk_from_half(cudaStream_t s, int prec, const void *x, float *y, float beta, size_t n)
{
	if (n == 0)
		return;
	if (prec == CDP_PREC_BF16)
		from_half_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>((const __nv_bfloat16 *)x, y, beta, n);
	else if (prec == CDP_PREC_FP16)
		from_half_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>((const __half *)x, y, beta, n);
	else
		cdk_die(__FILE__, __LINE__, "cdk_from_half: precision is neither bf16 nor fp16");
	CDK_CHECK_LAUNCH();
}
