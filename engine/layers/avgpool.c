/* avgpool.c: the average pooling layer, PyTorch's AvgPool2d with count_include_pad=True
 * (padding counts as zeros in the mean).
 *
 * [avgpool]
 *   size=K, stride=S, pad=P as in pool_common.c (defaults 2, K, 0)
 * Input (C,H,W) -> output (C,OH,OW). No parameters.
 */
#include <stdio.h>
#include <stdlib.h>
#include "layers.h"


static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = cdp_pool_layer_desc(l, net->n);
	net->be->avgpool_fwd(net->be, &d, cdp_layer_x(net, l, 0), l->y);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = cdp_pool_layer_desc(l, net->n);
	float *dx = cdp_layer_dx(net, l, 0);
	if (dx)
		net->be->avgpool_bwd(net->be, &d, l->dy, dx, l->in_beta[0]);
}

const cdp_layer_ops cdp_layer_avgpool = {
	.type = "avgpool", .make = cdp_pool_layer_make,
	.forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE,
};
