/* act.c: the activation layers, which differ only in their options:
 *
 * [relu]            PyTorch's ReLU, y = max(x, 0); no options
 * [leaky]           PyTorch's LeakyReLU, y = x > 0 ? x : A x
 *   slope=A          negative slope (default 0.01, PyTorch's)
 * Input (C,H,W) -> output (C,H,W); no parameters. Backward takes the
 * mask from the output (y > 0 exactly when x > 0).
 */
#include "layers.h"

static int make_relu(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (cdp_layer_one_input(l, err, cap) < 0)
		return -1;
	l->act = CDP_ACT_RELU;
	l->out = l->in[0];
	return 0;
}

static int make_leaky(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (cdp_layer_one_input(l, err, cap) < 0)
		return -1;
	if (cdp_lopt_float(net, s, "slope", 0.01f, 0.0f, 1.0f, &l->slope, err, cap) < 0)
		return -1;
	l->act = CDP_ACT_LEAKY;
	l->out = l->in[0];
	return 0;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	net->be->act_fwd(net->be, l->act, l->slope, cdp_layer_x(net, l, 0), l->y,
	                 cdp_layer_out_count(l, net));
}

static void backward(cdp_layer *l, cdp_net *net)
{
	float *dx = cdp_layer_dx(net, l, 0);
	if (dx)
		net->be->act_bwd(net->be, l->act, l->slope, l->y, l->dy, dx, l->in_beta[0],
		                 cdp_layer_out_count(l, net));
}

const cdp_layer_ops cdp_layer_relu = {
	.type = "relu", .make = make_relu, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_Y,
};

const cdp_layer_ops cdp_layer_leaky = {
	.type = "leaky", .make = make_leaky, .forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_Y,
};
