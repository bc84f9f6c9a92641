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
 *
 * Synchronized (net->bn_sync, [net] bn_sync=1; sync_forward and
 * sync_backward): training mode takes the statistics of the whole global
 * batch, as PyTorch's SyncBatchNorm. Forward: the backend's bn_sums of x
 * about the running mean k (the same on every rank, as the running
 * statistics are updated from the same global values) and the local count
 * M, added over ranks by net->bn_reduce (one reduction of 2C + 1 doubles
 * per layer); then mean = k + s1 / M, var = max(s2 / M - (s1 / M)^2, 0) in
 * double, rounded to float, invstd = 1 / sqrt(var + eps) as bn_fwd_infer
 * computes it, and bn_fwd_infer normalises with them (and applies the
 * activation); the running statistics are updated on the host from the
 * floats as cpu_bn.c does (unbiased var * M / (M - 1)). Backward: act_bwd
 * turns dy into the gradient before the activation, bn_grad_sums gives the
 * sums of dy and dy xhat, which are this rank's gamma and beta gradients
 * (the gradient all-reduce adds the ranks' up), and after their sum over
 * ranks (2C doubles) their means over M give bn_bwd_dx's input gradient.
 * dy of each rank is j times the global loss's (cdp_loss_finish's gmul),
 * so the means of the summed sums are j times the global batch's, as the
 * rest of the rank's gradient. Without bn_reduce (one process) the sums
 * are this batch's: the unsynchronized layer's values up to rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "layers.h"

/* save: mean (C), invstd (C); zero: 2C zeros (the frozen backward's mean,
 * beta). bn_sync: dev (4C device floats: the statistics or the backward's
 * means, then the local gamma and beta gradients), sums (2C + 1 host
 * doubles), h (6C host floats: the values uploaded to dev, save and the
 * running statistics), count (M of the global batch, from the forward) */
typedef struct bn_state {
	float *save, *zero, *dev, *h;
	double *sums, count;
} bn_state;

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
	size_t sample = cdp_shape_numel(l->in[0]) * sizeof(float);

	/* else a sample's output: eval mode's where the stash keeps only
	 * the copy (forward_alone) */
	return l->from[0] < 0 || l->frozen ? (size_t)net->n * sample : sample;
}

static int alloc(cdp_layer *l, cdp_net *net)
{
	bn_state *st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	l->state = st;
	st->save = net->be->alloc(net->be, 2 * (size_t)l->out.c * sizeof(float));
	st->zero = net->be->alloc(net->be, 2 * (size_t)l->out.c * sizeof(float));
	if (!st->save || !st->zero)
		return -1;
	if (!net->bn_sync)
		return 0;
	st->dev = net->be->alloc(net->be, 4 * (size_t)l->out.c * sizeof(float));
	st->h = malloc(6 * (size_t)l->out.c * sizeof *st->h);
	st->sums = malloc((2 * (size_t)l->out.c + 1) * sizeof *st->sums);
	return st->dev && st->h && st->sums ? 0 : -1;
}

static void lfree(cdp_layer *l, cdp_net *net)
{
	bn_state *st = l->state;
	if (st) {
		net->be->free(net->be, st->save);
		net->be->free(net->be, st->zero);
		if (st->dev)
			net->be->free(net->be, st->dev);
		free(st->h);
		free(st->sums);
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

static void reduce(cdp_net *net, double *sums, size_t n)
{
	if (net->bn_reduce)
		net->bn_reduce(sums, n, net->bn_reduce_ctx);
}

/* h: mean, var (C each; to dev), mean, invstd (to save), running mean,
 * var (read, updated, written back) */
static void sync_forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	float *rm = net->buffers + l->buf_off, *h = st->h, *hr = h + 4 * c;
	double *s = st->sums, m;

	be->to_host(be, hr, rm, 2 * (size_t)c * sizeof(float));
	be->bn_sums(be, net->n, c, hw, cdp_layer_x(net, l, 0), rm, s);
	s[2 * c] = (double)net->n * hw;
	reduce(net, s, 2 * (size_t)c + 1);
	st->count = m = s[2 * c];
	for (int i = 0; i < c; i++) {
		double d = s[i] / m, var = s[i + c] / m - d * d, unbiased;
		if (var < 0.0)
			var = 0.0;
		h[i] = h[2 * c + i] = (float)(hr[i] + d);
		h[c + i] = (float)var;
		h[3 * c + i] = (float)(1.0 / sqrt((double)h[c + i] + l->eps));
		unbiased = m > 1 ? var * m / (m - 1) : var;
		hr[i] = (1.0f - l->momentum) * hr[i] + l->momentum * h[i];
		hr[c + i] = (1.0f - l->momentum) * hr[c + i] + l->momentum * (float)unbiased;
	}
	be->to_device(be, st->dev, h, 2 * (size_t)c * sizeof(float));
	be->to_device(be, st->save, h + 2 * c, 2 * (size_t)c * sizeof(float));
	be->to_device(be, rm, hr, 2 * (size_t)c * sizeof(float));
	be->bn_fwd_infer(be, net->n, c, hw, cdp_layer_x(net, l, 0), net->params + l->w_off,
	                 net->params + l->b_off, l->y, st->dev, st->dev + c, l->eps, l->act,
	                 l->slope);
}

/* h: the means of the summed sums (to dev), then this rank's gamma and beta
 * gradients (to dev + 2C) */
static void sync_backward(cdp_layer *l, cdp_net *net, float *dx, float beta)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	const float *x = cdp_layer_x(net, l, 0);
	float *h = st->h;
	double *s = st->sums;

	if (l->act)
		be->act_bwd(be, l->act, l->slope, l->y, l->dy, l->dy, 0.0f, cdp_layer_out_count(l, net));
	be->bn_grad_sums(be, net->n, c, hw, x, l->dy, st->save, st->save + c, s);
	for (int i = 0; i < c; i++) {
		h[2 * c + i] = (float)s[c + i];
		h[3 * c + i] = (float)s[i];
	}
	reduce(net, s, 2 * (size_t)c);
	for (int i = 0; i < 2 * c; i++)
		h[i] = (float)(s[i] / st->count);
	be->to_device(be, st->dev, h, 4 * (size_t)c * sizeof(float));
	be->bn_bwd_dx(be, net->n, c, hw, x, l->dy, net->params + l->w_off, st->save, st->save + c,
	              st->dev, dx, beta);
	be->axpy(be, 1.0f, st->dev + 2 * c, net->grads + l->w_off, (size_t)c);
	be->axpy(be, 1.0f, st->dev + 3 * c, net->grads + l->b_off, (size_t)c);
}

