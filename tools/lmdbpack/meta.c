/* meta.c: cdp-lmdbpack's batch hooks (pack_int.h), which keep the pool's
 * meta equal to what its committed records imply.
 *
 * Each batch is one write txn (cdp_lmdb.h's batched writer):
 *  - prepare: learns the sources committed so far (source.N values past the
 *    ones already known, by any writer), gives each source of the batch the
 *    index of a pool source with the same description (every field but the
 *    index: a path alone may name another raster from another directory,
 *    or the same raster tiled with other bands or labels) or appends a new
 *    one, and
 *    patches the records' source field (and CRC) where the index differs;
 *  - puts (MDB_APPEND for sorted keys; duplicates per --resume/--replace);
 *  - finish: reads shape, count, stats, classes, cmdline and the written
 *    records' sources' srcstats in the txn, folds in the records'
 *    contributions and writes them back.
 * So the meta always equals what the committed records imply, with several
 * packers at once and after a kill. The per-record statistics (measured by
 * pack_add_record in pack.c) are folded record by record in write order, so
 * float sums are independent of where batches were cut and a killed and
 * resumed pack ends bit-identical to an uninterrupted one. A replaced
 * record's old contribution cannot be taken out of min/max, so --replace
 * marks the stats stale and pack_rescan_if_needed rescans at the end.
 * A source's srcstats is made in the txn that creates the source, so a
 * source without one is an older pool's (its sums would miss the records
 * packed before): it stays without until a rescan makes them all.
 * The puts themselves and the run around them are pack.c's.
 */
#include "pack_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_pool.h"
#include "cdp_record.h"
#include "cdp_stats.h"
#include "cdp_stream.h"

#define SRC_OFF 88                /* record header: source index (u32 LE) */

/* ---- committed source descriptions: open addressing, FNV-1a ------------- */

static size_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return (size_t)h;
}

static long map_find(const pk *p, const char *desc)
{
	if (!p->mcap)
		return -1;
	for (size_t i = hash(desc) & (p->mcap - 1); p->mdesc[i]; i = (i + 1) & (p->mcap - 1))
		if (strcmp(p->mdesc[i], desc) == 0)
			return (long)p->midx[i];
	return -1;
}

/* Takes ownership of desc. */
static int map_put(pk *p, char *desc, uint32_t idx)
{
	if (map_find(p, desc) >= 0) {
		/* An older pool may hold two equal sources: keep the first. */
		free(desc);
		return CDP_OK;
	}
	if ((p->mn + 1) * 2 > p->mcap) {
		size_t ncap = p->mcap ? p->mcap * 2 : 64;
		char **np = calloc(ncap, sizeof *np);
		uint32_t *ni = calloc(ncap, sizeof *ni);

		if (!np || !ni) {
			free(np);
			free(ni);
			free(desc);
			return CDP_ENOMEM;
		}
		for (size_t i = 0; i < p->mcap; i++) {
			size_t j;
			if (!p->mdesc[i])
				continue;
			for (j = hash(p->mdesc[i]) & (ncap - 1); np[j]; j = (j + 1) & (ncap - 1))
				;
			np[j] = p->mdesc[i];
			ni[j] = p->midx[i];
		}
		free(p->mdesc);
		free(p->midx);
		p->mdesc = np;
		p->midx = ni;
		p->mcap = ncap;
	}
	size_t i = hash(desc) & (p->mcap - 1);
	while (p->mdesc[i])
		i = (i + 1) & (p->mcap - 1);
	p->mdesc[i] = desc;
	p->midx[i] = idx;
	p->mn++;
	return CDP_OK;
}

/* ---- a record's source field -------------------------------------------- */

static uint32_t get_le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static void put_le32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* Sets an encoded record's source index, re-computing its CRC only if the
 * index changes (the field sits in the header, outside any zlib payload). */
