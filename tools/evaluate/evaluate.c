/* evaluate.c: cdp_evaluate_run, the confusion matrix of a class-id raster
 * against a reference of the same size, read in bands of rows, and its
 * report (metrics.h: IoU, F1, precision, recall per class, accuracy, mean
 * IoU) as text or JSON; or, for a regression map (tagged CDP_TASK=regression
 * or --task regression), its scores (evaluate_reg.c), band by band for a
 * map of several targets, and a 2-D histogram.
 *
 * Pixels counted: those whose reference is neither the ignore value nor the
 * reference's nodata, and whose prediction is not the prediction's nodata
 * (a prediction nodata over valid reference is reported as "unpredicted").
 * Values must be integers in [0, K); K is --classes, or one more than the
 * largest counted value of either raster (a first pass finds it).
 */
#include "evaluate.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_out.h"
#include "cdp_raster.h"
#include "cdp_metrics.h"
#include "cdp_num.h"
#include "cdp_plot.h"
#include "cdp_record.h"

#define ROWS 256

typedef struct side {
	const char *path;
	cdp_raster *r;
	cdp_label_vector *v;       /* a vector reference instead of r */
	cdp_raster_info vi;        /* its info: the prediction's grid */
	const cdp_raster_info *ri;
	void *buf;
	uint8_t *mask;             /* the rows' GDAL mask (0 invalid), where the
	                              band has one of its own, else NULL */
} side;

typedef struct counts {
	uint64_t counted, ignored, unpredicted, outside;
	double pmax, rmax;      /* the largest class id of the prediction, the reference */
} counts;

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

/* The rows buffers of path, rows of width pixels of per_px bytes each,
 * could not be allocated: says what they needed, as cdp-predict does. */
static int fail_rows(char *err, size_t cap, const char *path, uint64_t width, size_t per_px)
{
	return fail(err, cap, "'%s': out of memory for %d rows x %llu pixels (%.0f bytes)", path,
	            ROWS, (unsigned long long)width, (double)ROWS * (double)width * (double)per_px);
}

void cdp_evaluate_opts_init(cdp_evaluate_opts *o)
{
	memset(o, 0, sizeof *o);
	o->ignore = -1;
	cdp_label_vector_opts_init(&o->vec);
}

/* A vector reference, rasterized band by band onto the grid of the
 * prediction p; the pixels it leaves undefined (a NULL attribute, outside
 * --label-extent) get the label type's largest value as nodata. */
static int open_vector_side(side *s, const char *path, const side *p,
                            const cdp_evaluate_opts *o, char *err, size_t cap)
{
	char why[1024];
	int u8;

	s->path = path;
	/* a map placed by GCPs only is in their CRS, and the features are
	 * rasterized through them as cdp-tile rasterizes its labels (GDAL's
	 * polynomial, gdalwarp's default) */
	if (cdp_label_vector_open(path, &o->vec, cdp_raster_grid_crs(p->ri), &s->v, why,
	                          sizeof why) != 0) {
		const char *im = strstr(why, "the image");
		/* the image is the prediction here */
		if (im)
			return fail(err, cap, "reference %.*sthe prediction '%s'%s", (int)(im - why),
			            why, p->path, im + strlen("the image"));
		return fail(err, cap, "reference %s", why);
	}
	/* before any output: GCPs that place nothing are the prediction's fault */
	if (cdp_label_vector_place(s->v, p->ri, 0, why, sizeof why))
		return fail(err, cap, "reference '%s': the GCPs of the prediction '%s' cannot "
		            "place it: %s", path, p->path, why);
	/* a warning, not a failure: the layer's own CRS wins, as documented */
	if (cdp_label_vector_note(s->v))
		fprintf(stderr, "%s: warning: reference '%s': %s\n", cdp_cli_prog(), path,
		        cdp_label_vector_note(s->v));
	/* as cdp-tile refuses it: that class would silently drop out of every score */
	if (o->ignore >= 0 && cdp_label_vector_id_use(s->v, (uint32_t)o->ignore, why, sizeof why))
		return fail(err, cap, "the ignore value %ld is also %s of the reference '%s'",
		            o->ignore, why, path);
	u8 = cdp_label_vector_kind(s->v) == CDP_LABEL_U8;
	s->vi = *p->ri;
	s->vi.bands = 1;
	s->vi.dtype = u8 ? CDP_DT_U8 : CDP_DT_U16;
	s->vi.has_nodata = 1;
	s->vi.nodata = u8 ? 255 : 65535;
	s->ri = &s->vi;
	if (!(s->buf = malloc((size_t)ROWS * s->vi.width * (u8 ? 1 : 2))))
		return fail_rows(err, cap, path, s->vi.width, u8 ? 1 : 2);
	return 0;
}

