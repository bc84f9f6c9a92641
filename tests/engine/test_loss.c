/* test_loss.c: the CPU loss ops (cpu/cpu_loss.c) and the loss selection
 * (loss.c).
 *
 * Each op is compared with a double-precision reference written here from
 * the PyTorch definitions: the summed loss and count to 1e-9 relative, and
 * the float gradient to central finite differences of the reference loss
 * (h = 1e-5 in double: truncation error ~h^2, rounding ~1e-16 |L| / h, both
 * far below the 2e-5 tolerance, which is float rounding of a gradient of
 * size <= max class weight). Sizes span two pixel chunks of the op and a
 * partial inner block. Also: stability at |logit| = 1000, thread-count
 * independence, argmax ties, confusion counts, and loss.c's mean, weights,
 * composition and errors, with a few values computed by hand.
 */
#include "backend.h"
#include "cdp_rng.h"
#include "cfg/cfg.h"
#include "loss.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 2
#define K 3
#define HW 5000             /* 2 chunks of the op per sample, last block partial */
#define IGN 255

static cdp_backend *be;

/* ---- double references ---------------------------------------------------- */

static double ref_ce(const double *x, const int32_t *lab, const float *cw, int n, int k,
                     int hw, double *count)
{
	double loss = 0;

	*count = 0;
	for (int s = 0; s < n; s++)
		for (int p = 0; p < hw; p++) {
			int y = lab[s * hw + p];
			double mx = -INFINITY, se = 0, w;
			if (y == IGN)
				continue;
			for (int c = 0; c < k; c++)
				mx = fmax(mx, x[(s * k + c) * hw + p]);
			for (int c = 0; c < k; c++)
				se += exp(x[(s * k + c) * hw + p] - mx);
			w = cw ? cw[y] : 1;
			loss += w * (mx + log(se) - x[(s * k + y) * hw + p]);
			*count += w;
		}
	return loss;
}

static double ref_bce(const double *x, const int32_t *lab, int n, double *count)
{
	double loss = 0;

	*count = 0;
	for (int i = 0; i < n; i++) {
		double t, p;
		if (lab[i] == IGN)
			continue;
		t = lab[i] != 0;
		/* the textbook form, fine for the moderate logits used here */
		p = 1 / (1 + exp(-x[i]));
		loss += -(t * log(p) + (1 - t) * log(1 - p));
		*count += 1;
	}
	return loss;
}

static double ref_dice(const double *x, const int32_t *lab, int n, double smooth)
{
	double in = 0, ps = 0, ts = 0;

	for (int i = 0; i < n; i++) {
		double p, t;
		if (lab[i] == IGN)
			continue;
		p = 1 / (1 + exp(-x[i]));
		t = lab[i] != 0;
		in += p * t;
		ps += p;
		ts += t;
	}
	return 1 - (2 * in + smooth) / (ps + ts + smooth);
}

enum { R_CE, R_BCE, R_DICE };

static double ref_loss(int which, const double *x, const int32_t *lab, const float *cw)
{
	double c;

	switch (which) {
	case R_CE: return ref_ce(x, lab, cw, N, K, HW, &c);
	case R_BCE: return ref_bce(x, lab, N * HW, &c);
	default: return ref_dice(x, lab, N * HW, 1.0);
	}
}

/* Compares grad[idx] with central differences of the reference at a few
 * indices, among them the first, the last and one in the second chunk. */
static void fd_check(const char *what, int which, const float *logits, size_t nlog,
                     const int32_t *lab, const float *cw, const float *grad)
{
	const double h = 1e-5;
	double *x = malloc(nlog * sizeof(double));
	size_t idx[12] = { 0, nlog - 1, 4096, 4097, nlog / 2 };
	cdp_rng r;
	double worst = 0;

	cdp_rng_seed(&r, 99);
	for (int i = 5; i < 12; i++)
		idx[i] = cdp_rng_below(&r, nlog);
	for (size_t i = 0; i < nlog; i++)
		x[i] = logits[i];
	for (int i = 0; i < 12; i++) {
		size_t j = idx[i];
		double lp, lm, fd;
		x[j] = (double)logits[j] + h;
		lp = ref_loss(which, x, lab, cw);
		x[j] = (double)logits[j] - h;
		lm = ref_loss(which, x, lab, cw);
		x[j] = logits[j];
		fd = (lp - lm) / (2 * h);
		worst = fmax(worst, fabs(fd - grad[j]));
		CHECK(fabs(fd - grad[j]) < 2e-5, "%s: d/dx[%zu] op %.9g, finite difference %.9g",
		      what, j, grad[j], fd);
	}
	free(x);
}

