/* tile_out.c: the --standardize statistics and the output side of cdp-tile:
 * reading --stats files, the exact first pass that computes a band's mean and
 * std, writing tile files (PNG or GeoTIFF, with their labels) under -O DIR,
 * and writing source and record frames of the record stream (cdp_stream.h).
 * It leaves the grid, reading strips and cutting tiles to tile.c; tile_int.h
 * holds what the two share.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_png.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "cdp_stream.h"
#include "tile_int.h"

/* Reads --stats FILE: one "MEAN STD" line per selected band, '#' comments
 * and blank lines allowed. */
int tile_stats_load(ctx *c, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0, n = 0;
	int rc = CDP_OK;

	if (!f) {
		rc = errno;
		ERR(c, "cannot open '%s': %s", path, strerror(rc));
		return rc;
	}
	cdp_file_skip_bom(f);      /* else the first MEAN does not parse */
	while (getline(&line, &cap, f) >= 0) {
		char *hash = strchr(line, '#'), *tok[3], *save = NULL;
		int nt = 0;
		double m, s;

		lineno++;
		if (hash)
			*hash = '\0';
		for (char *t = strtok_r(line, " \t\r\n", &save); t && nt < 3;
		     t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt++] = t;
		if (nt == 0)
			continue;
		if (nt != 2 || cdp_parse_double(tok[0], -HUGE_VAL, HUGE_VAL, &m) ||
		    !isfinite(m) || cdp_parse_double(tok[1], 0, HUGE_VAL, &s) ||
		    !(s > 0) || !isfinite(s)) {
			ERR(c, "'%s' line %zu: expected MEAN STD with STD > 0", path,
			    lineno);
			rc = CDP_ESYNTAX;
			goto out;
		}
		if (n % 16 == 0) {
			double *nm = realloc(c->mean, sizeof(double) * (n + 16));
			double *ns = nm ? realloc(c->std, sizeof(double) * (n + 16)) : NULL;
			if (nm)
				c->mean = nm;
			if (!ns) {
				rc = CDP_ENOMEM;
				ERR(c, "out of memory");
				goto out;
			}
			c->std = ns;
		}
		c->mean[n] = m;
		c->std[n++] = s;
	}
	if (ferror(f)) {
		rc = errno ? errno : EIO;
		ERR(c, "cannot read '%s': %s", path, strerror(rc));
	}
out:
	free(line);
	fclose(f);
	c->nstats = n;
	return rc;
}

/* The exact first pass of --standardize: mean and population std of each
 * selected band over the input's valid pixels, read in strips of S rows,
 * accumulated in double around the band's first valid value. strip holds
 * (nb, S, W) samples, gm and vm S*W bytes each (the caller's, so that the
 * checks before the first output allocate them). The pass reads the whole
 * raster before its first tile, so it has a progress line of its own
 * ("statistics", in rows), drawn when the tiling's is. */
int tile_stats_compute(ctx *c, input *in, void *strip, uint8_t *gm, uint8_t *vm)
{
	uint64_t W = in->ri->width, H = in->ri->height, n = 0;
	double *k = calloc((size_t)in->nb * 3, sizeof(double)), *s1, *s2;
	char msg[512];
	int rc = CDP_OK;
	cdp_progress pg;

	if (!k) {
		ERR(c, "out of memory");
		return CDP_ENOMEM;
	}
	s1 = k + in->nb;
	s2 = s1 + in->nb;
	cdp_progress_start(&pg, c->prog.enabled ? CDP_PROGRESS_ON : CDP_PROGRESS_OFF, "cdp-tile",
	                   "statistics", H);
	for (uint64_t y = 0; y < H; y += c->S) {
		int sh = (int)(H - y < (uint64_t)c->S ? H - y : (uint64_t)c->S);
		size_t np = (size_t)sh * W;

		if ((rc = cdp_raster_read(in->r, in->bands, in->nb, 0, (int64_t)y,
		                          (int)W, sh, strip, msg, sizeof(msg))) ||
		    (in->use_mask &&
		     (rc = cdp_raster_read_mask(in->r, in->bands[0], 0, (int64_t)y,
		                                (int)W, sh, gm, msg, sizeof(msg))))) {
			ERR(c, "cannot read '%s': %s", in->path, msg);
			goto out;
		}
		memset(vm, 255, np);
		if (in->has_nd)
			tile_mark_nodata(in, strip, np, W, (int)W, sh, 1, vm, W);
		for (size_t p = 0; p < np; p++) {
			if (!vm[p] || (in->use_mask && !gm[p]))
				continue;
			for (int b = 0; b < in->nb; b++) {
				double v = cdp_dtype_get(in->dt, strip, b * np + p), d;
				if (!isfinite(v)) {
					rc = tile_std_bad(c, in, b, v);
					goto out;
				}
				if (n == 0)
					k[b] = v;
				d = v - k[b];
				s1[b] += d;
				s2[b] += d * d;
			}
			n++;
		}
		cdp_progress_update(&pg, y + (uint64_t)sh);
	}
	if (n == 0) {
		ERR(c, "'%s': no valid pixels to compute statistics from", in->path);
		rc = CDP_EFORMAT;
		goto out;
	}
	for (int b = 0; b < in->nb; b++) {
		double mu = s1[b] / (double)n, var = s2[b] / (double)n - mu * mu;
		c->mean[b] = k[b] + mu;
		c->std[b] = var > 0 ? sqrt(var) : 0;
		/* every value is finite here: their sums overflowed */
		if (!isfinite(c->mean[b]) || !isfinite(c->std[b])) {
			rc = tile_std_bad(c, in, b, 0);
			goto out;
		}
		/* A constant band is only centred. */
		if (c->std[b] == 0)
			c->std[b] = 1;
	}
out:
	cdp_progress_finish(&pg, !rc);
	free(k);
	return rc;
}

