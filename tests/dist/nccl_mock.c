/* nccl_mock.c: a stand-in for the CUDA runtime and NCCL calls that
 * dist_nccl.c makes, linked into tests/dist/test_nccl_mock ahead of the
 * real libraries, so that dist_nccl.c's control flow runs on a machine
 * without a GPU: the rendezvous, the non-blocking init polled to its end,
 * the watchdog over events, the aborts and the messages. Nothing is
 * reduced: every rank keeps its own data; the test checks what the ranks
 * say and how they end, not sums.
 *
 * The "device" runs every queued operation at once, except as the
 * environment asks:
 *   CDP_MOCK_HANG=k    the k-th collective (ncclAllReduce, ncclBroadcast,
 *                      ncclSend, ncclRecv; from 1) never completes: events
 *                      recorded after it never complete, and synchronizing
 *                      on them or on a stream blocks for ever;
 *   CDP_MOCK_ASYNC=k   after the k-th collective, ncclCommGetAsyncError
 *                      reports ncclRemoteError (a peer died);
 *   CDP_MOCK_INIT=hang ncclCommInitRankConfig stays in progress for ever;
 *                      otherwise it is through once every rank has called
 *                      it, as NCCL's bootstrap is (each rank leaves a file
 *                      "joined.RANK" in CDP_MOCK_DIR and waits for all);
 *   CDP_MOCK_MARK=file each ncclCommAbort appends "abort\n" to file.
 * It also checks the calling discipline NCCL asks for, and ends the process
 * with status 3 (and a "mock:" line) when broken: two threads inside NCCL
 * calls on the communicator at once (each call lingers 100 us to widen the
 * window), a call on a communicator already aborted or destroyed, a new
 * call while the previous one is still in progress, or a blocking
 * communicator asked for.
 */
#include <config.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

unsigned long long cdp_mock_id_hash;    /* FNV-1a of the id init received */

struct CUstream_st { int unused; };
struct CUevent_st { int never; };
struct ncclComm { int dead, busy, polls, nranks, joining; };

static atomic_int inside;
static int hung, ncoll, async_after = -1;

static void broken(const char *what)
{
	char line[256];
	int k = snprintf(line, sizeof line, "mock: %s\n", what);
	ssize_t w = write(2, line, k > 0 ? (size_t)k : 0);

	(void)w;
	_exit(3);
}

static void linger(void)
{
	struct timespec ts = { 0, 100 * 1000 };

	nanosleep(&ts, NULL);
}

static int env_int(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : -1;
}

static void joined_path(int rank, char *p, size_t cap)
{
	const char *d = getenv("CDP_MOCK_DIR");

	snprintf(p, cap, "%s/joined.%d", d ? d : ".", rank);
}

/* Every rank has called init. */
static int all_joined(int n)
{
	char p[512];

	for (int r = 0; r < n; r++) {
		joined_path(r, p, sizeof p);
		if (access(p, F_OK) != 0)
			return 0;
	}
	return 1;
}

/* Every NCCL call on a communicator: one thread at a time, never on a dead
 * one, never while the previous call is in progress (unless polling). */
static void enter(ncclComm_t c, int poll)
{
	if (atomic_fetch_add(&inside, 1) != 0)
		broken("two threads inside NCCL calls at once");
	if (c && c->dead)
		broken("an NCCL call on an aborted or destroyed communicator");
	if (c && c->busy && !poll)
		broken("an NCCL call while the previous one is in progress");
	linger();
}

static ncclResult_t leave(ncclResult_t rc)
{
	atomic_fetch_sub(&inside, 1);
	return rc;
}

/* ---- CUDA ---------------------------------------------------------------- */

cudaError_t cudaSetDevice(int device) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "mock CUDA error" : "no error"; }

