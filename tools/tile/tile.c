/* tile.c: cut rasters into fixed-size tiles (cdp-tile's work): the tile
 * grid, opening and checking inputs, reading strips, cutting tiles and
 * cdp_tile_run's loop. Statistics for --standardize and everything that
 * writes tile files or stream frames live in tile_out.c; tile_int.h holds
 * what the two share.
 *
 * For each input it reads one strip per row of tiles, `size` rows by the full
 * width of the selected bands, (nb, sh, W), with one GDAL read (plus one for
 * the label on the image's grid, a warp per tile for one on another grid,
 * lib/cdp_label.h, or a rasterization of a vector label's features under the
 * strip, lib/cdp_label_vector.h, and one for GDAL's mask where the dataset
 * has a real one), and
 * cuts the row's tiles from memory, so the source is read in its natural
 * order and never tile by tile. A tile is (nb, S, S) samples of the source
 * dtype, or float32 with --standardize; its mask and label are (S, S).
 *
 * With --time an input is several dates of one place, opened as one raster
 * whose bands are the dates' bands stacked in time order, later dates on
 * another grid warped onto the first's (cdp_raster_open_time,
 * lib/cdp_raster.h): a tile is then (dates * nb, S, S), cut from the same
 * window of every date, and its mask is invalid where any date is.
 *
 * Every input is opened and checked once before anything is written, so bad
 * input fails without output. Tile files are written under temporary names
 * (cdp_out.h) and renamed onto their names only when every input is done,
 * so a failed run removes what it wrote and leaves earlier tiles of the
 * folder as they were; a failed stream simply lacks its 'E' frame, which
 * readers detect.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_key.h"
#include "cdp_label.h"
#include "cdp_num.h"
#include "cdp_progress.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "cdp_stream.h"
#include "tile.h"
#include "tile_int.h"

void cdp_tile_opts_init(cdp_tile_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = 256;
	o->edge = CDP_EDGE_SHIFT;
	o->max_nodata = -1;
	o->label_max_error = 0.125;   /* gdalwarp's default */
	o->format = CDP_TILE_STREAM;
	cdp_label_vector_opts_init(&o->vec);
}

/* Tiles along an axis of len pixels; 0 when the axis is shorter than a tile
 * and the edge mode is not pad. */
static uint64_t grid_count(uint64_t len, int S, int T, int edge)
{
	if (len < (uint64_t)S)
		return edge == CDP_EDGE_PAD ? 1 : 0;
	if (edge == CDP_EDGE_DROP)
		return (len - S) / T + 1;
	return (len - S + T - 1) / T + 1;
}

static uint64_t grid_off(uint64_t i, uint64_t len, int S, int T, int edge)
{
	uint64_t off = i * (uint64_t)T;

	if (edge == CDP_EDGE_SHIFT && off + S > len)
		off = len - S;
	return off;
}

static void input_close(input *in)
{
	cdp_raster_close(in->r);
	cdp_label_close(in->lab);
	cdp_label_vector_close(in->vlab);
	free(in->lpath);
	free(in->first);
	free(in->bands);
	free(in->hasnd);
	free(in->ndb);
	memset(in, 0, sizeof(*in));
}

/* The label ignore value: --ignore, else the largest value of the kind. */
static int label_ignore(ctx *c, input *in)
{
	const cdp_tile_opts *o = c->o;
	char what[320];

	in->ignore = o->has_ignore ? o->ignore
	                           : (in->lkind == CDP_LABEL_U8 ? 255 : 65535);
	if (in->lkind == CDP_LABEL_U8 && in->ignore > 255) {
		ERR(c, "'%s': ignore value %u does not fit the u8 label '%s'",
		    in->path, in->ignore, in->lpath);
		return CDP_EMISMATCH;
	}
	/* pixels of that class would be written as ignored: it would vanish */
	if (in->vlab && cdp_label_vector_id_use(in->vlab, in->ignore, what, sizeof what)) {
		ERR(c, "'%s': the ignore value %u is also %s of the label '%s'", in->path,
		    in->ignore, what, in->lpath);
		return CDP_EMISMATCH;
	}
	return CDP_OK;
}

/* in's label in->lpath is a vector dataset: opened and checked
 * (cdp_label_vector.h), rasterized strip by strip in cut_read_strip. */
static int input_open_vector(ctx *c, size_t i, input *in)
{
	char msg[1024];
	int rc;

	/* an image placed by GCPs only is in their CRS, and its features are
	 * rasterized through them (cdp_label_vector_read_rows) */
	if ((rc = cdp_label_vector_open(in->lpath, &c->o->vec, cdp_raster_grid_crs(in->ri),
	                                &in->vlab, msg, sizeof msg))) {
		ERR(c, "'%s': label %s", in->path, msg);
		goto fail;
	}
	/* the check's spline, for the cut (the vector owns it now) */
	if (c->ltr && c->ltr[i]) {
		cdp_label_vector_give_transformer(in->vlab, c->ltr[i]);
		c->ltr[i] = NULL;
	}
	/* before the stream starts: GCPs that place nothing are the image's fault */
	if ((rc = cdp_label_vector_place(in->vlab, in->ri, c->o->tps, msg, sizeof msg))) {
		ERR(c, "'%s': label '%s': the GCPs of '%s' cannot place it: %s", in->path,
		    in->lpath, in->path, msg);
		goto fail;
	}
	in->lkind = cdp_label_vector_kind(in->vlab);
	/* once, not once per input under --label-all */
	if (cdp_label_vector_note(in->vlab) && !c->res->note[0])
		snprintf(c->res->note, sizeof c->res->note, "label '%s': %s", in->lpath,
		         cdp_label_vector_note(in->vlab));
	if ((rc = label_ignore(c, in)) == CDP_OK)
		return CDP_OK;
fail:
	input_close(in);
	return rc;
}

