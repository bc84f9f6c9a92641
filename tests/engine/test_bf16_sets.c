/* test_bf16_sets.c: each set of bf16 kernels the CPU can run (cpu_gemm.c:
 * "emulated" everywhere, "avx512bf16" and "avx512bf16-fma" with
 * AVX512_BF16, "amx" with AMX) computes exactly bf16's products: the
 * convolutions (forward, data and filter gradients, every plan) and the
 * GEMM against a double-precision reference taken on the operands rounded
 * to bf16 (cpu_bf16_round), at fp32's tolerance (1e-5 of the largest
 * value, as test_backend.c); the data gradient also with beta 1 (old
 * values plus the same sums).
 *
 * One exception: the avx512bf16 set computes the 3x3 layers of 32 channels
 * and more by Winograd with VDPBF16PS (cpu_conv_wino.c), which rounds the
 * transformed values, not the operands. There the results must differ
 * from the rounded operands' (the path ran) and stay near the fp32
 * result: their error against it at most WINO_RMS times the rounded
 * operands' (root mean square) and WINO_MAX times (largest), where 2.0
 * and 2.4 were measured in forward, whose input is rounded before its
 * transform too, and 1.9 and 2.1 in the gradients (the transforms' sums of
 * up to 16 values lose about one bit more).
 *
 * And every set's forward depends on the input only through its bf16
 * values (the same bits for x and x rounded), Winograd's included: the
 * bf16 stash (net_plan.c) gives a convolution its input that way. Where the
 * backend says it reads that input as bf16 (conv_takes_xh: the implicit
 * plan, its kcol and Winograd halves), the forward and the filter
 * gradient of the bf16 copy give the same bits as of its values widened.
 *
 * The data gradient of the 2x2 stride-2 windows that tile the input (the
 * transposed convolution's forward), which the avx512bf16 set writes
 * with its output rows zipped (cpu_bf16f_nn_zip, no column matrix), holds
 * the same values as the column path's (beta 1 onto zeros takes it); so
 * does their forward, which reads the pairs of each window row side by
 * side (cpu_bf16f_nn_cp; with a bias it takes the column path).
 *
 * Also the stash's conversions against cpu_bf16_round, bit for bit, and
 * batchnorm's forward that writes them (bn_fwd_train_h) against
 * bn_fwd_train and to_bf16.
 *
 * Why the tolerance bites: an operand left in fp32 moves a result by up to
 * 2^-9 of its terms, a hundred times more; each case first checks that its
 * rounded and unrounded references differ by more than ten times the
 * tolerance, so a set that skipped the rounding of any operand (the
 * avx512bf16-fma set rounds the implicit convolutions' slices where they
 * are filled, and the filters and dy in its wrappers; on the layers
 * Winograd takes, the input slice, the filters before their transform
 * and dy as its transform loads it) fails here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "cpu/cpu.h"
#include "tap.h"
#include "conv_ref.h"
#include "bf16_sets.h"

static cdp_rng rng;
static cdp_backend *be;
static const char *set = "";

static float *rnd(size_t n)
{
	float *p = be->alloc(be, n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)(cdp_rng_double(&rng) * 2.0 - 1.0);
	return p;
}

static float *rounded(const float *x, size_t n)
{
	float *r = malloc((n ? n : 1) * sizeof *r);
	for (size_t i = 0; i < n; i++)
		r[i] = cpu_bf16_round(x[i]);
	return r;
}

static double scale_of(const double *ref, size_t n)
{
	double s = 1.0;
	for (size_t i = 0; i < n; i++)
		if (fabs(ref[i]) > s)
			s = fabs(ref[i]);
	return s;
}

#define TOL 1e-5
#define WINO_RMS 2.5
#define WINO_MAX 3.5

/* the op at hand runs through the avx512bf16 set's Winograd (conv_one) */
static int wino_dp;

/* a 3x3, stride-1, dilation-1 correlation of s channels into o filters
 * takes it (cpu_conv_wino.c: 32 channels in and 32 filters out or more) */
static int wino_dp_takes(const cdp_backend *b, const cdp_conv_desc *d, int s, int o)
{
	const char *won = getenv("CDP_CPU_WINOGRAD");

	return cpu_bf16_packs_pairs(b) && d->kh == 3 && d->kw == 3 && d->stride == 1 &&
	       d->dil == 1 && s >= 32 && o >= 32 && !(won && strcmp(won, "0") == 0);
}

/* a against the fp32 result unr, as wino_dp's comment above says */
static void near_wino(const float *a, const double *ref, const double *unr, size_t n,
                      const char *what)
{
	double scale = scale_of(ref, n), worst = 0, ea = 0, er = 0, sa = 0, sr = 0;

	for (size_t i = 0; i < n; i++) {
		double da = fabs(a[i] - unr[i]), dr = fabs(ref[i] - unr[i]);
		if (fabs(a[i] - ref[i]) > worst)
			worst = fabs(a[i] - ref[i]);
		ea = da > ea ? da : ea;
		er = dr > er ? dr : er;
		sa += da * da;
		sr += dr * dr;
	}
	CHECK(worst > TOL * scale, "[%s] %s: Winograd ran (results not the direct ones)", set, what);
	CHECK(sa <= WINO_RMS * WINO_RMS * sr, "[%s] %s: rms error against fp32 %.3g, direct bf16's %.3g",
	      set, what, sqrt(sa / n), sqrt(sr / n));
	CHECK(ea <= WINO_MAX * er, "[%s] %s: max error against fp32 %.3g, direct bf16's %.3g", set,
	      what, ea, er);
}

