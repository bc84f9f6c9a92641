/* test_checkpoint.c: the checkpoint format (checkpoint*.c) and the shipped
 * model cfgs.
 *
 * Round trips in memory and through files keep every field bit for bit and
 * re-encode to the same bytes; version 5 files (no class names), version 4
 * files (nor standardization origin nor georeference), version 3 files (nor global batch), version
 * 2 files (nor loss scaler) and version 1 files (nor data type) still
 * read, with what they lack unknown. Every truncation is CDP_ETRUNC and every single-bit flip is
 * refused (magic, version, size or CRC). Mutations with a
 * recomputed CRC, which reach the parser, never crash it (run under
 * --enable-asan to see reads too) and either fail or describe exactly the
 * bytes given. Writes replace files atomically and a refused write leaves the
 * old file. A NaN or infinite value anywhere (a weight under a valid CRC)
 * is refused by reader and writer, naming the tensor, and so is a class
 * name that is empty, too long, not UTF-8 or holds a control character,
 * naming the class. Tensors go into a net only when names and shapes
 * agree and it has a class for every name. Each
 * model in share/cdpool/models builds with the parameter count its comment
 * states, and survives a checkpoint round trip with identical outputs.
 */
#include "ckpt/checkpoint.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_out.h"
#include "cdp_rng.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static cdp_backend *be;
static char dir[64];

static void fill_tensor(cdp_ckpt_tensor *t, const char *name, int nd, const int *d, cdp_rng *r)
{
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ndim = nd;
	t->numel = 1;
	for (int i = 0; i < nd; i++)
		t->numel *= (size_t)(t->dims[i] = d[i]);
	t->data = malloc(t->numel * sizeof(float));
	for (size_t i = 0; i < t->numel; i++)
		t->data[i] = (float)cdp_rng_normal(r);
}

/* A checkpoint with every field set. */
static void make_ck(cdp_ckpt *ck)
{
	const char *ov[2] = { "width=8", "classes=3" };
	const int bands[3] = { 4, 3, 2 };
	const double mean[3] = { 100.5, 80.25, 60 }, sd[3] = { 20, 15.5, 12 };
	cdp_rng r, s2;

	memset(ck, 0, sizeof(*ck));
	cdp_rng_seed(&r, 1);
	cdp_ckpt_set_cfg(ck, "[net]\n[vars]\nwidth=16\n[conv]\nfilters=${width}\n", ov, 2);
	ck->in_c = 3;
	ck->in_h = 8;
	ck->in_w = 8;
	ck->nparams = 4;
	ck->params = calloc(4, sizeof(cdp_ckpt_tensor));
	fill_tensor(&ck->params[0], "c.w", 4, (int[]){ 4, 3, 3, 3 }, &r);
	fill_tensor(&ck->params[1], "c.b", 1, (int[]){ 4 }, &r);
	fill_tensor(&ck->params[2], "bn.w", 1, (int[]){ 4 }, &r);
	fill_tensor(&ck->params[3], "bn.b", 1, (int[]){ 4 }, &r);
	ck->nbuffers = 2;
	ck->buffers = calloc(2, sizeof(cdp_ckpt_tensor));
	fill_tensor(&ck->buffers[0], "bn.mean", 1, (int[]){ 4 }, &r);
	fill_tensor(&ck->buffers[1], "bn.var", 1, (int[]){ 4 }, &r);
	cdp_optim_defaults(&ck->optim);
	ck->optim.type = CDP_OPT_ADAMW;
	ck->optim.policy = CDP_LR_COSINE;
	ck->optim.total_steps = 1000;
	ck->optim.warmup = 10;
	ck->optim.clip_norm = 1.5f;
	ck->optim_step = 17;
	ck->optim_n = 120;
	ck->optim_m = malloc(120 * sizeof(float));
	ck->optim_v = malloc(120 * sizeof(float));
	for (int i = 0; i < 120; i++) {
		ck->optim_m[i] = (float)cdp_rng_normal(&r);
		ck->optim_v[i] = (float)cdp_rng_double(&r);
	}
	ck->step = 17;
	ck->epoch = 2;
	ck->data_pos = 12345;
	ck->seed = 0xfeedfacecafebeefULL;
	cdp_ckpt_set_rng(ck, "data", &r);
	cdp_rng_seed(&s2, 2);
	cdp_ckpt_set_rng(ck, "dropout", &s2);
	cdp_ckpt_set_data(ck, bands, 3, mean, sd);
	ck->dtype = CDP_DT_U16;
	ck->batch = 4;                       /* a global batch of 4 x 3 x 5 */
	ck->batch_ranks = 3;
	ck->batch_accumulate = 5;
	snprintf(ck->pool_uuid, sizeof(ck->pool_uuid), "0123456789abcdef0123456789abcdef");
	cdp_ckpt_set_origin(ck, CDP_CKPT_STD_SOURCES, (const uint32_t[]){ 0, 3, 7 }, 3,
	                    "PROJCS[\"WGS 84 / UTM zone 33N\"]", 0.5, 0.25);
	/* UTF-8 passes: a 2-byte and a 4-byte character */
	cdp_ckpt_set_class_names(ck, (const char *const[]){ "background", "for\xc3\xaat",
	                                                    "road \xf0\x9f\x9a\x97" }, 3);
}

static int tensors_equal(const cdp_ckpt_tensor *a, const cdp_ckpt_tensor *b, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(a[i].name, b[i].name) || a[i].ndim != b[i].ndim || a[i].numel != b[i].numel ||
		    memcmp(a[i].dims, b[i].dims, sizeof(a[i].dims)) ||
		    memcmp(a[i].data, b[i].data, a[i].numel * sizeof(float)))
			return 0;
	return 1;
}

/* memcmp that takes two NULLs as equal and one as different */
static int same(const void *a, const void *b, size_t n)
{
	if (!a || !b)
		return a == b;
	return memcmp(a, b, n) == 0;
}

static int optim_equal(const cdp_optim_cfg *a, const cdp_optim_cfg *b)
{
	return a->type == b->type && a->lr == b->lr && a->momentum == b->momentum &&
	       a->nesterov == b->nesterov && a->weight_decay == b->weight_decay &&
	       a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->eps == b->eps &&
	       a->policy == b->policy && a->step_size == b->step_size && a->gamma == b->gamma &&
	       a->total_steps == b->total_steps && a->min_lr == b->min_lr &&
	       a->warmup == b->warmup && a->warmup_factor == b->warmup_factor &&
	       a->clip_norm == b->clip_norm && a->accumulate == b->accumulate;
}

static int names_equal(const cdp_ckpt *a, const cdp_ckpt *b)
{
	if (a->nclass_names != b->nclass_names || !a->class_names != !b->class_names)
		return 0;
	for (int i = 0; i < a->nclass_names; i++)
		if (strcmp(a->class_names[i], b->class_names[i]) != 0)
			return 0;
	return 1;
}

static int ck_equal(const cdp_ckpt *a, const cdp_ckpt *b)
{
	if (strcmp(a->cfg_text, b->cfg_text) || a->noverrides != b->noverrides ||
	    a->nrng != b->nrng)
		return 0;
	for (int i = 0; i < a->noverrides; i++)
		if (strcmp(a->overrides[i], b->overrides[i]))
			return 0;
	for (int i = 0; i < a->nrng; i++)
		if (strcmp(a->rng[i].name, b->rng[i].name) ||
		    memcmp(a->rng[i].s, b->rng[i].s, sizeof(a->rng[i].s)))
			return 0;
	return a->in_c == b->in_c && a->in_h == b->in_h && a->in_w == b->in_w &&
	       a->nparams == b->nparams && tensors_equal(a->params, b->params, a->nparams) &&
	       a->nbuffers == b->nbuffers && tensors_equal(a->buffers, b->buffers, a->nbuffers) &&
	       optim_equal(&a->optim, &b->optim) && a->optim_step == b->optim_step &&
	       a->optim_n == b->optim_n &&
	       same(a->optim_m, b->optim_m, a->optim_n * sizeof(float)) &&
	       same(a->optim_v, b->optim_v, a->optim_n * sizeof(float)) &&
	       a->step == b->step && a->epoch == b->epoch && a->data_pos == b->data_pos &&
	       a->seed == b->seed &&
	       a->nbands == b->nbands && same(a->bands, b->bands, (size_t)a->nbands * sizeof(int)) &&
	       same(a->mean, b->mean, (size_t)a->nbands * sizeof(double)) &&
	       same(a->std, b->std, (size_t)a->nbands * sizeof(double)) &&
	       a->dtype == b->dtype && strcmp(a->pool_uuid, b->pool_uuid) == 0 &&
	       a->batch == b->batch && a->batch_ranks == b->batch_ranks &&
	       a->batch_accumulate == b->batch_accumulate && a->std_from == b->std_from &&
	       a->nstd_sources == b->nstd_sources &&
	       same(a->std_sources, b->std_sources, (size_t)a->nstd_sources * sizeof(uint32_t)) &&
	       strcmp(a->crs ? a->crs : "", b->crs ? b->crs : "") == 0 && a->res_x == b->res_x &&
	       a->res_y == b->res_y && names_equal(a, b) && a->has_sums == b->has_sums &&
	       same(&a->sum_epoch_loss, &b->sum_epoch_loss, sizeof(double)) &&
	       same(&a->sum_log_loss, &b->sum_log_loss, sizeof(double)) &&
	       a->sum_epoch_steps == b->sum_epoch_steps && a->sum_log_steps == b->sum_log_steps &&
	       a->has_plan == b->has_plan && a->plan_total == b->plan_total &&
	       strcmp(a->keys_uuid, b->keys_uuid) == 0 && a->keys_seed == b->keys_seed &&
	       a->keys_count == b->keys_count && a->keys_crc == b->keys_crc &&
	       a->has_best == b->has_best && a->best_metric == b->best_metric &&
	       same(&a->best_value, &b->best_value, sizeof(double)) && a->best_step == b->best_step &&
	       a->has_run == b->has_run && a->run_pad_last == b->run_pad_last &&
	       a->run_nan_policy == b->run_nan_policy && a->run_threads == b->run_threads &&
	       a->run_nan_row == b->run_nan_row && a->run_nan_skipped == b->run_nan_skipped &&
	       strcmp(a->run_kernels, b->run_kernels) == 0 &&
	       strcmp(a->val_uuid, b->val_uuid) == 0 && a->val_seed == b->val_seed &&
	       a->val_count == b->val_count && a->val_crc == b->val_crc;
}

static uint32_t rd_u32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void fix_crc(unsigned char *b, size_t len)
{
	uint32_t c = (uint32_t)crc32(0L, b, (uInt)(len - 4));

	for (int i = 0; i < 4; i++)
		b[len - 4 + i] = (unsigned char)(c >> (8 * i));
}

