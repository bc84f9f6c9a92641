/* cdp_raster.c: the GDAL side of cdp_raster.h.
 *
 * Everything GDAL-specific in cdpool's rasters lives here and in the two
 * files beside it (cdp_raster_impl.h): opening a dataset, mapping its data
 * type onto cdp_dtype, windowed reads of (bands, h, w) blocks, the validity
 * mask, nodata and CRSs here; writing a GeoTIFF through a temporary name in
 * cdp_raster_write.c; transformers and warps between grids in
 * cdp_raster_warp.c. GDAL's own error handler is silenced once; each
 * failure copies CPLGetLastErrorMsg() into the caller's err buffer instead,
 * so lib/ still never prints.
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
#include <ogr_srs_api.h>

#include "cdp_error.h"
#include "cdp_dtype.h"
#include "cdp_raster.h"
#include "cdp_raster_impl.h"


int cdp_raster_gdt(int dt)
{
	switch (dt) {
	case CDP_DT_U8:  return GDT_Byte;
	case CDP_DT_U16: return GDT_UInt16;
	case CDP_DT_I16: return GDT_Int16;
	case CDP_DT_U32: return GDT_UInt32;
	case CDP_DT_I32: return GDT_Int32;
	case CDP_DT_F32: return GDT_Float32;
	case CDP_DT_F64: return GDT_Float64;
	}
	return GDT_Unknown;
}

/* The cdp_dtype of a band, or 0 (with *what naming the GDAL type) when cdpool
 * cannot store it. GDAL before 3.7 reports int8 as Byte with a PIXELTYPE. */
static int dtype_of(GDALRasterBandH b, const char **what)
{
	GDALDataType t = GDALGetRasterDataType(b);
	*what = GDALGetDataTypeName(t);
	switch (t) {
	case GDT_Byte: {
		const char *pt = GDALGetMetadataItem(b, "PIXELTYPE", "IMAGE_STRUCTURE");
		if (pt && strcmp(pt, "SIGNEDBYTE") == 0) {
			*what = "Int8";
			return 0;
		}
		return CDP_DT_U8;
	}
	case GDT_UInt16:  return CDP_DT_U16;
	case GDT_Int16:   return CDP_DT_I16;
	case GDT_UInt32:  return CDP_DT_U32;
	case GDT_Int32:   return CDP_DT_I32;
	case GDT_Float32: return CDP_DT_F32;
	case GDT_Float64: return CDP_DT_F64;
	default:          return 0;
	}
}

/* Copies GDAL's last message (or fallback) into err as one line without a
 * trailing full stop, matching the tools' message style. */
void cdp_raster_gdal_err(char *err, size_t errcap, const char *fallback)
{
	const char *m = CPLGetLastErrorMsg();
	size_t n;

	if (!err || errcap == 0)
		return;
	snprintf(err, errcap, "%s", (m && *m) ? m : fallback);
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	n = strlen(err);
	while (n > 0 && (err[n - 1] == '.' || err[n - 1] == ' '))
		err[--n] = '\0';
}

void cdp_raster_set_err(char *err, size_t errcap, const char *msg)
{
	if (err && errcap)
		snprintf(err, errcap, "%s", msg);
}

/* GDAL block cache until a program sizes it (cdp_raster_cache_fit), unless
 * GDAL_CACHEMAX says otherwise: GDAL's default, 5% of RAM, only fills with
 * blocks that are read once (perf showed a fifth of cdp-tile's time in the
 * kernel zeroing fresh pages), and a cache is never shrunk by its use, so
 * what it grows to stays resident. */
#define CDP_RASTER_CACHE (256 << 20)
/* The least cdp_raster_cache_fit sets: room for GDAL's own small reads
 * (a warp's source windows, an overview's chunks) beside the strips. */
#define CDP_RASTER_CACHE_MIN (16 << 20)

/* 1 when the user set GDAL_CACHEMAX (an empty value counts as unset) */
static int user_cache(void)
{
	const char *v = CPLGetConfigOption("GDAL_CACHEMAX", NULL);

	return v && *v;
}

/* GDAL's messages stay quiet (each failure's is copied into err); a
 * failure met on a full file system is noted as it happens, while errno
 * still says so (or SQLite's text does), for cdp_out_nospace: by the time
 * the caller sees the failure, libtiff has reported whatever failed next
 * ("TIFFAppendToStrip:Seek error") and SQLite has freed its journal. */
static void CPL_STDCALL quiet_handler(CPLErr cls, CPLErrorNum no, const char *msg)
{
	int e = errno;

	(void)no;
	if (cls >= CE_Failure) {
		if (e == ENOSPC || e == EDQUOT)
			cdp_out_note_nospace(e);
		else if (msg && (strstr(msg, "disk is full") || strstr(msg, "No space left on device")))
			cdp_out_note_nospace(ENOSPC);
		else if (msg && strstr(msg, "Disk quota exceeded"))
			cdp_out_note_nospace(EDQUOT);
	}
	errno = e;
}

