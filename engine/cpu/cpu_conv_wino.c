/* cpu_conv_wino.c: 3x3, dilation-1 correlations (cpu_iconv.h) by
 * Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016).
 *
 * Each 2x2 block of output pixels (a tile) is computed from the 4x4 input
 * patch d under it and the 3x3 filter g as
 *     Y (2x2) = A^T [ (G g G^T) .* (B^T d B) ] A
 * with
 *     B^T = | 1  0 -1  0 |   G = | 1    0    0  |   A^T = | 1 1  1  0 |
 *           | 0  1  1  0 |       | 1/2  1/2  1/2|         | 0 1 -1 -1 |
 *           | 0 -1  1  0 |       | 1/2 -1/2  1/2|
 *           | 0  1  0 -1 |       | 0    0    1  |
 * The products .* summed over input channels are 16 gemms, one per
 * element xi of the 4x4 transformed tile:
 *     M[xi] (O, T) = U[xi] (O, S) V[xi] (S, T)
 * U = G g G^T of every (o, s) filter, V = B^T d B of every (s, tile), T
 * tiles. That is 16 multiplications per tile and channel pair where the
 * direct correlation makes 36: 2.25 times less arithmetic, for the
 * transforms' additions (O(S + O) per tile, against O(S O) in the gemms).
 * The transforms have coefficients 0, +-1 and +-1/2 only: the results
 * differ from the direct sum by a few ulps of the terms (the tests'
 * tolerance for fp32 against double).
 *
 * Work: items of whole tile rows (a tile row: OW/2 tiles of one sample;
 * an item may span samples, so 8x8 planes still make wide gemms), taken
 * by whichever thread is free. An item transforms its input patches into
 * V (16, S, TB) in the thread's scratch, runs the 16 gemms into M (16, O,
 * TB) beside it, and transforms M into its output rows. TB is the item's
 * tile count rounded up to the gemm's vector width (the padding columns
 * are zero). U is computed once per call, into the caller's workspace.
 * Every output pixel is summed in an order fixed by S alone (the gemm's),
 * so the results do not depend on the items or the threads.
 *
 * Used in fp32, and in bf16 with two sets of kernels:
 *  - avx512bf16-fma (cpu_gemm_bf16r.c: fp32 arithmetic on operands
 *    rounded to bf16): the input patches are rounded as the slice is
 *    filled and the filters before their transform, so the products are
 *    those of bf16 operands and only the order of the fp32 sums differs,
 *    as in the direct path (the transforms' few ulps).
 *  - avx512bf16 (VDPBF16PS, the default on AMD): its operands must be bf16
 *    pairs, so the transformed values are rounded instead: U[xi] once per
 *    call, straight into the pairs of cpu_bf16f_nn_packed (in the space
 *    of fp32 U, which for 32 channels and more holds them), V[xi] into
 *    pairs as the input transform writes it (cpu_wino_input.c), which the
 *    gemm reads as they lie (cpu_bf16_nn_pp). A transformed value sums
 *    up to 16 of its operands, so the error against fp32 is about twice a direct bf16 convolution's
 *    (root mean square, measured in tests/engine/test_bf16_sets.c, which
 *    bounds it), for 2.25 times fewer products at VDPBF16PS's rate.
 * Not with the AMX set.
 * For at least WINO_MIN_CH channels in and out, below which the
 * transforms cost more than they save; CDP_CPU_WINOGRAD=0 in the
 * environment turns it off.
 * The input transform (V, in each of its forms) is cpu_wino_input.c's;
 * the filter gradient of the same layers, over the same tiles, is
 * cpu_conv_winof.c's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_iconv.h"
#include "cpu_wino_vec.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

/* V and M of one item, 768 KiB: inside a Zen 4's L2 (1 MiB) and half a
 * Sapphire Rapids'; 1.5 MiB before, which on the latter ran the forward
 * and data of 32 and 64 channels 12-15% slower (fp32, 2 threads, best
 * of 5 alternated; 128 channels and more the same either way) */
