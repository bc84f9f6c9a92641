/* cdp_stats.c: per-band statistics (cdp_stats.h); their text form is in
 * cdp_stats_text.c, class histograms in cdp_classes.c.
 *
 * Integer samples are summed in 64-bit block sums that cannot overflow (at
 * most 2^16 samples of at most 16 bits per block) and folded into 128-bit
 * totals; 32-bit samples go straight to 128 bits. Float samples are
 * measured per block of at most 2^16 in passes over the block (extremes;
 * a Neumaier sum of the samples scaled by the block's power of two, which
 * also survives terms larger than the running sum; M2 about that mean) and
 * the block is merged into the band by Chan's formulas, so a 1e300 pixel
 * gives a finite M2 where a sum of squares would be inf. Buffers may be
 * unaligned (LMDB pages), so samples are loaded with memcpy.
 */
#include "cdp_stats.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_stats_int.h"

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
	for (uint32_t t = 0; t < s->targets; t++)
		band_reset(&s->t[t]);
	s->stale = s->marked = 0;
}

int cdp_stats_targets(cdp_stats *s, uint32_t T)
{
	if (s->targets)
		return s->targets == T ? CDP_OK : CDP_ESHAPE;
	if (T == 0 || T > CDP_RECORD_MAXLABEL)
		return CDP_EINVAL;
	if (!(s->t = calloc(T, sizeof *s->t)))
		return CDP_ENOMEM;
	s->targets = T;
	for (uint32_t t = 0; t < T; t++)
		band_reset(&s->t[t]);
	return CDP_OK;
}

void cdp_stats_free(cdp_stats *s)
{
	if (!s)
		return;
	free(s->t);
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

/* e is held in [-1020, 1024] so that 2^-e is a double (2^-1024 is
 * subnormal but exact); a block of subnormal samples then scales to small
 * normal numbers, which costs nothing that matters. */
int cdp_stats_scale_exp(double maxabs)
{
	int e = 0;

	if (maxabs > 0)
		frexp(maxabs, &e);
	return e < -1020 ? -1020 : e;
}

/* Merges a part of nb samples (scaled mean mb and M2 qb at exponent eb,
 * extremes lo..hi) into a, by Chan, Golub and LeVeque: with delta the
 * difference of the means, mean = ma + delta * nb/n and
 * M2 = M2a + M2b + delta^2 * na*nb/n, both at the larger exponent. */
static void float_merge(cdp_band_acc *a, uint64_t nb, int eb, double mb, double qb,
                        double lo, double hi)
{
	double na, nbd, n, ma, qa, delta;
	int e;

	if (!nb)
		return;
	if (!a->count) {
		a->count = nb;
		a->fexp = eb;
		a->smean = mb;
		a->sm2 = qb;
		a->min = lo;
		a->max = hi;
		return;
	}
	e = a->fexp > eb ? a->fexp : eb;
	ma = ldexp(a->smean, a->fexp - e);
	qa = ldexp(a->sm2, 2 * (a->fexp - e));
	mb = ldexp(mb, eb - e);
	qb = ldexp(qb, 2 * (eb - e));
	na = (double)a->count;
	nbd = (double)nb;
	n = na + nbd;
	delta = mb - ma;
	a->smean = ma + delta * (nbd / n);
	a->sm2 = qa + qb + delta * delta * (na / n * nbd);
	a->count += nb;
	a->fexp = e;
	a->min = fmin(a->min, lo);
	a->max = fmax(a->max, hi);
}

static inline double load_float(const void *buf, size_t i, int f32)
{
	return f32 ? (double)LOAD(float, buf, i) : LOAD(double, buf, i);
}

static inline int float_valid(const void *buf, const uint8_t *mask, size_t i, int f32,
                              double *v)
{
	if (mask && mask[i] != 255)
		return 0;
	*v = load_float(buf, i, f32);
	return isfinite(*v);
}

static void add_float(cdp_band_acc *a, const void *samples, int f32, const uint8_t *mask,
                      size_t n)
{
	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t i1 = n - i0 < BLOCK ? n : i0 + BLOCK;
		uint64_t c = 0;
		double lo = INFINITY, hi = -INFINITY, v, sc, sum = 0, comp = 0, m, q = 0, d = 0;
		int e;

		for (size_t i = i0; i < i1; i++) {
			if (!float_valid(samples, mask, i, f32, &v))
				continue;
			c++;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		if (!c)
			continue;
		e = cdp_stats_scale_exp(fmax(fabs(lo), fabs(hi)));
		sc = ldexp(1.0, -e);
		for (size_t i = i0; i < i1; i++)
			if (float_valid(samples, mask, i, f32, &v))
				neumaier(&sum, &comp, v * sc);
		m = (sum + comp) / (double)c;
		/* The second sum corrects M2 for the rounding of m (two-pass
		 * "corrected" form); each term is below 2 in magnitude. */
		for (size_t i = i0; i < i1; i++) {
			if (float_valid(samples, mask, i, f32, &v)) {
				double x = v * sc - m;
				q += x * x;
				d += x;
			}
		}
		q -= d * d / (double)c;
		float_merge(a, c, e, m, q > 0 ? q : 0, lo, hi);
	}
}

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
	case CDP_DT_F32: add_float(a, samples, 1, mask, n); break;
	case CDP_DT_F64: add_float(a, samples, 0, mask, n); break;
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
	if (r->label_kind != CDP_LABEL_F32)
		return CDP_OK;
	if (plane && !r->label)
		return CDP_EINVAL;
	if ((rc = cdp_stats_targets(s, r->label_len)) != CDP_OK)
		return rc;
	/* label (T, H, W) f32: NaN is "no target" and never counts */
	for (uint32_t t = 0; t < s->targets; t++)
		add_float(&s->t[t], (const uint8_t *)r->label + t * plane * 4, 1, NULL, plane);
	return CDP_OK;
}

