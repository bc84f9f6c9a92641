/* cdp_pool.c: opening a pool, its checksummed meta values, and the summary a
 * trainer loads (cdp_pool.h, cdp-pool(5)).
 *
 * Creation is idempotent and safe under concurrency: the sub-databases and
 * the format/uuid values are made inside one write txn that first looks for
 * them, and LMDB serializes write txns across processes, so two packers that
 * create the same pool at once agree on one uuid.
 */
#include "cdp_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_stats.h"
#include "cdp_stream.h"

#define CRC_LINE_LEN 15  /* "crc32=" + 8 hex + "\n" */

static int new_uuid(char out[33])
{
	unsigned char r[16];
	size_t got = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	while (got < sizeof r) {
		ssize_t n = read(fd, r + got, sizeof r - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			return e;
		}
		got += (size_t)n;
	}
	close(fd);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return CDP_OK;
}

/* Checks "format=cdpool-pool\nversion=N\n"; *version (may be NULL) is N. */
static int check_format_version(const char *text, unsigned long long *version)
{
	char v[32];
	char *end;
	unsigned long long ver;

	if (cdp_meta_field(text, "format", v, sizeof v) != CDP_OK ||
	    strcmp(v, CDP_POOL_FORMAT) != 0 ||
	    cdp_meta_field(text, "version", v, sizeof v) != CDP_OK ||
	    v[0] < '0' || v[0] > '9')
		return CDP_EFORMAT;
	errno = 0;
	ver = strtoull(v, &end, 10);
	if (*end || errno || ver < 1)
		return CDP_EFORMAT;
	if (version)
		*version = ver;
	return ver > CDP_POOL_VERSION ? CDP_EVERSION : CDP_OK;
}

static int check_format(const char *text)
{
	return check_format_version(text, NULL);
}

static int format_put(cdp_pool *p, MDB_txn *txn)
{
	char text[64];
	int n = snprintf(text, sizeof text, "format=%s\nversion=%d\n", CDP_POOL_FORMAT,
	                 CDP_POOL_VERSION);

	return cdp_pool_meta_put(p, txn, "format", text, (size_t)n);
}

int cdp_pool_format_upgrade(cdp_pool *p, MDB_txn *txn)
{
	cdp_buf b = {0};
	unsigned long long ver = 0;
	int rc = cdp_pool_meta_get(p, txn, "format", &b);

	if (rc == MDB_NOTFOUND)
		rc = CDP_EFORMAT;
	if (rc == CDP_OK)
		rc = check_format_version((const char *)b.p, &ver);
	cdp_buf_free(&b);
	if (rc == CDP_OK && ver < CDP_POOL_VERSION)
		rc = format_put(p, txn);
	return rc;
}

/* Creates the sub-databases and format/uuid values unless present. Only
 * an empty environment becomes a pool: one that holds anything without a
 * format value is another program's (or a 'tiles' of foreign records), and
 * adopting it would give readers a pool they refuse. The format is written
 * in the transaction that creates the sub-databases, so a pool of ours
 * never lacks it. */
static int create_txn(cdp_pool *p)
{
	MDB_txn *txn;
	MDB_dbi main_db;
	MDB_stat ms;
	cdp_buf b = {0};
	char text[64], uuid[33];
	int rc, n;

	if ((rc = cdp_lmdb_txn_begin(p->env, 0, &txn)) != 0)
		return rc;
	if ((rc = mdb_dbi_open(txn, NULL, 0, &main_db)) != 0 ||
	    (rc = mdb_stat(txn, main_db, &ms)) != 0 ||
	    (rc = mdb_dbi_open(txn, "tiles", MDB_CREATE, &p->tiles)) != 0 ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &p->meta)) != 0)
		goto fail;
	rc = cdp_pool_meta_get(p, txn, "format", &b);
	if (rc == MDB_NOTFOUND && ms.ms_entries != 0) {
		rc = CDP_EFORMAT;
		goto fail;
	}
	if (rc == MDB_NOTFOUND) {
		if ((rc = format_put(p, txn)) != 0 || (rc = new_uuid(uuid)) != 0)
			goto fail;
		n = snprintf(text, sizeof text, "uuid=%s\n", uuid);
		if ((rc = cdp_pool_meta_put(p, txn, "uuid", text, (size_t)n)) != 0)
			goto fail;
	} else if (rc != CDP_OK || (rc = check_format((const char *)b.p)) != CDP_OK) {
		goto fail;
	}
	cdp_buf_free(&b);
	return mdb_txn_commit(txn);
