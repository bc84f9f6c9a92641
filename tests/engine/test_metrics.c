/* test_metrics.c: metrics from confusion counts (metrics.c), fed by the CPU
 * backend's argmax and confusion ops.
 *
 * Checks hand-computed accuracy, per-class IoU, mean IoU and binary
 * precision/recall/F1; the NaN conventions for classes that never occur;
 * that merging per-shard matrices gives the metrics of all the data (what
 * the all-reduce relies on); and the log line format. Regression scores
 * from their sums, against NumPy's. Multi-label
 * (cdp_mlabel): average precision with tied scores, as scikit-learn's
 * average_precision_score gives it, a class without positives left out of
 * the mAP, a bad sample not counted, micro and macro F1 by hand.
 */
#include "backend.h"
#include "cdp_metrics.h"
#include "tap.h"

#include <math.h>
#include <string.h>

static int near(double a, double b)
{
	return fabs(a - b) < 1e-12;
}

static void test_multiclass(void)
{
	/* 4 classes; class 2 never labelled but predicted 9 times; class 3
	 * neither labelled nor predicted */
	const uint64_t conf[16] = {
		50, 2, 3, 0,
		4, 30, 6, 0,
		0, 0, 0, 0,
		0, 0, 0, 0,
	};
	int nv = -1;
	cdp_prf p;

	CHECK(cdp_confusion_total(conf, 4) == 95, "total");
	CHECK(near(cdp_metrics_accuracy(conf, 4), 80.0 / 95), "acc %g", cdp_metrics_accuracy(conf, 4));
	CHECK(near(cdp_metrics_iou(conf, 4, 0), 50.0 / (50 + 4 + 5)), "iou0");
	CHECK(near(cdp_metrics_iou(conf, 4, 1), 30.0 / (30 + 2 + 10)), "iou1");
	CHECK(cdp_metrics_iou(conf, 4, 2) == 0, "iou2: predicted only -> 0, defined");
	CHECK(isnan(cdp_metrics_iou(conf, 4, 3)), "iou3: absent -> NaN");
	CHECK(isnan(cdp_metrics_iou(conf, 4, 4)) && isnan(cdp_metrics_iou(conf, 4, -1)), "bad class");
	CHECK(near(cdp_metrics_miou(conf, 4, &nv), (50.0 / 59 + 30.0 / 42 + 0) / 3) && nv == 3,
	      "miou %g over %d", cdp_metrics_miou(conf, 4, &nv), nv);
	cdp_metrics_prf(conf, 4, 2, &p);
	CHECK(p.tp == 0 && p.fp == 9 && p.fn == 0 && p.precision == 0 && isnan(p.recall) &&
	      p.f1 == 0, "class 2 prf: p %g r %g f1 %g", p.precision, p.recall, p.f1);
	cdp_metrics_prf(conf, 4, 3, &p);
	CHECK(isnan(p.precision) && isnan(p.recall) && isnan(p.f1), "class 3 prf undefined");
}

static void test_binary(void)
{
	const uint64_t conf[4] = { 90, 5, 10, 20 };     /* tp 20, fp 5, fn 10 */
	const uint64_t empty[4] = { 0 };
	const uint64_t never_predicted[4] = { 10, 0, 5, 0 };
	char line[256], small[16];
	cdp_prf p;
	int n, nv = -1;

	cdp_metrics_prf(conf, 2, 1, &p);
	CHECK(p.tp == 20 && p.fp == 5 && p.fn == 10, "counts");
	CHECK(near(p.precision, 0.8) && near(p.recall, 2.0 / 3) && near(p.f1, 40.0 / 55),
	      "prf %g %g %g", p.precision, p.recall, p.f1);
	/* F1 is the harmonic mean of precision and recall */
	CHECK(near(p.f1, 2 * p.precision * p.recall / (p.precision + p.recall)), "harmonic");
	n = cdp_metrics_format(conf, 2, line, sizeof(line));
	CHECK(strcmp(line, "acc=0.8800 miou=0.7143 iou=0.8571,0.5714 precision=0.8000 "
	                   "recall=0.6667 f1=0.7273") == 0, "line '%s'", line);
	CHECK(n == (int)strlen(line), "length %d", n);
	CHECK(cdp_metrics_format(conf, 2, small, sizeof(small)) == n && strlen(small) == 15 &&
	      strncmp(small, line, 15) == 0, "truncated '%s'", small);
	CHECK(cdp_metrics_format(conf, 2, NULL, 0) == n, "length only");

	CHECK(isnan(cdp_metrics_accuracy(empty, 2)) && isnan(cdp_metrics_miou(empty, 2, &nv)) &&
	      nv == 0, "empty matrix");
	cdp_metrics_format(empty, 2, line, sizeof(line));
	CHECK(strcmp(line, "acc=nan miou=nan iou=nan,nan precision=nan recall=nan f1=nan") == 0,
	      "'%s'", line);
	cdp_metrics_prf(never_predicted, 2, 1, &p);
	CHECK(isnan(p.precision) && p.recall == 0 && p.f1 == 0, "never predicted");
	cdp_metrics_format(never_predicted, 2, line, sizeof(line));
	CHECK(strstr(line, " precision=nan recall=0.0000 f1=0.0000") != NULL, "'%s'", line);
}

