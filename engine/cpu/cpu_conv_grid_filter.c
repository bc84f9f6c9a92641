/* cpu_conv_grid_filter.c: the implicit convolution's filter gradient
 * (cpu_iconv.h) for the bf16 sets "amx" (on tiles) and "avx512bf16"
 * (VDPBF16PS), on a padded grid of positions:
 *     dw[o, (s, i, j)] += sum over pixels p of dy[o, p] x[s, p + tap(i, j)]
 *
 * cpu_conv_kcol.c's filter gradient widens the bf16 input into one float
 * copy per kernel column, and its products round every row of that copy
 * to bf16 again for each kernel row (amx_nts), or convert both operands
 * 32 values at a time for every product (nt_seg's VDPBF16PS): each input
 * value is converted kh * kw times or more; on tiles that was a third of
 * amx_nts's time. Here the input of a chunk is laid once, in bf16 as it
 * is (the stash's bits, or rounded once), on a padded grid gw wide
 * (w + 2 pw, even):
 *     sl[s][q][col] = x[s, r0 + q - ph, col - pw]   (0 outside the image)
 * so that tap (i, j) of all 16 channels of a block is one tile of A as it
 * lies: 16 rows cs apart, starting i dil gw + j dil further on. K runs
 * over the chunk's grid positions; dy is laid on the same grid, zero in
 * the columns past ow, in the rows past the chunk and in the ext rows
 * between samples, in VNNI pairs of positions for each block of 16
 * filters (B: dyp[k/2][o] = (dy[o, k], dy[o, k + 1]), through a 16 x 16
 * transpose), once per chunk for all taps and channels. A tile of C is
 * C[s][o] for one tap and one block each of channels and filters; three
 * of them share each tile of B, three chains of TDPBF16PS in flight.
 * VDPBF16PS takes the same B a vector at a time (16 filters, a pair of
 * positions) and multiplies it by a broadcast pair of the slice, the two
 * neighbours at a tap's offset (one 32-bit load), for 9 (channel, tap)
 * sums at once (a 3x3 kernel's taps: no short runs left over, which
 * with 8 at once were a ninth of the first layer's 27); no conversion in
 * either loop. The tiles take blocks of 16 channels, so amx leaves
 * fewer than 8 to cpu_conv_kcol.c; VDPBF16PS loops over the channels
 * there are and takes the first layer's 3 bands too: its dy in bf16, half
 * the bytes for the batchnorm after it to write (the FMA timing model's
 * classifier: the first layer's backward 3.3 -> 2.1 ms, bn1's 3.3 -> 2.8).
 * Small planes take several samples per item (each a block of grid rows
 * bk apart), so a chain sums over at least a few hundred positions.
 *
 * Each C tile (each vector) is added into a float accumulator laid as
 * the tiles (acc[ob][s-block, tap][16 s][16 o]) after each item; a part's
 * accumulator goes into its partial of dw (cpu_iconv.h) at its end. So
 * each dw element is summed over one item's positions in order, then over
 * the part's items in order, then over the parts: the bits depend on the
 * number of threads only as cpu_filter_parts makes the parts.
 *
 * The same grid takes the filter gradient of a transposed convolution
 * (2x2 windows of stride 2, cpu_conv.c) as a 1x1 correlation whose 4C
 * channels are the windows' taps (space to depth, cpu_grid_filter_s2d):
 * the fill lays every other value of x's rows, and nothing else
 * changes. In the FMA timing model's U-Net its four deconvolutions'
 * backward went from 33 to 27 ms a step; the plan before, im2col and an
 * nt gemm, converted both operands to bf16 for every product.
 */
#include <string.h>
#include "cpu_iconv.h"

#ifdef CPU_BF16_KERNELS
#include "cpu_amx.h"
#include "cpu_bf16x16.h"

#define ITEM_BYTES (1024L * 1024)   /* slice and dy of an item, near L2 */
#define AT_ONCE 3                   /* C tiles in flight (cpu_amx_chains) */
#define DP_RUN 9                    /* (channel, tap) sums at once (vec_run): a 3x3 kernel's taps */

