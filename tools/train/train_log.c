/* train_log.c: what cdp-train writes about a run (rank 0 only, except the
 * per-rank key log of the test mode).
 *
 *  RUNDIR/metrics.jsonl  one JSON object a line:
 *    {"type":"step","step":S,"epoch":E,"loss":L,"lr":X,"samples_per_s":R,
 *     "data_wait_s":W,"allreduce_s":A,"grad_allreduce_s":G,
 *     "grad_exposed_s":E,"grad_allreduce_last_s":G,"grad_exposed_last_s":E,
 *     "loss_scale":X,"skipped_steps":N,
 *     "rss_anon_kb":[per rank],"skipped":K}
 *      averages over the steps since the last step line; data_wait_s,
 *      allreduce_s, grad_allreduce_s (gradient buckets in flight) and
 *      grad_exposed_s (the part of it not hidden behind backward,
 *      <= grad_allreduce_s on every rank: dist.h, cdp_dist_stats) are the
 *      slowest rank's totals over them; the _last_s pair is the two of
 *      the rank that waited least (the one that ended backward last, which
 *      waits for the network alone while the others wait for it too);
 *      loss_scale is
 *      the dynamic loss scale after the step (null when off), skipped_steps
 *      the optimizer steps skipped so far because the scaled gradients
 *      overflowed, skipped the bad records skipped so far;
 *    {"type":"val","step":S,"epoch":E,"loss":L,"accuracy":X,"miou":X,
 *     "iou":[per class],"f1":[per class]}
 *    regression runs: {"type":"val","step":S,"epoch":E,"loss":L,"metric":X,
 *     "rmse":X,"mae":X,"bias":X,"r2":X,"count":N,"target_rmse":[per target],
 *     "target_mae":[..],"target_bias":[..],"target_r2":[..],
 *     "target_count":[..]} (the top-level scores pooled over the targets,
 *     cdp_regm_pooled; metric is the pooled R^2)
 *    multi-label runs: {"type":"val","step":S,"epoch":E,"loss":L,"metric":X,
 *     "micro_precision":X,"micro_recall":X,"micro_f1":X,"macro_f1":X,"map":X,
 *     "precision":[per class],"recall":[..],"f1":[..],"ap":[..]} (metric is
 *     the micro F1)
 *    {"type":"epoch","step":S,"epoch":E,"loss":L,"seconds":T[,"val_loss":..,
 *     "val_accuracy":..,"val_miou":..]} (multi-label: "val_micro_f1",
 *     "val_map" in place of the last two)
 *    {"type":"resume","step":S,"epoch":E}  a resumed run started here
 *    Undefined metrics are null. Resuming keeps the lines up to the
 *    checkpoint's step and drops later ones, so the file stays one curve,
 *    and any line that is not one whole JSON object (a write cut short).
 *  A failed write or flush of metrics.jsonl or the log is said once on
 *  stderr and stops the run (train.c); the file is cut back to its last
 *  whole line and gets nothing more, so no part of a line stays.
 *  RUNDIR/train.log (or --log FILE)  timestamped text lines, appended.
 *  RUNDIR/loss.png  metrics.jsonl drawn by cdp_plot_run_png (cdp_plot.h):
 *    training loss raw and smoothed, validation loss and metric, the
 *    learning rate and the resumes against the step, redrawn each epoch.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_out.h"
#include "cdp_plot.h"
#include "cdp_progress.h"
#include "dist/dist.h"
#include "train_int.h"
#include "train_trace.h"

long tr_rss_anon_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* The metric whose --keep-best kept the best.cdpt at path (its BEST), 0
 * when it does not say (written before BEST) or cannot be read: it is
 * then taken for this run's, as before BEST. */
static int best_kept_by(const char *path)
{
	cdp_ckpt ck;
	char why[256];
	int m = 0;

	/* no rank's per-rank state is held, only validated */
	if (cdp_ckpt_read_why(path, CDP_CKPT_MAX_RANKS, &ck, why, sizeof why) == CDP_OK) {
		m = ck.has_best ? ck.best_metric : 0;
		cdp_ckpt_free(&ck);
	}
	return m;
}

/* One val line's --keep-best value into best (when seeded) and
 * --patience's count, as the run that wrote it counted them */
static void see_val(trainer *t, int seed_best, long step, double x)
{
	int lower = tr_best_lower(t);

	if (seed_best && isfinite(x) && (!t->have_best || (lower ? x < t->best : x > t->best))) {
		t->best = x;
		t->have_best = 1;
	}
	tr_patience_see(t, x, step);
}

/* JSON text (RFC 8259) of one string at *s, which is at its quote; on
 * success *s is past its closing quote */
