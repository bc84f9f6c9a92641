/* loss_dump.c: one loss (loss.h) on a generated batch, for
 * tests/engine/losses.sh, which recomputes it in PyTorch (loss_ref.py).
 *
 *   loss_dump CFG CLASSES OUTDIR
 *
 * CFG: a model cfg whose [net] section sets the loss (loss=, its keys,
 * ignore=255); CLASSES: the net's classes (2 for the sigmoid forms). The
 * batch is N = 3 samples of HW = 45 pixels: logits (N, k, HW) normal with
 * sd 2, labels uniform over the classes but the last (absent from the
 * batch when CLASSES > 2, which smp's multiclass losses count as 0), a
 * fifth of them 255, and the third sample wholly ignored but for 2 pixels.
 * Writes to OUTDIR: logits.f32, labels.i32, grad.f32 (the whole batch's
 * gradient), split.f32 (the same gradient as two "ranks" get it: samples
 * {0} and {1, 2} with their parts added, cdp_loss_finish per rank with
 * gmul 1) and loss.txt: "k loss loss_of_the_split". Exit 0, or 1 with a
 * message.
 *
 * A regression loss (mse, l1, huber; CLASSES the outputs T) takes targets
 * (N, T, HW) normal with sd 1.5 instead of labels, a fifth of them NaN and
 * the third sample NaN but for 2 elements, written as targets.f32.
 */
#include <math.h>
#include "backend.h"
#include "cdp_rng.h"
#include "cfg/cfg.h"
#include "loss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3
#define HW 45

static int dump(const char *dir, const char *name, const void *p, size_t bytes)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")))
		return -1;
	ok = fwrite(p, 1, bytes, f) == bytes;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* The regression form: predictions x, whole-batch gradient gr, split sp
 * (N, k, HW). */
