/* cpu_iconv.h: what the convolution files share, private to them: the
 * implicit convolution's two halves (cpu_conv_implicit.c, cpu_conv_kcol.c)
 * and the filter gradients' partial sums (cpu_conv.c).
 *
 * Both solve one correlation problem (cpu_conv_implicit.c says how the
 * three convolution ops become one): out (O, OH, OW) (+)= sum over input
 * channel s and kernel tap (i, j) of A[o, (s,i,j)] * in[s, oh + i*dil - ph,
 * ow + j*dil - pw], in (S, H, W) zero outside the image. cpu_conv_implicit.c
 * computes forward and data for output widths that are a multiple of 32
 * (row by row, on a padded slice); cpu_conv_kcol.c the other widths (the
 * small planes above all) and every filter gradient, in whole chunks on
 * one masked copy of the input per kernel column. cpu_conv_wino.c takes
 * forward and data first where it can (3x3, dilation 1, 32+ channels in
 * and out, fp32): Winograd's F(2x2, 3x3); cpu_conv_winof.c the filter
 * gradient of the same problems, over the same tiles.
 */
#ifndef CDP_CPU_ICONV_H
#define CDP_CPU_ICONV_H

#include "cpu.h"

typedef struct cpu_corr {
	int s, h, w;             /* input channels and size */
	int o, oh, ow;           /* output channels and size */
	int kh, kw, dil, ph, pw; /* kernel, dilation, padding */
} cpu_corr;

/* An input as the fills read it: float (f), or a bf16 copy (h: the
 * stash's, backend.h's conv_takes_xh), offsets counting elements; or
 * (sd) the float segments of a desc with nseg > 0 (conv_takes_split),
 * sample n of them once cpu_src_sample has chosen it. The fills take a
 * sample (cpu_src_sample), then a channel of it (cpu_src_chan): a plain
 * source from there on. */
typedef struct cpu_src {
	const float *f;
	const uint16_t *h;
	const cdp_conv_desc *sd;
	int n;
} cpu_src;

static inline cpu_src cpu_src_of(const void *p, int h)
{
	return h ? (cpu_src){ NULL, p, NULL, 0 } : (cpu_src){ p, NULL, NULL, 0 };
}

/* d's input x, or its segments (d->nseg) */
static inline cpu_src cpu_src_in(const cdp_conv_desc *d, const void *x)
{
	return d->nseg > 0 ? (cpu_src){ NULL, NULL, d, 0 } : cpu_src_of(x, d->xh);
}

/* a plain source (not segments), off elements on */
static inline cpu_src cpu_src_at(cpu_src s, long off)
{
	return s.h ? (cpu_src){ NULL, s.h + off, NULL, 0 } : (cpu_src){ s.f + off, NULL, NULL, 0 };
}

/* sample n, per elements a sample */
static inline cpu_src cpu_src_sample(cpu_src s, int n, long per)
{
	if (s.sd) {
		s.n = n;
		return s;
	}
	return cpu_src_at(s, (long)n * per);
}

/* channel c of a sample, hw elements a channel: plain */
static inline cpu_src cpu_src_chan(cpu_src s, int c, long hw)
{
	if (s.sd) {
		const cdp_conv_desc *d = s.sd;
		int i = 0;
		while (i + 1 < d->nseg && c >= d->segc[i])
			c -= d->segc[i++];
		return cpu_src_of(d->seg[i] + ((long)s.n * d->segc[i] + c) * hw, 0);
	}
	return cpu_src_at(s, (long)c * hw);
}

/* y[0..n) = s[0..n): widened from bf16, or copied (rounded to bf16 when
 * rnd: cpu_copy_operand) */
static inline void cpu_src_copy(float *y, cpu_src s, size_t n, int rnd)
{
	if (s.h)
		cpu_bf16_widen_run(y, s.h, n);
	else
		cpu_copy_operand(y, s.f, n, rnd);
}

/* Bias, the rounding to bf16 of a forward's output that could be written
 * as bf16 (rnd: backend.h's conv_writes_yh, whose y holds bf16 values
 * either way) and then batchnorm (the forward's, bn_post) on output rows
 * [r0, r1) of one sample's out (O, OH, OW), where a pass wrote them */
static inline void cpu_corr_finish(const float *bias, int rnd, const cdp_bn_infer *bn, float *on,
                                   int o, int oh, int ow, int r0, int r1)
{
	for (int q = 0; bias && q < o; q++)
		for (float *d = on + ((size_t)q * oh + r0) * ow, *e = d + (size_t)(r1 - r0) * ow;
		     d < e; d++)
			*d += bias[q];
	for (int q = 0; rnd && q < o; q++)
		cpu_bf16_round_run(on + ((size_t)q * oh + r0) * ow, on + ((size_t)q * oh + r0) * ow,
		                   (size_t)(r1 - r0) * ow);
	for (int q = 0; bn && q < o; q++)
		cpu_bn_post_run(bn, q, on + ((size_t)q * oh + r0) * ow, (size_t)(r1 - r0) * ow);
}

