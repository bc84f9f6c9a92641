/* add.c: the elementwise sum layer (residual connections).
 *
 * [add]
 *   from=A,B[,...]   two to eight inputs of the same shape (required)
 * Inputs (C,H,W) each -> output (C,H,W). No parameters.
 */
#include <stdio.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (l->nfrom < 2) {
		snprintf(err, cap, "needs at least two inputs in from=");
		return -1;
	}
	for (int j = 1; j < l->nfrom; j++)
		if (l->in[j].c != l->in[0].c || l->in[j].h != l->in[0].h || l->in[j].w != l->in[0].w) {
			snprintf(err, cap, "shapes (%d,%d,%d) and (%d,%d,%d) differ",
			         l->in[0].c, l->in[0].h, l->in[0].w, l->in[j].c, l->in[j].h, l->in[j].w);
			return -1;
		}
	l->out = l->in[0];
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	size_t n = cdp_layer_out_count(l, net);

	net->be->add(net->be, cdp_layer_x(net, l, 0), cdp_layer_x(net, l, 1), l->y, n);
	for (int j = 2; j < l->nfrom; j++)
		net->be->axpy(net->be, 1.0f, cdp_layer_x(net, l, j), l->y, n);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	size_t n = cdp_layer_out_count(l, net);

	for (int j = 0; j < l->nfrom; j++) {
		float *dx = cdp_layer_dx(net, l, j);
		if (!dx || dx == l->dy)
			continue;       /* none wanted, or it shares our buffer */
		if (l->in_beta[j] == 0.0f)
			net->be->copy(net->be, dx, l->dy, n * sizeof(float));
		else
			net->be->axpy(net->be, 1.0f, l->dy, dx, n);
	}
}

const cdp_layer_ops cdp_layer_add = {
	.type = "add", .make = make, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_NONE, .dy_through = 1,
};
