/* cdp_stats.c: exact per-band statistics and class histograms (cdp_stats.h).
 *
 * Integer samples are summed in 64-bit block sums that cannot overflow (at
 * most 2^16 samples of at most 16 bits per block) and folded into 128-bit
 * totals; 32-bit samples go straight to 128 bits. Float samples use
 * Neumaier's variant of Kahan summation, which also survives terms larger
 * than the running sum. Buffers may be unaligned (LMDB pages), so samples are
 * loaded with memcpy.
 */
#include "cdp_stats.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"

#define LOAD(T, buf, i) \
	({ T v_; memcpy(&v_, (const unsigned char *)(buf) + (i) * sizeof(T), sizeof(T)); v_; })

/* Block length for the 64-bit partial sums: 2^16 * (2^16)^2 < 2^64. */
#define BLOCK 65536

static int is_float_dtype(int dt)
{
	return dt == CDP_DT_F32 || dt == CDP_DT_F64;
}

static void band_reset(cdp_band_acc *a)
{
	memset(a, 0, sizeof *a);
	a->imin = INT64_MAX;
	a->imax = INT64_MIN;
	a->min = INFINITY;
	a->max = -INFINITY;
}

int cdp_stats_init(cdp_stats *s, int dtype, uint32_t bands)
{
	memset(s, 0, sizeof *s);
	if (!cdp_dtype_size(dtype))
		return CDP_EUNSUP;
	if (bands == 0 || bands > CDP_RECORD_MAXDIM)
		return CDP_EINVAL;
	s->b = calloc(bands, sizeof *s->b);
	if (!s->b)
		return CDP_ENOMEM;
	s->dtype = dtype;
	s->is_float = is_float_dtype(dtype);
	s->bands = bands;
	cdp_stats_reset(s);
	return CDP_OK;
}

void cdp_stats_reset(cdp_stats *s)
{
	for (uint32_t b = 0; b < s->bands; b++)
		band_reset(&s->b[b]);
	s->stale = 0;
}

void cdp_stats_free(cdp_stats *s)
{
	if (!s)
		return;
	free(s->b);
	memset(s, 0, sizeof *s);
}

/* Neumaier: *sum + *c carries the exact running total to about one ulp. */
static inline void neumaier(double *sum, double *c, double x)
{
	double t = *sum + x;

	if (fabs(*sum) >= fabs(x))
		*c += (*sum - t) + x;
	else
		*c += (x - t) + *sum;
	*sum = t;
}

/* u8: a 256-bin histogram per block, then exact sums over the bins. This is
 * one increment per pixel instead of a multiply, two adds and two compares,
 * and it is what keeps cdp-lmdbpack near the speed of the disk (perf showed
 * the general loop at a quarter of the packer's time). Four interleaved
 * histograms avoid the store-to-load stall of runs of equal values. */
static void add_u8(cdp_band_acc *a, const uint8_t *v, const uint8_t *mask, size_t n)
{
	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t i1 = n - i0 < BLOCK ? n : i0 + BLOCK, i = i0;
		uint32_t h[4][256];

		memset(h, 0, sizeof h);
		if (mask) {
			for (; i < i1; i++)
				h[i & 3][v[i]] += mask[i] == 255;
		} else {
			for (; i + 4 <= i1; i += 4) {
				h[0][v[i]]++; h[1][v[i + 1]]++;
				h[2][v[i + 2]]++; h[3][v[i + 3]]++;
			}
			for (; i < i1; i++)
				h[0][v[i]]++;
		}
		for (int64_t x = 0; x < 256; x++) {
			uint64_t c = (uint64_t)h[0][x] + h[1][x] + h[2][x] + h[3][x];

			if (!c)
				continue;
			a->count += c;
			a->isum += (__int128)(x * (int64_t)c);
			a->isumsq += (unsigned __int128)((uint64_t)(x * x) * c);
			if (x < a->imin) a->imin = x;
			if (x > a->imax) a->imax = x;
		}
	}
}

