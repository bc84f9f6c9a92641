/* pack.c: cdp-lmdbpack's work (pack.h): records into the pool's `tiles`,
 * with the meta that describes them committed in the same transactions.
 *
 * This file holds the run (cdp_pack_run: input checks, the pool, clean-up),
 * the input's sources, and the record path shared by both inputs: a record
 * stream read here, or --list chips read through GDAL in list.c. Each record
 * is decoded, checked against the pool's shape, measured (its own stats and
 * class counts) and buffered in cdp_lmdb.h's batched writer; a full batch
 * becomes one write txn whose hooks, in meta.c, map the batch's sources to
 * pool indices and fold the written records into the meta. Measuring a
 * record when it is read, rather than when its batch commits, keeps the
 * per-record contributions independent of where batches were cut.
 */
#include "pack_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_out.h"
#include "cdp_pool.h"
#include "cdp_progress.h"
#include "cdp_record.h"
#include "cdp_stats.h"
#include "cdp_stream.h"

int pack_seterr(pk *p, int rc, const char *fmt, ...)
{
	va_list ap;

	if (!p->errset) {
		va_start(ap, fmt);
		vsnprintf(p->err, p->errcap, fmt, ap);
		va_end(ap);
		p->errset = 1;
	}
	return rc;
}

void cdp_pack_opts_init(cdp_pack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->dup = CDP_DUP_ERROR;
	o->txn_records = CDP_LMDB_TXN_RECORDS;
	o->txn_bytes = CDP_LMDB_TXN_BYTES;
	o->map_size = CDP_PACK_MAP_SIZE;
}

/* ---- sources and shapes ------------------------------------------------- */

/* A source's class names (cdp-tile --classes or --label-map): the pool's
 * class names when neither --classes nor an earlier source gave them, else
 * they must be the same, or the label ids would mean two things in one
 * pool; and records committed before them came without names, so the pool
 * would not know its names were meant for them too. */
static int source_classes(pk *p, const cdp_source *s)
{
	char why[128];
	size_t n = s->nclass_names;

	if (n == 0)
		return CDP_OK;
	for (size_t k = 0; k < n; k++) {
		if (!cdp_class_name_ok(s->class_names[k], why, sizeof why))
			return pack_seterr(p, CDP_ESYNTAX, "'%s': source '%s': class %zu's name %s",
			                   p->in, s->name, k, why);
		for (size_t j = 0; j < k; j++)
			if (strcmp(s->class_names[j], s->class_names[k]) == 0)
				return pack_seterr(p, CDP_ESYNTAX, "'%s': source '%s': '%s' names "
				                   "both class %zu and class %zu", p->in, s->name,
				                   s->class_names[k], j, k);
	}
	if (p->ncnames == 0 && p->cmd_done)
		return pack_seterr(p, CDP_EMISMATCH, "'%s': source '%s' names its classes, but "
		                   "records before it came without names", p->in, s->name);
	if (p->ncnames == 0) {
		if (!(p->cnames_own = calloc(n, sizeof *p->cnames_own)))
			return pack_seterr(p, CDP_ENOMEM, "out of memory");
		p->ncnames = n;
		p->cnames = (const char *const *)p->cnames_own;
		for (size_t k = 0; k < n; k++)
			if (!(p->cnames_own[k] = strdup(s->class_names[k])))
				return pack_seterr(p, CDP_ENOMEM, "out of memory");
		snprintf(p->cnames_from, sizeof p->cnames_from, "source '%s'", s->name);
		return CDP_OK;
	}
	for (size_t k = 0; k < n || k < p->ncnames; k++)
		if (k >= n || k >= p->ncnames || strcmp(s->class_names[k], p->cnames[k]))
			return pack_seterr(p, CDP_EMISMATCH, "'%s': source '%s' names class %zu "
			                   "'%s', %s names it '%s'", p->in, s->name, k,
			                   k < n ? s->class_names[k] : "(none)",
			                   p->cnames_from[0] ? p->cnames_from : "--classes",
			                   k < p->ncnames ? p->cnames[k] : "(none)");
	return CDP_OK;
}

