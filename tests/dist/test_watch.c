/* test_watch.c: the device watchdog (dist_watch.h) on the CPU. The "device
 * operations" are deadlines on CLOCK_MONOTONIC: each pushed operation
 * completes a set delay after its push, never, or fails. Each case runs in
 * a forked child whose exit status, stderr and duration the parent checks:
 *  - operations that complete (600 through the 256 slots, so that pushing
 *    waits on the oldest): no abort, the FIFO drains, exit 0, stderr empty;
 *  - one that completes slower than a period but within the timeout: no
 *    abort; nor one that completes late because the process was stopped
 *    (SIGSTOP, then SIGCONT) meanwhile;
 *  - one that never completes: the abort callback runs once, then one line
 *    "test_watch: rank 0: NAME did not finish within 0.5 s: ...", exit 1,
 *    not before the timeout and within timeout + 2 s;
 *  - one that fails: "NAME failed: TEXT"; a health error: its text;
 *  - an abort that hangs: the alarm ends the process after the grace with
 *    the same one line;
 *  - the main thread claims the end first: the watchdog parks, no abort,
 *    the main thread's line is the only one;
 *  - stop returns at once with a long timeout; bad arguments are refused.
 */
#include <config.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cdp_error.h"
#include "dist/dist.h"
#include "dist/dist_watch.h"
#include "tap.h"
#include "clock.h"

#define FAILS (-1.0)            /* done_at of an operation that fails */

static char errf[300], markf[300];

/* ---- the fake device ---------------------------------------------------- */

static struct {
	pthread_mutex_t mu;
	double done_at[CDP_WATCH_SLOTS];    /* INFINITY: never; FAILS */
	double delay;                       /* of the next push */
	int waits, health_bad, abort_hangs, mark_fd;
} dev = { .mu = PTHREAD_MUTEX_INITIALIZER, .mark_fd = -1 };

static void f_arm(void *ctx, int slot)
{
	pthread_mutex_lock(&dev.mu);
	dev.done_at[slot] = dev.delay < 0 ? FAILS : now() + dev.delay;
	pthread_mutex_unlock(&dev.mu);
}

static int f_query(void *ctx, int slot, char *msg, size_t cap)
{
	double t;

	pthread_mutex_lock(&dev.mu);
	t = dev.done_at[slot];
	pthread_mutex_unlock(&dev.mu);
	if (t == FAILS) {
		snprintf(msg, cap, "an illegal memory access was encountered");
		return -1;
	}
	return now() >= t;
}

static void f_wait(void *ctx, int slot)
{
	double t;

	pthread_mutex_lock(&dev.mu);
	t = dev.done_at[slot];
	dev.waits++;
	pthread_mutex_unlock(&dev.mu);
	while (t != FAILS && now() < t)
		nap(0.001);
}

static int f_health(void *ctx, char *msg, size_t cap)
{
	int bad;

	/* set by the main thread while the watchdog polls: under dev.mu */
	pthread_mutex_lock(&dev.mu);
	bad = dev.health_bad;
	pthread_mutex_unlock(&dev.mu);
	if (!bad)
		return 0;
	snprintf(msg, cap, "NCCL reports an error: remote process exited or there was a network "
	         "error");
	return -1;
}

/* Leaves an "A" in the mark file for each call (the parent counts them). */
static void f_abort(void *ctx)
{
	if (dev.mark_fd >= 0 && write(dev.mark_fd, "A", 1) != 1)
		_exit(98);
	while (dev.abort_hangs)
		pause();
}

static void f_die(void *ctx, const char *msg) __attribute__((noreturn));
static void f_die(void *ctx, const char *msg)
{
	cdp_dist_abort(1, "%s", msg);
}

static const cdp_watch_ops ops = {
	.arm = f_arm, .query = f_query, .wait = f_wait, .health = f_health, .abort = f_abort,
	.die = f_die, .prefix = "test_watch: rank 0: "
};

/* ---- the child and what it left ----------------------------------------- */

typedef struct outcome {
	int status;
	double secs;
	int lines, aborts;
	char first[1024];
} outcome;

