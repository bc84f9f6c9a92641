/* predict_out.c: cdp-predict's outputs through GDAL: the GeoTIFF written
 * row by row (a striped, deflate-compressed file, so rows go out in order
 * and no block is rewritten), the GeoPackage or GeoJSON of polygons and
 * the PNG preview. Every file, scratch copies included, is written under the
 * output policy's temporary names (cdp_out.h), and cdp_predict_run renames
 * the finished outputs together at the end.
 *
 * The class map or probabilities (pr_out_layout) are then copied into
 * their final layout, 256x256 tiles with overviews or a COG, because a
 * tiled file written a strip at a time would recompress each row of tiles
 * once per strip: the striped file is a scratch copy, removed at the end.
 * The colour table and attribute table travel with the copy; the category
 * names are set on the copy (GDAL keeps them, like the attribute table, in
 * FILE.aux.xml, which is renamed with the file). */
#include "predict_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>

#include "cdp_png.h"
#include "cdp_error.h"
#include "cdp_out.h"

struct pr_out {
	GDALDatasetH ds;
	char *path;
	cdp_out rows;            /* the striped file GDAL writes row by row */
	cdp_out fin;             /* the laid-out copy (pr_out_finish), with a layout */
	int w, h, nb, f32;
	int reg;                 /* pr_out_regression: float32 values of targets */
	const pr_legend *lg;     /* pr_out_layout: the final layout, else NULL */
	int cog;
	int done;                /* pr_out_finish succeeded */
};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *gdal_msg(void)
{
	const char *m = CPLGetLastErrorMsg();
	return m && *m ? m : "GDAL error";
}

/* "VERB 'path': " with GDAL's reason, or "cannot write 'path': No space
 * left on device" for the full file system that libtiff and SQLite report
 * as whatever failed next ("TIFFAppendToStrip:Seek error", "database or
 * disk is full"): cdp_raster_init's handler notes it when it happens */
static int io_fail(const char *verb, const char *path, const cdp_out *on, char *err, size_t cap)
{
	int e = cdp_out_nospace(on, path);

	if (e)
		return fail(err, cap, "cannot write '%s': %s", path, strerror(e));
	return fail(err, cap, "%s '%s': %s", verb, path, gdal_msg());
}

static int write_fail(const char *path, const cdp_out *on, char *err, size_t cap)
{
	return io_fail("cannot write", path, on, err, cap);
}

/* A temporary beside path for GDAL to write by name; 0 or -1 with err */
static int tmp_open(cdp_out *t, const char *path, int flags, char *err, size_t cap)
{
	char msg[4400];

	if (cdp_out_open(t, path, CDP_OUT_SEEK | CDP_OUT_NOFD | flags, 0666, msg, sizeof msg) != 0)
		return fail(err, cap, "%s", msg);
	return 0;
}

int pr_out_open(pr_out **out, const char *path, int w, int h, int nb, int f32,
                const double *gt, const char *wkt, char *err, size_t cap)
{
	GDALDriverH drv = GDALGetDriverByName("GTiff");
	char **co = NULL;
	pr_out *o = calloc(1, sizeof *o);

	*out = NULL;
	if (o) {
		o->rows.slot = o->fin.slot = -1;
		o->rows.fd = o->fin.fd = -1;
	}
	if (!o || !(o->path = strdup(path))) {
		pr_out_close(o, 0, err, cap);
		return fail(err, cap, "out of memory");
	}
	if (tmp_open(&o->rows, path, CDP_OUT_AUX, err, cap) < 0) {
		pr_out_close(o, 0, NULL, 0);
		return -1;
	}
	o->w = w;
	o->h = h;
	o->nb = nb;
	o->f32 = f32;
	co = CSLSetNameValue(co, "COMPRESS", "DEFLATE");
	co = CSLSetNameValue(co, "BIGTIFF", "IF_SAFER");
	if (nb > 1)
		co = CSLSetNameValue(co, "INTERLEAVE", "BAND");
	CPLErrorReset();
	o->ds = drv ? GDALCreate(drv, o->rows.tmp, w, h, nb, f32 ? GDT_Float32 : GDT_Byte, co) : NULL;
	CSLDestroy(co);
	if (!o->ds) {
		io_fail("cannot create", path, &o->rows, err, cap);
		pr_out_close(o, 0, NULL, 0);
		return -1;
	}
	if ((gt && GDALSetGeoTransform(o->ds, (double *)gt) != CE_None) ||
	    (wkt && *wkt && GDALSetProjection(o->ds, wkt) != CE_None)) {
		io_fail("cannot georeference", path, &o->rows, err, cap);
		pr_out_close(o, 0, NULL, 0);
		return -1;
	}
	for (int b = 1; b <= nb; b++)
		GDALSetRasterNoDataValue(GDALGetRasterBand(o->ds, b), f32 ? NAN : 255);
	*out = o;
	return 0;
}

