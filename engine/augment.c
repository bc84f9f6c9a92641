/* augment.c: crops, flips and quarter turns of host samples (augment.h).
 *
 * Every output pixel has one source pixel, and along an output row the
 * source moves by a constant step (+-1 within a row, +-w across rows after
 * a quarter turn), so each row is a strided copy whose start and step come
 * from the mapping of its first two pixels. Image channels and the label
 * share the mapping, which is what keeps them aligned.
 *
 * Photometric changes (cdp_aug_photo) work on each band alike, so they
 * suit any number of bands; python/cdpool/data.py's Augment repeats them.
 *
 * Scale and arbitrary angles (cdp_aug_warp) resample the output: bilinear
 * for the image, nearest for the label, ignore outside.
 *
 * MixUp and CutMix (cdp_mix_draw, cdp_mix_apply) mix the samples of a
 * whole batch; python/cdpool/data.py's Mix repeats them.
 */
#include "augment.h"
#include "cdp_rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cdp_aug_cfg_parse(cdp_aug_cfg *a, const cdp_cfg *cfg, cdp_cfg_section *s,
                      char *err, size_t cap)
{
	memset(a, 0, sizeof(*a));
	if (cdp_cfg_int(cfg, s, "aug_hflip", 0, 0, 1, &a->hflip, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "aug_vflip", 0, 0, 1, &a->vflip, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "aug_rot90", 0, 0, 1, &a->rot90, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "crop_h", 0, 0, 1 << 20, &a->crop_h, err, cap) < 0 ||
	    cdp_cfg_int(cfg, s, "crop_w", 0, 0, 1 << 20, &a->crop_w, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_brightness", 0, 0, 10, &a->brightness, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_brightness_p", 1, 0, 1, &a->brightness_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_contrast", 0, 0, 1, &a->contrast, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_contrast_p", 1, 0, 1, &a->contrast_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_gamma", 0, 0, 2, &a->gamma, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_gamma_p", 1, 0, 1, &a->gamma_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_band_jitter", 0, 0, 10, &a->jitter, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_band_jitter_p", 1, 0, 1, &a->jitter_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_noise", 0, 0, 10, &a->noise, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_noise_p", 1, 0, 1, &a->noise_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_scale", 0, 0, 4, &a->scale, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_scale_p", 1, 0, 1, &a->scale_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_rotate", 0, 0, 180, &a->rotate, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "aug_rotate_p", 1, 0, 1, &a->rotate_p, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "mixup_alpha", 0, 0, 100, &a->mixup_alpha, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "cutmix_alpha", 0, 0, 100, &a->cutmix_alpha, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "mix_prob", 1, 0, 1, &a->mix_prob, err, cap) < 0 ||
	    cdp_cfg_float(cfg, s, "mix_switch_prob", 0.5, 0, 1, &a->mix_switch_prob, err, cap) < 0)
		return -1;
	if ((a->crop_h == 0) != (a->crop_w == 0)) {
		snprintf(err, cap, "%s:%d: [net]: set both crop_h and crop_w, or neither",
		         cfg->path, s->line);
		return -1;
	}
	return 0;
}

int cdp_aug_photo_on(const cdp_aug_cfg *a)
{
	return a->brightness > 0 || a->contrast > 0 || a->gamma > 0 || a->jitter > 0 ||
	       a->noise > 0;
}

int cdp_aug_host_only(const cdp_aug_cfg *a)
{
	return cdp_aug_photo_on(a) || a->scale > 0 || a->rotate > 0 || cdp_aug_mix_on(a);
}

int cdp_aug_mix_on(const cdp_aug_cfg *a)
{
	return a->mixup_alpha > 0 || a->cutmix_alpha > 0;
}

int cdp_aug_check(const cdp_aug_cfg *a, int h, int w, char *err, size_t cap)
{
	if (h < 1 || w < 1) {
		snprintf(err, cap, "empty input %dx%d", h, w);
		return -1;
	}
	if (a->crop_h > h || a->crop_w > w) {
		snprintf(err, cap, "crop %dx%d does not fit in %dx%d tiles", a->crop_h, a->crop_w, h, w);
		return -1;
	}
	return 0;
}

static void out_size(const cdp_aug_cfg *a, int h, int w, cdp_aug *t)
{
	memset(t, 0, sizeof(*t));
	t->zoom = 1.0;
	t->oh = a->crop_h ? a->crop_h : h;
	t->ow = a->crop_w ? a->crop_w : w;
}

void cdp_aug_draw(const cdp_aug_cfg *a, int h, int w, uint64_t seed, cdp_aug *t)
{
	cdp_rng r;

	cdp_rng_seed(&r, seed);
	out_size(a, h, w, t);
	if (a->crop_h) {
		t->y0 = (int)cdp_rng_below(&r, (uint64_t)(h - t->oh + 1));
		t->x0 = (int)cdp_rng_below(&r, (uint64_t)(w - t->ow + 1));
	}
	if (a->hflip)
		t->hflip = (int)cdp_rng_below(&r, 2);
	if (a->vflip)
		t->vflip = (int)cdp_rng_below(&r, 2);
	if (a->rot90)
		t->rot = t->oh == t->ow ? (int)cdp_rng_below(&r, 4) : 2 * (int)cdp_rng_below(&r, 2);
	if (cdp_aug_photo_on(a)) {
		t->photo = 1;
		t->photo_seed = cdp_rng_next(&r);
	}
	t->zoom = 1.0;
	if (a->scale > 0 && cdp_rng_double(&r) < (double)a->scale_p)
		t->zoom = pow(1.0 + (double)a->scale, 2.0 * cdp_rng_double(&r) - 1.0);
	if (a->rotate > 0 && cdp_rng_double(&r) < (double)a->rotate_p)
		t->deg = (double)a->rotate * (2.0 * cdp_rng_double(&r) - 1.0);
	t->warp = t->zoom != 1.0 || t->deg != 0.0;
}

void cdp_aug_center(const cdp_aug_cfg *a, int h, int w, cdp_aug *t)
{
	out_size(a, h, w, t);
	t->y0 = (h - t->oh) / 2;
	t->x0 = (w - t->ow) / 2;
}

/* Source offset in an (h, w) plane of output pixel (i, j). */
static long src_of(const cdp_aug *t, int w, int i, int j)
{
	int r, s;

	switch (t->rot) {
	case 1: r = j; s = t->ow - 1 - i; break;
	case 2: r = t->oh - 1 - i; s = t->ow - 1 - j; break;
	case 3: r = t->oh - 1 - j; s = i; break;
	default: r = i; s = j; break;
	}
	if (t->vflip)
		r = t->oh - 1 - r;
	if (t->hflip)
		s = t->ow - 1 - s;
	return (long)(t->y0 + r) * w + (t->x0 + s);
}

int cdp_aug_apply(const cdp_aug *t, int c, int h, int w, const float *img,
                  const int32_t *lab, float *img_out, int32_t *lab_out)
{
	size_t plane = (size_t)h * w, oplane = (size_t)t->oh * t->ow;

	/* a hand-made transform must not read outside the input */
	if (t->oh < 1 || t->ow < 1 || t->y0 < 0 || t->x0 < 0 || t->y0 > h - t->oh ||
	    t->x0 > w - t->ow || t->rot < 0 || t->rot > 3 || ((t->rot & 1) && t->oh != t->ow))
		return -1;

	for (int i = 0; i < t->oh; i++) {
		long start = src_of(t, w, i, 0);
		long step = t->ow > 1 ? src_of(t, w, i, 1) - start : 0;
		for (int ch = 0; ch < c; ch++) {
			const float *src = img + ch * plane + start;
			float *dst = img_out + ch * oplane + (size_t)i * t->ow;
			for (int j = 0; j < t->ow; j++)
				dst[j] = src[(long)j * step];
		}
		if (lab) {
			const int32_t *src = lab + start;
			int32_t *dst = lab_out + (size_t)i * t->ow;
			for (int j = 0; j < t->ow; j++)
				dst[j] = src[(long)j * step];
		}
	}
	return 0;
}

/* u = double() < p, drawn only for an op that is on (range > 0). */
static int photo_due(cdp_rng *r, float range, float p)
{
	return range > 0 && cdp_rng_double(r) < (double)p;
}

/* R * (2 * double() - 1): uniform in [-R, R). */
static double sym(cdp_rng *r, float range)
{
	return (double)range * (2.0 * cdp_rng_double(r) - 1.0);
}

static void add_plane(float *x, size_t n, double d)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((double)x[i] + d);
}

