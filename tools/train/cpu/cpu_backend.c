/* cpu_backend.c: the CPU backend's table, memory, BLAS-like ops, the
 * thread pool and the per-worker scratch memory.
 *
 * All parallelism is ours: the caller plus threads-1 workers that sleep on
 * a condition variable between jobs. A job is a range [0, n) whose indices
 * the threads claim in small runs from a shared counter, so a thread that
 * the machine's other work holds up leaves its share to the others (on a
 * shared machine a fixed split waits for the slowest thread at every op).
 * Which thread runs an index depends on timing, what fn(i) computes does
 * not: as long as fn(i) writes only what belongs to i the result is
 * deterministic. A GEMM is split into blocks of C, one per
 * worker, each computed single-threaded (by our kernels, cpu_gemm.c, or
 * OpenBLAS with openblas_set_num_threads(1) for the cases they do not
 * cover); the convolutions give each worker whole samples or row chunks
 * with their own im2col buffer, which keeps that buffer in cache
 * (cpu_conv.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "cpu.h"

typedef struct cpu_pool {
	pthread_mutex_t mu;
	pthread_cond_t start, done;
	pthread_t *th;
	int nworkers;            /* threads besides the caller */
	unsigned long gen;       /* bumped once per job */
	int open;                /* the job takes new workers */
	int active;              /* workers inside the job */
	int stop;
	void (*fn)(void *, int);
	void *ctx;
	int n, grain;
	atomic_int next;         /* the next index to claim */
} cpu_pool;

#define MAX_THREADS 256

