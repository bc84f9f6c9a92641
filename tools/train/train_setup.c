/* train_setup.c: everything cdp-train does before the first step: the
 * backend (--device, --precision) and where the dist layer finds its
 * buffers (--allreduce), the pool and its two loaders, the model (from --model or the
 * checkpoint being resumed), the loss, the optimizer and its schedule,
 * the initial weights (rank 0's, broadcast; --init's in train_init.c) and
 * the logs; that the ranks agree on all of it is train_agree.c's.
 *
 * Every check that can fail on one rank only (a file it cannot read) runs
 * here, before any collective of the training loop, so train.c can agree
 * on the outcome with one reduction and every rank can exit cleanly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_lmdb.h"
#include "cdp_thread.h"
#include "ckpt/checkpoint.h"
#include "device.h"
#include "dist/dist.h"
#include "train_int.h"

int tr_fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

/* text parsed with its overrides (under the old rule when the new one
 * refuses only an unknown [net] key, as tr_setup reads a checkpoint's) */
static int parse_either(const char *text, const char *path, char *const *ov, int nov,
                        cdp_cfg *cfg, char *err, size_t cap)
{
	int rc = cdp_cfg_parse(text, path, (const char *const *)ov, nov, cfg, err, cap);

	if (rc == CDP_CFG_EUNKNOWN)
		rc = cdp_cfg_parse_rule(text, path, (const char *const *)ov, nov, 1, cfg, err, cap);
	return rc < 0 ? -1 : 0;
}

static const cdp_cfg_kv *find_kv(const cdp_cfg_section *s, const char *key)
{
	for (int i = 0; i < s->nkv; i++)
		if (!strcmp(s->kv[i].key, key))
			return &s->kv[i];
	return NULL;
}

/* The first difference of the models a and b (the --model's and the
 * checkpoint's, each expanded with its overrides) into why; 0 when they
 * are the same: the same sections in order, each with the same keys and
 * values in any order (overrides in another order, a variable's default
 * spelled out) */
static int cfg_differ(const cdp_cfg *a, const cdp_cfg *b, char *why, size_t cap)
{
	if (a->ns != b->ns) {
		snprintf(why, cap, "it has %d sections, the checkpoint's %d", a->ns, b->ns);
		return 1;
	}
	for (int i = 0; i < a->ns; i++) {
		const cdp_cfg_section *x = &a->s[i], *y = &b->s[i];
		if (strcmp(x->type, y->type)) {
			snprintf(why, cap, "section %d is [%.40s], the checkpoint's [%.40s]", i + 1, x->type,
			         y->type);
			return 1;
		}
		for (int pass = 0; pass < 2; pass++)
			for (int k = 0; k < (pass ? y->nkv : x->nkv); k++) {
				const cdp_cfg_kv *kv = pass ? &y->kv[k] : &x->kv[k];
				const cdp_cfg_kv *o = find_kv(pass ? x : y, kv->key);
				if (o && !strcmp(o->value, kv->value))
					continue;
				if (!o && pass)
					snprintf(why, cap, "section %d [%.40s] has no %.80s, the checkpoint's "
					         "%.80s=%.80s", i + 1, x->type, kv->key, kv->key, kv->value);
				else if (!o)
					snprintf(why, cap, "section %d [%.40s] sets %.80s=%.80s, the checkpoint's "
					         "has none", i + 1, x->type, kv->key, kv->value);
				else
					snprintf(why, cap, "section %d [%.40s] sets %.80s=%.80s, the checkpoint's "
					         "%.80s", i + 1, x->type, kv->key, kv->value, o->value);
				return 1;
			}
	}
	return 0;
}

/* The model text and overrides: --model, or the checkpoint's when resuming
 * without one; with both they must build the same model, or the weights
 * would not fit: then the checkpoint's text and overrides go on, so its
 * CFG chunk stays as it was. */
static int model_text(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;

	if (o->model) {
		if (cdp_cfg_read(o->model, &t->cfg_text, err, cap) < 0)
			return -1;
		t->ov = o->overrides;
		t->nov = o->noverrides;
	}
	if (!t->have_ck)
		return 0;
	if (!o->model) {
		if (!(t->cfg_text = strdup(t->ck.cfg_text)))
			return tr_fail(err, cap, "out of memory");
		t->ov = t->ck.overrides;
		t->nov = t->ck.noverrides;
		return 0;
	}
	int same = strcmp(t->cfg_text, t->ck.cfg_text) == 0 && t->nov == t->ck.noverrides;
	for (int i = 0; same && i < t->nov; i++)
		same = strcmp(t->ov[i], t->ck.overrides[i]) == 0;
	if (same)
		return 0;
	cdp_cfg a = { 0 }, b = { 0 };
	char why[400];
	int differ = parse_either(t->cfg_text, o->model, t->ov, t->nov, &a, err, cap) < 0 ? -1 :
	             parse_either(t->ck.cfg_text, "the checkpoint's model", t->ck.overrides,
	                          t->ck.noverrides, &b, why, sizeof why) < 0 ? 2 :
	             cfg_differ(&a, &b, why, sizeof why);
	cdp_cfg_free(&a);
	cdp_cfg_free(&b);
	if (differ < 0)
		return -1;
	if (differ)
		return tr_fail(err, cap, "--model '%s' differs from the model of the checkpoint in '%s': "
		               "%s (leave --model out to resume with the checkpoint's)", o->model,
		               o->out, why);
	free(t->cfg_text);
	if (!(t->cfg_text = strdup(t->ck.cfg_text)))
		return tr_fail(err, cap, "out of memory");
	t->ov = t->ck.overrides;
	t->nov = t->ck.noverrides;
	return 0;
}

/* The backend of --device at --precision, handed to the dist layer (the
 * trainer's parameters, gradients and buffers are its device memory), and
 * the algorithm of --allreduce: by default nccl when every rank of the node
 * has a GPU of its own, else mpi (staged through host memory on a GPU).
 * A GPU is known by its UUID, so ranks that each see one GPU under index 0
 * (srun --gpus-per-task, CUDA_VISIBLE_DEVICES per rank) have their own,
 * and two ranks on one GPU share it whatever the node has. Every rank
 * takes part in the two collectives, failed (`failed`, or here) or not. */
