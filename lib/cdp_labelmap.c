/* cdp_labelmap.c: the label map's two forms (inline and file) parsed into
 * one value -> id table; the grammar is man/cdp-labelmap.5's. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_labelmap.h"
#include "cdp_stats.h"

#define WHY(...) do { if (why && cap) snprintf(why, cap, __VA_ARGS__); } while (0)

static int blank(int c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* number()'s refusal of more than 6 digits ("0000010"), told apart from
 * one above its max only for the message: CDP_ERANGE to the caller. */
#define NUM_LONG 1

/* A decimal number of 1-6 digits at *s, at most max; advances *s.
 * CDP_ESYNTAX no digit, NUM_LONG too many, CDP_ERANGE above max. */
static int number(const char **s, const char *end, uint32_t max, uint32_t *out)
{
	const char *p = *s;
	uint32_t v = 0;

	if (p == end || *p < '0' || *p > '9')
		return CDP_ESYNTAX;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (p - *s >= 6)
			return NUM_LONG;
		v = v * 10 + (uint32_t)(*p - '0');
	}
	if (v > max)
		return CDP_ERANGE;
	*s = p;
	*out = v;
	return CDP_OK;
}

/* Says why number() refused (rc) the VALUE (id 0) or ID (id 1), in a line
 * of the form `form`, and returns the error code for the caller. */
static int number_why(char *why, size_t cap, int rc, int id, const char *form)
{
	if (rc == NUM_LONG)
		WHY("%s of more than 6 digits", id ? "an id" : "a value");
	else if (rc == CDP_ERANGE)
		WHY("%s", id ? "an id above 65534" : "a value above 65535");
	else
		WHY("not %s", form);
	return rc == NUM_LONG ? CDP_ERANGE : rc;
}

static int init(cdp_labelmap *m)
{
	memset(m, 0, sizeof *m);
	if (!(m->id = malloc(sizeof *m->id * CDP_LABELMAP_NVALUES)))
		return CDP_ENOMEM;
	for (size_t v = 0; v < CDP_LABELMAP_NVALUES; v++)
		m->id[v] = CDP_LABELMAP_NONE;
	return CDP_OK;
}

void cdp_labelmap_free(cdp_labelmap *m)
{
	if (!m)
		return;
	for (uint32_t k = 0; m->names && k <= m->max_id; k++)
		free(m->names[k]);
	free(m->names);
	free(m->id);
	memset(m, 0, sizeof *m);
}

/* Enters value -> id; *first[value] remembers the line or item that gave
 * it, for the message about a second one. */
static int put(cdp_labelmap *m, uint32_t value, uint32_t id, size_t at, size_t *first,
               char *why, size_t cap)
{
	if (m->id[value] != CDP_LABELMAP_NONE) {
		WHY("value %u is given twice (first at %zu)", value, first[value]);
		return CDP_EDUPKEY;
	}
	m->id[value] = (int32_t)id;
	first[value] = at;
	if (m->nvalues == 0 || id > m->max_id)
		m->max_id = id;
	m->nvalues++;
	return CDP_OK;
}

int cdp_labelmap_is_inline(const char *arg)
{
	if (!arg || !*arg)
		return 0;
	for (; *arg; arg++)
		if (!(*arg >= '0' && *arg <= '9') && *arg != ':' && *arg != ',' && !blank(*arg))
			return 0;
	return 1;
}

int cdp_labelmap_parse_inline(const char *spec, cdp_labelmap *m, size_t *where,
                              char *why, size_t cap)
{
	const char *s = spec, *end;
	size_t item = 0, *first;
	uint32_t v, id;
	int rc;

	if (where)
		*where = 0;
	if (!spec || !m)
		return CDP_EINVAL;
	if ((rc = init(m)))
		return rc;
	if (!(first = malloc(sizeof *first * CDP_LABELMAP_NVALUES))) {
		cdp_labelmap_free(m);
		return CDP_ENOMEM;
	}
	end = spec + strlen(spec);
	for (;;) {
		item++;
		while (s < end && blank(*s))
			s++;
		if ((rc = number(&s, end, CDP_LABELMAP_NVALUES - 1, &v))) {
			rc = number_why(why, cap, rc, 0, "VALUE:ID");
			break;
		}
		if (s == end || *s++ != ':') {
			rc = CDP_ESYNTAX;
			WHY("not VALUE:ID");
			break;
		}
		if ((rc = number(&s, end, CDP_LABELMAP_MAXID, &id))) {
			rc = number_why(why, cap, rc, 1, "VALUE:ID");
			break;
		}
		while (s < end && blank(*s))
			s++;
		if ((rc = put(m, v, id, item, first, why, cap)))
			break;
		if (s == end)
			break;
		if (*s++ != ',') {
			rc = CDP_ESYNTAX;
			WHY("not VALUE:ID");
			break;
		}
	}
	free(first);
	if (rc) {
		if (where)
			*where = item;
		cdp_labelmap_free(m);
	}
	return rc;
}

