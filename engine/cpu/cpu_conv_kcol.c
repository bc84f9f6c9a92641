/* cpu_conv_kcol.c: the implicit convolution (cpu_iconv.h) on one masked
 * copy of the input per kernel column: forward and data for output widths
 * that are not a multiple of 32 (small planes above all: the classifier's
 * 16x16 and 8x8 layers), and every filter gradient.
 *
 * The slice holds, for input channel s and kernel column j, the input
 * shifted by j*dil - pw along its rows, OW wide, without padding columns;
 * the columns the shift brings in from outside the image are zero:
 *   X[s,j][q, ow] = in[s, q0 + q - ph, ow + j*dil - pw]   (0 outside)
 * for the padded rows q0 + q the chunk's output rows [r0, r1) read (q0 =
 * r0). Output pixel (oh, ow) of tap (s, i, j) is X[s,j][oh - r0 + i*dil,
 * ow], so the "column matrix" row (s, i, j) over the chunk's pixels, in
 * output order, is the contiguous run X[s,j] + i*dil*OW: the gemm
 *   out[:, chunk] (O, P) = A (O, S*KH*KW) B (S*KH*KW, P),  P = (r1-r0)*OW
 * reads B through a table of those offsets (cpu_kgemm_nn_tab) and writes
 * the chunk of out in place: no junk columns (padded rows computed at
 * padded width: 12-56% more work at 16x16 and 8x8), no copy-out. When
 * OW == W (the usual padding) a copy is one memcpy of the channel's rows
 * and a store per row to mask its edge column. The filter gradient is
 *   dw (F, S*KH*KW) += dy[:, chunk] (F, P) B^T
 * with dy read in place (cpu_kgemm_nt_tab), over chunks of at least
 * SUM_PIXELS pixels; for small planes an item is a group of whole
 * samples, each a segment of the sum (cpu_kgemm_nt_seg): dy's at their
 * stride in dy, B's at their own in the slice (8x8: 64 pixels a sample
 * are too short a sum to pay for its horizontal add).
 *
 * Slice layout: block (s, j) at (s*KW + j)*bst, its rows OW apart, a
 * group's samples sb apart in it; each block's rows end in TAIL zeros, the
 * columns the last (TAIL-wide) gemm tile reads past them. Three copies
 * of the input instead of the padded one copy: for small planes the
 * copies are ~1% of the work (8x8, 128 channels: 30 K floats against
 * 38 M flops a sample).
 */
#include <string.h>
#include "cpu_iconv.h"

#define CHUNK_FLOATS (256 * 1024)
#define SLICE_MAX (4L * CHUNK_FLOATS)
#define SUM_PIXELS 1024         /* cpu_gemm.c's NT_KC */
#define TAIL 16                 /* the gemm's last columns: one tile of 16 */

typedef struct kcol {
	cpu_corr c;
	int rows;                /* output rows per chunk (OH: whole samples) */
	int g;                   /* filter: samples per item (0: chunks of rows) */
	long sb;                 /* floats of one chunk's (sample's) rows */
	long bst;                /* floats per (s, j) block */
} kcol;

static int ext(const cpu_corr *c) { return c->dil * (c->kh - 1); }

/* Output rows per chunk: the slice near CHUNK_FLOATS, so it stays in cache
 * between the copy and the gemm. The filter gradient adds its sums to dw
 * once per chunk, each after a horizontal add of a vector of partial
 * sums; over chunks of a few hundred pixels that made it half as slow
 * again (256->128 channels at 32x32, batch 8: 56 against 37 ms), so its
 * chunks take at least SUM_PIXELS pixels (a block of the gemm), the slice
 * growing up to SLICE_MAX for them. */
