/* dist_nccl.c: dist.h's reductions over NCCL (--allreduce nccl; built only
 * with CUDA): the communicator, made from a unique id that rank 0 sends by
 * MPI_Bcast or, when launched without MPI, through the rendezvous file;
 * gradient buckets on a communication stream ordered by events; the
 * blocking float calls; the host collectives of launches without MPI; and
 * the watchdog thread.
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0), so that no
 * NCCL call can block the host where the watchdog cannot reach it, init
 * included (a rank that never arrives). Any call may then return
 * ncclInProgress; nb() polls ncclCommGetAsyncError until the call is
 * through, and gives up after the timeout.
 *
 * Ordering. Buffers are written by ops on the backend's compute stream.
 * Every NCCL operation is queued on our stream `cs` after an event recorded
 * on the compute stream (compute -> comm); where its result is needed, an
 * event recorded on cs after it orders the rest: the compute stream waits
 * for it at cdp_dist_wait_all (comm -> compute, the host does not block),
 * the host waits for it in the blocking calls.
 *
 * The watchdog. Every operation queued is followed by an event of a FIFO,
 * with the time it was queued and its name. The thread wakes every
 * min(1 s, timeout / 4), retires the events that have completed
 * (cudaEventQuery), and fires when the oldest one left is older than
 * CDP_DIST_TIMEOUT or ncclCommGetAsyncError reports an error: it calls
 * ncclCommAbort (NCCL's kernels return, the device is not left spinning)
 * and ends the job through cdp_dist_abort, naming the rank, with alarm(10)
 * as the fallback should exiting hang, as in dist_mpi.c. Only that thread
 * queries events, so the main thread's CUDA error state is never touched.
 *
 * Not done: registering buffers with NCCL (ncclCommRegister), more than one
 * communication stream.
 */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "backend.h"
#include "cdp_error.h"
#include "dist_int.h"

#define QN 256                  /* operations the watchdog tracks at once */
#define RDV_MAGIC "CDPRDV1\n"   /* the rendezvous file: magic, u32 size, id */

static struct {
	cdp_backend *be;
	ncclComm_t comm;
	cudaStream_t cs;            /* communication stream */
	cudaEvent_t ready;          /* compute -> cs */
	cudaEvent_t joined;         /* cs -> compute, cs -> host */
	int have_stream, have_ev;
	/* the watchdog's FIFO of queued operations: ev[q0 .. q0 + qn) */
	cudaEvent_t ev[QN];
	double qt[QN];
	const char *qwhat[QN];
	int q0, qn;
	void *dbuf;                 /* device scratch of the host collectives */
	size_t dbuf_n;
	pthread_t wd;
	int wd_on, wd_stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} nc = { .mu = PTHREAD_MUTEX_INITIALIZER };

int dist_nccl_built(void) { return 1; }

static const char *base(const char *file)
{
	const char *b = strrchr(file, '/');

	return b ? b + 1 : file;
}

static void cuda_fail(const char *file, int line, const char *call, cudaError_t rc)
{
	cdp_dist_abort(1, "%s:%d: %.*s: %s", base(file), line, (int)strcspn(call, "("), call,
	               cudaGetErrorString(rc));
}
#define CUDA_CHECK(call) do { \
	cudaError_t cc_rc_ = (call); \
	if (cc_rc_ != cudaSuccess) cuda_fail(__FILE__, __LINE__, #call, cc_rc_); \
} while (0)

/* Aborts the communicator (once) so that NCCL's kernels return. */
static void comm_abort(void)
{
	ncclComm_t c = nc.comm;

	nc.comm = NULL;
	if (c)
		ncclCommAbort(c);
}

static void nccl_fail(const char *file, int line, const char *call, ncclResult_t rc)
{
	char detail[512] = "";
	const char *last = ncclGetLastError(nc.comm);

	if (last && *last)
		snprintf(detail, sizeof detail, " (%s)", last);
	comm_abort();
	cdp_dist_abort(1, "%s:%d: %.*s: %s%s", base(file), line, (int)strcspn(call, "("), call,
	               ncclGetErrorString(rc), detail);
}