int pr_out_georef(pr_out *o, const cdp_raster *src, double scale, char *err, size_t cap)
{
	char why[512];

	if (cdp_raster_georef_to(src, o->ds, 0, 0, scale, why, sizeof why) != CDP_OK)
		return fail(err, cap, "cannot georeference '%s': %s", o->path, why);
	return 0;
}

int pr_out_write(pr_out *o, int y, int n, const void *buf, char *err, size_t cap)
{
	size_t sz = o->f32 ? 4 : 1, plane = (size_t)n * o->w * sz;

	for (int b = 0; b < o->nb; b++) {
		GDALRasterBandH band = GDALGetRasterBand(o->ds, b + 1);
		CPLErrorReset();
		if (GDALRasterIO(band, GF_Write, 0, y, o->w, n, (char *)buf + b * plane, o->w, n,
		                 o->f32 ? GDT_Float32 : GDT_Byte, 0, 0) != CE_None)
			return write_fail(o->path, &o->rows, err, cap);
	}
	return 0;
}

int pr_out_regression(pr_out *o, char *err, size_t cap)
{
	o->reg = 1;
	CPLErrorReset();
	if (GDALSetMetadataItem(o->ds, CDP_RASTER_TASK_KEY, CDP_RASTER_TASK_REGRESSION, NULL) !=
	    CE_None)
		return fail(err, cap, "cannot tag '%s' as a regression map: %s", o->path, gdal_msg());
	return 0;
}


/* On the striped file before the copy: the colour table (nodata 255
 * transparent) and the attribute table of a class map, or the bands'
 * descriptions (one band of a sigmoid head: the probability of class 1). */
static int label_rows(pr_out *o)
{
	const pr_legend *lg = o->lg;
	GDALRasterBandH b = GDALGetRasterBand(o->ds, 1);

	if (o->reg) {
		char name[32];
		for (int i = 0; i < o->nb; i++) {
			snprintf(name, sizeof name, "target %d", i + 1);
			GDALSetDescription(GDALGetRasterBand(o->ds, i + 1), name);
		}
		return CPLGetLastErrorType() >= CE_Failure ? -1 : 0;
	}
	if (o->f32) {
		for (int i = 0; i < o->nb; i++)
			GDALSetDescription(GDALGetRasterBand(o->ds, i + 1),
			                   lg->name[o->nb == 1 ? 1 : i]);
		return CPLGetLastErrorType() >= CE_Failure ? -1 : 0;
	}
	GDALColorTableH ct = GDALCreateColorTable(GPI_RGB);
	GDALRasterAttributeTableH rat = GDALCreateRasterAttributeTable();
	static const char *const col[5] = { "Value", "Class", "Red", "Green", "Blue" };
	static const GDALRATFieldUsage use[5] = { GFU_MinMax, GFU_Name, GFU_Red, GFU_Green, GFU_Blue };
	int rc = 0;

	for (int k = 0; k < 256; k++) {
		GDALColorEntry e = { 0, 0, 0, 0 };
		if (k < lg->k) {
			e.c1 = lg->rgb[k][0];
			e.c2 = lg->rgb[k][1];
			e.c3 = lg->rgb[k][2];
			e.c4 = 255;
		}
		GDALSetColorEntry(ct, k, &e);
	}
	for (int c = 0; c < 5; c++)
		GDALRATCreateColumn(rat, col[c], c == 1 ? GFT_String : GFT_Integer, use[c]);
	GDALRATSetTableType(rat, GRTT_THEMATIC);
	GDALRATSetRowCount(rat, lg->k);
	for (int k = 0; k < lg->k; k++) {
		GDALRATSetValueAsInt(rat, k, 0, k);
		GDALRATSetValueAsString(rat, k, 1, lg->name[k]);
		for (int c = 0; c < 3; c++)
			GDALRATSetValueAsInt(rat, k, 2 + c, lg->rgb[k][c]);
	}
	if (GDALSetRasterColorTable(b, ct) != CE_None || GDALSetDefaultRAT(b, rat) != CE_None)
		rc = -1;
	GDALDestroyColorTable(ct);
	GDALDestroyRasterAttributeTable(rat);
	return rc;
}

