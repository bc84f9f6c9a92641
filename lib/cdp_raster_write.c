/* cdp_raster_write.c: GeoTIFFs from cdpool (cdp_raster.h's writers). A
 * file is written under a temporary name in its folder (cdp_out.h) and
 * renamed over the target only once GDAL has closed it whole: its
 * georeference (a geotransform, GCPs or RPCs copied from a source raster,
 * moved to the window written), its bands' descriptions, scales and
 * photometric interpretation, its nodata and its internal mask.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>

#include "cdp_error.h"
#include "cdp_dtype.h"
#include "cdp_out.h"
#include "cdp_raster.h"
#include "cdp_raster_impl.h"

/* Gives ds an internal per-dataset mask holding mask (h, w): inside the
 * TIFF, not a .msk side-car, so the one renamed file carries it. */
static int write_mask(GDALDatasetH ds, int w, int h, const uint8_t *mask, char *err,
                      size_t errcap)
{
	const char *was = CPLGetThreadLocalConfigOption("GDAL_TIFF_INTERNAL_MASK", NULL);
	char *old = was ? CPLStrdup(was) : NULL;
	CPLErr e;

	CPLSetThreadLocalConfigOption("GDAL_TIFF_INTERNAL_MASK", "YES");
	e = GDALCreateDatasetMaskBand(ds, GMF_PER_DATASET);
	CPLSetThreadLocalConfigOption("GDAL_TIFF_INTERNAL_MASK", old);
	CPLFree(old);
	if (e != CE_None) {
		cdp_raster_gdal_err(err, errcap, "cannot create the mask band");
		return CDP_EGDAL;
	}
	if (GDALRasterIO(GDALGetMaskBand(GDALGetRasterBand(ds, 1)), GF_Write, 0, 0, w, h,
	                 (void *)mask, w, h, GDT_Byte, 0, 0) != CE_None) {
		cdp_raster_gdal_err(err, errcap, "cannot write the mask");
		return CDP_EGDAL;
	}
	return CDP_OK;
}

/* src's RPCs onto ds, the window at (x0, y0) scaled down by scale: the
 * offsets and scales of lines and samples are in src's pixels, the rest
 * (latitude, longitude, height and the coefficients) in the ground's. */
static int set_rpc(GDALDatasetH src, GDALDatasetH ds, int64_t x0, int64_t y0, double scale)
{
	static const struct { const char *key; int off, y; } px[] = {
		{ "LINE_OFF", 1, 1 }, { "SAMP_OFF", 1, 0 }, { "LINE_SCALE", 0, 1 },
		{ "SAMP_SCALE", 0, 0 },
	};
	char **md = CSLDuplicate(GDALGetMetadata(src, "RPC")), num[64];
	CPLErr e;

	if (!md)
		return CDP_OK;
	for (size_t i = 0; i < sizeof px / sizeof *px; i++) {
		const char *v = CSLFetchNameValue(md, px[i].key);
		double d;
		if (!v)
			continue;
		d = CPLAtof(v);
		if (px[i].off)
			d -= (double)(px[i].y ? y0 : x0);
		snprintf(num, sizeof num, "%.17g", d / scale);
		md = CSLSetNameValue(md, px[i].key, num);
	}
	e = GDALSetMetadata(ds, md, "RPC");
	CSLDestroy(md);
	return e == CE_None ? CDP_OK : CDP_EGDAL;
}

int cdp_raster_georef_to(const cdp_raster *src, void *ds, int64_t x0, int64_t y0,
                         double scale, char *err, size_t errcap)
{
	const cdp_raster_info *in;
	GDAL_GCP *gc;
	char none[1] = "";
	CPLErr e = CE_None;

	if (src->dates)
		return cdp_raster_georef_to(src->dates[0], ds, x0, y0, scale, err, errcap);
	in = &src->info;
	CPLErrorReset();
	if (cdp_raster_by_gcps(in)) {
		if (!(gc = calloc((size_t)in->ngcps, sizeof *gc))) {
			cdp_raster_set_err(err, errcap, "out of memory");
			return CDP_ENOMEM;
		}
		for (int i = 0; i < in->ngcps; i++)
			gc[i] = (GDAL_GCP){ none, none, (in->gcps[i].pixel - (double)x0) / scale,
			                    (in->gcps[i].line - (double)y0) / scale, in->gcps[i].x,
			                    in->gcps[i].y, in->gcps[i].z };
		e = GDALSetGCPs(ds, in->ngcps, gc, in->gcp_crs);
		free(gc);
	}
	/* a warped date's view has none: its source's are for its grid */
	if (e != CE_None || (src->ds && !src->src &&
	                     set_rpc(src->ds, ds, x0, y0, scale) != CDP_OK)) {
		cdp_raster_gdal_err(err, errcap, "cannot set the georeference");
		return CDP_EGDAL;
	}
	return CDP_OK;
}

