/* cdp_key.c: formatting, parsing and matching pool keys (cdp_key.h):
 * NAME_ROW_COL tiles and NAME chips, either with a CLASS/ prefix.
 *
 * Parsing goes from the right: the last '_' starts COL, the one before it ROW,
 * and everything before that is NAME, which may contain '_' itself
 * ("dop_2020_03_07" is NAME "dop_2020", ROW 03, COL 07).
 */
#include "cdp_key.h"
#include "cdp_error.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

/* Most digits a uint64_t index can have (18446744073709551615). */
#define KEY_INDEX_DIGITS 20

static int name_char_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' ||
	       c == '-';
}

/* Decimal digits of v itself (1 for 0..9). */
static int index_digits(uint64_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

int cdp_key_digits(uint64_t n)
{
	return index_digits(n > 0 ? n - 1 : 0);
}

static int name_check_len(const char *name, size_t len)
{
	if (len == 0 || len > CDP_NAME_MAX)
		return CDP_EKEY;
	for (size_t i = 0; i < len; i++)
		if (!name_char_ok((unsigned char)name[i]))
			return CDP_EKEY;
	return CDP_OK;
}

int cdp_key_name_check(const char *name)
{
	if (!name)
		return CDP_EINVAL;
	return name_check_len(name, strnlen(name, CDP_NAME_MAX + 1));
}

int cdp_key_format(char *buf, size_t cap, const char *name, uint64_t row,
                   int row_digits, uint64_t col, int col_digits)
{
	int rc, len;

	if (!buf || !name || row_digits < 1 || row_digits > KEY_INDEX_DIGITS ||
	    col_digits < 1 || col_digits > KEY_INDEX_DIGITS)
		return CDP_EINVAL;
	/* An index wider than its padding would break "byte order equals grid
	 * order", which every reader of the pool relies on. */
	if (index_digits(row) > row_digits || index_digits(col) > col_digits)
		return CDP_EINVAL;
	rc = cdp_key_name_check(name);
	if (rc != CDP_OK)
		return rc;
	if (cap > CDP_KEY_MAX)
		cap = CDP_KEY_MAX;
	len = snprintf(buf, cap, "%s_%0*llu_%0*llu", name, row_digits,
	               (unsigned long long)row, col_digits,
	               (unsigned long long)col);
	if (len < 0 || (size_t)len >= cap) {
		if (cap > 0)
			buf[0] = '\0';
		return CDP_EKEY;
	}
	return CDP_OK;
}

/* Parses the decimal digits s[0..len) as a uint64_t. */
static int parse_index(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > KEY_INDEX_DIGITS)
		return CDP_EKEY;
	for (size_t i = 0; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return CDP_EKEY;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return CDP_EKEY;
		v = v * 10 + d;
	}
	*out = v;
	return CDP_OK;
}

int cdp_key_parse(const char *key, size_t keylen, char *name, size_t namecap,
                  uint64_t *row, uint64_t *col)
{
	size_t col_us, row_us, i;
	uint64_t r, c;
	int rc;

	if (!key || !name || !row || !col)
		return CDP_EINVAL;
	if (keylen == 0 || keylen >= CDP_KEY_MAX)
		return CDP_EKEY;
	/* The key comes from LMDB and need not be NUL-terminated; it must not
	 * contain a NUL either. */
	if (memchr(key, '\0', keylen))
		return CDP_EKEY;
	for (i = keylen; i > 0 && key[i - 1] != '_'; i--)
		;
	if (i == 0)
		return CDP_EKEY;
	col_us = i - 1;
	for (i = col_us; i > 0 && key[i - 1] != '_'; i--)
		;
	if (i == 0)
		return CDP_EKEY;
	row_us = i - 1;
	rc = parse_index(key + col_us + 1, keylen - col_us - 1, &c);
	if (rc == CDP_OK)
		rc = parse_index(key + row_us + 1, col_us - row_us - 1, &r);
	if (rc == CDP_OK)
		rc = name_check_len(key, row_us);
	if (rc != CDP_OK)
		return rc;
	if (row_us >= namecap)
		return CDP_EINVAL;
	memcpy(name, key, row_us);
	name[row_us] = '\0';
	*row = r;
	*col = c;
	return CDP_OK;
}

/* The length of the UTF-8 character at s[0..n) (n >= 1): 2 to 4 for a
 * well-formed multi-byte sequence (no overlong form, surrogate or value
 * beyond U+10FFFF), else 1 (ASCII, or a byte that starts no character: each
 * such byte stands for itself). */