static int open_device(trainer *t, int threads, int failed, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	unsigned char id[16] = { 0 }, none[16] = { 0 };
	int gpus = 0, same, rc = failed ? -1 : 0;
	uint64_t shared;
	char why[512];

	if (rc == 0 && !(t->be = cdp_device_open(o->device, threads, cdp_dist_local_rank(), why,
	                                          sizeof why)))
		rc = tr_fail(err, cap, "--device %s: %s", o->device, why);
	if (rc == 0 && t->be->set_precision(t->be, o->precision) != 0)
		rc = tr_fail(err, cap, "--precision %s: the %s backend cannot compute in it%s",
		             cdp_precision_name(o->precision), t->be->name,
		             cdp_device_precision_why(t->be, o->precision));
	if (rc == 0 && t->be->device >= 0) {
		gpus = cdp_cuda_device_count();
		if (cdp_cuda_device_uuid(t->be->device, id) != 0)
			memset(id, 0, sizeof id);
	}
	/* a launch without MPI cannot ask (its collectives are NCCL's, not
	 * yet up): ranks beyond the node's GPUs share, as without UUIDs */
	same = cdp_dist_env_launch() ? -1 : cdp_dist_local_same(id, sizeof id);
	shared = same < 0 || !memcmp(id, none, sizeof id) ? cdp_dist_local_size() > gpus : same > 1;
	if (!cdp_dist_env_launch() && cdp_dist_sum_u64(&shared, 1) != 0)
		rc = rc ? rc : tr_fail(err, cap, "cannot agree on the ranks' GPUs");
	if (rc != 0)
		return -1;
	cdp_dist_set_backend(t->be);
	t->algo = o->allreduce >= 0 ? (cdp_dist_algo)o->allreduce :
	          cdp_dist_nccl_usable() && !shared ? CDP_DIST_NCCL : CDP_DIST_MPI;
	if (cdp_dist_env_launch() && t->algo != CDP_DIST_NCCL)
		return tr_fail(err, cap, "launched without MPI (CDP_RENDEZVOUS), every collective goes "
		            "through NCCL: run on GPUs (--device cuda) with --allreduce nccl");
	if (t->algo == CDP_DIST_NCCL && !cdp_dist_nccl_usable())
		return tr_fail(err, cap, "--allreduce nccl: needs %s", t->be->device < 0 ?
		            "a GPU (--device cuda)" : "a build with NCCL (configure --with-cuda)");
	if (t->algo == CDP_DIST_NCCL && shared && t->size > 1)
		return tr_fail(err, cap, "--allreduce nccl: ranks on one node share a GPU (%d ranks, "
		            "%d GPU%s visible to this one), NCCL wants one each (use --allreduce mpi)",
		            cdp_dist_local_size(), gpus, gpus == 1 ? "" : "s");
	return 0;
}

/* Loader batches in the backend's host memory: pinned on a GPU, so their
 * copies to the device run asynchronously (train.c). */
static void *loader_alloc(void *ctx, size_t bytes)
{
	cdp_backend *be = ctx;
	return be->host_alloc(be, bytes);
}

static void loader_free(void *ctx, void *p)
{
	cdp_backend *be = ctx;
	be->host_free(be, p);
}

/* The loss scale: --loss-scale's (dynamic by default for fp16), or, when
 * resuming a run that scaled, the checkpoint's scale and counters. */
static void optim_note(trainer *t, const char *opt, const char *now, const char *was);

static void loss_scale(trainer *t)
{
	const cdp_train_opts *o = t->o;

	t->scale = o->loss_scale >= 0 ? o->loss_scale :
	           o->precision == CDP_PREC_FP16 ? 65536 : 0;
	/* resuming without --loss-scale: the checkpoint's scale (none when
	 * it had none and this run's precision wants none); with one that
	 * turns scaling on or off against the checkpoint's, said */
	if (t->have_ck && o->loss_scale < 0 && t->ck.loss_scale > 0)
		t->scale = t->ck.loss_scale;
	if (t->have_ck && o->loss_scale >= 0 && (o->loss_scale > 0) != (t->ck.loss_scale > 0))
		optim_note(t, "--loss-scale", o->loss_scale > 0 ? "on" : "off",
		           t->ck.loss_scale > 0 ? "on" : "off");
	if (t->scale > 0 && t->have_ck && t->ck.loss_scale > 0) {
		t->scale = t->ck.loss_scale;
		t->scale_good = (long)t->ck.scale_good;
		t->scale_skipped = t->ck.scale_skipped;
	}
}

/* The data path (loader.h): on a GPU, raw batches that the device
 * converts, standardizes and augments (train.c), except from f64 pools,
 * whose raw values are twice the floats' size, and with photometric
 * changes, scale or rotation (host only), and from multi-label pools
 * (always the host path); on the CPU, the loader's float batches. CDP_TRAIN_DATA=host|device overrides, for testing: device
 * on the CPU runs the GPU's path through the CPU backend's prep_batch. */
static int data_path(trainer *t, char *err, size_t cap)
{
	const char *env = getenv("CDP_TRAIN_DATA");
	cdp_pool_info pi;
	char why[256];
	int multi, value;

	if (cdp_pool_info_load_txn(&t->pool, t->txn, &pi, why, sizeof why) != 0)
		return tr_fail(err, cap, "'%s': %s", t->o->db, why);
	/* multi-hot labels (K a sample) and value targets (T, H, W) take the
	 * host path: prep_batch moves per-pixel or single class labels only */
	multi = pi.label_kind == CDP_LABEL_MULTI;
	value = pi.label_kind == CDP_LABEL_F32;
	t->raw = pi.dtype != CDP_DT_F64 && !multi && !value;
	cdp_pool_info_free(&pi);
	if (env && *env) {
		if (strcmp(env, "host") != 0 && strcmp(env, "device") != 0)
			return tr_fail(err, cap, "CDP_TRAIN_DATA: '%s' is not host or device", env);
		if (multi && strcmp(env, "device") == 0)
			return tr_fail(err, cap, "CDP_TRAIN_DATA: device: '%s' is a multi-label pool, "
			               "which takes the host path", t->o->db);
		if (value && strcmp(env, "device") == 0)
			return tr_fail(err, cap, "CDP_TRAIN_DATA: device: '%s' holds value labels "
			               "(regression targets), which take the host path", t->o->db);
		t->raw = strcmp(env, "device") == 0;
		return 0;
	}
	/* photometric changes, scale and rotation are done on the host */
	if (t->be->device < 0 || cdp_aug_host_only(&t->aug))
		t->raw = 0;
	return 0;
}

static int open_loaders(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	cdp_loader_opts lo;
	char why[128];
	int rc, ign;

	if ((rc = cdp_pool_open(o->db, CDP_POOL_RDONLY | CDP_POOL_NORDAHEAD, 0, &t->pool)) != 0)
		return tr_fail(err, cap, "cannot open '%s': %s", o->db,
		            cdp_pool_strerror(&t->pool, rc, why, sizeof why));
	t->have_pool = 1;
	if ((rc = cdp_lmdb_txn_hold(t->pool.env, MDB_RDONLY, &t->txn)) != 0)
		return tr_fail(err, cap, "'%s': %s", o->db, cdp_strerror(rc));
	if (cdp_cfg_int(&t->cfg, &t->cfg.s[0], "ignore", -1, -1, 1 << 30, &ign, err, cap) < 0 ||
	    data_path(t, err, cap) < 0)
		return -1;
	cdp_loader_opts_init(&lo);
	lo.pool_path = o->db;
	lo.pool = &t->pool;
	lo.txn = t->txn;
	lo.keys_path = o->keys;
	lo.rank = t->rank;
	lo.nranks = t->size;
	lo.batch = o->batch;
	lo.seed = o->seed;
	lo.pad_last = t->pad_last;
	/* the optimizer's accumulate= (tr_setup read it first): the epoch is
	 * whole steps of that many batches, at least one, or the loader
	 * refuses the keys */
	lo.accumulate = t->oc.accumulate;
	lo.mode = o->load;
	lo.skip_bad = o->skip_bad;
	lo.aug = &t->aug;
	/* ignore=V in the cfg renames the pool's ignore label; otherwise the
	 * pool's own stays and the loss ignores it */
	lo.remap_ignore = ign >= 0;
	lo.ignore = ign;
	if (t->be->device >= 0) {
		lo.host_alloc = loader_alloc;
		lo.host_free = loader_free;
		lo.alloc_ctx = t->be;
	}
	lo.raw = t->raw;
	if (cdp_loader_open(&lo, &t->tl, err, cap) != 0)
		return -1;
	cdp_loader_get_info(t->tl, &t->ti);
	if (o->val_keys) {
		/* validation copies with to_device (train_eval.c): host batches */
		lo.keys_path = o->val_keys;
		lo.val = 1;
		lo.pad_last = 0;
		lo.accumulate = 1;
		lo.raw = 0;
		if (cdp_loader_open(&lo, &t->vl, err, cap) != 0)
			return -1;
		cdp_loader_get_info(t->vl, &t->vi);
	}
	if (t->ti.label_kind == CDP_LABEL_NONE)
		return tr_fail(err, cap, "'%s': the pool has no labels to train on", o->db);
	return 0;
}