/* in's nodata: --nodata's value on every band (which the data type must
 * hold), else each selected band's own; see tile_int.h. */
static int input_nodata(ctx *c, input *in)
{
	const cdp_tile_opts *o = c->o;

	if (o->has_nodata && !cdp_raster_dtype_holds(in->dt, o->nodata)) {
		const char *t = cdp_dtype_name(in->dt);
		/* "a u8" (you-eight), "an i16", "an f32" */
		ERR(c, "'%s': --nodata %g is not %s %s value", in->path, o->nodata,
		    t[0] == 'u' ? "a" : "an", t);
		return CDP_ERANGE;
	}
	if (!(in->hasnd = calloc((size_t)in->nb, sizeof *in->hasnd)) ||
	    !(in->ndb = calloc((size_t)in->nb, sizeof *in->ndb))) {
		ERR(c, "out of memory");
		return CDP_ENOMEM;
	}
	in->nd_one = 1;
	for (int b = 0; b < in->nb; b++) {
		if (o->has_nodata) {
			in->hasnd[b] = 1;
			in->ndb[b] = o->nodata;
		} else {
			in->hasnd[b] = cdp_raster_band_nodata(in->r, in->bands[b], &in->ndb[b]);
		}
		in->has_nd |= in->hasnd[b];
		in->nd_one &= in->hasnd[b] && (in->ndb[b] == in->ndb[0] ||
		                               (isnan(in->ndb[b]) && isnan(in->ndb[0])));
	}
	in->nd = in->nd_one ? in->ndb[0] : 0;
	in->nd_any = o->standardize || !in->nd_one;
	return CDP_OK;
}

/* Opens input i and its label and checks everything that can be checked
 * before reading pixels. On failure, in is closed and err is set. */