static void patch_source(MDB_val *v, uint32_t idx)
{
	unsigned char *b = v->mv_data;

	if (get_le32(b + SRC_OFF) == idx)
		return;
	put_le32(b + SRC_OFF, idx);
	put_le32(b + v->mv_size - 4, (uint32_t)crc32_z(0, b, v->mv_size - 4));
}

/* The writer's same (cdp_lmdb.h): a stored record is the one put but for
 * the source index and so the CRC (the same raster named by another path,
 * a resume from another folder, is another pool source). Another tile
 * under the key (two rasters of one name, d1/s.tif and d2/s.tif) is not:
 * --resume skipped it without a word, and the second raster was lost. */
int pack_same_record(const MDB_val *stored, const MDB_val *put, void *arg)
{
	const unsigned char *a = stored->mv_data, *b = put->mv_data;
	size_t n = put->mv_size;

	(void)arg;
	return stored->mv_size == n && n >= SRC_OFF + 8 && memcmp(a, b, SRC_OFF) == 0 &&
	       memcmp(a + SRC_OFF + 4, b + SRC_OFF + 4, n - SRC_OFF - 8) == 0;
}

/* ---- the batch hooks ---------------------------------------------------- */

int pack_meta_error(pk *p, const char *name, int rc)
{
	return pack_seterr(p, rc, "'%s': meta '%s': %s", p->o->db, name, cdp_strerror(rc));
}

int pack_source_desc(const cdp_source *s, char **out)
{
	cdp_source c = *s;
	cdp_buf b = { 0 };
	int rc;

	c.index = 0;
	*out = NULL;
	if ((rc = cdp_source_format(&c, &b))) {
		cdp_buf_free(&b);
		return rc;
	}
	if (!(*out = strndup((const char *)b.p, b.len)))
		rc = CDP_ENOMEM;
	cdp_buf_free(&b);
	return rc;
}

/* Adds the pool sources committed since we last looked to the set. */
static int learn_sources(pk *p, MDB_txn *txn)
{
	char name[32], *desc;
	cdp_source s;
	int rc;

	for (;;) {
		snprintf(name, sizeof name, "source.%06" PRIu32, p->known);
		rc = cdp_pool_meta_get(&p->pool, txn, name, &p->tmp);
		if (rc == MDB_NOTFOUND)
			return CDP_OK;
		if (rc == CDP_OK && (rc = cdp_source_parse(p->tmp.p, p->tmp.len, &s)) == CDP_OK) {
			if ((rc = pack_source_desc(&s, &desc)) == CDP_OK)
				rc = map_put(p, desc, p->known);
			cdp_source_free(&s);
		}
		if (rc)
			return pack_meta_error(p, name, rc);
		p->known++;
	}
}

int pack_prepare(MDB_txn *txn, cdp_lmdb_item *items, size_t n, void *arg)
{
	pk *p = arg;
	uint32_t next;
	char name[32];
	int rc;

	p->attempt++;
	if ((rc = learn_sources(p, txn)))
		return rc;
	next = p->batch_known = p->known;
	for (size_t i = 0; i < n; i++) {
		psrc *s = p->src[p->it[i].src];

		if (!s->mapped && s->attempt != p->attempt) {
			long found = map_find(p, s->desc);
			/* Equal input sources (a --list naming one chip twice): one
			 * pool source. */
			for (size_t j = 0; found < 0 && j < i; j++) {
				psrc *o = p->src[p->it[j].src];
				if (!o->mapped && o->pool >= p->known && strcmp(o->desc, s->desc) == 0)
					found = o->pool;
			}
			if (found >= 0) {
				s->pool = (uint32_t)found;
			} else {
				/* A new source: its text with the pool's index. */
				uint32_t own = s->s.index;
				s->pool = next++;
				s->s.index = s->pool;
				rc = cdp_source_format(&s->s, &p->tmp);
				s->s.index = own;
				snprintf(name, sizeof name, "source.%06" PRIu32, s->pool);
				if (rc || (rc = cdp_pool_meta_put(&p->pool, txn, name,
				                                  (char *)p->tmp.p, p->tmp.len)))
					return rc == MDB_MAP_FULL ? rc
					                          : pack_meta_error(p, name, rc);
			}
			s->attempt = p->attempt;
		}
		patch_source(&items[i].val, s->pool);
	}
	return CDP_OK;
}

