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

static uint32_t bits_of(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	return u;
}

static float float_of(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof x);
	return x;
}

uint16_t dist_fp16_bits(float x)
{
	uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, e, m, sh, h, rest, half;

	u &= 0x7fffffffu;
	if (u > 0x7f800000u)                    /* NaN: a quiet one */
		return (uint16_t)(sign | 0x7e00u);
	if (u >= 0x477ff000u)                   /* >= 65520: inf (65504 is the largest) */
		return (uint16_t)(sign | 0x7c00u);
	e = u >> 23;
	if (e >= 113) {                         /* normal in fp16: exponent e - 112 */
		u -= 112u << 23;
		u += 0xfffu + ((u >> 13) & 1u);     /* carries into the exponent as it should */
		return (uint16_t)(sign | (u >> 13));
	}
	if (e < 102)                            /* below 2^-25: 0 (2^-25 itself ties to 0) */
		return (uint16_t)sign;
	/* subnormal: x = m 2^(e-150) = (m >> (126 - e)) units of 2^-24 */
	m = (u & 0x7fffffu) | 0x800000u;
	sh = 126 - e;                           /* 14 .. 24 */
	h = m >> sh;
	rest = m & ((1u << sh) - 1);
	half = 1u << (sh - 1);
	if (rest > half || (rest == half && (h & 1u)))
		h++;                                /* 0x400 is the smallest normal: right */
	return (uint16_t)(sign | h);
}

float dist_fp16_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 0) {                           /* zero or subnormal: m 2^-24, exact */
		float v = (float)m * 0x1p-24f;
		return sign ? -v : v;
	}
	if (e == 31)
		return float_of(sign | 0x7f800000u | (m << 13));
	return float_of(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t dist_bf16_bits(float x)
{
	uint32_t u = bits_of(x);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);   /* NaN stays a (quiet) NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float dist_bf16_float(uint16_t h) { return float_of((uint32_t)h << 16); }

static uint16_t to16(int comp, float x)
{
	return comp == CDP_DIST_COMP_BF16 ? dist_bf16_bits(x) : dist_fp16_bits(x);
}

static float to32(int comp, uint16_t h)
{
	return comp == CDP_DIST_COMP_BF16 ? dist_bf16_float(h) : dist_fp16_float(h);
}

/* The loops below test comp once, so that each inner loop is branch-free
 * in the format (the conversions inline). */

void dist_comp_pack(int comp, float *x, uint16_t *w, size_t n, float div)
{
	if (div != 1.0f)
		for (size_t i = 0; i < n; i++)
			x[i] /= div;    /* a division, as the uncompressed average */
	if (comp == CDP_DIST_COMP_BF16)
		for (size_t i = 0; i < n; i++)
			w[i] = dist_bf16_bits(x[i]);
	else
		for (size_t i = 0; i < n; i++)
			w[i] = dist_fp16_bits(x[i]);
}

void dist_comp_unpack(int comp, const uint16_t *w, float *x, size_t n)
{
	if (comp == CDP_DIST_COMP_BF16)
		for (size_t i = 0; i < n; i++)
			x[i] = dist_bf16_float(w[i]);
	else
		for (size_t i = 0; i < n; i++)
			x[i] = dist_fp16_float(w[i]);
}

void dist_comp_accum(int comp, float *x, const uint16_t *in, uint16_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		x[i] += to32(comp, in[i]);
		w[i] = to16(comp, x[i]);
	}
}

void dist_comp_sum16(int comp, const uint16_t *in, uint16_t *inout, size_t n)
{
	for (size_t i = 0; i < n; i++)
		inout[i] = to16(comp, to32(comp, in[i]) + to32(comp, inout[i]));
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
