/* cdp_stats.h: per-band pixel statistics and class histograms of a pool.
 *
 * A cdp_stats holds, for each band, the count, min and max of the valid
 * samples it was given (those whose mask byte is 255, all of them without a
 * mask, and for f32/f64 only finite ones: NaN and +-inf are never counted),
 * and what mean and variance follow from:
 *  - integer dtypes: the sum and sum of squares, exact in 128-bit integers,
 *    so the result is independent of order and of how the data was split
 *    and merged;
 *  - f32/f64: the mean and M2 (the sum of squared deviations from it), kept
 *    scaled by 2^-fexp and 2^-2*fexp, where 2^fexp bounds the largest |x|
 *    seen (frexp's exponent). Scaled, the mean is below 1 and M2 below 4n in
 *    magnitude, so both stay finite for any finite samples (a sum of squares
 *    of one 1e300 pixel is inf in double). Each cdp_stats_add block is
 *    measured in two passes (a compensated scaled sum for its mean, then its
 *    M2 about that mean); blocks and accumulators merge by Chan, Golub and
 *    LeVeque's pairwise formulas. A fold over the same parts in the same
 *    order gives bit-identical state however often it is saved and reloaded
 *    (merge order still matters in the last bits).
 *
 * Mean and (population) standard deviation are derived: for integers from
 * the exact sums (variance = (n*sumsq - sum^2) / n^2, evaluated without
 * cancellation), for floats from the scaled mean and M2, held within
 * [min, max] and (max - min) / 2, so they are finite too.
 *
 * The text form is the value of the pool's "stats" meta (cdp-pool(5)):
 *   dtype=u16\nbands=C\n[stale=1\n]
 *   then per band b (1-based): band.b.count=, for integer dtypes .sum= and
 *   .sumsq=, for float dtypes .exp= .smean= .sm2= (pool version 2), then
 *   .min= .max= .mean= .std=
 *   and, for a pool of value labels (label kind f32, cdp-record(5)), then
 *   targets=T and per target t (1-based) target.t.count= .exp= .smean=
 *   .sm2= .min= .max= .mean= .std=: the statistics of the finite targets
 *   (NaN, "no target", never counts; the image's mask does not apply),
 *   kept as a float band's are.
 * Integer sums, min and max are decimal; doubles are %.17g (exact round trip);
 * an empty band has min, max, mean and std "nan". parse(format(s)) restores s
 * exactly. The parser also reads pool version 1's float form (.sum= .sumc=
 * .sumsq= .sumsqc=, Neumaier sums and their compensations) and converts it;
 * one whose sums overflowed to inf or NaN comes back stale (a later pack
 * rescans it).
 *
 * A cdp_classes counts label classes: per-pixel labels (u8/u16 payloads)
 * excluding the record's ignore value, or one per record for scalar classes
 * and, for multi-hot records, one per record for each class it holds.
 * Class ids are below CDP_CLASS_MAX. Its text form ("classes" meta) is
 * "class.K=N\n" for every K with N > 0, ascending.
 *
 * Errors: CDP_ENOMEM, CDP_ESHAPE (dtype or band count differ), CDP_EUNSUP
 * (unknown dtype), CDP_ERANGE (class id too large), CDP_ESYNTAX (text).
 */
#ifndef CDP_STATS_H
#define CDP_STATS_H

#include <stddef.h>
#include <stdint.h>
#include "cdp_record.h"

#define CDP_CLASS_MAX 65536u

typedef struct cdp_band_acc {
	uint64_t count;
	__int128 isum;               /* integer dtypes */
	unsigned __int128 isumsq;
	int64_t imin, imax;
	int fexp;                    /* float dtypes: |x| < 2^fexp for all x seen */
	double smean, sm2;           /* mean / 2^fexp, M2 / 2^(2*fexp) */
	double min, max;
} cdp_band_acc;

typedef struct cdp_stats {
	int dtype;                   /* cdp_dtype */
	int is_float;
	int stale;                   /* contents no longer match the records */
	int marked;                  /* parsed: the text held stale=1 (not only overflowed
	                              * version 1 sums), cdp-lmdbpack's mark of a --replace */
	uint32_t bands;
	cdp_band_acc *b;             /* [bands], owned */
	uint32_t targets;            /* value labels' planes T, 0 without */
	cdp_band_acc *t;             /* [targets], owned; float accumulators */
} cdp_stats;

