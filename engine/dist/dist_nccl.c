/* dist_nccl.c: dist.h's reductions over NCCL (--allreduce nccl; built only
 * with CUDA): the communicator, made from a unique id that rank 0 sends by
 * MPI_Bcast or, when launched without MPI, through the rendezvous file
 * (dist_rdv.c); gradient buckets on a communication stream ordered by
 * events; the blocking float calls; the host collectives of launches
 * without MPI; and the watchdog (dist_watch.c) over what is queued.
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0), so that no
 * NCCL call can block the host where no timeout reaches it, init included
 * (a rank that never arrives). Any call may then return ncclInProgress;
 * nb() polls ncclCommGetAsyncError until the call is through (NCCL refuses
 * the next call on a communicator still in progress) and gives up after
 * the timeout.
 *
 * Threads. NCCL lets one thread at a time use a communicator (its "Thread
 * Safety" section), and the watchdog thread calls ncclCommGetAsyncError and
 * ncclCommAbort on the one the main thread uses. So every NCCL call holds
 * nc.api: the main thread's calls return at once (non-blocking), the
 * watchdog's health check only tries the lock, and its abort takes the lock
 * and keeps it, so that the main thread never touches the freed
 * communicator (it blocks there while the watchdog ends the process).
 *
 * Ordering. Buffers are written by ops on the backend's compute stream.
 * Every NCCL operation is queued on our stream `cs` after an event recorded
 * on the compute stream (compute -> comm); where its result is needed, an
 * event recorded on cs after it orders the rest: the compute stream waits
 * for it at cdp_dist_wait_all (comm -> compute, the host does not block),
 * the host waits for it in the blocking calls.
 *
 * The watchdog (dist_watch.h). Every operation queued on cs is pushed with
 * its name; the event of its slot is recorded on cs after it. The watchdog
 * thread queries the events (cudaEventQuery, on that thread only, so the
 * main thread's CUDA error state is never touched) and fires when the
 * oldest is older than CDP_DIST_TIMEOUT, failed, or ncclCommGetAsyncError
 * reports an error: it aborts the communicator (ncclCommAbort: NCCL's
 * kernels return, the device is not left spinning) and ends the job with
 * one line naming the rank (cdp_dist_abort), or after GRACE seconds by the
 * alarm should the abort hang.
 *
 * Not done: registering buffers with NCCL (ncclCommRegister), more than one
 * communication stream.
 */
#define _GNU_SOURCE             /* program_invocation_short_name */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "backend.h"
#include "cdp_error.h"
#include "cuda/cuda_kern.h"
#include "dist_int.h"
#include "dist/dist_rdv.h"
#include "dist/dist_watch.h"

#define GRACE 10                /* seconds for the abort before the alarm */

static struct {
	cdp_backend *be;
	ncclComm_t comm;
	pthread_mutex_t api;        /* held in every NCCL call (see Threads) */
	cudaStream_t cs;            /* communication stream */
	cudaEvent_t ready;          /* compute -> cs */
	cudaEvent_t joined;         /* cs -> compute, cs -> host */
	int have_stream, have_ev;
	cudaEvent_t ev[CDP_WATCH_SLOTS];    /* the watchdog's slots */
	cdp_watch *wd;
	char prefix[96];            /* "prog: rank R: " for the alarm's line */
	cdp_rdv rdv;                /* a launch without MPI: the rendezvous */
	char job[CDP_RDV_JOB_MAX + 1];
	int rdv_up;                 /* rank 0 wrote the file, not yet removed */
	void *dbuf;                 /* device scratch of the host collectives */
	size_t dbuf_n;
	void *wbuf;                 /* device 16-bit copy of a compressed bucket */
	size_t wbuf_n;
} nc = { .api = PTHREAD_MUTEX_INITIALIZER };

int dist_nccl_built(void) { return 1; }

static const char *base(const char *file)
{
	const char *b = strrchr(file, '/');

	return b ? b + 1 : file;
}

