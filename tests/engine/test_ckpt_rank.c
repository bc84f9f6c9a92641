/* test_ckpt_rank.c: the per-rank state of a checkpoint (version 3's RANK
 * chunk, checkpoint_rank.c).
 *
 * Three ranks of ADMM state (parameters, AdamW moments, dual, buffers, step
 * counts) survive encode and decode bit for bit and re-encode to the same
 * bytes; the blocks sit where checkpoint.h says; a reader resuming rank r
 * holds rank r's floats only, and none when the file has fewer ranks. Every
 * truncation is CDP_ETRUNC; inside a file whose own CRC was recomputed, a
 * damaged section is refused by its CRC (and the reader names the chunk),
 * and a section whose CRC was recomputed too is refused when its version,
 * rank count, sizes or rank indices are wrong, as truncated when its counts
 * want more bytes than it has. A section only comes in a version 3 or later file. A
 * writer refuses settings a reader would refuse, or a partial state; SGD
 * without momentum (no moment blocks) writes and reads back. A file loaded
 * whole (cdp_ckpt_load) decodes rank by rank as read_rank reads it.
 */
#include "ckpt/checkpoint.h"
#include "cdp_error.h"
#include "tap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define P 36        /* conv (4,1,3,3) ... */
#define B 8         /* bn mean and var of 4 */
#define J 3

static void tensor(cdp_ckpt_tensor *t, const char *name, int n, float base)
{
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ndim = 1;
	t->dims[0] = n;
	t->numel = (size_t)n;
	t->data = malloc((size_t)n * sizeof(float));
	for (int i = 0; i < n; i++)
		t->data[i] = base + (float)i;
}

/* A checkpoint of an ADMM run at J ranks, every per-rank float distinct. */
static void make_ck(cdp_ckpt *ck)
{
	memset(ck, 0, sizeof(*ck));
	cdp_ckpt_set_cfg(ck, "[net]\n[conv]\nfilters=4\n[bn]\n", NULL, 0);
	ck->in_c = 1;
	ck->in_h = ck->in_w = 4;
	ck->nparams = 2;
	ck->params = calloc(2, sizeof(cdp_ckpt_tensor));
	tensor(&ck->params[0], "conv0.w", 32, 0);
	tensor(&ck->params[1], "bn1.w", 4, 100);
	ck->nbuffers = 2;
	ck->buffers = calloc(2, sizeof(cdp_ckpt_tensor));
	tensor(&ck->buffers[0], "bn1.mean", 4, 200);
	tensor(&ck->buffers[1], "bn1.var", 4, 300);
	cdp_optim_defaults(&ck->optim);
	ck->optim.type = CDP_OPT_ADAMW;
	ck->optim_step = 17;
	ck->optim_n = P;
	ck->optim_m = calloc(P, sizeof(float));
	ck->optim_v = calloc(P, sizeof(float));
	ck->step = 17;
	ck->seed = 1;
	CHECK_RC(cdp_ckpt_set_ranks(ck, J, CDP_CKPT_SYNC_ADMM, 5, 0.01,
	                            CDP_CKPT_RANK_PARAMS | CDP_CKPT_RANK_OPTIM |
	                            CDP_CKPT_RANK_DUAL | CDP_CKPT_RANK_BUFFERS), CDP_OK);
	for (size_t i = 0; i < (size_t)J * (4 * P + B); i++)
		ck->rank_data[i] = (float)i * 0.5f - 7;
	for (int r = 0; r < J; r++)
		ck->rank_optim_step[r] = 17 - (r == 2);
}

