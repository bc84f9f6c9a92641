/* cdp_thread.h: names for the threads the tools start, so that top -H,
 * ps -L, perf report --sort comm, gdb and /proc/PID/task/TID/comm tell
 * them apart from the main thread (all would show "cdp-train"
 * otherwise). The names: cdp-comm (gradient buckets, dist_ring.c),
 * cdp-watchdog (blocking MPI calls, dist_mpi.c), cdp-devwatch (device
 * operations, dist_watch.c), cdp-heartbeat (dist_beat.c), cdp-cpu/N (the
 * CPU backend's pool, N from 1), cdp-prefetch and cdp-load/N (the
 * training loader). */
#ifndef CDP_THREAD_H
#define CDP_THREAD_H

/* Names the calling thread: name, cut to the 15 bytes Linux keeps, or
 * "name/N" for n >= 0. Best effort: nothing happens where the system
 * has no thread names. */
void cdp_thread_name(const char *name, int n);

/* The CPUs this process may run on, at least 1: its affinity mask's count
 * (sched_getaffinity, as nproc counts under taskset, a cpuset or a
 * binding), else the online CPUs (sysconf). The tools' default --threads
 * divides it by the ranks of the node that share those CPUs
 * (cdp_dist_local_share). */
int cdp_thread_cpus(void);

/* Under an address-space limit, a program linking cdp_cli.c is started
 * again before any library's constructor with OPENBLAS_NUM_THREADS=1 (the
 * OpenBLAS worker threads spin for ever when their buffer cannot be
 * mapped), and cdp_cli_init then calls cdp_thread_blas_forced. After that
 * cdp_thread_blas_threads returns the thread count OpenBLAS would have
 * reported without it (for cdp-train's default --threads); otherwise 0.
 * Here, not in cdp_cli.c, so that the engine depends on no CLI code. */
void cdp_thread_blas_forced(void);
int cdp_thread_blas_threads(void);

/* The bytes of an affinity mask as cdp_thread_mask writes it: bit i % 8 of
 * byte i / 8 is CPU i, for CPUs 0 to 1023. */
#define CDP_CPUMASK_BYTES 128

/* This process's affinity mask, as cdp_thread_cpus counts it: where
 * sched_getaffinity fails, the first online CPUs. */
void cdp_thread_mask(unsigned char mask[CDP_CPUMASK_BYTES]);

/* Of n masks of CDP_CPUMASK_BYTES bytes each, one after the other, how many
 * share a CPU with masks[me], itself included (at least 1): the ranks whose
 * threads would compete with me's for its CPUs. Ranks that mpirun or srun
 * bound to CPUs of their own count 1 each; unbound ranks, all with the
 * node's mask, count all. */
int cdp_thread_sharing(const unsigned char *masks, int n, int me);

#endif