static int jstring(const char **s)
{
	const char *p = *s + 1;

	for (; *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)           /* the line's end, NUL, a control */
			return 0;
		if (*p != '\\')
			continue;
		p++;
		if (*p == 'u') {
			for (int i = 1; i <= 4; i++)
				if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
					return 0;
			p += 4;
		} else if (!*p || !strchr("\"\\/bfnrt", *p)) {
			return 0;
		}
	}
	*s = p + 1;
	return 1;
}

static const char *jspace(const char *p)
{
	return p + strspn(p, " \t\r");
}

/* One JSON value at *s (nesting at most 64 deep); on success *s is past it */
static int jvalue(const char **s, int depth)
{
	const char *p = jspace(*s);
	static const char *const lit[3] = { "true", "false", "null" };

	if (*p == '{' || *p == '[') {
		char end = *p == '{' ? '}' : ']';
		int obj = *p == '{';
		if (depth >= 64)
			return 0;
		p = jspace(p + 1);
		if (*p == end) {
			*s = p + 1;
			return 1;
		}
		for (;;) {
			if (obj) {
				p = jspace(p);
				if (*p != '"' || !jstring(&p))
					return 0;
				p = jspace(p);
				if (*p++ != ':')
					return 0;
			}
			if (!jvalue(&p, depth + 1))
				return 0;
			p = jspace(p);
			if (*p == end) {
				*s = p + 1;
				return 1;
			}
			if (*p++ != ',')
				return 0;
		}
	}
	if (*p == '"') {
		if (!jstring(&p))
			return 0;
		*s = p;
		return 1;
	}
	for (int i = 0; i < 3; i++)
		if (!strncmp(p, lit[i], strlen(lit[i]))) {
			*s = p + strlen(lit[i]);
			return 1;
		}
	/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		p += strspn(p, "0123456789");
	else
		return 0;
	if (*p == '.') {
		if (!strchr("0123456789", p[1]) || !p[1])
			return 0;
		p += 1 + strspn(p + 1, "0123456789");
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!strchr("0123456789", *p) || !*p)
			return 0;
		p += strspn(p, "0123456789");
	}
	*s = p;
	return 1;
}

/* 1 when line (n bytes, as getline read it) is one JSON object and its
 * newline: what metrics.jsonl's writer leaves. A line that a failed
 * write cut short (no newline), or spliced to the tail of another (an
 * older cdp-train's), is not. */
static int whole_line(const char *line, size_t n)
{
	const char *p = jspace(line);

	if (n == 0 || line[n - 1] != '\n' || strlen(line) != n || *p != '{' || !jvalue(&p, 0))
		return 0;
	p = jspace(p);
	return *p == '\n' && p + 1 == line + n;
}

void tr_log_scan(trainer *t)
{
	char path[4200], key[40], *line = NULL;
	size_t lcap = 0;
	ssize_t n;
	long last = -1, upto = (long)t->ck.step;
	double lx = NAN;
	struct stat st;
	FILE *in;
	/* best.cdpt's value only while best.cdpt is there and was kept by
	 * this metric: --keep-best added on a resume, the file removed, or
	 * one that BEST says another metric kept writes it anew */
	int seed;

	snprintf(path, sizeof path, "%s/best.cdpt", t->o->out);
	seed = t->o->keep_best && stat(path, &st) == 0 && S_ISREG(st.st_mode);
	if (seed && (t->best_other = best_kept_by(path)) == t->o->keep_best)
		t->best_other = 0;
	if (t->best_other) {
		seed = 0;
		fprintf(stderr, "cdp-train: warning: best.cdpt was kept by %s; --keep-best %s keeps "
		        "it anew from the next validation\n", cdp_ckpt_best_name(t->best_other),
		        cdp_ckpt_best_name(t->o->keep_best));
	}
	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	snprintf(key, sizeof key, "\"%s\":", tr_best_key(t));
	if (!(in = fopen(path, "r")))
		return;
	while ((n = getline(&line, &lcap, in)) > 0) {
		char type[16];
		long step;
		const char *m;
		double x;
		if (!whole_line(line, (size_t)n) ||
		    sscanf(line, "{\"type\":\"%15[a-z]\",\"step\":%ld", type, &step) != 2 ||
		    step > upto)
			continue;
		if (!strcmp(type, "epoch") && step == upto)
			t->ck_epoch = 1;
		if (strcmp(type, "val"))
			continue;
		t->ck_val |= step == upto;
		/* the last validation of an earlier run cut off the grid
		 * (--steps) counted for neither, and trim_jsonl drops it */
		if (step == upto && !tr_val_on_grid(t, step))
			continue;
		if (!(m = strstr(line, key)) || sscanf(m + strlen(key), "%lf", &x) != 1)
			x = NAN;
		/* one validation a step: a step validated again (by a resume
		 * of an older cdp-train) counts its last line once */
		if (last >= 0 && step != last)
			see_val(t, seed, last, lx);
		last = step;
		lx = x;
	}
	if (last >= 0)
		see_val(t, seed, last, lx);
	free(line);
	fclose(in);
}

