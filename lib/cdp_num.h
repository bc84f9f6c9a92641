/* cdp_num.h: checked number parsing for option arguments and text formats.
 *
 * Every parser accepts the whole string or fails: no trailing garbage, no
 * empty string, no silent wrap-around. Returns CDP_OK, CDP_ESYNTAX (not a
 * number) or CDP_ERANGE (outside [min, max], or beyond the type), and
 * CDP_EINVAL for NULL pointers. *out is written only on success.
 *
 * Integers are decimal only ("010" is ten, "0x10" is a syntax error), with no
 * white space anywhere. Signed parsers take an optional '+' or '-'; unsigned
 * ones an optional '+', and '-' only in "-0" ("-1" is CDP_ESYNTAX, not 2^64-1).
 */
#ifndef CDP_NUM_H
#define CDP_NUM_H

#include <stdint.h>
#include <stddef.h>

int cdp_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int cdp_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cdp_parse_int(const char *s, int min, int max, int *out);
/* Decimal notation ("1.5", ".5", "2e-3"); no hex floats, no nan. Finite
 * doubles only: "inf" / "infinity" (any case, signed) are accepted only when
 * that side of the range is infinite, otherwise CDP_ERANGE, as is overflow
 * ("1e999"). Underflow rounds towards zero and is accepted. */
int cdp_parse_double(const char *s, double min, double max, double *out);
/* The same notation for a value kept as a float: the number is rounded to
 * float first and then held against [min, max], so a bound that is itself
 * a float constant (0.999999f, 1e-30f) accepts the decimal it was written
 * as, which as a double lies just outside it. A finite number beyond
 * FLT_MAX is CDP_ERANGE. */
int cdp_parse_float(const char *s, float min, float max, float *out);
/* v in the fewest significant digits (%g, 6 to 9) that read back as v with
 * strtof, into buf[cap], the exponent without '+' or leading zeros as the
 * man pages write bounds: 0.99999994f prints "0.99999994", not %g's "1",
 * 0.999999f "0.999999", 1e6f "1e6". Returns buf. */
const char *cdp_float_str(float v, char *buf, size_t cap);
/* v in the fewest significant digits (%g, 6 to 17) that read back as v
 * with strtod, the exponent written as above (1e300, 1e-9): the bound of
 * a double option, or a value two of which must never print alike
 * (0.1234567 and 0.1234568), while 0.1 stays 0.1, not
 * 0.10000000000000001. Returns buf. */
const char *cdp_double_str(double v, char *buf, size_t cap);
/* As cdp_double_str with at least digits (1 to 17) significant digits:
 * the integer part's count keeps 500000 or 5800003 out of exponent
 * form. */
const char *cdp_double_str_digits(double v, int digits, char *buf, size_t cap);
/* The exact value of a non-negative number in the decimal notation of
 * cdp_parse_double ("0.145", ".5", "5e-2", "-0"), as the fraction
 * *num / *den with *den a power of ten up to 10^18 and no common factor 10
 * ("0.50" is 5/10, "3" is 3/1): what the user wrote, which a double often is
 * not (0.145 is 0.14499999999999999 as a double). CDP_ESYNTAX as
 * cdp_parse_double; CDP_ERANGE for a negative number or one that needs more
 * than 18 decimals or a numerator above 2^64 - 1 (callers then take the
 * double). */
int cdp_parse_decimal(const char *s, uint64_t *num, uint64_t *den);
/* A size: decimal digits with an optional binary suffix K, M, G or T (either
 * case, powers of 1024), optionally spelled KiB, MiB, GiB, TiB: "4096",
 * "64K", "64KiB", "1m", "2G". No fractions, no sign, no space, no "KB". */
int cdp_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A comma-separated list of ints in [min,max], e.g. "1,2,3". At most cap
 * items (more is CDP_ERANGE); *n receives the count on success. Empty items
 * ("", "1,,2", "1,") are CDP_ESYNTAX; CDP_ENOMEM if a copy cannot be made. */
int cdp_parse_int_list(const char *s, int min, int max, int *out, size_t cap,
                       size_t *n);

/* Overflow-checked size arithmetic: return CDP_EOVERFLOW on overflow. */
int cdp_mul_size(size_t a, size_t b, size_t *out);
int cdp_add_size(size_t a, size_t b, size_t *out);

#endif
