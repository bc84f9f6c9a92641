/* test_nccl_mock.c: dist_nccl.c's control flow without a GPU, on the CUDA
 * and NCCL stand-ins of nccl_mock.c (builds with CUDA only). Two ranks are
 * forked as a launcher without MPI starts them (RANK, WORLD_SIZE,
 * CDP_RENDEZVOUS; each an MPI singleton), on the CPU backend dressed as
 * GPU 0, with --allreduce nccl. Each case checks how every rank ends, what
 * it says on stderr, and whether the communicator was aborted:
 *  - a healthy run (blocking all-reduces, buckets, metric sums, broadcast,
 *    gather, 2.5 s of reductions while the watchdog polls): both exit 0,
 *    silent, both initialised NCCL with the id rank 0 made (through the
 *    file), the file is gone, nothing aborted, and NCCL was never entered
 *    by two threads at once (nc.api);
 *  - the same past a stale file of an earlier job (CDP_JOB_ID);
 *  - a collective that never completes on rank 1: its watchdog aborts the
 *    communicator and ends it with one line naming the operation and rank
 *    1, after CDP_DIST_TIMEOUT (4 s) and within 5 s more;
 *  - NCCL reporting an asynchronous error: one line with NCCL's text;
 *  - init that never completes: each rank gives up after the timeout with
 *    one line, aborts the communicator, and rank 0 removes the file;
 *  - no rank 0: rank 1 ends after the timeout with one line.
 */
#include <config.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cdp_error.h"
#include "dist/dist.h"
#include "dist/dist_rdv.h"
#include "tap.h"
#include "clock.h"

extern unsigned long long cdp_mock_id_hash;

static char dir[256], rdv[300], mark[300];

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "test_nccl_mock: %s\n", what);
		exit(2);
	}
}

/* One rank's life: what the trainer does with the dist layer. */
static void rank_main(int sleep_after)
{
	static const size_t layer_off[] = { 0, 100, 100, 1000 };
	float *x = calloc(1000, sizeof *x), y[64] = { 0 };
	double d[3] = { 1, 2, 3 }, mx = 1;
	unsigned char gather[2 * 16] = { 0 }, mine[16] = { 0 };
	uint64_t u[2] = { 1, 2 };
	cdp_backend *be;
	int argc = 1;
	char *args[] = { "test_nccl_mock", NULL }, **argv = args;

	cdp_dist_set_prog("test_nccl_mock");
	must(cdp_dist_init(&argc, &argv) == 0 && cdp_dist_env_launch(), "not a launch without MPI");
	must((be = cdp_backend_cpu(1)) != NULL && x, "no CPU backend");
	be->device = 0;                         /* the mock's GPU */
	must(cdp_dist_set_backend(be) == 0, "set_backend");
	must(cdp_dist_set_algo(CDP_DIST_NCCL) == 0, "--allreduce nccl refused");
	must(cdp_dist_allreduce(x, 1000, CDP_DIST_NCCL, 0) == 0, "allreduce");
	must(cdp_dist_allreduce(y, 64, CDP_DIST_NCCL, 1) == 0, "allreduce");
	must(cdp_dist_buckets(x, layer_off, 3, 0, 200, 0, 1, 1) >= 1, "buckets");
	for (int l = 2; l >= 0; l--)
		must(cdp_dist_layer_done(l) == 0, "layer_done");
	cdp_dist_wait_all();
	must(cdp_dist_sum_f64(d, 3) == 0 && cdp_dist_sum_u64(u, 2) == 0 && cdp_dist_max_f64(&mx) == 0,
	     "metric sums");
	must(cdp_dist_bcast(x, 1000) == 0 && cdp_dist_bcast_bytes(mine, 16) == 0, "bcast");
	must(cdp_dist_gather_bytes(mine, 16, cdp_dist_rank() == 0 ? gather : NULL) == 0, "gather");
	/* reductions for 2.5 s while the watchdog polls every second: NCCL
	 * calls from two threads would meet here (the mock ends the process if
	 * they do) */
	for (double t0 = now(); now() - t0 < 2.5;)
		must(cdp_dist_allreduce(y, 64, CDP_DIST_NCCL, 0) == 0, "allreduce");
	if (sleep_after)
		nap(sleep_after);               /* compute, while the watchdog looks */
	printf("rank %d id %016llx\n", cdp_dist_rank(), cdp_mock_id_hash);
	fflush(stdout);
	must(cdp_dist_set_backend(NULL) == 0, "set_backend(NULL)");
	be->destroy(be);
	cdp_dist_finalize();
	free(x);
	exit(0);
}