/* Takes ownership of s (its index is the input's). */
int pack_add_source(pk *p, cdp_source *s)
{
	psrc *ps;
	uint32_t own = s->index;
	int rc;

	if (s->index >= PACK_MAX_SOURCES - p->src_base) {
		cdp_source_free(s);
		return pack_seterr(p, CDP_ERANGE, "'%s': source index %" PRIu32 " is too large",
		                   p->in, own);
	}
	s->index += p->src_base;
	if (s->index >= p->nsrc) {
		size_t n = (size_t)s->index + 1 > p->nsrc * 2 ? (size_t)s->index + 1 : p->nsrc * 2;
		psrc **np = realloc(p->src, n * sizeof *np);
		if (!np) {
			cdp_source_free(s);
			return pack_seterr(p, CDP_ENOMEM, "out of memory");
		}
		memset(np + p->nsrc, 0, (n - p->nsrc) * sizeof *np);
		p->src = np;
		p->nsrc = n;
	}
	if (p->src[s->index]) {
		cdp_source_free(s);
		return pack_seterr(p, CDP_EFORMAT, "'%s': source %" PRIu32 " is described twice",
		                   p->in, own);
	}
	if ((rc = source_classes(p, s))) {
		cdp_source_free(s);
		return rc;
	}
	if (!(ps = calloc(1, sizeof *ps))) {
		cdp_source_free(s);
		return pack_seterr(p, CDP_ENOMEM, "out of memory");
	}
	if ((rc = pack_source_desc(s, &ps->desc))) {
		uint32_t i = s->index;
		free(ps);
		cdp_source_free(s);
		return pack_seterr(p, rc, "'%s': source %" PRIu32 ": %s", p->in, i,
		                   cdp_strerror(rc));
	}
	ps->s = *s;
	p->src[s->index] = ps;
	if (s->index >= p->src_end)
		p->src_end = s->index + 1;
	return CDP_OK;
}

static const char *label_name(int k)
{
	static const char *const n[] = { "none", "u8", "u16", "class", "f32", "multi" };
	return k >= 0 && k <= CDP_LABEL_MULTI ? n[k] : "?";
}

static void shape_str(const cdp_record *r, char *buf, size_t cap)
{
	const char *dt = cdp_dtype_name(r->dtype);

	snprintf(buf, cap, "%s, %" PRIu32 " bands, %" PRIu32 "x%" PRIu32 ", label %s",
	         dt ? dt : "?", r->bands, r->width, r->height, label_name(r->label_kind));
	if (r->label_kind == CDP_LABEL_U8 || r->label_kind == CDP_LABEL_U16)
		snprintf(buf + strlen(buf), cap - strlen(buf), " (ignore %" PRIu32 ")",
		         r->label_ignore);
	else if (r->label_kind == CDP_LABEL_F32)
		snprintf(buf + strlen(buf), cap - strlen(buf), " (%" PRIu32 " target%s)",
		         r->label_len, r->label_len == 1 ? "" : "s");
	else if (r->label_kind == CDP_LABEL_MULTI)
		snprintf(buf + strlen(buf), cap - strlen(buf), " (%" PRIu32 " classes)",
		         r->label_len);
}

int pack_same_shape(const cdp_record *a, const cdp_record *b)
{
	return a->dtype == b->dtype && a->bands == b->bands && a->height == b->height &&
	       a->width == b->width && a->label_kind == b->label_kind &&
	       a->label_ignore == b->label_ignore && a->label_len == b->label_len;
}

int pack_shape_mismatch(pk *p, const char *key, const cdp_record *r,
                        const cdp_record *pool)
{
	char a[128], b[128];

	shape_str(r, a, sizeof a);
	shape_str(pool, b, sizeof b);
	return pack_seterr(p, CDP_ESHAPE, "'%s': record '%s' is %s; the pool holds %s",
	                   p->o->db, key, a, b);
}

int pack_check_class_ids(pk *p, const cdp_classes *c, const char *what)
{
	char ids[96] = "";   /* 8 ids of at most 5 digits and ", ..." fit */
	size_t len = 0, shown = 0;

	if (!p->ncnames || c->len <= p->ncnames)
		return CDP_OK;
	for (size_t k = p->ncnames; k < c->len; k++) {
		if (!c->n[k])
			continue;
		if (shown++ == 8) {
			snprintf(ids + len, sizeof ids - len, ", ...");
			break;
		}
		len += (size_t)snprintf(ids + len, sizeof ids - len, "%s%zu", len ? ", " : "", k);
	}
	return pack_seterr(p, CDP_ERANGE, "%s holds label value%s %s, but %s name%s only %zu "
	                   "class%s (0..%zu)", what, shown == 1 ? "" : "s", ids,
	                   p->o->folders ? "the class folders" : p->cnames_from[0]
	                   ? p->cnames_from : "--classes",
	                   p->o->folders ? "" : "s", p->ncnames, p->ncnames == 1 ? "" : "es",
	                   p->ncnames - 1);
}

