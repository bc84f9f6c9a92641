/* cpu.h: the CPU backend's ops, private to engine/cpu/.
 *
 * Every op of the cdp_backend table (backend.h) is a function cpu_<field>
 * with exactly that field's signature; cpu_backend.c fills the table with
 * them. The files:
 *   cpu_backend.c  memory, BLAS-like ops, the table
 *   cpu_pool.c     the thread pool, per-thread scratch, set_threads
 *   cpu_conv.c     convolution (im2col/col2im + sgemm)
 *   cpu_im2col.c   its column matrices
 *   cpu_conv_implicit.c  stride-1 convolution without im2col
 *   cpu_conv_kcol.c  its small planes and filter gradients (cpu_iconv.h)
 *   cpu_conv_wino.c  its 3x3 fp32 forward and data by Winograd F(2x2, 3x3)
 *   cpu_wino_input.c Winograd's input transform (V)
 *   cpu_conv_winof.c its filter gradient over the same tiles
 *   cpu_gemm.c     the sgemm kernels for convolution-shaped products
 *                  (cpu_gemm_kern.h: their code, per vector width;
 *                  cpu_gemm_bf16.c: the same products in bf16,
 *                  cpu_gemm_amx.c on AMX tiles, cpu_bf16_pack.h what
 *                  they share)
 *   cpu_bf16_stash.c the bf16 copies of activations (to_bf16, from_bf16)
 *   cpu_bn.c       batchnorm with its activation fused in
 *   cpu_ops.c      activations, pooling
 *   cpu_elem.c     upsampling, concat slices, dropout, global average
 *                  pool, bias, add, diff (bias_grad is in cpu_conv.c)
 *   cpu_loss.c     softmax_ce, bce_logits, dice_logits, dice_sums, reg_loss, argmax,
 *                  confusion
 *   cpu_optim.c    sgd_step, adamw_step
 *   cpu_window.c   win_gather, win_blend (cdp-predict's sliding windows)
 *
 * Threads: be->threads is the number of workers of our own pthread pool
 * (cpu_parallel_for); OpenBLAS runs single-threaded inside its jobs. Each
 * index of a job writes its own part of the output and every reduction is
 * done in a fixed order over parts that depend on the shape and the thread
 * count only, never on which thread ran what; so results are bitwise
 * identical run to run for a given thread count (and, for ops that do not
 * reduce across the split, for any thread count).
 */
#ifndef CDP_CPU_H
#define CDP_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend.h"

/* A function compiled for AVX-512, AVX2 and the baseline, the best chosen
 * at load time (GCC on x86-64; elsewhere compiled once). Only for code
 * whose bits do not depend on the vector width: no sum reordered, and FMA
 * contraction off where a product feeds an add. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

/* ---- the thread pool (cpu_backend.c) ---- */

/* fn(ctx, i) for i in [0, n), the indices claimed in small runs by
 * whichever of the backend's threads is free (so any thread may run any
 * index, one at a time); returns when all are done. Runs inline when
 * be->threads <= 1, n == 1 or when called from inside a job. fn must only
 * write data owned by index i. One thread at a time may use a backend. */
void cpu_parallel_for(cdp_backend *be, int n, void (*fn)(void *ctx, int i), void *ctx);

/* The thread running the calling job, in [0, be->threads): 0 for the
 * thread that called the op. */
int cpu_worker(void);

/* Elementwise ops over large arrays are split into blocks of this many
 * floats, one index of cpu_parallel_for each: cpu_nblocks(n) blocks, block
 * i covering [*lo, *hi). */
#define CPU_ELEM_BLOCK 65536

static inline int cpu_nblocks(size_t n)
{
	return (int)((n + CPU_ELEM_BLOCK - 1) / CPU_ELEM_BLOCK);
}

static inline void cpu_block_range(size_t n, int i, size_t *lo, size_t *hi)
{
	*lo = (size_t)i * CPU_ELEM_BLOCK;
	*hi = *lo + CPU_ELEM_BLOCK < n ? *lo + CPU_ELEM_BLOCK : n;
}

