/* cpu_conv_pairs.c: the implicit convolution's forward and data
 * (cpu_conv_implicit.c) from a slice held as bf16 pairs of channels, by
 * the bf16 sets "amx" (on tiles; output widths a multiple of 16) and
 * "avx512bf16" (VDPBF16PS; every width), more than 8 channels in.
 *
 * The generic path hands each output row to cpu_kgemm_nn_tab, whose
 * kernels turn B's rows (the slice's rows at each tap) into pairs of k
 * for every output row and every 8 (VDPBF16PS) or 16 (AMX) filters: each
 * input value is rounded and interleaved once per tap (9 times for 3x3)
 * and more, and at 16 or 32 channels that costs more than the products
 * (perf: VCVTNE2PS2BF16 and VPERMW a third of amx_nn). Here K runs over
 * (tap, pair of channels) instead of (channel, tap), and the slice is
 * filled once per chunk of rows as pairs of channels,
 *     sl[g][row][col] = (in[2g][row][col], in[2g+1][row][col]) in bf16,
 * so that for tap t the pairs of 16 output columns lie side by side in
 * each pair's plane at the tap's offset, and load as they lie: AMX's B
 * tile (16 pairs x 16 columns) is 16 rows of the slice chs apart; the
 * VDPBF16PS kernel reads 16 positions of one plane as a vector and
 * broadcasts a filter's pair to multiply it (dp_tile). On tiles pairs pad
 * to a multiple of 16 (32 channels) with zeros: 16 channels take 9 tiles,
 * half of them zeros, still faster than converting (doc/PERFORMANCE.md,
 * session 32). A (the filters) is packed once per call: ap[o][t][g] =
 * (A[o, (2g, t)], A[o, (2g+1, t)]), rows past O zero, la = taps x pairs
 * apart.
 *
 * The rounding is the other bf16 paths' (to nearest even); each output
 * element is summed over (t, g) in that order, each tile (each vector)
 * in one chain, so the bits do not depend on the threads or the chunks.
 * Up to four C tiles are in flight at once (32 filters x 32 columns), as
 * cpu_gemm_amx.c's amx_nn does, for TDPBF16PS's latency. On tiles,
 * widths that are a multiple of 16 but not of 32 (16x16 planes) end on
 * one column block, and cpu_conv_kcol.c takes the other widths; the
 * VDPBF16PS kernel reads the chunk as one long row of the padded grid,
 * so narrow planes fill its vectors too (output widths that are a
 * multiple of 16, from 32 on, go row by row instead: whole aligned
 * stores, no dropped columns), and it adds the bias and applies
 * the inference net's batchnorm (conv_fwd_bn) to each vector as it stores
 * it, in cpu_bn.c's arithmetic (post_op), instead of a pass after the
 * chunk (cpu_corr_finish, which the tiles keep). With 8 channels or fewer the
 * pairs' padding to 16 would be most of the tiles (the first layer's 3
 * bands: 2 pairs of 16, 5.4 ms against kcol's 3.3 for 3 -> 16 at
 * 256x256, batch 8; 8 channels 1.7 against 1.3 ms at 128x128), so kcol
 * takes those in both sets.
 */
#include <stdlib.h>
#include <string.h>
#include "cpu_bf16x16.h"
#include "cpu_iconv.h"

#ifdef CPU_BF16_KERNELS
#include "cpu_amx.h"
#define CHUNK_BYTES (1024L * 1024)
#define DP_CHUNK_BYTES (512L * 1024)
#define DP_MR 8
#define DP_NV 2

typedef struct pgeo {
	cpu_corr c;
	int amx;                 /* tiles (the amx set), else VDPBF16PS (dp_rows) */
	int kk, np;              /* taps; pairs of channels, padded to 16 on tiles */
	int wp, rows;            /* padded width; output rows per chunk */
	long chs;                /* uint32 per pair's plane of the slice */
} pgeo;