/* Rank 0 removes the rendezvous file once every rank has read it, or when
 * it fails before, so that no stale file is left. */
static void rdv_drop(void)
{
	if (nc.rdv_up) {
		nc.rdv_up = 0;
		cdp_rdv_remove(&nc.rdv);
	}
}

/* Aborts the communicator (once) so that NCCL's kernels return: on the
 * main thread's failure paths. */
static void comm_abort(void)
{
	ncclComm_t c;

	pthread_mutex_lock(&nc.api);
	c = nc.comm;
	nc.comm = NULL;
	if (c)
		ncclCommAbort(c);
	pthread_mutex_unlock(&nc.api);
	rdv_drop();
}

/* The start of every failure path of the main thread: when the watchdog
 * is already ending the process, wait for it (one message). */
static void claim(void)
{
	if (!cdp_watch_claim())
		cdp_watch_park();
}

static void cuda_fail(const char *file, int line, const char *call, cudaError_t rc)
{
	claim();
	rdv_drop();
	cdp_dist_abort(1, "%s:%d: %.*s: %s", base(file), line, (int)strcspn(call, "("), call,
	               cudaGetErrorString(rc));
}
#define CUDA_CHECK(call) do { \
	cudaError_t cc_rc_ = (call); \
	if (cc_rc_ != cudaSuccess) cuda_fail(__FILE__, __LINE__, #call, cc_rc_); \
} while (0)

static void nccl_fail(const char *file, int line, const char *call, ncclResult_t rc)
{
	char detail[512] = "";
	const char *last;

	claim();
	last = ncclGetLastError(NULL);
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
			claim();
			comm_abort();
			cdp_dist_abort(1, "%s did not finish within %g s: a peer rank died or hangs "
			               "(timeout set by CDP_DIST_TIMEOUT)", what, to);
		}
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&nc.api);
		if (!nc.comm || ncclCommGetAsyncError(nc.comm, &rc) != ncclSuccess)
			rc = ncclInternalError;
		pthread_mutex_unlock(&nc.api);
	}
	return rc;
}
/* `call` (on nc.comm) under nc.api, then until it is through. */
#define NCCL_CHECK(call, what) do { \
	ncclResult_t nc_rc_; \
	pthread_mutex_lock(&nc.api); \
	nc_rc_ = (call); \
	pthread_mutex_unlock(&nc.api); \
	nc_rc_ = nb(nc_rc_, (what)); \
	if (nc_rc_ != ncclSuccess) nccl_fail(__FILE__, __LINE__, #call, nc_rc_); \
} while (0)

/* ---- the watchdog's callbacks (dist_watch.h) ---------------------------- */

static int wd_enter(void *ctx, char *msg, size_t cap)
{
	cudaError_t q = cudaSetDevice(nc.be->device);     /* the events' device */

	if (q == cudaSuccess)
		return 0;
	snprintf(msg, cap, "the NCCL watchdog cannot bind GPU %d: %s", nc.be->device,
	         cudaGetErrorString(q));
	return -1;
}

static void wd_arm(void *ctx, int slot) { CUDA_CHECK(cudaEventRecord(nc.ev[slot], nc.cs)); }
static void wd_wait(void *ctx, int slot) { CUDA_CHECK(cudaEventSynchronize(nc.ev[slot])); }

static int wd_query(void *ctx, int slot, char *msg, size_t cap)
{
	cudaError_t q = cudaEventQuery(nc.ev[slot]);

	if (q == cudaSuccess)
		return 1;
	if (q == cudaErrorNotReady)
		return 0;
	snprintf(msg, cap, "%s", cudaGetErrorString(q));
	return -1;
}

/* Only tries nc.api: the main thread holds it for a moment at a time, and
 * the next wake-up looks again. */
