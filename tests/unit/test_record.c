/* test_record.c: the tile record format (cdp_record.h).
 *
 * Checks the byte layout at fixed offsets, round trips over every dtype,
 * label kind, mask/nodata flag and compression, the zero-copy pointers, and
 * that damaged or lying records are rejected without reading out of bounds:
 * every single-byte corruption, every truncation, trailing bytes, and sizes
 * that lie (with the CRC fixed up so only the field checks can catch them).
 * Records under test live in exactly-sized heap copies so that ASan builds
 * catch any read past the end.
 */
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_record.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Payload storage for one test record: image (C,H,W), label (H,W), mask. */
typedef struct payloads {
	uint8_t image[3 * 5 * 7 * 8];
	uint8_t label[2 * 5 * 7 * 4];   /* up to (T=2,H,W) f32 targets */
	uint8_t mask[5 * 7];
} payloads;

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 12345;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345;
		p[i] = (uint8_t)(x >> 16);
	}
}

/* A record of shape (3,5,7) with the given options; payloads from pl. */
static cdp_record make(int dtype, int kind, int flags, int comp, payloads *pl,
                       unsigned seed)
{
	cdp_record r;

	memset(&r, 0, sizeof r);
	r.dtype = dtype;
	r.label_kind = kind;
	r.compression = comp;
	r.flags = flags;
	r.bands = 3;
	r.height = 5;
	r.width = 7;
	r.x_off = -1234567890123LL;
	r.y_off = 42;
	r.gt[0] = 500000.5;
	r.gt[1] = 10;
	r.gt[3] = 4649776.25;
	r.gt[5] = -10;
	r.source = 7;
	fill(pl->image, sizeof pl->image, seed);
	fill(pl->label, sizeof pl->label, seed + 1);
	for (size_t i = 0; i < sizeof pl->mask; i++)
		pl->mask[i] = (i + seed) % 3 ? 255 : 0;
	r.image = pl->image;
	if (kind == CDP_LABEL_U8 || kind == CDP_LABEL_U16) {
		r.label = pl->label;
		r.label_ignore = 255;
	}
	if (kind == CDP_LABEL_CLASS)
		r.class_id = 9;
	if (kind == CDP_LABEL_F32) {
		r.label = pl->label;
		r.label_len = 2;
	}
	if (kind == CDP_LABEL_MULTI) {
		for (size_t k = 0; k < 6; k++)
			pl->label[k] &= 1;
		r.label = pl->label;
		r.label_len = 6;
	}
	if (flags & CDP_REC_MASK)
		r.mask = pl->mask;
	if (flags & CDP_REC_NODATA)
		r.nodata = -9999;
	return r;
}

/* Scalar fields and payload bytes equal (doubles bitwise: NaN == NaN). */
static int same(const cdp_record *a, const cdp_record *b, int payloads_too)
{
	size_t si, sl, sm;

	if (a->dtype != b->dtype || a->label_kind != b->label_kind ||
	    a->compression != b->compression || a->flags != b->flags ||
	    a->bands != b->bands || a->height != b->height ||
	    a->width != b->width || a->x_off != b->x_off ||
	    a->y_off != b->y_off || memcmp(a->gt, b->gt, sizeof a->gt) ||
	    a->source != b->source || a->label_ignore != b->label_ignore ||
	    a->class_id != b->class_id || a->label_len != b->label_len ||
	    memcmp(&a->nodata, &b->nodata, sizeof a->nodata))
		return 0;
	if (!payloads_too)
		return 1;
	if (cdp_record_sizes(a, &si, &sl, &sm) != CDP_OK)
		return 0;
	if (!!a->label != !!b->label || !!a->mask != !!b->mask)
		return 0;
	return !memcmp(a->image, b->image, si) &&
	       (!sl || !memcmp(a->label, b->label, sl)) &&
	       (!sm || !memcmp(a->mask, b->mask, sm));
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (!q) {
		perror("malloc");
		exit(99);
	}
	memcpy(q, p, n);
	return q;
}

static void set_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void set_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Makes the CRC right again after a deliberate edit, so that the decoder's
 * field checks (not the CRC) have to catch the edit. */
static void fix_crc(uint8_t *b, size_t len)
{
	set_u32(b + len - 4, (uint32_t)crc32(0, b, (uInt)(len - 4)));
}

