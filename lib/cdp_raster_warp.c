/* cdp_raster_warp.c: between grids (cdp_raster.h's transformers and
 * warps). A transformer maps the pixels of one grid onto another's through
 * their geotransforms or GCPs (a polynomial or, with tps, a thin-plate
 * spline) and their CRSs, approximated within max_error pixels; a warp
 * resamples a window of a source raster onto a grid through one; a later
 * date on another grid opens as a warped view on the first date's
 * (cdp_raster_open_time); cdp_raster_overlaps says whether two grids meet.
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <gdalwarper.h>
#include <ogr_srs_api.h>

#include "cdp_error.h"
#include "cdp_dtype.h"
#include "cdp_raster.h"
#include "cdp_raster_impl.h"

/* A MEM dataset of i's size without bands (nothing allocated) that holds
 * only what places i's pixels: its geotransform or its GCPs. The size is
 * GDAL's area of interest when it picks a coordinate operation, as for the
 * raster itself. No CRS: cdp_raster_transformer passes the CRSs itself.
 * NULL on failure. */
static GDALDatasetH georef_proxy(const cdp_raster_info *i)
{
	GDALDriverH mem = GDALGetDriverByName("MEM");
	int w = i->width < INT_MAX ? (int)i->width : INT_MAX;
	int h = i->height < INT_MAX ? (int)i->height : INT_MAX;
	GDALDatasetH ds;
	GDAL_GCP *gc;
	char none[1] = "";
	CPLErr e = CE_None;

	if (!mem || !(ds = GDALCreate(mem, "", w > 0 ? w : 1, h > 0 ? h : 1, 0, GDT_Byte, NULL)))
		return NULL;
	if (i->has_gt) {
		double gt[6];
		memcpy(gt, i->gt, sizeof gt);   /* GDAL's parameter is not const */
		e = GDALSetGeoTransform(ds, gt);
	} else if (i->ngcps > 0) {
		if (!(gc = calloc((size_t)i->ngcps, sizeof *gc))) {
			GDALClose(ds);
			return NULL;
		}
		for (int k = 0; k < i->ngcps; k++)
			gc[k] = (GDAL_GCP){ none, none, i->gcps[k].pixel, i->gcps[k].line,
			                    i->gcps[k].x, i->gcps[k].y, i->gcps[k].z };
		e = GDALSetGCPs(ds, i->ngcps, gc, "");
		free(gc);
	}
	if (e != CE_None) {
		GDALClose(ds);
		return NULL;
	}
	return ds;
}

/* GDAL's transformer between src's pixels and all of g's: what
 * open_warped hands a warped VRT to own and destroy; the others take
 * cdp_raster_transformer's window wrapper around it. */
static void *gen_transformer(const cdp_raster_info *src, const cdp_raster_info *g, int tps,
                             char *err, size_t errcap)
{
	const char *sw = src ? cdp_raster_grid_crs(src) : "", *gw = cdp_raster_grid_crs(g);
	GDALDatasetH sp = NULL, gp = NULL;
	char **opt = NULL;
	void *tr = NULL;

	CPLErrorReset();
	if ((src && !cdp_raster_placed(src)) || !cdp_raster_placed(g)) {
		cdp_raster_set_err(err, errcap, "neither a geotransform nor GCPs place the pixels");
		return NULL;
	}
	if ((src && !(sp = georef_proxy(src))) || !(gp = georef_proxy(g))) {
		cdp_raster_gdal_err(err, errcap, "out of memory");
		goto out;
	}
	/* both CRSs or none: a grid without one is taken to be in the other's */
	if (sw[0] && gw[0]) {
		opt = CSLSetNameValue(opt, "SRC_SRS", sw);
		opt = CSLSetNameValue(opt, "DST_SRS", gw);
	}
	/* GCPs: GDAL's polynomial of automatic order (MAX_GCP_ORDER 0, what
	 * gdalwarp uses by default), or gdalwarp -tps's spline */
	if (tps && src && cdp_raster_by_gcps(src))
		opt = CSLSetNameValue(opt, "SRC_METHOD", "GCP_TPS");
	if (tps && cdp_raster_by_gcps(g))
		opt = CSLSetNameValue(opt, "DST_METHOD", "GCP_TPS");
	if (!(tr = GDALCreateGenImgProjTransformer2(sp, gp, opt)))
		cdp_raster_gdal_err(err, errcap, "cannot relate the grids");
out:
	CSLDestroy(opt);
	if (sp)
		GDALClose(sp);
	if (gp)
		GDALClose(gp);
	return tr;
}