static int wd_health(void *ctx, char *msg, size_t cap)
{
	ncclResult_t async = ncclSuccess;
	int bad = 0;

	if (pthread_mutex_trylock(&nc.api) != 0)
		return 0;
	if (nc.comm && ncclCommGetAsyncError(nc.comm, &async) == ncclSuccess &&
	    async != ncclSuccess && async != ncclInProgress) {
		const char *last = ncclGetLastError(NULL);
		snprintf(msg, cap, "NCCL reports an error: %s%s%s%s", ncclGetErrorString(async),
		         last && *last ? " (" : "", last && *last ? last : "", last && *last ? ")" : "");
		bad = -1;
	}
	pthread_mutex_unlock(&nc.api);
	return bad;
}

/* Takes nc.api and keeps it (see Threads). Should the main thread hold it
 * longer than a non-blocking call can take, the process ends without the
 * abort. */
static void wd_abort(void *ctx)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	if (pthread_mutex_timedlock(&nc.api, &ts) == 0 && nc.comm) {
		ncclCommAbort(nc.comm);
		nc.comm = NULL;
	}
	rdv_drop();
}

static void wd_die(void *ctx, const char *msg) __attribute__((noreturn));
static void wd_die(void *ctx, const char *msg)
{
	cdp_dist_abort(1, "%s", msg);
}

static void wd_start(void)
{
	cdp_watch_ops ops = {
		.enter = wd_enter, .arm = wd_arm, .query = wd_query, .wait = wd_wait,
		.health = wd_health, .abort = wd_abort, .die = wd_die, .prefix = nc.prefix
	};
	int rc;

	if (dist_timeout() <= 0)
		return;
	snprintf(nc.prefix, sizeof nc.prefix, "%s: rank %d: ", program_invocation_short_name,
	         cdp_dist_rank());
	if ((rc = cdp_watch_start(&nc.wd, &ops, dist_timeout(), GRACE)) != 0)
		cdp_dist_abort(1, "cannot start the NCCL watchdog: %s", cdp_strerror(rc));
}

/* After queuing `what` on cs: the watchdog tracks it. */
static void track(const char *what)
{
	if (nc.wd)
		cdp_watch_push(nc.wd, what);
}

/* ---- the communicator -------------------------------------------------- */

/* A launch without MPI: rank 0 writes the id to CDP_RENDEZVOUS, the others
 * read it (dist_rdv.h), waiting up to CDP_DIST_TIMEOUT. */
static void rdv_exchange(ncclUniqueId *id)
{
	char msg[1024];
	int rc;

	if (cdp_rdv_job_env(nc.job, sizeof nc.job) != 0)
		cdp_dist_abort(1, "the job id of the environment (CDP_JOB_ID, SLURM_*, TORCHELASTIC_*) "
		               "is longer than %d bytes: set a shorter CDP_JOB_ID", CDP_RDV_JOB_MAX);
	nc.rdv.path = getenv("CDP_RENDEZVOUS");
	nc.rdv.job = nc.job;
	nc.rdv.world = (uint32_t)cdp_dist_size();
	nc.rdv.timeout = dist_timeout();
	if (cdp_dist_rank() == 0)
		rc = cdp_rdv_publish(&nc.rdv, id, sizeof *id);
	else
		rc = cdp_rdv_fetch(&nc.rdv, id, sizeof *id);
	if (rc != 0) {
		cdp_rdv_explain(&nc.rdv, rc, msg, sizeof msg);
		cdp_dist_abort(1, "%s", msg);
	}
	nc.rdv_up = cdp_dist_rank() == 0;
}

/* The communicator, stream and events, at the first collective that needs
 * them (every rank makes the same calls in the same order, so every rank
 * comes here at the same collective). */
