/* test_stash.c: the bf16 stash of activations (net_plan.c): in --precision bf16
 * the activations backward reads are kept as bf16 between forward and
 * backward, in half the bytes, and the fp32 ones share buffers by liveness.
 *
 * On three nets in bf16 (the CPU's AVX512_BF16 kernels where it has them,
 * else the emulated ones, CDP_CPU_BF16_EMU=1): a net of every layer type
 * (fused and separate activations, maxpool, avgpool, dropout, deconv,
 * upsample, concat, slice, add; a skip read both in forward and backward),
 * a classifier (gap, dense) and a U-Net (width 8, depth 3, 32x32, batch 2).
 * For each, the same step with the stash (the default) and without
 * (CDP_BF16_STASH=0):
 *  - forward is untouched: the loss and the logits bit for bit (forward
 *    reads a tensor in fp32, or its bf16 copy where only convolutions
 *    read it, which depend on their input only through its bf16 values:
 *    test_bf16_sets);
 *  - every parameter gradient within bf16's tolerance of the unstashed
 *    one: max |a - b| <= 0.075 max |b| over the block, and at most a
 *    quarter of bf16's own distance from fp32 by the same measure
 *    (measured: 4e-4, 0.032, 0.042 against bf16's 0.0074, 0.24, 0.29;
 *    with the avx512bf16 set 0.026 for the U-Net and 0.061 for it with
 *    bn1 frozen, against 0.33 and 0.26: these tiny batches
 *    through batchnorm amplify any rounding); and not all equal (the stash
 *    is in effect: batchnorm and the activations read rounded values;
 *    a net whose kept tensors were all convolutions' outputs of bf16
 *    values, backend.h's conv_writes_yh, or read only by convolutions
 *    would give them bit for bit: exact below);
 *  - a second backward on the same forward gives the same gradient bits
 *    (backward reads only the stash);
 *  - act_bytes: the stash allocates less than fp32's own output per layer,
 *    and at most 0.61 of it for the U-Net (0.567 measured here, 0.586
 *    while max pooling's backward widened its input and output, 0.558 at
 *    width 16 depth 4: the bf16 copies, 0.45, a convolution's output and
 *    its batchnorm's, live at once, 0.10, and the buffer the head widens
 *    its input's copy into, a sample at a time, 0.006; 0.659 and 0.646
 *    when the concats' fp32 outputs and their inputs were live at once and
 *    backward widened every tensor it read, 0.19);
 *  - what backward widens: where the plan in which convolutions and
 *    batchnorm read the copies takes no more bytes than the other (the
 *    classifier's tie), it is used: 0.002 of the outputs' values widened,
 *    the dense head's input (0.744 in the other plan); the U-Net 0.092;
 *  - max pooling's backward gets neither its input nor its output (the
 *    CPU's reads its argmax index), so neither is widened for it;
 *  - what forward rounds in to_bf16 passes of their own: batchnorm writes
 *    the copies of its input and its output in its own pass over them
 *    (bn_fwd_train_h), so the U-Net's passes round 0.193 of its outputs'
 *    values (0.817 when the stash rounded them after the step); and
 *    where every reader of a batchnorm's output takes its copy (8 of the
 *    U-Net's 14), it writes the copy alone, with no fp32 output
 *    (stash_alone; the forward bits are the same).
 * A classifier of 32 channels and more at 32x32 with the avx512bf16 set
 * forced (where the CPU has AVX512_BF16): its Winograd convolutions and
 * its first (3 bands, 32 wide: the row-by-row gemm) write their outputs
 * as bf16 alone (conv_writes_yh), which their batchnorms read as they
 * are, forward and backward: 3 such convolutions, 0.595 of fp32's
 * activation bytes (0.785 while they wrote fp32 as well), exact (every
 * other tensor kept is read only by convolutions, the dense head and
 * the fused pools' argmax), and validation's eval mode reading them a
 * sample at a time gives the inference net's logits.
 * The U-Net again as CUDA plans it (its convolutions and bn_bwd read
 * float only, conv_takes_xh and bn_takes_xh; its bn_bwd reads the
 * output, bn_bwd_needs_y; its maxpool_bwd its input and output, checked
 * to be the forward's, maxpool_bwd_needs_xy; its batchnorm always writes
 * y, bn_fwd_h_alone): the
 * convolutions widen the copies a few samples at a time and the
 * batchnorms' outputs are widened for backward, with the same checks
 * (0.610 here); and with a batchnorm frozen after the build (its backward
 * then reads its output: cdp_net_freeze lays the batch out again).
 * Then cdp_net_set_precision lays the batch out anew: a net built in fp32
 * and switched to bf16 gets the stash and the same gradient bits as one
 * built in bf16, and back in fp32 none. And the inference nets of
 * cdp_net_build_infer (cdp-predict): the same logits bit for bit as a
 * training-built net in eval mode, in fp32 and bf16, with no gradient
 * buffers and a fraction of the activation bytes. Budget: under 2 s on 2
 * cores, emulated or not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "cpu/cpu.h"
#include "loss.h"
#include "layers.h"
#include "net.h"
#include "tap.h"
#include "test_models.h"

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

static const char every_layer[] =
	"[net]\nchannels=3\nin_h=16\nin_w=16\nclasses=3\nloss=ce\n"
	"[conv]\nfilters=8\nactivation=leaky\n"               /* 0 */
	"[bn]\nname=e0\nactivation=relu\n"                    /* 1: skip */
	"[maxpool]\n"                                          /* 2: 8x8 */
	"[conv]\nfilters=8\nbias=0\n"                         /* 3 */
	"[bn]\n"                                               /* 4 */
	"[relu]\n"                                             /* 5 */
	"[leaky]\n"                                            /* 6 */
	"[dropout]\np=0.2\n"                                   /* 7 */
	"[avgpool]\nsize=3\nstride=1\npad=1\n"                 /* 8 */
	"[deconv]\nfilters=8\nactivation=relu\n"               /* 9: 16x16 */
	"[upsample]\nfrom=-2\nmode=bilinear\n"                 /* 10 */
	"[concat]\nfrom=e0,-1,-2\n"                            /* 11: 24 */
	"[slice]\nstart=4\nend=12\n"                           /* 12: 8 */
	"[add]\nfrom=-1,e0\n"                                  /* 13 */
	"[conv]\nfilters=3\nsize=1\n";                         /* 14 */

