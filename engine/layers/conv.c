/* conv.c: the convolution layer, PyTorch's Conv2d with an optional fused
 * activation.
 *
 * [conv]
 *   filters=F        output channels (required)
 *   size=K           square kernel (default 3)
 *   stride=S         (default 1)
 *   dilation=D       (default 1)
 *   pad=P            zero padding on each side (default K/2*D: "same" size
 *                    for odd K at stride 1)
 *   bias=0|1         (default 1; 0 before a batchnorm, whose beta is a bias)
 *   activation=linear|relu|leaky, slope=A for leaky (default linear)
 * Input (C,H,W) -> output (F,OH,OW), OH = (H + 2P - D(K-1) - 1)/S + 1.
 * Parameters: weight (F,C,K,K), then bias (F). He init, fan_in = C*K*K.
 */
#include <stdint.h>
#include <stdio.h>
#include "layers.h"

static cdp_conv_desc desc(const cdp_layer *l, int n)
{
	cdp_conv_desc d = { .n = n, .c = l->in[0].c, .h = l->in[0].h, .w = l->in[0].w,
	                    .f = l->filters, .kh = l->k, .kw = l->k, .stride = l->stride,
	                    .pad = l->pad, .dil = l->dil };
	cdp_conv_desc_init(&d);
	return d;
}

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	cdp_conv_desc d;

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "filters", 0, 1, 1 << 16, &l->filters, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "size", 3, 1, 1 << 10, &l->k, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "stride", 1, 1, 1 << 10, &l->stride, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "dilation", 1, 1, 1 << 10, &l->dil, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "pad", l->k / 2 * l->dil, 0, 1 << 10, &l->pad, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "bias", 1, 0, 1, &l->bias, err, cap) < 0 ||
	    cdp_lopt_act(net, s, l, err, cap) < 0)
		return -1;
	if (l->filters == 0) {
		snprintf(err, cap, "filters= is required");
		return -1;
	}
	d = desc(l, 1);
	if (cdp_conv_desc_init(&d) < 0) {
		snprintf(err, cap, "input (%d,%d,%d) is smaller than the kernel %d "
		         "(dilation %d, pad %d)", l->in[0].c, l->in[0].h, l->in[0].w,
		         l->k, l->dil, l->pad);
		return -1;
	}
	l->out = (cdp_shape){ l->filters, d.oh, d.ow };
	l->w_len = (size_t)l->filters * l->in[0].c * l->k * l->k;
	l->w_off = cdp_net_param(net, l->w_len);
	l->b_len = l->bias ? (size_t)l->filters : 0;
	l->b_off = l->bias ? cdp_net_param(net, l->b_len) : 0;
	return 0;
}

/* Every batch size an op may run at: the batch, and with the stash the
 * groups its input's bf16 copy is widened in (cdp_net_stash_group) */
static size_t workspace(cdp_layer *l, cdp_net *net)
{
	int g = cdp_net_stash_group(net, l), sizes[3] = { net->n, g, net->n % g };
	size_t ws = 0;

	for (int i = 0; i < (net->wide_floats ? 3 : 1); i++) {
		cdp_conv_desc d = desc(l, sizes[i]);
		size_t b = sizes[i] ? net->be->conv_workspace(net->be, &d) : 0;
		if (b == SIZE_MAX)
			return SIZE_MAX;
		if (b > ws)
			ws = b;
	}
	return ws;
}

/* What the backend's query q answers for this layer at the net's batch */
static int backend_says(const cdp_layer *l, const cdp_net *net,
                        int (*q)(cdp_backend *, const cdp_conv_desc *))
{
	cdp_conv_desc d = desc(l, net->n);

	return q(net->be, &d);
}

/* The backend reads the stash's copy of the input as it is */
static int stash_direct(const cdp_layer *l, const cdp_net *net)
{
	return backend_says(l, net, net->be->conv_takes_xh);
}

/* No fp32 output where its readers all take the copy (a batchnorm reads
 * it as it is: CDP_STASH_EXACT, the values themselves): where the backend
 * writes y as bf16 (conv_writes_yh), and without an activation of its own
 * (whose backward would read y) */
static int stash_alone(const cdp_layer *l, const cdp_net *net)
{
	return !l->act && backend_says(l, net, net->be->conv_writes_yh);
}

static int takes_split(const cdp_layer *l, const cdp_net *net)
{
	return backend_says(l, net, net->be->conv_takes_split);
}

/* The forward's x; NULL where the input is a virtual concat (net.h,
 * virt), whose inputs then go to d as its segments */
static const void *fwd_x(const cdp_layer *l, const cdp_net *net, cdp_conv_desc *d)
{
	const cdp_layer *v = l->from[0] >= 0 ? &net->layers[l->from[0]] : NULL;

	if (!v || !v->virt)
		return cdp_layer_x(net, l, 0);
	d->nseg = v->nfrom;
	for (int j = 0; j < v->nfrom; j++) {
		d->seg[j] = cdp_layer_x(net, v, j);
		d->segc[j] = v->in[j].c;
	}
	return NULL;
}

/* The forward (y) or the filter gradient (dw, dbias) of the samples
 * [n0, n0 + d->n), x theirs */