typedef struct afg {
	cpu_corr c;
	int amx;                 /* on tiles (item_tiles), else VDPBF16PS (item_vec) */
	int s2d;                 /* the input is x's 2x2 windows (cpu_grid_filter_s2d) */
	int kk, sp, op;          /* taps; channels and filters, rounded up to 16 */
	int gw;                  /* grid width */
	int rows, g;             /* output rows per block; blocks (samples) per item */
	long bk;                 /* grid positions per block: (rows + ext) gw */
	long kp;                 /* positions an item sums over, a multiple of 32 */
	long cs;                 /* uint16 per channel of the slice */
} afg;

static int ext(const cpu_corr *c) { return c->dil * (c->kh - 1); }

/* the item's shape for a batch of n; n large: the scratch's upper bound */
static afg make_afg(const cpu_corr *c, int amx, int n)
{
	afg a = { .c = *c, .amx = amx, .kk = c->kh * c->kw, .sp = (c->s + 15) / 16 * 16,
	          .op = (c->o + 15) / 16 * 16, .gw = (c->w + 2 * c->pw + 1) / 2 * 2 };
	long row = (long)(a.sp + a.op) * a.gw * 2, r = ITEM_BYTES / row - ext(c), g = 1;

	if (r >= c->oh) {
		g = ITEM_BYTES / (row * (c->oh + ext(c)));
		r = c->oh;
	} else {
		/* chunks of rows as even as they can be */
		long nch = (c->oh + (r < 1 ? 1 : r) - 1) / (r < 1 ? 1 : r);
		r = (c->oh + nch - 1) / nch;
	}
	a.rows = r < 1 ? 1 : (int)r;
	g = g < 1 ? 1 : g > n ? n : g;
	a.g = (int)((n + (n + g - 1) / g - 1) / ((n + g - 1) / g));   /* as even as can be */
	a.bk = (long)(a.rows + ext(c)) * a.gw;
	a.kp = ((a.g - 1) * a.bk + (long)a.rows * a.gw + 31) / 32 * 32;
	/* reads reach kp - 1 + ext gw + dil (kw - 1); an odd number of 64-byte
	 * lines per channel, so that a tile's 16 rows fall in 16 cache sets */
	a.cs = (a.g * a.bk + 32 + c->dil * (c->kw - 1) + 31) / 32 * 32;
	if ((a.cs / 32) % 2 == 0)
		a.cs += 32;
	return a;
}

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }

/* A thread's scratch, byte offsets: the partials of dw (cpu_iconv.h),
 * then acc, dyp (one block of 16 filters at a time), dyp2 (the next
 * block, for item_vec's pairs of blocks), dyh, the slice */
typedef struct fscr { size_t acc, dyp, dyp2, dyh, sl, end; } fscr;

static fscr scratch_of(const afg *a)
{
	const cpu_corr *c = &a->c;
	fscr f;

	f.acc = al64(CPU_FILTER_PARTS * (size_t)c->o * c->s * a->kk * sizeof(float));
	f.dyp = f.acc + al64((size_t)a->op * a->kk * a->sp * sizeof(float));
	f.dyp2 = f.dyp + al64((size_t)16 * a->kp * 2);
	f.dyh = f.dyp2 + (a->amx ? 0 : al64((size_t)16 * a->kp * 2));
	f.sl = f.dyh + al64((size_t)16 * a->kp * 2);
	f.end = f.sl + al64((size_t)a->sp * a->cs * 2);
	return f;
}

/* be's bf16 set is one of this file's */
static int has_set(const cdp_backend *be)
{
	return cpu_bf16_uses_amx(be) || cpu_bf16_packs_pairs(be);
}

int cpu_grid_filter_takes(const cdp_backend *be, const cpu_corr *c)
{
	return (c->s >= 8 || !cpu_bf16_uses_amx(be)) && c->ow >= 32 && has_set(be);
}

size_t cpu_grid_filter_scratch(const cdp_backend *be, const cpu_corr *c)
{
	afg a = make_afg(c, cpu_bf16_uses_amx(be), 1 << 20);

	return scratch_of(&a).end;
}