void cdp_raster_init(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	GDALAllRegister();
	CPLSetErrorHandler(quiet_handler);
	if (!user_cache())
		GDALSetCacheMax64((GIntBig)CDP_RASTER_CACHE);
}

void cdp_raster_cache_fit(uint64_t bytes)
{
	cdp_raster_init();
	if (user_cache())
		return;
	if (bytes < CDP_RASTER_CACHE_MIN)
		bytes = CDP_RASTER_CACHE_MIN;
	if (bytes > (uint64_t)INT64_MAX / 2)
		bytes = (uint64_t)INT64_MAX / 2;
	GDALSetCacheMax64((GIntBig)bytes);
}

/* Bytes of the blocks of dataset ds that a window of `rows` full-width
 * rows spans: every band's (GDAL caches a pixel-interleaved block's bands
 * together, and reads a band-interleaved window band after band), plus the
 * blocks of GDAL's mask where it is a band of its own. */
static uint64_t ds_strip_bytes(GDALDatasetH ds, int rows)
{
	uint64_t sum = 0, W = (uint64_t)GDALGetRasterXSize(ds);
	int nb = GDALGetRasterCount(ds);

	for (int i = 0; i <= nb; i++) {
		GDALRasterBandH b;
		int bw, bh, f;
		uint64_t n, w, h;

		if (i < nb) {
			b = GDALGetRasterBand(ds, i + 1);
		} else {
			/* GDAL's mask of band 1, when it is not derived from nodata */
			if (nb < 1)
				break;
			f = GDALGetMaskFlags(GDALGetRasterBand(ds, 1));
			if (f & (GMF_ALL_VALID | GMF_NODATA))
				break;
			b = GDALGetMaskBand(GDALGetRasterBand(ds, 1));
		}
		GDALGetBlockSize(b, &bw, &bh);
		if (bw < 1 || bh < 1)
			bw = bh = 1;
		/* the block rows a window of `rows` rows touches at any offset */
		n = ((uint64_t)rows + (uint64_t)bh - 1) / (uint64_t)bh + 1;
		w = (W + (uint64_t)bw - 1) / (uint64_t)bw * (uint64_t)bw;
		h = n * (uint64_t)bh;
		sum += w * h * (uint64_t)GDALGetDataTypeSizeBytes(GDALGetRasterDataType(b));
	}
	return sum;
}

uint64_t cdp_raster_strip_bytes(const cdp_raster *r, int rows)
{
	uint64_t sum = 0;

	if (!r || rows < 1)
		return 0;
	for (int d = 0; r->dates && d < r->ndates; d++)
		sum += cdp_raster_strip_bytes(r->dates[d], rows);
	if (r->ds)
		sum += ds_strip_bytes(r->ds, rows);
	/* a warped view reads its source's windows too */
	if (r->src)
		sum += ds_strip_bytes(r->src, rows);
	return sum;
}

/* 0 when in's geotransform is finite, and so are its corners (the
 * geotransform applied to the raster's full extent, as a tile's origin is
 * computed); 1 for a NaN or infinite term (GDAL takes one from a VRT), 2
 * for terms so large that a corner overflows. Either would reach the
 * records' geotransforms and be refused only after the stream has begun. */
static int gt_bad(const cdp_raster_info *in)
{
	const double *g = in->gt, w = (double)in->width, h = (double)in->height;

	for (int i = 0; i < 6; i++)
		if (!isfinite(g[i]))
			return 1;
	for (int c = 0; c < 4; c++) {
		double x = c & 1 ? w : 0, y = c & 2 ? h : 0;
		if (!isfinite(g[0] + x * g[1] + y * g[2]) || !isfinite(g[3] + x * g[4] + y * g[5]))
			return 2;
	}
	return 0;
}

