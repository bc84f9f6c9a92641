/* test_dist.c: dist.h at whatever size it is started with (tests/train/
 * dist.sh runs it alone and under mpirun -np 1, 2 and 3).
 *
 *  - rank, size, local rank and size are consistent across ranks;
 *  - ring and mpi sums of random data (the project PRNG, rank r's data from
 *    cdp_rng_derive(seed, n, r), so every rank can compute the exact sum in
 *    double) for n = 0, 1, j-1, j, j+1, 1000, 3 * 262144 + 5 and 2^20 + 7,
 *    and chunk sizes 1, 64 and the default 1 MiB: each is within
 *    (j-1) * 2^-24 * sum|x_i| of the exact sum, ring and mpi are within twice
 *    that of each other and bitwise equal for j <= 2; the ring is bitwise the
 *    same on every rank, run to run and for every chunk size; each rank sends
 *    exactly 2n - |seg(r+1)| - |seg(r+2)| floats, i.e. 2(j-1)/j * n;
 *  - average is the sum divided by j, bitwise;
 *  - bucketed reduction with overlap equals the serial baseline bitwise, for
 *    both algorithms, over two steps; buckets partition the block at layer
 *    boundaries and start as soon as their layers are done;
 *  - bcast from rank 0, gather to rank 0, double and uint64 metric sums, max;
 *  - the exposed part of the buckets' time in flight stays within it when
 *    the main thread loses its core right after handing a bucket to the
 *    communication thread (the scheduler's wake-up preemption, modelled by
 *    stalling every pthread_mutex_unlock of the main thread), so that the
 *    thread sees the reduction finish before the call that started it
 *    returns;
 *  - bad arguments are refused.
 * Failure modes (run by dist.sh, each must end the job non-zero), with an
 * optional second argument mpi|ring (default ring) for the reduction:
 *   --kill   rank 1 kills itself with SIGKILL while rank 0 is in a reduction
 *   --hang   rank 1 sleeps while rank 0 waits (the watchdog must fire)
 *   --hang-bucket  the same while rank 0 waits for one bucket
 *            (cdp_dist_bucket_wait, cdp-train's update per bucket) that
 *            the communication thread reduces
 *   --stop   the last rank stops (SIGSTOP): the heartbeat names it
 *   --abort  rank 1 calls cdp_dist_abort while rank 0 waits
 *   --mismatch  rank 1 reduces 2 floats fewer (a caller bug): MPI
 *            reports a truncated message, which the check macro names
 * and one that must end 0:
 *   --pause  rank 0 stops rank 1 (SIGSTOP) for 4 s while it waits in a
 *            barrier under a 2 s watchdog, continues it and joins 0.5 s
 *            later: rank 1 was not running, so neither its watchdog nor
 *            its heartbeat may blame rank 0
 */
#define _GNU_SOURCE         /* RTLD_NEXT */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cdp_error.h"
#include "cdp_progress.h"
#include "cdp_rng.h"
#include "dist/dist.h"
#include "tap.h"

#define SEED 20240611u
#define DEFAULT_CHUNK 262144

static int R, J;

/* The stall of test_stalled_waker: while stall_s > 0, each
 * pthread_mutex_unlock of the main thread (ct_post's, which has just
 * signalled the communication thread, among them) returns stall_s late.
 * Every other caller, MPI's included, goes straight through. */
static double stall_s;
static pthread_t main_thread;

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);
	int rc;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	rc = real(m);
	/* stall_s is the main thread's alone: other threads do not read it */
	if (pthread_equal(pthread_self(), main_thread) && stall_s > 0) {
		struct timespec ts = { 0, (long)(stall_s * 1e9) };
		nanosleep(&ts, NULL);
	}
	return rc;
}

/* Rank r's data for a test of size n: magnitudes spread over 2^-8..2^8 so
 * that the order of additions shows in the low bits. */
static void fill(float *x, size_t n, int r, uint64_t salt)
{
	cdp_rng g;

	cdp_rng_seed(&g, cdp_rng_derive(SEED ^ salt, n, (uint64_t)r));
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((cdp_rng_double(&g) * 2 - 1) * ldexp(1, (int)cdp_rng_below(&g, 17) - 8));
}

