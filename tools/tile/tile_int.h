/* tile_int.h: what tile.c and tile_out.c share inside cdp-tile: the state of
 * one open input, the run's context, and the functions one file calls in the
 * other. Private to tools/tile; the tile library's API is tile.h.
 */
#ifndef CDP_TILE_INT_H
#define CDP_TILE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdp_file.h"
#include "cdp_key.h"
#include "cdp_label.h"
#include "cdp_out.h"
#include "cdp_progress.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "tile.h"

/* One input raster, opened and checked by input_open in tile.c. */
typedef struct input {
	const char *path;          /* the raster, or the first date of a
	                              multi-date input */
	const char *time;          /* the input's dates "A,B,..." or NULL */
	char *first;               /* owned: the first date's path, or NULL */
	int ndates, bpd;           /* dates and selected bands of a date */
	char *lpath;               /* owned; NULL without a label */
	char name[CDP_NAME_MAX + 1];
	cdp_raster *r;
	cdp_label *lab;            /* owned; a label raster, or NULL */
	cdp_label_vector *vlab;    /* owned; a vector label, instead of lab */
	const cdp_raster_info *ri;
	int *bands, nb;            /* owned: the selected 1-based bands */
	int dt, odt;               /* source and output dtype */
	int lkind;                 /* CDP_LABEL_NONE / U8 / U16 / F32 */
	uint32_t llen;             /* F32: target planes T, else 0 */
	uint32_t ignore;
	/* nodata: each selected band's own (--nodata's one value for all);
	 * a pixel is nodata where every band holds its own or, when they
	 * differ or with --standardize, where one band does (nd_any) */
	int has_nd;                /* some selected band has a nodata value */
	int nd_one;                /* every band has the same one, nd */
	double nd;
	int *hasnd;                /* owned [nb]: band b has nodata ndb[b] */
	double *ndb;               /* owned [nb] */
	int nd_any;
	int use_mask;              /* GDAL's mask band carries information */
	uint64_t rows, cols;
	int rdig, cdig;
} input;

/* The state of one cdp_tile_run. */
typedef struct ctx {
	const cdp_tile_opts *o;
	FILE *out;
	cdp_tile_result *res;
	char *err;
	size_t errcap;
	int S, T;                  /* tile size and stride */
	double *mean, *std;        /* [nb] standardization of the current input */
	size_t nstats;             /* lines read from --stats */
	cdp_fileset reads;         /* every file the inputs read: no tile overwrites one */
	/* tile files written under temporary names (cdp_out.h), renamed all
	 * at once when the run succeeds and removed when it fails, so a
	 * failed rerun over earlier tiles leaves them as they were */
	cdp_out *files;
	size_t nfiles, capfiles;
	cdp_progress prog;
	cdp_label_opts lopts;      /* from o: how labels are read */
	void **ltr;                /* [ninputs] a label's thin plate spline, kept
	                              from the check for the cut, or NULL
	                              (cdp_raster_transformer_spline) */
} ctx;

/* Sets the one-line message of a failure, without the program name. */
#define ERR(c, ...) snprintf((c)->err, (c)->errcap, __VA_ARGS__)

/* tile.c */

/* Adds the files GDAL reads for r (opened from path: an input raster or its
 * label) to c->reads, each named as read for path. */
int tile_add_reads(ctx *c, cdp_raster *r, const char *path);

/* Clears m[y * mstride + x] (h, w) where in's pixel is nodata (its
 * nd_any rule, or with `any` where one band holds its nodata). img is
 * (nb, ., rstride) samples with bands bstride samples apart, already
 * offset to the window's first pixel. */
void tile_mark_nodata(const input *in, const void *img, size_t bstride, size_t rstride,
                      int w, int h, int any, uint8_t *m, size_t mstride);

/* --standardize's rule for band b (an index of in->bands) whose valid
 * sample v is not finite, or whose standardized value is not: an error
 * naming the file and band, as infinite, NaN (without a NaN nodata: a
 * NaN nodata makes the pixel invalid) or a finite value too large to
 * standardize. Returns CDP_EFORMAT with c->err set. */
int tile_std_bad(ctx *c, const input *in, int b, double v);

/* tile_out.c; each returns CDP_OK or an error code with c->err set. */

/* Reads --stats FILE into c->mean, c->std [c->nstats]. */
int tile_stats_load(ctx *c, const char *path);

/* Fills c->mean, c->std [in->nb] from a first pass over in's valid pixels;
 * strip holds (nb, S, W) samples, gm and vm S*W bytes each. */
int tile_stats_compute(ctx *c, input *in, void *strip, uint8_t *gm, uint8_t *vm);

/* Writes r as KEY.png / KEY.tif (and KEY_label.*) under c->o->outdir into
 * temporaries recorded in c->files (tile_files_end renames them); scratch
 * holds (S, S, nb) samples. */
int tile_emit_files(ctx *c, input *in, const char *key, const cdp_record *r,
                    void *scratch);

/* Ends the run's tile files: commit renames every temporary onto its tile
 * (the first failure is reported and the rest removed), else all are
 * removed. CDP_OK or the first error, with c->err set. */
int tile_files_end(ctx *c, int commit);

/* Encodes r into enc and writes it as a record frame to c->out. */
int tile_emit_record(ctx *c, const char *key, const cdp_record *r,
                     cdp_buf *enc);

/* The most bytes of a source's label_options, its NUL included. */
#define CDP_TILE_LOPTS_MAX 8192

/* in's label_options into lopts[cap] ("" for none): a vector label's
 * options (cdp_label_vector_describe) and --tps where GCPs placed the
 * label. The check calls it too, so that options too long to record fail
 * before the stream starts. */
int tile_label_options(ctx *c, const input *in, char *lopts, size_t cap);

/* Writes in's source frame (index idx) to c->out, using body as scratch. */
int tile_emit_source(ctx *c, size_t idx, input *in, cdp_buf *body);

#endif
