/* test_bn_pool.c: a training batchnorm and the max pool that alone reads
 * it, run as one op each way where the backend fuses them (backend.h's
 * bn_pool_takes; net.h's pool_fuse: the CPU with AVX-512, 2x2 pools of
 * stride 2 over planes whose rows are whole 16-float vectors), give the
 * two layers' numbers bit for bit while the batchnorm's output is never
 * made:
 *  - the ops: bn_fwd_train_pool against bn_fwd_train_h then maxpool_fwd
 *    (pooled output, argmax, saved and running statistics, x's bf16
 *    copy), of a float input and of a bf16 one (x NULL), and bn_bwd_pool
 *    against maxpool_bwd then bn_bwd (dx with beta 0 and 1, dgamma,
 *    dbeta), for each activation, on values whose relu makes windows of
 *    ties (all zeros: the first cell wins);
 *  - the nets: a classifier (width 8, two blocks, 32x32: both its pools
 *    fused) in fp32 and bf16, one training step fused and one with the
 *    backend's bn_pool_takes answering 0: the loss, the logits, every
 *    parameter gradient, the running statistics, a second backward, and
 *    then an eval-mode forward (validation: unfused) the same bits; and
 *    a U-Net (whose pools share their input with a skip connection)
 *    fuses none. With the gradients between layers in float
 *    (CDP_BF16_GRADS=0): fused, a pool's gradient may be bf16 where the
 *    convolution after it writes it so, unfused it is float
 *    (test_bf16_grads covers that).
 * Without AVX-512 nothing is fused: exit 77 with the reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "cpu/cpu.h"
#include "layers.h"
#include "loss.h"
#include "net.h"
#include "tap.h"
#include "test_models.h"

static cdp_backend *be;
static cdp_rng rng;

static float *rnd(size_t n, float scale, float shift)
{
	float *p = malloc(n * sizeof *p);

	for (size_t i = 0; i < n; i++)
		p[i] = (float)(cdp_rng_double(&rng) * 2.0 - 1.0) * scale + shift;
	return p;
}

static int same(const void *a, const void *b, size_t bytes)
{
	return memcmp(a, b, bytes) == 0;
}

/* the ops against the two they stand for, x float (xh NULL) or bf16 */
static void test_ops(int act, int bf16)
{
	int n = 2, c = 3, h = 6, w = 32;
	size_t hw = (size_t)h * w, nx = (size_t)n * c * hw, np = nx / 4;
	cdp_pool_desc d = { n, c, h, w, 2, 2, 0, 0, 0 };
	float *x = rnd(nx, 1.0f, 0.1f), *g = rnd((size_t)c, 0.5f, 1.0f), *bt = rnd((size_t)c, 0.3f, 0.0f);
	float *y = malloc(nx * sizeof *y), *py[2], st[2][4 * 3], *dyp = rnd(np, 1.0f, 0.0f);
	float *dy = malloc(nx * sizeof *dy), *dx[2], dg[2][3], db[2][3];
	int32_t *ix[2];
	uint16_t *xh = malloc(nx * sizeof *xh), *xo[2];

	cdp_pool_desc_init(&d);
	for (size_t i = 0; i < nx; i++)
		xh[i] = cpu_bf16_bits(x[i]);
	for (size_t i = 0; i < np; i += 7)
		dyp[i] = -0.0f;         /* maxpool_bwd writes +0.0f for it */
	for (int k = 0; k < 2; k++) {
		py[k] = malloc(np * sizeof(float));
		ix[k] = malloc(np * sizeof(int32_t));
		xo[k] = calloc(nx, sizeof(uint16_t));
		dx[k] = rnd(nx, 1.0f, 0.0f);
		for (int i = 0; i < 4 * c; i++)
			st[k][i] = 0.5f;
	}
	memcpy(dx[1], dx[0], nx * sizeof(float));
	CHECK(be->bn_pool_takes(be, &d), "the CPU fuses a 2x2 pool over planes 32 wide");
	/* the two ops */
	be->bn_fwd_train_h(be, n, c, (int)hw, bf16 ? NULL : x, bf16 ? xh : xo[0], g, bt, y, NULL,
	                   st[0], st[0] + c, 0.1f, 1e-5f, st[0] + 2 * c, st[0] + 3 * c, act, 0.1f);
	be->maxpool_fwd(be, &d, y, py[0], ix[0]);
	{
		cdp_bn_pool p = { d, py[1], ix[1], dyp };
		be->bn_fwd_train_pool(be, n, c, (int)hw, bf16 ? NULL : x, bf16 ? xh : xo[1], g, bt,
		                      st[1], st[1] + c, 0.1f, 1e-5f, st[1] + 2 * c, st[1] + 3 * c, act,
		                      0.1f, &p);
		CHECK(same(py[0], py[1], np * sizeof(float)) && same(ix[0], ix[1], np * sizeof(int32_t)),
		      "bn_fwd_train_pool (act %d, %s): the pool's output or argmax differ", act,
		      bf16 ? "bf16 x" : "float x");
		CHECK(same(st[0], st[1], sizeof st[0]), "bn_fwd_train_pool (act %d, %s): statistics "
		      "differ", act, bf16 ? "bf16 x" : "float x");
		CHECK(bf16 || same(xo[0], xo[1], nx * sizeof(uint16_t)),
		      "bn_fwd_train_pool (act %d): x's copy differs", act);
		for (int beta = 0; beta <= 1; beta++) {
			memset(dg, 0, sizeof dg);
			memset(db, 0, sizeof db);
			be->maxpool_bwd(be, &d, NULL, NULL, dyp, ix[0], dy, 0.0f);
			be->bn_bwd(be, n, c, (int)hw, bf16 ? (const void *)xh : x, bf16, NULL, dy, g, bt,
			           st[0] + 2 * c, st[0] + 3 * c, 1e-5f, act, 0.1f, dx[0], (float)beta,
			           dg[0], db[0]);
			be->bn_bwd_pool(be, n, c, (int)hw, bf16 ? (const void *)xh : x, bf16, g, bt,
			                st[1] + 2 * c, st[1] + 3 * c, 1e-5f, act, 0.1f, dx[1], (float)beta,
			                dg[1], db[1], &p);
			CHECK(same(dx[0], dx[1], nx * sizeof(float)) && same(dg[0], dg[1], sizeof dg[0]) &&
			      same(db[0], db[1], sizeof db[0]),
			      "bn_bwd_pool (act %d, %s, beta %d): dx, dgamma or dbeta differ", act,
			      bf16 ? "bf16 x" : "float x", beta);
		}
	}
	{
		/* relu's zeros make windows of ties: some argmax is not the max
		 * of distinct values (else the ties went untested) */
		size_t ties = 0;
		for (size_t i = 0; act == CDP_ACT_RELU && i < np; i++)
			ties += py[0][i] == 0.0f;
		CHECK(act != CDP_ACT_RELU || ties > 0, "relu: no window of zeros (ties) pooled");
	}
	for (int k = 0; k < 2; k++) {
		free(py[k]);
		free(ix[k]);
		free(xo[k]);
		free(dx[k]);
	}
	free(x); free(g); free(bt); free(y); free(dyp); free(dy); free(xh);
}

