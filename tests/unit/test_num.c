/* test_num.c: the strict number parsers and the overflow-checked arithmetic.
 *
 * Each parser must accept exactly the documented syntax and give CDP_ESYNTAX
 * for the inputs strto*() would quietly accept (white space, trailing junk,
 * empty strings, hex, "-1" as unsigned, nan), CDP_ERANGE outside [min, max]
 * or the type, and leave *out alone on failure.
 */
#include "cdp_error.h"
#include "cdp_num.h"
#include "tap.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <stdint.h>

static void test_i64(void)
{
	static const char *const bad[] = { "", " 1", "1 ", "1x", "0x10", "+",
		"-", "--1", "1.0", "1e3", "\t5", "5\n" };
	int64_t v = 7;

	CHECK_RC(cdp_parse_i64("0", INT64_MIN, INT64_MAX, &v), CDP_OK);
	CHECK(v == 0, "got %" PRId64, v);
	CHECK_RC(cdp_parse_i64("-42", -100, 100, &v), CDP_OK);
	CHECK(v == -42, "got %" PRId64, v);
	CHECK_RC(cdp_parse_i64("+42", -100, 100, &v), CDP_OK);
	CHECK(v == 42, "got %" PRId64, v);
	/* Decimal, not octal. */
	CHECK_RC(cdp_parse_i64("010", 0, 100, &v), CDP_OK);
	CHECK(v == 10, "\"010\" gave %" PRId64, v);
	CHECK_RC(cdp_parse_i64("9223372036854775807", INT64_MIN, INT64_MAX, &v), CDP_OK);
	CHECK(v == INT64_MAX, "max");
	CHECK_RC(cdp_parse_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &v), CDP_OK);
	CHECK(v == INT64_MIN, "min");
	CHECK_RC(cdp_parse_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_i64("-9223372036854775809", INT64_MIN, INT64_MAX, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_i64("101", 0, 100, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_i64("-1", 0, 100, &v), CDP_ERANGE);
	v = 7;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(cdp_parse_i64(bad[i], INT64_MIN, INT64_MAX, &v) == CDP_ESYNTAX,
		      "\"%s\" accepted", bad[i]);
	CHECK(v == 7, "*out written on failure");
}

static void test_u64_int(void)
{
	uint64_t u = 3;
	int i = 3;

	CHECK_RC(cdp_parse_u64("18446744073709551615", 0, UINT64_MAX, &u), CDP_OK);
	CHECK(u == UINT64_MAX, "max u64");
	CHECK_RC(cdp_parse_u64("18446744073709551616", 0, UINT64_MAX, &u), CDP_ERANGE);
	u = 3;
	/* strtoull() would return 2^64-1 for "-1". */
	CHECK_RC(cdp_parse_u64("-1", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	/* -0 is 0, as for the signed parsers (--seed -0 as --batch -0 would be) */
	u = 7;
	CHECK_RC(cdp_parse_u64("-0", 0, UINT64_MAX, &u), CDP_OK);
	CHECK(u == 0, "-0 read as %llu", (unsigned long long)u);
	CHECK_RC(cdp_parse_u64("-000", 0, UINT64_MAX, &u), CDP_OK);
	CHECK_RC(cdp_parse_u64("-0", 1, UINT64_MAX, &u), CDP_ERANGE);
	CHECK_RC(cdp_parse_u64("-01", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_u64("-", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	u = 3;
	CHECK_RC(cdp_parse_u64(" 1", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_u64("", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	CHECK(u == 3, "*out written on failure");
	CHECK_RC(cdp_parse_u64("5", 6, 10, &u), CDP_ERANGE);
	CHECK_RC(cdp_parse_u64("+5", 0, 10, &u), CDP_OK);
	CHECK(u == 5, "+5");

	CHECK_RC(cdp_parse_int("2147483647", INT32_MIN, INT32_MAX, &i), CDP_OK);
	CHECK(i == INT32_MAX, "int max");
	CHECK_RC(cdp_parse_int("2147483648", INT32_MIN, INT32_MAX, &i), CDP_ERANGE);
	CHECK_RC(cdp_parse_int("-2147483649", INT32_MIN, INT32_MAX, &i), CDP_ERANGE);
	CHECK_RC(cdp_parse_int("0", 1, 64, &i), CDP_ERANGE);
	CHECK_RC(cdp_parse_int("64", 1, 64, &i), CDP_OK);
	CHECK(i == 64, "64");
	CHECK_RC(cdp_parse_int("6 4", 1, 64, &i), CDP_ESYNTAX);
}

static void test_double(void)
{
	static const char *const bad[] = { "", " 1", "1 ", "nan", "NaN", "-nan",
		"0x1p3", "1e", "1e+", ".", "e5", "1.2.3", "1,5", "infinite" };
	double d = 2.5;

	CHECK_RC(cdp_parse_double("0.5", 0, 1, &d), CDP_OK);
	CHECK(d == 0.5, "0.5");
	CHECK_RC(cdp_parse_double("-1.25e-3", -1, 1, &d), CDP_OK);
	CHECK(d == -1.25e-3, "-1.25e-3");
	CHECK_RC(cdp_parse_double(".5", 0, 1, &d), CDP_OK);
	CHECK_RC(cdp_parse_double("5.", 0, 10, &d), CDP_OK);
	CHECK(d == 5.0, "5.");
	CHECK_RC(cdp_parse_double("1.0000001", 0, 1, &d), CDP_ERANGE);
	CHECK_RC(cdp_parse_double("1e999", -HUGE_VAL, HUGE_VAL, &d), CDP_ERANGE);
	/* Underflow is a tiny number, not an error. */
	CHECK_RC(cdp_parse_double("1e-400", -1, 1, &d), CDP_OK);
	CHECK(d >= 0 && d < 1e-300, "1e-400 gave %g", d);
	d = 2.5;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(cdp_parse_double(bad[i], -HUGE_VAL, HUGE_VAL, &d) == CDP_ESYNTAX,
		      "\"%s\" accepted", bad[i]);
	CHECK(d == 2.5, "*out written on failure");
	/* Infinity only where the range is infinite on that side. */
	CHECK_RC(cdp_parse_double("inf", 0, 1e308, &d), CDP_ERANGE);
	CHECK_RC(cdp_parse_double("-inf", -1e308, HUGE_VAL, &d), CDP_ERANGE);
	CHECK_RC(cdp_parse_double("inf", 0, HUGE_VAL, &d), CDP_OK);
	CHECK(isinf(d) && d > 0, "inf");
	CHECK_RC(cdp_parse_double("-Infinity", -HUGE_VAL, 0, &d), CDP_OK);
	CHECK(isinf(d) && d < 0, "-Infinity");
}

/* cdp_parse_float: bounds that are float constants accept the decimals
 * they were written as (cdp-model(5)'s beta1=0.999999, adam_eps=1e-30) */
static void test_float(void)
{
	char buf[32];
	float f = 2.5f;

	CHECK_RC(cdp_parse_float("0.999999", 0, 0.999999f, &f), CDP_OK);
	CHECK(f == 0.999999f, "0.999999 gave %.9g", (double)f);
	CHECK_RC(cdp_parse_float("1e-30", 1e-30f, 1, &f), CDP_OK);
	CHECK(f == 1e-30f, "1e-30");
	CHECK_RC(cdp_parse_float("0.99999994", 0, 0.99999994f, &f), CDP_OK);
	/* rounds to the bound as a float: the value kept is the bound */
	CHECK_RC(cdp_parse_float("0.99999995", 0, 0.99999994f, &f), CDP_OK);
	CHECK(f == 0.99999994f, "0.99999995 gave %.9g", (double)f);
	CHECK_RC(cdp_parse_float("1", 0, 0.99999994f, &f), CDP_ERANGE);
	CHECK_RC(cdp_parse_float("0.99999", 0, 0.999f, &f), CDP_ERANGE);
	CHECK_RC(cdp_parse_float("1e39", 0, HUGE_VALF, &f), CDP_ERANGE);
	CHECK_RC(cdp_parse_float("inf", 0, 1e30f, &f), CDP_ERANGE);
	CHECK_RC(cdp_parse_float("inf", 0, HUGE_VALF, &f), CDP_OK);
	CHECK_RC(cdp_parse_float("x", 0, 1, &f), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_float("-1", 0, 1, &f), CDP_ERANGE);
	CHECK(strcmp(cdp_float_str(0.99999994f, buf, sizeof buf), "0.99999994") == 0, "%s", buf);
	CHECK(strcmp(cdp_float_str(0.999999f, buf, sizeof buf), "0.999999") == 0, "%s", buf);
	CHECK(strcmp(cdp_float_str(1e-30f, buf, sizeof buf), "1e-30") == 0, "%s", buf);
	CHECK(strcmp(cdp_float_str(1e6f, buf, sizeof buf), "1e6") == 0, "%s", buf);
	CHECK(strcmp(cdp_float_str(0, buf, sizeof buf), "0") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(1e300, buf, sizeof buf), "1e300") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(2.5e-7, buf, sizeof buf), "2.5e-7") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(100, buf, sizeof buf), "100") == 0, "%s", buf);
	/* the fewest digits that read back: two values 1e-7 apart differ
	 * (%g printed both as 0.123457), 0.1 stays 0.1, and 17 digits are
	 * the most a double needs */
	CHECK(strcmp(cdp_double_str(0.1234567, buf, sizeof buf), "0.1234567") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(0.1234568, buf, sizeof buf), "0.1234568") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(0.1, buf, sizeof buf), "0.1") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(1e-9, buf, sizeof buf), "1e-9") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(0.1 + 0.2, buf, sizeof buf), "0.30000000000000004") == 0, "%s",
	      buf);
	CHECK(strcmp(cdp_double_str(1234567, buf, sizeof buf), "1234567") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str(1e7, buf, sizeof buf), "1e7") == 0, "%s", buf);
	/* at least the digits asked for: a coordinate keeps its integer part */
	CHECK(strcmp(cdp_double_str_digits(5e6, 7, buf, sizeof buf), "5000000") == 0, "%s", buf);
	CHECK(strcmp(cdp_double_str_digits(500000.000002, 6, buf, sizeof buf), "500000.000002") == 0,
	      "%s", buf);
	CHECK(strcmp(cdp_double_str_digits(-1, 1, buf, sizeof buf), "-1") == 0, "%s", buf);
}

/* cdp_parse_decimal: what the user wrote, exactly (0.145 is not the
 * double 0.14499999999999999) */
static void test_decimal(void)
{
	static const struct { const char *s; uint64_t num, den; } ok[] = {
		{ "0.145", 145, 1000 }, { ".5", 5, 10 }, { "0.50", 5, 10 }, { "5e-2", 5, 100 },
		{ "1e-1", 1, 10 }, { "0", 0, 1 }, { "-0", 0, 1 }, { "+0.000", 0, 1 },
		{ "3", 3, 1 }, { "2.5e1", 25, 1 }, { "0.0000000000000000011e1", 11, 1000000000000000000u },
		{ "0.071", 71, 1000 }, { "00.9995", 9995, 10000 }, { "5.", 5, 1 },
		{ "1e-18", 1, 1000000000000000000u }, { "0.123456789012345678000000", 123456789012345678u, 1000000000000000000u },
		{ "123456789012345678000e-21", 123456789012345678u, 1000000000000000000u },
		{ "120000000000000000000000e-23", 12, 10 },
	};
	static const char *const range[] = { "1e-19", "0.1234567890123456789", "-0.5", "1e20",
		"99999999999999999999", "123456789012345678901e-2" };
	uint64_t n = 7, d = 7;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int rc = cdp_parse_decimal(ok[i].s, &n, &d);
		CHECK(rc == CDP_OK && n == ok[i].num && d == ok[i].den,
		      "\"%s\": rc %d, %llu/%llu", ok[i].s, rc, (unsigned long long)n,
		      (unsigned long long)d);
	}
	for (size_t i = 0; i < sizeof range / sizeof range[0]; i++)
		CHECK(cdp_parse_decimal(range[i], &n, &d) == CDP_ERANGE, "\"%s\" not ERANGE", range[i]);
	CHECK_RC(cdp_parse_decimal("0x1p-1", &n, &d), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_decimal("nan", &n, &d), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_decimal("1 ", &n, &d), CDP_ESYNTAX);
}