/* cdp_raster_transformer: GDAL's transformer fitted once to the whole of
 * g (a spline through 2000 GCPs takes seconds to solve), and the window
 * its destination pixels are counted from. */
typedef struct rtr {
	void *gen;
	double x0, y0;
	double xscale, yscale;   /* the warp's, for every window; 0: GDAL's own */
	int spline;              /* a thin plate spline (gen_transformer's GCP_TPS) */
} rtr;

/* GDAL's warper sizes its resampling kernel (bilinear, cubic, average,
 * mode) by the ratio of a window's pixels to the source pixels it reads,
 * estimated per window (or per block of a warped VRT): wherever that
 * ratio varies (GCPs, another CRS) two tiles would weigh a shared pixel's
 * neighbours differently. One ratio for the whole grid g instead (its
 * XSCALE and YSCALE warp options), through gen (GDAL's transformer from
 * src's pixels to g's) at g's centre, as a square window there sees it;
 * on an affine grid in src's CRS that is GDAL's own estimate. 0s when
 * the centre cannot be moved: GDAL's estimate. */
static void grid_scale(void *gen, const cdp_raster_info *g, double *xscale, double *yscale)
{
	double cx = (double)g->width / 2, cy = (double)g->height / 2;
	double x[3] = { cx, cx + 1, cx }, y[3] = { cy, cy, cy + 1 }, z[3] = { 0, 0, 0 };
	double sx, sy;
	int ok[3];

	*xscale = *yscale = 0;
	if (!GDALGenImgProjTransform(gen, TRUE, 3, x, y, z, ok) || !ok[0] || !ok[1] || !ok[2])
		return;
	sx = fabs(x[1] - x[0]) + fabs(x[2] - x[0]);
	sy = fabs(y[1] - y[0]) + fabs(y[2] - y[0]);
	if (isfinite(sx) && isfinite(sy) && sx > 0 && sy > 0) {
		*xscale = 1 / sx;
		*yscale = 1 / sy;
	}
}

/* Warp options opt with grid_scale's XSCALE and YSCALE, where it has them. */
static char **scale_options(char **opt, double xscale, double yscale)
{
	char v[64];

	if (!(xscale > 0 && yscale > 0))
		return opt;
	snprintf(v, sizeof v, "%.17g", xscale);
	opt = CSLSetNameValue(opt, "XSCALE", v);
	snprintf(v, sizeof v, "%.17g", yscale);
	return CSLSetNameValue(opt, "YSCALE", v);
}

void *cdp_raster_transformer(const cdp_raster_info *src, const cdp_raster_info *g, int tps,
                             char *err, size_t errcap)
{
	rtr *t;

	if (!(t = calloc(1, sizeof *t))) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return NULL;
	}
	if (!(t->gen = gen_transformer(src, g, tps, err, errcap))) {
		free(t);
		return NULL;
	}
	t->spline = tps && ((src && cdp_raster_by_gcps(src)) || cdp_raster_by_gcps(g));
	/* where GCPs or a reprojection bend the grid, GDAL's per-window
	 * estimate varies from tile to tile (a value label's overlapping tiles
	 * disagreed by 0.16); a vector is rasterized, not resampled */
	if (src)
		grid_scale(t->gen, g, &t->xscale, &t->yscale);
	return t;
}

void cdp_raster_transformer_move(void *tr, int64_t x0, int64_t y0)
{
	rtr *t = tr;

	t->x0 = (double)x0;
	t->y0 = (double)y0;
}

int cdp_raster_transform(void *tr, int dst_to_src, int n, double *x, double *y, double *z,
                         int *ok)
{
	rtr *t = tr;
	int r;

	if (dst_to_src)
		for (int i = 0; i < n; i++) {
			x[i] += t->x0;
			y[i] += t->y0;
		}
	r = GDALGenImgProjTransform(t->gen, dst_to_src, n, x, y, z, ok);
	if (!dst_to_src)
		for (int i = 0; i < n; i++) {
			x[i] -= t->x0;
			y[i] -= t->y0;
		}
	return r;
}

int cdp_raster_transformer_spline(const void *tr)
{
	return tr && ((const rtr *)tr)->spline;
}

