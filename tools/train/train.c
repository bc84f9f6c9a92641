/* train.c: the training loop of cdp-train (train.h, man/cdp-train.1).
 *
 * One optimizer step takes A = accumulate micro-batches of b samples per
 * rank (global batch A*j*b). Per micro-batch: the loader's batch goes to
 * the device, forward, loss, then one small sum over ranks of the loss's
 * parts (loss sum, counted pixels, Dice's three sums: loss.h) and a stop
 * flag. It gives the global loss for the log, lets every rank take the
 * gradient of the global batch's loss (so the averaged gradient is the
 * one process with the global batch would take, even when ranks count
 * different numbers of pixels, e.g. nodata, and for Dice, which is no
 * mean over samples), and makes every rank see a SIGINT/SIGTERM at the
 * same step, and a rank without a batch (the pool changed under it: the
 * step is then dropped everywhere before its backward, and the run ends
 * with the checkpoint of the step before). A log that rank 0 cannot
 * write (train_log.c) stops the run as a failure at the end of its step,
 * on every rank, with a checkpoint as SIGTERM's. Backward
 * starts the gradient reductions bucket by bucket (train_sync.c); the step
 * waits for them, updates, and, every so many steps, logs, validates and
 * checkpoints, all collectively at steps every rank knows in advance.
 *
 * The next micro-batch's copy to the device is queued while backward
 * runs (fetch_batch), and --loss-scale's dynamic loss scaling judges the
 * gradients before the optimizer step (scale_check).
 *
 * Randomness is counter-based: the epoch order and augmentations come from
 * (seed, epoch, key) in the loader, dropout masks from (seed, global
 * micro-batch, rank), so a resumed run needs only the seed and the
 * position, which the checkpoint holds, to continue bit for bit.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_progress.h"
#include "cdp_rng.h"
#include "dist/dist.h"
#include "train_int.h"
#include "train_trace.h"

volatile sig_atomic_t cdp_train_stop;

void cdp_train_opts_init(cdp_train_opts *o)
{
	memset(o, 0, sizeof *o);
	o->batch = 8;
	o->lr = -1;
	o->schedule = -1;
	o->warmup = -1;
	o->momentum = -1;
	o->weight_decay = -1;
	o->nesterov = -1;
	o->seed = 1;
	o->sync = CDP_SYNC_ALLREDUCE;
	o->sync_k = 1;
	o->step_per_bucket = 1;
	o->rho = 0.01;
	o->device = "cpu";
	o->precision = CDP_PREC_FP32;
	o->loss_scale = -1;
	o->allreduce = -1;
	o->overlap = CDP_OVERLAP_ON;
	o->bucket_mb = 0;            /* auto: tr_sync_init */
	o->log_every = 10;
	o->load = CDP_LOAD_POOL;
	o->progress = CDP_PROGRESS_AUTO;
	o->pad_last = -1;            /* the trainer's pad_last and nan_policy */
	o->nan_policy = -1;          /* resolve these (train_setup.c run_settings) */
}

const char *cdp_train_allreduce_only(const cdp_train_opts *o)
{
	if (o->grad_compress != CDP_DIST_COMP_NONE)
		return "--grad-compress";
	if (o->overlap_given)
		return o->overlap_given;
	return o->bucket_mb > 0 ? "--bucket-mb" : NULL;
}

static void bad_label(trainer *t, const cdp_batch *b, int i, int32_t v)
{
	TR_FAIL("'%s': record '%s': label %" PRId32 " is not a class of the model "
	        "(%d classes, ignore %d)", t->o->db, cdp_loader_key(t->tl, b->index[i]), v,
	        t->loss.classes, t->loss.ignore);
}

static void upload(trainer *t, void *dst, const void *src, size_t bytes)
{
	t->be->to_device_async(t->be, dst, src, bytes);
	t->up_bytes += (double)bytes;
}

/* A raw batch (loader.h "The data path"): its labels checked where each
 * sample's crop window keeps them, so that a bad label outside it fails
 * neither path, and its stored pixels, labels and validity queued into
 * draw, dlabraw (class labels: nlab) and dvalid, for take_batch. */
static void fetch_raw(trainer *t, const cdp_batch *b)
{
	size_t hw = (size_t)b->in_h * b->in_w, bad;
	int px = t->ti.label_kind != CDP_LABEL_CLASS;

	for (int i = 0; i < b->n; i++) {
		const cdp_prep_aug *a = &b->aug[i];
		int wh = a->rot & 1 ? b->w : b->h, ww = a->rot & 1 ? b->h : b->w;
		if (!px) {
			if (cdp_loss_check_labels(&t->loss, &b->label[i], 1, &bad) != 0)
				bad_label(t, b, i, b->label[i]);
			continue;
		}
		for (int y = 0; y < wh; y++) {
			const int32_t *row = b->label + i * hw + (size_t)(a->y0 + y) * b->in_w + a->x0;
			if (cdp_loss_check_labels(&t->loss, row, (size_t)ww, &bad) != 0)
				bad_label(t, b, i, row[bad]);
		}
	}
	upload(t, t->draw, b->raw, (size_t)b->n * t->ti.raw_size);
	if (px)
		upload(t, t->dlabraw, b->label, (size_t)b->n * hw * sizeof(int32_t));
	else
		upload(t, t->nlab, b->label, (size_t)b->n * sizeof(int32_t));
	if (b->valid)
		upload(t, t->dvalid, b->valid, (size_t)b->n * b->h * b->w);
}

