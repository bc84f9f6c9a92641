/* cdp_raster.h: the little of GDAL that cdpool's dataset tools need.
 *
 * The implementation (cdp_raster.c) uses GDAL; this header does not, so code
 * that includes it stays buildable and testable without GDAL headers. It is
 * built into libcdpraster.a, separate from libcdp.a, so programs that need
 * only CUDA never link GDAL.
 *
 * Errors: functions return CDP_OK, CDP_EGDAL, CDP_EUNSUP or CDP_ENOMEM and,
 * on failure, copy a one-line reason (GDAL's own message where there is one)
 * into err[errcap].
 */
#ifndef CDP_RASTER_H
#define CDP_RASTER_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_out.h"

typedef struct cdp_raster cdp_raster;

typedef struct cdp_raster_info {
	uint64_t width, height;
	uint32_t bands;          /* band count of the dataset */
	int dtype;               /* cdp_dtype of band 1; all bands must agree */
	int has_nodata;          /* band 1 declares a nodata value */
	double nodata;
	int has_gt;              /* the dataset has a geotransform */
	double gt[6];            /* identity (0,1,0,0,0,1) when it has none */
	const char *crs;         /* WKT, "" when none; owned by the raster */
	int block_w, block_h;    /* natural block size of band 1 */
	int ngcps;               /* ground control points, */
	const struct cdp_raster_gcp *gcps; /* [ngcps] (NULL when none), owned */
	const char *gcp_crs;     /* their CRS as WKT, "" when none; owned */
} cdp_raster_info;

/* A ground control point: pixel and line of the raster at x, y (and z) of
 * the GCPs' CRS. */
typedef struct cdp_raster_gcp {
	double pixel, line, x, y, z;
} cdp_raster_gcp;

/* Calls GDALAllRegister once and quiets GDAL's own stderr handler; errors are
 * returned through err instead. */
void cdp_raster_init(void);
/* Sets GDAL's block cache to bytes (at least 16 MiB), unless the user set
 * GDAL_CACHEMAX, which always wins. cdp_raster_init's default is 256 MiB; a
 * program that reads in strips sizes it to what its strips reuse
 * (cdp_raster_strip_bytes), since the cache fills to its limit with blocks
 * read once and what it grows to stays resident. */
void cdp_raster_cache_fit(uint64_t bytes);
/* Bytes of r's blocks that a strip of `rows` full-width rows spans at any
 * row offset: every band of the dataset (GDAL caches them together), and
 * GDAL's mask where it is a band of its own; a multi-date raster's dates
 * summed. What consecutive strips read twice (a block taller than the step,
 * a block a strip boundary cuts, the rows --overlap shares) lies in it. */
uint64_t cdp_raster_strip_bytes(const cdp_raster *r, int rows);
/* Opens path read-only and describes it (cdp_raster_get_info). Refuses,
 * with CDP_EFORMAT, a geotransform that is not finite (a NaN or infinite
 * term, or corners of the raster's extent that overflow) and a GCP that is
 * not a number where there is no geotransform. */
int  cdp_raster_open(const char *path, cdp_raster **out, char *err, size_t errcap);
const cdp_raster_info *cdp_raster_get_info(const cdp_raster *r);
/* Reads the window (x, y, w, h) of the listed 1-based bands into buf as
 * (nbands, h, w) samples of the raster's dtype. The window must lie inside the
 * raster. */
int  cdp_raster_read(cdp_raster *r, const int *bands, int nbands, int64_t x,
                     int64_t y, int w, int h, void *buf, char *err, size_t errcap);
/* Per-pixel validity of the window from GDAL's mask band of the first listed
 * band: out[h*w], 0 = nodata, 255 = valid. */
int  cdp_raster_read_mask(cdp_raster *r, int band, int64_t x, int64_t y, int w,
                          int h, uint8_t *out, char *err, size_t errcap);
/* 1 when GDAL's mask band of `band` carries information of its own: a
 * per-dataset or per-band mask, or an alpha band. 0 when it is all-valid or
 * only derived from the nodata value (callers compare against the nodata
 * value themselves, which is cheaper and handles NaN). */
int  cdp_raster_has_mask(const cdp_raster *r, int band);
/* Band `band`'s own nodata value (bands may differ; cdp_raster_info has
 * band 1's; a multi-date raster's band is its date's): 1 with *nd set, 0
 * when it has none or no such band. */
