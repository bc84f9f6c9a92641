/* fuzz_rdv_body.h: the fuzz target for the rendezvous file (dist_rdv.h).
 *
 * Shared by the libFuzzer harness (fuzz_rdv.c) and the corpus replay
 * (tests/dist/test_fuzz_rdv.c). The input is a whole file, checked by
 * cdp_rdv_decode. abort() marks a broken invariant: an accepted file has a
 * job id of at most CDP_RDV_JOB_MAX bytes without NUL and a blob of at most
 * CDP_RDV_BLOB_MAX bytes inside the input, and encoding those parts again
 * gives exactly the input (one valid encoding). Each input also runs with
 * its last four bytes replaced by the right CRC, to get past the CRC check.
 */
#ifndef CDP_FUZZ_RDV_BODY_H
#define CDP_FUZZ_RDV_BODY_H

#include "cdp_crc32.h"
#include "cdp_error.h"
#include "dist/dist_rdv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void cdp_fuzz_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int cdp_fuzz_rdv_part(const uint8_t *p, size_t n)
{
	char job[CDP_RDV_JOB_MAX + 1];
	const unsigned char *blob = NULL;
	uint32_t world = 0;
	size_t bn = 0, jl, len;
	uint8_t *re;
	int rc = cdp_rdv_decode(p, n, job, &world, &blob, &bn);

	if (rc != 0)
		return rc;
	jl = strlen(job);
	if (jl > CDP_RDV_JOB_MAX || bn > CDP_RDV_BLOB_MAX || blob < p ||
	    blob + bn > p + n)
		abort();
	/* the layout of dist_rdv.h */
	len = 24 + jl + bn + 4;
	if (len != n || !(re = malloc(len)))
		abort();
	memcpy(re, "CDP-RDV\n", 8);
	cdp_fuzz_put32(re + 8, 1);
	cdp_fuzz_put32(re + 12, world);
	cdp_fuzz_put32(re + 16, (uint32_t)jl);
	cdp_fuzz_put32(re + 20, (uint32_t)bn);
	memcpy(re + 24, job, jl);
	memcpy(re + 24 + jl, blob, bn);
	cdp_fuzz_put32(re + 24 + jl + bn, cdp_crc32(0, re, 24 + jl + bn));
	if (memcmp(re, p, n) != 0)
		abort();
	free(re);
	return 0;
}

/* The input, then the input with its CRC made right; the first's code. */
static int cdp_fuzz_rdv_one(const uint8_t *p, size_t n)
{
	int rc = cdp_fuzz_rdv_part(p, n);
	uint8_t *q;

	if (n < 4 || !(q = malloc(n)))
		return rc;
	memcpy(q, p, n);
	cdp_fuzz_put32(q + n - 4, cdp_crc32(0, q, n - 4));
	cdp_fuzz_rdv_part(q, n);
	free(q);
	return rc;
}

#endif
