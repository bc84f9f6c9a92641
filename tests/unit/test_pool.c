/* test_pool.c: creating and opening a pool, meta values and their CRC,
 * cdp_pool_info_load's validation, the per-source sums combined
 * (cdp_pool_source_stats) exactly as one accumulator over their samples,
 * and the class_names meta read back in class order (cdp_pool_class_names).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_pool.h"
#include "cdp_stats.h"
#include "tap.h"

static char dir[64];

static void rmdb(const char *d)
{
	char p[128];

	snprintf(p, sizeof p, "%s/data.mdb", d);
	unlink(p);
	snprintf(p, sizeof p, "%s/lock.mdb", d);
	unlink(p);
	rmdir(d);
}

/* Writes a raw meta value, bypassing the CRC line. */
static void raw_put(cdp_pool *p, const char *name, const char *val)
{
	MDB_txn *txn;
	MDB_val k = { strlen(name), (void *)name }, v = { strlen(val), (void *)val };

	CHECK_RC(mdb_txn_begin(p->env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_put(txn, p->meta, &k, &v, 0), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
}

static void put(cdp_pool *p, const char *name, const char *text)
{
	MDB_txn *txn;

	CHECK_RC(mdb_txn_begin(p->env, NULL, 0, &txn), 0);
	CHECK_RC(cdp_pool_meta_put(p, txn, name, text, strlen(text)), CDP_OK);
	CHECK_RC(mdb_txn_commit(txn), 0);
}

static void del(cdp_pool *p, const char *name)
{
	MDB_txn *txn;
	MDB_val k = { strlen(name), (void *)name };

	CHECK_RC(mdb_txn_begin(p->env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_del(txn, p->meta, &k, NULL), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
}

static void put_tile(cdp_pool *p, const char *key)
{
	MDB_txn *txn;
	MDB_val k = { strlen(key), (void *)key }, v = { 4, "tile" };

	CHECK_RC(mdb_txn_begin(p->env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_put(txn, p->tiles, &k, &v, 0), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
}

static void test_create_open(void)
{
	cdp_pool p, q;
	cdp_pool_info info;
	cdp_buf b = {0};
	char uuid[40], u2[40], sub[96];

	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 1 << 20, &p), CDP_OK);
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "uuid", &b), CDP_OK);
	CHECK_RC(cdp_meta_field((char *)b.p, "uuid", uuid, sizeof uuid), CDP_OK);
	CHECK(strlen(uuid) == 32 && strspn(uuid, "0123456789abcdef") == 32, "uuid '%s'", uuid);
	CHECK_RC(cdp_meta_field((char *)b.p, "uuid", u2, 10), CDP_ERANGE);
	CHECK_RC(cdp_meta_field((char *)b.p, "uu", u2, sizeof u2), MDB_NOTFOUND);
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "format", &b), CDP_OK);
	CHECK(strcmp((char *)b.p, "format=cdpool-pool\nversion=2\n") == 0 && b.len == 29,
	      "format value '%s'", (char *)b.p);
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "count", &b), MDB_NOTFOUND);
	cdp_pool_close(&p);

	/* Creating again keeps the uuid; readers see an empty pool. */
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE | CDP_POOL_NOSYNC, 0, &p), CDP_OK);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY | CDP_POOL_NORDAHEAD, 0, &q), CDP_OK);
	CHECK_RC(cdp_pool_info_load(&q, &info, NULL, 0), CDP_OK);
	CHECK(strcmp(info.uuid, uuid) == 0, "uuid changed on re-create: %s", info.uuid);
	CHECK(info.tiles == 0 && info.bands == 0 && info.band == NULL, "empty pool info");
	cdp_pool_info_free(&info);
	cdp_pool_close(&q);
	cdp_pool_close(&p);

	snprintf(sub, sizeof sub, "%s/none", dir);
	CHECK_RC(cdp_pool_open(sub, CDP_POOL_RDONLY, 0, &q), ENOENT);
	CHECK_RC(cdp_pool_open(sub, 0, 0, &q), ENOENT);
	CHECK_RC(cdp_pool_open(sub, CDP_POOL_RDONLY | CDP_POOL_CREATE, 0, &q), CDP_EINVAL);
	cdp_buf_free(&b);
}

