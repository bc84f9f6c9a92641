/* cpu_conv_implicit.c: stride-1 convolution without im2col.
 *
 * A stride-1 convolution reads, for kernel tap (i,j), the input shifted by
 * (i*dil, j*dil). With the input zero-padded to width Wp = W + 2*pad, the
 * shift is one constant offset, so the "column matrix" row of (channel s,
 * tap i, j) for an output row is just the padded input at offset s*CS +
 * i*dil*Wp + j*dil (CS: the channel stride of the padded slice). The gemm
 * kernels take B's rows from such a table of offsets (cpu_kgemm_*_tab),
 * and the 9x bigger im2col matrix is never written.
 *
 * The three ops are one correlation problem (cpu_iconv.h): out (O, OH, OW)
 * (+)= sum over (s,i,j) of A[o, (s,i,j)] * in_padded[s, oh + i*dil, ow + j*dil]:
 *   forward:  in = x, A = w (F, C*KH*KW), pad as given
 *   data:     in = dy, A = w flipped and transposed (C, F*KH*KW), pad
 *             dil*(K-1) - pad: the data gradient of a stride-1 conv is the
 *             correlation of dy with the flipped kernel
 * and the filter gradient is dw (F, C*KH*KW) += dy (F, pixels) B^T with the
 * same table over x.
 * With the bf16 sets "amx" (widths a multiple of 16) and "avx512bf16",
 * inputs of more than 8 channels go to cpu_conv_pairs.c instead (its
 * slice holds pairs of channels in bf16, which the products load as they
 * lie).
 * This file takes output widths that are a multiple of 32 (a whole number
 * of the kernels' column tiles): the gemm runs once per output row,
 * writing straight into out, and the filter gradient reads dy's rows in
 * place (cpu_kgemm_nt_seg). Other widths, the small planes above all, go
 * to cpu_conv_kcol.c, which computes whole chunks from one masked copy of
 * the input per kernel column.
 *
 * Work: (sample, chunk of output rows) items, taken by whichever thread is
 * free; each copies the input rows its chunk needs into a padded slice in
 * that thread's scratch (about CHUNK_FLOATS), so the slice stays in cache
 * while the gemm reads it. The filter gradient sums over the items in up
 * to CPU_FILTER_PARTS parts per thread, each into its own partial, then
 * adds the partials in order (cpu_filter_reduce). Usable when stride is 1
 * and pad <= dil*(K-1) (so the data gradient's pad is not negative).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_iconv.h"

#define CHUNK_FLOATS (256 * 1024)

/* The problem (cpu_iconv.h) with this file's slice geometry. */
typedef struct corr {
	int s, h, w;             /* input channels and size */
	int o, oh, ow;           /* output channels and size */
	int kh, kw, dil, ph, pw; /* kernel, dilation, padding */
	int wp, rows, chs;       /* padded width, output rows per chunk, slice channel stride (floats) */
} corr;

static corr make_corr(const cpu_corr *p)
{
	corr c = { p->s, p->h, p->w, p->o, p->oh, p->ow, p->kh, p->kw, p->dil, p->ph, p->pw, 0, 0, 0 };
	long ext = (long)c.dil * (c.kh - 1), r;

	c.wp = c.w + 2 * c.pw;
	r = CHUNK_FLOATS / ((long)c.s * c.wp) - ext;
	c.rows = r < 1 ? 1 : r > c.oh ? c.oh : (int)r;
	c.chs = (int)((c.rows + ext) * c.wp);
	return c;
}

/* corr_item's rows as floats before they are written as bf16 (outh: the
 * forward's d->yh), in the thread's scratch behind the slice */
#define YH_FLOATS (64 * 1024)

/* make_corr, with outh (h) no more rows than YH_FLOATS hold */
static corr make_corr_h(const cpu_corr *p, int h)
{
	corr c = make_corr(p);
	long r = YH_FLOATS / ((long)c.o * c.ow);

	if (h && r < c.rows) {
		c.rows = r < 1 ? 1 : (int)r;
		c.chs = (int)((c.rows + (long)c.dil * (c.kh - 1)) * c.wp);
	}
	return c;
}