/* Filter gradients sum over items in up to this many parts per thread,
 * each into its own partial (in the scratch), added up in part order. A
 * partial costs a clearing and a reading of the whole dw, so each part
 * gets at least CPU_PART_PIXELS output pixels' worth of items, and there
 * are never fewer parts than threads (nor more than items). */
#define CPU_FILTER_PARTS 4
#define CPU_PART_PIXELS 2048

static inline int cpu_filter_parts(int threads, int items, long pixels)
{
	long p = pixels / CPU_PART_PIXELS;

	if (p < threads)
		p = threads;
	if (p > (long)CPU_FILTER_PARTS * threads)
		p = (long)CPU_FILTER_PARTS * threads;
	return p < items ? (int)p : items;
}

/* Scratch memory number t in [0, be->threads), at least the largest size
 * reserved so far: a thread's own (cpu_scratch(be, cpu_worker())), or
 * that of index t of a job over be->threads indices. */
float *cpu_scratch(cdp_backend *be, int t);
int cpu_scratch_reserve(cdp_backend *be, size_t bytes);
/* the bytes of each scratch (the largest reserved so far) */
size_t cpu_scratch_bytes(const cdp_backend *be);
/* Where be keeps cpu_conv_wino.c's forward U between calls, and its
 * release (cpu_destroy) */
void **cpu_wino_cache(cdp_backend *be);
void cpu_wino_cache_free(cdp_backend *be);
/* CDP_CPU_SPIN_US's value v (0 to 1000000 microseconds) into *us; -1 when
 * it is not such a number */
int cpu_spin_us_parse(const char *v, int *us);

/* The backend's private state (the pool, the scratch), zeroed; NULL when
 * out of memory. cpu_set_threads starts the pool, cpu_destroy frees it. */
void *cpu_impl_new(void);

/* One single-threaded row-major sgemm (what the parallel jobs call), in
 * be's precision. */
void cpu_sgemm1(const cdp_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Single-threaded kernels (cpu_gemm.c), in be's precision (fp32, or bf16
 * operands with fp32 sums: cpu_gemm_bf16.c):
 * nn: C (M,N) = A (M,K) B (K,N) + beta C, A[i,k] = a[i*rs + k*cs];
 * nt: C (M,N) += A (M,K) B^T, B (N,K); all row-major. */
void cpu_kgemm_nn(const cdp_backend *be, int m, int n, int k, const float *a, long rs, long cs,
                  const float *b, long ldb, float beta, float *c, long ldc);
void cpu_kgemm_nt(const cdp_backend *be, int m, int n, int k, const float *a, long lda,
                  const float *b, long ldb, float *c, long ldc);
/* The kernels' instruction set ("avx512bf16", "avx512", "avx2", "sse2"),
 * and a way for tests to use a lower one the CPU also has (-1 if it does
 * not). */
const char *cpu_kgemm_isa(void);
int cpu_kgemm_force(const char *isa);
/* Whether the chosen set is AVX-512 or above, so that vector code may take
 * 16 floats a vector (the Winograd transforms' wide loops, cpu_wino_vec.h);
 * a test that forces "avx2" on such a CPU gets the 8-wide loops. */
int cpu_kgemm_wide(void);
/* The bf16 kernels the chosen instruction set gives: "avx512bf16", or
 * "emulated" where it has none and CDP_CPU_BF16_EMU=1 (for tests), else
 * NULL (cpu_set_precision then refuses CDP_PREC_BF16). */
const char *cpu_kgemm_bf16(void);
/* For tests: use the bf16 set named ("amx", "avx512bf16",
 * "avx512bf16-fma", "emulated") whatever the defaults, or NULL: back to
 * them; -1 when the CPU cannot run it. */
