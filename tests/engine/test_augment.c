/* test_augment.c: crops, flips and quarter turns (augment.c).
 *
 * The exact pixel mapping is checked twice: against small literal arrays
 * (np.rot90 / np.fliplr results written out), and for every flip and
 * rotation combination against a reference that applies crop, fliplr,
 * flipud and rot90 one step at a time. Each image channel encodes the
 * pixel's source position, so the check also proves image and label stay
 * aligned. Drawing: same seed, same transform; all combinations and every
 * crop offset occur; odd turns never for non-square outputs.
 */
#include "augment.h"
#include "backend.h"
#include "cdp_dtype.h"
#include "cdp_rng.h"
#include "cfg/cfg.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- step-by-step reference on (h, w) int planes ---------------------------- */

static void ref_crop(const int *a, int w, int y0, int x0, int oh, int ow, int *o)
{
	for (int i = 0; i < oh; i++)
		for (int j = 0; j < ow; j++)
			o[i * ow + j] = a[(y0 + i) * w + x0 + j];
}

static void ref_fliplr(int *a, int h, int w)
{
	for (int i = 0; i < h; i++)
		for (int j = 0; j < w / 2; j++) {
			int t = a[i * w + j];
			a[i * w + j] = a[i * w + w - 1 - j];
			a[i * w + w - 1 - j] = t;
		}
}

static void ref_flipud(int *a, int h, int w)
{
	for (int i = 0; i < h / 2; i++)
		for (int j = 0; j < w; j++) {
			int t = a[i * w + j];
			a[i * w + j] = a[(h - 1 - i) * w + j];
			a[(h - 1 - i) * w + j] = t;
		}
}

/* One counter-clockwise quarter turn, np.rot90(a): (h, w) -> (w, h),
 * out = a.T[::-1]. */
static void ref_rot90_once(int *a, int *h, int *w)
{
	int *t = malloc(sizeof(int) * (size_t)*h * *w);
	int nh = *w, nw = *h;

	for (int i = 0; i < nh; i++)
		for (int j = 0; j < nw; j++)
			t[i * nw + j] = a[j * *w + (*w - 1 - i)];
	memcpy(a, t, sizeof(int) * (size_t)*h * *w);
	free(t);
	*h = nh;
	*w = nw;
}

static void ref_apply(const cdp_aug *t, const int *in, int w, int *out)
{
	int oh = t->oh, ow = t->ow;

	ref_crop(in, w, t->y0, t->x0, oh, ow, out);
	if (t->hflip)
		ref_fliplr(out, oh, ow);
	if (t->vflip)
		ref_flipud(out, oh, ow);
	for (int k = 0; k < t->rot; k++)
		ref_rot90_once(out, &oh, &ow);
}

/* ---- tests ----------------------------------------------------------------- */

