/* main.c: cdp-evaluate, options (man/cdp-evaluate.1); the work is
 * cdp_evaluate_run (evaluate.c). */
#include "evaluate.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_raster.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#define PROG "cdp-evaluate"

enum { OPT_CLASSES = 256, OPT_IGNORE, OPT_JSON, OPT_PNG };

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [-hV] [--classes K] [--ignore V] [--json] [--png FILE]\n"
	           "                    PREDICTION REFERENCE\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "classes", required_argument, NULL, OPT_CLASSES },
		{ "help",    no_argument,       NULL, 'h' },
		{ "ignore",  required_argument, NULL, OPT_IGNORE },
		{ "json",    no_argument,       NULL, OPT_JSON },
		{ "png",     required_argument, NULL, OPT_PNG },
		{ "version", no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	cdp_evaluate_opts o;
	char err[1024];
	int c, v;

	cdp_evaluate_opts_init(&o);
	cdp_cli_init(PROG, stderr);
	while ((c = cdp_cli_getopt(argc, argv, "hV", longopts)) != -1) {
		switch (c) {
		case 'h': usage(stdout); return 0;
		case 'V': return cdp_cli_version(stdout, cdp_raster_version(), NULL) ? 1 : 0;
		case OPT_CLASSES:
			if (cdp_cli_int("--classes", optarg, 2, 65536, &o.classes) != CDP_OK)
				return 2;
			break;
		case OPT_IGNORE:
			if (cdp_cli_int("--ignore", optarg, 0, 65535, &v) != CDP_OK)
				return 2;
			o.ignore = v;
			break;
		case OPT_JSON: o.json = 1; break;
		case OPT_PNG: o.png = optarg; break;
		default: return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, PROG ": want PREDICTION and REFERENCE\n");
		usage(stderr);
		return 2;
	}
	o.prediction = argv[optind];
	o.reference = argv[optind + 1];
	if (cdp_evaluate_run(&o, stdout, err, sizeof err) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 1;
	}
	return 0;
}
