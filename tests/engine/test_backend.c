/* test_backend.c: every op of the CPU backend against a naive
 * double-precision reference written here, on odd shapes (stride 2,
 * padding, dilation 2, 1x1 kernels, batch > 1; shapes chosen to hit every
 * convolution plan, several row chunks per sample included), forward and
 * backward, with beta = 0 and 1, at 3 threads.
 *
 * Tolerances: a float result of a sum of K products carries a rounding
 * error of about sqrt(K) * 6e-8 times the magnitude of the terms; with
 * K <= a few hundred and values of order 1, 1e-5 relative to the largest
 * reference value is far above that and far below any indexing mistake.
 * Ops without reductions are compared at 1e-6.
 *
 * The gemm and convolution checks run with each set of gemm kernels the
 * CPU supports (AVX-512, AVX2, SSE2). The non-GEMM ops must also give
 * bitwise identical results at 1 and 3 threads (each worker owns its
 * outputs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "cpu/cpu.h"
#include "tap.h"
#include "conv_ref.h"

static cdp_rng rng;
static cdp_backend *be;
static const char *isa = "";    /* the gemm kernels in use */

static float *rnd(size_t n)
{
	float *p = be->alloc(be, n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)(cdp_rng_double(&rng) * 2.0 - 1.0);
	return p;
}

