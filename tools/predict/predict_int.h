/* predict_int.h: cdp-predict's internals: the state of a run (built by
 * predict_setup.c, run strip by strip by predict.c) and the GDAL side
 * (predict_out.c): the output GeoTIFF written in rows, the polygons and the
 * preview. predict.c and predict_setup.c keep to cdp_raster.h and the
 * engine. */
#ifndef CDP_PREDICT_INT_H
#define CDP_PREDICT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cdp_out.h"
#include "cdp_raster.h"
#include "ckpt/checkpoint.h"
#include "predict.h"

#define PR_PROG "cdp-predict"
#define PR_PREVIEW_MAX 1024

typedef struct pr_out pr_out;

#define PR_NAME_MAX (CDP_CKPT_CLASS_NAME_MAX + 1)
/* The classes' names and colours (predict_legend.c): ids 0..k-1. */
typedef struct pr_legend {
	int k;
	char (*name)[PR_NAME_MAX];  /* [k] */
	uint8_t (*rgb)[3];          /* [k] */
} pr_legend;

/* One run's state (predict.c runs it, predict_setup.c builds it). */
typedef struct predictor {
	const cdp_predict_opts *o;
	char model[4096];
	cdp_ckpt ck;
	int have_ck, have_net;
	cdp_backend *be;
	cdp_net net;
	cdp_raster *r;
	const cdp_raster_info *ri;
	int C, K, S, O, T, m, B;  /* channels, classes, size, overlap, stride, margin, batch */
	int W, H, nx, ny;         /* raster size, windows per strip, strips */
	int rank, nranks, nodata_mode; /* 0 none, 1 nodata value, 2 mask band */
	int classify;             /* the model's head is 1x1: predict_classify.c */
	int reg;                  /* a regression net (checkpoint TASK): K targets a
	                           * pixel, blended linearly, out * tstd + tmean */
	float *w1;                /* (S) the 1-D window weight */
	float *normx, *normy;     /* (W), (H): summed weights per column and row */
	float *mean, *inv;        /* (C) standardization */
	double *nd;               /* (C) each model band's nodata value, */
	int *hasnd;               /* (C) where it has one */
	int nd_any;               /* the bands' differ: nodata where one band is */
	void *raw;                /* (C, S, W) samples of the raster's dtype */
	float *img;               /* (C, S, W) standardized */
	uint8_t *valid;           /* (S, W) */
	int32_t *srow;            /* (S) a strip's rows (reflected), as rows of img */
	/* on the backend's device: the strip, its sums, the rows, every
	 * window's first column, the weight (win_gather, win_blend) */
	float *dimg, *dsum;       /* (C, S, W), (K, S, W) */
	int32_t *dsrow, *dx0;     /* (S), (nx) */
	float *dw1;               /* (S) */
	float *slots;             /* (nranks, K, S, W) strip sums of a round on
	                           * rank 0, (1, K, S, W) elsewhere */
	float *acc;               /* (K, S, W) rank 0's accumulator */
	void *orow;               /* (nb, T or S, W) output rows */
	uint8_t *vrow;            /* (S, W) class rows for the vector mask */
	uint8_t *pcls;            /* (ph, pw) preview class ids */
	int pw, ph, pstep;
	pr_out *out, *vout;
	pr_legend legend;         /* max(K, 2) classes (a sigmoid head has 2) */
	int vclass;               /* --vector-class as an id, or CDP_PREDICT_VECTOR_ALL */
	/* --tta (predict_tta.c): a batch's windows on the host, transformed,
	 * the logits of one run and the summed probabilities */
	float *tx, *tt, *tl;      /* (B, C, S, S), (B, C, S, S), (B, K, S, S) */
	double *tacc;             /* (B, K, S, S) */
	float *dtl;               /* (B, K, S, S) tl on the device (segmentation) */
} predictor;

