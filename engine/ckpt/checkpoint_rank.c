/* checkpoint_rank.c: the per-rank state of a checkpoint, the optional RANK
 * chunk of version 3 (checkpoint.h, man/cdp-checkpoint.5): its rules, its
 * sizes, writing it through the writer's output function and parsing it
 * from the reader's bytes.
 *
 * The payload, little-endian:
 *   0   u32 section version (CDP_CKPT_RANK_VERSION)
 *   4   u32 ranks j
 *   8   u32 sync mode (CDP_CKPT_SYNC_*)
 *   12  u32 K
 *   16  f64 RHO
 *   24  u32 blocks held (CDP_CKPT_RANK_* flags)
 *   28  u32 moment blocks per rank nm (OPTM's, when CDP_CKPT_RANK_OPTIM)
 *   32  u64 P, values per parameter-shaped block (PARM's total)
 *   40  u64 B, values per buffer block (BUFS's total)
 *   48  per rank r = 0..j-1: u32 r, u32 0, i64 optimizer steps, then its
 *       stride f32 values (the blocks held, in flag order)
 *   end-4 u32 CRC-32 of the payload before it
 * The section carries its own CRC besides the file's: the file's protects
 * the bytes, this one lets a reader say which part is damaged, and keeps
 * the section checkable should it ever be stored apart.
 *
 * A reader that resumes rank r keeps only rank r's floats (the others are
 * checked for size and skipped), so j ranks reading one checkpoint do not
 * each hold j ranks' state. The file itself is still read whole (its CRC
 * first), once, at start-up.
 */
#include "checkpoint_int.h"
#include "cdp_error.h"
#include "cdp_num.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static size_t total_numel(const cdp_ckpt_tensor *t, int n)
{
	size_t s = 0;

	for (int i = 0; t && i < n; i++)
		s += t[i].numel;
	return s;
}

static int moment_blocks(const cdp_ckpt *ck)
{
	return ck->optim.type ? cdp_optim_nblocks(&ck->optim) : 0;
}

size_t cdp_ckpt_rank_floats(unsigned what, size_t P, size_t B, int nm)
{
	size_t blocks = 0, s;

	if (what & CDP_CKPT_RANK_PARAMS)
		blocks++;
	if (what & CDP_CKPT_RANK_OPTIM)
		blocks += nm > 0 ? (size_t)nm : 0;
	if (what & CDP_CKPT_RANK_DUAL)
		blocks++;
	if (cdp_mul_size(blocks, P, &s) != 0)
		return SIZE_MAX;
	if (what & CDP_CKPT_RANK_BUFFERS) {
		if (B > SIZE_MAX - s)
			return SIZE_MAX;
		s += B;
	}
	return s;
}

size_t cdp_ckpt_rank_stride(const cdp_ckpt *ck)
{
	return cdp_ckpt_rank_floats(ck->rank_what, total_numel(ck->params, ck->nparams),
	                            total_numel(ck->buffers, ck->nbuffers), moment_blocks(ck));
}

/* RANK_HDR + j (RANK_PER + 4 stride) + 4, or SIZE_MAX */
static size_t section_bytes(size_t j, size_t stride)
{
	size_t per, all;

	if (stride == SIZE_MAX || cdp_mul_size(stride, sizeof(float), &per) != 0 ||
	    per > SIZE_MAX - RANK_PER || cdp_mul_size(j, per + RANK_PER, &all) != 0 ||
	    all > SIZE_MAX / 2 - RANK_HDR - 4)
		return SIZE_MAX;
	return RANK_HDR + all + 4;
}

size_t cdp_ckpt_rank_bytes(const cdp_ckpt *ck)
{
	return section_bytes((size_t)ck->nranks, cdp_ckpt_rank_stride(ck));
}

/* The header fields' rules, shared by the checks of a struct and of a file. */
static int fields_ok(const cdp_ckpt *ck, uint64_t j, uint64_t sync, uint64_t k, double rho,
                     uint64_t what)
{
	size_t P = total_numel(ck->params, ck->nparams), B = total_numel(ck->buffers, ck->nbuffers);

	if (j < 1 || j > CDP_CKPT_MAX_RANKS || sync > CDP_CKPT_SYNC_ADMM || k < 1 || k > INT_MAX ||
	    !isfinite(rho) || rho < 0 || what == 0 || what > 15)
		return 0;
	if ((what & CDP_CKPT_RANK_DUAL) && sync != CDP_CKPT_SYNC_ADMM)
		return 0;
	if ((what & CDP_CKPT_RANK_OPTIM) && moment_blocks(ck) == 0)
		return 0;
	if ((what & CDP_CKPT_RANK_BUFFERS) && B == 0)
		return 0;
	if ((what & (CDP_CKPT_RANK_PARAMS | CDP_CKPT_RANK_DUAL)) && P == 0)
		return 0;
	return section_bytes((size_t)j, cdp_ckpt_rank_floats((unsigned)what, P, B,
	                                                     moment_blocks(ck))) != SIZE_MAX;
}

