/* train_std.c: the standardization cdp-train trains with, the
 * georeference of its training data and the names of its classes, all
 * stored in the checkpoint.
 *
 * The pool's "stats" cover every tile, held-out validation scenes included.
 * A run standardizes instead with the exact per-source sums (the pool's
 * srcstats meta, cdp-pool(5)) of the sources its training keys come from,
 * combined; a pool packed before those sums were kept falls back to the
 * pool's statistics, and says so. When resuming, the checkpoint's
 * standardization wins, since the weights were trained on it: a pool that
 * has grown since is said, in one line naming both, and not followed.
 *
 * The CRS (the sources' WKT when they all agree) and pixel size (when they
 * all agree) of the training sources go into the checkpoint, so cdp-predict
 * can refuse a raster in another CRS and warn on another resolution.
 *
 * With --init-norm the run standardizes instead with the input
 * normalization its initial weights expect (their NORM, ImageNet's for
 * example, in band values), origin CDP_CKPT_STD_INIT, so cdp-predict
 * applies it; by default the pool's statistics, which give inputs of the
 * scale such normalizations aim at (mean 0, deviation 1 per band). The
 * bands --init's weights expect are checked against the pool's.
 *
 * The class names are the pool's class_names meta (cdp-lmdbpack --classes,
 * --folders), so cdp-predict can name the classes of its maps. Resuming,
 * the checkpoint's names win when it has any (its weights learnt those
 * ids); a pool whose names differ is said in one line.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_stats.h"
#include "cdp_stream.h"
#include "train_int.h"

/* Appends to a note line, truncating quietly (a log line). */
static void note(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(char *buf, size_t cap, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
}

/* "band 1 mean M std S, band 2 ..." of mean, sd [C] */
static void bands_text(char *buf, size_t cap, const double *mean, const double *sd, int C)
{
	for (int c = 0; c < C; c++)
		note(buf, cap, "%sband %d mean %.6g std %.6g", c ? ", " : "", c + 1, mean[c], sd[c]);
}

/* The statistics of the training sources src[n], combined: 1 when every
 * one has its sums (mean, sd filled), 0 when one has none (an older pool;
 * *missing names it), -1 with err. */
static int sources_stats(trainer *t, const uint32_t *src, size_t n, double *mean, double *sd,
                         uint32_t *missing, char *err, size_t cap)
{
	cdp_stats st;
	double lo, hi;
	char why[256];
	int rc = cdp_pool_source_stats(&t->pool, t->txn, src, n, &st, missing, why, sizeof why);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc != CDP_OK)
		return tr_fail(err, cap, "'%s': cannot combine the training sources' sums: %s", t->o->db,
		            why);
	if ((int)st.bands != t->ti.c) {
		cdp_stats_free(&st);
		return tr_fail(err, cap, "'%s': the sources' sums have %" PRIu32 " bands, the pool %d",
		            t->o->db, st.bands, t->ti.c);
	}
	for (int c = 0; c < t->ti.c; c++) {
		cdp_stats_result(&st, (uint32_t)c, &mean[c], &sd[c], &lo, &hi);
		if (st.b[c].count == 0) {
			cdp_stats_free(&st);
			return tr_fail(err, cap, "'%s': band %d has no valid pixel in the %zu source%s of "
			            "'%s'", t->o->db, c + 1, n, n == 1 ? "" : "s", t->o->keys);
		}
	}
	cdp_stats_free(&st);
	return 1;
}

/* A value pool's targets: standardized by the statistics of the finite
 * targets of the training sources src[n], combined (t->tmean, t->tstd
 * [T]), in both loaders, and logged; predictions go back by y * std +
 * mean. A target with std 0 is only centred (std taken as 1). 0, or -1
 * with err (no target statistics: a pool older than value labels). */
