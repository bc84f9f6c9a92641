/* cdp_lmdb.h: LMDB helpers shared by the pool and the packer.
 *
 * cdp_lmdb_env_open() opens an environment directory with the flags cdpool
 * uses. The batched writer buffers copies of key/value pairs and writes each
 * batch in one write transaction, the way bulk loaders (BVLC/caffe's
 * db_lmdb.cpp, mdb_load) do:
 *
 *   begin txn; prepare hook; put every item; finish hook; commit
 *
 * - An item whose key sorts after the database's last key (read inside the
 *   txn, so concurrent writers are seen) is put with MDB_APPEND; others with
 *   MDB_NOOVERWRITE, and the duplicate mode decides what a present key does:
 *   CDP_DUP_ERROR fails the batch with MDB_KEYEXIST (the key is in
 *   w->failkey), CDP_DUP_SKIP leaves the stored value, CDP_DUP_REPLACE
 *   overwrites it (or leaves it when the bytes are identical).
 * - MDB_MAP_FULL anywhere (a put, a hook, the commit) aborts the txn, doubles
 *   the map size and redoes the whole batch, hooks included. Hooks must
 *   therefore compute everything from what they read in the txn they are
 *   given, never from process state they changed in an earlier attempt.
 *   MDB_MAP_RESIZED (another process grew the map) adopts the new size and
 *   retries.
 * - The prepare hook runs before the puts and may rewrite item values in
 *   place (same length). The finish hook sees each item's status and writes
 *   the meta that describes the batch, so both commit atomically.
 *
 * Return values are CDP_OK, LMDB's codes unchanged (MDB_KEYEXIST,
 * MDB_BAD_VALSIZE, ...), errno values (EACCES, ...; a commit that LMDB
 * reports as EIO because a write came up short on a file system with no
 * space left is ENOSPC), CDP_ENOMEM, or whatever a hook returned.
 */
#ifndef CDP_LMDB_H
#define CDP_LMDB_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#define CDP_LMDB_KEYMAX 511        /* mdb_env_get_maxkeysize() of stock LMDB */
#define CDP_LMDB_TXN_RECORDS 1000
#define CDP_LMDB_TXN_BYTES ((size_t)256 << 20)

/* Opens the environment at path, a directory (created, mode 0777 & ~umask,
 * when create is set). flags are MDB_* env flags (MDB_RDONLY, MDB_NOTLS,
 * MDB_NOSYNC, MDB_NORDAHEAD); mapsize 0 keeps LMDB's default or the size
 * recorded in the file. A recorded size this process cannot map (written by
 * a writer with a larger address space or a huge --map-size; LMDB never
 * shrinks it) is ENOMEM from mdb_env_open: then the file's own size,
 * rounded up to 1 MiB, is mapped instead, which holds every page.
 * With MDB_RDONLY, a lock file this user cannot open for writing (EACCES:
 * lock.mdb not writable, or missing in a directory they cannot write) is
 * not needed: the environment is opened with MDB_NOLOCK, as LMDB itself
 * does on read-only media (EROFS), so a pool in another user's directory
 * reads as Python's lock=False reads it. Without the lock such a reader is
 * not protected from a writer (the owner's) changing the pool meanwhile:
 * pools that are not being written are what it is for. */
int cdp_lmdb_env_open(const char *path, unsigned int flags, int create,
                      unsigned int maxdbs, size_t mapsize, MDB_env **env);
/* cdp_lmdb_env_open that also checks the data file against the newest meta
 * page before anything maps it: a file shorter than (me_last_pgno + 1) *
 * page size (cut by a copy, a full disk or truncate(1)) would raise SIGBUS
 * at the first read of a missing page, so it is CDP_ETRUNC, with *have the
 * file's bytes and *need the bytes its pages take (either may be NULL;
 * both are 0 on any other outcome). A read-only open of an empty data.mdb
 * (LMDB says EBADF) is CDP_ETRUNC too, *need then the bytes of LMDB's two
 * meta pages. cdp_lmdb_env_open checks the same. */