/* Keeps the lines of an earlier run up to `upto`, but for a step line at
 * upto that this run would not write (the last step of an earlier run cut
 * short by --steps, whose interval the checkpoint's SUMS still hold), the
 * val line at upto that it would not write either (that run's validation
 * at its end, off the grid: tr_val_on_grid) and any line that is not
 * whole (whole_line). */
static int trim_jsonl(trainer *t, const char *path, long upto, char *err, size_t cap)
{
	char *line = NULL;               /* whole lines, however long (a val line */
	size_t lcap = 0;                 /* of thousands of classes passes 64 KiB) */
	FILE *in = fopen(path, "r"), *out = NULL;
	int extra = upto % t->o->log_every != 0 && upto != t->total;
	int vextra = !tr_val_on_grid(t, upto) && upto != t->total;
	cdp_out o;
	int fd = -1;
	ssize_t n;

	if (!in)
		return 0;
	if (cdp_out_open(&o, path, CDP_OUT_SEEK, 0666, err, cap) != CDP_OK) {
		fclose(in);
		return -1;
	}
	if ((fd = dup(o.fd)) < 0 || !(out = fdopen(fd, "w"))) {
		snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		cdp_out_abort(&o);
		fclose(in);
		return -1;
	}
	while ((n = getline(&line, &lcap, in)) > 0) {
		char type[16];
		double step;
		if (!whole_line(line, (size_t)n) ||
		    sscanf(line, "{\"type\":\"%15[a-z]\",\"step\":%lf", type, &step) != 2 ||
		    step > upto || (extra && step == upto && !strcmp(type, "step")) ||
		    (vextra && step == upto && !strcmp(type, "val")))
			continue;
		fputs(line, out);
	}
	free(line);
	fclose(in);
	if (fclose(out) != 0) {
		snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
		cdp_out_abort(&o);
		return -1;
	}
	return cdp_out_commit(&o, err, cap) == CDP_OK ? 0 : -1;
}

/* The files the run reads into set; 0 or -1 with err */
static int add_inputs(trainer *t, cdp_fileset *set, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	const char *in[5] = { "data.mdb", "lock.mdb", o->keys, o->val_keys, o->model };
	static const char *const role[5] = { "a file of the pool", "a file of the pool",
	                                     "the --keys file", "the --val-keys file",
	                                     "the --model cfg" };
	char path[4200], what[4400];
	int rc = 0;

	for (int i = 0; i < 5 && rc == 0; i++) {
		if (!in[i])
			continue;
		if (i < 2)
			snprintf(path, sizeof path, "%s/%s", o->db, in[i]);
		else
			snprintf(path, sizeof path, "%s", in[i]);
		snprintf(what, sizeof what, "%s '%s'", role[i], path);
		rc = cdp_fileset_add(set, path, what);
	}
	if (rc)
		snprintf(err, cap, "cannot examine the input files: %s", cdp_strerror(rc));
	return rc ? -1 : 0;
}

