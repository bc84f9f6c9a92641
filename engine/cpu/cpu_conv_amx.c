/* cpu_conv_amx.c: the implicit convolution's rows (cpu_conv_implicit.c:
 * forward and data, output widths a multiple of 16) on AMX tiles, for the
 * bf16 set "amx", from a slice held as bf16 pairs of channels.
 *
 * The generic path hands each output row to cpu_kgemm_nn_tab, whose AMX
 * kernel turns B's rows (the slice's rows at each tap) into VNNI pairs of
 * k for every output row: each input value is rounded and interleaved once
 * per tap (9 times for 3x3), and at 16 or 32 channels that costs more than
 * the tiles (perf: VCVTNE2PS2BF16 and VPERMW a third of amx_nn). Here K
 * runs over (tap, pair of channels) instead of (channel, tap), and the
 * slice is filled once per chunk of rows as pairs of channels,
 *     sl[g][row][col] = (in[2g][row][col], in[2g+1][row][col]) in bf16,
 * so that for tap t and the 16 pairs from g0 on, B's tile (16 pairs x 16
 * output columns) is 16 rows of the slice chs apart, shifted by the tap's
 * offset, and is loaded as it lies. Pairs pad to a multiple of 16 (32
 * channels) with zeros: 16 channels take 9 tiles, half of them zeros,
 * still faster than converting (doc/PERFORMANCE.md, session 32).
 * A (the filters) is packed once per call: ap[o][t][g] = (A[o, (2g, t)],
 * A[o, (2g+1, t)]), rows past O zero, la = taps x pairs apart.
 *
 * The rounding is the other bf16 paths' (to nearest even); each output
 * element is summed over (t, g) in that order, each tile in one chain, so
 * the bits do not depend on the threads or the chunks. Up to four C tiles
 * are in flight at once (32 filters x 32 columns), as cpu_gemm_bf16.c's
 * amx_nn does, for TDPBF16PS's latency. Widths that are a multiple of 16
 * but not of 32 (16x16 planes) end on one column block; cpu_conv_kcol.c
 * takes these in the other sets. With 8 channels or fewer the pairs'
 * padding to 16 would be most of the tiles (the first layer's 3 bands:
 * 2 pairs of 16, 5.4 ms against kcol's 3.3 for 3 -> 16 at 256x256, batch
 * 8; 8 channels 1.7 against 1.3 ms at 128x128), so kcol takes those.
 */
#include <stdlib.h>
#include <string.h>
#include "cpu_iconv.h"

#ifdef CPU_BF16_KERNELS
#include "cpu_amx.h"
#define CHUNK_BYTES (1024L * 1024)

typedef struct amxg {
	cpu_corr c;
	int kk, np;              /* taps; pairs of channels, padded to 16 */
	int wp, rows;            /* padded width; output rows per chunk */
	long chs;                /* uint32 per pair's plane of the slice */
} amxg;

static int ext(const cpu_corr *c) { return c->dil * (c->kh - 1); }

/* np: pairs rounded up to whole tiles of 16 */
static int pairs(const cpu_corr *c) { return ((c->s + 1) / 2 + 15) / 16 * 16; }

/* output rows whose slice fits in `bytes` (< 1: none) */
static long rows_in(const cpu_corr *c, long bytes)
{
	return bytes / (4L * pairs(c) * (c->w + 2 * c->pw)) - ext(c);
}

/* rows per chunk: the slice near CHUNK_BYTES (it stays in cache between
 * its fill and the tiles), at least one row, at most `cap`'s worth */
static amxg make_g(const cpu_corr *c, long cap)
{
	amxg g = { *c, c->kh * c->kw, pairs(c), c->w + 2 * c->pw, 0, 0 };
	long r = rows_in(c, CHUNK_BYTES), m = rows_in(c, cap);

	if (r < 1)
		r = 1;
	if (r > m)
		r = m;
	g.rows = r < 1 ? 0 : r > c->oh ? c->oh : (int)r;
	g.chs = (long)(g.rows + ext(c)) * g.wp;
	return g;
}

int cpu_amx_corr_takes(const cdp_backend *be, const cpu_corr *c)
{
	return c->ow % 16 == 0 && c->s > 8 && cpu_bf16_uses_amx(be);
}

