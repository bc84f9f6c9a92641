/* test_overfit.c: the shipped models can learn: each fits a small fixed
 * training set within a fixed step budget, measured in eval mode (batchnorm
 * on its running statistics, no dropout), as cdp-predict would run it.
 *
 *  - unet.cfg (width 8, depth 2) on 8 generated 64x64 RGB road tiles: a
 *    grey road, a sine-bent band 3-7 px wide running across the tile, on a
 *    green field, uniform noise of +-0.25 per band on both (so strong that
 *    the best per-pixel colour threshold reaches an IoU of ~0.85: the net must
 *    use the neighbourhood): road IoU >= 0.95;
 *  - classifier.cfg (width 8, blocks 3) on 20 generated 64x64 tiles of 5
 *    texture classes (horizontal, vertical and diagonal stripes, checkers,
 *    rings; random period, phase and colours, +-0.25 noise), 4 per class: 100%
 *    accuracy.
 * The optimizer, loss and schedule are the cfg's own, read through
 * cdp_optim_cfg_parse / cdp_loss_init_cfg, with only the learning rate and
 * warm-up overridden for a run this short (cosine decay over the budget).
 * The metric is checked every 10 steps; the test fails when the budget is
 * spent first. Data, init and dropout masks come from fixed seeds, so a
 * run is the same every time (on 2 threads: 70 of 200 steps for the U-Net,
 * 30 of 150 for the classifier, ~7 s together).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cdp_rng.h"
#include "loss.h"
#include "cdp_metrics.h"
#include "net.h"
#include "optim.h"
#include "tap.h"
#include "test_models.h"

#define SIDE 64
#define NPIX (SIDE * SIDE)

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double noise(cdp_rng *r, double amp)
{
	return amp * (cdp_rng_double(r) - 0.5);
}

/* img (3, 64, 64) in about [-0.5, 0.5], mask (64, 64): 1 on the road */
static void road_tile(uint64_t seed, float *img, int32_t *mask)
{
	static const double field[3] = { 0.25, 0.45, 0.20 }, road[3] = { 0.55, 0.55, 0.60 };
	cdp_rng r;
	cdp_rng_seed(&r, seed);
	int vertical = (int)cdp_rng_below(&r, 2);
	double centre = 16 + (double)cdp_rng_below(&r, 32);
	double amp = 2 + (double)cdp_rng_below(&r, 10);
	double period = 32 + (double)cdp_rng_below(&r, 64);
	double phase = cdp_rng_double(&r) * 2 * M_PI;
	double half = 1.5 + 0.5 * (double)cdp_rng_below(&r, 5);

	for (int y = 0; y < SIDE; y++)
		for (int x = 0; x < SIDE; x++) {
			double along = vertical ? y : x, across = vertical ? x : y;
			double c = centre + amp * sin(2 * M_PI * along / period + phase);
			int on = fabs(across - c) <= half;
			mask[y * SIDE + x] = on;
			for (int ch = 0; ch < 3; ch++)
				img[ch * NPIX + y * SIDE + x] =
					(float)((on ? road[ch] : field[ch]) + noise(&r, 0.5) - 0.5);
		}
}

/* img (3, 64, 64) of texture class cls in [0, 5) */
static void texture_tile(uint64_t seed, int cls, float *img)
{
	cdp_rng r;
	cdp_rng_seed(&r, seed);
	double period = 8 + (double)cdp_rng_below(&r, 9);
	double phase = cdp_rng_double(&r) * period;
	double a[3], b[3];

	for (int ch = 0; ch < 3; ch++) {
		a[ch] = cdp_rng_double(&r);
		b[ch] = a[ch] > 0.5 ? a[ch] - 0.4 - 0.1 * cdp_rng_double(&r)
		                    : a[ch] + 0.4 + 0.1 * cdp_rng_double(&r);
	}
	for (int y = 0; y < SIDE; y++)
		for (int x = 0; x < SIDE; x++) {
			double t;
			switch (cls) {
			case 0: t = y; break;                                   /* horizontal */
			case 1: t = x; break;                                   /* vertical */
			case 2: t = (x + y) / M_SQRT2; break;                   /* diagonal */
			case 3: t = floor((x + phase) / (period / 2)) + floor((y + phase) / (period / 2));
			        t = t * period / 2; break;                      /* checkers */
			default: t = hypot(x - 32, y - 32); break;              /* rings */
			}
			int on = fmod(t + phase + 1000 * period, period) < period / 2;
			for (int ch = 0; ch < 3; ch++)
				img[ch * NPIX + y * SIDE + x] =
					(float)((on ? a[ch] : b[ch]) + noise(&r, 0.5) - 0.5);
		}
}

