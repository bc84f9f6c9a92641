/* evaluate.h: cdp-evaluate's work as a library function (main.c parses
 * the command line). */
#ifndef CDP_EVALUATE_H
#define CDP_EVALUATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdp_label_vector.h"

/* The most classes a report holds (--classes, the automatic count, a
 * CSV's columns): its matrix is K x K cells, 8 MB and a JSON of a few MB at
 * 1024; cdp-predict's class maps hold at most 255. */
#define CDP_EVALUATE_MAX_CLASSES 1024

/* What the maps hold: class ids, or continuous values (a regression map,
 * tagged CDP_TASK=regression, cdp_raster.h); AUTO: from the prediction's
 * tag, else class. */
enum { CDP_EVALUATE_TASK_AUTO, CDP_EVALUATE_TASK_CLASS, CDP_EVALUATE_TASK_REGRESSION };

typedef struct cdp_evaluate_opts {
	int task;        /* CDP_EVALUATE_TASK_*, --task */
	const char *prediction, *reference;  /* one-band rasters of class ids */
	int classes;     /* K, 2..CDP_EVALUATE_MAX_CLASSES; 0: one more than the largest value found */
	long ignore;     /* reference value not counted; -1: none */
	int json;        /* 1: one JSON object instead of the text report */
	const char *png; /* the confusion matrix drawn into this PNG, or NULL */
	const char *const *names;  /* [nnames] --classes names (CSV mode), or NULL */
	int nnames;
	cdp_label_vector_opts vec; /* a vector reference: rasterized onto the
	                              prediction's grid (cdp_label_vector.h);
	                              with vec.given it must be one */
} cdp_evaluate_opts;

/* evaluate_reg.c: the scores of a regression map over the pixels valid in
 * both rasters, accumulated in double: the reference's mean and sum of
 * squared deviations by Welford within a block and Chan et al.'s merge
 * across blocks, the sums of error, |error| and error squared per block,
 * added across blocks with Neumaier's compensation, so a map of 1e8 pixels
 * keeps its digits. */
typedef struct cdp_reg_sums {
	uint64_t n;
	double rmean, rm2;            /* the reference's mean, sum of squared deviations */
	double sum[3], comp[3];       /* error, |error|, error^2, and their compensations */
	double lo, hi;                /* the least and largest value of either */
} cdp_reg_sums;

void cdp_reg_sums_init(cdp_reg_sums *s);
/* Adds one block of n valid pairs (prediction p[i], reference r[i]). */
void cdp_reg_sums_add(cdp_reg_sums *s, const double *p, const double *r, size_t n);
/* The report of s[nb], one a band (target) of the map and reference, as
 * text or one JSON object; skipped[b] is the count of band b's pixels
 * left out; some band has s[b].n > 0. The headline scores pool every
 * band's pixels: count, RMSE, MAE and bias over all of them, R-squared
 * 1 - sum SS_res / sum SS_tot with each band's SS_tot about its own mean
 * (scikit-learn's multioutput='variance_weighted'; one band's own for
 * nb = 1). With nb > 1 each band's scores follow: lines "band B: ..."
 * or a JSON array "targets" of objects with band, count, skipped, rmse,
 * mae, bias, r2. R-squared is undefined (null, "undefined") when the
 * reference is constant. */
void cdp_reg_report(FILE *f, const cdp_reg_sums *s, const uint64_t *skipped, int nb, int json);
/* The bin of v among nb over [lo, hi]. */
int cdp_reg_bin(double v, double lo, double hi, int nb);

void cdp_evaluate_opts_init(cdp_evaluate_opts *o);
/* Writes the report to out. Returns 0, or -1 with a one-line reason in err. */
int cdp_evaluate_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap);

/* evaluate_csv.c: 1 if path is a classifier's CSV (its first line starts
 * "path,class"); then cdp_evaluate_csv_run scores it against reference, a
 * list file or a folder of class folders, as cdp_evaluate_run does. */
int cdp_evaluate_is_csv(const char *path);
int cdp_evaluate_csv_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap);

#endif
