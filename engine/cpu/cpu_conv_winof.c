/* cpu_conv_winof.c: the filter gradient of the 3x3, dilation-1
 * correlations cpu_conv_wino.c computes, over the same tiles.
 *
 * The forward makes each tile Y (2x2) = A^T [U .* V] A with U = G g G^T
 * and V = B^T d B (cpu_conv_wino.c has the matrices). Y is linear in U,
 * so for a loss with gradient dY on the tile
 *     dL/dU = (A dY A^T) .* V,   dL/dg = G^T (dL/dU) G
 * and summed over tiles and samples, per element xi of the 4x4 domain,
 *     dU[xi] (S, O) = V[xi] (S, T) * Z[xi] (T, O),   Z = A dY A^T
 * with T every tile of the batch: 16 gemms with the sum over tiles as the
 * inner dimension, 16 multiplications per tile and channel pair where the
 * direct filter gradient makes 36. Then dw[o, s] += G^T dU[., s, o] G.
 * A^T has coefficients 0, +-1 only, G 1 and 1/2: as in the forward, the
 * results differ from the direct sum by a few ulps of its terms.
 *
 * Work: items of whole tile rows (V and Z of an item about ITEM_FLOATS,
 * so that they stay in the cache between the transforms and the gemms)
 * in P parts of consecutive items; a part's thread transforms each item
 * into its scratch and adds its 16 gemms into the part's own dU_p, in
 * the caller's workspace. Then dw += G^T (dU_0 + dU_1 + ...) G, summed in
 * part order, split over the threads by blocks of S. P depends on the
 * layer and the batch, not on the threads (parts()).
 * Wide layers and small batches (fewer than PARTS_MIN parts) have too
 * few tiles, or a dU too big, for several: there the tiles go in chunks,
 * each transformed by all threads into the workspace (runs of tile rows),
 * then its 16 gemms split over the threads by xi and blocks of S rows,
 * adding into one dU; two barriers a chunk, which on layers of many tiles
 * made the filter gradient take twice the forward's time at 2 threads.
 * Either way every element of a dU is summed over its tiles in order and
 * the way is chosen from the layer alone: the results do not depend on
 * the threads.
 * In bf16 with the avx512bf16-fma set, x is rounded as its slice is
 * filled and dy as it is loaded for its transform, so dU sums products of
 * bf16 operands, as the direct filter gradient does. With the avx512bf16
 * set (VDPBF16PS) the transformed values are rounded instead, as in the
 * forward (cpu_conv_wino.c), by the transforms themselves where a tile
 * row has an even number of tiles (pp): V's rows in bf16
 * (cpu_wino_input_h), which are the gemm's A in pairs of tiles, and Z in
 * pairs of tiles, its B as the gemm reads it (cpu_bf16_nn_pp). Written
 * as floats, V was paired again where it lay before each gemm (5% of the
 * op) and Z converted as the gemm read it; an item's V and Z now take
 * half the bytes. Odd rows of tiles keep those passes: the same values,
 * summed in the same order, either way.
 */
#include <string.h>
#include "cpu_iconv.h"
#include "cpu_wino_vec.h"
#ifdef CPU_BF16_KERNELS
#include "cpu_amx.h"     /* DP_TARGET */
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#define XPAD CPU_WINO_XPAD
#define ITEM_FLOATS (256L * 1024)  /* V and Z of an item, 1 MB */
#define ITEM_MIN_TILES 64         /* the least gemm depth */
#define PARTS 8
#define PARTS_MIN 4
#define PART_MIN_TILES 256
#define PART_FLOATS (8L * 1024 * 1024)
#define CHUNK_THREADS 8           /* a chunk: ITEM_FLOATS a thread, up to 8 */
#define CHUNK_MIN_TILES 128
#define SBLOCK 64                 /* channels of dw or dU a job finishes */

/* an item or a chunk: g.rows tile rows, in ld columns of V and rows of Z;
 * a chunk's transforms in runs of `run` rows */
typedef struct fgeo {
	cpu_wgeo g;
	size_t ld;
	int run;
} fgeo;

/* threads 0: an item's; else a chunk's at that many threads */
static fgeo make_fgeo(const cpu_corr *c, int threads)
{
	int t = threads < CHUNK_THREADS ? threads : CHUNK_THREADS;
	long want = (t ? t : 1) * ITEM_FLOATS / (16L * (c->s + c->o));
	long least = t ? CHUNK_MIN_TILES : ITEM_MIN_TILES;
	fgeo f;

	f.g = cpu_wino_geo(c, want < least ? least : want);
	/* two runs a thread, so a late thread holds the others up less */
	f.run = t ? (f.g.rows + 2 * t - 1) / (2 * t) : f.g.rows;
	/* V's rows an odd number of cache lines apart: the gemm reads 8 of
	 * them at a time, which at multiples of 4 KiB would share cache sets */
	f.ld = ((size_t)f.g.rows * f.g.tpr + 15) / 16 * 16;
	if (f.ld / 16 % 2 == 0)
		f.ld += 16;
	return f;
}

