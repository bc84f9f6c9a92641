/* cdp_label.c: a label raster on an image's tile grid (cdp_label.h): the
 * grid check, the strip read of a label on the image's grid, the per-tile
 * warp of one on another, and the label map. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_label.h"
#include "cdp_num.h"
#include "cdp_record.h"

struct cdp_label {
	char *path;
	cdp_raster *r;
	cdp_raster *view;        /* warped with a map: r renumbered, else NULL */
	const cdp_raster_info *li;
	cdp_label_opts o;
	int kind, warped;
	uint32_t ignore;
	int *bands, nb;          /* values: the target bands (T = nb), else band 1 */
	int *hasnd;              /* values: [nb] the band has a nodata value, */
	double *nd;              /*   [nb] that value */
	uint64_t W;              /* image width */
	uint64_t y0;             /* the current strip */
	int sh;
	void *strip;             /* on the image's grid: (S, W) raw samples;
	                            values (T, S, W) */
	size_t strip_cap;
	uint8_t *smask;          /* on the image's grid, where the label's band
	                            has a GDAL mask of its own: the strip's
	                            (sh, W), 0 invalid; else NULL */
	size_t smask_cap;
	uint8_t *tmask;          /* (S, S): the tile's mask and smask's */
	size_t tmask_cap;
	int32_t *win;            /* warped: (sh, tw) values or -1; values:
	                            (T, sh, tw) f32 */
	size_t win_cap;
	void *tr;                /* warped: the label's pixels to the image's,
	                            built once (a spline is slow to solve) */
};

#define ERR(...) snprintf(err, errcap, __VA_ARGS__)

/* 1 when the label lies on the image's grid, 0 when it must be warped;
 * CDP_* (< 0) with err set when it can be neither (cdp_raster_same_grid). */
static int on_grid(const cdp_label *l, const cdp_raster_info *img, char *err, size_t errcap)
{
	const cdp_raster_info *li = l->li;
	char why[512];
	int same = cdp_raster_same_grid(img, li, why, sizeof why);

	if (same == CDP_EFORMAT)
		ERR("the image or its label '%s': %s", l->path, why);
	else if (same < 0 && cdp_raster_placed(li))
		ERR("label '%s' has %s, the image neither a geotransform nor GCPs: "
		    "nothing places the label on the image's grid", l->path,
		    li->has_gt ? "a geotransform" : "GCPs");
	else if (same < 0 && cdp_raster_placed(img))
		ERR("label '%s' has neither a geotransform nor GCPs, the image has %s: "
		    "nothing places the label on the image's grid", l->path,
		    img->has_gt ? "a geotransform" : "GCPs");
	else if (same < 0)
		ERR("label '%s' is %llux%llu, image is %llux%llu, and neither has a "
		    "georeference to place one on the other", l->path,
		    (unsigned long long)li->width, (unsigned long long)li->height,
		    (unsigned long long)img->width, (unsigned long long)img->height);
	return same;
}

/* The map is applied before the warp, so that mode counts classes, not
 * the label's codes: the warp reads a view of the label whose value v is
 * its id. A value the map lacks is, with --label-map-other ignore, the
 * view's nodata (-1), left out of a mode as the label's own nodata is;
 * else -(v + 2), told apart after the warp and refused where a pixel gets
 * it. */
static int map_view(cdp_label *l, char *err, size_t errcap)
{
	const cdp_labelmap *map = l->o.map;
	int32_t *lut = malloc(sizeof *lut * CDP_LABELMAP_NVALUES);
	char msg[512];
	int rc;

	if (!lut) {
		ERR("out of memory");
		return CDP_ENOMEM;
	}
	for (int32_t v = 0; v < CDP_LABELMAP_NVALUES; v++)
		lut[v] = map->id[v] != CDP_LABELMAP_NONE ? map->id[v]
		         : l->o.map_other_ignore ? -1 : -(v + 2);
	if ((rc = cdp_raster_open_lut(l->r, lut, CDP_LABELMAP_NVALUES, &l->view, msg,
	                              sizeof msg)))
		ERR("label '%s': cannot renumber it for the warp: %s", l->path, msg);
	free(lut);
	return rc;
}

