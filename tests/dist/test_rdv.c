/* test_rdv.c: the rendezvous file of launches without MPI (dist_rdv.h),
 * with forked processes as the ranks, on any machine:
 *  - rank 0 publishes a 128-byte id (NCCL's size) a moment after rank 1
 *    starts waiting; rank 1 gets it byte for byte; the file is mode 0600,
 *    no temporary file is left, and removal removes it;
 *  - a stale file of an earlier job: a reader of this job waits past it and
 *    reads this job's id once rank 0 has replaced it; with no rank 0 it
 *    times out naming both jobs;
 *  - rank 0 refuses, and leaves as it was, a file of the same job, any file
 *    when there is no job id (another job's too), and a file that is not a
 *    rendezvous file;
 *  - damaged files (magic, version, length, CRC) fail the reader at once,
 *    not after the timeout; another world size is CDP_EMISMATCH;
 *  - rank 0 never publishing: ETIMEDOUT after the timeout, and a rank that
 *    ends as dist_nccl.c does (cdp_dist_abort) exits 1 with one line;
 *  - the job id from the environment: precedence, restart counts, length.
 */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "cdp_error.h"
#include "dist/dist.h"
#include "dist/dist_rdv.h"
#include "tap.h"
#include "clock.h"

#define ID 128                  /* sizeof(ncclUniqueId) */

static char dir[256], path[300];

static void fill(unsigned char *id, unsigned seed)
{
	for (int i = 0; i < ID; i++)
		id[i] = (unsigned char)(seed * 131u + (unsigned)i * 7u);
}

static cdp_rdv rdv(const char *job, uint32_t world, double timeout)
{
	cdp_rdv r = { .path = path, .job = job, .world = world, .timeout = timeout,
	              .poll = 0.01 };
	return r;
}

/* Waits for child pid for at most 20 s (then kills it): its status. */
static int reap(pid_t pid)
{
	double t0 = now();
	int st = 0;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now() - t0 > 20) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		nap(0.01);
	}
	return st;
}

/* Entries of dir besides . and .. */
static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return n;
}

static int write_file(const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;

	return f && fclose(f) == 0 && ok ? 0 : -1;
}

static size_t read_file(unsigned char *p, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(p, 1, cap, f) : 0;

	if (f)
		fclose(f);
	return n;
}

/* Rank 1 in a child: fetches with job/world/timeout and exits 0 when it got
 * want[] byte for byte; otherwise with the code's low bits + 10. */
static pid_t reader(const char *job, uint32_t world, double timeout, const unsigned char *want)
{
	pid_t pid = fork();

	if (pid == 0) {
		unsigned char got[ID];
		cdp_rdv r = rdv(job, world, timeout);
		int rc = cdp_rdv_fetch(&r, got, ID);
		_exit(rc != 0 ? 10 + (rc & 63) : memcmp(got, want, ID) != 0 ? 9 : 0);
	}
	return pid;
}

static void test_exchange(void)
{
	unsigned char id[ID], got[ID];
	cdp_rdv r = rdv("cdp:job-1", 2, 5);
	struct stat sb;
	pid_t pid;
	int st;

	fill(id, 1);
	pid = reader("cdp:job-1", 2, 5, id);
	nap(0.3);       /* rank 1 polls a missing file meanwhile */
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	CHECK(r.stale == 0, "a fresh publish called stale");
	st = reap(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 did not get the id (status %d)", st);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "mode %o, want 0600",
	      (unsigned)(sb.st_mode & 0777));
	CHECK(entries() == 1, "%d files in the directory, want the rendezvous file alone",
	      entries());
	/* a second reader in this process, then the removal */
	memset(got, 0, sizeof got);
	r = rdv("cdp:job-1", 2, 1);
	CHECK_RC(cdp_rdv_fetch(&r, got, ID), 0);
	CHECK(memcmp(got, id, ID) == 0, "the id read differs");
	CHECK_RC(cdp_rdv_remove(&r), 0);
	CHECK(entries() == 0, "the file is still there after removal");
	CHECK_RC(cdp_rdv_remove(&r), 0);
}

static void test_stale(void)
{
	unsigned char old[ID], id[ID], got[ID];
	cdp_rdv r = rdv("slurm:41.0", 2, 5);
	char msg[1024];
	double t0;
	pid_t pid;
	int st;

	fill(old, 2);
	fill(id, 3);
	CHECK_RC(cdp_rdv_publish(&r, old, ID), 0);       /* the earlier job's, left */
	/* this job's rank 1 alone: waits past it, then times out naming both */
	r = rdv("slurm:42.0", 2, 0.4);
	t0 = now();
	CHECK_RC(cdp_rdv_fetch(&r, got, ID), ETIMEDOUT);
	CHECK(now() - t0 >= 0.4, "gave up after %.2f s, before the timeout", now() - t0);
	CHECK(r.stale == 1 && strcmp(r.seen_job, "slurm:41.0") == 0, "stale %d, seen '%s'",
	      r.stale, r.seen_job);
	cdp_rdv_explain(&r, ETIMEDOUT, msg, sizeof msg);
	CHECK(strstr(msg, "still job 'slurm:41.0''s") && strstr(msg, "('slurm:42.0')") &&
	      strstr(msg, "CDP_DIST_TIMEOUT"), "message: %s", msg);
	/* with rank 0 of this job: it replaces the file, rank 1 reads the new id */
	pid = reader("slurm:42.0", 2, 5, id);
	nap(0.2);
	r = rdv("slurm:42.0", 2, 0);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	CHECK(r.stale == 1, "replacing an earlier job's file not reported");
	st = reap(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 read the stale id or none (status %d)",
	      st);
	CHECK(entries() == 1, "%d files in the directory, want 1", entries());
	cdp_rdv_remove(&r);
}

