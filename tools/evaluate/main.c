/* main.c: cdp-evaluate, options (man/cdp-evaluate.1); the work is
 * cdp_evaluate_run (evaluate.c), or cdp_evaluate_csv_run (evaluate_csv.c)
 * for a classifier's CSV. */
#include "evaluate.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_raster.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "cdp-evaluate"

enum { OPT_CLASSES = 256, OPT_IGNORE, OPT_JSON, OPT_PNG, OPT_TASK };

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [-hV] [--classes K|name,name,...] [--ignore V] [--json]\n"
	           "                    [--png FILE] [--task class|regression]\n"
	           CDP_LABEL_VECTOR_USAGE("                    ")
	           "                    PREDICTION REFERENCE\n"
	        "       " PROG " [-hV] [--classes K|name,name,...] [--json] PREDICTIONS.csv LIST|DIR\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "classes", required_argument, NULL, OPT_CLASSES },
		{ "help",    no_argument,       NULL, 'h' },
		{ "ignore",  required_argument, NULL, OPT_IGNORE },
		{ "json",    no_argument,       NULL, OPT_JSON },
		{ "png",     required_argument, NULL, OPT_PNG },
		{ "task",    required_argument, NULL, OPT_TASK },
		{ "version", no_argument,       NULL, 'V' },
		/* a vector REFERENCE's options (cdp_label_vector.h) */
		CDP_LABEL_VECTOR_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	cdp_evaluate_opts o;
	char err[1024], *names = NULL;
	const char *classes_arg = NULL;
	const char *name[1024];
	int c, v, rc = 2, isvec = 0;

	cdp_evaluate_opts_init(&o);
	cdp_cli_init(PROG, stderr);
	while ((c = cdp_cli_getopt(argc, argv, "hV", longopts)) != -1) {
		switch (c) {
		case 'h': usage(stdout); rc = cdp_cli_close(stdout) ? 1 : 0; goto out;
		case 'V': rc = cdp_cli_version(stdout, cdp_raster_version(), NULL) ? 1 : 0; goto out;
		case OPT_CLASSES:
			/* a count, or (for a CSV) the class names in class order */
			if (strspn(optarg, "0123456789") == strlen(optarg)) {
				if (cdp_cli_int("--classes", optarg, 2, CDP_EVALUATE_MAX_CLASSES,
				                &o.classes) != CDP_OK)
					goto out;
				break;
			}
			free(names);
			classes_arg = optarg;
			if (!(names = strdup(optarg))) {
				fprintf(stderr, PROG ": %s\n", cdp_strerror(CDP_ENOMEM));
				rc = 1;
				goto out;
			}
			o.nnames = 0;
			for (char *s = names, *e; s; s = e) {
				if ((e = strchr(s, ',')))
					*e++ = '\0';
				if (!*s || o.nnames == 1024) {
					cdp_cli_bad("--classes", optarg, "K or a list of names like a,b,c");
					goto out;
				}
				name[o.nnames++] = s;
			}
			o.names = name;
			break;
		case OPT_IGNORE:
			if (cdp_cli_int("--ignore", optarg, 0, 65535, &v) != CDP_OK)
				goto out;
			o.ignore = v;
			break;
		case OPT_JSON: o.json = 1; break;
		case OPT_PNG:
			if (cdp_cli_file("--png", optarg))
				goto out;
			o.png = optarg;
			break;
		case OPT_TASK: {
			static const char *const tasks[] = { "class", "regression", NULL };
			if (cdp_cli_keyword("--task", optarg, tasks, &v) != CDP_OK)
				goto out;
			o.task = v ? CDP_EVALUATE_TASK_REGRESSION : CDP_EVALUATE_TASK_CLASS;
			break;
		}
		default:
			if (c < CDP_LVO_BASE || c >= CDP_LVO_END ||
			    cdp_label_vector_option(&o.vec, c, optarg))
				goto out;
		}
	}
	if (cdp_cli_operands(argc - optind, argv + optind,
	                     (const char *const[]){ "PREDICTION", "REFERENCE", NULL })) {
		usage(stderr);
		goto out;
	}
	o.prediction = argv[optind];
	o.reference = argv[optind + 1];
	if (o.task == CDP_EVALUATE_TASK_REGRESSION && cdp_evaluate_is_csv(o.prediction)) {
		fprintf(stderr, PROG ": --task regression scores a raster, not the CSV '%s'\n",
		        o.prediction);
		goto out;
	}
	/* a CSV's report has no drawing: --png would be left unwritten; its
	 * reference is a list of classes, with no value to ignore and no
	 * vector to burn: options the CSV form has no use for are refused */
	if (o.png && cdp_evaluate_is_csv(o.prediction)) {
		fprintf(stderr, PROG ": --png draws a raster map's matrix or histogram, not one of "
		        "the CSV '%s'\n", o.prediction);
		goto out;
	}
	if ((o.ignore >= 0 || o.vec.given) && cdp_evaluate_is_csv(o.prediction)) {
		fprintf(stderr, PROG ": %s a raster or vector reference, not the CSV '%s' "
		        "(its reference is a list of classes)\n", o.ignore >= 0 ? "--ignore is for" :
		        "the vector options (--burn, --label-where, ...) are for", o.prediction);
		goto out;
	}
	/* a reference that cannot be opened is said so before --classes is
	 * read by what the reference is (a mistyped vector's names) */
	if (!cdp_evaluate_is_csv(o.prediction) &&
	    (isvec = cdp_label_vector_probe(o.reference, err, sizeof err)) < 0) {
		fprintf(stderr, PROG ": cannot open '%s': %s\n", o.reference, err);
		rc = 1;
		goto out;
	}
	/* names are for a CSV, or for a vector reference's string attribute (a
	 * value's class is its index); for rasters --classes is the count it
	 * always was (the report names the classes by the maps' categories) */
	if (o.nnames && !cdp_evaluate_is_csv(o.prediction) && isvec) {
		o.vec.classes = o.names;
		o.vec.nclasses = (size_t)o.nnames;
		o.classes = o.nnames < 2 ? 2 : o.nnames;
	} else if (!cdp_evaluate_is_csv(o.prediction) && o.nnames) {
		fprintf(stderr, PROG ": --classes %s: names are the values of a vector "
		        "reference's --label-field, and '%s' is a raster: give the count "
		        "(--classes %d); the report names classes by the maps' categories\n",
		        classes_arg, o.reference, o.nnames < 2 ? 2 : o.nnames);
		goto out;
	}
	if (cdp_label_vector_options_check(&o.vec))
		goto out;
	rc = 0;
	if ((cdp_evaluate_is_csv(o.prediction) ? cdp_evaluate_csv_run(&o, stdout, err, sizeof err)
	                                       : cdp_evaluate_run(&o, stdout, err, sizeof err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		rc = 1;
	}
out:
	free(names);
	return rc;
}
