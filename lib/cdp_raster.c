/* cdp_raster.c: the GDAL side of cdp_raster.h.
 *
 * Everything GDAL-specific in cdpool lives here: opening a dataset, mapping
 * its data type onto cdp_dtype, windowed reads of (bands, h, w) blocks, the
 * validity mask, and writing a GeoTIFF through a temporary name. GDAL's own
 * error handler is silenced once; each failure copies CPLGetLastErrorMsg()
 * into the caller's err buffer instead, so lib/ still never prints.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct cdp_raster {
	GDALDatasetH ds;
	cdp_raster_info info;
	char *crs;
	cdp_raster_gcp *gcps;       /* [info.ngcps] */
	char *gcp_crs;
	/* a warped view (cdp_raster_open_time's later dates): ds is a
	 * VRTWarpedDataset over src, which holds its own reference to src */
	GDALDatasetH src;
	/* a multi-date input: ds is NULL and the bands are the dates' bands
	 * stacked, date d's band b (1-based) being band d * bpd + b */
	cdp_raster **dates;
	int ndates;
	uint32_t bpd;
	/* a warped view's alpha band (0 where the warp covers nothing), past
	 * its data bands; 0 for any other raster. GDAL takes a trailing alpha
	 * band for the mask only of 2 or 4 bands of Byte or UInt16, so it is
	 * read as the coverage explicitly. */
	int alpha;
};

static int gdt_of(int dt)
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
static void gdal_err(char *err, size_t errcap, const char *fallback)
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

static void set_err(char *err, size_t errcap, const char *msg)
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

