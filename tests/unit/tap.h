/* tap.h: the few macros the unit tests share.
 *
 * CHECK(cond, ...) records a failure with file, line and a printf message and
 * carries on; CHECK_RC(expr, want) compares an int return code. A test's main
 * ends with `return tap_done();`, which prints "N checks, M failed" and exits
 * 1 on any failure (automake reads 0 as pass, 77 as skip, 99 as hard error).
 */
#ifndef CDP_TAP_H
#define CDP_TAP_H

#include <stdio.h>

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

#endif