#define WINO_FLOATS (192 * 1024)
#define WINO_MIN_TILES 128         /* the least TB worth a gemm */
/* 64 while the filter gradient was direct; with it by Winograd too, 32
 * channels in and out gain in all three ops together (8x32x128^2: data
 * and filter 10-25% faster, forward the same; 64 in, 32 out: 17-25% in
 * each), 16 out lose (32 in, 16 out at 256^2: 20% slower). On VDPBF16PS
 * 16 out won that layer's forward by 15-20% on a Xeon that issues it at
 * half an FMA's rate, and by perf's split would lose by about 30% on a
 * Zen 4, which issues it at three times that (doc/PERFORMANCE.md,
 * session 37): not taken until timed there. */
#define WINO_MIN_CH 32
#define TB_ALIGN 16               /* gemm columns per vector (AVX-512) */
#define XPAD CPU_WINO_XPAD

static int wino_off;
static pthread_once_t wino_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
	const char *e = getenv("CDP_CPU_WINOGRAD");

	wino_off = e && strcmp(e, "0") == 0;
}

int cpu_wino_shape(const cpu_corr *c)
{
	return c->kh == 3 && c->kw == 3 && c->dil == 1 && c->ph <= 2 && c->pw <= 2 &&
	       c->s >= WINO_MIN_CH && c->o >= WINO_MIN_CH;
}

int cpu_wino_takes(const cdp_backend *be, const cpu_corr *c)
{
	pthread_once(&wino_once, read_env);
	return !wino_off &&
	       (be->precision == CDP_PREC_FP32 || cpu_bf16_rounds_copies(be) ||
	        cpu_bf16_packs_pairs(be)) &&
	       cpu_wino_shape(c);
}

typedef cpu_wgeo wgeo;

wgeo cpu_wino_geo(const cpu_corr *c, long tiles)
{
	wgeo g;

	g.tph = (c->oh + 1) / 2;
	g.tpr = (c->ow + 1) / 2;
	g.rows = (int)((tiles + g.tpr - 1) / g.tpr);
	if (g.rows < 1)
		g.rows = 1;
	g.tb = (g.rows * g.tpr + TB_ALIGN - 1) / TB_ALIGN * TB_ALIGN;
	return g;
}

/* the forward's and data's items: V and M near WINO_FLOATS */
static wgeo item_geo(const cpu_corr *c)
{
	long want = WINO_FLOATS / (16L * (c->s + c->o));

	return cpu_wino_geo(c, want < WINO_MIN_TILES ? WINO_MIN_TILES : want);
}

size_t cpu_wino_scratch(const cpu_corr *c)
{
	wgeo g = item_geo(c);

	return (16 * ((size_t)(c->s + c->o) * g.tb + 2 * XPAD) + cpu_wino_tmp_floats(c, &g) + 64) *
	       sizeof(float);
}

/* floats from U[xi] to U[xi + 1] */
static size_t ustride(const cpu_corr *c)
{
	return (size_t)c->o * c->s + XPAD;
}

size_t cpu_wino_ufloats(const cpu_corr *c)
{
	return 16 * ustride(c);
}

/* ---- U = G g G^T, U[xi][o][s] ---- */

typedef struct ujob {
	cdp_backend *be;
	const cpu_corr *c;
	const float *a;
	long rs;
	float *u;
	int rnd;                 /* round the filters to bf16 first */
	int pairs;               /* store U[xi] packed (cpu_bf16_pack_row) */
} ujob;

