/* checkpoint.c: writing checkpoints (checkpoint.h, man/cdp-checkpoint.5),
 * and the validation that reading shares.
 *
 * One set of emit functions serves three writers: a counting pass that
 * sizes every chunk (the header and chunk headers carry sizes up front), a
 * memory buffer, and a FILE on a temporary file. The same semantic checks
 * (cdp_ckpt_check) run on what is about to be written and on what was read
 * (checkpoint_read.c), so a file this code writes is always one it reads.
 *
 * Not done: compression, big-endian files (a big-endian host converts on
 * the way out and in).
 */
#include "checkpoint_int.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_out.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

const char cdp_ckpt_tags[NCHUNKS_MAX][5] = {
	"META", "CFG ", "PARM", "BUFS", "OPTM", "RNG ", "DATA", "RANK", "SUMS",
	"LIVE", "NORM", "FROM", "TASK", "PLAN", "BEST",
	"RUN "
};
const uint32_t cdp_ckpt_tag_since[NCHUNKS_MAX] = { 1, 1, 1, 1, 1, 1, 1, 3, 7, 7, 7, 7, 7, 7, 8, 8 };
/* BEST and RUN are what an older reader may ignore: the file is still the
 * model, and a resume without RUN takes the command line's settings */
const uint32_t cdp_ckpt_tag_flags[NCHUNKS_MAX] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, CDP_CKPT_CHUNK_SKIP, CDP_CKPT_CHUNK_SKIP
};

static const char *const best_names[CDP_CKPT_BEST_MAX + 1] = {
	NULL, "miou", "loss", "acc", "f1", "map", "rmse", "r2"
};

const char *cdp_ckpt_best_name(int metric)
{
	return metric >= 1 && metric <= CDP_CKPT_BEST_MAX ? best_names[metric] : NULL;
}

uint32_t cdp_ckpt_crc(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n > 0) {
		uInt step = n > UINT_MAX ? UINT_MAX : (uInt)n;
		crc = (uint32_t)crc32(crc, b, step);
		b += step;
		n -= step;
	}
	return crc;
}

/* ---- writing --------------------------------------------------------------- */

typedef struct wr {
	unsigned char *mem;     /* memory target, or */
	FILE *f;                /* file target; neither: count only */
	size_t cap, pos;
	uint32_t crc;
	int err;
} wr;

static void put(wr *w, const void *p, size_t n)
{
	if (w->err || n == 0)
		return;
	if (w->mem) {
		if (n > w->cap - w->pos) {
			w->err = CDP_EINVAL;
			return;
		}
		memcpy(w->mem + w->pos, p, n);
	} else if (w->f && fwrite(p, 1, n, w->f) != n) {
		w->err = errno > 0 ? errno : EIO;
		return;
	}
	if (w->mem || w->f)
		w->crc = cdp_ckpt_crc(w->crc, p, n);
	w->pos += n;
}

static void put_u32(wr *w, uint32_t v)
{
	unsigned char b[4];

	le32(b, v);
	put(w, b, 4);
}