void cdp_raster_transformer_free(void *tr)
{
	rtr *t = tr;

	if (t) {
		GDALDestroyGenImgProjTransformer(t->gen);
		free(t);
	}
}

/* The warp of cdp_raster_warp and cdp_raster_warp_f32: bands [nb] of src
 * onto the w x h window at (x0, y0) of tr's grid into out (nb, h, w)
 * samples of type gtype, dstnd where nothing covers a pixel. A float
 * source without a nodata value of its own has NaN as one, so that a NaN
 * never enters an interpolation. */
static int warp_into(cdp_raster *src, const int *bands, int nb, void *tr, int64_t x0,
                     int64_t y0, int w, int h, int resample, double max_error,
                     GDALDataType gtype, double dstnd, void *out, char *err, size_t errcap)
{
	static const GDALResampleAlg alg[] = {
		[CDP_RESAMPLE_NEAR] = GRA_NearestNeighbour, [CDP_RESAMPLE_MODE] = GRA_Mode,
		[CDP_RESAMPLE_BILINEAR] = GRA_Bilinear, [CDP_RESAMPLE_CUBIC] = GRA_Cubic,
		[CDP_RESAMPLE_AVERAGE] = GRA_Average,
	};
	GDALDriverH mem = GDALGetDriverByName("MEM");
	GDALDatasetH dst = NULL;
	GDALWarpOptions *wo = NULL;
	GDALWarpOperationH op = NULL;
	void *approx = NULL;
	int hasnd, rc = CDP_EGDAL, isfloat;
	double nd;

	if (!src || !tr || nb < 1 || w < 1 || h < 1 || !(max_error >= 0) ||
	    resample < CDP_RESAMPLE_NEAR || resample > CDP_RESAMPLE_AVERAGE) {
		cdp_raster_set_err(err, errcap, "invalid warp");
		return CDP_EINVAL;
	}
	for (int b = 0; b < nb; b++)
		if (bands[b] < 1 || (uint32_t)bands[b] > src->info.bands) {
			cdp_raster_set_err(err, errcap, "invalid warp");
			return CDP_EINVAL;
		}
	isfloat = src->info.dtype == CDP_DT_F32 || src->info.dtype == CDP_DT_F64;
	/* the destination is only the buffer: the transformer places it */
	cdp_raster_transformer_move(tr, x0, y0);
	CPLErrorReset();
	if (!mem || !(dst = GDALCreate(mem, "", w, h, nb, gtype, NULL)))
		goto gdal;
	/* as gdalwarp does for -et above 0 */
	if (max_error > 0 &&
	    !(approx = GDALCreateApproxTransformer(cdp_raster_transform, tr, max_error)))
		goto gdal;
	wo = GDALCreateWarpOptions();
	wo->eResampleAlg = alg[resample];
	wo->hSrcDS = src->ds;
	wo->hDstDS = dst;
	wo->nBandCount = nb;
	wo->panSrcBands = CPLMalloc(sizeof(int) * (size_t)nb);
	wo->panDstBands = CPLMalloc(sizeof(int) * (size_t)nb);
	wo->padfDstNoDataReal = CPLMalloc(sizeof(double) * (size_t)nb);
	for (int b = 0; b < nb; b++) {
		wo->panSrcBands[b] = bands[b];
		wo->panDstBands[b] = b + 1;
		wo->padfDstNoDataReal[b] = dstnd;
		nd = GDALGetRasterNoDataValue(GDALGetRasterBand(src->ds, bands[b]), &hasnd);
		if (!hasnd && !isfloat)
			continue;
		if (!wo->padfSrcNoDataReal) {
			wo->padfSrcNoDataReal = CPLMalloc(sizeof(double) * (size_t)nb);
			for (int k = 0; k < nb; k++)
				wo->padfSrcNoDataReal[k] = NAN;
		}
		wo->padfSrcNoDataReal[b] = hasnd ? nd : NAN;
	}
	wo->papszWarpOptions = CSLSetNameValue(wo->papszWarpOptions, "INIT_DEST", "NO_DATA");
	wo->papszWarpOptions = scale_options(wo->papszWarpOptions, ((rtr *)tr)->xscale,
	                                     ((rtr *)tr)->yscale);
	wo->pfnTransformer = approx ? GDALApproxTransform : cdp_raster_transform;
	wo->pTransformerArg = approx ? approx : tr;
	if (!(op = GDALCreateWarpOperation(wo)) ||
	    GDALChunkAndWarpImage(op, 0, 0, w, h) != CE_None ||
	    GDALDatasetRasterIO(dst, GF_Read, 0, 0, w, h, out, w, h, gtype, nb, NULL, 0, 0,
	                        0) != CE_None)
		goto gdal;
	rc = CDP_OK;
	goto out;
gdal:
	cdp_raster_gdal_err(err, errcap, "warp failed");
out:
	if (op)
		GDALDestroyWarpOperation(op);
	if (wo) {
		wo->hSrcDS = NULL;   /* not ours to close */
		GDALDestroyWarpOptions(wo);
	}
	if (approx)
		GDALDestroyApproxTransformer(approx);
	if (dst)
		GDALClose(dst);
	return rc;
}

