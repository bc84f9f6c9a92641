/* main.c: cdp-train, options (man/cdp-train.1). The run is cdp_train_run
 * (train.c); this file parses and checks the options, starts MPI (or an
 * MPI singleton when run alone), installs the handler of SIGINT, SIGTERM,
 * SIGHUP and SIGUSR1 that asks the loop to stop after the current step,
 * and maps the outcome to the exit status.
 */
#include "train.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_progress.h"
#include "device.h"
#include "dist/dist.h"
#include "loader.h"
#include "optim.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "cdp-train"

enum {
	OPT_ALLREDUCE = 256, OPT_BATCH, OPT_CKPT_EVERY, OPT_CLASS_WEIGHTS, OPT_DB, OPT_DEVICE, OPT_EPOCHS, OPT_INIT, OPT_INIT_NORM, OPT_FREEZE, OPT_UNFREEZE_AT,
	OPT_KEEP_BEST, OPT_KEYS, OPT_LOAD, OPT_LOG, OPT_LOG_EVERY, OPT_LOSS_SCALE, OPT_LR, OPT_MIN_DELTA, OPT_MODEL, OPT_MOMENTUM,
	OPT_NAN_POLICY, OPT_NESTEROV, OPT_NO_OVERLAP, OPT_OPTIMIZER, OPT_OUT, OPT_OVERWRITE, OPT_PAD_LAST, OPT_PATIENCE,
	OPT_PRECISION, OPT_PROGRESS, OPT_RESUME, OPT_SCHEDULE, OPT_SEED, OPT_SKIP_BAD, OPT_STEPS,
	OPT_SYNC, OPT_THREADS, OPT_VAL_EVERY, OPT_VAL_KEYS, OPT_WARMUP, OPT_WD
};
/* gradient buckets and the timeline (issues 12, 16) */
enum { OPT_BUCKET_MB = 512, OPT_TRACE };
/* gradient compression (issue 29) */
enum { OPT_GRAD_COMPRESS = 768, OPT_OVERLAP };

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: " PROG " [-hqV] --db DB --keys FILE [--val-keys FILE] --model CFG[:KEY=VALUE,...]\n"
	    "                 --out RUNDIR [--epochs N] [--steps N] [--batch N] [--lr X]\n"
	    "                 [--schedule constant|step|cosine] [--warmup N] [--optimizer sgd|adamw]\n"
	    "                 [--momentum X] [--weight-decay X] [--nesterov] [--seed N] [--threads N]\n"
	    "                 [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16]\n"
	    "                 [--loss-scale dynamic|off|S] [--sync allreduce|average:K|admm:K:RHO]\n"
	    "                 [--allreduce mpi|ring|nccl] [--grad-compress none|fp16|bf16]\n"
	    "                 [--overlap auto|on|off | --no-overlap] [--bucket-mb N] [--trace FILE]\n"
	    "                 [--checkpoint-every N] [--resume | --overwrite]\n"
	    "                 [--init CHECKPOINT [--init-norm]]\n"
	    "                 [--freeze PATTERN[,PATTERN...]] [--unfreeze-at EPOCH]\n"
	    "                 [--log FILE] [--log-every N] [--val-every N] [--load pool|copy]\n"
	    "                 [--pad-last] [--skip-bad-records] [--nan-policy stop|skip]\n"
	    "                 [--keep-best miou|loss|acc|f1|map|rmse|r2] [--patience N]\n"
	    "                 [--min-delta D]\n"
	    "                 [--class-weights auto|W,W,...]\n"
	    "                 [--progress]\n");
}

static void on_signal(int sig)
{
	(void)sig;
	cdp_train_stop = 1;
}

