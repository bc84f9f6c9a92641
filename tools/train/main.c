/* main.c: cdp-train, options (man/cdp-train.1). The run is cdp_train_run
 * (train.c); this file parses and checks the options, starts MPI (or an
 * MPI singleton when run alone), installs the SIGINT/SIGTERM handler that
 * asks the loop to stop after the current step, and maps the outcome to
 * the exit status.
 */
#include "train.h"

#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_progress.h"
#include "device.h"
#include "dist/dist.h"
#include "loader.h"
#include "optim.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "cdp-train"

enum {
	OPT_ALLREDUCE = 256, OPT_BATCH, OPT_CKPT_EVERY, OPT_DB, OPT_DEVICE, OPT_EPOCHS,
	OPT_KEYS, OPT_LOAD, OPT_LOG, OPT_LOG_EVERY, OPT_LOSS_SCALE, OPT_LR, OPT_MODEL, OPT_MOMENTUM,
	OPT_NESTEROV, OPT_NO_OVERLAP, OPT_OPTIMIZER, OPT_OUT, OPT_PAD_LAST, OPT_PRECISION, OPT_PROGRESS,
	OPT_RESUME, OPT_SCHEDULE, OPT_SEED, OPT_SKIP_BAD, OPT_STEPS, OPT_SYNC, OPT_THREADS,
	OPT_VAL_EVERY, OPT_VAL_KEYS, OPT_WARMUP, OPT_WD
};

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: " PROG " [-hq] --db DB --keys FILE [--val-keys FILE] --model CFG[:KEY=VALUE,...]\n"
	    "                 --out RUNDIR [--epochs N | --steps N] [--batch N] [--lr X]\n"
	    "                 [--schedule constant|step|cosine] [--warmup N] [--optimizer sgd|adamw]\n"
	    "                 [--momentum X] [--weight-decay X] [--nesterov] [--seed N] [--threads N]\n"
	    "                 [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|bf16|fp16]\n"
	    "                 [--loss-scale dynamic|off|S] [--sync allreduce|average:K|admm:K:RHO]\n"
	    "                 [--allreduce mpi|ring|nccl] [--no-overlap] [--checkpoint-every N] [--resume]\n"
	    "                 [--log FILE] [--log-every N] [--val-every N] [--load pool|copy]\n"
	    "                 [--pad-last] [--skip-bad-records] [--progress]\n");
}

static void on_signal(int sig)
{
	(void)sig;
	cdp_train_stop = 1;
}

/* "PATH:k=v,k=v" -> path and overrides; a ':' counts only after the last
 * '/' and before an '=' so that paths with colons still work. */