fail:
	cdp_buf_free(&b);
	mdb_txn_abort(txn);
	return rc;
}

/* Opens the existing sub-databases in a read txn (handles outlive it once
 * committed) and checks the format value. */
static int open_txn(cdp_pool *p)
{
	MDB_txn *txn;
	cdp_buf b = {0};
	int rc;

	if ((rc = cdp_lmdb_txn_begin(p->env, MDB_RDONLY, &txn)) != 0)
		return rc;
	rc = mdb_dbi_open(txn, "tiles", 0, &p->tiles);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", 0, &p->meta);
	if (rc == MDB_NOTFOUND)
		rc = CDP_ELMDB;
	if (rc == 0) {
		rc = cdp_pool_meta_get(p, txn, "format", &b);
		if (rc == MDB_NOTFOUND)
			rc = CDP_EFORMAT;
		if (rc == 0)
			rc = check_format((const char *)b.p);
	}
	cdp_buf_free(&b);
	if (rc != 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

int cdp_pool_open(const char *path, int flags, size_t mapsize, cdp_pool *p)
{
	unsigned int mflags = 0;
	int rc;

	memset(p, 0, sizeof *p);
	if (flags & CDP_POOL_RDONLY)
		mflags |= MDB_RDONLY | MDB_NOTLS;
	if (flags & CDP_POOL_NOSYNC)
		mflags |= MDB_NOSYNC;
	if (flags & CDP_POOL_NORDAHEAD)
		mflags |= MDB_NORDAHEAD;
	if ((flags & CDP_POOL_RDONLY) && (flags & CDP_POOL_CREATE))
		return CDP_EINVAL;
	rc = cdp_lmdb_env_open_sized(path, mflags, flags & CDP_POOL_CREATE, 2, mapsize,
	                             &p->env, &p->file_bytes, &p->need_bytes);
	/* a new pool's first pages met a full disk or ulimit -f */
	if (rc != 0)
		return cdp_lmdb_eio_cause(path, rc, 0);
	p->flags = flags;
	if (flags & CDP_POOL_CREATE) {
		while ((rc = create_txn(p)) == MDB_MAP_FULL)
			if ((rc = cdp_lmdb_grow(p->env)) != 0)
				break;
	} else {
		rc = open_txn(p);
	}
	if (rc == EIO)
		rc = cdp_lmdb_eio_cause(path, rc, 0);
	if (rc != 0)
		cdp_pool_close(p);
	return rc;
}

const char *cdp_pool_strerror(const cdp_pool *p, int rc, char *buf, size_t cap)
{
	/* the open's only CDP_EFORMAT: no format value, or another one */
	if (rc == CDP_EFORMAT)
		return "not a cdpool pool (no cdpool format record)";
	if (rc == MDB_READERS_FULL)
		return "LMDB reader table full: MDB_READERS_FULL: Environment maxreaders limit reached";
	if (rc != CDP_ETRUNC || !p || p->need_bytes == 0 || !buf || cap == 0)
		return cdp_strerror(rc);
	/* an empty file: no meta page says where its last page ends, and
	 * need_bytes is that of the two (cdp_lmdb.c's check_meta_pages) */
	if (p->file_bytes == 0)
		snprintf(buf, cap, "data.mdb is truncated: %llu bytes, shorter than LMDB's two meta "
		         "pages (%llu bytes)", (unsigned long long)p->file_bytes,
		         (unsigned long long)p->need_bytes);
	else
		snprintf(buf, cap, "data.mdb is truncated: %llu bytes, its last page ends at byte %llu",
		         (unsigned long long)p->file_bytes, (unsigned long long)p->need_bytes);
	return buf;
}

void cdp_pool_close(cdp_pool *p)
{
	if (p && p->env) {
		cdp_lmdb_forget(p->env);
		mdb_env_close(p->env);
	}
	if (p)
		memset(p, 0, sizeof *p);
}

int cdp_pool_meta_decode(const void *value, size_t n, cdp_buf *out)
{
	const char *s = value;
	size_t body;
	char want[CRC_LINE_LEN + 1];
	int rc;

	if (n < CRC_LINE_LEN)
		return CDP_ECRC;
	body = n - CRC_LINE_LEN;
	if (body && s[body - 1] != '\n')
		return CDP_ECRC;
	snprintf(want, sizeof want, "crc32=%08lx\n",
	         (unsigned long)cdp_crc32(0, s, body));
	if (body > UINT32_MAX || memcmp(s + body, want, CRC_LINE_LEN) != 0)
		return CDP_ECRC;
	if ((rc = cdp_buf_reserve(out, body + 1)) != CDP_OK)
		return rc;
	memcpy(out->p, s, body);
	out->p[body] = '\0';
	out->len = body;
	return CDP_OK;
}

int cdp_pool_meta_get(cdp_pool *p, MDB_txn *txn, const char *name, cdp_buf *out)
{
	MDB_txn *own = NULL;
	MDB_val k = { strlen(name), (void *)name }, v;
	int rc;

	if (!txn) {
		if ((rc = cdp_lmdb_txn_begin(p->env, MDB_RDONLY, &own)) != 0)
			return rc;
		txn = own;
	}
	rc = mdb_get(txn, p->meta, &k, &v);
	if (rc == 0)
		rc = cdp_pool_meta_decode(v.mv_data, v.mv_size, out);
	if (own)
		mdb_txn_abort(own);
	return rc;
}

int cdp_pool_meta_put(cdp_pool *p, MDB_txn *txn, const char *name,
                      const char *text, size_t len)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	char *s;
	int rc;

	if ((len && text[len - 1] != '\n') || memchr(text, '\0', len) ||
	    len > UINT32_MAX || k.mv_size == 0)
		return CDP_EINVAL;
	if (!(s = malloc(len + CRC_LINE_LEN + 1)))
		return CDP_ENOMEM;
	memcpy(s, text, len);
	snprintf(s + len, CRC_LINE_LEN + 1, "crc32=%08lx\n",
	         (unsigned long)cdp_crc32(0, text, len));
	v.mv_size = len + CRC_LINE_LEN;
	v.mv_data = s;
	rc = mdb_put(txn, p->meta, &k, &v, 0);
	free(s);
	return rc;
}

int cdp_meta_field(const char *text, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	const char *p = text, *at = NULL;

	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t ll = eol ? (size_t)(eol - p) : strlen(p);

		/* a repeated key: which of the two would be meant? */
		if (ll > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
			if (at)
				return CDP_EFORMAT;
			at = p;
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	if (!at)
		return MDB_NOTFOUND;
	p = strchr(at, '\n');
	kl = (p ? (size_t)(p - at) : strlen(at)) - kl - 1;
	if (kl >= cap)
		return CDP_ERANGE;
	memcpy(out, at + strlen(key) + 1, kl);
	out[kl] = '\0';
	return CDP_OK;
}

void cdp_pool_class_names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

int cdp_pool_class_names_parse(const char *text, char ***names, size_t *n)
{
	size_t lines = 0, k;
	const char *s;
	char **v;

	*names = NULL;
	*n = 0;
	/* non-empty lines (an empty one is skipped, as Python's reader does) */
	for (s = text; *s; s++)
		lines += *s != '\n' && (s[1] == '\n' || s[1] == '\0');
	if (lines == 0)
		return CDP_OK;
	if (!(v = calloc(lines, sizeof *v)))
		return CDP_ENOMEM;
	/* lines distinct ids below lines: exactly 0..lines-1 */
	for (s = text; *s;) {
		const char *eol = strchr(s, '\n'), *name;
		size_t len = eol ? (size_t)(eol - s) : strlen(s);
		if (len == 0) {
			s++;
			continue;
		}
		if (len < 9 || memcmp(s, "class.", 6) != 0 || s[6] < '0' || s[6] > '9')
			goto bad;
		for (k = 0, name = s + 6; *name >= '0' && *name <= '9'; name++)
			if ((k = k * 10 + (size_t)(*name - '0')) >= lines)
				goto bad;
		if (*name != '=' || name + 1 >= s + len || v[k])
			goto bad;
		name++;
		if (!(v[k] = strndup(name, len - (size_t)(name - s)))) {
			cdp_pool_class_names_free(v, lines);
			return CDP_ENOMEM;
		}
		s += len + (eol != NULL);
	}
	*names = v;
	*n = lines;
	return CDP_OK;
bad:
	cdp_pool_class_names_free(v, lines);
	return CDP_EFORMAT;
}

int cdp_pool_class_names(cdp_pool *p, MDB_txn *txn, char ***names, size_t *n)
{
	cdp_buf b = { 0 };
	int rc = cdp_pool_meta_get(p, txn, "class_names", &b);

	*names = NULL;
	*n = 0;
	if (rc == CDP_OK)
		rc = cdp_pool_class_names_parse((const char *)b.p, names, n);
	cdp_buf_free(&b);
	return rc == MDB_NOTFOUND ? CDP_OK : rc;
}

static const char *const label_names[] = { "none", "u8", "u16", "class",
                                           "f32", "multi" };

/* The label kinds whose records carry a label length (cdp_record.h). */
static int kind_has_len(int kind)
{
	return kind == CDP_LABEL_F32 || kind == CDP_LABEL_MULTI;
}

int cdp_pool_shape_format(const cdp_record *r, cdp_buf *out)
{
	char len[32] = "";
	int n;

	if (!cdp_dtype_name(r->dtype) || r->label_kind < CDP_LABEL_NONE ||
	    r->label_kind > CDP_LABEL_MULTI)
		return CDP_EINVAL;
	/* label_len only for the kinds that have one, so the shape of every
	 * pool that could exist before them reads as it always did. */
	if (kind_has_len(r->label_kind))
		snprintf(len, sizeof len, "label_len=%" PRIu32 "\n", r->label_len);
	n = snprintf(NULL, 0, "dtype=%s\nbands=%" PRIu32 "\nheight=%" PRIu32
	             "\nwidth=%" PRIu32 "\nlabel=%s\n%signore=%" PRIu32 "\n",
	             cdp_dtype_name(r->dtype), r->bands, r->height, r->width,
	             label_names[r->label_kind], len, r->label_ignore);
	if (cdp_buf_reserve(out, (size_t)n + 1) != CDP_OK)
		return CDP_ENOMEM;
	snprintf((char *)out->p, (size_t)n + 1, "dtype=%s\nbands=%" PRIu32
	         "\nheight=%" PRIu32 "\nwidth=%" PRIu32 "\nlabel=%s\n%signore=%"
	         PRIu32 "\n", cdp_dtype_name(r->dtype), r->bands, r->height,
	         r->width, label_names[r->label_kind], len, r->label_ignore);
	out->len = (size_t)n;
	return CDP_OK;
}

/* Says what is wrong in why[cap] (may be NULL); returns CDP_EFORMAT. */
static int say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (why && cap) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
		cdp_msg_escape(why, cap);   /* it quotes the meta's bytes */
	}
	return CDP_EFORMAT;
}