/* FNV-1a of the bytes: one number to compare across ranks. */
static uint64_t hash(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211u;
	return h;
}

/* 1 on every rank if h is the same on every rank. */
static int same_everywhere(uint64_t h)
{
	uint64_t h0 = h, bad;

	cdp_dist_bcast_bytes(&h0, sizeof h0);
	bad = h0 != h;
	cdp_dist_sum_u64(&bad, 1);
	return bad == 0;
}

/* Floats the ring sends from rank r: every segment in scatter-reduce but
 * seg (r+1), every one in all-gather but seg (r+2). */
static uint64_t ring_floats(size_t n)
{
	size_t q = n / (size_t)J, rem = n % (size_t)J;
	int a = (R + 1) % J, b = (R + 2) % J;

	if (J == 1)
		return 0;
	return 2 * n - (q + ((size_t)a < rem)) - (q + ((size_t)b < rem));
}

static void test_ranks(void)
{
	uint64_t v[3] = { (uint64_t)R, 1, cdp_dist_local_rank() == 0 ? (uint64_t)cdp_dist_local_size() : 0 };

	CHECK(R >= 0 && R < J, "rank %d of %d", R, J);
	CHECK(cdp_dist_local_rank() >= 0 && cdp_dist_local_rank() < cdp_dist_local_size(),
	      "local rank %d of %d", cdp_dist_local_rank(), cdp_dist_local_size());
	CHECK_RC(cdp_dist_sum_u64(v, 3), 0);
	CHECK(v[0] == (uint64_t)J * (J - 1) / 2 && v[1] == (uint64_t)J,
	      "ranks sum to %llu over %llu processes", (unsigned long long)v[0], (unsigned long long)v[1]);
	/* the ranks sharing this one's CPUs: dist.sh binds the ranks or not
	 * and says how many that makes (CDP_TEST_WANT_SHARE) */
	CHECK(cdp_dist_local_share() >= 1 && cdp_dist_local_share() <= cdp_dist_local_size(),
	      "local share %d of %d", cdp_dist_local_share(), cdp_dist_local_size());
	if (getenv("CDP_TEST_WANT_SHARE"))
		CHECK(cdp_dist_local_share() == atoi(getenv("CDP_TEST_WANT_SHARE")),
		      "%d local ranks share this one's CPUs, want %s", cdp_dist_local_share(),
		      getenv("CDP_TEST_WANT_SHARE"));
	/* the node's ranks that pass the same bytes (the GPU each took):
	 * here the parity of the local rank */
	{
		unsigned char id[16] = { 0 };
		int L = cdp_dist_local_size(), want = (L + 1 - cdp_dist_local_rank() % 2) / 2, got;
		id[15] = (unsigned char)(cdp_dist_local_rank() % 2);
		got = cdp_dist_local_same(id, sizeof id);     /* a collective: once */
		CHECK(got == want, "%d local ranks pass this one's bytes, want %d of %d", got, want, L);
	}
	/* each node's local rank 0 reports its node's size: they add up to j */
	CHECK(v[2] == (uint64_t)J, "local sizes add up to %llu, want %d", (unsigned long long)v[2], J);
	/* every rank agrees one failed: the last rank alone, rank 0 alone, all
	 * of them (any nonzero flag counts), none */
	CHECK(cdp_dist_any(R == J - 1) == 1, "rank %d: the last rank's failure not seen", R);
	CHECK(cdp_dist_any(R == 0 ? -5 : 0) == 1, "rank %d: rank 0's failure not seen", R);
	CHECK(cdp_dist_any(1) == 1, "rank %d: all failed, not seen", R);
	CHECK(cdp_dist_any(0) == 0, "rank %d: a failure where none was", R);
}

