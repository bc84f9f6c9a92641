/* optim.c: optimizer settings, schedule, clipping and accumulation around
 * the backend's sgd_step/adamw_step (optim.h).
 *
 * The state is two device blocks of the parameter block's size and layout,
 * so data-parallel ranks keep identical state without communicating it, and
 * a checkpoint saves it as two flat arrays.
 *
 * Parameter groups are the segments of cdp_optim_set_layers (frozen
 * layers, lr_mult). Not done: a decay exemption for biases or batchnorm,
 * schedules other than the three policies with linear warm-up.
 */
#include "optim.h"
#include "cdp_error.h"
#include "net.h"

#include <stdlib.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = { NULL, "sgd", "adamw" };
static const char *const policy_names[] = { "constant", "step", "cosine" };

const char *cdp_optim_type_name(int type)
{
	return type == CDP_OPT_SGD || type == CDP_OPT_ADAMW ? type_names[type] : "?";
}

const char *cdp_optim_policy_name(int policy)
{
	return policy >= CDP_LR_CONSTANT && policy <= CDP_LR_COSINE ? policy_names[policy] : "?";
}

void cdp_optim_defaults(cdp_optim_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->type = CDP_OPT_SGD;
	c->lr = 0.01f;
	c->momentum = 0.9f;
	c->beta1 = 0.9f;
	c->beta2 = 0.999f;
	c->eps = 1e-8f;
	c->policy = CDP_LR_CONSTANT;
	c->step_size = 1000;
	c->gamma = 0.1f;
	c->warmup_factor = 0.1f;
	c->accumulate = 1;
}

