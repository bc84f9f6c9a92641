/* dist_mpi.c: dist.h over MPI - start-up, checked calls, the watchdog, the
 * blocking collectives, the ring reduction and the bucket progress engine.
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
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cdp_error.h"
#include "cdp_num.h"
#include "dist.h"

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
	int inited, rank, size, lrank, lsize, left, right;
	MPI_Comm comm;
	const char *prog;
	cdp_dist_algo algo;
	size_t chunk;
	unsigned seq;                 /* ring ops started, for tags */
	op *head, *tail;              /* in flight, in start order */
	float *scratch[RING_ACTIVE];  /* RING_WIN * chunk floats each, lazily */
	int slot_busy[RING_ACTIVE];
	cdp_dist_stats stats;
	/* the watchdog: `what` is the blocking call in progress or NULL */
	double timeout;
	pthread_t wd;
	int wd_on, wd_stop;
	pthread_mutex_t wd_mu;
	pthread_cond_t wd_cv;
	const char *what;
	double since;
	/* buckets */
	float *bbuf;
	int nb, nl, overlap, average;
	cdp_dist_algo balgo;
	size_t *boff, *bn;
	int *bl0, *bl1, *lbucket, *bleft;
	unsigned char *ldone, *bstate;  /* bstate: 0 idle, 1 started */
	op *bops;
} st = { .size = 1, .lsize = 1, .prog = "cdp-train", .algo = CDP_DIST_RING,
         .chunk = 262144, .timeout = 60, .wd_mu = PTHREAD_MUTEX_INITIALIZER };

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cdp_dist_set_prog(const char *prog) { st.prog = prog; }
int cdp_dist_rank(void) { return st.rank; }
int cdp_dist_size(void) { return st.size; }
int cdp_dist_local_rank(void) { return st.lrank; }
int cdp_dist_local_size(void) { return st.lsize; }

void cdp_dist_abort(int code, const char *fmt, ...)
{
	va_list ap;
	int live = 0, fin = 1, k;
	char msg[1024];

	/* one write, so that lines from several ranks do not interleave */
	k = snprintf(msg, sizeof msg - 1, "%s: rank %d: ", st.prog, st.rank);
	va_start(ap, fmt);
	vsnprintf(msg + k, sizeof msg - 1 - (size_t)k, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
	if (MPI_Initialized(&live) == MPI_SUCCESS && live && MPI_Finalized(&fin) == MPI_SUCCESS && !fin)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

/* The check macro: file, line, the function called and MPI's own text. */
static void mpi_fail(const char *file, int line, const char *call, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	const char *base = strrchr(file, '/');

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof msg, "MPI error %d", rc);
	cdp_dist_abort(1, "%s:%d: %.*s: %s", base ? base + 1 : file, line,
	               (int)strcspn(call, "("), call, msg);
}
#define MPI_CHECK(call) do { \
	int mc_rc_ = (call); \
	if (mc_rc_ != MPI_SUCCESS) mpi_fail(__FILE__, __LINE__, #call, mc_rc_); \
} while (0)

/* ---- watchdog ------------------------------------------------------------
 * It wakes every min(1 s, timeout/4) and looks at `what`; entering and
 * leaving a blocking call is an uncontended lock, no system call. When it
 * fires it calls MPI_Abort from its own thread: the main thread is stuck in
 * MPI, and Open MPI's abort goes out through the runtime (PMIx), not through
 * the stuck communicator. alarm() is the fallback should the abort itself
 * hang: SIGALRM's default action ends the process, and mpirun then ends the
 * job because a rank died. */
static void *wd_main(void *arg)
{
	struct timespec ts;
	double period = st.timeout / 4 < 1 ? st.timeout / 4 : 1, t;

	pthread_mutex_lock(&st.wd_mu);
	while (!st.wd_stop) {
		t = now() + period;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&st.wd_cv, &st.wd_mu, &ts);
		if (!st.wd_stop && st.what && now() - st.since > st.timeout) {
			signal(SIGALRM, SIG_DFL);
			alarm(10);
			cdp_dist_abort(1, "%s did not finish within %g s: a peer rank died or hangs "
			               "(timeout set by CDP_DIST_TIMEOUT)", st.what, st.timeout);
		}
	}
	pthread_mutex_unlock(&st.wd_mu);
	return NULL;
}