/* floats from V[xi] to V[xi + 1], Z[xi], dU[xi] */
static size_t vst(const cpu_corr *c, const fgeo *f) { return (size_t)c->s * f->ld + XPAD; }
static size_t zst(const cpu_corr *c, const fgeo *f) { return f->ld * c->o + XPAD; }
static size_t ust(const cpu_corr *c) { return (size_t)c->s * c->o + XPAD; }

/* a row of zeros (dy's row past the plane), floats */
static size_t zrow(const fgeo *f) { return (size_t)(2 * f->g.tpr + 15) / 16 * 16; }

/* the items of a batch of n (f an item's geometry) */
static int items(const fgeo *f, int n)
{
	return (n * f->g.tph + f->g.rows - 1) / f->g.rows;
}

/* The parts of a batch of n (n 0: the most of any batch): at most
 * PARTS, their dU within PART_FLOATS, one item and PART_MIN_TILES tiles
 * each at least (a part's dU is written and read once whatever its
 * tiles: with fewer, that outweighed the gemms) */
static int parts(const cpu_corr *c, int n)
{
	fgeo f = make_fgeo(c, 0);
	long p = PART_FLOATS / (16 * (long)ust(c)), tiles = (long)n * f.g.tph * f.g.tpr;

	p = p < 1 ? 1 : p > PARTS ? PARTS : p;
	if (n > 0) {
		p = items(&f, n) < p ? items(&f, n) : p;
		p = tiles / PART_MIN_TILES < p ? tiles / PART_MIN_TILES : p;
	}
	return p < 1 ? 1 : (int)p;
}

/* the batch goes in chunks: too few parts */
static int chunked(const cpu_corr *c, int n)
{
	return parts(c, n) < PARTS_MIN;
}

/* The transforms write bf16 themselves (pp, the avx512bf16 set): the
 * tiles of a tile row come in pairs */
#if WINO_VEC && defined(CPU_BF16_KERNELS)
#define PP_BUILT 1
#else
#define PP_BUILT 0
#endif
static int pp_shape(const cpu_corr *c)
{
	return PP_BUILT && (c->ow + 1) / 2 % 2 == 0;
}

/* With VDPBF16PS (cpu_bf16_packs_pairs) the products of the narrow layers
 * are cheap next to the transforms of dy and x into Z and V. When the
 * transforms wrote floats, which the gemm paired again, at 32 channels in
 * and out the direct filter gradient (cpu_conv_kcol.c) was 13-15% faster
 * on a Zen 4 (bench/conv_bench -b -t 2, 64,32,64,32: 17.4 against 15.1 ms;
 * 8,32,128,32: 8.6 against 7.4), at 32 and 64 the two even, from 64 and
 * 64 on Winograd ahead by 18-55%. Writing bf16 (pp), Winograd is ahead
 * of the grid's direct sums (cpu_conv_grid_filter.c) from 32 and 32 in
 * the FMA timing model (doc/PERFORMANCE.md, session 46: 64,32,32,64 6.3
 * against 4.9 ms, 8,32,128,32 6.8 against 5.9), which gives the products
 * more weight than a Zen 4 does. */
#define PAIRS_MIN_SO (64 * 64)

int cpu_winof_takes(const cdp_backend *be, const cpu_corr *c)
{
	return cpu_wino_takes(be, c) &&
	       !(cpu_bf16_packs_pairs(be) && (long)c->s * c->o < PAIRS_MIN_SO && !pp_shape(c));
}

/* the zero row, the input slice and cpu_wino_input_h's tmp2 (a chunk's
 * runs' are at most the largest chunk's: runs depend on the threads, the
 * reservation must not), and V and Z of an item where the layer may go in
 * items */
size_t cpu_winof_scratch(const cpu_corr *c)
{
	fgeo f = make_fgeo(c, 0), g = make_fgeo(c, CHUNK_THREADS);
	size_t a = chunked(c, 0) ? 0 : 16 * (vst(c, &f) + zst(c, &f)) + zrow(&f) +
	                               cpu_wino_tmp_floats(c, &f.g) + CPU_WINO_TMP2 * f.ld;
	size_t b = zrow(&g) + cpu_wino_tmp_floats(c, &g.g) + CPU_WINO_TMP2 * g.ld;

	return ((a > b ? a : b) + 64) * sizeof(float);
}

