/* test_model.c: whole models on the CUDA backend against the CPU backend
 * (gpu_harness.h): the U-Net of share/cdpool/models/unet.cfg at width 8,
 * depth 2 (batchnorm, max pool, deconv, concat) and the classifier of
 * classifier.cfg at width 8, 2 blocks (batchnorm, gap, dropout, dense),
 * deeplabv3plus-resnet18.cfg (dilated convolutions, ASPP with its
 * broadcast image pooling, x4 bilinear upsampling) and fpn-resnet18.cfg
 * (nearest and bilinear upsampling, a 4-way add) at 32x32, batch 4,
 * built on both sides from the same cfg and initialised alike. Compared:
 * the parameters after init (bitwise), the training-mode forward output
 * and batchnorm running statistics, the loss, every parameter tensor's
 * gradient, the update of one SGD step (momentum, nesterov, weight decay,
 * clipping by norm) and of one AdamW step from those gradients, the
 * eval-mode forward, and on CUDA the forward in bf16 and fp16.
 *
 * Tolerances. Per op the two sides agree to ~1e-6 (test_ops); here ~20
 * ops are chained forward and again backward, and batchnorm's backward
 * divides by each channel's batch std, so the differences add up: with 1
 * and 2 CPU threads (the selfcheck) they reach ~1e-5. fp32 results must
 * agree to 1e-3 (floor 1e-2 of each tensor's largest value): a factor 100
 * above that, far below the order-1 error of any wrong op; the ResNet-18
 * nets to 5e-2 (T_DEEP, below, says why). The loss, a mean
 * over all pixels, to 1e-4. Updates are compared as w_after - w_before,
 * less two ulps of w for the rounding of w_after. AdamW's first step is -lr (wd w + g/(|g| +
 * eps)), i.e. -lr sign(g) where |g| >> eps: an element whose gradient is
 * within the tolerance of zero may take the other sign on the other side,
 * so those (gradients below 1e-3 of their tensor's largest, or of
 * different sign; not a gradient 0 on both sides, as a dilated tap that
 * only meets padding has) only have to stay within 2 lr, and may be at
 * most 2% of all (4% for the ResNet-18 nets, whose deep stacks of
 * batchnorm over a few values at 32x32 give heavier-tailed gradients:
 * ~2.1% there); the rest agree to 1e-3. bf16/fp16 round every conv and GEMM input:
 * test_ops bounds one layer's error by 8u of its largest value; chained
 * with batchnorm in between (which re-normalises, so errors do not grow
 * geometrically) the logits must agree to 0.1 (bf16) and 0.02 (fp16) of
 * their largest value and the loss to 5e-2 and 1e-2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfg/cfg.h"
#include "gpu_harness.h"
#include "loss.h"
#include "net.h"
#include "optim.h"

#define T_MODEL 1e-3
#define T_DEEP  5e-2
#define T_LOSS  1e-4

typedef struct model {
	const char *name, *file;
	const char *ov[3];
	int nov, c, h, w, n;
	int near0;               /* AdamW: percent of elements that may be near g=0 */
	double tol;              /* fp32 results: T_MODEL, or T_DEEP (below) */
} model;

/* T_DEEP: the ResNet-18 nets are ill-conditioned in float32 whoever
 * computes them. PyTorch's own float32 against its float64 on the same
 * architectures (4x3x32x32, train mode, random weights; the measure here)
 * differs by 8.6e-4 in the logits and up to 3.5e-3 (DeepLabv3+) and 6.4e-3
 * (FPN) in the gradients, at 64x64 no less; CUDA against the CPU, on an
 * H200: up to 2.5e-3 and 1.8e-2 (the loss to 4e-7). A mistake in an op
 * gives errors of order 1, and test_ops checks each op to 1e-4. */