/* predict_setup.c: each returns 0 or -1 with the reason in err. */
int  pr_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The checkpoint, the net rebuilt from it at (C, S, S), and its tensors. */
int  pr_load_model(predictor *p, char *err, size_t cap);
/* The raster, checked against the checkpoint's bands and statistics. */
int  pr_open_raster(predictor *p, char *err, size_t cap);
/* Every rank's raster against rank 0's, before the first strip
 * (collective; nothing with one process): size, bands, data type,
 * geotransform, CRS, nodata value, mask band and the CRC32 of the first,
 * middle and last rows of every band. A rank whose raster differs names
 * itself, its host and the difference; the others say another rank's
 * differs. 0 on every rank, or -1 on every rank. */
int  pr_same_raster(predictor *p, char *err, size_t cap);
/* The window weight and the grid of windows. */
int  pr_weights(predictor *p, char *err, size_t cap);
/* The buffers of --tta for outputs of s_out x s_out (S, or 1 for a
 * classifier); nothing without it. 0 or -1 (out of memory). */
int  pr_tta_alloc(predictor *p, int s_out);
/* The strip buffers (all ranks) and the accumulator and outputs (rank 0). */
int  pr_alloc(predictor *p, char *err, size_t cap);
/* Refuses an output (-o, --vector and its mask, --preview) whose
 * extension does not name its format; that is the input, a file GDAL
 * reads for it, the checkpoint, or another output; --vector or --preview
 * that is -o's side file (cdp_out_aux_name); one the output policy
 * refuses (cdp_out_check_outputs: a FIFO, a device, a checkpoint, a pool's
 * file, a side file of an input, a folder that is not there or where no
 * file can be made). */
int  pr_check_outputs(predictor *p, char *err, size_t cap);

/* predict.c: rows [y, y + n) of the raster into p->raw (C, n, W) and
 * their validity into v (n, W); p->raw standardized into p->img. */
int  pr_read_rows(predictor *p, int y, int n, uint8_t *v, char *err, size_t cap);
void pr_standardize(predictor *p, int n);
/* predict_classify.c: a classifier over chips (CSV) or a scene's grid;
 * pr_is_csv: -o names a CSV (ends in .csv, any case). */
int  pr_classify_run(predictor *p, char *err, size_t cap);
int  pr_is_csv(const char *path);

/* predict_tta.c, --tta (cdp_predict_tta_parse in predict.h): transform t of planes s x s planes
 * in -> out; the probabilities of the logits (n, k, s, s) of a run on
 * inputs transformed by t, mapped back and added into acc (n, k, s, s);
 * the mean of acc over runs as logits whose softmax (sigmoid for k = 1)
 * is that mean; k = -K for a regression net's K values a pixel, added and
 * averaged as they are. pr_tta_run runs the batch in p->net.x (n windows used)
 * through the p->o->tta transforms and leaves those logits, (B, K, s_out,
 * s_out), in lg; xh and xt hold (B, C, S, S), acc (B, K, s_out, s_out). */
void pr_tta_apply(int t, int s, size_t planes, const float *in, float *out);
void pr_tta_add(int t, int s, int n, int k, const float *logits, double *acc);
void pr_tta_logits(size_t n, int k, int runs, const double *acc, float *out);
int  pr_tta_run(predictor *p, int n, float *xh, float *xt, float *lg, double *acc, int s_out);

/* A GeoTIFF of nb bands, w x h, written top to bottom: u8 with nodata 255,
 * or (f32) float32 with nodata NaN, under a temporary name in the target's
 * directory (cdp_out.h) until pr_out_close commits it. gt may be NULL
 * (none). */
int  pr_out_open(pr_out **o, const char *path, int w, int h, int nb, int f32,
                 const double *gt, const char *wkt, char *err, size_t cap);
/* What places src's pixels besides a geotransform set on o, pixel and
 * line divided by scale (1, or a classifier's cell size), so the output
 * stays georeferenced as the input is: its GCPs (a raster without a
 * geotransform) and its RPCs (cdp_raster_georef_to; a multi-date input's
 * first date's). 0 or -1 with err. */
