/* cdp_progress.h: tty-aware progress on stderr, as git's progress.c does.
 *
 * Progress is drawn only when stderr is a terminal (CDP_PROGRESS_AUTO), or
 * always (CDP_PROGRESS_ON, from --progress), or never (CDP_PROGRESS_OFF,
 * from -q). It is redrawn at most once a second, the first time one second
 * after the start, on one line ending in \r:
 *     cdp-tile: tiling 1234/5000 (24%) 3.1/s
 * ("cdp-tile: tiling 1234 3.1/s" when the total is 0, i.e. unknown), and
 * finished by cdp_progress_end() with the final counts, ", done" and a
 * newline, or by cdp_progress_fail() after a failure. On a terminal each line also clears the rest of the row.
 */
#ifndef CDP_PROGRESS_H
#define CDP_PROGRESS_H

#include <stdint.h>

enum { CDP_PROGRESS_AUTO = 0, CDP_PROGRESS_ON = 1, CDP_PROGRESS_OFF = 2 };

typedef struct cdp_progress {
	int enabled;          /* resolved from mode at start */
	const char *prog;     /* program name prefix */
	const char *title;    /* e.g. "tiling" */
	uint64_t total;       /* 0 if unknown */
	uint64_t done;
	double last_draw;     /* monotonic seconds of the last redraw */
	double start;         /* monotonic seconds at start */
	int drawn;            /* something is on the line */
} cdp_progress;

void cdp_progress_start(cdp_progress *p, int mode, const char *prog,
                        const char *title, uint64_t total);
/* Set the done count; redraws if at least one second has passed. */
void cdp_progress_update(cdp_progress *p, uint64_t done);
/* Final redraw and newline (only if anything was drawn or enabled); a
 * second call prints nothing. */
void cdp_progress_end(cdp_progress *p);
/* The end of a run that failed: a drawn line is ended with a newline as
 * it stands, without ", done", so that the error message starts a line of
 * its own; nothing was drawn, nothing is printed. Like cdp_progress_end,
 * a second call (or one after it) prints nothing. */
void cdp_progress_fail(cdp_progress *p);
/* cdp_progress_end when ok, else cdp_progress_fail: the end of a run of
 * either outcome. */
void cdp_progress_finish(cdp_progress *p, int ok);

/* Monotonic clock in seconds. */
double cdp_now(void);

#endif
