/* test_grad.c: finite-difference gradient checks of every layer type,
 * through tiny nets built from cfg text.
 *
 * For each net: a double-precision reference forward written here (one
 * function per layer type, from the PyTorch definitions) runs on the
 * net's own parameters and input. The loss is L = sum(y * R) for a fixed
 * random R, so dL/dy = R is what the float backward starts from. Every
 * parameter and input element (a random sample of 300 where a block is
 * larger) gets a central difference of the DOUBLE reference,
 * (L(t+h) - L(t-h)) / 2h with h = 1e-5: truncation ~h^2 and rounding
 * ~1e-16/h, both below 1e-9 here. The float backward must match it to
 * 2e-3 of the block's largest gradient (floor 0.05): float32 sums over a
 * few hundred terms err by ~1e-6 relative, while a wrong index, a missing
 * term or a wrong scale errs by the size of the gradient itself. The
 * float forward must match the reference forward to 1e-4.
 *
 * Batchnorm runs in training mode (batch statistics, so every output
 * depends on every input of its channel); dropout draws the fixed mask of
 * the net's step seed, recomputed here from the documented hash.
 *
 * A layer with weights= reads its source's parameters in the reference
 * too (its offsets are the source's), so the difference of a shared
 * parameter moves both uses: the engine's gradient must be their sum.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "net.h"
#include "tap.h"

#define H 1e-5

/* ---- the double reference forward ---- */

typedef struct ref {
	const cdp_net *net;
	double *p;                  /* parameters */
	double *x;                  /* input (N,C,H,W) */
	double **y;                 /* per layer (N,C,H,W) */
	double *r;                  /* the loss weights, like the output */
} ref;

static size_t numel(cdp_shape s) { return (size_t)s.c * s.h * s.w; }

static double act(int kind, double slope, double v)
{
	if (kind == CDP_ACT_RELU)
		return v > 0 ? v : 0;
	if (kind == CDP_ACT_LEAKY)
		return v > 0 ? v : slope * v;
	return v;
}

static void r_conv(const cdp_layer *l, int N, const double *x, const double *w, const double *b, double *y)
{
	cdp_shape i = l->in[0], o = l->out;
	for (int n = 0; n < N; n++)
		for (int f = 0; f < o.c; f++)
			for (int oh = 0; oh < o.h; oh++)
				for (int ow = 0; ow < o.w; ow++) {
					double s = b ? b[f] : 0;
					for (int c = 0; c < i.c; c++)
						for (int a = 0; a < l->k; a++)
							for (int e = 0; e < l->k; e++) {
								int ih = oh * l->stride - l->pad + a * l->dil;
								int iw = ow * l->stride - l->pad + e * l->dil;
								if (ih >= 0 && ih < i.h && iw >= 0 && iw < i.w)
									s += x[((n * i.c + c) * i.h + ih) * i.w + iw] *
									     w[((f * i.c + c) * l->k + a) * l->k + e];
							}
					y[((n * o.c + f) * o.h + oh) * o.w + ow] = act(l->act, l->slope, s);
				}
}

/* ConvTranspose2d: input pixel (ih,iw) spreads w[c,f,a,e] to
 * (ih*s - pad + a, iw*s - pad + e). */
static void r_deconv(const cdp_layer *l, int N, const double *x, const double *w, const double *b, double *y)
{
	cdp_shape i = l->in[0], o = l->out;
	size_t ny = (size_t)N * numel(o);
	for (int n = 0; n < N; n++)
		for (int f = 0; f < o.c; f++)
			for (int t = 0; t < o.h * o.w; t++)
				y[(n * o.c + f) * o.h * o.w + t] = b ? b[f] : 0;
	for (int n = 0; n < N; n++)
		for (int c = 0; c < i.c; c++)
			for (int ih = 0; ih < i.h; ih++)
				for (int iw = 0; iw < i.w; iw++)
					for (int f = 0; f < o.c; f++)
						for (int a = 0; a < l->k; a++)
							for (int e = 0; e < l->k; e++) {
								int oh = ih * l->stride - l->pad + a, ow = iw * l->stride - l->pad + e;
								if (oh >= 0 && oh < o.h && ow >= 0 && ow < o.w)
									y[((n * o.c + f) * o.h + oh) * o.w + ow] +=
										x[((n * i.c + c) * i.h + ih) * i.w + iw] *
										w[((c * o.c + f) * l->k + a) * l->k + e];
							}
	for (size_t t = 0; t < ny; t++)
		y[t] = act(l->act, l->slope, y[t]);
}

