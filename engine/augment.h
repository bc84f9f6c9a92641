/* augment.h: random geometric augmentation of a training sample on the
 * host: an image (C, H, W) float and its label (H, W) int32 get the same
 * transform, so every label stays on its pixel.
 *
 * A transform is a crop window, optional flips and a rotation, applied in
 * that order. With A the (oh, ow) crop at (y0, x0) of the input:
 *   B = A flipped left-right if hflip (W axis), then top-bottom if vflip
 *   out = np.rot90(B, rot, axes=(H, W))          (counter-clockwise)
 * so out[i][j] = B[i][j], B[j][ow-1-i], B[oh-1-i][ow-1-j], B[oh-1-j][i] for
 * rot = 0, 1, 2, 3. Odd rotations swap H and W, so they are drawn only when
 * the output is square; otherwise rot is 0 or 2.
 *
 * Drawing is deterministic from one 64-bit seed (cdp_rng), in this order:
 * y0 = below(H - oh + 1), x0 = below(W - ow + 1) (with a crop), hflip =
 * below(2), vflip = below(2), rot = below(4) (square) or 2 * below(2), each
 * only when enabled. The trainer derives the seed per sample from the run
 * seed, epoch and sample index (cdp_rng_derive), so a sample gets the same
 * transform whichever rank or thread loads it.
 *
 * [net] options (cdp_aug_cfg_parse): aug_hflip=0|1, aug_vflip=0|1,
 * aug_rot90=0|1 (default 0), crop_h=, crop_w= (default 0: no crop; both or
 * neither).
 *
 * Photometric changes (cdp_aug_photo), on the standardized values of the
 * transformed image, each with a range R (0: off) and a probability
 * aug_*_p= P (default 1): aug_brightness=R adds d to every band,
 * aug_contrast=R multiplies every value by f, aug_gamma=R maps each band of
 * the sample onto [0, 1] by its own min and max, raises it to the power g
 * and maps it back, aug_band_jitter=R adds its own d_c to band c,
 * aug_noise=R adds R times a standard normal draw to every value. Labels are
 * untouched. When any is on, cdp_aug_draw's last draw is photo_seed =
 * next(); cdp_aug_photo then draws from the generator seeded with it, in
 * this order, each op only when its range is > 0: u = double(), and when
 * u < P: brightness d = R * (2 * double() - 1); contrast f = 1 + R * (2 *
 * double() - 1); gamma g = exp(R * (2 * double() - 1)); band jitter d_c =
 * R * (2 * double() - 1) for c = 0..C-1; noise: normal() for each value in
 * (C, H, W) order. Each op is computed in double on the float value and
 * rounded to float before the next: x + d, x * f, lo + (hi - lo) *
 * pow((x - lo) / (hi - lo), g) (a band with hi == lo is left), x + d_c,
 * x + R * normal().
 *
 * Scale and rotation (cdp_aug_warp), after the geometry and before the
 * photometric changes, on the (oh, ow) output about its centre (cy, cx) =
 * ((oh - 1) / 2, (ow - 1) / 2): aug_scale=S (0 to 4) zooms by z =
 * (1 + S)^(2 * double() - 1), aug_rotate=A (degrees, 0 to 180) turns by
 * a = A * (2 * double() - 1), each when double() < its aug_*_p= (default
 * 1), drawn in that order after photo_seed. Output pixel (i, j) reads the
 * point sy = cy + (cos a * (i - cy) - sin a * (j - cx)) / z, sx = cx +
 * (sin a * (i - cy) + cos a * (j - cx)) / z (double; a in radians as
 * deg * pi / 180): outside [-0.5, oh - 0.5) x [-0.5, ow - 0.5) the image
 * is 0 and the label the ignore label; inside, the label is the nearest
 * pixel's (floor(sy + 0.5), floor(sx + 0.5)) and each band bilinear over
 * the four pixels around it (indices clamped to the edge): with y0 =
 * floor(sy), fy = sy - y0 (x alike), (1 - fy) * ((1 - fx) * p00 + fx *
 * p01) + fy * ((1 - fx) * p10 + fx * p11), in double, rounded to float.
 *
 * Mixing a classifier's batch (cdp_mix_draw, cdp_mix_apply): MixUp
 * (mixup_alpha=A > 0) and CutMix (cutmix_alpha=A > 0), as timm's Mixup in
 * its "batch" mode: one lam and one box for the whole batch, sample i of the
 * n in the batch mixed with sample n - 1 - i (the batch flipped), and the
 * loss lam * L(y) + (1 - lam) * L(y flipped). The draw, from one seed (the
 * trainer's: cdp_rng_derive(cdp_rng_derive(seed, epoch, 2), step, 0), the
 * same on every rank), in this order: u = double(); no mixing (lam 1)
 * unless u < mix_prob= (default 1); with both alphas on, cut = double() <
 * mix_switch_prob= (default 0.5), else cut when only cutmix_alpha is on;
 * lam = beta(A) of the chosen alpha; with cut, a box of (oh, ow) =
 * ((int)(h sqrt(1 - lam)), (int)(w sqrt(1 - lam))) about cy = below(h),
 * cx = below(w): rows [clamp(cy - oh / 2), clamp(cy + oh / 2)), columns
 * alike (integer halves, clamped to [0, h] and [0, w]), and lam becomes
 * 1 - box area / (h w). beta(A) = X / (X + Y) (0.5 when both are 0), X
 * then Y drawn by gamma(A): for A >= 1 Marsaglia and Tsang's method, d = A
 * - 1/3, c = 1 / sqrt(9 d), repeat { z = normal(); v = (1 + c z)^3; if v >
 * 0: u = double(), return d v if u < 1 - 0.0331 z^4 or log(u) < z^2 / 2 +
 * d (1 - v + log v) }; for A < 1 gamma(A + 1) * (1 - double())^(1 / A).
 * MixUp makes x_i = (float)(lam x_i + (1 - lam) x_{n-1-i}) in double;
 * CutMix swaps the box of every pair (i, n - 1 - i) in all bands.
 */
