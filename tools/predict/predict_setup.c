/* predict_setup.c: what cdp-predict does before the first strip: the
 * model from its checkpoint, the raster checked against it, the window
 * weights and grid, and the buffers (their shapes are in predict_int.h). */
#include "predict_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_num.h"
#include "cdp_thread.h"
#include "device.h"
#include "dist/dist.h"

int pr_fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

void cdp_predict_opts_init(cdp_predict_opts *o)
{
	memset(o, 0, sizeof *o);
	o->overlap = -1;
	o->batch = 4;
	o->device = "auto";
	o->precision = CDP_PREC_FP32;
	o->vector_class = 1;
	o->tta = 1;
	o->threshold = 0.5;
}

static void *xmalloc(size_t a, size_t b, size_t c, size_t d)
{
	size_t n;
	if (cdp_mul_size(a, b, &n) || cdp_mul_size(n, c, &n) || cdp_mul_size(n, d, &n))
		return NULL;
	return calloc(1, n ? n : 1);
}

/* The options every rank must be given alike (dist.h, cdp_dist_same_opts):
 * those that decide the output's pixels and files. Paths are not among
 * them (each rank may read its own copy of the raster, which
 * pr_same_raster compares; rank 0 alone reads the checkpoint and writes),
 * only whether an optional output is asked for; nor are --batch,
 * --threads and --device, which only decide how a rank computes. */
static void opts_text(const cdp_predict_opts *o, char *buf, size_t cap)
{
	const char *no = "not given", *yes = "given";
	char a[40], bands[40] = "";
#define OPT(...) cdp_dist_opt(buf, cap, __VA_ARGS__)

	buf[0] = '\0';
	OPT("--time", "%s", o->time ? yes : no);
	OPT("--size", "%s", o->size ? (snprintf(a, sizeof a, "%d", o->size), a) : no);
	OPT("--overlap", "%s", o->overlap >= 0 ? (snprintf(a, sizeof a, "%d", o->overlap), a) : no);
	OPT("--precision", "%s", cdp_precision_name(o->precision));
	OPT("--tta", "%s", o->tta == 8 ? "d4" : o->tta == 4 ? "flips" : "none");
	OPT("--prob", "%s", o->prob ? yes : no);
	OPT("--threshold", "%s", cdp_dist_num(a, sizeof a, o->threshold));
	OPT("--any-crs", "%s", o->any_crs ? yes : no);
	OPT("--cog", "%s", o->cog ? yes : no);
	OPT("--colors", "%s", o->colors ? yes : no);
	OPT("--vector", "%s", o->vector ? yes : no);
	if (o->vector_class_name)
		OPT("--vector-class", "%s", o->vector_class_name);
	else if (o->vector_class == CDP_PREDICT_VECTOR_ALL)
		OPT("--vector-class", "all");
	else
		OPT("--vector-class", "%d", o->vector_class);
	OPT("--preview", "%s", o->preview ? yes : no);
	for (int i = 0; i < o->npreview_bands; i++)
		snprintf(bands + strlen(bands), sizeof bands - strlen(bands), "%s%d", i ? "," : "",
		         o->preview_bands[i]);
	OPT("--preview-bands", "%s", o->npreview_bands ? bands : no);
#undef OPT
}

/* Before anything else: a rank given other options would write its strips
 * of another map into rank 0's (a hybrid), or fail in the exchange. */
static int same_opts(predictor *p, char *err, size_t cap)
{
	static char text[CDP_DIST_OPTS_MAX];
	char msg[600], host[256];

	opts_text(p->o, text, sizeof text);
	if (!cdp_dist_same_opts(text, msg, sizeof msg))
		return 0;
	if (!msg[0])
		return pr_fail(err, cap, "another rank's options are not rank 0's (see its message)");
	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = '\0';
	return pr_fail(err, cap, "%s (host '%s'; every rank must be given the same options)", msg,
	               host);
}

/* The checkpoint's bytes, read by rank 0 and broadcast, so that only rank
 * 0's host needs the file (a node-local run directory) and it is read once.
 * The run's first collective after the options' (nothing before them can
 * fail). rank 0's stat of --model decides whether it names a run
 * directory, on every rank. */
static int fetch_ckpt(predictor *p, unsigned char **buf, size_t *len, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	int64_t dir = 0;                /* rank 0's --model is a directory */
	struct stat st;
	char why[256] = "";
	int rc;

	*buf = NULL;
	*len = 0;
	if (p->nranks > 1 && same_opts(p, err, cap) < 0)
		return -1;
	if (p->rank == 0 && stat(o->model, &st) == 0 && S_ISDIR(st.st_mode))
		dir = 1;
	if (p->nranks > 1)
		cdp_dist_bcast_bytes(&dir, sizeof dir);
	if (dir)
		snprintf(p->model, sizeof p->model, "%s/checkpoint.cdpt", o->model);
	else
		snprintf(p->model, sizeof p->model, "%s", o->model);
	if (cdp_dist_bcast_buf(p->rank == 0 ? cdp_ckpt_load_why(p->model, buf, len, why,
	                                                        sizeof why) : 0, buf, len,
	                       &rc) == 0)
		return 0;
	return rc ? pr_fail(err, cap, "cannot read '%s': %s", p->model,
	                    why[0] ? why : cdp_strerror(rc)) :
	       pr_fail(err, cap, "another rank failed");
}

