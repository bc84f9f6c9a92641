/* cpu_gemm_amx.c: the "amx" set of bf16 products (cpu_gemm_bf16.c says
 * what the sets share): nn and nt on AMX tiles, TDPBF16PS, 16 x 16 x 32
 * per instruction, where the CPU has AMX-TILE and AMX-BF16 and the kernel
 * grants the tile data. A is packed as the VDPBF16PS kernels pack it
 * (cpu_bf16_pack.h); the implicit convolutions' forward and data gradient
 * go to cpu_conv_pairs.c instead, whose slice is already in the tiles'
 * pairs.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_bf16_pack.h"

#ifdef CPU_BF16_KERNELS
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cpu_amx.h"

/* ---- nn on tiles ----
 * C in blocks of 16 x 16 (tiles, fp32), summed over K in steps of 32
 * (16 pairs) by TDPBF16PS from a tile of packed A (16 rows of 16 pairs,
 * straight from pack_a's rows) and a tile of B's 16 columns in pairs
 * (VNNI layout: row p holds (B[2p, j], B[2p+1, j]) for each j), which is
 * built once per column block for all rows of C. A whole tile with beta 0
 * is stored straight into C; others go through a small buffer, masked at
 * the edges, with beta C added. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* the CPU reports AMX-TILE and AMX-BF16, and the kernel lets this process
 * use the tile data (Linux 5.16 and later) */
static void amx_probe(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
		return;
#ifdef SYS_arch_prctl
	amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

int cpu_bf16_amx_usable(void)
{
	pthread_once(&amx_once, amx_probe);
	return amx_ok;
}

/* All eight tiles 16 rows of 64 bytes: 0-3 the C blocks of a 2 x 2 step,
 * 4-5 two tiles of A (or of the first operand), 6-7 two of B. A constant
 * in memory: GCC 12's _tile_loadconfig tells the compiler it reads only
 * the first 8 bytes, so the stores that build a configuration on the
 * stack may be dropped. */
static const unsigned char amx_tiles[64] __attribute__((aligned(64))) = {
	[0] = 1,                                      /* palette 1 */
	[16] = 64, [18] = 64, [20] = 64, [22] = 64,   /* bytes per row */
	[24] = 64, [26] = 64, [28] = 64, [30] = 64,
	[48] = 16, [49] = 16, [50] = 16, [51] = 16,   /* rows */
	[52] = 16, [53] = 16, [54] = 16, [55] = 16,
};

AMX_TARGET static void amx_config(pack_buf *pb)
{
	if (pb->tiles)
		return;
	_tile_loadconfig(amx_tiles);
	pb->tiles = 1;
}

int cpu_bf16_amx_tiles(void)
{
	pack_buf *pb = cpu_bf16_buf();

	if (!pb)
		return -1;
	amx_config(pb);
	return 0;
}

/* TDPBF16PS takes about three times as long to finish as to issue (Intel's
 * tables: latency 52 cycles, one every 16), so one chain of sums into one
 * C tile runs at a third of the unit's rate. The steps below keep two or
 * four C tiles in flight, each summed over K in the same order as alone,
 * so a C element's bits do not depend on which step computed it; the
 * 2 x 2 step also loads each A and B tile once for two products. With 16
 * rows of C or fewer (16 filters) the conversion of B into pairs costs
 * more than the tiles, and pairing column blocks there was slower (fwd of
 * 16 -> 16 channels at 256x256: 22 against 19 ms), so such a C goes one
 * column block at a time, its chain overlapping the next block's
 * conversion. conv_bench -b -t 1, 8 x C x H x H, 3x3, best of 15, Sapphire
 * Rapids VM: fwd 64 -> 64 at 64x64 7.2 -> 5.6 ms, 128 at 32x32 5.5 -> 4.4,
 * 256 at 16x16 6.9 -> 4.8; 16 and 32 channels unchanged. */

/* C tile T (16 x 16 fp32) into c (rows, columns masked mk), beta c added:
 * straight from the tile where the block is whole and beta is 0 */
#define AMX_PUT(T, c, ldc, rows, mk, beta, cb)                                          \
	do {                                                                            \
		if ((rows) == 16 && (mk) == (__mmask16)0xffff && (beta) == 0.0f) {     \
			_tile_stored(T, c, (ldc) * 4);                                  \
		} else {                                                                \
			_tile_stored(T, cb, 64);                                        \
			amx_put(cb, c, ldc, rows, mk, beta);                            \
		}                                                                       \
	} while (0)

AMX_TARGET static void amx_put(const float *cb, float *c, long ldc, int rows, __mmask16 mk,
                               float beta)
{
	for (int r = 0; r < rows; r++) {
		float *cr = c + r * ldc;
		__m512 v = _mm512_loadu_ps(cb + 16 * r);
		if (beta != 0.0f)
			v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, cr), v);
		_mm512_mask_storeu_ps(cr, mk, v);
	}
}