static kcol make_kcol(const cpu_corr *c, int filter, int g)
{
	kcol k = { *c, 0, g, 0, 0 };
	long row = (long)c->s * c->kw * c->ow, r = CHUNK_FLOATS / row - ext(c);

	if (filter && r * c->ow < SUM_PIXELS) {
		long rmin = (SUM_PIXELS + c->ow - 1) / c->ow, rmax = SLICE_MAX / row - ext(c);
		r = rmin < rmax ? rmin : rmax;
	}
	k.rows = r < 1 ? 1 : r > c->oh ? c->oh : (int)r;
	k.sb = (long)(k.rows + ext(c)) * c->ow;
	k.bst = ((g > 0 ? g : 1) * k.sb + TAIL + 15) / 16 * 16;
	return k;
}

static size_t slice_floats(const kcol *k) { return (size_t)k->c.s * k->c.kw * k->bst; }

/* Filter gradient: samples per item when whole samples fit a chunk (0
 * otherwise), with the slice near 2*CHUNK_FLOATS and at least SUM_PIXELS
 * pixels an item when SLICE_MAX allows. */
static int group_max(const cpu_corr *c)
{
	kcol k = make_kcol(c, 1, 0);
	long pix = (long)c->oh * c->ow, per = (long)c->s * c->kw * k.sb, g, gmin, gcap;

	if (k.rows < c->oh)
		return 0;
	g = 2L * CHUNK_FLOATS / per;
	gmin = (SUM_PIXELS + pix - 1) / pix;
	gcap = SLICE_MAX / per;
	if (g < gmin)
		g = gmin < gcap ? gmin : gcap;
	return g < 1 ? 1 : (int)g;
}

/* Samples per item for n samples over `parts` parts: at most group_max,
 * and as even as it can be over the same number of items per part. */
static int group_size(const cpu_corr *c, int n, int parts)
{
	int gmax = group_max(c), per;

	if (gmax == 0)
		return 0;
	per = (n + (long)parts * gmax - 1) / ((long)parts * gmax);   /* items per part */
	return (int)((n + (long)parts * per - 1) / ((long)parts * per));
}

size_t cpu_kcol_scratch(const cpu_corr *c)
{
	kcol k = make_kcol(c, 0, 0);
	return (slice_floats(&k) + (size_t)c->o * TAIL) * sizeof(float);
}

size_t cpu_kcol_filter_scratch(const cpu_corr *c, int f)
{
	int g = group_max(c);
	kcol k = make_kcol(c, 1, g);
	return (CPU_FILTER_PARTS * (size_t)f * c->s * c->kh * c->kw + slice_floats(&k)) *
	       sizeof(float);
}

static void make_table(const kcol *k, long *tab)
{
	const cpu_corr *c = &k->c;

	for (int s = 0; s < c->s; s++)
		for (int i = 0; i < c->kh; i++)
			for (int j = 0; j < c->kw; j++)
				*tab++ = ((long)s * c->kw + j) * k->bst + (long)i * c->dil * c->ow;
}

/* Padded rows [q0, q0 + sr) (input rows q0 - ph, ...) of sample `in`: each
 * block's masked copy at blk + (s*KW + j)*bst, then TAIL zeros. */