/* ---- batches and records ------------------------------------------------ */

static int flush(pk *p)
{
	cdp_lmdb_writer *w = &p->w;
	int rc = cdp_lmdb_writer_flush(w);

	size_t want;

	/* the map could not be doubled (the batch is not committed, the
	 * earlier ones are); LMDB unmapped the env, which is not used again */
	if (rc && cdp_lmdb_broken(p->pool.env, &want) == rc)
		return pack_seterr(p, rc, "'%s': cannot grow the map to %zu bytes: %s%s", p->o->db,
		                   want, cdp_strerror(rc), rc == ENOMEM ? " (ulimit -v?)" : "");
	if (rc == MDB_KEYEXIST && p->o->dup == CDP_DUP_SKIP)
		return pack_seterr(p, rc, "'%s': key '%s' holds another tile than the stream's "
		                   "(other pixels, place or bands): --resume skips only tiles "
		                   "packed before (two rasters of one name? cdp-tile --name "
		                   "renames one; --replace overwrites)", p->o->db, w->failkey);
	if (rc == MDB_KEYEXIST)
		return pack_seterr(p, rc, "'%s': duplicate key '%s' (use --resume to skip or "
		                   "--replace to overwrite)", p->o->db, w->failkey);
	if (rc && w->failkey_len)
		return pack_seterr(p, rc, "'%s': cannot write record '%s': %s", p->o->db,
		                   w->failkey, cdp_strerror(rc));
	if (rc)
		return pack_seterr(p, rc, "cannot write '%s': %s", p->o->db, cdp_strerror(rc));
	if (!w->flushed)
		return CDP_OK;
	/* Committed: the chosen source indices are final. */
	for (size_t i = 0; i < w->n; i++) {
		psrc *s = p->src[p->it[i].src];
		int st = w->items[i].status;

		if (!s->mapped && s->attempt == p->attempt) {
			s->mapped = 1;
			cdp_source_free(&s->s);
			free(s->desc);
			s->desc = NULL;
		}
		if (st == CDP_PUT_NEW || st == CDP_PUT_REPLACED)
			p->cmd_done = 1;
		if (st == CDP_PUT_REPLACED)
			p->replaced = 1;
	}
	p->res->written = w->written;
	p->res->skipped = w->skipped;
	p->res->replaced = w->replaced;
	p->res->bytes = w->bytes;
	p->res->commits = w->commits;
	return CDP_OK;
}

/* A record must be what its source says it holds, and placed somewhere:
 * the source meta would otherwise describe other data than the pool's
 * (cdpool info showed a 1-band u8 pool whose source was 2-band u16), and a
 * NaN or infinite geotransform places a tile nowhere. */
static int record_vs_source(pk *p, const char *key, const cdp_record *r, const cdp_source *s)
{
	const char *rd = cdp_dtype_name(r->dtype), *sd = cdp_dtype_name(s->dtype);

	for (int i = 0; i < 6; i++)
		if (!isfinite(r->gt[i]))
			return pack_seterr(p, CDP_EFORMAT, "'%s': record '%s': geotransform[%d] is %g, "
			                   "not a finite number", p->in, key, i, r->gt[i]);
	if (r->bands != s->bands || r->dtype != s->dtype)
		return pack_seterr(p, CDP_ESHAPE, "'%s': record '%s' is %s with %" PRIu32 " bands, "
		                   "its source %" PRIu32 " '%s' says %s with %" PRIu32, p->in, key,
		                   rd ? rd : "?", r->bands, r->source, s->name, sd ? sd : "?",
		                   s->bands);
	return CDP_OK;
}