int cpu_kgemm_bf16_force(const char *name);
/* Whether be's products take B of the _tab and _seg kernels as given, in
 * bf16 values (the avx512bf16-fma set: cpu_gemm_bf16r.c): the implicit
 * convolutions then round their slices as they fill them. */
int cpu_bf16_rounds_copies(const cdp_backend *be);
/* Whether be's bf16 products are VDPBF16PS's (the avx512bf16 set): then
 * Winograd's gemms take their filters packed (cpu_bf16f_nn_packed) and
 * round the transformed values, not the input (cpu_conv_wino.c), and the
 * implicit convolutions read a slice of pairs (cpu_conv_pairs.c). */
int cpu_bf16_packs_pairs(const cdp_backend *be);
/* be computes in bf16 with the "amx" set (cpu_conv_pairs.c's tiles) */
int cpu_bf16_uses_amx(const cdp_backend *be);
/* y[0..n) = x rounded to bf16 (y == x allowed) */
void cpu_bf16_round_run(float *y, const float *x, size_t n);
/* h[0..n) = x rounded to bf16, the bits (the stash's to_bf16, on the
 * calling thread) */
void cpu_bf16_narrow_run(uint16_t *h, const float *x, size_t n);
/* y[0..n) = the bf16 values h widened (exact: the stash's from_bf16, on
 * the calling thread) */
void cpu_bf16_widen_run(float *y, const uint16_t *h, size_t n);
/* y[0..n) = x, rounded to bf16 when rnd (cpu_bf16_rounds_copies): the
 * implicit convolutions' fills */
static inline void cpu_copy_operand(float *y, const float *x, size_t n, int rnd)
{
	if (rnd)
		cpu_bf16_round_run(y, x, n);
	else
		memcpy(y, x, n * sizeof *y);
}
/* The op number cpu_bf16_new_op advances */
unsigned long cpu_bf16_op(void);
/* The chosen instruction set's fp32 kernels, whatever be's precision */
void cpu_kgemm_fp32_nn(int, int, int, const float *, long, long, const float *, long, float,
                       float *, long);
void cpu_kgemm_fp32_nn_tab(int, int, int, const float *, long, long, const float *,
                           const long *, float, float *, long);
void cpu_kgemm_fp32_nt(int, int, int, const float *, long, const float *, long, float *, long);
void cpu_kgemm_fp32_nt_tab(int, int, int, const float *, long, const float *, const long *,
                           float *, long);
void cpu_kgemm_fp32_nt_seg(int, int, int, int, const float *, long, long, const float *,
                           const long *, long, float *, long);
/* Whether isa names one of this build's kernels (CDP_CPU_ISA's values);
 * names gets them as "avx512bf16, avx512, avx2 or sse2" either way. */
int cpu_kgemm_isa_known(const char *isa, char *names, size_t cap);
/* The same with B's row k at b + boff[k] (nn) or row j at b + boff[j] (nt). */
void cpu_kgemm_nn_tab(const cdp_backend *be, int m, int n, int k, const float *a, long rs,
                      long cs, const float *b, const long *boff, float beta, float *c, long ldc);
void cpu_kgemm_nt_tab(const cdp_backend *be, int m, int n, int k, const float *a, long lda,
                      const float *b, const long *boff, float *c, long ldc);
/* nt_tab over ns segments of seg floats: C (M,N) +=
 * sum over s, q of A[i, s*as + q] B[j, s*bs + q], A[i,.] at a + i*lda,
 * B[j,.] at b + boff[j] */
void cpu_kgemm_nt_seg(const cdp_backend *be, int m, int n, int ns, int seg, const float *a,
                      long lda, long as, const float *b, const long *boff, long bs, float *c,
                      long ldc);