typedef struct outcome {
	int status, lines;
	double secs;
	char first[1024], out[1024];
} outcome;

static void slurp(const char *path, outcome *o, int err)
{
	char line[1024];
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof line, f)) {
		if (!err) {
			snprintf(o->out, sizeof o->out, "%s", line);
			continue;
		}
		if (o->lines++ == 0)
			snprintf(o->first, sizeof o->first, "%s", line);
	}
	if (f)
		fclose(f);
}

/* Starts the ranks in ranks[] (of 2) with the extra environment env[r]
 * ("NAME=value" separated by spaces, modified in place), waits at most
 * 30 s, and fills o[r]. */
static void launch(const int *ranks, int n, char **env, int sleep_after, outcome *o)
{
	pid_t pid[2];
	double t0 = now();
	char p[400];

	unlink(mark);
	for (int r = 0; r < 2; r++) {
		snprintf(p, sizeof p, "%s/joined.%d", dir, r);
		unlink(p);
	}
	for (int i = 0; i < n; i++) {
		int r = ranks[i];
		if ((pid[i] = fork()) == 0) {
			char rank[8], *tok, *save = NULL;
			int fd;
			snprintf(rank, sizeof rank, "%d", r);
			setenv("RANK", rank, 1);
			setenv("WORLD_SIZE", "2", 1);
			setenv("LOCAL_RANK", rank, 1);
			setenv("CDP_RENDEZVOUS", rdv, 1);
			setenv("CDP_MOCK_MARK", mark, 1);
			setenv("CDP_MOCK_DIR", dir, 1);
			for (tok = strtok_r(env[r], " ", &save); tok; tok = strtok_r(NULL, " ", &save))
				putenv(tok);
			snprintf(p, sizeof p, "%s/rank%d.err", dir, r);
			if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0 || dup2(fd, 2) < 0)
				_exit(99);
			snprintf(p, sizeof p, "%s/rank%d.out", dir, r);
			if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0 || dup2(fd, 1) < 0)
				_exit(99);
			rank_main(sleep_after);
		}
	}
	for (int i = 0; i < n; i++) {
		int r = ranks[i];
		memset(&o[r], 0, sizeof o[r]);
		while (waitpid(pid[i], &o[r].status, WNOHANG) == 0) {
			if (now() - t0 > 30) {
				kill(pid[i], SIGKILL);
				waitpid(pid[i], &o[r].status, 0);
				break;
			}
			nap(0.01);
		}
		o[r].secs = now() - t0;
		snprintf(p, sizeof p, "%s/rank%d.err", dir, r);
		slurp(p, &o[r], 1);
		snprintf(p, sizeof p, "%s/rank%d.out", dir, r);
		slurp(p, &o[r], 0);
	}
}

static int aborts(void)
{
	char buf[256];
	FILE *f = fopen(mark, "r");
	int n = 0;

	while (f && fgets(buf, sizeof buf, f))
		n += strcmp(buf, "abort\n") == 0;
	if (f)
		fclose(f);
	return n;
}

static int ok(const outcome *o)
{
	return WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0 && o->lines == 0;
}

static int failed(const outcome *o, const char *start)
{
	return WIFEXITED(o->status) && WEXITSTATUS(o->status) == 1 && o->lines == 1 &&
	       strncmp(o->first, start, strlen(start)) == 0;
}

static void healthy(const char *job)
{
	static const int both[] = { 0, 1 };
	char e0[128], e1[128], *env[2] = { e0, e1 };
	outcome o[2];

	snprintf(e0, sizeof e0, "CDP_DIST_TIMEOUT=5%s%s", job ? " CDP_JOB_ID=" : "", job ? job : "");
	snprintf(e1, sizeof e1, "%s", e0);
	launch(both, 2, env, 0, o);
	for (int r = 0; r < 2; r++)
		CHECK(ok(&o[r]), "healthy%s: rank %d: status %d, %d lines: %s", job ? " past stale" : "",
		      r, o[r].status, o[r].lines, o[r].first);
	CHECK(strncmp(o[0].out, "rank 0 id ", 10) == 0 && strncmp(o[1].out, "rank 1 id ", 10) == 0 &&
	      strcmp(o[0].out + 10, o[1].out + 10) == 0, "the ranks joined with other ids: %s / %s",
	      o[0].out, o[1].out);
	CHECK(access(rdv, F_OK) != 0, "the rendezvous file was left");
	CHECK(aborts() == 0, "a healthy run aborted the communicator");
}