/* Waits until a non-blocking call is through: its final result. */
static ncclResult_t nb(ncclResult_t rc, const char *what)
{
	double t0 = dist_now(), to = dist_timeout();
	struct timespec pause = { 0, 50 * 1000 };

	while (rc == ncclInProgress) {
		if (to > 0 && dist_now() - t0 > to) {
			comm_abort();
			cdp_dist_abort(1, "%s did not finish within %g s: a peer rank died or hangs "
			               "(timeout set by CDP_DIST_TIMEOUT)", what, to);
		}
		nanosleep(&pause, NULL);
		if (ncclCommGetAsyncError(nc.comm, &rc) != ncclSuccess)
			rc = ncclInternalError;
	}
	return rc;
}
#define NCCL_CHECK(call, what) do { \
	ncclResult_t nc_rc_ = nb((call), (what)); \
	if (nc_rc_ != ncclSuccess) nccl_fail(__FILE__, __LINE__, #call, nc_rc_); \
} while (0)

/* ---- the watchdog ------------------------------------------------------ */

static void fire(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fire(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* say why first: ncclCommAbort may itself crash or hang (the main
	 * thread can be inside a call on the same communicator), and then the
	 * alarm ends the process without another word */
	fprintf(stderr, "cdp-train: rank %d: %s\n", cdp_dist_rank(), msg);
	fflush(stderr);
	signal(SIGALRM, SIG_DFL);
	alarm(10);
	comm_abort();
	cdp_dist_abort(1, "NCCL communicator aborted after the error above");
}

static void *wd_main(void *arg)
{
	double to = dist_timeout(), period = to / 4 < 1 ? to / 4 : 1, t;
	struct timespec ts;
	ncclResult_t async;
	cudaError_t q;

	(void)arg;
	/* the events belong to the backend's device */
	if ((q = cudaSetDevice(nc.be->device)) != cudaSuccess)
		fire("the NCCL watchdog cannot bind GPU %d: %s", nc.be->device, cudaGetErrorString(q));
	pthread_mutex_lock(&nc.mu);
	while (!nc.wd_stop) {
		t = dist_now() + period;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&nc.cv, &nc.mu, &ts);
		if (nc.wd_stop)
			break;
		while (nc.qn > 0 && (q = cudaEventQuery(nc.ev[nc.q0])) != cudaErrorNotReady) {
			if (q != cudaSuccess)
				fire("%s failed on the GPU: %s", nc.qwhat[nc.q0], cudaGetErrorString(q));
			nc.q0 = (nc.q0 + 1) % QN;
			nc.qn--;
		}
		if (nc.qn > 0 && dist_now() - nc.qt[nc.q0] > to)
			fire("%s did not finish within %g s: a peer rank died or hangs (timeout set by "
			     "CDP_DIST_TIMEOUT)", nc.qwhat[nc.q0], to);
		if (nc.comm && ncclCommGetAsyncError(nc.comm, &async) == ncclSuccess &&
		    async != ncclSuccess && async != ncclInProgress)
			fire("NCCL reports an error: %s (%s)", ncclGetErrorString(async),
			     ncclGetLastError(nc.comm));
	}
	pthread_mutex_unlock(&nc.mu);
	return NULL;
}

static void wd_start(void)
{
	pthread_condattr_t ca;
	int rc;

	if (dist_timeout() <= 0)
		return;
	nc.wd_stop = 0;
	if ((rc = pthread_condattr_init(&ca)) != 0 ||
	    (rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0 ||
	    (rc = pthread_cond_init(&nc.cv, &ca)) != 0)
		cdp_dist_abort(1, "cannot start the NCCL watchdog: %s", strerror(rc));
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&nc.wd, NULL, wd_main, NULL)) != 0)
		cdp_dist_abort(1, "cannot start the NCCL watchdog: %s", strerror(rc));
	nc.wd_on = 1;
}

static void wd_stop(void)
{
	if (!nc.wd_on)
		return;
	pthread_mutex_lock(&nc.mu);
	nc.wd_stop = 1;
	pthread_cond_signal(&nc.cv);
	pthread_mutex_unlock(&nc.mu);
	pthread_join(nc.wd, NULL);
	pthread_cond_destroy(&nc.cv);
	nc.wd_on = 0;
	nc.q0 = nc.qn = 0;
}

