/* cdp_stream.c: the framed record stream and the source description text.
 *
 * The layout is in cdp_stream.h and man/cdp-record.5 (RECORD STREAM). A
 * reader can tell a complete stream (ending in an 'E' frame) from one whose
 * producer died (CDP_ETRUNC), one whose producer failed and said so (an 'F'
 * frame: CDP_ECANCEL), and a damaged frame (CDP_ECRC) from all three.
 * read_frame returns CDP_OK for the 'E' frame too (fr->type == 'E', its body
 * checked to be "count=N\n"); the caller stops there and compares N with the
 * 'R' frames it saw. A stream that ends where the next frame should start is
 * CDP_ETRUNC, not a clean end: only 'E' ends a stream.
 *
 * Lengths read from a stream are checked before use, and a body is read in
 * growing chunks, so a corrupted length cannot make the reader allocate much
 * more than the bytes actually present.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include "cdp_stream.h"
#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_stats.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>

#define FRAME_HDR 8
#define NAME_MAX_LEN (sizeof ((cdp_frame *)0)->name - 1)
#define READ_CHUNK ((size_t)1 << 20)

/* A failed stdio call as an errno; EIO when stdio left errno unset. */
static int io_error(void)
{
	return errno > 0 ? errno : EIO;
}

static int write_all(FILE *f, const void *p, size_t n)
{
	if (n == 0)
		return CDP_OK;
	errno = 0;
	if (fwrite(p, 1, n, f) != n)
		return io_error();
	return CDP_OK;
}

/* Reads exactly n bytes: CDP_OK, CDP_ETRUNC at end of file, or an errno. */
static int read_all(FILE *f, void *p, size_t n)
{
	size_t got;

	if (n == 0)
		return CDP_OK;
	errno = 0;
	got = fread(p, 1, n, f);
	if (got == n)
		return CDP_OK;
	return ferror(f) ? io_error() : CDP_ETRUNC;
}

int cdp_stream_write_header(FILE *f)
{
	uint8_t h[8] = { 'C', 'D', 'P', 'S', CDP_STREAM_VERSION, 0, 0, 0 };

	if (!f)
		return CDP_EINVAL;
	return write_all(f, h, sizeof h);
}

static int valid_type(int type)
{
	return type == CDP_FRAME_SOURCE || type == CDP_FRAME_RECORD ||
	       type == CDP_FRAME_END || type == CDP_FRAME_FAIL;
}

int cdp_stream_write_frame(FILE *f, int type, const char *name, size_t name_len,
                           const void *body, size_t body_len)
{
	uint8_t h[FRAME_HDR], c[4];
	uint32_t crc;
	int rc;

	if (!f || !valid_type(type) || name_len > NAME_MAX_LEN ||
	    body_len > CDP_STREAM_MAXBODY || (name_len && !name) ||
	    (body_len && !body) || (name_len && memchr(name, '\0', name_len)))
		return CDP_EINVAL;
	h[0] = (uint8_t)type;
	h[1] = 0;
	h[2] = (uint8_t)name_len;
	h[3] = (uint8_t)(name_len >> 8);
	for (int i = 0; i < 4; i++)
		h[4 + i] = (uint8_t)(body_len >> (8 * i));
	crc = cdp_crc32(0, h, sizeof h);
	if (name_len)
		crc = cdp_crc32(crc, (const uint8_t *)name, name_len);
	if (body_len)
		crc = cdp_crc32(crc, body, body_len);
	for (int i = 0; i < 4; i++)
		c[i] = (uint8_t)(crc >> (8 * i));
	if ((rc = write_all(f, h, sizeof h)) != CDP_OK ||
	    (rc = write_all(f, name, name_len)) != CDP_OK ||
	    (rc = write_all(f, body, body_len)) != CDP_OK ||
	    (rc = write_all(f, c, sizeof c)) != CDP_OK)
		return rc;
	return CDP_OK;
}

int cdp_stream_write_fail(FILE *f, const char *msg)
{
	char body[4096];
	size_t n = 0;
	int rc;

	if (!f)
		return CDP_EINVAL;
	memcpy(body, "error=", 6);
	n = 6;
	for (const char *m = msg ? msg : ""; *m && n < 6 + 4000; m++)
		body[n++] = (unsigned char)*m < 0x20 || *m == 0x7f ? ' ' : *m;
	body[n++] = '\n';
	if ((rc = cdp_stream_write_frame(f, CDP_FRAME_FAIL, "", 0, body, n)) != CDP_OK)
		return rc;
	return fflush(f) == 0 ? CDP_OK : io_error();
}