/* One size n, the ring at each chunk size in chunks[]. */
static void test_sum(size_t n, const size_t *chunks, int nchunks)
{
	float *x = malloc((n + 1) * sizeof *x), *ring = malloc((n + 1) * sizeof *ring);
	float *mpi = malloc((n + 1) * sizeof *mpi), *avg = malloc((n + 1) * sizeof *avg);
	double *exact = calloc(n + 1, sizeof *exact), *mag = calloc(n + 1, sizeof *mag);
	const double u = ldexp(1, -24);
	size_t bad_ring = 0, bad_mpi = 0, bad_pair = 0, bad_avg = 0;
	cdp_dist_stats s0, s1;
	uint64_t h = 0;

	if (!x || !ring || !mpi || !avg || !exact || !mag) {
		CHECK(0, "out of memory for n=%zu", n);
		goto out;
	}
	for (int r = 0; r < J; r++) {
		fill(x, n, r, 1);
		for (size_t i = 0; i < n; i++)
			exact[i] += x[i], mag[i] += fabs(x[i]);
	}
	fill(x, n, R, 1);
	memcpy(mpi, x, n * sizeof *x);
	CHECK_RC(cdp_dist_allreduce(mpi, n, CDP_DIST_MPI, 0), 0);
	for (int c = 0; c < nchunks; c++) {
		CHECK_RC(cdp_dist_set_chunk(chunks[c]), 0);
		for (int rep = 0; rep < 2; rep++) {
			memcpy(ring, x, n * sizeof *x);
			cdp_dist_stats_get(&s0);
			CHECK_RC(cdp_dist_allreduce(ring, n, CDP_DIST_RING, 0), 0);
			cdp_dist_stats_get(&s1);
			CHECK(s1.ring_bytes - s0.ring_bytes == 4 * ring_floats(n),
			      "n=%zu: rank %d sent %llu bytes, want %llu", n, R,
			      (unsigned long long)(s1.ring_bytes - s0.ring_bytes),
			      (unsigned long long)(4 * ring_floats(n)));
			if (c == 0 && rep == 0) {
				h = hash(ring, n * sizeof *ring);
				continue;
			}
			CHECK(hash(ring, n * sizeof *ring) == h,
			      "n=%zu chunk=%zu rep %d: ring result differs from the first run", n, chunks[c], rep);
		}
	}
	CHECK_RC(cdp_dist_set_chunk(DEFAULT_CHUNK), 0);
	CHECK(same_everywhere(h), "n=%zu: ring results differ between ranks", n);
	CHECK(same_everywhere(hash(mpi, n * sizeof *mpi)), "n=%zu: mpi results differ between ranks", n);
	/* recursive summation of j terms: error <= gamma_(j-1) sum|x_i| */
	const double gamma = (J - 1) * u / (1 - (J - 1) * u);
	for (size_t i = 0; i < n; i++) {
		double bound = gamma * mag[i];
		bad_ring += fabs(ring[i] - exact[i]) > bound;
		bad_mpi += fabs(mpi[i] - exact[i]) > bound;
		bad_pair += J <= 2 ? ring[i] != mpi[i] : fabs((double)ring[i] - mpi[i]) > 2 * bound;
	}
	CHECK(!bad_ring, "n=%zu: %zu ring sums off the exact sum by more than (j-1)u sum|x|", n, bad_ring);
	CHECK(!bad_mpi, "n=%zu: %zu mpi sums off the exact sum by more than (j-1)u sum|x|", n, bad_mpi);
	CHECK(!bad_pair, "n=%zu: %zu elements where ring and mpi disagree beyond the bound", n, bad_pair);
	for (int a = 0; a < 2; a++) {
		memcpy(avg, x, n * sizeof *x);
		if (a == 0)
			CHECK_RC(cdp_dist_allreduce(avg, n, CDP_DIST_RING, 1), 0);
		else
			CHECK_RC(cdp_dist_average(avg, n), 0);   /* the default: ring */
		for (size_t i = 0; i < n; i++)
			bad_avg += avg[i] != ring[i] / (float)J;
	}
	memcpy(avg, x, n * sizeof *x);
	CHECK_RC(cdp_dist_allreduce(avg, n, CDP_DIST_MPI, 1), 0);
	for (size_t i = 0; i < n; i++)
		bad_avg += avg[i] != mpi[i] / (float)J;
	CHECK(!bad_avg, "n=%zu: %zu averages are not sum / j", n, bad_avg);
out:
	free(x), free(ring), free(mpi), free(avg), free(exact), free(mag);
}