static void fill_inputs(float *logits, size_t nlog, int32_t *lab, size_t nlab, int k,
                        uint64_t seed)
{
	cdp_rng r;

	cdp_rng_seed(&r, seed);
	for (size_t i = 0; i < nlog; i++)
		logits[i] = (float)(cdp_rng_double(&r) * 8 - 4);
	for (size_t i = 0; i < nlab; i++)
		lab[i] = cdp_rng_below(&r, 10) == 0 ? IGN : (int32_t)cdp_rng_below(&r, (uint64_t)k);
}

/* ---- the ops ---------------------------------------------------------------- */

static void test_softmax_ce(void)
{
	static float x[N * K * HW], g[N * K * HW], g2[N * K * HW];
	static int32_t lab[N * HW];
	static double xd[N * K * HW];
	const float cw[K] = { 0.5f, 2.0f, 1.25f };
	double cnt, rcnt, loss, rloss, cnt2;

	fill_inputs(x, N * K * HW, lab, N * HW, K, 1);
	for (size_t i = 0; i < N * K * HW; i++)
		xd[i] = x[i];
	for (int weighted = 0; weighted < 2; weighted++) {
		const float *w = weighted ? cw : NULL;
		be->set_threads(be, 1);
		loss = be->softmax_ce(be, N, K, HW, x, lab, IGN, w, g, 1.0f, &cnt);
		rloss = ref_ce(xd, lab, w, N, K, HW, &rcnt);
		CHECK(fabs(loss - rloss) <= 1e-9 * rloss, "ce loss %.12g ref %.12g", loss, rloss);
		CHECK(fabs(cnt - rcnt) <= 1e-9 * rcnt, "ce count %.12g ref %.12g", cnt, rcnt);
		fd_check(weighted ? "ce weighted" : "ce", R_CE, x, N * K * HW, lab, w, g);
		/* ignored pixels get exactly zero gradient in every channel */
		for (int p = 0; p < HW; p++)
			if (lab[p] == IGN)
				CHECK(g[p] == 0 && g[HW + p] == 0 && g[2 * HW + p] == 0, "ignored p %d", p);
		/* the same bits with 3 threads; gscale scales the gradient only */
		be->set_threads(be, 3);
		CHECK(be->softmax_ce(be, N, K, HW, x, lab, IGN, w, g2, 0.25f, &cnt2) == loss,
		      "loss depends on the thread count");
		CHECK(cnt2 == cnt, "count depends on the thread count");
		for (size_t i = 0; i < N * K * HW; i++)
			if (g2[i] != g[i] * 0.25f) {
				CHECK(0, "gscale/threads: g2[%zu] %.9g vs %.9g", i, g2[i], g[i] * 0.25f);
				break;
			}
	}
	be->set_threads(be, 1);

	/* by hand: logits (2, 1, 0) label 0: log(e^2 + e + 1) - 2 */
	{
		float l[3] = { 2, 1, 0 }, d[3];
		int32_t y = 0;
		double c, v = be->softmax_ce(be, 1, 3, 1, l, &y, -1, NULL, d, 1.0f, &c);
		CHECK(fabs(v - 0.40760596444438) < 1e-12, "hand ce %.14f", v);
		CHECK(fabs(d[0] - (0.66524095823 - 1)) < 1e-7 && fabs(d[1] - 0.24472847105) < 1e-7 &&
		      fabs(d[2] - 0.09003057317) < 1e-7, "hand ce grad %g %g %g", d[0], d[1], d[2]);
	}
	/* no overflow at extreme logits: (1000, -1000) label 1 costs 2000 */
	{
		float l[2] = { 1000, -1000 }, d[2];
		int32_t y = 1;
		double c, v = be->softmax_ce(be, 1, 2, 1, l, &y, -1, NULL, d, 1.0f, &c);
		CHECK(v == 2000 && d[0] == 1 && d[1] == -1, "extreme ce %g (%g %g)", v, d[0], d[1]);
	}
	/* out-of-range labels are skipped like ignored ones, never read out of bounds */
	{
		float l[4] = { 1, 2, 3, 4 }, d[4] = { 9, 9, 9, 9 };
		int32_t y[2] = { 2, -3 };
		double c, v = be->softmax_ce(be, 1, 2, 2, l, y, -1, NULL, d, 1.0f, &c);
		CHECK(v == 0 && c == 0 && d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 0,
		      "bad labels: loss %g count %g", v, c);
	}
}

