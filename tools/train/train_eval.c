/* train_eval.c: validation, checkpoints and resuming for cdp-train.
 *
 * Validation is exact across ranks: the validation loader gives rank r the
 * keys i with i mod j == r, each once, in batches that may be short (never
 * padded with repeats), and the ranks add up their confusion matrices and
 * the loss's parts (loss.h), so the metrics and the loss (Dice too: of the
 * sums over the whole list, not a mean over batches) are those of the
 * whole validation list, at any j and batch. A multi-label run's average
 * precision needs every score at once: each rank writes its samples'
 * sigmoid scores and truths into the rows of their key indices in a
 * zeroed (2, N, K) array (mval) and one sum all-reduce of it gives every
 * rank, rank 0 included, all of them (each row has one writer, so the sum
 * is exact), from which each computes the same metrics. It
 * runs on the model train_sync.c designates (the average over ranks for
 * average:K, the consensus estimate mean(w + u) for admm) in eval mode.
 *
 * The checkpoint (checkpoint.h, cdp-checkpoint(5)) is written by rank 0 to
 * RUNDIR/checkpoint.cdpt, atomically. It records the cfg text and
 * overrides, parameters and (rank-averaged) batchnorm buffers, the
 * optimizer, the step, the epoch and the samples of the epoch consumed
 * (estep * global batch), the seed, the input bands with the pool's data type
 * and per-band mean and std, the pool's uuid and, for average and admm,
 * every rank's own state (tr_sync_state_save; admm's z in LIVE), and the
 * sums of the loss means that metrics.jsonl's epoch and step lines still
 * owe (SUMS), so a resumed run writes the lines an uninterrupted one would. The input bands are the
 * source raster bands the pool's tiles hold (the sources' band_list, when
 * all sources give the same one), so that cdp-predict reads those bands
 * from a raw scene; otherwise 1..C. The RNG state stored,
 * "epoch_order", is the state the loader permutes the epoch's keys from:
 * all other randomness is derived from (seed, position), see train.c.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_metrics.h"
#include "cdp_rng.h"
#include "cdp_stream.h"
#include "device.h"
#include "dist/dist.h"
#include "train_int.h"

void tr_upload(trainer *t, cdp_loader *l, const cdp_batch *b)
{
	cdp_backend *be = t->be;
	size_t npx = (size_t)b->n * t->hw, bad;

	if (b->n == 0)
		return;
	if (t->reg) {
		be->to_device(be, t->net.x, b->image,
		              (size_t)b->n * b->c * b->h * b->w * sizeof(float));
		be->to_device(be, t->dtgt, b->target, (size_t)b->n * t->loss.k * t->hw * sizeof(float));
		return;
	}
	if (cdp_loss_check_labels(&t->loss, b->label, npx, &bad) != 0)
		TR_FAIL("'%s': record '%s': label %" PRId32 " is not a class of the model "
		        "(%d classes, ignore %d)", t->o->db, cdp_loader_key(l, b->index[bad / t->hw]),
		        b->label[bad], t->loss.classes, t->loss.ignore);
	be->to_device(be, t->net.x, b->image, (size_t)b->n * b->c * b->h * b->w * sizeof(float));
	be->to_device(be, t->dlab, b->label, npx * sizeof(int32_t));
}

/* A multi-label batch's scores (sigmoid of the logits (n, K)) and truths
 * into the rows of their key indices in t->mval; a sample whose labels
 * are ignored (a bad record) gets truth 2, not counted. */
static void multi_scores(trainer *t, const cdp_batch *b, const float *logits)
{
	size_t K = (size_t)t->hw, N = t->vi.count;

	t->be->to_host(t->be, t->mlog, logits, (size_t)b->n * K * sizeof(float));
	for (int i = 0; i < b->n; i++) {
		size_t row = b->index[i] * K;
		for (size_t c = 0; c < K; c++) {
			int32_t y = b->label[(size_t)i * K + c];
			t->mval[row + c] = 1.0 / (1.0 + exp(-(double)t->mlog[(size_t)i * K + c]));
			t->mval[N * K + row + c] = y == 0 || y == 1 ? y : 2;
		}
	}
}