/* A fake net: layer sizes with parameter-free layers in between. */
static const size_t layer_len[] = { 0, 300, 5, 0, 1000, 20000, 7, 0, 123456, 3, 64, 0, 70000, 1 };
#define NL ((int)(sizeof layer_len / sizeof layer_len[0]))

/* Two training steps of simulated backward: layers from last to first get
 * their "gradients" (step-dependent random data), then layer_done. */
static void backward_steps(float *g, const size_t *off, int overlap, cdp_dist_algo algo,
                           int nbuckets, size_t first_floats, size_t bucket_floats, float *out2)
{
	int nb;
	double last = 0;         /* when layer 0, the last of the backward pass, was done */
	cdp_dist_stats ds;

	CHECK_RC(cdp_dist_set_algo(algo), 0);
	const char *thr = getenv("CDP_DIST_THREAD");

	nb = cdp_dist_buckets(g, off, NL, first_floats, bucket_floats, nbuckets, overlap, 1);
	CHECK(nb >= 1, "cdp_dist_buckets returned %d", nb);
	/* Open MPI gives MPI_THREAD_SERIALIZED: the thread takes overlapped
	 * buckets unless CDP_DIST_THREAD=0 (dist.sh runs both) */
	CHECK(cdp_dist_threaded() == (overlap && J > 1 && !(thr && strcmp(thr, "0") == 0)),
	      "overlap %d, %d ranks, CDP_DIST_THREAD=%s: threaded %d", overlap, J, thr ? thr : "",
	      cdp_dist_threaded());
	cdp_dist_stats_reset();
	for (int step = 0; step < 2; step++) {
		for (int l = NL - 1; l >= 0; l--) {
			if (l == 0)
				last = cdp_now();
			fill(g + off[l], layer_len[l], R, 100 + (uint64_t)step * NL + (uint64_t)l);
			CHECK_RC(cdp_dist_layer_done(l), 0);
			CHECK_RC(cdp_dist_layer_done(l), 0);   /* twice is harmless */
			for (int b = 0; b < nb; b++) {
				int l0, st = cdp_dist_bucket_state(b);
				cdp_dist_bucket_info(b, NULL, NULL, &l0, NULL);
				CHECK(overlap ? (l <= l0) == (st >= 1) : st == 0,
				      "overlap %d: after layer %d bucket %d (from layer %d) is in state %d",
				      overlap, l, b, l0, st);
			}
			cdp_dist_progress();
		}
		cdp_dist_wait_all();
		for (int b = 0; b < nb; b++) {
			double t0, t1;
			int l0;
			CHECK(cdp_dist_bucket_state(b) == 0, "bucket %d not re-armed after wait_all", b);
			/* the spans of cdp-train --trace: a bucket without layer 0
			 * starts during the backward pass only with overlap */
			CHECK_RC(cdp_dist_bucket_times(b, &t0, &t1), 0);
			cdp_dist_bucket_info(b, NULL, NULL, &l0, NULL);
			CHECK(t0 > 0 && t1 >= t0, "bucket %d: started %g, done %g", b, t0, t1);
			CHECK(l0 == 0 || (overlap ? t0 < last : t0 > last),
			      "overlap %d: bucket %d started at %g, layer 0 done at %g", overlap, b, t0, last);
		}
		if (step == 0)
			memcpy(out2, g, off[NL] * sizeof *g);
	}
	memcpy(out2 + off[NL], g, off[NL] * sizeof *g);
	/* the exposed part of the buckets' time in flight is within it */
	cdp_dist_stats_get(&ds);
	CHECK(ds.grad_exposed_s >= 0 && ds.grad_exposed_s <= ds.grad_s && (J == 1 || ds.grad_s > 0),
	      "overlap %d: buckets in flight %g s, exposed %g s", overlap, ds.grad_s,
	      ds.grad_exposed_s);
	CHECK(overlap || ds.grad_exposed_s == ds.grad_s,
	      "serial: in flight %g s but exposed %g s", ds.grad_s, ds.grad_exposed_s);
	CHECK_RC(cdp_dist_set_algo(CDP_DIST_RING), 0);
}

