/* cdp_pool.h: the central data pool, an LMDB environment with two named
 * sub-databases. Defined here and in man/cdp-pool.5.
 *
 *   tiles: key (NAME_ROW_COL, cdp_key.h; a chip packed by cdp-lmdbpack --list
 *          is keyed by its file stem, by --folders CLASS/STEM) -> tile
 *          record (cdp_record.h)
 *   meta:  name -> text value of "name=value\n" lines, the last line being
 *          "crc32=XXXXXXXX\n" (lowercase hex of zlib crc32 over the
 *          preceding bytes of the value). Names:
 *     format      "format=cdpool-pool\nversion=2\n" (version 1: float stats as
 *                 Neumaier sums, still read; a writer that rewrites a
 *                 version 1 pool's stats raises it to 2 in the same txn)
 *     uuid        "uuid=<32 lowercase hex>\n"           (set at creation)
 *     shape       dtype=, bands=, height=, width=, label= (none|u8|u16|class),
 *                 ignore= (label ignore value); set by the first record
 *     count       "tiles=N\n" (absent only in a pool never filled: 0; a
 *                 count other than the tiles' entries is damage)
 *     stats       the text form of cdp_stats.h: "dtype=", "bands=", then per
 *                 band b (1-based) "band.b.count=", ".sum=", ".sumsq=" (float
 *                 dtypes: the scaled ".exp=", ".smean=", ".sm2=" instead),
 *                 ".min=", ".max=", ".mean=", ".std="; a "stale=1" line
 *                 marks stats that no longer match the records (a --replace
 *                 that has not finished: running, or interrupted)
 *     classes     "class.K=count\n" per label class id seen (ignore excluded;
 *                 scalar classes count tiles)
 *     source.NNNNNN  one per source raster (NNNNNN its 0-based index, 6 or
 *                 more digits): the 'S' frame body (cdp_stream.h) with the
 *                 pool's index; records' source fields index this list
 *     srcstats.NNNNNN  the stats text (as "stats") of the records of source
 *                 NNNNNN alone: exact sums that combine over any set of
 *                 sources (cdp_stats_merge) to what a scan of their records
 *                 would give; written with the source since cdp-lmdbpack of
 *                 checkpoint version 5's release; a source without one
 *                 (an older pool's) has no per-source sums
 *     class_names "class.K=NAME\n" for K = 0.., from cdp-lmdbpack --classes or
 *                 --folders; absent when no names were given
 *     cmdline     "cmd.N=<UTC time> <argv>\n", one line per cdp-lmdbpack run
 *                 that changed the pool
 *
 * A value names a key once: cdp_meta_field refuses a repeated one.
 *
 * Every pool change is one committed transaction holding both the records and
 * the meta that describes them, so a killed writer leaves a consistent pool.
 * Readers open it MDB_RDONLY | MDB_NOTLS; LMDB errors come back as LMDB's
 * own codes (cdp_strerror() decodes them), system errors as errno values.
 */
#ifndef CDP_POOL_H
#define CDP_POOL_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>
#include "cdp_record.h"
#include "cdp_stats.h"

#define CDP_POOL_FORMAT  "cdpool-pool"
#define CDP_POOL_VERSION 2

enum {
	CDP_POOL_RDONLY    = 1,  /* MDB_RDONLY | MDB_NOTLS */
	CDP_POOL_CREATE    = 2,  /* create the directory and sub-databases */
	CDP_POOL_NOSYNC    = 4,  /* MDB_NOSYNC: commits are not fsynced */
	CDP_POOL_NORDAHEAD = 8   /* MDB_NORDAHEAD */
};

typedef struct cdp_pool {
	MDB_env *env;
	MDB_dbi tiles, meta;
	int flags;
	/* After CDP_ETRUNC from cdp_pool_open: data.mdb's size and the size
	 * its pages need (cdp_lmdb_env_open_sized); 0 otherwise. */
	uint64_t file_bytes, need_bytes;
} cdp_pool;

typedef struct cdp_band_info {
	uint64_t count;
	double mean, std, min, max;
} cdp_band_info;