int pr_out_layout(pr_out *o, const pr_legend *lg, int cog, char *err, size_t cap)
{
	o->lg = lg;
	o->cog = cog;
	/* before any row: once GDAL's block cache has flushed a block of the
	 * striped GeoTIFF, libtiff refuses the palette's photometric tag, so a
	 * class map larger than the cache could not be labelled at the end */
	CPLErrorReset();
	if (o->ds && label_rows(o) < 0)
		return io_fail("cannot label the classes of", o->path, &o->rows, err, cap);
	return 0;
}

/* src copied to dst by the driver named drv with creation options co
 * (freed); 0 or -1 with err */
static int copy_as(pr_out *o, const char *drv, const char *src, const char *dst, char **co,
                   char *err, size_t cap)
{
	GDALDriverH dr = GDALGetDriverByName(drv);
	GDALDatasetH s, d = NULL;

	CPLErrorReset();
	co = CSLSetNameValue(co, "COMPRESS", "DEFLATE");
	co = CSLSetNameValue(co, "BIGTIFF", "IF_SAFER");
	if (!dr)
		fail(err, cap, "cannot write '%s': GDAL has no %s driver", o->path, drv);
	else if (!(s = GDALOpen(src, GA_ReadOnly)))
		fail(err, cap, "cannot reopen '%s': %s", src, gdal_msg());
	else {
		if (!(d = GDALCreateCopy(dr, dst, s, FALSE, co, NULL, NULL)))
			write_fail(o->path, NULL, err, cap);
		GDALClose(s);
	}
	CSLDestroy(co);
	if (!d)
		return -1;
	GDALClose(d);
	return CPLGetLastErrorType() >= CE_Failure ? write_fail(o->path, NULL, err, cap) : 0;
}

/* The striped file `rows` copied to `dst` in the final layout: tiles,
 * then overviews one level a call (all levels in one call take memory
 * growing with the height), then for a COG the COG driver's
 * copy of those tiles and overviews. The category names last, on dst. */