/* the parts' dU, or one dU and the largest chunk's V and Z */
size_t cpu_winof_floats(const cpu_corr *c)
{
	fgeo f = make_fgeo(c, CHUNK_THREADS);
	size_t a = 16 * ust(c) * (size_t)parts(c, 0), b = 16 * (ust(c) + vst(c, &f) + zst(c, &f));

	return a > b ? a : b;
}

typedef struct fjob {
	cdp_backend *be;
	const cpu_corr *c;
	fgeo f;
	int n, items, parts;
	cpu_src x;
	const float *dy;
	const uint16_t *dyh;     /* or dy as bf16 (conv_takes_dyh), widened as loaded */
	float *du, *dw;
	int rnd;                 /* round x and dy to bf16 */
	int pairs;               /* VDPBF16PS's gemms: V[xi] rounded and packed */
	int pp;                  /* and by the transforms: V[xi] (uint16_t, row s
	                          * at s ld, xi 2 vst apart), Z[xi] in pairs of
	                          * tiles (uint32_t, pair p at p O, xi zst apart) */
	/* chunks: the chunk's tile rows, its V and Z, whether it is the first */
	int r0, r1, first;
	float *v, *z;
} fjob;

/* Z[xi][t0 + tx][o] for tiles [tx0, tx1) of tile row ty of sample n
 * and filters [o0, o1), one at a time: Z = A dY A^T with
 * A^T = | 1 1  1  0 |, dY the tile's 2x2 of dy (zero past the plane's
 *       | 0 1 -1 -1 |
 * last row or column): rows a, a + b, a - b, -b of dY's rows a, b, then
 * the same on its columns. */
/* dy's element e, widened where it is bf16 (exact) */
static inline float dy_at(const fjob *j, size_t e)
{
	uint32_t u;
	float v;

	if (!j->dyh)
		return j->dy[e];
	u = (uint32_t)j->dyh[e] << 16;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* v's bf16 as VCVTNE2PS2BF16 gives it (a denormal to a signed 0) */
static inline uint16_t bf16_ne(float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof u);
	return (u & 0x7f800000u) == 0 ? (uint16_t)(u >> 16 & 0x8000u) : cpu_bf16_bits(v);
}

static void dy_tiles(const fjob *j, float *z, int n, int ty, int t0, int tx0, int tx1, int o0,
                     int o1)
{
	const cpu_corr *c = j->c;
	size_t plane = (size_t)c->oh * c->ow, zs = zst(c, &j->f);
	size_t d0 = (size_t)n * c->o * plane + (size_t)(2 * ty) * c->ow;
	int row1 = 2 * ty + 1 < c->oh;

	for (int tx = tx0; tx < tx1; tx++) {
		size_t p = d0 + 2 * tx;
		float *zt = z + (size_t)(t0 + tx) * c->o;
		int col1 = 2 * tx + 1 < c->ow;
		/* the missing row or column read as its neighbour, times 0 */
		size_t dr = row1 ? (size_t)c->ow : 0, dc = col1 ? 1 : 0;
		float mr = row1 ? 1.0f : 0.0f, mc = col1 ? 1.0f : 0.0f;

		for (int o = o0; o < o1; o++) {
			size_t q = p + (size_t)o * plane;
			float a0 = dy_at(j, q), a1 = mc * dy_at(j, q + dc), b0 = mr * dy_at(j, q + dr);
			float b1 = mr * mc * dy_at(j, q + dr + dc);

			if (j->rnd) {
				a0 = cpu_bf16_round(a0);
				a1 = cpu_bf16_round(a1);
				b0 = cpu_bf16_round(b0);
				b1 = cpu_bf16_round(b1);
			}
			float e[4][2] = { { a0, a1 }, { a0 + b0, a1 + b1 }, { a0 - b0, a1 - b1 },
			                  { -b0, -b1 } }, zv[16];

			for (int i = 0; i < 4; i++) {
				zv[4 * i] = e[i][0];
				zv[4 * i + 1] = e[i][0] + e[i][1];
				zv[4 * i + 2] = e[i][0] - e[i][1];
				zv[4 * i + 3] = -e[i][1];
			}
			/* pp: tile t's half of pair t / 2 (the low half for even t) */
			uint16_t *zh = (uint16_t *)((uint32_t *)z + (size_t)(t0 + tx) / 2 * c->o + o) +
			               (t0 + tx) % 2;
			for (int x = 0; x < 16; x++)
				if (j->pp)
					zh[2 * (size_t)x * zs] = bf16_ne(zv[x]);
				else
					zt[(size_t)x * zs + o] = zv[x];
		}
	}
}

#if WINO_VEC
/* m (W x W) transposed in place: log2 W perfect shuffles of its rows
 * (rows 2i, 2i + 1 = rows i, i + W/2 zipped) swap the bits of the row and
 * the column index */