/* Reads meta `name` into p->tmp; *absent set when it is missing. */
static int meta_read(pk *p, MDB_txn *txn, const char *name, int *absent)
{
	int rc = cdp_pool_meta_get(&p->pool, txn, name, &p->tmp);

	*absent = rc == MDB_NOTFOUND;
	if (*absent) {
		/* An empty text, as the parsers expect. */
		if (cdp_buf_reserve(&p->tmp, 1))
			return pack_meta_error(p, name, CDP_ENOMEM);
		p->tmp.p[0] = '\0';
		p->tmp.len = 0;
		return CDP_OK;
	}
	return rc ? pack_meta_error(p, name, rc) : CDP_OK;
}

static int meta_write(pk *p, MDB_txn *txn, const char *name, const cdp_buf *b)
{
	int rc = cdp_pool_meta_put(&p->pool, txn, name, (const char *)b->p, b->len);

	return rc == 0 || rc == MDB_MAP_FULL ? rc : pack_meta_error(p, name, rc);
}

static int update_count(pk *p, MDB_txn *txn, uint64_t add)
{
	char v[32];
	uint64_t n = 0;
	int absent, rc;

	if ((rc = meta_read(p, txn, "count", &absent)))
		return rc;
	if (!absent && (cdp_meta_field((char *)p->tmp.p, "tiles", v, sizeof v) ||
	                cdp_parse_u64(v, 0, UINT64_MAX, &n)))
		return pack_meta_error(p, "count", CDP_EFORMAT);
	if (cdp_buf_reserve(&p->tmp, 32))
		return pack_meta_error(p, "count", CDP_ENOMEM);
	p->tmp.len = (size_t)snprintf((char *)p->tmp.p, 32, "tiles=%" PRIu64 "\n", n + add);
	return meta_write(p, txn, "count", &p->tmp);
}

static int update_cmdline(pk *p, MDB_txn *txn)
{
	const char *s;
	size_t lines = 0, need;
	int absent, rc;

	if ((rc = meta_read(p, txn, "cmdline", &absent)))
		return rc;
	for (s = (char *)p->tmp.p; *s; s++)
		lines += *s == '\n';
	need = p->tmp.len + strlen(p->o->cmdline) + 64;
	if (cdp_buf_reserve(&p->tmp, need))
		return pack_meta_error(p, "cmdline", CDP_ENOMEM);
	p->tmp.len += (size_t)snprintf((char *)p->tmp.p + p->tmp.len, need - p->tmp.len,
	                               "cmd.%zu=%s %s\n", lines + 1, p->stamp, p->o->cmdline);
	return meta_write(p, txn, "cmdline", &p->tmp);
}

/* The class names of --classes or --folders, "class.K=NAME\n" for K = 0..,
 * written with the first batch; a pool that has other names refuses them
 * (its class ids would change meaning). */
static int update_names(pk *p, MDB_txn *txn)
{
	cdp_buf b = { 0 };
	int absent, rc;

	if (p->ncnames == 0)
		return CDP_OK;
	for (size_t k = 0; k < p->ncnames; k++) {
		size_t need = b.len + strlen(p->cnames[k]) + 32;
		if (cdp_buf_reserve(&b, need)) {
			cdp_buf_free(&b);
			return pack_meta_error(p, "class_names", CDP_ENOMEM);
		}
		b.len += (size_t)snprintf((char *)b.p + b.len, need - b.len, "class.%zu=%s\n", k,
		                          p->cnames[k]);
	}
	if ((rc = meta_read(p, txn, "class_names", &absent)) == CDP_OK) {
		if (absent)
			rc = meta_write(p, txn, "class_names", &b);
		else if (p->tmp.len != b.len || memcmp(p->tmp.p, b.p, b.len) != 0)
			rc = pack_seterr(p, CDP_EMISMATCH, "'%s': these class names differ from the "
			                 "pool's (meta 'class_names')", p->o->db);
	}
	cdp_buf_free(&b);
	return rc;
}

