/* test_loader.c: the training data loader (loader.c) against pools built by
 * the real tools (mkraster.py | cdp-tile | cdp-lmdbpack, cdp-keyshuffle).
 *
 * Ranks are simulated in-process: j loaders with rank ids 0..j-1 sharing one
 * open pool (LMDB allows one environment per process). Checked: each
 * training epoch serves every kept sample exactly once across ranks in the
 * documented order (Fisher-Yates from cdp_rng_derive(seed, epoch, 0)), the
 * global sequence is the same for j = 1, 2, 4 at one global batch, tail drop
 * and pad_last, per-epoch orders; pixel values against (x - mean) / std from
 * statistics recomputed here from the records, invalid pixels 0 with the
 * ignore label; u16 zlib and class-label pools; bad pointer files and bad
 * options before any batch; a corrupt record named, and skipped by the rule;
 * copy mode, resume, restart, thread counts and augmentation give the same
 * batches; validation covers every key once.
 *
 * Needs $PYTHON (osgeo, numpy) and cdp-tile, cdp-lmdbpack, cdp-keyshuffle on
 * PATH (make check puts them there); skips (77) without them.
 */
#define _GNU_SOURCE
#include "loader.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_key.h"
#include "cdp_ptrfile.h"
#include "cdp_rng.h"
#include "tap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static char path_pool[300], path_keys[300];
static cdp_pool pool;           /* shared by all simulated ranks */

static int build_fixtures(void)
{
	const char *py = fixture_python(), *src = fixture_srcdir();
	char mk[400];
	FILE *f;

	if (sh("command -v cdp-tile cdp-lmdbpack cdp-keyshuffle >/dev/null") ||
	    sh("%s -c 'import numpy; from osgeo import gdal' 2>/dev/null", py))
		return 77;
	snprintf(mk, sizeof mk, "%s %s/tests/tools/mkraster.py", py, src);
	/* 96x80 u8, 3 bands, 5% nodata: 30 tiles of 16, most with a mask */
	if (sh("%s %s --width 96 --height 80 --bands 3 --dtype u8 --nodata 0 --nodata-frac 0.05 "
	       "--seed 7 --label %s --classes 4", mk, pth("a.tif"), pth("a_lab.tif")) ||
	    sh("cdp-tile -q --size 16 --label %s %s | cdp-lmdbpack -q %s", pth("a_lab.tif"),
	       pth("a.tif"), path_pool) ||
	    sh("cdp-keyshuffle -q --seed 3 -o %s %s", path_keys, path_pool))
		return 1;
	/* another pool, for a pointer file made for the wrong one */
	if (sh("%s %s --width 32 --height 32 --bands 3 --dtype u8 --seed 8", mk, pth("b.tif")) ||
	    sh("cdp-tile -q --size 16 %s | cdp-lmdbpack -q %s", pth("b.tif"), pth("poolb")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("b.keys"), pth("poolb")))
		return 1;
	/* u16, 2 bands, zlib, padded edges: the generic conversion path */
	if (sh("%s %s --width 50 --height 40 --bands 2 --dtype u16 --nodata 0 --nodata-frac 0.1 "
	       "--seed 9", mk, pth("w.tif")) ||
	    sh("cdp-tile -q --size 16 --edge pad --zlib 6 %s | cdp-lmdbpack -q %s", pth("w.tif"),
	       pth("poolw")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("w.keys"), pth("poolw")))
		return 1;
	/* five 8x8 chips with class ids */
	if (!(f = fopen(pth("chips.txt"), "w")))
		return 1;
	for (int i = 0; i < 5; i++) {
		char name[32];
		snprintf(name, sizeof name, "c_%d_0.tif", i);
		if (sh("%s %s --width 8 --height 8 --bands 1 --dtype u8 --seed %d", mk, pth(name), 20 + i))
			return 1;
		fprintf(f, "%s %d\n", name, (i * 3) % 4);
	}
	fclose(f);
	if (sh("cdp-lmdbpack -q --list %s %s", pth("chips.txt"), pth("poolc")) ||
	    sh("cdp-keyshuffle -q --no-shuffle -o %s %s", pth("c.keys"), pth("poolc")))
		return 1;
	return 0;
}

static cdp_loader_opts opts(int rank, int j, int b)
{
	cdp_loader_opts o;

	cdp_loader_opts_init(&o);
	o.pool_path = path_pool;
	o.pool = &pool;
	o.keys_path = path_keys;
	o.rank = rank;
	o.nranks = j;
	o.batch = b;
	o.seed = 42;
	return o;
}

static cdp_loader *open_ok(const cdp_loader_opts *o)
{
	char err[512];
	cdp_loader *l = NULL;
	int rc = cdp_loader_open(o, &l, err, sizeof err);

	CHECK(rc == 0, "open %s: %s", o->keys_path, err);
	return rc ? NULL : l;
}

/* One epoch of a loader: every batch's key indices, images and labels
 * appended in batch order. Returns the number of samples. */
typedef struct run { size_t n, cap, steps; size_t *idx; float *img; int32_t *lab; size_t isz, lsz; } run;

