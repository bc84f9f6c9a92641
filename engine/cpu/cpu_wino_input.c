/* cpu_wino_input.c: Winograd's input transform, V = B^T d B of every 4x4
 * input patch under a run of tile rows (cpu_conv_wino.c states the method
 * and the items; cpu_iconv.h the interface). The forward's and data's
 * items (cpu_conv_wino.c) and the filter gradient's (cpu_conv_winof.c)
 * read their V from here, in one of three forms:
 *  - fp32 V[xi] (S, ld) (cpu_wino_input), for the fp32 gemms and the
 *    avx512bf16-fma set's (operands rounded as the slice is filled);
 *  - pairs of channels in bf16 (cpu_wino_input_pairs), the forward's B of
 *    cpu_bf16_nn_pp;
 *  - rows of bf16 (cpu_wino_input_h), the filter gradient's A.
 * Each way reads the patches either from a padded copy of the rows
 * (fill_slice) or, where the rows are whole vectors of tiles, from the
 * image itself (input_direct); every way computes the same V.
 */
#include <string.h>
#include "cpu_iconv.h"
#include "cpu_wino_vec.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#define XPAD CPU_WINO_XPAD

typedef cpu_wgeo wgeo;

/* the tile rows of one sample an item can hold */
static int seg_rows(const wgeo *g)
{
	return g->rows < g->tph ? g->rows : g->tph;
}

/* floats per channel of the padded slice (fill_slice) */
static size_t slice_chs(const wgeo *g)
{
	return (size_t)(2 * seg_rows(g) + 2) * (2 * g->tpr + 2);
}

size_t cpu_wino_slice_floats(const cpu_corr *c, const wgeo *g)
{
	return (size_t)c->s * slice_chs(g);
}

/* the padded slice, a spare output row */
size_t cpu_wino_tmp_floats(const cpu_corr *c, const wgeo *g)
{
	return cpu_wino_slice_floats(c, g) + 2 * (size_t)g->tpr;
}

#if WINO_VEC
/* Row r of d B, d a vector of 4x4 patches, into e[0..3] (VT): a, b
 * (a2, b2) row r of the patches from their column 0 (2) on, the even
 * and odd columns of a:b (a2:b2) being d[r][0], d[r][1] (d[r][2],
 * d[r][3]) */
#define INPUT_E(VT, EV, OD, A, B, A2, B2, e) do { \
	VT a_ = (A), b_ = (B), a2_ = (A2), b2_ = (B2); \
	VT d0_ = __builtin_shuffle(a_, b_, EV), d1_ = __builtin_shuffle(a_, b_, OD); \
	VT d2_ = __builtin_shuffle(a2_, b2_, EV), d3_ = __builtin_shuffle(a2_, b2_, OD); \
	(e)[0] = d0_ - d2_; \
	(e)[1] = d1_ + d2_; \
	(e)[2] = d2_ - d1_; \
	(e)[3] = d1_ - d3_; \
} while (0)

/* V = B^T d B of one vector of tiles into vs + xi st, from the rows
 * e0 .. e3 of d B (INPUT_E), stored in the order of xi through one
 * pointer stepped by st: the empty asm keeps GCC from holding 16
 * addresses, which it spilled (a load before every store) */
#define INPUT_V_WALK(VT, e0, e1, e2, e3, vs) do { \
	float *w_ = (vs); \
	_Pragma("GCC unroll 4") \
	for (int i_ = 0; i_ < 4; i_++) \
		_Pragma("GCC unroll 4") \
		for (int k = 0; k < 4; k++) { \
			VT t_ = i_ == 0 ? (e0)[k] - (e2)[k] : i_ == 1 ? (e1)[k] + (e2)[k] : \
			        i_ == 2 ? (e2)[k] - (e1)[k] : (e1)[k] - (e3)[k]; \
			*(VT *)w_ = t_; \
			w_ += st; \
			__asm__("" : "+r"(w_)); \
		} \
} while (0)

/* V of one vector of tiles into vs + xi st: A and B (A2 and B2) give, as
 * expressions of r, row r of the patches from their column 0 (2) on */