/* Folds the written items into stats and classes as stored in the txn. */
static int update_stats(pk *p, MDB_txn *txn, const cdp_lmdb_item *items, size_t n)
{
	cdp_stats st = {0};
	cdp_classes cl = {0};
	const char *name = "stats";
	int absent, rc;

	if ((rc = meta_read(p, txn, "stats", &absent)))
		return rc;
	rc = absent ? cdp_stats_init(&st, p->shape.dtype, p->shape.bands)
	            : cdp_stats_parse((char *)p->tmp.p, p->tmp.len, &st);
	if (rc)
		return pack_meta_error(p, name, rc);
	if ((rc = meta_read(p, txn, "classes", &absent)))
		goto out;
	name = "classes";
	if ((rc = cdp_classes_parse((char *)p->tmp.p, p->tmp.len, &cl)))
		goto out;
	name = "stats";
	for (size_t i = 0; i < n && !rc; i++) {
		if (items[i].status != CDP_PUT_NEW && items[i].status != CDP_PUT_REPLACED)
			continue;
		/* The replaced record's share cannot be taken out: rescan later. */
		if (items[i].status == CDP_PUT_REPLACED)
			st.stale = 1;
		if ((rc = cdp_stats_merge(&st, &p->it[i].st)) == CDP_OK)
			rc = cdp_classes_merge(&cl, &p->it[i].cl);
	}
	/* labels packed earlier, before the pool had these names */
	if (rc == CDP_OK && p->ncnames) {
		char what[64 + 4096];
		snprintf(what, sizeof what, "'%s': the pool", p->o->db);
		if ((rc = pack_check_class_ids(p, &cl, what)))
			goto out;
	}
	if (rc || (rc = cdp_stats_format(&st, &p->tmp)) ||
	    (rc = meta_write(p, txn, "stats", &p->tmp)))
		goto out;
	name = "classes";
	if ((rc = cdp_classes_format(&cl, &p->tmp)) == CDP_OK)
		rc = meta_write(p, txn, "classes", &p->tmp);
out:
	cdp_stats_free(&st);
	cdp_classes_free(&cl);
	return rc && rc != MDB_MAP_FULL ? pack_meta_error(p, name, rc) : rc;
}

/* Writes st as source idx's srcstats and frees it. */
static int put_srcstats(pk *p, MDB_txn *txn, uint32_t idx, cdp_stats *st)
{
	char name[40];
	int rc;

	cdp_pool_srcstats_name(idx, name, sizeof name);
	rc = cdp_stats_format(st, &p->tmp);
	cdp_stats_free(st);
	if (rc)
		return pack_meta_error(p, name, rc);
	return meta_write(p, txn, name, &p->tmp);
}

/* Folds the written items into their sources' srcstats, reading each
 * source's once per run of its records (a later run in the same batch
 * reads what this txn wrote). */
static int update_srcstats(pk *p, MDB_txn *txn, const cdp_lmdb_item *items, size_t n)
{
	cdp_stats st = {0};
	uint32_t cur = 0;
	int have = 0, skip = 0, absent, rc = 0;
	char name[40];

	for (size_t i = 0; i < n; i++) {
		uint32_t s;
		if (items[i].status != CDP_PUT_NEW && items[i].status != CDP_PUT_REPLACED)
			continue;
		s = p->src[p->it[i].src]->pool;
		if (have && s != cur) {
			have = 0;
			if (skip)
				cdp_stats_free(&st);
			else if ((rc = put_srcstats(p, txn, cur, &st)))
				return rc;
		}
		if (!have) {
			cdp_pool_srcstats_name(s, name, sizeof name);
			if ((rc = meta_read(p, txn, name, &absent)))
				return rc;
			skip = absent && s < p->batch_known;   /* an older pool's source */
			rc = absent ? cdp_stats_init(&st, p->shape.dtype, p->shape.bands)
			            : cdp_stats_parse((char *)p->tmp.p, p->tmp.len, &st);
			if (rc)
				return pack_meta_error(p, name, rc);
			have = 1;
			cur = s;
		}
		if (items[i].status == CDP_PUT_REPLACED)
			st.stale = 1;
		if (!skip && (rc = cdp_stats_merge(&st, &p->it[i].st))) {
			cdp_stats_free(&st);
			return pack_meta_error(p, name, rc);
		}
	}
	if (!have)
		return CDP_OK;
	if (skip) {
		cdp_stats_free(&st);
		return CDP_OK;
	}
	return put_srcstats(p, txn, cur, &st);
}

