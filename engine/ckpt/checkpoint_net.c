/* checkpoint_net.c: filling a checkpoint from a net, an optimizer and the
 * trainer's state, and restoring them from one (checkpoint.h).
 *
 * A net's tensors are derived from its layers: "<layer>.w" with the weight
 * shape of the layer type (conv (F,C,K,K), deconv (C,F,K,K), dense
 * (OUT,IN), else flat), "<layer>.b", and for bn the buffers "<layer>.mean"
 * and "<layer>.var". Saving and restoring derive them the same way, so a
 * checkpoint loads only into a net of the same architecture, and the error
 * names the first tensor that differs.
 */
#include "checkpoint_int.h"
#include "cdp_error.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cdp_ckpt_set_cfg(cdp_ckpt *ck, const char *text, const char *const *overrides, int n)
{
	char *t = strdup(text ? text : ""), **ov = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof(char *));

	if (!t || !ov || n < 0) {
		free(t);
		free(ov);
		return n < 0 ? CDP_EINVAL : CDP_ENOMEM;
	}
	for (int i = 0; i < n; i++)
		if (!(ov[i] = strdup(overrides[i]))) {
			while (i-- > 0)
				free(ov[i]);
			free(ov);
			free(t);
			return CDP_ENOMEM;
		}
	for (int i = 0; ck->overrides && i < ck->noverrides; i++)
		free(ck->overrides[i]);
	free(ck->overrides);
	free(ck->cfg_text);
	ck->cfg_text = t;
	ck->overrides = ov;
	ck->noverrides = n;
	return CDP_OK;
}

/* One tensor of a net: where it lives and what it is called. */
typedef struct slot {
	char name[CDP_CKPT_NAME_MAX + 1];
	int ndim, dims[CDP_CKPT_MAX_DIMS];
	size_t off, len;
} slot;

static int slot_set(slot *s, const cdp_layer *l, const char *suffix, size_t off, size_t len,
                    int nd, const int *dims)
{
	size_t prod = 1;

	snprintf(s->name, sizeof(s->name), "%s.%s", l->name, suffix);
	for (int d = 0; d < nd; d++)
		prod *= dims[d] > 0 ? (size_t)dims[d] : 0;
	/* a shape we cannot vouch for is stored flat */
	if (nd == 0 || prod != len) {
		if (len > INT_MAX)
			return CDP_EOVERFLOW;
		nd = 1;
		s->dims[0] = (int)len;
	} else {
		memcpy(s->dims, dims, (size_t)nd * sizeof(int));
	}
	s->ndim = nd;
	s->off = off;
	s->len = len;
	return CDP_OK;
}

