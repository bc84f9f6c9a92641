/* net.c: building a net from a model cfg, and running it (net.h); where
 * the tensors of its batch live is net_plan.c's.
 *
 * The [net] section (the first) gives the input and the head:
 *   channels=C     input bands; the caller's in_c > 0 overrides it
 *   in_h=H in_w=W  input size; the caller's in_h/in_w > 0 override them.
 *                  (Not height/width: `width` is the model-width variable
 *                  of the cfg families, e.g. ${width} filters.)
 *   classes=K      label classes; default: the head's channels for loss=ce,
 *                  2 for a sigmoid loss; for a regression loss the targets
 *                  (default: the head's channels)
 *   loss=TERM[+TERM]  (default ce; loss.h) softmax losses need a head of K
 *                  channels, the sigmoid (binary) forms a head of 1 channel
 *                  and K = 2, the regression losses (mse, l1, huber) a head
 *                  of K channels, one per target
 *   ignore=V       label value left out of the loss (default -1: none)
 * Other [net] keys are training options for cdp-train; the parser refuses
 * a key no part of the engine reads (cfg/netkeys.h), so net.c need not.
 * Every other section is a layer (layers/<type>.c) whose unknown options
 * are errors.
 *
 * Layers take their inputs from from= (names, "input", or negative indices
 * relative to the layer: -1 = the previous one, the default; the first
 * layer's previous is the net input). The output layer is the last.
 * weights=NAME makes a layer use an earlier layer's parameters and
 * buffers (share_weights, cdp_layer.share): siamese branches.
 *
 * Backward needs no zeroing of activation gradients: for every tensor,
 * the consumer that runs first in backward order (the highest index)
 * overwrites its gradient (in_beta 0) and the others accumulate (1).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cdp_rng.h"
#include "layers.h"
#include "loss.h"
#include "net_plan.h"

#define REGISTRY_ENTRY(type) &cdp_layer_##type,
static const cdp_layer_ops *const registry[] = { CDP_LAYERS(REGISTRY_ENTRY) };
#undef REGISTRY_ENTRY

const cdp_layer_ops *cdp_layer_ops_find(const char *type)
{
	for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
		if (strcmp(registry[i]->type, type) == 0)
			return registry[i];
	return NULL;
}

size_t cdp_net_param(cdp_net *net, size_t len)
{
	size_t off = net->nparams;
	net->nparams += len;
	return off;
}

size_t cdp_net_buffer(cdp_net *net, size_t len)
{
	size_t off = net->nbuffers;
	net->nbuffers += len;
	return off;
}

/* ---- building ---- */

/* "PATH:LINE: layer 'NAME' (TYPE): reason". A reason from the cfg option
 * readers already starts with "PATH:LINE: " (the option's own line): the
 * layer goes after that prefix. */
static void layer_err(const cdp_net *net, const cdp_layer *l, const char *type,
                      const char *reason, char *err, size_t cap)
{
	const char *path = net->cfg->path;
	size_t pl = strlen(path);
	char tmp[512];

	snprintf(tmp, sizeof tmp, "%s", reason);
	if (strncmp(tmp, path, pl) == 0 && tmp[pl] == ':') {
		const char *p = tmp + pl + 1;
		while (*p >= '0' && *p <= '9')
			p++;
		if (*p == ':')
			p++;
		if (*p == ' ')
			p++;
		snprintf(err, cap, "%.*slayer '%s' (%s): %s", (int)(p - tmp), tmp,
		         l->name, type, p);
		return;
	}
	snprintf(err, cap, "%s:%d: layer '%s' (%s): %s", path, l->cfg_line, l->name,
	         type, tmp);
}

static int valid_name(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
			return 0;
	return 1;
}