/* The device buffers of the raw data path (train_int.h), and the loader's
 * standardization, uploaded once. The loader's batch buffers of the same
 * sizes did not overflow. */
static int raw_buffers(trainer *t)
{
	cdp_backend *be = t->be;
	size_t b = (size_t)t->o->batch, c = (size_t)t->ti.c;
	size_t hw = (size_t)t->ti.in_h * t->ti.in_w, ohw = (size_t)t->ti.h * t->ti.w;

	if (!(t->draw = be->alloc(be, b * t->ti.raw_size)) ||
	    (t->ti.label_kind != CDP_LABEL_CLASS &&
	     !(t->dlabraw = be->alloc(be, b * hw * sizeof *t->dlabraw))) ||
	    !(t->dvalid = be->alloc(be, b * ohw)) || !(t->dmean = be->alloc(be, c * sizeof(float))) ||
	    !(t->dinv = be->alloc(be, c * sizeof(float))))
		return -1;
	be->to_device(be, t->dmean, t->ti.mean, c * sizeof(float));
	be->to_device(be, t->dinv, t->ti.inv, c * sizeof(float));
	return 0;
}

static const char *o_model_name(const trainer *t)
{
	return t->model_name;
}

/* A multi-label pool needs a multi-label head (net.multi: loss=bce on K
 * channels, K its classes) and such a head that pool; the loss then runs
 * over K labels a sample (t->hw = K). */
static int check_multi(trainer *t, char *err, size_t cap)
{
	const cdp_layer *h = &t->net.layers[t->net.out_layer];
	uint32_t K = t->ti.pool->label_len;
	int kb = t->o->keep_best;

	if (t->ti.label_kind != CDP_LABEL_MULTI) {
		if (t->net.multi)
			return tr_fail(err, cap, "model '%s' has a multi-label head (loss=bce on %d "
			               "outputs, classes=%d): it trains on a multi-label pool "
			               "(cdp-lmdbpack --multi-label), '%s' is not one", o_model_name(t),
			               h->out.c, t->net.classes, t->o->db);
		return 0;
	}
	if (!t->net.multi)
		return tr_fail(err, cap, "'%s' is a multi-label pool (%" PRIu32 " classes): train it "
		               "with [net] loss=bce and classes=%" PRIu32 " on a head of %" PRIu32
		               " outputs (model '%s' has loss=%s on %d outputs)", t->o->db, K, K, K,
		               o_model_name(t), t->net.loss, h->out.c);
	if (h->out.h * h->out.w != 1)
		return tr_fail(err, cap, "model '%s' gives a %dx%d output per sample, the pool has one "
		               "label set per tile (a classifier head is needed)", o_model_name(t),
		               h->out.h, h->out.w);
	if ((uint32_t)t->net.classes != K)
		return tr_fail(err, cap, "model '%s' has %d outputs (classes=%d), the multi-label pool "
		               "'%s' has %" PRIu32 " classes", o_model_name(t), h->out.c,
		               t->net.classes, t->o->db, K);
	if (kb == CDP_BEST_MIOU || kb == CDP_BEST_ACC)
		return tr_fail(err, cap, "--keep-best %s: a multi-label run keeps f1, map or loss",
		               kb == CDP_BEST_MIOU ? "miou" : "acc");
	t->multi = 1;
	t->hw = (int)K;
	return 0;
}

/* A value pool (regression targets, T a pixel) needs a regression loss
 * (loss=mse|l1|huber, loss.h) on a head of T channels at the tile's size,
 * and such a loss that pool. */
static int check_reg(trainer *t, char *err, size_t cap)
{
	const cdp_layer *h = &t->net.layers[t->net.out_layer];
	int T = (int)t->ti.pool->label_len, kb = t->o->keep_best;
	int value = t->ti.label_kind == CDP_LABEL_F32, kinds[CDP_LOSS_MAX_TERMS], sm;
	int reg = cdp_loss_parse(t->net.loss, t->net.classes, kinds, &sm, err, cap) == 1 &&
	          cdp_loss_kind_is_reg(kinds[0]);

	if (!value) {
		if (reg)
			return tr_fail(err, cap, "model '%s' has the regression loss %s: it trains on a "
			               "pool of value labels (cdp-tile --label-kind value), '%s' is not one",
			               o_model_name(t), t->net.loss, t->o->db);
		if (kb == CDP_BEST_RMSE || kb == CDP_BEST_R2)
			return tr_fail(err, cap, "--keep-best %s: a regression metric; '%s' holds no value "
			               "labels", kb == CDP_BEST_RMSE ? "rmse" : "r2", t->o->db);
		return 0;
	}
	if (!reg)
		return tr_fail(err, cap, "'%s' holds value labels (%d target%s a pixel): train it with "
		               "[net] loss=mse, l1 or huber and classes=%d (model '%s' has loss=%s)",
		               t->o->db, T, T == 1 ? "" : "s", T, o_model_name(t), t->net.loss);
	if (h->out.c != T || h->out.h != t->ti.h || h->out.w != t->ti.w)
		return tr_fail(err, cap, "model '%s' gives a %dx%dx%d output, the pool's targets are "
		               "%dx%dx%d (classes=%d and a segmentation head are needed)",
		               o_model_name(t), h->out.c, h->out.h, h->out.w, T, t->ti.h, t->ti.w, T);
	/* the regression losses count every target that is not NaN: an
	 * ignore= would be read and change nothing (cdp-model(5): options a
	 * loss does not use are refused) */
	if (t->net.ignore >= 0)
		return tr_fail(err, cap, "model '%s': ignore=%d is for class labels; loss=%s counts "
		               "every target that is not NaN", o_model_name(t), t->net.ignore,
		               t->net.loss);
	if (kb && kb != CDP_BEST_RMSE && kb != CDP_BEST_R2 && kb != CDP_BEST_LOSS)
		return tr_fail(err, cap, "--keep-best: a regression run keeps rmse, r2 or loss");
	if (cdp_aug_mix_on(&t->aug))
		return tr_fail(err, cap, "model '%s': mixup_alpha and cutmix_alpha are for "
		               "classifiers, not regression targets", o_model_name(t));
	t->reg = 1;
	return 0;
}

/* The head must fit the labels: per-pixel labels need an output of the
 * input's size (segmentation), class labels one value per sample. */
