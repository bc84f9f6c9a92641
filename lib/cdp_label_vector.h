/* cdp_label_vector.h: label rasters made from vector layers (any dataset
 * OGR opens: GeoPackage, Shapefile, GeoJSON, FlatGeobuf, through /vsi*
 * too), rasterized onto exactly the pixel grid a caller asks for, in the
 * image's CRS. cdp-tile asks for one strip of tiles at a time; the options
 * are gdal_rasterize's (burn value or attribute, where, all-touched), plus
 * a buffer, a completeness extent and class names for string attributes.
 *
 * The implementation (cdp_label_vector.c) uses GDAL/OGR and is built into
 * libcdpraster.a beside cdp_raster.c; this header does not include GDAL.
 *
 * Errors: functions return CDP_OK or an error code (cdp_error.h) and copy a
 * one-line reason into err[errcap]: CDP_EGDAL (OGR could not open or read,
 * its own message), CDP_EMISMATCH (a CRS that is missing or cannot be
 * transformed, a value that is not a class), CDP_EFORMAT (a layer or an
 * attribute that is missing or of the wrong type), CDP_ERANGE (an id that
 * does not fit the label type), CDP_ENOMEM.
 */
#ifndef CDP_LABEL_VECTOR_H
#define CDP_LABEL_VECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_raster.h"

typedef struct cdp_label_vector cdp_label_vector;

typedef struct cdp_label_vector_opts {
	const char *layer;          /* NULL: the dataset's only layer */
	const char *field;          /* NULL: every feature burns `burn` */
	uint32_t burn;              /* 0..65534; default 1 */
	uint32_t background;        /* 0..65534; default 0 */
	int background_ignore;      /* --background ignore: pixels no feature
	                               covers are the caller's ignore value */
	int background_given;       /* --background was given */
	const char *where;          /* NULL or an OGR attribute filter */
	int all_touched;            /* every pixel a feature touches */
	const char *crs;            /* NULL, or the CRS (any text that
	                               OSRSetFromUserInput takes) of a label or
	                               extent layer that declares none */
	const char *const *classes; /* [nclasses]: a string attribute's value
	                               has the id of its index */
	size_t nclasses;
	double buffer;              /* OGR_G_Buffer distance in image CRS units */
	const char *buffer_field;   /* NULL, or a numeric attribute: the
	                               distance per feature (NULL: none) */
	const char *extent;         /* NULL, or a vector of polygons outside
	                               which every pixel is the ignore value */
	int type;                   /* 0: u8 when every id < 255, else u16;
	                               or CDP_LABEL_U8 / CDP_LABEL_U16 */
	int given;                  /* an option below was given (so the label
	                               must be a vector) */
	int burn_given;
} cdp_label_vector_opts;

/* burn 1, background 0, everything else unset. */
void cdp_label_vector_opts_init(cdp_label_vector_opts *o);

/* 1 when OGR opens path as a vector dataset with at least one layer, else
 * 0 (a raster, a missing file). */
int cdp_label_vector_is_vector(const char *path);

/* What path is, before any option that depends on it is read: 1 a vector
 * dataset (as cdp_label_vector_is_vector), 0 anything else that GDAL opens
 * or that exists and can be read (its own opener then says what is wrong
 * with it), -1 when it cannot be opened at all, a missing or unreadable
 * file, with the reason ("No such file or directory", "Permission denied")
 * in err[errcap]. */
int cdp_label_vector_probe(const char *path, char *err, size_t errcap);

/* The label of image for --label-suffix: the existing one of stem+suffix
 * with the image's extension and with .gpkg, .shp, .geojson and .fgb (the
 * stem is the image path without its extension). None existing: the
 * raster name, so that opening it reports the miss. More than one:
 * CDP_EMISMATCH naming them. *out is malloc'ed. */
int cdp_label_vector_find(const char *image, const char *suffix, char **out,
                          char *err, size_t errcap);

/* Opens path's layer for labels of an image in CRS image_wkt ("" for none)
 * and checks every feature that passes o->where: the attribute's values
 * (integers 0..65534, or names in o->classes), which fix the label type.
 * o and its strings must outlive v. */
int cdp_label_vector_open(const char *path, const cdp_label_vector_opts *o,
                          const char *image_wkt, cdp_label_vector **out,
                          char *err, size_t errcap);