/* One band's gamma: onto [0, 1] by its min and max, power g, and back. */
static void gamma_plane(float *x, size_t n, double g)
{
	float lo = x[0], hi = x[0];

	for (size_t i = 1; i < n; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	if (!(hi > lo))
		return;
	double span = (double)hi - (double)lo;
	for (size_t i = 0; i < n; i++) {
		x[i] = (float)((double)lo + span * pow(((double)x[i] - (double)lo) / span, g));
	}
}

void cdp_aug_photo(const cdp_aug_cfg *a, const cdp_aug *t, int c, float *img)
{
	size_t plane = (size_t)t->oh * t->ow, n = plane * (size_t)c;
	cdp_rng r;

	if (!t->photo)
		return;
	cdp_rng_seed(&r, t->photo_seed);
	if (photo_due(&r, a->brightness, a->brightness_p))
		add_plane(img, n, sym(&r, a->brightness));
	if (photo_due(&r, a->contrast, a->contrast_p)) {
		double f = 1.0 + sym(&r, a->contrast);
		for (size_t i = 0; i < n; i++)
			img[i] = (float)((double)img[i] * f);
	}
	if (photo_due(&r, a->gamma, a->gamma_p)) {
		double g = exp(sym(&r, a->gamma));
		for (int ch = 0; ch < c; ch++)
			gamma_plane(img + (size_t)ch * plane, plane, g);
	}
	if (photo_due(&r, a->jitter, a->jitter_p))
		for (int ch = 0; ch < c; ch++)
			add_plane(img + (size_t)ch * plane, plane, sym(&r, a->jitter));
	if (photo_due(&r, a->noise, a->noise_p))
		for (size_t i = 0; i < n; i++)
			img[i] = (float)((double)img[i] + (double)a->noise * cdp_rng_normal(&r));
}

static int clampi(int v, int hi)
{
	return v < 0 ? 0 : v > hi ? hi : v;
}

void cdp_aug_warp(const cdp_aug *t, int c, const float *img, const int32_t *lab,
                  float *img_out, int32_t *lab_out, int32_t ignore)
{
	int oh = t->oh, ow = t->ow;
	size_t plane = (size_t)oh * ow;
	double cy = (oh - 1) / 2.0, cx = (ow - 1) / 2.0, rad = t->deg * M_PI / 180.0;
	double co = cos(rad), si = sin(rad);

	for (int i = 0; i < oh; i++)
		for (int j = 0; j < ow; j++) {
			double dy = i - cy, dx = j - cx;
			double sy = cy + (co * dy - si * dx) / t->zoom;
			double sx = cx + (si * dy + co * dx) / t->zoom;
			size_t o = (size_t)i * ow + j;
			if (!(sy >= -0.5 && sy < oh - 0.5 && sx >= -0.5 && sx < ow - 0.5)) {
				for (int ch = 0; ch < c; ch++)
					img_out[ch * plane + o] = 0.0f;
				if (lab)
					lab_out[o] = ignore;
				continue;
			}
			if (lab)
				lab_out[o] = lab[(size_t)clampi((int)floor(sy + 0.5), oh - 1) * ow +
				                 clampi((int)floor(sx + 0.5), ow - 1)];
			double fy0 = floor(sy), fx0 = floor(sx), fy = sy - fy0, fx = sx - fx0;
			int y0 = clampi((int)fy0, oh - 1), y1 = clampi((int)fy0 + 1, oh - 1);
			int x0 = clampi((int)fx0, ow - 1), x1 = clampi((int)fx0 + 1, ow - 1);
			for (int ch = 0; ch < c; ch++) {
				const float *p = img + ch * plane;
				double p00 = p[(size_t)y0 * ow + x0], p01 = p[(size_t)y0 * ow + x1];
				double p10 = p[(size_t)y1 * ow + x0], p11 = p[(size_t)y1 * ow + x1];
				img_out[ch * plane + o] = (float)((1.0 - fy) * ((1.0 - fx) * p00 + fx * p01) +
				                                  fy * ((1.0 - fx) * p10 + fx * p11));
			}
		}
}

/* Gamma(alpha, 1): Marsaglia and Tsang (2000); below 1, gamma(alpha + 1)
 * times u^(1 / alpha) */
static double gamma_draw(cdp_rng *r, double alpha)
{
	double a = alpha < 1.0 ? alpha + 1.0 : alpha;
	double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);

	for (;;) {
		double z = cdp_rng_normal(r), v = 1.0 + c * z, u;
		if (v <= 0.0)
			continue;
		v = v * v * v;
		u = cdp_rng_double(r);
		if (u < 1.0 - 0.0331 * z * z * z * z || log(u) < 0.5 * z * z + d * (1.0 - v + log(v)))
			return alpha < 1.0 ? d * v * pow(1.0 - cdp_rng_double(r), 1.0 / alpha) : d * v;
	}
}

