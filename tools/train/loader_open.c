/* loader_open.c: opening the loader (loader.h): the pool's meta, the
 * pointer file against it, every key looked up, a sample of record headers
 * checked, copy mode's copy, readahead advice, buffers and threads; and
 * closing it. Every failure leaves a one-line reason naming the file.
 */
#include "loader_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <float.h>
#include <math.h>

#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"

#define SHAPE_SAMPLE 64     /* records whose header is checked at open */

static int fail(char *err, size_t cap, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t cap, int rc, const char *fmt, ...)
{
	va_list ap;

	if (cap) {
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static const char *label_name(int kind)
{
	static const char *const names[] = { "none", "u8", "u16", "class", "f32", "multi" };
	return kind >= 0 && kind <= 5 ? names[kind] : "?";
}

/* Band c's standardization. The net standardizes in float32: statistics
 * that overflowed (an f64 pool near 1e300 has an infinite sum of squares)
 * would turn every input into inf or NaN, and fail much later. */
static int set_band(cdp_loader *l, int c, double m, double sd)
{
	if (!isfinite(m) || !isfinite(sd) || fabs(m) > FLT_MAX || sd < 0)
		return -1;
	l->mean[c] = (float)m;
	l->inv[c] = sd > 0 ? (float)(1.0 / sd) : 1.0f;
	return 0;
}

int cdp_loader_set_standardization(cdp_loader *l, const double *mean, const double *std)
{
	for (int c = 0; c < l->C; c++)
		if (!isfinite(mean[c]) || !isfinite(std[c]) || fabs(mean[c]) > FLT_MAX || std[c] < 0)
			return CDP_ERANGE;
	for (int c = 0; c < l->C; c++)
		set_band(l, c, mean[c], std[c]);
	return CDP_OK;
}

int cdp_loader_set_target_standardization(cdp_loader *l, const double *mean, const double *std)
{
	if (!l->NT)
		return CDP_EINVAL;
	for (int t = 0; t < l->NT; t++)
		if (!isfinite(mean[t]) || !isfinite(std[t]) || fabs(mean[t]) > FLT_MAX || std[t] < 0)
			return CDP_ERANGE;
	for (int t = 0; t < l->NT; t++) {
		l->tmean[t] = (float)mean[t];
		l->tinv[t] = std[t] > 0 ? (float)(1.0 / std[t]) : 1.0f;
	}
	return CDP_OK;
}

/* Pool meta: shape, statistics, ignore label, output shape. */
static int open_pool(cdp_loader *l, char *err, size_t cap)
{
	char why[256];
	int rc;

	if (l->o.pool) {
		l->pool = l->o.pool;
	} else {
		/* B-tree lookups at open are random reads: no read-around for
		 * them; set_readahead then advises the values' range */
		if ((rc = cdp_pool_open(l->pool_path, CDP_POOL_RDONLY | CDP_POOL_NORDAHEAD, 0,
		                        &l->own)) != 0)
			return fail(err, cap, rc, "cannot open '%s': %s", l->pool_path,
			            cdp_pool_strerror(&l->own, rc, why, sizeof why));
		l->pool = &l->own;
	}
	if ((rc = cdp_pool_info_load_txn(l->pool, l->o.txn, &l->info, why, sizeof why)) != 0)
		return fail(err, cap, rc, "'%s': %s", l->pool_path, why);
	if (l->info.bands == 0)
		return fail(err, cap, CDP_EFORMAT, "'%s': pool holds no tiles", l->pool_path);
	/* value targets (T, H, W) f32 come as floats (batch.target), not labels;
	 * the raw path's prep_batch moves no targets */
	if (l->info.label_kind == CDP_LABEL_F32 && l->o.raw)
		return fail(err, cap, CDP_EUNSUP, "'%s': the pool holds value labels (regression "
		            "targets), which the raw (device) data path does not serve", l->pool_path);
	l->NT = l->info.label_kind == CDP_LABEL_F32 ? (int)l->info.label_len : 0;
	l->C = (int)l->info.bands;
	l->H = (int)l->info.height;
	l->W = (int)l->info.width;
	l->label_px = l->info.label_kind == CDP_LABEL_U8 || l->info.label_kind == CDP_LABEL_U16;
	/* a class pool stores ignore 0 as "not in use" (cdp_record.h): class 0
	 * is a class there, and no label is ignored */
	l->stored_ignore = l->label_px ? (int32_t)l->info.label_ignore : -1;
	l->ignore = l->o.remap_ignore ? l->o.ignore : l->stored_ignore;
	if (!(l->mean = malloc(l->C * sizeof *l->mean)) || !(l->inv = malloc(l->C * sizeof *l->inv)))
		return fail(err, cap, CDP_ENOMEM, "'%s': out of memory", l->pool_path);
	for (int c = 0; c < l->C; c++) {
		double m = l->info.band[c].mean, sd = l->info.band[c].std;
		if (l->info.band[c].count == 0)
			return fail(err, cap, CDP_EFORMAT, "'%s': band %d has no valid pixel in the "
			            "pool's statistics", l->pool_path, c + 1);
		if (set_band(l, c, m, sd) != 0)
			return fail(err, cap, CDP_ERANGE, "'%s': band %d statistics are out of float32 "
			            "range (mean %g, std %g)", l->pool_path, c + 1, m, sd);
	}
	/* the targets' standardization: the identity until the caller sets the
	 * training sources' (cdp_loader_set_target_standardization) */
	if (l->NT && (!(l->tmean = calloc((size_t)l->NT, sizeof *l->tmean)) ||
	              !(l->tinv = malloc((size_t)l->NT * sizeof *l->tinv))))
		return fail(err, cap, CDP_ENOMEM, "'%s': out of memory", l->pool_path);
	for (int t = 0; t < l->NT; t++)
		l->tinv[t] = 1.0f;
	if (__builtin_mul_overflow((size_t)l->C * l->H * l->W, cdp_dtype_size(l->info.dtype),
	                           &l->raw_size))
		return fail(err, cap, CDP_EOVERFLOW, "'%s': tiles too large", l->pool_path);
	l->oh = l->H;
	l->ow = l->W;
	if (l->o.aug && (l->o.aug->hflip || l->o.aug->vflip || l->o.aug->rot90 ||
	                 l->o.aug->crop_h || l->o.aug->crop_w || cdp_aug_host_only(l->o.aug))) {
		/* the device's prep_batch does crops, flips and quarter turns only */
		if (l->o.raw && !l->o.val && cdp_aug_host_only(l->o.aug))
			return fail(err, cap, CDP_EINVAL, "'%s': photometric augmentation, aug_scale, "
			            "aug_rotate and mixing need the host data path (CDP_TRAIN_DATA=host)",
			            l->pool_path);
		l->aug = *l->o.aug;
		l->has_aug = 1;
		if (cdp_aug_check(&l->aug, l->H, l->W, why, sizeof why))
			return fail(err, cap, CDP_EINVAL, "'%s': %s", l->pool_path, why);
		l->oh = l->aug.crop_h ? l->aug.crop_h : l->H;
		l->ow = l->aug.crop_w ? l->aug.crop_w : l->W;
	}
	return 0;
}

/* The pointer file: readable, made for this pool, steps per epoch. */
static int open_keys(cdp_loader *l, char *err, size_t cap)
{
	size_t b = (size_t)l->o.batch, j = (size_t)l->o.nranks, r = (size_t)l->o.rank;
	cdp_ptrfile_where w;
	int rc;

	if ((rc = cdp_ptrfile_read_where(l->keys_path, &l->kl, &w)) != 0) {
		if (rc == CDP_EDUPKEY)
			return fail(err, cap, rc, "'%s': key '%s' on lines %zu and %zu",
			            l->keys_path, w.key, w.first, w.line);
		if (w.line)
			return fail(err, cap, rc, "'%s': line %zu: %s", l->keys_path, w.line,
			            w.why ? w.why : cdp_strerror(rc));
		return fail(err, cap, rc, "cannot read '%s': %s", l->keys_path, cdp_strerror(rc));
	}
	if (strcmp(l->kl.uuid, l->info.uuid) != 0)
		return fail(err, cap, CDP_EMISMATCH, "'%s': made for pool %s, '%s' is %s",
		            l->keys_path, l->kl.uuid, l->pool_path, l->info.uuid);
	if ((l->N = l->kl.count) == 0)
		return fail(err, cap, CDP_EFORMAT, "'%s': no keys", l->keys_path);
	/* the header's crc32, which the read checked: the key lines' bytes */
	l->keys_crc = 0;
	for (size_t i = 0; i < l->N; i++)
		l->keys_crc = cdp_crc32(cdp_crc32(l->keys_crc, l->kl.keys[i], l->kl.lens[i]), "\n", 1);
	/* every validation key is scored once: an oversampled list is for training */
	if (l->o.val && l->kl.repeats)
		return fail(err, cap, CDP_EFORMAT, "'%s': an oversampled list (repeats=1) cannot be "
		            "a validation list", l->keys_path);
	l->B = b * j;
	if (l->o.val) {
		l->val_count = l->N > r ? (l->N - r + j - 1) / j : 0;
		l->steps = ((l->N + j - 1) / j + b - 1) / b;
	} else {
		/* whole optimizer steps of A batches: counting batches first
		 * and cutting to whole steps after would drop a padded tail */
		size_t A = l->o.accumulate > 1 ? (size_t)l->o.accumulate : 1, S = A * l->B;
		char acc[48] = "";
		l->steps = A * (l->o.pad_last ? (l->N + S - 1) / S : l->N / S);
		if (A > 1)
			snprintf(acc, sizeof acc, " x accumulate=%zu", A);
		if (l->steps == 0)
			return fail(err, cap, CDP_ERANGE, "'%s': %zu %s fewer than one global batch "
			            "of %zu (%zu rank%s x %zu%s); use fewer ranks, a smaller batch or "
			            "--pad-last", l->keys_path, l->N, l->N == 1 ? "key is" : "keys are",
			            S, j, j == 1 ? "" : "s", b, acc);
	}
	return 0;
}

/* The page-aligned range of the map holding the loader's values. */
static void value_range(const cdp_loader *l, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	*lo = UINTPTR_MAX;
	*hi = 0;
	for (size_t i = 0; i < l->N; i++) {
		uintptr_t a = (uintptr_t)l->val[i].mv_data;
		if (a < *lo)
			*lo = a;
		if (a + l->val[i].mv_size > *hi)
			*hi = a + l->val[i].mv_size;
	}
	*lo &= ~(pg - 1);
}

typedef struct addr_idx { uintptr_t a; size_t i; } addr_idx;

static int by_address(const void *x, const void *y)
{
	const addr_idx *p = x, *q = y;

	return (p->a > q->a) - (p->a < q->a);
}

/* Copy mode: every value into one allocation (8-byte aligned slots in key
 * order), read in file order with sequential advice so that the copy runs
 * at the disk's streaming speed. */
static int copy_all(cdp_loader *l, char *err, size_t cap)
{
	size_t total = 0, *off;
	addr_idx *ord;
	uintptr_t lo, hi;

	if (!(off = malloc(l->N * sizeof *off)) || !(ord = malloc(l->N * sizeof *ord))) {
		free(off);
		return fail(err, cap, CDP_ENOMEM, "'%s': out of memory", l->pool_path);
	}
	for (size_t i = 0; i < l->N; i++) {
		off[i] = total;
		ord[i].a = (uintptr_t)l->val[i].mv_data;
		ord[i].i = i;
		if (__builtin_add_overflow(total, (l->val[i].mv_size + 7) & ~(size_t)7, &total)) {
			free(off);
			free(ord);
			return fail(err, cap, CDP_EOVERFLOW, "'%s': dataset too large", l->pool_path);
		}
	}
	if (!(l->copy = malloc(total ? total : 1))) {
		free(off);
		free(ord);
		return fail(err, cap, CDP_ENOMEM, "'%s': cannot hold a copy of %zu bytes",
		            l->pool_path, total);
	}
	qsort(ord, l->N, sizeof *ord, by_address);
	value_range(l, &lo, &hi);
	madvise((void *)lo, hi - lo, MADV_SEQUENTIAL);
	for (size_t t = 0; t < l->N; t++) {
		size_t i = ord[t].i;
		memcpy(l->copy + off[i], l->val[i].mv_data, l->val[i].mv_size);
		l->val[i].mv_data = l->copy + off[i];
	}
	free(off);
	free(ord);
	if (!l->o.txn)
		cdp_lmdb_txn_release(l->pool->env, l->txn);
	l->txn = NULL;
	return 0;
}

/* Every key's value, a sample of record headers, the copy of copy mode. */
static int resolve(cdp_loader *l, char *err, size_t cap)
{
	size_t ns;
	cdp_record r;
	int rc;

	ns = l->o.mode == CDP_LOAD_COPY || l->N < SHAPE_SAMPLE ? l->N : SHAPE_SAMPLE;
	if (!(l->val = calloc(l->N, sizeof *l->val)) || !(l->bad = calloc(l->N, 1)) ||
	    !(l->verified = calloc(l->N, 1)) || !(l->sample_i = malloc(ns * sizeof *l->sample_i)) ||
	    !(l->sample_src = malloc(ns * sizeof *l->sample_src)))
		return fail(err, cap, CDP_ENOMEM, "'%s': out of memory", l->keys_path);
	/* held: a map grown by a writer meanwhile is not adopted under the
	 * record pointers resolved here (cdp_lmdb.h) */
	if (l->o.txn)
		l->txn = l->o.txn;
	else if ((rc = cdp_lmdb_txn_hold(l->pool->env, MDB_RDONLY, &l->txn)) != 0)
		return fail(err, cap, rc, "'%s': %s", l->pool_path, cdp_strerror(rc));
	for (size_t i = 0; i < l->N; i++) {
		MDB_val k = { l->kl.lens[i], l->kl.keys[i] };
		rc = mdb_get(l->txn, l->pool->tiles, &k, &l->val[i]);
		if (rc == MDB_NOTFOUND)
			return fail(err, cap, CDP_EKEY, "'%s': line %zu: key '%s' is not in '%s'",
			            l->keys_path, i + 2, l->kl.keys[i], l->pool_path);
		if (rc)
			return fail(err, cap, rc, "'%s': %s", l->pool_path, cdp_strerror(rc));
	}
	for (size_t t = 0; t < ns; t++) {
		size_t i = t * l->N / ns;
		if ((rc = cdp_record_peek(l->val[i].mv_data, l->val[i].mv_size, &r)) != 0) {
			if (l->o.skip_bad) {
				l->bad[i] = 1;
				continue;
			}
			return fail(err, cap, rc, "'%s': record '%s': %s", l->pool_path,
			            l->kl.keys[i], cdp_strerror(rc));
		}
		if (r.dtype != l->info.dtype || r.bands != l->info.bands || r.height != l->info.height ||
		    r.width != l->info.width || r.label_kind != l->info.label_kind ||
		    r.label_len != l->info.label_len)
			return fail(err, cap, CDP_ESHAPE, "'%s': record '%s' is %s %ux%ux%u label %s, "
			            "the pool's meta says %s %ux%ux%u label %s", l->pool_path, l->kl.keys[i],
			            cdp_dtype_name(r.dtype), r.bands, r.height, r.width, label_name(r.label_kind),
			            cdp_dtype_name(l->info.dtype), l->info.bands, l->info.height,
			            l->info.width, label_name(l->info.label_kind));
		/* training masks the meta's ignore value: a record of another
		 * would have its ignored pixels learnt, or a class dropped */
		if (l->label_px && r.label_ignore != l->info.label_ignore)
			return fail(err, cap, CDP_ESHAPE, "'%s': record '%s' has the label ignore value "
			            "%u, the pool's meta says %u", l->pool_path, l->kl.keys[i],
			            r.label_ignore, l->info.label_ignore);
		/* cdp_loader_sources' check of the sources it maps by name */
		l->sample_i[l->nsample] = i;
		l->sample_src[l->nsample++] = r.source;
	}
	return l->o.mode == CDP_LOAD_COPY ? copy_all(l, err, cap) : 0;
}

/* MADV_RANDOM or MADV_NORMAL over the pages of the loader's values. */
static void set_readahead(cdp_loader *l)
{
	uintptr_t lo, hi;

	l->readahead = l->o.readahead != CDP_RA_AUTO ? l->o.readahead :
		cdp_loader_readahead_auto(l->val[0].mv_size, !l->o.no_willneed);
	if (l->o.mode != CDP_LOAD_POOL)
		return;
	value_range(l, &lo, &hi);
	madvise((void *)lo, hi - lo, l->readahead == CDP_RA_ON ? MADV_NORMAL : MADV_RANDOM);
}

static void *xalloc(size_t n, size_t size, int *fail_flag)
{
	void *p = NULL;
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes) || posix_memalign(&p, 64, bytes ? bytes : 1))
		*fail_flag = 1;
	return p;
}