/* CDP_LABEL_U8 or CDP_LABEL_U16. */
int cdp_label_vector_kind(const cdp_label_vector *v);

/* A warning for the user, or NULL: "layer 'p' declares a CRS of its own,
 * which wins: --label-crs 'X' (another CRS) is ignored" where the label's
 * (or --label-extent's) layer declares a CRS other than o->crs. */
const char *cdp_label_vector_note(const cdp_label_vector *v);

/* CDP_OK when crs is a CRS OGR's OSRSetFromUserInput takes (EPSG:32633, a
 * WKT or PROJ string), else CDP_EFORMAT (CDP_ENOMEM): what --label-crs
 * gives is checked before any label is opened, whether or not a layer
 * will need it. */
int cdp_label_vector_crs_check(const char *crs);

/* 1 when the label burns class id `id` somewhere, with what into what[cap]
 * ("the --burn value", "the --background value", "the id of --classes name
 * 'x'", "a value of the label attribute 'a'"), else 0: an ignore value
 * equal to such an id would make that class vanish, so callers refuse it
 * (as a --label-map id equal to the ignore value is refused). Attribute
 * values are those of the features that pass o->where. */
int cdp_label_vector_id_use(const cdp_label_vector *v, uint32_t id, char *what,
                            size_t cap);

/* Rasterizes the features that intersect the grid (gt, w, h) (only those
 * are read: a spatial filter on the layer) into buf, (h, w) u8 or u16 as
 * the kind says: background where no feature is, the id of the last
 * feature in layer order where several are, ignore where a feature's
 * attribute is NULL and outside o->extent. */
int cdp_label_vector_read(cdp_label_vector *v, const double gt[6], int w, int h,
                          uint32_t ignore, void *buf, char *err, size_t errcap);
/* The same for rows [y0, y0 + h) of the image's grid g (its width and
 * height, and its geotransform; for an image placed by GCPs only, its
 * GCPs, through cdp_raster_transformer with tps: a polynomial or a thin
 * plate spline, as gdalwarp places the image): exactly those rows of the
 * whole grid rasterized at once (gdal_rasterize of the grid), whichever
 * rows a caller reads at a time, where a window of its own decides a
 * geometry on its edge (a line along the seam of two strips
 * --all-touched) by that edge. CDP_EINVAL when the rows leave the grid. */
int cdp_label_vector_read_rows(cdp_label_vector *v, const cdp_raster_info *g, int tps,
                               int64_t y0, int h, uint32_t ignore, void *buf, char *err,
                               size_t errcap);
/* Relates v to the grid g that read_rows will rasterize it on (g placed
 * by GCPs only: cdp_raster_transformer with tps, fitted once for every
 * strip; nothing to do for a geotransform), so that GCPs that cannot
 * place anything (one, collinear, repeated) are refused before anything
 * is written: CDP_EGDAL with err set, GDAL's reason. read_rows calls it
 * when no caller has, and uses the g and tps of the first call. */
int cdp_label_vector_place(cdp_label_vector *v, const cdp_raster_info *g, int tps,
                           char *err, size_t errcap);
/* *any = 1 when a feature of the label layer that passes o->where (and is
 * not empty) lies within the grid g's bounds carried into the layer's CRS
 * (widened by a pixel and the largest buffer), as the reads' spatial filter
 * selects them; 0 when none does, so that every label of g would be the
 * background (a layer of another place, or coordinates read in a CRS they
 * are not in). Bounds that cannot be carried into the layer's CRS give 1.
 * CDP_OK, or CDP_EGDAL (a read error) with err set. */
int cdp_label_vector_over(cdp_label_vector *v, const cdp_raster_info *g, int tps, int *any,
                          char *err, size_t errcap);
/* The transformer place fitted (NULL when g has a geotransform), taken
 * from v: the caller frees it (cdp_raster_transformer_free) or gives it to
 * another opening of the same label for the same grid and tps before its
 * place, which then fits nothing (cdp-tile's cut, after its check: a
 * spline through thousands of GCPs takes seconds to solve). give takes
 * tr over; one v already holds is kept, and tr freed. */