/* B's columns [j, j + 16) (mask mk) in VNNI pairs: bv[p*16 + c] =
 * (B[2p, j+c], B[2p+1, j+c]), k2 rows, zeros past K */
AMX_TARGET static void amx_pair_block(int k, long k2, const float *b, long ldb,
                                      const long *tab, int j, __mmask16 mk, __m512i idx,
                                      uint32_t *bv)
{
	for (long p = 0; p < k2; p++) {
		__m512bh v;
		if (2 * p + 1 < k)
			v = pair_rows(b + (tab ? tab[2 * p] : 2 * p * ldb) + j,
			              b + (tab ? tab[2 * p + 1] : (2 * p + 1) * ldb) + j, mk, idx);
		else if (2 * p < k)
			v = pair_rows(b + (tab ? tab[2 * p] : 2 * p * ldb) + j, NULL, mk, idx);
		else
			v = (__m512bh)_mm512_setzero_si512();
		_mm512_store_si512(bv + p * 16, (__m512i)v);
	}
}

AMX_TARGET static void amx_nn(int m, int n, int k, const float *a, long rs, long cs,
                              const float *b, long ldb, const long *tab, float beta,
                              float *c, long ldc)
{
	long k2 = pack_stride(k), sa = k2 * 4;
	const uint32_t *ap;
	pack_buf *pb;
	float cb[16 * 16] __attribute__((aligned(64)));
	__m512i idx = pair_idx();

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0 || !(ap = cpu_bf16_pack_get(m, k, a, rs, cs)) || !(pb = cpu_bf16_buf())) {
		cpu_bf16e_nn_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
		return;
	}
	if (pb->bvcap < (size_t)k2 * 32) {
		free(pb->bv);
		pb->bvcap = 0;
		if (!(pb->bv = aligned_alloc(64, (size_t)k2 * 32 * sizeof *pb->bv))) {
			cpu_bf16e_nn_any(m, n, k, a, rs, cs, b, ldb, tab, beta, c, ldc);
			return;
		}
		pb->bvcap = (size_t)k2 * 32;
	}
	amx_config(pb);
	/* two column blocks (bv0, bv1) at a time, then two row blocks */
	for (int j = 0; j < n; j += m > 16 ? 32 : 16) {
		int two = n - j > 16 && m > 16;
		__mmask16 m0 = mask_of(n - j), m1 = mask_of(n - j - 16);
		uint32_t *bv0 = pb->bv, *bv1 = bv0 + k2 * 16;
		amx_pair_block(k, k2, b, ldb, tab, j, m0, idx, bv0);
		if (two)
			amx_pair_block(k, k2, b, ldb, tab, j + 16, m1, idx, bv1);
		for (int i = 0; i < m; i += 32) {
			const uint32_t *a0 = ap + (size_t)i * k2, *a1 = a0 + 16 * k2;
			int r0 = m - i < 16 ? m - i : 16, r1 = m - i - 16 < 16 ? m - i - 16 : 16;
			float *c00 = c + (long)i * ldc + j, *c10 = c00 + 16 * ldc;
			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			if (r1 > 0 && two) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(5, a1 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_loadd(7, bv1 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(1, 4, 7);
					_tile_dpbf16ps(2, 5, 6);
					_tile_dpbf16ps(3, 5, 7);
				}
			} else if (r1 > 0) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(5, a1 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(2, 5, 6);
				}
			} else if (two) {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_loadd(7, bv1 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(1, 4, 7);
				}
			} else {
				for (long p = 0; p < k2; p += 16) {
					_tile_loadd(4, a0 + p, sa);
					_tile_loadd(6, bv0 + p * 16, 64);
					_tile_dpbf16ps(0, 4, 6);
				}
			}
			AMX_PUT(0, c00, ldc, r0, m0, beta, cb);
			if (two)
				AMX_PUT(1, c00 + 16, ldc, r0, m1, beta, cb);
			if (r1 > 0) {
				AMX_PUT(2, c10, ldc, r1, m0, beta, cb);
				if (two)
					AMX_PUT(3, c10 + 16, ldc, r1, m1, beta, cb);
			}
		}
	}
}

