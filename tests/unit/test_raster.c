/* test_raster.c: cdp_raster.h against GDAL.
 *
 * Rasters are written with cdp_raster_write_tif (or GDAL directly where the
 * API has no way to make them: masks, alpha, missing geotransforms, types
 * cdpool refuses) into a temporary directory, then opened and read back:
 * info fields, windows in every dtype, band subsets, the validity mask, and
 * the errors for bad windows, missing files, non-rasters and unsupported
 * types. cdp_raster_transformer relates a geotransform and GCPs that encode
 * it (both ways, a window's offset, one fit moved from window to window,
 * the spline, a vector's coordinates).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cpl_conv.h>
#include <gdal.h>
#include <gdal_alg.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_raster.h"
#include "tap.h"

#define WKT "GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\"," \
	"6378137,298.257223563]],PRIMEM[\"Greenwich\",0]," \
	"UNIT[\"degree\",0.0174532925199433]]"

static char dir[256];

static const char *tmp(const char *name)
{
	return tap_path(dir, name);
}

/* A (3, 5, 7) u16 raster with distinct samples, nodata 7 in band 1 at (2,1). */
static void test_roundtrip(void)
{
	enum { C = 3, H = 5, W = 7 };
	uint16_t px[C * H * W], got[C * H * W], sub[2 * 2 * 3];
	uint8_t m[H * W];
	const double gt[6] = { 500000, 10, 0, 6000000, 0, -10 };
	const cdp_raster_info *in;
	cdp_raster *r = NULL;
	char err[256];
	int ok = 1;

	for (int i = 0; i < C * H * W; i++)
		px[i] = (uint16_t)(1000 + i);
	px[1 * W + 2] = 7;
	CHECK_RC(cdp_raster_write_tif(tmp("u16.tif"), CDP_DT_U16, C, W, H, px, gt,
	                              WKT, 1, 7, err, sizeof(err)), CDP_OK);
	CHECK_RC(cdp_raster_open(tmp("u16.tif"), &r, err, sizeof(err)), CDP_OK);
	if (!r)
		return;
	in = cdp_raster_get_info(r);
	CHECK(in->width == W && in->height == H && in->bands == C,
	      "shape %llux%llux%u", (unsigned long long)in->width,
	      (unsigned long long)in->height, in->bands);
	CHECK(in->dtype == CDP_DT_U16, "dtype %d", in->dtype);
	CHECK(in->has_nodata && in->nodata == 7, "nodata %d %g", in->has_nodata,
	      in->nodata);
	CHECK(in->has_gt && memcmp(in->gt, gt, sizeof(gt)) == 0, "geotransform");
	CHECK(strstr(in->crs, "WGS") != NULL, "crs '%s'", in->crs);
	CHECK(in->block_w > 0 && in->block_h > 0, "block %dx%d", in->block_w,
	      in->block_h);

	CHECK_RC(cdp_raster_read(r, (const int[]){ 1, 2, 3 }, 3, 0, 0, W, H, got,
	                         err, sizeof(err)), CDP_OK);
	CHECK(memcmp(got, px, sizeof(px)) == 0, "whole raster differs");
	/* bands 3 and 1, the 3x2 window at column 4, row 2: (2, 2, 3) */
	CHECK_RC(cdp_raster_read(r, (const int[]){ 3, 1 }, 2, 4, 2, 3, 2, sub, err,
	                         sizeof(err)), CDP_OK);
	for (int b = 0; b < 2; b++)
		for (int y = 0; y < 2; y++)
			for (int x = 0; x < 3; x++)
				ok &= sub[(b * 2 + y) * 3 + x] ==
				      px[((b ? 0 : 2) * H + 2 + y) * W + 4 + x];
	CHECK(ok, "window of bands 3,1 differs");

	/* Nodata only: the mask is GDAL's nodata mask, which callers skip. */
	CHECK(cdp_raster_has_mask(r, 1) == 0, "nodata mask counted as real");
	CHECK_RC(cdp_raster_read_mask(r, 1, 0, 0, W, H, m, err, sizeof(err)),
	         CDP_OK);
	CHECK(m[1 * W + 2] == 0 && m[0] == 255 && m[H * W - 1] == 255,
	      "mask %d %d %d", m[1 * W + 2], m[0], m[H * W - 1]);

	err[0] = '\0';
	CHECK_RC(cdp_raster_read(r, (const int[]){ 1 }, 1, 5, 0, 3, 1, got, err,
	                         sizeof(err)), CDP_EINVAL);
	CHECK(strstr(err, "outside") != NULL, "window error '%s'", err);
	CHECK_RC(cdp_raster_read(r, (const int[]){ 4 }, 1, 0, 0, 1, 1, got, err,
	                         sizeof(err)), CDP_EINVAL);
	CHECK(strstr(err, "band 4") != NULL, "band error '%s'", err);
	CHECK_RC(cdp_raster_read(r, (const int[]){ 1 }, 1, -1, 0, 1, 1, got, err,
	                         sizeof(err)), CDP_EINVAL);
	CHECK_RC(cdp_raster_read_mask(r, 1, 0, 4, W, 2, m, err, sizeof(err)),
	         CDP_EINVAL);
	cdp_raster_close(r);
}

