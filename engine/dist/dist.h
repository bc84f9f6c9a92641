/* dist.h: data-parallel communication for cdp-train (the only MPI user).
 *
 * j processes started by `mpirun -np J`, `srun` (PMI through Open MPI) or
 * alone (`./cdp-train`, an MPI singleton) each hold a full copy of the net
 * and sum their gradients after every step. With one process the same calls
 * report rank 0 of 1 and every reduction is a no-op, so callers need no
 * #ifdef and no special case. Nothing here includes <mpi.h>.
 *
 * Reductions (all in place, float sums unless said otherwise):
 *  - CDP_DIST_MPI:  MPI_Allreduce / MPI_Iallreduce (Open MPI picks the
 *    algorithm by size and rank count);
 *  - CDP_DIST_RING: our ring (Baidu / Horovod style): j-1 scatter-reduce
 *    steps, then j-1 all-gather steps, over MPI_Isend/MPI_Irecv with the
 *    left and right neighbour. The buffer is cut into j segments (the first
 *    n % j one float longer), each step moves one segment, and segments are
 *    sent in chunks (cdp_dist_set_chunk, default 1 MiB) with a few chunks in
 *    flight, so a large buffer overlaps sending, receiving and adding, and a
 *    chunk goes on to the next step as soon as it is reduced. Each rank sends
 *    2(j-1)/j * n floats.
 * Accuracy: each element of a ring sum is ((x_s + x_s+1) + ...) + x_s-1 for
 * the segment's start rank s, a fixed order, so the result is bitwise the
 * same run to run and on every rank (the all-gather copies the owner's
 * value). MPI may add in another order; both are recursive sums of j terms,
 * so each is within (j-1)u sum|x_i| of the exact sum (u = 2^-24), and ring
 * and mpi differ by at most 2(j-1)u sum|x_i| per element. With j <= 2 there
 * is one addition, so ring and mpi agree bitwise.
 *
 * Buckets and overlap: cdp_dist_buckets() registers the gradient block split
 * into buckets at layer boundaries. The trainer calls cdp_dist_layer_done(l)
 * from the cdp_net_backward callback; when the last layer of a bucket is done
 * (buckets finish in reverse layer order) its reduction starts without
 * blocking: MPI_Iallreduce for mpi; for ring, the non-blocking state machine
 * above. Who moves it on:
 *  - the communication thread (with more than one rank, when MPI grants
 *    MPI_THREAD_SERIALIZED, which cdp_dist_init asks for, and unless
 *    CDP_DIST_THREAD=0): a ready bucket is handed to it (a lock and a
 *    signal, no MPI call), and from then until cdp_dist_wait_all takes
 *    MPI back the thread alone calls MPI: it starts the bucket, tests
 *    what is in flight and, when nothing moved, sleeps 400 us (MPI's own
 *    waits spin, and the thread shares the core with the backward pass).
 *    cdp_dist_wait_all lets the thread end its current pass, then starts
 *    and finishes what is left itself, blocking in MPI_Waitany as below.
 *    Over TCP a message advances only while someone calls into MPI, so
 *    without it a reduction would move only between two layers' backward
 *    passes. The main thread makes no MPI call meanwhile: the blocking
 *    calls first wait for the thread's work (MPI_THREAD_SERIALIZED holds),
 *    and the order of the collectives stays the program order on every
 *    rank, because the buckets start in the same order everywhere.
 *  - otherwise the progress engine: cdp_dist_progress() (between layers)
 *    moves it on with MPI_Test on the main thread.
 * cdp_dist_wait_all() before the optimizer step finishes everything;
 * cdp_dist_bucket_wait(b) waits for one bucket while the others go on, so
 * that the caller can apply the optimizer to it meanwhile.
 * The serial baseline (overlap 0) ignores cdp_dist_layer_done and reduces
 * the same buckets, in the same order and with the same segmentation, in
 * cdp_dist_wait_all, so all modes give bitwise the same gradients.
 *
 * Compression (cdp_dist_set_compress; cdp-train --grad-compress): the
 * gradient buckets may travel as 16-bit floats, fp16 (IEEE binary16) or
 * bf16, as PyTorch DDP's fp16/bf16_compress_hook and Horovod's
 * Compression.fp16 do: each rank divides its gradients by j in float32
 * (when averaging), rounds them to the 16-bit type (to nearest, ties to
 * even; dist_comp.c), the reduction moves and adds 16-bit values, and
 * the result comes back to float32 exactly. Half the bytes move. Where the
 * rounding happens:
 *  - ring: a received chunk is widened and added to the receiver's own
 *    float32 values, and the float32 partial sum is rounded once before it
 *    is sent on; the segment's owner rounds the full sum once, and every
 *    rank, the owner too, takes that rounded value. So element e of
 *    segment s gets round(... round(round(x_s) + x_s+1) ... + x_s-1): one
 *    rounding per rank, j in all (with j = 2: round(round(a) + b)).
 *  - mpi: Open MPI 4.1 has no 16-bit float type, so the values travel as
 *    MPI_UINT16_T under a user-defined commutative op that widens both
 *    operands, adds them in float32 and rounds: round(round(a) + round(b))
 *    with 2 ranks; each addition of more rounds again.
 *  - nccl: ncclFloat16 / ncclBfloat16 after a device cast (the division
 *    by j is a multiplication by 1/j there), NCCL's own order of sums.
 * A compressed result therefore differs from the float32 sum (by about
 * 2^-11 (fp16) or 2^-8 (bf16) relative per rounding), so a compressed job
 * strays from one rank by that much, where an uncompressed one differs
 * from one rank only by the order of its sums (2 ranks of batch b add two
 * partial sums, one process the 2b samples: about 1e-8 relative, never
 * bitwise the same); it is still the same on every rank
 * (the ring's all-gather, MPI's symmetric op with 2 ranks) and the same run
 * to run. fp16 overflows from 65520 (after the division by j): such an
 * element becomes inf and stays inf, and the caller's finiteness check of
 * the reduced gradients sees it (cdp-train: a skipped step under the loss
 * scaler or --nan-policy). Only the buckets are compressed; the blocking
 * reductions (parameter averaging, broadcasts) stay float32.
 *
 * Errors: MPI runs with MPI_ERRORS_RETURN and every call is checked; a
 * failure prints "cdp-train: rank R: dist_mpi.c:LINE: MPI_Call: MPI's text"
 * and calls MPI_Abort, which ends every rank. A watchdog thread aborts the
 * job the same way when one blocking call (a wait, collective or blocking
 * reduction) has not finished after CDP_DIST_TIMEOUT seconds (default 60,
 * 0 = off), because a collective whose peer died can spin forever on shared
 * memory; with 2 ranks its message names the other rank and its host (the
 * one late, since the waiting rank has entered the call). (A rank killed outright is caught sooner: mpirun ends the job as
 * soon as a rank exits without MPI_Finalize.) Raise the timeout where ranks
 * may legitimately wait longer, e.g. while rank 0 alone writes a large
 * checkpoint and the others wait in the next collective. Functions that take arguments return 0 or CDP_EINVAL / CDP_ENOMEM
 * (lib/cdp_error.h) for a caller error; an MPI failure never returns.
 *
 * Threads: call everything from the thread that called cdp_dist_init (the
 * communication thread is this layer's own). Do not touch a buffer while
 * its reduction is in flight.
 *
 * Device buffers (cdp_dist_set_backend). The trainer keeps its parameters,
 * gradients and batchnorm buffers in a backend's device memory, so once it
 * has named its backend the FLOAT buffers of cdp_dist_allreduce,
 * cdp_dist_average, cdp_dist_bcast and the buckets are that backend's device
 * pointers (the byte, double and uint64 collectives keep host memory). How
 * they move depends on the algorithm (dist_dev.c, dist_nccl.c):
 *  - CDP_DIST_MPI, CDP_DIST_RING on a GPU: staged. A bucket's range is
 *    copied to a pinned host mirror when the bucket is ready (be->to_host,
 *    which waits for the backward ops queued before it), reduced there by
 *    the host code above while backward goes on, and the block is copied
 *    back in cdp_dist_wait_all. The blocking calls stage their whole buffer
 *    the same way (not in chunks: the ring's segmentation depends on the
 *    size), so staged results equal host results bit for bit. Staging needs
 *    no GPU of one's own: several ranks may share one GPU, which is how the
 *    multi-rank path is tested on one GPU. CDP_DIST_STAGE=1 stages on the
 *    CPU backend too (its device memory is host memory), so that the CPU
 *    tests run this code.
 *  - CDP_DIST_NCCL (builds with CUDA; one GPU per rank): ncclAllReduce on a
 *    communication stream of its own. A bucket's reduction is queued when
 *    the bucket is ready, after an event recorded on the backend's compute
 *    stream (compute -> comm); cdp_dist_wait_all does not block the host:
 *    the compute stream waits for an event recorded after the last
 *    reduction (comm -> compute), so the optimizer step queued next reads
 *    reduced gradients. The blocking float calls (averaging, broadcasts)
 *    are ncclAllReduce / ncclBroadcast that the host waits for. The
 *    communicator is made at the first collective that needs it, from a
 *    unique id made by rank 0 and sent with MPI_Bcast, or, when launched
 *    without MPI, through the rendezvous file (cdp_dist_init). Its watchdog
 *    thread checks every min(1 s, timeout / 4) that no queued NCCL
 *    operation is older than CDP_DIST_TIMEOUT (cudaEventQuery) and that
 *    ncclCommGetAsyncError reports no error; otherwise it calls
 *    ncclCommAbort and ends the job with a message naming the rank.
 * With one process every reduction stays a no-op and nothing is copied.
 */
