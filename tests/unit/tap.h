/* tap.h: the few macros the unit tests share.
 *
 * CHECK(cond, ...) records a failure with file, line and a printf message and
 * carries on; CHECK_RC(expr, want) compares an int return code. A test's main
 * ends with `return tap_done();`, which prints "N checks, M failed" and exits
 * 1 on any failure (automake reads 0 as pass, 77 as skip, 99 as hard error).
 */
#ifndef CDP_TAP_H
#define CDP_TAP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int tap_checks, tap_failed;

#define CHECK(cond, ...) do { \
	tap_checks++; \
	if (!(cond)) { \
		tap_failed++; \
		fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
	} \
} while (0)

#define CHECK_RC(expr, want) do { \
	int tap_rc_ = (expr), tap_want_ = (want); \
	CHECK(tap_rc_ == tap_want_, "%s returned %d, want %d", #expr, tap_rc_, tap_want_); \
} while (0)

static inline int tap_done(void)
{
	printf("%d checks, %d failed\n", tap_checks, tap_failed);
	return tap_failed ? 1 : 0;
}

/* A fresh directory $TMPDIR/NAME.XXXXXX (/tmp without TMPDIR) into
 * dir[cap]; 0, or -1 with the reason printed. */
static inline int tap_tmpdir(char *dir, size_t cap, const char *name)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, cap, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

/* dir/name in one of four rotating buffers: valid for the next three calls. */
static inline const char *tap_path(const char *dir, const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* Removes the files in dir (a tap_tmpdir, no subdirectories) and dir. */
static inline void tap_tmpdir_remove(const char *dir)
{
	char path[4200];
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

#endif