/* Rank 0 must refuse what it cannot tell from a live file, and keep it. */
static void test_refuse(void)
{
	unsigned char id[ID], before[8192], after[8192];
	static const char junk[] = "not a rendezvous file\n";
	size_t nb, na;
	cdp_rdv r;
	char msg[1024];

	fill(id, 4);
	r = rdv("cdp:same", 2, 0);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	nb = read_file(before, sizeof before);
	fill(id, 5);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), EEXIST);              /* the same job */
	na = read_file(after, sizeof after);
	CHECK(na == nb && memcmp(before, after, nb) == 0, "the refused file was changed");
	cdp_rdv_explain(&r, EEXIST, msg, sizeof msg);
	CHECK(strstr(msg, "exists already") && strstr(msg, "CDP_RENDEZVOUS"), "message: %s", msg);
	CHECK(entries() == 1, "a refused publish left a temporary file");
	cdp_rdv_remove(&r);

	r = rdv("", 2, 0);                                          /* no job id */
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), EEXIST);
	cdp_rdv_explain(&r, EEXIST, msg, sizeof msg);
	CHECK(strstr(msg, "CDP_JOB_ID") != NULL, "message: %s", msg);
	/* and a reader without a job id takes the file (it cannot tell) */
	CHECK_RC(cdp_rdv_fetch(&r, after, ID), 0);
	cdp_rdv_remove(&r);

	/* nor, without a job id, another job's file: it may be live */
	r = rdv("cdp:other-job", 2, 0);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	nb = read_file(before, sizeof before);
	r = rdv("", 2, 0);
	fill(id, 7);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), EEXIST);
	CHECK(r.stale == 0, "another job's file called stale by a job without an id");
	na = read_file(after, sizeof after);
	CHECK(na == nb && memcmp(before, after, nb) == 0, "a job without an id replaced "
	      "another job's file");
	CHECK(entries() == 1, "a refused publish left a temporary file");
	cdp_rdv_remove(&r);

	CHECK_RC(write_file(junk, sizeof junk - 1), 0);           /* someone else's */
	r = rdv("cdp:other", 2, 0);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), EEXIST);
	na = read_file(after, sizeof after);
	CHECK(na == sizeof junk - 1 && memcmp(after, junk, na) == 0, "a foreign file was replaced");
	cdp_rdv_remove(&r);

	r = rdv("cdp:x", 2, 0);
	CHECK_RC(cdp_rdv_publish(&r, id, CDP_RDV_BLOB_MAX + 1), CDP_EINVAL);
	r.path = "/nonexistent-dir-cdp/rdv";
	CHECK(cdp_rdv_publish(&r, id, ID) == ENOENT, "publish into a missing directory");
	cdp_rdv_explain(&r, ENOENT, msg, sizeof msg);
	CHECK(strstr(msg, "cannot write the rendezvous file") != NULL, "message: %s", msg);
}

/* Damage byte `at` of a valid file (xor with x; or cut it to `at` bytes
 * when x is 0): the reader must fail with want at once. */
static void damaged(size_t at, unsigned x, int want)
{
	unsigned char id[ID], rec[8192];
	cdp_rdv r = rdv("cdp:d", 2, 0);
	size_t n;
	double t0;

	fill(id, 6);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	n = read_file(rec, sizeof rec);
	if (x)
		rec[at] ^= (unsigned char)x;
	else
		n = at;
	CHECK_RC(write_file(rec, n), 0);
	r = rdv("cdp:d", 2, 5);
	t0 = now();
	CHECK(cdp_rdv_fetch(&r, id, ID) == want, "byte %zu ^ %u: not %s", at, x, cdp_strerror(want));
	CHECK(now() - t0 < 2.5, "a damaged file was waited on for %.1f s (timeout 5)", now() - t0);
	cdp_rdv_remove(&r);
}