static void test_round_trip(unsigned char **out, size_t *outlen)
{
	cdp_ckpt a, b;
	unsigned char *buf, *buf2;
	size_t len, len2;

	make_ck(&a);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK(memcmp(buf, "CDPCKPT\n\10\0\0\0\7\0\0\0", 16) == 0, "header bytes");
	CHECK(buf[16] == (len & 0xff) && buf[17] == ((len >> 8) & 0xff), "size field little-endian");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ck_equal(&a, &b), "decoded checkpoint differs");
	CHECK(b.dtype == CDP_DT_U16, "data type u16 kept: %d", b.dtype);
	CHECK(b.nclass_names == 3 && strcmp(b.class_names[1], "for\xc3\xaat") == 0,
	      "class names kept");
	CHECK_RC(cdp_ckpt_encode(&b, &buf2, &len2), CDP_OK);
	CHECK(len2 == len && memcmp(buf, buf2, len) == 0, "re-encoding changes bytes");
	free(buf2);
	{
		cdp_rng r, want;
		CHECK_RC(cdp_ckpt_get_rng(&b, "dropout", &r), 0);
		cdp_rng_seed(&want, 2);
		CHECK(cdp_rng_next(&r) == cdp_rng_next(&want), "restored rng continues its stream");
		CHECK_RC(cdp_ckpt_get_rng(&b, "nope", &r), -1);
	}
	cdp_ckpt_free(&b);
	CHECK(b.params == NULL && b.cfg_text == NULL, "free clears");
	/* an inference export: no optimizer, no statistics, no pool */
	cdp_ckpt_free(&b);
	free(a.optim_m);
	free(a.optim_v);
	a.optim_m = a.optim_v = NULL;
	memset(&a.optim, 0, sizeof(a.optim));
	a.optim_step = 0;
	a.optim_n = 0;
	free(a.mean);
	free(a.std);
	a.mean = a.std = NULL;
	a.pool_uuid[0] = '\0';
	a.dtype = 0;
	/* without statistics no origin of them, the georeference kept */
	CHECK_RC(cdp_ckpt_encode(&a, &buf2, &len2), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_origin(&a, CDP_CKPT_STD_UNKNOWN, NULL, 0, a.crs, a.res_x, a.res_y),
	         CDP_OK);
	CHECK_RC(cdp_ckpt_encode(&a, &buf2, &len2), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(buf2, len2, &b), CDP_OK);
	CHECK(ck_equal(&a, &b) && b.optim.type == 0 && b.mean == NULL && b.dtype == 0,
	      "minimal checkpoint");
	cdp_ckpt_free(&b);
	free(buf2);
	cdp_ckpt_free(&a);
	*out = buf;
	*outlen = len;
}

static void test_damage(const unsigned char *buf, size_t len)
{
	unsigned char *c = malloc(len + 1);
	cdp_ckpt ck;
	int wrong = 0, drift = 0, fuzz_ok = 0, fuzz_bad = 0;

	/* every truncation */
	for (size_t n = 0; n < len; n++) {
		int rc = cdp_ckpt_decode(buf, n, &ck);
		if (rc != CDP_ETRUNC) {
			if (!wrong++)
				CHECK(0, "truncated to %zu bytes: %d, want CDP_ETRUNC", n, rc);
			if (rc == CDP_OK)
				cdp_ckpt_free(&ck);
		}
	}
	CHECK(wrong == 0, "%d truncations not reported as such", wrong);
	/* one extra byte */
	memcpy(c, buf, len);
	c[len] = 0;
	CHECK_RC(cdp_ckpt_decode(c, len + 1, &ck), CDP_EFORMAT);
	/* every byte, one bit each */
	wrong = 0;
	for (size_t i = 0; i < len; i++) {
		int rc, want;
		memcpy(c, buf, len);
		c[i] ^= (unsigned char)(1u << (i % 8));
		rc = cdp_ckpt_decode(c, len, &ck);
		want = i < 8 ? CDP_EMAGIC : i < 12 ? CDP_EVERSION : CDP_ECRC;
		/* 3 -> 2 or 1: versions still read, so the CRC catches it */
		if (i >= 8 && i < 12 && rd_u32(c + 8) >= CDP_CKPT_VERSION_MIN &&
		    rd_u32(c + 8) <= CDP_CKPT_VERSION)
			want = CDP_ECRC;
		/* the size field: larger reads as truncated, smaller as extra bytes */
		if (i >= 16 && i < 24)
			want = c[i] > buf[i] ? CDP_ETRUNC : CDP_EFORMAT;
		if (rc != want) {
			if (!wrong++)
				CHECK(0, "flip at %zu: %d, want %d", i, rc, want);
			if (rc == CDP_OK)
				cdp_ckpt_free(&ck);
		}
	}
	CHECK(wrong == 0, "%d bit flips not refused as expected", wrong);
	/* past the CRC: the parser itself must refuse or decode exactly */
	for (size_t i = 24; i < len - 4; i++)
		for (int m = 0; m < 3; m++) {
			static const unsigned char x[3] = { 0x01, 0x80, 0xff };
			unsigned char *re;
			size_t relen;
			memcpy(c, buf, len);
			c[i] ^= x[m];
			fix_crc(c, len);
			if (cdp_ckpt_decode(c, len, &ck) != CDP_OK) {
				fuzz_bad++;
				continue;
			}
			fuzz_ok++;
			if (cdp_ckpt_encode(&ck, &re, &relen) != CDP_OK || relen != len ||
			    memcmp(re, c, len) != 0)
				drift++;
			free(re);
			cdp_ckpt_free(&ck);
		}
	CHECK(drift == 0, "%d accepted mutations do not re-encode to themselves", drift);
	CHECK(fuzz_bad > 0 && fuzz_ok > 0, "mutations: %d refused, %d accepted", fuzz_bad, fuzz_ok);
	/* a future version, CRC fixed */
	memcpy(c, buf, len);
	c[8] = CDP_CKPT_VERSION + 1;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &ck), CDP_EVERSION);
	free(c);
}

