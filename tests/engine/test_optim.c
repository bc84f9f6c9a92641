/* test_optim.c: the CPU optimizer steps (cpu/cpu_optim.c) and optim.c.
 *
 * The expected numbers are computed by hand (SGD) or with the PyTorch
 * formulas in double precision in Python (AdamW, the schedules) and written
 * here as literals; torch 2 in float64 (torch.optim.SGD, AdamW, and
 * SequentialLR of LinearLR with CosineAnnealingLR or StepLR) gives the same
 * values to the last printed digit. Tolerances are
 * float rounding over three steps (1e-6 relative). Also: accumulation of
 * micro-batches, clipping by global norm, a non-finite gradient, the cfg
 * options and their errors, thread-count independence, and the proximal
 * step of ADMM's penalty at each segment's rate.
 */
#include "backend.h"
#include "cdp_error.h"
#include "cdp_rng.h"
#include "cfg/cfg.h"
#include "optim.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static cdp_backend *be;

static int close_to(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fmax(1.0, fabs(b));
}

/* Three SGD steps on w = (1, -2) with grads (0.5, 1), (-0.25, 0.5),
 * (1, -1); lr 0.1, momentum 0.9. */
static void test_sgd_by_hand(void)
{
	static const float g[3][2] = { { 0.5f, 1 }, { -0.25f, 0.5f }, { 1, -1 } };
	static const struct { int nesterov; float wd; int steps; double w[2]; } cases[] = {
		{ 0, 0, 3, { 0.812, -2.266 } },
		{ 1, 0, 2, { 0.912, -2.366 } },
		{ 0, 0.1f, 2, { 0.9016, -2.1812 } },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		float w[2] = { 1, -2 }, v[2] = { 0, 0 };
		for (int t = 0; t < cases[c].steps; t++)
			be->sgd_step(be, w, g[t], v, 2, 0.1f, 0.9f, cases[c].wd, cases[c].nesterov, t == 0);
		CHECK(close_to(w[0], cases[c].w[0], 1e-6) && close_to(w[1], cases[c].w[1], 1e-6),
		      "sgd case %zu: (%.8f, %.8f) want (%.8f, %.8f)", c, w[0], w[1],
		      cases[c].w[0], cases[c].w[1]);
	}
	/* without momentum there is no buffer: plain w -= lr (g + wd w) */
	{
		float w[1] = { 2 }, gg[1] = { 1 };
		be->sgd_step(be, w, gg, NULL, 1, 0.5f, 0, 0.25f, 0, 1);
		be->sgd_step(be, w, gg, NULL, 1, 0.5f, 0, 0.25f, 0, 0);
		/* 2 - 0.5 * 1.5 = 1.25; 1.25 - 0.5 * 1.3125 = 0.59375 */
		CHECK(w[0] == 0.59375f, "plain sgd %.8f", w[0]);
	}
}

static void test_adamw_by_hand(void)
{
	static const float g[3] = { 0.5f, -0.25f, 1 };
	static const double want[3] = { 0.899000002, 0.8714672987058463, 0.804784672376384 };
	float w = 1, m = 0, v = 0;

	for (int t = 0; t < 3; t++) {
		be->adamw_step(be, &w, &g[t], &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, t + 1);
		CHECK(close_to(w, want[t], 1e-6), "adamw step %d: %.9f want %.9f", t + 1, w, want[t]);
	}
}