static void test_healthy(void)
{
	unsigned char old[128] = "an earlier job's id";
	cdp_rdv r = { .path = rdv, .job = "cdp:earlier", .world = 2 };

	healthy(NULL);
	CHECK_RC(cdp_rdv_publish(&r, old, sizeof old), 0);
	healthy("later");
}

static void test_failures(void)
{
	static const int both[] = { 0, 1 }, one[] = { 1 };
	char e0[128], e1[128], *env[2] = { e0, e1 };
	outcome o[2];

	snprintf(e0, sizeof e0, "CDP_DIST_TIMEOUT=4");
	snprintf(e1, sizeof e1, "CDP_DIST_TIMEOUT=4 CDP_MOCK_HANG=2");
	launch(both, 2, env, 0, o);
	CHECK(failed(&o[1], "test_nccl_mock: rank 1: ncclAllReduce did not finish within 4 s: a peer "
	             "rank died or hangs (timeout set by CDP_DIST_TIMEOUT)"),
	      "hang: status %d, %d lines: %s", o[1].status, o[1].lines, o[1].first);
	CHECK(o[1].secs > 4 && o[1].secs < 4 + 5, "hang: rank 1 ended after %.1f s", o[1].secs);
	CHECK(aborts() == 1, "hang: %d aborts, want 1", aborts());

	snprintf(e0, sizeof e0, "CDP_DIST_TIMEOUT=4");
	snprintf(e1, sizeof e1, "CDP_DIST_TIMEOUT=4 CDP_MOCK_ASYNC=1");
	launch(both, 2, env, 3, o);
	CHECK(failed(&o[1], "test_nccl_mock: rank 1: NCCL reports an error: remote process exited"),
	      "async error: status %d, %d lines: %s", o[1].status, o[1].lines, o[1].first);
	CHECK(aborts() == 1, "async error: %d aborts, want 1", aborts());

	snprintf(e0, sizeof e0, "CDP_DIST_TIMEOUT=4 CDP_MOCK_INIT=hang");
	snprintf(e1, sizeof e1, "%s", e0);
	launch(both, 2, env, 0, o);
	for (int r = 0; r < 2; r++) {
		char want[200];
		snprintf(want, sizeof want, "test_nccl_mock: rank %d: ncclCommInitRankConfig (waiting "
		         "for every rank to join) did not finish within 4 s", r);
		CHECK(failed(&o[r], want), "init hangs: rank %d: status %d, %d lines: %s", r,
		      o[r].status, o[r].lines, o[r].first);
	}
	CHECK(aborts() == 2, "init hangs: %d aborts, want 2", aborts());
	CHECK(access(rdv, F_OK) != 0, "init hangs: rank 0 left the rendezvous file");

	snprintf(e1, sizeof e1, "CDP_DIST_TIMEOUT=1");
	launch(one, 1, env, 0, o);
	CHECK(failed(&o[1], "test_nccl_mock: rank 1: no rendezvous file '"),
	      "no rank 0: status %d, %d lines: %s", o[1].status, o[1].lines, o[1].first);
	CHECK(o[1].secs < 1 + 5, "no rank 0: ended after %.1f s", o[1].secs);
}

int main(void)
{
	char p[400];

	snprintf(dir, sizeof dir, "%s/cdpnccl.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(rdv, sizeof rdv, "%s/rdv", dir);
	snprintf(mark, sizeof mark, "%s/mark", dir);
	test_healthy();
	test_failures();
	for (int r = 0; r < 2; r++) {
		snprintf(p, sizeof p, "%s/rank%d.err", dir, r);
		unlink(p);
		snprintf(p, sizeof p, "%s/rank%d.out", dir, r);
		unlink(p);
	}
	unlink(mark);
	unlink(rdv);
	rmdir(dir);
	return tap_done();
}
