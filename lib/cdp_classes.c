/* cdp_classes.c: class histograms of label records (cdp_stats.h), their
 * text form, and what a class name may be (cdp-lmdbpack's --classes and
 * class folders, the checkpoint's names). Buffers may be unaligned (LMDB pages), so samples are loaded
 * with memcpy.
 */
#include "cdp_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_stats_int.h"

#define LOAD(T, buf, i) \
	({ T v_; memcpy(&v_, (const unsigned char *)(buf) + (i) * sizeof(T), sizeof(T)); v_; })

void cdp_classes_reset(cdp_classes *c)
{
	if (c->n)
		memset(c->n, 0, c->len * sizeof *c->n);
	c->len = 0;
}

void cdp_classes_free(cdp_classes *c)
{
	free(c->n);
	memset(c, 0, sizeof *c);
}

/* Makes ids [0, len) addressable, zero-filled. */
static int classes_grow(cdp_classes *c, size_t len)
{
	if (len > CDP_CLASS_MAX)
		return CDP_ERANGE;
	if (len > c->cap) {
		size_t cap = c->cap ? c->cap : 16;
		uint64_t *p;

		while (cap < len)
			cap *= 2;
		if (!(p = realloc(c->n, cap * sizeof *p)))
			return CDP_ENOMEM;
		memset(p + c->cap, 0, (cap - c->cap) * sizeof *p);
		c->n = p;
		c->cap = cap;
	}
	if (len > c->len)
		c->len = len;
	return CDP_OK;
}

int cdp_classes_add(cdp_classes *c, uint32_t id, uint64_t count)
{
	int rc;

	if (!count)
		return CDP_OK;
	if ((rc = classes_grow(c, (size_t)id + 1)))
		return rc;
	c->n[id] += count;
	return CDP_OK;
}

int cdp_classes_add_record(cdp_classes *c, const cdp_record *r)
{
	size_t plane = (size_t)r->height * r->width;
	uint64_t h8[256];
	uint32_t top = 0;
	int rc;

	switch (r->label_kind) {
	case CDP_LABEL_NONE:
	case CDP_LABEL_F32:   /* values, not classes (their statistics: cdp_stats) */
		return CDP_OK;
	case CDP_LABEL_CLASS:
		return cdp_classes_add(c, r->class_id, 1);
	case CDP_LABEL_MULTI:
		/* one per record holding class k: the class's positives */
		if (r->label_len && !r->label)
			return CDP_EINVAL;
		for (uint32_t k = 0; k < r->label_len; k++)
			if (((const uint8_t *)r->label)[k] && (rc = cdp_classes_add(c, k, 1)))
				return rc;
		return CDP_OK;
	case CDP_LABEL_U8:
		if (plane && !r->label)
			return CDP_EINVAL;
		memset(h8, 0, sizeof h8);
		for (size_t i = 0; i < plane; i++)
			h8[((const uint8_t *)r->label)[i]]++;
		if (r->label_ignore < 256)
			h8[r->label_ignore] = 0;
		for (uint32_t k = 0; k < 256; k++)
			if (h8[k] && (rc = cdp_classes_add(c, k, h8[k])))
				return rc;
		return CDP_OK;
	case CDP_LABEL_U16:
		if (plane && !r->label)
			return CDP_EINVAL;
		/* Grow once to the largest id, then count in place. */
		for (size_t i = 0; i < plane; i++) {
			uint32_t v = LOAD(uint16_t, r->label, i);
			if (v != r->label_ignore && v > top)
				top = v;
		}
		if ((rc = classes_grow(c, (size_t)top + 1)))
			return rc;
		for (size_t i = 0; i < plane; i++) {
			uint32_t v = LOAD(uint16_t, r->label, i);
			if (v != r->label_ignore)
				c->n[v]++;
		}
		return CDP_OK;
	default:
		return CDP_EFORMAT;
	}
}

int cdp_classes_merge(cdp_classes *dst, const cdp_classes *src)
{
	int rc;

	if (src->len && (rc = classes_grow(dst, src->len)))
		return rc;
	for (size_t k = 0; k < src->len; k++)
		dst->n[k] += src->n[k];
	return CDP_OK;
}

uint64_t cdp_classes_total(const cdp_classes *c)
{
	uint64_t t = 0;

	for (size_t k = 0; k < c->len; k++)
		t += c->n[k];
	return t;
}

int cdp_classes_format(const cdp_classes *c, cdp_buf *out)
{
	int rc;

	out->len = 0;
	if ((rc = cdp_buf_reserve(out, 1)))
		return rc;
	out->p[0] = '\0';
	for (size_t k = 0; k < c->len; k++)
		if (c->n[k] && (rc = cdp_text_appendf(out, "class.%zu=%llu\n", k,
		                             (unsigned long long)c->n[k])))
			return rc;
	return CDP_OK;
}

int cdp_classes_parse(const char *text, size_t len, cdp_classes *c)
{
	const char *p = text, *end = text + len;
	long long prev = -1;
	int rc;

	cdp_classes_reset(c);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char line[96], *eq;
		unsigned __int128 id, n;

		if (!eol || (size_t)(eol - p) >= sizeof line || strncmp(p, "class.", 6))
			return CDP_ESYNTAX;
		memcpy(line, p, (size_t)(eol - p));
		line[eol - p] = '\0';
		p = eol + 1;
		if (!(eq = strchr(line, '=')))
			return CDP_ESYNTAX;
		*eq = '\0';
		if ((rc = cdp_text_parse_u128(line + 6, &id)) || (rc = cdp_text_parse_u128(eq + 1, &n)))
			return rc;
		if (id >= CDP_CLASS_MAX)
			return CDP_ERANGE;
		/* Ascending ids, no zero counts: the form format writes. */
		if (n == 0 || n > UINT64_MAX || (long long)id <= prev)
			return CDP_ESYNTAX;
		prev = (long long)id;
		if ((rc = cdp_classes_add(c, (uint32_t)id, (uint64_t)n)))
			return rc;
	}
	return CDP_OK;
}

/* The length of the UTF-8 sequence at s (n bytes left), its code point in
 * *cp, or 0: a bad lead or continuation byte, an overlong form, a
 * surrogate, beyond U+10FFFF. */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 :
	             s[0] >= 0xe0 && s[0] < 0xf0 ? 3 : s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : 0;

	if (len == 0 || len > n)
		return 0;
	*cp = len == 1 ? s[0] : s[0] & (0x7fu >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && *cp < 0x800) || (len == 4 && (*cp < 0x10000 || *cp > 0x10ffff)) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return len;
}

int cdp_class_name_ok(const char *s, char *why, size_t cap)
{
	size_t n = s ? strnlen(s, CDP_CLASS_NAME_MAX + 1) : 0, k;
	uint32_t cp;

	if (cap)
		why[0] = '\0';
	if (n == 0 || n > CDP_CLASS_NAME_MAX) {
		if (n)
			snprintf(why, cap, "is longer than %d bytes", CDP_CLASS_NAME_MAX);
		else
			snprintf(why, cap, "is empty");
		return 0;
	}
	for (size_t i = 0; i < n; i += k) {
		if (!(k = utf8_char((const unsigned char *)s + i, n - i, &cp))) {
			snprintf(why, cap, "is not UTF-8 at byte %zu", i + 1);
			return 0;
		}
		/* C0 (newline, tab), DEL and C1 would break a line of a table */
		if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
			snprintf(why, cap, "has a control character at byte %zu", i + 1);
			return 0;
		}
	}
	return 1;
}
