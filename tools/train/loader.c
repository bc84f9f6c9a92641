/* loader.c: the training data loader (loader.h).
 *
 * Threads: the caller, one prefetch thread, and threads-1 helpers. Shared
 * state (the ring of two slots, counters, the epoch) is under `mu`; the
 * prefetch thread fills a slot outside the lock, with `busy` set so that a
 * restart waits for it and a generation counter so that its result is
 * dropped when the epoch changed meanwhile. The helpers only decode: all
 * LMDB lookups happen at open (one long read txn), so no txn is shared
 * between threads.
 *
 * Not done here: MPI (the caller passes rank and j), GPU upload (the caller
 * copies the host batch, and with opts.raw prepares it on the device).
 */
#include "loader_int.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_rng.h"
#include "cdp_thread.h"

#define RA_MIN_VALUE (128u << 10) /* see cdp_loader_readahead_auto */

void cdp_loader_opts_init(cdp_loader_opts *o)
{
	memset(o, 0, sizeof *o);
	o->nranks = 1;
	o->batch = 1;
	o->threads = 1;
	o->mode = CDP_LOAD_POOL;
	o->readahead = CDP_RA_AUTO;
}

/* Measured in bench/loader.sh (cold random reads through the loader, pools
 * in and 3x beyond the page cache): with MADV_WILLNEED of the next batch,
 * read-around adds nothing at any value size and wastes the cache when the
 * pool does not fit; without it, page-at-a-time faults are 6-12x slower for
 * a pool that fits, while read-around thrashes for small values of a pool
 * that does not (50x slower at 3 KB), and breaks even near 128 KiB. */
int cdp_loader_readahead_auto(size_t value_size, int willneed)
{
	if (willneed)
		return CDP_RA_OFF;
	return value_size >= RA_MIN_VALUE ? CDP_RA_ON : CDP_RA_OFF;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- faults of the map ---------------------------------------------------- */

/* A pool's data.mdb that shrinks while it is mapped (truncate(1), or cp(1)
 * of another pool onto it, which truncates first) turns every read of a
 * page beyond its new end into SIGBUS, in whichever loader thread reads
 * it. Checking the file's size before each batch would leave the race
 * between that check and the read; so each sample's read from the map
 * runs with this thread's jump armed, and the handler jumps back out of a
 * fault there: the sample fails with LOADER_FAULT and the loader stops.
 * SA_NODEFER leaves SIGBUS unblocked after the jump, so the read needs no
 * signal mask saved (sigsetjmp(.., 0), no system call a sample). A fault
 * anywhere else gets the handler that was there before (Open MPI's, or the
 * default), as if this one were not installed. */
static __thread sigjmp_buf *fault_jump;
static struct sigaction fault_prev;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static int fault_rc;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *j = fault_jump;

	if (j) {
		fault_jump = NULL;
		siglongjmp(*j, 1);
	}
	/* not a read of ours: the earlier handler takes this fault and the
	 * next, the instruction faulting again on return */
	if (fault_prev.sa_flags & SA_SIGINFO)
		fault_prev.sa_sigaction(sig, si, uc);
	else
		sigaction(SIGBUS, &fault_prev, NULL);
}

static void fault_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &fault_prev) != 0)
		fault_rc = errno;
}

int cdp_loader_fault_init(void)
{
	pthread_once(&fault_once, fault_install);
	return fault_rc;
}

/* ---- samples ------------------------------------------------------------- */

static int known_bad(cdp_loader *l, size_t k)
{
	return __atomic_load_n(&l->bad[k], __ATOMIC_RELAXED);
}

/* cdp_loader_load_sample with this thread's jump armed (see above). A
 * sample cut off by the jump leaves the worker's buffers as they were;
 * the loader reads no sample after it. */
static int load_guarded(cdp_loader *l, worker *w, size_t k, slot *s, int i)
{
	sigjmp_buf jump;
	int rc;

	if (l->o.mode != CDP_LOAD_POOL)
		return cdp_loader_load_sample(l, w, k, s, i);
	if (sigsetjmp(jump, 0) != 0)
		return LOADER_FAULT;
	fault_jump = &jump;
	rc = cdp_loader_load_sample(l, w, k, s, i);
	fault_jump = NULL;
	return rc;
}

/* Sample i of s, replacing a bad record by the rule in loader.h (a fault
 * is no bad record: nothing after it can be read either). */