/* Other small integer types: 64-bit block sums, then 128-bit totals. */
#define ADD_SMALL(T) do { \
	for (size_t i0 = 0; i0 < n; i0 += BLOCK) { \
		size_t i1 = n - i0 < BLOCK ? n : i0 + BLOCK; \
		int64_t bs = 0; uint64_t bq = 0, bn = 0; \
		int64_t lo = a->imin, hi = a->imax; \
		for (size_t i = i0; i < i1; i++) { \
			if (mask && mask[i] != 255) \
				continue; \
			int64_t v = LOAD(T, samples, i); \
			bs += v; bq += (uint64_t)(v * v); bn++; \
			if (v < lo) lo = v; \
			if (v > hi) hi = v; \
		} \
		a->isum += bs; a->isumsq += bq; a->count += bn; \
		a->imin = lo; a->imax = hi; \
	} \
} while (0)

#define ADD_WIDE(T) do { \
	for (size_t i = 0; i < n; i++) { \
		if (mask && mask[i] != 255) \
			continue; \
		int64_t v = LOAD(T, samples, i); \
		a->isum += v; \
		a->isumsq += (unsigned __int128)((__int128)v * v); \
		a->count++; \
		if (v < a->imin) a->imin = v; \
		if (v > a->imax) a->imax = v; \
	} \
} while (0)

#define ADD_FLOAT(T) do { \
	for (size_t i = 0; i < n; i++) { \
		if (mask && mask[i] != 255) \
			continue; \
		double v = LOAD(T, samples, i); \
		if (!isfinite(v)) \
			continue; \
		neumaier(&a->sum, &a->sumc, v); \
		neumaier(&a->sumsq, &a->sumsqc, v * v); \
		a->count++; \
		if (v < a->min) a->min = v; \
		if (v > a->max) a->max = v; \
	} \
} while (0)

int cdp_stats_add(cdp_stats *s, uint32_t band, const void *samples,
                  const uint8_t *mask, size_t n)
{
	cdp_band_acc *a;

	if (!s || band >= s->bands || (n && !samples))
		return CDP_EINVAL;
	a = &s->b[band];
	switch (s->dtype) {
	case CDP_DT_U8:  add_u8(a, samples, mask, n); break;
	case CDP_DT_U16: ADD_SMALL(uint16_t); break;
	case CDP_DT_I16: ADD_SMALL(int16_t); break;
	case CDP_DT_U32: ADD_WIDE(uint32_t); break;
	case CDP_DT_I32: ADD_WIDE(int32_t); break;
	case CDP_DT_F32: ADD_FLOAT(float); break;
	case CDP_DT_F64: ADD_FLOAT(double); break;
	default: return CDP_EUNSUP;
	}
	return CDP_OK;
}

int cdp_stats_add_record(cdp_stats *s, const cdp_record *r)
{
	size_t plane = (size_t)r->height * r->width;
	size_t bytes = plane * cdp_dtype_size(r->dtype);
	const uint8_t *mask = (r->flags & CDP_REC_MASK) ? r->mask : NULL;
	int rc;

	if (r->dtype != s->dtype || r->bands != s->bands)
		return CDP_ESHAPE;
	if (plane && !r->image)
		return CDP_EINVAL;
	for (uint32_t b = 0; b < r->bands; b++) {
		rc = cdp_stats_add(s, b, (const uint8_t *)r->image + b * bytes, mask, plane);
		if (rc != CDP_OK)
			return rc;
	}
	return CDP_OK;
}

int cdp_stats_merge(cdp_stats *dst, const cdp_stats *src)
{
	if (dst->dtype != src->dtype || dst->bands != src->bands)
		return CDP_ESHAPE;
	for (uint32_t i = 0; i < dst->bands; i++) {
		cdp_band_acc *d = &dst->b[i];
		const cdp_band_acc *a = &src->b[i];

		if (!a->count)
			continue;
		d->count += a->count;
		if (dst->is_float) {
			neumaier(&d->sum, &d->sumc, a->sum);
			d->sumc += a->sumc;
			neumaier(&d->sumsq, &d->sumsqc, a->sumsq);
			d->sumsqc += a->sumsqc;
			d->min = fmin(d->min, a->min);
			d->max = fmax(d->max, a->max);
		} else {
			d->isum += a->isum;
			d->isumsq += a->isumsq;
			if (a->imin < d->imin) d->imin = a->imin;
			if (a->imax > d->imax) d->imax = a->imax;
		}
	}
	dst->stale |= src->stale;
	return CDP_OK;
}

