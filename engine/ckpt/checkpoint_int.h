/* checkpoint_int.h: what the checkpoint sources share (checkpoint.c writes,
 * checkpoint_read.c reads, checkpoint_net.c fills and restores); private to
 * them. The format itself is in checkpoint.h and cdp-checkpoint(5).
 */
#ifndef CDP_CHECKPOINT_INT_H
#define CDP_CHECKPOINT_INT_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/checkpoint.h"

#define HDR      24         /* magic, version, chunk count, file size */
#define NCHUNKS  7          /* every version's chunks, then the optional */
#define NCHUNKS_MAX 16      /* ones, each at most once and in this order: */
#define CHUNK_RANK 7        /* "RANK" (version 3) */
#define CHUNK_SUMS 8        /* "SUMS" (version 7) */
#define CHUNK_LIVE 9        /* "LIVE" (version 7) */
#define CHUNK_NORM 10       /* "NORM" (version 7) */
#define CHUNK_FROM 11       /* "FROM" (version 7) */
#define CHUNK_TASK 12       /* "TASK" (version 7) */
#define CHUNK_PLAN 13       /* "PLAN" (version 7) */
#define CHUNK_BEST 14       /* "BEST" (version 8, skippable) */
#define CHUNK_RUN  15       /* "RUN " (version 8, skippable) */
#define PLAN_BYTES 64       /* PLAN's payload */
#define BEST_BYTES 24       /* BEST's payload */
#define RUN_BYTES 104       /* RUN's payload in layout 1 (at least, in later ones) */
#define SUMS_BYTES 32       /* SUMS's payload */
#define RANK_HDR 48         /* RANK's fields before the first rank */
#define RANK_PER 16         /* a rank's index, 0, optimizer step before its floats */

extern const char cdp_ckpt_tags[NCHUNKS_MAX][5];
/* the first version that may hold each chunk */
extern const uint32_t cdp_ckpt_tag_since[NCHUNKS_MAX];
/* each chunk's flags (CDP_CKPT_CHUNK_SKIP or 0), from version 8 */
extern const uint32_t cdp_ckpt_tag_flags[NCHUNKS_MAX];

/* zlib's crc32 over any length */
uint32_t cdp_ckpt_crc(uint32_t crc, const void *p, size_t n);
/* 0 when ck holds a valid checkpoint (every rule the reader enforces on
 * values, as opposed to layout), else -1 */
int cdp_ckpt_check(const cdp_ckpt *ck);
/* 1..CDP_CKPT_NAME_MAX printable ASCII characters, no space */
int cdp_ckpt_name_ok(const char *s);
/* The per-rank state's rules, as cdp_ckpt_check applies them (0 or -1);
 * all: every rank's data must be held (for writing). */
int cdp_ckpt_ranks_check(const cdp_ckpt *ck, int all);
/* RANK's payload length for ck: SIZE_MAX when it cannot be represented. */
size_t cdp_ckpt_rank_bytes(const cdp_ckpt *ck);
/* Writes RANK's payload (cdp_ckpt_rank_bytes of them) through put. */
typedef void (*cdp_ckpt_put_fn)(void *ctx, const void *p, size_t n);
void cdp_ckpt_rank_emit(const cdp_ckpt *ck, cdp_ckpt_put_fn put, void *ctx);
/* Parses RANK's payload p[0..n) into ck, whose PARM, BUFS and OPTM are
 * already read, keeping rank keep's floats (keep < 0: all). Returns
 * CDP_EVERSION, CDP_ECRC, CDP_EFORMAT or CDP_ENOMEM; ck's per-rank fields
 * may then be partly set (cdp_ckpt_free frees them). */
int  cdp_ckpt_rank_parse(const unsigned char *p, size_t n, int keep, cdp_ckpt *ck);

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