#define TRANSPOSE(VT, W, ZL, ZH, m) \
	for (int round_ = 1; round_ < (W); round_ *= 2) { \
		VT t_[W]; \
		_Pragma("GCC unroll 8") \
		for (int i_ = 0; i_ < (W) / 2; i_++) { \
			t_[2 * i_] = __builtin_shuffle((m)[i_], (m)[i_ + (W) / 2], ZL); \
			t_[2 * i_ + 1] = __builtin_shuffle((m)[i_], (m)[i_ + (W) / 2], ZH); \
		} \
		_Pragma("GCC unroll 16") \
		for (int i_ = 0; i_ < (W); i_++) \
			(m)[i_] = t_[i_]; \
	}

/* Z for W tiles from tx0 (both their columns in the plane) and W filters
 * from o0, W = 16 (AVX-512) or 8 (AVX2, WINO_WIDE): the two dy rows' 2W
 * columns of each filter loaded as vectors (the left W and right W of
 * each row), each W x W block of them turned around (filter by column to
 * column by filter: a vector is then one column's W filters), and the
 * transform computed on those, a tile's W filters a vector, which is its
 * row of Z as it lies. Turning the input around costs a quarter of the
 * shuffles of turning the 16 matrices of Z around (dy_tiles' arithmetic
 * on each value: the same Z). RND rounds a vector of the type to bf16
 * (j->rnd). */
#define DY_BLOCK(VT, VU, VH, W, ZL, ZH, RND, PUT) \
	DY_BLOCK_AT(VT, VU, VH, W, ZL, ZH, RND, (W), PUT)
/* W values of a bf16 dy at p as VT, widened (VU, VH: the lanes as 32 and
 * 16 bits) */
#define DY_WIDEN(VT, VU, VH, p) ((VT)(__builtin_convertvector(*(const VH *)(p), VU) << 16))
/* SOFF: where the second W floats of the rows lie (W on: the row goes on;
 * 2 OW on: the rows of the next tile row, dy_rows2); a bf16 dy (j->dyh)
 * widened as it is loaded (zeros, all bits 0, read as bf16 too). PUT
 * stores Z[xi] of tiles t and t + 1 of the block (DY_PUT_F: as floats). */
#define DY_BLOCK_AT(VT, VU, VH, W, ZL, ZH, RND, SOFF, PUT) { \
	const cpu_corr *c = j->c; \
	size_t plane = (size_t)c->oh * c->ow, zs = zst(c, &j->f); \
	size_t d0 = ((size_t)n * c->o + o0) * plane + (size_t)(2 * ty) * c->ow + 2 * tx0; \
	int row1 = 2 * ty + 1 < c->oh; \
	VT in[4][W];             /* row 0 left, right, row 1 left, right: [filter] */ \
	for (int ol = 0; ol < (W); ol++) { \
		size_t e0 = d0 + (size_t)ol * plane; \
		if (j->dyh) { \
			const uint16_t *y0 = j->dyh + e0; \
			const uint16_t *y1 = row1 ? y0 + c->ow : (const uint16_t *)zeros; \
			in[0][ol] = DY_WIDEN(VT, VU, VH, y0); \
			in[1][ol] = DY_WIDEN(VT, VU, VH, y0 + (SOFF)); \
			in[2][ol] = DY_WIDEN(VT, VU, VH, y1); \
			in[3][ol] = DY_WIDEN(VT, VU, VH, y1 + (SOFF)); \
		} else { \
			const float *y0 = j->dy + e0, *y1 = row1 ? y0 + c->ow : zeros; \
			in[0][ol] = *(const VT *)y0; \
			in[1][ol] = *(const VT *)(y0 + (SOFF)); \
			in[2][ol] = *(const VT *)y1; \
			in[3][ol] = *(const VT *)(y1 + (SOFF)); \
		} \
		if (j->rnd) \
			for (int k = 0; k < 4; k++) \
				RND(in[k][ol]); \
	} \
	for (int k = 0; k < 4; k++) { \
		TRANSPOSE(VT, W, ZL, ZH, in[k]) \
	} \
	for (int t = 0; t < (W); t += 2) { \
		VT e[2][4][2]; \
		for (int u = 0; u < 2; u++) { \
			/* columns 2t, 2t + 1: of the left W, or of the right */ \
			int h_ = 2 * (t + u) < (W), p_ = h_ ? 2 * (t + u) : 2 * (t + u) - (W); \
			VT a0 = in[1 - h_][p_], a1 = in[1 - h_][p_ + 1]; \
			VT b0 = in[3 - h_][p_], b1 = in[3 - h_][p_ + 1]; \
			e[u][0][0] = a0, e[u][0][1] = a1, e[u][1][0] = a0 + b0, e[u][1][1] = a1 + b1; \
			e[u][2][0] = a0 - b0, e[u][2][1] = a1 - b1, e[u][3][0] = -b0, e[u][3][1] = -b1; \
		} \
		for (int i = 0; i < 4; i++) { \
			PUT(VT, e[0][i][0], e[1][i][0], 4 * i, t); \
			PUT(VT, e[0][i][0] + e[0][i][1], e[1][i][0] + e[1][i][1], 4 * i + 1, t); \
			PUT(VT, e[0][i][0] - e[0][i][1], e[1][i][0] - e[1][i][1], 4 * i + 2, t); \
			PUT(VT, -e[0][i][1], -e[1][i][1], 4 * i + 3, t); \
		} \
	} \
}
/* Z[x] of tiles t, t + 1 of the block (za, zb) as floats, or (pp) as
 * pair (t0 + tx0 + t) / 2 (t0 + tx0 even) */
