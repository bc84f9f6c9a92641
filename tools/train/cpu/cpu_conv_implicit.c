/* cpu_conv_implicit.c: stride-1 convolution without im2col.
 *
 * A stride-1 convolution reads, for kernel tap (i,j), the input shifted by
 * (i*dil, j*dil). With the input zero-padded to width Wp = W + 2*pad and
 * the output computed at that width too (its last dil*(KW-1) columns of
 * each row are junk and dropped), the shift is one constant offset, so the
 * "column matrix" row of (channel s, tap i, j) is just the padded input
 * at offset s*CS + i*dil*Wp + j*dil (CS: the channel stride of the padded
 * slice). The gemm kernels take B's rows from such a table of offsets
 * (cpu_kgemm_*_tab), and the 9x bigger im2col matrix is never written.
 *
 * One routine, corr_item(), computes out (O, OH, OW) (+)= sum over (s,i,j)
 * of A[o, (s,i,j)] * in_padded[s, oh + i*dil, ow + j*dil]:
 *   forward:  in = x, A = w (F, C*KH*KW), pad as given
 *   data:     in = dy, A = w flipped and transposed (C, F*KH*KW), pad
 *             dil*(K-1) - pad: the data gradient of a stride-1 conv is the
 *             correlation of dy with the flipped kernel
 * and the filter gradient is dw (F, C*KH*KW) += dy_p (F, np) B^T with the
 * same table over x (dy_p: dy at padded width, junk columns zero).
 * When OW is a multiple of 32 (a whole number of the kernels' column
 * tiles) the junk columns are not computed at all: the gemm runs once per
 * output row, writing straight into out, and the filter gradient reads
 * dy's rows in place (cpu_kgemm_nt_seg) instead of a dy_p copy.
 *
 * Work: (sample, chunk of output rows) items, taken by whichever thread is
 * free; each copies the input rows its chunk needs into a padded slice in
 * that thread's scratch (about CHUNK_FLOATS), so the slice stays in cache
 * while the gemm reads it. The filter gradient sums over the items in up
 * to CPU_FILTER_PARTS parts per thread, each into its own partial, then
 * adds the partials in order (filter_part); for small planes its items
 * are groups of whole samples (group_max). Usable when stride is 1 and
 * pad <= dil*(K-1) (so the data gradient's pad is not negative).
 */
#include <string.h>
#include "cpu.h"

#define CHUNK_FLOATS (256 * 1024)
#define SLACK 64             /* >= 16: the columns round16 adds */

/* The correlation problem corr() solves. */
typedef struct corr {
	int s, h, w;             /* input channels and size */
	int o, oh, ow;           /* output channels and size */
	int kh, kw, dil, ph, pw; /* kernel, dilation, padding */
	int wp, rows, chs;       /* padded width, output rows per chunk, slice channel stride (floats) */
	int g;                   /* filter gradient: samples per item (0: chunks of rows) */
} corr;

static corr make_corr(int s, int h, int w, int o, int kh, int kw, int dil, int ph, int pw)
{
	corr c = { s, h, w, o, 0, 0, kh, kw, dil, ph, pw, 0, 0, 0, 0 };
	long ext = (long)dil * (kh - 1), r;

	c.oh = h + 2 * ph - (int)ext;
	c.ow = w + 2 * pw - dil * (kw - 1);
	c.wp = w + 2 * pw;
	r = CHUNK_FLOATS / ((long)s * c.wp) - ext;
	c.rows = r < 1 ? 1 : r > c.oh ? c.oh : (int)r;
	c.chs = (int)((c.rows + ext) * c.wp);
	return c;
}

static corr fwd_corr(const cdp_conv_desc *d)
{
	return make_corr(d->c, d->h, d->w, d->f, d->kh, d->kw, d->dil, d->pad, d->pad);
}

static corr data_corr(const cdp_conv_desc *d)
{
	return make_corr(d->f, d->oh, d->ow, d->c, d->kh, d->kw, d->dil,
	                 d->dil * (d->kh - 1) - d->pad, d->dil * (d->kw - 1) - d->pad);
}

int cpu_iconv_usable(const cdp_conv_desc *d)
{
	return d->stride == 1 && (d->kh > 1 || d->kw > 1) &&
	       d->pad <= d->dil * (d->kh - 1) && d->pad <= d->dil * (d->kw - 1);
}

