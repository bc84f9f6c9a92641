/* cpu_gemm_kern.h: the sgemm kernels of cpu_gemm.c, written once for a
 * vector width and included once per instruction set. The includer
 * defines:
 *   KNAME(x)   the name of x in this instance (x##_avx512, ...)
 *   VW         floats per vector (16, 8, 4)
 *   NN_MR      rows of C per nn tile (a broadcast each per step of k)
 *   NN_NV      vectors of C per row of an nn tile
 *   NT_MR, NT_NR  the nt tile: NT_MR x NT_NR dot products
 * and selects the instruction set (#pragma GCC target) around it. The tiles
 * are sized so the accumulators, the B vectors and one broadcast fit the
 * registers: 32 of 16 floats with AVX-512, 16 of 8 with AVX2, 16 of 4 with
 * SSE2. See cpu_gemm.c for what the kernels compute.
 */

typedef float KNAME(vec) __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int KNAME(veci) __attribute__((vector_size(VW * 4)));
#define V KNAME(vec)
/* unaligned vector load and store, straight to and from registers */
#define VLOAD(v, p) ((v) = *(const V *)(p))
#define VSTORE(p, v) (*(V *)(p) = (v))

/* C[0..mr, 0..VW*nv) for k in [k0, k1); the first block (k0 == 0) starts
 * from beta*C, later ones from C. B's row k is b + tab[k] or b + k*ldb. */
static inline __attribute__((always_inline)) void
KNAME(tile_nn)(const int mr, const int nv, int k0, int k1, const float *a, long rs, long cs,
               const float *b, long ldb, const long *tab, float beta, float *c, long ldc)
{
	V acc[NN_MR][NN_NV];

	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int v = 0; v < nv; v++) {
			if (k0 > 0 || beta != 0.0f) {
				VLOAD(acc[i][v], c + i * ldc + VW * v);
				if (k0 == 0 && beta != 1.0f)
					acc[i][v] *= beta;
			} else {
				acc[i][v] = (V){ 0 };
			}
		}
	for (int k = k0; k < k1; k++) {
		const float *brow = b + (tab ? tab[k] : k * ldb);
		V bv[NN_NV];
		#pragma GCC unroll 16
		for (int v = 0; v < nv; v++)
			VLOAD(bv[v], brow + VW * v);
		#pragma GCC unroll 16
		for (int i = 0; i < mr; i++) {
			float s = a[i * rs + k * cs];
			#pragma GCC unroll 16
			for (int v = 0; v < nv; v++)
				acc[i][v] += s * bv[v];
		}
	}
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int v = 0; v < nv; v++)
			VSTORE(c + i * ldc + VW * v, acc[i][v]);
}

/* B's rows k0 .. k1-1, columns j .. j+w-1, into the rows of pw floats of
 * panel (w <= pw, pw a multiple of VW), zeros past w: the block one
 * contiguous run, whatever B's row stride or table */
static inline __attribute__((always_inline)) void
KNAME(pack_b)(const float *b, long ldb, const long *tab, int k0, int k1, int j, int w, int pw,
              float *panel)
{
	for (int q = k0; q < k1; q++) {
		const float *row = b + (tab ? tab[q] : q * ldb) + j;
		float *p = panel + (q - k0) * pw;
		int v = 0;

		for (; v + VW <= w; v += VW) {
			V t;
			VLOAD(t, row + v);
			VSTORE(p + v, t);
		}
		for (; v < pw; v++)
			p[v] = v < w ? row[v] : 0.0f;
	}
}

/* Columns j0 .. n-1 past the last full vector (fewer than VW), by the
 * vector tile: B's tail columns of rows k0 .. k1-1 copied into a panel
 * of whole vectors (zeros past n), and each tile of C's tail columns
 * through a VW-wide buffer. The sums run in the same k order as the full
 * tiles'. (One column at a time, as this was before, took 12% of a
 * ResNet-50 step: 7x7 and 14x14 planes end in such tails.) */
static __attribute__((noinline)) void
KNAME(tail_nn)(int m, int j0, int n, int k0, int k1, const float *a, long rs, long cs,
               const float *b, long ldb, const long *tab, float beta, float *c, long ldc)
{
	float panel[KC * VW] __attribute__((aligned(64)));
	float ct[NN_MR * VW] __attribute__((aligned(64)));
	int w = n - j0, kb = k1 - k0, i0 = 0;
	/* a later block of k adds to C as it is; the first applies beta */
	float be = k0 > 0 ? 1.0f : beta;

	KNAME(pack_b)(b, ldb, tab, k0, k1, j0, w, VW, panel);
	for (; i0 < m; i0 += NN_MR) {
		int mr = m - i0 < NN_MR ? m - i0 : NN_MR;
		float *ci = c + i0 * ldc + j0;

		for (int i = 0; be != 0.0f && i < mr; i++)
			for (int q = 0; q < VW; q++)
				ct[i * VW + q] = q < w ? ci[i * ldc + q] : 0.0f;
		if (mr == NN_MR)
			KNAME(tile_nn)(NN_MR, 1, 0, kb, a + i0 * rs + k0 * cs, rs, cs, panel, VW, NULL, be,
			               ct, VW);
		else
			for (int i = 0; i < mr; i++)
				KNAME(tile_nn)(1, 1, 0, kb, a + (i0 + i) * rs + k0 * cs, rs, cs, panel, VW,
				               NULL, be, ct + i * VW, VW);
		for (int i = 0; i < mr; i++)
			for (int q = 0; q < w; q++)
				ci[i * ldc + q] = ct[i * VW + q];
	}
}