static const model models[] = {
	{ "unet", "unet.cfg", { "width=8", "depth=2" }, 2, 3, 32, 32, 4, 2, T_MODEL },
	{ "classifier", "classifier.cfg", { "width=8", "blocks=2" }, 2, 3, 32, 32, 16, 2, T_MODEL },
	{ "deeplabv3plus", "deeplabv3plus-resnet18.cfg", { NULL }, 0, 3, 32, 32, 4, 4, T_DEEP },
	{ "fpn", "fpn-resnet18.cfg", { NULL }, 0, 3, 32, 32, 4, 4, T_DEEP },
};

static float *dl(cdp_net *net, const float *p, size_t n)
{
	float *h = malloc(n * sizeof *h + 4);
	net->be->sync(net->be);
	net->be->to_host(net->be, h, p, n * sizeof *h);
	return h;
}

/* Both nets' blocks at the same offset: side 1 against side 0. */
static double cmp_block(const char *what, cdp_net *net, size_t which_off, int grads, size_t n,
                        double tol, double floor_frac)
{
	float *a[2];
	for (int s = 0; s < 2; s++)
		a[s] = dl(&net[s], (grads ? net[s].grads : net[s].params) + which_off, n);
	double e = gh_cmp_host(what, a[GH_DEV], a[GH_REF], n, tol, floor_frac);
	free(a[0]);
	free(a[1]);
	return e;
}

/* Every parameter tensor's gradient, named layer.weight / layer.bias. */
static void cmp_grads(const model *m, cdp_net *net)
{
	char what[128];
	for (int i = 0; i < net[0].nlayers; i++) {
		const cdp_layer *l = &net[0].layers[i];
		if (l->w_len) {
			snprintf(what, sizeof what, "%s grad %s.weight (%zu)", m->name, l->name, l->w_len);
			cmp_block(what, net, l->w_off, 1, l->w_len, m->tol, GH_FLOOR);
		}
		if (l->b_len) {
			snprintf(what, sizeof what, "%s grad %s.bias (%zu)", m->name, l->name, l->b_len);
			cmp_block(what, net, l->b_off, 1, l->b_len, m->tol, GH_FLOOR);
		}
	}
}

/* The error of side 1's update w - w0 against side 0's at element i, of a
 * tensor whose largest reference update is dmax. Each side reads its
 * update back as a difference of floats, so each carries the rounding of
 * its w (half an ulp; a fused multiply-add on one side moves it by one):
 * two ulps of w are forgiven before the relative error is taken. */
static double upd_err(const float *const w[2], const float *w0, size_t i, double dmax)
{
	double dr = (double)w[GH_REF][i] - w0[i], dd = (double)w[GH_DEV][i] - w0[i];
	double e = fabs(dd - dr) - 2 * ldexp(fabs(w0[i]), -23);

	return e > 0 ? e / fmax(fabs(dr), GH_FLOOR * dmax) : 0.0;
}

/* Compares the updates tensor by tensor (as upd_err). For AdamW (g set)
 * the elements whose gradient is near 0 (but not 0 on both sides) or of
 * another sign on the other side are counted apart, as the header comment
 * says. */