/* Every supported dtype survives write + read unchanged, NaN nodata too. */
static void test_dtypes(void)
{
	const double gt[6] = { 0, 1, 0, 0, 0, -1 };
	double vals[6] = { 0, 1, 100, 200, 3, 42 };
	char err[256];

	for (int dt = CDP_DT_U8; dt <= CDP_DT_F64; dt++) {
		size_t sz = cdp_dtype_size(dt);
		unsigned char buf[6 * 8], got[6 * 8];
		cdp_raster *r = NULL;
		int isf = dt == CDP_DT_F32 || dt == CDP_DT_F64;

		for (int i = 0; i < 6; i++) {
			double v = vals[i] - (dt == CDP_DT_I16 || dt == CDP_DT_I32 ||
			                      isf ? 50 : 0) + (isf ? 0.25 : 0);
			switch (dt) {
			case CDP_DT_U8:  buf[i] = (uint8_t)v; break;
			case CDP_DT_U16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
			case CDP_DT_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
			case CDP_DT_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
			case CDP_DT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
			case CDP_DT_F32: ((float *)buf)[i] = (float)v; break;
			case CDP_DT_F64: ((double *)buf)[i] = v; break;
			}
		}
		CHECK_RC(cdp_raster_write_tif(tmp("dt.tif"), dt, 2, 3, 1, buf, gt, "",
		                              isf, NAN, err, sizeof(err)), CDP_OK);
		CHECK_RC(cdp_raster_open(tmp("dt.tif"), &r, err, sizeof(err)), CDP_OK);
		if (!r)
			continue;
		CHECK(cdp_raster_get_info(r)->dtype == dt, "dtype %d read as %d", dt,
		      cdp_raster_get_info(r)->dtype);
		CHECK(cdp_raster_get_info(r)->has_nodata == isf &&
		      (!isf || isnan(cdp_raster_get_info(r)->nodata)),
		      "dtype %d nodata", dt);
		CHECK(cdp_raster_get_info(r)->crs[0] == '\0', "crs not empty");
		CHECK_RC(cdp_raster_read(r, (const int[]){ 1, 2 }, 2, 0, 0, 3, 1, got,
		                         err, sizeof(err)), CDP_OK);
		CHECK(memcmp(got, buf, 6 * sz) == 0, "dtype %d samples differ", dt);
		cdp_raster_close(r);
	}
}

/* Rasters only GDAL itself can make: a per-dataset mask, alpha, no
 * geotransform. */
