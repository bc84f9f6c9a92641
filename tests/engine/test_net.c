/* test_net.c: building nets from cfg text and running them.
 *
 *  - errors name the cfg file, line, layer and type, and say what is wrong
 *    (shape mismatches, bad options, bad from=, heads that do not fit the
 *    loss, unknown layer types and options);
 *  - the parameter and buffer counts of a small U-Net equal the hand count,
 *    and a width override rebuilds it at the new width;
 *  - forward is bitwise deterministic run to run, between two nets built
 *    and initialised alike, and across cdp_net_resize;
 *  - 1 and 2 threads agree within float rounding;
 *  - backward accumulates into the gradients and reports every layer once,
 *    last layer first;
 *  - a residual add lends its gradient buffer to the inputs it alone reads
 *    (no copy, one buffer less), and not to one with a fused activation or
 *    read by another layer too (test_grad checks the gradients).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "net.h"
#include "tap.h"

/* U-Net, depth 2: enc0 (w), enc1 (2w), bottleneck (4w), two decoder
 * levels with deconv up, concat skip; convs without bias before bn. */
static const char *unet =
	"[net]\n"                                            /* 1 */
	"channels=3\nin_h=16\nin_w=16\nclasses=2\n"          /* 2-5 */
	"[vars]\nwidth=4\n"                                  /* 6-7 */
	"[conv]\nname=enc0a\nfilters=${width}\nbias=0\n"     /* 8-11 */
	"[bn]\nactivation=relu\n"                            /* 12-13 */
	"[conv]\nfilters=${width}\nbias=0\n"                 /* 14-16 */
	"[bn]\nname=enc0\nactivation=relu\n"                 /* 17-19 */
	"[maxpool]\n"                                        /* 20 */
	"[conv]\nfilters=${width*2}\nbias=0\n"               /* 21-23 */
	"[bn]\nactivation=relu\n"                            /* 24-25 */
	"[conv]\nfilters=${width*2}\nbias=0\n"               /* 26-28 */
	"[bn]\nname=enc1\nactivation=relu\n"                 /* 29-31 */
	"[maxpool]\n"                                        /* 32 */
	"[conv]\nfilters=${width*4}\nbias=0\n"               /* 33-35 */
	"[bn]\nactivation=relu\n"                            /* 36-37 */
	"[conv]\nfilters=${width*4}\nbias=0\n"               /* 38-40 */
	"[bn]\nactivation=relu\n"                            /* 41-42 */
	"[deconv]\nfilters=${width*2}\n"                     /* 43-44 */
	"[concat]\nname=up1\nfrom=enc1,-1\n"                 /* 45-47 */
	"[conv]\nfilters=${width*2}\nbias=0\n"               /* 48-50 */
	"[bn]\nactivation=relu\n"                            /* 51-52 */
	"[conv]\nfilters=${width*2}\nbias=0\n"               /* 53-55 */
	"[bn]\nactivation=relu\n"                            /* 56-57 */
	"[deconv]\nfilters=${width}\n"                       /* 58-59 */
	"[concat]\nname=up0\nfrom=enc0,-1\n"                 /* 60-62 */
	"[conv]\nfilters=${width}\nbias=0\n"                 /* 63-65 */
	"[bn]\nactivation=relu\n"                            /* 66-67 */
	"[conv]\nfilters=${width}\nbias=0\n"                 /* 68-70 */
	"[bn]\nactivation=relu\n"                            /* 71-72 */
	"[conv]\nfilters=${classes}\nsize=1\n";              /* 73-75 */

/* The hand count for input channels C, width w, classes K. */
static size_t unet_params(size_t C, size_t w, size_t K)
{
	size_t p = 0;
	p += C * w * 9 + 2 * w + w * w * 9 + 2 * w;                        /* enc0 */
	p += w * 2 * w * 9 + 4 * w + 2 * w * 2 * w * 9 + 4 * w;            /* enc1 */
	p += 2 * w * 4 * w * 9 + 8 * w + 4 * w * 4 * w * 9 + 8 * w;        /* bottleneck */
	p += 4 * w * 2 * w * 4 + 2 * w;                                     /* deconv 2x2 + bias */
	p += 4 * w * 2 * w * 9 + 4 * w + 2 * w * 2 * w * 9 + 4 * w;         /* dec1: in 2w+2w */
	p += 2 * w * w * 4 + w;                                             /* deconv */
	p += 2 * w * w * 9 + 2 * w + w * w * 9 + 2 * w;                     /* dec0: in w+w */
	p += w * K + K;                                                     /* head 1x1 */
	return p;
}