/* The line key= of text into v[cap]: 0, or CDP_EFORMAT with why naming
 * the record (what) and the problem. */
static int field(const char *text, const char *what, const char *key, char *v, size_t cap,
                 char *why, size_t wcap)
{
	int rc = cdp_meta_field(text, key, v, cap);

	if (rc == MDB_NOTFOUND)
		return say(why, wcap, "%s record: no %s line", what, key);
	if (rc == CDP_EFORMAT)
		return say(why, wcap, "%s record: repeated key '%s'", what, key);
	if (rc != CDP_OK)
		return say(why, wcap, "%s record: %s is too long", what, key);
	return CDP_OK;
}

static int field_u32(const char *text, const char *key, uint32_t min, uint32_t max,
                     uint32_t *out, char *why, size_t cap)
{
	char v[32], *end;
	unsigned long long x;

	if (field(text, "shape", key, v, sizeof v, why, cap))
		return CDP_EFORMAT;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end || errno || x < min || x > max)
		return say(why, cap, "shape record: %s=%s is not a number in %" PRIu32 "..%" PRIu32,
		           key, v, min, max);
	*out = (uint32_t)x;
	return CDP_OK;
}

static int shape_parse(const char *text, cdp_record *r, char *why, size_t cap)
{
	char v[32];
	int rc;

	memset(r, 0, sizeof *r);
	if (field(text, "shape", "dtype", v, sizeof v, why, cap))
		return CDP_EFORMAT;
	if (!(r->dtype = cdp_dtype_parse(v)))
		return say(why, cap, "shape record: unknown dtype '%s'", v);
	if ((rc = field_u32(text, "bands", 1, CDP_RECORD_MAXDIM, &r->bands, why, cap)) ||
	    (rc = field_u32(text, "height", 1, CDP_RECORD_MAXDIM, &r->height, why, cap)) ||
	    (rc = field_u32(text, "width", 1, CDP_RECORD_MAXDIM, &r->width, why, cap)) ||
	    (rc = field_u32(text, "ignore", 0, UINT32_MAX, &r->label_ignore, why, cap)))
		return rc;
	if (field(text, "shape", "label", v, sizeof v, why, cap))
		return CDP_EFORMAT;
	for (r->label_kind = CDP_LABEL_NONE; r->label_kind <= CDP_LABEL_MULTI; r->label_kind++)
		if (strcmp(v, label_names[r->label_kind]) == 0)
			break;
	if (r->label_kind > CDP_LABEL_MULTI)
		return say(why, cap, "shape record: unknown label kind '%s'", v);
	if (kind_has_len(r->label_kind))
		return field_u32(text, "label_len", 1, CDP_RECORD_MAXLABEL, &r->label_len, why, cap);
	if (cdp_meta_field(text, "label_len", v, sizeof v) != MDB_NOTFOUND)
		return say(why, cap, "shape record: label_len with label=%s", label_names[r->label_kind]);
	return CDP_OK;
}

