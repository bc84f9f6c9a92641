/* cdp_record.h: the tile record, cdpool's one on-disk unit of data.
 *
 * Defined here and in man/cdp-record.5; nothing else defines it. A record is
 * the value stored under a key in the pool's `tiles` database and the body of
 * an 'R' frame in a record stream (cdp_stream.h). All integers little-endian.
 *
 *   offset size  field
 *   0      4     magic "CDPR" (bytes 43 44 50 52)
 *   4      2     version: 1, or 2 for label kinds 4 and 5 (readers take both)
 *   6      2     header size in bytes (CDP_RECORD_HDR = 160)
 *   8      1     dtype (cdp_dtype.h)
 *   9      1     label kind: 0 none, 1 per-pixel u8, 2 per-pixel u16, 3 scalar class,
 *                 4 per-pixel f32 values (version 2), 5 multi-hot classes (version 2)
 *   10     1     compression: 0 none, 1 zlib (each payload deflated separately)
 *   11     1     flags: bit0 nodata value present, bit1 mask present
 *   12     4     bands C
 *   16     4     height H
 *   20     4     width W
 *   24     8     x offset (int64): column of the tile's top-left pixel in its source
 *   32     8     y offset (int64): row of the same
 *   40     48    geotransform of the tile (6 doubles, GDAL order)
 *   88     4     source index (into the pool's list of source rasters)
 *   92     4     label ignore value (per-pixel labels; pixels to ignore in the
 *                 loss), else 0
 *   96     4     class id (scalar label), else 0
 *   100    4     label length L: label kind 4 the number of target planes T,
 *                 kind 5 the number of classes K, else 0 (version 1: reserved, 0)
 *   104    8     nodata value (double), valid when flags bit0, else 0
 *   112    8     image payload stored size (bytes)
 *   120    8     label payload stored size (0 for label kinds 0 and 3)
 *   128    8     mask payload stored size (0 unless flags bit1)
 *   136    24    reserved, 0
 *   160    ...   image payload: C*H*W samples of dtype, band-sequential (C,H,W)
 *   ...          label payload: kinds 1, 2: H*W u8 or u16 class ids (H,W);
 *                 kind 4: T*H*W f32 targets (T,H,W), NaN where there is no target;
 *                 kind 5: K u8, 1 where the tile holds class k, else 0
 *   ...          mask payload: H*W u8, 0 = nodata or padding, 255 = valid (H,W)
 *   end-4  4     CRC-32 (zlib's crc32) of every preceding byte of the record
 *
 * Uncompressed, the image payload starts at byte 160 of the value, so a
 * reader can use it in place (zero-copy) from a memory-mapped LMDB.
 */
#ifndef CDP_RECORD_H
#define CDP_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define CDP_RECORD_MAGIC   "CDPR"
#define CDP_RECORD_VERSION 2   /* written for label kinds 4, 5; else 1 */
#define CDP_RECORD_VERSION1 1
#define CDP_RECORD_MAXLABEL 65536u /* label length L (planes, classes) at most */
#define CDP_RECORD_HDR     160
#define CDP_RECORD_MAXDIM  65536u   /* bands, height and width are at most this */

enum { CDP_LABEL_NONE = 0, CDP_LABEL_U8 = 1, CDP_LABEL_U16 = 2,
       CDP_LABEL_CLASS = 3, CDP_LABEL_F32 = 4, CDP_LABEL_MULTI = 5 };
enum { CDP_COMP_NONE = 0, CDP_COMP_ZLIB = 1 };
enum { CDP_REC_NODATA = 1, CDP_REC_MASK = 2 };

/* A decoded (or to-be-encoded) record. The payload pointers either point into
 * the encoded buffer (uncompressed records, zero-copy) or into the scratch
 * buffer given to cdp_record_decode(). Sizes are raw (decompressed) bytes. */