int  pr_out_georef(pr_out *o, const cdp_raster *src, double scale, char *err, size_t cap);
/* Rows [y, y + n) from buf (nb, n, w) of the file's type. */
int  pr_out_write(pr_out *o, int y, int n, const void *buf, char *err, size_t cap);
/* Completes the file under its temporary name (closed, and laid out when
 * pr_out_layout asked), ready for a commit; 0 or -1 with err. Called by
 * pr_out_close(o, 1) when not before. */
int  pr_out_finish(pr_out *o, char *err, size_t cap);
/* The temporary holding the finished file (after pr_out_finish): the class
 * mask of --vector is read from it, never renamed. */
const char *pr_out_file(const pr_out *o);
/* Closes; commit 1 renames into place (a failure at close is a failure),
 * 0 removes the temporaries. */
int  pr_out_close(pr_out *o, int commit, char *err, size_t cap);

/* o (float32) holds a regression net's values: tagged CDP_TASK=regression
 * (cdp_raster.h), the bands described "target 1", ... 0 or -1 with err. */
int  pr_out_regression(pr_out *o, char *err, size_t cap);
/* The file as GIS tools want it, done by pr_out_close(o, 1): 256x256
 * deflate tiles with overviews (mode of the classes, average of the
 * probabilities), a Cloud Optimized GeoTIFF (GDAL's COG driver) when cog;
 * class ids with lg's colour table, category names and attribute table
 * (Value, Class, Red, Green, Blue), probability bands described by the
 * class names. lg must outlive o. The colour table and attribute table go
 * on the striped file now, before any row (libtiff refuses the palette
 * once a block is written); 0 or -1 with err. */
int  pr_out_layout(pr_out *o, const pr_legend *lg, int cog, char *err, size_t cap);

/* pr_legend_make: class k is "class k" in a fixed palette, named by the
 * checkpoint's class names when it has them (ck), unless the --colors
 * file (predict_legend.c) names and colours it; 0 or -1 with err.
 * pr_legend_free leaves an empty legend. */
int  pr_legend_make(pr_legend *l, int k, const cdp_ckpt *ck, const char *colors, char *err,
                    size_t cap);
void pr_legend_free(pr_legend *l);

/* The OGR driver that --vector's extension names (.gpkg GeoPackage,
 * .geojson GeoJSON, any case), or NULL for one cdp-predict does not write
 * (a Shapefile is several files, which cannot be replaced as one). */
const char *pr_vector_driver(const char *path);

/* Polygonizes the pixels equal to klass of a u8 raster (its nodata 255 is
 * outside every polygon) into a new layer "prediction" with an integer
 * field "class" and a text field "name" (lg's name of the class), in the
 * format path's extension names (pr_vector_driver), written into out,
 * opened here under the output policy (cdp_out.h) and left for the caller
 * to commit (nothing is left open on failure). A raster with GCPs and no
 * geotransform gives polygons moved by its GCPs (GDAL's GCP polynomial
 * transformer) into their CRS. */
int  pr_vector(const char *mask_tif, const char *path, int klass, const pr_legend *lg,
               cdp_out *out, char *err, size_t cap);

/* pr_preview: a PNG of at most 1024 pixels a side, the input's first three
 * model bands (bands[0..n), 1-based; one as gray) of the preview grid,
 * each stretched between the 2nd and 98th percentiles of its valid pixels
 * (not the band's nodata, not where cls is 255), with cls (ph, pw) class
 * ids painted in the class map's colours, lg (the GeoTIFF's colour table,
 * --colors included): every class but 0, which shows the image (255 =
 * nodata, shown black). Written into out, opened here and left for the
 * caller to commit. */
int  pr_preview(const char *input, const int *bands, int n, const uint8_t *cls, int pw,
                int ph, const pr_legend *lg, const char *png, cdp_out *out, char *err,
                size_t cap);

#endif