/* A batch buffer: 2 MiB aligned and advised MADV_HUGEPAGE when that large,
 * so that its stores (several MB per batch) take few TLB misses. */
static void *xalloc_batch(size_t n, size_t size, int *fail_flag)
{
	size_t bytes, huge = (size_t)2 << 20;
	void *p = NULL;

	if (__builtin_mul_overflow(n, size, &bytes) || bytes < huge)
		return xalloc(n, size, fail_flag);
	if (posix_memalign(&p, huge, bytes)) {
		*fail_flag = 1;
		return NULL;
	}
#ifdef MADV_HUGEPAGE
	madvise(p, bytes, MADV_HUGEPAGE);   /* advice only */
#endif
	return p;
}

/* A buffer the caller copies to the device: opts.host_alloc's memory when
 * given (pinned on a GPU), else the loader's own. */
static void *xalloc_io(const cdp_loader *l, size_t n, size_t size, int *fail_flag)
{
	void *p;
	size_t bytes;

	if (!l->o.host_alloc)
		return xalloc_batch(n, size, fail_flag);
	if (__builtin_mul_overflow(n, size, &bytes) || !(p = l->o.host_alloc(l->o.alloc_ctx, bytes))) {
		*fail_flag = 1;
		return NULL;
	}
	return p;
}

