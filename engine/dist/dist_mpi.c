/* dist_mpi.c: dist.h's start-up and shutdown, the settings other than the
 * ring's chunk, the error path with its MPI_CHECK macro, the watchdog, the
 * simple blocking collectives (broadcasts, a gather, metric sums, max,
 * barrier), and
 * the checked MPI calls that dist_ring.c makes through dist_int.h. Every
 * MPI call of the dist layer is in this file, so a failure always reads
 * "dist_mpi.c:LINE: MPI_Call: MPI's text" as dist.h promises. The ring
 * all-reduce, the ops in flight and the buckets are in dist_ring.c.
 */
#include <config.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_out.h"
#include "dist_int.h"
#include "dist_rdv.h"
#include "dist/dist_watch.h"
#include "cdp_thread.h"
#ifdef HAVE_CUDA
#include <nccl.h>       /* NCCL_MAJOR/MINOR/PATCH for cdp_dist_features */
#endif

static struct {
	int inited, rank, size, lrank, lsize, left, right;
	int lshare;             /* cdp_dist_local_share */
	int env;                /* launched without MPI (dist.h), size > 1 */
	int launched;           /* mpi_launched(), before MPI_Init sets its own marks */
	int serialized;         /* MPI gives MPI_THREAD_SERIALIZED or more */
	const char *bad_env;    /* the variable cdp_dist_init refused */
	const char *bad_want;   /* what it allows, or NULL (the error code says) */
	MPI_Comm comm;
	MPI_Comm local;         /* this node's ranks (MPI_COMM_TYPE_SHARED) */
	MPI_Op op16[3];         /* by cdp_dist_comp: the 16-bit sums (dist_comp.c) */
	const char *prog;
	cdp_dist_algo algo;
	/* the watchdog: `what` is the blocking call in progress or NULL */
	double timeout;
	pthread_t wd;
	int wd_on, wd_stop;
	pthread_mutex_t wd_mu;
	pthread_cond_t wd_cv;
	const char *what;
	double since;
	/* every rank's host, DIST_HOST_NAME bytes each (size > 1 under MPI):
	 * with 2 ranks the watchdog names the peer it waits for, and the
	 * heartbeat any rank it loses */
	char *names;
	double beat;            /* CDP_DIST_HEARTBEAT (dist_beat.c) */
} st = { .size = 1, .lsize = 1, .lshare = 1, .prog = "cdp-train", .algo = CDP_DIST_RING,
         .timeout = 60, .beat = 10, .wd_mu = PTHREAD_MUTEX_INITIALIZER };

cdp_dist_stats dist_stats;

double dist_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* MPI_User_function: inout = in + inout in the 16-bit type (commutative:
 * float addition is, so every rank's result is the same with 2 ranks). */
static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	dist_comp_sum16(CDP_DIST_COMP_FP16, in, inout, (size_t)*len);
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	dist_comp_sum16(CDP_DIST_COMP_BF16, in, inout, (size_t)*len);
}

void cdp_dist_set_prog(const char *prog) { st.prog = prog; }
int cdp_dist_rank(void) { return st.rank; }
int cdp_dist_size(void) { return st.size; }
int cdp_dist_local_rank(void) { return st.lrank; }
int cdp_dist_local_size(void) { return st.lsize; }
int cdp_dist_local_share(void) { return st.lshare; }

static void vsay(const char *fmt, va_list ap)
{
	char msg[1024];
	int k;

	/* one write, so that lines from several ranks do not interleave */
	k = snprintf(msg, sizeof msg - 1, "%s: rank %d: ", st.prog, st.rank);
	vsnprintf(msg + k, sizeof msg - 1 - (size_t)k, fmt, ap);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
}

void dist_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void cdp_dist_abort(int code, const char *fmt, ...)
{
	va_list ap;
	int live = 0, fin = 1;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	/* the other side of our heartbeat: this rank leaves on purpose */
	dist_beat_quit();
	/* nothing unwinds from here (this may be the watchdog's thread), so
	 * the outputs' temporaries go now: a failed run leaves nothing */
	cdp_out_unlink_all();
	/* launched without MPI the other ranks are no MPI peers: they learn of
	 * this exit from NCCL (a broken connection) or their watchdog; a job of
	 * one process has no peers to stop, and MPI_Abort would only add Open
	 * MPI's banner to the one line that says what went wrong */
	if (!st.env && st.size > 1 && MPI_Initialized(&live) == MPI_SUCCESS && live &&
	    MPI_Finalized(&fin) == MPI_SUCCESS && !fin)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

/* The check macro: file, line, the function called and MPI's own text. */
static void mpi_fail(const char *file, int line, const char *call, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	const char *base = strrchr(file, '/');

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof msg, "MPI error %d", rc);
	cdp_dist_abort(1, "%s:%d: %.*s: %s", base ? base + 1 : file, line,
	               (int)strcspn(call, "("), call, msg);
}
#define MPI_CHECK(call) do { \
	int mc_rc_ = (call); \
	if (mc_rc_ != MPI_SUCCESS) mpi_fail(__FILE__, __LINE__, #call, mc_rc_); \
} while (0)