/* Beta(alpha, alpha) = X / (X + Y) */
static double beta_sym(cdp_rng *r, double alpha)
{
	double x = gamma_draw(r, alpha), y = gamma_draw(r, alpha);

	return x + y > 0.0 ? x / (x + y) : 0.5;
}

static int clamp_to(int v, int hi)
{
	return v < 0 ? 0 : v > hi ? hi : v;
}

void cdp_mix_draw(const cdp_aug_cfg *a, int h, int w, uint64_t seed, cdp_mix *m)
{
	cdp_rng r;
	double alpha;

	memset(m, 0, sizeof *m);
	m->lam = 1.0;
	if (!cdp_aug_mix_on(a))
		return;
	cdp_rng_seed(&r, seed);
	if (!(cdp_rng_double(&r) < (double)a->mix_prob))
		return;
	m->on = 1;
	if (a->mixup_alpha > 0 && a->cutmix_alpha > 0)
		m->cut = cdp_rng_double(&r) < (double)a->mix_switch_prob;
	else
		m->cut = a->cutmix_alpha > 0;
	alpha = m->cut ? a->cutmix_alpha : a->mixup_alpha;
	m->lam = beta_sym(&r, alpha);
	if (m->cut) {
		double ratio = sqrt(1.0 - m->lam);
		int ch = (int)(h * ratio), cw = (int)(w * ratio);
		int cy = (int)cdp_rng_below(&r, (uint64_t)h), cx = (int)cdp_rng_below(&r, (uint64_t)w);
		m->y0 = clamp_to(cy - ch / 2, h);
		m->y1 = clamp_to(cy + ch / 2, h);
		m->x0 = clamp_to(cx - cw / 2, w);
		m->x1 = clamp_to(cx + cw / 2, w);
		m->lam = 1.0 - (double)(m->y1 - m->y0) * (m->x1 - m->x0) / ((double)h * w);
	}
}