static void put_u64(wr *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

static void put_f32(wr *w, float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	put_u32(w, u);
}

static void put_f64(wr *w, double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	put_u64(w, u);
}

static void put_f32s(wr *w, const float *x, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	put(w, x, n * sizeof(float));
#else
	for (size_t i = 0; i < n; i++)
		put_f32(w, x[i]);
#endif
}

static void put_str(wr *w, const char *s)
{
	size_t n = strlen(s);

	put_u32(w, (uint32_t)n);
	put(w, s, n);
}

static void emit_meta(wr *w, const cdp_ckpt *ck)
{
	unsigned char uuid[32] = { 0 };

	put_u32(w, (uint32_t)ck->in_c);
	put_u32(w, (uint32_t)ck->in_h);
	put_u32(w, (uint32_t)ck->in_w);
	put_u32(w, 0);
	put_u64(w, ck->step);
	put_u64(w, ck->epoch);
	put_u64(w, ck->data_pos);
	put_u64(w, ck->seed);
	if (ck->pool_uuid[0])
		memcpy(uuid, ck->pool_uuid, 32);
	put(w, uuid, 32);
	put_f64(w, ck->loss_scale);
	put_u64(w, ck->scale_good);
	put_u64(w, ck->scale_skipped);
	put_u32(w, (uint32_t)ck->batch);
	put_u32(w, (uint32_t)ck->batch_ranks);
	put_u32(w, (uint32_t)ck->batch_accumulate);
	put_u32(w, ck->initial ? CDP_CKPT_KIND_INITIAL : 0);
}

static void emit_cfg(wr *w, const cdp_ckpt *ck)
{
	put_str(w, ck->cfg_text);
	put_u32(w, (uint32_t)ck->noverrides);
	for (int i = 0; i < ck->noverrides; i++)
		put_str(w, ck->overrides[i]);
}

static void emit_tensors(wr *w, const cdp_ckpt_tensor *t, int n)
{
	uint64_t total = 0;

	for (int i = 0; i < n; i++)
		total += t[i].numel;
	put_u32(w, (uint32_t)n);
	put_u32(w, 0);
	put_u64(w, total);
	for (int i = 0; i < n; i++) {
		put_str(w, t[i].name);
		put_u32(w, (uint32_t)t[i].ndim);
		for (int d = 0; d < t[i].ndim; d++)
			put_u32(w, (uint32_t)t[i].dims[d]);
		put_f32s(w, t[i].data, t[i].numel);
	}
}

static void emit_params(wr *w, const cdp_ckpt *ck)
{
	emit_tensors(w, ck->params, ck->nparams);
}

static void emit_buffers(wr *w, const cdp_ckpt *ck)
{
	emit_tensors(w, ck->buffers, ck->nbuffers);
}

static void emit_optim(wr *w, const cdp_ckpt *ck)
{
	const cdp_optim_cfg *c = &ck->optim;
	int nb = c->type ? cdp_optim_nblocks(c) : 0;
	const float f[10] = { c->lr, c->momentum, c->weight_decay, c->beta1, c->beta2, c->eps,
	                      c->gamma, c->min_lr, c->warmup_factor, c->clip_norm };

	put_u32(w, (uint32_t)c->type);
	put_u32(w, (uint32_t)c->policy);
	put_u32(w, (uint32_t)c->nesterov);
	put_u32(w, (uint32_t)c->accumulate);
	for (int i = 0; i < 10; i++)
		put_f32(w, f[i]);
	put_u64(w, (uint64_t)(int64_t)c->step_size);
	put_u64(w, (uint64_t)(int64_t)c->total_steps);
	put_u64(w, (uint64_t)(int64_t)c->warmup);
	put_u64(w, (uint64_t)(int64_t)ck->optim_step);
	put_u32(w, (uint32_t)nb);
	put_u32(w, 0);
	put_u64(w, nb ? ck->optim_n : 0);
	if (nb == 2)
		put_f32s(w, ck->optim_m, ck->optim_n);
	if (nb >= 1)
		put_f32s(w, ck->optim_v, ck->optim_n);
}

static void emit_rng(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->nrng);
	for (int i = 0; i < ck->nrng; i++) {
		put_str(w, ck->rng[i].name);
		for (int j = 0; j < 4; j++)
			put_u64(w, ck->rng[i].s[j]);
	}
}

static void emit_data(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->nbands);
	put_u32(w, ck->mean ? (uint32_t)ck->nbands : 0);
	for (int i = 0; i < ck->nbands; i++)
		put_u32(w, (uint32_t)ck->bands[i]);
	for (int i = 0; ck->mean && i < ck->nbands; i++)
		put_f64(w, ck->mean[i]);
	for (int i = 0; ck->mean && i < ck->nbands; i++)
		put_f64(w, ck->std[i]);
	/* last, so a version 1 DATA chunk is this one without it */
	put_u32(w, (uint32_t)ck->dtype);
	/* version 5: where the statistics came from, the georeference */
	put_u32(w, (uint32_t)ck->std_from);
	put_u32(w, (uint32_t)ck->nstd_sources);
	for (int i = 0; i < ck->nstd_sources; i++)
		put_u32(w, ck->std_sources[i]);
	put_u32(w, ck->crs ? (uint32_t)strlen(ck->crs) : 0);
	if (ck->crs)
		put(w, ck->crs, strlen(ck->crs));
	put_f64(w, ck->res_x);
	put_f64(w, ck->res_y);
	/* version 6: the class names */
	put_u32(w, (uint32_t)ck->nclass_names);
	for (int i = 0; i < ck->nclass_names; i++)
		put_str(w, ck->class_names[i]);
}

static void put_cb(void *w, const void *p, size_t n)
{
	put(w, p, n);
}

/* checkpoint_rank.c writes the per-rank state through put */
static void emit_rank(wr *w, const cdp_ckpt *ck)
{
	cdp_ckpt_rank_emit(ck, put_cb, w);
}

/* the running sums of metrics.jsonl's means (checkpoint.h) */
static void emit_sums(wr *w, const cdp_ckpt *ck)
{
	put_f64(w, ck->sum_epoch_loss);
	put_u64(w, ck->sum_epoch_steps);
	put_f64(w, ck->sum_log_loss);
	put_u64(w, ck->sum_log_steps);
}

/* the trained weights when PARM holds their moving average (checkpoint.h) */
static void emit_live(wr *w, const cdp_ckpt *ck)
{
	put_u64(w, ck->nlive);
	put_f32s(w, ck->live, ck->nlive);
}

/* the input normalization the initial weights expect (checkpoint.h) */
static void emit_norm(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->norm_kind);
	put_u32(w, (uint32_t)ck->in_c);
	put_f64(w, ck->norm_scale);
	for (int i = 0; i < ck->in_c; i++)
		put_f64(w, ck->norm_mean[i]);
	for (int i = 0; i < ck->in_c; i++)
		put_f64(w, ck->norm_std[i]);
	put_u32(w, (uint32_t)ck->nnorm_bands);
	for (int i = 0; i < ck->nnorm_bands; i++)
		put_str(w, ck->norm_bands[i]);
}