typedef struct fit {
	const char *model;
	const char *const *ov;
	int nov, n;                 /* overrides, batch = the whole set */
	int budget;                 /* steps */
	float *x;                   /* host (N, 3, 64, 64) */
	int32_t *labels;            /* host (N, HW of the head) */
	int steps;                  /* out: steps to the target, or budget + 1 */
	double metric, seconds;     /* out */
} fit;

/* Eval-mode metric on the training set: road IoU (k = 2, HW > 1) or
 * accuracy (classification). */
static double evaluate(cdp_net *net, const cdp_loss *loss, int hw, int32_t *dlab, int32_t *pred)
{
	cdp_backend *be = net->be;
	uint64_t conf[5 * 5] = { 0 };
	int k = loss->classes;

	net->train = 0;
	cdp_net_forward(net);
	net->train = 1;
	be->argmax(be, net->n, loss->k, hw, cdp_net_output(net), pred);
	be->confusion(be, net->n * hw, k, dlab, pred, loss->ignore, conf);
	return hw > 1 ? cdp_metrics_iou(conf, k, 1) : cdp_metrics_accuracy(conf, k);
}

/* Trains f->model on (x, labels) until the metric reaches target. */
static int run_fit(cdp_backend *be, fit *f, double target)
{
	char *text = read_model(f->model), err[512];
	cdp_net net;
	cdp_cfg cfg;
	cdp_loss loss;
	cdp_optim_cfg oc;
	cdp_optim opt;
	cdp_loss_result res;
	int32_t *dlab = NULL, *pred = NULL;
	int hw, rc = -1, have_net = 0, have_cfg = 0, have_loss = 0, have_opt = 0;
	double t0 = now();

	f->steps = f->budget + 1;
	f->metric = 0;
	if (!text) {
		fprintf(stderr, "cannot read %s\n", f->model);
		return -1;
	}
	if (cdp_net_build(&net, be, text, f->model, f->ov, f->nov, 3, SIDE, SIDE, f->n, err,
	                  sizeof err) < 0)
		goto fail;
	have_net = 1;
	if (cdp_cfg_parse(text, f->model, f->ov, f->nov, &cfg, err, sizeof err) < 0)
		goto fail;
	have_cfg = 1;
	if (cdp_loss_init_cfg(&loss, be, &cfg, &cfg.s[0], net.classes, err, sizeof err) < 0)
		goto fail;
	have_loss = 1;
	if (cdp_optim_cfg_parse(&oc, &cfg, &cfg.s[0], err, sizeof err) < 0)
		goto fail;
	oc.total_steps = f->budget;
	if (cdp_optim_init(&opt, be, &oc, net.nparams, err, sizeof err) < 0)
		goto fail;
	have_opt = 1;
	hw = net.layers[net.out_layer].out.h * net.layers[net.out_layer].out.w;
	dlab = be->alloc(be, (size_t)f->n * hw * sizeof *dlab);
	pred = be->alloc(be, (size_t)f->n * hw * sizeof *pred);
	if (!dlab || !pred)
		goto out;
	be->to_device(be, dlab, f->labels, (size_t)f->n * hw * sizeof *dlab);
	be->to_device(be, net.x, f->x, (size_t)f->n * 3 * NPIX * sizeof(float));
	cdp_net_init(&net, 42);
	cdp_net_zero_grad(&net);
	for (int step = 1; step <= f->budget; step++) {
		cdp_layer *out = &net.layers[net.out_layer];
		net.step_seed = cdp_rng_derive(42, 1, (uint64_t)step);
		cdp_net_forward(&net);
		cdp_loss_compute(&loss, net.n, hw, out->y, dlab, out->dy, &res);
		cdp_net_backward(&net, NULL, NULL);
		if (cdp_optim_micro_done(&opt) && cdp_optim_step(&opt, net.params, net.grads) != 0) {
			fprintf(stderr, "%s: step %d: gradient norm %g\n", f->model, step, opt.last_norm);
			goto out;
		}
		if (step % 10 == 0) {
			f->metric = evaluate(&net, &loss, hw, dlab, pred);
			printf("# %s step %d loss %.5f lr %.5f metric %.4f\n", f->model, step, res.loss,
			       opt.last_lr, f->metric);
			if (f->metric >= target) {
				f->steps = step;
				break;
			}
		}
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "%s: %s\n", f->model, err);
out:
	f->seconds = now() - t0;
	if (dlab)
		be->free(be, dlab);
	if (pred)
		be->free(be, pred);
	if (have_opt)
		cdp_optim_free(&opt);
	if (have_loss)
		cdp_loss_free(&loss);
	if (have_cfg)
		cdp_cfg_free(&cfg);
	if (have_net)
		cdp_net_free(&net);
	free(text);
	return rc;
}