int tr_val_init(trainer *t, tr_val *v)
{
	memset(v, 0, sizeof *v);
	/* a regression run has no confusion matrix: a 2x2 one stays 0 */
	if (cdp_confusion_init(&v->conf, t->reg ? 2 : t->loss.classes) != 0 ||
	    (t->multi && cdp_mlabel_init(&v->ml, t->net.classes) != 0))
		return -1;
	if (t->reg) {
		v->nt = t->loss.k;
		v->rsum = calloc((size_t)v->nt * CDP_REGM_NSUM, sizeof *v->rsum);
		v->rt = calloc((size_t)v->nt, sizeof *v->rt);
		if (!v->rsum || !v->rt)
			return -1;
	}
	return 0;
}

void tr_val_free(tr_val *v)
{
	cdp_confusion_free(&v->conf);
	cdp_mlabel_free(&v->ml);
	free(v->rsum);
	free(v->rt);
	v->rsum = NULL;
	v->rt = NULL;
}

/* A regression batch's sums (cdp_regm) into v->rsum, target c's into row
 * c: predictions and targets (n, T, hw) back on their original scale,
 * y * std + mean per target (shift: its mean, so SS_tot keeps its
 * digits). */
static void reg_sums(trainer *t, const cdp_batch *b, const float *pred, tr_val *v)
{
	size_t hw = (size_t)t->hw, T = (size_t)t->loss.k;

	t->be->to_host(t->be, t->rpred, pred, (size_t)b->n * T * hw * sizeof(float));
	for (int i = 0; i < b->n; i++)
		for (size_t c = 0; c < T; c++) {
			size_t o = ((size_t)i * T + c) * hw;
			cdp_regm_add(v->rsum + c * CDP_REGM_NSUM, t->rpred + o, b->target + o, hw,
			             t->tstd[c], t->tmean[c], t->tmean[c]);
		}
}

/* every rank's scores to every rank, then the metrics (t->mval above) */
static int multi_metrics(trainer *t, tr_val *v)
{
	size_t K = (size_t)t->hw, N = t->vi.count, nk = N * K;
	uint8_t *truth = malloc(nk ? nk : 1), *pred = malloc(nk ? nk : 1);
	int rc = -1;

	cdp_dist_sum_f64(t->mval, 2 * nk);
	if (truth && pred) {
		for (size_t i = 0; i < nk; i++) {
			double y = t->mval[nk + i];
			truth[i] = y == 0 ? 0 : y == 1 ? 1 : 2;
			pred[i] = t->mval[i] >= 0.5;
		}
		rc = cdp_mlabel_compute(&v->ml, N, truth, pred, t->mval);
	}
	free(truth);
	free(pred);
	return rc;
}

