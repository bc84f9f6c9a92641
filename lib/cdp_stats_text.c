/* cdp_stats_text.c: the text form of band statistics (cdp_stats.h), the
 * form cdp-lmdbpack stores in the pool's meta and reads back: 128-bit
 * integer sums in decimal, the scaled float mean and M2 as %.17g with their
 * exponent, so a round trip is exact. Pool version 1's float sums are read
 * and converted.
 */
#include "cdp_stats.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_stats_int.h"

/* Decimal of an unsigned 128-bit integer into buf[40]. */
static const char *u128_str(unsigned __int128 v, char *buf)
{
	char *p = buf + 39;

	*p = '\0';
	do {
		*--p = (char)('0' + (int)(v % 10));
		v /= 10;
	} while (v);
	return p;
}

static const char *i128_str(__int128 v, char *buf)
{
	char *p;

	if (v >= 0)
		return u128_str((unsigned __int128)v, buf);
	p = (char *)u128_str(-(unsigned __int128)v, buf + 1) - 1;
	*p = '-';
	return p;
}

int cdp_text_parse_u128(const char *s, unsigned __int128 *out)
{
	unsigned __int128 v = 0, lim = ~(unsigned __int128)0 / 10;

	if (!*s)
		return CDP_ESYNTAX;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return CDP_ESYNTAX;
		if (v > lim || v * 10 > ~(unsigned __int128)0 - (unsigned)(*s - '0'))
			return CDP_ERANGE;
		v = v * 10 + (unsigned)(*s - '0');
	}
	*out = v;
	return CDP_OK;
}

static int parse_i128(const char *s, __int128 *out)
{
	unsigned __int128 u, lim = (~(unsigned __int128)0) >> 1;
	int neg = *s == '-', rc;

	if ((rc = cdp_text_parse_u128(s + neg, &u)) != CDP_OK)
		return rc;
	if (u > lim + (unsigned)neg)
		return CDP_ERANGE;
	*out = neg ? (__int128)(0 - u) : (__int128)u;
	return CDP_OK;
}

static int parse_dbl(const char *s, double *out)
{
	char *end;

	if (!*s)
		return CDP_ESYNTAX;
	*out = strtod(s, &end);
	return *end ? CDP_ESYNTAX : CDP_OK;
}

int cdp_text_appendf(cdp_buf *out, const char *fmt, ...)
{
	va_list ap;
	int n;
	int rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return CDP_EINVAL;
	if ((rc = cdp_buf_reserve(out, out->len + (size_t)n + 1)) != CDP_OK)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)out->p + out->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	out->len += (size_t)n;
	return CDP_OK;
}

/* One accumulator's lines, "PRE.k.count=" to "PRE.k.std=". */
static int format_acc(cdp_buf *out, const char *pre, unsigned k, const cdp_band_acc *a,
                      int is_float, double mean, double sd, double lo, double hi)
{
	char b1[41], b2[41];
	int rc;

	rc = cdp_text_appendf(out, "%s.%u.count=%llu\n", pre, k, (unsigned long long)a->count);
	if (rc == CDP_OK && is_float)
		rc = cdp_text_appendf(out, "%s.%u.exp=%d\n%s.%u.smean=%.17g\n%s.%u.sm2=%.17g\n",
		                      pre, k, a->fexp, pre, k, a->smean, pre, k, a->sm2);
	else if (rc == CDP_OK)
		rc = cdp_text_appendf(out, "%s.%u.sum=%s\n%s.%u.sumsq=%s\n", pre, k,
		                      i128_str(a->isum, b1), pre, k, u128_str(a->isumsq, b2));
	if (rc == CDP_OK && a->count && !is_float)
		rc = cdp_text_appendf(out, "%s.%u.min=%lld\n%s.%u.max=%lld\n", pre, k,
		                      (long long)a->imin, pre, k, (long long)a->imax);
	else if (rc == CDP_OK)
		rc = cdp_text_appendf(out, "%s.%u.min=%.17g\n%s.%u.max=%.17g\n", pre, k, lo, pre,
		                      k, hi);
	if (rc == CDP_OK)
		rc = cdp_text_appendf(out, "%s.%u.mean=%.17g\n%s.%u.std=%.17g\n", pre, k, mean,
		                      pre, k, sd);
	return rc;
}

