/* cpu_gemm.c: single-threaded sgemm kernels for the shapes convolutions
 * make: few rows (the filters, 16..256), long rows of pixels.
 *
 * OpenBLAS (0.3.21 measured on an AVX-512 Xeon) packs both operands on
 * every call, which for M = 16 costs more than the arithmetic: these
 * shapes ran at a quarter of its large-matrix speed, and the kernels here
 * at 3-4 times OpenBLAS's speed. They need no packing, because the
 * convolution code hands them cache-sized blocks (cpu_conv.c):
 *
 *  cpu_kgemm_nn: C (M,N) = A (M,K) B (K,N) + beta C. A is read through
 *    strides (A[i,k] = a[i*rs + k*cs]), so A^T needs no copy; B and C are
 *    row-major. Register tile (AVX-512): 8 rows x 32 columns of C in 16
 *    vectors; each step of k loads 2 vectors of B's row k and broadcasts 8
 *    values of A's column k, for 16 FMAs. k runs in blocks of 128 so the B
 *    panel (128 x 32) stays in L1.
 *  cpu_kgemm_nt: C (M,N) += A (M,K) B^T with rows of A and B contiguous
 *    along K (the filter gradient: a sum over pixels). Register tile
 *    (AVX-512): 4 x 6 dot products, each a vector of partial sums over k,
 *    added up at the end of each block of NT_KC values of k (the tile's
 *    B rows stay in L1 while the rows of A stream past).
 * The _tab variants take B's rows from a table of offsets instead of a
 * stride (row k of B at b + boff[k]): the implicit convolution
 * (cpu_conv_implicit.c) points them at shifted views of its input.
 *  cpu_kgemm_nt_seg: nt_tab with the sum over k cut into segments that
 *    lie at their own strides in A and in B (whole samples of dy and of
 *    the convolution's input slice), so neither is copied; its order of
 *    summation is set by the number and length of segments.
 *
 * cpu_gemm_kern.h holds the kernels for one vector width; it is compiled
 * here for AVX-512 (16 floats), AVX2+FMA (8) and SSE2 (4, every x86-64),
 * and the first call picks the best the CPU has (CDP_CPU_ISA=avx512, avx2
 * or sse2 in the environment caps it). "avx512bf16" is the AVX-512 set on
 * a CPU that also has AVX512_BF16: its bf16 kernels (cpu_gemm_bf16.c, or
 * with CDP_CPU_BF16=fma, the default on Intel, cpu_gemm_bf16r.c's rounded
 * operands for this file's kernels) serve
 * a backend in CDP_PREC_BF16; capped below it, bf16 is refused (or, with
 * CDP_CPU_BF16_EMU=1, for tests only, emulated in plain C). Every element of C is summed in a fixed
 * order that depends only on K and the instruction set (not on M, N, the
 * tile or the thread that computes it).
 */
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "cpu.h"

#define KC 128
#define NN_PACK_M 32         /* rows of C from which nn packs B's blocks */
#ifndef NT_KC
#define NT_KC 1024           /* a multiple of every VW */
#endif

/* The ISA-specific kernels use GCC's target pragmas; other compilers build the
 * baseline kernel only. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
#define CDP_X86 1
#endif

#ifdef CDP_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
#define KNAME(x) x##_avx512
#define VW 16
#define NN_MR 8
#define NN_NV 2
#define NT_MR 4
#define NT_NR 6
#include "cpu_gemm_kern.h"
#undef KNAME
#undef VW
#undef NN_MR
#undef NN_NV
#undef NT_MR
#undef NT_NR
#pragma GCC pop_options

#pragma GCC push_options
/* tune=haswell: generic tuning would split each unaligned 256-bit load */
#pragma GCC target("avx2,fma,tune=haswell")
#define KNAME(x) x##_avx2
#define VW 8
#define NN_MR 6
#define NN_NV 2
#define NT_MR 3
#define NT_NR 3
#include "cpu_gemm_kern.h"
#undef KNAME
#undef VW
#undef NN_MR
#undef NN_NV
#undef NT_MR
#undef NT_NR
#pragma GCC pop_options
#endif