int tr_validate(trainer *t, tr_val *v)
{
	cdp_backend *be = t->be;
	cdp_layer *out = &t->net.layers[t->net.out_layer];
	int np = t->loss.npart;
	double *sums = t->lpart, *part = t->lpart + np + 2;
	cdp_loss_result res;
	cdp_batch b;
	char msg[2048];
	int rc;

	memset(sums, 0, ((size_t)np + 1) * sizeof *sums);
	if (t->reg)
		memset(v->rsum, 0, (size_t)v->nt * CDP_REGM_NSUM * sizeof *v->rsum);
	cdp_confusion_reset(&v->conf);
	v->done = 0;
	if (!t->vl)
		return 0;
	if (t->multi)
		memset(t->mval, 0, 2 * t->vi.count * (size_t)t->hw * sizeof *t->mval);
	tr_eval_model_begin(t);
	t->net.train = 0;
	if ((rc = cdp_loader_start_epoch(t->vl, 0, 0)) != 0)
		TR_FAIL("cannot start validation: %s", cdp_strerror(rc));
	while ((rc = cdp_loader_next(t->vl, &b)) == 0) {
		t->skipped += b.skipped;
		if (b.n == 0)
			continue;
		tr_upload(t, t->vl, &b);
		cdp_net_forward(&t->net);
		if (t->reg) {
			cdp_loss_reg_parts(&t->loss, b.n, t->hw, out->y, t->dtgt, out->dy, part);
			for (int i = 0; i < np; i++)
				sums[i] += part[i];
			reg_sums(t, &b, out->y, v);
			continue;
		}
		cdp_loss_parts(&t->loss, b.n, t->hw, out->y, t->dlab, out->dy, part);
		for (int i = 0; i < np; i++)
			sums[i] += part[i];
		if (t->multi) {
			multi_scores(t, &b, out->y);
			continue;
		}
		be->argmax(be, b.n, t->loss.k, t->hw, out->y, t->pred);
		be->confusion(be, b.n * t->hw, t->loss.classes, t->dlab, t->pred, t->loss.ignore,
		              v->conf.counts);
	}
	if (rc != CDP_EEOF && cdp_loader_faulted(t->vl)) {
		/* the pool changed: this rank says so, and the sums below tell
		 * every rank, which then stop as train.c says */
		snprintf(msg, sizeof msg, "%s", cdp_loader_error(t->vl));
		tr_report(t, msg);
		sums[np] = 1;
	} else if (rc != CDP_EEOF) {
		TR_FAIL("%s", *cdp_loader_error(t->vl) ? cdp_loader_error(t->vl) : cdp_strerror(rc));
	}
	t->net.train = 1;
	tr_eval_model_end(t);
	cdp_dist_sum_u64(v->conf.counts, (size_t)v->conf.k * v->conf.k);
	cdp_dist_sum_f64(sums, (size_t)np + 1);
	if (sums[np] > 0)
		return -1;
	if (t->reg) {
		/* plain sums: every rank's add up to one process's */
		cdp_dist_sum_f64(v->rsum, (size_t)v->nt * CDP_REGM_NSUM);
		for (int c = 0; c < v->nt; c++)
			cdp_regm_result(v->rsum + (size_t)c * CDP_REGM_NSUM, &v->rt[c]);
		cdp_regm_pooled(v->rsum, v->nt, &v->rm);
	}
	if (t->multi && multi_metrics(t, v) != 0)
		TR_FAIL("out of memory");
	cdp_loss_of(&t->loss, sums, &res);
	v->loss = res.loss;
	v->done = 1;
	return 0;
}

/* The pool's sources' common band_list into bands[C], or 1..C when a
 * source has none (a pool from chips or an older cdp-tile), or sources
 * differ. A source meta that cannot be read or parsed is an error. */
static int pool_bands(trainer *t, int *bands, int C)
{
	cdp_source s;
	cdp_buf text = { 0 };
	char name[32];
	int rc = CDP_OK, same = 1;
	uint32_t i;

	for (int c = 0; c < C; c++)
		bands[c] = c + 1;
	for (i = 0; same && rc == CDP_OK; i++) {
		snprintf(name, sizeof name, "source.%06" PRIu32, i);
		if ((rc = cdp_pool_meta_get(&t->pool, t->txn, name, &text)) != CDP_OK ||
		    (rc = cdp_source_parse(text.p, text.len, &s)) != CDP_OK)
			break;
		same = s.nband_list == (uint32_t)C;
		for (int c = 0; same && c < C; c++) {
			if (i == 0)
				bands[c] = s.band_list[c];
			same = bands[c] == s.band_list[c];
		}
		cdp_source_free(&s);
	}
	cdp_buf_free(&text);
	if (rc == MDB_NOTFOUND)
		rc = i > 0 ? CDP_OK : rc;
	if (rc != CDP_OK || !same)
		for (int c = 0; c < C; c++)
			bands[c] = c + 1;
	return rc == MDB_NOTFOUND ? CDP_OK : rc;
}

/* The checkpoint of the run as it stands, but for the per-rank state: ck
 * zeroed first; CDP_* on failure (ck then for cdp_ckpt_free). */