/* slice: s * chs + slack; tmp (o, rows * wp) */
static size_t slice_floats(const corr *c) { return (size_t)c->s * c->chs + SLACK + (size_t)c->dil * c->kw; }
/* Gemms run over whole vectors of columns: the junk columns past np are
 * computed and dropped like the padding columns. */
static int round16(int np) { return (np + 15) / 16 * 16; }
static size_t tmp_floats(const corr *c) { return (size_t)c->o * round16(c->rows * c->wp); }

/* Padded rows of one whole sample times the padded width: a sample's
 * block in a grouped slice. */
static long sample_floats(const corr *c)
{
	return (long)(c->oh + c->dil * (c->kh - 1)) * c->wp;
}

/* The filter gradient sums over pixels: a dot product of K = np pixels
 * per weight, which for small planes (8x8: np = 80) is too short to pay
 * for its horizontal sum. When whole samples fit a chunk, an item takes
 * up to group_max() of them stacked vertically in the slice (each with its
 * own padding rows; the rows between them are junk rows, like the junk
 * columns, with zeros in dy_p), keeping slice + dy_p near 2*CHUNK_FLOATS. */
static int group_max(const corr *c, int f)
{
	long g;

	if (c->rows < c->oh)
		return 0;
	g = 2L * CHUNK_FLOATS / (sample_floats(c) * (c->s + f));
	return g < 1 ? 1 : (int)g;
}

/* Samples per item for n samples over `parts` threads: at most group_max,
 * and as even as it can be over the same number of items per thread. */
static int group_size(const corr *c, int f, int n, int parts)
{
	int gmax = group_max(c, f), per;

	if (gmax == 0)
		return 0;
	per = (n + (long)parts * gmax - 1) / ((long)parts * gmax);   /* items per thread */
	return (int)((n + (long)parts * per - 1) / ((long)parts * per));
}

size_t cpu_iconv_scratch(const cdp_conv_desc *d)
{
	corr f = fwd_corr(d), g = data_corr(d);
	size_t k = (size_t)d->c * d->kh * d->kw;
	size_t a = slice_floats(&f) + tmp_floats(&f);
	size_t b = slice_floats(&g) + tmp_floats(&g);
	size_t fl = CPU_FILTER_PARTS * (size_t)d->f * k + slice_floats(&f) +
	            (size_t)d->f * round16(f.rows * f.wp);
	size_t m = a > b ? a : b;
	int gm = group_max(&f, d->f);

	if (gm > 0) {
		long sf = sample_floats(&f) * gm;
		size_t gl = CPU_FILTER_PARTS * (size_t)d->f * k + (size_t)f.s * sf + SLACK +
		            (size_t)f.dil * f.kw + (size_t)d->f * round16((int)sf);
		if (gl > fl)
			fl = gl;
	}
	return (m > fl ? m : fl) * sizeof(float);
}

/* the caller's workspace: the offset table (one entry per input channel
 * and tap, of x or of dy), then the flipped weights */
static size_t table_bytes(const cdp_conv_desc *d)
{
	size_t s = d->c > d->f ? (size_t)d->c : (size_t)d->f;
	return (s * d->kh * d->kw * sizeof(long) + 63) / 64 * 64;
}

size_t cpu_iconv_workspace(const cdp_conv_desc *d)
{
	return table_bytes(d) + (size_t)d->f * d->c * d->kh * d->kw * sizeof(float);
}

static void make_table(const corr *c, long *tab)
{
	for (int s = 0; s < c->s; s++)
		for (int i = 0; i < c->kh; i++)
			for (int j = 0; j < c->kw; j++)
				*tab++ = (long)s * c->chs + (long)i * c->dil * c->wp + (long)j * c->dil;
}