static int lay_out_in(pr_out *o, const char *rows, const char *dst, char *err, size_t cap)
{
	const char *resampling = o->f32 ? "AVERAGE" : "MODE";
	cdp_out t = { .fd = -1, .slot = -1 };
	const char *tiled = NULL;
	char **co = NULL;
	GDALDatasetH d;
	int rc = -1;

	if (o->cog) {
		if (tmp_open(&t, o->path, 0, err, cap) < 0)
			return -1;
		tiled = t.tmp;
	}
	co = CSLSetNameValue(co, "TILED", "YES");
	co = CSLSetNameValue(co, "BLOCKXSIZE", "256");
	co = CSLSetNameValue(co, "BLOCKYSIZE", "256");
	if (o->nb > 1)
		co = CSLSetNameValue(co, "INTERLEAVE", "BAND");
	if (copy_as(o, "GTiff", rows, tiled ? tiled : dst, co, err, cap) < 0)
		goto out;
	if (!(d = GDALOpen(tiled ? tiled : dst, GA_Update))) {
		fail(err, cap, "cannot reopen '%s': %s", tiled ? tiled : dst, gdal_msg());
		goto out;
	}
	/* halvings down to one tile, as the COG driver makes; in 64 bits, as
	 * 256 * f passes INT_MAX at f = 2^23, the factor a side past 2^29 needs */
	for (int f = 2; o->w > (int64_t)128 * f || o->h > (int64_t)128 * f; f *= 2)
		if (GDALBuildOverviews(d, resampling, 1, &f, 0, NULL, NULL, NULL) != CE_None) {
			io_fail("cannot build the overviews of", o->path, tiled ? &t : NULL, err, cap);
			GDALClose(d);
			goto out;
		}
	CPLErrorReset();
	GDALClose(d);
	if (CPLGetLastErrorType() >= CE_Failure) {
		write_fail(o->path, tiled ? &t : NULL, err, cap);
		goto out;
	}
	if (tiled) {
		co = CSLSetNameValue(NULL, "BLOCKSIZE", "256");
		co = CSLSetNameValue(co, "OVERVIEWS", "FORCE_USE_EXISTING");
		if (copy_as(o, "COG", tiled, dst, co, err, cap) < 0)
			goto out;
	}
	if (!(d = GDALOpen(dst, GA_ReadOnly))) {
		fail(err, cap, "cannot reopen '%s': %s", dst, gdal_msg());
		goto out;
	}
	if (!o->f32) {
		char **names = NULL;
		/* GDAL's GeoTIFF driver reads FILE.aux.xml only when asked for
		 * the georeferencing: a CRS that GeoTIFF keys cannot hold
		 * (+proj=eqearth) lives there, and the .aux.xml written on
		 * close would drop what was never read */
		GDALGetProjectionRef(d);
		for (int k = 0; k < o->lg->k; k++)
			names = CSLAddString(names, o->lg->name[k]);
		GDALSetRasterCategoryNames(GDALGetRasterBand(d, 1), names);
		CSLDestroy(names);
	}
	CPLErrorReset();
	GDALClose(d);
	if (CPLGetLastErrorType() >= CE_Failure) {
		write_fail(o->path, &o->fin, err, cap);
		goto out;
	}
	rc = 0;
out:
	cdp_out_abort(&t);
	return rc;
}

/* lay_out_in with GDAL's chunks held to a row of tiles: it copies in
 * swaths of 10 MB and computes overviews in chunks of up to 10 MB by
 * default, so memory would grow with the height of a narrow raster; held,
 * it grows with the width, as the strips' does. */
static int lay_out(pr_out *o, const char *rows, const char *dst, char *err, size_t cap)
{
	static const char *const opt[2] = { "GDAL_SWATH_SIZE", "GDAL_OVR_CHUNK_MAX_SIZE" };
	char v[32], *was[2];
	int rc;

	snprintf(v, sizeof v, "%zu", (size_t)o->w * 256 * o->nb * (o->f32 ? 4 : 1));
	for (int i = 0; i < 2; i++) {
		was[i] = CPLStrdup(CPLGetThreadLocalConfigOption(opt[i], ""));
		CPLSetThreadLocalConfigOption(opt[i], v);
	}
	rc = lay_out_in(o, rows, dst, err, cap);
	for (int i = 0; i < 2; i++) {
		CPLSetThreadLocalConfigOption(opt[i], *was[i] ? was[i] : NULL);
		CPLFree(was[i]);
	}
	return rc;
}

int pr_out_finish(pr_out *o, char *err, size_t cap)
{
	int rc = 0;

	if (!o || o->done)
		return 0;
	if (o->ds) {
		CPLErrorReset();
		GDALClose(o->ds);
		o->ds = NULL;
		if (CPLGetLastErrorType() >= CE_Failure && rc == 0)
			rc = write_fail(o->path, &o->rows, err, cap);
	}
	/* the striped rows are a scratch copy once laid out */
	if (rc == 0 && o->lg && (rc = tmp_open(&o->fin, o->path, CDP_OUT_AUX, err, cap)) == 0 &&
	    (rc = lay_out(o, o->rows.tmp, o->fin.tmp, err, cap)) == 0)
		cdp_out_abort(&o->rows);
	o->done = rc == 0;
	return rc;
}