/* from= of layer i: names, "input", or -k (the layer k before this one). */
static int parse_from(cdp_net *net, cdp_layer *l, const char *spec, char *err, size_t cap)
{
	char buf[512], *save = NULL;
	int i = l->index;

	l->nfrom = 0;
	if (!spec) {
		l->from[0] = i - 1;
		l->nfrom = 1;
		return 0;
	}
	if (strlen(spec) >= sizeof buf) {
		snprintf(err, cap, "from= is too long");
		return -1;
	}
	strcpy(buf, spec);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		int src = -2;
		while (*t == ' ' || *t == '\t')
			t++;
		end = t + strlen(t);
		while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (l->nfrom == CDP_MAX_FROM) {
			snprintf(err, cap, "from= names more than %d inputs", CDP_MAX_FROM);
			return -1;
		}
		if (t[0] == '-' && t[1] >= '0' && t[1] <= '9') {
			long v = strtol(t, &end, 10);
			if (*end || v == 0 || i + v < -1) {
				snprintf(err, cap, "from=%s does not name a layer before this one", t);
				return -1;
			}
			src = (int)(i + v);
		} else if (strcmp(t, "input") == 0) {
			src = -1;
		} else {
			for (int k = 0; k < i && src == -2; k++)
				if (strcmp(net->layers[k].name, t) == 0)
					src = k;
			if (src == -2) {
				snprintf(err, cap, "from: no layer named '%.64s' before this one", t);
				return -1;
			}
		}
		l->from[l->nfrom++] = src;
	}
	if (l->nfrom == 0) {
		snprintf(err, cap, "from= names no layer");
		return -1;
	}
	return 0;
}

static int net_options(cdp_net *net, int in_c, int in_h, int in_w, char *err, size_t cap)
{
	cdp_cfg *cfg = net->cfg;
	cdp_cfg_section *s = &cfg->s[0];
	int c, h, w;
	const char *loss;

	if (cdp_cfg_int(cfg, s, "channels", 0, 1, 1 << 20, &c, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "in_h", 0, 1, 1 << 20, &h, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "in_w", 0, 1, 1 << 20, &w, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "classes", 0, 1, 1 << 20, &net->classes, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "ignore", -1, -1, 1 << 30, &net->ignore, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "bn_sync", 0, 0, 1, &net->bn_sync, err, cap) < 0)
		return -1;
	net->in.c = in_c > 0 ? in_c : c;
	net->in.h = in_h > 0 ? in_h : h;
	net->in.w = in_w > 0 ? in_w : w;
	if (!net->in.c || !net->in.h || !net->in.w) {
		snprintf(err, cap, "%s:%d: [net]: the input shape is unknown (set channels=, "
		         "in_h=, in_w= or pass them)", cfg->path, s->line);
		return -1;
	}
	loss = cdp_cfg_str(s, "loss", "ce");
	{
		int kind[CDP_LOSS_MAX_TERMS], sm;
		char why[200];
		if (cdp_loss_parse(loss, 0, kind, &sm, why, sizeof why) < 0 ||
		    strlen(loss) >= sizeof net->loss) {
			snprintf(err, cap, "%s:%d: [net]: %s", cfg->path, s->line,
			         strlen(loss) >= sizeof net->loss ? "loss= is too long" : why);
			return -1;
		}
	}
	snprintf(net->loss, sizeof net->loss, "%s", loss);
	return 0;
}

/* The head must fit the loss (loss.h): softmax over K channels (a term ce,
 * or classes > 2 without bce), else sigmoid on one channel, classes 2; a
 * regression loss has one channel per target, classes of them.
 * Without classes=, the terms and then the head's channels decide. */