static int input_open(ctx *c, size_t i, input *in)
{
	const cdp_tile_opts *o = c->o;
	cdp_label_opts lo;
	char msg[512];
	int rc;

	memset(in, 0, sizeof(*in));
	in->path = o->inputs[i];
	if (o->time) {
		/* named, labelled and reported by its first date */
		in->time = o->inputs[i];
		if (!(in->first = strndup(in->time, strcspn(in->time, ",")))) {
			rc = CDP_ENOMEM;
			ERR(c, "out of memory");
			goto fail;
		}
		in->path = in->first;
		if ((rc = cdp_raster_open_time(in->time, CDP_RASTER_TIME_ET, o->tps, &in->r, msg,
		                               sizeof(msg)))) {
			ERR(c, "--time '%s': %s", in->time, msg);
			goto fail;
		}
	} else if ((rc = cdp_raster_open(in->path, &in->r, msg, sizeof(msg)))) {
		if (rc == CDP_EUNSUP)
			ERR(c, "'%s': %s (need u8, u16, i16, u32, i32, f32 or f64)",
			    in->path, msg);
		else
			ERR(c, "cannot open '%s': %s", in->path, msg);
		goto fail;
	}
	in->ri = cdp_raster_get_info(in->r);
	in->dt = in->ri->dtype;
	if (o->names) {
		if (cdp_key_name_check(o->names[i])) {
			ERR(c, "'%s': invalid name '%s' (1-%d of A-Z a-z 0-9 . _ + -)",
			    in->path, o->names[i], CDP_NAME_MAX);
			rc = CDP_EKEY;
			goto fail;
		}
		snprintf(in->name, sizeof(in->name), "%s", o->names[i]);
	} else if ((rc = cdp_key_stem(in->path, in->name, sizeof(in->name)))) {
		/* with room for any NAME, the stem is empty or too long */
		const char *base = strrchr(in->path, '/');
		base = base ? base + 1 : in->path;
		if (!*base)
			ERR(c, "'%s': cannot make a tile name from the file name: it is empty "
			    "(use --name)", in->path);
		else
			ERR(c, "'%s': cannot make a tile name from the file name: without its "
			    "extension it is longer than the %d characters of a tile name (use "
			    "--name)", in->path, CDP_NAME_MAX);
		goto fail;
	}

	/* --bands selects a date's bands; the stacked input holds date d's
	 * band b as band d * (its bands a date) + b */
	in->ndates = cdp_raster_dates(in->r);
	in->bpd = o->bands ? (int)o->nbands : (int)in->ri->bands / in->ndates;
	in->nb = in->bpd * in->ndates;
	in->bands = malloc(sizeof(int) * (size_t)in->nb);
	if (!in->bands) {
		rc = CDP_ENOMEM;
		ERR(c, "out of memory");
		goto fail;
	}
	for (int b = 0; b < in->nb; b++) {
		uint32_t per = in->ri->bands / (uint32_t)in->ndates;
		int sel = o->bands ? o->bands[b % in->bpd] : b % in->bpd + 1;
		if (sel < 1 || (uint32_t)sel > per) {
			ERR(c, "'%s': band %d requested, raster has %u", in->path, sel, per);
			rc = CDP_ESHAPE;
			goto fail;
		}
		in->bands[b] = (int)(b / in->bpd * per) + sel;
	}
	if ((uint32_t)in->nb > CDP_RECORD_MAXDIM) {
		ERR(c, "'%s': %d bands, at most %u fit a record", in->path, in->nb,
		    CDP_RECORD_MAXDIM);
		rc = CDP_ESHAPE;
		goto fail;
	}
	in->odt = o->standardize ? CDP_DT_F32 : in->dt;
	if ((rc = input_nodata(c, in)))
		goto fail;
	in->use_mask = cdp_raster_has_mask(in->r, in->bands[0]);
	/* a colour table's indices are no measurement a model can learn from */
	if (cdp_raster_paletted(in->r)) {
		ERR(c, "'%s': band 1 is paletted (colour table indices): expand it first "
		    "(gdal_translate -expand rgb IN OUT, or a VRT)", in->path);
		rc = CDP_EUNSUP;
		goto fail;
	}

	in->rows = grid_count(in->ri->height, c->S, c->T, o->edge);
	in->cols = grid_count(in->ri->width, c->S, c->T, o->edge);
	if (in->rows == 0 || in->cols == 0) {
		ERR(c, "'%s': %llux%llu is smaller than the %dx%d tile (use --edge pad)",
		    in->path, (unsigned long long)in->ri->width,
		    (unsigned long long)in->ri->height, c->S, c->S);
		rc = CDP_ESHAPE;
		goto fail;
	}
	in->rdig = cdp_key_digits(in->rows);
	in->cdig = cdp_key_digits(in->cols);

	if (o->format == CDP_TILE_PNG && o->outdir &&
	    ((in->odt != CDP_DT_U8 && in->odt != CDP_DT_U16) || in->nb > 4)) {
		ERR(c, "'%s': png tiles need 1-4 bands of u8 or u16, not %d of %s "
		    "(use --format tif)", in->path, in->nb, cdp_dtype_name(in->odt));
		rc = CDP_EUNSUP;
		goto fail;
	}
	/* a PNG of 2 or 4 channels is grey or RGB with alpha: its last band
	 * would be read as transparency, and a tif tile promises that a band
	 * is never taken for it unless it is alpha (a NIR band was) */
	if (o->format == CDP_TILE_PNG && o->outdir && (in->nb == 2 || in->nb == 4) &&
	    !cdp_raster_band_alpha(in->r, in->bands[in->nb - 1])) {
		ERR(c, "'%s': band %d is not an alpha band, and png tiles of %d bands take their "
		    "last for transparency (use --format tif, or --bands to leave it out)", in->path,
		    in->bands[in->nb - 1], in->nb);
		rc = CDP_EUNSUP;
		goto fail;
	}

	if (o->labels || o->label_all)
		in->lpath = strdup(o->labels ? o->labels[i] : o->label_all);
	else if (o->label_suffix &&
	         (rc = cdp_label_vector_find(in->path, o->label_suffix, &in->lpath, msg,
	                                     sizeof msg))) {
		ERR(c, "'%s': %s", in->path, msg);
		goto fail;
	}
	if ((o->labels || o->label_all || o->label_suffix) && !in->lpath) {
		rc = CDP_ENOMEM;
		ERR(c, "out of memory");
		goto fail;
	}
	if (!in->lpath)
		return CDP_OK;
	/* a label that is not there is reported as such, not as "not a
	 * vector" when vector options were given */
	if ((rc = cdp_label_vector_probe(in->lpath, msg, sizeof msg)) < 0) {
		ERR(c, "'%s': cannot open label '%s': %s", in->path, in->lpath, msg);
		rc = CDP_EGDAL;
		goto fail;
	}
	if (rc == 1) {
		if (o->label_kind == CDP_LKIND_VALUE) {
			ERR(c, "'%s': label '%s' is a vector dataset, and value labels are "
			    "rasters (rasterize the values first)", in->path, in->lpath);
			rc = CDP_EUNSUP;
			goto fail;
		}
		/* --label-map renumbers a label raster's values; a vector's ids
		 * come from --burn or --label-field (with --classes) */
		if (o->label_map) {
			ERR(c, "'%s': label '%s' is a vector dataset, and --label-map applies "
			    "to label rasters only (give the ids with --burn or --label-field, "
			    "names with --classes)", in->path, in->lpath);
			rc = CDP_EUNSUP;
			goto fail;
		}
		return input_open_vector(c, i, in);
	}
	if (o->vec.given) {
		ERR(c, "'%s': label '%s' is not a vector dataset, and the vector label "
		    "options apply to vector labels only", in->path, in->lpath);
		rc = CDP_EUNSUP;
		goto fail;
	}
	lo = c->lopts;
	lo.tr = c->ltr ? c->ltr[i] : NULL;   /* fitted by the check: the label owns it now */
	if (c->ltr)
		c->ltr[i] = NULL;
	if ((rc = cdp_label_open(in->lpath, in->ri, &lo, &in->lab, msg, sizeof(msg)))) {
		ERR(c, "'%s': %s", in->path, msg);
		goto fail;
	}
	in->lkind = cdp_label_kind(in->lab);
	in->llen = cdp_label_len(in->lab);
	in->ignore = in->lkind == CDP_LABEL_F32 ? 0 : cdp_label_ignore(in->lab);
	if (in->lkind == CDP_LABEL_F32 && o->outdir && o->format == CDP_TILE_PNG) {
		ERR(c, "'%s': value label '%s' needs float tiles (use --format tif)", in->path,
		    in->lpath);
		rc = CDP_EUNSUP;
		goto fail;
	}
	return CDP_OK;
fail:
	input_close(in);
	return rc;
}

void tile_mark_nodata(const input *in, const void *img, size_t bstride, size_t rstride,
                      int w, int h, int any, uint8_t *m, size_t mstride)
{
	cdp_raster_mark_nodata(img, in->dt, in->nb, bstride, rstride, w, h, in->ndb, in->hasnd,
	                       any || in->nd_any, m, mstride);
}

/* Writes the sample value v of dtype dt into out[dsize]. */
static void sample_bytes(int dt, double v, void *out)
{
	switch (dt) {
	case CDP_DT_U8:  *(uint8_t *)out = (uint8_t)v; break;
	case CDP_DT_U16: { uint16_t s = (uint16_t)v; memcpy(out, &s, 2); break; }
	case CDP_DT_I16: { int16_t s = (int16_t)v; memcpy(out, &s, 2); break; }
	case CDP_DT_U32: { uint32_t s = (uint32_t)v; memcpy(out, &s, 4); break; }
	case CDP_DT_I32: { int32_t s = (int32_t)v; memcpy(out, &s, 4); break; }
	case CDP_DT_F32: { float s = (float)v; memcpy(out, &s, 4); break; }
	case CDP_DT_F64: memcpy(out, &v, 8); break;
	}
}

