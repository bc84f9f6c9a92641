/* checkpoint_int.h: what the checkpoint sources share (checkpoint.c writes,
 * checkpoint_read.c reads, checkpoint_net.c fills and restores); private to
 * them. The format itself is in checkpoint.h and cdp-checkpoint(5).
 */
#ifndef CDP_CHECKPOINT_INT_H
#define CDP_CHECKPOINT_INT_H

#include <stddef.h>
#include <stdint.h>
#include "checkpoint.h"

#define HDR      24         /* magic, version, chunk count, file size */
#define NCHUNKS  7

extern const char cdp_ckpt_tags[NCHUNKS][5];

/* zlib's crc32 over any length */
uint32_t cdp_ckpt_crc(uint32_t crc, const void *p, size_t n);
/* 0 when ck holds a valid checkpoint (every rule the reader enforces on
 * values, as opposed to layout), else -1 */
int cdp_ckpt_check(const cdp_ckpt *ck);
/* 1..CDP_CKPT_NAME_MAX printable ASCII characters, no space */
int cdp_ckpt_name_ok(const char *s);

static inline void le32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t rd32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t rd64(const unsigned char *b)
{
	return (uint64_t)rd32(b) | (uint64_t)rd32(b + 4) << 32;
}

#endif
