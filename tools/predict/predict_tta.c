/* predict_tta.c: cdp-predict --tta (man/cdp-predict.1), test-time
 * augmentation: each batch of windows (B, C, S, S) runs through the net
 * once per transform of a dihedral set, and the probabilities (softmax
 * over K > 1 classes, sigmoid for K = 1) of each run, mapped back to the
 * window's own pixels, are averaged. The mean then goes where one run's
 * probabilities went: the sin^2 blend of the segmentation path (as log
 * probabilities, which the blend's softmax or sigmoid turns back into the
 * mean) or the classifier's softmax. A regression net's outputs (its
 * standardized values, k < 0 below as in backend.h's win_blend) are
 * averaged as they are and blend linearly; the mean of the values taken
 * back to the targets' scale (x * std + mean, affine) is the mean taken
 * back, so the map holds the mean of the transforms' values.
 *
 * Transform t (0..7) of an s x s plane: out(y, x) = in(y', x') with
 * (a, b) = (x, y) when bit 2 of t is set (the transpose), else (y, x);
 * y' = s-1-a when bit 1 (vertical flip), else a; x' = s-1-b when bit 0
 * (horizontal flip), else b. "flips" is t = 0..3 (identity, h, v, hv),
 * "d4" t = 0..7, the eight symmetries of the square (the four rotations
 * by 90 degrees and the four reflections). A prediction P of the
 * transformed window is mapped back by the same index pair:
 * Q(y', x') = P(y, x). A classifier's output (1 x 1) needs no mapping.
 *
 * The windows go to the host and back once per transform (the CPU backend
 * copies in memory); not done here: device-side transforms.
 */
#include "predict_int.h"

#include <math.h>
#include <string.h>

int cdp_predict_tta_parse(const char *s)
{
	if (strcmp(s, "none") == 0)
		return 1;
	if (strcmp(s, "flips") == 0)
		return 4;
	if (strcmp(s, "d4") == 0)
		return 8;
	return 0;
}

/* The source pixel (y', x') of (y, x) under t on an s x s plane. */
static size_t src_index(int t, int s, int y, int x)
{
	int a = t & 4 ? x : y, b = t & 4 ? y : x;

	if (t & 2)
		a = s - 1 - a;
	if (t & 1)
		b = s - 1 - b;
	return (size_t)a * s + b;
}

void pr_tta_apply(int t, int s, size_t planes, const float *in, float *out)
{
	size_t hw = (size_t)s * s;

	for (size_t p = 0; p < planes; p++, in += hw, out += hw)
		for (int y = 0; y < s; y++)
			for (int x = 0; x < s; x++)
				out[(size_t)y * s + x] = in[src_index(t, s, y, x)];
}

void pr_tta_add(int t, int s, int n, int k, const float *logits, double *acc)
{
	size_t hw = (size_t)s * s;

	if (k < 0) {          /* -k values a pixel: mapped back as they are */
		for (int b = 0; b < n; b++)
			for (int c = 0; c < -k; c++) {
				const float *l = logits + ((size_t)b * -k + c) * hw;
				double *a = acc + ((size_t)b * -k + c) * hw;
				for (int y = 0; y < s; y++)
					for (int x = 0; x < s; x++)
						a[src_index(t, s, y, x)] += l[(size_t)y * s + x];
			}
		return;
	}
	for (int b = 0; b < n; b++) {
		const float *l = logits + (size_t)b * k * hw;
		double *a = acc + (size_t)b * k * hw;
		for (int y = 0; y < s; y++)
			for (int x = 0; x < s; x++) {
				size_t i = (size_t)y * s + x, j = src_index(t, s, y, x);
				double mx = l[i], sum = 0;
				if (k == 1) {
					a[j] += 1.0 / (1.0 + exp(-(double)l[i]));
					continue;
				}
				for (int c = 1; c < k; c++)
					mx = fmax(mx, l[c * hw + i]);
				for (int c = 0; c < k; c++)
					sum += exp((double)l[c * hw + i] - mx);
				for (int c = 0; c < k; c++)
					a[c * hw + j] += exp((double)l[c * hw + i] - mx) / sum;
			}
	}
}

void pr_tta_logits(size_t n, int k, int runs, const double *acc, float *out)
{
	for (size_t i = 0; i < n; i++) {
		double p = acc[i] / runs;
		/* softmax(log p) = p as the p sum to 1; sigmoid(log(p / (1 - p))) = p;
		 * values (k < 0) are their mean */
		out[i] = (float)(k < 0 ? p : k == 1 ? log(p) - log1p(-p) : log(p));
	}
}

int pr_tta_run(predictor *p, int n, float *xh, float *xt, float *lg, double *acc, int s_out)
{
	size_t win = (size_t)p->C * p->S * p->S, outn = (size_t)p->B * p->K * s_out * s_out;
	cdp_backend *be = p->be;
	int k = p->reg ? -p->K : p->K;

	be->to_host(be, xh, p->net.x, (size_t)p->B * win * sizeof *xh);
	memset(acc, 0, outn * sizeof *acc);
	for (int t = 0; t < p->o->tta; t++) {
		pr_tta_apply(t, p->S, (size_t)p->B * p->C, xh, xt);
		be->to_device(be, p->net.x, xt, (size_t)p->B * win * sizeof *xt);
		cdp_net_forward_n(&p->net, n);
		be->to_host(be, lg, cdp_net_output(&p->net), outn * sizeof *lg);
		pr_tta_add(t, s_out, n, k, lg, acc);
	}
	pr_tta_logits(outn, k, p->o->tta, acc, lg);
	return 0;
}
