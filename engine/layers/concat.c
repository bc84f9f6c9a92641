/* concat.c: the channel concatenation layer, torch.cat(dim=1).
 *
 * [concat]
 *   from=A,B[,...]   two to eight inputs of the same H and W (required)
 * Inputs (C1,H,W), (C2,H,W), ... -> output (C1+C2+...,H,W), in from= order.
 * No parameters.
 */
#include <stdint.h>
#include <stdio.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	int c = 0;

	if (l->nfrom < 2) {
		snprintf(err, cap, "needs at least two inputs in from=");
		return -1;
	}
	for (int j = 0; j < l->nfrom; j++) {
		if (l->in[j].h != l->in[0].h || l->in[j].w != l->in[0].w) {
			snprintf(err, cap, "shapes (%d,%d,%d) and (%d,%d,%d) differ in height or width",
			         l->in[0].c, l->in[0].h, l->in[0].w, l->in[j].c, l->in[j].h, l->in[j].w);
			return -1;
		}
		c += l->in[j].c;
	}
	l->out = (cdp_shape){ c, l->in[0].h, l->in[0].w };
	return 0;
}

/* The stash's bf16-only output (net_plan.c: every reader takes the copy): each
 * input's sample rows rounded into yh, or copied from the input's copy */
static void forward_h(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	size_t hw = (size_t)l->out.h * l->out.w, off = 0;

	for (int j = 0; j < l->nfrom; j++) {
		const float *x = cdp_layer_x(net, l, j);
		const uint16_t *xh = cdp_layer_xh(net, l, j);
		size_t c = (size_t)l->in[j].c;
		for (int i = 0; i < net->n; i++) {
			uint16_t *dst = l->yh + ((size_t)i * l->out.c + off) * hw;
			if (x)
				be->to_bf16(be, x + i * c * hw, dst, c * hw);
			else
				be->copy(be, dst, xh + i * c * hw, c * hw * sizeof *dst);
		}
		off += c;
	}
}

static void forward(cdp_layer *l, cdp_net *net)
{
	int hw = l->out.h * l->out.w, off = 0;

	if (l->virt)
		return;         /* its readers read its inputs (net.h) */
	if (!l->y) {
		forward_h(l, net);
		return;
	}

	for (int j = 0; j < l->nfrom; j++) {
		net->be->chan_copy(net->be, net->n, l->in[j].c, hw, cdp_layer_x(net, l, j),
		                   l->y, l->out.c, off, 0.0f);
		off += l->in[j].c;
	}
}

static void backward(cdp_layer *l, cdp_net *net)
{
	int hw = l->out.h * l->out.w, off = 0;

	for (int j = 0; j < l->nfrom; j++) {
		float *dx = cdp_layer_dx(net, l, j);
		if (dx)
			net->be->chan_slice(net->be, net->n, l->in[j].c, hw, l->dy, l->out.c, off,
			                    dx, l->in_beta[j]);
		off += l->in[j].c;
	}
}

const cdp_layer_ops cdp_layer_concat = {
	.type = "concat", .make = make, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE,
	.stash_io = CDP_STASH_OUT,
};