const char *pr_out_file(const pr_out *o)
{
	return o->fin.tmp ? o->fin.tmp : o->rows.tmp;
}

int pr_out_close(pr_out *o, int commit, char *err, size_t cap)
{
	char msg[4400];
	int rc = 0;

	if (!o)
		return 0;
	if (commit)
		rc = pr_out_finish(o, err, cap);
	else if (o->ds)
		GDALClose(o->ds);
	/* with its .aux.xml, or without a stale one of an earlier file: the
	 * class names live there */
	if (commit && rc == 0 &&
	    cdp_out_commit(o->fin.path ? &o->fin : &o->rows, msg, sizeof msg) != 0)
		rc = fail(err, cap, "%s", msg);
	cdp_out_abort(&o->fin);
	cdp_out_abort(&o->rows);
	free(o->path);
	free(o);
	return rc;
}

/* g's pixel/line coordinates to the GCPs' CRS through tr. */
static void gcp_transform(OGRGeometryH g, void *tr)
{
	int n = OGR_G_GetGeometryCount(g);

	for (int i = 0; i < n; i++)
		gcp_transform(OGR_G_GetGeometryRef(g, i), tr);
	n = OGR_G_GetPointCount(g);
	for (int i = 0; i < n; i++) {
		double x, y, z;
		int ok;
		OGR_G_GetPoint(g, i, &x, &y, &z);
		if (GDALGCPTransform(tr, FALSE, 1, &x, &y, &z, &ok) && ok)
			OGR_G_SetPoint_2D(g, i, x, y);
	}
}

/* Every polygon's "name" from its "class" (field 0, GDALPolygonize's);
 * with tr (a raster georeferenced by GCPs only, whose polygons come out in
 * pixels and lines) its geometry moved to the GCPs' CRS. */
static int name_polygons(OGRLayerH layer, const pr_legend *lg, void *tr)
{
	OGRFeatureH f;
	int rc = 0;

	OGR_L_ResetReading(layer);
	while (rc == 0 && (f = OGR_L_GetNextFeature(layer))) {
		int k = OGR_F_GetFieldAsInteger(f, 0);
		if (tr && OGR_F_GetGeometryRef(f))
			gcp_transform(OGR_F_GetGeometryRef(f), tr);
		OGR_F_SetFieldString(f, 1, k >= 0 && k < lg->k ? lg->name[k] : "");
		rc = OGR_L_SetFeature(layer, f) == OGRERR_NONE ? 0 : -1;
		OGR_F_Destroy(f);
	}
	return rc;
}

const char *pr_vector_driver(const char *path)
{
	static const struct { const char *ext, *drv; } fmt[] = {
		{ ".gpkg", "GPKG" }, { ".geojson", "GeoJSON" },
	};
	const char *e = cdp_out_ext(path);

	for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++)
		if (strcasecmp(e, fmt[i].ext) == 0)
			return fmt[i].drv;
	return NULL;
}

