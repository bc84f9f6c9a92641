/* tile.h: cdp-tile's work as a library function, so tests and other tools can
 * run it in-process; tools/tile/main.c only parses options into
 * cdp_tile_opts and prints the outcome. See man/cdp-tile.1.
 */
#ifndef CDP_TILE_H
#define CDP_TILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdp_label_vector.h"
#include "cdp_labelmap.h"

enum { CDP_EDGE_SHIFT = 0, CDP_EDGE_PAD = 1, CDP_EDGE_DROP = 2 };
enum { CDP_TILE_STREAM = 0, CDP_TILE_PNG = 1, CDP_TILE_TIF = 2 };

typedef struct cdp_tile_opts {
	const char *const *inputs;   /* [ninputs] raster paths, or with time
	                                date lists "A.tif,B.tif[,...]" */
	size_t ninputs;
	int time;                    /* inputs are multi-date (--time): each
	                                tile stacks its dates as bands */
	const char *const *names;    /* [ninputs] or NULL: NAME of each input */
	const char *const *labels;   /* [ninputs] or NULL: label paths (rasters
	                                or vector datasets) */
	const char *label_suffix;    /* or NULL: X.tif pairs with X<suffix>.tif,
	                                .gpkg, .shp, .geojson or .fgb */
	const char *label_all;       /* or NULL: one label for every input */
	cdp_label_vector_opts vec;   /* how vector labels are rasterized; with
	                                vec.given the labels must be vectors */
	int size;                    /* tile edge in pixels, 1..CDP_RECORD_MAXDIM */
	int overlap;                 /* 0..size-1; stride is size - overlap */
	int edge;                    /* CDP_EDGE_* */
	const int *bands;            /* [nbands] 1-based, or NULL for all bands */
	size_t nbands;
	int has_nodata;              /* nodata overrides the source's */
	double nodata;
	int label_kind;              /* CDP_LKIND_* (cdp_label.h): class, value,
	                                or AUTO (value for a float raster) */
	const int *label_bands;      /* [nlabel_bands] 1-based target bands of a
	                                value label, or NULL: band 1 */
	size_t nlabel_bands;
	int label_resample;          /* CDP_RESAMPLE_* (cdp_raster.h): near or mode
	                                for classes, near, bilinear, cubic or
	                                average for values */
	double label_max_error;      /* gdalwarp's -et for warped labels, pixels */
	int tps;                     /* GCPs place labels and dates by a thin
	                                plate spline (gdalwarp -tps) */
	const cdp_labelmap *label_map; /* or NULL: --label-map */
	const char *label_map_path;  /* or NULL: the --label-map file (not an
	                                inline map), which no output may be */
	int label_map_ignore;        /* values absent from label_map: ignored, not refused */
	int has_ignore;              /* ignore overrides 255 / 65535 */
	uint32_t ignore;
	double max_nodata;           /* < 0: drop only all-invalid tiles */
	int standardize;             /* float32 (x - mean) / std tiles */
	const char *stats_path;      /* or NULL: MEAN STD per band from a file */
	int zlevel;                  /* 0: uncompressed records, else 1..9 */
	const char *outdir;          /* or NULL: a record stream on out */
	int format;                  /* CDP_TILE_PNG or CDP_TILE_TIF with outdir */
	int progress;                /* CDP_PROGRESS_* */
	FILE *warn;                  /* or NULL: warnings about one input, a
	                                line each as the check meets them */
} cdp_tile_opts;

typedef struct cdp_tile_result {
	uint64_t written;            /* tiles written */
	uint64_t dropped;            /* tiles dropped for nodata */
	uint64_t bytes;              /* bytes of stream or tile files written */
	char note[1024];             /* the first warning of a label, for main to print
	                                (a --label-crs a layer's own CRS overrode), or "" */
} cdp_tile_result;

/* Defaults: size 256, no overlap, shift, all bands, stream output. */
void cdp_tile_opts_init(cdp_tile_opts *o);

/* Tiles every input. Without o->outdir, writes a record stream (cdp_stream.h)
 * to out, refusing a terminal (CDP_ETTY). With o->outdir, writes tile files
 * there (creating the directory if it is missing) and removes the files it
 * wrote if it fails. Returns CDP_OK, or an error code with a one-line message
 * naming the file in err (without the program name). res is filled either
 * way. */
int cdp_tile_run(const cdp_tile_opts *o, FILE *out, cdp_tile_result *res,
                 char *err, size_t errcap);

#endif