int tr_check_outputs(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	static const char *const runf[5] = { "train.log", "metrics.jsonl", "loss.png",
	                                     "checkpoint.cdpt", "best.cdpt" };
	static const char *const opt[7] = { NULL, NULL, NULL, NULL, NULL, "--log", "--trace" };
	char path[5][4200], what[4400];
	const char *outs[7];
	cdp_fileset in = { 0 }, all = { 0 };
	int rc = CDP_OK;

	for (int i = 0; i < 5; i++) {
		snprintf(path[i], sizeof path[i], "%s/%s", o->out, runf[i]);
		outs[i] = path[i];
	}
	outs[5] = o->log_path;
	outs[6] = o->trace;
	if (o->log_path)
		outs[0] = NULL;         /* no train.log then */
	if (add_inputs(t, &in, err, cap) < 0 || add_inputs(t, &all, err, cap) < 0)
		rc = CDP_ENOMEM;
	/* --log and --trace against the run's own files too, named so */
	for (int i = 0; i < 5 && rc == CDP_OK; i++) {
		snprintf(what, sizeof what, "the run's '%.4199s'", path[i]);
		if ((rc = cdp_fileset_add(&all, path[i], what)) != CDP_OK)
			snprintf(err, cap, "cannot examine '%s': %s", path[i], cdp_strerror(rc));
	}
	if (rc == CDP_OK)
		rc = cdp_out_check_set(&all, 2, outs + 5, opt + 5, err, cap);
	/* then every output against the inputs and each other */
	if (rc == CDP_OK)
		rc = cdp_out_check_set(&in, 7, outs, opt, err, cap);
	cdp_fileset_free(&in);
	cdp_fileset_free(&all);
	/* a directory, FIFO or device at the name of a file the run replaces
	 * (loss.png, checkpoint.cdpt, best.cdpt): refused now, not when the
	 * first one is due after hours of training */
	for (int i = 2; i < 5 && rc == CDP_OK; i++)
		if (i != 4 || o->keep_best)
			rc = cdp_out_check(path[i], CDP_OUT_SEEK | CDP_OUT_NEWDIR |
			                   (i > 2 ? CDP_OUT_CKPT : 0), err, cap);
	/* --log appends and --trace replaces: neither may land on a
	 * checkpoint, another run's included (its name is no guide); said
	 * before the policy's "refusing to replace", since --log appends.
	 * Both may be in the run directory, made later. */
	for (int i = 5; i < 7 && rc == CDP_OK; i++) {
		if (!outs[i] || !strcmp(outs[i], "-"))
			continue;
		if (cdp_out_is_ckpt(outs[i])) {
			snprintf(err, cap, "refusing to write '%s': it is a cdpool checkpoint", outs[i]);
			rc = CDP_EMISMATCH;
		} else {
			rc = cdp_out_check(outs[i], CDP_OUT_STREAM | CDP_OUT_NEWDIR, err, cap);
		}
	}
	return rc == CDP_OK ? 0 : -1;
}

/* The size of f's file where it is a regular one, else -1 */
static long long reg_size(FILE *f)
{
	struct stat st;

	return fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
}

/* The log's name for a message: NULL for standard output */
static const char *log_name(const trainer *t, char *buf, size_t cap)
{
	if (t->o->log_path && !strcmp(t->o->log_path, "-"))
		return NULL;
	if (t->o->log_path)
		return t->o->log_path;
	snprintf(buf, cap, "%s/train.log", t->o->out);
	return buf;
}

/* A log's failure (errno e): the first one on stderr, and the run told */
static void log_fail(trainer *t, const char *name, int e)
{
	if (!t->log_failed) {
		if (name)
			fprintf(stderr, "cdp-train: cannot write '%s': %s\n", name, strerror(e));
		else
			fprintf(stderr, "cdp-train: cannot write standard output: %s\n", strerror(e));
	}
	t->log_failed = 1;
}

/* After a line into *fp: 0, *good then its end, or -1 when a write of it
 * or its flush failed (a full disk, a pipe whose reader left): stdio's
 * unwritten rest is dropped and the file cut back to *good, so that no
 * part of the line stays (nor comes back with a later flush, spliced to
 * another line's tail, once the disk has room again); the file is closed
 * and *fp NULL */
static int line_end(trainer *t, FILE **fp, long long *good, const char *name)
{
	FILE *f = *fp;
	int e;

	if (fflush(f) == 0 && !ferror(f)) {
		if (*good >= 0) {
			off_t at = lseek(fileno(f), 0, SEEK_CUR);
			*good = at >= 0 ? (long long)at : -1;
		}
		return 0;
	}
	e = errno ? errno : EIO;
	__fpurge(f);
	if (*good >= 0 && ftruncate(fileno(f), (off_t)*good) != 0)
		*good = -1;    /* a resume drops the line it left (whole_line) */
	fclose(f);
	*fp = NULL;
	log_fail(t, name, e);
	return -1;
}

void tr_jsonl_end(trainer *t)
{
	char path[4200];

	if (!t->jsonl)
		return;
	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	line_end(t, &t->jsonl, &t->jsonl_good, path);
}

