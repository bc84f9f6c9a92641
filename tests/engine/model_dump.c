/* model_dump.c: builds a net from a model cfg and describes it as JSON, or
 * runs the steps that tests/parity/parity.py replays in PyTorch.
 *
 * usage: model_dump [-b N] [-D KEY=VALUE]... [-i C,H,W] [-p DIR] [-s SEED]
 *                   [-t THREADS] [--steps S] [--sgd-lr LR] [--adamw-lr LR]
 *                   [--adam-eps E] [--ignore-frac F] [--init CKPT]
 *                   [--save NAME[,NAME...]] [--precision P] CFG
 *
 * Defaults: batch 2, the cfg's input shape, seed 1, 1 thread, 2 steps, SGD
 * lr 0.1, AdamW lr 0.01 and eps 1e-8, 10% ignored labels (when the cfg sets
 * ignore=). -D KEY=VALUE overrides a [net] key (width=4, loss=bce+dice).
 * --precision fp32|bf16: the backend's precision (set_precision; bf16
 * needs a CPU with AVX512_BF16, or CDP_CPU_BF16_EMU=1), named in run.json:
 * parity.py --bf16 holds a bf16 run to PyTorch's autocast.
 * --init CKPT: after cdp_net_init, the tensors of checkpoint CKPT (read by
 * cdp_ckpt_read) taken by name and shape (cdp_ckpt_take, as cdp-train
 * --init takes them); stderr names each one not taken.
 *
 * Without -p: the expanded model on stdout (model_json below): per layer
 * its index, type, name, from indices (-1 = the net input), in/out shapes
 * (C,H,W per sample), hyper-parameters, and the offsets and PyTorch shapes
 * of its parameters and buffers in the net's blocks.
 *
 * With -p DIR (the model JSON still goes to stdout), everything through the
 * engine's own APIs (net.h, loss.h, optim.h), files raw little-endian:
 *   params0.f32 buffers0.f32   the blocks after cdp_net_init(seed)
 *   input.f32                  (N,C,H,W) standard normal
 *   labels.i32                 (N,OH*OW) of the head: class ids in [0,K)
 *                              (0/1 for the sigmoid losses), a fraction
 *                              --ignore-frac of them the [net] ignore value
 *   logits.f32 grads.f32 dx.f32 buffers1.f32
 *                              training-mode forward, the loss, backward
 *                              (grads of the mean loss, input gradient) and
 *                              the running statistics after that forward
 *   eval0.f32                  (with --init) an eval-mode forward of
 *                              input.f32 before any training forward
 *   eval0-NAME.f32             and the output of each layer NAME of
 *                              --save in that forward (an encoder's
 *                              stages, say)
 *   eval.f32                   then an eval-mode forward (running stats)
 *   sgd<k>.f32 adamw<k>.f32    params after k = 1..S steps of SGD (momentum
 *                              0.9, no nesterov, wd 1e-4) and of AdamW (wd
 *                              1e-2) from params0/buffers0, each step a
 *                              forward, loss, backward and cdp_optim_step on
 *                              the same batch
 *   run.json                   the loss values, step settings and dropout
 *                              seeds (net->step_seed is fixed for all
 *                              forwards, so each dropout layer i draws with
 *                              cdp_rng_derive(step_seed, i, 0))
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_rng.h"
#include "ckpt/checkpoint.h"
#include "layers.h"
#include "loss.h"
#include "optim.h"

#define MAX_OVERRIDES 32

typedef struct opts {
	const char *cfg_path, *dir, *init, *save;
	const char *ov[MAX_OVERRIDES];
	int nov, batch, threads, steps, prec;
	int in_c, in_h, in_w;
	uint64_t seed;
	double sgd_lr, adamw_lr, adam_eps, ignore_frac;
} opts;

static void usage(FILE *f)
{
	fprintf(f, "usage: model_dump [-b N] [-D KEY=VALUE]... [-i C,H,W] [-p DIR] [-s SEED]\n"
	           "                  [-t THREADS] [--steps S] [--sgd-lr LR] [--adamw-lr LR]\n"
	           "                  [--adam-eps E] [--ignore-frac F] [--init CKPT]\n"
	           "                  [--save NAME[,NAME...]] [--precision P] CFG\n");
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static const char *act_name(int act)
{
	return act == CDP_ACT_RELU ? "relu" : act == CDP_ACT_LEAKY ? "leaky" : "linear";
}

static void json_shape(FILE *f, cdp_shape s)
{
	fprintf(f, "[%d, %d, %d]", s.c, s.h, s.w);
}

/* One tensor of a block: name, offset (floats), PyTorch shape. */
static void json_tensor(FILE *f, int *first, const char *name, size_t off,
                        int nd, const size_t *shape)
{
	fprintf(f, "%s{\"name\": \"%s\", \"off\": %zu, \"shape\": [", *first ? "" : ", ", name, off);
	for (int i = 0; i < nd; i++)
		fprintf(f, "%s%zu", i ? ", " : "", shape[i]);
	fprintf(f, "]}");
	*first = 0;
}