static void run_free(run *r) { free(r->idx); free(r->img); free(r->lab); memset(r, 0, sizeof *r); }

static size_t epoch_run(cdp_loader *l, uint64_t epoch, uint64_t start, run *r)
{
	cdp_batch b;
	int rc;

	memset(r, 0, sizeof *r);
	if (!l || cdp_loader_start_epoch(l, epoch, start))
		return 0;
	while ((rc = cdp_loader_next(l, &b)) == 0) {
		r->isz = (size_t)b.c * b.h * b.w;
		if (r->n + (size_t)b.n > r->cap) {
			r->cap = 2 * (r->n + (size_t)b.n);
			r->idx = realloc(r->idx, r->cap * sizeof *r->idx);
			r->img = realloc(r->img, r->cap * r->isz * sizeof(float));
			r->lab = realloc(r->lab, r->cap * (size_t)b.h * b.w * sizeof(int32_t));
		}
		memcpy(r->idx + r->n, b.index, (size_t)b.n * sizeof *r->idx);
		memcpy(r->img + r->n * r->isz, b.image, (size_t)b.n * r->isz * sizeof(float));
		if (b.label) {
			cdp_loader_info in;
			cdp_loader_get_info(l, &in);
			r->lsz = in.label_kind == CDP_LABEL_CLASS ? 1 : (size_t)b.h * b.w;
			memcpy(r->lab + r->n * r->lsz, b.label, (size_t)b.n * r->lsz * sizeof(int32_t));
		}
		r->n += (size_t)b.n;
		r->steps++;
	}
	CHECK(rc == CDP_EEOF, "epoch ended with %d (%s)", rc, cdp_loader_error(l));
	return r->n;
}

static void expected_order(uint64_t seed, uint64_t epoch, size_t n, size_t *o)
{
	cdp_rng r;

	for (size_t i = 0; i < n; i++)
		o[i] = i;
	cdp_rng_seed(&r, cdp_rng_derive(seed, epoch, 0));
	cdp_rng_shuffle_size(&r, o, n);
}

/* The global sequence of one epoch with j ranks of batch b: j loaders open
 * at once on the shared pool, stepped together as ranks would be. */
static size_t global_run(int j, int b, int pad, int acc, uint64_t epoch, size_t *idx, float *img,
                         size_t isz)
{
	cdp_loader *l[8] = {0};
	cdp_batch bt;
	size_t n = 0;
	int rc = 0, done = 0;

	for (int k = 0; k < j; k++) {
		cdp_loader_opts o = opts(k, j, b);
		o.pad_last = pad;
		o.accumulate = acc;
		if (!(l[k] = open_ok(&o)) || cdp_loader_start_epoch(l[k], epoch, 0))
			goto out;
	}
	while (!done) {
		for (int k = 0; k < j; k++) {
			rc = cdp_loader_next(l[k], &bt);
			if (k == 0)
				done = rc == CDP_EEOF;
			CHECK(rc == (done ? CDP_EEOF : 0), "rank %d: next returned %d at global sample %zu",
			      k, rc, n);
			if (rc)
				continue;
			memcpy(idx + n, bt.index, (size_t)bt.n * sizeof *idx);
			if (img)
				memcpy(img + n * isz, bt.image, (size_t)bt.n * isz * sizeof(float));
			n += (size_t)bt.n;
		}
		if (rc && !done)
			break;
	}
out:
	for (int k = 0; k < j; k++)
		cdp_loader_close(l[k]);
	return n;
}

