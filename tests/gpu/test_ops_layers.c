/* test_ops_layers.c: batchnorm, activations, pooling, upsampling, channel
 * copies, dropout, global average pool, bias, add and diff, each forward and
 * backward with beta 0 and 1 on both sides (gpu_harness.h). Pure moves
 * (channel copies, max values, dropout masks) must agree bit for bit.
 * test_edges (run last): NaN through activations and max pooling, bn's
 * per-channel arrays off 16-byte alignment, bn over one value per channel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_ops.h"

/* ---- batch norm over (N, C, HW), with its fused activation ---- */

/* The largest |dev - ref| of n floats of b. */
static double bn_dx_diff(const gh_buf *b, size_t n)
{
	float *d = gh_host(b, GH_DEV), *r = gh_host(b, GH_REF);
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)d[i] - r[i]));
	free(d);
	free(r);
	return m;
}

/* The size of batchnorm backward's terms: max |gamma * invstd| (side 0's,
 * `off` floats in) times max |dy|. */
static double bn_dx_scale(const gh_buf *g, const gh_buf *si, int off, int c, const gh_buf *dy,
                          size_t n)
{
	float *hg = gh_host(g, GH_REF), *hs = gh_host(si, GH_REF), *hd = gh_host(dy, GH_REF);
	double a = 0, m = 0;

	for (int i = 0; i < c; i++)
		a = fmax(a, fabs((double)hg[off + i] * hs[off + i]));
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)hd[i]));
	free(hg);
	free(hs);
	free(hd);
	return a * m;
}

/* act: 0, CDP_ACT_RELU or CDP_ACT_LEAKY; name: "" or its name and a space.
 * x is uniform in [-xw, 5 xw]. off: the per-channel arrays (gamma, beta,
 * running and saved statistics, their gradients) start `off` floats into
 * their buffers, as a net's packed parameters and buffers may (1: not
 * 16-byte aligned); the buffers are compared whole, the head included. */
static void bn_case(int n, int c, int hw, int act, float slope, const char *name, float eps,
                    float xw, int off)
{
	size_t nx = (size_t)n * c * hw, nc = (size_t)c + off;
	gh_buf x = gh_rand(nx, -xw, 5 * xw), g = gh_rand(nc, 0.5f, 1.5f), bt = gh_rand(nc, -1, 1);
	gh_buf y = gh_rand(nx, -1, 1), rm = gh_rand(nc, -1, 1), rv = gh_rand(nc, 0.5f, 2);
	gh_buf sm = gh_alloc(nc * 4), si = gh_alloc(nc * 4), dy = gh_rand(nx, -1, 1);
	gh_buf dx = gh_rand(nx, -1, 1), dg = gh_rand(nc, -1, 1), db = gh_rand(nc, -1, 1);
	float *dy0 = gh_host(&dy, 0), *yh;
	char what[128];
#define BN_CMP(what_, b, cnt) do { \
	snprintf(what, sizeof what, "bn %s%s (%d,%d,%d)", name, what_, n, c, hw); \
	gh_cmp(what, &(b), (cnt), GH_TOL); } while (0)
	/* With two values per channel (N*H*W == 2) x-hat is +-1 whatever x is,
	 * so dx is 0 up to eps's share: what is left is the cancellation of
	 * terms of size gamma*invstd*|dy|, and each side's rounding of those
	 * terms is its error (2.4e-7 on values of 1e-4, CPU against cuDNN).
	 * There dx is measured against the terms' size, elsewhere value by
	 * value. */
#define BN_CMP_DX(what_) do { \
	if ((size_t)n * hw > 2) { BN_CMP(what_, dx, nx); break; } \
	snprintf(what, sizeof what, "bn %s%s (%d,%d,%d), of the terms", name, what_, n, c, hw); \
	gh_cmp_scalar(what, bn_dx_diff(&dx, nx), 0.0, GH_TOL, bn_dx_scale(&g, &si, off, c, &dy, nx)); \
	} while (0)
