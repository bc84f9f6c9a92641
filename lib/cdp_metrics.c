/* metrics.c: accuracy, IoU and precision/recall/F1 from confusion counts
 * (metrics.h). Counts stay integers until the final division, so merged
 * matrices give exact ratios however the data was split.
 */
#include "cdp_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cdp_confusion_init(cdp_confusion *c, int k)
{
	memset(c, 0, sizeof(*c));
	if (k < 2 || k > 65536)
		return -1;
	c->counts = calloc((size_t)k * k, sizeof(uint64_t));
	if (!c->counts)
		return -1;
	c->k = k;
	return 0;
}

void cdp_confusion_reset(cdp_confusion *c)
{
	if (c->counts)
		memset(c->counts, 0, (size_t)c->k * c->k * sizeof(uint64_t));
}

void cdp_confusion_free(cdp_confusion *c)
{
	free(c->counts);
	memset(c, 0, sizeof(*c));
}

void cdp_confusion_merge(uint64_t *dst, const uint64_t *src, int k)
{
	for (size_t i = 0; i < (size_t)k * k; i++)
		dst[i] += src[i];
}

uint64_t cdp_confusion_total(const uint64_t *conf, int k)
{
	uint64_t t = 0;

	for (size_t i = 0; i < (size_t)k * k; i++)
		t += conf[i];
	return t;
}

static double ratio(uint64_t num, uint64_t den)
{
	return den ? (double)num / (double)den : NAN;
}

double cdp_metrics_accuracy(const uint64_t *conf, int k)
{
	uint64_t diag = 0;

	for (int i = 0; i < k; i++)
		diag += conf[(size_t)i * k + i];
	return ratio(diag, cdp_confusion_total(conf, k));
}

void cdp_metrics_prf(const uint64_t *conf, int k, int c, cdp_prf *out)
{
	memset(out, 0, sizeof(*out));
	if (c < 0 || c >= k) {
		out->precision = out->recall = out->f1 = NAN;
		return;
	}
	out->tp = conf[(size_t)c * k + c];
	for (int i = 0; i < k; i++) {
		if (i == c)
			continue;
		out->fp += conf[(size_t)i * k + c];     /* labelled i, predicted c */
		out->fn += conf[(size_t)c * k + i];     /* labelled c, predicted i */
	}
	out->precision = ratio(out->tp, out->tp + out->fp);
	out->recall = ratio(out->tp, out->tp + out->fn);
	out->f1 = ratio(2 * out->tp, 2 * out->tp + out->fp + out->fn);
}

double cdp_metrics_iou(const uint64_t *conf, int k, int c)
{
	cdp_prf p;

	cdp_metrics_prf(conf, k, c, &p);
	if (c < 0 || c >= k)
		return NAN;
	return ratio(p.tp, p.tp + p.fp + p.fn);
}

double cdp_metrics_miou(const uint64_t *conf, int k, int *nvalid)
{
	double sum = 0;
	int n = 0;

	for (int c = 0; c < k; c++) {
		double v = cdp_metrics_iou(conf, k, c);
		if (isnan(v))
			continue;
		sum += v;
		n++;
	}
	if (nvalid)
		*nvalid = n;
	return n ? sum / n : NAN;
}

double cdp_metrics_kappa(const uint64_t *conf, int k)
{
	double n = (double)cdp_confusion_total(conf, k), pe = 0, po;

	if (n == 0)
		return NAN;
	po = cdp_metrics_accuracy(conf, k);
	for (int c = 0; c < k; c++) {
		double row = 0, col = 0;
		for (int j = 0; j < k; j++) {
			row += (double)conf[(size_t)c * k + j];
			col += (double)conf[(size_t)j * k + c];
		}
		pe += row / n * (col / n);
	}
	return pe >= 1 ? NAN : (po - pe) / (1 - pe);
}

double cdp_metrics_macro_f1(const uint64_t *conf, int k)
{
	double sum = 0;
	int n = 0;

	for (int c = 0; c < k; c++) {
		cdp_prf m;
		cdp_metrics_prf(conf, k, c, &m);
		if (!isnan(m.f1)) {
			sum += m.f1;
			n++;
		}
	}
	return n ? sum / n : NAN;
}