/* The rest of cdp_label_open for a value label: its target bands, and
 * none of the class label's options. */
static int open_value(cdp_label *l, cdp_label **out, char *err, size_t errcap)
{
	const cdp_label_opts *o = &l->o;
	int n = o->nbands ? o->nbands : 1;

	if (o->map) {
		ERR("label '%s' is a value label, and a label map renumbers class labels",
		    l->path);
		goto bad;
	}
	if (o->has_ignore) {
		ERR("label '%s' is a value label: its missing targets are NaN, and an ignore "
		    "value is for class labels", l->path);
		goto bad;
	}
	if (o->resample == CDP_RESAMPLE_MODE) {
		ERR("label '%s' is a value label, and mode is for class labels (values take "
		    "near, bilinear, cubic or average)", l->path);
		goto bad;
	}
	if (!(l->bands = malloc(sizeof *l->bands * (size_t)n)) ||
	    !(l->hasnd = malloc(sizeof *l->hasnd * (size_t)n)) ||
	    !(l->nd = malloc(sizeof *l->nd * (size_t)n))) {
		ERR("out of memory");
		cdp_label_close(l);
		return CDP_ENOMEM;
	}
	for (int b = 0; b < n; b++) {
		l->bands[b] = o->nbands ? o->bands[b] : 1;
		if (l->bands[b] < 1 || (uint32_t)l->bands[b] > l->li->bands) {
			ERR("label '%s': target band %d requested, it has %u", l->path,
			    l->bands[b], l->li->bands);
			goto bad;
		}
		l->hasnd[b] = cdp_raster_band_nodata(l->r, l->bands[b], &l->nd[b]);
	}
	l->nb = n;
	l->kind = CDP_LABEL_F32;
	*out = l;
	return CDP_OK;
bad:
	cdp_label_close(l);
	return CDP_EMISMATCH;
}

int cdp_label_open(const char *path, const cdp_raster_info *img,
                   const cdp_label_opts *o, cdp_label **out, char *err, size_t errcap)
{
	cdp_label *l;
	char msg[512];
	int rc, g;

	*out = NULL;
	if (!(l = calloc(1, sizeof *l)) || !(l->path = strdup(path))) {
		free(l);
		cdp_raster_transformer_free(o->tr);
		ERR("out of memory");
		return CDP_ENOMEM;
	}
	l->o = *o;
	l->o.tr = NULL;
	l->tr = o->tr;          /* freed with l on every path below */
	l->W = img->width;
	if ((rc = cdp_raster_open(path, &l->r, msg, sizeof msg))) {
		ERR("cannot open label '%s': %s", path, msg);
		goto fail;
	}
	l->li = cdp_raster_get_info(l->r);
	if ((g = on_grid(l, img, err, errcap)) < 0) {
		rc = g;
		goto fail;
	}
	l->warped = !g;
	/* every label pixel would be ignored: a label of another place */
	if (!l->warped) {
		cdp_raster_transformer_free(l->tr);
		l->tr = NULL;
	}
	if (l->warped && !l->tr &&
	    !(l->tr = cdp_raster_transformer(l->li, img, o->tps, msg, sizeof msg))) {
		rc = CDP_EGDAL;
		ERR("label '%s': %s", path, msg);
		goto fail;
	}
	if (l->warped && (g = cdp_raster_overlaps(l->r, img, l->tr, msg, sizeof msg)) <= 0) {
		rc = g < 0 ? g : CDP_EMISMATCH;
		if (g < 0)
			ERR("label '%s': %s", path, msg);
		else
			ERR("label '%s' does not overlap the image", path);
		goto fail;
	}
	/* target bands and interpolation say values as a float type does */
	if (o->kind == CDP_LKIND_VALUE ||
	    (o->kind == CDP_LKIND_AUTO &&
	     (l->li->dtype == CDP_DT_F32 || l->li->dtype == CDP_DT_F64 || o->nbands ||
	      (o->resample != CDP_RESAMPLE_NEAR && o->resample != CDP_RESAMPLE_MODE))))
		return open_value(l, out, err, errcap);
	rc = CDP_EMISMATCH;
	if (o->nbands || (o->resample != CDP_RESAMPLE_NEAR && o->resample != CDP_RESAMPLE_MODE)) {
		ERR("label '%s' is a class label, and target bands and bilinear, cubic "
		    "and average resampling are for value labels", path);
		goto fail;
	}
	if (l->li->dtype != CDP_DT_U8 && l->li->dtype != CDP_DT_U16) {
		ERR("label '%s' is %s, need u8 or u16 for class labels (--label-kind value "
		    "takes it as a target)", path, cdp_dtype_name(l->li->dtype));
		goto fail;
	}
	if (o->map)
		l->kind = o->map->max_id < 255 && (!o->has_ignore || o->ignore <= 255)
		          ? CDP_LABEL_U8 : CDP_LABEL_U16;
	else
		l->kind = l->li->dtype == CDP_DT_U8 ? CDP_LABEL_U8 : CDP_LABEL_U16;
	l->ignore = o->has_ignore ? o->ignore : (l->kind == CDP_LABEL_U8 ? 255 : 65535);
	if (l->kind == CDP_LABEL_U8 && l->ignore > 255) {
		ERR("ignore value %u does not fit the u8 label '%s'", l->ignore, path);
		goto fail;
	}
	if (o->map && l->ignore <= o->map->max_id)
		for (size_t v = 0; v < CDP_LABELMAP_NVALUES; v++)
			if (o->map->id[v] == (int32_t)l->ignore) {
				ERR("the ignore value %u is also the class id of label value %zu "
				    "in the label map", l->ignore, v);
				goto fail;
			}
	if (l->warped && o->map && (rc = map_view(l, err, errcap)))
		goto fail;
	*out = l;
	return CDP_OK;
fail:
	cdp_label_close(l);
	return rc;
}

