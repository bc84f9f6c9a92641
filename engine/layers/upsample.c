/* upsample.c: the x2 upsampling layer, PyTorch's Upsample(scale_factor=2)
 * in mode 'nearest' or 'bilinear' (align_corners=False).
 *
 * [upsample]
 *   mode=nearest|bilinear   (default nearest)
 * Input (C,H,W) -> output (C,2H,2W). No parameters.
 */
#include <stdio.h>
#include <string.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	const char *m = cdp_cfg_str((cdp_cfg_section *)s, "mode", "nearest");

	if (cdp_layer_one_input(l, err, cap) < 0)
		return -1;
	if (strcmp(m, "nearest") == 0)
		l->mode = CDP_UP_NEAREST;
	else if (strcmp(m, "bilinear") == 0)
		l->mode = CDP_UP_BILINEAR;
	else {
		snprintf(err, cap, "mode '%.32s' is not nearest or bilinear", m);
		return -1;
	}
	if (l->in[0].h > (1 << 24) || l->in[0].w > (1 << 24)) {
		snprintf(err, cap, "input (%d,%d,%d) is too large", l->in[0].c, l->in[0].h, l->in[0].w);
		return -1;
	}
	l->out = (cdp_shape){ l->in[0].c, 2 * l->in[0].h, 2 * l->in[0].w };
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->upsample_fwd(net->be, l->mode, net->n, l->in[0].c, l->in[0].h, l->in[0].w,
	                      cdp_layer_x(net, l, 0), l->y);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	float *dx = cdp_layer_dx(net, l, 0);
	if (dx)
		net->be->upsample_bwd(net->be, l->mode, net->n, l->in[0].c, l->in[0].h,
		                      l->in[0].w, l->dy, dx, l->in_beta[0]);
}

const cdp_layer_ops cdp_layer_upsample = {
	.type = "upsample", .make = make, .forward = forward, .backward = backward,
};