/* Eval mode where the stash keeps only the output's copy (l->y NULL:
 * stash_alone, a training net validating) or only the input's (x NULL:
 * a convolution's, CDP_STASH_IN_EXACT): a sample at a time through the
 * workspace, the input widened into it, the output rounded from it into
 * yh (the same values: eval mode's batchnorm is per element) */
static void forward_alone(cdp_layer *l, cdp_net *net, const float *rm, const float *rv)
{
	cdp_backend *be = net->be;
	int c = l->out.c, hw = l->out.h * l->out.w;
	size_t per = (size_t)c * hw;
	const float *x = cdp_layer_x(net, l, 0);
	const uint16_t *xh = x ? NULL : cdp_layer_xh(net, l, 0);

	for (int i = 0; i < net->n; i++) {
		const float *xi = x ? x + i * per : net->ws;
		float *yi = l->y ? l->y + i * per : net->ws;
		if (!x)
			be->from_bf16(be, xh + i * per, net->ws, per);
		be->bn_fwd_infer(be, 1, c, hw, xi, net->params + l->w_off, net->params + l->b_off,
		                 yi, rm, rv, l->eps, l->act, l->slope);
		if (!l->y)
			be->to_bf16(be, net->ws, l->yh + i * per, per);
	}
}

/* bn_fwd_train_h's xh: x's copy to write (cdp_layer_copy_in), or where x
 * is only that copy (a convolution wrote it alone: CDP_STASH_IN_EXACT)
 * the copy to read */
static uint16_t *train_xh(cdp_net *net, const cdp_layer *l)
{
	return cdp_layer_x(net, l, 0) ? cdp_layer_copy_in(net, l, 0)
	                              : (uint16_t *)cdp_layer_xh(net, l, 0);
}

/* The max pool after it in the same pass (net.h, pool_fuse): its output
 * and argmax written here, its forward then idle; ours never made */
static cdp_bn_pool pool_of(cdp_layer *l, cdp_net *net)
{
	cdp_layer *p = &net->layers[l->pool_fuse - 1];
	cdp_bn_pool bp = { cdp_pool_layer_desc(p, net->n), net->stash ? p->y_fwd : p->y,
	                   cdp_maxpool_idx(p), p->dy };
	return bp;
}

static void forward_pool(cdp_layer *l, cdp_net *net, float *rm, float *rv)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	cdp_bn_pool bp = pool_of(l, net);

	be->bn_fwd_train_pool(be, net->n, c, hw, cdp_layer_x(net, l, 0), train_xh(net, l),
	                      net->params + l->w_off, net->params + l->b_off, rm, rv, l->momentum,
	                      l->eps, st->save, st->save + c, l->act, l->slope, &bp);
	l->pool_on = 1;
}