typedef struct model {
	const char *name, *file, *text;
	const char *ov[4];
	int nov, side, n;
	double max_ratio;       /* act_bytes with the stash / without, at most */
	int fused;              /* convolutions an inference net fuses with a bn */
	/* backward widens at most this fraction of all outputs' values (0: not
	 * checked): where the plan that reads the copies takes no more bytes,
	 * it is the one used */
	double max_widen;
	/* forward's to_bf16 passes round at most this fraction of the outputs'
	 * values (0: not checked): batchnorm writes its input's copy and its
	 * own in its pass over them (bn_fwd_train_h) */
	double max_narrow;
	int min_alone;          /* batchnorms that keep no fp32 output, at least */
	int virt;               /* concats an inference net reads in place (net.h) */
	/* 1: the stash changes no gradient bit: every tensor it keeps holds
	 * bf16 values already (a bf16 convolution's output, backend.h) or is
	 * read in backward only by ops that round it (convolutions, dense);
	 * 0: some gradient changes; -1: not checked */
	int exact;
	/* convolutions that write their output's copy alone (conv_writes_yh:
	 * Winograd's, a batchnorm reading it as it is), at least */
	int min_conv_alone;
} model;

typedef struct step_out {
	double loss;
	float *logits, *grads, *grads2;
	size_t nlogits, nparams, act_bytes;
	size_t widened, acts;    /* values backward widened; the outputs' total */
	size_t narrowed;         /* values forward's to_bf16 passes rounded */
	int bn_alone, bns;       /* batchnorms with no fp32 output; all of them */
	int conv_alone;          /* convolutions with no fp32 output */
	int stash;
} step_out;

static cdp_backend *be;

/* from_bf16 counting what it widens, to_bf16 what it rounds */
static void (*from_bf16_cpu)(cdp_backend *, const uint16_t *, float *, size_t);
static void (*to_bf16_cpu)(cdp_backend *, const float *, uint16_t *, size_t);
static size_t widened, narrowed;

static void to_bf16_count(cdp_backend *b, const float *x, uint16_t *h, size_t n)
{
	narrowed += n;
	to_bf16_cpu(b, x, h, n);
}