static void cmp_update(const model *m, cdp_net *net, const char *opt, float *const g[2],
                       const float *w0, float lr)
{
	size_t n = net[0].nparams, undecided = 0;
	float *w[2];
	double worst = 0, worst_u = 0;
	char what[128];

	for (int s = 0; s < 2; s++)
		w[s] = dl(&net[s], net[s].params, n);
	for (int li = 0; li < net[0].nlayers; li++) {
		const cdp_layer *l = &net[0].layers[li];
		size_t off[2] = { l->w_off, l->b_off }, len[2] = { l->w_len, l->b_len };
		for (int t = 0; t < 2; t++) {
			double gmax = 0, dmax = 0;
			for (size_t i = off[t]; i < off[t] + len[t]; i++) {
				if (g)
					gmax = fmax(gmax, fabs(g[GH_REF][i]));
				dmax = fmax(dmax, fabs((double)w[GH_REF][i] - w0[i]));
			}
			for (size_t i = off[t]; i < off[t] + len[t]; i++) {
				double e = upd_err((const float *const *)w, w0, i, dmax);
				/* a gradient 0 on both sides (a dilated tap that only
				 * meets padding) leaves weight decay alone: decided */
				if (g && (g[GH_REF][i] != 0.0f || g[GH_DEV][i] != 0.0f) &&
				    (fabs(g[GH_REF][i]) < 1e-3 * gmax ||
				     (g[GH_REF][i] > 0) != (g[GH_DEV][i] > 0))) {
					undecided++;
					worst_u = fmax(worst_u, fabs(((double)w[GH_DEV][i] - w[GH_REF][i]) / lr));
					continue;
				}
				worst = fmax(worst, e);
			}
		}
	}
	snprintf(what, sizeof what, "%s %s update (%zu params%s)", m->name, opt, n,
	         g ? ", |g| clear of 0" : "");
	printf("%-4s %-60s %9.2e <= %.0e\n", worst <= m->tol ? "ok" : "FAIL", what, worst, m->tol);
	GCHECK(worst <= m->tol, "[%s] %s: error %.3g", gh_peer, what, worst);
	if (g) {
		snprintf(what, sizeof what, "%s %s update near g=0: %zu of %zu, within 2 lr", m->name,
		         opt, undecided, n);
		int ok = undecided <= n / 100 * m->near0 && worst_u <= 2.0 + 1e-3;
		printf("%-4s %-60s %9.2e <= 2\n", ok ? "ok" : "FAIL", what, worst_u);
		GCHECK(ok, "[%s] %s: %.3g lr", gh_peer, what, worst_u);
	}
	free(w[0]);
	free(w[1]);
}

/* Runs one optimizer step of type `type` on both sides from the gradients
 * g[s] and parameters w0, and compares the update. */
static void step_and_compare(const model *m, cdp_net *net, int type, float *const g[2],
                             const float *w0)
{
	size_t n = net[0].nparams;
	cdp_optim_cfg oc;
	cdp_optim o[2];
	char err[256], what[128];
	int have[2] = { 0, 0 };

	cdp_optim_defaults(&oc);
	oc.type = type;
	oc.lr = type == CDP_OPT_SGD ? 0.05f : 1e-3f;
	oc.momentum = 0.9f;
	oc.nesterov = 1;
	oc.weight_decay = type == CDP_OPT_SGD ? 5e-4f : 0.01f;
	oc.clip_norm = 1.0f;    /* the norm (sumsq) is part of the step */
	for (int s = 0; s < 2; s++) {
		net[s].be->to_device(net[s].be, net[s].params, w0, n * 4);
		net[s].be->to_device(net[s].be, net[s].grads, g[s], n * 4);
		if (cdp_optim_init(&o[s], net[s].be, &oc, n, err, sizeof err) < 0) {
			GCHECK(0, "%s: optimizer: %s", m->name, err);
			goto out;
		}
		have[s] = 1;
		GCHECK(cdp_optim_micro_done(&o[s]) == 1, "one micro-batch makes a step");
		GCHECK(cdp_optim_step(&o[s], net[s].params, net[s].grads) == 0, "%s: %s step refused",
		       m->name, cdp_optim_type_name(type));
	}
	snprintf(what, sizeof what, "%s %s grad norm", m->name, cdp_optim_type_name(type));
	gh_cmp_scalar(what, o[GH_DEV].last_norm, o[GH_REF].last_norm, m->tol, 1e-30);
	cmp_update(m, net, cdp_optim_type_name(type), type == CDP_OPT_ADAMW ? g : NULL, w0, oc.lr);
out:
	for (int s = 0; s < 2; s++)
		if (have[s])
			cdp_optim_free(&o[s]);
}

