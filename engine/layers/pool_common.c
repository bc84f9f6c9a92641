/* pool_common.c: what the max and average pooling layers share: their cfg
 * options and shape check, and their descriptor.
 *
 *   size=K           square window (default 2)
 *   stride=S         (default K)
 *   pad=P            on each side, at most K/2 (default 0)
 * Input (C,H,W) -> output (C,OH,OW), OH = (H + 2P - K)/S + 1 (floor, as
 * PyTorch's ceil_mode=False).
 */
#include <stdio.h>
#include "layers.h"

cdp_pool_desc cdp_pool_layer_desc(const cdp_layer *l, int n)
{
	cdp_pool_desc d = { .n = n, .c = l->in[0].c, .h = l->in[0].h, .w = l->in[0].w,
	                    .k = l->k, .stride = l->stride, .pad = l->pad };
	cdp_pool_desc_init(&d);
	return d;
}

int cdp_pool_layer_make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err,
                        size_t cap)
{
	cdp_pool_desc d;

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "size", 2, 1, 1 << 10, &l->k, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "stride", l->k, 1, 1 << 10, &l->stride, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "pad", 0, 0, l->k / 2, &l->pad, err, cap) < 0)
		return -1;
	d = cdp_pool_layer_desc(l, 1);
	if (cdp_pool_desc_init(&d) < 0) {
		snprintf(err, cap, "input (%d,%d,%d) is smaller than the window %d (pad %d)",
		         l->in[0].c, l->in[0].h, l->in[0].w, l->k, l->pad);
		return -1;
	}
	l->out = (cdp_shape){ l->in[0].c, d.oh, d.ow };
	return 0;
}