/* Checks, measures and buffers one encoded record. */
int pack_add_record(pk *p, const char *key, const void *body, size_t len)
{
	cdp_record r;
	pitem *it;
	size_t idx;
	int rc;

	if ((rc = cdp_record_decode(body, len, &r, &p->scratch))) {
		char why[160];
		cdp_record_why(body, len, rc, why, sizeof why);
		return pack_seterr(p, rc, "'%s': record '%s': %s", p->in, key, why);
	}
	if (!p->have_shape) {
		p->shape = r;
		p->have_shape = 1;
	} else if (!pack_same_shape(&r, &p->shape)) {
		return pack_shape_mismatch(p, key, &r, &p->shape);
	}
	if (r.source >= p->nsrc - p->src_base || !p->src[p->src_base + r.source])
		return pack_seterr(p, CDP_EFORMAT, "'%s': record '%s' refers to source %" PRIu32
		                   ", which the input does not describe", p->in, key, r.source);
	if ((rc = record_vs_source(p, key, &r, &p->src[p->src_base + r.source]->s)))
		return rc;
	rc = cdp_lmdb_writer_add(&p->w, key, strlen(key), body, len);
	if (rc == MDB_BAD_VALSIZE)
		return pack_seterr(p, rc, "'%s': key '%s' is empty or longer than %d bytes",
		                   p->in, key, CDP_LMDB_KEYMAX);
	if (rc)
		return pack_seterr(p, rc, "%s", cdp_strerror(rc));
	idx = p->w.n - 1;
	if (idx >= p->itcap) {
		size_t ncap = p->itcap ? p->itcap * 2 : 64;
		pitem *ni = realloc(p->it, ncap * sizeof *ni);
		if (!ni)
			return pack_seterr(p, CDP_ENOMEM, "out of memory");
		memset(ni + p->itcap, 0, (ncap - p->itcap) * sizeof *ni);
		p->it = ni;
		p->itcap = ncap;
	}
	it = &p->it[idx];
	if (!it->st.b && (rc = cdp_stats_init(&it->st, p->shape.dtype, p->shape.bands)))
		return pack_seterr(p, rc, "%s", cdp_strerror(rc));
	cdp_stats_reset(&it->st);
	cdp_classes_reset(&it->cl);
	it->src = p->src_base + r.source;
	if ((rc = cdp_stats_add_record(&it->st, &r)) ||
	    (rc = cdp_classes_add_record(&it->cl, &r)))
		return pack_seterr(p, rc, "'%s': record '%s': %s", p->in, key, cdp_strerror(rc));
	if (p->ncnames) {
		char what[CDP_LMDB_KEYMAX + 4200];
		snprintf(what, sizeof what, "'%s': record '%s'", p->in, key);
		if ((rc = pack_check_class_ids(p, &it->cl, what)))
			return rc;
	}
	p->res->read++;
	cdp_progress_update(&p->pg, p->res->read);
	return cdp_lmdb_writer_full(&p->w) ? flush(p) : CDP_OK;
}

/* ---- inputs ------------------------------------------------------------- */

/* What an incomplete stream leaves: the batches committed before it broke
 * (each a consistent pool state, so re-running in the mode that completes
 * them gives what one whole pack gives); the batch in the making is never
 * committed. That mode is --replace after --replace: --resume would keep
 * the old records under the keys not reached yet. */
static const char *kept(const pk *p, char *buf, size_t cap)
{
	const char *again = p->o->dup == CDP_DUP_REPLACE ? "--replace" : "--resume";

	if (!p->pool_open || (p->w.written == 0 && (p->made || (p->fresh & 1))))
		return "nothing was committed";
	if (p->w.written == 0)
		snprintf(buf, cap, "nothing of it was committed, re-run with %s", again);
	else
		snprintf(buf, cap, "the %" PRIu64 " committed stay, re-run with %s", p->w.written,
		         again);
	return buf;
}

int pack_stopped(pk *p)
{
	char k[96];

	if (!p->o->stop || !*p->o->stop)
		return CDP_OK;
	return pack_seterr(p, EINTR, "'%s': interrupted by signal %d after %" PRIu64
	                   " records; %s", p->in, (int)*p->o->stop, p->res->read,
	                   kept(p, k, sizeof k));
}

/* Reads the streams in (after the first one's header): one after another
 * (cat a.cdps b.cdps), each with its own header, E frame and sources
 * numbered from 0, so a concatenation packs as its streams would one by
 * one. Bytes after an E frame that do not start a stream are an error, not
 * silently dropped. */