static int split_model(char *arg, cdp_train_opts *o)
{
	char *slash = strrchr(arg, '/'), *colon = strchr(slash ? slash : arg, ':'), *tok, *s;

	o->model = arg;
	if (!colon || !strchr(colon, '='))
		return 0;
	*colon = '\0';
	s = colon + 1;
	while ((tok = strsep(&s, ",")) != NULL) {
		char **nv;
		if (!*tok || !strchr(tok, '=') || *tok == '=')
			return -1;
		if (!(nv = realloc(o->overrides, (o->noverrides + 1) * sizeof *nv)))
			return -1;
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

/* fp32|tf32|bf16|fp16 -> CDP_PREC_*, or -1 */
static int parse_precision(const char *s)
{
	static const char *const names[] = { "fp32", "tf32", "bf16", "fp16" };
	static const int prec[] = { CDP_PREC_FP32, CDP_PREC_TF32, CDP_PREC_BF16, CDP_PREC_FP16 };

	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(s, names[i]) == 0)
			return prec[i];
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

static int num_long(const char *opt, const char *arg, long min, long *out)
{
	int64_t v;
	if (cdp_parse_i64(arg, min, INT32_MAX, &v) != CDP_OK) {
		fprintf(stderr, PROG ": %s '%s': not an integer in [%ld, %d]\n", opt, arg, min,
		        INT32_MAX);
		return -1;
	}
	*out = (long)v;
	return 0;
}

static int num_double(const char *opt, const char *arg, double max, double *out)
{
	if (cdp_parse_double(arg, 0, max, out) != CDP_OK) {
		fprintf(stderr, PROG ": %s '%s': not a number in [0, %g]\n", opt, arg, max);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "allreduce",        required_argument, NULL, OPT_ALLREDUCE },
		{ "batch",            required_argument, NULL, OPT_BATCH },
		{ "checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY },
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
		{ "nesterov",         no_argument,       NULL, OPT_NESTEROV },
		{ "no-overlap",       no_argument,       NULL, OPT_NO_OVERLAP },
		{ "optimizer",        required_argument, NULL, OPT_OPTIMIZER },
		{ "out",              required_argument, NULL, OPT_OUT },
		{ "pad-last",         no_argument,       NULL, OPT_PAD_LAST },
		{ "precision",        required_argument, NULL, OPT_PRECISION },
		{ "progress",         no_argument,       NULL, OPT_PROGRESS },
		{ "quiet",            no_argument,       NULL, 'q' },
		{ "resume",           no_argument,       NULL, OPT_RESUME },
		{ "schedule",         required_argument, NULL, OPT_SCHEDULE },
		{ "seed",             required_argument, NULL, OPT_SEED },
		{ "skip-bad-records", no_argument,       NULL, OPT_SKIP_BAD },
		{ "steps",            required_argument, NULL, OPT_STEPS },
		{ "sync",             required_argument, NULL, OPT_SYNC },
		{ "threads",          required_argument, NULL, OPT_THREADS },
		{ "val-every",        required_argument, NULL, OPT_VAL_EVERY },
		{ "val-keys",         required_argument, NULL, OPT_VAL_KEYS },
		{ "warmup",           required_argument, NULL, OPT_WARMUP },
		{ "weight-decay",     required_argument, NULL, OPT_WD },
		{ NULL, 0, NULL, 0 }
	};
	cdp_train_opts o;
	struct sigaction sa;
	long v;
	int c, rc = 2, mpi = 0;
	cdp_dist_algo algo;

	cdp_train_opts_init(&o);
	while ((c = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(stdout); rc = 0; goto out;
		case 'q': o.quiet = 1; o.progress = CDP_PROGRESS_OFF; break;
		case OPT_ALLREDUCE:
			if (cdp_dist_algo_parse(optarg, &algo) != CDP_OK) {
				fprintf(stderr, PROG ": --allreduce '%s': not mpi, ring or nccl\n", optarg);
				goto out;
			}
			o.allreduce = (int)algo;
			break;
		case OPT_BATCH:
			if (num_long("--batch", optarg, 1, &v) < 0)
				goto out;
			o.batch = (int)v;
			break;
		case OPT_CKPT_EVERY:
			if (num_long("--checkpoint-every", optarg, 0, &o.checkpoint_every) < 0)
				goto out;
			break;
		case OPT_DB: o.db = optarg; break;
		case OPT_DEVICE:
			if (cdp_device_parse(optarg) != 0) {
				fprintf(stderr, PROG ": --device '%s': not cpu, cuda, cuda:N or auto\n",
				        optarg);
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
			if (strcmp(optarg, "pool") == 0)
				o.load = CDP_LOAD_POOL;
			else if (strcmp(optarg, "copy") == 0)
				o.load = CDP_LOAD_COPY;
			else {
				fprintf(stderr, PROG ": --load '%s': not pool or copy\n", optarg);
				goto out;
			}
			break;
		case OPT_LOG: o.log_path = optarg; break;
		case OPT_LOG_EVERY:
			if (num_long("--log-every", optarg, 1, &o.log_every) < 0)
				goto out;
			break;
		case OPT_LOSS_SCALE:
			if (parse_loss_scale(optarg, &o.loss_scale) < 0) {
				fprintf(stderr, PROG ": --loss-scale '%s': not dynamic, off or a number in "
				        "[1, 1e300]\n", optarg);
				goto out;
			}
			break;
		case OPT_LR:
			if (num_double("--lr", optarg, 100, &o.lr) < 0)
				goto out;
			break;
		case OPT_MODEL:
			if (split_model(optarg, &o) < 0) {
				fprintf(stderr, PROG ": --model '%s': overrides must be KEY=VALUE,...\n",
				        optarg);
				goto out;
			}
			break;
		case OPT_MOMENTUM:
			if (num_double("--momentum", optarg, 1, &o.momentum) < 0 || o.momentum >= 1) {
				fprintf(stderr, PROG ": --momentum must be below 1\n");
				goto out;
			}
			break;
		case OPT_NESTEROV: o.nesterov = 1; break;
		case OPT_NO_OVERLAP: o.overlap = 0; break;
		case OPT_OPTIMIZER:
			if (strcmp(optarg, "sgd") == 0)
				o.optimizer = CDP_OPT_SGD;
			else if (strcmp(optarg, "adamw") == 0)
				o.optimizer = CDP_OPT_ADAMW;
			else {
				fprintf(stderr, PROG ": --optimizer '%s': not sgd or adamw\n", optarg);
				goto out;
			}
			break;
		case OPT_OUT: o.out = optarg; break;
		case OPT_PAD_LAST: o.pad_last = 1; break;
		case OPT_PRECISION:
			if ((o.precision = parse_precision(optarg)) < 0) {
				fprintf(stderr, PROG ": --precision '%s': not fp32, tf32, bf16 or fp16\n",
				        optarg);
				goto out;
			}
			break;
		case OPT_PROGRESS: o.progress = CDP_PROGRESS_ON; break;
		case OPT_RESUME: o.resume = 1; break;
		case OPT_SCHEDULE:
			if (strcmp(optarg, "constant") == 0)
				o.schedule = CDP_LR_CONSTANT;
			else if (strcmp(optarg, "step") == 0)
				o.schedule = CDP_LR_STEP;
			else if (strcmp(optarg, "cosine") == 0)
				o.schedule = CDP_LR_COSINE;
			else {
				fprintf(stderr, PROG ": --schedule '%s': not constant, step or cosine\n",
				        optarg);
				goto out;
			}
			break;
		case OPT_SEED:
			if (cdp_parse_u64(optarg, 0, UINT64_MAX, &o.seed) != CDP_OK) {
				fprintf(stderr, PROG ": --seed '%s': not an integer in [0, %" PRIu64 "]\n",
				        optarg, UINT64_MAX);
				goto out;
			}
			break;
		case OPT_SKIP_BAD: o.skip_bad = 1; break;
		case OPT_STEPS:
			if (num_long("--steps", optarg, 1, &o.steps) < 0)
				goto out;
			break;
		case OPT_SYNC:
			if (parse_sync(optarg, &o) < 0) {
				fprintf(stderr, PROG ": --sync '%s': not allreduce, average:K or "
				        "admm:K:RHO (K >= 1, RHO > 0)\n", optarg);
				goto out;
			}
			break;
		case OPT_THREADS:
			if (num_long("--threads", optarg, 1, &v) < 0)
				goto out;
			o.threads = (int)v;
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
			if (num_double("--weight-decay", optarg, 10, &o.weight_decay) < 0)
				goto out;
			break;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		goto out;
	}
	if (!o.db || !o.keys || !o.out || (!o.model && !o.resume)) {
		fprintf(stderr, PROG ": missing %s\n", !o.db ? "--db" : !o.keys ? "--keys" :
		        !o.out ? "--out" : "--model (needed unless --resume)");
		usage(stderr);
		goto out;
	}
	o.log_keys = getenv("CDP_TRAIN_LOG_KEYS");
	if (o.log_keys && !*o.log_keys)
		o.log_keys = NULL;

	rc = 1;
	/* the GPU before MPI_Init, where a CUDA-aware MPI sets up on the current one */
	cdp_device_preselect(o.device);
	if ((c = cdp_dist_init(&argc, &argv)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", cdp_dist_bad_env(), cdp_strerror(c));
		goto out;
	}
	mpi = 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	/* the handler only sets a flag the loop polls: no system call (a
	 * checkpoint's write, a loader's read) should fail with EINTR for it */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	rc = cdp_train_run(&o) == 0 ? 0 : 1;
out:
	if (mpi)
		cdp_dist_finalize();
	free(o.overrides);
	return rc;
}