#ifndef CDP_AUGMENT_H
#define CDP_AUGMENT_H

#include <stddef.h>
#include <stdint.h>
#include "cfg/cfg.h"

typedef struct cdp_aug_cfg {
	int hflip, vflip, rot90;    /* 1: draw it */
	int crop_h, crop_w;         /* output size; 0: the input size */
	/* photometric ranges (0: off) and probabilities */
	float brightness, brightness_p, contrast, contrast_p, gamma, gamma_p;
	float jitter, jitter_p, noise, noise_p;
	float scale, scale_p, rotate, rotate_p;   /* the warp (0: off) */
	/* batch mixing (0: off) */
	float mixup_alpha, cutmix_alpha, mix_prob, mix_switch_prob;
} cdp_aug_cfg;

typedef struct cdp_aug {
	int y0, x0, oh, ow;         /* crop window in the input */
	int hflip, vflip;
	int rot;                    /* quarter turns counter-clockwise, 0..3 */
	int photo;                  /* 1: cdp_aug_photo draws from photo_seed */
	uint64_t photo_seed;
	int warp;                   /* 1: cdp_aug_warp by zoom and deg */
	double zoom, deg;
} cdp_aug;

/* A batch's mixing (cdp_mix_draw): on 0 leaves the batch as it is. */
typedef struct cdp_mix {
	int on, cut;                /* mixed; by a box (CutMix) */
	double lam;                 /* the weight of the sample's own label */
	int y0, y1, x0, x1;         /* the box: rows [y0, y1), columns [x0, x1) */
} cdp_mix;

int  cdp_aug_cfg_parse(cdp_aug_cfg *a, const cdp_cfg *cfg, cdp_cfg_section *s,
                       char *err, size_t cap);
/* 1 when a photometric change is on (a range > 0). */
int  cdp_aug_photo_on(const cdp_aug_cfg *a);
/* 1 when a change only the host does is on: photometric, the warp or
 * batch mixing (the device's prep_batch does crops, flips and quarter
 * turns). */
int  cdp_aug_host_only(const cdp_aug_cfg *a);
/* 1 when batch mixing (MixUp or CutMix) is on. */
int  cdp_aug_mix_on(const cdp_aug_cfg *a);
/* The crop must fit inputs of (h, w); 0 or -1 with a reason. */
int  cdp_aug_check(const cdp_aug_cfg *a, int h, int w, char *err, size_t cap);
/* A random transform for an (h, w) input (cdp_aug_check passed). */
void cdp_aug_draw(const cdp_aug_cfg *a, int h, int w, uint64_t seed, cdp_aug *t);
/* The evaluation transform: the centred crop ((h - oh) / 2, (w - ow) / 2),
 * no flip, no rotation. */
void cdp_aug_center(const cdp_aug_cfg *a, int h, int w, cdp_aug *t);
/* Applies t to img (c, h, w) into img_out (c, t->oh, t->ow) and, when lab is
 * not NULL, lab (h, w) into lab_out (t->oh, t->ow). Outputs must not
 * overlap the inputs. Returns 0, or -1 (nothing written) when t does not
 * fit the input: a window outside it, rot outside 0..3, or an odd rot with
 * oh != ow. */
int  cdp_aug_apply(const cdp_aug *t, int c, int h, int w, const float *img,
                   const int32_t *lab, float *img_out, int32_t *lab_out);
/* The photometric changes of a (drawn from t->photo_seed; nothing when
 * t->photo is 0) on img (c, t->oh, t->ow) in place. */
void cdp_aug_photo(const cdp_aug_cfg *a, const cdp_aug *t, int c, float *img);
/* The warp of t (t->warp 1) from img (c, t->oh, t->ow) and lab (or NULL)
 * into img_out and lab_out (not overlapping them); ignore is the label of
 * pixels from outside. */
void cdp_aug_warp(const cdp_aug *t, int c, const float *img, const int32_t *lab,
                  float *img_out, int32_t *lab_out, int32_t ignore);
/* The mixing of a batch of (h, w) images from seed. */
void cdp_mix_draw(const cdp_aug_cfg *a, int h, int w, uint64_t seed, cdp_mix *m);
/* Mixes img (n, c, h, w) in place by m; labels are left to the caller
 * (the partner of sample i is n - 1 - i). */
void cdp_mix_apply(const cdp_mix *m, int n, int c, int h, int w, float *img);

#endif