void cdp_mix_apply(const cdp_mix *m, int n, int c, int h, int w, float *img)
{
	size_t plane = (size_t)h * w, sample = plane * (size_t)c;

	if (!m->on)
		return;
	for (int i = 0; i < n / 2; i++) {
		float *a = img + (size_t)i * sample, *b = img + (size_t)(n - 1 - i) * sample;
		if (m->cut) {
			for (int ch = 0; ch < c; ch++)
				for (int y = m->y0; y < m->y1; y++)
					for (int x = m->x0; x < m->x1; x++) {
						size_t o = ch * plane + (size_t)y * w + x;
						float t = a[o];
						a[o] = b[o];
						b[o] = t;
					}
			continue;
		}
		for (size_t o = 0; o < sample; o++) {
			double va = a[o], vb = b[o];
			a[o] = (float)(m->lam * va + (1.0 - m->lam) * vb);
			b[o] = (float)(m->lam * vb + (1.0 - m->lam) * va);
		}
	}
	/* an odd batch's middle sample is its own partner: x = lam x + (1 - lam) x */
	if ((n & 1) && !m->cut) {
		float *a = img + (size_t)(n / 2) * sample;
		for (size_t o = 0; o < sample; o++)
			a[o] = (float)(m->lam * a[o] + (1.0 - m->lam) * a[o]);
	}
}
