/* dist_ring.c: the reductions in flight behind dist.h - the ring all-reduce
 * (a non-blocking state machine), MPI_Iallreduce ops, the progress engine
 * that drives both, cdp_dist_allreduce / cdp_dist_average, the chunk
 * setting, and the gradient buckets with their overlap calls
 * (cdp_dist_buckets .. cdp_dist_wait_all). Start-up, the other settings,
 * the watchdog, the blocking collectives and every MPI call itself are in
 * dist_mpi.c; this file reaches MPI through the checked calls of
 * dist_int.h. On device buffers (dist.h) the blocking reductions and the
 * buckets hand over to dist_dev.c (staged through pinned host memory, then
 * the code here) or dist_nccl.c at the few places marked dist_dev_mode.
 *
 * Every reduction in flight is an `op` on one list in start order. An mpi op
 * is an MPI_Iallreduce (split into parts of at most INT_MAX floats). A ring
 * op is a state machine over two FIFOs of at most RING_WIN requests: sends
 * to the right neighbour and receives from the left, both in (step, chunk)
 * order, all with the op's own tag, so MPI's in-order matching pairs them.
 * Step k (0 <= k < 2(j-1)) sends segment (r - k) mod j and receives segment
 * (r - k - 1) mod j; steps below j-1 receive into a scratch slot and add it
 * in (scatter-reduce), later steps receive in place (all-gather). The only
 * ordering rules:
 *  - send (k, c) waits until receive (k-1, c) is retired: it is the chunk
 *    just reduced (or gathered);
 *  - an in-place receive (k, c) waits until send (k+1-j, c), which read the
 *    same chunk of the same segment, is retired. (The data flow already
 *    implies that the right neighbour has received that chunk; the rule
 *    keeps us legal MPI: no receive into the buffer of a pending send.)
 * Both point to earlier (step, chunk) positions, so every rank can always
 * move, and a chunk goes on to the next step while later chunks of the same
 * step are still on the wire (the pipeline). Waiting blocks in MPI_Waitany
 * over every outstanding request, never on one request, because the request
 * that unblocks a peer may be any of ours.
 *
 * Compressed ops (dist.h, "Compression"): the op's float32 buffer is divided
 * by j and rounded into its 16-bit wire copy `w` when it starts; the ring
 * sends from w, receives partial sums as 16-bit values into the scratch
 * slot, adds them widened into the float32 buffer and rounds the chunk back
 * into w (the next step sends it), gathers into w in place, and at the end
 * widens w into the buffer; an mpi op reduces w under the 16-bit op.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cdp_error.h"
#include "dist_int.h"
#include "cdp_thread.h"

#define RING_WIN 4          /* chunks in flight per direction per ring op */
#define RING_ACTIVE 4       /* ring ops progressing at once; the rest queue */
#define TAG_SPAN 30000      /* the standard promises tags up to 32767 */
#define MPI_PARTS 8         /* an mpi bucket may hold 8 * INT_MAX floats */

typedef struct op op;
struct op {
	cdp_dist_algo algo;
	float *buf;
	size_t n;
	int average, done;
	int comp;                     /* cdp_dist_comp; not NONE: w is the wire */
	uint16_t *w;                  /* n 16-bit values */
	double *done_at;              /* a bucket's: when its completion was seen */
	op *next;                     /* the in-flight list */
	MPI_Request mreq[MPI_PARTS];  /* mpi: one per part */
	int nmreq;
	/* ring */
	int tag, slot, nsteps;        /* slot: scratch in use, -1 while queued */
	size_t q, rem;                /* segment s holds q + (s < rem) floats */
	int sk, rk, sdk, rdk;         /* step of the next send/recv to post (sk,
	                               * rk) and to retire (sdk, rdk) */
	size_t sc, rc, sdc, rdc;      /* ... and its chunk */
	int s0, ns, r0, nr;           /* FIFO heads and lengths */
	MPI_Request sreq[RING_WIN], rreq[RING_WIN];
};

static struct {
	size_t chunk;                 /* floats per ring message */
	unsigned seq;                 /* ring ops started, for tags */
	op *head, *tail;              /* in flight, in start order */
	float *scratch[RING_ACTIVE];  /* RING_WIN * chunk floats each, lazily */
	int slot_busy[RING_ACTIVE];
	/* buckets */
	float *bbuf;
	uint16_t *bwire;                /* compressed: the block's 16-bit copy */
	int comp;                       /* cdp_dist_set_compress, for new buckets */
	int nb, nl, overlap, average, bcomp;
	cdp_dist_algo balgo;
	size_t *boff, *bn;
	int *bl0, *bl1, *lbucket, *bleft;
	int bmode;                      /* dist_dev_mode of the buckets */
	unsigned char *ldone, *bstate;  /* bstate: 0 idle, 1 started */
	op *bops;
	double *bt0, *bt1;              /* each bucket's last start and completion */
	unsigned bstarted;              /* buckets started, ever */
	double busy_since;              /* a bucket in flight since then; 0: none */
	double busy_seen;               /* the exit of its latest bucket call */
	int threaded;                   /* the buckets go to the communication thread */
} st = { .chunk = 262144 };