/* Kappa and macro F1, as sklearn's cohen_kappa_score and
 * f1_score(average='macro') define them, of a matrix worked by hand: rows
 * 5, 3, 2, columns 4, 3, 3, po = 0.7, pe = (5*4 + 3*3 + 2*3) / 100 = 0.35. */
static void test_kappa(void)
{
	/* rows: label, columns: prediction; 10 samples */
	const uint64_t conf[9] = { 3, 1, 1,   1, 2, 0,   0, 0, 2 };
	const uint64_t one[4] = { 7, 0, 0, 0 }, perfect[4] = { 3, 0, 0, 4 }, empty[4] = { 0 };
	double k = cdp_metrics_kappa(conf, 3), f1 = cdp_metrics_macro_f1(conf, 3);

	CHECK(near(k, (0.7 - 0.35) / (1 - 0.35)), "kappa %g", k);
	/* f1: 6/9, 4/6, 4/5 */
	CHECK(near(f1, (6.0 / 9 + 4.0 / 6 + 0.8) / 3), "macro f1 %g", f1);
	CHECK(near(cdp_metrics_kappa(perfect, 2), 1), "perfect kappa");
	CHECK(isnan(cdp_metrics_kappa(one, 2)) && isnan(cdp_metrics_kappa(empty, 2)), "undefined");
	/* class 1 of `one` has no F1: the mean is over class 0 alone */
	CHECK(near(cdp_metrics_macro_f1(one, 2), 1), "macro f1 of one class");
	CHECK(isnan(cdp_metrics_macro_f1(empty, 2)), "macro f1 of nothing");
}

/* Shards counted separately and merged equal counting everything at once. */
static void test_ops_and_merge(void)
{
	enum { HW = 10 };
	/* (N=1, K=3, HW=10) logits; argmax: 0 1 2 0 1 2 0 1 2 2 */
	const float logits[3 * HW] = {
		5, 0, 0, 5, 0, 0, 5, 0, 0, 0,
		0, 5, 0, 0, 5, 0, 0, 5, 0, 0,
		0, 0, 5, 0, 0, 5, 0, 0, 5, 5,
	};
	const int32_t lab[HW] = { 0, 1, 2, 1, 1, 0, 0, 255, 2, 1 };
	int32_t pred[HW];
	cdp_confusion all, a, b;
	cdp_backend *be = cdp_backend_cpu(1);

	if (!be) {
		CHECK(0, "no backend");
		return;
	}
	CHECK_RC(cdp_confusion_init(&all, 3), 0);
	CHECK_RC(cdp_confusion_init(&a, 3), 0);
	CHECK_RC(cdp_confusion_init(&b, 3), 0);
	be->argmax(be, 1, 3, HW, logits, pred);
	be->confusion(be, HW, 3, lab, pred, 255, all.counts);
	be->confusion(be, 4, 3, lab, pred, 255, a.counts);
	be->confusion(be, HW - 4, 3, lab + 4, pred + 4, 255, b.counts);
	cdp_confusion_merge(a.counts, b.counts, 3);
	CHECK(memcmp(a.counts, all.counts, 9 * sizeof(uint64_t)) == 0, "merge == whole");
	{
		/* rows label, cols pred: (0,0) x2, (1,1) x2, (2,2) x2, (1,0), (0,2), (1,2) */
		const uint64_t want[9] = { 2, 0, 1,   1, 2, 1,   0, 0, 2 };
		CHECK(memcmp(all.counts, want, sizeof(want)) == 0, "counts from the ops");
		CHECK(near(cdp_metrics_accuracy(all.counts, 3), 6.0 / 9), "acc");
	}
	cdp_confusion_reset(&all);
	CHECK(cdp_confusion_total(all.counts, 3) == 0, "reset");
	cdp_confusion_free(&b);
	CHECK(cdp_confusion_init(&b, 1) == -1 && b.counts == NULL, "k = 1 refused");
	cdp_confusion_free(&all);
	cdp_confusion_free(&a);
	be->destroy(be);
}

