/* cdp_thread.c: thread names (cdp_thread.h), by prctl(PR_SET_NAME), which
 * names the calling thread and needs no _GNU_SOURCE. */
#include <stdio.h>
#include "cdp_thread.h"
#if defined(__linux__)
#include <sys/prctl.h>
#endif

void cdp_thread_name(const char *name, int n)
{
#if defined(__linux__)
	char b[16];

	if (n >= 0)
		snprintf(b, sizeof b, "%s/%d", name, n);
	else
		snprintf(b, sizeof b, "%s", name);
	prctl(PR_SET_NAME, b, 0, 0, 0);
#else
	(void)name;
	(void)n;
#endif
}