/* n values as bf16: the bits, or rounded */
static void put_row(uint16_t *d, cpu_src x, size_t n)
{
	if (x.h)
		memcpy(d, x.h, n * sizeof *d);
	else
		cpu_bf16_narrow_run(d, x.f, n);
}

/* n values as bf16 from every other one of x (float), x[0], x[2], ...
 * (put_row's bits) */
DP_TARGET static void put_row_s2(uint16_t *d, const float *x, int n)
{
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
	                                      4, 2, 0);

	for (int j = 0; j < n; j += 16) {
		int m = n - j < 16 ? n - j : 16;
		/* values 2 j .. 2 (j + m - 1): not the one after the last */
		uint32_t lo = (uint32_t)((1ull << (2 * m - 1)) - 1);
		__m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps((__mmask16)lo, x + 2 * j), even,
		                                  _mm512_maskz_loadu_ps((__mmask16)(lo >> 16),
		                                                        x + 2 * j + 16));
		_mm256_mask_storeu_epi16(d + j, (__mmask16)((1u << m) - 1),
		                         cpu_bf16_bits16(_mm512_castps_si512(v)));
	}
}

/* the slice of samples [n0, n0 + gn) (rows [r0, r0 + rows + ext) of the
 * padded input each), blocks past gn zero */
static void fill(const afg *a, cpu_src x, int n0, int gn, int r0, uint16_t *sl)
{
	const cpu_corr *c = &a->c;
	long plane = (long)c->h * c->w;

	memset(sl, 0, (size_t)(a->amx ? a->sp : c->s) * a->cs * sizeof *sl);
	for (int s = 0; s < c->s; s++)
		for (int b = 0; b < gn; b++) {
			uint16_t *d = sl + (size_t)s * a->cs + (size_t)b * a->bk + c->pw;
			cpu_src xn = cpu_src_sample(x, n0 + b, (long)c->s * plane);
			if (a->s2d) {
				/* channel s: window (s / 2 % 2, s % 2) of x's s / 4,
				 * every other value of its rows 2 ih + s / 2 % 2 */
				cpu_src xs = cpu_src_chan(xn, s / 4, 4 * plane);
				for (int q = 0; q < a->rows && r0 + q < c->h; q++, d += a->gw)
					put_row_s2(d, xs.f + (2L * (r0 + q) + s / 2 % 2) * 2 * c->w + s % 2,
					           c->w);
				continue;
			}
			cpu_src xs = cpu_src_chan(xn, s, plane);
			for (int q = 0; q < a->rows + ext(c); q++, d += a->gw) {
				int ih = r0 + q - c->ph;
				if (ih >= 0 && ih < c->h)
					put_row(d, cpu_src_at(xs, (long)ih * c->w), (size_t)c->w);
			}
		}
}

/* dy of filters [ob, ob + 16) of the item on the grid, as B's pairs,
 * positions [0, kp) (rows of dyh a->kp apart) */
DP_TARGET static void pack_dy(const afg *a, cpu_src dy, int n0, int gn, int r0, int ob,
                               long kp, uint16_t *dyh, uint32_t *dyp)
{
	const cpu_corr *c = &a->c;
	long pix = (long)c->oh * c->ow;
	int r1 = r0 + a->rows < c->oh ? r0 + a->rows : c->oh;

	memset(dyh, 0, (size_t)16 * a->kp * sizeof *dyh);
	for (int o = ob; o < ob + 16 && o < c->o; o++)
		for (int b = 0; b < gn; b++) {
			long e = ((long)(n0 + b) * c->o + o) * pix + (long)r0 * c->ow;
			uint16_t *d = dyh + (size_t)(o - ob) * a->kp + (size_t)b * a->bk;
			for (int r = r0; r < r1; r++, e += c->ow, d += a->gw)
				put_row(d, cpu_src_at(dy, e), (size_t)c->ow);
		}
	for (long k2 = 0; k2 < kp / 2; k2 += 16) {
		__m512i rv[16];
		for (int o = 0; o < 16; o++)
			rv[o] = _mm512_loadu_si512((const uint32_t *)(dyh + (size_t)o * a->kp) + k2);
		cpu_amx_transpose16(rv, dyp + k2 * 16);
	}
}