static void test_unet(cdp_backend *be)
{
	static const char *const ov[] = { "width=8", "depth=2", "lr=0.01", "warmup=10" };
	enum { N = 8 };
	fit f = { .model = "unet.cfg", .ov = ov, .nov = 4, .n = N, .budget = 200 };
	long road = 0;

	f.x = malloc(sizeof(float) * N * 3 * NPIX);
	f.labels = malloc(sizeof(int32_t) * N * NPIX);
	if (!f.x || !f.labels) {
		CHECK(0, "out of memory");
		goto out;
	}
	for (int i = 0; i < N; i++)
		road_tile(cdp_rng_derive(7, 0, (uint64_t)i), f.x + (size_t)i * 3 * NPIX,
		          f.labels + (size_t)i * NPIX);
	for (int i = 0; i < N * NPIX; i++)
		road += f.labels[i];
	/* the tiles are what they claim: some road, mostly field */
	CHECK(road > N * NPIX / 40 && road < N * NPIX / 4, "road pixels %ld of %d", road, N * NPIX);
	CHECK_RC(run_fit(be, &f, 0.95), 0);
	printf("# unet: road IoU %.4f after %d steps (budget %d), %.1f s\n", f.metric, f.steps,
	       f.budget, f.seconds);
	CHECK(f.steps <= f.budget && f.metric >= 0.95, "unet: road IoU %.4f after %d steps",
	      f.metric, f.budget);
out:
	free(f.x);
	free(f.labels);
}

static void test_classifier(cdp_backend *be)
{
	static const char *const ov[] = { "width=8", "blocks=3", "lr=0.05", "warmup=10" };
	enum { N = 20, K = 5 };
	fit f = { .model = "classifier.cfg", .ov = ov, .nov = 4, .n = N, .budget = 150 };

	f.x = malloc(sizeof(float) * N * 3 * NPIX);
	f.labels = malloc(sizeof(int32_t) * N);
	if (!f.x || !f.labels) {
		CHECK(0, "out of memory");
		goto out;
	}
	for (int i = 0; i < N; i++) {
		f.labels[i] = i % K;
		texture_tile(cdp_rng_derive(9, 0, (uint64_t)i), i % K, f.x + (size_t)i * 3 * NPIX);
	}
	CHECK_RC(run_fit(be, &f, 1.0), 0);
	printf("# classifier: accuracy %.4f after %d steps (budget %d), %.1f s\n", f.metric,
	       f.steps, f.budget, f.seconds);
	CHECK(f.steps <= f.budget && f.metric == 1.0, "classifier: accuracy %.4f after %d steps",
	      f.metric, f.budget);
out:
	free(f.x);
	free(f.labels);
}

int main(void)
{
	cdp_backend *be = cdp_backend_cpu(2);

	if (!be) {
		fprintf(stderr, "cannot start the cpu backend\n");
		return 99;
	}
	test_unet(be);
	test_classifier(be);
	be->destroy(be);
	return tap_done();
}