/* The thread's sleep when nothing moved. Each wake takes the core from
 * backward: at 100 us the U-Net's backward ran 5-8% slower against
 * --no-overlap; 400 us gave 7% more samples/s on 2 hosts at 1 and
 * 10 Gbit/s (5 of 5 alternating pairs) with the same exposed time, and
 * 1 ms no more (doc/PERFORMANCE.md; configure CPPFLAGS=-DPOLL_NS=N
 * builds another to measure). */
#ifndef POLL_NS
#define POLL_NS 400000
#endif

/* The communication thread (dist.h, "Buckets and overlap"). While `active`
 * (main thread's flag: buckets handed over and not yet joined) the thread
 * owns MPI, the op list and the ring's state; the main thread only appends
 * bucket numbers to q under mu. Everything else of st is the main
 * thread's. */
static struct {
	pthread_t th;
	int on, stop, active;
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	int *q, qn, qhead;          /* buckets to start: q[qhead .. qn) */
	int busy;                   /* the thread has ops in flight */
	int inpass;                 /* ... and is working on them, unlocked */
	int yield;                  /* the main thread takes MPI back */
	double last_done;           /* when it saw the last one finish */
	unsigned char *fin;         /* bucket b reduced this step (for
	                             * cdp_dist_bucket_wait), set by the thread */
} ct = { .mu = PTHREAD_MUTEX_INITIALIZER };

int dist_busy(void) { return ct.active || st.head != NULL; }

/* In flight, as the main thread may ask. */
static int inflight(void) { return ct.active || st.head != NULL; }

static void scratch_free(void)
{
	for (int i = 0; i < RING_ACTIVE; i++) {
		free(st.scratch[i]);
		st.scratch[i] = NULL;
	}
}

int cdp_dist_set_compress(cdp_dist_comp comp)
{
	if ((comp != CDP_DIST_COMP_NONE && comp != CDP_DIST_COMP_FP16 &&
	     comp != CDP_DIST_COMP_BF16) || dist_busy())
		return CDP_EINVAL;
	st.comp = comp;
	return 0;
}

int cdp_dist_set_chunk(size_t floats)
{
	if (floats < 1 || floats > INT_MAX / RING_WIN || st.head)
		return CDP_EINVAL;
	if (floats != st.chunk)
		scratch_free();
	st.chunk = floats;
	return 0;
}

/* ---- the ring state machine ------------------------------------------ */

static int seg_of(int k, int recv)
{
	int j = cdp_dist_size();

	return ((cdp_dist_rank() - k - recv) % j + j) % j;
}

static size_t seg_len(const op *o, int s) { return o->q + ((size_t)s < o->rem); }

static size_t seg_off(const op *o, int s)
{
	return (size_t)s * o->q + ((size_t)s < o->rem ? (size_t)s : o->rem);
}

static size_t nchunks(const op *o, int k, int recv)
{
	return (seg_len(o, seg_of(k, recv)) + st.chunk - 1) / st.chunk;
}

/* Moves (k, c) past chunks that do not exist (short or empty segments). */
static void pos_norm(const op *o, int recv, int *k, size_t *c)
{
	while (*k < o->nsteps && *c >= nchunks(o, *k, recv)) {
		(*k)++;
		*c = 0;
	}
}

static int before(int k1, size_t c1, int k2, size_t c2)
{
	return k1 < k2 || (k1 == k2 && c1 < c2);
}

/* Chunk c of the segment moved at step k: *len floats at buf + return. */
static size_t chunk_at(const op *o, int k, size_t c, int recv, int *len)
{
	int s = seg_of(k, recv);
	size_t left = seg_len(o, s) - c * st.chunk;

	*len = (int)(left < st.chunk ? left : st.chunk);
	return seg_off(o, s) + c * st.chunk;
}

/* dst += src, n floats: unrolled by 8 so that gcc -O2 (whose cost model
 * will not vectorize a loop of unknown length) packs it into SIMD adds. */
static void add_into(float *restrict dst, const float *restrict src, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		dst[i] += src[i], dst[i + 1] += src[i + 1];
		dst[i + 2] += src[i + 2], dst[i + 3] += src[i + 3];
		dst[i + 4] += src[i + 4], dst[i + 5] += src[i + 5];
		dst[i + 6] += src[i + 6], dst[i + 7] += src[i + 7];
	}
	for (; i < n; i++)
		dst[i] += src[i];
}

/* x[0..n) /= j: a division, not a multiplication by 1/j, so sum / j
 * exactly; unrolled as add_into */
