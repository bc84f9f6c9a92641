/* cdp-tile: cut rasters into tiles, as a record stream or tile files.
 *
 * This file only turns the command line into cdp_tile_opts, runs
 * cdp_tile_run() (tile.c) and reports the outcome; see man/cdp-tile.1.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_key.h"
#include "cdp_label.h"
#include "cdp_num.h"
#include "cdp_progress.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "cdp_stats.h"
#include "tile.h"

#define MAXBANDS 1024

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: cdp-tile [-hqV] [-O dir] [-s size] [-z level] [--bands list]\n"
	    "                [--edge shift|pad|drop] [--format png|tif] [--ignore value]\n"
	    "                [--label file]... [--label-all file] [--label-suffix suffix]\n"
	    "                [--label-error-threshold pixels] [--label-map map]\n"
	    "                [--label-bands list] [--label-kind class|value]\n"
	    "                [--label-map-other refuse|ignore]\n"
	    "                [--label-resample near|mode|bilinear|cubic|average]\n"
	    CDP_LABEL_VECTOR_USAGE("                ")
	    "                [--classes name,...]\n"
	    "                [--max-nodata fraction] [--name name]... [--nodata value]\n"
	    "                [--overlap n] [--progress] [--standardize] [--stats file] [--tps]\n"
	    "                raster... | --time date,date[,...]...\n");
}

/* Appends arg to a growable list of strings; returns 0 or -1 without memory. */
static int push(const char ***list, size_t *n, const char *arg)
{
	const char **nl = realloc(*list, (*n + 1) * sizeof(*nl));

	if (!nl)
		return -1;
	nl[(*n)++] = arg;
	*list = nl;
	return 0;
}

enum { OPT_BANDS = 256, OPT_CLASSES, OPT_EDGE, OPT_FORMAT, OPT_IGNORE, OPT_LABEL,
       OPT_LABEL_ALL, OPT_LABEL_BANDS, OPT_LABEL_ET, OPT_LABEL_KIND, OPT_LABEL_MAP, OPT_LABEL_MAP_OTHER,
       OPT_LABEL_RESAMPLE, OPT_LABEL_SUFFIX, OPT_MAX_NODATA, OPT_NAME, OPT_NODATA,
       OPT_OVERLAP, OPT_PROGRESS, OPT_STANDARDIZE, OPT_STATS, OPT_TIME, OPT_TPS };

static const struct option longopts[] = {
	{ "bands",        required_argument, NULL, OPT_BANDS },
	{ "classes",      required_argument, NULL, OPT_CLASSES },
	{ "edge",         required_argument, NULL, OPT_EDGE },
	{ "format",       required_argument, NULL, OPT_FORMAT },
	{ "help",         no_argument,       NULL, 'h' },
	{ "ignore",       required_argument, NULL, OPT_IGNORE },
	{ "label",        required_argument, NULL, OPT_LABEL },
	{ "label-all",    required_argument, NULL, OPT_LABEL_ALL },
	{ "label-bands",  required_argument, NULL, OPT_LABEL_BANDS },
	{ "label-error-threshold", required_argument, NULL, OPT_LABEL_ET },
	{ "label-kind",   required_argument, NULL, OPT_LABEL_KIND },
	{ "label-map",    required_argument, NULL, OPT_LABEL_MAP },
	{ "label-map-other", required_argument, NULL, OPT_LABEL_MAP_OTHER },
	{ "label-resample", required_argument, NULL, OPT_LABEL_RESAMPLE },
	{ "label-suffix", required_argument, NULL, OPT_LABEL_SUFFIX },
	{ "max-nodata",   required_argument, NULL, OPT_MAX_NODATA },
	{ "name",         required_argument, NULL, OPT_NAME },
	{ "nodata",       required_argument, NULL, OPT_NODATA },
	{ "outdir",       required_argument, NULL, 'O' },
	{ "overlap",      required_argument, NULL, OPT_OVERLAP },
	{ "progress",     no_argument,       NULL, OPT_PROGRESS },
	{ "quiet",        no_argument,       NULL, 'q' },
	{ "size",         required_argument, NULL, 's' },
	{ "standardize",  no_argument,       NULL, OPT_STANDARDIZE },
	{ "stats",        required_argument, NULL, OPT_STATS },
	{ "time",         required_argument, NULL, OPT_TIME },
	{ "tps",          no_argument,       NULL, OPT_TPS },
	{ "version",      no_argument,       NULL, 'V' },
	{ "zlib",         required_argument, NULL, 'z' },
	/* --all-touched, --background, --buffer, ... (cdp_label_vector.h) */
	CDP_LABEL_VECTOR_LONGOPTS,
	{ NULL, 0, NULL, 0 }
};