/* A view of src on date 0's grid g (its size, and its geotransform and
 * CRS or its GCPs: cdp_raster_transformer): a GDAL warped VRT, bilinear,
 * with an alpha band after src's bands that is 0 where src does not cover
 * a pixel or holds only its nodata (r->alpha: cdp_raster_read_mask reads
 * it with the bands' own masks). */
static int open_warped(cdp_raster *src, const cdp_raster_info *g, double max_error,
                       int tps, cdp_raster **out, char *err, size_t errcap)
{
	const int nb = (int)src->info.bands;
	GDALWarpOptions *wo = NULL;
	void *tr = NULL, *approx = NULL;
	cdp_raster *r = NULL;
	double gt[6], xscale, yscale;
	int hasnd, rc = CDP_EGDAL;

	*out = NULL;
	/* the VRT's own geotransform (identity for a grid placed by GCPs)
	 * only sizes it: the transformer places its pixels */
	memcpy(gt, g->gt, sizeof gt);
	if (!(r = calloc(1, sizeof *r))) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	/* GDAL's own: the view destroys it as a GDAL transformer */
	if (!(tr = gen_transformer(&src->info, g, tps, err, errcap))) {
		cdp_raster_close(r);
		return CDP_EGDAL;
	}
	CPLErrorReset();
	if (max_error > 0 &&
	    !(approx = GDALCreateApproxTransformer(GDALGenImgProjTransform, tr, max_error)))
		goto gdal;
	if (approx)
		GDALApproxTransformerOwnsSubtransformer(approx, TRUE);
	wo = GDALCreateWarpOptions();
	wo->eResampleAlg = GRA_Bilinear;
	wo->hSrcDS = src->ds;
	wo->nBandCount = nb;
	wo->panSrcBands = CPLMalloc(sizeof(int) * (size_t)nb);
	wo->panDstBands = CPLMalloc(sizeof(int) * (size_t)nb);
	for (int b = 0; b < nb; b++)
		wo->panSrcBands[b] = wo->panDstBands[b] = b + 1;
	wo->nDstAlphaBand = nb + 1;
	if (src->info.has_nodata) {
		wo->padfSrcNoDataReal = CPLMalloc(sizeof(double) * (size_t)nb);
		for (int b = 0; b < nb; b++)
			wo->padfSrcNoDataReal[b] =
			    GDALGetRasterNoDataValue(GDALGetRasterBand(src->ds, b + 1), &hasnd);
	}
	wo->papszWarpOptions = CSLSetNameValue(wo->papszWarpOptions, "INIT_DEST", "0");
	/* the view is read block by block: one kernel for all of them */
	grid_scale(tr, g, &xscale, &yscale);
	wo->papszWarpOptions = scale_options(wo->papszWarpOptions, xscale, yscale);
	wo->pfnTransformer = approx ? GDALApproxTransform : GDALGenImgProjTransform;
	wo->pTransformerArg = approx ? approx : tr;
	/* the view owns the transformer from here on, and a reference to src */
	if (!(r->ds = GDALCreateWarpedVRT(src->ds, (int)g->width, (int)g->height, gt, wo)))
		goto gdal;
	tr = approx = NULL;
	if ((rc = cdp_raster_describe(r, err, errcap)) != CDP_OK)
		goto out;
	r->info.bands = (uint32_t)nb;   /* the alpha band is the mask */
	r->alpha = nb + 1;
	r->info.has_nodata = src->info.has_nodata;
	r->info.nodata = src->info.nodata;
	r->src = src->ds;
	src->ds = NULL;
	*out = r;
	r = NULL;
	rc = CDP_OK;
	goto out;
gdal:
	cdp_raster_gdal_err(err, errcap, "cannot warp");
out:
	if (wo) {
		wo->hSrcDS = NULL;
		GDALDestroyWarpOptions(wo);
	}
	if (approx)
		GDALDestroyApproxTransformer(approx);
	else if (tr)
		GDALDestroyGenImgProjTransformer(tr);
	cdp_raster_close(r);
	return rc;
}