int  cdp_raster_band_nodata(const cdp_raster *r, int band, double *nd);
/* Clears m[y * mstride + x] (h, w) where the pixel is nodata: with `any`,
 * where one band equals its own nodata value nd[b] (has[b] set), else
 * where every band does (a band without one never does). img is (nb, .,
 * rstride) samples of dtype dt with bands bstride samples apart, already
 * offset to the window's first pixel. A value compares as GDAL's nodata
 * mask compares it: cast to dt (3.5 is 3 for u8), matching nothing when
 * dt cannot reach it (300 for u8, NaN for an integer type); float32 in
 * float, NaN matching NaN. Sizes and offsets are size_t, so any window the
 * buffers hold is marked whole; pass a strip as h rows of w with its
 * strides, not as one row of w * h (an int width wraps past 2^31). */
void cdp_raster_mark_nodata(const void *img, int dt, int nb, size_t bstride, size_t rstride,
                            size_t w, size_t h, const double *nd, const int *has, int any,
                            uint8_t *m, size_t mstride);
/* 1 when a sample of dtype dt holds v exactly (an integer in range for the
 * integer types, NaN and infinities for the float ones, a finite float32
 * value in its range), else 0. */
int  cdp_raster_dtype_holds(int dt, double v);
/* Whether band 1 of r is paletted (GDAL's colour interpretation Palette):
 * its values index a colour table rather than measure anything. */
int  cdp_raster_paletted(const cdp_raster *r);
/* Whether band (1-based, of every date with --time's stack) of r is an
 * alpha band (GDAL's colour interpretation Alpha): 1 or 0. */
int  cdp_raster_band_alpha(const cdp_raster *r, int band);
/* Whether rasters a and b (their infos) carry the same GCPs: as many,
 * each's pixel and line within a thousandth of a pixel and x, y within a
 * millionth of the spread of the GCPs' coordinates, and the same CRS
 * (OSRIsSame; none on both is the same): 1 the same, 0 not (why says how:
 * "GCP 1 is pixel 0 line 0 at (500000, 5800000) against ..."), -1 when a
 * CRS does not parse (why says so). cdp-evaluate holds a map and its
 * reference to it, cdp-tile a label or a later date and its image. */
int  cdp_raster_same_gcps(const cdp_raster_info *a, const cdp_raster_info *b, char *why,
                          size_t cap);
/* Whether r, of g's size and like g without a geotransform, lies on g's
 * pixels as far as GCPs tell: 1 when both carry the same GCPs
 * (cdp_raster_same_gcps) or either carries no georeference at all
 * (nothing to contradict the other's), 0 when their GCPs differ or only
 * one has a CRS for them (why says how), -1 when a CRS does not parse.
 * A label or a date placed elsewhere by its GCPs is warped
 * (cdp_raster_transformer), never cut pixel for pixel. */
int  cdp_raster_gcps_agree(const cdp_raster_info *g, const cdp_raster_info *r, char *why,
                           size_t cap);
/* Whether r lies on g's grid, pixel for pixel: 1 it does, 0 it must be
 * warped onto it (cdp_raster_transformer), CDP_EMISMATCH when it can be
 * neither (why says which: "one of them has neither a geotransform nor
 * GCPs", "another size, and no georeference on either"), CDP_EFORMAT when a
 * CRS does not parse or GCPs cannot be compared (why says so). Equal
 * geotransforms (cdp_raster_same_gt) are the same grid only in the same
 * CRS (cdp_raster_crs_same); a side without a CRS is taken to be in the
 * other's. Without a geotransform on either side the GCPs decide
 * (cdp_raster_gcps_agree): the same ones, or none on a side without any
 * georeference, put r of g's size on g's grid; other ones, or GCPs on one
 * side and a geotransform on the other, are warped through. A label on
 * its image (cdp_label_open) and a later date on the first
 * (cdp_raster_open_time) are decided here; each caller words its own
 * message. */
int  cdp_raster_same_grid(const cdp_raster_info *g, const cdp_raster_info *r, char *why,
                          size_t cap);
/* The name GDAL gives value k of `band` (its category names, which
 * cdp-predict writes), or NULL when it has none; owned by the raster. */
const char *cdp_raster_category_name(const cdp_raster *r, int band, int k);
/* The dataset's metadata item key (GDAL's default domain), or NULL when it
 * has none; owned by the raster. */
