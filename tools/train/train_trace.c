/* train_trace.c: cdp-train --trace FILE (train_trace.h), the Chrome trace
 * event format that Perfetto (ui.perfetto.dev) and chrome://tracing open:
 *
 *   {"traceEvents":[
 *    {"name":"process_name","ph":"M","pid":R,"args":{"name":"rank R (HOST)"}},
 *    {"name":"thread_name","ph":"M","pid":R,"tid":T,"args":{"name":"training"}},
 *    {"name":"forward","cat":"step","ph":"X","pid":R,"tid":0,"ts":US,"dur":US,
 *     "args":{"step":S}}, ...],
 *    "displayTimeUnit":"ms","otherData":{...}}
 *
 * One process (pid) per rank. tid 0 is the training thread: "step" spans
 * hold data, forward, loss all-reduce, backward (with one span per layer
 * inside it, "bwd NAME"), grad all-reduce wait, optimizer, sync (average,
 * admm), validation and checkpoint; when the optimizer runs bucket by
 * bucket (tr_sync_parts) a wait and an optimizer span per bucket, with
 * "bucket":B in their args. Each gradient bucket's reduction,
 * from its start to the moment its completion was seen, is a span on an
 * all-reduce track (tid 1, 2, ...): a bucket goes on the first track that
 * is free at its start, so spans on one track never overlap, as the
 * format wants. ts and dur are microseconds since the rank's clock zero,
 * taken right after a barrier (tr_trace_begin), so the ranks line up to
 * within the barrier's exit skew (tens of microseconds on one host, about
 * a network latency across hosts). On a GPU the spans are the host's: the
 * time it queued the work, not when the device ran it.
 *
 * Memory: each rank keeps only the spans since the last metrics.jsonl step
 * line (about 40 bytes each, a few dozen a step); tr_trace_flush gathers
 * them to rank 0 (cdp_dist_gather_bytes, every rank sending the longest
 * rank's count) and rank 0 appends them to the output policy's temporary
 * (cdp_out.h), renamed onto FILE when the run ends, so FILE is always a
 * whole trace or absent; "-", a FIFO or a device are written in place.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_out.h"
#include "cdp_progress.h"
#include "dist/dist.h"
#include "train_int.h"
#include "train_trace.h"

#define HOST_LEN 64
#define MAX_LANES 64            /* all-reduce tracks per rank */

typedef struct tr_ev {
	double t0, t1;              /* seconds since the clock zero */
	int64_t step;
	int32_t kind, arg, tid, pad;
} tr_ev;

struct tr_trace {
	double zero;                /* cdp_now() at the clock zero */
	tr_ev *ev;
	size_t n, cap;
	int failed;                 /* out of memory: spans are dropped */
	double lane_end[MAX_LANES]; /* this rank's all-reduce tracks */
	int lanes;
	/* rank 0 */
	FILE *f;
	cdp_out out;
	int nev_written, *lanes_named;
	char *hosts;                /* size * HOST_LEN */
};

static const char *const kind_name[TR_NKIND] = {
	"step", "data", "forward", "loss all-reduce", "backward", "bwd", "grad all-reduce wait",
	"bucket", "optimizer", "sync", "validation", "checkpoint"
};

/* A JSON string's characters (names come from the cfg and hostnames). */
static void jstr(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
}

/* Whether file's directory is dir (as spelt: "run/t.json" and "run/"). */
static int in_dir(const char *file, const char *dir)
{
	const char *slash = strrchr(file, '/');
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return slash && (size_t)(slash - file) == n && strncmp(file, dir, n) == 0;
}