/* The bf16 kernels (cpu_gemm_bf16.c), same arguments as the kernels above
 * without be: bf16e_ emulated in plain C (everywhere); bf16f_ with
 * AVX512_BF16 and bf16a_ with AMX where GCC has their intrinsics
 * (CPU_BF16_KERNELS). cpu_bf16_bits: x rounded to the nearest bf16 (ties
 * to even; a NaN stays a quiet NaN), its bits; cpu_bf16_round: the same
 * as a float. Inline: the Winograd filter gradient rounds dy with it. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 12
#define CPU_BF16_KERNELS 1
#endif
/* AMX-TILE and AMX-BF16 reported and granted by the kernel (asks once) */
int cpu_bf16_amx_usable(void);
/* This thread's tiles configured as the amx set's kernels use them (all
 * eight 16 rows of 64 bytes); -1 when out of memory */
int cpu_bf16_amx_tiles(void);
/* The avx512bf16 set's nn on A packed beforehand (Winograd's transformed
 * filters and inputs, cpu_conv_wino.c and cpu_conv_winof.c): row i of A
 * (M,K) is the pairs ap + i * k2, element 2p in the low half of pair p,
 * 2p + 1 in the high half, both rounded to bf16, the last one's high
 * half 0 when K is odd. cpu_bf16_pack_row packs a row of K floats into
 * cpu_bf16_pack_stride(k) pairs (zeros past K); cpu_bf16_pairs_inplace
 * turns a row of n floats into its pairs where it lies (n/2 rounded up,
 * rounded as VCVTNE2PS2BF16 rounds: denormals to 0, else the same; the
 * rest of the row is then junk); cpu_bf16_pack_run writes a row's n
 * values so rounded at h (n of them, h at x or not overlapping it). */
long cpu_bf16_pack_stride(int k);
void cpu_bf16_pack_row(int k, const float *a, uint32_t *ap);
void cpu_bf16_pairs_inplace(float *row, int n);
void cpu_bf16_pack_run(uint16_t *h, const float *x, int n);
void cpu_bf16f_nn_packed(int m, int n, int k, const uint32_t *ap, long k2, const float *b,
                         long ldb, float beta, float *c, long ldc);
/* The same with B given in pairs as well: pair p (rows 2p and 2p + 1,
 * the second 0 past K) at bp + p ldbp, the bits of cpu_bf16f_nn_packed
 * on B's floats. cpu_bf16_pair_run: d[j] = (r0[j],
 * r1[j]) rounded to bf16, as those pairs (r1 NULL: zeros), j < n. */
void cpu_bf16_nn_pp(int m, int n, int k, const uint32_t *ap, long k2, const uint32_t *bp,
                    long ldbp, float beta, float *c, long ldc);
void cpu_bf16_pair_run(const float *r0, const float *r1, int n, uint32_t *d);
/* The avx512bf16 set's C (M,N) = A (M,K) B (K,N) (A as cpu_kgemm_nn's,
 * row k of B at b + k ldb), M even, with C's rows in pairs zipped into
 * rows of their own: C[2r][j] at o, C[2r + 1][j] at o + 1, where
 * o = c + ctab[r] + (j / cpr) rstep + 2 (j % cpr) (cpr a multiple of 16
 * where N > cpr). The 2x2 stride-2 transposed convolution's forward
 * (cpu_conv.c): rows 2r and 2r + 1 are a window row's two taps, so its
 * output rows come out whole, with no column matrix and no col2im. The
 * sums are nn's, in the same order. -1 (nothing written) when A cannot
 * be packed (out of memory) or the shape is not one of these. */
int cpu_bf16f_nn_zip(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                     long ldb, float *c, const long *ctab, int cpr, long rstep);
/* Its converse for B: C (M,N) = A (M,K) B (K,N) + beta C (A as
 * cpu_kgemm_nn's), K even, where B's rows 2p and 2p + 1 are zipped in
 * memory: B[2p][j] at o, B[2p + 1][j] at o + 1, o = b + ptab[p] +
 * (j / cpr) rstep + 2 (j % cpr) (cpr as above). The same stride-2
 * windows' forward (the transposed convolution's data gradient): the two
 * taps of a window row are neighbours in the input row, so the pairs are
 * read as they lie, with no column matrix. nn's sums in the same order;
 * -1 (nothing written) as cpu_bf16f_nn_zip. */