/* tap t's offset in a channel of the slice */
static long tap_at(const afg *a, int t)
{
	return (long)(t / a->c.kw) * a->c.dil * a->gw + (long)(t % a->c.kw) * a->c.dil;
}

/* acc's tile += C tile T */
#define ADD_TILE(T, acc, cb)                                                              \
	do {                                                                              \
		_tile_stored(T, cb, 64);                                                  \
		for (int r_ = 0; r_ < 16; r_++)                                           \
			_mm512_storeu_ps((acc) + 16 * r_,                                 \
			                 _mm512_add_ps(_mm512_loadu_ps((acc) + 16 * r_),  \
			                               _mm512_load_ps((cb) + 16 * r_)));  \
	} while (0)

/* acc[ob] += the item's tiles for filters [ob, ob + 16): v = sb kk + t */
AMX_TARGET static void item_tiles(const afg *a, const uint16_t *sl, const uint32_t *dyp,
                                  long kp, float *acc)
{
	int nv = a->sp / 16 * a->kk;
	long sa = a->cs * 2;
	float cb[256] __attribute__((aligned(64)));

	for (int v = 0; v < nv; v += AT_ONCE) {
		const void *ap[AT_ONCE] = { sl, sl, sl };
		int nu = nv - v < AT_ONCE ? nv - v : AT_ONCE;
		for (int u = 0; u < nu; u++) {
			int sb = (v + u) / a->kk, t = (v + u) % a->kk;
			ap[u] = sl + (size_t)sb * 16 * a->cs + tap_at(a, t);
		}
		cpu_amx_chains(nu, kp / 32, dyp, ap, sa);
		ADD_TILE(0, acc + (size_t)v * 256, cb);
		if (nu > 1)
			ADD_TILE(1, acc + (size_t)(v + 1) * 256, cb);
		if (nu > 2)
			ADD_TILE(2, acc + (size_t)(v + 2) * 256, cb);
	}
}

/* acc's vectors for (s, t) = v0 .. v0 + r - 1 (v = s kk + t), 16 filters
 * each, += the item's sums over its kp positions, a pair of positions per
 * VDPBF16PS: dy's pairs for the 16 filters (dyp) times the pair of the
 * slice's bf16 at the tap's offset, broadcast (two neighbours on the
 * grid: one 32-bit load) */
DP_TARGET __attribute__((always_inline)) static inline void
vec_run(const int r, const afg *a, const uint16_t *sl, const uint32_t *dyp, long kp, int v0,
        float *acc)
{
	const uint16_t *p[DP_RUN];
	__m512 sum[DP_RUN];

	#pragma GCC unroll 9
	for (int u = 0; u < r; u++) {
		int sc = (v0 + u) / a->kk, t = (v0 + u) % a->kk;
		p[u] = sl + (size_t)sc * a->cs + tap_at(a, t);
		sum[u] = _mm512_setzero_ps();
	}
	for (long k2 = 0; k2 < kp / 2; k2++) {
		__m512bh b = (__m512bh)_mm512_loadu_si512(dyp + 16 * k2);
		#pragma GCC unroll 9
		for (int u = 0; u < r; u++) {
			int32_t x;
			memcpy(&x, p[u] + 2 * k2, sizeof x);
			sum[u] = _mm512_dpbf16_ps(sum[u], (__m512bh)_mm512_set1_epi32(x), b);
		}
	}
	#pragma GCC unroll 9
	for (int u = 0; u < r; u++) {
		int sc = (v0 + u) / a->kk, t = (v0 + u) % a->kk;
		float *d = acc + ((size_t)(sc / 16) * a->kk + t) * 256 + (sc % 16) * 16;
		_mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), sum[u]));
	}
}

/* vec_run for two blocks of 16 filters at once, [ob, ob + 32): dy's
 * pairs of the second block at dyp2, its sums into acc2. Each broadcast
 * pair of the slice feeds two VDPBF16PS, so a product costs half a load
 * of the slice instead of one (8 (channel, tap) runs of 2 vectors: 16
 * sums in registers). Each sum runs over k in the same order as
 * vec_run's: the same bits. */