int cdp_stats_format(const cdp_stats *s, cdp_buf *out)
{
	double mean, sd, lo, hi;
	int rc;

	out->len = 0;
	rc = cdp_text_appendf(out, "dtype=%s\nbands=%u\n%s", cdp_dtype_name(s->dtype),
	             s->bands, s->stale ? "stale=1\n" : "");
	for (uint32_t i = 0; i < s->bands && rc == CDP_OK; i++) {
		cdp_stats_result(s, i, &mean, &sd, &lo, &hi);
		rc = format_acc(out, "band", i + 1, &s->b[i], s->is_float, mean, sd, lo, hi);
	}
	if (rc == CDP_OK && s->targets)
		rc = cdp_text_appendf(out, "targets=%u\n", s->targets);
	for (uint32_t t = 0; t < s->targets && rc == CDP_OK; t++) {
		cdp_stats_target_result(s, t, &mean, &sd, &lo, &hi);
		rc = format_acc(out, "target", t + 1, &s->t[t], 1, mean, sd, lo, hi);
	}
	return rc;
}

/* Sequential reader of "name=value\n" lines in a fixed order. */
typedef struct line_rd {
	const char *p, *end;
	char val[128];
	const char *pre;      /* "band" or "target": the fields' prefix */
	char *why;            /* what is wrong (cap bytes; NULL: not said) */
	size_t cap;
	char last[64];        /* the name of the line read last */
} line_rd;

/* Says what is wrong, once (the first failure is the cause); returns rc. */
static int say(line_rd *l, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(line_rd *l, int rc, const char *fmt, ...)
{
	va_list ap;

	if (l->why && l->cap && !l->why[0]) {
		va_start(ap, fmt);
		vsnprintf(l->why, l->cap, fmt, ap);
		va_end(ap);
		cdp_msg_escape(l->why, l->cap);   /* it quotes the text's bytes */
	}
	return rc;
}

/* Reads the next line; it must be "<name>=value". */
static int next_field(line_rd *l, const char *name)
{
	size_t nl = strlen(name), vl;
	const char *eol = memchr(l->p, '\n', (size_t)(l->end - l->p));

	snprintf(l->last, sizeof l->last, "%s", name);
	if (!eol || (size_t)(eol - l->p) <= nl || memcmp(l->p, name, nl) != 0 ||
	    l->p[nl] != '=')
		return say(l, CDP_ESYNTAX, "no %s line where it belongs", name);
	vl = (size_t)(eol - l->p) - nl - 1;
	if (vl >= sizeof l->val || memchr(l->p + nl + 1, '\0', vl))
		return say(l, CDP_ESYNTAX, "%s is too long or holds a NUL", name);
	memcpy(l->val, l->p + nl + 1, vl);
	l->val[vl] = '\0';
	l->p = eol + 1;
	return CDP_OK;
}

static int band_field(line_rd *l, unsigned k, const char *what)
{
	char name[64];

	snprintf(name, sizeof name, "%s.%u.%s", l->pre, k, what);
	return next_field(l, name);
}

/* Pool version 1's float sums (Neumaier sums and their compensations). */
typedef struct v1_sums {
	int old;
	double sum, sumc, sumsq, sumsqc;
} v1_sums;

/* The float state: ".exp= .smean= .sm2=", or version 1's four sums into v1.
 * The exponent's range is what cdp_stats_scale_exp and merging give. */
static int float_fields(line_rd *l, unsigned k, cdp_band_acc *a, v1_sums *v1)
{
	char *end;
	long e;
	int rc;

	if ((rc = band_field(l, k, "exp")) == CDP_OK) {
		errno = 0;
		e = strtol(l->val, &end, 10);
		if (*end || end == l->val || errno || e < -1020 || e > 1024)
			return CDP_ESYNTAX;
		a->fexp = (int)e;
		if ((rc = band_field(l, k, "smean")) || (rc = parse_dbl(l->val, &a->smean)) ||
		    (rc = band_field(l, k, "sm2")) || (rc = parse_dbl(l->val, &a->sm2)))
			return rc;
		/* scaled: |mean| <= 1, 0 <= M2 (below 4n, not checked: a merge
		 * rounds) */
		return isfinite(a->sm2) && a->sm2 >= 0 && fabs(a->smean) <= 1 ? CDP_OK
		                                                           : CDP_ESYNTAX;
	}
	v1->old = 1;
	if ((rc = band_field(l, k, "sum")) || (rc = parse_dbl(l->val, &v1->sum)) ||
	    (rc = band_field(l, k, "sumc")) || (rc = parse_dbl(l->val, &v1->sumc)) ||
	    (rc = band_field(l, k, "sumsq")) || (rc = parse_dbl(l->val, &v1->sumsq)) ||
	    (rc = band_field(l, k, "sumsqc")) || (rc = parse_dbl(l->val, &v1->sumsqc)))
		return rc;
	return CDP_OK;
}

/* Version 1's sums of a non-empty band as the scaled mean and M2. Sums that
 * overflowed (a sum of squares of 1e300 is inf, and the std it gave was 0)
 * describe nothing: the band is left empty-valued and the stats stale, which
 * readers refuse and the next cdp-lmdbpack run into the pool rescans. */
static int from_v1(cdp_band_acc *a, const v1_sums *v, int *stale)
{
	double n = (double)a->count, s = v->sum + v->sumc, q = v->sumsq + v->sumsqc;
	double mean = s / n, m2 = q - s * mean;

	a->fexp = 0;
	a->smean = a->sm2 = 0;
	if (!isfinite(s) || !isfinite(q) || !isfinite(m2)) {
		*stale = 1;
		return CDP_OK;
	}
	a->fexp = cdp_stats_scale_exp(fmax(fabs(a->min), fabs(a->max)));
	a->smean = fmin(fmax(ldexp(mean, -a->fexp), -1), 1);
	a->sm2 = m2 > 0 ? ldexp(m2, -2 * a->fexp) : 0;
	return CDP_OK;
}

/* a * b as 256 bits, *hi and *lo */
static void mul_u256(unsigned __int128 a, unsigned __int128 b, unsigned __int128 *hi,
                     unsigned __int128 *lo)
{
	uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64);
	uint64_t b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
	unsigned __int128 p00 = (unsigned __int128)a0 * b0, p01 = (unsigned __int128)a0 * b1;
	unsigned __int128 p10 = (unsigned __int128)a1 * b0, p11 = (unsigned __int128)a1 * b1;
	unsigned __int128 mid = (p00 >> 64) + (uint64_t)p01 + (uint64_t)p10;

	*lo = (mid << 64) | (uint64_t)p00;
	*hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
}