int cdp_ckpt_ranks_check(const cdp_ckpt *ck, int all)
{
	if (ck->nranks == 0)
		return 0;
	if (ck->nranks < 0 || ck->rank_sync < 0 || ck->rank_k < 1 ||
	    !fields_ok(ck, (uint64_t)ck->nranks, (uint64_t)ck->rank_sync, (uint64_t)ck->rank_k,
	               ck->rank_rho, ck->rank_what) || !ck->rank_optim_step)
		return -1;
	for (int r = 0; r < ck->nranks; r++)
		if (ck->rank_optim_step[r] < 0)
			return -1;
	if (ck->rank_loaded == -1)
		return ck->rank_data ? 0 : -1;
	if (all || ck->rank_loaded < -1)
		return -1;
	return ck->rank_loaded >= ck->nranks || ck->rank_data ? 0 : -1;
}

int cdp_ckpt_set_ranks(cdp_ckpt *ck, int nranks, int sync, long k, double rho, unsigned what)
{
	long *steps;
	float *data;
	size_t stride, bytes;

	if (nranks < 1 || sync < 0 || k < 1 ||
	    !fields_ok(ck, (uint64_t)nranks, (uint64_t)sync, (uint64_t)k, rho, what))
		return CDP_EINVAL;
	stride = cdp_ckpt_rank_floats(what, total_numel(ck->params, ck->nparams),
	                              total_numel(ck->buffers, ck->nbuffers), moment_blocks(ck));
	if (cdp_mul_size(stride, (size_t)nranks * sizeof(float), &bytes) != 0)
		return CDP_EOVERFLOW;
	steps = calloc((size_t)nranks, sizeof(*steps));
	data = calloc(bytes ? bytes : 1, 1);
	if (!steps || !data) {
		free(steps);
		free(data);
		return CDP_ENOMEM;
	}
	free(ck->rank_optim_step);
	free(ck->rank_data);
	ck->nranks = nranks;
	ck->rank_sync = sync;
	ck->rank_k = k;
	ck->rank_rho = rho;
	ck->rank_what = what;
	ck->rank_optim_step = steps;
	ck->rank_data = data;
	ck->rank_loaded = -1;
	return CDP_OK;
}

float *cdp_ckpt_rank_block(const cdp_ckpt *ck, int r, unsigned what)
{
	size_t P = total_numel(ck->params, ck->nparams), stride = cdp_ckpt_rank_stride(ck);
	static const unsigned order[4] = {
		CDP_CKPT_RANK_PARAMS, CDP_CKPT_RANK_OPTIM, CDP_CKPT_RANK_DUAL, CDP_CKPT_RANK_BUFFERS
	};
	float *base;
	size_t off = 0;

	if (r < 0 || r >= ck->nranks || !ck->rank_data || !(ck->rank_what & what) ||
	    (what & (what - 1)) != 0)
		return NULL;
	if (ck->rank_loaded == -1)
		base = ck->rank_data + (size_t)r * stride;
	else if (ck->rank_loaded == r)
		base = ck->rank_data;
	else
		return NULL;
	for (int i = 0; i < 4 && order[i] != what; i++) {
		if (!(ck->rank_what & order[i]))
			continue;
		off += order[i] == CDP_CKPT_RANK_OPTIM ? (size_t)moment_blocks(ck) * P : P;
	}
	return base + off;
}

/* ---- the chunk ----------------------------------------------------------- */

static void le64(unsigned char *b, uint64_t v)
{
	le32(b, (uint32_t)v);
	le32(b + 4, (uint32_t)(v >> 32));
}

/* Floats out little-endian, through a small staging buffer on big-endian
 * hosts. */
static void put_floats(const float *x, size_t n, cdp_ckpt_put_fn put, void *ctx, uint32_t *crc)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	put(ctx, x, n * sizeof(float));
	*crc = cdp_ckpt_crc(*crc, x, n * sizeof(float));
#else
	unsigned char b[4096];
	while (n > 0) {
		size_t m = n < sizeof(b) / 4 ? n : sizeof(b) / 4;
		for (size_t i = 0; i < m; i++) {
			uint32_t u;
			memcpy(&u, &x[i], 4);
			le32(b + 4 * i, u);
		}
		put(ctx, b, 4 * m);
		*crc = cdp_ckpt_crc(*crc, b, 4 * m);
		x += m;
		n -= m;
	}
#endif
}