int tr_trace_open(trainer *t, char *err, size_t cap)
{
	tr_trace *tr = calloc(1, sizeof *tr);
	char msg[4400];
	int rc, made;

	if (!tr) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	tr->out.fd = -1;
	tr->out.slot = -1;
	t->trace = tr;
	if (t->rank != 0)
		return 0;
	if (!(tr->lanes_named = calloc((size_t)t->size, sizeof *tr->lanes_named)) ||
	    !(tr->hosts = calloc((size_t)t->size, HOST_LEN))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	/* before anything is created: the trace replaces FILE at the end */
	if (tr_check_outputs(t, err, cap) < 0)
		return -1;
	rc = cdp_out_open(&tr->out, t->o->trace, CDP_OUT_STREAM, 0666, msg, sizeof msg);
	/* --trace RUNDIR/trace.json in a run directory still to be made */
	if (rc == ENOENT && in_dir(t->o->trace, t->o->out) && cdp_file_mkdir(t->o->out, &made) == 0) {
		/* made by another process meanwhile: it is there all the same */
		if (made)
			t->made_out = 1;
		rc = cdp_out_open(&tr->out, t->o->trace, CDP_OUT_STREAM, 0666, msg, sizeof msg);
	}
	if (rc != CDP_OK) {
		snprintf(err, cap, "cannot write trace '%s': %s", t->o->trace, cdp_strerror(rc));
		return -1;
	}
	if (!(tr->f = cdp_out_fdopen(tr->out.fd, "w"))) {
		snprintf(err, cap, "cannot write trace '%s': %s", t->o->trace, strerror(errno));
		return -1;
	}
	fputs("{\"traceEvents\":[\n", tr->f);
	return 0;
}

void tr_trace_begin(trainer *t)
{
	tr_trace *tr = t->trace;
	char host[HOST_LEN] = "";

	gethostname(host, sizeof host - 1);
	cdp_dist_gather_bytes(host, sizeof host, t->rank == 0 ? tr->hosts : NULL);
	/* twice: the first one also waits for the slowest rank's setup */
	cdp_dist_barrier();
	cdp_dist_barrier();
	tr->zero = cdp_now();
}

void tr_trace_span(tr_trace *tr, int kind, double t0, double t1, long step, int arg)
{
	tr_ev *e;

	if (tr->n == tr->cap) {
		size_t cap = tr->cap ? 2 * tr->cap : 1024;
		tr_ev *ev = realloc(tr->ev, cap * sizeof *ev);
		if (!ev) {
			tr->failed = 1;
			return;
		}
		tr->ev = ev;
		tr->cap = cap;
	}
	e = &tr->ev[tr->n++];
	e->t0 = t0 - tr->zero;
	e->t1 = t1 - tr->zero;
	e->step = step;
	e->kind = kind;
	e->arg = arg;
	e->tid = 0;
	e->pad = 0;
	if (kind == TR_BUCKET) {
		/* the first all-reduce track free at t0 */
		int l = 0;
		while (l < tr->lanes && tr->lane_end[l] > e->t0)
			l++;
		if (l == MAX_LANES)
			l = MAX_LANES - 1;
		if (l == tr->lanes && tr->lanes < MAX_LANES)
			tr->lanes++;
		tr->lane_end[l] = e->t1;
		e->tid = 1 + l;
	}
}

void tr_trace_buckets(trainer *t, long step)
{
	for (int b = 0;; b++) {
		double t0, t1;
		if (cdp_dist_bucket_times(b, &t0, &t1) != 0)
			break;
		if (t0 > 0 && t1 >= t0)
			tr_trace_span(t->trace, TR_BUCKET, t0, t1, step, b);
	}
}

/* One span as JSON, on rank 0, from rank r. */
static void write_ev(trainer *t, int r, const tr_ev *e)
{
	tr_trace *tr = t->trace;
	FILE *f = tr->f;
	size_t off, n;
	int l0, l1;

	if (e->tid > tr->lanes_named[r]) {
		for (int l = tr->lanes_named[r] + 1; l <= e->tid; l++)
			fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
			        "\"args\":{\"name\":\"all-reduce %d\"}}", tr->nev_written++ ? ",\n" : "",
			        r, l, l);
		tr->lanes_named[r] = e->tid;
	}
	fprintf(f, "%s{\"name\":\"", tr->nev_written++ ? ",\n" : "");
	if (e->kind == TR_BWD_LAYER && e->arg >= 0 && e->arg < t->net.nlayers) {
		fputs("bwd ", f);
		jstr(f, t->net.layers[e->arg].name);
	} else if (e->kind == TR_BUCKET) {
		fprintf(f, "bucket %d", e->arg);
	} else {
		fputs(kind_name[e->kind], f);
	}
	fprintf(f, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
	        "\"args\":{\"step\":%lld", e->kind == TR_BUCKET ? "comm" : "train", r, (int)e->tid,
	        e->t0 * 1e6, (e->t1 - e->t0) * 1e6, (long long)e->step);
	if (e->kind == TR_BWD_LAYER)
		fprintf(f, ",\"layer\":%d", (int)e->arg);
	if ((e->kind == TR_GRAD_WAIT || e->kind == TR_OPTIM) && e->arg > 0)
		fprintf(f, ",\"bucket\":%d", (int)e->arg - 1);   /* tr_sync_parts */
	if (e->kind == TR_BUCKET &&
	    cdp_dist_bucket_info(e->arg, &off, &n, &l0, &l1) == 0)
		fprintf(f, ",\"bucket\":%d,\"bytes\":%zu,\"layers\":[%d,%d]", (int)e->arg,
		        n * sizeof(float), l0, l1 - 1);
	fputs("}}", f);
}