#define INPUT_TILES(VT, EV, OD, A, B, A2, B2, vs) do { \
	VT e[4][4]; \
	_Pragma("GCC unroll 4") \
	for (int r = 0; r < 4; r++) \
		INPUT_E(VT, EV, OD, A, B, A2, B2, e[r]); \
	INPUT_V_WALK(VT, e[0], e[1], e[2], e[3], vs); \
} while (0)

/* input_row's tiles from tx on, VW at a time (VT: VW floats): columns
 * 2 tx .. 2 tx + 2 VW + 1 of each row */
#define INPUT_VEC(VT, VW, EV, OD) \
	for (; tx + (VW) <= tpr; tx += (VW)) \
		INPUT_TILES(VT, EV, OD, *(const VT *)(rp[r] + 2 * tx), \
		            *(const VT *)(rp[r] + 2 * tx + (VW)), *(const VT *)(rp[r] + 2 * tx + 2), \
		            *(const VT *)(rp[r] + 2 * tx + (VW) + 2), vs + tx);

#endif

/* The padded slice of a run of tile rows [ty0, ty1) of sample n: input
 * rows 2 ty0 - ph ... 2 ty1 + 1 - ph of every channel, each in a row of
 * wp = 2 tpr + 2 floats with the image at column pw and zeros around it,
 * channel s at sl + s * chs. Copied once per item, so the transform reads
 * every tile as an interior one (and long after these stores: reading
 * right behind a copy stalled every load on store forwarding). */
static void fill_slice(const cpu_corr *c, const wgeo *g, cpu_src in, float *sl, size_t chs,
                       int n, int ty0, int ty1, int rnd)
{
	int wp = 2 * g->tpr + 2, nr = 2 * (ty1 - ty0) + 2;
	int cw = c->w < wp - c->pw ? c->w : wp - c->pw;   /* image columns kept */

	for (int s = 0; s < c->s; s++) {
		cpu_src plane = cpu_src_chan(cpu_src_sample(in, n, (long)c->s * c->h * c->w), s,
		                             (long)c->h * c->w);
		float *row = sl + (size_t)s * chs;

		for (int r = 0; r < nr; r++, row += wp) {
			int ih = 2 * ty0 - c->ph + r;

			if (ih < 0 || ih >= c->h) {
				memset(row, 0, (size_t)wp * sizeof *row);
				continue;
			}
			memset(row, 0, (size_t)c->pw * sizeof *row);
			cpu_src_copy(row + c->pw, cpu_src_at(plane, (long)ih * c->w), (size_t)cw, rnd);
			memset(row + c->pw + cw, 0, (size_t)(wp - c->pw - cw) * sizeof *row);
		}
	}
}

/* V[xi][s][lt + tx] for the tiles of tile row ty (row yr of the slice
 * sl, channels chs apart), lt the row's first column in the item, of
 * channels [s0, s1): channel s's row of V[xi] at v + xi st + (s - s0) ld */
CPU_CLONES static void input_row(int tpr, float *restrict v, size_t ld, size_t st, int lt,
                                   const float *restrict sl, size_t chs, int yr, int s0, int s1,
                                   int tx0)
{
	int wp = 2 * tpr + 2;
#if WINO_VEC
	int wide = WINO_WIDE;
#endif

	for (int s = s0; s < s1; s++) {
		const float *rp[4];
		float *vs = v + (size_t)(s - s0) * ld + lt;
		int tx = tx0;

		for (int r = 0; r < 4; r++)
			rp[r] = sl + (size_t)s * chs + (size_t)(2 * yr + r) * wp;
#if WINO_VEC
		if (wide)
			INPUT_VEC(wvec, 16, EVEN, ODD)
		INPUT_VEC(wvec8, 8, EVEN8, ODD8)
		INPUT_VEC(wvec4, 4, EVEN4, ODD4)
#endif
		for (; tx < tpr; tx++) {         /* the rest, one tile at a time */
			float e[4][4];
			for (int r = 0; r < 4; r++) {   /* rows of d B, d the 4x4 patch */
				const float *d = rp[r] + 2 * tx;
				e[r][0] = d[0] - d[2];
				e[r][1] = d[1] + d[2];
				e[r][2] = d[2] - d[1];
				e[r][3] = d[1] - d[3];
			}
			for (int k = 0; k < 4; k++) {   /* V[4i + k] = (B^T d B)[i][k] */
				vs[(size_t)k * st + tx] = e[0][k] - e[2][k];
				vs[(size_t)(4 + k) * st + tx] = e[1][k] + e[2][k];
				vs[(size_t)(8 + k) * st + tx] = e[2][k] - e[1][k];
				vs[(size_t)(12 + k) * st + tx] = e[1][k] - e[3][k];
			}
		}
	}
}