int cdp_pool_shape_parse(const char *text, cdp_record *r)
{
	return shape_parse(text, r, NULL, 0);
}

static int is_hex32(const char *u)
{
	size_t i;

	for (i = 0; u[i]; i++)
		if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f')))
			return 0;
	return i == 32;
}

/* Number of "source." meta names. */
static int count_sources(cdp_pool *p, MDB_txn *txn, uint32_t *n)
{
	static const char prefix[] = "source.";
	MDB_cursor *cur;
	MDB_val k = { sizeof prefix - 1, (void *)prefix }, v;
	int rc;

	*n = 0;
	if ((rc = mdb_cursor_open(txn, p->meta, &cur)) != 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < sizeof prefix - 1 ||
		    memcmp(k.mv_data, prefix, sizeof prefix - 1) != 0)
			break;
		(*n)++;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND || rc == 0 ? CDP_OK : rc;
}

/* Meta name k of the source list: 1 with *idx its NNNNNN when it is
 * "source." and a number below 2^32 spelled as readers look it up
 * (source.%06u: "source.1" or "source.0000001" would be read as absent),
 * 0 for another "source." name, -1 past the list (the names sort
 * together). */
static int source_index(const MDB_val *k, uint32_t *idx)
{
	static const char prefix[] = "source.";
	const size_t pl = sizeof prefix - 1;
	const char *d = k->mv_data;
	uint64_t x = 0;
	size_t j;
	char canon[24];

	if (k->mv_size < pl || memcmp(d, prefix, pl) != 0)
		return -1;
	for (j = pl; j < k->mv_size && d[j] >= '0' && d[j] <= '9' && x <= UINT32_MAX; j++)
		x = x * 10 + (uint64_t)(d[j] - '0');
	if (j == pl || j < k->mv_size || x > UINT32_MAX ||
	    (size_t)snprintf(canon, sizeof canon, "%06" PRIu64, x) != j - pl)
		return 0;
	*idx = (uint32_t)x;
	return 1;
}