static void free_io(const cdp_loader *l, void *p)
{
	if (p && l->o.host_free)
		l->o.host_free(l->o.alloc_ctx, p);
	else
		free(p);
}

static int alloc_buffers(cdp_loader *l, char *err, size_t cap)
{
	size_t b = (size_t)l->o.batch, ohw = (size_t)l->oh * l->ow, isz, lsz, rsz, vsz, tsz;
	int oom = 0;

	if (__builtin_mul_overflow(loader_img_size(l), b, &isz) ||
	    __builtin_mul_overflow(loader_lab_size(l), b, &lsz) ||
	    __builtin_mul_overflow(loader_tgt_size(l), b, &tsz) ||
	    __builtin_mul_overflow(l->raw_size, b, &rsz) || __builtin_mul_overflow(ohw, b, &vsz))
		return fail(err, cap, CDP_EOVERFLOW, "'%s': batch too large", l->pool_path);
	l->order = xalloc(l->N, sizeof *l->order, &oom);
	l->adv = xalloc(b, sizeof *l->adv, &oom);
	for (int i = 0; i < NSLOT; i++) {
		slot *s = &l->slot[i];
		if (l->o.raw) {
			s->raw = xalloc_io(l, rsz, 1, &oom);
			s->valid = xalloc_io(l, vsz, 1, &oom);
			s->aug = xalloc(b, sizeof *s->aug, &oom);
			s->invalid = xalloc(b, 1, &oom);
		} else {
			s->image = xalloc_io(l, isz, sizeof(float), &oom);
		}
		if (l->NT)
			s->target = xalloc_io(l, tsz, sizeof(float), &oom);
		else if (l->info.label_kind != CDP_LABEL_NONE)
			s->label = xalloc_io(l, lsz, sizeof(int32_t), &oom);
		s->index = xalloc(b, sizeof(size_t), &oom);
		s->pos = xalloc(b, sizeof(size_t), &oom);
	}
	if (!oom && !(l->wk = calloc((size_t)l->T, sizeof *l->wk)))
		oom = 1;
	for (int t = 0; !oom && t < l->T; t++) {
		l->wk[t].l = l;
		l->wk[t].id = t;
		if (l->has_aug && !l->o.raw)
			l->wk[t].tmp_img = xalloc((size_t)l->C * l->H, (size_t)l->W * sizeof(float), &oom);
		if (l->has_aug || l->o.raw)
			l->wk[t].tmp_lab = xalloc((size_t)l->H * l->W > l->info.label_len
			                          ? (size_t)l->H * l->W : l->info.label_len,
			                          sizeof(int32_t), &oom);
		if (l->has_aug && (l->o.raw || l->NT))
			l->wk[t].tmp_valid = xalloc(ohw, sizeof(int32_t), &oom);
		if (l->has_aug && l->NT)
			l->wk[t].tmp_tgt = xalloc((size_t)l->NT * l->H, (size_t)l->W * sizeof(float), &oom);
	}
	for (size_t i = 0; !oom && i < l->N; i++)
		l->order[i] = i;
	return oom ? fail(err, cap, CDP_ENOMEM, "'%s': out of memory for batches", l->pool_path) : 0;
}