/* Fills r->info and r->crs from r->ds; CDP_OK, or an error with err set. */
int cdp_raster_describe(cdp_raster *r, char *err, size_t errcap)
{
	cdp_raster_info *in = &r->info;
	GDALRasterBandH b1;
	const char *what, *wkt;
	int nb = GDALGetRasterCount(r->ds), bad;

	if (nb < 1) {
		cdp_raster_set_err(err, errcap, "dataset has no raster bands");
		return CDP_EGDAL;
	}
	b1 = GDALGetRasterBand(r->ds, 1);
	in->width = (uint64_t)GDALGetRasterXSize(r->ds);
	in->height = (uint64_t)GDALGetRasterYSize(r->ds);
	in->bands = (uint32_t)nb;
	in->dtype = dtype_of(b1, &what);
	if (!in->dtype) {
		if (err && errcap)
			snprintf(err, errcap, "unsupported data type %s", what);
		return CDP_EUNSUP;
	}
	for (int i = 2; i <= nb; i++) {
		const char *w2;
		if (dtype_of(GDALGetRasterBand(r->ds, i), &w2) != in->dtype) {
			if (err && errcap)
				snprintf(err, errcap, "band %d is %s but band 1 is %s",
				         i, w2, what);
			return CDP_EUNSUP;
		}
	}
	in->nodata = GDALGetRasterNoDataValue(b1, &in->has_nodata);
	if (!in->has_nodata)
		in->nodata = 0;
	in->has_gt = GDALGetGeoTransform(r->ds, in->gt) == CE_None;
	if (!in->has_gt) {
		static const double id[6] = { 0, 1, 0, 0, 0, 1 };
		memcpy(in->gt, id, sizeof(id));
	}
	if (in->has_gt && (bad = gt_bad(in))) {
		char where[96] = "";
		if (bad == 2)
			snprintf(where, sizeof where, " at the corners of the raster's %llux%llu pixels",
			         (unsigned long long)in->width, (unsigned long long)in->height);
		snprintf(err, errcap, "the geotransform (%.15g, %.15g, %.15g, %.15g, %.15g, %.15g) is "
		         "not finite%s", in->gt[0], in->gt[1], in->gt[2], in->gt[3], in->gt[4],
		         in->gt[5], where);
		return CDP_EFORMAT;
	}
	wkt = GDALGetProjectionRef(r->ds);
	r->crs = strdup(wkt ? wkt : "");
	if (!r->crs) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	in->crs = r->crs;
	GDALGetBlockSize(b1, &in->block_w, &in->block_h);
	in->ngcps = GDALGetGCPCount(r->ds);
	wkt = GDALGetGCPProjection(r->ds);
	if (!(r->gcp_crs = strdup(wkt ? wkt : "")) ||
	    (in->ngcps > 0 && !(r->gcps = calloc((size_t)in->ngcps, sizeof *r->gcps)))) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	in->gcp_crs = r->gcp_crs;
	in->gcps = in->ngcps > 0 ? r->gcps : NULL;
	for (int i = 0; i < in->ngcps; i++) {
		const GDAL_GCP *g = GDALGetGCPs(r->ds) + i;
		r->gcps[i] = (cdp_raster_gcp){ g->dfGCPPixel, g->dfGCPLine, g->dfGCPX,
		                               g->dfGCPY, g->dfGCPZ };
		/* GDAL fits through it without a word, and places nothing */
		if (!in->has_gt && !(isfinite(g->dfGCPPixel) && isfinite(g->dfGCPLine) &&
		                     isfinite(g->dfGCPX) && isfinite(g->dfGCPY) &&
		                     isfinite(g->dfGCPZ))) {
			snprintf(err, errcap, "GCP %d of %d ('%s') is not a number: pixel %g, line "
			         "%g, x %g, y %g, z %g", i + 1, in->ngcps,
			         g->pszId ? g->pszId : "", g->dfGCPPixel, g->dfGCPLine, g->dfGCPX,
			         g->dfGCPY, g->dfGCPZ);
			return CDP_EFORMAT;
		}
	}
	return CDP_OK;
}

int cdp_raster_open(const char *path, cdp_raster **out, char *err, size_t errcap)
{
	cdp_raster *r;
	int rc;

	*out = NULL;
	cdp_raster_init();
	r = calloc(1, sizeof(*r));
	if (!r) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	CPLErrorReset();
	r->ds = GDALOpenEx(path, GDAL_OF_RASTER | GDAL_OF_READONLY |
	                   GDAL_OF_VERBOSE_ERROR, NULL, NULL, NULL);
	if (!r->ds) {
		size_t n = strlen(path);
		cdp_raster_gdal_err(err, errcap, "not a raster GDAL can open");
		/* The caller names the file already: drop GDAL's "PATH: " prefix. */
		if (err && errcap && strncmp(err, path, n) == 0 &&
		    strncmp(err + n, ": ", 2) == 0)
			memmove(err, err + n + 2, strlen(err + n + 2) + 1);
		free(r);
		return CDP_EGDAL;
	}
	if ((rc = cdp_raster_describe(r, err, errcap)) != CDP_OK) {
		cdp_raster_close(r);
		return rc;
	}
	*out = r;
	return CDP_OK;
}


const cdp_raster_info *cdp_raster_get_info(const cdp_raster *r)
{
	return &r->info;
}

