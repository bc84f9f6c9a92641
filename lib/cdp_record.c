/* cdp_record.c: encoding and validating decoding of tile records.
 *
 * The layout is in cdp_record.h and man/cdp-record.5. Integers are written
 * and read byte by byte in little-endian order, never by copying structs, so
 * the format does not depend on the host's endianness, padding or alignment.
 *
 * The decoder trusts nothing in its input: every field is range-checked and
 * every stored size is checked against the bytes actually present (with
 * overflow checks) before any payload byte is read or any memory allocated,
 * and the only allocation (the inflate scratch) is bounded by deflate's
 * maximum expansion of the bytes present. The format is strict: reserved bytes
 * and fields not in use must be zero, and the version follows from the label
 * kind (1 for kinds 0..3, 2 for kinds 4 and 5, so version 1 readers keep
 * reading every record they could read before), so every valid record has
 * exactly one uncompressed encoding.
 *
 * Not here: choosing record contents (cdp-tile) or storing them (cdp_pool).
 */
#include "cdp_record.h"
#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_num.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Deflate cannot expand data more than 1032:1 (a 258-byte match coded in
 * two bits); a compressed payload of n bytes that claims more than
 * 1032*(n+1) raw bytes is a lie, rejected before allocating for it. */
#define DEFLATE_MAX_RATIO 1032u

