/* cdp_sha256.c: SHA-256 as FIPS 180-4 section 6.2 gives it (cdp_sha256.h).
 * Plain C, one 64-byte block at a time: the files it names (initial
 * weights) are hashed once per run, so speed does not matter here.
 */
#include "cdp_sha256.h"

#include <stdio.h>
#include <string.h>

/* the first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4, 4.2.2) */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2
};

static uint32_t ror(uint32_t x, int n)
{
	return x >> n | x << (32 - n);
}

static void block(uint32_t h[8], const unsigned char *b)
{
	uint32_t w[64], v[8];

	for (int t = 0; t < 16; t++)
		w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 |
		       (uint32_t)b[4 * t + 2] << 8 | b[4 * t + 3];
	for (int t = 16; t < 64; t++) {
		uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ w[t - 15] >> 3;
		uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ w[t - 2] >> 10;
		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	memcpy(v, h, sizeof v);
	for (int t = 0; t < 64; t++) {
		uint32_t e = v[4], a = v[0];
		uint32_t t1 = v[7] + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & v[5]) ^ (~e & v[6])) +
		              K[t] + w[t];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) +
		              ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof *v);
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += v[i];
}

void cdp_sha256_init(cdp_sha256 *s)
{
	/* the fractional parts of the square roots of the first 8 primes */
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, h0, sizeof h0);
	s->bytes = 0;
	s->nbuf = 0;
}

void cdp_sha256_update(cdp_sha256 *s, const void *p, size_t n)
{
	const unsigned char *b = p;

	s->bytes += n;
	while (n > 0) {
		size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;
		if (s->nbuf == 0 && n >= 64) {
			block(s->h, b);
			k = 64;
		} else {
			memcpy(s->buf + s->nbuf, b, k);
			s->nbuf += k;
			if (s->nbuf == 64) {
				block(s->h, s->buf);
				s->nbuf = 0;
			}
		}
		b += k;
		n -= k;
	}
}

void cdp_sha256_final(cdp_sha256 *s, unsigned char out[CDP_SHA256_BYTES])
{
	uint64_t bits = s->bytes * 8;
	unsigned char pad[72] = { 0x80 };
	/* a 1 bit, zeros to 56 mod 64, the length in bits big-endian */
	size_t n = (s->nbuf < 56 ? 56 : 120) - s->nbuf;

	for (int i = 0; i < 8; i++)
		pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
	cdp_sha256_update(s, pad, n + 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
}

void cdp_sha256_of(const void *p, size_t n, unsigned char out[CDP_SHA256_BYTES])
{
	cdp_sha256 s;

	cdp_sha256_init(&s);
	cdp_sha256_update(&s, p, n);
	cdp_sha256_final(&s, out);
}

void cdp_sha256_hex(const unsigned char d[CDP_SHA256_BYTES], char out[65])
{
	for (int i = 0; i < CDP_SHA256_BYTES; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}