static void test_order(size_t N)
{
	size_t *want = malloc(N * sizeof *want), *g = malloc(4 * N * sizeof *g);
	size_t *g2 = malloc(4 * N * sizeof *g2), isz = 3 * 16 * 16;
	float *im1 = malloc(N * isz * sizeof(float)), *im2 = malloc(N * isz * sizeof(float));
	char *seen = calloc(N, 1);
	size_t n;

	/* j = 3, b = 4: B = 12, two steps, the last 6 of the order dropped */
	expected_order(42, 0, N, want);
	n = global_run(3, 4, 0, 1, 0, g, NULL, 0);
	CHECK(n == 24, "3x4 on %zu keys served %zu samples, want 24", N, n);
	for (size_t i = 0; i < n; i++) {
		CHECK(g[i] == want[i], "position %zu: key %zu, want %zu", i, g[i], want[i]);
		CHECK(!seen[g[i]], "key %zu served twice in one epoch", g[i]);
		seen[g[i]] = 1;
	}
	/* pad_last: three steps, the tail filled from the start of the order */
	n = global_run(3, 4, 1, 1, 0, g, NULL, 0);
	CHECK(n == 36, "pad_last served %zu samples, want 36", n);
	for (size_t i = 0; i < n; i++)
		CHECK(g[i] == want[i % N], "pad_last position %zu: key %zu, want %zu", i, g[i], want[i % N]);
	/* accumulate 2: a step is 2 batches, 24 positions; pad_last gives 2
	 * whole steps, the last filled from the order's start (before: 3
	 * batches, cut to 1 step by the trainer, 6 keys never read), and
	 * without it 1 step */
	n = global_run(3, 4, 1, 2, 0, g, NULL, 0);
	CHECK(n == (N + 23) / 24 * 24, "pad_last, accumulate 2 on %zu keys served %zu samples, "
	      "want %zu", N, n, (N + 23) / 24 * 24);
	for (size_t i = 0; i < n; i++)
		CHECK(g[i] == want[i % N], "pad_last, accumulate 2, position %zu: key %zu, want %zu", i,
		      g[i], want[i % N]);
	n = global_run(3, 4, 0, 2, 0, g, NULL, 0);
	CHECK(n == N / 24 * 24, "accumulate 2 on %zu keys served %zu samples, want %zu", N, n,
	      N / 24 * 24);

	/* j-independence at B = 12, two epochs, keys and pixels */
	for (uint64_t e = 0; e < 2; e++) {
		size_t n1 = global_run(1, 12, 0, 1, e, g, im1, isz);
		for (int j = 2; j <= 4; j += 2) {
			size_t nj = global_run(j, 12 / j, 0, 1, e, g2, im2, isz);
			CHECK(nj == n1 && memcmp(g, g2, n1 * sizeof *g) == 0,
			      "epoch %d: j=%d gives another global sequence than j=1", (int)e, j);
			CHECK(nj == n1 && memcmp(im1, im2, n1 * isz * sizeof(float)) == 0,
			      "epoch %d: j=%d gives other pixels than j=1", (int)e, j);
		}
	}
	/* epochs differ, ranks agree on the order */
	{
		cdp_loader_opts o0 = opts(0, 2, 3), o1 = opts(1, 2, 3);
		cdp_loader *a = open_ok(&o0), *b = open_ok(&o1);
		size_t *e0 = malloc(N * sizeof *e0);
		if (a && b) {
			cdp_loader_start_epoch(a, 0, 0);
			memcpy(e0, cdp_loader_order(a), N * sizeof *e0);
			cdp_loader_start_epoch(a, 1, 0);
			cdp_loader_start_epoch(b, 1, 0);
			CHECK(memcmp(e0, cdp_loader_order(a), N * sizeof *e0) != 0, "epochs 0 and 1 share an order");
			CHECK(memcmp(cdp_loader_order(a), cdp_loader_order(b), N * sizeof *e0) == 0,
			      "ranks 0 and 1 differ in the epoch-1 order");
			expected_order(42, 1, N, want);
			CHECK(memcmp(want, cdp_loader_order(b), N * sizeof *want) == 0,
			      "epoch-1 order is not Fisher-Yates from derive(seed, 1, 0)");
		}
		free(e0);
		cdp_loader_close(a);
		cdp_loader_close(b);
	}
	free(want); free(g); free(g2); free(im1); free(im2); free(seen);
}

/* Decodes key `key` of pool p (own txn) into r with payloads in scratch. */
static int get_record(cdp_pool *p, const char *key, cdp_record *r, cdp_buf *scratch, cdp_buf *copy)
{
	MDB_txn *txn;
	MDB_val k = { strlen(key), (void *)key }, v;
	int rc;

	if ((rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn)) != 0)
		return rc;
	if ((rc = mdb_get(txn, p->tiles, &k, &v)) == 0 && (rc = cdp_buf_reserve(copy, v.mv_size)) == 0) {
		memcpy(copy->p, v.mv_data, v.mv_size);
		copy->len = v.mv_size;
		rc = cdp_record_decode(copy->p, v.mv_size, r, scratch);
	}
	mdb_txn_abort(txn);
	return rc;
}

/* Pixel values by hand: statistics recomputed over all valid pixels of
 * every record, then every pixel of the first two batches. */