/* The NAME of a file line: text[len] with blanks trimmed (len 0: none). */
static int add_name(char ***names, size_t *nnames, uint32_t id,
                    const char *text, size_t len, char *why, size_t cap)
{
	char *name, reason[128];

	if (id >= *nnames) {
		size_t n = (size_t)id + 1;
		char **nn = realloc(*names, n * sizeof *nn);
		if (!nn)
			return CDP_ENOMEM;
		memset(nn + *nnames, 0, (n - *nnames) * sizeof *nn);
		*names = nn;
		*nnames = n;
	}
	if (!(name = malloc(len + 1)))
		return CDP_ENOMEM;
	memcpy(name, text, len);
	name[len] = '\0';
	if (!cdp_class_name_ok(name, reason, sizeof reason)) {
		WHY("the name of id %u %s", id, reason);
		free(name);
		return CDP_ESYNTAX;
	}
	if ((*names)[id]) {
		int same = strcmp((*names)[id], name) == 0;
		if (!same)
			WHY("id %u is named both '%s' and '%s'", id, (*names)[id], name);
		free(name);
		return same ? CDP_OK : CDP_EFORMAT;
	}
	(*names)[id] = name;
	return CDP_OK;
}

int cdp_labelmap_parse(const void *text, size_t len, cdp_labelmap *m, size_t *where,
                       char *why, size_t cap)
{
	const char *p = text, *end = p ? p + len : NULL, *nl, *s, *e;
	char **names = NULL;
	size_t line = 0, nnames = 0, *first = NULL;
	uint32_t v, id;
	int rc, named = 0;

	if (where)
		*where = 0;
	if ((!text && len) || !m)
		return CDP_EINVAL;
	memset(m, 0, sizeof *m);
	if (len > CDP_LABELMAP_MAXFILE) {
		WHY("longer than %u bytes", CDP_LABELMAP_MAXFILE);
		return CDP_ERANGE;
	}
	if ((rc = init(m)))
		return rc;
	if (!(first = malloc(sizeof *first * CDP_LABELMAP_NVALUES))) {
		rc = CDP_ENOMEM;
		goto out;
	}
	for (; p && p < end; p = nl ? nl + 1 : end) {
		line++;
		nl = memchr(p, '\n', (size_t)(end - p));
		e = nl ? nl : end;
		if ((size_t)(e - p) > CDP_LABELMAP_MAXLINE) {
			rc = CDP_ERANGE;
			WHY("longer than %u bytes", CDP_LABELMAP_MAXLINE);
			goto out;
		}
		if (memchr(p, '\0', (size_t)(e - p))) {
			rc = CDP_ESYNTAX;
			WHY("has a NUL byte");
			goto out;
		}
		for (s = p; s < e && blank(*s); s++)
			;
		if (s == e || *s == '#')
			continue;
		if ((rc = number(&s, e, CDP_LABELMAP_NVALUES - 1, &v))) {
			rc = number_why(why, cap, rc, 0, "VALUE ID [NAME]");
			goto out;
		}
		if (s == e || !blank(*s)) {
			rc = CDP_ESYNTAX;
			WHY("not VALUE ID [NAME]");
			goto out;
		}
		while (s < e && blank(*s))
			s++;
		if ((rc = number(&s, e, CDP_LABELMAP_MAXID, &id))) {
			rc = number_why(why, cap, rc, 1, "VALUE ID [NAME]");
			goto out;
		}
		if (s < e && !blank(*s)) {
			rc = CDP_ESYNTAX;
			WHY("not VALUE ID [NAME]");
			goto out;
		}
		if ((rc = put(m, v, id, line, first, why, cap)))
			goto out;
		while (s < e && blank(*s))
			s++;
		{
			const char *t = e;
			while (t > s && blank(t[-1]))
				t--;
			if (t > s) {
				named = 1;
				if ((rc = add_name(&names, &nnames, id, s, (size_t)(t - s), why, cap)))
					goto out;
			}
		}
	}
	line = 0;
	if (m->nvalues == 0) {
		rc = CDP_EFORMAT;
		WHY("maps no value");
		goto out;
	}
	if (named) {
		for (uint32_t k = 0; k <= m->max_id; k++)
			if (k >= nnames || !names[k]) {
				rc = CDP_EFORMAT;
				WHY("names some ids but not id %u", k);
				goto out;
			}
		m->names = names;
		names = NULL;
	}
out:
	for (size_t k = 0; names && k < nnames; k++)
		free(names[k]);
	free(names);
	free(first);
	if (rc) {
		if (where)
			*where = line;
		cdp_labelmap_free(m);
	}
	return rc;
}

int cdp_labelmap_load(const char *path, cdp_labelmap *m, size_t *where, char *why,
                      size_t cap)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0, got;
	int rc;

	if (where)
		*where = 0;
	if (!path || !m)
		return CDP_EINVAL;
	memset(m, 0, sizeof *m);
	if (!(f = fopen(path, "rb")))
		return errno ? errno : EIO;
	cdp_file_skip_bom(f);      /* an editor's mark is no part of the first line */
	/* one byte past the limit tells a file that is too long */
	if (!(buf = malloc(CDP_LABELMAP_MAXFILE + 1))) {
		fclose(f);
		return CDP_ENOMEM;
	}
	while ((got = fread(buf + len, 1, CDP_LABELMAP_MAXFILE + 1 - len, f)) > 0)
		len += got;
	rc = ferror(f) ? (errno ? errno : EIO) : CDP_OK;
	fclose(f);
	if (rc == CDP_OK)
		rc = cdp_labelmap_parse(buf, len, m, where, why, cap);
	free(buf);
	return rc;
}
