/* dense.c: the fully connected layer, PyTorch's Linear on the flattened
 * input, with an optional fused activation.
 *
 * [dense]
 *   output=OUT       output features (required)
 *   bias=0|1         (default 1)
 *   activation=linear|relu|leaky, slope=A for leaky (default linear)
 * Input (C,H,W), flattened to IN = C*H*W in NCHW order -> output (OUT,1,1).
 * Parameters: weight (OUT,IN), then bias (OUT). He init, fan_in = IN.
 *   y (N,OUT) = x (N,IN) W^T + b
 */
#include <stdio.h>
#include "layers.h"

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	size_t in = cdp_shape_numel(l->in[0]);

	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "output", 0, 1, 1 << 24, &l->filters, err, cap) < 0 ||
	    cdp_lopt_int(net, s, "bias", 1, 0, 1, &l->bias, err, cap) < 0 ||
	    cdp_lopt_act(net, s, l, err, cap) < 0)
		return -1;
	if (l->filters == 0) {
		snprintf(err, cap, "output= is required");
		return -1;
	}
	if (in > (1u << 30)) {
		snprintf(err, cap, "input (%d,%d,%d) is too large to flatten", l->in[0].c,
		         l->in[0].h, l->in[0].w);
		return -1;
	}
	l->out = (cdp_shape){ l->filters, 1, 1 };
	l->w_len = (size_t)l->filters * in;
	l->w_off = cdp_net_param(net, l->w_len);
	l->b_len = l->bias ? (size_t)l->filters : 0;
	l->b_off = l->bias ? cdp_net_param(net, l->b_len) : 0;
	return 0;
}

static void init(cdp_layer *l, cdp_net *net, uint64_t seed)
{
	cdp_layer_he_init(l, net, seed, cdp_shape_numel(l->in[0]));
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	int in = (int)cdp_shape_numel(l->in[0]), out = l->filters;

	be->gemm(be, 0, 1, net->n, out, in, 1.0f, cdp_layer_x(net, l, 0), in,
	         net->params + l->w_off, in, 0.0f, l->y, out);
	if (l->bias)
		be->bias_add(be, net->n, out, 1, net->params + l->b_off, l->y);
	if (l->act)
		be->act_fwd(be, l->act, l->slope, l->y, l->y, cdp_layer_out_count(l, net));
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	int in = (int)cdp_shape_numel(l->in[0]), out = l->filters;
	float *dx = cdp_layer_dx(net, l, 0);

	if (l->act)
		be->act_bwd(be, l->act, l->slope, l->y, l->dy, l->dy, 0.0f,
		            cdp_layer_out_count(l, net));
	/* dW (OUT,IN) += dy^T (OUT,N) x (N,IN) */
	if (!l->frozen)
		be->gemm(be, 1, 0, out, in, net->n, 1.0f, l->dy, out, cdp_layer_x(net, l, 0), in,
		         1.0f, net->grads + l->w_off, in);
	if (l->bias && !l->frozen)
		be->bias_grad(be, net->n, out, 1, l->dy, net->grads + l->b_off);
	/* dx (N,IN) (+)= dy (N,OUT) W (OUT,IN) */
	if (dx)
		be->gemm(be, 0, 0, net->n, in, out, 1.0f, l->dy, out, net->params + l->w_off, in,
		         l->in_beta[0], dx, in);
}

const cdp_layer_ops cdp_layer_dense = {
	.type = "dense", .make = make, .init = init, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_X | CDP_BWD_Y_ACT,
};
