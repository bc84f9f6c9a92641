/* test_loader_sample.c: the loader's sample path (loader_sample.c,
 * loader_conv.c) on records larger than one conversion step.
 *
 * Checked:
 *  - every uint8 kernel this CPU runs (plain, SSE2, AVX2, AVX-512) equals
 *    the scalar ((float)x - m) * k bit for bit, for lengths 0..300 and
 *    larger, output alignments 0..15 floats, plain and streaming stores,
 *    with and without a prefetch pointer;
 *  - on a pool of 100x100 tiles (10000 pixels a band: two conversion steps,
 *    the second partial) every pixel and label served equals the record
 *    decoded by cdp_record_decode and standardized by hand, invalid pixels
 *    0 with the ignore label;
 *  - a byte flipped in any part of such a record (a header field the
 *    header checks accept, the first and the last conversion step of the
 *    image, the label, the mask, the stored CRC) is CDP_ECRC naming the
 *    key, with the CRC checked on every read and with verify_once.
 *
 * The pool part needs $PYTHON (osgeo, numpy) and cdp-tile, cdp-lmdbpack,
 * cdp-keyshuffle on PATH; without them only the kernels are checked.
 */
#define _GNU_SOURCE
#include "loader_int.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_rng.h"
#include "tap.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"


static void test_kernels(void)
{
	enum { MAXN = 70000 };
	uint8_t *s = malloc(MAXN + 64), *next = malloc(MAXN);
	float *want = malloc((MAXN + 16) * sizeof(float)), *got = malloc((MAXN + 16) * sizeof(float));
	static const size_t big[] = { 1000, 4093, 8192, 10000, 65536, MAXN };
	cdp_rng rng;
	int tested = 0;

	cdp_rng_seed(&rng, 5);
	for (size_t i = 0; i < MAXN + 64; i++)
		s[i] = (uint8_t)cdp_rng_next(&rng);
	memset(next, 7, MAXN);
	for (int which = CDP_CONV_PLAIN; which <= CDP_CONV_AVX512; which++) {
		const char *name = NULL;
		cdp_loader_u8_fn f = cdp_loader_u8_kernel(which, &name);
		int bad = 0;
		if (!f) {
			printf("# conversion kernel %d: not on this CPU, skipped\n", which);
			continue;
		}
		tested++;
		for (int t = 0; t < 420; t++) {
			size_t n = t <= 300 ? (size_t)t : big[t % 6], off = (size_t)cdp_rng_below(&rng, 16);
			size_t so = (size_t)cdp_rng_below(&rng, 64);
			float m = (float)(cdp_rng_double(&rng) * 255), k = (float)(0.01 + cdp_rng_double(&rng));
			int stream = t & 1;
			for (size_t i = 0; i < n; i++)
				want[i] = ((float)s[so + i] - m) * k;
			memset(got, 0xff, (n + 16) * sizeof(float));
			f(s + so, got + off, n, m, k, stream, t & 2 ? next : NULL);
			cdp_loader_conv_fence();
			if (memcmp(got + off, want, n * sizeof(float)) != 0 && bad++ < 3)
				CHECK(0, "%s: n %zu, output offset %zu, stream %d differs from scalar", name, n, off, stream);
			/* nothing written past the end */
			if (got[off + n] == got[off + n] && bad++ < 3)
				CHECK(0, "%s: n %zu wrote past its end", name, n);
		}
		CHECK(bad == 0, "%s kernel: %d mismatches", name, bad);
		if (!bad)
			printf("# conversion kernel %s equals the scalar expression\n", name);
	}
	CHECK(tested >= 1 && cdp_loader_u8_kernel(CDP_CONV_AUTO, NULL) != NULL, "no kernel runs here");
#if defined(__x86_64__)
	CHECK(cdp_loader_u8_kernel(CDP_CONV_SSE2, NULL) != NULL, "SSE2 is always there on x86-64");
#endif
	free(s); free(next); free(want); free(got);
}

