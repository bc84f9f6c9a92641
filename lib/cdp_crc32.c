/* cdp_crc32.c: zlib's CRC-32 by carry-less multiplication (cdp_crc32.h).
 *
 * Folding. A block X of 128 bits followed by D more bits of message adds
 * X(x) * x^D to the message polynomial; modulo P that is the same as
 * X.lo * (x^(D+32) mod P) + X.hi * (x^(D-32) mod P), two 64x33-bit carry-
 * less products that land on the block D bits ahead (bit-reflected, so the
 * first byte holds the highest powers and the exponents are off by 32 and
 * the constants are reflected and shifted left by one). Several blocks are
 * folded in parallel, D bytes apart, to hide the multiplier's latency; at
 * the end they are folded into one 128-bit block, which is reduced to 32
 * bits with one more fold and a Barrett reduction. The constants below are
 * reflect32(x^e mod P) << 1 for the e in their names (P = 0x104C11DB7), and
 * for the Barrett step P itself and floor(x^64 / P), both reflected over 33
 * bits; tests/unit/test_crc32.c checks every path against zlib.
 *
 * zlib's crc32 handles what the vector code does not: inputs too short to
 * fold, the last len mod 16 bytes, and CPUs without the instructions.
 */
#include "cdp_crc32.h"

#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CDP_CRC_X86 1
#include <immintrin.h>
#endif

static uint32_t crc_zlib(uint32_t crc, const void *buf, size_t len)
{
	return len ? (uint32_t)crc32_z(crc, buf, len) : crc;
}

#ifdef CDP_CRC_X86

#define K2080 0x11542778aULL   /* fold 2048 bits (4 zmm) */
#define K2016 0x1322d1430ULL
#define K544  0x154442bd4ULL   /* fold 512 bits */
#define K480  0x1c6e41596ULL
#define K416  0x03db1ecdcULL   /* fold 384 bits */
#define K352  0x174359406ULL
#define K288  0x0f1da05aaULL   /* fold 256 bits */
#define K224  0x15a546366ULL
#define K160  0x1751997d0ULL   /* fold 128 bits */
#define K96   0x0ccaa009eULL
#define K64   0x163cd6124ULL   /* 64 -> 32 bits */
#define POLY  0x1db710641ULL   /* Barrett: P and x^64 / P */
#define MU    0x1f7011641ULL

#define T_PCLMUL  __attribute__((target("pclmul,sse4.1")))
#define T_VPCLMUL __attribute__((target("pclmul,sse4.1,avx512f,vpclmulqdq")))

/* x moved D bits ahead; k = (x^(D-32), x^(D+32)) as (high, low) */
T_PCLMUL static inline __m128i fold16(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

T_PCLMUL static inline __m128i load16(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* The CRC register (not yet inverted) of the message whose folded
 * remainder is x, followed by the len bytes at p (len < 16 after the
 * loop), inverted for zlib's convention. */
T_PCLMUL static uint32_t finish(__m128i x, const uint8_t *p, size_t len)
{
	const __m128i k = _mm_set_epi64x((long long)K96, (long long)K160);
	const __m128i m32 = _mm_set_epi32(0, 0, 0, -1);
	const __m128i bar = _mm_set_epi64x((long long)MU, (long long)POLY);
	__m128i t;

	for (; len >= 16; p += 16, len -= 16)
		x = _mm_xor_si128(fold16(x, k), load16(p));
	/* 128 -> 64 bits, appending the 32 zero bits of the CRC's definition */
	x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k, 0x10));
	/* 64 -> 32 */
	x = _mm_xor_si128(_mm_srli_si128(x, 4),
	                  _mm_clmulepi64_si128(_mm_and_si128(x, m32), _mm_set_epi64x(0, (long long)K64), 0x00));
	/* Barrett: the remainder modulo P of the 64 bits left */
	t = _mm_clmulepi64_si128(_mm_and_si128(x, m32), bar, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, m32), bar, 0x00);
	return crc_zlib(~(uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1), p, len);
}

/* Four 128-bit lanes 64 bytes apart, then one. */
T_PCLMUL static uint32_t crc_pclmul(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	__m128i x0, x1, x2, x3, k;

	if (len < 64)
		return crc_zlib(crc, buf, len);
	x0 = _mm_xor_si128(load16(p), _mm_cvtsi32_si128((int)~crc));
	x1 = load16(p + 16);
	x2 = load16(p + 32);
	x3 = load16(p + 48);
	k = _mm_set_epi64x((long long)K480, (long long)K544);
	for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
		x0 = _mm_xor_si128(fold16(x0, k), load16(p));
		x1 = _mm_xor_si128(fold16(x1, k), load16(p + 16));
		x2 = _mm_xor_si128(fold16(x2, k), load16(p + 32));
		x3 = _mm_xor_si128(fold16(x3, k), load16(p + 48));
	}
	k = _mm_set_epi64x((long long)K96, (long long)K160);
	x0 = _mm_xor_si128(fold16(x0, k), x1);
	x0 = _mm_xor_si128(fold16(x0, k), x2);
	x0 = _mm_xor_si128(fold16(x0, k), x3);
	return finish(x0, p, len);
}