CPU_CLONES static void filter_item(void *ctx, int o)
{
	const ujob *j = ctx;
	size_t os = ustride(j->c);
	const float *restrict go = j->a + (size_t)o * j->rs;
	float *restrict uo = j->u + (size_t)o * j->c->s;
	float *pu = NULL;

	if (j->pairs) {          /* U[xi][o] in fp32 first, at pu + xi * S */
		pu = cpu_scratch(j->be, cpu_worker());
		uo = pu;
		os = (size_t)j->c->s;
	}
	if (j->rnd) {            /* the thread's scratch is free until the items */
		float *t = cpu_scratch(j->be, cpu_worker());
		cpu_bf16_round_run(t, go, (size_t)j->c->s * 9);
		go = t;
	}

	/* unrolled so that the loop over s vectorizes */
	for (int s = 0; s < j->c->s; s++) {
		const float *g = go + (size_t)s * 9;
		float t[4][3], u[4][4];

		#pragma GCC unroll 3
		for (int q = 0; q < 3; q++) {           /* t = G g: columns q */
			t[0][q] = g[q];
			t[1][q] = 0.5f * (g[q] + g[3 + q] + g[6 + q]);
			t[2][q] = 0.5f * (g[q] - g[3 + q] + g[6 + q]);
			t[3][q] = g[6 + q];
		}
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {           /* u = t G^T */
			u[i][0] = t[i][0];
			u[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
			u[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
			u[i][3] = t[i][2];
		}
		#pragma GCC unroll 16
		for (int x = 0; x < 16; x++)
			uo[x * os + s] = u[x / 4][x % 4];
	}
#ifdef CPU_BF16_KERNELS
	/* each U[xi] rounded once, after its transform: its row o in pairs */
	if (j->pairs) {
		long k2 = cpu_bf16_pack_stride(j->c->s);
		for (int x = 0; x < 16; x++)
			cpu_bf16_pack_row(j->c->s, pu + (size_t)x * j->c->s,
			                  (uint32_t *)(j->u + x * ustride(j->c)) + (size_t)o * k2);
	}
#endif
}

/* ---- the forward's U kept between calls ----
 * A prediction runs the same filters through every forward, and each
 * call transformed and packed them again (filter_item and pack_row, 2.8%
 * of a cdp-predict window in the FMA model of a Zen 4, doc/PERFORMANCE.md
 * session 39). So the forward keeps its U per filter pointer, with a copy
 * of the filters it came from: a call whose filters equal the copy (an
 * exact memcmp, so a training step's changed weights, or another net's
 * at the same address, are never taken for them) uses it as it is; any
 * other transforms them into its entry and copies them. Filters found
 * changed UCACHE_MISSES times in a row (a training step's) keep nothing
 * more: their entry gives its memory back and they go through the
 * caller's workspace as before. Not the data gradient's: its filters
 * are a flipped copy in the workspace, the same address for every
 * layer. UCACHE_BYTES in all; beyond it every entry is dropped and the
 * cache starts again. */
#define UCACHE_BYTES (64UL << 20)
#define UCACHE_MISSES 2

typedef struct uentry {
	struct uentry *next;
	const float *a;          /* the key: filters, row stride, shape, kind */
	long rs;
	int o, s, rnd, pairs;
	float *copy;             /* o rows of 9 s; NULL once volatile */
	float *u;                /* cpu_wino_ufloats; NULL once volatile */
	size_t bytes;
	int misses;              /* calls in a row whose filters had changed */
} uentry;

typedef struct ucache {
	uentry *head;
	size_t bytes;
} ucache;

static void ucache_drop(ucache *uc)
{
	while (uc->head) {
		uentry *e = uc->head;
		uc->head = e->next;
		free(e->copy);
		free(e->u);
		free(e);
	}
	uc->bytes = 0;
}

void cpu_wino_cache_free(cdp_backend *be)
{
	ucache *uc = *cpu_wino_cache(be);

	if (uc)
		ucache_drop(uc);
	free(uc);
	*cpu_wino_cache(be) = NULL;
}

static int same_filters(const uentry *e, const float *a)
{
	size_t row = (size_t)e->s * 9 * sizeof(float);

	if (e->rs == (long)e->s * 9)
		return memcmp(e->copy, a, (size_t)e->o * row) == 0;
	for (int o = 0; o < e->o; o++)
		if (memcmp(e->copy + (size_t)o * e->s * 9, a + o * e->rs, row) != 0)
			return 0;
	return 1;
}

/* The entry for these filters: *fresh 1 when its U is theirs, else 0
 * (the caller transforms them into e->u, then ucache_keep, at once: a
 * new entry's copy is garbage until then). NULL: none (out of memory,
 * or larger than the cache): the caller's own u. */
static uentry *ucache_get(cdp_backend *be, const cpu_corr *c, const float *a, long rs, int rnd,
                          int pairs, int *fresh)
{
	void **slot = cpu_wino_cache(be);
	ucache *uc = *slot;
	uentry *e;
	size_t nc = (size_t)c->o * c->s * 9, nu = cpu_wino_ufloats(c);
	size_t bytes = (nc + nu) * sizeof(float);
	float *copy, *u;

	*fresh = 0;
	if (bytes > UCACHE_BYTES)
		return NULL;
	if (!uc && !(uc = *slot = calloc(1, sizeof *uc)))
		return NULL;
	for (e = uc->head; e; e = e->next)
		if (e->a == a && e->rs == rs && e->o == c->o && e->s == c->s && e->rnd == rnd &&
		    e->pairs == pairs) {
			if (!e->u)
				return NULL;     /* volatile filters */
			*fresh = same_filters(e, a);
			e->misses = *fresh ? 0 : e->misses + 1;
			if (e->misses >= UCACHE_MISSES) {
				free(e->copy);
				free(e->u);
				e->copy = e->u = NULL;
				uc->bytes -= e->bytes;
				e->bytes = 0;
				return NULL;
			}
			return e;
		}
	if (uc->bytes + bytes > UCACHE_BYTES)
		ucache_drop(uc);
	copy = malloc(nc * sizeof *copy);
	u = aligned_alloc(64, (nu * sizeof *u + 63) / 64 * 64);
	if (!copy || !u || !(e = malloc(sizeof *e))) {
		free(copy);
		free(u);
		return NULL;
	}
	*e = (uentry){ uc->head, a, rs, c->o, c->s, rnd, pairs, copy, u, bytes, 0 };
	uc->head = e;
	uc->bytes += bytes;
	return e;
}

/* e->u now holds the transform of a: the copy follows */
static void ucache_keep(uentry *e, const float *a)
{
	for (int o = 0; o < e->o; o++)
		memcpy(e->copy + (size_t)o * e->s * 9, a + o * e->rs,
		       (size_t)e->s * 9 * sizeof *e->copy);
}

/* ---- one item ---- */

typedef struct wjob {
	cdp_backend *be;
	const cpu_corr *c;
	wgeo g;
	int n;
	cpu_src in;
	const float *u, *bias;
	const cdp_bn_infer *bn;   /* the batchnorm after the forward, or NULL */
	/* bn's m, a and b of filter o at bnc[o], bnc[O + o], bnc[2 O + o]
	 * (cpu_bn_post_coef once per call), or NULL: output_row asks */
	const float *bnc;
	float beta;
	float *out;
	uint16_t *outh;          /* or the output's bf16 bits there (out NULL) */
	int rnd;                 /* round the input to bf16 as it is copied */
	int rnd_out;             /* round the output to bf16 (backend.h) */
	int pairs;               /* U packed, V in pairs: VDPBF16PS (cpu_bf16_nn_pp) */
} wjob;

/* j->bn's m, a and b of filter o (cpu_bn_post_coef), from j->bnc where
 * the call computed them */
static void bn_coef(const wjob *j, int o, float *m, float *a, float *b)
{
	if (j->bnc) {
		*m = j->bnc[o];
		*a = j->bnc[j->c->o + o];
		*b = j->bnc[2 * j->c->o + o];
	} else {
		cpu_bn_post_coef(j->bn, o, m, a, b);
	}
}

#if WINO_VEC
/* cpu_bn_post_run's arithmetic on a vector y of VT (VI its int lanes):
 * (y - m) * a rounded, + b, then the activation (a NaN passes); the
 * barrier keeps GCC from fusing the product and the sum into an FMA,
 * which cpu_bn.c is built without */
#define BN_VEC(VT, VI, y, m, a, b, act, slope) do { \
	VT t_ = __builtin_assoc_barrier(((y) - (m)) * (a)); \
	VT u_ = t_ + (b); \
	VI neg_ = (VI)(u_ < 0.0f); \
	if ((act) == CDP_ACT_RELU) \
		u_ = (VT)((VI)u_ & ~neg_); \
	else if ((act) == CDP_ACT_LEAKY) \
		u_ = (VT)(((VI)u_ & ~neg_) | ((VI)(u_ * (slope)) & neg_)); \
	(y) = u_; \
} while (0)

/* y[0..3] (VT) = A^T M A + bo of one vector of tiles, M's values at
 * mp + xi ot: rows a (A^T row 0) and b (row 1) of A^T M, then columns
 * 2tx, 2tx + 1 of each (y[0], y[1] of row 2ty; y[2], y[3] of 2ty + 1) */
#define OUTPUT_Y(VT, mp, y) do { \
	VT a_[4], b_[4]; \
	_Pragma("GCC unroll 4") \
	for (int q = 0; q < 4; q++) { \
		VT m0 = *(const VT *)((mp) + q * ot), m1 = *(const VT *)((mp) + (4 + q) * ot); \
		VT m2 = *(const VT *)((mp) + (8 + q) * ot); \
		VT m3 = *(const VT *)((mp) + (12 + q) * ot); \
		a_[q] = m0 + m1 + m2; \
		b_[q] = m1 - m2 - m3; \
	} \
	(y)[0] = a_[0] + a_[1] + a_[2] + bo; \
	(y)[1] = a_[1] - a_[2] - a_[3] + bo; \
	(y)[2] = b_[0] + b_[1] + b_[2] + bo; \
	(y)[3] = b_[1] - b_[2] - b_[3] + bo; \
} while (0)

