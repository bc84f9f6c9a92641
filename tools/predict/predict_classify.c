/* predict_classify.c: cdp-predict with a classifier checkpoint, a model
 * whose output is one vector of K logits per window (its head is 1x1,
 * classifier.cfg), in one of two forms (man/cdp-predict.1, CLASSIFIERS):
 *
 *  - chips (-o ending in .csv, or a streamed output: "-", a FIFO, a
 *    character device, cdp_predict_output_csv): INPUT is a folder (DIR/IMAGE.tif and
 *    DIR/CLASS/IMAGE.tif, as cdp-lmdbpack --folders reads it) or a list file
 *    ("IMAGE [CLASS]" lines, cdp-lmdbpack --list's, paths relative to the
 *    list's folder); every chip, of the window size, is one sample, and the
 *    CSV gets a header "path,class,p_NAME0,...,p_NAMEK-1" (the checkpoint's
 *    class names, p_0,... when it has none) and per chip in input order its
 *    path, class (the name, or the id) and K probabilities, quoted as RFC
 *    4180 quotes (cdp-evaluate reads it back); a multi-label model's
 *    (net.multi: K sigmoid outputs) has "path,classes,p_NAME0,..." with K
 *    sigmoid probabilities and, in `classes`, the names (ids) of the
 *    classes whose probability is at least --threshold, in class order,
 *    joined by '|' (empty for none);
 *  - a scene (any other -o): the raster is cut into a grid of cells of the
 *    window size S, each cell classified whole, and the GeoTIFF gets one
 *    pixel per cell (its geotransform scaled by S, or its GCPs' pixel and
 *    line divided by S, and the raster's CRS): u8 class ids, or with --prob
 *    the K float32 probabilities, laid out and named as the segmentation
 *    path's maps (pr_out_layout). A last column
 *    or row of cells that the raster only partly covers is classified from
 *    the window shifted inwards to end at the raster's edge. A cell with no
 *    valid pixel is nodata (255, NaN).
 *
 * Each window is read and standardized as cdp-predict's segmentation path
 * does (pr_read_rows, pr_standardize: invalid pixels 0, as in training);
 * batches of B windows (B, C, S, S) go through the net in inference mode
 * and the logits (B, K) come back for a softmax in double. One process:
 * the work is small next to the segmentation of a scene.
 */
#include "predict_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_progress.h"

typedef struct chips {
	char **path;              /* [n] */
	size_t n, cap;
} chips;

static void chips_free(chips *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->path[i]);
	free(c->path);
}

static int chips_add(chips *c, const char *a, const char *b)
{
	size_t len = strlen(a) + (b ? strlen(b) + 1 : 0) + 1;

	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 64;
		char **np = realloc(c->path, nc * sizeof *np);
		if (!np)
			return -1;
		c->path = np;
		c->cap = nc;
	}
	if (!(c->path[c->n] = malloc(len)))
		return -1;
	if (b)
		snprintf(c->path[c->n], len, "%s/%s", a, b);
	else
		snprintf(c->path[c->n], len, "%s", a);
	c->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_tif(const char *name)
{
	const char *dot = strrchr(name, '.');

	return name[0] != '.' && dot && (!strcasecmp(dot, ".tif") || !strcasecmp(dot, ".tiff"));
}

/* The .tif files of dir (sorted) and, one level down, of its folders. */
static int read_folder(const char *dir, int depth, chips *out, char *err, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	chips names = { 0 };
	char path[4096];
	struct stat st;
	int rc = 0;

	if (!d)
		return pr_fail(err, cap, "cannot open '%s': %s", dir, strerror(errno));
	/* "DIR/" names its chips DIR/x.tif, not DIR//x.tif */
	snprintf(path, sizeof path, "%s", dir);
	for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
		path[n - 1] = '\0';
	dir = path[0] ? strdup(path) : NULL;
	if (!dir) {
		closedir(d);
		return pr_fail(err, cap, "out of memory");
	}
	while ((e = readdir(d)) && rc == 0)
		if (e->d_name[0] != '.' && chips_add(&names, e->d_name, NULL) < 0)
			rc = pr_fail(err, cap, "out of memory");
	closedir(d);
	if (rc == 0 && names.n > 0)   /* an empty folder: no array (qsort's NULL) */
		qsort(names.path, names.n, sizeof *names.path, cmp_str);
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names.path[i]);
		if (stat(path, &st) != 0)
			rc = pr_fail(err, cap, "cannot open '%s': %s", path, strerror(errno));
		else if (S_ISDIR(st.st_mode) && depth == 0)
			rc = read_folder(path, 1, out, err, cap);
		else if (S_ISREG(st.st_mode) && is_tif(names.path[i]) && chips_add(out, path, NULL) < 0)
			rc = pr_fail(err, cap, "out of memory");
	}
	chips_free(&names);
	free((char *)dir);
	return rc;
}

