/* test_bf16_grads.c: the bf16 gradients between convolutions and
 * batchnorms (net_plan.c's "bf16 gradients"; backend.h: conv_takes_dyh,
 * conv_writes_dxh, bn_takes_gh), with each bf16 set of kernels the CPU
 * runs ("emulated" everywhere, "avx512bf16", "avx512bf16-fma", "amx"
 * where it has them):
 *  - a convolution's data and filter gradients (bias too) of a bf16 dy
 *    (d->dyh) give the bits of the same ops on its values widened, where
 *    conv_takes_dyh says the backend reads it so; and the data gradient
 *    written as bf16 (d->dxh) is the float one rounded by to_bf16, bit
 *    for bit, where conv_writes_dxh says so; the layers that take them:
 *    Winograd's (32 channels and more), the grid filter gradient's (32
 *    wide: avx512bf16, and amx from 8 channels: not the first layer's 3
 *    bands there), not a 1x1, not a stride 2;
 *  - batchnorm's backward of a bf16 dy (CDP_H_DY) gives the bits of dy
 *    widened, and its dx as bf16 (CDP_H_DX) is the float dx rounded, with
 *    and without a bf16 x, every activation, planes that are not whole
 *    chunks, and with a fused max pool (its gradient as bf16, dx as bf16):
 *    the generic passes and the AVX-512 ones alike;
 *  - a net: in bf16 the gradients between a classifier's convolutions
 *    and batchnorms are bf16 where both sides take them (cdp_layer_grad_h,
 *    layer by layer for each set), the parameter gradients stay within
 *    0.005 of those with float gradients (CDP_BF16_GRADS=0; max |a - b| /
 *    max |b|; 0.0005 with avx512bf16, 0.0003 with avx512bf16-fma
 *    measured) and differ from them (a batchnorm reads a rounded
 *    gradient); and a second backward gives the same bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "cpu/cpu.h"
#include "layers.h"
#include "loss.h"
#include "net.h"
#include "tap.h"
#include "bf16_sets.h"

static cdp_rng rng;
static cdp_backend *be;
static const char *set = "";

static float *rnd(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof *p);

	for (size_t i = 0; i < n; i++)
		p[i] = (float)(cdp_rng_double(&rng) * 2.0 - 1.0);
	return p;
}

/* x's bf16 bits, and their values widened into xr */
static uint16_t *bits(const float *x, float *xr, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof *h);

	cpu_to_bf16(be, x, h, n);
	cpu_from_bf16(be, h, xr, n);
	return h;
}

/* bit i of a case's masks: bf16_sets[i] */
enum { EMU = 1, DP = 2, FMA = 4, AMX = 8 };
static int set_bit;

typedef struct gcase {
	int n, c, h, w, f, k, stride, bias;
	int dyh;        /* the sets whose conv_takes_dyh is 1 */
	int dxh;        /* and conv_writes_dxh: Winograd's data gradient */
} gcase;

/* The emulated set has neither Winograd nor the grid nor the paired
 * slice (cpu_wino_takes), amx not Winograd; avx512bf16's Winograd filter
 * gradient from 64 x 64 channels, the grid's at 32 wide (amx's from 8
 * channels, kcol's below); the data gradient as bf16 from Winograd (32 channels and
 * more each way) or the paired slice (more than 8 filters: avx512bf16,
 * and amx at widths of 16s) */
static const gcase cases[] = {
	{ 2, 32, 32, 32, 32, 3, 1, 0, DP | FMA | AMX, DP | FMA | AMX },  /* Winograd, grid */
	{ 2, 64, 16, 16, 64, 3, 1, 1, DP | FMA, DP | FMA | AMX },        /* Winograd, a bias */
	{ 3, 8, 32, 40, 16, 3, 1, 0, DP | AMX, DP },                     /* grid; pairs */
	{ 2, 3, 32, 32, 16, 3, 1, 0, DP, DP | AMX },                     /* 3 bands: grid; kcol */
	{ 2, 32, 16, 16, 32, 1, 1, 0, 0, 0 },                            /* 1x1 */
	{ 2, 32, 32, 32, 32, 3, 2, 0, 0, 0 },                            /* stride 2 */
};

static int taken_dyh, taken_dxh;