/* Decodes an exactly-sized heap copy of b[0..len). */
static int decode_copy(const uint8_t *b, size_t len, cdp_buf *scratch)
{
	uint8_t *c = dup_bytes(b, len);
	cdp_record r;
	int rc = cdp_record_decode(c, len, &r, scratch);

	free(c);
	return rc;
}

static void test_layout(void)
{
	payloads pl;
	cdp_record r = make(CDP_DT_U16, CDP_LABEL_U8, CDP_REC_MASK | CDP_REC_NODATA,
	                    CDP_COMP_NONE, &pl, 1);
	cdp_buf out = { 0 };
	const uint8_t *b;
	size_t n_img = 3 * 5 * 7 * 2, n_lab = 35, n_msk = 35;
	double nd = -9999;
	uint64_t ndbits;

	CHECK_RC(cdp_record_encode(&r, 6, &out), CDP_OK);
	b = out.p;
	CHECK(out.len == 160 + n_img + n_lab + n_msk + 4, "len %zu", out.len);
	CHECK(!memcmp(b, "CDPR", 4), "magic");
	CHECK(b[4] == 1 && b[5] == 0, "version");
	CHECK(b[6] == 160 && b[7] == 0, "header size");
	CHECK(b[8] == 2 && b[9] == 1 && b[10] == 0 && b[11] == 3,
	      "dtype/label/comp/flags %d %d %d %d", b[8], b[9], b[10], b[11]);
	CHECK(b[12] == 3 && b[16] == 5 && b[20] == 7 && !b[13] && !b[17] && !b[21],
	      "dims");
	CHECK(get_u64(b + 24) == (uint64_t)-1234567890123LL, "x offset");
	CHECK(get_u64(b + 32) == 42, "y offset");
	CHECK(get_u64(b + 40) == 0x411E848200000000ull, "gt[0] = 500000.5 LE");
	CHECK(b[88] == 7 && b[92] == 255 && b[96] == 0, "source/ignore/class");
	memcpy(&ndbits, &nd, 8);
	CHECK(get_u64(b + 104) == ndbits, "nodata");
	CHECK(get_u64(b + 112) == n_img && get_u64(b + 120) == n_lab &&
	      get_u64(b + 128) == n_msk, "stored sizes");
	CHECK(!memcmp(b + 160, pl.image, n_img), "image payload at 160");
	CHECK(!memcmp(b + 160 + n_img, pl.label, n_lab), "label after image");
	CHECK(!memcmp(b + 160 + n_img + n_lab, pl.mask, n_msk), "mask after label");
	CHECK(b[out.len - 4] == (uint8_t)crc32(0, b, (uInt)(out.len - 4)),
	      "crc low byte");
	for (int i = 100; i < 104; i++)
		CHECK(b[i] == 0, "reserved byte %d", i);
	for (int i = 136; i < 160; i++)
		CHECK(b[i] == 0, "reserved byte %d", i);
	cdp_buf_free(&out);
}

/* Every combination of dtype, label kind, flags and compression survives a
 * round trip; uncompressed ones decode in place and re-encode identically. */
