/* allreduce_bench.c: bus bandwidth of the mpi and ring all-reduce, and the
 * communication time the bucketed overlap leaves exposed.
 *
 * Bandwidth mode (default), run under mpirun: for each size from --min-size
 * to --max-size (doubling) it reduces a float buffer in place (sum, no
 * averaging) with both algorithms, repeating each until --time seconds have
 * passed (at least 3 times, after one warm-up), takes the best of --repeat
 * such blocks, and prints per size the time of one reduction (the slowest
 * rank's mean) and the bus bandwidth as
 * nccl-tests define it: busbw = 2(j-1)/j * bytes / time, the rate at which
 * each rank's link carries data in a bandwidth-optimal all-reduce.
 *
 * Overlap mode (--overlap): a simulated backward of --layers layers with
 * --max-size bytes of gradients in all, each layer spinning --compute
 * milliseconds, reduced in --buckets buckets, serial (after backward) and
 * overlapped (each bucket as soon as its layers are done, with
 * cdp_dist_progress between layers). Prints per mode the step time and the
 * exposed communication time (time on the main thread in dist calls).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cdp_error.h"
#include "cdp_num.h"
#include "dist/dist.h"

static const char *prog = "allreduce_bench";

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--min-size SIZE] [--max-size SIZE] [--repeat N] [--time SECONDS]\n"
	        "       %s --overlap [--max-size SIZE] [--layers N] [--buckets N] [--compute MS]\n"
	        "          [--steps N]\n", prog, prog);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per reduction of n floats: the best of `reps` blocks of the
 * slowest rank's mean (other processes on a shared machine only ever add
 * time). The count comes from the slowest warm-up, so every rank runs the
 * same number. */
static double time_reduce(float *x, size_t n, cdp_dist_algo algo, double min_s, int reps)
{
	double t0, t, best = 0;
	int iters;

	cdp_dist_barrier();
	t0 = now();
	cdp_dist_allreduce(x, n, algo, 0);   /* warm-up: pages, scratch, connections */
	t = now() - t0;
	cdp_dist_max_f64(&t);
	iters = t > 0 && min_s / t < 10000 ? (int)(min_s / t) + 1 : 10000;
	if (iters < 3)
		iters = 3;
	for (int r = 0; r < reps; r++) {
		cdp_dist_barrier();
		t0 = now();
		for (int it = 0; it < iters; it++)
			cdp_dist_allreduce(x, n, algo, 0);
		t = (now() - t0) / iters;
		cdp_dist_max_f64(&t);
		if (r == 0 || t < best)
			best = t;
	}
	return best;
}

/* Stands in for a layer's backward: keeps the core busy for ms. */
static void spin(double ms)
{
	double end = now() + ms * 1e-3;

	while (now() < end)
		continue;
}