static int window_ok(const cdp_raster *r, int64_t x, int64_t y, int w, int h,
                     char *err, size_t errcap)
{
	if (x < 0 || y < 0 || w < 1 || h < 1 ||
	    (uint64_t)x + (uint64_t)w > r->info.width ||
	    (uint64_t)y + (uint64_t)h > r->info.height) {
		if (err && errcap)
			snprintf(err, errcap,
			         "window %dx%d at (%lld, %lld) outside the %llux%llu raster",
			         w, h, (long long)x, (long long)y,
			         (unsigned long long)r->info.width,
			         (unsigned long long)r->info.height);
		return CDP_EINVAL;
	}
	return CDP_OK;
}

/* cdp_raster_read of a multi-date input: each stacked band from its date,
 * into (nbands, h, w) samples, one band at a time (GDAL's block cache
 * keeps a pixel-interleaved date's blocks between its bands). */
static int time_read(cdp_raster *r, const int *bands, int nbands, int64_t x,
                     int64_t y, int w, int h, void *buf, char *err, size_t errcap)
{
	size_t plane = (size_t)w * (size_t)h * cdp_dtype_size(r->info.dtype);
	int rc = CDP_OK;

	for (int i = 0; i < nbands && rc == CDP_OK; i++) {
		uint32_t k = (uint32_t)bands[i] - 1;
		int b = (int)(k % r->bpd) + 1;
		rc = cdp_raster_read(r->dates[k / r->bpd], &b, 1, x, y, w, h,
		                     (char *)buf + (size_t)i * plane, err, errcap);
	}
	return rc;
}

/* cdp_raster_read_mask of a multi-date input: a pixel is valid where it is
 * valid in every date (GDAL's mask of the same band of each date: its own
 * nodata or mask, and for a warped date where the warp covers it). */
static int time_read_mask(cdp_raster *r, int band, int64_t x, int64_t y, int w,
                          int h, uint8_t *out, char *err, size_t errcap)
{
	size_t n = (size_t)w * (size_t)h;
	int b = (int)((uint32_t)(band - 1) % r->bpd) + 1, rc;
	uint8_t *m = malloc(n);

	if (!m) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	rc = cdp_raster_read_mask(r->dates[0], b, x, y, w, h, out, err, errcap);
	for (int d = 1; d < r->ndates && rc == CDP_OK; d++) {
		rc = cdp_raster_read_mask(r->dates[d], b, x, y, w, h, m, err, errcap);
		for (size_t p = 0; rc == CDP_OK && p < n; p++)
			out[p] &= m[p];
	}
	free(m);
	return rc;
}