int cpu_bf16f_nn_cp(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                    const long *ptab, int cpr, long rstep, float beta, float *c, long ldc);
static inline uint16_t cpu_bf16_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}
static inline float cpu_bf16_round(float x)
{
	uint32_t u = (uint32_t)cpu_bf16_bits(x) << 16;
	float f;

	memcpy(&f, &u, sizeof f);
	return f;
}
/* backend.h's to_bf16 / from_bf16 (cpu_bf16_stash.c), threaded by blocks */
void cpu_to_bf16(cdp_backend *be, const float *x, uint16_t *y, size_t n);
void cpu_from_bf16(cdp_backend *be, const uint16_t *x, float *y, size_t n);
/* Called by each op that runs bf16 products (conv_*, gemm) before them:
 * the packed A that a thread keeps between calls is valid within one op
 * only (a weight may change between ops). */
void cpu_bf16_new_op(void);
#define CPU_BF16_DECL(p) \
	void p##_nn(int, int, int, const float *, long, long, const float *, long, float, \
	            float *, long); \
	void p##_nn_tab(int, int, int, const float *, long, long, const float *, const long *, \
	                float, float *, long); \
	void p##_nt(int, int, int, const float *, long, const float *, long, float *, long); \
	void p##_nt_tab(int, int, int, const float *, long, const float *, const long *, \
	                float *, long); \
	void p##_nt_seg(int, int, int, int, const float *, long, long, const float *, \
	                const long *, long, float *, long);
CPU_BF16_DECL(cpu_bf16f)
CPU_BF16_DECL(cpu_bf16e)
CPU_BF16_DECL(cpu_bf16a)
CPU_BF16_DECL(cpu_bf16r)

/* ---- memory and BLAS-like (cpu_backend.c) ---- */
void *cpu_alloc(cdp_backend *be, size_t bytes);
void  cpu_free(cdp_backend *be, void *p);
void  cpu_to_device(cdp_backend *be, void *dst, const void *src, size_t bytes);
void  cpu_to_host(cdp_backend *be, void *dst, const void *src, size_t bytes);
void  cpu_copy(cdp_backend *be, void *dst, const void *src, size_t bytes);
void  cpu_sync(cdp_backend *be);
void  cpu_set_threads(cdp_backend *be, int n);
/* the data path and precision (cpu_data.c) */
void  cpu_data_ops(cdp_backend *be);
/* win_gather, win_blend (cpu_window.c) */
void  cpu_window_ops(cdp_backend *be);
void  cpu_destroy(cdp_backend *be);

void cpu_gemm(cdp_backend *be, int ta, int tb, int m, int n, int k,
              float alpha, const float *a, int lda, const float *b, int ldb,
              float beta, float *c, int ldc);
void cpu_fill(cdp_backend *be, float *x, float v, size_t n);
void cpu_scale(cdp_backend *be, float *x, float a, size_t n);
void cpu_axpy(cdp_backend *be, float a, const float *x, float *y, size_t n);
double cpu_sumsq(cdp_backend *be, const float *x, size_t n);

/* ---- convolution (cpu_conv.c) ---- */
size_t cpu_conv_workspace(cdp_backend *be, const cdp_conv_desc *d);
int cpu_conv_takes_xh(cdp_backend *be, const cdp_conv_desc *d);
int cpu_conv_takes_split(cdp_backend *be, const cdp_conv_desc *d);
int cpu_conv_writes_yh(cdp_backend *be, const cdp_conv_desc *d);
/* y: float, or bf16 with d->yh (cpu_conv_writes_yh) */
void cpu_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                  const float *w, const float *bias, void *y, void *ws);
void cpu_conv_fwd_bn(cdp_backend *be, const cdp_conv_desc *d, const void *x, const float *w,
                     const float *bias, const cdp_bn_infer *bn, float *y, void *ws);