int pack_finish(MDB_txn *txn, cdp_lmdb_item *items, size_t n, void *arg)
{
	pk *p = arg;
	cdp_record shape;
	uint64_t added = 0;
	size_t first = n;
	int absent, rc;

	for (size_t i = n; i-- > 0;) {
		if (items[i].status == CDP_PUT_NEW || items[i].status == CDP_PUT_REPLACED)
			first = i;
		added += items[i].status == CDP_PUT_NEW;
	}
	if (first == n)
		return CDP_OK;   /* nothing written: nothing to describe */

	if ((rc = meta_read(p, txn, "shape", &absent)))
		return rc;
	if (absent) {
		if ((rc = cdp_pool_shape_format(&p->shape, &p->tmp)) ||
		    (rc = meta_write(p, txn, "shape", &p->tmp)))
			return rc;
	} else if ((rc = cdp_pool_shape_parse((char *)p->tmp.p, &shape))) {
		return pack_meta_error(p, "shape", rc);
	} else if (!pack_same_shape(&shape, &p->shape)) {
		/* Another writer set a different shape after we started. */
		char key[CDP_LMDB_KEYMAX + 1];
		memcpy(key, items[first].key.mv_data, items[first].key.mv_size);
		key[items[first].key.mv_size] = '\0';
		return pack_shape_mismatch(p, key, &p->shape, &shape);
	}
	/* The stats text below is this version's. */
	if ((rc = cdp_pool_format_upgrade(&p->pool, txn)))
		return rc == MDB_MAP_FULL ? rc : pack_meta_error(p, "format", rc);
	/* names first: other names are the cause, labels beyond them a symptom */
	if (!p->cmd_done && (rc = update_names(p, txn)))
		return rc;
	if ((rc = update_count(p, txn, added)) || (rc = update_stats(p, txn, items, n)) ||
	    (rc = update_srcstats(p, txn, items, n)))
		return rc;
	return p->cmd_done ? CDP_OK : update_cmdline(p, txn);
}

/* Source idx's sums in ss[*nss] (grown and initialised as needed). */
static cdp_stats *src_acc(pk *p, cdp_stats **ss, size_t *nss, uint32_t idx)
{
	if (idx >= *nss) {
		size_t n = (size_t)idx + 1;
		cdp_stats *g = realloc(*ss, n * sizeof *g);
		if (!g)
			return NULL;
		memset(g + *nss, 0, (n - *nss) * sizeof *g);
		*ss = g;
		for (; *nss < n; (*nss)++)
			if (cdp_stats_init(&g[*nss], p->shape.dtype, p->shape.bands))
				return NULL;
	}
	return &(*ss)[idx];
}

/* Recomputes stats, classes, count and every source's srcstats from every
 * record, in one txn. */