static void r_bn(const cdp_layer *l, int N, const double *x, const double *g, const double *b, double *y)
{
	cdp_shape s = l->in[0];
	int hw = s.h * s.w;
	for (int c = 0; c < s.c; c++) {
		double m = 0, v = 0, M = (double)N * hw;
		for (int n = 0; n < N; n++)
			for (int t = 0; t < hw; t++)
				m += x[(n * s.c + c) * hw + t];
		m /= M;
		for (int n = 0; n < N; n++)
			for (int t = 0; t < hw; t++) {
				double d = x[(n * s.c + c) * hw + t] - m;
				v += d * d;
			}
		v /= M;
		for (int n = 0; n < N; n++)
			for (int t = 0; t < hw; t++) {
				size_t k = (size_t)(n * s.c + c) * hw + t;
				y[k] = act(l->act, l->slope, (x[k] - m) / sqrt(v + l->eps) * g[c] + b[c]);
			}
	}
}

static void r_pool(const cdp_layer *l, int N, const double *x, double *y, int is_max)
{
	cdp_shape i = l->in[0], o = l->out;
	for (int t = 0; t < N * i.c; t++)
		for (int oh = 0; oh < o.h; oh++)
			for (int ow = 0; ow < o.w; ow++) {
				int h0 = oh * l->stride - l->pad, w0 = ow * l->stride - l->pad;
				int h1 = h0 + l->k < i.h + l->pad ? h0 + l->k : i.h + l->pad;
				int w1 = w0 + l->k < i.w + l->pad ? w0 + l->k : i.w + l->pad;
				double best = -INFINITY, sum = 0, div = (double)(h1 - h0) * (w1 - w0);
				for (int h = h0; h < h1; h++)
					for (int w = w0; w < w1; w++) {
						if (h < 0 || h >= i.h || w < 0 || w >= i.w)
							continue;
						double v = x[((size_t)t * i.h + h) * i.w + w];
						sum += v;
						best = v > best ? v : best;
					}
				y[((size_t)t * o.h + oh) * o.w + ow] = is_max ? best : sum / div;
			}
}

/* PyTorch's upsample pixels along an axis of `in` -> `out` pixels, in
 * double: nearest floor(dst * in / out), bilinear (align_corners=False)
 * src = (dst + 0.5) * in / out - 0.5 clamped at 0 */
static void up_w(int mode, int dst, int in, int out, int *i0, int *i1, double *l0, double *l1)
{
	double src = (dst + 0.5) * in / out - 0.5;
	if (mode == CDP_UP_NEAREST) {
		*i0 = *i1 = (int)floor((double)dst * in / out);
		*l0 = 1;
		*l1 = 0;
		return;
	}
	src = src < 0 ? 0 : src;
	*i0 = (int)src;
	*i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
	*l1 = src - *i0;
	*l0 = 1 - *l1;
}

static void r_upsample(const cdp_layer *l, int N, const double *x, double *y)
{
	cdp_shape i = l->in[0], o = l->out;
	for (int t = 0; t < N * i.c; t++)
		for (int oy = 0; oy < o.h; oy++)
			for (int ox = 0; ox < o.w; ox++) {
				int y0, y1, x0, x1;
				double a0, a1, b0, b1;
				const double *p = x + (size_t)t * i.h * i.w;
				up_w(l->mode, oy, i.h, o.h, &y0, &y1, &a0, &a1);
				up_w(l->mode, ox, i.w, o.w, &x0, &x1, &b0, &b1);
				y[((size_t)t * o.h + oy) * o.w + ox] =
					a0 * (b0 * p[y0 * i.w + x0] + b1 * p[y0 * i.w + x1]) +
					a1 * (b0 * p[y1 * i.w + x0] + b1 * p[y1 * i.w + x1]);
			}
}

