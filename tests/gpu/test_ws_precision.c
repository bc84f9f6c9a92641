/* test_ws_precision.c: a net's workspace after a precision change
 * (cdp_net_set_precision), on any machine. The backend is the CPU one
 * behind a wrapper that behaves as the CUDA backend does for this: it
 * accepts every precision, its conv_workspace grows in bf16/fp16 by the
 * half staging of x, w and y (cuda_conv.c's layout), and its conv ops
 * count every call whose workspace (looked up among the wrapper's
 * allocations) is smaller than conv_workspace says for the current
 * precision, which on the GPU would be a write past the buffer. The U-Net
 * (convolutions and transposed ones) is built in fp32 and run forward and
 * backward: in fp32, after cdp_net_set_precision to bf16 and to fp16, with
 * no such call; switching with be->set_precision alone shows the check
 * seeing the overflow. A refused precision and an allocation that fails
 * leave the net's precision and workspace as they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfg/cfg.h"
#include "net.h"
#include "tap.h"

static cdp_backend *cpu, wrap;
static struct { void *p; size_t bytes; } live[4096];
static int nlive, short_ws, fail_alloc;

static void *w_alloc(cdp_backend *be, size_t bytes)
{
	void *p;

	(void)be;
	if (fail_alloc || nlive == (int)(sizeof live / sizeof live[0]))
		return NULL;
	if ((p = cpu->alloc(cpu, bytes))) {
		live[nlive].p = p;
		live[nlive++].bytes = bytes;
	}
	return p;
}

static void w_free(cdp_backend *be, void *p)
{
	(void)be;
	for (int i = 0; i < nlive; i++)
		if (live[i].p == p) {
			live[i] = live[--nlive];
			break;
		}
	cpu->free(cpu, p);
}

static int w_set_precision(cdp_backend *be, int prec)
{
	if (prec < CDP_PREC_FP32 || prec > CDP_PREC_FP16)
		return -1;
	be->precision = prec;
	return 0;
}

/* the inner CPU computes in fp32 whatever the wrapper's precision, so it
 * reads a float input only (as CUDA's conv_takes_xh says too) */
static int w_conv_takes_xh(cdp_backend *be, const cdp_conv_desc *d)
{
	(void)be;
	return cpu->conv_takes_xh(cpu, d);
}

/* cuda_conv.c's bf16/fp16 staging: x, w and y in 2-byte elements */
static size_t w_conv_workspace(cdp_backend *be, const cdp_conv_desc *d)
{
	size_t b = cpu->conv_workspace(cpu, d);

	if (be->precision == CDP_PREC_BF16 || be->precision == CDP_PREC_FP16)
		b += 2 * ((size_t)d->n * d->c * d->h * d->w + (size_t)d->f * d->c * d->kh * d->kw +
		          (size_t)d->n * d->f * d->oh * d->ow);
	return b;
}

/* counts a workspace smaller than conv_workspace(d) now */
static void check_ws(const cdp_conv_desc *d, const void *ws)
{
	size_t need = w_conv_workspace(&wrap, d), have = 0;

	for (int i = 0; i < nlive; i++)
		if (live[i].p == ws)
			have = live[i].bytes;
	short_ws += need > 0 && have < need;
}

static void w_conv_fwd(cdp_backend *be, const cdp_conv_desc *d, const void *x, const float *w,
                       const float *bias, void *y, void *ws)
{
	(void)be;
	check_ws(d, ws);
	cpu->conv_fwd(cpu, d, x, w, bias, y, ws);
}

static void w_conv_bwd_data(cdp_backend *be, const cdp_conv_desc *d, const void *dy,
                            const float *w, void *dx, float beta, void *ws)
{
	(void)be;
	check_ws(d, ws);
	cpu->conv_bwd_data(cpu, d, dy, w, dx, beta, ws);
}

static void w_conv_bwd_filter(cdp_backend *be, const cdp_conv_desc *d, const void *x,
                              const void *dy, float *dw, float *dbias, void *ws)
{
	(void)be;
	check_ws(d, ws);
	cpu->conv_bwd_filter(cpu, d, x, dy, dw, dbias, ws);
}

/* one training step's forward and backward; returns the short workspaces seen */
static int step(cdp_net *net)
{
	short_ws = 0;
	net->train = 1;
	cdp_net_forward(net);
	cdp_net_zero_grad(net);
	cdp_net_backward(net, NULL, NULL);
	return short_ws;
}

