/* test_stream.c: the record stream and source text (cdp_stream.h).
 *
 * A stream of S, R and E frames round-trips; a stream cut at any byte reads
 * as truncated (never as a clean end); any changed byte is caught; lying
 * lengths fail before large allocations; write errors come back as errno;
 * source text survives format/parse with awkward WKT and rejects malformed
 * lines and numbers.
 */
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_stream.h"
#include "tap.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char WKT[] =
	"PROJCS[\"WGS 84 / UTM zone 33N\",GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\","
	"SPHEROID[\"WGS 84\",6378137,298.257223563]],UNIT[\"degree\",0.0174532925199433]],"
	"PROJECTION[\"Transverse_Mercator\"],PARAMETER[\"false_easting\",500000],"
	"AUTHORITY[\"EPSG\",\"32633\"],EXTENSION[\"x=y\",\"a'b\"]]";

/* A FILE holding exactly n bytes of p, positioned at the start. */
static FILE *mem_file(const void *p, size_t n)
{
	FILE *f = tmpfile();

	if (!f || (n && fwrite(p, 1, n, f) != n)) {
		perror("tmpfile");
		exit(99);
	}
	rewind(f);
	return f;
}

/* The whole content of f. */
static uint8_t *slurp(FILE *f, size_t *n)
{
	long end;
	uint8_t *p;

	fseek(f, 0, SEEK_END);
	end = ftell(f);
	rewind(f);
	p = malloc((size_t)end + 1);
	if (!p || fread(p, 1, (size_t)end, f) != (size_t)end) {
		perror("read back");
		exit(99);
	}
	*n = (size_t)end;
	return p;
}

static cdp_source sample_source(void)
{
	cdp_source s;

	memset(&s, 0, sizeof s);
	s.index = 3;
	strcpy(s.name, "scene_a");
	s.path = "/data/in put/scene=a,1.tif";
	s.width = 10980;
	s.height = 10979;
	s.bands = 4;
	s.dtype = CDP_DT_U16;
	s.gt[0] = 399960.1;
	s.gt[1] = 10;
	s.gt[2] = -1e-300;
	s.gt[3] = 5300040;
	s.gt[4] = 1e308;
	s.gt[5] = -10;
	s.crs = (char *)WKT;
	return s;
}

/* Reads a whole stream: CDP_OK only on reaching a valid 'E' frame. */
static int read_stream(FILE *f, cdp_frame *fr, size_t *nframes)
{
	int rc = cdp_stream_read_header(f);

	*nframes = 0;
	while (rc == CDP_OK) {
		rc = cdp_stream_read_frame(f, fr);
		if (rc == CDP_OK && ++*nframes && fr->type == CDP_FRAME_END)
			break;
	}
	return rc;
}

/* The test stream: header, S, two R frames, E; returned as bytes. */
static uint8_t *build_stream(size_t *n, cdp_buf *rec)
{
	cdp_source s = sample_source();
	cdp_buf text = { 0 };
	cdp_record r;
	uint8_t img[2 * 3 * 4];
	FILE *f = tmpfile();
	uint8_t *bytes;

	memset(&r, 0, sizeof r);
	r.dtype = CDP_DT_U8;
	r.bands = 2;
	r.height = 3;
	r.width = 4;
	for (size_t i = 0; i < sizeof img; i++)
		img[i] = (uint8_t)(i * 7);
	r.image = img;
	CHECK_RC(cdp_record_encode(&r, 6, rec), CDP_OK);
	CHECK_RC(cdp_source_format(&s, &text), CDP_OK);
	CHECK_RC(cdp_stream_write_header(f), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'S', "scene_a", 7, text.p, text.len), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'R', "scene_a_0_0", 11, rec->p, rec->len), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'R', "scene_a_0_4", 11, rec->p, rec->len), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'E', "", 0, "count=2\n", 8), CDP_OK);
	CHECK(fflush(f) == 0, "flush");
	bytes = slurp(f, n);
	fclose(f);
	cdp_buf_free(&text);
	return bytes;
}

