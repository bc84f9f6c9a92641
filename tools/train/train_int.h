/* train_int.h: the state of one cdp-train run, shared by train.c (the
 * loop), train_setup.c (opening data, model, optimizer, resume; --init in
 * train_init.c, the ranks' agreement in train_agree.c), train_sync.c
 * (gradient and model synchronization), train_eval.c
 * (validation and checkpoints) and train_log.c (metrics.jsonl, train.log,
 * loss.png). Not installed; nothing outside tools/train/train*.c uses it.
 */
#ifndef CDP_TRAIN_INT_H
#define CDP_TRAIN_INT_H

#include <stdio.h>
#include "cdp_pool.h"
#include "ckpt/checkpoint.h"
#include "dist/dist.h"
#include "loader.h"
#include "loss.h"
#include "cdp_metrics.h"
#include "net.h"
#include "optim.h"
#include "train.h"

#define TR_ERR 1024
/* --overlap auto: steps measured in each mode (train_sync.c) */
#define TR_OV_PAIRS 5

typedef struct trainer {
	const cdp_train_opts *o;  /* &run_o */
	cdp_train_opts run_o;     /* the options as resolved: resuming without
	                           * --sync, the checkpoint's (run_settings) */
	int rank, size;
	int made_out;             /* this rank's mkdir created --out */
	int lock_fd, have_lock;   /* rank 0: RUNDIR/.lock, held (train_rundir.c) */
	int fresh;                /* rank 0: RUNDIR held no earlier run's files, or
	                           * --overwrite removed them */
	cdp_backend *be;
	cdp_pool pool;
	int have_pool;
	/* The run's one read txn on pool, held from the open to the end: the
	 * loaders resolve their records in it and every meta read of the run
	 * (standardization, labels, class weights, checkpoints) is made in it,
	 * so no second txn is begun on the env, which would adopt a map grown
	 * by a concurrent cdp-lmdbpack under the loaders' records. */
	MDB_txn *txn;
	cdp_loader *tl, *vl;            /* training and validation loaders */
	cdp_loader_info ti, vi;
	char *cfg_text;                 /* the model cfg (from --model or the checkpoint) */
	char **ov;                      /* overrides in use (borrowed) */
	float *cw;                      /* [ncw] --class-weights on the host, or NULL */
	int ncw, cw_auto;
	int nov;
	cdp_cfg cfg;
	int have_cfg;
	cdp_net net;
	int have_net;
	cdp_loss loss;
	int have_loss;
	double *lpart;                  /* [4 (loss.npart + 1)] the loss's sums (loss.h) */
	cdp_optim_cfg oc;
	cdp_optim opt;
	int have_opt;
	cdp_aug_cfg aug;
	int32_t *dlab, *pred;           /* device (b, hw) */
	int hw;                         /* output pixels per sample: H*W or 1; a
	                                 * multi-label run's K labels a sample */
	/* a multi-label pool and head (net.multi): the loss is the binary bce
	 * over (N, K) "pixels" (logits (N, K, 1, 1) are (N, 1, K)); validation
	 * gathers every sample's scores into mval (train_eval.c) */
	int multi;
	double *mval;                   /* [2 vi.count K] scores, then truths */
	/* a value pool (label kind f32) and a regression loss (loss.reg): the
	 * targets (b, T, hw) standardized by the training sources' target
	 * statistics tmean, tstd [T] (train_std.c) come as floats into dtgt
	 * (device; ntgt the next batch's, as nlab); validation adds the
	 * regression sums (cdp_regm) of each target on its original scale */
	int reg;
	double *tmean, *tstd;
	float *dtgt, *ntgt;
	float *rpred;                   /* [b T hw] host copy (validation) */
	float *mlog;                    /* [batch K] host copy of the logits */
	int accumulate;                 /* micro-batches per step, A */
	long warmup_asked;              /* the warm-up cut to the run, -1: none */
	int last_micro;                 /* 1: this backward completes a step */
	long spe;                       /* optimizer steps per epoch */
	long total;                     /* optimizer steps of the whole run */
	long step;                      /* optimizer steps done (global count) */
	uint64_t epoch;
	long estep;                     /* steps done in this epoch */
	int frozen;                     /* 1: --freeze's layers are frozen now */
	size_t *layer_off;              /* [nlayers + 1] parameter offsets */
	/* --overlap auto (train_sync.c): the mode in force (1: buckets reduced
	 * during backward), the trial's first step (-1: no trial running) and
	 * its step times, [0] after backward, [1] during */
	int ov_now;
	long ov_first;
	double ov_t[2][TR_OV_PAIRS];
	const char *parts_off;          /* why the update waits for the last
	                                 * bucket; NULL: it runs bucket by bucket
	                                 * (tr_sync_parts). Set by tr_sync_init */
	float *z, *u, *save;            /* admm consensus and dual; a spare copy */
	float *own_bufs;                /* (nbuffers) this rank's own batchnorm
	                                 * statistics while their average stands
	                                 * in (in save, or its own with allreduce) */
	/* logging (rank 0) */
	FILE *jsonl, *log, *keylog;
	char png_path[4096];
	/* what messages call the model: --model, or resuming without it the
	 * checkpoint whose cfg it is (RUNDIR/checkpoint.cdpt) */
	char model_name[4200];
	/* log_failed: a write or flush of metrics.jsonl, train.log or --log
	 * failed (said on stderr then; that file gets nothing more, and the
	 * run stops at the end of the step: train.c); the end of each file's
	 * last whole line, where a failed write is cut back to (-1: not a
	 * regular file); png_warned: loss.png's failure is on stderr */
	int log_failed, png_warned;
	long long jsonl_good, log_good;
	double t_start;
	/* the current logging interval */
	double iv_loss, iv_wait, iv_comm, iv_t0;
	long iv_steps;
	/* the steps iv_loss sums: iv_steps's in this process, plus, after a
	 * resume, those of the interval before the checkpoint (its SUMS), so
	 * a step line's mean loss is the uninterrupted run's */
	long iv_nloss;
	double ep_loss;
	long ep_steps;
	uint64_t skipped;
	cdp_ckpt ck;                    /* the checkpoint being resumed */
	int have_ck;
	char *init_note;                /* --init: train.log's lines about it (rank 0) */
	/* --init's checkpoint, from its read (before the standardization,
	 * which --init-norm takes from it) until its tensors are taken */
	cdp_ckpt init_ck;
	int have_init;
	/* what this run's checkpoints record of where its initial weights
	 * came from (FROM): --init's file and its own FROM, or the resumed
	 * checkpoint's; only its from and nfrom are used */
	cdp_ckpt prov;
	cdp_dist_algo algo;             /* --allreduce, resolved (train_setup.c) */
	/* the next training batch (train.c): its device copy is queued into
	 * nx, nlab (device, like net.x and dlab, which they swap with) while
	 * the current step computes; next stays valid until cdp_loader_next */
	float *nx;
	int32_t *nlab;
	cdp_batch next;
	/* MixUp / CutMix (augment.h): the current batch's mixing and the
	 * next's, the flipped labels (device dlab2, nlab2 as dlab, nlab; host
	 * hlab2, b each) and the gradient of their loss dy2 (b, k) */
	cdp_mix mix, nmix;
	int32_t *dlab2, *nlab2, *hlab2;
	float *dy2;
	int have_next;
	/* the device data path (train.c, loader.h "The data path"): with raw
	 * the loader hands out stored pixels, which are copied into draw
	 * (b, C, H, W of the pool's type), per-pixel labels into dlabraw
	 * (b, H, W) (class labels into nlab) and the transformed validity
	 * into dvalid (b, h, w) bytes; prep_batch makes net.x and dlab of
	 * them with the loader's dmean, dinv (C). No nx with raw. */
	int raw;
	void *draw;
	int32_t *dlabraw;
	uint8_t *dvalid;
	float *dmean, *dinv;
	double up_bytes;                /* bytes queued to the device, training batches */
	long up_batches;
	/* dynamic loss scaling (train.c): the loss gradient is scaled by
	 * scale (0: off); scale_good finite steps since it last changed */
	double scale;
	long scale_good;
	uint64_t scale_skipped;         /* steps skipped for overflow, whole run */
	/* non-finite steps (--nan-policy skip): in a row, in this run (both
	 * carried across a resume by RUN); the step of the last checkpoint
	 * written or resumed from, -1 none */
	long nan_run, nan_skipped, ck_step;
	/* --pad-last (0 or 1) and --nan-policy (CDP_NAN_*) as given, or when
	 * resuming without them the checkpoint's (train_setup.c run_settings) */
	int pad_last, nan_policy;
	/* --keep-best: the best validation so far (best.cdpt's), have_best 0
	 * before the first; rank 0 reloads it from metrics.jsonl on resume */
	double best;
	int have_best;
	/* rank 0, resuming: the other --keep-best metric that kept
	 * RUNDIR/best.cdpt (its BEST), which this run keeps anew; 0 none */
	int best_other;
	/* --patience: the value the next improvement is measured from
	 * (pbest; have_pbest 0 before the first), the validations since it
	 * last improved by more than --min-delta; rank 0 reloads them from
	 * metrics.jsonl on resume, as best */
	double pbest;
	int have_pbest;
	long pwait, pbest_step;
	/* resuming: rank 0 found a val line (ck_val), an epoch line (ck_epoch)
	 * at the checkpoint's step in metrics.jsonl (tr_log_scan); then, on
	 * every rank: the validation due at that step that the run which
	 * wrote it did not make (a stop on that step), and the epoch line it
	 * left for it to write; complete: the run has nothing left to do */
	int ck_val, ck_epoch;
	int val_pending, epoch_pending, complete;
	/* [net] ema=: the decay d of the weights' moving average (0 off),
	 * the average dema and a scratch block dtmp (device, nparams floats;
	 * dtmp holds the trained weights while the average stands in for them
	 * in validation and checkpoints, tr_eval_model_begin) */
	float ema;
	float *dema, *dtmp;
	/* the standardization (train_std.c): per band mean and std [C], where
	 * they came from (CDP_CKPT_STD_*) and from which pool sources; the
	 * training sources' CRS ("" unknown) and pixel size (0 unknown); its
	 * lines for train.log; std_resumed: the checkpoint's won over others;
	 * std_from CDP_CKPT_STD_INIT with --init-norm */
	double *std_mean, *std_sd;
	int std_from;
	uint32_t *std_src;
	int nstd_src;
	char *crs;
	double res_x, res_y;
	char std_note[4][2048];         /* the standardization, the data, --init's bands,
	                                 * a value pool's targets */
	int std_resumed;
	/* the class names (train_std.c) kept in the checkpoint, [ncnames];
	 * their line for train.log, names_warn: for stderr too */
	char **cnames;
	int ncnames;
	char names_note[1024];
	int names_warn;
	/* resuming: the checkpoint's optimizer settings (and loss scale) that
	 * the command line changed, "--lr 0.05 (the checkpoint's 0.01), ...";
	 * "" when none (train_setup.c optim_resume) */
	char optim_note[1024];
	/* resuming: the same for the run's own settings (--nan-policy), and
	 * what makes the resumed run differ from an uninterrupted one or its
	 * validations from the checkpoint's (another --threads or CPU kernels,
	 * another --val-keys list), each a warning line; "" when none */
	char run_note[512], compute_note[512], val_note[1024];
	/* the pool changed under the run (loader.h cdp_loader_faulted): this
	 * rank's next batch cannot be read; said on stderr once */
	int pool_fault;
	float *bufsave;                 /* (nbuffers) the buffers before this step */
	struct tr_trace *trace;         /* --trace (train_trace.h), NULL when off */
	double tr_mark;                 /* --trace: the last backward callback's end */
} trainer;