int cdp_raster_read(cdp_raster *r, const int *bands, int nbands, int64_t x,
                    int64_t y, int w, int h, void *buf, char *err, size_t errcap)
{
	int *map, rc;
	GDALDataType t = cdp_raster_gdt(r->info.dtype);
	GSpacing px = GDALGetDataTypeSizeBytes(t);

	rc = window_ok(r, x, y, w, h, err, errcap);
	if (rc)
		return rc;
	if (nbands < 1) {
		cdp_raster_set_err(err, errcap, "no bands to read");
		return CDP_EINVAL;
	}
	for (int i = 0; i < nbands; i++) {
		if (bands[i] < 1 || (uint32_t)bands[i] > r->info.bands) {
			if (err && errcap)
				snprintf(err, errcap, "band %d requested, raster has %u",
				         bands[i], r->info.bands);
			return CDP_EINVAL;
		}
	}
	if (r->dates)
		return time_read(r, bands, nbands, x, y, w, h, buf, err, errcap);
	/* GDAL's band map is not const. */
	map = malloc(sizeof(int) * (size_t)nbands);
	if (!map) {
		cdp_raster_set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	memcpy(map, bands, sizeof(int) * (size_t)nbands);
	CPLErrorReset();
	/* Band-sequential (nbands, h, w), spacings as 64-bit so a wide strip of
	 * many bands does not overflow GDAL's int defaults. */
	if (GDALDatasetRasterIOEx(r->ds, GF_Read, (int)x, (int)y, w, h, buf, w, h,
	                          t, nbands, map, px, px * w, px * w * h,
	                          NULL) != CE_None) {
		cdp_raster_gdal_err(err, errcap, "read failed");
		rc = CDP_EGDAL;
	}
	free(map);
	return rc;
}

int cdp_raster_has_mask(const cdp_raster *r, int band)
{
	GDALRasterBandH b;
	int f;

	if (band < 1 || (uint32_t)band > r->info.bands)
		return 0;
	/* a date's nodata is its own: the caller compares only date 0's */
	for (int d = 0; r->dates && d < r->ndates; d++)
		if (r->dates[d]->info.has_nodata ||
		    cdp_raster_has_mask(r->dates[d], (int)((uint32_t)(band - 1) % r->bpd) + 1))
			return 1;
	if (r->dates)
		return 0;
	if (r->alpha)
		return 1;
	b = GDALGetRasterBand(r->ds, band);
	f = GDALGetMaskFlags(b);
	return !(f & (GMF_ALL_VALID | GMF_NODATA));
}

int cdp_raster_band_nodata(const cdp_raster *r, int band, double *nd)
{
	int has = 0;

	if (band < 1 || (uint32_t)band > r->info.bands)
		return 0;
	if (r->dates)
		return cdp_raster_band_nodata(r->dates[(uint32_t)(band - 1) / r->bpd],
		                              (int)((uint32_t)(band - 1) % r->bpd) + 1, nd);
	*nd = GDALGetRasterNoDataValue(GDALGetRasterBand(r->ds, band), &has);
	return has != 0;
}

/* Whether GDAL's nodata mask of a dt band with nodata nd can match a
 * sample: GDALNoDataMaskBand marks a band all valid when nd lies outside
 * dt's range (GDALIsValueInRange), and casts it to dt otherwise. */
static int nd_reachable(int dt, double nd)
{
	switch (dt) {
	case CDP_DT_U8:  return nd >= 0 && nd <= 255;
	case CDP_DT_U16: return nd >= 0 && nd <= 65535;
	case CDP_DT_I16: return nd >= -32768 && nd <= 32767;
	case CDP_DT_U32: return nd >= 0 && nd <= 4294967295.0;
	case CDP_DT_I32: return nd >= -2147483648.0 && nd <= 2147483647.0;
	case CDP_DT_F32: return isnan(nd) || isinf(nd) || fabs(nd) <= 3.4028234663852886e38;
	default:         return 1;
	}
}

int cdp_raster_dtype_holds(int dt, double v)
{
	if (dt == CDP_DT_F64)
		return 1;
	if (dt == CDP_DT_F32)
		return nd_reachable(dt, v);
	return nd_reachable(dt, v) && v == floor(v);
}

void cdp_raster_mark_nodata(const void *img, int dt, int nb, size_t bstride, size_t rstride,
                            size_t w, size_t h, const double *nd, const int *has, int any,
                            uint8_t *m, size_t mstride)
{
	/* per band: whether it can match, and its nodata as a sample */
	unsigned char *ok = malloc((size_t)nb);
	double *kv = malloc((size_t)nb * sizeof *kv);
	int nok = 0;

	if (!ok || !kv)
		goto out;
	for (int b = 0; b < nb; b++) {
		ok[b] = has[b] && nd_reachable(dt, nd[b]);
		nok += ok[b];
	}
	/* every band must match: one that cannot leaves every pixel valid */
	if (nok == 0 || (!any && nok < nb))
		goto out;
	/* n_: the bands equal to their nodata, up to the first that is not
	 * (every band) or the first that is (any) */
#define MARK(T, EQ) do { \
	const T *s_ = img; \
	T *k_ = (T *)kv; \
	for (int b = 0; b < nb; b++) \
		k_[b] = ok[b] ? (T)nd[b] : 0; \
	for (size_t y = 0; y < h; y++) \
		for (size_t x = 0; x < w; x++) { \
			size_t p_ = y * rstride + x; \
			int n_ = 0, b; \
			for (b = 0; b < nb; b++) { \
				T a = s_[(size_t)b * bstride + p_], v = k_[b]; \
				if (!ok[b]) \
					continue; \
				if ((EQ) ? (n_++, any) : !any) \
					break; \
			} \
			if (any ? n_ > 0 : n_ == nb) \
				m[y * mstride + x] = 0; \
		} \
} while (0)
	switch (dt) {
	case CDP_DT_U8:  MARK(uint8_t, a == v); break;
	case CDP_DT_U16: MARK(uint16_t, a == v); break;
	case CDP_DT_I16: MARK(int16_t, a == v); break;
	case CDP_DT_U32: MARK(uint32_t, a == v); break;
	case CDP_DT_I32: MARK(int32_t, a == v); break;
	case CDP_DT_F32: MARK(float, a == v || (isnan(a) && isnan(v))); break;
	case CDP_DT_F64: MARK(double, a == v || (isnan(a) && isnan(v))); break;
	}
#undef MARK
out:
	free(ok);
	free(kv);
}

int cdp_raster_paletted(const cdp_raster *r)
{
	if (r->dates)
		return cdp_raster_paletted(r->dates[0]);
	return GDALGetRasterColorInterpretation(GDALGetRasterBand(r->ds, 1)) == GCI_PaletteIndex;
}