static int ext(const cpu_corr *c) { return c->dil * (c->kh - 1); }

/* np: pairs, rounded up to whole tiles of 16 on tiles */
static int pairs(const cpu_corr *c, int amx)
{
	return amx ? ((c->s + 1) / 2 + 15) / 16 * 16 : (c->s + 1) / 2;
}

/* output rows whose slice fits in `bytes` (< 1: none) */
static long rows_in(const cpu_corr *c, int amx, long bytes)
{
	return bytes / (4L * pairs(c, amx) * (c->w + 2 * c->pw)) - ext(c);
}

/* rows per chunk: the slice near CHUNK_BYTES on tiles, DP_CHUNK_BYTES
 * for VDPBF16PS (it stays in cache between its fill and the products: in
 * L2, half of a Zen 4's), at least one row, at most `cap`'s worth */
static pgeo make_g(const cpu_corr *c, int amx, long cap)
{
	pgeo g = { *c, amx, c->kh * c->kw, pairs(c, amx), c->w + 2 * c->pw, 0, 0 };
	long r = rows_in(c, amx, amx ? CHUNK_BYTES : DP_CHUNK_BYTES), m = rows_in(c, amx, cap);

	if (r < 1)
		r = 1;
	if (r > m)
		r = m;
	g.rows = r < 1 ? 0 : r > c->oh ? c->oh : (int)r;
	g.chs = (long)(g.rows + ext(c)) * g.wp;
	return g;
}

int cpu_pairs_corr_takes(const cdp_backend *be, const cpu_corr *c)
{
	return c->s > 8 && (cpu_bf16_packs_pairs(be) || (c->ow % 16 == 0 && cpu_bf16_uses_amx(be)));
}

/* VDPBF16PS's output rows of whole vectors (dp_rows) */
static int by_rows(const cpu_corr *c)
{
	return c->ow % 16 == 0 && c->ow >= 32;
}

int cpu_pairs_writes_h(const cdp_backend *be, const cpu_corr *c)
{
	return cpu_pairs_corr_takes(be, c) && cpu_bf16_packs_pairs(be) && by_rows(c);
}

size_t cpu_pairs_scratch(const cdp_backend *be, const cpu_corr *c)
{
	pgeo g = make_g(c, cpu_bf16_uses_amx(be), CHUNK_BYTES * 64);

	return (size_t)g.np * g.chs * 4;
}

/* n values of channels x0 and x1 (x1 absent: zeros) as bf16 pairs */
DP_TARGET static void pair_row(uint32_t *d, cpu_src x0, cpu_src x1, int has1, int n)
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
static void fill_pairs(const pgeo *g, cpu_src in, int r0, int sr, uint32_t *sl)
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
		cpu_src x0 = cpu_src_chan(in, 2 * p, plane);
		cpu_src x1 = cpu_src_chan(in, has1 ? 2 * p + 1 : 2 * p, plane);
		for (int r = 0; r < sr; r++, ps += g->wp) {
			int ih = r0 + r - c->ph;
			if (ih < 0 || ih >= c->h) {
				memset(ps, 0, (size_t)g->wp * sizeof *ps);
				continue;
			}
			memset(ps, 0, (size_t)c->pw * sizeof *ps);
			pair_row(ps + c->pw, cpu_src_at(x0, (long)ih * c->w),
			         cpu_src_at(x1, (long)ih * c->w), has1, c->w);
			memset(ps + c->pw + c->w, 0, (size_t)c->pw * sizeof *ps);
		}
	}
}