/* A regression net (checkpoint TASK): a float32 map of its K targets;
 * what only a class map has is refused. */
static int regression(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	const char *opt = o->vector ? "--vector" : o->colors ? "--colors" : o->prob ? "--prob" :
	                  o->preview ? "--preview" : NULL;

	if (p->classify)
		return pr_fail(err, cap, "'%s': a regression net with a %dx%d output is not a "
		               "segmentation model", p->model, 1, 1);
	if (p->ck.ntargets != p->K)
		return pr_fail(err, cap, "'%s': the checkpoint records %d targets, the net gives %d",
		               p->model, p->ck.ntargets, p->K);
	if (opt)
		return pr_fail(err, cap, "%s: '%s' is a regression net, whose map is float32 values "
		               "of %d target%s (%s is for class maps)", opt, p->model, p->K,
		               p->K == 1 ? "" : "s", opt);
	p->reg = 1;
	return 0;
}

/* --vector-class NAME: the class of that name, as the outputs name the
 * classes: the checkpoint's names, and with --colors those of the file
 * over them (pr_legend_make); 0 with p->vclass, or -1 listing the names. */
static int vector_class_by_name(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	const char *want = o->vector_class_name;
	char names[1024] = "";
	size_t n = 0;
	pr_legend l = { 0 };
	int nk, found = -1;

	if (o->colors) {
		/* the file is read again for the map's legend: a few lines */
		if (pr_legend_make(&l, p->K > 1 ? p->K : 2, &p->ck, o->colors, err, cap) < 0)
			return -1;
		nk = l.k;
	} else if (!(nk = p->ck.nclass_names)) {
		return pr_fail(err, cap, "--vector-class '%s': the model in '%s' names no class "
		               "(give an id or all, or name them with --colors)", want, p->model);
	}
	for (int k = 0; k < nk && found < 0; k++) {
		const char *name = o->colors ? l.name[k] : p->ck.class_names[k];
		if (strcmp(name, want) == 0)
			found = k;
		else if (n < sizeof names)
			n += (size_t)snprintf(names + n, sizeof names - n, "%s'%s'", k ? ", " : "", name);
	}
	pr_legend_free(&l);
	if (found >= 0)
		return (p->vclass = found), 0;
	if (o->colors)
		return pr_fail(err, cap, "--vector-class '%s': no class has that name in the model in "
		               "'%s' with --colors '%s' (its classes: %s)", want, p->model, o->colors,
		               names);
	return pr_fail(err, cap, "--vector-class '%s': the model in '%s' has no class of that name "
	               "(its classes: %s)", want, p->model, names);
}

/* 1 when the model builds for a window of size (batch 1): the probe of
 * size_fits, on the failure path only. */
static int builds(const predictor *p, int size)
{
	cdp_net t;
	char w[512], e[512];

	memset(&t, 0, sizeof t);
	if (cdp_net_build_infer(&t, p->be, p->ck.cfg_text, p->model,
	                        (const char *const *)p->ck.overrides, p->ck.noverrides, p->C, size,
	                        size, 1, w, sizeof w, e, sizeof e) != 0)
		return 0;
	cdp_net_free(&t);
	return 1;
}

/* The sizes around --size (p->S) that the model takes, for the message of
 * a failed build: for the smallest power of two P (2..512) at which both
 * multiples of P around S build, lo and hi = lo + P, and 2; else the
 * smallest such multiple above S that builds (a size under the model's
 * smallest window), hi, and 1; else 0. A U-Net of depth d or an FPN
 * halves a side d times and concatenates or adds it back: a build at an
 * odd size fails with "shapes differ" at some concat, and the sizes that
 * build tell the user more than the layer does. Only on that failure
 * path: each try builds a net of one window. */
static int size_fits(const predictor *p, int *lo, int *hi)
{
	int up = 0;

	for (int P = 2; P <= 512; P *= 2) {
		int l = p->S / P * P, h = l + P;
		if (!builds(p, h))
			continue;
		if (!up)
			up = h;
		if (l > 0 && builds(p, l)) {
			*lo = l;
			*hi = h;
			return 2;
		}
	}
	*hi = up;
	return up ? 1 : 0;
}