/* the baseline: SSE2 on x86-64; elsewhere 4-float vectors of the target */
#define KNAME(x) x##_sse2
#define VW 4
#define NN_MR 6
#define NN_NV 2
#define NT_MR 3
#define NT_NR 3
#include "cpu_gemm_kern.h"
#undef KNAME
#undef VW
#undef NN_MR
#undef NN_NV
#undef NT_MR
#undef NT_NR

typedef struct kernels kernels;
struct kernels {
	const char *isa;
	int (*usable)(void);
	void (*nn)(int, int, int, const float *, long, long, const float *, long, float, float *, long);
	void (*nn_tab)(int, int, int, const float *, long, long, const float *, const long *,
	               float, float *, long);
	void (*nt)(int, int, int, const float *, long, const float *, long, float *, long);
	void (*nt_tab)(int, int, int, const float *, long, const float *, const long *, float *, long);
	void (*nt_seg)(int, int, int, int, const float *, long, long, const float *, const long *,
	               long, float *, long);
	const kernels *bf16;     /* CDP_PREC_BF16's set with these, or NULL */
};

/* the bf16 sets (cpu_gemm_bf16.c) */
#ifdef CPU_BF16_KERNELS
static const kernels bf16_fast = { "avx512bf16", NULL, cpu_bf16f_nn, cpu_bf16f_nn_tab,
	cpu_bf16f_nt, cpu_bf16f_nt_tab, cpu_bf16f_nt_seg, NULL };
static const kernels bf16_amx = { "amx", NULL, cpu_bf16a_nn, cpu_bf16a_nn_tab,
	cpu_bf16a_nt, cpu_bf16a_nt_tab, cpu_bf16a_nt_seg, NULL };
/* cpu_gemm_bf16r.c: the fp32 kernels on operands rounded to bf16 */
static const kernels bf16_fma = { "avx512bf16-fma", NULL, cpu_bf16r_nn, cpu_bf16r_nn_tab,
	cpu_bf16r_nt, cpu_bf16r_nt_tab, cpu_bf16r_nt_seg, NULL };
#endif
static const kernels bf16_emulated = { "emulated", NULL, cpu_bf16e_nn, cpu_bf16e_nn_tab,
	cpu_bf16e_nt, cpu_bf16e_nt_tab, cpu_bf16e_nt_seg, NULL };

static int has_sse2(void) { return 1; }

/* best first */
#ifdef CDP_X86
static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#ifdef CPU_BF16_KERNELS
static int has_avx512bf16(void)
{
	return __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
}
static int has_amx(void) { return has_avx512bf16() && cpu_bf16_amx_usable(); }
#endif
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

static const kernels table[] = {
#ifdef CPU_BF16_KERNELS
	{ "amx", has_amx, nn_avx512, nn_tab_avx512, nt_avx512, nt_tab_avx512,
	  nt_seg_avx512, &bf16_amx },
	{ "avx512bf16", has_avx512bf16, nn_avx512, nn_tab_avx512, nt_avx512, nt_tab_avx512,
	  nt_seg_avx512, &bf16_fast },
#endif
	{ "avx512", has_avx512, nn_avx512, nn_tab_avx512, nt_avx512, nt_tab_avx512,
	  nt_seg_avx512, NULL },
	{ "avx2", has_avx2, nn_avx2, nn_tab_avx2, nt_avx2, nt_tab_avx2, nt_seg_avx2, NULL },
	{ "sse2", has_sse2, nn_sse2, nn_tab_sse2, nt_sse2, nt_tab_sse2, nt_seg_sse2, NULL },
};
#else
static const kernels table[] = {
	{ "sse2", has_sse2, nn_sse2, nn_tab_sse2, nt_sse2, nt_tab_sse2, nt_seg_sse2, NULL },
};
#endif
#define NKERNELS ((int)(sizeof table / sizeof table[0]))

static const kernels *chosen;
/* chosen's isa is avx512 or above (cpu_kgemm_wide), set with it: a compare
 * of names per call took 0.7% of a classifier step */
static int chosen_wide;

static void set_chosen(const kernels *k)
{
	chosen = k;
	chosen_wide = strncmp(k->isa, "avx512", 6) == 0 || strcmp(k->isa, "amx") == 0;
}
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;
#ifdef CPU_BF16_KERNELS
static int bf16_fma_pref;               /* bf16_fma_wanted(), read once */
static int bf16_fma_wanted(void);
#endif