static size_t files_in(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	size_t n = 0;

	while (dp && (e = readdir(dp)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (dp)
		closedir(dp);
	return n;
}

static void test_files(const unsigned char *buf, size_t len)
{
	char path[128], other[128];
	cdp_ckpt a, b;
	FILE *f;

	snprintf(path, sizeof(path), "%s/model.ckpt", dir);
	make_ck(&a);
	CHECK_RC(cdp_ckpt_write(path, &a), CDP_OK);
	CHECK(files_in(dir) == 1, "temporary file left: %zu entries", files_in(dir));
	CHECK_RC(cdp_ckpt_read(path, &b), CDP_OK);
	CHECK(ck_equal(&a, &b), "file round trip");
	cdp_ckpt_free(&b);
	/* the file is what encode produces */
	{
		FILE *g = fopen(path, "rb");
		unsigned char *fb = malloc(len + 8);
		size_t got = g ? fread(fb, 1, len + 8, g) : 0;
		CHECK(got == len && memcmp(fb, buf, len) == 0, "file bytes differ from encode");
		if (g)
			fclose(g);
		free(fb);
	}
	/* the output policy keeps a checkpoint from other writers by the
	 * format's magic, and lets this writer replace one (CDP_OUT_CKPT) */
	CHECK(sizeof CDP_OUT_CKPT_MAGIC == sizeof CDP_CKPT_MAGIC &&
	      memcmp(CDP_OUT_CKPT_MAGIC, CDP_CKPT_MAGIC, sizeof CDP_CKPT_MAGIC) == 0,
	      "cdp_out.h's magic is not the format's");
	CHECK(cdp_out_is_ckpt(path), "the policy does not see a checkpoint");
	{
		cdp_out o;
		CHECK_RC(cdp_out_open(&o, path, CDP_OUT_SEEK, 0666, NULL, 0), CDP_EKEEP);
	}
	/* replace, then a refused write leaves the last good file */
	a.step = 99;
	CHECK_RC(cdp_ckpt_write(path, &a), CDP_OK);
	a.nbands = 2;          /* != in_c: invalid */
	CHECK_RC(cdp_ckpt_write(path, &a), CDP_EINVAL);
	a.nbands = 3;
	CHECK_RC(cdp_ckpt_read(path, &b), CDP_OK);
	CHECK(b.step == 99 && files_in(dir) == 1, "after a refused write");
	cdp_ckpt_free(&b);
	/* truncated on disk, not a checkpoint, missing, a directory */
	CHECK(truncate(path, (off_t)len / 2) == 0, "truncate");
	CHECK_RC(cdp_ckpt_read(path, &b), CDP_ETRUNC);
	CHECK(b.cfg_text == NULL && b.params == NULL, "nothing returned on error");
	snprintf(other, sizeof(other), "%s/text", dir);
	f = fopen(other, "w");
	fputs("[net]\n[vars]\nwidth=16\n", f);
	fclose(f);
	CHECK_RC(cdp_ckpt_read(other, &b), CDP_EMAGIC);
	unlink(other);
	snprintf(other, sizeof(other), "%s/missing", dir);
	CHECK_RC(cdp_ckpt_read(other, &b), ENOENT);
	CHECK_RC(cdp_ckpt_read(dir, &b), EISDIR);
	snprintf(other, sizeof(other), "%s/nodir/x.ckpt", dir);
	CHECK_RC(cdp_ckpt_write(other, &a), ENOENT);
	unlink(path);
	cdp_ckpt_free(&a);
}

static uint64_t rd_u64(const unsigned char *b)
{
	return rd_u32(b) | (uint64_t)rd_u32(b + 4) << 32;
}

static void wr_u64(unsigned char *b, uint64_t v)
{
	for (int j = 0; j < 8; j++)
		b[j] = (unsigned char)(v >> (8 * j));
}

/* META's length in each version: 80, version 3 added 24 bytes of loss
 * scaler, version 4 16 of global batch (versions 5 to 8 none) */
static const size_t meta_len[9] = { 0, 80, 80, 104, 120, 120, 120, 120, 120 };

/* The offset of chunk `tag` of a file of 7 chunks, or 0. */
static size_t chunk_at(const unsigned char *b, size_t len, const char *tag)
{
	size_t pos = 24;

	for (int i = 0; i < 7 && pos + 16 <= len; i++) {
		if (memcmp(b + pos, tag, 4) == 0)
			return pos;
		pos += 16 + (size_t)rd_u64(b + pos + 8);
	}
	return 0;
}

/* The bytes of version 5's part of the DATA tail (origin, sources, CRS,
 * pixel size) in buf, and into *v6 those of version 6's after it (the
 * class names), or 0 when buf is not laid out so (DATA last, before the
 * CRC). */
static size_t v5_tail(const unsigned char *b, size_t len, size_t *v6)
{
	size_t d = chunk_at(b, len, "DATA"), n, ns, e, nsrc, t5;

	if (!d || d + 16 + rd_u64(b + d + 8) != len - 4)
		return 0;
	n = rd_u32(b + d + 16);
	ns = rd_u32(b + d + 20);
	e = d + 16 + 8 + 4 * n + 16 * ns + 4;
	nsrc = rd_u32(b + e + 4);
	t5 = 8 + 4 * nsrc + 4 + rd_u32(b + e + 8 + 4 * nsrc) + 16;
	*v6 = len - 4 - (e + t5);
	return t5;
}

/* buf (version 6, no per-rank state) as an older version wrote it: the
 * class names of version 6 cut, below version 5 also the DATA tail of
 * version 5, META cut to that version's length, and for
 * version 1 also the DATA chunk, last before the CRC, without its trailing
 * u32 data type. Returns the new length, 0 when buf is not laid out so. */
static size_t to_old(unsigned char *c, const unsigned char *buf, size_t len, int version)
{
	size_t pos, m = meta_len[version], cut = meta_len[CDP_CKPT_VERSION] - m, n, tail, t6, d;
	uint64_t plen = rd_u64(buf + 32);

	if (memcmp(buf + 24, "META", 4) != 0 || plen != meta_len[CDP_CKPT_VERSION] || buf[12] != 7 ||
	    !(tail = v5_tail(buf, len, &t6)))
		return 0;
	memcpy(c, buf, len);
	n = len;
	tail = (version < 6 ? t6 : 0) + (version < 5 ? tail : 0);
	if (tail) {
		d = chunk_at(c, n, "DATA");
		memmove(c + n - 4 - tail, c + n - 4, 4);
		n -= tail;
		wr_u64(c + d + 8, rd_u64(c + d + 8) - tail);
	}
	memmove(c + 24 + 16 + m, c + 24 + 16 + m + cut, n - (24 + 16 + m + cut));
	n -= cut;
	wr_u64(c + 32, m);
	if (version == 1) {
		pos = chunk_at(c, n, "DATA");
		plen = rd_u64(c + pos + 8);
		if (!pos || pos + 16 + plen != n - 4)
			return 0;
		wr_u64(c + pos + 8, plen - 4);
		n -= 4;
	}
	wr_u64(c + 16, n);
	c[8] = (unsigned char)version;
	fix_crc(c, n);
	return n;
}

/* ck without version 5's DATA tail (nor 6's names), as an older file reads */
static void no_origin(cdp_ckpt *ck)
{
	cdp_ckpt_set_origin(ck, CDP_CKPT_STD_UNKNOWN, NULL, 0, NULL, 0, 0);
	cdp_ckpt_set_class_names(ck, NULL, 0);
}

static void test_version1(const unsigned char *buf, size_t len)
{
	unsigned char *c = malloc(len);
	cdp_ckpt a, b;
	size_t t6, n = to_old(c, buf, len, 1), tail = v5_tail(buf, len, &t6);
	int wrong = 0;

	CHECK(tail == 8 + 12 + 4 + 31 + 16, "version 5's DATA tail: %zu bytes", tail);
	CHECK(t6 == 4 + 14 + 10 + 13, "version 6's class names: %zu bytes", t6);
	tail += t6;
	CHECK(n == len - 44 - tail, "a version 1 file made from the version 6 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &a), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_OK);
	CHECK(b.dtype == 0, "version 1: data type unknown, got %d", b.dtype);
	CHECK(b.batch == 0 && b.batch_ranks == 0 && b.batch_accumulate == 0 &&
	      cdp_ckpt_global_batch(&b) == 0, "version 1: global batch unknown");
	CHECK(b.std_from == CDP_CKPT_STD_UNKNOWN && !b.crs && b.res_x == 0,
	      "version 1: the standardization's origin and georeference unknown");
	a.dtype = 0;
	a.batch = a.batch_ranks = a.batch_accumulate = 0;
	no_origin(&a);
	CHECK(ck_equal(&a, &b), "version 1: every other field as in version 6");
	cdp_ckpt_free(&a);
	cdp_ckpt_free(&b);
	for (size_t k = 0; k < n; k++) {
		int rc = cdp_ckpt_decode(c, k, &b);
		if (rc != CDP_ETRUNC) {
			if (!wrong++)
				CHECK(0, "version 1 truncated to %zu bytes: %d, want CDP_ETRUNC", k, rc);
			if (rc == CDP_OK)
				cdp_ckpt_free(&b);
		}
	}
	CHECK(wrong == 0, "%d version 1 truncations not reported as such", wrong);
	/* version 5 keeps everything but the names */
	n = to_old(c, buf, len, 5);
	CHECK(n == len - t6, "a version 5 file made from the version 6 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &a), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_OK);
	CHECK(a.nclass_names == 3 && b.nclass_names == 0 && !b.class_names,
	      "version 6 records the class names, 5 does not");
	cdp_ckpt_set_class_names(&a, NULL, 0);
	CHECK(ck_equal(&a, &b), "version 5: every other field as in version 6");
	cdp_ckpt_free(&a);
	cdp_ckpt_free(&b);
	/* version 2 keeps the data type */
	n = to_old(c, buf, len, 4);
	CHECK(n == len - tail, "a version 4 file made from the version 6 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &a), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_OK);
	CHECK(a.std_from == CDP_CKPT_STD_SOURCES && a.nstd_sources == 3 && a.std_sources[2] == 7 &&
	      a.res_y == 0.25 && strstr(a.crs, "UTM zone 33N") && b.std_from == 0 &&
	      b.nstd_sources == 0 && !b.crs && b.res_x == 0 && b.res_y == 0,
	      "version 5 records the standardization's origin and the georeference, 4 does not");
	no_origin(&a);
	CHECK(ck_equal(&a, &b), "version 4: every other field as in version 6");
	cdp_ckpt_free(&a);
	cdp_ckpt_free(&b);
	n = to_old(c, buf, len, 3);
	CHECK(n == len - 16 - tail, "a version 3 file made from the version 6 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &a), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_OK);
	CHECK(cdp_ckpt_global_batch(&a) == 60 && cdp_ckpt_global_batch(&b) == 0,
	      "version 4 records the global batch, 3 does not");
	a.batch = a.batch_ranks = a.batch_accumulate = 0;
	no_origin(&a);
	CHECK(ck_equal(&a, &b), "version 3: every other field as in version 6");
	cdp_ckpt_free(&a);
	cdp_ckpt_free(&b);
	n = to_old(c, buf, len, 2);
	CHECK(n == len - 40 - tail, "a version 2 file made from the version 6 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &a), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_OK);
	a.batch = a.batch_ranks = a.batch_accumulate = 0;
	no_origin(&a);
	CHECK(ck_equal(&a, &b) && b.dtype == a.dtype, "version 2: every field as in version 6");
	cdp_ckpt_free(&a);
	cdp_ckpt_free(&b);
	/* an unknown data type */
	c[n - 8] = 8;
	fix_crc(c, n);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_EFORMAT);
	/* version 2 bytes labelled 1: the data type is an extra 4 bytes; and
	 * version 4 bytes labelled 2: META's loss scaler and batch are 40
	 * extra bytes, labelled 3: the batch 16 */
	c[n - 8] = (unsigned char)CDP_DT_U16;
	c[8] = 1;
	fix_crc(c, n);
	CHECK_RC(cdp_ckpt_decode(c, n, &b), CDP_EFORMAT);
	memcpy(c, buf, len);
	c[8] = 2;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	c[8] = 3;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	c[8] = 4;                            /* version 5's DATA tail is extra bytes */
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	c[8] = 5;                            /* and version 6's names */
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	/* version 0 */
	c[8] = 0;
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EVERSION);
	free(c);
}

static void test_invalid(void)
{
	cdp_ckpt a;
	unsigned char *buf;
	size_t len;

	make_ck(&a);
	strcpy(a.pool_uuid, "0123456789ABCDEF0123456789abcdef");
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	strcpy(a.pool_uuid, "");
	a.params[1].numel = 5;               /* dims say 4 */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.params[1].numel = 4;
	strcpy(a.params[1].name, "c b");
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	strcpy(a.params[1].name, "c.b");
	a.optim_n = 100;                     /* not the parameter count */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.optim_n = 120;
	a.std[1] = 0;                        /* a constant band: centred, not scaled */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	free(buf);
	a.std[1] = -1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	{
		char why[200];
		CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
		CHECK(strcmp(why, "band 3's standardization is mean 80.25, standard deviation -1 "
		                  "(finite, and a deviation not negative, expected)") == 0, "%s", why);
	}
	a.std[1] = NAN;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.std[1] = 1;
	a.dtype = CDP_DT_F64 + 1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.dtype = -1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.dtype = CDP_DT_F32;
	a.batch_ranks = 0;                   /* the batch: all three or none */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.batch_ranks = 3;
	a.batch_accumulate = -1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.batch_accumulate = 5;
	a.std_sources[1] = 0;                /* the sources ascending, distinct */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.std_sources[1] = 3;
	a.std_from = CDP_CKPT_STD_POOL;      /* the pool's statistics name no sources */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.std_from = CDP_CKPT_STD_SOURCES + 1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.std_from = CDP_CKPT_STD_SOURCES;
	a.res_x = -0.5;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.res_x = NAN;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.res_x = 0.5;
	CHECK_RC(cdp_ckpt_set_rng(&a, "data", &(cdp_rng){ { 0, 0, 0, 0 } }), CDP_OK);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	CHECK(a.nrng == 2, "set_rng replaces by name");
	CHECK_RC(cdp_ckpt_set_rng(&a, "has space", &(cdp_rng){ { 1, 2, 3, 4 } }), CDP_EINVAL);
	cdp_ckpt_free(&a);
}

/* Class names (version 6): what the setter, the writer and the reader
 * refuse, each naming the class and what is wrong. */
static void test_class_names(void)
{
	static const struct { const char *name, *why; } bad[] = {
		{ "", "is empty" },
		{ "wet\nland", "has a control character at byte 4" },
		{ "a\tb", "has a control character at byte 2" },
		{ "del\x7f", "has a control character at byte 4" },
		{ "c1 \xc2\x85", "has a control character at byte 4" },
		{ "for\xeat", "is not UTF-8 at byte 4" },         /* Latin-1, not UTF-8 */
		{ "\xc0\xaf", "is not UTF-8 at byte 1" },          /* overlong '/' */
		{ "\xed\xa0\x80", "is not UTF-8 at byte 1" },      /* a surrogate */
		{ "x\xf4\x90\x80\x80", "is not UTF-8 at byte 2" }, /* past U+10FFFF */
		{ "cut \xe2\x82", "is not UTF-8 at byte 5" },       /* a truncated sequence */
	};
	char longname[CDP_CKPT_CLASS_NAME_MAX + 2], why[200], want[200];
	unsigned char *buf;
	size_t len, off = 0;
	cdp_ckpt a, b;

	make_ck(&a);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *keep = a.class_names[2];
		CHECK(!cdp_ckpt_class_name_ok(bad[i].name, why, sizeof why) &&
		      strcmp(why, bad[i].why) == 0, "name %zu: %s", i, why);
		CHECK_RC(cdp_ckpt_set_class_names(&a, (const char *const[]){ "a", bad[i].name }, 2),
		         CDP_EINVAL);
		CHECK(a.nclass_names == 3 && a.class_names[2] == keep, "a refused set keeps the names");
		a.class_names[2] = (char *)bad[i].name;
		CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
		CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
		snprintf(want, sizeof want, "class 2's name %s", bad[i].why);
		CHECK(strcmp(why, want) == 0, "%s", why);
		a.class_names[2] = keep;
	}
	memset(longname, 'n', sizeof longname - 1);
	longname[CDP_CKPT_CLASS_NAME_MAX] = '\0';
	CHECK(cdp_ckpt_class_name_ok(longname, why, sizeof why), "%d bytes refused: %s",
	      CDP_CKPT_CLASS_NAME_MAX, why);
	longname[CDP_CKPT_CLASS_NAME_MAX] = 'n';
	longname[CDP_CKPT_CLASS_NAME_MAX + 1] = '\0';
	CHECK(!cdp_ckpt_class_name_ok(longname, why, sizeof why) &&
	      strcmp(why, "is longer than 255 bytes") == 0, "%s", why);
	CHECK_RC(cdp_ckpt_set_class_names(&a, NULL, 1), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_class_names(&a, (const char *const[]){ "x" }, -1), CDP_EINVAL);
	/* the reader: a line feed put into "road" under a valid CRC */
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	for (size_t i = 24; i + 4 <= len; i++)
		if (memcmp(buf + i, "road", 4) == 0)
			off = i;
	CHECK(off > 0, "'road' not found in the encoding");
	buf[off + 2] = '\n';
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	CHECK_RC(cdp_ckpt_decode_why(buf, len, -1, &b, why, sizeof why), CDP_EFORMAT);
	CHECK(strcmp(why, "class 2's name has a control character at byte 3") == 0, "%s", why);
	CHECK(b.class_names == NULL && b.params == NULL, "nothing returned for a bad name");
	free(buf);
	/* no names: none stored, none read */
	CHECK_RC(cdp_ckpt_set_class_names(&a, NULL, 0), CDP_OK);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(b.nclass_names == 0 && b.class_names == NULL && ck_equal(&a, &b), "no names");
	cdp_ckpt_free(&b);
	free(buf);
	cdp_ckpt_free(&a);
}

/* Non-finite numbers (issue 14): a NaN weight under a valid CRC, an
 * infinite optimizer moment, are refused by the reader, which names the
 * tensor, and never written. */
static void test_nonfinite(void)
{
	cdp_ckpt a, b;
	unsigned char *buf, *c;
	size_t len, off = 0;
	char why[200], path[128];
	float want, nan = NAN;
	FILE *f;

	make_ck(&a);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	/* c.b's third value, found by its bytes (the values are random) */
	want = a.params[1].data[2];
	for (size_t i = 24; i + 4 <= len; i++)
		if (memcmp(buf + i, &want, 4) == 0) {
			CHECK(off == 0, "c.b[2]'s bytes occur twice");
			off = i;
		}
	CHECK(off > 0, "c.b[2] not found in the encoding");
	c = malloc(len);
	memcpy(c, buf, len);
	free(buf);
	memcpy(c + off, &nan, 4);
	fix_crc(c, len);
	CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	CHECK(b.params == NULL, "nothing returned for a NaN weight");
	CHECK_RC(cdp_ckpt_decode_why(c, len, -1, &b, why, sizeof why), CDP_EFORMAT);
	CHECK(strcmp(why, "parameter tensor 'c.b' holds NaN at element 2") == 0, "%s", why);
	snprintf(path, sizeof path, "%s/nan.cdpt", dir);
	f = fopen(path, "wb");
	CHECK(f && fwrite(c, 1, len, f) == len && fclose(f) == 0, "write %s", path);
	CHECK_RC(cdp_ckpt_read_why(path, -1, &b, why, sizeof why), CDP_EFORMAT);
	CHECK(strcmp(why, "parameter tensor 'c.b' holds NaN at element 2") == 0, "%s", why);
	unlink(path);
	/* the reasons of other refusals: a damaged CRC, a missing file */
	c[len - 1] ^= 1;
	CHECK_RC(cdp_ckpt_decode_why(c, len, -1, &b, why, sizeof why), CDP_ECRC);
	CHECK(strcmp(why, cdp_strerror(CDP_ECRC)) == 0, "%s", why);
	CHECK_RC(cdp_ckpt_read_why(path, -1, &b, why, sizeof why), ENOENT);
	CHECK(strcmp(why, strerror(ENOENT)) == 0, "%s", why);
	/* the writer refuses them, each named */
	a.params[1].data[2] = INFINITY;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
	CHECK(strcmp(why, "parameter tensor 'c.b' holds +Inf at element 2") == 0, "%s", why);
	a.params[1].data[2] = want;
	a.buffers[1].data[0] = -INFINITY;
	CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
	CHECK(strcmp(why, "buffer tensor 'bn.var' holds -Inf at element 0") == 0, "%s", why);
	a.buffers[1].data[0] = 1;
	a.optim_v[119] = NAN;
	CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
	CHECK(strcmp(why, "the optimizer's second moment holds NaN at element 119") == 0, "%s", why);
	snprintf(path, sizeof path, "%s/inf.cdpt", dir);
	CHECK_RC(cdp_ckpt_write(path, &a), CDP_EINVAL);
	CHECK(access(path, F_OK) != 0 && files_in(dir) == 0, "a refused write left a file");
	a.optim_v[119] = 1;
	CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), 0);
	CHECK(why[0] == '\0', "a valid checkpoint has no reason: %s", why);
	free(c);
	free(buf);
	cdp_ckpt_free(&a);
}

/* ---- nets and optimizers -------------------------------------------------- */

static void test_models(void)
{
	static const struct { const char *file; size_t nparams; int in; } models[] = {
		{ "unet.cfg", 1942594, 32 },
		{ "resunet.cfg", 2057697, 32 },
		{ "classifier.cfg", 584165, 64 },
	};
	char path[512], err[512], ck_path[128];

	snprintf(ck_path, sizeof(ck_path), "%s/m.ckpt", dir);
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		cdp_net a, b;
		cdp_ckpt ck, rd;
		cdp_optim o, o2;
		cdp_optim_cfg oc;
		char *text;
		size_t out;
		float *ya, *yb;

		snprintf(path, sizeof(path), "%s/share/cdpool/models/%s", CDP_SRCDIR, models[i].file);
		if (cdp_cfg_read(path, &text, err, sizeof(err)) < 0) {
			CHECK(0, "%s", err);
			continue;
		}
		/* the documented size: 3 bands at the cfg's own input size */
		if (cdp_net_build(&a, be, text, path, NULL, 0, 0, 0, 0, 1, err, sizeof(err)) != 0) {
			CHECK(0, "%s", err);
			free(text);
			continue;
		}
		CHECK(a.nparams == models[i].nparams, "%s: %zu parameters, its comment says %zu",
		      models[i].file, a.nparams, models[i].nparams);
		cdp_net_free(&a);
		if (i == 0 && cdp_net_build(&a, be, text, path, NULL, 0, 4, 0, 0, 1, err,
		                            sizeof(err)) == 0) {
			CHECK(a.nparams == models[i].nparams + 144, "unet with 4 bands: %zu", a.nparams);
			cdp_net_free(&a);
		}
		/* a small input for the round trip */
		CHECK_RC(cdp_net_build(&a, be, text, path, NULL, 0, 3, models[i].in, models[i].in, 2,
		                       err, sizeof(err)), 0);
		CHECK_RC(cdp_net_build(&b, be, text, path, NULL, 0, 3, models[i].in, models[i].in, 2,
		                       err, sizeof(err)), 0);
		cdp_net_init(&a, 7);
		cdp_net_init(&b, 8);
		/* make the bn buffers differ from their init */
		for (size_t k = 0; k < a.nbuffers; k++)
			a.buffers[k] += 0.001f * (float)k;
		cdp_optim_defaults(&oc);
		oc.type = CDP_OPT_ADAMW;
		CHECK_RC(cdp_optim_init(&o, be, &oc, a.nparams, err, sizeof(err)), 0);
		CHECK_RC(cdp_optim_init(&o2, be, &oc, a.nparams, err, sizeof(err)), 0);
		for (size_t k = 0; k < a.nparams; k++)
			a.grads[k] = 0.01f * (float)((k % 7) - 3);
		CHECK_RC(cdp_optim_step(&o, a.params, a.grads), 0);
		memset(&ck, 0, sizeof(ck));
		CHECK_RC(cdp_ckpt_from_net(&ck, &a), CDP_OK);
		CHECK_RC(cdp_ckpt_set_cfg(&ck, text, NULL, 0), CDP_OK);
		CHECK_RC(cdp_ckpt_set_optim(&ck, &o), CDP_OK);
		ck.step = 1;                 /* the one step its update was */
		CHECK_RC(cdp_ckpt_write(ck_path, &ck), CDP_OK);
		CHECK_RC(cdp_ckpt_read(ck_path, &rd), CDP_OK);
		CHECK(strcmp(rd.cfg_text, text) == 0 && rd.in_c == 3 && rd.in_h == models[i].in,
		      "cfg and input shape kept");
		CHECK_RC(cdp_ckpt_to_net(&rd, &b, err, sizeof(err)), CDP_OK);
		CHECK_RC(cdp_ckpt_to_optim(&rd, &o2, err, sizeof(err)), CDP_OK);
		CHECK(memcmp(a.params, b.params, a.nparams * 4) == 0 &&
		      memcmp(a.buffers, b.buffers, a.nbuffers * 4) == 0, "%s: tensors restored",
		      models[i].file);
		CHECK(o2.step == 1 && memcmp(o.m, o2.m, o.n * 4) == 0 && memcmp(o.v, o2.v, o.n * 4) == 0,
		      "optimizer restored");
		/* the restored net computes what the saved one did */
		for (size_t k = 0; k < (size_t)2 * 3 * models[i].in * models[i].in; k++)
			a.x[k] = b.x[k] = (float)((k * 2654435761u) % 1000) / 500.0f - 1;
		a.train = b.train = 0;
		cdp_net_forward(&a);
		cdp_net_forward(&b);
		out = (size_t)2 * a.layers[a.out_layer].out.c * a.layers[a.out_layer].out.h *
		      a.layers[a.out_layer].out.w;
		ya = (float *)cdp_net_output(&a);
		yb = (float *)cdp_net_output(&b);
		CHECK(memcmp(ya, yb, out * 4) == 0, "%s: outputs differ after restore", models[i].file);
		if (i == 0) {
			/* conv weight shape and bn buffer names as documented */
			CHECK(strcmp(ck.params[0].name, "conv0.w") == 0 && ck.params[0].ndim == 4 &&
			      ck.params[0].dims[0] == 16 && ck.params[0].dims[1] == 3 &&
			      ck.params[0].dims[2] == 3, "first tensor %s", ck.params[0].name);
			CHECK(strcmp(ck.buffers[0].name, "bn1.mean") == 0 &&
			      strcmp(ck.buffers[1].name, "bn1.var") == 0, "buffer names %s %s",
			      ck.buffers[0].name, ck.buffers[1].name);
		}
		cdp_ckpt_free(&rd);
		cdp_ckpt_free(&ck);
		cdp_optim_free(&o);
		cdp_optim_free(&o2);
		cdp_net_free(&a);
		cdp_net_free(&b);
		free(text);
	}
	unlink(ck_path);
}

/* A checkpoint goes only into a net of the same architecture. */
static void test_mismatch(void)
{
	const char *small = "[net]\nchannels=3\nin_h=8\nin_w=8\n[vars]\nwidth=4\n[conv]\nfilters=${width}\n"
	                    "bias=0\n[bn]\nactivation=relu\n[conv]\nfilters=2\nsize=1\n";
	const char *ov[1] = { "width=5" };
	char err[256];
	cdp_net a, b, c;
	cdp_ckpt ck;
	cdp_optim o;
	cdp_optim_cfg oc;

	CHECK_RC(cdp_net_build(&a, be, small, "s.cfg", NULL, 0, 0, 0, 0, 1, err, sizeof(err)), 0);
	CHECK_RC(cdp_net_build(&b, be, small, "s.cfg", ov, 1, 0, 0, 0, 1, err, sizeof(err)), 0);
	CHECK_RC(cdp_net_build(&c, be, small, "s.cfg", NULL, 0, 4, 0, 0, 1, err, sizeof(err)), 0);
	cdp_net_init(&a, 1);
	cdp_net_init(&b, 2);
	memset(&ck, 0, sizeof(ck));
	CHECK_RC(cdp_ckpt_from_net(&ck, &a), CDP_OK);
	CHECK(ck.nparams == 5 && ck.nbuffers == 2, "tensors %d %d", ck.nparams, ck.nbuffers);
	{
		float before = b.params[0];
		CHECK_RC(cdp_ckpt_to_net(&ck, &b, err, sizeof(err)), CDP_EMISMATCH);
		CHECK(strcmp(err, "parameter tensor 1: the checkpoint has 'conv0.w' (4,3,3,3), the net "
		                  "'conv0.w' (5,3,3,3)") == 0, "%s", err);
		CHECK(b.params[0] == before, "net changed by a refused load");
	}
	CHECK_RC(cdp_ckpt_to_net(&ck, &c, err, sizeof(err)), CDP_EMISMATCH);
	CHECK(strcmp(err, "parameter tensor 1: the checkpoint has 'conv0.w' (4,3,3,3), the net "
	                  "'conv0.w' (4,4,3,3)") == 0, "%s", err);
	/* a name for each of the head's 2 classes, not one more */
	CHECK_RC(cdp_ckpt_set_class_names(&ck, (const char *const[]){ "land", "water", "ice" }, 3),
	         CDP_OK);
	CHECK_RC(cdp_ckpt_to_net(&ck, &a, err, sizeof(err)), CDP_EMISMATCH);
	CHECK(strcmp(err, "the checkpoint names 3 classes, the net has 2") == 0, "%s", err);
	CHECK_RC(cdp_ckpt_set_class_names(&ck, (const char *const[]){ "land", "water" }, 2), CDP_OK);
	CHECK_RC(cdp_ckpt_to_net(&ck, &a, err, sizeof(err)), CDP_OK);
	ck.nbuffers--;
	CHECK_RC(cdp_ckpt_to_net(&ck, &a, err, sizeof(err)), CDP_EMISMATCH);
	CHECK(strcmp(err, "the checkpoint has 1 buffer tensors, the net 2") == 0, "%s", err);
	ck.nbuffers++;
	/* optimizer kinds must agree */
	CHECK_RC(cdp_ckpt_to_optim(&ck, &o, err, sizeof(err)), CDP_EMISMATCH);
	CHECK(strcmp(err, "the checkpoint holds no optimizer state") == 0, "%s", err);
	cdp_optim_defaults(&oc);
	CHECK_RC(cdp_optim_init(&o, be, &oc, a.nparams, err, sizeof(err)), 0);
	CHECK_RC(cdp_ckpt_set_optim(&ck, &o), CDP_OK);
	cdp_optim_free(&o);
	oc.type = CDP_OPT_ADAMW;
	CHECK_RC(cdp_optim_init(&o, be, &oc, a.nparams, err, sizeof(err)), 0);
	CHECK_RC(cdp_ckpt_to_optim(&ck, &o, err, sizeof(err)), CDP_EMISMATCH);
	CHECK(strcmp(err, "the checkpoint's optimizer is sgd with 1 state blocks of 126, this one "
	                  "adamw with 2 of 126") == 0, "%s", err);
	cdp_optim_free(&o);
	cdp_ckpt_free(&ck);
	cdp_net_free(&a);
	cdp_net_free(&b);
	cdp_net_free(&c);
}

/* SUMS (version 7): the running sums of metrics.jsonl's means go through
 * bit for bit as the last chunk, an older version may not hold it, and
 * counts beyond the step or sums that are not finite are refused both
 * ways. */
static void test_sums(void)
{
	cdp_ckpt a, b;
	unsigned char *buf, *buf2;
	size_t len, len2, s;

	make_ck(&a);
	a.has_sums = 1;
	a.sum_epoch_loss = 0.1 + 0.2;          /* not a round number: bits must survive */
	a.sum_epoch_steps = a.step;
	a.sum_log_loss = 1.0 / 3;
	a.sum_log_steps = 1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK(buf[8] == 8 && buf[12] == 8, "version 8, 8 chunks: %d %d", buf[8], buf[12]);
	s = len - 4 - 16 - 32;
	CHECK(memcmp(buf + s, "SUMS", 4) == 0 && rd_u64(buf + s + 8) == 32,
	      "SUMS last, 32 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ck_equal(&a, &b), "the sums differ after decoding");
	CHECK_RC(cdp_ckpt_encode(&b, &buf2, &len2), CDP_OK);
	CHECK(len2 == len && memcmp(buf, buf2, len) == 0, "re-encoding changes bytes");
	free(buf2);
	cdp_ckpt_free(&b);
	/* a version 6 file with the chunk of version 7 */
	buf[8] = 6;
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	buf[8] = CDP_CKPT_VERSION;
	/* more steps summed than made, and a NaN sum */
	wr_u64(buf + s + 16 + 8, a.step + 1);
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	wr_u64(buf + s + 16 + 8, a.step);
	wr_u64(buf + s + 16, 0x7ff8000000000000ull);
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	free(buf);
	a.sum_log_steps = a.step + 1;
	CHECK(cdp_ckpt_encode(&a, &buf, &len) != CDP_OK, "a writer keeps more steps than made");
	cdp_ckpt_free(&a);
}

/* PLAN (version 7): the run's length and its key list's identity go
 * through as the last chunk, 64 bytes; a version 6 file may not hold it; a
 * run shorter than its step, no keys, a uuid that is not hex and a
 * non-zero pad are refused; a uuid of zeros is none. */
static void test_plan(void)
{
	cdp_ckpt a, b;
	unsigned char *buf;
	size_t len, s;

	make_ck(&a);
	a.has_plan = 1;
	a.plan_total = 40;
	snprintf(a.keys_uuid, sizeof a.keys_uuid, "%s", "0123456789abcdef0123456789abcdef");
	a.keys_seed = 7;
	a.keys_count = 24;
	a.keys_crc = 0x0e654d88;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	s = len - 4 - 16 - 64;
	CHECK(memcmp(buf + s, "PLAN", 4) == 0 && rd_u64(buf + s + 8) == 64, "PLAN last, 64 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ck_equal(&a, &b), "the plan differs after decoding");
	cdp_ckpt_free(&b);
	buf[8] = 6;
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	buf[8] = CDP_CKPT_VERSION;
	wr_u64(buf + s + 16, a.step - 1);           /* a run shorter than its step */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	wr_u64(buf + s + 16, a.plan_total);
	wr_u64(buf + s + 16 + 48, 0);               /* no keys */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	wr_u64(buf + s + 16 + 48, a.keys_count);
	buf[s + 16 + 8] = 'G';                      /* not hex */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	buf[s + 16 + 8] = '0';
	buf[s + 16 + 63] = 1;                       /* the pad */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	buf[s + 16 + 63] = 0;
	memset(buf + s + 16 + 8, 0, 32);            /* no uuid */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(b.has_plan && b.keys_uuid[0] == '\0', "a uuid of zeros is none");
	cdp_ckpt_free(&b);
	free(buf);
	a.plan_total = a.step - 1;
	CHECK(cdp_ckpt_encode(&a, &buf, &len) != CDP_OK, "a writer keeps a run shorter than its step");
	cdp_ckpt_free(&a);
}

/* LIVE (version 7): the trained weights beside PARM's moving average go
 * through bit for bit after SUMS, an older version may not hold them, and
 * a count other than PARM's or a NaN is refused both ways. */
static void test_live(void)
{
	cdp_ckpt a, b;
	unsigned char *buf;
	size_t len, n = 0, s;

	make_ck(&a);
	for (int i = 0; i < a.nparams; i++)
		n += a.params[i].numel;
	a.live = malloc(n * sizeof(float));
	a.nlive = n;
	for (size_t i = 0; i < n; i++)
		a.live[i] = 0.1f * (float)i - 1.0f / 3;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK(buf[8] == 8 && buf[12] == 8, "version 8, 8 chunks: %d %d", buf[8], buf[12]);
	s = len - 4 - 16 - 8 - 4 * n;
	CHECK(memcmp(buf + s, "LIVE", 4) == 0 && rd_u64(buf + s + 8) == 8 + 4 * n &&
	      rd_u64(buf + s + 16) == n, "LIVE last, its count first");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(b.nlive == n && b.live && memcmp(a.live, b.live, n * sizeof(float)) == 0,
	      "LIVE differs after decoding");
	cdp_ckpt_free(&b);
	buf[8] = 6;                         /* a version 6 file with it */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	buf[8] = CDP_CKPT_VERSION;
	wr_u64(buf + s + 16, n - 1);        /* fewer than PARM's: 4 bytes left over */
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	wr_u64(buf + s + 16, n);
	memcpy(buf + s + 24, &(float){ NAN }, 4);
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	free(buf);
	a.nlive = n - 1;
	CHECK(cdp_ckpt_encode(&a, &buf, &len) != CDP_OK, "a writer keeps a short LIVE");
	cdp_ckpt_free(&a);
}

/* A 2-band initial-weights checkpoint of one tensor, conv0.w (3, 2),
 * seeded with seed. */
static void small_initial(cdp_ckpt *a, uint64_t seed);

/* c[0..len) with a chunk (tag, flags, n bytes of payload p) put at byte
 * at, the header's chunk count (plus count_more) and size and the CRC made
 * right: out (len + 16 + n bytes) and its length */
static size_t put_chunk(unsigned char *out, const unsigned char *c, size_t len, size_t at,
                        const char *tag, uint32_t flags, const void *p, size_t n,
                        int count_more)
{
	memcpy(out, c, at);
	memcpy(out + at, tag, 4);
	for (int j = 0; j < 4; j++)
		out[at + 4 + j] = (unsigned char)(flags >> (8 * j));
	wr_u64(out + at + 8, n);
	memcpy(out + at + 16, p, n);
	memcpy(out + at + 16 + n, c + at, len - at);
	len += 16 + n;
	out[12] = (unsigned char)(out[12] + count_more);
	wr_u64(out + 16, len);
	fix_crc(out, len);
	return len;
}

/* The byte offset of chunk `tag` in a file of any chunks, or 0. */
static size_t find_chunk(const unsigned char *b, size_t len, const char *tag)
{
	for (size_t pos = 24, i = 0; i < rd_u32(b + 12) && pos + 16 <= len; i++) {
		if (memcmp(b + pos, tag, 4) == 0)
			return pos;
		pos += 16 + (size_t)rd_u64(b + pos + 8);
	}
	return 0;
}

static void set_flags(unsigned char *b, size_t len, size_t at, uint32_t flags)
{
	for (int j = 0; j < 4; j++)
		b[at + 4 + j] = (unsigned char)(flags >> (8 * j));
	fix_crc(b, len);
}

/* decode_why of b[0..len): the code, and why equal to want (NULL: any) */
static void refused_as(const unsigned char *b, size_t len, int code, const char *want,
                       const char *what)
{
	cdp_ckpt ck;
	char why[300];
	int rc = cdp_ckpt_decode_why(b, len, -1, &ck, why, sizeof why);

	CHECK(rc == code, "%s: %d, want %d (%s)", what, rc, code, why);
	CHECK(!want || strcmp(why, want) == 0, "%s: says '%s', want '%s'", what, why, want);
	if (rc == CDP_OK)
		cdp_ckpt_free(&ck);
}

/* OPTM's fields against cdp-checkpoint(5), in a hand-edited file with its
 * CRC recomputed: steps taken beyond META's step (before: 2^60 resumed
 * with a wrong AdamW bias correction), fewer (steps skipped: read), a
 * negative count (before: "holds 120 values a block for 120 parameters")
 * and an infinite clipping norm (before: read), each refused naming the
 * field and its value; the writer refuses what the reader would. */
static void test_optm_fields(void)
{
	cdp_ckpt a;
	unsigned char *buf, *c;
	size_t len, at;
	/* the chunk's header, four u32, then ten f32 and four i64 */
	const size_t clip = 16 + 16 + 9 * 4, steps = 16 + 16 + 10 * 4 + 3 * 8;
	float inf = INFINITY;
	char why[300];

	make_ck(&a);
	a.step = 2;
	a.optim_step = 2;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	at = find_chunk(buf, len, "OPTM");
	CHECK(at > 0 && rd_u64(buf + at + steps) == 2 && memcmp(buf + at + clip, &a.optim.clip_norm, 4) == 0,
	      "OPTM's layout");
	c = malloc(len);
	memcpy(c, buf, len);
	wr_u64(c + at + steps, 1);
	fix_crc(c, len);
	refused_as(c, len, CDP_OK, NULL, "one step of two skipped");
	wr_u64(c + at + steps, 1ULL << 60);
	fix_crc(c, len);
	refused_as(c, len, CDP_EFORMAT, "the optimizer's steps taken (OPTM) are 1152921504606846976, "
	           "0 to META's step 2 expected", "steps taken 2^60, META's step 2");
	wr_u64(c + at + steps, (uint64_t)-3);
	fix_crc(c, len);
	refused_as(c, len, CDP_EFORMAT, "the optimizer's steps taken (OPTM) are -3, 0 to META's "
	           "step 2 expected", "steps taken -3");
	memcpy(c, buf, len);
	memcpy(c + at + clip, &inf, 4);
	fix_crc(c, len);
	refused_as(c, len, CDP_EFORMAT, "the optimizer's settings (OPTM): clipping norm is inf "
	           "(every setting finite)", "an infinite clipping norm");
	a.optim_step = 3;
	CHECK_RC(cdp_ckpt_validate(&a, why, sizeof why), -1);
	CHECK(strcmp(why, "the optimizer's steps taken (OPTM) are 3, 0 to META's step 2 "
	             "expected") == 0, "%s", why);
	a.optim_step = 2;
	a.optim.eps = INFINITY;
	free(c);
	c = NULL;
	CHECK_RC(cdp_ckpt_encode(&a, &c, &len), CDP_EINVAL);
	free(c);
	free(buf);
	cdp_ckpt_free(&a);
}

/* Version 8's chunk flags (cdp-checkpoint(5) COMPATIBILITY): an unknown
 * chunk marked skippable is skipped, wherever it stands among the optional
 * ones, and the file reads as without it; an unknown chunk without the
 * mark, and a flag bit this build does not know, are a newer cdpool's
 * (CDP_EVERSION, named); the mark on a fixed chunk, or on a known chunk
 * whose flags are 0, is refused; before version 8 flags and unknown chunks
 * are refused as before; a later version's header is named as such. */
static void test_compat(void)
{
	static const unsigned char pay[5] = { 1, 2, 3, 4, 5 };
	cdp_ckpt a, b;
	unsigned char *buf, *c, *d, *re;
	size_t len, n, n2, relen, sums, plan, data;
	char path[128], why[300];

	make_ck(&a);
	a.has_sums = 1;
	a.sum_epoch_steps = a.sum_log_steps = 1;
	a.has_plan = 1;
	a.plan_total = 40;
	a.keys_count = 24;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	c = malloc(len + 64);
	d = malloc(len + 64);
	sums = find_chunk(buf, len, "SUMS");
	plan = find_chunk(buf, len, "PLAN");
	data = find_chunk(buf, len, "DATA");
	CHECK(buf[12] == 9 && sums && plan && data, "7 chunks, SUMS and PLAN");
	/* skippable, unknown: right after DATA, between SUMS and PLAN, last */
	for (int w = 0; w < 3; w++) {
		size_t at = w == 0 ? sums : w == 1 ? plan : len - 4;
		n = put_chunk(c, buf, len, at, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 1);
		if (cdp_ckpt_decode(c, n, &b) != CDP_OK) {
			CHECK(0, "a skipped chunk at %d: refused", w);
			continue;
		}
		CHECK(ck_equal(&a, &b), "with a skipped chunk at %d the file differs", w);
		CHECK(cdp_ckpt_encode(&b, &re, &relen) == CDP_OK && relen == len &&
		      memcmp(re, buf, len) == 0, "re-encoded, the skipped chunk is not left out");
		free(re);
		cdp_ckpt_free(&b);
	}
	/* two of them, one empty, around SUMS */
	n = put_chunk(c, buf, len, plan, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 1);
	n2 = put_chunk(d, c, n, sums, "zz01", CDP_CKPT_CHUNK_SKIP, pay, 0, 1);
	refused_as(d, n2, CDP_OK, NULL, "two skipped chunks");
	/* it counts among the chunks: left out of the count, extra bytes */
	n = put_chunk(c, buf, len, plan, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 0);
	refused_as(c, n, CDP_EFORMAT, NULL, "a skipped chunk not counted");
	/* its length is checked against the file */
	n = put_chunk(c, buf, len, len - 4, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 1);
	wr_u64(c + len - 4 + 8, sizeof pay + 1);
	fix_crc(c, n);
	refused_as(c, n, CDP_EFORMAT, NULL, "a skipped chunk past the file's end");
	/* never among the fixed ones */
	n = put_chunk(c, buf, len, data, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 1);
	refused_as(c, n, CDP_EFORMAT, NULL, "a skipped chunk before DATA");
	/* unknown without the mark: a newer cdpool's, named */
	n = put_chunk(c, buf, len, plan, "ZZZZ", 0, pay, sizeof pay, 1);
	refused_as(c, n, CDP_EVERSION, "chunk 'ZZZZ' is not known to this build: written by a "
	           "newer cdpool (format version 8)", "an unknown chunk");
	n = put_chunk(c, buf, len, plan, "\x01z'\\", 0, pay, sizeof pay, 1);
	refused_as(c, n, CDP_EVERSION, "chunk '\\x01z\\x27\\x5c' is not known to this build: "
	           "written by a newer cdpool (format version 8)", "an unknown chunk's odd tag");
	/* other flag bits, known chunk or not */
	n = put_chunk(c, buf, len, plan, "ZZZZ", 3, pay, sizeof pay, 1);
	refused_as(c, n, CDP_EVERSION, "chunk 'ZZZZ' has flags 0x3 that this build does not "
	           "know: written by a newer cdpool (format version 8)", "flags 3");
	memcpy(c, buf, len);
	set_flags(c, len, sums, 0x80000000u);
	refused_as(c, len, CDP_EVERSION, "chunk 'SUMS' has flags 0x80000000 that this build does "
	           "not know: written by a newer cdpool (format version 8)", "flag bit 31");
	/* the mark on a fixed chunk, on a known chunk that has none */
	memcpy(c, buf, len);
	set_flags(c, len, 24, CDP_CKPT_CHUNK_SKIP);
	refused_as(c, len, CDP_EFORMAT, "chunk 'META' is marked skippable, which none of the "
	           "seven fixed chunks may be", "META skippable");
	memcpy(c, buf, len);
	set_flags(c, len, data, CDP_CKPT_CHUNK_SKIP);
	refused_as(c, len, CDP_EFORMAT, "chunk 'DATA' is marked skippable, which none of the "
	           "seven fixed chunks may be", "DATA skippable");
	memcpy(c, buf, len);
	set_flags(c, len, sums, CDP_CKPT_CHUNK_SKIP);
	refused_as(c, len, CDP_EFORMAT, "chunk 'SUMS' is marked skippable, which it never is",
	           "SUMS skippable");
	/* version 7: the same file reads; flags or an unknown chunk do not */
	memcpy(c, buf, len);
	c[8] = 7;
	fix_crc(c, len);
	refused_as(c, len, CDP_OK, NULL, "the file as version 7");
	set_flags(c, len, 24, CDP_CKPT_CHUNK_SKIP);
	refused_as(c, len, CDP_EFORMAT, "chunk 'META' has flags 0x1 (0 in format version 7)",
	           "version 7 flags");
	set_flags(c, len, 24, 0);
	set_flags(c, len, plan, CDP_CKPT_CHUNK_SKIP);
	refused_as(c, len, CDP_EFORMAT, "chunk 'PLAN' has flags 0x1 (0 in format version 7)",
	           "version 7 PLAN's flags");
	set_flags(c, len, plan, 0);
	n = put_chunk(d, c, len, plan, "ZZZZ", 0, pay, sizeof pay, 1);
	refused_as(d, n, CDP_EFORMAT, "chunk 'ZZZZ' is not one of format version 7",
	           "version 7's unknown chunk");
	n = put_chunk(d, c, len, plan, "ZZZZ", CDP_CKPT_CHUNK_SKIP, pay, sizeof pay, 1);
	refused_as(d, n, CDP_EFORMAT, "chunk 'ZZZZ' has flags 0x1 (0 in format version 7)",
	           "version 7's skippable chunk");
	/* a later version, an earlier one: named, in memory and from a file */
	memcpy(c, buf, len);
	c[8] = 9;
	fix_crc(c, len);
	refused_as(c, len, CDP_EVERSION, "format version 9; this build reads 1 to 8: written by "
	           "a newer cdpool", "version 9");
	snprintf(path, sizeof path, "%s/v9.cdpt", dir);
	{
		FILE *f = fopen(path, "wb");
		unsigned char *lb;
		size_t ll;
		CHECK(f && fwrite(c, 1, len, f) == len && fclose(f) == 0, "writing %s", path);
		CHECK_RC(cdp_ckpt_load_why(path, &lb, &ll, why, sizeof why), CDP_EVERSION);
		CHECK(strcmp(why, "format version 9; this build reads 1 to 8: written by a newer "
		             "cdpool") == 0, "load_why of version 9: '%s'", why);
		/* a header cut short after the version says so too */
		f = fopen(path, "wb");
		CHECK(f && fwrite(c, 1, 12, f) == 12 && fclose(f) == 0, "writing %s", path);
		CHECK_RC(cdp_ckpt_read_why(path, -1, &b, why, sizeof why), CDP_EVERSION);
		CHECK(strstr(why, "format version 9; ") == why, "12 bytes of version 9: '%s'", why);
		unlink(path);
	}
	c[8] = 0;
	fix_crc(c, len);
	refused_as(c, len, CDP_EVERSION, "format version 0; this build reads 1 to 8", "version 0");
	free(c);
	free(d);
	free(buf);
	cdp_ckpt_free(&a);
}

/* What every skippable chunk of version 8 (at s in buf) keeps: its flags
 * 0 refused, naming it; a version 7 file with it refused; and, its tag
 * renamed to one no reader knows (as to a reader from before it), the
 * file decoded into *b, skipping it. buf ends with the new tag. */
static void skippable_rules(unsigned char *buf, size_t len, size_t s, const char *renamed,
                            cdp_ckpt *b)
{
	char tag[5], want[100];

	memcpy(tag, buf + s, 4);
	tag[4] = '\0';
	set_flags(buf, len, s, 0);
	snprintf(want, sizeof want, "chunk '%s' is not marked skippable, which it always is", tag);
	refused_as(buf, len, CDP_EFORMAT, want, "flags 0");
	set_flags(buf, len, s, CDP_CKPT_CHUNK_SKIP);
	buf[8] = 7;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "a version 7 file with a version 8 chunk");
	buf[8] = 8;
	memcpy(buf + s, renamed, 4);
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, b), CDP_OK);
}