#ifndef CDP_DIST_H
#define CDP_DIST_H

#include <stddef.h>
#include <stdint.h>

typedef enum cdp_dist_algo {
	CDP_DIST_MPI = 0,
	CDP_DIST_RING = 1,
	CDP_DIST_NCCL = 2     /* device buffers of a GPU backend only */
} cdp_dist_algo;

struct cdp_backend;

/* Starts MPI (MPI_Init_thread, SERIALIZED), finds rank and size, and the local
 * rank and size among the processes on this node (MPI_Comm_split_type
 * SHARED; to pick a GPU). Reads CDP_DIST_TIMEOUT (seconds, a decimal number
 * >= 0) and starts the watchdog; with more than one rank under MPI, reads
 * CDP_DIST_HEARTBEAT (seconds >= 0, default 10, 0 = off; rank 0's value
 * holds for all) and starts the
 * heartbeat (dist_beat.c: rank 0 names, in one line, a rank whose process
 * died or that is silent that long, and its host; the others so name rank
 * 0). Returns 0, or CDP_ERANGE / CDP_ESYNTAX for a bad CDP_DIST_TIMEOUT or
 * CDP_DIST_HEARTBEAT, a CDP_DIST_THREAD or CDP_DIST_STAGE other than 0
 * or 1, a CDP_JOB_ID longer than 251 bytes or with a byte that is no
 * printable ASCII (cdp_dist_bad_env names it; the caller reports and
 * exits), or CDP_EINVAL if already initialised.
 * A process that no MPI launcher started (below) starts MPI with the
 * shared-memory transport and PMIx's shared store off (OMPI_MCA_btl=self,
 * PMIX_MCA_gds=hash, unless set: a world of one needs neither, and their
 * backing files failed under ulimit -f), after one warning line on stderr
 * when the open-file limit is below 32, which Open MPI's start-up, which
 * ends the process itself, cannot live within.
 * Launched without MPI: when MPI finds one process (a singleton) that no
 * MPI launcher started (OMPI_COMM_WORLD_SIZE unset before MPI_Init, and
 * none of PMIX_RANK, PMI_RANK, PMI_SIZE, nor SLURM_STEP_ID with
 * SLURM_PROCID, unless TORCHELASTIC_RUN_ID says torchrun started it: then
 * those are the srun task's that started torchrun, hidden from MPI_Init
 * (PMIX_*, PMI_*, SLURM_*, put back after it); under mpirun and srun
 * these variables are the user's leftovers and ignored) but
 * CDP_RENDEZVOUS names a file and WORLD_SIZE > 1, RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE (default WORLD_SIZE: one node) and LOCAL_RANK (default
 * RANK mod LOCAL_WORLD_SIZE) give rank, size, local size and local rank (as
 * torchrun and similar launchers set them), and every collective goes
 * through NCCL, so the caller must name a
 * GPU backend and CDP_DIST_NCCL before its first collective. Rank 0 writes
 * NCCL's unique id to the file (cdp-rendezvous(5), dist_rdv.h: with the
 * job's id, written whole under a temporary name and linked into place;
 * another job's leftover file is replaced, one of this job, or any when
 * this job has no id, refused) and removes it once the communicator is up; the
 * others wait for it, past another job's file, for up to CDP_DIST_TIMEOUT. CDP_ESYNTAX / CDP_ERANGE for a malformed or
 * inconsistent variable, whose name cdp_dist_bad_env returns; CDP_ESYNTAX
 * naming CDP_RENDEZVOUS when WORLD_SIZE > 1 comes without it (each process
 * would run alone), and CDP_ERANGE naming OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_STEP_NUM_TASKS or SLURM_NTASKS (in a job step) when that launcher's
 * variable says more than 1 but MPI_Init gave a world of 1 (Open MPI could
 * not join it; each process would run alone). cdp_dist_bad_env_want says
 * what the variable allows. */