/* MixUp / CutMix of the host batch b in place (augment.h), drawn from
 * (seed, epoch, step): every rank mixes its own samples (pairs within a
 * rank's batch, as timm and torchvision under DDP) with the same lam and
 * box, and a resumed run draws what the uninterrupted one did. Queues the
 * flipped labels into nlab2; nmix keeps lam for the loss. */
static void mix_batch(trainer *t, cdp_batch *b)
{
	uint64_t seed = cdp_rng_derive(cdp_rng_derive(t->o->seed, b->epoch, 2), b->step, 0);

	cdp_mix_draw(&t->aug, b->h, b->w, seed, &t->nmix);
	if (!t->nmix.on)
		return;
	cdp_mix_apply(&t->nmix, b->n, b->c, b->h, b->w, b->image);
	/* a sample's labels: its class, or a multi-label head's K (hw) */
	for (int i = 0; i < b->n; i++)
		memcpy(t->hlab2 + (size_t)i * t->hw, b->label + (size_t)(b->n - 1 - i) * t->hw,
		       (size_t)t->hw * sizeof *t->hlab2);
	upload(t, t->nlab2, t->hlab2, (size_t)b->n * t->hw * sizeof(int32_t));
}

/* The next training batch: labels checked on the host, its copy to the
 * device queued into nx, nlab (be->to_device_async; raw: fetch_raw), to
 * run while the current step computes. nx held the batch of the step
 * before the current one, and draw the current one, both read by ops that
 * have run: the current step's loss has come back to the host since
 * (cdp_loss_compute returns a value), and ops run in order. The batch's
 * host memory (the loader's, pinned on a GPU) must outlive its copy, so
 * the host waits for the copies (be->copy_wait) before cdp_loader_next
 * gives the previous batch's slot back to the loader. */
static void fetch_batch(trainer *t, long step)
{
	cdp_backend *be = t->be;
	cdp_batch *b = &t->next;
	size_t npx, bad;
	double t0 = t->trace ? cdp_now() : 0;
	int rc;

	be->copy_wait(be);
	if ((rc = cdp_loader_next(t->tl, b)) != 0 && cdp_loader_faulted(t->tl)) {
		/* the steps done can still be saved: the step that needs this
		 * batch is dropped on every rank (micro_batch) */
		char msg[2048];
		snprintf(msg, sizeof msg, "%s", cdp_loader_error(t->tl));
		tr_report(t, msg);
		t->pool_fault = 1;
		return;
	}
	if (rc != 0)
		TR_FAIL("%s", rc == CDP_EEOF ? "the epoch ended early" :
		        *cdp_loader_error(t->tl) ? cdp_loader_error(t->tl) : cdp_strerror(rc));
	/* --trace: the wait for the batch of `step` */
	if (t->trace)
		tr_trace_span(t->trace, TR_DATA, t0, cdp_now(), step, 0);
	t->up_batches++;
	t->have_next = 1;
	if (t->raw) {
		fetch_raw(t, b);
		return;
	}
	npx = (size_t)b->n * t->hw;
	if (t->reg) {
		upload(t, t->nx, b->image, (size_t)b->n * b->c * b->h * b->w * sizeof(float));
		upload(t, t->ntgt, b->target, npx * t->loss.k * sizeof(float));
		return;
	}
	if (cdp_loss_check_labels(&t->loss, b->label, npx, &bad) != 0)
		bad_label(t, b, (int)(bad / t->hw), b->label[bad]);
	if (t->hlab2)
		mix_batch(t, b);
	upload(t, t->nx, b->image, (size_t)b->n * b->c * b->h * b->w * sizeof(float));
	upload(t, t->nlab, b->label, npx * sizeof(int32_t));
}

/* The raw batch b, its copies fenced, into net.x and dlab: prep_batch
 * converts, standardizes and transforms (the host path's floats, bit for
 * bit); then every band of an invalid pixel becomes 0 as on the host path,
 * by dropout's backward at p = 0 (dx = valid ? dy * 1 : 0, exact, +0.0f)
 * over each (sample, band) plane with the sample's validity (h, w). */
static void prep_raw(trainer *t, const cdp_batch *b)
{
	cdp_backend *be = t->be;
	size_t ohw = (size_t)b->h * b->w;
	int px = t->ti.label_kind != CDP_LABEL_CLASS;

	be->prep_batch(be, b->dtype, b->n, b->c, b->in_h, b->in_w, t->draw, t->dmean, t->dinv,
	               b->aug, b->h, b->w, t->net.x, px ? t->dlabraw : NULL, px ? t->dlab : NULL);
	if (!px) {
		int32_t *lab = t->dlab;
		t->dlab = t->nlab;
		t->nlab = lab;
	}
	if (!b->valid)
		return;
	for (int i = 0; i < b->n; i++)
		for (int ch = 0; ch < b->c; ch++) {
			float *x = t->net.x + ((size_t)i * b->c + ch) * ohw;
			be->dropout_bwd(be, 0.0f, t->dvalid + i * ohw, x, x, 0.0f, ohw);
		}
}

/* The batch for this micro-batch (fetched now when none is prefetched):
 * compute waits for its copy (be->copy_fence, the host does not), and its
 * buffers become the net's input and the labels (raw: prep_raw makes
 * them). -1, b empty, when the pool changed and there is none. */
