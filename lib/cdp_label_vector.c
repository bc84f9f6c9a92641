/* cdp_label_vector.c: the GDAL/OGR side of cdp_label_vector.h.
 *
 * A source is one OGR layer with the transformation of its CRS into the
 * image's (traditional GIS axis order on both sides, so EPSG:4326 is
 * lon, lat as in the files) and the reverse one, which carries a window's
 * bounds into the layer's CRS for the spatial filter. A read sets that
 * filter, clones, transforms and buffers the features it returns, and burns
 * them in layer order with GDALRasterizeGeometries into a MEM dataset of
 * the window's grid, so overlapping features end with the last one, as in
 * gdal_rasterize. The label extent is a second source burned as 1 into its
 * own band.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>

#include "cdp_error.h"
#include "cdp_label_vector.h"
#include "cdp_raster.h"
#include "cdp_record.h"

/* SQLite's page cache for a source, in MB: a cap, not an allocation */
#define CDP_VECTOR_SQLITE_CACHE_MB "256"

typedef struct vsrc {
	GDALDatasetH ds;
	OGRLayerH lay;
	OGRCoordinateTransformationH ct, rct;  /* layer -> image, image -> layer */
	int fld, bfld;                         /* attribute indices or -1 */
	int fstring;                           /* fld is a string: map by classes */
	double maxbuf;                         /* the largest |buffer| */
} vsrc;

struct cdp_label_vector {
	const cdp_label_vector_opts *o;
	vsrc lab, ext;
	int kind;
	int has_ext;
	uint8_t *inside;                       /* the extent of a window, (h, w) */
	size_t ncap;
	void *halo;                            /* read_rows' rows and their halo */
	size_t hcap;
	void *tr;                              /* read_rows on a grid placed by
	                                          GCPs: built once (place) */
	uint8_t *ids;                          /* with o->field: bit i set when a
	                                          feature burns id i (65535 bits) */
	char note[640];                        /* a --label-crs the layer overrode */
};

void cdp_label_vector_opts_init(cdp_label_vector_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->burn = 1;
}

/* OGR's last message (or fallback), one line without a trailing full stop. */
static void ogr_err(char *err, size_t errcap, const char *what, const char *fallback)
{
	const char *m = CPLGetLastErrorMsg();
	size_t n;

	snprintf(err, errcap, "%s%s", what, (m && *m) ? m : fallback);
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	n = strlen(err);
	while (n > 0 && (err[n - 1] == '.' || err[n - 1] == ' '))
		err[--n] = '\0';
}

int cdp_label_vector_is_vector(const char *path)
{
	GDALDatasetH ds;
	int n;

	cdp_raster_init();
	ds = GDALOpenEx(path, GDAL_OF_VECTOR | GDAL_OF_READONLY, NULL, NULL, NULL);
	if (!ds)
		return 0;
	n = GDALDatasetGetLayerCount(ds);
	GDALClose(ds);
	return n > 0;
}

int cdp_label_vector_probe(const char *path, char *err, size_t errcap)
{
	GDALDatasetH ds;
	struct stat st;

	if (cdp_label_vector_is_vector(path))
		return 1;
	ds = GDALOpenEx(path, GDAL_OF_RASTER | GDAL_OF_READONLY, NULL, NULL, NULL);
	if (ds) {
		GDALClose(ds);
		return 0;
	}
	CPLErrorReset();
	/* GDAL's own names (/vsizip/..., NETCDF:f:v) are no paths of the OS */
	if (strncmp(path, "/vsi", 4) == 0) {
		VSILFILE *f = VSIFOpenL(path, "rb");
		char **dir = f ? NULL : VSIReadDir(path);

		if (f)
			VSIFCloseL(f);
		CSLDestroy(dir);
		if (f || dir)
			return 0;
		snprintf(err, errcap, "%s", strerror(ENOENT));
		return -1;
	}
	if (stat(path, &st) != 0) {
		if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
			return 0;
		snprintf(err, errcap, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) && access(path, R_OK) != 0) {
		snprintf(err, errcap, "%s", strerror(errno));
		return -1;
	}
	return 0;
}

/* stem + suffix + ext, malloc'ed; ext NULL keeps the image's extension. */
static char *with_suffix(const char *path, const char *suf, const char *ext)
{
	const char *base = strrchr(path, '/'), *dot;
	size_t stem;
	char *p;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = path + strlen(path);
	if (!ext)
		ext = dot;
	stem = (size_t)(dot - path);
	p = malloc(stem + strlen(suf) + strlen(ext) + 1);
	if (p) {
		memcpy(p, path, stem);
		strcpy(p + stem, suf);
		strcat(p, ext);
	}
	return p;
}

