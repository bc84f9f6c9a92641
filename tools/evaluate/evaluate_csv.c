/* evaluate_csv.c: cdp_evaluate_csv_run, the scores of a classifier's CSV
 * (cdp-predict's "path,class,p_NAME0,...": the checkpoint's class names,
 * the class column a name; or an older "path,class,p0,..." with ids) against
 * the chips' true classes: a list file of cdp-lmdbpack --list ("IMAGE
 * CLASS" lines, CLASS an id or a class name; paths relative to the list's
 * folder) or a folder of class folders (DIR/CLASS/IMAGE.tif). Report: the
 * confusion matrix (rows reference, columns prediction), per-class
 * precision, recall, F1 and support, overall accuracy, macro F1 and Cohen's
 * kappa (cdp_metrics.h), as text or one JSON object.
 *
 * Class k is the CSV's k-th probability column, which is the checkpoint's
 * class k: folders and list classes are matched to it by name, so folders
 * that lack a class (or hold them in another order) cannot shift the ids,
 * and a reference class the CSV does not name is an error. An older CSV
 * without names takes them from --classes, or else is matched by position
 * against exactly as many folders as it has classes.
 *
 * The CSV is read as RFC 4180 writes it (a quoted field may hold commas,
 * quotes and line breaks); a UTF-8 byte order mark before it or a list is
 * skipped. A CSV row and a reference chip are the same chip when their
 * paths name the same file (realpath; a path that does not resolve is
 * compared as written). A CSV row without a reference chip is an error;
 * reference chips without a row are counted as not predicted and left out
 * of the scores.
 *
 * A multi-label CSV ("path,classes,p_NAME0,...": the classes column the
 * names the model predicts, joined by '|') is scored against a list of
 * "IMAGE CLASS[,CLASS...]" or "IMAGE -" lines (cdp-lmdbpack --multi-label's;
 * names of the CSV's header, or ids) or a reference CSV of the same form
 * (its classes column the truth): per-class precision, recall, F1, average
 * precision (of the p_ columns) and support, micro precision, recall and
 * F1, macro F1 and mAP (cdp_mlabel, cdp_metrics.h).
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

#include "cdp_file.h"
#include "cdp_metrics.h"
#include "cdp_num.h"

#define MAXK CDP_EVALUATE_MAX_CLASSES
#define FAIL(...) (snprintf(err, cap, __VA_ARGS__), -1)

typedef struct ref {
	char *path;               /* resolved */
	int cls;                  /* the CSV's class (its column) */
	uint8_t *set;             /* multi-label: (K) 1 where the chip holds class k */
	int seen;                 /* a CSV row named it */
} ref;

typedef struct refs {
	ref *v;
	size_t n, cap;
} refs;

/* The CSV's classes, in the order of its probability columns, which is
 * the checkpoint's: class k is column k whatever the reference holds. */
typedef struct classes {
	int k;
	char *name[MAXK];         /* [k] names, or all NULL: ids only */
	int named;
	int old;                  /* header "p0,p1,...": the class column holds ids */
	int multi;                /* header "path,classes,...": multi-label */
	char *folder[MAXK];       /* an unnamed CSV scored against folders: their names */
	int nfolder;
} classes;

static void refs_free(refs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].path);
		free(r->v[i].set);
	}
	free(r->v);
}

static void classes_free(classes *c)
{
	for (int i = 0; i < MAXK; i++) {
		free(c->name[i]);
		free(c->folder[i]);
	}
}

/* The column of class `name`, or -1. */
static int class_by_name(const classes *c, const char *name)
{
	for (int i = 0; c->named && i < c->k; i++)
		if (strcmp(name, c->name[i]) == 0)
			return i;
	return -1;
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
	r->v[r->n].set = NULL;
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
	if (*n > 0)   /* an empty folder: no array (qsort's NULL) */
		qsort(*out, *n, sizeof **out, cmp_str);
	return 0;
}