/* What a trainer or a tool needs to know about a pool without reading tiles. */
typedef struct cdp_pool_info {
	char uuid[33];
	int dtype, label_kind;
	uint32_t bands, height, width, label_ignore;
	uint32_t label_len;    /* the shape's label_len (kinds 4, 5), else 0 */
	uint64_t tiles;
	cdp_band_info *band;   /* [bands], owned */
	uint32_t nsources;
} cdp_pool_info;

/* Opens (and with CDP_POOL_CREATE creates, with a new uuid and format meta)
 * the pool at path, a directory. mapsize 0 keeps LMDB's (or the file's).
 * CDP_ELMDB when a sub-database is missing, CDP_EFORMAT/CDP_EVERSION when the
 * format value is not ours, CDP_EFORMAT also when CDP_POOL_CREATE finds an
 * environment that holds data but no format value (not a pool: it is
 * never adopted; only an empty one is made a pool), CDP_ETRUNC when data.mdb is shorter than its
 * last page (p->file_bytes and p->need_bytes say by how much; nothing is
 * mapped), errno values (ENOENT, ENOTDIR, EACCES). */
int  cdp_pool_open(const char *path, int flags, size_t mapsize, cdp_pool *p);
void cdp_pool_close(cdp_pool *p);
/* The phrase for an rc of cdp_pool_open on p: cdp_strerror(rc), for
 * CDP_EFORMAT "not a cdpool pool (no cdpool format record)", or for
 * CDP_ETRUNC "data.mdb is truncated: H bytes, its last page ends at byte N",
 * formatted into buf[cap]. Returns buf or the static phrase. */
const char *cdp_pool_strerror(const cdp_pool *p, int rc, char *buf, size_t cap);

/* Reads meta value `name` in txn (NULL: own read txn) into out (NUL-terminated,
 * out->len excludes the crc line), verifying its crc. MDB_NOTFOUND if absent,
 * CDP_ECRC if corrupt. */
int  cdp_pool_meta_get(cdp_pool *p, MDB_txn *txn, const char *name, cdp_buf *out);
/* The check and copy of cdp_pool_meta_get on a stored value[n]. */
int  cdp_pool_meta_decode(const void *value, size_t n, cdp_buf *out);
/* Writes meta value `name` (text without the crc line) in a write txn. */
int  cdp_pool_meta_put(cdp_pool *p, MDB_txn *txn, const char *name,
                       const char *text, size_t len);
/* Raises the pool's format value to CDP_POOL_VERSION in a write txn, as any
 * writer of the stats text must (a reader of an older version could not
 * read it); CDP_OK when it is current already. */
int  cdp_pool_format_upgrade(cdp_pool *p, MDB_txn *txn);
/* Finds the line "key=..." in a meta text and copies its value (to end of
 * line) into out[cap]. MDB_NOTFOUND if absent, CDP_EFORMAT if two lines
 * have the key (which would be meant?), CDP_ERANGE if it does not fit. */
int  cdp_meta_field(const char *text, const char *key, char *out, size_t cap);

/* The class_names meta text ("class.K=NAME\n" for K = 0..n-1, each once,
 * in any order; NAME the rest of the line, not empty) into names[n] in
 * class order (*names malloc'ed, each name too; NULL and 0 for an empty
 * text): CDP_EFORMAT for another line or a set of K that is not 0..n-1,
 * CDP_ENOMEM. cdp_pool_class_names reads the pool's (txn NULL: own read
 * txn): NULL, 0 when it has none; also CDP_ECRC and LMDB's codes. */
int  cdp_pool_class_names_parse(const char *text, char ***names, size_t *n);
int  cdp_pool_class_names(cdp_pool *p, MDB_txn *txn, char ***names, size_t *n);
void cdp_pool_class_names_free(char **names, size_t n);

/* The "shape" meta text of a record layout (dtype, bands, height, width,
 * label kind and ignore value of r), and back into those fields of r (the
 * others zeroed; CDP_EFORMAT on a bad text). */
int  cdp_pool_shape_format(const cdp_record *r, cdp_buf *out);
int  cdp_pool_shape_parse(const char *text, cdp_record *r);