static void conv_case(const gcase *g, int ci)
{
	cdp_conv_desc d = { .n = g->n, .c = g->c, .h = g->h, .w = g->w, .f = g->f, .kh = g->k,
	                    .kw = g->k, .stride = g->stride, .pad = g->k / 2, .dil = 1 };
	size_t nx, ny, nw, ws_bytes;
	float *x, *w, *dy, *dyr, *dxa, *dxb, *dwa, *dwb, dba[64] = { 0 }, dbb[64] = { 0 };
	uint16_t *dyh, *dxh, *dxr;
	void *ws;
	int want_dyh = !!(g->dyh & set_bit), want_dxh = !!(g->dxh & set_bit);

	cdp_conv_desc_init(&d);
	nx = (size_t)d.n * d.c * d.h * d.w;
	ny = (size_t)d.n * d.f * d.oh * d.ow;
	nw = (size_t)d.f * d.c * d.kh * d.kw;
	ws_bytes = cpu_conv_workspace(be, &d);
	ws = malloc(ws_bytes ? ws_bytes : 1);
	x = rnd(nx);
	w = rnd(nw);
	dy = rnd(ny);
	dyr = malloc(ny * sizeof *dyr);
	dyh = bits(dy, dyr, ny);
	CHECK(cpu_conv_takes_dyh(be, &d) == want_dyh, "[%s] case %d: conv_takes_dyh %d, expected %d",
	      set, ci, cpu_conv_takes_dyh(be, &d), want_dyh);
	CHECK(cpu_conv_writes_dxh(be, &d) == want_dxh,
	      "[%s] case %d: conv_writes_dxh %d, expected %d", set, ci, cpu_conv_writes_dxh(be, &d),
	      want_dxh);
	dxa = malloc(nx * sizeof *dxa);
	dxb = malloc(nx * sizeof *dxb);
	dwa = calloc(nw, sizeof *dwa);
	dwb = calloc(nw, sizeof *dwb);
	dxh = malloc(nx * sizeof *dxh);
	dxr = malloc(nx * sizeof *dxr);
	if (cpu_conv_takes_dyh(be, &d)) {
		cdp_conv_desc dh = d;
		dh.dyh = 1;
		cpu_conv_bwd_data(be, &d, dyr, w, dxa, 0.0f, ws);
		cpu_conv_bwd_data(be, &dh, dyh, w, dxb, 0.0f, ws);
		CHECK(memcmp(dxa, dxb, nx * sizeof *dxa) == 0,
		      "[%s] case %d: the data gradient of the bf16 dy differs from the widened one's",
		      set, ci);
		/* beta 1: the same sums added */
		cpu_conv_bwd_data(be, &d, dyr, w, dxa, 1.0f, ws);
		cpu_conv_bwd_data(be, &dh, dyh, w, dxb, 1.0f, ws);
		CHECK(memcmp(dxa, dxb, nx * sizeof *dxa) == 0,
		      "[%s] case %d: beta 1 of the bf16 dy differs", set, ci);
		cpu_conv_bwd_filter(be, &d, x, dyr, dwa, g->bias ? dba : NULL, ws);
		cpu_conv_bwd_filter(be, &dh, x, dyh, dwb, g->bias ? dbb : NULL, ws);
		CHECK(memcmp(dwa, dwb, nw * sizeof *dwa) == 0 && memcmp(dba, dbb, sizeof dba) == 0,
		      "[%s] case %d: the filter (bias) gradient of the bf16 dy differs", set, ci);
		taken_dyh++;
	}
	if (cpu_conv_writes_dxh(be, &d)) {
		cdp_conv_desc dh = d;
		dh.dxh = 1;
		cpu_conv_bwd_data(be, &d, dyr, w, dxa, 0.0f, ws);
		cpu_to_bf16(be, dxa, dxr, nx);
		memset(dxh, 0xff, nx * sizeof *dxh);
		cpu_conv_bwd_data(be, &dh, dyr, w, dxh, 0.0f, ws);
		CHECK(memcmp(dxh, dxr, nx * sizeof *dxh) == 0,
		      "[%s] case %d: the data gradient as bf16 is not the float one rounded", set, ci);
		dh.dyh = cpu_conv_takes_dyh(be, &d);
		cpu_conv_bwd_data(be, &dh, dh.dyh ? (const void *)dyh : dyr, w, dxh, 0.0f, ws);
		CHECK(memcmp(dxh, dxr, nx * sizeof *dxh) == 0,
		      "[%s] case %d: bf16 in and out differs", set, ci);
		taken_dxh++;
	}
	free(x); free(w); free(dy); free(dyr); free(dyh); free(dxa); free(dxb); free(dwa);
	free(dwb); free(dxh); free(dxr); free(ws);
}

/* batchnorm's backward with the gradients in bf16: dy's against its
 * values widened, dx's against the float dx rounded; n samples of c
 * planes of hw */