static void div_by(float *restrict x, size_t n, float j)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		x[i] /= j, x[i + 1] /= j, x[i + 2] /= j, x[i + 3] /= j;
		x[i + 4] /= j, x[i + 5] /= j, x[i + 6] /= j, x[i + 7] /= j;
	}
	for (; i < n; i++)
		x[i] /= j;
}

static int ring_take_slot(op *o)
{
	int i;

	for (i = 0; i < RING_ACTIVE; i++)
		if (!st.slot_busy[i])
			break;
	if (i == RING_ACTIVE)
		return 0;
	if (!st.scratch[i] && !(st.scratch[i] = malloc(RING_WIN * st.chunk * sizeof(float))))
		cdp_dist_abort(1, "cannot allocate %zu bytes for the ring reduction: %s",
		               RING_WIN * st.chunk * sizeof(float), strerror(ENOMEM));
	st.slot_busy[i] = 1;
	o->slot = i;
	return 1;
}

/* Retires what has completed and posts what may be posted; returns 1 if
 * anything moved. */
static int ring_advance(op *o)
{
	int j = cdp_dist_size(), moved = 0, again = 1, len;
	size_t off;
	void *tmp;

	if (o->slot < 0 && !ring_take_slot(o))
		return 0;
	while (again) {
		again = 0;
		while (o->nr > 0) {
			if (!dist_test(&o->rreq[o->r0]))
				break;
			if (o->rdk < j - 1) {   /* scatter-reduce: add the partial sum */
				off = chunk_at(o, o->rdk, o->rdc, 1, &len);
				if (o->comp)    /* and round it for the next step's send */
					dist_comp_accum(o->comp, o->buf + off,
					                (uint16_t *)st.scratch[o->slot] +
					                (size_t)o->r0 * st.chunk, o->w + off, (size_t)len);
				else
					add_into(o->buf + off, st.scratch[o->slot] +
					         (size_t)o->r0 * st.chunk, (size_t)len);
				/* the last add made this rank's segment whole: the
				 * owner averages it before the all-gather sends it,
				 * so nobody makes a pass over the block afterwards */
				if (!o->comp && o->average && o->rdk == j - 2)
					div_by(o->buf + off, (size_t)len, (float)j);
			}
			o->r0 = (o->r0 + 1) % RING_WIN;
			o->nr--;
			o->rdc++;
			pos_norm(o, 1, &o->rdk, &o->rdc);
			again = 1;
		}
		while (o->ns > 0) {
			if (!dist_test(&o->sreq[o->s0]))
				break;
			o->s0 = (o->s0 + 1) % RING_WIN;
			o->ns--;
			o->sdc++;
			pos_norm(o, 0, &o->sdk, &o->sdc);
			again = 1;
		}
		while (o->nr < RING_WIN && o->rk < o->nsteps &&
		       (o->rk < j - 1 || before(o->rk + 1 - j, o->rc, o->sdk, o->sdc))) {
			int i = (o->r0 + o->nr) % RING_WIN;
			off = chunk_at(o, o->rk, o->rc, 1, &len);
			if (o->rk < j - 1)
				tmp = o->comp ? (void *)((uint16_t *)st.scratch[o->slot] + (size_t)i * st.chunk)
				              : (void *)(st.scratch[o->slot] + (size_t)i * st.chunk);
			else
				tmp = o->comp ? (void *)(o->w + off) : (void *)(o->buf + off);
			dist_irecv(tmp, len, o->comp, o->tag, &o->rreq[i]);
			o->nr++;
			o->rc++;
			pos_norm(o, 1, &o->rk, &o->rc);
			again = 1;
		}
		while (o->ns < RING_WIN && o->sk < o->nsteps &&
		       (o->sk == 0 || before(o->sk - 1, o->sc, o->rdk, o->rdc))) {
			int i = (o->s0 + o->ns) % RING_WIN;
			off = chunk_at(o, o->sk, o->sc, 0, &len);
			if (o->comp)
				dist_isend(o->w + off, len, o->comp, o->tag, &o->sreq[i]);
			else
				dist_isend(o->buf + off, len, 0, o->tag, &o->sreq[i]);
			dist_stats.ring_bytes += (uint64_t)len * (o->comp ? sizeof(uint16_t) : sizeof(float));
			o->ns++;
			o->sc++;
			pos_norm(o, 0, &o->sk, &o->sc);
			again = 1;
		}
		moved |= again;   /* every branch above sets again after a move */
	}
	if (o->rdk == o->nsteps && o->sdk == o->nsteps) {
		st.slot_busy[o->slot] = 0;
		o->done = 1;
	}
	return moved;
}

/* ---- ops in flight ---------------------------------------------------- */

static void op_finish(op *o)
{
	int size = cdp_dist_size();

	/* compressed: divided before, the wire holds the result; a ring op's
	 * owners divided their segments (ring_advance), and the all-gather
	 * copied sum / j, the same bits as dividing here */
	if (o->comp)
		dist_comp_unpack(o->comp, o->w, o->buf, o->n);
	else if (o->average && size > 1 && o->algo == CDP_DIST_MPI)
		div_by(o->buf, o->n, (float)size);
	if (o->done_at)
		*o->done_at = dist_now();
	dist_stats.reductions++;
}

