/* cdp_num.c: strict number parsing and overflow-checked size arithmetic.
 *
 * strtoll() and friends are lenient: they skip leading white space, accept an
 * empty string as 0, stop at the first bad character and wrap "-1" into a huge
 * unsigned value. Each parser here wraps them with the checks that make a
 * number either exactly what the user typed or an error: decimal only (no
 * octal "010", no hex), no white space anywhere, the whole string consumed,
 * errno ERANGE mapped to CDP_ERANGE, then the caller's [min, max] applied.
 * *out is written only on success.
 */
#include "cdp_num.h"
#include "cdp_error.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* An optional sign (if allowed) followed by one or more decimal digits and
 * nothing else. Checking this first leaves strto*() only the range to judge. */
static int is_decimal(const char *s, int sign_ok)
{
	if (sign_ok && (*s == '+' || *s == '-'))
		s++;
	if (!is_digit(*s))
		return 0;
	while (is_digit(*s))
		s++;
	return *s == '\0';
}

int cdp_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !out)
		return CDP_EINVAL;
	if (!is_decimal(s, 1))
		return CDP_ESYNTAX;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return CDP_ERANGE;
	if (errno != 0 || *end != '\0')
		return CDP_ESYNTAX;
	if (v < min || v > max)
		return CDP_ERANGE;
	*out = v;
	return CDP_OK;
}

int cdp_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !out)
		return CDP_EINVAL;
	/* A '-' would make strtoull() negate silently: "-1" -> 2^64-1. Only
	 * "-0" (0, as the signed parsers and strtod read it) passes. */
	if (s[0] == '-' && is_decimal(s + 1, 0) && strspn(s + 1, "0") == strlen(s + 1))
		s++;
	if (!is_decimal(s, 0) && !(s[0] == '+' && is_decimal(s + 1, 0)))
		return CDP_ESYNTAX;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return CDP_ERANGE;
	if (errno != 0 || *end != '\0')
		return CDP_ESYNTAX;
	if (v < min || v > max)
		return CDP_ERANGE;
	*out = v;
	return CDP_OK;
}

int cdp_parse_int(const char *s, int min, int max, int *out)
{
	int64_t v;
	int rc;

	if (!out)
		return CDP_EINVAL;
	rc = cdp_parse_i64(s, min, max, &v);
	if (rc == CDP_OK)
		*out = (int)v;
	return rc;
}

/* "inf", "+Infinity", "-inf", ... as strtod() spells infinity. */
static int is_inf_word(const char *s)
{
	if (*s == '+' || *s == '-')
		s++;
	return strcasecmp(s, "inf") == 0 || strcasecmp(s, "infinity") == 0;
}

/* Decimal floating point: sign, digits with at most one '.', and an optional
 * exponent. Rejects strtod()'s hex floats and nan, and any white space. */
static int is_decimal_float(const char *s)
{
	int digits = 0;

	if (*s == '+' || *s == '-')
		s++;
	while (is_digit(*s)) {
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		while (is_digit(*s)) {
			s++;
			digits++;
		}
	}
	if (digits == 0)
		return 0;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!is_digit(*s))
			return 0;
		while (is_digit(*s))
			s++;
	}
	return *s == '\0';
}

int cdp_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !out || isnan(min) || isnan(max))
		return CDP_EINVAL;
	if (is_inf_word(s)) {
		/* Infinity is a value only where the range reaches it. */
		v = s[0] == '-' ? -INFINITY : INFINITY;
		if (v < 0 ? min != -INFINITY : max != INFINITY)
			return CDP_ERANGE;
		*out = v;
		return CDP_OK;
	}
	if (!is_decimal_float(s))
		return CDP_ESYNTAX;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0')
		return CDP_ESYNTAX;
	/* ERANGE also flags underflow; a tiny number rounded towards 0 is
	 * still the number the user meant, overflow to HUGE_VAL is not. */
	if (errno == ERANGE && isinf(v))
		return CDP_ERANGE;
	if (v < min || v > max)
		return CDP_ERANGE;
	*out = v;
	return CDP_OK;
}

int cdp_parse_float(const char *s, float min, float max, float *out)
{
	double v;
	float f;
	int rc;

	if (isnan(min) || isnan(max))
		return CDP_EINVAL;
	rc = cdp_parse_double(s, min == -INFINITY ? -INFINITY : -DBL_MAX,
	                      max == INFINITY ? INFINITY : DBL_MAX, &v);
	if (rc != CDP_OK)
		return rc;
	f = (float)v;
	if ((isinf(f) && !isinf(v)) || f < min || f > max)
		return CDP_ERANGE;
	*out = f;
	return CDP_OK;
}

/* The exponent as the man pages write it: 1e6 and 1e-30, not 1e+06. */
static void tidy_exponent(char *buf)
{
	char *e = strchr(buf, 'e'), *d, *src;

	if (!e)
		return;
	d = e + 1;
	if (*d == '+')
		memmove(d, d + 1, strlen(d));
	else if (*d == '-')
		d++;
	for (src = d; *src == '0' && src[1]; src++)
		;
	memmove(d, src, strlen(src) + 1);
}

/* %.Ng of v for the least N from digits up to most that reads back as v
 * (as a float when as_float: 9 digits always do, 17 for a double), the
 * exponent tidied */