typedef struct cdp_record {
	int dtype;            /* cdp_dtype */
	int label_kind;       /* CDP_LABEL_* */
	int compression;      /* CDP_COMP_*; on encode: how to store */
	int flags;            /* CDP_REC_* */
	uint32_t bands, height, width;
	int64_t x_off, y_off;
	double gt[6];
	uint32_t source;
	uint32_t label_ignore;
	uint32_t class_id;
	uint32_t label_len;   /* kind 4: planes T; kind 5: classes K; else 0 */
	double nodata;
	const void *image;    /* bands*height*width*dtype_size bytes */
	const void *label;    /* kinds 1, 2: (H,W) u8/u16; kind 4: (T,H,W) f32;
	                       * kind 5: (K) u8 0/1; else NULL */
	const uint8_t *mask;  /* height*width bytes, or NULL */
} cdp_record;

/* A growable byte buffer reused across calls to avoid allocations. */
typedef struct cdp_buf { uint8_t *p; size_t len, cap; } cdp_buf;
int  cdp_buf_reserve(cdp_buf *b, size_t cap);
void cdp_buf_free(cdp_buf *b);

/* Raw payload sizes implied by the header fields, overflow-checked. */
int cdp_record_sizes(const cdp_record *r, size_t *image, size_t *label,
                     size_t *mask);

/* Encodes r into out (replacing its contents; out->len = encoded size).
 * zlevel 1..9 is used when r->compression is CDP_COMP_ZLIB (else CDP_EINVAL).
 * Validates the fields first (CDP_EFORMAT, CDP_EOVERFLOW): known dtype, label
 * kind, compression and flags, dims 1..CDP_RECORD_MAXDIM, label given iff
 * kind 1/2/4/5, class_id 0 unless kind 3, label_len 1..CDP_RECORD_MAXLABEL
 * iff kind 4/5 (else 0), a kind-5 payload of 0s and 1s, mask given iff
 * CDP_REC_MASK. Records of kinds 0..3 are written as version 1, byte for
 * byte as before version 2 existed; kinds 4 and 5 as version 2. Fields not
 * in use (label_ignore without per-pixel labels, nodata without its flag) are
 * stored as 0. Payloads must not point into out (CDP_EINVAL). */
int cdp_record_encode(const cdp_record *r, int zlevel, cdp_buf *out);

/* Decodes and validates a record of len bytes. Every size is checked against
 * len before any payload is touched; the CRC is verified. Compressed payloads
 * are inflated into scratch (may be NULL for uncompressed records; then a
 * compressed record gives CDP_EINVAL), each 8-byte aligned there; a stored
 * size of n claims at most 1032*(n+1) raw bytes (deflate's limit), so the
 * allocation is bounded by len. Uncompressed label and mask pointers may be
 * unaligned. Errors: CDP_ETRUNC (shorter than its sizes), CDP_EMAGIC,
 * CDP_EVERSION, CDP_EFORMAT (bad field, nonzero reserved or unused field,
 * a version that does not match the label kind, a multi-hot byte other than
 * 0 or 1, trailing bytes), CDP_EOVERFLOW, CDP_ECRC, CDP_EZLIB (a payload does not
 * inflate from exactly its stored bytes to exactly its raw size), CDP_ENOMEM. */
int cdp_record_decode(const void *buf, size_t len, cdp_record *r,
                      cdp_buf *scratch);

/* Header-only validation (no CRC, no inflation): fills the scalar fields of r
 * and leaves the payload pointers NULL. For shape checks and listings. It
 * makes every check of decode except the CRC and inflation, so buf must hold
 * the whole record (len its exact length). */
int cdp_record_peek(const void *buf, size_t len, cdp_record *r);
/* What is wrong with buf[len], which cdp_record_decode refused with rc,
 * into why[cap]: for CDP_EFORMAT and CDP_EVERSION the field and its value
 * ("version 2, label kind u8 has version 1", "header size 200, not 160"),
 * otherwise cdp_strerror(rc). Returns why. */
const char *cdp_record_why(const void *buf, size_t len, int rc, char *why, size_t cap);

#endif