static void bn_one(int act, int xh, int n, int c, int hw)
{
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *dy = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c);
	float *sm = rnd((size_t)c), *si = rnd((size_t)c), *xr = malloc(nx * sizeof *xr);
	float *dyr = malloc(nx * sizeof *dyr), *dxa = malloc(nx * sizeof *dxa);
	float *dxb = malloc(nx * sizeof *dxb), dg[3][8] = { { 0 } }, db[3][8] = { { 0 } };
	uint16_t *xb = bits(x, xr, nx), *dyh = bits(dy, dyr, nx);
	uint16_t *dxh = malloc(nx * sizeof *dxh), *dxr = malloc(nx * sizeof *dxr);
	const void *xin = xh ? (const void *)xb : xr;
	int hx = xh ? CDP_H_X : 0;

	for (int i = 0; i < c; i++)
		si[i] = 1.0f + fabsf(si[i]);
	cpu_bn_bwd(be, n, c, hw, xin, hx, NULL, dyr, g, bt, sm, si, 1e-5f, act, 0.1f, dxa, 0.0f,
	           dg[0], db[0]);
	cpu_bn_bwd(be, n, c, hw, xin, hx | CDP_H_DY, NULL, dyh, g, bt, sm, si, 1e-5f, act, 0.1f,
	           dxb, 0.0f, dg[1], db[1]);
	CHECK(memcmp(dxa, dxb, nx * sizeof *dxa) == 0 && memcmp(dg[0], dg[1], sizeof dg[0]) == 0 &&
	      memcmp(db[0], db[1], sizeof db[0]) == 0,
	      "[%s] bn_bwd (act %d, xh %d, hw %d) of the bf16 dy differs from the widened one's",
	      cpu_kgemm_isa(), act, xh, hw);
	cpu_to_bf16(be, dxa, dxr, nx);
	cpu_bn_bwd(be, n, c, hw, xin, hx | CDP_H_DY | CDP_H_DX, NULL, dyh, g, bt, sm, si, 1e-5f,
	           act, 0.1f, dxh, 0.0f, dg[2], db[2]);
	CHECK(memcmp(dxh, dxr, nx * sizeof *dxh) == 0 && memcmp(dg[0], dg[2], sizeof dg[0]) == 0,
	      "[%s] bn_bwd (act %d, xh %d, hw %d): dx as bf16 is not the float dx rounded",
	      cpu_kgemm_isa(), act, xh, hw);
	free(x); free(dy); free(g); free(bt); free(sm); free(si); free(xr); free(dyr); free(dxa);
	free(dxb); free(xb); free(dyh); free(dxh); free(dxr);
}

/* the fused pool's backward (bn_bwd_pool): its gradient p->dy as bf16
 * against its values widened, and dx as bf16 */
static void bn_pool_one(int act)
{
	int n = 2, c = 3, h = 8, w = 32, hw = h * w;
	size_t nx = (size_t)n * c * hw, np = nx / 4;
	float *x = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c);
	float *py = malloc(np * sizeof *py), *pdy = rnd(np), *pdyr = malloc(np * sizeof *pdyr);
	float *dxa = malloc(nx * sizeof *dxa), *dxb = malloc(nx * sizeof *dxb);
	float dg[3][3] = { { 0 } }, db[3][3] = { { 0 } };
	float rm[3] = { 0 }, rv[3] = { 1, 1, 1 }, mean[3], inv[3];
	int32_t *idx = malloc(np * sizeof *idx);
	uint16_t *dxh = malloc(nx * sizeof *dxh), *dxr = malloc(nx * sizeof *dxr);
	uint16_t *pdyh = bits(pdy, pdyr, np);
	cdp_bn_pool p = { { n, c, h, w, 2, 2, 0, h / 2, w / 2 }, py, idx, pdyr };

	if (!cpu_bn_pool_takes(be, &p.d))
		goto out;
	cpu_bn_fwd_train_pool(be, n, c, hw, x, NULL, g, bt, rm, rv, 0.1f, 1e-5f, mean, inv, act,
	                      0.1f, &p);
	cpu_bn_bwd_pool(be, n, c, hw, x, 0, g, bt, mean, inv, 1e-5f, act, 0.1f, dxa, 0.0f, dg[0],
	                db[0], &p);
	p.dy = pdyh;
	cpu_bn_bwd_pool(be, n, c, hw, x, CDP_H_DY, g, bt, mean, inv, 1e-5f, act, 0.1f, dxb, 0.0f,
	                dg[1], db[1], &p);
	CHECK(memcmp(dxa, dxb, nx * sizeof *dxa) == 0 && memcmp(dg[0], dg[1], sizeof dg[0]) == 0 &&
	      memcmp(db[0], db[1], sizeof db[0]) == 0,
	      "[%s] bn_bwd_pool (act %d) of the pool's bf16 gradient differs from the widened one's",
	      cpu_kgemm_isa(), act);
	cpu_to_bf16(be, dxa, dxr, nx);
	cpu_bn_bwd_pool(be, n, c, hw, x, CDP_H_DY | CDP_H_DX, g, bt, mean, inv, 1e-5f, act, 0.1f,
	                dxh, 0.0f, dg[2], db[2], &p);
	CHECK(memcmp(dxh, dxr, nx * sizeof *dxh) == 0 && memcmp(dg[0], dg[2], sizeof dg[0]) == 0,
	      "[%s] bn_bwd_pool (act %d): dx as bf16 is not the float dx rounded", cpu_kgemm_isa(),
	      act);