/* An integer band's sums against each other and its dtype: what samples
 * of dtype in [min, max] can give. Exact: with |min|, |max| < 2^32 and
 * count < 2^64, count * min and count * max^2 fit 128 bits, and sum^2 and
 * count * sumsq are compared in 256. */
static int int_consistent(line_rd *l, int dt, unsigned k, const cdp_band_acc *a)
{
	const char *pre = l->pre;
	__int128 n = (__int128)a->count, lo = a->imin, hi = a->imax, s = a->isum;
	unsigned __int128 big, abs_s, h1, l1, h2, l2;
	char b1[41], b2[41];

	if (!a->count) {
		if (a->isum || a->isumsq)
			return say(l, CDP_EFORMAT, "%s %u: count 0 but sum %s and sumsq %s", pre, k,
			           i128_str(a->isum, b1), u128_str(a->isumsq, b2));
		return CDP_OK;
	}
	if (lo > hi)
		return say(l, CDP_EFORMAT, "%s %u: min %lld is above max %lld", pre, k,
		           (long long)lo, (long long)hi);
	if ((double)lo < cdp_dtype_min(dt) || (double)hi > cdp_dtype_max(dt))
		return say(l, CDP_EFORMAT, "%s %u: min %lld or max %lld is outside %s's range", pre,
		           k, (long long)lo, (long long)hi, cdp_dtype_name(dt));
	if (s < n * lo || s > n * hi)
		return say(l, CDP_EFORMAT, "%s %u: sum %s is outside count * min .. count * max "
		           "(%s * %lld .. %lld)", pre, k, i128_str(s, b1), u128_str(a->count, b2),
		           (long long)lo, (long long)hi);
	big = (unsigned __int128)(lo * lo > hi * hi ? lo * lo : hi * hi);
	if (a->isumsq > (unsigned __int128)a->count * big)
		return say(l, CDP_EFORMAT, "%s %u: sumsq %s is above count * max(min^2, max^2)",
		           pre, k, u128_str(a->isumsq, b1));
	abs_s = s < 0 ? -(unsigned __int128)s : (unsigned __int128)s;
	mul_u256(abs_s, abs_s, &h1, &l1);
	mul_u256((unsigned __int128)a->count, a->isumsq, &h2, &l2);
	if (h2 < h1 || (h2 == h1 && l2 < l1))
		return say(l, CDP_EFORMAT, "%s %u: sumsq %s is below sum^2 / count (a negative "
		           "variance)", pre, k, u128_str(a->isumsq, b1));
	return CDP_OK;
}