int main(void)
{
	const char *srcdir = getenv("CDP_SRCDIR");
	static const char *const ov[] = { "width=4", "depth=2" };
	char path[1024], err[512], *text = NULL;
	cdp_net net, net2;
	size_t ws0;

	if (!srcdir || !*srcdir)
		srcdir = CDP_SRCDIR;
	snprintf(path, sizeof path, "%s/share/cdpool/models/unet.cfg", srcdir);
	if (cdp_cfg_read(path, &text, err, sizeof err) < 0) {
		fprintf(stderr, "test_ws_precision: %s\n", err);
		return 99;
	}
	if (!(cpu = cdp_backend_cpu(1))) {
		fprintf(stderr, "test_ws_precision: cannot start the CPU backend\n");
		return 99;
	}
	wrap = *cpu;
	wrap.alloc = w_alloc;
	wrap.free = w_free;
	wrap.set_precision = w_set_precision;
	wrap.conv_workspace = w_conv_workspace;
	wrap.conv_takes_xh = w_conv_takes_xh;
	wrap.conv_fwd = w_conv_fwd;
	wrap.conv_bwd_data = w_conv_bwd_data;
	wrap.conv_bwd_filter = w_conv_bwd_filter;

	if (cdp_net_build(&net, &wrap, text, path, ov, 2, 3, 16, 16, 2, err, sizeof err) < 0) {
		fprintf(stderr, "test_ws_precision: %s\n", err);
		return 99;
	}
	cdp_net_init(&net, 1);
	ws0 = net.ws_bytes;
	CHECK(step(&net) == 0, "fp32: %d convolutions with a short workspace", short_ws);

	/* the backend alone: the workspace stays fp32's, the check sees it */
	wrap.set_precision(&wrap, CDP_PREC_BF16);
	CHECK(step(&net) > 0, "bf16 without cdp_net_set_precision: no short workspace seen");
	wrap.set_precision(&wrap, CDP_PREC_FP32);

	for (int prec = CDP_PREC_BF16; prec <= CDP_PREC_FP16; prec++) {
		CHECK_RC(cdp_net_set_precision(&net, prec, err, sizeof err), 0);
		CHECK(wrap.precision == prec, "precision %d, want %d", wrap.precision, prec);
		CHECK(net.ws_bytes > ws0, "precision %d: workspace %zu, fp32's %zu", prec,
		      net.ws_bytes, ws0);
		CHECK(step(&net) == 0, "precision %d: %d convolutions with a short workspace", prec,
		      short_ws);
	}
	CHECK_RC(cdp_net_set_precision(&net, CDP_PREC_FP32, err, sizeof err), 0);
	CHECK(step(&net) == 0, "back to fp32: %d short workspaces", short_ws);

	/* refused: nothing changes */
	CHECK_RC(cdp_net_set_precision(&net, 7, err, sizeof err), -1);
	CHECK(wrap.precision == CDP_PREC_FP32 && strstr(err, "cannot compute"), "after a refused "
	      "precision: precision %d, '%s'", wrap.precision, err);

	/* out of memory while growing: the precision stays fp32 */
	if (cdp_net_build(&net2, &wrap, text, path, ov, 2, 3, 16, 16, 2, err, sizeof err) < 0) {
		fprintf(stderr, "test_ws_precision: %s\n", err);
		return 99;
	}
	ws0 = net2.ws_bytes;
	fail_alloc = 1;
	CHECK_RC(cdp_net_set_precision(&net2, CDP_PREC_BF16, err, sizeof err), -1);
	fail_alloc = 0;
	CHECK(wrap.precision == CDP_PREC_FP32 && net2.ws_bytes == ws0 && strstr(err, "out of memory"),
	      "after a failed allocation: precision %d, workspace %zu (was %zu), '%s'",
	      wrap.precision, net2.ws_bytes, ws0, err);
	CHECK(step(&net2) == 0, "fp32 after the failed change: %d short workspaces", short_ws);

	cdp_net_free(&net2);
	cdp_net_free(&net);
	CHECK(nlive == 0, "%d allocations left", nlive);
	cpu->destroy(cpu);
	free(text);
	return tap_done();
}