static void test_buckets(void)
{
	size_t off[NL + 1], total, boff, bn, next;
	float *g, *serial, *overlap, *whole;
	int nb, l0, l1, prev_l0;

	off[0] = 0;
	for (int l = 0; l < NL; l++)
		off[l + 1] = off[l] + layer_len[l];
	total = off[NL];
	g = malloc(total * sizeof *g);
	serial = malloc(2 * total * sizeof *serial);
	overlap = malloc(2 * total * sizeof *overlap);
	whole = malloc(total * sizeof *whole);
	if (!g || !serial || !overlap || !whole) {
		CHECK(0, "out of memory");
		goto out;
	}
	/* buckets tile the block from the top, at layer boundaries */
	nb = cdp_dist_buckets(g, off, NL, 0, 1000, 0, 1, 0);
	CHECK(nb > 1 && nb <= NL, "%d buckets", nb);
	next = total, prev_l0 = NL;
	for (int b = 0; b < nb; b++) {
		CHECK_RC(cdp_dist_bucket_info(b, &boff, &bn, &l0, &l1), 0);
		CHECK(l1 == prev_l0 && l0 < l1 && boff == off[l0] && boff + bn == off[l1] && boff + bn == next,
		      "bucket %d: layers [%d,%d) floats [%zu,+%zu)", b, l0, l1, boff, bn);
		CHECK(b == nb - 1 || bn >= 1000, "bucket %d holds %zu floats < 1000", b, bn);
		next = boff, prev_l0 = l0;
	}
	CHECK(next == 0 && prev_l0 == 0, "buckets stop at layer %d, float %zu", prev_l0, next);
	CHECK_RC(cdp_dist_bucket_info(nb, NULL, NULL, NULL, NULL), CDP_EINVAL);
	/* a small first bucket (DDP's): layer 13 alone (1 float), the rest by 1000 */
	nb = cdp_dist_buckets(g, off, NL, 1, 1000, 0, 1, 0);
	CHECK_RC(cdp_dist_bucket_info(0, &boff, &bn, &l0, &l1), 0);
	CHECK(l0 == NL - 1 && l1 == NL && bn == 1, "first bucket: layers [%d,%d), %zu floats", l0,
	      l1, bn);
	CHECK_RC(cdp_dist_bucket_info(1, &boff, &bn, &l0, &l1), 0);
	CHECK(l1 == NL - 1 && bn >= 1000, "second bucket: layers [%d,%d), %zu floats", l0, l1, bn);
	nb = cdp_dist_buckets(g, off, NL, 0, 0, 4, 1, 0);
	CHECK(nb >= 2 && nb <= 4, "nbuckets=4 gave %d", nb);
	CHECK_RC(cdp_dist_set_chunk(1000), 0);
	for (int a = 0; a < 2; a++) {
		cdp_dist_algo algo = a ? CDP_DIST_MPI : CDP_DIST_RING;
		for (int cut = 0; cut < 2; cut++) {
			backward_steps(g, off, 0, algo, cut ? 0 : 4, cut ? 10 : 0, 1000, serial);
			backward_steps(g, off, 1, algo, cut ? 0 : 4, cut ? 10 : 0, 1000, overlap);
			CHECK(memcmp(serial, overlap, 2 * total * sizeof *g) == 0,
			      "%s, %s: overlapped buckets differ from the serial baseline",
			      cdp_dist_algo_name(algo), cut ? "1000 floats" : "4 buckets");
		}
		/* the last step against one reduction of the whole block */
		for (int l = 0; l < NL; l++)
			fill(whole + off[l], layer_len[l], R, 100 + (uint64_t)NL + (uint64_t)l);
		CHECK_RC(cdp_dist_allreduce(whole, total, algo, 1), 0);
		size_t bad = 0;
		for (size_t i = 0; i < total; i++)
			bad += J <= 2 ? whole[i] != overlap[total + i]
			              : fabs(whole[i] - overlap[total + i]) > 4 * ldexp(1, -24) * 256 * J;
		CHECK(!bad, "%s: %zu bucketed averages differ from the whole-block average",
		      cdp_dist_algo_name(algo), bad);
	}
	CHECK_RC(cdp_dist_set_chunk(DEFAULT_CHUNK), 0);
out:
	free(g), free(serial), free(overlap), free(whole);
}

