/* test_freeze.c: the fine-tuning controls in the engine on the CPU backend:
 * cdp_net_freeze (net.c), the frozen backward of conv and bn (layers/),
 * lr_mult ([net] lr_mult=PATTERN:M and the layer option) and the
 * optimizer's segments (optim.c, cdp_optim_set_layers).
 *  - Three SGD steps (momentum 0.9, weight decay 0.1, training-mode
 *    forward, a random output gradient) with c1 and b1 frozen: their
 *    gradients are zero, their weights, b1's running statistics and their
 *    momentum bitwise unchanged, while c2, b2 and the head change; thawed,
 *    c1, b1 and b1's statistics change on the next step; b1 alone frozen,
 *    c1 before it trains through it and b1 stays.
 *  - A frozen bn's input gradient equals the gradient of the eval-mode
 *    forward by central finite differences (double sums), with running
 *    statistics, gamma and beta away from 1 and 0: bn alone on the input
 *    (it overwrites dx) and beside a 1x1 conv into an add (it adds to dx).
 *  - lr_mult: plain SGD (momentum 0, decay 0) at lr 0.5 moves a layer with
 *    [net] lr_mult=c1:0.1 by exactly (float)(0.5 * 0.1) g, one with the
 *    layer option lr_mult=0 not at all, the rest by 0.5 g (the list also
 *    separated by ';', as an override); errors of
 *    malformed lists and unmatched --freeze patterns.
 */
#include "backend.h"
#include "cdp_rng.h"
#include "net.h"
#include "optim.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static cdp_backend *be;

static void fill_rand(float *x, size_t n, uint64_t seed, double lo, double hi)
{
	cdp_rng r;

	cdp_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + cdp_rng_double(&r) * (hi - lo));
}

static float *fdup(const float *p, size_t n)
{
	float *h = malloc(n * sizeof *h + 4);
	memcpy(h, p, n * sizeof *h);
	return h;
}

static const cdp_layer *layer(const cdp_net *net, const char *name)
{
	for (int i = 0; i < net->nlayers; i++)
		if (strcmp(net->layers[i].name, name) == 0)
			return &net->layers[i];
	return NULL;
}

static size_t in_count(const cdp_net *net)
{
	return (size_t)net->n * net->in.c * net->in.h * net->in.w;
}

static size_t out_count(const cdp_net *net)
{
	const cdp_layer *o = &net->layers[net->out_layer];
	return (size_t)net->n * o->out.c * o->out.h * o->out.w;
}

/* forward in training mode on random x, random output gradient, backward */
static void train_pass(cdp_net *net, uint64_t seed)
{
	net->train = 1;
	fill_rand(net->x, in_count(net), seed, -1, 1);
	cdp_net_forward(net);
	fill_rand(net->layers[net->out_layer].dy, out_count(net), seed + 99, -1, 1);
	cdp_net_backward(net, NULL, NULL);
}

/* 1: the layer's parameters (or buffers) equal those in old */
static int same(const float *now, const float *old, size_t off, size_t len)
{
	return memcmp(now + off, old + off, len * sizeof(float)) == 0;
}

static int all_zero(const float *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0.0f)
			return 0;
	return 1;
}

static const char *small =
	"[net]\nchannels=2\nin_h=4\nin_w=4\nclasses=3\n"
	"[conv]\nname=c1\nfilters=4\n"
	"[bn]\nname=b1\nactivation=relu\n"
	"[conv]\nname=c2\nfilters=4\nbias=0\n"
	"[bn]\nname=b2\nactivation=relu\n"
	"[conv]\nname=head\nfilters=3\nsize=1\n";