/* Appends "name=value" (value with 4 decimals or "nan") at *len. */
static void put(char *buf, size_t cap, size_t *len, const char *sep, const char *name, double v)
{
	int n;

	if (isnan(v))
		n = snprintf(buf + (*len < cap ? *len : cap), *len < cap ? cap - *len : 0, "%s%s%snan",
		             sep, name, *name ? "=" : "");
	else
		n = snprintf(buf + (*len < cap ? *len : cap), *len < cap ? cap - *len : 0, "%s%s%s%.4f",
		             sep, name, *name ? "=" : "", v);
	if (n > 0)
		*len += (size_t)n;
}

int cdp_metrics_format(const uint64_t *conf, int k, char *buf, size_t cap)
{
	size_t len = 0;
	char dummy[1];

	if (!buf || cap == 0) {
		buf = dummy;
		cap = 0;
	}
	if (cap)
		buf[0] = '\0';
	put(buf, cap, &len, "", "acc", cdp_metrics_accuracy(conf, k));
	put(buf, cap, &len, " ", "miou", cdp_metrics_miou(conf, k, NULL));
	for (int c = 0; c < k; c++)
		put(buf, cap, &len, c ? "," : " iou=", "", cdp_metrics_iou(conf, k, c));
	if (k == 2) {
		cdp_prf p;
		cdp_metrics_prf(conf, k, 1, &p);
		put(buf, cap, &len, " ", "precision", p.precision);
		put(buf, cap, &len, " ", "recall", p.recall);
		put(buf, cap, &len, " ", "f1", p.f1);
	}
	return (int)len;
}

/* ---- regression ---------------------------------------------------------- */

void cdp_regm_add(double sums[CDP_REGM_NSUM], const float *p, const float *t, size_t n,
                  double scale, double offset, double shift)
{
	double s[CDP_REGM_NSUM] = { 0 };

	/* this call's part first, then added: the order of the additions
	 * across calls is the caller's, as for the all-reduce */
	for (size_t i = 0; i < n; i++) {
		double tv, d, u;
		if (!isfinite(t[i]))
			continue;
		tv = t[i] * scale + offset;
		d = (p[i] * scale + offset) - tv;
		u = tv - shift;
		s[CDP_REGM_N] += 1;
		s[CDP_REGM_D] += d;
		s[CDP_REGM_AD] += fabs(d);
		s[CDP_REGM_D2] += d * d;
		s[CDP_REGM_U] += u;
		s[CDP_REGM_U2] += u * u;
	}
	for (int k = 0; k < CDP_REGM_NSUM; k++)
		sums[k] += s[k];
}

void cdp_regm_result(const double sums[CDP_REGM_NSUM], cdp_regm *out)
{
	double n = sums[CDP_REGM_N], sst;

	out->count = n;
	out->rmse = out->mae = out->bias = out->r2 = NAN;
	if (!(n > 0))
		return;
	out->rmse = sqrt(sums[CDP_REGM_D2] / n);
	out->mae = sums[CDP_REGM_AD] / n;
	out->bias = sums[CDP_REGM_D] / n;
	sst = sums[CDP_REGM_U2] - sums[CDP_REGM_U] * sums[CDP_REGM_U] / n;
	if (sst > 0)
		out->r2 = 1 - sums[CDP_REGM_D2] / sst;
}

void cdp_regm_pooled(const double *sums, int T, cdp_regm *out)
{
	double all[CDP_REGM_NSUM] = { 0 }, sst = 0;

	if (T == 1) {
		cdp_regm_result(sums, out);
		return;
	}
	for (int t = 0; t < T; t++) {
		const double *s = sums + (size_t)t * CDP_REGM_NSUM;
		for (int k = 0; k < CDP_REGM_NSUM; k++)
			all[k] += s[k];
		if (s[CDP_REGM_N] > 0)
			sst += s[CDP_REGM_U2] - s[CDP_REGM_U] * s[CDP_REGM_U] / s[CDP_REGM_N];
	}
	cdp_regm_result(all, out);
	out->r2 = out->count > 0 && sst > 0 ? 1 - all[CDP_REGM_D2] / sst : NAN;
}

int cdp_regm_format(const cdp_regm *m, char *buf, size_t cap)
{
	return snprintf(buf, cap, "rmse=%.4f mae=%.4f bias=%.4f r2=%.4f", m->rmse, m->mae,
	                m->bias, m->r2);
}

/* ---- multi-label ---------------------------------------------------------- */

