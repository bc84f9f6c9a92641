/* loader_bench.c: the benchmark driver behind bench/loader.sh.
 *
 *   loader_bench speed [options] POOL KEYS
 *       Warm-cache throughput of the loader alone (nothing consumes the
 *       batches) against two memcpy baselines over the same batches:
 *         stored  memcpy of each record's image payload (the stored bytes)
 *                 from the map into a batch buffer;
 *         float   memcpy of a float batch (b, C, H, W) of the loader's size.
 *       After a warm-up round, -R rounds (5) each time the loader, then
 *       both memcpys, so other load on the host hits them alike. Prints
 *       the ratio loader/stored of each round, then medians over rounds:
 *       batches/s of each and the ratios loader/stored, loader/float.
 *   loader_bench kernel [options] POOL KEYS
 *       The uint8 kernel alone over the same payloads (loader_kernel.c):
 *       write-only, convert, CRC+convert, each against memcpy, by CPU time.
 *   loader_bench read [options] POOL KEYS
 *       Random reads of --count values in epoch-0 order, each byte of each
 *       value read, with readahead on (MADV_NORMAL) or off (MDB_NORDAHEAD,
 *       i.e. MADV_RANDOM), optionally with MADV_WILLNEED issued one batch
 *       ahead as the loader does. Prints MB/s and values/s.
 *   loader_bench load [options] POOL KEYS
 *       The loader over --count samples from a fresh open (for cold runs),
 *       printing the open time, the run time and the data wait.
 *   loader_bench drop FILE
 *       posix_fadvise(POSIX_FADV_DONTNEED) of FILE, for hosts where writing
 *       /proc/sys/vm/drop_caches is not permitted.
 * Options: -b batch (32), -t threads (1), -n steps or --count values, -R rounds,
 * --mode pool|copy, --readahead auto|on|off, --no-willneed, -s seed,
 * --verify-once (the loader option), --compute-ms (load: sleep per batch, standing in for a training step).
 * Exit 0 ok, 1 failure, 2 usage.
 */
#include "loader.h"
#include "cdp_crc32.h"
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_ptrfile.h"
#include "cdp_rng.h"
#include "loader_kernel.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 99

typedef struct args {
	int batch, threads, mode, readahead, no_willneed, compute_ms, verify_once, rounds;
	uint64_t steps, count, seed;
} args;

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static void usage(FILE *f)
{
	fprintf(f, "usage: loader_bench speed|kernel|read|load [-b batch] [-n steps] [-R rounds] [-s seed] [-t threads]\n"
	           "                    [--compute-ms ms] [--count n] [--mode pool|copy] [--no-willneed]\n"
	           "                    [--readahead auto|on|off] [--verify-once] POOL KEYS\n"
	           "       loader_bench drop FILE\n");
}

static int open_loader(const args *a, cdp_pool *pool, const char *path, const char *keys,
                       cdp_loader **l)
{
	cdp_loader_opts o;
	char err[512];
	int rc;

	cdp_loader_opts_init(&o);
	o.pool_path = path;
	o.pool = pool;
	o.keys_path = keys;
	o.batch = a->batch;
	o.threads = a->threads;
	o.mode = a->mode;
	o.readahead = a->readahead;
	o.no_willneed = a->no_willneed;
	o.verify_once = a->verify_once;
	o.seed = a->seed;
	o.pad_last = 1;
	if ((rc = cdp_loader_open(&o, l, err, sizeof err)) != 0)
		fprintf(stderr, "loader_bench: %s\n", err);
	return rc;
}

/* n batches from the start of epoch `epoch`, wrapping into later epochs;
 * each batch "computed" for compute_ms (a sleep, as a GPU step would be). */