/* multi: a regression map or reference, which may hold several bands (one
 * a target, scored band by band) */
static int open_side(side *s, const char *path, const char *what, int multi, char *err,
                     size_t cap)
{
	char why[512];

	s->path = path;
	if (cdp_raster_open(path, &s->r, why, sizeof why) != 0)
		return fail(err, cap, "cannot open '%s': %s", path, why);
	s->ri = cdp_raster_get_info(s->r);
	if (s->ri->bands != 1 && !multi)
		return fail(err, cap, "'%s' has %u bands, want one band of %s", path,
		            s->ri->bands, what);
	if (!(s->buf = malloc((size_t)ROWS * s->ri->width * cdp_dtype_size(s->ri->dtype))) ||
	    !(s->mask = malloc((size_t)ROWS * s->ri->width)))
		return fail_rows(err, cap, path, s->ri->width, cdp_dtype_size(s->ri->dtype) + 1);
	return 0;
}

/* rows [y, y + rows) of band b of s into s->buf, and its GDAL mask into
 * s->mask where the band has one beyond its nodata value (a per-dataset
 * mask, internal or .msk, or an alpha band: cdp-tile and cdp-predict take
 * its pixels for invalid too); *m is s->mask then, else NULL */
static int read_rows(side *s, int b, uint64_t y, int rows, const uint8_t **m, char *err,
                     size_t cap)
{
	int w = (int)s->ri->width;
	char why[512];

	*m = NULL;
	if (cdp_raster_read(s->r, &b, 1, 0, (int64_t)y, w, rows, s->buf, why, sizeof why))
		return fail(err, cap, "cannot read '%s': %s", s->path, why);
	if (!cdp_raster_has_mask(s->r, b))
		return 0;
	if (cdp_raster_read_mask(s->r, b, 0, (int64_t)y, w, rows, s->mask, why, sizeof why))
		return fail(err, cap, "cannot read the mask of '%s': %s", s->path, why);
	*m = s->mask;
	return 0;
}

static int is_nodata(const cdp_raster_info *ri, double v)
{
	return ri->has_nodata && (v == ri->nodata || (isnan(v) && isnan(ri->nodata)));
}

static int is_float(int dt)
{
	return dt == CDP_DT_F32 || dt == CDP_DT_F64;
}

/* 1 when every valid value of p's band 1 is within [0, 1], as
 * cdp-predict --prob's probabilities are (a map of values usually is not);
 * 0 otherwise or when it cannot be read: only a hint in a message. */
static int all_unit(side *p)
{
	uint64_t w = p->ri->width, h = p->ri->height;
	char why[512];

	for (uint64_t y = 0; y < h; y += ROWS) {
		int rows = h - y < ROWS ? (int)(h - y) : ROWS;
		const uint8_t *m;

		if (read_rows(p, 1, y, rows, &m, why, sizeof why) < 0)
			return 0;
		for (size_t i = 0; i < (size_t)rows * w; i++) {
			double v = cdp_dtype_get(p->ri->dtype, p->buf, i);
			if (!is_nodata(p->ri, v) && !(m && !m[i]) && !(v >= 0 && v <= 1))
				return 0;
		}
	}
	return 1;
}

/* One pass over both rasters: with conf, count into it (k x k); without,
 * only find the largest value. */