/* max |a - ref| <= TOL * max(1, max |ref|); and the rounding shows: some
 * |ref - unrounded| > 10 * TOL * scale (unr NULL: not checked) */
static void near(const float *a, const double *ref, const double *unr, size_t n,
                 const char *what)
{
	double scale = scale_of(ref, n), worst = 0.0, gap = 0.0;
	size_t at = 0;

	if (wino_dp && unr) {
		near_wino(a, ref, unr, n, what);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		double e = fabs(a[i] - ref[i]);
		if (!(e <= worst)) {
			worst = e;
			at = i;
		}
		if (unr && fabs(ref[i] - unr[i]) > gap)
			gap = fabs(ref[i] - unr[i]);
	}
	CHECK(worst <= TOL * scale, "[%s] %s: max error %.3g at %zu (%.7g vs %.7g), scale %.3g",
	      set, what, worst, at, n ? a[at] : 0.0, n ? ref[at] : 0.0, scale);
	if (unr)
		CHECK(gap > 10 * TOL * scale, "[%s] %s: bf16 rounding moves the reference by only %.3g",
		      set, what, gap);
}

/* The forward's y where it can be written as bf16 (conv_writes_yh): bf16
 * values either way (backend.h), each the rounding of a sum within
 * near()'s tolerance of the reference ref (rounding is monotonic: between the roundings of ref -
 * TOL scale and ref + TOL scale), so an operand left unrounded still
 * shows (it moves a quarter of the values across a bf16 boundary); on
 * Winograd's path, near_wino against ref rounded (both errors then hold
 * the output's rounding) */
static void near_fwd(const float *y, const double *ref, const double *unr, size_t n,
                     const char *what)
{
	double scale = scale_of(ref, n), t = TOL * scale, gap = 0.0;
	double *rr = malloc((n ? n : 1) * sizeof *rr);
	size_t notbf = 0, bad = 0, at = 0;

	for (size_t i = 0; i < n; i++) {
		float lo = cpu_bf16_round((float)(ref[i] - t)), hi = cpu_bf16_round((float)(ref[i] + t));
		notbf += y[i] != cpu_bf16_round(y[i]);
		if (!(y[i] >= lo && y[i] <= hi) && bad++ == 0)
			at = i;
		rr[i] = cpu_bf16_round((float)ref[i]);
		if (fabs(ref[i] - unr[i]) > gap)
			gap = fabs(ref[i] - unr[i]);
	}
	CHECK(notbf == 0, "[%s] %s: %zu of %zu values of y are not bf16", set, what, notbf, n);
	if (wino_dp) {
		near_wino(y, rr, unr, n, what);
	} else {
		CHECK(bad == 0, "[%s] %s: %zu of %zu values not the rounding of the reference, "
		      "first at %zu (%.7g vs %.7g), scale %.3g", set, what, bad, n, at,
		      n ? y[at] : 0.0, n ? ref[at] : 0.0, scale);
		CHECK(gap > 10 * TOL * scale, "[%s] %s: bf16 rounding moves the reference by only %.3g",
		      set, what, gap);
	}
	free(rr);
}

/* batchnorm's backward of a bf16 input (bn_takes_xh) read as it is: the
 * same bits as of its values widened, with and without an activation,
 * planes that are not whole chunks of its widening */
static void test_bn_xh(void)
{
	int n = 3, c = 4, hw = 2 * 2048 + 77;
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *dy = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c);
	float *sm = rnd((size_t)c), *si = rnd((size_t)c), *xr;
	uint16_t *xh = malloc(nx * sizeof *xh);

	for (int i = 0; i < c; i++)
		si[i] = 1.0f + fabsf(si[i]);
	xr = rounded(x, nx);
	for (size_t i = 0; i < nx; i++)
		xh[i] = cpu_bf16_bits(x[i]);
	CHECK(cpu_bn_takes_xh(be) == 1, "[%s] the CPU's bn_bwd does not take a bf16 input", set);
	for (int act = 0; act <= CDP_ACT_RELU; act += CDP_ACT_RELU) {
		float *dxa = rnd(nx), *dxb = malloc(nx * sizeof *dxb), *dya = rnd(nx), *dyb = rnd(nx);
		float dga[4] = { 0 }, dba[4] = { 0 }, dgb[4] = { 0 }, dbb[4] = { 0 };
		memcpy(dxb, dxa, nx * sizeof *dxb);
		memcpy(dya, dy, nx * sizeof *dy);
		memcpy(dyb, dy, nx * sizeof *dy);
		cpu_bn_bwd(be, n, c, hw, xr, 0, NULL, dya, g, bt, sm, si, 1e-5f, act, 0.0f, dxa, 1.0f,
		           dga, dba);
		cpu_bn_bwd(be, n, c, hw, xh, 1, NULL, dyb, g, bt, sm, si, 1e-5f, act, 0.0f, dxb, 1.0f,
		           dgb, dbb);
		CHECK(memcmp(dxa, dxb, nx * sizeof *dxa) == 0 && memcmp(dga, dgb, sizeof dga) == 0 &&
		      memcmp(dba, dbb, sizeof dba) == 0,
		      "[%s] bn_bwd (act %d) of the bf16 input differs from the widened one's", set, act);
		be->free(be, dxa); be->free(be, dya); be->free(be, dyb);
		free(dxb);
	}
	be->free(be, x); be->free(be, dy); be->free(be, g); be->free(be, bt);
	be->free(be, sm); be->free(be, si);
	free(xr); free(xh);
}