/* The checkpoint, the net rebuilt from it at (C, S, S), and its tensors. */
int pr_load_model(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	unsigned char *buf;
	size_t len;
	int rc, threads = o->threads;
	char why[512];

	if (fetch_ckpt(p, &buf, &len, err, cap) < 0)
		return -1;
	/* prediction needs the consensus model only: of the per-rank state of
	 * an average/admm run keep no rank's share (all are still validated) */
	rc = cdp_ckpt_decode_why(buf, len, CDP_CKPT_MAX_RANKS, &p->ck, why, sizeof why);
	free(buf);
	if (rc != 0)
		return pr_fail(err, cap, "cannot read '%s': %s", p->model, why);
	p->have_ck = 1;
	/* initial weights know nothing of the data unless given a standardization */
	if (p->ck.initial && !p->ck.mean)
		return pr_fail(err, cap, "'%s' holds initial weights (python3 -m cdpool import-torch) "
		               "without a standardization: train from them with cdp-train --init",
		               p->model);
	p->C = p->ck.in_c;
	if (p->ck.nbands != 0 && p->ck.nbands != p->C)
		return pr_fail(err, cap, "'%s': %d bands for %d input channels", p->model, p->ck.nbands, p->C);
	p->S = o->size ? o->size : (p->ck.in_h == p->ck.in_w ? p->ck.in_h : 256);
	p->O = o->overlap >= 0 ? o->overlap : p->S / 4;
	if (p->O >= p->S)
		return pr_fail(err, cap, "--overlap %d: must be smaller than the window size %d", p->O, p->S);
	p->T = p->S - p->O;
	p->m = p->O / 2;
	p->B = o->batch;
	if (threads <= 0) {
		threads = cdp_thread_cpus() / cdp_dist_local_share();
		if (threads < 1)
			threads = 1;
	}
	if (!(p->be = cdp_device_open(o->device, threads, cdp_dist_local_rank(), why,
	                              sizeof why)))
		return pr_fail(err, cap, "--device %s: %s", o->device, why);
	if (p->be->set_precision(p->be, o->precision) != 0)
		return pr_fail(err, cap, "--precision %s: the %s backend cannot compute in it%s",
		               cdp_precision_name(o->precision), p->be->name,
		               cdp_device_precision_why(p->be, o->precision));
	if (cdp_net_build_infer(&p->net, p->be, p->ck.cfg_text, p->model,
	                       (const char *const *)p->ck.overrides, p->ck.noverrides, p->C, p->S,
	                       p->S, p->B, why, sizeof why, err, cap) < 0) {
		size_t l = strlen(err);
		int lo, hi;
		int fits = o->size ? size_fits(p, &lo, &hi) : 0;
		if (fits == 2)
			snprintf(err + l, cap - l, " (--size %d does not fit the model: sizes that do "
			         "are multiples of %d, as %d and %d)", p->S, hi - lo, lo, hi);
		else if (fits == 1)
			snprintf(err + l, cap - l, " (--size %d does not fit the model: the next size "
			         "that does is %d)", p->S, hi);
		else
			snprintf(err + l, cap - l, " (window size %d)", p->S);
		return -1;
	}
	if (why[0] && p->rank == 0)
		fprintf(stderr, "cdp-predict: warning: %s\n", why);
	p->have_net = 1;
	const cdp_layer *h = &p->net.layers[p->net.out_layer];
	p->classify = h->out.h == 1 && h->out.w == 1 && p->S > 1;
	if (!p->classify && (h->out.h != p->S || h->out.w != p->S))
		return pr_fail(err, cap, "'%s': the model gives a %dx%d output for a %dx%d window, "
		            "not a segmentation model", p->model, h->out.h, h->out.w, p->S, p->S);
	p->K = h->out.c;
	if ((rc = cdp_ckpt_to_net(&p->ck, &p->net, err, cap)) != 0) {
		snprintf(why, sizeof why, "%s", err);
		return pr_fail(err, cap, "'%s': %s", p->model, why);
	}
	p->net.train = 0;
	if (p->ck.task == CDP_CKPT_TASK_REGRESSION)
		return regression(p, err, cap);
	/* class ids are uint8 in a raster only: a classifier's CSV writes them as text */
	if (!o->prob && p->K > 255 && !(p->classify && cdp_predict_output_csv(o->output)))
		return pr_fail(err, cap, "'%s': %d classes do not fit class ids of uint8 (use --prob)",
		            p->model, p->K);
	p->vclass = o->vector_class;
	if (o->vector && o->vector_class_name)
		return vector_class_by_name(p, err, cap);
	if (o->vector && o->vector_class >= (p->K > 1 ? p->K : 2))
		return pr_fail(err, cap, "--vector-class %d: the model in '%s' has classes 0 to %d",
		            o->vector_class, p->model, p->K > 1 ? p->K - 1 : 1);
	return 0;
}

/* The raster's CRS against the training data's (checkpoint version 5; an
 * unknown one on either side is not checked): another is refused unless
 * --any-crs, another pixel size is warned about (rank 0). */
