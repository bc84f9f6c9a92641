/* cdp_thread.c: thread names (cdp_thread.h), by prctl(PR_SET_NAME), which
 * names the calling thread, and the CPUs the process may run on, by
 * sched_getaffinity (a GNU extension, hence _GNU_SOURCE), and what OpenBLAS
 * would have chosen where cdp_cli.c restarted the program. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void cdp_thread_mask(unsigned char mask[CDP_CPUMASK_BYTES])
{
	int n;

	memset(mask, 0, CDP_CPUMASK_BYTES);
#if defined(__linux__) && defined(CPU_COUNT)
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
		for (int i = 0; i < CDP_CPUMASK_BYTES * 8 && i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				mask[i / 8] |= (unsigned char)(1u << (i % 8));
		return;
	}
#endif
	n = cdp_thread_cpus();
	for (int i = 0; i < n && i < CDP_CPUMASK_BYTES * 8; i++)
		mask[i / 8] |= (unsigned char)(1u << (i % 8));
}

int cdp_thread_sharing(const unsigned char *masks, int n, int me)
{
	const unsigned char *m = masks + (size_t)me * CDP_CPUMASK_BYTES;
	int k = 0;

	for (int r = 0; r < n; r++) {
		const unsigned char *o = masks + (size_t)r * CDP_CPUMASK_BYTES;
		int any = r == me;
		for (int b = 0; b < CDP_CPUMASK_BYTES && !any; b++)
			any = (m[b] & o[b]) != 0;
		k += any;
	}
	return k < 1 ? 1 : k;
}

static int blas_forced;   /* this process is cdp_cli.c's re-execution */

void cdp_thread_blas_forced(void)
{
	blas_forced = 1;
}

int cdp_thread_blas_threads(void)
{
	const char *v;
	long n;

	if (!blas_forced)
		return 0;
	/* what OpenBLAS would have chosen: GOTO_NUM_THREADS, OMP_NUM_THREADS,
	 * else the CPUs this process may run on */
	if (((v = getenv("GOTO_NUM_THREADS")) && (n = atol(v)) > 0) ||
	    ((v = getenv("OMP_NUM_THREADS")) && (n = atol(v)) > 0))
		return n > 1024 ? 1024 : (int)n;
	return cdp_thread_cpus();
}