/* bn_fwd_train_h: y, the saved and the running statistics those of
 * bn_fwd_train bit for bit, and the copies those of to_bf16 of x and of
 * y; each copy alone too (planes of two chunks and a piece), and y's
 * copy without y */
static void test_bn_fwd_h(void)
{
	int n = 3, c = 4, hw = 2 * 2048 + 77;
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c);
	float *ya = rnd(nx), *yb = rnd(nx), sa[4 * 4], sb[4 * 4];
	uint16_t *xh = malloc(nx * sizeof *xh), *yh = malloc(nx * sizeof *yh);
	uint16_t *rx = malloc(nx * sizeof *rx), *ry = malloc(nx * sizeof *ry);

	for (int act = 0; act <= CDP_ACT_RELU; act += CDP_ACT_RELU)
		for (int which = 1; which <= 3; which++) {
			for (int i = 0; i < 4 * c; i++)
				sa[i] = sb[i] = 0.5f;
			memset(xh, 0, nx * sizeof *xh);
			memset(yh, 0, nx * sizeof *yh);
			cpu_bn_fwd_train(be, n, c, hw, x, g, bt, ya, sa, sa + c, 0.1f, 1e-5f,
			                 sa + 2 * c, sa + 3 * c, act, 0.0f);
			cpu_bn_fwd_train_h(be, n, c, hw, x, which & 1 ? xh : NULL, g, bt, yb,
			                   which & 2 ? yh : NULL, sb, sb + c, 0.1f, 1e-5f, sb + 2 * c,
			                   sb + 3 * c, act, 0.0f);
			cpu_to_bf16(be, x, rx, nx);
			cpu_to_bf16(be, ya, ry, nx);
			CHECK(memcmp(ya, yb, nx * sizeof *ya) == 0 && memcmp(sa, sb, sizeof sa) == 0,
			      "[%s] bn_fwd_train_h (act %d, copies %d): y or the statistics differ from "
			      "bn_fwd_train's", set, act, which);
			CHECK(!(which & 1) || memcmp(xh, rx, nx * sizeof *xh) == 0,
			      "[%s] bn_fwd_train_h (act %d): x's copy is not to_bf16's", set, act);
			CHECK(!(which & 2) || memcmp(yh, ry, nx * sizeof *yh) == 0,
			      "[%s] bn_fwd_train_h (act %d): y's copy is not to_bf16's", set, act);
			if (which != 3)
				continue;
			/* y NULL: the copy alone (bn_fwd_h_alone), the same */
			memset(yh, 0, nx * sizeof *yh);
			cpu_bn_fwd_train_h(be, n, c, hw, x, NULL, g, bt, NULL, yh, sb, sb + c, 0.1f,
			                   1e-5f, sb + 2 * c, sb + 3 * c, act, 0.0f);
			CHECK(cpu_bn_fwd_h_alone(be) == 1 && memcmp(yh, ry, nx * sizeof *yh) == 0,
			      "[%s] bn_fwd_train_h (act %d) without y: its copy is not to_bf16's", set,
			      act);
			/* x NULL: the input read from its bf16 copy (a convolution's
			 * output written so), as bn_fwd_train of it widened */
			{
				float *xw = rounded(x, nx);
				for (int i = 0; i < 4 * c; i++)
					sa[i] = sb[i] = 0.5f;
				cpu_bn_fwd_train(be, n, c, hw, xw, g, bt, ya, sa, sa + c, 0.1f, 1e-5f,
				                 sa + 2 * c, sa + 3 * c, act, 0.0f);
				cpu_to_bf16(be, ya, ry, nx);
				memset(yh, 0, nx * sizeof *yh);
				cpu_bn_fwd_train_h(be, n, c, hw, NULL, rx, g, bt, yb, yh, sb, sb + c, 0.1f,
				                   1e-5f, sb + 2 * c, sb + 3 * c, act, 0.0f);
				CHECK(memcmp(ya, yb, nx * sizeof *ya) == 0 && memcmp(sa, sb, sizeof sa) == 0 &&
				      memcmp(yh, ry, nx * sizeof *yh) == 0,
				      "[%s] bn_fwd_train_h (act %d) of a bf16 input differs from "
				      "bn_fwd_train of it widened", set, act);
				free(xw);
			}
		}
	be->free(be, x); be->free(be, g); be->free(be, bt); be->free(be, ya); be->free(be, yb);
	free(xh); free(yh); free(rx); free(ry);
}

/* Batchnorm's passes on AVX-512 (cpu_kgemm_wide) and in generic vectors
 * (the avx2 kernels forced) give the same bits: the forward of float and
 * of bf16 inputs with the copies (bn_fwd_train_h), eval mode's
 * (bn_fwd_infer), and the backward; for each activation, on planes of
 * whole chunks and a piece, and values spanning zero */