static uint32_t u32at(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void fix_crc(unsigned char *b, size_t len)
{
	put32(b + len - 4, (uint32_t)crc32(0L, b, (uInt)(len - 4)));
}

/* The RANK payload's offset in buf (its length in *n), or 0. */
static size_t rank_chunk(const unsigned char *buf, size_t len, size_t *n)
{
	size_t pos = 24;

	while (pos + 16 <= len - 4) {
		uint64_t plen = u32at(buf + pos + 8) | (uint64_t)u32at(buf + pos + 12) << 32;
		if (memcmp(buf + pos, "RANK", 4) == 0) {
			*n = (size_t)plen;
			return pos + 16;
		}
		pos += 16 + (size_t)plen;
	}
	return 0;
}

/* Both CRCs after a change inside the section at s (n bytes). */
static void fix_both(unsigned char *c, size_t len, size_t s, size_t n)
{
	put32(c + s + n - 4, (uint32_t)crc32(0L, c + s, (uInt)(n - 4)));
	fix_crc(c, len);
}

static int ranks_equal(const cdp_ckpt *a, const cdp_ckpt *b)
{
	size_t stride = cdp_ckpt_rank_stride(a);

	return a->nranks == b->nranks && a->rank_sync == b->rank_sync && a->rank_k == b->rank_k &&
	       a->rank_rho == b->rank_rho && a->rank_what == b->rank_what &&
	       stride == cdp_ckpt_rank_stride(b) && a->rank_loaded == -1 && b->rank_loaded == -1 &&
	       memcmp(a->rank_optim_step, b->rank_optim_step, (size_t)a->nranks * sizeof(long)) == 0 &&
	       memcmp(a->rank_data, b->rank_data, (size_t)a->nranks * stride * sizeof(float)) == 0;
}

static void test_round_trip(unsigned char **out, size_t *outlen)
{
	cdp_ckpt a, b;
	unsigned char *buf, *buf2;
	size_t len, len2, stride;

	make_ck(&a);
	stride = cdp_ckpt_rank_stride(&a);
	CHECK(stride == 4 * P + B, "stride %zu: params, m, v, dual, buffers", stride);
	CHECK(cdp_ckpt_rank_block(&a, 1, CDP_CKPT_RANK_PARAMS) == a.rank_data + stride &&
	      cdp_ckpt_rank_block(&a, 1, CDP_CKPT_RANK_OPTIM) == a.rank_data + stride + P &&
	      cdp_ckpt_rank_block(&a, 1, CDP_CKPT_RANK_DUAL) == a.rank_data + stride + 3 * P &&
	      cdp_ckpt_rank_block(&a, 1, CDP_CKPT_RANK_BUFFERS) == a.rank_data + stride + 4 * P,
	      "block offsets");
	CHECK(cdp_ckpt_rank_block(&a, J, CDP_CKPT_RANK_PARAMS) == NULL &&
	      cdp_ckpt_rank_block(&a, 0, CDP_CKPT_RANK_PARAMS | CDP_CKPT_RANK_DUAL) == NULL,
	      "no block for a rank out of range or two flags");
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK(memcmp(buf, "CDPCKPT\n\10\0\0\0\10\0\0\0", 16) == 0, "version 8, 8 chunks");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ranks_equal(&a, &b), "per-rank state differs after decoding");
	CHECK_RC(cdp_ckpt_encode(&b, &buf2, &len2), CDP_OK);
	CHECK(len2 == len && memcmp(buf, buf2, len) == 0, "re-encoding changes bytes");
	free(buf2);
	cdp_ckpt_free(&b);
	/* without the section: 7 chunks, nothing per rank */
	free(a.rank_data);
	free(a.rank_optim_step);
	a.rank_data = NULL;
	a.rank_optim_step = NULL;
	a.nranks = 0;
	CHECK_RC(cdp_ckpt_encode(&a, &buf2, &len2), CDP_OK);
	CHECK(buf2[12] == 7, "no section, 7 chunks");
	CHECK_RC(cdp_ckpt_decode(buf2, len2, &b), CDP_OK);
	CHECK(b.nranks == 0 && b.rank_data == NULL, "no per-rank state read");
	cdp_ckpt_free(&b);
	free(buf2);
	cdp_ckpt_free(&a);
	*out = buf;
	*outlen = len;
}