static void test_masks(void)
{
	GDALDriverH drv = GDALGetDriverByName("GTiff");
	GDALDatasetH ds;
	uint8_t px[4 * 3], valid[4 * 3], m[4 * 3];
	cdp_raster *r = NULL;
	char err[256];

	for (int i = 0; i < 12; i++) {
		px[i] = (uint8_t)(i + 1);
		valid[i] = i % 5 ? 255 : 0;
	}
	ds = GDALCreate(drv, tmp("mask.tif"), 4, 3, 1, GDT_Byte, NULL);
	CHECK(ds != NULL, "GDALCreate");
	if (!ds)
		return;
	CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 4, 3, px, 4,
	                   3, GDT_Byte, 0, 0) == CE_None, "write");
	CHECK(GDALCreateDatasetMaskBand(ds, GMF_PER_DATASET) == CE_None, "mask");
	CHECK(GDALRasterIO(GDALGetMaskBand(GDALGetRasterBand(ds, 1)), GF_Write, 0,
	                   0, 4, 3, valid, 4, 3, GDT_Byte, 0, 0) == CE_None,
	      "mask write");
	GDALClose(ds);
	CHECK_RC(cdp_raster_open(tmp("mask.tif"), &r, err, sizeof(err)), CDP_OK);
	if (r) {
		CHECK(cdp_raster_has_mask(r, 1) == 1, "per-dataset mask missed");
		CHECK(!cdp_raster_get_info(r)->has_gt &&
		      cdp_raster_get_info(r)->gt[1] == 1 &&
		      cdp_raster_get_info(r)->gt[5] == 1, "identity geotransform");
		CHECK_RC(cdp_raster_read_mask(r, 1, 1, 1, 3, 2, m, err, sizeof(err)),
		         CDP_OK);
		for (int y = 0; y < 2; y++)
			for (int x = 0; x < 3; x++)
				CHECK(m[y * 3 + x] == valid[(1 + y) * 4 + 1 + x],
				      "mask (%d,%d) %d", x, y, m[y * 3 + x]);
		cdp_raster_close(r);
	}

	/* An alpha band: partly transparent (1..254) counts as valid. */
	ds = GDALCreate(drv, tmp("alpha.tif"), 4, 3, 2, GDT_Byte,
	                (char *[]){ "ALPHA=YES", NULL });
	CHECK(ds != NULL, "GDALCreate alpha");
	if (!ds)
		return;
	for (int i = 0; i < 12; i++)
		valid[i] = (uint8_t)(i % 3 == 0 ? 0 : i * 20);
	CHECK(GDALRasterIO(GDALGetRasterBand(ds, 2), GF_Write, 0, 0, 4, 3, valid,
	                   4, 3, GDT_Byte, 0, 0) == CE_None, "alpha write");
	GDALClose(ds);
	CHECK_RC(cdp_raster_open(tmp("alpha.tif"), &r, err, sizeof(err)), CDP_OK);
	if (r) {
		CHECK(cdp_raster_has_mask(r, 1) == 1, "alpha mask missed");
		CHECK_RC(cdp_raster_read_mask(r, 1, 0, 0, 4, 3, m, err, sizeof(err)),
		         CDP_OK);
		for (int i = 0; i < 12; i++)
			CHECK(m[i] == (i % 3 == 0 ? 0 : 255), "alpha mask %d: %d", i, m[i]);
		cdp_raster_close(r);
	}
}

static void test_errors(void)
{
	GDALDriverH drv = GDALGetDriverByName("GTiff");
	GDALDatasetH ds;
	cdp_raster *r = (cdp_raster *)1;
	char err[256];
	FILE *f;
	DIR *d;
	struct dirent *e;
	int leftovers = 0;

	err[0] = '\0';
	CHECK_RC(cdp_raster_open(tmp("missing.tif"), &r, err, sizeof(err)),
	         CDP_EGDAL);
	CHECK(r == NULL, "handle set on failure");
	CHECK(strstr(err, "No such file") != NULL, "missing file: '%s'", err);

	f = fopen(tmp("text.tif"), "w");
	CHECK(f != NULL, "fopen");
	if (f) {
		fputs("this is not a raster\n", f);
		fclose(f);
	}
	err[0] = '\0';
	CHECK_RC(cdp_raster_open(tmp("text.tif"), &r, err, sizeof(err)),
	         CDP_EGDAL);
	CHECK(err[0] != '\0' && err[strlen(err) - 1] != '.', "not a raster: '%s'",
	      err);

	ds = GDALCreate(drv, tmp("cplx.tif"), 2, 2, 1, GDT_CInt16, NULL);
	GDALClose(ds);
	CHECK_RC(cdp_raster_open(tmp("cplx.tif"), &r, err, sizeof(err)),
	         CDP_EUNSUP);
	CHECK(strstr(err, "CInt16") != NULL, "complex: '%s'", err);
	ds = GDALCreate(drv, tmp("i8.tif"), 2, 2, 1, GDT_Byte,
	                (char *[]){ "PIXELTYPE=SIGNEDBYTE", NULL });
	GDALClose(ds);
	CHECK_RC(cdp_raster_open(tmp("i8.tif"), &r, err, sizeof(err)), CDP_EUNSUP);
	CHECK(strstr(err, "Int8") != NULL, "int8: '%s'", err);

	/* A VRT whose bands disagree in type. */
	f = fopen(tmp("mixed.vrt"), "w");
	CHECK(f != NULL, "fopen vrt");
	if (f) {
		fprintf(f, "<VRTDataset rasterXSize=\"2\" rasterYSize=\"2\">\n"
		        "<VRTRasterBand dataType=\"Byte\" band=\"1\"/>\n"
		        "<VRTRasterBand dataType=\"Float32\" band=\"2\"/>\n"
		        "</VRTDataset>\n");
		fclose(f);
	}
	CHECK_RC(cdp_raster_open(tmp("mixed.vrt"), &r, err, sizeof(err)),
	         CDP_EUNSUP);
	CHECK(strstr(err, "band 2") != NULL, "mixed types: '%s'", err);

	/* A write into a missing directory fails with its errno, and a good
	 * write leaves no temporary file behind. */
	CHECK(cdp_raster_write_tif(tmp("nodir/x.tif"), CDP_DT_U8, 1, 1, 1, "a",
	                           (const double[]){ 0, 1, 0, 0, 0, 1 }, "", 0, 0,
	                           err, sizeof(err)) > 0, "write into missing dir");
	CHECK_RC(cdp_raster_write_tif(tmp("x.tif"), 99, 1, 1, 1, "a",
	                              (const double[]){ 0, 1, 0, 0, 0, 1 }, "", 0,
	                              0, err, sizeof(err)), CDP_EINVAL);
	d = opendir(dir);
	while (d && (e = readdir(d)))
		leftovers += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	CHECK(leftovers == 0, "%d temporary files left", leftovers);
}

