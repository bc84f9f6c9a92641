/* bn.c: the batch normalisation layer, PyTorch's BatchNorm2d (affine,
 * tracking running statistics), with an optional fused activation.
 *
 * [bn]
 *   momentum=M       running-statistics momentum (default 0.1)
 *   eps=E            (default 1e-5)
 *   activation=linear|relu|leaky, slope=A for leaky (default linear)
 * Input (C,H,W) -> output (C,H,W). Parameters: gamma (C), then beta (C).
 * Buffers: running mean (C), then running variance (C, unbiased).
 * Training mode normalises with the batch statistics (biased variance) and
 * updates the running ones; eval mode uses the running ones. Backward is
 * that of training mode: it uses the batch mean and 1/std saved by the last
 * training-mode forward. A frozen layer (net.h, cdp_net_freeze) is
 * torchvision's FrozenBatchNorm2d: eval mode in training too, running
 * statistics untouched, no gamma/beta gradient, and the input gradient of
 * the eval-mode affine map, dx = dy' gamma / sqrt(running_var + eps) (dy'
 * the gradient before the activation), computed by bn_fwd_infer on dy' with
 * zero mean and beta. The activation runs inside the backend's bn ops
 * (bn_fwd_train, bn_fwd_infer, bn_bwd), in the same pass over the data.
 */
#include <stdio.h>
#include <stdlib.h>
#include "layers.h"

/* save: mean (C), invstd (C); zero: 2C zeros (the frozen backward's mean, beta) */
typedef struct bn_state { float *save, *zero; } bn_state;

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_float(net, s, "momentum", 0.1f, 0.0f, 1.0f, &l->momentum, err, cap) < 0 ||
	    cdp_lopt_float(net, s, "eps", 1e-5f, 1e-12f, 1.0f, &l->eps, err, cap) < 0 ||
	    cdp_lopt_act(net, s, l, err, cap) < 0)
		return -1;
	l->out = l->in[0];
	l->w_len = l->b_len = (size_t)l->out.c;
	l->w_off = cdp_net_param(net, l->w_len);
	l->b_off = cdp_net_param(net, l->b_len);
	l->buf_len = 2 * (size_t)l->out.c;
	l->buf_off = cdp_net_buffer(net, l->buf_len);
	return 0;
}

/* Without an input gradient (bn on the net input) dx goes to scratch; a
 * frozen layer adding to its input's gradient stages its own there. */
static size_t workspace(cdp_layer *l, cdp_net *net)
{
	return l->from[0] < 0 || l->frozen ? (size_t)net->n * cdp_shape_numel(l->in[0]) * sizeof(float) : 0;
}

static int alloc(cdp_layer *l, cdp_net *net)
{
	bn_state *st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	l->state = st;
	st->save = net->be->alloc(net->be, 2 * (size_t)l->out.c * sizeof(float));
	st->zero = net->be->alloc(net->be, 2 * (size_t)l->out.c * sizeof(float));
	return st->save && st->zero ? 0 : -1;
}

static void lfree(cdp_layer *l, cdp_net *net)
{
	bn_state *st = l->state;
	if (st) {
		net->be->free(net->be, st->save);
		net->be->free(net->be, st->zero);
	}
	free(st);
	l->state = NULL;
}

static void init(cdp_layer *l, cdp_net *net, uint64_t seed)
{
	cdp_backend *be = net->be;
	be->fill(be, net->params + l->w_off, 1.0f, l->w_len);
	be->fill(be, net->params + l->b_off, 0.0f, l->b_len);
	be->fill(be, net->buffers + l->buf_off, 0.0f, (size_t)l->out.c);
	be->fill(be, net->buffers + l->buf_off + l->out.c, 1.0f, (size_t)l->out.c);
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	float *rm = net->buffers + l->buf_off, *rv = rm + c;

	if (net->train && !l->frozen)
		be->bn_fwd_train(be, net->n, c, hw, cdp_layer_x(net, l, 0), net->params + l->w_off,
		                 net->params + l->b_off, l->y, rm, rv, l->momentum, l->eps,
		                 st->save, st->save + c, l->act, l->slope);
	else
		be->bn_fwd_infer(be, net->n, c, hw, cdp_layer_x(net, l, 0), net->params + l->w_off,
		                 net->params + l->b_off, l->y, rm, rv, l->eps, l->act, l->slope);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	float *dx = cdp_layer_dx(net, l, 0), beta = l->in_beta[0];

	if (l->frozen) {
		size_t count = cdp_layer_out_count(l, net);
		float *t;
		if (l->act)
			be->act_bwd(be, l->act, l->slope, l->y, l->dy, l->dy, 0.0f, count);
		if (!dx)
			return;
		t = beta == 0.0f ? dx : net->ws;
		be->bn_fwd_infer(be, net->n, c, hw, l->dy, net->params + l->w_off, st->zero, t,
		                 st->zero + c, net->buffers + l->buf_off + c, l->eps, 0, 0.0f);
		if (t != dx)
			be->axpy(be, 1.0f, t, dx, count);
		return;
	}
	if (!dx) {
		dx = net->ws;
		beta = 0.0f;
	}
	/* the backend may leave the gradient before the activation in dy */
	be->bn_bwd(be, net->n, c, hw, cdp_layer_x(net, l, 0), l->y, l->dy,
	           net->params + l->w_off, net->params + l->b_off, st->save, st->save + c,
	           l->eps, l->act, l->slope, dx, beta, net->grads + l->w_off, net->grads + l->b_off);
}

const cdp_layer_ops cdp_layer_bn = {
	.type = "bn", .make = make, .workspace = workspace, .alloc = alloc, .init = init,
	.forward = forward, .backward = backward, .free = lfree,
};