int cdp_stats_merge(cdp_stats *dst, const cdp_stats *src)
{
	int rc;

	if (dst->dtype != src->dtype || dst->bands != src->bands)
		return CDP_ESHAPE;
	if (src->targets && (rc = cdp_stats_targets(dst, src->targets)) != CDP_OK)
		return rc;
	for (uint32_t t = 0; t < src->targets; t++) {
		const cdp_band_acc *a = &src->t[t];
		float_merge(&dst->t[t], a->count, a->fexp, a->smean, a->sm2, a->min, a->max);
	}
	for (uint32_t i = 0; i < dst->bands; i++) {
		cdp_band_acc *d = &dst->b[i];
		const cdp_band_acc *a = &src->b[i];

		if (!a->count)
			continue;
		if (dst->is_float) {
			float_merge(d, a->count, a->fexp, a->smean, a->sm2, a->min, a->max);
		} else {
			d->count += a->count;
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

static void acc_result(const cdp_band_acc *a, int is_float, double *mean,
                       double *std, double *min, double *max)
{
	double m = NAN, sd = NAN, lo = NAN, hi = NAN;

	if (a->count) {
		if (is_float) {
			/* Rounding may not carry them past what the extremes allow:
			 * (max - min) / 2 is the largest population std there is. */
			double var = a->sm2 / (double)a->count;

			lo = a->min;
			hi = a->max;
			m = fmin(fmax(ldexp(a->smean, a->fexp), lo), hi);
			sd = fmin(ldexp(sqrt(var > 0 ? var : 0), a->fexp), hi / 2 - lo / 2);
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

void cdp_stats_result(const cdp_stats *s, uint32_t b, double *mean,
                      double *std, double *min, double *max)
{
	acc_result(&s->b[b], s->is_float, mean, std, min, max);
}

void cdp_stats_target_result(const cdp_stats *s, uint32_t t, double *mean,
                             double *std, double *min, double *max)
{
	acc_result(&s->t[t], 1, mean, std, min, max);
}

int cdp_stats_wide(const cdp_stats *s, uint32_t b)
{
	const cdp_band_acc *a = &s->b[b];
	double lo, hi;

	if (!a->count)
		return 0;
	lo = s->is_float ? a->min : (double)a->imin;
	hi = s->is_float ? a->max : (double)a->imax;
	/* halves: the difference itself may overflow */
	return hi / 2 - lo / 2 > CDP_STATS_WIDE / 2 || fabs(lo) > FLT_MAX || fabs(hi) > FLT_MAX;
}