static void choose(void)
{
	const char *cap = getenv("CDP_CPU_ISA");
	int from = 0;

#ifdef CDP_X86
	__builtin_cpu_init();
#endif
	for (int i = 0; cap && i < NKERNELS; i++)
		if (strcmp(cap, table[i].isa) == 0)
			from = i;
	for (int i = from; i < NKERNELS && !chosen; i++)
		if (table[i].usable())
			set_chosen(&table[i]);
#ifdef CPU_BF16_KERNELS
	bf16_fma_pref = bf16_fma_wanted();
#endif
}

static const kernels *kern(void)
{
	pthread_once(&chosen_once, choose);
	return chosen;
}

int cpu_kgemm_isa_known(const char *isa, char *names, size_t cap)
{
	size_t len = 0;
	int known = 0;

	if (cap)
		names[0] = '\0';
	for (int i = 0; i < NKERNELS; i++) {
		known |= strcmp(isa, table[i].isa) == 0;
		if (len < cap)
			len += (size_t)snprintf(names + len, cap - len, "%s%s", i == 0 ? "" :
			                        i == NKERNELS - 1 ? " or " : ", ", table[i].isa);
	}
	return known;
}

const char *cpu_kgemm_isa(void)
{
	return kern()->isa;
}

int cpu_kgemm_wide(void)
{
	kern();
	return chosen_wide;
}

int cpu_kgemm_force(const char *isa)
{
	kern();
	for (int i = 0; i < NKERNELS; i++)
		if (strcmp(isa, table[i].isa) == 0 && table[i].usable()) {
			set_chosen(&table[i]);
			return 0;
		}
	return -1;
}

static const kernels *bf16_forced;     /* cpu_kgemm_bf16_force */

/* With AVX512_BF16 and no AMX in use, which products: VDPBF16PS's ("dp",
 * the avx512bf16 set) or FMAs on rounded operands ("fma", the
 * avx512bf16-fma set). CDP_CPU_BF16=dp|fma says; by default fma on Intel
 * CPUs, whose VDPBF16PS issues at half the rate of an FMA (Sapphire and
 * Emerald Rapids measured, doc/PERFORMANCE.md), dp elsewhere (AMD Zen 4/5
 * issue it like an FMA, so its two products per lane halve the work). A
 * fixed rule, not a timing at start-up: the choice sets the order of the
 * sums, so two runs on one machine must make the same one. Read once with
 * the instruction set (choose), not on every kernel call. */
#ifdef CPU_BF16_KERNELS
static int bf16_fma_wanted(void)
{
	const char *e = getenv("CDP_CPU_BF16");

	if (e && strcmp(e, "fma") == 0)
		return 1;
	if (e && strcmp(e, "dp") == 0)
		return 0;
	return __builtin_cpu_is("intel");
}
#endif

/* The bf16 set for the chosen instruction set: its own (amx, avx512bf16
 * or avx512bf16-fma), else the emulated one (allowed by cpu_set_precision
 * only with CDP_CPU_BF16_EMU=1). */
static const kernels *bf16_set(void)
{
	const kernels *k = kern();

	if (bf16_forced)
		return bf16_forced;
#ifdef CPU_BF16_KERNELS
	if (k->bf16 == &bf16_fast && bf16_fma_pref)
		return &bf16_fma;
#endif
	return k->bf16 ? k->bf16 : &bf16_emulated;
}

/* The set for be's precision: the fp32 kernels, or bf16_set(). */
static const kernels *kset(const cdp_backend *be)
{
	return be->precision != CDP_PREC_BF16 ? kern() : bf16_set();
}

const char *cpu_kgemm_bf16(void)
{
	const char *emu = getenv("CDP_CPU_BF16_EMU");

	if (bf16_forced || kern()->bf16)
		return bf16_set()->isa;
	return emu && strcmp(emu, "1") == 0 ? bf16_emulated.isa : NULL;
}

