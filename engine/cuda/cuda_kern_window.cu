/* cuda_kern_window.cu: cdp-predict's sliding-window ops on the device
 * (backend.h win_gather, win_blend), the CUDA twins of cpu/cpu_window.c,
 * so that the host uploads a strip once and downloads only its weighted
 * sums.
 *
 * win_gather: strip (c, r, w), srow (s), x0 (nb) -> x (nb, c, s, s); one
 * thread per output element, neighbouring threads on neighbouring columns
 * (an exact copy, bitwise the CPU's).
 *
 * win_blend: logits (nb, k, s, s), x0 (nb), w1 (s) -> sum (k, s, w) +=.
 * One thread per pixel (i, col) of the strip, for all k classes: it loops
 * over the windows b = 0..nb-1 in order, skips those that do not cover
 * col, computes the window's probabilities at that pixel (the softmax's
 * max and denominator once, then each class) and adds them into the
 * classes' elements of sum (k < 0: the -k values as they are), which only it writes: no atomics, the CPU's
 * order of additions, and the CPU's rounding (cdk_mul, cdk_add, cdk_div:
 * no fused multiply-add) except for the device's expf.
 */
#include <math.h>
#include "cuda_kern_int.cuh"

static __global__ void win_gather_k(size_t len, int c, int r, int w, int s, const float *strip,
                                    const int32_t *srow, const int32_t *x0, float *x)
{
	CDK_FOR_EACH(i, len) {
		size_t q, row = cdk_divmod(i, (unsigned)s, &q);       /* row: (b*c + ch)*s + y */
		size_t y, pl = cdk_divmod(row, (unsigned)s, &y);      /* pl: b*c + ch */
		size_t ch, b = cdk_divmod(pl, (unsigned)c, &ch);
		long col = (long)x0[b] + (long)q;

		if (col < 0 || col >= w)
			col = cdp_reflect(col, w);
		x[i] = strip[(ch * r + (size_t)srow[y]) * w + (size_t)col];
	}
}

void cdk_win_gather(cudaStream_t st, int c, int r, int w, int s, const float *strip,
                    const int32_t *srow, int nb, const int32_t *x0, float *x)
{
	size_t len = (size_t)(nb > 0 ? nb : 0) * (size_t)(c > 0 ? c : 0) * (size_t)(s > 0 ? s : 0) *
	             (size_t)(s > 0 ? s : 0);

	if (len == 0)
		return;
	win_gather_k<<<cdk_grid(len), CDK_THREADS, 0, st>>>(len, c, r, w, s, strip, srow, x0, x);
	CDK_CHECK_LAUNCH();
}

static __global__ void win_blend_k(size_t len, int k, int s, int w, int nb, const float *logits,
                                   const int32_t *x0, const float *w1, float *sum)
{
	size_t hw = (size_t)s * s, plane = (size_t)s * w;
	int lin = k < 0;     /* -k values blended linearly (a regression head) */

	if (lin)
		k = -k;
	CDK_FOR_EACH(i, len) {
		size_t col, y = cdk_divmod(i, (unsigned)w, &col);    /* i = y*w + col */

		for (int b = 0; b < nb; b++) {
			long q = (long)col - (long)x0[b];
			if (q < 0 || q >= s)
				continue;
			const float *l = logits + (size_t)b * k * hw + y * s + (size_t)q;
			float wgt = cdk_mul(w1[y], w1[q]);
			if (lin) {
				for (int j = 0; j < k; j++)
					sum[j * plane + i] = cdk_add(sum[j * plane + i], cdk_mul(wgt, l[j * hw]));
				continue;
			}
			if (k == 1) {
				float p = cdk_div(1.0f, cdk_add(1.0f, expf(-l[0])));
				sum[i] = cdk_add(sum[i], cdk_mul(wgt, p));
				continue;
			}
			float mx = l[0], t = 0.0f;
			for (int j = 1; j < k; j++)
				mx = fmaxf(mx, l[j * hw]);
			for (int j = 0; j < k; j++)
				t = cdk_add(t, expf(cdk_sub(l[j * hw], mx)));
			for (int j = 0; j < k; j++) {
				float p = cdk_div(expf(cdk_sub(l[j * hw], mx)), t);
				sum[j * plane + i] = cdk_add(sum[j * plane + i], cdk_mul(wgt, p));
			}
		}
	}
}

void cdk_win_blend(cudaStream_t st, int k, int s, int w, int nb, const float *logits,
                   const int32_t *x0, const float *w1, float *sum)
{
	size_t len = (size_t)(s > 0 ? s : 0) * (size_t)(w > 0 ? w : 0);

	if (len == 0 || nb <= 0 || k == 0)
		return;
	win_blend_k<<<cdk_grid(len), CDK_THREADS, 0, st>>>(len, k, s, w, nb, logits, x0, w1, sum);
	CDK_CHECK_LAUNCH();
}
