/* slice.c: a range of its input's channels, x[:, start:end] in PyTorch.
 *
 * [slice]
 *   start=A   first channel taken, from 0 (default 0)
 *   end=B     one past the last (default: the input's channels)
 * Input (C,H,W) -> output (B-A,H,W), 0 <= A < B <= C. No parameters.
 * It splits stacked inputs, such as the dates of cdp-tile --time (date d
 * of B bands is start=d*B, end=(d+1)*B), for a siamese encoder
 * (weights=, cdp-model(5)). l->k holds A.
 */
#include <stdio.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	int c = l->in[0].c, end;

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "start", 0, 0, c - 1, &l->k, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "end", c, 1, c, &end, err, cap) < 0)
		return -1;
	if (end <= l->k) {
		snprintf(err, cap, "end=%d must be above start=%d", end, l->k);
		return -1;
	}
	l->out = (cdp_shape){ end - l->k, l->in[0].h, l->in[0].w };
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->chan_slice(net->be, net->n, l->out.c, l->out.h * l->out.w, cdp_layer_x(net, l, 0),
	                    l->in[0].c, l->k, l->y, 0.0f);
}

/* dx's other channels get no gradient: zeros when this layer writes dx
 * first, else what earlier writers left */
static void backward(cdp_layer *l, cdp_net *net)
{
	float *dx = cdp_layer_dx(net, l, 0);

	if (!dx)
		return;
	if (l->in_beta[0] == 0.0f && l->out.c < l->in[0].c)
		net->be->fill(net->be, dx, 0.0f, (size_t)net->n * cdp_shape_numel(l->in[0]));
	net->be->chan_copy(net->be, net->n, l->out.c, l->out.h * l->out.w, l->dy, dx, l->in[0].c,
	                   l->k, l->out.c < l->in[0].c ? 1.0f : l->in_beta[0]);
}

const cdp_layer_ops cdp_layer_slice = {
	.type = "slice", .make = make, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE,
};