#if WINO_VEC
/* V of a vector of 16 tiles down the nr tile rows from vs (tile row q
 * at vs + q tpr): ROW_E(R, e) gives e = d B of slice row R of the run */
#define INPUT_DOWN(ROW_E, vs) do { \
	wvec e0[4], e1[4], e2[4], e3[4]; \
	int q = 0; \
	ROW_E(0, e0);            /* rows 0, 1 of tile row 0's patches */ \
	ROW_E(1, e1); \
	for (; q + 2 <= nr; q += 2) { \
		ROW_E(2 * q + 2, e2); \
		ROW_E(2 * q + 3, e3); \
		INPUT_V_WALK(wvec, e0, e1, e2, e3, (vs) + (size_t)q * tpr); \
		ROW_E(2 * q + 4, e0); \
		ROW_E(2 * q + 5, e1); \
		INPUT_V_WALK(wvec, e2, e3, e0, e1, (vs) + (size_t)(q + 1) * tpr); \
	} \
	if (q < nr) { \
		ROW_E(2 * q + 2, e2); \
		ROW_E(2 * q + 3, e3); \
		INPUT_V_WALK(wvec, e0, e1, e2, e3, (vs) + (size_t)q * tpr); \
	} \
} while (0)

/* INPUT_E of slice row R from the row's start b0 + R wp */
#define SLICE_E(R, e) \
	INPUT_E(wvec, EVEN, ODD, *(const wvec *)(b0 + (size_t)(R) * wp), \
	        *(const wvec *)(b0 + (size_t)(R) * wp + 16), \
	        *(const wvec *)(b0 + (size_t)(R) * wp + 2), \
	        *(const wvec *)(b0 + (size_t)(R) * wp + 18), e)

/* input_row's tiles [0, full) of the nr tile rows from slice row yr on,
 * on 16 lanes (full a multiple of 16): a vector of tiles at a time down
 * the tile rows, since rows 2 and 3 of one tile row's patches are rows 0
 * and 1 of the next one's: each slice row's d B (INPUT_E) is computed
 * once, not twice, half of input_row's loads and shuffles. The same
 * arithmetic on each value as input_row (the same V). */
CPU_CLONES static void input_down(int tpr, int full, float *restrict v, size_t ld, size_t st,
                                  int lt, const float *restrict sl, size_t chs, int yr, int nr,
                                  int s0, int s1)
{
	int wp = 2 * tpr + 2;

	for (int s = s0; s < s1; s++)
		for (int tx = 0; tx < full; tx += 16) {
			const float *b0 = sl + (size_t)s * chs + (size_t)2 * yr * wp + 2 * tx;
			INPUT_DOWN(SLICE_E, v + (size_t)(s - s0) * ld + lt + tx);
		}
}
#endif

/* ---- input_down straight from the input, without the slice ----
 * fill_slice's copy (a memcpy or a widening of every input row, then
 * zeros around it) was 6-8% of a bf16 classifier step. Where the rows
 * are whole vectors of 16 tiles, the transform reads each slice row's
 * four vectors from the image itself, lanes outside it masked to zero:
 * the slice's values (rounded as fill_slice rounds them), so the same V. */
#if WINO_VEC && defined(CPU_BF16_KERNELS)
#include <immintrin.h>
#define DIRECT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

