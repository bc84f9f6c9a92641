/* test_ops_data.c: batch preparation on the device (prep_batch: u8, i16 and
 * f32 pixels, every combination of hflip, vflip and the four rotations,
 * random crops, with and without labels), cdp-predict's window ops
 * (win_gather, win_blend: windows inside, before and past the strip,
 * wider than it; sigmoid and softmax) and the data path (pinned host
 * memory, asynchronous copies ordered by copy_fence, copy_wait before the
 * host reuses its buffer), on both sides (gpu_harness.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_dtype.h"
#include "test_ops.h"

/* raw (n, c, h, w) of type dt with values typical of the type */
static gh_buf raw_pixels(int dt, size_t count)
{
	size_t sz = cdp_dtype_size(dt);
	unsigned char *h = malloc(count * sz + 4);
	for (size_t i = 0; i < count; i++) {
		if (dt == CDP_DT_U8) {
			h[i] = (unsigned char)gh_int(0, 255);
		} else if (dt == CDP_DT_I16) {
			int16_t v = (int16_t)gh_int(-3000, 12000);
			memcpy(h + 2 * i, &v, 2);
		} else {
			float v = (float)(cdp_rng_double(&gh_rng) * 2000 - 500);
			memcpy(h + 4 * i, &v, 4);
		}
	}
	gh_buf b = gh_from(h, count * sz);
	free(h);
	return b;
}

static void prep_run(int dt, int c, int h, int w, int oh, int ow, int with_labels)
{
	/* one sample per combination of hflip, vflip and rot: 16 */
	enum { N = 16 };
	cdp_prep_aug aug[N];
	float mean[8], inv[8];
	size_t nraw = (size_t)N * c * h * w, nimg = (size_t)N * c * oh * ow;
	char tag[96], what[160];

	for (int i = 0; i < N; i++) {
		int odd = (i >> 2) & 1, ch = odd ? ow : oh, cw = odd ? oh : ow;
		aug[i].hflip = i & 1;
		aug[i].vflip = (i >> 1) & 1;
		aug[i].rot = i >> 2;
		aug[i].y0 = gh_int(0, h - ch);
		aug[i].x0 = gh_int(0, w - cw);
	}
	for (int k = 0; k < c; k++) {
		mean[k] = (float)(cdp_rng_double(&gh_rng) * 200);
		inv[k] = (float)(0.001 + cdp_rng_double(&gh_rng) * 0.05);
	}
	gh_buf raw = raw_pixels(dt, nraw), mb = gh_from(mean, c * 4), ib = gh_from(inv, c * 4);
	gh_buf img = gh_rand(nimg, -1, 1), lraw = gh_alloc((size_t)N * h * w * 4);
	gh_buf lab = gh_alloc((size_t)N * oh * ow * 4);
	int32_t *lh = malloc((size_t)N * h * w * 4);
	/* labels that say where they came from, so a wrong pixel cannot match */
	for (size_t i = 0; i < (size_t)N * h * w; i++)
		lh[i] = (int32_t)i;
	gh_set(&lraw, lh, (size_t)N * h * w * 4);
	free(lh);
	snprintf(tag, sizeof tag, "%s (%d,%d,%d) -> (%d,%d)%s", cdp_dtype_name(dt), c, h, w, oh, ow,
	         with_labels ? " with labels" : "");
	GH_BOTH(s, be)
		be->prep_batch(be, dt, N, c, h, w, raw.p[s], GF(mb, s), GF(ib, s), aug, oh, ow,
		               GF(img, s), with_labels ? GI(lraw, s) : NULL,
		               with_labels ? GI(lab, s) : NULL);
	snprintf(what, sizeof what, "prep_batch img %s", tag);
	gh_cmp(what, &img, nimg, GH_TOL);
	if (with_labels) {
		snprintf(what, sizeof what, "prep_batch labels %s", tag);
		gh_cmp_exact(what, &lab, (size_t)N * oh * ow * 4);
	}
	gh_free(&raw); gh_free(&mb); gh_free(&ib); gh_free(&img); gh_free(&lraw); gh_free(&lab);
}

