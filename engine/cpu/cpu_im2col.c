/* cpu_im2col.c: the column matrices of the CPU convolution's im2col
 * plans (cpu_conv.c): im2col gathers the input under each kernel tap into
 * a row, col2im adds such rows back into the input's shape.
 *
 * Shapes (backend.h): x (N,C,H,W); row r = (c*KH + i)*KW + j of a column
 * matrix holds x[c, oh*s - pad + i*dil, ow*s - pad + j*dil] for each
 * output pixel (oh, ow), 0 outside the image. Stride 1 copies whole row
 * pieces, stride 2 gathers with a constant stride (vectorized); col2im of
 * 2x2 windows at stride 2 that tile the input (the U-Net's transposed
 * convolution) interleaves two taps per pass and writes each input
 * element once.
 */
#include <string.h>
#include "cpu.h"

/* simple streams: vectorize them at -O2 too (as cpu_conv.c) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

/* ---- im2col / col2im over output rows [r0, r1) of `nsamp` samples ----
 * The chunk's columns start at col + r*ld; sample s's pixels at s*(r1-r0)*OW. */

typedef struct col_job {
	const cdp_conv_desc *d;
	const float *x;          /* (nsamp, C, H, W) */
	float *col;              /* (K, ld) */
	int nsamp, r0, r1;
	size_t ld;
	float beta;              /* col2im: 0 overwrite, 1 accumulate */
} col_job;

/* Output columns [lo, hi) of a row whose input column is ow*s + start
 * stay inside [0, w). */
static void valid_cols(int ow_n, int s, int start, int w, int *lo, int *hi)
{
	int a = 0, b = ow_n;
	if (start < 0)
		a = (-start + s - 1) / s;
	if (start + (long)(ow_n - 1) * s >= w)
		b = (w - 1 - start) < 0 ? 0 : (w - 1 - start) / s + 1;
	if (a > b)
		a = b;
	*lo = a;
	*hi = b;
}

static void im2col_row(void *ctx, int r)
{
	const col_job *jb = ctx;
	const cdp_conv_desc *d = jb->d;
	int kk = d->kh * d->kw, c = r / kk, i = (r % kk) / d->kw, j = r % d->kw;
	int s = d->stride, wstart = j * d->dil - d->pad, lo, hi;
	size_t plane = (size_t)d->h * d->w, rows = (size_t)(jb->r1 - jb->r0) * d->ow;

	valid_cols(d->ow, s, wstart, d->w, &lo, &hi);
	for (int n = 0; n < jb->nsamp; n++) {
		const float *xc = jb->x + ((size_t)n * d->c + c) * plane;
		float *out = jb->col + (size_t)r * jb->ld + (size_t)n * rows;
		for (int oh = jb->r0; oh < jb->r1; oh++, out += d->ow) {
			int ih = oh * s - d->pad + i * d->dil;
			if (ih < 0 || ih >= d->h) {
				memset(out, 0, (size_t)d->ow * sizeof *out);
				continue;
			}
			const float *xr = xc + (size_t)ih * d->w;
			for (int ow = 0; ow < lo; ow++)
				out[ow] = 0.0f;
			if (s == 1)
				memcpy(out + lo, xr + lo + wstart, (size_t)(hi - lo) * sizeof *out);
			else if (s == 2)        /* a constant stride: vectorized */
				for (int ow = lo; ow < hi; ow++)
					out[ow] = xr[2 * ow + wstart];
			else
				for (int ow = lo; ow < hi; ow++)
					out[ow] = xr[ow * s + wstart];
			for (int ow = hi; ow < d->ow; ow++)
				out[ow] = 0.0f;
		}
	}
}

/* 2x2 windows at stride 2 that tile the input exactly (the U-Net's
 * transposed convolution): each input element is in exactly one window. */
int cpu_col2im_disjoint(const cdp_conv_desc *d)
{
	return d->kh == 2 && d->kw == 2 && d->stride == 2 && d->pad == 0 && d->dil == 1 &&
	       d->h == 2 * d->oh && d->w == 2 * d->ow;
}

/* col2im for cpu_col2im_disjoint: the two taps of a window row go to the
 * even and odd columns in one pass (a vectorizable interleave), stored
 * over or added to per beta (no clearing pass: every element is written) */
