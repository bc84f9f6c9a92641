/* cdp_png.c: PNG writing and reading with libpng.
 *
 * libpng reports errors by longjmp() to the setjmp() in the calling function.
 * Its default handlers print to stderr, which lib/ must not do, so both
 * directions install error and warning callbacks that stay silent; the I/O is
 * done by our own callbacks too, so that a failing fwrite() or fread() can
 * record errno (ENOSPC, EIO) or "truncated" before libpng turns it into a
 * generic error. Locals that change between setjmp() and a possible longjmp()
 * are volatile, as C11 7.13.2.1 requires for their values to survive.
 *
 * Writes go through the output policy (cdp_out.h): a temporary renamed over
 * PATH only after fclose() succeeded, a device or FIFO refused. There is no
 * fsync(): the rename protects readers from half-written files if
 * the process fails, not from a power cut, and tile writers create many small
 * files for which an fsync each would dominate the run time.
 */
#include "cdp_png.h"
#include "cdp_error.h"
#include "cdp_num.h"

#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the I/O callbacks learned before libpng gave up. */
struct png_io {
	FILE *fp;
	int err;       /* errno of a failed read or write, else 0 */
	int trunc;     /* the file ended early */
};

static void silent_error(png_structp png, png_const_charp msg)
{
	(void)msg;
	png_longjmp(png, 1);
}

static void silent_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

static void io_write(png_structp png, png_bytep data, png_size_t len)
{
	struct png_io *io = png_get_io_ptr(png);

	if (fwrite(data, 1, len, io->fp) != len) {
		io->err = errno ? errno : EIO;
		png_error(png, "write error");
	}
}

static void io_flush(png_structp png)
{
	struct png_io *io = png_get_io_ptr(png);

	if (fflush(io->fp) != 0) {
		io->err = errno ? errno : EIO;
		png_error(png, "write error");
	}
}

static void io_read(png_structp png, png_bytep data, png_size_t len)
{
	struct png_io *io = png_get_io_ptr(png);

	if (fread(data, 1, len, io->fp) != len) {
		if (ferror(io->fp))
			io->err = errno ? errno : EIO;
		else
			io->trunc = 1;
		png_error(png, "read error");
	}
}

static int host_is_little_endian(void)
{
	const uint16_t one = 1;

	return *(const unsigned char *)&one == 1;
}

/* The code for a libpng failure: what the I/O callbacks saw, else a format
 * error. */
static int io_rc(const struct png_io *io)
{
	if (io->err)
		return io->err;
	if (io->trunc)
		return CDP_ETRUNC;
	return CDP_EFORMAT;
}

/* Encodes the image into fp. Kept apart from the file handling so that the
 * function holding setjmp() has no locals that change after it. */
static int png_encode(FILE *fp, const void *pixels, int w, int h,
                      int channels, int depth, size_t rowbytes)
{
	static const int color_types[] = { 0, PNG_COLOR_TYPE_GRAY,
		PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
		PNG_COLOR_TYPE_RGB_ALPHA };
	struct png_io io = { fp, 0, 0 };
	png_structp png;
	png_infop info = NULL;
	int rc;

	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, silent_error,
	                              silent_warning);
	if (png)
		info = png_create_info_struct(png);
	if (!png || !info) {
		rc = CDP_ENOMEM;
		goto out;
	}
	if (setjmp(png_jmpbuf(png))) {
		rc = io_rc(&io);
		goto out;
	}
	png_set_write_fn(png, &io, io_write, io_flush);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth,
	             color_types[channels], PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	/* PNG stores 16-bit samples big-endian; ours are native. */
	if (depth == 16 && host_is_little_endian())
		png_set_swap(png);
	for (int y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)pixels + (size_t)y * rowbytes);
	png_write_end(png, info);
	rc = CDP_OK;
out:
	if (png)
		png_destroy_write_struct(&png, info ? &info : NULL);
	return rc;
}

int cdp_png_write_out(cdp_out *o, const void *pixels, int w, int h,
                      int channels, int depth)
{
	FILE *fp;
	size_t rowbytes;
	int fd, rc;

	if (!o || o->fd < 0 || !pixels || w <= 0 || h <= 0 || channels < 1 ||
	    channels > 4 || (depth != 8 && depth != 16))
		return CDP_EINVAL;
	if (cdp_mul_size((size_t)w, (size_t)channels * (size_t)(depth / 8),
	                 &rowbytes) != CDP_OK)
		return CDP_EOVERFLOW;
	/* the stream owns a duplicate, so that o's descriptor is closed by
	 * cdp_out_close (standard output stays open) */
	if ((fd = dup(o->fd)) < 0)
		return errno;
	if (!(fp = fdopen(fd, "wb"))) {
		rc = errno;
		close(fd);
		return rc;
	}
	rc = png_encode(fp, pixels, w, h, channels, depth, rowbytes);
	/* Delayed write errors (NFS, quota) first show at close. */
	if (fclose(fp) != 0 && rc == CDP_OK)
		rc = errno ? errno : EIO;
	if ((fd = cdp_out_close(o)) != CDP_OK && rc == CDP_OK)
		rc = fd;
	return rc;
}