static void fill_input(cdp_net *net, uint64_t seed)
{
	size_t n = (size_t)net->n * net->in.c * net->in.h * net->in.w;
	float *x = malloc(n * sizeof *x);
	cdp_rng r;
	cdp_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(cdp_rng_double(&r) * 2 - 1);
	net->be->to_device(net->be, net->x, x, n * sizeof *x);
	free(x);
}

static float *host(cdp_net *net, const float *p, size_t n)
{
	float *h = malloc(n * sizeof *h + 4);
	net->be->to_host(net->be, h, p, n * sizeof *h);
	return h;
}

static size_t out_count(const cdp_net *net)
{
	const cdp_layer *o = &net->layers[net->out_layer];
	return (size_t)net->n * o->out.c * o->out.h * o->out.w;
}

static void expect_error(cdp_backend *be, const char *cfg, const char *want)
{
	cdp_net net;
	char err[512] = "";
	int rc = cdp_net_build(&net, be, cfg, "bad.cfg", NULL, 0, 0, 0, 0, 2, err, sizeof err);
	CHECK(rc == -1 && strcmp(err, want) == 0, "error\n   got: %s\n  want: %s", err, want);
	if (rc == 0)
		cdp_net_free(&net);
}

static void test_errors(cdp_backend *be)
{
	const char *head = "[net]\nchannels=3\nin_h=15\nin_w=15\n";   /* lines 1-4 */
	char cfg[1024];
#define BAD(body, want) do { snprintf(cfg, sizeof cfg, "%s%s", head, body); expect_error(be, cfg, want); } while (0)
	BAD("[conv]\nname=e0\nfilters=4\n[maxpool]\n[deconv]\nfilters=4\n[concat]\nname=up\nfrom=e0,-1\n",
	    "bad.cfg:11: layer 'up' (concat): shapes (4,15,15) and (4,14,14) differ in height or width");
	BAD("[conv]\nfilters=4\n[conv]\nfilters=5\n[add]\nfrom=-1,-2\n",
	    "bad.cfg:9: layer 'add2' (add): shapes (5,15,15) and (4,15,15) differ");
	BAD("[conv]\nfilters=4\nsize=5\nstride=2\npad=0\n[conv]\nfilters=4\nsize=5\npad=0\n[conv]\nfilters=4\nsize=5\npad=0\n",
	    "bad.cfg:14: layer 'conv2' (conv): input (4,2,2) is smaller than the kernel 5 (dilation 1, pad 0)");
	BAD("[conv]\nfilters=4\nsize=3\nwidth=3\n",
	    "bad.cfg:8: layer 'conv0' (conv): unknown option 'width' in [conv]");
	BAD("[conv]\nfilters=0\n",
	    "bad.cfg:6: layer 'conv0' (conv): option 'filters': 0 is outside [1, 65536]");
	BAD("[conv]\nsize=3\n",
	    "bad.cfg:5: layer 'conv0' (conv): filters= is required");
	BAD("[conv]\nfilters=2\nactivation=tanh\n",
	    "bad.cfg:5: layer 'conv0' (conv): activation 'tanh' is not linear, relu or leaky");
	BAD("[conv]\nfilters=2\n[relu]\nfrom=nope\n",
	    "bad.cfg:7: layer 'relu1' (relu): from: no layer named 'nope' before this one");
	BAD("[relu]\nfrom=-2\n",
	    "bad.cfg:5: layer 'relu0' (relu): from=-2 does not name a layer before this one");
	BAD("[conv]\nname=a\nfilters=2\n[conv]\nname=a\nfilters=2\n",
	    "bad.cfg:8: layer 'a' (conv): the name is already used at line 5");
	BAD("[conv]\nfilters=2\n[concat]\n",
	    "bad.cfg:7: layer 'concat1' (concat): needs at least two inputs in from=");
	BAD("[swish]\n", "bad.cfg:5: unknown layer type [swish]");
	BAD("[maxpool]\nsize=2\npad=2\n",
	    "bad.cfg:7: layer 'maxpool0' (maxpool): option 'pad': 2 is outside [0, 1]");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=3\n[conv]\nfilters=2\n",
	             "bad.cfg:6: layer 'conv0' (conv): the output has 2 channels, loss=ce needs 3");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nloss=bce\n[conv]\nfilters=2\n",
	             "bad.cfg:6: layer 'conv0' (conv): the output has 2 channels, loss=bce needs 1");
	expect_error(be, "[net]\nchannels=3\nin_h=8\n[conv]\nfilters=2\n",
	             "bad.cfg:1: [net]: the input shape is unknown (set channels=, in_h=, in_w= or pass them)");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nloss=l2\n[conv]\nfilters=2\n",
	             "bad.cfg:1: [net]: loss 'l2': 'l2' is not ce, bce, dice, jaccard, tversky, focal, "
	             "lovasz, mse, l1 or huber");
	/* regression: one channel per target */
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=3\nloss=mse\n[conv]\nfilters=2\n",
	             "bad.cfg:7: layer 'conv0' (conv): the output has 2 channels, loss=mse needs 3");
	/* the other losses: softmax with classes > 2 (or a ce term), binary
	 * on one channel with 2 */
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=3\nloss=focal\n[conv]\nfilters=1\n",
	             "bad.cfg:7: layer 'conv0' (conv): the output has 1 channels, loss=focal needs 3");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=2\nloss=dice\n[conv]\nfilters=2\n",
	             "bad.cfg:7: layer 'conv0' (conv): the output has 2 channels, loss=dice needs 1");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=2\nloss=ce+lovasz\n[conv]\nfilters=1\n",
	             "bad.cfg:7: layer 'conv0' (conv): the output has 1 channels, loss=ce+lovasz needs 2");
	expect_error(be, "[net]\nchannels=3\nin_h=8\nin_w=8\nclasses=3\nloss=bce+jaccard\n[conv]\nfilters=1\n",
	             "bad.cfg:1: [net]: loss=bce+jaccard is binary: classes must be 2, not 3");
	{
		/* no classes=: the head decides (4 channels: softmax over 4) */
		cdp_net net;
		char err[512];
		CHECK_RC(cdp_net_build(&net, be, "[net]\nchannels=3\nin_h=8\nin_w=8\nloss=jaccard+focal\n"
		                       "[conv]\nfilters=4\n", "ok.cfg", NULL, 0, 0, 0, 0, 2, err,
		                       sizeof err), 0);
		CHECK(net.classes == 4, "classes %d", net.classes);
		cdp_net_free(&net);
		CHECK_RC(cdp_net_build(&net, be, "[net]\nchannels=3\nin_h=8\nin_w=8\nloss=lovasz\n"
		                       "[conv]\nfilters=1\n", "ok.cfg", NULL, 0, 0, 0, 0, 2, err,
		                       sizeof err), 0);
		CHECK(net.classes == 2, "classes %d", net.classes);
		cdp_net_free(&net);
		/* regression: the head's channels are the targets, 1 or more */
		for (int f = 1; f <= 2; f++) {
			char text[160];
			snprintf(text, sizeof text, "[net]\nchannels=3\nin_h=8\nin_w=8\nloss=huber\n"
			         "[conv]\nfilters=%d\n", f);
			CHECK_RC(cdp_net_build(&net, be, text, "ok.cfg", NULL, 0, 0, 0, 0, 2, err,
			                       sizeof err), 0);
			CHECK(net.classes == f, "regression outputs %d: classes %d", f, net.classes);
			cdp_net_free(&net);
		}
	}
