/* train_trace.h: cdp-train --trace FILE, a timeline of every rank in the
 * Chrome trace event format (train_trace.c; man/cdp-train.1, TRACE).
 * Private to tools/train/train*.c.
 *
 * Each rank records spans (start, end, step) into memory; at every
 * metrics.jsonl step line (a collective point anyway) rank 0 gathers them
 * and appends them to FILE's temporary twin, which tr_trace_close renames
 * onto FILE. Clocks: every rank takes CLOCK_MONOTONIC right after a
 * barrier as its zero (tr_trace_begin), so the ranks' timelines agree to
 * within the barrier's exit skew. With --trace off, t->trace is NULL and
 * every call site is one test of it.
 */
#ifndef CDP_TRAIN_TRACE_H
#define CDP_TRAIN_TRACE_H

#include <stddef.h>

struct trainer;
typedef struct tr_trace tr_trace;

/* What a span is. TR_BWD_LAYER's arg is the layer, TR_BUCKET's the bucket;
 * buckets go on all-reduce tracks of their own (tid >= 1), the rest on the
 * training thread's (tid 0). */
enum {
	TR_STEP, TR_DATA, TR_FORWARD, TR_LOSS_SUM, TR_BACKWARD, TR_BWD_LAYER, TR_GRAD_WAIT,
	TR_BUCKET, TR_OPTIM, TR_SYNC, TR_VALIDATE, TR_CHECKPOINT, TR_NKIND
};

/* Before the run's first collective after setup: rank 0 opens FILE's
 * temporary twin (so an unwritable FILE fails before training). 0, or -1
 * with err set. Not collective: the caller agrees on the outcome. */
int  tr_trace_open(struct trainer *t, char *err, size_t cap);
/* Collective, just before step 1: the common clock zero and host names. */
void tr_trace_begin(struct trainer *t);
/* A span [t0, t1] (cdp_now seconds) of step `step`. */
void tr_trace_span(tr_trace *tr, int kind, double t0, double t1, long step, int arg);
/* After cdp_dist_wait_all: every bucket's reduction of this step. */
void tr_trace_buckets(struct trainer *t, long step);
/* Collective: rank 0 gathers the spans recorded so far and appends them. */
void tr_trace_flush(struct trainer *t);
/* Collective: the last flush, then rank 0 closes and renames the file.
 * 0, or -1 after rank 0 printed why. Frees the trace on every rank. */
int  tr_trace_close(struct trainer *t);
/* Frees what is left after a failure (removes the temporary file). */
void tr_trace_free(struct trainer *t);

#endif