int cdp_raster_open_time(const char *spec, double max_error, int tps, cdp_raster **out,
                         char *err, size_t errcap)
{
	cdp_raster *t = NULL, *d = NULL, *v;
	char *list = NULL, *save = NULL, msg[512];
	int n = 1, rc = CDP_ENOMEM, on;

	*out = NULL;
	for (const char *c = spec; *c; c++)
		n += *c == ',';
	if (n < 2 || n > CDP_RASTER_MAXDATES) {
		snprintf(err, errcap, "'%s': %d dates, need 2 to %d separated by commas",
		         spec, n, CDP_RASTER_MAXDATES);
		return CDP_EINVAL;
	}
	if (!(list = strdup(spec)) || !(t = calloc(1, sizeof *t)) ||
	    !(t->dates = calloc((size_t)n, sizeof *t->dates)))
		goto nomem;
	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if ((rc = cdp_raster_open(p, &d, msg, sizeof msg)) != CDP_OK) {
			snprintf(err, errcap, "cannot open date '%s': %s", p, msg);
			goto fail;
		}
		if (t->ndates > 0) {
			const cdp_raster_info *g = &t->dates[0]->info;
			rc = CDP_EMISMATCH;
			if (d->info.bands != g->bands || d->info.dtype != g->dtype) {
				snprintf(err, errcap, "date '%s' has %u bands of %s, the first date "
				         "%u of %s: every date needs the same bands", p,
				         d->info.bands, cdp_dtype_name(d->info.dtype), g->bands,
				         cdp_dtype_name(g->dtype));
				goto fail;
			}
			if ((on = cdp_raster_same_grid(g, &d->info, msg, sizeof msg)) < 0) {
				if (on == CDP_EFORMAT)
					snprintf(err, errcap, "date '%s': %s", p, msg);
				else
					snprintf(err, errcap, "date '%s' cannot be placed on the "
					         "first date's grid (%s)", p, msg);
				goto fail;
			}
			if (!on) {
				if ((rc = open_warped(d, g, max_error, tps, &v, msg, sizeof msg))) {
					snprintf(err, errcap, "cannot warp date '%s' onto the first "
					         "date's grid: %s", p, msg);
					goto fail;
				}
				cdp_raster_close(d);
				d = v;
			}
		}
		t->dates[t->ndates++] = d;
		d = NULL;
	}
	if (t->ndates != n) {
		snprintf(err, errcap, "'%s': an empty date between commas", spec);
		rc = CDP_EINVAL;
		goto fail;
	}
	t->bpd = t->dates[0]->info.bands;
	if ((uint64_t)t->bpd * (uint64_t)n > UINT32_MAX)
		goto nomem;
	t->info = t->dates[0]->info;
	t->info.bands = t->bpd * (uint32_t)n;
	if (!(t->crs = strdup(t->dates[0]->crs)))
		goto nomem;
	t->info.crs = t->crs;
	free(list);
	*out = t;
	return CDP_OK;
nomem:
	cdp_raster_set_err(err, errcap, "out of memory");
	rc = CDP_ENOMEM;
fail:
	cdp_raster_close(d);
	cdp_raster_close(t);
	free(list);
	return rc;
}

int cdp_raster_dates(const cdp_raster *r)
{
	return r->dates ? r->ndates : 1;
}

void cdp_raster_outline(double w, double h, int steps, double *x, double *y)
{
	for (int i = 0; i < steps; i++) {
		double f = (double)i / steps;
		x[i] = f * w;                 y[i] = 0;
		x[i + steps] = w;             y[i + steps] = f * h;
		x[i + 2 * steps] = w - f * w; y[i + 2 * steps] = h;
		x[i + 3 * steps] = 0;         y[i + 3 * steps] = h - f * h;
	}
}