static int pass(side *p, side *r, const cdp_evaluate_opts *o, uint64_t *conf, int k,
                counts *n, char *err, size_t cap)
{
	uint64_t w = p->ri->width, h = p->ri->height;
	char why[512];
	int b1 = 1;

	memset(n, 0, sizeof *n);
	n->pmax = n->rmax = -1;
	for (uint64_t y = 0; y < h; y += ROWS) {
		int rows = h - y < ROWS ? (int)(h - y) : ROWS;
		const uint8_t *pm, *rm = NULL;
		if (read_rows(p, b1, y, rows, &pm, err, cap) < 0)
			return -1;
		if (r->v) {
			/* the whole grid's rows: the score does not depend on ROWS */
			if (cdp_label_vector_read_rows(r->v, p->ri, 0, (int64_t)y, rows,
			                               (uint32_t)r->ri->nodata, r->buf, why, sizeof why))
				return fail(err, cap, "cannot read '%s': %s", r->path, why);
		} else if (read_rows(r, b1, y, rows, &rm, err, cap) < 0) {
			return -1;
		}
		for (size_t i = 0; i < (size_t)rows * w; i++) {
			double lv = cdp_dtype_get(r->ri->dtype, r->buf, i);
			double pv = cdp_dtype_get(p->ri->dtype, p->buf, i);
			if (is_nodata(r->ri, lv) || (rm && !rm[i]) || (o->ignore >= 0 && lv == o->ignore)) {
				n->ignored++;
				continue;
			}
			if (is_nodata(p->ri, pv) || (pm && !pm[i])) {
				n->unpredicted++;
				continue;
			}
			/* a float map without its tag, or cdp-predict --prob's
			 * probabilities given for the class map: say which */
			if (!(pv >= 0 && pv == floor(pv))) {
				uint64_t py = y + i / w;
				int fl = is_float(p->ri->dtype), prob = fl && all_unit(p);
				return fail(err, cap, "'%s': value %g at pixel (%zu, %llu) is not a class "
				            "id%s", p->path, pv, (size_t)(i % w), (unsigned long long)py,
				            prob ? " (it looks like a probability map, cdp-predict --prob: "
				            "score the class map; a map of values is scored with --task "
				            "regression)" : fl ? " (a map of values is scored with --task "
				            "regression)" : "");
			}
			if (!(lv >= 0 && lv == floor(lv)))
				return fail(err, cap, "'%s': value %g at pixel (%zu, %llu) is not a class id",
				            r->path, lv, (size_t)(i % w), (unsigned long long)(y + i / w));
			if (!conf) {
				n->pmax = fmax(n->pmax, pv);
				n->rmax = fmax(n->rmax, lv);
				continue;
			}
			if (lv >= k || pv >= k) {
				n->outside++;
				continue;
			}
			conf[(size_t)lv * k + (size_t)pv]++;
			n->counted++;
		}
	}
	return 0;
}

static void num(FILE *f, double v, int json)
{
	if (isnan(v))
		fputs(json ? "null" : "nan", f);
	else
		fprintf(f, "%.6f", v);
}

static void report_json(FILE *f, const uint64_t *conf, int k, const counts *n)
{
	fprintf(f, "{\"classes\":%d,\"pixels\":%llu,\"ignored\":%llu,\"unpredicted\":%llu,"
	        "\"outside\":%llu,\"confusion\":[", k, (unsigned long long)n->counted,
	        (unsigned long long)n->ignored, (unsigned long long)n->unpredicted,
	        (unsigned long long)n->outside);
	for (int i = 0; i < k; i++) {
		fputs(i ? ",[" : "[", f);
		for (int j = 0; j < k; j++)
			fprintf(f, "%s%llu", j ? "," : "", (unsigned long long)conf[(size_t)i * k + j]);
		fputc(']', f);
	}
	fputs("],\"per_class\":[", f);
	for (int c = 0; c < k; c++) {
		cdp_prf m;
		uint64_t sup = 0;
		cdp_metrics_prf(conf, k, c, &m);
		for (int j = 0; j < k; j++)
			sup += conf[(size_t)c * k + j];
		fprintf(f, "%s{\"class\":%d,\"iou\":", c ? "," : "", c);
		num(f, cdp_metrics_iou(conf, k, c), 1);
		fputs(",\"f1\":", f);
		num(f, m.f1, 1);
		fputs(",\"precision\":", f);
		num(f, m.precision, 1);
		fputs(",\"recall\":", f);
		num(f, m.recall, 1);
		fprintf(f, ",\"tp\":%llu,\"fp\":%llu,\"fn\":%llu,\"support\":%llu}",
		        (unsigned long long)m.tp, (unsigned long long)m.fp, (unsigned long long)m.fn,
		        (unsigned long long)sup);
	}
	fputs("],\"accuracy\":", f);
	num(f, cdp_metrics_accuracy(conf, k), 1);
	fputs(",\"mean_iou\":", f);
	num(f, cdp_metrics_miou(conf, k, NULL), 1);
	fputs("}\n", f);
}

/* Class c's name from the prediction's category names, else the
 * reference raster's, or NULL: cdp-predict's default "class K" names no
 * class and is left out. */
static const char *class_name(const side *p, const side *r, int c)
{
	char dflt[32];
	const char *nm = NULL;

	snprintf(dflt, sizeof dflt, "class %d", c);
	for (int i = 0; i < 2 && (!nm || !*nm || !strcmp(nm, dflt)); i++) {
		const side *s = i ? r : p;
		nm = s->r ? cdp_raster_category_name(s->r, 1, c) : NULL;
	}
	return nm && *nm && strcmp(nm, dflt) ? nm : NULL;
}

