/* dist_rdv.c: the rendezvous file (dist_rdv.h): encoding, publishing by a
 * temporary file linked into place, fetching with a timeout and the stale
 * check, and the messages. Nothing here knows about NCCL.
 */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdp_crc32.h"
#include "cdp_error.h"
#include "cdp_out.h"
#include "dist/dist_rdv.h"

#define MAGIC "CDP-RDV\n"
#define RDV_VERSION 1u
#define HEAD 24u                /* magic, version, world, J, N */
#define REC_MAX (HEAD + CDP_RDV_JOB_MAX + CDP_RDV_BLOB_MAX + 4u)

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the job id ---------------------------------------------------------- */

/* Appends "sep name:a" plus "mid b" for each set part; 0 or CDP_ERANGE. */
static int add_part(char *job, size_t cap, size_t *len, const char *name, const char *a,
                    const char *mid, const char *b, const char *mid2, const char *c)
{
	int k;

	if (!a || !*a)
		return 0;
	k = snprintf(job + *len, cap - *len, "%s%s:%s%s%s%s%s", *len ? " " : "", name, a,
	             b && *b ? mid : "", b && *b ? b : "", c && *c ? mid2 : "", c && *c ? c : "");
	if (k < 0 || (size_t)k >= cap - *len || *len + (size_t)k > CDP_RDV_JOB_MAX)
		return CDP_ERANGE;
	*len += (size_t)k;
	return 0;
}

int cdp_rdv_job_env(char *job, size_t cap)
{
	const char *cdp = getenv("CDP_JOB_ID");
	size_t len = 0;
	int rc;

	if (!job || cap == 0)
		return CDP_EINVAL;
	job[0] = '\0';
	if (cdp && *cdp)
		rc = add_part(job, cap, &len, "cdp", cdp, "", NULL, "", NULL);
	else if ((rc = add_part(job, cap, &len, "slurm", getenv("SLURM_JOB_ID"), ".",
	                        getenv("SLURM_STEP_ID"), "/", getenv("SLURM_RESTART_COUNT"))) == 0)
		rc = add_part(job, cap, &len, "torchelastic", getenv("TORCHELASTIC_RUN_ID"), "/",
		              getenv("TORCHELASTIC_RESTART_COUNT"), "", NULL);
	if (rc != 0)
		job[0] = '\0';
	return rc;
}

/* ---- the record ---------------------------------------------------------- */

/* rec[REC_MAX] <- the file for r and blob[n]; its length. */
static size_t encode(const cdp_rdv *r, const void *blob, size_t n, unsigned char *rec)
{
	size_t j = strlen(r->job), len = HEAD + j + n;

	memcpy(rec, MAGIC, 8);
	put32(rec + 8, RDV_VERSION);
	put32(rec + 12, r->world);
	put32(rec + 16, (uint32_t)j);
	put32(rec + 20, (uint32_t)n);
	memcpy(rec + HEAD, r->job, j);
	memcpy(rec + HEAD + j, blob, n);
	put32(rec + len, cdp_crc32(0, rec, len));
	return len + 4;
}

int cdp_rdv_decode(const unsigned char *rec, size_t len, char *job, uint32_t *world,
                  const unsigned char **blob, size_t *n)
{
	uint32_t j, b;

	if (len < 8 || memcmp(rec, MAGIC, 8) != 0)
		return CDP_EMAGIC;
	if (len < HEAD + 4)
		return CDP_ETRUNC;
	if (get32(rec + 8) != RDV_VERSION)
		return CDP_EVERSION;
	j = get32(rec + 16);
	b = get32(rec + 20);
	if (j > CDP_RDV_JOB_MAX || b > CDP_RDV_BLOB_MAX)
		return CDP_EFORMAT;
	if (len < HEAD + j + b + 4)
		return CDP_ETRUNC;
	if (len > HEAD + j + b + 4)
		return CDP_EFORMAT;
	if (cdp_crc32(0, rec, len - 4) != get32(rec + len - 4))
		return CDP_ECRC;
	if (memchr(rec + HEAD, '\0', j))
		return CDP_EFORMAT;
	memcpy(job, rec + HEAD, j);
	job[j] = '\0';
	*world = get32(rec + 12);
	*blob = rec + HEAD + j;
	*n = b;
	return 0;
}

/* The whole file at path into rec[REC_MAX + 1]: its length in *len. 0 or
 * errno (ENOENT: not there yet). One byte more than a record may hold is
 * read so that a longer file shows as one (CDP_EFORMAT). */
