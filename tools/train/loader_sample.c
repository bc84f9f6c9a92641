/* loader_sample.c: one sample of the loader (loader.h): a record from the
 * map, validated, converted to standardized float32 (loader_conv.c), its
 * invalid pixels and labels resolved, then augmented into its batch slot;
 * or, on the raw (device) data path, its stored pixels copied as they are,
 * with labels, a validity mask and the transform for the device.
 *
 * Not here: which key a sample is, bad-record replacement, threads
 * (loader.c).
 */
#include "loader_int.h"

#include <math.h>
#include <string.h>

#include "cdp_crc32.h"
#include "cdp_dtype.h"
#include "cdp_error.h"
#include "cdp_rng.h"

#define STEP_SAMPLES 8192         /* see decode_one */

static int record_invalid_nodata(const cdp_record *r, size_t px, size_t hw)
{
	for (uint32_t c = 0; c < r->bands; c++) {
		double v = cdp_dtype_get(r->dtype, r->image, c * hw + px);
		if (!(v == r->nodata || (isnan(v) && isnan(r->nodata))))
			return 0;
	}
	return 1;
}

static int32_t label_of(const cdp_loader *l, uint32_t v)
{
	if (l->o.remap_ignore && v == (uint32_t)l->stored_ignore)
		return l->ignore;
	return (int32_t)v;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* What to prefetch while the n stored bytes at s are converted: the next
 * n bytes of this image up to `end`, or at its last step the start of the
 * next sample's value (w->after), when n bytes are there. */
static const uint8_t *prefetch_next(const worker *w, const uint8_t *s, size_t n,
                                    const uint8_t *end)
{
	if ((size_t)(end - s) >= 2 * n)
		return s + n;
	if (s + n == end && w->after && w->after->mv_size >= n)
		return w->after->mv_data;
	return NULL;
}

/* The record of key k, checked: its header and every size against the
 * value's length (cdp_record_peek), so no read leaves the value whatever its
 * bytes, and its shape against the pool's. A compressed record is inflated
 * (and CRC-checked) into w->scratch by cdp_record_decode; an uncompressed one
 * is used in place, with *crc_due set when its CRC is still to be checked
 * (always, or with verify_once until it was found good once) and *crc the
 * CRC of its header. */
static int record_open(cdp_loader *l, worker *w, size_t k, cdp_record *r, int *crc_due,
                       uint32_t *crc)
{
	const MDB_val *v = &l->val[k];
	const uint8_t *p = v->mv_data;
	size_t len = v->mv_size, isz, lsz, msz;
	int rc;

	*crc = 0;
	if ((rc = cdp_record_peek(p, len, r)) != 0)
		return rc;
	*crc_due = !l->o.verify_once || !__atomic_load_n(&l->verified[k], __ATOMIC_RELAXED);
	if (r->compression != CDP_COMP_NONE) {
		if ((rc = cdp_record_decode(p, len, r, &w->scratch)) != 0)
			return rc;
		*crc_due = 0;
	} else {
		if ((rc = cdp_record_sizes(r, &isz, &lsz, &msz)) != 0)
			return rc;
		r->image = p + CDP_RECORD_HDR;
		r->label = lsz ? p + CDP_RECORD_HDR + isz : NULL;
		r->mask = msz ? p + CDP_RECORD_HDR + isz + lsz : NULL;
		if (*crc_due)
			*crc = cdp_crc32(0, p, CDP_RECORD_HDR);
	}
	if (r->dtype != l->info.dtype || r->bands != (uint32_t)l->C || r->height != (uint32_t)l->H ||
	    r->width != (uint32_t)l->W || r->label_kind != l->info.label_kind ||
	    r->label_len != l->info.label_len ||
	    (l->label_px && r->label_ignore != l->info.label_ignore))
		return *crc_due && cdp_crc32(0, p, len - 4) != get_le32(p + len - 4) ? CDP_ECRC : CDP_ESHAPE;
	return 0;
}

/* An uncompressed record's CRC, given crc over its first `done` bytes (the
 * header and image): the label and mask payloads follow the image. */
static int record_crc_end(cdp_loader *l, size_t k, uint32_t crc, size_t done)
{
	const uint8_t *p = l->val[k].mv_data;
	size_t len = l->val[k].mv_size;

	if (cdp_crc32(crc, p + done, len - 4 - done) != get_le32(p + len - 4))
		return CDP_ECRC;
	if (l->o.verify_once)
		__atomic_store_n(&l->verified[k], 1, __ATOMIC_RELAXED);
	return 0;
}

/* lab ((H, W), (1), (K) or NULL) from a checked record */
static void record_labels(const cdp_loader *l, const cdp_record *r, int32_t *lab, size_t hw)
{
	if (lab && r->label_kind == CDP_LABEL_CLASS) {
		lab[0] = label_of(l, r->class_id);
	} else if (lab && r->label_kind == CDP_LABEL_MULTI) {
		const uint8_t *q = r->label;
		for (uint32_t k = 0; k < r->label_len; k++)
			lab[k] = q[k];
	} else if (lab && r->label_kind == CDP_LABEL_U8) {
		const uint8_t *q = r->label;
		for (size_t i = 0; i < hw; i++)
			lab[i] = label_of(l, q[i]);
	} else if (lab) {
		const uint8_t *q = r->label;
		for (size_t i = 0; i < hw; i++)
			lab[i] = label_of(l, (uint32_t)(q[2 * i] | q[2 * i + 1] << 8));
	}
}

/* tgt (NT, H, W) from a checked value record: (y - tmean) * tinv in
 * float32, NaN ("no target") staying NaN. The payload may be unaligned. */
static void record_targets(const cdp_loader *l, const cdp_record *r, float *tgt, size_t hw)
{
	memcpy(tgt, r->label, (size_t)l->NT * hw * sizeof *tgt);
	for (int t = 0; t < l->NT; t++) {
		float m = l->tmean[t], k = l->tinv[t], *d = tgt + (size_t)t * hw;
		for (size_t i = 0; i < hw; i++)
			d[i] = isfinite(d[i]) ? (d[i] - m) * k : NAN;
	}
}

/* Whether pixel i is invalid (loader.h); only records with a mask or a
 * nodata value have any. */
static int pixel_invalid(const cdp_record *r, size_t i, size_t hw)
{
	return r->mask ? r->mask[i] == 0 : record_invalid_nodata(r, i, hw);
}

static int record_may_be_invalid(const cdp_record *r)
{
	return r->mask || (r->flags & CDP_REC_NODATA);
}

/* Decodes key k into img (C, H, W), lab ((H, W), (1) or NULL) and, for a
 * value pool, tgt (NT, H, W; an invalid pixel has no target); stream:
 * img is the batch buffer (non-temporal stores, loader_conv.c).
 *
 * An uncompressed record's CRC (when due) is computed while the image is
 * converted, STEP_SAMPLES at a time (8 KiB of uint8): the CRC reads a step's
 * stored bytes and the conversion finds them in L1, so the map is read once,
 * not twice, and the conversion of a step prefetches the next one
 * (prefetch_next), so that reading the map overlaps the stores of the floats
 * instead of stalling the CRC: the loop is bound by memory bandwidth
 * (bench/loader.sh). The CRC is compared before the label and mask are read
 * and before decode_one returns; a sample that fails is never handed out
 * (the batch stops, or skip_bad overwrites or zeroes it). */
static int decode_one(cdp_loader *l, worker *w, size_t k, float *img, int32_t *lab, float *tgt,
                      int stream)
{
	const uint8_t *end;
	size_t hw = (size_t)l->H * l->W, ds;
	uint32_t crc;
	cdp_record r;
	int rc, dt = l->info.dtype, crc_due;

	if ((rc = record_open(l, w, k, &r, &crc_due, &crc)) != 0)
		return rc;
	ds = cdp_dtype_size(dt);
	end = (const uint8_t *)r.image + (size_t)l->C * hw * ds;
	for (int c = 0; c < l->C; c++) {
		for (size_t o = 0; o < hw; o += STEP_SAMPLES) {
			size_t n = hw - o < STEP_SAMPLES ? hw - o : STEP_SAMPLES;
			const uint8_t *s = (const uint8_t *)r.image + ((size_t)c * hw + o) * ds;
			float *d = img + (size_t)c * hw + o;
			if (crc_due)
				crc = cdp_crc32(crc, s, n * ds);
			if (dt == CDP_DT_U8) {
				l->std_u8(s, d, n, l->mean[c], l->inv[c], stream, prefetch_next(w, s, n, end));
			} else {
				cdp_dtype_to_f32(dt, s, d, n);
				cdp_loader_std_f32(d, n, l->mean[c], l->inv[c], dt == CDP_DT_F32 || dt == CDP_DT_F64);
			}
		}
	}
	if (stream)
		cdp_loader_conv_fence();
	if (crc_due && (rc = record_crc_end(l, k, crc, CDP_RECORD_HDR + l->raw_size)) != 0)
		return rc;
	record_labels(l, &r, lab, hw);
	if (tgt)
		record_targets(l, &r, tgt, hw);
	if (!record_may_be_invalid(&r))
		return 0;
	for (size_t i = 0; i < hw; i++) {
		if (!pixel_invalid(&r, i, hw))
			continue;
		for (int c = 0; c < l->C; c++)
			img[(size_t)c * hw + i] = 0.0f;
		if (lab && l->label_px)
			lab[i] = l->ignore;
		for (int t = 0; tgt && t < l->NT; t++)
			tgt[(size_t)t * hw + i] = NAN;
	}
	return 0;
}

static void prep_aug_of(const cdp_aug *t, cdp_prep_aug *a)
{
	a->y0 = t->y0;
	a->x0 = t->x0;
	a->hflip = t->hflip;
	a->vflip = t->vflip;
	a->rot = t->rot;
}

/* Key k's transform: drawn in training, the centred crop in validation,
 * the identity without augmentation (t->oh, ow: the tile's). */
static void sample_aug(const cdp_loader *l, size_t k, cdp_aug *t)
{
	if (!l->has_aug) {
		memset(t, 0, sizeof *t);
		t->oh = l->H;
		t->ow = l->W;
	} else if (l->o.val) {
		cdp_aug_center(&l->aug, l->H, l->W, t);
	} else {
		cdp_aug_draw(&l->aug, l->H, l->W,
		             cdp_rng_derive(cdp_rng_derive(l->o.seed, l->epoch, 1), k, 0), t);
	}
}

/* The raw path's fix-up of float values (loader.h): what cdp_loader_std_f32
 * sets to the band's mean before standardizing, a value that is not finite
 * as a float32, is set to the mean here, as the type's value, so that
 * prep_batch's (x - mean) * inv is 0 as on the host path. raw (C, H, W) is
 * aligned to its type (a slot buffer, at a multiple of raw_size). */
static void raw_finite(const cdp_loader *l, uint8_t *raw, size_t hw)
{
	for (int c = 0; c < l->C; c++) {
		float m = l->mean[c];
		if (l->info.dtype == CDP_DT_F32) {
			float *d = (float *)(void *)raw + (size_t)c * hw;
			for (size_t i = 0; i < hw; i++)
				if (!isfinite(d[i]))
					d[i] = m;
		} else {
			double *d = (double *)(void *)raw + (size_t)c * hw;
			for (size_t i = 0; i < hw; i++)
				if (!isfinite((float)d[i]))
					d[i] = m;
		}
	}
}

/* The raw path (loader.h): key k's stored image into raw (C, H, W of the
 * pool's type) and its labels into lab ((H, W), (1) or NULL); when a pixel
 * is invalid, *invalid = 1 and the validity (1 or 0) in valid (H, W). The
 * copy takes the CRC along as decode_one's conversion does, and the CRC is
 * compared before anything else is read. */
static int raw_one(cdp_loader *l, worker *w, size_t k, uint8_t *raw, int32_t *lab, int32_t *valid,
                   unsigned char *invalid)
{
	size_t hw = (size_t)l->H * l->W, step = STEP_SAMPLES * cdp_dtype_size(l->info.dtype);
	const uint8_t *img;
	uint32_t crc;
	cdp_record r;
	int rc, crc_due;

	if ((rc = record_open(l, w, k, &r, &crc_due, &crc)) != 0)
		return rc;
	img = r.image;
	for (size_t o = 0; o < l->raw_size; o += step) {
		size_t n = l->raw_size - o < step ? l->raw_size - o : step;
		if (crc_due)
			crc = cdp_crc32(crc, img + o, n);
		memcpy(raw + o, img + o, n);
	}
	if (crc_due && (rc = record_crc_end(l, k, crc, CDP_RECORD_HDR + l->raw_size)) != 0)
		return rc;
	if (l->info.dtype == CDP_DT_F32 || l->info.dtype == CDP_DT_F64)
		raw_finite(l, raw, hw);
	record_labels(l, &r, lab, hw);
	*invalid = 0;
	if (!record_may_be_invalid(&r))
		return 0;
	for (size_t i = 0; i < hw; i++) {
		valid[i] = !pixel_invalid(&r, i, hw);
		if (valid[i])
			continue;
		*invalid = 1;
		if (lab && l->label_px)
			lab[i] = l->ignore;
	}
	return 0;
}

/* The raw path's sample i of s, key k: copy, labels, transform, and the
 * validity through the transform (cdp_aug_apply, as the host path moves
 * its zeroed pixels) into s->valid (h, w). */
static int raw_sample(cdp_loader *l, worker *w, size_t k, slot *s, int i)
{
	size_t ohw = (size_t)l->oh * l->ow;
	int32_t *lab = s->label ? s->label + (size_t)i * loader_lab_size(l) : NULL;
	uint8_t *valid = s->valid + (size_t)i * ohw;
	const int32_t *v = w->tmp_lab;
	cdp_aug t;
	int rc;

	if ((rc = raw_one(l, w, k, s->raw + (size_t)i * l->raw_size, lab, w->tmp_lab,
	                  &s->invalid[i])) != 0)
		return rc;
	sample_aug(l, k, &t);
	prep_aug_of(&t, &s->aug[i]);
	if (!s->invalid[i]) {
		memset(valid, 1, ohw);
		return 0;
	}
	if (l->has_aug) {
		if (cdp_aug_apply(&t, 0, l->H, l->W, NULL, w->tmp_lab, NULL, w->tmp_valid))
			return CDP_EINVAL;
		v = w->tmp_valid;
	}
	for (size_t j = 0; j < ohw; j++)
		valid[j] = (uint8_t)v[j];
	return 0;
}

void cdp_loader_blank_sample(cdp_loader *l, slot *s, int i)
{
	size_t ohw = (size_t)l->oh * l->ow, nl = loader_lab_size(l);
	cdp_aug t;

	if (l->o.raw) {
		memset(s->raw + (size_t)i * l->raw_size, 0, l->raw_size);
		memset(s->valid + (size_t)i * ohw, 0, ohw);
		s->invalid[i] = 1;
		sample_aug(l, s->index[i], &t);
		prep_aug_of(&t, &s->aug[i]);
	} else {
		memset(s->image + (size_t)i * loader_img_size(l), 0, loader_img_size(l) * sizeof(float));
	}
	if (s->label)
		for (size_t j = 0; j < nl; j++)
			s->label[(size_t)i * nl + j] = l->ignore;
	for (size_t j = 0; s->target && j < loader_tgt_size(l); j++)
		s->target[(size_t)i * loader_tgt_size(l) + j] = NAN;
}

/* The targets of a transformed sample: w->tmp_tgt (NT, H, W) through t
 * into tgt (NT, h, w) as the image goes (cdp_aug_apply: the same crop,
 * flips and turns); the warp resamples them bilinearly as it does the
 * bands (a NaN among the four pixels read makes the value NaN), and the
 * pixels it reads from outside the tile, where the image is 0, have no
 * target (NaN). No photometric change touches them. */
static int augment_targets(cdp_loader *l, worker *w, const cdp_aug *t, float *tgt)
{
	size_t ohw = (size_t)l->oh * l->ow;

	if (cdp_aug_apply(t, l->NT, l->H, l->W, w->tmp_tgt, NULL, tgt, NULL))
		return CDP_EINVAL;
	if (!t->warp)
		return 0;
	/* tmp_lab (H, W >= h, w), unused by value pools, marks every pixel 1;
	 * the warp's outside gets the "ignore" 0 in tmp_valid */
	memcpy(w->tmp_tgt, tgt, loader_tgt_size(l) * sizeof *tgt);
	for (size_t j = 0; j < ohw; j++)
		w->tmp_lab[j] = 1;
	cdp_aug_warp(t, l->NT, w->tmp_tgt, w->tmp_lab, tgt, w->tmp_valid, 0);
	for (size_t j = 0; j < ohw; j++)
		if (!w->tmp_valid[j])
			for (int c = 0; c < l->NT; c++)
				tgt[(size_t)c * ohw + j] = NAN;
	return 0;
}

int cdp_loader_load_sample(cdp_loader *l, worker *w, size_t k, slot *s, int i)
{
	int32_t *lab = s->label ? s->label + (size_t)i * loader_lab_size(l) : NULL;
	float *tgt = s->target ? s->target + (size_t)i * loader_tgt_size(l) : NULL, *img;
	cdp_aug t;
	int rc;

	if (l->o.raw)
		return raw_sample(l, w, k, s, i);
	img = s->image + (size_t)i * loader_img_size(l);
	if (!l->has_aug)
		return decode_one(l, w, k, img, lab, tgt, 1);
	if ((rc = decode_one(l, w, k, w->tmp_img, lab ? w->tmp_lab : NULL, tgt ? w->tmp_tgt : NULL,
	                     0)) != 0)
		return rc;
	sample_aug(l, k, &t);
	if (tgt && (rc = augment_targets(l, w, &t, tgt)) != 0)
		return rc;
	if (lab && !l->label_px)
		memcpy(lab, w->tmp_lab, loader_lab_size(l) * sizeof *lab);
	if (cdp_aug_apply(&t, l->C, l->H, l->W, w->tmp_img, l->label_px ? w->tmp_lab : NULL, img,
	                  l->label_px ? lab : NULL))
		return CDP_EINVAL;
	if (t.warp) {
		/* tmp_img and tmp_lab, done with, are at least the output's size */
		int32_t *wl = lab && l->label_px ? lab : NULL;
		memcpy(w->tmp_img, img, loader_img_size(l) * sizeof(float));
		if (wl)
			memcpy(w->tmp_lab, wl, (size_t)l->oh * l->ow * sizeof(int32_t));
		cdp_aug_warp(&t, l->C, w->tmp_img, wl ? w->tmp_lab : NULL, img, wl, l->ignore);
	}
	cdp_aug_photo(&l->aug, &t, l->C, img);
	return 0;
}
