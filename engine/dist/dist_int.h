/* dist_int.h: what the two halves of dist.h share; private to them.
 * dist_mpi.c makes every MPI call (start-up, the check macro, the watchdog,
 * the blocking collectives and the checked calls below); dist_ring.c holds
 * the reductions in flight (the ring, MPI_Iallreduce ops, the buckets) and
 * reaches MPI only through these calls. Keeping every MPI_CHECK in
 * dist_mpi.c keeps failures reading "dist_mpi.c:LINE: MPI_Call: text", as
 * dist.h documents. Not a contract: only dist_mpi.c and dist_ring.c include
 * it.
 */
#ifndef CDP_DIST_INT_H
#define CDP_DIST_INT_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "dist/dist.h"

/* Communication counters of the calling thread (dist.h, cdp_dist_stats);
 * defined in dist_mpi.c, added to by both files. */
extern cdp_dist_stats dist_stats;

/* CLOCK_MONOTONIC in seconds. */
double dist_now(void);

/* ---- in dist_mpi.c: checked MPI calls on our communicator. A failure
 * reports and calls MPI_Abort (cdp_dist_abort); none returns an error. */

/* MPI_Test / MPI_Testall: 1 when complete (the request becomes
 * MPI_REQUEST_NULL), else 0. */
int  dist_test(MPI_Request *req);
int  dist_testall(int n, MPI_Request *req);
/* MPI_Waitany over req[0..n) under the watchdog, which names `what` if it
 * fires. Returns the index completed (now MPI_REQUEST_NULL in req) or
 * MPI_UNDEFINED. */
int  dist_waitany(int n, MPI_Request *req, const char *what);
/* n values to the right neighbour (rank + 1) / from the left one (rank - 1),
 * with tag `tag`: floats for comp CDP_DIST_COMP_NONE, else 16-bit ones. */
void dist_isend(const void *buf, int n, int comp, int tag, MPI_Request *req);
void dist_irecv(void *buf, int n, int comp, int tag, MPI_Request *req);
/* In-place sum of buf[0..n) over every rank, started without blocking:
 * floats, or 16-bit values of the type comp under dist_comp_sum16. */
void dist_iallreduce(void *buf, int n, int comp, MPI_Request *req);
/* The same, blocking, for any n (parts of at most INT_MAX floats), under
 * the watchdog as "MPI_Allreduce". */
void dist_allreduce_sum(float *buf, size_t n);

/* The watchdog over a wait that makes no MPI call itself (the main
 * thread's wait for a bucket the communication thread reduces): between
 * enter and leave it fires after CDP_DIST_TIMEOUT, naming `what`, as over
 * a blocking MPI call. One wait at a time: the main thread's. */
void dist_watch_enter(const char *what);
void dist_watch_leave(void);
/* The watchdog's timeout in seconds (0: none), for dist_nccl.c. */
double dist_timeout(void);
/* 1 when another thread may make MPI calls while this one makes none
 * (MPI_THREAD_SERIALIZED), for dist_ring.c's communication thread. */
int  dist_serialized(void);

/* One line "prog: rank R: message" to stderr, in one write. */
void dist_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- in dist_beat.c: heartbeats (see there); no MPI calls ------------ */

#define DIST_HOST_NAME 64       /* bytes per host name, with its '\0' */
/* Rank 0: listens on an ephemeral port of an address the other ranks
 * reach (loopback when all_local); 0, or -1 (no heartbeats). */
int  dist_beat_listen(int all_local, uint32_t *addr, uint16_t *port);
/* Every rank, after rank 0's listen: connects to rank 0 (ranks > 0; a
 * failure is said in one line and leaves this rank unwatched) and starts
 * the thread; call a barrier after it, so that rank 0 outlives the
 * connects. names: size * DIST_HOST_NAME bytes, kept. timeout <= 0 or
 * port 0: nothing. 0 or an errno value. */
int  dist_beat_start(int rank, int size, const char *names, uint32_t addr, uint16_t port,
                     double timeout);