typedef struct step_out {
	double loss;
	float *logits, *grads, *grads2, *bufs, *eval;
	size_t nlogits, nparams, nbufs;
	int fused;
} step_out;

static float *host(const float *dev, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof *h);

	be->to_host(be, h, dev, n * sizeof *h);
	return h;
}

/* one training step, a second backward, then an eval-mode forward */
static int step(const char *file, const char *const *ov, int nov, int side, int n, int prec,
                step_out *o)
{
	char *text = read_model(file), err[512];
	cdp_net net;
	cdp_loss loss;
	cdp_loss_result res;
	int32_t *lab, *dlab;
	float *x;
	size_t nx, nl;
	int hw;

	memset(o, 0, sizeof *o);
	be->set_precision(be, prec);
	if (!text || cdp_net_build(&net, be, text, file, ov, nov, 0, side, side, n, err,
	                           sizeof err) < 0) {
		fprintf(stderr, "%s: %s\n", file, text ? err : "cannot read");
		free(text);
		return -1;
	}
	if (cdp_loss_init(&loss, be, net.loss, net.classes, net.ignore, NULL, 0, 0.0f, err,
	                  sizeof err) < 0) {
		fprintf(stderr, "%s: %s\n", file, err);
		cdp_net_free(&net);
		free(text);
		return -1;
	}
	hw = net.layers[net.out_layer].out.h * net.layers[net.out_layer].out.w;
	nx = (size_t)net.n * net.in.c * net.in.h * net.in.w;
	nl = (size_t)net.n * hw;
	cdp_rng_seed(&rng, 5);
	x = rnd(nx, 2.0f, 0.0f);
	lab = malloc(nl * sizeof *lab);
	for (size_t i = 0; i < nl; i++)
		lab[i] = (int32_t)cdp_rng_below(&rng, (uint64_t)loss.classes);
	dlab = be->alloc(be, nl * sizeof *dlab);
	be->to_device(be, net.x, x, nx * sizeof *x);
	be->to_device(be, dlab, lab, nl * sizeof *lab);
	cdp_net_init(&net, 3);
	net.step_seed = 11;
	o->nlogits = (size_t)net.n * hw * net.layers[net.out_layer].out.c;
	o->nparams = net.nparams;
	for (int pass = 0; pass < 2; pass++) {  /* the second: backward again */
		cdp_net_zero_grad(&net);
		if (pass == 0) {
			cdp_net_forward(&net);
			cdp_loss_compute(&loss, net.n, hw, net.layers[net.out_layer].y, dlab,
			                 net.layers[net.out_layer].dy, &res);
			o->loss = res.loss;
			o->logits = host(net.layers[net.out_layer].y, o->nlogits);
		}
		cdp_net_backward(&net, NULL, NULL);
		*(pass ? &o->grads2 : &o->grads) = host(net.grads, net.nparams);
	}
	o->nbufs = net.nbuffers;
	o->bufs = host(net.buffers, net.nbuffers);
	for (int i = 0; i < net.nlayers; i++)
		o->fused += net.layers[i].ops == &cdp_layer_bn && net.layers[i].pool_on;
	net.train = 0;
	be->to_device(be, net.x, x, nx * sizeof *x);
	cdp_net_forward(&net);
	o->eval = host(cdp_net_output(&net), o->nlogits);
	for (int i = 0; i < net.nlayers; i++)
		CHECK(!net.layers[i].pool_on, "%s: eval mode fused layer %d", file, i);
	cdp_loss_free(&loss);
	be->free(be, dlab);
	cdp_net_free(&net);
	free(text);
	free(x);
	free(lab);
	return 0;
}

