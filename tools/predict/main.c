/* main.c: cdp-predict, options (man/cdp-predict.1). The work is
 * cdp_predict_run (predict.c); this file parses and checks the options,
 * starts MPI (an MPI singleton when run alone) and maps the outcome to
 * the exit status.
 */
#include "predict.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_progress.h"
#include "cdp_raster.h"
#include "device.h"
#include "dist/dist.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "cdp-predict"

enum {
	OPT_ANY_CRS = 256, OPT_BATCH, OPT_COG, OPT_COLORS, OPT_DEVICE, OPT_OVERLAP, OPT_PRECISION,
	OPT_PREVIEW, OPT_PREVIEW_BANDS, OPT_PROB, OPT_PROGRESS, OPT_SIZE, OPT_THREADS, OPT_THRESHOLD,
	OPT_TIME, OPT_TPS, OPT_TTA, OPT_VECTOR,
	OPT_VECTOR_CLASS
};

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: " PROG " [-hqV] [--any-crs] [--size N] [--overlap N] [--batch N] [--threads N]\n"
	    "                   [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16]\n"
	    "                   [--tta none|flips|d4] [--prob] [--cog] [--colors FILE]\n"
	    "                   [--vector OUT.gpkg|OUT.geojson] [--vector-class K|name|all]\n"
	    "                   [--preview FILE.png] [--preview-bands R,G,B|B] [--progress] [--tps]\n"
	    "                   MODEL RASTER|--time DATE,DATE[,...] -o OUT.tif\n"
	    "       " PROG " [-hqV] [--size N] [--batch N] [--threads N]\n"
	    "                   [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16]\n"
	    "                   [--tta none|flips|d4] [--threshold P] MODEL DIR|LIST -o OUT.csv|-\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "any-crs",      no_argument,       NULL, OPT_ANY_CRS },
		{ "batch",        required_argument, NULL, OPT_BATCH },
		{ "cog",          no_argument,       NULL, OPT_COG },
		{ "colors",       required_argument, NULL, OPT_COLORS },
		{ "device",       required_argument, NULL, OPT_DEVICE },
		{ "help",         no_argument,       NULL, 'h' },
		{ "output",       required_argument, NULL, 'o' },
		{ "overlap",      required_argument, NULL, OPT_OVERLAP },
		{ "precision",    required_argument, NULL, OPT_PRECISION },
		{ "preview",      required_argument, NULL, OPT_PREVIEW },
		{ "preview-bands", required_argument, NULL, OPT_PREVIEW_BANDS },
		{ "prob",         no_argument,       NULL, OPT_PROB },
		{ "progress",     no_argument,       NULL, OPT_PROGRESS },
		{ "quiet",        no_argument,       NULL, 'q' },
		{ "size",         required_argument, NULL, OPT_SIZE },
		{ "threads",      required_argument, NULL, OPT_THREADS },
		{ "time",         required_argument, NULL, OPT_TIME },
		{ "threshold",    required_argument, NULL, OPT_THRESHOLD },
		{ "tps",          no_argument,       NULL, OPT_TPS },
		{ "tta",          required_argument, NULL, OPT_TTA },
		{ "vector",       required_argument, NULL, OPT_VECTOR },
		{ "vector-class", required_argument, NULL, OPT_VECTOR_CLASS },
		{ "version",      no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	/* the operands: with --time, the dates are the raster */
	static const char *const operands[] = { "MODEL", "RASTER", NULL },
	                         *const model_only[] = { "MODEL", NULL };
	cdp_predict_opts o;
	char err[1024];
	int c, rc = 2, mpi = 0, vector_class = 0;

	cdp_predict_opts_init(&o);
	cdp_cli_init(PROG, stderr);
	while ((c = cdp_cli_getopt(argc, argv, "ho:qV", longopts)) != -1) {
		switch (c) {
		case 'h': usage(stdout); rc = cdp_cli_close(stdout) ? 1 : 0; goto out;
		case 'o':
			if (cdp_cli_file("-o", optarg))
				goto out;
			o.output = optarg;
			break;
		case 'q': o.progress = CDP_PROGRESS_OFF; break;
		case 'V':
			rc = cdp_cli_version(stdout, cdp_engine_features(), cdp_dist_features(),
			                     cdp_raster_version(), NULL) ? 1 : 0;
			goto out;
		case OPT_ANY_CRS: o.any_crs = 1; break;
		case OPT_BATCH:
			if (cdp_cli_int("--batch", optarg, 1, 4096, &o.batch))
				goto out;
			break;
		case OPT_COG: o.cog = 1; break;
		case OPT_COLORS: o.colors = optarg; break;
		case OPT_DEVICE:
			if (cdp_device_parse(optarg) != 0) {
				cdp_cli_bad("--device", optarg, "cpu, cuda, cuda:N or auto");
				goto out;
			}
			o.device = optarg;
			break;
		case OPT_OVERLAP:
			if (cdp_cli_int("--overlap", optarg, 0, 65535, &o.overlap))
				goto out;
			break;
		case OPT_PRECISION:
			/* the names are indexed by CDP_PREC_* */
			if (cdp_cli_keyword("--precision", optarg, cdp_precision_names, &o.precision))
				goto out;
			break;
		case OPT_PREVIEW:
			if (cdp_cli_file("--preview", optarg))
				goto out;
			o.preview = optarg;
			break;
		case OPT_PREVIEW_BANDS: {
			size_t n;
			if (cdp_cli_int_list("--preview-bands", optarg, 1, 65535, o.preview_bands, 3, &n))
				goto out;
			if (n == 2) {
				cdp_cli_bad("--preview-bands", optarg, "one band (gray) or three (red, green, "
				            "blue), like 4,3,2");
				goto out;
			}
			o.npreview_bands = (int)n;
			break;
		}
		case OPT_PROB: o.prob = 1; break;
		case OPT_PROGRESS: o.progress = CDP_PROGRESS_ON; break;
		case OPT_SIZE:
			if (cdp_cli_int("--size", optarg, 1, 65536, &o.size))
				goto out;
			break;
		case OPT_THREADS:
			if (cdp_cli_int("--threads", optarg, 1, CDP_MAX_THREADS, &o.threads))
				goto out;
			break;
		case OPT_THRESHOLD:
			if (cdp_cli_double("--threshold", optarg, 0, 1, 0, &o.threshold))
				goto out;
			break;
		case OPT_TTA:
			if (!(o.tta = cdp_predict_tta_parse(optarg))) {
				cdp_cli_bad("--tta", optarg, "none, flips or d4");
				goto out;
			}
			break;
		case OPT_TIME:
			if (cdp_cli_list("--time", optarg, 2, "two or more rasters separated by commas"))
				goto out;
			o.input = optarg;
			o.time = 1;
			break;
		case OPT_TPS:
			o.tps = 1;
			break;
		case OPT_VECTOR:
			if (cdp_cli_file("--vector", optarg))
				goto out;
			o.vector = optarg;
			break;
		case OPT_VECTOR_CLASS:
			/* an id, all, or a name the checkpoint gives (predict_setup.c) */
			o.vector_class_name = NULL;
			if (strcmp(optarg, "all") == 0)
				o.vector_class = CDP_PREDICT_VECTOR_ALL;
			else if (*optarg && strspn(optarg, "0123456789") == strlen(optarg)) {
				if (cdp_cli_int("--vector-class", optarg, 0, 254, &o.vector_class))
					goto out;
			} else if (*optarg)
				o.vector_class_name = optarg;
			else {
				cdp_cli_bad("--vector-class", optarg, "a class id, a class name or all");
				goto out;
			}
			vector_class = 1;
			break;
		default: goto out;
		}
	}
	if (cdp_cli_operands(argc - optind, argv + optind, o.time ? model_only : operands)) {
		usage(stderr);
		goto out;
	}
	if (!o.output) {
		fprintf(stderr, PROG ": missing -o OUT.tif\n");
		usage(stderr);
		goto out;
	}
	o.model = argv[optind];
	if (!o.time)
		o.input = argv[optind + 1];
	/* options that would change nothing are refused, not ignored: a CSV
	 * holds every class's probability already and is no GeoTIFF */
	if ((o.prob || o.cog) && cdp_predict_output_csv(o.output)) {
		fprintf(stderr, PROG ": %s is for a GeoTIFF output, not the CSV that -o '%s' "
		        "names%s\n", o.prob ? "--prob" : "--cog", o.output,
		        o.prob ? " (which holds every class's probability)" : "");
		goto out;
	}
	/* a window given here is checked here, as cdp-tile does; the model's
	 * own (no --size) is known only once it is loaded: exit 1 then */
	if (o.size > 0 && o.overlap >= o.size) {
		fprintf(stderr, PROG ": --overlap %d must be smaller than --size %d\n", o.overlap,
		        o.size);
		goto out;
	}
	if (o.npreview_bands && !o.preview) {
		fprintf(stderr, PROG ": --preview-bands needs --preview (the PNG it paints)\n");
		goto out;
	}
	if (o.tps && !o.time) {
		fprintf(stderr, PROG ": --tps needs --time (it places the dates that GCPs "
		        "place)\n");
		goto out;
	}
	if (vector_class && !o.vector) {
		fprintf(stderr, PROG ": --vector-class needs --vector (the class it polygonizes)\n");
		goto out;
	}

	rc = 1;
	/* a backend reads these itself and would take a value it does not
	 * know for its default: refused here, as cdp-train refuses them */
	{
		const char *bad;
		char want[256];
		if ((bad = cdp_device_env_check(want, sizeof want)) != NULL) {
			cdp_cli_env_bad(bad, want, NULL);
			goto out;
		}
	}
	cdp_dist_set_prog(PROG);
	/* the GPU before MPI_Init, where a CUDA-aware MPI sets up on the current one */
	cdp_device_preselect(o.device);
	if ((c = cdp_dist_init(&argc, &argv)) != 0) {
		cdp_cli_env_bad(cdp_dist_bad_env(), cdp_dist_bad_env_want(), cdp_strerror(c));
		goto out;
	}
	mpi = 1;
	if (cdp_dist_env_launch()) {
		/* its strips are exchanged through host memory, which only MPI moves */
		fprintf(stderr, PROG ": runs alone or under mpirun or srun, not launched by "
		        "CDP_RENDEZVOUS\n");
		goto out;
	}
	/* ranks wait for each other once per round of strips, which can take
	 * longer than the default watchdog on a wide raster */
	if (!getenv("CDP_DIST_TIMEOUT"))
		cdp_dist_set_timeout(3600);
	if (cdp_predict_run(&o, err, sizeof err) == 0)
		rc = 0;
	else if (cdp_dist_size() > 1)
		fprintf(stderr, PROG ": rank %d: %s\n", cdp_dist_rank(), err);
	else
		fprintf(stderr, PROG ": %s\n", err);
out:
	if (mpi)
		cdp_dist_finalize();
	return rc;
}