int  cdp_dist_init(int *argc, char ***argv);
const char *cdp_dist_bad_env(void);
/* What that variable allows ("0 or 1"), or NULL where the code says it. */
const char *cdp_dist_bad_env_want(void);
/* Finishes reductions in flight (starts no bucket), stops the watchdog,
 * MPI_Finalize. */
void cdp_dist_finalize(void);
/* Prints "PROG: rank R: message" (PROG as set below, default cdp-train) to
 * stderr, removes this process's output temporaries (cdp_out_unlink_all:
 * nothing unwinds after it) and ends every rank with exit status `code`
 * (MPI_Abort, whose SIGTERM to the other ranks runs their cdp_out handler;
 * plain exit before init or after finalize). */
void cdp_dist_abort(int code, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 2, 3)));
/* The program name used in messages (not copied; default "cdp-train"). */
void cdp_dist_set_prog(const char *prog);

int  cdp_dist_rank(void);        /* 0 .. size-1; 0 before init */
int  cdp_dist_size(void);        /* j; 1 before init */
int  cdp_dist_local_rank(void);  /* rank among the processes on this node */
int  cdp_dist_local_size(void);
/* The ranks on this node whose CPU affinity shares a CPU with this rank's,
 * itself included (cdp_thread_sharing over the node's masks, gathered at
 * init under MPI; cdp_dist_local_size in a launch without MPI, where the
 * masks are not exchanged): what the default --threads divides this
 * rank's CPUs by. */