/* Fills r->info and r->crs from r->ds; CDP_OK, or an error with err set. */
static int describe(cdp_raster *r, char *err, size_t errcap)
{
	cdp_raster_info *in = &r->info;
	GDALRasterBandH b1;
	const char *what, *wkt;
	int nb = GDALGetRasterCount(r->ds);

	if (nb < 1) {
		set_err(err, errcap, "dataset has no raster bands");
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
	wkt = GDALGetProjectionRef(r->ds);
	r->crs = strdup(wkt ? wkt : "");
	if (!r->crs) {
		set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	in->crs = r->crs;
	GDALGetBlockSize(b1, &in->block_w, &in->block_h);
	in->ngcps = GDALGetGCPCount(r->ds);
	wkt = GDALGetGCPProjection(r->ds);
	if (!(r->gcp_crs = strdup(wkt ? wkt : "")) ||
	    (in->ngcps > 0 && !(r->gcps = calloc((size_t)in->ngcps, sizeof *r->gcps)))) {
		set_err(err, errcap, "out of memory");
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
		set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	CPLErrorReset();
	r->ds = GDALOpenEx(path, GDAL_OF_RASTER | GDAL_OF_READONLY |
	                   GDAL_OF_VERBOSE_ERROR, NULL, NULL, NULL);
	if (!r->ds) {
		size_t n = strlen(path);
		gdal_err(err, errcap, "not a raster GDAL can open");
		/* The caller names the file already: drop GDAL's "PATH: " prefix. */
		if (err && errcap && strncmp(err, path, n) == 0 &&
		    strncmp(err + n, ": ", 2) == 0)
			memmove(err, err + n + 2, strlen(err + n + 2) + 1);
		free(r);
		return CDP_EGDAL;
	}
	if ((rc = describe(r, err, errcap)) != CDP_OK) {
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
		set_err(err, errcap, "out of memory");
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
	GDALDataType t = gdt_of(r->info.dtype);
	GSpacing px = GDALGetDataTypeSizeBytes(t);

	rc = window_ok(r, x, y, w, h, err, errcap);
	if (rc)
		return rc;
	if (nbands < 1) {
		set_err(err, errcap, "no bands to read");
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
		set_err(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	memcpy(map, bands, sizeof(int) * (size_t)nbands);
	CPLErrorReset();
	/* Band-sequential (nbands, h, w), spacings as 64-bit so a wide strip of
	 * many bands does not overflow GDAL's int defaults. */
	if (GDALDatasetRasterIOEx(r->ds, GF_Read, (int)x, (int)y, w, h, buf, w, h,
	                          t, nbands, map, px, px * w, px * w * h,
	                          NULL) != CE_None) {
		gdal_err(err, errcap, "read failed");
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
		gdal_err(err, errcap, "mask read failed");
		return CDP_EGDAL;
	}
	/* a warp's coverage that GDAL's mask of the band is not already */
	if (r->alpha && !(GDALGetMaskFlags(GDALGetRasterBand(r->ds, band)) & GMF_ALPHA)) {
		uint8_t *a = malloc(n);
		if (!a) {
			set_err(err, errcap, "out of memory");
			return CDP_ENOMEM;
		}
		if (GDALRasterIO(GDALGetRasterBand(r->ds, r->alpha), GF_Read, (int)x, (int)y, w,
		                 h, a, w, h, GDT_Byte, 0, 0) != CE_None) {
			gdal_err(err, errcap, "mask read failed");
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
		gdal_err(err, errcap, "cannot create the mask band");
		return CDP_EGDAL;
	}
	if (GDALRasterIO(GDALGetMaskBand(GDALGetRasterBand(ds, 1)), GF_Write, 0, 0, w, h,
	                 (void *)mask, w, h, GDT_Byte, 0, 0) != CE_None) {
		gdal_err(err, errcap, "cannot write the mask");
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
			set_err(err, errcap, "out of memory");
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
		gdal_err(err, errcap, "cannot set the georeference");
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
		gdal_err(err, errcap, "cannot set the georeference");
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
	GDALDataType t = gdt_of(dtype);
	GSpacing px;
	int rc = CDP_OK;

	cdp_raster_init();
	if (!o || !o->tmp || t == GDT_Unknown || nbands < 1 || w < 1 || h < 1) {
		set_err(err, errcap, "invalid data type or shape");
		return CDP_EINVAL;
	}
	px = GDALGetDataTypeSizeBytes(t);
	drv = GDALGetDriverByName("GTiff");
	if (!drv) {
		set_err(err, errcap, "GDAL has no GTiff driver");
		return CDP_EGDAL;
	}
	/* GDAL writes the policy's temporary by name */
	cdp_out_close(o);
	CPLErrorReset();
	co = photometric(src, bands, nbands);
	ds = GDALCreate(drv, o->tmp, w, h, nbands, t, co);
	CSLDestroy(co);
	if (!ds) {
		gdal_err(err, errcap, "cannot create GeoTIFF");
		rc = CDP_EGDAL;
		goto out;
	}
	if ((rc = set_georef(ds, geo, err, errcap)) != CDP_OK)
		goto out;
	if (src && bands && as_src && band_meta(ds, src, bands, nbands) != CDP_OK) {
		gdal_err(err, errcap, "cannot set the bands' scale, offset or unit");
		rc = CDP_EGDAL;
		goto out;
	}
	for (int i = 1; has_nodata && i <= nbands; i++) {
		if (has_nodata[i - 1] &&
		    GDALSetRasterNoDataValue(GDALGetRasterBand(ds, i), nodata[i - 1]) != CE_None) {
			gdal_err(err, errcap, "cannot set the nodata value");
			rc = CDP_EGDAL;
			goto out;
		}
	}
	if (GDALDatasetRasterIOEx(ds, GF_Write, 0, 0, w, h, (void *)buf, w, h, t,
	                          nbands, NULL, px, px * w, px * w * h,
	                          NULL) != CE_None) {
		gdal_err(err, errcap, "write failed");
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
		gdal_err(err, errcap, "write failed");
		rc = CDP_EGDAL;
	}
out:
	if (ds)
		GDALClose(ds);
	/* libtiff reports a full disk as whatever it failed next
	 * ("TIFFRewriteDirectory: Error fetching directory count") */
	if (rc != CDP_OK && cdp_out_nospace(o, NULL)) {
		rc = cdp_out_nospace(o, NULL);
		set_err(err, errcap, strerror(rc));
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
		set_err(err, errcap, "out of memory");
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
		set_err(err, errcap, cdp_strerror(rc));
		return rc;
	}
	rc = write_tif(&o, dtype, nbands, w, h, buf, NULL, &geo, NULL, NULL, 0, has, nd, err,
	               errcap);
	free(has);
	free(nd);
	if (rc == CDP_OK && (rc = cdp_out_commit(&o, NULL, 0)) != CDP_OK)
		set_err(err, errcap, cdp_strerror(rc));
	if (rc != CDP_OK)
		cdp_out_abort(&o);
	return rc;
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
		set_err(err, errcap, "not a u8 or u16 raster");
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
		set_err(err, errcap, "out of memory");
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
		set_err(err, errcap, "neither a geotransform nor GCPs place the pixels");
		return NULL;
	}
	if ((src && !(sp = georef_proxy(src))) || !(gp = georef_proxy(g))) {
		gdal_err(err, errcap, "out of memory");
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
		gdal_err(err, errcap, "cannot relate the grids");
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
		set_err(err, errcap, "out of memory");
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
		set_err(err, errcap, "invalid warp");
		return CDP_EINVAL;
	}
	for (int b = 0; b < nb; b++)
		if (bands[b] < 1 || (uint32_t)bands[b] > src->info.bands) {
			set_err(err, errcap, "invalid warp");
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
	gdal_err(err, errcap, "warp failed");
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
		set_err(err, errcap, "out of memory");
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
	if ((rc = describe(r, err, errcap)) != CDP_OK)
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
	gdal_err(err, errcap, "cannot warp");
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
	set_err(err, errcap, "out of memory");
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
			set_err(err, errcap, "out of memory");
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
		set_err(err, errcap, "invalid warp");
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
		set_err(err, errcap, "invalid warp");
		return CDP_EINVAL;
	}
	return warp_into(src, bands, nbands, tr, x0, y0, w, h, resample, max_error, GDT_Float32,
	                 NAN, out, err, errcap);
}

const char *cdp_raster_version(void)
{
	return "GDAL: " GDAL_RELEASE_NAME;
}