/* The pool: 200x200 u8, 3 bands, nodata (masks), u8 labels, 100x100 tiles. */
static int build_pool(void)
{
	const char *py = fixture_python(), *src = fixture_srcdir();

	if (sh("command -v cdp-tile cdp-lmdbpack cdp-keyshuffle >/dev/null") ||
	    sh("%s -c 'import numpy; from osgeo import gdal' 2>/dev/null", py))
		return 77;
	if (sh("%s %s/tests/tools/mkraster.py %s --width 200 --height 200 --bands 3 --dtype u8 "
	       "--nodata 0 --nodata-frac 0.02 --seed 11 --label %s --classes 5", py, src, pth("s.tif"),
	       pth("s_lab.tif")) ||
	    sh("cdp-tile -q --size 100 --label %s %s | cdp-lmdbpack -q %s", pth("s_lab.tif"),
	       pth("s.tif"), pth("pool")) ||
	    sh("cdp-keyshuffle -q --seed 1 -o %s %s", pth("keys"), pth("pool")))
		return 1;
	return 0;
}

/* All keys in one validation batch (pointer-file order). */
static cdp_loader *open_val(const char *pool_path, cdp_pool *p, int verify_once)
{
	cdp_loader_opts o;
	cdp_loader *l = NULL;
	char err[512];
	int rc;

	cdp_loader_opts_init(&o);
	o.pool_path = pool_path;
	o.pool = p;
	o.keys_path = pth("keys");
	o.batch = 4;
	o.val = 1;
	o.verify_once = verify_once;
	rc = cdp_loader_open(&o, &l, err, sizeof err);
	CHECK(rc == 0, "open '%s': %s", pool_path, err);
	return rc ? NULL : l;
}

/* The value of key in p, copied into v. */
static int value_of(cdp_pool *p, const char *key, cdp_buf *v)
{
	MDB_txn *txn;
	MDB_val k = { strlen(key), (void *)key }, d;
	int rc;

	if ((rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn)) != 0)
		return rc;
	if ((rc = mdb_get(txn, p->tiles, &k, &d)) == 0 && (rc = cdp_buf_reserve(v, d.mv_size)) == 0) {
		memcpy(v->p, d.mv_data, d.mv_size);
		v->len = d.mv_size;
	}
	mdb_txn_abort(txn);
	return rc;
}

static void test_values(cdp_pool *p)
{
	cdp_loader *l = open_val(pth("pool"), p, 0);
	cdp_loader_info in;
	cdp_buf v = {0}, sc = {0};
	cdp_batch b;
	int masked = 0;

	if (!l)
		return;
	cdp_loader_get_info(l, &in);
	cdp_loader_start_epoch(l, 0, 0);
	CHECK_RC(cdp_loader_next(l, &b), 0);
	CHECK(b.n == 4 && b.c == 3 && b.h == 100 && b.w == 100 && b.label, "batch %d x %dx%dx%d", b.n, b.c,
	      b.h, b.w);
	for (int i = 0; i < b.n && b.n == 4; i++) {
		const char *key = cdp_loader_key(l, b.index[i]);
		size_t hw = 10000, bad = 0;
		cdp_record r;
		if (value_of(p, key, &v) || cdp_record_decode(v.p, v.len, &r, &sc) || !r.mask) {
			CHECK(0, "record '%s' does not decode or has no mask", key);
			continue;
		}
		for (size_t q = 0; q < hw; q++) {
			int valid = r.mask[q] != 0;
			masked += !valid;
			for (int c = 0; c < 3; c++) {
				const cdp_band_info *st = &in.pool->band[c];
				float m = (float)st->mean, k = st->std > 0 ? (float)(1.0 / st->std) : 1.0f;
				float want = valid ? ((float)((const uint8_t *)r.image)[c * hw + q] - m) * k : 0.0f;
				float got = b.image[((size_t)i * 3 + c) * hw + q];
				bad += memcmp(&got, &want, sizeof got) != 0;
			}
			bad += b.label[(size_t)i * hw + q] !=
			       (valid ? (int32_t)((const uint8_t *)r.label)[q] : in.ignore);
		}
		CHECK(bad == 0, "record '%s': %zu pixels or labels differ from the decoded record", key, bad);
	}
	CHECK(masked > 0, "the fixture has no invalid pixels");
	cdp_loader_close(l);
	cdp_buf_free(&v);
	cdp_buf_free(&sc);
}