static void bn_all(int act, float *const out[6], uint16_t *const hout[3], const float *x,
                   const uint16_t *xh, const float *dy, int n, int c, int hw)
{
	size_t nx = (size_t)n * c * hw;
	static const float g[4] = { 1.5f, -0.7f, 0.2f, 2.0f }, bt[4] = { 0.1f, -0.3f, 0.0f, 0.5f };
	static const float sm[4] = { 0.05f, -0.1f, 0.2f, 0.0f }, si[4] = { 1.2f, 0.8f, 2.0f, 1.0f };
	float *st = out[5];

	for (int i = 0; i < 8 * c; i++)
		st[i] = 0.5f;
	cpu_bn_fwd_train_h(be, n, c, hw, x, hout[0], g, bt, out[0], hout[1], st, st + c, 0.1f,
	                   1e-5f, st + 2 * c, st + 3 * c, act, 0.1f);
	cpu_bn_fwd_train_h(be, n, c, hw, NULL, (uint16_t *)xh, g, bt, out[1], hout[2], st + 4 * c,
	                   st + 5 * c, 0.1f, 1e-5f, st + 6 * c, st + 7 * c, act, 0.1f);
	cpu_bn_fwd_infer(be, n, c, hw, x, g, bt, out[2], sm, si, 1e-5f, act, 0.1f);
	memcpy(out[3], dy, nx * sizeof *dy);
	for (int i = 0; i < 2 * c; i++)
		st[8 * c + i] = 0.0f;
	cpu_bn_bwd(be, n, c, hw, x, 0, NULL, out[3], g, bt, sm, si, 1e-5f, act, 0.1f, out[4], 0.0f,
	           st + 8 * c, st + 9 * c);
}

static void test_bn_wide(void)
{
	int n = 3, c = 4, hw = 2 * 2048 + 77;
	size_t nx = (size_t)n * c * hw;
	const char *isa = cpu_kgemm_isa();
	float *x = rnd(nx), *dy = rnd(nx), *o[2][6];
	uint16_t *h[2][3], *xh = malloc(nx * sizeof *xh);

	if (cpu_kgemm_force("avx512") < 0) {
		printf("# no AVX-512: batchnorm's wide passes not compared\n");
		be->free(be, x); be->free(be, dy); free(xh);
		return;
	}
	for (size_t i = 0; i < nx; i++)
		xh[i] = cpu_bf16_bits(x[i] * 3.0f);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 5; i++)
			o[k][i] = malloc(nx * sizeof(float));
		o[k][5] = calloc(10 * (size_t)c, sizeof(float));
		for (int i = 0; i < 3; i++)
			h[k][i] = calloc(nx, sizeof(uint16_t));
	}
	for (int act = 0; act <= CDP_ACT_LEAKY; act++) {
		int same = 1;
		cpu_kgemm_force("avx512");
		CHECK(cpu_kgemm_wide(), "avx512 forced: the wide passes");
		bn_all(act, o[0], h[0], x, xh, dy, n, c, hw);
		cpu_kgemm_force("avx2");
		bn_all(act, o[1], h[1], x, xh, dy, n, c, hw);
		for (int i = 0; i < 5; i++)
			same &= memcmp(o[0][i], o[1][i], nx * sizeof(float)) == 0;
		same &= memcmp(o[0][5], o[1][5], 10 * (size_t)c * sizeof(float)) == 0;
		for (int i = 0; i < 3; i++)
			same &= memcmp(h[0][i], h[1][i], nx * sizeof(uint16_t)) == 0;
		CHECK(same, "batchnorm (act %d): the AVX-512 passes differ from the generic ones", act);
	}
	cpu_kgemm_force(isa);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 6; i++)
			free(o[k][i]);
		for (int i = 0; i < 3; i++)
			free(h[k][i]);
	}
	be->free(be, x); be->free(be, dy); free(xh);
}

static int xh_cases, yh_cases;

/* The bf16 input (d->xh, conv_takes_xh) read as it is: the same bits as
 * its values widened to float (xr), forward (y: x's, which equals xr's)
 * and filter gradient */
static void xh_same(const cdp_conv_desc *d, int ci, const float *xr, const float *w,
                    const float *b, const float *dy, const float *y, void *ws)
{
	size_t nx = (size_t)d->n * d->c * d->h * d->w, ny = (size_t)d->n * d->f * d->oh * d->ow;
	size_t nw = (size_t)d->f * d->c * d->kh * d->kw;
	uint16_t *xh = be->alloc(be, nx * sizeof *xh);
	float *y3 = rnd(ny), *dwa = be->alloc(be, nw * sizeof *dwa), *dwb = be->alloc(be, nw * sizeof *dwb);
	cdp_conv_desc dh = *d;

	for (size_t i = 0; i < nx; i++)
		xh[i] = cpu_bf16_bits(xr[i]);
	dh.xh = 1;
	cpu_conv_fwd(be, &dh, xh, w, b, y3, ws);
	CHECK(memcmp(y, y3, ny * sizeof *y) == 0, "[%s] conv case %d: fwd of the bf16 input differs",
	      set, ci);
	cpu_conv_bwd_filter(be, d, xr, dy, dwa, NULL, ws);
	cpu_conv_bwd_filter(be, &dh, xh, dy, dwb, NULL, ws);
	CHECK(memcmp(dwa, dwb, nw * sizeof *dwa) == 0,
	      "[%s] conv case %d: filter gradient of the bf16 input differs", set, ci);
	xh_cases++;
	be->free(be, xh); be->free(be, y3); be->free(be, dwa); be->free(be, dwb);
}