int tile_std_bad(ctx *c, const input *in, int b, double v)
{
	if (isnan(v))
		ERR(c, "'%s': band %d has NaN valid pixels (set --nodata nan if NaN marks "
		    "nodata)", in->path, in->bands[b]);
	else if (isinf(v))
		ERR(c, "'%s': band %d has infinite valid pixels", in->path, in->bands[b]);
	else
		ERR(c, "'%s': band %d has values too large to standardize", in->path,
		    in->bands[b]);
	return CDP_EFORMAT;
}

/* A new slot of c->files, or NULL when out of memory. */
static cdp_out *file_slot(ctx *c)
{
	if (c->nfiles == c->capfiles) {
		size_t nc = c->capfiles ? 2 * c->capfiles : 64;
		cdp_out *nf = realloc(c->files, nc * sizeof(*nf));
		if (!nf)
			return NULL;
		c->files = nf;
		c->capfiles = nc;
	}
	return &c->files[c->nfiles];
}

/* The tiles are one set, renamed as cdp-predict renames its outputs: a
 * SIGTERM, SIGINT or SIGHUP among the renames is held until the last
 * (cdp_out_hold), so that it cannot leave new tiles beside old ones; a
 * rename that fails stops the set there, is reported, and the temporaries
 * not yet renamed are removed. */
int tile_files_end(ctx *c, int commit)
{
	char msg[600];
	int rc = CDP_OK;

	if (commit)
		cdp_out_hold();
	for (size_t i = 0; i < c->nfiles; i++) {
		if (commit && rc == CDP_OK) {
			if ((rc = cdp_out_commit(&c->files[i], msg, sizeof(msg))))
				ERR(c, "%s", msg);
		} else {
			cdp_out_abort(&c->files[i]);
		}
	}
	if (commit)
		cdp_out_release();
	free(c->files);
	c->files = NULL;
	c->nfiles = c->capfiles = 0;
	return rc;
}

/* Writes one (C, H, W) u8/u16/float32 payload and its label as tile files
 * KEY.png / KEY.tif and KEY_label.*; scratch holds an interleaved copy for
 * PNG's (H, W, C) layout. */
