/* predict.c: cdp_predict_run, the sliding-window inference over a raster
 * (the scheme is described in predict.h), once predict_setup.c has
 * built the model, opened the raster and allocated the buffers. It reads through cdp_raster.h,
 * runs the engine's net on the backend of --device and leaves the output files to
 * predict_out.c. Shapes: the strip input img is (C, rows, W) float, the
 * net input (B, C, S, S), its output (B, K, S, S) logits, a strip's
 * weighted probabilities and the accumulator (K, S, W). The windows are
 * cut from the strip and blended back on the backend's device
 * (backend.h win_gather, win_blend), so per strip only the standardized
 * rows go up and the weighted sums come down.
 */
#include "predict_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp_dtype.h"
#include "cdp_progress.h"
#include "dist/dist.h"

/* Validity of the n rows (C, n, W) in raw: invalid where every band
 * equals its nodata value (NaN matching NaN), or where one does when the
 * bands' values differ, as cdp-tile's mask decides. Marked as n rows of W
 * (as cdp-tile's strips are), never as one row of n * W pixels, which
 * passes 2^31 on a wide raster. */
static void nodata_valid(const predictor *p, const void *raw, int n, uint8_t *v)
{
	size_t px = (size_t)n * p->W;

	memset(v, 255, px);
	cdp_raster_mark_nodata(raw, p->ri->dtype, p->C, px, (size_t)p->W, (size_t)p->W,
	                       (size_t)n, p->nd, p->hasnd, p->nd_any, v, (size_t)p->W);
}

/* Reads rows [y, y + n) of the selected bands into p->raw (C, n, W) and
 * their validity into v (n, W). */
int pr_read_rows(predictor *p, int y, int n, uint8_t *v, char *err, size_t cap)
{
	char why[512];
	size_t px = (size_t)n * p->W;

	if (cdp_raster_read(p->r, p->ck.bands, p->C, 0, y, p->W, n, p->raw, why, sizeof why) != 0)
		return pr_fail(err, cap, "cannot read '%s': %s", p->o->input, why);
	if (p->nodata_mode == 2) {
		if (cdp_raster_read_mask(p->r, p->ck.bands[0], 0, y, p->W, n, v, why, sizeof why) != 0)
			return pr_fail(err, cap, "cannot read the mask of '%s': %s", p->o->input, why);
	} else if (p->nodata_mode == 1) {
		nodata_valid(p, p->raw, n, v);
	} else {
		memset(v, 255, px);
	}
	return 0;
}

/* Standardizes p->raw (C, n, W) into p->img; invalid pixels become 0 in
 * every band and non-finite values 0, as in training. */
void pr_standardize(predictor *p, int n)
{
	size_t px = (size_t)n * p->W;
	size_t dsz = cdp_dtype_size(p->ri->dtype);

	for (int c = 0; c < p->C; c++) {
		float *d = p->img + (size_t)c * px;
		cdp_dtype_to_f32(p->ri->dtype, (const char *)p->raw + (size_t)c * px * dsz, d, px);
		for (size_t i = 0; i < px; i++) {
			float x = isfinite(d[i]) ? (d[i] - p->mean[c]) * p->inv[c] : 0.0f;
			d[i] = p->valid[i] ? x : 0.0f;
		}
	}
}

/* Strip s: its rows (reflected), standardized and uploaded once; its
 * windows in batches of B, each gathered from the strip, run, and blended
 * into the strip's sums on the device (win_gather, win_blend); the sums
 * come back into sum (K, S, W). */