static void comm_up(void)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
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
	if (cdp_dist_env_launch())
		rdv_exchange(&id);
	else
		cdp_dist_bcast_bytes(&id, sizeof id);
	cfg.blocking = 0;
	NCCL_CHECK(ncclCommInitRankConfig(&nc.comm, cdp_dist_size(), id, cdp_dist_rank(), &cfg),
	           "ncclCommInitRankConfig (waiting for every rank to join)");
	/* every rank has read the file once the communicator is up: NCCL's
	 * bootstrap needs each rank to reach rank 0's address in the id */
	rdv_drop();
	/* communication first when both streams have work ready */
	CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	CUDA_CHECK(cudaStreamCreateWithPriority(&nc.cs, cudaStreamNonBlocking, hi));
	nc.have_stream = 1;
	CUDA_CHECK(cudaEventCreateWithFlags(&nc.ready, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&nc.joined, cudaEventDisableTiming));
	for (int i = 0; i < CDP_WATCH_SLOTS; i++)
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
	cdp_watch_stop(nc.wd);
	nc.wd = NULL;
	rdv_drop();
	if (nc.comm) {
		NCCL_CHECK(ncclCommFinalize(nc.comm), "ncclCommFinalize");
		NCCL_CHECK(ncclCommDestroy(nc.comm), "ncclCommDestroy");
		nc.comm = NULL;
	}
	if (nc.have_ev) {
		CUDA_CHECK(cudaEventDestroy(nc.ready));
		CUDA_CHECK(cudaEventDestroy(nc.joined));
		for (int i = 0; i < CDP_WATCH_SLOTS; i++)
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
	if (nc.wbuf)
		CUDA_CHECK(cudaFree(nc.wbuf));
	nc.wbuf = NULL;
	nc.wbuf_n = 0;
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

/* A compressed bucket (dist.h, "Compression") on cs: buf *= 1/j, rounded
 * into the 16-bit scratch, summed there by NCCL, widened back into buf.
 * One scratch serves every bucket: they follow each other on cs. It grows
 * to the largest bucket in the first step (cudaFree waits for the device). */
static void bucket16(float *buf, size_t n, int average, int comp)
{
	int prec = comp == CDP_DIST_COMP_BF16 ? CDP_PREC_BF16 : CDP_PREC_FP16;

	if (n > nc.wbuf_n) {
		if (nc.wbuf)
			CUDA_CHECK(cudaFree(nc.wbuf));
		nc.wbuf = NULL;
		nc.wbuf_n = 0;
		CUDA_CHECK(cudaMalloc(&nc.wbuf, n * sizeof(uint16_t)));
		nc.wbuf_n = n;
	}
	if (average)
		cdk_scale(nc.cs, buf, 1.0f / (float)cdp_dist_size(), n);
	cdk_to_half(nc.cs, prec, buf, nc.wbuf, n);
	NCCL_CHECK(ncclAllReduce(nc.wbuf, nc.wbuf, n,
	                         comp == CDP_DIST_COMP_BF16 ? ncclBfloat16 : ncclFloat16, ncclSum,
	                         nc.comm, nc.cs), "ncclAllReduce");
	track("ncclAllReduce of a compressed gradient bucket");
	cdk_from_half(nc.cs, prec, nc.wbuf, buf, 0.0f, n);
}

void dist_nccl_bucket(float *buf, size_t n, int average, int comp)
{
	comm_up();
	if (n == 0)
		return;
	after_compute();
	if (comp) {
		bucket16(buf, n, average, comp);
		return;
	}
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
		ncclResult_t rc, end;
		memmove(recv, send, n);
		/* the whole group under nc.api: one thread issues a group's calls */
		pthread_mutex_lock(&nc.api);
		rc = ncclGroupStart();
		for (int p = 1; p < j && rc == ncclSuccess; p++)
			rc = ncclRecv(d + (size_t)p * n, n, ncclUint8, p, nc.comm, nc.cs);
		end = ncclGroupEnd();
		pthread_mutex_unlock(&nc.api);
		if ((rc = nb(rc == ncclSuccess ? end : rc, "the gather of host bytes")) != ncclSuccess)
			nccl_fail(__FILE__, __LINE__, "ncclGroupStart/ncclRecv/ncclGroupEnd", rc);
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
