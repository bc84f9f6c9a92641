/* dist_opts.c: the ranks' options compared with rank 0's (dist.h,
 * cdp_dist_same_opts), through the public collectives alone. A job whose
 * ranks were given other options (mpirun's MPMD form, a wrapper script
 * that differs per host) would otherwise run apart: read other samples,
 * make other collectives and fail with an MPI error far from the cause, or
 * write a map that is half one setting and half the other.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist/dist.h"

void cdp_dist_opt(char *text, size_t cap, const char *name, const char *fmt, ...)
{
	char val[201];
	size_t len = strlen(text);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(val, sizeof val, fmt, ap);
	va_end(ap);
	snprintf(text + len, cap - len, "%s\t%s\n", name, val);
}

const char *cdp_dist_num(char *buf, size_t cap, double v)
{
	/* the shortest that reads back the same: 0.05 and 0.05000001 differ */
	snprintf(buf, cap, "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, cap, "%.17g", v);
	return buf;
}

int cdp_dist_same_opts(const char *text, char *msg, size_t cap)
{
	static char mine[CDP_DIST_OPTS_MAX], first[CDP_DIST_OPTS_MAX];
	const char *m, *f;
	size_t n, nf, k;

	msg[0] = '\0';
	if (cdp_dist_size() < 2)
		return 0;
	memset(mine, 0, sizeof mine);
	snprintf(mine, sizeof mine, "%s", text);
	memcpy(first, mine, sizeof first);
	cdp_dist_bcast_bytes(first, sizeof first);
	/* the first line that differs: every rank's text names the same
	 * options in the same order, so it is one option on both sides */
	for (m = mine, f = first; *m && *f; m += n + 1, f += nf + 1) {
		n = strcspn(m, "\n");
		nf = strcspn(f, "\n");
		if (n == nf && memcmp(m, f, n) == 0)
			continue;
		k = strcspn(m, "\t");
		snprintf(msg, cap, "%.*s is not rank 0's: %.*s here, %.*s there", (int)k, m,
		         (int)(n - k - 1), m + k + 1, (int)(nf - k - 1), f + k + 1);
		break;
	}
	return cdp_dist_any(msg[0] != '\0');
}