void *cdp_label_vector_take_transformer(cdp_label_vector *v);
void cdp_label_vector_give_transformer(cdp_label_vector *v, void *tr);

/* Calls fn(path, arg) for each file GDAL reads for v's labels (extent 0)
 * or for its o->extent layer (extent 1; none without one), so that a
 * caller can name each by the option that gave it; stops at and returns
 * the first non-zero value of fn. */
int cdp_label_vector_files(const cdp_label_vector *v, int extent,
                           int (*fn)(const char *path, void *arg), void *arg);

void cdp_label_vector_close(cdp_label_vector *v);

/* The command-line options of vector labels, shared by the programs that
 * take them (cdp-tile, cdp-evaluate; cdp_label_vector_cli.c): entries for
 * a getopt_long table, whose values CDP_LVO_* lie above any short option
 * and any program's own (keep those below CDP_LVO_BASE), and the usage
 * text. --classes is each program's own (cdp-evaluate's also takes a
 * count). */
enum { CDP_LVO_BASE = 1024, CDP_LVO_ALL_TOUCHED = CDP_LVO_BASE, CDP_LVO_BACKGROUND,
       CDP_LVO_BUFFER, CDP_LVO_BUFFER_FIELD, CDP_LVO_BURN, CDP_LVO_LABEL_CRS,
       CDP_LVO_LABEL_EXTENT, CDP_LVO_LABEL_FIELD, CDP_LVO_LABEL_LAYER,
       CDP_LVO_LABEL_TYPE, CDP_LVO_LABEL_WHERE, CDP_LVO_END };
#define CDP_LABEL_VECTOR_LONGOPTS \
	{ "all-touched",  no_argument,       NULL, CDP_LVO_ALL_TOUCHED }, \
	{ "background",   required_argument, NULL, CDP_LVO_BACKGROUND }, \
	{ "buffer",       required_argument, NULL, CDP_LVO_BUFFER }, \
	{ "buffer-field", required_argument, NULL, CDP_LVO_BUFFER_FIELD }, \
	{ "burn",         required_argument, NULL, CDP_LVO_BURN }, \
	{ "label-crs",    required_argument, NULL, CDP_LVO_LABEL_CRS }, \
	{ "label-extent", required_argument, NULL, CDP_LVO_LABEL_EXTENT }, \
	{ "label-field",  required_argument, NULL, CDP_LVO_LABEL_FIELD }, \
	{ "label-layer",  required_argument, NULL, CDP_LVO_LABEL_LAYER }, \
	{ "label-type",   required_argument, NULL, CDP_LVO_LABEL_TYPE }, \
	{ "label-where",  required_argument, NULL, CDP_LVO_LABEL_WHERE }
/* usage() lines, each indented by INDENT (a string of spaces) */
#define CDP_LABEL_VECTOR_USAGE(INDENT) \
	INDENT "[--label-layer name] [--burn value | --label-field attr]\n" \
	INDENT "[--label-where sql] [--all-touched] [--background value|ignore]\n" \
	INDENT "[--label-crs crs] [--buffer dist | --buffer-field attr]\n" \
	INDENT "[--label-extent file] [--label-type u8|u16]\n"

/* Applies option ch (a CDP_LVO_* value) with argument arg to o: 0, or -1
 * after cdp_cli has printed the usage error (exit 2). */
int cdp_label_vector_option(cdp_label_vector_opts *o, int ch, const char *arg);
/* The options of o as one line of cdp-tile options, the values shell-quoted
 * where needed ("--label-field cls --label-where 'cls >= 2' --background 0
 * --all-touched"; a value with a newline or another control character as
 * $'...' with backslash escapes, "--label-where $'a = 1\n OR a = 2'"), into
 * out[cap], for a record of how labels were made: CDP_OK, or CDP_ERANGE
 * when it does not fit. --classes is left out (the names travel on their
 * own). */
int cdp_label_vector_describe(const cdp_label_vector_opts *o, char *out, size_t cap);
/* After every option (and o->classes): the ones that exclude each other,
 * and --classes naming more than 2 classes when every feature burns the one
 * --burn value (no --label-field, no --burn given): those names could never
 * be burned. 0, or -1 with the usage error printed through cdp_cli's
 * stream. */
int cdp_label_vector_options_check(const cdp_label_vector_opts *o);

#endif
