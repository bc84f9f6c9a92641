/* test_ops_loss.c: the losses (softmax cross-entropy with ignored pixels,
 * out-of-range labels and class weights; BCE; Dice; the regression losses
 * with NaN targets), argmax, confusion
 * counts and the two optimizers, on both sides (gpu_harness.h).
 *
 * Loss values are sums over pixels in double on both sides; per pixel the
 * GPU may use float transcendentals (relative error ~1e-7), so the sums
 * must agree to 1e-5 relative and the counts to 1e-9. The optimizers are
 * compared on what they change: the update w_after - w_before (computed on
 * the host in double), not w, whose size would hide a wrong update.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_ops.h"

#define LOSS_TOL 1e-5

/* labels (n) in [lo, hi], every `every`-th set to `ign` (every 0: none) */
static gh_buf labels(size_t n, int lo, int hi, int every, int ign)
{
	int32_t *h = malloc(n * sizeof *h + 4);
	for (size_t i = 0; i < n; i++)
		h[i] = every && i % (size_t)every == 0 ? ign : gh_int(lo, hi);
	gh_buf b = gh_from(h, n * sizeof *h);
	free(h);
	return b;
}

typedef struct ce_case { int n, k, hw, ignore, every, lo, hi, weighted; } ce_case;

static void ce_run(const ce_case *cc)
{
	size_t nl = (size_t)cc->n * cc->hw, nx = nl * cc->k;
	gh_buf x = gh_rand(nx, -4, 4), lab = labels(nl, cc->lo, cc->hi, cc->every, cc->ignore);
	gh_buf dx = gh_rand(nx, -1, 1), cw = gh_rand((size_t)cc->k, 0.2f, 3);
	double loss[2], cnt[2];
	float gscale = 1.0f / (float)nl;
	char tag[96], what[160];

	snprintf(tag, sizeof tag, "(%d,%d,%d) ignore %d labels [%d,%d]%s", cc->n, cc->k, cc->hw,
	         cc->ignore, cc->lo, cc->hi, cc->weighted ? " weighted" : "");
	GH_BOTH(s, be)
		loss[s] = be->softmax_ce(be, cc->n, cc->k, cc->hw, GF(x, s), GI(lab, s), cc->ignore,
		                         cc->weighted ? GF(cw, s) : NULL, GF(dx, s), gscale, &cnt[s]);
	snprintf(what, sizeof what, "softmax_ce loss %s", tag);
	gh_cmp_scalar(what, loss[GH_DEV], loss[GH_REF], LOSS_TOL, 1e-30);
	snprintf(what, sizeof what, "softmax_ce count %s", tag);
	gh_cmp_scalar(what, cnt[GH_DEV], cnt[GH_REF], 1e-9, 1e-30);
	snprintf(what, sizeof what, "softmax_ce dlogits %s", tag);
	gh_cmp(what, &dx, nx, GH_TOL);
	gh_free(&x); gh_free(&lab); gh_free(&dx); gh_free(&cw);
}