static int check_georef(predictor *p, char *err, size_t cap)
{
	const char *crs = p->ck.crs;
	/* a raster georeferenced by GCPs only is in their CRS */
	const char *mine = p->ri->has_gt || p->ri->crs[0] || p->ri->ngcps == 0 ? p->ri->crs
	                   : p->ri->gcp_crs;
	char why[128], a[256], b[256];
	double rx, ry;

	if (crs && crs[0] && mine[0] && !p->o->any_crs) {
		int same = cdp_raster_crs_same(mine, crs, why, sizeof why);
		cdp_raster_crs_name(mine, a, sizeof a);
		cdp_raster_crs_name(crs, b, sizeof b);
		if (same < 0)
			return pr_fail(err, cap, "'%s' or the model in '%s': %s", p->o->input, p->model,
			               why);
		if (same == 0)
			return pr_fail(err, cap, "'%s' is in CRS %s, the model in '%s' was trained on "
			               "data in %s (--any-crs to predict it anyway)", p->o->input, a,
			               p->model, b);
	}
	if (p->ck.res_x > 0 && p->ri->has_gt && p->rank == 0) {
		cdp_raster_pixel_size(p->ri->gt, &rx, &ry);
		if (fabs(rx - p->ck.res_x) > 1e-6 * p->ck.res_x ||
		    fabs(ry - p->ck.res_y) > 1e-6 * p->ck.res_y)
			fprintf(stderr, "cdp-predict: warning: '%s' has pixels of %.9g x %.9g, the model "
			        "in '%s' was trained on %.9g x %.9g\n", p->o->input, rx, ry, p->model,
			        p->ck.res_x, p->ck.res_y);
	}
	return 0;
}

/* The raster against the checkpoint's bands, data type and statistics.
 * Version 1 checkpoints do not record the pool's data type (ck.dtype 0);
 * for them a type that cannot hold the training data's mean is the type
 * check. */
int pr_open_raster(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	int rc, seq = 1;

	cdp_raster_init();
	/* a date placed by other GCPs warps by their polynomial, gdalwarp's
	 * default, or with --tps by the spline, as cdp-tile --tps warped it */
	if (o->time && (rc = cdp_raster_open_time(o->input, CDP_RASTER_TIME_ET, o->tps, &p->r,
	                                          err, cap)) != 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", err);
		return pr_fail(err, cap, "--time '%s': %s", o->input, why);
	}
	if (!o->time && (rc = cdp_raster_open(o->input, &p->r, err, cap)) != 0) {
		char why[512];
		snprintf(why, sizeof why, "%s", err);
		return pr_fail(err, cap, "cannot open '%s': %s", o->input, why);
	}
	p->ri = cdp_raster_get_info(p->r);
	/* a side fits an int (the strips, the windows, GDAL's offsets) with
	 * room for the sums over it; no larger raster has been tried */
	if (p->ri->width > 1u << 30 || p->ri->height > 1u << 30)
		return pr_fail(err, cap, "'%s': %llux%llu pixels is too large (at most %u pixels "
		               "on a side)", o->input, (unsigned long long)p->ri->width,
		               (unsigned long long)p->ri->height, 1u << 30);
	p->W = (int)p->ri->width;
	p->H = (int)p->ri->height;
	/* --preview-bands: bands of the input (of each date, with --time),
	 * checked before the windows run, not after */
	for (int i = 0; i < o->npreview_bands; i++) {
		unsigned nb = p->ri->bands / (unsigned)cdp_raster_dates(p->r);
		if ((unsigned)o->preview_bands[i] > nb)
			return pr_fail(err, cap, "--preview-bands %d: '%s' has %u band%s%s",
			            o->preview_bands[i], o->input, nb, nb == 1 ? "" : "s",
			            o->time ? " a date" : "");
	}
	/* a colour table's indices are no measurement the model learned */
	if (cdp_raster_paletted(p->r))
		return pr_fail(err, cap, "'%s': band 1 is paletted (colour table indices): expand it "
		               "first (gdal_translate -expand rgb IN OUT, or a VRT)", o->input);
	free(p->nd);
	free(p->hasnd);
	p->nd = NULL;
	p->hasnd = NULL;
	if (!(p->mean = calloc(p->C, sizeof *p->mean)) || !(p->inv = calloc(p->C, sizeof *p->inv)) ||
	    !(p->nd = calloc(p->C, sizeof *p->nd)) || !(p->hasnd = calloc(p->C, sizeof *p->hasnd)) ||
	    !(p->ck.bands || (p->ck.bands = calloc(p->C, sizeof *p->ck.bands))))
		return pr_fail(err, cap, "out of memory");
	if (p->ck.nbands == 0)
		for (int c = 0; c < p->C; c++)
			p->ck.bands[c] = c + 1;
	for (int c = 0; c < p->C; c++)
		seq &= p->ck.bands[c] == c + 1;
	/* a recorded band list (cdp-tile's band_list, all bands or --bands:
	 * the pool does not tell them apart) reads those bands of a scene
	 * with more; without one, or of stacked dates, the model's bands are
	 * the scene's */
	if (seq && (int)p->ri->bands != p->C && (p->ck.nbands == 0 || o->time ||
	                                         (int)p->ri->bands < p->C))
		return pr_fail(err, cap, "'%s' has %u band%s, the model in '%s' takes %d", o->input,
		            p->ri->bands, p->ri->bands == 1 ? "" : "s", p->model, p->C);
	for (int c = 0; c < p->C; c++)
		if (p->ck.bands[c] > (int)p->ri->bands)
			return pr_fail(err, cap, "'%s' has %u band%s, the model in '%s' reads band %d",
			            o->input, p->ri->bands, p->ri->bands == 1 ? "" : "s", p->model,
			            p->ck.bands[c]);
	if (p->ck.dtype != 0 && p->ck.dtype != p->ri->dtype)
		return pr_fail(err, cap, "'%s' is %s, the model in '%s' was trained on %s data",
		            o->input, cdp_dtype_name(p->ri->dtype), p->model,
		            cdp_dtype_name(p->ck.dtype));
	for (int c = 0; c < p->C; c++) {
		double mu = p->ck.mean ? p->ck.mean[c] : 0, sd = p->ck.std ? p->ck.std[c] : 1;
		if (p->ck.dtype == 0 && p->ck.mean && (mu < cdp_dtype_min(p->ri->dtype) || mu > cdp_dtype_max(p->ri->dtype)))
			return pr_fail(err, cap, "'%s' is %s, but the model in '%s' was trained on band %d "
			            "values around %g: a different data type", o->input,
			            cdp_dtype_name(p->ri->dtype), p->model, p->ck.bands[c], mu);
		p->mean[c] = (float)mu;
		p->inv[c] = sd > 0 ? (float)(1.0 / sd) : 1.0f;
	}
	/* each model band's own nodata; a pixel is nodata where all are, or
	 * where one is when they differ (cdp-tile's rule) */
	int nodata = 0;
	p->nd_any = 0;
	for (int c = 0; c < p->C; c++) {
		p->hasnd[c] = cdp_raster_band_nodata(p->r, p->ck.bands[c], &p->nd[c]);
		nodata |= p->hasnd[c];
		p->nd_any |= !p->hasnd[c] || !(p->nd[c] == p->nd[0] ||
		                               (isnan(p->nd[c]) && isnan(p->nd[0])));
	}
	p->nodata_mode = cdp_raster_has_mask(p->r, p->ck.bands[0]) ? 2 : nodata ? 1 : 0;
	return check_georef(p, err, cap);
}

