/* test_fuzz_regress.c: replays the fuzz corpus through the fuzz target.
 *
 * Every NAME.hex in tests/fuzz/corpus (hex digits, white space ignored) goes
 * through cdp_fuzz_record_one(), which aborts on a broken invariant. The
 * file name states what the input must do as well:
 *   rec-*     decodes as a valid record
 *   stream-*  reads as a complete stream (through 'E', count matching)
 *   bad-*, crash-*  is rejected both as a record and as a stream
 * An empty or unreadable corpus directory is a failure, not a pass.
 *
 * `test_fuzz_regress --write-seeds DIR` writes the built-in valid inputs
 * below to DIR as binary files, to seed a fuzzer run (see the README there).
 */
#include "../fuzz/fuzz_record_body.h"
#include "cdp_dtype.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS CDP_SRCDIR "/tests/fuzz/corpus"

typedef struct seed {
	char name[64];
	cdp_buf bytes;
} seed;

static uint8_t img[2 * 3 * 4 * 4], lab[3 * 4 * 2], msk[3 * 4];

static void seed_record(seed *s, const char *name, int dtype, int kind,
                        int flags, int comp, uint32_t c, uint32_t h, uint32_t w)
{
	cdp_record r;

	memset(&r, 0, sizeof r);
	r.dtype = dtype;
	r.label_kind = kind;
	r.flags = flags;
	r.compression = comp;
	r.bands = c;
	r.height = h;
	r.width = w;
	r.x_off = 256;
	r.y_off = 512;
	r.gt[0] = 600000;
	r.gt[1] = 10;
	r.gt[3] = 5200000;
	r.gt[5] = -10;
	r.source = 1;
	r.image = img;
	if (kind == CDP_LABEL_U8 || kind == CDP_LABEL_U16) {
		r.label = lab;
		r.label_ignore = 255;
	}
	if (kind == CDP_LABEL_CLASS)
		r.class_id = 4;
	if (flags & CDP_REC_MASK)
		r.mask = msk;
	if (flags & CDP_REC_NODATA)
		r.nodata = dtype == CDP_DT_F32 ? NAN : 0;
	snprintf(s->name, sizeof s->name, "%s", name);
	CHECK_RC(cdp_record_encode(&r, 9, &s->bytes), CDP_OK);
}

/* Header, one 'S' and one 'R' frame, and 'E'. */
static void seed_stream(seed *s, const seed *rec)
{
	cdp_source src;
	cdp_buf text = { 0 };
	char *p = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&p, &n);

	memset(&src, 0, sizeof src);
	strcpy(src.name, "s");
	src.path = "s.tif";
	src.width = src.height = 64;
	src.bands = 1;
	src.dtype = CDP_DT_U8;
	src.gt[1] = 1;
	src.gt[5] = -1;
	src.crs = "LOCAL_CS[\"a,b=c\"]";
	CHECK_RC(cdp_source_format(&src, &text), CDP_OK);
	CHECK(f != NULL, "open_memstream");
	if (!f)
		return;
	CHECK_RC(cdp_stream_write_header(f), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'S', "s", 1, text.p, text.len), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'R', "s_0_0", 5, rec->bytes.p,
	                                rec->bytes.len), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'E', "", 0, "count=1\n", 8), CDP_OK);
	CHECK(fclose(f) == 0, "close memstream");
	snprintf(s->name, sizeof s->name, "stream-small");
	CHECK_RC(cdp_buf_reserve(&s->bytes, n), CDP_OK);
	memcpy(s->bytes.p, p, n);
	s->bytes.len = n;
	free(p);
	cdp_buf_free(&text);
}

#define NSEEDS 5