#define DY_PUT_F(VT, za, zb, x, t) do { \
	float *zp_ = z + (size_t)(t0 + tx0 + (t)) * c->o + o0 + (size_t)(x) * zs; \
	*(VT *)zp_ = (za); \
	*(VT *)(zp_ + c->o) = (zb); \
} while (0)
#define DY_PUT_P(VT, za, zb, x, t) \
	zip_put((uint32_t *)z + (size_t)(t0 + tx0 + (t)) / 2 * c->o + o0 + (size_t)(x) * zs, \
	        (za), (zb))

/* The blocks of W = 16, 8 and 4 filters (suffix 8, 4), and tile rows ty
 * and ty + 1 of a plane 16 wide (8 tiles a row, all four dy rows inside
 * it) as one row of 16 tiles (2r): Z's rows of the two are consecutive,
 * and lane l is tile l % 8 of row l / 8, each lane computed as dy_block8
 * does (the same Z). DY_BLOCKS(SUF, ATTR, PUT) defines them with PUT,
 * their names ending in SUF. */
#define DY_BLOCKS(SUF, ATTR, PUT) \
static inline __attribute__((always_inline)) ATTR void \
dy_block##SUF(const fjob *j, float *z, int n, int ty, int t0, int tx0, int o0, \
              const float *zeros) \
DY_BLOCK(wvec, wvecu, wvech, 16, ZIP_LO, ZIP_HI, WINO_BF16, PUT) \
static inline __attribute__((always_inline)) ATTR void \
dy_block8##SUF(const fjob *j, float *z, int n, int ty, int t0, int tx0, int o0, \
               const float *zeros) \
DY_BLOCK(wvec8, wvecu8, wvech8, 8, ZIP_LO8, ZIP_HI8, WINO_BF16_8, PUT) \
static inline __attribute__((always_inline)) ATTR void \
dy_block2r##SUF(const fjob *j, float *z, int n, int ty, int t0, int tx0, int o0, \
                const float *zeros) \
DY_BLOCK_AT(wvec, wvecu, wvech, 16, ZIP_LO, ZIP_HI, WINO_BF16, 2 * c->ow, PUT) \
static inline __attribute__((always_inline)) ATTR void \
dy_block4##SUF(const fjob *j, float *z, int n, int ty, int t0, int tx0, int o0, \
               const float *zeros) \
DY_BLOCK(wvec4, wvecu4, wvech4, 4, ZIP_LO4, ZIP_HI4, WINO_BF16_4, PUT)

DY_BLOCKS(, , DY_PUT_F)

/* the tiles [tx, tx + w) of a row in W x W blocks, filters past the
 * last whole block one at a time */
#define DY_RUN(w, block) do { \
	int o_ = 0; \
	for (; o_ + (w) <= c->o; o_ += (w)) \
		block(j, z, n, ty, t0, tx, o_, zeros); \
	if (o_ < c->o) \
		dy_tiles(j, z, n, ty, t0, tx, tx + (w), o_, c->o); \
} while (0)