static void from_bf16_count(cdp_backend *b, const uint16_t *h, float *y, size_t n)
{
	widened += n;
	from_bf16_cpu(b, h, y, n);
}
static const char *freeze_pat;   /* cdp_net_freeze'd after the build, or NULL */

static float *host(const float *dev, size_t n)
{
	float *h = malloc(n * sizeof *h);

	if (h)
		be->to_host(be, h, dev, n * sizeof *h);
	return h;
}

/* One training step's forward, loss and backward (twice) of m, built with
 * the backend in precision `build` and then set to `run`; 0 or -1. */
static int step(const model *m, int build, int run, step_out *o)
{
	char *text = m->text ? strdup(m->text) : read_model(m->file), err[512];
	cdp_net net;
	cdp_loss loss;
	cdp_loss_result res;
	cdp_rng r;
	int32_t *lab = NULL, *dlab = NULL;
	float *x = NULL;
	size_t nx, nl;
	int hw, rc = -1;

	memset(o, 0, sizeof *o);
	if (!text)
		return -1;
	be->set_precision(be, build);
	if (cdp_net_build(&net, be, text, m->name, m->ov, m->nov, 0, m->side, m->side, m->n, err,
	                  sizeof err) < 0) {
		fprintf(stderr, "%s: %s\n", m->name, err);
		free(text);
		return -1;
	}
	if (cdp_net_set_precision(&net, run, err, sizeof err) < 0 ||
	    (freeze_pat && cdp_net_freeze(&net, freeze_pat, err, sizeof err) < 0) ||
	    cdp_loss_init(&loss, be, net.loss, net.classes, net.ignore, NULL, 0, 0.0f, err,
	                  sizeof err) < 0) {
		fprintf(stderr, "%s: %s\n", m->name, err);
		goto out_net;
	}
	hw = net.layers[net.out_layer].out.h * net.layers[net.out_layer].out.w;
	nx = (size_t)net.n * net.in.c * net.in.h * net.in.w;
	nl = (size_t)net.n * hw;
	x = malloc(nx * sizeof *x);
	lab = malloc(nl * sizeof *lab);
	dlab = be->alloc(be, nl * sizeof *dlab);
	if (!x || !lab || !dlab)
		goto out;
	cdp_rng_seed(&r, 77);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)cdp_rng_normal(&r);
	for (size_t i = 0; i < nl; i++)
		lab[i] = (int32_t)cdp_rng_below(&r, (uint64_t)loss.classes);
	be->to_device(be, net.x, x, nx * sizeof *x);
	be->to_device(be, dlab, lab, nl * sizeof *lab);
	cdp_net_init(&net, 3);
	net.step_seed = 11;
	cdp_net_zero_grad(&net);
	narrowed = 0;
	cdp_net_forward(&net);
	o->narrowed = narrowed;
	cdp_loss_compute(&loss, net.n, hw, net.layers[net.out_layer].y, dlab,
	                 net.layers[net.out_layer].dy, &res);
	widened = 0;
	cdp_net_backward(&net, NULL, NULL);
	o->widened = widened;
	for (int i = 0; i < net.nlayers; i++)
		o->acts += cdp_layer_out_count(&net.layers[i], &net);
	o->loss = res.loss;
	o->nlogits = (size_t)net.n * hw * net.layers[net.out_layer].out.c;
	o->logits = host(net.layers[net.out_layer].y, o->nlogits);
	o->nparams = net.nparams;
	o->grads = host(net.grads, net.nparams);
	cdp_net_zero_grad(&net);
	cdp_net_backward(&net, NULL, NULL);
	o->grads2 = host(net.grads, net.nparams);
	o->act_bytes = net.act_bytes;
	for (int i = 0; i < net.nlayers; i++) {
		int alone = net.layers[i].fwd_end < 0 && net.layers[i].keep;
		if (strcmp(net.layers[i].ops->type, "bn") == 0) {
			o->bns++;
			o->bn_alone += alone;
		}
		if (strcmp(net.layers[i].ops->type, "conv") == 0)
			o->conv_alone += alone;
	}
	o->stash = net.stash;
	rc = o->logits && o->grads && o->grads2 ? 0 : -1;
out:
	cdp_loss_free(&loss);