static int start_threads(cdp_loader *l, char *err, size_t cap)
{
	int rc;

	for (int t = 1; t < l->T; t++) {
		if ((rc = pthread_create(&l->wk[t].th, NULL, cdp_loader_helper_main, &l->wk[t])) != 0)
			return fail(err, cap, rc, "cannot start a loader thread: %s", strerror(rc));
		l->gthreads = t;
	}
	if ((rc = pthread_create(&l->prod, NULL, cdp_loader_prefetch_main, l)) != 0)
		return fail(err, cap, rc, "cannot start the prefetch thread: %s", strerror(rc));
	l->prod_started = 1;
	return 0;
}

int cdp_loader_open(const cdp_loader_opts *o, cdp_loader **out, char *err, size_t cap)
{
	cdp_loader *l;
	int rc;

	*out = NULL;
	if (cap)
		err[0] = '\0';
	if (!o->pool_path || !o->keys_path || o->nranks < 1 || o->rank < 0 ||
	    o->rank >= o->nranks || o->batch < 1 || o->accumulate < 0 || o->threads < 1 ||
	    o->threads > 256 ||
	    (o->mode != CDP_LOAD_POOL && o->mode != CDP_LOAD_COPY) ||
	    o->readahead < CDP_RA_AUTO || o->readahead > CDP_RA_OFF)
		return fail(err, cap, CDP_EINVAL, "invalid loader options");
	if (!(l = calloc(1, sizeof *l)))
		return fail(err, cap, CDP_ENOMEM, "out of memory");
	l->o = *o;
	l->T = o->threads;
	l->std_u8 = cdp_loader_u8_kernel(CDP_CONV_AUTO, &l->std_u8_isa);
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->gmu, NULL);
	pthread_cond_init(&l->cv_prod, NULL);
	pthread_cond_init(&l->cv_cons, NULL);
	pthread_cond_init(&l->gcv_go, NULL);
	pthread_cond_init(&l->gcv_done, NULL);
	if (!(l->pool_path = strdup(o->pool_path)) || !(l->keys_path = strdup(o->keys_path))) {
		rc = fail(err, cap, CDP_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = open_pool(l, err, cap)) != 0 || (rc = open_keys(l, err, cap)) != 0 ||
	    (rc = resolve(l, err, cap)) != 0 || (rc = alloc_buffers(l, err, cap)) != 0)
		goto out;
	set_readahead(l);
	if (o->mode == CDP_LOAD_POOL && (rc = cdp_loader_fault_init()) != 0) {
		rc = fail(err, cap, rc, "cannot catch faults of the pool's map: %s", strerror(rc));
		goto out;
	}
	rc = start_threads(l, err, cap);