int cdp_label_vector_find(const char *image, const char *suffix, char **out,
                          char *err, size_t errcap)
{
	static const char *const exts[] = { NULL, ".gpkg", ".shp", ".geojson", ".fgb" };
	char *cand[5] = { NULL };
	int found[5], nfound = 0, rc = CDP_OK;

	*out = NULL;
	cdp_raster_init();
	for (int i = 0; i < 5; i++) {
		if (!(cand[i] = with_suffix(image, suffix, exts[i]))) {
			snprintf(err, errcap, "out of memory");
			rc = CDP_ENOMEM;
			goto out;
		}
		if (i > 0 && strcmp(cand[i], cand[0]) == 0)
			continue;
		if (CPLCheckForFile(cand[i], NULL))
			found[nfound++] = i;
	}
	if (nfound > 1) {
		size_t n = (size_t)snprintf(err, errcap, "%d labels match --label-suffix '%s':",
		                            nfound, suffix);
		for (int k = 0; k < nfound && n < errcap; k++)
			n += (size_t)snprintf(err + n, errcap - n, "%s '%s'", k ? "," : "",
			                      cand[found[k]]);
		rc = CDP_EMISMATCH;
		goto out;
	}
	*out = cand[nfound ? found[0] : 0];
	cand[nfound ? found[0] : 0] = NULL;
out:
	for (int i = 0; i < 5; i++)
		free(cand[i]);
	return rc;
}

static void src_close(vsrc *s)
{
	if (s->ct)
		OCTDestroyCoordinateTransformation(s->ct);
	if (s->rct)
		OCTDestroyCoordinateTransformation(s->rct);
	if (s->ds)
		GDALClose(s->ds);
	memset(s, 0, sizeof(*s));
}

/* The layer names of ds as "'a', 'b'" into out[cap]. */
static void layer_list(GDALDatasetH ds, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < GDALDatasetGetLayerCount(ds) && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s'%s'", i ? ", " : "",
		                      OGR_L_GetName(GDALDatasetGetLayer(ds, i)));
}

int cdp_label_vector_crs_check(const char *crs)
{
	OGRSpatialReferenceH sr;
	int ok;

	cdp_raster_init();      /* its quiet error handler: the caller says why */
	if (!(sr = OSRNewSpatialReference(NULL)))
		return CDP_ENOMEM;
	ok = OSRSetFromUserInput(sr, crs) == OGRERR_NONE;
	OSRDestroySpatialReference(sr);
	return ok ? CDP_OK : CDP_EFORMAT;
}

/* Opens path's layer (name or the only one) and the transformations between
 * its CRS and the image's; crs, when given, overrides the layer's own, or
 * with fallback only stands in for a missing one (--label-crs): a crs that
 * differs from the layer's own then puts a note of it in note[notecap]. */
static int src_open(vsrc *s, const char *path, const char *name, const char *crs,
                    int fallback, const char *image_wkt, char *note, size_t notecap,
                    char *err, size_t errcap)
{
	OGRSpatialReferenceH lsr = NULL, isr = NULL;
	const int own_cache = CPLGetConfigOption("OGR_SQLITE_CACHE", NULL) != NULL;
	char list[512];
	int rc = CDP_EMISMATCH;

	memset(s, 0, sizeof(*s));
	s->fld = s->bfld = -1;
	/* SQLite's page cache (GeoPackage, SpatiaLite) is 2 MB by default, and
	 * a strip's features lie anywhere in the file: each strip read their
	 * pages again (113,513 preads on bench/labels.sh's 16384^2 scene, 5,806
	 * with this cap). It holds only the pages read; the user's own
	 * OGR_SQLITE_CACHE wins. */
	if (!own_cache)
		CPLSetThreadLocalConfigOption("OGR_SQLITE_CACHE", CDP_VECTOR_SQLITE_CACHE_MB);
	s->ds = GDALOpenEx(path, GDAL_OF_VECTOR | GDAL_OF_READONLY, NULL, NULL, NULL);
	if (!own_cache)
		CPLSetThreadLocalConfigOption("OGR_SQLITE_CACHE", NULL);
	if (!s->ds) {
		ogr_err(err, errcap, "", "not a vector dataset OGR opens");
		return CDP_EGDAL;
	}
	if (name) {
		if (!(s->lay = GDALDatasetGetLayerByName(s->ds, name))) {
			layer_list(s->ds, list, sizeof list);
			snprintf(err, errcap, "no layer '%s' (its layers: %s)", name, list);
			return CDP_EFORMAT;
		}
	} else if (GDALDatasetGetLayerCount(s->ds) != 1) {
		layer_list(s->ds, list, sizeof list);
		snprintf(err, errcap, "%d layers, choose one with --label-layer: %s",
		         GDALDatasetGetLayerCount(s->ds), list);
		return CDP_EFORMAT;
	} else
		s->lay = GDALDatasetGetLayer(s->ds, 0);

	if (crs && fallback && OGR_L_GetSpatialRef(s->lay)) {
		/* the layer's own CRS wins; one the user gave in vain is worth a
		 * word, since the labels may then land elsewhere than meant */
		static const char *const same[] = { "IGNORE_DATA_AXIS_TO_SRS_AXIS_MAPPING=YES", NULL };
		OGRSpatialReferenceH usr = OSRNewSpatialReference(NULL);
		/* OGR gives a layer's CRS GIS axis order, the user's keeps EPSG's:
		 * the same CRS all the same */
		if (usr && OSRSetFromUserInput(usr, crs) == OGRERR_NONE &&
		    !OSRIsSameEx(usr, OGR_L_GetSpatialRef(s->lay), same) && note && notecap &&
		    !note[0])
			snprintf(note, notecap, "layer '%s' declares a CRS of its own, which wins: "
			         "--label-crs '%s' (another CRS) is ignored", OGR_L_GetName(s->lay),
			         crs);
		if (usr)
			OSRDestroySpatialReference(usr);
		crs = NULL;
	}
	if (crs) {
		lsr = OSRNewSpatialReference(NULL);
		if (!lsr || OSRSetFromUserInput(lsr, crs) != OGRERR_NONE) {
			snprintf(err, errcap, "--label-crs '%s' is not a CRS", crs);
			goto out;
		}
	} else if (OGR_L_GetSpatialRef(s->lay))
		lsr = OSRClone(OGR_L_GetSpatialRef(s->lay));
	if (image_wkt[0]) {
		isr = OSRNewSpatialReference(image_wkt);
		if (!isr) {
			snprintf(err, errcap, "the image's CRS does not parse");
			goto out;
		}
	}
	if (!lsr && isr) {
		snprintf(err, errcap, "layer '%s' has no CRS (give it with --label-crs)",
		         OGR_L_GetName(s->lay));
		goto out;
	}
	if (lsr && !isr) {
		snprintf(err, errcap, "the image has no CRS to reproject layer '%s' into",
		         OGR_L_GetName(s->lay));
		goto out;
	}
	if (lsr && !OSRIsSame(lsr, isr)) {
		OSRSetAxisMappingStrategy(lsr, OAMS_TRADITIONAL_GIS_ORDER);
		OSRSetAxisMappingStrategy(isr, OAMS_TRADITIONAL_GIS_ORDER);
		s->ct = OCTNewCoordinateTransformation(lsr, isr);
		s->rct = OCTNewCoordinateTransformation(isr, lsr);
		if (!s->ct || !s->rct) {
			ogr_err(err, errcap, "cannot transform its CRS into the image's: ",
			        "no transformation");
			goto out;
		}
	}
	rc = CDP_OK;
out:
	if (lsr)
		OSRDestroySpatialReference(lsr);
	if (isr)
		OSRDestroySpatialReference(isr);
	return rc;
}