/* Elementwise updates give the same bits for any thread count. */
static void test_threads(void)
{
	enum { NP = 100003 };
	float *w1 = malloc(NP * 4), *w2 = malloc(NP * 4), *g = malloc(NP * 4);
	float *m1 = calloc(NP, 4), *v1 = calloc(NP, 4), *m2 = calloc(NP, 4), *v2 = calloc(NP, 4);
	cdp_rng r;

	cdp_rng_seed(&r, 5);
	for (int i = 0; i < NP; i++) {
		w1[i] = w2[i] = (float)cdp_rng_normal(&r);
		g[i] = (float)cdp_rng_normal(&r);
	}
	be->set_threads(be, 1);
	be->adamw_step(be, w1, g, m1, v1, NP, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
	be->sgd_step(be, w1, g, v1, NP, 1e-2f, 0.9f, 1e-4f, 1, 0);
	be->set_threads(be, 3);
	be->adamw_step(be, w2, g, m2, v2, NP, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
	be->sgd_step(be, w2, g, v2, NP, 1e-2f, 0.9f, 1e-4f, 1, 0);
	be->set_threads(be, 1);
	CHECK(memcmp(w1, w2, NP * 4) == 0 && memcmp(m1, m2, NP * 4) == 0 &&
	      memcmp(v1, v2, NP * 4) == 0, "optimizer result depends on the thread count");
	free(w1); free(w2); free(g); free(m1); free(v1); free(m2); free(v2);
}

/* The updates as torch.optim's single-tensor code writes them, one
 * element at a time in float with no FMA: the backend's vectorized loops
 * (cpu_optim.c, clones for AVX2 and AVX-512) must give these bits, on
 * every element of a block whose length is not a multiple of any vector
 * width, whichever case of SGD (momentum, nesterov, first step) runs. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void ref_sgd(float *w, const float *g, float *v, size_t n, float lr, float mu, float wd,
                    int nesterov, int first)
{
	for (size_t j = 0; j < n; j++) {
		float gj = g[j] + wd * w[j], d = gj;
		if (mu != 0) {
			v[j] = first ? gj : mu * v[j] + gj;
			d = nesterov ? gj + mu * v[j] : v[j];
		}
		w[j] -= lr * d;
	}
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void ref_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr,
                      float b1, float b2, float eps, float wd, long t)
{
	double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
	float decay = (float)(1.0 - (double)lr * wd), w1 = (float)(1.0 - b1);
	float c2 = (float)(1.0 - b2), step = (float)(lr / bc1), bc2s = (float)sqrt(bc2);

	for (size_t j = 0; j < n; j++) {
		float gj = g[j], wj = w[j] * decay;
		float mj = w1 < 0.5f ? m[j] + w1 * (gj - m[j]) : gj - (gj - m[j]) * (1.0f - w1);
		float vj = v[j] * b2 + c2 * gj * gj;
		m[j] = mj;
		v[j] = vj;
		w[j] = wj - step * (mj / (sqrtf(vj) / bc2s + eps));
	}
}

static void test_bits(void)
{
	enum { NP = 40009 };
	float *w[2], *m[2], *v[2], *g = malloc(NP * 4);
	static const struct { float mu; int nesterov; } sgd[] = { { 0, 0 }, { 0.9f, 0 }, { 0.9f, 1 } };
	static const float b1s[] = { 0.9f, 0.3f };     /* both forms of lerp */
	cdp_rng r;
	int bad = 0;

	for (int k = 0; k < 2; k++) {
		w[k] = malloc(NP * 4);
		m[k] = malloc(NP * 4);
		v[k] = malloc(NP * 4);
	}
	cdp_rng_seed(&r, 11);
	for (int i = 0; i < NP; i++)
		g[i] = (float)cdp_rng_normal(&r) * (i % 7 == 0 ? 1e-6f : 1.0f);
	for (size_t c = 0; c < 3 * 2 + 2 * 3; c++) {
		int is_sgd = c < 6;
		for (int i = 0; i < NP; i++)
			w[0][i] = w[1][i] = (float)cdp_rng_normal(&r);
		memset(m[0], 0, NP * 4);
		memset(m[1], 0, NP * 4);
		memset(v[0], 0, NP * 4);
		memset(v[1], 0, NP * 4);
		for (int t = 1; t <= 3; t++) {
			if (is_sgd) {
				int first = c % 2 == 0 ? t == 1 : 0, s = (int)c / 2;
				be->sgd_step(be, w[0], g, v[0], NP, 0.05f, sgd[s].mu, 1e-3f, sgd[s].nesterov,
				             first);
				ref_sgd(w[1], g, v[1], NP, 0.05f, sgd[s].mu, 1e-3f, sgd[s].nesterov, first);
			} else {
				float b1 = b1s[(c - 6) % 2], wd = (c - 6) / 2 == 1 ? 0 : 0.01f;
				long step = (c - 6) / 2 == 2 ? 1000 + t : t;
				be->adamw_step(be, w[0], g, m[0], v[0], NP, 1e-3f, b1, 0.999f, 1e-8f, wd, step);
				ref_adamw(w[1], g, m[1], v[1], NP, 1e-3f, b1, 0.999f, 1e-8f, wd, step);
			}
		}
		if (memcmp(w[0], w[1], NP * 4) || memcmp(v[0], v[1], NP * 4) ||
		    (!is_sgd && memcmp(m[0], m[1], NP * 4))) {
			bad++;
			CHECK(0, "%s case %zu: the backend's bits differ from the element-wise "
			      "reference", is_sgd ? "sgd" : "adamw", c);
		}
	}
	CHECK(bad == 0, "optimizer steps give the reference's bits");
	/* the norm: the eight ordered sums against long double, any tail */
	for (size_t n = 0; n < 20; n++) {
		long double want = 0;
		for (size_t i = 0; i < n; i++)
			want += (long double)g[i] * g[i];
		double got = be->sumsq(be, g, n);
		CHECK(fabs(got - (double)want) <= 1e-15 * (double)want, "sumsq of %zu floats: %.17g, "
		      "want %.17Lg", n, got, want);
	}
	{
		long double want = 0;
		double got = be->sumsq(be, g, NP);
		for (size_t i = 0; i < NP; i++)
			want += (long double)g[i] * g[i];
		CHECK(fabs(got - (double)want) <= 1e-14 * (double)want, "sumsq of %d floats: %.17g, "
		      "want %.17Lg", NP, got, want);
	}
	for (int k = 0; k < 2; k++) {
		free(w[k]);
		free(m[k]);
		free(v[k]);
	}
	free(g);
}

/* cdp_optim_part over ranges that cut segments (one frozen, one at half
 * the lr) gives cdp_optim_step's parameters and moments bit for bit, over
 * steps of a warm-up schedule; the norm is the whole one to rounding. */
static void test_parts(void)
{
	enum { NP = 5000, STEPS = 4 };
	static const size_t cut[] = { 0, 1, 1200, 1201, 3333, 4999, NP };   /* one empty part */
	cdp_optim_seg seg[3] = { { 0, 1000, 1.0f, 0 }, { 1000, 2500, 0.5f, 0 },
	                         { 3500, 1500, 1.0f, 1 } };
	char err[256];
	int types[2] = { CDP_OPT_SGD, CDP_OPT_ADAMW };

	for (int k = 0; k < 2; k++) {
		cdp_optim_cfg c;
		cdp_optim o[2];
		float *w[2], *g[2];
		cdp_rng r;
		int same = 1;
		cdp_optim_defaults(&c);
		c.type = types[k];
		c.lr = 0.01f;
		c.weight_decay = 0.02f;
		c.warmup = 2;
		for (int i = 0; i < 2; i++) {
			CHECK_RC(cdp_optim_init(&o[i], be, &c, NP, err, sizeof err), 0);
			o[i].seg = malloc(sizeof seg);
			memcpy(o[i].seg, seg, sizeof seg);
			o[i].nseg = 3;
			w[i] = malloc(NP * 4);
			g[i] = malloc(NP * 4);
		}
		CHECK(cdp_optim_parts_ok(&o[0]), "parts without clipping, accumulate 1");
		cdp_rng_seed(&r, 21);
		for (int j = 0; j < NP; j++)
			w[0][j] = w[1][j] = (float)cdp_rng_normal(&r);
		for (int t = 0; t < STEPS; t++) {
			double norm;
			for (int j = 0; j < NP; j++)
				g[0][j] = g[1][j] = (float)cdp_rng_normal(&r);
			CHECK_RC(cdp_optim_step(&o[0], w[0], g[0]), 0);
			for (int p = 5; p >= 0; p--)    /* the last range first, as buckets go */
				cdp_optim_part(&o[1], w[1], g[1], cut[p], cut[p + 1] - cut[p]);
			CHECK_RC(cdp_optim_parts_done(&o[1]), 0);
			norm = o[0].last_norm;
			CHECK(fabs(o[1].last_norm - norm) <= 1e-12 * norm && o[1].step == o[0].step &&
			      o[1].last_lr == o[0].last_lr, "%s step %d: norm %.17g want %.17g",
			      cdp_optim_type_name(c.type), t, o[1].last_norm, norm);
			same &= !memcmp(w[0], w[1], NP * 4) && !memcmp(g[1], g[0], NP * 4) &&
			        !memcmp(o[0].v, o[1].v, NP * 4) &&
			        (!o[0].m || !memcmp(o[0].m, o[1].m, NP * 4));
		}
		CHECK(same, "%s in parts: the parameters, moments and zeroed grads of one step",
		      cdp_optim_type_name(c.type));
		g[1][7] = NAN;
		for (int p = 0; p < 6; p++)
			cdp_optim_part(&o[1], w[1], g[1], cut[p], cut[p + 1] - cut[p]);
		CHECK(cdp_optim_parts_done(&o[1]) == CDP_ERANGE && isnan(o[1].last_norm),
		      "a NaN in a part: parts_done says so");
		for (int i = 0; i < 2; i++) {
			cdp_optim_free(&o[i]);
			free(w[i]);
			free(g[i]);
		}
	}
	{
		cdp_optim_cfg c;
		cdp_optim_defaults(&c);
		c.clip_norm = 1;
		cdp_optim o;
		CHECK_RC(cdp_optim_init(&o, be, &c, 4, err, sizeof err), 0);
		CHECK(!cdp_optim_parts_ok(&o), "clipping needs the whole gradient");
		cdp_optim_free(&o);
		c.clip_norm = 0;
		c.accumulate = 2;
		CHECK_RC(cdp_optim_init(&o, be, &c, 4, err, sizeof err), 0);
		CHECK(!cdp_optim_parts_ok(&o), "accumulation needs the whole gradient");
		cdp_optim_free(&o);
	}
}

/* cdp_optim_prox after a step in warm-up (lr 0.1 x 0.55 at step 1 of
 * 2, warmup_factor 0.1): each segment moves to (w + eta rho t) /
 * (1 + eta rho) at its own eta (lr_mult 0.5 halves it), a frozen one not
 * at all; rho 1e6 lands on the target, where rho (w - t) added to the
 * gradient would overshoot it 1e5-fold. */
static void test_prox(void)
{
	cdp_optim_seg seg[3] = { { 0, 2, 1.0f, 0 }, { 2, 2, 0.5f, 0 }, { 4, 2, 1.0f, 1 } };
	static const double rhos[] = { 0.5, 1e6 };
	char err[256];

	for (size_t k = 0; k < sizeof rhos / sizeof rhos[0]; k++) {
		cdp_optim_cfg c;
		cdp_optim o;
		float w[6], g[6] = { 0 }, d[6];
		const float t[6] = { 1, -1, 2, -2, 3, -3 };
		double rho = rhos[k];
		cdp_optim_defaults(&c);
		c.lr = 0.1f;
		c.momentum = 0;
		c.warmup = 2;
		CHECK_RC(cdp_optim_init(&o, be, &c, 6, err, sizeof err), 0);
		o.seg = malloc(sizeof seg);
		memcpy(o.seg, seg, sizeof seg);
		o.nseg = 3;
		/* zero gradients: the steps move nothing */
		for (int step = 0; step < 2; step++) {
			for (int j = 0; j < 6; j++)
				w[j] = (float)(j + 1);
			CHECK_RC(cdp_optim_step(&o, w, g), 0);
		}
		CHECK(close_to(o.last_lr, 0.055, 1e-6), "warm-up rate %.17g", o.last_lr);
		for (int j = 0; j < 6; j++)
			d[j] = t[j] - w[j];
		cdp_optim_prox(&o, w, d, rho);
		for (int j = 0; j < 6; j++) {
			double eta = (float)(o.last_lr * (j < 2 ? 1.0 : 0.5)), a = eta * rho;
			double want = j >= 4 ? j + 1 : (j + 1 + a * t[j]) / (1 + a);
			CHECK(close_to(w[j], want, 1e-6), "rho %g, parameter %d: %.8f want %.8f", rho,
			      j, w[j], want);
		}
		cdp_optim_free(&o);
	}
}

static void test_schedules(void)
{
	static const double cosine[14] = {
		0.025, 0.043750000000000004, 0.0625, 0.08125, 0.1, 0.0962320368593087,
		0.0855017856687341, 0.06944282990207196, 0.0505, 0.03155717009792806,
		0.0154982143312659, 0.004767963140691307, 0.001, 0.001 };
	cdp_optim_cfg c;

	cdp_optim_defaults(&c);
	c.lr = 0.1f;
	CHECK(cdp_optim_lr(&c, 0) == (double)0.1f && cdp_optim_lr(&c, 99999) == (double)0.1f,
	      "constant");
	/* warm-up 4 steps from lr/4, then cosine to 0.001 at step 12 */
	c.lr = 0.1f;
	c.warmup = 4;
	c.warmup_factor = 0.25f;
	c.policy = CDP_LR_COSINE;
	c.total_steps = 12;
	c.min_lr = 0.001f;
	for (int t = 0; t < 14; t++)
		CHECK(close_to(cdp_optim_lr(&c, t), cosine[t], 1e-6), "cosine lr(%d) = %.9g want %.9g",
		      t, cdp_optim_lr(&c, t), cosine[t]);
	/* step decay counted after the warm-up: x0.5 every 3 steps */
	c.policy = CDP_LR_STEP;
	c.step_size = 3;
	c.gamma = 0.5f;
	CHECK(close_to(cdp_optim_lr(&c, 2), 0.0625, 1e-6), "warm-up before step");
	CHECK(close_to(cdp_optim_lr(&c, 4), 0.1, 1e-6) && close_to(cdp_optim_lr(&c, 6), 0.1, 1e-6) &&
	      close_to(cdp_optim_lr(&c, 7), 0.05, 1e-6) && close_to(cdp_optim_lr(&c, 13), 0.0125, 1e-6),
	      "step lr %g %g %g", cdp_optim_lr(&c, 6), cdp_optim_lr(&c, 7), cdp_optim_lr(&c, 13));
	/* warm-up from zero */
	c.warmup_factor = 0;
	CHECK(cdp_optim_lr(&c, 0) == 0 && close_to(cdp_optim_lr(&c, 1), 0.025, 1e-6), "from 0");
}

/* Accumulation, clipping, step counting and the non-finite guard, through
 * cdp_optim_step with plain SGD (lr 1, no momentum) so w moves by -g. */
static void test_step(void)
{
	char err[256];
	cdp_optim_cfg c;
	cdp_optim o;
	float *w = be->alloc(be, 2 * sizeof(float)), *g = be->alloc(be, 2 * sizeof(float));
	float hw[2];

	cdp_optim_defaults(&c);
	c.lr = 1;
	c.momentum = 0;
	c.accumulate = 3;
	CHECK_RC(cdp_optim_init(&o, be, &c, 2, err, sizeof(err)), 0);
	CHECK(o.m == NULL && o.v == NULL, "no moment blocks for plain sgd");
	for (int i = 0; i < 3; i++) {
		/* each micro-batch backward adds (1, 2) */
		g[0] += 1;
		g[1] += 2;
		CHECK(cdp_optim_micro_done(&o) == (i == 2), "micro_done at %d", i);
	}
	CHECK_RC(cdp_optim_step(&o, w, g), 0);
	be->to_host(be, hw, w, sizeof(hw));
	/* the mean over 3 micro-batches, not the sum */
	CHECK(close_to(hw[0], -1, 1e-6) && close_to(hw[1], -2, 1e-6), "accumulated step %g %g",
	      hw[0], hw[1]);
	CHECK(g[0] == 0 && g[1] == 0, "grads zeroed after the step");
	CHECK(o.step == 1 && o.micro == 0 && close_to(o.last_norm, sqrt(5.0), 1e-6), "bookkeeping");
	cdp_optim_free(&o);

	/* clipping: (3, 4) has norm 5; clip to 1 -> (0.6, 0.8) */
	c.accumulate = 1;
	c.clip_norm = 1;
	CHECK_RC(cdp_optim_init(&o, be, &c, 2, err, sizeof(err)), 0);
	w[0] = w[1] = 0;
	g[0] = 3;
	g[1] = 4;
	CHECK_RC(cdp_optim_step(&o, w, g), 0);
	CHECK(close_to(w[0], -0.6, 1e-6) && close_to(w[1], -0.8, 1e-6), "clipped %g %g", w[0], w[1]);
	CHECK(o.last_norm == 5, "norm before clipping %g", o.last_norm);
	/* below the limit nothing changes */
	g[0] = 0.3f;
	g[1] = 0.4f;
	CHECK_RC(cdp_optim_step(&o, w, g), 0);
	CHECK(close_to(w[0], -0.9, 1e-6) && close_to(w[1], -1.2, 1e-6), "unclipped %g %g", w[0], w[1]);
	/* a NaN gradient: no update, not counted, grads cleared */
	g[0] = NAN;
	CHECK_RC(cdp_optim_step(&o, w, g), CDP_ERANGE);
	CHECK(close_to(w[0], -0.9, 1e-6) && o.step == 2 && g[0] == 0 && g[1] == 0, "nan skipped");
	cdp_optim_free(&o);

	/* AdamW through the wrapper: same as the op with t = step + 1 and the
	 * scheduled lr (warm-up factor 0.5 at step 0) */
	cdp_optim_defaults(&c);
	c.type = CDP_OPT_ADAMW;
	c.lr = 0.1f;
	c.weight_decay = 0.01f;
	c.warmup = 2;
	c.warmup_factor = 0.5f;
	CHECK_RC(cdp_optim_init(&o, be, &c, 1, err, sizeof(err)), 0);
	CHECK(o.m != NULL && o.v != NULL, "adamw blocks");
	{
		float ww = 1, gg = 0.5f, m = 0, v = 0;
		w[0] = 1;
		g[0] = 0.5f;
		CHECK_RC(cdp_optim_step(&o, w, g), 0);
		be->adamw_step(be, &ww, &gg, &m, &v, 1, 0.05f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
		CHECK(w[0] == ww && close_to(o.last_lr, 0.05, 1e-7), "adamw via optim %.9g vs %.9g", w[0], ww);
	}
	cdp_optim_free(&o);
	be->free(be, w);
	be->free(be, g);
}

static void test_cfg(void)
{
	char err[256];
	cdp_cfg cfg;
	cdp_optim_cfg c;
	cdp_optim o;
	static const struct { const char *text; const char *err; } bad[] = {
		{ "[net]\noptimizer=adam\n", "m.cfg:2: option 'optimizer': 'adam' is not sgd or adamw" },
		{ "[net]\nlr_policy=poly\n",
		  "m.cfg:2: option 'lr_policy': 'poly' is not constant, step or cosine" },
		{ "[net]\nmomentum=0\nnesterov=1\n", "m.cfg:3: option 'nesterov': nesterov=1 needs momentum > 0" },
		{ "[net]\nlr=-1\n", "m.cfg:2: option 'lr': -1 is outside [0, 1e6]" },
		{ "[net]\naccumulate=0\n", "m.cfg:2: option 'accumulate': 0 is outside [1, 1048576]" },
		{ "[net]\nbeta2=1\n", "m.cfg:2: option 'beta2': 1 is outside [0, 0.999999]" },
		/* the bound as cdp-model(5) writes it, not %g's "1" */
		{ "[net]\nema=1\n", "m.cfg:2: option 'ema': 1 is outside [0, 0.99999994]" },
		/* as cdp-train --momentum: below 1, also after rounding to float,
		 * and one range in the message whatever the value above it */
		{ "[net]\nmomentum=1\n", "m.cfg:2: option 'momentum': 1 is outside [0, 1)" },
		{ "[net]\nmomentum=0.99999999\n",
		  "m.cfg:2: option 'momentum': 0.99999999 is outside [0, 1)" },
		{ "[net]\nmomentum=1.5\n", "m.cfg:2: option 'momentum': 1.5 is outside [0, 1)" },
		{ "[net]\nmomentum=-0.5\n", "m.cfg:2: option 'momentum': -0.5 is outside [0, 1)" },
	};

	CHECK_RC(cdp_cfg_parse("[net]\noptimizer=adamw\nbeta2=0.99\nlr_policy=cosine\nwarmup=10\n"
	                       "lr_min=1e-5\nclip_norm=2.5\naccumulate=4\n", "m.cfg", NULL, 0, &cfg,
	                       err, sizeof(err)), 0);
	CHECK_RC(cdp_optim_cfg_parse(&c, &cfg, &cfg.s[0], err, sizeof(err)), 0);
	CHECK(c.type == CDP_OPT_ADAMW && c.lr == 0.001f && c.weight_decay == 0.01f &&
	      c.beta2 == 0.99f && c.policy == CDP_LR_COSINE && c.warmup == 10 &&
	      c.min_lr == 1e-5f && c.clip_norm == 2.5f && c.accumulate == 4, "parsed adamw");
	CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[0], err, sizeof(err)), 0);
	/* cosine needs total_steps from the trainer */
	CHECK_RC(cdp_optim_init(&o, be, &c, 4, err, sizeof(err)), -1);
	CHECK(strcmp(err, "lr_policy=cosine needs more total steps (0) than warm-up steps (10)") == 0,
	      "%s", err);
	c.total_steps = 100;
	CHECK_RC(cdp_optim_init(&o, be, &c, 4, err, sizeof(err)), 0);
	cdp_optim_free(&o);
	cdp_cfg_free(&cfg);

	/* cdp-model(5)'s inclusive bounds, which as doubles lie just beyond
	 * the float constants; 0.99999995 is the float 0.99999994 */
	CHECK_RC(cdp_cfg_parse("[net]\noptimizer=adamw\nbeta1=0.999999\nbeta2=0.999999\n"
	                       "adam_eps=1e-30\nema=0.99999995\n", "m.cfg", NULL, 0, &cfg, err,
	                       sizeof(err)), 0);
	CHECK_RC(cdp_optim_cfg_parse(&c, &cfg, &cfg.s[0], err, sizeof(err)), 0);
	CHECK(c.beta1 == 0.999999f && c.beta2 == 0.999999f && c.eps == 1e-30f &&
	      c.ema == 0.99999994f, "documented bounds: %s", err);
	cdp_cfg_free(&cfg);

	CHECK_RC(cdp_cfg_parse("[net]\n", "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_optim_cfg_parse(&c, &cfg, &cfg.s[0], err, sizeof(err)), 0);
	CHECK(c.type == CDP_OPT_SGD && c.lr == 0.01f && c.momentum == 0.9f && c.weight_decay == 0 &&
	      c.accumulate == 1 && c.policy == CDP_LR_CONSTANT && cdp_optim_nblocks(&c) == 1,
	      "sgd defaults");
	cdp_cfg_free(&cfg);
	/* the library's check holds a filled cfg (a checkpoint's) to the
	 * cfg's ranges: momentum 1 never decays */
	c.momentum = 1;
	CHECK_RC(cdp_optim_cfg_check(&c, err, sizeof(err)), -1);
	CHECK(strcmp(err, "momentum must be in [0, 1)") == 0, "%s", err);
	c.momentum = 0.9f;
	CHECK_RC(cdp_optim_cfg_check(&c, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RC(cdp_cfg_parse(bad[i].text, "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
		CHECK_RC(cdp_optim_cfg_parse(&c, &cfg, &cfg.s[0], err, sizeof(err)), -1);
		CHECK(strcmp(err, bad[i].err) == 0, "'%s' want '%s'", err, bad[i].err);
		cdp_cfg_free(&cfg);
	}
	/* an override the file lacks has no line: "(override)", as the
	 * generic checks say (cdp-model(5)), never "m.cfg:0:" */
	{
		static const struct { const char *ov[2]; const char *err; } ovbad[] = {
			{ { "lr_policy=poly", NULL },
			  "m.cfg: option 'lr_policy' (override): 'poly' is not constant, step or cosine" },
			{ { "optimizer=adam", NULL },
			  "m.cfg: option 'optimizer' (override): 'adam' is not sgd or adamw" },
			{ { "momentum=0", "nesterov=1" },
			  "m.cfg: option 'nesterov' (override): nesterov=1 needs momentum > 0" },
			{ { "beta1=2", NULL }, "m.cfg: option 'beta1' (override): 2 is outside [0, 0.999999]" },
		};
		for (size_t i = 0; i < sizeof ovbad / sizeof ovbad[0]; i++) {
			int nov = ovbad[i].ov[1] ? 2 : 1;
			CHECK_RC(cdp_cfg_parse("[net]\nlr=0.1\n", "m.cfg", ovbad[i].ov, nov, &cfg, err,
			                       sizeof(err)), 0);
			CHECK_RC(cdp_optim_cfg_parse(&c, &cfg, &cfg.s[0], err, sizeof(err)), -1);
			CHECK(strcmp(err, ovbad[i].err) == 0, "'%s' want '%s'", err, ovbad[i].err);
			cdp_cfg_free(&cfg);
		}
	}
	CHECK(strcmp(cdp_optim_type_name(CDP_OPT_ADAMW), "adamw") == 0 &&
	      strcmp(cdp_optim_policy_name(CDP_LR_STEP), "step") == 0, "names");
}

int main(void)
{
	be = cdp_backend_cpu(1);
	if (!be) {
		fprintf(stderr, "cannot create the CPU backend\n");
		return 99;
	}
	test_sgd_by_hand();
	test_adamw_by_hand();
	test_threads();
	test_bits();
	test_parts();
	test_prox();
	test_schedules();
	test_step();
	test_cfg();
	be->destroy(be);
	return tap_done();
}
