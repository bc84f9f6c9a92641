/* kernel_check.cpp: every launcher of engine/cuda/cuda_kern.h, run on
 * the host by the emulator (emu.h, after mkemu.py's rewrite), against the
 * CPU backend's op of the same name (through its cdp_backend table, the
 * reference), on random shapes and data. Built and run by
 * tests/gpu/kernel_emu.sh; the kernels' arithmetic on a real GPU is
 * tests/gpu/test_ops's business (emu.h says what the emulator leaves out).
 *
 * Tolerances follow what cuda_kern.h promises. Bitwise: the elementwise
 * ops, upsampling, channel slices, dropout (mask too), pooling (and its
 * argmax), argmax, confusion, the optimizers, the half staging (against
 * cuda_fp16.h / cuda_bf16.h's host conversions), prep_batch, the window
 * gather and blend (cdp-predict's), and the per-pixel loss gradients (the
 * blend and the gradients only here: the emulated kernels call the same
 * host exp and log as the CPU backend, a GPU its own). The double sums add in another, fixed order than the
 * CPU: a total of n terms within n * 2^-52 relative (sum_tol; the worst
 * case for terms of one sign, which sumsq's, the losses' and the counts'
 * are; Dice's loss, a ratio of two totals, 4 times that), float results of
 * a double sum within 2e-7 relative (gap_fwd: one float rounding) or 1e-6
 * (bias_grad, whose dbias accumulates a float; Dice's gradient, which
 * depends on the totals).
 *
 * First it checks the emulator itself (shuffles, barriers, poisoned shared
 * memory, launch limits, deadlock detection), so a broken emulator cannot
 * pass the kernels. Seed: CDP_GPU_TEST_SEED (default 20250601), printed.
 * Output: "FAIL name: ..." per failed comparison, one line per group, a
 * summary. Arguments name the groups to run (default: all; mutate.sh
 * runs one). Exit 0 all passed, 1 a comparison failed, 99 harness error.
 */
#include <float.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <string>
#include <vector>
#include "emu.h"
extern "C" {
#include "cdp_dtype.h"
#include "cdp_num.h"
#include "cdp_rng.h"
#include "cpu.h"
}
#include "emu_kernels.inc"

static int checks, fails;
static cdp_rng rng;
static cdp_backend *be;

static int rint_(int lo, int hi) { return lo + (int)cdp_rng_below(&rng, (uint64_t)(hi - lo + 1)); }
static float rf(float lo, float hi) { return lo + (hi - lo) * cdp_rng_float(&rng); }

static std::vector<float> rvec(size_t n, float lo = -3, float hi = 3)
{
	std::vector<float> v(n);
	for (auto &x : v)
		x = rf(lo, hi);
	return v;
}

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
	char b[256];
	va_list ap;

	va_start(ap, f);
	vsnprintf(b, sizeof b, f, ap);
	va_end(ap);
	return b;
}

/* one comparison: ok when bad == 0; what says how it failed */
static void report(const std::string &name, long bad, const std::string &what = "")
{
	checks++;
	if (!bad)
		return;
	fails++;
	printf("FAIL %s: %s\n", name.c_str(), what.c_str());
}

/* got (emulated kernel) against want (CPU), element by element: bitwise
 * when tol < 0 (any NaN equals any NaN), else within tol of max(scale, |want|)
 * (scale: the size the batch sets, for values near 0) */
static void cmp(const std::string &name, const float *got, const float *want, size_t n,
                double tol = -1, double scale = 1e-6)
{
	long bad = 0;
	size_t first = 0;

	for (size_t i = 0; i < n; i++) {
		float a = got[i], b = want[i];
		int same;
		if (a != a || b != b)
			same = a != a && b != b;
		else if (tol < 0)
			same = memcmp(&a, &b, sizeof a) == 0;
		else
			same = fabs((double)a - b) <= tol * fmax(scale, fabs((double)b));
		if (!same && !bad++)
			first = i;
	}
	report(name, bad, bad ? fmt("%ld of %zu values differ, first [%zu]: emulated %.9g, cpu %.9g",
	                            bad, n, first, got[first], want[first]) : "");
}