/* What a written GeoTIFF is georeferenced by: a geotransform gt (or
 * NULL) in CRS wkt, and src's GCPs and RPCs (cdp_raster_georef_to) of
 * the window at (x0, y0) when src is not NULL. */
typedef struct georef {
	const double *gt;
	const char *wkt;
	const cdp_raster *src;
	int64_t x0, y0;
} georef;

static int set_georef(GDALDatasetH ds, const georef *g, char *err, size_t errcap)
{
	double t[6];
	CPLErr e = CE_None;

	if (g->gt) {
		memcpy(t, g->gt, sizeof t);
		e = GDALSetGeoTransform(ds, t);
		if (e == CE_None && g->wkt && *g->wkt)
			e = GDALSetProjection(ds, g->wkt);
	}
	if (e != CE_None) {
		cdp_raster_gdal_err(err, errcap, "cannot set the georeference");
		return CDP_EGDAL;
	}
	return g->src ? cdp_raster_georef_to(g->src, ds, g->x0, g->y0, 1, err, errcap) : CDP_OK;
}

/* Band `band` of r (a multi-date input's: its date's band; a warped
 * date's: its source's, which holds what describes the band). */
static GDALRasterBandH band_of(const cdp_raster *r, int band)
{
	if (r->dates)
		return band_of(r->dates[(uint32_t)(band - 1) / r->bpd],
		               (int)((uint32_t)(band - 1) % r->bpd) + 1);
	return GDALGetRasterBand(r->src ? r->src : r->ds, band);
}

static GDALColorInterp band_ci(const cdp_raster *r, int band)
{
	return GDALGetRasterColorInterpretation(band_of(r, band));
}

int cdp_raster_band_alpha(const cdp_raster *r, int band)
{
	return band_ci(r, band) == GCI_AlphaBand;
}

/* What tells the values of bands [nbands] of src, onto ds's bands as
 * gdal_translate keeps it: scale and offset (a VRT's <Scale> and
 * <Offset> too), unit and description. */
static int band_meta(GDALDatasetH ds, const cdp_raster *src, const int *bands, int nbands)
{
	for (int i = 0; i < nbands; i++) {
		GDALRasterBandH s = band_of(src, bands[i]), d = GDALGetRasterBand(ds, i + 1);
		const char *unit = GDALGetRasterUnitType(s), *desc = GDALGetDescription(s);
		int has_scale, has_off;
		double scale = GDALGetRasterScale(s, &has_scale), off = GDALGetRasterOffset(s, &has_off);

		if ((has_scale && scale != 1 && GDALSetRasterScale(d, scale) != CE_None) ||
		    (has_off && off != 0 && GDALSetRasterOffset(d, off) != CE_None) ||
		    (unit && *unit && GDALSetRasterUnitType(d, unit) != CE_None))
			return CDP_EGDAL;
		if (desc && *desc)
			GDALSetDescription(d, desc);
	}
	return CDP_OK;
}

/* GTiff creation options that give a file of nbands written from bands
 * [nbands] of src the colours of those bands, as gdal_translate keeps
 * them: RGB where they start with red, green and blue, and the band after
 * those (or after the first) an alpha band only where src's is one. GTiff
 * left to itself makes 3 or 4 bands of Byte RGB and the 4th alpha, so a
 * near infrared band hid its zeros from every reader as transparency.
 * src NULL: grey bands, none alpha. */
static char **photometric(const cdp_raster *src, const int *bands, int nbands)
{
	char **co;
	int rgb = 0, extra = 1;

	if (src && bands && nbands >= 3 && band_ci(src, bands[0]) == GCI_RedBand &&
	    band_ci(src, bands[1]) == GCI_GreenBand && band_ci(src, bands[2]) == GCI_BlueBand) {
		rgb = 1;
		extra = 3;
	}
	co = CSLSetNameValue(NULL, "PHOTOMETRIC", rgb ? "RGB" : "MINISBLACK");
	if (src && bands && nbands > extra && band_ci(src, bands[extra]) == GCI_AlphaBand)
		co = CSLSetNameValue(co, "ALPHA", "YES");
	return co;
}