/* Checks, in txn, what every reader of a pool relies on: the format value
 * (ours, a version not newer than CDP_POOL_VERSION), the uuid (into
 * uuid[33]) and the count (into *tiles), which must equal the tiles
 * database's entries: an absent count counts 0 (a pool created and never
 * filled), so a pool of records without one is refused as one whose count
 * differs. CDP_EFORMAT (also for a repeated key), CDP_EVERSION, CDP_ECRC,
 * LMDB's codes; why[cap] (may be NULL) then says what is wrong, naming the
 * record ("count record says 8 tiles but the pool holds 7", "uuid record:
 * no uuid line", "not a cdpool pool: no format record"). */
int  cdp_pool_meta_check(cdp_pool *p, MDB_txn *txn, char uuid[33], uint64_t *tiles,
                         char *why, size_t cap);

/* Loads and validates, after cdp_pool_meta_check, the shape and the stats
 * (required once the pool holds records, of the shape's dtype and bands,
 * not stale, their integer sums consistent: cdp_stats_parse) and, once
 * it holds records, the sources (each source.NNNNNN as cdp_source_parse
 * reads it, numbered 0..n-1 with none missing, at least one: "meta
 * 'source.000000' is missing (...)"). CDP_EFORMAT,
 * CDP_EVERSION, CDP_ECRC, CDP_ENOMEM, LMDB's codes; why[cap] (may be NULL)
 * says what is wrong ("shape record: repeated key 'width'", "stats record:
 * band 1: min 300 is above max 244"; cdp_strerror's phrase where nothing
 * more is known). An empty pool (no shape yet) loads with bands 0. */
int  cdp_pool_info_load(cdp_pool *p, cdp_pool_info *info, char *why, size_t cap);
/* The same in txn (NULL: own read txn), which stays open. */
int  cdp_pool_info_load_txn(cdp_pool *p, MDB_txn *txn, cdp_pool_info *info, char *why,
                            size_t cap);
void cdp_pool_info_free(cdp_pool_info *info);

/* A source's index (the number of its meta "source.NNNNNN") and name (its
 * name= line: cdp-tile's NAME, the whole key of a cdp-lmdbpack --list or
 * --folders chip). */
typedef struct cdp_source_name {
	uint32_t index;
	char *name;
} cdp_source_name;

/* The index and name of every source.NNNNNN meta of the pool, in txn (NULL:
 * own read txn), into *out (malloc'ed, *n of them, in meta order; free
 * with cdp_pool_source_names_free). Reads only the meta database: one
 * cursor pass over the sources' values, each checked by its crc. A meta
 * name whose NNNNNN is not a number below 2^32, or a value without one
 * name= line, is left out (a reader that needs that source says what is
 * wrong with it). CDP_ECRC, CDP_ENOMEM, LMDB's codes. */
int  cdp_pool_source_names(cdp_pool *p, MDB_txn *txn, cdp_source_name **out, size_t *n);
void cdp_pool_source_names_free(cdp_source_name *v, size_t n);

/* The meta name of source index i's sums ("srcstats.NNNNNN") into name[cap]. */
void cdp_pool_srcstats_name(uint32_t i, char *name, size_t cap);
/* The sums of the sources src[n] (any order, duplicates counted once)
 * combined into *out (initialised here; free with cdp_stats_free) in txn
 * (NULL: own read txn). MDB_NOTFOUND when a source has no sums (an older
 * pool), *missing then naming it; CDP_EFORMAT when one is stale (an
 * unfinished --replace), malformed or inconsistent (cdp_stats_parse), or of
 * another dtype or band count than the others; CDP_EINVAL for n 0;
 * CDP_ECRC, CDP_ENOMEM. why[cap] (may be NULL) says what is wrong but for
 * MDB_NOTFOUND, naming the source and band: "meta 'srcstats.000000': band
 * 1: sum 999999999 is outside count * min .. count * max (...)". */
int  cdp_pool_source_stats(cdp_pool *p, MDB_txn *txn, const uint32_t *src, size_t n,
                           cdp_stats *out, uint32_t *missing, char *why, size_t cap);

#endif
