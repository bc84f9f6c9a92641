/* test_ptrfile.c: the pointer file (cdp_ptrfile.h, man/cdp-keys.5).
 *
 * Round trips (small, empty, 200k keys), the exact bytes of a known file
 * (its crc32 taken from Python's zlib, not from this code), every failure
 * class of cdp_ptrfile_read with the line it must report (both lines and
 * the key for a duplicate), write failures,
 * and a bias check of the Fisher-Yates shuffle cdp-keyshuffle relies on.
 */
#include "tap.h"
#include "cdp_error.h"
#include "cdp_ptrfile.h"
#include "cdp_rng.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define UUID "0123456789abcdef0123456789abcdef"

static char dir[64];

static const char *tpath(const char *name)
{
	static char buf[256];
	snprintf(buf, sizeof buf, "%s/%s", dir, name);
	return buf;
}

static void put(const char *name, const char *text, size_t len)
{
	FILE *f = fopen(tpath(name), "wb");
	CHECK(f != NULL, "cannot create %s", tpath(name));
	if (!f)
		return;
	fwrite(text, 1, len == (size_t)-1 ? strlen(text) : len, f);
	fclose(f);
}

/* Writes header + body to a file and checks cdp_ptrfile_read's code and
 * line, and that a failed read leaves the list empty. */
static void expect_read(const char *what, const char *header, const char *body,
                        int want_rc, size_t want_line)
{
	char text[4096];
	cdp_keylist kl;
	size_t line = 12345;
	int rc;

	snprintf(text, sizeof text, "%s%s", header, body);
	put("case", text, strlen(text));
	rc = cdp_ptrfile_read(tpath("case"), &kl, &line);
	CHECK(rc == want_rc, "%s: rc %d (%s), want %d (%s)", what, rc,
	      cdp_strerror(rc), want_rc, cdp_strerror(want_rc));
	CHECK(line == want_line, "%s: line %zu, want %zu", what, line, want_line);
	if (rc == CDP_OK)
		cdp_keylist_free(&kl);
	else
		CHECK(kl.keys == NULL && kl.data == NULL && kl.count == 0,
		      "%s: keylist not cleared on error", what);
}

/* fmt takes the count (%llu) and the body's true crc32 (%lx), so only the
 * defect under test is wrong. A macro keeps fmt a literal for -Wformat. */
#define EXPECT_READ(what, fmt, count, body, rc, line) do { \
	char h_[1024]; \
	const char *b_ = (body); \
	snprintf(h_, sizeof h_, fmt, (unsigned long long)(count), \
	         (unsigned long)crc32(0L, (const Bytef *)b_, (uInt)strlen(b_))); \
	expect_read(what, h_, b_, rc, line); \
} while (0)

#define HDR "#cdpool-keys 1 uuid=" UUID " seed=7 count=%llu crc32=%08lx\n"

/* The file name holds exactly want. */
static void check_bytes(const char *name, const char *want)
{
	char got[512] = "";
	size_t n;
	FILE *f = fopen(tpath(name), "rb");

	n = fread(got, 1, sizeof got - 1, f);
	fclose(f);
	got[n] = '\0';
	CHECK(strcmp(got, want) == 0, "bytes differ:\n%s\nwant:\n%s", got, want);
}

static void test_known_bytes(void)
{
	char *keys[] = { "a_0_0", "b_1_2" };
	size_t lens[] = { 5, 5 };
	/* crc32 from Python: zlib.crc32(b"a_0_0\nb_1_2\n") */
	const char *want = "#cdpool-keys 1 uuid=" UUID
	                   " seed=18446744073709551615 count=2 crc32=1a6c722b\n"
	                   "a_0_0\nb_1_2\n";
	FILE *f = fopen(tpath("known"), "wb");

	CHECK_RC(cdp_ptrfile_write(f, UUID, UINT64_MAX, keys, lens, 2), CDP_OK);
	fclose(f);
	check_bytes("known", want);
}

