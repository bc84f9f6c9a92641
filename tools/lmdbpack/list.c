/* list.c: cdp-lmdbpack's --list input (pack_int.h): reads a list file of
 * "IMAGE [LABEL|CLASS]" lines and packs each image, read whole through GDAL
 * (lib/cdp_raster.h), as one record keyed by its file stem, with its mask
 * (GDAL's, and pixels where every band is nodata), its label raster or
 * scalar class, and its source description. The records then take the same
 * path as a record stream's (pack_add_source, pack_add_record in pack.c).
 * It does not tile: an image larger than a record can hold is an error.
 */
#include "pack_int.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_key.h"
#include "cdp_num.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "cdp_stream.h"

void pack_list_free(list_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].image);
		free(e[i].label);
		free(e[i].multi);
		free(e[i].key);
	}
	free(e);
}

static char *resolve(const char *dir, const char *path)
{
	size_t n = strlen(dir) + strlen(path) + 2;
	char *s = malloc(n);

	if (s && path[0] == '/')
		snprintf(s, n, "%s", path);
	else if (s)
		snprintf(s, n, "%s/%s", dir, path);
	return s;
}

static int all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* The third field: a class name (--classes), a class index, or a label. */
static int list_third(pk *p, const char *dir, const char *tok, list_entry *e)
{
	const cdp_pack_opts *o = p->o;
	int v;

	for (size_t c = 0; c < o->nclasses; c++)
		if (strcmp(tok, o->classes[c]) == 0) {
			e->cls = (long)c;
			return CDP_OK;
		}
	if (all_digits(tok)) {
		if (cdp_parse_int(tok, 0, (int)CDP_CLASS_MAX - 1, &v) ||
		    (o->nclasses && (size_t)v >= o->nclasses))
			return pack_seterr(p, CDP_ERANGE, "'%s': line %zu: class %s is out "
			                   "of range", p->in, e->line, tok);
		e->cls = v;
		return CDP_OK;
	}
	if (!(e->label = resolve(dir, tok)))
		return pack_seterr(p, CDP_ENOMEM, "out of memory");
	if (o->nclasses && access(e->label, F_OK) != 0)
		return pack_seterr(p, CDP_ESYNTAX, "'%s': line %zu: '%s' is neither a class of "
		                   "--classes nor a file", p->in, e->line, tok);
	return CDP_OK;
}

/* --multi-label's second field: "-" (no class) or CLASS[,CLASS...], each
 * a name of --classes, once, into e->multi (K bytes of 0/1). */
static int list_set(pk *p, char *tok, list_entry *e)
{
	const cdp_pack_opts *o = p->o;
	char *save, *name;

	if (!(e->multi = calloc(o->nclasses, 1)))
		return pack_seterr(p, CDP_ENOMEM, "out of memory");
	if (strcmp(tok, "-") == 0)
		return CDP_OK;
	if (!*tok || tok[0] == ',' || tok[strlen(tok) - 1] == ',' || strstr(tok, ",,"))
		return pack_seterr(p, CDP_ESYNTAX, "'%s': line %zu: '%s' is not a class set "
		                   "(CLASS[,CLASS...] or -)", p->in, e->line, tok);
	for (name = strtok_r(tok, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		size_t c = 0;
		while (c < o->nclasses && strcmp(name, o->classes[c]) != 0)
			c++;
		if (c == o->nclasses)
			return pack_seterr(p, CDP_ESYNTAX, "'%s': line %zu: '%s' is not a class of "
			                   "--classes", p->in, e->line, name);
		if (e->multi[c])
			return pack_seterr(p, CDP_ESYNTAX, "'%s': line %zu: class '%s' is listed twice",
			                   p->in, e->line, name);
		e->multi[c] = 1;
	}
	return CDP_OK;
}

/* Reads "IMAGE [LABEL|CLASS]" lines (--multi-label: "IMAGE CLASS[,CLASS...]"
 * or "IMAGE -"); '#' starts a comment. */
int pack_list_read(pk *p, list_entry **out, size_t *nout)
{
	FILE *f = fopen(p->in, "r");
	char *line = NULL, *copy = NULL, *dir, *save, *tok[3];
	size_t cap = 0, n = 0, ecap = 0, lineno = 0;
	list_entry *e = NULL;
	int rc = CDP_OK, nt;

	if (!f)
		return pack_seterr(p, errno, "cannot open '%s': %s", p->in, strerror(errno));
	cdp_file_skip_bom(f);
	if (!(copy = strdup(p->in))) {
		rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
		goto out;
	}
	dir = dirname(copy);
	while (getline(&line, &cap, f) >= 0) {
		char *hash = strchr(line, '#');
		lineno++;
		if (hash)
			*hash = '\0';
		nt = 0;
		for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt < 3 ? nt : 2] = t, nt++;
		if (nt == 0)
			continue;
		if (nt > 2 || (p->o->multi_label && nt != 2)) {
			rc = pack_seterr(p, CDP_ESYNTAX, "'%s': line %zu: expected %s, found %d "
			                 "field%s", p->in, lineno, p->o->multi_label
			                 ? "IMAGE CLASS[,CLASS...] or IMAGE -" : "IMAGE [LABEL|CLASS]",
			                 nt, nt == 1 ? "" : "s");
			goto out;
		}
		if (n == ecap) {
			list_entry *ne = realloc(e, (ecap = ecap ? ecap * 2 : 64) * sizeof *ne);
			if (!ne) {
				rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
				goto out;
			}
			e = ne;
		}
		memset(&e[n], 0, sizeof e[n]);
		e[n].cls = -1;
		e[n].line = lineno;
		if (!(e[n++].image = resolve(dir, tok[0]))) {
			rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
			goto out;
		}
		if (nt == 2 && (rc = p->o->multi_label ? list_set(p, tok[1], &e[n - 1])
		                                       : list_third(p, dir, tok[1], &e[n - 1])))
			goto out;
	}
	if (ferror(f))
		rc = pack_seterr(p, errno ? errno : EIO, "cannot read '%s': %s", p->in,
		                 strerror(errno ? errno : EIO));
	else if (n == 0)
		rc = pack_seterr(p, CDP_ESYNTAX, "'%s': no chips listed", p->in);
out:
	fclose(f);
	free(line);
	free(copy);
	if (rc) {
		pack_list_free(e, n);
		e = NULL;
		n = 0;
	}
	*out = e;
	*nout = n;
	return rc;
}