out:
	free(x); free(g); free(bt); free(py); free(pdy); free(pdyr); free(dxa); free(dxb);
	free(idx); free(dxh); free(dxr); free(pdyh);
}

static void test_bn(void)
{
	static const char *const isas[] = { "avx512", "avx2" };
	const char *isa = cpu_kgemm_isa();

	CHECK(cpu_bn_takes_gh(be) == 1, "the CPU's bn_bwd takes bf16 gradients");
	for (int k = 0; k < 2; k++) {
		if (cpu_kgemm_force(isas[k]) < 0) {
			printf("# no %s: batchnorm's passes there not tried\n", isas[k]);
			continue;
		}
		for (int act = 0; act <= CDP_ACT_LEAKY; act++) {
			bn_one(act, 0, 2, 3, 2 * 2048 + 77);
			bn_one(act, 1, 3, 2, 1024 + 5);
			bn_one(act, 1, 2, 2, 256);
			bn_pool_one(act);
		}
	}
	cpu_kgemm_force(isa);
}

/* ---- a net ---- */
static const char classifier[] =
	"[net]\nloss=ce\n"
	"[conv]\nfilters=32\nbias=0\n"               /* 0: 8 bands -> 32, grid's filter */
	"[bn]\nactivation=relu\n"                    /* 1 */
	"[conv]\nfilters=32\nbias=0\n"               /* 2: Winograd */
	"[bn]\nactivation=relu\n"                    /* 3 */
	"[maxpool]\n"                                /* 4: fused into 3 where AVX-512 */
	"[conv]\nfilters=64\nbias=0\n"               /* 5 */
	"[bn]\nactivation=relu\n"                    /* 6 */
	"[conv]\nfilters=64\nbias=0\n"               /* 7 */
	"[bn]\nactivation=relu\n"                    /* 8 */
	"[gap]\n"
	"[dense]\nname=head\noutput=5\n";

typedef struct net_out {
	float *grads, *grads2;
	size_t nparams;
	int grad_h[16];
} net_out;