static void report_text(FILE *f, const uint64_t *conf, int k, const counts *n,
                        const side *p, const side *r)
{
	int named = 0;

	for (int c = 0; c < k && !named; c++)
		named = class_name(p, r, c) != NULL;
	fprintf(f, "pixels: %llu counted, %llu ignored, %llu unpredicted, %llu outside [0, %d)\n",
	        (unsigned long long)n->counted, (unsigned long long)n->ignored,
	        (unsigned long long)n->unpredicted, (unsigned long long)n->outside, k);
	fputs("confusion (rows: reference, columns: prediction)\n      ", f);
	for (int j = 0; j < k; j++)
		fprintf(f, " %12d", j);
	fputc('\n', f);
	for (int i = 0; i < k; i++) {
		fprintf(f, "%6d", i);
		for (int j = 0; j < k; j++)
			fprintf(f, " %12llu", (unsigned long long)conf[(size_t)i * k + j]);
		fputc('\n', f);
	}
	fputs(named ? "class      iou       f1  precision   recall      support  name\n"
	            : "class      iou       f1  precision   recall      support\n", f);
	for (int c = 0; c < k; c++) {
		cdp_prf m;
		uint64_t sup = 0;
		cdp_metrics_prf(conf, k, c, &m);
		for (int j = 0; j < k; j++)
			sup += conf[(size_t)c * k + j];
		fprintf(f, "%5d %8.4f %8.4f %10.4f %8.4f %12llu%s%s\n", c,
		        cdp_metrics_iou(conf, k, c), m.f1, m.precision, m.recall,
		        (unsigned long long)sup, named && class_name(p, r, c) ? "  " : "",
		        named && class_name(p, r, c) ? class_name(p, r, c) : "");
	}
	fprintf(f, "accuracy %.4f\nmean iou %.4f\n", cdp_metrics_accuracy(conf, k),
	        cdp_metrics_miou(conf, k, NULL));
}

typedef struct reads_arg {
	cdp_fileset *set;
	const char *path;
} reads_arg;

static int add_read(const char *file, void *arg)
{
	const reads_arg *a = arg;
	char what[8400];

	snprintf(what, sizeof what, "'%s', read for '%s'", file, a->path);
	return cdp_fileset_add(a->set, file, what);
}

/* --png past the policy's checks (cdp_out_check_outputs: a FIFO, a
 * device, a checkpoint, an input, a side file of an input that GDAL would
 * read with it, IN.tif.ovr), named .png (a PNG named .jpg fools its
 * readers), and in a folder where a file can be made (cdp_out_probe), so
 * that a read-only folder fails before the report, not after it. CDP_OK,
 * or an error with err. */
static int check_png(cdp_fileset *set, const char *png, char *err, size_t cap)
{
	static const char *const ext[] = { ".png", NULL };
	int rc;

	if ((rc = cdp_out_check_outputs(set, 1, &png, NULL, CDP_OUT_SEEK, err, cap)) != CDP_OK ||
	    (rc = cdp_out_check_ext("--png", png, ext, "the drawing is a PNG", "--png FILE.png", err,
	                            cap)) != CDP_OK)
		return rc;
	return cdp_out_probe(png, CDP_OUT_SEEK, err, cap);
}

/* The report goes to out: refuse an out that is a file the run reads (a
 * shell's ">>" onto the prediction), by inode (cdp_file.h); so too --png,
 * which the output policy (cdp_out.h) also refuses when it is a FIFO or a
 * device, a checkpoint, or in a folder that is not there (check_png): all
 * before the report, which would otherwise be printed in full before the
 * PNG fails. */
static int check_out(side *p, side *r, FILE *out, const char *png, char *err, size_t cap)
{
	cdp_fileset set = { 0 };
	side *s[2] = { p, r };
	const char *hit = NULL;
	int rc = 0;

	for (int i = 0; i < 2 && rc == 0; i++) {
		reads_arg a = { &set, s[i]->path };
		char what[4200];
		snprintf(what, sizeof what, "the %s '%s'", i ? "reference" : "prediction",
		         s[i]->path);
		if ((rc = cdp_fileset_add(&set, s[i]->path, what)) == 0 && !s[i]->v)
			rc = cdp_raster_files(s[i]->r, add_read, &a);
		for (int e = 0; e < 2 && rc == 0 && s[i]->v; e++)
			rc = cdp_label_vector_files(s[i]->v, e, add_read, &a);
	}
	if (rc == 0 && (hit = cdp_fileset_find_fd(&set, fileno(out))))
		fail(err, cap, "refusing to write the report: standard output is %s", hit);
	else if (rc == 0 && png)
		rc = check_png(&set, png, err, cap);
	else if (rc)
		fail(err, cap, "cannot examine the input files: %s", cdp_strerror(rc));
	cdp_fileset_free(&set);
	return rc || hit ? -1 : 0;
}

