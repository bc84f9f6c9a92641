/* cpu_pool.c: the CPU backend's thread pool, its per-thread scratch
 * memory, and the backend's thread count and teardown.
 *
 * All parallelism is ours: the thread that calls an op plus threads-1
 * workers that sleep on a condition variable between jobs. A job is a
 * range [0, n) whose indices the threads claim in small runs from a
 * shared counter, so a thread that the machine's other work holds up
 * leaves its share to the others (on a shared machine a fixed split waits
 * for the slowest thread at every op). Which thread runs an index depends
 * on timing; what fn(i) computes does not, so as long as fn(i) writes only
 * what belongs to i the result is deterministic (cpu.h).
 *
 * Between jobs a worker first spins for up to CDP_CPU_SPIN_US microseconds
 * (default SPIN_US_DEFAULT) on the job counter, and the caller on the
 * count of workers still inside a job, before they sleep. A U-Net step
 * is a few hundred jobs with gaps of up to a millisecond between them,
 * and waking a sleeping thread goes through the kernel, in a VM through
 * an interrupt to an idle vCPU, which can take long enough that the
 * caller does the job alone (a worker joins only while the job is open):
 * on a 2-vCPU VM the caller did 60-66% of a step's work with sleeping
 * workers, half with polling ones.
 * Spinning is what OpenMP runtimes do by default too (doc/PERFORMANCE.md
 * has what it gains). CDP_CPU_SPIN_US=0 sleeps at once: for more threads
 * than cores, where a spinning thread holds a core that another needs.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#include "cpu.h"
#include "cdp_num.h"
#include "cdp_thread.h"

typedef struct cpu_pool {
	pthread_mutex_t mu;
	pthread_cond_t start, done;
	pthread_t *th;
	int nworkers;            /* threads besides the caller */
	/* gen, active and stop change under mu; the spins read them without
	 * it, so they are written with __atomic builtins */
	unsigned long gen;       /* bumped once per job */
	int open;                /* the job takes new workers */
	int active;              /* workers inside the job */
	int stop;
	int64_t spin_ns;         /* CDP_CPU_SPIN_US, in ns */
	void (*fn)(void *, int);
	void *ctx;
	int n, grain;
	atomic_int next;         /* the next index to claim */
} cpu_pool;

#define MAX_THREADS CDP_MAX_THREADS

typedef struct cpu_impl {
	cpu_pool pool;
	int pool_ok;
	/* scratch[t] (scratch_bytes each): thread t's (cpu_worker), or index
	 * t's of a job over be->threads indices */
	float *scratch[MAX_THREADS];
	size_t scratch_bytes;
	void *ucache;            /* cpu_conv_wino.c's kept U (cpu_wino_cache) */
} cpu_impl;

void **cpu_wino_cache(cdp_backend *be)
{
	return &((cpu_impl *)be->impl)->ucache;
}

void *cpu_impl_new(void)
{
	return calloc(1, sizeof(cpu_impl));
}

typedef struct cpu_worker_arg { cpu_pool *p; int id; } cpu_worker_arg;

/* Set while a thread runs a job: a parallel_for from inside one runs
 * inline instead of deadlocking on workers busy with the outer job. Ops do
 * not nest (the convolutions' jobs own per-worker scratch and must not);
 * this only keeps a mistake from hanging. */
static __thread int in_job;
/* 0 for the thread that calls the ops, 1.. for the pool's workers */
static __thread int worker_id;

int cpu_worker(void)
{
	return worker_id;
}

/* Claims runs of `grain` indices until none are left. */
static void run_claims(cpu_pool *p)
{
	in_job = 1;
	for (;;) {
		int lo = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
		int hi = lo + p->grain < p->n ? lo + p->grain : p->n;
		if (lo >= p->n)
			break;
		for (int i = lo; i < hi; i++)
			p->fn(p->ctx, i);
	}
	in_job = 0;
}

#define SPIN_US_DEFAULT 1000
#define SPIN_US_MAX 1000000

int cpu_spin_us_parse(const char *v, int *us)
{
	return cdp_parse_int(v, 0, SPIN_US_MAX, us);
}

