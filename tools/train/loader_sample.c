/* loader_sample.c: one sample of the loader (loader.h): a record from the
 * map, validated, converted to standardized float32 (loader_conv.c), its
 * invalid pixels and labels resolved, then augmented into its batch slot.
 *
 * Not here: which key a sample is, bad-record replacement, threads
 * (loader.c).
 */
#include "loader_int.h"

#include <math.h>

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

/* Decodes key k into img (C, H, W) and lab ((H, W), (1) or NULL); stream:
 * img is the batch buffer (non-temporal stores, loader_conv.c).
 *
 * A compressed record goes through cdp_record_decode (CRC, inflation). An
 * uncompressed one is used in place: cdp_record_peek validates its header
 * and every size against the value's length first, so no read leaves the
 * value whatever its bytes, and its CRC (unless verify_once found it good
 * before) is computed while the image is converted, STEP_SAMPLES at a time
 * (8 KiB of uint8): the CRC reads a step's stored bytes and the conversion
 * finds them in L1, so the map is read once, not twice, and the conversion
 * of a step prefetches the next one (prefetch_next), so that reading the
 * map overlaps the stores of the floats instead of stalling the CRC: the
 * loop is bound by memory bandwidth (bench/loader.sh). The CRC is compared
 * before the label and mask are read and before decode_one returns; a
 * sample that fails is never handed out (the batch stops, or skip_bad
 * overwrites or zeroes it). */
static int decode_one(cdp_loader *l, worker *w, size_t k, float *img, int32_t *lab, int stream)
{
	const MDB_val *v = &l->val[k];
	const uint8_t *p = v->mv_data, *end;
	size_t hw = (size_t)l->H * l->W, len = v->mv_size, isz, lsz, msz, ds;
	uint32_t crc = 0;
	cdp_record r;
	int rc, dt = l->info.dtype, crc_due;

	if ((rc = cdp_record_peek(p, len, &r)) != 0)
		return rc;
	crc_due = !l->o.verify_once || !__atomic_load_n(&l->verified[k], __ATOMIC_RELAXED);
	if (r.compression != CDP_COMP_NONE) {
		if ((rc = cdp_record_decode(p, len, &r, &w->scratch)) != 0)
			return rc;
		crc_due = 0;
	} else {
		if ((rc = cdp_record_sizes(&r, &isz, &lsz, &msz)) != 0)
			return rc;
		r.image = p + CDP_RECORD_HDR;
		r.label = lsz ? p + CDP_RECORD_HDR + isz : NULL;
		r.mask = msz ? p + CDP_RECORD_HDR + isz + lsz : NULL;
		if (crc_due)
			crc = cdp_crc32(0, p, CDP_RECORD_HDR);
	}
	if (r.dtype != dt || r.bands != (uint32_t)l->C || r.height != (uint32_t)l->H ||
	    r.width != (uint32_t)l->W || r.label_kind != l->info.label_kind)
		return crc_due && cdp_crc32(0, p, len - 4) != get_le32(p + len - 4) ? CDP_ECRC : CDP_ESHAPE;
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
	if (crc_due) {
		/* the label and mask payloads follow the image */
		size_t done = CDP_RECORD_HDR + (size_t)l->C * hw * ds;
		if (cdp_crc32(crc, p + done, len - 4 - done) != get_le32(p + len - 4))
			return CDP_ECRC;
		if (l->o.verify_once)
			__atomic_store_n(&l->verified[k], 1, __ATOMIC_RELAXED);
	}
	if (lab && r.label_kind == CDP_LABEL_CLASS) {
		lab[0] = label_of(l, r.class_id);
	} else if (lab && r.label_kind == CDP_LABEL_U8) {
		const uint8_t *q = r.label;
		for (size_t i = 0; i < hw; i++)
			lab[i] = label_of(l, q[i]);
	} else if (lab) {
		const uint8_t *q = r.label;
		for (size_t i = 0; i < hw; i++)
			lab[i] = label_of(l, (uint32_t)(q[2 * i] | q[2 * i + 1] << 8));
	}
	if (!r.mask && !(r.flags & CDP_REC_NODATA))
		return 0;
	for (size_t i = 0; i < hw; i++) {
		if (r.mask ? r.mask[i] != 0 : !record_invalid_nodata(&r, i, hw))
			continue;
		for (int c = 0; c < l->C; c++)
			img[(size_t)c * hw + i] = 0.0f;
		if (lab && l->label_px)
			lab[i] = l->ignore;
	}
	return 0;
}

int cdp_loader_load_sample(cdp_loader *l, worker *w, size_t k, slot *s, int i)
{
	float *img = s->image + (size_t)i * loader_img_size(l);
	int32_t *lab = s->label ? s->label + (size_t)i * loader_lab_size(l) : NULL;
	cdp_aug t;
	int rc;

	if (!l->has_aug)
		return decode_one(l, w, k, img, lab, 1);
	if ((rc = decode_one(l, w, k, w->tmp_img, lab ? w->tmp_lab : NULL, 0)) != 0)
		return rc;
	if (l->o.val)
		cdp_aug_center(&l->aug, l->H, l->W, &t);
	else
		cdp_aug_draw(&l->aug, l->H, l->W,
		             cdp_rng_derive(cdp_rng_derive(l->o.seed, l->epoch, 1), k, 0), &t);
	if (lab && !l->label_px)
		lab[0] = w->tmp_lab[0];
	return cdp_aug_apply(&t, l->C, l->H, l->W, w->tmp_img,
	                     l->label_px ? w->tmp_lab : NULL, img,
	                     l->label_px ? lab : NULL) ? CDP_EINVAL : 0;
}