int pr_vector(const char *mask_tif, const char *path, int klass, const pr_legend *lg,
              cdp_out *out, char *err, size_t cap)
{
	const char *dname = pr_vector_driver(path);
	int is_gpkg = dname && strcmp(dname, "GPKG") == 0;
	GDALDriverH drv = dname ? GDALGetDriverByName(dname) : NULL;
	/* a GeoPackage is polygonized in place, in one transaction; another
	 * format's layer (GeoJSON's is written once, front to back) is
	 * polygonized in memory, where the names are set, and copied */
	GDALDriverH mdrv = is_gpkg ? drv : GDALGetDriverByName("Memory");
	GDALDatasetH src = NULL, dst = NULL, work = NULL;
	OGRSpatialReferenceH srs = NULL;
	OGRLayerH layer;
	OGRFieldDefnH fd;
	const char *wkt;
	char *tmp;
	void *tr = NULL;
	double gt[6];
	int rc = -1;

	(void)klass;
	if (tmp_open(out, path, 0, err, cap) < 0)
		return -1;
	tmp = out->tmp;
	CPLErrorReset();
	if (!drv || !mdrv) {
		fail(err, cap, "cannot write '%s': GDAL has no %s driver", path,
		     !drv ? (dname ? dname : "vector") : "Memory");
		goto out;
	}
	if (!(src = GDALOpen(mask_tif, GA_ReadOnly))) {
		fail(err, cap, "cannot open '%s': %s", mask_tif, gdal_msg());
		goto out;
	}
	/* the driver creates the file itself; the name stays registered for
	 * removal */
	unlink(tmp);
	if (!(dst = GDALCreate(drv, tmp, 0, 0, 0, GDT_Unknown, NULL))) {
		io_fail("cannot create", path, out, err, cap);
		goto out;
	}
	if (!(work = is_gpkg ? dst : GDALCreate(mdrv, "", 0, 0, 0, GDT_Unknown, NULL))) {
		fail(err, cap, "cannot polygonize into '%s': %s", path, gdal_msg());
		goto out;
	}
	wkt = GDALGetProjectionRef(src);
	if (GDALGetGCPCount(src) > 0 && GDALGetGeoTransform(src, gt) != CE_None) {
		tr = GDALCreateGCPTransformer(GDALGetGCPCount(src), GDALGetGCPs(src), 0, FALSE);
		if (!tr) {
			fail(err, cap, "cannot use the GCPs of '%s': %s", mask_tif, gdal_msg());
			goto out;
		}
		wkt = GDALGetGCPProjection(src);
	}
	if (wkt && *wkt) {
		srs = OSRNewSpatialReference(wkt);
		if (srs)
			OSRSetAxisMappingStrategy(srs, OAMS_TRADITIONAL_GIS_ORDER);
	}
	if (!(layer = GDALDatasetCreateLayer(work, "prediction", srs, wkbPolygon, NULL))) {
		io_fail("cannot create a layer in", path, out, err, cap);
		goto out;
	}
	fd = OGR_Fld_Create("class", OFTInteger);
	OGR_L_CreateField(layer, fd, TRUE);
	OGR_Fld_Destroy(fd);
	fd = OGR_Fld_Create("name", OFTString);
	OGR_L_CreateField(layer, fd, TRUE);
	OGR_Fld_Destroy(fd);
	GDALRasterBandH band = GDALGetRasterBand(src, 1);
	if (is_gpkg)
		GDALDatasetStartTransaction(dst, FALSE);
	/* the band's nodata (255) marks every pixel not of the class */
	if (GDALPolygonize(band, GDALGetMaskBand(band), layer, 0, NULL, NULL, NULL) != CE_None ||
	    name_polygons(layer, lg, tr) < 0 ||
	    (is_gpkg && GDALDatasetCommitTransaction(dst) != OGRERR_NONE) ||
	    (!is_gpkg && !GDALDatasetCopyLayer(dst, layer, "prediction", NULL))) {
		io_fail("cannot polygonize into", path, out, err, cap);
		goto out;
	}
	/* the stored extent only grows as features change: it still holds the
	 * pixel coordinates the GCPs moved */
	if (tr && is_gpkg)
		GDALDatasetReleaseResultSet(dst, GDALDatasetExecuteSQL(dst, "RECOMPUTE EXTENT ON "
		                                                       "prediction", NULL, NULL));
	CPLErrorReset();
	if (work == dst)
		work = NULL;
	GDALClose(dst);
	dst = NULL;
	if (CPLGetLastErrorType() >= CE_Failure) {
		write_fail(path, out, err, cap);
		goto out;
	}
	rc = 0;
out:
	if (work && work != dst)
		GDALClose(work);
	if (dst)
		GDALClose(dst);
	if (src)
		GDALClose(src);
	if (srs)
		OSRDestroySpatialReference(srs);
	if (tr)
		GDALDestroyGCPTransformer(tr);
	if (rc != 0)
		cdp_out_abort(out);
	return rc;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* v (n) -> bytes, stretched between the 2nd and 98th percentiles of its
 * valid values: finite, not nd (when has_nd), not where cls is 255 (the
 * map's nodata); s is scratch of n floats */
static void stretch(const float *v, size_t n, const uint8_t *cls, int has_nd, double nd,
                    float *s, uint8_t *out, size_t step)
{
	size_t m = 0;
	float lo = 0, hi = 1;

	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]) && cls[i] != 255 && !(has_nd && (double)v[i] == (double)(float)nd))
			s[m++] = v[i];
	if (m) {
		qsort(s, m, sizeof *s, cmp_float);
		lo = s[(size_t)(0.02 * (m - 1))];
		hi = s[(size_t)(0.98 * (m - 1))];
	}
	for (size_t i = 0; i < n; i++) {
		float t = hi > lo ? (v[i] - lo) / (hi - lo) : 0.5f;
		t = isfinite(t) ? t : 0;
		out[i * step] = (uint8_t)lrintf(255 * (t < 0 ? 0 : t > 1 ? 1 : t));
	}
}