void test_prep(void)
{
	static const int dts[] = { CDP_DT_U8, CDP_DT_I16, CDP_DT_F32 };
	for (int i = 0; i < 3; i++) {
		prep_run(dts[i], 3, 17, 15, 12, 10, 1);    /* crop, oh != ow */
		prep_run(dts[i], 4, 16, 16, 16, 16, 0);    /* no crop, no labels */
		prep_run(dts[i], 1, 9, 30, 5, 7, 1);
	}
	int h = gh_int(2, 40), w = gh_int(2, 40), m = h < w ? h : w;
	prep_run(CDP_DT_U8, gh_int(1, 8), h, w, gh_int(1, m), gh_int(1, m), 1);
}

/* ---- cdp-predict's windows ---- */

/* Window sizes, strips and batches: on cdp-predict's grid (stride 3s/4
 * from -s/8: windows at both edges) and scattered in [-2s, w + s] in any
 * order (wider than the strip: reflected more than once). */
static const struct { int c, k, r, w, s, nb; } win_shapes[] = {
	{ 3, 1, 40, 300, 32, 12 }, { 2, 4, 20, 75, 16, 6 }, { 1, 2, 5, 7, 16, 3 },
	{ 4, 1, 3, 1, 5, 2 }, { 3, 40, 9, 50, 8, 8 },
};

/* x0 (nb): window origins as above; the caller frees */
static int32_t *win_origins(int w, int s, int nb, int grid)
{
	int32_t *x0 = malloc((size_t)nb * sizeof *x0);
	for (int b = 0; b < nb; b++)
		x0[b] = grid ? -(s / 8) + b * (s - s / 4) : gh_int(-2 * s, w + s);
	return x0;
}

static void win_gather_case(int c, int r, int w, int s, int nb, int grid)
{
	size_t nx = (size_t)nb * c * s * s;
	int32_t *x0 = win_origins(w, s, nb, grid), *srow = malloc((size_t)s * sizeof *srow);
	char what[128];

	for (int i = 0; i < s; i++)
		srow[i] = gh_int(0, r - 1);
	gh_buf strip = gh_rand((size_t)c * r * w, -3, 3), x = gh_rand(nx, -1, 1);
	gh_buf dx0 = gh_from(x0, (size_t)nb * 4), drow = gh_from(srow, (size_t)s * 4);
	GH_BOTH(t, be)
		be->win_gather(be, c, r, w, s, GF(strip, t), GI(drow, t), nb, GI(dx0, t), GF(x, t));
	snprintf(what, sizeof what, "win_gather (%d,%d,%d) s %d nb %d %s", c, r, w, s, nb,
	         grid ? "grid" : "scattered");
	gh_cmp_exact(what, &x, nx * 4);
	gh_free(&strip); gh_free(&x); gh_free(&dx0); gh_free(&drow);
	free(x0);
	free(srow);
}

void test_win_gather(void)
{
	for (size_t i = 0; i < sizeof win_shapes / sizeof win_shapes[0]; i++)
		for (int grid = 1; grid >= 0; grid--)
			win_gather_case(win_shapes[i].c, win_shapes[i].r, win_shapes[i].w, win_shapes[i].s,
			                win_shapes[i].nb, grid);
	win_gather_case(gh_int(1, 5), gh_int(1, 30), gh_int(1, 200), gh_int(1, 40), gh_int(1, 9), 0);
}

/* Sums of non-negative terms: every element within 1e-5 of itself (the
 * GPU's expf is a few ulp off the CPU's), down to 1e-6 of the largest,
 * below which products of tiny probabilities may turn subnormal. */