static int slurp(const char *path, unsigned char *rec, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), e = 0;
	size_t got = 0;

	if (fd < 0)
		return errno;
	while (got < REC_MAX + 1) {
		ssize_t k = read(fd, rec + got, REC_MAX + 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			e = errno;
			break;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	*len = got;
	return e;
}

/* A file at r->path that rank 0 may replace: a valid one of another job.
 * A job without an id cannot tell another job's file from a live one of
 * its own, so it replaces none (cdp-rendezvous(5)). */
static int is_stale(cdp_rdv *r)
{
	unsigned char rec[REC_MAX + 1];
	const unsigned char *blob;
	size_t len, n;

	if (slurp(r->path, rec, &len) != 0 ||
	    cdp_rdv_decode(rec, len, r->seen_job, &r->seen_world, &blob, &n) != 0)
		return 0;
	r->seen_n = n;
	return r->job[0] && strcmp(r->seen_job, r->job) != 0;
}

/* ---- publish and fetch --------------------------------------------------- */

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Clears what publish / fetch report about the file they found. */
static void found_reset(cdp_rdv *r, int writing)
{
	r->writing = writing;
	r->stale = 0;
	r->seen_job[0] = '\0';
	r->seen_world = 0;
	r->seen_n = 0;
}

int cdp_rdv_publish(cdp_rdv *r, const void *blob, size_t n)
{
	unsigned char rec[REC_MAX];
	size_t len;
	cdp_out o;
	int rc = 0, c;

	if (!r || !r->path || !*r->path || !r->job || strlen(r->job) > CDP_RDV_JOB_MAX ||
	    r->world < 1 || (!blob && n) || n > CDP_RDV_BLOB_MAX)
		return CDP_EINVAL;
	found_reset(r, 1);
	len = encode(r, blob, n, rec);
	/* the output policy's temporary (cdp_out.h), mode 0600 because the id
	 * lets whoever reads it join the job */
	if ((rc = cdp_out_open(&o, r->path, CDP_OUT_SEEK | CDP_OUT_SYNC, 0600, NULL, 0)) != 0)
		return rc;
	rc = write_all(o.fd, rec, len);
	if ((c = cdp_out_close(&o)) != 0 && rc == 0)
		rc = c;
	/* link() publishes only where nothing is yet (rename would replace a
	 * file another rank 0 just wrote); filesystems without hard links get
	 * the check-then-rename below */
	if (rc == 0 && link(o.tmp, r->path) != 0) {
		int e = errno;
		if (e == EEXIST || access(r->path, F_OK) == 0)
			rc = (r->stale = is_stale(r)) ? 0 : EEXIST;
		else if (e != EPERM && e != ENOTSUP && e != EOPNOTSUPP && e != ENOSYS &&
		         e != EMLINK && e != EXDEV)
			rc = e;
		if (rc == 0)
			return cdp_out_commit(&o, NULL, 0);
	}
	cdp_out_abort(&o);
	return rc;
}

int cdp_rdv_fetch(cdp_rdv *r, void *blob, size_t n)
{
	unsigned char rec[REC_MAX + 1];
	double t0 = now(), poll;
	struct timespec pause;
	const unsigned char *b;
	size_t len, got;
	uint32_t world;
	int rc;

	if (!r || !r->path || !*r->path || !r->job || r->world < 1 || (!blob && n) ||
	    !(r->timeout >= 0) || !(r->poll >= 0))
		return CDP_EINVAL;
	found_reset(r, 0);
	poll = r->poll > 0 ? r->poll : 0.05;
	pause.tv_sec = (time_t)poll;
	pause.tv_nsec = (long)((poll - (double)pause.tv_sec) * 1e9);
	for (;;) {
		rc = slurp(r->path, rec, &len);
		if (rc == 0) {
			char job[CDP_RDV_JOB_MAX + 1];
			if ((rc = cdp_rdv_decode(rec, len, job, &world, &b, &got)) != 0)
				return rc;
			memcpy(r->seen_job, job, sizeof job);
			r->seen_world = world;
			r->seen_n = got;
			if (strcmp(job, r->job) == 0) {
				if (world != r->world)
					return CDP_EMISMATCH;
				if (got != n)
					return CDP_EFORMAT;
				memcpy(blob, b, n);
				return 0;
			}
			r->stale = 1;       /* an earlier job's: wait for ours */
		} else if (rc != ENOENT) {
			return rc;
		}
		if (r->timeout > 0 && now() - t0 >= r->timeout)
			return ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

int cdp_rdv_remove(const cdp_rdv *r)
{
	if (!r || !r->path)
		return CDP_EINVAL;
	return unlink(r->path) == 0 || errno == ENOENT ? 0 : errno;
}

void cdp_rdv_explain(const cdp_rdv *r, int rc, char *buf, size_t cap)
{
	const char *p = r->path ? r->path : "";

	switch (rc) {
	case 0:
		snprintf(buf, cap, "the rendezvous through '%s' succeeded", p);
		break;
	case EEXIST:
		snprintf(buf, cap, "the rendezvous file '%s' exists already and is not known to be "
		         "stale (%s): remove it or name a new one in CDP_RENDEZVOUS", p,
		         r->job[0] ? "not a file of another job" : "no job id to tell: set CDP_JOB_ID");
		break;
	case ETIMEDOUT:
		if (r->stale)
			snprintf(buf, cap, "the rendezvous file '%s' is still job '%s''s, not this "
			         "job's ('%s'), after %g s: rank 0 has not written it, or runs with "
			         "another job id (timeout set by CDP_DIST_TIMEOUT)", p, r->seen_job,
			         r->job, r->timeout);
		else
			snprintf(buf, cap, "no rendezvous file '%s' from rank 0 within %g s (timeout "
			         "set by CDP_DIST_TIMEOUT)", p, r->timeout);
		break;
	case CDP_EMISMATCH:
		snprintf(buf, cap, "the rendezvous file '%s' is for %u ranks, WORLD_SIZE is %u", p,
		         r->seen_world, r->world);
		break;
	case CDP_EMAGIC:
		snprintf(buf, cap, "'%s' is not a cdp-train rendezvous file", p);
		break;
	case CDP_EVERSION: case CDP_ETRUNC: case CDP_EFORMAT: case CDP_ECRC:
		snprintf(buf, cap, "the rendezvous file '%s' is damaged: %s", p, cdp_strerror(rc));
		break;
	default:
		snprintf(buf, cap, "cannot %s the rendezvous file '%s': %s",
		         r->writing ? "write" : "read", p, cdp_strerror(rc));
	}
}