static void json_layer_params(FILE *f, const cdp_layer *l)
{
	const char *t = l->ops->type;
	size_t c = (size_t)l->in[0].c, fo = (size_t)l->filters, k = (size_t)l->k;
	int first = 1;

	/* weights=: its tensors are those of the layer it uses */
	if (l->share) {
		fprintf(f, ", \"weights\": %d, \"params\": [], \"buffers\": []", l->share - 1);
		return;
	}
	fprintf(f, ", \"params\": [");
	if (strcmp(t, "conv") == 0) {
		size_t s[4] = { fo, c, k, k };
		json_tensor(f, &first, "weight", l->w_off, 4, s);
	} else if (strcmp(t, "deconv") == 0) {
		size_t s[4] = { c, fo, k, k };
		json_tensor(f, &first, "weight", l->w_off, 4, s);
	} else if (strcmp(t, "dense") == 0) {
		size_t s[2] = { fo, cdp_shape_numel(l->in[0]) };
		json_tensor(f, &first, "weight", l->w_off, 2, s);
	} else if (strcmp(t, "bn") == 0) {
		json_tensor(f, &first, "weight", l->w_off, 1, &l->w_len);
		json_tensor(f, &first, "bias", l->b_off, 1, &l->b_len);
	}
	if (l->b_len && strcmp(t, "bn") != 0)
		json_tensor(f, &first, "bias", l->b_off, 1, &l->b_len);
	fprintf(f, "], \"buffers\": [");
	first = 1;
	if (l->buf_len && strcmp(t, "bn") == 0) {    /* the only layer with buffers */
		size_t half = l->buf_len / 2;
		json_tensor(f, &first, "running_mean", l->buf_off, 1, &half);
		json_tensor(f, &first, "running_var", l->buf_off + half, 1, &half);
	}
	fprintf(f, "]");
}

