/* test_loader_sources.c: cdp_loader_sources (loader_sources.c), the pool
 * sources of a pointer file's records, against every record's header
 * read here, on pools built by the real tools:
 *  - cdp-tile of three scenes named a, a_1 and b (--name; "a" a prefix of
 *    "a_1": a_1_0 is a tile of a, a_1_0_0 one of a_1): every list,
 *    all keys and the list without a_1 (--val-by), finds its sources
 *    from the key names and reads no record header beyond open's sample;
 *  - cdp-lmdbpack --list chips, named by their whole key, among them c,
 *    c_1_0 and c_2_0 (tile-form stems: scene c is also a source's name),
 *    whose records alone are read; copy mode reads none (open read all);
 *  - one scene: no header read;
 *  - the stream of the first pool with the keys of a and b swapped (a
 *    pool whose records' sources are not the ones their keys name): the
 *    sample at open disagrees, and every other record is read; the list
 *    of a's keys comes from source b.
 *
 * Needs $PYTHON (osgeo, numpy) and cdp-tile, cdp-lmdbpack, cdp-keyshuffle
 * on PATH (make check puts them there); skips (77) without them.
 */
#define _GNU_SOURCE
#include "loader.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_ptrfile.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* Swaps the keys of scenes a and b in a record stream (stdin to stdout),
 * each frame's crc32 made anew: records of a under b's keys. */
static const char swap_py[] =
	"import re, struct, sys, zlib\n"
	"i, o = sys.stdin.buffer.read(), sys.stdout.buffer\n"
	"o.write(i[:8]); p = 8\n"
	"while p < len(i):\n"
	"    t, z, nl, bl = struct.unpack_from('<BBHI', i, p)\n"
	"    name = i[p + 8:p + 8 + nl]; body = i[p + 8 + nl:p + 8 + nl + bl]\n"
	"    m = re.fullmatch(rb'([ab])(_[0-9]+_[0-9]+)', name)\n"
	"    if chr(t) == 'R' and m:\n"
	"        name = (b'b' if m.group(1) == b'a' else b'a') + m.group(2)\n"
	"    f = struct.pack('<BBHI', t, z, len(name), bl) + name + body\n"
	"    o.write(f + struct.pack('<I', zlib.crc32(f) & 0xffffffff))\n"
	"    p += 12 + nl + bl\n";

