/* cpu_conv_phase.c: a 3x3 convolution at stride 2 (pad 1, dilation 1;
 * ResNet's downsampling 3x3 layers) as four stride-1 correlations on the
 * phases of its input, run by the implicit convolution (cpu_conv_kcol.c).
 *
 * Output pixel (oh, ow) reads input rows 2 oh - 1 + i, i = 0, 1, 2: row
 * 2 oh (i = 1) is the even rows' row oh, rows 2 oh - 1 and 2 oh + 1 (i =
 * 0, 2) the odd rows' rows oh - 1 and oh. So with the input cut into its
 * phases x_pq[a, b] = x[2a + p, 2b + q] (p, q = 0 even, 1 odd; rows
 * H_p = (H - p + 1) / 2, columns likewise), the convolution is the sum
 * over the four phases of a stride-1 correlation with the taps that fall
 * on it: kernel rows {1} (height 1, no padding) on an even phase, {0, 2}
 * (height 2, padded by 1 above) on an odd one, columns alike. 9 taps in
 * all, as the convolution has: 1x1, 1x2, 2x1 and 2x2 sub-kernels.
 *   forward: y = sum over pq of corr(x_pq, w_pq), accumulated in y;
 *   data:    dx_pq = the data gradient of phase pq's correlation alone
 *            (each input pixel is in one phase), scattered back into dx;
 *   filter:  dw_pq, the filter gradient of each, added into dw's taps.
 * The batched im2col plan these layers took before wrote a column matrix
 * of 9 C x N x OH x OW floats (115 MB for ResNet-50's first such layer
 * at batch 32) and scattered its data gradient back from one; here the
 * only copies are the phases (the size of x) and the sub-kernels.
 *
 * Workspace (cpu_phase_workspace): the phases of x (forward, filter) or
 * of dx (data), N*C*H*W floats; the sub-kernels, F*C*9 floats, each at
 * its own place (the bf16 kernel sets cache their rounded A by address
 * within an op); the correlations' offset table.
 */
#include <string.h>
#include "cpu_iconv.h"

int cpu_phase_usable(const cdp_conv_desc *d)
{
	return d->stride == 2 && d->kh == 3 && d->kw == 3 && d->pad == 1 && d->dil == 1;
}

/* Phase t = 2 p + q: its size, its kernel taps (ti, tj: original tap of
 * sub-tap i', j') and its stride-1 forward problem. */
typedef struct phase {
	int hp, wq, kh, kw, ti[2], tj[2];
	size_t xoff, woff;        /* floats into the phases of x, the sub-kernels */
	cpu_corr fwd, data;
} phase;

static void phases(const cdp_conv_desc *d, phase ph[4])
{
	size_t xoff = 0, woff = 0;

	for (int t = 0; t < 4; t++) {
		int p = t >> 1, q = t & 1;
		phase *f = &ph[t];
		f->hp = (d->h - p + 1) / 2;
		f->wq = (d->w - q + 1) / 2;
		f->kh = p ? 2 : 1;
		f->kw = q ? 2 : 1;
		f->ti[0] = p ? 0 : 1;
		f->ti[1] = 2;
		f->tj[0] = q ? 0 : 1;
		f->tj[1] = 2;
		f->xoff = xoff;
		f->woff = woff;
		xoff += (size_t)d->n * d->c * f->hp * f->wq;
		woff += (size_t)d->f * d->c * f->kh * f->kw;
		/* y[oh] += sum over i' of A[i'] x_p[oh + i' - p]: padded by p
		 * above; the rows past the phase's end read zeros */
		f->fwd = (cpu_corr){ d->c, f->hp, f->wq, d->f, d->oh, d->ow, f->kh, f->kw, 1, p, q };
		/* its data gradient: dx_p[a] = sum over i'' of A[kh-1-i''] dy[a + i''] */
		f->data = (cpu_corr){ d->f, d->oh, d->ow, d->c, f->hp, f->wq, f->kh, f->kw, 1, 0, 0 };
	}
}

