/* evaluate_csv.c: cdp_evaluate_csv_run, the scores of a classifier's CSV
 * (cdp-predict's "path,class,p0,...") against the chips' true classes: a
 * list file of cdp-lmdbpack --list ("IMAGE CLASS" lines, CLASS an id or,
 * with --classes names, a name; paths relative to the list's folder) or a
 * folder of class folders (DIR/CLASS/IMAGE.tif: class K is the K-th folder
 * name in byte order, as cdp-lmdbpack --folders and ImageFolder number
 * them). Report: the confusion matrix (rows reference, columns prediction),
 * per-class precision, recall, F1 and support, overall accuracy, macro F1
 * and Cohen's kappa (cdp_metrics.h), as text or one JSON object.
 *
 * A CSV row and a reference chip are the same chip when their paths name
 * the same file (realpath; a path that does not resolve is compared as
 * written). A CSV row without a reference chip is an error; reference chips
 * without a row are counted as not predicted and left out of the scores.
 */
#include "evaluate.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cdp_metrics.h"
#include "cdp_num.h"

#define MAXK 1024
#define FAIL(...) (snprintf(err, cap, __VA_ARGS__), -1)

typedef struct ref {
	char *path;               /* resolved */
	int cls;
	int seen;                 /* a CSV row named it */
} ref;

typedef struct refs {
	ref *v;
	size_t n, cap;
	char *names[MAXK];        /* class names, or NULL */
	int nnames;
} refs;

static void refs_free(refs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].path);
	free(r->v);
	for (int i = 0; i < r->nnames; i++)
		free(r->names[i]);
}

/* path resolved, or a copy as written when it does not resolve */
static char *resolve(const char *path)
{
	char *r = realpath(path, NULL);

	return r ? r : strdup(path);
}

static int add_ref(refs *r, const char *path, int cls)
{
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 256;
		ref *nv = realloc(r->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		r->v = nv;
		r->cap = nc;
	}
	if (!(r->v[r->n].path = resolve(path)))
		return -1;
	r->v[r->n].cls = cls;
	r->v[r->n++].seen = 0;
	return 0;
}