static int fill(trainer *t, cdp_ckpt *ck)
{
	const cdp_pool_info *pi = t->ti.pool;
	cdp_rng r;
	int rc = 0, *bands = NULL;
	double *mean = NULL, *sd = NULL;
	int C = t->ti.c;

	memset(ck, 0, sizeof *ck);
	if (!(bands = malloc(C * sizeof *bands)) || !(mean = malloc(C * sizeof *mean)) ||
	    !(sd = malloc(C * sizeof *sd))) {
		rc = CDP_ENOMEM;
		goto done;
	}
	for (int c = 0; c < C; c++) {
		mean[c] = t->std_mean[c];     /* train_std.c's, not always the pool's */
		sd[c] = t->std_sd[c];
	}
	if ((rc = pool_bands(t, bands, C)))
		goto done;
	cdp_rng_seed(&r, cdp_rng_derive(t->o->seed, t->epoch, 0));
	ck->step = (uint64_t)t->step;
	ck->epoch = t->epoch;
	ck->data_pos = (uint64_t)t->estep * t->accumulate * t->o->batch * t->size;
	ck->seed = t->o->seed;
	memcpy(ck->pool_uuid, pi->uuid, sizeof ck->pool_uuid);
	ck->dtype = pi->dtype;              /* lets cdp-predict refuse a raster of another type */
	ck->loss_scale = t->scale;          /* the loss scaler resumes where it was */
	ck->scale_good = (uint64_t)t->scale_good;
	ck->scale_skipped = t->scale_skipped;
	ck->batch = t->o->batch;            /* data_pos counts in their product */
	ck->batch_ranks = t->size;
	ck->batch_accumulate = t->accumulate;
	/* the means of metrics.jsonl's lines still open at this step */
	ck->has_sums = 1;
	ck->sum_epoch_loss = t->ep_loss;
	ck->sum_epoch_steps = (uint64_t)t->ep_steps;
	ck->sum_log_loss = t->iv_loss;
	ck->sum_log_steps = (uint64_t)t->iv_nloss;
	/* what a resume checks: the run's length and its key list */
	ck->has_plan = 1;
	ck->plan_total = (uint64_t)t->total;
	memcpy(ck->keys_uuid, pi->uuid, sizeof ck->keys_uuid);
	ck->keys_seed = t->ti.keys_seed;
	ck->keys_count = t->ti.count;
	ck->keys_crc = t->ti.keys_crc;
	/* what the resume takes or checks that no other chunk holds (RUN) */
	ck->has_run = 1;
	ck->run_pad_last = t->pad_last;
	ck->run_nan_policy = t->nan_policy == CDP_NAN_SKIP ? CDP_CKPT_NAN_SKIP : CDP_CKPT_NAN_STOP;
	ck->run_nan_row = (uint64_t)t->nan_run;
	ck->run_nan_skipped = (uint64_t)t->nan_skipped;
	ck->run_threads = t->be->device >= 0 ? 0 : t->be->threads;
	snprintf(ck->run_kernels, sizeof ck->run_kernels, "%s", cdp_device_kernels(t->be));
	if (t->vl) {
		memcpy(ck->val_uuid, t->vi.pool->uuid, sizeof ck->val_uuid);
		ck->val_seed = t->vi.keys_seed;
		ck->val_count = t->vi.count;
		ck->val_crc = t->vi.keys_crc;
	}
	if ((rc = cdp_ckpt_set_cfg(ck, t->cfg_text, (const char *const *)t->ov, t->nov)) ||
	    (rc = cdp_ckpt_from_net(ck, &t->net)) || (rc = cdp_ckpt_set_optim(ck, &t->opt)) ||
	    (rc = cdp_ckpt_set_rng(ck, "epoch_order", &r)) ||
	    (rc = cdp_ckpt_set_data(ck, bands, C, mean, sd)) ||
	    (rc = cdp_ckpt_set_origin(ck, t->std_from, t->std_src, t->nstd_src, t->crs, t->res_x,
	                              t->res_y)) ||
	    (rc = cdp_ckpt_set_class_names(ck, (const char *const *)t->cnames, t->ncnames)))
		goto done;
	/* where the initial weights came from (--init's, or the resumed run's) */
	for (int i = 0; i < t->prov.nfrom && rc == 0; i++)
		rc = cdp_ckpt_add_from(ck, t->prov.from[i].kind, t->prov.from[i].name,
		                       t->prov.from[i].sha256);
	/* a regression net: its outputs' standardization (TASK) */
	if (!rc && t->reg)
		rc = cdp_ckpt_set_task(ck, CDP_CKPT_TASK_REGRESSION, t->tmean, t->tstd, t->loss.k);
	if (rc)
		goto done;
	/* [net] ema=: PARM got the average (tr_eval_model_begin), LIVE the
	 * trained weights it stands in for; admm: PARM the consensus
	 * estimate, LIVE z, which the ranks' w and u continue from */
	if (t->dema || t->z) {
		if (!(ck->live = malloc(t->net.nparams * sizeof(float)))) {
			rc = CDP_ENOMEM;
			goto done;
		}
		ck->nlive = t->net.nparams;
		t->be->to_host(t->be, ck->live, t->dema ? t->dtmp : t->z, ck->nlive * sizeof(float));
	}
done:
	free(bands);
	free(mean);
	free(sd);
	return rc;
}