/* phase f has no pixels (the odd phase of a one-row or one-column input) */
static int empty(const phase *f) { return f->hp * f->wq == 0; }

static size_t align16(size_t n) { return (n + 15) / 16 * 16; }

static size_t wfloats(const cdp_conv_desc *d) { return align16((size_t)d->f * d->c * 9); }

size_t cpu_phase_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	phase ph[4];
	size_t scratch = 0, tab = 4 * (size_t)(d->c > d->f ? d->c : d->f);

	phases(d, ph);
	for (int t = 0; t < 4; t++) {
		if (empty(&ph[t]))
			continue;
		size_t s[3] = { cpu_kcol_scratch(&ph[t].fwd), cpu_kcol_scratch(&ph[t].data),
		                cpu_kcol_filter_scratch(&ph[t].fwd, d->f) };
		for (int i = 0; i < 3; i++)
			scratch = s[i] > scratch ? s[i] : scratch;
	}
	if (cpu_scratch_reserve(be, scratch) < 0)
		return SIZE_MAX;
	return (align16((size_t)d->n * d->c * d->h * d->w) + wfloats(d)) * sizeof(float) +
	       tab * sizeof(long);
}

/* ---- moving planes between x (N, C, H, W) and its phases ---- */

typedef struct split_job {
	const cdp_conv_desc *d;
	const phase *ph;
	const float *x;
	float *xp, *dx;
	const float *dxp;
	float beta;
} split_job;

/* plane (n, c) of x into its four phases */
static void split_plane(void *ctx, int t)
{
	const split_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	const float *x = j->x + (size_t)t * d->h * d->w;

	for (int k = 0; k < 4; k++) {
		const phase *f = &j->ph[k];
		int p = k >> 1, q = k & 1;
		float *o = j->xp + f->xoff + (size_t)t * f->hp * f->wq;
		for (int a = 0; a < f->hp; a++) {
			const float *r = x + (size_t)(2 * a + p) * d->w + q;
			for (int b = 0; b < f->wq; b++)
				o[a * f->wq + b] = r[2 * b];
		}
	}
}

/* plane (n, c) of dx from its four phases, + beta dx */
static void merge_plane(void *ctx, int t)
{
	const split_job *j = ctx;
	const cdp_conv_desc *d = j->d;
	float *dx = j->dx + (size_t)t * d->h * d->w;

	for (int k = 0; k < 4; k++) {
		const phase *f = &j->ph[k];
		int p = k >> 1, q = k & 1;
		const float *s = j->dxp + f->xoff + (size_t)t * f->hp * f->wq;
		for (int a = 0; a < f->hp; a++) {
			float *r = dx + (size_t)(2 * a + p) * d->w + q;
			if (j->beta == 0.0f)
				for (int b = 0; b < f->wq; b++)
					r[2 * b] = s[a * f->wq + b];
			else
				for (int b = 0; b < f->wq; b++)
					r[2 * b] += s[a * f->wq + b];
		}
	}
}

/* The workspace's parts: phases of x or dx, sub-kernels, table */
static void parts(const cdp_conv_desc *d, void *ws, float **xp, float **wp, long **tab)
{
	*xp = ws;
	*wp = *xp + align16((size_t)d->n * d->c * d->h * d->w);
	*tab = (long *)(*wp + wfloats(d));
}

/* Index in a 3x3 kernel of phase f's sub-tap (i, jj), of the kernel
 * flipped in both axes when flip (the data gradient's) */
static int tap(const phase *f, int i, int jj, int flip)
{
	if (flip) {
		i = f->kh - 1 - i;
		jj = f->kw - 1 - jj;
	}
	return f->ti[i] * 3 + f->tj[jj];
}

/* Phase f's sub-kernel of w (F, C, 3, 3) into a: for the forward (F,
 * C*kh*kw), for the data gradient (data 1) flipped and transposed, (C,
 * F*kh*kw); returns a */
