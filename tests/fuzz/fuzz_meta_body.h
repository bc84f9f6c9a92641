/* fuzz_meta_body.h: the fuzz target for the pool's meta values
 * (cdp_pool.h, cdp_stats.h, cdp_stream.h).
 *
 * Shared by the libFuzzer harness (fuzz_meta.c) and the corpus replay
 * (tests/unit/test_fuzz_meta.c). The input is one stored meta value, its
 * text and crc32= line; it goes through cdp_pool_meta_decode (the check of
 * cdp_pool_meta_get) and then, since which name it is stored under is not
 * known here, through every parser of a meta text: the fields of format,
 * uuid and count (cdp_meta_field), shape, stats, classes and source.NNNNNN.
 * Random bytes almost never end in a right crc32= line, so the input also
 * runs as the text of a value, with the line appended. abort() marks a
 * broken invariant:
 *   - a decoded text is the value without its last 15 bytes, NUL-ended;
 *   - what a parser accepts it formats, and the formatted text parses again
 *     and formats to the same bytes (shape: to the same fields);
 *   - cdp_meta_field copies a value that fits its buffer, without newline.
 */
#ifndef CDP_FUZZ_META_BODY_H
#define CDP_FUZZ_META_BODY_H

#include "cdp_crc32.h"
#include "cdp_error.h"
#include "cdp_pool.h"
#include "cdp_stats.h"
#include "cdp_stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cdp_fuzz_same_buf(const cdp_buf *a, const cdp_buf *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

static int cdp_fuzz_meta_stats(const char *t, size_t n)
{
	cdp_stats s, s2;
	cdp_buf f = { 0 }, f2 = { 0 };
	int rc = cdp_stats_parse(t, n, &s);

	if (rc != CDP_OK)
		return rc;
	if (cdp_stats_format(&s, &f) != CDP_OK ||
	    cdp_stats_parse((const char *)f.p, f.len, &s2) != CDP_OK)
		abort();
	if (s2.dtype != s.dtype || s2.bands != s.bands || s2.stale != s.stale ||
	    cdp_stats_format(&s2, &f2) != CDP_OK || !cdp_fuzz_same_buf(&f, &f2))
		abort();
	cdp_stats_free(&s);
	cdp_stats_free(&s2);
	cdp_buf_free(&f);
	cdp_buf_free(&f2);
	return CDP_OK;
}

static int cdp_fuzz_meta_classes(const char *t, size_t n)
{
	cdp_classes c = { 0 }, c2 = { 0 };
	cdp_buf f = { 0 }, f2 = { 0 };
	int rc = cdp_classes_parse(t, n, &c);

	if (rc != CDP_OK) {
		cdp_classes_free(&c);
		return rc;
	}
	if (cdp_classes_format(&c, &f) != CDP_OK ||
	    cdp_classes_parse((const char *)f.p, f.len, &c2) != CDP_OK ||
	    cdp_classes_total(&c) != cdp_classes_total(&c2) ||
	    cdp_classes_format(&c2, &f2) != CDP_OK || !cdp_fuzz_same_buf(&f, &f2))
		abort();
	cdp_classes_free(&c);
	cdp_classes_free(&c2);
	cdp_buf_free(&f);
	cdp_buf_free(&f2);
	return CDP_OK;
}

static int cdp_fuzz_meta_shape(const char *t)
{
	cdp_record r, r2;
	cdp_buf f = { 0 };
	int rc = cdp_pool_shape_parse(t, &r);

	if (rc != CDP_OK)
		return rc;
	if (cdp_pool_shape_format(&r, &f) != CDP_OK ||
	    cdp_pool_shape_parse((const char *)f.p, &r2) != CDP_OK ||
	    r2.dtype != r.dtype || r2.bands != r.bands || r2.height != r.height ||
	    r2.width != r.width || r2.label_kind != r.label_kind ||
	    r2.label_ignore != r.label_ignore)
		abort();
	cdp_buf_free(&f);
	return CDP_OK;
}

static int cdp_fuzz_meta_source(const char *t, size_t n)
{
	cdp_source s, s2;
	cdp_buf f = { 0 }, f2 = { 0 };
	int rc = cdp_source_parse(t, n, &s);

	if (rc != CDP_OK)
		return rc;
	/* A parsed source may hold what format refuses (a non-finite
	 * geotransform, say); only what formats must round-trip. */
	if (cdp_source_format(&s, &f) == CDP_OK) {
		if (cdp_source_parse(f.p, f.len, &s2) != CDP_OK)
			abort();
		if (cdp_source_format(&s2, &f2) != CDP_OK || !cdp_fuzz_same_buf(&f, &f2))
			abort();
		cdp_source_free(&s2);
	}
	cdp_source_free(&s);
	cdp_buf_free(&f);
	cdp_buf_free(&f2);
	return CDP_OK;
}

static int cdp_fuzz_meta_field(const char *t, const char *key)
{
	char v[256];
	int rc = cdp_meta_field(t, key, v, sizeof v);

	if (rc == CDP_OK && (strlen(v) >= sizeof v || strchr(v, '\n')))
		abort();
	return rc;
}

/* Every parser on the text t[n]; 0 when at least one accepts it. */
static int cdp_fuzz_meta_text(const char *t, size_t n)
{
	int ok = 0;

	ok |= cdp_fuzz_meta_field(t, "format") == CDP_OK;
	ok |= cdp_fuzz_meta_field(t, "uuid") == CDP_OK;
	ok |= cdp_fuzz_meta_field(t, "tiles") == CDP_OK;
	ok |= cdp_fuzz_meta_field(t, "cmd.1") == CDP_OK;
	ok |= cdp_fuzz_meta_shape(t) == CDP_OK;
	ok |= cdp_fuzz_meta_stats(t, n) == CDP_OK;
	ok |= cdp_fuzz_meta_classes(t, n) == CDP_OK;
	ok |= cdp_fuzz_meta_source(t, n) == CDP_OK;
	return ok ? CDP_OK : CDP_EFORMAT;
}

/* A stored value: its check, then its text's parsers. */
static int cdp_fuzz_meta_value(const uint8_t *p, size_t n)
{
	cdp_buf t = { 0 };
	int rc = cdp_pool_meta_decode(p, n, &t);

	if (rc == CDP_OK) {
		if (n < 15 || t.len != n - 15 || memcmp(t.p, p, t.len) || t.p[t.len])
			abort();
		rc = cdp_fuzz_meta_text((const char *)t.p, t.len);
	}
	cdp_buf_free(&t);
	return rc;
}

/* The input as a stored value, then as the text of one (the crc32= line
 * appended). Returns the first run's code. */
static int cdp_fuzz_meta_one(const uint8_t *p, size_t n)
{
	int rc = cdp_fuzz_meta_value(p, n);
	uint8_t *q;

	if ((n && p[n - 1] != '\n') || !(q = malloc(n + 16)))
		return rc;
	if (n)
		memcpy(q, p, n);
	snprintf((char *)q + n, 16, "crc32=%08lx\n", (unsigned long)cdp_crc32(0, p, n));
	if (cdp_fuzz_meta_value(q, n + 15) == CDP_ECRC)
		abort();
	free(q);
	return rc;
}

#endif