/* Starts a reduction of buf[0..n); an mpi op is posted now, a ring op when
 * a scratch slot is free (in start order). comp not NONE: through the 16-bit
 * wire w[0..n). */
static void op_start(op *o, float *buf, size_t n, cdp_dist_algo algo, int average, int comp,
                     uint16_t *w)
{
	int size = cdp_dist_size();

	memset(o, 0, sizeof *o);
	o->algo = algo;
	o->buf = buf;
	o->n = n;
	o->average = average;
	o->slot = -1;
	if (size == 1 || n == 0) {
		o->done = 1;
		dist_stats.reductions++;
		return;
	}
	if (comp) {
		o->comp = comp;
		o->w = w;
		dist_comp_pack(comp, buf, w, n, average ? (float)size : 1.0f);
	}
	if (algo == CDP_DIST_MPI) {
		for (size_t off = 0; off < n; off += INT_MAX) {
			size_t part = n - off < INT_MAX ? n - off : INT_MAX;
			dist_iallreduce(comp ? (void *)(w + off) : (void *)(buf + off), (int)part, comp,
			                &o->mreq[o->nmreq++]);
		}
	} else {
		o->tag = (int)(st.seq++ % TAG_SPAN);
		o->nsteps = 2 * (size - 1);
		o->q = n / (size_t)size;
		o->rem = n % (size_t)size;
		pos_norm(o, 0, &o->sk, &o->sc);
		pos_norm(o, 1, &o->rk, &o->rc);
		o->sdk = o->sk, o->sdc = o->sc;
		o->rdk = o->rk, o->rdc = o->rc;
	}
	if (st.tail)
		st.tail->next = o;
	else
		st.head = o;
	st.tail = o;
}

/* One pass over the ops in flight; returns 1 if anything moved. */
static int progress_all(void)
{
	op *o, *prev = NULL, *next;
	int moved = 0;

	for (o = st.head; o; o = next) {
		next = o->next;
		if (o->algo == CDP_DIST_MPI) {
			o->done = dist_testall(o->nmreq, o->mreq);
		} else {
			moved |= ring_advance(o);
		}
		if (!o->done) {
			prev = o;
			continue;
		}
		moved = 1;
		op_finish(o);
		if (prev)
			prev->next = next;
		else
			st.head = next;
		if (st.tail == o)
			st.tail = prev;
	}
	return moved;
}

/* Blocks until `target` (or, when NULL, every op) is done. */
static void drive(const op *target, const char *what)
{
	enum { RING_REQ = RING_ACTIVE * 2 * RING_WIN, CAP = RING_REQ + 32 * MPI_PARTS };
	MPI_Request req[CAP], *where[CAP];
	int n, idx;
	op *o;

	for (;;) {
		if (!progress_all() && (target ? !target->done : st.head != NULL)) {
			/* Everything postable is posted: wait for any completion. All
			 * ring requests must be in the set (any may be the one a peer
			 * needs); mpi ones need only MPI's internal progress, so a
			 * subset of them will do. */
			n = 0;
			for (o = st.head; o; o = o->next) {
				for (int i = 0; i < o->nr; i++)
					where[n] = &o->rreq[(o->r0 + i) % RING_WIN], req[n] = *where[n], n++;
				for (int i = 0; i < o->ns; i++)
					where[n] = &o->sreq[(o->s0 + i) % RING_WIN], req[n] = *where[n], n++;
			}
			for (o = st.head; o && n <= CAP - MPI_PARTS; o = o->next)
				for (int i = 0; i < o->nmreq; i++)
					where[n] = &o->mreq[i], req[n++] = o->mreq[i];
			if (n == 0)
				cdp_dist_abort(1, "%s: internal error: nothing to wait for", what);
			idx = dist_waitany(n, req, what);
			if (idx != MPI_UNDEFINED)
				*where[idx] = MPI_REQUEST_NULL;
		}
		if (target ? target->done : st.head == NULL)
			return;
	}
}

/* ---- blocking float reductions ---------------------------------------- */

int cdp_dist_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average)
{
	if (!buf && n)
		return CDP_EINVAL;
	switch (dist_dev_mode(algo)) {
	case DIST_STAGE: return dist_dev_allreduce(buf, n, algo, average);
	case DIST_NCCL: dist_nccl_allreduce(buf, n, average, "ncclAllReduce"); return 0;
	}
	return dist_host_allreduce(buf, n, algo, average);
}