typedef struct cpu_impl {
	cpu_pool pool;
	int pool_ok;
	/* scratch[t] (scratch_bytes each) belongs to job t of a parallel_for
	 * over be->threads jobs */
	float *scratch[MAX_THREADS];
	size_t scratch_bytes;
} cpu_impl;

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
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->gen == seen && !p->stop)
			pthread_cond_wait(&p->start, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		if (!p->open)
			continue;
		p->active++;
		pthread_mutex_unlock(&p->mu);
		run_claims(p);
		pthread_mutex_lock(&p->mu);
		if (--p->active == 0 && !p->open)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pool_stop(cpu_pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
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

/* Starts nworkers threads; on failure keeps the ones that started (the pool
 * then just uses fewer chunks). */
static int pool_start(cpu_pool *p, int nworkers)
{
	memset(p, 0, sizeof *p);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
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
	p->gen++;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->mu);

	run_claims(p);

	/* every index is claimed: wait for the workers still running theirs */
	pthread_mutex_lock(&p->mu);
	p->open = 0;
	while (p->active > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* ---- memory ---- */

void *cpu_alloc(cdp_backend *be, size_t bytes)
{
	void *p = NULL;

	if (bytes == 0)
		bytes = 64;
	if (posix_memalign(&p, 64, bytes) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

void cpu_free(cdp_backend *be, void *p) { free(p); }

void cpu_to_device(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

void cpu_to_host(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

void cpu_copy(cdp_backend *be, void *dst, const void *src, size_t bytes)
{
	if (dst != src)
		memmove(dst, src, bytes);
}

void cpu_sync(cdp_backend *be) { }

/* ---- per-worker scratch ---- */

static void scratch_free(cpu_impl *im)
{
	for (int t = 0; t < MAX_THREADS; t++) {
		free(im->scratch[t]);
		im->scratch[t] = NULL;
	}
}

/* Gives jobs 0..threads-1 `bytes` each (keeping the largest size asked
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

float *cpu_scratch(cdp_backend *be, int t)
{
	return ((cpu_impl *)be->impl)->scratch[t];
}

/* OpenBLAS's own count (OPENBLAS_NUM_THREADS or the cores), read before
 * the first openblas_set_num_threads(1) below */
static int default_threads(void)
{
	static int d;
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
	 * fail, keep fewer threads rather than hand out missing buffers */
	while (cpu_scratch_reserve(be, 0) < 0 && be->threads > 1)
		be->threads--;
}

void cpu_destroy(cdp_backend *be)
{
	cpu_impl *im;

	if (!be)
		return;
	im = be->impl;
	if (im && im->pool_ok)
		pool_stop(&im->pool);
	if (im)
		scratch_free(im);
	free(im);
	free(be);
}

/* ---- BLAS-like ---- */

/* alpha = 1 goes to our kernels (cpu_gemm.c), which beat OpenBLAS's
 * packing for the thin products of convolutions; the rest to OpenBLAS. */
void cpu_sgemm1(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (alpha == 1.0f && !tb) {
		cpu_kgemm_nn(m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, beta, c, ldc);
		return;
	}
	if (alpha == 1.0f && !ta && (beta == 0.0f || beta == 1.0f)) {
		if (beta == 0.0f)
			for (int i = 0; i < m; i++)
				memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof *c);
		cpu_kgemm_nt(m, n, k, a, lda, b, ldb, c, ldc);
		return;
	}
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
	            tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
	            b, ldb, beta, c, ldc);
}

typedef struct gemm_job {
	int ta, tb, m, n, k, lda, ldb, ldc, by_rows, parts;
	float alpha, beta;
	const float *a, *b;
	float *c;
} gemm_job;

/* Part t of C: a block of rows (or columns), a multiple of 16 wide. */
static void gemm_part(void *ctx, int t)
{
	const gemm_job *g = ctx;
	int len = g->by_rows ? g->m : g->n;
	int step = ((len + g->parts - 1) / g->parts + 15) / 16 * 16;
	int lo = t * step, hi = lo + step < len ? lo + step : len;

	if (lo >= hi)
		return;
	if (g->by_rows)
		cpu_sgemm1(g->ta, g->tb, hi - lo, g->n, g->k, g->alpha,
		           g->a + (size_t)lo * (g->ta ? 1 : g->lda), g->lda, g->b, g->ldb,
		           g->beta, g->c + (size_t)lo * g->ldc, g->ldc);
	else
		cpu_sgemm1(g->ta, g->tb, g->m, hi - lo, g->k, g->alpha, g->a, g->lda,
		           g->b + (size_t)lo * (g->tb ? g->ldb : 1), g->ldb,
		           g->beta, g->c + lo, g->ldc);
}

/* Every element of C is computed by one single-threaded sgemm call, and
 * the split depends only on the shape and the thread count. */
void cpu_gemm(cdp_backend *be, int ta, int tb, int m, int n, int k,
              float alpha, const float *a, int lda, const float *b, int ldb,
              float beta, float *c, int ldc)
{
	gemm_job g = { ta, tb, m, n, k, lda, ldb, ldc, m > n, be->threads, alpha, beta, a, b, c };

	if (be->threads <= 1 || (double)m * n * k < 1e6 || (m < 32 && n < 32)) {
		cpu_sgemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	cpu_parallel_for(be, be->threads, gemm_part, &g);
}

/* Elementwise ops over large arrays are split into blocks of this many
 * floats; smaller ones run inline. */
#define ELEM_BLOCK 65536

typedef struct elem_job {
	float *x; const float *cx; float v; size_t n;
} elem_job;

static void fill_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo = (size_t)i * ELEM_BLOCK, hi = lo + ELEM_BLOCK;
	if (hi > j->n)
		hi = j->n;
	for (size_t t = lo; t < hi; t++)
		j->x[t] = j->v;
}

static void scale_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo = (size_t)i * ELEM_BLOCK, hi = lo + ELEM_BLOCK;
	if (hi > j->n)
		hi = j->n;
	for (size_t t = lo; t < hi; t++)
		j->x[t] *= j->v;
}

static void axpy_block(void *ctx, int i)
{
	elem_job *j = ctx;
	size_t lo = (size_t)i * ELEM_BLOCK, hi = lo + ELEM_BLOCK;
	if (hi > j->n)
		hi = j->n;
	for (size_t t = lo; t < hi; t++)
		j->x[t] += j->v * j->cx[t];
}

static int nblocks(size_t n) { return (int)((n + ELEM_BLOCK - 1) / ELEM_BLOCK); }

void cpu_fill(cdp_backend *be, float *x, float v, size_t n)
{
	elem_job j = { x, NULL, v, n };
	if (v == 0.0f && n < ELEM_BLOCK) {
		memset(x, 0, n * sizeof *x);
		return;
	}
	cpu_parallel_for(be, nblocks(n), fill_block, &j);
}

void cpu_scale(cdp_backend *be, float *x, float a, size_t n)
{
	elem_job j = { x, NULL, a, n };
	cpu_parallel_for(be, nblocks(n), scale_block, &j);
}

void cpu_axpy(cdp_backend *be, float a, const float *x, float *y, size_t n)
{
	elem_job j = { y, x, a, n };
	cpu_parallel_for(be, nblocks(n), axpy_block, &j);
}

/* Single-threaded on purpose: the result must not depend on the thread
 * count, and the parameter block is small next to a training step. */
double cpu_sumsq(cdp_backend *be, const float *x, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

cdp_backend *cdp_backend_cpu(int threads)
{
	cdp_backend *be = calloc(1, sizeof *be);
	cpu_impl *im = calloc(1, sizeof *im);

	if (!be || !im) {
		free(be);
		free(im);
		return NULL;
	}
	be->name = "cpu";
	be->impl = im;

	be->alloc = cpu_alloc;
	be->free = cpu_free;
	be->to_device = cpu_to_device;
	be->to_host = cpu_to_host;
	be->copy = cpu_copy;
	be->sync = cpu_sync;
	be->set_threads = cpu_set_threads;
	be->destroy = cpu_destroy;

	be->gemm = cpu_gemm;
	be->fill = cpu_fill;
	be->scale = cpu_scale;
	be->axpy = cpu_axpy;
	be->sumsq = cpu_sumsq;

	be->conv_workspace = cpu_conv_workspace;
	be->conv_fwd = cpu_conv_fwd;
	be->conv_bwd_data = cpu_conv_bwd_data;
	be->conv_bwd_filter = cpu_conv_bwd_filter;

	be->bn_fwd_train = cpu_bn_fwd_train;
	be->bn_fwd_infer = cpu_bn_fwd_infer;
	be->bn_bwd = cpu_bn_bwd;
	be->act_fwd = cpu_act_fwd;
	be->act_bwd = cpu_act_bwd;
	be->maxpool_fwd = cpu_maxpool_fwd;
	be->maxpool_bwd = cpu_maxpool_bwd;
	be->avgpool_fwd = cpu_avgpool_fwd;
	be->avgpool_bwd = cpu_avgpool_bwd;
	be->upsample_fwd = cpu_upsample_fwd;
	be->upsample_bwd = cpu_upsample_bwd;
	be->chan_copy = cpu_chan_copy;
	be->chan_slice = cpu_chan_slice;
	be->dropout_fwd = cpu_dropout_fwd;
	be->dropout_bwd = cpu_dropout_bwd;
	be->gap_fwd = cpu_gap_fwd;
	be->gap_bwd = cpu_gap_bwd;
	be->bias_add = cpu_bias_add;
	be->bias_grad = cpu_bias_grad;
	be->add = cpu_add;

	be->softmax_ce = cpu_softmax_ce;
	be->bce_logits = cpu_bce_logits;
	be->dice_logits = cpu_dice_logits;
	be->argmax = cpu_argmax;
	be->confusion = cpu_confusion;

	be->sgd_step = cpu_sgd_step;
	be->adamw_step = cpu_adamw_step;

	be->device = -1;
	cpu_data_ops(be);
	cpu_set_threads(be, threads);
	return be;
}