/* cdp_raster_strip_bytes against a count by hand, and cdp_raster_cache_fit
 * leaving a user's GDAL_CACHEMAX alone. */
static void test_cache(void)
{
	GDALDriverH drv = GDALGetDriverByName("GTiff");
	GDALDatasetH ds;
	cdp_raster *r = NULL;
	char err[256];

	/* 100x70, 3 bands u16 in 32x32 tiles: a strip of 40 rows touches at
	 * most 3 rows of blocks, each 128 (4 blocks) wide, of all 3 bands */
	ds = GDALCreate(drv, tmp("tiled.tif"), 100, 70, 3, GDT_UInt16,
	                (char *[]){ "TILED=YES", "BLOCKXSIZE=32", "BLOCKYSIZE=32", NULL });
	CHECK(ds != NULL, "GDALCreate tiled");
	if (!ds)
		return;
	GDALClose(ds);
	CHECK_RC(cdp_raster_open(tmp("tiled.tif"), &r, err, sizeof(err)), CDP_OK);
	if (r) {
		CHECK(cdp_raster_strip_bytes(r, 40) == 3 * 32 * 128 * 3 * 2, "strip of 40: %llu",
		      (unsigned long long)cdp_raster_strip_bytes(r, 40));
		CHECK(cdp_raster_strip_bytes(r, 32) == 2 * 32 * 128 * 3 * 2, "strip of 32: %llu",
		      (unsigned long long)cdp_raster_strip_bytes(r, 32));
		CHECK(cdp_raster_strip_bytes(r, 0) == 0, "strip of 0");
		cdp_raster_close(r);
	}

	cdp_raster_cache_fit(0);
	CHECK(GDALGetCacheMax64() == 16 << 20, "floor: %lld", (long long)GDALGetCacheMax64());
	cdp_raster_cache_fit(100 << 20);
	CHECK(GDALGetCacheMax64() == 100 << 20, "fit: %lld", (long long)GDALGetCacheMax64());
	CPLSetConfigOption("GDAL_CACHEMAX", "64");
	cdp_raster_cache_fit(0);
	CHECK(GDALGetCacheMax64() == 100 << 20, "GDAL_CACHEMAX overridden: %lld",
	      (long long)GDALGetCacheMax64());
	CPLSetConfigOption("GDAL_CACHEMAX", NULL);
}

/* cdp_raster_mark_nodata over a window of rows with strides, the form
 * cdp-tile and cdp-predict pass a strip in: a (2, 3, 6) u16 image, a
 * window of 3 rows of 4 at column 1, into a mask of stride 5. Pixels
 * outside the window and the mask's padding are left alone; with
 * `any` one band at its nodata suffices, else both must be. */
