/* gpu_harness.c: the two-backend harness of tests/gpu (gpu_harness.h). */
#include <config.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_num.h"
#include "gpu_harness.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

cdp_backend *gh_be[2];
const char *gh_peer = "cuda";
cdp_rng gh_rng;
static const char *gh_prog = "gpu test";

void gh_check(int ok, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_checks++;
	if (ok)
		return;
	tap_failed++;
	fprintf(stderr, "%s:%d: check failed: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* An allocation failure leaves nothing to compare: a harness error. */
static void *need(void *p, size_t bytes, int s)
{
	if (!p && bytes) {
		fprintf(stderr, "%s: cannot allocate %zu bytes on side %d (%s)\n", gh_prog, bytes, s,
		        gh_be[s]->name);
		exit(99);
	}
	return p;
}

/* The comparison must be able to fail: a result off by 1e-3 in one
 * element, a NaN, a wrong sign near zero and an all-zero reference. */
static void selftest(void)
{
	float ref[4] = { 1.0f, -2.0f, 0.5f, 1e-4f }, a[4], z[2] = { 0, 0 }, nz[2] = { 0, 1e-20f };

	memcpy(a, ref, sizeof a);
	GCHECK(gh_relerr(a, ref, 4, GH_FLOOR, NULL) == 0, "equal arrays compare as 0");
	a[1] = -2.002f;
	GCHECK(gh_relerr(a, ref, 4, GH_FLOOR, NULL) > GH_TOL, "a 1e-3 error is caught");
	a[1] = ref[1];
	a[3] = -1e-4f;   /* below the floor (2e-2): an error of 1e-2 of the floor */
	GCHECK(gh_relerr(a, ref, 4, GH_FLOOR, NULL) > GH_TOL &&
	       gh_relerr(a, ref, 4, GH_FLOOR, NULL) < 0.02, "the floor scales errors near zero");
	a[3] = NAN;
	GCHECK(gh_relerr(a, ref, 4, GH_FLOOR, NULL) == INFINITY, "NaN fails");
	GCHECK(gh_relerr(nz, z, 2, GH_FLOOR, NULL) > 1, "an all-zero reference needs zeros");
}

/* CDP_GPU_TEST_BREAK=OP (CPU peer only): side 1's OP is made slightly
 * wrong, so that selfcheck.sh can see the comparisons catch it: a filter
 * gradient off by 1e-3 in one element, one dropout mask bit flipped, an
 * AdamW step with lr 0.1% too large. */
static void (*real_bwd_filter)(cdp_backend *, const cdp_conv_desc *, const void *, const void *,
                               float *, float *, void *);
static void (*real_dropout)(cdp_backend *, float, uint64_t, const float *, float *, uint8_t *,
                            size_t);
static void (*real_adamw)(cdp_backend *, float *, const float *, float *, float *, size_t, float,
                          float, float, float, float, long);

static void broken_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                              const void *dy, float *dw, float *dbias, void *ws)
{
	real_bwd_filter(be, d, x, dy, dw, dbias, ws);
	dw[0] = dw[0] * 1.001f + 1e-3f;
}

static void broken_dropout(cdp_backend *be, float p, uint64_t seed, const float *x, float *y,
                           uint8_t *mask, size_t n)
{
	real_dropout(be, p, seed, x, y, mask, n);
	mask[n / 2] ^= 1;
}

static void broken_adamw(cdp_backend *be, float *w, const float *g, float *m, float *v, size_t n,
                         float lr, float b1, float b2, float eps, float wd, long t)
{
	real_adamw(be, w, g, m, v, n, lr * 1.001f, b1, b2, eps, wd, t);
}

/* "abort": side 1's conv_fwd aborts at once, as a failed CUDA call does,
 * without flushing anything itself (selfcheck.sh: every line printed before
 * it must still be in the log) */
static void aborting_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                              const float *w, const float *bias, void *y, void *ws)
{
	(void)be, (void)d, (void)x, (void)w, (void)bias, (void)y, (void)ws;
	fprintf(stderr, "%s: CDP_GPU_TEST_BREAK=abort: conv_fwd aborts\n", gh_prog);
	abort();
}

static int break_op(cdp_backend *be, const char *op)
{
	if (!strcmp(op, "abort")) {
		be->conv_fwd = aborting_conv_fwd;
	} else if (!strcmp(op, "conv_bwd_filter")) {
		real_bwd_filter = be->conv_bwd_filter;
		be->conv_bwd_filter = broken_bwd_filter;
	} else if (!strcmp(op, "dropout_fwd")) {
		real_dropout = be->dropout_fwd;
		be->dropout_fwd = broken_dropout;
	} else if (!strcmp(op, "adamw_step")) {
		real_adamw = be->adamw_step;
		be->adamw_step = broken_adamw;
	} else {
		return -1;
	}
	printf("# CDP_GPU_TEST_BREAK: %s of the peer is broken on purpose\n", op);
	return 0;
}