/* nt over segments on tiles: C^T blocks (16 columns j of C as tile rows,
 * 16 rows i as tile columns) = B's rows (bf16, natural) times A's rows in
 * pairs (VNNI: A transposed, 16 rows at a time through a small buffer),
 * so that each 16 x 32 piece of A is converted and transposed once per
 * block of k for all of C's columns, and each 16 x 32 piece of B once per
 * block for all of C's rows. The sum over k runs in blocks as nts_fast's
 * (whole segments, or pieces of one), each segment padded with zeros to
 * whole steps of 32; C += each block's tile, in block order.
 * Up to NTS_BLOCKS column blocks of C share each tile of A's pairs, each
 * its own chain of sums in the same order as alone (the bits do not
 * change): one chain ran at TDPBF16PS's latency, a third of its rate, and
 * the filter gradients' C is 16 rows where a layer has 16 filters, so the
 * second row block amx_nn pairs with is not there (perf of the bf16
 * U-Net step: the chain's wait was half of amx_nts). */
#define NTS_BLOCKS 3

/* c (rows x cols, ldc apart; cols capped at 16) += cb transposed, cb a
 * stored C^T tile: cb[16j + i] is c[i][j] */
AMX_TARGET static void nts_add(const float *cb, float *c, long ldc, int rows, int cols)
{
	__m512i r[16];
	float t[16 * 16] __attribute__((aligned(64)));
	__mmask16 mk = mask_of(cols);

	for (int j = 0; j < 16; j++)
		r[j] = _mm512_load_si512(cb + 16 * j);
	cpu_amx_transpose16(r, (uint32_t *)t);
	for (int i = 0; i < rows; i++) {
		float *ci = c + i * ldc;
		_mm512_mask_storeu_ps(ci, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, ci),
		                                            _mm512_load_ps(t + 16 * i)));
	}
}