/* What a rank's raster must share with rank 0's: its grid, bands, type,
 * nodata and mask, and a fingerprint of its pixels. Node-local copies
 * that differ would otherwise give a wrong map (another width: rank 0
 * reads rank 1's strip sums with its own row width), a map of two scenes,
 * or, another height, a rank waiting for a round its peer never starts. */
typedef struct raster_print {
	uint64_t w, h;
	uint32_t bands, crc;
	int32_t dtype, has_nodata, has_gt, nodata_mode, failed;
	double nodata, gt[6];
} raster_print;

/* The CRC32 of rows 0, H/2 and H-1 of every band, in band order: a
 * cheap fingerprint (3 rows, however large the raster) that tells two
 * scenes apart. 0, or -1 with err. */
static int rows_crc(predictor *p, uint32_t *crc, char *err, size_t cap)
{
	size_t n = (size_t)p->W * cdp_dtype_size(p->ri->dtype);
	int rows[3] = { 0, p->H / 2, p->H - 1 };
	char why[512];
	void *row = malloc(n ? n : 1);

	if (!row)
		return pr_fail(err, cap, "out of memory");
	*crc = 0;
	for (int b = 1; b <= (int)p->ri->bands; b++)
		for (int i = 0; i < 3; i++) {
			if (cdp_raster_read(p->r, &b, 1, 0, rows[i], p->W, 1, row, why, sizeof why) != 0) {
				free(row);
				return pr_fail(err, cap, "cannot read '%s': %s", p->o->input, why);
			}
			*crc = cdp_crc32(*crc, row, n);
		}
	free(row);
	return 0;
}

/* What differs between a and rank 0's b, as "is X, rank 0's is Y", into
 * what[cap]; "" when nothing does. */