const char *gh_no_device_why(void)
{
#ifdef HAVE_CUDA
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	cudaGetLastError();
	if (e != cudaSuccess)
		return cudaGetErrorString(e);
	return n ? "a device is there" : "cudaGetDeviceCount found 0 devices";
#else
	return "this build has no CUDA backend (configure --with-cuda)";
#endif
}

int gh_open(const char *prog, int ref_threads)
{
	const char *peer = getenv("CDP_GPU_TEST_PEER"), *sd = getenv("CDP_GPU_TEST_SEED");
	const char *dv = getenv("CDP_GPU_TEST_DEVICE");
	uint64_t seed = 20250601;
	int dev = 0;
	char err[256] = "";

	gh_prog = prog;
	/* stdout is a file under run-device.sh: block-buffered, it would lose
	 * the last results to an abort (a failed CUDA call); line by line, the
	 * log ends at the last comparison made */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sd && cdp_parse_u64(sd, 0, UINT64_MAX, &seed) != 0) {
		fprintf(stderr, "%s: bad CDP_GPU_TEST_SEED '%s'\n", prog, sd);
		return 99;
	}
	if (dv && cdp_parse_int(dv, 0, 1023, &dev) != 0) {
		fprintf(stderr, "%s: bad CDP_GPU_TEST_DEVICE '%s'\n", prog, dv);
		return 99;
	}
	if (peer && *peer && strcmp(peer, "cpu") != 0) {
		fprintf(stderr, "%s: CDP_GPU_TEST_PEER must be 'cpu' or unset, not '%s'\n", prog, peer);
		return 99;
	}
	cdp_rng_seed(&gh_rng, seed);
	if (peer && *peer) {
		gh_peer = "cpu";
		/* another thread count splits the work (and OpenBLAS's sums) differently */
		gh_be[GH_DEV] = cdp_backend_cpu(ref_threads == 1 ? 2 : 1);
		if (!gh_be[GH_DEV]) {
			fprintf(stderr, "%s: cannot start the CPU peer backend\n", prog);
			return 99;
		}
		const char *brk = getenv("CDP_GPU_TEST_BREAK");
		if (brk && *brk && break_op(gh_be[GH_DEV], brk) != 0) {
			fprintf(stderr, "%s: CDP_GPU_TEST_BREAK: no such op '%s'\n", prog, brk);
			gh_be[GH_DEV]->destroy(gh_be[GH_DEV]);
			return 99;
		}
	} else {
		int n = cdp_cuda_device_count();
		if (n == 0) {
			printf("SKIP: no CUDA device (cdp_cuda_device_count() == 0: %s)\n",
			       gh_no_device_why());
			return 77;
		}
		if (dev >= n) {
			fprintf(stderr, "%s: CDP_GPU_TEST_DEVICE=%d but %d device(s)\n", prog, dev, n);
			return 99;
		}
		gh_be[GH_DEV] = cdp_backend_cuda(dev, err, sizeof err);
		if (!gh_be[GH_DEV]) {
			/* a GPU is there and the backend cannot use it: that is a failure */
			fprintf(stderr, "%s: cannot start the CUDA backend on device %d: %s\n", prog, dev, err);
			return 1;
		}
	}
	gh_be[GH_REF] = cdp_backend_cpu(ref_threads);
	if (!gh_be[GH_REF]) {
		fprintf(stderr, "%s: cannot start the CPU backend\n", prog);
		gh_be[GH_DEV]->destroy(gh_be[GH_DEV]);
		return 99;
	}
	selftest();
	printf("# %s: reference cpu (%d threads) against %s (%s%s), seed %llu "
	       "(CDP_GPU_TEST_SEED)\n", prog, gh_be[GH_REF]->threads, gh_be[GH_DEV]->name,
	       gh_peer, strcmp(gh_peer, "cpu") ? "" : " peer, another thread count",
	       (unsigned long long)seed);
	return 0;
}

int gh_close(void)
{
	GH_BOTH(s, be)
		be->destroy(be);
	gh_be[0] = gh_be[1] = NULL;
	return tap_done();
}

gh_buf gh_alloc(size_t bytes)
{
	gh_buf b = { { NULL, NULL }, bytes };
	/* +4: ops may be handed n = 0 and still get a valid pointer */
	GH_BOTH(s, be)
		b.p[s] = need(be->alloc(be, bytes + 4), bytes + 4, s);
	return b;
}

void gh_set(gh_buf *b, const void *host, size_t bytes)
{
	GH_BOTH(s, be)
		be->to_device(be, b->p[s], host, bytes);
}

gh_buf gh_from(const void *host, size_t bytes)
{
	gh_buf b = gh_alloc(bytes);
	gh_set(&b, host, bytes);
	return b;
}

gh_buf gh_rand(size_t n, float lo, float hi)
{
	float *h = need(malloc(n * sizeof *h + 4), n * sizeof *h + 4, 0);
	for (size_t i = 0; i < n; i++)
		h[i] = lo + (hi - lo) * cdp_rng_float(&gh_rng);
	gh_buf b = gh_from(h, n * sizeof *h);
	free(h);
	return b;
}