/* where the initial weights came from (checkpoint.h) */
static void emit_from(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->nfrom);
	for (int i = 0; i < ck->nfrom; i++) {
		put_u32(w, (uint32_t)ck->from[i].kind);
		put_u32(w, 0);
		put_str(w, ck->from[i].name);
		put(w, ck->from[i].sha256, 32);
	}
}

/* the task and a regression's target standardization (checkpoint.h) */
static void emit_task(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->task);
	put_u32(w, (uint32_t)ck->ntargets);
	for (int i = 0; i < ck->ntargets; i++)
		put_f64(w, ck->target_mean[i]);
	for (int i = 0; i < ck->ntargets; i++)
		put_f64(w, ck->target_std[i]);
}

/* the run's length and its training key list (checkpoint.h) */
static void emit_plan(wr *w, const cdp_ckpt *ck)
{
	unsigned char uuid[32] = { 0 };

	if (ck->keys_uuid[0])
		memcpy(uuid, ck->keys_uuid, 32);
	put_u64(w, ck->plan_total);
	put(w, uuid, 32);
	put_u64(w, ck->keys_seed);
	put_u64(w, ck->keys_count);
	put_u32(w, ck->keys_crc);
	put_u32(w, 0);
}

/* the validation that kept a --keep-best best.cdpt (checkpoint.h) */
static void emit_best(wr *w, const cdp_ckpt *ck)
{
	put_u32(w, (uint32_t)ck->best_metric);
	put_u32(w, 0);
	put_f64(w, ck->best_value);
	put_u64(w, ck->best_step);
}

/* the run's settings and state outside the model (checkpoint.h), layout 1 */
static void emit_run(wr *w, const cdp_ckpt *ck)
{
	unsigned char kern[16] = { 0 }, uuid[32] = { 0 };

	memcpy(kern, ck->run_kernels, strnlen(ck->run_kernels, CDP_CKPT_RUN_KERNELS_MAX));
	if (ck->val_uuid[0])
		memcpy(uuid, ck->val_uuid, 32);
	put_u32(w, CDP_CKPT_RUN_LAYOUT);
	put_u32(w, ck->run_pad_last ? CDP_CKPT_RUN_PAD_LAST : 0);
	put_u32(w, (uint32_t)ck->run_nan_policy);
	put_u32(w, (uint32_t)ck->run_threads);
	put_u64(w, ck->run_nan_row);
	put_u64(w, ck->run_nan_skipped);
	put(w, kern, 16);
	put(w, uuid, 32);
	put_u64(w, ck->val_seed);
	put_u64(w, ck->val_count);
	put_u32(w, ck->val_crc);
	put_u32(w, 0);
}

typedef void (*emit_fn)(wr *, const cdp_ckpt *);
static const emit_fn emitters[NCHUNKS_MAX] = {
	emit_meta, emit_cfg, emit_params, emit_buffers, emit_optim, emit_rng, emit_data, emit_rank,
	emit_sums, emit_live, emit_norm, emit_from, emit_task, emit_plan, emit_best,
	emit_run
};

/* whether chunk i goes into ck's file: the fixed ones always */
static int present(const cdp_ckpt *ck, int i)
{
	return i < NCHUNKS || (i == CHUNK_RANK && ck->nranks > 0) ||
	       (i == CHUNK_SUMS && ck->has_sums) || (i == CHUNK_LIVE && ck->live) ||
	       (i == CHUNK_NORM && ck->norm_kind) || (i == CHUNK_FROM && ck->nfrom > 0) ||
	       (i == CHUNK_TASK && ck->task) || (i == CHUNK_PLAN && ck->has_plan) ||
	       (i == CHUNK_BEST && ck->has_best) || (i == CHUNK_RUN && ck->has_run);
}

static int nchunks(const cdp_ckpt *ck)
{
	int n = 0;

	for (int i = 0; i < NCHUNKS_MAX; i++)
		n += present(ck, i);
	return n;
}

/* Sizes every chunk by a counting pass (the per-rank state, all floats, by
 * arithmetic); returns the file size. */
static size_t encoded_size(const cdp_ckpt *ck, size_t len[NCHUNKS_MAX])
{
	size_t total = HDR + 4;

	for (int i = 0; i < NCHUNKS_MAX; i++) {
		wr c = { 0 };
		if (!present(ck, i))
			continue;
		if (i == CHUNK_RANK)
			c.pos = cdp_ckpt_rank_bytes(ck);
		else
			emitters[i](&c, ck);
		len[i] = c.pos;
		total += 16 + c.pos;
	}
	return total;
}

static int emit_all(wr *w, const cdp_ckpt *ck, const size_t len[NCHUNKS_MAX], size_t total)
{
	unsigned char b[4];

	put(w, CDP_CKPT_MAGIC, 8);
	put_u32(w, CDP_CKPT_VERSION);
	put_u32(w, (uint32_t)nchunks(ck));
	put_u64(w, total);
	for (int i = 0; i < NCHUNKS_MAX; i++) {
		size_t start;
		if (!present(ck, i))
			continue;
		put(w, cdp_ckpt_tags[i], 4);
		put_u32(w, cdp_ckpt_tag_flags[i]);
		put_u64(w, len[i]);
		start = w->pos;
		emitters[i](w, ck);
		if (!w->err && w->pos - start != len[i])
			w->err = CDP_EINVAL;
	}
	le32(b, w->crc);
	put(w, b, 4);
	if (!w->err && w->pos != total)
		w->err = CDP_EINVAL;
	return w->err;
}
/* ---- what a valid checkpoint holds ------------------------------------------- */