/* 1: input_direct can run (the 16-wide transforms, chosen per call as
 * the kernels may be; AVX512BW and VL for its masked loads of bf16) */
static int direct_ok(void)
{
	static int bwvl = -1;

	if (bwvl < 0)
		bwvl = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
	return WINO_WIDE && bwvl;
}

/* the lanes l of a vector of columns [b, b + 16) with 0 <= b + l < cw */
static __mmask16 cols_mask(long b, long cw)
{
	long lo = b < 0 ? -b : 0, hi = cw - b < 16 ? cw - b : 16;

	if (hi <= lo)
		return 0;
	return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* columns [b, b + 16) of row r, the lanes outside m zero: kind 1 from
 * bf16 (h, widened as fill_slice's cpu_src_copy widens), 0 from floats
 * (f) */
static inline __attribute__((always_inline)) DIRECT_TARGET wvec
load_cols(const int kind, const float *f, const uint16_t *h, long r, long b, __mmask16 m)
{
	if (kind) {
		__m256i w = _mm256_maskz_loadu_epi16(m, h + r + b);
		return (wvec)_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16));
	}
	return (wvec)_mm512_maskz_loadu_ps(m, f + r + b);
}

/* image row ih of a plane (its offset), or -1 outside the image */
#define DIRECT_ROW(ih) ((ih) < 0 || (ih) >= c->h ? -1L : (long)(ih) * c->w)
/* a vector of columns [b_, ...) of row offset r_, zero for row -1 */
#define DIRECT_LD(VT, LOAD, r_, b_, m_) \
	((r_) < 0 ? (VT){ 0 } : LOAD(kind, f, h, (r_), (b_), (m_)))

/* INPUT_E of slice row R of tile row ty0's run: image row 2 ty0 - ph + R,
 * zero outside the image */
#define DIRECT_E(R, e) do { \
	long r_ = DIRECT_ROW(2L * ty0 - c->ph + (R)); \
	INPUT_E(wvec, EVEN, ODD, DIRECT_LD(wvec, load_cols, r_, b, m0), \
	        DIRECT_LD(wvec, load_cols, r_, b + 16, m1), \
	        DIRECT_LD(wvec, load_cols, r_, b + 2, m2), \
	        DIRECT_LD(wvec, load_cols, r_, b + 18, m3), e); \
} while (0)

/* input_direct's channel (f or h, its plane), V at vs: kind as load_cols */
static inline __attribute__((always_inline)) DIRECT_TARGET void
direct_chan(const int kind, const cpu_corr *c, int tpr, long cw, const float *f,
            const uint16_t *h, int ty0, int nr, float *restrict vs, size_t st)
{
	for (int tx = 0; tx < tpr; tx += 16) {
		long b = 2L * tx - c->pw;
		__mmask16 m0 = cols_mask(b, cw), m1 = cols_mask(b + 16, cw);
		__mmask16 m2 = cols_mask(b + 2, cw), m3 = cols_mask(b + 18, cw);
		INPUT_DOWN(DIRECT_E, vs + tx);
	}
}

/* columns [b, b + 8) of row r as load_cols, on 8 lanes (the low half
 * of load_cols's, the high lanes masked off) */
static inline __attribute__((always_inline)) DIRECT_TARGET wvec8
load_cols8(const int kind, const float *f, const uint16_t *h, long r, long b, __mmask8 m)
{
	return (wvec8)_mm512_castps512_ps256((__m512)load_cols(kind, f, h, r, b, m));
}

/* direct_chan on planes 16 wide (rows of 8 tiles): two tile rows a
 * vector, lane l the tile l % 8 of row l / 8, as input_rows' INPUT_TILES
 * on the slice, then a last odd tile row on 8 lanes as input_row's */