static int keep(uint64_t seed, uint64_t i, double p)
{
	uint64_t z = (seed ^ (i * 0x9E3779B97F4A7C15ULL)) + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (double)(z >> 40) / 16777216.0 >= p;
}

static double ref_forward(ref *rf)
{
	const cdp_net *net = rf->net;
	int N = net->n;
	for (int li = 0; li < net->nlayers; li++) {
		const cdp_layer *l = &net->layers[li];
		const char *t = l->ops->type;
		const double *x = l->from[0] < 0 ? rf->x : rf->y[l->from[0]];
		/* a layer with weights= has its source's bias, or none */
		const cdp_layer *own = l->share ? &net->layers[l->share - 1] : l;
		const double *w = rf->p + l->w_off, *b = own->b_len ? rf->p + l->b_off : NULL;
		double *y = rf->y[li];
		size_t ny = (size_t)N * numel(l->out), in = numel(l->in[0]);
		if (!strcmp(t, "conv"))
			r_conv(l, N, x, w, b, y);
		else if (!strcmp(t, "deconv"))
			r_deconv(l, N, x, w, b, y);
		else if (!strcmp(t, "bn"))
			r_bn(l, N, x, w, rf->p + l->b_off, y);
		else if (!strcmp(t, "relu") || !strcmp(t, "leaky"))
			for (size_t k = 0; k < ny; k++)
				y[k] = act(l->act, l->slope, x[k]);
		else if (!strcmp(t, "maxpool") || !strcmp(t, "avgpool"))
			r_pool(l, N, x, y, t[0] == 'm');
		else if (!strcmp(t, "upsample"))
			r_upsample(l, N, x, y);
		else if (!strcmp(t, "gap"))
			for (int k = 0; k < N * l->out.c; k++) {
				double s = 0;
				for (size_t q = 0; q < in / l->out.c; q++)
					s += x[k * (in / l->out.c) + q];
				y[k] = s / (double)(in / l->out.c);
			}
		else if (!strcmp(t, "dense"))
			for (int n = 0; n < N; n++)
				for (int o = 0; o < l->out.c; o++) {
					double s = b ? b[o] : 0;
					for (size_t q = 0; q < in; q++)
						s += x[n * in + q] * w[o * in + q];
					y[n * l->out.c + o] = act(l->act, l->slope, s);
				}
		else if (!strcmp(t, "dropout")) {
			uint64_t seed = cdp_rng_derive(net->step_seed, (uint64_t)li, 0);
			for (size_t k = 0; k < ny; k++)
				y[k] = keep(seed, k, l->p) ? x[k] / (1.0 - (double)l->p) : 0.0;
		} else if (!strcmp(t, "add")) {
			memset(y, 0, ny * sizeof *y);
			for (int j = 0; j < l->nfrom; j++) {
				const double *s = l->from[j] < 0 ? rf->x : rf->y[l->from[j]];
				for (size_t k = 0; k < ny; k++)
					y[k] += s[k];
			}
		} else if (!strcmp(t, "diff")) {
			const double *b2 = l->from[1] < 0 ? rf->x : rf->y[l->from[1]];
			for (size_t k = 0; k < ny; k++)
				y[k] = l->k ? fabs(x[k] - b2[k]) : x[k] - b2[k];
		} else if (!strcmp(t, "slice")) {
			size_t hw = (size_t)l->out.h * l->out.w;
			for (int n = 0; n < N; n++)
				memcpy(y + (size_t)n * l->out.c * hw,
				       x + ((size_t)n * l->in[0].c + (size_t)l->k) * hw,
				       l->out.c * hw * sizeof *y);
		} else if (!strcmp(t, "concat")) {
			size_t hw = (size_t)l->out.h * l->out.w;
			int off = 0;
			for (int j = 0; j < l->nfrom; j++) {
				const double *s = l->from[j] < 0 ? rf->x : rf->y[l->from[j]];
				int c = l->in[j].c;
				for (int n = 0; n < N; n++)
					memcpy(y + ((size_t)n * l->out.c + off) * hw, s + (size_t)n * c * hw,
					       c * hw * sizeof *y);
				off += c;
			}
		} else {
			CHECK(0, "no reference for layer type %s", t);
		}
	}
	const cdp_layer *o = &net->layers[net->out_layer];
	double L = 0;
	for (size_t k = 0; k < (size_t)N * numel(o->out); k++)
		L += rf->y[net->out_layer][k] * rf->r[k];
	return L;
}