static int check_head(trainer *t, char *err, size_t cap)
{
	const cdp_layer *h = &t->net.layers[t->net.out_layer];
	int px = t->ti.label_kind == CDP_LABEL_U8 || t->ti.label_kind == CDP_LABEL_U16;
	int kb = t->o->keep_best;

	t->hw = h->out.h * h->out.w;
	/* before the head's own checks, which return early on success */
	if (t->ti.label_kind != CDP_LABEL_MULTI && (kb == CDP_BEST_F1 || kb == CDP_BEST_MAP))
		return tr_fail(err, cap, "--keep-best %s: a multi-label pool's metric; '%s' is not "
		               "one (keep %s)", kb == CDP_BEST_F1 ? "f1" : "map", t->o->db,
		               t->ti.label_kind == CDP_LABEL_F32 ? "rmse, r2 or loss"   /* check_reg's */
		                                                 : "miou, loss or acc");
	if (t->ti.label_kind == CDP_LABEL_MULTI || t->net.multi)
		return check_multi(t, err, cap);
	if (check_reg(t, err, cap) < 0)
		return -1;
	if (t->reg)
		return 0;
	if (px && (h->out.h != t->ti.h || h->out.w != t->ti.w))
		return tr_fail(err, cap, "model '%s' gives a %dx%d output, the pool's per-pixel labels "
		            "are %dx%d (a segmentation head is needed)", o_model_name(t),
		            h->out.h, h->out.w, t->ti.h, t->ti.w);
	if (!px && t->hw != 1)
		return tr_fail(err, cap, "model '%s' gives a %dx%d output per sample, the pool has one "
		            "class label per tile (a classifier head is needed)", o_model_name(t),
		            h->out.h, h->out.w);
	return 0;
}

/* MixUp and CutMix (augment.h) mix whole chips and their labels: a
 * classifier's one label, or a multi-label head's K (its hw): bce is linear
 * in the target, so lam L(y) + (1 - lam) L(y') is the loss of the mixed
 * multi-hot target lam y + (1 - lam) y', as PyTorch users mix them. The
 * flipped labels and their loss's gradient get their own buffers. */
static int mix_buffers(trainer *t, char *err, size_t cap)
{
	size_t b = (size_t)t->o->batch * (size_t)t->hw;

	if (!cdp_aug_mix_on(&t->aug))
		return 0;
	if (t->hw != 1 && !t->multi)
		return tr_fail(err, cap, "model '%s': mixup_alpha and cutmix_alpha are for "
		               "classifiers (one class label or label set per tile), not per-pixel "
		               "labels", o_model_name(t));
	if (!(t->hlab2 = malloc(b * sizeof *t->hlab2)))
		return tr_fail(err, cap, "out of memory");
	if (!(t->dlab2 = t->be->alloc(t->be, b * sizeof *t->dlab2)) ||
	    !(t->nlab2 = t->be->alloc(t->be, b * sizeof *t->nlab2)) ||
	    !(t->dy2 = t->be->alloc(t->be, b * (size_t)t->loss.k * sizeof *t->dy2)))
		return tr_fail(err, cap, "out of memory on the %s device", t->be->name);
	return 0;
}

/* [net] bn_sync=1: batchnorm's sums added over the ranks (layers/bn.c) */
static void bn_sum(double *sums, size_t n, void *ctx)
{
	(void)ctx;
	cdp_dist_sum_f64(sums, n);
}

static int bn_sync(trainer *t, char *err, size_t cap)
{
	if (!t->net.bn_sync)
		return 0;
	if (t->o->sync != CDP_SYNC_ALLREDUCE)
		return tr_fail(err, cap, "model '%s': bn_sync=1 needs --sync allreduce (the other "
		               "modes train each rank on its own batch)", o_model_name(t));
	t->net.bn_reduce = bn_sum;
	return 0;
}

/* [net] ema=: the moving average of the weights (cdp-model(5)) */
static int ema(trainer *t, char *err, size_t cap)
{
	size_t bytes = t->net.nparams * sizeof(float);

	t->ema = t->oc.ema;     /* read with the optimizer's keys */
	if (t->ema == 0)
		return 0;
	if (t->o->sync != CDP_SYNC_ALLREDUCE)
		return tr_fail(err, cap, "model '%s': ema=%g needs --sync allreduce (the other modes "
		               "evaluate a consensus of their own)", o_model_name(t), t->ema);
	if (!(t->dema = t->be->alloc(t->be, bytes)) || !(t->dtmp = t->be->alloc(t->be, bytes)))
		return tr_fail(err, cap, "out of memory on the %s device", t->be->name);
	return 0;
}

/* "optimizer ...; schedule ..., warm-up ..." of train.log's line */
void tr_optim_text(const trainer *t, char *buf, size_t cap)
{
	const cdp_optim_cfg *c = &t->oc;
	char opt[160], sch[120], warm[160] = "no warm-up";

	if (c->type == CDP_OPT_ADAMW)
		snprintf(opt, sizeof opt, "adamw: lr %g, betas %g %g, eps %g, weight decay %g", c->lr,
		         c->beta1, c->beta2, c->eps, c->weight_decay);
	else
		snprintf(opt, sizeof opt, "sgd: lr %g, momentum %g%s, weight decay %g", c->lr,
		         c->momentum, c->nesterov ? " (nesterov)" : "", c->weight_decay);
	if (c->policy == CDP_LR_COSINE)
		snprintf(sch, sizeof sch, "cosine to %g at step %ld", c->min_lr, c->total_steps);
	else if (c->policy == CDP_LR_STEP)
		snprintf(sch, sizeof sch, "step: x%g every %ld steps", c->gamma, c->step_size);
	else
		snprintf(sch, sizeof sch, "constant");
	if (t->warmup_asked >= 0)
		snprintf(warm, sizeof warm, "warm-up %ld steps from %g of the rate (%ld asked, cut to "
		         "the run: no cosine decay)", c->warmup, c->warmup_factor, t->warmup_asked);
	else if (c->warmup > 0)
		snprintf(warm, sizeof warm, "warm-up %ld steps from %g of the rate", c->warmup,
		         c->warmup_factor);
	snprintf(buf, cap, "optimizer %s; schedule %s, %s", opt, sch, warm);
}

void tr_optim_log(trainer *t)
{
	char line[512];

	tr_optim_text(t, line, sizeof line);
	tr_logf(t, "%s", line);
}

/* ", --lr 0.05 (the checkpoint's 0.01)" onto t->optim_note */
static void optim_note(trainer *t, const char *opt, const char *now, const char *was)
{
	size_t n = strlen(t->optim_note);

	snprintf(t->optim_note + n, sizeof t->optim_note - n, "%s%s %s (the checkpoint's %s)",
	         n ? ", " : "", opt, now, was);
}

static void optim_note_g(trainer *t, const char *opt, double now, double was)
{
	char a[32], b[32];

	snprintf(a, sizeof a, "%g", now);
	snprintf(b, sizeof b, "%g", was);
	optim_note(t, opt, a, b);
}

/* Resuming: the checkpoint's optimizer settings (OPTM) go on, as a
 * PyTorch optimizer's state_dict brings its param_groups back; one the
 * command line gives (given: the cfg's value was replaced by it) is taken
 * and, where it differs, named in t->optim_note. The cfg is the
 * checkpoint's (model_text), so only the command line can differ. The
 * length of the run (total_steps) is this run's: a warm-up that the
 * checkpoint's run cut to its own length (cosine) is the cfg's again. */