static int check_head(cdp_net *net, char *err, size_t cap)
{
	cdp_layer *h = &net->layers[net->out_layer];
	int kind[CDP_LOSS_MAX_TERMS], nt, sm, ce = 0, bce = 0, classes = net->classes, want;
	char why[200];

	nt = cdp_loss_parse(net->loss, 0, kind, &sm, why, sizeof why);
	for (int i = 0; i < nt; i++) {
		ce |= kind[i] == CDP_LOSS_CE;
		bce |= kind[i] == CDP_LOSS_BCE;
	}
	/* loss=bce on as many channels as classes=: one sigmoid per class,
	 * a multi-label head (the binary head is one channel, classes=2) */
	if (nt == 1 && bce && classes > 0 && h->out.c == classes) {
		net->multi = 1;
		return 0;
	}
	if (!classes)
		classes = ce ? h->out.c : bce ? 2 : h->out.c == 1 && (nt < 1 ||
		          !cdp_loss_kind_is_reg(kind[0])) ? 2 : h->out.c;
	if (cdp_loss_parse(net->loss, classes, kind, &sm, why, sizeof why) < 0) {
		snprintf(err, cap, "%s:%d: [net]: %s", net->cfg->path, net->cfg->s[0].line, why);
		return -1;
	}
	/* regression: classes counts the outputs, one channel each */
	if (cdp_loss_kind_is_reg(kind[0]))
		sm = 1;
	else if (!sm && classes != 2) {
		snprintf(err, cap, "%s:%d: [net]: loss=%s is binary, classes=%d should be 2",
		         net->cfg->path, net->cfg->s[0].line, net->loss, classes);
		return -1;
	}
	want = sm ? classes : 1;
	if (h->out.c != want) {
		snprintf(why, sizeof why, "the output has %d channels, loss=%s needs %d",
		         h->out.c, net->loss, want);
		layer_err(net, h, h->ops->type, why, err, cap);
		return -1;
	}
	net->classes = classes;
	return 0;
}

/* in_beta, and which outputs some layer reads (consumed): one pass in
 * backward order, so a net of many layers builds in linear time. */
static int set_betas(cdp_net *net)
{
	/* seen[s + 1]: source s (layer index, or -1 = net input) already has a
	 * writer of its gradient, a later layer or an earlier input of this one */
	unsigned char *seen = calloc((size_t)net->nlayers + 1, 1);

	if (!seen)
		return -1;
	for (int i = net->nlayers - 1; i >= 0; i--) {
		cdp_layer *l = &net->layers[i];
		for (int j = 0; j < l->nfrom; j++) {
			l->in_beta[j] = seen[l->from[j] + 1] ? 1.0f : 0.0f;
			seen[l->from[j] + 1] = 1;
		}
	}
	net->input_consumed = seen[0];
	for (int i = 0; i < net->nlayers; i++) {
		net->layers[i].consumed = seen[i + 1];
		net->layers[i].dy_reader = -1;
	}
	/* dy_reader: refs counts the reads of each output */
	memset(seen, 0, (size_t)net->nlayers + 1);
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		for (int j = 0; j < l->nfrom; j++) {
			int f = l->from[j];
			if (f < 0)
				continue;
			if (seen[f + 1] < 2)
				seen[f + 1]++;
			net->layers[f].dy_reader = seen[f + 1] == 1 && j == 0 ? i : -1;
		}
	}
	free(seen);
	return 0;
}

/* [net] lr_mult=PATTERN:M,...: M of the first fnmatch glob matching name,
 * else 1. Items are separated by ',' or ';' (an override's value cannot
 * hold a comma: --model m.cfg:lr_mult=conv1:0.1;layer*:0.1). A malformed
 * list is an error for every layer, the first reports it. */