/* Sample points of overlaps_at on a side, at first: a label the size of
 * a few of the image's pixels is found by refining (up to OVERLAP_MAX). */
#define OVERLAP_FIRST 65
#define OVERLAP_MAX 1025
/* Points along each edge of src's outline: enough that a reprojected
 * edge's bend does not hide a corner of its box on g. */
#define OUTLINE_STEPS 32

/* The pixels of g to sample: columns [x0, x1), rows [y0, y1). */
typedef struct pbox {
	double x0, y0, x1, y1;
} pbox;

/* Whether any of nx x ny pixel centres spread evenly over the box b of
 * g's pixels (its first and last rows and columns among them) lands inside
 * src (sw x sh) when tr moves it back (g's pixel -> ground -> src's
 * pixel), the way the warp decides which pixels src labels: 1 yes, 0 no.
 * *near is set when none does but the box around where they land meets
 * src, so a finer grid might. */
static int overlaps_at(void *tr, const pbox *b, double sw, double sh, int nx, int ny,
                       int *near)
{
	double bw = b->x1 - b->x0, bh = b->y1 - b->y0;
	double lx = INFINITY, hx = -INFINITY, ly = INFINITY, hy = -INFINITY;
	double *x, *y, *z;
	int *ok, hit = 0, m = nx;

	if (!(x = malloc(3 * sizeof *x * (size_t)m)) || !(ok = malloc(sizeof *ok * (size_t)m))) {
		free(x);
		return CDP_ENOMEM;
	}
	y = x + m;
	z = y + m;
	*near = 0;
	for (int r = 0; r < ny && !hit; r++) {
		double py = b->y0 + (ny > 1 ? 0.5 + (bh - 1) * r / (ny - 1) : bh / 2);
		for (int c = 0; c < nx; c++) {
			x[c] = b->x0 + (nx > 1 ? 0.5 + (bw - 1) * c / (nx - 1) : bw / 2);
			y[c] = py;
			z[c] = 0;
		}
		cdp_raster_transform(tr, TRUE, nx, x, y, z, ok);
		for (int c = 0; c < nx; c++) {
			if (!ok[c] || !isfinite(x[c]) || !isfinite(y[c]))
				continue;
			if (x[c] >= 0 && x[c] < sw && y[c] >= 0 && y[c] < sh)
				hit = 1;
			lx = fmin(lx, x[c]);
			hx = fmax(hx, x[c]);
			ly = fmin(ly, y[c]);
			hy = fmax(hy, y[c]);
		}
	}
	free(x);
	free(ok);
	*near = !hit && lx < sw && hx > 0 && ly < sh && hy > 0;
	return hit;
}

/* The box of g's pixels (gw x gh) that src (sw x sh) can cover through
 * tr: src's outline moved onto g, padded by how far the way back misses
 * it (GCPs fit one polynomial each way, and only the way back decides
 * what the warp labels) and a few pixels, and clipped to g. All of g
 * when a point of the outline cannot be moved. 0 when the box is empty. */
static int cover_box(void *tr, double sw, double sh, double gw, double gh, pbox *b)
{
	const int n = 4 * OUTLINE_STEPS;
	double x[4 * OUTLINE_STEPS], y[4 * OUTLINE_STEPS], z[4 * OUTLINE_STEPS];
	double bx[4 * OUTLINE_STEPS], by[4 * OUTLINE_STEPS];
	double miss = 0, pad, scale;
	int ok[4 * OUTLINE_STEPS];

	*b = (pbox){ INFINITY, INFINITY, -INFINITY, -INFINITY };
	cdp_raster_outline(sw, sh, OUTLINE_STEPS, x, y);
	memset(z, 0, sizeof z);
	cdp_raster_transform(tr, FALSE, n, x, y, z, ok);
	for (int i = 0; i < n; i++) {
		if (!ok[i] || !isfinite(x[i]) || !isfinite(y[i])) {
			*b = (pbox){ 0, 0, gw, gh };
			return 1;
		}
		b->x0 = fmin(b->x0, x[i]);
		b->x1 = fmax(b->x1, x[i]);
		b->y0 = fmin(b->y0, y[i]);
		b->y1 = fmax(b->y1, y[i]);
	}
	/* back again: how far, in src's pixels, the way back misses the way
	 * there, as g's pixels (g's pixels per src pixel, the box's) */
	memcpy(bx, x, sizeof bx);
	memcpy(by, y, sizeof by);
	memset(z, 0, sizeof z);
	cdp_raster_transform(tr, TRUE, n, bx, by, z, ok);
	cdp_raster_outline(sw, sh, OUTLINE_STEPS, x, y);
	for (int i = 0; i < n; i++)
		if (ok[i] && isfinite(bx[i]) && isfinite(by[i]))
			miss = fmax(miss, hypot(bx[i] - x[i], by[i] - y[i]));
		else
			miss = INFINITY;
	scale = fmax((b->x1 - b->x0) / sw, (b->y1 - b->y0) / sh);
	pad = 4 + 2 * miss * scale;
	b->x0 = fmax(0, floor(b->x0 - pad));
	b->y0 = fmax(0, floor(b->y0 - pad));
	b->x1 = fmin(gw, ceil(b->x1 + pad));
	b->y1 = fmin(gh, ceil(b->y1 + pad));
	return b->x0 < b->x1 && b->y0 < b->y1;
}