/* Regression scores against NumPy's for p = [1, 2, 4, 7], t = [1.5, NaN,
 * 3, 8]: the pair with a NaN target does not count, d = [-0.5, 1, -1]
 * over t = [1.5, 3, 8], rmse 0.8660254037844386, mae 0.8333333333333334,
 * bias -0.16666666666666666, r2 0.9028776978417267; sums of two halves of
 * standardized values, destandardized, give the same. */
static void test_regression(void)
{
	const float p[4] = { 1, 2, 4, 7 }, t[4] = { 1.5f, NAN, 3, 8 };
	/* the same in a standardized form: (x - 5) / 2 */
	const float ps[4] = { -2, -1.5f, -0.5f, 1 }, ts[4] = { -1.75f, NAN, -1, 1.5f };
	double s[CDP_REGM_NSUM] = { 0 }, a[CDP_REGM_NSUM] = { 0 }, b[CDP_REGM_NSUM] = { 0 };
	cdp_regm m, ms;
	char line[128];

	cdp_regm_add(s, p, t, 4, 1, 0, 4);
	cdp_regm_result(s, &m);
	CHECK(m.count == 3, "count %g", m.count);
	CHECK(near(m.rmse, 0.8660254037844386), "rmse %.17g", m.rmse);
	CHECK(near(m.mae, 0.8333333333333334), "mae %.17g", m.mae);
	CHECK(near(m.bias, -0.16666666666666666), "bias %.17g", m.bias);
	CHECK(near(m.r2, 0.9028776978417267), "r2 %.17g", m.r2);
	cdp_regm_add(a, ps, ts, 2, 2, 5, 4);
	cdp_regm_add(b, ps + 2, ts + 2, 2, 2, 5, 4);
	for (int k = 0; k < CDP_REGM_NSUM; k++)
		a[k] += b[k];
	cdp_regm_result(a, &ms);
	CHECK(near(ms.rmse, m.rmse) && near(ms.mae, m.mae) && near(ms.bias, m.bias) &&
	      near(ms.r2, m.r2) && ms.count == 3, "halves, destandardized: %g %g %g %g",
	      ms.rmse, ms.mae, ms.bias, ms.r2);
	cdp_regm_format(&m, line, sizeof line);
	CHECK(strcmp(line, "rmse=0.8660 mae=0.8333 bias=-0.1667 r2=0.9029") == 0, "%s", line);
	/* undefined: no pair; all targets equal */
	memset(s, 0, sizeof s);
	cdp_regm_result(s, &m);
	CHECK(isnan(m.rmse) && isnan(m.r2) && m.count == 0, "empty");
	cdp_regm_add(s, p, (const float[]){ 2, 2, 2, 2 }, 4, 1, 0, 0);
	cdp_regm_result(s, &m);
	CHECK(isnan(m.r2) && near(m.bias, 1.5), "constant targets: r2 %g bias %g", m.r2, m.bias);
}

/* Pooled scores of two targets against NumPy's: target 1 as above, target
 * 2 p = [10, 12, 13], t = [11, 12, 15] (its own r2 0.42307692307692313);
 * over the six pairs rmse 1.0992421631894098, mae 0.9166666666666666, bias
 * -0.5833333333333334, and r2 = 1 - (SS_res,1 + SS_res,2) / (SS_tot,1 +
 * SS_tot,2) = 0.7722513089005236 (each SS_tot about its own mean), though
 * the second target's sums are shifted by another value; one target's
 * pooled scores are its own. */