static void test_frozen_steps(void)
{
	cdp_net net;
	cdp_optim o;
	cdp_optim_cfg c;
	char err[300];
	float *p0, *b0, *p1, *b1;
	const char *names[] = { "c1", "b1", "c2", "b2", "head" };

	CHECK_RC(cdp_net_build(&net, be, small, "small.cfg", NULL, 0, 0, 0, 0, 3, err, sizeof err), 0);
	cdp_net_init(&net, 7);
	cdp_optim_defaults(&c);
	c.weight_decay = 0.1f;
	CHECK_RC(cdp_optim_init(&o, be, &c, net.nparams, err, sizeof err), 0);
	CHECK_RC(cdp_net_freeze(&net, "c1,b?", err, sizeof err), 3);
	CHECK(layer(&net, "c1")->frozen && layer(&net, "b1")->frozen && layer(&net, "b2")->frozen &&
	      !layer(&net, "c2")->frozen, "frozen set of c1,b?");
	CHECK_RC(cdp_net_freeze(&net, "c1,b1", err, sizeof err), 2);
	CHECK_RC(cdp_optim_set_layers(&o, &net, err, sizeof err), 0);
	p0 = fdup(net.params, net.nparams);
	b0 = fdup(net.buffers, net.nbuffers);
	for (int s = 0; s < 3; s++) {
		train_pass(&net, 100 + s);
		if (s == 2)
			for (int i = 0; i < 2; i++) {
				const cdp_layer *l = layer(&net, names[i]);
				CHECK(all_zero(net.grads + l->w_off, l->w_len) &&
				      all_zero(net.grads + l->b_off, l->b_len), "%s has gradients", names[i]);
			}
		CHECK_RC(cdp_optim_step(&o, net.params, net.grads), 0);
	}
	for (int i = 0; i < 5; i++) {
		const cdp_layer *l = layer(&net, names[i]);
		int unchanged = same(net.params, p0, l->w_off, l->w_len) &&
		                same(net.params, p0, l->b_off, l->b_len);
		CHECK(unchanged == (i < 2), "%s's weights %s", names[i],
		      unchanged ? "did not change" : "changed");
		if (i < 2)
			CHECK(all_zero(o.v + l->w_off, l->w_len) && all_zero(o.v + l->b_off, l->b_len),
			      "%s has momentum", names[i]);
	}
	CHECK(same(net.buffers, b0, layer(&net, "b1")->buf_off, layer(&net, "b1")->buf_len),
	      "frozen b1's running statistics changed");
	CHECK(!same(net.buffers, b0, layer(&net, "b2")->buf_off, layer(&net, "b2")->buf_len),
	      "b2's running statistics did not change");
	/* thawed: everything trains */
	p1 = fdup(net.params, net.nparams);
	b1 = fdup(net.buffers, net.nbuffers);
	CHECK_RC(cdp_net_freeze(&net, NULL, err, sizeof err), 0);
	CHECK_RC(cdp_optim_set_layers(&o, &net, err, sizeof err), 0);
	CHECK(o.nseg == 1, "one segment when nothing is frozen, got %d", o.nseg);
	train_pass(&net, 200);
	CHECK_RC(cdp_optim_step(&o, net.params, net.grads), 0);
	for (int i = 0; i < 2; i++) {
		const cdp_layer *l = layer(&net, names[i]);
		CHECK(!same(net.params, p1, l->w_off, l->w_len), "thawed %s did not change", names[i]);
	}
	CHECK(!same(net.buffers, b1, layer(&net, "b1")->buf_off, layer(&net, "b1")->buf_len),
	      "thawed b1's running statistics did not change");
	/* b1 alone frozen: c1 before it still trains through it */
	CHECK_RC(cdp_net_freeze(&net, "b1", err, sizeof err), 1);
	CHECK_RC(cdp_optim_set_layers(&o, &net, err, sizeof err), 0);
	memcpy(p1, net.params, net.nparams * sizeof *p1);
	memcpy(b1, net.buffers, net.nbuffers * sizeof *b1);
	train_pass(&net, 300);
	CHECK_RC(cdp_optim_step(&o, net.params, net.grads), 0);
	CHECK(!same(net.params, p1, layer(&net, "c1")->w_off, layer(&net, "c1")->w_len),
	      "c1 before a frozen b1 did not train");
	CHECK(same(net.params, p1, layer(&net, "b1")->w_off, 2 * layer(&net, "b1")->w_len) &&
	      same(net.buffers, b1, layer(&net, "b1")->buf_off, layer(&net, "b1")->buf_len),
	      "frozen b1 changed");
	free(p0);
	free(b0);
	free(p1);
	free(b1);
	cdp_optim_free(&o);
	cdp_net_free(&net);
}