/* Padded rows [r0, r0 + sr) of sample `in`, channel s at out + s*chs. */
static void fill_rows(const corr *c, const float *in, int r0, int sr, float *out)
{
	for (int s = 0; s < c->s; s++) {
		const float *is = in + (size_t)s * c->h * c->w;
		float *os = out + (size_t)s * c->chs;
		for (int r = 0; r < sr; r++, os += c->wp) {
			int ih = r0 + r - c->ph;
			if (ih < 0 || ih >= c->h) {
				memset(os, 0, (size_t)c->wp * sizeof *os);
				continue;
			}
			memset(os, 0, (size_t)c->pw * sizeof *os);
			memcpy(os + c->pw, is + (size_t)ih * c->w, (size_t)c->w * sizeof *os);
			memset(os + c->pw + c->w, 0, (size_t)c->pw * sizeof *os);
		}
	}
}

/* Input rows [r0, r1 + dil*(KH-1)) of padded sample `in` into slice. */
static void fill_slice(const corr *c, const float *in, int r0, int r1, float *slice)
{
	int sr = r1 - r0 + c->dil * (c->kh - 1);

	fill_rows(c, in, r0, sr, slice);
	for (int s = 0; s < c->s; s++) {
		float *os = slice + (size_t)s * c->chs + (size_t)sr * c->wp;
		/* the junk columns of the last rows read on into the rows below:
		 * in a short (last) chunk those are stale, so clear them (junk
		 * times the zeros of dy_p must stay 0 in the filter gradient) */
		if ((long)sr * c->wp < c->chs)
			memset(os, 0, (size_t)(c->chs - (long)sr * c->wp) * sizeof *os);
	}
	/* what the junk columns of the last rows read past the slice */
	memset(slice + (size_t)c->s * c->chs, 0, (SLACK + (size_t)c->dil * c->kw) * sizeof *slice);
}

typedef struct ijob {
	cdp_backend *be;
	corr c;
	int n, parts, f, k;
	const float *in, *a, *bias, *dy;
	long rs;
	const long *tab;
	float *out, *dw;
	float beta;
} ijob;

/* One item of forward or data: output rows [r0, r1) of one sample, in the
 * running thread's scratch (the items write disjoint output rows, so any
 * thread may take any item). */
static void corr_item(void *ctx, int it)
{
	const ijob *j = ctx;
	const corr *c = &j->c;
	int nch = (c->oh + c->rows - 1) / c->rows, n = it / nch, r0 = (it % nch) * c->rows;
	int r1 = r0 + c->rows < c->oh ? r0 + c->rows : c->oh, np = round16((r1 - r0) * c->wp);
	int k = c->s * c->kh * c->kw;
	float *slice = cpu_scratch(j->be, cpu_worker()), *tmp = slice + slice_floats(c);
	float *on = j->out + (size_t)n * c->o * c->oh * c->ow;

	fill_slice(c, j->in + (size_t)n * c->s * c->h * c->w, r0, r1, slice);
	if (c->ow % 32 == 0) {
		/* row by row straight into out (C's rows are channels, OH*OW
		 * apart): no junk columns, no copy */
		for (int r = r0; r < r1; r++)
			cpu_kgemm_nn_tab(c->o, c->ow, k, j->a, j->rs, 1, slice + (size_t)(r - r0) * c->wp,
			                 j->tab, j->beta, on + (size_t)r * c->ow, (long)c->oh * c->ow);
		for (int o = 0; j->bias && o < c->o; o++)
			for (float *d = on + ((size_t)o * c->oh + r0) * c->ow,
			     *e = d + (size_t)(r1 - r0) * c->ow; d < e; d++)
				*d += j->bias[o];
		return;
	}
	cpu_kgemm_nn_tab(c->o, np, k, j->a, j->rs, 1, slice, j->tab, 0.0f, tmp, np);
	for (int o = 0; o < c->o; o++) {
		float b = j->bias ? j->bias[o] : 0.0f;
		for (int r = r0; r < r1; r++) {
			const float *src = tmp + (size_t)o * np + (size_t)(r - r0) * c->wp;
			float *dst = on + ((size_t)o * c->oh + r) * c->ow;
			if (j->beta == 0.0f)
				for (int q = 0; q < c->ow; q++)
					dst[q] = src[q] + b;
			else
				for (int q = 0; q < c->ow; q++)
					dst[q] += src[q] + b;
		}
	}
}

static int corr_items(const corr *c, int n)
{
	return n * ((c->oh + c->rows - 1) / c->rows);
}