static int take_batch(trainer *t, cdp_batch *b)
{
	float *x;
	int32_t *lab;

	if (!t->have_next && !t->pool_fault)
		fetch_batch(t, t->step + 1);
	if (!t->have_next) {
		memset(b, 0, sizeof *b);
		return -1;
	}
	*b = t->next;
	t->have_next = 0;
	t->be->copy_fence(t->be);
	if (t->raw) {
		prep_raw(t, b);
		return 0;
	}
	x = t->net.x, t->net.x = t->nx, t->nx = x;
	lab = t->dlab, t->dlab = t->nlab, t->nlab = lab;
	lab = t->dlab2, t->dlab2 = t->nlab2, t->nlab2 = lab;
	x = t->dtgt, t->dtgt = t->ntgt, t->ntgt = x;
	t->mix = t->nmix;
	return 0;
}

/* The mixed batch's loss lam L(y) + (1 - lam) L(y flipped) and its
 * gradient: out->dy holds L(y)'s (cdp_loss_finish), the flipped labels'
 * comes into dy2 from their parts (totals v2, this rank's own part2). */
static void mix_loss(trainer *t, const cdp_batch *b, int sync, const double *v2,
                     const double *part2, cdp_loss_result *res)
{
	cdp_layer *out = &t->net.layers[t->net.out_layer];
	size_t n = (size_t)b->n * t->loss.k * t->hw;
	double lam = t->mix.lam;
	cdp_loss_result r2;

	cdp_loss_finish(&t->loss, b->n, t->hw, out->y, t->dlab2, sync ? v2 : part2,
	                sync ? t->size : 1, t->dy2, &r2);
	if (!sync)
		cdp_loss_of(&t->loss, v2, &r2);
	t->be->scale(t->be, out->dy, (float)lam, n);
	t->be->axpy(t->be, (float)(1.0 - lam), t->dy2, out->dy, n);
	res->loss = lam * res->loss + (1.0 - lam) * r2.loss;
}

/* One micro-batch: returns the loss of the global batch; *stop from any
 * rank; *lost when a rank had no batch (the pool changed): the step is
 * then dropped on every rank, before its backward. */
static double micro_batch(trainer *t, uint64_t micro, int *stop, int *lost)
{
	cdp_layer *out = &t->net.layers[t->net.out_layer];
	cdp_loss_result res;
	cdp_batch b;
	/* mixing: the parts of the flipped labels' loss follow the labels' own */
	int np = t->loss.npart, nm = t->hlab2 ? 2 * np : np;
	double *part = t->lpart, *v = t->lpart + 2 * np + 2, g, t0, t1 = 0;
	int sync = t->o->sync == CDP_SYNC_ALLREDUCE, have = take_batch(t, &b) == 0;
	int mixed = have && t->mix.on;

	t->iv_wait += b.wait_s;
	t->skipped += b.skipped;
	if (t->keylog && have)
		tr_log_keys(t, &b);
	t->net.step_seed = cdp_rng_derive(t->o->seed ^ 0x64726f706f7574ull, micro, (uint64_t)t->rank);
	t0 = t->trace ? cdp_now() : 0;
	memset(part, 0, (size_t)nm * sizeof *part);
	/* with bn_sync a rank without a batch still runs the forward (on the
	 * input it holds) for the other ranks' batchnorm sums; the step is
	 * dropped below */
	if (!have && t->net.bn_sync)
		cdp_net_forward(&t->net);
	if (have) {
		cdp_net_forward(&t->net);
		if (t->reg)
			cdp_loss_reg_parts(&t->loss, b.n, t->hw, out->y, t->dtgt, out->dy, part);
		else
			cdp_loss_parts(&t->loss, b.n, t->hw, out->y, t->dlab, out->dy, part);
		if (mixed)
			cdp_loss_parts(&t->loss, b.n, t->hw, out->y, t->dlab2, t->dy2, part + np);
	}
	if (t->trace)
		tr_trace_span(t->trace, TR_FORWARD, t0, t1 = cdp_now(), t->step + 1, 0);
	/* one sum over ranks: the loss's parts (loss.h), the stop flag and
	 * the ranks without a batch */
	memcpy(v, part, (size_t)nm * sizeof *part);
	v[nm] = cdp_train_stop ? 1 : 0;
	v[nm + 1] = !have;
	cdp_dist_sum_f64(v, (size_t)nm + 2);
	if (t->trace)
		tr_trace_span(t->trace, TR_LOSS_SUM, t1, cdp_now(), t->step + 1, 0);
	if (v[nm] > 0)
		*stop = 1;
	if (v[nm + 1] > 0) {
		*lost = 1;
		return 0;
	}
	/* allreduce: the gradient of the global batch's loss (CE/BCE mean
	 * over every rank's counted pixels, Dice of the global sums), times j
	 * as the all-reduce averages over j ranks. average/admm: each rank
	 * minimises the loss of its own batch. */
	if (t->reg)
		cdp_loss_reg_finish(&t->loss, b.n, t->hw, sync ? v : part, sync ? t->size : 1, out->dy,
		                    &res);
	else
		cdp_loss_finish(&t->loss, b.n, t->hw, out->y, t->dlab, sync ? v : part,
		                sync ? t->size : 1, out->dy, &res);
	if (!sync)
		cdp_loss_of(&t->loss, v, &res);
	if (mixed)
		mix_loss(t, &b, sync, v + np, part + np, &res);
	/* times the loss scale */
	g = t->scale > 0 ? t->scale : 1;
	if (g != 1.0)
		t->be->scale(t->be, out->dy, (float)g, (size_t)b.n * t->loss.k * t->hw);
	return res.loss;
}

