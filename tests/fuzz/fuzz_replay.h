/* fuzz_replay.h: the corpus replay of the regression tests that go with the
 * fuzz harnesses of fuzz_*_body.h (tests/unit/test_fuzz_*.c and the engine
 * and dist ones).
 *
 * cdp_fuzz_replay_main(NAME, one) runs every file of tests/fuzz/NAME/
 * through one(), the harness body (which aborts on a broken invariant and
 * returns the decoder's result), and checks what the file name promises:
 *   ok-*            accepted (one() returns 0)
 *   bad-*, crash-*  refused (nonzero); crash-* once crashed the decoder
 * A name ending in .hex holds the input as hex digits (white space
 * ignored), any other file the input itself; README is skipped. An empty
 * or unreadable directory is a failure, not a pass.
 */
#ifndef CDP_FUZZ_REPLAY_H
#define CDP_FUZZ_REPLAY_H

#include "../unit/tap.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*cdp_fuzz_one_fn)(const uint8_t *data, size_t size);

static int cdp_fuzz_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads path into *buf (malloc'ed), decoding hex when hex; 0 on success. */
static int cdp_fuzz_load(const char *path, int hex, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t n = 0, cap = 4096;
	uint8_t *b = malloc(cap);
	int c, hi = -1, bad = 0;

	if (!f || !b) {
		if (f)
			fclose(f);
		free(b);
		return -1;
	}
	while ((c = getc(f)) != EOF) {
		int v = c;

		if (hex) {
			if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
				continue;
			if ((v = cdp_fuzz_hexval(c)) < 0) {
				bad = 1;
				break;
			}
			if (hi < 0) {
				hi = v;
				continue;
			}
			v = hi << 4 | v;
			hi = -1;
		}
		if (n == cap) {
			uint8_t *nb = realloc(b, cap *= 2);
			if (!nb) {
				bad = 1;
				break;
			}
			b = nb;
		}
		b[n++] = (uint8_t)v;
	}
	if (ferror(f) || hi >= 0)
		bad = 1;
	fclose(f);
	if (bad) {
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

static int cdp_fuzz_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int cdp_fuzz_replay_main(const char *name, cdp_fuzz_one_fn one)
{
	char dir[4096], path[8192];
	DIR *d;
	struct dirent *e;
	size_t nfiles = 0;

	snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", CDP_SRCDIR, name);
	d = opendir(dir);
	CHECK(d != NULL, "cannot open '%s': %s", dir, strerror(errno));
	if (!d)
		return tap_done();
	while ((e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		size_t len = strlen(n);
		uint8_t *buf = NULL;
		size_t size = 0;
		int rc;

		if (n[0] == '.' || strcmp(n, "README") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, n);
		if (cdp_fuzz_load(path, len > 4 && strcmp(n + len - 4, ".hex") == 0,
		                  &buf, &size) != 0) {
			CHECK(0, "cannot read '%s'", path);
			continue;
		}
		rc = one(buf, size);
		if (cdp_fuzz_starts(n, "ok-"))
			CHECK(rc == 0, "%s: refused (%d)", n, rc);
		else if (cdp_fuzz_starts(n, "bad-") || cdp_fuzz_starts(n, "crash-"))
			CHECK(rc != 0, "%s: accepted", n);
		else
			CHECK(0, "%s: the name says neither ok- nor bad- nor crash-", n);
		free(buf);
		nfiles++;
	}
	closedir(d);
	CHECK(nfiles > 0, "no inputs in '%s'", dir);
	printf("replayed %zu inputs of %s\n", nfiles, dir);
	return tap_done();
}

#endif
