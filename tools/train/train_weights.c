/* train_weights.c: cdp-train --class-weights (man/cdp-train.1): the loss's
 * per-class weights, given as a list or, with "auto", inverse class
 * frequencies over the training keys:
 *
 *   w_k = N / (K' n_k)   for the K' classes with n_k > 0, 0 for the others,
 *
 * n_k counting the training keys' labels of class k that the loss counts
 * (one per record for scalar classes; label pixels other than the record's
 * ignore value for label rasters, as the pool's classes meta counts them;
 * neither the model's ignore= label, whose weight is 0) and N their sum,
 * so a balanced set gets weights 1 and the weights' mean over the training
 * labels is 1 (sklearn's "balanced" up to K'/K). Every rank counts all keys
 * itself (the pointer file is the same on all), so the weights agree without
 * communication; the count reads each training record once before the
 * first step, only its header for scalar classes.
 *
 * The weights replace those of the cfg's class_weights= and need loss=ce
 * (cdp_loss_init says so otherwise). They are not stored in the checkpoint:
 * give the same option to --resume.
 *
 * On a multi-label pool (loss=bce on K outputs) they are the classes'
 * positive weights (cdp_loss_set_pos_weight, PyTorch's pos_weight), in
 * place of those of the cfg's class_weights= (cdp_loss_init_cfg_multi), and
 * "auto" gives
 *
 *   p_k = (N - n_k) / n_k   for 0 < n_k < N, else 1,
 *
 * n_k the training keys holding class k and N the training keys, so that
 * a class's positives weigh as much as its negatives.
 */
#include "train_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_record.h"
#include "cdp_stats.h"
#include "loss.h"

/* The label histogram of the training keys, read in the run's txn. */
static int histogram(trainer *t, cdp_classes *cl, char *err, size_t cap)
{
	MDB_txn *txn = t->txn;
	cdp_buf scratch = { 0 };
	int rc = 0;

	for (size_t k = 0; k < t->ti.count && rc == 0; k++) {
		const char *key = cdp_loader_key(t->tl, k);
		MDB_val mk = { strlen(key), (void *)key }, mv;
		cdp_record r;

		if ((rc = mdb_get(txn, t->pool.tiles, &mk, &mv)) != MDB_SUCCESS)
			break;
		rc = cdp_record_peek(mv.mv_data, mv.mv_size, &r);
		if (rc == CDP_OK && r.label_kind != CDP_LABEL_CLASS)
			rc = cdp_record_decode(mv.mv_data, mv.mv_size, &r, &scratch);
		if (rc == CDP_OK)
			rc = cdp_classes_add_record(cl, &r);
		if (rc != CDP_OK)
			snprintf(err, cap, "'%s': record '%s': %s", t->o->db, key, cdp_strerror(rc));
	}
	if (rc > 0 || rc == MDB_NOTFOUND)
		snprintf(err, cap, "'%s': %s", t->o->db, cdp_strerror(rc));
	cdp_buf_free(&scratch);
	return rc ? -1 : 0;
}

int tr_check_labels(trainer *t, char *err, size_t cap)
{
	cdp_buf b = { 0 };
	cdp_classes cl = { 0 };
	char list[512], ign[32] = "";
	size_t len = 0, nbad = 0, shown = 0;
	int64_t top = -1;               /* the highest label the pool holds */
	int rc;

	rc = cdp_pool_meta_get(&t->pool, t->txn, "classes", &b);
	if (rc == MDB_NOTFOUND) {       /* a pool packed without labels counted */
		cdp_buf_free(&b);
		return 0;
	}
	if (rc == CDP_OK)
		rc = cdp_classes_parse((const char *)b.p, b.len, &cl);
	cdp_buf_free(&b);
	if (rc != CDP_OK) {
		cdp_classes_free(&cl);
		return tr_fail(err, cap, "'%s': meta 'classes': %s", t->o->db, cdp_strerror(rc));
	}
	list[0] = '\0';
	for (size_t c = 0; c < cl.len; c++) {
		if (cl.n[c] == 0 || (int64_t)c == t->loss.ignore)
			continue;
		top = (int64_t)c;
		if ((int64_t)c < (int64_t)t->loss.classes)
			continue;
		if (shown < 8 && len < sizeof list) {
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%zu (%" PRIu64 " %s)",
			                        shown ? ", " : "", c, cl.n[c],
			                        t->ti.label_kind == CDP_LABEL_CLASS ? "tiles" : "pixels");
			shown++;
		}
		nbad++;
	}
	cdp_classes_free(&cl);
	/* the histogram leaves the ignore id out, but an ignore id the head
	 * covers is a label of the pool too: advising fewer classes than it
	 * needs would put it out of range */
	if (t->loss.ignore > top && t->loss.ignore < t->loss.classes)
		top = t->loss.ignore;
	/* a head larger than the labels is legitimate (classes to come) but is
	 * usually a cfg's default left as it was (resnet18.cfg's 1000) */
	if (nbad == 0 && top >= 0 && top + 1 < t->loss.classes && t->loss.classes > 2 &&
	    t->rank == 0)
		fprintf(stderr, "cdp-train: warning: the model has %d classes, the labels of '%s' "
		        "go up to %" PRId64 " (meta 'classes'): give classes=%" PRId64 " (--model "
		        "CFG:classes=%" PRId64 ") unless the others are to come\n", t->loss.classes,
		        t->o->db, top, top + 1, top + 1);
	if (nbad == 0)
		return 0;
	if (nbad > shown && len < sizeof list)
		snprintf(list + len, sizeof list - len, " and %zu more", nbad - shown);
	if (t->loss.ignore >= 0)
		snprintf(ign, sizeof ign, ", ignore %d", t->loss.ignore);
	return tr_fail(err, cap, "'%s' holds label%s %s (meta 'classes'), which the model (%d "
	               "classes, 0 to %d%s) has no class for", t->o->db, nbad > 1 ? "s" : "", list,
	               t->loss.classes, t->loss.classes - 1, ign);
}

