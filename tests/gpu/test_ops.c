/* test_ops.c: every op of the backend table on the CUDA backend against the
 * CPU backend, forward and backward, on the same random inputs and random
 * as well as hand-picked shapes (gpu_harness.h says how the two are run and
 * compared; test_ops.h lists the parts). This file: main, GEMM and the
 * vector ops, convolution in fp32, tf32, bf16 and fp16.
 *
 * usage: test_ops [--count-devices]
 * --count-devices prints cdp_cuda_device_count() and exits 0 (for the
 * shell tests, which must skip without a GPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_ops.h"

double tol_for(int prec)
{
	switch (prec) {
	case CDP_PREC_BF16: return 8.0 / 256;     /* u = 2^-8 */
	case CDP_PREC_FP16:
	case CDP_PREC_TF32: return 8.0 / 2048;    /* u = 2^-11 */
	}
	return GH_TOL;
}

/* fp32 is compared with the floor of gpu_harness.h, the others relative
 * to the largest value (test_ops.h) */
static double cmp_prec(const char *what, const gh_buf *b, size_t n, int prec)
{
	return gh_cmp_floor(what, b, n, tol_for(prec), prec == CDP_PREC_FP32 ? GH_FLOOR : 1.0);
}

/* The same for results that each sum k terms: fp32's tolerance grows with
 * k (gh_sum_tol); the reduced precisions' is stated for any k. */
static double cmp_sum(const char *what, const gh_buf *b, size_t n, int prec, size_t k)
{
	double t = prec == CDP_PREC_FP32 ? gh_sum_tol(k) : tol_for(prec);
	return gh_cmp_floor(what, b, n, t, prec == CDP_PREC_FP32 ? GH_FLOOR : 1.0);
}

/* ---- GEMM: row-major C = alpha op(A) op(B) + beta C with padded leading
 * dimensions; C's padding columns must stay as they were ---- */

static void gemm_case(int m, int n, int k, int ta, int tb, float alpha, float beta, int pad,
                      int prec)
{
	int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	gh_buf a = gh_rand(na, -1, 1), b = gh_rand(nb, -1, 1), c = gh_rand(nc, -1, 1);
	char what[128];

	GH_BOTH(s, be)
		be->gemm(be, ta, tb, m, n, k, alpha, GF(a, s), lda, GF(b, s), ldb, beta, GF(c, s), ldc);
	snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d a%g b%g ld+%d %s", m, n, k, ta, tb, alpha,
	         beta, pad, gh_prec_name(prec));
	cmp_prec(what, &c, nc, prec);
	gh_free(&a);
	gh_free(&b);
	gh_free(&c);
}

void test_blas(void)
{
	static const int shapes[][3] = {
		{ 7, 5, 9 }, { 1, 1, 1 }, { 1, 37, 300 }, { 67, 45, 400 }, { 33, 130, 300 },
		{ 128, 64, 576 },
	};
	static const float ab[][2] = { { 1, 0 }, { 1, 1 }, { 0.5f, 2 } };
	static const int precs[] = { CDP_PREC_TF32, CDP_PREC_BF16, CDP_PREC_FP16 };

	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] + 3; si++) {
		int m, n, k;
		if (si < sizeof shapes / sizeof shapes[0]) {
			m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
		} else {
			m = gh_int(1, 90), n = gh_int(1, 90), k = gh_int(1, 700);
		}
		for (int t = 0; t < 4; t++)
			for (int v = 0; v < 3; v++)
				gemm_case(m, n, k, t >> 1, t & 1, ab[v][0], ab[v][1], (int)(si % 3), CDP_PREC_FP32);
	}
	for (size_t p = 0; p < 3; p++) {
		if (gh_precision(precs[p], "gemm") != 0)
			continue;
		for (int t = 0; t < 4; t++) {
			gemm_case(67, 45, 400, t >> 1, t & 1, 1, 0, 1, precs[p]);
			gemm_case(128, 64, 576, t >> 1, t & 1, 0.5f, 1, 0, precs[p]);
		}
		gh_precision(CDP_PREC_FP32, "fp32");
	}

	/* the vector ops; 200003 spans many blocks and is no multiple of any */
	static const size_t sizes[] = { 1, 1000, 200003 };
	for (size_t i = 0; i < 3; i++) {
		size_t n = sizes[i];
		gh_buf x = gh_rand(n, -2, 2), y = gh_rand(n, -2, 2), z = gh_alloc(n * sizeof(float));
		double ss[2];
		char what[96];
		GH_BOTH(s, be) {
			be->axpy(be, 0.25f, GF(x, s), GF(y, s), n);
			be->scale(be, GF(y, s), -3.0f, n);
			be->add(be, GF(x, s), GF(y, s), GF(z, s), n);
			ss[s] = be->sumsq(be, GF(x, s), n);
		}
		snprintf(what, sizeof what, "axpy + scale n=%zu", n);
		gh_cmp(what, &y, n, GH_TOL);
		snprintf(what, sizeof what, "add n=%zu", n);
		gh_cmp(what, &z, n, GH_TOL);
		snprintf(what, sizeof what, "sumsq n=%zu", n);
		gh_cmp_scalar(what, ss[GH_DEV], ss[GH_REF], 1e-9, 1e-30);
		GH_BOTH(s, be)
			be->fill(be, GF(y, s), 1.5f, n);
		snprintf(what, sizeof what, "fill n=%zu", n);
		gh_cmp_exact(what, &y, n * sizeof(float));
		/* the bf16 stash (net_plan.c): the same bits on both, and back */
		{
			gh_buf h = gh_alloc(n * sizeof(uint16_t));
			GH_BOTH(s, be) {
				be->to_bf16(be, GF(x, s), (uint16_t *)h.p[s], n);
				be->from_bf16(be, (const uint16_t *)h.p[s], GF(z, s), n);
			}
			snprintf(what, sizeof what, "to_bf16 n=%zu", n);
			gh_cmp_exact(what, &h, n * sizeof(uint16_t));
			snprintf(what, sizeof what, "from_bf16 n=%zu", n);
			gh_cmp_exact(what, &z, n * sizeof(float));
			gh_free(&h);
		}
		gh_free(&x);
		gh_free(&y);
		gh_free(&z);
	}
}