int tr_log_open(trainer *t, char *err, size_t cap)
{
	char path[4200];

	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	if (t->have_ck && trim_jsonl(t, path, (long)t->ck.step, err, cap) < 0)
		return -1;
	if (!(t->jsonl = fopen(path, t->have_ck ? "a" : "w"))) {
		snprintf(err, cap, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	t->jsonl_good = reg_size(t->jsonl);
	if (t->have_ck) {
		fprintf(t->jsonl, "{\"type\":\"resume\",\"step\":%" PRIu64 ",\"epoch\":%" PRIu64 "}\n",
		        t->ck.step, t->ck.epoch);
		tr_jsonl_end(t);
	}
	if (t->o->log_path)
		snprintf(path, sizeof path, "%s", t->o->log_path);
	else
		snprintf(path, sizeof path, "%s/train.log", t->o->out);
	/* a log is appended to, never replaced; "-" is standard output, and a
	 * FIFO or a device is written in place as any append does */
	if (!strcmp(path, "-")) {
		if (!(t->log = cdp_out_fdopen(STDOUT_FILENO, "a"))) {
			snprintf(err, cap, "cannot write '-': %s", strerror(errno));
			return -1;
		}
	} else {
		t->log = fopen(path, "a");
	}
	if (!t->log) {
		snprintf(err, cap, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	t->log_good = reg_size(t->log);
	snprintf(t->png_path, sizeof t->png_path, "%s/loss.png", t->o->out);
	return 0;
}

/* *fp's last line checked, then its close (an error may first show there) */
static void close_one(trainer *t, FILE **fp, long long *good, const char *name)
{
	if (*fp && line_end(t, fp, good, name) == 0) {
		if (fclose(*fp) != 0)
			log_fail(t, name, errno);
		*fp = NULL;
	}
}

int tr_log_close(trainer *t)
{
	char path[4200], lbuf[4200];

	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	close_one(t, &t->jsonl, &t->jsonl_good, path);
	close_one(t, &t->log, &t->log_good, log_name(t, lbuf, sizeof lbuf));
	return t->log_failed ? -1 : 0;
}

void tr_logf(trainer *t, const char *fmt, ...)
{
	va_list ap;
	char ts[32], lbuf[4200];
	time_t now = time(NULL);
	struct tm tm;

	if (!t->log)
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(t->log, "%s ", ts);
	va_start(ap, fmt);
	vfprintf(t->log, fmt, ap);
	va_end(ap);
	fputc('\n', t->log);
	line_end(t, &t->log, &t->log_good, log_name(t, lbuf, sizeof lbuf));
}

/* A JSON number, or null when not finite. */
static void jnum(FILE *f, const char *key, double v)
{
	if (isfinite(v))
		fprintf(f, ",\"%s\":%.17g", key, v);
	else
		fprintf(f, ",\"%s\":null", key);
}

void tr_log_step(trainer *t, double lr, int reset)
{
	int j = t->size;
	double *v = calloc((size_t)5 * j, sizeof *v);
	cdp_dist_stats ds;
	double dt = cdp_now() - t->iv_t0, wait = 0, comm = 0, grad = 0, exposed = 0, loss;
	int last = 0;

	if (!v)
		TR_FAIL("out of memory");
	cdp_dist_stats_get(&ds);
	v[t->rank] = (double)tr_rss_anon_kb();
	v[j + t->rank] = t->iv_wait;
	v[2 * j + t->rank] = ds.wait_s + ds.progress_s;
	v[3 * j + t->rank] = ds.grad_s;
	v[4 * j + t->rank] = ds.grad_exposed_s;
	/* a sum of one-hot vectors: every rank's values with any backend */
	cdp_dist_sum_f64(v, (size_t)5 * j);
	for (int r = 0; r < j; r++) {
		if (v[4 * j + r] < v[4 * j + last])
			last = r;
		wait = fmax(wait, v[j + r]);
		comm = fmax(comm, v[2 * j + r]);
		grad = fmax(grad, v[3 * j + r]);
		exposed = fmax(exposed, v[4 * j + r]);
	}
	loss = t->iv_loss / t->iv_nloss;
	if (t->jsonl) {
		FILE *f = t->jsonl;
		fprintf(f, "{\"type\":\"step\",\"step\":%ld,\"epoch\":%" PRIu64, t->step,
		        t->estep == 0 ? t->epoch - 1 : t->epoch);
		jnum(f, "loss", loss);
		jnum(f, "lr", lr);
		jnum(f, "samples_per_s",
		     dt > 0 ? t->iv_steps * (double)t->accumulate * t->o->batch * j / dt : NAN);
		jnum(f, "data_wait_s", wait);
		jnum(f, "allreduce_s", comm);
		jnum(f, "grad_allreduce_s", grad);
		jnum(f, "grad_exposed_s", exposed);
		jnum(f, "grad_allreduce_last_s", v[3 * j + last]);
		jnum(f, "grad_exposed_last_s", v[4 * j + last]);
		jnum(f, "loss_scale", t->scale > 0 ? t->scale : NAN);
		fprintf(f, ",\"skipped_steps\":%" PRIu64, t->scale_skipped);
		fprintf(f, ",\"rss_anon_kb\":[");
		for (int r = 0; r < j; r++)
			fprintf(f, "%s%.0f", r ? "," : "", v[r]);
		fprintf(f, "],\"skipped\":%" PRIu64 "}\n", t->skipped);
		tr_jsonl_end(t);
		tr_logf(t, "step %ld loss %.6f lr %.6g %.1f samples/s wait %.3f s all-reduce %.3f s",
		        t->step, loss, lr,
		        dt > 0 ? t->iv_steps * (double)t->accumulate * t->o->batch * j / dt : 0,
		        wait, comm);
	}
	free(v);
	/* a line off the --log-every grid (a run's last step) keeps the
	 * interval's loss for the checkpoint, so that a longer run resumed
	 * from it writes the line the uninterrupted run does */
	if (reset) {
		t->iv_loss = 0;
		t->iv_nloss = 0;
	}
	t->iv_steps = 0;
	t->iv_wait = 0;
	/* --trace: the spans so far to rank 0, at this collective point */
	tr_trace_flush(t);
	t->iv_t0 = cdp_now();
	cdp_dist_stats_reset();
}

/* The headline metric: road IoU for two classes, mean IoU otherwise, or
 * accuracy for classifiers. */
static double headline(const trainer *t, const tr_val *v)
{
	const uint64_t *c = v->conf.counts;
	int k = v->conf.k;
	if (t->multi)
		return v->ml.micro_f1;
	if (t->reg)
		return v->rm.r2;
	if (t->hw == 1)
		return cdp_metrics_accuracy(c, k);
	return k == 2 ? cdp_metrics_iou(c, k, 1) : cdp_metrics_miou(c, k, NULL);
}

/* a JSON array of m's per-class values of what (0 precision, 1 recall,
 * 2 F1, 3 AP), null where undefined */
static void jclasses(FILE *f, const char *name, const cdp_mlabel *m, int what)
{
	fprintf(f, ",\"%s\":[", name);
	for (int c = 0; c < m->k; c++) {
		cdp_prf p;
		double x;
		cdp_mlabel_prf(m, c, &p);
		x = what == 0 ? p.precision : what == 1 ? p.recall : what == 2 ? p.f1 : m->ap[c];
		isfinite(x) ? fprintf(f, "%s%.17g", c ? "," : "", x) : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "]");
}

/* a JSON array of each target's score (offsetof one of cdp_regm's
 * doubles), null where undefined */
static void jtargets(FILE *f, const char *name, const tr_val *v, size_t off)
{
	fprintf(f, ",\"%s\":[", name);
	for (int c = 0; c < v->nt; c++) {
		double x = *(const double *)((const char *)&v->rt[c] + off);
		isfinite(x) ? fprintf(f, "%s%.17g", c ? "," : "", x) : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "]");
}

/* x with 4 decimals or "nan", as cdp_metrics_format prints undefined values */
static int num(char *buf, size_t cap, double x)
{
	return isfinite(x) ? snprintf(buf, cap, "%.4f", x) : snprintf(buf, cap, "nan");
}

int tr_val_format(const trainer *t, const tr_val *v, char *buf, size_t cap)
{
	const cdp_mlabel *m = &v->ml;
	size_t n = 0;

	if (!t->reg && !t->multi)
		return cdp_metrics_format(v->conf.counts, v->conf.k, buf, cap);
	buf[0] = '\0';
#define ADD(...) do { int w_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__); \
                      n += w_ > 0 ? (size_t)w_ : 0; if (n >= cap) n = cap; } while (0)
#define NUM(x) do { int w_ = num(buf + n, n < cap ? cap - n : 0, (x)); \
                     n += w_ > 0 ? (size_t)w_ : 0; if (n >= cap) n = cap; } while (0)
	if (t->reg) {
		int w = cdp_regm_format(&v->rm, buf, cap);
		n = w > 0 ? ((size_t)w < cap ? (size_t)w : cap) : 0;
		/* T > 1: each target's RMSE and R^2 as well (metrics.jsonl has
		 * all its scores), as a multi-label line lists each class's F1 */
		for (int what = 0; what < 2 && v->nt > 1; what++) {
			ADD(what ? " target_r2=" : " target_rmse=");
			for (int c = 0; c < v->nt; c++) {
				if (c)
					ADD(",");
				NUM(what ? v->rt[c].r2 : v->rt[c].rmse);
			}
		}
		return (int)n;
	}
	ADD("micro_f1=");
	NUM(m->micro_f1);
	ADD(" macro_f1=");
	NUM(m->macro_f1);
	ADD(" map=");
	NUM(m->map);
	ADD(" f1=");
	for (int c = 0; c < m->k; c++) {
		cdp_prf p;
		cdp_mlabel_prf(m, c, &p);
		if (c)
			ADD(",");
		NUM(p.f1);
	}
#undef ADD
#undef NUM
	return (int)n;
}

void tr_log_val(trainer *t, const tr_val *v)
{
	FILE *f = t->jsonl;
	int k = v->conf.k;
	/* room for a regression line's per-target scores */
	size_t cap = 2048 + (t->reg ? (size_t)v->nt * 32 : 0);
	char *line;

	if (!f || !v->done)
		return;
	if (!(line = malloc(cap)))
		TR_FAIL("out of memory");
	/* the fields every task's line starts with, then the task's own */
	fprintf(f, "{\"type\":\"val\",\"step\":%ld,\"epoch\":%" PRIu64, t->step,
	        t->estep == 0 ? t->epoch - 1 : t->epoch);
	jnum(f, "loss", v->loss);
	jnum(f, "metric", headline(t, v));
	if (t->reg) {
		jnum(f, "rmse", v->rm.rmse);
		jnum(f, "mae", v->rm.mae);
		jnum(f, "bias", v->rm.bias);
		jnum(f, "r2", v->rm.r2);
		jnum(f, "count", v->rm.count);
		jtargets(f, "target_rmse", v, offsetof(cdp_regm, rmse));
		jtargets(f, "target_mae", v, offsetof(cdp_regm, mae));
		jtargets(f, "target_bias", v, offsetof(cdp_regm, bias));
		jtargets(f, "target_r2", v, offsetof(cdp_regm, r2));
		jtargets(f, "target_count", v, offsetof(cdp_regm, count));
		fprintf(f, "}\n");
		tr_jsonl_end(t);
		tr_val_format(t, v, line, cap);
		tr_logf(t, "validation at step %ld: loss %.6f %s count %.0f", t->step, v->loss, line,
		        v->rm.count);
		free(line);
		return;
	}
	if (t->multi) {
		jnum(f, "micro_precision", v->ml.micro_p);
		jnum(f, "micro_recall", v->ml.micro_r);
		jnum(f, "micro_f1", v->ml.micro_f1);
		jnum(f, "macro_f1", v->ml.macro_f1);
		jnum(f, "map", v->ml.map);
		jclasses(f, "precision", &v->ml, 0);
		jclasses(f, "recall", &v->ml, 1);
		jclasses(f, "f1", &v->ml, 2);
		jclasses(f, "ap", &v->ml, 3);
		fprintf(f, "}\n");
		tr_jsonl_end(t);
		tr_val_format(t, v, line, cap);
		tr_logf(t, "validation at step %ld: loss %.6f %s", t->step, v->loss, line);
		free(line);
		return;
	}
	jnum(f, "accuracy", cdp_metrics_accuracy(v->conf.counts, k));
	jnum(f, "miou", cdp_metrics_miou(v->conf.counts, k, NULL));
	fprintf(f, ",\"iou\":[");
	for (int c = 0; c < k; c++) {
		double x = cdp_metrics_iou(v->conf.counts, k, c);
		isfinite(x) ? fprintf(f, "%s%.17g", c ? "," : "", x) : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "],\"f1\":[");
	for (int c = 0; c < k; c++) {
		cdp_prf p;
		cdp_metrics_prf(v->conf.counts, k, c, &p);
		isfinite(p.f1) ? fprintf(f, "%s%.17g", c ? "," : "", p.f1)
		               : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "]}\n");
	tr_jsonl_end(t);
	cdp_metrics_format(v->conf.counts, k, line, cap);
	tr_logf(t, "validation at step %ld: loss %.6f %s", t->step, v->loss, line);
	free(line);
}

void tr_log_epoch(trainer *t, const tr_val *v)
{
	FILE *f = t->jsonl;

	if (!f)
		return;
	fprintf(f, "{\"type\":\"epoch\",\"step\":%ld,\"epoch\":%" PRIu64, t->step, t->epoch - 1);
	jnum(f, "loss", t->ep_steps ? t->ep_loss / t->ep_steps : NAN);
	jnum(f, "seconds", cdp_now() - t->t_start);
	if (v && v->done && t->reg) {
		jnum(f, "val_loss", v->loss);
		jnum(f, "val_rmse", v->rm.rmse);
		jnum(f, "val_r2", v->rm.r2);
	} else if (v && v->done && t->multi) {
		jnum(f, "val_loss", v->loss);
		jnum(f, "val_micro_f1", v->ml.micro_f1);
		jnum(f, "val_map", v->ml.map);
	} else if (v && v->done) {
		jnum(f, "val_loss", v->loss);
		jnum(f, "val_accuracy", cdp_metrics_accuracy(v->conf.counts, v->conf.k));
		jnum(f, "val_miou", cdp_metrics_miou(v->conf.counts, v->conf.k, NULL));
	}
	fprintf(f, "}\n");
	tr_jsonl_end(t);
	tr_logf(t, "epoch %" PRIu64 " done at step %ld: mean loss %.6f", t->epoch - 1, t->step,
	        t->ep_steps ? t->ep_loss / t->ep_steps : NAN);
}

/* A growing series of points of the plot. */
typedef struct series {
	double *x, *y;
	size_t n, cap;
} series;

static int add(series *s, double x, double y)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 256;
		double *nx = realloc(s->x, nc * sizeof *nx), *ny;
		if (!nx)
			return -1;
		s->x = nx;
		if (!(ny = realloc(s->y, nc * sizeof *ny)))
			return -1;
		s->y = ny;
		s->cap = nc;
	}
	s->x[s->n] = x;
	s->y[s->n++] = y;
	return 0;
}

