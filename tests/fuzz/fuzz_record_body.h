/* fuzz_record_body.h: the fuzz target for records and record streams.
 *
 * Shared by the libFuzzer harness (fuzz_record.c) and the regression test
 * that replays tests/fuzz/corpus (tests/unit/test_fuzz_regress.c), so both
 * run exactly the same checks. abort() marks a broken invariant:
 *   - decode and peek agree (peek accepts whatever decode accepts, with the
 *     same scalar fields; where both reject, with the same code);
 *   - a decoded record re-encodes (both compressed and not) to a record that
 *     decodes to identical fields and payload bytes, and an uncompressed
 *     record re-encodes to exactly its input bytes (one valid encoding);
 *   - in a stream, an 'S' body that parses formats and re-parses to the same
 *     source; 'R' bodies get the record checks.
 * Random bytes almost never carry a right CRC, so each input is also run
 * with its CRCs recomputed (the record's last four bytes, and each frame's
 * CRC along the frame chain), which lets the fuzzer reach the checks behind
 * the CRC.
 */
#ifndef CDP_FUZZ_RECORD_BODY_H
#define CDP_FUZZ_RECORD_BODY_H

#include "cdp_error.h"
#include "cdp_record.h"
#include "cdp_stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Scalars equal (doubles bitwise, so NaN == NaN). */
static int cdp_fuzz_same_scalars(const cdp_record *a, const cdp_record *b)
{
	return a->dtype == b->dtype && a->label_kind == b->label_kind &&
	       a->flags == b->flags && a->bands == b->bands &&
	       a->height == b->height && a->width == b->width &&
	       a->x_off == b->x_off && a->y_off == b->y_off &&
	       !memcmp(a->gt, b->gt, sizeof a->gt) && a->source == b->source &&
	       a->label_ignore == b->label_ignore &&
	       a->class_id == b->class_id &&
	       !memcmp(&a->nodata, &b->nodata, sizeof a->nodata);
}

static int cdp_fuzz_same_payloads(const cdp_record *a, const cdp_record *b)
{
	size_t si, sl, sm;

	if (cdp_record_sizes(a, &si, &sl, &sm) != CDP_OK)
		return 0;
	if (!a->image || !b->image || !!a->label != !!b->label ||
	    !!a->mask != !!b->mask)
		return 0;
	return !memcmp(a->image, b->image, si) &&
	       (!sl || !memcmp(a->label, b->label, sl)) &&
	       (!sm || !memcmp(a->mask, b->mask, sm));
}

/* Re-encodes r with the given compression and checks the result. */
static void cdp_fuzz_reencode(const cdp_record *r, int compression,
                              const uint8_t *orig, size_t orig_len)
{
	cdp_record e = *r, d;
	cdp_buf out = { 0 }, scratch = { 0 };

	e.compression = compression;
	if (cdp_record_encode(&e, 1, &out) != CDP_OK)
		abort();
	if (cdp_record_decode(out.p, out.len, &d, &scratch) != CDP_OK)
		abort();
	if (d.compression != compression || !cdp_fuzz_same_scalars(r, &d) ||
	    !cdp_fuzz_same_payloads(r, &d))
		abort();
	if (compression == CDP_COMP_NONE && r->compression == CDP_COMP_NONE &&
	    (out.len != orig_len || memcmp(out.p, orig, orig_len)))
		abort();
	cdp_buf_free(&out);
	cdp_buf_free(&scratch);
}

/* The record checks on data as given; returns the decode code. */
static int cdp_fuzz_record_part(const uint8_t *data, size_t size)
{
	cdp_record r, p;
	cdp_buf scratch = { 0 };
	int rc = cdp_record_decode(data, size, &r, &scratch);
	int prc = cdp_record_peek(data, size, &p);

	if (rc == CDP_OK) {
		if (prc != CDP_OK || !cdp_fuzz_same_scalars(&r, &p) ||
		    p.compression != r.compression || p.image || p.label || p.mask)
			abort();
		cdp_fuzz_reencode(&r, CDP_COMP_NONE, data, size);
		cdp_fuzz_reencode(&r, CDP_COMP_ZLIB, data, size);
	} else if (prc == CDP_OK) {
		/* Only what peek does not look at may fail. */
		if (rc != CDP_ECRC && rc != CDP_EZLIB && rc != CDP_ENOMEM)
			abort();
	} else if (prc != rc) {
		abort();
	}
	cdp_buf_free(&scratch);
	return rc;
}