static cpu_corr prob(int s, int h, int w, int o, int kh, int kw, int dil, int ph, int pw)
{
	cpu_corr p = { s, h, w, o, h + 2 * ph - dil * (kh - 1), w + 2 * pw - dil * (kw - 1),
	               kh, kw, dil, ph, pw };
	return p;
}

static cpu_corr fwd_prob(const cdp_conv_desc *d)
{
	return prob(d->c, d->h, d->w, d->f, d->kh, d->kw, d->dil, d->pad, d->pad);
}

static cpu_corr data_prob(const cdp_conv_desc *d)
{
	return prob(d->f, d->oh, d->ow, d->c, d->kh, d->kw, d->dil,
	            d->dil * (d->kh - 1) - d->pad, d->dil * (d->kw - 1) - d->pad);
}

int cpu_iconv_usable(const cdp_conv_desc *d)
{
	return d->stride == 1 && (d->kh > 1 || d->kw > 1) &&
	       d->pad <= d->dil * (d->kh - 1) && d->pad <= d->dil * (d->kw - 1);
}

/* the padded slice of a chunk: s * chs */
static size_t slice_floats(const corr *c) { return (size_t)c->s * c->chs; }

size_t cpu_iconv_scratch(const cdp_backend *be, const cdp_conv_desc *d)
{
	cpu_corr pf = fwd_prob(d), pd = data_prob(d);
	corr f = make_corr(&pf), g = make_corr(&pd);
	size_t a = cpu_kcol_takes(&pf) ? cpu_kcol_scratch(&pf) : slice_floats(&f) * sizeof(float);
	size_t b = cpu_kcol_takes(&pd) ? cpu_kcol_scratch(&pd) : slice_floats(&g) * sizeof(float);
	size_t fl = cpu_kcol_filter_scratch(&pf, d->f);
	size_t m;

	if (cpu_iconv_writes_h(be, d) && !cpu_wino_takes(be, &pf) && !cpu_pairs_writes_h(be, &pf))
		a += YH_FLOATS * sizeof(float);        /* corr_item's rows for outh */
	m = a > b ? a : b;

	if (cpu_pairs_corr_takes(be, &pf) && cpu_pairs_scratch(be, &pf) > m)
		m = cpu_pairs_scratch(be, &pf);
	if (cpu_pairs_corr_takes(be, &pd) && cpu_pairs_scratch(be, &pd) > m)
		m = cpu_pairs_scratch(be, &pd);
	if (cpu_grid_filter_takes(be, &pf) && cpu_grid_filter_scratch(be, &pf) > fl)
		fl = cpu_grid_filter_scratch(be, &pf);

	if (cpu_wino_takes(be, &pf) && cpu_wino_scratch(&pf) > m)
		m = cpu_wino_scratch(&pf);
	if (cpu_winof_takes(be, &pf))
		fl = cpu_winof_scratch(&pf);
	if (cpu_wino_takes(be, &pd) && cpu_wino_scratch(&pd) > m)
		m = cpu_wino_scratch(&pd);

	return m > fl ? m : fl;
}

/* the caller's workspace: the offset table (one entry per input channel
 * and tap, of x or of dy), then the flipped weights, then (3x3 kernels,
 * dilation 1) the Winograd-transformed filters (cpu_conv_wino.c) or the
 * filter gradient's matrices (cpu_conv_winof.c), which are never needed
 * at once */
static size_t table_bytes(const cdp_conv_desc *d)
{
	size_t s = d->c > d->f ? (size_t)d->c : (size_t)d->f;
	return (s * d->kh * d->kw * sizeof(long) + 63) / 64 * 64;
}

static size_t flipped_bytes(const cdp_conv_desc *d)
{
	return ((size_t)d->f * d->c * d->kh * d->kw * sizeof(float) + 63) / 64 * 64;
}