int  cdp_dist_local_share(void);
/* How many ranks of this node (itself included) pass the same n bytes
 * (1 to 256), e.g. the UUID of the GPU each took: a collective of the
 * node's ranks under MPI, every one of them must call it. -1 where the
 * ranks cannot be asked (a launch without MPI, before init). */
int  cdp_dist_local_same(const unsigned char *id, size_t n);

/* Settings, the same on every rank. The default algorithm is used by
 * cdp_dist_average and the buckets (default CDP_DIST_RING). Chunk: floats
 * per ring message, >= 1 (default 262144 = 1 MiB). Timeout in seconds,
 * 0 = no watchdog; called after cdp_dist_init it overrides CDP_DIST_TIMEOUT.
 * Return 0 or CDP_EINVAL (also while a reduction is in flight). */
int  cdp_dist_set_algo(cdp_dist_algo algo);
cdp_dist_algo cdp_dist_get_algo(void);
int  cdp_dist_set_chunk(size_t floats);
int  cdp_dist_set_timeout(double seconds);
/* Gradient compression (see "Compression"): the buckets registered from
 * now on (cdp_dist_buckets) travel as this type; default none. 0, or
 * CDP_EINVAL for another value or while a reduction is in flight. */
typedef enum cdp_dist_comp {
	CDP_DIST_COMP_NONE = 0,
	CDP_DIST_COMP_FP16 = 1,
	CDP_DIST_COMP_BF16 = 2
} cdp_dist_comp;
int  cdp_dist_set_compress(cdp_dist_comp comp);
/* "none", "fp16" or "bf16" -> *comp; CDP_ESYNTAX otherwise. */
int  cdp_dist_comp_parse(const char *s, cdp_dist_comp *comp);
const char *cdp_dist_comp_name(cdp_dist_comp comp);
/* Device buffers (see above): be's device memory from now on, or host
 * memory again for NULL or a CPU backend (unless CDP_DIST_STAGE=1). Drops
 * the bucket registration and frees what the previous backend's staging or
 * communicator held, so call it before cdp_dist_buckets and again with NULL
 * before destroying the backend (the algorithm CDP_DIST_NCCL then becomes
 * the default CDP_DIST_RING). Not collective. 0, or CDP_EINVAL while a
 * reduction is in flight. */