/* What conv_fwd_bn applies to each block of output as it is written:
 * channel o's run y[0..n) = bn_fwd_infer of it, in place, in its
 * arithmetic (cpu_bn.c) */
void cpu_bn_post_run(const cdp_bn_infer *bn, int o, float *y, size_t n);
/* Its numbers for channel o: y = act((y - *m) * *a + *b), each operation
 * rounded on its own (no fused multiply-add), for kernels that apply it
 * to a vector before storing it */
void cpu_bn_post_coef(const cdp_bn_infer *bn, int o, float *m, float *a, float *b);
int cpu_conv_takes_dyh(cdp_backend *be, const cdp_conv_desc *d);
int cpu_conv_writes_dxh(cdp_backend *be, const cdp_conv_desc *d);
/* dy: float, or bf16 with d->dyh; dx: float, or bf16 with d->dxh */
void cpu_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const void *dy,
                       const float *w, void *dx, float beta, void *ws);
void cpu_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                         const void *dy, float *dw, float *dbias, void *ws);

/* column matrices (cpu_im2col.c): output rows [r0, r1) of one sample,
 * col (C*KH*KW, (r1-r0)*OW) <-> xn (C, H, W), col2im adding to xn (beta 1)
 * or overwriting it (beta 0); and the same over all N samples, col (K,
 * N*OH*OW), split over the threads. cpu_col2im_disjoint: every element of
 * xn lies in exactly one window (2x2 at stride 2 tiling it), so the rows
 * of different chunks do not overlap. */
void cpu_im2col_rows(const cdp_conv_desc *d, const float *xn, int r0, int r1, float *col);
void cpu_col2im_rows(const cdp_conv_desc *d, const float *col, int r0, int r1, float *xn,
                     float beta);
void cpu_im2col_all(cdp_backend *be, const cdp_conv_desc *d, const float *x, float *col);
void cpu_col2im_all(cdp_backend *be, const cdp_conv_desc *d, const float *col, float *dx,
                    float beta);
int cpu_col2im_disjoint(const cdp_conv_desc *d);

/* stride-1 convolution without im2col (cpu_conv_implicit.c), a plan of
 * cpu_conv.c: usable for stride 1, not 1x1, pad <= dil*(K-1); per-worker
 * scratch and caller workspace bytes; the three ops (ws: its workspace) */
int cpu_iconv_usable(const cdp_conv_desc *d);
size_t cpu_iconv_scratch(const cdp_backend *be, const cdp_conv_desc *d);
size_t cpu_iconv_workspace(const cdp_backend *be, const cdp_conv_desc *d);
/* x: float, or bf16 with d->xh; y: float, or bf16 with d->yh where
 * cpu_iconv_writes_h says so (no bn then) */
int cpu_iconv_writes_h(const cdp_backend *be, const cdp_conv_desc *d);
void cpu_iconv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                   const float *w, const float *bias, const cdp_bn_infer *bn, void *y,
                   void *ws);
/* dy: float, or bf16 with d->dyh where cpu_iconv_filter_takes_h says
 * both ops read it so; dx: float, or bf16 with d->dxh where
 * cpu_iconv_data_writes_h says so (beta 0) */
int cpu_iconv_filter_takes_h(const cdp_backend *be, const cdp_conv_desc *d);
int cpu_iconv_data_writes_h(const cdp_backend *be, const cdp_conv_desc *d);
void cpu_iconv_data(cdp_backend *be, const cdp_conv_desc *d, const void *dy,
                    const float *w, void *dx, float beta, void *ws);
void cpu_iconv_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                      const void *dy, float *dw, void *ws);

/* ---- other layer ops (cpu_bn.c, cpu_ops.c, cpu_elem.c) ---- */
int cpu_bn_pool_takes(cdp_backend *be, const cdp_pool_desc *d);
void cpu_bn_fwd_train_pool(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                           const float *gamma, const float *beta, float *run_mean,
                           float *run_var, float momentum, float eps, float *save_mean,
                           float *save_invstd, int act, float slope, const cdp_bn_pool *p);
