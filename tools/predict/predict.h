/* predict.h: cdp-predict's work as a library function (main.c parses the
 * command line and calls cdp_predict_run).
 *
 * The model (a checkpoint, cdp-checkpoint(5)) is slid over the raster in
 * square windows of `size` pixels on a grid of stride size - overlap; the
 * grid starts overlap/2 pixels before the raster's first row and column so
 * that border pixels get context, and pixels outside the raster come from
 * reflection (numpy's "reflect": no edge repeated). Each window's
 * probabilities are weighted by w(x) w(y), where w ramps as sin^2 over the
 * first and last `overlap` pixels and is 1 between: the ramps of two
 * neighbouring windows add up to 1 exactly, so predictions cross-fade and
 * no seam shows; with overlap 0 the windows simply tile. The output is the
 * weighted sum divided by the summed weights (which factor per axis).
 *
 * Memory is bounded by the raster's width times `size`: one row of windows
 * (a "strip") is read, run and added to an accumulator of `size` rows, and
 * the rows no later strip touches are written out. Under mpirun rank r runs
 * strips r, r + j, ...; after every round of j strips the strips' weighted
 * sums are gathered to rank 0 (each rank sends its one slot; only rank 0
 * holds j, so the other ranks' memory does not grow with j; the copies are
 * exact), which adds them in strip order exactly as one process does: the
 * output does not depend on j. Rank 0 reads the checkpoint and broadcasts
 * it, so only its host needs the file; every rank reads the raster. With
 * --tta each window's probabilities are first averaged over its flipped
 * and rotated copies (predict_tta.c). With --time the input is several
 * dates read as one raster of stacked bands, as cdp-tile --time stacks
 * them (cdp_raster_open_time), so a change model sees what it trained on.
 */
#ifndef CDP_PREDICT_H
#define CDP_PREDICT_H

#include <stddef.h>

typedef struct cdp_predict_opts {
	const char *model;      /* checkpoint file, or a run directory holding checkpoint.cdpt */
	const char *input;      /* the raster, or with time its dates "A.tif,B.tif[,...]" */
	int time;               /* 1: input is a multi-date input (--time), stacked as
	                           cdp-tile --time stacks it (cdp_raster_open_time) */
	int tps;                /* 1: GCPs place the dates by a thin plate spline
	                           (cdp-tile --tps), else their polynomial */
	const char *output;     /* GeoTIFF written (atomically), tiled, with overviews */
	int cog;                /* 1: a Cloud Optimized GeoTIFF */
	const char *colors;     /* --colors FILE: class names and colours, or NULL */
	int size;               /* window size; 0: the checkpoint's input size */
	int overlap;            /* -1: size / 4 */
	int batch;              /* windows per forward pass */
	int threads;            /* CPU threads; <= 0: cores / local ranks */
	const char *device;     /* --device (engine/device.h) */
	int precision;          /* CDP_PREC_* (backend.h) */
	int prob;               /* 1: float32 probabilities instead of class ids */
	int tta;                /* transforms averaged per window: 1 (none), 4 (flips), 8 (d4) */
	const char *vector;     /* GeoPackage or GeoJSON of polygons of vector_class, or NULL */
	int vector_class;       /* a class id, or CDP_PREDICT_VECTOR_ALL */
	const char *vector_class_name; /* or a checkpoint's class name, or NULL */
	const char *preview;    /* PNG quick-look, or NULL */
	int preview_bands[3];   /* --preview-bands: the input's bands shown, 1 (gray) or 3 */
	int npreview_bands;     /* (red, green, blue); 0: the model's first bands */
	int progress;           /* CDP_PROGRESS_* */
	int any_crs;            /* 1: predict a raster in another CRS than the training data's */
	double threshold;       /* multi-label chips: a class is named from this probability
	                           (default 0.5) */
} cdp_predict_opts;

void cdp_predict_opts_init(cdp_predict_opts *o);
/* --tta's name to cdp_predict_opts.tta: "none" 1, "flips" 4 (identity,
 * horizontal, vertical and both flips), "d4" 8 (those and their
 * transposes: the four rotations and four reflections of the square);
 * 0 for any other. */
int cdp_predict_tta_parse(const char *s);
/* 1 when -o's name means a classifier's CSV of chips: it ends in .csv (any
 * case), or it is a streamed output ("-", a FIFO, a character device). */
int cdp_predict_output_csv(const char *path);
/* Runs the prediction; on every rank under MPI (cdp_dist_init first).
 * Returns 0, or -1 with a one-line reason in err (naming the file). */
int cdp_predict_run(const cdp_predict_opts *o, char *err, size_t cap);

/* --vector-class all: every class but nodata */
#define CDP_PREDICT_VECTOR_ALL (-1)

#endif