/* dy_row's and dy_rows2's bodies on the blocks whose names end in SUF */
#define DY_ROW(SUF) { \
	const cpu_corr *c = j->c; \
	int tph = j->f.g.tph, n = r / tph, ty = r % tph, tx = 0; \
	for (; WINO_WIDE && tx + 16 <= c->ow / 2; tx += 16) \
		DY_RUN(16, dy_block##SUF); \
	for (; tx + 8 <= c->ow / 2; tx += 8) \
		DY_RUN(8, dy_block8##SUF); \
	for (; tx + 4 <= c->ow / 2; tx += 4) \
		DY_RUN(4, dy_block4##SUF); \
	if (tx < j->f.g.tpr) \
		dy_tiles(j, z, n, ty, t0, tx, j->f.g.tpr, 0, c->o); \
}
#define DY_ROWS2(SUF) { \
	const cpu_corr *c = j->c; \
	int tph = j->f.g.tph, n = r / tph, ty = r % tph, o = 0; \
	for (; o + 16 <= c->o; o += 16) \
		dy_block2r##SUF(j, z, n, ty, t0, 0, o, zeros); \
	if (o < c->o) { \
		dy_tiles(j, z, n, ty, t0, 0, 8, o, c->o); \
		dy_tiles(j, z, n, ty + 1, t0 + 8, 0, 8, o, c->o); \
	} \
}
#endif

/* Z for the tiles of tile row r (their columns from t0 on): W x W blocks
 * (16 where WINO_WIDE, then 8, then 4), then the rest one at a time
 * (the small planes' rows of 8 and 4 tiles were all scalar: the dy
 * transform's share of a classifier step with VDPBF16PS's time taken
 * out fell from 7.2% to 6.4%, doc/PERFORMANCE.md, session 38) */
#if WINO_VEC
CPU_CLONES static void dy_row(const fjob *j, float *z, int r, int t0, const float *zeros)
DY_ROW()

/* dy_row for tile rows r and r + 1 (dy_block2r's planes), Z from t0 */
CPU_CLONES static void dy_rows2(const fjob *j, float *z, int r, int t0, const float *zeros)
DY_ROWS2()
#else
static void dy_row(const fjob *j, float *z, int r, int t0, const float *zeros)
{
	int tph = j->f.g.tph;

	(void)zeros;
	dy_tiles(j, z, r / tph, r % tph, t0, 0, j->f.g.tpr, 0, j->c->o);
}
#endif

#if WINO_VEC && defined(CPU_BF16_KERNELS)
/* pp's Z: (za[l], zb[l]) rounded as VCVTNE2PS2BF16 rounds, the pair at
 * d[l] (of 16, 8 or 4 lanes) */
static const int16_t ZIP_PAIRS[32] = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                       15, 31 };
static const int16_t ZIP_PAIRS8[16] = { 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15 };
static const int16_t ZIP_PAIRS4[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };

DP_TARGET static inline void zip_put16(uint32_t *d, wvec za, wvec zb)
{
	__m512i h = (__m512i)_mm512_cvtne2ps_pbh((__m512)zb, (__m512)za);

	_mm512_storeu_si512(d, _mm512_permutexvar_epi16(_mm512_loadu_si512(ZIP_PAIRS), h));
}

DP_TARGET static inline void zip_put8(uint32_t *d, wvec8 za, wvec8 zb)
{
	__m256i h = (__m256i)_mm256_cvtne2ps_pbh((__m256)zb, (__m256)za);

	_mm256_storeu_si256((__m256i *)d,
	                    _mm256_permutexvar_epi16(_mm256_loadu_si256((const __m256i *)ZIP_PAIRS8),
	                                             h));
}

DP_TARGET static inline void zip_put4(uint32_t *d, wvec4 za, wvec4 zb)
{
	__m128i h = (__m128i)_mm_cvtne2ps_pbh((__m128)zb, (__m128)za);

	_mm_storeu_si128((__m128i *)d,
	                 _mm_permutexvar_epi16(_mm_loadu_si128((const __m128i *)ZIP_PAIRS4), h));
}

#define zip_put(d, za, zb) _Generic((za), wvec: zip_put16, wvec8: zip_put8, \
                                    wvec4: zip_put4)((d), (za), (zb))

DY_BLOCKS(_pp, DP_TARGET, DY_PUT_P)

DP_TARGET static void dy_row_pp(const fjob *j, float *z, int r, int t0, const float *zeros)
DY_ROW(_pp)

DP_TARGET static void dy_rows2_pp(const fjob *j, float *z, int r, int t0, const float *zeros)
DY_ROWS2(_pp)
#endif

/* V's columns and Z's rows t0 on from tile rows [a, b); scratch: a zero
 * row (zrow floats), then the input slice */