/* The id of feature f (its attribute, or the burn value) into *id; 1 when
 * the attribute is NULL. */
static int feature_id(const cdp_label_vector *v, OGRFeatureH f, long long *id,
                      char *err, size_t errcap)
{
	const cdp_label_vector_opts *o = v->o;
	const vsrc *s = &v->lab;

	if (s->fld < 0) {
		*id = o->burn;
		return CDP_OK;
	}
	if (!OGR_F_IsFieldSetAndNotNull(f, s->fld))
		return 1;
	if (s->fstring) {
		const char *val = OGR_F_GetFieldAsString(f, s->fld);
		for (size_t k = 0; k < o->nclasses; k++)
			if (strcmp(val, o->classes[k]) == 0) {
				*id = (long long)k;
				return CDP_OK;
			}
		snprintf(err, errcap, "feature %lld: '%s' = '%s' is none of --classes",
		         (long long)OGR_F_GetFID(f), o->field, val);
		return CDP_EMISMATCH;
	}
	*id = OGR_F_GetFieldAsInteger64(f, s->fld);
	if (*id < 0 || *id > 65534) {
		snprintf(err, errcap, "feature %lld: '%s' = %lld is not a class id (0-65534)",
		         (long long)OGR_F_GetFID(f), o->field, *id);
		return CDP_ERANGE;
	}
	return CDP_OK;
}

/* The index of s's attribute name into *idx and its type into *t. */
static int find_field(const vsrc *s, const char *name, int *idx, OGRFieldType *t,
                      char *err, size_t errcap)
{
	OGRFeatureDefnH fd = OGR_L_GetLayerDefn(s->lay);

	if ((*idx = OGR_FD_GetFieldIndex(fd, name)) < 0) {
		snprintf(err, errcap, "layer '%s' has no attribute '%s'",
		         OGR_L_GetName(s->lay), name);
		return CDP_EFORMAT;
	}
	*t = OGR_Fld_GetType(OGR_FD_GetFieldDefn(fd, *idx));
	return CDP_OK;
}

/* Finds the attributes, then reads every feature that passes --label-where
 * once: ids checked, the largest id and buffer noted. */