/* ---- watchdog ------------------------------------------------------------
 * It wakes every min(1 s, timeout/4) and looks at `what`; entering and
 * leaving a blocking call is an uncontended lock, no system call. When it
 * fires it calls MPI_Abort from its own thread: the main thread is stuck in
 * MPI, and Open MPI's abort goes out through the runtime (PMIx), not through
 * the stuck communicator. alarm() is the fallback should the abort itself
 * hang: SIGALRM's default action ends the process, and mpirun then ends the
 * job because a rank died. */
static void *wd_main(void *arg)
{
	struct timespec ts;
	double period = st.timeout / 4 < 1 ? st.timeout / 4 : 1, t, prev = dist_now(), lost;

	(void)arg;
	cdp_thread_name("cdp-watchdog", -1);
	pthread_mutex_lock(&st.wd_mu);
	while (!st.wd_stop) {
		t = dist_now() + period;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&st.wd_cv, &st.wd_mu, &ts);
		/* this process was stopped (SIGSTOP, then mpirun's SIGCONT): the
		 * peer it waits for did not hang meanwhile, this rank did, and
		 * the peer's watchdog says so; the wait starts again */
		if ((lost = cdp_watch_stalled(&prev, period)) > 0 && st.what)
			st.since += lost;
		if (!st.wd_stop && st.what && dist_now() - st.since > st.timeout) {
			signal(SIGALRM, SIG_DFL);
			alarm(10);
			/* A rank waits here only once it has entered the call: with
			 * two ranks the other one is late. */
			if (st.size == 2 && st.names)
				cdp_dist_abort(1, "%s did not finish within %g s: rank %d on host '%s' "
				               "died or hangs (timeout set by CDP_DIST_TIMEOUT)", st.what,
				               st.timeout, 1 - st.rank,
				               st.names + (size_t)(1 - st.rank) * DIST_HOST_NAME);
			cdp_dist_abort(1, "%s did not finish within %g s: a peer rank died or hangs "
			               "(timeout set by CDP_DIST_TIMEOUT)", st.what, st.timeout);
		}
	}
	pthread_mutex_unlock(&st.wd_mu);
	return NULL;
}

static int wd_start(void)
{
	pthread_condattr_t ca;
	int rc;

	if (st.timeout <= 0 || st.wd_on)
		return 0;
	st.wd_stop = 0;
	if ((rc = pthread_condattr_init(&ca)) != 0)
		return rc;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&st.wd_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return rc;
	if ((rc = pthread_create(&st.wd, NULL, wd_main, NULL)) != 0) {
		pthread_cond_destroy(&st.wd_cv);
		return rc;
	}
	st.wd_on = 1;
	return 0;
}

static void wd_stop(void)
{
	if (!st.wd_on)
		return;
	pthread_mutex_lock(&st.wd_mu);
	st.wd_stop = 1;
	pthread_cond_signal(&st.wd_cv);
	pthread_mutex_unlock(&st.wd_mu);
	pthread_join(st.wd, NULL);
	pthread_cond_destroy(&st.wd_cv);
	st.wd_on = 0;
}

static void wd_enter(const char *what)
{
	pthread_mutex_lock(&st.wd_mu);
	st.what = what;
	st.since = dist_now();
	pthread_mutex_unlock(&st.wd_mu);
}

static void wd_leave(void)
{
	pthread_mutex_lock(&st.wd_mu);
	st.what = NULL;
	pthread_mutex_unlock(&st.wd_mu);
}

void dist_watch_enter(const char *what) { wd_enter(what); }
void dist_watch_leave(void) { wd_leave(); }

/* ---- start-up and settings ------------------------------------------- */

/* An integer variable of the launcher's environment in [lo, hi], or def
 * when unset (def < lo: required); what it is, for the message that
 * refuses it: "want WHAT, an integer LO to HI". */
