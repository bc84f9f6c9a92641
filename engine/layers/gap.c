/* gap.c: the global average pooling layer, PyTorch's AdaptiveAvgPool2d(1).
 *
 * [gap]              no options
 * Input (C,H,W) -> output (C,1,1). No parameters.
 */
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (cdp_layer_one_input(l, err, cap) < 0)
		return -1;
	l->out = (cdp_shape){ l->in[0].c, 1, 1 };
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->gap_fwd(net->be, net->n, l->in[0].c, l->in[0].h * l->in[0].w,
	                 cdp_layer_x(net, l, 0), l->y);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	float *dx = cdp_layer_dx(net, l, 0);
	if (dx)
		net->be->gap_bwd(net->be, net->n, l->in[0].c, l->in[0].h * l->in[0].w, l->dy,
		                 dx, l->in_beta[0]);
}

const cdp_layer_ops cdp_layer_gap = {
	.type = "gap", .make = make, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE,
};