static int run_strip(predictor *p, int s, float *sum, char *err, size_t cap)
{
	cdp_backend *be = p->be;
	long y0 = -p->m + (long)s * p->T;
	int lo = p->H, hi = 0, n;
	size_t hw = (size_t)p->S * p->S, plane = (size_t)p->S * p->W;

	for (int r = 0; r < p->S; r++) {
		p->srow[r] = cdp_reflect(y0 + r, p->H);
		lo = p->srow[r] < lo ? p->srow[r] : lo;
		hi = p->srow[r] + 1 > hi ? p->srow[r] + 1 : hi;
	}
	n = hi - lo;
	if (pr_read_rows(p, lo, n, p->valid, err, cap) < 0)
		return -1;
	pr_standardize(p, n);
	for (int r = 0; r < p->S; r++)
		p->srow[r] -= lo;
	be->to_device(be, p->dsrow, p->srow, (size_t)p->S * sizeof *p->srow);
	be->to_device(be, p->dimg, p->img, (size_t)p->C * n * p->W * sizeof *p->img);
	be->fill(be, p->dsum, 0.0f, (size_t)p->K * plane);
	for (int i0 = 0; i0 < p->nx; i0 += p->B) {
		int nb = p->nx - i0 < p->B ? p->nx - i0 : p->B;
		be->win_gather(be, p->C, n, p->W, p->S, p->dimg, p->dsrow, nb, p->dx0 + i0, p->net.x);
		/* a short last batch: only its windows run (cdp_net_forward_n), or
		 * on a backend that runs the batch whole, the rest on zeros */
		if (nb < p->B)
			be->fill(be, p->net.x + (size_t)nb * p->C * hw, 0.0f,
			         (size_t)(p->B - nb) * p->C * hw);
		if (p->o->tta > 1) {
			/* the mean probabilities over the transforms, as logits */
			pr_tta_run(p, nb, p->tx, p->tt, p->tl, p->tacc, p->S);
			be->to_device(be, p->dtl, p->tl, (size_t)p->B * p->K * hw * sizeof *p->tl);
		} else {
			cdp_net_forward_n(&p->net, nb);
		}
		/* a regression net's values blend linearly (k < 0, backend.h) */
		be->win_blend(be, p->reg ? -p->K : p->K, p->S, p->W, nb,
		              p->o->tta > 1 ? p->dtl : cdp_net_output(&p->net),
		              p->dx0 + i0, p->dw1, p->dsum);
	}
	be->to_host(be, sum, p->dsum, (size_t)p->K * plane * sizeof *sum);
	return 0;
}

/* finish_rows of a regression net: the weighted mean of the windows'
 * standardized values, back on the targets' scale (x * std + mean, in
 * double), NaN where the input is invalid; v (n, W) the validity. */
static int finish_values(predictor *p, long a0, int ya, int yb, const uint8_t *v, char *err,
                         size_t cap)
{
	size_t px = (size_t)(yb - ya) * p->W, plane = (size_t)p->S * p->W;
	float *out = p->orow;

	for (int y = ya; y < yb; y++)
		for (int x = 0; x < p->W; x++) {
			size_t a = (size_t)(y - a0) * p->W + x, i = (size_t)(y - ya) * p->W + x;
			float nrm = p->normx[x] * p->normy[y];
			for (int k = 0; k < p->K; k++)
				out[k * px + i] = v[i] ? (float)((double)(p->acc[k * plane + a] / nrm) *
				                                 p->ck.target_std[k] + p->ck.target_mean[k])
				                       : NAN;
		}
	return pr_out_write(p->out, ya, yb - ya, p->orow, err, cap);
}

/* Rank 0: rows [ya, yb) of the accumulator (row ya at acc row ya - a0) are
 * final: normalize, write the output, the vector mask and the preview. */
static int finish_rows(predictor *p, long a0, int ya, int yb, char *err, size_t cap)
{
	int n = yb - ya;
	size_t px = (size_t)n * p->W, plane = (size_t)p->S * p->W;
	uint8_t *v = p->valid;

	if (n <= 0)
		return 0;
	if (p->nodata_mode && pr_read_rows(p, ya, n, v, err, cap) < 0)
		return -1;
	if (!p->nodata_mode)
		memset(v, 255, px);
	if (p->reg)
		return finish_values(p, a0, ya, yb, v, err, cap);
	for (int y = ya; y < yb; y++)
		for (int x = 0; x < p->W; x++) {
			size_t a = (size_t)(y - a0) * p->W + x, i = (size_t)(y - ya) * p->W + x;
			float nrm = p->normx[x] * p->normy[y], best = -1;
			int cls = 0;
			for (int k = 0; k < p->K; k++) {
				/* the division can round a certainty just above 1 */
				float pk = fminf(p->acc[k * plane + a] / nrm, 1.0f);
				if (p->o->prob)
					((float *)p->orow)[k * px + i] = v[i] ? pk : NAN;
				if (pk > best) {
					best = pk;
					cls = k;
				}
			}
			if (p->K == 1)
				cls = best > 0.5f;
			if (!v[i])
				cls = 255;
			if (!p->o->prob)
				((uint8_t *)p->orow)[i] = (uint8_t)cls;
			p->vrow[i] = cls == p->vclass || p->vclass == CDP_PREDICT_VECTOR_ALL
			             ? (uint8_t)cls : 255;
			if (p->pcls && y % p->pstep == 0 && x % p->pstep == 0)
				p->pcls[(y / p->pstep) * p->pw + x / p->pstep] = (uint8_t)cls;
		}
	if (pr_out_write(p->out, ya, n, p->orow, err, cap) < 0)
		return -1;
	if (p->vout && pr_out_write(p->vout, ya, n, p->vrow, err, cap) < 0)
		return -1;
	return 0;
}