/* BEST (version 8, skippable): the validation that kept a best.cdpt goes
 * through bit for bit as the last chunk, 24 bytes, with the skippable
 * flag; an unknown metric, a value that is not finite and a step after
 * META's are refused by reader and writer, naming the chunk; version 7 may
 * not hold it; flags 0 on it are refused; and a reader that did not know
 * BEST (its tag unknown, as it is to one) skips it. */
static void test_best(void)
{
	cdp_ckpt a, b;
	unsigned char *buf, *re;
	size_t len, relen, s;
	char want[300];

	make_ck(&a);
	a.has_best = 1;
	a.best_metric = CDP_CKPT_BEST_MIOU;
	a.best_value = 0.1 + 0.6;               /* not a round number: bits must survive */
	a.best_step = 15;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	s = len - 4 - 16 - 24;
	CHECK(buf[8] == 8 && buf[12] == 8 && memcmp(buf + s, "BEST", 4) == 0 &&
	      rd_u32(buf + s + 4) == CDP_CKPT_CHUNK_SKIP && rd_u64(buf + s + 8) == 24,
	      "BEST last, skippable, 24 bytes");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ck_equal(&a, &b) && b.has_best && b.best_metric == CDP_CKPT_BEST_MIOU &&
	      b.best_step == 15, "BEST differs after decoding");
	CHECK(cdp_ckpt_encode(&b, &re, &relen) == CDP_OK && relen == len &&
	      memcmp(re, buf, len) == 0, "re-encoding changes bytes");
	free(re);
	cdp_ckpt_free(&b);
	CHECK(strcmp(cdp_ckpt_best_name(CDP_CKPT_BEST_LOSS), "loss") == 0 &&
	      strcmp(cdp_ckpt_best_name(CDP_CKPT_BEST_R2), "r2") == 0 &&
	      !cdp_ckpt_best_name(0) && !cdp_ckpt_best_name(8), "the metrics' names");
	/* each rule, named */
	buf[s + 16] = 8;
	fix_crc(buf, len);
	snprintf(want, sizeof want, "the best validation (BEST): metric 8, value %g at step 15 (a "
	         "known metric, a finite value, at most the 17 steps taken)", a.best_value);
	refused_as(buf, len, CDP_EFORMAT, want, "metric 8");
	buf[s + 16] = 0;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "metric 0");
	buf[s + 16] = CDP_CKPT_BEST_MIOU;
	wr_u64(buf + s + 16 + 8, 0x7ff8000000000000ull);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, "the best validation (BEST): metric 1, value nan at step "
	           "15 (a known metric, a finite value, at most the 17 steps taken)", "a NaN");
	memcpy(buf + s + 16 + 8, &a.best_value, 8);
	wr_u64(buf + s + 16 + 16, 18);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "step 18 of 17");
	wr_u64(buf + s + 16 + 16, 17);
	buf[s + 16 + 4] = 1;                    /* the pad */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "the pad");
	buf[s + 16 + 4] = 0;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_OK, NULL, "step 17 of 17");
	skippable_rules(buf, len, s, "BESU", &b);
	CHECK(!b.has_best, "a renamed BEST is skipped");
	cdp_ckpt_free(&b);
	free(buf);
	/* the writer's and the initial weights' rules */
	a.best_step = 18;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.best_step = 17;
	a.best_value = INFINITY;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.best_value = 1;
	a.best_metric = 0;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	cdp_ckpt_free(&a);
	small_initial(&a, 3);
	a.has_best = 1;
	a.best_metric = CDP_CKPT_BEST_LOSS;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	cdp_ckpt_free(&a);
}