size_t cpu_iconv_workspace(const cdp_backend *be, const cdp_conv_desc *d)
{
	cpu_corr pf = fwd_prob(d), pd = data_prob(d);
	size_t u = cpu_wino_takes(be, &pf) || cpu_wino_takes(be, &pd) ? cpu_wino_ufloats(&pf) : 0;

	if (cpu_winof_takes(be, &pf) && cpu_winof_floats(&pf) > u)
		u = cpu_winof_floats(&pf);
	return table_bytes(d) + flipped_bytes(d) + u * sizeof(float);
}

/* where the caller's workspace keeps the Winograd matrices */
static float *wino_u(const cdp_conv_desc *d, void *ws)
{
	return (float *)((char *)ws + table_bytes(d) + flipped_bytes(d));
}

static void make_table(const corr *c, long *tab)
{
	for (int s = 0; s < c->s; s++)
		for (int i = 0; i < c->kh; i++)
			for (int j = 0; j < c->kw; j++)
				*tab++ = (long)s * c->chs + (long)i * c->dil * c->wp + (long)j * c->dil;
}

/* Padded rows [r0, r0 + sr) of sample `in` (input rows r0 - ph, ...),
 * channel s at out + s*chs: every float the gemms read (OW + dil*(KW-1)
 * <= Wp columns of rows up to r1 - r0 + dil*(KH-1)). */
static void fill_rows(const corr *c, cpu_src in, int r0, int sr, int rnd, float *out)
{
	for (int s = 0; s < c->s; s++) {
		cpu_src is = cpu_src_chan(in, s, (long)c->h * c->w);
		float *os = out + (size_t)s * c->chs;
		for (int r = 0; r < sr; r++, os += c->wp) {
			int ih = r0 + r - c->ph;
			if (ih < 0 || ih >= c->h) {
				memset(os, 0, (size_t)c->wp * sizeof *os);
				continue;
			}
			memset(os, 0, (size_t)c->pw * sizeof *os);
			cpu_src_copy(os + c->pw, cpu_src_at(is, (long)ih * c->w), (size_t)c->w, rnd);
			memset(os + c->pw + c->w, 0, (size_t)c->pw * sizeof *os);
		}
	}
}

typedef struct ijob {
	cdp_backend *be;
	corr c;
	cpu_src in;
	const float *a, *bias;
	const cdp_bn_infer *bn;   /* the batchnorm after the forward, or NULL */
	long rs;
	const long *tab;
	float *out;
	uint16_t *outh;          /* or the forward's output as bf16 (out NULL) */
	float beta;
	int rnd;                 /* round the slice to bf16 as it is filled */
	int rnd_out;             /* round the output (cpu_corr_finish) */
} ijob;

/* One item of forward or data: output rows [r0, r1) of one sample, row by
 * row straight into out (C's rows are channels, OH*OW apart; the items
 * write disjoint output rows, so any thread may take any item); with outh
 * into the scratch behind the slice (O, r1 - r0, OW), then rounded into
 * outh while in the cache. */
static void corr_item(void *ctx, int it)
{
	const ijob *j = ctx;
	const corr *c = &j->c;
	int nch = (c->oh + c->rows - 1) / c->rows, n = it / nch, r0 = (it % nch) * c->rows;
	int r1 = r0 + c->rows < c->oh ? r0 + c->rows : c->oh, k = c->s * c->kh * c->kw;
	float *slice = cpu_scratch(j->be, cpu_worker());
	size_t on = (size_t)n * c->o * c->oh * c->ow, np = (size_t)(r1 - r0) * c->ow;
	float *o = j->outh ? slice + slice_floats(c) : j->out + on;
	long ldc = j->outh ? (long)np : (long)c->oh * c->ow;
	int rb = j->outh ? r0 : 0;      /* o's first row */

	fill_rows(c, cpu_src_sample(j->in, n, (long)c->s * c->h * c->w), r0,
	          r1 - r0 + c->dil * (c->kh - 1), j->rnd, slice);
	for (int r = r0; r < r1; r++)
		cpu_kgemm_nn_tab(j->be, c->o, c->ow, k, j->a, j->rs, 1, slice + (size_t)(r - r0) * c->wp,
		                 j->tab, j->beta, o + (size_t)(r - rb) * c->ow, ldc);
	if (!j->outh) {
		cpu_corr_finish(j->bias, j->rnd_out, j->bn, o, c->o, c->oh, c->ow, r0, r1);
		return;
	}
	cpu_corr_finish(j->bias, 0, NULL, o, c->o, r1 - r0, c->ow, 0, r1 - r0);
	for (int q = 0; q < c->o; q++)
		cpu_bf16_narrow_run(j->outh + on + ((size_t)q * c->oh + r0) * c->ow, o + q * np, np);
}