out:
	if (rc) {
		cdp_loader_close(l);
		return rc;
	}
	*out = l;
	return 0;
}

void cdp_loader_close(cdp_loader *l)
{
	if (!l)
		return;
	if (l->prod_started) {
		pthread_mutex_lock(&l->mu);
		l->quit = 1;
		l->gen++;
		pthread_cond_broadcast(&l->cv_prod);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->prod, NULL);
	}
	pthread_mutex_lock(&l->gmu);
	l->gquit = 1;
	pthread_cond_broadcast(&l->gcv_go);
	pthread_mutex_unlock(&l->gmu);
	for (int t = 1; t <= l->gthreads; t++)
		pthread_join(l->wk[t].th, NULL);
	for (int t = 0; l->wk && t < l->T; t++) {
		cdp_buf_free(&l->wk[t].scratch);
		free(l->wk[t].tmp_img);
		free(l->wk[t].tmp_lab);
		free(l->wk[t].tmp_valid);
		free(l->wk[t].tmp_tgt);
	}
	for (int i = 0; i < NSLOT; i++) {
		free_io(l, l->slot[i].image);
		free_io(l, l->slot[i].label);
		free_io(l, l->slot[i].target);
		free_io(l, l->slot[i].raw);
		free_io(l, l->slot[i].valid);
		free(l->slot[i].aug);
		free(l->slot[i].invalid);
		free(l->slot[i].index);
		free(l->slot[i].pos);
	}
	if (l->txn && !l->o.txn)
		cdp_lmdb_txn_release(l->pool->env, l->txn);
	if (l->pool == &l->own)
		cdp_pool_close(&l->own);
	cdp_pool_info_free(&l->info);
	cdp_keylist_free(&l->kl);
	free(l->wk);
	free(l->order);
	free(l->adv);
	free(l->val);
	free(l->bad);
	free(l->verified);
	free(l->sample_i);
	free(l->sample_src);
	free(l->copy);
	free(l->mean);
	free(l->inv);
	free(l->tmean);
	free(l->tinv);
	free(l->pool_path);
	free(l->keys_path);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->gmu);
	pthread_cond_destroy(&l->cv_prod);
	pthread_cond_destroy(&l->cv_cons);
	pthread_cond_destroy(&l->gcv_go);
	pthread_cond_destroy(&l->gcv_done);
	free(l);
}

