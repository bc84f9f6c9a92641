/* train_sync.c: how the ranks' models stay one model (--sync).
 *
 *  allreduce  synchronous SGD. Gradients are registered with dist.h in
 *             buckets cut at layer boundaries; the backward callback hands
 *             each finished layer to cdp_dist_layer_done, so a bucket's
 *             reduction starts while earlier layers still run backward, and
 *             tr_sync_grads waits for the rest before the optimizer step;
 *             or, where nothing needs the whole gradient first (no_parts),
 *             tr_sync_parts applies the optimizer to each bucket as soon
 *             as it is reduced, while later ones are in flight.
 *             The reduction averages over ranks; train.c has already
 *             scaled each rank's loss gradient by its share of the counted
 *             pixels, so the average is the mean over the global batch.
 *  average:K  every rank steps on its own gradients; after every K steps
 *             the parameters are averaged (block training).
 *  admm:K:RHO global-consensus ADMM: each rank minimises its loss plus
 *             rho/2 |w - z + u|^2 for K steps, then z = mean(w + u),
 *             u += w - z. A step is the optimizer's on the loss, then the
 *             penalty's proximal step (tr_sync_prox): Boyd et al.'s
 *             x-update by proximal gradient splitting, stable at any rho,
 *             where the penalty's gradient added to the loss's made SGD
 *             diverge once lr rho > 2. The model validated and saved is
 *             the consensus estimate of the current step, mean(w + u) (the
 *             z-update with the current u), which is the ranks' mean
 *             mean(w), as mean(u) stays 0; not z, which only moves every
 *             K steps: a run validated or ended between rounds would lose
 *             the steps since the last one.
 * Batchnorm running statistics are buffers no optimizer touches; they are
 * averaged over ranks before every validation and checkpoint (and at every
 * averaging round of average/admm), so every rank evaluates and saves the
 * same model. That average is taken on a copy and each rank's own
 * statistics come back afterwards (with average and admm, like its
 * parameters), so validating or checkpointing never changes the course of
 * the run; with allreduce the checkpoint's per-rank section holds each
 * rank's own statistics alone, so a resume continues them bit for bit.
 *
 * Resuming average and admm exactly: between averaging points every rank
 * has its own parameters, optimizer moments and step count, batchnorm
 * statistics and (admm) dual u, none of which the consensus model in the
 * checkpoint holds. tr_sync_state_save gathers them to rank 0 into the
 * checkpoint's per-rank section (checkpoint.h); on --resume with the same
 * j and --sync every rank puts its own back (tr_sync_begin), so the run
 * continues as if never stopped, at any step, not only at averaging
 * points. Otherwise every rank starts from the checkpoint's model (for
 * admm the consensus estimate, with u = 0) and rank 0 says so in one line.
 * An admm checkpoint keeps z in its LIVE chunk, since PARM holds that
 * estimate (tr_sync_ckpt_z).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_progress.h"
#include "dist/dist.h"
#include "train_int.h"
#include "train_trace.h"

static unsigned local_what(const trainer *t);

/* Whether the optimizer can run bucket by bucket, and if not why: every
 * check before the update that needs the whole reduced gradient keeps the
 * update after the last bucket (issue 29: clipping by the global norm,
 * the loss scaler's overflow test, --nan-policy skip's refusal of a step
 * that is not finite, accumulation). NULL when it can. */
static const char *no_parts(const trainer *t)
{
	if (!t->o->step_per_bucket)
		return "CDP_TRAIN_STEP_PER_BUCKET=0";
	if (t->scale > 0)
		return "the loss scaler tests the whole gradient";
	if (!cdp_optim_parts_ok(&t->opt))
		return t->opt.cfg.clip_norm > 0 ? "clip_norm needs the whole gradient's norm" :
		       "accumulate= divides the whole gradient";
	if (t->nan_policy != CDP_NAN_STOP)
		return "--nan-policy skip refuses a step before any of it is applied";
	if (!cdp_dist_bucket_wait_ok())
		return "the gradients are reduced on the device or staged through host memory";
	return NULL;
}