static double *dzero(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static double *dcopy(const float *x, size_t n)
{
	double *d = dzero(n);
	for (size_t i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

/* max |a - ref| <= tol * max(1, max |ref|) */
static int near(const float *a, const double *ref, size_t n, double tol, const char *what)
{
	double scale = 1.0, worst = 0.0;
	size_t at = 0;
	for (size_t i = 0; i < n; i++)
		if (fabs(ref[i]) > scale)
			scale = fabs(ref[i]);
	for (size_t i = 0; i < n; i++) {
		double e = fabs(a[i] - ref[i]);
		if (!(e <= worst)) {
			worst = e;
			at = i;
		}
	}
	CHECK(worst <= tol * scale, "[%s] %s: max error %.3g at %zu (%.7g vs %.7g), scale %.3g",
	      isa, what, worst, at, n ? a[at] : 0.0, n ? ref[at] : 0.0, scale);
	return worst <= tol * scale;
}

/* near() for double results */
static int near_d(const double *a, const double *ref, size_t n, double tol, const char *what)
{
	float *f = malloc((n ? n : 1) * sizeof *f);
	int ok;

	for (size_t i = 0; i < n; i++)
		f[i] = (float)a[i];
	ok = near(f, ref, n, tol, what);
	free(f);
	return ok;
}

/* ---- gemm and the vector ops ---- */

static void test_blas(void)
{
	/* every transpose case, alpha 1 (our kernels) and 0.5 (OpenBLAS), beta
	 * 0, 1 and 2, small (one call) and large enough to be split */
	static const int shapes[][3] = { { 7, 5, 9 }, { 67, 45, 400 }, { 33, 130, 300 } };
	static const float ab[][2] = { { 1, 0 }, { 1, 1 }, { 1, 2 }, { 0.5f, 2 } };
	for (size_t si = 0; si < 3; si++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				for (int v = 0; v < 4; v++) {
					int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
					float alpha = ab[v][0], beta = ab[v][1];
					float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n), *c = rnd((size_t)m * n);
					double *ref = dzero((size_t)m * n);
					char what[128];
					for (int i = 0; i < m; i++)
						for (int j = 0; j < n; j++) {
							double s = 0;
							for (int t = 0; t < k; t++)
								s += (double)(ta ? a[t * m + i] : a[i * k + t]) *
								     (tb ? b[j * k + t] : b[t * n + j]);
							ref[i * n + j] = alpha * s + beta * c[i * n + j];
						}
					cpu_gemm(be, ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
					snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d alpha %g beta %g",
					         m, n, k, ta, tb, alpha, beta);
					near(c, ref, (size_t)m * n, 1e-5, what);
					be->free(be, a); be->free(be, b); be->free(be, c); free(ref);
				}
	size_t n = 200003;
	float *x = rnd(n), *y = rnd(n);
	double *ry = dcopy(y, n), ss = 0;
	for (size_t i = 0; i < n; i++) {
		ry[i] = (ry[i] + 0.25 * x[i]) * -3.0;
		ss += (double)x[i] * x[i];
	}
	cpu_axpy(be, 0.25f, x, y, n);
	cpu_scale(be, y, -3.0f, n);
	near(y, ry, n, 1e-6, "axpy+scale");
	CHECK(fabs(cpu_sumsq(be, x, n) - ss) <= 1e-9 * ss, "sumsq");
	cpu_fill(be, y, 1.5f, n);
	for (size_t i = 0; i < n; i++)
		ry[i] = 1.5;
	near(y, ry, n, 0, "fill");
	CHECK(((uintptr_t)x & 63) == 0, "alloc is 64-byte aligned");
	be->free(be, x); be->free(be, y); free(ry);
}

/* ---- convolution ---- */

/* conv_fwd_bn: the same bits as conv_fwd then bn_fwd_infer (act 0, relu
 * or leaky), on every plan; the batchnorm's four vectors differ per
 * channel, so a channel mixed up or a block left out shows */
static void conv_bn_case(const cdp_conv_desc *d, const float *x, const float *w,
                         const float *bias, int act, void *ws, size_t ci)
{
	size_t ny = (size_t)d->n * d->f * d->oh * d->ow;
	float *g = rnd((size_t)d->f), *bb = rnd((size_t)d->f), *m = rnd((size_t)d->f);
	float *v = rnd((size_t)d->f), *y1 = rnd(ny), *y2 = rnd(ny);
	cdp_bn_infer bn = { g, bb, m, v, 1e-5f, 0.1f, act };

	for (int f = 0; f < d->f; f++)
		v[f] = 0.5f + v[f] * v[f];
	cpu_conv_fwd(be, d, x, w, bias, y1, ws);
	cpu_bn_fwd_infer(be, d->n, d->f, d->oh * d->ow, y1, g, bb, y1, m, v, 1e-5f, act, 0.1f);
	cpu_conv_fwd_bn(be, d, x, w, bias, &bn, y2, ws);
	CHECK(memcmp(y1, y2, ny * sizeof *y1) == 0,
	      "[%s] conv case %zu: conv_fwd_bn (act %d, %s) equals conv_fwd then bn_fwd_infer",
	      isa, ci, act, bias ? "bias" : "no bias");
	be->free(be, g); be->free(be, bb); be->free(be, m); be->free(be, v);
	be->free(be, y1); be->free(be, y2);
}

static void test_conv(void)
{
	static const conv_case cases[] = {
		{ 2, 3, 7, 9, 4, 3, 1, 1, 1 },     /* implicit, small */
		{ 1, 3, 7, 9, 4, 3, 1, 1, 1 },     /* implicit, one sample */
		{ 3, 5, 11, 10, 6, 3, 2, 1, 1 },   /* stride 2, odd size */
		/* 3x3 stride 2 by phases (cpu_conv_phase.c): its data gradient
		 * from 144 output pixels, every op from 400 */
		{ 4, 16, 28, 28, 16, 3, 2, 1, 1 }, /* 14x14 out: data by phases */
		{ 2, 4, 40, 42, 6, 3, 2, 1, 1 },   /* even sizes, every op */
		{ 1, 3, 41, 39, 5, 3, 2, 1, 1 },   /* odd sizes */
		{ 2, 40, 24, 40, 36, 3, 2, 1, 1 }, /* 36 outputs: nn's row tiles and tails */
		{ 1, 2, 1, 801, 3, 3, 2, 1, 1 },   /* one row: the odd rows' phases empty */
		{ 1, 2, 801, 1, 3, 3, 2, 1, 1 },   /* one column */
		{ 2, 4, 9, 9, 3, 3, 1, 2, 2 },     /* dilation 2 */
		{ 2, 4, 9, 9, 3, 3, 2, 2, 2 },     /* batched plan: dilation, stride 2 */
		{ 1, 6, 5, 7, 8, 1, 1, 0, 1 },     /* 1x1 plan */
		{ 2, 6, 5, 7, 8, 1, 1, 0, 1 },     /* 1x1, small planes: batched */
		{ 2, 6, 5, 7, 8, 1, 2, 0, 1 },     /* 1x1 stride 2 */
		{ 2, 2, 37, 33, 3, 3, 1, 1, 1 },   /* implicit at batch 2 */
		{ 2, 2, 41, 35, 5, 3, 2, 0, 2 },   /* big plane, stride 2, dilation 2 */
		{ 2, 3, 8, 8, 2, 4, 2, 1, 1 },     /* even kernel */
		{ 2, 3, 6, 6, 4, 2, 2, 0, 1 },     /* 2x2 stride 2 (deconv) */
		{ 1, 1, 3, 3, 2, 5, 1, 2, 1 },     /* kernel larger than the image */
		{ 2, 4, 150, 200, 3, 3, 1, 1, 1 }, /* implicit, wide plane */
		{ 1, 2, 301, 257, 2, 3, 2, 1, 2 }, /* chunks, stride 2, dilation 2 */
		{ 3, 16, 300, 200, 3, 1, 1, 0, 1 },/* 1x1 in several chunks */
		{ 1, 24, 100, 150, 40, 3, 1, 1, 1 },/* implicit plan, several chunks */
		{ 1, 3, 40, 45, 4, 3, 1, 2, 2 },   /* implicit, dilation 2 */
		{ 2, 2, 30, 40, 3, 3, 1, 0, 1 },   /* implicit, no padding */
		{ 1, 2, 20, 22, 3, 4, 1, 1, 1 },   /* implicit, even kernel */
		{ 1, 2, 20, 22, 3, 3, 1, 3, 1 },   /* pad > dil*(K-1): im2col rows */
		{ 3, 3, 80, 70, 4, 3, 2, 1, 1 },   /* im2col rows, batch 3 */
		{ 7, 5, 8, 8, 6, 3, 1, 1, 1 },     /* small planes: samples stacked */
		{ 64, 16, 8, 8, 32, 3, 1, 1, 1 },  /* classifier-like 8x8, batch 64 */
		{ 9, 3, 10, 6, 4, 3, 1, 0, 1 },    /* stacked, no padding */
		{ 2, 3, 20, 64, 5, 3, 1, 1, 1 },   /* implicit, width 64: rows in place */
		{ 1, 32, 100, 128, 6, 3, 1, 1, 1 },/* the same in several chunks */
		{ 1, 3, 40, 64, 4, 3, 1, 2, 2 },   /* rows in place, dilation 2 */
		{ 1, 16, 256, 256, 4, 2, 2, 0, 1 },/* 2x2 stride 2 in several chunks */
		/* Winograd F(2x2,3x3) (32+ channels in and out, 3x3, dilation 1):
		 * odd sizes (partial tiles), pads 0-2 (the data gradient's 2-0),
		 * items that span samples, several items a sample, rows of 8 and
		 * of 16+ tiles (the vector transforms) */
		{ 3, 64, 9, 11, 64, 3, 1, 1, 1 },
		{ 2, 64, 12, 10, 72, 3, 1, 0, 1 },
		{ 2, 72, 7, 13, 64, 3, 1, 2, 1 },
		{ 2, 64, 16, 16, 64, 3, 1, 1, 1 },
		{ 1, 64, 70, 66, 64, 3, 1, 1, 1 },
		{ 3, 64, 16, 16, 24, 3, 1, 1, 1 },   /* 24 out: direct */
		{ 2, 32, 18, 64, 32, 3, 1, 1, 1 },   /* the least channels it takes */
		/* rows of 8 tiles (16 wide) in pairs, and single ones after
		 * them in an item (an odd count of tile rows a sample, an
		 * item's last row; 17 high: one row of the last tile row) */
		{ 3, 64, 18, 16, 64, 3, 1, 1, 1 },
		{ 2, 64, 17, 16, 64, 3, 1, 1, 1 },
		/* the filter gradient's blocks of 16 tiles and 16 filters (8
		 * and 8 with the avx2 and sse2 sets), a
		 * filter tail, an odd last tile row and column */
		{ 2, 64, 33, 35, 72, 3, 1, 1, 1 },
		/* filter tails past blocks of 8 (the avx2 set's) and of 16 */
		{ 2, 64, 20, 35, 68, 3, 1, 1, 1 },
		/* so wide that the filter gradient goes in chunks, filters past
		 * the last block of 16 */
		{ 1, 256, 8, 8, 520, 3, 1, 1, 1 },
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const conv_case *cc = &cases[ci];
		cdp_conv_desc d;
		char what[96];
		if (conv_case_desc(cc, &d) < 0) {
			CHECK(0, "case %zu: desc_init failed", ci);
			continue;
		}
		size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.f * d.oh * d.ow;
		size_t nw = (size_t)d.f * d.c * d.kh * d.kw;
		float *x = rnd(nx), *w = rnd(nw), *b = rnd((size_t)d.f), *dy = rnd(ny);
		float *y = rnd(ny), *dx = rnd(nx), *dw = rnd(nw), *db = rnd((size_t)d.f);
		double *ry = dzero(ny), *rdx = dzero(nx), *rdw = dcopy(dw, nw), *rdb = dcopy(db, (size_t)d.f);
		void *ws = be->alloc(be, cpu_conv_workspace(be, &d));

		conv_ref(&d, x, w, b, dy, ry, rdx, rdw, rdb);
		snprintf(what, sizeof what, "conv case %zu fwd", ci);
		cpu_conv_fwd(be, &d, x, w, b, y, ws);
		near(y, ry, ny, 1e-5, what);
		snprintf(what, sizeof what, "conv case %zu bwd_data beta 0", ci);
		cpu_conv_bwd_data(be, &d, dy, w, dx, 0.0f, ws);
		near(dx, rdx, nx, 1e-5, what);
		/* beta 1 adds the same again */
		for (size_t i = 0; i < nx; i++)
			rdx[i] *= 2.0;
		snprintf(what, sizeof what, "conv case %zu bwd_data beta 1", ci);
		cpu_conv_bwd_data(be, &d, dy, w, dx, 1.0f, ws);
		near(dx, rdx, nx, 1e-5, what);
		snprintf(what, sizeof what, "conv case %zu bwd_filter", ci);
		cpu_conv_bwd_filter(be, &d, x, dy, dw, db, ws);
		near(dw, rdw, nw, 1e-5, what);
		snprintf(what, sizeof what, "conv case %zu dbias", ci);
		near(db, rdb, (size_t)d.f, 1e-5, what);
		/* no bias: y without it */
		for (int n = 0; n < d.n; n++)
			for (int f = 0; f < d.f; f++)
				for (size_t i = 0; i < (size_t)d.oh * d.ow; i++)
					ry[((size_t)n * d.f + f) * d.oh * d.ow + i] -= b[f];
		cpu_conv_fwd(be, &d, x, w, NULL, y, ws);
		snprintf(what, sizeof what, "conv case %zu fwd without bias", ci);
		near(y, ry, ny, 1e-5, what);
		conv_bn_case(&d, x, w, ci % 2 ? b : NULL, (int)(ci % 3), ws, ci);
		be->free(be, x); be->free(be, w); be->free(be, b); be->free(be, dy);
		be->free(be, y); be->free(be, dx); be->free(be, dw); be->free(be, db);
		be->free(be, ws);
		free(ry); free(rdx); free(rdw); free(rdb);
	}
	cdp_conv_desc bad = { .n = 1, .c = 1, .h = 2, .w = 2, .f = 1, .kh = 5, .kw = 5, .stride = 1,
	                      .pad = 0, .dil = 1 };
	CHECK(cdp_conv_desc_init(&bad) == -1, "a kernel larger than the padded input is refused");
}

/* Winograd's results do not depend on the threads (cpu_conv_wino.c,
 * cpu_conv_winof.c): the same bits at 1 and 3 threads, forward and
 * filter gradient; with ref, the filter gradient also against conv_ref */
static void wino_threads(const conv_case *cc, int ref, const char *what)
{
	cdp_backend *b1 = cdp_backend_cpu(1);
	cdp_conv_desc d;

	if (!b1 || conv_case_desc(cc, &d) < 0) {
		CHECK(0, "cannot set up the Winograd check (%s)", what);
		if (b1)
			b1->destroy(b1);
		return;
	}
	size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.f * d.oh * d.ow;
	size_t nw = (size_t)d.f * d.c * 9;
	float *x = rnd(nx), *w = rnd(nw), *dy = rnd(ny);
	float *y1 = rnd(ny), *y3 = rnd(ny), *dw1 = rnd(nw), *dw3 = rnd(nw);
	double *rdw = dcopy(dw1, nw);
	void *ws1 = b1->alloc(b1, cpu_conv_workspace(b1, &d)), *ws3 = be->alloc(be, cpu_conv_workspace(be, &d));
	char msg[128];

	memcpy(dw3, dw1, nw * sizeof *dw1);
	cpu_conv_fwd(b1, &d, x, w, NULL, y1, ws1);
	cpu_conv_fwd(be, &d, x, w, NULL, y3, ws3);
	CHECK(memcmp(y1, y3, ny * sizeof *y1) == 0, "[%s] winograd fwd, %s: the same bits at 1 and 3 threads",
	      isa, what);
	cpu_conv_bwd_filter(b1, &d, x, dy, dw1, NULL, ws1);
	cpu_conv_bwd_filter(be, &d, x, dy, dw3, NULL, ws3);
	CHECK(memcmp(dw1, dw3, nw * sizeof *dw1) == 0,
	      "[%s] winograd filter gradient, %s: the same bits at 1 and 3 threads", isa, what);
	if (ref) {
		double *ry = dzero(ny), *rdx = dzero(nx), *rdb = dzero((size_t)d.f);

		conv_ref(&d, x, w, NULL, dy, ry, rdx, rdw, rdb);
		snprintf(msg, sizeof msg, "[%s] winograd filter gradient, %s", isa, what);
		near(dw3, rdw, nw, 1e-5, msg);
		free(ry); free(rdx); free(rdb);
	}
	b1->free(b1, ws1); be->free(be, ws3);
	be->free(be, x); be->free(be, w); be->free(be, dy);
	be->free(be, y1); be->free(be, y3); be->free(be, dw1); be->free(be, dw3);
	free(rdw);
	b1->destroy(b1);
}

/* The Winograd forward keeps its U between calls per filter pointer
 * (cpu_conv_wino.c): filters changed in place (a training step), or
 * another net's at the same address, give what a fresh backend gives;
 * unchanged ones the same bits again; in fp32 and in each bf16 set the
 * CPU has (the kept U belongs to the set it was made in) */
static void wino_kept_u(void)
{
	static const char *const precs[] = { "fp32", "bf16" };
	conv_case cc = { 2, 32, 12, 10, 36, 3, 1, 1, 1 };
	cdp_conv_desc d;

	if (conv_case_desc(&cc, &d) < 0) {
		CHECK(0, "cannot set up the kept-U check");
		return;
	}
	size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.f * d.oh * d.ow;
	size_t nw = (size_t)d.f * d.c * 9;
	for (int pi = 0; pi < 2; pi++) {
		cdp_backend *b1 = cdp_backend_cpu(2);
		if (!b1 || b1->set_precision(b1, pi ? CDP_PREC_BF16 : CDP_PREC_FP32) != 0) {
			printf("# kept U, %s: not on this CPU\n", precs[pi]);
			if (b1)
				b1->destroy(b1);
			continue;
		}
		float *x = rnd(nx), *w = rnd(nw), *w2 = rnd(nw), *y[4];
		void *ws = b1->alloc(b1, cpu_conv_workspace(b1, &d));
		for (int i = 0; i < 4; i++)
			y[i] = rnd(ny);
		cpu_conv_fwd(b1, &d, x, w, NULL, y[0], ws);      /* kept */
		cpu_conv_fwd(b1, &d, x, w, NULL, y[1], ws);      /* taken */
		CHECK(memcmp(y[0], y[1], ny * sizeof *y[0]) == 0,
		      "[%s] winograd %s: the kept U gives other bits", isa, precs[pi]);
		memcpy(w2, w, nw * sizeof *w);
		w[nw - 1] += 1.0f;                              /* the last filter's last tap */
		cpu_conv_fwd(b1, &d, x, w, NULL, y[2], ws);
		cpu_conv_fwd(b1, &d, x, w2, NULL, y[3], ws);    /* the old filters elsewhere */
		CHECK(memcmp(y[3], y[0], ny * sizeof *y[0]) == 0,
		      "[%s] winograd %s: the same filters at another address differ", isa, precs[pi]);
		b1->free(b1, ws);
		b1->destroy(b1);
		b1 = cdp_backend_cpu(2);                        /* nothing kept */
		b1->set_precision(b1, pi ? CDP_PREC_BF16 : CDP_PREC_FP32);
		ws = b1->alloc(b1, cpu_conv_workspace(b1, &d));
		cpu_conv_fwd(b1, &d, x, w, NULL, y[1], ws);
		CHECK(memcmp(y[2], y[1], ny * sizeof *y[1]) == 0 &&
		      memcmp(y[2], y[0], ny * sizeof *y[0]) != 0,
		      "[%s] winograd %s: filters changed in place gave the kept U's bits", isa,
		      precs[pi]);
		/* changed at every call, as in training: they stop being kept
		 * (UCACHE_MISSES), and every call still sees its own filters */
		for (int r = 0; r < 4; r++) {
			cdp_backend *b2 = cdp_backend_cpu(1);
			b2->set_precision(b2, pi ? CDP_PREC_BF16 : CDP_PREC_FP32);
			void *ws2 = b2->alloc(b2, cpu_conv_workspace(b2, &d));
			w[r] -= 0.5f;
			cpu_conv_fwd(b1, &d, x, w, NULL, y[1], ws);
			cpu_conv_fwd(b2, &d, x, w, NULL, y[3], ws2);
			CHECK(memcmp(y[1], y[3], ny * sizeof *y[1]) == 0,
			      "[%s] winograd %s: filters changed %d times in a row: other bits than a "
			      "fresh backend's", isa, precs[pi], r + 2);
			b2->free(b2, ws2);
			b2->destroy(b2);
		}
		b1->free(b1, ws);
		b1->destroy(b1);
		be->free(be, x); be->free(be, w); be->free(be, w2);
		for (int i = 0; i < 4; i++)
			be->free(be, y[i]);
	}
}

/* ---- batch norm, with its fused activation ---- */

/* act applied to v, and the gradient it passes back given its output y */
static double ref_act(int act, double slope, double v)
{
	return act == CDP_ACT_RELU ? (v < 0 ? 0 : v) : act == CDP_ACT_LEAKY && v < 0 ? v * slope : v;
}

static double ref_act_grad(int act, double slope, double y, double g)
{
	return act == CDP_ACT_RELU ? (y <= 0 ? 0 : g) : act == CDP_ACT_LEAKY && y <= 0 ? g * slope : g;
}

/* bn_sync's parts (bn_sums, bn_grad_sums, bn_bwd_dx) on the case of bn_case:
 * x, its train-mode y, dy and gamma g; shift the running mean (any values),
 * sm, si the saved statistics, m, inv their double reference, rdx the
 * reference dx times 2 (bn_case's last). The sums against double ones; dx
 * from the sums' means against rdx / 2 (the activation's gradient applied to
 * dy first, as bn.c does with act_bwd). */
static void bn_parts(int n, int c, int hw, int act, float slope, const float *x, const float *y,
                     const float *dy, const float *g, const float *shift, const float *sm,
                     const float *si, const double *m, const double *inv, const double *rdx,
                     char *what)
{
	size_t nx = (size_t)n * c * hw;
	double *s = dzero(2 * (size_t)c), *rs = dzero(2 * (size_t)c), *hdx = dzero(nx);
	float *gp = rnd(nx), *mm = rnd(2 * (size_t)c), *dx = rnd(nx);
	double M = (double)n * hw;

	for (int k = 0; k < c; k++)
		for (int b = 0; b < n; b++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)b * c + k) * hw + i;
				double d = (double)x[t] - shift[k];
				rs[k] += d;
				rs[k + c] += d * d;
			}
	cpu_bn_sums(be, n, c, hw, x, shift, s);
	snprintf(what, 96, "bn (%d,%d,%d) act %d: bn_sums", n, c, hw, act);
	near_d(s, rs, 2 * (size_t)c, 1e-5, what);
	memset(rs, 0, 2 * (size_t)c * sizeof *rs);
	for (size_t t = 0; t < nx; t++)
		gp[t] = (float)ref_act_grad(act, slope, y[t], dy[t]);
	for (int k = 0; k < c; k++)
		for (int b = 0; b < n; b++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)b * c + k) * hw + i;
				rs[k] += gp[t];
				rs[k + c] += gp[t] * (x[t] - m[k]) * inv[k];
			}
	cpu_bn_grad_sums(be, n, c, hw, x, gp, sm, si, s);
	snprintf(what, 96, "bn (%d,%d,%d) act %d: bn_grad_sums", n, c, hw, act);
	near_d(s, rs, 2 * (size_t)c, 1e-5, what);
	for (int k = 0; k < 2 * c; k++)
		mm[k] = (float)(s[k] / M);
	for (size_t t = 0; t < nx; t++)
		hdx[t] = rdx[t] / 2;
	cpu_bn_bwd_dx(be, n, c, hw, x, gp, g, sm, si, mm, dx, 0.0f);
	snprintf(what, 96, "bn (%d,%d,%d) act %d: bn_bwd_dx", n, c, hw, act);
	near(dx, hdx, nx, 1e-5, what);
	be->free(be, gp); be->free(be, mm); be->free(be, dx);
	free(s); free(rs); free(hdx);
}