static int open_outputs(predictor *p, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	const double *gt = p->ri->has_gt ? p->ri->gt : NULL;

	if (pr_legend_make(&p->legend, p->K > 1 ? p->K : 2, &p->ck, o->colors, err, cap) < 0)
		return -1;
	if (pr_out_open(&p->out, o->output, p->W, p->H, o->prob || p->reg ? p->K : 1,
	                o->prob || p->reg, gt, p->ri->crs, err, cap) < 0 ||
	    pr_out_georef(p->out, p->r, 1, err, cap) < 0 ||
	    (p->reg && pr_out_regression(p->out, err, cap) < 0) ||
	    pr_out_layout(p->out, &p->legend, o->cog, err, cap) < 0)
		return -1;
	/* the class mask of --vector: a temporary named after the
	 * vector file, never renamed (a user's OUT.gpkg.classes.tif is not
	 * ours to touch) */
	if (o->vector &&
	    (pr_out_open(&p->vout, o->vector, p->W, p->H, 1, 0, gt, p->ri->crs, err, cap) < 0 ||
	     pr_out_georef(p->vout, p->r, 1, err, cap) < 0))
		return -1;
	return 0;
}

/* The strips, round by round; rank 0 accumulates and writes. */
static int run_all(predictor *p, char *err, size_t cap)
{
	size_t slot = (size_t)p->K * p->S * p->W, plane = (size_t)p->S * p->W;
	long a0 = -p->m;      /* image row of acc row 0: the top row of the next strip */
	int rc = 0;
	cdp_progress pg;

	cdp_progress_start(&pg, p->rank == 0 ? p->o->progress : CDP_PROGRESS_OFF, PR_PROG,
	                   "predicting", (uint64_t)p->ny);
	for (int s0 = 0; s0 < p->ny; s0 += p->nranks) {
		int s = s0 + p->rank, ok;
		/* this rank's strip in slot 0, where rank 0 keeps its own */
		memset(p->slots, 0, slot * sizeof(float));
		ok = s < p->ny ? run_strip(p, s, p->slots, err, cap) == 0 : 1;
		/* every rank learns whether all succeeded before exchanging */
		if (cdp_dist_any(!ok)) {
			if (ok)
				pr_fail(err, cap, "another rank failed");
			rc = -1;
			break;
		}
		if (p->nranks > 1)
			cdp_dist_gather_bytes(p->slots, slot * sizeof(float), p->rank == 0 ? p->slots : NULL);
		if (p->rank == 0) {
			for (int j = 0; j < p->nranks && s0 + j < p->ny; j++) {
				const float *src = p->slots + j * slot;
				int last = s0 + j == p->ny - 1;
				long ya = a0 > 0 ? a0 : 0, yb = last ? p->H : a0 + p->T;
				for (size_t i = 0; i < slot; i++)
					p->acc[i] += src[i];
				if (yb > p->H)
					yb = p->H;
				if (finish_rows(p, a0, (int)ya, (int)yb, err, cap) < 0) {
					rc = -1;
					break;
				}
				for (int k = 0; k < p->K; k++) {
					float *a = p->acc + k * plane;
					memmove(a, a + (size_t)p->T * p->W, (plane - (size_t)p->T * p->W) * sizeof *a);
					memset(a + plane - (size_t)p->T * p->W, 0, (size_t)p->T * p->W * sizeof *a);
				}
				a0 += p->T;
			}
			cdp_progress_update(&pg, (uint64_t)(s0 + p->nranks < p->ny ? s0 + p->nranks : p->ny));
		}
		if (cdp_dist_any(rc != 0)) {
			if (rc == 0)
				pr_fail(err, cap, "rank 0 failed");
			rc = -1;
			break;
		}
	}
	cdp_progress_finish(&pg, !rc);
	return rc;
}

static void cleanup(predictor *p)
{
	char e[16];
	if (p->out)
		pr_out_close(p->out, 0, e, sizeof e);
	if (p->vout)
		pr_out_close(p->vout, 0, e, sizeof e);
	if (p->r)
		cdp_raster_close(p->r);
	if (p->have_net)
		cdp_net_free(&p->net);
	if (p->be) {
		void *dev[] = { p->dimg, p->dsum, p->dw1, p->dsrow, p->dx0, p->dtl };
		for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
			if (dev[i])
				p->be->free(p->be, dev[i]);
		p->be->destroy(p->be);
	}
	if (p->have_ck)
		cdp_ckpt_free(&p->ck);
	free(p->w1); free(p->normx); free(p->normy); free(p->mean); free(p->inv);
	free(p->nd); free(p->hasnd);
	free(p->raw); free(p->img); free(p->valid); free(p->srow);
	free(p->slots); free(p->acc); free(p->orow);
	free(p->vrow); free(p->pcls);
	free(p->tx); free(p->tt); free(p->tl); free(p->tacc);
	pr_legend_free(&p->legend);
}