/* cpu_conv_pairs.c: forward or data of more than 8 channels in, with
 * be's bf16 set "amx" (output widths a multiple of 16) or "avx512bf16"
 * (every width), from a slice of bf16 pairs of channels; cpu_pairs_corr
 * is cpu_kcol_corr's call without the table (with outh, beta 0 and
 * neither bias nor bn: the output as bf16 there instead, out NULL; with
 * ro, beta 0 and the avx512bf16 set: out rounded to bf16 after the bias,
 * before bn), and returns -1 (nothing done) where the scratch or the
 * memory for the packed filters falls short. cpu_pairs_scratch: the
 * per-thread scratch bytes it wants. cpu_pairs_writes_h: the forward
 * goes to the avx512bf16 set's rows of whole vectors, whose stores
 * write bf16 as cheaply as float (cpu_iconv_writes_h). */
int cpu_pairs_corr_takes(const cdp_backend *be, const cpu_corr *c);
int cpu_pairs_writes_h(const cdp_backend *be, const cpu_corr *c);
size_t cpu_pairs_scratch(const cdp_backend *be, const cpu_corr *c);
int cpu_pairs_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in, const float *a,
                 long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out,
                 uint16_t *outh, int ro);

/* cpu_conv_grid_filter.c: the filter gradient (dw +=) with be's bf16 set
 * "amx" (on tiles) or "avx512bf16" (VDPBF16PS), 8 input channels or more
 * and output widths of 32 or more; -1 (nothing done) where
 * the scratch falls short. cpu_grid_filter_scratch: the per-thread scratch
 * bytes it wants, the partials included. */
int cpu_grid_filter_takes(const cdp_backend *be, const cpu_corr *c);
size_t cpu_grid_filter_scratch(const cdp_backend *be, const cpu_corr *c);
int cpu_grid_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                   float *dw);
/* The same for a 1x1 c (stride 1, no padding) whose input is x's 2x2
 * windows as channels (space to depth): x (N, s/4, 2h, 2w), channel
 * 4 ci + 2 a + b of the input at (r, q) is x[ci, 2r + a, 2q + b]; so dw
 * (o, s) is the filter gradient of a 2x2 stride-2 convolution of x
 * (cpu_col2im_disjoint: a transposed convolution's), in its layout; x
 * float (a transposed convolution's dy), else -1.
 * cpu_grid_filter_s2d_takes: be's set has the kernels. */
int cpu_grid_filter_s2d_takes(const cdp_backend *be);
int cpu_grid_filter_s2d(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                        float *dw);

/* Forward or data goes to cpu_conv_kcol.c. The caller's table (tab
 * below) has room for one long per (s, i, j). */
static inline int cpu_kcol_takes(const cpu_corr *c)
{
	return c->ow % 32 != 0;
}

/* Per-thread scratch bytes: of corr (forward or data), and of the filter
 * gradient of f filters (c the forward's problem). */
size_t cpu_kcol_scratch(const cpu_corr *c);
size_t cpu_kcol_filter_scratch(const cpu_corr *c, int f);

/* out (N, O, OH, OW) = A (O, S*KH*KW; row stride rs) * the taps of in
 * (N, S, H, W), + beta out, + bias[o] when bias is not NULL, then bn
 * applied to each block when bn is not NULL (the forward's: beta 0). */
void cpu_kcol_corr(cdp_backend *be, const cpu_corr *c, int n, cpu_src in,
                   const float *a, long rs, const float *bias, const cdp_bn_infer *bn,
                   float beta, float *out, long *tab);

/* dw (F, S*KH*KW) += sum over samples and output pixels of dy (N, F, OH, OW)
 * times the taps of x (N, S, H, W); c is the forward's problem (O = F). */
void cpu_kcol_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x,
                     const float *dy, float *dw, long *tab);

/* cpu_conv_wino.c: forward and data of 3x3, dilation-1 problems by
 * Winograd's F(2x2, 3x3). cpu_wino_shape: the problem has its shape;
 * cpu_wino_takes: and be computes it so (fp32, or bf16 by the
 * avx512bf16-fma and avx512bf16 sets; not turned off by
 * CDP_CPU_WINOGRAD=0). Scratch bytes per thread; the caller's u holds
 * cpu_wino_ufloats(c) floats (the transformed filters). */
int cpu_wino_shape(const cpu_corr *c);
int cpu_wino_takes(const cdp_backend *be, const cpu_corr *c);
size_t cpu_wino_scratch(const cpu_corr *c);
size_t cpu_wino_ufloats(const cpu_corr *c);
/* fwd: the forward (its input rounded to bf16 in every bf16 set: the
 * stash's rule, backend.h; its output too, after the bias, before bn),
 * else the data gradient. outh (the forward, beta 0, no bn): out's bf16
 * bits written there instead (backend.h's d->yh), out not touched. */
void cpu_wino_corr(cdp_backend *be, const cpu_corr *c, int n, cpu_src in, const float *a,
                   long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out,
                   uint16_t *outh, float *u, int fwd);

