/* cdp_thread.c: thread names (cdp_thread.h), by prctl(PR_SET_NAME), which
 * names the calling thread, and the CPUs the process may run on, by
 * sched_getaffinity (a GNU extension, hence _GNU_SOURCE). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <unistd.h>
#include "cdp_thread.h"
#if defined(__linux__)
#include <sched.h>
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

int cdp_thread_cpus(void)
{
	long n;
#if defined(__linux__) && defined(CPU_COUNT)
	cpu_set_t set;

	/* what nproc counts: taskset, cgroup cpusets, Slurm's and mpirun's
	 * bindings (a set larger than cpu_set_t fails: then every CPU) */
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
#endif
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}