/* --preview: the map over the input's first bands (or --preview-bands');
 * with --time over the first date's (the first bands of the stack, date
 * 0's), read from it. */
static int preview(predictor *p, cdp_out *png, char *err, size_t cap)
{
	const cdp_predict_opts *o = p->o;
	const int *bands = o->npreview_bands ? o->preview_bands : p->ck.bands;
	int n = o->npreview_bands ? o->npreview_bands : p->C / cdp_raster_dates(p->r), rc;
	char *first;

	if (!o->time)
		return pr_preview(o->input, bands, o->npreview_bands ? n : p->C, p->pcls, p->pw,
		                  p->ph, &p->legend, o->preview, png, err, cap);
	if (!(first = strndup(o->input, strcspn(o->input, ","))))
		return pr_fail(err, cap, "out of memory");
	rc = pr_preview(first, bands, n, p->pcls, p->pw, p->ph, &p->legend, o->preview,
	                png, err, cap);
	free(first);
	return rc;
}

int cdp_predict_run(const cdp_predict_opts *o, char *err, size_t cap)
{
	predictor p;
	cdp_out vec = { .fd = -1, .slot = -1 }, png = { .fd = -1, .slot = -1 };
	char msg[4400];
	int rc = -1;

	memset(&p, 0, sizeof p);
	p.o = o;
	p.rank = cdp_dist_rank();
	p.nranks = cdp_dist_size();
	int ok = pr_load_model(&p, err, cap) == 0;
	if (ok && p.classify && o->time) {
		pr_fail(err, cap, "'%s' classifies chips, and --time maps a raster of several "
		        "dates: give a segmentation model", p.model);
		goto out;
	}
	if (ok && p.classify) {   /* a classifier: predict_classify.c */
		rc = pr_classify_run(&p, err, cap);
		goto out;
	}
	/* a CSV is a classifier's output; a GeoTIFF named .csv fools every
	 * reader of it */
	if (ok && pr_is_csv(o->output)) {
		pr_fail(err, cap, "'%s' is a segmentation model, which writes a raster, not the "
		        "CSV that -o '%s' names (.csv): give -o OUT.tif", p.model, o->output);
		goto out;
	}
	/* the seekable outputs' policy would make a file named "-" */
	if (ok && strcmp(o->output, "-") == 0) {
		pr_fail(err, cap, "'%s' is a segmentation model, whose GeoTIFF is not streamed: "
		        "-o - (standard output) is for a classifier's CSV; give -o OUT.tif", p.model);
		goto out;
	}
	/* the outputs are checked before the weights are set up */
	ok = ok && pr_open_raster(&p, err, cap) == 0 &&
	         (p.rank != 0 || pr_check_outputs(&p, err, cap) == 0) &&
	         pr_weights(&p, err, cap) == 0 && pr_alloc(&p, err, cap) == 0 &&
	         (p.rank != 0 || open_outputs(&p, err, cap) == 0);
	/* agree before the first collective, so no rank waits for a dead one */
	if (cdp_dist_any(!ok) && ok) {
		pr_fail(err, cap, "another rank failed");
		ok = 0;
	}
	/* and on the raster: node-local copies may differ */
	if (!ok || pr_same_raster(&p, err, cap) < 0)
		goto out;
	if (run_all(&p, err, cap) < 0)
		goto out;
	/* Every output is finished under its temporary name before the first
	 * rename, then they are renamed in the order cdp-predict(1) gives:
	 * the GeoTIFF, the vector file, the preview, as one set: a SIGTERM,
	 * SIGINT or SIGHUP among the renames is held until the last is done
	 * (cdp_out_hold), so that it cannot leave a new GeoTIFF beside an
	 * older vector file or preview. */
	if (p.rank == 0) {
		if (p.vout && (pr_out_finish(p.vout, err, cap) < 0 ||
		               pr_vector(pr_out_file(p.vout), o->vector, p.vclass, &p.legend,
		                         &vec, err, cap) < 0))
			goto out;
		if (o->preview && preview(&p, &png, err, cap) < 0)
			goto out;
		if (pr_out_finish(p.out, err, cap) < 0)
			goto out;
		pr_out *f = p.out;
		p.out = NULL;
		cdp_out_hold();
		ok = pr_out_close(f, 1, err, cap) == 0;
		if (ok && ((vec.path && cdp_out_commit(&vec, msg, sizeof msg) != 0) ||
		           (png.path && cdp_out_commit(&png, msg, sizeof msg) != 0))) {
			pr_fail(err, cap, "%s", msg);
			ok = 0;
		}
		cdp_out_release();
		if (!ok)
			goto out;
	}
	rc = 0;
out:
	cdp_out_abort(&vec);
	cdp_out_abort(&png);
	cleanup(&p);
	return rc;
}