static void test_pixels(const char *pp, const char *kp, int *saw_invalid)
{
	cdp_pool own, *p = &pool;
	cdp_loader_opts o = opts(0, 1, 4);
	cdp_buf sc = {0}, cp = {0};
	cdp_keylist kl;
	cdp_loader_info in;
	cdp_loader *l;
	cdp_batch b;
	size_t line;
	double sum[8] = {0}, sq[8] = {0}, cnt[8] = {0};

	if (strcmp(pp, path_pool) != 0) {
		CHECK_RC(cdp_pool_open(pp, CDP_POOL_RDONLY, 0, &own), 0);
		p = &own;
	}
	o.pool_path = pp;
	o.pool = p;
	o.keys_path = kp;
	CHECK_RC(cdp_ptrfile_read(kp, &kl, &line), 0);
	for (size_t i = 0; i < kl.count; i++) {
		cdp_record r;
		if (get_record(p, kl.keys[i], &r, &sc, &cp) != 0)
			continue;
		size_t hw = (size_t)r.height * r.width;
		for (uint32_t c = 0; c < r.bands && c < 8; c++)
			for (size_t q = 0; q < hw; q++)
				if (!r.mask || r.mask[q]) {
					double x = cdp_dtype_get(r.dtype, r.image, c * hw + q);
					sum[c] += x; sq[c] += x * x; cnt[c]++;
				}
	}
	if (!(l = open_ok(&o)))
		goto out;
	cdp_loader_get_info(l, &in);
	for (int c = 0; c < in.c; c++) {
		double m = sum[c] / cnt[c], sd = sqrt(sq[c] / cnt[c] - m * m);
		CHECK(fabs(in.pool->band[c].mean - m) < 1e-6 * (1 + fabs(m)), "%s band %d mean %g, recomputed %g",
		      pp, c, in.pool->band[c].mean, m);
		CHECK(fabs(in.pool->band[c].std - sd) < 1e-6 * (1 + sd), "%s band %d std %g, recomputed %g",
		      pp, c, in.pool->band[c].std, sd);
	}
	cdp_loader_start_epoch(l, 0, 0);
	for (int s = 0; s < 2 && cdp_loader_next(l, &b) == 0; s++)
		for (int i = 0; i < b.n; i++) {
			cdp_record r;
			const char *key = cdp_loader_key(l, b.index[i]);
			int bad = 0;
			if (get_record(p, key, &r, &sc, &cp) != 0) {
				CHECK(0, "cannot decode '%s' here", key);
				continue;
			}
			size_t hw = (size_t)r.height * r.width;
			const float *im = b.image + (size_t)i * b.c * hw;
			const int32_t *lb = b.label ? b.label + (size_t)i * hw : NULL;
			for (size_t q = 0; q < hw; q++) {
				int valid = !r.mask || r.mask[q];
				*saw_invalid += !valid;
				for (int c = 0; c < b.c; c++) {
					double x = cdp_dtype_get(r.dtype, r.image, c * hw + q);
					double m = sum[c] / cnt[c], sd = sqrt(sq[c] / cnt[c] - m * m);
					double want = valid ? (x - m) / sd : 0.0;
					bad += fabs(im[(size_t)c * hw + q] - want) > 1e-5 * (1 + fabs(want));
				}
				if (lb) {
					int32_t wl = !valid ? (int32_t)in.ignore :
					             (int32_t)((const uint8_t *)r.label)[q];
					bad += lb[q] != wl;
				}
			}
			CHECK(bad == 0, "%s: %d values of '%s' differ from (x - mean) / std by hand", pp, bad, key);
		}
	cdp_loader_close(l);
out:
	if (p == &own)
		cdp_pool_close(&own);
	cdp_keylist_free(&kl);
	cdp_buf_free(&sc);
	cdp_buf_free(&cp);
}

static void open_fails(cdp_loader_opts *o, int want, const char *needle, const char *what)
{
	char err[512] = "";
	cdp_loader *l = NULL;
	int rc = cdp_loader_open(o, &l, err, sizeof err);

	CHECK(rc == want, "%s: open returned %d (%s), want %d", what, rc, err, want);
	CHECK(l == NULL, "%s: a loader came back", what);
	CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
	cdp_loader_close(l);
}

static void test_bad_open(void)
{
	cdp_loader_opts o = opts(0, 1, 4);
	cdp_keylist kl;
	size_t line;
	FILE *f;
	char **keys;

	o.keys_path = pth("b.keys");
	open_fails(&o, CDP_EMISMATCH, pth("b.keys"), "pointer file of another pool");

	/* a key that is not in the pool, on line 2 + 30 */
	CHECK_RC(cdp_ptrfile_read(path_keys, &kl, &line), 0);
	keys = malloc((kl.count + 1) * sizeof *keys);
	size_t *lens = malloc((kl.count + 1) * sizeof *lens);
	memcpy(keys, kl.keys, kl.count * sizeof *keys);
	memcpy(lens, kl.lens, kl.count * sizeof *lens);
	keys[kl.count] = "nokey_0_0";
	lens[kl.count] = 9;
	f = fopen(pth("missing.keys"), "w");
	CHECK_RC(cdp_ptrfile_write(f, kl.uuid, 0, keys, lens, kl.count + 1), 0);
	fclose(f);
	o.keys_path = pth("missing.keys");
	open_fails(&o, CDP_EKEY, "nokey_0_0", "missing key");
	open_fails(&o, CDP_EKEY, pth("missing.keys"), "missing key names the file");
	f = fopen(pth("one.keys"), "w");
	CHECK_RC(cdp_ptrfile_write(f, kl.uuid, 0, keys, lens, 1), 0);
	fclose(f);
	free(keys);
	free(lens);
	cdp_keylist_free(&kl);

	/* the last three lines cut off */
	sh("head -n -3 %s > %s", path_keys, pth("trunc.keys"));
	o.keys_path = pth("trunc.keys");
	open_fails(&o, CDP_ETRUNC, pth("trunc.keys"), "truncated pointer file");

	o = opts(0, 4, 8);   /* B = 32 > 30 keys */
	open_fails(&o, CDP_ERANGE, path_keys, "fewer keys than a global batch");
	open_fails(&o, CDP_ERANGE, "of 32 (4 ranks x 8)", "fewer keys than a global batch");
	o = opts(0, 1, 31);
	open_fails(&o, CDP_ERANGE, "of 31 (1 rank x 31)", "fewer keys than one process's batch");
	o = opts(0, 1, 8);
	o.keys_path = pth("one.keys");    /* before: "1 keys are" */
	open_fails(&o, CDP_ERANGE, "one.keys': 1 key is fewer than one global batch of 8 (1 rank x 8)",
	           "one key");
	o = opts(0, 4, 8);
	o.pad_last = 1;
	cdp_loader_close(open_ok(&o));
	o = opts(2, 2, 4);
	open_fails(&o, CDP_EINVAL, "invalid", "rank >= j");
}