/* err = the formatted message (cap bytes); returns -1, as every tr_
 * function that fails with a message does (train_setup.c) */
int tr_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* train_setup.c. tr_setup is collective (the ranks compare their options,
 * tr_same_opts; when resuming rank 0 reads the checkpoint for every rank);
 * it returns -1 with err empty where another rank has said why. */
int  tr_setup(trainer *t, char *err, size_t cap);
/* train_weights.c: --class-weights into the loss (after cdp_loss_init_cfg),
 * and its line in train.log. */
int  tr_class_weights(trainer *t, char *err, size_t cap);
/* After the loss is made: -1 with err when the pool's class histogram
 * (meta "classes") holds a label that is neither a class of the model nor
 * the ignored one, which would otherwise end the job at the first record
 * that holds it, with nothing saved. */
int  tr_check_labels(trainer *t, char *err, size_t cap);
void tr_class_weights_log(trainer *t);
/* --freeze / --unfreeze-at at t->epoch: freezes or thaws the layers and
 * cuts the optimizer's segments (cdp_optim_set_layers) when the state
 * changes, logging it; first says this is the run's start (segments are
 * cut even without --freeze, for lr_mult). 0 or -1 with err. */
int  tr_freeze(trainer *t, int first, char *err, size_t cap);
void tr_teardown(trainer *t);
void tr_optim_log(trainer *t);     /* train.log: the optimizer and schedule (rank 0) */
/* train_setup.c: "optimizer ...; schedule ..., warm-up ..." of train.log's
 * line, the same on every rank (tr_same_data compares it) */