static void test_round_trips(void)
{
	cdp_buf out = { 0 }, again = { 0 }, scratch = { 0 };
	payloads pl;

	for (int dt = 1; dt <= 7; dt++)
	for (int kind = 0; kind <= 5; kind++)
	for (int flags = 0; flags <= 3; flags++)
	for (int comp = 0; comp <= 1; comp++) {
		cdp_record r = make(dt, kind, flags, comp, &pl,
		                    (unsigned)(dt * 100 + kind * 10 + flags)), d, p;
		size_t si, sl, sm;

		CHECK_RC(cdp_record_encode(&r, 6, &out), CDP_OK);
		CHECK_RC(cdp_record_sizes(&r, &si, &sl, &sm), CDP_OK);
		CHECK(si == 105 * (dt == 7 ? 8 : dt >= 4 ? 4 : dt >= 2 ? 2 : 1),
		      "image size %zu dtype %d", si, dt);
		CHECK(sl == (kind == 1 ? 35u : kind == 2 ? 70u : kind == 4 ? 280u :
		             kind == 5 ? 6u : 0u), "label size kind %d", kind);
		CHECK(out.p[4] == (kind >= 4 ? 2 : 1), "version for kind %d", kind);
		CHECK(sm == (flags & 2 ? 35u : 0u), "mask size");
		if (cdp_record_decode(out.p, out.len, &d, &scratch) != CDP_OK) {
			CHECK(0, "decode dt %d kind %d flags %d comp %d",
			      dt, kind, flags, comp);
			continue;
		}
		CHECK(same(&r, &d, 1), "round trip dt %d kind %d flags %d comp %d",
		      dt, kind, flags, comp);
		CHECK_RC(cdp_record_peek(out.p, out.len, &p), CDP_OK);
		CHECK(same(&r, &p, 0) && !p.image && !p.label && !p.mask,
		      "peek dt %d kind %d flags %d comp %d", dt, kind, flags, comp);
		if (comp == CDP_COMP_NONE) {
			CHECK(d.image == (const void *)(out.p + 160), "zero-copy image");
			CHECK(!d.label || d.label == (const void *)(out.p + 160 + si),
			      "zero-copy label");
			CHECK(!d.mask || d.mask == out.p + 160 + si + sl,
			      "zero-copy mask");
			CHECK_RC(cdp_record_encode(&d, 6, &again), CDP_OK);
			CHECK(again.len == out.len && !memcmp(again.p, out.p, out.len),
			      "canonical re-encoding dt %d kind %d flags %d",
			      dt, kind, flags);
		} else {
			CHECK((const uint8_t *)d.image >= scratch.p &&
			      (const uint8_t *)d.image < scratch.p + scratch.cap,
			      "compressed payload inflated into scratch");
			CHECK(((uintptr_t)d.label & 7) == 0, "label aligned");
		}
	}
	cdp_buf_free(&out);
	cdp_buf_free(&again);
	cdp_buf_free(&scratch);
}

static void test_nan_nodata(void)
{
	payloads pl;
	cdp_record r = make(CDP_DT_F32, CDP_LABEL_NONE, CDP_REC_NODATA,
	                    CDP_COMP_NONE, &pl, 3), d;
	cdp_buf out = { 0 };

	r.nodata = NAN;
	CHECK_RC(cdp_record_encode(&r, 1, &out), CDP_OK);
	CHECK_RC(cdp_record_decode(out.p, out.len, &d, NULL), CDP_OK);
	CHECK(isnan(d.nodata) && (d.flags & CDP_REC_NODATA), "nan nodata kept");
	/* Without the flag the value is not stored at all. */
	r.flags = 0;
	CHECK_RC(cdp_record_encode(&r, 1, &out), CDP_OK);
	CHECK_RC(cdp_record_decode(out.p, out.len, &d, NULL), CDP_OK);
	CHECK(d.nodata == 0 && d.flags == 0, "nodata stored as 0 without flag");
	cdp_buf_free(&out);
}

/* Every byte of a small record, changed in any of three ways, is caught. */
static void test_corruption(int comp)
{
	payloads pl;
	cdp_record r = make(CDP_DT_I16, CDP_LABEL_U16, CDP_REC_MASK | CDP_REC_NODATA,
	                    comp, &pl, 5);
	cdp_buf out = { 0 }, scratch = { 0 };
	static const uint8_t flips[] = { 0x01, 0x80, 0xff };
	size_t missed = 0;

	CHECK_RC(cdp_record_encode(&r, 9, &out), CDP_OK);
	for (size_t i = 0; i < out.len; i++)
		for (size_t k = 0; k < sizeof flips; k++) {
			uint8_t *c = dup_bytes(out.p, out.len);
			cdp_record d;

			c[i] ^= flips[k];
			if (cdp_record_decode(c, out.len, &d, &scratch) == CDP_OK)
				missed++;
			free(c);
		}
	CHECK(missed == 0, "%zu of %zu corruptions accepted (comp %d)",
	      missed, out.len * sizeof flips, comp);
	cdp_buf_free(&out);
	cdp_buf_free(&scratch);
}