int cdp_label_kind(const cdp_label *l)
{
	return l->kind;
}

uint32_t cdp_label_len(const cdp_label *l)
{
	return l->kind == CDP_LABEL_F32 ? (uint32_t)l->nb : 0;
}

uint32_t cdp_label_ignore(const cdp_label *l)
{
	return l->ignore;
}

int cdp_label_warped(const cdp_label *l)
{
	return l->warped;
}

cdp_raster *cdp_label_raster(cdp_label *l)
{
	return l->r;
}

/* Grows *buf to n bytes. */
static int grow(void **buf, size_t *cap, size_t n)
{
	void *p;

	if (n <= *cap)
		return CDP_OK;
	if (!(p = realloc(*buf, n)))
		return CDP_ENOMEM;
	*buf = p;
	*cap = n;
	return CDP_OK;
}

int cdp_label_strip(cdp_label *l, uint64_t y0, int sh, char *err, size_t errcap)
{
	size_t n, lsz = cdp_dtype_size(l->li->dtype);
	const int one = 1, nb = l->nb ? l->nb : 1;
	char msg[512];
	int rc;

	l->y0 = y0;
	l->sh = sh;
	if (l->warped)
		return CDP_OK;
	/* (nb, sh, W) samples of the label's type */
	if (cdp_mul_size((size_t)sh * lsz * (size_t)nb, (size_t)l->W, &n) ||
	    grow(&l->strip, &l->strip_cap, n)) {
		ERR("out of memory for a strip of label '%s'", l->path);
		return CDP_ENOMEM;
	}
	if ((rc = cdp_raster_read(l->r, l->nb ? l->bands : &one, nb, 0, (int64_t)y0, (int)l->W,
	                          sh, l->strip, msg, sizeof msg))) {
		ERR("cannot read '%s': %s", l->path, msg);
		return rc;
	}
	/* pixels that GDAL's mask (a per-dataset mask, internal or .msk, an
	 * alpha band) marks invalid are no label, as an image's are no data;
	 * a nodata value is the label's own value, kept */
	if (!cdp_raster_has_mask(l->r, l->nb ? l->bands[0] : 1))
		return CDP_OK;
	if (grow((void **)&l->smask, &l->smask_cap, (size_t)sh * l->W)) {
		ERR("out of memory for a strip of label '%s'", l->path);
		return CDP_ENOMEM;
	}
	if ((rc = cdp_raster_read_mask(l->r, l->nb ? l->bands[0] : 1, 0, (int64_t)y0, (int)l->W,
	                               sh, l->smask, msg, sizeof msg)))
		ERR("cannot read the mask of '%s': %s", l->path, msg);
	return rc;
}