static int lab_scan(cdp_label_vector *v, char *err, size_t errcap)
{
	const cdp_label_vector_opts *o = v->o;
	vsrc *s = &v->lab;
	OGRFeatureH f;
	OGRFieldType t;
	long long maxid = o->background_ignore ? 0 : (long long)o->background, id;
	int rc = CDP_OK;

	if (o->field) {
		if ((rc = find_field(s, o->field, &s->fld, &t, err, errcap)))
			return rc;
		s->fstring = t == OFTString;
		if (s->fstring && !o->nclasses) {
			snprintf(err, errcap, "attribute '%s' is a string: give its values' "
			         "ids with --classes", o->field);
			return CDP_EFORMAT;
		}
		if (t != OFTString && t != OFTInteger && t != OFTInteger64) {
			snprintf(err, errcap, "attribute '%s' is %s, need an integer or a string",
			         o->field, OGR_GetFieldTypeName(t));
			return CDP_EFORMAT;
		}
		if (!(v->ids = calloc(65536 / 8, 1))) {
			snprintf(err, errcap, "out of memory");
			return CDP_ENOMEM;
		}
	} else
		maxid = maxid > (long long)o->burn ? maxid : (long long)o->burn;
	if (o->buffer_field) {
		if ((rc = find_field(s, o->buffer_field, &s->bfld, &t, err, errcap)))
			return rc;
		if (t != OFTInteger && t != OFTInteger64 && t != OFTReal) {
			snprintf(err, errcap, "attribute '%s' is %s, need a number",
			         o->buffer_field, OGR_GetFieldTypeName(t));
			return CDP_EFORMAT;
		}
	}
	s->maxbuf = fabs(o->buffer);
	if (o->where && OGR_L_SetAttributeFilter(s->lay, o->where) != OGRERR_NONE) {
		ogr_err(err, errcap, "--label-where: ", "invalid filter");
		return CDP_EFORMAT;
	}
	/* a filter that does not apply to this layer fails only when read */
	if (o->field || o->buffer_field || o->where) {
		OGR_L_SetIgnoredFields(s->lay, (const char *[]){ "OGR_GEOMETRY", NULL });
		OGR_L_ResetReading(s->lay);
		while (rc == CDP_OK && (f = OGR_L_GetNextFeature(s->lay))) {
			if (o->field && (rc = feature_id(v, f, &id, err, errcap)) == 1)
				rc = CDP_OK;
			else if (rc == CDP_OK && o->field) {
				maxid = id > maxid ? id : maxid;
				v->ids[id / 8] |= (uint8_t)(1u << (id % 8));
			}
			/* a distance as --buffer takes it: GEOS crashed on a NaN one
			 * and dropped the feature at an infinite one */
			if (rc == CDP_OK && s->bfld >= 0 && OGR_F_IsFieldSetAndNotNull(f, s->bfld)) {
				double d = OGR_F_GetFieldAsDouble(f, s->bfld);
				if (!(d >= 0 && d <= 1e9)) {
					snprintf(err, errcap, "feature %lld: '%s' = %g is not a --buffer-field "
					         "distance (0 to 1e9)", (long long)OGR_F_GetFID(f),
					         o->buffer_field, d);
					rc = CDP_ERANGE;
				}
				s->maxbuf = fmax(s->maxbuf, d);
			}
			OGR_F_Destroy(f);
		}
		OGR_L_SetIgnoredFields(s->lay, NULL);
		if (rc)
			return rc;
		if (CPLGetLastErrorType() == CE_Failure) {
			ogr_err(err, errcap, o->where ? "cannot read with --label-where: "
			                              : "cannot read: ", "read error");
			return o->where ? CDP_EFORMAT : CDP_EGDAL;
		}
	}
	if (o->nclasses && maxid >= (long long)o->nclasses) {
		snprintf(err, errcap, "id %lld but only %zu --classes", maxid, o->nclasses);
		return CDP_ERANGE;
	}
	v->kind = o->type ? o->type : maxid < 255 ? CDP_LABEL_U8 : CDP_LABEL_U16;
	if (v->kind == CDP_LABEL_U8 && maxid >= 255) {
		snprintf(err, errcap, "id %lld does not fit a u8 label (255 is its ignore "
		         "value; use --label-type u16)", maxid);
		return CDP_ERANGE;
	}
	return CDP_OK;
}

/* The reads of s's features leave out every attribute but s's own (fld,
 * bfld): SQLite decodes, and OGR copies, only those (an OpenStreetMap layer
 * has dozens). Not under an attribute filter, which some drivers evaluate on
 * the feature's attributes. Only a saving: without memory it reads them all. */
static void src_skip_fields(vsrc *s)
{
	OGRFeatureDefnH fd = OGR_L_GetLayerDefn(s->lay);
	const int n = OGR_FD_GetFieldCount(fd);
	const char **skip = calloc((size_t)n + 2, sizeof(*skip));
	int k = 0;

	if (!skip)
		return;
	for (int i = 0; i < n; i++)
		if (i != s->fld && i != s->bfld)
			skip[k++] = OGR_Fld_GetNameRef(OGR_FD_GetFieldDefn(fd, i));
	skip[k] = "OGR_STYLE";
	OGR_L_SetIgnoredFields(s->lay, skip);
	free(skip);
}