static inline __attribute__((always_inline)) DIRECT_TARGET void
direct_chan8(const int kind, const cpu_corr *c, long cw, const float *f, const uint16_t *h,
             int ty0, int nr, float *restrict vs, size_t st)
{
	long b = -(long)c->pw;
	__mmask16 m0 = cols_mask(b, cw), m2 = cols_mask(b + 2, cw);
	int q = 0;

	for (; q + 2 <= nr; q += 2) {
		wvec e[4][4];
		for (int r = 0; r < 4; r++) {
			long ih = 2L * (ty0 + q) - c->ph + r;
			long ra = DIRECT_ROW(ih), rb = DIRECT_ROW(ih + 2);
			INPUT_E(wvec, EVEN, ODD, DIRECT_LD(wvec, load_cols, ra, b, m0),
			        DIRECT_LD(wvec, load_cols, rb, b, m0),
			        DIRECT_LD(wvec, load_cols, ra, b + 2, m2),
			        DIRECT_LD(wvec, load_cols, rb, b + 2, m2), e[r]);
		}
		INPUT_V_WALK(wvec, e[0], e[1], e[2], e[3], vs + (size_t)q * 8);
	}
	if (q < nr) {
		__mmask8 n0 = (__mmask8)cols_mask(b, cw), n1 = (__mmask8)cols_mask(b + 8, cw);
		__mmask8 n2 = (__mmask8)cols_mask(b + 2, cw), n3 = (__mmask8)cols_mask(b + 10, cw);
		wvec8 e[4][4];
		for (int r = 0; r < 4; r++) {
			long ra = DIRECT_ROW(2L * (ty0 + q) - c->ph + r);
			INPUT_E(wvec8, EVEN8, ODD8, DIRECT_LD(wvec8, load_cols8, ra, b, n0),
			        DIRECT_LD(wvec8, load_cols8, ra, b + 8, n1),
			        DIRECT_LD(wvec8, load_cols8, ra, b + 2, n2),
			        DIRECT_LD(wvec8, load_cols8, ra, b + 10, n3), e[r]);
		}
		INPUT_V_WALK(wvec8, e[0], e[1], e[2], e[3], vs + (size_t)q * 8);
	}
}

/* input_down's V of tile rows [ty0, ty1) of sample n, channels [s0, s1),
 * read from in (fill_slice's rows: the image at column pw of rows wp =
 * 2 tpr + 2 wide, its columns from wp - pw on dropped); tpr a multiple
 * of 16, or 8 (direct_chan8), and in bf16 or not to be rounded
 * (DIRECT_TAKES: rounding each value as it is read, twice or more, was
 * slower than fill_slice's once) */
DIRECT_TARGET static void input_direct(const cpu_corr *c, const wgeo *g, cpu_src in, int n,
                                       int ty0, int ty1, float *restrict v, size_t ld,
                                       size_t st, int lt, int s0, int s1)
{
	int tpr = g->tpr, nr = ty1 - ty0;
	long cw = c->w < 2 * tpr + 2 - c->pw ? c->w : 2 * tpr + 2 - c->pw;
	long plane = (long)c->h * c->w, r0 = 2L * ty0 - c->ph, r1 = 2L * ty1 + 2 - c->ph;
	cpu_src smp = cpu_src_sample(in, n, (long)c->s * plane);
	/* the bytes of a channel's rows that these tile rows read */
	long row = c->w * (in.h ? 2L : 4L), at = (r0 < 0 ? 0 : r0) * row;
	long bytes = (r1 > c->h ? c->h : r1) * row - at;

	for (int s = s0; s < s1; s++) {
		cpu_src p = cpu_src_chan(smp, s, plane);
		float *vs = v + (size_t)(s - s0) * ld + lt;
		/* the next channel's rows into L2 while this one's are
		 * transformed: they lie a plane on, a new stream for the
		 * prefetchers to find (the forward of 32 channels at 64x64
		 * 7% faster) */
		if (s + 1 < s1) {
			cpu_src q = cpu_src_chan(smp, s + 1, plane);
			const char *b0 = (q.h ? (const char *)q.h : (const char *)q.f) + at;
			for (long o = 0; o < bytes; o += 64)
				__builtin_prefetch(b0 + o, 0, 2);
		}
		if (tpr == 8 && p.h)
			direct_chan8(1, c, cw, NULL, p.h, ty0, nr, vs, st);
		else if (tpr == 8)
			direct_chan8(0, c, cw, p.f, NULL, ty0, nr, vs, st);
		else if (p.h)
			direct_chan(1, c, tpr, cw, NULL, p.h, ty0, nr, vs, st);
		else
			direct_chan(0, c, tpr, cw, p.f, NULL, ty0, nr, vs, st);
	}
}
#define DIRECT_TAKES(g, in, rnd) \
	(direct_ok() && ((g)->tpr % 16 == 0 || (g)->tpr == 8) && ((in).h || !(rnd)))