int cdp_mlabel_init(cdp_mlabel *m, int k)
{
	memset(m, 0, sizeof *m);
	if (k < 1 || k > 65536)
		return -1;
	m->k = k;
	m->tp = calloc((size_t)k, sizeof *m->tp);
	m->fp = calloc((size_t)k, sizeof *m->fp);
	m->fn = calloc((size_t)k, sizeof *m->fn);
	m->pos = calloc((size_t)k, sizeof *m->pos);
	m->ap = calloc((size_t)k, sizeof *m->ap);
	if (!m->tp || !m->fp || !m->fn || !m->pos || !m->ap) {
		cdp_mlabel_free(m);
		return -1;
	}
	return 0;
}

void cdp_mlabel_free(cdp_mlabel *m)
{
	free(m->tp);
	free(m->fp);
	free(m->fn);
	free(m->pos);
	free(m->ap);
	memset(m, 0, sizeof *m);
}

typedef struct scored {
	double s;
	int t;
} scored;

/* by score, highest first, NaN last */
static int by_score(const void *a, const void *b)
{
	double x = ((const scored *)a)->s, y = ((const scored *)b)->s;

	if (isnan(x) || isnan(y))
		return isnan(x) - isnan(y);
	return x > y ? -1 : x < y;
}

/* AP of v[n] (sorted here), npos of them positive */
static double average_precision(scored *v, size_t n, uint64_t npos)
{
	uint64_t tp = 0, fp = 0;
	double ap = 0, rprev = 0;

	if (npos == 0)
		return NAN;
	qsort(v, n, sizeof *v, by_score);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		/* a run of equal scores is one threshold (NaNs are one run) */
		while (j < n && (v[j].s == v[i].s || (isnan(v[j].s) && isnan(v[i].s)))) {
			tp += v[j].t;
			fp += !v[j].t;
			j++;
		}
		double r = (double)tp / (double)npos;
		ap += (r - rprev) * ((double)tp / (double)(tp + fp));
		rprev = r;
		i = j;
	}
	return ap;
}

int cdp_mlabel_compute(cdp_mlabel *m, size_t n, const uint8_t *truth, const uint8_t *pred,
                       const double *score)
{
	size_t k = (size_t)m->k, used = 0;
	uint64_t tp = 0, fp = 0, fn = 0;
	scored *v = malloc((n ? n : 1) * sizeof *v);
	double sum = 0, fsum = 0;
	int nap = 0, nf = 0;

	if (!v)
		return -1;
	for (size_t c = 0; c < k; c++) {
		m->tp[c] = m->fp[c] = m->fn[c] = m->pos[c] = 0;
		used = 0;
		for (size_t i = 0; i < n; i++) {
			int t = truth[i * k + c], p = pred[i * k + c] != 0;
			if (truth[i * k] > 1)
				continue;
			m->tp[c] += t && p;
			m->fp[c] += !t && p;
			m->fn[c] += t && !p;
			m->pos[c] += t != 0;
			v[used].s = score[i * k + c];
			v[used++].t = t != 0;
		}
		m->ap[c] = average_precision(v, used, m->pos[c]);
		if (!isnan(m->ap[c])) {
			sum += m->ap[c];
			nap++;
		}
		tp += m->tp[c];
		fp += m->fp[c];
		fn += m->fn[c];
	}
	free(v);
	m->n = used;
	for (int c = 0; c < m->k; c++) {
		cdp_prf p;
		cdp_mlabel_prf(m, c, &p);
		if (!isnan(p.f1)) {
			fsum += p.f1;
			nf++;
		}
	}
	m->micro_p = tp + fp ? (double)tp / (double)(tp + fp) : NAN;
	m->micro_r = tp + fn ? (double)tp / (double)(tp + fn) : NAN;
	m->micro_f1 = tp + fp + fn ? 2.0 * (double)tp / (double)(2 * tp + fp + fn) : NAN;
	m->macro_f1 = nf ? fsum / nf : NAN;
	m->map = nap ? sum / nap : NAN;
	return 0;
}

void cdp_mlabel_prf(const cdp_mlabel *m, int c, cdp_prf *out)
{
	uint64_t tp = m->tp[c], fp = m->fp[c], fn = m->fn[c];

	out->tp = tp;
	out->fp = fp;
	out->fn = fn;
	out->precision = tp + fp ? (double)tp / (double)(tp + fp) : NAN;
	out->recall = tp + fn ? (double)tp / (double)(tp + fn) : NAN;
	out->f1 = tp + fp + fn ? 2.0 * (double)tp / (double)(2 * tp + fp + fn) : NAN;
}