static void test_truncation(int comp)
{
	payloads pl;
	cdp_record r = make(CDP_DT_F64, CDP_LABEL_U8, CDP_REC_MASK, comp, &pl, 6);
	cdp_buf out = { 0 }, scratch = { 0 };
	size_t wrong = 0;
	uint8_t *c;

	CHECK_RC(cdp_record_encode(&r, 6, &out), CDP_OK);
	for (size_t n = 0; n < out.len; n++)
		if (decode_copy(out.p, n, &scratch) != CDP_ETRUNC)
			wrong++;
	CHECK(wrong == 0, "%zu truncations not reported as truncated", wrong);
	/* One byte too many (CRC fixed over the longer record). */
	c = malloc(out.len + 1);
	memcpy(c, out.p, out.len - 4);
	c[out.len - 4] = 0;
	fix_crc(c, out.len + 1);
	CHECK_RC(decode_copy(c, out.len + 1, &scratch), CDP_EFORMAT);
	free(c);
	cdp_buf_free(&out);
	cdp_buf_free(&scratch);
}

/* Edits one header field (CRC fixed) and expects want from decode. */
static void expect_edit(const cdp_buf *rec, size_t off, int width, uint64_t v,
                        int want, const char *what)
{
	uint8_t *c = dup_bytes(rec->p, rec->len);
	cdp_buf scratch = { 0 };
	cdp_record d;
	int rc;

	if (width == 1)
		c[off] = (uint8_t)v;
	else if (width == 2) {
		c[off] = (uint8_t)v;
		c[off + 1] = (uint8_t)(v >> 8);
	} else if (width == 4)
		set_u32(c + off, (uint32_t)v);
	else
		set_u64(c + off, v);
	fix_crc(c, rec->len);
	rc = cdp_record_decode(c, rec->len, &d, &scratch);
	CHECK(rc == want, "%s: got %d, want %d", what, rc, want);
	/* Nothing may be allocated on the word of a record that lies. */
	CHECK(rc == CDP_OK || rc == CDP_EZLIB || scratch.cap == 0,
	      "%s: allocated %zu bytes before rejecting", what, scratch.cap);
	cdp_buf_free(&scratch);
	free(c);
}