static int corr_items(const corr *c, int n)
{
	return n * ((c->oh + c->rows - 1) / c->rows);
}

/* fwd: the forward; ro: its output rounded to bf16 (cpu_iconv_writes_h:
 * Winograd's and corr_item's, backend.h), and with outh written there as
 * bf16 instead of to out */
static void run_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in,
                     const float *a, long rs, const float *bias, const cdp_bn_infer *bn,
                     float beta, float *out, uint16_t *outh, int ro, long *tab, float *u,
                     int fwd)
{
	ijob j = { .be = be, .c = make_corr_h(p, outh != NULL), .in = in, .a = a, .rs = rs,
	           .bias = bias, .bn = bn, .out = out, .outh = outh, .tab = tab, .beta = beta,
	           .rnd = cpu_bf16_rounds_copies(be), .rnd_out = ro };

	if (cpu_wino_takes(be, p)) {
		cpu_wino_corr(be, p, n, in, a, rs, bias, bn, beta, out, outh, u, fwd);
		return;
	}
	if (cpu_pairs_corr_takes(be, p)) {
		if (cpu_pairs_corr(be, p, n, in, a, rs, bias, bn, beta, out, outh, ro) == 0)
			return;
		if (ro && !outh) {      /* the plans below do not round */
			fprintf(stderr, "cpu backend: out of memory for a convolution's paired slice\n");
			abort();
		}
		if (outh) {      /* its scratch fell short: the rest write float */
			size_t count = (size_t)n * p->o * p->oh * p->ow;
			float *t = malloc(count * sizeof *t);
			if (!t) {
				fprintf(stderr, "cpu backend: out of memory for a bf16 output\n");
				abort();
			}
			run_corr(be, p, n, in, a, rs, bias, bn, beta, t, NULL, 0, tab, u, fwd);
			cpu_bf16_narrow_run(outh, t, count);
			free(t);
			return;
		}
	}
	if (cpu_kcol_takes(p)) {
		cpu_kcol_corr(be, p, n, in, a, rs, bias, bn, beta, out, tab);
		return;
	}
	make_table(&j.c, tab);
	cpu_parallel_for(be, corr_items(&j.c, n), corr_item, &j);
}

/* The forward's y as bf16 (d->yh; no bn: training): where Winograd's
 * output transform writes it, rounded in the register (3x3 kernels),
 * where the paired slice's VDPBF16PS rows do (whole vectors: widths of
 * 16s from 32, more than 8 channels), and where corr_item does, rounding
 * its rows while in the cache (the widths of 32s, from few channels: the
 * first layer's 3 bands) */
int cpu_iconv_writes_h(const cdp_backend *be, const cdp_conv_desc *d)
{
	cpu_corr p = fwd_prob(d);

	if (be->precision != CDP_PREC_BF16 || !cpu_iconv_usable(d))
		return 0;
	return cpu_wino_takes(be, &p) || cpu_pairs_writes_h(be, &p) ||
	       (!cpu_pairs_corr_takes(be, &p) && !cpu_kcol_takes(&p) &&
	        (long)p.o * p.ow <= YH_FLOATS);
}

void cpu_iconv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                   const float *w, const float *bias, const cdp_bn_infer *bn, void *y,
                   void *ws)
{
	cpu_corr p = fwd_prob(d);

	run_corr(be, &p, d->n, cpu_src_in(d, x), w, (long)d->c * d->kh * d->kw, bias, bn, 0.0f,
	         d->yh ? NULL : y, d->yh ? y : NULL, cpu_iconv_writes_h(be, d), ws, wino_u(d, ws),
	         1);
}