int tr_checkpoint_check(trainer *t, char *err, size_t cap)
{
	cdp_ckpt ck;
	char why[256];
	int rc = fill(t, &ck);

	if (rc == 0 && cdp_ckpt_validate(&ck, why, sizeof why) != 0) {
		snprintf(err, cap, "this run could not save its checkpoint '%s/checkpoint.cdpt' "
		         "(from pool '%s'): %s", t->o->out, t->o->db, why);
		rc = -1;
	} else if (rc != 0) {
		snprintf(err, cap, "cannot prepare the checkpoint '%s/checkpoint.cdpt': %s", t->o->out,
		         cdp_strerror(rc));
		rc = -1;
	}
	cdp_ckpt_free(&ck);
	return rc;
}

/* BEST records --keep-best's metric in train.h's numbering */
_Static_assert((int)CDP_BEST_MIOU == CDP_CKPT_BEST_MIOU &&
               (int)CDP_BEST_LOSS == CDP_CKPT_BEST_LOSS && (int)CDP_BEST_ACC == CDP_CKPT_BEST_ACC &&
               (int)CDP_BEST_F1 == CDP_CKPT_BEST_F1 && (int)CDP_BEST_MAP == CDP_CKPT_BEST_MAP &&
               (int)CDP_BEST_RMSE == CDP_CKPT_BEST_RMSE && (int)CDP_BEST_R2 == CDP_CKPT_BEST_R2,
               "--keep-best's metrics are BEST's");

/* RUNDIR/name: checkpoint.cdpt, or best.cdpt (--keep-best), which
 * records in BEST the metric and the validation that kept it */
static void write_checkpoint(trainer *t, const char *name)
{
	cdp_ckpt ck;
	char path[4096], why[256] = "";
	int rc = 0;

	tr_eval_model_begin(t);
	if (t->rank != 0) {
		if ((rc = tr_sync_state_save(t, NULL)) != 0)
			TR_FAIL("cannot send the local state for '%s/%s': %s", t->o->out, name,
			        cdp_strerror(rc));
		goto out;
	}
	snprintf(path, sizeof path, "%s/%s", t->o->out, name);
	if ((rc = fill(t, &ck)) || (rc = tr_sync_state_save(t, &ck)))
		goto done;
	if (!strcmp(name, "best.cdpt")) {
		ck.has_best = 1;
		ck.best_metric = t->o->keep_best;
		ck.best_value = t->best;
		ck.best_step = (uint64_t)t->step;
	}
	/* a refused value is named; the file keeps what it held */
	if (cdp_ckpt_validate(&ck, why, sizeof why) != 0)
		rc = CDP_EINVAL;
	else
		rc = cdp_ckpt_write(path, &ck);
done:
	cdp_ckpt_free(&ck);
	/* a value the file cannot hold (a moment or weight that overflowed
	 * with a finite loss): the run cannot go on, and says what is left */
	if (rc != 0 && why[0]) {
		char kept[4200];
		tr_ckpt_kept(t, kept, sizeof kept);
		TR_FAIL("cannot write '%s' at step %ld: %s: training stopped, %s", path, t->step,
		        why, kept);
	}
	if (rc != 0)
		TR_FAIL("cannot write '%s' at step %ld: %s", path, t->step, cdp_strerror(rc));
	tr_logf(t, "%scheckpoint at step %ld: %s", strcmp(name, "best.cdpt") ? "" : "best ",
	        t->step, path);
out:
	if (!strcmp(name, "checkpoint.cdpt"))
		t->ck_step = t->step;
	tr_eval_model_end(t);
}