/* The sources of a pool of records, as every reader relies on them: each
 * source.NNNNNN parses as cdp_source_parse reads it, and they are numbered
 * 0..n-1 without a gap (records index them), n >= 1. A missing one would
 * surface as LMDB's MDB_NOTFOUND wherever a reader looked it up, or not
 * at all. *n counts them. */
static int check_sources(cdp_pool *p, MDB_txn *txn, uint64_t tiles, uint32_t *n, cdp_buf *b,
                         char *why, size_t cap)
{
	static const char prefix[] = "source.";
	MDB_cursor *cur;
	MDB_val k = { sizeof prefix - 1, (void *)prefix }, v;
	unsigned char *seen = NULL;
	uint32_t max = 0;
	char name[40], sw[160];
	int rc;

	if ((rc = count_sources(p, txn, n)) != CDP_OK)
		return rc;
	if (*n == 0)
		return say(why, cap, "meta 'source.000000' is missing (the pool holds %" PRIu64
		           " tiles and describes no source)", tiles);
	if (!(seen = calloc(*n, 1)))
		return CDP_ENOMEM;
	if ((rc = mdb_cursor_open(txn, p->meta, &cur)) != 0) {
		free(seen);
		return rc;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint32_t idx = 0;
		int is = source_index(&k, &idx);
		cdp_source src;

		if (is < 0)
			break;
		snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 32 ? k.mv_size : 32),
		         (const char *)k.mv_data);
		if (!is) {
			rc = say(why, cap, "meta '%s': not a source name (source.NNNNNN, at least six "
			         "digits, no extra leading zero)", name);
			break;
		}
		if ((rc = cdp_pool_meta_decode(v.mv_data, v.mv_size, b)) != CDP_OK) {
			say(why, cap, "meta '%s': %s", name, cdp_strerror(rc));
			break;
		}
		if ((rc = cdp_source_parse_why(b->p, b->len, &src, sw, sizeof sw)) != CDP_OK) {
			if (rc != CDP_ENOMEM)
				rc = say(why, cap, "meta '%s': %s", name, sw);
			break;
		}
		if (src.index != idx)
			rc = say(why, cap, "meta '%s': index=%" PRIu32 " is not the index of its name",
			         name, src.index);
		cdp_source_free(&src);
		if (rc != CDP_OK)
			break;
		if (idx < *n)
			seen[idx] = 1;
		if (idx > max)
			max = idx;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = CDP_OK;
	for (uint32_t i = 0; rc == CDP_OK && i < *n; i++)
		if (!seen[i])
			rc = say(why, cap, "meta 'source.%06" PRIu32 "' is missing (the pool describes "
			         "%" PRIu32 " sources, up to source.%06" PRIu32 ")", i, *n, max);
	free(seen);
	return rc;
}