/* The data gradient as bf16 (d->dxh): where Winograd's output transform
 * writes it, as the forward's (its vectors rounded in the register), or
 * the paired slice's kernels (cpu_conv_pairs.c: each vector or tile of
 * C rounded as it is stored; the amx set's data gradients) */
int cpu_iconv_data_writes_h(const cdp_backend *be, const cdp_conv_desc *d)
{
	cpu_corr p = data_prob(d);

	return be->precision == CDP_PREC_BF16 && cpu_iconv_usable(d) &&
	       (cpu_wino_takes(be, &p) || cpu_pairs_corr_takes(be, &p));
}

/* dy as bf16 (d->dyh) in both backward ops: the data gradient's plans
 * fill from cpu_src, which takes it; the filter gradient where it is the
 * grid's (which lays dy as bf16 anyway) or Winograd's (which widens it
 * as it loads it for its transform) */
int cpu_iconv_filter_takes_h(const cdp_backend *be, const cdp_conv_desc *d)
{
	cpu_corr p = fwd_prob(d);

	if (be->precision != CDP_PREC_BF16 || !cpu_iconv_usable(d))
		return 0;
	return cpu_winof_takes(be, &p) || cpu_grid_filter_takes(be, &p);
}

/* dy (N, F, OH, OW): float, or bf16 with d->dyh; dx float, or bf16 with
 * d->dxh (cpu_iconv_data_writes_h) */
void cpu_iconv_data(cdp_backend *be, const cdp_conv_desc *d, const void *dy,
                    const float *w, void *dx, float beta, void *ws)
{
	int kk = d->kh * d->kw;
	float *wf = (float *)((char *)ws + table_bytes(d));
	cpu_corr p = data_prob(d);

	/* wf[c, (f, t)] = w[f, c, KK-1-t]: the kernel turned around */
	for (int c = 0; c < d->c; c++)
		for (int f = 0; f < d->f; f++)
			for (int t = 0; t < kk; t++)
				wf[((size_t)c * d->f + f) * kk + t] = w[((size_t)f * d->c + c) * kk + kk - 1 - t];
	run_corr(be, &p, d->n, cpu_src_of(dy, d->dyh), wf, (long)d->f * kk, NULL, NULL, beta,
	         d->dxh ? NULL : dx, d->dxh ? dx : NULL, 0, ws, wino_u(d, ws), 0);
}

/* The filter gradient is cpu_conv_winof.c's where the forward is
 * Winograd's, cpu_conv_grid_filter.c's with the amx and avx512bf16 sets
 * (widths of 32 or more; amx's from 8 channels), else
 * cpu_conv_kcol.c's at every width: its sums run over
 * contiguous chunks of at least 1024 pixels (whole samples of small
 * planes), which took 4-23% less time than sums over this file's padded
 * rows at 32x32 to 256x256 (3x3 kernels, 16 to 256 channels). */
void cpu_iconv_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                      const void *dy, float *dw, void *ws)
{
	cpu_corr p = fwd_prob(d);
	cpu_src g = cpu_src_of(dy, d->dyh);
	float *wide;

	if (cpu_winof_takes(be, &p)) {
		cpu_winof_filter(be, &p, d->n, cpu_src_of(x, d->xh), g, dw, wino_u(d, ws));
		return;
	}
	if (cpu_grid_filter_takes(be, &p) &&
	    cpu_grid_filter(be, &p, d->n, cpu_src_of(x, d->xh), g, dw) == 0)
		return;
	if (!d->dyh) {
		cpu_kcol_filter(be, &p, d->n, cpu_src_of(x, d->xh), dy, dw, ws);
		return;
	}
	/* the grid's scratch fell short (cpu_grid_filter: -1): its fallback
	 * reads float, so dy widened (exact: the same results) */
	size_t count = (size_t)d->n * d->f * d->oh * d->ow;
	if (!(wide = malloc(count * sizeof *wide))) {
		fprintf(stderr, "cpu backend: out of memory widening a bf16 gradient\n");
		abort();
	}
	cpu_bf16_widen_run(wide, dy, count);
	cpu_kcol_filter(be, &p, d->n, cpu_src_of(x, d->xh), wide, dw, ws);
	free(wide);
}