void cpu_bn_bwd_pool(cdp_backend *be, int n, int c, int hw, const void *x, int h,
                     const float *gamma, const float *bn_beta, const float *save_mean,
                     const float *save_invstd, float eps, int act, float slope, void *dx,
                     float beta, float *dgamma, float *dbeta, const cdp_bn_pool *p);
void cpu_bn_fwd_train_h(cdp_backend *be, int n, int c, int hw, const float *x, uint16_t *xh,
                        const float *gamma, const float *beta, float *y, uint16_t *yh,
                        float *run_mean, float *run_var, float momentum, float eps,
                        float *save_mean, float *save_invstd, int act, float slope);
int cpu_bn_fwd_h_alone(cdp_backend *be);
void cpu_bn_fwd_train(cdp_backend *be, int n, int c, int hw, const float *x,
                      const float *gamma, const float *beta, float *y,
                      float *run_mean, float *run_var, float momentum, float eps,
                      float *save_mean, float *save_invstd, int act, float slope);
void cpu_bn_fwd_infer(cdp_backend *be, int n, int c, int hw, const float *x,
                      const float *gamma, const float *beta, float *y,
                      const float *run_mean, const float *run_var, float eps, int act,
                      float slope);
int cpu_bn_bwd_needs_y(cdp_backend *be);
int cpu_bn_takes_xh(cdp_backend *be);
int cpu_bn_takes_gh(cdp_backend *be);
void cpu_bn_bwd(cdp_backend *be, int n, int c, int hw, const void *x, int h, const float *y,
                void *dy, const float *gamma, const float *bn_beta, const float *save_mean,
                const float *save_invstd, float eps, int act, float slope, void *dx,
                float beta, float *dgamma, float *dbeta);
void cpu_bn_sums(cdp_backend *be, int n, int c, int hw, const float *x, const float *shift,
                 double *sums);
void cpu_bn_grad_sums(cdp_backend *be, int n, int c, int hw, const float *x, const float *dy,
                      const float *mean, const float *invstd, double *sums);
void cpu_bn_bwd_dx(cdp_backend *be, int n, int c, int hw, const float *x, const float *dy,
                   const float *gamma, const float *mean, const float *invstd, const float *m,
                   float *dx, float beta);
void cpu_act_fwd(cdp_backend *be, int kind, float slope, const float *x, float *y, size_t n);
void cpu_act_bwd(cdp_backend *be, int kind, float slope, const float *y,
                 const float *dy, float *dx, float beta, size_t n);
void cpu_maxpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y, int32_t *idx);
int cpu_maxpool_bwd_needs_xy(cdp_backend *be);
void cpu_maxpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, const float *y,
                     const float *dy, const int32_t *idx, float *dx, float beta);
void cpu_avgpool_fwd(cdp_backend *be, const cdp_pool_desc *d, const float *x, float *y);
void cpu_avgpool_bwd(cdp_backend *be, const cdp_pool_desc *d, const float *dy, float *dx, float beta);
void cpu_upsample_fwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *x, float *y);
void cpu_upsample_bwd(cdp_backend *be, int mode, int n, int c, int h, int w, int oh, int ow,
                      const float *dy, float *dx, float beta);
void cpu_chan_copy(cdp_backend *be, int n, int c, int hw, const float *src,
                   float *dst, int dst_c, int dst_off, float beta);
void cpu_chan_slice(cdp_backend *be, int n, int c, int hw, const float *src,
                    int src_c, int src_off, float *dst, float beta);