cudaError_t cudaDeviceGetStreamPriorityRange(int *lo, int *hi)
{
	*lo = 0;
	*hi = -1;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int prio)
{
	return (*s = calloc(1, sizeof **s)) ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	return (*e = calloc(1, sizeof **e)) ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	e->never = hung;
	return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) { return e->never ? cudaErrorNotReady : cudaSuccess; }

static void forever(void)
{
	for (;;)
		pause();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (e->never)
		forever();
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	if (hung)
		forever();
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n) { return (*p = malloc(n)) ? cudaSuccess : cudaErrorMemoryAllocation; }

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st)
{
	memmove(d, s, n);
	return cudaSuccess;
}

/* ---- NCCL ---------------------------------------------------------------- */

const char *ncclGetErrorString(ncclResult_t rc)
{
	return rc == ncclRemoteError ? "remote process exited or there was a network error" :
	       rc == ncclInProgress ? "NCCL operation in progress" : "mock NCCL error";
}

const char *ncclGetLastError(ncclComm_t c) { return "mock: the peer is gone"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof *id);
	snprintf(id->internal, sizeof id->internal, "mock id of pid %ld", (long)getpid());
	return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int n, ncclUniqueId id, int rank,
                                    ncclConfig_t *cfg)
{
	const char *init = getenv("CDP_MOCK_INIT");
	unsigned long long h = 1469598103934665603ull;
	char p[512];
	int fd;

	enter(NULL, 0);
	if (!cfg || cfg->blocking != 0)
		broken("a blocking communicator");
	for (size_t i = 0; i < sizeof id.internal; i++)
		h = (h ^ (unsigned char)id.internal[i]) * 1099511628211ull;
	cdp_mock_id_hash = h;
	if (!(*comm = calloc(1, sizeof **comm)))
		return leave(ncclSystemError);
	(*comm)->busy = 1;
	(*comm)->polls = init && strcmp(init, "hang") == 0 ? -1 : 5;
	(*comm)->nranks = n;
	(*comm)->joining = 1;
	joined_path(rank, p, sizeof p);
	if ((fd = open(p, O_WRONLY | O_CREAT, 0600)) < 0)
		broken("cannot leave the joined file (CDP_MOCK_DIR)");
	close(fd);
	async_after = env_int("CDP_MOCK_ASYNC");
	return leave(ncclInProgress);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *rc)
{
	enter(c, 1);
	if (c->joining && all_joined(c->nranks))
		c->joining = 0;
	if (c->busy && (c->joining || c->polls != 0)) {
		if (c->polls > 0)
			c->polls--;
		*rc = ncclInProgress;
	} else {
		c->busy = 0;
		*rc = async_after >= 0 && ncoll >= async_after ? ncclRemoteError : ncclSuccess;
	}
	return leave(ncclSuccess);
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
	const char *mark = getenv("CDP_MOCK_MARK");
	int fd;

	enter(NULL, 0);
	if (c->dead)
		broken("ncclCommAbort on a dead communicator");
	c->dead = 1;
	if (mark && (fd = open(mark, O_WRONLY | O_CREAT | O_APPEND, 0600)) >= 0) {
		if (write(fd, "abort\n", 6) != 6)
			broken("cannot write the mark");
		close(fd);
	}
	return leave(ncclSuccess);
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
	enter(c, 0);
	c->busy = 1;
	c->polls = 3;
	return leave(ncclInProgress);
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
	enter(c, 0);
	c->dead = 1;        /* kept, so that a later use is caught */
	return leave(ncclSuccess);
}

static ncclResult_t coll(ncclComm_t c)
{
	enter(c, 0);
	if (++ncoll == env_int("CDP_MOCK_HANG"))
		hung = 1;
	return leave(ncclSuccess);
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st)
{
	if (s != r)
		memmove(r, s, n * (t == ncclFloat ? 4 : 8));
	return coll(c);
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st)
{
	return coll(c);
}

ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st)
{
	return coll(c);
}

ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st)
{
	return coll(c);
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
