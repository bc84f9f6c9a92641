/* cdp_rng.h: the one seeded PRNG of cdpool.
 *
 * Algorithm: xoshiro256** 1.0 (Blackman and Vigna, 2018), with its 256-bit
 * state filled from the 64-bit seed by SplitMix64, exactly as the authors'
 * reference code recommends. Only 64-bit integer arithmetic is used, so the
 * sequence is identical on every platform, compiler and thread count.
 *
 * Derived values:
 *  - cdp_rng_below(n): uniform in [0, n) by Lemire's nearly-divisionless
 *    rejection method (unbiased).
 *  - cdp_rng_double(): (next >> 11) * 2^-53, uniform in [0, 1).
 *  - cdp_rng_float():  (next >> 40) * 2^-24, uniform in [0, 1).
 *  - cdp_rng_normal(): Box-Muller on two doubles (first of the pair only).
 * cdp_rng_derive(seed, a, b) mixes a seed with two stream ids (e.g. epoch and
 * rank) by SplitMix64 so that independent streams need no communication.
 */
#ifndef CDP_RNG_H
#define CDP_RNG_H

#include <stdint.h>
#include <stddef.h>

typedef struct cdp_rng { uint64_t s[4]; } cdp_rng;

void     cdp_rng_seed(cdp_rng *r, uint64_t seed);
uint64_t cdp_rng_next(cdp_rng *r);
uint64_t cdp_rng_below(cdp_rng *r, uint64_t n);   /* n > 0 */
double   cdp_rng_double(cdp_rng *r);
float    cdp_rng_float(cdp_rng *r);
double   cdp_rng_normal(cdp_rng *r);
uint64_t cdp_rng_derive(uint64_t seed, uint64_t a, uint64_t b);
/* Fisher-Yates shuffle of an index array, last element first:
 * for i = n-1 down to 1: j = below(i+1); swap(a[i], a[j]). */
void     cdp_rng_shuffle_u64(cdp_rng *r, uint64_t *a, size_t n);
void     cdp_rng_shuffle_size(cdp_rng *r, size_t *a, size_t n);

#endif