int dist_host_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average)
{
	op o;
	double t0 = dist_now();

	if ((!buf && n) || (algo != CDP_DIST_MPI && algo != CDP_DIST_RING &&
	                    !(algo == CDP_DIST_NCCL && cdp_dist_size() == 1)))
		return CDP_EINVAL;
	dist_quiesce();
	if (algo == CDP_DIST_MPI && cdp_dist_size() > 1) {
		dist_allreduce_sum(buf, n);
		o.average = average, o.buf = buf, o.n = n, o.done_at = NULL;
		o.comp = CDP_DIST_COMP_NONE, o.algo = CDP_DIST_MPI;
		op_finish(&o);
	} else {
		op_start(&o, buf, n, algo, average, CDP_DIST_COMP_NONE, NULL);
		if (!o.done)
			drive(&o, "ring all-reduce");
	}
	dist_stats.wait_s += dist_now() - t0;
	return 0;
}

int cdp_dist_average(float *buf, size_t n)
{
	return cdp_dist_allreduce(buf, n, cdp_dist_get_algo(), 1);
}

/* ---- the communication thread ---------------------------------------- */

/* A bucket handed over: its reduction started on the thread. */
static void ct_start(int b)
{
	op_start(&st.bops[b], st.bbuf + st.boff[b], st.bn[b], st.balgo, st.average, st.bcomp,
	         st.bwire ? st.bwire + st.boff[b] : NULL);
	if (st.bops[b].done)
		st.bt1[b] = dist_now();
	else
		st.bops[b].done_at = &st.bt1[b];
}

/* Thread, under mu: marks the buckets it started that are now reduced;
 * 1 when any is new. */
static int fin_seen(void)
{
	int any = 0;

	for (int i = 0; i < ct.qhead; i++) {
		int b = ct.q[i];
		if (!ct.fin[b] && st.bops[b].done)
			ct.fin[b] = any = 1;
	}
	return any;
}

static void *ct_main(void *arg)
{
	struct timespec ts;
	int from, to, moved, done;
	double t;

	(void)arg;
	cdp_thread_name("cdp-comm", -1);
	pthread_mutex_lock(&ct.mu);
	for (;;) {
		while (!ct.stop && (ct.yield || (ct.qhead == ct.qn && !ct.busy)))
			pthread_cond_wait(&ct.work, &ct.mu);
		if (ct.stop)
			break;
		from = ct.qhead, to = ct.qn;
		ct.qhead = to;
		ct.busy = ct.inpass = 1;
		pthread_mutex_unlock(&ct.mu);
		for (int i = from; i < to; i++)
			ct_start(ct.q[i]);
		moved = st.head ? progress_all() : 1;
		done = st.head == NULL;
		pthread_mutex_lock(&ct.mu);
		ct.inpass = 0;
		if (fin_seen())
			pthread_cond_broadcast(&ct.idle);
		if (done && ct.qhead == ct.qn) {
			ct.busy = 0;
			ct.last_done = dist_now();
			pthread_cond_signal(&ct.idle);
		} else if (ct.yield) {
			pthread_cond_signal(&ct.idle);
		} else if (!moved && ct.qhead == ct.qn) {
			/* nothing to do until a message moves: sleep a little (MPI's
			 * own waits spin, and this thread shares the core with the
			 * backward pass), or until the next bucket comes */
			t = dist_now() + POLL_NS * 1e-9;
			ts.tv_sec = (time_t)t;
			ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
			pthread_cond_timedwait(&ct.work, &ct.mu, &ts);
		}
	}
	pthread_mutex_unlock(&ct.mu);
	return NULL;
}

/* CDP_DIST_THREAD=0 keeps the progress engine; MPI must allow it. */
static int ct_want(void)
{
	const char *v = getenv("CDP_DIST_THREAD");

	return dist_serialized() && !(v && strcmp(v, "0") == 0);
}

static int ct_launch(void)
{
	pthread_condattr_t ca;

	if (ct.on)
		return 0;
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&ct.work, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		return -1;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_cond_init(&ct.idle, NULL) != 0) {
		pthread_cond_destroy(&ct.work);
		return -1;
	}
	ct.stop = 0;
	if (pthread_create(&ct.th, NULL, ct_main, NULL) != 0) {
		pthread_cond_destroy(&ct.work);
		pthread_cond_destroy(&ct.idle);
		return -1;
	}
	ct.on = 1;
	return 0;
}

/* Main thread: bucket b to the thread, or (b < 0) the order to end. */
static void ct_post(int b)
{
	pthread_mutex_lock(&ct.mu);
	if (b >= 0) {
		ct.q[ct.qn++] = b;
		ct.active = 1;
	} else {
		ct.stop = 1;
	}
	pthread_cond_signal(&ct.work);
	pthread_mutex_unlock(&ct.mu);
}

/* Main thread: takes MPI back from the thread (after its current pass)
 * and finishes what is left itself, blocking in MPI_Waitany as the
 * progress engine does, rather than wait for the thread's naps. Returns 1
 * when anything was left (*last: else when the thread saw the last
 * reduction finish). */