static void test_bce_dice(void)
{
	static float x[N * HW], g[N * HW], g2[N * HW];
	static int32_t lab[N * HW];
	static double xd[N * HW];
	double cnt, rcnt, loss, rloss, dice, rdice;

	fill_inputs(x, N * HW, lab, N * HW, 2, 2);
	lab[7] = 5;                 /* any non-zero label is the positive class */
	for (size_t i = 0; i < N * HW; i++)
		xd[i] = x[i];
	loss = be->bce_logits(be, N, HW, x, lab, IGN, g, 1.0f, &cnt);
	rloss = ref_bce(xd, lab, N * HW, &rcnt);
	CHECK(fabs(loss - rloss) <= 1e-9 * rloss, "bce %.12g ref %.12g", loss, rloss);
	CHECK(cnt == rcnt, "bce count %g ref %g", cnt, rcnt);
	fd_check("bce", R_BCE, x, N * HW, lab, NULL, g);

	/* Dice accumulates: start from a gradient of 1 everywhere */
	for (size_t i = 0; i < N * HW; i++)
		g[i] = 1.0f;
	dice = be->dice_logits(be, N, HW, x, lab, IGN, 1.0f, NULL, g, 1.0f);
	rdice = ref_dice(xd, lab, N * HW, 1.0);
	CHECK(fabs(dice - rdice) < 1e-12, "dice %.15g ref %.15g", dice, rdice);
	for (size_t i = 0; i < N * HW; i++)
		g[i] -= 1.0f;
	fd_check("dice", R_DICE, x, N * HW, lab, NULL, g);
	for (size_t i = 0; i < N * HW; i++)
		if (lab[i] == IGN && g[i] != 0) {
			CHECK(0, "dice touched ignored pixel %zu", i);
			break;
		}
	be->set_threads(be, 2);
	memset(g2, 0, sizeof(g2));
	CHECK(be->dice_logits(be, N, HW, x, lab, IGN, 1.0f, NULL, g2, 1.0f) == dice, "dice threads");
	be->set_threads(be, 1);

	/* the batch as two parts (two ranks' shares): each part's gradient
	 * from the added dice_sums is the whole batch's, and so is the loss */
	{
		double t0[3], t1[3], tot[3], d0, d1;
		int n0 = N / 2;
		memset(g2, 0, sizeof(g2));
		be->dice_sums(be, n0, HW, x, lab, IGN, t0);
		be->dice_sums(be, N - n0, HW, x + n0 * HW, lab + n0 * HW, IGN, t1);
		for (int i = 0; i < 3; i++)
			tot[i] = t0[i] + t1[i];
		d0 = be->dice_logits(be, n0, HW, x, lab, IGN, 1.0f, tot, g2, 1.0f);
		d1 = be->dice_logits(be, N - n0, HW, x + n0 * HW, lab + n0 * HW, IGN, 1.0f, tot,
		                     g2 + n0 * HW, 1.0f);
		CHECK(fabs(d0 - dice) < 1e-12 && fabs(d1 - dice) < 1e-12,
		      "dice of the parts %.15g %.15g, whole %.15g", d0, d1, dice);
		for (size_t i = 0; i < N * HW; i++)
			if (fabsf(g2[i] - g[i]) > 1.5e-7f) {   /* g went through 1 + g - 1 */
				CHECK(0, "dice of the parts: pixel %zu gradient %g, whole batch %g", i,
				      (double)g2[i], (double)g[i]);
				break;
			}
		/* the parts' own totals give their own, other, loss */
		CHECK(fabs(be->dice_logits(be, n0, HW, x, lab, IGN, 1.0f, t0, g2, 0.0f) - dice) > 1e-6,
		      "the test wants parts whose own Dice differs from the batch's");
	}

	/* stable at large |x|: loss |x| where the sign is wrong, 0-ish where right */
	{
		float l[4] = { 100, -100, 100, -100 }, d[4];
		int32_t y[4] = { 0, 1, 1, 0 };
		double c, v = be->bce_logits(be, 1, 4, l, y, -1, d, 1.0f, &c);
		CHECK(fabs(v - 200) < 1e-9 && c == 4, "extreme bce %.12g", v);
		CHECK(d[0] == 1 && d[1] == -1 && fabs(d[2]) < 1e-30 && fabs(d[3]) < 1e-30,
		      "extreme bce grad %g %g %g %g", d[0], d[1], d[2], d[3]);
	}
	/* by hand: x = 0 gives p = 1/2; t = (1, 0): I = 1/2, P = 1, T = 1,
	 * smooth 1: 1 - 2/3 = 1/3; dL/dx = -(2t*3 - 2)/9 * 1/4 */
	{
		float l[2] = { 0, 0 }, d[2] = { 0, 0 };
		int32_t y[2] = { 1, 0 };
		double v = be->dice_logits(be, 1, 2, l, y, -1, 1.0f, NULL, d, 1.0f);
		CHECK(fabs(v - 1.0 / 3) < 1e-15, "hand dice %.17g", v);
		CHECK(fabs(d[0] - (-4.0 / 36)) < 1e-7 && fabs(d[1] - 2.0 / 36) < 1e-7,
		      "hand dice grad %g %g", d[0], d[1]);
	}
	/* every pixel ignored and no smoothing: 0, not 0/0 */
	{
		float l[2] = { 1, 2 }, d[2] = { 0, 0 };
		int32_t y[2] = { IGN, IGN };
		double v = be->dice_logits(be, 1, 2, l, y, IGN, 0.0f, NULL, d, 1.0f);
		CHECK(v == 0 && d[0] == 0 && d[1] == 0, "empty dice %g", v);
	}
}