static void test_regression_pooled(void)
{
	const float p[4] = { 1, 2, 4, 7 }, t[4] = { 1.5f, NAN, 3, 8 };
	const float p2[3] = { 10, 12, 13 }, t2[3] = { 11, 12, 15 };
	double s[2 * CDP_REGM_NSUM] = { 0 };
	cdp_regm m, one, two;

	cdp_regm_add(s, p, t, 4, 1, 0, 4);
	cdp_regm_add(s + CDP_REGM_NSUM, p2, t2, 3, 1, 0, 9);
	cdp_regm_result(s, &one);
	cdp_regm_result(s + CDP_REGM_NSUM, &two);
	CHECK(near(two.r2, 0.42307692307692313), "target 2's r2 %.17g", two.r2);
	cdp_regm_pooled(s, 2, &m);
	CHECK(m.count == 6, "pooled count %g", m.count);
	CHECK(near(m.rmse, 1.0992421631894098), "pooled rmse %.17g", m.rmse);
	CHECK(near(m.mae, 0.9166666666666666), "pooled mae %.17g", m.mae);
	CHECK(near(m.bias, -0.5833333333333334), "pooled bias %.17g", m.bias);
	CHECK(near(m.r2, 0.7722513089005236), "pooled r2 %.17g", m.r2);
	cdp_regm_pooled(s, 1, &m);
	CHECK(m.rmse == one.rmse && m.r2 == one.r2 && m.count == one.count, "one target pooled");
}

static void test_mlabel(void)
{
	/* 5 samples of 3 classes; sample 4 is a bad record (truth 2) */
	const uint8_t truth[15] = { 1, 0, 0,  0, 1, 0,  1, 1, 0,  0, 0, 0,  2, 2, 2 };
	const uint8_t pred[15] = { 1, 0, 0,  1, 1, 0,  0, 1, 1,  0, 0, 0,  1, 1, 1 };
	const double score[15] = { 0.9, 0.2, 0.1,  0.8, 0.7, 0.1,  0.8, 0.7, 0.6,  0.3, 0.1, 0.2,
	                           1, 1, 1 };
	cdp_mlabel m;
	cdp_prf p;

	CHECK(cdp_mlabel_init(&m, 3) == 0, "init");
	CHECK(cdp_mlabel_compute(&m, 5, truth, pred, score) == 0, "compute");
	CHECK(m.n == 4, "counted %zu samples, want 4", m.n);
	/* class 0: 0.9 (+), then 0.8 tied (+, -): AP = 1/2 * 1 + 1/2 * 2/3 */
	CHECK(near(m.ap[0], 0.5 + 1.0 / 3), "AP of class 0 %.15g", m.ap[0]);
	/* class 1: 0.7 tied (+, +) first: AP 1 */
	CHECK(near(m.ap[1], 1), "AP of class 1 %.15g", m.ap[1]);
	CHECK(isnan(m.ap[2]), "AP of a class without positives %g", m.ap[2]);
	CHECK(near(m.map, (0.5 + 1.0 / 3 + 1) / 2), "mAP %.15g", m.map);
	cdp_mlabel_prf(&m, 0, &p);
	CHECK(p.tp == 1 && p.fp == 1 && p.fn == 1 && near(p.f1, 0.5), "class 0 %llu %llu %llu",
	      (unsigned long long)p.tp, (unsigned long long)p.fp, (unsigned long long)p.fn);
	cdp_mlabel_prf(&m, 2, &p);
	CHECK(p.tp == 0 && p.fp == 1 && p.fn == 0 && near(p.f1, 0), "class 2 f1 %g", p.f1);
	/* TP 1+2+0, FP 1+0+1, FN 1+0+0 */
	CHECK(near(m.micro_f1, 6.0 / 9), "micro f1 %.15g", m.micro_f1);
	CHECK(near(m.macro_f1, (0.5 + 1 + 0) / 3), "macro f1 %.15g", m.macro_f1);
	cdp_mlabel_free(&m);
}

int main(void)
{
	test_mlabel();
	test_multiclass();
	test_binary();
	test_kappa();
	test_ops_and_merge();
	test_regression();
	test_regression_pooled();
	return tap_done();
}