static int target_stats(trainer *t, const uint32_t *src, size_t n, char *err, size_t cap)
{
	uint32_t T = t->ti.pool->label_len, missing = 0;
	cdp_stats st;
	double lo, hi;
	char why[256];
	int rc;

	if (t->ti.label_kind != CDP_LABEL_F32)
		return 0;
	if (!(t->tmean = calloc(T, sizeof *t->tmean)) || !(t->tstd = calloc(T, sizeof *t->tstd)))
		return tr_fail(err, cap, "out of memory");
	if ((rc = cdp_pool_source_stats(&t->pool, t->txn, src, n, &st, &missing, why,
	                                 sizeof why)) != CDP_OK)
		return tr_fail(err, cap, "'%s': cannot combine the training sources' target "
		               "statistics: %s", t->o->db, rc == MDB_NOTFOUND ? "a source has none"
		               : why);
	if (st.targets != T) {
		cdp_stats_free(&st);
		return tr_fail(err, cap, "'%s': the sources' sums have %" PRIu32 " targets, the pool "
		               "%" PRIu32, t->o->db, st.targets, T);
	}
	note(t->std_note[3], sizeof t->std_note[3], "targets standardized by the training "
	     "sources' statistics:");
	for (uint32_t i = 0; i < T; i++) {
		cdp_stats_target_result(&st, i, &t->tmean[i], &t->tstd[i], &lo, &hi);
		if (st.t[i].count == 0) {
			cdp_stats_free(&st);
			return tr_fail(err, cap, "'%s': target %" PRIu32 " has no value in the training "
			               "sources of '%s'", t->o->db, i + 1, t->o->keys);
		}
		if (!(t->tstd[i] > 0))
			t->tstd[i] = 1;
		note(t->std_note[3], sizeof t->std_note[3], "%s target %" PRIu32 " mean %.6g std %.6g",
		     i ? "," : "", i + 1, t->tmean[i], t->tstd[i]);
	}
	cdp_stats_free(&st);
	/* the weights were trained on the checkpoint's: keep them */
	if (t->have_ck && t->ck.task == CDP_CKPT_TASK_REGRESSION && t->ck.ntargets == (int)T) {
		memcpy(t->tmean, t->ck.target_mean, T * sizeof *t->tmean);
		memcpy(t->tstd, t->ck.target_std, T * sizeof *t->tstd);
		snprintf(t->std_note[3], sizeof t->std_note[3], "resume: the checkpoint's target "
		         "standardization (target 1 mean %.6g std %.6g)", t->tmean[0], t->tstd[0]);
	}
	if (cdp_loader_set_target_standardization(t->tl, t->tmean, t->tstd) != CDP_OK ||
	    (t->vl && cdp_loader_set_target_standardization(t->vl, t->tmean, t->tstd) != CDP_OK))
		return tr_fail(err, cap, "the targets' standardization is out of float32 range");
	return 0;
}

/* Source i's meta, parsed: 0, or -1 with err. */
static int source_meta(trainer *t, uint32_t i, cdp_source *s, char *err, size_t cap)
{
	char name[40], why[160];
	cdp_buf b = { 0 };
	int rc;

	snprintf(name, sizeof name, "source.%06" PRIu32, i);
	rc = cdp_pool_meta_get(&t->pool, t->txn, name, &b);
	snprintf(why, sizeof why, "%s", cdp_strerror(rc));
	if (rc == CDP_OK)
		rc = cdp_source_parse_why(b.p, b.len, s, why, sizeof why);
	cdp_buf_free(&b);
	if (rc != CDP_OK)
		return tr_fail(err, cap, "'%s': meta '%s': %s", t->o->db, name, why);
	return 0;
}