static void test_meta(void)
{
	cdp_pool p;
	cdp_buf b = {0};
	MDB_txn *txn;

	CHECK_RC(cdp_pool_open(dir, 0, 0, &p), CDP_OK);
	put(&p, "x", "a=1\nbb=two\n");
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "x", &b), CDP_OK);
	CHECK(b.len == 11 && strcmp((char *)b.p, "a=1\nbb=two\n") == 0, "meta round trip");
	put(&p, "empty", "");
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "empty", &b), CDP_OK);
	CHECK(b.len == 0 && b.p[0] == '\0', "empty meta value");
	CHECK_RC(mdb_txn_begin(p.env, NULL, 0, &txn), 0);
	CHECK_RC(cdp_pool_meta_put(&p, txn, "y", "no newline", 10), CDP_EINVAL);
	CHECK_RC(cdp_pool_meta_get(&p, txn, "x", &b), CDP_OK);
	mdb_txn_abort(txn);

	/* Corruption: a flipped byte, a missing CRC line, a CRC of other bytes. */
	raw_put(&p, "x", "a=2\nbb=two\ncrc32=00000000\n");
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "x", &b), CDP_ECRC);
	raw_put(&p, "x", "a=1\n");
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "x", &b), CDP_ECRC);
	put(&p, "x", "a=1\n");
	CHECK_RC(cdp_pool_meta_get(&p, NULL, "x", &b), CDP_OK);
	{
		/* The same CRC line over a changed body. */
		MDB_txn *t;
		MDB_val k = { 1, "x" }, val;
		char buf[64];
		CHECK_RC(mdb_txn_begin(p.env, NULL, 0, &t), 0);
		CHECK_RC(mdb_get(t, p.meta, &k, &val), 0);
		memcpy(buf, val.mv_data, val.mv_size);
		buf[2] = '7';
		val.mv_data = buf;
		CHECK_RC(mdb_put(t, p.meta, &k, &val, 0), 0);
		CHECK_RC(mdb_txn_commit(t), 0);
		CHECK_RC(cdp_pool_meta_get(&p, NULL, "x", &b), CDP_ECRC);
	}
	cdp_pool_close(&p);
	cdp_buf_free(&b);
}

static void test_class_names(void)
{
	static const char *const bad[] = {
		"class.0=a\nclass.2=c\n", "class.1=a\n", "class.0=a\nclass.0=b\n", "class.0=\n",
		"klass.0=a\n", "class.=a\n", "class.0a=b\n", "class.0\n", "class.99999999999999999999=a\n",
	};
	char **v;
	size_t n;
	cdp_pool p;

	CHECK_RC(cdp_pool_class_names_parse("class.1=road\nclass.0=back ground\n\nclass.2=for\xc3\xaat",
	                                    &v, &n), CDP_OK);
	CHECK(n == 3 && strcmp(v[0], "back ground") == 0 && strcmp(v[1], "road") == 0 &&
	      strcmp(v[2], "for\xc3\xaat") == 0, "class names in class order");
	cdp_pool_class_names_free(v, n);
	CHECK_RC(cdp_pool_class_names_parse("", &v, &n), CDP_OK);
	CHECK(n == 0 && v == NULL, "no names");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = cdp_pool_class_names_parse(bad[i], &v, &n);
		CHECK(rc == CDP_EFORMAT && v == NULL && n == 0, "'%s': %d", bad[i], rc);
	}
	CHECK_RC(cdp_pool_open(dir, 0, 0, &p), CDP_OK);
	CHECK_RC(cdp_pool_class_names(&p, NULL, &v, &n), CDP_OK);
	CHECK(n == 0 && v == NULL, "a pool without class_names");
	put(&p, "class_names", "class.0=water\nclass.1=land\n");
	CHECK_RC(cdp_pool_class_names(&p, NULL, &v, &n), CDP_OK);
	CHECK(n == 2 && strcmp(v[1], "land") == 0, "the pool's class_names");
	cdp_pool_class_names_free(v, n);
	raw_put(&p, "class_names", "class.0=water\ncrc32=00000000\n");
	CHECK_RC(cdp_pool_class_names(&p, NULL, &v, &n), CDP_ECRC);
	CHECK(n == 0 && v == NULL, "nothing on error");
	cdp_pool_close(&p);
}