/* Each rank resuming holds its own share only. */
static void test_read_rank(const unsigned char *buf, size_t len)
{
	char dir[] = "/tmp/cdp-ckrank-XXXXXX", path[64];
	cdp_ckpt all, one;
	size_t stride;
	FILE *f;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/c.cdpt", dir);
	f = fopen(path, "wb");
	CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write %s", path);
	CHECK_RC(cdp_ckpt_read(path, &all), CDP_OK);
	/* a damaged section names itself */
	{
		unsigned char *c = malloc(len);
		size_t n = 0, s = rank_chunk(buf, len, &n);
		char tag[5] = "x";
		memcpy(c, buf, len);
		c[s + 100] ^= 1;
		fix_crc(c, len);
		f = fopen(path, "wb");
		CHECK(f && fwrite(c, 1, len, f) == len && fclose(f) == 0, "write %s", path);
		CHECK_RC(cdp_ckpt_read_rank(path, 0, &one, tag), CDP_ECRC);
		CHECK(strcmp(tag, "RANK") == 0, "damaged chunk '%s'", tag);
		f = fopen(path, "wb");
		CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write %s", path);
		CHECK_RC(cdp_ckpt_read_rank(path, 0, &one, tag), CDP_OK);
		CHECK(tag[0] == '\0', "no chunk at fault: '%s'", tag);
		cdp_ckpt_free(&one);
		free(c);
	}
	stride = cdp_ckpt_rank_stride(&all);
	for (int r = 0; r < J; r++) {
		CHECK_RC(cdp_ckpt_read_rank(path, r, &one, (char[5]){ 0 }), CDP_OK);
		CHECK(one.rank_loaded == r && one.nranks == J && one.rank_optim_step[2] == 16,
		      "rank %d: loaded %d of %d", r, one.rank_loaded, one.nranks);
		CHECK(memcmp(cdp_ckpt_rank_block(&one, r, CDP_CKPT_RANK_PARAMS),
		             cdp_ckpt_rank_block(&all, r, CDP_CKPT_RANK_PARAMS),
		             stride * sizeof(float)) == 0, "rank %d's state", r);
		CHECK(cdp_ckpt_rank_block(&one, (r + 1) % J, CDP_CKPT_RANK_PARAMS) == NULL,
		      "rank %d holds another rank's state", r);
		CHECK_RC(cdp_ckpt_encode(&one, &(unsigned char *){ NULL }, &(size_t){ 0 }), CDP_EINVAL);
		cdp_ckpt_free(&one);
	}
	/* a rank the file does not have: valid, nothing held */
	CHECK_RC(cdp_ckpt_read_rank(path, J, &one, (char[5]){ 0 }), CDP_OK);
	CHECK(one.rank_data == NULL && cdp_ckpt_rank_block(&one, J, CDP_CKPT_RANK_PARAMS) == NULL,
	      "rank beyond the file's");
	cdp_ckpt_free(&one);
	cdp_ckpt_free(&all);
	unlink(path);
	rmdir(dir);
}

/* The file read by one process and decoded by each (cdp-train --resume:
 * rank 0 loads, every rank decodes its share): load gives the file's bytes
 * or, for a file whose header does not fit its size, an error and no
 * buffer; decode_rank keeps one rank's share and names a damaged chunk, as
 * read_rank does. */
static void test_load(const unsigned char *buf, size_t len)
{
	char dir[] = "/tmp/cdp-ckload-XXXXXX", path[64], tag[5];
	unsigned char *got = (unsigned char *)"x", *c;
	size_t n = 1, s, cn = 0;
	cdp_ckpt one;
	FILE *f;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/c.cdpt", dir);
	CHECK_RC(cdp_ckpt_load(path, &got, &n), ENOENT);
	CHECK(got == NULL && n == 0, "a missing file leaves a buffer");
	f = fopen(path, "wb");
	CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write %s", path);
	CHECK_RC(cdp_ckpt_load(path, &got, &n), CDP_OK);
	CHECK(got && n == len && memcmp(got, buf, len) == 0, "load: %zu bytes of %zu", n, len);
	for (int r = 0; r < J; r++) {
		CHECK_RC(cdp_ckpt_decode_rank(got, n, r, &one, tag), CDP_OK);
		CHECK(one.rank_loaded == r && cdp_ckpt_rank_block(&one, r, CDP_CKPT_RANK_PARAMS) &&
		      !cdp_ckpt_rank_block(&one, (r + 1) % J, CDP_CKPT_RANK_PARAMS),
		      "decode_rank %d: loaded %d", r, one.rank_loaded);
		cdp_ckpt_free(&one);
	}
	c = malloc(len);
	memcpy(c, got, len);
	s = rank_chunk(c, len, &cn);
	c[s + 100] ^= 1;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode_rank(c, len, 1, &one, tag), CDP_ECRC);
	CHECK(strcmp(tag, "RANK") == 0, "decode_rank: damaged chunk '%s'", tag);
	CHECK_RC(cdp_ckpt_decode_rank(got, len - 1, 1, &one, tag), CDP_ETRUNC);
	free(c);
	free(got);
	/* one byte short of, or past, the size in the header */
	CHECK(truncate(path, (off_t)len - 1) == 0, "truncate");
	CHECK_RC(cdp_ckpt_load(path, &got, &n), CDP_ETRUNC);
	CHECK(got == NULL && n == 0, "a truncated file leaves a buffer");
	f = fopen(path, "wb");
	CHECK(f && fwrite(buf, 1, len, f) == len && fputc(0, f) == 0 && fclose(f) == 0, "write");
	CHECK_RC(cdp_ckpt_load(path, &got, &n), CDP_EFORMAT);
	CHECK(got == NULL, "a file with extra bytes leaves a buffer");
	unlink(path);
	rmdir(dir);
}

