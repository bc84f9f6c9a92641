/* checkpoint_read.c: reading and validating checkpoints (checkpoint.h,
 * man/cdp-checkpoint.5).
 *
 * The reader checks the fixed header against the file's real length before
 * it allocates the file's bytes, the CRC before it parses anything, and
 * then every count against the bytes left in its chunk before allocating
 * for it; a count that cannot fit is a format error, never a large
 * allocation. Values are then checked as the writer checks them.
 */
#include "checkpoint_int.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_num.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- reading ------------------------------------------------------------------ */

/* A cursor over one chunk: running past its end is a format error (the
 * file's length was already checked against the header). */
typedef struct rd {
	const unsigned char *p, *end;
	int err;
	uint32_t version;                   /* the file's format version */
} rd;

static int need(rd *r, size_t n)
{
	if (r->err)
		return 0;
	if ((size_t)(r->end - r->p) < n) {
		r->err = CDP_EFORMAT;
		return 0;
	}
	return 1;
}

static void bad(rd *r, int code)
{
	if (!r->err)
		r->err = code;
}

static uint32_t get_u32(rd *r)
{
	uint32_t v;

	if (!need(r, 4))
		return 0;
	v = rd32(r->p);
	r->p += 4;
	return v;
}

static uint64_t get_u64(rd *r)
{
	uint64_t v;

	if (!need(r, 8))
		return 0;
	v = rd64(r->p);
	r->p += 8;
	return v;
}