#else
#define DIRECT_TAKES(g, in, rnd) 0
#endif

/* input_row over the nr tile rows from slice row yr on (their V columns
 * consecutive from lt). Planes of 8 tiles a row (16x16) fill only 8
 * lanes a row: with the 16-wide vectors, two rows go through INPUT_VEC's
 * arithmetic at once, lane l the tile l % 8 of row l / 8, each lane's
 * sums as input_row's (the same V): the forward and data gradient of
 * 128 channels at 16x16 5-11% faster on a Zen 4 (doc/PERFORMANCE.md).
 * Four rows of 4 tiles (8x8 planes) joined by halves were no faster.
 * Rows of 16 tiles or more go down the tile rows (input_down). */
CPU_CLONES static void input_rows(int tpr, float *restrict v, size_t ld, size_t st, int lt,
                                  const float *restrict sl, size_t chs, int yr, int nr, int s0,
                                  int s1)
{
	int g = 0, tx0 = 0;
#if WINO_VEC
	int wp = 2 * tpr + 2;

	if (WINO_WIDE && tpr == 8)
		for (; g + 2 <= nr; g += 2)
			for (int s = s0; s < s1; s++) {
				/* row r of the two tile rows: slice rows r and r + 2, 16
				 * floats each from column 0 (2) */
				const float *b0 = sl + (size_t)s * chs + (size_t)2 * (yr + g) * wp;
				INPUT_TILES(wvec, EVEN, ODD, *(const wvec *)(b0 + r * wp),
				            *(const wvec *)(b0 + (r + 2) * wp),
				            *(const wvec *)(b0 + r * wp + 2),
				            *(const wvec *)(b0 + (r + 2) * wp + 2),
				            v + (size_t)(s - s0) * ld + lt + g * tpr);
			}
	if (WINO_WIDE && tpr >= 16 && nr > 0) {
		tx0 = tpr / 16 * 16;
		input_down(tpr, tx0, v, ld, st, lt, sl, chs, yr, nr, s0, s1);
		if (tx0 == tpr)
			return;
	}
#endif
	for (; g < nr; g++)
		input_row(tpr, v, ld, st, lt + g * tpr, sl, chs, yr + g, s0, s1, tx0);
}

void cpu_wino_input(const cpu_corr *c, const wgeo *g, cpu_src in, int g0, int g1,
                    float *v, size_t ld, float *tmp, int rnd)
{
	size_t chs = slice_chs(g);

	/* the tile rows by runs within one sample */
	for (int r = g0; r < g1;) {
		int n = r / g->tph, ty0 = r % g->tph;
		int ty1 = g1 - n * g->tph < g->tph ? g1 - n * g->tph : g->tph;

#if WINO_VEC && defined(CPU_BF16_KERNELS)
		if (DIRECT_TAKES(g, in, rnd))
			input_direct(c, g, in, n, ty0, ty1, v, ld, (size_t)c->s * ld + XPAD,
			             (r - g0) * g->tpr, 0, c->s);
		else
#endif
		{
			fill_slice(c, g, in, tmp, chs, n, ty0, ty1, rnd);
			input_rows(g->tpr, v, ld, (size_t)c->s * ld + XPAD, (r - g0) * g->tpr, tmp,
			           chs, 0, ty1 - ty0, 0, c->s);
		}
		r += ty1 - ty0;
	}
}