/* ---- convolution ---- */

typedef struct conv_case { int n, c, h, w, f, k, s, p, d; } conv_case;

static void conv_run(const conv_case *cc, int prec)
{
	cdp_conv_desc d = { .n = cc->n, .c = cc->c, .h = cc->h, .w = cc->w, .f = cc->f, .kh = cc->k,
	                    .kw = cc->k, .stride = cc->s, .pad = cc->p, .dil = cc->d };
	char tag[96], what[160];
	void *ws[2];

	if (cdp_conv_desc_init(&d) < 0) {
		GCHECK(0, "conv case %dx%dx%dx%d: empty output", cc->n, cc->c, cc->h, cc->w);
		return;
	}
	snprintf(tag, sizeof tag, "%dx%dx%dx%d f%d k%d s%d p%d d%d %s", d.n, d.c, d.h, d.w, d.f, d.kh,
	         d.stride, d.pad, d.dil, gh_prec_name(prec));
	size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.f * d.oh * d.ow;
	size_t nw = (size_t)d.f * d.c * d.kh * d.kw;
	size_t ksum = (size_t)d.n * d.oh * d.ow; /* terms in each filter-gradient sum */
	gh_buf x = gh_rand(nx, -1, 1), w = gh_rand(nw, -1, 1), b = gh_rand((size_t)d.f, -1, 1);
	gh_buf dy = gh_rand(ny, -1, 1), y = gh_rand(ny, -1, 1), dx = gh_rand(nx, -1, 1);
	gh_buf dw = gh_rand(nw, -1, 1), db = gh_rand((size_t)d.f, -1, 1), dw2 = gh_rand(nw, -1, 1);
	gh_buf g = gh_rand((size_t)d.f, 0.5, 1.5), bb = gh_rand((size_t)d.f, -1, 1);
	gh_buf bm = gh_rand((size_t)d.f, -0.2, 0.2), bv = gh_rand((size_t)d.f, 0.5, 1.5);

	int ws_ok = 1;
	GH_BOTH(s, be) {
		size_t bytes = be->conv_workspace(be, &d);
		ws[s] = bytes ? be->alloc(be, bytes) : NULL;
		GCHECK(!bytes || ws[s], "%s: cannot allocate a %zu-byte workspace", be->name, bytes);
		ws_ok &= !bytes || ws[s];
	}
	if (!ws_ok)
		goto out;
	GH_BOTH(s, be)
		be->conv_fwd(be, &d, GF(x, s), GF(w, s), GF(b, s), GF(y, s), ws[s]);
	snprintf(what, sizeof what, "conv fwd %s", tag);
	cmp_prec(what, &y, ny, prec);
	GH_BOTH(s, be)
		be->conv_fwd(be, &d, GF(x, s), GF(w, s), NULL, GF(y, s), ws[s]);
	snprintf(what, sizeof what, "conv fwd no bias %s", tag);
	cmp_prec(what, &y, ny, prec);
	/* with the eval-mode batchnorm and relu after it (cdp-predict's) */
	GH_BOTH(s, be) {
		cdp_bn_infer bn = { GF(g, s), GF(bb, s), GF(bm, s), GF(bv, s), 1e-5f, 0.1f,
		                    CDP_ACT_RELU };
		be->conv_fwd_bn(be, &d, GF(x, s), GF(w, s), GF(b, s), &bn, GF(y, s), ws[s]);
	}
	snprintf(what, sizeof what, "conv fwd_bn relu %s", tag);
	cmp_prec(what, &y, ny, prec);
	GH_BOTH(s, be)
		be->conv_bwd_data(be, &d, GF(dy, s), GF(w, s), GF(dx, s), 0.0f, ws[s]);
	snprintf(what, sizeof what, "conv bwd_data beta 0 %s", tag);
	cmp_prec(what, &dx, nx, prec);
	GH_BOTH(s, be)
		be->conv_bwd_data(be, &d, GF(dy, s), GF(w, s), GF(dx, s), 1.0f, ws[s]);
	snprintf(what, sizeof what, "conv bwd_data beta 1 %s", tag);
	cmp_prec(what, &dx, nx, prec);
	GH_BOTH(s, be)
		be->conv_bwd_filter(be, &d, GF(x, s), GF(dy, s), GF(dw, s), GF(db, s), ws[s]);
	snprintf(what, sizeof what, "conv bwd_filter dw += %s", tag);
	cmp_sum(what, &dw, nw, prec, ksum);
	snprintf(what, sizeof what, "conv bwd_filter dbias += %s", tag);
	cmp_prec(what, &db, (size_t)d.f, prec);
	GH_BOTH(s, be)
		be->conv_bwd_filter(be, &d, GF(x, s), GF(dy, s), GF(dw2, s), NULL, ws[s]);
	snprintf(what, sizeof what, "conv bwd_filter without dbias %s", tag);
	cmp_sum(what, &dw2, nw, prec, ksum);
out:
	GH_BOTH(s, be)
		if (ws[s])
			be->free(be, ws[s]);
	gh_free(&x); gh_free(&w); gh_free(&b); gh_free(&dy); gh_free(&y);
	gh_free(&dx); gh_free(&dw); gh_free(&db); gh_free(&dw2);
	gh_free(&g); gh_free(&bb); gh_free(&bm); gh_free(&bv);
}