void tr_ckpt_kept(const trainer *t, char *buf, size_t cap)
{
	if (t->ck_step >= 0)
		snprintf(buf, cap, "'%s/checkpoint.cdpt' keeps step %ld", t->o->out, t->ck_step);
	else
		snprintf(buf, cap, "no checkpoint written");
}

void tr_checkpoint(trainer *t)
{
	write_checkpoint(t, "checkpoint.cdpt");
}

double tr_best_value(const trainer *t, const tr_val *v)
{
	switch (t->o->keep_best) {
	case CDP_BEST_MIOU: return cdp_metrics_miou(v->conf.counts, v->conf.k, NULL);
	case CDP_BEST_LOSS: return v->loss;
	case CDP_BEST_ACC: return cdp_metrics_accuracy(v->conf.counts, v->conf.k);
	case CDP_BEST_F1: return v->ml.micro_f1;
	case CDP_BEST_MAP: return v->ml.map;
	case CDP_BEST_RMSE: return v->rm.rmse;
	case CDP_BEST_R2: return v->rm.r2;
	}
	return NAN;
}

const char *tr_best_key(const trainer *t)
{
	switch (t->o->keep_best) {
	case CDP_BEST_MIOU: return "miou";
	case CDP_BEST_LOSS: return "loss";
	case CDP_BEST_F1: return "micro_f1";
	case CDP_BEST_MAP: return "map";
	case CDP_BEST_RMSE: return "rmse";
	case CDP_BEST_R2: return "r2";
	}
	return "accuracy";
}

int tr_best_lower(const trainer *t)
{
	return t->o->keep_best == CDP_BEST_LOSS || t->o->keep_best == CDP_BEST_RMSE;
}

void tr_keep_best(trainer *t, const tr_val *v)
{
	double x = tr_best_value(t, v);
	int lower = tr_best_lower(t);

	/* a NaN is never best; ties keep the earlier */
	if (!t->o->keep_best || !v->done || !isfinite(x) ||
	    (t->have_best && (lower ? !(x < t->best) : !(x > t->best))))
		return;
	t->best = x;
	t->have_best = 1;
	write_checkpoint(t, "best.cdpt");
	tr_logf(t, "best %s so far at step %ld: %g",
	        t->o->keep_best == CDP_BEST_LOSS ? "validation loss" : tr_best_key(t),
	        t->step, x);
}

int tr_patience_see(trainer *t, double x, long step)
{
	double d = t->o->min_delta;
	int lower = tr_best_lower(t);

	if (!t->o->patience)
		return 0;
	if (isfinite(x) && (!t->have_pbest || (lower ? x < t->pbest - d : x > t->pbest + d))) {
		t->pbest = x;
		t->pbest_step = step;
		t->have_pbest = 1;
		t->pwait = 0;
	} else {
		t->pwait++;
	}
	return t->pwait >= t->o->patience;
}

int tr_patience(trainer *t, const tr_val *v)
{
	const char *name = tr_best_key(t);

	char by[64] = "", best[96] = "no finite value";

	if (!t->o->patience || !v->done || !tr_patience_see(t, tr_best_value(t, v), t->step))
		return 0;
	if (t->o->min_delta > 0)
		snprintf(by, sizeof by, " by more than %g", t->o->min_delta);
	if (t->have_pbest)
		snprintf(best, sizeof best, "best %.4f at step %ld", t->pbest, t->pbest_step);
	/* the run ends as a finished one (exit 0): why, on stderr too */
	if (t->rank == 0)
		fprintf(stderr, "cdp-train: stopped at step %ld: val %s did not improve%s in %ld "
		        "validations (%s)\n", t->step, name, by, t->pwait, best);
	tr_logf(t, "stopping early at step %ld: %s has not improved by more than %g for %ld "
	        "validations (best %g)", t->step, name, t->o->min_delta, t->pwait, t->pbest);
	if (t->rank == 0 && t->jsonl) {
		fprintf(t->jsonl, "{\"type\":\"stop\",\"step\":%ld,\"reason\":\"patience\","
		        "\"metric\":\"%s\",\"best\":%.17g,\"patience\":%ld,\"min_delta\":%.17g}\n",
		        t->step, name, t->have_pbest ? t->pbest : 0.0, t->pwait, t->o->min_delta);
		tr_jsonl_end(t);
	}
	return 1;
}