static int wd_start(void)
{
	pthread_condattr_t ca;
	int rc;

	if (st.timeout <= 0 || st.wd_on)
		return 0;
	st.wd_stop = 0;
	if ((rc = pthread_condattr_init(&ca)) != 0)
		return rc;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&st.wd_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return rc;
	if ((rc = pthread_create(&st.wd, NULL, wd_main, NULL)) != 0) {
		pthread_cond_destroy(&st.wd_cv);
		return rc;
	}
	st.wd_on = 1;
	return 0;
}

static void wd_stop(void)
{
	if (!st.wd_on)
		return;
	pthread_mutex_lock(&st.wd_mu);
	st.wd_stop = 1;
	pthread_cond_signal(&st.wd_cv);
	pthread_mutex_unlock(&st.wd_mu);
	pthread_join(st.wd, NULL);
	pthread_cond_destroy(&st.wd_cv);
	st.wd_on = 0;
}

static void wd_enter(const char *what)
{
	pthread_mutex_lock(&st.wd_mu);
	st.what = what;
	st.since = now();
	pthread_mutex_unlock(&st.wd_mu);
}

static void wd_leave(void)
{
	pthread_mutex_lock(&st.wd_mu);
	st.what = NULL;
	pthread_mutex_unlock(&st.wd_mu);
}

/* ---- start-up and settings ------------------------------------------- */

int cdp_dist_init(int *argc, char ***argv)
{
	const char *env = getenv("CDP_DIST_TIMEOUT");
	int provided, rc;
	MPI_Comm local;

	if (st.inited)
		return CDP_EINVAL;
	if (env && (rc = cdp_parse_double(env, 0, 1e9, &st.timeout)) != 0)
		return rc;
	MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
	MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	/* our own communicator, so our tags never meet the caller's messages */
	MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &st.comm));
	MPI_CHECK(MPI_Comm_set_errhandler(st.comm, MPI_ERRORS_RETURN));
	MPI_CHECK(MPI_Comm_rank(st.comm, &st.rank));
	MPI_CHECK(MPI_Comm_size(st.comm, &st.size));
	MPI_CHECK(MPI_Comm_split_type(st.comm, MPI_COMM_TYPE_SHARED, st.rank, MPI_INFO_NULL, &local));
	MPI_CHECK(MPI_Comm_rank(local, &st.lrank));
	MPI_CHECK(MPI_Comm_size(local, &st.lsize));
	MPI_CHECK(MPI_Comm_free(&local));
	st.left = (st.rank + st.size - 1) % st.size;
	st.right = (st.rank + 1) % st.size;
	st.inited = 1;
	if ((rc = wd_start()) != 0)
		cdp_dist_abort(1, "cannot start the watchdog thread: %s", strerror(rc));
	return 0;
}

static void buckets_free(void);
static void drive(const struct op *target, const char *what);

void cdp_dist_finalize(void)
{
	int i;

	if (!st.inited)
		return;
	/* finish what is in flight, but start nothing: the bucket block may be
	 * gone by now */
	if (st.head)
		drive(NULL, "finishing reductions in flight");
	buckets_free();
	wd_stop();
	for (i = 0; i < RING_ACTIVE; i++) {
		free(st.scratch[i]);
		st.scratch[i] = NULL;
	}
	MPI_CHECK(MPI_Comm_free(&st.comm));
	MPI_CHECK(MPI_Finalize());
	st.inited = 0;
}

int cdp_dist_set_algo(cdp_dist_algo algo)
{
	if ((algo != CDP_DIST_MPI && algo != CDP_DIST_RING) || st.head)
		return CDP_EINVAL;
	st.algo = algo;
	return 0;
}