static void print_diff(const raster_print *a, const raster_print *b, char *what, size_t cap)
{
	what[0] = '\0';
	if (a->w != b->w || a->h != b->h)
		snprintf(what, cap, "is %llux%llu pixels, rank 0's is %llux%llu",
		         (unsigned long long)a->w, (unsigned long long)a->h,
		         (unsigned long long)b->w, (unsigned long long)b->h);
	else if (a->bands != b->bands)
		snprintf(what, cap, "has %u bands, rank 0's has %u", a->bands, b->bands);
	else if (a->dtype != b->dtype)
		snprintf(what, cap, "is %s, rank 0's is %s", cdp_dtype_name(a->dtype),
		         cdp_dtype_name(b->dtype));
	else if (a->has_gt != b->has_gt || memcmp(a->gt, b->gt, sizeof a->gt) != 0)
		snprintf(what, cap, "has another geotransform than rank 0's");
	else if (a->has_nodata != b->has_nodata ||
	         (a->has_nodata && memcmp(&a->nodata, &b->nodata, sizeof a->nodata) != 0))
		snprintf(what, cap, "has another nodata value than rank 0's");
	else if (a->nodata_mode != b->nodata_mode)
		snprintf(what, cap, "has %s mask band, rank 0's %s", a->nodata_mode == 2 ? "a" : "no",
		         b->nodata_mode == 2 ? "has one" : "has none");
	else if (a->crc != b->crc)
		snprintf(what, cap, "holds other pixels than rank 0's (CRC32 of its first, middle "
		         "and last rows %08x, rank 0's %08x)", (unsigned)a->crc, (unsigned)b->crc);
}