/* RUN (version 8, skippable): the run's settings and state outside the
 * model go through as the last chunk, after BEST, 104 bytes, skippable;
 * each field out of its range is refused naming the chunk and the field,
 * by reader and writer; a later layout's added bytes are skipped; version
 * 7 may not hold it; a file without it (an older v8 one) reads with
 * has_run 0; and a reader that does not know RUN skips it. */
static void test_run(void)
{
	cdp_ckpt a, b;
	unsigned char *buf, *big;
	size_t len, s;

	make_ck(&a);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(!b.has_run && buf[12] == 7, "a file without RUN reads without it");
	cdp_ckpt_free(&b);
	free(buf);
	a.has_best = 1;
	a.best_metric = CDP_CKPT_BEST_LOSS;
	a.best_value = 0.25;
	a.best_step = 10;
	a.has_run = 1;
	a.run_pad_last = 1;
	a.run_nan_policy = CDP_CKPT_NAN_SKIP;
	a.run_nan_row = 3;
	a.run_nan_skipped = 5;
	a.run_threads = 2;
	snprintf(a.run_kernels, sizeof a.run_kernels, "avx2");
	snprintf(a.val_uuid, sizeof a.val_uuid, "%s", "0123456789abcdef0123456789abcdef");
	a.val_seed = 1;
	a.val_count = 32;
	a.val_crc = 0x1554eec1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	s = len - 4 - 16 - 104;
	CHECK(buf[12] == 9 && memcmp(buf + s, "RUN ", 4) == 0 &&
	      rd_u32(buf + s + 4) == CDP_CKPT_CHUNK_SKIP && rd_u64(buf + s + 8) == 104 &&
	      memcmp(buf + s - 16 - 24, "BEST", 4) == 0, "RUN last after BEST, skippable, 104 bytes");
	CHECK(rd_u32(buf + s + 16) == 1 && rd_u32(buf + s + 20) == 1 && rd_u32(buf + s + 24) == 2 &&
	      rd_u32(buf + s + 28) == 2 && rd_u64(buf + s + 32) == 3 && rd_u64(buf + s + 40) == 5 &&
	      memcmp(buf + s + 48, "avx2\0", 5) == 0 && buf[s + 63] == 0 &&
	      memcmp(buf + s + 64, a.val_uuid, 32) == 0 && rd_u64(buf + s + 96) == 1 &&
	      rd_u64(buf + s + 104) == 32 && rd_u32(buf + s + 112) == 0x1554eec1 &&
	      rd_u32(buf + s + 116) == 0, "RUN's layout");
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(ck_equal(&a, &b), "RUN differs after decoding");
	cdp_ckpt_free(&b);
	/* each rule, named */
	buf[s + 16 + 8] = 3;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, "the run's settings (RUN): --pad-last 1, --nan-policy 3 "
	           "(0 or 1, and 1 stop or 2 skip)", "policy 3");
	buf[s + 16 + 8] = CDP_CKPT_NAN_STOP;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, "the run's non-finite steps (RUN): 3 in a row, 5 skipped "
	           "(in a row at most those skipped, at most the 17 steps taken, none in a row under "
	           "--nan-policy stop)", "in a row under stop");
	buf[s + 16 + 8] = CDP_CKPT_NAN_SKIP;
	wr_u64(buf + s + 16 + 24, 18);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "18 skipped of 17 steps");
	wr_u64(buf + s + 16 + 24, 2);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "more in a row than skipped");
	wr_u64(buf + s + 16 + 24, 5);
	buf[s + 16 + 4] = 2;                    /* an unknown flag */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "flag bit 1");
	buf[s + 16 + 4] = 1;
	buf[s + 16 + 12 + 2] = 2;               /* 131074 threads */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, "the run's compute (RUN): 131074 threads (0 to 65536), "
	           "kernels 'avx2' (1 to 15 printable characters)", "threads");
	buf[s + 16 + 12 + 2] = 0;
	buf[s + 16 + 32] = 0;                   /* no kernels' name */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "an empty kernels' name");
	buf[s + 16 + 32] = 'a';
	buf[s + 16 + 40] = 'x';                 /* a byte after the name's NUL */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "a byte after the kernels' NUL");
	buf[s + 16 + 40] = 0;
	wr_u64(buf + s + 16 + 88, 0);           /* no keys, but a uuid */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, "the run's validation list (RUN): 0 keys, uuid "
	           "'0123456789abcdef0123456789abcdef' (none: 0 keys, no uuid, seed and crc32 0; "
	           "else a uuid of 32 lowercase hex digits)", "0 keys with a uuid");
	memset(buf + s + 16 + 48, 0, 32 + 8 + 8 + 4);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_OK, NULL, "no validation list");
	wr_u64(buf + s + 16 + 88, 32);
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "keys without a uuid");
	memcpy(buf + s + 16 + 48, a.val_uuid, 32);
	wr_u64(buf + s + 16 + 80, 1);
	buf[s + 16 + 96] = 0xc1;
	buf[s + 16 + 100] = 1;                  /* the pad */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "the pad");
	buf[s + 16 + 100] = 0;
	buf[s + 16] = 0;                        /* layout 0 */
	fix_crc(buf, len);
	refused_as(buf, len, CDP_EFORMAT, NULL, "layout 0");
	buf[s + 16] = 1;
	fix_crc(buf, len);
	refused_as(buf, len, CDP_OK, NULL, "mended");
	/* a later layout: 8 more bytes, and an unknown flag, skipped */
	CHECK((big = malloc(len + 8)) != NULL, "malloc");
	memcpy(big, buf, len - 4);
	memset(big + len - 4, 0xab, 8);
	big[s + 16] = 2;
	big[s + 16 + 4] |= 2;
	wr_u64(big + s + 8, 112);
	wr_u64(big + 16, len + 8);
	fix_crc(big, len + 8);
	CHECK_RC(cdp_ckpt_decode(big, len + 8, &b), CDP_OK);
	CHECK(b.has_run && b.run_pad_last == 1 && b.val_count == 32 &&
	      strcmp(b.run_kernels, "avx2") == 0, "layout 2's first 104 bytes are read");
	cdp_ckpt_free(&b);
	free(big);
	skippable_rules(buf, len, s, "RUNX", &b);
	CHECK(!b.has_run && b.has_best, "a renamed RUN is skipped");
	cdp_ckpt_free(&b);
	free(buf);
	/* the writer's rules */
	a.run_nan_skipped = 18;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.run_nan_skipped = 5;
	a.run_kernels[0] = '\0';
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	snprintf(a.run_kernels, sizeof a.run_kernels, "a b");
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	snprintf(a.run_kernels, sizeof a.run_kernels, "cuda");
	a.run_threads = -1;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.run_threads = 0;
	a.val_count = 0;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	a.val_uuid[0] = '\0';
	a.val_seed = 0;
	a.val_crc = 0;
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	free(buf);
	cdp_ckpt_free(&a);
	small_initial(&a, 3);
	a.has_run = 1;
	a.run_nan_policy = CDP_CKPT_NAN_STOP;
	snprintf(a.run_kernels, sizeof a.run_kernels, "avx2");
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_EINVAL);
	cdp_ckpt_free(&a);
}