int cdp_lmdb_env_open_sized(const char *path, unsigned int flags, int create,
                            unsigned int maxdbs, size_t mapsize, MDB_env **env,
                            uint64_t *have, uint64_t *need);

/* The cause of an EIO of LMDB (which turns a short write into EIO) on the
 * pool in folder dir, about to write need more bytes: EFBIG when its
 * data.mdb has reached the file-size limit (ulimit -f) within 64 KiB,
 * ENOSPC when its file system has less than need + 1 MiB free; else rc
 * (also any rc other than EIO). */
int cdp_lmdb_eio_cause(const char *dir, int rc, uint64_t need);

/* 0 when this process can reserve `bytes` of address space for a map (an
 * mmap(PROT_NONE, MAP_NORESERVE) of that size, undone at once), else
 * ENOMEM or another errno: LMDB creates data.mdb and lock.mdb before its own
 * mmap fails, so a writer asks first and creates nothing it cannot map. */
int cdp_lmdb_can_map(size_t bytes);

/* 1 when no other process has the environment at path open, and then
 * path's lock.mdb has its first byte locked exclusively (fcntl(2)) through
 * *fd, so that none can open it until this process lets go; 0 when another
 * process has it open or that cannot be told. Each process with an LMDB
 * environment open holds a shared lock on that byte, which mdb_env_open
 * waits for; taking it exclusively does not wait. A missing lock.mdb is
 * created; a missing directory is alone. *fd is -1 or a descriptor for
 * the caller to close, after closing any environment this process has
 * open at path: POSIX drops all of a process's locks on a file when it
 * closes any descriptor of it, so closing *fd or that environment
 * releases both, and what must happen under the lock (the removal of a
 * pool) happens before either is closed. */
int cdp_lmdb_env_alone(const char *path, int *fd);

/* mdb_txn_begin that adopts a map grown by another process (MDB_MAP_RESIZED:
 * mdb_env_set_mapsize(env, 0), then begins again), except while this
 * process holds a long transaction on env (cdp_lmdb_txn_hold): LMDB may
 * only remap with no transaction open, and the held one's record pointers
 * would point into the unmapped old map, so MDB_MAP_RESIZED is returned
 * then. On an env whose grow failed (cdp_lmdb_broken) it begins nothing and
 * returns that grow's errno. *txn is NULL on failure. */
int cdp_lmdb_txn_begin(MDB_env *env, unsigned int flags, MDB_txn **txn);

/* cdp_lmdb_txn_begin for a transaction that stays open while others are
 * begun (a reader's snapshot whose values it keeps pointers to): counted
 * until cdp_lmdb_txn_release, which aborts it. CDP_ENOMEM when the
 * wrapper's table of envs is full. */
int cdp_lmdb_txn_hold(MDB_env *env, unsigned int flags, MDB_txn **txn);
void cdp_lmdb_txn_release(MDB_env *env, MDB_txn *txn);

/* Doubles the map size; no transaction of this process may be open.
 * MDB_MAP_FULL if it cannot grow any further. Any other failure of the
 * new mmap (ENOMEM under ulimit -v) leaves the env unmapped by LMDB: it is
 * then marked broken, every later cdp_lmdb_txn_begin and cdp_lmdb_grow on
 * it returns that errno without touching it, and it may only be closed. */
int cdp_lmdb_grow(MDB_env *env);

/* The errno of env's failed grow, *want (may be NULL) the size it tried;
 * 0 when no grow failed. */
int cdp_lmdb_broken(MDB_env *env, size_t *want);

/* Drops what the wrapper knows of env: call before mdb_env_close
 * (cdp_pool_close does), since another env may get the same address. */
void cdp_lmdb_forget(MDB_env *env);

