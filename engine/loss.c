/* loss.c: the loss named in the cfg, composed from the backend's ops
 * (loss.h).
 *
 * The ops return summed losses and counts and scale the gradient by a
 * factor given up front; the mean needs the count, which is only known
 * after the op ran. So each op runs with gscale = 1 and the gradient is
 * then scaled by 1/count: one more pass over dlogits, but no second
 * labels pass and the same code on both backends. Dice accumulates into
 * dlogits, so for bce+dice it runs after the BCE gradient is final, and for
 * dice alone dlogits is cleared first. The two halves, cdp_loss_parts and
 * cdp_loss_finish, let a caller add the sums over ranks in between.
 */
#include "loss.h"
#include "cdp_num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { NULL, "ce", "bce", "dice", "bce+dice" };

int cdp_loss_kind(const char *name)
{
	for (int i = 1; name && i <= CDP_LOSS_BCE_DICE; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *cdp_loss_name(int kind)
{
	return kind >= 1 && kind <= CDP_LOSS_BCE_DICE ? names[kind] : "?";
}

int cdp_loss_init(cdp_loss *l, cdp_backend *be, const char *name, int classes, int ignore,
                  const float *class_w, int nw, float smooth, char *err, size_t cap)
{
	int kind = cdp_loss_kind(name);
	double wsum = 0;

	memset(l, 0, sizeof(*l));
	if (kind < 0) {
		snprintf(err, cap, "loss '%.32s' is not ce, bce, dice or bce+dice", name ? name : "");
		return -1;
	}
	if (kind == CDP_LOSS_CE && (classes < 2 || classes > CDP_LOSS_MAX_CLASSES)) {
		snprintf(err, cap, "loss=ce needs 2 to %d classes, not %d", CDP_LOSS_MAX_CLASSES,
		         classes);
		return -1;
	}
	if (kind != CDP_LOSS_CE && classes != 2) {
		snprintf(err, cap, "loss=%s is binary: classes must be 2, not %d", name, classes);
		return -1;
	}
	if (!(smooth >= 0) || !isfinite(smooth)) {
		snprintf(err, cap, "dice smoothing %g is not a finite number >= 0", (double)smooth);
		return -1;
	}
	if (class_w) {
		if (kind != CDP_LOSS_CE) {
			snprintf(err, cap, "class weights need loss=ce, not loss=%s", name);
			return -1;
		}
		if (nw != classes) {
			snprintf(err, cap, "%d class weights for %d classes", nw, classes);
			return -1;
		}
		for (int i = 0; i < nw; i++) {
			if (!(class_w[i] >= 0) || !isfinite(class_w[i])) {
				snprintf(err, cap, "class weight %d (%g) is not a finite number >= 0",
				         i, (double)class_w[i]);
				return -1;
			}
			wsum += class_w[i];
		}
		if (wsum <= 0) {
			snprintf(err, cap, "all class weights are 0");
			return -1;
		}
	}
	l->be = be;
	l->kind = kind;
	l->classes = classes;
	l->k = kind == CDP_LOSS_CE ? classes : 1;
	l->ignore = ignore;
	l->smooth = smooth;
	if (class_w) {
		l->class_w = be->alloc(be, (size_t)nw * sizeof(float));
		if (!l->class_w) {
			snprintf(err, cap, "cannot allocate %d class weights", nw);
			return -1;
		}
		be->to_device(be, l->class_w, class_w, (size_t)nw * sizeof(float));
	}
	return 0;
}

int cdp_loss_init_cfg(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg, cdp_cfg_section *s,
                      int classes, char *err, size_t cap)
{
	const char *name = cdp_cfg_str(s, "loss", "ce");
	const char *cw = cdp_cfg_str(s, "class_weights", NULL);
	float smooth, *w = NULL;
	int ignore, nw = 0, rc = -1, line = s->line;
	char why[200];

	for (int i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, "class_weights") == 0)
			line = s->kv[i].line;
	if (cdp_cfg_int(cfg, s, "ignore", -1, -1, 1 << 30, &ignore, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "dice_smooth", 1.0f, 0.0f, 1e30f, &smooth, err, cap) < 0)
		return -1;
	if (cw) {
		/* one weight per comma-separated item, checked as a whole number */
		char *copy = strdup(cw), *save = NULL;
		w = calloc(strlen(cw) / 2 + 2, sizeof(float));
		if (!copy || !w) {
			free(copy);
			snprintf(err, cap, "%s:%d: out of memory", cfg->path, line);
			goto out;
		}
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			double v;
			if (cdp_parse_double(t, 0, 1e30, &v) != 0) {
				snprintf(err, cap, "%s:%d: option 'class_weights': '%.32s' is not a "
				         "number >= 0", cfg->path, line, t);
				free(copy);
				goto out;
			}
			w[nw++] = (float)v;
		}
		free(copy);
		if (nw == 0 || cw[strlen(cw) - 1] == ',' || cw[0] == ',' || strstr(cw, ",,")) {
			snprintf(err, cap, "%s:%d: option 'class_weights': empty item", cfg->path, line);
			goto out;
		}
	}
	if (cdp_loss_init(l, be, name, classes, ignore, w, nw, smooth, why, sizeof(why)) < 0) {
		snprintf(err, cap, "%s:%d: [net]: %s", cfg->path, cw ? line : s->line, why);
		goto out;
	}
	rc = 0;
out:
	free(w);
	return rc;
}