/* Dynamic loss scaling, as PyTorch's GradScaler (growth 2, backoff 0.5,
 * interval 2000). The gradients hold `scale` times the true ones: the
 * reduced ones under --sync allreduce, so every rank finds the same, the
 * local ones otherwise, so the ranks agree on the verdict with a
 * reduction. Not finite: the step is skipped on every rank (gradients
 * zeroed, parameters and optimizer untouched) and the scale halves.
 * Finite: the gradients are unscaled, ahead of clipping and the
 * optimizer, and after 2000 finite steps in a row the scale doubles.
 * Returns 1 when the step goes ahead. */
static int scale_check(trainer *t)
{
	cdp_backend *be = t->be;
	size_t n = t->net.nparams;
	int bad;

	if (t->scale <= 0)
		return 1;
	bad = !isfinite(be->sumsq(be, t->net.grads, n));
	if (t->o->sync != CDP_SYNC_ALLREDUCE)
		bad = cdp_dist_any(bad);
	if (bad) {
		tr_logf(t, "step %ld: the gradients overflowed at loss scale %g, step skipped",
		        t->step + 1, t->scale);
		t->scale = fmax(t->scale * 0.5, 1e-30);
		t->scale_good = 0;
		t->scale_skipped++;
		be->fill(be, t->net.grads, 0.0f, n);
		t->opt.micro = 0;
		return 0;
	}
	/* 1 / scale must stay a normal float: beyond 2^64 in two steps */
	if (t->scale > 0x1p64) {
		be->scale(be, t->net.grads, (float)(0x1p64 / t->scale), n);
		be->scale(be, t->net.grads, 0x1p-64f, n);
	} else {
		be->scale(be, t->net.grads, (float)(1.0 / t->scale), n);
	}
	if (++t->scale_good >= 2000) {
		t->scale = fmin(t->scale * 2, 1e300);
		t->scale_good = 0;
	}
	return 1;
}

/* A step whose loss, gradient or buffers are not finite, outside the loss
 * scaler's skips (its gradients are zeroed, the update not made, the
 * buffers restored): under --nan-policy stop the job ends here, before any
 * checkpoint holds what followed; under skip it is counted and logged, and
 * ends the job after CDP_NAN_MAX_SKIPS in a row. said: what is not finite
 * ("the loss is nan"). Returns 0 (the step did not go ahead). */
static int nonfinite(trainer *t, const char *said)
{
	char kept[4200];

	tr_ckpt_kept(t, kept, sizeof kept);
	if (t->nan_policy == CDP_NAN_STOP) {
		tr_logf(t, "step %ld: %s: training stopped", t->step + 1, said);
		TR_FAIL("step %ld: %s: training stopped (--nan-policy stop), %s", t->step + 1, said,
		        kept);
	}
	t->nan_skipped++;
	tr_logf(t, "step %ld: %s, update skipped (%ld in a row, %ld in this run)", t->step + 1,
	        said, t->nan_run + 1, t->nan_skipped);
	if (++t->nan_run >= CDP_NAN_MAX_SKIPS)
		TR_FAIL("step %ld: %s: %ld steps in a row were not finite, training stopped, %s",
		        t->step + 1, said, t->nan_run, kept);
	return 0;
}

/* The buffers (batchnorm running statistics) after this step's forward
 * passes, on every rank alike: 1 when one is not finite on some rank, with
 * said saying which value of this rank's ("buffer tensor 'enc0.var' is inf
 * at element 0"). The checkpoint refuses such a buffer, so without this
 * check the run would go on to its next write and fail there, with no
 * checkpoint of the steps since. One sum over nbuffers floats (two per
 * channel of each bn layer): nothing next to the step. */
static int buffers_bad(trainer *t, char *said, size_t cap)
{
	cdp_backend *be = t->be;
	cdp_ckpt ck = { 0 };
	float *h;
	size_t i = 0, at = 0;
	int bad;

	if (!t->net.nbuffers)
		return 0;
	bad = !isfinite(be->sumsq(be, t->net.buffers, t->net.nbuffers));
	if (!cdp_dist_any(bad))
		return 0;
	snprintf(said, cap, "a buffer tensor of another rank is not finite");
	if (!bad || !(h = malloc(t->net.nbuffers * sizeof *h)))
		return 1;
	be->to_host(be, h, t->net.buffers, t->net.nbuffers * sizeof *h);
	while (i + 1 < t->net.nbuffers && isfinite(h[i]))
		i++;
	snprintf(said, cap, "a buffer tensor is %g at element %zu", h[i], i);
	/* the checkpoint's names: BUFS's tensors tile the block in order */
	if (cdp_ckpt_from_net(&ck, &t->net) == 0)
		for (int k = 0; k < ck.nbuffers; at += ck.buffers[k].numel, k++)
			if (i < at + ck.buffers[k].numel) {
				snprintf(said, cap, "buffer tensor '%s' is %g at element %zu",
				         ck.buffers[k].name, h[i], i - at);
				break;
			}
	cdp_ckpt_free(&ck);
	free(h);
	return 1;
}

/* One line on stderr: at an epoch's end "epoch N" (t->epoch, already
 * counting the epoch that ended, so N from 1); done, after a last
 * validation no epoch's line showed, "done: epoch N" with the epoch then
 * under way counted the same way and how far it got. */
