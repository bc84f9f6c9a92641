/* test_comp.c: compressed gradient buckets (dist.h, "Compression"), run by
 * tests/dist/comp.sh under mpirun -np 2 as
 *
 *     test_comp ALGO COMP DIR      (ALGO mpi|ring, COMP fp16|bf16)
 *
 * Every rank fills a known vector of N floats (values over fp16's and
 * bf16's range: ties of both formats, fp16 subnormals, elements whose sum
 * or whose half alone overflows fp16), registers it as the gradient block
 * of 4 layers in buckets of one layer each (the empty one joins the next),
 * and reduces it with overlap, as cdp-train does, the ring in chunks of 7
 * values so that its pipeline moves many chunks. It writes DIR/in.R (its input, float32 LE),
 * DIR/out.R (the reduced block) and, on rank 0, DIR/buckets (one
 * "offset count" line a bucket: the ring cuts each into segments), and
 * prints the bytes the ring sent; comp_ref.py holds the result against its
 * NumPy reference. Checked here: the setting is refused in flight and for
 * unknown values, and parsing refuses names it does not know.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cdp_error.h"
#include "cdp_rng.h"
#include "dist/dist.h"
#include "tap.h"

#define N 1537
static const size_t layer_off[] = { 0, 301, 301, 1000, N };

/* rank r's value i: random mantissa and sign, exponent in [-30, 17]; the
 * first elements chosen to hit the formats' edges */
static void fill(float *x, int r)
{
	static const float edge[][2] = {
		{ 1.2e5f, 1.2e5f },               /* fp16: halves fit, their sum is inf */
		{ 3e5f, 1.0f },                   /* fp16: the half alone overflows */
		{ -1.2e5f, -1.0e5f },             /* ... negative */
		{ 2.0f + 0x1p-7f, 0.0f },         /* halved: 1 + 2^-8, a bf16 tie */
		{ 2.0f + 0x1p-10f, 0.0f },        /* 1 + 2^-11, an fp16 tie */
		{ 6e-6f, 1e-7f },                 /* fp16 subnormals */
		{ 3e-8f, 3e-8f },                 /* below fp16's range */
		{ 65504.0f, 65504.0f },           /* fp16's largest, halved */
		{ 1e-30f, -1e-30f },
		{ 0.0f, -0.0f },
	};
	size_t ne = sizeof edge / sizeof edge[0];
	cdp_rng g;

	cdp_rng_seed(&g, cdp_rng_derive(29, 1, (uint64_t)r));
	for (size_t i = 0; i < N; i++) {
		double m = 1.0 + cdp_rng_double(&g);
		int e = (int)cdp_rng_below(&g, 48) - 30;
		x[i] = (float)ldexp(cdp_rng_below(&g, 2) ? -m : m, e);
	}
	for (size_t i = 0; i < ne; i++)
		x[i] = edge[i][r];
}

static int save(const char *dir, const char *name, int r, const float *x, size_t n)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "%s/%s.%d", dir, name, r);
	if (!(f = fopen(path, "wb")))
		return -1;
	ok = fwrite(x, sizeof *x, n, f) == n;
	return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	static float x[N];
	cdp_dist_algo algo;
	cdp_dist_comp comp;
	cdp_dist_stats s;
	char path[4096];
	size_t off, n;
	int r, nb, rc;
	FILE *f;

	if ((rc = cdp_dist_init(&argc, &argv)) != 0) {
		fprintf(stderr, "test_comp: %s\n", cdp_strerror(rc));
		return 2;
	}
	cdp_dist_set_prog("test_comp");
	r = cdp_dist_rank();
	if (argc != 4 || cdp_dist_algo_parse(argv[1], &algo) != 0 ||
	    cdp_dist_comp_parse(argv[2], &comp) != 0 || cdp_dist_size() != 2) {
		fprintf(stderr, "usage: mpirun -np 2 test_comp mpi|ring fp16|bf16 DIR\n");
		cdp_dist_finalize();
		return 2;
	}
	CHECK_RC(cdp_dist_comp_parse("fp8", &comp), CDP_ESYNTAX);
	CHECK_RC(cdp_dist_comp_parse("BF16", &comp), CDP_ESYNTAX);
	CHECK_RC(cdp_dist_comp_parse(NULL, &comp), CDP_ESYNTAX);
	CHECK_RC(cdp_dist_set_compress((cdp_dist_comp)3), CDP_EINVAL);
	CHECK(strcmp(cdp_dist_comp_name(CDP_DIST_COMP_BF16), "bf16") == 0, "name");
	cdp_dist_comp_parse(argv[2], &comp);
	CHECK_RC(cdp_dist_set_algo(algo), 0);
	CHECK_RC(cdp_dist_set_chunk(7), 0);
	CHECK_RC(cdp_dist_set_compress(comp), 0);
	fill(x, r);
	CHECK_RC(save(argv[3], "in", r, x, N), 0);
	nb = cdp_dist_buckets(x, layer_off, 4, 0, 1, 0, 1, 1);
	CHECK(nb == 3, "%d buckets, want 3 (the empty layer joins one)", nb);
	cdp_dist_stats_reset();
	for (int l = 3; l >= 0; l--) {
		cdp_dist_layer_done(l);
		if (l == 2)     /* a bucket is in flight: the setting stays */
			CHECK_RC(cdp_dist_set_compress(CDP_DIST_COMP_NONE), CDP_EINVAL);
	}
	cdp_dist_wait_all();
	cdp_dist_stats_get(&s);
	CHECK_RC(save(argv[3], "out", r, x, N), 0);
	if (r == 0) {
		snprintf(path, sizeof path, "%s/buckets", argv[3]);
		CHECK((f = fopen(path, "w")) != NULL, "cannot write '%s'", path);
		for (int b = 0; f && cdp_dist_bucket_info(b, &off, &n, NULL, NULL) == 0; b++)
			fprintf(f, "%zu %zu\n", off, n);
		CHECK(f && fclose(f) == 0, "cannot write '%s'", path);
	}
	printf("rank %d: ring_bytes %llu\n", r, (unsigned long long)s.ring_bytes);
	cdp_dist_finalize();
	return tap_done();
}