/* One input's cutting state: its buffers, sized once, and the strip being
 * cut. strip (nb, sh, W) samples with bands bs apart, gstrip (sh, W) GDAL's
 * mask; tile (nb, S, S) samples, m (S, S) the tile's mask (0 invalid, 255
 * valid), lt (S, S) its labels (cut by cdp_label.h, which holds the label's
 * strip or warps the tile's window), ft (nb, S, S) the standardized tile. */
typedef struct cutter {
	ctx *c;
	input *in;
	size_t np, dsz, lsz;       /* S*S, sample and label sizes */
	char *strip, *tile, *scratch;
	uint8_t *gstrip, *m, *lt;
	uint8_t *lstrip;           /* (S, W) a vector label's strip, rasterized */
	uint8_t *vstrip;           /* (S, W) the validity in --standardize's first pass */
	float *ft;
	unsigned char *padv;       /* [nb] the padding sample of each band */
	cdp_buf enc;
	uint64_t y0;               /* the strip's first row */
	int sh;                    /* its rows, S but at a shifted or padded edge */
	size_t bs;                 /* band stride in the strip: sh * W */
} cutter;

static void cut_free(cutter *k)
{
	cdp_buf_free(&k->enc);
	free(k->strip);
	free(k->tile);
	free(k->scratch);
	free(k->gstrip);
	free(k->m);
	free(k->lt);
	free(k->lstrip);
	free(k->vstrip);
	free(k->ft);
	free(k->padv);
}

/* Sizes and allocates k's buffers for input in; on failure the caller
 * still calls cut_free. */
static int cut_alloc(cutter *k, ctx *c, input *in)
{
	const cdp_tile_opts *o = c->o;
	const int S = c->S;
	const uint64_t W = in->ri->width;
	const int png = o->outdir && o->format == CDP_TILE_PNG;
	size_t sn, tn, t8;

	memset(k, 0, sizeof(*k));
	k->c = c;
	k->in = in;
	k->np = (size_t)S * S;
	k->dsz = cdp_dtype_size(in->dt);
	k->lsz = in->lkind == CDP_LABEL_F32 ? 4 * (size_t)in->llen
	         : in->lkind == CDP_LABEL_U16 ? 2 : 1;
	/* Sizes: strip nb*S*W samples, tile nb*S*S samples. */
	if (cdp_mul_size((size_t)in->nb * S, (size_t)W, &sn) ||
	    cdp_mul_size(sn, k->dsz, &sn) || cdp_mul_size((size_t)in->nb, k->np, &tn) ||
	    cdp_mul_size(tn, 8, &t8)) {
		ERR(c, "'%s': a strip of %d rows is too large", in->path, S);
		return CDP_EOVERFLOW;
	}
	k->strip = malloc(sn);
	k->tile = malloc(tn * k->dsz);
	k->m = malloc(k->np);
	k->gstrip = malloc((size_t)S * W);
	if (in->lkind)
		k->lt = malloc(k->np * k->lsz);
	if (in->vlab)
		k->lstrip = malloc((size_t)S * W * k->lsz);
	if (o->standardize && !o->stats_path)
		k->vstrip = malloc((size_t)S * W);
	if (o->standardize)
		k->ft = malloc(tn * sizeof(float));
	if (png)
		k->scratch = malloc(tn * k->dsz);
	k->padv = malloc((size_t)in->nb * k->dsz);
	if (!k->strip || !k->tile || !k->m || !k->gstrip || !k->padv ||
	    (in->lkind && !k->lt) || (in->vlab && !k->lstrip) || (o->standardize && !k->ft) ||
	    (o->standardize && !o->stats_path && !k->vstrip) ||
	    (png && !k->scratch)) {
		ERR(c, "'%s': out of memory for a strip of %d rows", in->path, S);
		return CDP_ENOMEM;
	}
	/* a band's own nodata where its type holds it */
	for (int b = 0; b < in->nb; b++)
		sample_bytes(in->dt, in->hasnd[b] && cdp_raster_dtype_holds(in->dt, in->ndb[b])
		             ? in->ndb[b] : 0, k->padv + (size_t)b * k->dsz);
	return CDP_OK;
}

/* Whether input in can be tiled, checked before anything is written: an
 * uncompressed record (image, label and a mask, the largest a tile gives)
 * must fit a stream frame, and in's buffers must be allocatable (they are
 * freed again and allocated when in's turn comes, so only one input's are
 * held at a time). Checked only at the input's turn, either failure left
 * the earlier inputs' tiles written. */
static int input_fits(ctx *c, input *in)
{
	const cdp_tile_opts *o = c->o;
	cdp_record rec;
	size_t img = 0, lab = 0, msk = 0, total;
	cutter k;
	int rc;

	if (!o->outdir && !o->zlevel) {
		memset(&rec, 0, sizeof rec);
		rec.dtype = in->odt;
		rec.label_kind = in->lkind;
		rec.label_len = in->llen;
		rec.flags = CDP_REC_MASK;
		rec.bands = (uint32_t)in->nb;
		rec.height = rec.width = (uint32_t)c->S;
		if (cdp_record_sizes(&rec, &img, &lab, &msk) != CDP_OK ||
		    cdp_add_size(img, lab, &total) || cdp_add_size(total, msk, &total) ||
		    cdp_add_size(total, CDP_RECORD_HDR + 4, &total) || total > CDP_STREAM_MAXBODY) {
			ERR(c, "'%s': a tile of %dx%d pixels takes up to %.0f bytes, a stream frame "
			    "holds at most %u (use -z, a smaller -s, or -O DIR)", in->path, c->S, c->S,
			    (double)img + (double)lab + (double)msk + CDP_RECORD_HDR + 4,
			    CDP_STREAM_MAXBODY);
			return CDP_EOVERFLOW;
		}
	}
	rc = cut_alloc(&k, c, in);
	cut_free(&k);
	return rc;
}