/* The chips of DIR/CLASS/ folders. A folder is the class of its name in
 * the CSV's names; against a CSV without names (an older cdp-predict's)
 * the folders must be as many as its classes, numbered in byte order as
 * cdp-lmdbpack --folders numbers them: a missing folder would shift every
 * class after it. */
static int read_folders(const char *dir, classes *k, refs *r, const char *csv, char *err,
                        size_t cap)
{
	char **cls = NULL, **files = NULL, path[PATH_MAX + 256];
	size_t ncls = 0, nfiles = 0;
	int rc, id = 0;

	if ((rc = entries(dir, 1, &cls, &ncls, err, cap)) < 0)
		return -1;
	if (ncls == 0 || ncls > MAXK)
		rc = FAIL("'%s': %zu class folders, want 1 to %d", dir, ncls, MAXK);
	else if (!k->named && ncls != (size_t)k->k)
		rc = FAIL("'%s' does not name its classes and '%s' has %zu class folders for its %d "
		          "classes: give --classes with their names in class order", csv, dir, ncls,
		          k->k);
	for (size_t c = 0; c < ncls && rc == 0; c++) {
		if (k->named && (id = class_by_name(k, cls[c])) < 0) {
			rc = FAIL("'%s': class folder '%s' is not a class of '%s'", dir, cls[c], csv);
			break;
		}
		if (!k->named)
			id = (int)c;
		snprintf(path, sizeof path, "%s/%s", dir, cls[c]);
		if ((rc = entries(path, 0, &files, &nfiles, err, cap)) < 0)
			break;
		for (size_t i = 0; i < nfiles && rc == 0; i++) {
			char file[2 * PATH_MAX + 512];
			snprintf(file, sizeof file, "%s/%s", path, files[i]);
			if (add_ref(r, file, id) < 0)
				rc = FAIL("out of memory");
		}
		for (size_t i = 0; i < nfiles; i++)
			free(files[i]);
		free(files);
	}
	for (size_t c = 0; c < ncls; c++) {
		if (rc == 0 && !k->named)
			k->folder[k->nfolder++] = cls[c];
		else
			free(cls[c]);
	}
	free(cls);
	return rc;
}

/* The class of a list line's field: a name of the CSV's classes, or an
 * id (the checkpoint's, which is the CSV's column). */
static int class_of(const char *tok, const classes *k, int *cls)
{
	if ((*cls = class_by_name(k, tok)) >= 0)
		return 0;
	return cdp_parse_int(tok, 0, k->k - 1, cls) == 0 ? 0 : -1;
}

