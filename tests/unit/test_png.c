/* test_png.c: PNG round trips and failure behaviour.
 *
 * Writes images of 8 and 16 bits with 1 to 4 channels, reads them back and
 * compares every sample; 16-bit values are chosen with distinct high and low
 * bytes so a missing byte swap shows. A second reader (libpng's simplified
 * API, which knows nothing of our byte order) confirms that 16-bit samples
 * are stored big-endian as PNG requires. Failures must leave no file behind.
 */
#include "cdp_error.h"
#include "cdp_png.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* Number of entries in dir other than . and .. */
static int dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void round_trip(int w, int h, int ch, int depth)
{
	size_t n = (size_t)w * h * ch, bytes = n * (size_t)(depth / 8);
	unsigned char *px8 = malloc(bytes);
	void *back = NULL;
	int rw = 0, rh = 0, rch = 0, rdepth = 0, rc;
	char path[128];

	if (!px8) {
		CHECK(0, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (depth == 8)
			px8[i] = (unsigned char)(i * 7 + 3);
		else
			((uint16_t *)(void *)px8)[i] = (uint16_t)(i * 2654435761u >> 7);
	}
	snprintf(path, sizeof path, "%s/t_%d_%d.png", dir, ch, depth);
	rc = cdp_png_write(path, px8, w, h, ch, depth);
	CHECK(rc == CDP_OK, "write %dx%dx%d/%d: %s", w, h, ch, depth,
	      cdp_strerror(rc));
	rc = cdp_png_read(path, &back, &rw, &rh, &rch, &rdepth);
	CHECK(rc == CDP_OK, "read %s: %s", path, cdp_strerror(rc));
	if (rc == CDP_OK) {
		CHECK(rw == w && rh == h && rch == ch && rdepth == depth,
		      "read back %dx%dx%d/%d", rw, rh, rch, rdepth);
		CHECK(memcmp(back, px8, bytes) == 0, "pixels differ (%d ch, %d bit)",
		      ch, depth);
	}
	free(back);
	free(px8);
}

/* libpng's simplified API decodes 16-bit gray as linear native uint16; our
 * samples must come out unchanged, proving big-endian storage on disk. */
static void independent_reader(void)
{
	const uint16_t px[4] = { 0x0102, 0xfffe, 0x8000, 0x00ff };
	uint16_t got[4] = { 0 };
	png_image img;
	char path[128];
	int rc;

	snprintf(path, sizeof path, "%s/indep.png", dir);
	rc = cdp_png_write(path, px, 2, 2, 1, 16);
	CHECK_RC(rc, CDP_OK);
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_file(&img, path)) {
		CHECK(0, "libpng cannot read %s: %s", path, img.message);
		return;
	}
	img.format = PNG_FORMAT_LINEAR_Y;
	CHECK(img.width == 2 && img.height == 2, "size %ux%u", img.width,
	      img.height);
	if (!png_image_finish_read(&img, NULL, got, 0, NULL)) {
		CHECK(0, "libpng decode: %s", img.message);
		return;
	}
	/* Without a gAMA chunk libpng takes 16-bit data as linear, so the
	 * values must come back exactly. */
	CHECK(memcmp(got, px, sizeof px) == 0,
	      "16-bit order wrong: %04x %04x %04x %04x", got[0], got[1], got[2],
	      got[3]);
}

static void failures(void)
{
	unsigned char px[12] = { 0 };
	void *back = NULL;
	int w, h, ch, depth;
	char path[128];
	FILE *f;

	/* A nonexistent directory: an errno, and nothing created anywhere. */
	snprintf(path, sizeof path, "%s/missing/x.png", dir);
	CHECK_RC(cdp_png_write(path, px, 2, 2, 3, 8), ENOENT);
	CHECK(dir_entries() == 0, "entries left: %d", dir_entries());

	/* A read-only directory (unless we are root): EACCES, no debris. */
	if (geteuid() != 0) {
		snprintf(path, sizeof path, "%s/ro", dir);
		mkdir(path, 0555);
		snprintf(path, sizeof path, "%s/ro/x.png", dir);
		CHECK_RC(cdp_png_write(path, px, 2, 2, 3, 8), EACCES);
		snprintf(path, sizeof path, "%s/ro", dir);
		rmdir(path);
	}

	/* Bad arguments. */
	snprintf(path, sizeof path, "%s/bad.png", dir);
	CHECK_RC(cdp_png_write(path, px, 2, 2, 5, 8), CDP_EINVAL);
	CHECK_RC(cdp_png_write(path, px, 2, 2, 3, 12), CDP_EINVAL);
	CHECK_RC(cdp_png_write(path, px, 0, 2, 3, 8), CDP_EINVAL);
	CHECK(dir_entries() == 0, "entries left after bad arguments");

	/* Replacing an existing file is atomic: the old one until rename. */
	CHECK_RC(cdp_png_write(path, px, 2, 2, 1, 8), CDP_OK);
	CHECK_RC(cdp_png_write(path, px, 2, 2, 3, 8), CDP_OK);
	CHECK_RC(cdp_png_read(path, &back, &w, &h, &ch, &depth), CDP_OK);
	CHECK(ch == 3, "replaced file has %d channels", ch);
	free(back);
	back = NULL;
	CHECK(dir_entries() == 1, "temporary files left: %d", dir_entries() - 1);

	/* Reading: missing file, not a PNG, truncated PNG. */
	snprintf(path, sizeof path, "%s/none.png", dir);
	CHECK_RC(cdp_png_read(path, &back, &w, &h, &ch, &depth), ENOENT);
	snprintf(path, sizeof path, "%s/text.png", dir);
	f = fopen(path, "w");
	if (f) {
		fputs("not a png at all\n", f);
		fclose(f);
	}
	CHECK_RC(cdp_png_read(path, &back, &w, &h, &ch, &depth), CDP_EMAGIC);
	unlink(path);
	{
		unsigned char big[64 * 64 * 3];
		char src[128];
		long size;

		for (size_t i = 0; i < sizeof big; i++)
			big[i] = (unsigned char)(i * 31 ^ i >> 3);
		snprintf(src, sizeof src, "%s/full.png", dir);
		CHECK_RC(cdp_png_write(src, big, 64, 64, 3, 8), CDP_OK);
		f = fopen(src, "r+");
		if (f) {
			fseek(f, 0, SEEK_END);
			size = ftell(f);
			fclose(f);
			CHECK(truncate(src, size / 2) == 0, "truncate");
		}
		CHECK_RC(cdp_png_read(src, &back, &w, &h, &ch, &depth), CDP_ETRUNC);
		CHECK(back == NULL, "pixels returned on failure");
		unlink(src);
	}
	snprintf(path, sizeof path, "%s/bad.png", dir);
	unlink(path);
}

int main(void)
{
	strcpy(dir, "/tmp/test_png.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	for (int ch = 1; ch <= 4; ch++) {
		round_trip(13, 7, ch, 8);
		round_trip(13, 7, ch, 16);
	}
	round_trip(1, 1, 1, 8);
	round_trip(300, 2, 3, 16);
	for (int ch = 1; ch <= 4; ch++) {
		char path[128];
		snprintf(path, sizeof path, "%s/t_%d_8.png", dir, ch);
		unlink(path);
		snprintf(path, sizeof path, "%s/t_%d_16.png", dir, ch);
		unlink(path);
	}
	independent_reader();
	{
		char path[128];
		snprintf(path, sizeof path, "%s/indep.png", dir);
		unlink(path);
	}
	CHECK(dir_entries() == 0, "round trips left %d files", dir_entries());
	failures();
	rmdir(dir);
	return tap_done();
}