static void col2im_tile2(const col_job *jb, int n, int c, float *xc)
{
	const cdp_conv_desc *d = jb->d;
	size_t rows = (size_t)(jb->r1 - jb->r0) * d->ow;

	for (int i = 0; i < 2; i++) {
		const float *a = jb->col + (size_t)(c * 4 + 2 * i) * jb->ld + (size_t)n * rows;
		const float *b = a + jb->ld;
		for (int oh = jb->r0; oh < jb->r1; oh++, a += d->ow, b += d->ow) {
			float *xr = xc + (size_t)(2 * oh + i) * d->w;
			if (jb->beta == 0.0f)
				for (int m = 0; m < d->ow; m++) {
					xr[2 * m] = a[m];
					xr[2 * m + 1] = b[m];
				}
			else
				for (int m = 0; m < d->ow; m++) {
					xr[2 * m] += a[m];
					xr[2 * m + 1] += b[m];
				}
		}
	}
}

/* One (sample, channel) plane of dx, summing its KH*KW rows in a fixed
 * order; with beta 0 the plane is cleared first. */
static void col2im_plane(void *ctx, int t)
{
	const col_job *jb = ctx;
	const cdp_conv_desc *d = jb->d;
	int n = t / d->c, c = t % d->c, s = d->stride;
	size_t plane = (size_t)d->h * d->w, rows = (size_t)(jb->r1 - jb->r0) * d->ow;
	float *xc = (float *)jb->x + ((size_t)n * d->c + c) * plane;

	if (cpu_col2im_disjoint(d)) {
		col2im_tile2(jb, n, c, xc);
		return;
	}
	if (jb->beta == 0.0f)
		memset(xc, 0, plane * sizeof *xc);
	for (int i = 0; i < d->kh; i++) {
		for (int j = 0; j < d->kw; j++) {
			int r = (c * d->kh + i) * d->kw + j, wstart = j * d->dil - d->pad, lo, hi;
			const float *in = jb->col + (size_t)r * jb->ld + (size_t)n * rows;
			valid_cols(d->ow, s, wstart, d->w, &lo, &hi);
			for (int oh = jb->r0; oh < jb->r1; oh++, in += d->ow) {
				int ih = oh * s - d->pad + i * d->dil;
				if (ih < 0 || ih >= d->h || lo >= hi)
					continue;
				float *xr = xc + (size_t)ih * d->w + (wstart + lo * s);
				const float *ir = in + lo;
				if (s == 1)
					for (int m = 0; m < hi - lo; m++)
						xr[m] += ir[m];
				else
					for (int m = 0; m < hi - lo; m++)
						xr[m * s] += ir[m];
			}
		}
	}
}

/* Sequential versions for one chunk inside a worker's job. */
void cpu_im2col_rows(const cdp_conv_desc *d, const float *xn, int r0, int r1, float *col)
{
	col_job jb = { d, xn, col, 1, r0, r1, (size_t)(r1 - r0) * d->ow, 0.0f };
	for (int r = 0; r < d->c * d->kh * d->kw; r++)
		im2col_row(&jb, r);
}

void cpu_col2im_rows(const cdp_conv_desc *d, const float *col, int r0, int r1, float *dxn,
                     float beta)
{
	col_job jb = { d, dxn, (float *)col, 1, r0, r1, (size_t)(r1 - r0) * d->ow, beta };
	for (int c = 0; c < d->c; c++)
		col2im_plane(&jb, c);
}

void cpu_im2col_all(cdp_backend *be, const cdp_conv_desc *d, const float *x, float *col)
{
	col_job jb = { d, x, col, d->n, 0, d->oh, (size_t)d->n * d->oh * d->ow, 0.0f };
	cpu_parallel_for(be, d->c * d->kh * d->kw, im2col_row, &jb);
}

void cpu_col2im_all(cdp_backend *be, const cdp_conv_desc *d, const float *col, float *dx,
                    float beta)
{
	col_job jb = { d, dx, (float *)col, d->n, 0, d->oh, (size_t)d->n * d->oh * d->ow, beta };
	cpu_parallel_for(be, d->n * d->c, col2im_plane, &jb);
}