const char *cdp_raster_metadata(const cdp_raster *r, const char *key);
/* The tag that says what a map holds: a pixel-regression map (float32
 * values, cdp-predict(1)) carries the item CDP_TASK=regression; a map
 * without it is a class map. cdp-evaluate scores each kind its own way. */
#define CDP_RASTER_TASK_KEY "CDP_TASK"
#define CDP_RASTER_TASK_REGRESSION "regression"
/* Calls fn(path, arg) for each file GDAL reads for r (GDALGetFileList):
 * the dataset's own file, its side-cars (.aux.xml, .ovr, .msk) and, for a
 * VRT, its source files. Stops at and returns the first non-zero value of
 * fn; CDP_OK otherwise. */
int  cdp_raster_files(const cdp_raster *r, int (*fn)(const char *path, void *arg), void *arg);
void cdp_raster_close(cdp_raster *r);

/* Writes a (nbands, h, w) buffer of dtype as a GeoTIFF with geotransform gt
 * and CRS wkt (may be ""), its bands grey (PHOTOMETRIC=MINISBLACK, none
 * alpha), through the output policy (cdp_out.h, a seekable
 * output: a temporary renamed on success; a FIFO, device or directory at
 * path is refused with CDP_ESPECIAL, a checkpoint or an LMDB database file
 * with CDP_EKEEP). A full file system is ENOSPC. */
int  cdp_raster_write_tif(const char *path, int dtype, int nbands, int w, int h,
                          const void *buf, const double gt[6], const char *wkt,
                          int has_nodata, double nodata, char *err, size_t errcap);
/* The same into the temporary of o (cdp_out_open), left for the caller to
 * commit or abort: a program that renames all its files at the end, of
 * the window of src at (x0, y0): it is georeferenced as that window of src
 * is (src's geotransform with its origin moved and src's CRS; or, for a
 * raster with GCPs and no geotransform, its GCPs with pixel and line moved
 * by the offset, in their CRS; nothing for a raster with neither; and
 * src's RPCs moved by the offset: cdp_raster_georef_to). mask,
 * when not NULL, is (h, w) u8 validity (0 invalid, 255 valid), written as
 * the file's internal per-dataset mask band: what GDAL's GetMaskBand
 * returns for every band, so a reader sees the invalid pixels that a
 * nodata value cannot mark (padding of a raster without one, a .msk, pixels
 * whose bands are not all nodata). Band b gets nodata[b] where has_nodata
 * is not NULL and has_nodata[b] is set. bands [nbands], when not NULL, are
 * the bands of src the buffer's came from, whose colours the file keeps as
 * gdal_translate does: RGB where they begin with src's red, green and blue,
 * the next band alpha only where src's is alpha; every other band is grey,
 * so GDAL never takes a data band (a 4th, near infrared) for transparency.
 * With as_src set (buf holds those bands' values as they are, not
 * standardized) the file's bands keep their scale, offset, unit and
 * description too, as gdal_translate does. With bands NULL (a label)
 * every band is grey. */
int  cdp_raster_write_tif_out(cdp_out *o, int dtype, int nbands, int w, int h,
                              const void *buf, const uint8_t *mask, const cdp_raster *src,
                              const int *bands, int as_src, int64_t x0, int64_t y0,
                              const int *has_nodata, const double *nodata, char *err,
                              size_t errcap);

/* Gives the GDAL dataset ds (a GDALDatasetH: void * keeps GDAL out of
 * this header) what places the pixels of src's window at (x0, y0), an
 * output pixel spanning scale x scale of src's, besides a geotransform:
 * src's GCPs where it has no geotransform, and its RPCs (GDAL's RPC
 * metadata domain) always, their pixel and line moved and scaled as
 * gdal_translate -srcwin and -outsize move them (pixel - x0) / scale,
 * LINE_OFF (- y0) / scale and LINE_SCALE / scale. A multi-date raster's
 * are its first date's. */
int  cdp_raster_georef_to(const cdp_raster *src, void *ds, int64_t x0, int64_t y0,
                          double scale, char *err, size_t errcap);

/* Whether two WKT texts name the same CRS by OGR's OSRIsSame (not string
 * equality: the same CRS written by two GDAL versions compares equal): 1
 * the same, 0 not, -1 when one does not parse (err says which, "first" or
 * "second"). */