static int ct_join(double *last)
{
	int left, from, to;

	pthread_mutex_lock(&ct.mu);
	ct.yield = 1;
	pthread_cond_signal(&ct.work);
	while (ct.inpass)
		pthread_cond_wait(&ct.idle, &ct.mu);
	from = ct.qhead, to = ct.qn;
	ct.qn = ct.qhead = 0;
	ct.busy = 0;
	*last = ct.last_done;
	pthread_mutex_unlock(&ct.mu);
	/* the thread waits while yield is set: MPI and the ops are ours */
	for (int i = from; i < to; i++)
		ct_start(ct.q[i]);
	left = from < to || st.head != NULL;
	if (st.head)
		drive(NULL, "waiting for the gradient reductions");
	pthread_mutex_lock(&ct.mu);
	ct.yield = 0;
	ct.active = 0;
	pthread_mutex_unlock(&ct.mu);
	return left;
}

void dist_quiesce(void)
{
	double last;

	if (ct.active)
		ct_join(&last);
}

static void ct_stop(void)
{
	if (!ct.on)
		return;
	dist_quiesce();
	ct_post(-1);
	pthread_join(ct.th, NULL);
	pthread_cond_destroy(&ct.work);
	pthread_cond_destroy(&ct.idle);
	ct.on = 0;
}

/* ---- buckets ------------------------------------------------------------ */

static void buckets_free(void)
{
	free(st.boff), free(st.bn), free(st.bl0), free(st.bl1);
	free(st.lbucket), free(st.bleft), free(st.ldone), free(st.bstate), free(st.bops);
	free(st.bt0), free(st.bt1), free(ct.q), free(ct.fin), free(st.bwire);
	st.bt0 = st.bt1 = NULL;
	ct.fin = NULL;
	st.bwire = NULL;
	st.bcomp = CDP_DIST_COMP_NONE;
	ct.q = NULL;
	st.threaded = 0;
	st.busy_since = 0;
	st.boff = st.bn = NULL;
	st.bl0 = st.bl1 = st.lbucket = st.bleft = NULL;
	st.ldone = st.bstate = NULL;
	st.bops = NULL;
	st.nb = st.nl = 0;
	st.bbuf = NULL;
}

void dist_buckets_drop(void) { buckets_free(); }

/* Per-step state back to "nothing done". */
static void buckets_rearm(void)
{
	for (int b = 0; b < st.nb; b++) {
		st.bleft[b] = st.bl1[b] - st.bl0[b];
		st.bstate[b] = 0;
	}
	memset(st.ldone, 0, (size_t)st.nl);
	memset(ct.fin, 0, (size_t)st.nl);
}

int cdp_dist_buckets(float *buf, const size_t *layer_off, int nlayers, size_t first_floats,
                     size_t bucket_floats, int nbuckets, int overlap, int average)
{
	size_t total, target, first, acc = 0;
	int l, b = 0, l1;

	if (!layer_off || nlayers < 1 || st.head || nbuckets < 0 ||
	    (!nbuckets && !bucket_floats))
		return CDP_EINVAL;
	for (l = 0; l < nlayers; l++)
		if (layer_off[l + 1] < layer_off[l])
			return CDP_EINVAL;
	total = layer_off[nlayers] - layer_off[0];
	if (!buf && total)
		return CDP_EINVAL;
	st.bmode = dist_dev_mode(cdp_dist_get_algo());
	/* staged: the buckets live in a pinned host mirror of the block */
	if (st.bmode == DIST_STAGE && !(buf = dist_dev_mirror(buf, layer_off[nlayers])))
		return CDP_ENOMEM;
	target = nbuckets ? (total + (size_t)nbuckets - 1) / (size_t)nbuckets : bucket_floats;
	if (target == 0)
		target = 1;
	/* the first bucket (the last layers, ready first) may be smaller, so
	 * that communication starts early in the backward pass */
	first = !nbuckets && first_floats && first_floats < target ? first_floats : target;
	buckets_free();
	st.nl = nlayers;
	/* at most one bucket per layer */
	if (!(st.boff = calloc((size_t)nlayers, sizeof *st.boff)) ||
	    !(st.bn = calloc((size_t)nlayers, sizeof *st.bn)) ||
	    !(st.bl0 = calloc((size_t)nlayers, sizeof *st.bl0)) ||
	    !(st.bl1 = calloc((size_t)nlayers, sizeof *st.bl1)) ||
	    !(st.lbucket = calloc((size_t)nlayers, sizeof *st.lbucket)) ||
	    !(st.bleft = calloc((size_t)nlayers, sizeof *st.bleft)) ||
	    !(st.ldone = calloc((size_t)nlayers, 1)) ||
	    !(st.bstate = calloc((size_t)nlayers, 1)) ||
	    !(st.bops = calloc((size_t)nlayers, sizeof *st.bops)) ||
	    !(st.bt0 = calloc((size_t)nlayers, sizeof *st.bt0)) ||
	    !(st.bt1 = calloc((size_t)nlayers, sizeof *st.bt1)) ||
	    !(ct.q = calloc((size_t)nlayers, sizeof *ct.q)) ||
	    !(ct.fin = calloc((size_t)nlayers, 1))) {
		buckets_free();
		return CDP_ENOMEM;
	}
	/* compressed on the host: a 16-bit copy indexed as the block (with
	 * NCCL the device's own scratch, dist_nccl.c) */
	st.bcomp = cdp_dist_size() > 1 ? st.comp : CDP_DIST_COMP_NONE;
	if (st.bcomp && st.bmode != DIST_NCCL &&
	    !(st.bwire = malloc((layer_off[nlayers] ? layer_off[nlayers] : 1) * sizeof *st.bwire))) {
		buckets_free();
		return CDP_ENOMEM;
	}
	/* from the last layer down: close a bucket once it holds target */
	for (l1 = l = nlayers; l > 0; l--) {
		acc += layer_off[l] - layer_off[l - 1];
		st.lbucket[l - 1] = b;
		if (acc >= (b == 0 ? first : target) || l == 1) {
			st.bl0[b] = l - 1, st.bl1[b] = l1;
			st.boff[b] = layer_off[l - 1];
			st.bn[b] = layer_off[l1] - layer_off[l - 1];
			if (acc > (size_t)MPI_PARTS * INT_MAX) {
				buckets_free();
				return CDP_ERANGE;
			}
			b++, l1 = l - 1, acc = 0;
		}
	}
	st.nb = b;
	st.bbuf = buf;
	st.overlap = overlap;
	st.average = average;
	st.balgo = cdp_dist_get_algo();
	st.threaded = overlap && cdp_dist_size() > 1 && st.bmode != DIST_NCCL && ct_want() &&
	              ct_launch() == 0;
	buckets_rearm();
	return b;
}