/* hw > 1024 runs the vector blocks of cpu_bn.c, a remainder and its tail */
static void bn_case(int n, int c, int hw, int act, float slope)
{
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c), *y = rnd(nx);
	float *rm = rnd((size_t)c), *rv = rnd((size_t)c), *sm = rnd((size_t)c), *si = rnd((size_t)c);
	float *dy = rnd(nx), *dx = rnd(nx), *dg = rnd((size_t)c), *dbt = rnd((size_t)c);
	float *dy0 = rnd(nx);
	double *ry = dzero(nx), *rdx = dzero(nx), *rrm = dzero((size_t)c), *rrv = dzero((size_t)c);
	double *rdg = dcopy(dg, (size_t)c), *rdb = dcopy(dbt, (size_t)c), *rsm = dzero((size_t)c), *rsi = dzero((size_t)c);
	double mom = 0.1, eps = 1e-5, *m = dzero((size_t)c), *inv = dzero((size_t)c);
	char what[96];

	for (size_t i = 0; i < nx; i++)
		x[i] = x[i] * 3.0f + 2.0f;      /* offset mean, larger variance */
	for (int k = 0; k < c; k++)
		rv[k] = fabsf(rv[k]) + 0.5f;
	memcpy(dy0, dy, nx * sizeof *dy);
	for (int k = 0; k < c; k++) {
		double v = 0, M = (double)n * hw;
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++)
				m[k] += x[((size_t)s * c + k) * hw + i];
		m[k] /= M;
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++) {
				double t = x[((size_t)s * c + k) * hw + i] - m[k];
				v += t * t;
			}
		inv[k] = 1.0 / sqrt(v / M + eps);
		rsm[k] = m[k];
		rsi[k] = inv[k];
		rrm[k] = (1 - mom) * rm[k] + mom * m[k];
		rrv[k] = (1 - mom) * rv[k] + mom * v / (M - 1);
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)s * c + k) * hw + i;
				ry[t] = ref_act(act, slope, (x[t] - m[k]) * inv[k] * g[k] + bt[k]);
			}
	}