out_net:
	free(x);
	free(lab);
	be->free(be, dlab);
	cdp_net_free(&net);
	free(text);
	return rc;
}

static void step_free(step_out *o)
{
	free(o->logits);
	free(o->grads);
	free(o->grads2);
}

/* max |a - b| / max |b| */
static double relerr(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]);
		if (e > d)
			d = e;
		if (fabs((double)b[i]) > m)
			m = fabs((double)b[i]);
	}
	return m > 0 ? d / m : d;
}

static int takes_none(cdp_backend *b, const cdp_conv_desc *d)
{
	(void)b;
	(void)d;
	return 0;
}

static int needs_y(cdp_backend *b)
{
	(void)b;
	return 1;
}

static int bn_xh_none(cdp_backend *b)
{
	(void)b;
	return 0;
}

/* CUDA's maxpool_bwd reads x and y: as CUDA plans it, both must be live
 * and hold the forward's values (x at each argmax is the output); the
 * CPU's plan hands it neither */
static void (*maxpool_bwd_cpu)(cdp_backend *, const cdp_pool_desc *, const float *,
                               const float *, const float *, const int32_t *, float *, float);
static int xy_bad, xy_calls;

static void maxpool_bwd_xy(cdp_backend *b, const cdp_pool_desc *d, const float *x,
                           const float *y, const float *dy, const int32_t *idx, float *dx,
                           float beta)
{
	size_t planes = (size_t)d->n * d->c, per = (size_t)d->oh * d->ow;

	xy_calls++;
	if (!x || !y)
		xy_bad++;
	for (size_t p = 0; x && y && p < planes; p++)
		for (size_t i = 0; i < per; i++)
			if (x[p * d->h * d->w + idx[p * per + i]] != y[p * per + i])
				xy_bad++;
	maxpool_bwd_cpu(b, d, x, y, dy, idx, dx, beta);
}

static void maxpool_bwd_none(cdp_backend *b, const cdp_pool_desc *d, const float *x,
                             const float *y, const float *dy, const int32_t *idx, float *dx,
                             float beta)
{
	xy_calls++;
	if (x || y)
		xy_bad++;
	maxpool_bwd_cpu(b, d, x, y, dy, idx, dx, beta);
}

static int needs_xy_yes(cdp_backend *b)
{
	(void)b;
	return 1;
}