static void conv_op(cdp_layer *l, cdp_net *net, const cdp_conv_desc *d, const void *x, int n0,
                    int filter)
{
	cdp_backend *be = net->be;
	const float *bias = l->bias ? net->params + l->b_off : NULL;
	size_t fper = (size_t)n0 * cdp_shape_numel(l->out);

	if (filter) {
		/* dy as bf16 (cdp_layer_grad_h: d->dyh) */
		const void *dy = d->dyh ? (const void *)((const uint16_t *)l->dy + fper)
		                        : (const void *)(l->dy + fper);
		be->conv_bwd_filter(be, d, x, dy, net->grads + l->w_off,
		                    l->bias ? net->grads + l->b_off : NULL, net->ws);
	} else if (!l->y) {      /* its bf16 copy alone (stash_alone) */
		cdp_conv_desc dh = *d;
		dh.yh = 1;
		be->conv_fwd(be, &dh, x, net->params + l->w_off, bias, l->yh + fper, net->ws);
	} else {
		be->conv_fwd(be, d, x, net->params + l->w_off, bias, l->y + fper, net->ws);
	}
}

/* conv_op on the whole batch, x its input: in fp32; or only as the
 * stash's bf16 copy (net_plan.c), which the backend reads as it is where it
 * says so (conv_takes_xh), else g samples at a time widened into
 * net->wide (dw and dbias then summed group by group); dyh: the filter
 * gradient's dy is bf16 (cdp_layer_grad_h) */
static void conv_in(cdp_layer *l, cdp_net *net, int filter, int dyh)
{
	cdp_backend *be = net->be;
	cdp_conv_desc d = desc(l, net->n);
	const uint16_t *xh = cdp_layer_xh(net, l, 0);
	int g = cdp_net_stash_group(net, l);
	size_t per = cdp_shape_numel(l->in[0]);

	d.dyh = dyh;
	if (!xh) {
		conv_op(l, net, &d, filter ? cdp_layer_x(net, l, 0) : fwd_x(l, net, &d), 0, filter);
		return;
	}
	if (be->conv_takes_xh(be, &d)) {
		d.xh = 1;
		conv_op(l, net, &d, xh, 0, filter);
		return;
	}
	for (int n0 = 0; n0 < net->n; n0 += g) {
		int cnt = net->n - n0 < g ? net->n - n0 : g;
		cdp_conv_desc dg = desc(l, cnt);
		dg.dyh = dyh;
		be->from_bf16(be, xh + n0 * per, net->wide, (size_t)cnt * per);
		conv_op(l, net, &dg, net->wide, n0, filter);
	}
}

static void init(cdp_layer *l, cdp_net *net, uint64_t seed)
{
	cdp_layer_he_init(l, net, seed, (size_t)l->in[0].c * l->k * l->k);
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	cdp_conv_desc d = desc(l, net->n);

	/* fused with the eval-mode bn after it (net.h, fuse): its output */
	if (l->fuse && !net->train && l->fuse - 1 <= net->out_layer) {
		cdp_layer *b = &net->layers[l->fuse - 1];
		const float *rm = net->buffers + b->buf_off;
		cdp_bn_infer bn = { net->params + b->w_off, net->params + b->b_off, rm,
		                    rm + b->out.c, b->eps, b->slope, b->act };

		be->conv_fwd_bn(be, &d, fwd_x(l, net, &d), net->params + l->w_off,
		                l->bias ? net->params + l->b_off : NULL, &bn,
		                b->y_fwd ? b->y_fwd : b->y, net->ws);
		return;
	}
	conv_in(l, net, 0, 0);
	if (l->act)
		be->act_fwd(be, l->act, l->slope, l->y, l->y, cdp_layer_out_count(l, net));
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	cdp_conv_desc d = desc(l, net->n);
	float *dx = cdp_layer_dx(net, l, 0);

	/* dy becomes the gradient before the activation, in place */
	if (l->act)
		be->act_bwd(be, l->act, l->slope, l->y, l->dy, l->dy, 0.0f,
		            cdp_layer_out_count(l, net));
	/* the gradients in bf16 where the net has them so (net_plan.c) */
	d.dyh = cdp_layer_grad_h(net, l->index);
	d.dxh = cdp_layer_grad_h(net, l->from[0]);
	if (!l->frozen)
		conv_in(l, net, 1, d.dyh);
	if (dx)
		be->conv_bwd_data(be, &d, l->dy, net->params + l->w_off, dx, l->in_beta[0], net->ws);
}

/* The bf16 gradients (net_plan.c): dy where the backend reads it so in both
 * ops, without an activation of its own (act_bwd reads float); dx where
 * the data gradient writes it so */
static int dy_h(const cdp_layer *l, const cdp_net *net)
{
	return !l->act && backend_says(l, net, net->be->conv_takes_dyh);
}

static int dx_h(const cdp_layer *l, const cdp_net *net)
{
	return backend_says(l, net, net->be->conv_writes_dxh);
}

const cdp_layer_ops cdp_layer_conv = {
	.type = "conv", .make = make, .workspace = workspace, .init = init,
	.forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_X | CDP_BWD_Y_ACT,
	.stash_io = CDP_STASH_IN_FWD | CDP_STASH_IN_BWD | CDP_STASH_EXACT,
	.stash_direct = stash_direct, .stash_alone = stash_alone, .takes_split = takes_split,
	.dy_h = dy_h, .dx_h = dx_h,
};