static int slot_cmp(const void *a, const void *b)
{
	const slot *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The net's parameter tensors (*np of them) followed by its buffers (*nb),
 * each list sorted by offset and checked to tile its block exactly. */
static int net_slots(const cdp_net *net, slot **out, int *np, int *nb)
{
	slot *s = calloc((size_t)net->nlayers * 4 + 1, sizeof(*s));
	size_t at;
	int n = 0, m, rc = CDP_OK;

	if (!s)
		return CDP_ENOMEM;
	for (int i = 0; i < net->nlayers && rc == CDP_OK; i++) {
		const cdp_layer *l = &net->layers[i];
		const char *type = l->ops ? l->ops->type : "";
		int d[4] = { 0 }, nd = 0;
		if (!strcmp(type, "conv")) {
			d[0] = l->filters; d[1] = l->in[0].c; d[2] = d[3] = l->k; nd = 4;
		} else if (!strcmp(type, "deconv")) {
			d[0] = l->in[0].c; d[1] = l->filters; d[2] = d[3] = l->k; nd = 4;
		} else if (!strcmp(type, "dense") && l->filters > 0) {
			d[0] = l->filters; d[1] = (int)(l->w_len / (size_t)l->filters); nd = 2;
		}
		if (l->w_len)
			rc = slot_set(&s[n++], l, "w", l->w_off, l->w_len, nd, d);
		if (l->b_len && rc == CDP_OK)
			rc = slot_set(&s[n++], l, "b", l->b_off, l->b_len, 0, NULL);
	}
	m = n;
	for (int i = 0; i < net->nlayers && rc == CDP_OK; i++) {
		const cdp_layer *l = &net->layers[i];
		size_t c = (size_t)l->out.c;
		if (!l->buf_len)
			continue;
		if (l->ops && !strcmp(l->ops->type, "bn") && l->buf_len == 2 * c) {
			rc = slot_set(&s[n++], l, "mean", l->buf_off, c, 0, NULL);
			if (rc == CDP_OK)
				rc = slot_set(&s[n++], l, "var", l->buf_off + c, c, 0, NULL);
		} else {
			rc = slot_set(&s[n++], l, "buf", l->buf_off, l->buf_len, 0, NULL);
		}
	}
	if (rc != CDP_OK) {
		free(s);
		return rc;
	}
	qsort(s, (size_t)m, sizeof(*s), slot_cmp);
	qsort(s + m, (size_t)(n - m), sizeof(*s), slot_cmp);
	at = 0;
	for (int i = 0; i < m; i++, at += s[i - 1].len)
		if (s[i].off != at)
			rc = CDP_EFORMAT;
	if (at != net->nparams)
		rc = CDP_EFORMAT;
	at = 0;
	for (int i = m; i < n; i++, at += s[i - 1].len)
		if (s[i].off != at)
			rc = CDP_EFORMAT;
	if (at != net->nbuffers)
		rc = CDP_EFORMAT;
	if (rc != CDP_OK) {
		free(s);
		return rc;
	}
	*out = s;
	*np = m;
	*nb = n - m;
	return CDP_OK;
}

static void free_tensors(cdp_ckpt_tensor *t, int n)
{
	for (int i = 0; t && i < n; i++)
		free(t[i].data);
	free(t);
}

/* Host copies of the slots' data from the device block `base`. */
static int slots_to_tensors(const cdp_net *net, const slot *s, int n, const float *base,
                            cdp_ckpt_tensor **out)
{
	cdp_ckpt_tensor *t = calloc((size_t)n + 1, sizeof(*t));

	if (!t)
		return CDP_ENOMEM;
	for (int i = 0; i < n; i++) {
		memcpy(t[i].name, s[i].name, sizeof(t[i].name));
		t[i].ndim = s[i].ndim;
		memcpy(t[i].dims, s[i].dims, sizeof(t[i].dims));
		t[i].numel = s[i].len;
		t[i].data = malloc(s[i].len * sizeof(float));
		if (!t[i].data) {
			free_tensors(t, n);
			return CDP_ENOMEM;
		}
		net->be->to_host(net->be, t[i].data, base + s[i].off, s[i].len * sizeof(float));
	}
	*out = t;
	return CDP_OK;
}

int cdp_ckpt_from_net(cdp_ckpt *ck, const cdp_net *net)
{
	cdp_ckpt_tensor *p = NULL, *b = NULL;
	slot *s;
	int np, nb, rc = net_slots(net, &s, &np, &nb);

	if (rc != CDP_OK)
		return rc == CDP_EFORMAT ? CDP_EINVAL : rc;
	rc = slots_to_tensors(net, s, np, net->params, &p);
	if (rc == CDP_OK)
		rc = slots_to_tensors(net, s + np, nb, net->buffers, &b);
	free(s);
	if (rc != CDP_OK) {
		free_tensors(p, np);
		return rc;
	}
	free_tensors(ck->params, ck->nparams);
	free_tensors(ck->buffers, ck->nbuffers);
	ck->params = p;
	ck->nparams = np;
	ck->buffers = b;
	ck->nbuffers = nb;
	ck->in_c = net->in.c;
	ck->in_h = net->in.h;
	ck->in_w = net->in.w;
	return CDP_OK;
}

static void shape_str(char *b, size_t cap, int nd, const int *d)
{
	int n = snprintf(b, cap, "(");

	for (int i = 0; i < nd && n > 0 && (size_t)n < cap; i++)
		n += snprintf(b + n, cap - (size_t)n, i ? ",%d" : "%d", d[i]);
	if (n > 0 && (size_t)n < cap)
		snprintf(b + n, cap - (size_t)n, ")");
}

/* The first difference between a checkpoint's tensors and the net's slots. */
static int match(const char *what, const cdp_ckpt_tensor *t, int nt, const slot *s, int ns,
                 char *err, size_t cap)
{
	char a[64], b[64];

	if (nt != ns) {
		snprintf(err, cap, "the checkpoint has %d %s tensors, the net %d", nt, what, ns);
		return CDP_EMISMATCH;
	}
	for (int i = 0; i < nt; i++) {
		if (strcmp(t[i].name, s[i].name) == 0 && t[i].ndim == s[i].ndim &&
		    memcmp(t[i].dims, s[i].dims, (size_t)t[i].ndim * sizeof(int)) == 0)
			continue;
		shape_str(a, sizeof(a), t[i].ndim, t[i].dims);
		shape_str(b, sizeof(b), s[i].ndim, s[i].dims);
		snprintf(err, cap, "%s tensor %d: the checkpoint has '%s' %s, the net '%s' %s",
		         what, i + 1, t[i].name, a, s[i].name, b);
		return CDP_EMISMATCH;
	}
	return CDP_OK;
}

int cdp_ckpt_to_net(const cdp_ckpt *ck, cdp_net *net, char *err, size_t cap)
{
	slot *s;
	int np, nb, rc = net_slots(net, &s, &np, &nb);

	if (rc != CDP_OK) {
		snprintf(err, cap, "the net's tensors do not tile its parameter blocks");
		return rc;
	}
	rc = match("parameter", ck->params, ck->nparams, s, np, err, cap);
	if (rc == CDP_OK)
		rc = match("buffer", ck->buffers, ck->nbuffers, s + np, nb, err, cap);
	/* a name for a class the head cannot give is a checkpoint of another
	 * model's names (a sigmoid head's one output gives classes 0 and 1) */
	if (rc == CDP_OK && ck->nclass_names > (net->classes > 1 ? net->classes : 2)) {
		snprintf(err, cap, "the checkpoint names %d classes, the net has %d", ck->nclass_names,
		         net->classes > 1 ? net->classes : 2);
		rc = CDP_EMISMATCH;
	}
	/* everything matched before the first byte is copied */
	for (int i = 0; rc == CDP_OK && i < np + nb; i++) {
		const cdp_ckpt_tensor *t = i < np ? &ck->params[i] : &ck->buffers[i - np];
		float *base = i < np ? net->params : net->buffers;
		net->be->to_device(net->be, base + s[i].off, t->data, t->numel * sizeof(float));
	}
	free(s);
	return rc;
}

int cdp_ckpt_take(const cdp_ckpt *ck, cdp_net *net,
                  void (*each)(void *ctx, const char *name, const char *why), void *ctx,
                  int *ntaken, int *ntotal)
{
	slot *s;
	int np, nb, taken = 0, rc = net_slots(net, &s, &np, &nb);

	if (rc != CDP_OK)
		return rc;
	for (int i = 0; i < np + nb; i++) {
		const cdp_ckpt_tensor *t = i < np ? ck->params : ck->buffers, *same = NULL;
		int nt = i < np ? ck->nparams : ck->nbuffers, hit = 0;
		float *base = i < np ? net->params : net->buffers;
		char why[160], a[64], b[64];

		for (int j = 0; j < nt && !hit; j++) {
			if (strcmp(t[j].name, s[i].name) != 0)
				continue;
			same = &t[j];
			if (t[j].ndim != s[i].ndim ||
			    memcmp(t[j].dims, s[i].dims, (size_t)t[j].ndim * sizeof(int)) != 0)
				continue;
			net->be->to_device(net->be, base + s[i].off, t[j].data,
			                   t[j].numel * sizeof(float));
			hit = 1;
		}
		taken += hit;
		if (!each)
			continue;
		if (hit) {
			each(ctx, s[i].name, NULL);
			continue;
		}
		if (same) {
			shape_str(a, sizeof a, same->ndim, same->dims);
			shape_str(b, sizeof b, s[i].ndim, s[i].dims);
			snprintf(why, sizeof why, "%s in the checkpoint, the net has %s", a, b);
		} else {
			snprintf(why, sizeof why, "missing");
		}
		each(ctx, s[i].name, why);
	}
	if (ntaken)
		*ntaken = taken;
	if (ntotal)
		*ntotal = np + nb;
	free(s);
	return CDP_OK;
}

int cdp_ckpt_set_optim(cdp_ckpt *ck, const cdp_optim *o)
{
	int nb = cdp_optim_nblocks(&o->cfg);
	size_t bytes = o->n * sizeof(float);
	float *m = NULL, *v = NULL;

	if (nb >= 1 && !(v = malloc(bytes ? bytes : 1)))
		return CDP_ENOMEM;
	if (nb == 2 && !(m = malloc(bytes ? bytes : 1))) {
		free(v);
		return CDP_ENOMEM;
	}
	if (m)
		o->be->to_host(o->be, m, o->m, bytes);
	if (v)
		o->be->to_host(o->be, v, o->v, bytes);
	free(ck->optim_m);
	free(ck->optim_v);
	ck->optim = o->cfg;
	ck->optim_step = o->step;
	ck->optim_n = o->n;
	ck->optim_m = m;
	ck->optim_v = v;
	return CDP_OK;
}

int cdp_ckpt_to_optim(const cdp_ckpt *ck, cdp_optim *o, char *err, size_t cap)
{
	int nb = cdp_optim_nblocks(&ck->optim);

	if (ck->optim.type == 0) {
		snprintf(err, cap, "the checkpoint holds no optimizer state");
		return CDP_EMISMATCH;
	}
	/* without moment blocks the file stores no count (cdp-checkpoint(5)) */
	if (ck->optim.type != o->cfg.type || nb != cdp_optim_nblocks(&o->cfg) ||
	    (nb > 0 && ck->optim_n != o->n)) {
		snprintf(err, cap, "the checkpoint's optimizer is %s with %d state blocks of %zu, "
		         "this one %s with %d of %zu", cdp_optim_type_name(ck->optim.type), nb,
		         ck->optim_n, cdp_optim_type_name(o->cfg.type), cdp_optim_nblocks(&o->cfg), o->n);
		return CDP_EMISMATCH;
	}
	if (nb == 2)
		o->be->to_device(o->be, o->m, ck->optim_m, o->n * sizeof(float));
	if (nb >= 1)
		o->be->to_device(o->be, o->v, ck->optim_v, o->n * sizeof(float));
	o->step = ck->optim_step;
	o->micro = 0;
	return CDP_OK;
}

int cdp_ckpt_set_rng(cdp_ckpt *ck, const char *name, const cdp_rng *r)
{
	cdp_ckpt_rng *nr;
	int i;

	if (!cdp_ckpt_name_ok(name))
		return CDP_EINVAL;
	for (i = 0; i < ck->nrng; i++)
		if (strcmp(ck->rng[i].name, name) == 0)
			break;
	if (i == ck->nrng) {
		if (ck->nrng >= CDP_CKPT_MAX_RNG)
			return CDP_EINVAL;
		nr = realloc(ck->rng, (size_t)(ck->nrng + 1) * sizeof(*nr));
		if (!nr)
			return CDP_ENOMEM;
		ck->rng = nr;
		ck->nrng++;
		snprintf(ck->rng[i].name, sizeof(ck->rng[i].name), "%s", name);
	}
	memcpy(ck->rng[i].s, r->s, sizeof(r->s));
	return CDP_OK;
}

int cdp_ckpt_get_rng(const cdp_ckpt *ck, const char *name, cdp_rng *r)
{
	for (int i = 0; i < ck->nrng; i++)
		if (strcmp(ck->rng[i].name, name) == 0) {
			memcpy(r->s, ck->rng[i].s, sizeof(r->s));
			return 0;
		}
	return -1;
}

int cdp_ckpt_set_origin(cdp_ckpt *ck, int from, const uint32_t *src, int nsrc,
                        const char *crs, double res_x, double res_y)
{
	uint32_t *s = NULL;
	char *c = NULL;

	if (from < CDP_CKPT_STD_UNKNOWN || from > CDP_CKPT_STD_INIT || nsrc < 0 ||
	    nsrc > CDP_CKPT_MAX_SOURCES || (nsrc > 0 && !src))
		return CDP_EINVAL;
	if ((nsrc > 0 && !(s = malloc((size_t)nsrc * sizeof *s))) || (crs && !(c = strdup(crs)))) {
		free(s);
		return CDP_ENOMEM;
	}
	if (nsrc > 0)
		memcpy(s, src, (size_t)nsrc * sizeof *s);
	free(ck->std_sources);
	free(ck->crs);
	ck->std_from = from;
	ck->std_sources = s;
	ck->nstd_sources = nsrc;
	ck->crs = c;
	ck->res_x = res_x;
	ck->res_y = res_y;
	return CDP_OK;
}

int cdp_ckpt_set_data(cdp_ckpt *ck, const int *bands, int n, const double *mean,
                      const double *std)
{
	int *b = malloc((size_t)(n > 0 ? n : 0) * sizeof(int) + 1);
	double *m = NULL, *s = NULL;

	if (n < 0 || n > CDP_CKPT_MAX_BANDS || !!mean != !!std) {
		free(b);
		return CDP_EINVAL;
	}
	if (mean) {
		m = malloc((size_t)n * sizeof(double) + 1);
		s = malloc((size_t)n * sizeof(double) + 1);
	}
	if (!b || (mean && (!m || !s))) {
		free(b);
		free(m);
		free(s);
		return CDP_ENOMEM;
	}
	if (n > 0) {
		memcpy(b, bands, (size_t)n * sizeof(int));
		if (mean) {
			memcpy(m, mean, (size_t)n * sizeof(double));
			memcpy(s, std, (size_t)n * sizeof(double));
		}
	}
	free(ck->bands);
	free(ck->mean);
	free(ck->std);
	ck->bands = b;
	ck->nbands = n;
	ck->mean = m;
	ck->std = s;
	return CDP_OK;
}

/* names[n] copied into a NULL-terminated *out (NULL when n is 0) */
static int copy_strs(const char *const *names, int n, char ***out)
{
	char **c = calloc((size_t)n + 1, sizeof *c);

	*out = NULL;
	if (!c)
		return CDP_ENOMEM;
	for (int i = 0; i < n; i++)
		if (!(c[i] = strdup(names[i]))) {
			while (i-- > 0)
				free(c[i]);
			free(c);
			return CDP_ENOMEM;
		}
	if (n)
		*out = c;
	else
		free(c);
	return CDP_OK;
}

static void free_strs(char **s, int n)
{
	for (int i = 0; s && i < n; i++)
		free(s[i]);
	free(s);
}

int cdp_ckpt_set_class_names(cdp_ckpt *ck, const char *const *names, int n)
{
	char **c, why[8];
	int rc;

	if (n < 0 || n > CDP_CKPT_MAX_CLASSES || (n > 0 && !names))
		return CDP_EINVAL;
	for (int i = 0; i < n; i++)
		if (!cdp_ckpt_class_name_ok(names[i], why, sizeof why))
			return CDP_EINVAL;
	if ((rc = copy_strs(names, n, &c)) != CDP_OK)
		return rc;
	free_strs(ck->class_names, ck->nclass_names);
	ck->class_names = c;
	ck->nclass_names = n;
	return CDP_OK;
}

int cdp_ckpt_set_norm(cdp_ckpt *ck, int kind, double scale, const double *mean,
                      const double *std, int n, const char *const *bands, int nb)
{
	double *m, *sd;
	char **b;
	int rc;

	if (kind < CDP_CKPT_NORM_NONE || kind > CDP_CKPT_NORM_GIVEN || !(scale >= 0) ||
	    !isfinite(scale) || n < 1 || n > CDP_CKPT_MAX_BANDS || !mean || !std ||
	    (nb != 0 && nb != n) || (nb && !bands))
		return CDP_EINVAL;
	for (int i = 0; i < n; i++)
		if (!isfinite(mean[i]) || !isfinite(std[i]) || !(std[i] > 0))
			return CDP_EINVAL;
	for (int i = 0; i < nb; i++)
		if (!cdp_ckpt_norm_band_ok(bands[i]))
			return CDP_EINVAL;
	if (!(m = malloc(2 * (size_t)n * sizeof *m)))
		return CDP_ENOMEM;
	if ((rc = copy_strs(bands, nb, &b)) != CDP_OK) {
		free(m);
		return rc;
	}
	sd = m + n;
	memcpy(m, mean, (size_t)n * sizeof *m);
	memcpy(sd, std, (size_t)n * sizeof *sd);
	free(ck->norm_mean);            /* norm_std shares its allocation */
	free_strs(ck->norm_bands, ck->nnorm_bands);
	ck->norm_kind = kind;
	ck->norm_scale = scale;
	ck->norm_mean = m;
	ck->norm_std = sd;
	ck->norm_bands = b;
	ck->nnorm_bands = nb;
	return CDP_OK;
}

int cdp_ckpt_set_task(cdp_ckpt *ck, int task, const double *mean, const double *std, int n)
{
	double *m;

	if (task != CDP_CKPT_TASK_REGRESSION || n < 1 || n > CDP_CKPT_MAX_TARGETS || !mean || !std)
		return CDP_EINVAL;
	for (int i = 0; i < n; i++)
		if (!isfinite(mean[i]) || !isfinite(std[i]) || !(std[i] > 0))
			return CDP_EINVAL;
	if (!(m = malloc(2 * (size_t)n * sizeof *m)))
		return CDP_ENOMEM;
	memcpy(m, mean, (size_t)n * sizeof *m);
	memcpy(m + n, std, (size_t)n * sizeof *m);
	free(ck->target_mean);          /* target_std shares its allocation */
	ck->task = task;
	ck->ntargets = n;
	ck->target_mean = m;
	ck->target_std = m + n;
	return CDP_OK;
}

int cdp_ckpt_add_from(cdp_ckpt *ck, int kind, const char *name, const unsigned char sha256[32])
{
	cdp_ckpt_from *f;
	size_t len = name ? strlen(name) : 0;

	if ((kind != CDP_CKPT_FROM_CKPT && kind != CDP_CKPT_FROM_TORCH) || len < 1 ||
	    len > CDP_CKPT_FROM_NAME_MAX || ck->nfrom >= CDP_CKPT_FROM_MAX)
		return CDP_EINVAL;
	if (!(f = realloc(ck->from, ((size_t)ck->nfrom + 1) * sizeof *f)))
		return CDP_ENOMEM;
	ck->from = f;
	f += ck->nfrom;
	if (!(f->name = strdup(name)))
		return CDP_ENOMEM;
	f->kind = kind;
	memcpy(f->sha256, sha256, sizeof f->sha256);
	ck->nfrom++;
	return CDP_OK;
}