#ifdef CPU_BF16_KERNELS
/* input_pairs' runs: tile rows grouped to about this many tiles */
#define PAIR_TILES 128

/* cpu_wino_input's V for VDPBF16PS, rounded. For the forward's gemm
 * (cpu_bf16_nn_pp's B; rows 0): pair p of V[xi] (channels 2p and 2p + 1,
 * the second 0 past S) at (uint32_t *)vp + xi stp + p ld. For the filter
 * gradient's (its A, cpu_conv_winof.c; rows 1): channel s's row of V[xi]
 * in bf16 at (uint16_t *)vp + xi stp + s ld, whose pairs are those of
 * consecutive tiles. Each pair of channels' 16 rows of a group of tile
 * rows pass through tmp2 (32 floats a tile, PAIR_TILES tiles or one tile
 * row, in L1) as floats and are rounded from there, so V is written once
 * at half the bytes and the gemm converts nothing: the same values as
 * the gemm's own conversion of fp32 V (cpu_bf16f_nn_packed, or
 * cpu_bf16_pairs_inplace). */
static void input_pairs(const cpu_corr *c, const wgeo *g, cpu_src in, int g0, int g1,
                        void *vp, size_t ld, size_t stp, float *tmp, float *tmp2, int rnd,
                        int rows)
{
	size_t chs = slice_chs(g);
	int tpr = g->tpr, gr = (PAIR_TILES + tpr - 1) / tpr;

	for (int r = g0; r < g1;) {
		int n = r / g->tph, ty0 = r % g->tph;
		int ty1 = g1 - n * g->tph < g->tph ? g1 - n * g->tph : g->tph;

		int direct = DIRECT_TAKES(g, in, rnd);
		if (!direct)
			fill_slice(c, g, in, tmp, chs, n, ty0, ty1, rnd);
		/* tile rows in groups of about PAIR_TILES tiles (rt), so that
		 * small planes' short rows make runs worth a call */
		for (int ta = ty0; ta < ty1; ta += gr) {
			int tb = ta + gr < ty1 ? ta + gr : ty1, rt = (tb - ta) * tpr;
			int lt = (r - g0 + ta - ty0) * tpr;
			for (int s = 0; s < c->s; s += 2) {
				int s1 = s + 2 < c->s ? s + 2 : c->s;
#if WINO_VEC
				if (direct)
					input_direct(c, g, in, n, ta, tb, tmp2, (size_t)rt, 2 * (size_t)rt, 0,
					             s, s1);
				else
#endif
					input_rows(tpr, tmp2, (size_t)rt, 2 * (size_t)rt, 0, tmp, chs,
					           ta - ty0, tb - ta, s, s1);
				for (int x = 0; x < 16; x++) {
					const float *t2 = tmp2 + (size_t)x * 2 * rt;
					if (rows) {
						uint16_t *h = (uint16_t *)vp + x * stp + (size_t)s * ld + lt;
						cpu_bf16_pack_run(h, t2, rt);
						if (s1 - s > 1)
							cpu_bf16_pack_run(h + ld, t2 + rt, rt);
					} else {
						cpu_bf16_pair_run(t2, s1 - s > 1 ? t2 + rt : NULL, rt,
						                  (uint32_t *)vp + x * stp +
						                  (size_t)s / 2 * ld + lt);
					}
				}
			}
		}
		r += ty1 - ty0;
	}
}

void cpu_wino_input_pairs(const cpu_corr *c, const wgeo *g, cpu_src in, int g0, int g1,
                          uint32_t *vp, size_t ld, size_t st, float *tmp, float *tmp2, int rnd)
{
	input_pairs(c, g, in, g0, g1, vp, ld, st, tmp, tmp2, rnd, 0);
}

void cpu_wino_input_h(const cpu_corr *c, const wgeo *g, cpu_src in, int g0, int g1,
                      uint16_t *vh, size_t ld, size_t st, float *tmp, float *tmp2, int rnd)
{
	input_pairs(c, g, in, g0, g1, vh, ld, st, tmp, tmp2, rnd, 1);
}
#endif