/* 1 to max printable ASCII characters, no space */
static int printable_ok(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n == 0 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

int cdp_ckpt_name_ok(const char *s)
{
	return printable_ok(s, CDP_CKPT_NAME_MAX);
}

int cdp_ckpt_norm_band_ok(const char *s)
{
	size_t n = strnlen(s, CDP_CKPT_NORM_BAND_MAX + 1);

	if (n == 0 || n > CDP_CKPT_NORM_BAND_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e || s[i] == ',')
			return 0;
	return 1;
}

/* TASK: 0, or -1 */
static int task_check(const cdp_ckpt *ck)
{
	if (!ck->task)
		return ck->ntargets == 0 ? 0 : -1;
	if (ck->task != CDP_CKPT_TASK_REGRESSION || ck->ntargets < 1 ||
	    ck->ntargets > CDP_CKPT_MAX_TARGETS || !ck->target_mean || !ck->target_std)
		return -1;
	for (int i = 0; i < ck->ntargets; i++)
		if (!isfinite(ck->target_mean[i]) || !isfinite(ck->target_std[i]) ||
		    !(ck->target_std[i] > 0))
			return -1;
	return 0;
}

/* NORM, FROM and TASK: 0, or -1 */
static int init_check(const cdp_ckpt *ck)
{
	if (task_check(ck) != 0)
		return -1;
	if (ck->norm_kind != 0) {
		if (ck->norm_kind < CDP_CKPT_NORM_NONE || ck->norm_kind > CDP_CKPT_NORM_GIVEN ||
		    !isfinite(ck->norm_scale) || !(ck->norm_scale >= 0) || !ck->norm_mean ||
		    !ck->norm_std || (ck->nnorm_bands != 0 && ck->nnorm_bands != ck->in_c) ||
		    (ck->nnorm_bands && !ck->norm_bands))
			return -1;
		for (int i = 0; i < ck->in_c; i++)
			if (!isfinite(ck->norm_mean[i]) || !isfinite(ck->norm_std[i]) ||
			    !(ck->norm_std[i] > 0))
				return -1;
		for (int i = 0; i < ck->nnorm_bands; i++)
			if (!ck->norm_bands[i] || !cdp_ckpt_norm_band_ok(ck->norm_bands[i]))
				return -1;
	}
	if (ck->nfrom < 0 || ck->nfrom > CDP_CKPT_FROM_MAX || (ck->nfrom && !ck->from))
		return -1;
	for (int i = 0; i < ck->nfrom; i++) {
		const cdp_ckpt_from *f = &ck->from[i];
		if ((f->kind != CDP_CKPT_FROM_CKPT && f->kind != CDP_CKPT_FROM_TORCH) || !f->name ||
		    !f->name[0] || strlen(f->name) > CDP_CKPT_FROM_NAME_MAX)
			return -1;
	}
	return 0;
}

/* One rule for the pool's class_names (cdp-lmdbpack checks them when it
 * packs) and the checkpoint's: lib's cdp_class_name_ok. */
int cdp_ckpt_class_name_ok(const char *s, char *why, size_t cap)
{
	return cdp_class_name_ok(s, why, cap);
}

/* Names k = 0..n-1: the first that is not cdp_ckpt_class_name_ok, or -1. */
static int bad_class_name(const cdp_ckpt *ck, char *why, size_t cap)
{
	for (int k = 0; ck->class_names && k < ck->nclass_names; k++)
		if (!cdp_ckpt_class_name_ok(ck->class_names[k], why, cap))
			return k;
	return -1;
}

static int tensors_ok(const cdp_ckpt_tensor *t, int n, uint64_t *total)
{
	*total = 0;
	if (n < 0 || (n > 0 && !t))
		return 0;
	for (int i = 0; i < n; i++) {
		size_t numel = 1;
		if (!cdp_ckpt_name_ok(t[i].name) || t[i].ndim < 1 || t[i].ndim > CDP_CKPT_MAX_DIMS)
			return 0;
		for (int d = 0; d < t[i].ndim; d++)
			if (t[i].dims[d] < 1 || cdp_mul_size(numel, (size_t)t[i].dims[d], &numel))
				return 0;
		if (numel != t[i].numel || !t[i].data || numel > SIZE_MAX / sizeof(float))
			return 0;
		*total += numel;
	}
	return 1;
}

static int uuid_ok(const char *u)
{
	if (u[0] == '\0')
		return 1;
	for (int i = 0; i < 32; i++)
		if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f')))
			return 0;
	return u[32] == '\0';
}

uint64_t cdp_ckpt_global_batch(const cdp_ckpt *ck)
{
	if (ck->batch < 1 || ck->batch_ranks < 1 || ck->batch_accumulate < 1)
		return 0;
	return (uint64_t)ck->batch * (uint64_t)ck->batch_ranks * (uint64_t)ck->batch_accumulate;
}

/* Each rule of cdp_ckpt_check: false, it says which part of the file
 * broke it into why (a reader's message after the file's name). */
#define RULE(ok, ...) do { \
	if (!(ok)) { \
		if (cap) \
			snprintf(why, cap, __VA_ARGS__); \
		return -1; \
	} \
} while (0)

