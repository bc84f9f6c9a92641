/* cdp_stream.h: the record stream between cdp-tile and cdp-lmdbpack.
 *
 * Defined here and in man/cdp-record.5 (section RECORD STREAM). A stream is a
 * file header, then frames, then an end frame, so a truncated stream (a killed
 * producer) is detected and not mistaken for a short dataset.
 *
 *   stream header: "CDPS" (4 bytes), version u16 (1), reserved u16 (0)
 *   frame:         type u8, reserved u8 (0), key/name length u16,
 *                  body length u32, name bytes, body bytes,
 *                  CRC-32 u32 of all preceding bytes of the frame
 *   type 'S' source:  name = source NAME; body = text lines
 *                     "index=N\npath=P\nwidth=W\nheight=H\nbands=C\n"
 *                     "dtype=D\ngeotransform=g0,g1,g2,g3,g4,g5\ncrs=WKT\n"
 *                     (crs is the last line; WKT has no newlines)
 *   type 'R' record:  name = tile key; body = one tile record (cdp_record.h)
 *   type 'E' end:     name empty; body = "count=N\n" (number of 'R' frames)
 * Bodies are at most CDP_STREAM_MAXBODY bytes.
 */
#ifndef CDP_STREAM_H
#define CDP_STREAM_H

#include <stdint.h>
#include <stdio.h>
#include "cdp_record.h"

#define CDP_STREAM_MAGIC   "CDPS"
#define CDP_STREAM_VERSION 1
#define CDP_STREAM_MAXBODY (1u << 31)

enum { CDP_FRAME_SOURCE = 'S', CDP_FRAME_RECORD = 'R', CDP_FRAME_END = 'E' };

typedef struct cdp_frame {
	int type;
	char name[512];       /* NUL-terminated key or source name */
	size_t name_len;
	cdp_buf body;         /* owned; reused across reads */
} cdp_frame;

/* Writing. Each returns CDP_OK or an errno (EPIPE, ENOSPC, ...). */
int cdp_stream_write_header(FILE *f);
int cdp_stream_write_frame(FILE *f, int type, const char *name, size_t name_len,
                           const void *body, size_t body_len);

/* Reading. read_header: CDP_EMAGIC/CDP_EVERSION/CDP_ETRUNC. read_frame fills
 * fr; returns CDP_ETRUNC on a stream that ends inside a frame or without an
 * 'E' frame, CDP_ECRC on a corrupted frame, CDP_EFORMAT on a bad type or size. */
int cdp_stream_read_header(FILE *f);
int cdp_stream_read_frame(FILE *f, cdp_frame *fr);
void cdp_frame_free(cdp_frame *fr);

/* Source info carried by 'S' frames (and stored in the pool's meta). */
typedef struct cdp_source {
	uint32_t index;
	char name[256];
	char *path;           /* owned */
	uint64_t width, height;
	uint32_t bands;
	int dtype;
	double gt[6];
	char *crs;            /* owned WKT, may be "" */
} cdp_source;
int  cdp_source_format(const cdp_source *s, cdp_buf *out);  /* body text */
int  cdp_source_parse(const void *body, size_t len, cdp_source *s);
void cdp_source_free(cdp_source *s);

#endif