/* One bucket of three layers, 200,000 floats, handed to the
 * communication thread by layer 0's layer_done, the main thread stalled
 * 5 ms right after it: the thread (both ranks stall alike) finishes the
 * 0.8 MB ring meanwhile, so the call that started it ends after the
 * reduction did. Every step's exposed time must still lie within its time
 * in flight, and hold the stall. */
static void test_stalled_waker(void)
{
	const size_t off[] = { 0, 1000, 101000, 200000 };
	float *g = malloc(off[3] * sizeof *g);
	int late = 0;

	if (!g) {
		CHECK(0, "out of memory");
		return;
	}
	CHECK(cdp_dist_buckets(g, off, 3, 0, off[3], 0, 1, 1) == 1, "stalled waker: not 1 bucket");
	if (!cdp_dist_threaded()) {     /* 1 rank, or CDP_DIST_THREAD=0 */
		free(g);
		return;
	}
	for (int step = 0; step < 10; step++) {
		cdp_dist_stats ds;

		cdp_dist_stats_reset();
		for (int l = 2; l >= 0; l--) {
			fill(g + off[l], off[l + 1] - off[l], R, 300 + (uint64_t)step * 3 + (uint64_t)l);
			stall_s = l == 0 ? 5e-3 : 0;
			CHECK_RC(cdp_dist_layer_done(l), 0);
			stall_s = 0;
		}
		cdp_dist_wait_all();
		cdp_dist_stats_get(&ds);
		CHECK(ds.grad_exposed_s <= ds.grad_s,
		      "stalled waker, step %d: buckets in flight %g s, exposed %g s", step, ds.grad_s,
		      ds.grad_exposed_s);
		late += ds.grad_exposed_s >= 5e-3;
	}
	CHECK(late == 10, "stalled waker: %d of 10 steps exposed the 5 ms stall", late);
	free(g);
}