static int same_size(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* cdp-tile records GDAL's default geotransform (0, 1, 0, 0, 0, 1) for a
 * raster without one (GCPs only, or no georeference), in old pools too;
 * GeoTIFF never stores it, so it tells that case and gives no pixel size. */
static int default_gt(const double gt[6])
{
	return gt[0] == 0 && gt[1] == 1 && gt[2] == 0 && gt[3] == 0 && gt[4] == 0 && gt[5] == 1;
}

/* The training sources' CRS and pixel size (t->crs, res_x, res_y), and the
 * sources named in the standardization note. */
static int georeference(trainer *t, const uint32_t *src, size_t n, char *line, size_t lcap,
                        char *err, size_t cap)
{
	int crs_same = 1, res_same = 1;

	for (size_t i = 0; i < n; i++) {
		cdp_source s;
		double rx, ry;
		if (source_meta(t, src[i], &s, err, cap) < 0)
			return -1;
		/* no pixel size: 0 x 0, which makes the recorded one unknown */
		rx = default_gt(s.gt) ? 0 : hypot(s.gt[1], s.gt[4]);
		ry = default_gt(s.gt) ? 0 : hypot(s.gt[2], s.gt[5]);
		if (i < 8)
			note(line, lcap, "%s%" PRIu32 " '%s'", i ? ", " : "", src[i], s.name);
		else if (i == 8)
			note(line, lcap, ", ...");
		if (i == 0) {
			t->crs = strdup(s.crs ? s.crs : "");
			t->res_x = rx;
			t->res_y = ry;
		} else {
			crs_same &= strcmp(t->crs ? t->crs : "", s.crs ? s.crs : "") == 0;
			res_same &= same_size(rx, t->res_x) && same_size(ry, t->res_y);
		}
		cdp_source_free(&s);
		if (!t->crs)
			return tr_fail(err, cap, "out of memory");
	}
	if (!crs_same)
		t->crs[0] = '\0';
	if (!res_same || !isfinite(t->res_x) || !isfinite(t->res_y) || !(t->res_x > 0) ||
	    !(t->res_y > 0))
		t->res_x = t->res_y = 0;
	snprintf(t->std_note[1], sizeof t->std_note[1], "training data: %s%s", !t->crs[0] ?
	         "CRS unknown" : "CRS recorded", crs_same ? "" : " (the sources' CRS texts differ)");
	if (t->res_x > 0)
		note(t->std_note[1], sizeof t->std_note[1], ", pixel size %.9g x %.9g", t->res_x,
		     t->res_y);
	else
		note(t->std_note[1], sizeof t->std_note[1], ", pixel size unknown%s",
		     res_same ? "" : " (the sources' pixel sizes differ)");
	return 0;
}

/* The first band where a and b differ, or -1. */
static int first_diff(const double *a, const double *b, const double *c, const double *d, int C)
{
	for (int i = 0; i < C; i++)
		if (a[i] != b[i] || c[i] != d[i])
			return i;
	return -1;
}

/* The largest value of data type dt: what --input-scale dtype divides by
 * (cdp-checkpoint(5), NORM), 1 for floats, whose data are taken as 0..1. */
static double dtype_range(int dt)
{
	double m = cdp_dtype_max(dt);

	return isfinite(m) ? m : 1;
}

/* 1 when s is a 1-based band index (decimal digits), its value in *k */
static int band_index(const char *s, long *k)
{
	char *end;

	if (*s < '0' || *s > '9')
		return 0;
	*k = strtol(s, &end, 10);
	return *end == '\0';
}

/* --init's recorded bands (NORM) against the pool: as many, and a band
 * given by index is the pool's band feeding that channel (cdp-train feeds
 * the pool's bands in order). */
static int init_bands(trainer *t, char *err, size_t cap)
{
	const cdp_ckpt *ck = &t->init_ck;
	char list[512] = "";
	long k;

	if (!t->have_init || ck->nnorm_bands == 0)
		return 0;
	for (int c = 0; c < ck->nnorm_bands; c++)
		note(list, sizeof list, "%s%s", c ? "," : "", ck->norm_bands[c]);
	if (ck->nnorm_bands != t->ti.c)
		return tr_fail(err, cap, "--init '%s': the weights expect %d bands (%s), the pool '%s' "
		               "has %d", t->o->init, ck->nnorm_bands, list, t->o->db, t->ti.c);
	for (int c = 0; c < ck->nnorm_bands; c++)
		if (band_index(ck->norm_bands[c], &k) && k != c + 1)
			return tr_fail(err, cap, "--init '%s': the weights expect band %s as input %d, "
			               "cdp-train feeds the pool's %d bands in their order (pack a pool "
			               "of the bands %s)", t->o->init, ck->norm_bands[c], c + 1, t->ti.c,
			               list);
	snprintf(t->std_note[2], sizeof t->std_note[2], "init: the weights expect the bands %s: "
	         "the pool's bands 1 to %d", list, t->ti.c);
	return 0;
}

/* --init-norm: the initial weights' own input normalization in band
 * values into mean, sd [C]: their NORM's (x / S - m) / s is
 * (x - m S) / (s S); a run's checkpoint has none, and its standardization
 * (DATA) is what its weights were trained on. */
static int init_norm(trainer *t, double *mean, double *sd, char *err, size_t cap)
{
	static const char *const kinds[] = { "", "none", "imagenet", "given" };
	const cdp_ckpt *ck = &t->init_ck;
	int C = t->ti.c;
	double S;

	if (ck->norm_kind) {
		if (ck->in_c != C)
			return tr_fail(err, cap, "--init-norm: '%s' normalizes %d bands, the pool '%s' "
			               "has %d", t->o->init, ck->in_c, t->o->db, C);
		S = ck->norm_scale > 0 ? ck->norm_scale : dtype_range(t->ti.pool->dtype);
		for (int c = 0; c < C; c++) {
			mean[c] = ck->norm_mean[c] * S;
			sd[c] = ck->norm_std[c] * S;
		}
		snprintf(t->std_note[0], sizeof t->std_note[0], "standardization: the input "
		         "normalization of the initial weights '%s' (--init-norm: %s, values / %.9g%s): ",
		         t->o->init, kinds[ck->norm_kind], S, ck->norm_scale > 0 ? "" :
		         ", the largest of the pool's data type");
	} else if (ck->mean && ck->nbands == C) {
		memcpy(mean, ck->mean, (size_t)C * sizeof *mean);
		memcpy(sd, ck->std, (size_t)C * sizeof *sd);
		snprintf(t->std_note[0], sizeof t->std_note[0], "standardization: that of the "
		         "initial weights '%s' (--init-norm: the run's it was trained with): ",
		         t->o->init);
	} else if (ck->mean) {
		return tr_fail(err, cap, "--init-norm: '%s' standardizes %d bands, the pool '%s' has %d",
		               t->o->init, ck->nbands, t->o->db, C);
	} else {
		return tr_fail(err, cap, "--init-norm: '%s' records no input normalization (import it "
		               "with python3 -m cdpool import-torch --input-norm)", t->o->init);
	}
	bands_text(t->std_note[0], sizeof t->std_note[0], mean, sd, C);
	free(t->std_src);
	t->std_src = NULL;
	t->nstd_src = 0;
	t->std_from = CDP_CKPT_STD_INIT;
	return 0;
}

/* --init-norm on data of another scale (u16 reflectances 0..10000 under
 * an ImageNet normalization of values / 65535) feeds the net inputs far
 * from what its weights saw, silently: one warning (rank 0) naming the
 * worst band, when the training data normalized so has a mean beyond 3 or
 * a standard deviation outside 0.1..10. dm, ds: the data's; m, s: the
 * normalization's [C]. */
static void norm_check(const trainer *t, const double *dm, const double *ds, const double *m,
                       const double *s, int C)
{
	int worst = -1;
	double wscore = 0;

	for (int c = 0; c < C; c++) {
		double mu = (dm[c] - m[c]) / s[c], sg = ds[c] / s[c];
		double score = fmax(fabs(mu) / 3, sg > 0 ? fmax(sg / 10, 0.1 / sg) : 0);

		if (score > 1 && score > wscore) {
			worst = c;
			wscore = score;
		}
	}
	if (worst < 0 || t->rank != 0)
		return;
	fprintf(stderr, "cdp-train: warning: --init-norm: band %d of the training data comes out "
	        "at mean %.3g std %.3g under the initial weights' normalization (mean %.6g std %.6g "
	        "in band values), far from the 0 and 1 they expect: were they imported with the "
	        "--input-scale of this data (import-torch)?\n", worst + 1,
	        (dm[worst] - m[worst]) / s[worst], ds[worst] / s[worst], m[worst], s[worst]);
}

int tr_standardize(trainer *t, char *err, size_t cap)
{
	const cdp_pool_info *pi = t->ti.pool;
	int C = t->ti.c, have, rc = -1;
	uint32_t *src = NULL, missing = 0;
	size_t n = 0;
	double *mean, *sd;
	char names[512] = "";
	const char *fresh;

	if (!(t->std_mean = calloc((size_t)C, sizeof *t->std_mean)) ||
	    !(t->std_sd = calloc((size_t)C, sizeof *t->std_sd)) ||
	    !(mean = calloc((size_t)C * 2, sizeof *mean)))
		return tr_fail(err, cap, "out of memory");
	sd = mean + C;
	if ((have = cdp_loader_sources(t->tl, &src, &n, NULL)) != CDP_OK) {
		tr_fail(err, cap, "'%s': cannot learn the sources of '%s': %s", t->o->db, t->o->keys,
		        cdp_strerror(have));
		goto out;
	}
	if (n == 0) {
		tr_fail(err, cap, "'%s': no record of '%s' could be read", t->o->db, t->o->keys);
		goto out;
	}
	if ((have = sources_stats(t, src, n, mean, sd, &missing, err, cap)) < 0 ||
	    target_stats(t, src, n, err, cap) < 0 ||
	    georeference(t, src, n, names, sizeof names, err, cap) < 0)
		goto out;
	if (have) {
		fresh = "training sources'";
		t->std_from = CDP_CKPT_STD_SOURCES;
		t->std_src = src;
		t->nstd_src = (int)n;
		src = NULL;
	} else {
		fresh = "pool's";
		t->std_from = CDP_CKPT_STD_POOL;
		for (int c = 0; c < C; c++) {
			mean[c] = pi->band[c].mean;
			sd[c] = pi->band[c].std;
		}
	}
	if (init_bands(t, err, cap) < 0)
		goto out;
	if (t->have_init && t->init_ck.norm_kind && !t->o->init_norm)
		note(t->std_note[2], sizeof t->std_note[2], "%sinit: '%s' records its weights' own "
		     "input normalization; this run standardizes with the pool's statistics "
		     "(--init-norm takes the weights')", t->std_note[2][0] ? "; " : "", t->o->init);
	if (t->o->init_norm) {
		/* the data's mean and sd, in std_mean and std_sd until they take
		 * the weights' normalization below */
		memcpy(t->std_mean, mean, (size_t)C * sizeof *mean);
		memcpy(t->std_sd, sd, (size_t)C * sizeof *sd);
		if (init_norm(t, mean, sd, err, cap) < 0)
			goto out;
		norm_check(t, t->std_mean, t->std_sd, mean, sd, C);
		memcpy(t->std_mean, mean, (size_t)C * sizeof *mean);
		memcpy(t->std_sd, sd, (size_t)C * sizeof *sd);
	} else if (t->have_ck && t->ck.mean && t->ck.nbands == C) {
		/* the weights were trained on the checkpoint's: keep them */
		int b = first_diff(t->ck.mean, mean, t->ck.std, sd, C);
		memcpy(t->std_mean, t->ck.mean, (size_t)C * sizeof *mean);
		memcpy(t->std_sd, t->ck.std, (size_t)C * sizeof *sd);
		free(t->std_src);
		t->std_src = NULL;
		t->nstd_src = 0;
		t->std_from = t->ck.std_from;
		if (t->ck.nstd_sources > 0) {
			if (!(t->std_src = malloc((size_t)t->ck.nstd_sources * sizeof *t->std_src))) {
				tr_fail(err, cap, "out of memory");
				goto out;
			}
			memcpy(t->std_src, t->ck.std_sources,
			       (size_t)t->ck.nstd_sources * sizeof *t->std_src);
			t->nstd_src = t->ck.nstd_sources;
		}
		if (b >= 0)
			snprintf(t->std_note[0], sizeof t->std_note[0], "resume: using the checkpoint's "
			         "standardization (band %d mean %.6g std %.6g), not the %s "
			         "(mean %.6g std %.6g)", b + 1, t->ck.mean[b], t->ck.std[b], fresh,
			         mean[b], sd[b]);
		else
			snprintf(t->std_note[0], sizeof t->std_note[0], "resume: the checkpoint's "
			         "standardization, the same as the %s", fresh);
		/* a run on the weights' own normalization keeps it quietly */
		t->std_resumed = b >= 0 && t->ck.std_from != CDP_CKPT_STD_INIT;
	} else {
		memcpy(t->std_mean, mean, (size_t)C * sizeof *mean);
		memcpy(t->std_sd, sd, (size_t)C * sizeof *sd);
		if (have)
			snprintf(t->std_note[0], sizeof t->std_note[0], "standardization from the sums "
			         "of the %zu training source%s (%s): ", n, n == 1 ? "" : "s", names);
		else
			snprintf(t->std_note[0], sizeof t->std_note[0], "standardization from the pool's "
			         "statistics over every tile: source %" PRIu32 " has no per-source sums "
			         "(a pool packed by an older cdp-lmdbpack): ", missing);
		bands_text(t->std_note[0], sizeof t->std_note[0], mean, sd, C);
	}
	if (cdp_loader_set_standardization(t->tl, t->std_mean, t->std_sd) != CDP_OK ||
	    (t->vl && cdp_loader_set_standardization(t->vl, t->std_mean, t->std_sd) != CDP_OK)) {
		tr_fail(err, cap, "the standardization is out of float32 range");
		goto out;
	}
	rc = 0;
out:
	free(src);
	free(mean);
	return rc;
}

void tr_standardize_free(trainer *t)
{
	free(t->std_mean);
	free(t->std_sd);
	free(t->std_src);
	free(t->crs);
	free(t->tmean);
	free(t->tstd);
	t->tmean = t->tstd = NULL;
	t->std_mean = t->std_sd = NULL;
	t->std_src = NULL;
	t->crs = NULL;
}

/* "a, b, c" of names[n], the first 8 */
static void names_text(char *buf, size_t cap, char *const *names, size_t n)
{
	for (size_t i = 0; i < n && i < 8; i++)
		note(buf, cap, "%s'%s'", i ? ", " : "", names[i]);
	if (n > 8)
		note(buf, cap, ", ... (%zu)", n);
}

static int same_names(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return 0;
	return 1;
}

int tr_class_names(trainer *t, char *err, size_t cap)
{
	int K = t->net.classes > 1 ? t->net.classes : 2;
	char **v, why[96];
	size_t n;
	int rc = cdp_pool_class_names(&t->pool, t->txn, &v, &n);

	t->names_note[0] = '\0';
	t->names_warn = 0;
	if (rc != CDP_OK)
		return tr_fail(err, cap, "'%s': meta 'class_names': %s", t->o->db, cdp_strerror(rc));
	if (t->have_ck && t->ck.nclass_names > 0) {
		/* the weights learnt the checkpoint's ids under its names */
		char **c = t->ck.class_names;
		size_t nc = (size_t)t->ck.nclass_names;
		if (!same_names(c, nc, v, n)) {
			snprintf(t->names_note, sizeof t->names_note, "resume: using the checkpoint's "
			         "class names (");
			names_text(t->names_note, sizeof t->names_note, c, nc);
			note(t->names_note, sizeof t->names_note, "), not the pool's (");
			names_text(t->names_note, sizeof t->names_note, v, n);
			note(t->names_note, sizeof t->names_note, "%s)", n ? "" : "none");
			t->names_warn = 1;
		}
		cdp_pool_class_names_free(v, n);
		if (!(v = calloc(nc, sizeof *v)))
			return tr_fail(err, cap, "out of memory");
		for (n = 0; n < nc; n++)
			if (!(v[n] = strdup(c[n]))) {
				cdp_pool_class_names_free(v, n);
				return tr_fail(err, cap, "out of memory");
			}
	}
	if (n > (size_t)K) {
		snprintf(t->names_note, sizeof t->names_note, "'%s' names %zu classes (meta "
		         "'class_names'), the model has %d: the names of classes %d and on are not "
		         "kept", t->o->db, n, K, K);
		t->names_warn = 1;
		while (n > (size_t)K)
			free(v[--n]);
	}
	for (size_t k = 0; k < n; k++)
		if (!cdp_ckpt_class_name_ok(v[k], why, sizeof why)) {
			snprintf(t->names_note, sizeof t->names_note, "'%s': class %zu's name %s (meta "
			         "'class_names'): the class names are not kept", t->o->db, k, why);
			t->names_warn = 1;
			cdp_pool_class_names_free(v, n);
			v = NULL;
			n = 0;
			break;
		}
	if (n && !t->names_warn) {
		snprintf(t->names_note, sizeof t->names_note, "class names: ");
		names_text(t->names_note, sizeof t->names_note, v, n);
	}
	t->cnames = v;
	t->ncnames = (int)n;
	return 0;
}

void tr_class_names_free(trainer *t)
{
	cdp_pool_class_names_free(t->cnames, (size_t)t->ncnames);
	t->cnames = NULL;
	t->ncnames = 0;
}