static void fill(const kcol *k, cpu_src in, int q0, int sr, int rnd, float *blk)
{
	const cpu_corr *c = &k->c;
	int ow = c->ow, ra = c->ph - q0, rb = c->h + c->ph - q0;   /* rows in the image */

	ra = ra < 0 ? 0 : ra > sr ? sr : ra;
	rb = rb < ra ? ra : rb > sr ? sr : rb;
	for (int s = 0; s < c->s; s++) {
		cpu_src xs = cpu_src_at(cpu_src_chan(in, s, (long)c->h * c->w),
		                        (long)(q0 + ra - c->ph) * c->w);
		for (int j = 0; j < c->kw; j++) {
			float *o = blk + ((long)s * c->kw + j) * k->bst, *d = o + (long)ra * ow;
			int sh = j * c->dil - c->pw;
			int lo = sh < 0 ? (-sh < ow ? -sh : ow) : 0;        /* valid columns [lo, hi) */
			int hi = c->w - sh < ow ? c->w - sh : ow;

			hi = hi < lo ? lo : hi;
			memset(o, 0, (size_t)ra * ow * sizeof *o);
			if (ow == c->w && hi > lo && rb > ra) {
				/* x's rows lie like the copy's: one copy from the first
				 * valid element to the last, then the wrapped columns
				 * cleared */
				long t1 = (long)(rb - ra) * ow - (ow - hi);
				cpu_src_copy(d + lo, cpu_src_at(xs, sh + lo), (size_t)(t1 - lo), rnd);
				for (int r = ra; r < rb; r++, d += ow) {
					for (int q = 0; q < lo; q++)
						d[q] = 0.0f;
					for (int q = hi; q < ow; q++)
						d[q] = 0.0f;
				}
			} else {
				for (int r = ra; r < rb; r++, d += ow) {
					cpu_src xr = cpu_src_at(xs, (long)(r - ra) * c->w + sh + lo);
					memset(d, 0, (size_t)lo * sizeof *d);
					cpu_src_copy(d + lo, xr, (size_t)(hi - lo), rnd);
					memset(d + hi, 0, (size_t)(ow - hi) * sizeof *d);
				}
			}
			memset(o + (long)rb * ow, 0, ((size_t)(sr - rb) * ow + TAIL) * sizeof *o);
		}
	}
}

typedef struct kjob {
	cdp_backend *be;
	kcol k;
	int n, nch, parts;
	cpu_src in;
	const float *a, *bias, *dy;
	const cdp_bn_infer *bn;   /* forward: the batchnorm after it, or NULL */
	long rs;
	const long *tab;
	float *out, *dw;
	float beta;
	int rnd;                 /* round the slice to bf16 as it is filled */
} kjob;

/* One item of forward or data: output rows [r0, r1) of one sample, in
 * place (items own their output rows). */
static void corr_item(void *ctx, int it)
{
	const kjob *j = ctx;
	const kcol *k = &j->k;
	const cpu_corr *c = &k->c;
	int n = it / j->nch, r0 = (it % j->nch) * k->rows;
	int r1 = r0 + k->rows < c->oh ? r0 + k->rows : c->oh;
	int np = (r1 - r0) * c->ow, nv = np / TAIL * TAIL, kk = c->s * c->kh * c->kw;
	long ldc = (long)c->oh * c->ow;
	float *slice = cpu_scratch(j->be, cpu_worker()), *tmp = slice + slice_floats(k);
	float *out = j->out + (size_t)n * c->o * ldc + (size_t)r0 * c->ow;

	fill(k, cpu_src_sample(j->in, n, (long)c->s * c->h * c->w), r0, r1 - r0 + ext(c), j->rnd, slice);
	if (nv > 0)
		cpu_kgemm_nn_tab(j->be, c->o, nv, kk, j->a, j->rs, 1, slice, j->tab, j->beta, out, ldc);
	if (nv < np) {
		/* the last columns as one whole tile in tmp (O, TAIL), reading
		 * into the TAIL zeros; with beta, from out's values, so every
		 * column sums in the same order */
		for (int o = 0; j->beta != 0.0f && o < c->o; o++) {
			memcpy(tmp + (size_t)o * TAIL, out + o * ldc + nv, (size_t)(np - nv) * sizeof *tmp);
			memset(tmp + (size_t)o * TAIL + np - nv, 0, (size_t)(TAIL - np + nv) * sizeof *tmp);
		}
		cpu_kgemm_nn_tab(j->be, c->o, TAIL, kk, j->a, j->rs, 1, slice + nv, j->tab, j->beta, tmp, TAIL);
		for (int o = 0; o < c->o; o++)
			memcpy(out + o * ldc + nv, tmp + (size_t)o * TAIL, (size_t)(np - nv) * sizeof *tmp);
	}
	cpu_corr_finish(j->bias, 0, j->bn, j->out + (size_t)n * c->o * ldc, c->o, c->oh, c->ow, r0,
	                r1);
}