/* L(x) = sum(r * y(x)) with the net in eval mode */
static double eval_loss(cdp_net *net, const float *r)
{
	const float *y;
	double s = 0;

	net->train = 0;
	cdp_net_forward(net);
	y = cdp_net_output(net);
	for (size_t i = 0; i < out_count(net); i++)
		s += (double)r[i] * y[i];
	return s;
}

static void test_frozen_bn_grad(void)
{
	static const char *cfgs[] = {
		"[net]\nchannels=3\nin_h=3\nin_w=2\nclasses=3\n[bn]\nname=b\neps=0.001\n",
		"[net]\nchannels=3\nin_h=3\nin_w=2\nclasses=3\n[bn]\nname=b\neps=0.001\nfrom=-1\n"
		"[conv]\nname=c\nfilters=3\nsize=1\nfrom=-1\n[add]\nfrom=b,c\n",
	};

	for (int k = 0; k < 2; k++) {
		cdp_net net;
		char err[300];
		const cdp_layer *b;
		float *r, *x, *dx;
		size_t nx;
		double worst = 0;

		CHECK_RC(cdp_net_build(&net, be, cfgs[k], "bn.cfg", NULL, 0, 0, 0, 0, 2, err,
		                       sizeof err), 0);
		cdp_net_init(&net, 3);
		net.input_grad = 1;
		b = layer(&net, "b");
		/* gamma, beta, running mean and variance away from 1, 0, 0, 1 */
		fill_rand(net.params + b->w_off, 3, 11, 0.5, 2);
		fill_rand(net.params + b->b_off, 3, 12, -1, 1);
		fill_rand(net.buffers + b->buf_off, 3, 13, -0.5, 0.5);
		fill_rand(net.buffers + b->buf_off + 3, 3, 14, 0.3, 3);
		CHECK_RC(cdp_net_freeze(&net, "b", err, sizeof err), 1);
		nx = in_count(&net);
		r = malloc(out_count(&net) * sizeof *r);
		fill_rand(r, out_count(&net), 21, -1, 1);
		fill_rand(net.x, nx, 22, -2, 2);
		x = fdup(net.x, nx);
		/* backward of the frozen net after a training-mode forward */
		net.train = 1;
		cdp_net_forward(&net);
		memcpy(net.layers[net.out_layer].dy, r, out_count(&net) * sizeof *r);
		cdp_net_backward(&net, NULL, NULL);
		dx = fdup(net.dx, nx);
		for (size_t i = 0; i < nx; i++) {
			const float h = 1e-2f;
			double lp, lm, fd;
			memcpy(net.x, x, nx * sizeof *x);
			net.x[i] = x[i] + h;
			lp = eval_loss(&net, r);
			net.x[i] = x[i] - h;
			lm = eval_loss(&net, r);
			fd = (lp - lm) / ((double)(x[i] + h) - (double)(x[i] - h));
			if (fabs(fd - dx[i]) > worst)
				worst = fabs(fd - dx[i]);
		}
		CHECK(worst < 2e-3, "cfg %d: frozen bn dx differs from eval-mode finite differences "
		      "by %g", k, worst);
		free(r);
		free(x);
		free(dx);
		cdp_net_free(&net);
	}
}