#define PC(b, s) (GF(b, s) + off)

	GH_BOTH(s, be)
		be->bn_fwd_train(be, n, c, hw, GF(x, s), PC(g, s), PC(bt, s), GF(y, s), PC(rm, s),
		                 PC(rv, s), 0.1f, eps, PC(sm, s), PC(si, s), act, slope);
	BN_CMP("train y", y, nx);
	BN_CMP("running mean", rm, nc);
	BN_CMP("running var (unbiased)", rv, nc);
	BN_CMP("saved mean", sm, nc);
	BN_CMP("saved invstd", si, nc);
	/* y is side 0's on both sides, so a side that masks by y (CUDA) uses
	 * the mask that side 0 computes again from x (a value within rounding
	 * of 0 could otherwise flip it); a backend may overwrite dy when act
	 * != 0 (backend.h): it is set again before each call */
	yh = gh_host(&y, 0);
	gh_set(&y, yh, nx * 4);
	free(yh);
	GH_BOTH(s, be)
		be->bn_bwd(be, n, c, hw, GF(x, s), 0, GF(y, s), GF(dy, s), PC(g, s), PC(bt, s), PC(sm, s),
		           PC(si, s), eps, act, slope, GF(dx, s), 0.0f, PC(dg, s), PC(db, s));
	BN_CMP_DX("bwd dx beta 0");
	BN_CMP("bwd dgamma +=", dg, nc);
	BN_CMP("bwd dbeta +=", db, nc);
	gh_set(&dy, dy0, nx * 4);
	GH_BOTH(s, be)
		be->bn_bwd(be, n, c, hw, GF(x, s), 0, GF(y, s), GF(dy, s), PC(g, s), PC(bt, s), PC(sm, s),
		           PC(si, s), eps, act, slope, GF(dx, s), 1.0f, PC(dg, s), PC(db, s));
	BN_CMP_DX("bwd dx beta 1");
	GH_BOTH(s, be)
		be->bn_fwd_infer(be, n, c, hw, GF(x, s), PC(g, s), PC(bt, s), GF(y, s), PC(rm, s),
		                 PC(rv, s), eps, act, slope);
	BN_CMP("infer y", y, nx);
#undef PC
#undef BN_CMP
#undef BN_CMP_DX
	free(dy0);
	gh_free(&x); gh_free(&g); gh_free(&bt); gh_free(&y); gh_free(&rm); gh_free(&rv);
	gh_free(&sm); gh_free(&si); gh_free(&dy); gh_free(&dx); gh_free(&dg); gh_free(&db);
}

/* bn_sync's parts (bn_sums, bn_grad_sums, bn_bwd_dx): the sums come back
 * to the host as doubles, compared as floats; dx with beta 0 and 1 */
static void bn_parts_case(int n, int c, int hw)
{
	size_t nx = (size_t)n * c * hw, nc = (size_t)c;
	gh_buf x = gh_rand(nx, -1, 5), k = gh_rand(nc, -1, 1), dy = gh_rand(nx, -1, 1);
	gh_buf g = gh_rand(nc, 0.5f, 1.5f), mean = gh_rand(nc, 0, 2), is = gh_rand(nc, 0.5f, 2);
	gh_buf m = gh_rand(2 * nc, -0.1f, 0.1f), dx = gh_rand(nx, -1, 1);
	double *sums[2] = { malloc(2 * nc * sizeof(double)), malloc(2 * nc * sizeof(double)) };
	float *f[2] = { malloc(2 * nc * sizeof(float)), malloc(2 * nc * sizeof(float)) };
	char what[128];
#define SUMS_CMP(name) do { \
	for (int s_ = 0; s_ < 2; s_++) \
		for (size_t i_ = 0; i_ < 2 * nc; i_++) \
			f[s_][i_] = (float)sums[s_][i_]; \
	snprintf(what, sizeof what, "bn %s (%d,%d,%d)", name, n, c, hw); \
	gh_cmp_host(what, f[GH_DEV], f[GH_REF], 2 * nc, GH_TOL, GH_FLOOR); } while (0)

	GH_BOTH(s, be)
		be->bn_sums(be, n, c, hw, GF(x, s), GF(k, s), sums[s]);
	SUMS_CMP("sums");
	GH_BOTH(s, be)
		be->bn_grad_sums(be, n, c, hw, GF(x, s), GF(dy, s), GF(mean, s), GF(is, s), sums[s]);
	SUMS_CMP("grad sums");
#undef SUMS_CMP
	for (int beta = 0; beta < 2; beta++) {
		GH_BOTH(s, be)
			be->bn_bwd_dx(be, n, c, hw, GF(x, s), GF(dy, s), GF(g, s), GF(mean, s), GF(is, s),
			              GF(m, s), GF(dx, s), (float)beta);
		snprintf(what, sizeof what, "bn bwd_dx beta %d (%d,%d,%d)", beta, n, c, hw);
		gh_cmp(what, &dx, nx, GH_TOL);
	}
	for (int s = 0; s < 2; s++) {
		free(sums[s]);
		free(f[s]);
	}
	gh_free(&x); gh_free(&k); gh_free(&dy); gh_free(&g); gh_free(&mean); gh_free(&is);
	gh_free(&m); gh_free(&dx);
}