static int env_int(const char *name, const char *what, int def, int lo, int hi, int *out)
{
	static char want[200];
	const char *v = getenv(name);
	int rc;

	st.bad_env = name;
	snprintf(want, sizeof want, "%s, an integer %d to %d", what, lo, hi);
	st.bad_want = want;
	if (!v || !*v) {
		*out = def;
		return def < lo ? CDP_ESYNTAX : 0;
	}
	if ((rc = cdp_parse_int(v, lo, hi, out)) != 0)
		return rc;
	st.bad_env = NULL;
	st.bad_want = NULL;
	return 0;
}

/* Whether a launcher started this process as an MPI rank, which leaves
 * its mark: Open MPI's mpirun, a PMIx or PMI server (srun --mpi=pmix or
 * pmi2, MPICH's hydra), or a Slurm task (srun, also --mpi=none). RANK,
 * WORLD_SIZE and CDP_RENDEZVOUS are then not a launch of ours but what the
 * user's shell left (dist.h). A torchrun (TORCHELASTIC_RUN_ID) that srun
 * started passes the srun task's PMIx and Slurm variables on to every
 * child it starts, so those marks are not the child's: torchrun's
 * variables are. */
static int mpi_launched(void)
{
	static const char *const marks[] = { "PMIX_RANK", "PMI_RANK", "PMI_SIZE" };

	if (getenv("OMPI_COMM_WORLD_SIZE"))
		return 1;
	if (getenv("TORCHELASTIC_RUN_ID"))
		return 0;
	for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
		if (getenv(marks[i]))
			return 1;
	return getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID");
}

/* Whether MPI_Init in a process that no launcher started as an MPI rank
 * must not see variable e ("NAME=value"): a PMIx server's (else Open MPI
 * joins the srun task's PMIx server, which knows one rank for all of
 * torchrun's children, and MPI_Init_thread fails) and Slurm's (else Open
 * MPI takes the process for one srun started without PMIx and aborts).
 * PMIX_MCA_ settings are the user's or singleton_prepare's, not a server's. */
static int launcher_var(const char *e)
{
	return (!strncmp(e, "PMIX_", 5) && strncmp(e, "PMIX_MCA_", 9) != 0) ||
	       !strncmp(e, "PMI_", 4) || !strncmp(e, "SLURM_", 6);
}

/* Hides the launcher's variables from the MPI_Init of a singleton that
 * torchrun started (dist.h): unsets them and returns their copies
 * (NULL-terminated, malloc'ed), which launcher_restore puts back, since
 * the job id (dist_rdv.c) and the restart count are read after MPI_Init.
 * NULL when out of memory. */
static char **launcher_hide(void)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **saved;

	for (char **e = environ; *e; e++)
		n++;
	if (!(saved = calloc(n + 1, sizeof *saved)))
		return NULL;
	/* copied first: unsetenv moves environ's entries */
	for (char **e = environ; *e; e++)
		if (launcher_var(*e) && strchr(*e, '=') && !(saved[k++] = strdup(*e)))
			goto fail;
	for (size_t i = 0; i < k; i++) {
		char *eq = strchr(saved[i], '=');
		*eq = '\0';
		unsetenv(saved[i]);
		*eq = '=';
	}
	return saved;
fail:
	for (size_t i = 0; i < k; i++)
		free(saved[i]);
	free(saved);
	return NULL;
}

/* A variable MPI_Init set meanwhile (a singleton's own PMIx server's) is
 * MPI's to keep: the launcher's copy does not replace it. */
static void launcher_restore(char **saved)
{
	for (size_t i = 0; saved[i]; i++) {
		char *eq = strchr(saved[i], '=');
		*eq = '\0';
		setenv(saved[i], eq + 1, 0);
		free(saved[i]);
	}
	free(saved);
}

/* The world size the launcher that started this process announced, before
 * MPI_Init (a singleton's sets OMPI_COMM_WORLD_SIZE itself), or 0: Open
 * MPI's mpirun, a PMI-1/PMI-2 server (another MPI's mpiexec, srun
 * --mpi=pmi2), or a Slurm job step (SLURM_STEP_ID: an sbatch script's
 * batch shell has SLURM_NTASKS too, but starts one process). *var: the
 * variable that says it. */
static int launched_size(const char **var)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
	                                    "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS" };
	int n;

	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (!v || !*v || (i >= 2 && (!getenv("SLURM_STEP_ID") || getenv("TORCHELASTIC_RUN_ID"))))
			continue;
		*var = vars[i];
		return cdp_parse_int(v, 1, INT_MAX, &n) == 0 ? n : 0;
	}
	return 0;
}

/* st.lshare: the node's affinity masks gathered over its communicator,
 * how many share a CPU with ours. Ranks bound to CPUs of their own
 * (srun --cpus-per-task, mpirun --map-by ...:PE=N) then each take all of
 * theirs by default, unbound ones divide the node's. */