int cdp_raster_same_gcps(const cdp_raster_info *a, const cdp_raster_info *b, char *why,
                         size_t cap)
{
	const cdp_raster_gcp *g = a->gcps, *k = b->gcps;
	const char *ca = a->gcp_crs, *cb = b->gcp_crs;
	double lo_x = INFINITY, hi_x = -INFINITY, lo_y = INFINITY, hi_y = -INFINITY, tol;
	int n = a->ngcps, same;

	if (n != b->ngcps) {
		snprintf(why, cap, "%d GCPs against %d", n, b->ngcps);
		return 0;
	}
	if (ca[0] && cb[0]) {
		if ((same = cdp_raster_crs_same(ca, cb, why, cap)) <= 0) {
			if (same == 0) {
				char x[128], y[128];
				cdp_raster_crs_name(ca, x, sizeof x);
				cdp_raster_crs_name(cb, y, sizeof y);
				snprintf(why, cap, "GCPs in CRS %s against %s", x, y);
			}
			return same;
		}
	} else if (!ca[0] != !cb[0]) {
		snprintf(why, cap, "GCPs with a CRS against GCPs without one");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		lo_x = fmin(lo_x, g[i].x);
		hi_x = fmax(hi_x, g[i].x);
		lo_y = fmin(lo_y, g[i].y);
		hi_y = fmax(hi_y, g[i].y);
	}
	/* GCPs at one point have no spread: compare to a millionth of a unit */
	tol = 1e-6 * fmax(fmax(hi_x - lo_x, hi_y - lo_y), 1);
	for (int i = 0; i < n; i++)
		if (fabs(g[i].pixel - k[i].pixel) > 1e-3 || fabs(g[i].line - k[i].line) > 1e-3 ||
		    fabs(g[i].x - k[i].x) > tol || fabs(g[i].y - k[i].y) > tol) {
			snprintf(why, cap, "GCP %d is pixel %.6g line %.6g at (%.10g, %.10g) "
			         "against pixel %.6g line %.6g at (%.10g, %.10g)", i + 1,
			         g[i].pixel, g[i].line, g[i].x, g[i].y, k[i].pixel, k[i].line,
			         k[i].x, k[i].y);
			return 0;
		}
	return 1;
}

int cdp_raster_gcps_agree(const cdp_raster_info *g, const cdp_raster_info *r, char *why,
                          size_t cap)
{
	/* a raster with no georeference (a mask saved from an array) has
	 * nothing to say against the other's, as a missing CRS has not */
	if (g->ngcps == 0 && !g->crs[0] && !g->gcp_crs[0])
		return 1;
	if (r->ngcps == 0 && !r->crs[0] && !r->gcp_crs[0])
		return 1;
	return cdp_raster_same_gcps(g, r, why, cap);
}

int cdp_raster_same_grid(const cdp_raster_info *g, const cdp_raster_info *r, char *why,
                         size_t cap)
{
	int same;

	if (!g->has_gt || !r->has_gt) {
		if (g->has_gt == r->has_gt && g->width == r->width && g->height == r->height) {
			if ((same = cdp_raster_gcps_agree(g, r, why, cap)) > 0)
				return 1;
			if (same < 0)
				return CDP_EFORMAT;
		}
		if (cdp_raster_placed(g) && cdp_raster_placed(r))
			return 0;
		snprintf(why, cap, "%s", cdp_raster_placed(g) || cdp_raster_placed(r)
		         ? "one of them has neither a geotransform nor GCPs"
		         : "another size, and no georeference on either");
		return CDP_EMISMATCH;
	}
	if (g->width != r->width || g->height != r->height || !cdp_raster_same_gt(g->gt, r->gt))
		return 0;
	/* a side without a CRS (a mask saved with only the geotransform) has
	 * nothing to contradict the other's */
	if (!g->crs[0] || !r->crs[0])
		return 1;
	if ((same = cdp_raster_crs_same(g->crs, r->crs, why, cap)) < 0)
		return CDP_EFORMAT;
	return same;
}

const char *cdp_raster_category_name(const cdp_raster *r, int band, int k)
{
	char **names;

	if (band < 1 || (uint32_t)band > r->info.bands || k < 0)
		return NULL;
	if (r->dates)
		return cdp_raster_category_name(r->dates[0], (int)((uint32_t)(band - 1) % r->bpd) + 1, k);
	names = GDALGetRasterCategoryNames(GDALGetRasterBand(r->ds, band));
	if (!names || k >= CSLCount(names) || !*names[k])
		return NULL;
	return names[k];
}

const char *cdp_raster_metadata(const cdp_raster *r, const char *key)
{
	if (r && r->dates)
		return cdp_raster_metadata(r->dates[0], key);
	return r && key ? GDALGetMetadataItem(r->ds, key, NULL) : NULL;
}