/* v (VT; VI, VU its int and unsigned lanes, VH as uint16_t) stored at
 * element e of the row y (float) or h (bf16, hm): beta times what y held
 * added, rounded to bf16 (rnd), then bn */
#define OUTPUT_PUT(VT, VI, VU, VH, v, y, h, e) do { \
	if (beta != 0.0f) \
		(v) += beta * *(const VT *)((y) + (e)); \
	if (rnd) \
		WINO_BF16_AS(VT, VU, v); \
	if (bn) \
		BN_VEC(VT, VI, v, bm, ba, bb, bn->act, bn->slope); \
	if (hm) \
		WINO_BF16_PUT(VU, VH, v, (h) + (e)); \
	else \
		*(VT *)((y) + (e)) = (v); \
} while (0)

/* output_row's tiles tx .. full - 1, VW at a time */
#define OUTPUT_VEC(VT, VI, VU, VH, VW, ZL, ZH) \
	for (; tx + (VW) <= full; tx += (VW)) { \
		VT y[4], lo, hi; \
		OUTPUT_Y(VT, m + tx, y); \
		_Pragma("GCC unroll 2") \
		for (int p = 0; p < 2; p++) { \
			float *yp = p ? y1 : y0; \
			uint16_t *hp = p ? h1 : h0; \
			lo = __builtin_shuffle(y[2 * p], y[2 * p + 1], ZL); \
			hi = __builtin_shuffle(y[2 * p], y[2 * p + 1], ZH); \
			OUTPUT_PUT(VT, VI, VU, VH, lo, yp, hp, 2 * tx); \
			OUTPUT_PUT(VT, VI, VU, VH, hi, yp, hp, 2 * tx + (VW)); \
		} \
	}