/* Every rank of the node's n bytes, in local rank order (malloc'ed), over
 * st.local: a collective, so every rank takes part, or none goes on. */
static unsigned char *local_gather(const unsigned char *mine, size_t n)
{
	unsigned char *all = malloc((size_t)st.lsize * n);

	if (!all)
		cdp_dist_abort(1, "out of memory");
	wd_enter("MPI_Allgather");
	MPI_CHECK(MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, st.local));
	wd_leave();
	return all;
}

static void local_share(void)
{
	unsigned char mine[CDP_CPUMASK_BYTES], *all;

	cdp_thread_mask(mine);
	all = local_gather(mine, CDP_CPUMASK_BYTES);
	st.lshare = cdp_thread_sharing(all, st.lsize, st.lrank);
	free(all);
}

/* After MPI found a singleton: a launch without MPI (dist.h)? */
static int env_launch(void)
{
	static char want[160];
	const char *rdv = getenv("CDP_RENDEZVOUS");
	int size, rank, lrank, lsize, rc;

	if (!getenv("WORLD_SIZE") || st.launched)
		return 0;
	if ((rc = env_int("WORLD_SIZE", "the number of ranks", 0, 1, 1 << 20, &size)) != 0)
		return rc;
	if (size == 1)
		return 0;
	/* a launcher of several ranks without the file they meet by: each
	 * would train alone, on the same outputs */
	if (!rdv || !*rdv) {
		snprintf(want, sizeof want, "the rendezvous file of a launch without MPI: WORLD_SIZE "
		         "is %d and no mpirun or srun started this process", size);
		st.bad_env = "CDP_RENDEZVOUS";
		st.bad_want = want;
		return CDP_ESYNTAX;
	}
	if ((rc = env_int("RANK", "this process's rank below WORLD_SIZE", -1, 0, size - 1,
	                  &rank)) != 0 ||
	    (rc = env_int("LOCAL_WORLD_SIZE", "the ranks of this node, at most WORLD_SIZE", size, 1,
	                  size, &lsize)) != 0 ||
	    (rc = env_int("LOCAL_RANK", "this process's rank on its node, below LOCAL_WORLD_SIZE",
	                  rank % lsize, 0, lsize - 1, &lrank)) != 0)
		return rc == CDP_ESYNTAX || rc == CDP_ERANGE ? rc : CDP_ESYNTAX;
	st.bad_env = NULL;
	st.env = 1;
	st.rank = rank;
	st.size = size;
	st.lrank = lrank;
	st.lsize = lsize;
	st.lshare = lsize;      /* no peers to ask before the rendezvous */
	return 0;
}

const char *cdp_dist_bad_env(void) { return st.bad_env ? st.bad_env : "CDP_DIST_TIMEOUT"; }
const char *cdp_dist_bad_env_want(void) { return st.bad_want; }

/* The switches and the job id, which are read later (dist_ring.c,
 * dist_dev.c, dist_rdv.c) and would take a value they do not know for the
 * default: an empty variable is unset. The job id becomes "cdp:ID" in the
 * rendezvous file (CDP_RDV_JOB_MAX bytes) and in messages, one line. */