static void conv_one(const conv_case *cc, int ci)
{
	cdp_conv_desc d;
	char what[96];

	if (conv_case_desc(cc, &d) < 0) {
		CHECK(0, "case %d: desc_init failed", ci);
		return;
	}
	size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.f * d.oh * d.ow;
	size_t nw = (size_t)d.f * d.c * d.kh * d.kw, nf = (size_t)d.f;
	float *x = rnd(nx), *w = rnd(nw), *b = rnd(nf), *dy = rnd(ny);
	float *xr = rounded(x, nx), *wr = rounded(w, nw), *dyr = rounded(dy, ny);
	float *y = rnd(ny), *dx = rnd(nx), *dw = rnd(nw), *db = rnd(nf);
	double *ry = calloc(ny, sizeof *ry), *rdx = calloc(nx, sizeof *rdx);
	double *rdw = calloc(nw, sizeof *rdw), *rdb = calloc(nf, sizeof *rdb);
	double *uy = calloc(ny, sizeof *uy), *udx = calloc(nx, sizeof *udx);
	double *udw = calloc(nw, sizeof *udw), *udb = calloc(nf, sizeof *udb);
	double *sdb = calloc(nf, sizeof *sdb);
	void *ws = be->alloc(be, cpu_conv_workspace(be, &d));

	/* the forward and the filter gradient correlate C channels into F,
	 * the data gradient F into C: each sets wino_dp before its near() */
	wino_dp = wino_dp_takes(be, &d, d.c, d.f);
	conv_ref(&d, xr, wr, b, dyr, ry, rdx, rdw, rdb);
	conv_ref(&d, x, w, b, dy, uy, udx, udw, udb);
	snprintf(what, sizeof what, "conv case %d fwd", ci);
	cpu_conv_fwd(be, &d, x, w, b, y, ws);
	if (cpu_conv_writes_yh(be, &d))
		near_fwd(y, ry, uy, ny, what);
	else
		near(y, ry, uy, ny, what);
	/* y written as bf16 alone (d->yh, conv_writes_yh): y's bits */
	if (cpu_conv_writes_yh(be, &d)) {
		cdp_conv_desc dh = d;
		uint16_t *yh = be->alloc(be, ny * sizeof *yh), *ry16 = malloc(ny * sizeof *ry16);
		dh.yh = 1;
		memset(yh, 0xff, ny * sizeof *yh);
		cpu_conv_fwd(be, &dh, x, w, b, yh, ws);
		cpu_to_bf16(be, y, ry16, ny);
		CHECK(memcmp(yh, ry16, ny * sizeof *yh) == 0, "[%s] %s: y written as bf16 is not y's "
		      "bits", set, what);
		yh_cases++;
		be->free(be, yh);
		free(ry16);
	}
	/* the input only through its bf16 values: the stash hands a
	 * convolution its input rounded (net_plan.c) and must not change it */
	float *y2 = rnd(ny);
	cpu_conv_fwd(be, &d, xr, w, b, y2, ws);
	CHECK(memcmp(y, y2, ny * sizeof *y) == 0, "[%s] %s: the input rounded first changes y", set,
	      what);
	be->free(be, y2);
	/* conv_fwd_bn (the inference net's, which the VDPBF16PS paired
	 * slice applies as it stores): the same bits as conv_fwd and then
	 * bn_fwd_infer, with and without the bias, for each activation */
	for (int k = 0; k < 6; k++) {
		int act = k % 3 == 0 ? 0 : k % 3 == 1 ? CDP_ACT_RELU : CDP_ACT_LEAKY;
		const float *bias = k < 3 ? b : NULL;
		float *g = rnd(nf), *bb = rnd(nf), *m = rnd(nf), *v = rnd(nf);
		float *y1 = rnd(ny), *yf = rnd(ny);
		cdp_bn_infer bn = { g, bb, m, v, 1e-5f, 0.1f, act };
		for (size_t f = 0; f < nf; f++)
			v[f] = 0.5f + v[f] * v[f];
		cpu_conv_fwd(be, &d, x, w, bias, y1, ws);
		cpu_bn_fwd_infer(be, d.n, d.f, d.oh * d.ow, y1, g, bb, y1, m, v, 1e-5f, act, 0.1f);
		cpu_conv_fwd_bn(be, &d, x, w, bias, &bn, yf, ws);
		CHECK(memcmp(y1, yf, ny * sizeof *y1) == 0,
		      "[%s] %s: conv_fwd_bn (act %d, %s) is not conv_fwd then bn_fwd_infer", set,
		      what, act, bias ? "bias" : "no bias");
		be->free(be, g); be->free(be, bb); be->free(be, m); be->free(be, v);
		be->free(be, y1); be->free(be, yf);
	}
	snprintf(what, sizeof what, "conv case %d bwd_data", ci);
	cpu_conv_bwd_data(be, &d, dy, w, dx, 0.0f, ws);
	wino_dp = wino_dp_takes(be, &d, d.f, d.c);
	near(dx, rdx, udx, nx, what);
	{
		/* beta 1 (a tensor read by two layers sums their gradients):
		 * old + the same sums, within fp32's tolerance of the largest
		 * value (sets may add old first or last) */
		float *old = rnd(nx), *acc = rnd(nx), scale = 0.0f;
		size_t bad = 0;
		memcpy(acc, old, nx * sizeof *acc);
		cpu_conv_bwd_data(be, &d, dy, w, acc, 1.0f, ws);
		for (size_t i = 0; i < nx; i++)
			scale = fmaxf(scale, fabsf(old[i]) + fabsf(dx[i]));
		for (size_t i = 0; i < nx; i++)
			bad += !(fabsf(acc[i] - (old[i] + dx[i])) <= (float)TOL * scale);
		CHECK(bad == 0, "[%s] %s, beta 1: %zu of %zu values are not old + beta 0's", set,
		      what, bad, nx);
		be->free(be, old);
		be->free(be, acc);
	}
	if (cpu_col2im_disjoint(&d)) {
		/* beta 1 onto zeros takes the column path: the zipped rows
		 * (beta 0) hold the same sums */
		float *dx2 = rnd(nx);
		size_t bad = 0;
		memset(dx2, 0, nx * sizeof *dx2);
		cpu_conv_bwd_data(be, &d, dy, w, dx2, 1.0f, ws);
		for (size_t i = 0; i < nx; i++)
			bad += !(dx[i] == dx2[i]);
		CHECK(bad == 0, "[%s] %s: %zu of %zu values differ from the column path's", set,
		      what, bad, nx);
		be->free(be, dx2);
		/* and its forward: with a bias of zeros it takes the column path,
		 * without one the pairs read side by side (cpu_bf16f_nn_cp) */
		float *ya = rnd(ny), *yb = rnd(ny), *zb = rnd(nf);
		memset(zb, 0, nf * sizeof *zb);
		cpu_conv_fwd(be, &d, x, w, NULL, ya, ws);
		cpu_conv_fwd(be, &d, x, w, zb, yb, ws);
		bad = 0;
		for (size_t i = 0; i < ny; i++)
			bad += !(ya[i] == yb[i]);
		CHECK(bad == 0, "[%s] conv case %d fwd without a bias: %zu of %zu values differ from "
		      "the column path's", set, ci, bad, ny);
		be->free(be, ya); be->free(be, yb); be->free(be, zb);
	}
	/* dw and dbias accumulate into what they hold */
	for (size_t i = 0; i < nw; i++) {
		rdw[i] += dw[i];
		udw[i] += dw[i];
	}
	for (size_t i = 0; i < nf; i++)
		sdb[i] = db[i] + udb[i];     /* the bias gradient sums dy in fp32 */
	snprintf(what, sizeof what, "conv case %d bwd_filter", ci);
	cpu_conv_bwd_filter(be, &d, x, dy, dw, db, ws);
	/* the filter gradient from 64 x 64 channels on, or where a tile row
	 * has an even number of tiles (cpu_conv_winof.c's pp) */
	wino_dp = wino_dp_takes(be, &d, d.c, d.f) &&
	          ((long)d.c * d.f >= 64 * 64 || (d.ow + 1) / 2 % 2 == 0);
	near(dw, rdw, udw, nw, what);
	snprintf(what, sizeof what, "conv case %d dbias", ci);
	near(db, sdb, NULL, nf, what);
	{
		/* and the filter gradient, from x as from its bf16 values */
		float *dw1 = rnd(nw), *dw2 = rnd(nw);
		memset(dw1, 0, nw * sizeof *dw1);
		memset(dw2, 0, nw * sizeof *dw2);
		cpu_conv_bwd_filter(be, &d, x, dy, dw1, NULL, ws);
		cpu_conv_bwd_filter(be, &d, xr, dy, dw2, NULL, ws);
		CHECK(memcmp(dw1, dw2, nw * sizeof *dw1) == 0,
		      "[%s] conv case %d bwd_filter: the input rounded first changes dw", set, ci);
		be->free(be, dw1);
		be->free(be, dw2);
	}
	if (cpu_conv_takes_xh(be, &d))
		xh_same(&d, ci, xr, w, b, dy, y, ws);
	else
		CHECK(d.stride != 1 || (d.kh == 1 && d.kw == 1) || !cpu_iconv_usable(&d),
		      "[%s] conv case %d: the implicit plan does not take a bf16 input", set, ci);
	be->free(be, x); be->free(be, w); be->free(be, b); be->free(be, dy);
	be->free(be, y); be->free(be, dx); be->free(be, dw); be->free(be, db);
	be->free(be, ws);
	free(xr); free(wr); free(dyr);
	free(ry); free(rdx); free(rdw); free(rdb); free(uy); free(udx); free(udw); free(udb); free(sdb);
	wino_dp = 0;
}