/* Population variance from exact integer sums. With S = q*n + r (floor
 * division, 0 <= r < n): n*var = (Q - q*(S + r)) - r^2/n, where the bracket
 * is an exact non-negative integer below 2^128, computed modulo 2^128. */
static double int_var(const cdp_band_acc *a)
{
	__int128 n = (__int128)a->count, q = a->isum / n, r = a->isum % n;
	unsigned __int128 A;
	long double m2;

	if (r < 0) {
		q -= 1;
		r += n;
	}
	A = a->isumsq - (unsigned __int128)q * (unsigned __int128)(a->isum + r);
	m2 = (long double)A - (long double)r * (long double)r / (long double)n;
	if (m2 < 0)
		m2 = 0;
	return (double)(m2 / (long double)n);
}

void cdp_stats_result(const cdp_stats *s, uint32_t b, double *mean,
                      double *std, double *min, double *max)
{
	const cdp_band_acc *a = &s->b[b];
	double m = NAN, sd = NAN, lo = NAN, hi = NAN;

	if (a->count) {
		if (s->is_float) {
			double n = (double)a->count, var;

			m = (a->sum + a->sumc) / n;
			var = (a->sumsq + a->sumsqc) / n - m * m;
			sd = sqrt(var > 0 ? var : 0);
			lo = a->min;
			hi = a->max;
		} else {
			m = (double)((long double)a->isum / (long double)a->count);
			sd = sqrt(int_var(a));
			lo = (double)a->imin;
			hi = (double)a->imax;
		}
	}
	if (mean) *mean = m;
	if (std) *std = sd;
	if (min) *min = lo;
	if (max) *max = hi;
}

/* ---- text form ---------------------------------------------------------- */

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

static int parse_u128(const char *s, unsigned __int128 *out)
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

	if ((rc = parse_u128(s + neg, &u)) != CDP_OK)
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