/* repeats=1 (version 2): the bytes Python writes, read back with the key
 * on two lines, and a repeated key without the flag refused as before. */
static void test_repeats(void)
{
	char *keys[] = { "a_0_0", "b_1_2", "a_0_0" };
	size_t lens[] = { 5, 5, 5 }, line = 99;
	/* zlib.crc32(b"a_0_0\nb_1_2\na_0_0\n") */
	const char *want = "#cdpool-keys 2 uuid=" UUID
	                   " seed=3 count=3 repeats=1 crc32=ee4943c0\n"
	                   "a_0_0\nb_1_2\na_0_0\n";
	cdp_keylist kl;
	FILE *f = fopen(tpath("rep"), "wb");

	CHECK_RC(cdp_ptrfile_write_flags(f, UUID, 3, CDP_PTRFILE_REPEATS, keys, lens, 3), CDP_OK);
	fclose(f);
	check_bytes("rep", want);
	CHECK_RC(cdp_ptrfile_read(tpath("rep"), &kl, &line), CDP_OK);
	CHECK(kl.repeats == 1 && kl.count == 3 && strcmp(kl.keys[2], "a_0_0") == 0,
	      "repeats %d, count %zu", kl.repeats, kl.count);
	cdp_keylist_free(&kl);
	f = fopen(tpath("rep"), "wb");
	CHECK_RC(cdp_ptrfile_write_flags(f, UUID, 3, 2, keys, lens, 3), CDP_EINVAL);
	CHECK_RC(cdp_ptrfile_write_flags(f, UUID, 3, 0, keys, lens, 3), CDP_OK);
	fclose(f);
	CHECK_RC(cdp_ptrfile_read(tpath("rep"), &kl, &line), CDP_EDUPKEY);
	CHECK(line == 4, "line %zu", line);
	put("rep", "#cdpool-keys 2 uuid=" UUID " seed=3 count=3 repeats=0 crc32=ee4943c0\n"
	    "a_0_0\nb_1_2\na_0_0\n", (size_t)-1);
	CHECK_RC(cdp_ptrfile_read(tpath("rep"), &kl, &line), CDP_EDUPKEY);
}

static void test_round_trip(size_t count)
{
	char **keys = malloc(count * sizeof *keys + 1);
	size_t *lens = malloc(count * sizeof *lens + 1);
	char *store = malloc(count * 32 + 1);
	cdp_keylist kl;
	size_t line = 99, bad = 0;
	FILE *f;
	int rc;

	for (size_t i = 0; i < count; i++) {
		keys[i] = store + i * 32;
		/* Distinct names and varying lengths, in a scrambled order. */
		lens[i] = (size_t)snprintf(keys[i], 32, "scene-%zu_%zu_%03zu",
		                           (i * 7919) % 13, (i * 104729) % count, i % 1000);
	}
	f = fopen(tpath("rt"), "wb");
	CHECK_RC(cdp_ptrfile_write(f, UUID, 42, keys, lens, count), CDP_OK);
	CHECK(fclose(f) == 0, "fclose");
	rc = cdp_ptrfile_read(tpath("rt"), &kl, &line);
	CHECK(rc == CDP_OK, "read back %zu keys: %s (line %zu)", count,
	      cdp_strerror(rc), line);
	CHECK(line == 0, "line %zu on success", line);
	if (rc == CDP_OK) {
		CHECK(strcmp(kl.uuid, UUID) == 0, "uuid %s", kl.uuid);
		CHECK(kl.seed == 42, "seed %llu", (unsigned long long)kl.seed);
		CHECK(kl.count == count, "count %zu, want %zu", kl.count, count);
		for (size_t i = 0; i < count && i < kl.count; i++)
			if (kl.lens[i] != lens[i] || strcmp(kl.keys[i], keys[i]) != 0)
				bad++;
		CHECK(bad == 0, "%zu of %zu keys differ after the round trip", bad, count);
		cdp_keylist_free(&kl);
		CHECK(kl.keys == NULL && kl.count == 0, "free clears the list");
	}
	free(keys);
	free(lens);
	free(store);
}

