/* cdp_stream.h: the record stream between cdp-tile and cdp-lmdbpack.
 *
 * Defined here and in man/cdp-record.5 (section RECORD STREAM). A stream is a
 * file header, then frames, then an end frame, so a truncated stream (a killed
 * producer) is detected and not mistaken for a short dataset, and a producer
 * that fails (a source that cannot be read) says so with an 'F' frame. The
 * 'F' frame needs no new version: a version 1 reader that predates it refuses
 * the unknown type as an invalid frame, an error too.
 *
 *   stream header: "CDPS" (4 bytes), version u16 (2; readers take 1 too),
 *                  reserved u16 (0)
 *   frame:         type u8, reserved u8 (0), key/name length u16,
 *                  body length u32, name bytes, body bytes,
 *                  CRC-32 u32 of all preceding bytes of the frame
 *   type 'S' source:  name = source NAME; body = text lines
 *                     "index=N\nname=NAME\npath=P\nwidth=W\nheight=H\n"
 *                     "bands=C\ndtype=D\ngeotransform=g0,g1,g2,g3,g4,g5\n"
 *                     "crs=WKT\n" (D a cdp_dtype_name(); crs is the last
 *                     line; values have no newlines), optionally preceded
 *                     by "band_list=b1,b2,...\n": the 1-based source bands
 *                     the records hold, in order (absent when unknown),
 *                     by "class.K=NAME\n" for K = 0..n-1: the names of
 *                     the label's class ids (cdp-tile --classes or
 *                     --label-map's names; version 2, so that a version 1
 *                     reader, which would skip them as unknown keys,
 *                     refuses the stream instead; absent when unknown),
 *                     and by "label=PATH\n" and "label_options=OPTS\n":
 *                     the label's file and how it was rasterized (absent
 *                     without a label, or without options)
 *   type 'R' record:  name = tile key; body = one tile record (cdp_record.h)
 *   type 'E' end:     name empty; body = "count=N\n" (number of 'R' frames)
 *   type 'F' failed:  name empty; body = "error=MESSAGE\n", MESSAGE one line
 *                     (may be empty): the producer failed and ends the stream
 *                     here; the stream is not complete, whatever came before
 * Bodies are at most CDP_STREAM_MAXBODY bytes, names at most 511 bytes (no
 * NUL); 'S' and 'R' names are not empty.
 */
#ifndef CDP_STREAM_H
#define CDP_STREAM_H

#include <stdint.h>
#include <stdio.h>
#include "cdp_record.h"

#define CDP_STREAM_MAGIC   "CDPS"
#define CDP_STREAM_VERSION 2   /* 2: sources may carry class names */
#define CDP_STREAM_VERSION_MIN 1
#define CDP_STREAM_MAXBODY (1u << 31)

enum { CDP_FRAME_SOURCE = 'S', CDP_FRAME_RECORD = 'R', CDP_FRAME_END = 'E',
       CDP_FRAME_FAIL = 'F' };

typedef struct cdp_frame {
	int type;
	char name[512];       /* NUL-terminated key or source name */
	size_t name_len;
	cdp_buf body;         /* owned; reused across reads; after a successful
	                         read, body.p[body.len] is a NUL (not counted) */
} cdp_frame;

/* Writing. Each returns CDP_OK, CDP_EINVAL for an invalid type, name or
 * length, or the errno of a failed fwrite (EPIPE, ENOSPC, ...). stdio may
 * only report a write error at fflush/fclose: the caller checks those. */
int cdp_stream_write_header(FILE *f);
int cdp_stream_write_frame(FILE *f, int type, const char *name, size_t name_len,
                           const void *body, size_t body_len);
/* Ends a stream whose producer failed with an 'F' frame carrying msg (at
 * most 4000 bytes of it; control bytes, newlines included, become spaces so
 * that it stays one line) and flushes f. */
int cdp_stream_write_fail(FILE *f, const char *msg);