static void report(trainer *t, const tr_val *v, int done)
{
	char m[512] = "", ep[96];

	if (t->rank != 0 || t->o->quiet)
		return;
	if (v && v->done) {
		char cm[400];
		tr_val_format(t, v, cm, sizeof cm);
		snprintf(m, sizeof m, ", val loss %.4f %s", v->loss, cm);
	}
	if (done && t->estep)
		snprintf(ep, sizeof ep, "done: epoch %" PRIu64 " (%ld of %ld steps)", t->epoch + 1,
		         t->estep, t->spe);
	else
		snprintf(ep, sizeof ep, "%sepoch %" PRIu64, done ? "done: " : "", t->epoch);
	if (t->ep_steps)
		fprintf(stderr, "cdp-train: %s step %ld/%ld loss %.4f%s\n", ep, t->step, t->total,
		        t->ep_loss / t->ep_steps, m);
	else
		fprintf(stderr, "cdp-train: %s step %ld/%ld%s\n", ep, t->step, t->total, m);
}

/* An epoch's end: its metrics.jsonl line (with validation v, or NULL),
 * its line on stderr and the plot; its loss sums start anew. */
static void end_epoch(trainer *t, const tr_val *v)
{
	tr_log_epoch(t, v);
	report(t, v, 0);
	tr_plot(t);
	t->ep_loss = 0;
	t->ep_steps = 0;
}

/* Resuming from a checkpoint whose step had a validation due that its
 * run did not make (it stopped on that step): that validation, on the
 * checkpoint's model, which is the model of that step, logged as the
 * uninterrupted run logs it, then the epoch line it was owed. Returns 1
 * when the pool changed under it (tr_validate). */
static int resume_validate(trainer *t, tr_val *v, int *early)
{
	tr_logf(t, "the validation due at step %ld, which the run stopped before", t->step);
	if (tr_validate(t, v) < 0)
		return 1;
	tr_log_val(t, v);
	/* the last step of a run, off the grid, counts for neither (as at
	 * the end of train_loop) */
	if (tr_val_on_grid(t, t->step)) {
		tr_keep_best(t, v);
		*early = tr_patience(t, v);
	}
	if (t->epoch_pending)
		end_epoch(t, v);
	return 0;
}