static void cdp_fuzz_source_check(const cdp_frame *fr)
{
	cdp_source s, t;
	cdp_buf text = { 0 };

	if (cdp_source_parse(fr->body.p, fr->body.len, &s) != CDP_OK)
		return;
	if (cdp_source_format(&s, &text) != CDP_OK ||
	    cdp_source_parse(text.p, text.len, &t) != CDP_OK)
		abort();
	if (s.index != t.index || strcmp(s.name, t.name) ||
	    strcmp(s.path, t.path) || s.width != t.width ||
	    s.height != t.height || s.bands != t.bands || s.dtype != t.dtype ||
	    memcmp(s.gt, t.gt, sizeof s.gt) || strcmp(s.crs, t.crs) ||
	    s.nband_list != t.nband_list ||
	    (s.nband_list && memcmp(s.band_list, t.band_list,
	                            s.nband_list * sizeof *s.band_list)) ||
	    s.nclass_names != t.nclass_names)
		abort();
	for (uint32_t k = 0; k < s.nclass_names; k++)
		if (!s.class_names[k][0] || strcmp(s.class_names[k], t.class_names[k]))
			abort();
	cdp_source_free(&s);
	cdp_source_free(&t);
	cdp_buf_free(&text);
}

/* Reads data as a record stream; CDP_OK only when it reaches an 'E' frame
 * whose count matches the 'R' frames read. */
static int cdp_fuzz_stream_part(const uint8_t *data, size_t size)
{
	cdp_frame fr = { 0 };
	unsigned long long nrec = 0, count;
	FILE *f;
	int rc;

	if (size == 0)
		return CDP_ETRUNC;      /* fmemopen() refuses a size of 0 */
	f = fmemopen((void *)data, size, "rb");
	if (!f)
		return CDP_ENOMEM;
	rc = cdp_stream_read_header(f);
	while (rc == CDP_OK) {
		if ((rc = cdp_stream_read_frame(f, &fr)) != CDP_OK) {
			/* a producer's failure: an 'F' frame of one line */
			if (rc == CDP_ECANCEL && (fr.type != CDP_FRAME_FAIL || fr.body.len < 7 ||
			                          memcmp(fr.body.p, "error=", 6) != 0 ||
			                          fr.body.p[fr.body.len - 1] != '\n'))
				abort();
			break;
		}
		if (fr.name_len != strlen(fr.name) || fr.name_len > 511)
			abort();
		if (fr.type == CDP_FRAME_RECORD) {
			cdp_fuzz_record_part(fr.body.p, fr.body.len);
			nrec++;
		} else if (fr.type == CDP_FRAME_SOURCE) {
			cdp_fuzz_source_check(&fr);
		} else if (fr.type == CDP_FRAME_END) {
			/* read_frame checked the body is "count=N\n". */
			if (sscanf((const char *)fr.body.p, "count=%llu", &count) != 1)
				abort();
			if (count != nrec)
				rc = CDP_EMISMATCH;
			break;
		} else {
			abort();
		}
	}
	fclose(f);
	cdp_frame_free(&fr);
	return rc;
}

static void cdp_fuzz_put_crc(uint8_t *p, uint32_t crc)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(crc >> (8 * i));
}

/* Runs every check on data, and again with its CRCs recomputed. Returns
 * the record decode code of data as given. */
static int cdp_fuzz_record_one(const uint8_t *data, size_t size)
{
	int rc = cdp_fuzz_record_part(data, size);
	uint8_t *c;
	size_t pos = 8;

	cdp_fuzz_stream_part(data, size);
	if (size < 4 || !(c = malloc(size)))
		return rc;
	memcpy(c, data, size);
	cdp_fuzz_put_crc(c + size - 4, (uint32_t)crc32_z(0, c, size - 4));
	cdp_fuzz_record_part(c, size);

	/* Follow the frame chain as the reader would, fixing each CRC. */
	memcpy(c, data, size);
	while (pos + 8 <= size) {
		size_t nl = (size_t)c[pos + 2] | (size_t)c[pos + 3] << 8;
		size_t bl = (size_t)c[pos + 4] | (size_t)c[pos + 5] << 8 |
		            (size_t)c[pos + 6] << 16 | (size_t)c[pos + 7] << 24;
		size_t end = pos + 8 + nl + bl;

		if (end < pos || end > size - 4)
			break;
		cdp_fuzz_put_crc(c + end, (uint32_t)crc32_z(0, c + pos, end - pos));
		pos = end + 4;
	}
	cdp_fuzz_stream_part(c, size);
	free(c);
	return rc;
}

#endif