void tr_optim_text(const trainer *t, char *buf, size_t cap);
/* train_init.c, for tr_setup: --init's checkpoint read (rank 0's bytes,
 * broadcast) into t->init_ck, before the standardization (--init-norm
 * takes its normalization); where the weights came from into t->prov
 * (sha: the SHA-256 of --init's bytes; NULL when resuming, which keeps
 * the checkpoint's); its tensors over the seeded initialization. Each 0
 * or -1 with err. */
int  tr_init_fetch(trainer *t, char *err, size_t cap);
int  tr_init_provenance(trainer *t, const unsigned char *sha, char *err, size_t cap);
int  tr_init_weights(trainer *t, char *err, size_t cap);
/* train_agree.c. Collective, in tr_setup once the device is open
 * (failed: this rank has failed, err set): -1 on every rank when any rank
 * failed, which says why itself, or when a rank's options are not rank
 * 0's (the settings of the data plan, the collectives and the update, and
 * which optional files are given), which that rank reports naming the
 * first such option, both values and its host; else 0. */
int  tr_same_opts(trainer *t, int failed, char *err, size_t cap);
/* Collective, after a successful tr_setup: 1 on every rank when a rank's
 * pool (its uuid) or pointer files (their header: uuid, seed, count, CRC)
 * are not rank 0's, which that rank reports naming its host; copies per
 * host are the same data, so 0. */