void gh_free(gh_buf *b)
{
	GH_BOTH(s, be)
		if (b->p[s])
			be->free(be, b->p[s]);
	b->p[0] = b->p[1] = NULL;
}

void *gh_host(const gh_buf *b, int s)
{
	void *h = need(malloc(b->bytes + 4), b->bytes + 4, s);
	gh_be[s]->sync(gh_be[s]);
	gh_be[s]->to_host(gh_be[s], h, b->p[s], b->bytes);
	return h;
}

int gh_int(int lo, int hi)
{
	return lo + (int)cdp_rng_below(&gh_rng, (uint64_t)(hi - lo + 1));
}

double gh_relerr(const float *a, const float *ref, size_t n, double floor_frac, size_t *at)
{
	double scale = 0, worst = 0, fl;
	size_t wi = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isfinite(a[i]) || !isfinite(ref[i])) {
			if (at)
				*at = i;
			return INFINITY;
		}
		if (fabs(ref[i]) > scale)
			scale = fabs(ref[i]);
	}
	/* an all-zero reference must be matched exactly (up to a denormal) */
	fl = scale > 0 ? floor_frac * scale : 1e-30;
	for (size_t i = 0; i < n; i++) {
		double r = fabs(ref[i]) > fl ? fabs(ref[i]) : fl;
		double e = fabs((double)a[i] - ref[i]) / r;
		if (e > worst) {
			worst = e;
			wi = i;
		}
	}
	if (at)
		*at = wi;
	return worst;
}

double gh_cmp_host(const char *what, const float *dev, const float *ref, size_t n, double tol,
                   double floor_frac)
{
	size_t at = 0;
	double e = gh_relerr(dev, ref, n, floor_frac, &at);
	int ok = e <= tol;

	printf("%-4s %-60s %9.2e <= %.0e%s\n", ok ? "ok" : "FAIL", what, e, tol,
	       floor_frac == GH_FLOOR ? "" : floor_frac == 1 ? " (of max)" : " (floor)");
	GCHECK(ok, "[%s] %s: error %.3g > %.3g at %zu (%s %.9g, cpu %.9g) of %zu", gh_peer, what, e,
	       tol, at, gh_be[GH_DEV]->name, n ? dev[at] : 0.0, n ? ref[at] : 0.0, n);
	return e;
}

double gh_cmp_floor(const char *what, const gh_buf *b, size_t n, double tol, double floor_frac)
{
	float *r = gh_host(b, GH_REF), *d = gh_host(b, GH_DEV);
	double e = gh_cmp_host(what, d, r, n, tol, floor_frac);
	free(r);
	free(d);
	return e;
}

double gh_cmp(const char *what, const gh_buf *b, size_t n, double tol)
{
	return gh_cmp_floor(what, b, n, tol, GH_FLOOR);
}

int gh_cmp_exact(const char *what, const gh_buf *b, size_t bytes)
{
	unsigned char *r = gh_host(b, GH_REF), *d = gh_host(b, GH_DEV);
	size_t i = 0;

	while (i < bytes && r[i] == d[i])
		i++;
	printf("%-4s %-60s %s\n", i == bytes ? "ok" : "FAIL", what, "exact");
	GCHECK(i == bytes, "[%s] %s: byte %zu of %zu differs (%s 0x%02x, cpu 0x%02x)", gh_peer,
	       what, i, bytes, gh_be[GH_DEV]->name, i < bytes ? d[i] : 0, i < bytes ? r[i] : 0);
	free(r);
	free(d);
	return i == bytes;
}

int gh_cmp_scalar(const char *what, double dev, double ref, double tol, double floor_abs)
{
	double e = fabs(dev - ref) / fmax(fabs(ref), floor_abs);
	int ok = isfinite(dev) && isfinite(ref) && e <= tol;

	printf("%-4s %-60s %9.2e <= %.0e\n", ok ? "ok" : "FAIL", what, e, tol);
	GCHECK(ok, "[%s] %s: %s %.12g, cpu %.12g (error %.3g > %.3g)", gh_peer, what,
	       gh_be[GH_DEV]->name, dev, ref, e, tol);
	return ok;
}

const char *gh_prec_name(int prec)
{
	switch (prec) {
	case CDP_PREC_FP32: return "fp32";
	case CDP_PREC_TF32: return "tf32";
	case CDP_PREC_BF16: return "bf16";
	case CDP_PREC_FP16: return "fp16";
	}
	return "?";
}

int gh_precision(int prec, const char *what)
{
	cdp_backend *be = gh_be[GH_DEV];
	char line[96];

	if (be->set_precision(be, prec) == 0)
		return 0;
	if (!strcmp(gh_peer, "cpu") && prec != CDP_PREC_FP32) {
		snprintf(line, sizeof line, "%s %s", what, gh_prec_name(prec));
		printf("skip %-60s the CPU peer refuses this precision\n", line);
		return -1;
	}
	GCHECK(0, "%s refuses precision %s", be->name, gh_prec_name(prec));
	return -1;
}