static void win_blend_case(int k, int w, int s, int nb, int grid)
{
	size_t ns = (size_t)k * s * w;
	int32_t *x0 = win_origins(w, s, nb, grid);
	char what[128];

	gh_buf logits = gh_rand((size_t)nb * k * s * s, -12, 12), w1 = gh_rand((size_t)s, 0, 1);
	gh_buf sum = gh_rand(ns, 0, 2), dx0 = gh_from(x0, (size_t)nb * 4);
	GH_BOTH(t, be)
		be->win_blend(be, k, s, w, nb, GF(logits, t), GI(dx0, t), GF(w1, t), GF(sum, t));
	snprintf(what, sizeof what, "win_blend k %d w %d s %d nb %d %s", k, w, s, nb,
	         grid ? "grid" : "scattered");
	gh_cmp_floor(what, &sum, ns, 1e-5, 1e-6);
	gh_free(&logits); gh_free(&w1); gh_free(&sum); gh_free(&dx0);
	free(x0);
}

void test_win_blend(void)
{
	for (size_t i = 0; i < sizeof win_shapes / sizeof win_shapes[0]; i++)
		for (int grid = 1; grid >= 0; grid--)
			win_blend_case(win_shapes[i].k, win_shapes[i].w, win_shapes[i].s, win_shapes[i].nb,
			               grid);
	win_blend_case(gh_int(1, 6), gh_int(1, 200), gh_int(1, 40), gh_int(1, 9), 0);
}

/* ---- the data path ---- */

void test_datapath(void)
{
	/* 16 MiB in 4 pieces: long enough that a compute op not ordered after
	 * the copies (a broken copy_fence) reads what was there before */
	const size_t n = (size_t)4 << 20, piece = n / 4;
	float *host[2], *back[2];
	gh_buf dst = gh_alloc(n * 4), dst2 = gh_alloc(n * 4), sum = gh_alloc(n * 4);
	int ok_all = 1;

	GH_BOTH(s, be) {
		void *st = be->stream(be);
		GCHECK(strcmp(be->name, "cpu") ? st != NULL : st == NULL,
		       "%s: stream() gives %p", be->name, st);
		host[s] = be->host_alloc(be, n * 4);
		back[s] = malloc(n * 4);
		if (!host[s] || !back[s]) {
			fprintf(stderr, "test_ops: %s: cannot allocate %zu pinned bytes\n", be->name, n * 4);
			exit(99);
		}
		size_t nz = 0;
		while (nz < n && host[s][nz] == 0.0f)
			nz++;
		GCHECK(nz == n, "%s: host_alloc memory is not zeroed at %zu", be->name, nz);
		for (size_t i = 0; i < n; i++)
			host[s][i] = (float)(i % 1000003);
		for (size_t p = 0; p < 4; p++)
			be->to_device_async(be, GF(dst, s) + p * piece, host[s] + p * piece, piece * 4);
		be->copy_fence(be);
		be->scale(be, GF(dst, s), 2.0f, n);
		be->copy_wait(be);
		/* the host may reuse its buffer now; the second batch goes while
		 * the first is being worked on */
		for (size_t i = 0; i < n; i++)
			host[s][i] = (float)(i % 7) - 3.0f;
		be->to_device_async(be, GF(dst2, s), host[s], n * 4);
		be->copy_fence(be);
		be->add(be, GF(dst2, s), GF(dst, s), GF(sum, s), n);
		be->copy_wait(be);
		be->sync(be);
		be->to_host(be, back[s], GF(sum, s), n * 4);
		size_t bad = n;
		for (size_t i = 0; i < n && bad == n; i++)
			if (back[s][i] != 2.0f * (float)(i % 1000003) + (float)(i % 7) - 3.0f)
				bad = i;
		GCHECK(bad == n, "%s: data path round trip wrong at %zu: %g", be->name, bad,
		       bad < n ? back[s][bad] : 0.0);
		ok_all &= bad == n;
		be->host_free(be, host[s]);
		free(back[s]);
	}
	printf("%-4s %-60s exact\n", ok_all ? "ok" : "FAIL",
	       "data path: host_alloc, to_device_async, copy_fence, copy_wait");
	gh_cmp_exact("data path: both sides hold the same bytes", &sum, n * 4);
	gh_free(&dst);
	gh_free(&dst2);
	gh_free(&sum);
}