static const char *shortest(double v, int digits, int most, int as_float, char *buf,
                            size_t cap)
{
	for (; digits <= most; digits++) {
		snprintf(buf, cap, "%.*g", digits, v);
		if (as_float ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
			break;
	}
	tidy_exponent(buf);
	return buf;
}

const char *cdp_float_str(float v, char *buf, size_t cap)
{
	return shortest(v, 6, 9, 1, buf, cap);
}

const char *cdp_double_str(double v, char *buf, size_t cap)
{
	return shortest(v, 6, 17, 0, buf, cap);
}

const char *cdp_double_str_digits(double v, int digits, char *buf, size_t cap)
{
	return shortest(v, digits < 1 ? 1 : digits > 17 ? 17 : digits, 17, 0, buf, cap);
}

int cdp_parse_decimal(const char *s, uint64_t *num, uint64_t *den)
{
	uint64_t d = 0, p10 = 1;
	long scale = 0, e = 0;      /* the value is d * 10^-scale */
	int neg = 0, esign = 1;

	if (!s || !num || !den)
		return CDP_EINVAL;
	if (!is_decimal_float(s))
		return CDP_ESYNTAX;
	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	/* digits, leading zeros skipped; the first 19 significant ones must
	 * fit, and any after them must be zeros (a multiple of ten) */
	for (int frac = 0; *s && *s != 'e' && *s != 'E'; s++) {
		if (*s == '.') {
			frac = 1;
			continue;
		}
		if (d > (UINT64_MAX - 9) / 10) {
			if (*s != '0')
				return CDP_ERANGE;
			if (!frac)
				scale--;    /* 10^k: carried by the scale */
			continue;
		}
		d = d * 10 + (uint64_t)(*s - '0');
		scale += frac;
	}
	if (*s) {
		s++;
		if (*s == '+' || *s == '-')
			esign = *s++ == '-' ? -1 : 1;
		for (; *s; s++)
			if (e < 100000)
				e = e * 10 + (*s - '0');
	}
	if (d == 0) {
		*num = 0;
		*den = 1;
		return CDP_OK;
	}
	if (neg)
		return CDP_ERANGE;
	scale -= esign * e;
	while (scale > 0 && d % 10 == 0) {
		d /= 10;
		scale--;
	}
	for (; scale < 0; scale++) {
		if (d > UINT64_MAX / 10)
			return CDP_ERANGE;
		d *= 10;
	}
	if (scale > 18)
		return CDP_ERANGE;
	while (scale-- > 0)
		p10 *= 10;
	*num = d;
	*den = p10;
	return CDP_OK;
}

/* Multiplier of a size suffix, or 0 if the suffix is not one we accept:
 * "", or one of K M G T (either case) optionally followed by "iB". */
static uint64_t size_suffix(const char *suf)
{
	static const char letters[] = "KMGT";
	const char *p;
	uint64_t mult = 1;

	if (*suf == '\0')
		return 1;
	if (*suf >= 'a' && *suf <= 'z')
		p = strchr(letters, *suf - 'a' + 'A');
	else
		p = strchr(letters, *suf);
	if (!p)
		return 0;
	if (strcmp(suf + 1, "") != 0 && strcmp(suf + 1, "iB") != 0)
		return 0;
	for (int i = 0; i <= (int)(p - letters); i++)
		mult *= 1024;
	return mult;
}

int cdp_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *p;
	char num[32];
	uint64_t v, mult;
	size_t len;
	int rc;

	if (!s || !out)
		return CDP_EINVAL;
	for (p = s; is_digit(*p); p++)
		;
	len = (size_t)(p - s);
	if (len == 0)
		return CDP_ESYNTAX;
	mult = size_suffix(p);
	if (mult == 0)
		return CDP_ESYNTAX;
	if (len >= sizeof num)
		return CDP_ERANGE;      /* more digits than any uint64_t */
	memcpy(num, s, len);
	num[len] = '\0';
	rc = cdp_parse_u64(num, 0, UINT64_MAX, &v);
	if (rc != CDP_OK)
		return rc;
	if (v > UINT64_MAX / mult)
		return CDP_ERANGE;
	v *= mult;
	if (v < min || v > max)
		return CDP_ERANGE;
	*out = v;
	return CDP_OK;
}

int cdp_parse_int_list(const char *s, int min, int max, int *out, size_t cap,
                       size_t *n)
{
	char *copy, *item, *comma;
	size_t count = 0;
	int rc = CDP_OK;

	if (!s || !n || (cap > 0 && !out))
		return CDP_EINVAL;
	copy = strdup(s);
	if (!copy)
		return CDP_ENOMEM;
	/* Walk the items by hand: strtok() would skip empty ones ("1,,2"). */
	item = copy;
	for (;;) {
		int v;

		comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if (*item == '\0') {
			rc = CDP_ESYNTAX;
			break;
		}
		rc = cdp_parse_int(item, min, max, &v);
		if (rc != CDP_OK)
			break;
		if (count == cap) {
			rc = CDP_ERANGE;
			break;
		}
		out[count++] = v;
		if (!comma)
			break;
		item = comma + 1;
	}
	free(copy);
	if (rc == CDP_OK)
		*n = count;
	return rc;
}

int cdp_mul_size(size_t a, size_t b, size_t *out)
{
	if (!out)
		return CDP_EINVAL;
	if (b != 0 && a > SIZE_MAX / b)
		return CDP_EOVERFLOW;
	*out = a * b;
	return CDP_OK;
}

int cdp_add_size(size_t a, size_t b, size_t *out)
{
	if (!out)
		return CDP_EINVAL;
	if (a > SIZE_MAX - b)
		return CDP_EOVERFLOW;
	*out = a + b;
	return CDP_OK;
}
