/* train.h: one data-parallel training run of cdp-train as a library
 * function (train.c), so main.c stays a thin option parser.
 *
 * The run is SPMD: every rank calls cdp_train_run with the same options
 * after cdp_dist_init. Rank 0 writes the outputs (RUNDIR/metrics.jsonl,
 * RUNDIR/train.log, RUNDIR/loss.png, RUNDIR/checkpoint.cdpt, with --keep-best
 * RUNDIR/best.cdpt); every rank reports its own errors. See
 * man/cdp-train.1 for the user's view.
 */
#ifndef CDP_TRAIN_H
#define CDP_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

enum { CDP_SYNC_ALLREDUCE = 0, CDP_SYNC_AVERAGE = 1, CDP_SYNC_ADMM = 2 };
/* --nan-policy: a step whose loss or gradient is not finite (and which the
 * loss scaler did not skip) stops the run, or is skipped, up to
 * CDP_NAN_MAX_SKIPS in a row */
enum { CDP_NAN_STOP = 0, CDP_NAN_SKIP = 1 };
/* --overlap: reduce gradient buckets during backward (on), after it (off),
 * or whichever the first steps of the run measure faster (auto) */
enum { CDP_OVERLAP_OFF = 0, CDP_OVERLAP_ON = 1, CDP_OVERLAP_AUTO = 2 };
#define CDP_NAN_MAX_SKIPS 100
/* --keep-best: the validation metric RUNDIR/best.cdpt is kept by */
enum { CDP_BEST_NONE = 0, CDP_BEST_MIOU, CDP_BEST_LOSS, CDP_BEST_ACC,
       CDP_BEST_F1,      /* multi-label: micro F1 */
       CDP_BEST_MAP,     /* multi-label: mean average precision */
       CDP_BEST_RMSE,    /* regression: root mean squared error (lower is better) */
       CDP_BEST_R2 };    /* regression: coefficient of determination */

typedef struct cdp_train_opts {
	const char *db, *keys, *val_keys;
	const char *model;          /* cfg path, overrides split off */
	char **overrides;           /* "k=v" from --model PATH:k=v,... */
	int noverrides;
	const char *out;            /* RUNDIR */
	const char *log_path;       /* text log; NULL: RUNDIR/train.log */
	long epochs;                /* 0: unset */
	long steps;                 /* 0: unset */
	int batch;                  /* per rank */
	double lr;                  /* < 0: the cfg's */
	int schedule;               /* CDP_LR_*, -1: the cfg's */
	long warmup;                /* < 0: the cfg's */
	int optimizer;              /* CDP_OPT_*, 0: the cfg's */
	double momentum;            /* < 0: the cfg's */
	double weight_decay;        /* < 0: the cfg's */
	int nesterov;               /* -1: the cfg's */
	uint64_t seed;
	int threads;                /* 0: cores / ranks on the node */
	const char *device;         /* --device (device.h) */
	int precision;              /* CDP_PREC_* (backend.h) */
	double loss_scale;          /* initial dynamic loss scale; 0: off; < 0: the
	                             * default, dynamic (65536) for fp16, else off */
	int sync;                   /* CDP_SYNC_* */
	int sync_given;             /* --sync given; else resuming: the checkpoint's
	                             * (RANK), or allreduce */
	long sync_k;                /* average / admm: local steps per round */
	double rho;                 /* admm penalty */
	int allreduce;              /* cdp_dist_algo; -1: nccl on GPUs of their own, else mpi */
	int overlap;                /* CDP_OVERLAP_* */
	const char *overlap_given;  /* "--overlap" or "--no-overlap", as given
	                             * (messages name it), NULL: neither */
	int grad_compress;          /* --grad-compress: cdp_dist_comp of the buckets */
	double bucket_mb;           /* --bucket-mb: gradient bucket size, MiB;
	                             * 0: 25, at most 1/8 of the gradients */
	const char *trace;          /* --trace FILE, or NULL */
	long checkpoint_every;      /* steps; 0: only at the end */
	long val_every;             /* steps; 0: every epoch */
	long log_every;             /* steps between metrics.jsonl step lines */
	int load;                   /* CDP_LOAD_* */
	int pad_last;               /* 1 given, -1 not: resuming, the checkpoint's (RUN) */
	int skip_bad, resume;
	int overwrite;              /* --overwrite: RUNDIR's earlier run goes (train_rundir.c) */
	const char *init;           /* --init CHECKPOINT: initial weights, or NULL */
	int init_norm;              /* --init-norm: train with the initial weights' own
	                             * input normalization, not the pool's statistics */
	const char *freeze;         /* --freeze PATTERN,...: layer-name globs, or NULL */
	long unfreeze_at;           /* --unfreeze-at: first epoch (0-based) unfrozen; 0: never */
	int nan_policy;             /* CDP_NAN_*, -1 not given: resuming, the
	                             * checkpoint's (RUN), else stop */
	int keep_best;              /* CDP_BEST_* */
	long patience;              /* --patience: validations without an improvement
	                             * of more than min_delta before stopping; 0 off */
	double min_delta;           /* --min-delta, >= 0 */
	int progress;               /* CDP_PROGRESS_* */
	int quiet;
	const char *log_keys;       /* test mode: per-rank key log prefix, or NULL */
	long stop_at;               /* test mode (CDP_TRAIN_STOP_AT): a stop as
	                             * SIGTERM's arrives during this step; 0 none */
	int step_per_bucket;        /* CDP_TRAIN_STEP_PER_BUCKET (default 1): the
	                             * optimizer applied to each reduced bucket */
	const char *class_weights;  /* --class-weights: "auto", "w0,w1,...", or NULL */
} cdp_train_opts;

void cdp_train_opts_init(cdp_train_opts *o);

/* The first option given that only --sync allreduce uses ("--grad-compress",
 * "--overlap" or "--no-overlap" as given, "--bucket-mb"; average and admm
 * exchange whole parameters after the step, with no gradient buckets), or
 * NULL: refused with average and admm rather than silently doing nothing. */
const char *cdp_train_allreduce_only(const cdp_train_opts *o);

/* --class-weights' syntax, before any pool or model: 0 for "auto" or a
 * list of numbers >= 0 separated by commas, else -1 (the count against the
 * model's classes is checked in setup). */
int cdp_train_class_weights_syntax(const char *spec);

/* Runs the training. Returns 0 on success, 1 on a failure that every rank
 * agreed on before training started (each rank with an error printed it),
 * 3 when stopped by SIGINT/SIGTERM after writing a checkpoint (rank 0
 * prints so), 1 too when the pool changed under the run (loader.h
 * cdp_loader_faulted) and the checkpoint of the last step done is written.
 * Any other failure during training ends the whole job through cdp_dist_abort
 * and does not return. cdp-train's main exits 1 for both 1 and 3
 * (cdp-train(1), EXIT STATUS); the stop is told apart by its message. */
int cdp_train_run(const cdp_train_opts *o);

/* The SIGINT/SIGTERM flag, set by main's handler, read at every micro-batch. */
extern volatile sig_atomic_t cdp_train_stop;

#endif