/* ---- the check ---- */

static cdp_rng rng;

/* Compares the float gradient g[0..n) with central differences of L in
 * v[0..n) (a block of the reference's parameters or input). */
static void fd_block(ref *rf, double *v, const float *g, size_t n, const char *cfgname,
                     const char *what)
{
	size_t *idx = malloc((n ? n : 1) * sizeof *idx), m = n;
	double *fd = malloc((n ? n : 1) * sizeof *fd), scale = 0.05, worst = 0;
	size_t at = 0;

	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	if (n > 300) {            /* a random sample, the same every run */
		cdp_rng_shuffle_size(&rng, idx, n);
		m = 300;
	}
	for (size_t t = 0; t < m; t++) {
		double keepv = v[idx[t]], lp, lm;
		v[idx[t]] = keepv + H;
		lp = ref_forward(rf);
		v[idx[t]] = keepv - H;
		lm = ref_forward(rf);
		v[idx[t]] = keepv;
		fd[t] = (lp - lm) / (2 * H);
		if (fabs(fd[t]) > scale)
			scale = fabs(fd[t]);
	}
	for (size_t t = 0; t < m; t++) {
		double e = fabs(g[idx[t]] - fd[t]);
		if (!(e <= worst)) {
			worst = e;
			at = t;
		}
	}
	CHECK(worst <= 2e-3 * scale, "%s: %s: gradient error %.3g at %zu (%.6g vs fd %.6g), scale %.3g",
	      cfgname, what, worst, m ? idx[at] : 0, m ? g[idx[at]] : 0.0, m ? fd[at] : 0.0, scale);
	free(idx);
	free(fd);
}