int cdp_dist_threaded(void) { return st.threaded; }

int cdp_dist_set_overlap(int overlap)
{
	if (!st.nb || dist_busy() || (overlap != 0 && overlap != 1))
		return CDP_EINVAL;
	st.overlap = overlap;
	/* the thread stays up once launched: switching back costs nothing */
	st.threaded = overlap && cdp_dist_size() > 1 && st.bmode != DIST_NCCL && ct_want() &&
	              ct_launch() == 0;
	return 0;
}

int cdp_dist_bucket_info(int b, size_t *off, size_t *n, int *l0, int *l1)
{
	if (b < 0 || b >= st.nb)
		return CDP_EINVAL;
	if (off) *off = st.boff[b];
	if (n) *n = st.bn[b];
	if (l0) *l0 = st.bl0[b];
	if (l1) *l1 = st.bl1[b];
	return 0;
}

int cdp_dist_bucket_state(int b)
{
	if (b < 0 || b >= st.nb)
		return CDP_EINVAL;
	/* the thread's ops are its own until joined */
	return st.bstate[b] ? (ct.active || !st.bops[b].done ? 1 : 2) : 0;
}

int cdp_dist_bucket_times(int b, double *start, double *done)
{
	if (b < 0 || b >= st.nb)
		return CDP_EINVAL;
	if (start) *start = st.bt0[b];
	if (done) *done = st.bt1[b];
	return 0;
}

static void bucket_start(int b)
{
	st.bstate[b] = 1;
	st.bstarted++;
	st.bt0[b] = dist_now();
	st.bt1[b] = 0;
	if (st.bmode == DIST_NCCL) {
		/* queued behind the compute stream: done as far as the host goes */
		dist_nccl_bucket(st.bbuf + st.boff[b], st.bn[b], st.average, st.bcomp);
		memset(&st.bops[b], 0, sizeof st.bops[b]);
		st.bops[b].done = 1;
		st.bt1[b] = dist_now();
		dist_stats.reductions++;
		return;
	}
	if (st.bmode == DIST_STAGE)
		dist_dev_down(st.boff[b], st.bn[b]);
	if (st.threaded) {
		ct_post(b);
		return;
	}
	op_start(&st.bops[b], st.bbuf + st.boff[b], st.bn[b], st.balgo, st.average, st.bcomp,
	         st.bwire ? st.bwire + st.boff[b] : NULL);
	if (st.bops[b].done)        /* one rank, or nothing to reduce */
		st.bt1[b] = dist_now();
	else
		st.bops[b].done_at = &st.bt1[b];
}

/* The accounting of dist.h's grad_s and grad_exposed_s around one bucket
 * call: a call that found a bucket in flight, or started one, lies wholly
 * inside a busy period (which starts at the entry of the call that starts
 * the first bucket and ends at the exit of the one that sees the last
 * finish), and all of its time is exposed; so exposed <= total. With the
 * communication thread the last finish may come before the exit of the
 * call that handed the bucket over (the scheduler ran the woken thread
 * first), so the period ends at the later of the two (busy_seen). */
typedef struct acct { double t; int busy; unsigned started; } acct;