int  cdp_dist_set_backend(struct cdp_backend *be);
/* 1 when CDP_DIST_NCCL can be set: a build with CUDA and a GPU backend
 * named; cdp_dist_set_algo refuses it otherwise (CDP_EINVAL). */
int  cdp_dist_nccl_usable(void);
/* 1 when the float buffers reduced with the current algorithm are staged
 * through host memory (for the logs). */
int  cdp_dist_staged(void);
/* 1 when launched without MPI (see cdp_dist_init). */
int  cdp_dist_env_launch(void);
/* "mpi", "ring" or "nccl" -> *algo; CDP_ESYNTAX otherwise. */
int  cdp_dist_algo_parse(const char *s, cdp_dist_algo *algo);
const char *cdp_dist_algo_name(cdp_dist_algo algo);
/* What the layer was compiled against, for --version: "NCCL: 2.21.5" (or
 * "NCCL: not built") and "Open MPI: 4.1.4", on two lines. */
const char *cdp_dist_features(void);

/* Blocking collectives, called by every rank with the same n (and root).
 * allreduce: buf[0..n) = sum over ranks (divided by j if average). */
int  cdp_dist_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average);
/* Parameter averaging: buf = sum / j with the default algorithm. */
int  cdp_dist_average(float *buf, size_t n);
/* Broadcast n floats (initial weights) or bytes from rank 0. */
int  cdp_dist_bcast(float *buf, size_t n);
int  cdp_dist_bcast_bytes(void *buf, size_t n);
/* Gathers n bytes from every rank into recv[j * n] on rank 0, in rank
 * order (recv is not touched elsewhere and may be NULL there): the ranks'
 * local state for a checkpoint. Point-to-point in parts of at most INT_MAX
 * bytes, so n may be any size. Returns 0, or CDP_EINVAL for NULL buffers
 * or while a reduction is in flight. */
int  cdp_dist_gather_bytes(const void *send, size_t n, void *recv);
/* Exact-order sums for metrics: loss sums (double), confusion matrices and
 * counts (uint64). */
int  cdp_dist_sum_f64(double *buf, size_t n);
int  cdp_dist_sum_u64(uint64_t *buf, size_t n);
/* Maximum of one double over ranks (e.g. the slowest step time). */
int  cdp_dist_max_f64(double *v);
/* Every rank agrees it failed: 1 on every rank when flag is nonzero on any
 * rank, else 0 (flag != 0 with one process). Collective: each rank calls it
 * at the same point, so that all stop together and none waits in a later
 * collective for a rank that gave up. A failed rank has said why itself.
 * Launched without MPI on no GPU backend (NCCL cannot run) a rank whose
 * flag is set gets 1 at once, telling no one: the others stop at their
 * watchdog. */
