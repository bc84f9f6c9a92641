/* cdp_stats_int.h: text helpers shared by cdp_stats_text.c and
 * cdp_classes.c (not part of the library's interface). */
#ifndef CDP_STATS_INT_H
#define CDP_STATS_INT_H

#include "cdp_stats.h"

/* Appends printf output to out; CDP_OK or CDP_ENOMEM. */
int cdp_text_appendf(cdp_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exponent e that float statistics scale by 2^-e for samples of
 * largest magnitude maxabs: frexp's, so maxabs < 2^e, held at or above
 * -1020 so that 2^-e is a double. */
int cdp_stats_scale_exp(double maxabs);
/* A decimal unsigned 128-bit integer (digits only); CDP_ESYNTAX, CDP_ERANGE. */
int cdp_text_parse_u128(const char *s, unsigned __int128 *out);

#endif
