/* maxpool.c: the max pooling layer, PyTorch's MaxPool2d (padding counts as -inf; the
 * first maximum of a window wins ties).
 *
 * [maxpool]
 *   size=K, stride=S, pad=P as in pool_common.c (defaults 2, K, 0)
 * Input (C,H,W) -> output (C,OH,OW). No parameters.
 */
#include <stdio.h>
#include <stdlib.h>
#include "layers.h"


typedef struct pool_state { int32_t *idx; } pool_state;   /* (N,C,OH,OW) argmax */

static int alloc(cdp_layer *l, cdp_net *net)
{
	pool_state *st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	l->state = st;
	if (net->infer)        /* no backward: no argmax (maxpool_fwd's idx NULL) */
		return 0;
	st->idx = net->be->alloc(net->be, cdp_layer_out_count(l, net) * sizeof(int32_t));
	return st->idx ? 0 : -1;
}

static void lfree(cdp_layer *l, cdp_net *net)
{
	pool_state *st = l->state;
	if (st)
		net->be->free(net->be, st->idx);
	free(st);
	l->state = NULL;
}

int32_t *cdp_maxpool_idx(const cdp_layer *l)
{
	return ((pool_state *)l->state)->idx;
}

/* 1: the bn before it ran it with its own forward (net.h, pool_on) */
static int fused(const cdp_layer *l, const cdp_net *net)
{
	return l->pool_fuse && net->layers[l->pool_fuse - 1].pool_on;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = cdp_pool_layer_desc(l, net->n);

	if (!fused(l, net))
		net->be->maxpool_fwd(net->be, &d, cdp_layer_x(net, l, 0), l->y, cdp_maxpool_idx(l));
}

/* x and y only where the backend reads them (cuDNN); the CPU's argmax
 * index is all it needs, so in bf16 neither is widened for it */
static int needs_xy(const cdp_net *net)
{
	return net->be->maxpool_bwd_needs_xy(net->be);
}

static void backward(cdp_layer *l, cdp_net *net)
{
	cdp_pool_desc d = cdp_pool_layer_desc(l, net->n);
	float *dx = cdp_layer_dx(net, l, 0);
	int xy = needs_xy(net);

	if (dx && !fused(l, net))   /* else the bn's backward reads dy and idx */
		net->be->maxpool_bwd(net->be, &d, xy ? cdp_layer_x(net, l, 0) : NULL,
		                     xy ? l->y : NULL, l->dy, cdp_maxpool_idx(l), dx,
		                     l->in_beta[0]);
}

static unsigned bwd_reads_now(const cdp_layer *l, const cdp_net *net)
{
	(void)l;
	return needs_xy(net) ? CDP_BWD_X | CDP_BWD_Y : CDP_BWD_NONE;
}

/* The bf16 gradients (net_plan.c): fused, its gradient is read by the bn's
 * backward (bn_bwd_pool), which takes it as bf16 where the backend does
 * (bn_takes_gh); its own backward then does nothing */
static int dy_h(const cdp_layer *l, const cdp_net *net)
{
	return fused(l, net) && net->be->bn_takes_gh(net->be);
}

const cdp_layer_ops cdp_layer_maxpool = {
	.type = "maxpool", .make = cdp_pool_layer_make, .alloc = alloc, .free = lfree,
	.forward = forward, .backward = backward,
	.bwd_reads = CDP_BWD_X | CDP_BWD_Y, .bwd_reads_now = bwd_reads_now, .dy_h = dy_h,
};