/* 1 when GDAL opens path as a raster: a scene given where chips were
 * meant, which read as a list would be binary "paths". */
static int is_raster(const char *path)
{
	cdp_raster *r;
	char why[256];

	cdp_raster_init();
	if (cdp_raster_open(path, &r, why, sizeof why) != 0)
		return 0;
	cdp_raster_close(r);
	return 1;
}

/* The IMAGE fields of a list file, resolved against the list's folder. */
static int read_list(const char *list, chips *out, char *err, size_t cap)
{
	FILE *f = fopen(list, "r");
	char *line = NULL, dir[4096], *slash;
	size_t lcap = 0, lineno = 0;
	ssize_t len;
	int rc = 0;

	if (!f)
		return pr_fail(err, cap, "cannot open '%s': %s", list, strerror(errno));
	cdp_file_skip_bom(f);
	snprintf(dir, sizeof dir, "%s", list);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	while (rc == 0 && (len = getline(&line, &lcap, f)) >= 0) {
		char *s = line, *t;
		lineno++;
		if (memchr(line, '\0', (size_t)len)) {
			rc = pr_fail(err, cap, "'%s': line %zu: binary data, not a list of chips (IMAGE "
			             "[CLASS] lines)", list, lineno);
			break;
		}
		if ((t = strchr(s, '#')))
			*t = '\0';
		s += strspn(s, " \t\r\n");
		if (!*s)
			continue;
		s[strcspn(s, " \t\r\n")] = '\0';
		for (t = s; *t; t++)
			if (iscntrl((unsigned char)*t))
				break;
		if (*t)
			rc = pr_fail(err, cap, "'%s': line %zu: not a list of chips", list, lineno);
		/* the path as the list gives it, resolved against the list's folder,
		 * with no "./" before it for a list in the current one (a folder
		 * operand gives "scenes/x.tif" too) */
		else if (chips_add(out, s[0] == '/' || strcmp(dir, ".") == 0 ? s : dir,
		                   s[0] == '/' || strcmp(dir, ".") == 0 ? NULL : s) < 0)
			rc = pr_fail(err, cap, "out of memory");
	}
	if (rc == 0 && ferror(f))
		rc = pr_fail(err, cap, "cannot read '%s': %s", list, strerror(errno));
	if (rc == 0 && out->n == 0)
		rc = pr_fail(err, cap, "'%s': no chips listed", list);
	free(line);
	fclose(f);
	return rc;
}

/* Softmax of the logits (K) into prob; returns the arg max. */
static int softmax(const float *logit, int k, double *prob)
{
	double mx = logit[0], sum = 0;
	int best = 0;

	for (int c = 1; c < k; c++)
		if (logit[c] > mx) {
			mx = logit[c];
			best = c;
		}
	for (int c = 0; c < k; c++)
		sum += prob[c] = exp((double)logit[c] - mx);
	for (int c = 0; c < k; c++)
		prob[c] /= sum;
	return best;
}

/* Runs the batch xb (n <= B windows of (C, S, S)) and leaves each window's
 * K logits in lg (B, K). */