static void check_net(cdp_backend *be, const char *name, const char *cfg, int n)
{
	cdp_net net;
	char err[512];
	ref rf = { 0 };

	if (cdp_net_build(&net, be, cfg, name, NULL, 0, 0, 0, 0, n, err, sizeof err) < 0) {
		CHECK(0, "%s: build failed: %s", name, err);
		return;
	}
	net.input_grad = 1;
	net.step_seed = 99;
	cdp_net_init(&net, 7);
	size_t nx = (size_t)n * numel(net.in), no = (size_t)n * numel(net.layers[net.out_layer].out);
	float *xf = malloc(nx * sizeof *xf), *pf = malloc(net.nparams * sizeof *pf + 4);
	float *rfl = malloc(no * sizeof *rfl), *gf = malloc(net.nparams * sizeof *gf + 4);
	float *dxf = malloc(nx * sizeof *dxf), *yf = malloc(no * sizeof *yf);
	rf.net = &net;
	rf.x = malloc(nx * sizeof *rf.x);
	rf.p = malloc(net.nparams * sizeof *rf.p + 8);
	rf.r = malloc(no * sizeof *rf.r);
	rf.y = calloc((size_t)net.nlayers, sizeof *rf.y);
	for (int i = 0; i < net.nlayers; i++)
		rf.y[i] = malloc((size_t)n * numel(net.layers[i].out) * sizeof(double));
	/* biases and bn parameters away from their init, so every term counts */
	be->to_host(be, pf, net.params, net.nparams * sizeof *pf);
	for (size_t i = 0; i < net.nparams; i++) {
		pf[i] += (float)(cdp_rng_double(&rng) * 0.4 - 0.2);
		rf.p[i] = pf[i];
	}
	be->to_device(be, net.params, pf, net.nparams * sizeof *pf);
	for (size_t i = 0; i < nx; i++) {
		xf[i] = (float)(cdp_rng_double(&rng) * 2 - 1);
		rf.x[i] = xf[i];
	}
	for (size_t i = 0; i < no; i++) {
		rfl[i] = (float)(cdp_rng_double(&rng) * 2 - 1);
		rf.r[i] = rfl[i];
	}
	be->to_device(be, net.x, xf, nx * sizeof *xf);
	cdp_net_forward(&net);
	be->to_device(be, net.layers[net.out_layer].dy, rfl, no * sizeof *rfl);
	cdp_net_zero_grad(&net);
	cdp_net_backward(&net, NULL, NULL);
	be->to_host(be, gf, net.grads, net.nparams * sizeof *gf);
	be->to_host(be, dxf, net.dx, nx * sizeof *dxf);
	be->to_host(be, yf, cdp_net_output(&net), no * sizeof *yf);

	ref_forward(&rf);
	double scale = 1, worst = 0;
	for (size_t i = 0; i < no; i++)
		scale = fmax(scale, fabs(rf.y[net.out_layer][i]));
	for (size_t i = 0; i < no; i++)
		worst = fmax(worst, fabs(yf[i] - rf.y[net.out_layer][i]));
	CHECK(worst <= 1e-4 * scale, "%s: forward differs from the reference by %.3g", name, worst);

	for (int i = 0; i < net.nlayers; i++) {
		cdp_layer *l = &net.layers[i];
		char what[128];
		if (l->w_len) {
			snprintf(what, sizeof what, "layer %s (%s) weight", l->name, l->ops->type);
			fd_block(&rf, rf.p + l->w_off, gf + l->w_off, l->w_len, name, what);
		}
		if (l->b_len) {
			snprintf(what, sizeof what, "layer %s (%s) bias/beta", l->name, l->ops->type);
			fd_block(&rf, rf.p + l->b_off, gf + l->b_off, l->b_len, name, what);
		}
	}
	fd_block(&rf, rf.x, dxf, nx, name, "input");

	/* a second backward adds to the parameter gradients (accumulation for
	 * gradient steps) but writes the activation gradients afresh */
	float *g2 = malloc(net.nparams * sizeof *g2 + 4), *dx2 = malloc(nx * sizeof *dx2);
	double gw = 0, gs = 1e-3, xw = 0;
	be->to_device(be, net.layers[net.out_layer].dy, rfl, no * sizeof *rfl);
	cdp_net_backward(&net, NULL, NULL);
	be->to_host(be, g2, net.grads, net.nparams * sizeof *g2);
	be->to_host(be, dx2, net.dx, nx * sizeof *dx2);
	for (size_t i = 0; i < net.nparams; i++) {
		gw = fmax(gw, fabs(g2[i] - 2.0 * gf[i]));
		gs = fmax(gs, fabs(gf[i]));
	}
	for (size_t i = 0; i < nx; i++)
		xw = fmax(xw, fabs(dx2[i] - dxf[i]));
	CHECK(gw <= 1e-5 * gs, "%s: second backward: |g2 - 2 g| = %.3g", name, gw);
	CHECK(xw == 0, "%s: second backward: input gradient changed by %.3g", name, xw);
	free(g2);
	free(dx2);

	for (int i = 0; i < net.nlayers; i++)
		free(rf.y[i]);
	free(rf.y); free(rf.x); free(rf.p); free(rf.r);
	free(xf); free(pf); free(rfl); free(gf); free(dxf); free(yf);
	cdp_net_free(&net);
}

/* conv: stride 2 + padding, dilation 2, 1x1, even kernel, fused leaky/relu */
static const char *net_conv =
	"[net]\nchannels=2\nin_h=9\nin_w=8\n"
	"[conv]\nfilters=3\nsize=3\nstride=2\npad=1\nactivation=leaky\nslope=0.1\n"
	"[conv]\nfilters=4\nsize=3\ndilation=2\nbias=0\nactivation=relu\n"
	"[conv]\nfilters=3\nsize=1\n"
	"[conv]\nfilters=2\nsize=4\nstride=2\npad=1\n";

