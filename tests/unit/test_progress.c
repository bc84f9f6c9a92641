/* test_progress.c: what cdp_progress writes to stderr, and when.
 *
 * stderr (fd 2) is pointed at a temporary file for each case, so the test
 * sees exactly the bytes a user would: nothing for -q or for AUTO off a
 * terminal; for --progress at most one redraw per second of rapid updates,
 * each ending in '\r', then one final line ending in '\n'. A pseudo-terminal
 * checks that AUTO turns itself on for a real terminal.
 */
#define _GNU_SOURCE
#include "cdp_progress.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int saved_stderr = -1;
static char tmpl[64];

/* Points fd 2 at a new empty temporary file; -1, a failed check, when
 * there is none. */
static int capture_begin(void)
{
	int fd;

	strcpy(tmpl, "/tmp/test_progress.XXXXXX");
	fd = mkstemp(tmpl);
	CHECK(fd >= 0, "cannot create a temporary file");
	if (fd < 0)
		return -1;
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/* Restores fd 2 and returns what was written (malloc'd, NUL-terminated). */
static char *capture_end(size_t *len)
{
	char *buf = NULL;
	FILE *f;
	long n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	f = fopen(tmpl, "rb");
	unlink(tmpl);
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static size_t count_char(const char *s, size_t len, char c)
{
	size_t k = 0;

	for (size_t i = 0; i < len; i++)
		k += s[i] == c;
	return k;
}

/* Updates every 100 us for `seconds`; returns the time taken. */
static double rapid_updates(cdp_progress *p, double seconds, uint64_t total)
{
	struct timespec pause = { 0, 100000 };
	double t0 = cdp_now();
	uint64_t done = 0;

	while (cdp_now() - t0 < seconds) {
		if (done < total - 1)
			done++;
		cdp_progress_update(p, done);
		nanosleep(&pause, NULL);
	}
	return cdp_now() - t0;
}

static void test_silent_modes(void)
{
	cdp_progress p;
	size_t len = 99;
	char *out;
	int auto_enabled;

	if (capture_begin() != 0)
		return;
	cdp_progress_start(&p, CDP_PROGRESS_OFF, "cdp-test", "tiling", 10);
	rapid_updates(&p, 1.2, 10);
	cdp_progress_end(&p);
	/* stderr is a regular file, so AUTO must stay quiet too. */
	cdp_progress_start(&p, CDP_PROGRESS_AUTO, "cdp-test", "tiling", 10);
	auto_enabled = p.enabled;
	cdp_progress_update(&p, 10);
	cdp_progress_end(&p);
	out = capture_end(&len);
	CHECK(!auto_enabled, "AUTO enabled with stderr a file");
	CHECK(out && len == 0, "OFF/AUTO wrote %zu bytes: \"%s\"", len,
	      out ? out : "");
	free(out);
}

static void test_on(void)
{
	const char *want_head = "cdp-test: tiling 5000/5000 (100%) ";
	cdp_progress p;
	size_t len = 0, redraws, nl;
	char *out, *last;
	double elapsed, t0;

	if (capture_begin() != 0)
		return;
	t0 = cdp_now();
	cdp_progress_start(&p, CDP_PROGRESS_ON, "cdp-test", "tiling", 5000);
	rapid_updates(&p, 2.3, 5000);
	cdp_progress_update(&p, 5000);
	cdp_progress_end(&p);
	elapsed = cdp_now() - t0;
	cdp_progress_end(&p);   /* a second end adds nothing */
	out = capture_end(&len);
	if (!out) {
		CHECK(0, "cannot read the captured stderr");
		return;
	}
	redraws = count_char(out, len, '\r');
	nl = count_char(out, len, '\n');
	/* The first redraw comes a second after the start, then at most one a
	 * second: over 2.3 s that is 1 or 2, never one per update. */
	CHECK(redraws >= 1 && redraws <= (size_t)elapsed,
	      "%zu redraws in %.2f s", redraws, elapsed);
	CHECK(nl == 1 && len > 0 && out[len - 1] == '\n',
	      "want one final newline, got %zu", nl);
	CHECK(strncmp(out, "cdp-test: tiling ", 17) == 0 &&
	      strstr(out, "/5000 (") != NULL && strstr(out, "%) ") != NULL,
	      "first line \"%.60s\"", out);
	CHECK(strchr(out, '\033') == NULL, "escape codes written to a file");
	last = strrchr(out, '\r');
	last = last ? last + 1 : out;
	CHECK(strncmp(last, want_head, strlen(want_head)) == 0,
	      "final line \"%s\"", last);
	CHECK(len >= 9 && strcmp(out + len - 9, "/s, done\n") == 0,
	      "final line ends \"%s\"", len >= 9 ? out + len - 9 : out);
	free(out);

	/* Unknown total: no fraction, no percentage; a short run prints only
	 * the final line. */
	if (capture_begin() != 0)
		return;
	cdp_progress_start(&p, CDP_PROGRESS_ON, "cdp-test", "reading", 0);
	cdp_progress_update(&p, 7);
	cdp_progress_end(&p);
	out = capture_end(&len);
	CHECK(out && strncmp(out, "cdp-test: reading 7", 19) == 0 &&
	      !strchr(out, '%') && !strchr(out, '\r') &&
	      count_char(out, len, '\n') == 1, "unknown total: \"%s\"",
	      out ? out : "");
	free(out);
}

/* AUTO on a terminal: enabled, and lines clear the rest of the terminal row. */
static void test_auto_tty(void)
{
	cdp_progress p;
	char buf[512], *slave;
	ssize_t n;
	int master, sfd;

	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 ||
	    !(slave = ptsname(master))) {
		printf("# no pseudo-terminal: AUTO-on-a-terminal case not run\n");
		if (master >= 0)
			close(master);
		return;
	}
	sfd = open(slave, O_RDWR | O_NOCTTY);
	if (sfd < 0) {
		printf("# cannot open %s: AUTO-on-a-terminal case not run\n", slave);
		close(master);
		return;
	}
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(sfd, STDERR_FILENO);
	close(sfd);
	cdp_progress_start(&p, CDP_PROGRESS_AUTO, "cdp-test", "packing", 3);
	cdp_progress_update(&p, 3);
	cdp_progress_end(&p);
	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	CHECK(p.drawn == 0 && p.enabled == 0, "end() did not reset the state");
	n = read(master, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(n > 0 && strstr(buf, "cdp-test: packing 3/3 (100%)") != NULL &&
	      strstr(buf, "\033[K") != NULL, "terminal got \"%s\"", buf);
	close(master);
}

/* A failed run: cdp_progress_fail ends a drawn line with a newline and no
 * ", done" (the tools' line claimed "done" before their error message);
 * with nothing drawn yet it prints nothing, and after it end() adds
 * nothing either. */
static void test_fail(void)
{
	cdp_progress p;
	size_t len = 0;
	char *out;

	if (capture_begin() != 0)
		return;
	cdp_progress_start(&p, CDP_PROGRESS_ON, "cdp-test", "tiling", 5000);
	rapid_updates(&p, 1.2, 5000);
	cdp_progress_fail(&p);
	cdp_progress_end(&p);
	out = capture_end(&len);
	CHECK(out && len >= 2 && strncmp(out, "cdp-test: tiling ", 17) == 0 &&
	      count_char(out, len, '\n') == 1 && out[len - 1] == '\n' &&
	      out[len - 2] == '\r' && !strstr(out, "done"),
	      "a failure after a redraw: \"%s\"", out ? out : "");
	free(out);

	if (capture_begin() != 0)
		return;
	cdp_progress_start(&p, CDP_PROGRESS_ON, "cdp-test", "tiling", 10);
	cdp_progress_update(&p, 3);
	cdp_progress_fail(&p);
	cdp_progress_end(&p);
	out = capture_end(&len);
	CHECK(out && len == 0, "a failure before any redraw wrote \"%s\"", out ? out : "");
	free(out);

	/* cdp_progress_finish: end or fail by the outcome */
	for (int ok = 0; ok < 2; ok++) {
		if (capture_begin() != 0)
			return;
		cdp_progress_start(&p, CDP_PROGRESS_ON, "cdp-test", "tiling", 10);
		cdp_progress_update(&p, 3);
		cdp_progress_finish(&p, ok);
		out = capture_end(&len);
		CHECK(out && (ok ? strstr(out, "3/10 (30%)") && strstr(out, ", done\n") : len == 0),
		      "finish(%d) wrote \"%s\"", ok, out ? out : "");
		free(out);
	}
}

int main(void)
{
	double t0 = cdp_now(), t1;
	struct timespec ms = { 0, 20000000 };

	/* cdp_now() is monotonic seconds. */
	nanosleep(&ms, NULL);
	t1 = cdp_now();
	CHECK(t1 - t0 >= 0.019 && t1 - t0 < 1.0, "cdp_now step %g", t1 - t0);

	test_silent_modes();
	test_on();
	test_auto_tty();
	test_fail();
	return tap_done();
}