/* The tile's mask m (S, S) and, on the image's grid, the label's own for
 * the tile at column x0 (tw columns of the strip): valid where both are;
 * m itself where the label has none. */
static const uint8_t *tile_mask(cdp_label *l, uint64_t x0, int tw, int S, const uint8_t *m)
{
	if (l->warped || !l->smask)
		return m;
	if (grow((void **)&l->tmask, &l->tmask_cap, (size_t)S * S))
		return NULL;
	for (int y = 0; y < S; y++)
		for (int x = 0; x < S; x++) {
			size_t p = (size_t)y * S + x;
			l->tmask[p] = y < l->sh && x < tw && m[p] ? l->smask[y * l->W + x0 + x] : 0;
		}
	return l->tmask;
}

/* The window (x0, y0, tw, sh) of the image's grid warped into l->win. */
static int warp(cdp_label *l, uint64_t x0, int tw, char *err, size_t errcap)
{
	char msg[512];
	int rc;

	if (grow((void **)&l->win, &l->win_cap, (size_t)tw * l->sh * sizeof(int32_t))) {
		ERR("out of memory for a tile of label '%s'", l->path);
		return CDP_ENOMEM;
	}
	if ((rc = cdp_raster_warp(l->view ? l->view : l->r, 1, l->tr, (int64_t)x0,
	                          (int64_t)l->y0, tw, l->sh, l->o.resample, l->o.max_error,
	                          l->win, msg, sizeof msg)))
		ERR("cannot warp label '%s' onto the image's grid: %s", l->path, msg);
	return rc;
}

/* Target t's value v as a target: NaN for the band's nodata (compared in
 * the label's type as GDAL does: a float32 raster's -9999.5 is the float,
 * not the double) and for what is not finite as a float32. */
static float target_of(const cdp_label *l, int t, double v)
{
	float f = (float)v;

	if (l->hasnd[t] && (l->li->dtype == CDP_DT_F32 ? f == (float)l->nd[t] : v == l->nd[t]))
		return NAN;
	return isfinite(f) ? f : NAN;
}

/* cdp_label_cut of a value label: lt (T, S, S) f32. */
static int cut_values(cdp_label *l, uint64_t x0, int tw, int S, const uint8_t *m,
                      float *lt, char *err, size_t errcap)
{
	const size_t np = (size_t)S * S, W = l->W, wp = (size_t)tw * l->sh;
	const int dt = l->li->dtype;
	char msg[512];
	int rc;

	if (l->warped) {
		if (grow((void **)&l->win, &l->win_cap, wp * (size_t)l->nb * sizeof(float))) {
			ERR("out of memory for a tile of label '%s'", l->path);
			return CDP_ENOMEM;
		}
		if ((rc = cdp_raster_warp_f32(l->r, l->bands, l->nb, l->tr, (int64_t)x0,
		                              (int64_t)l->y0, tw, l->sh, l->o.resample,
		                              l->o.max_error, (float *)l->win, msg, sizeof msg))) {
			ERR("cannot warp label '%s' onto the image's grid: %s", l->path, msg);
			return rc;
		}
	}
	for (int t = 0; t < l->nb; t++)
		for (int y = 0; y < S; y++)
			for (int x = 0; x < S; x++) {
				size_t p = (size_t)y * S + x;
				float v = NAN;
				if (y < l->sh && x < tw && m[p]) {
					if (l->warped)
						v = ((const float *)l->win)[t * wp + (size_t)y * tw + x];
					else
						v = target_of(l, t, cdp_dtype_get(dt, l->strip,
						              ((size_t)t * l->sh + y) * W + x0 + x));
					v = isfinite(v) ? v : NAN;
				}
				lt[t * np + p] = v;
			}
	return CDP_OK;
}