static void test_argmax_confusion(void)
{
	/* (N=1, K=3, HW=4); pixel 1 ties classes 0 and 2: the first wins */
	const float l[12] = { 1, 5, 0, -1,   2, 1, 0, -3,   0, 5, 0, -2 };
	const int32_t want[4] = { 1, 0, 0, 0 };
	const float b[4] = { 0.5f, -0.5f, 0, 3 };
	const int32_t wantb[4] = { 1, 0, 0, 1 };
	int32_t pred[4], lab[6] = { 1, 0, 2, IGN, 7, -1 }, pr[6] = { 1, 1, 0, 2, 0, 0 };
	uint64_t conf[9] = { 0 };

	be->argmax(be, 1, 3, 4, l, pred);
	CHECK(memcmp(pred, want, sizeof(want)) == 0, "argmax %d %d %d %d", pred[0], pred[1],
	      pred[2], pred[3]);
	be->argmax(be, 1, 1, 4, b, pred);
	CHECK(memcmp(pred, wantb, sizeof(wantb)) == 0, "argmax k=1 %d %d %d %d", pred[0],
	      pred[1], pred[2], pred[3]);
	be->confusion(be, 6, 3, lab, pr, IGN, conf);
	be->confusion(be, 2, 3, lab, pr, IGN, conf);    /* adds */
	CHECK(conf[1 * 3 + 1] == 2 && conf[0 * 3 + 1] == 2 && conf[2 * 3 + 0] == 1,
	      "confusion cells");
	{
		uint64_t tot = 0;
		for (int i = 0; i < 9; i++)
			tot += conf[i];
		CHECK(tot == 5, "ignored and out-of-range labels not counted: %llu",
		      (unsigned long long)tot);
	}
	/* large input through the chunked path agrees with a plain loop */
	{
		static float x[N * K * HW];
		static int32_t p[N * HW], lb[N * HW];
		int bad = 0;
		fill_inputs(x, N * K * HW, lb, N * HW, K, 3);
		be->set_threads(be, 3);
		be->argmax(be, N, K, HW, x, p);
		be->set_threads(be, 1);
		for (int s = 0; s < N; s++)
			for (int q = 0; q < HW; q++) {
				int best = 0;
				for (int c = 1; c < K; c++)
					if (x[(s * K + c) * HW + q] > x[(s * K + best) * HW + q])
						best = c;
				bad += p[s * HW + q] != best;
			}
		CHECK(bad == 0, "%d argmax mismatches", bad);
	}
}

/* ---- loss.c ------------------------------------------------------------------ */

