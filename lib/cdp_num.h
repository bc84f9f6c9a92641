/* cdp_num.h: checked number parsing for option arguments and text formats.
 *
 * Every parser accepts the whole string or fails: no trailing garbage, no
 * empty string, no silent wrap-around. Returns CDP_OK, CDP_ESYNTAX (not a
 * number) or CDP_ERANGE (outside [min, max]).
 */
#ifndef CDP_NUM_H
#define CDP_NUM_H

#include <stdint.h>
#include <stddef.h>

int cdp_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int cdp_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cdp_parse_int(const char *s, int min, int max, int *out);
/* Finite doubles only (no nan/inf) unless the range is infinite. */
int cdp_parse_double(const char *s, double min, double max, double *out);
/* A size with an optional binary suffix: 64K, 1M, 2G, 1T (powers of 1024). */
int cdp_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A comma-separated list of ints in [min,max], e.g. "1,2,3". At most cap
 * items; *n receives the count. Empty items are CDP_ESYNTAX. */
int cdp_parse_int_list(const char *s, int min, int max, int *out, size_t cap,
                       size_t *n);

/* Overflow-checked size arithmetic: return CDP_EOVERFLOW on overflow. */
int cdp_mul_size(size_t a, size_t b, size_t *out);
int cdp_add_size(size_t a, size_t b, size_t *out);

#endif