static int run_loader(cdp_loader *l, uint64_t epoch, uint64_t n, double *wait, int compute_ms)
{
	cdp_batch b;
	int rc = cdp_loader_start_epoch(l, epoch, 0);

	for (uint64_t i = 0; i < n && rc == 0; i++) {
		rc = cdp_loader_next(l, &b);
		if (rc == CDP_EEOF && (rc = cdp_loader_start_epoch(l, ++epoch, 0)) == 0)
			rc = cdp_loader_next(l, &b);
		if (rc == 0 && wait)
			*wait += b.wait_s;
		if (rc == 0 && compute_ms)
			nanosleep(&(struct timespec){ compute_ms / 1000, compute_ms % 1000 * 1000000L }, NULL);
	}
	if (rc)
		fprintf(stderr, "loader_bench: %s (%s)\n", cdp_loader_error(l), cdp_strerror(rc));
	return rc;
}

/* Pointers to the image payloads of keys[order[i]], i < n (uncompressed). */
static int payloads(cdp_pool *p, MDB_txn *txn, const cdp_keylist *kl, const size_t *order,
                    size_t n, const uint8_t **img, size_t *isz)
{
	for (size_t i = 0; i < n; i++) {
		MDB_val k = { kl->lens[order[i]], kl->keys[order[i]] }, v;
		cdp_record r;
		int rc;
		if ((rc = mdb_get(txn, p->tiles, &k, &v)) != 0 ||
		    (rc = cdp_record_peek(v.mv_data, v.mv_size, &r)) != 0)
			return rc;
		if (r.compression != CDP_COMP_NONE)
			return CDP_EUNSUP;
		img[i] = (const uint8_t *)v.mv_data + CDP_RECORD_HDR;
		cdp_record_sizes(&r, isz, &(size_t){0}, &(size_t){0});
	}
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* memcpy of the stored image payloads img[s*b .. (s+1)*b) into dst, and of
 * a float batch, over `steps` batches; times in t_stored, t_float. */
static void time_memcpy(const uint8_t **img, size_t isz, size_t b, uint64_t steps, uint8_t *dst,
                        const float *fsrc, float *fdst, size_t fbytes, double *t_stored,
                        double *c_stored, double *t_float)
{
	double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);

	for (size_t s = 0; s < steps; s++)
		for (size_t i = 0; i < b; i++)
			memcpy(dst + i * isz, img[s * b + i], isz);
	__asm__ volatile("" : : "r"(dst) : "memory");
	*t_stored = now_s() - t0;
	*c_stored = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	t0 = now_s();
	for (size_t s = 0; s < steps; s++) {
		memcpy(fdst, fsrc, fbytes);
		__asm__ volatile("" : : "r"(fdst) : "memory");
	}
	*t_float = now_s() - t0;
}

/* Rounds of (loader, memcpy stored, memcpy float) after one warm-up round,
 * interleaved so that load from other processes hits all three alike; the
 * ratios are per round, the reported figures medians over rounds. The
 * ratio of CPU times (the process's while the loader runs, its threads
 * being the only busy ones; the calling thread's for memcpy) leaves out
 * time the threads spent descheduled on a busy host. */