static void test_round_trip(void)
{
	cdp_buf rec = { 0 };
	cdp_frame fr = { 0 };
	cdp_source got, want = sample_source();
	cdp_record d;
	size_t n;
	uint8_t *bytes = build_stream(&n, &rec);
	FILE *f = mem_file(bytes, n);

	CHECK(n > 8 && !memcmp(bytes, "CDPS\2\0\0\0", 8), "stream header bytes");
	/* First frame header: 'S', 0, name length 7, body length. */
	CHECK(bytes[8] == 'S' && bytes[9] == 0 && bytes[10] == 7 && bytes[11] == 0,
	      "frame header bytes");
	CHECK_RC(cdp_stream_read_header(f), CDP_OK);
	CHECK_RC(cdp_stream_read_frame(f, &fr), CDP_OK);
	CHECK(fr.type == 'S' && fr.name_len == 7 && !strcmp(fr.name, "scene_a"),
	      "S frame name");
	CHECK_RC(cdp_source_parse(fr.body.p, fr.body.len, &got), CDP_OK);
	CHECK(got.index == 3 && !strcmp(got.name, "scene_a") &&
	      !strcmp(got.path, want.path) && !strcmp(got.crs, WKT) &&
	      got.width == 10980 && got.height == 10979 && got.bands == 4 &&
	      got.dtype == CDP_DT_U16 && !memcmp(got.gt, want.gt, sizeof got.gt),
	      "source fields survive the stream");
	cdp_source_free(&got);
	for (int i = 0; i < 2; i++) {
		CHECK_RC(cdp_stream_read_frame(f, &fr), CDP_OK);
		CHECK(fr.type == 'R' && fr.body.len == rec.len &&
		      !memcmp(fr.body.p, rec.p, rec.len), "R frame %d body", i);
		CHECK(!strcmp(fr.name, i ? "scene_a_0_4" : "scene_a_0_0"), "R key %d", i);
		CHECK_RC(cdp_record_decode(fr.body.p, fr.body.len, &d, NULL), CDP_OK);
	}
	CHECK_RC(cdp_stream_read_frame(f, &fr), CDP_OK);
	CHECK(fr.type == 'E' && fr.name_len == 0 && fr.body.len == 8 &&
	      !strcmp((char *)fr.body.p, "count=2\n"), "E frame, NUL-terminated");
	fclose(f);
	cdp_frame_free(&fr);
	cdp_buf_free(&rec);
	free(bytes);
}

/* Cut anywhere, a stream reads as truncated; any changed byte fails it. */
static void test_damage(void)
{
	cdp_buf rec = { 0 };
	cdp_frame fr = { 0 };
	size_t n, frames, bad = 0, body_at;
	uint8_t *bytes = build_stream(&n, &rec);

	for (size_t cut = 0; cut < n; cut++) {
		FILE *f = mem_file(bytes, cut);

		if (read_stream(f, &fr, &frames) != CDP_ETRUNC)
			bad++;
		fclose(f);
	}
	CHECK(bad == 0, "%zu of %zu cuts not reported as truncated", bad, n);

	bad = 0;
	for (size_t i = 0; i < n; i++) {
		FILE *f;

		bytes[i] ^= 0x20;
		f = mem_file(bytes, n);
		if (read_stream(f, &fr, &frames) == CDP_OK)
			bad++;
		fclose(f);
		bytes[i] ^= 0x20;
	}
	CHECK(bad == 0, "%zu changed bytes went unnoticed", bad);

	/* A changed byte in the S frame's body is a CRC error. */
	body_at = 8 + 8 + 7 + 10;
	bytes[body_at] ^= 1;
	{
		FILE *f = mem_file(bytes, n);

		CHECK_RC(cdp_stream_read_header(f), CDP_OK);
		CHECK_RC(cdp_stream_read_frame(f, &fr), CDP_ECRC);
		fclose(f);
	}
	bytes[body_at] ^= 1;

	bytes[0] = 'X';
	{
		FILE *f = mem_file(bytes, n);

		CHECK_RC(cdp_stream_read_header(f), CDP_EMAGIC);
		fclose(f);
	}
	bytes[0] = 'C';
	for (int v = 0; v < 4; v += 3) {
		FILE *f;

		bytes[4] = (uint8_t)v;
		f = mem_file(bytes, n);
		CHECK_RC(cdp_stream_read_header(f), CDP_EVERSION);
		fclose(f);
	}
	bytes[4] = 2;
	{
		FILE *f = mem_file("PK", 2);

		CHECK_RC(cdp_stream_read_header(f), CDP_EMAGIC);
		fclose(f);
	}
	cdp_frame_free(&fr);
	cdp_buf_free(&rec);
	free(bytes);
}