static int read_list(const char *list, const classes *k, refs *r, const char *csv, char *err,
                     size_t cap)
{
	FILE *f = fopen(list, "r");
	char *line = NULL, dir[PATH_MAX], *slash, *save;
	size_t lcap = 0, lineno = 0;
	int rc = 0;

	if (!f)
		return FAIL("cannot open '%s': %s", list, strerror(errno));
	cdp_file_skip_bom(f);
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
		if (nt != 2) {
			rc = FAIL("'%s': line %zu: want IMAGE CLASS", list, lineno);
			break;
		}
		if (class_of(tok[1], k, &cls) < 0) {
			rc = FAIL("'%s': line %zu: class '%s' is not a class of '%s' (%s 0 to %d%s)",
			          list, lineno, tok[1], csv, k->named ? "a name of its header or an id" :
			          "an id", k->k - 1, k->named ? "" : ", or a name of --classes");
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

/* A CSV record being read: its bytes, each field NUL-terminated. */
typedef struct record {
	char *buf;
	size_t len, cap;
	size_t off[MAXK + 2];     /* start of each field in buf */
	int n;
} record;

static int rec_put(record *r, int c)
{
	if (r->len == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 4096;
		char *nb = realloc(r->buf, nc);
		if (!nb)
			return -1;
		r->buf = nb;
		r->cap = nc;
	}
	r->buf[r->len++] = (char)c;
	return 0;
}

/* Reads the next record of f into r, as RFC 4180 writes them: a quoted
 * field may hold commas, doubled quotes and line breaks (so a record may
 * span lines; *lineno counts them). Returns the number of fields, 0 at the
 * end of the file, -1 for a malformed record, -2 for more than MAXK + 2
 * fields, -3 out of memory. field[i] points into r. */
static int csv_record(FILE *f, record *r, char **field, size_t *lineno)
{
	int c = getc(f), quoted, n;

	if (c == EOF)
		return 0;
	r->len = 0;
	r->n = 0;
	for (;;) {
		if (r->n == MAXK + 2)
			return -2;
		r->off[r->n++] = r->len;
		if ((quoted = c == '"'))
			c = getc(f);
		for (;; c = getc(f)) {
			if (quoted && c == EOF)
				return -1;
			if (quoted && c == '"') {
				if ((c = getc(f)) != '"')
					break;
			} else if (!quoted && (c == ',' || c == '\n' || c == EOF)) {
				break;
			}
			if (c == '\n')
				(*lineno)++;
			if (rec_put(r, c) < 0)
				return -3;
		}
		/* an unquoted field's CR is the CRLF's */
		if (!quoted && c != ',' && r->len > r->off[r->n - 1] && r->buf[r->len - 1] == '\r')
			r->len--;
		if (quoted && c == '\r')
			c = getc(f);
		if (rec_put(r, '\0') < 0)
			return -3;
		if (c == ',') {
			c = getc(f);
			continue;
		}
		if (c == '\n' || c == EOF)
			break;
		return -1;           /* text after a closing quote */
	}
	(*lineno)++;
	n = r->n;
	for (int i = 0; i < n; i++)
		field[i] = r->buf + r->off[i];
	return n;
}

int cdp_evaluate_is_csv(const char *path)
{
	FILE *f = fopen(path, "r");
	char head[16] = "";
	int yes;

	if (!f)
		return 0;
	cdp_file_skip_bom(f);
	yes = fgets(head, sizeof head, f) && strncmp(head, "path,class", 10) == 0;
	fclose(f);
	return yes;
}

/* 1 when the header's probability columns are "p0,p1,..." (cdp-predict
 * before class names: the class column holds ids) */
static int old_header(char **field, int k)
{
	char want[16];

	for (int c = 0; c < k; c++) {
		snprintf(want, sizeof want, "p%d", c);
		if (strcmp(field[c], want) != 0)
			return 0;
	}
	return 1;
}

/* The classes from the header (n fields: path, class, then one column per
 * class), checked against --classes. */
static int read_header(const cdp_evaluate_opts *o, char **field, int n, classes *k, char *err,
                       size_t cap)
{
	const char *csv = o->prediction;

	if (n == -2)
		return FAIL("'%s': line 1: more than %d classes", csv, MAXK);
	k->multi = n >= 3 && strcmp(field[1], "classes") == 0;
	if (n < 3 || strcmp(field[0], "path") != 0 || (!k->multi && strcmp(field[1], "class") != 0))
		return FAIL("'%s': line 1: want the header path,class,p_NAME,... or, multi-label, "
		            "path,classes,p_NAME,... (one column per class)", csv);
	k->k = n - 2;
	k->old = !k->multi && old_header(field + 2, k->k);
	for (int c = 0; !k->old && c < k->k; c++) {
		if (strncmp(field[2 + c], "p_", 2) != 0 || !field[2 + c][2])
			return FAIL("'%s': line 1: column %d is '%s', want p_NAME", csv, 3 + c,
			            field[2 + c]);
		if (!(k->name[c] = strdup(field[2 + c] + 2)))
			return FAIL("out of memory");
		k->named = 1;
		for (int j = 0; j < c; j++)
			if (strcmp(k->name[j], k->name[c]) == 0)
				return FAIL("'%s': line 1: class '%s' named twice", csv, k->name[c]);
	}
	/* an older CSV's probability columns are its classes as well as a
	 * named one's: another count would score its class ids by a matrix
	 * of another size */
	if (o->classes && o->classes != k->k)
		return FAIL("--classes %d: '%s' has %d classes", o->classes, csv, k->k);
	if (k->multi && o->nnames && o->nnames != k->k)
		return FAIL("--classes: %d names for the %d classes of '%s'", o->nnames, k->k, csv);
	if (k->multi && k->k < 1)
		return FAIL("'%s': a header path,classes,p_NAME,... of 1 or more classes", csv);
	if (!k->multi && k->k < 2)
		return FAIL("'%s': a header path,class,p_NAME,... of 2 or more classes, or --classes",
		            csv);
	if (o->nnames && k->named) {
		for (int c = 0; c < o->nnames && c < k->k; c++)
			if (o->nnames != k->k || strcmp(o->names[c], k->name[c]) != 0)
				return FAIL("--classes: '%s' names its classes in its header (%s%s)", csv,
				            k->name[0], k->k > 1 ? ", ..." : "");
		return 0;
	}
	if (o->nnames && o->nnames != k->k)
		return FAIL("--classes: %d names for the %d classes of '%s'", o->nnames, k->k, csv);
	for (int c = 0; c < o->nnames; c++) {
		if (!(k->name[c] = strdup(o->names[c])))
			return FAIL("out of memory");
		k->named = 1;
		for (int j = 0; j < c; j++)
			if (strcmp(k->name[j], k->name[c]) == 0)
				return FAIL("--classes: class '%s' named twice", k->name[c]);
	}
	return 0;
}

/* v with 6 (JSON) or 4 decimals into buf[16]; NaN as null or nan */
static const char *fmt(double v, int json, char *buf)
{
	if (isnan(v))
		return json ? "null" : "nan";
	snprintf(buf, 16, json ? "%.6f" : "%.4f", v);
	/* a kappa of -0 or -0.00001 is no disagreement to report: "0.0000",
	 * not "-0.0000" */
	if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1))
		memmove(buf, buf + 1, strlen(buf));
	return buf;
}