static float *sub_kernel(const cdp_conv_desc *d, const phase *f, const float *w, int data,
                         float *a)
{
	int kk = f->kh * f->kw;

	for (int o = 0; o < d->f; o++)
		for (int c = 0; c < d->c; c++) {
			const float *wc = w + ((size_t)o * d->c + c) * 9;
			float *ac = a + (data ? (size_t)c * d->f + o : (size_t)o * d->c + c) * kk;
			for (int i = 0; i < f->kh; i++)
				for (int jj = 0; jj < f->kw; jj++)
					ac[i * f->kw + jj] = wc[tap(f, i, jj, data)];
		}
	return a;
}

void cpu_phase_fwd(cdp_backend *be, const cdp_conv_desc *d, const float *x, const float *w,
                   const float *bias, const cdp_bn_infer *bn, float *y, void *ws)
{
	phase ph[4];
	float *xp, *wp;
	long *tab;
	int last = 3;

	phases(d, ph);
	parts(d, ws, &xp, &wp, &tab);
	split_job sj = { .d = d, .ph = ph, .x = x, .xp = xp };
	cpu_parallel_for(be, d->n * d->c, split_plane, &sj);
	while (empty(&ph[last]))
		last--;         /* phase 0 (even rows and columns) never is */
	/* phase 0 writes y (and the bias), the others add, the last applies bn */
	for (int t = 0; t <= last; t++) {
		const phase *f = &ph[t];
		if (empty(f))
			continue;
		cpu_kcol_corr(be, &f->fwd, d->n, cpu_src_of(xp + f->xoff, 0),
		              sub_kernel(d, f, w, 0, wp + f->woff),
		              (long)d->c * f->kh * f->kw, t == 0 ? bias : NULL, t == last ? bn : NULL,
		              t == 0 ? 0.0f : 1.0f, y, tab);
	}
}

void cpu_phase_data(cdp_backend *be, const cdp_conv_desc *d, const float *dy, const float *w,
                    float *dx, float beta, void *ws)
{
	phase ph[4];
	float *dxp, *wp;
	long *tab;

	phases(d, ph);
	parts(d, ws, &dxp, &wp, &tab);
	for (int t = 0; t < 4; t++) {
		const phase *f = &ph[t];
		if (empty(f))
			continue;
		cpu_kcol_corr(be, &f->data, d->n, cpu_src_of(dy, 0),
		              sub_kernel(d, f, w, 1, wp + f->woff),
		              (long)d->f * f->kh * f->kw, NULL, NULL, 0.0f, dxp + f->xoff, tab);
	}
	split_job sj = { .d = d, .ph = ph, .dx = dx, .dxp = dxp, .beta = beta };
	cpu_parallel_for(be, d->n * d->c, merge_plane, &sj);
}

void cpu_phase_filter(cdp_backend *be, const cdp_conv_desc *d, const float *x, const float *dy,
                      float *dw, void *ws)
{
	phase ph[4];
	float *xp, *dwp;
	long *tab;

	phases(d, ph);
	parts(d, ws, &xp, &dwp, &tab);
	split_job sj = { .d = d, .ph = ph, .x = x, .xp = xp };
	cpu_parallel_for(be, d->n * d->c, split_plane, &sj);
	for (int t = 0; t < 4; t++) {
		const phase *f = &ph[t];
		int kk = f->kh * f->kw;
		float *g = dwp + f->woff;          /* (F, C*kh*kw) */
		if (empty(f))
			continue;
		memset(g, 0, (size_t)d->f * d->c * kk * sizeof *g);
		cpu_kcol_filter(be, &f->fwd, d->n, cpu_src_of(xp + f->xoff, 0), dy, g, tab);
		for (size_t oc = 0; oc < (size_t)d->f * d->c; oc++)
			for (int i = 0; i < f->kh; i++)
				for (int jj = 0; jj < f->kw; jj++)
					dw[oc * 9 + tap(f, i, jj, 0)] += g[oc * kk + i * f->kw + jj];
	}
}