static void test_damage(const unsigned char *buf, size_t len)
{
	unsigned char *c = malloc(len);
	size_t n = 0, s = rank_chunk(buf, len, &n);
	int wrong = 0;
	cdp_ckpt ck;

	CHECK(s > 0 && s + n == len - 4, "RANK is the last chunk");
	for (size_t k = 0; k < len; k++) {
		int rc = cdp_ckpt_decode(buf, k, &ck);
		if (rc != CDP_ETRUNC && !wrong++)
			CHECK(0, "truncated to %zu bytes: %d, want CDP_ETRUNC", k, rc);
		if (rc == CDP_OK)
			cdp_ckpt_free(&ck);
	}
	CHECK(wrong == 0, "%d truncations not reported as such", wrong);
	/* the file's CRC recomputed: the section's own refuses every change
	 * after its version */
	wrong = 0;
	for (size_t i = 4; i < n; i++) {
		int rc;
		memcpy(c, buf, len);
		c[s + i] ^= (unsigned char)(1u << (i % 8));
		fix_crc(c, len);
		rc = cdp_ckpt_decode(c, len, &ck);
		if (rc != CDP_ECRC && !wrong++)
			CHECK(0, "flip at section byte %zu: %d, want CDP_ECRC", i, rc);
		if (rc == CDP_OK)
			cdp_ckpt_free(&ck);
	}
	CHECK(wrong == 0, "%d section flips not caught by its CRC", wrong);
	/* both CRCs recomputed: the fields themselves */
	static const struct { size_t off; uint32_t v; int want; const char *what; } bad[] = {
		{ 0, 2, CDP_EVERSION, "section version 2" },
		{ 0, 0, CDP_EFORMAT, "section version 0" },
		{ 4, J + 1, CDP_ETRUNC, "one rank more than the bytes" },
		{ 4, J - 1, CDP_EFORMAT, "one rank less than the bytes" },
		{ 4, 0, CDP_EFORMAT, "no ranks" },
		{ 8, CDP_CKPT_SYNC_AVERAGE, CDP_EFORMAT, "a dual without admm" },
		{ 12, 0, CDP_EFORMAT, "K 0" },
		{ 24, 16, CDP_EFORMAT, "an unknown block" },
		{ 28, 1, CDP_EFORMAT, "moment blocks other than OPTM's" },
		{ 32, P + 1, CDP_EFORMAT, "P other than PARM's" },
		{ 40, B - 1, CDP_EFORMAT, "B other than BUFS's" },
		{ 48 + 16 + 4 * (4 * P + B), 2, CDP_EFORMAT, "rank 1 labelled 2" },
		{ 48 + 4, 1, CDP_EFORMAT, "rank 0's zero field" },
		{ 48 + 12, 0x80000000u, CDP_EFORMAT, "a negative step count" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(c, buf, len);
		put32(c + s + bad[k].off, bad[k].v);
		fix_both(c, len, s, n);
		CHECK_RC(cdp_ckpt_decode(c, len, &ck), bad[k].want);
		if (cdp_ckpt_decode(c, len, &ck) == CDP_OK) {
			CHECK(0, "%s accepted", bad[k].what);
			cdp_ckpt_free(&ck);
		}
	}
	/* a NaN in rank 1's state, both CRCs valid: refused by a reader of
	 * every rank, of rank 0 only and of none (cdp-predict), alike */
	for (int keep = -1; keep <= J; keep++) {
		char why[160] = "";
		memcpy(c, buf, len);
		put32(c + s + 48 + 16 + 4 * (4 * P + B) + 16 + 4 * 3, 0x7fc00000u);
		fix_both(c, len, s, n);
		CHECK_RC(cdp_ckpt_decode_why(c, len, keep, &ck, why, sizeof why), CDP_EFORMAT);
		CHECK(strcmp(why, "rank 1's state holds NaN at element 3") == 0,
		      "keep %d: why '%s'", keep, why);
	}
	/* RHO not a number */
	memcpy(c, buf, len);
	put32(c + s + 20, 0x7ff80000u);
	fix_both(c, len, s, n);
	CHECK_RC(cdp_ckpt_decode(c, len, &ck), CDP_EFORMAT);
	/* a section in a version 2 file */
	memcpy(c, buf, len);
	c[8] = 2;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &ck), CDP_EFORMAT);
	free(c);
}