cdp_dist_algo cdp_dist_get_algo(void) { return st.algo; }

int cdp_dist_set_chunk(size_t floats)
{
	int i;

	if (floats < 1 || floats > INT_MAX / RING_WIN || st.head)
		return CDP_EINVAL;
	if (floats != st.chunk)
		for (i = 0; i < RING_ACTIVE; i++) {
			free(st.scratch[i]);
			st.scratch[i] = NULL;
		}
	st.chunk = floats;
	return 0;
}

int cdp_dist_set_timeout(double seconds)
{
	if (!(seconds >= 0 && seconds <= 1e9))
		return CDP_EINVAL;
	wd_stop();
	st.timeout = seconds;
	return st.inited && wd_start() != 0 ? CDP_ENOMEM : 0;
}

int cdp_dist_algo_parse(const char *s, cdp_dist_algo *algo)
{
	if (s && strcmp(s, "mpi") == 0)
		*algo = CDP_DIST_MPI;
	else if (s && strcmp(s, "ring") == 0)
		*algo = CDP_DIST_RING;
	else
		return CDP_ESYNTAX;
	return 0;
}

const char *cdp_dist_algo_name(cdp_dist_algo algo)
{
	return algo == CDP_DIST_MPI ? "mpi" : "ring";
}

void cdp_dist_stats_get(cdp_dist_stats *s) { *s = st.stats; }
void cdp_dist_stats_reset(void) { memset(&st.stats, 0, sizeof st.stats); }

/* ---- the ring state machine ------------------------------------------ */

