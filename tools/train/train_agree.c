/* train_agree.c: what every rank of a run must share, checked before the
 * first step: the options that decide the data plan, the collectives and
 * the update (tr_same_opts), then the pool, the pointer files, the model
 * and the optimizer's settings (tr_same_data). A rank at odds with rank 0
 * names its host, the option or file and both values, and every rank
 * exits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cdp_crc32.h"
#include "dist/dist.h"
#include "train_int.h"

/* The header line of a pointer file (its pool uuid, seed, count and the
 * CRC of its keys) into line[cap], or "" when it cannot be read. */
static void ptr_header(const char *path, char *line, size_t cap)
{
	FILE *f = path ? fopen(path, "r") : NULL;

	line[0] = '\0';
	if (f && !fgets(line, (int)cap, f))
		line[0] = '\0';
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
}

/* This host's name for the messages of a rank at odds with rank 0. */
static void host_name(char *host, size_t cap)
{
	if (gethostname(host, cap) != 0)
		snprintf(host, cap, "?");
	host[cap - 1] = '\0';
}

/* The canonical text of the settings every rank must share: those that
 * decide which samples each rank reads in which step (the data plan), the
 * collectives each step makes and when (steps, validations, logs,
 * checkpoints, the sync and its algorithm), and what the update does.
 * Paths are not in it: a rank may read a copy of the pool or the pointer
 * files under another path (tr_same_data compares their contents), only
 * whether an optional file is given at all. Per-rank matters (threads,
 * device index, log verbosity) are not in it either. */
static void opts_text(const trainer *t, char *buf, size_t cap)
{
	static const char *const bests[] = { "miou", "loss", "acc", "f1", "map", "rmse", "r2" };
	static const char *const scheds[] = { "constant", "step", "cosine" };
	static const char *const overlaps[] = { "off", "on", "auto" };
	const cdp_train_opts *o = t->o;
	const char *no = "not given", *yes = "given";
	char a[40];
#define OPT(...) cdp_dist_opt(buf, cap, __VA_ARGS__)
#define NUM(v) cdp_dist_num(a, sizeof a, (v))

	buf[0] = '\0';
	OPT("--resume", "%s", o->resume ? yes : no);
	OPT("--overwrite", "%s", o->overwrite ? yes : no);
	OPT("--init", "%s", o->init ? yes : no);
	OPT("--init-norm", "%s", o->init_norm ? yes : no);
	OPT("--val-keys", "%s", o->val_keys ? yes : no);
	OPT("--seed", "%" PRIu64, o->seed);
	OPT("--batch", "%d", o->batch);
	OPT("--pad-last", "%s", o->pad_last > 0 ? yes : no);   /* -1: not given */
	OPT("--skip-bad-records", "%s", o->skip_bad ? yes : no);
	OPT("--steps", "%ld", o->steps);
	OPT("--epochs", "%ld", o->epochs);
	OPT("--val-every", "%ld", o->val_every);
	OPT("--log-every", "%ld", o->log_every);
	OPT("--checkpoint-every", "%ld", o->checkpoint_every);
	if (o->resume && !o->sync_given)    /* the checkpoint's, the same for all */
		OPT("--sync", "%s", no);
	else if (o->sync == CDP_SYNC_ALLREDUCE)
		OPT("--sync", "allreduce");
	else if (o->sync == CDP_SYNC_AVERAGE)
		OPT("--sync", "average:%ld", o->sync_k);
	else
		OPT("--sync", "admm:%ld:%s", o->sync_k, NUM(o->rho));
	/* as open_device resolved it: the default may differ by node */
	OPT("--allreduce", "%s", cdp_dist_algo_name(t->algo));
	OPT("--grad-compress", "%s", cdp_dist_comp_name((cdp_dist_comp)o->grad_compress));
	OPT("--bucket-mb", "%s", o->bucket_mb > 0 ? NUM(o->bucket_mb) : no);
	OPT("--overlap", "%s", overlaps[o->overlap]);
	OPT("--nan-policy", "%s", o->nan_policy < 0 ? no : o->nan_policy == CDP_NAN_SKIP ? "skip" :
	    "stop");
	OPT("--loss-scale", "%s", o->loss_scale < 0 ? no : o->loss_scale == 0 ? "off" :
	    NUM(o->loss_scale));
	OPT("--precision", "%s", cdp_precision_name(o->precision));
	OPT("--optimizer", "%s", o->optimizer == CDP_OPT_SGD ? "sgd" :
	    o->optimizer == CDP_OPT_ADAMW ? "adamw" : no);
	OPT("--lr", "%s", o->lr < 0 ? no : NUM(o->lr));
	OPT("--momentum", "%s", o->momentum < 0 ? no : NUM(o->momentum));
	OPT("--nesterov", "%s", o->nesterov > 0 ? yes : no);
	OPT("--weight-decay", "%s", o->weight_decay < 0 ? no : NUM(o->weight_decay));
	OPT("--schedule", "%s", o->schedule < 0 ? no : scheds[o->schedule]);
	OPT("--warmup", "%s", o->warmup < 0 ? no : NUM((double)o->warmup));
	OPT("--freeze", "%s", o->freeze ? o->freeze : no);
	OPT("--unfreeze-at", "%ld", o->unfreeze_at);
	OPT("--class-weights", "%s", o->class_weights ? o->class_weights : no);
	OPT("--keep-best", "%s", o->keep_best ? bests[o->keep_best - CDP_BEST_MIOU] : no);
	OPT("--patience", "%ld", o->patience);
	OPT("--min-delta", "%s", NUM(o->min_delta));
	OPT("--trace", "%s", o->trace ? yes : no);      /* its spans are gathered to rank 0 */
	OPT("CDP_TRAIN_STEP_PER_BUCKET", "%d", o->step_per_bucket);
#undef OPT
#undef NUM
}