static int fill_sample(cdp_loader *l, worker *w, slot *s, int i)
{
	size_t k = s->index[i], tries;
	int rc = known_bad(l, k) ? CDP_ECRC : load_guarded(l, w, k, s, i);

	if (rc == 0 || rc == LOADER_FAULT || !l->o.skip_bad)
		return rc;
	__atomic_store_n(&l->bad[k], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->skipped, 1, __ATOMIC_RELAXED);
	if (l->o.val) {
		cdp_loader_blank_sample(l, s, i);
		return 0;
	}
	for (tries = 1; tries < l->N; tries++) {
		k = l->order[(s->pos[i] + tries) % l->N];
		if (known_bad(l, k))
			continue;
		if ((rc = load_guarded(l, w, k, s, i)) == 0) {
			s->index[i] = k;
			return 0;
		}
		if (rc == LOADER_FAULT)
			return rc;
		__atomic_store_n(&l->bad[k], 1, __ATOMIC_RELAXED);
	}
	return rc ? rc : CDP_ECRC;   /* every record is bad */
}

/* Samples [n*id/T, n*(id+1)/T) of the gang's slot; keeps the first error. */
static void work_range(cdp_loader *l, worker *w, slot *s)
{
	int lo = (int)((long)s->n * w->id / l->T), hi = (int)((long)s->n * (w->id + 1) / l->T);

	w->rc = 0;
	for (int i = lo; i < hi && !w->rc; i++) {
		w->after = i + 1 < hi ? &l->val[s->index[i + 1]] : NULL;
		if ((w->rc = fill_sample(l, w, s, i)) != 0) {
			w->bad_i = i;
			w->bad_k = s->index[i];
		}
	}
}

void *cdp_loader_helper_main(void *arg)
{
	worker *w = arg;
	cdp_loader *l = w->l;
	uint64_t seen = 0;

	cdp_thread_name("cdp-load", (int)(w - l->wk));
	pthread_mutex_lock(&l->gmu);
	for (;;) {
		while (!l->gquit && l->ggen == seen)
			pthread_cond_wait(&l->gcv_go, &l->gmu);
		if (l->gquit)
			break;
		seen = l->ggen;
		pthread_mutex_unlock(&l->gmu);
		work_range(l, w, l->gslot);
		pthread_mutex_lock(&l->gmu);
		if (--l->gpending == 0)
			pthread_cond_signal(&l->gcv_done);
	}
	pthread_mutex_unlock(&l->gmu);
	return NULL;
}

/* ---- batches ------------------------------------------------------------ */

/* Key index of sample i of step `step` (training: also its position). */
static int batch_keys(const cdp_loader *l, uint64_t step, size_t *index, size_t *pos)
{
	size_t b = (size_t)l->o.batch, r = (size_t)l->o.rank, j = (size_t)l->o.nranks;
	int n = 0;

	for (size_t i = 0; i < b; i++) {
		if (l->o.val) {
			size_t local = step * b + i;
			if (local >= l->val_count)
				break;
			index[n++] = r + local * j;
		} else {
			size_t p = step * l->B + r * b + i;
			if (pos)
				pos[n] = p % l->N;
			index[n++] = l->order[p % l->N];
		}
	}
	return n;
}

/* MADV_WILLNEED on the page-aligned ranges of step's records. */
static void advise_step(cdp_loader *l, uint64_t step)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	int n;

	if (l->o.mode != CDP_LOAD_POOL || l->o.no_willneed || step >= l->steps)
		return;
	n = batch_keys(l, step, l->adv, NULL);
	for (int i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)l->val[l->adv[i]].mv_data;
		uintptr_t lo = a & ~(pg - 1);
		uintptr_t hi = (a + l->val[l->adv[i]].mv_size + pg - 1) & ~(pg - 1);
		madvise((void *)lo, hi - lo, MADV_WILLNEED);   /* advice only */
	}
}