/* "PATH:k=v,k=v" -> path and overrides; a ':' counts only after the last
 * '/' and before an '=' so that paths with colons still work. arg is a
 * copy of the command line's (split in place, it would show as
 * "unet.cfg width=8" in ps and /proc/PID/cmdline). An override
 * is one line of the cfg (cfg.h): a control character in it (a newline
 * would end the line and drop the rest) is refused, -2, with *bad its
 * offset in arg; an item that is not KEY=VALUE (a comma inside a value
 * splits it) -1, with *bad the item's offset, as the cfg parser words it;
 * -3 out of memory. */
static int split_model(char *arg, cdp_train_opts *o, size_t *bad)
{
	char *slash = strrchr(arg, '/'), *colon = strchr(slash ? slash : arg, ':'), *tok, *s;

	o->model = arg;
	o->noverrides = 0;      /* the last --model wins, overrides and all */
	if (!colon || !strchr(colon, '='))
		return 0;
	for (s = colon + 1; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f) {
			*bad = (size_t)(s - arg);
			return -2;
		}
	*colon = '\0';
	s = colon + 1;
	while ((tok = strsep(&s, ",")) != NULL) {
		char **nv;
		const char *eq = strchr(tok, '=');
		/* "", "width", "=3" and "width=" alike (cdp-model(5): exit 2) */
		if (!eq || eq == tok || !eq[1]) {
			*bad = (size_t)(tok - arg);
			return -1;
		}
		if (!(nv = realloc(o->overrides, (o->noverrides + 1) * sizeof *nv)))
			return -3;
		o->overrides = nv;
		o->overrides[o->noverrides++] = tok;
	}
	return 0;
}

static int parse_sync(const char *s, cdp_train_opts *o)
{
	char buf[128], *k, *rho;
	int64_t kk;

	if (strcmp(s, "allreduce") == 0) {
		o->sync = CDP_SYNC_ALLREDUCE;
		return 0;
	}
	if (strlen(s) >= sizeof buf)
		return -1;
	strcpy(buf, s);
	if (!(k = strchr(buf, ':')))
		return -1;
	*k++ = '\0';
	rho = strchr(k, ':');
	if (rho)
		*rho++ = '\0';
	if (cdp_parse_i64(k, 1, INT32_MAX, &kk) != CDP_OK)
		return -1;
	o->sync_k = (long)kk;
	if (strcmp(buf, "average") == 0 && !rho) {
		o->sync = CDP_SYNC_AVERAGE;
		return 0;
	}
	if (strcmp(buf, "admm") == 0 && rho &&
	    cdp_parse_double(rho, 0, 1e6, &o->rho) == CDP_OK && o->rho > 0) {
		o->sync = CDP_SYNC_ADMM;
		return 0;
	}
	return -1;
}

/* dynamic -> 65536 (PyTorch GradScaler's initial scale), off -> 0, S: a
 * number in [1, 1e300] to start from (beyond FLT_MAX the scaled gradient
 * is infinite at once, and the scale halves until it is not) */
static int parse_loss_scale(const char *s, double *out)
{
	if (strcmp(s, "dynamic") == 0)
		*out = 65536;
	else if (strcmp(s, "off") == 0)
		*out = 0;
	else if (cdp_parse_double(s, 1, 1e300, out) != CDP_OK)
		return -1;
	return 0;
}