int cdp_label_vector_open(const char *path, const cdp_label_vector_opts *o,
                          const char *image_wkt, cdp_label_vector **out,
                          char *err, size_t errcap)
{
	cdp_label_vector *v;
	char msg[768];
	int rc;

	*out = NULL;
	cdp_raster_init();
	if (!(v = calloc(1, sizeof(*v)))) {
		snprintf(err, errcap, "out of memory");
		return CDP_ENOMEM;
	}
	v->o = o;
	CPLErrorReset();
	if ((rc = src_open(&v->lab, path, o->layer, o->crs, 1, image_wkt, v->note, sizeof v->note,
	                   msg, sizeof msg)) ||
	    (rc = lab_scan(v, msg, sizeof msg))) {
		snprintf(err, errcap, "'%s': %s", path, msg);
		goto fail;
	}
	if (!o->where)
		src_skip_fields(&v->lab);
	if (o->extent) {
		v->has_ext = 1;
		if ((rc = src_open(&v->ext, o->extent, NULL, o->crs, 1, image_wkt, v->note,
		                   sizeof v->note, msg, sizeof msg))) {
			snprintf(err, errcap, "extent '%s': %s", o->extent, msg);
			goto fail;
		}
		src_skip_fields(&v->ext);
	}
	*out = v;
	return CDP_OK;
fail:
	cdp_label_vector_close(v);
	return rc;
}

int cdp_label_vector_kind(const cdp_label_vector *v)
{
	return v->kind;
}

const char *cdp_label_vector_note(const cdp_label_vector *v)
{
	return v->note[0] ? v->note : NULL;
}

/* A window of the image's grid, (h, w) pixels: placed by the geotransform
 * gt, or, for an image placed by GCPs only, by tr (cdp_raster_transformer
 * from the image's CRS to the window's pixels), whose polynomial or
 * spline bends the window's edges. */
typedef struct vwin {
	double gt[6];
	void *tr;
	int w, h;
} vwin;

/* Points along each edge of a window placed by GCPs: enough that a bent
 * edge's bulge stays inside the pixel of padding the bounds get. */
#define EDGE_STEPS 16

/* Window pixel coordinates x[n], y[n] to the image's CRS, in place; -1
 * when the GCPs cannot place one. */
static int win_georef(const vwin *wn, int n, double *x, double *y)
{
	double z[4 * EDGE_STEPS];
	int ok[4 * EDGE_STEPS];

	if (!wn->tr) {
		for (int i = 0; i < n; i++) {
			double px = x[i], py = y[i];
			x[i] = wn->gt[0] + px * wn->gt[1] + py * wn->gt[2];
			y[i] = wn->gt[3] + px * wn->gt[4] + py * wn->gt[5];
		}
		return 0;
	}
	memset(z, 0, sizeof z);
	if (!cdp_raster_transform(wn->tr, TRUE, n, x, y, z, ok))
		return -1;
	for (int i = 0; i < n; i++)
		if (!ok[i] || !isfinite(x[i]) || !isfinite(y[i]))
			return -1;
	return 0;
}

/* The size of a pixel of the window in image units (its column and row
 * steps' lengths added): by GCPs the largest at the window's corners. */
static int win_pixel(const vwin *wn, double *px)
{
	const double *gt = wn->gt;

	*px = hypot(gt[1], gt[4]) + hypot(gt[2], gt[5]);
	if (!wn->tr)
		return 0;
	*px = 0;
	for (int c = 0; c < 4; c++) {
		double cx = c & 1 ? wn->w - 1 : 0, cy = c & 2 ? wn->h - 1 : 0;
		double x[3] = { cx, cx + 1, cx }, y[3] = { cy, cy, cy + 1 };
		if (win_georef(wn, 3, x, y))
			return -1;
		*px = fmax(*px, hypot(x[1] - x[0], y[1] - y[0]) + hypot(x[2] - x[0], y[2] - y[0]));
	}
	return 0;
}

/* The window's bounds in s's layer CRS, widened by pad image units. */
static int window_bounds(const vsrc *s, const vwin *wn, double pad, double b[4])
{
	const int n = wn->tr ? 4 * EDGE_STEPS : 4;
	const double w = (double)wn->w, h = (double)wn->h;
	double xs[4 * EDGE_STEPS], ys[4 * EDGE_STEPS];

	if (!wn->tr) {
		double cx[4] = { 0, w, 0, w }, cy[4] = { 0, 0, h, h };
		memcpy(xs, cx, sizeof cx);
		memcpy(ys, cy, sizeof cy);
	} else
		cdp_raster_outline(w, h, EDGE_STEPS, xs, ys);
	if (win_georef(wn, n, xs, ys))
		return -1;
	b[0] = b[1] = HUGE_VAL;
	b[2] = b[3] = -HUGE_VAL;
	for (int i = 0; i < n; i++) {
		b[0] = fmin(b[0], xs[i] - pad);
		b[1] = fmin(b[1], ys[i] - pad);
		b[2] = fmax(b[2], xs[i] + pad);
		b[3] = fmax(b[3], ys[i] + pad);
	}
	if (s->rct) {
		double o[4];
		if (!OCTTransformBounds(s->rct, b[0], b[1], b[2], b[3], &o[0], &o[1], &o[2],
		                        &o[3], 21))
			return -1;
		memcpy(b, o, sizeof o);
	}
	return 0;
}