/* Flips a byte inside the image payload of key's value in a copy of the
 * pool; returns 0 when the copy's record no longer decodes. */
static int corrupt_copy(const char *key)
{
	FILE *f;
	long size;
	uint8_t *data;
	cdp_buf sc = {0}, cp = {0}, vb = {0};
	cdp_record r;
	int rc = 1;

	if (sh("rm -rf %s && cp -r %s %s", pth("poolbad"), path_pool, pth("poolbad")))
		return 1;
	if (get_record(&pool, key, &r, &sc, &vb) != 0 || !(f = fopen(pth("poolbad/data.mdb"), "r+b")))
		return 1;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	data = malloc((size_t)size);
	rewind(f);
	if (fread(data, 1, (size_t)size, f) == (size_t)size) {
		/* a stale copy in a free page would not count: check each hit */
		size_t nl = vb.len < 512 ? vb.len : 512;
		for (uint8_t *at = data; rc && (at = memmem(at, (size_t)(data + size - at), vb.p, nl)); at++) {
			cdp_pool bp;
			long off = (long)(at - data) + 170;
			uint8_t orig = at[170];
			fseek(f, off, SEEK_SET);
			fputc(orig ^ 0x5a, f);
			fflush(f);
			if (cdp_pool_open(pth("poolbad"), CDP_POOL_RDONLY, 0, &bp) == 0) {
				rc = get_record(&bp, key, &r, &sc, &cp) == CDP_ECRC ? 0 : 1;
				cdp_pool_close(&bp);
			}
			if (rc) {
				fseek(f, off, SEEK_SET);
				fputc(orig, f);
				fflush(f);
			}
		}
	}
	fclose(f);
	free(data);
	cdp_buf_free(&sc);
	cdp_buf_free(&cp);
	cdp_buf_free(&vb);
	return rc;
}

static int same_run(const run *a, const run *b)
{
	return a->n == b->n && a->steps == b->steps && a->n > 0 &&
	       memcmp(a->idx, b->idx, a->n * sizeof *a->idx) == 0 &&
	       memcmp(a->img, b->img, a->n * a->isz * sizeof(float)) == 0 &&
	       (a->lsz == 0 || memcmp(a->lab, b->lab, a->n * a->lsz * sizeof(int32_t)) == 0);
}