static void acct_in(acct *a)
{
	a->t = dist_now();
	a->busy = st.busy_since > 0;
	a->started = st.bstarted;
}

static void acct_out(const acct *a)
{
	double t = dist_now();

	if (!a->busy && a->started == st.bstarted)
		return;
	dist_stats.grad_exposed_s += t - a->t;
	if (!a->busy)
		st.busy_since = a->t;
	st.busy_seen = t;
	if (!inflight()) {
		dist_stats.grad_s += t - st.busy_since;
		st.busy_since = 0;
	}
}

int cdp_dist_bucket_ready(int b)
{
	double t0 = dist_now();
	acct a;

	if (b < 0 || b >= st.nb)
		return CDP_EINVAL;
	acct_in(&a);
	if (!st.bstate[b]) {
		bucket_start(b);
		if (!st.threaded)
			progress_all();
	}
	acct_out(&a);
	dist_stats.progress_s += dist_now() - t0;
	return 0;
}

int cdp_dist_layer_done(int l)
{
	int b;

	if (l < 0 || l >= st.nl)
		return CDP_EINVAL;
	if (st.ldone[l])
		return 0;
	st.ldone[l] = 1;
	b = st.lbucket[l];
	if (--st.bleft[b] == 0 && st.overlap)
		return cdp_dist_bucket_ready(b);
	if (st.overlap)
		cdp_dist_progress();
	return 0;
}

void cdp_dist_progress(void)
{
	double t0 = dist_now();
	acct a;

	if (ct.active)          /* the thread moves them on */
		return;
	acct_in(&a);
	if (st.head)
		progress_all();
	acct_out(&a);
	dist_stats.progress_s += dist_now() - t0;
}

int cdp_dist_bucket_wait_ok(void)
{
	return st.nb > 0 && st.bmode == DIST_HOST;
}

int cdp_dist_bucket_wait(int b)
{
	double t0 = dist_now();
	acct a;

	if (b < 0 || b >= st.nb || !cdp_dist_bucket_wait_ok())
		return CDP_EINVAL;
	/* everything not started starts now, in bucket order, as in
	 * cdp_dist_wait_all: the collectives keep one order on every rank */
	acct_in(&a);
	for (int k = 0; k < st.nb; k++)
		if (!st.bstate[k])
			bucket_start(k);
	if (ct.active) {
		/* the thread goes on with the others meanwhile; it only tests
		 * its requests, so the watchdog times this wait instead: a peer
		 * that hangs would otherwise keep it waiting for ever */
		dist_watch_enter("waiting for a gradient reduction");
		pthread_mutex_lock(&ct.mu);
		while (!ct.fin[b])
			pthread_cond_wait(&ct.idle, &ct.mu);
		pthread_mutex_unlock(&ct.mu);
		dist_watch_leave();
	} else if (!st.bops[b].done) {
		drive(&st.bops[b], "waiting for a gradient reduction");
	}
	acct_out(&a);
	dist_stats.wait_s += dist_now() - t0;
	return 0;
}

void cdp_dist_wait_all(void)
{
	double t0 = dist_now();
	acct a;

	acct_in(&a);
	for (int b = 0; b < st.nb; b++)
		if (!st.bstate[b])
			bucket_start(b);
	if (ct.active) {
		double last, t, end;
		int waited = ct_join(&last);
		if (st.busy_since == 0)     /* handed over in this call */
			st.busy_since = a.t;
		if (st.nb > 0 && st.bmode == DIST_STAGE)
			dist_dev_up(st.boff[st.nb - 1], st.boff[0] + st.bn[0] - st.boff[st.nb - 1]);
		buckets_rearm();
		/* done before this call: the period ended when the thread saw
		 * the last finish or at the exit of the last bucket call, the
		 * later (acct_out), and none of this call was communication */
		t = dist_now();
		end = last > st.busy_seen ? last : st.busy_seen;
		if (waited) {
			dist_stats.grad_exposed_s += t - a.t;
			end = t;
		}
		dist_stats.grad_s += end - st.busy_since;
		st.busy_since = 0;
		dist_stats.wait_s += t - t0;
		return;
	}
	if (st.head)
		drive(NULL, "waiting for the gradient reductions");
	if (st.nb > 0 && st.bmode == DIST_STAGE) {
		/* bucket nb-1 holds the first layers, bucket 0 the last */
		size_t lo = st.boff[st.nb - 1], hi = st.boff[0] + st.bn[0];
		dist_dev_up(lo, hi - lo);
	} else if (st.nb > 0 && st.bmode == DIST_NCCL)
		dist_nccl_join();
	buckets_rearm();
	acct_out(&a);
	dist_stats.wait_s += dist_now() - t0;
}

void dist_ring_finalize(void)
{
	/* finish what is in flight, but start nothing: the bucket block may be
	 * gone by now */
	ct_stop();
	if (st.head)
		drive(NULL, "finishing reductions in flight");
	buckets_free();
	scratch_free();
}