#undef BAD
}

static void test_counts(cdp_backend *be)
{
	cdp_net net;
	char err[512];
	const char *ov[] = { "width=6" };

	if (cdp_net_build(&net, be, unet, "unet.cfg", NULL, 0, 0, 0, 0, 2, err, sizeof err) < 0) {
		CHECK(0, "unet: %s", err);
		return;
	}
	CHECK(net.nparams == unet_params(3, 4, 2), "unet params %zu, hand count %zu",
	      net.nparams, unet_params(3, 4, 2));
	/* running mean and var of every bn: 2 * (4+4+8+8+16+16+8+8+4+4) */
	CHECK(net.nbuffers == 2 * 80, "unet buffers %zu", net.nbuffers);
	CHECK(net.layers[0].w_off == 0 && net.layers[1].w_off == 3 * 4 * 9 &&
	      net.layers[1].b_off == 3 * 4 * 9 + 4, "parameter order: conv weight, bn gamma, beta");
	CHECK(net.classes == 2 && net.layers[net.out_layer].out.c == 2 &&
	      net.layers[net.out_layer].out.h == 16, "head (2,16,16)");
	cdp_net_free(&net);
	/* a width override and the caller's input size (5 bands, 32x32) */
	if (cdp_net_build(&net, be, unet, "unet.cfg", ov, 1, 5, 32, 32, 1, err, sizeof err) < 0) {
		CHECK(0, "unet width=6: %s", err);
		return;
	}
	CHECK(net.nparams == unet_params(5, 6, 2), "unet width=6 params %zu, hand count %zu",
	      net.nparams, unet_params(5, 6, 2));
	CHECK(net.in.c == 5 && net.in.h == 32 && net.layers[net.out_layer].out.w == 32,
	      "caller's input shape wins");
	cdp_net_free(&net);
}

