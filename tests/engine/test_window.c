/* test_window.c: the CPU backend's sliding-window ops (cpu/cpu_window.c:
 * win_gather, win_blend) against the host loops cdp-predict ran before
 * they existed, copied here as the reference, BITWISE: cdp-predict's
 * output on the CPU must stay byte for byte what it was. Shapes: windows
 * inside the strip, before its first column, past its last, wider than it
 * (reflected more than once), a one-column strip; one class (sigmoid), a
 * few and more than cpu_window.c keeps on its stack (softmax); logits up
 * to +-40 (saturated exponentials); sums that already hold values; 1 and
 * 3 threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "cdp_rng.h"
#include "tap.h"

static cdp_rng rng;

static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)cdp_rng_double(&rng); }

static float *rnd(size_t n, float lo, float hi)
{
	float *p = malloc((n ? n : 1) * sizeof *p);
	for (size_t i = 0; i < n; i++)
		p[i] = rndf(lo, hi);
	return p;
}

/* ---- the reference: tools/predict/predict.c before win_gather/win_blend
 * (its reflect() is backend.h's cdp_reflect now, checked first) ---- */

/* numpy: np.pad(np.arange(n), 3, "reflect") for n = 4, 2 and 1; far
 * outside 4096: np.pad(np.arange(4096), 13000, "reflect") */
static void check_reflect(void)
{
	static const int n4[] = { 3, 2, 1, 0, 1, 2, 3, 2, 1, 0 }, n2[] = { 1, 0, 1, 0, 1, 0, 1, 0 };

	for (int i = 0; i < 10; i++)
		CHECK(cdp_reflect(i - 3, 4) == n4[i], "reflect(%d, 4) = %d want %d", i - 3,
		      cdp_reflect(i - 3, 4), n4[i]);
	for (int i = 0; i < 8; i++)
		CHECK(cdp_reflect(i - 3, 2) == n2[i], "reflect(%d, 2) = %d want %d", i - 3,
		      cdp_reflect(i - 3, 2), n2[i]);
	CHECK(cdp_reflect(-5, 1) == 0 && cdp_reflect(7, 1) == 0, "reflect into one index");
	CHECK(cdp_reflect(-4099, 4096) == 4091 && cdp_reflect(3 * 4096, 4096) == 4092,
	      "reflect far away: %d %d", cdp_reflect(-4099, 4096), cdp_reflect(3 * 4096, 4096));
}


static void ref_gather(int C, int n, int W, int S, const float *img, const int32_t *srow, int nb,
                       const int32_t *x0, float *xin)
{
	int *scol = malloc(S * sizeof *scol);
	for (int b = 0; b < nb; b++) {
		for (int x = 0; x < S; x++)
			scol[x] = cdp_reflect((long)x0[b] + x, W);
		for (int c = 0; c < C; c++)
			for (int r = 0; r < S; r++) {
				const float *src = img + ((size_t)c * n + srow[r]) * W;
				float *d = xin + (((size_t)b * C + c) * S + r) * S;
				for (int x = 0; x < S; x++)
					d[x] = src[scol[x]];
			}
	}
	free(scol);
}

static void ref_probabilities(int K, int S, float *y)
{
	size_t hw = (size_t)S * S;

	if (K == 1) {
		for (size_t i = 0; i < hw; i++)
			y[i] = 1.0f / (1.0f + expf(-y[i]));
		return;
	}
	for (size_t i = 0; i < hw; i++) {
		float mx = y[i], s = 0;
		for (int k = 1; k < K; k++)
			mx = fmaxf(mx, y[k * hw + i]);
		for (int k = 0; k < K; k++)
			s += (y[k * hw + i] = expf(y[k * hw + i] - mx));
		for (int k = 0; k < K; k++)
			y[k * hw + i] /= s;
	}
}

/* yout (nb, K, S, S) is turned into probabilities in place, as before */
static void ref_blend(int K, int S, int W, int nb, float *yout, const int32_t *x0,
                      const float *w1, float *sum)
{
	size_t hw = (size_t)S * S;

	for (int b = 0; b < nb; b++) {
		float *pr = yout + (size_t)b * K * hw;
		ref_probabilities(K, S, pr);
		for (int k = 0; k < K; k++)
			for (int r = 0; r < S; r++) {
				float *d = sum + ((size_t)k * S + r) * W;
				const float *s = pr + (size_t)k * hw + (size_t)r * S;
				for (int x = 0; x < S; x++) {
					long xx = (long)x0[b] + x;
					if (xx >= 0 && xx < W)
						d[xx] += w1[r] * w1[x] * s[x];
				}
			}
	}
}

/* ---- the checks ---- */