static void test_literals(void)
{
	/* a = [[1,2,3],[4,5,6],[7,8,9]] */
	const float a[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	static const struct { int hf, vf, rot; float want[9]; } cases[] = {
		{ 0, 0, 1, { 3, 6, 9, 2, 5, 8, 1, 4, 7 } },       /* np.rot90(a) */
		{ 0, 0, 2, { 9, 8, 7, 6, 5, 4, 3, 2, 1 } },
		{ 0, 0, 3, { 7, 4, 1, 8, 5, 2, 9, 6, 3 } },       /* np.rot90(a, 3) */
		{ 1, 0, 0, { 3, 2, 1, 6, 5, 4, 9, 8, 7 } },       /* np.fliplr(a) */
		{ 0, 1, 0, { 7, 8, 9, 4, 5, 6, 1, 2, 3 } },       /* np.flipud(a) */
		{ 1, 0, 1, { 1, 4, 7, 2, 5, 8, 3, 6, 9 } },       /* np.rot90(np.fliplr(a)) = a.T */
	};
	float out[9];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		cdp_aug t = { .oh = 3, .ow = 3, .hflip = cases[c].hf, .vflip = cases[c].vf,
		              .rot = cases[c].rot };
		CHECK_RC(cdp_aug_apply(&t, 1, 3, 3, a, NULL, out, NULL), 0);
		CHECK(memcmp(out, cases[c].want, sizeof(out)) == 0,
		      "case %zu: %g %g %g / %g %g %g / %g %g %g", c, out[0], out[1], out[2], out[3],
		      out[4], out[5], out[6], out[7], out[8]);
	}
	/* crop (2, 2) at (1, 0) of a 3x4 image, then rot 2: rows (5 6) (9 10) of
	 * 1..12 turned half way */
	{
		const float b[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
		const int32_t lb[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
		const float want[4] = { 10, 9, 6, 5 };
		const int32_t wantl[4] = { 10, 9, 6, 5 };
		float o[4];
		int32_t ol[4];
		cdp_aug t = { .y0 = 1, .x0 = 0, .oh = 2, .ow = 2, .rot = 2 };
		CHECK_RC(cdp_aug_apply(&t, 1, 3, 4, b, lb, o, ol), 0);
		CHECK(memcmp(o, want, sizeof(o)) == 0 && memcmp(ol, wantl, sizeof(ol)) == 0,
		      "crop+rot2: %g %g %g %g", o[0], o[1], o[2], o[3]);
	}
	/* invalid transforms are refused */
	{
		float o[9];
		cdp_aug t = { .oh = 2, .ow = 3, .rot = 1 };
		CHECK_RC(cdp_aug_apply(&t, 1, 3, 3, a, NULL, o, NULL), -1);
		t = (cdp_aug){ .oh = 3, .ow = 3, .y0 = 1 };
		CHECK_RC(cdp_aug_apply(&t, 1, 3, 3, a, NULL, o, NULL), -1);
		t = (cdp_aug){ .oh = 3, .ow = 3, .rot = 4 };
		CHECK_RC(cdp_aug_apply(&t, 1, 3, 3, a, NULL, o, NULL), -1);
	}
}

/* Every flip/rotation combination on crops of a 7x9 input with 3 channels:
 * channel ch of pixel p holds p + 1000 ch and the label holds p. */
static void test_all_combinations(void)
{
	enum { H = 7, W = 9, C = 3 };
	static const int shapes[][2] = { { 5, 5 }, { 7, 9 }, { 4, 6 }, { 1, 1 }, { 1, 9 } };
	static float img[C * H * W], out[C * H * W];
	static int32_t lab[H * W], lout[H * W];
	static int plane[H * W], ref[H * W];
	int bad = 0;

	for (int p = 0; p < H * W; p++) {
		plane[p] = lab[p] = p;
		for (int ch = 0; ch < C; ch++)
			img[ch * H * W + p] = (float)(p + 1000 * ch);
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int combo = 0; combo < 16; combo++) {
			cdp_aug t = { .oh = shapes[s][0], .ow = shapes[s][1], .hflip = combo & 1,
			              .vflip = (combo >> 1) & 1, .rot = combo >> 2 };
			t.y0 = (H - t.oh) / 3;
			t.x0 = W - t.ow;
			if ((t.rot & 1) && t.oh != t.ow) {
				CHECK_RC(cdp_aug_apply(&t, C, H, W, img, lab, out, lout), -1);
				continue;
			}
			CHECK_RC(cdp_aug_apply(&t, C, H, W, img, lab, out, lout), 0);
			ref_apply(&t, plane, W, ref);
			for (int q = 0; q < t.oh * t.ow; q++) {
				bad += lout[q] != ref[q];
				for (int ch = 0; ch < C; ch++)
					bad += out[ch * t.oh * t.ow + q] != (float)(ref[q] + 1000 * ch);
			}
		}
	CHECK(bad == 0, "%d pixels differ from the step-by-step reference", bad);
}

static void test_draw(void)
{
	cdp_aug_cfg a = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = 4, .crop_w = 4 };
	cdp_aug t1, t2;
	int seen[16] = { 0 }, ys[5] = { 0 }, xs[7] = { 0 }, odd = 0;
	char err[128];

	CHECK_RC(cdp_aug_check(&a, 8, 10, err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_check(&a, 3, 10, err, sizeof(err)), -1);
	CHECK(strcmp(err, "crop 4x4 does not fit in 3x10 tiles") == 0, "%s", err);
	cdp_aug_draw(&a, 8, 10, 42, &t1);
	cdp_aug_draw(&a, 8, 10, 42, &t2);
	CHECK(memcmp(&t1, &t2, sizeof(t1)) == 0, "same seed, same transform");
	for (uint64_t seed = 0; seed < 2000; seed++) {
		cdp_aug_draw(&a, 8, 10, seed, &t1);
		CHECK(t1.oh == 4 && t1.ow == 4 && t1.y0 >= 0 && t1.y0 <= 4 && t1.x0 >= 0 &&
		      t1.x0 <= 6, "window");
		seen[t1.hflip | t1.vflip << 1 | t1.rot << 2]++;
		ys[t1.y0]++;
		xs[t1.x0]++;
	}
	for (int i = 0; i < 16; i++)
		CHECK(seen[i] > 60, "combination %d drawn %d times of 2000", i, seen[i]);
	for (int i = 0; i < 5; i++)
		CHECK(ys[i] > 250, "y0 %d drawn %d times", i, ys[i]);
	for (int i = 0; i < 7; i++)
		CHECK(xs[i] > 180, "x0 %d drawn %d times", i, xs[i]);

	/* non-square output: half turns only */
	a.crop_w = 6;
	for (uint64_t seed = 0; seed < 200; seed++) {
		cdp_aug_draw(&a, 8, 10, seed, &t1);
		odd += t1.rot & 1;
		seen[0] += t1.rot == 2;
	}
	CHECK(odd == 0, "odd turn on a non-square output");
	/* disabled options draw nothing */
	{
		cdp_aug_cfg none = { 0 };
		cdp_aug_draw(&none, 8, 10, 7, &t1);
		CHECK(t1.oh == 8 && t1.ow == 10 && t1.y0 == 0 && t1.x0 == 0 && !t1.hflip &&
		      !t1.vflip && t1.rot == 0, "identity");
	}
	a.crop_w = 4;
	cdp_aug_center(&a, 8, 11, &t1);
	CHECK(t1.y0 == 2 && t1.x0 == 3 && t1.rot == 0 && !t1.hflip && !t1.vflip, "center crop");
}

/* The backend's prep_batch (the device data path) must give what the host
 * path gives: dtype conversion, standardisation, then cdp_aug_apply. Both
 * square crops (all turns) and non-square ones (half turns), u8 and i16. */
static void test_prep_batch(void)
{
	enum { N = 6, C = 2, H = 9, W = 11 };
	cdp_backend *be = cdp_backend_cpu(1);
	static const int dts[2] = { CDP_DT_U8, CDP_DT_I16 };
	const float mean[C] = { 100.0f, -3.5f }, inv[C] = { 0.02f, 0.5f };
	int bad = 0, cases = 0;

	for (int d = 0; d < 2; d++)
		for (int shape = 0; shape < 2; shape++) {
			cdp_aug_cfg a = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = shape ? 5 : 7,
			                  .crop_w = 7 };
			int oh = a.crop_h, ow = a.crop_w, dt = dts[d];
			size_t es = cdp_dtype_size(dt), hw = (size_t)H * W, ohw = (size_t)oh * ow;
			unsigned char *raw = malloc(N * C * hw * es);
			int32_t *lab = malloc(N * hw * sizeof *lab), *lo = malloc(N * ohw * sizeof *lo);
			int32_t *lr = malloc(ohw * sizeof *lr);
			float *img = malloc(N * C * ohw * sizeof *img), *f = malloc(C * hw * sizeof *f);
			float *ref = malloc(C * ohw * sizeof *ref);
			cdp_prep_aug pa[N];
			cdp_aug t[N];

			for (size_t i = 0; i < N * C * hw * es; i++)
				raw[i] = (unsigned char)(i * 2654435761u >> 13);
			for (size_t i = 0; i < N * hw; i++)
				lab[i] = (int32_t)(i % 7);
			for (int s = 0; s < N; s++) {
				cdp_aug_draw(&a, H, W, 1000 + 17 * s + shape, &t[s]);
				pa[s] = (cdp_prep_aug){ t[s].y0, t[s].x0, t[s].hflip, t[s].vflip, t[s].rot };
			}
			be->prep_batch(be, dt, N, C, H, W, raw, mean, inv, pa, oh, ow, img, lab, lo);
			for (int s = 0; s < N; s++) {
				cdp_dtype_to_f32(dt, raw + (size_t)s * C * hw * es, f, C * hw);
				for (int ch = 0; ch < C; ch++)
					for (size_t i = 0; i < hw; i++)
						f[ch * hw + i] = (f[ch * hw + i] - mean[ch]) * inv[ch];
				CHECK_RC(cdp_aug_apply(&t[s], C, H, W, f, lab + s * hw, ref, lr), 0);
				bad += memcmp(ref, img + s * C * ohw, C * ohw * sizeof *ref) != 0;
				bad += memcmp(lr, lo + s * ohw, ohw * sizeof *lr) != 0;
				cases++;
			}
			free(raw); free(lab); free(lo); free(lr); free(img); free(f); free(ref);
		}
	CHECK(bad == 0 && cases == 24, "prep_batch differs from convert+standardize+cdp_aug_apply in %d of %d samples",
	      bad, cases);
	be->destroy(be);
}

static void test_cfg(void)
{
	char err[256];
	cdp_cfg cfg;
	cdp_aug_cfg a;

	CHECK_RC(cdp_cfg_parse("[net]\naug_hflip=1\naug_rot90=1\ncrop_h=224\ncrop_w=200\n", "m.cfg",
	                       NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof(err)), 0);
	CHECK(a.hflip == 1 && a.vflip == 0 && a.rot90 == 1 && a.crop_h == 224 && a.crop_w == 200,
	      "parsed");
	cdp_cfg_free(&cfg);
	CHECK_RC(cdp_cfg_parse("[net]\ncrop_h=224\n", "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof(err)), -1);
	CHECK(strcmp(err, "m.cfg:1: [net]: set both crop_h and crop_w, or neither") == 0, "%s", err);
	cdp_cfg_free(&cfg);
	CHECK_RC(cdp_cfg_parse("[net]\naug_vflip=2\n", "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof(err)), -1);
	CHECK(strcmp(err, "m.cfg:2: option 'aug_vflip': 2 is outside [0, 1]") == 0, "%s", err);
	cdp_cfg_free(&cfg);
	CHECK_RC(cdp_cfg_parse("[net]\naug_noise=0.1\naug_gamma_p=0.5\n", "m.cfg", NULL, 0, &cfg,
	                       err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof(err)), 0);
	CHECK(a.noise == 0.1f && a.noise_p == 1 && a.gamma == 0 && a.gamma_p == 0.5f &&
	      a.brightness_p == 1 && cdp_aug_photo_on(&a), "photometric keys parsed");
	cdp_cfg_free(&cfg);
	CHECK_RC(cdp_cfg_parse("[net]\naug_contrast=1.5\n", "m.cfg", NULL, 0, &cfg, err, sizeof(err)), 0);
	CHECK_RC(cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof(err)), -1);
	cdp_cfg_free(&cfg);
}

/* The photometric changes' statistics over many seeds on a 3-band 24x24
 * image (values from a fixed generator): brightness adds one d in [-R, R]
 * to every value, contrast multiplies by one f in [1-R, 1+R], band jitter
 * adds one d_c per band (different bands, different d), gamma keeps each
 * band's min, max and order, noise adds values of mean 0 and std R; each
 * applies in about a fraction P of the samples; the geometry is the one
 * drawn without them. */
enum { PC = 3, PH = 24, PW = 24, PN = PC * PH * PW };

static void photo_one(cdp_aug_cfg *a, uint64_t seed, const float *in, float *out)
{
	cdp_aug t;

	cdp_aug_draw(a, PH, PW, seed, &t);
	CHECK(t.photo == 1, "photo drawn");
	memcpy(out, in, PN * sizeof(float));
	cdp_aug_photo(a, &t, PC, out);
}

static void test_photo(void)
{
	static float in[PN], out[PN];
	cdp_rng r;
	int seeds = 400;

	cdp_rng_seed(&r, 5);
	for (int i = 0; i < PN; i++)
		in[i] = (float)cdp_rng_normal(&r);
	{       /* brightness, p = 0.25 */
		cdp_aug_cfg a = { .brightness = 0.5f, .brightness_p = 0.25f };
		int on = 0, bad = 0;
		double lo = 1, hi = -1;
		for (int s = 0; s < seeds; s++) {
			photo_one(&a, (uint64_t)s, in, out);
			double d = (double)out[0] - in[0];
			for (int i = 0; i < PN; i++)
				bad += fabs((double)out[i] - in[i] - d) > 1e-6;
			if (d != 0) {
				on++;
				lo = d < lo ? d : lo;
				hi = d > hi ? d : hi;
			}
		}
		CHECK(bad == 0, "brightness: %d values not shifted by the sample's d", bad);
		CHECK(lo >= -0.5 && hi <= 0.5 && lo < -0.4 && hi > 0.4, "brightness d in [%g, %g]", lo, hi);
		/* binomial(400, 0.25): mean 100, sd 8.7 */
		CHECK(on > 65 && on < 135, "brightness applied in %d of %d (p = 0.25)", on, seeds);
	}
	{       /* contrast */
		cdp_aug_cfg a = { .contrast = 0.3f, .contrast_p = 1 };
		int bad = 0;
		double lo = 9, hi = -9;
		for (int s = 0; s < seeds; s++) {
			photo_one(&a, (uint64_t)s, in, out);
			double f = (double)out[0] / in[0];
			for (int i = 0; i < PN; i++)
				bad += fabs((double)out[i] - f * in[i]) > 1e-6 * (1 + fabs(in[i]));
			lo = f < lo ? f : lo;
			hi = f > hi ? f : hi;
		}
		CHECK(bad == 0, "contrast: %d values not scaled by the sample's f", bad);
		CHECK(lo >= 0.7 - 1e-6 && hi <= 1.3 + 1e-6 && lo < 0.75 && hi > 1.25,
		      "contrast f in [%g, %g]", lo, hi);
	}
	{       /* band jitter */
		cdp_aug_cfg a = { .jitter = 1, .jitter_p = 1 };
		int bad = 0, same = 0;
		for (int s = 0; s < 50; s++) {
			double d[PC];
			photo_one(&a, (uint64_t)s, in, out);
			for (int c = 0; c < PC; c++) {
				d[c] = (double)out[c * PH * PW] - in[c * PH * PW];
				for (int i = 0; i < PH * PW; i++)
					bad += fabs((double)out[c * PH * PW + i] - in[c * PH * PW + i] - d[c]) > 1e-6 ||
					       fabs(d[c]) > 1;
			}
			same += d[0] == d[1] || d[1] == d[2];
		}
		CHECK(bad == 0 && same == 0, "band jitter: %d values off their band's d, %d equal d", bad, same);
	}
	{       /* gamma */
		cdp_aug_cfg a = { .gamma = 0.5f, .gamma_p = 1 };
		int bad = 0, moved = 0;
		for (int s = 0; s < 50; s++) {
			photo_one(&a, (uint64_t)s, in, out);
			for (int c = 0; c < PC; c++) {
				const float *x = in + c * PH * PW, *y = out + c * PH * PW;
				float xl = x[0], xh = x[0], yl = y[0], yh = y[0];
				for (int i = 1; i < PH * PW; i++) {
					xl = fminf(xl, x[i]); xh = fmaxf(xh, x[i]);
					yl = fminf(yl, y[i]); yh = fmaxf(yh, y[i]);
					bad += (x[i] > x[0]) != (y[i] > y[0]) && x[i] != x[0];
				}
				bad += fabsf(xl - yl) > 1e-5f || fabsf(xh - yh) > 1e-5f;
				moved += fabsf(x[1] - y[1]) > 1e-4f;
			}
		}
		CHECK(bad == 0 && moved > 75, "gamma: %d order/range changes, %d bands moved", bad, moved);
	}
	{       /* noise: std R, mean 0, over all seeds */
		cdp_aug_cfg a = { .noise = 0.2f, .noise_p = 1, .hflip = 1, .rot90 = 1 };
		cdp_aug_cfg g = { .hflip = 1, .rot90 = 1 };
		double s1 = 0, s2 = 0;
		long n = 0;
		int geo = 0;
		for (int s = 0; s < 20; s++) {
			cdp_aug t, t0;
			cdp_aug_draw(&a, PH, PW, (uint64_t)s, &t);
			cdp_aug_draw(&g, PH, PW, (uint64_t)s, &t0);
			geo += t.hflip != t0.hflip || t.rot != t0.rot || t0.photo;
			photo_one(&a, (uint64_t)s, in, out);
			for (int i = 0; i < PN; i++, n++) {
				double e = (double)out[i] - in[i];
				s1 += e;
				s2 += e * e;
			}
		}
		double m = s1 / n, sd = sqrt(s2 / n - m * m);
		CHECK(geo == 0, "photometric keys changed the geometry in %d samples", geo);
		/* 34560 draws: the sample std of N(0, 0.2) is within 2% */
		CHECK(fabs(m) < 0.01 && fabs(sd - 0.2) < 0.004, "noise mean %g std %g, want 0 and 0.2", m, sd);
	}
	{       /* off: the validation transform changes nothing */
		cdp_aug_cfg a = { .noise = 1, .noise_p = 1 };
		cdp_aug t;
		cdp_aug_center(&a, PH, PW, &t);
		memcpy(out, in, sizeof in);
		cdp_aug_photo(&a, &t, PC, out);
		CHECK(memcmp(out, in, sizeof in) == 0, "the centred transform changed values");
	}
}

/* The warp against facts that need no resampler: a quarter turn by 90
 * degrees is np.rot90's clockwise turn (rot 3); zooming in a ramp
 * v = 1000 y + x reproduces the ramp at the source point (bilinear is exact
 * on a linear function) and each label, a pixel's id, lies within half a
 * pixel of it; turned by 45 degrees, about 1 - 2 (sqrt 2 - 1) = 17.2% of a
 * square falls outside (ignore label, image 0); the draws keep their
 * ranges and probability. */
static void test_warp(void)
{
	enum { N = 64 };
	static float img[N * N], out[N * N];
	static int32_t lab[N * N], lout[N * N];

	for (int i = 0; i < N * N; i++) {
		img[i] = (float)(1000 * (i / N) + i % N);
		lab[i] = i;
	}
	{
		cdp_aug t = { .oh = N, .ow = N, .warp = 1, .zoom = 1, .deg = 90 }, q = { .oh = N, .ow = N,
		                                                                            .rot = 3 };
		static float ref[N * N];
		static int32_t lref[N * N];
		int bad = 0;
		cdp_aug_warp(&t, 1, img, lab, out, lout, -1);
		CHECK_RC(cdp_aug_apply(&q, 1, N, N, img, lab, ref, lref), 0);
		for (int i = 0; i < N * N; i++)
			bad += lout[i] != lref[i] || fabsf(out[i] - ref[i]) > 1e-3f;
		CHECK(bad == 0, "90 degrees: %d pixels differ from rot 3", bad);
	}
	{
		cdp_aug t = { .oh = N, .ow = N, .warp = 1, .zoom = 1.7, .deg = 0 };
		double c = (N - 1) / 2.0;
		int bad = 0, lbad = 0;
		cdp_aug_warp(&t, 1, img, lab, out, lout, -1);
		for (int i = 0; i < N; i++)
			for (int j = 0; j < N; j++) {
				double sy = c + (i - c) / 1.7, sx = c + (j - c) / 1.7;
				bad += fabs(out[i * N + j] - (1000 * sy + sx)) > 1e-2;
				lbad += fabs(lout[i * N + j] / N - sy) > 0.5 + 1e-9 ||
				        fabs(lout[i * N + j] % N - sx) > 0.5 + 1e-9;
			}
		CHECK(bad == 0 && lbad == 0, "zoom 1.7: %d values off the ramp, %d labels not nearest",
		      bad, lbad);
	}
	{
		cdp_aug t = { .oh = N, .ow = N, .warp = 1, .zoom = 1, .deg = 45 };
		int ign = 0, bad = 0;
		cdp_aug_warp(&t, 1, img, lab, out, lout, -7);
		for (int i = 0; i < N * N; i++) {
			ign += lout[i] == -7;
			bad += (lout[i] == -7) != (out[i] == 0.0f && i != 0);
		}
		CHECK(fabs(ign / (double)(N * N) - (3 - 2 * sqrt(2.0))) < 0.02 && bad <= 1,
		      "45 degrees: %d of %d ignored (want 17.2%%), %d image/label mismatches", ign,
		      N * N, bad);
		CHECK(lout[(N / 2) * N + N / 2] != -7 && lout[0] == -7 && lout[N * N - 1] == -7,
		      "45 degrees: centre kept, corners ignored");
	}
	{
		cdp_aug_cfg a = { .scale = 0.5f, .scale_p = 0.5f, .rotate = 30, .rotate_p = 1 };
		int on = 0, bad = 0;
		double zl = 9, zh = 0;
		for (int s = 0; s < 400; s++) {
			cdp_aug t;
			cdp_aug_draw(&a, N, N, (uint64_t)s, &t);
			bad += !t.warp || fabs(t.deg) > 30 || t.zoom < 1 / 1.5 - 1e-12 || t.zoom > 1.5 + 1e-12;
			if (t.zoom != 1) {
				on++;
				zl = t.zoom < zl ? t.zoom : zl;
				zh = t.zoom > zh ? t.zoom : zh;
			}
		}
		CHECK(bad == 0 && on > 165 && on < 235 && zl < 0.7 && zh > 1.4,
		      "warp draws: %d out of range, zoom in %d of 400 (p 0.5), [%g, %g]", bad, on, zl, zh);
		cdp_aug_cfg none = { .hflip = 1 };
		cdp_aug t;
		cdp_aug_draw(&none, N, N, 3, &t);
		CHECK(!t.warp && t.zoom == 1 && t.deg == 0, "no warp drawn without its keys");
		CHECK(cdp_aug_host_only(&a) && !cdp_aug_host_only(&none), "host_only");
	}
}

/* Change detection stacks the dates as bands (cdp-tile --time): every
 * date and the label must get the same geometry. Channels of date d are
 * the date-0 plane plus 1000 * d; after drawn crops, flips, turns, scale
 * and rotation each date is still date 0 plus its offset, and where the
 * warp keeps the label, the label is the pixel's date-0 plane (exactly
 * without the warp). */
static void test_dates(void)
{
	enum { N = 24, D = 3, BPD = 2, C = D * BPD, O = 16 };
	static float img[C * N * N], g[C * O * O], out[C * O * O];
	static int32_t lab[N * N], gl[O * O], lout[O * O];
	cdp_aug_cfg a = { .hflip = 1, .vflip = 1, .rot90 = 1, .crop_h = O, .crop_w = O,
	                  .scale = 0.3f, .scale_p = 0.5f, .rotate = 40, .rotate_p = 0.5f };
	int bad = 0, lbad = 0, warped = 0;

	for (int p = 0; p < N * N; p++) {
		lab[p] = p;
		for (int c = 0; c < C; c++)
			img[c * N * N + p] = (float)(p + 1000 * (c / BPD) + 100000 * (c % BPD));
	}
	for (uint64_t seed = 0; seed < 200; seed++) {
		cdp_aug t;
		cdp_aug_draw(&a, N, N, seed, &t);
		CHECK_RC(cdp_aug_apply(&t, C, N, N, img, lab, g, gl), 0);
		if (t.warp) {
			warped++;
			cdp_aug_warp(&t, C, g, gl, out, lout, -1);
		} else {
			memcpy(out, g, sizeof out);
			memcpy(lout, gl, sizeof lout);
		}
		for (int q = 0; q < O * O; q++) {
			if (lout[q] == -1)
				continue;
			for (int c = 0; c < C; c++) {
				float want = out[(c % BPD) * O * O + q] + 1000.0f * (float)(c / BPD);
				bad += fabsf(out[c * O * O + q] - want) > 0.02f;
			}
			lbad += t.warp ? fabsf(out[q] - (float)lout[q]) > 1.5f * N
			               : out[q] != (float)lout[q];
		}
	}
	CHECK(bad == 0 && lbad == 0 && warped > 20,
	      "dates as bands: %d values off their date's offset, %d labels off their pixel "
	      "(%d of 200 warped)", bad, lbad, warped);
}

int main(void)
{
	test_dates();
	test_photo();
	test_warp();
	test_literals();
	test_all_combinations();
	test_draw();
	test_prep_batch();
	test_cfg();
	return tap_done();
}
