/* test_infer_pass.c: an inference net (cdp_net_build_infer) runs its
 * layers over the batch in passes of cdp_net.pass samples (net.h), and
 * cdp_net_forward_n runs only the first k samples (cdp-predict's short
 * last batch of a strip).
 *
 * On a U-Net (width 8, depth 3, 32x32) and a classifier (width 8, 2
 * blocks, 16x16), batch 5, in fp32 and in bf16 (emulated where the CPU
 * lacks AVX512_BF16), against the same net run whole (a backend whose
 * infer_pass_bytes is 0, as CUDA's):
 *  - the pass: 1 for a budget of 1 byte, 3 for three samples' arena (that
 *    of the net built at batch 1), 2 with CDP_INFER_PASS=2, and the whole
 *    batch under the CPU's own budget, these nets being small;
 *  - the logits of every sample bit for bit the whole batch's, in passes
 *    of 1, 2 and 3 (a short last pass each), and again after a resize
 *    (laid out anew: the budget's passes, CDP_INFER_PASS unset);
 *  - passes of 2 allocate fewer activation bytes than the whole batch,
 *    and cdp_net_set_precision keeps their workspace a pass's;
 *  - cdp_net_forward_n(3): the first 3 samples' logits, and the other 2
 *    left as they were (a sentinel), in passes and in one; a backend that
 *    runs the batch whole runs all 5;
 *  - CDP_INFER_PASS=0 or "2x": the build fails, naming the variable.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "layers.h"
#include "net.h"
#include "tap.h"
#include "test_models.h"

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

#define N 5
#define SENTINEL 12345.0f

static cdp_backend *be;
static size_t (*cpu_budget)(cdp_backend *);
static size_t budget;               /* what budget_fixed returns */

static size_t budget_fixed(cdp_backend *b)
{
	(void)b;
	return budget;
}

typedef struct model {
	const char *name, *file;
	const char *ov[2];
	int side;
} model;

static float *host(const float *dev, size_t n)
{
	float *h = malloc(n * sizeof *h);

	if (h)
		be->to_host(be, h, dev, n * sizeof *h);
	return h;
}

/* an inference net of m at batch n under budget b (SIZE_MAX: the CPU's
 * own), its weights and buffers from src (NULL: initialised); 0 or -1 */
static int build(cdp_net *net, const model *m, const char *text, int n, size_t b,
                 const cdp_net *src, char *err, size_t cap)
{
	be->infer_pass_bytes = b == SIZE_MAX ? cpu_budget : budget_fixed;
	budget = b;
	if (cdp_net_build_infer(net, be, text, m->name, m->ov, 2, 0, m->side, m->side, n, NULL, 0,
	                        err, cap) < 0)
		return -1;
	net->train = 0;
	if (!src) {
		cdp_net_init(net, 7);
		/* running statistics away from 0 and 1, so batchnorm does work */
		float *buf = malloc(net->nbuffers * sizeof *buf);
		cdp_rng r;
		cdp_rng_seed(&r, 3);
		for (size_t i = 0; buf && i < net->nbuffers; i++)
			buf[i] = 0.5f + 0.25f * fabsf((float)cdp_rng_normal(&r));
		if (buf)
			be->to_device(be, net->buffers, buf, net->nbuffers * sizeof *buf);
		free(buf);
	} else {
		be->copy(be, net->params, src->params, src->nparams * sizeof(float));
		be->copy(be, net->buffers, src->buffers, src->nbuffers * sizeof(float));
	}
	return 0;
}

/* forward_n(k) of x (n samples) on net; the output (n samples, those not
 * run left at SENTINEL) on the host */
static float *run(cdp_net *net, const float *x, int n, int k, size_t per)
{
	be->to_device(be, net->x, x, (size_t)n * cdp_shape_numel(net->in) * sizeof *x);
	be->fill(be, (float *)cdp_net_output(net), SENTINEL, (size_t)n * per);
	cdp_net_forward_n(net, k);
	return host(cdp_net_output(net), (size_t)n * per);
}

static int same(const float *a, const float *b, size_t n)
{
	return a && b && memcmp(a, b, n * sizeof *a) == 0;
}

static int untouched(const float *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		if (a[i] != SENTINEL)
			return 0;
	return a != NULL;
}