static int env_check(void)
{
	static const char *const flags[] = { "CDP_DIST_THREAD", "CDP_DIST_STAGE" };
	const char *v;

	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if ((v = getenv(flags[i])) && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
			st.bad_env = flags[i];
			st.bad_want = "0 or 1";
			return CDP_ESYNTAX;
		}
	if ((v = getenv("CDP_JOB_ID")) && *v) {
		int bad = strlen(v) > CDP_RDV_JOB_MAX - 4;
		for (const char *c = v; *c && !bad; c++)
			bad = (unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e;
		if (bad) {
			st.bad_env = "CDP_JOB_ID";
			st.bad_want = "1 to 251 printable ASCII characters";
			return CDP_ERANGE;
		}
	}
	return 0;
}
int cdp_dist_env_launch(void) { return st.env; }
double dist_timeout(void) { return st.timeout; }
int dist_serialized(void) { return st.serialized && !st.env; }

/* Every rank's host name, for the watchdog's and the heartbeat's messages. */
static void hosts_init(void)
{
	char name[MPI_MAX_PROCESSOR_NAME], mine[DIST_HOST_NAME] = "";
	int len;

	if (!(st.names = calloc((size_t)st.size, DIST_HOST_NAME)))
		cdp_dist_abort(1, "cannot allocate %d host names: %s", st.size, strerror(ENOMEM));
	MPI_CHECK(MPI_Get_processor_name(name, &len));
	snprintf(mine, sizeof mine, "%.*s", len, name);
	wd_enter("MPI_Allgather");
	MPI_CHECK(MPI_Allgather(mine, DIST_HOST_NAME, MPI_CHAR, st.names, DIST_HOST_NAME, MPI_CHAR,
	                        st.comm));
	wd_leave();
}

/* Heartbeats (dist_beat.c): every rank learns rank 0's timeout, address
 * and port, then starts its thread. Rank 0's CDP_DIST_HEARTBEAT decides
 * for all: mpirun passes a variable to other hosts only with -x, and ranks
 * that disagreed would not meet here. */
static void beat_init(void)
{
	double hb[3] = { 0, 0, 0 };     /* timeout, address, port: exact in a double */
	uint32_t addr;
	uint16_t port;
	int rc;

	if (st.rank == 0 && st.beat > 0) {
		if (dist_beat_listen(st.lsize == st.size, &addr, &port) == 0)
			hb[0] = st.beat, hb[1] = addr, hb[2] = port;
		else
			dist_say("no heartbeat (cannot listen: %s); a lost rank is named only by "
			         "the watchdog", strerror(errno));
	}
	wd_enter("MPI_Bcast");
	MPI_CHECK(MPI_Bcast(hb, 3, MPI_DOUBLE, 0, st.comm));
	wd_leave();
	st.beat = hb[0];
	if ((rc = dist_beat_start(st.rank, st.size, st.names, (uint32_t)hb[1], (uint16_t)hb[2],
	                          hb[0])) != 0)
		cdp_dist_abort(1, "cannot start the heartbeat thread: %s", strerror(rc));
	if (hb[0] > 0) {
		wd_enter("MPI_Barrier");
		MPI_CHECK(MPI_Barrier(st.comm));
		wd_leave();
	}
}

/* Open MPI ends a failed MPI_Init itself, in dozens of lines of its own
 * and with no word of ours. A process no launcher started is a world of
 * one: it needs no shared-memory transport nor PMIx's shared store, whose
 * backing files a file-size limit (ulimit -f under some 8 MB) fails, so
 * those are off unless the user set them; and an open-file limit that
 * Open MPI's start-up cannot live within (it needs about 28 descriptors)
 * gets one line first, naming the likely cause. */
static void singleton_prepare(void)
{
	struct rlimit rl;

	setenv("OMPI_MCA_btl", "self", 0);
	setenv("PMIX_MCA_gds", "hash", 0);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < 32)
		fprintf(stderr, "%s: warning: the open-file limit is %llu (ulimit -n): MPI's "
		        "start-up needs about 32 and may fail below that\n", st.prog,
		        (unsigned long long)rl.rlim_cur);
}