static void test_loss_select(void)
{
	char err[256];
	cdp_loss l;
	cdp_loss_result r;
	const float cw[2] = { 1, 3 };
	/* (N=1, K=2, HW=3), labels 0, 1, ignored */
	const float x[6] = { 1, 0, 2,   0, 0, -1 };
	const int32_t y[3] = { 0, 1, 9 };
	float d[6];

	CHECK_RC(cdp_loss_init(&l, be, "ce", 2, 9, cw, 2, 1, err, sizeof(err)), 0);
	cdp_loss_compute(&l, 1, 3, x, y, d, &r);
	{
		/* by hand: pixel 0: log(1 + e^-1) weight 1; pixel 1: log 2 weight 3 */
		double l0 = log1p(exp(-1.0)), l1 = log(2.0);
		double want = (l0 + 3 * l1) / 4;
		CHECK(fabs(r.loss - want) < 1e-12, "weighted mean %.15g want %.15g", r.loss, want);
		CHECK(r.count == 4 && r.dice == 0, "count %g", r.count);
		/* d/dx of the weighted mean, pixel 1 class 1: 3 (1/2 - 1) / 4 */
		CHECK(fabs(d[4] - (-0.375)) < 1e-7 && d[2] == 0 && d[5] == 0, "mean grad %g", d[4]);
	}
	cdp_loss_free(&l);

	/* bce+dice = bce mean + dice, gradients add */
	{
		const float xb[4] = { 0.3f, -1.2f, 2.0f, 0.1f };
		const int32_t yb[4] = { 1, 0, 1, IGN };
		float db[4], dd[4], dbd[4];
		cdp_loss_result rb, rd, rbd;
		cdp_loss lb, ld, lbd;
		CHECK_RC(cdp_loss_init(&lb, be, "bce", 2, IGN, NULL, 0, 1, err, sizeof(err)), 0);
		CHECK_RC(cdp_loss_init(&ld, be, "dice", 2, IGN, NULL, 0, 1, err, sizeof(err)), 0);
		CHECK_RC(cdp_loss_init(&lbd, be, "bce+dice", 2, IGN, NULL, 0, 1, err, sizeof(err)), 0);
		CHECK(lb.k == 1 && lb.classes == 2, "binary head has one channel");
		for (int i = 0; i < 4; i++)
			dd[i] = 7;      /* dice alone must clear stale gradients */
		cdp_loss_compute(&lb, 1, 4, xb, yb, db, &rb);
		cdp_loss_compute(&ld, 1, 4, xb, yb, dd, &rd);
		cdp_loss_compute(&lbd, 1, 4, xb, yb, dbd, &rbd);
		CHECK(rb.count == 3 && fabs(rb.loss - rb.sum / 3) < 1e-15, "bce mean");
		CHECK(fabs(rbd.loss - (rb.loss + rd.loss)) < 1e-12 && rbd.dice == rd.loss,
		      "bce+dice %g vs %g + %g", rbd.loss, rb.loss, rd.loss);
		for (int i = 0; i < 4; i++)
			CHECK(fabs(dbd[i] - (db[i] + dd[i])) < 1e-7, "grad %d: %g vs %g + %g", i,
			      dbd[i], db[i], dd[i]);
		CHECK(dd[3] == 0 && db[3] == 0, "ignored pixel");
		cdp_loss_free(&lb);
		cdp_loss_free(&ld);
		cdp_loss_free(&lbd);
	}
	/* all ignored: 0, zero gradient, no NaN */
	{
		const int32_t yi[3] = { 9, 9, 9 };
		CHECK_RC(cdp_loss_init(&l, be, "ce", 2, 9, NULL, 0, 1, err, sizeof(err)), 0);
		cdp_loss_compute(&l, 1, 3, x, yi, d, &r);
		CHECK(r.loss == 0 && r.count == 0 && d[0] == 0 && d[4] == 0, "all ignored");
		{
			const int32_t good[4] = { 0, 1, 9, 1 }, badl[4] = { 0, 1, 2, 1 };
			size_t at = 99;
			CHECK_RC(cdp_loss_check_labels(&l, good, 4, &at), 0);
			CHECK_RC(cdp_loss_check_labels(&l, badl, 4, &at), -1);
			CHECK(at == 2, "bad label at %zu", at);
		}
		cdp_loss_free(&l);
	}
	/* errors */
	CHECK_RC(cdp_loss_init(&l, be, "hinge", 2, -1, NULL, 0, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "loss 'hinge': 'hinge' is not ce, bce, dice, jaccard, tversky, focal, "
	             "lovasz, mse, l1 or huber") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "mse+ce", 2, -1, NULL, 0, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "loss 'mse+ce': the regression loss mse stands alone") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "l1", 0, -1, NULL, 0, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "loss=l1 needs 1 to 65536 outputs, not 0") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "ce", 1, -1, NULL, 0, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "loss=ce needs 2 to 65536 classes, not 1") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "bce", 3, -1, NULL, 0, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "loss=bce is binary: classes must be 2, not 3") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "ce", 3, -1, cw, 2, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "2 class weights for 3 classes") == 0, "%s", err);
	CHECK_RC(cdp_loss_init(&l, be, "dice", 2, -1, cw, 2, 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "class weights need a term ce, not loss=dice") == 0, "%s", err);
	{
		const float zero[2] = { 0, 0 }, neg[2] = { 1, -1 };
		CHECK_RC(cdp_loss_init(&l, be, "ce", 2, -1, zero, 2, 1, err, sizeof(err)), -1);
		CHECK(strcmp(err, "all class weights are 0") == 0, "%s", err);
		CHECK_RC(cdp_loss_init(&l, be, "ce", 2, -1, neg, 2, 1, err, sizeof(err)), -1);
		CHECK(strcmp(err, "class weight 1 (-1) is not a finite number >= 0") == 0, "%s", err);
	}
	CHECK(cdp_loss_kind("bce+dice") == CDP_LOSS_BCE_DICE && cdp_loss_kind("BCE") == -1 &&
	      strcmp(cdp_loss_name(CDP_LOSS_DICE), "dice") == 0, "names");
}