AMX_TARGET static void amx_nts(int m, int n, int ns, int seg, const float *a, long lda, long as,
                               const float *b, long ldb, const long *tab, long bs, float *c,
                               long ldc)
{
	int per = NT_KC / seg > 1 ? NT_KC / seg : 1, piece = seg, mp = (m + 15) / 16 * 16;
	long kbmax;
	size_t need;
	pack_buf *pb;
	float cb[16 * 16] __attribute__((aligned(64)));

	if (m <= 0 || n <= 0 || seg <= 0)
		return;
	if (ns == 1 && seg > NT_KC) {
		int nblk = seg / NT_KC;
		piece = ((seg + nblk - 1) / nblk + 31) / 32 * 32;
	}
	/* the largest block: (sn segments) x (len rounded up to 32) */
	kbmax = (long)(ns < per ? ns : per) * ((piece + 31) / 32 * 32);
	/* A's pairs (mp x kb/2) then B's 16 * NTS_BLOCKS rows of kb bf16 */
	need = (size_t)mp * (kbmax / 2) + 8 * NTS_BLOCKS * (size_t)kbmax;
	if (!(pb = cpu_bf16_buf())) {
		cpu_bf16e_nts_any(m, n, ns, seg, a, lda, as, b, ldb, tab, bs, c, ldc);
		return;
	}
	if (pb->bvcap < need) {
		free(pb->bv);
		pb->bvcap = 0;
		if (!(pb->bv = aligned_alloc(64, (need * sizeof *pb->bv + 63) / 64 * 64))) {
			cpu_bf16e_nts_any(m, n, ns, seg, a, lda, as, b, ldb, tab, bs, c, ldc);
			return;
		}
		pb->bvcap = need;
	}
	amx_config(pb);
	for (int s0 = 0; s0 < ns; s0 += per)
		for (int q0 = 0; q0 < seg; q0 += piece) {
			int sn = ns - s0 < per ? ns - s0 : per, len = seg - q0 < piece ? seg - q0 : piece;
			long segp = (len + 31) / 32 * 32, kb = sn * segp, kp = kb / 2;
			uint32_t *av = pb->bv, *bn = av + (size_t)mp * kp;
			/* A: av[ib*16*kp + p*16 + r] = (A[16ib+r, 2p], A[16ib+r, 2p+1]) */
			for (int ib = 0; ib < mp; ib += 16)
				for (int t = 0; t < sn; t++)
					for (int q = 0; q < segp; q += 32) {
						int rest = len - q;
						__mmask16 m0 = mask_of(rest), m1 = rest > 16 ? mask_of(rest - 16) : 0;
						__m512i rv[16];
						for (int r = 0; r < 16; r++)
							rv[r] = ib + r < m ? (__m512i)cvt32(a + (ib + r) * lda +
							                                    (s0 + t) * as + q0 + q, m0, m1) :
							                     _mm512_setzero_si512();
						cpu_amx_transpose16(rv, av + (size_t)ib * kp + (size_t)(t * segp + q) / 2 * 16);
					}
			for (int jb = 0; jb < n; jb += 16 * NTS_BLOCKS) {
				int nj = (n - jb + 15) / 16 < NTS_BLOCKS ? (n - jb + 15) / 16 : NTS_BLOCKS;
				/* B: row r of bn (kb bf16, kp pairs) = B[jb + r, block];
				 * column block q is rows [16q, 16q + 16) */
				for (int r = 0; r < 16 * nj; r++) {
					const float *bj = jb + r < n ?
						b + (tab ? tab[jb + r] : (jb + r) * ldb) + s0 * bs + q0 : NULL;
					for (int t = 0; t < sn; t++)
						for (int q = 0; q < segp; q += 32) {
							int rest = len - q;
							__m512bh v = bj ? cvt32(bj + t * bs + q, mask_of(rest),
							                        rest > 16 ? mask_of(rest - 16) : 0) :
							                  (__m512bh)_mm512_setzero_si512();
							_mm512_storeu_si512(bn + (size_t)r * kp + (t * segp + q) / 2,
							                    (__m512i)v);
						}
				}
				for (int ib = 0; ib < m; ib += 16) {
					int rows = m - ib < 16 ? m - ib : 16;
					const uint32_t *ai = av + (size_t)ib * kp;
					float *ci = c + (long)ib * ldc + jb;
					const void *bq[3] = { bn, bn + 16 * kp, bn + 32 * kp };
					cpu_amx_chains(nj, kp / 16, ai, bq, kp * 4);
					_tile_stored(0, cb, 64);
					nts_add(cb, ci, ldc, rows, n - jb);
					if (nj > 1) {
						_tile_stored(1, cb, 64);
						nts_add(cb, ci + 16, ldc, rows, n - jb - 16);
					}
					if (nj > 2) {
						_tile_stored(2, cb, 64);
						nts_add(cb, ci + 32, ldc, rows, n - jb - 32);
					}
				}
			}
		}
}

void cpu_bf16a_nn(int m, int n, int k, const float *a, long rs, long cs,
                  const float *b, long ldb, float beta, float *c, long ldc)
{
	amx_nn(m, n, k, a, rs, cs, b, ldb, NULL, beta, c, ldc);
}

void cpu_bf16a_nn_tab(int m, int n, int k, const float *a, long rs, long cs,
                      const float *b, const long *tab, float beta, float *c, long ldc)
{
	amx_nn(m, n, k, a, rs, cs, b, 0, tab, beta, c, ldc);
}

void cpu_bf16a_nt(int m, int n, int k, const float *a, long lda, const float *b,
                  long ldb, float *c, long ldc)
{
	amx_nts(m, n, 1, k, a, lda, 0, b, ldb, NULL, 0, c, ldc);
}

void cpu_bf16a_nt_tab(int m, int n, int k, const float *a, long lda, const float *b,
                      const long *tab, float *c, long ldc)
{
	amx_nts(m, n, 1, k, a, lda, 0, b, 0, tab, 0, c, ldc);
}

void cpu_bf16a_nt_seg(int m, int n, int ns, int seg, const float *a, long lda, long as,
                      const float *b, const long *tab, long bs, float *c, long ldc)
{
	amx_nts(m, n, ns, seg, a, lda, as, b, 0, tab, bs, c, ldc);
}
#endif
