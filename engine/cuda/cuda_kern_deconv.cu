/* cuda_kern_deconv.cu: the data gradient of a 2x2 stride-2 convolution
 * whose windows tile the input (cpu_col2im_disjoint: the U-Net's transposed
 * convolution, whose forward this is), in float32:
 *
 *   dx[n][c][2i + a][2j + b] (+)= sum over f of w[f][c][a][b] dy[n][f][i][j]
 *
 * dy (N,F,OH,OW), w (F,C,2,2), dx (N,C,2 OH,2 OW). Why not cuDNN's: its
 * NCHW float backward-data algorithm for this shape took 122 ms for
 * 32x64x256^2 -> 32x32x512^2 on an H200 (doc/PERFORMANCE.md), ~1% of the
 * card's float32 rate. Each thread owns one (n, c, i, j) and its four
 * outputs; a block shares (n, c), so the F x 4 weights of channel c sit in
 * shared memory, and its threads run along (i, j), so the loads of dy are
 * coalesced and the blocks of the other channels of sample n find dy in
 * L2. Each sum runs over f in order with fmaf: within float32 rounding of
 * the CPU's (a product of another order).
 */
#include "cuda_kern_int.cuh"

#define DC_MAX_F 1024     /* filters whose weights fit the shared array (16 KiB) */

static __global__ void deconv2_k(int c, int f, int ohw, int ow, const float *dy,
                                 const float *w, float *dx, float beta)
{
	__shared__ float ws[DC_MAX_F * 4];
	int ch = blockIdx.y, n = blockIdx.z;
	int p = blockIdx.x * CDK_THREADS + threadIdx.x;

	for (int t = threadIdx.x; t < f * 4; t += CDK_THREADS)
		ws[t] = w[((size_t)(t >> 2) * c + ch) * 4 + (t & 3)];
	__syncthreads();
	if (p >= ohw)
		return;
	const float *d = dy + (size_t)n * f * ohw + p;
	float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
	for (int k = 0; k < f; k++) {
		float v = d[(size_t)k * ohw];
		s0 = fmaf(ws[4 * k], v, s0);
		s1 = fmaf(ws[4 * k + 1], v, s1);
		s2 = fmaf(ws[4 * k + 2], v, s2);
		s3 = fmaf(ws[4 * k + 3], v, s3);
	}
	int i = p / ow, j = p - i * ow;
	float *o = dx + ((size_t)n * c + ch) * 4 * ohw + (size_t)(2 * i) * (2 * ow) + 2 * j;
	cdk_put(&o[0], s0, beta);
	cdk_put(&o[1], s1, beta);
	cdk_put(&o[2 * ow], s2, beta);
	cdk_put(&o[2 * ow + 1], s3, beta);
}

int cdk_deconv2_fits(int f)
{
	return f >= 1 && f <= DC_MAX_F;
}

void cdk_deconv2(cudaStream_t s, int n, int c, int f, int oh, int ow, const float *dy,
                 const float *w, float *dx, float beta)
{
	int ohw = oh * ow;

	if (n <= 0 || c <= 0 || ohw <= 0)
		return;
	if (!cdk_deconv2_fits(f) || n > 65535 || c > 65535)
		cdk_die(__FILE__, __LINE__, "cdk_deconv2: more filters, samples or channels than "
		        "its grid and shared weights take (cdk_deconv2_fits)");
	dim3 grid((unsigned)((ohw + CDK_THREADS - 1) / CDK_THREADS), (unsigned)c, (unsigned)n);
	deconv2_k<<<grid, CDK_THREADS, 0, s>>>(c, f, ohw, ow, dy, w, dx, beta);
	CDK_CHECK_LAUNCH();
}