void cpu_iconv_fwd(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                   const float *w, const float *bias, float *y, void *ws)
{
	ijob j = { .be = be, .c = fwd_corr(d), .n = d->n, .in = x, .a = w,
	           .rs = (long)d->c * d->kh * d->kw, .bias = bias, .out = y, .tab = ws,
	           .beta = 0.0f };
	make_table(&j.c, ws);
	cpu_parallel_for(be, corr_items(&j.c, d->n), corr_item, &j);
}

void cpu_iconv_data(cdp_backend *be, const cdp_conv_desc *d, const float *dy,
                    const float *w, float *dx, float beta, void *ws)
{
	int kk = d->kh * d->kw;
	float *wf = (float *)((char *)ws + table_bytes(d));
	ijob j = { .be = be, .c = data_corr(d), .n = d->n, .in = dy, .a = wf,
	           .rs = (long)d->f * kk, .out = dx, .tab = ws, .beta = beta };

	/* wf[c, (f, t)] = w[f, c, KK-1-t]: the kernel turned around */
	for (int c = 0; c < d->c; c++)
		for (int f = 0; f < d->f; f++)
			for (int t = 0; t < kk; t++)
				wf[((size_t)c * d->f + f) * kk + t] = w[((size_t)f * d->c + c) * kk + kk - 1 - t];
	make_table(&j.c, ws);
	cpu_parallel_for(be, corr_items(&j.c, d->n), corr_item, &j);
}

/* The filter gradient sums over all items. Its parts (j->parts of them,
 * cpu_filter_parts) are fixed runs of items, each summed into its own
 * partial dw, which the threads take as they come free; the partials are
 * then added in part order. Part p's partial is number p %
 * CPU_FILTER_PARTS in the scratch of thread p / CPU_FILTER_PARTS; a
 * thread's own slice and dy_p follow the partials in its scratch. */
static float *part_dw(const ijob *j, int p)
{
	return cpu_scratch(j->be, p / CPU_FILTER_PARTS) +
	       (size_t)(p % CPU_FILTER_PARTS) * j->f * j->k;
}

static float *own_slice(const ijob *j)
{
	return cpu_scratch(j->be, cpu_worker()) + (size_t)CPU_FILTER_PARTS * j->f * j->k;
}

static void filter_part(void *ctx, int p)
{
	const ijob *j = ctx;
	const corr *c = &j->c;
	int nch = (c->oh + c->rows - 1) / c->rows, items = j->n * nch;
	int lo = (int)((long)items * p / j->parts), hi = (int)((long)items * (p + 1) / j->parts);
	float *dwt = part_dw(j, p), *slice = own_slice(j), *dyp = slice + slice_floats(c);

	memset(dwt, 0, (size_t)j->f * j->k * sizeof *dwt);
	for (int it = lo; it < hi; it++) {
		int n = it / nch, r0 = (it % nch) * c->rows;
		int r1 = r0 + c->rows < c->oh ? r0 + c->rows : c->oh, nv = (r1 - r0) * c->wp;
		int np = round16(nv);
		fill_slice(c, j->in + (size_t)n * c->s * c->h * c->w, r0, r1, slice);
		if (c->ow % 32 == 0) {
			/* dy's rows in place: the sum runs over the valid
			 * columns of each row only, no dy_p */
			cpu_kgemm_nt_seg(j->f, j->k, r1 - r0, c->ow,
			                 j->dy + ((size_t)n * j->f * c->oh + r0) * c->ow,
			                 (long)c->oh * c->ow, c->ow, slice, j->tab, c->wp, dwt, j->k);
			continue;
		}
		for (int f = 0; f < j->f; f++) {
			for (int r = r0; r < r1; r++) {
				float *o = dyp + (size_t)f * np + (size_t)(r - r0) * c->wp;
				memcpy(o, j->dy + (((size_t)n * j->f + f) * c->oh + r) * c->ow,
				       (size_t)c->ow * sizeof *o);
				memset(o + c->ow, 0, (size_t)(c->wp - c->ow) * sizeof *o);
			}
			memset(dyp + (size_t)f * np + nv, 0, (size_t)(np - nv) * sizeof *dyp);
		}
		cpu_kgemm_nt_tab(j->f, j->k, np, dyp, np, slice, j->tab, dwt, j->k);
	}
}