static void test_mark_nodata(void)
{
	enum { NB = 2, H = 3, RS = 6, W = 4, MS = 5 };
	uint16_t img[NB * H * RS];
	const double nd[NB] = { 9, 7 };
	const int has[NB] = { 1, 1 };
	uint8_t m[H * MS];

	for (int i = 0; i < NB * H * RS; i++)
		img[i] = 1;
	/* (row, col): (0,1) both bands, (1,4) band 0 only, (2,2) band 1
	 * only, (2,0) both but left of the window */
	img[0 * RS + 1] = 9, img[H * RS + 0 * RS + 1] = 7;
	img[1 * RS + 4] = 9;
	img[H * RS + 2 * RS + 2] = 7;
	img[2 * RS + 0] = 9, img[H * RS + 2 * RS + 0] = 7;
	for (int any = 0; any <= 1; any++) {
		int bad = 0;

		memset(m, 255, sizeof m);
		cdp_raster_mark_nodata(img + 1, CDP_DT_U16, NB, H * RS, RS, W, H, nd, has, any,
		                       m, MS);
		for (int y = 0; y < H; y++)
			for (int x = 0; x < MS; x++) {
				int c = x + 1, hit = (y == 0 && c == 1) ||
				        (any && ((y == 1 && c == 4) || (y == 2 && c == 2)));
				int want = x < W && hit ? 0 : 255;

				bad += m[y * MS + x] != want;
			}
		CHECK(bad == 0, "any=%d: %d mask bytes wrong", any, bad);
	}
}

/* Pixel (x, y) through tr forward: CHECK that it lands on (ex, ey). */
static void moved(void *tr, double x, double y, double ex, double ey, const char *what)
{
	double z = 0;
	int ok = 0;

	cdp_raster_transform(tr, FALSE, 1, &x, &y, &z, &ok);
	CHECK(ok && fabs(x - ex) < 1e-6 && fabs(y - ey) < 1e-6, "%s: (%.9g, %.9g), want "
	      "(%g, %g)", what, x, y, ex, ey);
}

static void test_transformer(void)
{
	static const double fr[5][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }, { .5, .5 } };
	cdp_raster_gcp k[5];
	cdp_raster_info a = { .width = 96, .height = 64, .has_gt = 1,
	                      .gt = { 500000, 10, 0, 5800000, 0, -10 }, .crs = WKT,
	                      .gcp_crs = "" };
	cdp_raster_info b = a, none = a;
	char err[256];
	void *tr;

	/* b: a's pixels placed by GCPs at its corners and centre, no geotransform */
	for (int i = 0; i < 5; i++)
		k[i] = (cdp_raster_gcp){ fr[i][0] * 96, fr[i][1] * 64, 500000 + fr[i][0] * 960,
		                         5800000 - fr[i][1] * 640, 0 };
	b.has_gt = 0;
	b.crs = "";
	b.ngcps = 5;
	b.gcps = k;
	b.gcp_crs = WKT;
	CHECK(cdp_raster_placed(&b) && !strcmp(cdp_raster_grid_crs(&b), WKT), "b is placed");
	for (int tps = 0; tps < 2; tps++) {
		tr = cdp_raster_transformer(&a, &b, tps, err, sizeof err);
		CHECK(tr != NULL, "a to b's window: %s", err);
		if (tr) {
			cdp_raster_transformer_move(tr, 5, 3);
			double x = -1.5, y = 4.25, z = 0;
			int ok = 0;
			moved(tr, 3.5, 7.25, -1.5, 4.25, tps ? "a to b (tps)" : "a to b");
			/* and back, through the same window */
			cdp_raster_transform(tr, 1, 1, &x, &y, &z, &ok);
			CHECK(ok && fabs(x - 3.5) < 1e-6 && fabs(y - 7.25) < 1e-6,
			      "b's window to a: (%g, %g)", x, y);
			/* one fit serves every window: moved to another */
			cdp_raster_transformer_move(tr, 0, 0);
			moved(tr, 3.5, 7.25, 3.5, 7.25, "a to b's window (0, 0)");
			cdp_raster_transformer_move(tr, 40, 20);
			moved(tr, 3.5, 7.25, -36.5, -12.75, "a to b's window (40, 20)");
		}
		cdp_raster_transformer_free(tr);
		tr = cdp_raster_transformer(&b, &a, tps, err, sizeof err);
		CHECK(tr != NULL, "b to a: %s", err);
		if (tr)
			moved(tr, 90.25, 1.5, 90.25, 1.5, tps ? "b to a (tps)" : "b to a");
		cdp_raster_transformer_free(tr);
	}
	/* a vector's coordinates, in b's CRS */
	tr = cdp_raster_transformer(NULL, &b, 0, err, sizeof err);
	CHECK(tr != NULL, "coordinates to b: %s", err);
	if (tr) {
		cdp_raster_transformer_move(tr, 0, 2);
		moved(tr, 500035, 5799927.5, 3.5, 5.25, "coordinates to b's window");
	}
	cdp_raster_transformer_free(tr);
	none.has_gt = 0;
	CHECK(!cdp_raster_placed(&none) &&
	      cdp_raster_transformer(&a, &none, 0, err, sizeof err) == NULL &&
	      strstr(err, "neither a geotransform nor GCPs"), "unplaced: '%s'", err);
}