static float get_f32(rd *r)
{
	uint32_t u = get_u32(r);
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static double get_f64(rd *r)
{
	uint64_t u = get_u64(r);
	double d;

	memcpy(&d, &u, 8);
	return d;
}

static void get_f32s(rd *r, float *x, size_t n)
{
	if (!need(r, n * sizeof(float)))
		return;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(x, r->p, n * sizeof(float));
	r->p += n * sizeof(float);
#else
	for (size_t i = 0; i < n; i++)
		x[i] = get_f32(r);
#endif
}

/* A u32-length string of 1..max bytes without NUL; malloc'ed when out is
 * NULL (returned), else copied into out[max + 1]. */
static char *get_str(rd *r, size_t max, char *out)
{
	uint32_t n = get_u32(r);
	char *s;

	if (r->err)
		return NULL;
	if (n == 0 || n > max || !need(r, n) || memchr(r->p, '\0', n)) {
		bad(r, CDP_EFORMAT);
		return NULL;
	}
	s = out ? out : malloc((size_t)n + 1);
	if (!s) {
		bad(r, CDP_ENOMEM);
		return NULL;
	}
	memcpy(s, r->p, n);
	s[n] = '\0';
	r->p += n;
	return s;
}

static void parse_meta(rd *r, cdp_ckpt *ck)
{
	uint32_t c = get_u32(r), h = get_u32(r), w = get_u32(r);

	if (get_u32(r) != 0 || c > (1u << 20) || h > (1u << 20) || w > (1u << 20))
		bad(r, CDP_EFORMAT);
	ck->in_c = (int)c;
	ck->in_h = (int)h;
	ck->in_w = (int)w;
	ck->step = get_u64(r);
	ck->epoch = get_u64(r);
	ck->data_pos = get_u64(r);
	ck->seed = get_u64(r);
	if (!need(r, 32))
		return;
	/* all zero (no pool) or 32 characters: nothing in between */
	if (r->p[0] == 0) {
		for (int i = 0; i < 32; i++)
			if (r->p[i] != 0)
				bad(r, CDP_EFORMAT);
	} else {
		memcpy(ck->pool_uuid, r->p, 32);
	}
	r->p += 32;
	if (r->version >= 3) {     /* the loss scaler */
		ck->loss_scale = get_f64(r);
		ck->scale_good = get_u64(r);
		ck->scale_skipped = get_u64(r);
		if (!(ck->loss_scale >= 0 && ck->loss_scale <= 1e300))
			bad(r, CDP_EFORMAT);
	}
	if (r->version >= 4) {     /* the global batch; checked by cdp_ckpt_check */
		uint32_t b = get_u32(r), j = get_u32(r), a = get_u32(r), kind = get_u32(r);
		/* the kind: version 7's, 0 before */
		if (kind > (r->version >= 7 ? CDP_CKPT_KIND_INITIAL : 0) || b > INT_MAX ||
		    j > INT_MAX || a > INT_MAX)
			bad(r, CDP_EFORMAT);
		ck->initial = kind == CDP_CKPT_KIND_INITIAL;
		ck->batch = (int)b;
		ck->batch_ranks = (int)j;
		ck->batch_accumulate = (int)a;
	}
}

static void parse_cfg(rd *r, cdp_ckpt *ck)
{
	uint32_t n;

	ck->cfg_text = get_str(r, CDP_CKPT_CFG_MAX, NULL);
	n = get_u32(r);
	if (r->err)
		return;
	/* an override takes at least 5 bytes */
	if (n > CDP_CKPT_MAX_OVERRIDES || n > (size_t)(r->end - r->p) / 5) {
		bad(r, CDP_EFORMAT);
		return;
	}
	ck->overrides = calloc((size_t)n + 1, sizeof(char *));
	if (!ck->overrides) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->noverrides = (int)n;
	for (uint32_t i = 0; i < n && !r->err; i++)
		ck->overrides[i] = get_str(r, CDP_CKPT_OVERRIDE_MAX, NULL);
}

static void parse_tensors(rd *r, cdp_ckpt_tensor **out, int *count)
{
	uint32_t n = get_u32(r);
	uint64_t total, sum = 0;
	cdp_ckpt_tensor *t;

	if (get_u32(r) != 0)
		bad(r, CDP_EFORMAT);
	total = get_u64(r);
	if (r->err)
		return;
	/* a tensor takes at least 13 bytes: name length and 1 byte, ndim, a dim */
	if (n > INT_MAX || n > (size_t)(r->end - r->p) / 13) {
		bad(r, CDP_EFORMAT);
		return;
	}
	t = calloc((size_t)n + 1, sizeof(*t));
	if (!t) {
		bad(r, CDP_ENOMEM);
		return;
	}
	*out = t;
	*count = (int)n;
	for (uint32_t i = 0; i < n && !r->err; i++) {
		uint32_t nd;
		size_t numel = 1, bytes;
		get_str(r, CDP_CKPT_NAME_MAX, t[i].name);
		nd = get_u32(r);
		if (nd < 1 || nd > CDP_CKPT_MAX_DIMS)
			bad(r, CDP_EFORMAT);
		for (uint32_t d = 0; d < nd && !r->err; d++) {
			uint32_t v = get_u32(r);
			if (v < 1 || v > INT_MAX || cdp_mul_size(numel, v, &numel) != 0)
				bad(r, CDP_EFORMAT);
			t[i].dims[d] = (int)v;
		}
		if (r->err)
			return;
		t[i].ndim = (int)nd;
		t[i].numel = numel;
		if (cdp_mul_size(numel, sizeof(float), &bytes) != 0 || !need(r, bytes)) {
			bad(r, CDP_EFORMAT);
			return;
		}
		t[i].data = malloc(bytes);
		if (!t[i].data) {
			bad(r, CDP_ENOMEM);
			return;
		}
		get_f32s(r, t[i].data, numel);
		sum += numel;
	}
	if (!r->err && sum != total)
		bad(r, CDP_EFORMAT);
}

static void parse_params(rd *r, cdp_ckpt *ck)
{
	parse_tensors(r, &ck->params, &ck->nparams);
}

static void parse_buffers(rd *r, cdp_ckpt *ck)
{
	parse_tensors(r, &ck->buffers, &ck->nbuffers);
}

static void parse_optim(rd *r, cdp_ckpt *ck)
{
	cdp_optim_cfg *c = &ck->optim;
	float *f[10] = { &c->lr, &c->momentum, &c->weight_decay, &c->beta1, &c->beta2, &c->eps,
	                 &c->gamma, &c->min_lr, &c->warmup_factor, &c->clip_norm };
	uint32_t u[4], nb;
	uint64_t n;
	size_t bytes;

	for (int i = 0; i < 4; i++)
		u[i] = get_u32(r);
	for (int i = 0; i < 10; i++)
		*f[i] = get_f32(r);
	c->step_size = (long)(int64_t)get_u64(r);
	c->total_steps = (long)(int64_t)get_u64(r);
	c->warmup = (long)(int64_t)get_u64(r);
	ck->optim_step = (long)(int64_t)get_u64(r);
	nb = get_u32(r);
	if (get_u32(r) != 0)
		bad(r, CDP_EFORMAT);
	n = get_u64(r);
	if (r->err)
		return;
	if (u[0] > CDP_OPT_ADAMW || u[1] > CDP_LR_COSINE || u[2] > 1 || u[3] > INT_MAX) {
		bad(r, CDP_EFORMAT);
		return;
	}
	c->type = (int)u[0];
	c->policy = (int)u[1];
	c->nesterov = (int)u[2];
	c->accumulate = (int)u[3];
	if ((int)nb != (c->type ? cdp_optim_nblocks(c) : 0) || (nb == 0 && n != 0) ||
	    n > SIZE_MAX || cdp_mul_size((size_t)n, sizeof(float) * (nb ? nb : 1), &bytes) != 0 ||
	    !need(r, nb ? bytes : 0)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	ck->optim_n = (size_t)n;
	if (nb == 0)
		return;
	bytes /= nb;
	ck->optim_v = malloc(bytes ? bytes : 1);
	if (nb == 2)
		ck->optim_m = malloc(bytes ? bytes : 1);
	if (!ck->optim_v || (nb == 2 && !ck->optim_m)) {
		bad(r, CDP_ENOMEM);
		return;
	}
	if (nb == 2)
		get_f32s(r, ck->optim_m, ck->optim_n);
	get_f32s(r, ck->optim_v, ck->optim_n);
}

static void parse_rng(rd *r, cdp_ckpt *ck)
{
	uint32_t n = get_u32(r);

	/* a stream takes at least 37 bytes */
	if (r->err || n > CDP_CKPT_MAX_RNG || n > (size_t)(r->end - r->p) / 37) {
		bad(r, CDP_EFORMAT);
		return;
	}
	ck->rng = calloc((size_t)n + 1, sizeof(*ck->rng));
	if (!ck->rng) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nrng = (int)n;
	for (uint32_t i = 0; i < n && !r->err; i++) {
		get_str(r, CDP_CKPT_NAME_MAX, ck->rng[i].name);
		for (int j = 0; j < 4; j++)
			ck->rng[i].s[j] = get_u64(r);
	}
}

/* DATA's version 5 tail: the statistics' origin, the sources, the CRS
 * (may be empty) and the pixel size; cdp_ckpt_check judges the values */
static void parse_origin(rd *r, cdp_ckpt *ck)
{
	uint32_t from = get_u32(r), n = get_u32(r), len;

	if (r->err)
		return;
	/* origin 3, the initial weights' normalization, from version 7 */
	if (from > (r->version >= 7 ? CDP_CKPT_STD_INIT : CDP_CKPT_STD_SOURCES) ||
	    n > CDP_CKPT_MAX_SOURCES || !need(r, (size_t)n * 4)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	ck->std_from = (int)from;
	if (n && !(ck->std_sources = malloc((size_t)n * sizeof *ck->std_sources))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nstd_sources = (int)n;
	for (uint32_t i = 0; i < n; i++)
		ck->std_sources[i] = get_u32(r);
	len = get_u32(r);
	if (r->err)
		return;
	if (len > CDP_CKPT_CRS_MAX || !need(r, len) || memchr(r->p, '\0', len)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (!(ck->crs = malloc((size_t)len + 1))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	memcpy(ck->crs, r->p, len);
	ck->crs[len] = '\0';
	r->p += len;
	ck->res_x = get_f64(r);
	ck->res_y = get_f64(r);
}

/* DATA's version 6 tail: the class names (cdp_ckpt_check judges each) */
static void parse_names(rd *r, cdp_ckpt *ck)
{
	uint32_t n = get_u32(r);

	/* a name takes at least 5 bytes */
	if (r->err || n > CDP_CKPT_MAX_CLASSES || n > (size_t)(r->end - r->p) / 5) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (n && !(ck->class_names = calloc((size_t)n, sizeof *ck->class_names))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nclass_names = (int)n;
	for (uint32_t i = 0; i < n && !r->err; i++)
		ck->class_names[i] = get_str(r, CDP_CKPT_CLASS_NAME_MAX, NULL);
}

static void parse_data(rd *r, cdp_ckpt *ck)
{
	uint32_t n = get_u32(r), ns = get_u32(r);

	if (r->err)
		return;
	if (n > CDP_CKPT_MAX_BANDS || (ns != 0 && ns != n) ||
	    !need(r, (size_t)n * 4 + (size_t)ns * 16)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	ck->bands = malloc((size_t)n * sizeof(int) + 1);
	if (ns) {
		ck->mean = malloc((size_t)ns * sizeof(double));
		ck->std = malloc((size_t)ns * sizeof(double));
	}
	if (!ck->bands || (ns && (!ck->mean || !ck->std))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nbands = (int)n;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = get_u32(r);
		ck->bands[i] = b > INT_MAX ? -1 : (int)b;
	}
	for (uint32_t i = 0; i < ns; i++)
		ck->mean[i] = get_f64(r);
	for (uint32_t i = 0; i < ns; i++)
		ck->std[i] = get_f64(r);
	/* version 1 has no data type: unknown */
	if (r->version >= 2) {
		uint32_t dt = get_u32(r);
		if (!r->err && (dt > INT_MAX || (dt != 0 && !cdp_dtype_name((int)dt))))
			bad(r, CDP_EFORMAT);
		ck->dtype = r->err ? 0 : (int)dt;
	}
	if (r->version >= 5)
		parse_origin(r, ck);
	if (r->version >= 6)
		parse_names(r, ck);
}

/* LIVE (version 7): its count is matched with PARM's by cdp_ckpt_check */
static void parse_live(rd *r, cdp_ckpt *ck)
{
	uint64_t n = get_u64(r);

	if (r->err)
		return;
	if (n == 0 || n > (uint64_t)(r->end - r->p) / sizeof(float)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (!(ck->live = malloc((size_t)n * sizeof(float)))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nlive = (size_t)n;
	get_f32s(r, ck->live, ck->nlive);
}

/* NORM (version 7): its count must be META's channels (read before it);
 * cdp_ckpt_check judges the values */
static void parse_norm(rd *r, cdp_ckpt *ck)
{
	uint32_t kind = get_u32(r), n = get_u32(r), nb;

	ck->norm_scale = get_f64(r);
	if (r->err)
		return;
	if (kind < CDP_CKPT_NORM_NONE || kind > CDP_CKPT_NORM_GIVEN || n != (uint32_t)ck->in_c ||
	    n < 1 || !need(r, (size_t)n * 16)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (!(ck->norm_mean = malloc(2 * (size_t)n * sizeof *ck->norm_mean))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->norm_kind = (int)kind;
	ck->norm_std = ck->norm_mean + n;
	for (uint32_t i = 0; i < 2 * n; i++)
		ck->norm_mean[i] = get_f64(r);
	nb = get_u32(r);
	/* a name takes at least 5 bytes */
	if (r->err || (nb != 0 && nb != n) || nb > (size_t)(r->end - r->p) / 5) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (nb && !(ck->norm_bands = calloc((size_t)nb, sizeof *ck->norm_bands))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nnorm_bands = (int)nb;
	for (uint32_t i = 0; i < nb && !r->err; i++)
		ck->norm_bands[i] = get_str(r, CDP_CKPT_NORM_BAND_MAX, NULL);
}

/* FROM (version 7): where the initial weights came from */
static void parse_from(rd *r, cdp_ckpt *ck)
{
	uint32_t n = get_u32(r);

	/* an entry takes at least 45 bytes */
	if (r->err || n < 1 || n > CDP_CKPT_FROM_MAX || n > (size_t)(r->end - r->p) / 45) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (!(ck->from = calloc((size_t)n, sizeof *ck->from))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->nfrom = (int)n;
	for (uint32_t i = 0; i < n && !r->err; i++) {
		uint32_t kind = get_u32(r);
		if (get_u32(r) != 0 || (kind != CDP_CKPT_FROM_CKPT && kind != CDP_CKPT_FROM_TORCH))
			bad(r, CDP_EFORMAT);
		ck->from[i].kind = (int)kind;
		ck->from[i].name = get_str(r, CDP_CKPT_FROM_NAME_MAX, NULL);
		if (need(r, 32)) {
			memcpy(ck->from[i].sha256, r->p, 32);
			r->p += 32;
		}
	}
}

typedef void (*parse_fn)(rd *, cdp_ckpt *);
static const parse_fn parsers[NCHUNKS] = {
	parse_meta, parse_cfg, parse_params, parse_buffers, parse_optim, parse_rng, parse_data
};

/* SUMS (version 7): the sums' values are judged by cdp_ckpt_check */
static void parse_sums(rd *r, cdp_ckpt *ck)
{
	ck->has_sums = 1;
	ck->sum_epoch_loss = get_f64(r);
	ck->sum_epoch_steps = get_u64(r);
	ck->sum_log_loss = get_f64(r);
	ck->sum_log_steps = get_u64(r);
}

/* A pointer file's uuid (PLAN, RUN): 32 bytes, all zero for none, ""
 * (as META's pool uuid); the digits are judged by cdp_ckpt_check */
static void get_uuid(rd *r, char uuid[33])
{
	memset(uuid, 0, 33);
	if (need(r, 32)) {
		memcpy(uuid, r->p, 32);
		r->p += 32;
	}
	if (!uuid[0] && memcmp(uuid, uuid + 1, 31) && !r->err)
		r->err = CDP_EFORMAT;
}

/* PLAN (version 7): the values are judged by cdp_ckpt_check */
static void parse_plan(rd *r, cdp_ckpt *ck)
{
	ck->has_plan = 1;
	ck->plan_total = get_u64(r);
	get_uuid(r, ck->keys_uuid);
	ck->keys_seed = get_u64(r);
	ck->keys_count = get_u64(r);
	ck->keys_crc = get_u32(r);
	if (get_u32(r) != 0 && !r->err)
		r->err = CDP_EFORMAT;
}

/* BEST (version 8): the values are judged by cdp_ckpt_check */
static void parse_best(rd *r, cdp_ckpt *ck)
{
	uint32_t metric = get_u32(r);

	if ((get_u32(r) != 0 || metric > INT_MAX) && !r->err)
		r->err = CDP_EFORMAT;
	ck->has_best = 1;
	ck->best_metric = (int)(metric & INT_MAX);
	ck->best_value = get_f64(r);
	ck->best_step = get_u64(r);
}

/* RUN (version 8): the layout's fields, the values judged by
 * cdp_ckpt_check; a later layout's additions after them are skipped */
static void parse_run(rd *r, cdp_ckpt *ck)
{
	uint32_t layout = get_u32(r), flags = get_u32(r), policy = get_u32(r);
	uint32_t threads = get_u32(r);
	const unsigned char *kern;

	ck->has_run = 1;
	if (layout < 1 || (layout == CDP_CKPT_RUN_LAYOUT && (flags & ~CDP_CKPT_RUN_PAD_LAST)) ||
	    policy > INT_MAX || threads > INT_MAX) {
		if (!r->err)
			r->err = CDP_EFORMAT;
		return;
	}
	ck->run_pad_last = (flags & CDP_CKPT_RUN_PAD_LAST) != 0;
	ck->run_nan_policy = (int)policy;
	ck->run_threads = (int)threads;
	ck->run_nan_row = get_u64(r);
	ck->run_nan_skipped = get_u64(r);
	/* the name, then NULs to the field's end */
	if (need(r, 16)) {
		kern = r->p;
		memcpy(ck->run_kernels, kern, CDP_CKPT_RUN_KERNELS_MAX);
		ck->run_kernels[CDP_CKPT_RUN_KERNELS_MAX] = '\0';
		for (size_t i = strlen(ck->run_kernels); i < 16; i++)
			if (kern[i] && !r->err)
				r->err = CDP_EFORMAT;
		r->p += 16;
	}
	get_uuid(r, ck->val_uuid);          /* zeros: no --val-keys */
	ck->val_seed = get_u64(r);
	ck->val_count = get_u64(r);
	ck->val_crc = get_u32(r);
	if (get_u32(r) != 0 && !r->err)
		r->err = CDP_EFORMAT;
	if (layout > CDP_CKPT_RUN_LAYOUT && !r->err)
		r->p = r->end;
}

/* The fixed header against the bytes available (have) and the true total
 * length (total): magic first, then version, then size. */
static int check_header(const unsigned char *b, size_t have, uint64_t total)
{
	uint64_t fs;

	if (memcmp(b, CDP_CKPT_MAGIC, have < 8 ? have : 8) != 0)
		return CDP_EMAGIC;
	if (have < 12)
		return CDP_ETRUNC;
	if (rd32(b + 8) < CDP_CKPT_VERSION_MIN || rd32(b + 8) > CDP_CKPT_VERSION)
		return CDP_EVERSION;
	if (have < HDR)
		return CDP_ETRUNC;
	fs = rd64(b + 16);
	if (fs < HDR + 4)
		return CDP_EFORMAT;
	if (fs > total)
		return CDP_ETRUNC;
	if (fs < total)
		return CDP_EFORMAT;
	return CDP_OK;
}

/* why the header is refused, for a message: a version this build does
 * not read (a later one: written by a newer cdpool), or by how much the
 * file's size and its header's size field differ; nothing when neither
 * (or the header is not there to say) */
static void header_why(const unsigned char *b, size_t have, uint64_t total, char *why,
                       size_t cap)
{
	uint64_t fs;
	uint32_t v;

	if (have < 12 || !cap || memcmp(b, CDP_CKPT_MAGIC, 8) != 0)
		return;
	v = rd32(b + 8);
	if (v < CDP_CKPT_VERSION_MIN || v > CDP_CKPT_VERSION) {
		snprintf(why, cap, "format version %" PRIu32 "; this build reads %d to %d%s", v,
		         CDP_CKPT_VERSION_MIN, CDP_CKPT_VERSION,
		         v > CDP_CKPT_VERSION ? ": written by a newer cdpool" : "");
		return;
	}
	if (have < HDR)
		return;
	fs = rd64(b + 16);
	if (fs < HDR + 4)
		snprintf(why, cap, "its size field says %" PRIu64 " bytes, fewer than a header and a "
		         "CRC", fs);
	else if (fs > total)
		snprintf(why, cap, "truncated: %" PRIu64 " bytes of the %" PRIu64 " its size field "
		         "gives", total, fs);
	else if (fs < total)
		snprintf(why, cap, "%" PRIu64 " extra bytes after the %" PRIu64 " its size field "
		         "gives", total - fs, fs);
}

/* TASK (version 7): the task and a regression's target standardization;
 * cdp_ckpt_check judges the values */
static void parse_task(rd *r, cdp_ckpt *ck)
{
	uint32_t task = get_u32(r), n = get_u32(r);

	if (r->err || task != CDP_CKPT_TASK_REGRESSION || n < 1 || n > CDP_CKPT_MAX_TARGETS ||
	    !need(r, (size_t)n * 16)) {
		bad(r, CDP_EFORMAT);
		return;
	}
	if (!(ck->target_mean = malloc(2 * (size_t)n * sizeof *ck->target_mean))) {
		bad(r, CDP_ENOMEM);
		return;
	}
	ck->task = (int)task;
	ck->ntargets = (int)n;
	ck->target_std = ck->target_mean + n;
	for (uint32_t i = 0; i < 2 * n; i++)
		ck->target_mean[i] = get_f64(r);
}

/* A chunk's tag for a message: printable ASCII as it is, any other byte
 * (and a backslash or quote) as \xNN; out holds 17 bytes */
static void tag_text(const unsigned char *t, char out[17])
{
	char *o = out;

	for (int j = 0; j < 4; j++)
		if (t[j] >= 0x20 && t[j] <= 0x7e && t[j] != '\\' && t[j] != '\'')
			*o++ = (char)t[j];
		else
			o += sprintf(o, "\\x%02x", t[j]);
	*o = '\0';
}

/* The flags of the chunk whose header is at h, of known tag index k (-1:
 * unknown), in a file of version v: CDP_OK (an unknown chunk then is
 * skippable), or the code with why saying what is wrong. Before version 8
 * the field is 0 and every chunk known; from it, a bit this build does
 * not know, or an unknown chunk it may not skip, is a newer cdpool's. */
static int chunk_flags(const unsigned char *h, uint32_t flags, int k, uint32_t v, char *why,
                       size_t cap)
{
	char t[17];

	tag_text(h, t);
	if (v < 8 && flags != 0) {
		snprintf(why, cap, "chunk '%s' has flags 0x%" PRIx32 " (0 in format version %" PRIu32
		         ")", t, flags, v);
		return CDP_EFORMAT;
	}
	if (v < 8 && k < 0) {
		snprintf(why, cap, "chunk '%s' is not one of format version %" PRIu32, t, v);
		return CDP_EFORMAT;
	}
	if (flags & ~CDP_CKPT_CHUNK_SKIP) {
		snprintf(why, cap, "chunk '%s' has flags 0x%" PRIx32 " that this build does not know: "
		         "written by a newer cdpool (format version %" PRIu32 ")", t, flags, v);
		return CDP_EVERSION;
	}
	if (k < 0 && !(flags & CDP_CKPT_CHUNK_SKIP)) {
		snprintf(why, cap, "chunk '%s' is not known to this build: written by a newer cdpool "
		         "(format version %" PRIu32 ")", t, v);
		return CDP_EVERSION;
	}
	if (k >= 0 && k < NCHUNKS && flags) {
		snprintf(why, cap, "chunk '%s' is marked skippable, which none of the seven fixed "
		         "chunks may be", t);
		return CDP_EFORMAT;
	}
	if (v >= 8 && k >= 0 && flags != cdp_ckpt_tag_flags[k]) {
		snprintf(why, cap, flags ? "chunk '%s' is marked skippable, which it never is" :
		         "chunk '%s' is not marked skippable, which it always is", t);
		return CDP_EFORMAT;
	}
	return CDP_OK;
}

/* keep: the rank whose per-rank state to hold, -1 all (checkpoint.h);
 * tag: the chunk at fault, or ""; why: what is wrong (cdp_ckpt_read_why) */
static int decode(const unsigned char *buf, size_t len, int keep, cdp_ckpt *ck, char tag[5],
                  char *why, size_t cap)
{
	uint32_t n;
	rd top;
	int rc;

	memset(ck, 0, sizeof(*ck));
	tag[0] = '\0';
	rc = check_header(buf, len, len);
	if (rc != CDP_OK) {
		header_why(buf, len, len, why, cap);
		return rc;
	}
	if (cdp_ckpt_crc((uint32_t)crc32(0L, Z_NULL, 0), buf, len - 4) != rd32(buf + len - 4))
		return CDP_ECRC;
	/* the 7 fixed chunks, then each optional one its version allows at
	 * most once, in their order; from version 8 also chunks this build
	 * does not know that say it may skip them, anywhere among those (a
	 * chunk header takes 16 bytes) */
	n = rd32(buf + 12);
	if (n < NCHUNKS || (rd32(buf + 8) < 8 && n > NCHUNKS_MAX) || n > (len - HDR - 4) / 16)
		return CDP_EFORMAT;
	top = (rd){ buf + HDR, buf + len - 4, 0, rd32(buf + 8) };
	for (uint32_t c = 0, i = 0; c < n; c++) {
		uint64_t plen;
		uint32_t flags;
		int k;
		rd sub;
		if (!need(&top, 16)) {
			rc = CDP_EFORMAT;
			goto fail;
		}
		flags = rd32(top.p + 4);
		for (k = NCHUNKS_MAX - 1; k >= 0 && memcmp(top.p, cdp_ckpt_tags[k], 4); k--)
			;
		if (c < NCHUNKS && k != (int)c) {
			rc = CDP_EFORMAT;
			goto fail;
		}
		if ((rc = chunk_flags(top.p, flags, k, top.version, why, cap)) != CDP_OK)
			goto fail;
		plen = rd64(top.p + 8);
		top.p += 16;
		if (plen > (uint64_t)(top.end - top.p)) {
			rc = CDP_EFORMAT;
			goto fail;
		}
		if (k < 0) {               /* unknown and skippable: chunk_flags said so */
			top.p += plen;
			continue;
		}
		/* i: the next known chunk's least index */
		if ((uint32_t)k < i || top.version < cdp_ckpt_tag_since[k]) {
			rc = CDP_EFORMAT;
			goto fail;
		}
		i = (uint32_t)k + 1;
		sub = (rd){ top.p, top.p + plen, 0, top.version };
		memcpy(tag, cdp_ckpt_tags[k], 5);
		if (k == CHUNK_RANK) {
			rc = cdp_ckpt_rank_parse(sub.p, (size_t)plen, keep, ck);
			if (rc != CDP_OK)
				goto fail;
			sub.p = sub.end;
		} else if (k == CHUNK_SUMS) {
			parse_sums(&sub, ck);
		} else if (k == CHUNK_LIVE) {
			parse_live(&sub, ck);
		} else if (k == CHUNK_NORM) {
			parse_norm(&sub, ck);
		} else if (k == CHUNK_FROM) {
			parse_from(&sub, ck);
		} else if (k == CHUNK_TASK) {
			parse_task(&sub, ck);
		} else if (k == CHUNK_PLAN) {
			parse_plan(&sub, ck);
		} else if (k == CHUNK_BEST) {
			parse_best(&sub, ck);
		} else if (k == CHUNK_RUN) {
			parse_run(&sub, ck);
		} else {
			parsers[k](&sub, ck);
		}
		if (sub.err || sub.p != sub.end) {
			rc = sub.err ? sub.err : CDP_EFORMAT;
			goto fail;
		}
		tag[0] = '\0';
		top.p += plen;
	}
	if (top.p != top.end) {
		rc = CDP_EFORMAT;
		goto fail;
	}
	/* the values, as a writer checks them, and every float finite */
	if (cdp_ckpt_validate(ck, why, cap) != 0) {
		rc = CDP_EFORMAT;
		goto fail;
	}
	return CDP_OK;
fail:
	cdp_ckpt_free(ck);
	return rc;
}

/* why for a failure without a reason of its own: the chunk and the code */
static void say(char *why, size_t cap, const char *tag, int rc)
{
	if (cap && why[0] == '\0')
		snprintf(why, cap, "%s%s%s%s", tag[0] ? "chunk '" : "", tag, tag[0] ? "': " : "",
		         cdp_strerror(rc));
}

int cdp_ckpt_decode_why(const unsigned char *buf, size_t len, int rank, cdp_ckpt *ck, char *why,
                        size_t cap)
{
	char tag[5];
	int rc;

	if (cap)
		why[0] = '\0';
	rc = decode(buf, len, rank < 0 ? -1 : rank, ck, tag, why, cap);
	if (rc != CDP_OK)
		say(why, cap, tag, rc);
	return rc;
}

int cdp_ckpt_decode(const unsigned char *buf, size_t len, cdp_ckpt *ck)
{
	char tag[5], why[8];

	return decode(buf, len, -1, ck, tag, why, sizeof why);
}

/* ---- files ------------------------------------------------------------------- */

/* Reads exactly n bytes at offset off; CDP_ETRUNC when the file ends first. */
static int read_at(int fd, unsigned char *b, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t got = pread(fd, b, n, off);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (got == 0)
			return CDP_ETRUNC;
		b += got;
		n -= (size_t)got;
		off += got;
	}
	return CDP_OK;
}

int cdp_ckpt_decode_rank(const unsigned char *buf, size_t len, int rank, cdp_ckpt *ck,
                         char tag[5])
{
	char why[8];

	return decode(buf, len, rank < 0 ? -1 : rank, ck, tag, why, sizeof why);
}

/* cdp_ckpt_load; a header refused is explained in why (cap bytes, 0: not
 * asked) by header_why, from the bytes read for the check */
static int load(const char *path, unsigned char **out, size_t *len, char *why, size_t cap)
{
	unsigned char hdr[HDR], *buf = NULL;
	struct stat st;
	size_t size, h;
	int fd, rc;

	*out = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) != 0) {
		rc = errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = EISDIR;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 0) {
		rc = CDP_EFORMAT;
		goto out;
	}
	if ((uint64_t)st.st_size > SIZE_MAX / 2) {
		rc = CDP_EOVERFLOW;
		goto out;
	}
	size = (size_t)st.st_size;
	h = size < HDR ? size : HDR;
	rc = read_at(fd, hdr, h, 0);
	if (rc == CDP_OK && (rc = check_header(hdr, h, size)) != CDP_OK)
		header_why(hdr, h, size, why, cap);
	if (rc != CDP_OK)
		goto out;
	/* only now, with the header's size equal to the file's, allocate it */
	buf = malloc(size);
	if (!buf) {
		rc = CDP_ENOMEM;
		goto out;
	}
	rc = read_at(fd, buf, size, 0);
	if (rc == CDP_OK) {
		*out = buf;
		*len = size;
		buf = NULL;
	}
out:
	free(buf);
	close(fd);
	return rc;
}

int cdp_ckpt_load(const char *path, unsigned char **out, size_t *len)
{
	return load(path, out, len, NULL, 0);
}

int cdp_ckpt_read_rank(const char *path, int rank, cdp_ckpt *ck, char tag[5])
{
	unsigned char *buf;
	size_t len;
	int rc;

	memset(ck, 0, sizeof(*ck));
	tag[0] = '\0';
	rc = cdp_ckpt_load(path, &buf, &len);
	if (rc == CDP_OK)
		rc = cdp_ckpt_decode_rank(buf, len, rank, ck, tag);
	free(buf);
	return rc;
}

int cdp_ckpt_load_why(const char *path, unsigned char **buf, size_t *len, char *why, size_t cap)
{
	int rc;

	if (cap)
		why[0] = '\0';
	/* a version this build does not read, a size field the file
	 * disagrees with: load says which, and by how much */
	if ((rc = load(path, buf, len, why, cap)) != CDP_OK)
		say(why, cap, "", rc);
	return rc;
}

int cdp_ckpt_read_why(const char *path, int rank, cdp_ckpt *ck, char *why, size_t cap)
{
	unsigned char *buf;
	size_t len;
	int rc;

	memset(ck, 0, sizeof(*ck));
	if ((rc = cdp_ckpt_load_why(path, &buf, &len, why, cap)) != CDP_OK)
		return rc;
	rc = cdp_ckpt_decode_why(buf, len, rank, ck, why, cap);
	free(buf);
	return rc;
}

int cdp_ckpt_read(const char *path, cdp_ckpt *ck)
{
	char tag[5];

	return cdp_ckpt_read_rank(path, -1, ck, tag);
}
