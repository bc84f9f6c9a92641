/* cdp_sha256.h: SHA-256 (FIPS 180-4), for naming a file by its contents.
 *
 * A checkpoint started from initial weights records the SHA-256 of the
 * file they came from (cdp-checkpoint(5), FROM), the same digest as
 * sha256sum(1) and Python's hashlib.sha256 give, so a user can tell which
 * weights a model was fine-tuned from. Not constant-time and not meant for
 * secrets.
 */
#ifndef CDP_SHA256_H
#define CDP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define CDP_SHA256_BYTES 32

typedef struct cdp_sha256 {
	uint32_t h[8];
	uint64_t bytes;                 /* message length so far */
	unsigned char buf[64];          /* the block being filled */
	size_t nbuf;
} cdp_sha256;

void cdp_sha256_init(cdp_sha256 *s);
/* Appends n bytes at p (any alignment; n 0 does nothing). */
void cdp_sha256_update(cdp_sha256 *s, const void *p, size_t n);
/* The digest of everything appended; s must be initialised again to reuse. */
void cdp_sha256_final(cdp_sha256 *s, unsigned char out[CDP_SHA256_BYTES]);
/* The digest of p[0..n) in one call. */
void cdp_sha256_of(const void *p, size_t n, unsigned char out[CDP_SHA256_BYTES]);
/* out[65]: the digest as 64 lowercase hexadecimal digits and a NUL. */
void cdp_sha256_hex(const unsigned char d[CDP_SHA256_BYTES], char out[65]);

#endif