static int cmp_ref(const void *a, const void *b)
{
	return strcmp(((const ref *)a)->path, ((const ref *)b)->path);
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

/* The sorted entries of dir that are folders (dirs) or .tif files. */
static int entries(const char *dir, int dirs, char ***out, size_t *n, char *err, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 256];
	struct stat st;
	size_t c = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return FAIL("cannot open '%s': %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(path, &st) != 0 ||
		    (dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode) || !is_tif(e->d_name)))
			continue;
		if (*n == c) {
			char **nv = realloc(*out, (c = c ? c * 2 : 64) * sizeof *nv);
			if (!nv)
				break;
			*out = nv;
		}
		if (!((*out)[*n] = strdup(e->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (e) {
		for (size_t i = 0; i < *n; i++)
			free((*out)[i]);
		free(*out);
		*out = NULL;
		return FAIL("out of memory");
	}
	qsort(*out, *n, sizeof **out, cmp_str);
	return 0;
}

static int read_folders(const char *dir, refs *r, char *err, size_t cap)
{
	char **cls = NULL, **files = NULL, path[PATH_MAX + 256];
	size_t ncls = 0, nfiles = 0;
	int rc;

	if ((rc = entries(dir, 1, &cls, &ncls, err, cap)) < 0)
		return -1;
	if (ncls == 0 || ncls > MAXK)
		rc = FAIL("'%s': %zu class folders, want 1 to %d", dir, ncls, MAXK);
	for (size_t c = 0; c < ncls && rc == 0; c++) {
		snprintf(path, sizeof path, "%s/%s", dir, cls[c]);
		if ((rc = entries(path, 0, &files, &nfiles, err, cap)) < 0)
			break;
		for (size_t i = 0; i < nfiles && rc == 0; i++) {
			char file[2 * PATH_MAX + 512];
			snprintf(file, sizeof file, "%s/%s", path, files[i]);
			if (add_ref(r, file, (int)c) < 0)
				rc = FAIL("out of memory");
		}
		for (size_t i = 0; i < nfiles; i++)
			free(files[i]);
		free(files);
	}
	for (size_t c = 0; c < ncls; c++) {
		if (rc == 0 && c < MAXK)
			r->names[r->nnames++] = cls[c];
		else
			free(cls[c]);
	}
	free(cls);
	return rc;
}

/* The class of a list line's field: an id, or a name of names. */
static int class_of(const char *tok, const refs *r, int *cls)
{
	for (int c = 0; c < r->nnames; c++)
		if (strcmp(tok, r->names[c]) == 0) {
			*cls = c;
			return 0;
		}
	return cdp_parse_int(tok, 0, MAXK - 1, cls) == 0 ? 0 : -1;
}

static int read_list(const char *list, refs *r, char *err, size_t cap)
{
	FILE *f = fopen(list, "r");
	char *line = NULL, dir[PATH_MAX], *slash, *save;
	size_t lcap = 0, lineno = 0;
	int rc = 0;

	if (!f)
		return FAIL("cannot open '%s': %s", list, strerror(errno));
	snprintf(dir, sizeof dir, "%s", list);
	if ((slash = strrchr(dir, '/')))
		*slash = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	while (rc == 0 && getline(&line, &lcap, f) >= 0) {
		char *tok[3], *h = strchr(line, '#'), path[2 * PATH_MAX];
		int nt = 0, cls;
		lineno++;
		if (h)
			*h = '\0';
		for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt < 3 ? nt : 2] = t, nt++;
		if (nt == 0)
			continue;
		if (nt != 2 || class_of(tok[1], r, &cls) < 0) {
			rc = FAIL("'%s': line %zu: want IMAGE CLASS (an id or a name of --classes)", list,
			          lineno);
			break;
		}
		if (tok[0][0] == '/')
			snprintf(path, sizeof path, "%s", tok[0]);
		else
			snprintf(path, sizeof path, "%s/%s", dir, tok[0]);
		if (add_ref(r, path, cls) < 0)
			rc = FAIL("out of memory");
	}
	if (rc == 0 && r->n == 0)
		rc = FAIL("'%s': no chips listed", list);
	free(line);
	fclose(f);
	return rc;
}

/* Splits a CSV line in place into up to cap fields (quotes as RFC 4180
 * within a line); returns the number of fields or -1. */
static int csv_split(char *s, char **field, int cap)
{
	int n = 0;

	s[strcspn(s, "\r\n")] = '\0';
	for (;;) {
		char *w = s;
		if (n == cap)
			return -1;
		field[n++] = s;
		if (*s == '"') {
			for (s++;; s++) {
				if (!*s)
					return -1;
				if (*s == '"' && s[1] == '"')
					*w++ = *s++;
				else if (*s == '"')
					break;
				else
					*w++ = *s;
			}
			s++;
			*w = '\0';
			if (*s && *s != ',')
				return -1;
		} else {
			s += strcspn(s, ",");
		}
		if (!*s)
			return n;
		*s++ = '\0';
	}
}

int cdp_evaluate_is_csv(const char *path)
{
	FILE *f = fopen(path, "r");
	char head[16] = "";
	int yes;

	if (!f)
		return 0;
	yes = fgets(head, sizeof head, f) && strncmp(head, "path,class", 10) == 0;
	fclose(f);
	return yes;
}

/* v with 6 (JSON) or 4 decimals into buf[16]; NaN as null or nan */
static const char *fmt(double v, int json, char *buf)
{
	if (isnan(v))
		return json ? "null" : "nan";
	snprintf(buf, 16, json ? "%.6f" : "%.4f", v);
	return buf;
}

static const char *name_of(const refs *r, int c, char *buf, size_t cap)
{
	if (c < r->nnames)
		return r->names[c];
	snprintf(buf, cap, "%d", c);
	return buf;
}

static void report(FILE *f, const refs *r, const uint64_t *conf, int k, size_t scored,
                   size_t unpred, int json)
{
	char b[16], b2[16], b3[16];

	if (json) {
		fprintf(f, "{\"classes\":%d,\"names\":[", k);
		for (int c = 0; c < k; c++) {
			fprintf(f, "%s\"", c ? "," : "");
			for (const char *s = name_of(r, c, b, sizeof b); *s; s++)
				fprintf(f, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
			fputc('"', f);
		}
		fprintf(f, "],\"chips\":%zu,\"unpredicted\":%zu,\"confusion\":[", scored, unpred);
		/* [[row 0], [row 1], ...], cell by cell */
		for (size_t x = 0; x < (size_t)k * k; x++)
			fprintf(f, "%s%llu%s", x == 0 ? "[" : x % k == 0 ? ",[" : ",",
			        (unsigned long long)conf[x], x % k == (size_t)k - 1 ? "]" : "");
		fputs("],\"per_class\":[", f);
	} else {
		fprintf(f, "chips: %zu scored, %zu in the reference not predicted\n", scored, unpred);
		fputs("confusion (rows: reference, columns: prediction)\n            ", f);
		for (int j = 0; j < k; j++)
			fprintf(f, " %11.11s", name_of(r, j, b, sizeof b));
		/* the matrix, cell by cell, each row led by its class */
		for (size_t x = 0; x < (size_t)k * k; x++) {
			if (x % k == 0)
				fprintf(f, "\n%-12.12s", name_of(r, (int)(x / k), b, sizeof b));
			fprintf(f, " %11llu", (unsigned long long)conf[x]);
		}
		fputs("\nclass        precision   recall       f1    support\n", f);
	}
	for (int c = 0; c < k; c++) {
		cdp_prf m;
		char pr[16], re[16], f1[16];
		cdp_metrics_prf(conf, k, c, &m);
		/* the support, the reference's count of c, is TP + FN */
		if (json)
			fprintf(f, "%s{\"class\":%d,\"precision\":%s,\"recall\":%s,\"f1\":%s,"
			        "\"support\":%llu}", c ? "," : "", c, fmt(m.precision, 1, pr),
			        fmt(m.recall, 1, re), fmt(m.f1, 1, f1), (unsigned long long)(m.tp + m.fn));
		else
			fprintf(f, "%-12.12s %10s %8s %8s %10llu\n", name_of(r, c, b, sizeof b),
			        fmt(m.precision, 0, pr), fmt(m.recall, 0, re), fmt(m.f1, 0, f1),
			        (unsigned long long)(m.tp + m.fn));
	}
	if (json)
		fprintf(f, "],\"accuracy\":%s,\"macro_f1\":%s,\"kappa\":%s}\n",
		        fmt(cdp_metrics_accuracy(conf, k), 1, b), fmt(cdp_metrics_macro_f1(conf, k), 1, b2),
		        fmt(cdp_metrics_kappa(conf, k), 1, b3));
	else
		fprintf(f, "accuracy %.4f\nmacro f1 %.4f\nkappa %.4f\n", cdp_metrics_accuracy(conf, k),
		        cdp_metrics_macro_f1(conf, k), cdp_metrics_kappa(conf, k));
}

/* Scores the CSV's rows against r (sorted by path) into conf (k x k). */
static int score(const cdp_evaluate_opts *o, refs *r, uint64_t *conf, int k, size_t *scored,
                 char *err, size_t cap)
{
	FILE *f = fopen(o->prediction, "r");
	char *line = NULL, *field[MAXK + 2];
	size_t lcap = 0, lineno = 0;
	int rc = 0;

	if (!f)
		return FAIL("cannot open '%s': %s", o->prediction, strerror(errno));
	*scored = 0;
	while (rc == 0 && getline(&line, &lcap, f) >= 0) {
		int n = csv_split(line, field, MAXK + 2), cls;
		ref key, *hit;
		if (++lineno == 1 || (n == 1 && !*field[0]))
			continue;
		if (n < 2 || cdp_parse_int(field[1], 0, k - 1, &cls) != 0) {
			rc = FAIL("'%s': line %zu: want path,class with a class 0 to %d", o->prediction,
			          lineno, k - 1);
			break;
		}
		if (!(key.path = resolve(field[0]))) {
			rc = FAIL("out of memory");
			break;
		}
		hit = bsearch(&key, r->v, r->n, sizeof *r->v, cmp_ref);
		free(key.path);
		if (!hit)
			rc = FAIL("'%s': line %zu: '%s' is not a chip of '%s'", o->prediction, lineno,
			          field[0], o->reference);
		else if (hit->seen)
			rc = FAIL("'%s': line %zu: '%s' is scored twice", o->prediction, lineno, field[0]);
		else if (hit->cls >= k)
			rc = FAIL("'%s': '%s' is of class %d, the CSV has classes 0 to %d", o->reference,
			          hit->path, hit->cls, k - 1);
		if (rc)
			break;
		hit->seen = 1;
		conf[(size_t)hit->cls * k + cls]++;
		(*scored)++;
	}
	free(line);
	fclose(f);
	return rc;
}

int cdp_evaluate_csv_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap)
{
	refs r = { 0 };
	uint64_t *conf = NULL;
	size_t scored = 0, unpred = 0;
	struct stat st;
	char head[4096] = "", *field[MAXK + 2];
	FILE *f;
	int k, rc = -1;

	for (int i = 0; i < o->nnames; i++)
		if (!(r.names[r.nnames++] = strdup(o->names[i]))) {
			(void)FAIL("out of memory");
			goto out;
		}
	/* K: the CSV's probability columns, or --classes */
	if (!(f = fopen(o->prediction, "r"))) {
		(void)FAIL("cannot open '%s': %s", o->prediction, strerror(errno));
		goto out;
	}
	if (!fgets(head, sizeof head, f))
		head[0] = '\0';
	fclose(f);
	k = csv_split(head, field, MAXK + 2) - 2;
	if (o->classes)
		k = o->classes;
	if (k < 2) {
		(void)FAIL("'%s': a header path,class,p0,p1,... of 2 or more classes, or --classes",
		     o->prediction);
		goto out;
	}
	if (stat(o->reference, &st) != 0) {
		(void)FAIL("cannot open '%s': %s", o->reference, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode) && o->nnames) {
		(void)FAIL("--classes names: the folders of '%s' name the classes", o->reference);
		goto out;
	}
	if ((S_ISDIR(st.st_mode) ? read_folders(o->reference, &r, err, cap)
	                         : read_list(o->reference, &r, err, cap)) < 0)
		goto out;
	qsort(r.v, r.n, sizeof *r.v, cmp_ref);
	for (size_t i = 1; i < r.n; i++)
		if (strcmp(r.v[i - 1].path, r.v[i].path) == 0) {
			(void)FAIL("'%s': '%s' is listed twice", o->reference, r.v[i].path);
			goto out;
		}
	if (!(conf = calloc((size_t)k * k, sizeof *conf))) {
		(void)FAIL("out of memory");
		goto out;
	}
	if (score(o, &r, conf, k, &scored, err, cap) < 0)
		goto out;
	if (scored == 0) {
		(void)FAIL("'%s': no chips", o->prediction);
		goto out;
	}
	for (size_t i = 0; i < r.n; i++)
		unpred += !r.v[i].seen;
	report(out, &r, conf, k, scored, unpred, o->json);
	if (fflush(out) != 0 || ferror(out)) {
		(void)FAIL("cannot write the report: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(conf);
	refs_free(&r);
	return rc;
}