/* After queuing `what` on cs: the watchdog tracks it. When the FIFO is
 * full the host waits for its oldest entry (which the watchdog covers). */
static void track(const char *what)
{
	int i;

	if (!nc.wd_on)
		return;
	pthread_mutex_lock(&nc.mu);
	while (nc.qn == QN) {
		cudaEvent_t head = nc.ev[nc.q0];
		int q0 = nc.q0;
		pthread_mutex_unlock(&nc.mu);
		CUDA_CHECK(cudaEventSynchronize(head));
		pthread_mutex_lock(&nc.mu);
		if (nc.qn == QN && nc.q0 == q0) {
			nc.q0 = (nc.q0 + 1) % QN;
			nc.qn--;
		}
	}
	i = (nc.q0 + nc.qn) % QN;
	CUDA_CHECK(cudaEventRecord(nc.ev[i], nc.cs));
	nc.qt[i] = dist_now();
	nc.qwhat[i] = what;
	nc.qn++;
	pthread_mutex_unlock(&nc.mu);
}

/* ---- the communicator -------------------------------------------------- */

/* Rank 0 writes the id for the others of a launch without MPI. */
static void rdv_publish(const char *path, const ncclUniqueId *id)
{
	unsigned char rec[8 + 4 + sizeof *id];
	uint32_t size = (uint32_t)cdp_dist_size();
	char tmp[4200];
	struct stat sb;
	int fd;

	if (stat(path, &sb) == 0)
		cdp_dist_abort(1, "the rendezvous file '%s' exists already (left by an earlier run?): "
		               "remove it or name a new one in CDP_RENDEZVOUS", path);
	memcpy(rec, RDV_MAGIC, 8);
	memcpy(rec + 8, &size, 4);
	memcpy(rec + 12, id, sizeof *id);
	snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0 ||
	    write(fd, rec, sizeof rec) != (ssize_t)sizeof rec || fsync(fd) != 0 || close(fd) != 0 ||
	    rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		cdp_dist_abort(1, "cannot write the rendezvous file '%s': %s", path, strerror(e));
	}
}

/* The others poll for it (the rename makes it appear whole). */
static void rdv_fetch(const char *path, ncclUniqueId *id)
{
	unsigned char rec[8 + 4 + sizeof *id];
	double t0 = dist_now(), to = dist_timeout();
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	uint32_t size;

	for (;;) {
		int fd = open(path, O_RDONLY);
		if (fd >= 0) {
			ssize_t got = read(fd, rec, sizeof rec);
			close(fd);
			if (got != (ssize_t)sizeof rec || memcmp(rec, RDV_MAGIC, 8) != 0)
				cdp_dist_abort(1, "'%s' is not a cdp-train rendezvous file", path);
			memcpy(&size, rec + 8, 4);
			if (size != (uint32_t)cdp_dist_size())
				cdp_dist_abort(1, "the rendezvous file '%s' is for %u ranks, WORLD_SIZE is %d",
				               path, size, cdp_dist_size());
			memcpy(id, rec + 12, sizeof *id);
			return;
		}
		if (errno != ENOENT)
			cdp_dist_abort(1, "cannot read the rendezvous file '%s': %s", path, strerror(errno));
		if (to > 0 && dist_now() - t0 > to)
			cdp_dist_abort(1, "no rendezvous file '%s' from rank 0 within %g s (timeout set "
			               "by CDP_DIST_TIMEOUT)", path, to);
		nanosleep(&pause, NULL);
	}
}

/* The communicator, stream and events, at the first collective that needs
 * them (every rank makes the same calls in the same order, so every rank
 * comes here at the same collective). */