/* --standardize without --stats: this input's own per-band mean and std
 * (c->mean, c->std [nb]), a pass over the raster through k's buffers. */
static int cut_stats(cutter *k)
{
	ctx *c = k->c;
	double *nm = realloc(c->mean, sizeof(double) * k->in->nb), *ns;

	if (nm)
		c->mean = nm;
	ns = nm ? realloc(c->std, sizeof(double) * k->in->nb) : NULL;
	if (!ns) {
		ERR(c, "out of memory");
		return CDP_ENOMEM;
	}
	c->std = ns;
	return tile_stats_compute(c, k->in, k->strip, k->gstrip, k->vstrip);
}

/* Reads the strip of sh rows from row y0: the bands, GDAL's mask where the
 * dataset has one, the label. */
static int cut_read_strip(cutter *k, uint64_t y0, int sh)
{
	ctx *c = k->c;
	input *in = k->in;
	const int W = (int)in->ri->width;
	char msg[512];
	int rc;

	k->y0 = y0;
	k->sh = sh;
	k->bs = (size_t)sh * in->ri->width;
	if ((rc = cdp_raster_read(in->r, in->bands, in->nb, 0, (int64_t)y0, W, sh,
	                          k->strip, msg, sizeof(msg))) ||
	    (in->use_mask &&
	     (rc = cdp_raster_read_mask(in->r, in->bands[0], 0, (int64_t)y0, W, sh,
	                                k->gstrip, msg, sizeof(msg))))) {
		ERR(c, "cannot read '%s': %s", in->path, msg);
		return rc;
	}
	if (in->vlab) {
		/* the scene's rows: a tile's label is its window of the scene's,
		 * whatever strip it is cut from */
		if ((rc = cdp_label_vector_read_rows(in->vlab, in->ri, c->o->tps, (int64_t)y0, sh,
		                                     in->ignore, k->lstrip, msg, sizeof(msg)))) {
			ERR(c, "cannot read '%s': %s", in->lpath, msg);
			return rc;
		}
	} else if (in->lkind && (rc = cdp_label_strip(in->lab, y0, sh, msg, sizeof(msg)))) {
		ERR(c, "%s", msg);
		return rc;
	}
	return CDP_OK;
}

/* The tile's samples: columns [x0, x0 + tw) of the strip's sh rows, the
 * rest of the (S, S) tile the padding sample. */
static void cut_copy(cutter *k, uint64_t x0, int tw)
{
	const int S = k->c->S;
	const uint64_t W = k->in->ri->width;
	const size_t dsz = k->dsz;

	for (int b = 0; b < k->in->nb; b++)
		for (int y = 0; y < S; y++) {
			char *d = k->tile + ((size_t)b * k->np + (size_t)y * S) * dsz;
			int from = 0;
			if (y < k->sh) {
				memcpy(d, k->strip + (b * k->bs + y * W + x0) * dsz,
				       (size_t)tw * dsz);
				from = tw;
			}
			for (int x = from; x < S; x++)
				memcpy(d + (size_t)x * dsz, k->padv + (size_t)b * dsz, dsz);
		}
}

/* The tile's mask: valid inside the raster unless nodata (tile_mark_nodata)
 * or masked by GDAL. Returns the number of valid pixels. */
static size_t cut_mask(cutter *k, uint64_t x0, int tw)
{
	const input *in = k->in;
	const int S = k->c->S;
	const uint64_t W = in->ri->width;
	size_t valid = 0;

	memset(k->m, 0, k->np);
	for (int y = 0; y < k->sh; y++)
		memset(k->m + (size_t)y * S, 255, (size_t)tw);
	if (in->has_nd)
		tile_mark_nodata(in, k->strip + x0 * k->dsz, k->bs, W, tw, k->sh, 0, k->m, S);
	for (int y = 0; in->use_mask && y < k->sh; y++)
		for (int x = 0; x < tw; x++)
			if (!k->gstrip[y * W + x0 + x])
				k->m[(size_t)y * S + x] = 0;
	for (size_t p = 0; p < k->np; p++)
		valid += k->m[p] != 0;
	return valid;
}

/* A vector label's tile: the rasterized strip's labels at valid pixels,
 * the ignore value elsewhere (padding included), by the same copy as a
 * label raster on the image's grid (cdp_label_cut). */
static void cut_vector_labels(cutter *k, uint64_t x0, int tw)
{
	cdp_label_copy(k->lstrip, k->in->ri->width, k->sh, (int)k->lsz, x0, tw, k->c->S, k->m,
	               k->in->ignore, k->lt);
}

/* --standardize: ft = (x - mean) / std per band at valid pixels, 0 at the
 * others. A valid value that is not finite, or does not standardize to a
 * finite float32, is an error whether the statistics came from the first
 * pass or from --stats (tile_std_bad). */
static int cut_standardize(cutter *k)
{
	ctx *c = k->c;

	for (int b = 0; b < k->in->nb; b++)
		for (size_t p = 0; p < k->np; p++) {
			double v;
			float z = 0.0f;
			if (k->m[p]) {
				v = cdp_dtype_get(k->in->dt, k->tile, b * k->np + p);
				z = (float)((v - c->mean[b]) / c->std[b]);
				if (!isfinite(z))
					return tile_std_bad(c, k->in, b, v);
			}
			k->ft[b * k->np + p] = z;
		}
	return CDP_OK;
}

/* The record of the tile at column x0 of the strip, of input number idx,
 * pointing into k's tile buffers. */
