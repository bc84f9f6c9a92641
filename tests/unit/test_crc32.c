/* test_crc32.c: every cdp_crc32 implementation this CPU has against zlib's
 * crc32, bit for bit.
 *
 * Inputs are random bytes at every alignment 0..63, lengths that cross each
 * path's thresholds (16-byte lanes, 64- and 256-byte folding steps) and
 * random lengths up to 1 MiB, each continuing a random CRC, so the
 * pre/post inversion, the fold constants, the lane merges and the tail are
 * all exercised. Implementations missing on this CPU are reported and
 * skipped; the zlib one always runs, and on x86-64 at least one vector path
 * is expected, else the fast paths would go untested here unnoticed.
 */
#include "cdp_crc32.h"
#include "cdp_rng.h"
#include "tap.h"

#include <stdlib.h>
#include <zlib.h>

#define BIG (1u << 20)

static uint32_t ref(uint32_t crc, const uint8_t *p, size_t n)
{
	return (uint32_t)crc32_z(crc, p, n);
}

/* The published check value of CRC-32/ISO-HDLC. */
static void test_check_value(void)
{
	static const char s[] = "123456789";

	CHECK(cdp_crc32(0, s, 9) == 0xcbf43926u, "crc of \"123456789\" is %08x",
	      (unsigned)cdp_crc32(0, s, 9));
	CHECK(cdp_crc32(0x12345678u, NULL, 0) == 0x12345678u, "empty input keeps the crc");
}

static uint8_t z[2048], o[2048];

static void test_impl(int which, const uint8_t *buf, cdp_rng *rng)
{
	cdp_crc32_fn f = cdp_crc32_impl(which);
	const char *name = cdp_crc32_name(which);
	int bad = 0, n = 0;

	if (!f) {
		printf("# %s: not supported here, skipped\n", name);
		return;
	}
	/* every length 0..1100 at a random alignment */
	for (size_t len = 0; len <= 1100; len++, n++) {
		size_t off = (size_t)cdp_rng_below(rng, 64);
		uint32_t c0 = (uint32_t)cdp_rng_next(rng);
		if (f(c0, buf + off, len) != ref(c0, buf + off, len) && bad++ < 5)
			CHECK(0, "%s: len %zu off %zu: %08x, zlib %08x", name, len, off,
			      (unsigned)f(c0, buf + off, len), (unsigned)ref(c0, buf + off, len));
	}
	/* every alignment around the folding thresholds */
	for (size_t off = 0; off < 64; off++)
		for (size_t len = 240; len <= 272; len++, n++)
			if (f(0, buf + off, len) != ref(0, buf + off, len) && bad++ < 5)
				CHECK(0, "%s: len %zu off %zu", name, len, off);
	/* random lengths up to 1 MiB */
	for (int t = 0; t < 300; t++, n++) {
		size_t off = (size_t)cdp_rng_below(rng, 64), len = (size_t)cdp_rng_below(rng, BIG);
		uint32_t c0 = (uint32_t)cdp_rng_next(rng);
		if (f(c0, buf + off, len) != ref(c0, buf + off, len) && bad++ < 5)
			CHECK(0, "%s: len %zu off %zu", name, len, off);
	}
	/* all zeros and all ones, where a lost inversion shows */
	for (size_t i = 0; i < sizeof o; i++)
		o[i] = 0xff;
	for (size_t len = 0; len <= 2048; len += 61, n++) {
		if ((f(0, z, len) != ref(0, z, len) || f(0, o, len) != ref(0, o, len)) && bad++ < 5)
			CHECK(0, "%s: constant input of %zu bytes", name, len);
	}
	CHECK(bad == 0, "%s: %d of %d inputs differ from zlib", name, bad, n);
	if (!bad)
		printf("# %s: %d inputs equal zlib's crc32\n", name, n);
}

/* Chaining: the CRC of a split input equals the CRC of the whole. */
static void test_chain(const uint8_t *buf, cdp_rng *rng)
{
	for (int t = 0; t < 200; t++) {
		size_t len = (size_t)cdp_rng_below(rng, 70000), cut = len ? (size_t)cdp_rng_below(rng, len) : 0;
		uint32_t whole = cdp_crc32(0, buf, len);
		uint32_t parts = cdp_crc32(cdp_crc32(0, buf, cut), buf + cut, len - cut);
		CHECK(whole == parts, "len %zu cut at %zu: %08x vs %08x", len, cut,
		      (unsigned)whole, (unsigned)parts);
	}
}

static void test_names(void)
{
	CHECK(cdp_crc32_impl(CDP_CRC32_ZLIB) != NULL, "zlib is always there");
	CHECK(cdp_crc32_impl(CDP_CRC32_AUTO) != NULL, "auto picks one");
	CHECK(cdp_crc32_impl(99) == NULL && cdp_crc32_name(99) == NULL && cdp_crc32_name(-1) == NULL,
	      "unknown implementation");
	CHECK(cdp_crc32_name(CDP_CRC32_AUTO) != NULL, "auto has a name");
#if defined(__x86_64__)
	if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
		CHECK(cdp_crc32_impl(CDP_CRC32_PCLMUL) != NULL, "this CPU has PCLMULQDQ");
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
		CHECK(cdp_crc32_impl(CDP_CRC32_VPCLMUL) != NULL, "this CPU has VPCLMULQDQ");
#endif
	printf("# cdp_crc32 uses %s\n", cdp_crc32_name(CDP_CRC32_AUTO));
}

int main(void)
{
	uint8_t *buf = malloc(BIG + 64);
	cdp_rng rng;

	if (!buf) {
		fprintf(stderr, "test_crc32: out of memory\n");
		return 99;
	}
	cdp_rng_seed(&rng, 20240611);
	for (size_t i = 0; i < BIG + 64; i++)
		buf[i] = (uint8_t)cdp_rng_next(&rng);
	test_check_value();
	test_names();
	for (int w = CDP_CRC32_ZLIB; w <= CDP_CRC32_VPCLMUL; w++)
		test_impl(w, buf, &rng);
	test_chain(buf, &rng);
	free(buf);
	return tap_done();
}