static void fill(cdp_loader *l, slot *s, uint64_t step, int first)
{
	s->step = step;
	s->skipped = 0;
	s->rc = 0;
	s->n = batch_keys(l, step, s->index, s->pos);
	if (first)
		advise_step(l, step);
	advise_step(l, step + 1);
	if (l->T > 1) {
		pthread_mutex_lock(&l->gmu);
		l->gslot = s;
		l->gpending = l->T - 1;
		l->ggen++;
		pthread_cond_broadcast(&l->gcv_go);
		pthread_mutex_unlock(&l->gmu);
	}
	work_range(l, &l->wk[0], s);
	if (l->T > 1) {
		pthread_mutex_lock(&l->gmu);
		while (l->gpending)
			pthread_cond_wait(&l->gcv_done, &l->gmu);
		pthread_mutex_unlock(&l->gmu);
	}
	/* the first failing sample in batch order, whatever thread found it */
	for (int t = 0, best = s->n; t < l->T; t++)
		if (l->wk[t].rc && l->wk[t].bad_i < best) {
			best = l->wk[t].bad_i;
			s->rc = l->wk[t].rc;
			s->errk = l->wk[t].bad_k;
		}
}

void *cdp_loader_prefetch_main(void *arg)
{
	cdp_loader *l = arg;

	cdp_thread_name("cdp-prefetch", -1);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		slot *s;
		uint64_t step, gen;
		int first;

		while (!l->quit && !(l->active && l->next_step < l->steps &&
		                     l->filled - l->released < NSLOT))
			pthread_cond_wait(&l->cv_prod, &l->mu);
		if (l->quit)
			break;
		s = &l->slot[l->filled % NSLOT];
		step = l->next_step++;
		first = step == l->first_step;
		gen = l->gen;
		l->busy = 1;
		pthread_mutex_unlock(&l->mu);
		fill(l, s, step, first);
		pthread_mutex_lock(&l->mu);
		l->busy = 0;
		if (gen == l->gen) {
			l->filled++;
			if (s->rc)
				l->active = 0;   /* nothing after a bad record */
		}
		pthread_cond_broadcast(&l->cv_cons);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int cdp_loader_start_epoch(cdp_loader *l, uint64_t epoch, uint64_t start_step)
{
	cdp_rng rng;

	if (start_step > l->steps)
		return CDP_EINVAL;
	pthread_mutex_lock(&l->mu);
	l->gen++;
	l->active = 0;
	while (l->busy)
		pthread_cond_wait(&l->cv_cons, &l->mu);
	pthread_mutex_unlock(&l->mu);

	/* the prefetch thread is idle and stays so until active is set */
	for (size_t i = 0; i < l->N; i++)
		l->order[i] = i;
	if (!l->o.val) {
		cdp_rng_seed(&rng, cdp_rng_derive(l->o.seed, epoch, 0));
		cdp_rng_shuffle_size(&rng, l->order, l->N);
	}
	pthread_mutex_lock(&l->mu);
	l->epoch = epoch;
	l->next_step = l->first_step = start_step;
	l->filled = l->consumed = l->released = 0;
	l->held = l->err = 0;
	l->errmsg[0] = l->errkey[0] = '\0';
	l->started = l->active = 1;
	pthread_cond_broadcast(&l->cv_prod);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

/* The offset in its file of the mapped byte at p, from the mapping that
 * holds it (/proc/self/maps: start-end perms offset ...), or -1. LMDB does
 * not say where it mapped data.mdb. */
static long long file_offset(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long long lo, hi, off;
	uintptr_t a = (uintptr_t)p;
	char line[512];
	long long at = -1;

	while (f && at < 0 && fgets(line, sizeof line, f))
		if (sscanf(line, "%llx-%llx %*s %llx", &lo, &hi, &off) == 3 && a >= lo && a < hi)
			at = (long long)(a - lo + off);
	if (f)
		fclose(f);
	return at;
}

/* errmsg for a fault reading record k: a shrink only when the file now ends
 * before the record; its size now and where the
 * record ends in it */
static void fault_message(cdp_loader *l, size_t k)
{
	char path[4200];
	struct stat st;
	long long end = file_offset(l->val[k].mv_data);

	snprintf(path, sizeof path, "%s/data.mdb", l->pool_path);
	if (end >= 0)
		end += (long long)l->val[k].mv_size;
	if (stat(path, &st) == 0 && end >= 0 && (long long)st.st_size < end)
		snprintf(l->errmsg, sizeof l->errmsg, "'%s': data.mdb shrank to %lld bytes while "
		         "training (record '%s' ends at byte %lld): the pool changed under the run",
		         l->pool_path, (long long)st.st_size, l->errkey, end);
	else if (stat(path, &st) == 0)
		/* the file holds the record: its pages were unmapped or remapped,
		 * whatever the file's size did (a grown pool is no shrink) */
		snprintf(l->errmsg, sizeof l->errmsg, "'%s': data.mdb (now %lld bytes) was "
		         "remapped while training (record '%s' cannot be read): the pool changed "
		         "under the run", l->pool_path, (long long)st.st_size, l->errkey);
	else
		snprintf(l->errmsg, sizeof l->errmsg, "'%s': data.mdb changed while training (record "
		         "'%s' cannot be read): the pool changed under the run", l->pool_path, l->errkey);
}

int cdp_loader_next(cdp_loader *l, cdp_batch *b)
{
	double t0 = now_s();
	slot *s;
	int rc;

	memset(b, 0, sizeof *b);
	pthread_mutex_lock(&l->mu);
	if (l->held) {
		l->released++;
		l->held = 0;
		pthread_cond_broadcast(&l->cv_prod);
	}
	if (!l->started || l->err) {
		rc = l->started ? l->err : CDP_EINVAL;
		goto out;
	}
	if (l->first_step + l->consumed >= l->steps) {
		rc = CDP_EEOF;
		goto out;
	}
	while (l->consumed == l->filled)
		pthread_cond_wait(&l->cv_cons, &l->mu);
	s = &l->slot[l->consumed % NSLOT];
	l->consumed++;
	if ((rc = s->rc) != 0) {
		l->released++;
		snprintf(l->errkey, sizeof l->errkey, "%s", l->kl.keys[s->errk]);
		if (rc == LOADER_FAULT) {
			rc = CDP_ETRUNC;
			l->fault = 1;
			fault_message(l, s->errk);
		} else {
			snprintf(l->errmsg, sizeof l->errmsg, "'%s': record '%s': %s",
			         l->pool_path, l->errkey, cdp_strerror(rc));
		}
		l->err = rc;
		goto out;
	}
	l->held = 1;
	b->n = s->n;
	b->c = l->C;
	b->h = l->oh;
	b->w = l->ow;
	b->image = s->image;
	b->label = s->label;
	b->target = s->target;
	b->targets = l->NT;
	if (l->o.raw) {
		b->raw = s->raw;
		b->dtype = l->info.dtype;
		b->in_h = l->H;
		b->in_w = l->W;
		b->aug = s->aug;
		for (int i = 0; i < s->n && !b->valid; i++)
			if (s->invalid[i])
				b->valid = s->valid;
	}
	b->index = s->index;
	b->epoch = l->epoch;
	b->step = s->step;
	b->skipped = s->skipped;
	b->wait_s = now_s() - t0;
	l->batches++;
	l->skipped += s->skipped;
	l->wait_total += b->wait_s;
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

const char *cdp_loader_error(const cdp_loader *l) { return l->errmsg; }
int cdp_loader_faulted(const cdp_loader *l) { return l->fault; }
const char *cdp_loader_errkey(const cdp_loader *l) { return l->errkey; }
const size_t *cdp_loader_order(const cdp_loader *l) { return l->order; }

const char *cdp_loader_key(const cdp_loader *l, size_t k)
{
	return k < l->N ? l->kl.keys[k] : NULL;
}

void cdp_loader_get_info(const cdp_loader *l, cdp_loader_info *info)
{
	memset(info, 0, sizeof *info);
	info->count = l->N;
	info->keys_seed = l->kl.seed;
	info->keys_crc = l->keys_crc;
	info->steps = l->steps;
	info->batch = l->o.batch;
	info->c = l->C;
	info->h = l->oh;
	info->w = l->ow;
	info->label_kind = l->info.label_kind;
	info->ignore = l->ignore;
	info->value_size = l->N ? l->val[0].mv_size : 0;
	info->readahead = l->readahead;
	info->conv_isa = l->std_u8_isa;
	info->pool = &l->info;
	info->mean = l->mean;
	info->inv = l->inv;
	info->targets = l->NT;
	info->tmean = l->tmean;
	info->tinv = l->tinv;
	info->raw = l->o.raw;
	info->in_h = l->H;
	info->in_w = l->W;
	info->raw_size = l->raw_size;
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	info->skipped = l->skipped;
	info->batches = l->batches;
	info->wait_s = l->wait_total;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}


