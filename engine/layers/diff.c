/* diff.c: the difference of two inputs, a - b or |a - b| (the fusion of a
 * siamese pair of features, FC-Siam-diff).
 *
 * [diff]
 *   from=A,B   two inputs of the same shape (required)
 *   abs=0|1    1: |A - B| (default 0: A - B)
 * Inputs (C,H,W) each -> output (C,H,W). No parameters. l->k holds abs.
 * Backward: dA = s dy, dB = -s dy, s = 1, or with abs=1 the sign of A - B
 * (0 where A == B, as torch.abs's gradient), so it reads both inputs.
 */
#include <stdio.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (l->nfrom != 2) {
		snprintf(err, cap, "needs two inputs in from=, not %d", l->nfrom);
		return -1;
	}
	if (l->in[1].c != l->in[0].c || l->in[1].h != l->in[0].h || l->in[1].w != l->in[0].w) {
		snprintf(err, cap, "shapes (%d,%d,%d) and (%d,%d,%d) differ", l->in[0].c, l->in[0].h,
		         l->in[0].w, l->in[1].c, l->in[1].h, l->in[1].w);
		return -1;
	}
	if (cdp_lopt_int(net, s, "abs", 0, 0, 1, &l->k, err, cap) < 0)
		return -1;
	l->out = l->in[0];
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->diff_fwd(net->be, l->k, cdp_layer_x(net, l, 0), cdp_layer_x(net, l, 1), l->y,
	                  cdp_layer_out_count(l, net));
}

/* from=A,A: A's gradient is written, then the opposite added (0) */
static void backward(cdp_layer *l, cdp_net *net)
{
	size_t n = cdp_layer_out_count(l, net);

	for (int j = 0; j < 2; j++) {
		float *dx = cdp_layer_dx(net, l, j);
		if (dx)
			net->be->diff_bwd(net->be, l->k, cdp_layer_x(net, l, 0), cdp_layer_x(net, l, 1),
			                  l->dy, j ? -1.0f : 1.0f, dx, l->in_beta[j], n);
	}
}

const cdp_layer_ops cdp_layer_diff = {
	.type = "diff", .make = make, .forward = forward, .backward = backward,
};