static void cut_record(const cutter *k, size_t idx, uint64_t x0, size_t valid,
                       cdp_record *rec)
{
	const cdp_tile_opts *o = k->c->o;
	const input *in = k->in;
	const double *g = in->ri->gt;
	const uint64_t y0 = k->y0;

	memset(rec, 0, sizeof(*rec));
	rec->dtype = in->odt;
	rec->label_kind = in->lkind;
	rec->compression = o->zlevel ? CDP_COMP_ZLIB : CDP_COMP_NONE;
	/* the record has one nodata value: none when the bands' differ */
	rec->flags = (in->nd_one && !o->standardize ? CDP_REC_NODATA : 0) |
	             (valid < k->np ? CDP_REC_MASK : 0);
	rec->bands = (uint32_t)in->nb;
	rec->height = rec->width = (uint32_t)k->c->S;
	rec->x_off = (int64_t)x0;
	rec->y_off = (int64_t)y0;
	rec->gt[0] = g[0] + (double)x0 * g[1] + (double)y0 * g[2];
	rec->gt[1] = g[1];
	rec->gt[2] = g[2];
	rec->gt[3] = g[3] + (double)x0 * g[4] + (double)y0 * g[5];
	rec->gt[4] = g[4];
	rec->gt[5] = g[5];
	rec->source = (uint32_t)idx;
	rec->label_ignore = in->lkind == CDP_LABEL_U8 || in->lkind == CDP_LABEL_U16 ? in->ignore : 0;
	rec->label_len = in->llen;
	rec->nodata = rec->flags & CDP_REC_NODATA ? in->nd : 0;
	rec->image = o->standardize ? (const void *)k->ft : k->tile;
	rec->label = in->lkind ? k->lt : NULL;
	rec->mask = valid < k->np ? k->m : NULL;
}

/* Tile (r, col) of the current strip: cut, dropped when too much of it is
 * invalid (--max-nodata), else written as a file or a stream frame. */
static int cut_tile(cutter *k, size_t idx, uint64_t r, uint64_t col)
{
	ctx *c = k->c;
	const cdp_tile_opts *o = c->o;
	input *in = k->in;
	const uint64_t W = in->ri->width;
	const uint64_t x0 = grid_off(col, W, c->S, c->T, o->edge);
	const int tw = (int)(W - x0 < (uint64_t)c->S ? W - x0 : (uint64_t)c->S);
	char key[CDP_KEY_MAX], msg[512];
	cdp_record rec;
	size_t valid;
	int rc;

	cut_copy(k, x0, tw);
	valid = cut_mask(k, x0, tw);
	if (o->max_nodata < 0 ? valid == 0
	    : (double)(k->np - valid) / (double)k->np > o->max_nodata) {
		c->res->dropped++;
		return CDP_OK;
	}
	if (in->vlab)
		cut_vector_labels(k, x0, tw);
	else if (in->lkind && (rc = cdp_label_cut(in->lab, x0, tw, c->S, k->m, k->lt, msg,
	                                          sizeof(msg)))) {
		ERR(c, "'%s': %s", in->path, msg);
		return rc;
	}
	if (o->standardize && (rc = cut_standardize(k)))
		return rc;
	cut_record(k, idx, x0, valid, &rec);
	if ((rc = cdp_key_format(key, sizeof(key), in->name, r, in->rdig, col,
	                         in->cdig))) {
		ERR(c, "'%s': cannot form a key for name '%s'", in->path, in->name);
		return rc;
	}
	rc = o->outdir ? tile_emit_files(c, in, key, &rec, k->scratch)
	               : tile_emit_record(c, key, &rec, &k->enc);
	if (rc)
		return rc;
	c->res->written++;
	return CDP_OK;
}

/* Tiles one input: a strip (nb, sh, W) per row of tiles, cut into (nb, S, S)
 * tiles with their (S, S) mask and label. */
static int cut_input(ctx *c, size_t idx, input *in)
{
	const cdp_tile_opts *o = c->o;
	const uint64_t H = in->ri->height;
	cutter k;
	int rc;

	/* GDAL's cache holds what consecutive strips share, no more: the
	 * strips are read once each, and a larger cache only fills */
	cdp_raster_cache_fit(cdp_raster_strip_bytes(in->r, c->S) +
	                     (in->lab ? cdp_raster_strip_bytes(cdp_label_raster(in->lab), c->S) : 0));
	if ((rc = cut_alloc(&k, c, in)) ||
	    (o->standardize && !o->stats_path && (rc = cut_stats(&k))) ||
	    (!o->outdir && (rc = tile_emit_source(c, idx, in, &k.enc))))
		goto out;
	for (uint64_t r = 0; r < in->rows; r++) {
		uint64_t y0 = grid_off(r, H, c->S, c->T, o->edge);
		int sh = (int)(H - y0 < (uint64_t)c->S ? H - y0 : (uint64_t)c->S);

		if ((rc = cut_read_strip(&k, y0, sh)))
			goto out;
		for (uint64_t col = 0; col < in->cols; col++)
			if ((rc = cut_tile(&k, idx, r, col)))
				goto out;
		c->prog.done += in->cols;
		cdp_progress_update(&c->prog, c->prog.done);
	}
out:
	cut_free(&k);
	return rc;
}

typedef struct reads_arg {
	ctx *c;
	const char *role;          /* "the input", "the --label-extent file" */
	const char *path;
} reads_arg;

static int add_read(const char *file, void *arg)
{
	const reads_arg *a = arg;
	char what[8400];

	if (cdp_same_file(file, a->path))
		snprintf(what, sizeof what, "%s '%s'", a->role, a->path);
	else
		snprintf(what, sizeof what, "'%s', read through %s '%s'", file, a->role, a->path);
	return cdp_fileset_add(&a->c->reads, file, what);
}