/* Allocates an empty accumulator for `bands` bands of dtype. */
int  cdp_stats_init(cdp_stats *s, int dtype, uint32_t bands);
void cdp_stats_reset(cdp_stats *s);
void cdp_stats_free(cdp_stats *s);
/* Gives s T (1..CDP_RECORD_MAXLABEL) empty target accumulators, or, when
 * it has targets, checks that they are T (CDP_ESHAPE). */
int  cdp_stats_targets(cdp_stats *s, uint32_t T);
/* Adds n samples of s->dtype to band (0-based); mask NULL: all valid. */
int  cdp_stats_add(cdp_stats *s, uint32_t band, const void *samples,
                   const uint8_t *mask, size_t n);
/* Adds every band of a decoded record (image payload, mask) and, for
 * label kind f32, every target plane (s->targets set by the first such
 * record). CDP_ESHAPE when its dtype, band count or target count differ
 * from s. */
int  cdp_stats_add_record(cdp_stats *s, const cdp_record *r);
/* dst += src (targets too). CDP_ESHAPE when dtype, bands or targets (where
 * both have them) differ. */
int  cdp_stats_merge(cdp_stats *dst, const cdp_stats *src);
/* Derived values of band b (0-based); NaN for an empty band. */
void cdp_stats_result(const cdp_stats *s, uint32_t b, double *mean,
                      double *std, double *min, double *max);
/* The same of target t (0-based, below s->targets). */
void cdp_stats_target_result(const cdp_stats *s, uint32_t t, double *mean,
                             double *std, double *min, double *max);

/* A band whose range (max - min) exceeds this cannot be standardized in
 * float32 to anything a network can learn from (its std is of that order,
 * so every ordinary pixel becomes the same value after standardization). */
#define CDP_STATS_WIDE 1e30
/* 1 when band b (0-based) is non-empty and its range exceeds CDP_STATS_WIDE
 * or a value does not fit in float32. */
int  cdp_stats_wide(const cdp_stats *s, uint32_t b);
/* Text form into out (replacing its contents, NUL-terminated; out->len
 * excludes the NUL). */
int  cdp_stats_format(const cdp_stats *s, cdp_buf *out);
/* Parses the text form into s (initialised here; free with cdp_stats_free).
 * An integer band's fields must be what samples of its dtype can give
 * (CDP_EFORMAT otherwise): min <= max within the dtype's range, count *
 * min <= sum <= count * max, sum^2 / count <= sumsq <= count * max(min^2,
 * max^2) (compared exactly), and sum and sumsq 0 when count is 0.
 * cdp_stats_parse_why also says what is wrong in why[cap] (may be NULL):
 * "band 1: min 300 is above max 244", "band.2.sum=x: syntax error". */
int  cdp_stats_parse(const char *text, size_t len, cdp_stats *s);
int  cdp_stats_parse_why(const char *text, size_t len, cdp_stats *s, char *why, size_t cap);

typedef struct cdp_classes {
	uint64_t *n;                 /* [len] count per class id */
	size_t len, cap;             /* len = largest id seen + 1 */
} cdp_classes;

/* An all-zero cdp_classes is empty and valid. */
void cdp_classes_reset(cdp_classes *c);
void cdp_classes_free(cdp_classes *c);
int  cdp_classes_add(cdp_classes *c, uint32_t id, uint64_t count);
/* Per-pixel labels except label_ignore, or the scalar class; a record with
 * no label adds nothing. */
int  cdp_classes_add_record(cdp_classes *c, const cdp_record *r);
int  cdp_classes_merge(cdp_classes *dst, const cdp_classes *src);
uint64_t cdp_classes_total(const cdp_classes *c);
int  cdp_classes_format(const cdp_classes *c, cdp_buf *out);
/* Parses into c (reset first). */
int  cdp_classes_parse(const char *text, size_t len, cdp_classes *c);

/* What a class name must be (the pool's class_names meta, the checkpoint's
 * class names): 1 to CDP_CLASS_NAME_MAX bytes of valid UTF-8 without
 * control characters (C0, DEL, C1: no newline or tab). 1, or 0 with why
 * (cap bytes) saying what is wrong ("is empty", "has a control character
 * at byte 3", ...). */
#define CDP_CLASS_NAME_MAX 255
int  cdp_class_name_ok(const char *s, char *why, size_t cap);

#endif