int cdp_raster_read_mask(cdp_raster *r, int band, int64_t x, int64_t y, int w,
                         int h, uint8_t *out, char *err, size_t errcap)
{
	GDALRasterBandH m;
	size_t n = (size_t)w * (size_t)h;
	int rc = window_ok(r, x, y, w, h, err, errcap);

	if (rc)
		return rc;
	if (band < 1 || (uint32_t)band > r->info.bands) {
		if (err && errcap)
			snprintf(err, errcap, "band %d requested, raster has %u",
			         band, r->info.bands);
		return CDP_EINVAL;
	}
	if (r->dates)
		return time_read_mask(r, band, x, y, w, h, out, err, errcap);
	CPLErrorReset();
	m = GDALGetMaskBand(GDALGetRasterBand(r->ds, band));
	if (!m || GDALRasterIO(m, GF_Read, (int)x, (int)y, w, h, out, w, h,
	                       GDT_Byte, 0, 0) != CE_None) {
		cdp_raster_gdal_err(err, errcap, "mask read failed");
		return CDP_EGDAL;
	}
	/* a warp's coverage that GDAL's mask of the band is not already */
	if (r->alpha && !(GDALGetMaskFlags(GDALGetRasterBand(r->ds, band)) & GMF_ALPHA)) {
		uint8_t *a = malloc(n);
		if (!a) {
			cdp_raster_set_err(err, errcap, "out of memory");
			return CDP_ENOMEM;
		}
		if (GDALRasterIO(GDALGetRasterBand(r->ds, r->alpha), GF_Read, (int)x, (int)y, w,
		                 h, a, w, h, GDT_Byte, 0, 0) != CE_None) {
			cdp_raster_gdal_err(err, errcap, "mask read failed");
			free(a);
			return CDP_EGDAL;
		}
		for (size_t i = 0; i < n; i++)
			out[i] = a[i] ? out[i] : 0;
		free(a);
	}
	/* Alpha masks carry 1..255 for partly opaque pixels: all count as valid. */
	for (size_t i = 0; i < n; i++)
		out[i] = out[i] ? 255 : 0;
	return CDP_OK;
}

int cdp_raster_files(const cdp_raster *r, int (*fn)(const char *path, void *arg), void *arg)
{
	char **list;
	int rc = CDP_OK;

	if (!r || !fn || (!r->ds && !r->dates))
		return CDP_EINVAL;
	for (int d = 0; r->dates && d < r->ndates && rc == CDP_OK; d++)
		rc = cdp_raster_files(r->dates[d], fn, arg);
	if (r->dates)
		return rc;
	/* a warped view's own list is only its VRT: its source's files are read */
	list = GDALGetFileList(r->src ? r->src : r->ds);
	for (char **f = list; f && *f && rc == CDP_OK; f++)
		rc = fn(*f, arg);
	CSLDestroy(list);
	return rc;
}

void cdp_raster_close(cdp_raster *r)
{
	if (!r)
		return;
	if (r->ds)
		GDALClose(r->ds);
	/* after the warped view, which releases its own reference */
	if (r->src)
		GDALClose(r->src);
	for (int d = 0; r->dates && d < r->ndates; d++)
		cdp_raster_close(r->dates[d]);
	free(r->dates);
	free(r->crs);
	free(r->gcps);
	free(r->gcp_crs);
	free(r);
}

int cdp_raster_crs_same(const char *a, const char *b, char *err, size_t errcap)
{
	OGRSpatialReferenceH x = OSRNewSpatialReference(NULL), y = OSRNewSpatialReference(NULL);
	int rc = -1;

	if (!x || !y) {
		snprintf(err, errcap, "out of memory");
	} else if (OSRSetFromUserInput(x, a) != OGRERR_NONE) {
		snprintf(err, errcap, "the first CRS does not parse");
	} else if (OSRSetFromUserInput(y, b) != OGRERR_NONE) {
		snprintf(err, errcap, "the second CRS does not parse");
	} else {
		rc = OSRIsSame(x, y) ? 1 : 0;
	}
	if (x)
		OSRDestroySpatialReference(x);
	if (y)
		OSRDestroySpatialReference(y);
	return rc;
}

void cdp_raster_crs_name(const char *wkt, char *out, size_t cap)
{
	OGRSpatialReferenceH s;
	const char *auth, *code, *name;

	snprintf(out, cap, "unknown");
	if (!wkt || !*wkt || !(s = OSRNewSpatialReference(NULL)))
		return;
	if (OSRSetFromUserInput(s, wkt) == OGRERR_NONE) {
		OSRAutoIdentifyEPSG(s);
		auth = OSRGetAuthorityName(s, NULL);
		code = OSRGetAuthorityCode(s, NULL);
		name = OSRGetName(s);
		if (auth && code)
			snprintf(out, cap, "%s:%s", auth, code);
		else if (name && *name)
			snprintf(out, cap, "'%s'", name);
	}
	OSRDestroySpatialReference(s);
}