/* The sources of keys' records, every header read: sorted, distinct. */
static size_t oracle(const char *pool_path, const char *keys, uint32_t *out, size_t cap)
{
	cdp_keylist kl;
	cdp_pool p;
	MDB_txn *txn;
	cdp_record r;
	size_t n = 0;

	if (cdp_pool_open(pool_path, CDP_POOL_RDONLY, 0, &p) != 0)
		return 0;
	if (cdp_ptrfile_read(keys, &kl, NULL) != 0 || mdb_txn_begin(p.env, NULL, MDB_RDONLY, &txn)) {
		cdp_pool_close(&p);
		return 0;
	}
	for (size_t i = 0; i < kl.count; i++) {
		MDB_val k = { kl.lens[i], kl.keys[i] }, v;
		size_t j;
		if (mdb_get(txn, p.tiles, &k, &v) || cdp_record_peek(v.mv_data, v.mv_size, &r))
			continue;
		for (j = 0; j < n && out[j] != r.source; j++)
			;
		if (j == n && n < cap)
			out[n++] = r.source;
	}
	mdb_txn_abort(txn);
	cdp_keylist_free(&kl);
	cdp_pool_close(&p);
	for (size_t i = 1; i < n; i++)      /* insertion sort */
		for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
			uint32_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

/* Opens a loader on pool and keys, checks its sources against the
 * oracle's; returns the headers it read (or (size_t)-1), *n the keys. */
static size_t check(const char *what, const char *pool_path, const char *keys, int mode,
                    size_t want_n, size_t *nkeys)
{
	uint32_t want[256], *got = NULL;
	size_t nw = oracle(pool_path, keys, want, 256), ng = 0, peeked = (size_t)-1;
	cdp_loader_opts o;
	cdp_loader_info in;
	cdp_loader *l = NULL;
	char err[512];
	int rc;

	cdp_loader_opts_init(&o);
	o.pool_path = pool_path;
	o.keys_path = keys;
	o.mode = mode;
	if ((rc = cdp_loader_open(&o, &l, err, sizeof err)) != 0) {
		CHECK(0, "%s: open: %s", what, err);
		return peeked;
	}
	cdp_loader_get_info(l, &in);
	*nkeys = in.count;
	rc = cdp_loader_sources(l, &got, &ng, &peeked);
	CHECK(rc == CDP_OK, "%s: cdp_loader_sources: %s", what, cdp_strerror(rc));
	CHECK(nw == want_n, "%s: the records hold %zu sources, the test meant %zu", what, nw,
	      want_n);
	CHECK(ng == nw && (nw == 0 || memcmp(got, want, nw * sizeof *got) == 0),
	      "%s: %zu sources (first %u), the records' %zu (first %u)", what, ng,
	      ng ? got[0] : 0, nw, nw ? want[0] : 0);
	free(got);
	cdp_loader_close(l);
	return peeked;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 100 ? getenv("TMPDIR") : "/tmp";
	const char *py = fixture_python(), *src = fixture_srcdir();
	char mk[400];
	size_t n, peeked;
	FILE *f;

	snprintf(dir, sizeof dir, "%s/cdpsources.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	if (sh("command -v cdp-tile cdp-lmdbpack cdp-keyshuffle >/dev/null") ||
	    sh("%s -c 'import numpy; from osgeo import gdal' 2>/dev/null", py)) {
		sh("rm -rf %s", dir);
		printf("SKIP: needs PYTHON with osgeo and cdp-tile, cdp-lmdbpack, cdp-keyshuffle on PATH\n");
		return 77;
	}
	snprintf(mk, sizeof mk, "%s %s/tests/tools/mkraster.py", py, src);
	/* scenes a and b of 100 tiles, a_1 of 64; s alone: 100 tiles; 70 chips */
	if (sh("%s %s --width 80 --height 80 --seed 1 && %s %s --width 64 --height 64 --seed 2 && "
	       "%s %s --width 80 --height 80 --seed 3 && %s %s --width 80 --height 80 --seed 4 && "
	       "%s %s --width 8 --height 8 --seed 5", mk, pth("r1.tif"), mk, pth("r2.tif"), mk,
	       pth("r3.tif"), mk, pth("s.tif"), mk, pth("chip.tif")) ||
	    sh("cdp-tile -q --size 8 --name a --name a_1 --name b %s %s %s > %s", pth("r1.tif"),
	       pth("r2.tif"), pth("r3.tif"), pth("abc.stream")) ||
	    sh("cdp-lmdbpack -q %s < %s", pth("tiles"), pth("abc.stream")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("all.keys"), pth("tiles")) ||
	    sh("cdp-keyshuffle -q --val-by a_1 --val-out %s -o %s %s", pth("a_1.keys"),
	       pth("ab.keys"), pth("tiles")) ||
	    sh("cdp-tile -q --size 8 %s | cdp-lmdbpack -q %s", pth("s.tif"), pth("one")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("one.keys"), pth("one")))
		goto broken;
	if (!(f = fopen(pth("swap.py"), "w")))
		goto broken;
	fputs(swap_py, f);
	fclose(f);
	if (sh("%s %s < %s | cdp-lmdbpack -q %s", py, pth("swap.py"), pth("abc.stream"),
	       pth("swapped")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("swapped.keys"), pth("swapped")) ||
	    sh("cdp-keyshuffle -q --val-by a --val-out %s -o %s %s", pth("swapped_a.keys"),
	       pth("swapped_rest.keys"), pth("swapped")))
		goto broken;
	if (!(f = fopen(pth("chips.txt"), "w")))
		goto broken;
	fprintf(f, "c.tif 0\nc_1_0.tif 1\nc_2_0.tif 0\nf_3_4.tif 1\n");
	for (int i = 0; i < 66; i++)
		fprintf(f, "e_%03d.tif %d\n", i, i % 2);
	fclose(f);
	if (sh("cd %s && for s in c c_1_0 c_2_0 f_3_4 $(seq -f e_%%03g 0 65); do "
	       "cp chip.tif $s.tif || exit 1; done", dir) ||
	    sh("cdp-lmdbpack -q --list %s %s", pth("chips.txt"), pth("chips")) ||
	    sh("cdp-keyshuffle -q -o %s %s", pth("chips.keys"), pth("chips")))
		goto broken;

	peeked = check("scenes a, a_1, b", pth("tiles"), pth("all.keys"), CDP_LOAD_POOL, 3, &n);
	CHECK(n == 264 && peeked == 0, "scenes a, a_1, b: %zu keys, %zu headers read (want 0)",
	      n, peeked);
	peeked = check("scenes a, b (a_1 held out)", pth("tiles"), pth("ab.keys"), CDP_LOAD_POOL,
	               2, &n);
	CHECK(n == 200 && peeked == 0, "scenes a, b: %zu keys, %zu headers read (want 0)", n,
	      peeked);
	peeked = check("scene a_1", pth("tiles"), pth("a_1.keys"), CDP_LOAD_POOL, 1, &n);
	CHECK(n == 64 && peeked == 0, "scene a_1: %zu keys, %zu headers read", n, peeked);
	peeked = check("one scene", pth("one"), pth("one.keys"), CDP_LOAD_POOL, 1, &n);
	CHECK(n == 100 && peeked == 0, "one scene: %zu keys, %zu headers read (want 0)", n,
	      peeked);
	peeked = check("chips", pth("chips"), pth("chips.keys"), CDP_LOAD_POOL, 70, &n);
	CHECK(n == 70 && peeked <= 2, "chips: %zu keys, %zu headers read (want those of c_1_0 "
	      "and c_2_0 at most)", n, peeked);
	peeked = check("chips, copy mode", pth("chips"), pth("chips.keys"), CDP_LOAD_COPY, 70, &n);
	CHECK(peeked == 0, "chips, copy mode: %zu headers read again", peeked);
	peeked = check("keys naming other sources", pth("swapped"), pth("swapped.keys"),
	               CDP_LOAD_POOL, 3, &n);
	CHECK(n == 264 && peeked == 264 - 64, "keys naming other sources: %zu keys, %zu headers "
	      "read (want every one but the 64 open read)", n, peeked);
	/* scene a's keys hold b's records: by their names the source would be a */
	peeked = check("keys of a holding b's records", pth("swapped"), pth("swapped_a.keys"),
	               CDP_LOAD_POOL, 1, &n);
	CHECK(n == 100 && peeked == 100 - 64, "keys of a holding b's records: %zu keys, %zu "
	      "headers read (want every one but the 64 open read)", n, peeked);
	sh("rm -rf %s", dir);
	return tap_done();
broken:
	printf("cannot build the test pools in %s\n", dir);
	return 99;
}