/* Index of s in names[lo..hi], or -1. */
static int pick(const char *s, const char *const *names, int lo, int hi)
{
	for (int i = lo; i <= hi; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int cdp_optim_cfg_parse(cdp_optim_cfg *c, const cdp_cfg *cfg, cdp_cfg_section *s,
                        char *err, size_t cap)
{
	const char *t = cdp_cfg_str(s, "optimizer", "sgd");
	const char *p = cdp_cfg_str(s, "lr_policy", "constant");
	int nesterov, step_size, warmup;

	cdp_optim_defaults(c);
	c->type = pick(t, type_names, 1, 2);
	if (c->type < 0) {
		return cdp_cfg_fail(cfg, s, "optimizer", NULL, err, cap, "'%.32s' is not sgd or adamw",
		                    t);
	}
	c->policy = pick(p, policy_names, 0, 2);
	if (c->policy < 0) {
		return cdp_cfg_fail(cfg, s, "lr_policy", NULL, err, cap,
		                    "'%.32s' is not constant, step or cosine", p);
	}
	if (c->type == CDP_OPT_ADAMW) {
		c->lr = 0.001f;
		c->weight_decay = 0.01f;
	}
	if (cdp_cfg_float(cfg, s, "lr", c->lr, 0, CDP_OPTIM_LR_MAX, &c->lr, err, cap) < 0 ||
	    cdp_cfg_float_below(cfg, s, "momentum", c->momentum, 0, CDP_OPTIM_MOMENTUM_END,
	                        &c->momentum, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "nesterov", 0, 0, 1, &nesterov, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "weight_decay", c->weight_decay, 0, CDP_OPTIM_WD_MAX,
	                  &c->weight_decay, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "beta1", c->beta1, 0, 0.999999f, &c->beta1, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "beta2", c->beta2, 0, 0.999999f, &c->beta2, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "adam_eps", c->eps, 1e-30f, 1, &c->eps, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "lr_step", 1000, 1, 1 << 30, &step_size, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "lr_gamma", c->gamma, 0, 1e6f, &c->gamma, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "lr_min", 0, 0, 1e6f, &c->min_lr, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "warmup", 0, 0, 1 << 30, &warmup, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "warmup_factor", c->warmup_factor, 0, 1, &c->warmup_factor,
	                  err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "clip_norm", 0, 0, 1e30f, &c->clip_norm, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "accumulate", 1, 1, 1 << 20, &c->accumulate, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "ema", 0, 0, 0.99999994f, &c->ema, err, cap) < 0)
		return -1;
	c->nesterov = nesterov;
	c->step_size = step_size;
	c->warmup = warmup;
	/* total_steps is the trainer's to set, so only check what it cannot
	 * fix: a contradiction inside the file */
	if (c->nesterov && c->momentum == 0)
		return cdp_cfg_fail(cfg, s, "nesterov", NULL, err, cap, "nesterov=1 needs momentum > 0");
	return 0;
}

int cdp_optim_cfg_check(const cdp_optim_cfg *c, char *err, size_t cap)
{
	if (c->type != CDP_OPT_SGD && c->type != CDP_OPT_ADAMW) {
		snprintf(err, cap, "unknown optimizer type %d", c->type);
		return -1;
	}
	if (!(c->lr >= 0) || !isfinite(c->lr) || !(c->weight_decay >= 0) ||
	    !isfinite(c->weight_decay)) {
		snprintf(err, cap, "lr and weight_decay must be finite numbers >= 0");
		return -1;
	}
	if (c->type == CDP_OPT_SGD &&
	    (!(c->momentum >= 0 && c->momentum < CDP_OPTIM_MOMENTUM_END) ||
	     (c->nesterov && c->momentum == 0))) {
		snprintf(err, cap, c->nesterov && c->momentum == 0 ? "nesterov needs momentum > 0"
		                                                   : "momentum must be in [0, 1)");
		return -1;
	}
	if (c->type == CDP_OPT_ADAMW && (!(c->beta1 >= 0) || !(c->beta1 < 1) ||
	                                 !(c->beta2 >= 0) || !(c->beta2 < 1) || !(c->eps > 0))) {
		snprintf(err, cap, "adamw needs 0 <= beta1, beta2 < 1 and eps > 0");
		return -1;
	}
	if (c->policy < CDP_LR_CONSTANT || c->policy > CDP_LR_COSINE) {
		snprintf(err, cap, "unknown lr policy %d", c->policy);
		return -1;
	}
	if (c->policy == CDP_LR_STEP && (c->step_size < 1 || !(c->gamma >= 0))) {
		snprintf(err, cap, "lr_policy=step needs lr_step >= 1 and lr_gamma >= 0");
		return -1;
	}
	if (c->policy == CDP_LR_COSINE && (c->total_steps <= c->warmup || !(c->min_lr >= 0))) {
		snprintf(err, cap, "lr_policy=cosine needs more total steps (%ld) than warm-up steps (%ld)",
		         c->total_steps, c->warmup);
		return -1;
	}
	if (c->warmup < 0 || !(c->warmup_factor >= 0) || c->warmup_factor > 1) {
		snprintf(err, cap, "warm-up needs warmup >= 0 and warmup_factor in [0, 1]");
		return -1;
	}
	if (!(c->clip_norm >= 0) || c->accumulate < 1) {
		snprintf(err, cap, "clip_norm must be >= 0 and accumulate >= 1");
		return -1;
	}
	return 0;
}

double cdp_optim_lr(const cdp_optim_cfg *c, long step)
{
	double lr = c->lr;
	long u;

	if (step < 0)
		step = 0;
	if (step < c->warmup) {
		double f = c->warmup_factor;
		return lr * (f + (1.0 - f) * (double)step / (double)c->warmup);
	}
	u = step - c->warmup;
	switch (c->policy) {
	case CDP_LR_STEP:
		return lr * pow(c->gamma, (double)(u / c->step_size));
	case CDP_LR_COSINE: {
		long span = c->total_steps - c->warmup;
		if (span <= 0 || u >= span)
			return c->min_lr;
		return c->min_lr + (lr - c->min_lr) * (1.0 + cos(M_PI * (double)u / (double)span)) / 2;
	}
	default:
		return lr;
	}
}

int cdp_optim_nblocks(const cdp_optim_cfg *c)
{
	if (c->type == CDP_OPT_ADAMW)
		return 2;
	return c->momentum != 0 ? 1 : 0;
}

double cdp_optim_next_lr(const cdp_optim *o)
{
	return cdp_optim_lr(&o->cfg, o->sched >= 0 ? o->sched : o->step);
}

int cdp_optim_init(cdp_optim *o, cdp_backend *be, const cdp_optim_cfg *c, size_t nparams,
                   char *err, size_t cap)
{
	int nb = cdp_optim_nblocks(c);

	memset(o, 0, sizeof(*o));
	o->sched = -1;
	if (cdp_optim_cfg_check(c, err, cap) < 0)
		return -1;
	if (nparams > SIZE_MAX / sizeof(float)) {
		snprintf(err, cap, "%zu parameters are too many", nparams);
		return -1;
	}
	o->cfg = *c;
	o->be = be;
	o->n = nparams;
	if (nb >= 1) {
		o->v = be->alloc(be, nparams * sizeof(float));
		if (nb == 2)
			o->m = be->alloc(be, nparams * sizeof(float));
		if (!o->v || (nb == 2 && !o->m)) {
			snprintf(err, cap, "cannot allocate %d optimizer blocks of %zu floats", nb, nparams);
			cdp_optim_free(o);
			return -1;
		}
	}
	return 0;
}

/* Appends [off, off + len) at (frozen, mult), merged with the last
 * segment when adjacent and alike. */
static void seg_add(cdp_optim_seg *seg, int *nseg, size_t off, size_t len, int frozen,
                    float mult)
{
	cdp_optim_seg *last = *nseg ? &seg[*nseg - 1] : NULL;

	if (len == 0)
		return;
	if (last && last->off + last->len == off && last->frozen == frozen && last->mult == mult) {
		last->len += len;
		return;
	}
	seg[(*nseg)++] = (cdp_optim_seg){ .off = off, .len = len, .mult = mult, .frozen = frozen };
}

static int seg_cmp(const void *a, const void *b)
{
	const cdp_optim_seg *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

int cdp_optim_set_layers(cdp_optim *o, const cdp_net *net, char *err, size_t cap)
{
	cdp_optim_seg *raw, *seg;
	int nraw = 0, nseg = 0;
	size_t next = 0;

	raw = calloc(2 * (size_t)net->nlayers + 1, sizeof *raw);
	seg = calloc(2 * (size_t)net->nlayers + 1, sizeof *seg);
	if (!raw || !seg) {
		free(raw);
		free(seg);
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (int i = 0; i < net->nlayers; i++) {
		const cdp_layer *l = &net->layers[i];
		if (l->w_len)
			raw[nraw++] = (cdp_optim_seg){ l->w_off, l->w_len, l->lr_mult, l->frozen };
		if (l->b_len)
			raw[nraw++] = (cdp_optim_seg){ l->b_off, l->b_len, l->lr_mult, l->frozen };
	}
	qsort(raw, (size_t)nraw, sizeof *raw, seg_cmp);
	for (int i = 0; i < nraw; i++) {
		if (raw[i].off != next)
			break;
		seg_add(seg, &nseg, raw[i].off, raw[i].len, raw[i].frozen, raw[i].mult);
		next += raw[i].len;
	}
	free(raw);
	if (next != o->n) {
		free(seg);
		snprintf(err, cap, "the layers' parameters cover %zu of %zu floats", next, o->n);
		return -1;
	}
	free(o->seg);
	o->seg = seg;
	o->nseg = nseg;
	return 0;
}

void cdp_optim_free(cdp_optim *o)
{
	free(o->seg);
	if (o->m)
		o->be->free(o->be, o->m);
	if (o->v)
		o->be->free(o->be, o->v);
	memset(o, 0, sizeof(*o));
}

int cdp_optim_micro_done(cdp_optim *o)
{
	o->micro++;
	return o->micro >= o->cfg.accumulate;
}

/* The update of [lo, lo + len) at lr, segment by segment (a segment cut
 * by the range keeps its settings). */
static void update(cdp_optim *o, float *params, float *grads, size_t lo, size_t len, double lr)
{
	cdp_backend *be = o->be;
	const cdp_optim_cfg *c = &o->cfg;
	size_t hi = lo + len;

	for (int i = 0; i < (o->seg ? o->nseg : 1); i++) {
		cdp_optim_seg s = o->seg ? o->seg[i] : (cdp_optim_seg){ 0, o->n, 1.0f, 0 };
		float lr_s = (float)(lr * s.mult); /* lr * 1.0 is lr exactly */
		size_t a = s.off > lo ? s.off : lo, b = s.off + s.len < hi ? s.off + s.len : hi;
		if (s.frozen || a >= b)
			continue;
		if (c->type == CDP_OPT_ADAMW)
			be->adamw_step(be, params + a, grads + a, o->m + a, o->v + a, b - a, lr_s,
			               c->beta1, c->beta2, c->eps, c->weight_decay, o->step + 1);
		else
			be->sgd_step(be, params + a, grads + a, o->v ? o->v + a : NULL, b - a, lr_s,
			             c->momentum, c->weight_decay, c->nesterov, o->step == 0);
	}
}

int cdp_optim_step(cdp_optim *o, float *params, float *grads)
{
	cdp_backend *be = o->be;
	const cdp_optim_cfg *c = &o->cfg;
	double norm, lr;

	if (c->accumulate > 1)
		be->scale(be, grads, 1.0f / (float)c->accumulate, o->n);
	norm = sqrt(be->sumsq(be, grads, o->n));
	o->last_norm = norm;
	o->micro = 0;
	if (!isfinite(norm)) {
		be->fill(be, grads, 0.0f, o->n);
		return CDP_ERANGE;
	}
	if (c->clip_norm > 0 && norm > c->clip_norm)
		be->scale(be, grads, (float)(c->clip_norm / (norm + 1e-6)), o->n);
	lr = cdp_optim_next_lr(o);
	o->last_lr = lr;
	update(o, params, grads, 0, o->n, lr);
	o->step++;
	be->fill(be, grads, 0.0f, o->n);
	return 0;
}

void cdp_optim_prox(cdp_optim *o, float *params, const float *d, double rho)
{
	for (int i = 0; i < (o->seg ? o->nseg : 1); i++) {
		cdp_optim_seg s = o->seg ? o->seg[i] : (cdp_optim_seg){ 0, o->n, 1.0f, 0 };
		/* the rate update() gave this segment, rounded as it was */
		double a = (double)(float)(o->last_lr * s.mult) * rho;
		if (s.frozen || s.len == 0)
			continue;
		/* c = a / (1 + a) as params + c (target - params), not
		 * (params + a target) / (1 + a): a small a then moves params by
		 * as little, and rho -> 0 leaves them as the update did */
		o->be->axpy(o->be, (float)(a / (1.0 + a)), d + s.off, params + s.off, s.len);
	}
}

int cdp_optim_parts_ok(const cdp_optim *o)
{
	return o->cfg.clip_norm <= 0 && o->cfg.accumulate == 1;
}

void cdp_optim_part(cdp_optim *o, float *params, float *grads, size_t off, size_t len)
{
	cdp_backend *be = o->be;

	if (len == 0)
		return;
	o->part_sq += be->sumsq(be, grads + off, len);
	update(o, params, grads, off, len, cdp_optim_next_lr(o));
	be->fill(be, grads + off, 0.0f, len);
}

int cdp_optim_parts_done(cdp_optim *o)
{
	double norm = sqrt(o->part_sq);

	o->part_sq = 0;
	o->micro = 0;
	o->last_norm = norm;
	o->last_lr = cdp_optim_next_lr(o);
	o->step++;
	return isfinite(norm) ? 0 : CDP_ERANGE;
}