void cdp_raster_pixel_size(const double gt[6], double *x, double *y)
{
	*x = hypot(gt[1], gt[4]);
	*y = hypot(gt[2], gt[5]);
}

int cdp_raster_open_lut(cdp_raster *src, const int32_t *lut, size_t nlut,
                        cdp_raster **out, char *err, size_t errcap)
{
	const char *path = GDALGetDescription(src->ds);
	const double *g = src->info.gt;
	const int bygcp = cdp_raster_by_gcps(&src->info);
	char *epath = NULL, *ewkt = NULL, *xml = NULL;
	size_t cap, len;
	int rc = CDP_ENOMEM;

	*out = NULL;
	if (src->info.dtype != CDP_DT_U8 && src->info.dtype != CDP_DT_U16) {
		cdp_raster_set_err(err, errcap, "not a u8 or u16 raster");
		return CDP_EINVAL;
	}
	if (nlut > (src->info.dtype == CDP_DT_U8 ? 256u : 65536u))
		nlut = src->info.dtype == CDP_DT_U8 ? 256u : 65536u;
	epath = CPLEscapeString(path, -1, CPLES_XML);
	ewkt = CPLEscapeString(bygcp ? src->gcp_crs : src->crs, -1, CPLES_XML);
	/* "v:id," is at most 19 bytes, a GCP's element at most 200 */
	cap = 1024 + (epath ? strlen(epath) : 0) + (ewkt ? strlen(ewkt) : 0) + 20 * (nlut + 1) +
	      (bygcp ? 200 * (size_t)src->info.ngcps : 0);
	if (!epath || !ewkt || !(xml = malloc(cap)))
		goto out;
	len = (size_t)snprintf(xml, cap, "<VRTDataset rasterXSize=\"%llu\" rasterYSize=\"%llu\">",
	                       (unsigned long long)src->info.width,
	                       (unsigned long long)src->info.height);
	/* the view is placed as src is, so that it warps as src would */
	if (bygcp) {
		len += (size_t)snprintf(xml + len, cap - len, "<GCPList Projection=\"%s\">", ewkt);
		for (int i = 0; i < src->info.ngcps; i++) {
			const cdp_raster_gcp *k = &src->gcps[i];
			len += (size_t)snprintf(xml + len, cap - len, "<GCP Pixel=\"%.17g\" "
			                        "Line=\"%.17g\" X=\"%.17g\" Y=\"%.17g\" "
			                        "Z=\"%.17g\"/>", k->pixel, k->line, k->x, k->y, k->z);
		}
		len += (size_t)snprintf(xml + len, cap - len, "</GCPList>");
	} else
		len += (size_t)snprintf(xml + len, cap - len, "<SRS>%s</SRS><GeoTransform>"
		                        "%.17g,%.17g,%.17g,%.17g,%.17g,%.17g</GeoTransform>",
		                        ewkt, g[0], g[1], g[2], g[3], g[4], g[5]);
	len += (size_t)snprintf(xml + len, cap - len,
	    "<VRTRasterBand dataType=\"Int32\" band=\"1\"><NoDataValue>-1</NoDataValue>"
	    "<ComplexSource><SourceFilename relativeToVRT=\"0\">%s</SourceFilename>"
	    "<SourceBand>1</SourceBand>", epath);
	if (src->info.has_nodata)
		len += (size_t)snprintf(xml + len, cap - len, "<NODATA>%.17g</NODATA>",
		                        src->info.nodata);
	/* every value listed, so the LUT's interpolation never acts */
	len += (size_t)snprintf(xml + len, cap - len, "<LUT>");
	for (size_t v = 0; v < nlut; v++)
		len += (size_t)snprintf(xml + len, cap - len, "%zu:%d,", v, (int)lut[v]);
	len += (size_t)snprintf(xml + len, cap - len, "%zu:0</LUT></ComplexSource>"
	                        "</VRTRasterBand></VRTDataset>", nlut);
	rc = cdp_raster_open(xml, out, err, errcap);
out:
	if (rc == CDP_ENOMEM)
		cdp_raster_set_err(err, errcap, "out of memory");
	CPLFree(epath);
	CPLFree(ewkt);
	free(xml);
	return rc;
}

const char *cdp_raster_grid_crs(const cdp_raster_info *i)
{
	return cdp_raster_by_gcps(i) ? i->gcp_crs : i->crs;
}

int cdp_raster_placed(const cdp_raster_info *i)
{
	return i->has_gt || i->ngcps > 0;
}

int cdp_raster_by_gcps(const cdp_raster_info *i)
{
	return !i->has_gt && i->ngcps > 0;
}

const char *cdp_raster_version(void)
{
	return "GDAL: " GDAL_RELEASE_NAME;
}
