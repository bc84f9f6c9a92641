/* cdp_key.h: pool keys (man/cdp-keys.5, "KEY GRAMMAR"), defined here once:
 *
 *   key   = [CLASS "/"] body
 *   body  = NAME "_" ROW "_" COL     a grid tile (cdp-tile)
 *         | NAME                     a chip (cdp-lmdbpack --list: its file
 *                                    stem; --folders: CLASS/STEM)
 *
 * A key whose body has the NAME_ROW_COL form is a tile, any other valid body
 * a chip. The scene of a key is the key without its "_ROW_COL" (the whole key
 * for a chip): what --val-by names. CLASS and NAME use the NAME alphabet
 * below, so '/' appears at most once and only as the CLASS separator; keys
 * never hold a space or control byte (safe in the pointer file).
 *
 * ROW and COL are grid indices, zero-padded to the number of digits of the
 * largest index on that axis (rows-1, cols-1), so byte order of the keys of one
 * raster equals row-major grid order. NAME may itself contain '_'; keys are
 * parsed from the right. A valid NAME is 1..CDP_NAME_MAX bytes of
 * [A-Za-z0-9._+-] (no '_'-only restriction); this keeps keys safe in file
 * names, shell globs and the line-based pointer file. LMDB limits keys to 511
 * bytes; CDP_KEY_MAX stays below that.
 */
#ifndef CDP_KEY_H
#define CDP_KEY_H

#include <stddef.h>
#include <stdint.h>

#define CDP_NAME_MAX 200
#define CDP_KEY_MAX  256   /* including the terminating NUL */

/* Number of decimal digits of the largest index n-1 (1 for n <= 10). */
int cdp_key_digits(uint64_t n);
/* 0 if name is a valid NAME, else CDP_EKEY. */
int cdp_key_name_check(const char *name);
/* Writes NAME_ROW_COL into buf (cap bytes); CDP_EKEY if name is invalid or
 * the key does not fit (buf is then ""). CDP_EINVAL if a digit count is
 * outside 1..20 or an index has more digits than its count, which would
 * break the sort order. */
int cdp_key_format(char *buf, size_t cap, const char *name, uint64_t row,
                   int row_digits, uint64_t col, int col_digits);
/* Splits a key into name (copied, NUL-terminated), row and col. The key is
 * keylen bytes and need not be NUL-terminated (LMDB keys are not). CDP_EKEY
 * if it is not NAME_ROW_COL with a valid NAME and 1..20-digit indices that
 * fit uint64_t, or keylen >= CDP_KEY_MAX; CDP_EINVAL if namecap is too small
 * (CDP_NAME_MAX + 1 always suffices). */
int cdp_key_parse(const char *key, size_t keylen, char *name, size_t namecap,
                  uint64_t *row, uint64_t *col);
/* Derives NAME from a path: the file stem (the part after the last '/',
 * without its last extension: "/a/b/scene.1.tif" gives "scene.1"; a leading
 * dot is not an extension), with each character outside the NAME alphabet
 * replaced by one '-' (a well-formed UTF-8 sequence is one character, any
 * other byte outside the alphabet one). CDP_EKEY if nothing is left, if the
 * NAME is longer than CDP_NAME_MAX or if it does not fit cap bytes with its
 * NUL. */
int cdp_key_stem(const char *path, char *name, size_t cap);
/* fnmatch(3)-style glob match of a NUL-terminated key (no FNM flags: '*'
 * crosses '_'). Returns 1 if key matches glob, else 0 (note: the opposite
 * sense of fnmatch's return value). */
int cdp_key_match(const char *glob, const char *key);

enum { CDP_KEY_TILE = 1, CDP_KEY_CHIP = 2 };
/* Splits any key of the grammar above (keylen bytes, need not be
 * NUL-terminated) into its scene (copied, NUL-terminated; CDP_KEY_MAX bytes
 * always suffice) and, for a tile, its row and col (0 for a chip). Returns
 * CDP_KEY_TILE or CDP_KEY_CHIP; CDP_EKEY if the key is not of the grammar or
 * keylen >= CDP_KEY_MAX; CDP_EINVAL if cap is too small. row, col may be
 * NULL. */
int cdp_key_scene(const char *key, size_t keylen, char *scene, size_t cap,
                  uint64_t *row, uint64_t *col);
/* 0 if s is a valid scene name, [CLASS/]NAME, else CDP_EKEY. */
int cdp_key_scene_check(const char *s);
/* Writes the chip key CLASS/STEM (or STEM when cls is NULL) into buf;
 * CDP_EKEY if a part is not a valid NAME or the key does not fit (buf is
 * then ""). */
int cdp_key_chip(char *buf, size_t cap, const char *cls, const char *stem);

#endif