int  cdp_dist_any(int flag);
/* The options every rank must be given alike, compared with rank 0's
 * (dist_opts.c). A tool writes them as text, one "NAME\tVALUE\n" line per
 * option (cdp_dist_opt appends one, its value cut to 200 bytes; at most
 * CDP_DIST_OPTS_MAX bytes in all), in the same order on every rank;
 * cdp_dist_num writes a double so that it reads back the same.
 * cdp_dist_same_opts (collective; 0 with one process) returns 1 on every
 * rank when any rank's text is not rank 0's, and on such a rank puts the
 * first option that differs into msg: "NAME is not rank 0's: VALUE here,
 * VALUE there" (else msg is ""); the caller says it, with its host. */
#define CDP_DIST_OPTS_MAX 12288
void cdp_dist_opt(char *text, size_t cap, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
const char *cdp_dist_num(char *buf, size_t cap, double v);
int  cdp_dist_same_opts(const char *text, char *msg, size_t cap);
/* Rank 0's buffer to every rank (a checkpoint that only rank 0's host
 * holds): rank 0 passes rc0, its error reading the bytes (0 when *buf, *len
 * hold them, malloc'ed); the others pass 0 and get a malloc'ed copy in *buf,
 * *len. Returns 0 on every rank, or -1 on every rank with *mine this
 * rank's own error (rank 0's rc0, a rank's CDP_ENOMEM when it cannot hold
 * the bytes), 0 where another rank failed; on failure no rank keeps a
 * buffer. Collective (with one process: -1 and *mine = rc0 when rc0 != 0). */
int  cdp_dist_bcast_buf(int rc0, unsigned char **buf, size_t *len, int *mine);
void cdp_dist_barrier(void);

/* Registers buf[0 .. layer_off[nlayers]) for bucketed reduction. Layer l
 * owns floats [layer_off[l], layer_off[l+1]) (non-decreasing; layers without
 * parameters own nothing). Buckets are runs of consecutive layers filled
 * from the last layer backwards until they hold at least bucket_floats
 * floats (cdp-train's --bucket-mb: 25 MiB = 6553600 floats, or 1/8 of the
 * gradients when less, at least 1 MiB), the
 * first one (bucket 0, the last layers, ready first) already at
 * first_floats when that is smaller and not 0 (cdp-train: 1 MiB, as
 * PyTorch DDP's first bucket, so that communication starts early in the
 * backward pass); or, when nbuckets > 0, cut into about nbuckets buckets
 * of equal size instead. The cut decides when sums happen, not what they
 * are with 2 ranks (one addition, a + b); with more, the ring's segments
 * follow the buckets, so the order of the additions may change.
 * overlap 1: reduce each bucket as soon as its layers are done; 0: the
 * serial baseline, everything in cdp_dist_wait_all. average: divide by j.
 * Replaces an earlier registration (none may be in flight). Returns the
 * number of buckets (>= 1, at most nlayers), or CDP_EINVAL, CDP_ENOMEM, or
 * CDP_ERANGE for a bucket over 8 * INT_MAX floats. */
int  cdp_dist_buckets(float *buf, const size_t *layer_off, int nlayers, size_t first_floats,
                      size_t bucket_floats, int nbuckets, int overlap, int average);
/* Switches the registered buckets between overlap 1 and the serial
 * baseline 0 (as cdp_dist_buckets' overlap), between two steps: nothing
 * may be in flight. The gradients are the same bitwise either way, so a
 * run may measure both and keep the faster (cdp-train --overlap auto).
 * 0, or CDP_EINVAL (no buckets, in flight, overlap not 0 or 1). */
int  cdp_dist_set_overlap(int overlap);
/* 1 when the registered buckets are reduced by the communication thread
 * (see above), 0 with the progress engine (one process, overlap 0,
 * NCCL, CDP_DIST_THREAD=0, or an MPI without MPI_THREAD_SERIALIZED). */
int  cdp_dist_threaded(void);
/* Bucket b covers floats [*off, *off + *n) and layers [*l0, *l1). Bucket 0
 * holds the last layers (it is ready first). Returns 0 or CDP_EINVAL. */
int  cdp_dist_bucket_info(int b, size_t *off, size_t *n, int *l0, int *l1);
/* 0: not started this step, 1: in flight, 2: reduced; CDP_EINVAL. */
int  cdp_dist_bucket_state(int b);
/* When bucket b's latest reduction started and when its completion was
 * seen (CLOCK_MONOTONIC seconds, as cdp_now; 0 before the first, done 0
 * while in flight), kept past cdp_dist_wait_all until the bucket starts
 * again: a trace's spans (cdp-train --trace). Completion is seen at the
 * next call into the layer (a progress engine, see above), so done is an
 * upper bound. With NCCL both are host times of the queueing. 0 or
 * CDP_EINVAL. */
int  cdp_dist_bucket_times(int b, double *start, double *done);
/* Layer l's gradients are final for this step (the backward callback). */
int  cdp_dist_layer_done(int l);
/* Bucket b is final: start its reduction now (overlap mode). */
int  cdp_dist_bucket_ready(int b);
/* Moves reductions in flight on without blocking. */
void cdp_dist_progress(void);
/* 1 when cdp_dist_bucket_wait works: buckets registered on host memory
 * (the CPU backend; not staged through host memory, not NCCL, whose
 * reductions the host does not see end). */
int  cdp_dist_bucket_wait_ok(void);
/* Starts every bucket not yet started (in bucket order, as
 * cdp_dist_wait_all) and waits until bucket b is reduced; the others go
 * on meanwhile (on the communication thread, when it has them), so the
 * caller may use b's floats (cdp-train: the optimizer applied to each
 * bucket as soon as it is reduced) while later buckets are in flight.
 * cdp_dist_wait_all still ends the step. 0, or CDP_EINVAL (no such
 * bucket, or !cdp_dist_bucket_wait_ok()). Counted in wait_s, and in
 * grad_exposed_s when it blocked. */
int  cdp_dist_bucket_wait(int b);
/* Starts every bucket not yet started (in bucket order) and waits for all.
 * After it the whole block is reduced and the next step may begin. */
void cdp_dist_wait_all(void);

/* Time spent in communication on the calling thread since the last reset:
 * wait_s blocked in cdp_dist_wait_all and the blocking calls, progress_s in
 * the overlap calls (layer_done, bucket_ready, progress). Exposed
 * communication time = wait_s + progress_s; what the overlap hides is the
 * serial mode's exposed time minus this. The gradient buckets alone:
 * grad_s, the wall time during which a bucket's reduction was in flight
 * (from the call that started the first to the call that saw the last
 * finish, or the exit of the last bucket call when that came later, as it
 * does when the woken communication thread ran first), and grad_exposed_s,
 * the part of it spent inside the bucket calls, i.e. not hidden behind the
 * caller's backward pass
 * (grad_exposed_s <= grad_s; hidden fraction 1 - grad_exposed_s / grad_s;
 * with NCCL both are the host's time queueing). reductions: float
 * reductions finished (any algorithm, empty ones too). ring_bytes: bytes
 * this rank sent in ring reductions, about 2(j-1)/j * 4n each (what MPI
 * sends inside MPI_Allreduce is its own business; compressed, 2 bytes an
 * element). */
typedef struct cdp_dist_stats {
	double wait_s, progress_s;
	double grad_s, grad_exposed_s;
	uint64_t reductions, ring_bytes;
} cdp_dist_stats;
void cdp_dist_stats_get(cdp_dist_stats *s);
void cdp_dist_stats_reset(void);

#endif