/* OPTM's ten floats in the file's order (cdp-checkpoint(5)) */
static const char *const optim_float_names[10] = {
	"lr", "momentum", "weight decay", "beta1", "beta2", "eps", "gamma", "minimum lr",
	"warm-up factor", "clipping norm"
};

static int check_why(const cdp_ckpt *ck, char *why, size_t cap)
{
	uint64_t ptotal, btotal;
	char w[200];

	RULE(ck->in_c >= 1 && ck->in_h >= 1 && ck->in_w >= 1 && ck->in_c <= (1 << 20) &&
	     ck->in_h <= (1 << 20) && ck->in_w <= (1 << 20),
	     "META's input shape %dx%dx%d (channels, height, width: each 1 to 2^20)", ck->in_c,
	     ck->in_h, ck->in_w);
	/* the limits a user's --model can exceed, in the words cdp-train
	 * gives when its checkpoint cannot keep them */
	RULE(ck->cfg_text && ck->cfg_text[0], "the model cfg text (CFG) is empty");
	RULE(strlen(ck->cfg_text) <= CDP_CKPT_CFG_MAX, "the model cfg text has %zu bytes, at "
	     "most %d are kept", strlen(ck->cfg_text), CDP_CKPT_CFG_MAX);
	RULE(ck->noverrides >= 0 && ck->noverrides <= CDP_CKPT_MAX_OVERRIDES &&
	     (ck->noverrides == 0 || ck->overrides), "%d model overrides, at most %d are kept",
	     ck->noverrides, CDP_CKPT_MAX_OVERRIDES);
	for (int i = 0; i < ck->noverrides; i++) {
		RULE(ck->overrides[i] && ck->overrides[i][0], "model override %d (CFG) is empty",
		     i + 1);
		RULE(strlen(ck->overrides[i]) <= CDP_CKPT_OVERRIDE_MAX, "model override %d has %zu "
		     "bytes, at most %d are kept", i + 1, strlen(ck->overrides[i]),
		     CDP_CKPT_OVERRIDE_MAX);
	}
	RULE(tensors_ok(ck->params, ck->nparams, &ptotal),
	     "a parameter tensor (PARM) has a bad name or a shape other than its values");
	RULE(tensors_ok(ck->buffers, ck->nbuffers, &btotal),
	     "a buffer tensor (BUFS) has a bad name or a shape other than its values");
	if (ck->optim.type != 0) {
		const cdp_optim_cfg *o = &ck->optim;
		const float f[10] = { o->lr, o->momentum, o->weight_decay, o->beta1, o->beta2,
		                      o->eps, o->gamma, o->min_lr, o->warmup_factor, o->clip_norm };
		int nb = cdp_optim_nblocks(o);
		/* every float finite, named before the ranges (an infinite
		 * clipping norm is >= 0, and would clip nothing) */
		for (int i = 0; i < 10; i++)
			RULE(isfinite(f[i]), "the optimizer's settings (OPTM): %s is %g (every setting "
			     "finite)", optim_float_names[i], f[i]);
		RULE(cdp_optim_cfg_check(o, w, sizeof(w)) == 0,
		     "the optimizer's settings (OPTM): %s", w);
		/* each of META's steps applies at most one update (accumulated
		 * micro-batches make one; a step the loss scaler or --nan-policy
		 * skip skipped, none), so the updates are at most the steps:
		 * more would resume AdamW's bias correction elsewhere */
		RULE(ck->optim_step >= 0 && (uint64_t)ck->optim_step <= ck->step,
		     "the optimizer's steps taken (OPTM) are %ld, 0 to META's step %" PRIu64
		     " expected", ck->optim_step, ck->step);
		RULE((nb < 1 || (ck->optim_n == ptotal && ck->optim_v)) && (nb != 2 || ck->optim_m),
		     "the optimizer's state (OPTM) holds %zu values a block for %" PRIu64
		     " parameters", ck->optim_n, ptotal);
	}
	RULE(ck->nrng >= 0 && ck->nrng <= CDP_CKPT_MAX_RNG && (ck->nrng == 0 || ck->rng),
	     "%d random generators (RNG), 0 to %d", ck->nrng, CDP_CKPT_MAX_RNG);
	for (int i = 0; i < ck->nrng; i++) {
		const uint64_t *r = ck->rng[i].s;
		RULE(cdp_ckpt_name_ok(ck->rng[i].name) && (r[0] | r[1] | r[2] | r[3]) != 0,
		     "random generator %d (RNG) has a bad name or an all-zero state", i + 1);
		for (int j = 0; j < i; j++)
			RULE(strcmp(ck->rng[i].name, ck->rng[j].name) != 0,
			     "random generator '%s' (RNG) is there twice", ck->rng[i].name);
	}
	RULE(ck->nbands >= 0 && ck->nbands <= CDP_CKPT_MAX_BANDS && (ck->nbands == 0 || ck->bands) &&
	     (ck->nbands == 0 || ck->nbands == ck->in_c),
	     "DATA names %d bands for %d input channels", ck->nbands, ck->in_c);
	RULE(!ck->mean == !ck->std && (!ck->mean || ck->nbands > 0),
	     "DATA's standardization has means and deviations of other bands than it names");
	RULE(ck->dtype == 0 || cdp_dtype_name(ck->dtype), "DATA's data type %d is unknown",
	     ck->dtype);
	for (int i = 0; i < ck->nbands; i++) {
		RULE(ck->bands[i] >= 1, "DATA's band %d is numbered %d (from 1)", i + 1, ck->bands[i]);
		/* std 0: a constant band, centred and not scaled (cdp-checkpoint(5)) */
		RULE(!ck->mean || (isfinite(ck->mean[i]) && isfinite(ck->std[i]) && ck->std[i] >= 0),
		     "band %d's standardization is mean %g, standard deviation %g (finite, and a "
		     "deviation not negative, expected)", ck->bands[i], ck->mean[i], ck->std[i]);
	}
	RULE(cdp_ckpt_ranks_check(ck, 0) == 0, "the per-rank state (RANK) does not fit the "
	     "parameters, buffers or optimizer it holds state of");
	/* version 5's origin of the statistics and georeference */
	RULE(ck->std_from >= CDP_CKPT_STD_UNKNOWN && ck->std_from <= CDP_CKPT_STD_INIT &&
	     ck->nstd_sources >= 0 && ck->nstd_sources <= CDP_CKPT_MAX_SOURCES &&
	     (ck->nstd_sources == 0 || ck->std_sources) &&
	     (ck->std_from == CDP_CKPT_STD_SOURCES) == (ck->nstd_sources > 0) &&
	     (ck->std_from == CDP_CKPT_STD_UNKNOWN || ck->mean),
	     "DATA's origin of the standardization (%d, with %d sources) does not fit it",
	     ck->std_from, ck->nstd_sources);
	for (int i = 1; i < ck->nstd_sources; i++)
		RULE(ck->std_sources[i] > ck->std_sources[i - 1],
		     "DATA's standardization sources are not in increasing order");
	RULE(!ck->crs || strlen(ck->crs) <= CDP_CKPT_CRS_MAX, "DATA's CRS is longer than %d bytes",
	     CDP_CKPT_CRS_MAX);
	RULE(isfinite(ck->res_x) && isfinite(ck->res_y) && ck->res_x >= 0 && ck->res_y >= 0,
	     "DATA's pixel size %g x %g (finite, not negative)", ck->res_x, ck->res_y);
	/* version 6's class names */
	RULE(ck->nclass_names >= 0 && ck->nclass_names <= CDP_CKPT_MAX_CLASSES &&
	     (ck->nclass_names == 0 || ck->class_names), "%d class names, at most %d are kept",
	     ck->nclass_names, CDP_CKPT_MAX_CLASSES);
	{
		int k = bad_class_name(ck, w, sizeof w);
		RULE(k < 0, "class %d's name %s", k, w);
	}
	/* SUMS: finite sums of no more steps than the run made */
	RULE(!ck->has_sums || (isfinite(ck->sum_epoch_loss) && isfinite(ck->sum_log_loss) &&
	                       ck->sum_epoch_steps <= ck->step && ck->sum_log_steps <= ck->step),
	     "the running sums (SUMS) are not finite, or count more steps than the %" PRIu64
	     " taken", ck->step);
	/* PLAN: a run at least as long as its steps, a key list of keys */
	RULE(!ck->has_plan || (ck->plan_total >= 1 && ck->plan_total >= ck->step &&
	                       ck->keys_count >= 1 && uuid_ok(ck->keys_uuid)),
	     "the run's plan (PLAN): last step %" PRIu64 " (at least the %" PRIu64 " taken), "
	     "%" PRIu64 " keys, uuid '%.32s'", ck->plan_total, ck->step, ck->keys_count,
	     ck->keys_uuid);
	/* BEST: a known metric's finite value at a step already taken */
	RULE(!ck->has_best || (cdp_ckpt_best_name(ck->best_metric) &&
	                          isfinite(ck->best_value) && ck->best_step <= ck->step),
	     "the best validation (BEST): metric %d, value %g at step %" PRIu64 " (a known "
	     "metric, a finite value, at most the %" PRIu64 " steps taken)", ck->best_metric,
	     ck->best_value, ck->best_step, ck->step);
	/* RUN: known settings, counts within the steps taken, a validation
	 * list of keys or none */
	RULE(!ck->has_run || ((ck->run_pad_last == 0 || ck->run_pad_last == 1) &&
	                      (ck->run_nan_policy == CDP_CKPT_NAN_STOP ||
	                       ck->run_nan_policy == CDP_CKPT_NAN_SKIP)),
	     "the run's settings (RUN): --pad-last %d, --nan-policy %d (0 or 1, and 1 stop or "
	     "2 skip)", ck->run_pad_last, ck->run_nan_policy);
	RULE(!ck->has_run || (ck->run_nan_row <= ck->run_nan_skipped &&
	                      ck->run_nan_skipped <= ck->step &&
	                      (ck->run_nan_row == 0 || ck->run_nan_policy == CDP_CKPT_NAN_SKIP)),
	     "the run's non-finite steps (RUN): %" PRIu64 " in a row, %" PRIu64 " skipped (in a "
	     "row at most those skipped, at most the %" PRIu64 " steps taken, none in a row under "
	     "--nan-policy stop)", ck->run_nan_row, ck->run_nan_skipped, ck->step);
	RULE(!ck->has_run || (ck->run_threads >= 0 && ck->run_threads <= CDP_CKPT_RUN_THREADS_MAX &&
	                      printable_ok(ck->run_kernels, CDP_CKPT_RUN_KERNELS_MAX)),
	     "the run's compute (RUN): %d threads (0 to %d), kernels '%.*s' (1 to %d printable "
	     "characters)", ck->run_threads, CDP_CKPT_RUN_THREADS_MAX, CDP_CKPT_RUN_KERNELS_MAX,
	     ck->run_kernels, CDP_CKPT_RUN_KERNELS_MAX);
	RULE(!ck->has_run || (ck->val_count == 0 ? !ck->val_uuid[0] && !ck->val_seed && !ck->val_crc
	                                         : ck->val_uuid[0] && uuid_ok(ck->val_uuid)),
	     "the run's validation list (RUN): %" PRIu64 " keys, uuid '%.32s' (none: 0 keys, no "
	     "uuid, seed and crc32 0; else a uuid of 32 lowercase hex digits)", ck->val_count,
	     ck->val_uuid);
	/* LIVE: one float for each of PARM's */
	RULE(!ck->live || ck->nlive == ptotal, "the live parameters (LIVE) hold %zu values for "
	     "%" PRIu64 " parameters", ck->nlive, ptotal);
	RULE(init_check(ck) == 0, "the input normalization (NORM), the initial weights' origin "
	     "(FROM) or the task (TASK) is not valid");
	/* initial weights: the tensors and the model, nothing of a run */
	RULE(!ck->initial || (ck->optim.type == 0 && !ck->step && !ck->epoch && !ck->data_pos &&
	                      !ck->nrng && !ck->nranks && !ck->has_sums && !ck->has_plan &&
	                      !ck->live && !ck->has_best && !ck->has_run),
	     "initial weights (META's kind) with the state of a run");
	/* the global batch: unknown, or three counts whose product fits */
	RULE((ck->batch | ck->batch_ranks | ck->batch_accumulate) == 0 ||
	     (ck->batch >= 1 && ck->batch_ranks >= 1 && ck->batch_accumulate >= 1 &&
	      ck->batch_ranks <= CDP_CKPT_MAX_RANKS &&
	      cdp_ckpt_global_batch(ck) / (uint64_t)ck->batch_ranks /
	          (uint64_t)ck->batch_accumulate == (uint64_t)ck->batch),
	     "META's global batch %d x %d ranks x %d accumulated", ck->batch, ck->batch_ranks,
	     ck->batch_accumulate);
	RULE(uuid_ok(ck->pool_uuid), "META's pool uuid is not 32 lowercase hex digits");
	return 0;
}