static void small_initial(cdp_ckpt *a, uint64_t seed)
{
	const int d[2] = { 3, 2 };
	cdp_rng r;

	memset(a, 0, sizeof *a);
	cdp_rng_seed(&r, seed);
	CHECK_RC(cdp_ckpt_set_cfg(a, "[net]\n[conv]\nfilters=3\n", NULL, 0), CDP_OK);
	a->in_c = 2, a->in_h = a->in_w = 8;
	a->params = calloc(1, sizeof *a->params);
	a->nparams = 1;
	fill_tensor(&a->params[0], "conv0.w", 2, d, &r);
	a->initial = 1;
}

/* Initial weights (version 7, META's kind 1): a model and tensors, no run
 * state; the kind round-trips, a kind 1 file with a run's state and a
 * kind 2 are refused. */
static void test_initial(const unsigned char *buf, size_t len)
{
	const size_t kind_at = 24 + 16 + 120 - 4;
	unsigned char *c = malloc(len), *ib;
	size_t ilen;
	cdp_ckpt a, b;

	small_initial(&a, 9);
	CHECK_RC(cdp_ckpt_encode(&a, &ib, &ilen), CDP_OK);
	CHECK(rd_u32(ib + kind_at) == CDP_CKPT_KIND_INITIAL, "META's kind is %u",
	      rd_u32(ib + kind_at));
	CHECK_RC(cdp_ckpt_decode(ib, ilen, &b), CDP_OK);
	CHECK(b.initial == 1 && b.nparams == 1 && b.optim.type == 0, "initial weights read back");
	cdp_ckpt_free(&b);
	free(ib);
	a.step = 1;                          /* progress is a run's */
	CHECK_RC(cdp_ckpt_encode(&a, &ib, &ilen), CDP_EINVAL);
	cdp_ckpt_free(&a);
	/* a run's checkpoint: kind 0; marked 1 it has a run's state; 2 is no kind */
	CHECK(rd_u32(buf + kind_at) == 0, "a run's checkpoint has kind %u", rd_u32(buf + kind_at));
	for (unsigned k = 1; k <= 2; k++) {
		memcpy(c, buf, len);
		c[kind_at] = (unsigned char)k;
		fix_crc(c, len);
		CHECK_RC(cdp_ckpt_decode(c, len, &b), CDP_EFORMAT);
	}
	free(c);
}