static int net_lr_mult(cdp_net *net, const char *name, float *m, char *err, size_t cap)
{
	const char *p = cdp_cfg_str(&net->cfg->s[0], "lr_mult", NULL);
	char item[160];

	*m = 1.0f;
	while (p && *p) {
		size_t len = strcspn(p, ",;");
		char *colon, *end;
		double v;

		if (len >= sizeof item) {
			snprintf(err, cap, "[net] lr_mult=: item '%.40s...' is too long", p);
			return -1;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		p += len + (p[len] != '\0');
		colon = strrchr(item, ':');
		if (!colon || colon == item) {
			snprintf(err, cap, "[net] lr_mult=: '%s' is not PATTERN:M", item);
			return -1;
		}
		*colon = '\0';
		v = strtod(colon + 1, &end);
		if (end == colon + 1 || *end || !(v >= 0) || v > 1e6) {
			snprintf(err, cap, "[net] lr_mult=: '%s' is not a number in [0, 1e6]", colon + 1);
			return -1;
		}
		if (fnmatch(item, name, 0) == 0) {
			*m = (float)v;
			return 0;
		}
	}
	return 0;
}

/* weights=spec of layer l, just made with its parameters and buffers the
 * last declared (from np0 and nb0): it uses those of the earlier layer
 * named spec (or the one that layer uses) instead, which must be of the
 * same type and declare the same lengths, and its own are taken back. */
static int share_weights(cdp_net *net, cdp_layer *l, const char *spec, size_t np0, size_t nb0,
                         char *err, size_t cap)
{
	cdp_layer *src = NULL;

	for (int k = 0; k < l->index && !src; k++)
		if (strcmp(net->layers[k].name, spec) == 0)
			src = &net->layers[k];
	if (!src) {
		snprintf(err, cap, "weights: no layer named '%.64s' before this one", spec);
		return -1;
	}
	if (src->share)
		src = &net->layers[src->share - 1];
	if (src->ops != l->ops || src->w_len != l->w_len || src->b_len != l->b_len ||
	    src->buf_len != l->buf_len) {
		snprintf(err, cap, "weights=%.64s: '%s' is [%s] with %zu+%zu parameters, this layer "
		         "[%s] with %zu+%zu: the same type and shapes are needed", spec, src->name,
		         src->ops->type, src->w_len, src->b_len, l->ops->type, l->w_len, l->b_len);
		return -1;
	}
	if (!src->w_len && !src->b_len && !src->buf_len) {
		snprintf(err, cap, "weights=%.64s: '%s' has no parameters to share", spec, src->name);
		return -1;
	}
	net->nparams = np0;
	net->nbuffers = nb0;
	l->w_off = src->w_off;
	l->b_off = src->b_off;
	l->buf_off = src->buf_off;
	l->w_len = l->b_len = l->buf_len = 0;
	l->share = src->index + 1;
	return 0;
}

static int make_layers(cdp_net *net, char *err, size_t cap)
{
	cdp_cfg *cfg = net->cfg;
	char why[400];

	for (int i = 0; i < net->nlayers; i++) {
		cdp_cfg_section *s = &cfg->s[i + 1];
		cdp_layer *l = &net->layers[i];
		const char *name, *wsrc;
		size_t np0 = net->nparams, nb0 = net->nbuffers;

		l->index = i;
		l->cfg_line = s->line;
		l->ops = cdp_layer_ops_find(s->type);
		snprintf(l->name, sizeof l->name, "%s%d", s->type, i);
		if (!l->ops) {
			snprintf(err, cap, "%s:%d: unknown layer type [%.64s]", cfg->path, s->line, s->type);
			return -1;
		}
		name = cdp_cfg_str(s, "name", NULL);
		if (name) {
			if (strlen(name) >= sizeof l->name || !valid_name(name) ||
			    strcmp(name, "input") == 0) {
				snprintf(why, sizeof why, "bad name '%.64s' (a letter or _, then "
				         "letters, digits, _ . -; at most %d; not 'input')", name,
				         CDP_LAYER_NAME - 1);
				goto fail;
			}
			snprintf(l->name, sizeof l->name, "%s", name);
		}
		for (int k = 0; k < i; k++)
			if (strcmp(net->layers[k].name, l->name) == 0) {
				snprintf(why, sizeof why, "the name is already used at line %d",
				         net->layers[k].cfg_line);
				goto fail;
			}
		if (parse_from(net, l, cdp_cfg_str(s, "from", NULL), why, sizeof why) < 0)
			goto fail;
		for (int j = 0; j < l->nfrom; j++)
			l->in[j] = l->from[j] < 0 ? net->in : net->layers[l->from[j]].out;
		why[0] = '\0';
		if (l->ops->make(l, net, s, why, sizeof why) < 0)
			goto fail;
		if (l->out.c < 1 || l->out.h < 1 || l->out.w < 1) {
			snprintf(why, sizeof why, "empty output (%d,%d,%d)", l->out.c, l->out.h, l->out.w);
			goto fail;
		}
		if ((wsrc = cdp_cfg_str(s, "weights", NULL)) &&
		    share_weights(net, l, wsrc, np0, nb0, why, sizeof why) < 0)
			goto fail;
		if (net_lr_mult(net, l->name, &l->lr_mult, why, sizeof why) < 0 ||
		    cdp_cfg_float(cfg, s, "lr_mult", l->lr_mult, 0.0f, 1e6f, &l->lr_mult, why,
		                  sizeof why) < 0)
			goto fail;
		if (cdp_cfg_check_used(cfg, s, why, sizeof why) < 0)
			goto fail;
		continue;
fail:
		layer_err(net, l, s->type, why, err, cap);
		return -1;
	}
	return 0;
}

#define BUILD_OLD_RULE 1      /* a checkpoint's cfg from before [vars] */
#define BUILD_INFER 2         /* forward only (cdp_net_build_infer) */

/* Inference: each conv without an activation whose only reader is a bn
 * (not the output layer) writes the bn's output by conv_fwd_bn
 * (net.h, fuse): one pass over the output while it is in the cache
 * instead of a second pass over memory (8% of a U-Net's cdp-predict). */
static void plan_fusion(cdp_net *net)
{
	for (int b = 0; b <= net->out_layer; b++) {
		cdp_layer *l = &net->layers[b];
		int c = l->from[0], readers = 0;

		if (l->ops != &cdp_layer_bn || l->nfrom != 1 || c < 0 ||
		    net->layers[c].ops != &cdp_layer_conv || net->layers[c].act ||
		    net->layers[c].fuse || c == net->out_layer)
			continue;
		for (int k = 0; k < net->nlayers; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++)
				readers += net->layers[k].from[m] == c;
		if (readers != 1)
			continue;
		net->layers[c].fuse = b + 1;
		l->fuse = c + 1;
	}
}

static int build(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                 const char *const *overrides, int noverrides, int mode,
                 int in_c, int in_h, int in_w, int n, char *err, size_t cap)
{
	int prc, old_rule = mode & BUILD_OLD_RULE;

	memset(net, 0, sizeof *net);
	net->be = be;
	net->n = n;
	net->train = !(mode & BUILD_INFER);
	net->infer = !!(mode & BUILD_INFER);
	if (n < 1) {
		snprintf(err, cap, "%s: batch size %d is not positive", path ? path : "<cfg>", n);
		return -1;
	}
	net->cfg_text = strdup(cfg_text ? cfg_text : "");
	net->cfg = calloc(1, sizeof *net->cfg);
	if (!net->cfg_text || !net->cfg) {
		snprintf(err, cap, "%s: out of memory", path ? path : "<cfg>");
		goto fail;
	}
	if ((prc = cdp_cfg_parse_rule(cfg_text, path, overrides, noverrides, old_rule, net->cfg,
	                              err, cap)) < 0) {
		cdp_net_free(net);
		return prc;
	}
	if (net_options(net, in_c, in_h, in_w, err, cap) < 0)
		goto fail;
	net->nlayers = net->cfg->ns - 1;
	if (net->nlayers < 1) {
		snprintf(err, cap, "%s: no layers after [net]", net->cfg->path);
		goto fail;
	}
	/* names are checked against every earlier layer: bounded, so a small
	 * hostile cfg (a loop of 300,000 layers) cannot hang the build */
	if (net->nlayers > CDP_NET_MAX_LAYERS) {
		snprintf(err, cap, "%s: %d layers, more than %d", net->cfg->path, net->nlayers,
		         CDP_NET_MAX_LAYERS);
		goto fail;
	}
	net->layers = calloc((size_t)net->nlayers, sizeof *net->layers);
	if (!net->layers) {
		snprintf(err, cap, "%s: out of memory", net->cfg->path);
		goto fail;
	}
	if (make_layers(net, err, cap) < 0)
		goto fail;
	net->out_layer = net->nlayers - 1;
	if (check_head(net, err, cap) < 0)
		goto fail;
	if (net->infer)
		plan_fusion(net);
	if (set_betas(net) < 0) {
		snprintf(err, cap, "%s: out of memory", net->cfg->path);
		goto fail;
	}
	net->params = be->alloc(be, net->nparams * sizeof(float));
	net->grads = be->alloc(be, net->nparams * sizeof(float));
	net->buffers = be->alloc(be, net->nbuffers * sizeof(float));
	if (!net->params || !net->grads || !net->buffers) {
		snprintf(err, cap, "%s: cannot allocate %zu parameters: out of memory",
		         net->cfg->path, net->nparams);
		goto fail;
	}
	if (cdp_net_alloc_batch(net, err, cap) < 0)
		goto fail;
	cdp_cfg_free(net->cfg);
	free(net->cfg);
	net->cfg = NULL;
	return 0;
fail:
	cdp_net_free(net);
	return -1;
}

int cdp_net_resize(cdp_net *net, int n, char *err, size_t cap)
{
	if (n < 1) {
		snprintf(err, cap, "batch size %d is not positive", n);
		return -1;
	}
	if (n == net->n)
		return 0;
	cdp_net_free_batch(net);
	net->n = n;
	return cdp_net_alloc_batch(net, err, cap);
}

/* Grows the workspace to the largest need of a layer now (never shrinks
 * it); 0, or -1 out of memory with the old one kept. */
static int grow_ws(cdp_net *net)
{
	cdp_backend *be = net->be;
	size_t need = 0;
	void *ws;
	int n = net->n;

	if (net->out)            /* an inference net in passes: a pass's */
		net->n = net->pass;
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		size_t b = l->ops->workspace ? l->ops->workspace(l, net) : 0;
		if (b > need)
			need = b;
	}
	net->n = n;
	if (need <= net->ws_bytes)
		return 0;
	if (!(ws = be->alloc(be, need)))
		return -1;
	be->free(be, net->ws);
	net->ws = ws;
	net->ws_bytes = need;
	return 0;
}