int cdp_ckpt_check(const cdp_ckpt *ck)
{
	return check_why(ck, NULL, 0);
}

/* The first non-finite float of x[n] into why as "WHAT holds NaN at element
 * I": -1, or 0 when all are finite. */
static void say_nonfinite(float x, size_t i, const char *what, char *why, size_t cap)
{
	snprintf(why, cap, "%s holds %s at element %zu", what,
	         isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf", i);
}

static int finite_or_say(const float *x, size_t n, const char *what, char *why, size_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i])) {
			say_nonfinite(x[i], i, what, why, cap);
			return -1;
		}
	return 0;
}

static int tensors_finite(const cdp_ckpt_tensor *t, int n, const char *kind, char *why,
                          size_t cap)
{
	char what[CDP_CKPT_NAME_MAX + 32];

	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof what, "%s '%s'", kind, t[i].name);
		if (finite_or_say(t[i].data, t[i].numel, what, why, cap) != 0)
			return -1;
	}
	return 0;
}

/* Every float of a structurally valid checkpoint: a NaN or infinite weight
 * would predict a constant map and train on a NaN loss (issue 14). */
static int all_finite(const cdp_ckpt *ck, char *why, size_t cap)
{
	size_t stride = cdp_ckpt_rank_stride(ck);
	char what[64];

	if (tensors_finite(ck->params, ck->nparams, "parameter tensor", why, cap) != 0 ||
	    tensors_finite(ck->buffers, ck->nbuffers, "buffer tensor", why, cap) != 0)
		return -1;
	if (ck->optim.type != 0 && ck->optim_m &&
	    finite_or_say(ck->optim_m, ck->optim_n, "the optimizer's first moment", why, cap) != 0)
		return -1;
	if (ck->optim.type != 0 && ck->optim_v &&
	    finite_or_say(ck->optim_v, ck->optim_n,
	                  ck->optim_m ? "the optimizer's second moment" : "the optimizer's momentum",
	                  why, cap) != 0)
		return -1;
	if (ck->live && finite_or_say(ck->live, ck->nlive, "the chunk of live parameters (LIVE)",
	                              why, cap) != 0)
		return -1;
	for (int r = 0; r < ck->nranks && ck->rank_data && stride != SIZE_MAX; r++) {
		const float *base = ck->rank_loaded == -1 ? ck->rank_data + (size_t)r * stride :
		                    ck->rank_loaded == r ? ck->rank_data : NULL;
		snprintf(what, sizeof what, "rank %d's state", r);
		if (base && finite_or_say(base, stride, what, why, cap) != 0)
			return -1;
	}
	/* a rank not held, read for this only (checkpoint_rank.c) */
	if (ck->rank_bad > 0) {
		snprintf(what, sizeof what, "rank %d's state", ck->rank_bad - 1);
		say_nonfinite(ck->rank_bad_value, ck->rank_bad_at, what, why, cap);
		return -1;
	}
	return 0;
}

