/* upsample.c: the upsampling layer, PyTorch's F.interpolate in mode
 * 'nearest' or 'bilinear' (align_corners=False), by an integer factor
 * (scale_factor=F) or to the size of another layer (size=).
 *
 * [upsample]
 *   mode=nearest|bilinear   (default nearest)
 *   factor=F                (default 2) 1 to 64
 *   from=X,REF              a second input: the output takes REF's height
 *                           and width (at least X's) instead of F times X's;
 *                           REF's values are not read and it gets no
 *                           gradient. (1,1) -> (H,W) broadcasts the map,
 *                           DeepLabv3's image-pooling branch.
 * Input (C,H,W) -> output (C,F*H,F*W), or (C,REF.H,REF.W). No parameters.
 * The pixels and weights are backend.h's cdp_up_nearest / cdp_up_bilinear.
 */
#include <stdio.h>
#include <string.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	const char *m = cdp_cfg_str((cdp_cfg_section *)s, "mode", "nearest");
	cdp_shape in = l->in[0];
	int f;

	if (l->nfrom > 2) {
		snprintf(err, cap, "takes one input and a size reference, from= names %d", l->nfrom);
		return -1;
	}
	if (strcmp(m, "nearest") == 0)
		l->mode = CDP_UP_NEAREST;
	else if (strcmp(m, "bilinear") == 0)
		l->mode = CDP_UP_BILINEAR;
	else {
		snprintf(err, cap, "mode '%.32s' is not nearest or bilinear", m);
		return -1;
	}
	if (l->nfrom == 2) {
		if (cdp_cfg_str((cdp_cfg_section *)s, "factor", NULL)) {
			snprintf(err, cap, "factor= and a size reference in from= exclude each other");
			return -1;
		}
		if (l->in[1].h < in.h || l->in[1].w < in.w) {
			snprintf(err, cap, "the size reference (%d,%d,%d) is smaller than the input "
			         "(%d,%d,%d)", l->in[1].c, l->in[1].h, l->in[1].w, in.c, in.h, in.w);
			return -1;
		}
		l->k = 0;
		l->out = (cdp_shape){ in.c, l->in[1].h, l->in[1].w };
		return 0;
	}
	if (cdp_lopt_int(net, s, "factor", 2, 1, 64, &f, err, cap) < 0)
		return -1;
	if (in.h > (1 << 24) / f || in.w > (1 << 24) / f) {
		snprintf(err, cap, "input (%d,%d,%d) is too large", in.c, in.h, in.w);
		return -1;
	}
	l->k = f;
	l->out = (cdp_shape){ in.c, f * in.h, f * in.w };
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->upsample_fwd(net->be, l->mode, net->n, l->in[0].c, l->in[0].h, l->in[0].w,
	                      l->out.h, l->out.w, cdp_layer_x(net, l, 0), l->y);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	float *dx = cdp_layer_dx(net, l, 0);

	if (dx)
		net->be->upsample_bwd(net->be, l->mode, net->n, l->in[0].c, l->in[0].h,
		                      l->in[0].w, l->out.h, l->out.w, l->dy, dx, l->in_beta[0]);
	/* the size reference: nothing flows back, but a first writer owes zeros */
	if (l->nfrom == 2 && (dx = cdp_layer_dx(net, l, 1)) && l->in_beta[1] == 0.0f)
		net->be->fill(net->be, dx, 0.0f, (size_t)net->n * cdp_shape_numel(l->in[1]));
}

const cdp_layer_ops cdp_layer_upsample = {
	.type = "upsample", .make = make, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE,
};