static int read_stream(pk *p, FILE *in)
{
	cdp_frame fr = {0};
	cdp_source s;
	uint64_t count, first = 0;    /* records read before this stream */
	unsigned nstream = 1;
	char v[32] = "no count", k[96];
	int rc, c;

	for (;;) {
		if ((rc = pack_stopped(p)))
			break;
		rc = cdp_stream_read_frame(in, &fr);
		/* a signal during the read ends it with EINTR: report the signal */
		if (rc && (c = pack_stopped(p))) {
			rc = c;
			break;
		}
		if (rc == CDP_ETRUNC) {
			rc = pack_seterr(p, rc, "'%s': truncated record stream (its producer "
			                 "died?) after %" PRIu64 " records; %s", p->in,
			                 p->res->read, kept(p, k, sizeof k));
			break;
		}
		if (rc == CDP_ECANCEL) {
			/* body: "error=MESSAGE\n" (cdp_stream.h) */
			fr.body.p[fr.body.len - 1] = '\0';
			rc = pack_seterr(p, rc, "'%s': the record stream's producer failed after %"
			                 PRIu64 " records (%s); %s", p->in, p->res->read,
			                 (char *)fr.body.p + 6, kept(p, k, sizeof k));
			break;
		}
		if (rc) {
			rc = pack_seterr(p, rc, "'%s': bad record stream after %" PRIu64
			                 " records: %s", p->in, p->res->read, cdp_strerror(rc));
			break;
		}
		if (fr.type == CDP_FRAME_SOURCE) {
			char why[200];
			/* cdp-record(5): each line ends in a newline; a body cut
			 * inside its last line would lose the end of it unnoticed */
			if (fr.body.len && fr.body.p[fr.body.len - 1] != '\n') {
				rc = pack_seterr(p, CDP_ESYNTAX, "'%s': source '%s': its last line has no "
				                 "newline", p->in, fr.name);
				break;
			}
			if ((rc = cdp_source_parse_why(fr.body.p, fr.body.len, &s, why, sizeof why))) {
				rc = pack_seterr(p, rc, "'%s': source '%s': %s", p->in, fr.name, why);
				break;
			}
			if ((rc = pack_add_source(p, &s)))
				break;
		} else if (fr.type == CDP_FRAME_RECORD) {
			if ((rc = pack_add_record(p, fr.name, fr.body.p, fr.body.len)))
				break;
		} else {
			if (cdp_meta_field((char *)fr.body.p, "count", v, sizeof v) ||
			    cdp_parse_u64(v, 0, UINT64_MAX, &count) ||
			    count != p->res->read - first) {
				rc = pack_seterr(p, CDP_EFORMAT, "'%s': the stream's end says %s "
				                 "records, %" PRIu64 " were read", p->in, v,
				                 p->res->read - first);
				break;
			}
			errno = 0;
			if ((c = getc(in)) == EOF) {
				if (ferror(in) && (rc = pack_stopped(p)))
					break;
				if (ferror(in))
					rc = pack_seterr(p, errno ? errno : EIO, "cannot read '%s': %s",
					                 p->in, strerror(errno ? errno : EIO));
				break;
			}
			ungetc(c, in);
			nstream++;
			if ((rc = cdp_stream_read_header(in)) && (c = pack_stopped(p))) {
				rc = c;
				break;
			}
			if (rc) {
				rc = pack_seterr(p, rc, "'%s': data after the end of record stream %u "
				                 "is not a record stream (%s); %s", p->in,
				                 nstream - 1, rc == CDP_ETRUNC ? "truncated header"
				                 : cdp_strerror(rc), kept(p, k, sizeof k));
				break;
			}
			first = p->res->read;
			p->src_base = p->src_end;
		}
	}
	cdp_frame_free(&fr);
	return rc;
}

/* 1 when the pool holds no tile (a read txn of its own: the writer has
 * none open after a failure). An env whose grow failed is not read: it has
 * no map, and the pool stays as its committed batches left it. */
static int pool_empty(cdp_pool *pool)
{
	MDB_txn *txn;
	MDB_stat ms;
	int rc;

	if (cdp_lmdb_broken(pool->env, NULL))
		return 0;
	if (cdp_lmdb_txn_begin(pool->env, MDB_RDONLY, &txn) != 0)
		return 0;
	rc = mdb_stat(txn, pool->tiles, &ms);
	mdb_txn_abort(txn);
	return rc == 0 && ms.ms_entries == 0;
}

