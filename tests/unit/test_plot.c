/* test_plot.c: the plots of lib/cdp_plot.c on data a tick step cannot
 * resolve. Values a few ulps apart gave a tick step below half an ulp, and
 * the tick loops (v += step) never advanced: cdp-train's loss.png and
 * cdp-evaluate --png hung. Each plot here must be written, and within the
 * alarm's seconds (a hang ends the test with SIGALRM, a failure).
 */
#include "cdp_error.h"
#include "cdp_plot.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256], path[300];

/* LeakSanitizer (check-unit's sanitizer build) asks for these: fontconfig's
 * configuration, which cairo's text reaches once a process and never
 * frees, is not ours to free (cdp-train's loss.png holds it the same way). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libfontconfig.so\n";
}

/* the file at path starts with PNG's signature; then it is removed */
static int is_png(void)
{
	unsigned char b[8] = { 0 };
	FILE *f = fopen(path, "rb");
	int ok = f && fread(b, 1, 8, f) == 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0;

	if (f)
		fclose(f);
	unlink(path);
	return ok;
}

/* a run whose losses, validation metric and learning rate are each one
 * value or two an ulp apart (a constant lr, a loss that did not move) */
static void test_run(double y0)
{
	double x[2] = { 1, 2 }, y[2] = { y0, nextafter(y0, INFINITY) }, lr[2] = { 0.1, 0.1 };
	cdp_plot_run r = { .title = "ulps", .loss = { x, y, 2 }, .val_loss = { x, y, 2 },
	                   .metric = { x, y, 2 }, .lr = { x, lr, 2 }, .metric_name = "metric" };

	snprintf(path, sizeof path, "%s/run.png", dir);
	CHECK_RC(cdp_plot_run_png(path, &r), 0);
	CHECK(is_png(), "run plot of %.17g and the next double: not a PNG", y0);
}

/* a histogram over [lo, next double after lo] */
static void test_hist(double lo)
{
	uint64_t counts[4] = { 3, 0, 0, 1 };

	snprintf(path, sizeof path, "%s/hist.png", dir);
	CHECK_RC(cdp_plot_hist2d_png(path, counts, 2, lo, nextafter(lo, INFINITY), "reference",
	                             "predicted", "ulps"), 0);
	CHECK(is_png(), "histogram over [%.17g, the next double]: not a PNG", lo);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof dir, "%s/cdp-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp %s", dir);
		return tap_done();
	}
	alarm(60);
	test_run(0.6931471805599453);
	test_run(1e6);
	test_run(0);
	test_hist(1e6);
	test_hist(1e17);
	test_hist(-3.5);
	rmdir(dir);
	return tap_done();
}