/* ResNet's bottleneck end: conv3 + bn3 and the downsample's conv + bn,
 * added, then relu; the identity block after it adds the relu's output */
static const char *resblock =
	"[net]\nchannels=4\nin_h=8\nin_w=8\nclasses=2\n"
	"[conv]\nname=stem\nfilters=4\nbias=0\n"
	"[conv]\nname=conv3\nfilters=6\nsize=1\nbias=0\n"
	"[bn]\nname=bn3\n"
	"[conv]\nname=ds\nfrom=stem\nfilters=6\nsize=1\nbias=0\n"
	"[bn]\nname=dsbn\n"
	"[add]\nname=add0\nfrom=bn3,dsbn\n"
	"[relu]\nname=relu0\n"
	"[conv]\nname=c1\nfilters=6\nbias=0\n"
	"[bn]\nname=bn1\nactivation=relu\n"
	"[add]\nname=add1\nfrom=bn1,relu0\n"
	"[conv]\nname=head\nfilters=2\nsize=1\n";

static void test_dy_sharing(cdp_backend *be)
{
	cdp_net net;
	char err[512];

	if (cdp_net_build(&net, be, resblock, "res.cfg", NULL, 0, 0, 0, 0, 2, err, sizeof err) < 0) {
		CHECK(0, "resblock: %s", err);
		return;
	}
	const cdp_layer *L = net.layers;
	CHECK(L[2].dy == L[5].dy && L[4].dy == L[5].dy, "bn3 and dsbn use add0's gradient buffer");
	CHECK(L[8].dy != L[9].dy, "bn1 (fused relu, masks its dy in place) has its own");
	CHECK(L[6].dy != L[9].dy, "relu0 (also read by c1) has its own");
	CHECK(L[1].dy != L[5].dy && L[3].dy != L[5].dy, "conv3 and ds (read by a bn) have their own");
	cdp_net_free(&net);
}

static int order_ok, order_next;
static void on_done(cdp_net *net, int i, void *ctx)
{
	if (i != order_next)
		order_ok = 0;
	order_next--;
	(*(int *)ctx)++;
}

