/* loss.c: the loss named in the cfg, composed from the backend's ops and
 * from host code for the terms the backends have no op for (loss.h).
 *
 * The ops return summed losses and counts and scale the gradient by a
 * factor given up front; the mean needs the count, which is only known
 * after the op ran (and, split over ranks, only after the sums are
 * added). So the backend ce/bce op runs with gscale = 1 in cdp_loss_parts
 * and cdp_loss_finish scales its gradient by weight/count; the other
 * terms add theirs in finish: the host terms (copied to the host, added,
 * copied back), then the backend's sigmoid Dice, which accumulates into
 * dlogits. Host terms that are functions of the probabilities (dice,
 * jaccard, tversky, lovasz) gather d(loss)/d(p) first and go through the
 * softmax (sigmoid) Jacobian once per pixel (loss_host.c).
 */
#include "loss.h"
#include "loss_host.h"
#include "cdp_num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { NULL, "ce", "bce", "dice", "bce+dice", "jaccard",
                                     "tversky", "focal", "lovasz", NULL, "mse", "l1",
                                     "huber" };

int cdp_loss_kind(const char *name)
{
	for (int i = 1; name && i <= CDP_LOSS_HUBER; i++)
		if (names[i] && strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *cdp_loss_name(int kind)
{
	return kind >= 1 && kind <= CDP_LOSS_HUBER && names[kind] ? names[kind] : "?";
}

int cdp_loss_kind_is_reg(int kind)
{
	return kind == CDP_LOSS_MSE || kind == CDP_LOSS_L1 || kind == CDP_LOSS_HUBER;
}

int cdp_loss_parse(const char *name, int classes, int kind[CDP_LOSS_MAX_TERMS], int *softmax,
                   char *err, size_t cap)
{
	char tok[16];
	int nt = 0, ce = 0, bce = 0;
	const char *p = name ? name : "";

	for (;;) {
		size_t len = strcspn(p, "+");
		int k;
		if (len == 0 || len >= sizeof tok) {
			snprintf(err, cap, "loss '%.32s': want terms ce, bce, dice, jaccard, tversky, "
			         "focal or lovasz joined by '+', or one of mse, l1, huber",
			         name ? name : "");
			return -1;
		}
		memcpy(tok, p, len);
		tok[len] = 0;
		k = cdp_loss_kind(tok);
		if (k < 0 || k == CDP_LOSS_BCE_DICE) {
			snprintf(err, cap, "loss '%.32s': '%s' is not ce, bce, dice, jaccard, tversky, "
			         "focal, lovasz, mse, l1 or huber", name, tok);
			return -1;
		}
		for (int i = 0; i < nt; i++)
			if (kind[i] == k) {
				snprintf(err, cap, "loss '%.32s': '%s' twice", name, tok);
				return -1;
			}
		if (nt == CDP_LOSS_MAX_TERMS) {
			snprintf(err, cap, "loss '%.32s': more than %d terms", name, CDP_LOSS_MAX_TERMS);
			return -1;
		}
		kind[nt++] = k;
		ce |= k == CDP_LOSS_CE;
		bce |= k == CDP_LOSS_BCE;
		if (!p[len])
			break;
		p += len + 1;
	}
	for (int i = 0; i < nt; i++)
		if (cdp_loss_kind_is_reg(kind[i]) && nt > 1) {
			snprintf(err, cap, "loss '%.32s': the regression loss %s stands alone", name,
			         names[kind[i]]);
			return -1;
		}
	if (cdp_loss_kind_is_reg(kind[0])) {
		*softmax = 0;
		return 1;
	}
	if (ce && bce) {
		snprintf(err, cap, "loss '%.32s': ce (softmax) and bce (sigmoid) do not mix", name);
		return -1;
	}
	if (bce && classes > 2) {
		snprintf(err, cap, "loss=%.32s is binary: classes must be 2, not %d", name, classes);
		return -1;
	}
	*softmax = ce || (!bce && classes > 2);
	return nt;
}

void cdp_loss_opt_default(cdp_loss_opt *o)
{
	memset(o, 0, sizeof *o);
	o->name = "ce";
	o->ignore = -1;
	o->smooth = 1.0f;
	o->gamma = 2.0f;
	o->tv_alpha = 0.5f;
	o->tv_beta = 0.5f;
	o->huber_delta = 1.0f;
}

static int finite_ge0(float v)
{
	return v >= 0 && isfinite(v);
}

/* cdp_loss_init_opt of a regression loss: classes are the outputs T; of
 * the options only huber_delta and one loss weight apply. *cw_fault as
 * init_opt's. */
static int init_reg(cdp_loss *l, cdp_backend *be, const cdp_loss_opt *o, int kind,
                    int *cw_fault, char *err, size_t cap)
{
	if (o->classes < 1 || o->classes > CDP_LOSS_MAX_CLASSES) {
		snprintf(err, cap, "loss=%s needs 1 to %d outputs, not %d", o->name,
		         CDP_LOSS_MAX_CLASSES, o->classes);
		return -1;
	}
	if (!(o->huber_delta > 0) || !isfinite(o->huber_delta)) {
		snprintf(err, cap, "huber_delta %g is not a finite number > 0", (double)o->huber_delta);
		return -1;
	}
	if (o->class_w || o->alpha || o->label_smoothing > 0) {
		*cw_fault = o->class_w != NULL;
		snprintf(err, cap, "class weights, focal_alpha and label smoothing are for class "
		         "losses, not loss=%s", o->name);
		return -1;
	}
	/* a weight 0 would train nothing */
	if (o->weights && (o->nweights != 1 || !finite_ge0(o->weights[0]) || o->weights[0] == 0)) {
		snprintf(err, cap, "loss=%s takes one loss weight, a finite number > 0", o->name);
		return -1;
	}
	l->be = be;
	snprintf(l->name, sizeof l->name, "%s", o->name);
	l->kind = kind;
	l->reg = (kind == CDP_LOSS_MSE ? CDP_REG_MSE : kind == CDP_LOSS_L1 ? CDP_REG_L1
	          : CDP_REG_HUBER) + 1;
	l->classes = l->k = o->classes;
	l->ignore = -1;
	l->huber_delta = o->huber_delta;
	l->smooth = o->smooth;
	l->gamma = o->gamma;
	l->tv_alpha = o->tv_alpha;
	l->tv_beta = o->tv_beta;
	l->nterm = 1;
	l->npart = 2;
	l->term[0].kind = kind;
	l->term[0].weight = o->weights ? o->weights[0] : 1.0f;
	l->term[0].np = 2;
	return 0;
}

/* o's class weights, one per class: 0, or -1 with the reason in err */
static int class_w_check(const cdp_loss_opt *o, int classes, char *err, size_t cap)
{
	double wsum = 0;

	if (o->nw != classes) {
		snprintf(err, cap, "%d class weights for %d classes", o->nw, classes);
		return -1;
	}
	for (int i = 0; i < o->nw; i++) {
		if (!finite_ge0(o->class_w[i])) {
			snprintf(err, cap, "class weight %d (%g) is not a finite number >= 0", i,
			         (double)o->class_w[i]);
			return -1;
		}
		wsum += o->class_w[i];
	}
	/* all 0 would train nothing */
	if (wsum <= 0) {
		snprintf(err, cap, "all class weights are 0");
		return -1;
	}
	return 0;
}

/* cdp_loss_init_opt; on an error *cw_fault is 1 when the class weights
 * are at fault (init_cfg cites class_weights=), else left as it was */
static int init_opt(cdp_loss *l, cdp_backend *be, const cdp_loss_opt *o, int *cw_fault,
                    char *err, size_t cap)
{
	int kind[CDP_LOSS_MAX_TERMS], nt, sm, classes = o->classes, host = 0, has_ce = 0;
	double lsum = 0;

	memset(l, 0, sizeof(*l));
	if ((nt = cdp_loss_parse(o->name, classes, kind, &sm, err, cap)) < 0)
		return -1;
	if (cdp_loss_kind_is_reg(kind[0]))
		return init_reg(l, be, o, kind[0], cw_fault, err, cap);
	if (sm && (classes < 2 || classes > CDP_LOSS_MAX_CLASSES)) {
		snprintf(err, cap, "loss=%s needs 2 to %d classes, not %d", o->name,
		         CDP_LOSS_MAX_CLASSES, classes);
		return -1;
	}
	if (!sm && classes != 2) {
		snprintf(err, cap, "loss=%s is binary: classes must be 2, not %d", o->name, classes);
		return -1;
	}
	if (!finite_ge0(o->smooth)) {
		snprintf(err, cap, "dice smoothing %g is not a finite number >= 0", (double)o->smooth);
		return -1;
	}
	if (!finite_ge0(o->gamma) || !finite_ge0(o->tv_alpha) || !finite_ge0(o->tv_beta)) {
		snprintf(err, cap, "focal_gamma, tversky_alpha and tversky_beta must be finite "
		         "numbers >= 0");
		return -1;
	}
	if (!(o->label_smoothing >= 0 && o->label_smoothing <= 1)) {
		snprintf(err, cap, "label smoothing %g is not in [0, 1]", (double)o->label_smoothing);
		return -1;
	}
	if (o->weights && o->nweights != nt) {
		snprintf(err, cap, "%d loss weights for the %d terms of loss=%s", o->nweights, nt,
		         o->name);
		return -1;
	}
	for (int i = 0; o->weights && i < nt; i++) {
		if (!finite_ge0(o->weights[i])) {
			snprintf(err, cap, "loss weight %g is not a finite number >= 0",
			         (double)o->weights[i]);
			return -1;
		}
		lsum += o->weights[i];
	}
	/* all 0 would train nothing, as all class weights 0 (class_w_check) */
	if (o->weights && lsum <= 0) {
		snprintf(err, cap, "all loss weights are 0");
		return -1;
	}
	for (int i = 0; i < nt; i++)
		has_ce |= kind[i] == CDP_LOSS_CE;
	if ((o->class_w || o->label_smoothing > 0) && !has_ce) {
		*cw_fault = o->class_w != NULL;
		snprintf(err, cap, "%s a term ce, not loss=%s",
		         o->class_w ? "class weights need" : "label smoothing needs", o->name);
		return -1;
	}
	if (o->class_w && class_w_check(o, classes, err, cap) < 0) {
		*cw_fault = 1;
		return -1;
	}
	if (o->alpha) {
		if (o->nalpha != 1 && o->nalpha != classes) {
			snprintf(err, cap, "focal_alpha: %d values, want 1 or one per class (%d)",
			         o->nalpha, classes);
			return -1;
		}
		for (int i = 0; i < o->nalpha; i++)
			if (!finite_ge0(o->alpha[i]) || (!sm && o->nalpha == 1 && o->alpha[i] > 1)) {
				snprintf(err, cap, "focal_alpha %g is not a finite number >= 0 (a scalar of a "
				         "binary loss: in [0, 1])", (double)o->alpha[i]);
				return -1;
			}
	}
	l->be = be;
	snprintf(l->name, sizeof l->name, "%s", o->name);
	l->kind = nt == 1 ? kind[0] : nt == 2 && kind[0] == CDP_LOSS_BCE && kind[1] == CDP_LOSS_DICE ?
	          CDP_LOSS_BCE_DICE : CDP_LOSS_SUM;
	l->classes = classes;
	l->k = sm ? classes : 1;
	l->ignore = o->ignore;
	l->smooth = o->smooth;
	l->gamma = o->gamma;
	l->tv_alpha = o->tv_alpha;
	l->tv_beta = o->tv_beta;
	l->label_smoothing = o->label_smoothing;
	l->nterm = nt;
	for (int i = 0; i < nt; i++) {
		cdp_loss_term *t = &l->term[i];
		int overlap = kind[i] == CDP_LOSS_DICE || kind[i] == CDP_LOSS_JACCARD ||
		              kind[i] == CDP_LOSS_TVERSKY;
		t->kind = kind[i];
		t->weight = o->weights ? o->weights[i] : 1.0f;
		t->off = l->npart;
		t->np = overlap ? 3 * (sm ? classes : 1) : 2;
		t->host = kind[i] == CDP_LOSS_CE ? o->label_smoothing > 0 :
		          kind[i] == CDP_LOSS_BCE ? 0 : kind[i] == CDP_LOSS_DICE ? sm : 1;
		host |= t->host;
		l->npart += t->np;
	}
	if (!(l->alpha = malloc((size_t)classes * sizeof *l->alpha)))
		goto oom;
	for (int c = 0; c < classes; c++)
		l->alpha[c] = !o->alpha ? 1.0f : o->nalpha == classes ? o->alpha[c] :
		              sm ? o->alpha[0] : c ? o->alpha[0] : 1.0f - o->alpha[0];
	if (host && !(l->host = calloc(1, sizeof *l->host)))
		goto oom;
	if (o->class_w) {
		l->ncw = o->nw;
		l->cw_host = malloc((size_t)o->nw * sizeof(float));
		l->class_w = be->alloc(be, (size_t)o->nw * sizeof(float));
		if (!l->cw_host || !l->class_w)
			goto oom;
		memcpy(l->cw_host, o->class_w, (size_t)o->nw * sizeof(float));
		be->to_device(be, l->class_w, o->class_w, (size_t)o->nw * sizeof(float));
	}
	return 0;
oom:
	cdp_loss_free(l);
	snprintf(err, cap, "out of memory");
	return -1;
}

int cdp_loss_init_opt(cdp_loss *l, cdp_backend *be, const cdp_loss_opt *o, char *err,
                      size_t cap)
{
	int cw_fault;

	return init_opt(l, be, o, &cw_fault, err, cap);
}

int cdp_loss_init(cdp_loss *l, cdp_backend *be, const char *name, int classes, int ignore,
                  const float *class_w, int nw, float smooth, char *err, size_t cap)
{
	cdp_loss_opt o;

	cdp_loss_opt_default(&o);
	o.name = name;
	o.classes = classes;
	o.ignore = ignore;
	o.class_w = class_w;
	o.nw = nw;
	o.smooth = smooth;
	return cdp_loss_init_opt(l, be, &o, err, cap);
}

/* [net] key of comma-separated numbers >= 0 into *v (malloc'd, *n of
 * them; NULL when the key is absent) */
static int cfg_list(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float **v, int *n,
                    char *err, size_t cap)
{
	const char *str = cdp_cfg_str(s, key, NULL);
	char *copy, *save = NULL;

	*v = NULL;
	*n = 0;
	if (!str)
		return 0;
	copy = strdup(str);
	*v = calloc(strlen(str) / 2 + 2, sizeof **v);
	if (!copy || !*v) {
		free(copy);
		return cdp_cfg_fail(cfg, s, key, NULL, err, cap, "out of memory");
	}
	/* commas or semicolons between the items: an override on the command
	 * line (--model m.cfg:class_weights=1;2) cannot hold a comma */
	if (!*str || strchr(",;", str[strlen(str) - 1]) || strchr(",;", str[0]) ||
	    strstr(str, ",,") || strstr(str, ";;") || strstr(str, ",;") || strstr(str, ";,")) {
		free(copy);
		return cdp_cfg_fail(cfg, s, key, NULL, err, cap, "empty item");
	}
	for (char *t = strtok_r(copy, ",;", &save); t; t = strtok_r(NULL, ",;", &save)) {
		double d;
		if (cdp_parse_double(t, 0, 1e30, &d) != 0) {
			cdp_cfg_fail(cfg, s, key, NULL, err, cap, "'%.32s' is not a number >= 0", t);
			free(copy);
			return -1;
		}
		(*v)[(*n)++] = (float)d;
	}
	free(copy);
	return 0;
}

static int has_term(const cdp_loss *l, int kind)
{
	if (l->kind == kind)
		return 1;
	for (int i = 0; i < l->nterm; i++)
		if (l->term[i].kind == kind)
			return 1;
	return 0;
}

/* A term's own option given for a loss without that term would be read and
 * silently ignored (focal_alpha with loss=ce trains plain ce): its key's
 * line and why, or 0. */
static const char *stray_option(const cdp_loss *l, const cdp_cfg_section *s, char *why,
                                size_t cap)
{
	static const struct { const char *key, *terms; int k1, k2, k3; } own[] = {
		{ "dice_smooth", "dice, jaccard or tversky", CDP_LOSS_DICE, CDP_LOSS_JACCARD,
		  CDP_LOSS_TVERSKY },
		{ "focal_gamma", "focal", CDP_LOSS_FOCAL, 0, 0 },
		{ "focal_alpha", "focal", CDP_LOSS_FOCAL, 0, 0 },
		{ "tversky_alpha", "tversky", CDP_LOSS_TVERSKY, 0, 0 },
		{ "tversky_beta", "tversky", CDP_LOSS_TVERSKY, 0, 0 },
		{ "huber_delta", "huber", CDP_LOSS_HUBER, 0, 0 },
	};

	for (int i = 0; i < s->nkv; i++)
		for (size_t j = 0; j < sizeof own / sizeof own[0]; j++)
			if (strcmp(s->kv[i].key, own[j].key) == 0 && !has_term(l, own[j].k1) &&
			    !(own[j].k2 && has_term(l, own[j].k2)) &&
			    !(own[j].k3 && has_term(l, own[j].k3))) {
				snprintf(why, cap, "%s is for a loss with a term %s, not loss=%s",
				         own[j].key, own[j].terms, l->name);
				return own[j].key;
			}
	return NULL;
}

/* cdp_loss_init_cfg, and with multi > 0 that of a multi-label head of
 * `multi` outputs: the binary loss (classes 2), class_weights= its
 * positive weights */
static int init_cfg(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg, cdp_cfg_section *s,
                    int classes, int multi, char *err, size_t cap)
{
	cdp_loss_opt o;
	float *cw = NULL, *lw = NULL, *al = NULL;
	int rc = -1, nw, cw_fault = 0;
	const char *key = NULL;
	char why[200];

	memset(l, 0, sizeof *l);
	cdp_loss_opt_default(&o);
	o.name = cdp_cfg_str(s, "loss", "ce");
	o.classes = classes;
	if (cdp_cfg_int(cfg, s, "ignore", -1, -1, 1 << 30, &o.ignore, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "dice_smooth", 1.0f, 0.0f, 1e30f, &o.smooth, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "focal_gamma", 2.0f, 0.0f, 1e3f, &o.gamma, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "tversky_alpha", 0.5f, 0.0f, 1e30f, &o.tv_alpha, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "tversky_beta", 0.5f, 0.0f, 1e30f, &o.tv_beta, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "label_smoothing", 0.0f, 0.0f, 1.0f, &o.label_smoothing, err,
	                  cap) < 0 ||
	    cdp_cfg_float(cfg, s, "huber_delta", 1.0f, 1e-30f, 1e30f, &o.huber_delta, err, cap) < 0 ||
	    cfg_list(cfg, s, "class_weights", &cw, &o.nw, err, cap) < 0 ||
	    cfg_list(cfg, s, "loss_weights", &lw, &o.nweights, err, cap) < 0 ||
	    cfg_list(cfg, s, "focal_alpha", &al, &o.nalpha, err, cap) < 0)
		goto out;
	o.class_w = multi ? NULL : cw;
	o.weights = lw;
	o.alpha = al;
	nw = o.nw;
	if (multi) {
		o.classes = 2;
		o.nw = 0;
	}
	why[0] = '\0';
	if (init_opt(l, be, &o, &cw_fault, why, sizeof why) == 0 && multi && cw) {
		/* class_weights= are the positive weights: at fault in either */
		cw_fault = 1;
		if (nw != multi)
			snprintf(why, sizeof why, "%d class weights for the %d labels of a multi-label "
			         "head", nw, multi);
		else if (cdp_loss_set_pos_weight(l, cw, nw, why, sizeof why) == 0)
			why[0] = '\0';
		if (why[0])
			cdp_loss_free(l);
	}
	if (!why[0] && (key = stray_option(l, s, why, sizeof why)))
		cdp_loss_free(l);
	if (why[0]) {
		if (!key && cw_fault)
			key = "class_weights";
		/* the line of the key at fault, else [net]'s */
		cdp_cfg_fail(cfg, s, key, "[net]", err, cap, "%s", why);
		goto out;
	}
	rc = 0;
out:
	free(cw);
	free(lw);
	free(al);
	return rc;
}

int cdp_loss_init_cfg(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg, cdp_cfg_section *s,
                      int classes, char *err, size_t cap)
{
	return init_cfg(l, be, cfg, s, classes, 0, err, cap);
}

int cdp_loss_init_cfg_multi(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg,
                            cdp_cfg_section *s, int k, char *err, size_t cap)
{
	if (k < 1) {
		snprintf(err, cap, "%s: [net]: a multi-label head of %d labels", cfg->path, k);
		return -1;
	}
	return init_cfg(l, be, cfg, s, 2, k, err, cap);
}

int cdp_loss_reweight(cdp_loss *l, const float *cw, int nw, char *err, size_t cap)
{
	cdp_loss_opt o;
	float w[CDP_LOSS_MAX_TERMS], *alpha = NULL;
	cdp_loss old = *l;
	char name[sizeof l->name];
	int rc;

	cdp_loss_opt_default(&o);
	memcpy(name, l->name, sizeof name);
	o.name = name;
	o.classes = l->classes;
	o.ignore = l->ignore;
	o.class_w = cw;
	o.nw = nw;
	o.smooth = l->smooth;
	o.gamma = l->gamma;
	o.tv_alpha = l->tv_alpha;
	o.tv_beta = l->tv_beta;
	o.label_smoothing = l->label_smoothing;
	o.huber_delta = l->huber_delta;
	for (int i = 0; i < l->nterm; i++)
		w[i] = l->term[i].weight;
	o.weights = w;
	o.nweights = l->nterm;
	alpha = l->alpha;
	o.alpha = alpha;
	o.nalpha = l->classes;
	l->alpha = NULL;
	cdp_loss_free(l);
	/* the binary alpha was already expanded per class: keep it so */
	rc = cdp_loss_init_opt(l, old.be, &o, err, cap);
	free(alpha);
	return rc;
}

void cdp_loss_free(cdp_loss *l)
{
	if (l->class_w)
		l->be->free(l->be, l->class_w);
	free(l->cw_host);
	free(l->alpha);
	free(l->pos_w);
	if (l->host) {
		free(l->host->x);
		free(l->host->g);
		free(l->host->y);
		free(l->host->pr);
		free(l->host->lp);
		free(l->host->dp);
		free(l->host->sv);
		free(l->host);
	}
	memset(l, 0, sizeof(*l));
}

int cdp_loss_set_pos_weight(cdp_loss *l, const float *w, int n, char *err, size_t cap)
{
	if (l->nterm != 1 || l->term[0].kind != CDP_LOSS_BCE) {
		snprintf(err, cap, "positive weights need loss=bce alone, not loss=%s", l->name);
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (!finite_ge0(w[i])) {
			snprintf(err, cap, "positive weight %g is not a finite number >= 0", (double)w[i]);
			return -1;
		}
	free(l->pos_w);
	if (!(l->pos_w = malloc((size_t)(n ? n : 1) * sizeof *l->pos_w)) ||
	    (!l->host && !(l->host = calloc(1, sizeof *l->host)))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	memcpy(l->pos_w, w, (size_t)n * sizeof *w);
	l->npos_w = n;
	l->term[0].host = 1;
	return 0;
}

int cdp_loss_has(const cdp_loss *l, int kind)
{
	for (int i = 0; i < l->nterm; i++)
		if (l->term[i].kind == kind)
			return 1;
	return 0;
}

int cdp_loss_check_labels(const cdp_loss *l, const int32_t *labels, size_t n, size_t *bad)
{
	for (size_t i = 0; i < n; i++)
		if (labels[i] != l->ignore && (labels[i] < 0 || labels[i] >= l->classes)) {
			*bad = i;
			return -1;
		}
	return 0;
}

/* ---- the loss ---------------------------------------------------------------- */

/* the backend ce/bce term, or -1 */
static int backend_mean(const cdp_loss *l)
{
	for (int i = 0; i < l->nterm; i++)
		if (!l->term[i].host && (l->term[i].kind == CDP_LOSS_CE || l->term[i].kind == CDP_LOSS_BCE))
			return i;
	return -1;
}

static int any_host(const cdp_loss *l)
{
	for (int i = 0; i < l->nterm; i++)
		if (l->term[i].host)
			return 1;
	return 0;
}

void cdp_loss_parts(const cdp_loss *l, int n, int hw, const float *logits,
                    const int32_t *labels, float *dlogits, double *part)
{
	cdp_backend *be = l->be;
	int bm = backend_mean(l);

	memset(part, 0, (size_t)l->npart * sizeof *part);
	if (bm < 0)
		be->fill(be, dlogits, 0.0f, (size_t)n * l->k * hw);
	for (int i = 0; i < l->nterm; i++) {
		const cdp_loss_term *t = &l->term[i];
		double *p = part + t->off;
		if (t->host)
			continue;
		if (t->kind == CDP_LOSS_CE)
			p[0] = be->softmax_ce(be, n, l->k, hw, logits, labels, l->ignore, l->class_w,
			                      dlogits, 1.0f, &p[1]);
		else if (t->kind == CDP_LOSS_BCE)
			p[0] = be->bce_logits(be, n, hw, logits, labels, l->ignore, dlogits, 1.0f, &p[1]);
		else if (t->kind == CDP_LOSS_DICE)
			be->dice_sums(be, n, hw, logits, labels, l->ignore, p);
	}
	if (any_host(l)) {
		if (cdp_loss_host_fetch(l, n, hw, logits, labels) < 0) {
			for (int i = 0; i < l->npart; i++)
				part[i] = NAN;
			return;
		}
		cdp_loss_host_parts(l, n, hw, part);
	}
}

void cdp_loss_of(const cdp_loss *l, const double *part, cdp_loss_result *r)
{
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < l->nterm; i++) {
		const cdp_loss_term *t = &l->term[i];
		const double *p = part + t->off;
		double v = 0;
		switch (t->kind) {
		case CDP_LOSS_CE:
		case CDP_LOSS_BCE:
		case CDP_LOSS_MSE:
		case CDP_LOSS_L1:
		case CDP_LOSS_HUBER:
			r->sum = p[0];
			r->count = p[1];
			/* fall through */
		case CDP_LOSS_FOCAL:
		case CDP_LOSS_LOVASZ:
			if (p[1] > 0 || isnan(p[1]))
				v = p[0] / p[1];
			break;
		case CDP_LOSS_DICE:
			if (!t->host) {
				/* d <= 0 only with smooth 0 and no pixel counted */
				double d = p[1] + p[2] + l->smooth;
				if (d > 0 || isnan(d))
					v = 1.0 - (2 * p[0] + l->smooth) / d;
				break;
			}
			/* fall through */
		default:
			v = cdp_loss_overlap_value(l, t->kind, p);
		}
		if (t->kind == CDP_LOSS_DICE)
			r->dice = v;
		r->term[i] = v;
		r->loss += t->weight * v;
	}
}

void cdp_loss_finish(const cdp_loss *l, int n, int hw, const float *logits,
                     const int32_t *labels, const double *part, double gmul,
                     float *dlogits, cdp_loss_result *r)
{
	cdp_backend *be = l->be;
	size_t nx = (size_t)n * l->k * hw;
	int bm = backend_mean(l);

	cdp_loss_of(l, part, r);
	if (bm >= 0) {
		double cnt = part[l->term[bm].off + 1];
		if (cnt > 0)
			be->scale(be, dlogits, (float)(l->term[bm].weight * gmul / cnt), nx);
	}
	if (any_host(l)) {
		if (cdp_loss_host_fetch(l, n, hw, logits, labels) < 0) {
			be->fill(be, dlogits, NAN, nx);
			return;
		}
		be->to_host(be, l->host->g, dlogits, nx * sizeof(float));
		cdp_loss_host_grad(l, n, hw, part, gmul);
		be->to_device(be, dlogits, l->host->g, nx * sizeof(float));
	}
	for (int i = 0; i < l->nterm; i++)
		if (!l->term[i].host && l->term[i].kind == CDP_LOSS_DICE)
			be->dice_logits(be, n, hw, logits, labels, l->ignore, l->smooth,
			                part + l->term[i].off, dlogits, (float)(l->term[i].weight * gmul));
}

void cdp_loss_compute(const cdp_loss *l, int n, int hw, const float *logits,
                      const int32_t *labels, float *dlogits, cdp_loss_result *r)
{
	double stack[64], *part = l->npart <= 64 ? stack : calloc((size_t)l->npart, sizeof *part);

	if (!part) {
		memset(r, 0, sizeof *r);
		r->loss = NAN;
		l->be->fill(l->be, dlogits, NAN, (size_t)n * l->k * hw);
		return;
	}
	cdp_loss_parts(l, n, hw, logits, labels, dlogits, part);
	cdp_loss_finish(l, n, hw, logits, labels, part, 1.0, dlogits, r);
	if (part != stack)
		free(part);
}

/* ---- regression ---------------------------------------------------------- */

void cdp_loss_reg_parts(const cdp_loss *l, int n, int hw, const float *pred,
                        const float *target, float *dpred, double *part)
{
	part[0] = l->be->reg_loss(l->be, l->reg - 1, n, l->k, hw, pred, target, l->huber_delta,
	                          dpred, 1.0f, &part[1]);
}

void cdp_loss_reg_finish(const cdp_loss *l, int n, int hw, const double *part, double gmul,
                         float *dpred, cdp_loss_result *r)
{
	cdp_loss_of(l, part, r);
	/* no counted element: the gradient is already all 0 */
	if (part[1] > 0)
		l->be->scale(l->be, dpred, (float)(l->term[0].weight * gmul / part[1]),
		             (size_t)n * l->k * hw);
}

void cdp_loss_reg_compute(const cdp_loss *l, int n, int hw, const float *pred,
                          const float *target, float *dpred, cdp_loss_result *r)
{
	double part[2];

	cdp_loss_reg_parts(l, n, hw, pred, target, dpred, part);
	cdp_loss_reg_finish(l, n, hw, part, 1.0, dpred, r);
}