/* Meta value name into b: 0, MDB_NOTFOUND (nothing said), or another code
 * with why naming the record. */
static int get(cdp_pool *p, MDB_txn *txn, const char *name, cdp_buf *b, char *why, size_t cap)
{
	int rc = cdp_pool_meta_get(p, txn, name, b);

	if (rc != CDP_OK && rc != MDB_NOTFOUND)
		say(why, cap, "%s record: %s", name, cdp_strerror(rc));
	return rc;
}

int cdp_pool_meta_check(cdp_pool *p, MDB_txn *txn, char uuid[33], uint64_t *tiles,
                        char *why, size_t cap)
{
	cdp_buf b = { 0 };
	char v[32];
	unsigned long long ver;
	uint64_t n = 0;
	MDB_stat ms;
	int rc, counted;

	if ((rc = get(p, txn, "format", &b, why, cap)) == MDB_NOTFOUND)
		rc = say(why, cap, "not a cdpool pool: no format record");
	if (rc)
		goto out;
	if (cdp_meta_field((const char *)b.p, "format", v, sizeof v) != CDP_OK ||
	    strcmp(v, CDP_POOL_FORMAT) != 0) {
		rc = say(why, cap, "not a cdpool pool: wrong format record");
		goto out;
	}
	if ((rc = check_format_version((const char *)b.p, &ver)) == CDP_EVERSION) {
		say(why, cap, "pool version %llu is newer than this program reads (%d)", ver,
		    CDP_POOL_VERSION);
		goto out;
	}
	if (rc) {
		rc = say(why, cap, "not a cdpool pool: bad version in the format record");
		goto out;
	}
	if ((rc = get(p, txn, "uuid", &b, why, cap)) == MDB_NOTFOUND)
		rc = say(why, cap, "not a cdpool pool: no uuid record");
	if (rc || (rc = field((const char *)b.p, "uuid", "uuid", uuid, 33, why, cap)))
		goto out;
	if (!is_hex32(uuid)) {
		rc = say(why, cap, "uuid record: '%s' is not 32 lowercase hex digits", uuid);
		goto out;
	}
	/* no count: a pool never filled, which must then hold no record */
	rc = get(p, txn, "count", &b, why, cap);
	if ((counted = rc == CDP_OK)) {
		if ((rc = field((const char *)b.p, "count", "tiles", v, sizeof v, why, cap)))
			goto out;
		if (cdp_parse_u64(v, 0, UINT64_MAX, &n) != CDP_OK) {
			rc = say(why, cap, "count record: tiles=%s is not a number", v);
			goto out;
		}
	} else if (rc != MDB_NOTFOUND) {
		goto out;
	}
	/* records and meta are committed together: a mismatch is damage */
	if ((rc = mdb_stat(txn, p->tiles, &ms)) != 0) {
		say(why, cap, "tiles database: %s", cdp_strerror(rc));
		goto out;
	}
	if (ms.ms_entries != n && !counted)
		rc = say(why, cap, "no count record but the pool holds %zu tiles",
		         (size_t)ms.ms_entries);
	else if (ms.ms_entries != n)
		rc = say(why, cap, "count record says %" PRIu64 " tiles but the pool holds %zu",
		         n, (size_t)ms.ms_entries);
	*tiles = n;
out:
	cdp_buf_free(&b);
	return rc;
}
static int load(cdp_pool *p, MDB_txn *txn, cdp_pool_info *info, cdp_buf *b, char *why,
                size_t cap)
{
	cdp_record shape;
	cdp_stats st = {0};
	char sw[160];
	int rc;

	if ((rc = cdp_pool_meta_check(p, txn, info->uuid, &info->tiles, why, cap)))
		return rc;
	rc = get(p, txn, "shape", b, why, cap);
	if (rc == MDB_NOTFOUND && info->tiles)
		return say(why, cap, "no shape record but the pool holds %" PRIu64 " tiles",
		           info->tiles);
	if (rc == MDB_NOTFOUND)
		return count_sources(p, txn, &info->nsources);
	if (rc || (rc = shape_parse((const char *)b->p, &shape, why, cap)))
		return rc;
	info->dtype = shape.dtype;
	info->label_kind = shape.label_kind;
	info->bands = shape.bands;
	info->height = shape.height;
	info->width = shape.width;
	info->label_ignore = shape.label_ignore;
	info->label_len = shape.label_len;

	/* the stats are written with the records: none is damage */
	if ((rc = get(p, txn, "stats", b, why, cap)) == MDB_NOTFOUND && info->tiles)
		return say(why, cap, "no stats record but the pool holds %" PRIu64 " tiles",
		           info->tiles);
	if (rc == MDB_NOTFOUND)
		rc = cdp_stats_init(&st, shape.dtype, shape.bands);
	else if (rc == CDP_OK && (rc = cdp_stats_parse_why((const char *)b->p, b->len, &st, sw,
	                                                   sizeof sw)) != CDP_OK)
		return rc == CDP_ENOMEM ? rc : say(why, cap, "stats record: %s", sw);
	if (rc)
		return rc;
	if (st.dtype != shape.dtype || st.bands != shape.bands)
		rc = say(why, cap, "stats record: dtype %s and %" PRIu32 " bands, the shape's %s "
		         "and %" PRIu32, cdp_dtype_name(st.dtype), st.bands,
		         cdp_dtype_name(shape.dtype), shape.bands);
	/* Stale stats (an interrupted --replace) would mislead a trainer. */
	else if (st.stale)
		rc = say(why, cap, "stats record: stale (a cdp-lmdbpack --replace into the pool "
		         "has not finished: it recomputes them when it ends, and an "
		         "interrupted one when re-run with --replace)");
	else if (!(info->band = calloc(shape.bands, sizeof *info->band)))
		rc = CDP_ENOMEM;
	for (uint32_t i = 0; rc == CDP_OK && i < shape.bands; i++) {
		cdp_band_info *bi = &info->band[i];
		bi->count = st.b[i].count;
		cdp_stats_result(&st, i, &bi->mean, &bi->std, &bi->min, &bi->max);
	}
	cdp_stats_free(&st);
	return rc ? rc : info->tiles ? check_sources(p, txn, info->tiles, &info->nsources, b, why, cap)
	          : count_sources(p, txn, &info->nsources);
}