static int reg(const cdp_loss *l, cdp_rng *g, const float *x, float *gr, float *sp,
               const char *dir)
{
	const int k = l->k;
	const size_t ns = (size_t)k * HW;
	float *t = malloc((size_t)N * ns * sizeof *t);
	cdp_loss_result r, r0, r1;
	double p[2], p0[2], p1[2];
	char path[4096];
	FILE *f;
	int rc = 1;

	if (!t) {
		fprintf(stderr, "loss_dump: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < N * ns; i++) {
		t[i] = (float)(1.5 * cdp_rng_normal(g));
		if (cdp_rng_below(g, 5) == 0 || i >= 2 * ns + 2)
			t[i] = NAN;
	}
	cdp_loss_reg_compute(l, N, HW, x, t, gr, &r);
	cdp_loss_reg_parts(l, 1, HW, x, t, sp, p0);
	cdp_loss_reg_parts(l, 2, HW, x + ns, t + ns, sp + ns, p1);
	for (int i = 0; i < 2; i++)
		p[i] = p0[i] + p1[i];
	cdp_loss_reg_finish(l, 1, HW, p, 1.0, sp, &r0);
	cdp_loss_reg_finish(l, 2, HW, p, 1.0, sp + ns, &r1);
	snprintf(path, sizeof path, "%s/loss.txt", dir);
	if (dump(dir, "logits.f32", x, N * ns * 4) < 0 ||
	    dump(dir, "targets.f32", t, N * ns * 4) < 0 ||
	    dump(dir, "grad.f32", gr, N * ns * 4) < 0 ||
	    dump(dir, "split.f32", sp, N * ns * 4) < 0 || !(f = fopen(path, "w"))) {
		fprintf(stderr, "loss_dump: cannot write to '%s'\n", dir);
		goto out;
	}
	fprintf(f, "%d %d %d %.17g %.17g %.17g\n", N, k, HW, r.loss, r0.loss, r1.loss);
	rc = fclose(f) == 0 ? 0 : 1;
out:
	free(t);
	return rc;
}

int main(int argc, char **argv)
{
	cdp_backend *be = cdp_backend_cpu(1);
	cdp_cfg cfg;
	cdp_loss l;
	cdp_loss_result r, r0, r1;
	cdp_rng g;
	char *text = NULL, err[512], path[4096];
	float *x = NULL, *dx = NULL, *gr = NULL, *sp = NULL;
	int32_t *y = NULL;
	double *p = NULL, *p0 = NULL, *p1 = NULL;
	int classes, k, rc = 1, nabs;
	FILE *f;

	if (argc != 4 || !be) {
		fprintf(stderr, "usage: loss_dump CFG CLASSES OUTDIR\n");
		return 2;
	}
	classes = atoi(argv[2]);
	if (cdp_cfg_read(argv[1], &text, err, sizeof err) < 0 ||
	    cdp_cfg_parse(text, argv[1], NULL, 0, &cfg, err, sizeof err) < 0) {
		fprintf(stderr, "loss_dump: %s\n", err);
		free(text);
		be->destroy(be);
		return 1;
	}
	if (cdp_loss_init_cfg(&l, be, &cfg, &cfg.s[0], classes, err, sizeof err) < 0) {
		fprintf(stderr, "loss_dump: %s\n", err);
		goto out;
	}
	k = l.k;
	x = calloc((size_t)N * k * HW, sizeof *x);
	dx = calloc((size_t)N * k * HW, sizeof *dx);
	gr = calloc((size_t)N * k * HW, sizeof *gr);
	sp = calloc((size_t)N * k * HW, sizeof *sp);
	y = calloc((size_t)N * HW, sizeof *y);
	p = calloc((size_t)l.npart, sizeof *p);
	p0 = calloc((size_t)l.npart, sizeof *p0);
	p1 = calloc((size_t)l.npart, sizeof *p1);
	if (!x || !dx || !gr || !sp || !y || !p || !p0 || !p1) {
		fprintf(stderr, "loss_dump: out of memory\n");
		goto out;
	}
	cdp_rng_seed(&g, 11);
	for (int i = 0; i < N * k * HW; i++)
		x[i] = (float)(2 * cdp_rng_normal(&g));
	if (l.reg) {
		rc = reg(&l, &g, x, gr, sp, argv[3]);
		goto out;
	}
	nabs = classes > 2 ? classes - 1 : classes;
	for (int i = 0; i < N * HW; i++) {
		y[i] = (int32_t)cdp_rng_below(&g, (uint64_t)nabs);
		if (cdp_rng_below(&g, 5) == 0 || (i >= 2 * HW + 2))
			y[i] = 255;
	}
	/* the whole batch */
	cdp_loss_compute(&l, N, HW, x, y, gr, &r);
	/* two ranks: {0} and {1, 2}; the parts added, then each finishes */
	cdp_loss_parts(&l, 1, HW, x, y, sp, p0);
	cdp_loss_parts(&l, 2, HW, x + (size_t)k * HW, y + HW, sp + (size_t)k * HW, p1);
	for (int i = 0; i < l.npart; i++)
		p[i] = p0[i] + p1[i];
	cdp_loss_finish(&l, 1, HW, x, y, p, 1.0, sp, &r0);
	cdp_loss_finish(&l, 2, HW, x + (size_t)k * HW, y + HW, p, 1.0, sp + (size_t)k * HW, &r1);
	snprintf(path, sizeof path, "%s/loss.txt", argv[3]);
	if (dump(argv[3], "logits.f32", x, (size_t)N * k * HW * 4) < 0 ||
	    dump(argv[3], "labels.i32", y, (size_t)N * HW * 4) < 0 ||
	    dump(argv[3], "grad.f32", gr, (size_t)N * k * HW * 4) < 0 ||
	    dump(argv[3], "split.f32", sp, (size_t)N * k * HW * 4) < 0 || !(f = fopen(path, "w"))) {
		fprintf(stderr, "loss_dump: cannot write to '%s'\n", argv[3]);
		goto out;
	}
	fprintf(f, "%d %d %d %.17g %.17g %.17g\n", N, k, HW, r.loss, r0.loss, r1.loss);
	rc = fclose(f) == 0 ? 0 : 1;
out:
	cdp_loss_free(&l);
	cdp_cfg_free(&cfg);
	free(text);
	free(x);
	free(dx);
	free(gr);
	free(sp);
	free(y);
	free(p);
	free(p0);
	free(p1);
	be->destroy(be);
	return rc;
}