static int cmd_speed(const args *a, const char *path, const char *keys, int kernel)
{
	cdp_pool pool;
	cdp_loader *l = NULL;
	cdp_loader_info in;
	cdp_keylist kl = {0};
	MDB_txn *txn = NULL;
	const uint8_t **img = NULL;
	uint8_t *dst = NULL;
	float *fsrc = NULL, *fdst = NULL;
	size_t line, isz = 0, b = (size_t)a->batch, n, fbytes, *ord = NULL;
	double t0, t_load[MAX_ROUNDS], t_stored[MAX_ROUNDS], t_float[MAX_ROUNDS], wait[MAX_ROUNDS];
	double r_stored[MAX_ROUNDS], r_float[MAX_ROUNDS], c_load, c_stored, r_cpu[MAX_ROUNDS];
	int rc, R = a->rounds;

	if ((rc = cdp_pool_open(path, CDP_POOL_RDONLY, 0, &pool)) != 0) {
		fprintf(stderr, "loader_bench: cannot open '%s': %s\n", path, cdp_strerror(rc));
		return 1;
	}
	if ((rc = open_loader(a, &pool, path, keys, &l)) != 0)
		goto out;
	cdp_loader_get_info(l, &in);

	/* the same number of batches of stored bytes: epoch 0 order, wrapping */
	if ((rc = cdp_ptrfile_read(keys, &kl, &line)) != 0 ||
	    (rc = mdb_txn_begin(pool.env, NULL, MDB_RDONLY, &txn)) != 0)
		goto out;
	n = (size_t)a->steps * b;
	ord = malloc(n * sizeof *ord);
	img = malloc(n * sizeof *img);
	cdp_loader_start_epoch(l, 0, 0);
	for (size_t i = 0; ord && i < n; i++)
		ord[i] = cdp_loader_order(l)[i % in.count];
	if ((rc = ord && img ? payloads(&pool, txn, &kl, ord, n, img, &isz) : CDP_ENOMEM) != 0)
		goto out;
	fbytes = b * (size_t)in.c * in.h * in.w * sizeof(float);
	if (!(dst = malloc(b * isz)) || !(fsrc = malloc(fbytes)) || !(fdst = malloc(fbytes))) {
		rc = CDP_ENOMEM;
		goto out;
	}
	memset(fsrc, 1, fbytes);
	if (kernel) {
		rc = loader_kernel_bench(img, isz, b, a->steps, R) ? CDP_ENOMEM : 0;
		goto out;
	}
	for (int r = -1; r < R; r++) {
		int k = r < 0 ? 0 : r;
		wait[k] = 0;
		t0 = now_s();
		c_load = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		if ((rc = run_loader(l, r < 0 ? 0 : 100 + (uint64_t)r, a->steps, &wait[k], 0)) != 0)
			goto out;
		t_load[k] = now_s() - t0;
		c_load = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c_load;
		time_memcpy(img, isz, b, a->steps, dst, fsrc, fdst, fbytes, &t_stored[k], &c_stored,
		            &t_float[k]);
		r_stored[k] = t_stored[k] / t_load[k];
		r_float[k] = t_float[k] / t_load[k];
		r_cpu[k] = c_stored / c_load * a->threads;
	}
	printf("tiles %dx%dx%d, %zu stored bytes each, batch %zu, %d threads, %llu steps x %d rounds, "
	       "mode %s, CRC %s (%s), conversion %s\n", in.c, in.h, in.w, isz, b, a->threads,
	       (unsigned long long)a->steps, R, a->mode == CDP_LOAD_COPY ? "copy" : "pool",
	       a->verify_once ? "on first read" : "every read", cdp_crc32_name(CDP_CRC32_AUTO),
	       in.conv_isa);
	printf("ratio loader/memcpy(stored bytes) per round:");
	for (int r = 0; r < R; r++)
		printf(" %.2f", r_stored[r]);
	printf("\n");
	double tl = median(t_load, R), ts = median(t_stored, R), tf = median(t_float, R);
	printf("loader        %9.1f batches/s  %8.1f MB/s stored  %8.1f MB/s float  wait %.3f s\n",
	       a->steps / tl, a->steps * b * isz / tl / 1e6, a->steps * fbytes / tl / 1e6,
	       median(wait, R));
	printf("memcpy stored %9.1f batches/s  %8.1f MB/s\n", a->steps / ts, a->steps * b * isz / ts / 1e6);
	printf("memcpy float  %9.1f batches/s  %8.1f MB/s\n", a->steps / tf, a->steps * fbytes / tf / 1e6);
	printf("ratio loader/memcpy(stored bytes) %.2f (median of %d)\n", median(r_stored, R), R);
	printf("ratio loader/memcpy(float bytes)  %.2f (median of %d)\n", median(r_float, R), R);
	printf("ratio loader/memcpy(stored bytes) by CPU time x threads %.2f (median of %d)\n",
	       median(r_cpu, R), R);
out:
	if (rc)
		fprintf(stderr, "loader_bench: speed: %s\n", cdp_strerror(rc));
	if (txn)
		mdb_txn_abort(txn);
	cdp_loader_close(l);
	cdp_keylist_free(&kl);
	free(ord);
	free(img);
	free(dst);
	free(fsrc);
	free(fdst);
	cdp_pool_close(&pool);
	return rc ? 1 : 0;
}