static void bin_run(int n, int hw, int ignore, int every, float smooth)
{
	size_t nl = (size_t)n * hw;
	gh_buf x = gh_rand(nl, -6, 6), lab = labels(nl, 0, 3, every, ignore);
	gh_buf dx = gh_rand(nl, -1, 1);
	double loss[2], cnt[2], tot[2][3];
	float gscale = 1.0f / (float)nl;
	char tag[96], what[160];

	/* a few logits far out, where exp overflows unless handled */
	float *h = gh_host(&x, GH_REF);
	for (size_t i = 0; i < nl; i += 97)
		h[i] = i % 2 ? 60.0f : -60.0f;
	gh_set(&x, h, nl * 4);
	free(h);
	snprintf(tag, sizeof tag, "(%d,%d) ignore %d every %d", n, hw, ignore, every);
	GH_BOTH(s, be)
		loss[s] = be->bce_logits(be, n, hw, GF(x, s), GI(lab, s), ignore, GF(dx, s), gscale,
		                         &cnt[s]);
	snprintf(what, sizeof what, "bce loss %s", tag);
	gh_cmp_scalar(what, loss[GH_DEV], loss[GH_REF], LOSS_TOL, 1e-30);
	snprintf(what, sizeof what, "bce count %s", tag);
	gh_cmp_scalar(what, cnt[GH_DEV], cnt[GH_REF], 1e-9, 1e-30);
	snprintf(what, sizeof what, "bce dlogits %s", tag);
	gh_cmp(what, &dx, nl, GH_TOL);
	/* dice adds to what bce wrote, as loss=bce+dice does */
	GH_BOTH(s, be)
		loss[s] = be->dice_logits(be, n, hw, GF(x, s), GI(lab, s), ignore, smooth, NULL, GF(dx, s),
		                          0.5f);
	snprintf(what, sizeof what, "dice loss smooth %g %s", smooth, tag);
	gh_cmp_scalar(what, loss[GH_DEV], loss[GH_REF], LOSS_TOL, 1e-6);
	snprintf(what, sizeof what, "dice dlogits += smooth %g %s", smooth, tag);
	gh_cmp(what, &dx, nl, GH_TOL);
	/* the sums, and the gradient from given totals (a batch split over
	 * ranks: here a larger batch of twice these sums) */
	GH_BOTH(s, be)
		be->dice_sums(be, n, hw, GF(x, s), GI(lab, s), ignore, tot[s]);
	for (int j = 0; j < 3; j++) {
		snprintf(what, sizeof what, "dice sum %d %s", j, tag);
		gh_cmp_scalar(what, tot[GH_DEV][j], tot[GH_REF][j], LOSS_TOL, 1e-6);
		tot[GH_REF][j] *= 2;
	}
	GH_BOTH(s, be)
		loss[s] = be->dice_logits(be, n, hw, GF(x, s), GI(lab, s), ignore, smooth,
		                          tot[GH_REF], GF(dx, s), 0.5f);
	snprintf(what, sizeof what, "dice loss, totals given %s", tag);
	gh_cmp_scalar(what, loss[GH_DEV], loss[GH_REF], LOSS_TOL, 1e-6);
	snprintf(what, sizeof what, "dice dlogits, totals given %s", tag);
	gh_cmp(what, &dx, nl, GH_TOL);
	gh_free(&x); gh_free(&lab); gh_free(&dx);
}

/* regression: pred (n, t, hw) against targets, every `every`-th NaN */
static void reg_run(int kind, int n, int t, int hw, int every, float delta)
{
	size_t nx = (size_t)n * t * hw;
	gh_buf x = gh_rand(nx, -3, 3), tg = gh_rand(nx, -3, 3), dx = gh_rand(nx, -1, 1);
	double loss[2], cnt[2];
	char tag[96], what[160];
	float *h = gh_host(&tg, GH_REF);

	for (size_t i = 0; every && i < nx; i += (size_t)every)
		h[i] = NAN;
	gh_set(&tg, h, nx * 4);
	free(h);
	snprintf(tag, sizeof tag, "kind %d (%d,%d,%d) NaN every %d delta %g", kind, n, t, hw, every,
	         delta);
	GH_BOTH(s, be)
		loss[s] = be->reg_loss(be, kind, n, t, hw, GF(x, s), GF(tg, s), delta, GF(dx, s),
		                       1.0f / (float)nx, &cnt[s]);
	snprintf(what, sizeof what, "reg_loss %s", tag);
	gh_cmp_scalar(what, loss[GH_DEV], loss[GH_REF], LOSS_TOL, 1e-30);
	snprintf(what, sizeof what, "reg_loss count %s", tag);
	gh_cmp_scalar(what, cnt[GH_DEV], cnt[GH_REF], 1e-9, 1e-30);
	snprintf(what, sizeof what, "reg_loss dpred %s", tag);
	gh_cmp(what, &dx, nx, GH_TOL);
	gh_free(&x); gh_free(&tg); gh_free(&dx);
}

