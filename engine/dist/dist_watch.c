/* dist_watch.c: the device watchdog (dist_watch.h): the FIFO of pushed
 * operations, the thread that retires and times them, and the one way it
 * ends the process.
 */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cdp_error.h"
#include "dist/dist_watch.h"
#include "cdp_thread.h"

struct cdp_watch {
	cdp_watch_ops ops;
	double timeout, period;
	unsigned grace;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	/* the FIFO: slots q0 .. q0 + qn (mod CDP_WATCH_SLOTS) */
	const char *what[CDP_WATCH_SLOTS];
	double t0[CDP_WATCH_SLOTS];
	int q0, qn;
};

static atomic_int claimed;

/* What the alarm handler writes, prepared before the alarm is armed, and
 * whether die has begun to print (then the handler only exits). */
static char alarm_line[1024];
static size_t alarm_len;
static volatile sig_atomic_t die_started;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cdp_watch_claim(void)
{
	int no = 0;

	return atomic_compare_exchange_strong(&claimed, &no, 1);
}

void cdp_watch_park(void)
{
	for (;;)
		pause();
}

static void on_alarm(int sig)
{
	(void)sig;
	if (!die_started) {
		ssize_t k = write(STDERR_FILENO, alarm_line, alarm_len);
		(void)k;
	}
	_exit(1);
}

/* Ends the process with msg (dist_watch.h, "Firing"); w->mu is not held. */
static void fire(cdp_watch *w, const char *msg) __attribute__((noreturn));
static void fire(cdp_watch *w, const char *msg)
{
	struct sigaction sa;
	int k;

	if (!cdp_watch_claim())
		cdp_watch_park();
	/* one line even when cut short */
	k = snprintf(alarm_line, sizeof alarm_line - 1, "%s%s", w->ops.prefix ? w->ops.prefix : "",
	             msg);
	alarm_len = k < 0 ? 0 : (size_t)k < sizeof alarm_line - 1 ? (size_t)k : sizeof alarm_line - 2;
	alarm_line[alarm_len++] = '\n';
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	alarm(w->grace);
	if (w->ops.abort)
		w->ops.abort(w->ops.ctx);
	die_started = 1;
	w->ops.die(w->ops.ctx, msg);
}

double cdp_watch_stalled(double *prev, double period)
{
	double t = now(), gap = t - *prev;

	*prev = t;
	/* a wake-up may be late by a scheduler's slice, not by seconds */
	return gap > 2 * period + 0.25 ? gap - period : 0;
}

static void *run(void *arg)
{
	cdp_watch *w = arg;
	char msg[768], detail[512];
	struct timespec ts;
	double t, prev = now(), lost;
	int q;

	cdp_thread_name("cdp-devwatch", -1);
	if (w->ops.enter && w->ops.enter(w->ops.ctx, msg, sizeof msg) != 0)
		fire(w, msg);
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		t = now() + w->period;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		if (w->stop)
			break;
		if ((lost = cdp_watch_stalled(&prev, w->period)) > 0)
			for (int i = 0; i < w->qn; i++)
				w->t0[(w->q0 + i) % CDP_WATCH_SLOTS] += lost;
		detail[0] = '\0';
		while (w->qn > 0 && (q = w->ops.query(w->ops.ctx, w->q0, detail, sizeof detail)) != 0) {
			if (q < 0) {
				snprintf(msg, sizeof msg, "%s failed: %s", w->what[w->q0], detail);
				pthread_mutex_unlock(&w->mu);
				fire(w, msg);
			}
			w->q0 = (w->q0 + 1) % CDP_WATCH_SLOTS;
			w->qn--;
		}
		if (w->qn > 0 && now() - w->t0[w->q0] > w->timeout) {
			snprintf(msg, sizeof msg, "%s did not finish within %g s: a peer rank died or "
			         "hangs (timeout set by CDP_DIST_TIMEOUT)", w->what[w->q0], w->timeout);
			pthread_mutex_unlock(&w->mu);
			fire(w, msg);
		}
		if (w->ops.health && w->ops.health(w->ops.ctx, msg, sizeof msg) != 0) {
			pthread_mutex_unlock(&w->mu);
			fire(w, msg);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int cdp_watch_start(cdp_watch **out, const cdp_watch_ops *ops, double timeout, unsigned grace)
{
	pthread_condattr_t ca;
	cdp_watch *w;
	int rc;

	if (!out || !ops || !ops->arm || !ops->query || !ops->wait || !ops->die || !(timeout > 0) ||
	    grace < 1)
		return CDP_EINVAL;
	if (!(w = calloc(1, sizeof *w)))
		return CDP_ENOMEM;
	w->ops = *ops;
	w->timeout = timeout;
	w->period = timeout / 4 < 1 ? timeout / 4 : 1;
	w->grace = grace;
	if ((rc = pthread_mutex_init(&w->mu, NULL)) != 0)
		goto fail;
	/* a monotonic wait: a clock step must not fire the watchdog */
	if ((rc = pthread_condattr_init(&ca)) != 0)
		goto fail_mu;
	if ((rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0)
		rc = pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		goto fail_mu;
	if ((rc = pthread_create(&w->thread, NULL, run, w)) != 0)
		goto fail_cv;
	*out = w;
	return 0;
fail_cv:
	pthread_cond_destroy(&w->cv);
fail_mu:
	pthread_mutex_destroy(&w->mu);
fail:
	free(w);
	return rc;
}

void cdp_watch_push(cdp_watch *w, const char *what)
{
	int i;

	pthread_mutex_lock(&w->mu);
	while (w->qn == CDP_WATCH_SLOTS) {
		/* full: the caller waits for the oldest outside the lock (the
		 * watchdog keeps timing it), and retires it unless the thread did */
		int q0 = w->q0;
		pthread_mutex_unlock(&w->mu);
		w->ops.wait(w->ops.ctx, q0);
		pthread_mutex_lock(&w->mu);
		if (w->qn == CDP_WATCH_SLOTS && w->q0 == q0) {
			w->q0 = (w->q0 + 1) % CDP_WATCH_SLOTS;
			w->qn--;
		}
	}
	i = (w->q0 + w->qn) % CDP_WATCH_SLOTS;
	w->ops.arm(w->ops.ctx, i);
	w->t0[i] = now();
	w->what[i] = what;
	w->qn++;
	pthread_mutex_unlock(&w->mu);
}

int cdp_watch_pending(cdp_watch *w)
{
	int n;

	pthread_mutex_lock(&w->mu);
	n = w->qn;
	pthread_mutex_unlock(&w->mu);
	return n;
}

void cdp_watch_stop(cdp_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
