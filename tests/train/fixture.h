/* fixture.h: what the loader tests share to build their pools with the
 * real tools: a printf-style system(), paths inside the test's temporary
 * directory, and the Python and source tree they run mkraster.py from.
 * Header-only (static functions) so each test program stays one file. */
#ifndef CDP_TEST_FIXTURE_H
#define CDP_TEST_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

/* The test's temporary directory (set by the test with mkdtemp). */
static char dir[256];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* dir/name; the last 8 results stay valid */
static __attribute__((unused)) char *pth(const char *name)
{
	static char buf[8][300];
	static int k;

	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
	return buf[k];
}

static __attribute__((unused)) const char *fixture_python(void)
{
	const char *py = getenv("PYTHON");
	return py && *py ? py : "/usr/bin/python3";
}

static __attribute__((unused)) const char *fixture_srcdir(void)
{
	const char *src = getenv("CDP_SRCDIR");
	return src ? src : CDP_SRCDIR;
}

#endif