static void comm_up(void)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	const char *rdv = getenv("CDP_RENDEZVOUS");
	ncclUniqueId id;
	int lo, hi;

	if (nc.comm)
		return;
	if (!(nc.be = dist_dev_backend()) || nc.be->device < 0)
		cdp_dist_abort(1, "NCCL needs a GPU: run with --device cuda");
	CUDA_CHECK(cudaSetDevice(nc.be->device));
	memset(&id, 0, sizeof id);
	if (cdp_dist_rank() == 0)
		NCCL_CHECK(ncclGetUniqueId(&id), "ncclGetUniqueId");
	if (cdp_dist_env_launch()) {
		if (cdp_dist_rank() == 0)
			rdv_publish(rdv, &id);
		else
			rdv_fetch(rdv, &id);
	} else {
		cdp_dist_bcast_bytes(&id, sizeof id);
	}
	cfg.blocking = 0;
	NCCL_CHECK(ncclCommInitRankConfig(&nc.comm, cdp_dist_size(), id, cdp_dist_rank(), &cfg),
	           "ncclCommInitRankConfig (waiting for every rank to join)");
	/* every rank has read the file once the communicator is up */
	if (cdp_dist_env_launch() && cdp_dist_rank() == 0)
		unlink(rdv);
	/* communication first when both streams have work ready */
	CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	CUDA_CHECK(cudaStreamCreateWithPriority(&nc.cs, cudaStreamNonBlocking, hi));
	nc.have_stream = 1;
	CUDA_CHECK(cudaEventCreateWithFlags(&nc.ready, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&nc.joined, cudaEventDisableTiming));
	for (int i = 0; i < QN; i++)
		CUDA_CHECK(cudaEventCreateWithFlags(&nc.ev[i], cudaEventDisableTiming));
	nc.have_ev = 1;
	wd_start();
}

void dist_nccl_release(void)
{
	/* under the watchdog: a reduction still queued on cs may wait for a
	 * peer that died, and this wait must end in a timeout, not a hang */
	if (nc.have_stream)
		CUDA_CHECK(cudaStreamSynchronize(nc.cs));
	wd_stop();
	if (nc.comm) {
		NCCL_CHECK(ncclCommFinalize(nc.comm), "ncclCommFinalize");
		NCCL_CHECK(ncclCommDestroy(nc.comm), "ncclCommDestroy");
		nc.comm = NULL;
	}
	if (nc.have_ev) {
		CUDA_CHECK(cudaEventDestroy(nc.ready));
		CUDA_CHECK(cudaEventDestroy(nc.joined));
		for (int i = 0; i < QN; i++)
			CUDA_CHECK(cudaEventDestroy(nc.ev[i]));
		nc.have_ev = 0;
	}
	if (nc.have_stream) {
		CUDA_CHECK(cudaStreamDestroy(nc.cs));
		nc.have_stream = 0;
	}
	if (nc.dbuf)
		CUDA_CHECK(cudaFree(nc.dbuf));
	nc.dbuf = NULL;
	nc.dbuf_n = 0;
	nc.be = NULL;
}

/* ---- float reductions on device buffers -------------------------------- */

static cudaStream_t compute(void) { return (cudaStream_t)nc.be->stream(nc.be); }

/* cs waits for what the compute stream holds now. */
static void after_compute(void)
{
	CUDA_CHECK(cudaEventRecord(nc.ready, compute()));
	CUDA_CHECK(cudaStreamWaitEvent(nc.cs, nc.ready, 0));
}

/* The host waits for everything queued on cs. */
static void host_wait(void)
{
	CUDA_CHECK(cudaEventRecord(nc.joined, nc.cs));
	CUDA_CHECK(cudaEventSynchronize(nc.joined));
}

void dist_nccl_bucket(float *buf, size_t n, int average)
{
	comm_up();
	if (n == 0)
		return;
	after_compute();
	NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, average ? ncclAvg : ncclSum, nc.comm,
	                         nc.cs), "ncclAllReduce");
	track("ncclAllReduce of a gradient bucket");
}

void dist_nccl_join(void)
{
	comm_up();
	CUDA_CHECK(cudaEventRecord(nc.joined, nc.cs));
	CUDA_CHECK(cudaStreamWaitEvent(compute(), nc.joined, 0));
}