#define BN_NEAR(a, r, cnt, tol, name) do { \
	snprintf(what, sizeof what, "bn (%d,%d,%d) act %d: %s", n, c, hw, act, name); \
	near(a, r, cnt, tol, what); } while (0)
	cpu_bn_fwd_train(be, n, c, hw, x, g, bt, y, rm, rv, (float)mom, (float)eps, sm, si, act, slope);
	BN_NEAR(y, ry, nx, 1e-5, "train y");
	BN_NEAR(rm, rrm, (size_t)c, 1e-6, "running mean");
	BN_NEAR(rv, rrv, (size_t)c, 1e-6, "running var (unbiased)");
	BN_NEAR(sm, rsm, (size_t)c, 1e-6, "saved mean");
	BN_NEAR(si, rsi, (size_t)c, 1e-5, "saved invstd");
	/* the gradient before the activation, masked by the y the op wrote */
	for (int k = 0; k < c; k++) {
		double sdy = 0, sdyx = 0, M = (double)n * hw;
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)s * c + k) * hw + i;
				double gt = ref_act_grad(act, slope, y[t], dy[t]);
				sdy += gt;
				sdyx += gt * (x[t] - m[k]) * inv[k];
			}
		rdg[k] += sdyx;
		rdb[k] += sdy;
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)s * c + k) * hw + i;
				double xh = (x[t] - m[k]) * inv[k];
				double gt = ref_act_grad(act, slope, y[t], dy[t]);
				rdx[t] = g[k] * inv[k] * (gt - sdy / M - xh * sdyx / M);
			}
	}
	cpu_bn_bwd(be, n, c, hw, x, 0, y, dy, g, bt, sm, si, (float)eps, act, slope, dx, 0.0f, dg, dbt);
	BN_NEAR(dx, rdx, nx, 1e-5, "dx");
	BN_NEAR(dg, rdg, (size_t)c, 1e-5, "dgamma");
	BN_NEAR(dbt, rdb, (size_t)c, 1e-5, "dbeta");
	CHECK(memcmp(dy, dy0, nx * sizeof *dy) == 0, "bn bwd act %d: the CPU leaves dy as it was", act);
	for (size_t i = 0; i < nx; i++)
		rdx[i] = 2 * rdx[i];
	cpu_bn_bwd(be, n, c, hw, x, 0, y, dy, g, bt, sm, si, (float)eps, act, slope, dx, 1.0f, dg, dbt);
	BN_NEAR(dx, rdx, nx, 1e-5, "dx beta 1");
	bn_parts(n, c, hw, act, slope, x, y, dy, g, rm, sm, si, m, inv, rdx, what);
	/* inference with the running statistics */
	for (int k = 0; k < c; k++)
		for (int s = 0; s < n; s++)
			for (int i = 0; i < hw; i++) {
				size_t t = ((size_t)s * c + k) * hw + i;
				ry[t] = ref_act(act, slope, (x[t] - rm[k]) / sqrt(rv[k] + eps) * g[k] + bt[k]);
			}
	cpu_bn_fwd_infer(be, n, c, hw, x, g, bt, y, rm, rv, (float)eps, act, slope);
	BN_NEAR(y, ry, nx, 1e-5, "infer y");