/* The workspace depends on the precision (a bf16/fp16 convolution on CUDA
 * stages its operands in it): grown, never shrunk, so that it holds every
 * layer's need in the precision set now. */
int cdp_net_set_precision(cdp_net *net, int prec, char *err, size_t cap)
{
	cdp_backend *be = net->be;
	int old = be->precision;

	if (be->set_precision(be, prec) != 0) {
		snprintf(err, cap, "the %s backend cannot compute in %s", be->name,
		         cdp_precision_name(prec));
		return -1;
	}
	if (grow_ws(net) < 0) {
		be->set_precision(be, old);
		snprintf(err, cap, "cannot allocate a workspace for %s: out of memory",
		         cdp_precision_name(prec));
		return -1;
	}
	/* the layers' outputs are laid out anew when the stash comes or goes
	 * (the input, gradients and layer state stay) */
	if (cdp_net_want_stash(net) != net->stash) {
		cdp_net_free_acts(net);
		if (cdp_net_alloc_acts(net) < 0) {
			cdp_net_free_acts(net);
			be->set_precision(be, old);
			if (cdp_net_alloc_acts(net) < 0)
				cdp_net_free_acts(net);
			snprintf(err, cap, "cannot allocate the activations for %s: out of memory%s",
			         cdp_precision_name(prec), net->act_bytes ? "" :
			         " (and none are left: free the net)");
			return -1;
		}
		/* convolutions reading the stash take it in groups of samples */
		if (grow_ws(net) < 0) {
			snprintf(err, cap, "cannot allocate a workspace for %s: out of memory",
			         cdp_precision_name(prec));
			return -1;
		}
	}
	return 0;
}