#endif

/* the scalar tail's value v at y[e] (h[e] with hm): beta times y[e]
 * added, rounded (rnd), stored; bn follows on what y holds */
static inline __attribute__((always_inline)) void
output_one(float v, float *y, uint16_t *h, size_t e, float beta, int rnd, const int hm)
{
	if (beta != 0.0f)
		v += beta * y[e];
	if (rnd)
		v = cpu_bf16_round(v);
	if (hm)
		h[e] = cpu_bf16_bits(v);
	else
		y[e] = v;
}

/* out rows 2ty, 2ty+1 of each tile row g in [ga, gb) of the item from
 * row g0 (sample g / tph, ty = g % tph), from M[xi][o][(g - g0) tpr + tx],
 * rounded to bf16 (rnd_out) and the inference batchnorm j->bn applied to
 * them (cpu_bn_post_run's bits) as they are stored, or (hm) stored as
 * bf16 into outh; spare: tpr*2 floats for a row 2ty+1 past the image. A
 * filter at a time down the tile rows: a row of 32 tiles is two vectors,
 * too few to pay for a filter's setup row by row. */
static inline __attribute__((always_inline)) void
output_rows_m(const wjob *j, const float *restrict mm, int g0, int ga, int gb,
              float *restrict spare, const int hm)
{
	const cpu_corr *c = j->c;
	int tpr = j->g.tpr, full = c->ow / 2, rnd = j->rnd_out;
	size_t ot = (size_t)c->o * j->g.tb + XPAD;
	float beta = hm ? 0.0f : j->beta;      /* the forward's: 0 */
#if WINO_VEC
	int wide = WINO_WIDE;
#endif

	const cdp_bn_infer *bn = hm ? NULL : j->bn;

	for (int o = 0; o < c->o; o++) {
		float bo = j->bias ? j->bias[o] : 0.0f, bm = 0.0f, ba = 0.0f, bb = 0.0f;
		if (bn)
			bn_coef(j, o, &bm, &ba, &bb);
		for (int g = ga; g < gb; g++) {
			int n = g / j->g.tph, ty = g % j->g.tph, in1 = 2 * ty + 1 < c->oh;
			size_t e0 = (((size_t)n * c->o + o) * c->oh + (size_t)(2 * ty)) * c->ow;
			float *restrict y0 = hm ? NULL : j->out + e0;
			float *restrict y1 = hm ? NULL : in1 ? y0 + c->ow : spare;
			uint16_t *h0 = hm ? j->outh + e0 : NULL;
			uint16_t *h1 = hm ? in1 ? h0 + c->ow : (uint16_t *)spare : NULL;
			const float *m = mm + (size_t)o * j->g.tb + (size_t)(g - g0) * tpr;

			/* Y = A^T M A: rows a (A^T row 0) and b (row 1) of A^T M, then
			 * columns 2tx, 2tx + 1 */
			int tx = 0;
#if WINO_VEC
			if (wide)
				OUTPUT_VEC(wvec, wveci, wvecu, wvech, 16, ZIP_LO, ZIP_HI)
			OUTPUT_VEC(wvec8, wveci8, wvecu8, wvech8, 8, ZIP_LO8, ZIP_HI8)
			OUTPUT_VEC(wvec4, wveci4, wvecu4, wvech4, 4, ZIP_LO4, ZIP_HI4)
#endif
			for (; tx < tpr; tx++) {
				float a[4], b[4], y[4];
				int two = tx < full;        /* else odd OW: the last column */
				#pragma GCC unroll 4
				for (int q = 0; q < 4; q++) {
					a[q] = m[q * ot + tx] + m[(4 + q) * ot + tx] + m[(8 + q) * ot + tx];
					b[q] = m[(4 + q) * ot + tx] - m[(8 + q) * ot + tx] - m[(12 + q) * ot + tx];
				}
				y[0] = a[0] + a[1] + a[2] + bo;
				y[1] = a[1] - a[2] - a[3] + bo;
				y[2] = b[0] + b[1] + b[2] + bo;
				y[3] = b[1] - b[2] - b[3] + bo;
				output_one(y[0], y0, h0, 2 * (size_t)tx, beta, rnd, hm);
				output_one(y[2], y1, h1, 2 * (size_t)tx, beta, rnd, hm);
				if (two) {
					output_one(y[1], y0, h0, 2 * (size_t)tx + 1, beta, rnd, hm);
					output_one(y[3], y1, h1, 2 * (size_t)tx + 1, beta, rnd, hm);
				}
				if (bn) {                   /* the tile's columns in the image */
					cpu_bn_post_run(bn, o, y0 + 2 * tx, two ? 2 : 1);
					cpu_bn_post_run(bn, o, y1 + 2 * tx, two ? 2 : 1);
				}
			}
		}
	}
}