static void test_lying_fields(void)
{
	payloads pl;
	cdp_record r = make(CDP_DT_U8, CDP_LABEL_U8, CDP_REC_MASK, CDP_COMP_NONE, &pl, 7);
	cdp_buf plain = { 0 }, zip = { 0 };

	CHECK_RC(cdp_record_encode(&r, 6, &plain), CDP_OK);
	r.compression = CDP_COMP_ZLIB;
	CHECK_RC(cdp_record_encode(&r, 6, &zip), CDP_OK);

	expect_edit(&plain, 0, 1, 'X', CDP_EMAGIC, "magic");
	expect_edit(&plain, 4, 2, 3, CDP_EVERSION, "version 3");
	expect_edit(&plain, 4, 2, 2, CDP_EFORMAT, "version 2 for a u8 label");
	expect_edit(&plain, 6, 2, 168, CDP_EFORMAT, "header size");
	expect_edit(&plain, 8, 1, 0, CDP_EFORMAT, "dtype 0");
	expect_edit(&plain, 8, 1, 8, CDP_EFORMAT, "dtype 8");
	expect_edit(&plain, 9, 1, 4, CDP_EFORMAT, "label kind 4");
	expect_edit(&plain, 10, 1, 2, CDP_EFORMAT, "compression 2");
	expect_edit(&plain, 11, 1, 6, CDP_EFORMAT, "unknown flag");
	expect_edit(&plain, 12, 4, 0, CDP_EFORMAT, "zero bands");
	expect_edit(&plain, 20, 4, 65537, CDP_EFORMAT, "width over max");
	expect_edit(&plain, 96, 4, 3, CDP_EFORMAT, "class id with pixel labels");
	expect_edit(&plain, 100, 1, 1, CDP_EFORMAT, "reserved at 100");
	expect_edit(&plain, 159, 1, 1, CDP_EFORMAT, "reserved at 159");
	expect_edit(&plain, 104, 8, 1, CDP_EFORMAT, "nodata without its flag");
	expect_edit(&plain, 11, 1, 0, CDP_EFORMAT, "mask stored without flag");
	expect_edit(&plain, 9, 1, 0, CDP_EFORMAT, "label stored for kind none");
	expect_edit(&plain, 112, 8, 106, CDP_EFORMAT, "image size +1");
	expect_edit(&plain, 112, 8, 104, CDP_EFORMAT, "image size -1");
	expect_edit(&plain, 112, 8, UINT64_MAX, CDP_ETRUNC, "image size 2^64-1");
	expect_edit(&plain, 120, 8, (uint64_t)1 << 62, CDP_ETRUNC, "label size 2^62");
	expect_edit(&plain, 16, 4, 6, CDP_EFORMAT, "height +1 (uncompressed)");

	/* Compressed: a 65536^3 f64 image (2^51 bytes) claimed by a few
	 * hundred bytes must be refused before allocating. */
	{
		uint8_t *c = dup_bytes(zip.p, zip.len);
		cdp_buf scratch = { 0 };
		cdp_record d;

		c[8] = CDP_DT_F64;
		set_u32(c + 12, 65536);
		set_u32(c + 16, 65536);
		set_u32(c + 20, 65536);
		fix_crc(c, zip.len);
		CHECK_RC(cdp_record_decode(c, zip.len, &d, &scratch), CDP_EFORMAT);
		CHECK(scratch.cap == 0, "huge claim allocated %zu", scratch.cap);
		CHECK_RC(cdp_record_peek(c, zip.len, &d), CDP_EFORMAT);
		free(c);
	}
	expect_edit(&zip, 120, 8, 0, CDP_EFORMAT, "compressed label size 0");
	expect_edit(&zip, 112, 8, get_u64(zip.p + 112) + 1, CDP_ETRUNC,
	            "compressed sizes add up to more than len");
	expect_edit(&zip, 112, 8, get_u64(zip.p + 112) - 1, CDP_EFORMAT,
	            "compressed sizes add up to less than len");
	expect_edit(&zip, 120, 8, zip.len + 1, CDP_ETRUNC, "compressed size > len");
	expect_edit(&zip, 20, 4, 6, CDP_EZLIB, "inflates to more than width 6");
	expect_edit(&zip, 20, 4, 8, CDP_EZLIB, "inflates to less than width 8");

	/* Move one byte of the image stream into the label stream: sizes
	 * still add up, but neither stream inflates to its exact size. */
	{
		uint8_t *c = dup_bytes(zip.p, zip.len);
		cdp_record d;
		cdp_buf scratch = { 0 };

		set_u64(c + 112, get_u64(zip.p + 112) - 1);
		set_u64(c + 120, get_u64(zip.p + 120) + 1);
		fix_crc(c, zip.len);
		CHECK_RC(cdp_record_decode(c, zip.len, &d, &scratch), CDP_EZLIB);
		CHECK_RC(cdp_record_decode(zip.p, zip.len, &d, NULL), CDP_EINVAL);
		cdp_buf_free(&scratch);
		free(c);
	}

	/* A junk byte after the image's zlib stream, inside its stored size. */
	{
		size_t simg = (size_t)get_u64(zip.p + 112), n = zip.len + 1;
		uint8_t *c = malloc(n);
		cdp_record d;
		cdp_buf scratch = { 0 };

		memcpy(c, zip.p, 160 + simg);
		c[160 + simg] = 0;
		memcpy(c + 160 + simg + 1, zip.p + 160 + simg, zip.len - 160 - simg);
		set_u64(c + 112, simg + 1);
		fix_crc(c, n);
		CHECK_RC(decode_copy(c, n, &scratch), CDP_EZLIB);
		CHECK_RC(cdp_record_decode(c, n, &d, &scratch), CDP_EZLIB);
		cdp_buf_free(&scratch);
		free(c);
	}
	cdp_buf_free(&plain);
	cdp_buf_free(&zip);
}

static void expect_encode(cdp_record r, int zlevel, int want, const char *what)
{
	cdp_buf out = { 0 };
	int rc = cdp_record_encode(&r, zlevel, &out);

	CHECK(rc == want, "encode %s: got %d, want %d", what, rc, want);
	cdp_buf_free(&out);
}

