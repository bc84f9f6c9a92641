/* dist_dev.c: dist.h's float collectives on a backend's device memory
 * (cdp_dist_set_backend): which way a buffer moves (dist_dev_mode), and the
 * staged path that --allreduce mpi and ring take on a GPU.
 *
 * Staging: a device buffer is copied to pinned host memory (be->to_host,
 * which first waits for the compute ops queued before it), reduced there by
 * the host code of dist_ring.c / dist_mpi.c, and copied back
 * (be->to_device). The blocking calls stage the whole buffer at once
 * through one scratch buffer, grown to the largest size asked for (the
 * parameter block, in the trainer), because the ring's segmentation and
 * MPI's algorithm depend on the size: in chunks the sums would be added in
 * another order than the host path's. The buckets get a mirror of their
 * whole block: dist_ring.c registers them over the mirror, copies a
 * bucket's range down when the bucket is ready and the reduced block back
 * up in cdp_dist_wait_all. Two pinned buffers of the block's size (scratch
 * and mirror) is the memory this costs; nothing here needs the GPU to
 * belong to one rank, so several ranks may share one.
 *
 * The CPU backend's device memory is host memory, so with CDP_DIST_STAGE=1
 * the same code runs on the CPU (memcpy for the copies), which is how
 * `make check` covers it without a GPU.
 */
#include <config.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cdp_error.h"
#include "dist_int.h"

static struct {
	cdp_backend *be;
	int device;             /* buffers are device memory (or staged anyway) */
	float *scratch;         /* pinned, scratch_n floats: blocking calls */
	size_t scratch_n;
	float *mirror;          /* pinned, mirror_n floats: the buckets' block */
	size_t mirror_n;
	float *dev;             /* the buckets' device block */
} dv;

static int stage_forced(void)
{
	const char *v = getenv("CDP_DIST_STAGE");

	return v && strcmp(v, "1") == 0;
}

static int is_gpu(const cdp_backend *be) { return be && be->device >= 0; }

int dist_dev_mode(cdp_dist_algo algo)
{
	if (cdp_dist_env_launch() && !(is_gpu(dv.be) && algo == CDP_DIST_NCCL))
		cdp_dist_abort(1, "launched without MPI (CDP_RENDEZVOUS), every collective goes "
		               "through NCCL: run on a GPU (--device cuda) with --allreduce nccl");
	if (cdp_dist_size() == 1 || !dv.device)
		return DIST_HOST;
	return algo == CDP_DIST_NCCL ? DIST_NCCL : DIST_STAGE;
}

cdp_backend *dist_dev_backend(void) { return dv.be; }

int cdp_dist_staged(void) { return dist_dev_mode(cdp_dist_get_algo()) == DIST_STAGE; }

int cdp_dist_nccl_usable(void) { return dist_nccl_built() && is_gpu(dv.be); }

static void release(void)
{
	if (dv.scratch)
		dv.be->host_free(dv.be, dv.scratch);
	if (dv.mirror)
		dv.be->host_free(dv.be, dv.mirror);
	dv.scratch = dv.mirror = dv.dev = NULL;
	dv.scratch_n = dv.mirror_n = 0;
	dist_nccl_release();
}

int cdp_dist_set_backend(cdp_backend *be)
{
	if (dist_busy())
		return CDP_EINVAL;
	dist_buckets_drop();
	release();
	dv.be = be;
	dv.device = is_gpu(be) || (be && stage_forced());
	if (!is_gpu(be) && cdp_dist_get_algo() == CDP_DIST_NCCL)
		cdp_dist_set_algo(CDP_DIST_RING);
	return 0;
}

/* Pinned memory of n floats in *buf (capacity *cap), grown when needed;
 * NULL when out of memory. */
static float *pinned(float **buf, size_t *cap, size_t n)
{
	if (*buf && n <= *cap)
		return *buf;
	if (*buf)
		dv.be->host_free(dv.be, *buf);
	*cap = 0;
	if (n > SIZE_MAX / sizeof(float) ||
	    !(*buf = dv.be->host_alloc(dv.be, (n ? n : 1) * sizeof(float))))
		return *buf = NULL;
	*cap = n;
	return *buf;
}

/* The scratch of a blocking call, which cannot fail on one rank alone. */
static float *scratch(size_t n)
{
	float *h = pinned(&dv.scratch, &dv.scratch_n, n);

	if (!h)
		cdp_dist_abort(1, "cannot allocate %zu floats of pinned host memory to stage "
		               "a reduction: out of memory", n);
	return h;
}

int dist_dev_allreduce(float *buf, size_t n, cdp_dist_algo algo, int average)
{
	double t0 = dist_now(), t1;
	float *h;
	int rc;

	if (n == 0)
		return dist_host_allreduce(buf, 0, algo, average);
	h = scratch(n);
	dv.be->to_host(dv.be, h, buf, n * sizeof(float));
	t1 = dist_now();
	rc = dist_host_allreduce(h, n, algo, average);
	t0 -= dist_now() - t1;      /* the host call counts its own time */
	if (rc == 0)
		dv.be->to_device(dv.be, buf, h, n * sizeof(float));
	dist_stats.wait_s += dist_now() - t0;
	return rc;
}

int dist_dev_bcast(float *buf, size_t n)
{
	float *h;

	if (n == 0)
		return 0;
	h = scratch(n);
	if (cdp_dist_rank() == 0)
		dv.be->to_host(dv.be, h, buf, n * sizeof(float));
	cdp_dist_bcast_bytes(h, n * sizeof(float));
	if (cdp_dist_rank() != 0)
		dv.be->to_device(dv.be, buf, h, n * sizeof(float));
	return 0;
}

float *dist_dev_mirror(float *dev, size_t n)
{
	dv.dev = dev;
	return pinned(&dv.mirror, &dv.mirror_n, n);
}

void dist_dev_down(size_t off, size_t n)
{
	if (n)
		dv.be->to_host(dv.be, dv.mirror + off, dv.dev + off, n * sizeof(float));
}

void dist_dev_up(size_t off, size_t n)
{
	if (n)
		dv.be->to_device(dv.be, dv.dev + off, dv.mirror + off, n * sizeof(float));
}

#ifndef HAVE_CUDA
/* A build without CUDA has no NCCL: cdp_dist_set_algo refuses
 * CDP_DIST_NCCL, so only the host collectives of a launch without MPI,
 * which need NCCL, come here. */
int dist_nccl_built(void) { return 0; }
void dist_nccl_release(void) { }

static void no_nccl(void) __attribute__((noreturn));
static void no_nccl(void)
{
	cdp_dist_abort(1, "launched without MPI (CDP_RENDEZVOUS), every collective goes through "
	               "NCCL, and this build has none (configure --with-cuda)");
}

void dist_nccl_allreduce(float *buf, size_t n, int average, const char *what) { no_nccl(); }
void dist_nccl_bcast(float *buf, size_t n) { no_nccl(); }
void dist_nccl_bucket(float *buf, size_t n, int average, int comp) { no_nccl(); }
void dist_nccl_join(void) { no_nccl(); }
void dist_nccl_host_reduce(void *buf, size_t n, int type, int op) { no_nccl(); }
void dist_nccl_host_bcast(void *buf, size_t n) { no_nccl(); }
void dist_nccl_host_gather(const void *send, size_t n, void *recv) { no_nccl(); }
#endif
