/* test_loader_raw.c: the loader's raw batches (loader.h "The data path")
 * against its float batches, on pools built by the real tools.
 *
 * For every batch of a raw loader and of a host loader with the same
 * options: the same key indices; prep_batch of the CPU backend on the raw
 * pixels with the loader's mean and inv, then batch.valid applied to every
 * band, equals the host image bit for bit; per-pixel labels through
 * prep_batch's label path, and class labels as they come, equal the host
 * labels. Covered: a u8 pool with nodata pixels (masks), a u16 zlib pool with
 * padded edges (compressed records) and a non-square crop, a class-label
 * pool; training over two epochs with flips, quarter turns and a crop at 1
 * and 3 decode threads, without augmentation, and validation (the centred
 * crop); and a record with a flipped byte: CDP_ECRC naming its key on both
 * paths, and with skip_bad the same replacement in training and a blank
 * sample in validation. Every pool has invalid pixels, and some batches of
 * each must come with batch.valid, or the mask went untested.
 *
 * Needs $PYTHON (osgeo, numpy, lmdb) and cdp-tile, cdp-lmdbpack,
 * cdp-keyshuffle on PATH; skips (77) without them.
 */
#define _GNU_SOURCE
#include "loader.h"
#include "backend.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "tap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static cdp_backend *be;
static long masked;             /* raw batches that came with batch.valid */

/* pool a (u8), w (u16 zlib), c (class chips), bad (a with one record's
 * image byte flipped: the key is written to bad.key) */
static int build_fixtures(void)
{
	const char *py = fixture_python(), *src = fixture_srcdir();
	char mk[400];
	FILE *f;

	if (sh("command -v cdp-tile cdp-lmdbpack cdp-keyshuffle >/dev/null") ||
	    sh("%s -c 'import numpy, lmdb; from osgeo import gdal' 2>/dev/null", py))
		return 77;
	snprintf(mk, sizeof mk, "%s %s/tests/tools/mkraster.py", py, src);
	/* nodata in one rectangle: 9 of the 30 tiles have invalid pixels, so
	 * batches mix samples with and without */
	if (sh("%s %s --width 96 --height 80 --bands 3 --dtype u8 --nodata 0 --nodata-rect 20,10,30,25 "
	       "--seed 7 --label %s --classes 4", mk, pth("a.tif"), pth("a_lab.tif")) ||
	    sh("cdp-tile -q --size 16 --label %s %s | cdp-lmdbpack -q %s", pth("a_lab.tif"),
	       pth("a.tif"), pth("a")) ||
	    sh("cdp-keyshuffle -q --seed 3 -o %s %s", pth("a.keys"), pth("a")))
		return 1;
	if (sh("%s %s --width 50 --height 40 --bands 2 --dtype u16 --nodata 0 --nodata-frac 0.1 "
	       "--seed 9 --label %s --classes 3", mk, pth("w.tif"), pth("w_lab.tif")) ||
	    sh("cdp-tile -q --size 16 --edge pad --zlib 6 --label %s %s | cdp-lmdbpack -q %s",
	       pth("w_lab.tif"), pth("w.tif"), pth("w")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("w.keys"), pth("w")))
		return 1;
	if (!(f = fopen(pth("chips.txt"), "w")))
		return 1;
	for (int i = 0; i < 6; i++) {
		char name[32];
		snprintf(name, sizeof name, "c_%d_0.tif", i);
		if (sh("%s %s --width 8 --height 8 --bands 1 --dtype u8 --nodata 0 --nodata-frac 0.2 "
		       "--seed %d", mk, pth(name), 20 + i))
			return 1;
		fprintf(f, "%s %d\n", name, i % 3);
	}
	fclose(f);
	if (sh("cdp-lmdbpack -q --list %s %s", pth("chips.txt"), pth("c")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("c.keys"), pth("c")))
		return 1;
	return sh("cp -r %s %s && sed -n 5p %s > %s && %s - %s \"$(cat %s)\" <<'EOF'\n"
	          "import sys, lmdb\n"
	          "env = lmdb.open(sys.argv[1], max_dbs=4, subdir=True)\n"
	          "db = env.open_db(b'tiles')\n"
	          "with env.begin(write=True, db=db) as txn:\n"
	          "    v = bytearray(txn.get(sys.argv[2].encode()))\n"
	          "    v[200] ^= 0xFF\n"
	          "    txn.put(sys.argv[2].encode(), bytes(v))\n"
	          "EOF", pth("a"), pth("bad"), pth("a.keys"), pth("bad.key"), py, pth("bad"),
	          pth("bad.key")) ? 1 : 0;
}

typedef struct pair {
	cdp_loader *host, *raw;
	cdp_loader_info hi, ri;
	float *img;              /* (b, c, h, w) the raw batch prepared */
	int32_t *lab;            /* (b, h, w) */
} pair;