static int train_loop(trainer *t)
{
	const cdp_train_opts *o = t->o;
	cdp_progress pr;
	tr_val v = { 0 };
	/* shown: the last validation is on an epoch's line on stderr; failed:
	 * a log could not be written (train_log.c) */
	int stop = 0, lost = 0, started = 0, validated = 0, ckpted = 0, early = 0, shown = 0;
	int failed = 0, ret;
	long first = t->step;
	char dev[64], sync[64];

	if (tr_val_init(t, &v) != 0)
		TR_FAIL("out of memory");
	cdp_progress_start(&pr, t->rank == 0 ? o->progress : CDP_PROGRESS_OFF, "cdp-train",
	                   "training", (uint64_t)t->total);
	pr.done = (uint64_t)t->step;
	t->iv_t0 = cdp_now();
	cdp_dist_stats_reset();
	tr_sync_name(sync, sizeof sync, o->sync, o->sync_k, o->rho);
	tr_logf(t, "start at step %ld of %ld (epoch %" PRIu64 ", %ld steps per epoch), %d rank%s, "
	        "global batch %d, --sync %s", t->step, t->total, t->epoch, t->spe, t->size,
	        t->size == 1 ? "" : "s", o->batch * t->size * t->accumulate, sync);
	if (t->be->device >= 0)
		snprintf(dev, sizeof dev, "%s:%d", t->be->name, t->be->device);
	else
		snprintf(dev, sizeof dev, "%s, %d thread%s", t->be->name, t->be->threads,
		         t->be->threads == 1 ? "" : "s");
	tr_logf(t, "device %s, precision %s (kernels %s), loss scale %g, all-reduce %s%s%s", dev,
	        cdp_precision_name(o->precision), cdp_device_kernels(t->be), t->scale,
	        cdp_dist_algo_name(t->algo),
	        cdp_dist_staged() ? " staged through host memory" : "",
	        cdp_dist_threaded() ? " on a communication thread" : "");
	tr_logf(t, "activations %.1f MiB a batch (%s), their gradients %.1f MiB",
	        (double)t->net.act_bytes / 1048576.0,
	        t->net.stash ? "bf16 stash of what backward reads" : "fp32",
	        (double)t->net.dact_bytes / 1048576.0);
	tr_optim_log(t);
	tr_overlap_begin(t);
	tr_buckets_log(t);
	tr_class_weights_log(t);
	if (t->raw)
		tr_logf(t, "data path device: raw %s tiles, prepared by the %s backend",
		        cdp_dtype_name(t->ti.pool->dtype), t->be->name);
	else
		tr_logf(t, "data path host: float32 tiles, prepared by the loader");
	if (t->val_pending) {
		lost = resume_validate(t, &v, &early);
		validated = !lost;
		shown = t->epoch_pending;
	}
	while (t->step < t->total && !stop && !lost && !early) {
		int epoch_end = 0, go, finite, parts, due;
		char said[CDP_CKPT_NAME_MAX + 96];
		long applied;                   /* the optimizer's steps before this one */
		double loss = 0, lr, ts = t->trace ? cdp_now() : 0, tp = 0, top = cdp_now();
		long s1 = t->step + 1;          /* this step's number, as metrics.jsonl's */
		/* the schedule runs on the run's steps, skipped ones too (a
		 * non-finite loss or gradient), as a PyTorch scheduler stepped
		 * every iteration; AdamW's bias correction counts applied ones */
		t->opt.sched = t->step;
		if (s1 == o->stop_at)
			cdp_train_stop = 1;

		if (!started) {
			char why[300];
			int rc;
			if (tr_freeze(t, 0, why, sizeof why) < 0)
				TR_FAIL("%s", why);
			rc = cdp_loader_start_epoch(t->tl, t->epoch,
			                                (uint64_t)(t->estep * t->accumulate));
			if (rc != 0)
				TR_FAIL("cannot start epoch %" PRIu64 ": %s", t->epoch, cdp_strerror(rc));
			started = 1;
		}
		/* the buffers (batchnorm statistics) that a dropped step's forward
		 * passes would change: the checkpoint keeps the step before it */
		if (t->bufsave)
			t->be->copy(t->be, t->bufsave, t->net.buffers, t->net.nbuffers * sizeof(float));
		for (int a = 0; a < t->accumulate && !lost; a++) {
			uint64_t micro = (uint64_t)t->step * t->accumulate + a;
			t->last_micro = a == t->accumulate - 1;
			loss += micro_batch(t, micro, &stop, &lost) / t->accumulate;
			if (lost)
				break;
			if (t->trace)
				tp = t->tr_mark = cdp_now();
			cdp_net_backward(&t->net, tr_on_layer_done, t);
			if (t->trace)
				tr_trace_span(t->trace, TR_BACKWARD, tp, cdp_now(), s1, 0);
			cdp_optim_micro_done(&t->opt);
			/* while backward runs: the next micro-batch of this epoch */
			if (a + 1 < t->accumulate ||
			    (!stop && t->estep + 1 < t->spe && t->step + 1 < t->total))
				fetch_batch(t, a + 1 < t->accumulate ? s1 : s1 + 1);
		}
		if (lost) {
			if (t->bufsave)
				t->be->copy(t->be, t->net.buffers, t->bufsave,
				            t->net.nbuffers * sizeof(float));
			break;
		}
		/* the loss scale judges the reduced gradients (allreduce) and
		 * the local ones (average, admm); in parts,
		 * each bucket's update as soon as it is reduced (tr_sync_parts:
		 * only where no check needs the whole gradient first) */
		parts = !t->parts_off && isfinite(loss);
		if (parts) {
			tr_sync_parts(t, s1);
			if (t->trace)
				tr_trace_buckets(t, s1);
		} else if (o->sync == CDP_SYNC_ALLREDUCE) {
			tp = t->trace ? cdp_now() : 0;
			tr_sync_grads(t);
			if (t->trace) {
				tr_trace_span(t->trace, TR_GRAD_WAIT, tp, cdp_now(), s1, 0);
				tr_trace_buckets(t, s1);
			}
		}
		tp = t->trace ? cdp_now() : 0;
		go = scale_check(t);
		lr = cdp_optim_next_lr(&t->opt);
		applied = t->opt.step;
		finite = 1;
		if (go && !isfinite(loss)) {
			t->be->fill(t->be, t->net.grads, 0.0f, t->net.nparams);
			t->opt.micro = 0;
			snprintf(said, sizeof said, "the loss is %g", loss);
			finite = nonfinite(t, said);
		} else if (go && buffers_bad(t, said, sizeof said)) {
			/* the statistics of a forward pass that overflowed:
			 * not a model any checkpoint can keep */
			t->be->fill(t->be, t->net.grads, 0.0f, t->net.nparams);
			t->opt.micro = 0;
			finite = nonfinite(t, said);
		} else if (go && (parts ? cdp_optim_parts_done(&t->opt) :
		                  cdp_optim_step(&t->opt, t->net.params, t->net.grads)) != 0) {
			snprintf(said, sizeof said, "the gradient norm is %g", t->opt.last_norm);
			finite = nonfinite(t, said);
		} else if (go) {
			t->nan_run = 0;
		}
		/* --nan-policy skip: the step is undone, its forward passes'
		 * batchnorm statistics too (NaN after a NaN loss) */
		if (!finite && t->bufsave)
			t->be->copy(t->be, t->net.buffers, t->bufsave, t->net.nbuffers * sizeof(float));
		/* ADMM's penalty follows a step the optimizer took, at its rate */
		if (t->opt.step != applied)
			tr_sync_prox(t);
		if (t->trace) {
			double now = cdp_now();
			tr_trace_span(t->trace, TR_OPTIM, tp, now, s1, 0);
			tp = now;
		}
		t->step++;
		t->estep++;
		tr_overlap_step(t, cdp_now() - top);
		if (t->dema)
			tr_ema_update(t);
		tr_sync_after_step(t);
		if (t->trace && o->sync != CDP_SYNC_ALLREDUCE && t->step % o->sync_k == 0)
			tr_trace_span(t->trace, TR_SYNC, tp, cdp_now(), s1, 0);
		if (finite && isfinite(loss)) {    /* a skipped NaN would make every mean NaN */
			t->iv_loss += loss;
			t->iv_steps++;
			t->iv_nloss++;
			t->ep_loss += loss;
			t->ep_steps++;
		}
		if (t->estep == t->spe) {
			epoch_end = 1;
			t->epoch++;
			t->estep = 0;
			started = 0;
		}
		if (t->step % o->log_every == 0 || t->step == t->total)
			tr_log_step(t, lr, t->step % o->log_every == 0);
		validated = 0;
		due = t->vl && ((o->val_every && t->step % o->val_every == 0) ||
		                (!o->val_every && epoch_end));
		/* stopping: the checkpoint first, within mpirun's grace
		 * (cdp-train(1)); the resumed run makes the validation due */
		if (due && !stop) {
			tp = t->trace ? cdp_now() : 0;
			lost = tr_validate(t, &v) < 0;
			if (t->trace)
				tr_trace_span(t->trace, TR_VALIDATE, tp, cdp_now(), s1, 0);
			if (!lost) {
				tr_log_val(t, &v);
				tr_keep_best(t, &v);
				validated = 1;
				shown = 0;
				early = tr_patience(t, &v);
			}
		}
		/* a stop left the validation due here to the resumed run, and the
		 * epoch's line, which follows it, with its sums in the checkpoint */
		if (epoch_end && !(stop && due)) {
			end_epoch(t, validated ? &v : NULL);
			shown = validated;
		}
		/* the step's lines are out: a log rank 0 could not write stops
		 * the run here on every rank, with this step's checkpoint, so a
		 * resume goes on from the last line written */
		if (cdp_dist_any(t->log_failed))
			stop = failed = 1;
		ckpted = 0;
		if (stop || (o->checkpoint_every && t->step % o->checkpoint_every == 0)) {
			tp = t->trace ? cdp_now() : 0;
			tr_checkpoint(t);
			if (t->trace)
				tr_trace_span(t->trace, TR_CHECKPOINT, tp, cdp_now(), s1, 0);
			ckpted = 1;
		}
		if (t->trace)
			tr_trace_span(t->trace, TR_STEP, ts, cdp_now(), s1, 0);
		cdp_progress_update(&pr, (uint64_t)t->step);
	}
	/* stopped (a signal, a failed log) or the pool lost: no ", done"
	 * before the "stopped at step" line */
	cdp_progress_finish(&pr, !stop && !lost);
	if (t->up_batches)
		tr_logf(t, "data path %s: %.0f bytes a batch to the device (%ld batches)",
		        t->raw ? "device" : "host", t->up_bytes / (double)t->up_batches, t->up_batches);
	if (!stop && !lost) {
		double tp;
		stop = cdp_dist_any(cdp_train_stop);
		if (t->vl && !validated && !stop) {
			tp = t->trace ? cdp_now() : 0;
			lost = tr_validate(t, &v) < 0;
			if (t->trace)
				tr_trace_span(t->trace, TR_VALIDATE, tp, cdp_now(), t->step, 0);
			/* a validation only because the run ends here, off the
			 * grid, is logged but counts for neither --keep-best nor
			 * --patience: a longer run, or the next chunk of one cut
			 * by --steps, does not validate here, and would otherwise
			 * keep another best.cdpt and stop elsewhere (cdp-train(1)) */
			if (!lost) {
				tr_log_val(t, &v);
				if (tr_val_on_grid(t, t->step))
					tr_keep_best(t, &v);
				shown = 0;
			}
		}
		if (!ckpted) {
			tp = t->trace ? cdp_now() : 0;
			tr_checkpoint(t);
			ckpted = 1;
			if (t->trace)
				tr_trace_span(t->trace, TR_CHECKPOINT, tp, cdp_now(), t->step, 0);
		}
	}
	if (lost) {
		/* the pool changed: the steps done are saved as SIGTERM saves
		 * them, unless this run did none */
		if (!ckpted && t->step > first)
			tr_checkpoint(t);
		tr_plot(t);
		tr_logf(t, "stopped at step %ld: the pool changed under the run", t->step);
		if (t->rank == 0 && t->step > first)
			fprintf(stderr, "cdp-train: training stopped at step %ld, checkpoint written to "
			        "'%s/checkpoint.cdpt'\n", t->step, o->out);
		else if (t->rank == 0)
			fprintf(stderr, "cdp-train: training stopped before its first step, nothing "
			        "to save\n");
		tr_val_free(&v);
		return 1;
	}
	tr_plot(t);
	if (failed) {
		/* the other log, when it still works */
		tr_logf(t, "stopped at step %ld: a log could not be written; checkpoint written",
		        t->step);
		if (t->rank == 0)
			fprintf(stderr, "cdp-train: training stopped at step %ld, checkpoint written to "
			        "'%s/checkpoint.cdpt'\n", t->step, o->out);
	} else if (stop) {
		tr_logf(t, "interrupted: checkpoint at step %ld written", t->step);
		if (t->rank == 0)
			fprintf(stderr, "cdp-train: interrupted at step %ld, checkpoint written to "
			        "'%s/checkpoint.cdpt'\n", t->step, o->out);
	} else {
		tr_logf(t, "done at step %ld%s", t->step, early ? " (stopped early, --patience)" : "");
		if (t->vl && !shown)
			report(t, &v, 1);
	}
	tr_val_free(&v);
	ret = stop ? 3 : 0;
	/* the last lines and the close can fail too: the run then fails on
	 * every rank, its checkpoint already written */
	if (t->rank == 0)
		tr_log_close(t);
	if (cdp_dist_any(t->log_failed))
		ret = 1;
	return ret;
}