static int net_step(net_out *o)
{
	char err[512];
	cdp_net net;
	cdp_loss loss;
	cdp_loss_result res;
	cdp_rng r;
	int32_t lab[4], *dlab = NULL;
	float *x;
	size_t nx;
	int rc = -1;

	memset(o, 0, sizeof *o);
	if (cdp_net_build(&net, be, classifier, "grads.cfg", NULL, 0, 8, 32, 32, 4, err,
	                  sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	if (cdp_loss_init(&loss, be, net.loss, net.classes, net.ignore, NULL, 0, 0.0f, err,
	                  sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		cdp_net_free(&net);
		return -1;
	}
	nx = (size_t)net.n * net.in.c * net.in.h * net.in.w;
	x = malloc(nx * sizeof *x);
	dlab = be->alloc(be, sizeof lab);
	cdp_rng_seed(&r, 5);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)cdp_rng_normal(&r);
	for (int i = 0; i < 4; i++)
		lab[i] = (int32_t)cdp_rng_below(&r, 5);
	be->to_device(be, net.x, x, nx * sizeof *x);
	be->to_device(be, dlab, lab, sizeof lab);
	cdp_net_init(&net, 3);
	cdp_net_zero_grad(&net);
	cdp_net_forward(&net);
	cdp_loss_compute(&loss, net.n, 1, net.layers[net.out_layer].y, dlab,
	                 net.layers[net.out_layer].dy, &res);
	cdp_net_backward(&net, NULL, NULL);
	o->nparams = net.nparams;
	o->grads = malloc(net.nparams * sizeof(float));
	o->grads2 = malloc(net.nparams * sizeof(float));
	be->to_host(be, o->grads, net.grads, net.nparams * sizeof(float));
	cdp_net_zero_grad(&net);
	cdp_net_backward(&net, NULL, NULL);
	be->to_host(be, o->grads2, net.grads, net.nparams * sizeof(float));
	for (int i = 0; i < net.nlayers && i < 16; i++)
		o->grad_h[i] = cdp_layer_grad_h(&net, i);
	rc = 0;
	cdp_loss_free(&loss);
	free(x);
	be->free(be, dlab);
	cdp_net_free(&net);
	return rc;
}

/* max |a - b| / max |b| */
static double relerr(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;

	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? d / m : d;
}

static void test_net(void)
{
	net_out on, off;
	/* the layers whose gradient is bf16, by set (gcase's rules): conv0
	 * (8 bands, 32 wide: the grid's), bn1 (conv2's data gradient:
	 * Winograd's, amx's paired slice), conv2 (32 wide: Winograd's
	 * with fma and dp, 16 tiles a row; the grid's with amx), conv5 (32
	 * x 64 channels at 16 wide: Winograd's with fma and dp, 8 tiles a
	 * row), bn6, conv7 (64 x 64: Winograd's; not
	 * amx's, whose grid wants 32 wide); the max pool fused into bn3
	 * (conv5's data gradient; bn3's backward reads it), where it is fused
	 * (AVX-512 passes); not bn3 itself (the pool reads it) nor bn8 (gap
	 * does) */
	int m[9] = { DP | AMX, DP | FMA | AMX, DP | FMA | AMX, 0, DP | FMA | AMX, DP | FMA,
	             DP | FMA | AMX, DP | FMA, 0 };
	int any = 0;

	if (!cpu_kgemm_wide())  /* CDP_CPU_ISA=avx2: no pool fused (bn_pool_takes) */
		m[4] = 0;

	setenv("CDP_BF16_GRADS", "0", 1);
	CHECK_RC(net_step(&off), 0);
	unsetenv("CDP_BF16_GRADS");
	CHECK_RC(net_step(&on), 0);
	if (!on.grads || !off.grads)
		return;
	for (int i = 0; i < 9; i++) {
		int want = !!(m[i] & set_bit);
		CHECK(on.grad_h[i] == want, "[%s] layer %d's gradient bf16: %d, expected %d", set, i,
		      on.grad_h[i], want);
		CHECK(off.grad_h[i] == 0, "[%s] CDP_BF16_GRADS=0: layer %d's gradient float", set, i);
		any |= want;
	}
	double e = relerr(on.grads, off.grads, on.nparams);
	printf("# [%s] parameter gradients with bf16 gradients against float: %.4f\n", set, e);
	if (any)
		CHECK(e <= 0.005 && e > 0.0, "[%s] parameter gradients %.4f from float gradients' "
		      "(at most 0.005, not 0)", set, e);
	else
		CHECK(e == 0.0, "[%s] no bf16 gradient, yet the parameter gradients moved %.4f",
		      set, e);
	CHECK(memcmp(on.grads, on.grads2, on.nparams * sizeof(float)) == 0,
	      "[%s] a second backward gives the same bits", set);
	free(on.grads); free(on.grads2); free(off.grads); free(off.grads2);
}

int main(void)
{
	int ran = 0;

	cdp_rng_seed(&rng, 20261207);
	be = cdp_backend_cpu(2);
	if (!be) {
		fprintf(stderr, "test_bf16_grads: cannot create the cpu backend\n");
		return 99;
	}
	for (int i = 0; i < BF16_NSETS; i++) {
		if (bf16_set_enter(be, i) < 0)
			continue;
		set = bf16_sets[i];
		set_bit = 1 << i;
		taken_dyh = taken_dxh = 0;
		for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
			conv_case(&cases[c], c);
		printf("# [%s] %d cases read dy as bf16, %d write dx so\n", set, taken_dyh, taken_dxh);
		test_net();
		ran++;
	}
	CHECK(ran >= 1, "the emulated set at least ran");
	cpu_kgemm_bf16_force(NULL);
	test_bn();
	be->set_precision(be, CDP_PREC_FP32);
	CHECK(!cpu_conv_takes_dyh(be, &(cdp_conv_desc){ .n = 1, .c = 32, .h = 8, .w = 8, .f = 32,
	                                                .kh = 3, .kw = 3, .stride = 1, .pad = 1,
	                                                .dil = 1, .oh = 8, .ow = 8 }),
	      "fp32: no bf16 gradients");
	be->destroy(be);
	return tap_done();
}