void cdp_label_copy(const void *strip, uint64_t W, int sh, int lsz, uint64_t x0, int tw,
                    int S, const uint8_t *m, uint32_t ignore, void *lt)
{
	for (int y = 0; y < S; y++)
		for (int x = 0; x < S; x++) {
			size_t p = (size_t)y * S + x;
			uint32_t v = ignore;
			if (y < sh && x < tw && m[p])
				v = lsz == 1 ? ((const uint8_t *)strip)[y * W + x0 + x]
				    : ((const uint16_t *)strip)[y * W + x0 + x];
			if (lsz == 1)
				((uint8_t *)lt)[p] = (uint8_t)v;
			else
				((uint16_t *)lt)[p] = (uint16_t)v;
		}
}

int cdp_label_cut(cdp_label *l, uint64_t x0, int tw, int S, const uint8_t *m, void *lt,
                  char *err, size_t errcap)
{
	const cdp_labelmap *map = l->o.map;
	const int u8in = l->li->dtype == CDP_DT_U8, u8out = l->kind == CDP_LABEL_U8;
	const size_t W = l->W;
	int32_t absent;
	int rc;

	if (!(m = tile_mask(l, x0, tw, S, m))) {
		ERR("out of memory for a tile of label '%s'", l->path);
		return CDP_ENOMEM;
	}
	if (l->kind == CDP_LABEL_F32)
		return cut_values(l, x0, tw, S, m, lt, err, errcap);
	if (!l->warped && !map) {
		/* the label's own values: a copy, as cdp-tile always cut them */
		cdp_label_copy(l->strip, W, l->sh, u8in ? 1 : 2, x0, tw, S, m, l->ignore, lt);
		return CDP_OK;
	}
	if (l->warped && (rc = warp(l, x0, tw, err, errcap)))
		return rc;
	for (int y = 0; y < S; y++)
		for (int x = 0; x < S; x++) {
			size_t p = (size_t)y * S + x;
			int32_t v = -1;
			if (y < l->sh && x < tw && m[p]) {
				if (l->warped)
					v = l->win[(size_t)y * tw + x];
				else
					v = u8in ? ((uint8_t *)l->strip)[y * W + x0 + x]
					    : ((uint16_t *)l->strip)[y * W + x0 + x];
			}
			/* a value the map lacks: through the view, or looked up */
			absent = -1;
			if (l->view && v < -1)
				absent = -v - 2;
			else if (v >= 0 && map && !l->view) {
				if (map->id[v] == CDP_LABELMAP_NONE)
					absent = v;
				else
					v = map->id[v];
			}
			if (absent >= 0) {
				if (!l->o.map_other_ignore) {
					ERR("label '%s': value %d at pixel (%llu, %llu) is not in the "
					    "label map (--label-map-other ignore makes it ignored)",
					    l->path, (int)absent, (unsigned long long)(x0 + x),
					    (unsigned long long)(l->y0 + y));
					return CDP_ERANGE;
				}
				v = -1;
			}
			if (v < 0)
				v = (int32_t)l->ignore;
			if (u8out)
				((uint8_t *)lt)[p] = (uint8_t)v;
			else
				((uint16_t *)lt)[p] = (uint16_t)v;
		}
	return CDP_OK;
}

void *cdp_label_take_transformer(cdp_label *l)
{
	void *tr = l ? l->tr : NULL;

	if (l)
		l->tr = NULL;
	return tr;
}

void cdp_label_close(cdp_label *l)
{
	if (!l)
		return;
	cdp_raster_transformer_free(l->tr);
	cdp_raster_close(l->view);
	cdp_raster_close(l->r);
	free(l->strip);
	free(l->smask);
	free(l->tmask);
	free(l->win);
	free(l->bands);
	free(l->hasnd);
	free(l->nd);
	free(l->path);
	free(l);
}