int cdp_dist_init(int *argc, char ***argv)
{
	const char *env = getenv("CDP_DIST_TIMEOUT"), *want_var = NULL;
	char **hidden = NULL;
	int provided, rc, want;

	if (st.inited)
		return CDP_EINVAL;
	if ((rc = env_check()) != 0)
		return rc;
	/* an empty variable is unset, as for every other CDP_ variable */
	if (env && *env && (rc = cdp_parse_double(env, 0, 1e9, &st.timeout)) != 0) {
		st.bad_want = "seconds, 0 (never) to 1e9";
		return rc;
	}
	if ((env = getenv("CDP_DIST_HEARTBEAT")) && *env &&
	    (rc = cdp_parse_double(env, 0, 1e9, &st.beat)) != 0) {
		st.bad_env = "CDP_DIST_HEARTBEAT";
		st.bad_want = "seconds, 0 (no heartbeat) to 1e9";
		return rc;
	}
	/* a singleton's MPI_Init sets OMPI_COMM_WORLD_SIZE itself */
	st.launched = mpi_launched();
	want = st.launched ? launched_size(&want_var) : 0;
	if (!st.launched) {
		singleton_prepare();
		/* only torchrun's children inherit a launcher that is not
		 * theirs; a plain singleton (one cdp-train in an sbatch
		 * script) keeps what its MPI_Init has always seen */
		if (getenv("TORCHELASTIC_RUN_ID") && !(hidden = launcher_hide()))
			return CDP_ENOMEM;
	}
	/* SERIALIZED: the communication thread (dist_ring.c) makes MPI calls
	 * while the main thread makes none; Open MPI takes no locks below
	 * MPI_THREAD_MULTIPLE */
	MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
	if (hidden)
		launcher_restore(hidden);
	st.serialized = provided >= MPI_THREAD_SERIALIZED;
	MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	/* our own communicator, so our tags never meet the caller's messages */
	MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &st.comm));
	MPI_CHECK(MPI_Comm_set_errhandler(st.comm, MPI_ERRORS_RETURN));
	MPI_CHECK(MPI_Comm_rank(st.comm, &st.rank));
	MPI_CHECK(MPI_Comm_size(st.comm, &st.size));
	MPI_CHECK(MPI_Comm_split_type(st.comm, MPI_COMM_TYPE_SHARED, st.rank, MPI_INFO_NULL, &st.local));
	MPI_CHECK(MPI_Comm_rank(st.local, &st.lrank));
	MPI_CHECK(MPI_Comm_size(st.local, &st.lsize));
	/* from here every collective is timed: a peer that hangs at start-up
	 * must not keep the others waiting for ever either */
	if ((rc = wd_start()) != 0)
		cdp_dist_abort(1, "cannot start the watchdog thread: %s", strerror(rc));
	local_share();
	/* a launcher Open MPI cannot join (PMI-1/PMI-2, srun without
	 * --mpi=pmix) leaves each process a world of its own: each would
	 * train alone, on the same outputs */
	if (st.size == 1 && want > 1) {
		static char why[300];
		snprintf(why, sizeof why, "1, the size of the MPI world this process is in: Open MPI "
		         "cannot join the launcher that set it (another MPI's mpiexec, srun without "
		         "--mpi=pmix); start it with Open MPI's mpirun or srun --mpi=pmix");
		st.bad_env = want_var;
		st.bad_want = why;
		rc = CDP_ERANGE;
	} else if (st.size == 1) {
		rc = env_launch();
	}
	if (rc != 0) {
		wd_stop();
		MPI_CHECK(MPI_Comm_free(&st.local));
		MPI_CHECK(MPI_Comm_free(&st.comm));
		MPI_CHECK(MPI_Finalize());
		return rc;
	}
	/* the compressed buckets' sums: Open MPI 4.1 knows no 16-bit float */
	MPI_CHECK(MPI_Op_create(sum_fp16, 1, &st.op16[CDP_DIST_COMP_FP16]));
	MPI_CHECK(MPI_Op_create(sum_bf16, 1, &st.op16[CDP_DIST_COMP_BF16]));
	st.left = (st.rank + st.size - 1) % st.size;
	st.right = (st.rank + 1) % st.size;
	if (st.size > 1 && !st.env) {      /* launched without MPI: no peers to ask */
		hosts_init();
		beat_init();
	}
	st.inited = 1;
	return 0;
}

void cdp_dist_finalize(void)
{
	if (!st.inited)
		return;
	dist_ring_finalize();
	dist_beat_stop();
	wd_stop();
	free(st.names);         /* after the watchdog, which may name a host */
	st.names = NULL;
	MPI_CHECK(MPI_Op_free(&st.op16[CDP_DIST_COMP_FP16]));
	MPI_CHECK(MPI_Op_free(&st.op16[CDP_DIST_COMP_BF16]));
	MPI_CHECK(MPI_Comm_free(&st.local));
	MPI_CHECK(MPI_Comm_free(&st.comm));
	MPI_CHECK(MPI_Finalize());
	st.inited = 0;
}

int cdp_dist_set_algo(cdp_dist_algo algo)
{
	if ((algo != CDP_DIST_MPI && algo != CDP_DIST_RING && algo != CDP_DIST_NCCL) ||
	    (algo == CDP_DIST_NCCL && !cdp_dist_nccl_usable()) || dist_busy())
		return CDP_EINVAL;
	st.algo = algo;
	return 0;
}

cdp_dist_algo cdp_dist_get_algo(void) { return st.algo; }

int cdp_dist_set_timeout(double seconds)
{
	if (!(seconds >= 0 && seconds <= 1e9))
		return CDP_EINVAL;
	wd_stop();
	st.timeout = seconds;
	return st.inited && wd_start() != 0 ? CDP_ENOMEM : 0;
}

int cdp_dist_algo_parse(const char *s, cdp_dist_algo *algo)
{
	if (s && strcmp(s, "mpi") == 0)
		*algo = CDP_DIST_MPI;
	else if (s && strcmp(s, "ring") == 0)
		*algo = CDP_DIST_RING;
	else if (s && strcmp(s, "nccl") == 0)
		*algo = CDP_DIST_NCCL;
	else
		return CDP_ESYNTAX;
	return 0;
}

const char *cdp_dist_algo_name(cdp_dist_algo algo)
{
	return algo == CDP_DIST_MPI ? "mpi" : algo == CDP_DIST_NCCL ? "nccl" : "ring";
}