/* why must be want */
#define WHY(want) CHECK(strcmp(why, want) == 0, "why '%s', want '%s'", why, want)
/* cdp_pool_info_load on q fails with rc, saying want */
#define LOAD_SAYS(rc, want) do { \
	CHECK_RC(cdp_pool_info_load(&q, &info, why, sizeof why), rc); \
	WHY(want); \
} while (0)

static void test_info(void)
{
	char why[256];
	cdp_record shape = { .dtype = CDP_DT_U16, .bands = 2, .height = 8, .width = 4,
	                     .label_kind = CDP_LABEL_U8, .label_ignore = 255 }, back;
	uint16_t px[3] = { 10, 20, 30 };
	cdp_stats st;
	cdp_buf b = {0};
	cdp_pool p, q;
	cdp_pool_info info;

	CHECK_RC(cdp_pool_shape_format(&shape, &b), CDP_OK);
	CHECK(strcmp((char *)b.p, "dtype=u16\nbands=2\nheight=8\nwidth=4\nlabel=u8\nignore=255\n") == 0,
	      "shape text '%s'", (char *)b.p);
	CHECK_RC(cdp_pool_shape_parse((char *)b.p, &back), CDP_OK);
	CHECK(back.dtype == shape.dtype && back.bands == 2 && back.height == 8 && back.width == 4 &&
	      back.label_kind == CDP_LABEL_U8 && back.label_ignore == 255, "shape round trip");
	CHECK_RC(cdp_pool_shape_parse("dtype=u16\nbands=0\nheight=8\nwidth=4\nlabel=u8\nignore=1\n", &back),
	         CDP_EFORMAT);
	CHECK_RC(cdp_pool_shape_parse("dtype=u16\nbands=1\nheight=8\nwidth=4\nlabel=rgb\nignore=1\n", &back),
	         CDP_EFORMAT);
	/* The version-2 label kinds carry their length; the others may not. */
	{
		cdp_record v = shape;
		cdp_buf t = { 0 };

		v.label_kind = CDP_LABEL_F32;
		v.label_len = 3;
		v.label_ignore = 0;
		CHECK_RC(cdp_pool_shape_format(&v, &t), CDP_OK);
		CHECK(strstr((char *)t.p, "label=f32\nlabel_len=3\n") != NULL,
		      "f32 shape text '%s'", (char *)t.p);
		CHECK_RC(cdp_pool_shape_parse((char *)t.p, &back), CDP_OK);
		CHECK(back.label_kind == CDP_LABEL_F32 && back.label_len == 3,
		      "f32 shape round trip");
		cdp_buf_free(&t);
	}
	CHECK_RC(cdp_pool_shape_parse("dtype=u8\nbands=1\nheight=8\nwidth=4\nlabel=multi\nignore=0\n", &back),
	         CDP_EFORMAT);
	CHECK_RC(cdp_pool_shape_parse("dtype=u8\nbands=1\nheight=8\nwidth=4\nlabel=multi\nlabel_len=0\nignore=0\n", &back),
	         CDP_EFORMAT);
	CHECK_RC(cdp_pool_shape_parse("dtype=u8\nbands=1\nheight=8\nwidth=4\nlabel=u8\nlabel_len=2\nignore=0\n", &back),
	         CDP_EFORMAT);

	CHECK_RC(cdp_pool_open(dir, 0, 0, &p), CDP_OK);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &q), CDP_OK);
	put(&p, "shape", (char *)b.p);
	CHECK_RC(cdp_stats_init(&st, CDP_DT_U16, 2), CDP_OK);
	CHECK_RC(cdp_stats_add(&st, 0, px, NULL, 3), CDP_OK);
	CHECK_RC(cdp_stats_format(&st, &b), CDP_OK);
	put(&p, "stats", (char *)b.p);
	put(&p, "count", "tiles=2\n");
	put(&p, "source.000000", "index=0\npath=a.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	put(&p, "source.000001", "index=1\npath=b.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	put(&p, "sourcez", "not a source\n");
	/* count says 2, tiles holds 1: inconsistent. */
	put_tile(&p, "a_0_0");
	LOAD_SAYS(CDP_EFORMAT, "count record says 2 tiles but the pool holds 1");
	put_tile(&p, "a_0_1");
	/* an absent count counts 0; a 0 is no "unknown" */
	put(&p, "count", "tiles=0\n");
	LOAD_SAYS(CDP_EFORMAT, "count record says 0 tiles but the pool holds 2");
	put(&p, "count", "tiles=2\ntiles=2\n");
	LOAD_SAYS(CDP_EFORMAT, "count record: repeated key 'tiles'");
	del(&p, "count");
	LOAD_SAYS(CDP_EFORMAT, "no count record but the pool holds 2 tiles");
	put(&p, "count", "tiles=2\n");
	/* a repeated key in the shape: the first would have won */
	CHECK_RC(cdp_pool_shape_format(&shape, &b), CDP_OK);
	{
		char twice[256];
		snprintf(twice, sizeof twice, "%swidth=32\n", (char *)b.p);
		put(&p, "shape", twice);
		LOAD_SAYS(CDP_EFORMAT, "shape record: repeated key 'width'");
		CHECK_RC(cdp_pool_shape_parse(twice, &back), CDP_EFORMAT);
		snprintf(twice, sizeof twice, "%slabel_len=3\nlabel_len=3\n", (char *)b.p);
		CHECK_RC(cdp_pool_shape_parse(twice, &back), CDP_EFORMAT);
	}
	CHECK_RC(cdp_pool_shape_format(&shape, &b), CDP_OK);
	put(&p, "shape", (char *)b.p);
	/* sums no u16 samples give: named by band */
	put(&p, "stats", "dtype=u16\nbands=2\nband.1.count=3\nband.1.sum=60\nband.1.sumsq=1\n"
	    "band.1.min=10\nband.1.max=30\nband.1.mean=20\nband.1.std=8\nband.2.count=0\n"
	    "band.2.sum=0\nband.2.sumsq=0\nband.2.min=nan\nband.2.max=nan\nband.2.mean=nan\n"
	    "band.2.std=nan\n");
	LOAD_SAYS(CDP_EFORMAT, "stats record: band 1: sumsq 1 is below sum^2 / count (a negative variance)");
	CHECK_RC(cdp_stats_format(&st, &b), CDP_OK);
	put(&p, "stats", (char *)b.p);
	/* the sources records index: each parsed, none missing below the last */
	del(&p, "source.000000");
	LOAD_SAYS(CDP_EFORMAT, "meta 'source.000000' is missing (the pool describes 1 sources, "
	          "up to source.000001)");
	put(&p, "source.000000", "index=0\npath=a.tif\nwidth=0\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	LOAD_SAYS(CDP_EFORMAT, "meta 'source.000000': width=0: number out of range");
	put(&p, "source.000000", "index=0\npath=a.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	/* readers look source 1 up as source.000001: another spelling of
	 * its number would be read as missing; its text's index is its own */
	del(&p, "source.000001");
	put(&p, "source.1", "index=1\npath=b.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	LOAD_SAYS(CDP_EFORMAT, "meta 'source.1': not a source name (source.NNNNNN, at least six "
	          "digits, no extra leading zero)");
	del(&p, "source.1");
	put(&p, "source.0000001", "index=1\npath=b.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	LOAD_SAYS(CDP_EFORMAT, "meta 'source.0000001': not a source name (source.NNNNNN, at least six "
	          "digits, no extra leading zero)");
	del(&p, "source.0000001");
	put(&p, "source.000001", "index=0\npath=b.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	LOAD_SAYS(CDP_EFORMAT, "meta 'source.000001': index=0 is not the index of its name");
	put(&p, "source.000001", "index=1\npath=b.tif\nwidth=8\nheight=8\nbands=2\ndtype=u16\n"
	    "geotransform=0,1,0,0,0,-1\n");
	/* quoted meta bytes are escaped: a CR would hide the start of the line */
	put(&p, "count", "tiles=2\r\n");
	LOAD_SAYS(CDP_EFORMAT, "count record: tiles=2\\r is not a number");
	put(&p, "count", "tiles=2\n");
	CHECK_RC(cdp_pool_info_load(&q, &info, why, sizeof why), CDP_OK);
	CHECK(info.dtype == CDP_DT_U16 && info.bands == 2 && info.height == 8 && info.width == 4 &&
	      info.label_kind == CDP_LABEL_U8 && info.label_ignore == 255 && info.tiles == 2,
	      "info shape");
	CHECK(info.nsources == 2, "nsources %u", info.nsources);
	CHECK(info.band && info.band[0].count == 3 && info.band[0].mean == 20 &&
	      info.band[0].min == 10 && info.band[0].max == 30 &&
	      info.band[1].count == 0, "band info");
	cdp_pool_info_free(&info);

	/* Stale stats, stats of another shape, a corrupt value, a newer format. */
	st.stale = 1;
	CHECK_RC(cdp_stats_format(&st, &b), CDP_OK);
	put(&p, "stats", (char *)b.p);
	CHECK_RC(cdp_pool_info_load(&q, &info, why, sizeof why), CDP_EFORMAT);
	CHECK(strncmp(why, "stats record: stale", 19) == 0, "stale: '%s'", why);
	cdp_stats_free(&st);
	CHECK_RC(cdp_stats_init(&st, CDP_DT_U16, 3), CDP_OK);
	CHECK_RC(cdp_stats_format(&st, &b), CDP_OK);
	put(&p, "stats", (char *)b.p);
	CHECK_RC(cdp_pool_info_load(&q, &info, why, sizeof why), CDP_EFORMAT);
	LOAD_SAYS(CDP_EFORMAT, "stats record: dtype u16 and 3 bands, the shape's u16 and 2");
	raw_put(&p, "stats", "dtype=u16\n");
	LOAD_SAYS(CDP_ECRC, "stats record: checksum mismatch");
	del(&p, "stats");
	LOAD_SAYS(CDP_EFORMAT, "no stats record but the pool holds 2 tiles");
	put(&p, "format", "format=cdpool-pool\nversion=3\n");
	LOAD_SAYS(CDP_EVERSION, "pool version 3 is newer than this program reads (2)");
	cdp_pool_close(&q);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &q), CDP_EVERSION);
	put(&p, "format", "format=other\nversion=1\n");
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &q), CDP_EFORMAT);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 0, &q), CDP_EFORMAT);
	cdp_pool_close(&p);
	cdp_stats_free(&st);
	cdp_buf_free(&b);
}