int  cdp_raster_crs_same(const char *a, const char *b, char *err, size_t errcap);
/* A short name of a WKT CRS for messages into out[cap]: "EPSG:32633" when
 * it has an authority code, else its name ("unknown" for none). */
void cdp_raster_crs_name(const char *wkt, char *out, size_t cap);
/* The pixel width and height of a geotransform in CRS units (the lengths
 * of its column and row steps, so a rotated grid counts too). */
void cdp_raster_pixel_size(const double gt[6], double *x, double *y);

/* A view of band 1 of src (u8 or u16) through a table: value v reads as
 * lut[v] (int32, v < nlut; values from nlut on read as 0), src's nodata as
 * -1, the view's nodata value (a GDAL VRT of src, so it is read through
 * src, never copied). For warping labels whose values are renumbered
 * first. */
int  cdp_raster_open_lut(cdp_raster *src, const int32_t *lut, size_t nlut,
                         cdp_raster **out, char *err, size_t errcap);

/* 1 when a geotransform or GCPs place info's pixels, else 0. */
int  cdp_raster_placed(const cdp_raster_info *i);
/* 1 when GCPs alone place info's pixels (GCPs and no geotransform: GDAL
 * takes a geotransform over GCPs), else 0. */
int  cdp_raster_by_gcps(const cdp_raster_info *i);
/* The CRS that info's pixels are placed in: the GCPs' for a raster placed
 * by GCPs only, else its own ("" when none); owned by the raster. */
const char *cdp_raster_grid_crs(const cdp_raster_info *i);
/* The one transformer of cdpool's warps, coverage checks and vector
 * rasterizations (a GDAL transformer for GDALGenImgProjTransform: void *
 * keeps GDAL out of this header), as gdalwarp relates two rasters: src's
 * pixels (src NULL: coordinates already in g's CRS, a vector's) to src's
 * CRS, into g's, and to the pixels of g's grid (counted from the window
 * that cdp_raster_transformer_move sets, (0, 0) at first). Each side is placed by its geotransform where it has one, else by its
 * GCPs in their CRS: GDAL's GCP polynomial of the order gdalwarp picks
 * from their count, or with tps set a thin plate spline through them
 * (gdalwarp -tps). Without a CRS on either side the two are taken to be
 * in one. NULL with err set when a side is placed by neither or GDAL
 * cannot relate them. Freed by cdp_raster_transformer_free. */
void *cdp_raster_transformer(const cdp_raster_info *src, const cdp_raster_info *g, int tps,
                             char *err, size_t errcap);
void cdp_raster_transformer_free(void *tr);
/* 1 when tr (or NULL) solved a thin plate spline (tps, and GCPs place a
 * side): seconds to fit through thousands of GCPs, where the polynomial
 * and a reprojection are cheap to fit again. */
int  cdp_raster_transformer_spline(const void *tr);
/* Counts tr's destination pixels from the window of g at (x0, y0) from
 * here on: one transformer, fitted once to the whole grid, serves every
 * window (a spline through thousands of GCPs is slow to solve). */
void cdp_raster_transformer_move(void *tr, int64_t x0, int64_t y0);
/* Moves n points x, y, z in place through tr, a GDALTransformerFunc
 * (GDAL's pfnTransformer, with tr its argument): src's pixels to the
 * window's (dst_to_src 0), or back (1); ok[i] 0 where a point cannot be
 * moved. Returns 0 when none could. */
int  cdp_raster_transform(void *tr, int dst_to_src, int n, double *x, double *y, double *z,
                          int *ok);

/* Resampling of the warps: GDAL's nearest neighbour and mode (class
 * labels, cdp_raster_warp), and for values (cdp_raster_warp_f32) nearest,
 * bilinear, cubic and average. */
enum { CDP_RESAMPLE_NEAR = 0, CDP_RESAMPLE_MODE = 1, CDP_RESAMPLE_BILINEAR = 2,
       CDP_RESAMPLE_CUBIC = 3, CDP_RESAMPLE_AVERAGE = 4 };
