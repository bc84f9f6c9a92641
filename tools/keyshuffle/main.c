/* main.c: cdp-keyshuffle, options and output (man/cdp-keyshuffle.1).
 *
 * The work is ks_build (shuffle.c); this file parses options, writes the
 * lists and reports. Files named by -o and --val-out are written to
 * temporary names first and renamed only after both are complete, so a
 * failure leaves neither behind.
 */
#include "shuffle.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_key.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_out.h"
#include "cdp_progress.h"
#include "cdp_ptrfile.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "cdp-keyshuffle"

enum { OPT_NO_SHUFFLE = 256, OPT_OVERSAMPLE, OPT_PROGRESS, OPT_STRATIFY, OPT_VAL, OPT_VAL_BY, OPT_VAL_OUT };

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: " PROG " [-hqV] [-m glob] [-o file] [-s seed] [--no-shuffle] [--progress]\n"
	    "                      [--oversample auto[:t]|class:r[,...]]\n"
	    "                      [--val fraction [--stratify] | --val-by name[,name...]]\n"
	    "                      [--val-out file] DB\n");
}

/* Appends s to a growing array of strings. */
static int push(const char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		const char **nv = realloc(*v, nc * sizeof *nv);
		if (!nv)
			return CDP_ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = s;
	return CDP_OK;
}

/* Splits a copy of arg (kept in copies) at commas into v, checking each
 * item with ok (NULL: non-empty); *bad gets the first item refused, else
 * NULL. strsep, not strtok: "a,,b" must fail, not become "a,b". */
static int split(const char *arg, char ***copies, size_t *ncopies, const char ***v, size_t *n,
                 size_t *cap, const char **bad, int (*ok)(const char *))
{
	char *s = strdup(arg), *tok, **nc;

	*bad = NULL;
	if (!s || !(nc = realloc(*copies, (*ncopies + 1) * sizeof *nc))) {
		free(s);
		return CDP_ENOMEM;
	}
	*copies = nc;
	(*copies)[(*ncopies)++] = s;
	while ((tok = strsep(&s, ",")) != NULL) {
		if (ok ? ok(tok) != CDP_OK : !*tok) {
			*bad = tok;
			return CDP_OK;
		}
		if (push(v, n, cap, tok) != CDP_OK)
			return CDP_ENOMEM;
	}
	return CDP_OK;
}

/* The classes no_val_classes names, by cause. */
enum { NOVAL_ONE, NOVAL_SHARE, NOVAL_SPLIT, NOVAL_NCAUSES };

static int noval_cause(const ks_lists *l, const ks_options *o, uint32_t k)
{
	size_t n = l->class_n[2 * k] + l->class_n[2 * k + 1];

	if (!l->multi && n == 1)
		return NOVAL_ONE;     /* a class keeps a training key (n - 1 at most) */
	if ((unsigned __int128)o->val_num * n < o->val_den)
		return NOVAL_SHARE;   /* fraction x n under one key, no remainder key */
	return NOVAL_SPLIT;           /* multi-label: iterative stratification's doing */
}

/* --stratify: names, in one line and even with -q, the classes that kept
 * every key for training and so have none in validation (their scores
 * will be missing from every validation report), grouped by the cause: a
 * class of one key keeps it for training, a class whose share of --val is
 * under one key got none of the remainder keys, and (multi-label) the
 * iterative split gave a class none. */
