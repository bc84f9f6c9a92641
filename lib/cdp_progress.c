/* cdp_progress.c: a one-line progress meter on stderr.
 *
 * The line is "PROG: TITLE DONE/TOTAL (P%) R/s" (or "PROG: TITLE DONE R/s"
 * when the total is unknown), ended by '\r' so the next redraw overwrites it.
 * Redraws happen from cdp_progress_update() at most once a second, the first
 * one a second after the start, so that short runs print only the final line.
 * cdp_progress_end() prints the final line with ", done" and a newline;
 * cdp_progress_fail() only ends a drawn line, claiming nothing.
 *
 * This is the one part of lib/ that writes to stderr; it writes nothing unless
 * the mode (or, in AUTO mode, a terminal on fd 2) says so.
 */
#include "cdp_progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double cdp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cdp_progress_start(cdp_progress *p, int mode, const char *prog,
                        const char *title, uint64_t total)
{
	memset(p, 0, sizeof *p);
	if (mode == CDP_PROGRESS_ON)
		p->enabled = 1;
	else if (mode == CDP_PROGRESS_OFF)
		p->enabled = 0;
	else
		p->enabled = isatty(STDERR_FILENO);
	p->prog = prog ? prog : "";
	p->title = title ? title : "";
	p->total = total;
	p->start = cdp_now();
	p->last_draw = p->start;
}

/* Formats and writes one line; `tail` is "\r" for a redraw, ", done\n" at the
 * end. One fprintf per line: glibc writes it with one write(2) even to the
 * unbuffered stderr, so the line stays whole. */
static void draw(cdp_progress *p, double now, const char *tail)
{
	char body[400];
	size_t len;
	double elapsed = now - p->start;

	if (p->total > 0) {
		/* Integer percentage, not rounded up: 100% only when all done. */
		uint64_t pct = p->done >= p->total ? 100 :
			(uint64_t)((double)p->done * 100.0 / (double)p->total);
		snprintf(body, sizeof body, "%s: %s %llu/%llu (%llu%%)", p->prog,
		         p->title, (unsigned long long)p->done,
		         (unsigned long long)p->total, (unsigned long long)pct);
	} else {
		snprintf(body, sizeof body, "%s: %s %llu", p->prog, p->title,
		         (unsigned long long)p->done);
	}
	len = strlen(body);
	if (elapsed > 0)
		snprintf(body + len, sizeof body - len, " %.1f/s",
		         (double)p->done / elapsed);
	/* A shorter line (the rate fell from 10.0/s to 9.9/s) would leave the
	 * old line's last characters behind: on a terminal clear to the end of
	 * the line; in a file the stale characters do no harm. */
	fprintf(stderr, "%s%s%s", body,
	        isatty(STDERR_FILENO) ? "\033[K" : "", tail);
	fflush(stderr);
	p->drawn = 1;
	p->last_draw = now;
}

void cdp_progress_update(cdp_progress *p, uint64_t done)
{
	double now;

	p->done = done;
	if (!p->enabled)
		return;
	now = cdp_now();
	if (now - p->last_draw >= 1.0)
		draw(p, now, "\r");
}

void cdp_progress_end(cdp_progress *p)
{
	if (p->enabled || p->drawn)
		draw(p, cdp_now(), ", done\n");
	/* A second end() must not print the line again. */
	p->enabled = 0;
	p->drawn = 0;
}

void cdp_progress_fail(cdp_progress *p)
{
	/* the counts of the last redraw stay: they say how far the run got */
	if (p->drawn) {
		fputc('\n', stderr);
		fflush(stderr);
	}
	p->enabled = 0;
	p->drawn = 0;
}

void cdp_progress_finish(cdp_progress *p, int ok)
{
	if (ok)
		cdp_progress_end(p);
	else
		cdp_progress_fail(p);
}