/* Random reads of whole values, as a loader without decoding would do. */
static int cmd_read(const args *a, const char *path, const char *keys)
{
	cdp_pool pool;
	cdp_keylist kl = {0};
	MDB_txn *txn = NULL;
	MDB_val *v = NULL;
	size_t line, n, *ord = NULL, bytes = 0, pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t sum = 0;
	cdp_rng rng;
	double t0, t;
	int rc;

	rc = cdp_pool_open(path, CDP_POOL_RDONLY | (a->readahead == CDP_RA_OFF ? CDP_POOL_NORDAHEAD : 0),
	                   0, &pool);
	if (rc) {
		fprintf(stderr, "loader_bench: cannot open '%s': %s\n", path, cdp_strerror(rc));
		return 1;
	}
	if ((rc = cdp_ptrfile_read(keys, &kl, &line)) != 0 ||
	    (rc = mdb_txn_begin(pool.env, NULL, MDB_RDONLY, &txn)) != 0)
		goto out;
	n = a->count && a->count < kl.count ? (size_t)a->count : kl.count;
	if (!(ord = malloc(kl.count * sizeof *ord)) || !(v = malloc(n * sizeof *v))) {
		rc = CDP_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < kl.count; i++)
		ord[i] = i;
	cdp_rng_seed(&rng, cdp_rng_derive(a->seed, 0, 0));
	cdp_rng_shuffle_size(&rng, ord, kl.count);
	/* lookups first (B-tree pages only), then the timed reads */
	for (size_t i = 0; i < n; i++) {
		MDB_val k = { kl.lens[ord[i]], kl.keys[ord[i]] };
		if ((rc = mdb_get(txn, pool.tiles, &k, &v[i])) != 0)
			goto out;
	}
	t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		/* like the loader: the first batch and then always the next one */
		if (!a->no_willneed && i % (size_t)a->batch == 0)
			for (size_t j = i ? i + a->batch : 0; j < i + 2 * (size_t)a->batch && j < n; j++) {
				uintptr_t lo = (uintptr_t)v[j].mv_data & ~(uintptr_t)(pg - 1);
				madvise((void *)lo, (uintptr_t)v[j].mv_data + v[j].mv_size - lo, MADV_WILLNEED);
			}
		const uint8_t *p = v[i].mv_data;
		for (size_t k = 0; k < v[i].mv_size; k += 64)
			sum += p[k];
		bytes += v[i].mv_size;
	}
	t = now_s() - t0;
	printf("read %zu values of %zu bytes, readahead %s, willneed %s: %.3f s, %.1f MB/s, %.0f values/s (%llu)\n",
	       n, n ? bytes / n : 0, a->readahead == CDP_RA_OFF ? "off" : "on",
	       a->no_willneed ? "no" : "yes", t, bytes / t / 1e6, n / t, (unsigned long long)(sum & 1));
out:
	if (rc)
		fprintf(stderr, "loader_bench: read: %s\n", cdp_strerror(rc));
	if (txn)
		mdb_txn_abort(txn);
	cdp_keylist_free(&kl);
	free(ord);
	free(v);
	cdp_pool_close(&pool);
	return rc ? 1 : 0;
}

