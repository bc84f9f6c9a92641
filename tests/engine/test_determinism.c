/* test_determinism.c: a training run is a function of its seed.
 *
 * For unet.cfg (width 4, depth 2, 32x32, batch 2) and classifier.cfg
 * (width 4, blocks 2, 32x32, batch 4, with its dropout), each run builds a
 * fresh net, initialises it from the seed, and takes 5 training steps
 * (forward, the cfg's loss, backward, the cfg's optimizer) on a fixed batch,
 * drawing each step's dropout masks from the seed and the step number:
 *  - two runs with the same seed, in the same process on the same 2-thread
 *    backend, give bitwise-identical loss sequences and parameter blocks
 *    (the engine has no racy float accumulation and keeps no hidden state
 *    between nets);
 *  - a run on a second backend of the same thread count gives the same bits;
 *  - a different seed gives a different first loss and different parameters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "loss.h"
#include "net.h"
#include "optim.h"
#include "tap.h"
#include "test_models.h"

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

#define STEPS 5

typedef struct model {
	const char *file;
	const char *ov[4];
	int nov, side, n;
} model;

typedef struct result {
	double loss[STEPS];
	float *params;          /* host copy after the last step */
	size_t nparams;
} result;

/* The fixed batch: input N(0,1), labels uniform over the classes. */
static void fill_batch(cdp_net *net, const cdp_loss *loss, int32_t *dlab, int hw)
{
	cdp_backend *be = net->be;
	size_t nx = (size_t)net->n * net->in.c * net->in.h * net->in.w, nl = (size_t)net->n * hw;
	float *x = malloc(nx * sizeof *x);
	int32_t *lab = malloc(nl * sizeof *lab);
	cdp_rng r;

	cdp_rng_seed(&r, 1234);
	for (size_t i = 0; x && i < nx; i++)
		x[i] = (float)cdp_rng_normal(&r);
	for (size_t i = 0; lab && i < nl; i++)
		lab[i] = (int32_t)cdp_rng_below(&r, (uint64_t)loss->classes);
	if (x && lab) {
		be->to_device(be, net->x, x, nx * sizeof *x);
		be->to_device(be, dlab, lab, nl * sizeof *lab);
	}
	free(x);
	free(lab);
}

/* One run of STEPS steps from seed; 0, or -1 with a message. */
static int run(cdp_backend *be, const model *m, uint64_t seed, result *res)
{
	char *text = read_model(m->file), err[512];
	cdp_net net;
	cdp_cfg cfg;
	cdp_loss loss;
	cdp_optim_cfg oc;
	cdp_optim opt;
	cdp_loss_result lr;
	int32_t *dlab = NULL;
	int hw, rc = -1, have_net = 0, have_cfg = 0, have_loss = 0, have_opt = 0;

	memset(res, 0, sizeof *res);
	if (!text) {
		fprintf(stderr, "cannot read %s\n", m->file);
		return -1;
	}
	if (cdp_net_build(&net, be, text, m->file, m->ov, m->nov, 3, m->side, m->side, m->n,
	                  err, sizeof err) < 0)
		goto fail;
	have_net = 1;
	if (cdp_cfg_parse(text, m->file, m->ov, m->nov, &cfg, err, sizeof err) < 0)
		goto fail;
	have_cfg = 1;
	if (cdp_loss_init_cfg(&loss, be, &cfg, &cfg.s[0], net.classes, err, sizeof err) < 0)
		goto fail;
	have_loss = 1;
	if (cdp_optim_cfg_parse(&oc, &cfg, &cfg.s[0], err, sizeof err) < 0)
		goto fail;
	oc.total_steps = 1000;
	oc.warmup = 0;
	if (cdp_optim_init(&opt, be, &oc, net.nparams, err, sizeof err) < 0)
		goto fail;
	have_opt = 1;
	hw = net.layers[net.out_layer].out.h * net.layers[net.out_layer].out.w;
	if (!(dlab = be->alloc(be, (size_t)net.n * hw * sizeof *dlab)) ||
	    !(res->params = malloc(net.nparams * sizeof(float)))) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	fill_batch(&net, &loss, dlab, hw);
	cdp_net_init(&net, seed);
	cdp_net_zero_grad(&net);
	for (int s = 0; s < STEPS; s++) {
		cdp_layer *out = &net.layers[net.out_layer];
		net.step_seed = cdp_rng_derive(seed, 1, (uint64_t)s);
		cdp_net_forward(&net);
		cdp_loss_compute(&loss, net.n, hw, out->y, dlab, out->dy, &lr);
		cdp_net_backward(&net, NULL, NULL);
		res->loss[s] = lr.loss;
		if (cdp_optim_micro_done(&opt) && cdp_optim_step(&opt, net.params, net.grads) != 0) {
			snprintf(err, sizeof err, "step %d: gradient norm %g", s, opt.last_norm);
			goto fail;
		}
	}
	res->nparams = net.nparams;
	be->to_host(be, res->params, net.params, net.nparams * sizeof(float));
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "%s: %s\n", m->file, err);
out:
	if (dlab)
		be->free(be, dlab);
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

static int same_bits(const result *a, const result *b)
{
	return a->nparams == b->nparams && memcmp(a->loss, b->loss, sizeof a->loss) == 0 &&
	       memcmp(a->params, b->params, a->nparams * sizeof(float)) == 0;
}

static void test_model(cdp_backend *be, cdp_backend *be2, const model *m)
{
	result a, b, c, d;

	CHECK_RC(run(be, m, 11, &a), 0);
	CHECK_RC(run(be, m, 11, &b), 0);
	CHECK_RC(run(be2, m, 11, &c), 0);
	CHECK_RC(run(be, m, 12, &d), 0);
	if (a.params && b.params && c.params && d.params) {
		for (int s = 0; s < STEPS; s++)
			printf("# %s step %d loss %.17g (seed 12: %.17g)\n", m->file, s, a.loss[s],
			       d.loss[s]);
		CHECK(same_bits(&a, &b), "%s: two runs with seed 11 differ", m->file);
		CHECK(same_bits(&a, &c), "%s: seed 11 on a second backend differs", m->file);
		CHECK(a.loss[0] != d.loss[0], "%s: seeds 11 and 12 give the same first loss %.17g",
		      m->file, a.loss[0]);
		CHECK(a.nparams == d.nparams &&
		      memcmp(a.params, d.params, a.nparams * sizeof(float)) != 0,
		      "%s: seeds 11 and 12 give the same parameters", m->file);
		/* the loss is a training loss: it went down over the steps */
		CHECK(a.loss[STEPS - 1] < a.loss[0], "%s: loss %.6f -> %.6f", m->file, a.loss[0],
		      a.loss[STEPS - 1]);
	}
	free(a.params);
	free(b.params);
	free(c.params);
	free(d.params);
}

int main(void)
{
	static const model unet = { "unet.cfg", { "width=4", "depth=2" }, 2, 32, 2 };
	static const model cls = { "classifier.cfg", { "width=4", "blocks=2" }, 2, 32, 4 };
	cdp_backend *be = cdp_backend_cpu(2), *be2 = cdp_backend_cpu(2);

	if (!be || !be2) {
		fprintf(stderr, "cannot start the cpu backend\n");
		return 99;
	}
	test_model(be, be2, &unet);
	test_model(be, be2, &cls);
	be->destroy(be);
	be2->destroy(be2);
	return tap_done();
}