int cdp_ckpt_validate(const cdp_ckpt *ck, char *why, size_t cap)
{
	if (cap)
		why[0] = '\0';
	if (check_why(ck, why, cap) != 0)
		return -1;
	return all_finite(ck, why, cap);
}

/* What a writer accepts: a valid checkpoint, every float finite, holding
 * every rank's state. */
static int writable(const cdp_ckpt *ck)
{
	char why[8];

	return cdp_ckpt_validate(ck, why, sizeof why) == 0 && cdp_ckpt_ranks_check(ck, 1) == 0;
}
int cdp_ckpt_encode(const cdp_ckpt *ck, unsigned char **buf, size_t *len)
{
	size_t lens[NCHUNKS_MAX], total;
	wr w = { 0 };
	int rc;

	*buf = NULL;
	*len = 0;
	if (!writable(ck))
		return CDP_EINVAL;
	total = encoded_size(ck, lens);
	w.mem = malloc(total);
	if (!w.mem)
		return CDP_ENOMEM;
	w.cap = total;
	w.crc = (uint32_t)crc32(0L, Z_NULL, 0);
	rc = emit_all(&w, ck, lens, total);
	if (rc != CDP_OK) {
		free(w.mem);
		return rc;
	}
	*buf = w.mem;
	*len = total;
	return CDP_OK;
}
/* ---- files ------------------------------------------------------------------- */