static void run_batch(predictor *p, const float *xb, int n, float *lg)
{
	size_t win = (size_t)p->C * p->S * p->S;

	p->be->to_device(p->be, p->net.x, xb, (size_t)n * win * sizeof *xb);
	if (n < p->B)   /* where the backend runs them (cdp_net_forward_n): on zeros */
		p->be->fill(p->be, p->net.x + (size_t)n * win, 0.0f, (size_t)(p->B - n) * win);
	if (p->o->tta > 1) {   /* logits of the mean probabilities (predict_tta.c) */
		pr_tta_run(p, n, p->tx, p->tt, lg, p->tacc, 1);
		return;
	}
	cdp_net_forward_n(&p->net, n);
	p->be->to_host(p->be, lg, cdp_net_output(&p->net), (size_t)p->B * p->K * sizeof *lg);
}

/* Copies the window at column x0 of the standardized rows p->img (C, S, W),
 * read from scene row y0, into dst (C, S, S); returns the count of valid
 * pixels of cell (cx, cy) itself. A cell of the last column or row is
 * narrower than its window, which ends at the edge and so also covers the
 * neighbour's pixels: those do not make an empty cell valid. */
static size_t cut(const predictor *p, int x0, int y0, int cx, int cy, float *dst)
{
	size_t n = 0, S = (size_t)p->S, W = (size_t)p->W;
	int xa = cx * p->S, xb = xa + p->S < p->W ? xa + p->S : p->W;
	int ya = cy * p->S, yb = ya + p->S < p->H ? ya + p->S : p->H;

	for (int c = 0; c < p->C; c++)
		for (size_t y = 0; y < S; y++)
			memcpy(dst + ((size_t)c * S + y) * S, p->img + ((size_t)c * S + y) * W + x0,
			       S * sizeof *dst);
	for (int y = ya; y < yb; y++)
		for (int x = xa; x < xb; x++)
			n += p->valid[(size_t)(y - y0) * W + (size_t)x] != 0;
	return n;
}

/* The buffers of one row of windows, raw, img, valid for (C, S, W) (raw
 * of 8-byte samples, the widest dtype, so that chips of any type fit). */
static int alloc_rows(predictor *p, char *err, size_t cap)
{
	size_t S = (size_t)p->S, W = (size_t)p->W, C = (size_t)p->C;

	/* GDAL's cache: the blocks consecutive strips of chips share */
	cdp_raster_cache_fit(cdp_raster_strip_bytes(p->r, p->S));
	p->raw = malloc(C * S * W * 8);
	p->img = malloc(C * S * W * sizeof *p->img);
	p->valid = malloc(S * W);
	if (!p->raw || !p->img || !p->valid)
		return pr_fail(err, cap, "out of memory for windows of %d pixels", p->S);
	return 0;
}

/* The batch (B, C, S, S), its logits (B, K) and one window's
 * probabilities (K). */
static int alloc_batch(predictor *p, float **xb, float **lg, double **pr, char *err, size_t cap)
{
	*xb = malloc((size_t)p->B * p->C * p->S * p->S * sizeof **xb);
	*lg = malloc((size_t)p->B * p->K * sizeof **lg);
	*pr = malloc((size_t)p->K * sizeof **pr);
	if (!*xb || !*lg || !*pr || pr_tta_alloc(p, 1) < 0)
		return pr_fail(err, cap, "out of memory for batches of %d windows", p->B);
	return 0;
}

/* Opens chip `path` as the run's raster (checked against the model as a
 * scene is) and reads it standardized into p->img (C, S, S). */
static int read_chip(predictor *p, const char *path, char *err, size_t cap)
{
	cdp_predict_opts o = *p->o;
	const cdp_predict_opts *keep = p->o;
	int rc;

	if (p->r)
		cdp_raster_close(p->r);
	p->r = NULL;
	free(p->mean);
	free(p->inv);
	p->mean = p->inv = NULL;
	o.input = path;
	p->o = &o;
	rc = pr_open_raster(p, err, cap);
	p->o = keep;
	if (rc < 0)
		return -1;
	if (p->W != p->S || p->H != p->S)
		return pr_fail(err, cap, "'%s' is %dx%d, the model takes chips of %dx%d (--size)", path,
		               p->W, p->H, p->S, p->S);
	if (!p->img && alloc_rows(p, err, cap) < 0)
		return -1;
	o.input = path;
	p->o = &o;
	rc = pr_read_rows(p, 0, p->S, p->valid, err, cap);
	p->o = keep;
	if (rc < 0)
		return -1;
	pr_standardize(p, p->S);
	return 0;
}