int cpu_kgemm_bf16_force(const char *name)
{
	const kernels *sets[] = {
#ifdef CPU_BF16_KERNELS
		&bf16_amx, &bf16_fast, &bf16_fma,
#endif
		&bf16_emulated };

	kern();
	if (!name) {
		bf16_forced = NULL;
		return 0;
	}
	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		if (strcmp(name, sets[i]->isa) != 0)
			continue;
#ifdef CPU_BF16_KERNELS
		if (sets[i] == &bf16_amx ? !has_amx() : sets[i] != &bf16_emulated && !has_avx512bf16())
			return -1;
#endif
		bf16_forced = sets[i];
		return 0;
	}
	return -1;
}

int cpu_bf16_rounds_copies(const cdp_backend *be)
{
#ifdef CPU_BF16_KERNELS
	return be->precision == CDP_PREC_BF16 && bf16_set() == &bf16_fma;
#else
	return 0;
#endif
}

int cpu_bf16_packs_pairs(const cdp_backend *be)
{
#ifdef CPU_BF16_KERNELS
	return be->precision == CDP_PREC_BF16 && bf16_set() == &bf16_fast;
#else
	(void)be;
	return 0;
#endif
}

int cpu_bf16_uses_amx(const cdp_backend *be)
{
#ifdef CPU_BF16_KERNELS
	return be->precision == CDP_PREC_BF16 && bf16_set() == &bf16_amx;
#else
	(void)be;
	return 0;
#endif
}

/* The fp32 kernels of the chosen instruction set (cpu_gemm_bf16r.c) */
void cpu_kgemm_fp32_nn(int m, int n, int k, const float *a, long rs, long cs, const float *b,
                       long ldb, float beta, float *c, long ldc)
{
	kern()->nn(m, n, k, a, rs, cs, b, ldb, beta, c, ldc);
}

void cpu_kgemm_fp32_nn_tab(int m, int n, int k, const float *a, long rs, long cs,
                           const float *b, const long *boff, float beta, float *c, long ldc)
{
	kern()->nn_tab(m, n, k, a, rs, cs, b, boff, beta, c, ldc);
}

void cpu_kgemm_fp32_nt(int m, int n, int k, const float *a, long lda, const float *b, long ldb,
                       float *c, long ldc)
{
	kern()->nt(m, n, k, a, lda, b, ldb, c, ldc);
}

void cpu_kgemm_fp32_nt_tab(int m, int n, int k, const float *a, long lda, const float *b,
                           const long *boff, float *c, long ldc)
{
	kern()->nt_tab(m, n, k, a, lda, b, boff, c, ldc);
}

void cpu_kgemm_fp32_nt_seg(int m, int n, int ns, int seg, const float *a, long lda, long as,
                           const float *b, const long *boff, long bs, float *c, long ldc)
{
	kern()->nt_seg(m, n, ns, seg, a, lda, as, b, boff, bs, c, ldc);
}

void cpu_kgemm_nn(const cdp_backend *be, int m, int n, int k, const float *a, long rs, long cs,
                  const float *b, long ldb, float beta, float *c, long ldc)
{
	kset(be)->nn(m, n, k, a, rs, cs, b, ldb, beta, c, ldc);
}

void cpu_kgemm_nn_tab(const cdp_backend *be, int m, int n, int k, const float *a, long rs,
                      long cs, const float *b, const long *boff, float beta, float *c, long ldc)
{
	kset(be)->nn_tab(m, n, k, a, rs, cs, b, boff, beta, c, ldc);
}

void cpu_kgemm_nt(const cdp_backend *be, int m, int n, int k, const float *a, long lda,
                  const float *b, long ldb, float *c, long ldc)
{
	kset(be)->nt(m, n, k, a, lda, b, ldb, c, ldc);
}

void cpu_kgemm_nt_tab(const cdp_backend *be, int m, int n, int k, const float *a, long lda,
                      const float *b, const long *boff, float *c, long ldc)
{
	kset(be)->nt_tab(m, n, k, a, lda, b, boff, c, ldc);
}

void cpu_kgemm_nt_seg(const cdp_backend *be, int m, int n, int ns, int seg, const float *a,
                      long lda, long as, const float *b, const long *boff, long bs, float *c,
                      long ldc)
{
	kset(be)->nt_seg(m, n, ns, seg, a, lda, as, b, boff, bs, c, ldc);
}