/* Reading. read_header: CDP_EMAGIC/CDP_EVERSION/CDP_ETRUNC (CDP_EFORMAT for
 * a nonzero reserved field). read_frame fills fr (fr zero-initialised before
 * the first call); returns CDP_ETRUNC on a stream that ends inside a frame or
 * without an 'E' frame, CDP_ECRC on a corrupted frame, CDP_EFORMAT on a bad
 * type or size (checked before allocating), an empty 'S'/'R' name, or an 'E'
 * frame with a name or a body other than "count=N\n". The 'E' frame itself is
 * CDP_OK with fr->type == CDP_FRAME_END: the caller stops reading there and
 * compares N with the 'R' frames it read. An 'F' frame is CDP_ECANCEL with
 * fr->type == CDP_FRAME_FAIL and the body "error=MESSAGE\n" in fr->body (an
 * 'F' frame with a name or another body is CDP_EFORMAT): the producer failed,
 * so the stream ends there incomplete. Read errors return the errno. */
int cdp_stream_read_header(FILE *f);
int cdp_stream_read_frame(FILE *f, cdp_frame *fr);
void cdp_frame_free(cdp_frame *fr);

/* When fd is a pipe, grows its buffer to 1 MiB (or the system's
 * /proc/sys/fs/pipe-max-size if smaller). A 64 KiB pipe makes producer and
 * consumer switch every quarter tile; the larger one lets both run. Does
 * nothing for other files; failures are harmless and ignored. */
void cdp_stream_pipe_grow(int fd);

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
	int *band_list;       /* owned [nband_list] 1-based bands of the source
	                         raster that the records hold, in order; NULL
	                         (nband_list 0) when unknown */
	uint32_t nband_list;
	char **class_names;   /* owned when parsed [nclass_names]: the names of
	                         label ids 0..n-1 (cdp-tile --classes or
	                         --label-map); NULL (0) when unknown */
	uint32_t nclass_names;
	char *label;          /* owned when parsed: the label file the records'
	                         labels came from, or NULL */
	char *label_options;  /* owned when parsed: how (cdp-tile's options of
	                         a vector label, one line), or NULL */
	char *time;           /* owned when parsed: a multi-date input's dates,
	                         comma-separated in time order (path is the
	                         first), or NULL */
	char *band_names;     /* owned when parsed: the records' bands named
	                         "tD:bB" (date D from 0, the date's band B),
	                         comma-separated, or NULL */
} cdp_source;
#define CDP_SOURCE_MAXCLASSES 65535
/* format: the body text into out (out->len bytes, NUL-terminated beyond);
 * CDP_EINVAL for a value that has a newline, an unknown dtype, a zero size
 * or a non-finite geotransform, or a band_list whose length is not bands or
 * with an entry < 1, a class name that cdp_class_name_ok refuses, or more
 * than CDP_SOURCE_MAXCLASSES names. A NULL crs is written as ""; no
 * band_list line is written when nband_list is 0, no class lines when
 * nclass_names is 0, no label, label_options, time or band_names line
 * when that string is NULL.
 * parse: overwrites *s. Lines are "key=value" (the value is everything after
 * the first '=', so WKT and paths may hold '=' and ','); empty lines and
 * unknown keys are skipped, the final newline is optional. Requires index,
 * path, width, height, bands, dtype, geotransform (name, crs default to "";
 * band_list to NULL, and when present it must be bands comma-separated
 * integers >= 1: CDP_ESYNTAX for an empty item, CDP_EFORMAT for another
 * count); class.K lines must name K = 0..n-1 once each (CDP_EFORMAT) with
 * names cdp_class_name_ok takes (CDP_ESYNTAX), K below
 * CDP_SOURCE_MAXCLASSES (CDP_ERANGE).
 * CDP_ESYNTAX for a line without '=' or a malformed number, CDP_ERANGE for
 * one out of range, CDP_EFORMAT for a missing or repeated key or an unknown
 * dtype. On failure nothing is left allocated. */
int  cdp_source_format(const cdp_source *s, cdp_buf *out);
int  cdp_source_parse(const void *body, size_t len, cdp_source *s);
/* cdp_source_parse that also says what is wrong in why[cap] (may be NULL):
 * "repeated key 'width'", "name is 2000002 bytes, longer than the 255 a
 * name may have", "width=0: number out of range", "no path line". */
int  cdp_source_parse_why(const void *body, size_t len, cdp_source *s, char *why, size_t cap);
void cdp_source_free(cdp_source *s);

#endif