/* counts and step numbers, min..INT32_MAX: 0, or < 0 after the message */
static int num_long(const char *opt, const char *arg, long min, long *out)
{
	return cdp_cli_long(opt, arg, min, INT32_MAX, out);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "allreduce",        required_argument, NULL, OPT_ALLREDUCE },
		{ "batch",            required_argument, NULL, OPT_BATCH },
		{ "bucket-mb",        required_argument, NULL, OPT_BUCKET_MB },
		{ "checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY },
		{ "class-weights",    required_argument, NULL, OPT_CLASS_WEIGHTS },
		{ "db",               required_argument, NULL, OPT_DB },
		{ "device",           required_argument, NULL, OPT_DEVICE },
		{ "epochs",           required_argument, NULL, OPT_EPOCHS },
		{ "help",             no_argument,       NULL, 'h' },
		{ "keys",             required_argument, NULL, OPT_KEYS },
		{ "load",             required_argument, NULL, OPT_LOAD },
		{ "log",              required_argument, NULL, OPT_LOG },
		{ "log-every",        required_argument, NULL, OPT_LOG_EVERY },
		{ "loss-scale",       required_argument, NULL, OPT_LOSS_SCALE },
		{ "lr",               required_argument, NULL, OPT_LR },
		{ "model",            required_argument, NULL, OPT_MODEL },
		{ "momentum",         required_argument, NULL, OPT_MOMENTUM },
		{ "keep-best",        required_argument, NULL, OPT_KEEP_BEST },
		{ "min-delta",        required_argument, NULL, OPT_MIN_DELTA },
		{ "patience",         required_argument, NULL, OPT_PATIENCE },
		{ "nan-policy",       required_argument, NULL, OPT_NAN_POLICY },
		{ "nesterov",         no_argument,       NULL, OPT_NESTEROV },
		{ "no-overlap",       no_argument,       NULL, OPT_NO_OVERLAP },
		{ "overlap",          required_argument, NULL, OPT_OVERLAP },
		{ "optimizer",        required_argument, NULL, OPT_OPTIMIZER },
		{ "out",              required_argument, NULL, OPT_OUT },
		{ "overwrite",        no_argument,       NULL, OPT_OVERWRITE },
		{ "pad-last",         no_argument,       NULL, OPT_PAD_LAST },
		{ "precision",        required_argument, NULL, OPT_PRECISION },
		{ "progress",         no_argument,       NULL, OPT_PROGRESS },
		{ "quiet",            no_argument,       NULL, 'q' },
		{ "resume",           no_argument,       NULL, OPT_RESUME },
		{ "init",             required_argument, NULL, OPT_INIT },
		{ "init-norm",        no_argument,       NULL, OPT_INIT_NORM },
		{ "freeze",           required_argument, NULL, OPT_FREEZE },
		{ "grad-compress",    required_argument, NULL, OPT_GRAD_COMPRESS },
		{ "unfreeze-at",      required_argument, NULL, OPT_UNFREEZE_AT },
		{ "schedule",         required_argument, NULL, OPT_SCHEDULE },
		{ "seed",             required_argument, NULL, OPT_SEED },
		{ "skip-bad-records", no_argument,       NULL, OPT_SKIP_BAD },
		{ "steps",            required_argument, NULL, OPT_STEPS },
		{ "sync",             required_argument, NULL, OPT_SYNC },
		{ "threads",          required_argument, NULL, OPT_THREADS },
		{ "trace",            required_argument, NULL, OPT_TRACE },
		{ "val-every",        required_argument, NULL, OPT_VAL_EVERY },
		{ "val-keys",         required_argument, NULL, OPT_VAL_KEYS },
		{ "version",          no_argument,       NULL, 'V' },
		{ "warmup",           required_argument, NULL, OPT_WARMUP },
		{ "weight-decay",     required_argument, NULL, OPT_WD },
		{ NULL, 0, NULL, 0 }
	};
	cdp_train_opts o;
	char *model = NULL;         /* --model's copy that o.model and o.overrides point into */
	struct sigaction sa;
	size_t bad;
	const char *bad_name;
	char want[128];
	long v;
	int c, rc = 2, mpi = 0, min_delta_set = 0, overlap_set = 0, no_overlap = 0;
	cdp_dist_algo algo;
	cdp_dist_comp comp;
	static const char *const loads[] = { "pool", "copy", NULL };
	static const char *const optimizers[] = { "sgd", "adamw", NULL };
	static const int optimizer_of[] = { CDP_OPT_SGD, CDP_OPT_ADAMW };
	static const char *const schedules[] = { "constant", "step", "cosine", NULL };
	static const char *const nan_policies[] = { "stop", "skip", NULL };
	static const char *const bests[] = { "miou", "loss", "acc", "f1", "map", "rmse", "r2",
	                                     NULL };
	static const int schedule_of[] = { CDP_LR_CONSTANT, CDP_LR_STEP, CDP_LR_COSINE };
	int k;

	cdp_train_opts_init(&o);
	cdp_cli_init(PROG, stderr);
	while ((c = cdp_cli_getopt(argc, argv, "hqV", longopts)) != -1) {
		switch (c) {
		case 'h': usage(stdout); rc = cdp_cli_close(stdout) ? 1 : 0; goto out;
		case 'q': o.quiet = 1; o.progress = CDP_PROGRESS_OFF; break;
		case 'V':
			rc = cdp_cli_version(stdout, cdp_engine_features(), cdp_dist_features(),
			                     cdp_lmdb_version(), NULL) ? 1 : 0;
			goto out;
		case OPT_ALLREDUCE:
			if (cdp_dist_algo_parse(optarg, &algo) != CDP_OK) {
				cdp_cli_bad("--allreduce", optarg, "mpi, ring or nccl");
				goto out;
			}
			o.allreduce = (int)algo;
			break;
		case OPT_GRAD_COMPRESS:
			if (cdp_dist_comp_parse(optarg, &comp) != CDP_OK) {
				cdp_cli_bad("--grad-compress", optarg, "none, fp16 or bf16");
				goto out;
			}
			o.grad_compress = (int)comp;
			break;
		case OPT_BATCH:
			if (num_long("--batch", optarg, 1, &v) < 0)
				goto out;
			o.batch = (int)v;
			break;
		case OPT_BUCKET_MB:
			/* 1 KB (262 floats) .. 4 GiB, within a bucket's 8 * INT_MAX floats */
			if (cdp_cli_double("--bucket-mb", optarg, 0.001, 4096, 0, &o.bucket_mb))
				goto out;
			break;
		case OPT_CKPT_EVERY:
			if (num_long("--checkpoint-every", optarg, 0, &o.checkpoint_every) < 0)
				goto out;
			break;
		case OPT_CLASS_WEIGHTS:
			/* the syntax now; the count against the model's classes in setup */
			if (cdp_train_class_weights_syntax(optarg) < 0) {
				cdp_cli_bad("--class-weights", optarg, "auto or numbers >= 0 separated "
				            "by commas, one per class");
				goto out;
			}
			o.class_weights = optarg;
			break;
		case OPT_DB: o.db = optarg; break;
		case OPT_DEVICE:
			if (cdp_device_parse(optarg) != 0) {
				cdp_cli_bad("--device", optarg, "cpu, cuda, cuda:N or auto");
				goto out;
			}
			o.device = optarg;
			break;
		case OPT_EPOCHS:
			if (num_long("--epochs", optarg, 1, &o.epochs) < 0)
				goto out;
			break;
		case OPT_KEYS: o.keys = optarg; break;
		case OPT_LOAD:
			if (cdp_cli_keyword("--load", optarg, loads, &k))
				goto out;
			o.load = k == 0 ? CDP_LOAD_POOL : CDP_LOAD_COPY;
			break;
		case OPT_LOG:
			if (cdp_cli_file("--log", optarg))
				goto out;
			o.log_path = optarg;
			break;
		case OPT_LOG_EVERY:
			if (num_long("--log-every", optarg, 1, &o.log_every) < 0)
				goto out;
			break;
		case OPT_LOSS_SCALE:
			if (parse_loss_scale(optarg, &o.loss_scale) < 0) {
				cdp_cli_bad("--loss-scale", optarg, "dynamic, off or a number in 1..1e300");
				goto out;
			}
			break;
		case OPT_LR:
			/* the ranges of lr=, momentum= and weight_decay= (optim.h) */
			if (cdp_cli_double("--lr", optarg, 0, CDP_OPTIM_LR_MAX, 0, &o.lr))
				goto out;
			break;
		case OPT_MODEL:
			free(model);
			if (!(model = strdup(optarg))) {
				fprintf(stderr, PROG ": out of memory\n");
				goto out;
			}
			if ((k = split_model(model, &o, &bad)) == -2) {
				fprintf(stderr, PROG ": --model: an override holds control character 0x%02x "
				        "at byte %zu: each KEY=VALUE is one line of the cfg\n",
				        (unsigned char)optarg[bad], bad + 1);
				goto out;
			}
			if (k == -1) {
				/* cdp_cfg_parse's and cdpool.cfg's words */
				fprintf(stderr, PROG ": %s: override '%.100s': expected key=value\n",
				        model, model + bad);
				goto out;
			}
			if (k < 0) {
				fprintf(stderr, PROG ": out of memory\n");
				goto out;
			}
			break;
		case OPT_MOMENTUM:
			if (cdp_cli_double("--momentum", optarg, 0, CDP_OPTIM_MOMENTUM_END, 1,
			                   &o.momentum))
				goto out;
			/* below the end as the float it is kept in (0.99999999 would
			 * be 1), with cdp_cli_double's words */
			if ((float)o.momentum >= CDP_OPTIM_MOMENTUM_END) {
				cdp_cli_bad("--momentum", optarg, "a number in 0..1, less than 1");
				goto out;
			}
			break;
		case OPT_KEEP_BEST:
			if (cdp_cli_keyword("--keep-best", optarg, bests, &k))
				goto out;
			o.keep_best = CDP_BEST_MIOU + k;
			break;
		case OPT_MIN_DELTA:
			if (cdp_cli_double("--min-delta", optarg, 0, 1e300, 0, &o.min_delta))
				goto out;
			min_delta_set = 1;
			break;
		case OPT_PATIENCE:
			if (num_long("--patience", optarg, 1, &o.patience) < 0)
				goto out;
			break;
		case OPT_NAN_POLICY:
			if (cdp_cli_keyword("--nan-policy", optarg, nan_policies, &k))
				goto out;
			o.nan_policy = k == 0 ? CDP_NAN_STOP : CDP_NAN_SKIP;
			break;
		case OPT_NESTEROV: o.nesterov = 1; break;
		case OPT_NO_OVERLAP:
			o.overlap = CDP_OVERLAP_OFF;
			no_overlap = 1;
			break;
		case OPT_OVERLAP:
			overlap_set = 1;
			if (strcmp(optarg, "auto") == 0) {
				o.overlap = CDP_OVERLAP_AUTO;
			} else if (strcmp(optarg, "on") == 0) {
				o.overlap = CDP_OVERLAP_ON;
			} else if (strcmp(optarg, "off") == 0) {
				o.overlap = CDP_OVERLAP_OFF;
			} else {
				cdp_cli_bad("--overlap", optarg, "auto, on or off");
				goto out;
			}
			break;
		case OPT_OPTIMIZER:
			if (cdp_cli_keyword("--optimizer", optarg, optimizers, &k))
				goto out;
			o.optimizer = optimizer_of[k];
			break;
		case OPT_OUT:
			if (cdp_cli_file("--out", optarg))
				goto out;
			o.out = optarg;
			break;
		case OPT_OVERWRITE: o.overwrite = 1; break;
		case OPT_PAD_LAST: o.pad_last = 1; break;
		case OPT_PRECISION:
			/* the names are indexed by CDP_PREC_* */
			if (cdp_cli_keyword("--precision", optarg, cdp_precision_names, &o.precision))
				goto out;
			break;
		case OPT_PROGRESS: o.progress = CDP_PROGRESS_ON; break;
		case OPT_RESUME: o.resume = 1; break;
		case OPT_INIT: o.init = optarg; break;
		case OPT_INIT_NORM: o.init_norm = 1; break;
		case OPT_FREEZE:
			/* "" froze nothing silently where ",," was refused at the start */
			if (cdp_cli_list("--freeze", optarg, 1, "a list of name patterns like "
			                 "conv0*,enc1.*"))
				goto out;
			o.freeze = optarg;
			break;
		case OPT_UNFREEZE_AT:
			if (num_long("--unfreeze-at", optarg, 1, &o.unfreeze_at) < 0)
				goto out;
			break;
		case OPT_SCHEDULE:
			if (cdp_cli_keyword("--schedule", optarg, schedules, &k))
				goto out;
			o.schedule = schedule_of[k];
			break;
		case OPT_SEED:
			if (cdp_cli_u64("--seed", optarg, 0, UINT64_MAX, &o.seed))
				goto out;
			break;
		case OPT_SKIP_BAD: o.skip_bad = 1; break;
		case OPT_STEPS:
			if (num_long("--steps", optarg, 1, &o.steps) < 0)
				goto out;
			break;
		case OPT_SYNC:
			o.sync_given = 1;
			if (parse_sync(optarg, &o) < 0) {
				cdp_cli_bad("--sync", optarg, "allreduce, average:K or admm:K:RHO "
				            "(K 1 to 2147483647, RHO above 0 to 1e6)");
				goto out;
			}
			break;
		case OPT_THREADS:
			if (cdp_cli_long("--threads", optarg, 1, CDP_MAX_THREADS, &v))
				goto out;
			o.threads = (int)v;
			break;
		case OPT_TRACE:
			if (cdp_cli_file("--trace", optarg))
				goto out;
			o.trace = optarg;
			break;
		case OPT_VAL_EVERY:
			if (num_long("--val-every", optarg, 0, &o.val_every) < 0)
				goto out;
			break;
		case OPT_VAL_KEYS: o.val_keys = optarg; break;
		case OPT_WARMUP:
			if (num_long("--warmup", optarg, 0, &o.warmup) < 0)
				goto out;
			break;
		case OPT_WD:
			if (cdp_cli_double("--weight-decay", optarg, 0, CDP_OPTIM_WD_MAX, 0,
			                   &o.weight_decay))
				goto out;
			break;
		default:
			goto out;
		}
	}
	if (cdp_cli_operands(argc - optind, argv + optind, (const char *const[]){ NULL })) {
		usage(stderr);
		goto out;
	}
	/* nothing to run: the reason, then the usage, as a missing operand
	 * gets in every program; a conflict of options given is one line */
	if (!o.db || !o.keys || !o.out || (!o.model && !o.resume)) {
		fprintf(stderr, PROG ": missing %s\n", !o.db ? "--db" : !o.keys ? "--keys" :
		        !o.out ? "--out" : "--model (needed unless --resume)");
		usage(stderr);
		goto out;
	}
	/* the synopsis's "--overlap auto|on|off | --no-overlap": with both,
	 * the last would win silently */
	if (overlap_set && no_overlap) {
		fprintf(stderr, PROG ": --overlap and --no-overlap exclude each other "
		        "(--no-overlap is --overlap off)\n");
		goto out;
	}
	if (o.resume && o.overwrite) {
		fprintf(stderr, PROG ": --resume and --overwrite exclude each other (continue the run "
		        "in '%s', or start it over)\n", o.out);
		goto out;
	}
	o.overlap_given = overlap_set ? "--overlap" : no_overlap ? "--no-overlap" : NULL;
	if (o.sync != CDP_SYNC_ALLREDUCE && cdp_train_allreduce_only(&o)) {
		fprintf(stderr, PROG ": %s needs --sync allreduce (%s)\n",
		        cdp_train_allreduce_only(&o), o.grad_compress != CDP_DIST_COMP_NONE ?
		        "average and admm exchange parameters, which stay float32" :
		        "average and admm exchange the parameters whole, after the step");
		goto out;
	}
	if (o.init_norm && !o.init) {
		fprintf(stderr, PROG ": --init-norm needs --init (it applies the initial weights' "
		        "input normalization)\n");
		return 2;
	}
	if (o.unfreeze_at && !o.freeze) {
		fprintf(stderr, PROG ": --unfreeze-at needs --freeze\n");
		return 2;
	}
	if (o.resume && o.init) {
		fprintf(stderr, PROG ": --resume and --init exclude each other (a resumed run has its "
		        "weights)\n");
		goto out;
	}
	/* as torch.optim.SGD refuses nesterov without momentum; AdamW has
	 * neither (the cfg's optimizer is checked against them in setup) */
	if (o.optimizer == CDP_OPT_ADAMW && (o.momentum >= 0 || o.nesterov > 0)) {
		fprintf(stderr, PROG ": %s applies to --optimizer sgd, not adamw\n",
		        o.momentum >= 0 ? "--momentum" : "--nesterov");
		goto out;
	}
	if (o.nesterov > 0 && o.momentum == 0) {
		fprintf(stderr, PROG ": --nesterov needs a momentum above 0 (--momentum 0 given)\n");
		goto out;
	}
	if ((o.patience || min_delta_set) && (!o.keep_best || !o.patience || !o.val_keys)) {
		fprintf(stderr, PROG ": %s\n", !o.patience ? "--min-delta needs --patience" :
		        !o.keep_best ? "--patience needs --keep-best (the metric it watches)" :
		        "--patience needs --val-keys (it watches validations)");
		goto out;
	}
	o.log_keys = getenv("CDP_TRAIN_LOG_KEYS");
	if (o.log_keys && !*o.log_keys)
		o.log_keys = NULL;

	rc = 1;
	{
		const char *pb = getenv("CDP_TRAIN_STEP_PER_BUCKET");
		if (pb && *pb && strcmp(pb, "0") != 0 && strcmp(pb, "1") != 0) {
			cdp_cli_env_bad("CDP_TRAIN_STEP_PER_BUCKET", "0 or 1", NULL);
			goto out;
		}
		o.step_per_bucket = !(pb && strcmp(pb, "0") == 0);
	}
	{
		/* for tests: a stop as SIGTERM's, landing on a chosen step */
		const char *st = getenv("CDP_TRAIN_STOP_AT");
		int64_t at;
		if (st && *st) {
			if (cdp_parse_i64(st, 1, LONG_MAX, &at) != 0) {
				cdp_cli_env_bad("CDP_TRAIN_STOP_AT", "a step, 1 or more", NULL);
				goto out;
			}
			o.stop_at = (long)at;
		}
	}
	if ((bad_name = cdp_device_env_check(want, sizeof want)) != NULL) {
		cdp_cli_env_bad(bad_name, want, NULL);
		goto out;
	}
	/* the GPU before MPI_Init, where a CUDA-aware MPI sets up on the current one */
	cdp_device_preselect(o.device);
	if ((c = cdp_dist_init(&argc, &argv)) != 0) {
		cdp_cli_env_bad(cdp_dist_bad_env(), cdp_dist_bad_env_want(), cdp_strerror(c));
		goto out;
	}
	mpi = 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	/* the handler only sets a flag the loop polls: no system call (a
	 * checkpoint's write, a loader's read) should fail with EINTR for it */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	/* SIGHUP (a closed terminal) and SIGUSR1 (Slurm's --signal=USR1@T
	 * before the time limit) would otherwise end the run with no
	 * checkpoint and leave RUNDIR/.lock: they stop it as SIGTERM does;
	 * a SIGHUP ignored at the start (nohup) stays ignored */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	/* a reader of --log - that goes away must give EPIPE, which stops
	 * the run with its checkpoint, not a kill without one */
	signal(SIGPIPE, SIG_IGN);
	{
		/* under nohup a closed terminal must not stop the run */
		struct sigaction old;
		if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(SIGHUP, &sa, NULL);
	}
	/* 3, stopped by a signal, is a failure to finish too (cdp-train(1)) */
	rc = cdp_train_run(&o) == 0 ? 0 : 1;
out:
	if (mpi)
		cdp_dist_finalize();
	free(o.overrides);
	free(model);
	return rc;
}