int  tr_same_data(trainer *t);
/* train.c: prints err ("cdp-train: rank R: err" with more than one rank)
 * and empties it */
void tr_report(const trainer *t, char *err);
/* A failure found before the ranks part ways, agreed on by every rank
 * (collective; 1 when any rank failed) and said once: when every rank
 * failed with the same message (what each checks alike: a damaged
 * checkpoint, a refused option) rank 0 alone says it, without a rank;
 * otherwise each rank that failed says its own, with its rank, so that a
 * rank failing alone is named. err is cleared once said. */
int tr_agree_report(const trainer *t, int failed, char *err);

/* train_rundir.c (rank 0; the others return 0 at once). tr_rundir_open,
 * after --out exists: the lock on RUNDIR, then the refusal of an earlier
 * run without --resume or --overwrite; -1 with err. tr_rundir_clear, when
 * every check has passed: --overwrite's removal of the earlier run's
 * files. tr_rundir_abandon, for a run refused before its first step: the
 * files it began in a fresh RUNDIR go, so that RUNDIR does not look like
 * a run. tr_rundir_close: the lock goes. */
int  tr_rundir_open(trainer *t, char *err, size_t cap);
int  tr_rundir_clear(trainer *t, char *err, size_t cap);
void tr_rundir_abandon(trainer *t);
void tr_rundir_close(trainer *t);

/* train_std.c: after the loaders open, before the data path's buffers:
 * sets both loaders' standardization (see there); -1 with err */
int  tr_standardize(trainer *t, char *err, size_t cap);
void tr_standardize_free(trainer *t);
/* After the net is built (its classes) and a checkpoint resumed is read:
 * the class names to keep (see there); -1 with err */
int  tr_class_names(trainer *t, char *err, size_t cap);
void tr_class_names_free(trainer *t);

/* train_sync.c */
int  tr_sync_init(trainer *t, char *err, size_t cap);
void tr_buckets_log(trainer *t);
void tr_sync_free(trainer *t);
/* At setup, after tr_resume: whether the checkpoint's per-rank state
 * (average, admm) is this run's to restore: the same j and --sync, else a
 * one-line warning on rank 0 and the consensus model. -1 with err when the
 * state cannot fit the net. */