static int write_tif(cdp_out *o, int dtype, int nbands, int w, int h, const void *buf,
                     const uint8_t *mask, const georef *geo, const cdp_raster *src,
                     const int *bands, int as_src, const int *has_nodata,
                     const double *nodata, char *err, size_t errcap)
{
	char **co = NULL;
	GDALDriverH drv;
	GDALDatasetH ds = NULL;
	GDALDataType t = cdp_raster_gdt(dtype);
	GSpacing px;
	int rc = CDP_OK;

	cdp_raster_init();
	if (!o || !o->tmp || t == GDT_Unknown || nbands < 1 || w < 1 || h < 1) {
		cdp_raster_set_err(err, errcap, "invalid data type or shape");
		return CDP_EINVAL;
	}
	px = GDALGetDataTypeSizeBytes(t);
	drv = GDALGetDriverByName("GTiff");
	if (!drv) {
		cdp_raster_set_err(err, errcap, "GDAL has no GTiff driver");
		return CDP_EGDAL;
	}
	/* GDAL writes the policy's temporary by name */
	cdp_out_close(o);
	CPLErrorReset();
	co = photometric(src, bands, nbands);
	ds = GDALCreate(drv, o->tmp, w, h, nbands, t, co);
	CSLDestroy(co);
	if (!ds) {
		cdp_raster_gdal_err(err, errcap, "cannot create GeoTIFF");
		rc = CDP_EGDAL;
		goto out;
	}
	if ((rc = set_georef(ds, geo, err, errcap)) != CDP_OK)
		goto out;
	if (src && bands && as_src && band_meta(ds, src, bands, nbands) != CDP_OK) {
		cdp_raster_gdal_err(err, errcap, "cannot set the bands' scale, offset or unit");
		rc = CDP_EGDAL;
		goto out;
	}
	for (int i = 1; has_nodata && i <= nbands; i++) {
		if (has_nodata[i - 1] &&
		    GDALSetRasterNoDataValue(GDALGetRasterBand(ds, i), nodata[i - 1]) != CE_None) {
			cdp_raster_gdal_err(err, errcap, "cannot set the nodata value");
			rc = CDP_EGDAL;
			goto out;
		}
	}
	if (GDALDatasetRasterIOEx(ds, GF_Write, 0, 0, w, h, (void *)buf, w, h, t,
	                          nbands, NULL, px, px * w, px * w * h,
	                          NULL) != CE_None) {
		cdp_raster_gdal_err(err, errcap, "write failed");
		rc = CDP_EGDAL;
		goto out;
	}
	if (mask && (rc = write_mask(ds, w, h, mask, err, errcap)))
		goto out;
	/* GDALClose returns nothing before GDAL 3.7: write errors that surface
	 * while flushing show up as the last error instead. */
	CPLErrorReset();
	GDALClose(ds);
	ds = NULL;
	if (CPLGetLastErrorType() >= CE_Failure) {
		cdp_raster_gdal_err(err, errcap, "write failed");
		rc = CDP_EGDAL;
	}
out:
	if (ds)
		GDALClose(ds);
	/* libtiff reports a full disk as whatever it failed next
	 * ("TIFFRewriteDirectory: Error fetching directory count") */
	if (rc != CDP_OK && cdp_out_nospace(o, NULL)) {
		rc = cdp_out_nospace(o, NULL);
		cdp_raster_set_err(err, errcap, strerror(rc));
	}
	return rc;
}

int cdp_raster_write_tif_out(cdp_out *o, int dtype, int nbands, int w, int h,
                             const void *buf, const uint8_t *mask, const cdp_raster *src,
                             const int *bands, int as_src, int64_t x0, int64_t y0,
                             const int *has_nodata, const double *nodata, char *err,
                             size_t errcap)
{
	const cdp_raster_info *in = &src->info;
	const double *g = in->gt;
	/* the window's origin: where its pixel (0, 0) lies */
	const double gt[6] = { g[0] + (double)x0 * g[1] + (double)y0 * g[2], g[1], g[2],
	                       g[3] + (double)x0 * g[4] + (double)y0 * g[5], g[4], g[5] };
	georef geo = { in->has_gt ? gt : NULL, in->crs, src, x0, y0 };

	return write_tif(o, dtype, nbands, w, h, buf, mask, &geo, src, bands, as_src,
	                 has_nodata, nodata, err, errcap);
}

int cdp_raster_write_tif(const char *path, int dtype, int nbands, int w, int h,
                         const void *buf, const double gt[6], const char *wkt,
                         int has_nodata, double nodata, char *err, size_t errcap)
{
	georef geo = { gt, wkt, NULL, 0, 0 };
	cdp_out o;
	int rc, *has = calloc((size_t)(nbands > 0 ? nbands : 1), sizeof *has);
	double *nd = malloc((size_t)(nbands > 0 ? nbands : 1) * sizeof *nd);

	if (!has || !nd) {
		free(has);
		free(nd);
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	for (int b = 0; b < nbands; b++) {
		has[b] = has_nodata;
		nd[b] = nodata;
	}
	if ((rc = cdp_out_open(&o, path, CDP_OUT_SEEK | CDP_OUT_NOFD | CDP_OUT_AUX, 0666, NULL,
	                       0)) != CDP_OK) {
		free(has);
		free(nd);
		cdp_raster_set_err(err, errcap, cdp_strerror(rc));
		return rc;
	}
	rc = write_tif(&o, dtype, nbands, w, h, buf, NULL, &geo, NULL, NULL, 0, has, nd, err,
	               errcap);
	free(has);
	free(nd);
	if (rc == CDP_OK && (rc = cdp_out_commit(&o, NULL, 0)) != CDP_OK)
		cdp_raster_set_err(err, errcap, cdp_strerror(rc));
	if (rc != CDP_OK)
		cdp_out_abort(&o);
	return rc;
}