static int seg_of(int k, int recv)
{
	int j = st.size;

	return ((st.rank - k - recv) % j + j) % j;
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
	int j = st.size, moved = 0, again = 1, flag, len;
	size_t off;
	float *tmp;

	if (o->slot < 0 && !ring_take_slot(o))
		return 0;
	while (again) {
		again = 0;
		while (o->nr > 0) {
			MPI_CHECK(MPI_Test(&o->rreq[o->r0], &flag, MPI_STATUS_IGNORE));
			if (!flag)
				break;
			if (o->rdk < j - 1) {   /* scatter-reduce: add the partial sum */
				off = chunk_at(o, o->rdk, o->rdc, 1, &len);
				add_into(o->buf + off, st.scratch[o->slot] + (size_t)o->r0 * st.chunk,
				         (size_t)len);
			}
			o->r0 = (o->r0 + 1) % RING_WIN;
			o->nr--;
			o->rdc++;
			pos_norm(o, 1, &o->rdk, &o->rdc);
			again = 1;
		}
		while (o->ns > 0) {
			MPI_CHECK(MPI_Test(&o->sreq[o->s0], &flag, MPI_STATUS_IGNORE));
			if (!flag)
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
			tmp = o->rk < j - 1 ? st.scratch[o->slot] + (size_t)i * st.chunk : o->buf + off;
			MPI_CHECK(MPI_Irecv(tmp, len, MPI_FLOAT, st.left, o->tag, st.comm, &o->rreq[i]));
			o->nr++;
			o->rc++;
			pos_norm(o, 1, &o->rk, &o->rc);
			again = 1;
		}
		while (o->ns < RING_WIN && o->sk < o->nsteps &&
		       (o->sk == 0 || before(o->sk - 1, o->sc, o->rdk, o->rdc))) {
			int i = (o->s0 + o->ns) % RING_WIN;
			off = chunk_at(o, o->sk, o->sc, 0, &len);
			MPI_CHECK(MPI_Isend(o->buf + off, len, MPI_FLOAT, st.right, o->tag, st.comm, &o->sreq[i]));
			st.stats.ring_bytes += (uint64_t)len * sizeof(float);
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
	float *restrict x = o->buf, j = (float)st.size;
	size_t i = 0;

	/* a division, not a multiplication by 1/j: sum / j exactly */
	if (o->average && st.size > 1) {
		for (; i + 8 <= o->n; i += 8) {
			x[i] /= j, x[i + 1] /= j, x[i + 2] /= j, x[i + 3] /= j;
			x[i + 4] /= j, x[i + 5] /= j, x[i + 6] /= j, x[i + 7] /= j;
		}
		for (; i < o->n; i++)
			x[i] /= j;
	}
	st.stats.reductions++;
}

/* Starts a reduction of buf[0..n); an mpi op is posted now, a ring op when
 * a scratch slot is free (in start order). */
static void op_start(op *o, float *buf, size_t n, cdp_dist_algo algo, int average)
{
	memset(o, 0, sizeof *o);
	o->algo = algo;
	o->buf = buf;
	o->n = n;
	o->average = average;
	o->slot = -1;
	if (st.size == 1 || n == 0) {
		o->done = 1;
		st.stats.reductions++;
		return;
	}
	if (algo == CDP_DIST_MPI) {
		for (size_t off = 0; off < n; off += INT_MAX) {
			size_t part = n - off < INT_MAX ? n - off : INT_MAX;
			MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + off, (int)part, MPI_FLOAT, MPI_SUM,
			                         st.comm, &o->mreq[o->nmreq++]));
		}
	} else {
		o->tag = (int)(st.seq++ % TAG_SPAN);
		o->nsteps = 2 * (st.size - 1);
		o->q = n / (size_t)st.size;
		o->rem = n % (size_t)st.size;
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
	int moved = 0, flag;

	for (o = st.head; o; o = next) {
		next = o->next;
		if (o->algo == CDP_DIST_MPI) {
			MPI_CHECK(MPI_Testall(o->nmreq, o->mreq, &flag, MPI_STATUSES_IGNORE));
			o->done = flag;
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
			wd_enter(what);
			MPI_CHECK(MPI_Waitany(n, req, &idx, MPI_STATUS_IGNORE));
			wd_leave();
			if (idx != MPI_UNDEFINED)
				*where[idx] = MPI_REQUEST_NULL;
		}
		if (target ? target->done : st.head == NULL)
			return;
	}
}

/* ---- blocking collectives -------------------------------------------- */

int cdp_dist_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average)
{
	op o;
	double t0 = now();

	if ((!buf && n) || (algo != CDP_DIST_MPI && algo != CDP_DIST_RING))
		return CDP_EINVAL;
	if (algo == CDP_DIST_MPI && st.size > 1) {
		wd_enter("MPI_Allreduce");
		for (size_t off = 0; off < n; off += INT_MAX) {
			size_t part = n - off < INT_MAX ? n - off : INT_MAX;
			MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)part, MPI_FLOAT, MPI_SUM, st.comm));
		}
		wd_leave();
		o.average = average, o.buf = buf, o.n = n;
		op_finish(&o);
	} else {
		op_start(&o, buf, n, algo, average);
		if (!o.done)
			drive(&o, "ring all-reduce");
	}
	st.stats.wait_s += now() - t0;
	return 0;
}

int cdp_dist_average(float *buf, size_t n)
{
	return cdp_dist_allreduce(buf, n, st.algo, 1);
}

/* Runs one blocking collective call per part of at most INT_MAX items. */
#define BLOCKING(name, n, call) do { \
	double t0_ = now(); \
	if (st.size > 1) { \
		wd_enter(name); \
		for (size_t off = 0; off < (n); off += INT_MAX) { \
			int part = (int)((n) - off < INT_MAX ? (n) - off : INT_MAX); \
			MPI_CHECK(call); \
		} \
		wd_leave(); \
	} \
	st.stats.wait_s += now() - t0_; \
} while (0)

int cdp_dist_bcast(float *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	BLOCKING("MPI_Bcast", n, MPI_Bcast(buf + off, part, MPI_FLOAT, 0, st.comm));
	return 0;
}

int cdp_dist_bcast_bytes(void *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	BLOCKING("MPI_Bcast", n, MPI_Bcast((char *)buf + off, part, MPI_BYTE, 0, st.comm));
	return 0;
}