void cpu_dropout_fwd(cdp_backend *be, float p, uint64_t seed, const float *x, float *y, uint8_t *mask, size_t n);
void cpu_dropout_bwd(cdp_backend *be, float p, const uint8_t *mask, const float *dy, float *dx, float beta, size_t n);
void cpu_gap_fwd(cdp_backend *be, int n, int c, int hw, const float *x, float *y);
void cpu_gap_bwd(cdp_backend *be, int n, int c, int hw, const float *dy, float *dx, float beta);
void cpu_bias_add(cdp_backend *be, int n, int f, int hw, const float *bias, float *y);
void cpu_bias_grad(cdp_backend *be, int n, int f, int hw, const float *dy, float *dbias);
void cpu_add(cdp_backend *be, const float *a, const float *b, float *y, size_t n);
void cpu_diff_fwd(cdp_backend *be, int absval, const float *a, const float *b, float *y,
                  size_t n);
void cpu_diff_bwd(cdp_backend *be, int absval, const float *a, const float *b, const float *dy,
                  float sign, float *dx, float beta, size_t n);

/* ---- losses and metrics (cpu_loss.c, helper G) ---- */
double cpu_softmax_ce(cdp_backend *be, int n, int k, int hw, const float *logits,
                      const int32_t *labels, int ignore, const float *class_w,
                      float *dlogits, float gscale, double *count);
double cpu_bce_logits(cdp_backend *be, int n, int hw, const float *logits,
                      const int32_t *labels, int ignore, float *dlogits,
                      float gscale, double *count);
double cpu_dice_logits(cdp_backend *be, int n, int hw, const float *logits,
                       const int32_t *labels, int ignore, float smooth, const double *tot,
                       float *dlogits, float gscale);
void cpu_dice_sums(cdp_backend *be, int n, int hw, const float *logits,
                   const int32_t *labels, int ignore, double tot[3]);
double cpu_reg_loss(cdp_backend *be, int kind, int n, int t, int hw, const float *pred,
                    const float *target, float delta, float *dpred, float gscale,
                    double *count);
void cpu_argmax(cdp_backend *be, int n, int k, int hw, const float *logits, int32_t *pred);
void cpu_confusion(cdp_backend *be, int n_elems, int k, const int32_t *labels,
                   const int32_t *pred, int ignore, uint64_t *conf_host);

/* ---- sums in 16 double lanes (the global average pool, the bias
 * gradient) ---- */
/* lane[i % 16] += x[i] over a run of n values, as two vectors so that
 * GCC keeps the lanes in registers: one double sum in order was a chain
 * of dependent adds, 4 cycles a value. Each lane's order depends on n
 * alone. cpu_sum16_fold: the lanes halved pairwise into one sum. */
typedef float cpu_v8f __attribute__((vector_size(32), aligned(4)));
typedef double cpu_v8d __attribute__((vector_size(64)));

static inline void cpu_sum16_run(double lane[16], const float *x, size_t n)
{
	cpu_v8d lo, hi;                         /* lanes 0-7, 8-15 */
	size_t i = 0;

	memcpy(&lo, lane, sizeof lo);
	memcpy(&hi, lane + 8, sizeof hi);
	for (; i + 16 <= n; i += 16) {
		cpu_v8f a, b;
		memcpy(&a, x + i, sizeof a);
		memcpy(&b, x + i + 8, sizeof b);
		lo += __builtin_convertvector(a, cpu_v8d);
		hi += __builtin_convertvector(b, cpu_v8d);
	}
	memcpy(lane, &lo, sizeof lo);
	memcpy(lane + 8, &hi, sizeof hi);
	for (size_t l = 0; i + l < n; l++)
		lane[l] += x[i + l];
}

static inline double cpu_sum16_fold(double lane[16])
{
	for (int w = 8; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			lane[l] += lane[l + w];
	return lane[0];
}

/* ---- optimizers (cpu_optim.c, helper G) ---- */
void cpu_sgd_step(cdp_backend *be, float *w, const float *g, float *v, size_t n,
                  float lr, float mu, float wd, int nesterov, int first);
void cpu_adamw_step(cdp_backend *be, float *w, const float *g, float *m, float *v,
                    size_t n, float lr, float b1, float b2, float eps, float wd, long t);

#endif
