/* cdp_png.h: writing PNG files with libpng (tile files, previews, plots).
 *
 * Writes go through the output policy (cdp_out.h, a seekable output): a
 * temporary renamed on success, so a failure leaves no half-written PNG (and
 * no temporary file), and a FIFO, device or directory at PATH is refused
 * (CDP_ESPECIAL), as are a checkpoint and an LMDB database file
 * (CDP_EKEEP). Returns CDP_OK, an errno (from open, write, close or
 * rename: ENOENT for a missing directory, ENOSPC, ...), CDP_EINVAL for bad
 * arguments, or CDP_EFORMAT when libpng reports an error. Nothing is printed: libpng's messages are suppressed.
 */
#ifndef CDP_PNG_H
#define CDP_PNG_H

#include <stdint.h>

#include "cdp_out.h"

/* channels 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA); depth 8 or 16.
 * pixels are interleaved rows (H, W, channels); 16-bit samples are native
 * uint16_t (byte-swapped to PNG's big-endian here). */
int cdp_png_write(const char *path, const void *pixels, int w, int h,
                  int channels, int depth);
/* The same into an output opened by cdp_out_open (its descriptor, then
 * closed with cdp_out_close), left for the caller to commit or abort: a
 * program that renames all its files at the end (cdp-tile -O). */
int cdp_png_write_out(cdp_out *o, const void *pixels, int w, int h,
                      int channels, int depth);
/* Reads a PNG written by cdp_png_write (for tests and previews): allocates
 * *pixels (free()), fills w, h, channels, depth, in the layout that
 * cdp_png_write takes. Palette and 1/2/4-bit gray files are expanded to 8 bits.
 * Errors: an errno (ENOENT, EIO), CDP_EMAGIC (not a PNG), CDP_ETRUNC (file
 * ends early), CDP_EFORMAT (corrupt), CDP_EUNSUP, CDP_ENOMEM; the outputs are
 * untouched on failure. */
int cdp_png_read(const char *path, void **pixels, int *w, int *h, int *channels,
                 int *depth);

#endif