size_t cpu_amx_scratch(const cpu_corr *c)
{
	amxg g = make_g(c, CHUNK_BYTES * 64);

	return (size_t)g.np * g.chs * 4;
}

/* n values of channels x0 and x1 (x1 absent: zeros) as bf16 pairs */
AMX_TARGET static void pair_row(uint32_t *d, cpu_src x0, cpu_src x1, int has1, int n)
{
	__m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
	                               24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
	                               16, 0);

	for (int j = 0; j < n; j += 16) {
		__mmask16 mk = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
		__m512i v;
		if (x0.h) {
			__m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, x0.h + j));
			__m512i hi = has1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, x1.h + j))
			                  : _mm512_setzero_si512();
			v = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
		} else {
			__m512 a = _mm512_maskz_loadu_ps(mk, x0.f + j);
			__m512 b = has1 ? _mm512_maskz_loadu_ps(mk, x1.f + j) : _mm512_setzero_ps();
			v = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(b, a));
		}
		_mm512_mask_storeu_epi32(d + j, mk, v);
	}
}

/* the slice of padded rows [r0, r0 + sr) of one sample's input */
static void fill_pairs(const amxg *g, cpu_src in, int r0, int sr, uint32_t *sl)
{
	const cpu_corr *c = &g->c;
	long plane = (long)c->h * c->w;

	for (int p = 0; p < g->np; p++) {
		uint32_t *ps = sl + (size_t)p * g->chs;
		int has1 = 2 * p + 1 < c->s;
		if (2 * p >= c->s) {
			memset(ps, 0, (size_t)sr * g->wp * sizeof *ps);
			continue;
		}
		for (int r = 0; r < sr; r++, ps += g->wp) {
			int ih = r0 + r - c->ph;
			if (ih < 0 || ih >= c->h) {
				memset(ps, 0, (size_t)g->wp * sizeof *ps);
				continue;
			}
			memset(ps, 0, (size_t)c->pw * sizeof *ps);
			pair_row(ps + c->pw, cpu_src_at(in, 2 * p * plane + (long)ih * c->w),
			         cpu_src_at(in, (has1 ? 2 * p + 1 : 2 * p) * plane + (long)ih * c->w),
			         has1, c->w);
			memset(ps + c->pw + c->w, 0, (size_t)c->pw * sizeof *ps);
		}
	}
}

/* ap[o][t][g] as the header says; NULL when out of memory */
static uint32_t *pack_filters(const amxg *g, const float *a, long rs)
{
	const cpu_corr *c = &g->c;
	long la = (long)g->kk * g->np;
	size_t n = (size_t)(c->o + 15) / 16 * 16 * la;
	uint32_t *ap = aligned_alloc(64, (n * sizeof *ap + 63) / 64 * 64);

	if (!ap)
		return NULL;
	memset(ap, 0, n * sizeof *ap);
	for (int o = 0; o < c->o; o++)
		for (int t = 0; t < g->kk; t++)
			for (int p = 0; 2 * p < c->s; p++) {
				uint32_t lo = cpu_bf16_bits(a[o * rs + (long)2 * p * g->kk + t]);
				uint32_t hi = 2 * p + 1 < c->s ?
					cpu_bf16_bits(a[o * rs + (long)(2 * p + 1) * g->kk + t]) : 0;
				ap[o * la + (long)t * g->np + p] = lo | hi << 16;
			}
	return ap;
}

typedef struct ajob {
	cdp_backend *be;
	amxg g;
	cpu_src in;
	const uint32_t *ap;
	const float *bias;
	const cdp_bn_infer *bn;
	float beta;
	float *out;
} ajob;

AMX_TARGET static void put(const float *cb, float *c, long ldc, int rows, float beta)
{
	for (int r = 0; r < rows; r++) {
		__m512 v = _mm512_loadu_ps(cb + 16 * r);
		if (beta != 0.0f)
			v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c + r * ldc), v);
		_mm512_storeu_ps(c + r * ldc, v);
	}
}

/* C tile T into c (rows of 16 columns, ldc apart), beta c added */
#define PUT(T, c, ldc, rows, beta, cb)                                          \
	do {                                                                    \
		if ((rows) == 16 && (beta) == 0.0f) {                           \
			_tile_stored(T, c, (ldc) * 4);                          \
		} else {                                                        \
			_tile_stored(T, cb, 64);                                \
			put(cb, c, ldc, rows, beta);                            \
		}                                                               \
	} while (0)