void cdp_dist_stats_get(cdp_dist_stats *s) { *s = dist_stats; }
void cdp_dist_stats_reset(void) { memset(&dist_stats, 0, sizeof dist_stats); }

/* ---- blocking collectives -------------------------------------------- */

/* Runs one blocking collective call per part of at most INT_MAX items. */
#define BLOCKING(name, n, call) do { \
	double t0_ = dist_now(); \
	dist_quiesce(); \
	if (st.size > 1) { \
		wd_enter(name); \
		for (size_t off = 0; off < (n); off += INT_MAX) { \
			int part = (int)((n) - off < INT_MAX ? (n) - off : INT_MAX); \
			MPI_CHECK(call); \
		} \
		wd_leave(); \
	} \
	dist_stats.wait_s += dist_now() - t0_; \
} while (0)

int cdp_dist_bcast(float *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	switch (dist_dev_mode(st.algo)) {
	case DIST_STAGE: return dist_dev_bcast(buf, n);
	case DIST_NCCL: dist_nccl_bcast(buf, n); return 0;
	}
	BLOCKING("MPI_Bcast", n, MPI_Bcast(buf + off, part, MPI_FLOAT, 0, st.comm));
	return 0;
}

int cdp_dist_bcast_bytes(void *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	if (st.env) {
		dist_nccl_host_bcast(buf, n);
		return 0;
	}
	BLOCKING("MPI_Bcast", n, MPI_Bcast((char *)buf + off, part, MPI_BYTE, 0, st.comm));
	return 0;
}

/* A tag the ring never uses (its tags stay below TAG_SPAN = 30000), though
 * no ring op may be in flight here anyway. */
#define GATHER_TAG 32000

int cdp_dist_gather_bytes(const void *send, size_t n, void *recv)
{
	double t0 = dist_now();

	if ((!send && n) || (st.rank == 0 && !recv && n) || dist_busy())
		return CDP_EINVAL;
	if (st.env) {
		dist_nccl_host_gather(send, n, recv);
		return 0;
	}
	if (st.rank == 0 && n)
		memmove(recv, send, n);
	if (st.size > 1 && n) {
		wd_enter(st.rank == 0 ? "MPI_Recv" : "MPI_Send");
		for (int r = 1; r < st.size; r++) {
			if (st.rank != 0 && st.rank != r)
				continue;
			for (size_t off = 0; off < n; off += INT_MAX) {
				int part = (int)(n - off < INT_MAX ? n - off : INT_MAX);
				if (st.rank == 0)
					MPI_CHECK(MPI_Recv((char *)recv + (size_t)r * n + off, part, MPI_BYTE, r,
					                   GATHER_TAG, st.comm, MPI_STATUS_IGNORE));
				else
					MPI_CHECK(MPI_Send((const char *)send + off, part, MPI_BYTE, 0,
					                   GATHER_TAG, st.comm));
			}
		}
		wd_leave();
	}
	dist_stats.wait_s += dist_now() - t0;
	return 0;
}

int cdp_dist_sum_f64(double *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	if (st.env) {
		dist_nccl_host_reduce(buf, n, 0, 0);
		return 0;
	}
	BLOCKING("MPI_Allreduce", n, MPI_Allreduce(MPI_IN_PLACE, buf + off, part, MPI_DOUBLE,
	                                           MPI_SUM, st.comm));
	return 0;
}

int cdp_dist_local_same(const unsigned char *id, size_t n)
{
	unsigned char *all;
	int k = 0;

	if (st.env || !st.inited || n == 0 || n > 256)
		return -1;
	all = local_gather(id, n);
	for (int r = 0; r < st.lsize; r++)
		k += memcmp(all + (size_t)r * n, id, n) == 0;
	free(all);
	return k;
}

int cdp_dist_sum_u64(uint64_t *buf, size_t n)
{
	if (!buf && n)
		return CDP_EINVAL;
	if (st.env) {
		dist_nccl_host_reduce(buf, n, 1, 0);
		return 0;
	}
	BLOCKING("MPI_Allreduce", n, MPI_Allreduce(MPI_IN_PLACE, buf + off, part, MPI_UINT64_T,
	                                           MPI_SUM, st.comm));
	return 0;
}

int cdp_dist_max_f64(double *v)
{
	if (!v)
		return CDP_EINVAL;
	if (st.env) {
		dist_nccl_host_reduce(v, 1, 0, 1);
		return 0;
	}
	BLOCKING("MPI_Allreduce", (size_t)1, MPI_Allreduce(MPI_IN_PLACE, v, part, MPI_DOUBLE,
	                                                   MPI_MAX, st.comm));
	return 0;
}