/* Runs fn in a child with stderr to errf, for at most 20 s. */
static outcome run(void (*fn)(void))
{
	outcome o = { 0 };
	double t0 = now();
	char c;
	pid_t pid;
	FILE *f;
	int fd;

	if ((pid = fork()) == 0) {
		int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dev.mark_fd = open(markf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (e < 0 || dev.mark_fd < 0 || dup2(e, 2) < 0)
			_exit(99);
		fn();
		_exit(0);
	}
	while (waitpid(pid, &o.status, WNOHANG) == 0) {
		if (now() - t0 > 20) {
			kill(pid, SIGKILL);
			waitpid(pid, &o.status, 0);
			break;
		}
		nap(0.005);
	}
	o.secs = now() - t0;
	if ((f = fopen(errf, "r"))) {
		char line[1024];
		while (fgets(line, sizeof line, f))
			if (o.lines++ == 0)
				snprintf(o.first, sizeof o.first, "%s", line);
		fclose(f);
	}
	if ((fd = open(markf, O_RDONLY)) >= 0) {
		while (read(fd, &c, 1) == 1)
			o.aborts += c == 'A';
		close(fd);
	}
	return o;
}

static int exited(const outcome *o, int code)
{
	return WIFEXITED(o->status) && WEXITSTATUS(o->status) == code;
}

/* ---- the cases ---------------------------------------------------------- */

static cdp_watch *start(double timeout, unsigned grace)
{
	cdp_watch *w = NULL;

	if (cdp_watch_start(&w, &ops, timeout, grace) != 0)
		_exit(97);
	return w;
}

static void c_complete(void)
{
	cdp_watch *w = start(0.5, 1);
	double t0;

	dev.delay = 0.02;
	for (int i = 0; i < 600; i++)
		cdp_watch_push(w, "an operation that completes");
	if (dev.waits == 0)
		_exit(3);                       /* the full FIFO did not wait */
	dev.delay = 0.3;                        /* slower than a period, within the timeout */
	cdp_watch_push(w, "a slow operation");
	t0 = now();
	while (cdp_watch_pending(w) > 0 && now() - t0 < 5)
		nap(0.01);
	if (cdp_watch_pending(w) != 0)
		_exit(4);                       /* never retired */
	nap(0.6);                               /* past the timeout: nothing may fire */
	cdp_watch_stop(w);
	_exit(0);
}

/* A process stopped (SIGSTOP by a helper, continued 3 s later) while its
 * operation is pending under a 1 s timeout: the operation completes 0.3 s
 * after the continue, and the time the process did not run is not held
 * against it (cdp_watch_stalled). */
static void c_paused(void)
{
	cdp_watch *w = start(1, 1);
	pid_t me = getpid(), helper;
	double t0;

	if ((helper = fork()) == 0) {
		nap(0.2);
		kill(me, SIGSTOP);
		nap(3);
		kill(me, SIGCONT);
		_exit(0);
	}
	dev.delay = 3.5;
	cdp_watch_push(w, "an operation the stop delays");
	t0 = now();
	while (cdp_watch_pending(w) > 0 && now() - t0 < 10)
		nap(0.01);
	waitpid(helper, NULL, 0);
	if (cdp_watch_pending(w) != 0)
		_exit(4);
	cdp_watch_stop(w);
	_exit(0);
}

static void c_hang(void)
{
	cdp_watch *w = start(0.5, 5);

	dev.delay = 0.01;
	cdp_watch_push(w, "an operation that completes");
	dev.delay = INFINITY;
	cdp_watch_push(w, "ncclAllReduce of a gradient bucket");
	for (;;)
		pause();                        /* the host, blocked on the device */
}

static void c_fail(void)
{
	cdp_watch *w = start(30, 5);

	dev.delay = FAILS;
	cdp_watch_push(w, "ncclBroadcast");
	for (;;)
		pause();
}

static void c_health(void)
{
	cdp_watch *w = start(30, 5);

	(void)w;
	pthread_mutex_lock(&dev.mu);
	dev.health_bad = 1;
	pthread_mutex_unlock(&dev.mu);
	for (;;)
		pause();
}

static void c_abort_hangs(void)
{
	cdp_watch *w = start(0.5, 1);

	dev.abort_hangs = 1;
	dev.delay = INFINITY;
	cdp_watch_push(w, "ncclAllReduce of host values");
	for (;;)
		pause();
}

static void c_main_first(void)
{
	cdp_watch *w = start(0.3, 5);

	dev.delay = INFINITY;
	cdp_watch_push(w, "ncclAllReduce of a gradient bucket");
	if (!cdp_watch_claim())
		_exit(5);
	nap(1.5);                               /* the watchdog fires meanwhile */
	cdp_dist_abort(1, "dist_nccl.c:1: cudaEventSynchronize: the main thread's own failure");
}

static void test_cases(void)
{
	outcome o;

	o = run(c_complete);
	CHECK(exited(&o, 0) && o.lines == 0 && o.aborts == 0,
	      "completing ops: status %d, %d lines (%s), %d aborts", o.status, o.lines, o.first,
	      o.aborts);
	o = run(c_paused);
	CHECK(exited(&o, 0) && o.lines == 0 && o.aborts == 0,
	      "paused: status %d, %d lines (%s), %d aborts: the process's own stop was blamed",
	      o.status, o.lines, o.first, o.aborts);

	o = run(c_hang);
	CHECK(exited(&o, 1), "hang: status %d", o.status);
	CHECK(o.lines == 1 && strcmp(o.first, "test_watch: rank 0: ncclAllReduce of a gradient "
	      "bucket did not finish within 0.5 s: a peer rank died or hangs (timeout set by "
	      "CDP_DIST_TIMEOUT)\n") == 0, "hang: %d lines, first: %s", o.lines, o.first);
	CHECK(o.aborts == 1, "hang: the abort ran %d times, want once", o.aborts);
	CHECK(o.secs >= 0.5 && o.secs < 5, "hang: ended after %.2f s, want 0.5 .. 5", o.secs);

	o = run(c_fail);
	CHECK(exited(&o, 1) && o.lines == 1 && o.aborts == 1 &&
	      strcmp(o.first, "test_watch: rank 0: ncclBroadcast failed: an illegal memory access "
	             "was encountered\n") == 0,
	      "fail: status %d, %d lines, %d aborts, first: %s", o.status, o.lines, o.aborts,
	      o.first);
	CHECK(o.secs < 3, "fail: took %.1f s", o.secs);

	o = run(c_health);
	CHECK(exited(&o, 1) && o.lines == 1 && o.aborts == 1 &&
	      strstr(o.first, "test_watch: rank 0: NCCL reports an error: remote process") == o.first,
	      "health: status %d, %d lines, first: %s", o.status, o.lines, o.first);

	o = run(c_abort_hangs);
	CHECK(exited(&o, 1) && o.lines == 1 && o.aborts == 1 &&
	      strcmp(o.first, "test_watch: rank 0: ncclAllReduce of host values did not finish "
	             "within 0.5 s: a peer rank died or hangs (timeout set by CDP_DIST_TIMEOUT)\n")
	      == 0, "abort hangs: status %d, %d lines, first: %s", o.status, o.lines, o.first);
	CHECK(o.secs >= 1.5 && o.secs < 4.5, "abort hangs: ended after %.2f s, want 1.5 .. 4.5",
	      o.secs);

	o = run(c_main_first);
	CHECK(exited(&o, 1) && o.lines == 1 && o.aborts == 0 &&
	      strstr(o.first, "the main thread's own failure") != NULL,
	      "main first: status %d, %d lines, %d aborts, first: %s", o.status, o.lines, o.aborts,
	      o.first);
}

static void test_api(void)
{
	cdp_watch_ops bad = ops;
	cdp_watch *w = NULL;
	double t0;

	CHECK_RC(cdp_watch_start(&w, &ops, 0, 1), CDP_EINVAL);
	CHECK_RC(cdp_watch_start(&w, &ops, 1, 0), CDP_EINVAL);
	bad.query = NULL;
	CHECK_RC(cdp_watch_start(&w, &bad, 1, 1), CDP_EINVAL);
	CHECK_RC(cdp_watch_start(&w, &ops, 60, 10), 0);
	CHECK(w && cdp_watch_pending(w) == 0, "a new watchdog has pending operations");
	t0 = now();
	cdp_watch_stop(w);
	CHECK(now() - t0 < 5, "stop took %.2f s (it must not wait out the timeout or the grace)",
	      now() - t0);
	cdp_watch_stop(NULL);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	snprintf(errf, sizeof errf, "%s/cdpwatch.%ld.err", tmp, (long)getpid());
	snprintf(markf, sizeof markf, "%s/cdpwatch.%ld.mark", tmp, (long)getpid());
	cdp_dist_set_prog("test_watch");
	test_api();
	test_cases();
	unlink(errf);
	unlink(markf);
	return tap_done();
}