int pr_same_raster(predictor *p, char *err, size_t cap)
{
	raster_print mine, first;
	unsigned char *crs0 = NULL;
	size_t n = 0;
	char what[320] = "", host[256], why[128];
	int rc0 = 0, bad, e;

	if (p->nranks < 2)
		return 0;
	memset(&mine, 0, sizeof mine);
	mine.w = p->ri->width;
	mine.h = p->ri->height;
	mine.bands = p->ri->bands;
	mine.dtype = p->ri->dtype;
	mine.has_nodata = p->ri->has_nodata;
	mine.nodata = p->ri->has_nodata ? p->ri->nodata : 0;
	mine.has_gt = p->ri->has_gt;
	memcpy(mine.gt, p->ri->gt, sizeof mine.gt);
	mine.nodata_mode = p->nodata_mode;
	mine.failed = rows_crc(p, &mine.crc, err, cap) != 0;
	first = mine;
	cdp_dist_bcast_bytes(&first, sizeof first);
	/* rank 0's CRS with its terminating NUL: the other ranks read it as a
	 * string (it once went without, and they read past their copy) */
	if (p->rank == 0) {
		n = strlen(p->ri->crs) + 1;
		if (!(crs0 = malloc(n)))
			rc0 = CDP_ENOMEM;
		else
			memcpy(crs0, p->ri->crs, n);
	}
	if (cdp_dist_bcast_buf(rc0, &crs0, &n, &e) != 0)
		return pr_fail(err, cap, e ? "out of memory" : "another rank failed");
	if (n == 0 || crs0[n - 1] != '\0') {
		free(crs0);
		return pr_fail(err, cap, "rank 0's CRS came without its end");
	}
	bad = mine.failed;
	if (!bad && !first.failed && p->rank != 0) {
		print_diff(&mine, &first, what, sizeof what);
		/* the CRS as OGR compares it, as against the checkpoint's */
		if (!what[0] && (crs0[0] != '\0') != (p->ri->crs[0] != '\0'))
			snprintf(what, sizeof what, "has %s CRS, rank 0's %s", crs0[0] ? "no" : "a",
			         crs0[0] ? "has one" : "has none");
		else if (!what[0] && crs0[0] &&
		         cdp_raster_crs_same(p->ri->crs, (const char *)crs0, why, sizeof why) != 1)
			snprintf(what, sizeof what, "is in another CRS than rank 0's");
		if (what[0]) {
			if (gethostname(host, sizeof host) != 0)
				snprintf(host, sizeof host, "?");
			host[sizeof host - 1] = '\0';
			pr_fail(err, cap, "'%s' on host '%s' %s: every rank must read the same raster",
			        p->o->input, host, what);
			bad = 1;
		}
	}
	free(crs0);
	if (cdp_dist_any(bad) && !bad) {
		pr_fail(err, cap, first.failed ? "rank 0 cannot read '%s'" :
		        "another rank's raster is not rank 0's '%s' (see its message)", p->o->input);
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* w1 and the per-axis sums of weights over the window grid */
int pr_weights(predictor *p, char *err, size_t cap)
{
	if (!(p->w1 = calloc(p->S, sizeof *p->w1)) || !(p->normx = calloc(p->W, sizeof *p->normx)) ||
	    !(p->normy = calloc(p->H, sizeof *p->normy)))
		return pr_fail(err, cap, "out of memory");
	for (int i = 0; i < p->S; i++) {
		int d = i < p->S - 1 - i ? i : p->S - 1 - i;
		double s = d < p->O ? sin(M_PI / 2 * (d + 0.5) / p->O) : 1;
		p->w1[i] = (float)(s * s);
	}
	/* windows needed so that the grid from -m covers [0, n) */
	p->nx = p->W + p->m <= p->S ? 1 : 1 + (p->W + p->m - p->S + p->T - 1) / p->T;
	p->ny = p->H + p->m <= p->S ? 1 : 1 + (p->H + p->m - p->S + p->T - 1) / p->T;
	for (int i = 0; i < p->nx; i++)
		for (int x = 0; x < p->S; x++) {
			long xx = -p->m + (long)i * p->T + x;
			if (xx >= 0 && xx < p->W)
				p->normx[xx] += p->w1[x];
		}
	for (int i = 0; i < p->ny; i++)
		for (int y = 0; y < p->S; y++) {
			long yy = -p->m + (long)i * p->T + y;
			if (yy >= 0 && yy < p->H)
				p->normy[yy] += p->w1[y];
		}
	return 0;
}

/* a * b * c elements of `size` bytes of the backend's device memory, zeroed */
static void *devmem(predictor *p, size_t a, size_t b, size_t c, size_t size)
{
	size_t n;
	if (cdp_mul_size(a, b, &n) || cdp_mul_size(n, c, &n) || cdp_mul_size(n, size, &n))
		return NULL;
	return p->be->alloc(p->be, n ? n : 1);
}

/* The device buffers of the window ops, with the window weight and every
 * window's first column, which stay for the whole run. */
static int dev_alloc(predictor *p)
{
	int32_t *x0 = malloc((size_t)p->nx * sizeof *x0);

	p->dimg = devmem(p, p->C, p->S, p->W, sizeof(float));
	p->dsum = devmem(p, p->K, p->S, p->W, sizeof(float));
	p->dsrow = devmem(p, p->S, 1, 1, sizeof(int32_t));
	p->dx0 = devmem(p, p->nx, 1, 1, sizeof(int32_t));
	p->dw1 = devmem(p, p->S, 1, 1, sizeof(float));
	if (!x0 || !p->dimg || !p->dsum || !p->dsrow || !p->dx0 || !p->dw1) {
		free(x0);
		return -1;
	}
	for (int i = 0; i < p->nx; i++)
		x0[i] = -p->m + i * p->T;
	p->be->to_device(p->be, p->dx0, x0, (size_t)p->nx * sizeof *x0);
	p->be->to_device(p->be, p->dw1, p->w1, (size_t)p->S * sizeof *p->w1);
	free(x0);
	return 0;
}

int pr_tta_alloc(predictor *p, int s_out)
{
	size_t S = p->S;

	if (p->o->tta <= 1)
		return 0;
	p->tx = xmalloc(p->B, p->C, S * S, sizeof(float));
	p->tt = xmalloc(p->B, p->C, S * S, sizeof(float));
	p->tl = xmalloc(p->B, p->K, (size_t)s_out * s_out, sizeof(float));
	p->tacc = xmalloc(p->B, p->K, (size_t)s_out * s_out, sizeof(double));
	if (s_out > 1)
		p->dtl = devmem(p, p->B, p->K, S * S, sizeof(float));
	return p->tx && p->tt && p->tl && p->tacc && (s_out == 1 || p->dtl) ? 0 : -1;
}

int pr_alloc(predictor *p, char *err, size_t cap)
{
	size_t S = p->S, W = p->W;
	int nb = p->o->prob || p->reg ? p->K : 1;

	/* GDAL's cache: the blocks consecutive strips share, and on rank 0
	 * the map's layout, which copies and builds overviews a row of
	 * 256-row tiles at a time (lay_out): two source rows, a written row
	 * and the striped rows it reads, the --vector mask's likewise */
	cdp_raster_cache_fit(cdp_raster_strip_bytes(p->r, p->S) +
	                     (p->rank == 0 ? 4 * (uint64_t)W * 256 *
	                      ((uint64_t)nb * (p->o->prob || p->reg ? 4 : 1) + !!p->o->vector) : 0));
	p->raw = xmalloc(p->C, S, W, cdp_dtype_size(p->ri->dtype));
	p->img = xmalloc(p->C, S, W, sizeof(float));
	p->valid = xmalloc(S, W, 1, 1);
	p->srow = xmalloc(S, sizeof(int32_t), 1, 1);
	p->slots = xmalloc(p->rank == 0 ? p->nranks : 1, p->K, S * W, sizeof(float));
	if (!p->raw || !p->img || !p->valid || !p->srow || !p->slots || dev_alloc(p) < 0 ||
	    pr_tta_alloc(p, S) < 0)
		return pr_fail(err, cap, "out of memory for windows of %d pixels over a width of %d",
		            p->S, p->W);
	if (p->rank != 0)
		return 0;
	p->acc = xmalloc(p->K, S, W, sizeof(float));
	p->orow = xmalloc(nb, S, W, p->o->prob || p->reg ? sizeof(float) : 1);
	p->vrow = xmalloc(S, W, 1, 1);
	if (!p->acc || !p->orow || !p->vrow)
		return pr_fail(err, cap, "out of memory for windows of %d pixels over a width of %d",
		            p->S, p->W);
	if (p->o->preview) {
		int mx = p->W > p->H ? p->W : p->H;
		p->pstep = (mx + PR_PREVIEW_MAX - 1) / PR_PREVIEW_MAX;
		p->pw = (p->W + p->pstep - 1) / p->pstep;
		p->ph = (p->H + p->pstep - 1) / p->pstep;
		if (!(p->pcls = xmalloc(p->pw, p->ph, 1, 1)))
			return pr_fail(err, cap, "out of memory");
	}
	return 0;
}

/* Files GDAL reads for the input other than the input itself (a VRT's
 * sources, side-cars), each named with the input it is read through. */
typedef struct read_arg {
	cdp_fileset *set;
	const char *input;
} read_arg;

static int add_read(const char *path, void *arg)
{
	const read_arg *a = arg;
	char what[8400];

	if (cdp_same_file(path, a->input))
		return CDP_OK;
	snprintf(what, sizeof what, "'%s', read through the input '%s'", path, a->input);
	return cdp_fileset_add(a->set, path, what);
}

/* A file's name says its format to every reader (GDAL picks a driver by
 * it, a file manager an application): each output is written in the format
 * its extension names, or refused naming the extension. */
static int check_exts(const cdp_predict_opts *o, char *err, size_t cap)
{
	static const char *const tif[] = { ".tif", ".tiff", NULL };
	static const char *const vec[] = { ".gpkg", ".geojson", NULL };   /* pr_vector_driver's */
	static const char *const png[] = { ".png", NULL };

	if (cdp_out_check_ext("-o", o->output, tif, "the map is a GeoTIFF", "-o OUT.tif (or .tiff)",
	                      err, cap) != CDP_OK ||
	    (o->vector && cdp_out_check_ext("--vector", o->vector, vec, "cdp-predict writes a "
	                                    "GeoPackage or GeoJSON", "OUT.gpkg or OUT.geojson", err,
	                                    cap) != CDP_OK) ||
	    (o->preview && cdp_out_check_ext("--preview", o->preview, png, "the preview is a PNG",
	                                     "--preview FILE.png", err, cap) != CDP_OK))
		return -1;
	return 0;
}

int pr_check_outputs(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	char what[4200];
	const char *out[3] = { o->output, o->vector, o->preview };
	static const char *const opt[3] = { "-o", "--vector", "--preview" };
	read_arg a;
	cdp_fileset set = { 0 };
	int rc = 0;

	/* not GDAL's side file of the GeoTIFF, where its class names go,
	 * which the GeoTIFF's commit would then replace (or remove) */
	if ((rc = cdp_out_aux_name(o->output, what, sizeof what)) != CDP_OK)
		goto out;
	for (int i = 1; i < 3; i++)
		if (out[i] && cdp_same_file(out[i], what))
			return pr_fail(err, cap, "refusing to write '%s': it is the side file of -o "
			               "'%s', which holds its class names", out[i], o->output);
	a.set = &set;
	a.input = o->input;
	snprintf(what, sizeof what, "the input '%s'", o->input);
	if ((rc = cdp_fileset_add(&set, o->input, what)) != 0 ||
	    (rc = cdp_raster_files(p->r, add_read, &a)) != 0)
		goto out;
	snprintf(what, sizeof what, "the model '%s'", p->model);
	if ((rc = cdp_fileset_add(&set, p->model, what)) != 0)
		goto out;
	if (o->colors) {
		snprintf(what, sizeof what, "the --colors file '%s'", o->colors);
		if ((rc = cdp_fileset_add(&set, o->colors, what)) != 0)
			goto out;
	}
	/* against the inputs (the model, the raster and what GDAL reads for
	 * it, the --colors file, their side files) and each other; all
	 * seekable: a FIFO or a device is refused before anything is
	 * written, as are a checkpoint and a pool's file and a folder that is
	 * not there; then the names' extensions, and last a folder where no
	 * file can be made: the preview is first opened after the whole
	 * prediction */
	rc = cdp_out_check_outputs(&set, 3, out, opt, CDP_OUT_SEEK, err, cap) != CDP_OK ||
	     check_exts(o, err, cap) < 0 ? -1 : 0;
	for (int i = 0; i < 3 && rc == 0; i++)
		if (out[i] && cdp_out_probe(out[i], CDP_OUT_SEEK, err, cap) != CDP_OK)
			rc = -1;
	cdp_fileset_free(&set);
	return rc;
out:
	cdp_fileset_free(&set);
	return pr_fail(err, cap, "cannot examine the files of '%s': %s", o->input, cdp_strerror(rc));
}