static void test_conv(void)
{
	/* a case per plan of cpu_conv.c (and its kcol and implicit files) */
	static const conv_case cases[] = {
		{ 2, 8, 20, 64, 16, 3, 1, 1, 1 },  /* implicit, rows in place (width 64) */
		{ 1, 16, 60, 96, 8, 3, 1, 1, 1 },  /* the same in several chunks */
		{ 8, 16, 8, 8, 24, 3, 1, 1, 1 },   /* small planes: kcol, samples stacked */
		{ 2, 6, 30, 40, 5, 3, 1, 2, 2 },   /* kcol, dilation 2 */
		{ 2, 12, 15, 17, 10, 1, 1, 0, 1 }, /* 1x1 */
		{ 2, 8, 9, 9, 6, 3, 2, 2, 2 },     /* batched plan: dilation, stride 2 */
		{ 2, 8, 16, 16, 6, 2, 2, 0, 1 },   /* 2x2 stride 2 (the deconv's) */
		/* the same where the avx512bf16 set zips its data gradient
		 * (cpu_bf16f_nn_zip): rows of 16 columns, several per gemm,
		 * 12 rows of A (a tile of 8, one of 4), K odd; rows of 24
		 * columns one per gemm (masked columns), 20 rows of A */
		{ 2, 3, 20, 32, 5, 2, 2, 0, 1 },
		{ 1, 5, 12, 48, 7, 2, 2, 0, 1 },
		{ 1, 4, 20, 22, 6, 3, 1, 3, 1 },   /* im2col rows */
		{ 3, 6, 40, 34, 7, 3, 2, 1, 1 },   /* stride 2 rows, batch 3 */
		{ 2, 6, 42, 40, 7, 3, 2, 1, 1 },   /* stride 2 by phases (21x20 out) */
		/* 3x3, 64+ channels: Winograd in the avx512bf16-fma set (its
		 * filter gradient in chunks, then in parts) and the avx512bf16
		 * set (rounding the transformed values), direct elsewhere */
		{ 2, 64, 13, 14, 72, 3, 1, 1, 1 },
		{ 4, 64, 32, 34, 66, 3, 1, 1, 1 },
		/* the same where a tile row has an even number of tiles, and
		 * the avx512bf16 set's transforms round V and Z themselves
		 * (cpu_conv_winof.c, pp): 16 tiles a row, in chunks; 6 tiles
		 * a row (4 a vector, then one at a time) and 70 filters (64 by
		 * vectors, the rest one at a time, a masked last column block
		 * of the gemm), in chunks; 16-wide planes (two tile rows a
		 * vector) in parts */
		{ 1, 64, 8, 32, 66, 3, 1, 1, 1 },
		{ 2, 64, 12, 12, 70, 3, 1, 1, 1 },
		{ 16, 64, 16, 16, 64, 3, 1, 1, 1 },
		/* 32 channels, 16 filters: direct in every set (the paired
		 * slice in the amx and avx512bf16 sets), though 32 channels
		 * and more would be Winograd's (cpu_conv_wino.c says why 16
		 * filters are not) */
		{ 2, 32, 14, 20, 16, 3, 1, 1, 1 },
		/* widths of 32: the amx set's paired slices (cpu_conv_pairs.c,
		 * more than 8 channels; 8 or fewer go to kcol, as the first
		 * case does; the avx512bf16 set's VDPBF16PS takes every case
		 * of more than 8 channels that Winograd does not, the narrow
		 * planes above read as one long row of the padded grid, whose
		 * pieces of rows the stores split again): 40 channels (two tiles of pairs, the second half
		 * zeros) and 40 filters (32 + 8 rows of C; Winograd's forward
		 * and data gradient in the avx512bf16 set, and its filter
		 * gradient, 16 tiles a row, pp); 9 channels (a
		 * channel without a partner), 20 filters; dilation 2; 64
		 * channels at 256 columns, the slice in two chunks of rows */
		{ 2, 40, 12, 32, 40, 3, 1, 1, 1 },
		{ 1, 9, 10, 32, 20, 3, 1, 1, 1 },
		{ 1, 10, 12, 32, 5, 3, 1, 2, 2 },
		{ 1, 64, 40, 256, 8, 3, 1, 1, 1 },
		/* widths of 16 and 48 (the last column block alone) */
		{ 2, 24, 8, 16, 36, 3, 1, 1, 1 },
		{ 1, 12, 6, 48, 20, 3, 1, 1, 1 },
		/* the amx and avx512bf16 sets' filter gradient
		 * (cpu_conv_grid_filter.c) takes
		 * the cases above of output widths of 32 or more (amx's of 8
		 * channels or more: not the 6 of dilation 2); here 9 channels (a block of 16 half zeros), 7
		 * filters, dilation 2, an odd padded width (37, laid 38 wide) */
		{ 2, 9, 14, 33, 7, 3, 1, 2, 2 },
		/* Winograd's forward in the avx512bf16 sets, its output
		 * written as bf16 alone too (d->yh): 16-wide planes, two tile
		 * rows a vector (output_rows2); an odd width and height (the
		 * last tile's second column and row outside the plane) */
		{ 2, 32, 16, 16, 32, 3, 1, 1, 1 },
		{ 1, 32, 9, 15, 40, 3, 1, 1, 1 },
		/* 9 tiles a row: the avx512bf16 set's filter gradient of
		 * fewer than 64 x 64 channels is direct there */
		{ 1, 32, 10, 18, 36, 3, 1, 1, 1 },
	};
	xh_cases = yh_cases = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		conv_one(&cases[i], (int)i);
	CHECK(xh_cases == 20, "[%s] %d cases read a bf16 input as it is, not the 20 implicit ones", set,
	      xh_cases);
	{
		/* Winograd's 9 in the avx512bf16 sets; the row-by-row gemm's
		 * widths of 32s where no paired slice takes them (8 channels
		 * or fewer in the amx and avx512bf16 sets): 1, else 7; the
		 * avx512bf16 set's paired rows of whole vectors (widths of
		 * 16s from 32, more than 8 channels, not Winograd's): 96,
		 * 32 (9 channels), 32 (dilation 2), 256 and 48 wide, 5 */
		const char *won = getenv("CDP_CPU_WINOGRAD");
		int dp = strcmp(set, "avx512bf16") == 0;
		int wino = (dp || strcmp(set, "avx512bf16-fma") == 0) && !(won && strcmp(won, "0") == 0);
		int rows = strcmp(set, "amx") == 0 || dp ? 1 : 7;
		if (wino && strcmp(set, "avx512bf16-fma") == 0)
			rows -= 2;      /* of the seven, Winograd takes 40 and 64 channels 32 wide */
		/* without Winograd the paired rows take those two too */
		int paired = dp ? (wino ? 5 : 7) : 0;
		CHECK(yh_cases == (wino ? 9 : 0) + rows + paired,
		      "[%s] %d cases write y as bf16 alone, not %d", set, yh_cases,
		      (wino ? 9 : 0) + rows + paired);
	}
}