void cpu_kcol_corr(cdp_backend *be, const cpu_corr *c, int n, cpu_src in,
                   const float *a, long rs, const float *bias, const cdp_bn_infer *bn,
                   float beta, float *out, long *tab)
{
	kjob j = { .be = be, .k = make_kcol(c, 0, 0), .n = n, .in = in, .a = a, .rs = rs,
	           .bias = bias, .bn = bn, .beta = beta, .out = out, .tab = tab,
	           .rnd = cpu_bf16_rounds_copies(be) };

	j.nch = (c->oh + j.k.rows - 1) / j.k.rows;
	make_table(&j.k, tab);
	cpu_parallel_for(be, n * j.nch, corr_item, &j);
}

/* Part p of the filter gradient's items (a fixed run of them) into its own
 * partial; the running thread's slice follows its partials. */
static void filter_part(void *ctx, int p)
{
	const kjob *j = ctx;
	const kcol *k = &j->k;
	const cpu_corr *c = &k->c;
	int g = k->g, items = g > 0 ? (j->n + g - 1) / g : j->n * j->nch;
	int lo = (int)((long)items * p / j->parts), hi = (int)((long)items * (p + 1) / j->parts);
	int kk = c->s * c->kh * c->kw, e = ext(c);
	long pix = (long)c->oh * c->ow;
	size_t fk = (size_t)c->o * kk, plane = (size_t)c->s * c->h * c->w;
	float *dwt = cpu_filter_partial(j->be, fk, p);
	float *slice = cpu_scratch(j->be, cpu_worker()) + CPU_FILTER_PARTS * fk;

	memset(dwt, 0, fk * sizeof *dwt);
	for (int it = lo; it < hi; it++) {
		if (g > 0) {
			int n0 = it * g, gn = j->n - n0 < g ? j->n - n0 : g;
			for (int q = 0; q < gn; q++)
				fill(k, cpu_src_sample(j->in, n0 + q, (long)plane), 0, c->oh + e, j->rnd,
				     slice + q * k->sb);
			cpu_kgemm_nt_seg(j->be, c->o, kk, gn, (int)pix, j->dy + (size_t)n0 * c->o * pix, pix,
			                 c->o * pix, slice, j->tab, k->sb, dwt, kk);
		} else {
			int n = it / j->nch, r0 = (it % j->nch) * k->rows;
			int r1 = r0 + k->rows < c->oh ? r0 + k->rows : c->oh;
			fill(k, cpu_src_sample(j->in, n, (long)plane), r0, r1 - r0 + e, j->rnd, slice);
			cpu_kgemm_nt_tab(j->be, c->o, kk, (r1 - r0) * c->ow,
			                 j->dy + (size_t)n * c->o * pix + (size_t)r0 * c->ow, pix, slice,
			                 j->tab, dwt, kk);
		}
	}
}

void cpu_kcol_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x,
                     const float *dy, float *dw, long *tab)
{
	/* groups as even as they can be over the parts the pixels ask for
	 * (whole groups each: 13 groups of 5 samples over 8 parts cost the
	 * 32x32 layers 8%) */
	long pixels = (long)n * c->oh * c->ow;
	int g = group_size(c, n, cpu_filter_parts(be->threads, n, pixels));
	kjob j = { .be = be, .k = make_kcol(c, 1, g), .n = n, .in = x, .dy = dy, .dw = dw, .tab = tab,
	           .rnd = cpu_bf16_rounds_copies(be) };
	size_t fk = (size_t)c->o * c->s * c->kh * c->kw;
	int items;

	j.nch = (c->oh + j.k.rows - 1) / j.k.rows;
	items = g > 0 ? (n + g - 1) / g : n * j.nch;
	j.parts = cpu_filter_parts(be->threads, items, pixels);
	make_table(&j.k, tab);
	cpu_parallel_for(be, j.parts, filter_part, &j);
	cpu_filter_reduce(be, j.parts, fk, dw);
}