static void test_model(const model *m, int prec)
{
	char *text = read_model(m->file), err[512];
	const char *pn = cdp_precision_name(prec);
	cdp_net whole, one, net;
	size_t nx = (size_t)(N + 1) * 3 * m->side * m->side, per, arena1;
	float *x = malloc(nx * sizeof *x), *ref = NULL, *got;
	cdp_rng r;

	be->set_precision(be, prec);
	if (!text || !x || build(&whole, m, text, N, 0, NULL, err, sizeof err) < 0) {
		CHECK(0, "%s: %s", m->name, text ? err : "no cfg");
		free(text);
		free(x);
		return;
	}
	cdp_rng_seed(&r, 11);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)cdp_rng_normal(&r);
	per = cdp_shape_numel(whole.layers[whole.out_layer].out);
	CHECK(whole.pass == N, "%s (%s): budget 0 gives a pass of %d, want the batch %d", m->name,
	      pn, whole.pass, N);
	ref = run(&whole, x, N, N, per);
	CHECK(ref && ref[0] != SENTINEL && ref[N * per - 1] != SENTINEL,
	      "%s (%s): the whole batch's logits were not written", m->name, pn);
	/* a backend that runs the batch whole runs all of it for forward_n */
	got = run(&whole, x, N, 3, per);
	CHECK(same(got, ref, N * per), "%s (%s): forward_n(3) on a whole-batch backend does not "
	      "run every sample", m->name, pn);
	free(got);

	/* a batch of one: its bytes are one sample's arena */
	if (build(&one, m, text, 1, 0, &whole, err, sizeof err) < 0) {
		CHECK(0, "%s: batch 1: %s", m->name, err);
		arena1 = 0;
	} else {
		arena1 = one.act_bytes;
		cdp_net_free(&one);
	}

	static const struct { size_t budget; const char *env; int pass; } cases[] = {
		{ 1, NULL, 1 }, { 0, NULL, 3 }, { 1, "2", 2 }, { SIZE_MAX, NULL, N },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		size_t b = cases[c].budget ? cases[c].budget : 3 * arena1 + 1;
		if (cases[c].env)
			setenv("CDP_INFER_PASS", cases[c].env, 1);
		if (build(&net, m, text, N, b, &whole, err, sizeof err) < 0) {
			CHECK(0, "%s (%s): case %zu: %s", m->name, pn, c, err);
			unsetenv("CDP_INFER_PASS");
			continue;
		}
		unsetenv("CDP_INFER_PASS");
		CHECK(net.pass == cases[c].pass, "%s (%s): case %zu: a pass of %d samples, want %d",
		      m->name, pn, c, net.pass, cases[c].pass);
		got = run(&net, x, N, N, per);
		CHECK(same(got, ref, N * per), "%s (%s): passes of %d: the logits differ from the "
		      "whole batch's", m->name, pn, net.pass);
		free(got);
		if (net.pass == 2)
			CHECK(net.act_bytes < whole.act_bytes, "%s (%s): passes of 2 take %zu activation "
			      "bytes, the whole batch %zu", m->name, pn, net.act_bytes, whole.act_bytes);
		/* only the first 3 run, in passes or in one */
		got = run(&net, x, N, 3, per);
		CHECK(same(got, ref, 3 * per) && untouched(got + 3 * per, 2 * per),
		      "%s (%s): forward_n(3) in passes of %d: not the first 3 samples' logits alone",
		      m->name, pn, net.pass);
		free(got);
		if (c == 2) {        /* the precision set again: a pass's workspace still */
			size_t ws = net.ws_bytes;
			CHECK(cdp_net_set_precision(&net, prec, err, sizeof err) == 0, "%s: %s", m->name,
			      err);
			CHECK(net.ws_bytes == ws, "%s (%s): cdp_net_set_precision grew a pass's "
			      "workspace, %zu -> %zu bytes", m->name, pn, ws, net.ws_bytes);
			got = run(&net, x, N, N, per);
			CHECK(same(got, ref, N * per), "%s (%s): after cdp_net_set_precision the logits "
			      "differ", m->name, pn);
			free(got);
		}
		if (c == 2) {        /* resized: laid out anew, in the 1-byte budget's passes */
			CHECK(cdp_net_resize(&net, N + 1, err, sizeof err) == 0, "%s: resize: %s",
			      m->name, err);
			got = run(&net, x, N + 1, N + 1, per);
			CHECK(net.pass == 1 && same(got, ref, N * per), "%s (%s): after a resize to %d "
			      "(pass %d) the logits differ", m->name, pn, N + 1, net.pass);
			free(got);
		}
		cdp_net_free(&net);
	}
	free(ref);
	free(x);
	cdp_net_free(&whole);
	free(text);
}

static void test_bad_env(const model *m)
{
	static const char *bad[] = { "0", "2x", "-1" };
	char *text = read_model(m->file), err[512];

	for (size_t i = 0; text && i < sizeof bad / sizeof *bad; i++) {
		cdp_net net;
		setenv("CDP_INFER_PASS", bad[i], 1);
		err[0] = 0;
		int rc = build(&net, m, text, N, 1, NULL, err, sizeof err);
		unsetenv("CDP_INFER_PASS");
		CHECK(rc < 0 && strstr(err, "CDP_INFER_PASS: ") && strstr(err, bad[i]),
		      "CDP_INFER_PASS='%s': build returned %d (%s)", bad[i], rc, err);
		if (rc == 0)
			cdp_net_free(&net);
	}
	free(text);
}

int main(void)
{
	static const model models[] = {
		{ "unet", "unet.cfg", { "width=8", "depth=3" }, 32 },
		{ "classifier", "classifier.cfg", { "width=8", "blocks=2" }, 16 },
	};

	unsetenv("CDP_INFER_PASS");
	if (!(be = bf16_backend("test_infer_pass")))
		return 99;
	cpu_budget = be->infer_pass_bytes;
	for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
		test_model(&models[i], CDP_PREC_FP32);
		test_model(&models[i], CDP_PREC_BF16);
	}
	test_bad_env(&models[0]);
	be->infer_pass_bytes = cpu_budget;
	be->destroy(be);
	return tap_done();
}