/* The geotransform as "(g0, ..., g5)", or "none": each number in the
 * fewest digits that read back as it, so two origins a millionth of a
 * pixel apart do not print alike (%.10g's did) and 10 stays 10. */
static void gt_text(const cdp_raster_info *ri, char *out, size_t cap)
{
	size_t len;

	if (!ri->has_gt) {
		snprintf(out, cap, "none");
		return;
	}
	len = (size_t)snprintf(out, cap, "(");
	for (int i = 0; i < 6 && len < cap; i++) {
		double a = fabs(ri->gt[i]);
		/* no fewer digits than the integer part has: 500000, not 5e5 */
		int p = a >= 1 && a < 1e17 ? (int)floor(log10(a)) + 1 : 1;
		char num[32];
		len += (size_t)snprintf(out + len, cap - len, "%s%s",
		                        cdp_double_str_digits(ri->gt[i], p, num, sizeof num),
		                        i < 5 ? ", " : ")");
	}
}

/* "in CRS EPSG:32633" (the second of a sentence "in EPSG:32633"),
 * "placed by GCPs in EPSG:32633", "in CRS none": a map of GCPs only has
 * no CRS of its own, and "in CRS none" sent users looking for a CRS that
 * the file has */
static void crs_text(const cdp_raster_info *ri, int first, char *out, size_t cap)
{
	char name[200];
	int gcp = !ri->crs[0] && ri->ngcps > 0 && ri->gcp_crs && ri->gcp_crs[0];

	if (!ri->crs[0] && !gcp)
		snprintf(name, sizeof name, "none");
	else
		cdp_raster_crs_name(gcp ? ri->gcp_crs : ri->crs, name, sizeof name);
	snprintf(out, cap, "%s %s", gcp ? "placed by GCPs in" : first ? "in CRS" : "in", name);
}

/* The same pixels on the ground: the same CRS (OGR's comparison; none on
 * both sides is the same) and geotransform (to a millionth of a pixel).
 * The sizes were compared already. */
static int same_georef(const side *p, const side *r, char *err, size_t cap)
{
	const cdp_raster_info *a = p->ri, *b = r->ri;
	char why[512], x[256], y[256];
	int same = 1, ga = a->has_gt || a->ngcps > 0 || a->crs[0],
	    gb = b->has_gt || b->ngcps > 0 || b->crs[0];

	if (a->crs[0] && b->crs[0]) {
		if ((same = cdp_raster_crs_same(a->crs, b->crs, why, sizeof why)) < 0)
			return fail(err, cap, "'%s' or '%s': %s", p->path, r->path, why);
	} else {
		same = !a->crs[0] == !b->crs[0];
	}
	if (!same) {
		crs_text(a, 1, x, sizeof x);
		crs_text(b, 0, y, sizeof y);
		return fail(err, cap, "'%s' is %s, '%s' %s: not the same georeference", p->path, x,
		            r->path, y);
	}
	same = a->has_gt == b->has_gt;
	if (same && a->has_gt) {
		double px, py, tol;
		cdp_raster_pixel_size(a->gt, &px, &py);
		tol = 1e-6 * fmax(px, py);
		for (int i = 0; i < 6; i++)
			same &= fabs(a->gt[i] - b->gt[i]) <= tol;
	}
	if (!same) {
		gt_text(a, x, sizeof x);
		gt_text(b, y, sizeof y);
		return fail(err, cap, "'%s' has geotransform %s, '%s' %s: not the same georeference",
		            p->path, x, r->path, y);
	}
	if (ga != gb)
		return fail(err, cap, "'%s' has no georeference, '%s' has GCPs: not the same "
		            "georeference", ga ? r->path : p->path, ga ? p->path : r->path);
	/* GCPs place the pixels of a map without a geotransform (cdp-predict
	 * keeps a scene's): both must have the same */
	if (!r->v && (a->ngcps > 0 || b->ngcps > 0) &&
	    (same = cdp_raster_same_gcps(a, b, why, sizeof why)) <= 0) {
		if (same < 0)
			return fail(err, cap, "'%s' or '%s': %s", p->path, r->path, why);
		return fail(err, cap, "'%s' and '%s' have other GCPs (%s): not the same "
		            "georeference", p->path, r->path, why);
	}
	return 0;
}

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* --png of k classes fits the drawing: asked once k is known, before the
 * report */