/* The number after "key": in line, NaN for null or none. */
static double field(const char *line, const char *key)
{
	const char *m = strstr(line, key);
	double v;
	return m && sscanf(m + strlen(key), "%lf", &v) == 1 ? v : NAN;
}

/* loss.png not written, for why: in the log every time, on stderr once */
static void plot_failed(trainer *t, const char *why)
{
	tr_logf(t, "cannot write '%s': %s", t->png_path, why);
	if (!t->png_warned)
		fprintf(stderr, "cdp-train: warning: cannot write '%s': %s\n", t->png_path, why);
	t->png_warned = 1;
}

/* loss.png from metrics.jsonl as it stands, so the plot shows what the
 * file holds, the steps of earlier runs of a resumed one included. A
 * failure is logged, not fatal: the plot is a view of the metrics; the
 * first one of the run is a warning on stderr too. */
void tr_plot(trainer *t)
{
	enum { LOSS, LR, VLOSS, METRIC, RESUME, NS };
	series s[NS] = { { 0 } };
	char path[4200], title[4400], why[4300], *line = NULL;
	size_t lcap = 0;
	ssize_t got;
	const char *slash, *name = t->reg ? "validation R2" :
	                           t->multi ? "validation micro F1" :
	                           t->hw == 1 ? "validation accuracy" :
	                           t->loss.classes <= 2 ? "validation IoU of class 1" :
	                           "validation mean IoU";
	FILE *f;
	int rc = 0;

	if (t->rank != 0 || !t->jsonl)
		return;
	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	if (!(f = fopen(path, "r"))) {
		snprintf(why, sizeof why, "cannot read '%s': %s", path, strerror(errno));
		plot_failed(t, why);
		return;
	}
	while (rc == 0 && (got = getline(&line, &lcap, f)) > 0) {
		double step = field(line, "\"step\":");
		if (!whole_line(line, (size_t)got))
			continue;
		if (!strncmp(line, "{\"type\":\"step\",", 15))
			rc = add(&s[LOSS], step, field(line, "\"loss\":")) ||
			     add(&s[LR], step, field(line, "\"lr\":"));
		else if (!strncmp(line, "{\"type\":\"val\",", 14))
			rc = add(&s[VLOSS], step, field(line, "\"loss\":")) ||
			     add(&s[METRIC], step, field(line, "\"metric\":"));
		else if (!strncmp(line, "{\"type\":\"resume\",", 17))
			rc = add(&s[RESUME], step, 0);
	}
	free(line);
	fclose(f);
	/* the run's name: its directory's last component */
	snprintf(path, sizeof path, "%s", t->o->out);
	for (size_t n = strlen(path); n > 1 && path[n - 1] == '/';)
		path[--n] = '\0';
	slash = strrchr(path, '/');
	snprintf(title, sizeof title, "cdp-train: %s, step %ld of %ld", slash && slash[1] ? slash + 1 : path,
	         t->step, t->total);
	cdp_plot_run r = {
		.title = title, .metric_name = name, .xmax = (double)t->total,
		.loss = { s[LOSS].x, s[LOSS].y, s[LOSS].n }, .lr = { s[LR].x, s[LR].y, s[LR].n },
		.val_loss = { s[VLOSS].x, s[VLOSS].y, s[VLOSS].n },
		.metric = { s[METRIC].x, s[METRIC].y, s[METRIC].n },
		.resume = s[RESUME].x, .n_resume = s[RESUME].n,
	};
	if (rc)
		plot_failed(t, "out of memory");
	else if ((rc = cdp_plot_run_png(t->png_path, &r)) != 0)
		plot_failed(t, cdp_strerror(rc));
	for (int i = 0; i < NS; i++) {
		free(s[i].x);
		free(s[i].y);
	}
}

void tr_log_keys(trainer *t, const cdp_batch *b)
{
	for (int i = 0; i < b->n; i++)
		fprintf(t->keylog, "%" PRIu64 " %" PRIu64 " %s\n", b->epoch, b->step,
		        cdp_loader_key(t->tl, b->index[i]));
}
