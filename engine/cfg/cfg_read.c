/* cfg_read.c: reading a model cfg file into memory (cfg.h), for cdp-train
 * and for the test and bench programs that build nets from share/cdpool's
 * cfgs. The text is read whole, as cdp_cfg_parse and the checkpoint take
 * it; a NUL byte inside the file ends the text there.
 */
#include "cfg/cfg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fail(char *err, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	if (err && cap) {
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int cdp_cfg_read(const char *path, char **text, char *err, size_t cap)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *buf = NULL;
	long len = -1;
	int rc = -1;

	*text = NULL;
	if (!f)
		return fail(err, cap, "cannot open '%s': %s", path, strerror(errno));
	/* fopen takes a directory, whose ftell would read as too large */
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fail(err, cap, "cannot read '%s': %s", path, strerror(EISDIR));
		goto out;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    (unsigned long)len > CDP_CFG_TEXT_MAX) {
		fail(err, cap, "cannot read '%s': %s", path, len > 0 ? "too large" : strerror(errno));
		goto out;
	}
	if (!(buf = malloc((size_t)len + 1))) {
		fail(err, cap, "cannot read '%s': out of memory", path);
		goto out;
	}
	errno = EIO;    /* fread of a short file sets no errno */
	if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fail(err, cap, "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	buf[len] = '\0';
	/* the text is a C string from here on: a NUL would silently end the
	 * model early (every layer after it dropped) */
	const char *nul = memchr(buf, '\0', (size_t)len);
	if (nul) {
		int line = 1;
		for (const char *c = buf; c < nul; c++)
			line += *c == '\n';
		fail(err, cap, "%s:%d: a NUL byte: a cfg is text", path, line);
		goto out;
	}
	*text = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	fclose(f);
	return rc;
}