int cdp_raster_overlaps(const cdp_raster *src, const cdp_raster_info *g, void *tr,
                        char *err, size_t errcap)
{
	double sw = (double)src->info.width, sh = (double)src->info.height, bw, bh;
	int n = OVERLAP_FIRST, near = 0, hit, nx, ny;
	pbox b;

	cdp_raster_transformer_move(tr, 0, 0);
	/* only where src can land, so the samples' spacing follows src's
	 * size on g, not g's (a 60-pixel label in a 100000-pixel image) */
	if (!cover_box(tr, sw, sh, (double)g->width, (double)g->height, &b))
		return 0;
	bw = b.x1 - b.x0;
	bh = b.y1 - b.y0;
	for (;;) {
		nx = bw < n ? (int)bw : n;
		ny = bh < n ? (int)bh : n;
		if ((hit = overlaps_at(tr, &b, sw, sh, nx, ny, &near)) < 0) {
			cdp_raster_set_err(err, errcap, "out of memory");
			return hit;
		}
		/* every pixel centre of the box tried: the warp's own answer */
		if (hit || !near || (nx >= bw && ny >= bh))
			return hit;
		/* still around src but on none of it, OVERLAP_MAX a side: what
		 * the warp labels is at most a sliver, and a label the warp takes
		 * pixels from must not be refused (its tiles show the rest) */
		if (n >= OVERLAP_MAX)
			return 1;
		n = 2 * n - 1;
	}
}

/* Equal to a billionth of a pixel. */
int cdp_raster_same_gt(const double a[6], const double b[6])
{
	double pix = 0;

	for (int i = 1; i < 6; i += (i == 2 ? 2 : 1))
		pix = fmax(pix, fmax(fabs(a[i]), fabs(b[i])));
	pix *= 1e-9;
	return fabs(a[0] - b[0]) <= 1e-9 * fmax(fabs(a[0]), fabs(b[0])) + pix &&
	       fabs(a[3] - b[3]) <= 1e-9 * fmax(fabs(a[3]), fabs(b[3])) + pix &&
	       fabs(a[1] - b[1]) <= pix && fabs(a[2] - b[2]) <= pix &&
	       fabs(a[4] - b[4]) <= pix && fabs(a[5] - b[5]) <= pix;
}

int cdp_raster_warp(cdp_raster *src, int band, void *tr, int64_t x0, int64_t y0, int w,
                    int h, int resample, double max_error, int32_t *out, char *err,
                    size_t errcap)
{
	if (resample != CDP_RESAMPLE_NEAR && resample != CDP_RESAMPLE_MODE) {
		cdp_raster_set_err(err, errcap, "invalid warp");
		return CDP_EINVAL;
	}
	return warp_into(src, &band, 1, tr, x0, y0, w, h, resample, max_error, GDT_Int32, -1,
	                 out, err, errcap);
}

int cdp_raster_warp_f32(cdp_raster *src, const int *bands, int nbands, void *tr,
                        int64_t x0, int64_t y0, int w, int h, int resample,
                        double max_error, float *out, char *err, size_t errcap)
{
	if (resample == CDP_RESAMPLE_MODE) {
		cdp_raster_set_err(err, errcap, "invalid warp");
		return CDP_EINVAL;
	}
	return warp_into(src, bands, nbands, tr, x0, y0, w, h, resample, max_error, GDT_Float32,
	                 NAN, out, err, errcap);
}