static void forward(cdp_layer *l, cdp_net *net)
{
	cdp_backend *be = net->be;
	bn_state *st = l->state;
	int c = l->out.c, hw = l->out.h * l->out.w;
	float *rm = net->buffers + l->buf_off, *rv = rm + c;

	l->pool_on = 0;
	if (l->fuse && !net->train)
		return;         /* its conv wrote y (net.h, fuse) */
	if (net->train && !l->frozen && net->bn_sync)
		sync_forward(l, net);
	else if (net->train && !l->frozen && l->pool_fuse)
		forward_pool(l, net, rm, rv);
	else if (net->train && !l->frozen)
		/* with the stash, the copies of x and y as this pass goes; y's
		 * alone where every reader takes it (l->y NULL: stash_alone);
		 * x's copy alone read where a convolution wrote only that (x
		 * NULL: stash_direct, CDP_STASH_IN_EXACT) */
		be->bn_fwd_train_h(be, net->n, c, hw, cdp_layer_x(net, l, 0), train_xh(net, l),
		                   net->params + l->w_off, net->params + l->b_off, l->y,
		                   cdp_layer_copy_out(l), rm, rv, l->momentum, l->eps, st->save,
		                   st->save + c, l->act, l->slope);
	else if (!l->y || !cdp_layer_x(net, l, 0))
		forward_alone(l, net, rm, rv);
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
	const void *x;
	int xh, h;

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
	if (net->bn_sync) {
		sync_backward(l, net, dx, beta);
		return;
	}
	/* the backend may leave the gradient before the activation in dy; x
	 * may be only the stash's bf16 copy (stash_direct) */
	x = cdp_layer_x(net, l, 0);
	xh = !x;
	if (xh)
		x = cdp_layer_xh(net, l, 0);
	/* the gradients in bf16 where the net has them so (net_plan.c) */
	h = (xh ? CDP_H_X : 0) | (dx != net->ws && cdp_layer_grad_h(net, l->from[0]) ? CDP_H_DX : 0);
	/* dy: its own, or the fused pool's */
	if (cdp_layer_grad_h(net, l->pool_on ? l->pool_fuse - 1 : l->index))
		h |= CDP_H_DY;
	if (l->pool_on) {       /* dy: the fused pool's, expanded as it is read */
		cdp_bn_pool bp = pool_of(l, net);
		be->bn_bwd_pool(be, net->n, c, hw, x, h, net->params + l->w_off,
		                net->params + l->b_off, st->save, st->save + c, l->eps, l->act,
		                l->slope, dx, beta, net->grads + l->w_off, net->grads + l->b_off, &bp);
		return;
	}
	be->bn_bwd(be, net->n, c, hw, x, h, l->y, l->dy, net->params + l->w_off,
	           net->params + l->b_off, st->save, st->save + c, l->eps, l->act, l->slope, dx,
	           beta, net->grads + l->w_off, net->grads + l->b_off);
}

/* Its input; and its output with an activation when the backward reads
 * it: the frozen and synchronized ones (act_bwd), and bn_bwd on a
 * backend that reads y */
static unsigned bwd_reads_now(const cdp_layer *l, const cdp_net *net)
{
	int y = l->act && (l->frozen || net->bn_sync || net->be->bn_bwd_needs_y(net->be));

	return CDP_BWD_X | (y ? CDP_BWD_Y : 0);
}

/* The stash's bf16 copy of the input read as it is: where the backend
 * reads it so and the backward is bn_bwd's (not the synchronized parts,
 * not the frozen one's); and the forward's bn_fwd_train_h where that
 * copy is a convolution's output, written alone (CDP_STASH_IN_EXACT) */
static int stash_direct(const cdp_layer *l, const cdp_net *net)
{
	return !l->frozen && !net->bn_sync && net->be->bn_takes_xh(net->be);
}

/* No fp32 output where its readers all take the copy: the training
 * forward of bn_fwd_train_h, on a backend that writes the copy alone */
static int stash_alone(const cdp_layer *l, const cdp_net *net)
{
	return !l->frozen && !net->bn_sync && net->be->bn_fwd_h_alone(net->be);
}

/* The bf16 gradients (net_plan.c): read and written so by bn_bwd where the
 * backend does (bn_takes_gh), not by the frozen or synchronized ones
 * (bn_fwd_infer, the parts: float); a fused pool's gradient is the
 * pool's (its dy_h) */
static int dy_h(const cdp_layer *l, const cdp_net *net)
{
	return !l->frozen && !net->bn_sync && !l->pool_fuse && net->be->bn_takes_gh(net->be);
}

static int dx_h(const cdp_layer *l, const cdp_net *net)
{
	return !l->frozen && !net->bn_sync && net->be->bn_takes_gh(net->be);
}

const cdp_layer_ops cdp_layer_bn = {
	.type = "bn", .make = make, .workspace = workspace, .alloc = alloc, .init = init,
	.forward = forward, .backward = backward, .free = lfree,
	.bwd_reads = CDP_BWD_X | CDP_BWD_Y_ACT, .bwd_reads_now = bwd_reads_now,
	.stash_io = CDP_STASH_IN_BWD | CDP_STASH_IN_EXACT | CDP_STASH_DIRECT_ONLY,
	.stash_direct = stash_direct, .stash_alone = stash_alone, .dy_h = dy_h, .dx_h = dx_h,
};