int  tr_sync_resume(trainer *t, char *err, size_t cap);
/* After the initial weights are final on every rank: z = w (admm), then
 * each rank's own state from the checkpoint, when tr_sync_resume kept it. */
void tr_sync_begin(trainer *t);
/* ADMM's z in the checkpoint resumed, written with --sync admm (its LIVE
 * chunk, PARM holding the consensus estimate; the checkpoint's per-rank
 * mode says admm, also after tr_sync_resume dropped the ranks' state), or
 * NULL (none, a run with ema=, whose LIVE holds the trained weights, or an
 * admm checkpoint of an older cdp-train, whose PARM is z). */
const float *tr_sync_ckpt_z(const trainer *t);
/* "allreduce", "average:K" or "admm:K:RHO" into b */
void tr_sync_name(char *b, size_t cap, int sync, long k, double rho);
/* Collective, between tr_eval_model_begin and _end: gathers every rank's
 * local state (average, admm; nothing for allreduce) into ck's per-rank
 * section on rank 0 (ck NULL elsewhere), after ck's tensors and optimizer
 * are set. 0 or a CDP error code; a rank that fails must abort the job. */
int  tr_sync_state_save(trainer *t, cdp_ckpt *ck);
/* The backward callback: starts bucket reductions (allreduce mode). */
void tr_on_layer_done(cdp_net *net, int l, void *ctx);
/* Before the optimizer step (allreduce): finishes the gradient reduction. */
void tr_sync_grads(trainer *t);
/* After an optimizer step that was applied (admm on 2 or more ranks):
 * the proximal step of the penalty rho/2 |w - z + u|^2 (cdp_optim_prox). */
void tr_sync_prox(trainer *t);
/* --sync allreduce without t->parts_off: waits for each bucket in turn
 * and applies the optimizer to it (cdp_optim_part) while later ones are
 * in flight; step s1's trace gets a wait and an optimizer span per
 * bucket. The caller ends the step with cdp_optim_parts_done. */
void tr_sync_parts(trainer *t, long s1);
/* --overlap auto: before the loop (first: this run's first step), and
 * after each step's optimizer with that step's seconds */
void tr_overlap_begin(trainer *t);
void tr_overlap_step(trainer *t, double seconds);
/* After optimizer step number t->step (already counted): the periodic
 * averaging (average) or consensus update (admm). */
void tr_sync_after_step(trainer *t);
/* Puts the model to evaluate and checkpoint into net->params (the
 * ranks' mean, which for admm is the consensus estimate mean(w + u) of
 * this step, as mean(u) stays 0, while z, which a resume continues from,
 * stays in t->z; allreduce: nothing to do) and averages the
 * batchnorm running statistics over ranks; tr_eval_model_end restores the
 * local parameters (and, average/admm, the local statistics, so that
 * evaluating never changes the run). Collective. */
void tr_eval_model_begin(trainer *t);
void tr_eval_model_end(trainer *t);

/* train_eval.c */
typedef struct tr_val {
	double loss;
	cdp_confusion conf;
	cdp_mlabel ml;                  /* multi-label runs (t->multi) */
	/* regression runs (t->reg): each target's cdp_regm sums (nt,
	 * CDP_REGM_NSUM), their scores rt[nt] and the pooled ones rm
	 * (cdp_regm_pooled), which --keep-best and the headline take */
	int nt;
	double *rsum;
	cdp_regm *rt;
	cdp_regm rm;
	int done;
} tr_val;
/* A zeroed v for this run's task (its confusion matrix, multi-label
 * metrics, regression sums); 0 or -1 out of memory. tr_val_free frees
 * what it allocated (v may be zero). */
int  tr_val_init(trainer *t, tr_val *v);
void tr_val_free(tr_val *v);
/* Checks a batch's labels on the host (aborting with the key of a bad
 * one) and copies image and labels to the device. */
void tr_upload(trainer *t, cdp_loader *l, const cdp_batch *b);
/* collective; aborts on error, except for a pool that changed under the
 * run (loader.h cdp_loader_faulted), which is -1 on every rank (v not
 * done), the rank that found it having said so */
int  tr_validate(trainer *t, tr_val *v);
void tr_checkpoint(trainer *t);            /* collective; rank 0 writes */
/* What a run stopped now leaves, for its message: "'RUNDIR/checkpoint.cdpt'
 * keeps step N", or "no checkpoint written" */