static void test_misc(void)
{
	float w[1000];
	char bytes[77];
	double d[3] = { 0.5 * R, 1.0, -2.25 }, mx = R;
	uint64_t cm[4] = { (uint64_t)R, 1000000007ull * (R + 1), 0, 1ull << 40 };
	cdp_dist_algo a;
	size_t bad_off[3] = { 0, 5, 4 };

	for (int i = 0; i < 1000; i++)
		w[i] = R == 0 ? (float)i * 0.5f : -1.0f;
	memset(bytes, R == 0 ? 'x' : 'y', sizeof bytes);
	CHECK_RC(cdp_dist_bcast(w, 1000), 0);
	CHECK_RC(cdp_dist_bcast_bytes(bytes, sizeof bytes), 0);
	int bad = 0;
	for (int i = 0; i < 1000; i++)
		bad += w[i] != (float)i * 0.5f;
	for (size_t i = 0; i < sizeof bytes; i++)
		bad += bytes[i] != 'x';
	CHECK(!bad, "bcast: %d values differ from rank 0's", bad);
	CHECK_RC(cdp_dist_sum_f64(d, 3), 0);
	CHECK(d[0] == 0.25 * J * (J - 1) && d[1] == J && d[2] == -2.25 * J,
	      "double sums %g %g %g", d[0], d[1], d[2]);
	CHECK_RC(cdp_dist_sum_u64(cm, 4), 0);
	CHECK(cm[0] == (uint64_t)J * (J - 1) / 2 && cm[1] == 1000000007ull * J * (J + 1) / 2 &&
	      cm[2] == 0 && cm[3] == (uint64_t)J << 40, "uint64 sums %llu %llu %llu %llu",
	      (unsigned long long)cm[0], (unsigned long long)cm[1], (unsigned long long)cm[2],
	      (unsigned long long)cm[3]);
	CHECK_RC(cdp_dist_max_f64(&mx), 0);
	CHECK(mx == J - 1, "max %g", mx);
	cdp_dist_barrier();
	/* gather: rank r's 1000 floats land at r * 1000 on rank 0 */
	{
		float *all = R == 0 ? malloc((size_t)J * sizeof w) : NULL;
		for (int i = 0; i < 1000; i++)
			w[i] = (float)(R * 1000 + i);
		CHECK_RC(cdp_dist_gather_bytes(w, sizeof w, all), 0);
		bad = 0;
		for (int i = 0; R == 0 && i < J * 1000; i++)
			bad += all[i] != (float)i;
		CHECK(!bad, "gather: %d values out of place", bad);
		CHECK_RC(cdp_dist_gather_bytes(w, 0, NULL), 0);
		if (R == 0)
			CHECK_RC(cdp_dist_gather_bytes(w, sizeof w, NULL), CDP_EINVAL);
		free(all);
	}

	CHECK_RC(cdp_dist_algo_parse("ring", &a), 0);
	CHECK(a == CDP_DIST_RING, "parse ring");
	CHECK_RC(cdp_dist_algo_parse("mpi", &a), 0);
	CHECK(a == CDP_DIST_MPI, "parse mpi");
	CHECK_RC(cdp_dist_algo_parse("nccl", &a), 0);
	CHECK(a == CDP_DIST_NCCL, "parse nccl");
	CHECK_RC(cdp_dist_algo_parse("gloo", &a), CDP_ESYNTAX);
	/* NCCL needs a GPU backend named first (cdp_dist_set_backend) */
	CHECK_RC(cdp_dist_set_algo(CDP_DIST_NCCL), CDP_EINVAL);
	CHECK(cdp_dist_get_algo() != CDP_DIST_NCCL, "nccl set without a GPU");
	CHECK_RC(cdp_dist_set_chunk(0), CDP_EINVAL);
	CHECK_RC(cdp_dist_set_timeout(-1), CDP_EINVAL);
	CHECK_RC(cdp_dist_allreduce(NULL, 5, CDP_DIST_RING, 0), CDP_EINVAL);
	CHECK_RC(cdp_dist_buckets(w, bad_off, 2, 0, 10, 0, 1, 0), CDP_EINVAL);   /* decreasing */
	CHECK_RC(cdp_dist_layer_done(NL), CDP_EINVAL);
	CHECK_RC(cdp_dist_layer_done(-1), CDP_EINVAL);
	CHECK_RC(cdp_dist_bucket_ready(-1), CDP_EINVAL);
	CHECK_RC(cdp_dist_init(NULL, NULL), CDP_EINVAL);                      /* twice */
}

/* Failure modes: none of them may return normally on every rank. The
 * last rank (rank 1 of 2) fails at the 4th reduction of algorithm `algo`
 * while rank 0 is in it. */
static int failure(const char *mode, const char *algo_name)
{
	float *x = calloc(1 << 20, sizeof *x);
	cdp_dist_algo algo = CDP_DIST_RING;

	if (!x || J < 2 || (algo_name && cdp_dist_algo_parse(algo_name, &algo) != 0)) {
		fprintf(stderr, "test_dist: %s needs 2 ranks, 4 MiB and mpi or ring\n", mode);
		return 2;
	}
	for (int it = 0; it < 1000000; it++) {
		if (R == J - 1 && it == 3) {
			if (strcmp(mode, "--kill") == 0)
				raise(SIGKILL);
			if (strcmp(mode, "--stop") == 0)
				raise(SIGSTOP);
			if (strcmp(mode, "--hang") == 0)
				sleep(120);
			if (strcmp(mode, "--abort") == 0)
				cdp_dist_abort(3, "cannot decode record 'scene_3_4' in 'pool.lmdb': bad crc");
		}
		/* 2 floats fewer: rank 1's last chunk is shorter than rank 0's */
		size_t n = R == J - 1 && it == 3 && strcmp(mode, "--mismatch") == 0 ? (1 << 20) - 2 : 1 << 20;
		cdp_dist_allreduce(x, n, algo, 1);
	}
	free(x);
	cdp_dist_finalize();
	return 0;   /* reaching here is the failure dist.sh looks for */
}