static int rescan_txn(pk *p)
{
	cdp_stats st = {0}, *ss = NULL, *one;
	size_t nss = 0;
	cdp_classes cl = {0};
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	cdp_record r;
	uint64_t n = 0;
	int rc;

	if ((rc = cdp_lmdb_txn_begin(p->pool.env, 0, &txn)))
		return rc;
	/* every source gets sums, those without records empty ones */
	if ((rc = learn_sources(p, txn)))
		goto out;
	if (p->known && !src_acc(p, &ss, &nss, p->known - 1)) {
		rc = CDP_ENOMEM;
		goto out;
	}
	if ((rc = cdp_stats_init(&st, p->shape.dtype, p->shape.bands)) ||
	    (rc = mdb_cursor_open(txn, p->pool.tiles, &cur)))
		goto out;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if ((rc = cdp_record_decode(v.mv_data, v.mv_size, &r, &p->scratch)) ||
		    (rc = cdp_stats_add_record(&st, &r)) ||
		    (rc = (one = src_acc(p, &ss, &nss, r.source)) ? CDP_OK : CDP_ENOMEM) ||
		    (rc = cdp_stats_add_record(one, &r)) ||
		    (rc = cdp_classes_add_record(&cl, &r))) {
			pack_seterr(p, rc, "'%s': record '%.*s': %s", p->o->db, (int)k.mv_size,
			            (char *)k.mv_data, cdp_strerror(rc));
			goto out;
		}
		n++;
	}
	if (rc != MDB_NOTFOUND)
		goto out;
	mdb_cursor_close(cur);
	cur = NULL;
	p->tmp.len = 0;
	if ((rc = cdp_pool_format_upgrade(&p->pool, txn)) ||
	    (rc = cdp_stats_format(&st, &p->tmp)) || (rc = meta_write(p, txn, "stats", &p->tmp)) ||
	    (rc = cdp_classes_format(&cl, &p->tmp)) || (rc = meta_write(p, txn, "classes", &p->tmp)) ||
	    (rc = cdp_buf_reserve(&p->tmp, 32)))
		goto out;
	p->tmp.len = (size_t)snprintf((char *)p->tmp.p, 32, "tiles=%" PRIu64 "\n", n);
	if ((rc = meta_write(p, txn, "count", &p->tmp)))
		goto out;
	for (size_t i = 0; i < nss; i++) {
		char name[40];
		cdp_pool_srcstats_name((uint32_t)i, name, sizeof name);
		if ((rc = cdp_stats_format(&ss[i], &p->tmp)) || (rc = meta_write(p, txn, name, &p->tmp)))
			goto out;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		mdb_txn_abort(txn);
	cdp_stats_free(&st);
	cdp_classes_free(&cl);
	for (size_t i = 0; i < nss; i++)
		cdp_stats_free(&ss[i]);
	free(ss);
	return rc;
}

int pack_pool_stale(pk *p, int *stale, int *replaced)
{
	MDB_txn *txn;
	cdp_stats st;
	int rc, absent;

	*stale = 0;
	if (replaced)
		*replaced = 0;
	if ((rc = cdp_lmdb_txn_begin(p->pool.env, MDB_RDONLY, &txn)))
		return pack_seterr(p, rc, "cannot read '%s': %s", p->o->db, cdp_strerror(rc));
	rc = meta_read(p, txn, "stats", &absent);
	if (!rc && !absent && !(rc = cdp_stats_parse((char *)p->tmp.p, p->tmp.len, &st))) {
		*stale = st.stale;
		/* version 1 sums that overflowed are stale as parsed, without the
		 * mark, and a rescan is all they need */
		if (replaced)
			*replaced = st.marked;
		cdp_stats_free(&st);
	}
	mdb_txn_abort(txn);
	if (rc)
		return rc == CDP_ESYNTAX ? pack_meta_error(p, "stats", rc) : rc;
	return CDP_OK;
}

/* After --replace (or a replace that was killed earlier): exact stats again. */
int pack_rescan_if_needed(pk *p)
{
	int rc, stale = p->replaced;

	if (!stale && (rc = pack_pool_stale(p, &stale, NULL)))
		return rc;
	if (!stale || !p->have_shape)
		return CDP_OK;
	while ((rc = rescan_txn(p)) == MDB_MAP_FULL)
		if ((rc = cdp_lmdb_grow(p->pool.env)))
			break;
	if (rc)
		return pack_seterr(p, rc, "cannot update '%s': %s", p->o->db,
		                   cdp_strerror(rc));
	return CDP_OK;
}
