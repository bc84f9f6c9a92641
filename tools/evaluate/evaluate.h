/* evaluate.h: cdp-evaluate's work as a library function (main.c parses
 * the command line). */
#ifndef CDP_EVALUATE_H
#define CDP_EVALUATE_H

#include <stddef.h>
#include <stdio.h>

#include "cdp_label_vector.h"

/* The most classes a report holds (--classes, the automatic count, a
 * CSV's columns): its matrix is K x K cells, 8 MB and a JSON of a few MB at
 * 1024; cdp-predict's class maps hold at most 255. */
#define CDP_EVALUATE_MAX_CLASSES 1024

typedef struct cdp_evaluate_opts {
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

void cdp_evaluate_opts_init(cdp_evaluate_opts *o);
/* Writes the report to out. Returns 0, or -1 with a one-line reason in err. */
int cdp_evaluate_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap);

/* evaluate_csv.c: 1 if path is a classifier's CSV (its first line starts
 * "path,class"); then cdp_evaluate_csv_run scores it against reference, a
 * list file or a folder of class folders, as cdp_evaluate_run does. */
int cdp_evaluate_is_csv(const char *path);
int cdp_evaluate_csv_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap);

#endif