static void json_layer(FILE *f, const cdp_layer *l)
{
	const char *t = l->ops->type;

	fprintf(f, "    {\"index\": %d, \"type\": \"%s\", \"name\": ", l->index, t);
	json_str(f, l->name);
	fprintf(f, ", \"line\": %d, \"from\": [", l->cfg_line);
	for (int j = 0; j < l->nfrom; j++)
		fprintf(f, "%s%d", j ? ", " : "", l->from[j]);
	fprintf(f, "], \"in\": [");
	for (int j = 0; j < l->nfrom; j++) {
		fprintf(f, "%s", j ? ", " : "");
		json_shape(f, l->in[j]);
	}
	fprintf(f, "], \"out\": ");
	json_shape(f, l->out);
	if (!strcmp(t, "conv") || !strcmp(t, "deconv"))
		fprintf(f, ", \"filters\": %d, \"size\": %d, \"stride\": %d, \"pad\": %d, "
		        "\"dilation\": %d, \"bias\": %d", l->filters, l->k, l->stride, l->pad,
		        l->dil, l->bias);
	else if (!strcmp(t, "dense"))
		fprintf(f, ", \"output\": %d, \"bias\": %d", l->filters, l->bias);
	else if (!strcmp(t, "bn"))
		fprintf(f, ", \"momentum\": %.9g, \"eps\": %.9g", (double)l->momentum, (double)l->eps);
	else if (!strcmp(t, "maxpool") || !strcmp(t, "avgpool"))
		fprintf(f, ", \"size\": %d, \"stride\": %d, \"pad\": %d", l->k, l->stride, l->pad);
	else if (!strcmp(t, "upsample"))
		fprintf(f, ", \"mode\": \"%s\", \"factor\": %d",
		        l->mode == CDP_UP_BILINEAR ? "bilinear" : "nearest", l->k);
	else if (!strcmp(t, "dropout"))
		fprintf(f, ", \"p\": %.9g", (double)l->p);
	else if (!strcmp(t, "slice"))
		fprintf(f, ", \"start\": %d, \"end\": %d", l->k, l->k + l->out.c);
	else if (!strcmp(t, "diff"))
		fprintf(f, ", \"abs\": %d", l->k);
	/* the fused activation of conv/deconv/bn/dense, or the layer's own */
	if (!strcmp(t, "conv") || !strcmp(t, "deconv") || !strcmp(t, "bn") ||
	    !strcmp(t, "dense") || !strcmp(t, "relu") || !strcmp(t, "leaky"))
		fprintf(f, ", \"activation\": \"%s\", \"slope\": %.9g",
		        !strcmp(t, "relu") ? "relu" : !strcmp(t, "leaky") ? "leaky" : act_name(l->act),
		        (double)l->slope);
	json_layer_params(f, l);
	fprintf(f, "}");
}