static void test_encode_validation(void)
{
	payloads pl;
	cdp_record ok = make(CDP_DT_U8, CDP_LABEL_U8, CDP_REC_MASK, CDP_COMP_ZLIB, &pl, 8);
	cdp_record r;
	cdp_buf out = { 0 };

	expect_encode(ok, 6, CDP_OK, "valid");
	r = ok; r.dtype = 0; expect_encode(r, 6, CDP_EFORMAT, "dtype 0");
	r = ok; r.dtype = 8; expect_encode(r, 6, CDP_EFORMAT, "dtype 8");
	r = ok; r.label_kind = 4; expect_encode(r, 6, CDP_EFORMAT, "label kind 4");
	r = ok; r.label_kind = 6; r.label_len = 1;
	expect_encode(r, 6, CDP_EFORMAT, "label kind 6");
	r = ok; r.label_len = 1; expect_encode(r, 6, CDP_EFORMAT, "length for u8 kind");
	r = ok; r.label_kind = -1; expect_encode(r, 6, CDP_EFORMAT, "label kind -1");
	r = ok; r.compression = 2; expect_encode(r, 6, CDP_EFORMAT, "compression 2");
	r = ok; r.flags = 4; expect_encode(r, 6, CDP_EFORMAT, "flag bit 2");
	r = ok; r.bands = 0; expect_encode(r, 6, CDP_EFORMAT, "0 bands");
	r = ok; r.height = CDP_RECORD_MAXDIM + 1;
	expect_encode(r, 6, CDP_EFORMAT, "height over max");
	r = ok; r.label = NULL; expect_encode(r, 6, CDP_EFORMAT, "label missing");
	r = ok; r.label_kind = CDP_LABEL_NONE;
	expect_encode(r, 6, CDP_EFORMAT, "label given for kind none");
	r = ok; r.label_kind = CDP_LABEL_CLASS;
	expect_encode(r, 6, CDP_EFORMAT, "label given for class kind");
	r = ok; r.class_id = 1; expect_encode(r, 6, CDP_EFORMAT, "class id for u8 kind");
	r = ok; r.mask = NULL; expect_encode(r, 6, CDP_EFORMAT, "mask flag, no mask");
	r = ok; r.flags = 0; expect_encode(r, 6, CDP_EFORMAT, "mask without flag");
	r = ok; r.image = NULL; expect_encode(r, 6, CDP_EFORMAT, "no image");
	expect_encode(ok, 0, CDP_EINVAL, "zlevel 0");
	expect_encode(ok, 10, CDP_EINVAL, "zlevel 10");
	r = ok; r.compression = CDP_COMP_NONE;
	expect_encode(r, 0, CDP_OK, "zlevel ignored uncompressed");

	/* Re-encoding a zero-copy record into the buffer it points into. */
	r = ok; r.compression = CDP_COMP_NONE;
	CHECK_RC(cdp_record_encode(&r, 6, &out), CDP_OK);
	CHECK_RC(cdp_record_decode(out.p, out.len, &r, NULL), CDP_OK);
	CHECK_RC(cdp_record_encode(&r, 6, &out), CDP_EINVAL);
	cdp_buf_free(&out);
}

/* Version 2's label kinds: the length field, the version that goes with the
 * kind, and multi-hot bytes that must be 0 or 1, in both directions. */