/* One feature to burn: its FID, its geometry in the image's CRS, its value. */
typedef struct burnt {
	GIntBig fid;
	OGRGeometryH g;
	double v;
} burnt;

static int by_fid(const void *a, const void *b)
{
	GIntBig x = ((const burnt *)a)->fid, y = ((const burnt *)b)->fid;

	return (x > y) - (x < y);
}

/* Burns the features of s that intersect the window into band 1 of ds: each
 * its id (v the label source) or 1 (the extent). A spatial filter may return
 * features out of layer order (GeoPackage's R-tree does): they are burned
 * in FID order, so the last in the layer wins wherever they overlap. */
static int src_burn(cdp_label_vector *v, vsrc *s, GDALDatasetH ds, const vwin *wn,
                    uint32_t ignore, char *err, size_t errcap)
{
	const cdp_label_vector_opts *o = v->o;
	const int is_lab = s == &v->lab;
	double px, b[4];
	OGRGeometryH *geoms = NULL;
	double *vals = NULL;
	burnt *bs = NULL;
	size_t n = 0, cap = 0;
	OGRFeatureH f;
	int rc = CDP_OK;
	char **ropt = NULL;

	if (win_pixel(wn, &px) || window_bounds(s, wn, px + (is_lab ? s->maxbuf : 0), b)) {
		ogr_err(err, errcap, "cannot transform a window's bounds into the layer's CRS: ",
		        "transformation failed");
		return CDP_EMISMATCH;
	}
	OGR_L_SetSpatialFilterRect(s->lay, b[0], b[1], b[2], b[3]);
	OGR_L_ResetReading(s->lay);
	CPLErrorReset();
	while ((f = OGR_L_GetNextFeature(s->lay))) {
		/* the feature's own geometry, taken from it rather than cloned */
		OGRGeometryH t = OGR_F_StealGeometry(f);
		long long id = 1;
		double d = is_lab ? o->buffer : 0;

		if (!t || OGR_G_IsEmpty(t)) {
			if (t)
				OGR_G_DestroyGeometry(t);
			OGR_F_Destroy(f);
			continue;
		}
		if (is_lab && (rc = feature_id(v, f, &id, err, errcap)) == 1) {
			id = ignore;
			rc = CDP_OK;
		}
		if (rc == CDP_OK && is_lab && s->bfld >= 0)
			d = OGR_F_IsFieldSetAndNotNull(f, s->bfld) ? OGR_F_GetFieldAsDouble(f, s->bfld)
			                                          : 0;
		if (rc == CDP_OK && s->ct && OGR_G_Transform(t, s->ct) != OGRERR_NONE) {
			ogr_err(err, errcap, "cannot transform a feature into the image's CRS: ",
			        "transformation failed");
			rc = CDP_EMISMATCH;
		}
		if (rc == CDP_OK && d != 0) {
			OGRGeometryH bt = OGR_G_Buffer(t, d, 8);
			OGR_G_DestroyGeometry(t);
			t = bt;
		}
		if (rc == CDP_OK && n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			burnt *nb = realloc(bs, nc * sizeof(*nb));
			if (nb) {
				bs = nb;
				cap = nc;
			} else {
				snprintf(err, errcap, "out of memory");
				rc = CDP_ENOMEM;
			}
		}
		if (rc == CDP_OK && !t) {
			ogr_err(err, errcap, "cannot buffer a feature: ", "buffer failed");
			rc = CDP_EGDAL;
		}
		if (rc == CDP_OK) {
			bs[n].fid = OGR_F_GetFID(f);
			bs[n].g = t;
			bs[n++].v = (double)id;
		} else if (t)
			OGR_G_DestroyGeometry(t);
		OGR_F_Destroy(f);
		if (rc)
			goto out;
	}
	if (CPLGetLastErrorType() == CE_Failure) {
		ogr_err(err, errcap, "cannot read: ", "read error");
		rc = CDP_EGDAL;
		goto out;
	}
	if (n) {
		int band = 1;
		qsort(bs, n, sizeof(*bs), by_fid);
		geoms = malloc(n * sizeof(*geoms));
		vals = malloc(n * sizeof(*vals));
		if (!geoms || !vals) {
			snprintf(err, errcap, "out of memory");
			rc = CDP_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			geoms[i] = bs[i].g;
			vals[i] = bs[i].v;
		}
		if (o->all_touched && is_lab)
			ropt = CSLSetNameValue(ropt, "ALL_TOUCHED", "TRUE");
		/* by GCPs the features go to pixels through their transformer
		 * (its forward direction: the image's CRS to the window) */
		if (GDALRasterizeGeometries(ds, 1, &band, (int)n, geoms,
		                            wn->tr ? cdp_raster_transform : NULL, wn->tr, vals,
		                            ropt, NULL, NULL) != CE_None) {
			ogr_err(err, errcap, "cannot rasterize: ", "rasterization failed");
			rc = CDP_EGDAL;
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		OGR_G_DestroyGeometry(bs[i].g);
	free(bs);
	free(geoms);
	free(vals);
	CSLDestroy(ropt);
	return rc;
}

/* A MEM dataset of the window's grid whose band 1 is data, (h, w) samples
 * of type t (the caller's buffer: rasterized in place, without a copy or
 * fresh pages per window), filled with fill here rather than through
 * GDALFillRaster, which goes through GDAL's block cache. */
static GDALDatasetH mem_grid(GDALDataType t, const double gt[6], int w, int h,
                             uint16_t fill, void *data)
{
	GDALDriverH drv = GDALGetDriverByName("MEM");
	GDALDatasetH ds = drv ? GDALCreate(drv, "", w, h, 0, t, NULL) : NULL;
	const size_t np = (size_t)w * (size_t)h;
	char ptr[64];
	char *opt[] = { ptr, NULL };

	if (t == GDT_Byte)
		memset(data, fill, np);
	else
		for (size_t p = 0; p < np; p++)
			((uint16_t *)data)[p] = fill;
	snprintf(ptr, sizeof ptr, "DATAPOINTER=%p", data);
	if (ds && GDALAddBand(ds, t, opt) != CE_None) {
		GDALClose(ds);
		ds = NULL;
	}
	if (ds && GDALSetGeoTransform(ds, (double *)gt) != CE_None) {
		GDALClose(ds);
		ds = NULL;
	}
	return ds;
}

/* cdp_label_vector_read of the window wn. */
static int read_win(cdp_label_vector *v, const vwin *wn, uint32_t ignore, void *buf,
                    char *err, size_t errcap)
{
	const int u16 = v->kind == CDP_LABEL_U16, w = wn->w, h = wn->h;
	const size_t np = (size_t)w * (size_t)h;
	const double *gt = wn->gt;
	GDALDatasetH ds = NULL, eds = NULL;
	uint8_t *in;
	int rc;

	if (w < 1 || h < 1)
		return CDP_EINVAL;
	ds = mem_grid(u16 ? GDT_UInt16 : GDT_Byte, gt, w, h,
	              (uint16_t)(v->o->background_ignore ? ignore : v->o->background), buf);
	if (!ds) {
		ogr_err(err, errcap, "cannot make a label grid: ", "out of memory");
		return CDP_EGDAL;
	}
	/* GDAL writes through its block cache: flushed, buf holds the label */
	if ((rc = src_burn(v, &v->lab, ds, wn, ignore, err, errcap)))
		goto out;
	GDALFlushCache(ds);
	if (!v->has_ext)
		goto out;
	if (np > v->ncap) {
		uint8_t *nb = realloc(v->inside, np);
		if (!nb) {
			snprintf(err, errcap, "out of memory");
			rc = CDP_ENOMEM;
			goto out;
		}
		v->inside = nb;
		v->ncap = np;
	}
	in = v->inside;
	if (!(eds = mem_grid(GDT_Byte, gt, w, h, 0, in))) {
		ogr_err(err, errcap, "cannot make an extent grid: ", "out of memory");
		rc = CDP_EGDAL;
		goto out;
	}
	if ((rc = src_burn(v, &v->ext, eds, wn, ignore, err, errcap)))
		goto out;
	GDALFlushCache(eds);
	for (size_t p = 0; p < np; p++)
		if (!in[p]) {
			if (u16)
				((uint16_t *)buf)[p] = (uint16_t)ignore;
			else
				((uint8_t *)buf)[p] = (uint8_t)ignore;
		}
out:
	if (ds)
		GDALClose(ds);
	if (eds)
		GDALClose(eds);
	return rc;
}

int cdp_label_vector_read(cdp_label_vector *v, const double gt[6], int w, int h,
                          uint32_t ignore, void *buf, char *err, size_t errcap)
{
	vwin wn = { { gt[0], gt[1], gt[2], gt[3], gt[4], gt[5] }, NULL, w, h };

	return read_win(v, &wn, ignore, buf, err, errcap);
}

int cdp_label_vector_place(cdp_label_vector *v, const cdp_raster_info *g, int tps,
                           char *err, size_t errcap)
{
	if (!cdp_raster_by_gcps(g) || v->tr)
		return CDP_OK;
	if (!(v->tr = cdp_raster_transformer(NULL, g, tps, err, errcap)))
		return CDP_EGDAL;
	return CDP_OK;
}

int cdp_label_vector_over(cdp_label_vector *v, const cdp_raster_info *g, int tps, int *any,
                          char *err, size_t errcap)
{
	vsrc *s = &v->lab;
	const double *gt = g->gt;
	vwin wn = { { gt[0], gt[1], gt[2], gt[3], gt[4], gt[5] }, NULL, (int)g->width,
	            (int)g->height };
	double px, b[4];
	OGRFeatureH f;
	int rc;

	*any = 1;
	if (cdp_raster_by_gcps(g)) {
		if (!v->tr && (rc = cdp_label_vector_place(v, g, tps, err, errcap)))
			return rc;
		cdp_raster_transformer_move(v->tr, 0, 0);
		wn.tr = v->tr;
	}
	/* bounds that do not reach the layer's CRS say nothing: the reads
	 * report that failure themselves */
	if (win_pixel(&wn, &px) || window_bounds(s, &wn, px + s->maxbuf, b))
		return CDP_OK;
	*any = 0;
	OGR_L_SetSpatialFilterRect(s->lay, b[0], b[1], b[2], b[3]);
	OGR_L_ResetReading(s->lay);
	CPLErrorReset();
	while (!*any && (f = OGR_L_GetNextFeature(s->lay))) {
		OGRGeometryH t = OGR_F_GetGeometryRef(f);
		*any = t && !OGR_G_IsEmpty(t);
		OGR_F_Destroy(f);
	}
	OGR_L_SetSpatialFilter(s->lay, NULL);
	if (CPLGetLastErrorType() == CE_Failure) {
		ogr_err(err, errcap, "cannot read: ", "read error");
		*any = 1;
		return CDP_EGDAL;
	}
	return CDP_OK;
}

void *cdp_label_vector_take_transformer(cdp_label_vector *v)
{
	void *tr = v ? v->tr : NULL;

	if (v)
		v->tr = NULL;
	return tr;
}

void cdp_label_vector_give_transformer(cdp_label_vector *v, void *tr)
{
	if (v && !v->tr)
		v->tr = tr;
	else
		cdp_raster_transformer_free(tr);
}

/* GDAL's rasterizer decides a geometry on a window's edge by the window
 * (--all-touched burns a line along a row seam in one strip but not in the
 * next), so the rows are rasterized with the grid's row above and below
 * them, where it has them, and the edge falls where the grid's own does. */
int cdp_label_vector_read_rows(cdp_label_vector *v, const cdp_raster_info *g, int tps,
                               int64_t y0, int h, uint32_t ignore, void *buf, char *err,
                               size_t errcap)
{
	const size_t px = v->kind == CDP_LABEL_U16 ? 2 : 1;
	const int64_t height = (int64_t)g->height;
	const double *gt = g->gt;
	const int w = (int)g->width;
	int64_t a, b;
	vwin wn;
	size_t need;
	int rc;

	if (w < 1 || h < 1 || y0 < 0 || y0 + h > height) {
		snprintf(err, errcap, "rows outside the grid");
		return CDP_EINVAL;
	}
	a = y0 > 0 ? y0 - 1 : y0;
	b = y0 + h < height ? y0 + h + 1 : y0 + h;
	/* a grid without any georeference has the identity geotransform; one
	 * placed by GCPs keeps it too, unused: tr places its pixels */
	wn = (vwin){ { gt[0] + (double)a * gt[2], gt[1], gt[2], gt[3] + (double)a * gt[5],
	               gt[4], gt[5] }, NULL, w, (int)(b - a) };
	if (cdp_raster_by_gcps(g)) {
		if (!v->tr && (rc = cdp_label_vector_place(v, g, tps, err, errcap)))
			return rc;
		cdp_raster_transformer_move(v->tr, 0, a);
		wn.tr = v->tr;
	}
	need = (size_t)w * (size_t)(b - a) * px;
	if (need > v->hcap) {
		void *nb = realloc(v->halo, need);
		if (!nb) {
			snprintf(err, errcap, "out of memory");
			return CDP_ENOMEM;
		}
		v->halo = nb;
		v->hcap = need;
	}
	rc = read_win(v, &wn, ignore, v->halo, err, errcap);
	if (rc)
		return rc;
	memcpy(buf, (char *)v->halo + (size_t)(y0 - a) * (size_t)w * px,
	       (size_t)w * (size_t)h * px);
	return CDP_OK;
}

int cdp_label_vector_files(const cdp_label_vector *v, int extent,
                           int (*fn)(const char *path, void *arg), void *arg)
{
	GDALDatasetH ds = extent ? v->ext.ds : v->lab.ds;
	char **list = ds ? GDALGetFileList(ds) : NULL;
	int rc = CDP_OK;

	for (char **f = list; f && *f && rc == CDP_OK; f++)
		rc = fn(*f, arg);
	CSLDestroy(list);
	return rc;
}

int cdp_label_vector_id_use(const cdp_label_vector *v, uint32_t id, char *what,
                            size_t cap)
{
	const cdp_label_vector_opts *o = v->o;

	if (!o->background_ignore && id == o->background)
		snprintf(what, cap, "the --background value");
	else if (!o->field && id == o->burn)
		snprintf(what, cap, "the --burn value%s", o->burn_given ? "" : " (default 1)");
	else if (o->field && v->lab.fstring && id < o->nclasses)
		snprintf(what, cap, "the id of --classes name '%s'", o->classes[id]);
	else if (o->field && id < 65535 && (v->ids[id / 8] >> (id % 8) & 1))
		snprintf(what, cap, "a value of the label attribute '%s'", o->field);
	else
		return 0;
	return 1;
}

void cdp_label_vector_close(cdp_label_vector *v)
{
	if (!v)
		return;
	src_close(&v->lab);
	src_close(&v->ext);
	free(v->ids);
	free(v->inside);
	free(v->halo);
	cdp_raster_transformer_free(v->tr);
	free(v);
}