/* *first = opt unless an option came before: the one a refusal names */
static void first_given(const char **first, const char *opt)
{
	if (!*first)
		*first = opt;
}

int main(int argc, char **argv)
{
	cdp_tile_opts o;
	cdp_tile_result res;
	const char **names = NULL, **labels = NULL, **classes = NULL, **times = NULL;
	size_t nnames = 0, nlabels = 0, nb = 0, nclasses = 0, ntimes = 0, nlb = 0;
	char *classbuf = NULL, why[256];
	int bands[MAXBANDS], lbands[MAXBANDS], ch, quiet = 0, format = -1, rc = 0, ret = 0;
	char err[1024];
	int ign;
	static const char *const edges[] = { "shift", "pad", "drop", NULL };
	static const int edge_of[] = { CDP_EDGE_SHIFT, CDP_EDGE_PAD, CDP_EDGE_DROP };
	static const char *const formats[] = { "png", "tif", NULL };
	static const int format_of[] = { CDP_TILE_PNG, CDP_TILE_TIF };
	static const char *const others[] = { "refuse", "ignore", NULL };
	static const char *const resamples[] = { "near", "mode", "bilinear", "cubic", "average",
	                                         NULL };
	static const int resample_of[] = { CDP_RESAMPLE_NEAR, CDP_RESAMPLE_MODE,
	                                   CDP_RESAMPLE_BILINEAR, CDP_RESAMPLE_CUBIC,
	                                   CDP_RESAMPLE_AVERAGE };
	static const char *const lkinds[] = { "class", "value", NULL };
	const char *map_arg = NULL;
	const char *label_only = NULL;  /* the first option given that only a label uses */
	cdp_labelmap map;
	int have_map = 0;

	cdp_tile_opts_init(&o);
	cdp_cli_init("cdp-tile", stderr);
	ret = 2;   /* until the options are read */
	while ((ch = cdp_cli_getopt(argc, argv, "hO:qs:Vz:", longopts)) != -1) {
		switch (ch) {
		case 'h':
			usage(stdout);
			ret = cdp_cli_close(stdout) ? 1 : 0;
			goto out;
		case 'O':
			if (cdp_cli_file("--outdir", optarg))
				goto out;
			o.outdir = optarg;
			break;
		case 'q':
			quiet = 1;
			o.progress = CDP_PROGRESS_OFF;
			break;
		case 's':
			if (cdp_cli_int("--size", optarg, 1, (int)CDP_RECORD_MAXDIM, &o.size))
				goto out;
			break;
		case 'V':
			ret = cdp_cli_version(stdout, cdp_raster_version(), NULL) ? 1 : 0;
			goto out;
		case 'z':
			if (cdp_cli_int("--zlib", optarg, 1, 9, &o.zlevel))
				goto out;
			break;
		case OPT_BANDS:
			if (cdp_cli_int_list("--bands", optarg, 1, (int)CDP_RECORD_MAXDIM, bands,
			                     MAXBANDS, &nb))
				goto out;
			o.bands = bands;
			o.nbands = nb;
			break;
		case OPT_EDGE:
			if (cdp_cli_keyword("--edge", optarg, edges, &ign))
				goto out;
			o.edge = edge_of[ign];
			break;
		case OPT_FORMAT:
			if (cdp_cli_keyword("--format", optarg, formats, &ign))
				goto out;
			format = format_of[ign];
			break;
		case OPT_IGNORE:
			first_given(&label_only, "--ignore");
			if (cdp_cli_int("--ignore", optarg, 0, 65535, &ign))
				goto out;
			o.has_ignore = 1;
			o.ignore = (uint32_t)ign;
			break;
		case OPT_LABEL:
			if (push(&labels, &nlabels, optarg))
				goto nomem;
			break;
		case OPT_LABEL_ET:
			first_given(&label_only, "--label-error-threshold");
			if (cdp_cli_double("--label-error-threshold", optarg, 0, 100, 0,
			                   &o.label_max_error))
				goto out;
			break;
		case OPT_LABEL_MAP:
			first_given(&label_only, "--label-map");
			map_arg = optarg;
			break;
		case OPT_LABEL_MAP_OTHER:
			first_given(&label_only, "--label-map-other");
			if (cdp_cli_keyword("--label-map-other", optarg, others, &o.label_map_ignore))
				goto out;
			break;
		case OPT_LABEL_RESAMPLE:
			first_given(&label_only, "--label-resample");
			if (cdp_cli_keyword("--label-resample", optarg, resamples, &ign))
				goto out;
			o.label_resample = resample_of[ign];
			break;
		case OPT_LABEL_BANDS:
			first_given(&label_only, "--label-bands");
			if (cdp_cli_int_list("--label-bands", optarg, 1, (int)CDP_RECORD_MAXDIM,
			                     lbands, MAXBANDS, &nlb))
				goto out;
			o.label_bands = lbands;
			o.nlabel_bands = nlb;
			break;
		case OPT_LABEL_KIND:
			first_given(&label_only, "--label-kind");
			if (cdp_cli_keyword("--label-kind", optarg, lkinds, &ign))
				goto out;
			o.label_kind = ign ? CDP_LKIND_VALUE : CDP_LKIND_CLASS;
			break;
		case OPT_LABEL_SUFFIX:
			if (!*optarg || strchr(optarg, '/')) {
				cdp_cli_bad("--label-suffix", optarg, "a file name suffix");
				goto out;
			}
			o.label_suffix = optarg;
			break;
		case OPT_MAX_NODATA:
			if (cdp_cli_double("--max-nodata", optarg, 0, 1, 0, &o.max_nodata))
				goto out;
			break;
		case OPT_NAME:
			/* an invalid option value: a usage error, as cdp-tile(1) says */
			if (cdp_key_name_check(optarg)) {
				fprintf(stderr, "cdp-tile: --name: invalid name '%s' (1-%d of "
				        "A-Z a-z 0-9 . _ + -)\n", optarg, CDP_NAME_MAX);
				goto out;
			}
			if (push(&names, &nnames, optarg))
				goto nomem;
			break;
		case OPT_NODATA:
			o.has_nodata = 1;
			if (strcasecmp(optarg, "nan") == 0)
				o.nodata = NAN;
			else if (cdp_parse_double(optarg, -HUGE_VAL, HUGE_VAL, &o.nodata) ||
			         !isfinite(o.nodata)) {
				cdp_cli_bad("--nodata", optarg, "a number or nan");
				goto out;
			}
			break;
		case OPT_OVERLAP:
			if (cdp_cli_int("--overlap", optarg, 0, (int)CDP_RECORD_MAXDIM - 1,
			                &o.overlap))
				goto out;
			break;
		case OPT_PROGRESS:
			o.progress = CDP_PROGRESS_ON;
			break;
		case OPT_STANDARDIZE:
			o.standardize = 1;
			break;
		case OPT_STATS:
			if (cdp_cli_file("--stats", optarg))
				goto out;
			o.stats_path = optarg;
			break;
		case OPT_TIME:
			if (cdp_cli_list("--time", optarg, 2, "two or more rasters separated by commas"))
				goto out;
			if (push(&times, &ntimes, optarg))
				goto nomem;
			break;
		case OPT_TPS:
			o.tps = 1;
			break;
		case OPT_CLASSES:
			free(classbuf);
			free(classes);
			classes = NULL;
			nclasses = 0;
			if (!(classbuf = strdup(optarg)))
				goto nomem;
			for (char *s = classbuf, *cm; s; s = cm) {
				if ((cm = strchr(s, ',')))
					*cm++ = '\0';
				if (!*s || nclasses == 65535) {
					cdp_cli_bad("--classes", optarg, "a list of names like a,b,c");
					goto out;
				}
				if (!cdp_class_name_ok(s, why, sizeof why)) {
					fprintf(stderr, "cdp-tile: --classes: class %zu's name %s\n",
					        nclasses, why);
					goto out;
				}
				for (size_t j = 0; j < nclasses; j++)
					if (strcmp(classes[j], s) == 0) {
						fprintf(stderr, "cdp-tile: --classes: '%s' names both "
						        "class %zu and class %zu\n", s, j, nclasses);
						goto out;
					}
				if (push(&classes, &nclasses, s))
					goto nomem;
			}
			o.vec.classes = classes;
			o.vec.nclasses = nclasses;
			o.vec.given = 1;
			break;
		case OPT_LABEL_ALL:
			o.label_all = optarg;
			break;
		default:
			if (ch < CDP_LVO_BASE || ch >= CDP_LVO_END ||
			    cdp_label_vector_option(&o.vec, ch, optarg))
				goto out;
		}
	}
	ret = 0;
	o.inputs = (const char *const *)argv + optind;
	o.ninputs = (size_t)(argc - optind);
	if (ntimes && o.ninputs) {
		fprintf(stderr, "cdp-tile: --time inputs and plain rasters do not mix in "
		        "one run (their tiles have different band counts)\n");
		ret = 2;
		goto out;
	}
	if (ntimes) {
		o.inputs = times;
		o.ninputs = ntimes;
		o.time = 1;
	}

	if (o.ninputs == 0) {
		fprintf(stderr, "cdp-tile: missing raster (or --time date,date)\n");
		usage(stderr);
		ret = 2;
		goto out;
	}
	if (o.overlap >= o.size) {
		fprintf(stderr, "cdp-tile: --overlap %d must be less than the tile "
		        "size %d\n", o.overlap, o.size);
		ret = 2;
		goto out;
	}
	if (nnames && nnames != o.ninputs) {
		fprintf(stderr, "cdp-tile: %zu --name for %zu rasters: give one per "
		        "raster\n", nnames, o.ninputs);
		ret = 2;
		goto out;
	}
	if (nlabels && nlabels != o.ninputs) {
		fprintf(stderr, "cdp-tile: %zu --label for %zu rasters: give one per "
		        "raster\n", nlabels, o.ninputs);
		ret = 2;
		goto out;
	}
	/* an option only a label uses would be ignored without a word */
	if (label_only && !nlabels && !o.label_suffix && !o.label_all) {
		fprintf(stderr, "cdp-tile: %s needs --label, --label-all or --label-suffix\n",
		        label_only);
		ret = 2;
		goto out;
	}
	{
		/* label options that exclude or need each other */
		const struct { int bad; const char *why; } rules[] = {
			{ (nlabels > 0) + !!o.label_suffix + !!o.label_all > 1,
			  "--label, --label-all and --label-suffix exclude each other" },
			{ o.vec.given && !nlabels && !o.label_suffix && !o.label_all,
			  "the vector label options need --label, --label-all or --label-suffix" },
			/* it places a warped label or date: alone it would do nothing */
			{ o.tps && !o.time && !nlabels && !o.label_suffix && !o.label_all,
			  "--tps needs a label (--label, --label-all or --label-suffix) or --time "
			  "dates, which it places on the image's grid" },
			/* values are interpolated, classes counted or picked */
			{ o.label_kind == CDP_LKIND_CLASS && o.label_resample != CDP_RESAMPLE_NEAR &&
			  o.label_resample != CDP_RESAMPLE_MODE,
			  "--label-resample bilinear, cubic and average are for value labels "
			  "(continuous targets); class labels take near or mode" },
			{ o.label_kind == CDP_LKIND_VALUE && o.label_resample == CDP_RESAMPLE_MODE,
			  "--label-resample mode is for class labels; value labels take near, "
			  "bilinear, cubic or average" },
			{ o.label_kind == CDP_LKIND_CLASS && nlb,
			  "--label-bands takes targets of a value label (class labels are band 1)" },
			{ o.label_kind == CDP_LKIND_VALUE && o.has_ignore,
			  "--ignore is for class labels; a value label's missing targets are NaN" },
			{ o.label_kind == CDP_LKIND_VALUE && map_arg,
			  "--label-map renumbers class labels, not values" },
			{ o.label_kind == CDP_LKIND_VALUE && o.vec.given,
			  "the vector label options make class labels, not values" },
		};
		for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
			if (rules[k].bad) {
				fprintf(stderr, "cdp-tile: %s\n", rules[k].why);
				ret = 2;
				goto out;
			}
		if (cdp_label_vector_options_check(&o.vec)) {
			ret = 2;
			goto out;
		}
	}
	if (o.stats_path && !o.standardize) {
		fprintf(stderr, "cdp-tile: --stats needs --standardize\n");
		ret = 2;
		goto out;
	}
	/* both would name the label's ids: --classes a vector's attribute
	 * values, --label-map a raster's values (cdp-tile(1), LABELS) */
	if (map_arg && nclasses) {
		fprintf(stderr, "cdp-tile: --classes names a vector label's attribute "
		        "values and --label-map renumbers a label raster's: give one\n");
		ret = 2;
		goto out;
	}
	if (map_arg) {
		size_t where;
		int inl = cdp_labelmap_is_inline(map_arg);

		rc = inl ? cdp_labelmap_parse_inline(map_arg, &map, &where, why, sizeof why)
		         : cdp_labelmap_load(map_arg, &map, &where, why, sizeof why);
		if (rc && inl) {
			fprintf(stderr, "cdp-tile: --label-map: '%s': item %zu: %s\n", map_arg,
			        where, why);
			ret = 2;
			goto out;
		}
		if (rc) {
			if (rc > 0)
				fprintf(stderr, "cdp-tile: cannot read label map '%s': %s\n", map_arg,
				        strerror(rc));
			else if (where)
				fprintf(stderr, "cdp-tile: label map '%s' line %zu: %s\n", map_arg,
				        where, why);
			else
				fprintf(stderr, "cdp-tile: label map '%s': %s\n", map_arg, why);
			ret = 1;
			goto out;
		}
		have_map = 1;
		o.label_map = &map;
		o.label_map_path = inl ? NULL : map_arg;
	}
	if (format >= 0 && !o.outdir) {
		fprintf(stderr, "cdp-tile: --format needs -O DIR\n");
		ret = 2;
		goto out;
	}
	/* -O writes tile files, no record stream: a level would change nothing */
	if (o.zlevel && o.outdir) {
		fprintf(stderr, "cdp-tile: --zlib compresses the record stream, which -O DIR does "
		        "not write\n");
		ret = 2;
		goto out;
	}
	if (o.outdir)
		o.format = format >= 0 ? format : CDP_TILE_TIF;
	o.names = nnames ? names : NULL;
	o.labels = nlabels ? labels : NULL;

	/* a warning, -q or not: the labels of that input are all background */
	o.warn = stderr;
	/* A consumer that exits early must give EPIPE, reported, not a kill. */
	signal(SIGPIPE, SIG_IGN);
	rc = cdp_tile_run(&o, stdout, &res, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "cdp-tile: %s\n", err);
		ret = 1;
	}
	if (fclose(stdout) != 0 && !rc) {
		fprintf(stderr, "cdp-tile: cannot write the record stream: %s\n",
		        strerror(errno));
		ret = 1;
	}
	/* a warning, -q or not: the labels may lie elsewhere than the user meant */
	if (res.note[0])
		fprintf(stderr, "cdp-tile: warning: %s\n", res.note);
	/* pixels no feature covers silently became the first name's class */
	if (!ret && !quiet && nclasses && o.vec.field && !o.vec.background_given)
		fprintf(stderr, "cdp-tile: note: pixels no feature covers became class 0 '%s' "
		        "(--background 0); --background ignore leaves them out of the loss, "
		        "--label-extent bounds the labelled area\n", classes[0]);
	if (!ret && !quiet)
		fprintf(stderr, "cdp-tile: %llu tiles written, %llu dropped, "
		        "%llu bytes\n", (unsigned long long)res.written,
		        (unsigned long long)res.dropped,
		        (unsigned long long)res.bytes);
	goto out;
nomem:
	fprintf(stderr, "cdp-tile: out of memory\n");
	ret = 1;
out:
	if (have_map)
		cdp_labelmap_free(&map);
	free(names);
	free(labels);
	free(times);
	free(classes);
	free(classbuf);
	return ret;
}