static void optim_resume(trainer *t, cdp_optim_cfg *c)
{
	const cdp_train_opts *o = t->o;
	const cdp_optim_cfg *k = &t->ck.optim;
	long warmup = c->warmup;

	if (!t->have_ck || k->type != c->type)
		return;    /* another optimizer: refused by tr_resume */
	if (o->lr >= 0 && c->lr != k->lr)
		optim_note_g(t, "--lr", c->lr, k->lr);
	if (o->momentum >= 0 && c->momentum != k->momentum)
		optim_note_g(t, "--momentum", c->momentum, k->momentum);
	if (o->weight_decay >= 0 && c->weight_decay != k->weight_decay)
		optim_note_g(t, "--weight-decay", c->weight_decay, k->weight_decay);
	if (o->warmup >= 0 && c->warmup != k->warmup)
		optim_note_g(t, "--warmup", (double)c->warmup, (double)k->warmup);
	if (o->nesterov > 0 && !k->nesterov)
		optim_note(t, "--nesterov", "on", "off");
	if (o->schedule >= 0 && c->policy != k->policy)
		optim_note(t, "--schedule", cdp_optim_policy_name(c->policy),
		           cdp_optim_policy_name(k->policy));
	if (o->lr < 0)
		c->lr = k->lr;
	if (o->momentum < 0)
		c->momentum = k->momentum;
	if (o->weight_decay < 0)
		c->weight_decay = k->weight_decay;
	if (o->nesterov < 0)
		c->nesterov = k->nesterov;
	if (o->schedule < 0)
		c->policy = k->policy;
	if (o->warmup < 0)
		c->warmup = k->policy == CDP_LR_COSINE && k->warmup == k->total_steps - 1 &&
		            warmup > k->warmup ? warmup : k->warmup;
	/* the keys only the cfg sets (betas, eps, gamma, clip_norm, ...) come
	 * from the checkpoint's own cfg text: they are its values already */
}

/* The optimizer settings: the cfg's (t->oc, which tr_setup read before the
 * loaders), then the command line's; resuming, the checkpoint's where the
 * command line gives none (optim_resume). */
static int optimizer(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	cdp_optim_cfg *c = &t->oc;

	if (o->optimizer && o->optimizer != c->type) {
		/* the other optimizer's own defaults, then the explicit options */
		cdp_optim_cfg d;
		cdp_optim_defaults(&d);
		c->type = o->optimizer;
		if (o->optimizer == CDP_OPT_ADAMW) {
			c->lr = 0.001f;
			c->weight_decay = 0.01f;
		} else {
			c->lr = d.lr;
			c->weight_decay = d.weight_decay;
			c->momentum = d.momentum;
		}
	}
	if (o->lr >= 0)
		c->lr = (float)o->lr;
	if (o->schedule >= 0)
		c->policy = o->schedule;
	if (o->warmup >= 0)
		c->warmup = o->warmup;
	if (o->momentum >= 0)
		c->momentum = (float)o->momentum;
	if (o->weight_decay >= 0)
		c->weight_decay = (float)o->weight_decay;
	if (o->nesterov >= 0)
		c->nesterov = o->nesterov;
	optim_resume(t, c);
	/* the cfg's optimizer against the command line's sgd settings (main
	 * refused those beside --optimizer adamw), and nesterov without
	 * momentum, which torch.optim.SGD refuses too */
	if (c->type == CDP_OPT_ADAMW && (o->momentum >= 0 || o->nesterov > 0))
		return tr_fail(err, cap, "%s applies to sgd; the optimizer of model '%s' is adamw "
		               "(--optimizer sgd to change it)",
		               o->momentum >= 0 ? "--momentum" : "--nesterov", o_model_name(t));
	if (c->type == CDP_OPT_SGD && c->nesterov && c->momentum == 0)
		return tr_fail(err, cap, "nesterov needs a momentum above 0 (model '%s' with %s)",
		               o_model_name(t), o->momentum == 0 ? "--momentum 0" : "momentum=0");
	t->accumulate = c->accumulate;
	t->spe = (long)(t->ti.steps / (uint64_t)t->accumulate);
	t->total = o->steps ? o->steps : (o->epochs ? o->epochs : 10) * t->spe;
	if (o->steps && o->epochs && o->epochs * t->spe < t->total)
		t->total = o->epochs * t->spe;
	c->total_steps = t->total;
	/* a warm-up as long as the run would leave cosine no steps to decay
	 * over: cut to the run's last step, which train.log's optimizer line
	 * says (the shipped cfgs' warmup= is for runs of thousands of steps;
	 * a short trial run is no mistake, so no warning) */
	t->warmup_asked = -1;
	if (c->policy == CDP_LR_COSINE && c->warmup >= c->total_steps) {
		t->warmup_asked = c->warmup;
		c->warmup = c->total_steps - 1;
	}
	if (cdp_optim_cfg_check(c, err, cap) < 0)
		return -1;
	if (cdp_optim_init(&t->opt, t->be, c, t->net.nparams, err, cap) < 0)
		return -1;
	t->have_opt = 1;
	return 0;
}

/* --resume: rank 0 reads the checkpoint and broadcasts its bytes, and each
 * rank decodes them keeping its own share of the per-rank state, so the
 * file need exist only on rank 0's host (a node-local run directory) and is
 * read once however many ranks share the directory. Collective, the run's
 * first: failed says this rank has already failed (err set), and every
 * rank first agrees on that, so none waits in the broadcast for a rank
 * that will not come; said once when every rank failed alike
 * (tr_agree_report). */
static int fetch_ckpt(trainer *t, const char *path, int failed, char *err, size_t cap)
{
	unsigned char *buf = NULL;
	size_t len = 0;
	char why[256];
	int rc = 0;

	if (tr_agree_report(t, failed, err))
		return -1;
	why[0] = '\0';
	if (cdp_dist_bcast_buf(t->rank == 0 ? cdp_ckpt_load_why(path, &buf, &len, why, sizeof why)
	                                    : 0, &buf, &len, &rc) != 0) /* the rank that failed says why */
		return rc ? tr_fail(err, cap, "cannot resume from '%s': %s", path,
		                    why[0] ? why : cdp_strerror(rc)) : -1;
	/* each rank keeps only its own share of the per-rank state */
	rc = cdp_ckpt_decode_why(buf, len, t->rank, &t->ck, why, sizeof why);
	free(buf);
	if (rc != 0)
		return tr_fail(err, cap, "cannot resume from '%s': %s", path, why);
	if (t->ck.initial) {
		cdp_ckpt_free(&t->ck);
		return tr_fail(err, cap, "cannot resume from '%s': it holds initial weights "
		               "(python3 -m cdpool import-torch), not a run; --init starts one from them",
		               path);
	}
	t->have_ck = 1;
	return 0;
}

/* Resuming: --pad-last and --nan-policy are the checkpoint's run's (RUN)
 * where the command line gives none, as the optimizer settings are
 * (optim_resume). --pad-last moves where every epoch ends, so one given
 * that the run did not have is refused (the flag has no "off" to differ
 * the other way); another --nan-policy is taken and said in t->run_note.
 * Without RUN (an older file), or not resuming: as given, else off and
 * stop. */