static int appendf(cdp_buf *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int appendf(cdp_buf *out, const char *fmt, ...)
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

int cdp_stats_format(const cdp_stats *s, cdp_buf *out)
{
	char b1[41], b2[41];
	int rc;

	out->len = 0;
	rc = appendf(out, "dtype=%s\nbands=%u\n%s", cdp_dtype_name(s->dtype),
	             s->bands, s->stale ? "stale=1\n" : "");
	for (uint32_t i = 0; i < s->bands && rc == CDP_OK; i++) {
		const cdp_band_acc *a = &s->b[i];
		unsigned k = i + 1;
		double mean, sd, lo, hi;

		cdp_stats_result(s, i, &mean, &sd, &lo, &hi);
		rc = appendf(out, "band.%u.count=%llu\n", k, (unsigned long long)a->count);
		if (rc == CDP_OK && s->is_float)
			rc = appendf(out, "band.%u.sum=%.17g\nband.%u.sumc=%.17g\n"
			             "band.%u.sumsq=%.17g\nband.%u.sumsqc=%.17g\n",
			             k, a->sum, k, a->sumc, k, a->sumsq, k, a->sumsqc);
		else if (rc == CDP_OK)
			rc = appendf(out, "band.%u.sum=%s\nband.%u.sumsq=%s\n",
			             k, i128_str(a->isum, b1), k, u128_str(a->isumsq, b2));
		if (rc == CDP_OK && a->count && !s->is_float)
			rc = appendf(out, "band.%u.min=%lld\nband.%u.max=%lld\n",
			             k, (long long)a->imin, k, (long long)a->imax);
		else if (rc == CDP_OK)
			rc = appendf(out, "band.%u.min=%.17g\nband.%u.max=%.17g\n",
			             k, lo, k, hi);
		if (rc == CDP_OK)
			rc = appendf(out, "band.%u.mean=%.17g\nband.%u.std=%.17g\n",
			             k, mean, k, sd);
	}
	return rc;
}

/* Sequential reader of "name=value\n" lines in a fixed order. */
typedef struct line_rd {
	const char *p, *end;
	char val[128];
} line_rd;

/* Reads the next line; it must be "<name>=value". */
static int next_field(line_rd *l, const char *name)
{
	size_t nl = strlen(name), vl;
	const char *eol = memchr(l->p, '\n', (size_t)(l->end - l->p));

	if (!eol || (size_t)(eol - l->p) <= nl || memcmp(l->p, name, nl) != 0 ||
	    l->p[nl] != '=')
		return CDP_ESYNTAX;
	vl = (size_t)(eol - l->p) - nl - 1;
	if (vl >= sizeof l->val || memchr(l->p + nl + 1, '\0', vl))
		return CDP_ESYNTAX;
	memcpy(l->val, l->p + nl + 1, vl);
	l->val[vl] = '\0';
	l->p = eol + 1;
	return CDP_OK;
}

static int band_field(line_rd *l, unsigned k, const char *what)
{
	char name[64];

	snprintf(name, sizeof name, "band.%u.%s", k, what);
	return next_field(l, name);
}

static int parse_band(line_rd *l, const cdp_stats *s, unsigned k, cdp_band_acc *a)
{
	unsigned __int128 u;
	__int128 v;
	double d;
	int rc;

	if ((rc = band_field(l, k, "count")) || (rc = parse_u128(l->val, &u)))
		return rc;
	if (u > UINT64_MAX)
		return CDP_ERANGE;
	a->count = (uint64_t)u;
	if (s->is_float) {
		if ((rc = band_field(l, k, "sum")) || (rc = parse_dbl(l->val, &a->sum)) ||
		    (rc = band_field(l, k, "sumc")) || (rc = parse_dbl(l->val, &a->sumc)) ||
		    (rc = band_field(l, k, "sumsq")) || (rc = parse_dbl(l->val, &a->sumsq)) ||
		    (rc = band_field(l, k, "sumsqc")) || (rc = parse_dbl(l->val, &a->sumsqc)))
			return rc;
	} else {
		if ((rc = band_field(l, k, "sum")) || (rc = parse_i128(l->val, &a->isum)) ||
		    (rc = band_field(l, k, "sumsq")) || (rc = parse_u128(l->val, &a->isumsq)))
			return rc;
	}
	for (int i = 0; i < 2; i++) {
		if ((rc = band_field(l, k, i ? "max" : "min")))
			return rc;
		if (!a->count) {
			if (strcmp(l->val, "nan") && strcmp(l->val, "-nan"))
				return CDP_ESYNTAX;
		} else if (s->is_float) {
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
	return CDP_OK;
}

int cdp_stats_parse(const char *text, size_t len, cdp_stats *s)
{
	line_rd l = { text, text + len, "" };
	uint64_t bands;
	char *end;
	int dt, rc;

	memset(s, 0, sizeof *s);
	if ((rc = next_field(&l, "dtype")))
		return rc;
	if (!(dt = cdp_dtype_parse(l.val)))
		return CDP_ESYNTAX;
	if ((rc = next_field(&l, "bands")))
		return rc;
	bands = strtoull(l.val, &end, 10);
	if (*end || l.val[0] < '0' || l.val[0] > '9' || bands == 0 ||
	    bands > CDP_RECORD_MAXDIM)
		return CDP_ESYNTAX;
	if ((rc = cdp_stats_init(s, dt, (uint32_t)bands)))
		return rc;
	if (l.p < l.end && strncmp(l.p, "stale=", 6) == 0) {
		if ((rc = next_field(&l, "stale")) || strcmp(l.val, "1")) {
			rc = CDP_ESYNTAX;
			goto fail;
		}
		s->stale = 1;
	}
	for (uint32_t b = 0; b < s->bands; b++)
		if ((rc = parse_band(&l, s, b + 1, &s->b[b])))
			goto fail;
	if (l.p != l.end) {
		rc = CDP_ESYNTAX;
		goto fail;
	}
	return CDP_OK;
fail:
	cdp_stats_free(s);
	return rc;
}

/* ---- class histogram ---------------------------------------------------- */

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
		return CDP_OK;
	case CDP_LABEL_CLASS:
		return cdp_classes_add(c, r->class_id, 1);
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
		if (c->n[k] && (rc = appendf(out, "class.%zu=%llu\n", k,
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
		if ((rc = parse_u128(line + 6, &id)) || (rc = parse_u128(eq + 1, &n)))
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
