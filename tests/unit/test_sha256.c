/* test_sha256.c: cdp_sha256 against FIPS 180-4's published examples (the
 * empty message, "abc", the two-block message, a million 'a'), and the
 * digest of a message fed in two parts at every split point equal to its
 * digest in one call, for lengths across the padding's 55/56/64-byte
 * boundaries.
 */
#include "cdp_sha256.h"
#include "tap.h"

#include <string.h>

static void expect(const void *p, size_t n, const char *want, const char *what)
{
	unsigned char d[CDP_SHA256_BYTES];
	char hex[65];

	cdp_sha256_of(p, n, d);
	cdp_sha256_hex(d, hex);
	CHECK(strcmp(hex, want) == 0, "%s: %s, want %s", what, hex, want);
}

static void test_vectors(void)
{
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	static char million[1000000];
	cdp_sha256 s;
	unsigned char d[CDP_SHA256_BYTES];
	char hex[65];

	expect("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty");
	expect("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
	expect(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
	       "two blocks");
	memset(million, 'a', sizeof million);
	expect(million, sizeof million,
	       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "a million a");
	/* the same fed 999 bytes at a time */
	cdp_sha256_init(&s);
	for (size_t i = 0; i < sizeof million; i += 999)
		cdp_sha256_update(&s, million + i, sizeof million - i < 999 ? sizeof million - i : 999);
	cdp_sha256_final(&s, d);
	cdp_sha256_hex(d, hex);
	CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
	      "a million a in parts: %s", hex);
}

static void test_splits(void)
{
	unsigned char msg[200], one[CDP_SHA256_BYTES], two[CDP_SHA256_BYTES];
	int bad = 0;

	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = (unsigned char)(i * 37 + 11);
	for (size_t n = 0; n <= sizeof msg; n++) {
		cdp_sha256_of(msg, n, one);
		for (size_t k = 0; k <= n; k++) {
			cdp_sha256 s;
			cdp_sha256_init(&s);
			cdp_sha256_update(&s, msg, k);
			cdp_sha256_update(&s, msg + k, n - k);
			cdp_sha256_final(&s, two);
			if (memcmp(one, two, sizeof one) != 0 && bad++ < 5)
				CHECK(0, "length %zu split at %zu differs", n, k);
		}
	}
	CHECK(bad == 0, "%d splits differ", bad);
}

int main(void)
{
	test_vectors();
	test_splits();
	return tap_done();
}
