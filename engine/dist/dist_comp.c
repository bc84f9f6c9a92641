/* dist_comp.c: the 16-bit wire formats of gradient compression (dist.h,
 * "Compression"; cdp-train --grad-compress): float32 <-> IEEE binary16
 * (fp16) and bfloat16, rounded to nearest, ties to even, and the three
 * loops the ring and MPI's user-defined op build on. Plain C, no F16C or
 * AVX512_BF16, so that every rank, the ring and MPI round alike on any
 * x86 or ARM host. No MPI here.
 *
 * fp16 has 5 exponent bits: magnitudes from 65520 up round to inf (the
 * overflow the trainer then sees as a non-finite gradient), below 2^-24
 * to 0 (subnormals from 2^-24 to 2^-14 keep fewer bits). bf16 keeps
 * float32's exponent (8 bits of significand): it overflows only where
 * float32 nearly does. NaN stays a NaN in both.
 */
#include <string.h>
#include "cdp_error.h"
#include "dist_int.h"

static inline uint32_t bits_of(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	return u;
}

static inline float float_of(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof x);
	return x;
}

/* Both fp16 conversions compute every case and select, without branches,
 * so that the loops below vectorize: a branch per value cost 4 times bf16's
 * time. Subnormals go through the float unit: adding 0.5 (whose ulp is
 * 2^-24, fp16's smallest subnormal) rounds a magnitude below 2^-14 to a
 * whole number of 2^-24 (to nearest, ties to even, the default rounding),
 * and that number sits in the sum's low bits. */
static inline uint16_t fp16_bits(float x)
{
	uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	/* normal: exponent - 112, 10 bits rounded (a carry moves the exponent
	 * on, as it should); meaningful for a >= 2^-14 */
	uint32_t nrm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
	uint32_t sub = bits_of(float_of(a) + 0.5f) - 0x3f000000u;
	/* >= 65520 (0x477ff000) rounds to inf (65504 is the largest); NaN stays
	 * a quiet NaN */
	uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
	uint32_t h = a >= 0x477ff000u ? big : a < 0x38800000u ? sub : nrm;

	return (uint16_t)(sign | h);
}

static inline float fp16_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, a = h & 0x7fffu;
	uint32_t nrm = (a << 13) + (112u << 23);
	/* subnormal: 2^-14 (1 + m/1024) - 2^-14 = m 2^-24, exact */
	uint32_t sub = bits_of(float_of((a << 13) + (113u << 23)) - 0x1p-14f);
	uint32_t v = a < 0x400u ? sub : a >= 0x7c00u ? nrm + (112u << 23) : nrm;

	return float_of(sign | v);
}

uint16_t dist_fp16_bits(float x) { return fp16_bits(x); }
float dist_fp16_float(uint16_t h) { return fp16_float(h); }

static inline uint16_t bf16_bits(float x)
{
	uint32_t u = bits_of(x);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;

	/* NaN stays a (quiet) NaN */
	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r);
}

static inline float bf16_float(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t dist_bf16_bits(float x) { return bf16_bits(x); }
float dist_bf16_float(uint16_t h) { return bf16_float(h); }

/* Each loop is written once per format (LOOPS), so that the format is
 * tested once a call and each inner loop is straight code. */
#define LOOPS(FMT) \
static void pack_##FMT(float *x, uint16_t *w, size_t n, float div) \
{ \
	for (size_t i = 0; i < n; i++) { \
		x[i] /= div;    /* a division, as the uncompressed average */ \
		w[i] = FMT##_bits(x[i]); \
	} \
} \
static void unpack_##FMT(const uint16_t *w, float *x, size_t n) \
{ \
	for (size_t i = 0; i < n; i++) \
		x[i] = FMT##_float(w[i]); \
} \
static void accum_##FMT(float *x, const uint16_t *in, uint16_t *w, size_t n) \
{ \
	for (size_t i = 0; i < n; i++) { \
		x[i] += FMT##_float(in[i]); \
		w[i] = FMT##_bits(x[i]); \
	} \
} \
static void sum16_##FMT(const uint16_t *in, uint16_t *inout, size_t n) \
{ \
	for (size_t i = 0; i < n; i++) \
		inout[i] = FMT##_bits(FMT##_float(in[i]) + FMT##_float(inout[i])); \
}
LOOPS(fp16)
LOOPS(bf16)

void dist_comp_pack(int comp, float *x, uint16_t *w, size_t n, float div)
{
	if (comp == CDP_DIST_COMP_BF16)
		pack_bf16(x, w, n, div);
	else
		pack_fp16(x, w, n, div);
}

void dist_comp_unpack(int comp, const uint16_t *w, float *x, size_t n)
{
	if (comp == CDP_DIST_COMP_BF16)
		unpack_bf16(w, x, n);
	else
		unpack_fp16(w, x, n);
}

void dist_comp_accum(int comp, float *x, const uint16_t *in, uint16_t *w, size_t n)
{
	if (comp == CDP_DIST_COMP_BF16)
		accum_bf16(x, in, w, n);
	else
		accum_fp16(x, in, w, n);
}

void dist_comp_sum16(int comp, const uint16_t *in, uint16_t *inout, size_t n)
{
	if (comp == CDP_DIST_COMP_BF16)
		sum16_bf16(in, inout, n);
	else
		sum16_fp16(in, inout, n);
}

int cdp_dist_comp_parse(const char *s, cdp_dist_comp *comp)
{
	if (s && strcmp(s, "none") == 0)
		*comp = CDP_DIST_COMP_NONE;
	else if (s && strcmp(s, "fp16") == 0)
		*comp = CDP_DIST_COMP_FP16;
	else if (s && strcmp(s, "bf16") == 0)
		*comp = CDP_DIST_COMP_BF16;
	else
		return CDP_ESYNTAX;
	return 0;
}

const char *cdp_dist_comp_name(cdp_dist_comp comp)
{
	return comp == CDP_DIST_COMP_FP16 ? "fp16" : comp == CDP_DIST_COMP_BF16 ? "bf16" : "none";
}