/* Tells the other side this rank leaves (ends the job itself), so that it
 * is not reported lost; any thread. */
void dist_beat_quit(void);
/* Joins the thread, says goodbye, closes everything. */
void dist_beat_stop(void);

/* ---- in dist_comp.c: the 16-bit formats (dist.h, "Compression") ---- */

/* float -> fp16 / bf16 bits, to nearest, ties to even; and back, exact. */
uint16_t dist_fp16_bits(float x);
float    dist_fp16_float(uint16_t h);
uint16_t dist_bf16_bits(float x);
float    dist_bf16_float(uint16_t h);
/* comp is CDP_DIST_COMP_FP16 or _BF16 in all four.
 * pack:   x[i] /= div (skipped for div 1), then w[i] = round(x[i]);
 * unpack: x[i] = w[i] widened;
 * accum:  x[i] += in[i] widened, then w[i] = round(x[i]) (the ring's add);
 * sum16:  inout[i] = round(in[i] + inout[i]), both widened (MPI's op). */
void dist_comp_pack(int comp, float *x, uint16_t *w, size_t n, float div);
void dist_comp_unpack(int comp, const uint16_t *w, float *x, size_t n);
void dist_comp_accum(int comp, float *x, const uint16_t *in, uint16_t *w, size_t n);
void dist_comp_sum16(int comp, const uint16_t *in, uint16_t *inout, size_t n);

/* ---- in dist_ring.c ------------------------------------------------- */

/* 1 while any reduction is in flight (settings may not change then). */
int  dist_busy(void);
/* Before the main thread makes an MPI call: waits until the communication
 * thread has finished the buckets handed to it (dist_ring.c). */
void dist_quiesce(void);
/* For cdp_dist_finalize: finishes the reductions in flight (starts no
 * bucket), drops the bucket registration and frees the ring's scratch. */
void dist_ring_finalize(void);
/* Drops the bucket registration (none may be in flight). */
void dist_buckets_drop(void);
/* cdp_dist_allreduce on host memory, whatever the backend. */
int  dist_host_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average);

/* ---- in dist_dev.c: device buffers ----------------------------------- */

enum { DIST_HOST = 0, DIST_STAGE = 1, DIST_NCCL = 2 };
/* How float buffers reduced with `algo` move (dist.h, "Device buffers"):
 * DIST_HOST also with one process, where nothing moves at all. */
int  dist_dev_mode(cdp_dist_algo algo);
struct cdp_backend *dist_dev_backend(void);
/* Staged blocking calls on a device buffer of n floats. */
int  dist_dev_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average);
int  dist_dev_bcast(float *buf, size_t n);
/* Buckets: the pinned host mirror of the device block dev[0..n) the
 * buckets are registered over (NULL: out of memory), the copy of a ready
 * bucket's range [off, off + n) down to it, and of the reduced range back
 * up. */
float *dist_dev_mirror(float *dev, size_t n);
void dist_dev_down(size_t off, size_t n);
void dist_dev_up(size_t off, size_t n);

/* ---- in dist_nccl.c (HAVE_CUDA; elsewhere every entry aborts) --------- */

int  dist_nccl_built(void);
/* The communicator's resources, before the backend goes. */
void dist_nccl_release(void);
/* Blocking, device buffers. */
void dist_nccl_allreduce(float *buf, size_t n, int average, const char *what);
void dist_nccl_bcast(float *buf, size_t n);
/* A bucket: queued on the communication stream after what the compute
 * stream holds now; join: the compute stream waits for every reduction
 * queued so far. */
void dist_nccl_bucket(float *buf, size_t n, int average, int comp);
void dist_nccl_join(void);
/* Launches without MPI: the host collectives through NCCL. op 0 sum,
 * 1 max; type 0 double, 1 uint64. */
void dist_nccl_host_reduce(void *buf, size_t n, int type, int op);
void dist_nccl_host_bcast(void *buf, size_t n);
void dist_nccl_host_gather(const void *send, size_t n, void *recv);

#endif