/* An LMDB environment without our sub-databases is not a pool. */
static void test_foreign(void)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	cdp_pool p;

	CHECK_RC(mdb_env_create(&env), 0);
	CHECK_RC(mdb_env_set_maxdbs(env, 2), 0);
	CHECK_RC(mdb_env_open(env, dir, 0, 0644), 0);
	CHECK_RC(mdb_txn_begin(env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_dbi_open(txn, "tiles", MDB_CREATE, &dbi), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &p), CDP_ELMDB);
}

/* A data.mdb cut below its last page is refused at open with both sizes,
 * in either mode, instead of faulting on the first missing page. */
static void test_truncated(void)
{
	char data[128], why[128], want[128];
	cdp_pool p;
	char key[32];
	struct stat st;
	off_t cut;

	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 1 << 24, &p), CDP_OK);
	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof key, "t_%d_0", i);
		put_tile(&p, key);
	}
	cdp_pool_close(&p);
	snprintf(data, sizeof data, "%s/data.mdb", dir);
	CHECK(stat(data, &st) == 0 && st.st_size > 8 * 4096, "pool of %lld bytes",
	      (long long)st.st_size);
	cut = st.st_size / 2 / 4096 * 4096;
	CHECK(truncate(data, cut) == 0, "truncate");
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &p), CDP_ETRUNC);
	CHECK(p.env == NULL && p.file_bytes == (uint64_t)cut && p.need_bytes > p.file_bytes,
	      "sizes %llu and %llu", (unsigned long long)p.file_bytes,
	      (unsigned long long)p.need_bytes);
	snprintf(want, sizeof want, "data.mdb is truncated: %lld bytes, its last page ends at byte %llu",
	         (long long)cut, (unsigned long long)p.need_bytes);
	CHECK(strcmp(cdp_pool_strerror(&p, CDP_ETRUNC, why, sizeof why), want) == 0,
	      "phrase '%s'", why);
	CHECK(strcmp(cdp_pool_strerror(&p, ENOENT, why, sizeof why), strerror(ENOENT)) == 0,
	      "other codes keep cdp_strerror");
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 0, &p), CDP_ETRUNC);
	CHECK(stat(data, &st) == 0 && st.st_size == cut, "a writable open changed the file");
}

