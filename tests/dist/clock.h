/* clock.h: the monotonic clock and sleep that the timing tests (test_rdv,
 * test_watch, test_nccl_mock) measure waits and timeouts with.
 * Header-only, so each test program stays one file. */
#ifndef CDP_TEST_CLOCK_H
#define CDP_TEST_CLOCK_H

#include <time.h>

/* seconds on CLOCK_MONOTONIC */
static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* sleeps s seconds (>= 0) */
static inline void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

#endif