/* Warps band `band` of src onto the w x h window at (x0, y0) of a grid
 * g, with GDAL's warper through tr (cdp_raster_transformer(&src's info,
 * g, ...), built once for all the windows: it is moved to each; it also
 * fixes the resampling scale for every window, gdalwarp's -wo XSCALE= -wo
 * YSCALE=, at g's centre, where GDAL would estimate it per window), into
 * out[h*w] as int32: the source value, or -1 where the source does not
 * cover the pixel or holds only its own nodata. max_error is gdalwarp's
 * -et: 0 transforms every pixel exactly, more lets GDAL's approximate
 * transformer interpolate within that many pixels of error; gdalwarp -et
 * max_error -r near|mode [-tps] -wo XSCALE= -wo YSCALE= onto that window
 * gives the same pixels. */
int  cdp_raster_warp(cdp_raster *src, int band, void *tr, int64_t x0, int64_t y0, int w,
                     int h, int resample, double max_error, int32_t *out, char *err,
                     size_t errcap);
/* The same for values: bands [nbands] (1-based) of src into out
 * (nbands, h, w) as float32, NaN where the source does not cover a pixel
 * or holds only its nodata (a float source without a nodata value: NaN),
 * resampled by CDP_RESAMPLE_NEAR, _BILINEAR, _CUBIC or _AVERAGE (mode is
 * for classes); gdalwarp -et max_error -r near|bilinear|cubic|average
 * -ot Float32 -dstnodata nan of the same window gives the same pixels. */
int  cdp_raster_warp_f32(cdp_raster *src, const int *bands, int nbands, void *tr,
                         int64_t x0, int64_t y0, int w, int h, int resample,
                         double max_error, float *out, char *err, size_t errcap);

/* A multi-date input (cdp-tile --time, cdp-predict --time): spec lists 2
 * to CDP_RASTER_MAXDATES rasters, comma-separated, in time order. The
 * result reads as one raster on the first date's grid (its size,
 * geotransform, CRS, data type and nodata) whose bands are the dates'
 * bands stacked in time order: date d's band b (both 1-based, B bands a
 * date) is band (d - 1) * B + b. Every date must have the first date's
 * band count and data type (CDP_EMISMATCH). A date on another grid (another
 * geotransform, CRS or GCPs) is warped onto the first's with GDAL's
 * warper (cdp_raster_transformer, tps as there), bilinear, max_error as
 * gdalwarp's -et, the resampling scale fixed for the whole grid as
 * cdp_raster_warp fixes it; pixels it does not cover are invalid. A date that
 * neither a geotransform nor GCPs place is taken only on the first date's
 * grid (the same size, no geotransform on either). The mask
 * (cdp_raster_read_mask) is valid where every date is valid (its own
 * nodata, mask or coverage), and cdp_raster_has_mask is 1 when any date
 * has a nodata value, a mask or is warped. cdp_raster_files lists every
 * date's files. Errors name the date. */
#define CDP_RASTER_MAXDATES 64
/* the max_error the tools warp dates with: gdalwarp's default -et */
#define CDP_RASTER_TIME_ET 0.125
int  cdp_raster_open_time(const char *spec, double max_error, int tps, cdp_raster **out,
                          char *err, size_t errcap);
/* The number of dates of r: 1 for a raster of one date. */
int  cdp_raster_dates(const cdp_raster *r);
/* Whether src covers any of the grid g: whether the warp through tr
 * (cdp_raster_transformer(&src's info, g, ...)) would take any pixel of
 * g from src. Tested as the warp goes, from g's pixel centres back to
 * src's pixels: a grid of them over the box of g where src's outline
 * lands (padded by how far the transformer's two ways disagree: with GCPs
 * the way back by their separately fitted inverse polynomial can miss the
 * warp by pixels), refined while they land around src but not on it, up
 * to every pixel centre of the box; a box wider than that, still around
 * src, counts as covered. 1 it does, 0 not, CDP_ENOMEM. Leaves tr at the
 * window (0, 0). */
int  cdp_raster_overlaps(const cdp_raster *src, const cdp_raster_info *g, void *tr,
                         char *err, size_t errcap);
/* 4 * steps points x, y clockwise along the outline of a w x h pixel
 * rectangle from its top-left corner, steps along each edge: what a
 * transformer moves to find where a grid's edges, bent by a
 * reprojection or GCPs, fall. */
void cdp_raster_outline(double w, double h, int steps, double *x, double *y);
/* Whether two geotransforms are the same grid, to a billionth of a pixel. */
int  cdp_raster_same_gt(const double a[6], const double b[6]);

/* "GDAL: 3.6.2", the version compiled against (for --version). */
const char *cdp_raster_version(void);

#endif