int cdp_net_freeze(cdp_net *net, const char *patterns, char *err, size_t cap)
{
	char pat[CDP_LAYER_NAME * 2];
	int nfrozen = 0;

	for (int i = 0; i < net->nlayers; i++)
		net->layers[i].frozen = 0;
	for (const char *p = patterns ? patterns : ""; *p;) {
		size_t len = strcspn(p, ",");
		int hit = 0;

		if (len == 0 || len >= sizeof pat) {
			snprintf(err, cap, "--freeze: %s pattern in '%.80s'", len ? "a too long" : "an empty",
			         patterns);
			return -1;
		}
		memcpy(pat, p, len);
		pat[len] = '\0';
		p += len + (p[len] == ',');
		for (int i = 0; i < net->nlayers; i++)
			if (fnmatch(pat, net->layers[i].name, 0) == 0) {
				nfrozen += !net->layers[i].frozen;
				net->layers[i].frozen = hit = 1;
			}
		if (!hit) {
			snprintf(err, cap, "--freeze: '%s' matches no layer name", pat);
			return -1;
		}
	}
	/* one set of parameters is frozen or not, whichever layer uses it */
	nfrozen = 0;
	for (int i = 0; i < net->nlayers; i++) {
		if (net->layers[i].share)
			net->layers[i].frozen = net->layers[net->layers[i].share - 1].frozen;
		nfrozen += net->layers[i].frozen;
	}
	if (grow_ws(net) < 0) {
		snprintf(err, cap, "--freeze: cannot allocate the workspace: out of memory");
		return -1;
	}
	/* a frozen batchnorm's backward reads its output (bn.c): the stash's
	 * plan changes with what backward reads */
	if (net->stash && net->n) {
		cdp_net_free_acts(net);
		if (cdp_net_alloc_acts(net) < 0 || grow_ws(net) < 0) {
			snprintf(err, cap, "--freeze: cannot allocate the activations: out of memory");
			return -1;
		}
	}
	return nfrozen;
}