/* Flips the byte at offset `at` of key's value in a fresh copy of the
 * pool (the value located by its first 512 bytes, unique by the tile's
 * offsets); 0 when exactly one copy was found and flipped. */
static int corrupt(const cdp_buf *v, size_t at)
{
	FILE *f;
	long size;
	uint8_t *data, *hit;
	int rc = 1;

	if (sh("rm -rf %s && cp -r %s %s", pth("bad"), pth("pool"), pth("bad")) ||
	    !(f = fopen(pth("bad/data.mdb"), "r+b")))
		return 1;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	data = malloc((size_t)size);
	rewind(f);
	if (data && fread(data, 1, (size_t)size, f) == (size_t)size &&
	    (hit = memmem(data, (size_t)size, v->p, 512)) &&
	    !memmem(hit + 1, (size_t)(data + size - hit - 1), v->p, 512)) {
		fseek(f, (long)(hit - data) + (long)at, SEEK_SET);
		fputc(hit[at] ^ 0x21, f);
		rc = 0;
	}
	if (fclose(f))
		rc = 1;
	free(data);
	return rc;
}

static void test_corrupt(cdp_pool *p)
{
	size_t isz = 3 * 10000, lsz = 10000;
	cdp_keylist kl;
	cdp_buf v = {0};
	size_t line;

	if (cdp_ptrfile_read(pth("keys"), &kl, &line) != 0 || kl.count < 4 ||
	    value_of(p, kl.keys[2], &v) != 0) {
		CHECK(0, "cannot read the fixture's keys");
		return;
	}
	CHECK(v.len == 160 + isz + 2 * lsz + 4, "fixture record is %zu bytes, want image, label, mask",
	      v.len);
	const struct { const char *what; size_t at; } where[] = {
		{ "x offset in the header", 24 },
		{ "first image step", 160 + 100 },
		{ "last image step", 160 + isz - 3 },
		{ "label", 160 + isz + 17 },
		{ "mask", 160 + isz + lsz + 5000 },
		{ "stored CRC", v.len - 2 },
	};
	for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
		cdp_pool bp;
		if (corrupt(&v, where[w].at) != 0) {
			CHECK(0, "cannot corrupt the %s of '%s'", where[w].what, kl.keys[2]);
			continue;
		}
		if (cdp_pool_open(pth("bad"), CDP_POOL_RDONLY, 0, &bp) != 0) {
			CHECK(0, "cannot open the corrupted copy");
			continue;
		}
		for (int once = 0; once <= 1; once++) {
			cdp_loader *l = open_val(pth("bad"), &bp, once);
			cdp_batch b;
			int rc;
			if (!l)
				continue;
			cdp_loader_start_epoch(l, 0, 0);
			rc = cdp_loader_next(l, &b);
			CHECK(rc == CDP_ECRC && strcmp(cdp_loader_errkey(l), kl.keys[2]) == 0,
			      "%s flipped, verify_once %d: %d (%s), want CDP_ECRC naming '%s'", where[w].what,
			      once, rc, cdp_loader_error(l), kl.keys[2]);
			cdp_loader_close(l);
		}
		cdp_pool_close(&bp);
	}
	cdp_keylist_free(&kl);
	cdp_buf_free(&v);
}

/* Value targets travel with the image (loader.h, loader_sample.c): a pool
 * whose target is its one band, standardized alike, gives targets equal to
 * the image bit for bit through flips, quarter turns, a crop and the warp
 * (bilinear), and NaN exactly where the warp read outside the tile (the
 * image 0 there); without augmentation they are the band's values. */