int cdp_stream_read_header(FILE *f)
{
	uint8_t h[8];
	int rc;

	if (!f)
		return CDP_EINVAL;
	/* Check the magic on what is there, so a foreign short file is
	 * "not ours" rather than "truncated". */
	errno = 0;
	rc = (int)fread(h, 1, 4, f);
	if (rc < 4 && ferror(f))
		return io_error();
	if (rc >= 1 && memcmp(h, CDP_STREAM_MAGIC, (size_t)rc) != 0)
		return CDP_EMAGIC;
	if (rc < 4)
		return CDP_ETRUNC;
	if ((rc = read_all(f, h + 4, 4)) != CDP_OK)
		return rc;
	if ((h[4] | h[5] << 8) < CDP_STREAM_VERSION_MIN ||
	    (h[4] | h[5] << 8) > CDP_STREAM_VERSION)
		return CDP_EVERSION;
	if (h[6] || h[7])
		return CDP_EFORMAT;
	return CDP_OK;
}

/* The body of an 'E' frame is exactly "count=N\n" with N a plain decimal. */
static int check_end_body(const uint8_t *p, size_t n)
{
	char num[24];
	uint64_t v;

	if (n < 8 || n - 7 >= sizeof num || memcmp(p, "count=", 6) != 0 ||
	    p[n - 1] != '\n')
		return CDP_EFORMAT;
	memcpy(num, p + 6, n - 7);
	num[n - 7] = '\0';
	if (num[0] == '+' || cdp_parse_u64(num, 0, UINT64_MAX, &v) != CDP_OK)
		return CDP_EFORMAT;
	return CDP_OK;
}