/* batchnorm in training mode, plain and with a fused activation; relu and
 * leaky layers; bn on the net input (no input gradient path needed); the
 * same net synchronized (bn_sync=1: layers/bn.c's parts, one process) */
#define BN_LAYERS \
	"[bn]\n" \
	"[conv]\nfilters=4\nsize=3\nbias=0\n" \
	"[bn]\nmomentum=0.2\n" \
	"[relu]\n" \
	"[conv]\nfilters=3\nsize=3\nstride=2\n" \
	"[bn]\nactivation=leaky\n" \
	"[leaky]\nslope=0.2\n" \
	"[conv]\nfilters=2\nsize=1\n"
static const char *net_bn = "[net]\nchannels=3\nin_h=5\nin_w=6\n" BN_LAYERS;
static const char *net_bn_sync = "[net]\nchannels=3\nin_h=5\nin_w=6\nbn_sync=1\n" BN_LAYERS;

/* a small U-Net: maxpool down, deconv up, concat of the skip */
static const char *net_unet =
	"[net]\nchannels=2\nin_h=8\nin_w=8\nclasses=2\n"
	"[conv]\nname=e0\nfilters=3\nactivation=relu\n"
	"[maxpool]\n"
	"[conv]\nfilters=4\n"
	"[deconv]\nfilters=3\n"
	"[concat]\nfrom=e0,-1\n"
	"[deconv]\nfilters=2\nsize=3\nstride=2\npad=1\n"
	"[conv]\nfilters=2\nsize=3\nstride=2\n";

/* padded pools, both upsampling modes, a residual add, tensors read by
 * two layers and twice by one (gradients accumulate), the net input read
 * by two layers */
static const char *net_pool =
	"[net]\nchannels=2\nin_h=7\nin_w=7\n"
	"[conv]\nname=a\nfilters=3\n"
	"[avgpool]\nsize=3\nstride=2\npad=1\n"
	"[upsample]\nname=up\nmode=bilinear\n"
	"[maxpool]\nsize=3\nstride=2\npad=1\n"
	"[upsample]\nmode=nearest\n"
	"[add]\nfrom=-1,up\n"
	"[maxpool]\nsize=2\n"
	"[avgpool]\nfrom=input\nsize=2\npad=1\n"
	"[concat]\nfrom=-2,-2,-1\n"
	"[conv]\nfilters=2\nsize=1\n";

/* upsampling to a reference's size (ratios 7/4 and 9/5 in both modes; the
 * net input as a reference, so the first writer of its gradient is an
 * upsample that writes zeros), broadcast of a (C,1,1) map, and by integer
 * factors in both modes */
static const char *net_up =
	"[net]\nchannels=2\nin_h=7\nin_w=9\n"
	"[conv]\nname=a\nfilters=3\nstride=2\npad=1\n"
	"[upsample]\nname=b\nfrom=a,input\nmode=bilinear\n"
	"[upsample]\nname=c\nfrom=a,input\n"
	"[gap]\nfrom=a\n"
	"[upsample]\nname=d\nfrom=-1,b\nmode=bilinear\n"
	"[add]\nfrom=b,c,d\n"
	"[upsample]\nname=e\nmode=bilinear\nfactor=3\n"
	"[upsample]\nfrom=-2\nfactor=3\n"
	"[add]\nfrom=e,-1\n"
	"[conv]\nfilters=2\nsize=1\n";

/* a classifier head: dropout with its fixed mask, gap, dense on a flat
 * tensor and on gap, add of two dense branches */
static const char *net_head =
	"[net]\nchannels=2\nin_h=6\nin_w=5\nclasses=3\n"
	"[conv]\nname=c\nfilters=4\nstride=2\n"
	"[dropout]\np=0.3\n"
	"[gap]\n"
	"[dense]\nname=d1\noutput=6\nactivation=leaky\n"
	"[dense]\nfrom=c\noutput=6\nactivation=relu\n"
	"[add]\nfrom=d1,-1\n"
	"[dropout]\np=0.5\n"
	"[dense]\noutput=3\n";