static void model_json(FILE *f, const cdp_net *net, const opts *o)
{
	fprintf(f, "{\n  \"cfg\": ");
	json_str(f, o->cfg_path);
	fprintf(f, ",\n  \"overrides\": [");
	for (int i = 0; i < o->nov; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_str(f, o->ov[i]);
	}
	fprintf(f, "],\n  \"batch\": %d, \"input\": ", net->n);
	json_shape(f, net->in);
	fprintf(f, ", \"classes\": %d, \"loss\": \"%s\", \"ignore\": %d,\n", net->classes,
	        net->loss, net->ignore);
	fprintf(f, "  \"nparams\": %zu, \"nbuffers\": %zu, \"out_layer\": %d, \"multi\": %s,\n"
	        "  \"layers\": [\n", net->nparams, net->nbuffers, net->out_layer,
	        net->multi ? "true" : "false");
	for (int i = 0; i < net->nlayers; i++) {
		json_layer(f, &net->layers[i]);
		fprintf(f, "%s\n", i + 1 < net->nlayers ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
}

/* ---- parity run ---- */

typedef struct run {
	cdp_net *net;
	cdp_loss loss;
	const opts *o;
	int32_t *labels;         /* device (N, HW) */
	size_t nlabels;
	float *host;             /* scratch for downloads, max(nparams, activations) */
} run;

/* Writes n floats (or int32s) from device memory p to DIR/name via a temp name. */
static int dump(run *r, const char *name, const void *p, size_t n)
{
	cdp_backend *be = r->net->be;
	char path[4096], tmp[4200];
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "%s/%s", r->o->dir, name);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	be->to_host(be, r->host, p, n * 4);
	if (!(f = fopen(tmp, "wb"))) {
		fprintf(stderr, "model_dump: cannot create '%s': %s\n", tmp, strerror(errno));
		return -1;
	}
	ok = fwrite(r->host, 4, n, f) == n;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path) != 0) {
		fprintf(stderr, "model_dump: cannot write '%s': %s\n", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

/* eval0-NAME.f32 of each layer NAME in --save, after a forward */
static int save_layers(run *r)
{
	const char *p = r->o->save;
	char name[CDP_LAYER_NAME + 16];

	while (p && *p) {
		size_t len = strcspn(p, ",");
		int i = 0;
		while (i < r->net->nlayers && (strlen(r->net->layers[i].name) != len ||
		                               strncmp(r->net->layers[i].name, p, len) != 0))
			i++;
		if (i == r->net->nlayers) {
			fprintf(stderr, "model_dump: --save: no layer '%.*s'\n", (int)len, p);
			return -1;
		}
		snprintf(name, sizeof name, "eval0-%s.f32", r->net->layers[i].name);
		if (dump(r, name, r->net->layers[i].y,
		         cdp_layer_out_count(&r->net->layers[i], r->net)) < 0)
			return -1;
		p += len + (p[len] == ',');
	}
	return 0;
}

/* forward, loss on the fixed labels, backward into the (zeroed) grads */
static void train_pass(run *r, cdp_loss_result *res)
{
	cdp_net *net = r->net;
	cdp_layer *out = &net->layers[net->out_layer];

	cdp_net_forward(net);
	cdp_loss_compute(&r->loss, net->n, out->out.h * out->out.w, out->y, r->labels, out->dy, res);
	cdp_net_backward(net, NULL, NULL);
}

static int optim_run(run *r, int type, const char *prefix, const float *p0, const float *b0,
                     double *losses)
{
	cdp_net *net = r->net;
	cdp_backend *be = net->be;
	cdp_optim_cfg c;
	cdp_optim opt;
	cdp_loss_result res;
	char err[256], name[64];
	int rc = 0;

	cdp_optim_defaults(&c);
	c.type = type;
	if (type == CDP_OPT_SGD) {
		c.lr = (float)r->o->sgd_lr;
		c.momentum = 0.9f;
		c.nesterov = 0;
		c.weight_decay = 1e-4f;
	} else {
		c.lr = (float)r->o->adamw_lr;
		c.beta1 = 0.9f;
		c.beta2 = 0.999f;
		c.eps = (float)r->o->adam_eps;
		c.weight_decay = 1e-2f;
	}
	if (cdp_optim_init(&opt, be, &c, net->nparams, err, sizeof err) < 0) {
		fprintf(stderr, "model_dump: %s\n", err);
		return -1;
	}
	be->to_device(be, net->params, p0, net->nparams * 4);
	be->to_device(be, net->buffers, b0, net->nbuffers * 4);
	cdp_net_zero_grad(net);
	for (int k = 1; k <= r->o->steps && rc == 0; k++) {
		train_pass(r, &res);
		losses[k - 1] = res.loss;
		if (!cdp_optim_micro_done(&opt) || cdp_optim_step(&opt, net->params, net->grads) != 0) {
			fprintf(stderr, "model_dump: %s step %d failed (gradient norm %g)\n", prefix, k,
			        opt.last_norm);
			rc = -1;
			break;
		}
		snprintf(name, sizeof name, "%s%d.f32", prefix, k);
		rc = dump(r, name, net->params, net->nparams);
	}
	cdp_optim_free(&opt);
	return rc;
}

static void json_doubles(FILE *f, const double *v, int n)
{
	fprintf(f, "[");
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%.17g", i ? ", " : "", v[i]);
	fprintf(f, "]");
}

static int write_run_json(run *r, const cdp_loss_result *res, const double *sgd_l,
                          const double *adam_l)
{
	cdp_net *net = r->net;
	const opts *o = r->o;
	char path[4096], tmp[4200];
	FILE *f;
	int ok, first = 1;

	snprintf(path, sizeof path, "%s/run.json", o->dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (!(f = fopen(tmp, "w"))) {
		fprintf(stderr, "model_dump: cannot create '%s': %s\n", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "{\n  \"seed\": %llu, \"step_seed\": %llu, \"steps\": %d, \"precision\": \"%s\",\n",
	        (unsigned long long)o->seed, (unsigned long long)net->step_seed, o->steps,
	        cdp_precision_name(o->prec));
	fprintf(f, "  \"loss\": %.17g, \"loss_sum\": %.17g, \"loss_count\": %.17g, \"dice\": %.17g,\n",
	        res->loss, res->sum, res->count, res->dice);
	fprintf(f, "  \"sgd\": {\"lr\": %.9g, \"momentum\": 0.9, \"nesterov\": 0, "
	        "\"weight_decay\": %.9g, \"losses\": ", (double)(float)o->sgd_lr, (double)1e-4f);
	json_doubles(f, sgd_l, o->steps);
	fprintf(f, "},\n  \"adamw\": {\"lr\": %.9g, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": %.9g, "
	        "\"weight_decay\": %.9g, \"losses\": ", (double)(float)o->adamw_lr,
	        (double)(float)o->adam_eps, (double)1e-2f);
	json_doubles(f, adam_l, o->steps);
	fprintf(f, "},\n  \"dice_smooth\": %.9g, \"dropout_seeds\": {", (double)r->loss.smooth);
	for (int i = 0; i < net->nlayers; i++)
		if (strcmp(net->layers[i].ops->type, "dropout") == 0) {
			fprintf(f, "%s\"%d\": %llu", first ? "" : ", ", i,
			        (unsigned long long)cdp_rng_derive(net->step_seed, (uint64_t)i, 0));
			first = 0;
		}
	fprintf(f, "}\n}\n");
	ok = !ferror(f);
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path) != 0) {
		fprintf(stderr, "model_dump: cannot write '%s': %s\n", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

/* Random input and labels, uploaded; labels also written. */
static int make_batch(run *r)
{
	cdp_net *net = r->net;
	cdp_backend *be = net->be;
	cdp_layer *out = &net->layers[net->out_layer];
	size_t nx = (size_t)net->n * cdp_shape_numel(net->in);
	int32_t *lab = (int32_t *)r->host;
	cdp_rng g;
	size_t bad;

	cdp_rng_seed(&g, cdp_rng_derive(r->o->seed, 2, 0));
	for (size_t i = 0; i < nx; i++)
		r->host[i] = (float)cdp_rng_normal(&g);
	be->to_device(be, net->x, r->host, nx * 4);
	if (dump(r, "input.f32", net->x, nx) < 0)
		return -1;
	r->nlabels = (size_t)net->n * out->out.h * out->out.w;
	for (size_t i = 0; i < r->nlabels; i++) {
		if (net->ignore >= 0 && cdp_rng_double(&g) < r->o->ignore_frac)
			lab[i] = net->ignore;
		else
			lab[i] = (int32_t)cdp_rng_below(&g, (uint64_t)r->loss.classes);
	}
	if (cdp_loss_check_labels(&r->loss, lab, r->nlabels, &bad) < 0) {
		fprintf(stderr, "model_dump: generated label %zu is out of range\n", bad);
		return -1;
	}
	if (!(r->labels = be->alloc(be, r->nlabels * 4)))
		return -1;
	be->to_device(be, r->labels, lab, r->nlabels * 4);
	return dump(r, "labels.i32", r->labels, r->nlabels);
}

static int parity(cdp_net *net, const opts *o)
{
	cdp_backend *be = net->be;
	cdp_layer *out = &net->layers[net->out_layer];
	size_t nout = cdp_layer_out_count(out, net), hmax = net->nparams;
	size_t nx = (size_t)net->n * cdp_shape_numel(net->in);
	float *p0 = NULL, *b0 = NULL;
	double *sgd_l = calloc((size_t)o->steps, sizeof(double));
	double *adam_l = calloc((size_t)o->steps, sizeof(double));
	cdp_loss_result res;
	cdp_cfg cfg;
	run r = { .net = net, .o = o };
	char err[512];
	int rc = -1, cfg_ok = 0;

	if (nout > hmax) hmax = nout;
	if (nx > hmax) hmax = nx;
	for (int i = 0; i < net->nlayers; i++)   /* --save's layers */
		if (cdp_layer_out_count(&net->layers[i], net) > hmax)
			hmax = cdp_layer_out_count(&net->layers[i], net);
	if (net->nbuffers > hmax) hmax = net->nbuffers;
	r.host = malloc(hmax * 4 + 4);
	p0 = malloc(net->nparams * 4 + 4);
	b0 = malloc(net->nbuffers * 4 + 4);
	if (!r.host || !p0 || !b0 || !sgd_l || !adam_l) {
		fprintf(stderr, "model_dump: out of memory\n");
		goto out;
	}
	/* the loss from the same [net] section the trainer reads */
	if (cdp_cfg_parse(net->cfg_text, o->cfg_path, o->ov, o->nov, &cfg, err, sizeof err) < 0) {
		fprintf(stderr, "model_dump: %s\n", err);
		goto out;
	}
	cfg_ok = 1;
	if (cdp_loss_init_cfg(&r.loss, be, &cfg, &cfg.s[0], net->classes, err, sizeof err) < 0) {
		fprintf(stderr, "model_dump: %s\n", err);
		goto out;
	}
	net->train = 1;
	net->input_grad = 1;
	net->step_seed = cdp_rng_derive(o->seed, 3, 0);
	be->to_host(be, p0, net->params, net->nparams * 4);
	be->to_host(be, b0, net->buffers, net->nbuffers * 4);
	if (dump(&r, "params0.f32", net->params, net->nparams) < 0 ||
	    dump(&r, "buffers0.f32", net->buffers, net->nbuffers) < 0 || make_batch(&r) < 0)
		goto out;
	if (o->init) {
		net->train = 0;
		cdp_net_forward(net);
		net->train = 1;
		if (dump(&r, "eval0.f32", out->y, nout) < 0 || save_layers(&r) < 0)
			goto out;
	}
	cdp_net_zero_grad(net);
	train_pass(&r, &res);
	if (dump(&r, "logits.f32", out->y, nout) < 0 ||
	    dump(&r, "grads.f32", net->grads, net->nparams) < 0 ||
	    dump(&r, "dx.f32", net->dx, nx) < 0 ||
	    dump(&r, "buffers1.f32", net->buffers, net->nbuffers) < 0)
		goto out;
	net->train = 0;
	cdp_net_forward(net);
	net->train = 1;
	if (dump(&r, "eval.f32", out->y, nout) < 0 ||
	    optim_run(&r, CDP_OPT_SGD, "sgd", p0, b0, sgd_l) < 0 ||
	    optim_run(&r, CDP_OPT_ADAMW, "adamw", p0, b0, adam_l) < 0 ||
	    write_run_json(&r, &res, sgd_l, adam_l) < 0)
		goto out;
	rc = 0;
out:
	if (r.loss.be)
		cdp_loss_free(&r.loss);
	if (cfg_ok)
		cdp_cfg_free(&cfg);
	if (r.labels)
		be->free(be, r.labels);
	free(r.host);
	free(p0);
	free(b0);
	free(sgd_l);
	free(adam_l);
	return rc;
}

/* ---- main ---- */

static void not_taken(void *ctx, const char *name, const char *why)
{
	if (why)
		fprintf(stderr, "model_dump: %s: not in '%s'\n", name, (const char *)ctx);
}

/* --init: the checkpoint's tensors by name and shape */
static int init_from(cdp_net *net, const char *path)
{
	cdp_ckpt ck;
	int rc = cdp_ckpt_read(path, &ck);

	if (rc != 0) {
		fprintf(stderr, "model_dump: cannot read '%s': %s\n", path, cdp_strerror(rc));
		return -1;
	}
	rc = cdp_ckpt_take(&ck, net, not_taken, (void *)path, NULL, NULL);
	cdp_ckpt_free(&ck);
	return rc == 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv, opts *o)
{
	enum { O_STEPS = 256, O_SGD_LR, O_ADAMW_LR, O_ADAM_EPS, O_IGNORE_FRAC, O_INIT, O_SAVE,
	       O_PRECISION };
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "define", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "input", required_argument, NULL, 'i' },
		{ "parity", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "steps", required_argument, NULL, O_STEPS },
		{ "sgd-lr", required_argument, NULL, O_SGD_LR },
		{ "adamw-lr", required_argument, NULL, O_ADAMW_LR },
		{ "adam-eps", required_argument, NULL, O_ADAM_EPS },
		{ "ignore-frac", required_argument, NULL, O_IGNORE_FRAC },
		{ "init", required_argument, NULL, O_INIT },
		{ "save", required_argument, NULL, O_SAVE },
		{ "precision", required_argument, NULL, O_PRECISION },
		{ NULL, 0, NULL, 0 },
	};
	int ch, shape[3];
	size_t ns;

	*o = (opts){ .prec = CDP_PREC_FP32, .batch = 2, .threads = 1, .steps = 2, .seed = 1,
	             .sgd_lr = 0.1, .adamw_lr = 0.01, .adam_eps = 1e-8, .ignore_frac = 0.1 };
	while ((ch = getopt_long(argc, argv, "b:D:hi:p:s:t:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			if (cdp_parse_int(optarg, 1, 1 << 16, &o->batch) != 0)
				goto bad;
			break;
		case 'D':
			if (o->nov == MAX_OVERRIDES || !strchr(optarg, '='))
				goto bad;
			o->ov[o->nov++] = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'i':
			if (cdp_parse_int_list(optarg, 1, 1 << 16, shape, 3, &ns) != 0 || ns != 3)
				goto bad;
			o->in_c = shape[0], o->in_h = shape[1], o->in_w = shape[2];
			break;
		case 'p':
			o->dir = optarg;
			break;
		case 's':
			if (cdp_parse_u64(optarg, 0, UINT64_MAX, &o->seed) != 0)
				goto bad;
			break;
		case 't':
			if (cdp_parse_int(optarg, 1, 256, &o->threads) != 0)
				goto bad;
			break;
		case O_STEPS:
			if (cdp_parse_int(optarg, 1, 100, &o->steps) != 0)
				goto bad;
			break;
		case O_SGD_LR:
		case O_ADAMW_LR:
		case O_ADAM_EPS:
			if (cdp_parse_double(optarg, 0, 10, ch == O_SGD_LR ? &o->sgd_lr :
			                     ch == O_ADAMW_LR ? &o->adamw_lr : &o->adam_eps) != 0)
				goto bad;
			break;
		case O_INIT:
			o->init = optarg;
			break;
		case O_SAVE:
			o->save = optarg;
			break;
		case O_PRECISION:
			if ((o->prec = cdp_precision_parse(optarg)) < 0)
				goto bad;
			break;
		case O_IGNORE_FRAC:
			if (cdp_parse_double(optarg, 0, 1, &o->ignore_frac) != 0)
				goto bad;
			break;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return -1;
	}
	o->cfg_path = argv[optind];
	return 0;
bad:
	fprintf(stderr, "model_dump: bad value '%s' for -%c\n", optarg, ch < 256 ? ch : '-');
	return -1;
}

int main(int argc, char **argv)
{
	opts o;
	cdp_net net;
	cdp_backend *be = NULL;
	char *text = NULL, err[512];
	int rc = 1, built = 0;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (cdp_cfg_read(o.cfg_path, &text, err, sizeof err) < 0) {
		fprintf(stderr, "model_dump: %s\n", err);
		return 1;
	}
	if (!(be = cdp_backend_cpu(o.threads))) {
		fprintf(stderr, "model_dump: cannot start the cpu backend\n");
		goto out;
	}
	if (be->set_precision(be, o.prec) != 0) {
		fprintf(stderr, "model_dump: the %s backend has no %s\n", be->name,
		        cdp_precision_name(o.prec));
		goto out;
	}
	if (cdp_net_build(&net, be, text, o.cfg_path, o.ov, o.nov, o.in_c, o.in_h, o.in_w,
	                  o.batch, err, sizeof err) < 0) {
		fprintf(stderr, "model_dump: %s\n", err);
		goto out;
	}
	built = 1;
	cdp_net_init(&net, o.seed);
	if (o.init && init_from(&net, o.init) < 0)
		goto out;
	model_json(stdout, &net, &o);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "model_dump: cannot write the model: %s\n", strerror(errno));
		goto out;
	}
	if (o.dir && parity(&net, &o) < 0)
		goto out;
	rc = 0;
out:
	if (built)
		cdp_net_free(&net);
	if (be)
		be->destroy(be);
	free(text);
	return rc;
}