/* Clears mask pixels that are nodata by cdp-tile's rule (cdp-tile(1)):
 * each band compares with its own nodata value as GDAL's mask does; when
 * the bands share one value a pixel is nodata where every band holds it,
 * else where any band holds its own. img is (C, H, W). *one says whether
 * the bands share one value (the record's nodata then). */
static int mark_nodata(cdp_raster *r, const void *img, int dt, uint32_t bands, uint32_t w,
                       uint32_t h, uint8_t *mask, int *one, double *nd0)
{
	double *nd = calloc(bands, sizeof *nd);
	int *has = calloc(bands, sizeof *has), any_nd = 0;

	if (!nd || !has) {
		free(nd);
		free(has);
		return CDP_ENOMEM;
	}
	*one = 1;
	for (uint32_t b = 0; b < bands; b++) {
		has[b] = cdp_raster_band_nodata(r, (int)b + 1, &nd[b]);
		any_nd |= has[b];
		*one &= has[b] && (nd[b] == nd[0] || (isnan(nd[b]) && isnan(nd[0])));
	}
	*nd0 = nd[0];
	if (any_nd)
		cdp_raster_mark_nodata(img, dt, (int)bands, (size_t)w * h, w, (int)w, (int)h, nd, has,
		                       !*one, mask, w);
	free(nd);
	free(has);
	return CDP_OK;
}

static int read_label(pk *p, const list_entry *e, const cdp_raster_info *ii,
                      cdp_record *rec, cdp_buf *lab)
{
	cdp_raster *r = NULL;
	const cdp_raster_info *li;
	char msg[512];
	int one = 1, rc;

	if ((rc = cdp_raster_open(e->label, &r, msg, sizeof msg)))
		return pack_seterr(p, rc, "cannot open '%s': %s", e->label, msg);
	li = cdp_raster_get_info(r);
	if (li->width != ii->width || li->height != ii->height)
		rc = pack_seterr(p, CDP_EMISMATCH, "'%s': label is %" PRIu64 "x%" PRIu64
		                 ", its image %" PRIu64 "x%" PRIu64, e->label, li->width,
		                 li->height, ii->width, ii->height);
	else if (li->dtype != CDP_DT_U8 && li->dtype != CDP_DT_U16)
		rc = pack_seterr(p, CDP_EUNSUP, "'%s': label data type %s is not u8 or u16",
		                 e->label, cdp_dtype_name(li->dtype) ? cdp_dtype_name(li->dtype)
		                                                     : "?");
	else if ((rc = cdp_buf_reserve(lab, (size_t)li->width * li->height * 2)))
		rc = pack_seterr(p, rc, "out of memory");
	else if ((rc = cdp_raster_read(r, &one, 1, 0, 0, (int)li->width, (int)li->height,
	                               lab->p, msg, sizeof msg)))
		rc = pack_seterr(p, rc, "cannot read '%s': %s", e->label, msg);
	if (rc == CDP_OK) {
		rec->label_kind = li->dtype == CDP_DT_U8 ? CDP_LABEL_U8 : CDP_LABEL_U16;
		rec->label_ignore = p->o->has_ignore ? p->o->ignore
		                    : li->dtype == CDP_DT_U8 ? 255 : 65535;
		rec->label = lab->p;
	}
	cdp_raster_close(r);
	return rc;
}

