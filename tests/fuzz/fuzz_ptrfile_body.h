/* fuzz_ptrfile_body.h: the fuzz target for pointer files (cdp_ptrfile.h).
 *
 * Shared by the libFuzzer harness (fuzz_ptrfile.c) and the corpus replay
 * (tests/unit/test_fuzz_ptrfile.c). The input is a whole file, parsed from
 * memory (cdp_ptrfile_parse_where). abort() marks a broken invariant:
 *   - an accepted file has count keys, each non-empty, under CDP_KEY_MAX
 *     bytes, without white space or control bytes, no two equal unless the
 *     header says repeats=1 (version 2); written again by
 *     cdp_ptrfile_write_flags it parses to the same uuid, seed, repeats
 *     flag and keys;
 *   - a refusal names a line within the file or the first one missing
 *     from it (for CDP_EDUPKEY two key
 *     lines, first before line, and the key).
 * Random bytes almost never carry a right CRC, so each input also runs with
 * the header's crc32= field recomputed over the key lines.
 */
#ifndef CDP_FUZZ_PTRFILE_BODY_H
#define CDP_FUZZ_PTRFILE_BODY_H

#include "cdp_crc32.h"
#include "cdp_error.h"
#include "cdp_ptrfile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t cdp_fuzz_lines(const uint8_t *p, size_t n)
{
	size_t k = 1;

	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* Parses p[n]; checks the invariants; returns the parser's code. */
static int cdp_fuzz_ptrfile_part(const uint8_t *p, size_t n)
{
	cdp_keylist kl, again;
	cdp_ptrfile_where w;
	char *out = NULL;
	size_t outlen = 0;
	FILE *f;
	int rc = cdp_ptrfile_parse_where(p, n, &kl, &w);

	if (rc != CDP_OK) {
		/* the line may be the first missing one (CDP_ETRUNC) */
		if (kl.count || kl.keys || kl.data || w.line > cdp_fuzz_lines(p, n) + 1)
			abort();
		if (rc == CDP_EDUPKEY &&
		    (w.first < 2 || w.first >= w.line || !w.key[0] ||
		     strlen(w.key) >= CDP_KEY_MAX))
			abort();
		return rc;
	}
	for (size_t i = 0; i < kl.count; i++) {
		if (kl.lens[i] == 0 || kl.lens[i] >= CDP_KEY_MAX ||
		    strlen(kl.keys[i]) != kl.lens[i])
			abort();
		for (size_t j = 0; j < kl.lens[i]; j++)
			if ((unsigned char)kl.keys[i][j] <= 0x20 || kl.keys[i][j] == 0x7f)
				abort();
	}
	if (!(f = open_memstream(&out, &outlen)))
		abort();
	if (cdp_ptrfile_write_flags(f, kl.uuid, kl.seed, kl.repeats ? CDP_PTRFILE_REPEATS : 0,
	                            kl.keys, kl.lens, kl.count) != CDP_OK ||
	    fclose(f) != 0)
		abort();
	if (cdp_ptrfile_parse_where(out, outlen, &again, NULL) != CDP_OK ||
	    strcmp(again.uuid, kl.uuid) || again.seed != kl.seed ||
	    again.repeats != kl.repeats || again.count != kl.count)
		abort();
	for (size_t i = 0; i < kl.count; i++)
		if (again.lens[i] != kl.lens[i] ||
		    memcmp(again.keys[i], kl.keys[i], kl.lens[i]))
			abort();
	free(out);
	cdp_keylist_free(&again);
	cdp_keylist_free(&kl);
	return CDP_OK;
}

/* The input, then (when its header has a crc32= field of 8 characters
 * ending the first line) the input with that CRC made right. Returns the
 * first run's code. */
static int cdp_fuzz_ptrfile_one(const uint8_t *p, size_t n)
{
	int rc = cdp_fuzz_ptrfile_part(p, n);
	const uint8_t *nl = memchr(p, '\n', n);
	size_t hl = nl ? (size_t)(nl - p) : n;
	uint8_t *q;
	char hex[9];

	if (!nl || hl < 14 || memcmp(p + hl - 14, " crc32=", 7) != 0)
		return rc;
	if (!(q = malloc(n)))
		abort();
	memcpy(q, p, n);
	snprintf(hex, sizeof hex, "%08lx",
	         (unsigned long)cdp_crc32(0, p + hl + 1, n - hl - 1));
	memcpy(q + hl - 8, hex, 8);
	cdp_fuzz_ptrfile_part(q, n);
	free(q);
	return rc;
}

#endif