static void test_model(const model *m)
{
	step_out on, off, f32;
	double e, e32;

	setenv("CDP_BF16_STASH", "0", 1);
	CHECK_RC(step(m, CDP_PREC_BF16, CDP_PREC_BF16, &off), 0);
	unsetenv("CDP_BF16_STASH");
	CHECK_RC(step(m, CDP_PREC_BF16, CDP_PREC_BF16, &on), 0);
	CHECK_RC(step(m, CDP_PREC_FP32, CDP_PREC_FP32, &f32), 0);
	if (!on.grads || !off.grads || !f32.grads)
		goto out;
	CHECK(on.stash == 1 && off.stash == 0 && f32.stash == 0, "%s: stash on %d, off %d, fp32 %d",
	      m->name, on.stash, off.stash, f32.stash);
	CHECK(on.loss == off.loss, "%s: the stash changed the loss: %.9g, without %.9g", m->name,
	      on.loss, off.loss);
	CHECK(memcmp(on.logits, off.logits, on.nlogits * sizeof(float)) == 0,
	      "%s: the stash changed the logits", m->name);
	e = relerr(on.grads, off.grads, on.nparams);
	e32 = relerr(off.grads, f32.grads, on.nparams);
	printf("%s: loss %.6f (fp32 %.6f), gradients with the stash within %.2e of those "
	       "without (bf16 without the stash: %.2e of fp32's); act_bytes %zu, without %zu, "
	       "fp32 %zu (%.3f); backward widened %.3f of the outputs, forward rounded %.3f in "
	       "passes of their own\n", m->name, on.loss, f32.loss, e, e32, on.act_bytes,
	       off.act_bytes, f32.act_bytes, (double)on.act_bytes / f32.act_bytes,
	       (double)on.widened / on.acts, (double)on.narrowed / on.acts);
	CHECK(e <= 0.075 && e <= 0.25 * e32, "%s: gradients with the stash %.3g off those without "
	      "(bf16's own: %.3g off fp32's)", m->name, e, e32);
	if (m->exact == 1)
		CHECK(memcmp(on.grads, off.grads, on.nparams * sizeof(float)) == 0,
		      "%s: the stash changed the gradients (it keeps only what is bf16 already)",
		      m->name);
	else if (m->exact == 0)
		CHECK(memcmp(on.grads, off.grads, on.nparams * sizeof(float)) != 0,
		      "%s: the stash gave the unstashed gradients bit for bit: not in effect",
		      m->name);
	CHECK(memcmp(on.grads, on.grads2, on.nparams * sizeof(float)) == 0,
	      "%s: a second backward with the stash gave other gradients", m->name);
	CHECK(off.act_bytes == f32.act_bytes, "%s: without the stash %zu activation bytes, fp32 %zu",
	      m->name, off.act_bytes, f32.act_bytes);
	CHECK(m->max_widen == 0.0 || on.widened <= m->max_widen * on.acts,
	      "%s: backward widened %zu of the outputs' %zu values, more than %.2f of them",
	      m->name, on.widened, on.acts, m->max_widen);
	CHECK(on.bn_alone >= m->min_alone,
	      "%s: %d of %d batchnorms write their output's copy alone, not %d", m->name,
	      on.bn_alone, on.bns, m->min_alone);
	CHECK(on.conv_alone >= m->min_conv_alone,
	      "%s: %d convolutions write their output's copy alone, not %d", m->name,
	      on.conv_alone, m->min_conv_alone);
	CHECK(m->max_narrow == 0.0 || on.narrowed <= m->max_narrow * on.acts,
	      "%s: forward rounded %zu of the outputs' %zu values in passes of their own, more "
	      "than %.2f of them", m->name, on.narrowed, on.acts, m->max_narrow);
	CHECK(on.act_bytes <= m->max_ratio * f32.act_bytes,
	      "%s: %zu activation bytes with the stash, more than %.2f of fp32's %zu", m->name,
	      on.act_bytes, m->max_ratio, f32.act_bytes);
out:
	step_free(&on);
	step_free(&off);
	step_free(&f32);
}

/* cdp_net_set_precision after the build: the stash comes and goes */
static void test_set_precision(const model *m)
{
	step_out built, switched, back;

	CHECK_RC(step(m, CDP_PREC_BF16, CDP_PREC_BF16, &built), 0);
	CHECK_RC(step(m, CDP_PREC_FP32, CDP_PREC_BF16, &switched), 0);
	CHECK_RC(step(m, CDP_PREC_BF16, CDP_PREC_FP32, &back), 0);
	if (built.grads && switched.grads && back.grads) {
		CHECK(switched.stash == 1 && back.stash == 0, "after set_precision: stash %d and %d",
		      switched.stash, back.stash);
		CHECK(memcmp(built.grads, switched.grads, built.nparams * sizeof(float)) == 0,
		      "%s: built in fp32 and set to bf16: other gradients than built in bf16",
		      m->name);
	}
	step_free(&built);
	step_free(&switched);
	step_free(&back);
}

/* Every bn's gamma, beta, running mean and variance set to values that
 * differ per channel (a fresh net has 1, 0, 0, 1 everywhere), so that a
 * fused convolution that took another channel's or skipped the batchnorm
 * shows in the logits */
static void bn_random(cdp_net *net, uint64_t seed)
{
	cdp_rng r;

	cdp_rng_seed(&r, seed);
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		int c = l->out.c;
		float *h;

		if (l->ops != &cdp_layer_bn || l->share || !(h = malloc(4 * (size_t)c * sizeof *h)))
			continue;
		for (int k = 0; k < c; k++) {
			h[k] = (float)(0.5 + cdp_rng_double(&r));              /* gamma */
			h[c + k] = (float)(cdp_rng_double(&r) - 0.5);          /* beta */
			h[2 * c + k] = (float)(0.2 * (cdp_rng_double(&r) - 0.5)); /* mean */
			h[3 * c + k] = (float)(0.5 + cdp_rng_double(&r));      /* var */
		}
		be->to_device(be, net->params + l->w_off, h, (size_t)c * sizeof *h);
		be->to_device(be, net->params + l->b_off, h + c, (size_t)c * sizeof *h);
		be->to_device(be, net->buffers + l->buf_off, h + 2 * c, 2 * (size_t)c * sizeof *h);
		free(h);
	}
}