static int run_settings(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	const cdp_ckpt *ck = &t->ck;
	int has = t->have_ck && ck->has_run;
	int ck_policy = ck->run_nan_policy == CDP_CKPT_NAN_SKIP ? CDP_NAN_SKIP : CDP_NAN_STOP;

	t->pad_last = o->pad_last > 0 || (o->pad_last < 0 && has && ck->run_pad_last);
	t->nan_policy = o->nan_policy >= 0 ? o->nan_policy : has ? ck_policy : CDP_NAN_STOP;
	if (has && t->pad_last && !ck->run_pad_last)
		return tr_fail(err, cap, "cannot resume '%s/checkpoint.cdpt' with --pad-last: its run "
		               "did not have it, and it changes where each epoch ends (resume "
		               "without --pad-last)", o->out);
	/* --sync too, from RANK (sync, K and RHO), when there is one: a run
	 * without per-rank state had one model, which allreduce goes on with */
	if (t->have_ck && !o->sync_given && ck->nranks > 0) {
		char had[64];

		t->run_o.sync = ck->rank_sync;
		t->run_o.sync_k = ck->rank_k;
		if (ck->rank_sync == CDP_SYNC_ADMM)
			t->run_o.rho = ck->rank_rho;
		tr_sync_name(had, sizeof had, o->sync, o->sync_k, o->rho);
		if (o->sync != CDP_SYNC_ALLREDUCE && cdp_train_allreduce_only(o))
			return tr_fail(err, cap, "cannot resume '%s/checkpoint.cdpt' with %s: its run has "
			               "--sync %s, where it does nothing (resume without %s, or give "
			               "--sync allreduce)", o->out, cdp_train_allreduce_only(o), had,
			               cdp_train_allreduce_only(o));
	}
	if (has && o->nan_policy >= 0 && o->nan_policy != ck_policy)
		snprintf(t->run_note, sizeof t->run_note, "--nan-policy %s (the checkpoint's %s)",
		         o->nan_policy == CDP_NAN_SKIP ? "skip" : "stop",
		         ck_policy == CDP_NAN_SKIP ? "skip" : "stop");
	return 0;
}

/* "2 threads and the avx2 kernels", "a GPU" (RUN's threads 0) */
static void compute_text(char *s, size_t cap, int threads, const char *kernels)
{
	if (threads == 0)
		snprintf(s, cap, "a GPU (%s kernels)", kernels);
	else
		snprintf(s, cap, "%d thread%s and the %s kernels", threads, threads == 1 ? "" : "s",
		         kernels);
}

/* Resuming from a checkpoint with RUN: the sums of a step depend on the
 * CPU threads that split them and the kernels (CDP_CPU_ISA), so another
 * count or ISA than the run's makes the losses leave an uninterrupted
 * run's in the last bits (cdp-train(1)); and another --val-keys list
 * makes --keep-best and --patience compare scores of two lists. Both
 * train on, said in t->compute_note and t->val_note. */
static void run_checks(trainer *t)
{
	const cdp_ckpt *ck = &t->ck;
	int threads = t->be->device >= 0 ? 0 : t->be->threads;
	const char *kernels = cdp_device_kernels(t->be);
	char was[96], now[96];

	if (!t->have_ck || !ck->has_run)
		return;
	if (ck->run_threads != threads || strcmp(ck->run_kernels, kernels) != 0) {
		compute_text(was, sizeof was, ck->run_threads, ck->run_kernels);
		compute_text(now, sizeof now, threads, kernels);
		snprintf(t->compute_note, sizeof t->compute_note, "this run computes with %s, the "
		         "checkpoint's run with %s (--threads, CDP_CPU_ISA): the losses will not "
		         "equal an uninterrupted run's bit for bit", now, was);
	}
	if (t->vl && ck->val_count > 0 &&
	    (strcmp(ck->val_uuid, t->vi.pool->uuid) != 0 || ck->val_seed != t->vi.keys_seed ||
	     ck->val_count != t->vi.count || ck->val_crc != t->vi.keys_crc))
		snprintf(t->val_note, sizeof t->val_note, "'%s' is not the validation list of the "
		         "checkpoint's run (uuid %s, seed %" PRIu64 ", %" PRIu64 " keys, crc32 %08"
		         PRIx32 "; this one uuid %s, seed %" PRIu64 ", %zu keys, crc32 %08" PRIx32 "): "
		         "--keep-best and --patience compare its scores with the other list's",
		         t->o->val_keys, ck->val_uuid, ck->val_seed, ck->val_count, ck->val_crc,
		         t->vi.pool->uuid, t->vi.keys_seed, t->vi.count, t->vi.keys_crc);
}

/* A batchnorm that trains normalizes each channel over the values of one
 * micro-batch (b samples of out.h x out.w; times the ranks under
 * bn_sync=1). Over one value it outputs beta whatever its input, so the
 * layer passes nothing on and the run learns nothing through it:
 * refused, as PyTorch's BatchNorm refuses it in training ("Expected more
 * than 1 value per channel"). A few values (fewer than BN_FEW) are allowed,
 * as PyTorch allows them, with a warning: their variance is noisy and can
 * be near zero, and the first steps' gradients through it huge (ResNet-50's
 * last stage on 32x32 tiles at --batch 2 predicted NaN after one step, in
 * PyTorch's replay of the checkpoint too). A layer frozen for the whole run
 * uses its running statistics and is left alone. */
#define BN_FEW 8
static int bn_values(trainer *t, int frozen_for_good, char *err, size_t cap)
{
	long per = (long)t->o->batch * (t->net.bn_sync ? t->size : 1);
	const cdp_layer *few = NULL;
	int nfew = 0;

	for (int i = 0; i < t->net.nlayers; i++) {
		const cdp_layer *l = &t->net.layers[i];
		long n = per * l->out.h * l->out.w;

		if (strcmp(l->ops->type, "bn") != 0 || (l->frozen && frozen_for_good) ||
		    n >= BN_FEW)
			continue;
		if (n > 1) {
			few = few ? few : l;
			nfew++;
			continue;
		}
		return tr_fail(err, cap, "model '%s': layer %d '%s' (bn) normalizes 1 value per "
		               "channel in training (--batch %d of %dx%d maps): its statistics need "
		               "more (a larger --batch or tile, bn_sync=1 over ranks, or --freeze it)",
		               o_model_name(t), l->index, l->name, t->o->batch, l->out.h, l->out.w);
	}
	if (few && t->rank == 0) {
		char more[64] = "";

		if (nfew > 1)
			snprintf(more, sizeof more, ", and %d more layer%s", nfew - 1,
			         nfew > 2 ? "s" : "");
		fprintf(stderr, "cdp-train: warning: model '%s': layer %d '%s' (bn) normalizes "
		        "only %ld values per channel in training (--batch %d of %dx%d maps)%s: "
		        "noisy statistics, and the first steps' gradients can be huge (a larger "
		        "--batch or tile, bn_sync=1 over ranks, or --freeze it)\n",
		        o_model_name(t), few->index, few->name, per * few->out.h * few->out.w,
		        t->o->batch, few->out.h, few->out.w, more);
	}
	return 0;
}

int tr_freeze(trainer *t, int first, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	int want = o->freeze && (o->unfreeze_at == 0 || t->epoch < (uint64_t)o->unfreeze_at);
	int n;

	if (!first && want == t->frozen)
		return 0;
	if ((n = cdp_net_freeze(&t->net, want ? o->freeze : NULL, err, cap)) < 0 ||
	    cdp_optim_set_layers(&t->opt, &t->net, err, cap) < 0)
		return -1;
	t->frozen = want;
	if (first && bn_values(t, want && o->unfreeze_at == 0, err, cap) < 0)
		return -1;
	if (t->rank == 0 && want) {
		if (o->unfreeze_at)
			tr_logf(t, "frozen: %d layers (--freeze %s) until epoch %ld", n, o->freeze,
			        o->unfreeze_at);
		else
			tr_logf(t, "frozen: %d layers (--freeze %s)", n, o->freeze);
	} else if (t->rank == 0 && o->freeze) {
		tr_logf(t, "unfrozen at epoch %" PRIu64 ": every layer trains", t->epoch);
	}
	return 0;
}