static int same_bits(const float *a, const float *b, size_t n, size_t *at)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
			*at = i;
			return 0;
		}
	return 1;
}

/* nb windows of size S over a strip of W columns and R rows; origins on
 * cdp-predict's grid (stride T from -m) or, with grid 0, anywhere in
 * [-2S, W + S] and in any order */
static void one_case(cdp_backend *be, int C, int K, int R, int W, int S, int nb, int grid)
{
	size_t hw = (size_t)S * S, nx = (size_t)nb * C * hw, ny = (size_t)nb * K * hw;
	size_t ns = (size_t)K * S * W;
	int32_t *srow = malloc(S * sizeof *srow), *x0 = malloc(nb * sizeof *x0);
	float *img = rnd((size_t)C * R * W, -3, 3), *w1 = rnd(S, 0, 1);
	float *xa = malloc(nx * sizeof *xa), *xb = malloc(nx * sizeof *xb);
	float *logits = rnd(ny, -40, 40), *yref = malloc(ny * sizeof *yref);
	float *sa = rnd(ns, 0, 2), *sb = malloc(ns * sizeof *sb);
	int T = S - S / 4, m = S / 8;
	size_t at = 0;

	for (int r = 0; r < S; r++)
		srow[r] = (int32_t)cdp_rng_below(&rng, (uint64_t)R);
	for (int b = 0; b < nb; b++)
		x0[b] = grid ? -m + b * T : (int32_t)cdp_rng_below(&rng, (uint64_t)(W + 3 * S + 1)) - 2 * S;
	memcpy(sb, sa, ns * sizeof *sa);
	memcpy(yref, logits, ny * sizeof *yref);
	memset(xa, 0xff, nx * sizeof *xa);
	be->win_gather(be, C, R, W, S, img, srow, nb, x0, xa);
	ref_gather(C, R, W, S, img, srow, nb, x0, xb);
	CHECK(same_bits(xa, xb, nx, &at), "win_gather C %d R %d W %d S %d nb %d grid %d, %d threads: "
	      "[%zu] %.9g want %.9g", C, R, W, S, nb, grid, be->threads, at, xa[at], xb[at]);
	be->win_blend(be, K, S, W, nb, logits, x0, w1, sa);
	ref_blend(K, S, W, nb, yref, x0, w1, sb);
	CHECK(same_bits(sa, sb, ns, &at), "win_blend K %d W %d S %d nb %d grid %d, %d threads: "
	      "[%zu] %.9g want %.9g", K, W, S, nb, grid, be->threads, at, sa[at], sb[at]);
	/* the logits are the net's output: left as they were */
	memcpy(yref, logits, ny * sizeof *yref);
	be->win_blend(be, K, S, W, nb, logits, x0, w1, sa);
	CHECK(memcmp(yref, logits, ny * sizeof *yref) == 0, "win_blend changed its logits");
	free(srow); free(x0); free(img); free(w1); free(xa); free(xb);
	free(logits); free(yref); free(sa); free(sb);
}

int main(void)
{
	static const struct { int C, K, R, W, S, nb; } shapes[] = {
		{ 3, 1, 16, 64, 16, 5 },     /* sigmoid, windows inside and at both edges */
		{ 2, 3, 9, 40, 12, 4 },      /* softmax */
		{ 1, 2, 5, 7, 16, 2 },       /* windows wider than the strip */
		{ 4, 1, 3, 1, 5, 3 },        /* one column */
		{ 2, 40, 8, 30, 8, 5 },      /* more classes than cpu_window.c's stack */
		{ 3, 5, 32, 100, 32, 3 },
	};

	cdp_rng_seed(&rng, 20261129);
	check_reflect();
	for (int threads = 1; threads <= 3; threads += 2) {
		cdp_backend *be = cdp_backend_cpu(threads);
		if (!be) {
			fprintf(stderr, "test_window: cannot create the CPU backend\n");
			return 99;
		}
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
			for (int grid = 1; grid >= 0; grid--)
				one_case(be, shapes[i].C, shapes[i].K, shapes[i].R, shapes[i].W, shapes[i].S,
				         shapes[i].nb, grid);
		for (int rep = 0; rep < 8; rep++)
			one_case(be, 1 + (int)cdp_rng_below(&rng, 4), 1 + (int)cdp_rng_below(&rng, 6),
			         1 + (int)cdp_rng_below(&rng, 20), 1 + (int)cdp_rng_below(&rng, 90),
			         1 + (int)cdp_rng_below(&rng, 24), 1 + (int)cdp_rng_below(&rng, 6), rep & 1);
		be->destroy(be);
	}
	return tap_done();
}