/* max - min of x[0..n) */
static double spread(const float *x, size_t n)
{
	float lo = x[0], hi = x[0];

	for (size_t i = 1; i < n; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	return (double)hi - lo;
}

/* the convolutions an inference net fuses with their batchnorm (net.h) */
static int fused(const cdp_net *net)
{
	int k = 0;

	for (int i = 0; i < net->nlayers; i++)
		k += net->layers[i].ops == &cdp_layer_conv && net->layers[i].fuse;
	return k;
}

/* concats an inference net does not copy (net.h, virt) */
static int virtuals(const cdp_net *net)
{
	int k = 0;

	for (int i = 0; i < net->nlayers; i++)
		k += net->layers[i].virt;
	return k;
}

/* the first layer whose forward reads a tensor past its live range in
 * an inference net's arena (fwd_end), directly or as an input of a
 * virtual concat; -1: none */
static int read_dead(const cdp_net *net)
{
	for (int k = 0; k <= net->out_layer; k++)
		for (int m = 0; m < net->layers[k].nfrom; m++) {
			const cdp_layer *v = net->layers[k].from[m] < 0 ? NULL :
			                     &net->layers[net->layers[k].from[m]];
			if (v && !v->virt && v->fwd_end < k)
				return k;
			for (int j = 0; v && v->virt && j < v->nfrom; j++)
				if (v->from[j] >= 0 && net->layers[v->from[j]].fwd_end < k)
					return k;
		}
	return -1;
}

/* cdp_net_build_infer (cdp-predict's net): the same logits, bit for bit,
 * as a training-built net in eval mode with the same weights, in fp32 and
 * in bf16, with no activation gradients and at most max_infer of the
 * training layout's activation bytes; and again after a resize. Then
 * with a backend whose convolutions read one x only (conv_takes_split 0,
 * as CUDA's): the concats copied, the same logits, and where the first
 * read them in place, more bytes. */
static void test_infer(const model *m, double max_infer)
{
	char *text = m->text ? strdup(m->text) : read_model(m->file), err[512];
	static const int precs[] = { CDP_PREC_FP32, CDP_PREC_BF16, CDP_PREC_FP32, CDP_PREC_BF16 };
	int (*split)(cdp_backend *, const cdp_conv_desc *) = be->conv_takes_split;
	size_t bytes[2] = { 0, 0 };

	for (int pi = 0; text && pi < 4; pi++) {
		cdp_net tr, in;
		cdp_rng r;
		size_t nx = (size_t)m->n * 3 * m->side * m->side, nout;
		float *x = malloc(nx * sizeof *x), *a = NULL, *b = NULL;

		be->set_precision(be, precs[pi]);
		be->conv_takes_split = pi < 2 ? split : takes_none;
		if (cdp_net_build(&tr, be, text, m->name, m->ov, m->nov, 0, m->side, m->side, m->n,
		                  err, sizeof err) < 0) {
			CHECK(0, "%s: %s", m->name, err);
			free(x);
			break;
		}
		if (cdp_net_build_infer(&in, be, text, m->name, m->ov, m->nov, 0, m->side, m->side,
		                        m->n, NULL, 0, err, sizeof err) < 0) {
			CHECK(0, "%s: infer: %s", m->name, err);
			cdp_net_free(&tr);
			free(x);
			break;
		}
		tr.train = in.train = 0;
		cdp_net_init(&tr, 5);
		bn_random(&tr, 17 + (uint64_t)pi);
		be->copy(be, in.params, tr.params, tr.nparams * sizeof(float));
		if (tr.nbuffers)
			be->copy(be, in.buffers, tr.buffers, tr.nbuffers * sizeof(float));
		cdp_rng_seed(&r, 91);
		for (size_t i = 0; i < nx; i++)
			x[i] = (float)cdp_rng_normal(&r);
		nout = cdp_layer_out_count(&tr.layers[tr.out_layer], &tr);
		for (int pass = 0; pass < 2; pass++) {
			be->to_device(be, tr.x, x, nx * sizeof *x);
			be->to_device(be, in.x, x, nx * sizeof *x);
			cdp_net_forward(&tr);
			cdp_net_forward(&in);
			a = host(cdp_net_output(&tr), nout);
			b = host(cdp_net_output(&in), nout);
			CHECK(a && b && memcmp(a, b, nout * sizeof *a) == 0,
			      "%s (%s, pass %d): inference net's logits differ from the training net's",
			      m->name, cdp_precision_name(precs[pi]), pass);
			CHECK(a && spread(a, nout) > 0.0,
			      "%s (%s): the logits are not all equal (else the check above is empty)",
			      m->name, cdp_precision_name(precs[pi]));
			free(a);
			free(b);
		}
		CHECK(fused(&in) == m->fused, "%s: %d convolutions fused with their batchnorm, "
		      "expected %d", m->name, fused(&in), m->fused);
		CHECK(virtuals(&in) == (pi < 2 ? m->virt : 0), "%s (%s, %s): %d concats read in "
		      "place, expected %d", m->name, cdp_precision_name(precs[pi]),
		      pi < 2 ? "split" : "one x", virtuals(&in), pi < 2 ? m->virt : 0);
		CHECK(read_dead(&in) < 0, "%s (%s): layer %d reads a tensor past its live range",
		      m->name, cdp_precision_name(precs[pi]), read_dead(&in));
		if (pi % 2 == 0)
			bytes[pi / 2] = in.act_bytes;
		if (pi == 2)
			CHECK(m->virt == 0 ? bytes[0] == bytes[1] : bytes[0] < bytes[1],
			      "%s (fp32): inference activations %zu bytes with the concats read in "
			      "place, %zu copied", m->name, bytes[0], bytes[1]);
		CHECK(in.dact_bytes == 0 && in.dx == NULL && in.stash == 0,
		      "%s: the inference net holds gradients (%zu bytes, dx %p) or a stash (%d)",
		      m->name, in.dact_bytes, (void *)in.dx, in.stash);
		CHECK(in.act_bytes <= max_infer * tr.act_bytes,
		      "%s (%s): inference activations %zu bytes, training layout's %zu (at most %.2f)",
		      m->name, cdp_precision_name(precs[pi]), in.act_bytes, tr.act_bytes, max_infer);
		printf("# %s %s%s: inference activations %.3f of the training layout's\n", m->name,
		       cdp_precision_name(precs[pi]), pi < 2 ? "" : " (concats copied)",
		       (double)in.act_bytes / (double)tr.act_bytes);
		/* a batch of one more: laid out again, the same logits per sample */
		CHECK(cdp_net_resize(&in, m->n + 1, err, sizeof err) == 0, "%s: resize: %s", m->name,
		      err);
		cdp_net_free(&tr);
		cdp_net_free(&in);
		free(x);
	}
	be->set_precision(be, CDP_PREC_BF16);
	be->conv_takes_split = split;
	free(text);
}

int main(void)
{
	static const model models[] = {
		/* rounded in passes of their own: 0.270, 0.057, 0.193 (0.382,
		 * 0.744, 0.817 while the stash rounded batchnorm's input and
		 * output after its step) */
		{ "every-layer", NULL, every_layer, { NULL }, 0, 16, 2, 0.95, 1, 0.0, 0.3, 0, 0, 0, 0 },
		/* the classifier's two plans take the same bytes: only the
		 * dense head's input is widened (0.002; 0.744 in the other) */
		{ "classifier", "classifier.cfg", NULL, { "width=8", "blocks=2" }, 2, 16, 4, 0.95, 5,
		  0.01, 0.1, 1, 0, 0, 0 },
		/* 8 of its 14 batchnorms are read by convolutions alone; its
		 * 3 concats by 3x3 convolutions alone */
		{ "unet", "unet.cfg", NULL, { "width=8", "depth=3" }, 2, 32, 2, 0.61, 14, 0.12, 0.25,
		  8, 3, 0, 0 },
	};

	if (!(be = bf16_backend("test_stash")))
		return 99;
	from_bf16_cpu = be->from_bf16;
	be->from_bf16 = from_bf16_count;
	to_bf16_cpu = be->to_bf16;
	be->to_bf16 = to_bf16_count;
	maxpool_bwd_cpu = be->maxpool_bwd;
	be->maxpool_bwd = maxpool_bwd_none;
	for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
		test_model(&models[i]);
	CHECK(xy_calls > 0 && xy_bad == 0,
	      "the CPU's maxpool backward gets neither x nor y (%d of %d calls did)", xy_bad,
	      xy_calls);
	be->maxpool_bwd = maxpool_bwd_cpu;
	/* a backend that reads the copies as float only (CUDA's answer):
	 * the convolutions widen them a few samples at a time, forward (the
	 * concats' bf16-only outputs) and backward */
	{
		model u = models[2];
		int (*takes)(cdp_backend *, const cdp_conv_desc *) = be->conv_takes_xh;
		int (*needs)(cdp_backend *) = be->bn_bwd_needs_y, (*bn_xh)(cdp_backend *) = be->bn_takes_xh;
		int (*xy)(cdp_backend *) = be->maxpool_bwd_needs_xy, (*alone)(cdp_backend *) =
			be->bn_fwd_h_alone;
		u.name = "unet, as CUDA plans it";
		u.max_ratio = 0.63;
		u.max_widen = 0.0;      /* it widens what the CPU reads as bf16 */
		u.max_narrow = 0.0;
		u.min_alone = 0;        /* cuDNN writes y: bn_fwd_h_alone 0 */
		/* exact where the filter gradients' sums do not depend on the
		 * groups of samples the widened copies come in (the emulated
		 * set's), else not */
		u.exact = -1;
		be->conv_takes_xh = takes_none;
		be->bn_bwd_needs_y = needs_y;
		be->bn_takes_xh = bn_xh_none;
		be->maxpool_bwd_needs_xy = needs_xy_yes;
		be->bn_fwd_h_alone = bn_xh_none;
		be->maxpool_bwd = maxpool_bwd_xy;
		xy_bad = xy_calls = 0;
		test_model(&u);
		CHECK(xy_calls > 0 && xy_bad == 0,
		      "as CUDA plans it, maxpool backward gets the forward's x and y (%d of %d "
		      "calls did not)", xy_bad, xy_calls);
		be->conv_takes_xh = takes;
		be->bn_bwd_needs_y = needs;
		be->bn_takes_xh = bn_xh;
		be->maxpool_bwd_needs_xy = xy;
		be->bn_fwd_h_alone = alone;
		be->maxpool_bwd = maxpool_bwd_cpu;
		/* a batchnorm frozen after the batch is laid out reads its
		 * output in backward (act_bwd): the plan is made again */
		u = models[2];
		u.name = "unet, bn1 frozen after the build";
		u.max_widen = 0.0;      /* bn1's output too (0.19) */
		u.max_narrow = 0.0;     /* a frozen bn writes no copies (0.29) */
		u.min_alone = 7;        /* nor its output's copy alone */
		/* as above: its backward reads relu's output, whose signs the
		 * rounding keeps */
		u.exact = -1;
		freeze_pat = "bn1";
		test_model(&u);
		freeze_pat = NULL;
	}
	test_set_precision(&models[2]);
	test_infer(&models[0], 0.75);
	/* 0.438 in bf16: the training layout shrank when max pooling stopped
	 * widening its input and output for backward (0.39 before) */
	test_infer(&models[1], 0.45);
	test_infer(&models[2], 0.4);
	/* A classifier of 32 channels and more, whose 3x3 convolutions the
	 * avx512bf16 set computes by Winograd, and whose first the row-by-row
	 * gemm, writing their outputs as bf16 alone (conv_writes_yh), which
	 * batchnorm reads as it is, forward and backward: exact, and no fp32
	 * of them; validation (eval mode) reads them a sample at a time.
	 * Where the CPU has no AVX512_BF16 the set is not forced. */
	if (cpu_kgemm_bf16_force("avx512bf16") == 0) {
		static const model wide = { "classifier, 32 wide", "classifier.cfg", NULL,
		                            { "width=32", "blocks=1" }, 2, 32, 4, 0.60, 3, 0.01, 0.1,
		                            1, 0, 1, 3 };
		test_model(&wide);
		test_infer(&wide, 0.65);
		cpu_kgemm_bf16_force(NULL);
	} else {
		printf("# no AVX512_BF16: the classifier 32 wide not run\n");
	}
	be->destroy(be);
	return tap_done();
}