/* output rows [r0, r1) of filters [ob, ob + 32) of one sample */
AMX_TARGET static void rows_block(const ajob *j, const uint32_t *sl, int r0, int r1, int ob,
                                  float *on)
{
	const amxg *g = &j->g;
	const cpu_corr *c = &g->c;
	long la = (long)g->kk * g->np, so = (long)c->oh * c->ow, sb = g->chs * 4;
	int two = c->o - ob > 16, q0 = c->o - ob < 16 ? c->o - ob : 16;
	int q1 = c->o - ob - 16 < 16 ? c->o - ob - 16 : 16;
	const uint32_t *a0 = j->ap + ob * la, *a1 = a0 + 16 * la;
	float cb[256] __attribute__((aligned(64)));

	for (int r = r0; r < r1; r++)
		for (int jb = 0; jb < c->ow; jb += 32) {
			int twoj = c->ow - jb > 16;
			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			for (int t = 0; t < g->kk; t++) {
				long off = (long)(r - r0 + t / c->kw * c->dil) * g->wp + t % c->kw * c->dil + jb;
				for (int g0 = 0; g0 < g->np; g0 += 16) {
					const uint32_t *b = sl + g0 * g->chs + off;
					long at = (long)t * g->np + g0;
					_tile_loadd(4, a0 + at, la * 4);
					_tile_loadd(6, b, sb);
					_tile_dpbf16ps(0, 4, 6);
					if (twoj) {
						_tile_loadd(7, b + 16, sb);
						_tile_dpbf16ps(1, 4, 7);
					}
					if (two) {
						_tile_loadd(5, a1 + at, la * 4);
						_tile_dpbf16ps(2, 5, 6);
						if (twoj)
							_tile_dpbf16ps(3, 5, 7);
					}
				}
			}
			float *c0 = on + ob * so + (long)r * c->ow + jb;
			PUT(0, c0, so, q0, j->beta, cb);
			if (twoj)
				PUT(1, c0 + 16, so, q0, j->beta, cb);
			if (two) {
				PUT(2, c0 + 16 * so, so, q1, j->beta, cb);
				if (twoj)
					PUT(3, c0 + 16 * so + 16, so, q1, j->beta, cb);
			}
		}
}

/* one item: output rows [r0, r1) of one sample, every filter */
static void amx_item(void *ctx, int it)
{
	const ajob *j = ctx;
	const amxg *g = &j->g;
	const cpu_corr *c = &g->c;
	int nch = (c->oh + g->rows - 1) / g->rows, n = it / nch, r0 = (it % nch) * g->rows;
	int r1 = r0 + g->rows < c->oh ? r0 + g->rows : c->oh;
	uint32_t *sl = (uint32_t *)cpu_scratch(j->be, cpu_worker());
	float *on = j->out + (size_t)n * c->o * c->oh * c->ow;

	fill_pairs(g, cpu_src_at(j->in, (long)n * c->s * c->h * c->w), r0,
	           r1 - r0 + ext(c), sl);
	cpu_bf16_amx_tiles();
	for (int ob = 0; ob < c->o; ob += 32)
		rows_block(j, sl, r0, r1, ob, on);
	cpu_corr_finish(j->bias, j->bn, on, c->o, c->oh, c->ow, r0, r1);
}

int cpu_amx_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in, const float *a,
                 long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out)
{
	ajob j = { .be = be, .g = make_g(p, (long)cpu_scratch_bytes(be)), .in = in,
	           .bias = bias, .bn = bn, .beta = beta, .out = out };
	uint32_t *ap;

	if (j.g.rows < 1 || cpu_bf16_amx_tiles() < 0 || !(ap = pack_filters(&j.g, a, rs)))
		return -1;
	j.ap = ap;
	cpu_parallel_for(be, n * ((p->oh + j.g.rows - 1) / j.g.rows), amx_item, &j);
	free(ap);
	return 0;
}

#else

int cpu_amx_corr_takes(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

size_t cpu_amx_scratch(const cpu_corr *c)
{
	(void)c;
	return 0;
}

int cpu_amx_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in, const float *a,
                 long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out)
{
	(void)be; (void)p; (void)n; (void)in; (void)a; (void)rs; (void)bias; (void)bn; (void)beta;
	(void)out;
	return -1;
}

#endif