static void test_damaged(void)
{
	unsigned char id[ID];
	cdp_rdv r = rdv("cdp:d", 3, 0);
	char msg[1024];
	size_t n = 24 + 5 + ID + 4;         /* header, "cdp:d", id, CRC */

	damaged(0, 0x20, CDP_EMAGIC);
	damaged(8, 0x02, CDP_EVERSION);
	damaged(30, 0x01, CDP_ECRC);        /* a byte of the id */
	damaged(n - 1, 0x80, CDP_ECRC);     /* the CRC itself */
	damaged(20, 0x01, CDP_ETRUNC);      /* N one more than present */
	damaged(n - 7, 0, CDP_ETRUNC);
	damaged(4, 0, CDP_EMAGIC);
	/* the same job with another world size */
	fill(id, 7);
	CHECK_RC(cdp_rdv_publish(&r, id, ID), 0);
	r = rdv("cdp:d", 2, 5);
	CHECK_RC(cdp_rdv_fetch(&r, id, ID), CDP_EMISMATCH);
	cdp_rdv_explain(&r, CDP_EMISMATCH, msg, sizeof msg);
	CHECK(strstr(msg, "is for 3 ranks, WORLD_SIZE is 2") != NULL, "message: %s", msg);
	CHECK_RC(cdp_rdv_fetch(&(cdp_rdv){ .path = path, .job = "cdp:d", .world = 3 }, id, ID - 1),
	         CDP_EFORMAT);
	cdp_rdv_remove(&r);
}

/* Rank 0 never comes: the reader gives up after the timeout, and a rank
 * ending as dist_nccl.c does exits 1 with one line. */
static void test_no_rank0(void)
{
	char errf[400], msg[1024], line[1200];
	unsigned char id[ID];
	double t0;
	pid_t pid;
	FILE *f;
	int st, lines = 0;

	t0 = now();
	{
		cdp_rdv r = rdv("cdp:lonely", 2, 0.5);
		CHECK_RC(cdp_rdv_fetch(&r, id, ID), ETIMEDOUT);
		CHECK(r.stale == 0, "no file, yet stale");
		cdp_rdv_explain(&r, ETIMEDOUT, msg, sizeof msg);
		CHECK(strstr(msg, "no rendezvous file") && strstr(msg, "within 0.5 s"), "message: %s",
		      msg);
	}
	CHECK(now() - t0 >= 0.5 && now() - t0 < 5, "timed out after %.2f s, want 0.5",
	      now() - t0);
	snprintf(errf, sizeof errf, "%s.err", dir);
	t0 = now();
	if ((pid = fork()) == 0) {
		cdp_rdv r = rdv("cdp:lonely", 2, 0.5);
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600), rc;
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(99);
		if ((rc = cdp_rdv_fetch(&r, id, ID)) != 0) {
			cdp_rdv_explain(&r, rc, msg, sizeof msg);
			cdp_dist_abort(1, "%s", msg);
		}
		_exit(0);
	}
	st = reap(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d, want exit 1", st);
	CHECK(now() - t0 < 5, "the rank took %.1f s to end", now() - t0);
	if ((f = fopen(errf, "r"))) {
		while (fgets(line, sizeof line, f)) {
			lines++;
			static const char want[] = "test_rdv: rank 0: no rendezvous file '";
			CHECK(strncmp(line, want, sizeof want - 1) == 0, "stderr: %s", line);
		}
		fclose(f);
	}
	CHECK(lines == 1, "%d lines on stderr, want 1", lines);
	unlink(errf);
}

static void test_job_env(void)
{
	char job[CDP_RDV_JOB_MAX + 1], big[400];
	static const char *vars[] = { "CDP_JOB_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
	                              "SLURM_RESTART_COUNT", "TORCHELASTIC_RUN_ID",
	                              "TORCHELASTIC_RESTART_COUNT" };

	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), 0);
	CHECK(job[0] == '\0', "no variables: '%s'", job);
	setenv("TORCHELASTIC_RUN_ID", "abc", 1);
	setenv("TORCHELASTIC_RESTART_COUNT", "1", 1);
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), 0);
	CHECK(strcmp(job, "torchelastic:abc/1") == 0, "'%s'", job);
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("SLURM_STEP_ID", "3", 1);
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), 0);
	CHECK(strcmp(job, "slurm:77.3 torchelastic:abc/1") == 0, "'%s'", job);
	setenv("SLURM_RESTART_COUNT", "2", 1);
	unsetenv("TORCHELASTIC_RUN_ID");
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), 0);
	CHECK(strcmp(job, "slurm:77.3/2") == 0, "'%s'", job);
	setenv("CDP_JOB_ID", "mine", 1);
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), 0);
	CHECK(strcmp(job, "cdp:mine") == 0, "'%s'", job);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	setenv("CDP_JOB_ID", big, 1);
	CHECK_RC(cdp_rdv_job_env(job, sizeof job), CDP_ERANGE);
	CHECK(job[0] == '\0', "a refused id left '%.20s'", job);
	CHECK_RC(cdp_rdv_job_env(job, 5), CDP_ERANGE);
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
}

int main(void)
{
	snprintf(dir, sizeof dir, "%s/cdprdv.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(path, sizeof path, "%s/rdv", dir);
	cdp_dist_set_prog("test_rdv");
	test_exchange();
	test_stale();
	test_refuse();
	test_damaged();
	test_no_rank0();
	test_job_env();
	unlink(path);
	rmdir(dir);
	return tap_done();
}