void cdp_loss_free(cdp_loss *l)
{
	if (l->class_w)
		l->be->free(l->be, l->class_w);
	memset(l, 0, sizeof(*l));
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

static int has_dice(const cdp_loss *l)
{
	return l->kind == CDP_LOSS_DICE || l->kind == CDP_LOSS_BCE_DICE;
}

void cdp_loss_parts(const cdp_loss *l, int n, int hw, const float *logits,
                    const int32_t *labels, float *dlogits, double part[CDP_LOSS_NPART])
{
	cdp_backend *be = l->be;

	memset(part, 0, CDP_LOSS_NPART * sizeof *part);
	switch (l->kind) {
	case CDP_LOSS_CE:
		part[0] = be->softmax_ce(be, n, l->k, hw, logits, labels, l->ignore, l->class_w,
		                         dlogits, 1.0f, &part[1]);
		break;
	case CDP_LOSS_BCE:
	case CDP_LOSS_BCE_DICE:
		part[0] = be->bce_logits(be, n, hw, logits, labels, l->ignore, dlogits, 1.0f,
		                         &part[1]);
		break;
	default:
		be->fill(be, dlogits, 0.0f, (size_t)n * l->k * hw);
		break;
	}
	if (has_dice(l))
		be->dice_sums(be, n, hw, logits, labels, l->ignore, part + 2);
}

void cdp_loss_of(const cdp_loss *l, const double part[CDP_LOSS_NPART], cdp_loss_result *r)
{
	double d = part[3] + part[4] + l->smooth;

	memset(r, 0, sizeof(*r));
	r->sum = part[0];
	r->count = part[1];
	if (r->count > 0)
		r->loss = r->sum / r->count;
	/* d <= 0 only with smooth 0 and no pixel counted: no overlap to measure */
	if (has_dice(l) && d > 0)
		r->dice = 1.0 - (2 * part[2] + l->smooth) / d;
	r->loss += r->dice;
}

void cdp_loss_finish(const cdp_loss *l, int n, int hw, const float *logits,
                     const int32_t *labels, const double part[CDP_LOSS_NPART], double gmul,
                     float *dlogits, cdp_loss_result *r)
{
	cdp_backend *be = l->be;

	cdp_loss_of(l, part, r);
	if (r->count > 0)
		be->scale(be, dlogits, (float)(gmul / r->count), (size_t)n * l->k * hw);
	if (has_dice(l))
		be->dice_logits(be, n, hw, logits, labels, l->ignore, l->smooth, part + 2, dlogits,
		                (float)gmul);
}

void cdp_loss_compute(const cdp_loss *l, int n, int hw, const float *logits,
                      const int32_t *labels, float *dlogits, cdp_loss_result *r)
{
	double part[CDP_LOSS_NPART];

	cdp_loss_parts(l, n, hw, logits, labels, dlogits, part);
	cdp_loss_finish(l, n, hw, logits, labels, part, 1.0, dlogits, r);
}