/* Reads one hand-made frame (after a valid stream header). */
static int read_raw_frame(const uint8_t *frame, size_t n, cdp_frame *fr)
{
	uint8_t *b = malloc(8 + n);
	FILE *f;
	int rc;

	memcpy(b, "CDPS\1\0\0\0", 8);
	memcpy(b + 8, frame, n);
	f = mem_file(b, 8 + n);
	rc = cdp_stream_read_header(f);
	if (rc == CDP_OK)
		rc = cdp_stream_read_frame(f, fr);
	fclose(f);
	free(b);
	return rc;
}

/* Writes one frame with the real writer and reads it back. */
static int write_read(int type, const char *name, const char *body)
{
	cdp_frame fr = { 0 };
	FILE *f = tmpfile();
	size_t n;
	uint8_t *b;
	int rc;

	CHECK_RC(cdp_stream_write_frame(f, type, name, strlen(name), body,
	                                strlen(body)), CDP_OK);
	fflush(f);
	b = slurp(f, &n);
	fclose(f);
	rc = read_raw_frame(b, n, &fr);
	free(b);
	cdp_frame_free(&fr);
	return rc;
}

static void test_bad_frames(void)
{
	cdp_frame fr = { 0 };
	/* type, reserved, name length (LE u16), body length (LE u32) */
	static const uint8_t bad_type[] = { 'X', 0, 1, 0, 1, 0, 0, 0, 'k', 'b', 0, 0, 0, 0 };
	static const uint8_t bad_res[] = { 'R', 1, 1, 0, 1, 0, 0, 0, 'k', 'b', 0, 0, 0, 0 };
	static const uint8_t long_name[] = { 'R', 0, 0x00, 0x02, 1, 0, 0, 0 };
	static const uint8_t huge_body[] = { 'R', 0, 1, 0, 1, 0, 0, 0x80, 'k' };
	static const uint8_t lying_body[] = { 'R', 0, 1, 0, 0xff, 0xff, 0xff, 0x7f,
	                                      'k', 1, 2, 3, 4, 5, 6, 7 };

	CHECK_RC(read_raw_frame(bad_type, sizeof bad_type, &fr), CDP_EFORMAT);
	CHECK_RC(read_raw_frame(bad_res, sizeof bad_res, &fr), CDP_EFORMAT);
	CHECK_RC(read_raw_frame(long_name, sizeof long_name, &fr), CDP_EFORMAT);
	CHECK_RC(read_raw_frame(huge_body, sizeof huge_body, &fr), CDP_EFORMAT);
	CHECK(fr.body.cap == 0, "allocated %zu for an invalid length", fr.body.cap);
	CHECK_RC(read_raw_frame(lying_body, sizeof lying_body, &fr), CDP_ETRUNC);
	CHECK(fr.body.cap <= 2u << 20, "a 2 GiB claim over 7 bytes allocated %zu",
	      fr.body.cap);
	cdp_frame_free(&fr);

	CHECK_RC(write_read('E', "", "count=0\n"), CDP_OK);
	CHECK_RC(write_read('E', "", "count=18446744073709551615\n"), CDP_OK);
	CHECK_RC(write_read('E', "", "count=x\n"), CDP_EFORMAT);
	CHECK_RC(write_read('E', "", "count=1"), CDP_EFORMAT);
	CHECK_RC(write_read('E', "", "count=-1\n"), CDP_EFORMAT);
	CHECK_RC(write_read('E', "", ""), CDP_EFORMAT);
	CHECK_RC(write_read('E', "k", "count=0\n"), CDP_EFORMAT);
	CHECK_RC(write_read('R', "", "x"), CDP_EFORMAT);
	CHECK_RC(write_read('S', "", "x"), CDP_EFORMAT);
	CHECK_RC(write_read('R', "k", ""), CDP_OK);
}

/* A producer that fails ends its stream with an 'F' frame: read back as
 * CDP_ECANCEL with the message, never as a record or a clean end. */