/* rows of C in tiles of NN_MR, then 4 (when smaller), then 1 */
static inline __attribute__((always_inline)) void
KNAME(rows_nn)(const int nv, int m, int j, int k0, int k1, const float *a, long rs, long cs,
               const float *b, long ldb, const long *tab, float beta, float *c, long ldc)
{
	int i0 = 0;
	for (; i0 + NN_MR <= m; i0 += NN_MR) {
		/* the next tile's rows of C, which a later block of k reads from
		 * memory: their misses would stall the tile's first loads */
		if (k0 > 0 || beta != 0.0f)
			for (int i = NN_MR; i < 2 * NN_MR && i0 + i < m; i++)
				for (int v = 0; v < nv; v++)
					__builtin_prefetch(c + (i0 + i) * ldc + j + VW * v, 0, 3);
		KNAME(tile_nn)(NN_MR, nv, k0, k1, a + i0 * rs, rs, cs, b + j, ldb, tab, beta,
		               c + i0 * ldc + j, ldc);
	}
	for (; NN_MR > 4 && i0 + 4 <= m; i0 += 4)
		KNAME(tile_nn)(4, nv, k0, k1, a + i0 * rs, rs, cs, b + j, ldb, tab, beta,
		               c + i0 * ldc + j, ldc);
	for (; i0 < m; i0++)
		KNAME(tile_nn)(1, nv, k0, k1, a + i0 * rs, rs, cs, b + j, ldb, tab, beta,
		               c + i0 * ldc + j, ldc);
}

static inline __attribute__((always_inline)) void
KNAME(kgemm_nn)(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                long ldb, const long *tab, float beta, float *c, long ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (k <= 0) {
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[i * ldc + j] = beta != 0.0f ? beta * c[i * ldc + j] : 0.0f;
		return;
	}
	for (int k0 = 0; k0 < k; k0 += KC) {
		int k1 = k0 + KC < k ? k0 + KC : k, j = 0;
		for (; j + NN_NV * VW <= n; j += NN_NV * VW) {
			if (m < NN_PACK_M) {
				KNAME(rows_nn)(NN_NV, m, j, k0, k1, a, rs, cs, b, ldb, tab, beta, c, ldc);
				continue;
			}
			/* B's block (k1 - k0, NN_NV*VW) copied into one contiguous
			 * panel, read by every tile of rows: B's own rows lie up to a
			 * plane apart, so the tiles' reads of them missed the TLB
			 * (1x1 layers of ResNet-50 ran at 40% of the core's peak) */
			float panel[KC * NN_NV * VW] __attribute__((aligned(64)));
			KNAME(pack_b)(b, ldb, tab, k0, k1, j, NN_NV * VW, NN_NV * VW, panel);
			/* the block's k from 0: the first block applies beta, later
			 * ones add to C as it is */
			KNAME(rows_nn)(NN_NV, m, 0, 0, k1 - k0, a + k0 * cs, rs, cs, panel, NN_NV * VW, NULL,
			               k0 > 0 ? 1.0f : beta, c + j, ldc);
		}
		for (; j + VW <= n; j += VW)
			KNAME(rows_nn)(1, m, j, k0, k1, a, rs, cs, b, ldb, tab, beta, c, ldc);
		if (j < n)
			KNAME(tail_nn)(m, j, n, k0, k1, a, rs, cs, b, ldb, tab, beta, c, ldc);
	}
}

/* ---- C += A B^T ---- */