CPU_CLONES static void output_row(const wjob *j, const float *restrict mm, int g0, int ga,
                                  int gb, float *restrict spare)
{
	if (j->outh)
		output_rows_m(j, mm, g0, ga, gb, spare, 1);
	else
		output_rows_m(j, mm, g0, ga, gb, spare, 0);
}

/* output_row for tile rows ty and ty + 1 of a plane 16 wide (8 tiles a
 * row, M's columns lt .. lt + 15), both rows of each inside the image:
 * OUTPUT_VEC's arithmetic on 16 lanes, lane l the tile l % 8 of row
 * l / 8 (the same bits), and the four output rows, contiguous, stored as
 * four vectors. */
#if WINO_VEC
static inline __attribute__((always_inline)) void
output_rows2_m(const wjob *j, const float *restrict mm, int lt, int n, int ty, const int hm)
{
	const cpu_corr *c = j->c;
	const cdp_bn_infer *bn = hm ? NULL : j->bn;
	float beta = hm ? 0.0f : j->beta;
	int rnd = j->rnd_out;

	for (int o = 0; o < c->o; o++) {
		float bo = j->bias ? j->bias[o] : 0.0f, bm = 0.0f, ba = 0.0f, bb = 0.0f;
		size_t e0 = ((size_t)n * c->o + o) * c->oh * 16 + (size_t)(2 * ty) * 16;
		float *y0 = hm ? NULL : j->out + e0;
		uint16_t *h0 = hm ? j->outh + e0 : NULL;
		const float *m = mm + (size_t)o * j->g.tb + lt;
		size_t ot = (size_t)c->o * j->g.tb + XPAD;
		wvec y[4], r[4];
		if (bn)
			bn_coef(j, o, &bm, &ba, &bb);
		OUTPUT_Y(wvec, m, y);
		/* rows 2ty, 2ty + 1 of tile row ty, then of ty + 1 */
		r[0] = __builtin_shuffle(y[0], y[1], ZIP_LO);
		r[1] = __builtin_shuffle(y[2], y[3], ZIP_LO);
		r[2] = __builtin_shuffle(y[0], y[1], ZIP_HI);
		r[3] = __builtin_shuffle(y[2], y[3], ZIP_HI);
		_Pragma("GCC unroll 4")
		for (int k = 0; k < 4; k++)
			OUTPUT_PUT(wvec, wveci, wvecu, wvech, r[k], y0, h0, 16 * k);
	}
}

