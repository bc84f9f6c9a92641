/* cpu_window.c: the sliding-window ops of cdp-predict (backend.h
 * win_gather, win_blend), the reference for the CUDA kernels
 * (cuda_kern_window.cu).
 *
 * win_blend rounds exactly as cdp-predict did on the host before these ops
 * existed (probabilities as float, then (w1[i] * w1[q]) * p added into the
 * sum window after window), so its output on the CPU is byte for byte what
 * it was. Jobs: win_gather one (window, channel) plane per index,
 * win_blend one row i of the sum (all classes) per index; each index
 * writes only its own part and adds in window order, so the result does
 * not depend on the thread count.
 */
#include <math.h>
#include <string.h>
#include "cpu.h"

typedef struct gather_job {
	int c, r, w, s;
	const float *strip;
	const int32_t *srow, *x0;
	float *x;
} gather_job;

/* plane (b, ch) of x (nb, c, s, s) */
static void gather_plane(void *ctx, int i)
{
	const gather_job *g = ctx;
	int b = i / g->c, ch = i % g->c, s = g->s;
	long x0 = g->x0[b];
	int inside = x0 >= 0 && x0 + s <= g->w;
	float *d = g->x + (size_t)i * s * s;

	for (int y = 0; y < s; y++, d += s) {
		const float *src = g->strip + ((size_t)ch * g->r + g->srow[y]) * g->w;
		if (inside) {
			memcpy(d, src + x0, (size_t)s * sizeof *d);
			continue;
		}
		for (int q = 0; q < s; q++)
			d[q] = src[cdp_reflect(x0 + q, g->w)];
	}
}

static void cpu_win_gather(cdp_backend *be, int c, int r, int w, int s, const float *strip,
                           const int32_t *srow, int nb, const int32_t *x0, float *x)
{
	gather_job g = { c, r, w, s, strip, srow, x0, x };

	if (nb <= 0 || c <= 0 || s <= 0)
		return;
	cpu_parallel_for(be, nb * c, gather_plane, &g);
}

typedef struct blend_job {
	int k, s, w, nb;
	const float *logits;
	const int32_t *x0;
	const float *w1;
	float *sum;
} blend_job;

/* Classes held on the stack per pixel; more are computed twice (expf gives
 * the same value both times). */
#define BLEND_STACK_K 32

/* softmax of pixel l[0], l[hw], ... (k classes) into e (k), as
 * cdp-predict's host code did: max from class 0, sum in class order */
static float softmax_den(const float *l, size_t hw, int k, float *mx_out, float *e)
{
	float mx = l[0], t = 0;

	for (int j = 1; j < k; j++)
		mx = fmaxf(mx, l[j * hw]);
	for (int j = 0; j < k; j++) {
		float v = expf(l[j * hw] - mx);
		if (e)
			e[j] = v;
		t += v;
	}
	*mx_out = mx;
	return t;
}

/* row i of sum (k, s, w), every window in order */
static void blend_row(void *ctx, int i)
{
	const blend_job *g = ctx;
	int lin = g->k < 0, k = lin ? -g->k : g->k, s = g->s;
	size_t hw = (size_t)s * s, plane = (size_t)s * g->w;
	float e[BLEND_STACK_K], *ep = k <= BLEND_STACK_K ? e : NULL;
	float *row = g->sum + (size_t)i * g->w;

	for (int b = 0; b < g->nb; b++) {
		const float *lb = g->logits + (size_t)b * k * hw + (size_t)i * s;
		long x0 = g->x0[b];
		int q0 = x0 < 0 ? (int)-x0 : 0;
		int q1 = x0 + s > g->w ? (int)(g->w - x0) : s;
		for (int q = q0; q < q1; q++) {
			float wgt = g->w1[i] * g->w1[q];
			float *d = row + x0 + q;
			if (lin) {
				for (int j = 0; j < k; j++)
					d[j * plane] += wgt * lb[q + j * hw];
				continue;
			}
			if (k == 1) {
				d[0] += wgt * (1.0f / (1.0f + expf(-lb[q])));
				continue;
			}
			float mx, t = softmax_den(lb + q, hw, k, &mx, ep);
			for (int j = 0; j < k; j++) {
				float v = ep ? ep[j] : expf(lb[q + j * hw] - mx);
				d[j * plane] += wgt * (v / t);
			}
		}
	}
}

static void cpu_win_blend(cdp_backend *be, int k, int s, int w, int nb, const float *logits,
                          const int32_t *x0, const float *w1, float *sum)
{
	blend_job g = { k, s, w, nb, logits, x0, w1, sum };

	if (nb <= 0 || k == 0 || s <= 0 || w <= 0)
		return;
	cpu_parallel_for(be, s, blend_row, &g);
}

void cpu_window_ops(cdp_backend *be)
{
	be->win_gather = cpu_win_gather;
	be->win_blend = cpu_win_blend;
}