static int png_fits(const cdp_evaluate_opts *o, int k, char *err, size_t cap)
{
	if (o->png && k > CDP_PLOT_CLASSES_MAX)
		return fail(err, cap, "cannot draw '%s': %d classes, at most %d fit", o->png, k,
		            CDP_PLOT_CLASSES_MAX);
	return 0;
}

/* --png: the matrix with the prediction's category names (cdp-predict
 * writes them), "class K" where it has none; k fits (png_fits). */
static int draw(const cdp_evaluate_opts *o, const side *p, const uint64_t *conf, int k,
                char *err, size_t cap)
{
	char (*buf)[32] = NULL, title[1024];
	const char **names = NULL;
	int rc;

	if (!(buf = calloc((size_t)k, sizeof *buf)) || !(names = calloc((size_t)k, sizeof *names))) {
		free(buf);
		return fail(err, cap, "out of memory");
	}
	for (int c = 0; c < k; c++) {
		names[c] = cdp_raster_category_name(p->r, 1, c);
		if (!names[c]) {
			snprintf(buf[c], sizeof buf[c], "class %d", c);
			names[c] = buf[c];
		}
	}
	snprintf(title, sizeof title, "cdp-evaluate: %.400s against %.400s", base(o->prediction),
	         base(o->reference));
	rc = cdp_plot_confusion_png(o->png, conf, k, names, title);
	free(buf);
	free(names);
	return rc ? fail(err, cap, "cannot write '%s': %s", o->png, cdp_strerror(rc)) : 0;
}

/* The task of the run: --task, else the prediction's tag, else class. */
static int task_of(const cdp_evaluate_opts *o, const char *path)
{
	cdp_raster *r;
	const char *t;
	char why[512];
	int task = CDP_EVALUATE_TASK_CLASS;

	if (o->task != CDP_EVALUATE_TASK_AUTO)
		return o->task;
	if (cdp_raster_open(path, &r, why, sizeof why) != 0)
		return task;      /* open_side says why */
	t = cdp_raster_metadata(r, CDP_RASTER_TASK_KEY);
	if (t && !strcmp(t, CDP_RASTER_TASK_REGRESSION))
		task = CDP_EVALUATE_TASK_REGRESSION;
	cdp_raster_close(r);
	return task;
}

/* A regression pass over band b1 of both rasters: with hist (nb x nb over
 * [lo, hi], row: the prediction's bin), count into it; without,
 * accumulate s. A pixel counts when both values are finite and neither is
 * its band's nodata. */