void tr_trace_flush(trainer *t)
{
	tr_trace *tr = t->trace;
	double most;
	size_t n;
	uint64_t mine, *counts = NULL;
	tr_ev *all = NULL;
	int j = t->size, bad = 0;

	if (!tr)
		return;
	most = (double)tr->n;
	cdp_dist_max_f64(&most);
	n = (size_t)most;
	/* every rank sends n spans (its own, then padding) */
	if (n > tr->cap) {
		tr_ev *ev = realloc(tr->ev, n * sizeof *ev);
		bad = !ev;
		if (ev) {
			tr->ev = ev;
			tr->cap = n;
		}
	}
	if (t->rank == 0 && !bad)
		bad = !(counts = malloc((size_t)j * sizeof *counts)) ||
		      !(all = malloc((size_t)j * (n ? n : 1) * sizeof *all));
	/* a rank without the memory tells the others, and the spans go */
	if (cdp_dist_any(bad)) {
		tr->failed = 1;
		tr->n = 0;
		free(counts);
		free(all);
		return;
	}
	if (tr->n < n)
		memset(tr->ev + tr->n, 0, (n - tr->n) * sizeof *tr->ev);
	mine = tr->n;
	cdp_dist_gather_bytes(&mine, sizeof mine, counts);
	cdp_dist_gather_bytes(tr->ev, n * sizeof *tr->ev, all);
	tr->n = 0;
	if (t->rank != 0)
		return;
	for (int r = 0; r < j; r++)
		for (uint64_t i = 0; i < counts[r] && i < n; i++)
			write_ev(t, r, &all[(size_t)r * n + i]);
	free(counts);
	free(all);
}

int tr_trace_close(trainer *t)
{
	tr_trace *tr = t->trace;
	FILE *f;
	char msg[4400];
	int failed, rc = 0;

	if (!tr)
		return 0;
	tr_trace_flush(t);
	failed = cdp_dist_any(tr->failed);
	if (t->rank == 0) {
		f = tr->f;
		for (int r = 0; r < t->size; r++) {
			fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
			        "\"args\":{\"name\":\"rank %d (", tr->nev_written++ ? ",\n" : "", r, r);
			jstr(f, tr->hosts + (size_t)r * HOST_LEN);
			fprintf(f, ")\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
			        "\"args\":{\"sort_index\":%d}},\n{\"name\":\"thread_name\",\"ph\":\"M\","
			        "\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"training\"}}", r, r, r);
		}
		fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":\"cdp-train\","
		        "\"ranks\":%d,\"clock\":\"CLOCK_MONOTONIC, zero after a barrier on every "
		        "rank\",\"complete\":%s}}\n", t->size, failed ? "false" : "true");
		tr->f = NULL;
		if (ferror(f) | fclose(f)) {
			fprintf(stderr, "cdp-train: cannot write trace '%s': %s\n", t->o->trace,
			        strerror(errno));
			rc = -1;
		} else if ((rc = cdp_out_commit(&tr->out, msg, sizeof msg)) != CDP_OK) {
			fprintf(stderr, "cdp-train: %s\n", msg);
			rc = -1;
		}
		if (failed)
			fprintf(stderr, "cdp-train: warning: trace '%s' lacks spans: out of memory\n",
			        t->o->trace);
	}
	tr_trace_free(t);
	return rc;
}

void tr_trace_free(trainer *t)
{
	tr_trace *tr = t->trace;

	if (!tr)
		return;
	if (tr->f)
		fclose(tr->f);
	cdp_out_abort(&tr->out);
	free(tr->ev);
	free(tr->lanes_named);
	free(tr->hosts);
	free(tr);
	t->trace = NULL;
}