/* CSV: quotes a field that holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* The checkpoint's name of class c, or NULL when it does not name all
 * K classes: then the CSV says ids, so a class keeps one meaning in the
 * checkpoint, the CSV and cdp-evaluate's reference. */
static const char *class_name(const predictor *p, int c)
{
	return p->ck.class_names && p->ck.nclass_names >= p->K ? p->ck.class_names[c] : NULL;
}

/* "path,class,p_NAME0,...": the checkpoint's class names, or p_0,...;
 * "path,classes,..." for a multi-label model */
static void csv_header(FILE *f, const predictor *p)
{
	char col[PR_NAME_MAX + 8];

	fputs(p->net.multi ? "path,classes" : "path,class", f);
	for (int c = 0; c < p->K; c++) {
		if (class_name(p, c))
			snprintf(col, sizeof col, "p_%s", class_name(p, c));
		else
			snprintf(col, sizeof col, "p_%d", c);
		fputc(',', f);
		csv_field(f, col);
	}
	fputc('\n', f);
}

static void csv_row(FILE *f, const predictor *p, const char *path, int cls, const double *prob)
{
	csv_field(f, path);
	if (class_name(p, cls)) {
		fputc(',', f);
		csv_field(f, class_name(p, cls));
	} else {
		fprintf(f, ",%d", cls);
	}
	for (int c = 0; c < p->K; c++)
		fprintf(f, ",%.6f", prob[c]);
	fputc('\n', f);
}

/* A multi-label row: the classes at or over the threshold joined by '|'
 * (one CSV field, quoted as a whole when it needs it), then K
 * probabilities of the logits lg (K). */
static int csv_multi_row(FILE *f, const predictor *p, const char *path, const float *lg,
                         double *prob)
{
	size_t cap = 64, n = 0;
	char *set = malloc(cap), id[16];

	if (!set)
		return -1;
	set[0] = '\0';
	for (int c = 0; c < p->K; c++) {
		const char *name = class_name(p, c);
		size_t len;
		prob[c] = 1.0 / (1.0 + exp(-(double)lg[c]));
		if (!(prob[c] >= p->o->threshold))
			continue;
		if (!name) {
			snprintf(id, sizeof id, "%d", c);
			name = id;
		}
		len = strlen(name);
		if (n + len + 2 > cap) {
			char *ns = realloc(set, cap = 2 * (n + len + 2));
			if (!ns) {
				free(set);
				return -1;
			}
			set = ns;
		}
		n += (size_t)sprintf(set + n, "%s%s", n ? "|" : "", name);
	}
	csv_field(f, path);
	fputc(',', f);
	csv_field(f, set);
	for (int c = 0; c < p->K; c++)
		fprintf(f, ",%.6f", prob[c]);
	fputc('\n', f);
	free(set);
	return 0;
}

/* The CSV against the model, the list or folder and every chip */
static int check_csv(predictor *p, const chips *in, char *err, size_t cap)
{
	const char *outs[1] = { p->o->output }, *opts[1] = { "-o" };
	cdp_fileset set = { 0 };
	char what[4400];
	int rc;

	snprintf(what, sizeof what, "the model '%s'", p->model);
	rc = cdp_fileset_add(&set, p->model, what);
	snprintf(what, sizeof what, "the input '%s'", p->o->input);
	if (rc == CDP_OK)
		rc = cdp_fileset_add(&set, p->o->input, what);
	for (size_t i = 0; i < in->n && rc == CDP_OK; i++) {
		snprintf(what, sizeof what, "the chip '%s'", in->path[i]);
		rc = cdp_fileset_add(&set, in->path[i], what);
	}
	if (rc != CDP_OK)
		pr_fail(err, cap, "cannot examine the inputs of '%s': %s", p->o->input,
		        cdp_strerror(rc));
	else if (cdp_out_check_set(&set, 1, outs, opts, err, cap) != CDP_OK)
		rc = CDP_EMISMATCH;
	cdp_fileset_free(&set);
	return rc == CDP_OK ? 0 : -1;
}