CPU_CLONES static void output_rows2(const wjob *j, const float *restrict mm, int lt, int n,
                                    int ty)
{
	if (j->outh)
		output_rows2_m(j, mm, lt, n, ty, 1);
	else
		output_rows2_m(j, mm, lt, n, ty, 0);
}
#endif

static void wino_item(void *ctx, int it)
{
	const wjob *j = ctx;
	const cpu_corr *c = j->c;
	int g0 = it * j->g.rows, g1 = g0 + j->g.rows, tpr = j->g.tpr, tb = j->g.tb;
	float *v = cpu_scratch(j->be, cpu_worker());
	size_t vst = (size_t)c->s * tb + XPAD, mst = (size_t)c->o * tb + XPAD;
	float *mm = v + 16 * vst;
	float *sl = mm + 16 * mst, *spare = sl + cpu_wino_slice_floats(c, &j->g);
	int used;

	if (g1 > j->n * j->g.tph)
		g1 = j->n * j->g.tph;
	used = (g1 - g0) * tpr;
#ifdef CPU_BF16_KERNELS
	if (j->pairs) {
		/* V in pairs, (S + 1) / 2 rows of tb per V[xi], in V's space (at
		 * most 8 (S + 1) tb of 16 S tb floats), tmp2 behind it */
		uint32_t *vp = (uint32_t *)v;
		size_t stp = (size_t)(c->s + 1) / 2 * tb + XPAD;
		if (used < tb)
			for (int x = 0; x < 16; x++)
				for (int p = 0; p < (c->s + 1) / 2; p++)
					memset(vp + x * stp + (size_t)p * tb + used, 0,
					       (size_t)(tb - used) * sizeof *vp);
		cpu_wino_input_pairs(c, &j->g, j->in, g0, g1, vp, tb, stp, sl, v + 16 * stp, j->rnd);
		for (int x = 0; x < 16; x++)
			cpu_bf16_nn_pp(c->o, tb, c->s, (const uint32_t *)(j->u + x * ustride(c)),
			               cpu_bf16_pack_stride(c->s), vp + x * stp, tb, 0.0f, mm + x * mst,
			               tb);
	} else
#endif
	{
		/* the padding columns: zero, so no junk (or denormals) enters the gemm */
		if (used < tb)
			for (int x = 0; x < 16; x++)
				for (int s = 0; s < c->s; s++)
					memset(v + x * vst + (size_t)s * tb + used, 0,
					       (size_t)(tb - used) * sizeof *v);
		cpu_wino_input(c, &j->g, j->in, g0, g1, v, tb, sl, j->rnd);
		for (int x = 0; x < 16; x++)
			cpu_kgemm_fp32_nn(c->o, tb, c->s, j->u + x * ustride(c), c->s, 1,
			                  v + x * vst, tb, 0.0f, mm + x * mst, tb);
	}
	/* runs of tile rows through output_row, pairs of them on planes 16
	 * wide through output_rows2 */
	int ga = g0;
#if WINO_VEC
	for (int g = g0; g < g1; g++)
		if (WINO_TWO_ROWS(c, &j->g, g, g1)) {
			if (ga < g)
				output_row(j, mm, g0, ga, g, spare);
			output_rows2(j, mm, (g - g0) * tpr, g / j->g.tph, g % j->g.tph);
			ga = ++g + 1;
		}
#endif
	if (ga < g1)
		output_row(j, mm, g0, ga, g1, spare);
}