int tile_add_reads(ctx *c, cdp_raster *r, const char *path)
{
	reads_arg a = { c, "the input", path };
	char what[4200];
	int rc;

	/* the path itself first: GDAL may list it under another spelling */
	snprintf(what, sizeof what, "the input '%s'", path);
	if ((rc = cdp_fileset_add(&c->reads, path, what)) != CDP_OK ||
	    (rc = cdp_raster_files(r, add_read, &a)) != CDP_OK)
		ERR(c, "cannot examine the files of '%s': %s", path, cdp_strerror(rc));
	return rc;
}

/* tile_add_reads for a vector label, and its --label-extent named as
 * that: the file a refusal names is the one the user gave for it. */
static int tile_add_vector_reads(ctx *c, cdp_label_vector *v, const char *path)
{
	reads_arg a = { c, "the input", path }, e = { c, "the --label-extent file",
	                                               c->o->vec.extent };
	int rc;

	if ((rc = cdp_label_vector_files(v, 0, add_read, &a)) != CDP_OK)
		ERR(c, "cannot examine the files of '%s': %s", path, cdp_strerror(rc));
	else if (e.path && (rc = cdp_label_vector_files(v, 1, add_read, &e)) != CDP_OK)
		ERR(c, "cannot examine the files of '%s': %s", e.path, cdp_strerror(rc));
	return rc;
}

/* The files that options name and the run reads: no output may be one.
 * --label-crs may name a file of WKT (OSRSetFromUserInput reads it); a
 * value that names none (EPSG:32633) is skipped, as cdp_fileset_add skips
 * every path that is not there. */
static int add_option_reads(ctx *c)
{
	const cdp_tile_opts *o = c->o;
	const struct { const char *opt, *path; } f[] = {
		{ "--stats", o->stats_path },
		{ "--label-map", o->label_map_path },
		{ "--label-extent", o->vec.extent },
		{ "--label-crs", o->vec.crs },
	};
	char what[4200];
	int rc;

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (!f[i].path)
			continue;
		snprintf(what, sizeof what, "the %s file '%s'", f[i].opt, f[i].path);
		if ((rc = cdp_fileset_add(&c->reads, f[i].path, what))) {
			ERR(c, "cannot examine '%s': %s", f[i].path, cdp_strerror(rc));
			return rc;
		}
	}
	return CDP_OK;
}

/* A vector label that no feature (after --label-where) reaches over in's
 * scene would give it only background labels without a word, where a label
 * raster that does not overlap is refused: a warning, not a refusal, since
 * one layer under many scenes (--label-all) may have none under some. */
static int vector_over(ctx *c, input *in)
{
	char msg[1024];
	int any, rc;

	if ((rc = cdp_label_vector_over(in->vlab, in->ri, c->o->tps, &any, msg, sizeof msg))) {
		ERR(c, "cannot read '%s': %s", in->lpath, msg);
		return rc;
	}
	if (!any && c->o->warn)
		fprintf(c->o->warn, "cdp-tile: warning: '%s': no feature of the layer%s lies over "
		        "'%s': all its labels are %s\n", in->lpath,
		        c->o->vec.where ? " (after --label-where)" : "", in->path,
		        c->o->vec.background_ignore ? "the ignore value" : "background");
	return CDP_OK;
}

/* The source frame of the stream holds the paths one to a line
 * (cdp_source_format): one with a newline cannot go there, whatever
 * --name says. CDP_EINVAL with the path escaped, else CDP_OK. */
static int stream_paths(ctx *c, const input *in)
{
	const char *p[] = { in->time ? in->time : in->path, in->lpath };

	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		if (p[i] && strchr(p[i], '\n')) {
			ERR(c, "'%s': a path with a newline cannot be recorded in the record stream "
			    "(rename it, or write tiles with -O DIR)", p[i]);
			cdp_msg_escape(c->err, c->errcap);
			return CDP_EINVAL;
		}
	return CDP_OK;
}

