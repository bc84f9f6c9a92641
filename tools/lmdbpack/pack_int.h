/* pack_int.h: what pack.c, meta.c and list.c share inside cdp-lmdbpack; not
 * an interface (pack.h is). pack.c drives a run and buffers records, meta.c
 * holds the batch hooks that keep the pool's meta equal to its records, and
 * list.c reads --list chips through GDAL into the same record path.
 */
#ifndef CDP_PACK_INT_H
#define CDP_PACK_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_lmdb.h"
#include "cdp_pool.h"
#include "cdp_progress.h"
#include "cdp_record.h"
#include "cdp_stats.h"
#include "cdp_stream.h"
#include "pack.h"

#define PACK_MAX_SOURCES (1u << 24)    /* source indices of one input */

/* A source raster of the input, by its input index. */
typedef struct psrc {
	cdp_source s;                 /* parsed; freed once mapped */
	char *desc;                   /* pack_source_desc(s); freed once mapped */
	int mapped;                   /* pool index committed */
	uint32_t pool;                /* pool index (tentative until mapped) */
	unsigned attempt;             /* txn attempt that chose `pool` */
} psrc;

/* Per buffered record: its input source and its own contributions. */
typedef struct pitem {
	uint32_t src;
	cdp_stats st;
	cdp_classes cl;
} pitem;

/* One run's state; the writer's hooks get it as their arg. */
typedef struct pk {
	const cdp_pack_opts *o;
	cdp_pack_result *res;
	char *err;
	size_t errcap;
	int errset;
	const char *in;               /* input name for messages */
	cdp_pool pool;
	int pool_open;
	int made;                    /* this run creates the pool directory */
	int fresh;                   /* in a directory that was there: bit 0
	                                data.mdb, bit 1 lock.mdb, absent before
	                                this run (its to remove on failure) */
	cdp_lmdb_writer w;
	cdp_record shape;             /* the pool's, or the first record's */
	int have_shape;
	psrc **src;                   /* [nsrc] by input index, NULL if unseen */
	size_t nsrc;
	uint32_t src_base;            /* input index of the current stream's
	                                 source 0: streams read one after the
	                                 other each number theirs from 0 */
	uint32_t src_end;             /* 1 + the highest input index so far */
	pitem *it;                    /* [itcap] beside the writer's items */
	size_t itcap;
	char **mdesc;                 /* hash set: committed sources'
	                                 pack_source_desc texts */
	uint32_t *midx;               /* their pool indices */
	size_t mcap, mn;
	uint32_t known;               /* pool sources 0..known-1 are in the set */
	uint32_t batch_known;         /* known when the batch's txn began: later
	                                 indices are sources that txn creates */
	unsigned attempt;
	int cmd_done, replaced;
	char stamp[32];               /* UTC start time for cmdline */
	const char *const *cnames;    /* [ncnames] class names: --classes or --folders */
	size_t ncnames;
	char **cnames_own;            /* --folders or a stream's source: the names, owned */
	char cnames_from[300];        /* "source 'NAME'" that gave them, "" for --classes */
	cdp_buf scratch, tmp;
	cdp_progress pg;
} pk;

/* One line of a --list file. */
typedef struct list_entry {
	char *image;                  /* path, resolved against the list's dir */
	char *label;                  /* label raster path, or NULL */
	long cls;                     /* scalar class id, or -1 */
	uint8_t *multi;               /* --multi-label: (K) 0/1 per class, or NULL */
	int folder;                   /* --folders: keyed CLASS/STEM */
	size_t line;
	char *key;                    /* set by pack_list_keys */
} list_entry;

/* pack.c */

/* Keeps the first message only (the root cause) and returns rc. */
int pack_seterr(pk *p, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Takes ownership of s (its index is the input's). */
int pack_add_source(pk *p, cdp_source *s);
/* With o->stop set: the "interrupted" error (EINTR); else CDP_OK. */
int pack_stopped(pk *p);
/* Checks, measures and buffers one encoded record; flushes a full batch. */
int pack_add_record(pk *p, const char *key, const void *body, size_t len);
int pack_same_shape(const cdp_record *a, const cdp_record *b);
/* With class names (--classes, --folders): CDP_ERANGE and the error when
 * the histogram c holds ids at or beyond their number, naming the ids;
 * `what` says whose labels they are ("'in': record 'k'"). CDP_OK otherwise. */
int pack_check_class_ids(pk *p, const cdp_classes *c, const char *what);
/* Sets the "record is X; the pool holds Y" error; returns CDP_ESHAPE. */
int pack_shape_mismatch(pk *p, const char *key, const cdp_record *r,
                        const cdp_record *pool);

/* meta.c */

/* The source's text without its index (cdp_source_format with index 0),
 * malloc'd into *out: two sources are one pool source only when these are
 * equal, so a raster tiled again with other bands, name or label, or
 * another raster at the same relative path, gets a source of its own.
 * CDP_ENOMEM or cdp_source_format's error. */
int pack_source_desc(const cdp_source *s, char **out);

/* Sets the "meta 'name': reason" error; returns rc. */
int pack_meta_error(pk *p, const char *name, int rc);
/* cdp_lmdb_hook: maps the batch's sources to pool indices. */
int pack_prepare(MDB_txn *txn, cdp_lmdb_item *items, size_t n, void *arg);
int pack_same_record(const MDB_val *stored, const MDB_val *put, void *arg);
/* cdp_lmdb_hook: folds the written records into shape, count, stats,
 * classes and cmdline. */
int pack_finish(MDB_txn *txn, cdp_lmdb_item *items, size_t n, void *arg);
/* After --replace (or an interrupted one): recomputes stats, classes and
 * count from every record. */
int pack_rescan_if_needed(pk *p);
/* *stale = the pool's stats are stale: the meta's stored mark (an
 * interrupted --replace changed records; only a completed --replace
 * clears it), or version 1 sums that overflowed; *replaced (when not
 * NULL) = the stored mark. */
int pack_pool_stale(pk *p, int *stale, int *replaced);

/* list.c */

/* Reads p->in; on failure *out is NULL and *nout 0. */
int pack_list_read(pk *p, list_entry **out, size_t *nout);
/* Gives every entry its key (STEM, or CLASS/STEM for --folders) and
 * refuses two entries with one key (x y.tif and x-y.tif are both x-y),
 * naming both files: one would silently be skipped or refused later. */
int pack_list_keys(pk *p, list_entry *e, size_t n);
/* Packs the chips e[n] (keyed), each as one record of its own source. */
int pack_list_pack(pk *p, const list_entry *e, size_t n);
void pack_list_free(list_entry *e, size_t n);

/* folders.c */

/* Reads p->o->folders (DIR/CLASS/IMAGE.tif) into entries of class K = the K-th
 * folder name in byte order, and sets p->cnames to those names. */
int pack_folders_read(pk *p, list_entry **out, size_t *nout);
/* Refuses a pool record CLASS/STEM that the folders no longer hold while
 * another class folder now holds STEM (a chip moved to another class since
 * it was packed: the old record would stay, with the old class), naming
 * the chip and the record. e[n] are keyed entries. */
int pack_folders_check_moved(pk *p, const list_entry *e, size_t n);

#endif