int cdp_pool_info_load(cdp_pool *p, cdp_pool_info *info, char *why, size_t cap)
{
	return cdp_pool_info_load_txn(p, NULL, info, why, cap);
}

int cdp_pool_info_load_txn(cdp_pool *p, MDB_txn *in, cdp_pool_info *info, char *why,
                           size_t cap)
{
	MDB_txn *txn = in;
	cdp_buf b = {0};
	int rc;

	memset(info, 0, sizeof *info);
	if (why && cap)
		why[0] = '\0';
	if (!txn && (rc = cdp_lmdb_txn_begin(p->env, MDB_RDONLY, &txn)) != 0)
		return rc;
	rc = load(p, txn, info, &b, why, cap);
	if (!in)
		mdb_txn_abort(txn);
	cdp_buf_free(&b);
	if (rc)
		cdp_pool_info_free(info);
	if (rc && why && cap && !why[0])
		snprintf(why, cap, "%s", cdp_strerror(rc));
	return rc;
}

void cdp_pool_info_free(cdp_pool_info *info)
{
	if (!info)
		return;
	free(info->band);
	info->band = NULL;
}

int cdp_pool_source_names(cdp_pool *p, MDB_txn *txn, cdp_source_name **out, size_t *n)
{
	static const char prefix[] = "source.";
	const size_t pl = sizeof prefix - 1;
	MDB_txn *own = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k = { pl, (void *)prefix }, v;
	cdp_source_name *s = NULL;
	size_t m = 0, cap = 0;
	cdp_buf b = { 0 };
	char name[256];
	int rc;

	*out = NULL;
	*n = 0;
	if (!txn) {
		if ((rc = cdp_lmdb_txn_begin(p->env, MDB_RDONLY, &own)) != 0)
			return rc;
		txn = own;
	}
	if ((rc = mdb_cursor_open(txn, p->meta, &cur)) != 0)
		goto out;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint32_t idx = 0;
		int is = source_index(&k, &idx);

		if (is < 0)
			break;
		if (!is)
			continue;
		if ((rc = cdp_pool_meta_decode(v.mv_data, v.mv_size, &b)) != 0)
			goto out;
		if (cdp_meta_field((const char *)b.p, "name", name, sizeof name) != CDP_OK)
			continue;
		if (m == cap) {
			size_t nc = cap ? cap * 2 : 16;
			cdp_source_name *ns = realloc(s, nc * sizeof *ns);
			if (!ns) {
				rc = CDP_ENOMEM;
				goto out;
			}
			s = ns;
			cap = nc;
		}
		if (!(s[m].name = strdup(name))) {
			rc = CDP_ENOMEM;
			goto out;
		}
		s[m++].index = (uint32_t)idx;
	}
	if (rc == MDB_NOTFOUND)
		rc = CDP_OK;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (own)
		mdb_txn_abort(own);
	cdp_buf_free(&b);
	if (rc) {
		cdp_pool_source_names_free(s, m);
		return rc;
	}
	*out = s;
	*n = m;
	return CDP_OK;
}