void cdp_ckpt_rank_emit(const cdp_ckpt *ck, cdp_ckpt_put_fn put, void *ctx)
{
	unsigned char h[RANK_HDR], b[RANK_PER];
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	size_t stride = cdp_ckpt_rank_stride(ck);
	uint64_t rho;

	memcpy(&rho, &ck->rank_rho, 8);
	le32(h, CDP_CKPT_RANK_VERSION);
	le32(h + 4, (uint32_t)ck->nranks);
	le32(h + 8, (uint32_t)ck->rank_sync);
	le32(h + 12, (uint32_t)ck->rank_k);
	le64(h + 16, rho);
	le32(h + 24, ck->rank_what);
	le32(h + 28, (ck->rank_what & CDP_CKPT_RANK_OPTIM) ? (uint32_t)moment_blocks(ck) : 0);
	le64(h + 32, total_numel(ck->params, ck->nparams));
	le64(h + 40, total_numel(ck->buffers, ck->nbuffers));
	put(ctx, h, sizeof(h));
	crc = cdp_ckpt_crc(crc, h, sizeof(h));
	for (int r = 0; r < ck->nranks; r++) {
		le32(b, (uint32_t)r);
		le32(b + 4, 0);
		le64(b + 8, (uint64_t)(int64_t)ck->rank_optim_step[r]);
		put(ctx, b, sizeof(b));
		crc = cdp_ckpt_crc(crc, b, sizeof(b));
		put_floats(ck->rank_data + (size_t)r * stride, stride, put, ctx, &crc);
	}
	le32(b, crc);
	put(ctx, b, 4);
}

static void get_floats(float *x, const unsigned char *p, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(x, p, n * sizeof(float));
#else
	for (size_t i = 0; i < n; i++) {
		uint32_t u = rd32(p + 4 * i);
		memcpy(&x[i], &u, 4);
	}
#endif
}

/* A rank's floats not kept are still read for the first that is not
 * finite, so that every reader refuses what one holding them all refuses
 * (cdp-checkpoint(5), VALIDATION): rank_bad (r + 1), rank_bad_at, and the
 * value for the message. */
static void bad_float(cdp_ckpt *ck, int r, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = rd32(p + 4 * i);
		float x;
		memcpy(&x, &u, 4);
		if (!isfinite(x)) {
			ck->rank_bad = r + 1;
			ck->rank_bad_at = i;
			ck->rank_bad_value = x;
			return;
		}
	}
}

int cdp_ckpt_rank_parse(const unsigned char *p, size_t n, int keep, cdp_ckpt *ck)
{
	uint64_t j, sync, k, what, nm, P, B, u;
	size_t stride, per, held;
	double rho;
	uint32_t v;

	if (n < RANK_HDR + 4)
		return CDP_EFORMAT;
	/* version first, as in the file header: a later layout may move the CRC */
	v = rd32(p);
	if (v != CDP_CKPT_RANK_VERSION)
		return v == 0 ? CDP_EFORMAT : CDP_EVERSION;
	if (cdp_ckpt_crc((uint32_t)crc32(0L, Z_NULL, 0), p, n - 4) != rd32(p + n - 4))
		return CDP_ECRC;
	j = rd32(p + 4);
	sync = rd32(p + 8);
	k = rd32(p + 12);
	u = rd64(p + 16);
	memcpy(&rho, &u, 8);
	what = rd32(p + 24);
	nm = rd32(p + 28);
	P = rd64(p + 32);
	B = rd64(p + 40);
	/* the sizes must be the net's: PARM's and BUFS's totals, OPTM's blocks */
	if (!fields_ok(ck, j, sync, k, rho, what) ||
	    nm != (uint64_t)((what & CDP_CKPT_RANK_OPTIM) ? moment_blocks(ck) : 0) ||
	    P != total_numel(ck->params, ck->nparams) || B != total_numel(ck->buffers, ck->nbuffers))
		return CDP_EFORMAT;
	/* shorter than its counts say: truncated, as for the file itself */
	stride = cdp_ckpt_rank_floats((unsigned)what, (size_t)P, (size_t)B, (int)nm);
	if (section_bytes((size_t)j, stride) != n)
		return section_bytes((size_t)j, stride) > n ? CDP_ETRUNC : CDP_EFORMAT;
	per = RANK_PER + stride * sizeof(float);
	held = keep < 0 ? (size_t)j * stride : (uint64_t)keep < j ? stride : 0;
	ck->rank_optim_step = calloc((size_t)j, sizeof(*ck->rank_optim_step));
	ck->rank_data = held ? malloc(held * sizeof(float)) : NULL;
	if (!ck->rank_optim_step || (held && !ck->rank_data))
		return CDP_ENOMEM;
	ck->nranks = (int)j;
	ck->rank_sync = (int)sync;
	ck->rank_k = (long)k;
	ck->rank_rho = rho;
	ck->rank_what = (unsigned)what;
	ck->rank_loaded = keep < 0 ? -1 : keep;
	p += RANK_HDR;
	for (uint64_t r = 0; r < j; r++, p += per) {
		int64_t steps = (int64_t)rd64(p + 8);
		if (rd32(p) != r || rd32(p + 4) != 0 || steps < 0 || steps > LONG_MAX)
			return CDP_EFORMAT;
		ck->rank_optim_step[r] = (long)steps;
		if (keep < 0)
			get_floats(ck->rank_data + r * stride, p + RANK_PER, stride);
		else if ((uint64_t)keep == r)
			get_floats(ck->rank_data, p + RANK_PER, stride);
		else if (!ck->rank_bad)
			bad_float(ck, (int)r, p + RANK_PER, stride);
	}
	return CDP_OK;
}
