/* shuffle.h: the work of cdp-keyshuffle as functions that print nothing, so
 * that main.c stays a thin option parser (as gdal_translate_lib does).
 *
 * ks_build reads a pool's keys (never its values), selects, shuffles and
 * splits them; ks_output_* writes a pointer file atomically. Each returns 0
 * or a cdp_error.h code, and on failure leaves a one-line message without
 * the program prefix in err, e.g. "'pool': not a cdpool pool: ...".
 */
#ifndef CDP_KS_SHUFFLE_H
#define CDP_KS_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_out.h"

#define KS_DEFAULT_SEED 1

typedef struct ks_options {
	uint64_t seed;
	int seed_given;          /* --seed on the command line */
	int no_shuffle;          /* keep the pool's byte order */
	int have_val;            /* --val given */
	int stratify;            /* --stratify: --val per class (needs class records) */
	double val_frac;         /* [0, 1) */
	uint64_t val_num, val_den; /* val_frac as written: val_num / val_den exactly
	                          * (a decimal, cdp_parse_decimal), which --val and
	                          * --stratify round with integers */
	const char **val_names;  /* [nval_names] --val-by scenes, not owned */
	size_t nval_names;
	const char **globs;      /* [nglobs] --match patterns, not owned */
	size_t nglobs;
	const char **oversample; /* [noversample] --oversample specs, not owned */
	size_t noversample;
	int progress;            /* CDP_PROGRESS_AUTO / _ON / _OFF */
} ks_options;

#define KS_AUTO_THRESHOLD 0.001  /* --oversample auto's t, as LVIS's */
#define KS_FACTOR_MAX 1000.0     /* the largest repeat factor */

/* The two lists. Both keep the order of the one permutation of the selected
 * keys; train holds what val does not. */
typedef struct ks_lists {
	char uuid[33];
	uint64_t seed;           /* the seed both files record */
	size_t pool_keys;        /* keys in the pool */
	size_t total;            /* keys selected (= ntrain + nval) */
	size_t ntrain, nval;
	char **train, **val;     /* [ntrain], [nval] into arena */
	size_t *train_len, *val_len;
	char *arena;             /* the selected keys, NUL-terminated */
	uint32_t nclasses;       /* --stratify: classes 0..nclasses-1 */
	size_t *class_n;         /* [2 * nclasses]: train, val keys per class */
	size_t nval_to;          /* --stratify: keys held out */
	int multi;               /* --stratify split a multi-label pool */
	char **class_names;      /* --stratify, --oversample: the pool's class_names */
	size_t nclass_names;
	/* --oversample: train holds ntrain lines, each of the ntrain_keys
	 * training keys r_k times (floor or ceil of its factor) on consecutive
	 * lines; per class c < nos: os_tiles[c] training keys hold c, os_factor[c]
	 * its factor r_c (1 when none applies) */
	int repeats;
	size_t ntrain_keys;
	uint32_t nos;
	size_t *os_tiles;
	double *os_factor;
} ks_lists;

/* round(frac * n), halves up, of --val's exact fraction val_num / val_den. */
size_t ks_val_round(const ks_options *o, size_t n);

int  ks_build(const char *db, const ks_options *o, ks_lists *out,
              char *err, size_t errcap);
void ks_lists_free(ks_lists *l);

/* Refuses outputs (out for -o, val for --val-out; either may be NULL) that
 * are a file of the pool db or each other, by inode (cdp_file.h): the
 * second rename would otherwise replace the first file, or a pool file;
 * and those the output policy refuses for a streamed output (cdp_out.h: a
 * directory, a socket). CDP_EMISMATCH or CDP_ESPECIAL with the reason in
 * err. */
int  ks_check_outputs(const char *db, const char *out, const char *val,
                      char *err, size_t errcap);

/* An output file in the making (cdp_out.h, a streamed output: "-", a FIFO
 * or a device in place, else a temporary renamed on commit). */
typedef struct ks_output {
	cdp_out out;            /* zeroed, or ended (no path): nothing pending */
} ks_output;

/* Writes the pointer file under the output policy (a temporary in path's
 * directory, fsynced on commit); on failure removes it. flags: those of
 * cdp_ptrfile_write_flags. */
int  ks_output_prepare(ks_output *o, const char *path, const char *uuid,
                       uint64_t seed, unsigned flags, char *const *keys, const size_t *lens,
                       size_t n, char *err, size_t errcap);
/* Renames the temporary file over path and fsyncs the file and its
 * directory (an in-place output is only closed). */
int  ks_output_commit(ks_output *o, char *err, size_t errcap);
/* Removes a pending temporary file (safe to call after commit). */
void ks_output_discard(ks_output *o);

#endif