static void test_size(void)
{
	static const struct { const char *s; uint64_t v; } ok[] = {
		{ "0", 0 }, { "512", 512 }, { "64K", 65536 }, { "64k", 65536 },
		{ "64KiB", 65536 }, { "1M", 1ULL << 20 }, { "3MiB", 3ULL << 20 },
		{ "2G", 2ULL << 30 }, { "2g", 2ULL << 30 }, { "1T", 1ULL << 40 },
		{ "16777215T", 16777215ULL << 40 } };
	static const char *const bad[] = { "", "K", "1.5G", "1 G", " 1G", "1G ",
		"1KB", "1kib", "1X", "1GiBB", "-1K", "+1K", "1P", "0x10" };
	uint64_t v = 9;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int rc = cdp_parse_size(ok[i].s, 0, UINT64_MAX, &v);
		CHECK(rc == CDP_OK && v == ok[i].v, "\"%s\": rc %d value %" PRIu64,
		      ok[i].s, rc, v);
	}
	v = 9;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(cdp_parse_size(bad[i], 0, UINT64_MAX, &v) == CDP_ESYNTAX,
		      "\"%s\" accepted", bad[i]);
	CHECK(v == 9, "*out written on failure");
	CHECK_RC(cdp_parse_size("16777216T", 0, UINT64_MAX, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_size("99999999999999999999999999999999999K", 0,
	                        UINT64_MAX, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_size("1M", 0, 1000000, &v), CDP_ERANGE);
	CHECK_RC(cdp_parse_size("1K", 2048, UINT64_MAX, &v), CDP_ERANGE);
}

static void test_list(void)
{
	int out[4];
	size_t n = 99;

	CHECK_RC(cdp_parse_int_list("3,1,2", 1, 3, out, 4, &n), CDP_OK);
	CHECK(n == 3 && out[0] == 3 && out[1] == 1 && out[2] == 2, "n=%zu", n);
	CHECK_RC(cdp_parse_int_list("7", 0, 10, out, 4, &n), CDP_OK);
	CHECK(n == 1 && out[0] == 7, "single");
	CHECK_RC(cdp_parse_int_list("1,2,3,4", 0, 10, out, 4, &n), CDP_OK);
	CHECK(n == 4, "full");
	n = 99;
	CHECK_RC(cdp_parse_int_list("1,2,3,4,5", 0, 10, out, 4, &n), CDP_ERANGE);
	CHECK_RC(cdp_parse_int_list("", 0, 10, out, 4, &n), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_int_list("1,,2", 0, 10, out, 4, &n), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_int_list("1,", 0, 10, out, 4, &n), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_int_list(",1", 0, 10, out, 4, &n), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_int_list("1, 2", 0, 10, out, 4, &n), CDP_ESYNTAX);
	CHECK_RC(cdp_parse_int_list("1,11", 0, 10, out, 4, &n), CDP_ERANGE);
	CHECK(n == 99, "*n written on failure");
}

static void test_arith(void)
{
	size_t r = 5;

	CHECK_RC(cdp_mul_size(SIZE_MAX / 2, 2, &r), CDP_OK);
	CHECK(r == SIZE_MAX - 1, "mul");
	CHECK_RC(cdp_mul_size(SIZE_MAX / 2 + 1, 2, &r), CDP_EOVERFLOW);
	CHECK_RC(cdp_mul_size((size_t)1 << 32, (size_t)1 << 32, &r),
	         sizeof(size_t) > 8 ? CDP_OK : CDP_EOVERFLOW);
	CHECK_RC(cdp_mul_size(0, SIZE_MAX, &r), CDP_OK);
	CHECK(r == 0, "0 * max");
	CHECK_RC(cdp_mul_size(SIZE_MAX, 0, &r), CDP_OK);
	CHECK_RC(cdp_add_size(SIZE_MAX - 1, 1, &r), CDP_OK);
	CHECK(r == SIZE_MAX, "add");
	r = 5;
	CHECK_RC(cdp_add_size(SIZE_MAX, 1, &r), CDP_EOVERFLOW);
	CHECK_RC(cdp_add_size(1, SIZE_MAX, &r), CDP_EOVERFLOW);
	CHECK(r == 5, "*out written on overflow");
}

int main(void)
{
	test_i64();
	test_u64_int();
	test_double();
	test_float();
	test_decimal();
	test_size();
	test_list();
	test_arith();
	return tap_done();
}