/* The lanes summed as a tree (halves, quarters, ...): a fixed order. */
static inline __attribute__((always_inline)) float KNAME(hsum)(const V *v)
{
	V s = *v;
#if defined(__clang__)
	/* clang has no __builtin_shuffle; the same tree of additions on lanes */
	float t[VW];

	for (int i = 0; i < VW; i++)
		t[i] = s[i];
#if VW == 16
	for (int i = 0; i < 8; i++)
		t[i] += t[i + 8];
#endif
#if VW >= 8
	for (int i = 0; i < 4; i++)
		t[i] += t[i + 4];
#endif
	return (t[0] + t[2]) + (t[1] + t[3]);
#else
#if VW == 16
	s += __builtin_shuffle(s, (KNAME(veci)){ 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15 });
#endif
#if VW >= 8
	s += __builtin_shuffle(s, (KNAME(veci)){ 4, 5, 6, 7, 4, 5, 6, 7
#if VW == 16
	                                         , 4, 5, 6, 7, 4, 5, 6, 7
#endif
	                                         });
#endif
	return (s[0] + s[2]) + (s[1] + s[3]);
#endif
}

static inline __attribute__((always_inline)) void
KNAME(tile_nt)(const int mr, const int nr, int k, const float *a, long lda, const float *b,
               long ldb, const long *tab, float *c, long ldc)
{
	V acc[NT_MR][NT_NR];
	const float *bp[NT_NR];
	int kv = k / VW * VW;

	/* B's row pointers once, not per step (the table is memory the
	 * compiler cannot keep in registers across the stores) */
	#pragma GCC unroll 16
	for (int j = 0; j < nr; j++)
		bp[j] = b + (tab ? tab[j] : j * ldb);
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int j = 0; j < nr; j++)
			acc[i][j] = (V){ 0 };
	for (int q = 0; q < kv; q += VW) {
		V av[NT_MR];
		#pragma GCC unroll 16
		for (int i = 0; i < mr; i++)
			VLOAD(av[i], a + i * lda + q);
		/* one B vector live at a time: accumulators + A + 1 fit the
		 * registers (4 x 6 + 4 + 1 = 29 of 32 with AVX-512) */
		#pragma GCC unroll 16
		for (int j = 0; j < nr; j++) {
			V bv;
			VLOAD(bv, bp[j] + q);
			#pragma GCC unroll 16
			for (int i = 0; i < mr; i++)
				acc[i][j] += av[i] * bv;
		}
	}
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int j = 0; j < nr; j++) {
			float s = KNAME(hsum)(&acc[i][j]);
			for (int q = kv; q < k; q++)
				s += a[i * lda + q] * bp[j][q];
			c[i * ldc + j] += s;
		}
}

static inline __attribute__((always_inline)) void
KNAME(rows_nt)(const int nr, int m, int j, int k, const float *a, long lda, const float *b,
               long ldb, const long *tab, float *c, long ldc)
{
	const float *bj = tab ? b : b + j * ldb;
	const long *tj = tab ? tab + j : NULL;
	int i0 = 0;

	for (; i0 + NT_MR <= m; i0 += NT_MR)
		KNAME(tile_nt)(NT_MR, nr, k, a + i0 * lda, lda, bj, ldb, tj, c + i0 * ldc + j, ldc);
	for (; i0 < m; i0++)
		KNAME(tile_nt)(1, nr, k, a + i0 * lda, lda, bj, ldb, tj, c + i0 * ldc + j, ldc);
}

static inline __attribute__((always_inline)) void
KNAME(kgemm_nt)(int m, int n, int k, const float *a, long lda, const float *b, long ldb,
                const long *tab, float *c, long ldc)
{
	int nblk = k / NT_KC > 1 ? k / NT_KC : 1, step;

	if (m <= 0 || n <= 0 || k <= 0)
		return;
	/* k in nblk blocks of about NT_KC (whole vectors but the last),
	 * each added to C on its own: the B rows of a tile (NT_NR x step)
	 * then stay in L1 while A's rows go by */
	step = ((k + nblk - 1) / nblk + VW - 1) / VW * VW;
	for (int k0 = 0; k0 < k; k0 += step) {
		int kb = k - k0 < step ? k - k0 : step, j = 0;
		for (; j + NT_NR <= n; j += NT_NR)
			KNAME(rows_nt)(NT_NR, m, j, kb, a + k0, lda, b + k0, ldb, tab, c, ldc);
		for (; j < n; j++)
			KNAME(rows_nt)(1, m, j, kb, a + k0, lda, b + k0, ldb, tab, c, ldc);
	}
}

/* ---- C += A B^T over segmented rows ----
 * Row i of A is the ns segments a + i*lda + s*as, row j of B the segments
 * b + tab[j] + s*bs, each seg floats: the filter gradient of small planes
 * sums over whole samples, which lie at one stride in dy and at another
 * in the input's slice (cpu_conv_kcol.c). The floats of each segment past
 * its last whole vector go to a scalar sum per dot product (tail_nts,
 * called outside the vector loop: inside, its scalars took registers the
 * loop needs and cost 12% on whole vectors), added to C after the
 * vectors' horizontal sum. */