int cdp_tile_run(const cdp_tile_opts *o, FILE *out, cdp_tile_result *res,
                 char *err, size_t errcap)
{
	ctx cx, *c = &cx;
	char (*names)[CDP_NAME_MAX + 1] = NULL;
	const char **owner = NULL;
	uint64_t total = 0;
	char lopts[CDP_TILE_LOPTS_MAX];
	int rc = CDP_OK, made_dir = 0, streaming = 0, frc;
	const char *hit;
	void *tr;
	input in;

	memset(c, 0, sizeof(*c));
	memset(res, 0, sizeof(*res));
	memset(&in, 0, sizeof(in));
	c->o = o;
	c->out = out;
	c->res = res;
	c->err = err;
	c->errcap = errcap;
	c->S = o->size;
	c->T = o->size - o->overlap;
	c->lopts.kind = o->label_kind;
	c->lopts.bands = o->label_bands;
	c->lopts.nbands = (int)o->nlabel_bands;
	c->lopts.resample = o->label_resample;
	c->lopts.max_error = o->label_max_error;
	c->lopts.tps = o->tps;
	c->lopts.map = o->label_map;
	c->lopts.map_other_ignore = o->label_map_ignore;
	c->lopts.has_ignore = o->has_ignore;
	c->lopts.ignore = o->ignore;
	if (o->ninputs < 1 || o->size < 1 || (uint32_t)o->size > CDP_RECORD_MAXDIM ||
	    o->overlap < 0 || o->overlap >= o->size || o->edge < CDP_EDGE_SHIFT ||
	    o->edge > CDP_EDGE_DROP || o->zlevel < 0 || o->zlevel > 9 ||
	    o->max_nodata > 1 ||
	    (!!o->labels + !!o->label_suffix + !!o->label_all) > 1 ||
	    (o->stats_path && !o->standardize) ||
	    (o->outdir && o->format != CDP_TILE_PNG && o->format != CDP_TILE_TIF)) {
		ERR(c, "invalid options");
		return CDP_EINVAL;
	}
	if (!o->outdir && isatty(fileno(out))) {
		ERR(c, "refusing to write a binary record stream to a terminal "
		    "(redirect standard output or use -O DIR)");
		return CDP_ETTY;
	}
	if (!o->outdir)
		cdp_stream_pipe_grow(fileno(out));
	if (o->stats_path && (rc = tile_stats_load(c, o->stats_path)))
		goto out;
	if ((rc = add_option_reads(c)))
		goto out;

	/* Check every input before writing anything. */
	names = calloc(o->ninputs, sizeof(*names));
	owner = calloc(o->ninputs, sizeof(*owner));
	c->ltr = calloc(o->ninputs, sizeof(*c->ltr));
	if (!names || !owner || !c->ltr) {
		ERR(c, "out of memory");
		rc = CDP_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < o->ninputs; i++) {
		if ((rc = input_open(c, i, &in)) || (rc = tile_add_reads(c, in.r, in.path)) ||
		    (in.lab && (rc = tile_add_reads(c, cdp_label_raster(in.lab), in.lpath))) ||
		    (in.vlab && (rc = tile_add_vector_reads(c, in.vlab, in.lpath))))
			goto out;
		if ((in.vlab && (rc = vector_over(c, &in))) ||
		    (!o->outdir && ((rc = stream_paths(c, &in)) ||
		                    (rc = tile_label_options(c, &in, lopts, sizeof lopts)))) ||
		    (rc = input_fits(c, &in)))
			goto out;
		if (o->stats_path && c->nstats != (size_t)in.nb) {
			ERR(c, "'%s': %zu lines of statistics for %d bands", o->stats_path,
			    c->nstats, in.nb);
			rc = CDP_ESHAPE;
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[j], in.name) == 0) {
				ERR(c, "'%s': name '%s' is also used by '%s' (use --name)",
				    in.path, in.name, owner[j]);
				rc = CDP_EDUPKEY;
				goto out;
			}
		memcpy(names[i], in.name, sizeof(in.name));
		owner[i] = o->inputs[i];
		total += in.rows * in.cols;
		/* a thin plate spline is solved once for both passes (seconds
		 * for thousands of GCPs); the other transformers are cheap to
		 * fit again, and a run of thousands of inputs would hold them
		 * all (a spline holds a few arrays of its GCPs' count) */
		tr = in.lab ? cdp_label_take_transformer(in.lab)
		            : cdp_label_vector_take_transformer(in.vlab);
		if (cdp_raster_transformer_spline(tr))
			c->ltr[i] = tr;
		else
			cdp_raster_transformer_free(tr);
		input_close(&in);
	}

	if (!o->outdir && (hit = cdp_fileset_find_fd(&c->reads, fileno(out)))) {
		ERR(c, "refusing to write the record stream: standard output is %s", hit);
		rc = CDP_EMISMATCH;
		goto out;
	}
	if (o->outdir) {
		char why[600];

		if (cdp_out_vsi(o->outdir, why, sizeof why) != CDP_OK) {
			ERR(c, "%s", why);
			rc = CDP_ESPECIAL;
			goto out;
		}
		/* another cdp-tile -O may create the same new folder at the same
		 * moment: its mkdir winning is no failure of ours */
		if ((rc = cdp_file_mkdir(o->outdir, &made_dir)) == EEXIST) {
			ERR(c, "'%s': not a directory", o->outdir);
			rc = ENOTDIR;
			goto out;
		} else if (rc) {
			ERR(c, "cannot create '%s': %s", o->outdir, strerror(rc));
			goto out;
		}
	} else if ((rc = cdp_stream_write_header(out))) {
		ERR(c, "cannot write the record stream: %s", cdp_strerror(rc));
		goto out;
	} else {
		res->bytes += 8;
		streaming = 1;
	}

	cdp_progress_start(&c->prog, o->progress, "cdp-tile", "tiling", total);
	for (size_t i = 0; i < o->ninputs; i++) {
		if ((rc = input_open(c, i, &in)) || (rc = cut_input(c, i, &in)))
			break;
		input_close(&in);
	}
	cdp_progress_finish(&c->prog, !rc);
	if (rc)
		goto out;
	if (!o->outdir) {
		char body[64];
		int n = snprintf(body, sizeof(body), "count=%llu\n",
		                 (unsigned long long)res->written);
		if ((rc = cdp_stream_write_frame(out, CDP_FRAME_END, "", 0, body,
		                                 (size_t)n))) {
			ERR(c, "cannot write the record stream: %s", cdp_strerror(rc));
			goto out;
		}
		res->bytes += 12 + (uint64_t)n;
		if (fflush(out) != 0) {
			rc = errno ? errno : EIO;
			ERR(c, "cannot write the record stream: %s", strerror(rc));
			goto out;
		}
	}
out:
	/* A failed stream ends with its reason, so that the packer refuses
	 * it as failed rather than as cut short (or, were it complete up to
	 * here, as data); a broken pipe has no reader left to tell. */
	if (rc && streaming && rc != EPIPE)
		cdp_stream_write_fail(out, err);
	input_close(&in);
	if ((frc = tile_files_end(c, rc == CDP_OK)) != CDP_OK && rc == CDP_OK)
		rc = frc;
	if (rc && made_dir)
		rmdir(o->outdir);
	cdp_fileset_free(&c->reads);
	free(c->mean);
	free(c->std);
	for (size_t i = 0; c->ltr && i < o->ninputs; i++)
		cdp_raster_transformer_free(c->ltr[i]);
	free(c->ltr);
	c->ltr = NULL;
	free(names);
	free(owner);
	return rc;
}