int tr_same_opts(trainer *t, int failed, char *err, size_t cap)
{
	static char text[CDP_DIST_OPTS_MAX];
	char host[256], msg[600];

	if (t->size == 1)
		return failed ? -1 : 0;
	/* a failed rank says why first: launched without MPI it may end the
	 * job (no GPU for NCCL) */
	if (failed)
		tr_report(t, err);
	if (cdp_dist_any(failed))
		return -1;
	opts_text(t, text, sizeof text);
	if (!cdp_dist_same_opts(text, msg, sizeof msg))
		return 0;
	if (msg[0]) {
		host_name(host, sizeof host);
		fprintf(stderr, "cdp-train: rank %d on host '%s': %s (every rank must be given the "
		        "same options)\n", t->rank, host, msg);
	}
	return -1;
}

int tr_same_data(trainer *t)
{
	const cdp_train_opts *o = t->o;
	char mine[5][512], first[5][512], host[256], opt[480];
	uint32_t crc = cdp_crc32(0, t->cfg_text, strlen(t->cfg_text));
	int bad = 0;

	/* the data, then the model and its training: ranks that differ in
	 * either would train apart (another rate on the same summed gradient)
	 * or fail in the first all-reduce (other parameter counts) */
	snprintf(mine[0], sizeof mine[0], "%s", t->ti.pool->uuid);
	ptr_header(o->keys, mine[1], sizeof mine[1]);
	ptr_header(o->val_keys, mine[2], sizeof mine[2]);
	for (int i = 0; i < t->nov; i++)
		crc = cdp_crc32(cdp_crc32(crc, "\n", 1), t->ov[i], strlen(t->ov[i]));
	snprintf(mine[3], sizeof mine[3], "crc32 %08" PRIx32 ", %zu parameters", crc,
	         t->net.nparams);
	tr_optim_text(t, opt, sizeof opt);
	snprintf(mine[4], sizeof mine[4], "batch %d, %.470s", o->batch, opt);
	memcpy(first, mine, sizeof first);
	cdp_dist_bcast_bytes(first, sizeof first);
	for (int i = 0; i < 5 && !bad; i++)
		bad = strcmp(mine[i], first[i]) != 0 ? i + 1 : 0;
	if (bad) {
		host_name(host, sizeof host);
		if (bad == 1)
			fprintf(stderr, "cdp-train: rank %d on host '%s': pool '%s' is %s, rank 0's is %s\n",
			        t->rank, host, o->db, mine[0], first[0]);
		else if (bad == 3 && !o->val_keys)
			/* tr_same_opts refuses this first; said plainly all the same */
			fprintf(stderr, "cdp-train: rank %d on host '%s': this rank was given no "
			        "--val-keys, rank 0 was\n", t->rank, host);
		else if (bad <= 3)
			fprintf(stderr, "cdp-train: rank %d on host '%s': pointer file '%s' is not rank "
			        "0's: '%s' here, '%s' there\n", t->rank, host,
			        bad == 2 ? o->keys : o->val_keys, mine[bad - 1], first[bad - 1]);
		else
			fprintf(stderr, "cdp-train: rank %d on host '%s': the %s is not rank 0's: "
			        "%s here, %s there\n", t->rank, host,
			        bad == 4 ? "model cfg (with its overrides)" : "training setting",
			        mine[bad - 1], first[bad - 1]);
	}
	return cdp_dist_any(bad);
}