/* a siamese pair: two slices of the input (each date's channels) through
 * one conv and one bn (weights=), concatenated, a slice across the two
 * branches' channels, a 1x1 head */
static const char *net_siamese =
	"[net]\nchannels=4\nin_h=5\nin_w=4\nclasses=3\n"
	"[slice]\nend=2\n"
	"[conv]\nname=f\nfilters=3\n"
	"[bn]\nname=g\nactivation=leaky\n"
	"[slice]\nfrom=input\nstart=2\n"
	"[conv]\nweights=f\nfilters=3\n"
	"[bn]\nweights=g\nactivation=leaky\n"
	"[concat]\nfrom=g,-1\n"
	"[slice]\nstart=1\nend=5\n"
	"[conv]\nfilters=3\nsize=1\n";

/* [diff]: |a - b| of a siamese pair's features (one conv, weights=), the
 * plain difference of that and one branch, a tensor less itself (0, its
 * gradient 0 added to the tensor's), all concatenated into a 1x1 head */
static const char *net_diff =
	"[net]\nchannels=4\nin_h=5\nin_w=4\nclasses=3\n"
	"[slice]\nend=2\n"
	"[conv]\nname=f\nfilters=3\n"
	"[slice]\nfrom=input\nstart=2\n"
	"[conv]\nweights=f\nfilters=3\n"
	"[diff]\nname=d\nfrom=f,-1\nabs=1\n"
	"[diff]\nname=e\nfrom=-1,f\n"
	"[diff]\nfrom=d,d\n"
	"[concat]\nfrom=d,e,-1\n"
	"[conv]\nfilters=3\nsize=1\n";

int main(void)
{
	cdp_backend *be = cdp_backend_cpu(2);

	if (!be) {
		fprintf(stderr, "test_grad: cannot create the cpu backend\n");
		return 99;
	}
	cdp_rng_seed(&rng, 4242);
	check_net(be, "conv.cfg", net_conv, 2);
	check_net(be, "bn.cfg", net_bn, 3);
	check_net(be, "bn_sync.cfg", net_bn_sync, 3);
	check_net(be, "unet.cfg", net_unet, 2);
	check_net(be, "pool.cfg", net_pool, 2);
	check_net(be, "head.cfg", net_head, 3);
	check_net(be, "siamese.cfg", net_siamese, 2);
	{
		/* the shared conv and bn are one set: conv 54 + 3, bn 3 + 3, head 12 + 3 */
		cdp_net net;
		char err[512];
		int ok = cdp_net_build(&net, be, net_siamese, "siamese.cfg", NULL, 0, 0, 0, 0, 1, err,
		                       sizeof err) == 0;
		CHECK(ok && net.nparams == 78 && net.nbuffers == 6 && net.layers[4].share == 2 &&
		      net.layers[5].share == 3, "siamese.cfg: %zu parameters, %zu buffers (want 78, 6)",
		      ok ? net.nparams : 0, ok ? net.nbuffers : 0);
		/* --freeze of the source freezes every use; the sharing layer's
		 * own name does not unfreeze or freeze the set apart from it */
		if (ok) {
			CHECK(cdp_net_freeze(&net, "f,g", err, sizeof err) == 4 && net.layers[4].frozen &&
			      net.layers[5].frozen, "siamese.cfg: --freeze f,g leaves a use unfrozen");
			CHECK(cdp_net_freeze(&net, "conv4", err, sizeof err) == 0 && !net.layers[4].frozen &&
			      !net.layers[1].frozen, "siamese.cfg: --freeze of the sharing layer alone");
			cdp_net_free(&net);
		}
	}
	check_net(be, "up.cfg", net_up, 2);
	check_net(be, "diff.cfg", net_diff, 2);
	be->destroy(be);
	return tap_done();
}