void tr_report(const trainer *t, char *err)
{
	if (!err[0])
		return;
	if (t->size > 1)
		fprintf(stderr, "cdp-train: rank %d: %s\n", t->rank, err);
	else
		fprintf(stderr, "cdp-train: %s\n", err);
	err[0] = '\0';
}

int tr_agree_report(const trainer *t, int failed, char *err)
{
	uint64_t head[2], same;
	uint32_t crc = failed ? cdp_crc32(0, err, strlen(err)) : 0;

	if (!cdp_dist_any(failed))
		return 0;
	/* one process, or a failed rank stopping alone (cdp_dist_any):
	 * no one to agree with */
	if (t->size == 1 || (cdp_dist_env_launch() && !cdp_dist_nccl_usable())) {
		if (failed)
			tr_report(t, err);
		return 1;
	}
	/* each rank holds its message against rank 0's (by their CRCs) */
	head[0] = t->rank == 0 ? (uint64_t)(failed != 0) : 0;
	head[1] = t->rank == 0 ? crc : 0;
	cdp_dist_bcast_bytes(head, sizeof head);
	same = failed && head[0] && crc == head[1];
	cdp_dist_sum_u64(&same, 1);
	if (same == (uint64_t)t->size) {
		if (t->rank == 0 && err[0])
			fprintf(stderr, "cdp-train: %s\n", err);
		err[0] = '\0';
	} else if (failed)
		tr_report(t, err);
	return 1;
}