static void transform(const fjob *j, int a, int b, float *v, float *z, int t0, float *scratch)
{
	const cpu_corr *c = j->c;
	const fgeo *f = &j->f;
	float *tmp = scratch + zrow(f);
	/* a convolution depends on its input only through its bf16 values
	 * (backend.h, the stash's contract), in every bf16 set: x's floats
	 * rounded (bf16 x as it is) */
	int xrnd = j->rnd || j->pairs;

	memset(scratch, 0, zrow(f) * sizeof *scratch);
#if WINO_VEC && defined(CPU_BF16_KERNELS)
	if (j->pp) {
		cpu_wino_input_h(c, &f->g, j->x, a, b, (uint16_t *)v + t0, f->ld, 2 * vst(c, f), tmp,
		                 tmp + cpu_wino_tmp_floats(c, &f->g), xrnd);
		for (int r = a; r < b; r++) {
			if (WINO_TWO_ROWS(c, &f->g, r, b)) {
				dy_rows2_pp(j, z, r, t0 + (r - a) * f->g.tpr, scratch);
				r++;
			} else {
				dy_row_pp(j, z, r, t0 + (r - a) * f->g.tpr, scratch);
			}
		}
		return;
	}
#endif
	cpu_wino_input(c, &f->g, j->x, a, b, v + t0, f->ld, tmp, xrnd);
	for (int r = a; r < b; r++) {
#if WINO_VEC
		if (WINO_TWO_ROWS(c, &f->g, r, b)) {
			dy_rows2(j, z, r, t0 + (r - a) * f->g.tpr, scratch);
			r++;
			continue;
		}
#endif
		dy_row(j, z, r, t0 + (r - a) * f->g.tpr, scratch);
	}
}

/* du (m, O) = v (m rows of `tiles`, f.ld apart) z (tiles, O) + beta du:
 * fp32 FMAs (on rounded operands when rnd), or in pairs, VDPBF16PS's
 * products: of the transforms' bf16 (pp), or of v's rows rounded and
 * packed where they lie (which spoils them: each row is read by this
 * gemm only) and z rounded as it is read (cpu_gemm_bf16.c) */
static void dU_gemm(const fjob *j, int m, int tiles, float *v, const float *z, float beta,
                    float *du)
{
	const cpu_corr *c = j->c;

#ifdef CPU_BF16_KERNELS
	if (j->pp) {
		cpu_bf16_nn_pp(m, c->o, tiles, (const uint32_t *)v, (long)j->f.ld / 2,
		               (const uint32_t *)z, c->o, beta, du, c->o);
		return;
	}
	if (j->pairs) {
		for (int s = 0; s < m; s++)
			cpu_bf16_pairs_inplace(v + (size_t)s * j->f.ld, tiles);
		cpu_bf16f_nn_packed(m, c->o, tiles, (const uint32_t *)v, (long)j->f.ld, z, c->o, beta,
		                    du, c->o);
		return;
	}
#endif
	cpu_kgemm_fp32_nn(m, c->o, tiles, v, (long)j->f.ld, 1, z, c->o, beta, du, c->o);
}

/* Part p: its items' V and Z in the thread's scratch, their 16 gemms
 * into dU_p[xi] (S, O) (the first item sets it) */
static void part(void *ctx, int p)
{
	const fjob *j = ctx;
	const cpu_corr *c = j->c;
	const fgeo *f = &j->f;
	float *v = cpu_scratch(j->be, cpu_worker()), *z = v + 16 * vst(c, f);
	float *du = j->du + (size_t)p * 16 * ust(c);
	int i0 = (int)((long)j->items * p / j->parts), i1 = (int)((long)j->items * (p + 1) / j->parts);
	int rows = j->n * f->g.tph;

	for (int it = i0; it < i1; it++) {
		int r0 = it * f->g.rows, r1 = r0 + f->g.rows < rows ? r0 + f->g.rows : rows;

		transform(j, r0, r1, v, z, 0, z + 16 * zst(c, f));
		for (int x = 0; x < 16; x++)
			dU_gemm(j, c->s, (r1 - r0) * f->g.tpr, v + x * vst(c, f), z + x * zst(c, f),
			        it == i0 ? 0.0f : 1.0f, du + x * ust(c));
	}
}

/* A chunk's run k of tile rows: its columns of V, its rows of Z */
static void chunk_run(void *ctx, int k)
{
	const fjob *j = ctx;
	int a = j->r0 + k * j->f.run, b = a + j->f.run < j->r1 ? a + j->f.run : j->r1;

	transform(j, a, b, j->v, j->z, (a - j->r0) * j->f.g.tpr, cpu_scratch(j->be, cpu_worker()));
}

/* dU[xi] rows [s0, s0 + SBLOCK) (+)= the chunk's V[xi] rows times Z[xi] */
static void chunk_gemm(void *ctx, int k)
{
	const fjob *j = ctx;
	const cpu_corr *c = j->c;
	int nb = (c->s + SBLOCK - 1) / SBLOCK, x = k / nb, s0 = k % nb * SBLOCK;
	int m = c->s - s0 < SBLOCK ? c->s - s0 : SBLOCK, tiles = (j->r1 - j->r0) * j->f.g.tpr;

	float *v = j->v + x * vst(c, &j->f);

	/* row s0 of V[xi]: of floats, or of bf16 (pp) */
	v = j->pp ? (float *)((uint16_t *)v + (size_t)s0 * j->f.ld) : v + (size_t)s0 * j->f.ld;
	dU_gemm(j, m, tiles, v, j->z + x * zst(c, &j->f), j->first ? 0.0f : 1.0f,
	        j->du + x * ust(c) + (size_t)s0 * c->o);
}

