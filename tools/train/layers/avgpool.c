/* avgpool.c: the average pooling layer, PyTorch's AvgPool2d with count_include_pad=True
 * (padding counts as zeros in the mean).
 *
 * [avgpool]
 *   size=K           square window (default 2)
 *   stride=S         (default K)
 *   pad=P            on each side, at most K/2 (default 0)
 * Input (C,H,W) -> output (C,OH,OW), OH = (H + 2P - K)/S + 1 (floor, as
 * PyTorch's ceil_mode=False). No parameters.
 */
#include <stdio.h>
#include <stdlib.h>
#include "layers.h"

static cdp_pool_desc desc(const cdp_layer *l, int n)
{
	cdp_pool_desc d = { .n = n, .c = l->in[0].c, .h = l->in[0].h, .w = l->in[0].w,
	                    .k = l->k, .stride = l->stride, .pad = l->pad };
	cdp_pool_desc_init(&d);
	return d;
}

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	cdp_pool_desc d;

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "size", 2, 1, 1 << 10, &l->k, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "stride", l->k, 1, 1 << 10, &l->stride, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "pad", 0, 0, l->k / 2, &l->pad, err, cap) < 0)
		return -1;
	d = desc(l, 1);
	if (cdp_pool_desc_init(&d) < 0) {
		snprintf(err, cap, "input (%d,%d,%d) is smaller than the window %d (pad %d)",
		         l->in[0].c, l->in[0].h, l->in[0].w, l->k, l->pad);
		return -1;
	}
	l->out = (cdp_shape){ l->in[0].c, d.oh, d.ow };
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = desc(l, net->n);
	net->be->avgpool_fwd(net->be, &d, cdp_layer_x(net, l, 0), l->y);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = desc(l, net->n);
	float *dx = cdp_layer_dx(net, l, 0);
	if (dx)
		net->be->avgpool_bwd(net->be, &d, l->dy, dx, l->in_beta[0]);
}

const cdp_layer_ops cdp_layer_avgpool = {
	.type = "avgpool", .make = make,
	.forward = forward, .backward = backward,
};