static void test_gemm(void)
{
	/* alpha 1 (our kernels: nn for ta or not, nt for tb) and 0.5 (OpenBLAS
	 * on rounded copies); one call and a split one */
	static const int shapes[][3] = { { 9, 7, 40 }, { 67, 45, 400 }, { 33, 130, 300 } };
	for (size_t si = 0; si < 3; si++)
		for (int t = 0; t < 8; t++) {
			int ta = t & 1, tb = (t >> 1) & 1, half = t >> 2;
			int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
			float alpha = half ? 0.5f : 1.0f, beta = tb && !half ? 1.0f : 0.0f;
			float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n), *c = rnd((size_t)m * n);
			double *ref = calloc((size_t)m * n, sizeof *ref), *unr = calloc((size_t)m * n, sizeof *unr);
			char what[96];

			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					double s = 0, u = 0;
					for (int q = 0; q < k; q++) {
						float av = ta ? a[q * m + i] : a[i * k + q];
						float bv = tb ? b[j * k + q] : b[q * n + j];
						s += (double)cpu_bf16_round(av) * cpu_bf16_round(bv);
						u += (double)av * bv;
					}
					ref[i * n + j] = alpha * s + beta * c[i * n + j];
					unr[i * n + j] = alpha * u + beta * c[i * n + j];
				}
			cpu_gemm(be, ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
			snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d alpha %g", m, n, k, ta, tb, alpha);
			near(c, ref, unr, (size_t)m * n, what);
			be->free(be, a); be->free(be, b); be->free(be, c); free(ref); free(unr);
		}
}