DP_TARGET __attribute__((always_inline)) static inline void
vec_run2(const int r, const afg *a, const uint16_t *sl, const uint32_t *dyp,
         const uint32_t *dyp2, long kp, int v0, float *acc, float *acc2)
{
	const uint16_t *p[DP_RUN];
	__m512 sum[DP_RUN], sum2[DP_RUN];

	#pragma GCC unroll 9
	for (int u = 0; u < r; u++) {
		int sc = (v0 + u) / a->kk, t = (v0 + u) % a->kk;
		p[u] = sl + (size_t)sc * a->cs + tap_at(a, t);
		sum[u] = _mm512_setzero_ps();
		sum2[u] = _mm512_setzero_ps();
	}
	for (long k2 = 0; k2 < kp / 2; k2++) {
		__m512bh b = (__m512bh)_mm512_loadu_si512(dyp + 16 * k2);
		__m512bh b2 = (__m512bh)_mm512_loadu_si512(dyp2 + 16 * k2);
		#pragma GCC unroll 9
		for (int u = 0; u < r; u++) {
			int32_t x;
			memcpy(&x, p[u] + 2 * k2, sizeof x);
			__m512bh xv = (__m512bh)_mm512_set1_epi32(x);
			sum[u] = _mm512_dpbf16_ps(sum[u], xv, b);
			sum2[u] = _mm512_dpbf16_ps(sum2[u], xv, b2);
		}
	}
	#pragma GCC unroll 9
	for (int u = 0; u < r; u++) {
		int sc = (v0 + u) / a->kk, t = (v0 + u) % a->kk;
		size_t at = ((size_t)(sc / 16) * a->kk + t) * 256 + (sc % 16) * 16;
		_mm512_storeu_ps(acc + at, _mm512_add_ps(_mm512_loadu_ps(acc + at), sum[u]));
		_mm512_storeu_ps(acc2 + at, _mm512_add_ps(_mm512_loadu_ps(acc2 + at), sum2[u]));
	}
}

/* acc[ob] += the item's sums for filters [ob, ob + 16) by VDPBF16PS, in
 * acc's layout of tiles (item_tiles); with dyp2, also acc2 for filters
 * [ob + 16, ob + 32) (vec_run2) */
DP_TARGET static void item_vec(const afg *a, const uint16_t *sl, const uint32_t *dyp,
                               const uint32_t *dyp2, long kp, float *acc, float *acc2)
{
	int nv = a->c.s * a->kk, v = 0;

	if (dyp2) {
		for (; v + DP_RUN <= nv; v += DP_RUN)
			vec_run2(DP_RUN, a, sl, dyp, dyp2, kp, v, acc, acc2);
		for (; v < nv; v++)
			vec_run2(1, a, sl, dyp, dyp2, kp, v, acc, acc2);
		return;
	}
	for (; v + DP_RUN <= nv; v += DP_RUN)
		vec_run(DP_RUN, a, sl, dyp, kp, v, acc);
	for (; v < nv; v++)
		vec_run(1, a, sl, dyp, kp, v, acc);
}

typedef struct fjob {
	cdp_backend *be;
	afg a;
	int n, nch, items, parts;
	cpu_src x, dy;
} fjob;

