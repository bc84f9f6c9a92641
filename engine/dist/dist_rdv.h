/* dist_rdv.h: the rendezvous file of launches without MPI (dist.h): rank 0
 * publishes a small blob (NCCL's 128-byte unique id) under a path that
 * every rank sees, and the other ranks wait for it. Plain C with no MPI and
 * no CUDA, so that `make check` tests it on any machine; dist_nccl.c calls
 * it and turns a failure into the job's error message (cdp_rdv_explain).
 *
 * The file (integers little-endian):
 *   0   8 bytes  magic "CDP-RDV\n"
 *   8   u32      version (1)
 *   12  u32      world size (ranks)
 *   16  u32      J, the job id's length (<= CDP_RDV_JOB_MAX)
 *   20  u32      N, the blob's length (<= CDP_RDV_BLOB_MAX)
 *   24  J bytes  the job id, then N bytes, the blob
 *   ..  u32      CRC-32 (lib/cdp_crc32.h) of every byte before it
 * It is written to the output policy's temporary name (cdp_out.h; mode
 * 0600, because the id lets whoever reads it join the job) and linked or renamed into place, so
 * a reader sees the whole file or none.
 *
 * Stale files. A file left by an earlier job (whose rank 0 died before
 * removing it) names a bootstrap address nobody listens on any more; a rank
 * that read it would wait in ncclCommInitRank until the timeout. So the file
 * carries the job's identity (cdp_rdv_job_env): a reader waits past a file
 * of another job, and rank 0 replaces one. A file of the same job, or any
 * file when the job has no identity, cannot be told from a live one: rank 0
 * refuses to overwrite it, and the launch fails with a message saying so.
 * Hence, without a job id, a new path per job.
 *
 * Functions return 0, an errno value (the system call's), or a CDP_E* code
 * (lib/cdp_error.h) as documented; none prints. The format is also
 * described in man/cdp-rendezvous.5.
 */
#ifndef CDP_DIST_RDV_H
#define CDP_DIST_RDV_H

#include <stddef.h>
#include <stdint.h>

enum { CDP_RDV_JOB_MAX = 255, CDP_RDV_BLOB_MAX = 4096 };

/* One rendezvous: what the caller sets, and what publish / fetch found
 * (for cdp_rdv_explain). */
typedef struct cdp_rdv {
	const char *path;
	const char *job;        /* this job's identity, "" for none */
	uint32_t world;         /* the number of ranks, >= 1 */
	double timeout;         /* fetch: seconds to wait, 0 = for ever */
	double poll;            /* fetch: seconds between looks (0: 0.05) */
	/* filled in */
	int writing;            /* set by publish, cleared by fetch */
	int stale;              /* a file of another job was found */
	char seen_job[CDP_RDV_JOB_MAX + 1];  /* the job id of the file found */
	uint32_t seen_world;    /* and its world size (CDP_EMISMATCH) */
	size_t seen_n;          /* and its blob size (CDP_EFORMAT) */
} cdp_rdv;

/* The job's identity from the launcher's environment into job[cap]:
 * "cdp:$CDP_JOB_ID" when CDP_JOB_ID is set and not empty; otherwise what
 * is set of "slurm:$SLURM_JOB_ID.$SLURM_STEP_ID/$SLURM_RESTART_COUNT" and
 * "torchelastic:$TORCHELASTIC_RUN_ID/$TORCHELASTIC_RESTART_COUNT", joined by
 * a space (absent parts left out; the restart counts tell a restarted job
 * from its crashed attempt); "" when none is set. Returns 0, CDP_ERANGE
 * when the id would exceed CDP_RDV_JOB_MAX bytes or cap - 1, CDP_EINVAL for
 * a NULL job or cap 0. */
int cdp_rdv_job_env(char *job, size_t cap);

/* Rank 0: writes blob[0..n) for r->job and r->world at r->path. Returns 0
 * (r->stale = 1 when it replaced a file of another job); EEXIST when a file
 * is there that is not known to be stale (same job, no job id, or not a
 * rendezvous file), left as it is; CDP_EINVAL for bad arguments (n above
 * CDP_RDV_BLOB_MAX, a job id too long); or the errno of a failed call. */
int cdp_rdv_publish(cdp_rdv *r, const void *blob, size_t n);

/* The other ranks: waits for r->path to hold a file of r->job and reads
 * its blob, which must be n bytes, into blob. A missing file, or one of
 * another job (r->stale = 1, its id in r->seen_job), is waited for, looking
 * every r->poll seconds for up to r->timeout. Returns 0; ETIMEDOUT; for a
 * file of this job that does not fit, CDP_EMISMATCH (another world size,
 * r->seen_world) or CDP_EFORMAT (another blob size, r->seen_n); for a file
 * that is not a valid rendezvous file, CDP_EMAGIC, CDP_EVERSION,
 * CDP_ETRUNC, CDP_ECRC or CDP_EFORMAT, at once (it was renamed into place
 * whole, so waiting would not mend it); the errno of a failed read;
 * CDP_EINVAL for bad arguments. */
int cdp_rdv_fetch(cdp_rdv *r, void *blob, size_t n);

/* Checks the bytes rec[len] of a whole rendezvous file and finds its
 * parts: the job id (copied, NUL-terminated, into job[CDP_RDV_JOB_MAX + 1]),
 * the world size and the blob (*blob points into rec, *n bytes). Returns 0
 * or CDP_EMAGIC, CDP_EVERSION, CDP_ETRUNC, CDP_EFORMAT (a length over its
 * maximum, a file longer than its lengths say, a NUL in the job id),
 * CDP_ECRC. */
int cdp_rdv_decode(const unsigned char *rec, size_t len, char *job, uint32_t *world,
                   const unsigned char **blob, size_t *n);

/* Removes r->path (rank 0, once every rank has read it). 0 or errno; a file
 * already gone is 0. */
int cdp_rdv_remove(const cdp_rdv *r);

/* The message for rc returned by publish or fetch on r, one line without
 * the "prog: rank R: " prefix, into buf[cap]. */
void cdp_rdv_explain(const cdp_rdv *r, int rc, char *buf, size_t cap);

#endif