/* 1 when no transaction was ever committed to data.mdb: it is missing,
 * holds no more than LMDB's two meta pages, or its meta pages say
 * transaction 0 (an open whose first commit failed part-way, as under a
 * file-size limit, wrote pages but committed none). Read without the lock
 * file (MDB_NOLOCK): closing a descriptor of lock.mdb would drop this
 * process's lock on it (cdp_lmdb_env_alone). */
static int never_committed(const char *db)
{
	char path[4200];
	struct stat st;
	long ps = sysconf(_SC_PAGESIZE);
	MDB_env *env;
	MDB_envinfo info;
	int none = 0;

	snprintf(path, sizeof path, "%s/data.mdb", db);
	if (stat(path, &st) != 0)
		return errno == ENOENT;
	if (!S_ISREG(st.st_mode))
		return 0;
	if ((uint64_t)st.st_size <= 2 * (uint64_t)(ps > 0 ? ps : 4096))
		return 1;
	if (mdb_env_create(&env) != 0)
		return 0;
	if (mdb_env_set_maxdbs(env, 4) == 0 &&
	    mdb_env_open(env, db, MDB_RDONLY | MDB_NOLOCK, 0644) == 0 &&
	    mdb_env_info(env, &info) == 0)
		none = info.me_last_txnid == 0;
	mdb_env_close(env);
	return none;
}

/* 1 when db holds nothing but data.mdb and lock.mdb: what else is there is
 * someone's, and the pool stays with it. */
static int only_lmdb_files(const char *db)
{
	DIR *d = opendir(db);
	struct dirent *e;
	int only = d != NULL;

	while (only && (e = readdir(d)))
		only = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		       strcmp(e->d_name, "data.mdb") == 0 || strcmp(e->d_name, "lock.mdb") == 0;
	if (d)
		closedir(d);
	return only;
}

/* A failed first pack removes the pool directory it created when no tile
 * was committed (in a directory that was there, only the files it created
 * there: an empty pool would be left, which readers refuse as holding no
 * tiles): data.mdb then holds only the format and uuid the open
 * wrote, or, when the open itself failed, whatever LMDB wrote before it
 * failed (its meta pages, with a map size nobody may be able to map).
 * Packers may fill one pool at once, and two that start together both find
 * no pool and create it: one that fails must not remove the pool the other
 * fills, whose first batch is not committed yet. So the pool is removed
 * only while no other process has it open (cdp_lmdb_env_alone), checked
 * empty under that lock and removed before this process lets the lock go
 * (*lockfd, closed after the pool). A packer that opens the pool in the
 * meantime waits for the lock and then fails to open a pool that is gone;
 * none can commit to it. Called with the pool still open when it opened. */
static void remove_new_pool(pk *p, int *lockfd)
{
	static const char *const files[] = { "data.mdb", "lock.mdb" };
	const char *db = p->o->db;
	char path[4200];

	if (!cdp_lmdb_env_alone(db, lockfd))
		return;
	if (p->pool_open ? !pool_empty(&p->pool) : !never_committed(db))
		return;
	if (p->made && !only_lmdb_files(db))
		return;
	for (int i = 0; i < 2; i++) {
		if (!p->made && !(p->fresh & (1 << i)))
			continue;
		snprintf(path, sizeof path, "%s/%s", db, files[i]);
		unlink(path);
	}
	if (p->made)
		rmdir(db);
}

/* The pool's bands that cannot be standardized (cdp_stats_wide) into
 * res->warn: a pack of a raster with one 1e300 pixel succeeds, and its std
 * of 1e297 would turn every other pixel into the same value. */
static void note_wide(pk *p)
{
	cdp_pack_result *res = p->res;
	MDB_txn *txn;
	cdp_stats st;
	size_t len = 0;
	int rc;

	if (cdp_lmdb_txn_begin(p->pool.env, MDB_RDONLY, &txn))
		return;
	rc = cdp_pool_meta_get(&p->pool, txn, "stats", &p->tmp);
	mdb_txn_abort(txn);
	if (rc || cdp_stats_parse((const char *)p->tmp.p, p->tmp.len, &st))
		return;
	for (uint32_t b = 0; b < st.bands && len + 1 < sizeof res->warn; b++) {
		double mean, sd, lo, hi;
		int n;

		if (!cdp_stats_wide(&st, b))
			continue;
		cdp_stats_result(&st, b, &mean, &sd, &lo, &hi);
		n = snprintf(res->warn + len, sizeof res->warn - len, "'%s': band %" PRIu32
		             " ranges from %.6g to %.6g (std %.6g): standardizing it is "
		             "meaningless\n", p->o->db, b + 1, lo, hi, sd);
		if (n < 0 || (size_t)n >= sizeof res->warn - len) {
			res->warn[len] = '\0';
			break;
		}
		len += (size_t)n;
	}
	cdp_stats_free(&st);
}