/* relative tolerance for a double sum of n terms of one sign added in
 * another order: n roundings of at most 2^-53 of the total each, twice */
static double sum_tol(size_t n)
{
	return fmax(1e-15, (double)n * DBL_EPSILON);
}

static void cmp_d(const std::string &name, double got, double want, double tol)
{
	double d = got == want ? 0 : fabs(got - want) / fmax(1e-300, fmax(fabs(got), fabs(want)));
	report(name, !(d <= tol), fmt("emulated %.17g, cpu %.17g (relative %.3g > %g)", got, want, d, tol));
}

template <typename T>
static void cmp_mem(const std::string &name, const T *got, const T *want, size_t n)
{
	size_t i = 0;

	while (i < n && memcmp(&got[i], &want[i], sizeof(T)) == 0)
		i++;
	report(name, i < n, i < n ? fmt("first difference at [%zu] of %zu: emulated %lld, cpu %lld", i,
	                                 n, (long long)got[i], (long long)want[i]) : "");
}

static std::vector<unsigned char> scratch_v;
static void *scratch(size_t n)
{
	scratch_v.assign(cdk_reduce_scratch_bytes(n), 0x7f);   /* garbage the kernels must overwrite */
	return scratch_v.data();
}

/* the same for a launcher that states its scratch in bytes */
static void *scratch_bytes(size_t bytes)
{
	scratch_v.assign(bytes, 0x7f);
	return scratch_v.data();
}

#include "kernel_check_emu.h"
#include "kernel_check_ops.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* kernel_check [GROUP...]: the named groups (default all) */
int main(int argc, char **argv)
{
	static const struct { const char *name; void (*fn)(void); } groups[] = {
		{ "emulator", t_emu }, { "elementwise", t_elem }, { "layers", t_layers }, { "batchnorm1", t_bn1 },
		{ "bn_train", t_bn_train }, { "deconv2", t_deconv2 },
		{ "bn_sync", t_bn_sync }, { "bias_grad", t_bias_grad }, { "dropout", t_dropout }, { "maxpool", t_pool },
		{ "losses", t_loss }, { "optimizers", t_optim }, { "half", t_prec },
		{ "prep_batch", t_data }, { "windows", t_window },
	};
	const char *sd = getenv("CDP_GPU_TEST_SEED");
	uint64_t seed = 20250601;

	for (int i = 1; i < argc; i++) {
		int known = 0;
		for (const auto &g : groups)
			known |= !strcmp(argv[i], g.name);
		if (!known) {
			fprintf(stderr, "kernel_check: no group '%s'; groups:", argv[i]);
			for (const auto &g : groups)
				fprintf(stderr, " '%s'", g.name);
			fputc('\n', stderr);
			return 99;
		}
	}
	if (sd && cdp_parse_u64(sd, 0, UINT64_MAX, &seed) != 0) {
		fprintf(stderr, "kernel_check: bad CDP_GPU_TEST_SEED '%s'\n", sd);
		return 99;
	}
	cdp_rng_seed(&rng, seed);
	printf("# kernel_check: engine/cuda kernels, emulated, against the cpu backend; "
	       "seed %llu (CDP_GPU_TEST_SEED)\n", (unsigned long long)seed);
	be = cdp_backend_cpu(1);
	if (!be) {
		fprintf(stderr, "kernel_check: cannot start the CPU backend\n");
		return 99;
	}
	for (const auto &g : groups) {
		int c0 = checks, f0 = fails, wanted = argc == 1;
		for (int i = 1; i < argc; i++)
			wanted |= !strcmp(argv[i], g.name);
		if (!wanted)
			continue;
		double t0 = now();
		g.fn();
		printf("%s %s: %d checks, %d failed (%.1f s)\n", fails > f0 ? "FAIL" : "ok  ", g.name,
		       checks - c0, fails - f0, now() - t0);
		fflush(stdout);
	}
	be->destroy(be);
	printf("# kernel_check: %d checks, %d failed; %ld launches, %ld blocks, %ld thread switches\n",
	       checks, fails, emu.launches, emu.blocks, emu.switches);
	return fails ? 1 : 0;
}