int cdp_dist_sum_f64(double *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	BLOCKING("MPI_Allreduce", n, MPI_Allreduce(MPI_IN_PLACE, buf + off, part, MPI_DOUBLE,
	                                           MPI_SUM, st.comm));
	return 0;
}

int cdp_dist_sum_u64(uint64_t *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	BLOCKING("MPI_Allreduce", n, MPI_Allreduce(MPI_IN_PLACE, buf + off, part, MPI_UINT64_T,
	                                           MPI_SUM, st.comm));
	return 0;
}

int cdp_dist_max_f64(double *v)
{
	if (!v)
		return CDP_EINVAL;
	BLOCKING("MPI_Allreduce", (size_t)1, MPI_Allreduce(MPI_IN_PLACE, v, part, MPI_DOUBLE,
	                                                   MPI_MAX, st.comm));
	return 0;
}

void cdp_dist_barrier(void)
{
	double t0 = now();

	if (st.size > 1) {
		wd_enter("MPI_Barrier");
		MPI_CHECK(MPI_Barrier(st.comm));
		wd_leave();
	}
	st.stats.wait_s += now() - t0;
}

/* ---- buckets ------------------------------------------------------------ */

static void buckets_free(void)
{
	free(st.boff), free(st.bn), free(st.bl0), free(st.bl1);
	free(st.lbucket), free(st.bleft), free(st.ldone), free(st.bstate), free(st.bops);
	st.boff = st.bn = NULL;
	st.bl0 = st.bl1 = st.lbucket = st.bleft = NULL;
	st.ldone = st.bstate = NULL;
	st.bops = NULL;
	st.nb = st.nl = 0;
	st.bbuf = NULL;
}

/* Per-step state back to "nothing done". */
static void buckets_rearm(void)
{
	for (int b = 0; b < st.nb; b++) {
		st.bleft[b] = st.bl1[b] - st.bl0[b];
		st.bstate[b] = 0;
	}
	memset(st.ldone, 0, (size_t)st.nl);
}

int cdp_dist_buckets(float *buf, const size_t *layer_off, int nlayers,
                     size_t bucket_floats, int nbuckets, int overlap, int average)
{
	size_t total, target, acc = 0;
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
	target = nbuckets ? (total + (size_t)nbuckets - 1) / (size_t)nbuckets : bucket_floats;
	if (target == 0)
		target = 1;
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
	    !(st.bops = calloc((size_t)nlayers, sizeof *st.bops))) {
		buckets_free();
		return CDP_ENOMEM;
	}
	/* from the last layer down: close a bucket once it holds target */
	for (l1 = l = nlayers; l > 0; l--) {
		acc += layer_off[l] - layer_off[l - 1];
		st.lbucket[l - 1] = b;
		if (acc >= target || l == 1) {
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
	st.balgo = st.algo;
	buckets_rearm();
	return b;
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
	return st.bstate[b] ? (st.bops[b].done ? 2 : 1) : 0;
}

static void bucket_start(int b)
{
	st.bstate[b] = 1;
	op_start(&st.bops[b], st.bbuf + st.boff[b], st.bn[b], st.balgo, st.average);
}

int cdp_dist_bucket_ready(int b)
{
	double t0 = now();

	if (b < 0 || b >= st.nb)
		return CDP_EINVAL;
	if (!st.bstate[b]) {
		bucket_start(b);
		progress_all();
	}
	st.stats.progress_s += now() - t0;
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
	double t0 = now();

	if (st.head)
		progress_all();
	st.stats.progress_s += now() - t0;
}

void cdp_dist_wait_all(void)
{
	double t0 = now();

	for (int b = 0; b < st.nb; b++)
		if (!st.bstate[b])
			bucket_start(b);
	if (st.head)
		drive(NULL, "waiting for the gradient reductions");
	buckets_rearm();
	st.stats.wait_s += now() - t0;
}