void cdp_net_free(cdp_net *net)
{
	cdp_backend *be = net->be;

	if (net->layers)
		cdp_net_free_batch(net);
	if (be) {
		be->free(be, net->params);
		be->free(be, net->grads);
		be->free(be, net->buffers);
	}
	free(net->layers);
	free(net->cfg_text);
	if (net->cfg) {
		cdp_cfg_free(net->cfg);
		free(net->cfg);
	}
	memset(net, 0, sizeof *net);
}

/* ---- running ---- */

void cdp_net_init(cdp_net *net, uint64_t seed)
{
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		if (l->ops->init && !l->share)
			l->ops->init(l, net, seed);
	}
}

/* The wall clock after the device has finished what was queued: the start
 * or end of one layer's work in a profiled pass (net.h). */
static double prof_clock(cdp_net *net)
{
	struct timespec ts;

	net->be->sync(net->be);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The stash after forward step i: the outputs it read last (or its own,
 * when nothing reads it) go to bf16 if backward reads them, and their
 * fp32 bytes are free again. */
static void stash_after_fwd(cdp_net *net, int i)
{
	cdp_backend *be = net->be;

	for (int t = 0; t <= i && t < net->out_layer; t++) {
		cdp_layer *l = &net->layers[t];
		if (l->fwd_end != i)
			continue;
		if (l->yh && !l->yh_fresh)
			be->to_bf16(be, l->y, l->yh, cdp_layer_out_count(l, net));
		l->yh_fresh = 0;
		l->y = NULL;
	}
}

static void forward_layers(cdp_net *net)
{
	for (int i = 0; i <= net->out_layer; i++) {
		double t0 = net->prof_fwd ? prof_clock(net) : 0.0;
		if (net->stash || net->infer)
			net->layers[i].y = net->layers[i].y_fwd;
		net->layers[i].ops->forward(&net->layers[i], net);
		if (net->stash)
			stash_after_fwd(net, i);
		if (net->prof_fwd)
			net->prof_fwd[i] += prof_clock(net) - t0;
	}
}

/* An inference net on a backend that runs it in passes (net.h, pass):
 * up to pass samples of x at a time, the output of each pass written in
 * place, into net->out when there are several; every sample's numbers
 * are those of a whole-batch forward (no layer of an inference net mixes
 * samples, and no kernel's sums depend on how many it is given). */
void cdp_net_forward_n(cdp_net *net, int k)
{
	cdp_layer *o = &net->layers[net->out_layer];
	float *x = net->x, *y = o->y_fwd;
	size_t in = cdp_shape_numel(net->in), out = cdp_shape_numel(o->out);
	int n = net->n;

	if (!net->infer || !net->be->infer_pass_bytes(net->be) || k > n)
		k = n;                   /* the whole batch */
	if (k == n && !net->out) {
		forward_layers(net);
		return;
	}
	for (int s = 0; s < k; s += net->pass) {
		net->n = k - s < net->pass ? k - s : net->pass;
		net->x = x + (size_t)s * in;
		o->y_fwd = y + (size_t)s * out;
		forward_layers(net);
	}
	net->n = n;
	net->x = x;
	o->y = o->y_fwd = y;
}

void cdp_net_forward(cdp_net *net)
{
	cdp_net_forward_n(net, net->n);
}

void cdp_net_backward(cdp_net *net, void (*on_layer_done)(cdp_net *, int, void *), void *ctx)
{
	cdp_backend *be = net->be;

	/* a tensor nobody reads gets no gradient written: zero it */
	for (int i = 0; i < net->out_layer; i++)
		if (!cdp_net_has_consumer(net, i))
			be->fill(be, net->layers[i].dy, 0.0f, cdp_layer_out_count(&net->layers[i], net));
	if (net->input_grad && !cdp_net_has_consumer(net, -1))
		be->fill(be, net->dx, 0.0f, (size_t)net->n * cdp_shape_numel(net->in));
	for (int i = net->out_layer; i >= 0; i--) {
		cdp_layer *l = &net->layers[i];
		double t0 = net->prof_bwd ? prof_clock(net) : 0.0;
		/* the stash: widen what step i reads first, free what it read last */
		for (int t = 0; net->stash && t < net->out_layer; t++)
			if (net->layers[t].bwd_first == i) {
				cdp_layer *s = &net->layers[t];
				s->y = s->y_bwd;
				be->from_bf16(be, s->yh, s->y, cdp_layer_out_count(s, net));
			}
		if (l->ops->backward)
			l->ops->backward(l, net);
		for (int t = 0; net->stash && t < net->out_layer; t++)
			if (net->layers[t].bwd_last == i)
				net->layers[t].y = NULL;
		if (net->prof_bwd)
			net->prof_bwd[i] += prof_clock(net) - t0;
		if (on_layer_done)
			on_layer_done(net, i, ctx);
	}
}

void cdp_net_zero_grad(cdp_net *net)
{
	if (net->nparams)
		net->be->fill(net->be, net->grads, 0.0f, net->nparams);
}

const float *cdp_net_output(const cdp_net *net)
{
	return net->layers[net->out_layer].y;
}

int cdp_net_build(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                  const char *const *overrides, int noverrides,
                  int in_c, int in_h, int in_w, int n, char *err, size_t cap)
{
	return build(net, be, cfg_text, path, overrides, noverrides, 0, in_c, in_h, in_w, n, err,
	             cap);
}

static int build_ckpt(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                      const char *const *overrides, int noverrides, int mode,
                      int in_c, int in_h, int in_w, int n, char *warn, size_t wcap,
                      char *err, size_t cap)
{
	int rc = build(net, be, cfg_text, path, overrides, noverrides, mode, in_c, in_h, in_w, n,
	               err, cap);

	if (warn && wcap)
		warn[0] = '\0';
	if (rc != CDP_CFG_EUNKNOWN)
		return rc;
	/* the warning names the keys the old rule keeps variables, from a
	 * parse of its own (build keeps no cfg; cheap next to the build) */
	if (warn && wcap) {
		cdp_cfg cfg = { 0 };
		char e[256];
		int ok = cdp_cfg_parse_rule(cfg_text, path, overrides, noverrides, 1, &cfg, e,
		                            sizeof e) == 0;
		cdp_cfg_old_rule_warning(warn, wcap, err, ok ? cfg.old_vars : NULL);
		cdp_cfg_free(&cfg);
	}
	return build(net, be, cfg_text, path, overrides, noverrides, mode | BUILD_OLD_RULE, in_c,
	             in_h, in_w, n, err, cap);
}

int cdp_net_build_ckpt(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                       const char *const *overrides, int noverrides,
                       int in_c, int in_h, int in_w, int n, char *warn, size_t wcap,
                       char *err, size_t cap)
{
	return build_ckpt(net, be, cfg_text, path, overrides, noverrides, 0, in_c, in_h, in_w, n,
	                  warn, wcap, err, cap);
}

int cdp_net_build_infer(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                        const char *const *overrides, int noverrides,
                        int in_c, int in_h, int in_w, int n, char *warn, size_t wcap,
                        char *err, size_t cap)
{
	return build_ckpt(net, be, cfg_text, path, overrides, noverrides, BUILD_INFER, in_c, in_h,
	                  in_w, n, warn, wcap, err, cap);
}
