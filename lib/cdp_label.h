/* cdp_label.h: a label raster read on an image's tile grid, as cdp-tile
 * cuts it (man/cdp-tile.1, LABELS).
 *
 * A label on the image's grid (same size and geotransform, the same CRS or
 * none on either side; or the same GCPs) is read strip by strip and copied
 * as it is, its values untouched. One on another grid (another CRS,
 * resolution, extent or alignment, or placed by other GCPs, on either
 * side: cdp_raster_transformer) is warped onto each tile's window with
 * GDAL's warper
 * (cdp_raster_warp: nearest neighbour or mode, an exact transformer or
 * GDAL's approximate one);
 * pixels it does not cover and its own nodata become the ignore value.
 * A label map (cdp_labelmap.h) renumbers values into class ids before
 * anything else (a warped label is warped renumbered, through
 * cdp_raster_open_lut, so mode counts classes); a value absent from it
 * becomes the ignore value (left out of a mode, as nodata) or is refused
 * where a tile pixel gets it.
 *
 * A value label (o->kind CDP_LKIND_VALUE, or CDP_LKIND_AUTO on a float
 * raster, with target bands or with bilinear, cubic or average) is a continuous target instead: T = o->nbands bands of the raster
 * (band 1 by default) of any data type, cut as f32 planes (T, S, S) of a
 * record of label kind CDP_LABEL_F32 (cdp-record(5)); each band's nodata,
 * NaN and values not finite as float32, the pixels it does not cover, padding and invalid image pixels
 * become NaN ("no target"). On another grid it is warped by
 * cdp_raster_warp_f32 (near, bilinear, cubic or average); a label map,
 * mode and the ignore value do not apply to it.
 *
 * Like cdp_raster.h this header has no GDAL in it; it is built into
 * libcdpraster.a. Functions return CDP_OK or an error code with a one-line
 * reason in err[errcap] that names the label file (not the image: the
 * caller prefixes it).
 */
#ifndef CDP_LABEL_H
#define CDP_LABEL_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_labelmap.h"
#include "cdp_raster.h"

/* What a label raster holds (cdp_label_opts.kind). */
enum { CDP_LKIND_AUTO = 0, CDP_LKIND_CLASS = 1, CDP_LKIND_VALUE = 2 };

typedef struct cdp_label_opts {
	int kind;                    /* CDP_LKIND_*: AUTO is value for a float raster */
	const int *bands;            /* [nbands] 1-based target bands (values), */
	int nbands;                  /*   or NULL, 0: band 1 */
	int resample;                /* CDP_RESAMPLE_*, for a warp: classes near
	                                or mode, values near, bilinear, cubic or
	                                average */
	double max_error;            /* gdalwarp's -et in pixels, 0 exact */
	int tps;                     /* GCPs place by a thin plate spline
	                                (gdalwarp -tps), not a polynomial */
	const cdp_labelmap *map;     /* or NULL: values are class ids already */
	int map_other_ignore;        /* a value absent from map: 1 ignore, 0 refuse */
	int has_ignore;              /* ignore overrides 255 / 65535 */
	uint32_t ignore;
	void *tr;                    /* or NULL: the transformer an earlier open of
	                                this label onto this image fitted
	                                (cdp_label_take_transformer), used instead
	                                of fitting it again; cdp_label_open owns
	                                it from then on, whatever it returns */
} cdp_label_opts;

typedef struct cdp_label cdp_label;

/* Opens the label raster at path for the grid of img (an image's info).
 * CDP_EMISMATCH when it is not u8 or u16, when it cannot be placed on the
 * image's grid (a size that differs where either has neither a
 * geotransform nor GCPs),
 * when a label on another grid does not overlap the image at all, or
 * when the ignore value does not fit the label or is an id of the map;
 * CDP_EGDAL when it cannot be opened. */
int  cdp_label_open(const char *path, const cdp_raster_info *img,
                    const cdp_label_opts *o, cdp_label **out, char *err, size_t errcap);
/* CDP_LABEL_U8 or CDP_LABEL_U16: the label's type, or with a map u8 when
 * every id and the ignore value fit, else u16; CDP_LABEL_F32 for values. */
int  cdp_label_kind(const cdp_label *l);
/* The target planes T of a value label, else 0. */
uint32_t cdp_label_len(const cdp_label *l);
uint32_t cdp_label_ignore(const cdp_label *l);
/* 1 when the label is warped, 0 when it is on the image's grid. */
int  cdp_label_warped(const cdp_label *l);
/* The transformer from the image's pixels to a warped label's, taken from
 * l (NULL when it has none): the caller frees it
 * (cdp_raster_transformer_free) or hands it to the next cdp_label_open of
 * the same label onto the same image (cdp_label_opts.tr). A thin plate
 * spline through thousands of GCPs costs about what a gdalwarp of the
 * scene costs to fit: cdp-tile opens each label twice (checking every
 * input before it writes, then cutting) and fits it once. */
void *cdp_label_take_transformer(cdp_label *l);
/* The label raster itself (to list the files it reads). */
cdp_raster *cdp_label_raster(cdp_label *l);
/* Starts the strip of image rows [y0, y0 + sh): on the image's grid reads
 * the label's rows, full width. */
int  cdp_label_strip(cdp_label *l, uint64_t y0, int sh, char *err, size_t errcap);
/* The (S, S) label of the tile at column x0 of the strip, tw columns of it
 * inside the image: into lt (S*S samples of cdp_label_kind; values
 * (T, S, S) f32) the label where m[y * S + x] (the tile's mask) is non-zero
 * inside the sh x tw window, the ignore value (values: NaN) elsewhere. CDP_ERANGE when a value is absent from the map
 * and refused: err names it and its image pixel. */
int  cdp_label_cut(cdp_label *l, uint64_t x0, int tw, int S, const uint8_t *m, void *lt,
                   char *err, size_t errcap);
void cdp_label_close(cdp_label *l);
/* The (S, S) label lt of the tile at column x0 of a label strip on the
 * image's grid, strip (sh, W) samples of lsz bytes (1: u8, 2: u16), tw
 * columns inside the image: the strip's value where m[y * S + x] is
 * non-zero inside the sh x tw window, ignore elsewhere. cdp_label_cut's
 * copy of a label raster on the image's grid, and cdp-tile's of a vector
 * label's rasterized strip: one loop for both. */
void cdp_label_copy(const void *strip, uint64_t W, int sh, int lsz, uint64_t x0, int tw,
                    int S, const uint8_t *m, uint32_t ignore, void *lt);

#endif