static int classify_chips(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	chips in = { 0 };
	struct stat st;
	float *xb = NULL, *lg = NULL;
	double *prob = NULL;
	cdp_out out = { .fd = -1, .slot = -1 };
	FILE *f = NULL;
	size_t first = 0;
	int rc = -1, fd = -1;

	if (stat(o->input, &st) != 0) {
		pr_fail(err, cap, "cannot open '%s': %s", o->input, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode) && is_raster(o->input)) {
		pr_fail(err, cap, "'%s' is a raster, but -o '%s' asks for a CSV of chips: give a "
		        "folder of chips or a list file (IMAGE [CLASS] lines), or -o OUT.tif to "
		        "classify the scene", o->input, o->output);
		goto out;
	}
	if ((S_ISDIR(st.st_mode) ? read_folder(o->input, 0, &in, err, cap)
	                         : read_list(o->input, &in, err, cap)) < 0 ||
	    alloc_batch(p, &xb, &lg, &prob, err, cap) < 0)
		goto out;
	if (in.n == 0) {
		pr_fail(err, cap, "'%s': no .tif chips", o->input);
		goto out;
	}
	if (check_csv(p, &in, err, cap) < 0)
		goto out;
	/* a streamed output: "-", a FIFO or a device in place (cdpool(7)) */
	if (cdp_out_open(&out, o->output, CDP_OUT_STREAM | CDP_OUT_SYNC, 0666, err, cap) != 0)
		goto out;
	if ((fd = dup(out.fd)) < 0 || !(f = fdopen(fd, "w"))) {
		pr_fail(err, cap, "cannot write '%s': %s", o->output, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	csv_header(f, p);
	/* read B chips into the batch, run it, write their rows */
	for (size_t i = 0; i < in.n; i++) {
		size_t win = (size_t)p->C * p->S * p->S, j = i - first;
		if (read_chip(p, in.path[i], err, cap) < 0)
			goto out;
		memcpy(xb + j * win, p->img, win * sizeof *xb);
		if (j + 1 == (size_t)p->B || i + 1 == in.n) {
			run_batch(p, xb, (int)(j + 1), lg);
			for (size_t b = 0; b <= j; b++) {
				if (p->net.multi) {
					if (csv_multi_row(f, p, in.path[first + b], lg + b * p->K, prob) < 0) {
						pr_fail(err, cap, "out of memory");
						goto out;
					}
					continue;
				}
				csv_row(f, p, in.path[first + b], softmax(lg + b * p->K, p->K, prob),
				        prob);
			}
			first = i + 1;
		}
	}
	if (fflush(f) != 0 || ferror(f)) {
		pr_fail(err, cap, "cannot write '%s': %s", o->output, strerror(errno));
		goto out;
	}
	rc = fclose(f);
	f = NULL;
	if (rc != 0) {
		rc = -1;
		pr_fail(err, cap, "cannot write '%s': %s", o->output, strerror(errno));
		goto out;
	}
	if ((rc = cdp_out_commit(&out, err, cap)) != 0) {
		rc = -1;
		goto out;
	}
	if (o->progress != CDP_PROGRESS_OFF)
		fprintf(stderr, PR_PROG ": %zu chips classified into '%s'\n", in.n, o->output);
	rc = 0;
out:
	if (f)
		fclose(f);
	cdp_out_abort(&out);
	chips_free(&in);
	free(xb);
	free(lg);
	free(prob);
	return rc;
}

static int classify_scene(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	int S = p->S, nxc, nyc, nb = o->prob ? p->K : 1, rc = -1;
	float *xb = NULL, *lg = NULL;
	double *prob = NULL, gt[6];
	void *row = NULL;
	int *x0 = NULL;

	if (pr_open_raster(p, err, cap) < 0 || pr_check_outputs(p, err, cap) < 0)
		return -1;
	if (p->W < S || p->H < S)
		return pr_fail(err, cap, "'%s' is %dx%d, smaller than the window of %d", o->input, p->W,
		               p->H, S);
	nxc = (p->W + S - 1) / S;
	nyc = (p->H + S - 1) / S;
	memcpy(gt, p->ri->gt, sizeof gt);
	gt[1] *= S;
	gt[2] *= S;
	gt[4] *= S;
	gt[5] *= S;
	if (alloc_rows(p, err, cap) < 0 || alloc_batch(p, &xb, &lg, &prob, err, cap) < 0)
		goto out;
	row = malloc((size_t)nb * nxc * (o->prob ? sizeof(float) : 1));
	x0 = malloc((size_t)nxc * sizeof *x0);
	if (!row || !x0) {
		pr_fail(err, cap, "out of memory");
		goto out;
	}
	if (pr_legend_make(&p->legend, p->K > 1 ? p->K : 2, &p->ck, o->colors, err, cap) < 0 ||
	    pr_out_open(&p->out, o->output, nxc, nyc, nb, o->prob, p->ri->has_gt ? gt : NULL,
	                p->ri->crs && *p->ri->crs ? p->ri->crs : NULL, err, cap) < 0 ||
	    pr_out_georef(p->out, p->r, S, err, cap) < 0 ||
	    pr_out_layout(p->out, &p->legend, o->cog, err, cap) < 0)
		goto out;
	/* the window of cell i starts at i S, or ends at the edge */
	for (int i = 0; i < nxc; i++)
		x0[i] = i * S + S <= p->W ? i * S : p->W - S;
	for (int cy = 0; cy < nyc; cy++) {
		int y0 = cy * S + S <= p->H ? cy * S : p->H - S;
		size_t win = (size_t)p->C * S * S, nvalid[4096];   /* --batch <= 4096 */
		if (pr_read_rows(p, y0, S, p->valid, err, cap) < 0)
			goto out;
		pr_standardize(p, S);
		for (int c0 = 0; c0 < nxc; c0 += p->B) {
			int n = nxc - c0 < p->B ? nxc - c0 : p->B;
			for (int b = 0; b < n; b++)
				nvalid[b] = cut(p, x0[c0 + b], y0, c0 + b, cy, xb + (size_t)b * win);
			run_batch(p, xb, n, lg);
			for (int b = 0; b < n; b++) {
				int cls = softmax(lg + (size_t)b * p->K, p->K, prob);
				size_t cx = (size_t)c0 + b;
				if (!o->prob) {
					((uint8_t *)row)[cx] = nvalid[b] ? (uint8_t)cls : 255;
					continue;
				}
				for (int k = 0; k < p->K; k++)
					((float *)row)[(size_t)k * nxc + cx] = nvalid[b] ? (float)prob[k] : NAN;
			}
		}
		if (pr_out_write(p->out, cy, 1, row, err, cap) < 0)
			goto out;
	}
	{
		pr_out *f = p->out;
		p->out = NULL;
		if (pr_out_close(f, 1, err, cap) < 0)
			goto out;
	}
	rc = 0;
out:
	free(xb);
	free(lg);
	free(prob);
	free(row);
	free(x0);
	return rc;
}

int pr_is_csv(const char *path)
{
	static const char *const csv[] = { ".csv", NULL };

	return cdp_out_ext_is(path, csv);
}

/* A CSV is streamed where - is standard output (cdpool(7)); a GeoTIFF
 * never is, so such an -o can only mean the CSV. */
int cdp_predict_output_csv(const char *path)
{
	return pr_is_csv(path) || cdp_out_inplace(path);
}

int pr_classify_run(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;

	if (p->nranks > 1)
		return pr_fail(err, cap, "'%s' is a classifier, which cdp-predict runs in one process, "
		               "not %d", p->model, p->nranks);
	if (o->vector || o->preview)
		return pr_fail(err, cap, "'%s' is a classifier: --vector and --preview are for "
		               "segmentation models", p->model);
	/* --tta averages softmax probabilities (predict_tta.c) */
	if (p->net.multi && (!cdp_predict_output_csv(o->output) || o->tta > 1))
		return pr_fail(err, cap, "'%s' is a multi-label classifier: it predicts chips into "
		               "a CSV (-o OUT.csv or -), without --tta", p->model);
	if (cdp_predict_output_csv(o->output))
		return classify_chips(p, err, cap);
	return classify_scene(p, err, cap);
}