int cdp_png_write(const char *path, const void *pixels, int w, int h,
                  int channels, int depth)
{
	cdp_out o;
	int rc;

	if (!path || !pixels)
		return CDP_EINVAL;
	if ((rc = cdp_out_open(&o, path, CDP_OUT_SEEK | CDP_OUT_AUX, 0666, NULL, 0)) != CDP_OK)
		return rc;
	rc = cdp_png_write_out(&o, pixels, w, h, channels, depth);
	if (rc == CDP_OK)
		return cdp_out_commit(&o, NULL, 0);
	if (rc > 0 && cdp_out_nospace(&o, NULL))
		rc = cdp_out_nospace(&o, NULL);   /* ENOSPC, EDQUOT or EFBIG */
	cdp_out_abort(&o);
	return rc;
}

int cdp_png_read(const char *path, void **pixels, int *w, int *h, int *channels,
                 int *depth)
{
	struct png_io io = { NULL, 0, 0 };
	png_structp png = NULL;
	png_infop info = NULL;
	unsigned char sig[8];
	/* Assigned after setjmp() and freed on the error path: volatile. */
	unsigned char *volatile buf = NULL;
	png_bytep *volatile rows = NULL;
	png_uint_32 pw, ph;
	int bit_depth, color_type, nch, rc;
	size_t rowbytes, total;

	if (!path || !pixels || !w || !h || !channels || !depth)
		return CDP_EINVAL;
	io.fp = fopen(path, "rb");
	if (!io.fp)
		return errno;
	if (fread(sig, 1, sizeof sig, io.fp) != sizeof sig) {
		rc = ferror(io.fp) ? errno : CDP_EMAGIC;
		goto out;
	}
	if (png_sig_cmp(sig, 0, sizeof sig) != 0) {
		rc = CDP_EMAGIC;
		goto out;
	}
	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, silent_error,
	                             silent_warning);
	if (png)
		info = png_create_info_struct(png);
	if (!png || !info) {
		rc = CDP_ENOMEM;
		goto out;
	}
	if (setjmp(png_jmpbuf(png))) {
		rc = io_rc(&io);
		goto out;
	}
	png_set_read_fn(png, &io, io_read);
	png_set_sig_bytes(png, sizeof sig);
	png_read_info(png, info);
	png_get_IHDR(png, info, &pw, &ph, &bit_depth, &color_type, NULL, NULL,
	             NULL);
	/* Other writers' palette and 1/2/4-bit gray images read as 8-bit. */
	if (color_type == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8)
		png_set_expand_gray_1_2_4_to_8(png);
	if (bit_depth == 16 && host_is_little_endian())
		png_set_swap(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	nch = png_get_channels(png, info);
	bit_depth = png_get_bit_depth(png, info);
	rowbytes = png_get_rowbytes(png, info);
	if (nch < 1 || nch > 4 || (bit_depth != 8 && bit_depth != 16) ||
	    pw == 0 || ph == 0 || pw > INT32_MAX || ph > INT32_MAX ||
	    rowbytes != (size_t)pw * (size_t)nch * (size_t)(bit_depth / 8)) {
		rc = CDP_EUNSUP;
		goto out;
	}
	if (cdp_mul_size(rowbytes, ph, &total) != CDP_OK) {
		rc = CDP_EOVERFLOW;
		goto out;
	}
	buf = malloc(total);
	rows = malloc(ph * sizeof *rows);
	if (!buf || !rows) {
		rc = CDP_ENOMEM;
		goto out;
	}
	for (png_uint_32 y = 0; y < ph; y++)
		rows[y] = buf + (size_t)y * rowbytes;
	png_read_image(png, rows);
	png_read_end(png, NULL);
	*pixels = buf;
	buf = NULL;
	*w = (int)pw;
	*h = (int)ph;
	*channels = nch;
	*depth = bit_depth;
	rc = CDP_OK;
out:
	if (png)
		png_destroy_read_struct(&png, info ? &info : NULL, NULL);
	free(rows);
	free(buf);
	fclose(io.fp);
	return rc;
}
