/* test_stats.c: cdp_stats and cdp_classes.
 *
 * Integer statistics must be exact where doubles are not (u32 values near
 * 2^32 with a standard deviation of 0.5), merging halves must equal adding
 * the whole, the text form must restore the state bit for bit, and float sums
 * must be compensated. Float statistics stay finite for any finite samples
 * (1e300, DBL_MAX), merge to what one pass gives, and pool version 1's float
 * sums still read. Value labels' targets are counted as float bands.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_stats.h"
#include "tap.h"

static int same_double(double a, double b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

/* Field-by-field equality (the struct has padding) of n accumulators. */
static int same_accs(const cdp_band_acc *a, const cdp_band_acc *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const cdp_band_acc *x = &a[i], *y = &b[i];
		if (x->count != y->count || x->isum != y->isum ||
		    x->isumsq != y->isumsq || x->imin != y->imin || x->imax != y->imax ||
		    x->fexp != y->fexp || !same_double(x->smean, y->smean) ||
		    !same_double(x->sm2, y->sm2) ||
		    !same_double(x->min, y->min) || !same_double(x->max, y->max))
			return 0;
	}
	return 1;
}

static int same_stats(const cdp_stats *a, const cdp_stats *b)
{
	return a->dtype == b->dtype && a->bands == b->bands && a->stale == b->stale &&
	       a->targets == b->targets && same_accs(a->b, b->b, a->bands) &&
	       same_accs(a->t, b->t, a->targets);
}

static void roundtrip(const cdp_stats *s, const char *what)
{
	cdp_buf t = {0}, t2 = {0};
	cdp_stats r;

	CHECK_RC(cdp_stats_format(s, &t), CDP_OK);
	CHECK_RC(cdp_stats_parse((const char *)t.p, t.len, &r), CDP_OK);
	CHECK(same_stats(s, &r), "%s: parse(format(s)) differs from s:\n%s", what, (char *)t.p);
	CHECK_RC(cdp_stats_format(&r, &t2), CDP_OK);
	CHECK(t.len == t2.len && memcmp(t.p, t2.p, t.len) == 0, "%s: text changed on round trip", what);
	cdp_stats_free(&r);
	cdp_buf_free(&t);
	cdp_buf_free(&t2);
}