/* part p's items (a fixed run of them) into its partial of dw */
static void filter_part(void *ctx, int p)
{
	const fjob *j = ctx;
	const afg *a = &j->a;
	const cpu_corr *c = &a->c;
	int kk = a->kk, lo = (int)((long)j->items * p / j->parts);
	int hi = (int)((long)j->items * (p + 1) / j->parts);
	size_t fk = (size_t)c->o * c->s * kk;
	float *dwt = cpu_filter_partial(j->be, fk, p);
	char *base = (char *)cpu_scratch(j->be, cpu_worker());
	fscr f = scratch_of(a);
	float *acc = (float *)(base + f.acc);
	uint32_t *dyp = (uint32_t *)(base + f.dyp), *dyp2 = (uint32_t *)(base + f.dyp2);
	uint16_t *dyh = (uint16_t *)(base + f.dyh), *sl = (uint16_t *)(base + f.sl);

	memset(acc, 0, f.dyp - f.acc);
	if (a->amx)
		cpu_bf16_amx_tiles();
	for (int it = lo; it < hi; it++) {
		int n0 = a->g > 1 ? it * a->g : it / j->nch, r0 = a->g > 1 ? 0 : it % j->nch * a->rows;
		int gn = a->g > 1 ? (j->n - n0 < a->g ? j->n - n0 : a->g) : 1;
		int r1 = r0 + a->rows < c->oh ? r0 + a->rows : c->oh;
		/* the item's own positions: a last chunk or group may be short */
		long kp = ((gn - 1) * a->bk + (long)(r1 - r0) * a->gw + 31) / 32 * 32;
		fill(a, j->x, n0, gn, r0, sl);
		for (int ob = 0; ob < a->op; ob += 16) {
			float *ab = acc + (size_t)ob / 16 * (a->sp / 16) * kk * 256;
			pack_dy(a, j->dy, n0, gn, r0, ob, kp, dyh, dyp);
			if (a->amx) {
				item_tiles(a, sl, dyp, kp, ab);
			} else if (ob + 16 < a->op) {     /* two blocks */
				pack_dy(a, j->dy, n0, gn, r0, ob + 16, kp, dyh, dyp2);
				item_vec(a, sl, dyp, dyp2, kp, ab, ab + (size_t)(a->sp / 16) * kk * 256);
				ob += 16;
			} else {
				item_vec(a, sl, dyp, NULL, kp, ab, NULL);
			}
		}
	}
	/* acc[ob][sb kk + t][s][o] -> dwt[o][s kk + t] */
	for (int o = 0; o < c->o; o++)
		for (int s = 0; s < c->s; s++)
			for (int t = 0; t < kk; t++)
				dwt[((size_t)o * c->s + s) * kk + t] =
					acc[(((size_t)(o / 16) * (a->sp / 16) + s / 16) * kk + t) * 256 +
					    (s % 16) * 16 + o % 16];
}

static int run(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy, float *dw,
               int s2d)
{
	int amx = cpu_bf16_uses_amx(be);
	fjob j = { .be = be, .a = make_afg(c, amx, n), .n = n, .x = x, .dy = dy };
	size_t fk = (size_t)c->o * c->s * c->kh * c->kw;

	j.a.s2d = s2d;
	if (scratch_of(&j.a).end > cpu_scratch_bytes(be) || (amx && cpu_bf16_amx_tiles() < 0))
		return -1;
	j.nch = (c->oh + j.a.rows - 1) / j.a.rows;
	j.items = j.a.g > 1 ? (n + j.a.g - 1) / j.a.g : n * j.nch;
	j.parts = cpu_filter_parts(be->threads, j.items, (long)n * c->oh * c->ow);
	cpu_parallel_for(be, j.parts, filter_part, &j);
	cpu_filter_reduce(be, j.parts, fk, dw);
	return 0;
}

int cpu_grid_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                   float *dw)
{
	return run(be, c, n, x, dy, dw, 0);
}

int cpu_grid_filter_s2d_takes(const cdp_backend *be)
{
	return has_set(be);
}

int cpu_grid_filter_s2d(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                        float *dw)
{
	if (c->kh != 1 || c->kw != 1 || c->ph || c->pw || c->s % 4 || c->oh != c->h ||
	    c->ow != c->w || !x.f)
		return -1;
	return run(be, c, n, x, dy, dw, 1);
}

#else

int cpu_grid_filter_takes(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

size_t cpu_grid_filter_scratch(const cdp_backend *be, const cpu_corr *c)
{
	(void)be;
	(void)c;
	return 0;
}

int cpu_grid_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                   float *dw)
{
	(void)be; (void)c; (void)n; (void)x; (void)dy; (void)dw;
	return -1;
}

int cpu_grid_filter_s2d_takes(const cdp_backend *be)
{
	(void)be;
	return 0;
}

int cpu_grid_filter_s2d(cdp_backend *be, const cpu_corr *c, int n, cpu_src x, cpu_src dy,
                        float *dw)
{
	(void)be; (void)c; (void)n; (void)x; (void)dy; (void)dw;
	return -1;
}

#endif