int tile_emit_files(ctx *c, input *in, const char *key, const cdp_record *r,
                    void *scratch)
{
	const char *ext = c->o->format == CDP_TILE_PNG ? "png" : "tif";
	size_t np = (size_t)c->S * c->S, dsz = cdp_dtype_size(r->dtype);
	size_t plen = strlen(c->o->outdir) + strlen(key) + 16;
	char *path = malloc(plen), msg[600] = "";
	const char *hit;
	struct stat st;
	cdp_out *f;
	int rc = CDP_OK;

	if (!path) {
		ERR(c, "out of memory");
		return CDP_ENOMEM;
	}
	for (int pass = 0; pass < 2 && !rc; pass++) {
		int isl = pass == 1, depth = 0;
		if (isl && !r->label)
			break;
		snprintf(path, plen, "%s/%s%s.%s", c->o->outdir, key,
		         isl ? "_label" : "", ext);
		if ((hit = cdp_fileset_find(&c->reads, path))) {
			ERR(c, "refusing to write '%s': it is %s", path, hit);
			rc = CDP_EMISMATCH;
			break;
		}
		/* the commit (CDP_OUT_AUX) removes the side files of the tile
		 * it replaces: none may be an input (KEY.tif.msk) */
		if ((rc = cdp_out_check_sides(&c->reads, 1, (const char *const *)&path, msg,
		                              sizeof msg))) {
			ERR(c, "%s", rc == CDP_ENOMEM ? "out of memory" : msg);
			break;
		}
		if (!(f = file_slot(c))) {
			ERR(c, "out of memory");
			rc = CDP_ENOMEM;
			break;
		}
		if ((rc = cdp_out_open(f, path, CDP_OUT_SEEK | CDP_OUT_AUX, 0666, msg,
		                       sizeof(msg)))) {
			ERR(c, "%s", msg);
			break;
		}
		c->nfiles++;
		if (c->o->format == CDP_TILE_PNG) {
			const void *px = isl ? r->label : scratch;
			int ch = isl ? 1 : (int)r->bands;
			if (!isl)
				for (size_t p = 0; p < np; p++)
					for (int b = 0; b < ch; b++)
						memcpy((char *)scratch + (p * ch + b) * dsz,
						       (const char *)r->image + (b * np + p) * dsz,
						       dsz);
			depth = (isl ? r->label_kind == CDP_LABEL_U16
			             : r->dtype == CDP_DT_U16) ? 16 : 8;
			rc = cdp_png_write_out(f, px, c->S, c->S, ch, depth);
			if (rc == CDP_EFORMAT && cdp_out_nospace(f, NULL))
				rc = cdp_out_nospace(f, NULL);
			if (rc)
				snprintf(msg, sizeof(msg), "%s", cdp_strerror(rc));
		} else if (isl) {
			/* values: T float32 bands, NaN where there is no target;
			 * classes: the ignore value (padding, invalid pixels) is
			 * the nodata value, so GDAL readers do not count it */
			int f32 = r->label_kind == CDP_LABEL_F32, nl = f32 ? (int)r->label_len : 1;
			int *has = calloc((size_t)nl, sizeof *has);
			double *nd = malloc((size_t)nl * sizeof *nd);
			for (int b = 0; has && nd && b < nl; b++) {
				has[b] = 1;
				nd[b] = f32 ? NAN : (double)in->ignore;
			}
			rc = !has || !nd ? CDP_ENOMEM :
			     cdp_raster_write_tif_out(f, f32 ? CDP_DT_F32 : r->label_kind == CDP_LABEL_U8 ?
			                          CDP_DT_U8 : CDP_DT_U16, nl, c->S, c->S, r->label, NULL,
			                          in->r, NULL, 0, r->x_off, r->y_off, has, nd, msg,
			                          sizeof(msg));
			if (rc == CDP_ENOMEM && (!has || !nd))
				snprintf(msg, sizeof msg, "out of memory");
			free(has);
			free(nd);
		} else {
			/* The record's mask as the tile's mask band: padding, a .msk
			 * and --standardize's zeros (no nodata) stay invalid, and
			 * cdp-lmdbpack --list reads the stream's records back. A
			 * GeoTIFF has one nodata value for all its bands: bands whose
			 * values differ get none, and the mask marks their nodata. */
			rc = cdp_raster_write_tif_out(f, r->dtype, (int)r->bands, c->S,
			                          c->S, r->image,
			                          r->flags & CDP_REC_MASK ? r->mask : NULL,
			                          in->r, in->bands, !c->o->standardize,
			                          r->x_off, r->y_off,
			                          r->flags & CDP_REC_NODATA ? in->hasnd : NULL, in->ndb,
			                          msg, sizeof(msg));
		}
		if (rc)
			ERR(c, "cannot write '%s': %s", path, msg);
		else if (stat(f->tmp, &st) == 0)
			c->res->bytes += (uint64_t)st.st_size;
	}
	free(path);
	return rc;
}

int tile_emit_record(ctx *c, const char *key, const cdp_record *r,
                     cdp_buf *enc)
{
	size_t klen = strlen(key);
	int rc = cdp_record_encode(r, c->o->zlevel, enc);

	if (rc) {
		ERR(c, "cannot encode tile '%s': %s", key, cdp_strerror(rc));
		return rc;
	}
	if (enc->len > CDP_STREAM_MAXBODY) {
		ERR(c, "tile '%s' is %zu bytes, a stream frame holds at most %u "
		    "(use a smaller -s, or -O DIR)", key, enc->len, CDP_STREAM_MAXBODY);
		return CDP_EOVERFLOW;
	}
	if ((rc = cdp_stream_write_frame(c->out, CDP_FRAME_RECORD, key, klen,
	                                 enc->p, enc->len))) {
		ERR(c, "cannot write the record stream: %s", cdp_strerror(rc));
		return rc;
	}
	c->res->bytes += 12 + klen + enc->len;
	return CDP_OK;
}