static void test_targets(void)
{
	const char *py = fixture_python();
	static const double mean[1] = { 0.25 }, sd[1] = { 0.5 };
	cdp_aug_cfg a = { 0 };
	cdp_loader_opts o;
	cdp_loader *l = NULL;
	cdp_loader_info li;
	cdp_batch b;
	char err[512];
	size_t n, nan = 0, same = 0;

	if (sh("%s -c 'import numpy as np; from osgeo import gdal; d = gdal.GetDriverByName(\"GTiff\")"
	       ".Create(\"%s\", 64, 64, 1, gdal.GDT_Float32); d.SetGeoTransform((0, 1, 0, 0, 0, -1)); "
	       "d.GetRasterBand(1).WriteArray(np.random.default_rng(5).random((64, 64)))'",
	       py, pth("v.tif")) || sh("cp %s %s", pth("v.tif"), pth("v_t.tif")) ||
	    sh("cdp-tile -q --size 32 --label-suffix _t %s | cdp-lmdbpack -q %s", pth("v.tif"),
	       pth("vpool")) || sh("cdp-keyshuffle -q --seed 1 -o %s %s", pth("vkeys"), pth("vpool"))) {
		CHECK(0, "cannot build the value pool");
		return;
	}
	a.hflip = a.vflip = a.rot90 = 1;
	a.crop_h = a.crop_w = 24;
	a.scale = 0.5f;
	a.rotate = 40;
	a.scale_p = a.rotate_p = 1;
	for (int aug = 0; aug < 2; aug++) {
		cdp_loader_opts_init(&o);
		o.pool_path = pth("vpool");
		o.keys_path = pth("vkeys");
		o.batch = 4;
		o.seed = 3;
		o.aug = aug ? &a : NULL;
		if (cdp_loader_open(&o, &l, err, sizeof err) != 0) {
			CHECK(0, "open the value pool: %s", err);
			return;
		}
		cdp_loader_get_info(l, &li);
		CHECK(li.targets == 1 && li.label_kind == CDP_LABEL_F32, "a value pool: %d targets",
		      li.targets);
		CHECK(cdp_loader_set_standardization(l, mean, sd) == 0 &&
		      cdp_loader_set_target_standardization(l, mean, sd) == 0, "standardizations set");
		for (uint64_t e = 0; e < 3; e++) {
			CHECK(cdp_loader_start_epoch(l, e, 0) == 0 && cdp_loader_next(l, &b) == 0,
			      "a batch of epoch %" PRIu64, e);
			CHECK(b.target && !b.label && b.targets == 1, "targets as floats, no labels");
			n = (size_t)b.n * b.h * b.w;
			for (size_t i = 0; i < n; i++) {
				if (isnan(b.target[i])) {
					nan++;
					CHECK(b.image[i] == 0.0f, "a target NaN where the image is %g", b.image[i]);
				} else if (b.image[i] == b.target[i]) {
					same++;
				} else {
					CHECK(0, "pixel %zu: target %.9g, image %.9g", i, b.target[i], b.image[i]);
					break;
				}
			}
		}
		cdp_loader_close(l);
		CHECK(aug ? nan > 0 : nan == 0, "%s: %zu NaN targets", aug ? "the warp" : "no augmentation",
		      nan);
		CHECK(same > 0, "%zu targets equal to the image", same);
		nan = same = 0;
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	cdp_pool pool;
	int rc;

	test_kernels();
	snprintf(dir, sizeof dir, "%s/cdp_test_loader_sample.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	rc = build_pool();
	if (rc == 77) {
		printf("# no python with osgeo/numpy or no cdpool tools: pool checks skipped\n");
	} else if (rc) {
		CHECK(0, "cannot build the fixture pool in %s", dir);
	} else if (cdp_pool_open(pth("pool"), CDP_POOL_RDONLY, 0, &pool) == 0) {
		test_values(&pool);
		test_corrupt(&pool);
		cdp_pool_close(&pool);
		test_targets();
	} else {
		CHECK(0, "cannot open the fixture pool");
	}
	sh("rm -rf %s", dir);
	return tap_done();
}