/* "w0,w1,..." into w[k]: each a number >= 0; -1 unless exactly k of them. */
static int parse_list(const char *s, float *w, int k)
{
	char buf[32];
	int n = 0;

	while (*s) {
		size_t len = strcspn(s, ",");
		double v;
		if (len == 0 || len >= sizeof buf || n == k)
			return -1;
		memcpy(buf, s, len);
		buf[len] = '\0';
		if (cdp_parse_double(buf, 0, 1e30, &v) != CDP_OK)
			return -1;
		if (w)
			w[n] = (float)v;
		n++;
		s += len;
		if (*s == ',' && !*++s)
			return -1;
	}
	return n == k || (!w && n > 0) ? 0 : -1;
}

int cdp_train_class_weights_syntax(const char *spec)
{
	return strcmp(spec, "auto") == 0 || parse_list(spec, NULL, INT_MAX) == 0 ? 0 : -1;
}

/* --class-weights of a multi-label run: positive weights (above) */
static int pos_weights(trainer *t, const char *spec, char *err, size_t cap)
{
	int k = t->hw;
	char why[256];

	if (!(t->cw = calloc((size_t)k, sizeof *t->cw)))
		return tr_fail(err, cap, "out of memory");
	t->ncw = k;
	if (strcmp(spec, "auto") == 0) {
		cdp_classes cl = { 0 };
		double N = (double)t->ti.count;

		if (histogram(t, &cl, err, cap) < 0) {
			cdp_classes_free(&cl);
			return -1;
		}
		for (int c = 0; c < k; c++) {
			double n = (size_t)c < cl.len ? (double)cl.n[c] : 0;
			t->cw[c] = n > 0 && n < N ? (float)((N - n) / n) : 1.0f;
		}
		t->cw_auto = 1;
		cdp_classes_free(&cl);
	} else if (parse_list(spec, t->cw, k) < 0) {
		return tr_fail(err, cap, "--class-weights '%s': want auto or %d numbers >= 0 "
		               "separated by commas, one positive weight per class of the pool", spec, k);
	}
	if (cdp_loss_set_pos_weight(&t->loss, t->cw, k, why, sizeof why) < 0)
		return tr_fail(err, cap, "--class-weights: %s", why);
	return 0;
}

int tr_class_weights(trainer *t, char *err, size_t cap)
{
	const char *spec = t->o->class_weights;
	int k = t->loss.classes, rc;
	char why[256];

	if (!spec)
		return 0;
	if (t->multi)
		return pos_weights(t, spec, err, cap);
	if (!cdp_loss_has(&t->loss, CDP_LOSS_CE) || t->loss.k == 1)
		return tr_fail(err, cap, "--class-weights: class weights need a term ce, not loss=%s",
		               t->loss.name);
	if (!(t->cw = calloc((size_t)k, sizeof *t->cw)))
		return tr_fail(err, cap, "out of memory");
	t->ncw = k;
	if (strcmp(spec, "auto") == 0) {
		cdp_classes cl = { 0 };
		uint64_t total;
		int present = 0;

		if (histogram(t, &cl, err, cap) < 0) {
			cdp_classes_free(&cl);
			return -1;
		}
		/* the loss's ignore label (ignore=V, to which the loader gives the
		 * record's ignored pixels too) counts for nothing: neither in N nor
		 * as a class with a weight */
		if (t->loss.ignore >= 0 && (size_t)t->loss.ignore < cl.len)
			cl.n[t->loss.ignore] = 0;
		while (cl.len > 0 && cl.n[cl.len - 1] == 0)
			cl.len--;
		if (cl.len > (size_t)k) {
			cdp_classes_free(&cl);
			return tr_fail(err, cap, "--class-weights auto: the training keys hold class %zu, "
			               "the model has classes 0 to %d", cl.len - 1, k - 1);
		}
		total = cdp_classes_total(&cl);
		for (size_t c = 0; c < cl.len; c++)
			present += cl.n[c] > 0;
		for (size_t c = 0; c < cl.len; c++)
			if (cl.n[c] > 0)
				t->cw[c] = (float)((double)total / ((double)present * (double)cl.n[c]));
		t->cw_auto = 1;
		cdp_classes_free(&cl);
		if (total == 0)
			return tr_fail(err, cap, "--class-weights auto: the training keys have no labels");
	} else if (parse_list(spec, t->cw, k) < 0) {
		return tr_fail(err, cap, "--class-weights '%s': want auto or %d numbers >= 0 "
		               "separated by commas, one per class of the model", spec, k);
	}
	/* the loss again, with these weights and the rest as the cfg set it */
	rc = cdp_loss_reweight(&t->loss, t->cw, k, why, sizeof why);
	if (rc < 0) {
		t->have_loss = 0;
		return tr_fail(err, cap, "--class-weights: %s", why);
	}
	return 0;
}

void tr_class_weights_log(trainer *t)
{
	char line[2048];
	size_t n = 0;

	if (!t->cw)
		return;
	for (int c = 0; c < t->ncw && n < sizeof line - 32; c++)
		n += (size_t)snprintf(line + n, sizeof line - n, "%s%.6g", c ? "," : "",
		                      (double)t->cw[c]);
	if (t->multi)
		tr_logf(t, "positive weights (%s): %s", t->cw_auto ? "auto, negatives over positives "
		        "in the training keys" : "--class-weights", line);
	else
		tr_logf(t, "class weights (%s): %s", t->cw_auto ? "auto, inverse frequency over the "
		        "training keys" : "--class-weights", line);
}