static void test_fail_frame(void)
{
	cdp_frame fr = { 0 };
	FILE *f = tmpfile();
	size_t n;
	uint8_t *b;

	CHECK_RC(cdp_stream_write_fail(f, "cannot read 'a.tif':\nstrip 29\tfailed"), CDP_OK);
	fflush(f);
	b = slurp(f, &n);
	fclose(f);
	CHECK_RC(read_raw_frame(b, n, &fr), CDP_ECANCEL);
	CHECK(fr.type == CDP_FRAME_FAIL && fr.name_len == 0, "type %d", fr.type);
	CHECK(fr.body.len > 0 && strcmp((char *)fr.body.p, "error=cannot read 'a.tif': strip 29 failed\n") == 0,
	      "body '%s'", fr.body.len ? (char *)fr.body.p : "");
	free(b);
	cdp_frame_free(&fr);
	CHECK_RC(write_read('F', "", "error=x\n"), CDP_ECANCEL);
	CHECK_RC(write_read('F', "", "error=\n"), CDP_ECANCEL);
	CHECK_RC(write_read('F', "k", "error=x\n"), CDP_EFORMAT);
	CHECK_RC(write_read('F', "", "error=x"), CDP_EFORMAT);
	CHECK_RC(write_read('F', "", "error=x\ny\n"), CDP_EFORMAT);
	CHECK_RC(write_read('F', "", "count=0\n"), CDP_EFORMAT);
	CHECK_RC(cdp_stream_write_fail(NULL, "x"), CDP_EINVAL);
}

static void test_write_errors(void)
{
	char name[600];
	FILE *f = tmpfile();

	memset(name, 'k', sizeof name);
	CHECK_RC(cdp_stream_write_frame(f, 'X', "k", 1, "b", 1), CDP_EINVAL);
	CHECK_RC(cdp_stream_write_frame(f, 'R', name, 512, "b", 1), CDP_EINVAL);
	CHECK_RC(cdp_stream_write_frame(f, 'R', name, 511, "b", 1), CDP_OK);
	CHECK_RC(cdp_stream_write_frame(f, 'R', "k\0x", 3, "b", 1), CDP_EINVAL);
	CHECK_RC(cdp_stream_write_frame(f, 'R', "k", 1, NULL, 1), CDP_EINVAL);
	fclose(f);

	/* A full device: unbuffered, so the write itself fails. */
	f = fopen("/dev/full", "w");
	if (f) {
		setvbuf(f, NULL, _IONBF, 0);
		CHECK_RC(cdp_stream_write_header(f), ENOSPC);
		CHECK_RC(cdp_stream_write_frame(f, 'R', "k", 1, "b", 1), ENOSPC);
		fclose(f);
	}
	/* A stream opened for reading only. */
	f = tmpfile();
	if (f) {
		FILE *r = fdopen(dup(fileno(f)), "r");

		if (r) {
			setvbuf(r, NULL, _IONBF, 0);
			CHECK(cdp_stream_write_header(r) > 0, "write to a read-only stream");
			fclose(r);
		}
		fclose(f);
	}
}

static int parse_text(const char *text)
{
	cdp_source s;
	int rc = cdp_source_parse(text, strlen(text), &s);

	cdp_source_free(&s);
	return rc;
}

#define BASE "index=1\npath=/x.tif\nwidth=5\nheight=6\nbands=1\ndtype=f32\n"
#define GT "geotransform=0,1,0,0,0,-1\n"