/* (high, low) = (b, a) in each 128-bit lane */
T_VPCLMUL static inline __m512i k512(unsigned long long a, unsigned long long b)
{
	return _mm512_set_epi64((long long)b, (long long)a, (long long)b, (long long)a,
	                        (long long)b, (long long)a, (long long)b, (long long)a);
}

T_VPCLMUL static inline __m512i fold64(__m512i z, __m512i k, __m512i y)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00),
	                                 _mm512_clmulepi64_epi128(z, k, 0x11), y, 0x96);
}

T_VPCLMUL static inline __m512i load64(const uint8_t *p)
{
	return _mm512_loadu_si512((const void *)p);
}

/* Sixteen 128-bit lanes in four zmm registers 256 bytes apart, then four
 * lanes in one, then the four lanes into one xmm. */
T_VPCLMUL static uint32_t crc_vpclmul(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	__m512i z0, z1, z2, z3, k;
	__m128i x;

	if (len < 256)
		return crc_pclmul(crc, buf, len);
	z0 = _mm512_xor_si512(load64(p), _mm512_inserti32x4(_mm512_setzero_si512(),
	                                                    _mm_cvtsi32_si128((int)~crc), 0));
	z1 = load64(p + 64);
	z2 = load64(p + 128);
	z3 = load64(p + 192);
	k = k512(K2080, K2016);
	for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
		z0 = fold64(z0, k, load64(p));
		z1 = fold64(z1, k, load64(p + 64));
		z2 = fold64(z2, k, load64(p + 128));
		z3 = fold64(z3, k, load64(p + 192));
	}
	k = k512(K544, K480);
	z0 = fold64(z0, k, z1);
	z0 = fold64(z0, k, z2);
	z0 = fold64(z0, k, z3);
	for (; len >= 64; p += 64, len -= 64)
		z0 = fold64(z0, k, load64(p));
	x = _mm_xor_si128(fold16(_mm512_extracti32x4_epi32(z0, 0),
	                         _mm_set_epi64x((long long)K352, (long long)K416)),
	                  fold16(_mm512_extracti32x4_epi32(z0, 1),
	                         _mm_set_epi64x((long long)K224, (long long)K288)));
	x = _mm_xor_si128(x, fold16(_mm512_extracti32x4_epi32(z0, 2),
	                            _mm_set_epi64x((long long)K96, (long long)K160)));
	x = _mm_xor_si128(x, _mm512_extracti32x4_epi32(z0, 3));
	return finish(x, p, len);
}

static int have_pclmul(void)
{
	return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

static int have_vpclmul(void)
{
	return have_pclmul() && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("vpclmulqdq");
}
#endif /* CDP_CRC_X86 */

cdp_crc32_fn cdp_crc32_impl(int which)
{
	switch (which) {
	case CDP_CRC32_AUTO:
#ifdef CDP_CRC_X86
		if (have_vpclmul())
			return crc_vpclmul;
		if (have_pclmul())
			return crc_pclmul;
#endif
		return crc_zlib;
	case CDP_CRC32_ZLIB:
		return crc_zlib;
#ifdef CDP_CRC_X86
	case CDP_CRC32_PCLMUL:
		return have_pclmul() ? crc_pclmul : NULL;
	case CDP_CRC32_VPCLMUL:
		return have_vpclmul() ? crc_vpclmul : NULL;
#endif
	default:
		return NULL;
	}
}

const char *cdp_crc32_name(int which)
{
	static const char *const names[] = { NULL, "zlib", "pclmulqdq", "vpclmulqdq" };
	cdp_crc32_fn f;

	if (which != CDP_CRC32_AUTO)
		return which > 0 && which <= CDP_CRC32_VPCLMUL ? names[which] : NULL;
	f = cdp_crc32_impl(CDP_CRC32_AUTO);
	for (int i = CDP_CRC32_ZLIB; i <= CDP_CRC32_VPCLMUL; i++)
		if (cdp_crc32_impl(i) == f)
			return names[i];
	return NULL;
}

/* The implementation is chosen on the first call; racing first calls store
 * the same pointer, so a relaxed atomic suffices. */
static cdp_crc32_fn chosen;

uint32_t cdp_crc32(uint32_t crc, const void *buf, size_t len)
{
	cdp_crc32_fn f = __atomic_load_n(&chosen, __ATOMIC_RELAXED);

	if (!f) {
		f = cdp_crc32_impl(CDP_CRC32_AUTO);
		__atomic_store_n(&chosen, f, __ATOMIC_RELAXED);
	}
	return f(crc, buf, len);
}