static int pair_open(pair *p, cdp_loader_opts o, char *err, size_t cap)
{
	memset(p, 0, sizeof *p);
	o.raw = 0;
	if (cdp_loader_open(&o, &p->host, err, cap) != 0)
		return -1;
	o.raw = 1;
	if (cdp_loader_open(&o, &p->raw, err, cap) != 0)
		return -1;
	cdp_loader_get_info(p->host, &p->hi);
	cdp_loader_get_info(p->raw, &p->ri);
	p->img = malloc((size_t)o.batch * p->hi.c * p->hi.h * p->hi.w * sizeof(float));
	p->lab = malloc((size_t)o.batch * p->hi.h * p->hi.w * sizeof(int32_t));
	return p->img && p->lab ? 0 : -1;
}

static void pair_close(pair *p)
{
	cdp_loader_close(p->host);
	cdp_loader_close(p->raw);
	free(p->img);
	free(p->lab);
}

/* The raw batch r made into p->img, p->lab as cdp-train does on a device. */
static void prepare(pair *p, const cdp_batch *r)
{
	size_t ohw = (size_t)r->h * r->w;
	int px = p->ri.label_kind != CDP_LABEL_CLASS;

	be->prep_batch(be, r->dtype, r->n, r->c, r->in_h, r->in_w, r->raw, p->ri.mean, p->ri.inv,
	               r->aug, r->h, r->w, p->img, px ? r->label : NULL, px ? p->lab : NULL);
	if (!px)
		memcpy(p->lab, r->label, (size_t)r->n * sizeof(int32_t));
	if (r->valid)
		for (int i = 0; i < r->n; i++)
			for (int c = 0; c < r->c; c++) {
				float *x = p->img + ((size_t)i * r->c + c) * ohw;
				be->dropout_bwd(be, 0.0f, r->valid + i * ohw, x, x, 0.0f, ohw);
			}
}

/* One epoch of both loaders, batch by batch; returns the batches compared,
 * or -1 after a mismatch; *rc the code that ended it (CDP_EEOF). */
static long compare_epoch(pair *p, uint64_t epoch, const char *what, int *rc)
{
	cdp_batch h, r;
	long nb = 0;
	int hr, rr;

	CHECK_RC(cdp_loader_start_epoch(p->host, epoch, 0), 0);
	CHECK_RC(cdp_loader_start_epoch(p->raw, epoch, 0), 0);
	for (;;) {
		hr = cdp_loader_next(p->host, &h);
		rr = cdp_loader_next(p->raw, &r);
		*rc = hr;
		if (hr != rr) {
			CHECK(0, "%s: batch %ld: host %d, raw %d", what, nb, hr, rr);
			return -1;
		}
		if (hr)
			return nb;
		int px = p->ri.label_kind != CDP_LABEL_CLASS, ok, lok;
		size_t isz = (size_t)h.n * h.c * h.h * h.w, lsz = px ? (size_t)h.n * h.h * h.w : (size_t)h.n;
		ok = r.n == h.n && r.c == h.c && r.h == h.h && r.w == h.w && !r.image && r.raw &&
		     r.in_h == p->ri.in_h && r.in_w == p->ri.in_w && r.aug &&
		     memcmp(r.index, h.index, (size_t)h.n * sizeof *h.index) == 0;
		CHECK(ok, "%s: batch %ld: shapes or keys differ", what, nb);
		if (!ok)
			return -1;
		prepare(p, &r);
		masked += r.valid != NULL;
		ok = memcmp(p->img, h.image, isz * sizeof(float)) == 0;
		CHECK(ok, "%s: batch %ld: prepared images differ from the host's", what, nb);
		lok = memcmp(p->lab, h.label, lsz * sizeof(int32_t)) == 0;
		CHECK(lok, "%s: batch %ld: labels differ from the host's", what, nb);
		if (!ok || !lok)
			return -1;
		nb++;
	}
}

/* Both paths over `epochs` epochs from options o; returns the batches. */
static long same_batches(cdp_loader_opts o, int epochs, const char *what)
{
	char err[512], name[200];
	long total = 0, n;
	pair p;
	int rc;

	if (pair_open(&p, o, err, sizeof err) != 0) {
		CHECK(0, "%s: open: %s", what, err);
		pair_close(&p);
		return 0;
	}
	CHECK(p.ri.raw == 1 && p.hi.raw == 0 && p.ri.in_h == p.hi.in_h &&
	      p.ri.raw_size == (size_t)p.ri.c * p.ri.in_h * p.ri.in_w *
	                       cdp_dtype_size(p.ri.pool->dtype) &&
	      memcmp(p.ri.mean, p.hi.mean, (size_t)p.hi.c * sizeof(float)) == 0,
	      "%s: info raw %d/%d, raw_size %zu", what, p.ri.raw, p.hi.raw, p.ri.raw_size);
	for (int e = 0; e < epochs; e++) {
		snprintf(name, sizeof name, "%s, epoch %d", what, e);
		if ((n = compare_epoch(&p, (uint64_t)e, name, &rc)) < 0)
			break;
		CHECK(rc == CDP_EEOF && n > 0, "%s: ended with %d after %ld batches", name, rc, n);
		total += n;
	}
	pair_close(&p);
	return total;
}