static void test_runs(cdp_backend *be1, cdp_backend *be2)
{
	cdp_net a, b, c;
	char err[512];

	if (cdp_net_build(&a, be2, unet, "unet.cfg", NULL, 0, 0, 0, 0, 3, err, sizeof err) < 0 ||
	    cdp_net_build(&b, be2, unet, "unet.cfg", NULL, 0, 0, 0, 0, 3, err, sizeof err) < 0 ||
	    cdp_net_build(&c, be1, unet, "unet.cfg", NULL, 0, 0, 0, 0, 3, err, sizeof err) < 0) {
		CHECK(0, "unet: %s", err);
		return;
	}
	cdp_net_init(&a, 11);
	cdp_net_init(&b, 11);
	cdp_net_init(&c, 11);
	fill_input(&a, 5);
	fill_input(&b, 5);
	fill_input(&c, 5);
	size_t no = out_count(&a);
	cdp_net_forward(&a);
	float *y1 = host(&a, cdp_net_output(&a), no);
	cdp_net_forward(&a);
	float *y2 = host(&a, cdp_net_output(&a), no);
	cdp_net_forward(&b);
	float *yb = host(&b, cdp_net_output(&b), no);
	CHECK(memcmp(y1, y2, no * 4) == 0, "forward repeats bitwise");
	CHECK(memcmp(y1, yb, no * 4) == 0, "two nets built and initialised alike agree bitwise");

	/* resize to 5 and back: the same bits */
	CHECK(cdp_net_resize(&a, 5, err, sizeof err) == 0, "resize to 5: %s", err);
	fill_input(&a, 6);
	cdp_net_forward(&a);
	CHECK(cdp_net_resize(&a, 3, err, sizeof err) == 0, "resize to 3: %s", err);
	fill_input(&a, 5);
	cdp_net_forward(&a);
	float *y3 = host(&a, cdp_net_output(&a), no);
	CHECK(memcmp(y1, y3, no * 4) == 0, "forward after resize 3 -> 5 -> 3 is bitwise the same");
	CHECK(cdp_net_resize(&a, 0, err, sizeof err) == -1, "resize to 0 is refused");

	/* 1 vs 2 threads: forward, then backward from the same dy */
	cdp_net_forward(&c);
	float *yc = host(&c, cdp_net_output(&c), no), *dy = malloc(no * sizeof *dy);
	double worst = 0, scale = 1;
	for (size_t i = 0; i < no; i++) {
		worst = fmax(worst, fabs(yc[i] - y1[i]));
		scale = fmax(scale, fabs(y1[i]));
		dy[i] = (float)sin((double)i);
	}
	CHECK(worst <= 1e-5 * scale, "1 vs 2 threads: forward differs by %.3g", worst);
	int calls = 0;
	a.be->to_device(a.be, a.layers[a.out_layer].dy, dy, no * 4);
	c.be->to_device(c.be, c.layers[c.out_layer].dy, dy, no * 4);
	cdp_net_zero_grad(&a);
	cdp_net_zero_grad(&c);
	order_ok = 1;
	order_next = a.nlayers - 1;
	cdp_net_backward(&a, on_done, &calls);
	CHECK(calls == a.nlayers && order_ok, "on_layer_done: %d calls for %d layers, in order %d",
	      calls, a.nlayers, order_ok);
	cdp_net_backward(&c, NULL, NULL);
	float *ga = host(&a, a.grads, a.nparams), *gc = host(&c, c.grads, c.nparams);
	worst = 0;
	scale = 1e-3;
	for (size_t i = 0; i < a.nparams; i++) {
		worst = fmax(worst, fabs(ga[i] - gc[i]));
		scale = fmax(scale, fabs(gc[i]));
	}
	CHECK(worst <= 1e-4 * scale, "1 vs 2 threads: gradients differ by %.3g (scale %.3g)", worst, scale);

	/* a second backward without zero_grad adds the same gradient again */
	a.be->to_device(a.be, a.layers[a.out_layer].dy, dy, no * 4);
	cdp_net_backward(&a, NULL, NULL);
	float *g2 = host(&a, a.grads, a.nparams);
	worst = 0;
	for (size_t i = 0; i < a.nparams; i++)
		worst = fmax(worst, fabs(g2[i] - 2 * ga[i]));
	CHECK(worst <= 1e-5 * scale, "backward accumulates: |g2 - 2 g1| = %.3g", worst);

	/* eval mode uses the running statistics: a different, repeatable output */
	a.train = 0;
	cdp_net_forward(&a);
	float *e1 = host(&a, cdp_net_output(&a), no);
	cdp_net_forward(&a);
	float *e2 = host(&a, cdp_net_output(&a), no);
	CHECK(memcmp(e1, e2, no * 4) == 0 && memcmp(e1, y1, no * 4) != 0, "eval forward");

	free(y1); free(y2); free(yb); free(y3); free(yc); free(dy); free(ga); free(gc); free(g2);
	free(e1); free(e2);
	cdp_net_free(&a);
	cdp_net_free(&b);
	cdp_net_free(&c);
}

int main(void)
{
	cdp_backend *be1 = cdp_backend_cpu(1), *be2 = cdp_backend_cpu(2);

	if (!be1 || !be2) {
		fprintf(stderr, "test_net: cannot create the cpu backend\n");
		return 99;
	}
	test_errors(be2);
	test_counts(be2);
	test_dy_sharing(be2);
	test_runs(be1, be2);
	be1->destroy(be1);
	be2->destroy(be2);
	return tap_done();
}