static void test_lr_mult(void)
{
	const char *cfg =
		"[net]\nchannels=2\nin_h=4\nin_w=4\nclasses=3\nlr_mult=c1:0.1,c*:2\n"
		"[conv]\nname=c1\nfilters=4\n"
		"[conv]\nname=c2\nfilters=4\nlr_mult=0\n"
		"[conv]\nname=c3\nfilters=4\n"
		"[conv]\nname=head\nfilters=3\nsize=1\n";
	const char *names[] = { "c1", "c2", "c3", "head" };
	const float mult[] = { 0.1f, 0, 2, 1 };
	cdp_net net;
	cdp_optim o;
	cdp_optim_cfg c;
	char err[300];
	float *p0;
	double lr = 0.5;

	CHECK_RC(cdp_net_build(&net, be, cfg, "m.cfg", NULL, 0, 0, 0, 0, 2, err, sizeof err), 0);
	cdp_net_init(&net, 5);
	cdp_optim_defaults(&c);
	c.lr = (float)lr;
	c.momentum = 0;
	CHECK_RC(cdp_optim_init(&o, be, &c, net.nparams, err, sizeof err), 0);
	CHECK_RC(cdp_optim_set_layers(&o, &net, err, sizeof err), 0);
	for (int i = 0; i < 4; i++)
		CHECK(layer(&net, names[i])->lr_mult == mult[i], "%s lr_mult %g", names[i],
		      layer(&net, names[i])->lr_mult);
	p0 = fdup(net.params, net.nparams);
	fill_rand(net.grads, net.nparams, 31, -1, 1);
	{
		float *g = fdup(net.grads, net.nparams);
		size_t bad = 0;
		CHECK_RC(cdp_optim_step(&o, net.params, net.grads), 0);
		for (int i = 0; i < 4; i++) {
			const cdp_layer *l = layer(&net, names[i]);
			float lr_l = (float)(lr * mult[i]);
			for (size_t j = l->w_off; j < l->b_off + l->b_len; j++)
				bad += net.params[j] != p0[j] - lr_l * g[j];
			CHECK(bad == 0, "%s: %zu parameters not moved by exactly %g g", names[i], bad,
			      (double)lr_l);
		}
		CHECK(same(net.params, p0, layer(&net, "c2")->w_off, layer(&net, "c2")->w_len),
		      "lr_mult=0 moved c2");
		free(g);
	}
	free(p0);
	cdp_optim_free(&o);
	cdp_net_free(&net);
	/* the list given as an override, whose value cannot hold a comma: ';' */
	{
		const char *ov[] = { "lr_mult=c1:0.1;c*:2" };
		char *plain = strdup(cfg), *line = strstr(plain, "lr_mult=c1");

		memcpy(line, "#", 1);
		CHECK_RC(cdp_net_build(&net, be, plain, "m.cfg", ov, 1, 0, 0, 0, 2, err, sizeof err),
		         0);
		for (int i = 0; i < 4; i++)
			CHECK(layer(&net, names[i])->lr_mult == mult[i], "';': %s lr_mult %g", names[i],
			      layer(&net, names[i])->lr_mult);
		cdp_net_free(&net);
		free(plain);
	}
	/* errors */
	CHECK_RC(cdp_net_build(&net, be, small, "small.cfg", NULL, 0, 0, 0, 0, 2, err, sizeof err), 0);
	CHECK_RC(cdp_net_freeze(&net, "c1,layer*", err, sizeof err), -1);
	CHECK(strstr(err, "'layer*' matches no layer name") != NULL, "err: %s", err);
	CHECK_RC(cdp_net_freeze(&net, "c1,,b1", err, sizeof err), -1);
	cdp_net_free(&net);
	CHECK_RC(cdp_net_build(&net, be, "[net]\nchannels=2\nin_h=4\nin_w=4\nlr_mult=c1=0.1\n"
	                       "[conv]\nname=c1\nfilters=2\n", "bad.cfg", NULL, 0, 0, 0, 0, 2, err,
	                       sizeof err), -1);
	CHECK(strstr(err, "lr_mult") != NULL, "err: %s", err);
	CHECK_RC(cdp_net_build(&net, be, "[net]\nchannels=2\nin_h=4\nin_w=4\n"
	                       "[conv]\nname=c1\nfilters=2\nlr_mult=-1\n", "bad.cfg", NULL, 0, 0, 0,
	                       0, 2, err, sizeof err), -1);
}

int main(void)
{
	be = cdp_backend_cpu(1);
	if (!be) {
		fprintf(stderr, "cannot create the CPU backend\n");
		return 99;
	}
	test_frozen_steps();
	test_frozen_bn_grad();
	test_lr_mult();
	be->destroy(be);
	return tap_done();
}