int cdp_stream_read_frame(FILE *f, cdp_frame *fr)
{
	uint8_t h[FRAME_HDR], c[4];
	size_t name_len, body_len, have = 0;
	uint32_t crc;
	int rc;

	if (!f || !fr)
		return CDP_EINVAL;
	fr->type = 0;
	fr->name[0] = '\0';
	fr->name_len = 0;
	fr->body.len = 0;
	if ((rc = read_all(f, h, sizeof h)) != CDP_OK)
		return rc;
	name_len = (size_t)h[2] | (size_t)h[3] << 8;
	body_len = (size_t)((uint32_t)h[4] | (uint32_t)h[5] << 8 |
	                    (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24);
	if (!valid_type(h[0]) || h[1] != 0 || name_len > NAME_MAX_LEN ||
	    body_len > CDP_STREAM_MAXBODY)
		return CDP_EFORMAT;
	if ((rc = read_all(f, fr->name, name_len)) != CDP_OK)
		return rc;
	fr->name[name_len] = '\0';
	/* Grow with the data that actually arrives, not with the length the
	 * frame claims. */
	while (have < body_len) {
		size_t want = body_len - have;
		size_t step = have < READ_CHUNK ? READ_CHUNK : have;

		if (want > step)
			want = step;
		if ((rc = cdp_buf_reserve(&fr->body, have + want)) != CDP_OK)
			return rc;
		if ((rc = read_all(f, fr->body.p + have, want)) != CDP_OK)
			return rc;
		have += want;
	}
	if ((rc = read_all(f, c, sizeof c)) != CDP_OK)
		return rc;
	/* A NUL after the body lets callers treat text bodies as strings. */
	if ((rc = cdp_buf_reserve(&fr->body, body_len + 1)) != CDP_OK)
		return rc;
	fr->body.p[body_len] = '\0';
	crc = cdp_crc32(0, h, sizeof h);
	crc = cdp_crc32(crc, (const uint8_t *)fr->name, name_len);
	if (body_len)
		crc = cdp_crc32(crc, fr->body.p, body_len);
	if (crc != ((uint32_t)c[0] | (uint32_t)c[1] << 8 |
	            (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24))
		return CDP_ECRC;
	/* Valid CRC, so what follows is a writer's mistake, not damage. */
	if (memchr(fr->name, '\0', name_len) ||
	    (h[0] == CDP_FRAME_END || h[0] == CDP_FRAME_FAIL ? name_len != 0 : name_len == 0))
		return CDP_EFORMAT;
	if (h[0] == CDP_FRAME_FAIL) {
		/* exactly "error=" + one line */
		if (body_len < 7 || memcmp(fr->body.p, "error=", 6) != 0 ||
		    memchr(fr->body.p, '\n', body_len) != fr->body.p + body_len - 1)
			return CDP_EFORMAT;
		fr->type = h[0];
		fr->body.len = body_len;
		return CDP_ECANCEL;
	}
	if (h[0] == CDP_FRAME_END &&
	    (rc = check_end_body(fr->body.p, body_len)) != CDP_OK)
		return rc;
	fr->type = h[0];
	fr->name_len = name_len;
	fr->body.len = body_len;
	return CDP_OK;
}

void cdp_frame_free(cdp_frame *fr)
{
	if (!fr)
		return;
	cdp_buf_free(&fr->body);
	fr->type = 0;
	fr->name[0] = '\0';
	fr->name_len = 0;
}

/* A value written on one line of the body must not break the line. */
static int one_line(const char *s)
{
	return strchr(s, '\n') == NULL;
}

/* "band_list=...\n" of s into a new string ("" without a band list);
 * NULL when out of memory. */
static char *band_list_line(const cdp_source *s)
{
	/* "band_list=" + up to 11 characters and a separator per band + NUL */
	size_t cap = 12 + (size_t)s->nband_list * 12, len;
	char *t = malloc(cap);

	if (!t || !s->nband_list) {
		if (t)
			*t = '\0';
		return t;
	}
	len = (size_t)snprintf(t, cap, "band_list=");
	for (uint32_t i = 0; i < s->nband_list; i++)
		len += (size_t)snprintf(t + len, cap - len, "%d%c", s->band_list[i],
		                        i + 1 < s->nband_list ? ',' : '\n');
	return t;
}

/* The "class.K=NAME" lines of s into a new string ("" without names);
 * NULL when out of memory. */
static char *class_lines(const cdp_source *s)
{
	size_t cap = 1, len = 0;
	char *t;

	for (uint32_t k = 0; k < s->nclass_names; k++)
		cap += strlen(s->class_names[k]) + 20;
	if (!(t = malloc(cap)))
		return NULL;
	*t = '\0';
	for (uint32_t k = 0; k < s->nclass_names; k++)
		len += (size_t)snprintf(t + len, cap - len, "class.%" PRIu32 "=%s\n", k,
		                        s->class_names[k]);
	return t;
}

int cdp_source_format(const cdp_source *s, cdp_buf *out)
{
	const char *crs, *lab, *lo, *tm, *bn;
	char *bl, *cl;
	size_t name_len;
	int n, rc;

	if (!s || !out || !s->path)
		return CDP_EINVAL;
	crs = s->crs ? s->crs : "";
	name_len = strnlen(s->name, sizeof s->name);
	if (name_len == sizeof s->name || !one_line(s->name) ||
	    !one_line(s->path) || !one_line(crs) ||
	    (s->label && !one_line(s->label)) ||
	    (s->label_options && !one_line(s->label_options)) ||
	    (s->time && !one_line(s->time)) ||
	    (s->band_names && !one_line(s->band_names)) ||
	    !cdp_dtype_name(s->dtype) || s->width < 1 ||
	    s->width > INT64_MAX || s->height < 1 || s->height > INT64_MAX ||
	    s->bands < 1)
		return CDP_EINVAL;
	for (int i = 0; i < 6; i++)
		if (!isfinite(s->gt[i]))
			return CDP_EINVAL;
	if (s->nband_list && (s->nband_list != s->bands || !s->band_list))
		return CDP_EINVAL;
	for (uint32_t i = 0; i < s->nband_list; i++)
		if (s->band_list[i] < 1)
			return CDP_EINVAL;
	if (s->nclass_names > CDP_SOURCE_MAXCLASSES || (s->nclass_names && !s->class_names))
		return CDP_EINVAL;
	for (uint32_t k = 0; k < s->nclass_names; k++)
		if (!cdp_class_name_ok(s->class_names[k], NULL, 0))
			return CDP_EINVAL;
	if (!(bl = band_list_line(s)))
		return CDP_ENOMEM;
	if (!(cl = class_lines(s))) {
		free(bl);
		return CDP_ENOMEM;
	}
	lab = s->label ? s->label : "";
	lo = s->label_options ? s->label_options : "";
	tm = s->time ? s->time : "";
	bn = s->band_names ? s->band_names : "";
	/* %.17g round-trips every double exactly. crs stays the last line. */
#define SOURCE_FMT "index=%" PRIu32 "\nname=%s\npath=%s\nwidth=%" PRIu64 \
	"\nheight=%" PRIu64 "\nbands=%" PRIu32 "\ndtype=%s\n" \
	"geotransform=%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n%s%s%s%s%s%s%s%s%s%s%s%s%s%scrs=%s\n"
#define SOURCE_ARGS s->index, s->name, s->path, s->width, s->height, \
	s->bands, cdp_dtype_name(s->dtype), s->gt[0], s->gt[1], s->gt[2], \
	s->gt[3], s->gt[4], s->gt[5], bl, cl, s->label ? "label=" : "", lab, \
	s->label ? "\n" : "", s->label_options ? "label_options=" : "", lo, \
	s->label_options ? "\n" : "", s->time ? "time=" : "", tm, s->time ? "\n" : "", \
	s->band_names ? "band_names=" : "", bn, s->band_names ? "\n" : "", crs
	n = snprintf(NULL, 0, SOURCE_FMT, SOURCE_ARGS);
	if (n < 0)
		rc = CDP_EINVAL;
	else if ((rc = cdp_buf_reserve(out, (size_t)n + 1)) == CDP_OK) {
		snprintf((char *)out->p, (size_t)n + 1, SOURCE_FMT, SOURCE_ARGS);
		out->len = (size_t)n;
	}
#undef SOURCE_FMT
#undef SOURCE_ARGS
	free(bl);
	free(cl);
	return rc;
}

enum {
	F_INDEX = 1, F_NAME = 2, F_PATH = 4, F_WIDTH = 8, F_HEIGHT = 16,
	F_BANDS = 32, F_DTYPE = 64, F_GT = 128, F_CRS = 256, F_BAND_LIST = 512,
	F_LABEL = 1024, F_LABEL_OPTIONS = 2048, F_TIME = 4096, F_BAND_NAMES = 8192
};
#define F_REQUIRED (F_INDEX | F_PATH | F_WIDTH | F_HEIGHT | F_BANDS | F_DTYPE | F_GT)

static int parse_gt(char *v, double gt[6])
{
	char *comma;
	int rc;

	for (int i = 0; i < 6; i++) {
		comma = strchr(v, ',');
		if ((i < 5) != (comma != NULL))
			return CDP_ESYNTAX;
		if (comma)
			*comma = '\0';
		if ((rc = cdp_parse_double(v, -DBL_MAX, DBL_MAX, &gt[i])) != CDP_OK)
			return rc;
		if (comma)
			v = comma + 1;
	}
	return CDP_OK;
}

/* "class.K" = v into t->class_names[K], growing the list; holes (NULL) are
 * refused once all lines are read. */
static int parse_class(const char *key, const char *v, cdp_source *t)
{
	uint64_t k;
	int rc;

	if ((rc = cdp_parse_u64(key + 6, 0, CDP_SOURCE_MAXCLASSES - 1, &k)) != CDP_OK)
		return rc;
	if (!cdp_class_name_ok(v, NULL, 0))
		return CDP_ESYNTAX;
	if (k >= t->nclass_names) {
		char **n = realloc(t->class_names, (size_t)(k + 1) * sizeof *n);
		if (!n)
			return CDP_ENOMEM;
		memset(n + t->nclass_names, 0, (size_t)(k + 1 - t->nclass_names) * sizeof *n);
		t->class_names = n;
		t->nclass_names = (uint32_t)k + 1;
	}
	if (t->class_names[k])
		return CDP_EFORMAT;
	return (t->class_names[k] = strdup(v)) ? CDP_OK : CDP_ENOMEM;
}

/* "b1,b2,..." into t->band_list; its count against bands is checked once
 * all lines are read (bands may come later). */
static int parse_band_list(const char *v, cdp_source *t)
{
	size_t cap = 1, n;
	int rc;

	for (const char *c = v; *c; c++)
		cap += *c == ',';
	if (cap > UINT32_MAX)
		return CDP_ERANGE;
	if (!(t->band_list = malloc(cap * sizeof *t->band_list)))
		return CDP_ENOMEM;
	if ((rc = cdp_parse_int_list(v, 1, INT_MAX, t->band_list, cap, &n)) != CDP_OK)
		return rc;
	t->nband_list = (uint32_t)n;
	return CDP_OK;
}

/* One "key=value" line into t; *seen collects the keys, so a repeated key
 * (which of the two would be meant?) is an error. Unknown keys are skipped
 * for the sake of later versions that add lines. */
static const char *const source_keys[] = {
	"index", "name", "path", "width", "height", "bands", "dtype",
	"geotransform", "crs", "band_list", "label", "label_options", "time",
	"band_names"
};

static int parse_line(char *line, cdp_source *t, unsigned *seen)
{
	const char *const *keys = source_keys;
	char *v = strchr(line, '=');
	uint64_t u;
	unsigned bit = 0;
	int rc = CDP_OK;

	if (!v)
		return CDP_ESYNTAX;
	*v++ = '\0';
	if (strncmp(line, "class.", 6) == 0)
		return parse_class(line, v, t);
	for (size_t i = 0; i < sizeof source_keys / sizeof source_keys[0]; i++)
		if (strcmp(line, keys[i]) == 0)
			bit = 1u << i;
	if (!bit)
		return CDP_OK;
	if (*seen & bit)
		return CDP_EFORMAT;
	*seen |= bit;
	switch (bit) {
	case F_INDEX:
		if ((rc = cdp_parse_u64(v, 0, UINT32_MAX, &u)) == CDP_OK)
			t->index = (uint32_t)u;
		break;
	case F_NAME:
		if (strlen(v) >= sizeof t->name)
			return CDP_ERANGE;
		strcpy(t->name, v);
		break;
	case F_PATH:
		if (!(t->path = strdup(v)))
			return CDP_ENOMEM;
		break;
	case F_WIDTH:
		rc = cdp_parse_u64(v, 1, INT64_MAX, &t->width);
		break;
	case F_HEIGHT:
		rc = cdp_parse_u64(v, 1, INT64_MAX, &t->height);
		break;
	case F_BANDS:
		if ((rc = cdp_parse_u64(v, 1, UINT32_MAX, &u)) == CDP_OK)
			t->bands = (uint32_t)u;
		break;
	case F_DTYPE:
		if (!(t->dtype = cdp_dtype_parse(v)))
			return CDP_EFORMAT;
		break;
	case F_GT:
		rc = parse_gt(v, t->gt);
		break;
	case F_CRS:
		if (!(t->crs = strdup(v)))
			return CDP_ENOMEM;
		break;
	case F_BAND_LIST:
		rc = parse_band_list(v, t);
		break;
	case F_LABEL:
		if (!(t->label = strdup(v)))
			return CDP_ENOMEM;
		break;
	case F_LABEL_OPTIONS:
		if (!(t->label_options = strdup(v)))
			return CDP_ENOMEM;
		break;
	case F_TIME:
		if (!(t->time = strdup(v)))
			return CDP_ENOMEM;
		break;
	case F_BAND_NAMES:
		if (!(t->band_names = strdup(v)))
			return CDP_ENOMEM;
		break;
	}
	return rc;
}

/* 1 when key is one of source_keys and in seen */
static int seen_key(const char *key, unsigned seen)
{
	for (size_t i = 0; i < sizeof source_keys / sizeof source_keys[0]; i++)
		if (strcmp(key, source_keys[i]) == 0)
			return seen >> i & 1;
	return 0;
}

/* What is wrong with the line at fault (rc from parse_line, the line's
 * key and value split at '=') into why[cap]. */
static void line_why(int rc, const char *key, const char *v, unsigned seen, char *why,
                     size_t cap)
{
	if (!v)
		snprintf(why, cap, "a line without '=': '%.40s'", key);
	else if (strcmp(key, "name") == 0 && rc == CDP_ERANGE)
		snprintf(why, cap, "name is %zu bytes, longer than the %zu a name may have",
		         strlen(v), sizeof ((cdp_source *)0)->name - 1);
	else if (rc == CDP_EFORMAT && (strncmp(key, "class.", 6) == 0 || seen_key(key, seen)))
		snprintf(why, cap, "repeated key '%.40s'", key);
	else
		snprintf(why, cap, "%.40s=%.40s%s: %s", key, v, strlen(v) > 40 ? "..." : "",
		         cdp_strerror(rc));
}

int cdp_source_parse(const void *body, size_t len, cdp_source *s)
{
	return cdp_source_parse_why(body, len, s, NULL, 0);
}

int cdp_source_parse_why(const void *body, size_t len, cdp_source *s, char *why, size_t cap)
{
	cdp_source t;
	unsigned seen = 0, before;
	char *text, *line, *nl, *eq;
	int rc = CDP_OK;

	if (why && cap)
		why[0] = '\0';
	if ((!body && len) || !s)
		return CDP_EINVAL;
	memset(s, 0, sizeof *s);
	if (len && memchr(body, '\0', len)) {
		if (why && cap)
			snprintf(why, cap, "a NUL byte in the text");
		return CDP_ESYNTAX;
	}
	if (!(text = malloc(len + 1)))
		return CDP_ENOMEM;
	if (len)
		memcpy(text, body, len);
	text[len] = '\0';
	memset(&t, 0, sizeof t);
	/* Lines end in '\n'; a missing final newline is tolerated, empty
	 * lines are skipped. */
	for (line = text; rc == CDP_OK && line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		before = seen;
		eq = strchr(line, '=');
		if (*line && (rc = parse_line(line, &t, &seen)) != CDP_OK && rc != CDP_ENOMEM &&
		    why && cap)
			line_why(rc, line, eq ? eq + 1 : NULL, before, why, cap);
	}
	free(text);
	if (rc == CDP_OK && (seen & F_REQUIRED) != F_REQUIRED) {
		rc = CDP_EFORMAT;
		for (size_t i = 0; why && cap && i < sizeof source_keys / sizeof source_keys[0]; i++)
			if ((F_REQUIRED & ~seen) >> i & 1) {
				snprintf(why, cap, "no %s line", source_keys[i]);
				break;
			}
	} else if (rc == CDP_OK && (seen & F_BAND_LIST) && t.nband_list != t.bands) {
		rc = CDP_EFORMAT;
		if (why && cap)
			snprintf(why, cap, "band_list names %" PRIu32 " bands, bands=%" PRIu32,
			         t.nband_list, t.bands);
	}
	for (uint32_t k = 0; rc == CDP_OK && k < t.nclass_names; k++)
		if (!t.class_names[k]) {
			rc = CDP_EFORMAT;
			if (why && cap)
				snprintf(why, cap, "class.%" PRIu32 " missing below class.%" PRIu32, k,
				         t.nclass_names - 1);
		}
	if (rc == CDP_OK && !t.crs && !(t.crs = strdup("")))
		rc = CDP_ENOMEM;
	if (rc != CDP_OK) {
		cdp_source_free(&t);
		if (why && cap && !why[0])
			snprintf(why, cap, "%s", cdp_strerror(rc));
		if (why && cap)
			cdp_msg_escape(why, cap);   /* it quotes the text's bytes */
		return rc;
	}
	*s = t;
	return CDP_OK;
}

void cdp_source_free(cdp_source *s)
{
	if (!s)
		return;
	free(s->path);
	free(s->crs);
	free(s->band_list);
	for (uint32_t k = 0; k < s->nclass_names && s->class_names; k++)
		free(s->class_names[k]);
	free(s->class_names);
	free(s->label);
	free(s->label_options);
	free(s->time);
	free(s->band_names);
	s->label = s->label_options = s->time = s->band_names = NULL;
	s->class_names = NULL;
	s->nclass_names = 0;
	s->path = NULL;
	s->crs = NULL;
	s->band_list = NULL;
	s->nband_list = 0;
}

void cdp_stream_pipe_grow(int fd)
{
	struct stat st;
	FILE *f;
	long max = 1 << 20, sysmax;

	if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
		return;
	f = fopen("/proc/sys/fs/pipe-max-size", "r");
	if (f) {
		if (fscanf(f, "%ld", &sysmax) == 1 && sysmax > 0 && sysmax < max)
			max = sysmax;
		fclose(f);
	}
#ifdef F_SETPIPE_SZ
	(void)fcntl(fd, F_SETPIPE_SZ, (int)max);
#endif
}