/* dw[o, s, 3x3] += G^T X G, X (4x4) = the parts' sum of dU_p[.][s][o],
 * G^T = | 1 1/2  1/2 0 |, for one block of SBLOCK channels and 16
 *       | 0 1/2 -1/2 0 |  filters o0.. (job k), lane l of each loop
 *       | 0 1/2  1/2 1 |  filter o0 + l: dU's 16 filters lie side by side,
 * so the loops over l vectorize (each lane's sums in the order of the
 * scalar code: the same bits); dw is written in 16 runs of 9 floats per
 * channel (its rows are S*9 floats apart). One job per block of S alone
 * left a 64-channel layer's to one thread: 1.5% of a classifier step,
 * the other thread waiting (perf, Zen 4). */
#define OB 16

static void to_dw(void *ctx, int k)
{
	const fjob *j = ctx;
	const cpu_corr *c = j->c;
	int obs = (c->o + OB - 1) / OB, sb = k / obs, o0 = k % obs * OB;
	int s1 = (sb + 1) * SBLOCK < c->s ? (sb + 1) * SBLOCK : c->s;
	int no = c->o - o0 < OB ? c->o - o0 : OB;
	size_t us = ust(c), row = (size_t)c->s * 9, ps = 16 * us;

	for (int s = sb * SBLOCK; s < s1; s++) {
		const float *u = j->du + (size_t)s * c->o + o0;
		float x[16][OB], t[3][4][OB], w[9][OB];
		for (int q = 0; q < 16; q++) {
			if (no < OB)
				memset(x[q], 0, sizeof x[q]);
			memcpy(x[q], u + q * us, (size_t)no * sizeof x[q][0]);
			for (int p = 1; p < j->parts; p++)
				for (int l = 0; l < no; l++)
					x[q][l] += u[p * ps + q * us + l];
		}
		for (int b = 0; b < 4; b++)
			for (int l = 0; l < OB; l++) {
				t[0][b][l] = x[b][l] + 0.5f * (x[4 + b][l] + x[8 + b][l]);
				t[1][b][l] = 0.5f * (x[4 + b][l] - x[8 + b][l]);
				t[2][b][l] = 0.5f * (x[4 + b][l] + x[8 + b][l]) + x[12 + b][l];
			}
		for (int i = 0; i < 3; i++)
			for (int l = 0; l < OB; l++) {
				w[3 * i][l] = t[i][0][l] + 0.5f * (t[i][1][l] + t[i][2][l]);
				w[3 * i + 1][l] = 0.5f * (t[i][1][l] - t[i][2][l]);
				w[3 * i + 2][l] = 0.5f * (t[i][1][l] + t[i][2][l]) + t[i][3][l];
			}
		for (int l = 0; l < no; l++) {
			float *d = j->dw + (size_t)(o0 + l) * row + (size_t)s * 9;
			for (int e = 0; e < 9; e++)
				d[e] += w[e][l];
		}
	}
}

void cpu_winof_filter(cdp_backend *be, const cpu_corr *c, int n, cpu_src x,
                      cpu_src dy, float *dw, float *ws)
{
	fjob j = { .be = be, .c = c, .n = n, .x = x, .dy = dy.f, .dyh = dy.h, .du = ws, .dw = dw,
	           .rnd = cpu_bf16_rounds_copies(be), .pairs = cpu_bf16_packs_pairs(be) };
	int rows, nb = (c->s + SBLOCK - 1) / SBLOCK;

	j.f = make_fgeo(c, chunked(c, n) ? be->threads : 0);
	j.pp = j.pairs && pp_shape(c);
	if (!chunked(c, n)) {
		j.items = items(&j.f, n);
		j.parts = parts(c, n);
		cpu_parallel_for(be, j.parts, part, &j);
	} else {
		j.parts = 1;
		j.v = ws + 16 * ust(c);
		j.z = j.v + 16 * vst(c, &j.f);
		rows = n * j.f.g.tph;
		for (j.r0 = 0, j.first = 1; j.r0 < rows; j.r0 = j.r1, j.first = 0) {
			j.r1 = j.r0 + j.f.g.rows < rows ? j.r0 + j.f.g.rows : rows;
			cpu_parallel_for(be, (j.r1 - j.r0 + j.f.run - 1) / j.f.run, chunk_run, &j);
			cpu_parallel_for(be, 16 * nb, chunk_gemm, &j);
		}
	}
	cpu_parallel_for(be, nb * ((c->o + OB - 1) / OB), to_dw, &j);
}