/* NORM and FROM (version 7): the input normalization initial weights
 * expect and where weights came from round-trip; setters refuse what a
 * reader refuses (a deviation of 0, band names of another count, a 17th
 * source); a version 6 file holding NORM is refused. */
static void test_norm_from(void)
{
	const double mean[2] = { 0.485, 0.456 }, sd[2] = { 0.229, 0.224 }, zero[2] = { 0.5, 0 };
	const char *bands[2] = { "B04", "7" }, *bad[2] = { "B 4", "7" };
	unsigned char sha[32], *buf;
	size_t len;
	cdp_ckpt a, b;

	small_initial(&a, 10);
	for (int i = 0; i < 32; i++)
		sha[i] = (unsigned char)(i * 7 + 1);
	CHECK_RC(cdp_ckpt_set_norm(&a, CDP_CKPT_NORM_GIVEN, 0, mean, zero, 2, NULL, 0), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_norm(&a, CDP_CKPT_NORM_GIVEN, 0, mean, sd, 2, bands, 1), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_norm(&a, CDP_CKPT_NORM_GIVEN, 0, mean, sd, 2, bad, 2), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_set_norm(&a, CDP_CKPT_NORM_IMAGENET, 10000, mean, sd, 2, bands, 2), CDP_OK);
	CHECK_RC(cdp_ckpt_add_from(&a, CDP_CKPT_FROM_TORCH, "r18.pth", sha), CDP_OK);
	CHECK_RC(cdp_ckpt_add_from(&a, 3, "x", sha), CDP_EINVAL);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(b.norm_kind == CDP_CKPT_NORM_IMAGENET && b.norm_scale == 10000 &&
	      b.norm_mean[1] == 0.456 && b.norm_std[0] == 0.229 && b.nnorm_bands == 2 &&
	      !strcmp(b.norm_bands[0], "B04") && !strcmp(b.norm_bands[1], "7"),
	      "NORM read back: kind %d scale %g", b.norm_kind, b.norm_scale);
	CHECK(b.nfrom == 1 && b.from[0].kind == CDP_CKPT_FROM_TORCH &&
	      !strcmp(b.from[0].name, "r18.pth") && !memcmp(b.from[0].sha256, sha, 32),
	      "FROM read back: %d entries", b.nfrom);
	cdp_ckpt_free(&b);
	/* the same bytes claiming version 6 */
	buf[8] = 6;
	fix_crc(buf, len);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_EFORMAT);
	free(buf);
	for (int i = 1; i < CDP_CKPT_FROM_MAX; i++)
		CHECK_RC(cdp_ckpt_add_from(&a, CDP_CKPT_FROM_CKPT, "c.cdpt", sha), CDP_OK);
	CHECK_RC(cdp_ckpt_add_from(&a, CDP_CKPT_FROM_CKPT, "c.cdpt", sha), CDP_EINVAL);
	/* a run's checkpoint standardized by the weights' normalization */
	a.initial = 0;
	CHECK_RC(cdp_ckpt_set_data(&a, (const int[]){ 1, 2 }, 2, mean, sd), CDP_OK);
	CHECK_RC(cdp_ckpt_set_origin(&a, CDP_CKPT_STD_INIT, NULL, 0, NULL, 0, 0), CDP_OK);
	CHECK_RC(cdp_ckpt_encode(&a, &buf, &len), CDP_OK);
	CHECK_RC(cdp_ckpt_decode(buf, len, &b), CDP_OK);
	CHECK(b.std_from == CDP_CKPT_STD_INIT && b.nfrom == CDP_CKPT_FROM_MAX,
	      "origin init read back: %d, %d sources", b.std_from, b.nfrom);
	cdp_ckpt_free(&b);
	free(buf);
	cdp_ckpt_free(&a);
}

int main(void)
{
	unsigned char *buf;
	size_t len;

	snprintf(dir, sizeof(dir), "/tmp/cdp-ckpt-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	be = cdp_backend_cpu(1);
	if (!be)
		return 99;
	test_round_trip(&buf, &len);
	test_damage(buf, len);
	test_version1(buf, len);
	test_files(buf, len);
	test_invalid();
	test_class_names();
	test_sums();
	test_plan();
	test_live();
	test_compat();
	test_best();
	test_run();
	test_initial(buf, len);
	test_norm_from();
	test_nonfinite();
	test_optm_fields();
	test_mismatch();
	test_models();
	free(buf);
	rmdir(dir);
	be->destroy(be);
	return tap_done();
}