void test_conv(void)
{
	static const conv_case cases[] = {
		{ 2, 3, 7, 9, 4, 3, 1, 1, 1 },      /* odd sizes */
		{ 3, 5, 11, 10, 6, 3, 2, 1, 1 },    /* stride 2 */
		{ 2, 4, 9, 9, 3, 3, 1, 2, 2 },      /* dilation 2 */
		{ 2, 4, 9, 9, 3, 3, 2, 2, 2 },      /* dilation and stride */
		{ 2, 6, 5, 7, 8, 1, 1, 0, 1 },      /* 1x1 */
		{ 2, 6, 5, 7, 8, 1, 2, 0, 1 },      /* 1x1 stride 2 */
		{ 2, 3, 8, 8, 2, 4, 2, 1, 1 },      /* even kernel */
		{ 2, 3, 6, 6, 4, 2, 2, 0, 1 },      /* 2x2 stride 2 (the deconv's) */
		{ 2, 16, 34, 40, 24, 2, 2, 0, 1 },  /* the same over 2 blocks of cdk_deconv2 */
		{ 1, 1, 3, 3, 2, 5, 1, 2, 1 },      /* kernel larger than the image */
		{ 1, 2, 20, 22, 3, 3, 1, 3, 1 },    /* pad > dil*(K-1) */
		{ 64, 16, 8, 8, 32, 3, 1, 1, 1 },   /* classifier-like */
		{ 4, 32, 32, 32, 32, 3, 1, 1, 1 },  /* U-Net-like, tensor-core friendly */
		{ 1, 32, 100, 150, 40, 3, 1, 1, 1 },/* wide plane */
		{ 2, 2, 41, 35, 5, 3, 2, 0, 2 },
	};
	static const size_t lowp[] = { 0, 4, 7, 10, 11 };
	static const int precs[] = { CDP_PREC_TF32, CDP_PREC_BF16, CDP_PREC_FP16 };

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		conv_run(&cases[i], CDP_PREC_FP32);
	for (int i = 0; i < 6; i++) {
		conv_case cc;
		do {
			cc.n = gh_int(1, 4), cc.c = gh_int(1, 9), cc.h = gh_int(1, 24), cc.w = gh_int(1, 24);
			cc.f = gh_int(1, 9), cc.k = gh_int(1, 5), cc.s = gh_int(1, 3), cc.d = gh_int(1, 2);
			cc.p = gh_int(0, cc.k - 1);
		} while ((cc.h + 2 * cc.p - cc.d * (cc.k - 1)) < 1 || (cc.w + 2 * cc.p - cc.d * (cc.k - 1)) < 1);
		conv_run(&cc, CDP_PREC_FP32);
	}
	for (size_t p = 0; p < 3; p++) {
		if (gh_precision(precs[p], "conv") != 0)
			continue;
		for (size_t i = 0; i < sizeof lowp / sizeof lowp[0]; i++)
			conv_run(&cases[lowp[i]], precs[p]);
		gh_precision(CDP_PREC_FP32, "fp32");
	}
}

int main(int argc, char **argv)
{
	int rc;

	if (argc == 2 && !strcmp(argv[1], "--count-devices")) {
		int n = cdp_cuda_device_count();
		printf("%d\n", n);
		if (n == 0)
			fprintf(stderr, "no CUDA device: %s\n", gh_no_device_why());
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: test_ops [--count-devices]\n");
		return 2;
	}
	if ((rc = gh_open("test_ops", 2)) != 0)
		return rc;
	test_blas();
	test_conv();
	test_bn();
	test_act();
	test_pool();
	test_upsample();
	test_chan();
	test_dropout();
	test_gap_bias_add();
	test_losses();
	test_metrics();
	test_optim();
	test_prep();
	test_win_gather();
	test_win_blend();
	test_datapath();
	test_edges();
	return gh_close();
}