/* ap[o][t][g] as the header says; NULL when out of memory */
static uint32_t *pack_filters(const pgeo *g, const float *a, long rs)
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
	pgeo g;
	cpu_src in;
	const uint32_t *ap;
	const float *bias;
	const cdp_bn_infer *bn;
	float beta;
	float *out;
	uint16_t *outh;          /* or the data gradient as bf16 (out NULL; beta 0) */
	/* dp_rows adds the bias and applies bn as it stores (beta 0 only:
	 * cpu_corr_finish's order), bn's m, a and b of filter o at bnc[o],
	 * bnc[O + o] and bnc[2 O + o] (cpu_bn_post_coef) */
	int fused;
	const float *bnc;
	int ro;                  /* VDPBF16PS: round out to bf16 after the bias, before bn
	                          * (outh is rounded as it is stored) */
} ajob;

/* tap t's offset in a pair's plane of the slice */
static inline long toff(const pgeo *g, int t)
{
	return (long)(t / g->c.kw * g->c.dil) * g->wp + t % g->c.kw * g->c.dil;
}

/* a C tile's rows from cb into h as bf16 (the data gradient's outh) */
AMX_TARGET static void put_h(const float *cb, uint16_t *h, long ldc, int rows)
{
	for (int r = 0; r < rows; r++)
		_mm256_storeu_si256((__m256i *)(h + r * ldc),
		                    cpu_bf16_bits16(_mm512_loadu_si512(cb + 16 * r)));
}

AMX_TARGET static void put(const float *cb, float *c, long ldc, int rows, float beta)
{
	for (int r = 0; r < rows; r++) {
		__m512 v = _mm512_loadu_ps(cb + 16 * r);
		if (beta != 0.0f)
			v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c + r * ldc), v);
		_mm512_storeu_ps(c + r * ldc, v);
	}
}

/* C tile T into c (rows of 16 columns, ldc apart), beta c added; or
 * with h (the same offsets) as bf16 there */
#define PUT(T, c, h, ldc, rows, beta, cb)                                       \
	do {                                                                    \
		if (h) {                                                        \
			_tile_stored(T, cb, 64);                                \
			put_h(cb, h, ldc, rows);                                \
		} else if ((rows) == 16 && (beta) == 0.0f) {                    \
			_tile_stored(T, c, (ldc) * 4);                          \
		} else {                                                        \
			_tile_stored(T, cb, 64);                                \
			put(cb, c, ldc, rows, beta);                            \
		}                                                               \
	} while (0)

/* output rows [r0, r1) of filters [ob, ob + 32) of one sample (into on,
 * or as bf16 into onh) */
AMX_TARGET static void rows_block(const ajob *j, const uint32_t *sl, int r0, int r1, int ob,
                                  float *on, uint16_t *onh)
{
	const pgeo *g = &j->g;
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
				long off = (long)(r - r0) * g->wp + toff(g, t) + jb;
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
			long e0 = ob * so + (long)r * c->ow + jb;
			float *c0 = onh ? NULL : on + e0;
			uint16_t *h0 = onh ? onh + e0 : NULL;
			PUT(0, c0, h0, so, q0, j->beta, cb);
			if (twoj)
				PUT(1, c0 + 16, h0 ? h0 + 16 : NULL, so, q0, j->beta, cb);
			if (two) {
				PUT(2, c0 + 16 * so, h0 ? h0 + 16 * so : NULL, so, q1, j->beta, cb);
				if (twoj)
					PUT(3, c0 + 16 * so + 16, h0 ? h0 + 16 * so + 16 : NULL, so, q1,
					    j->beta, cb);
			}
		}
}

/* VDPBF16PS on the slice read as one long row: output (row rr, column
 * cc) of the chunk sits at grid position q = rr wp + cc, and tap t reads
 * the slice at q + toff(t) in every pair's plane, so 16 positions in a
 * row of the grid are one load however narrow the plane (positions with
 * cc >= ow are computed and dropped: 2 pw of every wp). Their stores
 * (put_grid) are masked pieces of rows, most of them across two cache
 * lines: at 16 filters of a 256-wide plane, in fp32, a sixth of the
 * forward's time. Planes whose width is a whole number of vectors, 32
 * and more, go row by row instead (dp_rows), each vector stored whole
 * where it lies in the output row. */

