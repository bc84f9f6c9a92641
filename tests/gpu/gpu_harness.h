/* gpu_harness.h: one test body, two backends. The programs in tests/gpu run
 * every op on the CPU backend (the reference, side 0) and on the backend
 * under test (side 1) with the same inputs, then compare what both wrote.
 *
 * Side 1 is the CUDA backend on device CDP_GPU_TEST_DEVICE (default 0). With
 * CDP_GPU_TEST_PEER=cpu it is instead a second CPU backend at another thread
 * count, so the test bodies and the comparisons run on machines without a
 * GPU (tests/gpu/selfcheck.sh); that peer refuses fp16/tf32, and bf16 on a
 * CPU without AVX512_BF16 unless CDP_CPU_BF16_EMU=1 (tests/gpu/cpu_bf16.sh),
 * so those cases are skipped there and only there. With the peer,
 * CDP_GPU_TEST_BREAK=conv_bwd_filter|dropout_fwd|adamw_step makes that op
 * of side 1 slightly wrong, to show the comparisons fail, and
 * CDP_GPU_TEST_BREAK=abort makes side 1's conv_fwd abort, as a failed CUDA
 * call does, to show that stdout (line-buffered) keeps every result
 * printed before it. Without a GPU and
 * without the peer variable a program exits 77 (skip).
 *
 * A gh_buf is one buffer of the same size on each side; GH_BOTH runs its
 * statement once per side with `be` that side's backend, `s` its index:
 *     GH_BOTH(s, be)
 *         be->conv_fwd(be, &d, GF(x, s), GF(w, s), NULL, GF(y, s), ws[s]);
 *     gh_cmp("conv fwd", &y, ny, GH_TOL, NULL);
 *
 * The comparison (gh_relerr): the largest over elements of
 *     |dev_i - ref_i| / max(|ref_i|, floor),  floor = GH_FLOOR * max_j |ref_j|
 * The floor keeps elements that a sum left near zero by cancellation from
 * dominating: their absolute error is set by the magnitude of the terms,
 * which the largest output measures. NaN or Inf on either side fails.
 * Every comparison prints one line ("ok"/"FAIL", the error, the tolerance),
 * so a log from the GPU machine shows the margins, not just a verdict.
 */
#ifndef CDP_GPU_HARNESS_H
#define CDP_GPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "cdp_rng.h"

/* fp32: every side computes in IEEE float32, the two differ only in the
 * order of their sums. A sum accumulated term by term rounds each partial
 * sum, whose size grows as sqrt(k) a for terms of size ~a, so its error
 * grows as ~6e-8 K a / sqrt(2) while the largest output grows as sqrt(K) a:
 * measured against the floor at 1e-2 of the largest output the error grows
 * as sqrt(K). 1e-4 holds for sums of up to ~1e3 terms (convolutions'
 * forward and data gradient here); longer ones (a filter gradient sums
 * N*OH*OW terms: 15000 at 1x100x150, where sequential float32 sums alone
 * measure 1.3e-4 against float64, as CUDA against the CPU did on an H200)
 * take gh_sum_tol(K). An indexing or semantic mistake gives errors of
 * order 1. */
#define GH_TOL   1e-4
#define GH_FLOOR 1e-2

/* The fp32 tolerance of sums of k terms: GH_TOL, or 4e-6 sqrt(k) when that
 * is larger (3x the float32-against-float64 error above at k = 15000). */
static inline double gh_sum_tol(size_t k)
{
	double t = 4e-6 * __builtin_sqrt((double)k);
	return t > GH_TOL ? t : GH_TOL;
}

enum { GH_REF = 0, GH_DEV = 1 };

typedef struct gh_buf {
	void *p[2];
	size_t bytes;
} gh_buf;

extern cdp_backend *gh_be[2];
extern const char *gh_peer;      /* "cuda" or "cpu" */
extern cdp_rng gh_rng;           /* seeded by CDP_GPU_TEST_SEED (printed) */

#define GH_BOTH(s, be) \
	for (int s = 0; s < 2; s++) \
		for (cdp_backend *be = gh_be[s]; be; be = NULL)
#define GF(b, s)  ((float *)(b).p[s])
#define GI(b, s)  ((int32_t *)(b).p[s])
#define GU8(b, s) ((uint8_t *)(b).p[s])

/* CHECK with tap.h's counters, for the several files of one program. */
void gh_check(int ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define GCHECK(cond, ...) gh_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* Opens both sides; 0, or the exit code to return at once (77: skip, 99:
 * the harness could not start). ref_threads: the reference's threads. */
int  gh_open(const char *prog, int ref_threads);
/* Why cdp_cuda_device_count() is 0: the CUDA runtime's error string
 * ("no CUDA-capable device is detected", "CUDA driver version is
 * insufficient for CUDA runtime version", ...), for the skip message. */
const char *gh_no_device_why(void);
/* Closes both sides and returns tap_done()'s exit code. */
int  gh_close(void);

gh_buf gh_alloc(size_t bytes);                 /* zeroed on both sides */
gh_buf gh_from(const void *host, size_t bytes);
gh_buf gh_rand(size_t n, float lo, float hi);  /* uniform floats, the same on both */
void   gh_free(gh_buf *b);
/* A malloc'd host copy of side s (after be->sync). */
void  *gh_host(const gh_buf *b, int s);
/* Writes host bytes into both sides. */
void   gh_set(gh_buf *b, const void *host, size_t bytes);

/* A uniform int in [lo, hi] from gh_rng (random shapes). */
int    gh_int(int lo, int hi);

/* Pure: the error measure above of n floats against ref; *at (may be NULL)
 * gets the worst index. +Inf when either side is not finite. */
double gh_relerr(const float *a, const float *ref, size_t n, double floor_frac, size_t *at);
/* Compares the first n floats of b, side 1 against side 0. Returns the
 * error; a CHECK fails when it exceeds tol. */
double gh_cmp(const char *what, const gh_buf *b, size_t n, double tol);
/* The same with another floor (GH_FLOOR above; 1 for "relative to the
 * largest value", as the reduced-precision tolerances are stated). */
double gh_cmp_floor(const char *what, const gh_buf *b, size_t n, double tol, double floor_frac);
/* Bytes must be equal (masks, labels, moves). */
int    gh_cmp_exact(const char *what, const gh_buf *b, size_t bytes);
/* Host arrays: n floats of dev against ref. */
double gh_cmp_host(const char *what, const float *dev, const float *ref, size_t n, double tol,
                   double floor_frac);
/* Two scalars: |dev - ref| <= tol * max(|ref|, floor_abs). */
int    gh_cmp_scalar(const char *what, double dev, double ref, double tol, double floor_abs);

/* Sets side 1's precision (side 0 stays fp32). Returns 0, or -1 when the
 * side-1 backend refuses it: a failure on CUDA, an expected skip (printed)
 * on the CPU peer. */
int  gh_precision(int prec, const char *what);
const char *gh_prec_name(int prec);

#endif
