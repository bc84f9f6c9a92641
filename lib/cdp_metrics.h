/* metrics.h: evaluation metrics from a confusion matrix, and regression
 * scores from sums (at the end).
 *
 * conf is K x K uint64 counts, row = label, column = prediction, as the
 * backend's confusion op fills it (backend.h). Counts are plain sums, so
 * matrices from several batches or ranks merge by adding them (an
 * all-reduce with MPI_UINT64_T / MPI_SUM) and the metrics of the merge are
 * the metrics of all the data, which a mean of per-rank ratios would not be.
 *
 * Undefined ratios are NaN, never 0 or 1 by convention:
 *  - accuracy with no counted pixel;
 *  - IoU of class c = TP / (TP + FP + FN) when c appears neither in the
 *    labels nor in the predictions (TP + FP + FN = 0); mean IoU averages the
 *    classes with a defined IoU only (*nvalid says how many), so a class
 *    missing from a validation set neither helps nor hurts;
 *  - precision = TP / (TP + FP) when c is never predicted, recall =
 *    TP / (TP + FN) when c never occurs, F1 = 2 TP / (2 TP + FP + FN) when
 *    both (F1 is defined, and 0, when only one of them is).
 * For binary masks (K = 2, roads) the class of interest is 1.
 */
#ifndef CDP_METRICS_H
#define CDP_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cdp_confusion {
	int k;
	uint64_t *counts;       /* k * k, host memory */
} cdp_confusion;

/* Allocates a zeroed k x k matrix (k >= 2); 0 or -1 when out of memory or
 * k out of [2, 65536]. */
int  cdp_confusion_init(cdp_confusion *c, int k);
void cdp_confusion_reset(cdp_confusion *c);
void cdp_confusion_free(cdp_confusion *c);
/* dst += src, both k x k */
void cdp_confusion_merge(uint64_t *dst, const uint64_t *src, int k);
uint64_t cdp_confusion_total(const uint64_t *conf, int k);

typedef struct cdp_prf {
	uint64_t tp, fp, fn;
	double precision, recall, f1;
} cdp_prf;

double cdp_metrics_accuracy(const uint64_t *conf, int k);
double cdp_metrics_iou(const uint64_t *conf, int k, int c);
/* nvalid may be NULL */
double cdp_metrics_miou(const uint64_t *conf, int k, int *nvalid);
/* class c against all others */
void   cdp_metrics_prf(const uint64_t *conf, int k, int c, cdp_prf *out);
/* Cohen's kappa, (po - pe) / (1 - pe): po the accuracy, pe the agreement
 * expected by chance, sum_c rows_c cols_c / N^2. NaN with no count or when
 * pe = 1 (every label and prediction the same class). */
double cdp_metrics_kappa(const uint64_t *conf, int k);
/* The mean F1 over the classes whose F1 is defined (macro F1); NaN if
 * none is. */
double cdp_metrics_macro_f1(const uint64_t *conf, int k);

/* One line for logs: "acc=0.9512 miou=0.7034 iou=0.9801,0.4267" and for
 * K = 2 also " precision=... recall=... f1=..." of class 1; undefined values
 * print as "nan". Returns the length snprintf would have written. */
int cdp_metrics_format(const uint64_t *conf, int k, char *buf, size_t cap);

/* Regression (pixel values). The scores of predictions p against targets t
 * over the pairs with a finite target, as plain sums that add across
 * batches and ranks (an all-reduce with MPI_DOUBLE / MPI_SUM): with
 * d = p - t and u = t - shift (shift a value near the targets' mean, such
 * as the pool's target mean, so that SS_tot keeps its digits),
 * sums[CDP_REGM_*] = count, sum d, sum |d|, sum d^2, sum u, sum u^2. */
enum { CDP_REGM_N = 0, CDP_REGM_D, CDP_REGM_AD, CDP_REGM_D2, CDP_REGM_U, CDP_REGM_U2,
       CDP_REGM_NSUM };
typedef struct cdp_regm {
	double rmse, mae, bias;  /* sqrt(mean d^2), mean |d|, mean d */
	double r2;               /* 1 - SS_res / SS_tot, scikit-learn's r2_score */
	double count;
} cdp_regm;
/* sums += the n pairs (p[i], t[i]) whose t[i] is finite (NaN: no target);
 * p and t are scaled to the original values by x * scale + offset first
 * (cdp-train's standardized targets; 1 and 0 for none). */
void cdp_regm_add(double sums[CDP_REGM_NSUM], const float *p, const float *t, size_t n,
                  double scale, double offset, double shift);
/* The scores of sums: NaN with no pair; r2 NaN when the targets are all
 * equal (SS_tot = 0). */
void cdp_regm_result(const double sums[CDP_REGM_NSUM], cdp_regm *out);
/* The pooled scores of T targets, sums (T, CDP_REGM_NSUM) each target's
 * own (a net of T outputs, a map of T bands): count, rmse, mae and bias
 * over every pair of every target; r2 = 1 - sum_t SS_res,t / sum_t
 * SS_tot,t with each SS_tot about its own target's mean (scikit-learn's
 * r2_score with multioutput='variance_weighted'), so a target of a larger
 * spread weighs more and no target's offset enters another's. For T = 1
 * cdp_regm_result's, bit for bit. */
void cdp_regm_pooled(const double *sums, int T, cdp_regm *out);
/* "rmse=0.1234 mae=0.0987 bias=-0.0012 r2=0.9612" for logs; as
 * cdp_metrics_format. */
int cdp_regm_format(const cdp_regm *m, char *buf, size_t cap);
/* Multi-label metrics (a multi-hot label per sample, K classes): per class
 * precision, recall and F1 of the decisions pred against truth, as above
 * (TP, FP, FN of class c over the samples); micro precision, recall and F1
 * of the summed TP, FP, FN; macro F1 the mean of the defined per-class F1;
 * per-class average precision of the scores,
 *
 *   AP_c = sum_n (R_n - R_{n-1}) P_n
 *
 * over the distinct scores taken as thresholds in decreasing order (ties
 * enter together), P_n and R_n the precision and recall of score >= that
 * threshold, R_0 = 0: scikit-learn's average_precision_score. AP is NaN for
 * a class without positives; mAP the mean over the classes with positives
 * (NaN if none). */
typedef struct cdp_mlabel {
	int k;
	size_t n;                     /* samples counted */
	uint64_t *tp, *fp, *fn, *pos; /* [k]; pos: samples holding class c */
	double *ap;                   /* [k] */
	double micro_p, micro_r, micro_f1, macro_f1, map;
} cdp_mlabel;

/* 0, or -1 when out of memory or k out of [1, 65536]. */
int  cdp_mlabel_init(cdp_mlabel *m, int k);
void cdp_mlabel_free(cdp_mlabel *m);
/* Fills m from n samples: truth, pred (n, k) bytes 0/1 and score (n, k)
 * (any order-preserving score: probabilities); a sample whose truth[i k]
 * is above 1 is not counted (a validation record found bad). NaN scores
 * rank lowest. 0, or -1 when out of memory. */
int  cdp_mlabel_compute(cdp_mlabel *m, size_t n, const uint8_t *truth, const uint8_t *pred,
                        const double *score);
/* class c's TP, FP, FN, precision, recall and F1 */
void cdp_mlabel_prf(const cdp_mlabel *m, int c, cdp_prf *out);

#endif