void test_losses(void)
{
	static const ce_case cases[] = {
		{ 2, 2, 37, -1, 0, 0, 1, 0 },
		{ 3, 5, 100, 255, 7, 0, 4, 0 },
		{ 4, 3, 64 * 64, 255, 5, 0, 2, 1 },
		{ 64, 10, 1, -1, 0, 0, 9, 1 },           /* classification, HW = 1 */
		{ 2, 7, 5000, 1, 3, -3, 9, 0 },          /* ignore a class id; out-of-range labels */
		{ 2, 4, 9000, 255, 0, -2, 5, 1 },        /* out-of-range, weighted */
		{ 8, 2, 128 * 128, 255, 11, 0, 1, 1 },   /* large: many blocks */
		{ 2, 3, 10, 0, 1, 0, 2, 0 },             /* every pixel ignored */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ce_run(&cases[i]);
	for (int i = 0; i < 3; i++) {
		ce_case cc = { gh_int(1, 6), gh_int(1, 12), gh_int(1, 3000), 255, gh_int(0, 9), 0, 0,
		               gh_int(0, 1) };
		cc.hi = cc.k - 1;
		ce_run(&cc);
	}
	bin_run(2, 37, -1, 0, 1.0f);
	bin_run(3, 1000, 255, 4, 1.0f);
	bin_run(8, 128 * 128, 255, 13, 1.0f);
	bin_run(64, 1, -1, 0, 0.5f);
	bin_run(gh_int(1, 5), gh_int(1, 5000), 2, gh_int(0, 6), 1.0f);
	bin_run(2, 10, 3, 1, 0.0f);               /* all ignored, smooth 0: loss 0, no gradient */
	reg_run(CDP_REG_MSE, 2, 1, 37, 0, 1.0f);
	reg_run(CDP_REG_L1, 3, 2, 1000, 5, 1.0f);
	reg_run(CDP_REG_HUBER, 8, 3, 64 * 64, 7, 0.7f);
	reg_run(CDP_REG_HUBER, 2, 1, 10, 1, 1.0f); /* no target: loss 0, no gradient */
}

/* ---- argmax and confusion counts ---- */

void test_metrics(void)
{
	static const int cases[][3] = { { 2, 1, 100 }, { 3, 5, 77 }, { 8, 2, 64 * 64 }, { 64, 10, 1 },
	                                { 0, 0, 0 } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int n = cases[i][0], k = cases[i][1], hw = cases[i][2];
		if (n == 0)
			n = gh_int(1, 5), k = gh_int(1, 9), hw = gh_int(1, 3000);
		size_t nl = (size_t)n * hw, nx = nl * k;
		int kk = k == 1 ? 2 : k;
		gh_buf x = gh_rand(nx, -3, 3), pred = gh_alloc(nl * 4);
		gh_buf lab = labels(nl, -1, kk, 9, 255);    /* ignored, out of range below and above */
		uint64_t *conf[2];
		char tag[64], what[128];
		snprintf(tag, sizeof tag, "(%d,%d,%d)", n, k, hw);
		GH_BOTH(s, be)
			be->argmax(be, n, k, hw, GF(x, s), GI(pred, s));
		snprintf(what, sizeof what, "argmax %s", tag);
		gh_cmp_exact(what, &pred, nl * 4);
		GH_BOTH(s, be) {
			conf[s] = malloc((size_t)kk * kk * sizeof(uint64_t));
			for (int j = 0; j < kk * kk; j++)
				conf[s][j] = (uint64_t)j * 1000003;   /* counts add to what is there */
			be->confusion(be, (int)nl, kk, GI(lab, s), GI(pred, s), 255, conf[s]);
		}
		int same = !memcmp(conf[0], conf[1], (size_t)kk * kk * sizeof(uint64_t));
		printf("%-4s %-60s exact\n", same ? "ok" : "FAIL", "confusion");
		GCHECK(same, "[%s] confusion %s: counts differ", gh_peer, tag);
		free(conf[0]);
		free(conf[1]);
		gh_free(&x); gh_free(&pred); gh_free(&lab);
	}
}

/* ---- optimizers ---- */

/* Compares (w - w0) of both sides, in double on the host. */
static void cmp_update(const char *what, const gh_buf *w, const float *w0, size_t n)
{
	float *a[2], *d[2];
	for (int s = 0; s < 2; s++) {
		a[s] = gh_host(w, s);
		d[s] = malloc(n * sizeof(float) + 4);
		for (size_t i = 0; i < n; i++)
			d[s][i] = (float)((double)a[s][i] - w0[i]);
	}
	gh_cmp_host(what, d[GH_DEV], d[GH_REF], n, GH_TOL, GH_FLOOR);
	for (int s = 0; s < 2; s++) {
		free(a[s]);
		free(d[s]);
	}
}

static void sgd_run(size_t n, float mu, float wd, int nesterov)
{
	gh_buf w = gh_rand(n, -1, 1), v = gh_alloc(n * 4);
	float *w0 = gh_host(&w, GH_REF);
	char tag[96], what[160];

	snprintf(tag, sizeof tag, "n=%zu mu %g wd %g%s", n, mu, wd, nesterov ? " nesterov" : "");
	for (int step = 0; step < 3; step++) {
		gh_buf g = gh_rand(n, -1, 1);
		GH_BOTH(s, be)
			be->sgd_step(be, GF(w, s), GF(g, s), mu != 0 ? GF(v, s) : NULL, n, 0.1f, mu, wd,
			             nesterov, step == 0);
		gh_free(&g);
	}
	snprintf(what, sizeof what, "sgd 3 steps: update %s", tag);
	cmp_update(what, &w, w0, n);
	if (mu != 0) {
		snprintf(what, sizeof what, "sgd 3 steps: momentum %s", tag);
		gh_cmp(what, &v, n, GH_TOL);
	}
	free(w0);
	gh_free(&w);
	gh_free(&v);
}

static void adamw_run(size_t n, float wd)
{
	gh_buf w = gh_rand(n, -1, 1), m = gh_alloc(n * 4), v = gh_alloc(n * 4);
	char what[128];

	for (long t = 1; t <= 3; t++) {
		float *w0 = gh_host(&w, GH_REF);
		gh_buf g = gh_rand(n, -1, 1);
		GH_BOTH(s, be)
			be->adamw_step(be, GF(w, s), GF(g, s), GF(m, s), GF(v, s), n, 0.1f, 0.9f, 0.999f,
			               1e-8f, wd, t);
		snprintf(what, sizeof what, "adamw step %ld: update n=%zu wd %g", t, n, wd);
		cmp_update(what, &w, w0, n);
		/* the next step starts from the reference's w on both sides */
		free(w0);
		w0 = gh_host(&w, GH_REF);
		gh_set(&w, w0, n * 4);
		free(w0);
		gh_free(&g);
	}
	snprintf(what, sizeof what, "adamw 3 steps: m n=%zu wd %g", n, wd);
	gh_cmp(what, &m, n, GH_TOL);
	snprintf(what, sizeof what, "adamw 3 steps: v n=%zu wd %g", n, wd);
	gh_cmp(what, &v, n, GH_TOL);
	gh_free(&w);
	gh_free(&m);
	gh_free(&v);
}

void test_optim(void)
{
	static const size_t sizes[] = { 1, 1000, 100003 };
	for (size_t i = 0; i < 3; i++) {
		sgd_run(sizes[i], 0.0f, 0.0f, 0);
		sgd_run(sizes[i], 0.0f, 1e-2f, 0);
		sgd_run(sizes[i], 0.9f, 0.0f, 0);
		sgd_run(sizes[i], 0.9f, 5e-4f, 1);
		adamw_run(sizes[i], 0.0f);
		adamw_run(sizes[i], 0.01f);
	}
}