/* The stash's conversions (to_bf16 / from_bf16, vectorized where the CPU
 * has AVX-512) give cpu_bf16_round's bits at every length and for every
 * kind of value: normal, denormal, zeros, infinities, NaN (kept a NaN),
 * ties (to even), and values that round up into the next binade. */
static uint32_t bits_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static void test_stash_bits(void)
{
	static const uint32_t special[] = { 0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,
		0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0x3f808000u,
		0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x3fffffffu, 0x00ff8000u, 0x4b3f7fffu };
	size_t n = 16 * 37 + 11;
	float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	uint16_t *h = malloc(n * sizeof *h);
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t u = i < 16 ? special[i] : i % 3 == 0 ? (uint32_t)cdp_rng_next(&rng)
		             : special[i % 16] ^ (uint32_t)(cdp_rng_next(&rng) & 0x0001ffffu);
		memcpy(&x[i], &u, sizeof u);
	}
	/* pass 1 as made (denormals in most vectors); pass 2 with every
	 * denormal made normal, so that every vector of the other kinds takes
	 * VCVTNEPS2BF16 where the CPU has it (denormals go the integer way) */
	for (int pass = 0; pass < 2; pass++)
	for (size_t len = 0; len <= n; len += len < 40 ? 1 : 97) {
		if (pass == 1 && len == 0)
			for (size_t i = 0; i < n; i++) {
				uint32_t u = bits_of(x[i]);
				if ((u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0)
					u |= 0x00800000u;
				memcpy(&x[i], &u, sizeof u);
			}
		memset(h, 0xa5, n * sizeof *h);
		cpu_to_bf16(be, x, h, len);
		cpu_from_bf16(be, h, y, len);
		for (size_t i = 0; i < len; i++) {
			float r = cpu_bf16_round(x[i]);
			uint32_t ur, uy;
			memcpy(&ur, &r, sizeof ur);
			memcpy(&uy, &y[i], sizeof uy);
			if (h[i] != (uint16_t)(ur >> 16) || uy != ur) {
				if (!bad++)
					CHECK(0, "stash: length %zu, element %zu: %08x gives %04x, back %08x; "
					      "cpu_bf16_round %08x", len, i, (unsigned)bits_of(x[i]),
					      h[i], uy, ur);
			}
		}
		CHECK(len == n || h[len] == 0xa5a5, "stash: to_bf16 of %zu wrote past the end", len);
	}
	CHECK(bad == 0, "stash conversions equal cpu_bf16_round (%d differences)", bad);
	free(x); free(y); free(h);
}

int main(void)
{
	int ran = 0;

	cdp_rng_seed(&rng, 20261202);
	be = cdp_backend_cpu(3);
	if (!be) {
		fprintf(stderr, "test_bf16_sets: cannot create the cpu backend\n");
		return 99;
	}
	for (int i = 0; i < BF16_NSETS; i++) {
		if (bf16_set_enter(be, i) < 0)
			continue;
		set = bf16_sets[i];
		test_conv();
		test_bn_xh();
		test_gemm();
		ran++;
	}
	CHECK(ran >= 1, "the emulated set at least ran");
	test_stash_bits();
	test_bn_fwd_h();
	test_bn_wide();
	cpu_kgemm_bf16_force(NULL);
	be->destroy(be);
	return tap_done();
}