void dist_nccl_allreduce(float *buf, size_t n, int average, const char *what)
{
	double t0 = dist_now();

	comm_up();
	if (n) {
		after_compute();
		NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, average ? ncclAvg : ncclSum, nc.comm,
		                         nc.cs), what);
		track(what);
		host_wait();
	}
	dist_stats.reductions++;
	dist_stats.wait_s += dist_now() - t0;
}

void dist_nccl_bcast(float *buf, size_t n)
{
	double t0 = dist_now();

	comm_up();
	if (n) {
		after_compute();
		NCCL_CHECK(ncclBroadcast(buf, buf, n, ncclFloat, 0, nc.comm, nc.cs), "ncclBroadcast");
		track("ncclBroadcast");
		host_wait();
	}
	dist_stats.wait_s += dist_now() - t0;
}

/* ---- host collectives of launches without MPI --------------------------- */

static void *dscratch(size_t bytes)
{
	if (bytes > nc.dbuf_n) {
		if (nc.dbuf)
			CUDA_CHECK(cudaFree(nc.dbuf));
		nc.dbuf = NULL;
		nc.dbuf_n = 0;
		CUDA_CHECK(cudaMalloc(&nc.dbuf, bytes));
		nc.dbuf_n = bytes;
	}
	return nc.dbuf;
}

static void h2d(void *d, const void *h, size_t bytes)
{
	CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, nc.cs));
}

static void d2h_wait(void *h, const void *d, size_t bytes)
{
	CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, nc.cs));
	CUDA_CHECK(cudaStreamSynchronize(nc.cs));
}

void dist_nccl_host_reduce(void *buf, size_t n, int type, int op)
{
	double t0 = dist_now();
	size_t bytes = n * 8;       /* double and uint64 */
	void *d;

	comm_up();
	if (n == 0 || n > SIZE_MAX / 8)
		return;
	d = dscratch(bytes);
	h2d(d, buf, bytes);
	NCCL_CHECK(ncclAllReduce(d, d, n, type ? ncclUint64 : ncclFloat64, op ? ncclMax : ncclSum,
	                         nc.comm, nc.cs), "ncclAllReduce");
	track("ncclAllReduce of host values");
	d2h_wait(buf, d, bytes);
	dist_stats.wait_s += dist_now() - t0;
}

void dist_nccl_host_bcast(void *buf, size_t n)
{
	double t0 = dist_now();
	void *d;

	comm_up();
	if (n == 0)
		return;
	d = dscratch(n);
	if (cdp_dist_rank() == 0)
		h2d(d, buf, n);
	NCCL_CHECK(ncclBroadcast(d, d, n, ncclUint8, 0, nc.comm, nc.cs), "ncclBroadcast");
	track("ncclBroadcast of host bytes");
	d2h_wait(buf, d, n);
	dist_stats.wait_s += dist_now() - t0;
}

void dist_nccl_host_gather(const void *send, size_t n, void *recv)
{
	double t0 = dist_now();
	int j = cdp_dist_size(), r = cdp_dist_rank();
	unsigned char *d;

	comm_up();
	if (n == 0)
		return;
	if (n > SIZE_MAX / (size_t)j)
		cdp_dist_abort(1, "cannot gather %zu bytes from %d ranks: too many", n, j);
	d = dscratch(r == 0 ? n * (size_t)j : n);
	if (r == 0) {
		memmove(recv, send, n);
		NCCL_CHECK(ncclGroupStart(), "ncclGroupStart");
		for (int p = 1; p < j; p++)
			NCCL_CHECK(ncclRecv(d + (size_t)p * n, n, ncclUint8, p, nc.comm, nc.cs), "ncclRecv");
		NCCL_CHECK(ncclGroupEnd(), "ncclGroupEnd");
	} else {
		h2d(d, send, n);
		NCCL_CHECK(ncclSend(d, n, ncclUint8, 0, nc.comm, nc.cs), "ncclSend");
	}
	track("the gather of host bytes");
	if (r == 0)
		d2h_wait((unsigned char *)recv + n, d + n, n * (size_t)(j - 1));
	else
		CUDA_CHECK(cudaStreamSynchronize(nc.cs));
	dist_stats.wait_s += dist_now() - t0;
}