void cdp_dist_barrier(void)
{
	double t0 = dist_now();
	uint64_t one = 1;

	dist_quiesce();
	if (st.env)
		dist_nccl_host_reduce(&one, 1, 1, 0);
	else if (st.size > 1) {
		wd_enter("MPI_Barrier");
		MPI_CHECK(MPI_Barrier(st.comm));
		wd_leave();
	}
	dist_stats.wait_s += dist_now() - t0;
}

/* ---- checked calls for dist_ring.c ------------------------------------ */

int dist_test(MPI_Request *req)
{
	int flag;

	MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
	return flag;
}

int dist_testall(int n, MPI_Request *req)
{
	int flag;

	MPI_CHECK(MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE));
	return flag;
}

int dist_waitany(int n, MPI_Request *req, const char *what)
{
	int idx;

	wd_enter(what);
	MPI_CHECK(MPI_Waitany(n, req, &idx, MPI_STATUS_IGNORE));
	wd_leave();
	return idx;
}

static MPI_Datatype type_of(int comp) { return comp ? MPI_UINT16_T : MPI_FLOAT; }

void dist_isend(const void *buf, int n, int comp, int tag, MPI_Request *req)
{
	MPI_CHECK(MPI_Isend(buf, n, type_of(comp), st.right, tag, st.comm, req));
}

void dist_irecv(void *buf, int n, int comp, int tag, MPI_Request *req)
{
	MPI_CHECK(MPI_Irecv(buf, n, type_of(comp), st.left, tag, st.comm, req));
}

void dist_iallreduce(void *buf, int n, int comp, MPI_Request *req)
{
	MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, n, type_of(comp), comp ? st.op16[comp] : MPI_SUM,
	                         st.comm, req));
}

void dist_allreduce_sum(float *buf, size_t n)
{
	wd_enter("MPI_Allreduce");
	for (size_t off = 0; off < n; off += INT_MAX) {
		size_t part = n - off < INT_MAX ? n - off : INT_MAX;
		MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)part, MPI_FLOAT, MPI_SUM, st.comm));
	}
	wd_leave();
}

int cdp_dist_any(int flag)
{
	uint64_t v = flag != 0;

	/* launched without MPI, NCCL is the only way to the others, and
	 * without a GPU backend there is none: a failed rank stops alone (the
	 * others, waiting for it at the rendezvous or in NCCL, stop at their
	 * watchdog), unwinding as it would under MPI, instead of ending in
	 * comm_up's "NCCL needs a GPU" with its run directory locked */
	if (st.env && flag && !cdp_dist_nccl_usable())
		return 1;

	/* a sum of 0/1 flags: the ranks' order cannot change it, and it goes
	 * where every host collective goes (MPI, or NCCL when launched
	 * without MPI) */
	cdp_dist_sum_u64(&v, 1);
	return v != 0;
}

int cdp_dist_bcast_buf(int rc0, unsigned char **buf, size_t *len, int *mine)
{
	int64_t head[2] = { rc0, (int64_t)*len };   /* rank 0's error, the length */
	int rank = cdp_dist_rank(), failed = rc0 != 0;

	*mine = rank == 0 ? rc0 : 0;
	if (cdp_dist_size() > 1) {
		cdp_dist_bcast_bytes(head, sizeof head);
		failed = head[0] != 0;
		if (rank != 0) {
			*buf = NULL;
			*len = (size_t)head[1];
			if (!failed && !(*buf = malloc(*len ? *len : 1)))
				*mine = CDP_ENOMEM;
		}
		/* a rank without room still takes part in the agreement */
		if (!failed)
			failed = cdp_dist_any(*mine != 0);
		if (!failed)
			cdp_dist_bcast_bytes(*buf, *len);
	}
	if (!failed)
		return 0;
	free(*buf);
	*buf = NULL;
	*len = 0;
	return -1;
}

const char *cdp_dist_features(void)
{
	static char buf[128];
	char mpi[48], nccl[48];

#ifdef OMPI_MAJOR_VERSION
	snprintf(mpi, sizeof mpi, "Open MPI: %d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
	         OMPI_RELEASE_VERSION);
#else
	snprintf(mpi, sizeof mpi, "MPI: standard %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
#ifdef HAVE_CUDA
	snprintf(nccl, sizeof nccl, "NCCL: %d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
	snprintf(nccl, sizeof nccl, "NCCL: not built");
#endif
	snprintf(buf, sizeof buf, "%s\n%s", nccl, mpi);
	return buf;
}