static void test_corrupt(size_t N)
{
	size_t *ord = malloc(N * sizeof *ord);
	char key[CDP_KEY_MAX], err[512];
	cdp_pool bp;
	cdp_loader_opts o;
	cdp_loader *l;
	cdp_batch b;
	run good, r1, r3;
	int rc;

	/* the first key of epoch 0, which rank 0 of any j meets first */
	expected_order(42, 0, N, ord);
	{
		cdp_loader_opts g = opts(0, 1, 4);
		cdp_loader *gl = open_ok(&g);
		snprintf(key, sizeof key, "%s", gl ? cdp_loader_key(gl, ord[0]) : "");
		epoch_run(gl, 0, 0, &good);
		cdp_loader_close(gl);
	}
	if (corrupt_copy(key) != 0) {
		CHECK(0, "could not corrupt '%s' in a copy of the pool", key);
		goto out;
	}
	CHECK_RC(cdp_pool_open(pth("poolbad"), CDP_POOL_RDONLY, 0, &bp), 0);
	o = opts(0, 1, 4);
	o.pool = &bp;
	o.pool_path = pth("poolbad");
	o.verify_once = 1;   /* a first read is always checked */
	if ((l = open_ok(&o))) {   /* the CRC is not checked at open */
		cdp_loader_start_epoch(l, 0, 0);
		rc = cdp_loader_next(l, &b);
		CHECK(rc == CDP_ECRC, "corrupt record gave %d, want CDP_ECRC", rc);
		CHECK(strcmp(cdp_loader_errkey(l), key) == 0, "error key '%s', want '%s'", cdp_loader_errkey(l), key);
		CHECK(strstr(cdp_loader_error(l), key) && strstr(cdp_loader_error(l), pth("poolbad")),
		      "message '%s' names neither key '%s' nor the pool", cdp_loader_error(l), key);
		CHECK_RC(cdp_loader_next(l, &b), CDP_ECRC);   /* sticky */
		cdp_loader_close(l);
	}
	o.verify_once = 0;
	/* skip_bad: counted once, replaced by the next key of the order, the
	 * rest unchanged; the same with three threads */
	o.skip_bad = 1;
	for (int t = 1; t <= 3; t += 2) {
		cdp_loader_info in;
		o.threads = t;
		if (!(l = open_ok(&o)))
			continue;
		epoch_run(l, 0, 0, t == 1 ? &r1 : &r3);
		cdp_loader_get_info(l, &in);
		CHECK(in.skipped == 1, "threads %d: %llu records skipped, want 1", t, (unsigned long long)in.skipped);
		cdp_loader_close(l);
	}
	CHECK(r1.n == good.n && r1.idx[0] == ord[1], "bad '%s' replaced by key %zu, want the next in order %zu",
	      key, r1.n ? r1.idx[0] : 0, ord[1]);
	CHECK(r1.n == good.n && memcmp(r1.img, good.img + good.isz, good.isz * sizeof(float)) == 0,
	      "the replacement's pixels differ from key %zu's", ord[1]);
	CHECK(r1.n == good.n && memcmp(r1.idx + 1, good.idx + 1, (good.n - 1) * sizeof *r1.idx) == 0 &&
	      memcmp(r1.img + good.isz, good.img + good.isz, (good.n - 1) * good.isz * sizeof(float)) == 0,
	      "skipping changed other samples");
	CHECK(same_run(&r1, &r3), "skip_bad with 3 threads differs from 1 thread");
	/* validation: the bad slot keeps its key, zero pixels, ignored labels */
	o = opts(0, 1, 30);
	o.pool = &bp;
	o.pool_path = pth("poolbad");
	o.val = o.skip_bad = 1;
	if ((l = open_ok(&o))) {
		cdp_loader_start_epoch(l, 0, 0);
		if (cdp_loader_next(l, &b) == 0) {
			int i = (int)ord[0];   /* validation is pointer-file order */
			size_t hw = (size_t)b.h * b.w;
			int nz = 0, nl = 0;
			for (size_t q = 0; q < hw * b.c; q++)
				nz += b.image[(size_t)i * b.c * hw + q] != 0;
			for (size_t q = 0; q < hw; q++)
				nl += b.label[(size_t)i * hw + q] != 255;
			CHECK(b.n == 30 && b.index[i] == ord[0] && b.skipped == 1 && nz == 0 && nl == 0,
			      "validation bad slot: n %d, index %zu, skipped %u, %d nonzero pixels, %d labels",
			      b.n, b.index[i], b.skipped, nz, nl);
		}
		cdp_loader_close(l);
	}
	cdp_pool_close(&bp);
	/* a pool's own copy (no borrowed env) reports the same */
	o = opts(0, 1, 4);
	o.pool = NULL;
	o.pool_path = pth("poolbad");
	o.mode = CDP_LOAD_COPY;
	rc = cdp_loader_open(&o, &l, err, sizeof err);
	CHECK(rc == 0, "copy mode open of the corrupt pool: %s", err);
	if (rc == 0) {
		cdp_loader_start_epoch(l, 0, 0);
		CHECK_RC(cdp_loader_next(l, &b), CDP_ECRC);
		CHECK(strcmp(cdp_loader_errkey(l), key) == 0, "copy mode error key '%s'", cdp_loader_errkey(l));
		cdp_loader_close(l);
	}
	run_free(&r1);
	run_free(&r3);
out:
	run_free(&good);
	free(ord);
}

/* Copy mode, resume, restart and threads all give the pool mode batches. */
static void test_same_batches(void)
{
	cdp_loader_opts o = opts(1, 2, 3);
	run base[2], r;
	cdp_loader *l = open_ok(&o);
	cdp_batch b;

	for (int e = 0; e < 2; e++)
		epoch_run(l, (uint64_t)e, 0, &base[e]);
	cdp_loader_close(l);

	o.mode = CDP_LOAD_COPY;
	if ((l = open_ok(&o))) {
		for (int e = 0; e < 2; e++) {
			epoch_run(l, (uint64_t)e, 0, &r);
			CHECK(same_run(&r, &base[e]), "copy mode epoch %d differs from pool mode", e);
			run_free(&r);
		}
		cdp_loader_close(l);
	}
	o.mode = CDP_LOAD_POOL;
	o.threads = 4;
	o.readahead = CDP_RA_ON;
	o.verify_once = 1;   /* the second epoch reads unchecked payloads */
	if ((l = open_ok(&o))) {
		for (int e = 0; e < 2; e++) {
			epoch_run(l, (uint64_t)e, 0, &r);
			CHECK(same_run(&r, &base[e]), "epoch %d with 4 threads, readahead, verify_once differs", e);
			run_free(&r);
		}
		cdp_loader_close(l);
	}
	o.verify_once = 0;
	/* resume at epoch 1 step 2 in a fresh loader (another thread count) */
	o.threads = 2;
	if ((l = open_ok(&o))) {
		cdp_loader_info in;
		cdp_loader_get_info(l, &in);
		CHECK(in.steps == 5, "2 ranks x 3 on 30 keys: %llu steps, want 5", (unsigned long long)in.steps);
		epoch_run(l, 1, 2, &r);
		CHECK(r.steps == 3 && memcmp(r.idx, base[1].idx + 6, 9 * sizeof *r.idx) == 0 &&
		      memcmp(r.img, base[1].img + 6 * r.isz, 9 * r.isz * sizeof(float)) == 0,
		      "resume at (1, 2) differs from continuing");
		run_free(&r);
		/* restart mid-epoch, with a batch in flight */
		cdp_loader_start_epoch(l, 0, 0);
		CHECK_RC(cdp_loader_next(l, &b), 0);
		cdp_loader_start_epoch(l, 1, 4);
		CHECK(cdp_loader_next(l, &b) == 0 && b.step == 4 && b.epoch == 1 &&
		      memcmp(b.index, base[1].idx + 12, 3 * sizeof *b.index) == 0,
		      "restart at (1, 4) gave step %llu", (unsigned long long)b.step);
		CHECK_RC(cdp_loader_next(l, &b), CDP_EEOF);
		CHECK_RC(cdp_loader_start_epoch(l, 1, 6), CDP_EINVAL);
		cdp_loader_close(l);
	}
	o.threads = 1;
	if ((l = open_ok(&o))) {
		cdp_loader_info in;
		double sum = 0;
		CHECK_RC(cdp_loader_next(l, &b), CDP_EINVAL);   /* no epoch started */
		/* data-wait accounting: the per-call waits add up to the total */
		cdp_loader_start_epoch(l, 0, 0);
		for (int s = 0; s < 3 && cdp_loader_next(l, &b) == 0; s++) {
			CHECK(b.wait_s >= 0 && b.wait_s < 60, "batch %d waited %g s", s, b.wait_s);
			sum += b.wait_s;
		}
		cdp_loader_get_info(l, &in);
		CHECK(in.batches == 3 && in.wait_s == sum, "info: %llu batches, wait %g s, want 3, %g s",
		      (unsigned long long)in.batches, in.wait_s, sum);
		cdp_loader_close(l);
	}
	run_free(&base[0]);
	run_free(&base[1]);
}