static void test_invalid(void)
{
	const unsigned all = CDP_CKPT_RANK_PARAMS | CDP_CKPT_RANK_OPTIM | CDP_CKPT_RANK_BUFFERS;
	unsigned char *buf = NULL;
	size_t len;
	cdp_ckpt a;

	make_ck(&a);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 0, CDP_CKPT_SYNC_AVERAGE, 5, 0, all), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_AVERAGE, 0, 0, all), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_ADMM, 5, NAN, all), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_AVERAGE, 5, 0,
	                            all | CDP_CKPT_RANK_DUAL), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, 3, 5, 0, all), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_AVERAGE, 5, 0, 0), CDP_EINVAL);
	CHECK(a.nranks == J, "a refused set_ranks changes nothing");
	/* SGD without momentum keeps no moments to hold */
	a.optim.type = CDP_OPT_SGD;
	a.optim.momentum = 0;
	free(a.optim_m);
	free(a.optim_v);
	a.optim_m = a.optim_v = NULL;
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_AVERAGE, 5, 0, all), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_ranks(&a, 2, CDP_CKPT_SYNC_AVERAGE, 5, 0,
	                            CDP_CKPT_RANK_PARAMS | CDP_CKPT_RANK_BUFFERS), CDP_OK);
	CHECK(cdp_ckpt_rank_stride(&a) == P + B, "stride %zu", cdp_ckpt_rank_stride(&a));
	a.rank_optim_step[1] = -1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.rank_optim_step[1] = 0;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	/* OPTM without moment blocks stores no count: it reads back all the same */
	{
		cdp_ckpt b;
		unsigned char *buf2 = NULL;
		size_t len2 = 0;
		CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
		CHECK_RC(cdp_ckpt_encode(&b, &buf2, &len2), CDP_OK);
		CHECK(len2 == len && buf2 && memcmp(buf, buf2, len) == 0, "SGD without momentum");
		free(buf2);
		cdp_ckpt_free(&b);
	}
	free(buf);
	cdp_ckpt_free(&a);
}

/* RANK and SUMS together: 9 chunks in that order, read back; SUMS before
 * RANK, or twice, is refused. */
static void test_with_sums(void)
{
	cdp_ckpt a, b;
	unsigned char *buf, *c;
	size_t len, n, r, s;

	make_ck(&a);
	a.has_sums = 1;
	a.sum_epoch_loss = 2.5;
	a.sum_epoch_steps = 1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK(buf[12] == 9, "9 chunks: %d", buf[12]);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ranks_equal(&a, &b) && b.has_sums && b.sum_epoch_loss == 2.5 && b.sum_epoch_steps == 1,
	      "RANK and SUMS read back");
	cdp_ckpt_free(&b);
	r = rank_chunk(buf, len, &n) - 16;
	s = r + 16 + n;
	CHECK(memcmp(buf + s, "SUMS", 4) == 0 && s + 48 == len - 4, "SUMS after RANK");
	c = malloc(len + 48);
	memcpy(c, buf, r);
	memcpy(c + r, buf + s, 48);
	memcpy(c + r + 48, buf + r, s - r);
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	/* twice: a tenth chunk */
	memcpy(c, buf, len - 4);
	memcpy(c + len - 4, buf + s, 48);
	c[12] = 10;
	put32(c + 16, (uint32_t)(len + 48));
	fix_crc(c, len + 48);
	CHECK_RC(cdp_ckpt_decode(c, len + 48, &b), CDP_EFORMAT);
	free(c);
	free(buf);
	cdp_ckpt_free(&a);
}

int main(void)
{
	unsigned char *buf;
	size_t len;

	test_round_trip(&buf, &len);
	test_read_rank(buf, len);
	test_load(buf, len);
	test_damage(buf, len);
	test_invalid();
	test_with_sums();
	free(buf);
	return tap_done();
}
