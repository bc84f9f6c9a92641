/* pack.h: cdp-lmdbpack's work as a library function, so tests can run it
 * in-process; tools/lmdbpack/main.c only parses options into cdp_pack_opts
 * and prints the outcome. See man/cdp-lmdbpack.1 and man/cdp-pool.5.
 */
#ifndef CDP_PACK_H
#define CDP_PACK_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#define CDP_PACK_MAP_SIZE ((size_t)1 << 30)   /* initial map size */

typedef struct cdp_pack_opts {
	const char *db;              /* pool directory (created if missing) */
	const char *list;            /* --list FILE, or NULL: a record stream */
	const char *folders;         /* --folders DIR (DIR/CLASS/IMAGE.tif), or NULL */
	const char *const *classes;  /* [nclasses] --classes names, or NULL */
	size_t nclasses;
	int multi_label;             /* --multi-label: --list lines give class sets,
	                                packed as multi-hot records (kind 5) */
	int dup;                     /* CDP_DUP_ERROR, _SKIP (--resume), _REPLACE */
	size_t txn_records;          /* records per write txn, >= 1 */
	size_t txn_bytes;            /* record bytes per write txn, >= 1 */
	size_t map_size;             /* initial LMDB map size; it grows */
	int nosync;                  /* --no-sync: commits are not fsynced */
	int zlevel;                  /* --list: 0 uncompressed, else zlib 1..9 */
	int has_ignore;              /* --list: label ignore value given */
	uint32_t ignore;
	int progress;                /* CDP_PROGRESS_* */
	const char *cmdline;         /* recorded in the pool's cmdline meta */
	/* NULL, or set non-zero (by a signal handler) to stop: the run ends
	 * before the next frame or chip as a failure (EINTR), cleaning up as
	 * any failure does (a first pack that committed nothing removes the
	 * pool). A blocked read of the stream must return EINTR for it to be
	 * seen at once: a handler installed without SA_RESTART. */
	const volatile sig_atomic_t *stop;
} cdp_pack_opts;

typedef struct cdp_pack_result {
	uint64_t read;               /* records read from the input */
	uint64_t written;            /* records written (new or replaced) */
	uint64_t skipped;            /* present keys left alone */
	uint64_t replaced;
	uint64_t bytes;              /* record bytes written */
	uint64_t commits;
	double seconds;
	/* Lines (each ending in '\n', without the program name) about the
	 * pool's bands whose range makes standardization meaningless
	 * (cdp_stats_wide), for the caller to print as warnings; "" if none. */
	char warn[1024];
} cdp_pack_result;

/* Defaults: stream input, duplicates are errors, 1000 records or 256 MiB
 * per txn, a 1 GiB initial map, synced commits. */
void cdp_pack_opts_init(cdp_pack_opts *o);

/* Packs the record stream read from in (refusing a terminal: CDP_ETTY), or
 * the chips listed in o->list, into the pool o->db. Returns CDP_OK or an
 * error code with a one-line message in err (without the program name).
 * What was committed before a failure stays, consistent with its meta; the
 * batch in progress is not committed. res is filled either way. */
int cdp_pack_run(const cdp_pack_opts *o, FILE *in, cdp_pack_result *res,
                 char *err, size_t errcap);

#endif