/* --hang-bucket: rank 1 sleeps from the 4th step on; rank 0 hands every
 * bucket to the communication thread and waits for the first one alone,
 * as cdp-train's update per bucket does: that wait must be timed too. */
static int bucket_hang(const char *algo_name)
{
	static size_t off[NL + 1];
	cdp_dist_algo algo = CDP_DIST_RING;
	float *g;

	for (int l = 0; l < NL; l++)
		off[l + 1] = off[l] + layer_len[l];
	g = calloc(off[NL], sizeof *g);
	if (!g || J < 2 || (algo_name && cdp_dist_algo_parse(algo_name, &algo) != 0) ||
	    cdp_dist_set_algo(algo) != 0 || cdp_dist_buckets(g, off, NL, 0, 0, 3, 1, 1) < 2 ||
	    !cdp_dist_threaded()) {
		fprintf(stderr, "test_dist: --hang-bucket needs 2 ranks, the communication thread "
		        "and mpi or ring\n");
		return 2;
	}
	for (int step = 0; step < 1000000; step++) {
		if (R == J - 1 && step == 3)
			sleep(120);
		for (int l = NL - 1; l >= 0; l--)
			cdp_dist_layer_done(l);
		cdp_dist_bucket_wait(0);
		cdp_dist_wait_all();
	}
	free(g);
	cdp_dist_finalize();
	return 0;   /* reaching here is the failure dist.sh looks for */
}

/* --pause (one host, 2 ranks): rank 1's own stop is not rank 0's fault. */
static int paused(void)
{
	uint64_t pid = R == 1 ? (uint64_t)getpid() : 0;
	struct timespec half = { 0, 500000000 };

	if (J != 2) {
		fprintf(stderr, "test_dist: --pause needs 2 ranks\n");
		return 2;
	}
	cdp_dist_sum_u64(&pid, 1);
	if (R == 1)
		cdp_dist_set_timeout(2);
	else {
		nanosleep(&half, NULL);         /* rank 1 waits in the barrier */
		kill((pid_t)pid, SIGSTOP);
		sleep(4);
		kill((pid_t)pid, SIGCONT);
		nanosleep(&half, NULL);
	}
	cdp_dist_barrier();
	cdp_dist_finalize();
	if (R == 0)
		printf("rank 1, stopped for 4 s under a 2 s watchdog, went on\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t all_chunks[] = { DEFAULT_CHUNK, 64, 1 };
	int rc;

	main_thread = pthread_self();   /* before MPI's and our threads exist */
	rc = cdp_dist_init(&argc, &argv);

	if (rc != 0) {
		fprintf(stderr, "test_dist: bad CDP_DIST_TIMEOUT: %s\n", cdp_strerror(rc));
		return 2;
	}
	cdp_dist_set_prog("test_dist");
	R = cdp_dist_rank();
	J = cdp_dist_size();
	if (argc > 1 && strcmp(argv[1], "--pause") == 0)
		return paused();
	if (argc > 1 && strcmp(argv[1], "--hang-bucket") == 0)
		return bucket_hang(argc > 2 ? argv[2] : NULL);
	if (argc > 1)
		return failure(argv[1], argc > 2 ? argv[2] : NULL);
	test_ranks();
	size_t sizes[] = { 0, 1, (size_t)J - 1, (size_t)J, (size_t)J + 1, 1000, 3 * DEFAULT_CHUNK + 5,
	                   (1u << 20) + 7 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		test_sum(sizes[i], all_chunks, sizes[i] <= 1000 ? 3 : 1);
	/* a pipeline many chunks deep, with uneven segments */
	test_sum(100003, (const size_t[]){ DEFAULT_CHUNK, 64 }, 2);
	test_buckets();
	test_stalled_waker();
	test_misc();
	/* rank 0 speaks for all; every rank fails if any check failed anywhere */
	uint64_t counts[2] = { (uint64_t)tap_checks, (uint64_t)tap_failed };
	cdp_dist_sum_u64(counts, 2);
	cdp_dist_finalize();
	if (R == 0)
		printf("%d ranks: ", J);
	tap_checks = (int)counts[0];
	tap_failed = (int)counts[1];
	return R == 0 ? tap_done() : tap_failed ? 1 : 0;
}