int pr_preview(const char *input, const int *bands, int n, const uint8_t *cls, int pw,
               int ph, const pr_legend *lg, const char *png, cdp_out *out, char *err,
               size_t cap)
{
	size_t np = (size_t)pw * ph;
	int nc = n >= 3 ? 3 : 1, rc = -1, prc;
	float *v = malloc(np * sizeof *v), *s = malloc(np * sizeof *s);
	uint8_t *rgb = malloc(np * 3);
	GDALDatasetH ds = NULL;

	if (!v || !s || !rgb) {
		fail(err, cap, "out of memory");
		goto out;
	}
	CPLErrorReset();
	if (!(ds = GDALOpen(input, GA_ReadOnly))) {
		fail(err, cap, "cannot open '%s': %s", input, gdal_msg());
		goto out;
	}
	for (int c = 0; c < 3; c++) {
		GDALRasterBandH b = GDALGetRasterBand(ds, bands[c < nc ? c : 0]);
		int has_nd = 0;
		double nd = GDALGetRasterNoDataValue(b, &has_nd);

		if (c < nc && GDALRasterIO(b, GF_Read, 0, 0, GDALGetRasterXSize(ds),
		                           GDALGetRasterYSize(ds), v, pw, ph, GDT_Float32, 0, 0) != CE_None) {
			fail(err, cap, "cannot read '%s': %s", input, gdal_msg());
			goto out;
		}
		if (c < nc)
			stretch(v, np, cls, has_nd, nd, s, rgb + c, 3);
		else
			for (size_t i = 0; i < np; i++)
				rgb[i * 3 + c] = rgb[i * 3];
	}
	/* the class map's own colours (pr_legend_make: its palette, names
	 * and --colors), so the quick look reads as the GeoTIFF does */
	for (size_t i = 0; i < np; i++) {
		int k = cls[i];
		if (k == 255) {
			rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = 0;
			continue;
		}
		if (k == 0 || k >= lg->k)
			continue;
		for (int c = 0; c < 3; c++)
			rgb[3 * i + c] = lg->rgb[k][c];
	}
	if ((prc = cdp_out_open(out, png, CDP_OUT_SEEK | CDP_OUT_AUX, 0666, err, cap)) != 0)
		goto out;
	if ((prc = cdp_png_write_out(out, rgb, pw, ph, 3, 8)) != 0) {
		if (prc > 0 && cdp_out_nospace(out, NULL))
			prc = cdp_out_nospace(out, NULL);
		fail(err, cap, "cannot write '%s': %s", png, cdp_strerror(prc));
		cdp_out_abort(out);
		goto out;
	}
	rc = 0;
out:
	if (ds)
		GDALClose(ds);
	free(v);
	free(s);
	free(rgb);
	return rc;
}