/* lanes [i, i + n) of 16 */
static inline __mmask16 lanes(int i, int n)
{
	return (__mmask16)(((1u << n) - 1u) << i);
}

/* y rounded to bf16, lane by lane (cpu_bf16_round's bits) */
DP_TARGET static inline __m512 round16(__m512 y)
{
	__m256i h = cpu_bf16_bits16(_mm512_castps_si512(y));

	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* filter o's y + bias, (ro) rounded to bf16, then batchnorm and its
 * activation, as
 * cpu_corr_finish and cpu_bn_post_run compute them (the same operations,
 * each rounded on its own: the same bits) */
DP_TARGET static inline __m512 post_op(__m512 y, const ajob *j, int o)
{
	const cdp_bn_infer *bn = j->bn;
	int no = j->g.c.o;
	__m512 zero = _mm512_setzero_ps();
	__mmask16 neg;

	if (j->bias)
		y = _mm512_add_ps(y, _mm512_set1_ps(j->bias[o]));
	if (j->ro)
		y = round16(y);
	if (!bn)
		return y;
	y = _mm512_sub_ps(y, _mm512_set1_ps(j->bnc[o]));
	y = _mm512_mul_ps(y, _mm512_set1_ps(j->bnc[no + o]));
	/* the product rounded before the sum: GCC would fuse the two into
	 * an FMA (cpu_bn.c is built without contraction) */
	__asm__("" : "+v"(y));
	y = _mm512_add_ps(y, _mm512_set1_ps(j->bnc[2 * no + o]));
	neg = _mm512_cmp_ps_mask(y, zero, _CMP_LT_OQ);     /* a NaN passes */
	if (bn->act == CDP_ACT_RELU)
		y = _mm512_mask_mov_ps(y, neg, zero);
	else if (bn->act == CDP_ACT_LEAKY)
		y = _mm512_mask_mov_ps(y, neg, _mm512_mul_ps(y, _mm512_set1_ps(bn->slope)));
	return y;
}

/* the 16 positions from q0 (mask mk) of y into out rows (on: the chunk's
 * first output row of this filter), beta out added: a masked store per
 * piece of a grid row; or as bf16 into onh's (beta 0) */
DP_TARGET static inline void put_grid(__m512 y, long q0, __mmask16 mk, const pgeo *g,
                                      float *on, uint16_t *onh, float beta)
{
	int ow = g->c.ow;
	long r = q0 / g->wp;
	int c = (int)(q0 % g->wp);
	__m256i yh = onh ? cpu_bf16_bits16(_mm512_castps_si512(y)) : _mm256_setzero_si256();

	for (int i = 0; i < 16; r++, c = 0) {
		int seg = g->wp - c < 16 - i ? g->wp - c : 16 - i;
		if (c < ow) {
			__mmask16 m = lanes(i, ow - c < seg ? ow - c : seg) & mk;
			long e = r * ow + c - i;
			if (onh) {
				_mm256_mask_storeu_epi16(onh + e, m, yh);
			} else {
				__m512 v = y;
				if (beta != 0.0f)
					v = _mm512_fmadd_ps(_mm512_set1_ps(beta),
					                    _mm512_maskz_loadu_ps(m, on + e), v);
				_mm512_mask_storeu_ps(on + e, m, v);
			}
		}
		i += seg;
	}
}

/* Filters [ob, ob + mr) at positions q0 + [0, 16 nv)
 * (masks mk), summed over (t, g) in that order, one chain per element;
 * stored at output element e + 16 v of each filter's plane, or where
 * put_grid finds them (e < 0) */
DP_TARGET __attribute__((always_inline)) static inline void
dp_tile(const int mr, const int nv, const ajob *j, const uint32_t *sl, int ob, long q0,
        const __mmask16 *mk, float *on, uint16_t *onh, long so, long e)
{
	const pgeo *g = &j->g;
	long la = (long)g->kk * g->np;
	const uint32_t *ap = j->ap + ob * la;
	__m512 acc[DP_MR][DP_NV];

	#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			acc[i][v] = _mm512_setzero_ps();
	for (int t = 0; t < g->kk; t++) {
		const uint32_t *b = sl + q0 + toff(g, t);
		const uint32_t *a = ap + (long)t * g->np;
		for (int p = 0; p < g->np; p++, b += g->chs, a++) {
			__m512bh bv[DP_NV];
			#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				bv[v] = (__m512bh)_mm512_maskz_loadu_epi32(mk[v], b + 16 * v);
			#pragma GCC unroll 8
			for (int i = 0; i < mr; i++) {
				__m512bh av = (__m512bh)_mm512_set1_epi32((int)a[i * la]);
				#pragma GCC unroll 4
				for (int v = 0; v < nv; v++)
					acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
			}
		}
	}
	#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 4
		for (int v = 0; v < nv; v++) {
			__m512 y = j->fused ? post_op(acc[i][v], j, ob + i) :
			           j->ro ? round16(acc[i][v]) : acc[i][v];
			if (e < 0) {
				put_grid(y, q0 + 16 * v, mk[v], g, onh ? NULL : on + i * so,
				         onh ? onh + i * so : NULL, j->beta);
			} else if (onh) {
				_mm256_storeu_si256((__m256i *)(onh + i * so + e + 16 * v),
				                    cpu_bf16_bits16(_mm512_castps_si512(y)));
			} else {
				float *d = on + i * so + e + 16 * v;
				if (j->beta != 0.0f)
					y = _mm512_fmadd_ps(_mm512_set1_ps(j->beta), _mm512_loadu_ps(d), y);
				_mm512_storeu_ps(d, y);
			}
		}
}

/* every filter at positions q0 + [0, 16 nv) (masks mk) of the grid;
 * e >= 0: the positions are output elements e + [0, 16 nv) of a row (the
 * masks full), else put_grid finds them */
DP_TARGET static void dp_tiles(const ajob *j, const uint32_t *sl, long q0, int nv,
                               const __mmask16 *mk, float *o0, uint16_t *h0, long so, long e)
{
	const cpu_corr *c = &j->g.c;

	for (int ob = 0; ob < c->o;) {
		float *oc = o0 ? o0 + ob * so : NULL;
		uint16_t *hc = h0 ? h0 + ob * so : NULL;
		if (c->o - ob >= DP_MR) {
			if (nv == DP_NV)
				dp_tile(DP_MR, DP_NV, j, sl, ob, q0, mk, oc, hc, so, e);
			else
				dp_tile(DP_MR, 1, j, sl, ob, q0, mk, oc, hc, so, e);
			ob += DP_MR;
		} else {
			if (nv == DP_NV)
				dp_tile(1, DP_NV, j, sl, ob, q0, mk, oc, hc, so, e);
			else
				dp_tile(1, 1, j, sl, ob, q0, mk, oc, hc, so, e);
			ob++;
		}
	}
}

/* output rows [r0, r1) of every filter of one sample: positions up to
 * the last row's ow, so that no tap reads past the slice */
DP_TARGET static void dp_rows(const ajob *j, const uint32_t *sl, int r0, int r1, float *on,
                              uint16_t *onh)
{
	const pgeo *g = &j->g;
	const cpu_corr *c = &g->c;
	long so = (long)c->oh * c->ow, nq = (long)(r1 - r0 - 1) * g->wp + c->ow;
	float *o0 = onh ? NULL : on + (long)r0 * c->ow;
	uint16_t *h0 = onh ? onh + (long)r0 * c->ow : NULL;

	if (by_rows(c)) {
		__mmask16 full[DP_NV];
		for (int v = 0; v < DP_NV; v++)
			full[v] = 0xffff;
		for (int r = 0; r < r1 - r0; r++)
			for (int cc = 0; cc < c->ow; cc += 16 * DP_NV)
				dp_tiles(j, sl, (long)r * g->wp + cc, c->ow - cc > 16 ? DP_NV : 1, full,
				         o0, h0, so, (long)r * c->ow + cc);
		return;
	}
	for (long q0 = 0; q0 < nq; q0 += 16 * DP_NV) {
		__mmask16 mk[DP_NV];
		int nv = nq - q0 > 16 ? DP_NV : 1;
		for (int v = 0; v < DP_NV; v++) {
			long left = nq - q0 - 16 * v;
			mk[v] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : lanes(0, (int)left);
		}
		dp_tiles(j, sl, q0, nv, mk, o0, h0, so, -1);
	}
}

/* one item: output rows [r0, r1) of one sample, every filter */
static void pairs_item(void *ctx, int it)
{
	const ajob *j = ctx;
	const pgeo *g = &j->g;
	const cpu_corr *c = &g->c;
	int nch = (c->oh + g->rows - 1) / g->rows, n = it / nch, r0 = (it % nch) * g->rows;
	int r1 = r0 + g->rows < c->oh ? r0 + g->rows : c->oh;
	uint32_t *sl = (uint32_t *)cpu_scratch(j->be, cpu_worker());
	size_t e = (size_t)n * c->o * c->oh * c->ow;
	float *on = j->outh ? NULL : j->out + e;
	uint16_t *onh = j->outh ? j->outh + e : NULL;

	fill_pairs(g, cpu_src_sample(j->in, n, (long)c->s * c->h * c->w), r0,
	           r1 - r0 + ext(c), sl);
	if (!g->amx) {
		dp_rows(j, sl, r0, r1, on, onh);
		if (j->fused || onh)
			return;
	} else {
		cpu_bf16_amx_tiles();
		for (int ob = 0; ob < c->o; ob += 32)
			rows_block(j, sl, r0, r1, ob, on, onh);
		if (onh)
			return;
	}
	cpu_corr_finish(j->bias, 0, j->bn, on, c->o, c->oh, c->ow, r0, r1);
}

int cpu_pairs_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in, const float *a,
                 long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out,
                 uint16_t *outh, int ro)
{
	int amx = cpu_bf16_uses_amx(be);
	ajob j = { .be = be, .g = make_g(p, amx, (long)cpu_scratch_bytes(be)), .in = in,
	           .bias = bias, .bn = bn, .beta = beta, .out = out, .outh = outh,
	           .ro = ro && !outh };
	uint32_t *ap;
	float *bnc = NULL;

	if (!amx && beta == 0.0f && (bias || bn)) {
		if (bn && !(bnc = malloc(3 * (size_t)p->o * sizeof *bnc)))
			return -1;
		for (int o = 0; bn && o < p->o; o++)
			cpu_bn_post_coef(bn, o, bnc + o, bnc + p->o + o, bnc + 2 * p->o + o);
		j.fused = 1;
		j.bnc = bnc;
	}
	if (j.g.rows < 1 || (amx && (j.ro || cpu_bf16_amx_tiles() < 0)) ||
	    !(ap = pack_filters(&j.g, a, rs))) {
		free(bnc);
		return -1;
	}
	j.ap = ap;
	cpu_parallel_for(be, n * ((p->oh + j.g.rows - 1) / j.g.rows), pairs_item, &j);
	free(ap);
	free(bnc);
	return 0;
}

#else

int cpu_pairs_corr_takes(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

int cpu_pairs_writes_h(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

size_t cpu_pairs_scratch(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

int cpu_pairs_corr(cdp_backend *be, const cpu_corr *p, int n, cpu_src in, const float *a,
                 long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out,
                 uint16_t *outh, int ro)
{
	(void)be; (void)p; (void)n; (void)in; (void)a; (void)rs; (void)bias; (void)bn; (void)beta;
	(void)out; (void)outh; (void)ro;
	return -1;
}

#endif