/* filter_part for items of j->c.g whole samples (group_size) */
static void filter_group_part(void *ctx, int p)
{
	const ijob *j = ctx;
	const corr *c = &j->c;
	int items = (j->n + c->g - 1) / c->g, ext = c->dil * (c->kh - 1);
	int lo = (int)((long)items * p / j->parts), hi = (int)((long)items * (p + 1) / j->parts);
	long sf = sample_floats(c);
	float *dwt = part_dw(j, p), *slice = own_slice(j);
	float *dyp = slice + (size_t)c->s * c->chs + SLACK + (size_t)c->dil * c->kw;

	memset(dwt, 0, (size_t)j->f * j->k * sizeof *dwt);
	for (int it = lo; it < hi; it++) {
		int n0 = it * c->g, gn = j->n - n0 < c->g ? j->n - n0 : c->g;
		/* B's rows run on past the last sample's rows by at most ext*wp +
		 * ext_w + 15 < the next sample's block or the slack: nv stops at
		 * the last sample's junk rows */
		int nv = (int)(gn * sf - (long)ext * c->wp), np = round16(nv);
		for (int g = 0; g < gn; g++)
			fill_rows(c, j->in + (size_t)(n0 + g) * c->s * c->h * c->w, 0, c->oh + ext,
			          slice + g * sf);
		if (gn < c->g)      /* a short last group: no stale rows to read */
			for (int s = 0; s < c->s; s++)
				memset(slice + (size_t)s * c->chs + gn * sf, 0,
				       (size_t)(c->chs - gn * sf) * sizeof *slice);
		memset(slice + (size_t)c->s * c->chs, 0, (SLACK + (size_t)c->dil * c->kw) * sizeof *slice);
		for (int f = 0; f < j->f; f++) {
			float *of = dyp + (size_t)f * np;
			for (int g = 0; g < gn; g++) {
				const float *src = j->dy + ((size_t)(n0 + g) * j->f + f) * c->oh * c->ow;
				float *o = of + g * sf;
				for (int r = 0; r < c->oh; r++, o += c->wp, src += c->ow) {
					memcpy(o, src, (size_t)c->ow * sizeof *o);
					memset(o + c->ow, 0, (size_t)(c->wp - c->ow) * sizeof *o);
				}
				if (g + 1 < gn)     /* the junk rows between samples */
					memset(o, 0, (size_t)ext * c->wp * sizeof *o);
			}
			memset(of + nv, 0, (size_t)(np - nv) * sizeof *of);
		}
		cpu_kgemm_nt_tab(j->f, j->k, np, dyp, np, slice, j->tab, dwt, j->k);
	}
}

/* dw += the partials in part order, over be->threads ranges of dw */
static void reduce_range(void *ctx, int t)
{
	const ijob *j = ctx;
	int ranges = j->be->threads;
	size_t n = (size_t)j->f * j->k, lo = n * t / ranges, hi = n * (t + 1) / ranges;

	for (int p = 0; p < j->parts; p++) {
		const float *s = part_dw(j, p);
		for (size_t i = lo; i < hi; i++)
			j->dw[i] += s[i];
	}
}

void cpu_iconv_filter(cdp_backend *be, const cdp_conv_desc *d, const float *x,
                      const float *dy, float *dw, void *ws)
{
	ijob j = { .be = be, .c = fwd_corr(d), .n = d->n, .in = x, .dy = dy, .dw = dw,
	           .f = d->f, .k = d->c * d->kh * d->kw, .tab = ws };
	int items;

	/* groups as long as the threads allow: the parts then take whole
	 * groups (splitting the groups over more parts would shorten the
	 * sums that grouping is for) */
	j.c.g = j.c.ow % 32 == 0 ? 0 : group_size(&j.c, d->f, d->n, be->threads);
	if (j.c.g > 0)
		j.c.chs = (int)(j.c.g * sample_floats(&j.c));
	items = j.c.g > 0 ? (d->n + j.c.g - 1) / j.c.g : corr_items(&j.c, d->n);
	j.parts = cpu_filter_parts(be->threads, items, (long)d->n * d->oh * d->ow);
	make_table(&j.c, ws);
	cpu_parallel_for(be, j.parts, j.c.g > 0 ? filter_group_part : filter_part, &j);
	cpu_parallel_for(be, be->threads, reduce_range, &j);
}