/* source i's srcstats text of samples x[n] (u16, one band) */
static void put_source(cdp_pool *p, uint32_t i, const uint16_t *x, size_t n, int stale)
{
	cdp_stats st;
	cdp_buf b = {0};
	char name[40];

	CHECK_RC(cdp_stats_init(&st, CDP_DT_U16, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&st, 0, x, NULL, n), CDP_OK);
	st.stale = stale;
	CHECK_RC(cdp_stats_format(&st, &b), CDP_OK);
	cdp_pool_srcstats_name(i, name, sizeof name);
	put(p, name, (const char *)b.p);
	cdp_stats_free(&st);
	cdp_buf_free(&b);
}

static void test_source_stats(void)
{
	char why[256];
	const uint16_t a[3] = { 1, 2, 65535 }, b[2] = { 7, 9 };
	cdp_stats all, got;
	cdp_buf t1 = {0}, t2 = {0};
	cdp_pool p;
	uint32_t missing = 0;

	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 0, &p), CDP_OK);
	put_source(&p, 0, a, 3, 0);
	put_source(&p, 2, b, 2, 0);
	put_source(&p, 3, b, 2, 1);
	CHECK_RC(cdp_stats_init(&all, CDP_DT_U16, 1), CDP_OK);
	CHECK_RC(cdp_stats_add(&all, 0, a, NULL, 3), CDP_OK);
	CHECK_RC(cdp_stats_add(&all, 0, b, NULL, 2), CDP_OK);
	/* any order, a source named twice counted once */
	CHECK_RC(cdp_pool_source_stats(&p, NULL, (const uint32_t[]){ 2, 0, 2 }, 3, &got, &missing, why, sizeof why),
	         CDP_OK);
	CHECK_RC(cdp_stats_format(&all, &t1), CDP_OK);
	CHECK_RC(cdp_stats_format(&got, &t2), CDP_OK);
	CHECK(strcmp((char *)t1.p, (char *)t2.p) == 0, "combined sums '%s', want '%s'",
	      (char *)t2.p, (char *)t1.p);
	cdp_stats_free(&got);
	/* source 1 has none (an older pool's): named */
	CHECK_RC(cdp_pool_source_stats(&p, NULL, (const uint32_t[]){ 0, 1, 2 }, 3, &got, &missing, why, sizeof why),
	         MDB_NOTFOUND);
	CHECK(missing == 1 && got.b == NULL, "the source without sums: %u", missing);
	CHECK_RC(cdp_pool_source_stats(&p, NULL, (const uint32_t[]){ 3 }, 1, &got, NULL, why, sizeof why),
	         CDP_EFORMAT);
	WHY("meta 'srcstats.000003': stale (a cdp-lmdbpack --replace has not finished)");
	/* sums of source 4 no u16 samples give, named by source and band */
	put(&p, "srcstats.000004", "dtype=u16\nbands=1\nband.1.count=2\nband.1.sum=999999999\n"
	    "band.1.sumsq=130\nband.1.min=7\nband.1.max=9\nband.1.mean=8\nband.1.std=1\n");
	CHECK_RC(cdp_pool_source_stats(&p, NULL, (const uint32_t[]){ 0, 4 }, 2, &got, NULL, why,
	                               sizeof why), CDP_EFORMAT);
	WHY("meta 'srcstats.000004': band 1: sum 999999999 is outside count * min .. count * max "
	    "(2 * 7 .. 9)");
	CHECK_RC(cdp_pool_source_stats(&p, NULL, NULL, 0, &got, NULL, why, sizeof why), CDP_EINVAL);
	cdp_stats_free(&all);
	cdp_buf_free(&t1);
	cdp_buf_free(&t2);
	cdp_pool_close(&p);
}