/* A fresh loader over --count samples (cold page cache when dropped). */
static int cmd_load(const args *a, const char *path, const char *keys)
{
	cdp_loader *l = NULL;
	cdp_loader_info in;
	uint64_t steps = (a->count + a->batch - 1) / a->batch;
	double t0 = now_s(), t_open, t, wait = 0;
	int rc;

	if ((rc = open_loader(a, NULL, path, keys, &l)) != 0)
		return 1;
	t_open = now_s() - t0;
	cdp_loader_get_info(l, &in);
	t0 = now_s();
	rc = run_loader(l, 0, steps, &wait, a->compute_ms);
	t = now_s() - t0;
	if (rc == 0)
		printf("load %llu x %d of %zu B, %s, readahead %s, willneed %s, compute %d ms: "
		       "open %.3f s, run %.3f s, %.1f MB/s, waited %.3f s\n",
		       (unsigned long long)steps, a->batch, in.value_size,
		       a->mode == CDP_LOAD_COPY ? "copy" : "pool", in.readahead == CDP_RA_ON ? "on" : "off",
		       a->no_willneed ? "no" : "yes", a->compute_ms, t_open, t,
		       steps * a->batch * (double)in.value_size / t / 1e6, wait);
	cdp_loader_close(l);
	return rc ? 1 : 0;
}

static int cmd_drop(const char *file)
{
	int fd = open(file, O_RDONLY), rc;

	if (fd < 0) {
		perror(file);
		return 1;
	}
	rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	if (rc)
		fprintf(stderr, "loader_bench: cannot drop '%s' from the page cache: %s\n", file, strerror(rc));
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "compute-ms", required_argument, NULL, 'C' },
		{ "count", required_argument, NULL, 'c' },
		{ "mode", required_argument, NULL, 'm' },
		{ "no-willneed", no_argument, NULL, 'W' },
		{ "readahead", required_argument, NULL, 'r' },
		{ "verify-once", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	args a = { .batch = 32, .threads = 1, .steps = 40, .count = 1024, .seed = 1, .rounds = 5 };
	const char *cmd;
	int c, bad = 0;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "b:n:R:s:t:", lo, NULL)) != -1) {
		switch (c) {
		case 'b': bad |= cdp_parse_int(optarg, 1, 1 << 20, &a.batch); break;
		case 'C': bad |= cdp_parse_int(optarg, 0, 10000, &a.compute_ms); break;
		case 'c': bad |= cdp_parse_u64(optarg, 1, UINT64_MAX, &a.count); break;
		case 'm':
			a.mode = strcmp(optarg, "copy") == 0 ? CDP_LOAD_COPY : CDP_LOAD_POOL;
			bad |= strcmp(optarg, "copy") && strcmp(optarg, "pool");
			break;
		case 'n': bad |= cdp_parse_u64(optarg, 1, 1u << 30, &a.steps); break;
		case 'R': bad |= cdp_parse_int(optarg, 1, MAX_ROUNDS, &a.rounds); break;
		case 'r':
			a.readahead = strcmp(optarg, "on") == 0 ? CDP_RA_ON :
			              strcmp(optarg, "off") == 0 ? CDP_RA_OFF : CDP_RA_AUTO;
			bad |= strcmp(optarg, "on") && strcmp(optarg, "off") && strcmp(optarg, "auto");
			break;
		case 's': bad |= cdp_parse_u64(optarg, 0, UINT64_MAX, &a.seed); break;
		case 't': bad |= cdp_parse_int(optarg, 1, 256, &a.threads); break;
		case 'V': a.verify_once = 1; break;
		case 'W': a.no_willneed = 1; break;
		default: bad = 1;
		}
	}
	if (strcmp(cmd, "drop") == 0 && !bad && optind + 1 == argc)
		return cmd_drop(argv[optind]);
	if (bad || optind + 2 != argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "speed") == 0)
		return cmd_speed(&a, argv[optind], argv[optind + 1], 0);
	if (strcmp(cmd, "kernel") == 0)
		return cmd_speed(&a, argv[optind], argv[optind + 1], 1);
	if (strcmp(cmd, "read") == 0)
		return cmd_read(&a, argv[optind], argv[optind + 1]);
	if (strcmp(cmd, "load") == 0)
		return cmd_load(&a, argv[optind], argv[optind + 1]);
	usage(stderr);
	return 2;
}
