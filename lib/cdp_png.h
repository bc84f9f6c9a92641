/* cdp_png.h: writing PNG files with libpng (tile files, previews, plots).
 *
 * Writes go to "PATH.tmp.XXXXXX" and are renamed on success, so a failure
 * leaves no half-written PNG. Returns CDP_OK, an errno, or CDP_EFORMAT when
 * libpng reports an error.
 */
#ifndef CDP_PNG_H
#define CDP_PNG_H

#include <stdint.h>

/* channels 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA); depth 8 or 16.
 * pixels are interleaved rows (H, W, channels); 16-bit samples are native
 * uint16_t (byte-swapped to PNG's big-endian here). */
int cdp_png_write(const char *path, const void *pixels, int w, int h,
                  int channels, int depth);
/* Reads a PNG written by cdp_png_write (for tests and previews): allocates
 * *pixels (free()), fills w, h, channels, depth. */
int cdp_png_read(const char *path, void **pixels, int *w, int *h, int *channels,
                 int *depth);

#endif