/* A data.mdb whose stored map size this process cannot map (LMDB writes
 * its first meta pages, size included, before its mmap fails, and never
 * lowers the size later): a pool written into it still opens read-only,
 * mapping the file's own size, and reads back. */
static void test_huge_map(void)
{
	const size_t huge = (size_t)1 << 60;
	MDB_env *env;
	cdp_pool p;
	cdp_pool_info info;

	if (cdp_lmdb_can_map(huge) == CDP_OK) {
		printf("note: an exabyte map fits this address space; huge-map case skipped\n");
		return;
	}
	CHECK_RC(cdp_lmdb_can_map(1 << 20), CDP_OK);
	CHECK_RC(mdb_env_create(&env), 0);
	CHECK_RC(mdb_env_set_maxdbs(env, 2), 0);
	CHECK_RC(mdb_env_set_mapsize(env, huge), 0);
	CHECK_RC(mdb_env_open(env, dir, 0, 0644), ENOMEM);
	mdb_env_close(env);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_CREATE, 1 << 20, &p), CDP_OK);
	put(&p, "count", "tiles=0\n");
	cdp_pool_close(&p);
	CHECK_RC(cdp_pool_open(dir, CDP_POOL_RDONLY, 0, &p), CDP_OK);
	CHECK_RC(cdp_pool_info_load(&p, &info, NULL, 0), CDP_OK);
	CHECK(info.tiles == 0 && strlen(info.uuid) == 32, "tiles %llu uuid '%s'",
	      (unsigned long long)info.tiles, info.uuid);
	cdp_pool_info_free(&info);
	cdp_pool_close(&p);
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/cdp_test_pool.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	test_create_open();
	test_meta();
	test_class_names();
	test_info();
	rmdb(dir);
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_foreign();
	rmdb(dir);
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_truncated();
	rmdb(dir);
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_source_stats();
	rmdb(dir);
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_huge_map();
	rmdb(dir);
	return tap_done();
}