enum { CDP_DUP_ERROR = 0, CDP_DUP_SKIP = 1, CDP_DUP_REPLACE = 2 };

/* Item status after a put attempt. */
enum {
	CDP_PUT_PENDING = 0,
	CDP_PUT_NEW = 1,        /* key was absent; written */
	CDP_PUT_SKIPPED = 2,    /* key present, CDP_DUP_SKIP: not written */
	CDP_PUT_SAME = 3,       /* key present with identical bytes: not written */
	CDP_PUT_REPLACED = 4    /* key present, CDP_DUP_REPLACE: overwritten */
};

typedef struct cdp_lmdb_item {
	MDB_val key, val;       /* into the writer's buffer; set during a flush */
	size_t koff, voff;      /* offsets of key and value in that buffer */
	int status;             /* CDP_PUT_* */
} cdp_lmdb_item;

/* A hook gets the txn, the batch's items [n] and the writer's arg. */
typedef int (*cdp_lmdb_hook)(MDB_txn *txn, cdp_lmdb_item *items, size_t n,
                             void *arg);

typedef struct cdp_lmdb_writer {
	MDB_env *env;
	MDB_dbi dbi;
	int dup;                      /* CDP_DUP_* */
	size_t max_items, max_bytes;  /* batch caps */
	cdp_lmdb_hook prepare, finish;/* either may be NULL */
	void *arg;
	/* CDP_DUP_SKIP: 1 when a present key's stored value, other bytes than
	 * the one put, is still the same item (a record packed from the same
	 * raster, named by another source index); 0 fails the batch with
	 * MDB_KEYEXIST, the key in failkey. NULL (the default) skips any. */
	int (*same)(const MDB_val *stored, const MDB_val *put, void *arg);

	cdp_lmdb_item *items;         /* [n] buffered items */
	size_t n, cap;
	unsigned char *buf;           /* their keys and values */
	size_t len, bufcap;
	int flushed;                  /* items are a committed batch */

	/* Totals over committed batches. */
	uint64_t written;             /* CDP_PUT_NEW + CDP_PUT_REPLACED */
	uint64_t skipped;             /* CDP_PUT_SKIPPED + CDP_PUT_SAME */
	uint64_t replaced;
	uint64_t bytes;               /* value bytes written */
	uint64_t commits, grows;

	/* The key of the item whose put failed (MDB_KEYEXIST, MDB_BAD_VALSIZE). */
	char failkey[CDP_LMDB_KEYMAX + 1];
	size_t failkey_len;
} cdp_lmdb_writer;

/* max_items 0 / max_bytes 0 take CDP_LMDB_TXN_RECORDS / CDP_LMDB_TXN_BYTES. */
void cdp_lmdb_writer_init(cdp_lmdb_writer *w, MDB_env *env, MDB_dbi dbi,
                          int dup, size_t max_items, size_t max_bytes,
                          cdp_lmdb_hook prepare, cdp_lmdb_hook finish,
                          void *arg);
/* Buffers a copy of the pair. Items of the last committed batch stay
 * readable (with their status) until this call. A key longer than
 * CDP_LMDB_KEYMAX or empty is MDB_BAD_VALSIZE. */
int  cdp_lmdb_writer_add(cdp_lmdb_writer *w, const void *key, size_t klen,
                         const void *val, size_t vlen);
/* 1 when the buffered items reach either cap. */
int  cdp_lmdb_writer_full(const cdp_lmdb_writer *w);
/* Writes and commits the buffered items (nothing when there are none). On
 * failure nothing of the batch is committed and the items stay buffered. */
int  cdp_lmdb_writer_flush(cdp_lmdb_writer *w);
/* Drops the buffered items without writing them. */
void cdp_lmdb_writer_discard(cdp_lmdb_writer *w);
void cdp_lmdb_writer_free(cdp_lmdb_writer *w);

/* "LMDB: 0.9.24", the version compiled against (for --version). */
const char *cdp_lmdb_version(void);

#endif