/* "t0:b1,t0:b2,t1:b1,..." for a multi-date input's bands: the date from 0
 * and the date's own band number; NULL when out of memory. */
static char *time_band_names(const input *in)
{
	uint32_t per = in->ri->bands / (uint32_t)in->ndates;
	size_t cap = (size_t)in->nb * 28 + 1, len = 0;
	char *t = malloc(cap);

	for (int b = 0; t && b < in->nb; b++)
		len += (size_t)snprintf(t + len, cap - len, "%st%u:b%u", b ? "," : "",
		                        (unsigned)((uint32_t)(in->bands[b] - 1) / per),
		                        (unsigned)((uint32_t)(in->bands[b] - 1) % per + 1));
	return t;
}

/* 1 when GCPs place in's label on its grid: a raster label warped where
 * either side has no geotransform, a vector on an image placed by GCPs. */
static int label_by_gcps(const input *in)
{
	if (in->vlab)
		return cdp_raster_by_gcps(in->ri);
	if (!in->lab || !cdp_label_warped(in->lab))
		return 0;
	return cdp_raster_by_gcps(in->ri) ||
	       cdp_raster_by_gcps(cdp_raster_get_info(cdp_label_raster(in->lab)));
}

int tile_label_options(ctx *c, const input *in, char *lopts, size_t cap)
{
	int rc = CDP_OK;
	size_t n = 0;

	lopts[0] = '\0';
	if (in->vlab && (rc = cdp_label_vector_describe(&c->o->vec, lopts, cap)) == CDP_OK)
		n = strlen(lopts);
	/* --tps where it placed the label: GCPs on one side of a warp, or
	 * under a vector's rasterization; it changes the labels as much as
	 * any option above */
	if (rc == CDP_OK && c->o->tps && label_by_gcps(in)) {
		if (n + sizeof " --tps" > cap)
			rc = CDP_ERANGE;
		else
			snprintf(lopts + n, cap - n, "%s--tps", n ? " " : "");
	}
	if (rc)
		ERR(c, "'%s': cannot describe the label options: %s", in->path, cdp_strerror(rc));
	return rc;
}

int tile_emit_source(ctx *c, size_t idx, input *in, cdp_buf *body)
{
	cdp_source s;
	char lopts[CDP_TILE_LOPTS_MAX];
	int rc;

	memset(&s, 0, sizeof(s));
	s.index = (uint32_t)idx;
	snprintf(s.name, sizeof(s.name), "%s", in->name);
	s.path = (char *)in->path;
	s.width = in->ri->width;
	s.height = in->ri->height;
	s.bands = (uint32_t)in->nb;
	s.dtype = in->odt;
	memcpy(s.gt, in->ri->gt, sizeof(s.gt));
	/* a raster placed by GCPs only (no geotransform: GDAL's default one
	 * above, which gives no pixel size) is in their CRS, which a model
	 * trained on it checks a raster against */
	s.crs = (char *)cdp_raster_grid_crs(in->ri);
	/* The selected bands (all of them without --bands), so that a model
	 * trained on the pool can read the same ones from a raw scene. */
	s.band_list = in->bands;
	s.nband_list = (uint32_t)in->nb;
	/* the label's file and, for a vector, how it was rasterized; the
	 * names of its ids (a vector's --classes, a raster's --label-map
	 * names, never both: cdp-tile refuses the pair) become the pool's
	 * class names (cdp-lmdbpack) */
	s.label = in->lpath;
	/* the dates, and which date and band each stacked band is */
	s.time = (char *)in->time;
	if (in->time && !(s.band_names = time_band_names(in))) {
		ERR(c, "out of memory");
		return CDP_ENOMEM;
	}
	if (in->lab && c->o->label_map && c->o->label_map->names) {
		s.class_names = c->o->label_map->names;
		s.nclass_names = c->o->label_map->max_id + 1;
	}
	if (in->vlab) {
		s.class_names = (char **)c->o->vec.classes;
		s.nclass_names = (uint32_t)c->o->vec.nclasses;
	}
	if ((rc = tile_label_options(c, in, lopts, sizeof lopts)))
		goto out;
	s.label_options = lopts[0] ? lopts : NULL;
	if ((rc = cdp_source_format(&s, body))) {
		ERR(c, "'%s': cannot describe the source: %s", in->path,
		    cdp_strerror(rc));
		goto out;
	}
	if ((rc = cdp_stream_write_frame(c->out, CDP_FRAME_SOURCE, in->name,
	                                 strlen(in->name), body->p, body->len))) {
		ERR(c, "cannot write the record stream: %s", cdp_strerror(rc));
		goto out;
	}
	c->res->bytes += 12 + strlen(in->name) + body->len;
out:
	free(s.band_names);
	return rc;
}