static void step_free(step_out *o)
{
	free(o->logits); free(o->grads); free(o->grads2); free(o->bufs); free(o->eval);
}

static int takes_none(cdp_backend *b, const cdp_pool_desc *d)
{
	(void)b;
	(void)d;
	return 0;
}

static void test_net(const char *file, const char *const *ov, int nov, int side, int n, int prec,
                     int want)
{
	int (*takes)(cdp_backend *, const cdp_pool_desc *) = be->bn_pool_takes;
	const char *pn = cdp_precision_name(prec);
	step_out on, off;

	CHECK_RC(step(file, ov, nov, side, n, prec, &on), 0);
	be->bn_pool_takes = takes_none;
	CHECK_RC(step(file, ov, nov, side, n, prec, &off), 0);
	be->bn_pool_takes = takes;
	CHECK(on.fused == want && off.fused == 0, "%s %s: %d batchnorms fused with their pool, "
	      "want %d (%d unfused)", file, pn, on.fused, want, off.fused);
	if (on.grads && off.grads) {
		printf("%s %s: %d pools fused, loss %.6f\n", file, pn, on.fused, on.loss);
		CHECK(on.loss == off.loss && same(on.logits, off.logits, on.nlogits * sizeof(float)),
		      "%s %s: the fused step's loss or logits differ", file, pn);
		CHECK(same(on.grads, off.grads, on.nparams * sizeof(float)) &&
		      same(on.grads2, off.grads2, on.nparams * sizeof(float)),
		      "%s %s: the fused step's gradients differ", file, pn);
		CHECK(same(on.bufs, off.bufs, on.nbufs * sizeof(float)),
		      "%s %s: the running statistics differ", file, pn);
		CHECK(same(on.eval, off.eval, on.nlogits * sizeof(float)),
		      "%s %s: eval mode's logits after the step differ", file, pn);
	}
	step_free(&on);
	step_free(&off);
}

int main(void)
{
	static const char *const cls[] = { "width=8", "blocks=2" };
	static const char *const unet[] = { "width=8", "depth=3" };
	cdp_pool_desc d = { 1, 1, 32, 32, 2, 2, 0, 0, 0 };

	/* the fused pool's gradient is bf16 where the convolution after it
	 * writes it so (net_plan.c's bf16 gradients), the unfused pool's float:
	 * the same bits want float gradients */
	setenv("CDP_BF16_GRADS", "0", 1);
	cdp_rng_seed(&rng, 20261207);
	if (!(be = bf16_backend("test_bn_pool")))
		return 99;
	cdp_pool_desc_init(&d);
	if (!be->bn_pool_takes(be, &d)) {
		printf("# skip: no AVX-512 here, so no batchnorm is fused with its max pool\n");
		be->destroy(be);
		return 77;
	}
	for (int act = 0; act <= CDP_ACT_LEAKY; act++)
		for (int bf16 = 0; bf16 < 2; bf16++)
			test_ops(act, bf16);
	test_net("classifier.cfg", cls, 2, 32, 4, CDP_PREC_FP32, 2);
	test_net("classifier.cfg", cls, 2, 32, 4, CDP_PREC_BF16, 2);
	test_net("unet.cfg", unet, 2, 32, 2, CDP_PREC_BF16, 0);
	be->destroy(be);
	return tap_done();
}
