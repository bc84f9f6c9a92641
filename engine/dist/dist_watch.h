/* dist_watch.h: the watchdog of operations that complete asynchronously on
 * a device (dist_nccl.c's NCCL collectives on a CUDA stream), as plain C
 * with callbacks, so that `make check` tests its logic without a GPU.
 *
 * The caller queues an operation, then pushes it with a name: the watchdog
 * ties FIFO slot s to it (ops.arm, e.g. cudaEventRecord(ev[s], stream)). A
 * thread wakes every min(1 s, timeout / 4), asks ops.query about the oldest
 * slots (cudaEventQuery), retires the complete ones, and fires when
 *  - the oldest left was pushed more than `timeout` seconds ago, not
 *    counting the time this process did not run (cdp_watch_stalled):
 *    "WHAT did not finish within S s: a peer rank died or hangs (timeout
 *    set by CDP_DIST_TIMEOUT)" (the time counts from the push, queueing
 *    behind earlier work included);
 *  - ops.query reports a failed one: "WHAT failed: TEXT";
 *  - ops.health reports an error (ncclCommGetAsyncError): its text.
 * Firing ends the process with that message as one line:
 *  1. cdp_watch_claim(): when another thread has already started to end the
 *     process, the watchdog thread parks instead (no second message);
 *  2. alarm(grace), whose handler writes "PREFIX message" and _exit(1)s
 *     should step 3 or 4 hang (ncclCommAbort can, when a peer is gone);
 *  3. ops.abort (ncclCommAbort, so the device's kernels return);
 *  4. ops.die(message), which prints it (cdp_dist_abort: "prog: rank R:
 *     message", MPI_Abort under mpirun) and does not return.
 * A failure path of the caller's own thread calls cdp_watch_claim() first
 * too, and cdp_watch_park() when it lost, so that one thread alone ends the
 * process with one message.
 */
#ifndef CDP_DIST_WATCH_H
#define CDP_DIST_WATCH_H

#include <stddef.h>

enum { CDP_WATCH_SLOTS = 256 };         /* operations in flight at once */

typedef struct cdp_watch_ops {
	void *ctx;
	/* On the watchdog thread, first (cudaSetDevice); NULL: nothing. 0, or
	 * -1 with a message in msg[cap] (the watchdog fires with it). */
	int  (*enter)(void *ctx, char *msg, size_t cap);
	/* In cdp_watch_push, on the caller's thread: slot now stands for the
	 * operation just queued. */
	void (*arm)(void *ctx, int slot);
	/* On the watchdog thread: 1 complete, 0 in flight, -1 failed (msg). */
	int  (*query)(void *ctx, int slot, char *msg, size_t cap);
	/* On the caller's thread when the FIFO is full: blocks until slot's
	 * operation is complete. */
	void (*wait)(void *ctx, int slot);
	/* On the watchdog thread at every wake-up: 0, or -1 with msg. NULL:
	 * nothing to check. */
	int  (*health)(void *ctx, char *msg, size_t cap);
	/* On the watchdog thread when it fires, before die; NULL: nothing. */
	void (*abort)(void *ctx);
	/* Reports msg (one line) and ends the process. */
	void (*die)(void *ctx, const char *msg) __attribute__((noreturn));
	/* What the alarm handler writes before msg ("cdp-train: rank 3: "). */
	const char *prefix;
} cdp_watch_ops;

typedef struct cdp_watch cdp_watch;

/* Starts the thread with a copy of *ops (arm, query, wait and die are
 * required), the timeout in seconds (> 0) and the grace in whole seconds
 * (>= 1). 0 and *out, or CDP_EINVAL, CDP_ENOMEM, or a pthread error (an
 * errno value). */
int  cdp_watch_start(cdp_watch **out, const cdp_watch_ops *ops, double timeout,
                     unsigned grace);
/* After queuing `what` (a string that outlives the watchdog). */
void cdp_watch_push(cdp_watch *w, const char *what);
/* Operations pushed and not yet retired. */
int  cdp_watch_pending(cdp_watch *w);
/* Stops and joins the thread and frees w (NULL: nothing). The operations
 * still in the FIFO are forgotten. */
void cdp_watch_stop(cdp_watch *w);

/* For a thread that wakes every `period` seconds to time its peers: the
 * seconds beyond `period` that passed since its last wake (*prev, on
 * CLOCK_MONOTONIC, set to now), or 0 for a wake about on time. A late wake
 * means this process did not run (SIGSTOP and SIGCONT, a debugger, a
 * starved machine): the caller moves its deadlines on by that much, so
 * that its own stop is not blamed on a peer, which kept its own clock
 * and blames this rank if it was stopped too long. */
double cdp_watch_stalled(double *prev, double period);

/* 1 for the first caller in the process, 0 for every later one. */
int  cdp_watch_claim(void);
/* Blocks the calling thread for ever (the claimer ends the process). */
void cdp_watch_park(void) __attribute__((noreturn));

#endif