static void make_seeds(seed *s)
{
	for (size_t i = 0; i < sizeof img; i++)
		img[i] = (uint8_t)(i * 37 + 11);
	for (size_t i = 0; i < sizeof lab; i++)
		lab[i] = (uint8_t)(i % 5);
	for (size_t i = 0; i < sizeof msk; i++)
		msk[i] = i % 4 ? 255 : 0;
	memset(s, 0, NSEEDS * sizeof *s);
	seed_record(&s[0], "rec-u8-plain", CDP_DT_U8, CDP_LABEL_NONE, 0,
	            CDP_COMP_NONE, 1, 2, 3);
	seed_record(&s[1], "rec-u16-zlib-label-mask-nodata", CDP_DT_U16,
	            CDP_LABEL_U8, CDP_REC_MASK | CDP_REC_NODATA, CDP_COMP_ZLIB,
	            2, 3, 4);
	seed_record(&s[2], "rec-f32-class-nan", CDP_DT_F32, CDP_LABEL_CLASS,
	            CDP_REC_NODATA, CDP_COMP_NONE, 1, 2, 2);
	seed_record(&s[3], "rec-i16-label16-zlib", CDP_DT_I16, CDP_LABEL_U16,
	            0, CDP_COMP_ZLIB, 1, 3, 4);
	seed_stream(&s[4], &s[0]);
}

static int write_seeds(const char *dir)
{
	seed s[NSEEDS];
	char path[4096];
	int rc = 0;

	make_seeds(s);
	for (int i = 0; i < NSEEDS; i++) {
		FILE *f;

		snprintf(path, sizeof path, "%s/%s", dir, s[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(s[i].bytes.p, 1, s[i].bytes.len, f) != s[i].bytes.len ||
		    fclose(f) != 0) {
			fprintf(stderr, "test_fuzz_regress: cannot write '%s': %s\n",
			        path, strerror(errno));
			rc = 1;
		}
		cdp_buf_free(&s[i].bytes);
	}
	return rc;
}

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Runs one input and checks what its name promises. */
static void replay(const char *name, const uint8_t *p, size_t n)
{
	int rec, str;

	cdp_fuzz_record_one(p, n);
	rec = cdp_fuzz_record_part(p, n);
	str = cdp_fuzz_stream_part(p, n);
	if (starts(name, "rec-"))
		CHECK(rec == CDP_OK, "%s: record rejected (%d)", name, rec);
	else if (starts(name, "stream-"))
		CHECK(str == CDP_OK, "%s: stream rejected (%d)", name, str);
	else if (starts(name, "bad-") || starts(name, "crash-"))
		CHECK(rec != CDP_OK && str != CDP_OK, "%s: accepted", name);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads a .hex file into out; 0 on success. */
static int read_hex(const char *path, cdp_buf *out)
{
	FILE *f = fopen(path, "r");
	int c, hi = -1, bad = 0;

	out->len = 0;
	if (!f)
		return -1;
	while ((c = getc(f)) != EOF) {
		int v = hexval(c);

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		if (v < 0) {
			bad = 1;
			break;
		}
		if (hi < 0) {
			hi = v;
			continue;
		}
		if (cdp_buf_reserve(out, out->len + 1) != CDP_OK) {
			bad = 1;
			break;
		}
		out->p[out->len++] = (uint8_t)(hi << 4 | v);
		hi = -1;
	}
	if (ferror(f) || hi >= 0)
		bad = 1;
	fclose(f);
	return bad ? -1 : 0;
}

static void replay_corpus(void)
{
	DIR *d = opendir(CORPUS);
	struct dirent *e;
	cdp_buf data = { 0 };
	char path[4096];
	size_t nfiles = 0;

	CHECK(d != NULL, "cannot open '%s': %s", CORPUS, strerror(errno));
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);

		if (len < 5 || strcmp(e->d_name + len - 4, ".hex") != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", CORPUS, e->d_name);
		if (read_hex(path, &data) != 0) {
			CHECK(0, "cannot read '%s' as hex", path);
			continue;
		}
		replay(e->d_name, data.p, data.len);
		nfiles++;
	}
	closedir(d);
	CHECK(nfiles > 0, "no .hex inputs in '%s'", CORPUS);
	printf("replayed %zu corpus inputs\n", nfiles);
	cdp_buf_free(&data);
}

int main(int argc, char **argv)
{
	seed s[NSEEDS];

	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: test_fuzz_regress [--write-seeds DIR]\n");
		return 2;
	}
	/* The built-in seeds are valid inputs; they must pass as such. */
	make_seeds(s);
	for (int i = 0; i < NSEEDS; i++) {
		replay(s[i].name, s[i].bytes.p, s[i].bytes.len);
		cdp_buf_free(&s[i].bytes);
	}
	replay_corpus();
	return tap_done();
}