static void test_val(size_t N)
{
	char *seen = calloc(N, 1);
	size_t total = 0;

	/* j = 4, b = 3: ranks hold 8, 8, 7, 7 keys, all run 3 steps */
	for (int k = 0; k < 4; k++) {
		cdp_loader_opts o = opts(k, 4, 3);
		cdp_loader *l;
		run r;
		o.val = 1;
		if (!(l = open_ok(&o)))
			continue;
		epoch_run(l, 5, 0, &r);
		CHECK(r.steps == 3 && r.n == (k < 2 ? 8u : 7u), "val rank %d: %zu steps, %zu samples", k, r.steps, r.n);
		for (size_t i = 0; i < r.n; i++) {
			CHECK(r.idx[i] % 4 == (size_t)k && !seen[r.idx[i]], "val rank %d got key %zu", k, r.idx[i]);
			seen[r.idx[i] % N] = 1;
			if (i)
				CHECK(r.idx[i] == r.idx[i - 1] + 4, "val rank %d: not in pointer-file order", k);
		}
		total += r.n;
		run_free(&r);
		cdp_loader_close(l);
	}
	CHECK(total == N, "validation served %zu samples of %zu", total, N);
	free(seen);
}

static void test_class_pool(void)
{
	cdp_loader_opts o = opts(0, 1, 5);
	cdp_pool pc;
	cdp_loader *l;
	cdp_batch b;

	if (cdp_pool_open(pth("poolc"), CDP_POOL_RDONLY, 0, &pc) != 0) {
		CHECK(0, "cannot open the class pool");
		return;
	}
	o.pool = &pc;
	o.pool_path = pth("poolc");
	o.keys_path = pth("c.keys");
	if ((l = open_ok(&o))) {
		cdp_loader_start_epoch(l, 0, 0);
		if (cdp_loader_next(l, &b) == 0) {
			CHECK(b.n == 5 && b.c == 1 && b.h == 8 && b.w == 8 && b.label, "class batch shape");
			for (int i = 0; i < b.n; i++) {
				const char *k = cdp_loader_key(l, b.index[i]);
				int chip = k[2] - '0';
				CHECK(b.label[i] == (chip * 3) % 4, "chip '%s': class %d, want %d", k, b.label[i], (chip * 3) % 4);
			}
		}
		cdp_loader_close(l);
	}
	cdp_pool_close(&pc);
}

/* Augmented batches equal augment.h applied to unaugmented ones with the
 * documented per-sample seed, on any j; remap_ignore relabels. */