static void test_source_text(void)
{
	cdp_source s = sample_source(), t;
	cdp_buf out = { 0 };
	static const char simple[] =
		"index=0\nname=a\npath=a.tif\nwidth=2\nheight=3\nbands=1\n"
		"dtype=u8\ngeotransform=0,1,0,0.5,0,-1\ncrs=\n";

	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(out.len == strlen((char *)out.p), "formatted text is a string");
	CHECK(strstr((char *)out.p, "\ncrs=PROJCS[") != NULL &&
	      out.p[out.len - 1] == '\n', "crs is the last line");
	CHECK_RC(cdp_source_parse(out.p, out.len, &t), CDP_OK);
	CHECK(!strcmp(t.crs, WKT) && !strcmp(t.path, s.path) &&
	      !memcmp(t.gt, s.gt, sizeof t.gt), "WKT, path and gt exact");
	cdp_source_free(&t);

	memset(&s, 0, sizeof s);
	strcpy(s.name, "a");
	s.path = "a.tif";
	s.width = 2;
	s.height = 3;
	s.bands = 1;
	s.dtype = CDP_DT_U8;
	s.gt[1] = 1;
	s.gt[3] = 0.5;
	s.gt[5] = -1;
	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(out.len == strlen(simple) && !memcmp(out.p, simple, out.len),
	      "exact text: %.*s", (int)out.len, (char *)out.p);
	s.path = "a\nb";
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	s.path = "a";
	s.dtype = 99;
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	cdp_buf_free(&out);

	CHECK_RC(parse_text(BASE GT), CDP_OK);
	CHECK_RC(cdp_source_parse(BASE GT "crs", strlen(BASE GT) + 3, &t), CDP_ESYNTAX);
	CHECK_RC(cdp_source_parse(BASE "geotransform=0,1,0,0,0,-1", strlen(BASE) + 25, &t),
	         CDP_OK);
	CHECK(t.crs && !strcmp(t.crs, "") && !strcmp(t.name, "") && t.gt[5] == -1,
	      "missing crs and name are empty; final newline optional");
	cdp_source_free(&t);
	CHECK_RC(parse_text("\n" BASE "future=1,2\n\n" GT), CDP_OK);
	CHECK_RC(parse_text(BASE), CDP_EFORMAT);
	CHECK_RC(parse_text("index=1\npath=/x.tif\nheight=6\nbands=1\ndtype=f32\n" GT),
	         CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "width=5\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "crs=a\ncrs=b\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "garbage\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text("width=5x\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text("width=0\n"), CDP_ERANGE);
	CHECK_RC(parse_text("width=-5\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text("width= 5\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text("index=4294967296\n"), CDP_ERANGE);
	CHECK_RC(parse_text("bands=\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE "geotransform=0,1,0,0,0\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE "geotransform=0,1,0,0,0,-1,7\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE "geotransform=0,1,,0,0,-1\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE "geotransform=0,1,0,0,0,nan\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE "geotransform=0,1,0,0,0,inf\n"), CDP_ERANGE);
	CHECK_RC(parse_text(BASE "geotransform=0x10,1,0,0,0,1\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text("index=1\npath=/x.tif\nwidth=5\nheight=6\nbands=1\n"
	                    "dtype=u9\n" GT), CDP_EFORMAT);
	CHECK_RC(cdp_source_parse(BASE "\0" GT, sizeof (BASE GT), &t), CDP_ESYNTAX);
	CHECK(t.path == NULL && t.crs == NULL, "nothing left allocated on failure");
}

/* The selected source bands survive format and parse, in order; a body
 * without them (an older producer) still parses, as unknown. */
static void test_band_list(void)
{
	cdp_source s = sample_source(), t;
	cdp_buf out = { 0 };
	int bl[4] = { 3, 1, 4, 2 };

	s.band_list = bl;
	s.nband_list = 4;
	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(strstr((char *)out.p, "\nband_list=3,1,4,2\ncrs=PROJCS[") != NULL,
	      "band_list line before crs: %s", (char *)out.p);
	CHECK_RC(cdp_source_parse(out.p, out.len, &t), CDP_OK);
	CHECK(t.nband_list == 4 && t.band_list && t.band_list[0] == 3 &&
	      t.band_list[1] == 1 && t.band_list[2] == 4 && t.band_list[3] == 2 &&
	      !strcmp(t.crs, WKT), "band_list round trip");
	cdp_source_free(&t);
	CHECK(t.band_list == NULL && t.nband_list == 0, "free clears band_list");

	s.band_list = NULL;
	s.nband_list = 0;
	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(strstr((char *)out.p, "band_list") == NULL, "no list, no line");
	CHECK_RC(cdp_source_parse(out.p, out.len, &t), CDP_OK);
	CHECK(t.band_list == NULL && t.nband_list == 0, "no line reads as unknown");
	cdp_source_free(&t);

	s.band_list = bl;
	s.nband_list = 3;
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	s.nband_list = 4;
	bl[1] = 0;
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	cdp_buf_free(&out);

	CHECK_RC(parse_text("band_list=7\n" BASE GT), CDP_OK);
	CHECK_RC(parse_text(BASE GT "band_list=1,2\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "band_list=1\nband_list=1\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "band_list=\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "band_list=1,\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "band_list=,1\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "band_list=x\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "band_list= 1\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "band_list=0\n"), CDP_ERANGE);
	CHECK_RC(parse_text(BASE GT "band_list=-1\n"), CDP_ERANGE);
	CHECK_RC(parse_text(BASE GT "band_list=2147483648\n"), CDP_ERANGE);
	CHECK_RC(cdp_source_parse(BASE GT "band_list=1,2\n", strlen(BASE GT) + 14, &t),
	         CDP_EFORMAT);
	CHECK(t.band_list == NULL && t.path == NULL, "nothing left allocated on failure");
}

/* Class names (cdp-tile --classes or --label-map; version 2) survive format
 * and parse, after the band list and before crs, and so do the label and its
 * options; a body without them parses with none; holes, repeats and bad
 * names are refused; a version 1 header still reads (test_damage refuses 0
 * and 3). */
static void test_class_names(void)
{
	cdp_source s = sample_source(), t;
	cdp_buf out = { 0 };
	char *names[3] = { "bare ground", "water", "a=b,c" };
	int bl[1] = { 1 };
	FILE *f;

	s.class_names = names;
	s.nclass_names = 3;
	s.band_list = bl;
	s.nband_list = 1;
	s.bands = 1;
	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(strstr((char *)out.p, "\nband_list=1\nclass.0=bare ground\nclass.1=water\n"
	             "class.2=a=b,c\ncrs=PROJCS[") != NULL, "class lines: %s", (char *)out.p);
	CHECK_RC(cdp_source_parse(out.p, out.len, &t), CDP_OK);
	CHECK(t.nclass_names == 3 && !strcmp(t.class_names[0], "bare ground") &&
	      !strcmp(t.class_names[1], "water") && !strcmp(t.class_names[2], "a=b,c") &&
	      !strcmp(t.crs, WKT), "class names round trip");
	cdp_source_free(&t);
	CHECK(t.class_names == NULL && t.nclass_names == 0, "free clears the class names");
	names[1] = "";
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	names[1] = "a\nb";
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	names[1] = "a\tb";
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	names[1] = "water";

	/* the label and its options, after the class lines */
	s.label = "roads.gpkg";
	s.label_options = "--burn 1 --label-where 'a = 1'";
	CHECK_RC(cdp_source_format(&s, &out), CDP_OK);
	CHECK(strstr((char *)out.p, "class.2=a=b,c\nlabel=roads.gpkg\nlabel_options=--burn 1 "
	             "--label-where 'a = 1'\ncrs=") != NULL, "label lines: %s", (char *)out.p);
	CHECK_RC(cdp_source_parse(out.p, out.len, &t), CDP_OK);
	CHECK(t.label && !strcmp(t.label, "roads.gpkg") && t.label_options &&
	      !strcmp(t.label_options, s.label_options), "label round trip");
	cdp_source_free(&t);
	CHECK(!t.label && !t.label_options, "free clears the label");
	s.label_options = "a\nb";
	CHECK_RC(cdp_source_format(&s, &out), CDP_EINVAL);
	cdp_buf_free(&out);
	CHECK_RC(parse_text(BASE GT "label=a\nlabel=b\n"), CDP_EFORMAT);

	CHECK_RC(cdp_source_parse(BASE GT "class.1=b\nclass.0=a\n", strlen(BASE GT) + 20, &t),
	         CDP_OK);
	CHECK(t.nclass_names == 2 && !strcmp(t.class_names[0], "a") &&
	      !strcmp(t.class_names[1], "b"), "class lines in any order");
	cdp_source_free(&t);
	CHECK_RC(parse_text(BASE GT), CDP_OK);
	CHECK_RC(parse_text(BASE GT "class.1=b\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "class.0=a\nclass.0=b\n"), CDP_EFORMAT);
	CHECK_RC(parse_text(BASE GT "class.0=\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "class.x=a\n"), CDP_ESYNTAX);
	CHECK_RC(parse_text(BASE GT "class.65535=a\n"), CDP_ERANGE);
	CHECK_RC(parse_text(BASE GT "class.65536=a\n"), CDP_ERANGE);
	CHECK_RC(cdp_source_parse(BASE GT "class.0=a\nclass.2=c\n", strlen(BASE GT) + 20, &t),
	         CDP_EFORMAT);
	CHECK(t.class_names == NULL && t.path == NULL, "nothing left allocated on failure");

	f = mem_file("CDPS\1\0\0\0", 8);
	CHECK_RC(cdp_stream_read_header(f), CDP_OK);
	fclose(f);
}

int main(void)
{
	test_round_trip();
	test_damage();
	test_bad_frames();
	test_fail_frame();
	test_write_errors();
	test_source_text();
	test_band_list();
	test_class_names();
	return tap_done();
}