static void test_loss_cfg(void)
{
	char err[256];
	cdp_cfg cfg;
	cdp_loss l;
	static const struct { const char *text; int classes; const char *err; } bad[] = {
		{ "[net]\nloss=ce\nclass_weights=1,x\n", 2,
		  "m.cfg:3: option 'class_weights': 'x' is not a number >= 0" },
		{ "[net]\nloss=ce\nclass_weights=1,,2\n", 3, "m.cfg:3: option 'class_weights': empty item" },
		{ "[net]\nloss=ce\nclass_weights=1,2,\n", 2, "m.cfg:3: option 'class_weights': empty item" },
		{ "[net]\nloss=ce\nclass_weights=1,2\n", 3, "m.cfg:3: [net]: 2 class weights for 3 classes" },
		{ "[net]\nloss=bce\ndice_smooth=-1\n", 2, "m.cfg:3: option 'dice_smooth': -1 is outside [0, 1e30]" },
		{ "[net]\nloss=hinge\n", 2, "m.cfg:1: [net]: loss 'hinge': 'hinge' is not ce, bce, dice, jaccard, tversky, focal, lovasz, mse, l1 or huber" },
		{ "[net]\nignore=-2\n", 2, "m.cfg:2: option 'ignore': -2 is outside [-1, 1073741824]" },
		/* the terms and their keys (loss.h); a term's own option without
		 * that term would be silently ignored */
		{ "[net]\nloss=ce\nfocal_alpha=0.3\n", 2, "m.cfg:3: [net]: focal_alpha is for a "
		  "loss with a term focal, not loss=ce" },
		{ "[net]\nloss=ce+dice\nloss_weights=1,1\nhuber_delta=2\n", 3, "m.cfg:4: [net]: "
		  "huber_delta is for a loss with a term huber, not loss=ce+dice" },
		{ "[net]\nloss=focal\ndice_smooth=5\n", 3, "m.cfg:3: [net]: dice_smooth is for a "
		  "loss with a term dice, jaccard or tversky, not loss=focal" },
		{ "[net]\nloss=dice\nfocal_gamma=3\ntversky_beta=1\n", 3, "m.cfg:3: [net]: "
		  "focal_gamma is for a loss with a term focal, not loss=dice" },
		{ "[net]\nloss=mse\ntversky_alpha=0.9\n", 1, "m.cfg:3: [net]: tversky_alpha is for "
		  "a loss with a term tversky, not loss=mse" },
		{ "[net]\nloss=ce+\n", 3, "m.cfg:1: [net]: loss 'ce+': want terms ce, bce, dice, "
		  "jaccard, tversky, focal or lovasz joined by '+', or one of mse, l1, huber" },
		{ "[net]\nloss=huber\nhuber_delta=0\n", 1, "m.cfg:3: option 'huber_delta': 0 is "
		  "outside [1e-30, 1e30]" },
		{ "[net]\nloss=dice+dice\n", 3, "m.cfg:1: [net]: loss 'dice+dice': 'dice' twice" },
		{ "[net]\nloss=ce+bce\n", 2, "m.cfg:1: [net]: loss 'ce+bce': ce (softmax) and bce "
		  "(sigmoid) do not mix" },
		{ "[net]\nloss=ce+dice+focal+lovasz+jaccard\n", 3, "m.cfg:1: [net]: loss "
		  "'ce+dice+focal+lovasz+jaccard': more than 4 terms" },
		{ "[net]\nloss=bce+dice\n", 3, "m.cfg:1: [net]: loss=bce+dice is binary: classes must "
		  "be 2, not 3" },
		{ "[net]\nloss=ce+dice\nloss_weights=1\n", 3, "m.cfg:1: [net]: 1 loss weights for the "
		  "2 terms of loss=ce+dice" },
		/* all-zero weights would train nothing, as all-zero class weights */
		{ "[net]\nloss=ce+dice\nloss_weights=0;0\n", 3, "m.cfg:1: [net]: all loss weights "
		  "are 0" },
		{ "[net]\nloss=mse\nloss_weights=0\n", 1, "m.cfg:1: [net]: loss=mse takes one loss "
		  "weight, a finite number > 0" },
		{ "[net]\nloss=focal\nfocal_alpha=1,2\n", 3, "m.cfg:1: [net]: focal_alpha: 2 values, "
		  "want 1 or one per class (3)" },
		{ "[net]\nloss=focal\nfocal_alpha=1.5\n", 2, "m.cfg:1: [net]: focal_alpha 1.5 is not "
		  "a finite number >= 0 (a scalar of a binary loss: in [0, 1])" },
		{ "[net]\nloss=dice\nlabel_smoothing=0.1\n", 3, "m.cfg:1: [net]: label smoothing "
		  "needs a term ce, not loss=dice" },
		{ "[net]\nloss=ce\nlabel_smoothing=2\n", 3, "m.cfg:3: option 'label_smoothing': 2 is "
		  "outside [0, 1]" },
		{ "[net]\nloss=focal\nfocal_gamma=-1\n", 3, "m.cfg:3: option 'focal_gamma': -1 is "
		  "outside [0, 1000]" },
	};

	CHECK_RC(cdp_cfg_parse("[net]\nloss=ce\nignore=255\nclass_weights=0.5,2,1\n", "m.cfg",
	                       NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], 3, err, sizeof(err)), 0);
	CHECK(l.kind == CDP_LOSS_CE && l.ignore == 255 && l.class_w != NULL && l.k == 3, "cfg loss");
	{
		float w[3];
		be->to_host(be, w, l.class_w, sizeof(w));
		CHECK(w[0] == 0.5f && w[1] == 2 && w[2] == 1, "weights on device");
	}
	CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[0], err, sizeof(err)), 0);
	cdp_loss_free(&l);
	cdp_cfg_free(&cfg);
	/* huber_delta at its documented lower bound (1e-30 as a double is
	 * below the float 1e-30f) */
	CHECK_RC(cdp_cfg_parse("[net]\nloss=huber\nhuber_delta=1e-30\n", "m.cfg", NULL, 0, &cfg,
	                       err, sizeof(err)), 0);
	CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], 1, err, sizeof(err)), 0);
	cdp_loss_free(&l);
	cdp_cfg_free(&cfg);
	/* a sum: its terms, weights and parts; softmax with 3 classes, binary
	 * with 2 (no ce) */
	CHECK_RC(cdp_cfg_parse("[net]\nloss=ce+dice+lovasz\nloss_weights=1,0.5,2\n", "m.cfg",
	                       NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], 3, err, sizeof(err)), 0);
	CHECK(l.kind == CDP_LOSS_SUM && l.nterm == 3 && l.k == 3 && l.npart == 2 + 9 + 2 &&
	      l.term[1].kind == CDP_LOSS_DICE && l.term[1].weight == 0.5f && l.term[2].off == 11,
	      "ce+dice+lovasz");
	cdp_loss_free(&l);
	cdp_cfg_free(&cfg);
	CHECK_RC(cdp_cfg_parse("[net]\nloss=focal+dice\n", "m.cfg", NULL, 0, &cfg, err,
	                       sizeof(err)), 0);
	CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], 2, err, sizeof(err)), 0);
	CHECK(l.k == 1 && l.classes == 2 && l.npart == 5 && !l.term[1].host, "binary focal+dice");
	cdp_loss_free(&l);
	cdp_cfg_free(&cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RC(cdp_cfg_parse(bad[i].text, "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
		CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], bad[i].classes, err, sizeof(err)), -1);
		CHECK(strcmp(err, bad[i].err) == 0, "'%s' want '%s'", err, bad[i].err);
		cdp_cfg_free(&cfg);
	}
	/* an override the file lacks has no line: "(override)" as the generic
	 * checks say, never "m.cfg:0:"; a key the file has keeps its line */
	{
		static const struct { const char *ov[2]; int classes; const char *err; } ovbad[] = {
			{ { "class_weights=0;0", NULL }, 2,
			  "m.cfg: [net] (override): all class weights are 0" },
			{ { "class_weights=1", NULL }, 2,
			  "m.cfg: [net] (override): 1 class weights for 2 classes" },
			{ { "loss=ce+dice", "loss_weights=1;x" }, 2,
			  "m.cfg: option 'loss_weights' (override): 'x' is not a number >= 0" },
			{ { "class_weights=1;", NULL }, 2,
			  "m.cfg: option 'class_weights' (override): empty item" },
			{ { "huber_delta=2", NULL }, 2, "m.cfg: [net] (override): huber_delta is for a "
			  "loss with a term huber, not loss=ce" },
			{ { "ignore=-5", NULL }, 2,
			  "m.cfg:3: option 'ignore': -5 is outside [-1, 1073741824]" },
		};
		for (size_t i = 0; i < sizeof ovbad / sizeof ovbad[0]; i++) {
			int nov = ovbad[i].ov[1] ? 2 : 1;
			CHECK_RC(cdp_cfg_parse("[net]\nloss=ce\nignore=255\n", "m.cfg", ovbad[i].ov, nov,
			                       &cfg, err, sizeof(err)), 0);
			CHECK_RC(cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], ovbad[i].classes, err,
			                           sizeof(err)), -1);
			CHECK(strcmp(err, ovbad[i].err) == 0, "'%s' want '%s'", err, ovbad[i].err);
			cdp_cfg_free(&cfg);
		}
	}
}

