/* cdp_rng.c: xoshiro256** seeded by SplitMix64, and what is derived from it.
 *
 * next() and the seeding follow the public-domain reference code by Blackman
 * and Vigna (https://prng.di.unimi.it/xoshiro256starstar.c, splitmix64.c)
 * line by line, so the sequences can be checked against any other faithful
 * implementation. below() needs the high half of a 64x64-bit product; it is
 * computed from 32-bit halves rather than with __int128 so that the code stays
 * plain 64-bit arithmetic everywhere.
 */
#include "cdp_rng.h"

#include <math.h>

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* One SplitMix64 step: advances *x and returns the mixed value. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void cdp_rng_seed(cdp_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	/* Four consecutive SplitMix64 outputs are never all zero, the one state
	 * xoshiro must avoid. */
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

uint64_t cdp_rng_next(cdp_rng *r)
{
	uint64_t *s = r->s;
	const uint64_t result = rotl(s[1] * 5, 7) * 9;
	const uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* 128-bit product a*b as (hi, lo) from four 32x32-bit products. */
static void mul64x64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
	uint64_t a0 = a & 0xffffffffU, a1 = a >> 32;
	uint64_t b0 = b & 0xffffffffU, b1 = b >> 32;
	uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
	uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffU) + (p10 & 0xffffffffU);

	*lo = (mid << 32) | (p00 & 0xffffffffU);
	*hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* Lemire, "Fast random integer generation in an interval" (2019), algorithm 5:
 * the high word of x*n is uniform in [0, n) once the low word is rejected
 * below 2^64 mod n; the division is needed only when the low word < n. */
uint64_t cdp_rng_below(cdp_rng *r, uint64_t n)
{
	uint64_t hi, lo;

	if (n == 0)
		return 0;
	mul64x64(cdp_rng_next(r), n, &hi, &lo);
	if (lo < n) {
		uint64_t threshold = (0 - n) % n;   /* 2^64 mod n */
		while (lo < threshold)
			mul64x64(cdp_rng_next(r), n, &hi, &lo);
	}
	return hi;
}

double cdp_rng_double(cdp_rng *r)
{
	return (double)(cdp_rng_next(r) >> 11) * 0x1.0p-53;
}

float cdp_rng_float(cdp_rng *r)
{
	return (float)(cdp_rng_next(r) >> 40) * 0x1.0p-24f;
}

double cdp_rng_normal(cdp_rng *r)
{
	/* 1 - u lies in (0, 1], so the logarithm is finite. */
	double u1 = 1.0 - cdp_rng_double(r);
	double u2 = cdp_rng_double(r);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* SplitMix64's output function applied to a value (no state). */
static uint64_t mix64(uint64_t z)
{
	uint64_t x = z;

	return splitmix64(&x);
}

/* Each step is a bijection of its input, so for a fixed seed and a, distinct
 * b give distinct seeds, and likewise for a with b fixed. */
uint64_t cdp_rng_derive(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t h = mix64(seed);

	h = mix64(h ^ a);
	h = mix64(h ^ b);
	return h;
}

void cdp_rng_shuffle_u64(cdp_rng *r, uint64_t *a, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)cdp_rng_below(r, i);
		uint64_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

void cdp_rng_shuffle_size(cdp_rng *r, size_t *a, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)cdp_rng_below(r, i);
		size_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}