static cdp_loader_opts opts(cdp_pool *pool, const char *pp, const char *kp, int b)
{
	cdp_loader_opts o;

	cdp_loader_opts_init(&o);
	o.pool_path = pp;
	o.pool = pool;
	o.keys_path = kp;
	o.batch = b;
	o.seed = 11;
	return o;
}

static void test_pool(const char *name, int crop_h, int crop_w)
{
	cdp_aug_cfg aug = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = crop_h, .crop_w = crop_w };
	cdp_loader_opts o;
	cdp_pool pool;
	char keys[64], what[200];

	snprintf(keys, sizeof keys, "%s.keys", name);
	if (cdp_pool_open(pth(name), CDP_POOL_RDONLY, 0, &pool) != 0) {
		CHECK(0, "cannot open pool %s", name);
		return;
	}
	o = opts(&pool, pth(name), pth(keys), 4);
	masked = 0;
	snprintf(what, sizeof what, "%s, no augmentation", name);
	CHECK(same_batches(o, 1, what) > 0, "%s: no batch", what);
	o.aug = &aug;
	for (int t = 1; t <= 3; t += 2) {
		o.threads = t;
		snprintf(what, sizeof what, "%s, augmented, %d threads", name, t);
		CHECK(same_batches(o, 2, what) > 0, "%s: no batch", what);
	}
	o.val = 1;
	snprintf(what, sizeof what, "%s, validation", name);
	CHECK(same_batches(o, 1, what) > 0, "%s: no batch", what);
	CHECK(masked > 0, "%s: no batch came with batch.valid", name);
	cdp_pool_close(&pool);
}

/* The flipped record: CDP_ECRC naming it on both paths; with skip_bad the
 * same batches, in training and in validation. */
static void test_bad(void)
{
	cdp_aug_cfg aug = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = 12, .crop_w = 12 };
	char key[128] = "", err[512];
	cdp_loader_opts o;
	cdp_pool pool;
	FILE *f = fopen(pth("bad.key"), "r");
	pair p;
	int rc;

	if (!f || !fgets(key, sizeof key, f)) {
		CHECK(0, "no bad.key");
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	key[strcspn(key, "\n")] = '\0';
	if (cdp_pool_open(pth("bad"), CDP_POOL_RDONLY, 0, &pool) != 0) {
		CHECK(0, "cannot open the bad pool");
		return;
	}
	o = opts(&pool, pth("bad"), pth("a.keys"), 4);
	o.aug = &aug;
	if (pair_open(&p, o, err, sizeof err) == 0) {
		compare_epoch(&p, 0, "bad record", &rc);
		CHECK(rc == CDP_ECRC, "bad record: %d, want CDP_ECRC", rc);
		CHECK(strcmp(cdp_loader_errkey(p.host), key) == 0 &&
		      strcmp(cdp_loader_errkey(p.raw), key) == 0, "bad record: keys '%s' '%s', want '%s'",
		      cdp_loader_errkey(p.host), cdp_loader_errkey(p.raw), key);
	} else {
		CHECK(0, "bad pool: open: %s", err);
	}
	pair_close(&p);
	o.skip_bad = 1;
	CHECK(same_batches(o, 2, "bad record skipped") > 0, "no batch");
	o.val = 1;
	CHECK(same_batches(o, 1, "bad record blanked in validation") > 0, "no batch");
	cdp_pool_close(&pool);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 100 ? getenv("TMPDIR") : "/tmp";
	int rc;

	snprintf(dir, sizeof dir, "%s/cdploaderraw.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	if ((rc = build_fixtures()) != 0) {
		sh("rm -rf %s", dir);
		if (rc == 77)
			printf("SKIP: needs PYTHON with osgeo and lmdb, and cdp-tile, cdp-lmdbpack, "
			       "cdp-keyshuffle on PATH\n");
		else
			printf("cannot build the test pools in %s\n", dir);
		return rc == 77 ? 77 : 99;
	}
	if (!(be = cdp_backend_cpu(1))) {
		printf("cannot make the CPU backend\n");
		return 99;
	}
	test_pool("a", 12, 12);
	test_pool("w", 12, 10);
	test_pool("c", 6, 6);
	test_bad();
	be->destroy(be);
	sh("rm -rf %s", dir);
	return tap_done();
}