/* The class's name: the CSV's, else its folder's, else its id. */
static const char *name_of(const classes *r, int c, char *buf, size_t cap)
{
	if (r->named)
		return r->name[c];
	if (c < r->nfolder)
		return r->folder[c];
	snprintf(buf, cap, "%d", c);
	return buf;
}

/* the k class names as a JSON array */
static void json_names(FILE *f, const classes *r, int k)
{
	char b[16];

	fputc('[', f);
	for (int c = 0; c < k; c++) {
		fprintf(f, "%s\"", c ? "," : "");
		for (const char *s = name_of(r, c, b, sizeof b); *s; s++)
			if ((unsigned char)*s < 0x20)   /* a folder's name may hold any byte */
				fprintf(f, "\\u%04x", (unsigned char)*s);
			else
				fprintf(f, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
		fputc('"', f);
	}
	fputc(']', f);
}

static void report(FILE *f, const classes *r, const uint64_t *conf, int k, size_t scored,
                   size_t unpred, int json)
{
	char b[16], b2[16], b3[16];

	if (json) {
		fprintf(f, "{\"classes\":%d,\"names\":", k);
		json_names(f, r, k);
		fprintf(f, ",\"chips\":%zu,\"unpredicted\":%zu,\"confusion\":[", scored, unpred);
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
		fprintf(f, "accuracy %s\nmacro f1 %s\nkappa %s\n", fmt(cdp_metrics_accuracy(conf, k), 0, b),
		        fmt(cdp_metrics_macro_f1(conf, k), 0, b2), fmt(cdp_metrics_kappa(conf, k), 0, b3));
}

/* s (a path of the CSV, changed in place) with its control characters
 * shown as '?', so that a message naming it stays one line. */
static const char *one_line(char *s)
{
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return s;
}

/* Scores the rows of f, after its header, against r (sorted by path)
 * into conf (k x k). */
static int score(const cdp_evaluate_opts *o, FILE *f, const classes *k, refs *r, uint64_t *conf,
                 size_t *scored, char *err, size_t cap)
{
	record rec = { 0 };
	char *field[MAXK + 2];
	size_t lineno = 1, first;
	int n, rc = 0, K = k->k;

	*scored = 0;
	while (rc == 0 && (first = lineno + 1, n = csv_record(f, &rec, field, &lineno)) != 0) {
		ref key, *hit;
		int cls = -1;
		if (n == -3) {
			rc = FAIL("out of memory");
			break;
		}
		if (n < 0) {
			rc = FAIL("'%s': line %zu: %s", o->prediction, first, n == -1 ?
			          "not a CSV record (a quote not closed, or text after a closing quote)" :
			          "too many fields");
			break;
		}
		if (n == 1 && !*field[0])
			continue;
		if (n >= 2)
			cls = k->old ? (cdp_parse_int(field[1], 0, K - 1, &cls) == 0 ? cls : -1) :
			      class_by_name(k, field[1]);
		if (cls < 0 && k->old) {
			rc = FAIL("'%s': line %zu: want path,class with a class 0 to %d", o->prediction,
			          first, K - 1);
			break;
		}
		if (cls < 0) {
			rc = FAIL("'%s': line %zu: want path,class with a class of its header",
			          o->prediction, first);
			break;
		}
		if (!(key.path = resolve(field[0]))) {
			rc = FAIL("out of memory");
			break;
		}
		hit = bsearch(&key, r->v, r->n, sizeof *r->v, cmp_ref);
		free(key.path);
		if (!hit)
			rc = FAIL("'%s': line %zu: '%s' is not a chip of '%s'", o->prediction, first,
			          one_line(field[0]), o->reference);
		else if (hit->seen)
			rc = FAIL("'%s': line %zu: '%s' is scored twice", o->prediction, first,
			          one_line(field[0]));
		if (rc)
			break;
		hit->seen = 1;
		conf[(size_t)hit->cls * K + cls]++;
		(*scored)++;
	}
	if (rc == 0 && ferror(f))
		rc = FAIL("cannot read '%s': %s", o->prediction, strerror(errno));
	free(rec.buf);
	return rc;
}

/* ---- multi-label -------------------------------------------------------- */

/* s, names or ids of k's classes joined by sep ("" none), into set (K);
 * -1 with *bad the name that is not a class, or is there twice (*dup). */
static int parse_set(char *s, char sep, const classes *k, uint8_t *set, const char **bad,
                     int *dup)
{
	memset(set, 0, (size_t)k->k);
	*dup = 0;
	if (!*s)
		return 0;
	for (char *t = s, *e; t; t = e) {
		int c;
		if ((e = strchr(t, sep)))
			*e++ = '\0';
		*bad = t;
		if (class_of(t, k, &c) < 0)
			return -1;
		if (set[c]) {
			*dup = 1;
			return -1;
		}
		set[c] = 1;
	}
	return 0;
}

/* A reference chip of the set s (sep-joined) at path; what names the line. */
static int add_mref(refs *r, const classes *k, const char *path, char *s, char sep,
                    const char *what, char *err, size_t cap)
{
	const char *bad = "";
	uint8_t *set = malloc((size_t)k->k);
	int dup;

	if (!set)
		return FAIL("out of memory");
	if (parse_set(s, sep, k, set, &bad, &dup) < 0) {
		free(set);
		return dup ? FAIL("%s: class '%s' is listed twice", what, bad)
		           : FAIL("%s: '%s' is not a class (a name of the CSV's header or an id 0 to "
		                  "%d)", what, bad, k->k - 1);
	}
	if (add_ref(r, path, -1) < 0) {
		free(set);
		return FAIL("out of memory");
	}
	r->v[r->n - 1].set = set;
	return 0;
}

/* The reference of a multi-label CSV: "IMAGE CLASS[,CLASS...]" or "IMAGE -"
 * lines, or a CSV "path,classes,..." whose classes column is the truth. */
static int read_mref(const char *rpath, const classes *k, refs *r, char *err, size_t cap)
{
	FILE *f = fopen(rpath, "r");
	char *line = NULL, dir[PATH_MAX], *slash, *save, what[PATH_MAX + 64];
	size_t lcap = 0, lineno = 0;
	int rc = 0, n;

	if (!f)
		return FAIL("cannot open '%s': %s", rpath, strerror(errno));
	cdp_file_skip_bom(f);
	if (cdp_evaluate_is_csv(rpath)) {
		record rec = { 0 };
		char *field[MAXK + 2];
		while (rc == 0 && (n = csv_record(f, &rec, field, &lineno)) != 0) {
			snprintf(what, sizeof what, "'%s': line %zu", rpath, lineno);
			if (n == -3)
				rc = FAIL("out of memory");
			else if (n < 2 || (lineno == 1 && strcmp(field[1], "classes") != 0))
				rc = FAIL("%s: want path,classes,... (a multi-label CSV)", what);
			else if (lineno > 1)
				rc = add_mref(r, k, field[0], field[1], '|', what, err, cap);
		}
		free(rec.buf);
	} else {
		snprintf(dir, sizeof dir, "%s", rpath);
		if ((slash = strrchr(dir, '/')))
			*slash = '\0';
		else
			snprintf(dir, sizeof dir, ".");
		while (rc == 0 && getline(&line, &lcap, f) >= 0) {
			char *tok[3], *h = strchr(line, '#'), path[2 * PATH_MAX];
			int nt = 0;
			lineno++;
			if (h)
				*h = '\0';
			for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
				tok[nt < 3 ? nt : 2] = t, nt++;
			if (nt == 0)
				continue;
			snprintf(what, sizeof what, "'%s': line %zu", rpath, lineno);
			if (nt != 2) {
				rc = FAIL("%s: want IMAGE CLASS[,CLASS...] or IMAGE -", what);
				break;
			}
			snprintf(path, sizeof path, "%s%s%s", tok[0][0] == '/' ? "" : dir,
			         tok[0][0] == '/' ? "" : "/", tok[0]);
			rc = add_mref(r, k, path, strcmp(tok[1], "-") ? tok[1] : "", ',', what, err, cap);
		}
	}
	if (rc == 0 && ferror(f))
		rc = FAIL("cannot read '%s': %s", rpath, strerror(errno));
	if (rc == 0 && r->n == 0)
		rc = FAIL("'%s': no chips listed", rpath);
	free(line);
	fclose(f);
	return rc;
}

/* n rows of K: truth and prediction bytes, scores */
typedef struct mrows {
	uint8_t *truth, *pred;
	double *score;
	size_t n, cap;
} mrows;

static int mrows_grow(mrows *m, int K)
{
	size_t nc = m->cap ? 2 * m->cap : 256;
	uint8_t *t = realloc(m->truth, nc * K), *p;
	double *s;

	if (!t)
		return -1;
	m->truth = t;
	if (!(p = realloc(m->pred, nc * K)))
		return -1;
	m->pred = p;
	if (!(s = realloc(m->score, nc * K * sizeof *s)))
		return -1;
	m->score = s;
	m->cap = nc;
	return 0;
}

/* The rows of f after its header against r (sorted by path) into m. */
static int score_multi(const cdp_evaluate_opts *o, FILE *f, const classes *k, refs *r,
                       mrows *m, char *err, size_t cap)
{
	record rec = { 0 };
	char *field[MAXK + 2], what[PATH_MAX + 64];
	size_t lineno = 1, first;
	int n, rc = 0, K = k->k;

	while (rc == 0 && (first = lineno + 1, n = csv_record(f, &rec, field, &lineno)) != 0) {
		ref key, *hit;
		const char *bad = "";
		int dup;
		if (n == -3) {
			rc = FAIL("out of memory");
			break;
		}
		if (n == 1 && !*field[0])
			continue;
		if (n != K + 2) {
			rc = FAIL("'%s': line %zu: want path,classes and %d probabilities", o->prediction,
			          first, K);
			break;
		}
		if (m->n == m->cap && mrows_grow(m, K) < 0) {
			rc = FAIL("out of memory");
			break;
		}
		snprintf(what, sizeof what, "'%s': line %zu", o->prediction, first);
		if (parse_set(field[1], '|', k, m->pred + m->n * K, &bad, &dup) < 0) {
			rc = dup ? FAIL("%s: class '%s' is listed twice", what, bad)
			         : FAIL("%s: '%s' is not a class of its header", what, bad);
			break;
		}
		for (int c = 0; c < K && rc == 0; c++)
			if (cdp_parse_double(field[2 + c], 0, 1, &m->score[m->n * K + c]) != 0)
				rc = FAIL("%s: probability '%s' of class %d is not a number in 0..1", what,
				          field[2 + c], c);
		if (rc)
			break;
		if (!(key.path = resolve(field[0]))) {
			rc = FAIL("out of memory");
			break;
		}
		hit = bsearch(&key, r->v, r->n, sizeof *r->v, cmp_ref);
		free(key.path);
		if (!hit)
			rc = FAIL("%s: '%s' is not a chip of '%s'", what, one_line(field[0]), o->reference);
		else if (hit->seen)
			rc = FAIL("%s: '%s' is scored twice", what, one_line(field[0]));
		if (rc)
			break;
		hit->seen = 1;
		memcpy(m->truth + m->n * K, hit->set, (size_t)K);
		m->n++;
	}
	if (rc == 0 && ferror(f))
		rc = FAIL("cannot read '%s': %s", o->prediction, strerror(errno));
	free(rec.buf);
	return rc;
}

static void report_multi(FILE *f, const classes *r, const cdp_mlabel *m, size_t unpred, int json)
{
	char b[16], b2[16], b3[16], b4[16], b5[16];
	int k = m->k;

	if (json) {
		fprintf(f, "{\"multi_label\":true,\"classes\":%d,\"names\":", k);
		json_names(f, r, k);
		fprintf(f, ",\"chips\":%zu,\"unpredicted\":%zu,\"per_class\":[", m->n, unpred);
	} else {
		fprintf(f, "chips: %zu scored, %zu in the reference not predicted\n", m->n, unpred);
		fputs("class        precision   recall       f1       ap    support\n", f);
	}
	for (int c = 0; c < k; c++) {
		cdp_prf p;
		char pr[16], re[16], f1[16], ap[16];
		cdp_mlabel_prf(m, c, &p);
		if (json)
			fprintf(f, "%s{\"class\":%d,\"precision\":%s,\"recall\":%s,\"f1\":%s,\"ap\":%s,"
			        "\"support\":%llu}", c ? "," : "", c, fmt(p.precision, 1, pr),
			        fmt(p.recall, 1, re), fmt(p.f1, 1, f1), fmt(m->ap[c], 1, ap),
			        (unsigned long long)m->pos[c]);
		else
			fprintf(f, "%-12.12s %10s %8s %8s %8s %10llu\n", name_of(r, c, b, sizeof b),
			        fmt(p.precision, 0, pr), fmt(p.recall, 0, re), fmt(p.f1, 0, f1),
			        fmt(m->ap[c], 0, ap), (unsigned long long)m->pos[c]);
	}
	if (json)
		fprintf(f, "],\"micro_precision\":%s,\"micro_recall\":%s,\"micro_f1\":%s,"
		        "\"macro_f1\":%s,\"map\":%s}\n", fmt(m->micro_p, 1, b), fmt(m->micro_r, 1, b2),
		        fmt(m->micro_f1, 1, b3), fmt(m->macro_f1, 1, b4), fmt(m->map, 1, b5));
	else
		fprintf(f, "micro precision %s\nmicro recall %s\nmicro f1 %s\nmacro f1 %s\nmap %s\n",
		        fmt(m->micro_p, 0, b), fmt(m->micro_r, 0, b2), fmt(m->micro_f1, 0, b3),
		        fmt(m->macro_f1, 0, b4), fmt(m->map, 0, b5));
}

/* The multi-label CSV f (header read into k) against o->reference. */
static int multi_run(const cdp_evaluate_opts *o, FILE *f, const classes *k, FILE *out,
                     char *err, size_t cap)
{
	refs r = { 0 };
	mrows m = { 0 };
	cdp_mlabel ml = { 0 };
	struct stat st;
	size_t unpred = 0;
	int rc = -1;

	if (stat(o->reference, &st) == 0 && S_ISDIR(st.st_mode)) {
		(void)FAIL("'%s' is a multi-label CSV: score it against a list of IMAGE "
		           "CLASS[,CLASS...] lines or a reference CSV, not the folders '%s' (a chip "
		           "in a class folder has one class)", o->prediction, o->reference);
		goto out;
	}
	if (read_mref(o->reference, k, &r, err, cap) < 0)
		goto out;
	qsort(r.v, r.n, sizeof *r.v, cmp_ref);
	for (size_t i = 1; i < r.n; i++)
		if (strcmp(r.v[i - 1].path, r.v[i].path) == 0) {
			(void)FAIL("'%s': '%s' is listed twice", o->reference, r.v[i].path);
			goto out;
		}
	if (score_multi(o, f, k, &r, &m, err, cap) < 0)
		goto out;
	if (m.n == 0) {
		(void)FAIL("'%s': no chips", o->prediction);
		goto out;
	}
	if (cdp_mlabel_init(&ml, k->k) != 0 ||
	    cdp_mlabel_compute(&ml, m.n, m.truth, m.pred, m.score) != 0) {
		(void)FAIL("out of memory");
		goto out;
	}
	for (size_t i = 0; i < r.n; i++)
		unpred += !r.v[i].seen;
	report_multi(out, k, &ml, unpred, o->json);
	if (fflush(out) != 0 || ferror(out)) {
		(void)FAIL("cannot write the report: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	cdp_mlabel_free(&ml);
	free(m.truth);
	free(m.pred);
	free(m.score);
	refs_free(&r);
	return rc;
}

int cdp_evaluate_csv_run(const cdp_evaluate_opts *o, FILE *out, char *err, size_t cap)
{
	refs r = { 0 };
	classes *k = calloc(1, sizeof *k);
	record head = { 0 };
	uint64_t *conf = NULL;
	size_t scored = 0, unpred = 0, lineno = 0;
	struct stat st;
	char *field[MAXK + 2];
	FILE *f = NULL;
	int n, rc = -1;

	if (!k) {
		(void)FAIL("out of memory");
		goto out;
	}
	if (!(f = fopen(o->prediction, "r"))) {
		(void)FAIL("cannot open '%s': %s", o->prediction, strerror(errno));
		goto out;
	}
	cdp_file_skip_bom(f);
	if ((n = csv_record(f, &head, field, &lineno)) == -3) {
		(void)FAIL("out of memory");
		goto out;
	}
	if (read_header(o, field, n, k, err, cap) < 0)
		goto out;
	if (k->multi) {
		rc = multi_run(o, f, k, out, err, cap);
		goto out;
	}
	if (stat(o->reference, &st) != 0) {
		(void)FAIL("cannot open '%s': %s", o->reference, strerror(errno));
		goto out;
	}
	if ((S_ISDIR(st.st_mode) ? read_folders(o->reference, k, &r, o->prediction, err, cap)
	                         : read_list(o->reference, k, &r, o->prediction, err, cap)) < 0)
		goto out;
	qsort(r.v, r.n, sizeof *r.v, cmp_ref);
	for (size_t i = 1; i < r.n; i++)
		if (strcmp(r.v[i - 1].path, r.v[i].path) == 0) {
			(void)FAIL("'%s': '%s' is listed twice", o->reference, r.v[i].path);
			goto out;
		}
	if (!(conf = calloc((size_t)k->k * k->k, sizeof *conf))) {
		(void)FAIL("out of memory");
		goto out;
	}
	if (score(o, f, k, &r, conf, &scored, err, cap) < 0)
		goto out;
	if (scored == 0) {
		(void)FAIL("'%s': no chips", o->prediction);
		goto out;
	}
	for (size_t i = 0; i < r.n; i++)
		unpred += !r.v[i].seen;
	report(out, k, conf, k->k, scored, unpred, o->json);
	if (fflush(out) != 0 || ferror(out)) {
		(void)FAIL("cannot write the report: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	free(head.buf);
	free(conf);
	refs_free(&r);
	if (k)
		classes_free(k);
	free(k);
	return rc;
}