static int overlap_mode(float *x, size_t n, int layers, int buckets, double compute_ms, int steps)
{
	size_t *off = malloc(((size_t)layers + 1) * sizeof *off);
	int j = cdp_dist_size();

	if (!off) {
		fprintf(stderr, "%s: cannot allocate %d layer offsets: %s\n", prog, layers,
		        cdp_strerror(CDP_ENOMEM));
		return 1;
	}
	for (int l = 0; l <= layers; l++)
		off[l] = n * (size_t)l / (size_t)layers;
	if (cdp_dist_rank() == 0) {
		printf("overlap: %d ranks, %.1f MiB of gradients in %d layers, %d buckets, "
		       "%.1f ms compute per layer, %d steps\n",
		       j, n * 4.0 / (1 << 20), layers, buckets, compute_ms, steps);
		printf("%-5s %-8s %10s %10s %12s\n", "algo", "mode", "step ms", "compute ms", "exposed ms");
	}
	for (int a = 0; a < 2; a++) {
		cdp_dist_algo algo = a ? CDP_DIST_RING : CDP_DIST_MPI;
		for (int ov = 0; ov < 2; ov++) {
			cdp_dist_stats s;
			double t0, step, exposed;
			cdp_dist_set_algo(algo);
			if (cdp_dist_buckets(x, off, layers, 0, 0, buckets, ov, 1) < 1) {
				fprintf(stderr, "%s: cannot register buckets\n", prog);
				free(off);
				return 1;
			}
			cdp_dist_barrier();
			cdp_dist_stats_reset();
			t0 = now();
			for (int st = 0; st < steps; st++) {
				for (int l = layers - 1; l >= 0; l--) {
					spin(compute_ms);
					cdp_dist_layer_done(l);
				}
				cdp_dist_wait_all();
			}
			step = (now() - t0) / steps;
			cdp_dist_stats_get(&s);
			exposed = (s.wait_s + s.progress_s) / steps;
			cdp_dist_max_f64(&step);
			cdp_dist_max_f64(&exposed);
			if (cdp_dist_rank() == 0)
				printf("%-5s %-8s %10.1f %10.1f %12.1f\n", cdp_dist_algo_name(algo),
				       ov ? "overlap" : "serial", step * 1e3, compute_ms * layers, exposed * 1e3);
		}
	}
	free(off);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "buckets", required_argument, NULL, 'b' },
		{ "compute", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "layers", required_argument, NULL, 'l' },
		{ "max-size", required_argument, NULL, 'M' },
		{ "min-size", required_argument, NULL, 'm' },
		{ "overlap", no_argument, NULL, 'o' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "steps", required_argument, NULL, 's' },
		{ "time", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 }
	};
	uint64_t lo = 1 << 20, hi = 256 << 20;
	double min_s = 0.3, compute_ms = 5;
	int c, rc = 0, overlap = 0, reps = 3, layers = 32, buckets = 8, steps = 5, j;
	float *x = NULL;
	const char *bad = NULL;

	if ((rc = cdp_dist_init(&argc, &argv)) != 0) {
		fprintf(stderr, "%s: bad CDP_DIST_TIMEOUT: %s\n", prog, cdp_strerror(rc));
		return 2;
	}
	cdp_dist_set_prog(prog);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': if (cdp_parse_int(optarg, 1, 100000, &buckets)) bad = "--buckets"; break;
		case 'c': if (cdp_parse_double(optarg, 0, 1e4, &compute_ms)) bad = "--compute"; break;
		case 'h': usage(stdout); cdp_dist_finalize(); return 0;
		case 'l': if (cdp_parse_int(optarg, 1, 100000, &layers)) bad = "--layers"; break;
		case 'M': if (cdp_parse_size(optarg, 4, (uint64_t)1 << 36, &hi)) bad = "--max-size"; break;
		case 'm': if (cdp_parse_size(optarg, 4, (uint64_t)1 << 36, &lo)) bad = "--min-size"; break;
		case 'o': overlap = 1; break;
		case 'r': if (cdp_parse_int(optarg, 1, 1000, &reps)) bad = "--repeat"; break;
		case 's': if (cdp_parse_int(optarg, 1, 100000, &steps)) bad = "--steps"; break;
		case 't': if (cdp_parse_double(optarg, 0, 3600, &min_s)) bad = "--time"; break;
		default: bad = "";
		}
		if (bad)
			break;
	}
	if (bad || optind != argc || lo > hi) {
		if (bad && *bad)
			fprintf(stderr, "%s: invalid %s '%s'\n", prog, bad, optarg);
		if (cdp_dist_rank() == 0)
			usage(stderr);
		rc = 2;
		goto out;
	}
	if (!(x = malloc(hi))) {
		fprintf(stderr, "%s: cannot allocate %llu bytes: %s\n", prog, (unsigned long long)hi,
		        cdp_strerror(CDP_ENOMEM));
		rc = 1;
		goto out;
	}
	memset(x, 0, hi);   /* zeros: the sums stay finite and normal */
	j = cdp_dist_size();
	if (overlap) {
		rc = overlap_mode(x, hi / 4, layers, buckets, compute_ms, steps);
		goto out;
	}
	if (cdp_dist_rank() == 0) {
		printf("all-reduce, %d ranks, float sum in place; busbw = 2(j-1)/j * bytes / time\n", j);
		printf("%10s %10s %12s %10s %12s %10s\n", "bytes", "mpi ms", "mpi GB/s", "ring ms",
		       "ring GB/s", "ring/mpi");
	}
	for (uint64_t b = lo; b <= hi; b *= 2) {
		size_t n = b / 4;
		double tm = time_reduce(x, n, CDP_DIST_MPI, min_s, reps);
		double tr = time_reduce(x, n, CDP_DIST_RING, min_s, reps);
		double f = j > 1 ? 2.0 * (j - 1) / j * (double)n * 4 : 0;
		if (cdp_dist_rank() == 0)
			printf("%10llu %10.3f %12.2f %10.3f %12.2f %10.2f\n", (unsigned long long)n * 4,
			       tm * 1e3, f / tm / 1e9, tr * 1e3, f / tr / 1e9, tm / tr);
	}
out:
	free(x);
	cdp_dist_finalize();
	return rc;
}