static void test_u32_exact(void)
{
	enum { N = 1000 };
	uint32_t v[N];
	cdp_stats s;
	double mean, sd, lo, hi;

	for (int i = 0; i < N; i++)
		v[i] = i % 2 ? 4294967295u : 4294967294u;
	CHECK_RC(cdp_stats_init(&s, CDP_DT_U32, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(s.b[0].count == N, "count %llu", (unsigned long long)s.b[0].count);
	CHECK(s.b[0].isum == (__int128)N * 4294967294u + N / 2, "u32 sum not exact");
	CHECK(mean == 4294967294.5, "mean %.17g", mean);
	CHECK(sd == 0.5, "std %.17g, want 0.5 (cancellation?)", sd);
	CHECK(lo == 4294967294.0 && hi == 4294967295.0, "min %g max %g", lo, hi);
	roundtrip(&s, "u32");
	cdp_stats_free(&s);
}

static void test_i16_negative_mask(void)
{
	int16_t v[6] = { -3, -2, -3, 30000, -2, -32768 };
	uint8_t m[6] = { 255, 255, 255, 0, 255, 1 };
	cdp_stats s;
	double mean, sd, lo, hi;

	CHECK_RC(cdp_stats_init(&s, CDP_DT_I16, 2), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, v, m, 6), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 1, v, NULL, 6), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(s.b[0].count == 4, "masked count %llu", (unsigned long long)s.b[0].count);
	CHECK(mean == -2.5 && sd == 0.5, "mean %.17g std %.17g", mean, sd);
	CHECK(lo == -3 && hi == -2, "min %g max %g", lo, hi);
	cdp_stats_result(&s, 1, &mean, &sd, &lo, &hi);
	CHECK(s.b[1].count == 6 && lo == -32768 && hi == 30000, "unmasked band");
	CHECK(s.b[1].isum == -3 - 2 - 3 + 30000 - 2 - 32768, "i16 sum");
	CHECK(s.b[1].isumsq == 9 + 4 + 9 + 900000000u + 4 + 1073741824u, "i16 sumsq");
	CHECK_RC(cdp_stats_add(&s, 2, v, NULL, 6), CDP_EINVAL);
	roundtrip(&s, "i16");
	cdp_stats_free(&s);
}

/* Mean and std against a long-double two-pass reference on random u16. */
static void test_u16_reference(void)
{
	enum { N = 200000 };
	uint16_t *v = malloc(N * sizeof *v);
	uint64_t x = 12345;
	long double sum = 0, m2 = 0;
	cdp_stats s;
	double mean, sd;

	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = (uint16_t)(60000 + (x >> 60));
		sum += v[i];
	}
	for (int i = 0; i < N; i++)
		m2 += (v[i] - sum / N) * (v[i] - sum / N);
	CHECK_RC(cdp_stats_init(&s, CDP_DT_U16, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, NULL, NULL);
	CHECK(fabs(mean - (double)(sum / N)) <= 1e-15 * mean, "mean %.17g vs %.17Lg", mean, sum / N);
	CHECK(fabs(sd - (double)sqrtl(m2 / N)) <= 1e-12 * sd, "std %.17g vs %.17Lg", sd, sqrtl(m2 / N));
	cdp_stats_free(&s);
	free(v);
}

static void test_float(void)
{
	double v[5] = { 1e16, 1.0, -1e16, NAN, INFINITY };
	float f[4] = { 1.5f, -2.0f, NAN, -INFINITY };
	cdp_stats s, t;
	double mean, sd, lo, hi;

	CHECK_RC(cdp_stats_init(&s, CDP_DT_F64, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, 5), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(s.b[0].count == 3, "nan/inf counted: %llu", (unsigned long long)s.b[0].count);
	CHECK(fabs(mean - 1.0 / 3) < 1e-15, "compensated mean %.17g, want 1/3", mean);
	CHECK(lo == -1e16 && hi == 1e16, "min/max");
	roundtrip(&s, "f64");
	cdp_stats_free(&s);

	CHECK_RC(cdp_stats_init(&s, CDP_DT_F32, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, f, NULL, 4), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(s.b[0].count == 2 && mean == -0.25 && sd == 1.75, "f32 mean %g std %g", mean, sd);
	/* An empty band formats as nan and round-trips. */
	CHECK_RC(cdp_stats_init(&t, CDP_DT_F32, 2), CDP_OK);
	CHECK_RC(cdp_stats_merge(&t, &s), CDP_ESHAPE);
	roundtrip(&t, "empty f32");
	cdp_stats_free(&t);
	cdp_stats_free(&s);
}

/* Folding per-item accumulators through the text form (as the packer does
 * across transactions) is bit-identical to folding in memory; for integers,
 * any split merges to the whole. */
static void test_fold_merge(void)
{
	enum { N = 5000, ITEMS = 10 };
	float *f = malloc(N * sizeof *f);
	uint8_t *u = malloc(N);
	uint64_t x = 99;
	cdp_stats mem, disk, item, whole, a, b;
	cdp_buf t = {0};

	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		f[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 1e4 - 3e3);
		u[i] = (uint8_t)(x >> 56);
	}
	CHECK_RC(cdp_stats_init(&mem, CDP_DT_F32, 1), CDP_OK);
	CHECK_RC(cdp_stats_init(&disk, CDP_DT_F32, 1), CDP_OK);
	CHECK_RC(cdp_stats_init(&item, CDP_DT_F32, 1), CDP_OK);
	for (int k = 0; k < ITEMS; k++) {
		cdp_stats_reset(&item);
		CHECK_RC(cdp_stats_add(&item, 0, f + k * (N / ITEMS), NULL, N / ITEMS), CDP_OK);
		CHECK_RC(cdp_stats_merge(&mem, &item), CDP_OK);
		CHECK_RC(cdp_stats_merge(&disk, &item), CDP_OK);
		CHECK_RC(cdp_stats_format(&disk, &t), CDP_OK);
		cdp_stats_free(&disk);
		CHECK_RC(cdp_stats_parse((const char *)t.p, t.len, &disk), CDP_OK);
	}
	CHECK(same_stats(&mem, &disk), "fold through text differs from fold in memory");
	cdp_stats_free(&mem);
	cdp_stats_free(&disk);
	cdp_stats_free(&item);

	CHECK_RC(cdp_stats_init(&whole, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_init(&a, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_init(&b, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&whole, 0, u, NULL, N), CDP_OK);
	CHECK_RC(cdp_stats_add(&b, 0, u + 1234, NULL, N - 1234), CDP_OK);
	CHECK_RC(cdp_stats_add(&a, 0, u, NULL, 1234), CDP_OK);
	CHECK_RC(cdp_stats_merge(&b, &a), CDP_OK);
	CHECK(same_stats(&whole, &b), "u8 merge of halves differs from the whole");
	cdp_stats_free(&whole);
	cdp_stats_free(&a);
	cdp_stats_free(&b);
	cdp_buf_free(&t);
	free(f);
	free(u);
}

static void test_record_and_parse_errors(void)
{
	uint16_t img[2 * 2 * 3] = { 1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60 };
	uint8_t mask[6] = { 255, 0, 255, 255, 0, 255 };
	cdp_record r = { .dtype = CDP_DT_U16, .bands = 2, .height = 2, .width = 3,
	                 .flags = CDP_REC_MASK, .image = img, .mask = mask };
	cdp_stats s;
	cdp_buf t = {0};
	double mean;
	const char *bad[] = {
		"dtype=u8\nbands=1\nband.1.count=1\n",
		"dtype=u9\nbands=1\n",
		"dtype=u8\nbands=0\n",
		"dtype=u8\nbands=1\nband.1.count=1\nband.1.sumsq=1\nband.1.sum=1\n"
		"band.1.min=1\nband.1.max=1\nband.1.mean=1\nband.1.std=0\n",
		"dtype=u8\nbands=1\nband.1.count=0\nband.1.sum=0\nband.1.sumsq=0\n"
		"band.1.min=0\nband.1.max=nan\nband.1.mean=nan\nband.1.std=nan\n",
		"dtype=u8\nbands=1\nband.1.count=1\nband.1.sum=1\nband.1.sumsq=1\n"
		"band.1.min=1\nband.1.max=1\nband.1.mean=1\nband.1.std=0\nextra=1\n",
	};

	CHECK_RC(cdp_stats_init(&s, CDP_DT_U16, 2), CDP_OK);
	CHECK_RC(cdp_stats_add_record(&s, &r), CDP_OK);
	cdp_stats_result(&s, 1, &mean, NULL, NULL, NULL);
	CHECK(s.b[0].count == 4 && s.b[0].isum == 1 + 3 + 4 + 6, "record band 1 uses the mask");
	CHECK(mean == 35.0, "record band 2 mean %g", mean);
	r.bands = 1;
	CHECK_RC(cdp_stats_add_record(&s, &r), CDP_ESHAPE);
	s.stale = 1;
	roundtrip(&s, "stale u16");
	CHECK_RC(cdp_stats_format(&s, &t), CDP_OK);
	for (size_t cut = 0; cut + 1 < t.len; cut += 7) {
		cdp_stats p;
		int rc = cdp_stats_parse((const char *)t.p, cut, &p);
		CHECK(rc != CDP_OK, "truncated stats text (%zu bytes) parsed", cut);
		if (rc == CDP_OK)
			cdp_stats_free(&p);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cdp_stats p;
		int rc = cdp_stats_parse(bad[i], strlen(bad[i]), &p);
		CHECK(rc != CDP_OK, "bad stats text %zu parsed", i);
		if (rc == CDP_OK)
			cdp_stats_free(&p);
	}
	cdp_buf_free(&t);
	cdp_stats_free(&s);
}

/* One integer band's text: dtype, count, sum, sumsq, min, max. */
static int parse_one(const char *dt, const char *n, const char *sum, const char *sq,
                     const char *lo, const char *hi, char *why, size_t cap)
{
	char text[512];
	cdp_stats p;
	int rc;

	snprintf(text, sizeof text, "dtype=%s\nbands=1\nband.1.count=%s\nband.1.sum=%s\n"
	         "band.1.sumsq=%s\nband.1.min=%s\nband.1.max=%s\nband.1.mean=0\nband.1.std=0\n",
	         dt, n, sum, sq, lo, hi);
	rc = cdp_stats_parse_why(text, strlen(text), &p, why, cap);
	if (rc == CDP_OK)
		cdp_stats_free(&p);
	return rc;
}

/* Integer sums that no samples of the dtype give are refused, saying which
 * band and why; the bounds are exact at their edges (a constant band sits
 * on both sumsq bounds, values near 2^32 with counts near 2^64 need more
 * than 128 bits). */
static void test_sums_consistent(void)
{
	static const struct { const char *dt, *n, *sum, *sq, *lo, *hi, *why; } c[] = {
		{ "u8", "4096", "999999999", "1000", "0", "244",
		  "band 1: sum 999999999 is outside count * min .. count * max (4096 * 0 .. 244)" },
		{ "u8", "4096", "390530", "1", "0", "244",
		  "band 1: sumsq 1 is below sum^2 / count (a negative variance)" },
		{ "u8", "4096", "390530", "250000000", "0", "244",
		  "band 1: sumsq 250000000 is above count * max(min^2, max^2)" },
		{ "u8", "4096", "390530", "50000000", "300", "244",
		  "band 1: min 300 is above max 244" },
		{ "u8", "1", "300", "90000", "300", "300",
		  "band 1: min 300 or max 300 is outside u8's range" },
		{ "i16", "1", "-40000", "1600000000", "-40000", "-40000",
		  "band 1: min -40000 or max -40000 is outside i16's range" },
		{ "u16", "0", "5", "25", "nan", "nan", "band 1: count 0 but sum 5 and sumsq 25" },
		{ "u16", "2", "3", "5", "1", "x", "band.1.max=x: syntax error" },
		/* i16 -3, 1: sumsq 10 is 2 * max(9, 1) at most */
		{ "i16", "2", "-2", "19", "-3", "1",
		  "band 1: sumsq 19 is above count * max(min^2, max^2)" },
		/* two u32 4294967295 and one 4294967294 (n * sumsq vs sum^2 needs 256
		 * bits): sumsq one below the least */
		{ "u32", "3", "12884901884", "55340232186768916485", "4294967294", "4294967295",
		  "band 1: sumsq 55340232186768916485 is below sum^2 / count (a negative variance)" },
	};
	char why[256];

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int rc = parse_one(c[i].dt, c[i].n, c[i].sum, c[i].sq, c[i].lo, c[i].hi, why,
		                   sizeof why);
		CHECK(rc != CDP_OK && strcmp(why, c[i].why) == 0, "case %zu: rc %d why '%s', want '%s'",
		      i, rc, why, c[i].why);
	}
	/* at the edges: constant bands (sumsq = sum^2 / n = n * max^2), and the
	 * u32 case's least sumsq; the count 2^64-1 of the largest u32 */
	CHECK_RC(parse_one("i16", "3", "-98304", "3221225472", "-32768", "-32768", why, sizeof why),
	         CDP_OK);
	CHECK_RC(parse_one("u32", "3", "12884901884", "55340232186768916486", "4294967294",
	                   "4294967295", why, sizeof why), CDP_OK);
	CHECK_RC(parse_one("u32", "18446744073709551615", "79228162495817593515539431425",
	                   "340282366762482138434845932253270245375", "4294967295", "4294967295",
	                   why, sizeof why), CDP_OK);
	CHECK_RC(parse_one("i32", "2", "-4294967296", "9223372036854775808", "-2147483648",
	                   "-2147483648", why, sizeof why), CDP_OK);
	CHECK_RC(parse_one("i32", "2", "-4294967296", "9223372036854775807", "-2147483648",
	                   "-2147483648", why, sizeof why), CDP_EFORMAT);
}

static void test_classes(void)
{
	uint8_t l8[6] = { 0, 1, 1, 255, 4, 1 };
	uint16_t l16[4] = { 700, 3, 65535, 700 };
	cdp_record r = { .label_kind = CDP_LABEL_U8, .height = 2, .width = 3,
	                 .label = l8, .label_ignore = 255 };
	cdp_classes c = {0}, d = {0}, p = {0};
	cdp_buf t = {0};

	CHECK_RC(cdp_classes_add_record(&c, &r), CDP_OK);
	CHECK(c.len == 5 && c.n[0] == 1 && c.n[1] == 3 && c.n[4] == 1 &&
	      cdp_classes_total(&c) == 5, "u8 histogram excluding ignore");
	r.label_kind = CDP_LABEL_U16;
	r.height = 2; r.width = 2; r.label = l16; r.label_ignore = 65535;
	CHECK_RC(cdp_classes_add_record(&d, &r), CDP_OK);
	CHECK(d.len == 701 && d.n[700] == 2 && d.n[3] == 1, "u16 histogram");
	r.label_kind = CDP_LABEL_CLASS;
	r.class_id = 2;
	CHECK_RC(cdp_classes_add_record(&d, &r), CDP_OK);
	r.class_id = CDP_CLASS_MAX;
	CHECK_RC(cdp_classes_add_record(&d, &r), CDP_ERANGE);
	r.label_kind = CDP_LABEL_NONE;
	CHECK_RC(cdp_classes_add_record(&d, &r), CDP_OK);
	CHECK_RC(cdp_classes_merge(&c, &d), CDP_OK);
	CHECK(cdp_classes_total(&c) == 9 && c.n[2] == 1 && c.n[3] == 1, "merged total");

	CHECK_RC(cdp_classes_format(&c, &t), CDP_OK);
	CHECK(strcmp((char *)t.p, "class.0=1\nclass.1=3\nclass.2=1\nclass.3=1\n"
	             "class.4=1\nclass.700=2\n") == 0, "classes text: %s", (char *)t.p);
	CHECK_RC(cdp_classes_parse((char *)t.p, t.len, &p), CDP_OK);
	CHECK(p.len == c.len && memcmp(p.n, c.n, c.len * sizeof *c.n) == 0, "classes round trip");
	CHECK_RC(cdp_classes_parse("class.2=1\nclass.1=1\n", 20, &p), CDP_ESYNTAX);
	CHECK_RC(cdp_classes_parse("class.1=0\n", 10, &p), CDP_ESYNTAX);
	CHECK_RC(cdp_classes_parse("class.1=1", 9, &p), CDP_ESYNTAX);
	CHECK_RC(cdp_classes_parse("class.70000=1\n", 14, &p), CDP_ERANGE);
	CHECK_RC(cdp_classes_parse("", 0, &p), CDP_OK);
	CHECK(cdp_classes_total(&p) == 0, "empty classes text");
	cdp_classes_free(&c);
	cdp_classes_free(&d);
	cdp_classes_free(&p);
	cdp_buf_free(&t);
}

static int close_to(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want);
}

/* Issue 25 case 12: one huge pixel made sumsq inf and the std 0 (f64), or
 * the band's std 8e35 (f32). Every result stays finite and right, and a
 * band that cannot be standardized in float32 is flagged. */
static void test_extremes(void)
{
	enum { N = 1000 };
	double *v = calloc(N, sizeof *v), mean, sd, lo, hi;
	float *f = calloc(N, sizeof *f);
	cdp_stats s;

	for (int i = 0; i < N; i++) {
		v[i] = i % 7;
		f[i] = (float)(i % 5);
	}
	CHECK_RC(cdp_stats_init(&s, CDP_DT_F64, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	CHECK(!cdp_stats_wide(&s, 0), "0..6 flagged wide");
	cdp_stats_reset(&s);
	v[17] = 1e300;
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	/* the others are negligible: mean 1e300/N, std 1e300*sqrt(N-1)/N */
	CHECK(close_to(mean, 1e300 / N, 1e-12), "1e300: mean %.17g", mean);
	CHECK(close_to(sd, 1e300 * sqrt(N - 1.0) / N, 1e-12), "1e300: std %.17g", sd);
	CHECK(cdp_stats_wide(&s, 0), "1e300 not flagged wide");
	roundtrip(&s, "f64 1e300");

	cdp_stats_reset(&s);
	v[17] = -1e300;
	v[18] = 1e300;
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(isfinite(mean) && fabs(mean) < 1e290, "+-1e300: mean %.17g", mean);
	CHECK(close_to(sd, 1e300 * sqrt(2.0 / N), 1e-12), "+-1e300: std %.17g", sd);

	cdp_stats_reset(&s);
	v[17] = -DBL_MAX;
	v[18] = DBL_MAX;
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(isfinite(mean) && isfinite(sd) && close_to(sd, DBL_MAX * sqrt(2.0 / N), 1e-12),
	      "+-DBL_MAX: mean %.17g std %.17g", mean, sd);
	for (int i = 0; i < N; i++)
		v[i] = DBL_MAX;
	cdp_stats_reset(&s);
	CHECK_RC(cdp_stats_add(&s, 0, v, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(mean == DBL_MAX && sd == 0, "all DBL_MAX: mean %.17g std %.17g", mean, sd);
	cdp_stats_free(&s);

	CHECK_RC(cdp_stats_init(&s, CDP_DT_F32, 1), CDP_OK);
	f[3] = 3e38f;
	CHECK_RC(cdp_stats_add(&s, 0, f, NULL, N), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(close_to(sd, (double)3e38f * sqrt(N - 1.0) / N, 1e-9), "f32 3e38: std %.17g", sd);
	CHECK(cdp_stats_wide(&s, 0), "f32 3e38 not flagged wide");
	cdp_stats_free(&s);
	free(v);
	free(f);
}

/* Per-record parts merged through the text form (as the packer folds them,
 * record by record and transaction by transaction) give what one pass over
 * all samples gives, for values far from 0 (cancellation) and for values
 * whose squares overflow, in any split. */
static void test_float_merge_one_pass(void)
{
	enum { N = 70000 };   /* more than one block of cdp_stats_add */
	static const double base[] = { 1e9, 1e300, -3e-300 };
	double *v = malloc(N * sizeof *v);
	uint64_t x = 7;
	cdp_buf t = {0};

	for (size_t k = 0; k < sizeof base / sizeof base[0]; k++) {
		cdp_stats one, acc, part;
		long double sum = 0, m2 = 0, m;
		double mean, sd, mean1, sd1;

		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			v[i] = base[k] * (1 + (double)(x >> 11) / 9007199254740992.0);
			sum += v[i] / base[k];
		}
		m = sum / N;
		for (int i = 0; i < N; i++)
			m2 += (v[i] / base[k] - m) * (v[i] / base[k] - m);
		CHECK_RC(cdp_stats_init(&one, CDP_DT_F64, 1), CDP_OK);
		CHECK_RC(cdp_stats_init(&acc, CDP_DT_F64, 1), CDP_OK);
		CHECK_RC(cdp_stats_init(&part, CDP_DT_F64, 1), CDP_OK);
		CHECK_RC(cdp_stats_add(&one, 0, v, NULL, N), CDP_OK);
		for (int i = 0, len = 1; i < N; i += len, len = len * 3 + 1) {
			if (len > N - i)
				len = N - i;
			cdp_stats_reset(&part);
			CHECK_RC(cdp_stats_add(&part, 0, v + i, NULL, (size_t)len), CDP_OK);
			CHECK_RC(cdp_stats_merge(&acc, &part), CDP_OK);
			CHECK_RC(cdp_stats_format(&acc, &t), CDP_OK);
			cdp_stats_free(&acc);
			CHECK_RC(cdp_stats_parse((const char *)t.p, t.len, &acc), CDP_OK);
		}
		cdp_stats_result(&one, 0, &mean1, &sd1, NULL, NULL);
		cdp_stats_result(&acc, 0, &mean, &sd, NULL, NULL);
		CHECK(acc.b[0].count == N, "merged count");
		CHECK(close_to(mean1, (double)(m * base[k]), 1e-14) &&
		      close_to(sd1, (double)(sqrtl(m2 / N)) * fabs(base[k]), 1e-12),
		      "base %g: one pass mean %.17g std %.17g, want %.17Lg %.17Lg", base[k],
		      mean1, sd1, m * base[k], sqrtl(m2 / N) * fabs(base[k]));
		CHECK(close_to(mean, mean1, 1e-14) && close_to(sd, sd1, 1e-12),
		      "base %g: merged mean %.17g std %.17g, one pass %.17g %.17g", base[k],
		      mean, sd, mean1, sd1);
		cdp_stats_free(&one);
		cdp_stats_free(&acc);
		cdp_stats_free(&part);
	}
	cdp_buf_free(&t);
	free(v);
}

/* Pool version 1 wrote float bands as Neumaier sums; they read as before,
 * and sums that overflowed come back stale rather than as std 0. */
static void test_v1_float(void)
{
	static const char ok[] =
		"dtype=f32\nbands=1\nband.1.count=2\nband.1.sum=-0.5\nband.1.sumc=0\n"
		"band.1.sumsq=6.25\nband.1.sumsqc=0\nband.1.min=-2\nband.1.max=1.5\n"
		"band.1.mean=-0.25\nband.1.std=1.75\n";
	static const char inf[] =
		"dtype=f64\nbands=1\nband.1.count=3\nband.1.sum=1e300\nband.1.sumc=0\n"
		"band.1.sumsq=inf\nband.1.sumsqc=-nan\nband.1.min=0\nband.1.max=1e300\n"
		"band.1.mean=3.3e299\nband.1.std=0\n";
	cdp_stats s;
	double mean, sd;

	CHECK_RC(cdp_stats_parse(ok, strlen(ok), &s), CDP_OK);
	cdp_stats_result(&s, 0, &mean, &sd, NULL, NULL);
	CHECK(mean == -0.25 && sd == 1.75 && !s.stale, "v1 f32: mean %.17g std %.17g", mean, sd);
	roundtrip(&s, "v1 f32 converted");
	cdp_stats_free(&s);
	CHECK_RC(cdp_stats_parse(inf, strlen(inf), &s), CDP_OK);
	CHECK(s.stale, "v1 sums that overflowed are not stale");
	roundtrip(&s, "v1 overflowed");
	cdp_stats_free(&s);
}

/* The one rule for class names (the pool's and the checkpoint's). */
static void test_class_name(void)
{
	char why[128], name[CDP_CLASS_NAME_MAX + 2];

	CHECK(cdp_class_name_ok("for\xc3\xaat", why, sizeof why), "UTF-8 refused: %s", why);
	CHECK(!cdp_class_name_ok("", why, sizeof why) && !strcmp(why, "is empty"), "empty: %s", why);
	CHECK(!cdp_class_name_ok("a\tb", why, sizeof why) &&
	      !strcmp(why, "has a control character at byte 2"), "tab: %s", why);
	CHECK(!cdp_class_name_ok("\xc2\x85", why, sizeof why), "C1 accepted");
	CHECK(!cdp_class_name_ok("ok\xff", why, sizeof why) &&
	      !strcmp(why, "is not UTF-8 at byte 3"), "bad UTF-8: %s", why);
	memset(name, 'n', sizeof name);
	name[CDP_CLASS_NAME_MAX] = '\0';
	CHECK(cdp_class_name_ok(name, why, sizeof why), "255 bytes refused");
	name[CDP_CLASS_NAME_MAX] = 'n';
	name[CDP_CLASS_NAME_MAX + 1] = '\0';
	CHECK(!cdp_class_name_ok(name, why, sizeof why) &&
	      !strcmp(why, "is longer than 255 bytes"), "256 bytes: %s", why);
}

/* Value labels' targets: finite targets only (NaN is no target, the image
 * mask does not apply), merged halves as the whole, the text round trip,
 * another target count refused, no classes. */
static void test_targets(void)
{
	uint8_t img[3] = { 1, 2, 3 };
	uint8_t mask[3] = { 255, 0, 255 };
	/* (T=2, 1, 3): plane 1 {1, NaN, 3}, plane 2 {-2, 4, 10} */
	float lab[6] = { 1, NAN, 3, -2, 4, 10 };
	cdp_record r = { .dtype = CDP_DT_U8, .bands = 1, .height = 1, .width = 3,
	                 .label_kind = CDP_LABEL_F32, .label_len = 2, .flags = CDP_REC_MASK,
	                 .image = img, .label = lab, .mask = mask };
	cdp_stats s, h1, h2;
	cdp_classes c = {0};
	double mean, sd, lo, hi;

	CHECK_RC(cdp_stats_init(&s, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_add_record(&s, &r), CDP_OK);
	CHECK(s.targets == 2 && s.t[0].count == 2 && s.t[1].count == 3,
	      "targets %u, counts %llu %llu", s.targets,
	      (unsigned long long)(s.targets ? s.t[0].count : 0),
	      (unsigned long long)(s.targets > 1 ? s.t[1].count : 0));
	cdp_stats_target_result(&s, 0, &mean, &sd, &lo, &hi);
	CHECK(mean == 2 && sd == 1 && lo == 1 && hi == 3, "target 1: %g %g %g %g", mean, sd, lo, hi);
	cdp_stats_target_result(&s, 1, &mean, &sd, &lo, &hi);
	CHECK(fabs(mean - 4) < 1e-15 && fabs(sd - sqrt(24)) < 1e-14 && lo == -2 && hi == 10,
	      "target 2: %g %g %g %g", mean, sd, lo, hi);
	CHECK_RC(cdp_stats_add_record(&s, &r), CDP_OK);
	roundtrip(&s, "targets");
	/* merged halves: the same as both added to one */
	CHECK_RC(cdp_stats_init(&h1, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_init(&h2, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_add_record(&h2, &r), CDP_OK);
	CHECK_RC(cdp_stats_merge(&h1, &h2), CDP_OK);
	CHECK_RC(cdp_stats_merge(&h1, &h2), CDP_OK);
	CHECK(h1.targets == 2 && h1.t[1].count == 6, "merge into an accumulator without targets");
	cdp_stats_target_result(&h1, 1, &mean, NULL, NULL, NULL);
	CHECK(fabs(mean - 4) < 1e-15, "merged target 2 mean %g", mean);
	r.label_len = 1;
	CHECK_RC(cdp_stats_add_record(&s, &r), CDP_ESHAPE);
	cdp_stats_free(&h2);
	CHECK_RC(cdp_stats_init(&h2, CDP_DT_U8, 1), CDP_OK);
	CHECK_RC(cdp_stats_add_record(&h2, &r), CDP_OK);
	CHECK_RC(cdp_stats_merge(&s, &h2), CDP_ESHAPE);
	CHECK_RC(cdp_classes_add_record(&c, &r), CDP_OK);
	CHECK(cdp_classes_total(&c) == 0, "values counted as classes");
	cdp_classes_free(&c);
	cdp_stats_free(&h1);
	cdp_stats_free(&h2);
	cdp_stats_free(&s);
}

int main(void)
{
	test_u32_exact();
	test_i16_negative_mask();
	test_u16_reference();
	test_float();
	test_fold_merge();
	test_extremes();
	test_float_merge_one_pass();
	test_v1_float();
	test_record_and_parse_errors();
	test_sums_consistent();
	test_classes();
	test_targets();
	test_class_name();
	return tap_done();
}