void cdp_pool_source_names_free(cdp_source_name *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

void cdp_pool_srcstats_name(uint32_t i, char *name, size_t cap)
{
	snprintf(name, cap, "srcstats.%06" PRIu32, i);
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Folds each distinct source's sums once, in ascending index order, so the
 * merged float statistics come out the same whatever order src[] is in. */
static int source_stats(cdp_pool *p, MDB_txn *txn, uint32_t *src, size_t n, cdp_stats *out,
                        uint32_t *missing, cdp_buf *b, char *why, size_t cap)
{
	cdp_stats one;
	char name[40], sw[160];
	int rc;

	qsort(src, n, sizeof *src, by_u32);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && src[i] == src[i - 1])
			continue;
		cdp_pool_srcstats_name(src[i], name, sizeof name);
		if ((rc = cdp_pool_meta_get(p, txn, name, b)) != CDP_OK) {
			if (rc == MDB_NOTFOUND && missing)
				*missing = src[i];
			if (rc != MDB_NOTFOUND)
				say(why, cap, "meta '%s': %s", name, cdp_strerror(rc));
			return rc;
		}
		if ((rc = cdp_stats_parse_why((const char *)b->p, b->len, &one, sw, sizeof sw)))
			return rc == CDP_ENOMEM ? rc : say(why, cap, "meta '%s': %s", name, sw);
		if (one.stale)
			rc = say(why, cap, "meta '%s': stale (a cdp-lmdbpack --replace has not "
			         "finished)", name);
		else if (out->bands == 0)
			rc = cdp_stats_init(out, one.dtype, one.bands);
		if (rc == CDP_OK && (rc = cdp_stats_merge(out, &one)) == CDP_ESHAPE)
			rc = say(why, cap, "meta '%s': dtype %s and %" PRIu32 " bands, unlike the "
			         "sources before it", name, cdp_dtype_name(one.dtype), one.bands);
		cdp_stats_free(&one);
		if (rc)
			return rc;
	}
	return CDP_OK;
}

int cdp_pool_source_stats(cdp_pool *p, MDB_txn *txn, const uint32_t *src, size_t n,
                          cdp_stats *out, uint32_t *missing, char *why, size_t cap)
{
	MDB_txn *own = NULL;
	cdp_buf b = {0};
	uint32_t *s;
	int rc;

	memset(out, 0, sizeof *out);
	if (why && cap)
		why[0] = '\0';
	if (n == 0 || !src)
		return CDP_EINVAL;
	if (!(s = malloc(n * sizeof *s)))
		return CDP_ENOMEM;
	memcpy(s, src, n * sizeof *s);
	if (!txn && (rc = cdp_lmdb_txn_begin(p->env, MDB_RDONLY, &own)) != 0) {
		free(s);
		return rc;
	}
	rc = source_stats(p, own ? own : txn, s, n, out, missing, &b, why, cap);
	if (own)
		mdb_txn_abort(own);
	free(s);
	cdp_buf_free(&b);
	if (rc)
		cdp_stats_free(out);
	if (rc && rc != MDB_NOTFOUND && why && cap && !why[0])
		snprintf(why, cap, "%s", cdp_strerror(rc));
	return rc;
}