static int reg_pass(side *p, side *r, int b1, cdp_reg_sums *s, uint64_t *skipped,
                    uint64_t *hist, int nb, double lo, double hi, char *err, size_t cap)
{
	uint64_t w = p->ri->width, h = p->ri->height;
	double *pv = NULL, *rv = NULL, pnd = 0, rnd = 0;
	int rc = -1, phas = cdp_raster_band_nodata(p->r, b1, &pnd),
	    rhas = cdp_raster_band_nodata(r->r, b1, &rnd);

	*skipped = 0;
	if (!(pv = malloc((size_t)ROWS * w * sizeof *pv)) ||
	    !(rv = malloc((size_t)ROWS * w * sizeof *rv))) {
		fail_rows(err, cap, p->path, w, 2 * sizeof(double));
		goto out;
	}
	for (uint64_t y = 0; y < h; y += ROWS) {
		int rows = h - y < ROWS ? (int)(h - y) : ROWS;
		const uint8_t *pm, *rm;
		size_t n = 0;
		if (read_rows(p, b1, y, rows, &pm, err, cap) < 0 ||
		    read_rows(r, b1, y, rows, &rm, err, cap) < 0)
			goto out;
		for (size_t i = 0; i < (size_t)rows * w; i++) {
			double a = cdp_dtype_get(p->ri->dtype, p->buf, i);
			double b = cdp_dtype_get(r->ri->dtype, r->buf, i);
			/* NaN nodata is caught by isfinite */
			if (!isfinite(a) || !isfinite(b) || (phas && a == pnd) || (rhas && b == rnd) ||
			    (pm && !pm[i]) || (rm && !rm[i])) {
				(*skipped)++;
				continue;
			}
			pv[n] = a;
			rv[n++] = b;
		}
		if (!hist) {
			cdp_reg_sums_add(s, pv, rv, n);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			hist[(size_t)cdp_reg_bin(pv[i], lo, hi, nb) * nb + cdp_reg_bin(rv[i], lo, hi, nb)]++;
	}
	rc = 0;
out:
	free(pv);
	free(rv);
	return rc;
}

/* --png for a regression map: the 2-D histogram of predicted against
 * reference values of every band s[nb] scored, a second pass over the
 * rasters. */
#define REG_BINS 128
static int reg_draw(const cdp_evaluate_opts *o, side *p, side *r, const cdp_reg_sums *s,
                    int nb, char *err, size_t cap)
{
	uint64_t *hist, skipped;
	double lo = INFINITY, hi = -INFINITY;
	char title[1024];
	int rc;

	for (int b = 0; b < nb; b++) {
		lo = fmin(lo, s[b].lo);
		hi = fmax(hi, s[b].hi);
	}
	if (!(hi > lo)) {
		lo -= 0.5;
		hi += 0.5;
	}
	if (!(hist = calloc((size_t)REG_BINS * REG_BINS, sizeof *hist)))
		return fail(err, cap, "out of memory");
	for (int b = 0; b < nb; b++)
		if (reg_pass(p, r, b + 1, NULL, &skipped, hist, REG_BINS, lo, hi, err, cap) < 0) {
			free(hist);
			return -1;
		}
	snprintf(title, sizeof title, "cdp-evaluate: %.400s against %.400s", base(o->prediction),
	         base(o->reference));
	rc = cdp_plot_hist2d_png(o->png, hist, REG_BINS, lo, hi, "reference value",
	                         "predicted value", title);
	free(hist);
	return rc ? fail(err, cap, "cannot write '%s': %s", o->png, cdp_strerror(rc)) : 0;
}

/* A regression map p against reference r (both open, same grid), band b
 * of one against band b of the other. */
static int run_regression(const cdp_evaluate_opts *o, side *p, side *r, FILE *out, char *err,
                          size_t cap)
{
	int nb = (int)p->ri->bands, rc = -1;
	cdp_reg_sums *s = NULL;
	uint64_t *skipped = NULL, n = 0, nskip = 0;

	if (r->ri->bands != p->ri->bands)
		return fail(err, cap, "'%s' has %u bands, '%s' has %u: a regression map is scored "
		            "band by band (a target each) against a reference of as many bands",
		            p->path, p->ri->bands, r->path, r->ri->bands);
	if (!is_float(p->ri->dtype))
		return fail(err, cap, "'%s' holds %s values: a regression map is a float32 or "
		            "float64 raster of values", p->path, cdp_dtype_name(p->ri->dtype));
	if (!is_float(r->ri->dtype))
		return fail(err, cap, "'%s' holds %s values, not a float32 or float64 raster of "
		            "values that a regression map is scored against", r->path,
		            cdp_dtype_name(r->ri->dtype));
	if (!(s = calloc((size_t)nb, sizeof *s)) || !(skipped = calloc((size_t)nb, sizeof *skipped))) {
		fail(err, cap, "out of memory");
		goto out;
	}
	for (int b = 0; b < nb; b++) {
		cdp_reg_sums_init(&s[b]);
		if (reg_pass(p, r, b + 1, &s[b], &skipped[b], NULL, 0, 0, 0, err, cap) < 0)
			goto out;
		n += s[b].n;
		nskip += skipped[b];
	}
	if (!n) {
		fail(err, cap, "'%s' and '%s' have no pixel valid in both (all %llu are NaN or "
		     "nodata in one): nothing to score", p->path, r->path, (unsigned long long)nskip);
		goto out;
	}
	cdp_reg_report(out, s, skipped, nb, o->json);
	if (fflush(out) != 0 || ferror(out)) {
		fail(err, cap, "cannot write the report: %s", strerror(errno));
		goto out;
	}
	rc = o->png ? reg_draw(o, p, r, s, nb, err, cap) : 0;
out:
	free(s);
	free(skipped);
	return rc;
}

int cdp_evaluate_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap)
{
	side p = { 0 }, r = { 0 };
	counts n;
	uint64_t *conf = NULL;
	int k = o->classes, rc = -1, task, isvec;
	const char *what;
	char why[512];

	cdp_raster_init();
	task = task_of(o, o->prediction);
	what = task == CDP_EVALUATE_TASK_REGRESSION ? "values" : "class ids";
	if (open_side(&p, o->prediction, what, task == CDP_EVALUATE_TASK_REGRESSION, err, cap) < 0)
		goto out;
	/* a reference that is not there is said so, whatever the options */
	if ((isvec = cdp_label_vector_probe(o->reference, why, sizeof why)) < 0) {
		fail(err, cap, "cannot open '%s': %s", o->reference, why);
		goto out;
	}
	if (task == CDP_EVALUATE_TASK_REGRESSION &&
	    (o->classes || o->ignore >= 0 || o->vec.given || isvec)) {
		/* "--task regression" where the user said so: the map itself
		 * may be anything (a class map given for a try) */
		char who[4200];
		if (o->task == CDP_EVALUATE_TASK_REGRESSION)
			snprintf(who, sizeof who, "--task regression scores '%s' as a map of values",
			         p.path);
		else
			snprintf(who, sizeof who, "'%s' is a regression map", p.path);
		fail(err, cap, "%s: --classes, --ignore and a vector reference are for class maps; "
		     "give a raster of reference values", who);
		goto out;
	}
	if (isvec) {
		if (open_vector_side(&r, o->reference, &p, o, err, cap) < 0)
			goto out;
	} else if (o->vec.given) {
		fail(err, cap, "'%s' is not a vector dataset, and the vector label options apply "
		     "to a vector reference only", o->reference);
		goto out;
	} else if (open_side(&r, o->reference, what, task == CDP_EVALUATE_TASK_REGRESSION, err,
	                     cap) < 0)
		goto out;
	if (check_out(&p, &r, out, o->png, err, cap) < 0)
		goto out;
	if (p.ri->width != r.ri->width || p.ri->height != r.ri->height) {
		fail(err, cap, "'%s' is %llux%llu, '%s' is %llux%llu: not the same size", p.path,
		     (unsigned long long)p.ri->width, (unsigned long long)p.ri->height, r.path,
		     (unsigned long long)r.ri->width, (unsigned long long)r.ri->height);
		goto out;
	}
	if (same_georef(&p, &r, err, cap) < 0)
		goto out;
	if (task == CDP_EVALUATE_TASK_REGRESSION) {
		rc = run_regression(o, &p, &r, out, err, cap);
		goto out;
	}
	if (png_fits(o, k, err, cap) < 0)
		goto out;
	if (!k) {
		if (pass(&p, &r, o, NULL, 0, &n, err, cap) < 0)
			goto out;
		double vmax = fmax(n.pmax, n.rmax);
		if (vmax >= CDP_EVALUATE_MAX_CLASSES) {
			/* the file that holds it: a 16-bit map of values given
			 * for a class map is the usual cause */
			fail(err, cap, "'%s' holds class %g, past the %d classes counted without "
			     "--classes: give --classes K (at most %d) to count ids from K on as "
			     "outside", n.pmax >= n.rmax ? p.path : r.path, vmax,
			     CDP_EVALUATE_MAX_CLASSES, CDP_EVALUATE_MAX_CLASSES);
			goto out;
		}
		k = vmax < 1 ? 2 : (int)vmax + 1;
		if (png_fits(o, k, err, cap) < 0)
			goto out;
	}
	if (!(conf = calloc((size_t)k * k, sizeof *conf))) {
		fail(err, cap, "out of memory");
		goto out;
	}
	if (pass(&p, &r, o, conf, k, &n, err, cap) < 0)
		goto out;
	/* as a regression map's: a report of no pixel (nulls, exit 0) would
	 * pass a script's check for a score that was never made */
	if (!n.counted && !n.outside) {
		fail(err, cap, "'%s' and '%s' have no pixel valid in both (all %llu are nodata, "
		     "masked or ignored in one): nothing to score", p.path, r.path,
		     (unsigned long long)(n.ignored + n.unpredicted));
		goto out;
	}
	if (o->json)
		report_json(out, conf, k, &n);
	else
		report_text(out, conf, k, &n, &p, &r);
	if (fflush(out) != 0 || ferror(out)) {
		fail(err, cap, "cannot write the report: %s", strerror(errno));
		goto out;
	}
	if (o->png && draw(o, &p, conf, k, err, cap) < 0)
		goto out;
	rc = 0;
out:
	free(conf);
	free(p.buf);
	free(r.buf);
	free(p.mask);
	free(r.mask);
	if (p.r)
		cdp_raster_close(p.r);
	if (r.r)
		cdp_raster_close(r.r);
	cdp_label_vector_close(r.v);
	return rc;
}
