/* fuzz_ckpt_body.h: the fuzz target for the checkpoint reader
 * (ckpt/checkpoint.h, engine/ckpt/checkpoint_read.c).
 *
 * Shared by the libFuzzer harness (fuzz_ckpt.c) and the corpus replay
 * (tests/engine/test_fuzz_ckpt.c). The input is a whole file: decoded from
 * memory (cdp_ckpt_decode), and read as a file (cdp_ckpt_read_rank for
 * rank 0, through a memfd) so that the header check before the allocation
 * and the per-rank selection run too. abort() marks a broken invariant:
 *   - the file reader accepts what the decoder accepts;
 *   - an accepted checkpoint encodes (cdp_ckpt_encode), the encoding
 *     decodes, and encoding that gives the same bytes;
 *   - a refused one leaves the struct zeroed.
 * Random bytes almost never carry a right CRC or file size, so each input
 * also runs with the header's size field (bytes 16..23) set to the input's
 * length and the last four bytes replaced by the right CRC.
 */
#ifndef CDP_FUZZ_CKPT_BODY_H
#define CDP_FUZZ_CKPT_BODY_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* memfd_create */
#endif
#include "cdp_error.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

static int cdp_fuzz_zeroed(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* cdp_ckpt_read_rank(rank 0) on the bytes p[n], through a memfd. */
static int cdp_fuzz_ckpt_file(const uint8_t *p, size_t n)
{
	char path[64], tag[5];
	cdp_ckpt ck;
	int fd = memfd_create("cdp-fuzz-ckpt", MFD_CLOEXEC), rc;

	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	rc = cdp_ckpt_read_rank(path, 0, &ck, tag);
	if (rc == CDP_OK)
		cdp_ckpt_free(&ck);
	else if (!cdp_fuzz_zeroed(&ck, sizeof ck))
		abort();
	close(fd);
	return rc;
}

static int cdp_fuzz_ckpt_part(const uint8_t *p, size_t n)
{
	cdp_ckpt ck, ck2;
	unsigned char *e1 = NULL, *e2 = NULL;
	size_t l1 = 0, l2 = 0;
	int rc = cdp_ckpt_decode(p, n, &ck);
	int frc = cdp_fuzz_ckpt_file(p, n);

	if (rc != CDP_OK) {
		if (!cdp_fuzz_zeroed(&ck, sizeof ck))
			abort();
		return rc;
	}
	if (frc != CDP_OK)
		abort();
	if (cdp_ckpt_encode(&ck, &e1, &l1) != CDP_OK ||
	    cdp_ckpt_decode(e1, l1, &ck2) != CDP_OK)
		abort();
	if (cdp_ckpt_encode(&ck2, &e2, &l2) != CDP_OK || l1 != l2 || memcmp(e1, e2, l1))
		abort();
	free(e1);
	free(e2);
	cdp_ckpt_free(&ck);
	cdp_ckpt_free(&ck2);
	return CDP_OK;
}

/* The input, then the input with its size and CRC made right; the first
 * run's code. */
static int cdp_fuzz_ckpt_one(const uint8_t *p, size_t n)
{
	int rc = cdp_fuzz_ckpt_part(p, n);
	uint8_t *q;
	uint32_t crc;

	if (n < HDR + 4 || !(q = malloc(n)))
		return rc;
	memcpy(q, p, n);
	for (int i = 0; i < 8; i++)
		q[16 + i] = (uint8_t)((uint64_t)n >> (8 * i));
	crc = cdp_ckpt_crc((uint32_t)crc32(0L, Z_NULL, 0), q, n - 4);
	for (int i = 0; i < 4; i++)
		q[n - 4 + i] = (uint8_t)(crc >> (8 * i));
	cdp_fuzz_ckpt_part(q, n);
	free(q);
	return rc;
}

#endif