#undef BN_NEAR
	be->free(be, x); be->free(be, g); be->free(be, bt); be->free(be, y); be->free(be, rm);
	be->free(be, rv); be->free(be, sm); be->free(be, si); be->free(be, dy); be->free(be, dx);
	be->free(be, dg); be->free(be, dbt); be->free(be, dy0);
	free(ry); free(rdx); free(rrm); free(rrv); free(rdg); free(rdb); free(rsm); free(rsi);
	free(m); free(inv);
}

static void test_bn(void)
{
	bn_case(3, 5, 7 * 3, 0, 0.0f);
	bn_case(3, 5, 7 * 3, CDP_ACT_RELU, 0.0f);
	bn_case(2, 3, 1100, 0, 0.0f);
	bn_case(2, 3, 1100, CDP_ACT_RELU, 0.0f);
	bn_case(2, 4, 2 * 1024 + 37, CDP_ACT_LEAKY, 0.1f);
}

/* bn_bwd on AVX-512 (cpu_bn.c's 16-lane passes, where the chosen set is
 * avx512 or above) gives the bits of its 4-lane passes (the set forced to
 * avx2): x in fp32 and in bf16, each activation, dx written and added to,
 * planes with a tail past whole vectors and past the widening's chunks */
static void test_bn_wide(void)
{
	const char *best = cpu_kgemm_isa();
	int n = 2, c = 3, hw = 2 * 2048 + 37;
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *dy = rnd(nx), *dx0 = rnd(nx), *g = rnd((size_t)c);
	float *bt = rnd((size_t)c), *sm = rnd((size_t)c), *si = rnd((size_t)c);
	uint16_t *xh = malloc(nx * sizeof *xh);

	if (!cpu_kgemm_wide() || cpu_kgemm_force("avx2") != 0) {
		printf("# bn_bwd's AVX-512 passes: not on this CPU (%s), not compared\n", best);
		free(xh);
		be->free(be, x); be->free(be, dy); be->free(be, dx0); be->free(be, g);
		be->free(be, bt); be->free(be, sm); be->free(be, si);
		return;
	}
	cpu_kgemm_force(best);
	for (int k = 0; k < c; k++)
		si[k] = 1.0f + fabsf(si[k]);
	for (size_t i = 0; i < nx; i++)
		xh[i] = cpu_bf16_bits(x[i]);
	for (int v = 0; v < 12; v++) {
		int h = v % 2, act = (v / 2) % 3 == 0 ? 0 : (v / 2) % 3 == 1 ? CDP_ACT_RELU :
		        CDP_ACT_LEAKY;
		float beta = (float)(v / 6), *dx[2], dg[2][3], db[2][3];
		for (int w = 0; w < 2; w++) {
			CHECK(cpu_kgemm_force(w ? "avx2" : best) == 0, "forcing %s", w ? "avx2" : best);
			dx[w] = malloc(nx * sizeof *dx[w]);
			memcpy(dx[w], dx0, nx * sizeof *dx0);
			memcpy(dg[w], g, sizeof dg[w]);
			memcpy(db[w], bt, sizeof db[w]);
			cpu_bn_bwd(be, n, c, hw, h ? (const void *)xh : x, h, NULL, dy, g, bt, sm, si,
			           1e-5f, act, 0.1f, dx[w], beta, dg[w], db[w]);
		}
		CHECK(memcmp(dx[0], dx[1], nx * sizeof *dx0) == 0 &&
		      memcmp(dg[0], dg[1], sizeof dg[0]) == 0 && memcmp(db[0], db[1], sizeof db[0]) == 0,
		      "bn_bwd (x %s, act %d, beta %g): the AVX-512 passes differ from the 4-lane ones",
		      h ? "bf16" : "fp32", act, beta);
		free(dx[0]);
		free(dx[1]);
	}
	CHECK(cpu_kgemm_force(best) == 0, "back to %s", best);
	free(xh);
	be->free(be, x); be->free(be, dy); be->free(be, dx0); be->free(be, g);
	be->free(be, bt); be->free(be, sm); be->free(be, si);
}