void test_bn(void)
{
	static const int cases[][3] = {
		{ 3, 5, 21 }, { 1, 3, 7 }, { 2, 16, 1 }, { 8, 4, 1 }, { 4, 32, 33 * 31 }, { 16, 64, 64 },
		{ 2, 8, 128 * 128 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		bn_case(cases[i][0], cases[i][1], cases[i][2], 0, 0.0f, "", 1e-5f, 1.0f, 0);
	for (int i = 0; i < 4; i++) {
		int n = gh_int(1, 6), hw = gh_int(1, 300);
		if (n * hw < 2)
			hw = 2;     /* the unbiased variance needs two values */
		bn_case(n, gh_int(1, 20), hw, 0, 0.0f, "", 1e-5f, 1.0f, 0);
	}
	/* the fused activations, on shapes with and without vector remainders */
	bn_case(3, 5, 21, CDP_ACT_RELU, 0.0f, "relu ", 1e-5f, 1.0f, 0);
	bn_case(4, 32, 33 * 31, CDP_ACT_RELU, 0.0f, "relu ", 1e-5f, 1.0f, 0);
	bn_case(2, 8, 128 * 128, CDP_ACT_RELU, 0.0f, "relu ", 1e-5f, 1.0f, 0);
	bn_case(3, 5, 21, CDP_ACT_LEAKY, 0.1f, "leaky 0.1 ", 1e-5f, 1.0f, 0);
	bn_case(4, 32, 33 * 31, CDP_ACT_LEAKY, 0.1f, "leaky 0.1 ", 1e-5f, 1.0f, 0);
	/* an eps that matters (variance ~1e-3): forward and backward must both
	 * use it (cuDNN's backward takes eps as an argument of its own) */
	bn_case(4, 6, 50, 0, 0.0f, "eps 1e-3 ", 1e-3f, 0.02f, 0);
	bn_case(4, 6, 50, CDP_ACT_RELU, 0.0f, "eps 1e-3 relu ", 1e-3f, 0.02f, 0);
	bn_parts_case(3, 5, 21);
	bn_parts_case(2, 8, 128 * 128);
	bn_parts_case(4, 32, 33 * 31);
}

/* ---- activations, also in place (y == x, dx == dy) ---- */

void test_act(void)
{
	static const size_t sizes[] = { 1, 1000, 100003 };
	static const struct { int kind; float slope; const char *name; } acts[] = {
		{ CDP_ACT_RELU, 0.0f, "relu" }, { CDP_ACT_LEAKY, 0.1f, "leaky 0.1" },
		{ CDP_ACT_LEAKY, 0.01f, "leaky 0.01" },
	};
	for (size_t i = 0; i < 3; i++)
		for (size_t a = 0; a < 3; a++) {
			size_t n = sizes[i];
			int kind = acts[a].kind;
			float sl = acts[a].slope;
			gh_buf x = gh_rand(n, -1, 1), y = gh_rand(n, -1, 1), dy = gh_rand(n, -1, 1);
			gh_buf dx = gh_rand(n, -1, 1), xi = gh_alloc(n * 4), di = gh_alloc(n * 4);
			char what[96];
			GH_BOTH(s, be) {
				be->act_fwd(be, kind, sl, GF(x, s), GF(y, s), n);
				be->copy(be, GF(xi, s), GF(x, s), n * 4);
				be->act_fwd(be, kind, sl, GF(xi, s), GF(xi, s), n);
			}
			snprintf(what, sizeof what, "%s fwd n=%zu", acts[a].name, n);
			gh_cmp(what, &y, n, GH_TOL);
			snprintf(what, sizeof what, "%s fwd in place n=%zu", acts[a].name, n);
			gh_cmp(what, &xi, n, GH_TOL);
			GH_BOTH(s, be)
				be->act_bwd(be, kind, sl, GF(y, s), GF(dy, s), GF(dx, s), 1.0f, n);
			snprintf(what, sizeof what, "%s bwd beta 1 n=%zu", acts[a].name, n);
			gh_cmp(what, &dx, n, GH_TOL);
			GH_BOTH(s, be)
				be->act_bwd(be, kind, sl, GF(y, s), GF(dy, s), GF(dx, s), 0.0f, n);
			snprintf(what, sizeof what, "%s bwd beta 0 n=%zu", acts[a].name, n);
			gh_cmp(what, &dx, n, GH_TOL);
			GH_BOTH(s, be) {
				be->copy(be, GF(di, s), GF(dy, s), n * 4);
				be->act_bwd(be, kind, sl, GF(y, s), GF(di, s), GF(di, s), 0.0f, n);
			}
			snprintf(what, sizeof what, "%s bwd in place n=%zu", acts[a].name, n);
			gh_cmp(what, &di, n, GH_TOL);
			gh_free(&x); gh_free(&y); gh_free(&dy); gh_free(&dx); gh_free(&xi); gh_free(&di);
		}
}

/* ---- pooling ---- */

typedef struct pool_case { int n, c, h, w, k, s, p; } pool_case;

/* ties: values from a small set, windows not overlapping (k == stride, no
 * padding), so where the gradient of a tied window lands may differ
 * (backend.h) but each window's gradient sum may not. The set has +0 but
 * not -0: the two compare equal, so which of them a tied window gives
 * differs too (cuDNN's max gave +0 where the CPU's first maximum was -0,
 * on an H200), and the forward is compared bit for bit. */
static void pool_run(const pool_case *pc, int ties)
{
	cdp_pool_desc d = { pc->n, pc->c, pc->h, pc->w, pc->k, pc->s, pc->p, 0, 0 };
	char tag[96], what[160];

	if (cdp_pool_desc_init(&d) < 0) {
		GCHECK(0, "pool case (%d,%d,%d,%d) k%d s%d p%d refused", pc->n, pc->c, pc->h, pc->w,
		       pc->k, pc->s, pc->p);
		return;
	}
	snprintf(tag, sizeof tag, "(%d,%d,%d,%d) k%d s%d p%d%s", d.n, d.c, d.h, d.w, d.k, d.stride,
	         d.pad, ties ? " ties" : "");
	size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
	gh_buf x = gh_rand(nx, -1, 1), y = gh_rand(ny, -1, 1), dy = gh_rand(ny, -1, 1);
	gh_buf dx = gh_rand(nx, -1, 1), idx = gh_alloc(ny * sizeof(int32_t));
	if (ties) {
		float *h = gh_host(&x, GH_REF);
		for (size_t i = 0; i < nx; i++)
			h[i] = roundf(h[i] * 2) + 0.0f;
		gh_set(&x, h, nx * 4);
		free(h);
	}
	GH_BOTH(s, be)
		be->maxpool_fwd(be, &d, GF(x, s), GF(y, s), GI(idx, s));
	snprintf(what, sizeof what, "maxpool fwd %s", tag);
	gh_cmp_exact(what, &y, ny * 4);
	GH_BOTH(s, be)
		be->maxpool_bwd(be, &d, GF(x, s), GF(y, s), GF(dy, s), GI(idx, s), GF(dx, s), 1.0f);
	if (!ties) {
		snprintf(what, sizeof what, "maxpool bwd beta 1 %s", tag);
		gh_cmp(what, &dx, nx, GH_TOL);
		GH_BOTH(s, be)
			be->maxpool_bwd(be, &d, GF(x, s), GF(y, s), GF(dy, s), GI(idx, s), GF(dx, s), 0.0f);
		snprintf(what, sizeof what, "maxpool bwd beta 0 %s", tag);
		gh_cmp(what, &dx, nx, GH_TOL);
	} else {
		/* dx was random before (beta 1): compare per-window sums of dx */
		float *sum[2];
		for (int s = 0; s < 2; s++) {
			float *h = gh_host(&dx, s);
			sum[s] = calloc(ny, sizeof(float));
			for (size_t t = 0; t < (size_t)d.n * d.c; t++)
				for (int i = 0; i < d.oh * d.k; i++)
					for (int j = 0; j < d.ow * d.k; j++)
						sum[s][(t * d.oh + i / d.k) * d.ow + j / d.k] +=
							h[(t * d.h + i) * d.w + j];
			free(h);
		}
		snprintf(what, sizeof what, "maxpool bwd window sums %s", tag);
		gh_cmp_host(what, sum[GH_DEV], sum[GH_REF], ny, GH_TOL, GH_FLOOR);
		free(sum[0]);
		free(sum[1]);
	}
	GH_BOTH(s, be)
		be->avgpool_fwd(be, &d, GF(x, s), GF(y, s));
	snprintf(what, sizeof what, "avgpool fwd %s", tag);
	gh_cmp(what, &y, ny, GH_TOL);
	GH_BOTH(s, be)
		be->avgpool_bwd(be, &d, GF(dy, s), GF(dx, s), 0.0f);
	snprintf(what, sizeof what, "avgpool bwd beta 0 %s", tag);
	gh_cmp(what, &dx, nx, GH_TOL);
	GH_BOTH(s, be)
		be->avgpool_bwd(be, &d, GF(dy, s), GF(dx, s), 1.0f);
	snprintf(what, sizeof what, "avgpool bwd beta 1 %s", tag);
	gh_cmp(what, &dx, nx, GH_TOL);
	gh_free(&x); gh_free(&y); gh_free(&dy); gh_free(&dx); gh_free(&idx);
}

void test_pool(void)
{
	static const pool_case cases[] = {
		{ 2, 3, 8, 8, 2, 2, 0 }, { 2, 2, 9, 7, 3, 2, 1 }, { 1, 3, 5, 6, 3, 1, 1 },
		{ 2, 2, 7, 7, 2, 2, 1 }, { 1, 1, 11, 9, 5, 3, 2 }, { 4, 16, 32, 32, 2, 2, 0 },
		{ 2, 3, 1, 1, 1, 1, 0 }, { 8, 64, 64, 64, 2, 2, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		pool_run(&cases[i], 0);
	pool_case tie = { 2, 3, 8, 10, 2, 2, 0 }, tie3 = { 1, 4, 9, 12, 3, 3, 0 };
	pool_run(&tie, 1);
	pool_run(&tie3, 1);
	for (int i = 0; i < 4; i++) {
		pool_case pc;
		pc.n = gh_int(1, 3), pc.c = gh_int(1, 5), pc.k = gh_int(1, 4), pc.s = gh_int(1, 3);
		pc.p = gh_int(0, pc.k / 2);
		pc.h = gh_int(pc.k, 20), pc.w = gh_int(pc.k, 20);
		pool_run(&pc, 0);
	}
}

/* ---- x2 upsampling ---- */

void test_upsample(void)
{
	/* n, c, h, w, oh, ow; 0: random */
	static const int cases[][6] = {
		{ 2, 3, 5, 4, 10, 8 }, { 1, 1, 1, 1, 2, 2 }, { 1, 2, 1, 7, 2, 14 },
		{ 3, 4, 16, 16, 32, 32 }, { 2, 8, 33, 17, 66, 34 }, { 2, 3, 5, 4, 20, 16 },
		{ 2, 3, 4, 5, 7, 9 }, { 2, 5, 1, 1, 16, 16 }, { 1, 3, 3, 3, 3, 3 },
		{ 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int mode = CDP_UP_NEAREST; mode <= CDP_UP_BILINEAR; mode++) {
			int n = cases[i][0], c = cases[i][1], h = cases[i][2], w = cases[i][3];
			int oh = cases[i][4], ow = cases[i][5];
			if (n == 0) {  /* random: any size up, an integer factor or not */
				n = gh_int(1, 3), c = gh_int(1, 4), h = gh_int(1, 25), w = gh_int(1, 25);
				oh = h * gh_int(1, 5) + gh_int(0, 3), ow = w * gh_int(1, 5) + gh_int(0, 3);
			}
			size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
			const char *m = mode == CDP_UP_NEAREST ? "nearest" : "bilinear";
			gh_buf x = gh_rand(nx, -1, 1), y = gh_rand(ny, -1, 1), dy = gh_rand(ny, -1, 1);
			gh_buf dx = gh_rand(nx, -1, 1);
			char what[128];
			GH_BOTH(s, be)
				be->upsample_fwd(be, mode, n, c, h, w, oh, ow, GF(x, s), GF(y, s));
			snprintf(what, sizeof what, "upsample %s fwd (%d,%d,%d,%d) -> (%d,%d)", m, n, c,
			         h, w, oh, ow);
			gh_cmp(what, &y, ny, GH_TOL);
			GH_BOTH(s, be)
				be->upsample_bwd(be, mode, n, c, h, w, oh, ow, GF(dy, s), GF(dx, s), 1.0f);
			snprintf(what, sizeof what, "upsample %s bwd beta 1 (%d,%d,%d,%d) -> (%d,%d)", m,
			         n, c, h, w, oh, ow);
			gh_cmp(what, &dx, nx, GH_TOL);
			GH_BOTH(s, be)
				be->upsample_bwd(be, mode, n, c, h, w, oh, ow, GF(dy, s), GF(dx, s), 0.0f);
			snprintf(what, sizeof what, "upsample %s bwd beta 0 (%d,%d,%d,%d) -> (%d,%d)", m,
			         n, c, h, w, oh, ow);
			gh_cmp(what, &dx, nx, GH_TOL);
			gh_free(&x); gh_free(&y); gh_free(&dy); gh_free(&dx);
		}
}

/* ---- concat's channel copies: exact (a move, or one float add) ---- */

void test_chan(void)
{
	static const int cases[][5] = {   /* n, c, hw, total channels, offset */
		{ 2, 3, 5, 9, 4 }, { 1, 1, 1, 1, 0 }, { 4, 16, 1024, 48, 32 }, { 3, 7, 33, 7, 0 },
		{ 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int n = cases[i][0], c = cases[i][1], hw = cases[i][2], big = cases[i][3], off = cases[i][4];
		if (n == 0) {
			n = gh_int(1, 4), c = gh_int(1, 9), hw = gh_int(1, 500), big = c + gh_int(0, 9);
			off = gh_int(0, big - c);
		}
		size_t nb = (size_t)n * big * hw, ns = (size_t)n * c * hw;
		gh_buf dst = gh_rand(nb, -1, 1), src = gh_rand(ns, -1, 1), back = gh_rand(ns, -1, 1);
		char tag[64], what[128];
		snprintf(tag, sizeof tag, "(%d,%d,%d) into %d at %d", n, c, hw, big, off);
		for (int beta = 0; beta <= 1; beta++) {
			GH_BOTH(s, be)
				be->chan_copy(be, n, c, hw, GF(src, s), GF(dst, s), big, off, (float)beta);
			snprintf(what, sizeof what, "chan_copy beta %d %s", beta, tag);
			gh_cmp_exact(what, &dst, nb * 4);
			GH_BOTH(s, be)
				be->chan_slice(be, n, c, hw, GF(dst, s), big, off, GF(back, s), (float)beta);
			snprintf(what, sizeof what, "chan_slice beta %d %s", beta, tag);
			gh_cmp_exact(what, &back, ns * 4);
		}
		gh_free(&dst); gh_free(&src); gh_free(&back);
	}
}

/* ---- dropout: the same mask from the same (seed, index) ---- */

void test_dropout(void)
{
	static const size_t sizes[] = { 1, 1000, 100003 };
	static const float ps[] = { 0.0f, 0.3f, 0.5f };
	for (size_t i = 0; i < 3; i++)
		for (size_t j = 0; j < 3; j++) {
			size_t n = sizes[i];
			uint64_t seed = cdp_rng_next(&gh_rng);
			gh_buf x = gh_rand(n, -1, 1), y = gh_rand(n, -1, 1), dy = gh_rand(n, -1, 1);
			gh_buf dx = gh_rand(n, -1, 1), mask = gh_alloc(n);
			char what[96];
			GH_BOTH(s, be)
				be->dropout_fwd(be, ps[j], seed, GF(x, s), GF(y, s), GU8(mask, s), n);
			snprintf(what, sizeof what, "dropout mask p=%g n=%zu", ps[j], n);
			gh_cmp_exact(what, &mask, n);
			snprintf(what, sizeof what, "dropout fwd p=%g n=%zu", ps[j], n);
			gh_cmp(what, &y, n, GH_TOL);
			GH_BOTH(s, be)
				be->dropout_bwd(be, ps[j], GU8(mask, s), GF(dy, s), GF(dx, s), 1.0f, n);
			snprintf(what, sizeof what, "dropout bwd beta 1 p=%g n=%zu", ps[j], n);
			gh_cmp(what, &dx, n, GH_TOL);
			GH_BOTH(s, be)
				be->dropout_bwd(be, ps[j], GU8(mask, s), GF(dy, s), GF(dx, s), 0.0f, n);
			snprintf(what, sizeof what, "dropout bwd beta 0 p=%g n=%zu", ps[j], n);
			gh_cmp(what, &dx, n, GH_TOL);
			gh_free(&x); gh_free(&y); gh_free(&dy); gh_free(&dx); gh_free(&mask);
		}
}

/* ---- global average pool, bias add and gradient, add, diff ---- */

void test_gap_bias_add(void)
{
	static const int cases[][3] = {
		{ 2, 3, 5 }, { 1, 1, 1 }, { 64, 256, 16 }, { 8, 32, 64 * 64 }, { 3, 5, 1 }, { 0, 0, 0 },
		{ 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int n = cases[i][0], c = cases[i][1], hw = cases[i][2];
		if (n == 0)
			n = gh_int(1, 8), c = gh_int(1, 40), hw = gh_int(1, 700);
		size_t nx = (size_t)n * c * hw, nc = (size_t)n * c;
		gh_buf x = gh_rand(nx, -1, 1), g = gh_rand(nc, -1, 1), y = gh_rand(nc, -1, 1);
		gh_buf dx = gh_rand(nx, -1, 1), b = gh_rand((size_t)c, -1, 1), db = gh_rand((size_t)c, -1, 1);
		char tag[48], what[128];
		snprintf(tag, sizeof tag, "(%d,%d,%d)", n, c, hw);
		GH_BOTH(s, be)
			be->gap_fwd(be, n, c, hw, GF(x, s), GF(y, s));
		snprintf(what, sizeof what, "gap fwd %s", tag);
		gh_cmp(what, &y, nc, GH_TOL);
		GH_BOTH(s, be)
			be->gap_bwd(be, n, c, hw, GF(g, s), GF(dx, s), 1.0f);
		snprintf(what, sizeof what, "gap bwd beta 1 %s", tag);
		gh_cmp(what, &dx, nx, GH_TOL);
		GH_BOTH(s, be)
			be->gap_bwd(be, n, c, hw, GF(g, s), GF(dx, s), 0.0f);
		snprintf(what, sizeof what, "gap bwd beta 0 %s", tag);
		gh_cmp(what, &dx, nx, GH_TOL);
		GH_BOTH(s, be)
			be->bias_grad(be, n, c, hw, GF(x, s), GF(db, s));
		snprintf(what, sizeof what, "bias_grad += %s", tag);
		gh_cmp(what, &db, (size_t)c, GH_TOL);
		GH_BOTH(s, be)
			be->bias_add(be, n, c, hw, GF(b, s), GF(x, s));
		snprintf(what, sizeof what, "bias_add %s", tag);
		gh_cmp(what, &x, nx, GH_TOL);
		gh_buf z = gh_rand(nx, -1, 1), b2 = gh_rand(nx, -1, 1);
		GH_BOTH(s, be)
			be->add(be, GF(x, s), GF(dx, s), GF(z, s), nx);
		snprintf(what, sizeof what, "add %s", tag);
		gh_cmp(what, &z, nx, GH_TOL);
		for (int absval = 0; absval <= 1; absval++) {
			GH_BOTH(s, be)
				be->diff_fwd(be, absval, GF(x, s), GF(dx, s), GF(z, s), nx);
			snprintf(what, sizeof what, "diff_fwd abs=%d %s", absval, tag);
			gh_cmp(what, &z, nx, GH_TOL);
			for (int beta = 0; beta <= 1; beta++) {
				GH_BOTH(s, be)
					be->diff_bwd(be, absval, GF(x, s), GF(dx, s), GF(z, s),
					             beta ? -1.0f : 1.0f, GF(b2, s), (float)beta, nx);
				snprintf(what, sizeof what, "diff_bwd abs=%d beta %d %s", absval, beta, tag);
				gh_cmp(what, &b2, nx, GH_TOL);
			}
		}
		gh_free(&z);
		gh_free(&b2);
		gh_free(&x); gh_free(&g); gh_free(&y); gh_free(&dx); gh_free(&b); gh_free(&db);
	}
}

/* ---- edge cases whose cuDNN behaviour its documentation leaves open;
 * last in test_ops, so that a backend that aborts on one (a cuDNN error
 * status is fatal) has already reported every other op ---- */

/* NaN exactly where side 0 has one, the other values bit for bit equal
 * (the ops compared are moves or one rounded product on both sides) */
static void cmp_nan(const char *what, const gh_buf *b, size_t n)
{
	float *r = gh_host(b, GH_REF), *d = gh_host(b, GH_DEV);
	size_t i = 0;

	while (i < n && (isnan(r[i]) ? isnan(d[i]) : !isnan(d[i]) && d[i] == r[i]))
		i++;
	printf("%-4s %-60s %s\n", i == n ? "ok" : "FAIL", what, "exact, NaN where the cpu's");
	GCHECK(i == n, "[%s] %s: element %zu of %zu differs (%s %.9g, cpu %.9g)", gh_peer, what, i,
	       n, gh_be[GH_DEV]->name, i < n ? d[i] : 0.0, i < n ? r[i] : 0.0);
	free(r);
	free(d);
}

/* NaN inputs: activations pass a NaN forward, and backward passes dy
 * where y is NaN (y <= 0 is false; PyTorch's threshold_backward); max
 * pooling propagates a NaN (the first in its window wins on the CPU) */
static void nan_cases(void)
{
	static const struct { int kind; float slope; const char *name; } acts[] = {
		{ CDP_ACT_RELU, 0.0f, "relu" }, { CDP_ACT_LEAKY, 0.1f, "leaky 0.1" },
	};
	static const pool_case pools[] = { { 2, 3, 8, 8, 2, 2, 0 }, { 2, 2, 9, 7, 3, 2, 1 } };
	size_t n = 1000;
	char what[96];

	gh_buf x = gh_rand(n, -1, 1), y = gh_rand(n, -1, 1), dy = gh_rand(n, -1, 1);
	gh_buf dx = gh_rand(n, -1, 1);
	float *h = gh_host(&x, GH_REF);
	for (size_t i = 5; i < n; i += 13)
		h[i] = NAN;
	gh_set(&x, h, n * 4);
	free(h);
	for (size_t a = 0; a < 2; a++) {
		GH_BOTH(s, be)
			be->act_fwd(be, acts[a].kind, acts[a].slope, GF(x, s), GF(y, s), n);
		snprintf(what, sizeof what, "%s fwd NaN n=%zu", acts[a].name, n);
		cmp_nan(what, &y, n);
		GH_BOTH(s, be)
			be->act_bwd(be, acts[a].kind, acts[a].slope, GF(y, s), GF(dy, s), GF(dx, s), 0.0f, n);
		snprintf(what, sizeof what, "%s bwd NaN y n=%zu", acts[a].name, n);
		cmp_nan(what, &dx, n);
	}
	for (size_t p = 0; p < 2; p++) {
		cdp_pool_desc d = { pools[p].n, pools[p].c, pools[p].h, pools[p].w, pools[p].k,
		                    pools[p].s, pools[p].p, 0, 0 };
		if (cdp_pool_desc_init(&d) < 0 || (size_t)d.n * d.c * d.h * d.w > n) {
			GCHECK(0, "NaN pool case %zu does not fit", p);
			continue;
		}
		size_t ny = (size_t)d.n * d.c * d.oh * d.ow;
		gh_buf idx = gh_alloc(ny * sizeof(int32_t));
		GH_BOTH(s, be)
			be->maxpool_fwd(be, &d, GF(x, s), GF(y, s), GI(idx, s));
		snprintf(what, sizeof what, "maxpool fwd NaN (%d,%d,%d,%d) k%d s%d p%d", d.n, d.c, d.h,
		         d.w, d.k, d.stride, d.pad);
		cmp_nan(what, &y, ny);
		gh_free(&idx);
	}
	gh_free(&x); gh_free(&y); gh_free(&dy); gh_free(&dx);
}

/* Batchnorm over one value per channel (N*H*W = 1): the batch variance is
 * 0 and the CPU takes 0 for the unbiased one too (PyTorch refuses such a
 * batch in training); y is beta. Forward only: the running statistics
 * are what cuDNN's division by N*H*W - 1 would spoil (the CUDA backend
 * uses its own kernel here, cdk_bn_train1). */
static void bn_single(void)
{
	int c = 4;
	gh_buf x = gh_rand(c, -1, 1), g = gh_rand(c, 0.5f, 1.5f), bt = gh_rand(c, -1, 1);
	gh_buf y = gh_rand(c, -1, 1), rm = gh_rand(c, -1, 1), rv = gh_rand(c, 0.5f, 2);
	gh_buf sm = gh_alloc(c * 4), si = gh_alloc(c * 4);

	GH_BOTH(s, be)
		be->bn_fwd_train(be, 1, c, 1, GF(x, s), GF(g, s), GF(bt, s), GF(y, s), GF(rm, s),
		                 GF(rv, s), 0.1f, 1e-5f, GF(sm, s), GF(si, s), 0, 0.0f);
	gh_cmp("bn N*H*W=1 (1,4,1) train y", &y, c, GH_TOL);
	gh_cmp("bn N*H*W=1 (1,4,1) running mean", &rm, c, GH_TOL);
	gh_cmp("bn N*H*W=1 (1,4,1) running var", &rv, c, GH_TOL);
	gh_cmp("bn N*H*W=1 (1,4,1) saved mean", &sm, c, GH_TOL);
	gh_cmp("bn N*H*W=1 (1,4,1) saved invstd", &si, c, GH_TOL);
	gh_free(&x); gh_free(&g); gh_free(&bt); gh_free(&y); gh_free(&rm); gh_free(&rv);
	gh_free(&sm); gh_free(&si);
}

void test_edges(void)
{
	nan_cases();
	/* per-channel arrays 4 bytes past 16-byte alignment, as bn layers get
	 * them from the net's packed parameters and buffers */
	bn_case(3, 5, 21, 0, 0.0f, "misaligned ", 1e-5f, 1.0f, 1);
	bn_case(3, 5, 21, CDP_ACT_RELU, 0.0f, "misaligned relu ", 1e-5f, 1.0f, 1);
	bn_single();
}