/* cmdline and stamp, the input, the pool: then the input's records. */
int cdp_pack_run(const cdp_pack_opts *o, FILE *in, cdp_pack_result *res,
                 char *err, size_t errcap)
{
	pk p;
	list_entry *ents = NULL;
	size_t nents = 0;
	time_t now = time(NULL);
	double t0 = cdp_now();
	int flags = CDP_POOL_CREATE | (o->nosync ? CDP_POOL_NOSYNC : 0);
	char why[128];
	struct stat st;
	int rc, pg = 0, made = 0, stale = 0, replaced = 0, lockfd = -1;

	memset(res, 0, sizeof *res);
	memset(&p, 0, sizeof p);
	p.o = o;
	p.res = res;
	p.err = err;
	p.errcap = errcap;
	err[0] = '\0';
	p.in = o->list ? o->list : o->folders ? o->folders : "<stdin>";
	p.cnames = o->classes;
	p.ncnames = o->nclasses;
	strftime(p.stamp, sizeof p.stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

	/* Check the input before the pool is created or touched. */
	if (!o->list && !o->folders)
		cdp_stream_pipe_grow(fileno(in));
	if (o->folders) {
		if ((rc = pack_folders_read(&p, &ents, &nents)))
			goto out;
	} else if (o->list) {
		if ((rc = pack_list_read(&p, &ents, &nents)))
			goto out;
	}
	if (o->list || o->folders) {
		if ((rc = pack_list_keys(&p, ents, nents)))
			goto out;
	} else if (isatty(fileno(in))) {
		rc = pack_seterr(&p, CDP_ETTY, "refusing to read a record stream from a terminal "
		                 "(pipe cdp-tile into it or use --list)");
		goto out;
	} else if ((rc = cdp_stream_read_header(in))) {
		/* a signal while the producer has not started yet */
		if (pack_stopped(&p) == CDP_OK)
			rc = pack_seterr(&p, rc, "'%s': not a record stream: %s", p.in,
			                 rc == CDP_ETRUNC ? "empty or truncated header" :
			                 cdp_strerror(rc));
		goto out;
	}

	/* the pool's files are seekable outputs (cdpool(7)): a FIFO or a
	 * device named data.mdb is refused before LMDB opens it; they are
	 * LMDB's own (CDP_OUT_POOL) in a folder made below if need be */
	for (int i = 0; i < 2; i++) {
		char path[4200], msg[4400];
		snprintf(path, sizeof path, "%s/%s", o->db, i ? "lock.mdb" : "data.mdb");
		if ((rc = cdp_out_check(path, CDP_OUT_SEEK | CDP_OUT_POOL | CDP_OUT_NEWDIR, msg,
		                        sizeof msg))) {
			rc = pack_seterr(&p, rc, "%s", msg);
			goto out;
		}
	}
	p.made = made = stat(o->db, &st) != 0 && errno == ENOENT;
	for (int i = 0; !made && i < 2; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", o->db, i ? "lock.mdb" : "data.mdb");
		if (lstat(path, &st) != 0 && errno == ENOENT)
			p.fresh |= 1 << i;
	}
	/* LMDB writes data.mdb's first meta pages, with this map size in them,
	 * before its own mmap fails; a pool left so cannot be read by anyone
	 * (LMDB never lowers a stored size), so ask first. */
	if ((rc = cdp_lmdb_can_map(o->map_size))) {
		int tib = o->map_size >= ((size_t)1 << 40);
		rc = pack_seterr(&p, rc, "cannot open '%s': --map-size %.4g %s (%zu bytes) is "
		                 "more than this process can map: %s", o->db,
		                 (double)o->map_size / (tib ? 1099511627776.0 : 1073741824.0),
		                 tib ? "TiB" : "GiB", o->map_size, cdp_strerror(rc));
		goto out;
	}
	if ((rc = cdp_pool_open(o->db, flags, o->map_size, &p.pool))) {
		rc = pack_seterr(&p, rc, "cannot open '%s': %s", o->db,
		                 cdp_pool_strerror(&p.pool, rc, why, sizeof why));
		goto out;
	}
	p.pool_open = 1;
	rc = cdp_pool_meta_get(&p.pool, NULL, "shape", &p.tmp);
	if (rc == CDP_OK)
		rc = cdp_pool_shape_parse((char *)p.tmp.p, &p.shape);
	if (rc == CDP_OK)
		p.have_shape = 1;
	else if (rc != MDB_NOTFOUND) {
		rc = pack_meta_error(&p, "shape", rc);
		goto out;
	}
	if (o->folders && (rc = pack_folders_check_moved(&p, ents, nents)))
		goto out;
	/* --resume keeps what a key holds, and a plain pack only adds keys: on
	 * a pool that an interrupted --replace left half replaced either would
	 * keep old records beside new ones, and its rescan would clear the
	 * mark that says so. The mark is also there while a --replace runs
	 * (from its first commit to its last), which nothing tells apart from
	 * an interrupted one: every reader holds the pool open as it does. */
	if (o->dup != CDP_DUP_REPLACE) {
		if ((rc = pack_pool_stale(&p, &stale, &replaced)) == CDP_OK && replaced)
			rc = pack_seterr(&p, CDP_EMISMATCH, "'%s': a cdp-lmdbpack --replace into "
			                 "it has not finished: wait for a running one to end, and "
			                 "re-run an interrupted one with --replace", o->db);
		if (rc)
			goto out;
	}
	cdp_lmdb_writer_init(&p.w, p.pool.env, p.pool.tiles, o->dup, o->txn_records,
	                     o->txn_bytes, pack_prepare, pack_finish, &p);
	p.w.same = pack_same_record;
	cdp_progress_start(&p.pg, o->progress, "cdp-lmdbpack", "packing", nents);
	pg = 1;

	rc = o->list || o->folders ? pack_list_pack(&p, ents, nents) : read_stream(&p, in);
	if (rc == CDP_OK)
		rc = flush(&p);
	if (rc == CDP_OK)
		rc = pack_rescan_if_needed(&p);
	/* Without per-commit fsync, one sync makes the finished pool durable. */
	if (rc == CDP_OK && o->nosync && (rc = mdb_env_sync(p.pool.env, 1)))
		rc = pack_seterr(&p, rc, "cannot sync '%s': %s", o->db, cdp_strerror(rc));
	if (rc == CDP_OK)
		note_wide(&p);
out:
	if (pg)
		cdp_progress_finish(&p.pg, rc == CDP_OK);
	res->seconds = cdp_now() - t0;
	pack_list_free(ents, nents);
	cdp_lmdb_writer_free(&p.w);
	/* An open that failed may still have created data.mdb and lock.mdb;
	 * a pool whose data.mdb was there is not new, whatever it lacked */
	if (rc && (made || (p.fresh & 1)))
		remove_new_pool(&p, &lockfd);
	if (p.pool_open)
		cdp_pool_close(&p.pool);
	if (lockfd >= 0)
		close(lockfd);
	for (size_t i = 0; i < p.nsrc; i++) {
		if (p.src[i] && !p.src[i]->mapped) {
			cdp_source_free(&p.src[i]->s);
			free(p.src[i]->desc);
		}
		free(p.src[i]);
	}
	free(p.src);
	for (size_t i = 0; i < p.itcap; i++) {
		cdp_stats_free(&p.it[i].st);
		cdp_classes_free(&p.it[i].cl);
	}
	free(p.it);
	for (size_t i = 0; i < p.mcap; i++)
		free(p.mdesc[i]);
	free(p.mdesc);
	free(p.midx);
	for (size_t i = 0; p.cnames_own && i < p.ncnames; i++)
		free(p.cnames_own[i]);
	free(p.cnames_own);
	cdp_buf_free(&p.scratch);
	cdp_buf_free(&p.tmp);
	if (rc && !p.errset)
		pack_seterr(&p, rc, "'%s': %s", o->db, cdp_strerror(rc));
	return rc;
}