void cpu_wino_corr(cdp_backend *be, const cpu_corr *c, int n, cpu_src in, const float *a,
                   long rs, const float *bias, const cdp_bn_infer *bn, float beta, float *out,
                   uint16_t *outh, float *u, int fwd)
{
	int rnd = cpu_bf16_rounds_copies(be), pairs = cpu_bf16_packs_pairs(be);
	ujob uj = { be, c, a, rs, u, rnd, pairs };
	/* the forward's input rounded in every bf16 set, the pairs' too (which
	 * round the transformed values again): so that a bf16 convolution
	 * depends on its input only through the input's bf16 values, as every
	 * other path does, and the stash may hand it those (net_plan.c); dy is not
	 * (4% of the data gradient's time on 64 channels at 64x64) */
	wjob j = { .be = be, .c = c, .g = item_geo(c), .n = n, .in = in, .u = u, .bias = bias,
	           .bn = bn, .beta = beta, .out = out, .outh = outh, .rnd = rnd || (pairs && fwd),
	           .rnd_out = (fwd && be->precision == CDP_PREC_BF16) || outh, .pairs = pairs };
	int rows = n * j.g.tph, fresh = 0;
	float *bnc = bn ? malloc(3 * (size_t)c->o * sizeof *bnc) : NULL;
	uentry *e = NULL;

	for (int o = 0; bnc && o < c->o; o++)
		cpu_bn_post_coef(bn, o, bnc + o, bnc + c->o + o, bnc + 2 * c->o + o);
	j.bnc = bnc;
	if (fwd && (e = ucache_get(be, c, a, rs, rnd, pairs, &fresh))) {
		uj.u = e->u;
		j.u = e->u;
	}
	if (!fresh)
		cpu_parallel_for(be, c->o, filter_item, &uj);
	if (e && !fresh)
		ucache_keep(e, a);
	cpu_parallel_for(be, (rows + j.g.rows - 1) / j.g.rows, wino_item, &j);
	free(bnc);
}