/* CDP_CPU_SPIN_US in ns (the programs refuse a bad value before they get
 * here: cdp_device_env_check); by default none for more threads than the
 * process may run on at once, where a spinning thread holds a CPU that
 * another one needs */
static int64_t spin_ns_for(int threads)
{
	const char *v = getenv("CDP_CPU_SPIN_US");
	int us = SPIN_US_DEFAULT;

	if (v && *v && cpu_spin_us_parse(v, &us) == 0)
		return (int64_t)us * 1000;
	return threads > cdp_thread_cpus() ? 0 : (int64_t)us * 1000;
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* a worker waits for a new job or the pool's stop */
static int job_posted(const cpu_pool *p, unsigned long seen)
{
	return __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != seen ||
	       __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
}

/* the caller waits for the workers to leave the job (acquire: their
 * outputs are visible after it) */
static int job_left(const cpu_pool *p, unsigned long unused)
{
	(void)unused;
	return __atomic_load_n(&p->active, __ATOMIC_ACQUIRE) == 0;
}

/* Spins, with mu not held, until done(p, arg) or spin_ns have passed; the
 * clock is read every 32 pauses (a pause is 10-40 ns), and the CPU offered
 * to any other thread that waits for it (sched_yield: the loader's, other
 * processes'; it returns at once when there is none). What it waited for
 * is checked again under mu, so a spin that gives up only costs time. */
static void spin(const cpu_pool *p, int (*done)(const cpu_pool *, unsigned long),
                 unsigned long arg)
{
	int64_t end;

	if (p->spin_ns <= 0 || done(p, arg))
		return;
	end = now_ns() + p->spin_ns;
	for (;;) {
		for (int i = 0; i < 32; i++) {
			if (done(p, arg))
				return;
			relax();
		}
		if (now_ns() >= end)
			return;
		sched_yield();
	}
}

/* A worker joins a job only while it is open: one that wakes after the
 * caller has closed it (the caller and the others did all the work) goes
 * back to sleep, and the caller never waits for a worker that the
 * machine did not run in time. */
static void *worker_main(void *arg)
{
	cpu_worker_arg *a = arg;
	cpu_pool *p = a->p;
	unsigned long seen = 0;

	worker_id = a->id;
	free(a);
	cdp_thread_name("cdp-cpu", worker_id);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->gen == seen && !p->stop) {
			pthread_mutex_unlock(&p->mu);
			spin(p, job_posted, seen);
			pthread_mutex_lock(&p->mu);
		}
		while (p->gen == seen && !p->stop)
			pthread_cond_wait(&p->start, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		if (!p->open)
			continue;
		__atomic_add_fetch(&p->active, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&p->mu);
		run_claims(p);
		pthread_mutex_lock(&p->mu);
		/* release: a spinning caller reads this job's outputs after it */
		if (__atomic_sub_fetch(&p->active, 1, __ATOMIC_RELEASE) == 0 && !p->open)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pool_stop(cpu_pool *p)
{
	pthread_mutex_lock(&p->mu);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nworkers; i++)
		pthread_join(p->th[i], NULL);
	free(p->th);
	pthread_cond_destroy(&p->start);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	memset(p, 0, sizeof *p);
}

/* Starts nworkers threads; -1 when one cannot be started (the caller then
 * stops those that did). */
static int pool_start(cpu_pool *p, int nworkers)
{
	memset(p, 0, sizeof *p);
	atomic_init(&p->next, 0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
	p->spin_ns = spin_ns_for(nworkers + 1);
	if (nworkers <= 0)
		return 0;
	p->th = calloc((size_t)nworkers, sizeof *p->th);
	if (!p->th)
		return -1;
	for (int i = 0; i < nworkers; i++) {
		cpu_worker_arg *a = malloc(sizeof *a);
		if (!a)
			return -1;
		a->p = p;
		a->id = i + 1;
		if (pthread_create(&p->th[i], NULL, worker_main, a) != 0) {
			free(a);
			return -1;
		}
		p->nworkers++;
	}
	return 0;
}

/* Runs of about an eighth of an even share: fine enough to even out
 * threads that run at different speeds, coarse enough that claiming costs
 * nothing next to the work. */
void cpu_parallel_for(cdp_backend *be, int n, void (*fn)(void *ctx, int i), void *ctx)
{
	cpu_impl *im = be->impl;
	cpu_pool *p = &im->pool;
	int threads = p->nworkers + 1;

	if (n <= 0)
		return;
	if (threads <= 1 || n == 1 || !im->pool_ok || in_job) {
		for (int i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->grain = n / (8 * threads) > 1 ? n / (8 * threads) : 1;
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	p->open = 1;
	__atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);

	run_claims(p);

	/* every index is claimed: wait for the workers still running theirs */
	pthread_mutex_lock(&p->mu);
	p->open = 0;
	if (p->active > 0) {
		pthread_mutex_unlock(&p->mu);
		spin(p, job_left, 0);
		pthread_mutex_lock(&p->mu);
	}
	while (p->active > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* ---- per-thread scratch ---- */

static void scratch_free(cpu_impl *im)
{
	for (int t = 0; t < MAX_THREADS; t++) {
		free(im->scratch[t]);
		im->scratch[t] = NULL;
	}
}

/* Gives scratch 0..threads-1 `bytes` each (keeping the largest size asked
 * for so far); -1 when memory runs out (the old buffers are then kept). */
int cpu_scratch_reserve(cdp_backend *be, size_t bytes)
{
	cpu_impl *im = be->impl;
	float *fresh[MAX_THREADS] = { 0 };

	if (bytes < im->scratch_bytes)
		bytes = im->scratch_bytes;
	if (bytes == im->scratch_bytes && (bytes == 0 || im->scratch[be->threads - 1]))
		return 0;
	for (int t = 0; t < be->threads; t++) {
		fresh[t] = cpu_alloc(be, bytes);
		if (!fresh[t]) {
			for (int u = 0; u < t; u++)
				free(fresh[u]);
			return -1;
		}
	}
	scratch_free(im);
	memcpy(im->scratch, fresh, sizeof fresh);
	im->scratch_bytes = bytes;
	return 0;
}

size_t cpu_scratch_bytes(const cdp_backend *be)
{
	return ((const cpu_impl *)be->impl)->scratch_bytes;
}

float *cpu_scratch(cdp_backend *be, int t)
{
	return ((cpu_impl *)be->impl)->scratch[t];
}

/* OpenBLAS's own count (OPENBLAS_NUM_THREADS or the cores), read before
 * the first openblas_set_num_threads(1) below; under an address-space
 * limit the program runs with OPENBLAS_NUM_THREADS=1 of cdp_cli.c's
 * making, and cdp_thread_blas_threads says what the count would have been */
static int default_threads(void)
{
	static int d;
	if (!d)
		d = cdp_thread_blas_threads();
	if (!d)
		d = openblas_get_num_threads();
	return d;
}

void cpu_set_threads(cdp_backend *be, int n)
{
	cpu_impl *im = be->impl;

	if (n <= 0)
		n = default_threads();
	if (n < 1)
		n = 1;
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	openblas_set_num_threads(1);
	if (im->pool_ok)
		pool_stop(&im->pool);
	im->pool_ok = pool_start(&im->pool, n - 1) == 0;
	if (!im->pool_ok) {
		pool_stop(&im->pool);
		im->pool_ok = pool_start(&im->pool, 0) == 0;
	}
	be->threads = n;
	/* new workers get scratch of the size already promised; should that
	 * fail, keep fewer threads rather than hand out missing buffers (and
	 * no worker whose number has none) */
	while (cpu_scratch_reserve(be, 0) < 0 && be->threads > 1)
		be->threads--;
	if (be->threads < n && im->pool_ok) {
		pool_stop(&im->pool);
		im->pool_ok = pool_start(&im->pool, be->threads - 1) == 0;
		if (!im->pool_ok) {
			pool_stop(&im->pool);
			im->pool_ok = pool_start(&im->pool, 0) == 0;
		}
	}
}

void cpu_destroy(cdp_backend *be)
{
	cpu_impl *im;

	if (!be)
		return;
	im = be->impl;
	if (im && im->pool_ok)
		pool_stop(&im->pool);
	if (im) {
		scratch_free(im);
		cpu_wino_cache_free(be);
	}
	free(im);
	free(be);
}