/* Header field offsets (cdp_record.h). */
enum {
	OFF_MAGIC = 0, OFF_VERSION = 4, OFF_HDRSIZE = 6, OFF_DTYPE = 8,
	OFF_LABEL = 9, OFF_COMP = 10, OFF_FLAGS = 11, OFF_BANDS = 12,
	OFF_HEIGHT = 16, OFF_WIDTH = 20, OFF_XOFF = 24, OFF_YOFF = 32,
	OFF_GT = 40, OFF_SOURCE = 88, OFF_IGNORE = 92, OFF_CLASS = 96,
	OFF_LABLEN = 100, OFF_NODATA = 104, OFF_SIMAGE = 112, OFF_SLABEL = 120,
	OFF_SMASK = 128, OFF_RES2 = 136
};

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Doubles travel as their IEEE-754 bit pattern, so NaN nodata survives. */
static void put_f64(uint8_t *p, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof v);
	put_u64(p, v);
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static double get_f64(const uint8_t *p)
{
	uint64_t v = get_u64(p);
	double d;

	memcpy(&d, &v, sizeof d);
	return d;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int cdp_buf_reserve(cdp_buf *b, size_t cap)
{
	size_t ncap;
	uint8_t *p;

	if (!b)
		return CDP_EINVAL;
	if (cap <= b->cap)
		return CDP_OK;
	/* Doubling keeps a buffer reused for growing records at O(log n)
	 * reallocations. */
	ncap = b->cap < 64 ? 64 : b->cap;
	while (ncap < cap)
		ncap = ncap > SIZE_MAX / 2 ? cap : ncap * 2;
	p = realloc(b->p, ncap);
	if (!p)
		return CDP_ENOMEM;
	b->p = p;
	b->cap = ncap;
	return CDP_OK;
}

void cdp_buf_free(cdp_buf *b)
{
	if (!b)
		return;
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* Label kinds whose payload size is set by the label length field. */
static int has_len(int kind)
{
	return kind == CDP_LABEL_F32 || kind == CDP_LABEL_MULTI;
}

static int version_of(int kind)
{
	return has_len(kind) ? CDP_RECORD_VERSION : CDP_RECORD_VERSION1;
}

/* A multi-hot payload holds K bytes, each 0 or 1. */
static int multi_ok(const cdp_record *r)
{
	const uint8_t *p = r->label;

	if (r->label_kind != CDP_LABEL_MULTI)
		return 1;
	for (uint32_t k = 0; k < r->label_len; k++)
		if (p[k] > 1)
			return 0;
	return 1;
}

/* The scalar fields every record must satisfy, encoded or decoded. */
static int check_fields(const cdp_record *r)
{
	if (!cdp_dtype_size(r->dtype))
		return CDP_EFORMAT;
	if (r->label_kind < CDP_LABEL_NONE || r->label_kind > CDP_LABEL_MULTI)
		return CDP_EFORMAT;
	if (r->compression != CDP_COMP_NONE && r->compression != CDP_COMP_ZLIB)
		return CDP_EFORMAT;
	if (r->flags & ~(CDP_REC_NODATA | CDP_REC_MASK))
		return CDP_EFORMAT;
	if (r->bands < 1 || r->bands > CDP_RECORD_MAXDIM ||
	    r->height < 1 || r->height > CDP_RECORD_MAXDIM ||
	    r->width < 1 || r->width > CDP_RECORD_MAXDIM)
		return CDP_EFORMAT;
	if (r->class_id != 0 && r->label_kind != CDP_LABEL_CLASS)
		return CDP_EFORMAT;
	if (has_len(r->label_kind) ?
	    r->label_len < 1 || r->label_len > CDP_RECORD_MAXLABEL :
	    r->label_len != 0)
		return CDP_EFORMAT;
	return CDP_OK;
}

int cdp_record_sizes(const cdp_record *r, size_t *image, size_t *label,
                     size_t *mask)
{
	size_t hw, img, lab = 0, msk = 0;
	int rc;

	if (!r || !image || !label || !mask)
		return CDP_EINVAL;
	if ((rc = check_fields(r)) != CDP_OK)
		return rc;
	if ((rc = cdp_mul_size(r->height, r->width, &hw)) != CDP_OK ||
	    (rc = cdp_mul_size(hw, r->bands, &img)) != CDP_OK ||
	    (rc = cdp_mul_size(img, cdp_dtype_size(r->dtype), &img)) != CDP_OK)
		return rc;
	if (r->label_kind == CDP_LABEL_U8)
		lab = hw;
	else if (r->label_kind == CDP_LABEL_U16 &&
	         (rc = cdp_mul_size(hw, 2, &lab)) != CDP_OK)
		return rc;
	else if (r->label_kind == CDP_LABEL_F32 &&
	         ((rc = cdp_mul_size(hw, r->label_len, &lab)) != CDP_OK ||
	          (rc = cdp_mul_size(lab, 4, &lab)) != CDP_OK))
		return rc;
	else if (r->label_kind == CDP_LABEL_MULTI)
		lab = r->label_len;
	if (r->flags & CDP_REC_MASK)
		msk = hw;
	*image = img;
	*label = lab;
	*mask = msk;
	return CDP_OK;
}

/* Does [p, p+n) overlap the buffer's allocation? Encoding a payload that
 * lives in out would read freed memory once out is reallocated. */
static int inside(const cdp_buf *b, const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, lo = (uintptr_t)b->p;

	return b->p && n && a < lo + b->cap && lo < a + n;
}

static void write_header(const cdp_record *r, uint64_t s_img, uint64_t s_lab,
                         uint64_t s_msk, uint8_t *h)
{
	memset(h, 0, CDP_RECORD_HDR);
	memcpy(h + OFF_MAGIC, CDP_RECORD_MAGIC, 4);
	put_u16(h + OFF_VERSION, (uint16_t)version_of(r->label_kind));
	put_u16(h + OFF_HDRSIZE, CDP_RECORD_HDR);
	h[OFF_DTYPE] = (uint8_t)r->dtype;
	h[OFF_LABEL] = (uint8_t)r->label_kind;
	h[OFF_COMP] = (uint8_t)r->compression;
	h[OFF_FLAGS] = (uint8_t)r->flags;
	put_u32(h + OFF_BANDS, r->bands);
	put_u32(h + OFF_HEIGHT, r->height);
	put_u32(h + OFF_WIDTH, r->width);
	put_u64(h + OFF_XOFF, (uint64_t)r->x_off);
	put_u64(h + OFF_YOFF, (uint64_t)r->y_off);
	for (int i = 0; i < 6; i++)
		put_f64(h + OFF_GT + 8 * i, r->gt[i]);
	put_u32(h + OFF_SOURCE, r->source);
	/* Fields not in use are stored as zero (the decoder insists). */
	if (r->label_kind == CDP_LABEL_U8 || r->label_kind == CDP_LABEL_U16)
		put_u32(h + OFF_IGNORE, r->label_ignore);
	put_u32(h + OFF_CLASS, r->class_id);
	put_u32(h + OFF_LABLEN, r->label_len);
	if (r->flags & CDP_REC_NODATA)
		put_f64(h + OFF_NODATA, r->nodata);
	put_u64(h + OFF_SIMAGE, s_img);
	put_u64(h + OFF_SLABEL, s_lab);
	put_u64(h + OFF_SMASK, s_msk);
}

int cdp_record_encode(const cdp_record *r, int zlevel, cdp_buf *out)
{
	const void *src[3];
	size_t raw[3], bound[3], total = CDP_RECORD_HDR, pos = CDP_RECORD_HDR;
	uint64_t stored[3] = { 0, 0, 0 };
	int zip, rc;

	if (!r || !out)
		return CDP_EINVAL;
	if ((rc = cdp_record_sizes(r, &raw[0], &raw[1], &raw[2])) != CDP_OK)
		return rc;
	/* A payload is present exactly when the header says it is. */
	if (!r->image || !!r->label != (raw[1] != 0) ||
	    !!r->mask != (raw[2] != 0) || !multi_ok(r))
		return CDP_EFORMAT;
	zip = r->compression == CDP_COMP_ZLIB;
	if (zip && (zlevel < 1 || zlevel > 9))
		return CDP_EINVAL;
	src[0] = r->image;
	src[1] = r->label;
	src[2] = r->mask;
	for (int i = 0; i < 3; i++) {
		if (inside(out, src[i], raw[i]))
			return CDP_EINVAL;
		bound[i] = raw[i];
		if (zip && raw[i]) {
			if (raw[i] > (uLong)-1)
				return CDP_EOVERFLOW;
			bound[i] = compressBound((uLong)raw[i]);
			if (bound[i] < raw[i])
				return CDP_EOVERFLOW;
		}
		if ((rc = cdp_add_size(total, bound[i], &total)) != CDP_OK)
			return rc;
	}
	if ((rc = cdp_add_size(total, 4, &total)) != CDP_OK)
		return rc;
	if ((rc = cdp_buf_reserve(out, total)) != CDP_OK)
		return rc;

	for (int i = 0; i < 3; i++) {
		if (!raw[i])
			continue;
		if (zip) {
			uLongf n = (uLongf)bound[i];

			if (compress2(out->p + pos, &n, src[i], (uLong)raw[i],
			              zlevel) != Z_OK)
				return CDP_EZLIB;
			stored[i] = n;
		} else {
			memcpy(out->p + pos, src[i], raw[i]);
			stored[i] = raw[i];
		}
		pos += (size_t)stored[i];
	}
	write_header(r, stored[0], stored[1], stored[2], out->p);
	put_u32(out->p + pos, cdp_crc32(0, out->p, pos));
	out->len = pos + 4;
	return CDP_OK;
}

/* Parses and validates the header against len; on success fills the scalar
 * fields of r, the raw sizes and the stored sizes. Shared by peek and
 * decode, so both accept exactly the same records (up to the CRC). */
static int parse(const uint8_t *b, size_t len, cdp_record *r, size_t raw[3],
                 size_t stored[3])
{
	size_t total = CDP_RECORD_HDR;
	uint64_t s;
	int rc, version;

	/* The magic first, so that foreign data says "not ours" even when
	 * it is short. */
	if (len < 4)
		return CDP_ETRUNC;
	if (memcmp(b + OFF_MAGIC, CDP_RECORD_MAGIC, 4) != 0)
		return CDP_EMAGIC;
	if (len < 6)
		return CDP_ETRUNC;
	version = get_u16(b + OFF_VERSION);
	if (version != CDP_RECORD_VERSION1 && version != CDP_RECORD_VERSION)
		return CDP_EVERSION;
	if (len < CDP_RECORD_HDR + 4)
		return CDP_ETRUNC;
	if (get_u16(b + OFF_HDRSIZE) != CDP_RECORD_HDR)
		return CDP_EFORMAT;

	memset(r, 0, sizeof *r);
	r->dtype = b[OFF_DTYPE];
	r->label_kind = b[OFF_LABEL];
	r->compression = b[OFF_COMP];
	r->flags = b[OFF_FLAGS];
	r->bands = get_u32(b + OFF_BANDS);
	r->height = get_u32(b + OFF_HEIGHT);
	r->width = get_u32(b + OFF_WIDTH);
	r->x_off = (int64_t)get_u64(b + OFF_XOFF);
	r->y_off = (int64_t)get_u64(b + OFF_YOFF);
	for (int i = 0; i < 6; i++)
		r->gt[i] = get_f64(b + OFF_GT + 8 * i);
	r->source = get_u32(b + OFF_SOURCE);
	r->label_ignore = get_u32(b + OFF_IGNORE);
	r->class_id = get_u32(b + OFF_CLASS);
	r->label_len = get_u32(b + OFF_LABLEN);
	r->nodata = get_f64(b + OFF_NODATA);
	if ((rc = cdp_record_sizes(r, &raw[0], &raw[1], &raw[2])) != CDP_OK)
		return rc;
	if (version != version_of(r->label_kind) || !all_zero(b + OFF_RES2, 24))
		return CDP_EFORMAT;
	if (!(r->flags & CDP_REC_NODATA) && !all_zero(b + OFF_NODATA, 8))
		return CDP_EFORMAT;
	if (r->label_kind != CDP_LABEL_U8 && r->label_kind != CDP_LABEL_U16 &&
	    r->label_ignore != 0)
		return CDP_EFORMAT;

	for (int i = 0; i < 3; i++) {
		s = get_u64(b + OFF_SIMAGE + 8 * i);
		if (s > len)
			return CDP_ETRUNC;
		stored[i] = (size_t)s;
		if (r->compression == CDP_COMP_NONE) {
			if (stored[i] != raw[i])
				return CDP_EFORMAT;
		} else if ((stored[i] == 0) != (raw[i] == 0) ||
		           raw[i] / DEFLATE_MAX_RATIO > stored[i]) {
			return CDP_EFORMAT;
		}
		if ((rc = cdp_add_size(total, stored[i], &total)) != CDP_OK)
			return rc;
	}
	if ((rc = cdp_add_size(total, 4, &total)) != CDP_OK)
		return rc;
	if (total > len)
		return CDP_ETRUNC;
	if (total < len)
		return CDP_EFORMAT;     /* trailing bytes */
	return CDP_OK;
}

int cdp_record_peek(const void *buf, size_t len, cdp_record *r)
{
	size_t raw[3], stored[3];

	if (!buf || !r)
		return CDP_EINVAL;
	return parse(buf, len, r, raw, stored);
}

/* Rounds n up to a multiple of 8 so each payload in scratch is aligned for
 * any sample type. */
static int align8(size_t n, size_t *out)
{
	int rc = cdp_add_size(n, 7, out);

	*out &= ~(size_t)7;
	return rc;
}

int cdp_record_decode(const void *buf, size_t len, cdp_record *r,
                      cdp_buf *scratch)
{
	const uint8_t *b = buf, *payload[3] = { NULL, NULL, NULL };
	size_t raw[3], stored[3], off[3], need = 0, pos = CDP_RECORD_HDR;
	int rc;

	if (!buf || !r)
		return CDP_EINVAL;
	if ((rc = parse(b, len, r, raw, stored)) != CDP_OK)
		return rc;
	if (get_u32(b + len - 4) != cdp_crc32(0, b, len - 4))
		return CDP_ECRC;

	if (r->compression == CDP_COMP_NONE) {
		for (int i = 0; i < 3; i++) {
			if (raw[i])
				payload[i] = b + pos;
			pos += stored[i];
		}
	} else {
		if (!scratch)
			return CDP_EINVAL;
		for (int i = 0; i < 3; i++) {
			off[i] = need;
			if ((rc = cdp_add_size(need, raw[i], &need)) != CDP_OK ||
			    (rc = align8(need, &need)) != CDP_OK)
				return rc;
		}
		if ((rc = cdp_buf_reserve(scratch, need)) != CDP_OK)
			return rc;
		scratch->len = need;
		for (int i = 0; i < 3; i++) {
			uLongf n = (uLongf)raw[i];
			uLong used = (uLong)stored[i];

			if (!raw[i])
				continue;
			if (raw[i] > (uLongf)-1 || stored[i] > (uLong)-1)
				return CDP_EOVERFLOW;
			/* Exactly raw[i] bytes from exactly stored[i] bytes:
			 * too much output is Z_BUF_ERROR, too little or
			 * leftover input is caught by the counts. */
			if (uncompress2(scratch->p + off[i], &n, b + pos,
			                &used) != Z_OK ||
			    n != raw[i] || used != stored[i])
				return CDP_EZLIB;
			payload[i] = scratch->p + off[i];
			pos += stored[i];
		}
	}
	r->image = payload[0];
	r->label = payload[1];
	r->mask = payload[2];
	return multi_ok(r) ? CDP_OK : CDP_EFORMAT;
}

static const char *kind_name(unsigned k)
{
	static const char *const n[] = { "none", "u8", "u16", "class", "f32", "multi" };
	return k <= CDP_LABEL_MULTI ? n[k] : "?";
}

/* parse()'s checks again, in its order, each saying what it found: only
 * on the way to an error message, so the decoder itself stays one path. */
const char *cdp_record_why(const void *buf, size_t len, int rc, char *why, size_t cap)
{
	static const char *const part[3] = { "image", "label", "mask" };
	const uint8_t *b = buf;
	cdp_record r;
	size_t raw[3], total = CDP_RECORD_HDR;
	unsigned v, k, hs;

	if (!why || cap == 0)
		return why;
	snprintf(why, cap, "%s", cdp_strerror(rc));
	if ((rc != CDP_EFORMAT && rc != CDP_EVERSION) || !b || len < CDP_RECORD_HDR + 4)
		return why;
	v = get_u16(b + OFF_VERSION);
	k = b[OFF_LABEL];
	hs = get_u16(b + OFF_HDRSIZE);
	if (rc == CDP_EVERSION) {
		snprintf(why, cap, "version %u: %s (this program reads 1 and 2)", v,
		         cdp_strerror(rc));
		return why;
	}
	memset(&r, 0, sizeof r);
	r.dtype = b[OFF_DTYPE];
	r.label_kind = (int)k;
	r.compression = b[OFF_COMP];
	r.flags = b[OFF_FLAGS];
	r.bands = get_u32(b + OFF_BANDS);
	r.height = get_u32(b + OFF_HEIGHT);
	r.width = get_u32(b + OFF_WIDTH);
	r.class_id = get_u32(b + OFF_CLASS);
	r.label_len = get_u32(b + OFF_LABLEN);
	r.label_ignore = get_u32(b + OFF_IGNORE);
	if (hs != CDP_RECORD_HDR)
		snprintf(why, cap, "header size %u, not %d", hs, CDP_RECORD_HDR);
	else if (!cdp_dtype_size(r.dtype))
		snprintf(why, cap, "data type code %d is none of 1..7", r.dtype);
	else if (k > CDP_LABEL_MULTI)
		snprintf(why, cap, "label kind %u is none of 0..%d", k, CDP_LABEL_MULTI);
	else if (r.compression != CDP_COMP_NONE && r.compression != CDP_COMP_ZLIB)
		snprintf(why, cap, "compression %d is none of 0 (none), 1 (zlib)", r.compression);
	else if (r.flags & ~(CDP_REC_NODATA | CDP_REC_MASK))
		snprintf(why, cap, "flags 0x%02x hold unknown bits (known: 0x%02x)", (unsigned)r.flags,
		         CDP_REC_NODATA | CDP_REC_MASK);
	else if (r.bands < 1 || r.bands > CDP_RECORD_MAXDIM || r.height < 1 ||
	         r.height > CDP_RECORD_MAXDIM || r.width < 1 || r.width > CDP_RECORD_MAXDIM)
		snprintf(why, cap, "bands %" PRIu32 ", height %" PRIu32 ", width %" PRIu32
		         ": each must be 1..%d", r.bands, r.height, r.width, CDP_RECORD_MAXDIM);
	else if (r.class_id != 0 && k != CDP_LABEL_CLASS)
		snprintf(why, cap, "class id %" PRIu32 " with label kind %s (only class has one)",
		         r.class_id, kind_name(k));
	else if (has_len((int)k) && (r.label_len < 1 || r.label_len > CDP_RECORD_MAXLABEL))
		snprintf(why, cap, "label length %" PRIu32 " with label kind %s: must be 1..%d",
		         r.label_len, kind_name(k), CDP_RECORD_MAXLABEL);
	else if (!has_len((int)k) && r.label_len != 0)
		snprintf(why, cap, "label length %" PRIu32 " with label kind %s (must be 0)",
		         r.label_len, kind_name(k));
	else if ((int)v != version_of((int)k))
		snprintf(why, cap, "version %u, label kind %s has version %d", v, kind_name(k),
		         version_of((int)k));
	else if (!all_zero(b + OFF_RES2, 24))
		snprintf(why, cap, "reserved bytes %d..%d are not zero", OFF_RES2, CDP_RECORD_HDR - 1);
	else if (!(r.flags & CDP_REC_NODATA) && !all_zero(b + OFF_NODATA, 8))
		snprintf(why, cap, "a nodata value without the nodata flag");
	else if (k != CDP_LABEL_U8 && k != CDP_LABEL_U16 && r.label_ignore != 0)
		snprintf(why, cap, "label ignore value %" PRIu32 " with label kind %s (must be 0)",
		         r.label_ignore, kind_name(k));
	else if (cdp_record_sizes(&r, &raw[0], &raw[1], &raw[2]) == CDP_OK) {
		for (int i = 0; i < 3; i++) {
			uint64_t st = get_u64(b + OFF_SIMAGE + 8 * i);
			if (r.compression == CDP_COMP_NONE && st != raw[i]) {
				snprintf(why, cap, "stored %s size %" PRIu64 ", uncompressed it is %zu bytes",
				         part[i], st, raw[i]);
				return why;
			}
			if (r.compression != CDP_COMP_NONE &&
			    ((st == 0) != (raw[i] == 0) || raw[i] / DEFLATE_MAX_RATIO > st)) {
				snprintf(why, cap, "stored %s size %" PRIu64 " cannot inflate to its %zu "
				         "bytes", part[i], st, raw[i]);
				return why;
			}
			if (st > len || cdp_add_size(total, (size_t)st, &total) != CDP_OK)
				return why;
		}
		if (total + 4 < len)
			snprintf(why, cap, "%zu bytes after the payloads and the CRC", len - total - 4);
		else if (k == CDP_LABEL_MULTI)
			snprintf(why, cap, "a multi-hot label byte is neither 0 nor 1");
	}
	return why;
}