static int by_key(const void *a, const void *b)
{
	return strcmp((*(const list_entry *const *)a)->key, (*(const list_entry *const *)b)->key);
}

int pack_list_keys(pk *p, list_entry *e, size_t n)
{
	char key[CDP_KEY_MAX], stem[CDP_NAME_MAX + 1];
	const list_entry **ix;
	int rc = CDP_OK;

	for (size_t i = 0; i < n; i++) {
		const char *cls = e[i].folder ? p->cnames[e[i].cls] : NULL;
		char why[160];

		if (cdp_key_stem(e[i].image, stem, sizeof stem) == CDP_OK &&
		    cdp_key_chip(key, sizeof key, cls, stem) == CDP_OK) {
			if (!(e[i].key = strdup(key)))
				return pack_seterr(p, CDP_ENOMEM, "out of memory");
			continue;
		}
		/* the real problem: a stem over a NAME's 200 bytes, or a key
		 * (CLASS/STEM) over 255 */
		if (cdp_key_stem(e[i].image, stem, sizeof stem) != CDP_OK)
			snprintf(why, sizeof why, "its file stem is not a key name (1 to %d bytes)",
			         CDP_NAME_MAX);
		else
			snprintf(why, sizeof why, "key '%.20s%s%.20s...' would be %zu bytes, longer than %d",
			         cls ? cls : "", cls ? "/" : "", stem,
			         (cls ? strlen(cls) + 1 : 0) + strlen(stem), CDP_KEY_MAX - 1);
		if (e[i].folder)
			return pack_seterr(p, CDP_EKEY, "'%s': %s", e[i].image, why);
		return pack_seterr(p, CDP_EKEY, "'%s': line %zu: '%s': %s", p->in, e[i].line,
		                   e[i].image, why);
	}
	if (n < 2)
		return CDP_OK;
	if (!(ix = malloc(n * sizeof *ix)))
		return pack_seterr(p, CDP_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		ix[i] = &e[i];
	qsort(ix, n, sizeof *ix, by_key);
	for (size_t i = 1; i < n; i++) {
		const list_entry *a = ix[i - 1], *b = ix[i];
		if (strcmp(a->key, b->key) == 0) {
			/* in input order, so the message does not depend on qsort */
			if (a->line > b->line) {
				const list_entry *t = a;
				a = b;
				b = t;
			}
			rc = pack_seterr(p, CDP_EKEY, "'%s': '%s' and '%s' both map to key '%s' "
			                 "(rename one)", p->in, a->image, b->image, a->key);
			break;
		}
	}
	free(ix);
	return rc;
}

/* One chip: the whole raster is one tile, keyed by its file stem (CLASS/STEM
 * for --folders; e->key). */
static int add_chip(pk *p, const list_entry *e, uint32_t index, cdp_buf bufs[4])
{
	cdp_raster *r = NULL;
	const cdp_raster_info *ri;
	cdp_record rec;
	cdp_source s;
	const char *key = e->key;
	char msg[512];
	size_t plane, bytes;
	double nd0 = 0;
	int *bl = NULL, nd_one = 0, rc;

	if ((rc = cdp_raster_open(e->image, &r, msg, sizeof msg)))
		return pack_seterr(p, rc, "cannot open '%s': %s", e->image, msg);
	ri = cdp_raster_get_info(r);
	memset(&rec, 0, sizeof rec);
	if (ri->width > CDP_RECORD_MAXDIM || ri->height > CDP_RECORD_MAXDIM ||
	    ri->bands > CDP_RECORD_MAXDIM || !cdp_dtype_size(ri->dtype)) {
		rc = pack_seterr(p, CDP_EUNSUP, "'%s': %" PRIu64 "x%" PRIu64 "x%" PRIu32
		                 " %s is not a chip a record can hold", e->image, ri->width,
		                 ri->height, ri->bands,
		                 cdp_dtype_name(ri->dtype) ? cdp_dtype_name(ri->dtype) : "?");
		goto out;
	}
	plane = (size_t)ri->width * ri->height;
	if ((rc = cdp_mul_size(plane * cdp_dtype_size(ri->dtype), ri->bands, &bytes)) ||
	    (rc = cdp_buf_reserve(&bufs[0], bytes)) || (rc = cdp_buf_reserve(&bufs[1], plane)) ||
	    !(bl = malloc(ri->bands * sizeof *bl))) {
		rc = pack_seterr(p, rc ? rc : CDP_ENOMEM, "'%s': %s", e->image,
		                 cdp_strerror(rc ? rc : CDP_ENOMEM));
		goto out;
	}
	for (uint32_t b = 0; b < ri->bands; b++)
		bl[b] = (int)b + 1;
	if ((rc = cdp_raster_read(r, bl, (int)ri->bands, 0, 0, (int)ri->width,
	                          (int)ri->height, bufs[0].p, msg, sizeof msg))) {
		rc = pack_seterr(p, rc, "cannot read '%s': %s", e->image, msg);
		goto out;
	}
	memset(bufs[1].p, 255, plane);
	if (cdp_raster_has_mask(r, 1) &&
	    (rc = cdp_raster_read_mask(r, 1, 0, 0, (int)ri->width, (int)ri->height,
	                               bufs[1].p, msg, sizeof msg))) {
		rc = pack_seterr(p, rc, "cannot read the mask of '%s': %s", e->image, msg);
		goto out;
	}
	if ((rc = mark_nodata(r, bufs[0].p, ri->dtype, ri->bands, (uint32_t)ri->width,
	                      (uint32_t)ri->height, bufs[1].p, &nd_one, &nd0))) {
		rc = pack_seterr(p, rc, "'%s': %s", e->image, cdp_strerror(rc));
		goto out;
	}
	rec.dtype = ri->dtype;
	rec.bands = ri->bands;
	rec.height = (uint32_t)ri->height;
	rec.width = (uint32_t)ri->width;
	memcpy(rec.gt, ri->gt, sizeof rec.gt);
	rec.source = index;
	rec.compression = p->o->zlevel ? CDP_COMP_ZLIB : CDP_COMP_NONE;
	rec.image = bufs[0].p;
	if (nd_one) {     /* bands with different values: the mask says it all */
		rec.flags |= CDP_REC_NODATA;
		rec.nodata = nd0;
	}
	for (size_t i = 0; i < plane && !(rec.flags & CDP_REC_MASK); i++)
		if (bufs[1].p[i] != 255)
			rec.flags |= CDP_REC_MASK;
	if (rec.flags & CDP_REC_MASK) {
		rec.mask = bufs[1].p;
	}
	if (e->label && (rc = read_label(p, e, ri, &rec, &bufs[2])))
		goto out;
	if (e->cls >= 0) {
		rec.label_kind = CDP_LABEL_CLASS;
		rec.class_id = (uint32_t)e->cls;
	}
	if (e->multi) {
		rec.label_kind = CDP_LABEL_MULTI;
		rec.label_len = (uint32_t)p->o->nclasses;
		rec.label = e->multi;
	}
	if ((rc = cdp_record_encode(&rec, p->o->zlevel ? p->o->zlevel : 6, &bufs[3]))) {
		rc = pack_seterr(p, rc, "'%s': cannot encode: %s", e->image, cdp_strerror(rc));
		goto out;
	}
	memset(&s, 0, sizeof s);
	s.index = index;
	snprintf(s.name, sizeof s.name, "%s", key);
	s.width = ri->width;
	s.height = ri->height;
	s.bands = ri->bands;
	s.dtype = ri->dtype;
	memcpy(s.gt, ri->gt, sizeof s.gt);
	if (!(s.path = strdup(e->image)) || !(s.crs = strdup(ri->crs ? ri->crs : ""))) {
		cdp_source_free(&s);
		rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = pack_add_source(p, &s)) == CDP_OK)
		rc = pack_add_record(p, key, bufs[3].p, bufs[3].len);
out:
	free(bl);
	cdp_raster_close(r);
	return rc;
}

int pack_list_pack(pk *p, const list_entry *e, size_t n)
{
	cdp_buf bufs[4] = {{0}};   /* image, mask, label, encoded record */
	int rc = CDP_OK;

	if (n > PACK_MAX_SOURCES)
		return pack_seterr(p, CDP_ERANGE, "'%s': more than %u chips", p->in,
		                   PACK_MAX_SOURCES);
	/* each chip is read once, whole: GDAL's cache would only fill */
	cdp_raster_cache_fit(0);
	for (size_t i = 0; i < n && rc == CDP_OK; i++)
		if ((rc = pack_stopped(p)) == CDP_OK)
			rc = add_chip(p, &e[i], (uint32_t)i, bufs);
	for (int i = 0; i < 4; i++)
		cdp_buf_free(&bufs[i]);
	return rc;
}