/* loss=bce with positive weights (cdp_loss_set_pos_weight), on a
 * multi-label layout: NS samples of KC classes, the logits (NS, 1, KC),
 * one label ignored. The mean of BCEWithLogitsLoss(pos_weight=w) in double
 * to 1e-9 relative and its gradient to central differences (2e-6: the
 * gradient is a float of about 1 / count). */
static double ref_pos(const double *x, const int32_t *lab, const float *w, int n, int k)
{
	double sum = 0, cnt = 0;

	for (int i = 0; i < n * k; i++) {
		double p = 1 / (1 + exp(-x[i]));
		if (lab[i] == IGN)
			continue;
		sum += -(lab[i] ? w[i % k] * log(p) : log(1 - p));
		cnt += 1;
	}
	return sum / cnt;
}

static void test_pos_weight(void)
{
	enum { NS = 4, KC = 3 };
	const float w[KC] = { 3.0f, 0.5f, 1.0f };
	float x[NS * KC], g[NS * KC];
	int32_t lab[NS * KC];
	double xd[NS * KC], want;
	cdp_loss_result r;
	cdp_loss l;
	char err[256];
	cdp_rng rng;

	cdp_rng_seed(&rng, 7);
	for (int i = 0; i < NS * KC; i++) {
		x[i] = (float)((double)cdp_rng_below(&rng, 4001) / 1000.0 - 2.0);
		xd[i] = x[i];
		lab[i] = (int32_t)cdp_rng_below(&rng, 2);
	}
	lab[5] = IGN;
	CHECK_RC(cdp_loss_init(&l, be, "bce", 2, IGN, NULL, 0, 1.0f, err, sizeof err), 0);
	CHECK_RC(cdp_loss_set_pos_weight(&l, w, KC, err, sizeof err), 0);
	cdp_loss_compute(&l, NS, KC, x, lab, g, &r);
	want = ref_pos(xd, lab, w, NS, KC);
	CHECK(fabs(r.loss - want) <= 1e-9 * want, "pos_weight bce %.12g ref %.12g", r.loss, want);
	for (int j = 0; j < NS * KC; j++) {
		double lp, lm, h = 1e-5;
		xd[j] = (double)x[j] + h;
		lp = ref_pos(xd, lab, w, NS, KC);
		xd[j] = (double)x[j] - h;
		lm = ref_pos(xd, lab, w, NS, KC);
		xd[j] = x[j];
		CHECK(fabs((lp - lm) / (2 * h) - g[j]) < 2e-6, "pos_weight d/dx[%d] %.9g fd %.9g", j,
		      g[j], (lp - lm) / (2 * h));
	}
	cdp_loss_free(&l);
	CHECK_RC(cdp_loss_init(&l, be, "bce+dice", 2, IGN, NULL, 0, 1.0f, err, sizeof err), 0);
	CHECK_RC(cdp_loss_set_pos_weight(&l, w, KC, err, sizeof err), -1);
	CHECK(strcmp(err, "positive weights need loss=bce alone, not loss=bce+dice") == 0, "%s", err);
	cdp_loss_free(&l);
}

int main(void)
{
	be = cdp_backend_cpu(1);
	if (!be) {
		fprintf(stderr, "cannot create the CPU backend\n");
		return 99;
	}
	test_softmax_ce();
	test_bce_dice();
	test_pos_weight();
	test_argmax_confusion();
	test_loss_select();
	test_loss_cfg();
	be->destroy(be);
	return tap_done();
}