static __attribute__((noinline)) void
KNAME(tail_nts)(int mr, int nr, int ns, int q0, int seg, const float *a, long lda, long as,
                const float *b, const long *tab, long bs, float *c, long ldc)
{
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++) {
			float t = 0.0f;
			for (int s = 0; s < ns; s++)
				for (int q = q0; q < seg; q++)
					t += a[i * lda + s * as + q] * b[tab[j] + s * bs + q];
			c[i * ldc + j] += t;
		}
}

static inline __attribute__((always_inline)) void
KNAME(tile_nts)(const int mr, const int nr, int ns, int seg, const float *a, long lda, long as,
                const float *b, const long *tab, long bs, float *c, long ldc)
{
	V acc[NT_MR][NT_NR];
	const float *bp[NT_NR];
	int segv = seg / VW * VW;

	#pragma GCC unroll 16
	for (int j = 0; j < nr; j++)
		bp[j] = b + tab[j];
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int j = 0; j < nr; j++)
			acc[i][j] = (V){ 0 };
	for (int s = 0; s < ns; s++) {
		const float *as0 = a + s * as;
		long bo = s * bs;
		for (int q = 0; q < segv; q += VW) {
			V av[NT_MR];
			#pragma GCC unroll 16
			for (int i = 0; i < mr; i++)
				VLOAD(av[i], as0 + i * lda + q);
			#pragma GCC unroll 16
			for (int j = 0; j < nr; j++) {
				V bv;
				VLOAD(bv, bp[j] + bo + q);
				#pragma GCC unroll 16
				for (int i = 0; i < mr; i++)
					acc[i][j] += av[i] * bv;
			}
		}
	}
	#pragma GCC unroll 16
	for (int i = 0; i < mr; i++)
		#pragma GCC unroll 16
		for (int j = 0; j < nr; j++)
			c[i * ldc + j] += KNAME(hsum)(&acc[i][j]);
	if (segv < seg)
		KNAME(tail_nts)(mr, nr, ns, segv, seg, a, lda, as, b, tab, bs, c, ldc);
}

/* segments in blocks of about NT_KC floats, as kgemm_nt blocks k */
static void KNAME(nt_seg)(int m, int n, int ns, int seg, const float *a, long lda, long as,
                          const float *b, const long *tab, long bs, float *c, long ldc)
{
	int per = NT_KC / seg > 1 ? NT_KC / seg : 1;

	for (int s0 = 0; s0 < ns; s0 += per) {
		int sn = ns - s0 < per ? ns - s0 : per, j = 0;
		const float *ab = a + s0 * as, *bb = b + s0 * bs;
		for (; j + NT_NR <= n; j += NT_NR) {
			int i0 = 0;
			for (; i0 + NT_MR <= m; i0 += NT_MR)
				KNAME(tile_nts)(NT_MR, NT_NR, sn, seg, ab + i0 * lda, lda, as, bb, tab + j,
				                bs, c + i0 * ldc + j, ldc);
			for (; i0 < m; i0++)
				KNAME(tile_nts)(1, NT_NR, sn, seg, ab + i0 * lda, lda, as, bb, tab + j, bs,
				                c + i0 * ldc + j, ldc);
		}
		for (; j < n; j++) {
			int i0 = 0;
			for (; i0 + NT_MR <= m; i0 += NT_MR)
				KNAME(tile_nts)(NT_MR, 1, sn, seg, ab + i0 * lda, lda, as, bb, tab + j, bs,
				                c + i0 * ldc + j, ldc);
			for (; i0 < m; i0++)
				KNAME(tile_nts)(1, 1, sn, seg, ab + i0 * lda, lda, as, bb, tab + j, bs,
				                c + i0 * ldc + j, ldc);
		}
	}
}

/* The four entry points; NULL constants specialise the stride versions. */
static void KNAME(nn)(int m, int n, int k, const float *a, long rs, long cs,
                      const float *b, long ldb, float beta, float *c, long ldc)
{
	KNAME(kgemm_nn)(m, n, k, a, rs, cs, b, ldb, NULL, beta, c, ldc);
}

static void KNAME(nn_tab)(int m, int n, int k, const float *a, long rs, long cs,
                          const float *b, const long *tab, float beta, float *c, long ldc)
{
	KNAME(kgemm_nn)(m, n, k, a, rs, cs, b, 0, tab, beta, c, ldc);
}

static void KNAME(nt)(int m, int n, int k, const float *a, long lda, const float *b,
                      long ldb, float *c, long ldc)
{
	KNAME(kgemm_nt)(m, n, k, a, lda, b, ldb, NULL, c, ldc);
}

static void KNAME(nt_tab)(int m, int n, int k, const float *a, long lda, const float *b,
                          const long *tab, float *c, long ldc)
{
	KNAME(kgemm_nt)(m, n, k, a, lda, b, 0, tab, c, ldc);
}

#undef V
#undef VLOAD
#undef VSTORE