#include "test_backend_ops.h"

int main(void)
{
	cdp_rng_seed(&rng, 20240611);
	be = cdp_backend_cpu(3);
	if (!be) {
		fprintf(stderr, "test_backend: cannot create the cpu backend\n");
		return 99;
	}
	CHECK(be->threads == 3, "set_threads(3) gives %d", be->threads);
	/* the gemm and convolution checks once per kernel set the CPU can run
	 * (cpu_gemm.c), the best last so that it stays in use */
	static const char *const isas[] = { "sse2", "avx2", "avx512", "avx512bf16", "amx" };
	const char *best = cpu_kgemm_isa();
	for (int i = 0; i < 5; i++) {
		if (cpu_kgemm_force(isas[i]) < 0)
			continue;
		isa = isas[i];
		test_blas();
		test_conv();
		/* the filter gradient in 6 parts of 1-2 items */
		wino_threads(&(conv_case){ 2, 64, 40, 36, 80, 3, 1, 1, 1 }, 0, "parts");
	}
	CHECK(cpu_kgemm_force(best) == 0, "back to %s", best);
	isa = best;
	/* so wide that the filter gradient goes in chunks: two of them */
	wino_threads(&(conv_case){ 2, 256, 20, 16, 520, 3, 1, 1, 1 }, 1, "chunks");
	wino_kept_u();
	test_bn();
	test_bn_wide();
	test_elementwise();
	test_pool();
	test_upsample();
	test_dropout();
	test_threads();
	be->destroy(be);
	return tap_done();
}