int cdp_ckpt_write(const char *path, const cdp_ckpt *ck)
{
	size_t lens[NCHUNKS_MAX], total;
	wr w = { 0 };
	cdp_out o;
	int fd, rc;

	if (!writable(ck))
		return CDP_EINVAL;
	total = encoded_size(ck, lens);
	/* the output policy's temporary beside the target, fsynced with its
	 * folder on commit; a FIFO or device at path is refused, and of the
	 * files the policy keeps only a checkpoint is replaced (CDP_OUT_CKPT) */
	if ((rc = cdp_out_open(&o, path, CDP_OUT_SEEK | CDP_OUT_SYNC | CDP_OUT_CKPT, 0666, NULL,
	                       0)) != CDP_OK)
		return rc;
	if ((fd = dup(o.fd)) < 0 || !(w.f = fdopen(fd, "wb"))) {
		rc = errno;
		if (fd >= 0)
			close(fd);
		cdp_out_abort(&o);
		return rc;
	}
	w.crc = (uint32_t)crc32(0L, Z_NULL, 0);
	rc = emit_all(&w, ck, lens, total);
	if (rc == CDP_OK && fflush(w.f) != 0)
		rc = errno > 0 ? errno : EIO;
	if (fclose(w.f) != 0 && rc == CDP_OK)
		rc = errno > 0 ? errno : EIO;
	if (rc != CDP_OK) {
		cdp_out_abort(&o);
		return rc;
	}
	return cdp_out_commit(&o, NULL, 0);
}
void cdp_ckpt_free(cdp_ckpt *ck)
{
	if (!ck)
		return;
	free(ck->cfg_text);
	for (int i = 0; ck->overrides && i < ck->noverrides; i++)
		free(ck->overrides[i]);
	free(ck->overrides);
	for (int i = 0; ck->params && i < ck->nparams; i++)
		free(ck->params[i].data);
	free(ck->params);
	for (int i = 0; ck->buffers && i < ck->nbuffers; i++)
		free(ck->buffers[i].data);
	free(ck->buffers);
	free(ck->optim_m);
	free(ck->optim_v);
	free(ck->rng);
	free(ck->bands);
	free(ck->mean);
	free(ck->std);
	free(ck->std_sources);
	free(ck->crs);
	for (int i = 0; ck->class_names && i < ck->nclass_names; i++)
		free(ck->class_names[i]);
	free(ck->class_names);
	free(ck->rank_optim_step);
	free(ck->rank_data);
	free(ck->live);
	free(ck->norm_mean);            /* norm_std shares its allocation */
	for (int i = 0; ck->norm_bands && i < ck->nnorm_bands; i++)
		free(ck->norm_bands[i]);
	free(ck->norm_bands);
	for (int i = 0; ck->from && i < ck->nfrom; i++)
		free(ck->from[i].name);
	free(ck->from);
	free(ck->target_mean);          /* target_std shares its allocation */
	memset(ck, 0, sizeof(*ck));
}
