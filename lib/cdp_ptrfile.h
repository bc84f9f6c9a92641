/* cdp_ptrfile.h: the pointer file, a shuffled list of pool keys.
 * Defined here and in man/cdp-keys.5.
 *
 * Text, one header line then one key per line, each ending in '\n':
 *   #cdpool-keys 1 uuid=<32 hex> seed=<u64> count=<N> crc32=<8 hex>
 *   #cdpool-keys 2 uuid=<32 hex> seed=<u64> count=<N> repeats=<0|1> crc32=<8 hex>
 *   KEY
 *   ...
 * uuid is the pool's meta uuid; seed the shuffle seed (0 when unshuffled);
 * count the number of key lines; repeats=1 (version 2 only) says that a
 * key may appear on several lines on purpose (an oversampled list,
 * cdp-keyshuffle --oversample); crc32 is zlib's crc32 over all the bytes
 * after the header line (the key lines with their newlines). Keys are
 * of cdp_key.h's grammar (NAME_ROW_COL tiles, NAME or CLASS/NAME chips),
 * no whitespace. Both versions are read; a list without repeats is
 * written as version 1, so that readers older than version 2 read it.
 */
#ifndef CDP_PTRFILE_H
#define CDP_PTRFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdp_key.h"

#define CDP_PTRFILE_MAGIC   "#cdpool-keys"
#define CDP_PTRFILE_VERSION 2      /* the newest read and written */
#define CDP_PTRFILE_REPEATS 1      /* cdp_ptrfile_write_flags: repeats=1 */

typedef struct cdp_keylist {
	char uuid[33];
	uint64_t seed;
	int repeats;        /* the header's repeats=1: a key may recur */
	size_t count;
	char **keys;        /* [count], pointers into data */
	size_t *lens;       /* [count] key lengths */
	char *data;         /* owned storage */
} cdp_keylist;

/* Writes header and keys to f; returns an errno on a write failure. The
 * header is version 1 (no repeats). */
int  cdp_ptrfile_write(FILE *f, const char *uuid, uint64_t seed,
                       char *const *keys, const size_t *lens, size_t count);
/* The same with flags: 0 writes as cdp_ptrfile_write does; with
 * CDP_PTRFILE_REPEATS a version 2 header with repeats=1 (the keys may
 * recur). Other bits: CDP_EINVAL. */
int  cdp_ptrfile_write_flags(FILE *f, const char *uuid, uint64_t seed, unsigned flags,
                             char *const *keys, const size_t *lens, size_t count);
/* Where a read failed: line is the 1-based offending line (the header is
 * line 1; 0 when no line applies). For CDP_EDUPKEY, line is the key's second
 * appearance, first its first and key the key itself; otherwise first is 0
 * and key empty. */
typedef struct cdp_ptrfile_where {
	size_t line;
	size_t first;
	char key[CDP_KEY_MAX];
	/* CDP_ESYNTAX of a key line: what is wrong with it ("key longer than
	 * 255 bytes", "empty key line", "key holds a space or a control
	 * byte"), a static phrase; else NULL */
	const char *why;
} cdp_ptrfile_where;

/* Reads and validates a whole pointer file: CDP_EMAGIC, CDP_EVERSION
 * (not 1 or 2), CDP_ESYNTAX (bad header or a key line with whitespace or
 * empty; repeats= other than 0 or 1),
 * CDP_ETRUNC (fewer lines than count), CDP_EFORMAT (more lines, or no final
 * newline), CDP_ECRC, CDP_EDUPKEY (a key on two lines in a list without
 * repeats=1; checked after the CRC, in O(n) expected time), CDP_ENOMEM, or an errno. On error kl is empty
 * and *line gets the 1-based offending line (0 when it does not apply); w,
 * which may be NULL, gets the detail of cdp_ptrfile_where. */
int  cdp_ptrfile_read_where(const char *path, cdp_keylist *kl, cdp_ptrfile_where *w);
/* The same checks on the bytes buf[len] of a whole file (copied; kl does
 * not point into buf). */
int  cdp_ptrfile_parse_where(const void *buf, size_t len, cdp_keylist *kl,
                             cdp_ptrfile_where *w);
/* cdp_ptrfile_read_where reporting only the line (NULL allowed). */
int  cdp_ptrfile_read(const char *path, cdp_keylist *kl, size_t *line);
void cdp_keylist_free(cdp_keylist *kl);

#endif