static void no_val_classes(const ks_lists *l, const ks_options *o)
{
	static const char *const why[NOVAL_NCAUSES][2] = {
		{ "of one key, which stays in training", "of one key, which stay in training" },
		{ "whose share (--val x its keys) is under one key",
		  "whose share (--val x their keys) is under one key" },
		{ "left none by the iterative split", "left none by the iterative split" },
	};
	size_t n = 0, nc[NOVAL_NCAUSES] = { 0 };
	const char *gsep = " ";

	for (uint32_t k = 0; k < l->nclasses; k++)
		if (l->class_n[2 * k] > 0 && l->class_n[2 * k + 1] == 0) {
			nc[noval_cause(l, o, k)]++;
			n++;
		}
	if (n == 0)
		return;
	fprintf(stderr, PROG ": warning: %zu class%s without a validation key:", n,
	        n == 1 ? "" : "es");
	for (int g = 0; g < NOVAL_NCAUSES; g++) {
		const char *sep = " ";
		if (nc[g] == 0)
			continue;
		fprintf(stderr, "%s%zu %s:", gsep, nc[g], why[g][nc[g] != 1]);
		gsep = "; ";
		for (uint32_t k = 0; k < l->nclasses; k++) {
			if (l->class_n[2 * k] == 0 || l->class_n[2 * k + 1] != 0 ||
			    noval_cause(l, o, k) != g)
				continue;
			fprintf(stderr, "%s%" PRIu32, sep, k);
			sep = ", ";
			if (k < l->nclass_names)
				fprintf(stderr, " '%s'", l->class_names[k]);
		}
	}
	fputc('\n', stderr);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help",       no_argument,       NULL, 'h' },
		{ "match",      required_argument, NULL, 'm' },
		{ "no-shuffle", no_argument,       NULL, OPT_NO_SHUFFLE },
		{ "output",     required_argument, NULL, 'o' },
		{ "oversample", required_argument, NULL, OPT_OVERSAMPLE },
		{ "progress",   no_argument,       NULL, OPT_PROGRESS },
		{ "quiet",      no_argument,       NULL, 'q' },
		{ "seed",       required_argument, NULL, 's' },
		{ "stratify",   no_argument,       NULL, OPT_STRATIFY },
		{ "val",        required_argument, NULL, OPT_VAL },
		{ "val-by",     required_argument, NULL, OPT_VAL_BY },
		{ "val-out",    required_argument, NULL, OPT_VAL_OUT },
		{ "version",    no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	ks_options o = { .seed = KS_DEFAULT_SEED, .progress = CDP_PROGRESS_AUTO };
	ks_lists l = { 0 };
	ks_output train_out = { 0 }, val_out = { 0 };
	const char **names = NULL, **globs = NULL, **os = NULL;
	char **copies = NULL;    /* strdup'd --val-by arguments, split in place */
	size_t nnames = 0, names_cap = 0, nglobs = 0, globs_cap = 0, ncopies = 0;
	size_t nos = 0, os_cap = 0;
	const char *out_path = NULL, *val_path = NULL, *db;
	char err[1024] = "";
	const char *tok;
	static const char *const operands[] = { "DB", NULL };
	int quiet = 0, c, rc = 2, crc, closed = 0, lockfd = -1;
	unsigned rflags = 0;

	cdp_cli_init(PROG, stderr);
	while ((c = cdp_cli_getopt(argc, argv, "hm:o:qs:V", longopts)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			rc = cdp_cli_close(stdout) ? 1 : 0;
			closed = 1;
			goto out;
		case 'm':
			if (push(&globs, &nglobs, &globs_cap, optarg) != CDP_OK)
				goto nomem;
			break;
		case 'o':
			if (cdp_cli_file("-o", optarg))
				goto out;
			out_path = optarg;
			break;
		case 'q':
			quiet = 1;
			o.progress = CDP_PROGRESS_OFF;
			break;
		case 's':
			if (cdp_cli_u64("--seed", optarg, 0, UINT64_MAX, &o.seed) != CDP_OK)
				goto out;
			o.seed_given = 1;
			break;
		case 'V':
			rc = cdp_cli_version(stdout, cdp_lmdb_version(), NULL) ? 1 : 0;
			closed = 1;
			goto out;
		case OPT_NO_SHUFFLE:
			o.no_shuffle = 1;
			break;
		case OPT_OVERSAMPLE:
			/* checked against the pool's classes by ks_build */
			if (split(optarg, &copies, &ncopies, &os, &nos, &os_cap, &tok, NULL) != CDP_OK)
				goto nomem;
			if (tok) {
				cdp_cli_bad("--oversample", optarg,
				            "auto, auto:t or class:r items, comma-separated");
				goto out;
			}
			break;
		case OPT_PROGRESS:
			o.progress = CDP_PROGRESS_ON;
			break;
		case OPT_STRATIFY:
			o.stratify = 1;
			break;
		case OPT_VAL:
			if (cdp_cli_double("--val", optarg, 0.0, 1.0, 1, &o.val_frac) != CDP_OK)
				goto out;
			/* rounded as written: 0.145 x 100 is 14.5, to 15, where the
			 * double 0.14499999999999999 gave 14; past 18 decimals the
			 * double, to 2^-62 */
			if (cdp_parse_decimal(optarg, &o.val_num, &o.val_den) != CDP_OK) {
				o.val_den = (uint64_t)1 << 62;
				o.val_num = (uint64_t)ldexp(o.val_frac, 62);
			}
			o.have_val = 1;
			break;
		case OPT_VAL_BY:
			if (split(optarg, &copies, &ncopies, &names, &nnames, &names_cap, &tok,
			          cdp_key_scene_check) != CDP_OK)
				goto nomem;
			if (tok) {
				cdp_cli_bad("--val-by", tok, "a scene name");
				goto out;
			}
			break;
		case OPT_VAL_OUT:
			if (cdp_cli_file("--val-out", optarg))
				goto out;
			val_path = optarg;
			break;
		default:
			goto out;
		}
	}
	if (cdp_cli_operands(argc - optind, argv + optind, operands)) {
		usage(stderr);
		goto out;
	}
	db = argv[optind];
	if (o.have_val && nnames > 0) {
		fprintf(stderr, PROG ": --val and --val-by are mutually exclusive\n");
		goto out;
	}
	if (o.stratify && !o.have_val) {
		fprintf(stderr, PROG ": --stratify needs --val\n");
		goto out;
	}
	if ((o.have_val || nnames > 0) != (val_path != NULL)) {
		fprintf(stderr, PROG ": %s\n", val_path ?
		        "--val-out needs --val or --val-by" :
		        "--val and --val-by need --val-out");
		goto out;
	}
	o.globs = globs;
	o.nglobs = nglobs;
	o.val_names = names;
	o.nval_names = nnames;
	o.oversample = os;
	o.noversample = nos;

	/* One check for every spelling of one file (t.keys, ./t.keys, a link):
	 * a clash of the outputs is a failure (1), as cdp-keyshuffle(1) says,
	 * not a usage error that only the identical spelling would get. */
	rc = 1;
	if (ks_check_outputs(db, out_path, val_path, err, sizeof err) != CDP_OK)
		goto report;
	if (ks_build(db, &o, &l, err, sizeof err) != CDP_OK) {
		fprintf(stderr, PROG ": %s\n", err);
		goto out;
	}
	/* An empty validation list is one cdp-train refuses: none is written. */
	if (val_path && l.nval == 0) {
		fprintf(stderr, PROG ": --val %g holds out no key of the %zu selected: no "
		        "validation file, '%s' not written%s\n", o.val_frac, l.total, val_path,
		        access(val_path, F_OK) == 0 ? ", the file of that name left as it was" : "");
		val_path = NULL;
	}
	rflags = l.repeats ? CDP_PTRFILE_REPEATS : 0;
	/* Both files complete before either appears under its name. */
	if (val_path && ks_output_prepare(&val_out, val_path, l.uuid, l.seed, 0,
	                                  l.val, l.val_len, l.nval, err, sizeof err) != CDP_OK)
		goto report;
	if (out_path) {
		if (ks_output_prepare(&train_out, out_path, l.uuid, l.seed, rflags, l.train,
		                      l.train_len, l.ntrain, err, sizeof err) != CDP_OK)
			goto report;
	} else {
		int wrc = cdp_ptrfile_write_flags(stdout, l.uuid, l.seed, rflags, l.train,
		                                  l.train_len, l.ntrain);
		if (wrc != CDP_OK) {
			snprintf(err, sizeof err, "cannot write standard output: %s",
			         cdp_strerror(wrc));
			goto report;
		}
	}
	/* The two files are one split: a signal between their renames would
	 * leave a new validation list beside an old training list, whose keys
	 * may then overlap it. cdp_out_hold defers SIGTERM, SIGINT and SIGHUP
	 * to after the second rename (or the failure of the first); the lock
	 * on the training list's folder keeps another cdp-keyshuffle writing
	 * the same pair from renaming one of its files in between. */
	if (val_path && out_path)
		lockfd = cdp_out_lock_dir(out_path);
	cdp_out_hold();
	crc = (val_path && ks_output_commit(&val_out, err, sizeof err) != CDP_OK) ||
	      (out_path && ks_output_commit(&train_out, err, sizeof err) != CDP_OK);
	cdp_out_release();
	if (lockfd >= 0)
		close(lockfd);
	if (crc)
		goto report;
	if (!quiet)
		fprintf(stderr, PROG ": seed %" PRIu64 ", %zu keys (%zu train, %zu "
		        "validation)\n", l.seed, l.total, l.ntrain_keys, l.nval);
	for (uint32_t k = 0; !quiet && k < l.nclasses; k++)
		if (l.class_n[2 * k] + l.class_n[2 * k + 1] > 0)
			fprintf(stderr, PROG ": class %" PRIu32 ": %zu train, %zu validation\n", k,
			        l.class_n[2 * k], l.class_n[2 * k + 1]);
	if (!quiet && l.repeats) {
		fprintf(stderr, PROG ": oversampled: %zu training keys on %zu lines\n",
		        l.ntrain_keys, l.ntrain);
		for (uint32_t k = 0; k < l.nos; k++) {
			if (l.os_tiles[k] == 0)
				continue;
			fprintf(stderr, PROG ": class %" PRIu32, k);
			if (k < l.nclass_names)
				fprintf(stderr, " '%s'", l.class_names[k]);
			fprintf(stderr, ": in %zu training keys, repeat factor %.4g\n", l.os_tiles[k],
			        l.os_factor[k]);
		}
	}
	if (l.nval > 0)
		no_val_classes(&l, &o);
	rc = 0;
	goto out;
nomem:
	snprintf(err, sizeof err, "%s", cdp_strerror(CDP_ENOMEM));
	rc = 1;
report:
	fprintf(stderr, PROG ": %s\n", err);
out:
	ks_output_discard(&val_out);
	ks_output_discard(&train_out);
	ks_lists_free(&l);
	for (size_t i = 0; i < ncopies; i++)
		free(copies[i]);
	free(copies);
	free(names);
	free(globs);
	free(os);
	/* stdout may still hold buffered bytes; a failed close is a failure
	 * (--help and --version closed it already) */
	if (!closed && fclose(stdout) != 0 && rc == 0) {
		fprintf(stderr, PROG ": cannot write standard output: %s\n",
		        strerror(errno));
		rc = 1;
	}
	return rc;
}