/* --out that mkdir found taken: 0 for a folder (or a link to one), else
 * -1 with what it is instead (the lock's open would have said "Not a
 * directory", or for a dangling link "No such file or directory") */
static int rundir_taken(const char *out, char *err, size_t cap)
{
	struct stat st;
	char to[4096];
	ssize_t n;

	if (stat(out, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 :
		       tr_fail(err, cap, "cannot make the run directory '%s': it is %s, not a "
		               "directory", out, S_ISREG(st.st_mode) ? "a regular file" :
		               S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ?
		               "a character device" : S_ISSOCK(st.st_mode) ? "a socket" :
		               "another kind of file");
	if (errno == ENOENT && (n = readlink(out, to, sizeof to - 1)) >= 0) {
		to[n] = '\0';
		return tr_fail(err, cap, "cannot make the run directory '%s': it is a symbolic link "
		               "to '%s', which does not exist", out, to);
	}
	return tr_fail(err, cap, "cannot make the run directory '%s': %s", out, strerror(errno));
}

int tr_setup(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	char path[4096];
	int threads = o->threads, n, rc = 0, old_rule = 0, made, e;
	struct stat st;
	char why[512];

	if (o->model)
		snprintf(t->model_name, sizeof t->model_name, "%s", o->model);
	else
		snprintf(t->model_name, sizeof t->model_name, "%s/checkpoint.cdpt", o->out);
	if (threads <= 0) {
		threads = cdp_thread_cpus() / cdp_dist_local_share();
		if (threads < 1)
			threads = 1;
	}
	/* The ranks agree on their options before anything is made, at the
	 * first collective a launch without MPI can make (the device's), so a
	 * difference is named as the cause, not what it leads to later. */
	rc = open_device(t, threads, 0, err, cap);
	if (tr_same_opts(t, rc != 0, err, cap) < 0)
		return -1;
	/* A failure here still takes part in fetch_ckpt's agreement below.
	 * Something there that is no folder (a file, a dangling link) is
	 * named by rundir_taken. */
	if ((e = cdp_file_mkdir(o->out, &made)) == 0)
		t->made_out = made;
	else if (e == EEXIST || lstat(o->out, &st) == 0)
		rc = rundir_taken(o->out, err, cap);
	else
		rc = tr_fail(err, cap, "cannot create '%s': %s", o->out, strerror(e));
	if (rc == 0)
		rc = tr_rundir_open(t, err, cap);
	if (o->resume) {
		snprintf(path, sizeof path, "%s/checkpoint.cdpt", o->out);
		rc = fetch_ckpt(t, path, rc != 0, err, cap);
	} else if (tr_agree_report(t, rc != 0, err)) {
		/* as fetch_ckpt: a rank whose RUNDIR was refused would wait in
		 * cdp_train_run's agreement while the others went on to
		 * tr_init_fetch's broadcast */
		return -1;
	}
	if (rc < 0 || run_settings(t, err, cap) < 0)
		return -1;
	if ((o->init && tr_init_fetch(t, err, cap) < 0) || (t->have_ck && tr_init_provenance(t, NULL, err, cap) < 0))
		return -1;
	if (model_text(t, err, cap) < 0)
		return -1;
	/* A resumed checkpoint's cfg naming an unknown [net] key was written
	 * under the old rule (cdp-checkpoint(5)) and is read under it. */
	if ((rc = cdp_cfg_parse(t->cfg_text, o->model ? o->model : path,
	                        (const char *const *)t->ov, t->nov, &t->cfg, err, cap)) < 0) {
		if (rc != CDP_CFG_EUNKNOWN || !t->have_ck ||
		    cdp_cfg_parse_rule(t->cfg_text, o->model ? o->model : path,
		                       (const char *const *)t->ov, t->nov, 1, &t->cfg, why,
		                       sizeof why) < 0)
			return -1;
		old_rule = 1;
		if (cdp_dist_rank() == 0) {
			char msg[1200];
			cdp_cfg_old_rule_warning(msg, sizeof msg, err, t->cfg.old_vars);
			fprintf(stderr, "cdp-train: warning: %s\n", msg);
		}
	}
	t->have_cfg = 1;
	if (cdp_aug_cfg_parse(&t->aug, &t->cfg, &t->cfg.s[0], err, cap) < 0 ||
	    cdp_optim_cfg_parse(&t->oc, &t->cfg, &t->cfg.s[0], err, cap) < 0)
		return -1;
	if (open_loaders(t, err, cap) < 0 || tr_standardize(t, err, cap) < 0)
		return -1;
	run_checks(t);
	if ((old_rule ? cdp_net_build_ckpt(&t->net, t->be, t->cfg_text,
	                                   o->model ? o->model : path, (const char *const *)t->ov,
	                                   t->nov, t->ti.c, t->ti.h, t->ti.w, o->batch, why,
	                                   sizeof why, err, cap)
	              : cdp_net_build(&t->net, t->be, t->cfg_text, o->model ? o->model : path,
	                              (const char *const *)t->ov, t->nov, t->ti.c, t->ti.h,
	                              t->ti.w, o->batch, err, cap)) < 0)
		return -1;
	t->have_net = 1;
	if (check_head(t, err, cap) < 0 || tr_class_names(t, err, cap) < 0)
		return -1;
	/* multi-label: the binary bce (classes 2, one channel) over K labels,
	 * class_weights= their positive weights (--class-weights replaces them) */
	if ((t->multi ? cdp_loss_init_cfg_multi(&t->loss, t->be, &t->cfg, &t->cfg.s[0],
	                                        t->net.classes, err, cap)
	              : cdp_loss_init_cfg(&t->loss, t->be, &t->cfg, &t->cfg.s[0], t->net.classes,
	                                  err, cap)) < 0)
		return -1;
	t->have_loss = 1;
	t->loss.ignore = t->ti.ignore;
	if (!(t->lpart = calloc(4 * ((size_t)t->loss.npart + 1), sizeof *t->lpart)))
		return tr_fail(err, cap, "out of memory");
	if ((!t->multi && !t->reg && tr_check_labels(t, err, cap) < 0) ||
	    tr_class_weights(t, err, cap) < 0)
		return -1;
	if (optimizer(t, err, cap) < 0 || ema(t, err, cap) < 0 || bn_sync(t, err, cap) < 0)
		return -1;
	n = o->batch * t->hw;
	if (!(t->dlab = t->be->alloc(t->be, (size_t)n * sizeof *t->dlab)) ||
	    !(t->pred = t->be->alloc(t->be, (size_t)n * sizeof *t->pred)) ||
	    !(t->nlab = t->be->alloc(t->be, (size_t)n * sizeof *t->nlab)) ||
	    (!t->raw && !(t->nx = t->be->alloc(t->be, (size_t)o->batch * t->ti.c * t->ti.h *
	                                                t->ti.w * sizeof *t->nx))) ||
	    (t->raw && raw_buffers(t) < 0) ||
	    (t->net.nbuffers &&
	     !(t->bufsave = t->be->alloc(t->be, t->net.nbuffers * sizeof *t->bufsave))))
		return tr_fail(err, cap, "out of memory on the %s device", t->be->name);
	if (mix_buffers(t, err, cap) < 0)
		return -1;
	if (t->reg && (!(t->dtgt = t->be->alloc(t->be, (size_t)n * t->loss.k * sizeof *t->dtgt)) ||
	               !(t->ntgt = t->be->alloc(t->be, (size_t)n * t->loss.k * sizeof *t->ntgt))))
		return tr_fail(err, cap, "out of memory on the %s device", t->be->name);
	if (t->reg && t->vl && !(t->rpred = malloc((size_t)n * t->loss.k * sizeof *t->rpred)))
		return tr_fail(err, cap, "out of memory");
	if (t->multi && t->vl &&
	    (!(t->mval = calloc(2 * t->vi.count * (size_t)t->hw, sizeof *t->mval)) ||
	     !(t->mlog = malloc((size_t)n * sizeof *t->mlog))))
		return tr_fail(err, cap, "out of memory");
	cdp_net_init(&t->net, o->seed);
	if (t->have_ck && tr_resume(t, err, cap) < 0)
		return -1;
	if (o->init && tr_init_weights(t, err, cap) < 0)
		return -1;
	if (t->dema && !t->have_ck)    /* a resumed run's came from the checkpoint */
		t->be->copy(t->be, t->dema, t->net.params, t->net.nparams * sizeof(float));
	loss_scale(t);
	if (tr_checkpoint_check(t, err, cap) < 0)
		return -1;
	if (tr_sync_init(t, err, cap) < 0)
		return -1;
	/* resuming: what metrics.jsonl holds at the checkpoint's step, read
	 * before anything is written; a run with nothing left to do stops
	 * here, its files untouched (rank 0; cdp_train_run tells the rest) */
	if (t->have_ck && t->rank == 0) {
		tr_log_scan(t);
		tr_resume_pending(t);
		if (t->complete)
			return 0;
	}
	/* every output against every input, once and before --overwrite
	 * removes anything; tr_trace_open, which runs before this, checked
	 * them already when there is a trace */
	if ((t->rank == 0 && !t->o->trace && tr_check_outputs(t, err, cap) < 0) ||
	    tr_rundir_clear(t, err, cap) < 0 ||
	    (t->rank == 0 && tr_log_open(t, err, cap) < 0))
		return -1;
	for (int i = 0; t->rank == 0 && i < 4; i++)
		if (t->std_note[i][0])
			tr_logf(t, "%s", t->std_note[i]);
	if (t->rank == 0 && t->std_resumed)
		fprintf(stderr, "cdp-train: %s\n", t->std_note[0]);
	if (t->rank == 0 && t->names_note[0])
		tr_logf(t, "%s", t->names_note);
	if (t->rank == 0 && t->optim_note[0]) {
		fprintf(stderr, "cdp-train: warning: resume: the command line changes the "
		        "checkpoint's optimizer settings: %s\n", t->optim_note);
		tr_logf(t, "resume: the command line changes the checkpoint's optimizer settings: %s",
		        t->optim_note);
	}
	if (t->rank == 0 && t->run_note[0]) {
		fprintf(stderr, "cdp-train: warning: resume: the command line changes the "
		        "checkpoint's run settings: %s\n", t->run_note);
		tr_logf(t, "resume: the command line changes the checkpoint's run settings: %s",
		        t->run_note);
	}
	if (t->rank == 0 && t->compute_note[0]) {
		fprintf(stderr, "cdp-train: warning: resume: %s\n", t->compute_note);
		tr_logf(t, "resume: %s", t->compute_note);
	}
	if (t->rank == 0 && t->val_note[0]) {
		fprintf(stderr, "cdp-train: warning: resume: %s\n", t->val_note);
		tr_logf(t, "resume: %s", t->val_note);
	}
	if (t->rank == 0 && t->init_note)
		tr_logf(t, "%s", t->init_note);
	if (t->rank == 0 && t->ema)
		tr_logf(t, "ema %g: validation and checkpoints use the moving average of the "
		        "weights", t->ema);
	if (tr_freeze(t, 1, err, cap) < 0)
		return -1;
	if (t->rank == 0 && t->names_warn)
		fprintf(stderr, "cdp-train: %s\n", t->names_note);
	if (t->have_ck && tr_sync_resume(t, err, cap) < 0)
		return -1;
	if (o->log_keys) {
		snprintf(path, sizeof path, "%s.%d", o->log_keys, t->rank);
		if (!(t->keylog = fopen(path, t->have_ck ? "a" : "w")))
			return tr_fail(err, cap, "cannot create '%s': %s", path, strerror(errno));
	}
	return 0;
}

void tr_teardown(trainer *t)
{
	tr_sync_free(t);
	if (t->keylog)
		fclose(t->keylog);
	tr_log_close(t);
	tr_rundir_close(t);
	if (t->be)
		t->be->copy_wait(t->be);   /* a prefetched batch's copy may be in flight */
	if (t->dema)
		t->be->free(t->be, t->dema);
	if (t->dtmp)
		t->be->free(t->be, t->dtmp);
	if (t->dlab)
		t->be->free(t->be, t->dlab);
	free(t->mval);
	free(t->mlog);
	free(t->rpred);
	if (t->dtgt)
		t->be->free(t->be, t->dtgt);
	if (t->ntgt)
		t->be->free(t->be, t->ntgt);
	if (t->pred)
		t->be->free(t->be, t->pred);
	if (t->nlab)
		t->be->free(t->be, t->nlab);
	if (t->dlab2)
		t->be->free(t->be, t->dlab2);
	if (t->nlab2)
		t->be->free(t->be, t->nlab2);
	if (t->dy2)
		t->be->free(t->be, t->dy2);
	free(t->hlab2);
	if (t->nx)
		t->be->free(t->be, t->nx);
	if (t->draw)
		t->be->free(t->be, t->draw);
	if (t->dlabraw)
		t->be->free(t->be, t->dlabraw);
	if (t->dvalid)
		t->be->free(t->be, t->dvalid);
	if (t->dmean)
		t->be->free(t->be, t->dmean);
	if (t->dinv)
		t->be->free(t->be, t->dinv);
	if (t->bufsave)
		t->be->free(t->be, t->bufsave);
	if (t->have_opt)
		cdp_optim_free(&t->opt);
	if (t->have_loss)
		cdp_loss_free(&t->loss);
	free(t->lpart);
	if (t->have_net)
		cdp_net_free(&t->net);
	if (t->have_cfg)
		cdp_cfg_free(&t->cfg);
	if (t->vl)
		cdp_loader_close(t->vl);
	if (t->tl)
		cdp_loader_close(t->tl);
	if (t->txn)
		cdp_lmdb_txn_release(t->pool.env, t->txn);
	t->txn = NULL;
	if (t->have_pool)
		cdp_pool_close(&t->pool);
	if (t->have_ck)
		cdp_ckpt_free(&t->ck);
	if (t->have_init)
		cdp_ckpt_free(&t->init_ck);
	cdp_ckpt_free(&t->prov);
	tr_standardize_free(t);
	tr_class_names_free(t);
	free(t->cfg_text);
	free(t->init_note);
	free(t->cw);
	if (t->be) {
		cdp_dist_set_backend(NULL);
		t->be->destroy(t->be);
	}
}
