/* dropout.c: the dropout layer, PyTorch's Dropout (inverted: kept values
 * are scaled by 1/(1-p) in training, identity in eval mode).
 *
 * [dropout]
 *   p=P              drop probability in [0, 1) (default 0.5)
 * Input (C,H,W) -> output (C,H,W). No parameters. The mask of a step is a
 * hash of (cdp_rng_derive(net->step_seed, layer index, 0), element index),
 * the same on every backend (backend.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include "cdp_rng.h"
#include "layers.h"

typedef struct drop_state { uint8_t *mask; } drop_state;   /* (N,C,H,W) */

static int make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap)
{
	if (cdp_layer_one_input(l, err, cap) < 0 ||
	    cdp_lopt_float(net, s, "p", 0.5f, 0.0f, 0.999f, &l->p, err, cap) < 0)
		return -1;
	l->out = l->in[0];
	return 0;
}

static int alloc(cdp_layer *l, cdp_net *net)
{
	drop_state *st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	l->state = st;
	st->mask = net->be->alloc(net->be, cdp_layer_out_count(l, net));
	return st->mask ? 0 : -1;
}

static void lfree(cdp_layer *l, cdp_net *net)
{
	drop_state *st = l->state;
	if (st)
		net->be->free(net->be, st->mask);
	free(st);
	l->state = NULL;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	drop_state *st = l->state;
	size_t n = cdp_layer_out_count(l, net);

	if (net->train)
		net->be->dropout_fwd(net->be, l->p, cdp_rng_derive(net->step_seed, (uint64_t)l->index, 0),
		                     cdp_layer_x(net, l, 0), l->y, st->mask, n);
	else
		net->be->copy(net->be, l->y, cdp_layer_x(net, l, 0), n * sizeof(float));
}

static void backward(cdp_layer *l, cdp_net *net)
{
	drop_state *st = l->state;
	size_t n = cdp_layer_out_count(l, net);
	float *dx = cdp_layer_dx(net, l, 0);

	if (!dx)
		return;
	if (net->train)
		net->be->dropout_bwd(net->be, l->p, st->mask, l->dy, dx, l->in_beta[0], n);
	else if (l->in_beta[0] == 0.0f)
		net->be->copy(net->be, dx, l->dy, n * sizeof(float));
	else
		net->be->axpy(net->be, 1.0f, l->dy, dx, n);
}

const cdp_layer_ops cdp_layer_dropout = {
	.type = "dropout", .make = make, .alloc = alloc, .forward = forward,
	.backward = backward, .free = lfree,
	.bwd_reads = CDP_BWD_NONE,
};
