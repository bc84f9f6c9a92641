/* deconv.c: the transposed convolution layer, PyTorch's ConvTranspose2d
 * (output_padding 0, dilation 1) with an optional fused activation; the
 * U-Net's learned x2 upsampling with the defaults.
 *
 * [deconv]
 *   filters=F        output channels (required)
 *   size=K           square kernel (default 2)
 *   stride=S         (default 2)
 *   pad=P            (default 0)
 *   bias=0|1         (default 1)
 *   activation=linear|relu|leaky, slope=A for leaky (default linear)
 * Input (C,H,W) -> output (F,OH,OW), OH = (H-1)S - 2P + K.
 * Parameters: weight (C,F,K,K) as PyTorch's, then bias (F).
 * He init with PyTorch's fan_in for this weight, F*K*K (what
 * nn.init.kaiming_normal_ computes from its dimension 1), so a PyTorch model
 * initialised that way draws from the same distribution.
 *
 * A transposed convolution is the data gradient of the convolution that maps
 * the output shape back to the input shape, with the same weight (as that
 * conv's (F_conv=C, C_conv=F, K, K) filter), so the backend's conv ops do
 * all the work:
 *   forward   y  = conv_bwd_data(x)       (+ bias)
 *   data      dx = conv_fwd(dy)
 *   filter    dw += conv_bwd_filter(x_conv = dy, dy_conv = x)
 */
#include <stdio.h>
#include "layers.h"

static cdp_conv_desc desc(const cdp_layer *l, int n)
{
	cdp_conv_desc d = { .n = n, .c = l->out.c, .h = l->out.h, .w = l->out.w,
	                    .f = l->in[0].c, .kh = l->k, .kw = l->k, .stride = l->stride,
	                    .pad = l->pad, .dil = 1 };
	cdp_conv_desc_init(&d);
	return d;
}

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	cdp_conv_desc d;
	long oh, ow;

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "filters", 0, 1, 1 << 16, &l->filters, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "size", 2, 1, 1 << 10, &l->k, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "stride", 2, 1, 1 << 10, &l->stride, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "pad", 0, 0, 1 << 10, &l->pad, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "bias", 1, 0, 1, &l->bias, err, cap) < 0 ||
	    cdp_lopt_act(net, s, l, err, cap) < 0)
		return -1;
	if (l->filters == 0) {
		snprintf(err, cap, "filters= is required");
		return -1;
	}
	l->dil = 1;
	oh = (long)(l->in[0].h - 1) * l->stride - 2L * l->pad + l->k;
	ow = (long)(l->in[0].w - 1) * l->stride - 2L * l->pad + l->k;
	if (oh < 1 || ow < 1 || oh > (1L << 24) || ow > (1L << 24)) {
		snprintf(err, cap, "output size %ldx%ld from input (%d,%d,%d) is not valid",
		         oh, ow, l->in[0].c, l->in[0].h, l->in[0].w);
		return -1;
	}
	l->out = (cdp_shape){ l->filters, (int)oh, (int)ow };
	d = desc(l, 1);
	if (cdp_conv_desc_init(&d) < 0 || d.oh != l->in[0].h || d.ow != l->in[0].w) {
		snprintf(err, cap, "pad %d is too large for kernel %d", l->pad, l->k);
		return -1;
	}
	l->w_len = (size_t)l->in[0].c * l->filters * l->k * l->k;
	l->w_off = cdp_net_param(net, l->w_len);
	l->b_len = l->bias ? (size_t)l->filters : 0;
	l->b_off = l->bias ? cdp_net_param(net, l->b_len) : 0;
	return 0;
}

/* The conv workspace, then room for dx when it must be accumulated. */
static size_t tmp_offset(size_t conv_ws) { return (conv_ws + 63) / 64 * 64; }

static size_t workspace(cdp_layer *l, cdp_net *net)
{
	cdp_conv_desc d = desc(l, net->n);
	size_t ws = net->be->conv_workspace(net->be, &d);
	return tmp_offset(ws) + (size_t)net->n * cdp_shape_numel(l->in[0]) * sizeof(float);
}

static void init(cdp_layer *l, cdp_net *net, uint64_t seed)
{
	cdp_layer_he_init(l, net, seed, (size_t)l->filters * l->k * l->k);
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	cdp_conv_desc d = desc(l, net->n);
	size_t count = cdp_layer_out_count(l, net);

	be->conv_bwd_data(be, &d, cdp_layer_x(net, l, 0), net->params + l->w_off, l->y,
	                  0.0f, net->ws);
	if (l->bias)
		be->bias_add(be, net->n, l->out.c, l->out.h * l->out.w, net->params + l->b_off, l->y);
	if (l->act)
		be->act_fwd(be, l->act, l->slope, l->y, l->y, count);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	cdp_conv_desc d = desc(l, net->n);
	float *dx = cdp_layer_dx(net, l, 0);

	if (l->act)
		be->act_bwd(be, l->act, l->slope, l->y, l->dy, l->dy, 0.0f,
		            cdp_layer_out_count(l, net));
	if (l->bias && !l->frozen)
		be->bias_grad(be, net->n, l->out.c, l->out.h * l->out.w, l->dy,
		              net->grads + l->b_off);
	if (!l->frozen)
		be->conv_bwd_filter(be, &d, l->dy, cdp_layer_x(net, l, 0), net->grads + l->w_off,
		                    NULL, net->ws);
	if (!dx)
		return;
	if (l->in_beta[0] == 0.0f) {
		be->conv_fwd(be, &d, l->dy, net->params + l->w_off, NULL, dx, net->ws);
	} else {
		float *tmp = (float *)((char *)net->ws + tmp_offset(be->conv_workspace(be, &d)));
		be->conv_fwd(be, &d, l->dy, net->params + l->w_off, NULL, tmp, net->ws);
		be->axpy(be, 1.0f, tmp, dx, (size_t)net->n * cdp_shape_numel(l->in[0]));
	}
}

const cdp_layer_ops cdp_layer_deconv = {
	.type = "deconv", .make = make, .workspace = workspace, .init = init,
	.forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_X | CDP_BWD_Y_ACT,
};