static int parse_band(line_rd *l, int dt, int is_float, unsigned k, cdp_band_acc *a, int *stale)
{
	v1_sums v1 = { 0 };
	unsigned __int128 u;
	__int128 v;
	double d;
	int rc;

	if ((rc = band_field(l, k, "count")) || (rc = cdp_text_parse_u128(l->val, &u)))
		return rc;
	if (u > UINT64_MAX)
		return CDP_ERANGE;
	a->count = (uint64_t)u;
	if (is_float) {
		if ((rc = float_fields(l, k, a, &v1)))
			return rc;
	} else {
		if ((rc = band_field(l, k, "sum")) || (rc = parse_i128(l->val, &a->isum)) ||
		    (rc = band_field(l, k, "sumsq")) || (rc = cdp_text_parse_u128(l->val, &a->isumsq)))
			return rc;
	}
	for (int i = 0; i < 2; i++) {
		if ((rc = band_field(l, k, i ? "max" : "min")))
			return rc;
		if (!a->count) {
			if (strcmp(l->val, "nan") && strcmp(l->val, "-nan"))
				return say(l, CDP_EFORMAT, "%s %u: count 0 but %s %s", l->pre, k,
				           i ? "max" : "min", l->val);
		} else if (is_float) {
			if ((rc = parse_dbl(l->val, i ? &a->max : &a->min)))
				return rc;
		} else {
			if ((rc = parse_i128(l->val, &v)))
				return rc;
			if (v < INT64_MIN || v > INT64_MAX)
				return CDP_ERANGE;
			*(i ? &a->imax : &a->imin) = (int64_t)v;
		}
	}
	/* Derived values are recomputed from the state; only check syntax. */
	if ((rc = band_field(l, k, "mean")) || (rc = parse_dbl(l->val, &d)) ||
	    (rc = band_field(l, k, "std")) || (rc = parse_dbl(l->val, &d)))
		return rc;
	if (!is_float)
		return int_consistent(l, dt, k, a);
	if (!a->count)
		return CDP_OK;
	if (!(a->min <= a->max) || !isfinite(a->min) || !isfinite(a->max))
		return say(l, CDP_ESYNTAX, "%s %u: min %.17g and max %.17g are not finite and "
		           "ordered", l->pre, k, a->min, a->max);
	return v1.old ? from_v1(a, &v1, stale) : CDP_OK;
}

/* The text form into s; l->why says what is wrong where a check knows. */
static int parse_text(line_rd *l, cdp_stats *s)
{
	uint64_t bands;
	char *end;
	int dt, rc;

	memset(s, 0, sizeof *s);
	if ((rc = next_field(l, "dtype")))
		return rc;
	if (!(dt = cdp_dtype_parse(l->val)))
		return CDP_ESYNTAX;
	if ((rc = next_field(l, "bands")))
		return rc;
	bands = strtoull(l->val, &end, 10);
	if (*end || l->val[0] < '0' || l->val[0] > '9' || bands == 0 ||
	    bands > CDP_RECORD_MAXDIM)
		return CDP_ESYNTAX;
	if ((rc = cdp_stats_init(s, dt, (uint32_t)bands)))
		return rc;
	if (l->p < l->end && strncmp(l->p, "stale=", 6) == 0) {
		if ((rc = next_field(l, "stale")) || strcmp(l->val, "1")) {
			rc = CDP_ESYNTAX;
			goto fail;
		}
		s->stale = s->marked = 1;
	}
	for (uint32_t b = 0; b < s->bands; b++)
		if ((rc = parse_band(l, dt, s->is_float, b + 1, &s->b[b], &s->stale)))
			goto fail;
	/* value labels' targets, in the float form only (they came with it) */
	if (l->p < l->end && strncmp(l->p, "targets=", 8) == 0) {
		uint64_t T;
		if ((rc = next_field(l, "targets")))
			goto fail;
		T = strtoull(l->val, &end, 10);
		if (*end || l->val[0] < '1' || l->val[0] > '9' || T > CDP_RECORD_MAXLABEL) {
			rc = CDP_ESYNTAX;
			goto fail;
		}
		if ((rc = cdp_stats_targets(s, (uint32_t)T)))
			goto fail;
		l->pre = "target";
		for (uint32_t t = 0; t < s->targets; t++)
			if ((rc = parse_band(l, CDP_DT_F64, 1, t + 1, &s->t[t], &s->stale)))
				goto fail;
	}
	if (l->p != l->end) {
		rc = say(l, CDP_ESYNTAX, "a line after the last %s's", l->pre);
		goto fail;
	}
	return CDP_OK;
fail:
	cdp_stats_free(s);
	return rc;
}

int cdp_stats_parse(const char *text, size_t len, cdp_stats *s)
{
	return cdp_stats_parse_why(text, len, s, NULL, 0);
}

int cdp_stats_parse_why(const char *text, size_t len, cdp_stats *s, char *why, size_t cap)
{
	line_rd l = { text, text + len, "", "band", why, cap, "" };
	int rc;

	if (why && cap)
		why[0] = '\0';
	rc = parse_text(&l, s);
	/* a number that does not parse, or is out of range */
	if (rc != CDP_OK)
		say(&l, rc, "%s=%s: %s", l.last, l.val, cdp_strerror(rc));
	return rc;
}