/* "4 x 2 ranks", "4 x 1 rank x 2 accumulated" */
static void describe_batch(char *s, size_t cap, int batch, int ranks, int accumulate)
{
	int k = snprintf(s, cap, "%d x %d rank%s", batch, ranks, ranks == 1 ? "" : "s");

	if (accumulate > 1 && k > 0 && (size_t)k < cap)
		snprintf(s + k, cap - (size_t)k, " x %d accumulated", accumulate);
}

int tr_val_on_grid(const trainer *t, long step)
{
	return t->o->val_every ? step % t->o->val_every == 0 : step % t->spe == 0;
}

void tr_resume_pending(trainer *t)
{
	const cdp_train_opts *o = t->o;
	long s = t->step;
	int end = s % t->spe == 0;
	/* as train.c's loop decides, and its last validation at the run's end */
	int due = t->vl && ((o->val_every ? s % o->val_every == 0 : end) || s == t->total);

	t->val_pending = due && !t->ck_val;
	t->epoch_pending = t->val_pending && end && !t->ck_epoch;
	t->complete = s == t->total && !t->val_pending;
}

int tr_resume(trainer *t, char *err, size_t cap)
{
	const cdp_ckpt *ck = &t->ck;
	uint64_t gb = (uint64_t)t->accumulate * t->o->batch * t->size;

	if (strcmp(ck->pool_uuid, t->ti.pool->uuid) != 0) {
		snprintf(err, cap, "the checkpoint in '%s' was trained on pool %s, '%s' is %s",
		         t->o->out, ck->pool_uuid, t->o->db, t->ti.pool->uuid);
		return -1;
	}
	if (ck->has_plan && (strcmp(ck->keys_uuid, t->ti.pool->uuid) || ck->keys_seed != t->ti.keys_seed ||
	                     ck->keys_count != t->ti.count || ck->keys_crc != t->ti.keys_crc)) {
		snprintf(err, cap, "'%s': not the key list the checkpoint in '%s' was trained on "
		         "(uuid %s, seed %" PRIu64 ", %" PRIu64 " keys, crc32 %08" PRIx32 "; this one "
		         "uuid %s, seed %" PRIu64 ", %zu keys, crc32 %08" PRIx32 ")", t->o->keys,
		         t->o->out, ck->keys_uuid, ck->keys_seed, ck->keys_count, ck->keys_crc,
		         t->ti.pool->uuid, t->ti.keys_seed, t->ti.count, t->ti.keys_crc);
		return -1;
	}
	/* a checkpoint beyond this run's end would train backwards */
	if (ck->step > (uint64_t)t->total) {
		snprintf(err, cap, "'%s/checkpoint.cdpt': at step %" PRIu64 ", past this run's last "
		         "step %ld (give --epochs or --steps that reach beyond it to train on)",
		         t->o->out, ck->step, t->total);
		return -1;
	}
	if (ck->seed != t->o->seed) {
		snprintf(err, cap, "the checkpoint in '%s' was trained with --seed %" PRIu64
		         " (the data order depends on it)", t->o->out, ck->seed);
		return -1;
	}
	/* the data order and the step count are planned in global batches:
	 * another one would skip or repeat samples (issue 14); the number of
	 * ranks may differ. Older checkpoints do not say: the position must at
	 * least be a whole number of this run's steps. */
	if (cdp_ckpt_global_batch(ck) != 0 && cdp_ckpt_global_batch(ck) != gb) {
		char was[96], now[96];
		describe_batch(was, sizeof was, ck->batch, ck->batch_ranks, ck->batch_accumulate);
		describe_batch(now, sizeof now, t->o->batch, t->size, t->accumulate);
		snprintf(err, cap, "cannot resume '%s/checkpoint.cdpt': it was trained with a global "
		         "batch of %" PRIu64 " (%s), this run has %" PRIu64 " (%s)", t->o->out,
		         cdp_ckpt_global_batch(ck), was, gb, now);
		return -1;
	}
	if (ck->data_pos % gb != 0) {
		snprintf(err, cap, "the checkpoint in '%s' stopped after %" PRIu64 " samples of "
		         "epoch %" PRIu64 ", not a whole number of steps of the global batch %" PRIu64
		         " (resume with the same --batch times ranks)", t->o->out, ck->data_pos,
		         ck->epoch, gb);
		return -1;
	}
	if (ck->data_pos / gb > (uint64_t)t->spe) {
		snprintf(err, cap, "the checkpoint in '%s' stopped after %" PRIu64 " samples of "
		         "epoch %" PRIu64 ", past the end of an epoch of %ld steps of %" PRIu64
		         " (resume with the pointer file it was trained on)", t->o->out, ck->data_pos,
		         ck->epoch, t->spe, gb);
		return -1;
	}
	/* The step follows from the epoch and the position in it only at the
	 * global batch (and pointer file) the run was trained with; at another,
	 * whose position happens to be a whole number of steps, every later
	 * step would read other samples. */
	if (ck->epoch > ck->step / (uint64_t)t->spe ||
	    ck->step - ck->epoch * (uint64_t)t->spe != ck->data_pos / gb) {
		snprintf(err, cap, "the checkpoint in '%s' is at step %" PRIu64 ", %" PRIu64
		         " samples into epoch %" PRIu64 ", where steps of %" PRIu64 " samples, %ld an "
		         "epoch, do not lead (resume with the global batch it was trained with, "
		         "--batch times ranks, and --pad-last as that run had it: this run %s "
		         "--pad-last)", t->o->out, ck->step, ck->data_pos, ck->epoch, gb, t->spe,
		         t->pad_last ? "gives" : "does not give");
		return -1;
	}
	if (ck->optim.type != t->oc.type) {
		snprintf(err, cap, "the checkpoint in '%s' holds %s state, the run uses %s",
		         t->o->out, cdp_optim_type_name(ck->optim.type),
		         cdp_optim_type_name(t->oc.type));
		return -1;
	}
	if (cdp_ckpt_to_net(ck, &t->net, err, cap) != 0 ||
	    cdp_ckpt_to_optim(ck, &t->opt, err, cap) != 0)
		return -1;
	/* with LIVE, PARM is the moving average and LIVE the trained weights,
	 * or (admm) PARM the consensus estimate, where every rank starts when
	 * it drops its own state, and LIVE z (tr_sync_begin) */
	if (t->dema)
		t->be->copy(t->be, t->dema, t->net.params, t->net.nparams * sizeof(float));
	if (ck->live && !tr_sync_ckpt_z(t)) {
		if (ck->nlive != t->net.nparams) {
			snprintf(err, cap, "the checkpoint in '%s' holds %zu trained weights, the net "
			         "has %zu", t->o->out, ck->nlive, t->net.nparams);
			return -1;
		}
		t->be->to_device(t->be, t->net.params, ck->live, ck->nlive * sizeof(float));
	}
	t->step = (long)ck->step;
	t->ck_step = t->step;
	t->epoch = ck->epoch;
	t->estep = (long)(ck->data_pos / gb);
	/* --nan-policy skip's count goes on, so the job ends where an
	 * uninterrupted one would (none before RUN: counted from here) */
	if (ck->has_run) {
		t->nan_run = (long)ck->run_nan_row;
		t->nan_skipped = (long)ck->run_nan_skipped;
	}
	/* the epoch's and the step line's sums so far (none before version 7:
	 * those lines then average the steps after the resume only) */
	if (ck->has_sums) {
		t->ep_loss = ck->sum_epoch_loss;
		t->ep_steps = (long)ck->sum_epoch_steps;
		t->iv_loss = ck->sum_log_loss;
		t->iv_nloss = (long)ck->sum_log_steps;
	}
	if (t->estep == t->spe) {
		t->epoch++;
		t->estep = 0;
		t->ep_loss = 0;
		t->ep_steps = 0;
	}
	return 0;
}