static void test_version2(void)
{
	payloads pl;
	cdp_record val = make(CDP_DT_F32, CDP_LABEL_F32, CDP_REC_MASK, CDP_COMP_NONE,
	                      &pl, 21), r, d;
	cdp_buf plain = { 0 }, zip = { 0 }, scratch = { 0 };
	const uint8_t *b;
	uint8_t hot[6];
	float nan_target[2 * 35];

	/* A NaN target (no target at this pixel) survives bit for bit. */
	for (int i = 0; i < 70; i++)
		nan_target[i] = i % 5 ? (float)i * 0.25f : NAN;
	val.label = nan_target;
	CHECK_RC(cdp_record_encode(&val, 6, &plain), CDP_OK);
	b = plain.p;
	CHECK(b[4] == 2 && b[9] == 4 && b[100] == 2 && !b[101],
	      "version 2, kind 4, length 2 at offset 100");
	CHECK(get_u64(b + 120) == 280, "label size T*H*W*4");
	CHECK(!memcmp(b + 160 + 3 * 35 * 4, nan_target, 280), "targets after image");
	CHECK_RC(cdp_record_decode(plain.p, plain.len, &d, NULL), CDP_OK);
	CHECK(d.label_len == 2 && !memcmp(d.label, nan_target, 280), "targets back");
	expect_edit(&plain, 4, 2, 1, CDP_EFORMAT, "version 1 for value labels");
	expect_edit(&plain, 100, 4, 0, CDP_EFORMAT, "value label of length 0");
	expect_edit(&plain, 100, 4, 3, CDP_EFORMAT, "length that lies about size");
	expect_edit(&plain, 100, 4, CDP_RECORD_MAXLABEL + 1, CDP_EFORMAT,
	            "length over max");
	expect_edit(&plain, 92, 4, 255, CDP_EFORMAT, "ignore value for targets");

	r = make(CDP_DT_U8, CDP_LABEL_MULTI, 0, CDP_COMP_NONE, &pl, 22);
	memcpy(hot, (uint8_t[]){ 1, 0, 0, 1, 1, 0 }, 6);
	r.label = hot;
	CHECK_RC(cdp_record_encode(&r, 6, &plain), CDP_OK);
	CHECK(plain.p[4] == 2 && plain.p[9] == 5 && plain.p[100] == 6, "multi-hot header");
	expect_edit(&plain, 160 + 105 + 2, 1, 2, CDP_EFORMAT, "multi-hot byte 2");
	expect_edit(&plain, 160 + 105 + 2, 1, 1, CDP_OK, "multi-hot byte 1");
	r.compression = CDP_COMP_ZLIB;
	hot[3] = 7;
	expect_encode(r, 6, CDP_EFORMAT, "encode multi-hot byte 7");
	hot[3] = 0;
	memset(hot, 0, sizeof hot);   /* the empty set is a valid label */
	CHECK_RC(cdp_record_encode(&r, 6, &zip), CDP_OK);
	CHECK_RC(cdp_record_decode(zip.p, zip.len, &d, &scratch), CDP_OK);
	CHECK(d.label_len == 6 && !memcmp(d.label, hot, 6), "empty set round trip");
	r.label = NULL;
	expect_encode(r, 6, CDP_EFORMAT, "multi-hot without payload");
	cdp_buf_free(&plain);
	cdp_buf_free(&zip);
	cdp_buf_free(&scratch);
}

/* All-zero tiles (fully padded, nodata) compress close to deflate's 1032:1
 * limit; the decoder's expansion check must still accept them. */
static void test_compressible(void)
{
	cdp_record r, d;
	cdp_buf out = { 0 }, scratch = { 0 };
	uint8_t *zeros = calloc(4u << 20, 1);

	memset(&r, 0, sizeof r);
	memset(&d, 0, sizeof d);
	r.dtype = CDP_DT_U8;
	r.bands = 4;
	r.height = r.width = 1024;
	r.compression = CDP_COMP_ZLIB;
	r.image = zeros;
	CHECK_RC(cdp_record_encode(&r, 9, &out), CDP_OK);
	CHECK(out.len < 160 + 4200, "4 MiB of zeros took %zu bytes", out.len);
	CHECK_RC(cdp_record_decode(out.p, out.len, &d, &scratch), CDP_OK);
	CHECK(d.image && !memcmp(d.image, zeros, 4u << 20), "zeros round trip");
	cdp_buf_free(&out);
	cdp_buf_free(&scratch);
	free(zeros);
}

static void test_buf(void)
{
	cdp_buf b = { 0 };
	size_t last = 0, grows = 0;

	for (size_t n = 1; n <= 1000000; n += 997) {
		CHECK_RC(cdp_buf_reserve(&b, n), CDP_OK);
		CHECK(b.cap >= n, "cap %zu < %zu", b.cap, n);
		if (b.cap != last)
			grows++;
		last = b.cap;
	}
	CHECK(grows <= 16, "%zu reallocations: growth is not geometric", grows);
	b.p[999999] = 1;
	CHECK_RC(cdp_buf_reserve(&b, 10), CDP_OK);
	CHECK(b.cap == last, "reserve never shrinks");
	cdp_buf_free(&b);
	CHECK(b.p == NULL && b.cap == 0 && b.len == 0, "freed");
}

int main(void)
{
	test_layout();
	test_round_trips();
	test_nan_nodata();
	test_corruption(CDP_COMP_NONE);
	test_corruption(CDP_COMP_ZLIB);
	test_truncation(CDP_COMP_NONE);
	test_truncation(CDP_COMP_ZLIB);
	test_lying_fields();
	test_encode_validation();
	test_version2();
	test_compressible();
	test_buf();
	return tap_done();
}