/* A 60x60-pixel label (120x120 pixels of half the size) inside a
 * 100000-pixel-square image, between the image's pixel centres that a
 * grid over the whole image samples at 1025 a side, and the same label
 * just beside the image: cdp_raster_overlaps finds the first and not the
 * second, with the image placed by a geotransform and by GCPs. */
static void test_overlaps(void)
{
	enum { L = 120, G = 100000 };
	static uint8_t px[L * L];
	static const double fr[5][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }, { .5, .5 } };
	const double d = 0.001;   /* the image's pixel, in degrees */
	cdp_raster_gcp k[5];
	cdp_raster_info g = { .width = G, .height = G, .has_gt = 1,
	                      .gt = { -50, d, 0, 50, 0, -d }, .crs = WKT, .gcp_crs = "" };
	cdp_raster_info byg = g;
	cdp_raster *r;
	char err[256];

	for (int i = 0; i < 5; i++)
		k[i] = (cdp_raster_gcp){ fr[i][0] * G, fr[i][1] * G, -50 + fr[i][0] * G * d,
		                         50 - fr[i][1] * G * d, 0 };
	byg.has_gt = 0;
	byg.crs = "";
	byg.ngcps = 5;
	byg.gcps = k;
	byg.gcp_crs = WKT;
	memset(px, 1, sizeof px);
	for (int beside = 0; beside <= 1; beside++) {
		/* at the image's pixels (10, 10) to (70, 70), or (-65, 10) to (-5, 70) */
		const double lgt[6] = { -50 + (beside ? -65 : 10) * d, d / 2, 0, 50 - 10 * d, 0,
		                        -d / 2 };
		const char *name = beside ? "beside.tif" : "inside.tif";

		r = NULL;
		CHECK_RC(cdp_raster_write_tif(tmp(name), CDP_DT_U8, 1, L, L, px, lgt, WKT, 0, 0, err,
		                              sizeof err), CDP_OK);
		CHECK_RC(cdp_raster_open(tmp(name), &r, err, sizeof err), CDP_OK);
		for (int gcp = 0; r && gcp <= 1; gcp++) {
			const cdp_raster_info *img = gcp ? &byg : &g;
			void *tr = cdp_raster_transformer(cdp_raster_get_info(r), img, 0, err,
			                                  sizeof err);
			int got;

			CHECK(tr != NULL, "%s onto the image: %s", name, err);
			if (!tr)
				continue;
			got = cdp_raster_overlaps(r, img, tr, err, sizeof err);
			CHECK(got == !beside, "%s on the image placed by %s: overlaps %d", name,
			      gcp ? "GCPs" : "a geotransform", got);
			cdp_raster_transformer_free(tr);
		}
		cdp_raster_close(r);
	}
}

int main(void)
{
	if (tap_tmpdir(dir, sizeof dir, "test_raster"))
		return 99;
	cdp_raster_init();
	test_roundtrip();
	test_dtypes();
	test_masks();
	test_errors();
	test_cache();
	test_mark_nodata();
	test_transformer();
	test_overlaps();
	tap_tmpdir_remove(dir);
	return tap_done();
}