static void test_read_failures(void)
{
	char longkey[300];
	char body[400];

	EXPECT_READ("valid", HDR, 2, "a_0_0\nb_0_1\n", CDP_OK, 0);
	EXPECT_READ("valid empty list", HDR, 0, "", CDP_OK, 0);

	put("case", "", 0);
	{
		cdp_keylist kl;
		size_t line;
		CHECK_RC(cdp_ptrfile_read(tpath("case"), &kl, &line), CDP_EMAGIC);
		CHECK(line == 1, "empty file: line %zu", line);
		CHECK_RC(cdp_ptrfile_read(tpath("absent"), &kl, &line), ENOENT);
		CHECK(line == 0, "missing file: line %zu", line);
	}
	EXPECT_READ("bad magic", "#cdpool-kez 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_EMAGIC, 1);
	EXPECT_READ("magic glued to text", "#cdpool-keysX 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_EMAGIC, 1);
	EXPECT_READ("other text file", "key_1_1 %llu %lx\n", 1, "a_0_0\n",
	            CDP_EMAGIC, 1);
	EXPECT_READ("version 3", "#cdpool-keys 3 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_EVERSION, 1);
	EXPECT_READ("version 2 without repeats=", "#cdpool-keys 2 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("version 2, repeats=2", "#cdpool-keys 2 uuid=" UUID
	            " seed=7 count=%llu repeats=2 crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("version 1 with repeats=", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu repeats=1 crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("version 0", "#cdpool-keys 0 whatever %llu %lx\n", 1, "a_0_0\n",
	            CDP_EVERSION, 1);

	/* Header syntax: each field malformed in turn. */
	EXPECT_READ("no version", "#cdpool-keys uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("magic only", "#cdpool-keys\n%llu%lx", 0, "", CDP_ESYNTAX, 1);
	EXPECT_READ("uppercase uuid", "#cdpool-keys 1 uuid=0123456789ABCDEF0123456789abcdef"
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("short uuid", "#cdpool-keys 1 uuid=0123456789abcdef"
	            " seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("negative seed", "#cdpool-keys 1 uuid=" UUID
	            " seed=-7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("seed overflow", "#cdpool-keys 1 uuid=" UUID
	            " seed=18446744073709551616 count=%llu crc32=%08lx\n", 1, "a_0_0\n",
	            CDP_ESYNTAX, 1);
	EXPECT_READ("fields swapped", "#cdpool-keys 1 uuid=" UUID
	            " count=%llu seed=7 crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("two spaces", "#cdpool-keys 1 uuid=" UUID
	            "  seed=7 count=%llu crc32=%08lx\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("short crc", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%07lx\n", 0, "", CDP_ESYNTAX, 1);
	EXPECT_READ("trailing space", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx \n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("crlf header", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx\r\n", 1, "a_0_0\n", CDP_ESYNTAX, 1);
	EXPECT_READ("count overflow", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=99999999999999999999%llu crc32=%08lx\n", 1, "a_0_0\n",
	            CDP_ESYNTAX, 1);

	/* Lines: truncated, extra, unterminated. Line 1 is the header. */
	EXPECT_READ("one line missing", HDR, 3, "a_0_0\nb_0_1\n", CDP_ETRUNC, 4);
	EXPECT_READ("all lines missing", HDR, 5, "", CDP_ETRUNC, 2);
	EXPECT_READ("cut mid-line", HDR, 3, "a_0_0\nb_0", CDP_ETRUNC, 3);
	EXPECT_READ("huge count, no lines", HDR, 1000000000000ULL, "a_0_0\n",
	            CDP_ETRUNC, 3);
	EXPECT_READ("header unterminated, keys due", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx", 2, "", CDP_ETRUNC, 2);
	EXPECT_READ("header unterminated, no keys", "#cdpool-keys 1 uuid=" UUID
	            " seed=7 count=%llu crc32=%08lx", 0, "", CDP_EFORMAT, 1);
	EXPECT_READ("extra line", HDR, 2, "a_0_0\nb_0_1\nc_0_2\n", CDP_EFORMAT, 4);
	EXPECT_READ("extra unterminated", HDR, 1, "a_0_0\nb", CDP_EFORMAT, 3);
	EXPECT_READ("extra empty line", HDR, 2, "a_0_0\nb_0_1\n\n", CDP_EFORMAT, 4);
	EXPECT_READ("no final newline", HDR, 2, "a_0_0\nb_0_1", CDP_EFORMAT, 3);

	/* Key syntax: the offending line is reported. */
	EXPECT_READ("space in key", HDR, 3, "a_0_0\nb 0_1\nc_0_2\n", CDP_ESYNTAX, 3);
	EXPECT_READ("tab in key", HDR, 2, "a_0_0\nb_0_1\t\n", CDP_ESYNTAX, 3);
	EXPECT_READ("crlf key", HDR, 2, "a_0_0\r\nb_0_1\r\n", CDP_ESYNTAX, 2);
	EXPECT_READ("empty key", HDR, 3, "a_0_0\n\nc_0_2\n", CDP_ESYNTAX, 3);
	EXPECT_READ("control byte", HDR, 1, "a\001_0_0\n", CDP_ESYNTAX, 2);
	memset(longkey, 'k', 256);
	longkey[256] = '\0';
	snprintf(body, sizeof body, "a_0_0\n%s\n", longkey);
	EXPECT_READ("key of 256 bytes", HDR, 2, body, CDP_ESYNTAX, 3);
	longkey[255] = '\0';
	snprintf(body, sizeof body, "a_0_0\n%s\n", longkey);
	EXPECT_READ("key of 255 bytes", HDR, 2, body, CDP_OK, 0);

	/* Duplicates: the later line is the one reported (cdp-keys(5): each
	 * key at most once per file). */
	EXPECT_READ("duplicate key", HDR, 3, "a_0_0\nb_0_1\na_0_0\n", CDP_EDUPKEY, 4);
	EXPECT_READ("adjacent duplicate", HDR, 2, "a_0_0\na_0_0\n", CDP_EDUPKEY, 3);
	EXPECT_READ("prefix is no duplicate", HDR, 3, "a_0_0\na_0_00\na_0_\n", CDP_OK, 0);

	/* One key 16 times among others, as the attack found it: the detail
	 * names the key and its first two lines. */
	{
		char many[1024] = "";
		cdp_ptrfile_where w;
		cdp_keylist kl;
		for (int i = 0; i < 20; i++) {
			char k[32];
			snprintf(k, sizeof k, i % 5 == 1 || i > 8 ? "a_0001_0002\n" : "s_%d_0\n", i);
			strcat(many, k);
		}
		{
			char h[256];
			FILE *f = fopen(tpath("case"), "wb");
			snprintf(h, sizeof h, "#cdpool-keys 1 uuid=" UUID " seed=7 count=20 crc32=%08lx\n",
			         (unsigned long)crc32(0L, (const Bytef *)many, (uInt)strlen(many)));
			fputs(h, f);
			fputs(many, f);
			fclose(f);
		}
		memset(&w, 0x55, sizeof w);
		CHECK_RC(cdp_ptrfile_read_where(tpath("case"), &kl, &w), CDP_EDUPKEY);
		CHECK(w.first == 3 && w.line == 8, "duplicate on lines %zu and %zu, want 3 and 8",
		      w.first, w.line);
		CHECK(strcmp(w.key, "a_0001_0002") == 0, "duplicate key '%.20s'", w.key);
		CHECK(kl.keys == NULL && kl.count == 0, "keylist not cleared on a duplicate");
		CHECK_RC(cdp_ptrfile_read_where(tpath("absent"), &kl, &w), ENOENT);
		CHECK(w.line == 0 && w.first == 0 && w.key[0] == '\0', "stale detail on ENOENT");
	}

	/* A correct structure with a wrong checksum. */
	put("case", "#cdpool-keys 1 uuid=" UUID " seed=7 count=2 crc32=1a6c722c\n"
	    "a_0_0\nb_1_2\n", strlen("#cdpool-keys 1 uuid=" UUID
	    " seed=7 count=2 crc32=1a6c722c\n" "a_0_0\nb_1_2\n"));
	{
		cdp_keylist kl;
		size_t line = 7;
		CHECK_RC(cdp_ptrfile_read(tpath("case"), &kl, &line), CDP_ECRC);
		CHECK(line == 0, "crc mismatch: line %zu", line);
	}
	/* One flipped key byte that keeps the syntax valid. */
	put("case", "#cdpool-keys 1 uuid=" UUID " seed=7 count=2 crc32=1a6c722b\n"
	    "a_0_0\nb_1_3\n", strlen("#cdpool-keys 1 uuid=" UUID
	    " seed=7 count=2 crc32=1a6c722b\n" "a_0_0\nb_1_3\n"));
	{
		cdp_keylist kl;
		size_t line = 7;
		CHECK_RC(cdp_ptrfile_read(tpath("case"), &kl, &line), CDP_ECRC);
	}
}

static void test_write_failures(void)
{
	char *keys[] = { "a_0_0", "b 0_1" };
	size_t lens[] = { 5, 5 };
	char *big = malloc(1 << 20);
	char **many = malloc(20000 * sizeof *many);
	size_t *mlens = malloc(20000 * sizeof *mlens);
	FILE *f = tmpfile();

	CHECK_RC(cdp_ptrfile_write(f, UUID, 1, keys, lens, 2), CDP_EKEY);
	CHECK(ftell(f) == 0, "a rejected list wrote %ld bytes", ftell(f));
	CHECK_RC(cdp_ptrfile_write(f, "0123456789ABCDEF0123456789abcdef", 1, keys, lens, 1),
	         CDP_EINVAL);
	CHECK_RC(cdp_ptrfile_write(f, "0123", 1, keys, lens, 1), CDP_EINVAL);
	CHECK(ftell(f) == 0, "a rejected uuid wrote %ld bytes", ftell(f));
	fclose(f);

	/* ENOSPC comes back as itself, whether at a write or at the flush. */
	f = fopen("/dev/full", "w");
	if (f && big && many && mlens) {
		for (size_t i = 0; i < 20000; i++) {
			many[i] = big;
			mlens[i] = 40;
		}
		memset(big, 'x', 40);
		CHECK_RC(cdp_ptrfile_write(f, UUID, 1, keys, lens, 1), ENOSPC);
		clearerr(f);
		CHECK_RC(cdp_ptrfile_write(f, UUID, 1, many, mlens, 20000), ENOSPC);
		fclose(f);
	}
	free(big);
	free(many);
	free(mlens);
}

/* The tool shuffles with cdp_rng_shuffle_size; over 2400 seeds every one of
 * the 24 orders of 4 keys must appear about 100 times. The chi-square bound
 * 49.73 is the 0.999 quantile for 23 degrees of freedom; a shuffle that
 * skips the last swap or draws below(n) instead of below(i+1) exceeds it by
 * far. Also checks each result is a permutation. */
static void test_shuffle_unbiased(void)
{
	unsigned hits[256] = { 0 };
	unsigned seen = 0, nonperm = 0;
	double chi2 = 0.0;
	const unsigned trials = 2400;

	for (uint64_t seed = 0; seed < trials; seed++) {
		cdp_rng r;
		size_t a[4] = { 0, 1, 2, 3 };
		unsigned mask = 0, code = 0;
		cdp_rng_seed(&r, seed);
		cdp_rng_shuffle_size(&r, a, 4);
		for (int i = 0; i < 4; i++) {
			if (a[i] > 3) {
				mask = 0;
				break;
			}
			mask |= 1u << a[i];
			code = code * 4 + (unsigned)a[i];
		}
		if (mask != 15) {
			nonperm++;
			continue;
		}
		hits[code]++;
	}
	CHECK(nonperm == 0, "%u shuffles were not permutations", nonperm);
	for (unsigned c = 0; c < 256; c++) {
		if (hits[c]) {
			double d = hits[c] - trials / 24.0;
			seen++;
			chi2 += d * d / (trials / 24.0);
		}
	}
	chi2 += (24 - seen) * (trials / 24.0);
	CHECK(seen == 24, "%u of 24 orders of 4 keys appeared", seen);
	CHECK(chi2 < 49.73, "chi-square %.1f over 24 orders (bound 49.73)", chi2);

	/* Position bias on a longer list: each key lands first about 1/10 of
	 * the time over 5000 seeds (binomial sd ~21; 6 sd margin). */
	{
		unsigned first[10] = { 0 };
		unsigned worst = 0;
		for (uint64_t seed = 0; seed < 5000; seed++) {
			cdp_rng r;
			size_t a[10];
			for (size_t i = 0; i < 10; i++)
				a[i] = i;
			cdp_rng_seed(&r, seed * 2654435761u + 17);
			cdp_rng_shuffle_size(&r, a, 10);
			if (a[0] < 10)
				first[a[0]]++;
		}
		for (int i = 0; i < 10; i++) {
			unsigned d = first[i] > 500 ? first[i] - 500 : 500 - first[i];
			if (d > worst)
				worst = d;
		}
		CHECK(worst < 127, "key first-position counts deviate by %u from 500", worst);
	}
}
/* A bad key line names what is wrong with it, not "syntax error": a key
 * over 255 bytes (a 300-byte line, and one of 1 MB), an empty line, a
 * space. */
static void test_key_why(void)
{
	static const struct { size_t len; char fill; const char *why; } c[] = {
		{ 300, 'a', "key longer than 255 bytes" },
		{ 1 << 20, 'a', "key longer than 255 bytes" },
		{ 0, 'a', "empty key line" },
		{ 3, ' ', "key holds a space or a control byte" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		size_t blen = 6 + c[i].len + 1;
		char *body = malloc(blen), *file = malloc(blen + 200);
		cdp_ptrfile_where w;
		cdp_keylist kl;
		int hl, rc;

		CHECK(body && file, "malloc");
		if (!body || !file)
			return;
		memcpy(body, "a_0_0\n", 6);
		memset(body + 6, c[i].fill, c[i].len);
		body[blen - 1] = '\n';
		hl = snprintf(file, 200, "#cdpool-keys 1 uuid=0123456789abcdef0123456789abcdef"
		              " seed=7 count=2 crc32=%08lx\n",
		              crc32(0, (const unsigned char *)body, (uInt)blen));
		memcpy(file + hl, body, blen);
		rc = cdp_ptrfile_parse_where(file, (size_t)hl + blen, &kl, &w);
		CHECK(rc == CDP_ESYNTAX && w.line == 3 && w.why && strcmp(w.why, c[i].why) == 0,
		      "case %zu: rc %d line %zu why '%s'", i, rc, w.line, w.why ? w.why : "(null)");
		free(body);
		free(file);
	}
}

int main(void)
{
	snprintf(dir, sizeof dir, "%s/cdptest.XXXXXX",
	         getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 40 ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	test_known_bytes();
	test_repeats();
	test_round_trip(0);
	test_round_trip(1);
	test_round_trip(1000);
	test_round_trip(200000);
	test_read_failures();
	test_write_failures();
	test_key_why();
	test_shuffle_unbiased();

	tap_tmpdir_remove(dir);   /* every file a test made, not a list to keep up */
	return tap_done();
}