int tr_sync_init(trainer *t, char *err, size_t cap)
{
	const cdp_net *net = &t->net;
	size_t n = net->nparams * sizeof(float), bucket;
	int rc;

	if (!(t->layer_off = calloc((size_t)net->nlayers + 1, sizeof *t->layer_off))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	/* layer l owns [layer_off[l], layer_off[l+1]): its parameters are
	 * contiguous and in layer order (net.h) */
	for (int l = 0; l < net->nlayers; l++) {
		const cdp_layer *ly = &net->layers[l];
		size_t end = t->layer_off[l];
		if (ly->w_len && ly->w_off + ly->w_len > end)
			end = ly->w_off + ly->w_len;
		if (ly->b_len && ly->b_off + ly->b_len > end)
			end = ly->b_off + ly->b_len;
		t->layer_off[l + 1] = end;
	}
	if (t->layer_off[net->nlayers] != net->nparams) {
		snprintf(err, cap, "parameter layout is not in layer order");
		return -1;
	}
	/* --bucket-mb MiB a bucket, the first 1 MiB at most (as PyTorch DDP),
	 * so that the first reduction starts after the last layers' backward.
	 * Left at 0 (the default): 25 MiB, but no more than an eighth of the
	 * gradients and no less than 1 MiB. DDP's fixed 25 MiB puts any model
	 * under 26 MiB (every shipped one: the U-Net's 7.8 MB) into one bucket
	 * after the first, ready only when backward ends, so nothing overlaps;
	 * about 8 buckets hide it (bench/scaling.sh --hosts, PERFORMANCE.md). */
	if (t->o->bucket_mb > 0) {
		bucket = (size_t)(t->o->bucket_mb * (1 << 20) / sizeof(float));
	} else {
		bucket = net->nparams / 8;
		if (bucket > (size_t)25 * (1 << 20) / sizeof(float))
			bucket = (size_t)25 * (1 << 20) / sizeof(float);
		if (bucket < (1 << 20) / sizeof(float))
			bucket = (1 << 20) / sizeof(float);
	}
	if (bucket < 1)
		bucket = 1;
	if ((rc = cdp_dist_set_algo(t->algo)) != 0 ||
	    (rc = cdp_dist_set_compress((cdp_dist_comp)t->o->grad_compress)) != 0 ||
	    (t->o->sync == CDP_SYNC_ALLREDUCE &&
	     (rc = cdp_dist_buckets(net->grads, t->layer_off, net->nlayers, (1 << 20) / sizeof(float),
	                            bucket, 0, t->o->overlap != CDP_OVERLAP_OFF, 1)) < 0)) {
		snprintf(err, cap, "cannot register gradient buckets: %s", cdp_strerror(rc));
		return -1;
	}
	/* save: the local parameters, then the local buffers, while the
	 * evaluated model stands in for them; allreduce's ranks share their
	 * parameters, so only the buffers (own_bufs) */
	if (t->o->sync != CDP_SYNC_ALLREDUCE) {
		if (!(t->save = t->be->alloc(t->be, n + net->nbuffers * sizeof(float)))) {
			snprintf(err, cap, "out of memory");
			return -1;
		}
		t->own_bufs = net->nbuffers ? t->save + net->nparams : NULL;
	} else if ((local_what(t) & CDP_CKPT_RANK_BUFFERS) &&
	           !(t->own_bufs = t->be->alloc(t->be, net->nbuffers * sizeof(float)))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (t->o->sync == CDP_SYNC_ADMM &&
	    (!(t->z = t->be->alloc(t->be, n)) || !(t->u = t->be->alloc(t->be, n)))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	t->parts_off = t->size > 1 && t->o->sync == CDP_SYNC_ALLREDUCE ? no_parts(t) :
	               "no gradient buckets";
	return 0;
}

/* train.log: how the gradients are cut, so that a user tuning
 * --bucket-mb sees what the default chose, and when the update runs. */
void tr_buckets_log(trainer *t)
{
	const char *late = "";
	char how[64] = "", when[160] = "";
	size_t n, first = 0, most = 0;
	double mib;
	int b;

	if (t->size < 2 || t->o->sync != CDP_SYNC_ALLREDUCE)
		return;
	if (t->parts_off)
		tr_logf(t, "optimizer: after the last bucket (%s)", t->parts_off);
	else
		tr_logf(t, "optimizer: applied to each bucket as soon as it is reduced");
	for (b = 0; cdp_dist_bucket_info(b, NULL, &n, NULL, NULL) == 0; b++) {
		if (b == 0)
			first = n;
		else if (n > most)
			most = n;
	}
	if (b == 0)
		return;
	if (t->o->overlap == CDP_OVERLAP_OFF)
		late = ", reduced after backward (--overlap off)";
	else if (t->o->overlap == CDP_OVERLAP_AUTO && t->ov_first >= 0)
		late = snprintf(when, sizeof when, ", reduced during or after backward, whichever "
		                "steps %ld-%ld measure faster (--overlap auto)", t->ov_first + 2,
		                t->ov_first + 1 + 2 * TR_OV_PAIRS) > 0 ? when : "";
	else if (t->o->overlap == CDP_OVERLAP_AUTO)
		late = ", reduced during backward (--overlap auto: too few steps to measure)";
	mib = (double)t->net.nparams * sizeof(float) / (1 << 20);
	if (t->o->grad_compress != CDP_DIST_COMP_NONE)
		snprintf(how, sizeof how, ", sent as %s (--grad-compress)",
		         cdp_dist_comp_name((cdp_dist_comp)t->o->grad_compress));
	if (b == 1)
		tr_logf(t, "gradients: %.2f MiB in one bucket%s%s", mib, how, late);
	else
		tr_logf(t, "gradients: %.2f MiB in %d buckets, the first %.2f MiB, the others up to "
		        "%.2f MiB%s%s", mib, b, (double)first * sizeof(float) / (1 << 20),
		        (double)most * sizeof(float) / (1 << 20), how, late);
}

/* --overlap auto. Reducing buckets during backward hides the link but
 * takes the core from backward (the thread's wakes, the TCP stack, MPI's
 * progress); on a fast link that can cost more than it hides (AMD EPYC,
 * 2 hosts at 10 Gbit/s: the U-Net at 0.92 of the side-by-side ceiling
 * overlapped, 0.96 after backward), on a slow one overlap wins by far.
 * The gradients are the same bitwise either way, so the run measures: its
 * first step warms up (overlapped), the next 2 * TR_OV_PAIRS alternate
 * after and during backward, so that the cores' drift weighs on both
 * alike, and rank 0 keeps the mode of the smaller median step and sends
 * it to the others (one broadcast, at the same step on every rank). A run
 * too short to repay the trial keeps overlap. */
static void ov_set(trainer *t, int on)
{
	if (cdp_dist_set_overlap(on) == 0)
		t->ov_now = on;
}

void tr_overlap_begin(trainer *t)
{
	long need = 2 * (1 + 2 * TR_OV_PAIRS);

	t->ov_now = t->o->overlap != CDP_OVERLAP_OFF;
	t->ov_first = t->o->overlap == CDP_OVERLAP_AUTO && t->size > 1 &&
	              t->o->sync == CDP_SYNC_ALLREDUCE && t->total - t->step >= need ? t->step : -1;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_dbl);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void tr_overlap_step(trainer *t, double seconds)
{
	struct { double med[2]; int32_t on; } d;
	long i;

	if (t->ov_first < 0)
		return;
	i = t->step - t->ov_first;      /* this run's steps done, this one included */
	if (i >= 2)
		t->ov_t[t->ov_now][(i - 2) / 2] = seconds;
	if (i < 1 + 2 * TR_OV_PAIRS) {
		ov_set(t, (int)((i + 1) % 2));  /* even steps after backward, odd during */
		return;
	}
	d.med[0] = median(t->ov_t[0], TR_OV_PAIRS);
	d.med[1] = median(t->ov_t[1], TR_OV_PAIRS);
	d.on = !(d.med[0] < d.med[1]);  /* a tie keeps overlap: it hides a slower link */
	if (cdp_dist_bcast_bytes(&d, sizeof d) != 0)
		TR_FAIL("cannot share the choice of --overlap auto");
	ov_set(t, d.on);
	t->ov_first = -1;
	tr_logf(t, "overlap auto: a step took %.1f ms with gradients reduced during backward, "
	        "%.1f ms after it (median of %d each, steps %ld-%ld): reducing them %s from step %ld",
	        1e3 * d.med[1], 1e3 * d.med[0], TR_OV_PAIRS, t->step - 2 * TR_OV_PAIRS + 1, t->step,
	        d.on ? "during backward" : "after backward", t->step + 1);
}

/* The per-rank blocks this run keeps (checkpoint.h): with allreduce the
 * batchnorm statistics of 2 or more ranks, which each rank's batches move
 * on their own (0: none); with average and admm everything that differs. */
static unsigned local_what(const trainer *t)
{
	if (t->o->sync == CDP_SYNC_ALLREDUCE)
		return t->size > 1 && t->net.nbuffers ? CDP_CKPT_RANK_BUFFERS : 0;
	return CDP_CKPT_RANK_PARAMS |
	       (cdp_optim_nblocks(&t->opt.cfg) > 0 ? CDP_CKPT_RANK_OPTIM : 0) |
	       (t->o->sync == CDP_SYNC_ADMM ? CDP_CKPT_RANK_DUAL : 0) |
	       (t->net.nbuffers ? CDP_CKPT_RANK_BUFFERS : 0);
}

void tr_sync_name(char *b, size_t cap, int sync, long k, double rho)
{
	char r[32];

	if (sync == CDP_SYNC_AVERAGE)
		snprintf(b, cap, "average:%ld", k);
	else if (sync == CDP_SYNC_ADMM) {
		/* two RHOs never print alike, and 1e-9 as --sync takes it
		 * (python/cdpool/checkpoint.py sync_name mirrors this) */
		snprintf(b, cap, "admm:%ld:%s", k, cdp_double_str(rho, r, sizeof r));
	}
	else
		snprintf(b, cap, "allreduce");
}

static void drop_ranks(cdp_ckpt *ck)
{
	free(ck->rank_optim_step);
	free(ck->rank_data);
	ck->rank_optim_step = NULL;
	ck->rank_data = NULL;
	ck->nranks = 0;
}

/* what a resume that drops ck's per-rank state loses, as a phrase */
static void dropped(const cdp_ckpt *ck, char *b, size_t cap)
{
	unsigned w = ck->nranks ? ck->rank_what : 0;

	snprintf(b, cap, "%s%s%s%s", w & CDP_CKPT_RANK_PARAMS ? ", parameters" : "",
	         w & CDP_CKPT_RANK_OPTIM ? ", optimizer moments" : "",
	         w & CDP_CKPT_RANK_DUAL ? ", ADMM duals" : "",
	         w & CDP_CKPT_RANK_BUFFERS ? ", batchnorm statistics" : "");
}

/* rank 0's warning, on stderr and in train.log, that every rank starts
 * from the consensus model: the checkpoint `why`, losing `lost` (", a, b"
 * from dropped, or "") */
static void warn_consensus(trainer *t, const char *why, const char *lost)
{
	char what[160] = "";

	if (lost[0])
		snprintf(what, sizeof what, " (the ranks' own%s are dropped)", lost + 1);
	if (t->rank == 0)
		fprintf(stderr, "cdp-train: warning: '%s/checkpoint.cdpt' %s: every rank resumes "
		        "from the consensus model%s\n", t->o->out, why, what);
	tr_logf(t, "warning: the checkpoint %s: every rank resumes from the consensus model%s",
	        why, what);
}

/* The checkpoint's per-rank section against this run's (the same j and
 * --sync): 0, or -1 with err. */
static int rank_fit(const trainer *t, char *err, size_t cap)
{
	const cdp_ckpt *ck = &t->ck;
	size_t P = t->net.nparams, B = t->net.nbuffers;
	int nm = cdp_optim_nblocks(&t->opt.cfg);

	/* the same net and optimizer (tr_resume checked PARM and OPTM), so only
	 * a damaged or foreign section can fail here; its first block stands
	 * for the rest (the stride covers them) */
	if (ck->rank_what != local_what(t) ||
	    cdp_ckpt_rank_stride(ck) != cdp_ckpt_rank_floats(local_what(t), P, B, nm) ||
	    !cdp_ckpt_rank_block(ck, t->rank, local_what(t) & -local_what(t))) {
		snprintf(err, cap, "the per-rank state in '%s/checkpoint.cdpt' does not fit this "
		         "model and optimizer (blocks %#x of %zu values, want %#x of %zu)", t->o->out,
		         ck->rank_what, cdp_ckpt_rank_stride(ck), local_what(t),
		         cdp_ckpt_rank_floats(local_what(t), P, B, nm));
		return -1;
	}
	return 0;
}

int tr_sync_resume(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	cdp_ckpt *ck = &t->ck;
	char had[64], now[64], why[200] = "", lost[96];

	if (o->sync == CDP_SYNC_ALLREDUCE) {
		/* the parameters are one model; only the batchnorm statistics
		 * of the same number of allreduce ranks are taken back: any
		 * other start is their average, which differs from the
		 * uninterrupted run only by rounding */
		if (ck->nranks == 0)
			return 0;
		if (ck->rank_sync != CDP_SYNC_ALLREDUCE) {
			/* each rank's own model is dropped: said where it is seen,
			 * as another average/admm change is */
			tr_sync_name(had, sizeof had, ck->rank_sync, ck->rank_k, ck->rank_rho);
			dropped(ck, lost, sizeof lost);
			snprintf(why, sizeof why, "was written with --sync %s, this run uses allreduce",
			         had);
			warn_consensus(t, why, lost);
			drop_ranks(ck);
			return 0;
		}
		if (ck->nranks != t->size) {
			tr_logf(t, "the checkpoint's per-rank state (%d rank%s, --sync %s) is not this "
			        "run's (%d rank%s, --sync allreduce): every rank resumes from the averaged "
			        "batchnorm statistics", ck->nranks, ck->nranks == 1 ? "" : "s",
			        (tr_sync_name(had, sizeof had, ck->rank_sync, ck->rank_k, ck->rank_rho), had),
			        t->size, t->size == 1 ? "" : "s");
			drop_ranks(ck);
			return 0;
		}
		return rank_fit(t, err, cap);
	}
	tr_sync_name(had, sizeof had, ck->rank_sync, ck->rank_k, ck->rank_rho);
	tr_sync_name(now, sizeof now, o->sync, o->sync_k, o->rho);
	if (ck->nranks == 0)
		snprintf(why, sizeof why, "holds no per-rank state (written with --sync allreduce "
		         "or by an older cdp-train)");
	else if (ck->nranks != t->size)
		snprintf(why, sizeof why, "holds the local state of %d ranks, this run has %d",
		         ck->nranks, t->size);
	else if (ck->rank_sync != o->sync || ck->rank_k != o->sync_k ||
	         (o->sync == CDP_SYNC_ADMM && ck->rank_rho != o->rho))
		snprintf(why, sizeof why, "was written with --sync %s, this run uses %s", had, now);
	if (why[0]) {
		dropped(ck, lost, sizeof lost);
		warn_consensus(t, why, lost);
		drop_ranks(ck);
		return 0;
	}
	return rank_fit(t, err, cap);
}

const float *tr_sync_ckpt_z(const trainer *t)
{
	/* only ema= (which needs allreduce) and admm write LIVE: the
	 * checkpoint's own --sync tells which (every admm checkpoint has its
	 * per-rank section, whose mode drop_ranks keeps), as Python's reader
	 * tells it, not this run's cfg or --sync */
	return t->have_ck && t->ck.rank_sync == CDP_CKPT_SYNC_ADMM ? t->ck.live : NULL;
}

void tr_sync_begin(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	cdp_ckpt *ck = &t->ck;
	size_t bytes = net->nparams * sizeof(float);
	const float *b;

	if (t->z)
		be->copy(be, t->z, net->params, bytes);
	if (!t->have_ck || ck->nranks == 0)
		return;
	/* this rank's own state over the consensus every rank got */
	if (t->z && (b = tr_sync_ckpt_z(t)))
		be->to_device(be, t->z, b, bytes);
	if ((b = cdp_ckpt_rank_block(ck, t->rank, CDP_CKPT_RANK_PARAMS)))
		be->to_device(be, net->params, b, bytes);
	if ((b = cdp_ckpt_rank_block(ck, t->rank, CDP_CKPT_RANK_OPTIM))) {
		/* AdamW's m then v; SGD's momentum lives in v */
		if (t->opt.m) {
			be->to_device(be, t->opt.m, b, bytes);
			b += net->nparams;
		}
		be->to_device(be, t->opt.v, b, bytes);
	}
	if ((b = cdp_ckpt_rank_block(ck, t->rank, CDP_CKPT_RANK_DUAL)))
		be->to_device(be, t->u, b, bytes);
	if ((b = cdp_ckpt_rank_block(ck, t->rank, CDP_CKPT_RANK_BUFFERS)))
		be->to_device(be, net->buffers, b, net->nbuffers * sizeof(float));
	t->opt.step = ck->rank_optim_step[t->rank];
	drop_ranks(ck);
}

int tr_sync_state_save(trainer *t, cdp_ckpt *ck)
{
	cdp_backend *be = t->be;
	const cdp_net *net = &t->net;
	size_t P = net->nparams, B = net->nbuffers, bytes = P * sizeof(float), L;
	unsigned what = local_what(t);
	int nm = cdp_optim_nblocks(&t->opt.cfg), rc;
	int64_t step = t->opt.step, *steps = NULL;
	float *mine, *p;

	if (!what)
		return 0;
	L = cdp_ckpt_rank_floats(what, P, B, nm);
	if (t->rank == 0) {
		if ((rc = cdp_ckpt_set_ranks(ck, t->size, t->o->sync,
		                             t->o->sync == CDP_SYNC_ALLREDUCE ? 1 : t->o->sync_k,
		                             t->o->sync == CDP_SYNC_ADMM ? t->o->rho : 0, what)))
			return rc;
		if (cdp_ckpt_rank_stride(ck) != L)
			return CDP_EINVAL;
		mine = ck->rank_data;           /* rank 0's slot: the gather leaves it */
		if (!(steps = malloc((size_t)t->size * sizeof *steps)))
			return CDP_ENOMEM;
	} else if (!(mine = malloc(L * sizeof(float) + 1))) {
		return CDP_ENOMEM;
	}
	/* the local model is in save while the evaluated one is in params */
	p = mine;
	if (what & CDP_CKPT_RANK_PARAMS) {
		be->to_host(be, p, t->save, bytes);
		p += P;
	}
	if (what & CDP_CKPT_RANK_OPTIM) {
		if (t->opt.m) {
			be->to_host(be, p, t->opt.m, bytes);
			p += P;
		}
		be->to_host(be, p, t->opt.v, bytes);
		p += P;
	}
	if (t->u) {
		be->to_host(be, p, t->u, bytes);
		p += P;
	}
	if (what & CDP_CKPT_RANK_BUFFERS)
		be->to_host(be, p, t->own_bufs, B * sizeof(float));
	rc = cdp_dist_gather_bytes(mine, L * sizeof(float), t->rank == 0 ? ck->rank_data : NULL);
	if (rc == 0)
		rc = cdp_dist_gather_bytes(&step, sizeof step, steps);
	if (t->rank == 0) {
		for (int r = 0; rc == 0 && r < t->size; r++)
			ck->rank_optim_step[r] = (long)steps[r];
		free(steps);
	} else {
		free(mine);
	}
	return rc;
}

void tr_sync_free(trainer *t)
{
	free(t->layer_off);
	t->layer_off = NULL;
	if (t->save)
		t->be->free(t->be, t->save);
	else if (t->own_bufs)
		t->be->free(t->be, t->own_bufs);
	if (t->z)
		t->be->free(t->be, t->z);
	if (t->u)
		t->be->free(t->be, t->u);
	t->save = t->z = t->u = t->own_bufs = NULL;
}

void tr_on_layer_done(cdp_net *net, int l, void *ctx)
{
	trainer *t = ctx;
	double now;

	(void)net;
	/* --trace: layer l's backward ran since the previous layer's call */
	if (t->trace) {
		now = cdp_now();
		tr_trace_span(t->trace, TR_BWD_LAYER, t->tr_mark, now, t->step + 1, l);
	}
	if (t->o->sync == CDP_SYNC_ALLREDUCE && t->last_micro)
		cdp_dist_layer_done(l);
	if (t->trace)
		t->tr_mark = cdp_now();
}

void tr_sync_grads(trainer *t)
{
	if (t->o->sync == CDP_SYNC_ALLREDUCE)
		cdp_dist_wait_all();
}

void tr_sync_prox(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t n = net->nparams;

	/* One rank has no other model to agree with: its z-update gives
	 * z = w + u and u stays 0, and the penalty would only hold each step
	 * back towards the last round's w, so it trains as allreduce does. */
	if (t->o->sync != CDP_SYNC_ADMM || t->size == 1)
		return;
	/* save is free outside validation: the target z - u less w */
	be->copy(be, t->save, t->z, n * sizeof(float));
	be->axpy(be, -1.0f, t->u, t->save, n);
	be->axpy(be, -1.0f, net->params, t->save, n);
	cdp_optim_prox(&t->opt, net->params, t->save, t->o->rho);
}

void tr_sync_parts(trainer *t, long s1)
{
	cdp_net *net = &t->net;
	size_t off, n;
	double t0 = 0, t1;

	for (int b = 0; cdp_dist_bucket_info(b, &off, &n, NULL, NULL) == 0; b++) {
		if (t->trace)
			t0 = cdp_now();
		/* the last one ends the step's reductions */
		if (cdp_dist_bucket_info(b + 1, NULL, NULL, NULL, NULL) != 0)
			cdp_dist_wait_all();
		else
			cdp_dist_bucket_wait(b);
		if (t->trace) {
			t1 = cdp_now();
			tr_trace_span(t->trace, TR_GRAD_WAIT, t0, t1, s1, b + 1);
			t0 = t1;
		}
		cdp_optim_part(&t->opt, net->params, net->grads, off, n);
		if (t->trace)
			tr_trace_span(t->trace, TR_OPTIM, t0, cdp_now(), s1, b + 1);
	}
}

void tr_sync_after_step(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t n = net->nparams;

	if (t->o->sync == CDP_SYNC_ALLREDUCE || t->step % t->o->sync_k != 0)
		return;
	if (t->o->sync == CDP_SYNC_AVERAGE) {
		cdp_dist_average(net->params, n);
	} else {
		be->copy(be, t->z, net->params, n * sizeof(float));
		be->axpy(be, 1.0f, t->u, t->z, n);
		cdp_dist_average(t->z, n);                  /* z = mean(w + u) */
		be->axpy(be, 1.0f, net->params, t->u, n);   /* u += w - z */
		be->axpy(be, -1.0f, t->z, t->u, n);
	}
	if (net->nbuffers)
		cdp_dist_average(net->buffers, net->nbuffers);
}

void tr_eval_model_begin(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t bytes = net->nparams * sizeof(float);

	if (t->dema) {       /* the moving average stands in (--sync allreduce only) */
		be->copy(be, t->dtmp, net->params, bytes);
		be->copy(be, net->params, t->dema, bytes);
	}
	if (t->own_bufs)
		be->copy(be, t->own_bufs, net->buffers, net->nbuffers * sizeof(float));
	if (net->nbuffers)
		cdp_dist_average(net->buffers, net->nbuffers);
	/* the ranks' mean, on a copy; for admm that is the consensus
	 * estimate mean(w + u), the z-update with this step's u, as mean(u)
	 * stays 0: each z-update leaves mean(u) + mean(w) - mean(w + u), and a
	 * resume that drops the duals starts them at 0 (z stays in t->z) */
	if (t->o->sync != CDP_SYNC_ALLREDUCE) {
		be->copy(be, t->save, net->params, bytes);
		cdp_dist_average(net->params, net->nparams);
	}
}

void tr_ema_update(trainer *t)
{
	cdp_backend *be = t->be;
	size_t n = t->net.nparams;

	/* w - ema is 0 where the weights stand still, so the average of
	 * unchanged weights is exactly them */
	be->copy(be, t->dtmp, t->net.params, n * sizeof(float));
	be->axpy(be, -1.0f, t->dema, t->dtmp, n);
	be->axpy(be, 1.0f - t->ema, t->dtmp, t->dema, n);
}

void tr_eval_model_end(trainer *t)
{
	cdp_net *net = &t->net;

	if (t->dema)
		t->be->copy(t->be, net->params, t->dtmp, net->nparams * sizeof(float));
	if (t->save)
		t->be->copy(t->be, net->params, t->save, net->nparams * sizeof(float));
	if (t->own_bufs)
		t->be->copy(t->be, net->buffers, t->own_bufs, net->nbuffers * sizeof(float));
}