static size_t utf8_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned lo = 0x80, hi = 0xBF;
	size_t need;

	if (u[0] >= 0xC2 && u[0] <= 0xDF)
		need = 2;
	else if (u[0] >= 0xE0 && u[0] <= 0xEF)
		need = 3;
	else if (u[0] >= 0xF0 && u[0] <= 0xF4)
		need = 4;
	else
		return 1;
	if (u[0] == 0xE0)
		lo = 0xA0;
	else if (u[0] == 0xED)
		hi = 0x9F;
	else if (u[0] == 0xF0)
		lo = 0x90;
	else if (u[0] == 0xF4)
		hi = 0x8F;
	if (n < need || u[1] < lo || u[1] > hi)
		return 1;
	for (size_t i = 2; i < need; i++)
		if (u[i] < 0x80 || u[i] > 0xBF)
			return 1;
	return need;
}

int cdp_key_stem(const char *path, char *name, size_t cap)
{
	const char *base, *dot, *end;
	size_t len, out = 0;

	if (!path || !name || cap == 0)
		return CDP_EINVAL;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	end = base + strlen(base);
	/* Only the last extension goes, and a leading dot (".hidden") is part
	 * of the name, not an extension. */
	dot = strrchr(base, '.');
	if (dot && dot != base)
		end = dot;
	len = (size_t)(end - base);
	if (len == 0)
		return CDP_EKEY;
	for (size_t i = 0, n; i < len; i += n) {
		unsigned char ch = (unsigned char)base[i];

		/* one '-' per character, as the man pages say: 'é' is two bytes */
		n = name_char_ok(ch) ? 1 : utf8_len(base + i, len - i);
		if (out == CDP_NAME_MAX || out + 1 >= cap)
			return CDP_EKEY;
		name[out++] = n == 1 && name_char_ok(ch) ? (char)ch : '-';
	}
	name[out] = '\0';
	return CDP_OK;
}

int cdp_key_match(const char *glob, const char *key)
{
	if (!glob || !key)
		return 0;
	return fnmatch(glob, key, 0) == 0;
}

/* The prefix "CLASS/" of key[0..len): its length with the '/', 0 if none,
 * or CDP_EKEY if CLASS is not a NAME or a second '/' follows. */
static long class_prefix(const char *key, size_t len)
{
	const char *slash = memchr(key, '/', len);
	size_t n;

	if (!slash)
		return 0;
	n = (size_t)(slash - key);
	if (name_check_len(key, n) != CDP_OK || memchr(slash + 1, '/', len - n - 1))
		return CDP_EKEY;
	return (long)n + 1;
}

int cdp_key_scene(const char *key, size_t keylen, char *scene, size_t cap,
                  uint64_t *row, uint64_t *col)
{
	char name[CDP_NAME_MAX + 1];
	uint64_t r = 0, c = 0;
	size_t n;
	long pre;
	int kind = CDP_KEY_TILE;

	if (!key || !scene)
		return CDP_EINVAL;
	if (keylen == 0 || keylen >= CDP_KEY_MAX || memchr(key, '\0', keylen))
		return CDP_EKEY;
	if ((pre = class_prefix(key, keylen)) < 0)
		return CDP_EKEY;
	/* the body: a tile if it parses as one, else a chip of one NAME */
	if (cdp_key_parse(key + pre, keylen - (size_t)pre, name, sizeof name, &r,
	                  &c) == CDP_OK) {
		n = (size_t)pre + strlen(name);
	} else if (name_check_len(key + pre, keylen - (size_t)pre) == CDP_OK) {
		kind = CDP_KEY_CHIP;
		n = keylen;
		r = c = 0;
	} else {
		return CDP_EKEY;
	}
	if (n >= cap)
		return CDP_EINVAL;
	memcpy(scene, key, n);
	scene[n] = '\0';
	if (row)
		*row = r;
	if (col)
		*col = c;
	return kind;
}

int cdp_key_scene_check(const char *s)
{
	size_t len;
	long pre;

	if (!s)
		return CDP_EINVAL;
	len = strnlen(s, CDP_KEY_MAX);
	if (len >= CDP_KEY_MAX || (pre = class_prefix(s, len)) < 0)
		return CDP_EKEY;
	return name_check_len(s + pre, len - (size_t)pre);
}

int cdp_key_chip(char *buf, size_t cap, const char *cls, const char *stem)
{
	int len;

	if (!buf || !stem || cap == 0)
		return CDP_EINVAL;
	buf[0] = '\0';
	if (cdp_key_name_check(stem) != CDP_OK || (cls && cdp_key_name_check(cls) != CDP_OK))
		return CDP_EKEY;
	if (cap > CDP_KEY_MAX)
		cap = CDP_KEY_MAX;
	len = cls ? snprintf(buf, cap, "%s/%s", cls, stem) : snprintf(buf, cap, "%s", stem);
	if (len < 0 || (size_t)len >= cap) {
		buf[0] = '\0';
		return CDP_EKEY;
	}
	return CDP_OK;
}