void tr_ckpt_kept(const trainer *t, char *buf, size_t cap);
/* At setup, before step 1: -1 with err set when the checkpoint this run
 * would write (the per-rank state aside) is one cdp_ckpt_validate refuses,
 * so no run trains to the end and then cannot save (issue 14) */
int  tr_checkpoint_check(trainer *t, char *err, size_t cap);
/* --keep-best: after a validation, writes RUNDIR/best.cdpt when v is the
 * best so far (collective: every rank sees the same v) */
void tr_keep_best(trainer *t, const tr_val *v);
/* [net] ema=: after an optimizer step, ema += (1 - d) (w - ema) */
void tr_ema_update(trainer *t);
/* --patience: counts one validation of --keep-best value x (NaN: no
 * improvement) at step; 1 when the run has then waited --patience
 * validations */
int tr_patience_see(trainer *t, double x, long step);
/* after a validation: 1 when --patience ends the run (then logged, in
 * train.log and metrics.jsonl); every rank sees the same v, so all agree */
int tr_patience(trainer *t, const tr_val *v);
/* 1 when a lower value of the --keep-best metric is better (loss, rmse) */
int tr_best_lower(const trainer *t);
/* v's value of the --keep-best metric (NAN when there is none) */
double tr_best_value(const trainer *t, const tr_val *v);
/* --keep-best's metric as metrics.jsonl's val lines name it ("miou",
 * "loss", "accuracy", "micro_f1", "map") */
const char *tr_best_key(const trainer *t);
/* the validation metrics as one line ("acc=... miou=..." or, multi-label,
 * "micro_f1=... macro_f1=... map=... f1=a,b,..."); its length */
int tr_val_format(const trainer *t, const tr_val *v, char *buf, size_t cap);
int  tr_resume(trainer *t, char *err, size_t cap);
/* Rank 0, after tr_resume and tr_log_scan: val_pending, epoch_pending and
 * complete from the checkpoint's step, this run's options and end */
void tr_resume_pending(trainer *t);
/* 1 when a run of these options validates at step in its course (its
 * --val-every grid, or each epoch's end without it), whatever its length;
 * 0 for a validation only a run ending there makes (its last step, off
 * that grid), which counts for neither --keep-best nor --patience */
int tr_val_on_grid(const trainer *t, long step);

/* train_log.c */
/* Refuses (0 or -1 with err) any output of the run (the log,
 * metrics.jsonl, loss.png, checkpoint.cdpt, best.cdpt, the trace) that is
 * one of its inputs (the pool's files, the pointer files, the model cfg)
 * or another of its outputs, by identity (cdp_out_check_set), a --log or
 * --trace the output policy refuses (a directory, a socket), and a --log
 * or --trace that is a cdpool checkpoint, of this run or another. */
int  tr_check_outputs(trainer *t, char *err, size_t cap);
/* Opens metrics.jsonl and the log after tr_check_outputs, and removes the
 * temporaries a run killed outright left in RUNDIR (cdp_out_sweep). */
int  tr_log_open(trainer *t, char *err, size_t cap);
/* Closes both (rank 0); 0, or -1 when a write failed, now or before */
int  tr_log_close(trainer *t);
/* Ends a metrics.jsonl line written with fprintf: flushes it, and on a
 * failure cuts the file back to its last whole line and stops writing it */
void tr_jsonl_end(trainer *t);
void tr_logf(trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Rank 0, resuming, before anything is written: metrics.jsonl's lines up
 * to the checkpoint's step into --keep-best's best (only while best.cdpt
 * exists), --patience's count (each step's last val line once), ck_val
 * and ck_epoch. */
void tr_log_scan(trainer *t);
/* One metrics.jsonl step line (collective: gathers per-rank memory);
 * reset 0 keeps the interval's loss sums (a line off the --log-every grid). */
void tr_log_step(trainer *t, double lr, int reset);
void tr_log_epoch(trainer *t, const tr_val *v);
void tr_log_val(trainer *t, const tr_val *v);
void tr_plot(trainer *t);
long tr_rss_anon_kb(void);
void tr_log_keys(trainer *t, const cdp_batch *b);

/* Abort the job naming this rank (cdp_dist_abort). */
#define TR_FAIL(...) cdp_dist_abort(1, __VA_ARGS__)

#endif