int cdp_train_run(const cdp_train_opts *o)
{
	trainer t;
	char err[TR_ERR] = "";
	int rc;

	memset(&t, 0, sizeof t);
	t.run_o = *o;
	t.o = &t.run_o;
	t.ck_step = -1;
	t.rank = cdp_dist_rank();
	t.size = cdp_dist_size();
	/* the trace first: an unwritable FILE leaves no RUNDIR behind */
	rc = o->trace ? tr_trace_open(&t, err, sizeof err) : 0;
	if (rc == 0)
		rc = tr_setup(&t, err, sizeof err);
	if (tr_agree_report(&t, rc, err) || (t.size > 1 && tr_same_data(&t))) {
		tr_trace_free(&t);
		tr_rundir_abandon(&t);
		tr_teardown(&t);
		/* a run refused before its first step leaves no RUNDIR it made;
		 * rmdir keeps one that holds anything. Every rank makes RUNDIR,
		 * and on one host the rank that made it may be another than
		 * rank 0, whose .lock and files are in it until its teardown:
		 * the ranks remove it after a barrier, and no rank exits before
		 * they have, since mpirun kills the job's other processes when
		 * one exits non-zero (a launch without MPI has no mpirun, and its
		 * collectives may be what failed: NCCL without a GPU) */
		if (t.size > 1 && !cdp_dist_env_launch())
			cdp_dist_barrier();
		if (t.made_out)
			rmdir(o->out);
		if (t.size > 1 && !cdp_dist_env_launch())
			cdp_dist_barrier();
		return 1;
	}
	/* one model on every rank, whatever each initialised or read */
	cdp_dist_bcast(t.net.params, t.net.nparams);
	if (t.net.nbuffers)
		cdp_dist_bcast(t.net.buffers, t.net.nbuffers);
	if (t.dema)
		cdp_dist_bcast(t.dema, t.net.nparams);
	if (t.have_ck) {    /* what rank 0 read of metrics.jsonl (tr_log_scan) */
		int z = t.rank == 0;
		double b[9] = { z ? t.have_best : 0, z ? t.best : 0, z ? t.have_pbest : 0,
		                z ? t.pbest : 0, z ? (double)t.pwait : 0, z ? (double)t.pbest_step : 0,
		                z ? t.val_pending : 0, z ? t.epoch_pending : 0, z ? t.complete : 0 };
		cdp_dist_sum_f64(b, 9);
		t.have_best = b[0] > 0;
		t.best = b[1];
		t.have_pbest = b[2] > 0;
		t.pbest = b[3];
		t.pwait = (long)b[4];
		t.pbest_step = (long)b[5];
		t.val_pending = b[6] > 0;
		t.epoch_pending = b[7] > 0;
		t.complete = b[8] > 0;
	}
	if (t.complete) {
		/* nothing written: metrics.jsonl, train.log and the checkpoint
		 * stay as the run that finished left them */
		if (t.rank == 0)
			fprintf(stderr, "cdp-train: '%s' is complete: step %ld of %ld, nothing to do\n",
			        o->out, t.step, t.total);
		tr_trace_free(&t);
		tr_teardown(&t);
		return 0;
	}
	if (t.best_other)    /* rank 0 said so on stderr (tr_log_scan) */
		tr_logf(&t, "best.cdpt was kept by %s; --keep-best %s keeps it anew from the next "
		        "validation", cdp_ckpt_best_name(t.best_other),
		        cdp_ckpt_best_name(t.o->keep_best));
	/* only cosine's rate depends on the run's length (step's and
	 * constant's do not): another --epochs or --steps plans it anew */
	if (t.have_ck && t.ck.has_plan && t.ck.plan_total != (uint64_t)t.total &&
	    t.oc.policy == CDP_LR_COSINE) {
		if (t.rank == 0)
			fprintf(stderr, "cdp-train: warning: this run ends at step %ld, the checkpoint's "
			        "at step %" PRIu64 ": the cosine learning-rate schedule is re-planned over "
			        "%ld steps\n", t.total, t.ck.plan_total, t.total);
		tr_logf(&t, "the run ends at step %ld, the checkpoint's at step %" PRIu64 ": the "
		        "cosine schedule is re-planned over %ld steps", t.total, t.ck.plan_total,
		        t.total);
	}
	tr_sync_begin(&t);
	if (t.trace)
		tr_trace_begin(&t);
	t.t_start = cdp_now();
	rc = train_loop(&t);
	if (tr_trace_close(&t) != 0 && rc == 0)
		rc = 1;
	tr_teardown(&t);
	if (rc && t.made_out)
		rmdir(o->out);
	return rc;
}