static void run_model(const model *m, const char *srcdir)
{
	char path[1024], err[512], what[128];
	char *text;
	cdp_net net[2];
	cdp_cfg cfg[2];
	cdp_loss loss[2];
	cdp_loss_result res[2];
	int32_t *lab[2] = { NULL, NULL };
	int built = 0;

	snprintf(path, sizeof path, "%s/share/cdpool/models/%s", srcdir, m->file);
	if (cdp_cfg_read(path, &text, err, sizeof err) < 0) {
		GCHECK(0, "%s", err);
		return;
	}
	GH_BOTH(s, be) {
		if (cdp_net_build(&net[s], be, text, path, m->ov, m->nov, m->c, m->h, m->w, m->n, err,
		                  sizeof err) < 0) {
			GCHECK(0, "%s on %s: %s", m->name, be->name, err);
			goto out;
		}
		if (cdp_cfg_parse(text, path, m->ov, m->nov, &cfg[s], err, sizeof err) < 0) {
			cdp_net_free(&net[s]);
			GCHECK(0, "%s: %s", m->name, err);
			goto out;
		}
		if (cdp_loss_init_cfg(&loss[s], be, &cfg[s], &cfg[s].s[0], net[s].classes, err,
		                      sizeof err) < 0) {
			cdp_net_free(&net[s]);
			cdp_cfg_free(&cfg[s]);
			GCHECK(0, "%s: %s", m->name, err);
			goto out;
		}
		built++;
		cdp_net_init(&net[s], 7);
	}
	size_t np = net[0].nparams, nb = net[0].nbuffers;
	const cdp_layer *o = &net[0].layers[net[0].out_layer];
	int hw = o->out.h * o->out.w;
	size_t nout = (size_t)m->n * o->out.c * hw, nx = (size_t)m->n * m->c * m->h * m->w;
	printf("# %s: %zu parameters, %zu buffer floats, input (%d,%d,%d,%d), output (%d,%d,%d)\n",
	       m->name, np, nb, m->n, m->c, m->h, m->w, o->out.c, o->out.h, o->out.w);
	snprintf(what, sizeof what, "%s params after init", m->name);
	cmp_block(what, net, 0, 0, np, 0, GH_FLOOR);

	/* input N(0,1), labels uniform over the classes with some ignored */
	float *x = malloc(nx * sizeof *x);
	int32_t *lh = malloc((size_t)m->n * hw * sizeof *lh);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)cdp_rng_normal(&gh_rng);
	for (size_t i = 0; i < (size_t)m->n * hw; i++)
		lh[i] = (int32_t)cdp_rng_below(&gh_rng, (uint64_t)loss[0].classes);
	GH_BOTH(s, be) {
		be->to_device(be, net[s].x, x, nx * sizeof *x);
		lab[s] = be->alloc(be, (size_t)m->n * hw * sizeof *lh);
		be->to_device(be, lab[s], lh, (size_t)m->n * hw * sizeof *lh);
		net[s].train = 1;
		net[s].step_seed = 12345;
		cdp_net_forward(&net[s]);
		cdp_loss_compute(&loss[s], m->n, hw, net[s].layers[net[s].out_layer].y, lab[s],
		                 net[s].layers[net[s].out_layer].dy, &res[s]);
	}
	free(x);
	free(lh);
	float *y[2];
	for (int s = 0; s < 2; s++)
		y[s] = dl(&net[s], cdp_net_output(&net[s]), nout);
	snprintf(what, sizeof what, "%s forward logits (train mode)", m->name);
	gh_cmp_host(what, y[GH_DEV], y[GH_REF], nout, m->tol, GH_FLOOR);
	if (nb) {
		float *b[2];
		for (int s = 0; s < 2; s++)
			b[s] = dl(&net[s], net[s].buffers, nb);
		snprintf(what, sizeof what, "%s batchnorm running mean and var", m->name);
		gh_cmp_host(what, b[GH_DEV], b[GH_REF], nb, m->tol, GH_FLOOR);
		free(b[0]);
		free(b[1]);
	}
	snprintf(what, sizeof what, "%s loss (%s)", m->name, cdp_loss_name(loss[0].kind));
	gh_cmp_scalar(what, res[GH_DEV].loss, res[GH_REF].loss, T_LOSS, 1e-30);

	GH_BOTH(s, be) {
		cdp_net_zero_grad(&net[s]);
		cdp_net_backward(&net[s], NULL, NULL);
	}
	cmp_grads(m, net);

	float *g[2], *w0 = dl(&net[0], net[0].params, np);
	for (int s = 0; s < 2; s++)
		g[s] = dl(&net[s], net[s].grads, np);
	step_and_compare(m, net, CDP_OPT_SGD, g, w0);
	step_and_compare(m, net, CDP_OPT_ADAMW, g, w0);

	/* eval mode with the running statistics of the forward above, from w0 */
	float *yb = NULL;
	GH_BOTH(s, be) {
		be->to_device(be, net[s].params, w0, np * 4);
		net[s].train = 0;
		cdp_net_forward(&net[s]);
		cdp_loss_compute(&loss[s], m->n, hw, net[s].layers[net[s].out_layer].y, lab[s],
		                 net[s].layers[net[s].out_layer].dy, &res[s]);
	}
	for (int s = 0; s < 2; s++) {
		free(y[s]);
		y[s] = dl(&net[s], cdp_net_output(&net[s]), nout);
	}
	snprintf(what, sizeof what, "%s forward logits (eval mode)", m->name);
	gh_cmp_host(what, y[GH_DEV], y[GH_REF], nout, m->tol, GH_FLOOR);

	/* reduced precision on the device side: the same eval forward */
	static const int precs[] = { CDP_PREC_BF16, CDP_PREC_FP16 };
	static const double tol_y[] = { 0.1, 0.02 }, tol_l[] = { 5e-2, 1e-2 };
	cdp_loss_result rb;
	for (int p = 0; p < 2; p++) {
		snprintf(what, sizeof what, "%s forward", m->name);
		if (gh_precision(precs[p], what) != 0)
			continue;
		/* the workspace was sized in fp32: grown for the staging of half */
		if (cdp_net_set_precision(&net[GH_DEV], precs[p], err, sizeof err) < 0) {
			GCHECK(0, "%s: %s", m->name, err);
			gh_precision(CDP_PREC_FP32, "fp32");
			continue;
		}
		cdp_net_forward(&net[GH_DEV]);
		cdp_loss_compute(&loss[GH_DEV], m->n, hw, net[GH_DEV].layers[net[GH_DEV].out_layer].y,
		                 lab[GH_DEV], net[GH_DEV].layers[net[GH_DEV].out_layer].dy, &rb);
		snprintf(what, sizeof what, "%s loss (eval) %s", m->name, gh_prec_name(precs[p]));
		gh_cmp_scalar(what, rb.loss, res[GH_REF].loss, tol_l[p], 1e-30);
		yb = dl(&net[GH_DEV], cdp_net_output(&net[GH_DEV]), nout);
		snprintf(what, sizeof what, "%s forward logits (eval) %s, of max", m->name,
		         gh_prec_name(precs[p]));
		gh_cmp_host(what, yb, y[GH_REF], nout, tol_y[p], 1.0);
		int same = !memcmp(yb, y[GH_DEV], nout * 4);
		GCHECK(!same, "%s: the %s forward equals the fp32 one bit for bit: precision not in effect",
		       m->name, gh_prec_name(precs[p]));
		free(yb);
		gh_precision(CDP_PREC_FP32, "fp32");
	}
	for (int s = 0; s < 2; s++) {
		free(y[s]);
		free(g[s]);
	}
	free(w0);
out:
	for (int s = 0; s < built; s++) {
		if (lab[s])
			net[s].be->free(net[s].be, lab[s]);
		cdp_loss_free(&loss[s]);
		cdp_cfg_free(&cfg[s]);
		cdp_net_free(&net[s]);
	}
	free(text);
}

int main(void)
{
	const char *srcdir = getenv("CDP_SRCDIR");
	int rc;

	if (!srcdir || !*srcdir)
		srcdir = CDP_SRCDIR;
	if ((rc = gh_open("test_model", 2)) != 0)
		return rc;
	for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
		run_model(&models[i], srcdir);
	return gh_close();
}