/* What cpu_conv_winof.c shares of cpu_conv_wino.c. Items are runs of
 * tile rows (a tile row: tpr tiles of 2x2 output pixels of one sample;
 * tph rows a sample) numbered over the batch, `rows` an item, its tiles
 * in tb gemm columns (rows * tpr rounded up to a vector). The 16
 * matrices of a transform lie CPU_WINO_XPAD floats (a cache line) more
 * than their size apart: at sizes that are multiples of 4 KiB, the 16
 * streams a transform writes would otherwise share cache sets (the
 * filter transform ran 4 times slower so). */
#define CPU_WINO_XPAD 16
typedef struct cpu_wgeo {
	int tph, tpr, rows, tb;
} cpu_wgeo;
/* items of at least `tiles` tiles */
cpu_wgeo cpu_wino_geo(const cpu_corr *c, long tiles);
/* cpu_wino_input.c, the input transform. Floats of cpu_wino_input's tmp:
 * the padded slice of the item's rows (cpu_wino_slice_floats), then a
 * spare output row */
size_t cpu_wino_slice_floats(const cpu_corr *c, const cpu_wgeo *g);
size_t cpu_wino_tmp_floats(const cpu_corr *c, const cpu_wgeo *g);
/* V[xi] (S, ld), xi = 0..15, S*ld + CPU_WINO_XPAD floats apart: columns
 * 0 .. (g1 - g0) tpr - 1 from the input patches under tile rows [g0, g1)
 * (at most g->rows of them) of in (N, S, H, W), rounded to bf16 first
 * when rnd (cpu_bf16_rounds_copies) */
void cpu_wino_input(const cpu_corr *c, const cpu_wgeo *g, cpu_src in, int g0, int g1,
                    float *v, size_t ld, float *tmp, int rnd);
/* The same V rounded to bf16 as VCVTNE2PS2BF16 rounds (the avx512bf16
 * set only): channel s's row of V[xi] at vh + xi st + s ld; tmp2 holds
 * CPU_WINO_TMP2 floats a tile of the largest item */
#define CPU_WINO_TMP2 32
void cpu_wino_input_h(const cpu_corr *c, const cpu_wgeo *g, cpu_src in, int g0, int g1,
                      uint16_t *vh, size_t ld, size_t st, float *tmp, float *tmp2, int rnd);
/* and in pairs of channels, the forward's B of cpu_bf16_nn_pp: pair p of
 * V[xi] (channels 2p and 2p + 1, the second 0 past S) at vp + xi st + p ld */
void cpu_wino_input_pairs(const cpu_corr *c, const cpu_wgeo *g, cpu_src in, int g0, int g1,
                          uint32_t *vp, size_t ld, size_t st, float *tmp, float *tmp2, int rnd);
/* cpu_conv_winof.c, the filter gradient: dw (O, S*9) += the sum over
 * samples and output pixels of dy (N, O, OH, OW) times the taps of x (N,
 * S, H, W), c the forward's problem (cpu_winof_takes(be, c): cpu_wino_takes
 * but for the narrow layers of odd rows of tiles, which the avx512bf16 set
 * sums faster directly), in ws of
 * cpu_winof_floats(c) floats and per-thread scratch of
 * cpu_winof_scratch(c) bytes */
int cpu_winof_takes(const cdp_backend *be, const cpu_corr *c);
size_t cpu_winof_scratch(const cpu_corr *c);
size_t cpu_winof_floats(const cpu_corr *c);
void cpu_winof_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x,
                      cpu_src dy, float *dw, float *ws);

/* cpu_conv_phase.c: 3x3 stride-2 pad-1 convolutions as four stride-1
 * correlations on the input's phases (cpu_conv_kcol.c runs them). The
 * caller's workspace: cpu_phase_workspace bytes (which also reserves the
 * per-thread scratch), SIZE_MAX when that cannot be had. */
int cpu_phase_usable(const cdp_conv_desc *d);
size_t cpu_phase_workspace(cdp_backend *be, const cdp_conv_desc *d);
void cpu_phase_fwd(cdp_backend *be, const cdp_conv_desc *d, const float *x, const float *w,
                   const float *bias, const cdp_bn_infer *bn, float *y, void *ws);
void cpu_phase_data(cdp_backend *be, const cdp_conv_desc *d, const float *dy, const float *w,
                    float *dx, float beta, void *ws);
/* dw += */
void cpu_phase_filter(cdp_backend *be, const cdp_conv_desc *d, const float *x, const float *dy,
                      float *dw, void *ws);

/* The filter gradients' partial sums (cpu.h, CPU_FILTER_PARTS): part p's
 * partial of fk floats, at the start of a thread's scratch; and dw += the
 * partials 0..parts-1 in that order, split over the threads. */
float *cpu_filter_partial(cdp_backend *be, size_t fk, int p);
void cpu_filter_reduce(cdp_backend *be, int parts, size_t fk, float *dw);

#endif