static void test_aug(void)
{
	cdp_aug_cfg a = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = 12, .crop_w = 12 };
	cdp_loader_opts o = opts(0, 1, 6);
	run plain, aug, aug2[2];
	cdp_loader *l = open_ok(&o);
	size_t hw = 16 * 16, ohw = 12 * 12;
	int bad = 0, moved = 0;

	epoch_run(l, 3, 0, &plain);
	cdp_loader_close(l);
	o.aug = &a;
	l = open_ok(&o);
	epoch_run(l, 3, 0, &aug);
	cdp_loader_close(l);
	CHECK(aug.n == plain.n && aug.isz == 3 * ohw && aug.lsz == ohw, "augmented shape");
	for (size_t i = 0; i < aug.n && aug.n == plain.n; i++) {
		cdp_aug t;
		float img[3 * 144];
		int32_t lab[144];
		cdp_aug_draw(&a, 16, 16, cdp_rng_derive(cdp_rng_derive(42, 3, 1), plain.idx[i], 0), &t);
		cdp_aug_apply(&t, 3, 16, 16, plain.img + i * 3 * hw, plain.lab + i * hw, img, lab);
		bad += memcmp(img, aug.img + i * 3 * ohw, sizeof img) != 0 ||
		       memcmp(lab, aug.lab + i * ohw, sizeof lab) != 0;
		moved += t.hflip || t.vflip || t.rot;
	}
	CHECK(bad == 0 && moved > 0, "%d augmented samples differ from augment.h (%d transformed)", bad, moved);
	for (int k = 0; k < 2; k++) {
		cdp_loader_opts ok = opts(k, 2, 3);
		ok.aug = &a;
		l = open_ok(&ok);
		epoch_run(l, 3, 0, &aug2[k]);
		cdp_loader_close(l);
	}
	for (size_t s = 0; s < aug.n / 6; s++)
		for (int k = 0; k < 2; k++)
			CHECK(memcmp(aug.img + (s * 6 + k * 3) * aug.isz, aug2[k].img + s * 3 * aug.isz,
			             3 * aug.isz * sizeof(float)) == 0, "step %zu rank %d: augmentation depends on j", s, k);
	/* validation: the centred crop, nothing else */
	{
		run v, vp;
		cdp_loader_opts ov = opts(0, 1, 6);
		ov.val = 1;
		l = open_ok(&ov);
		epoch_run(l, 0, 0, &vp);
		cdp_loader_close(l);
		ov.aug = &a;
		l = open_ok(&ov);
		epoch_run(l, 0, 0, &v);
		cdp_loader_close(l);
		bad = v.n != vp.n;
		for (size_t i = 0; i < v.n && !bad; i++)
			for (int c = 0; c < 3; c++)
				for (int y = 0; y < 12; y++)
					bad += memcmp(v.img + i * 3 * ohw + c * ohw + y * 12,
					              vp.img + i * 3 * hw + c * hw + (y + 2) * 16 + 2, 12 * sizeof(float)) != 0;
		CHECK(bad == 0, "validation crop is not the centred 12x12 window (%d rows differ)", bad);
		run_free(&v);
		run_free(&vp);
	}
	/* remap_ignore: ignored labels (255) become -1, others unchanged */
	{
		run rm;
		int n255 = 0, nneg = 0;
		o = opts(0, 1, 6);
		o.remap_ignore = 1;
		o.ignore = -1;
		l = open_ok(&o);
		epoch_run(l, 3, 0, &rm);
		cdp_loader_close(l);
		bad = rm.n != plain.n;
		for (size_t i = 0; i < rm.n * rm.lsz && !bad; i++) {
			n255 += plain.lab[i] == 255;
			nneg += rm.lab[i] == -1;
			bad += rm.lab[i] != (plain.lab[i] == 255 ? -1 : plain.lab[i]);
		}
		CHECK(bad == 0 && n255 > 0 && nneg == n255, "remap_ignore: %d labels wrong, %d ignored, %d -1",
		      bad, n255, nneg);
		run_free(&rm);
	}
	run_free(&plain);
	run_free(&aug);
	run_free(&aug2[0]);
	run_free(&aug2[1]);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 100 ? getenv("TMPDIR") : "/tmp";
	cdp_loader_info in;
	int rc, invalid = 0;

	snprintf(dir, sizeof dir, "%s/cdploader.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(path_pool, sizeof path_pool, "%s/pool", dir);
	snprintf(path_keys, sizeof path_keys, "%s/all.keys", dir);
	if ((rc = build_fixtures()) != 0) {
		sh("rm -rf %s", dir);
		if (rc == 77)
			printf("SKIP: needs PYTHON with osgeo and cdp-tile, cdp-lmdbpack, cdp-keyshuffle on PATH\n");
		else
			printf("cannot build the test pools in %s\n", dir);
		return rc == 77 ? 77 : 99;
	}
	if (cdp_pool_open(path_pool, CDP_POOL_RDONLY, 0, &pool) != 0) {
		printf("cannot open %s\n", path_pool);
		return 99;
	}
	{
		cdp_loader_opts o = opts(0, 1, 1);
		cdp_loader *l = open_ok(&o);
		if (!l)
			return tap_done();
		cdp_loader_get_info(l, &in);
		cdp_loader_close(l);
		CHECK(in.count == 30 && in.c == 3 && in.h == 16 && in.w == 16 && in.ignore == 255 &&
		      in.label_kind == CDP_LABEL_U8, "pool: %zu keys %dx%dx%d ignore %d", in.count, in.c,
		      in.h, in.w, in.ignore);
	}
	test_order(in.count);
	test_pixels(path_pool, path_keys, &invalid);
	CHECK(invalid > 0, "no invalid pixel met: the mask path went untested");
	invalid = 0;
	test_pixels(pth("poolw"), pth("w.keys"), &invalid);
	CHECK(invalid > 0, "u16 pool: no invalid pixel met");
	test_bad_open();
	test_same_batches();
	test_val(in.count);
	test_class_pool();
	test_aug();
	test_corrupt(in.count);
	cdp_pool_close(&pool);
	sh("rm -rf %s", dir);
	return tap_done();
}
