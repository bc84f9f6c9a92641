/* net_plan.c: where a net's activations and their gradients live for a
 * batch (net_plan.h): the bf16 gradients between convolutions and
 * batchnorms, the gradient slots the layers share, the max pools fused
 * into batchnorm, and the bf16 stash with the arena its fp32 tensors
 * share (net.c builds the net and runs it).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_num.h"
#include "layers.h"
#include "net_plan.h"

/* ---- bf16 gradients ----
 *
 * In bf16 a convolution's output is bf16 (backend.h: conv_writes_yh), and
 * so, as in PyTorch's autocast, is its gradient: the gradient between a
 * convolution and the batchnorm that reads it, written by the batchnorm's
 * backward and read by the convolution's two ops, and the gradient
 * between a batchnorm and the convolution that reads it, written by the
 * convolution's data gradient and read by the batchnorm's two passes,
 * are bf16 where the backend reads and writes them so (the layer types'
 * dy_h and dx_h: conv_takes_dyh, conv_writes_dxh, bn_takes_gh; the CPU's
 * Winograd, grid and paired-slice plans). Each is rounded once, where it
 * is written (to nearest even), and widened exactly where it is read; the
 * convolutions round their operands to bf16 anyway, so what changes is
 * the batchnorm's reading of a rounded gradient (and Winograd's
 * transforms, of dy's bf16 values). Half the bytes through the
 * batchnorms' backward and the convolutions' reading of dy: a bf16
 * classifier step 4% faster, its backward 6%, on a 2-vCPU timing model
 * of the avx512bf16 kernels (doc/PERFORMANCE.md, session 43). Only
 * where one layer reads the output, once (no sum of gradients: beta 0),
 * and decided per backward from the layers and the backend as they are
 * then (frozen or synchronized batchnorms read and write float); the
 * buffers keep their float size. */
int cdp_layer_grad_h(const cdp_net *net, int i)
{
	const char *e = getenv("CDP_BF16_GRADS");
	const cdp_layer *l, *r;

	if ((e && strcmp(e, "0") == 0) || i < 0 || i == net->out_layer ||
	    net->be->precision != CDP_PREC_BF16 || net->infer)
		return 0;
	l = &net->layers[i];
	if (l->dy_reader < 0)
		return 0;
	r = &net->layers[l->dy_reader];
	return r->in_beta[0] == 0.0f && l->ops->dy_h && r->ops->dx_h && l->ops->dy_h(l, net) &&
	       r->ops->dx_h(r, net);
}

int cdp_net_has_consumer(const cdp_net *net, int src)
{
	return src < 0 ? net->input_consumed : net->layers[src].consumed;
}

/* The layers' outputs: each its own y, or the stash's arena and bf16
 * copies (act_plan) */
void cdp_net_free_acts(cdp_net *net)
{
	cdp_backend *be = net->be;

	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		if (!net->act_arena)
			be->free(be, l->y);
		be->free(be, l->yh);
		l->y = l->y_fwd = l->y_bwd = NULL;
		l->yh = NULL;
	}
	be->free(be, net->act_arena);
	be->free(be, net->wide);
	be->free(be, net->out);
	net->act_arena = NULL;
	net->out = NULL;
	net->wide = NULL;
	net->wide_floats = 0;
	net->stash = 0;
	net->act_bytes = 0;
}

void cdp_net_free_batch(cdp_net *net)
{
	cdp_backend *be = net->be;

	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		if (l->ops && l->ops->free)
			l->ops->free(l, net);
	}
	cdp_net_free_acts(net);
	net->dact_bytes = 0;
	/* the gradient buffers are shared (dy_slots): free each once, at its
	 * first layer */
	for (int i = 0; i < net->nlayers; i++) {
		float *p = net->layers[i].dy;
		int first = p != NULL;
		for (int k = 0; k < i && first; k++)
			if (net->layers[k].dy == p)
				first = 0;
		if (first)
			be->free(be, p);
	}
	for (int i = 0; i < net->nlayers; i++)
		net->layers[i].dy = NULL;
	be->free(be, net->x);
	be->free(be, net->dx);
	be->free(be, net->ws);
	net->x = net->dx = NULL;
	net->ws = NULL;
	net->ws_bytes = 0;
}

/* The activation gradients share buffers. In backward (layers from
 * out_layer down to 0), layer i's dy is live from the step of its last
 * consumer (the first to write it) down to step i (which reads it); the
 * output's (set by the loss) and those of tensors nobody reads (zeroed
 * before the first step) from the start. Tensors whose live ranges do not
 * overlap get the same buffer: each, in order of its first step, takes the
 * free slot nearest its size (else a new one), and a slot is as big as its
 * biggest tensor. The output's buffer is never handed on, so a caller may
 * run backward again on the same loss gradient. A U-Net then needs a few
 * gradient buffers instead of one per layer (its activation memory: -36%).
 * So the gradient of an inner layer is only valid during backward.
 *
 * A layer whose gradient is passed to its inputs unchanged (dy_through:
 * add) and that is the only reader of an input lends that input its own
 * buffer, so its backward copies nothing for it (ResNet's residual
 * branches: the last bn and the downsample's). The input and the layer
 * are then one tensor for the plan, live from the layer's first writer to
 * the last step that reads any of them. Not for an input with a fused
 * activation: its backward masks its dy in place, which the others read.
 * Sets every l->dy, or none and returns -1 when out of memory. */

/* The layer whose dy buffer layer i's is (i itself, or the only reader
 * of i when that passes its gradient through: see above), given those of
 * the later layers in root[] */
static int dy_root(const cdp_net *net, int i, const int *root)
{
	int reader = -1, refs = 0;

	if (i == net->out_layer || net->layers[i].act)
		return i;
	for (int k = i + 1; k < net->nlayers; k++)
		for (int m = 0; m < net->layers[k].nfrom; m++)
			if (net->layers[k].from[m] == i) {
				reader = k;
				refs++;
			}
	if (refs != 1 || !net->layers[reader].ops->dy_through)
		return i;
	return root[reader];
}

static unsigned bwd_reads(const cdp_net *net, const cdp_layer *l);

/* Training: each bn whose one reader is a max pool the backend fuses into
 * it (net.h, pool_fuse) */
static void plan_pool_fuse(cdp_net *net)
{
	for (int t = 0; t < net->nlayers; t++)
		net->layers[t].pool_fuse = net->layers[t].pool_on = 0;
	for (int t = 0; t < net->out_layer; t++) {
		cdp_layer *b = &net->layers[t], *p = NULL;
		int readers = 0;
		cdp_pool_desc d;
		if (b->ops != &cdp_layer_bn)
			continue;
		for (int k = t + 1; k <= net->out_layer; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++)
				if (net->layers[k].from[m] == t) {
					readers++;
					p = &net->layers[k];
				}
		/* its output is then never made: not where backward reads it */
		if (readers != 1 || p->ops != &cdp_layer_maxpool || p->nfrom != 1 ||
		    bwd_reads(net, b) & CDP_BWD_Y || bwd_reads(net, p) & CDP_BWD_X)
			continue;
		d = cdp_pool_layer_desc(p, net->n);
		if (!net->be->bn_pool_takes(net->be, &d))
			continue;
		b->pool_fuse = p->index + 1;
		p->pool_fuse = t + 1;
	}
}

static int dy_slots(cdp_net *net)
{
	cdp_backend *be = net->be;
	int nl = net->nlayers, nslot = 0, rc = -1;
	int *start = malloc((size_t)nl * sizeof *start), *slot = malloc((size_t)nl * sizeof *slot);
	int *slot_end = malloc((size_t)nl * sizeof *slot_end);
	size_t *slot_bytes = malloc((size_t)nl * sizeof *slot_bytes);
	float **slot_p = calloc((size_t)nl, sizeof *slot_p);
	int *root = malloc((size_t)nl * sizeof *root), *last = malloc((size_t)nl * sizeof *last);

	if (!start || !slot || !slot_end || !slot_bytes || !slot_p || !root || !last)
		goto done;
	/* last[r]: the last step (lowest index) that reads root r's buffer */
	for (int i = nl - 1; i >= 0; i--) {
		root[i] = dy_root(net, i, root);
		last[i] = i;
		last[root[i]] = i;
	}
	/* a fused pool's gradient is read by its bn's backward (pool_fuse) */
	for (int i = 0; i < nl; i++) {
		const cdp_layer *l = &net->layers[i];
		if (l->ops == &cdp_layer_maxpool && l->pool_fuse && l->pool_fuse - 1 < last[root[i]])
			last[root[i]] = l->pool_fuse - 1;
	}
	for (int i = 0; i < nl; i++) {
		start[i] = i == net->out_layer ? nl : -1;
		for (int k = i + 1; k < nl; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++)
				if (net->layers[k].from[m] == i)
					start[i] = k;
		if (start[i] < 0)
			start[i] = nl;
	}
	/* by first step: start descending (stable in i) */
	for (int s = nl; s >= 0; s--)
		for (int i = nl - 1; i >= 0; i--) {
			size_t bytes = cdp_layer_out_count(&net->layers[i], net) * sizeof(float);
			int best = -1;
			if (start[i] != s || root[i] != i)
				continue;
			/* free: its last tensor was read at a step above s */
			for (int t = 0; t < nslot; t++) {
				if (slot_end[t] <= s)
					continue;
				if (best < 0)
					best = t;
				else if (slot_bytes[best] >= bytes
				         ? slot_bytes[t] >= bytes && slot_bytes[t] < slot_bytes[best]
				         : slot_bytes[t] > slot_bytes[best])
					best = t;
			}
			if (best < 0) {
				best = nslot++;
				slot_bytes[best] = 0;
			}
			if (bytes > slot_bytes[best])
				slot_bytes[best] = bytes;
			/* the output's stays untouched through the whole backward,
			 * so a caller may run it again on the same loss gradient */
			slot_end[best] = i == net->out_layer ? -1 : last[i];
			slot[i] = best;
		}
	for (int t = 0; t < nslot; t++)
		if (!(slot_p[t] = be->alloc(be, slot_bytes[t]))) {
			for (int u = 0; u < t; u++)
				be->free(be, slot_p[u]);
			goto done;
		}
	for (int i = 0; i < nl; i++)
		net->layers[i].dy = slot_p[slot[root[i]]];
	for (int t = 0; t < nslot; t++)
		net->dact_bytes += slot_bytes[t];
	rc = 0;
done:
	free(start);
	free(slot);
	free(slot_end);
	free(slot_bytes);
	free(slot_p);
	free(root);
	free(last);
	return rc;
}

/* ---- the bf16 stash ----
 *
 * Without it (fp32, tf32, fp16, or bf16 with CDP_BF16_STASH=0) every layer
 * has its own fp32 output y for the whole batch, kept from its forward to
 * the end of backward. With it (bf16, the default there) an output lives
 * in fp32 only while it is used, in one arena where tensors whose live
 * ranges do not overlap share bytes:
 *  - in forward, from its layer's step to that of its last consumer
 *    (fwd_end); then, if some backward reads it, it is rounded to bf16
 *    (to_bf16) into its stash yh, and its bytes are free again;
 *  - in backward, from just before the first step that reads it (its own
 *    layer's for an activation that reads its output, else its last
 *    consumer's: bwd_first) to after the last one (bwd_last), widened
 *    back from yh (from_bf16).
 * Which steps read what is each layer type's bwd_reads (net.h): relu and
 * leaky read their output; conv, deconv and dense their input, and their
 * output when they have an activation; bn its input, and its output with
 * an activation; maxpool both where the backend's maxpool_bwd does
 * (cuDNN), neither on the CPU (maxpool_bwd_needs_xy: its argmax index is
 * all it reads); add, avgpool, gap, upsample, concat, slice
 * and dropout neither (dropout keeps its own mask, maxpool its own
 * indices, and concat and slice copy: no layer keeps a pointer into
 * another's y). So the tensors rounded are exactly those a backward step
 * reads, and the net's output (the logits the loss reads) is never
 * rounded and has a buffer of its own.
 *
 * Convolutions need no fp32 of the copies they read (stash_io, net.h): a
 * bf16 convolution depends on its input only through the input's bf16
 * values on both backends (backend.h), so the copy is all it needs. Where
 * the backend reads a bf16 input as it is (conv_takes_xh: the CPU's
 * implicit plan) the convolution takes the copy; else it widens it a
 * group of samples at a time into net->wide (cdp_net_stash_group) and runs
 * group by group; either way the whole tensor is never widened into the
 * arena for backward; and
 * a concat whose readers are all convolutions has no fp32 output at all:
 * its forward writes its copy from its inputs' (rounded, or copied from
 * theirs), and its readers widen it in groups in forward too. In the
 * U-Net that ends the long fp32 lives of the skip connections (from the
 * encoder to the concat) and the concat's output, the largest tensor.
 * Batchnorm's backward likewise reads its input's copy as it is where
 * the backend does (bn_takes_xh, the CPU; not for the synchronized or
 * frozen ones), and its output only where the backend's bn_bwd does
 * (bn_bwd_needs_y: CUDA; the CPU computes bn(x) again). Its forward
 * reads the copy too where that holds the input's values themselves
 * (CDP_STASH_IN_EXACT, CDP_STASH_EXACT): a bf16 convolution's output is
 * bf16 where the backend writes it so (conv_writes_yh: the CPU's
 * Winograd, paired VDPBF16PS rows and row-by-row gemm; backend.h), and a
 * convolution read only by such batchnorms writes its copy alone, with no fp32 output
 * (stash_alone): its bytes and the batchnorm's reads of them halve, and
 * nothing is rounded that was not bf16 already. Batchnorm's forward
 * writes the copies of its input (where it is the last to read it
 * in fp32) and of its output in its own pass over them (bn_fwd_train_h,
 * marking them yh_fresh) instead of the stash's passes after the step;
 * where every reader of its output takes the copy, it writes the copy
 * alone and has no fp32 output (stash_alone, where the backend
 * can: bn_fwd_h_alone, the CPU). The rest of
 * forward reads every tensor in fp32 as it was written. Where
 * reading the copies would make the whole larger (the widening
 * buffer outweighs what the arena saves), the plan keeps
 * fp32 for them (act_plan plans both; on a tie, as the classifier's, it
 * reads the copies). Forward gives the same bits either
 * way. An inner layer's y is valid only while forward or backward uses it
 * (NULL otherwise). Backward reads only the stash, so it may be run again
 * after a forward, as without the stash.
 *
 * The U-Net of bench/engine.sh keeps nearly all its outputs for
 * backward, so its activation memory (act_bytes) falls to 0.538 of fp32's:
 * the bf16 copies, the fp32 of the tensors that live on in forward (at the
 * peak, the first skip connection, read by a max pool at once and by a
 * concat at the far end, beside the transposed convolution's output), the
 * widening buffer for its 1x1 head; the classifier's to 0.638. */

/* What backward of layer l reads (CDP_BWD_X, CDP_BWD_Y), from its type's
 * bwd_reads or bwd_reads_now */
static unsigned bwd_reads(const cdp_net *net, const cdp_layer *l)
{
	unsigned r = l->ops->bwd_reads;

	if (!l->ops->backward || r & CDP_BWD_NONE)
		return 0;
	if (l->ops->bwd_reads_now)
		return l->ops->bwd_reads_now(l, net) & (CDP_BWD_X | CDP_BWD_Y);
	if (!r)
		return CDP_BWD_X | CDP_BWD_Y;
	if (r & CDP_BWD_Y_ACT && l->act)
		r |= CDP_BWD_Y;
	return r & (CDP_BWD_X | CDP_BWD_Y);
}

/* 1: the batch is to be allocated with the stash */
int cdp_net_want_stash(const cdp_net *net)
{
	const char *e = getenv("CDP_BF16_STASH");

	return !net->infer && net->be->precision == CDP_PREC_BF16 && !(e && strcmp(e, "0") == 0);
}

/* One live range of an fp32 output in the stash's plan: layer t, from
 * time start to end (both taken), at byte off of the arena. */
typedef struct act_range {
	int t, start, end, bwd;
	size_t bytes, off;
} act_range;

/* larger first, then earlier (qsort) */
static int range_cmp(const void *pa, const void *pb)
{
	const act_range *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	return a->start - b->start;
}

/* by offset (qsort of pointers) */
static int range_off_cmp(const void *pa, const void *pb)
{
	const act_range *a = *(const act_range *const *)pa, *b = *(const act_range *const *)pb;

	return a->off < b->off ? -1 : a->off > b->off;
}

/* 1: layer k's forward reads the bf16 copy of its input t, the fp32 not
 * being live (stash_roles) */
static int reads_copy(const cdp_net *net, int t, int k, const char *honly)
{
	const cdp_layer *c = &net->layers[k];
	unsigned io = c->ops->stash_io;

	if (io & CDP_STASH_OUT && !honly[k])
		return 0;
	if (io & CDP_STASH_IN_FWD)
		return 1;
	return io & CDP_STASH_IN_EXACT && net->layers[t].ops->stash_io & CDP_STASH_EXACT &&
	       (!(io & CDP_STASH_DIRECT_ONLY) || (c->ops->stash_direct && c->ops->stash_direct(c, net)));
}

/* Which outputs the stash keeps in bf16 (keep: backward reads them) and
 * which have no fp32 at all (honly: a CDP_STASH_OUT layer, or one that
 * can write its copy alone, whose readers all take its copy:
 * convolutions, bf16-only CDP_STASH_OUT layers, and batchnorms where the
 * copy is exact: a convolution's), decided from the last layer down since
 * a reader's role comes first. None without the stash (inference); no
 * honly without hread. */
static void stash_roles(const cdp_net *net, int hread, char *keep, char *honly)
{
	int out = net->out_layer;

	for (int t = 0; net->stash && t < out; t++) {
		keep[t] = (bwd_reads(net, &net->layers[t]) & CDP_BWD_Y) != 0;
		for (int k = t + 1; k <= out; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++)
				if (net->layers[k].from[m] == t && (bwd_reads(net, &net->layers[k]) & CDP_BWD_X))
					keep[t] = 1;
	}
	for (int t = out - 1; net->stash && hread && t >= 0; t--) {
		const cdp_layer *l = &net->layers[t];
		int alone = l->ops->stash_alone && l->ops->stash_alone(l, net);
		int readers = 0, ok = keep[t] && ((l->ops->stash_io & CDP_STASH_OUT) || alone);
		for (int k = t + 1; k <= out && ok; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++) {
				if (net->layers[k].from[m] != t)
					continue;
				readers++;
				if (!reads_copy(net, t, k, honly))
					ok = 0;
			}
		honly[t] = ok && readers > 0;
	}
}

/* The last layer (up to the output) that reads layer t's output; -1: none */
static int last_reader(const cdp_net *net, int t)
{
	int last = -1;

	for (int k = t + 1; k <= net->out_layer; k++)
		for (int m = 0; m < net->layers[k].nfrom; m++)
			if (net->layers[k].from[m] == t)
				last = k;
	return last;
}

/* Inference: which concats need no output (cdp_layer.virt). A concat
 * read only by layers that take its inputs where they lie (a 3x3
 * convolution on the CPU: takes_split), none of them itself such a
 * concat, is not copied at all: the U-Net decoder's concats were 3.5% of
 * cdp-predict's time in copies, and their outputs the largest tensors
 * live in its plan. */
static void plan_virtual(cdp_net *net)
{
	for (int t = 0; t < net->nlayers; t++) {
		cdp_layer *l = &net->layers[t];
		int readers = 0, ok = net->infer && l->ops == &cdp_layer_concat &&
		                      t < net->out_layer && l->nfrom <= CDP_CONV_SEGS;

		for (int j = 0; ok && j < l->nfrom; j++)
			if (l->from[j] >= 0 && net->layers[l->from[j]].virt)
				ok = 0;
		for (int k = t + 1; ok && k <= net->out_layer; k++) {
			const cdp_layer *c = &net->layers[k];
			for (int m = 0; m < c->nfrom; m++) {
				if (c->from[m] != t)
					continue;
				readers++;
				if (c->nfrom != 1 || !c->ops->takes_split || !c->ops->takes_split(c, net))
					ok = 0;
			}
		}
		l->virt = ok && readers > 0;
	}
}

/* Plans and allocates the stash (see above): fwd_end, bwd_first,
 * bwd_last, y_fwd / y_bwd / yh of every layer, and the output's own
 * buffer. Live ranges are on one time line, forward step i at time i,
 * backward step i at 2 L - 1 - i, both ends taken; the output's spans it
 * all. They are placed in one arena, largest first, each at the lowest
 * offset (64-byte aligned) where no range placed before it that is live
 * at the same time lies (the greedy-by-size plan of TFLite's arena): its
 * size then stays near the most bytes live at once. 0, or -1 out of
 * memory (what was allocated is left for free_batch). */
static size_t plan_once(cdp_net *net, int hread, act_range *rg, act_range **live, int *nrp)
{
	int nl = net->nlayers, nr = 0, out = net->out_layer;
	char *keep = calloc((size_t)nl + 1, 1), *honly = calloc((size_t)nl + 1, 1);
	size_t arena = 0, wide_s = 0, wide_t = 0;

	if (!keep || !honly) {
		free(keep);
		free(honly);
		return SIZE_MAX;
	}
	stash_roles(net, hread, keep, honly);
	for (int t = 0; t < nl; t++) {
		cdp_layer *l = &net->layers[t];
		size_t bytes = cdp_layer_out_count(l, net) * sizeof(float);
		l->keep = keep[t];
		l->fwd_end = honly[t] ? -1 : t;
		l->bwd_first = -1;
		l->bwd_last = nl;
		if (t > out || l->virt)
			continue;       /* a virtual concat: no output (plan_virtual) */
		if (!net->infer && (bwd_reads(net, l) & CDP_BWD_Y))
			l->bwd_first = l->bwd_last = t;
		for (int k = t + 1; k <= out; k++)
			for (int m = 0; m < net->layers[k].nfrom; m++) {
				const cdp_layer *c = &net->layers[k];
				unsigned io = hread ? c->ops->stash_io : 0;
				int direct, hb;
				if (c->from[m] != t)
					continue;
				direct = io && c->ops->stash_direct && c->ops->stash_direct(c, net);
				hb = (io & CDP_STASH_IN_BWD) && (direct || !(io & CDP_STASH_DIRECT_ONLY));
				/* forward: in fp32, but where the copy serves (a
				 * bf16-only consumer rounds what it reads); read by a
				 * virtual concat: until that concat's last reader */
				if (!(keep[t] && (honly[t] || (io & CDP_STASH_OUT && honly[k])))) {
					int e = c->virt ? last_reader(net, k) : k;
					l->fwd_end = e > l->fwd_end ? e : l->fwd_end;
				}
				if (!net->infer && (bwd_reads(net, c) & CDP_BWD_X) && !hb) {
					if (k > l->bwd_first)
						l->bwd_first = k;
					if (k < l->bwd_last)
						l->bwd_last = k;
				}
				if (keep[t] && io & (CDP_STASH_IN_FWD | CDP_STASH_IN_BWD) && !direct &&
				    !(io & CDP_STASH_DIRECT_ONLY)) {
					size_t f = cdp_shape_numel(l->out);
					if (f > wide_s)
						wide_s = f;
					if (f * (size_t)net->n > wide_t)
						wide_t = f * (size_t)net->n;
				}
			}
		if (net->infer && l->fuse - 1 > t)
			continue;       /* a fused conv writes its bn's output, not its own */
		if (t == out) {         /* in passes: net->out, not the arena */
			if (!net->out)
				rg[nr++] = (act_range){ t, 0, 2 * nl, 0, bytes, 0 };
			continue;
		}
		/* a fused bn's output is written by its conv's forward (the
		 * conv's fuse is a later layer's) */
		if (!honly[t]) {
			/* a fused pool's output is written by its bn's forward */
			int st = l->fuse && l->fuse - 1 < t ? l->fuse - 1 : t;
			if (l->pool_fuse && l->pool_fuse - 1 < st)
				st = l->pool_fuse - 1;
			rg[nr++] = (act_range){ t, st, l->fwd_end, 0, bytes, 0 };
		}
		if (l->bwd_first >= 0)
			rg[nr++] = (act_range){ t, 2 * nl - 1 - l->bwd_first, 2 * nl - 1 - l->bwd_last, 1,
			                        bytes, 0 };
	}
	qsort(rg, (size_t)nr, sizeof *rg, range_cmp);
	for (int r = 0; r < nr; r++) {
		int nlive = 0;
		size_t off = 0;
		for (int q = 0; q < r; q++)
			if (rg[q].start <= rg[r].end && rg[r].start <= rg[q].end)
				live[nlive++] = &rg[q];
		qsort(live, (size_t)nlive, sizeof *live, range_off_cmp);
		for (int q = 0; q < nlive; q++) {
			if (off + rg[r].bytes <= live[q]->off)
				break;
			if (live[q]->off + live[q]->bytes > off)
				off = (live[q]->off + live[q]->bytes + 63) & ~(size_t)63;
		}
		rg[r].off = off;
		if (off + rg[r].bytes > arena)
			arena = off + rg[r].bytes;
	}
	/* the widening buffer: a sample of the largest copy read, or an
	 * eighth of the largest whole one if that is more (fewer, larger
	 * convolutions where samples are small) */
	net->wide_floats = wide_t / 8 > wide_s ? wide_t / 8 : wide_s;
	*nrp = nr;
	free(keep);
	free(honly);
	return arena;
}

static int act_plan(cdp_net *net)
{
	cdp_backend *be = net->be;
	int nl = net->nlayers, nr = 0, rc = -1, out = net->out_layer;
	act_range *rg = malloc((size_t)(2 * nl + 1) * sizeof *rg);
	act_range **live = malloc((size_t)(2 * nl + 1) * sizeof *live);
	size_t arena = SIZE_MAX;

	if (!rg || !live)
		goto done;
	plan_virtual(net);
	/* with the stash, the plan where convolutions read the bf16 copies
	 * where they can, unless it takes more bytes than the one where they
	 * do not: on a tie too, since it widens less (the classifier's plans
	 * tie, peak at a convolution's output and its batchnorm's, and
	 * widening took 4% of its step) */
	if (net->stash) {
		size_t h = plan_once(net, 1, rg, live, &nr);
		if (h != SIZE_MAX)
			h += net->wide_floats * sizeof(float);
		arena = plan_once(net, 0, rg, live, &nr);
		if (h <= arena && h != SIZE_MAX)
			arena = plan_once(net, 1, rg, live, &nr);
	} else {
		arena = plan_once(net, 0, rg, live, &nr);
	}
	if (arena == SIZE_MAX || !(net->act_arena = be->alloc(be, arena)))
		goto done;
	net->act_bytes += arena;
	if (net->out)
		net->layers[out].y = net->layers[out].y_fwd = net->layers[out].y_bwd = net->out;
	for (int r = 0; r < nr; r++) {
		cdp_layer *l = &net->layers[rg[r].t];
		float *p = (float *)((char *)net->act_arena + rg[r].off);
		if (rg[r].t == out)
			l->y = l->y_fwd = l->y_bwd = p;
		else if (rg[r].bwd)
			l->y_bwd = p;
		else
			l->y_fwd = p;
	}
	for (int t = 0; t < out; t++) {
		cdp_layer *l = &net->layers[t];
		size_t bytes = cdp_layer_out_count(l, net) * sizeof(uint16_t);
		if (!l->keep)
			continue;
		if (!(l->yh = be->alloc(be, bytes)))
			goto done;
		net->act_bytes += bytes;
	}
	if (net->wide_floats) {
		if (!(net->wide = be->alloc(be, net->wide_floats * sizeof(float))))
			goto done;
		net->act_bytes += net->wide_floats * sizeof(float);
	}
	rc = 0;
done:
	free(rg);
	free(live);
	return rc;
}

int cdp_net_stash_group(const cdp_net *net, const cdp_layer *l)
{
	size_t per = cdp_shape_numel(l->in[0]), g = per ? net->wide_floats / per : 1;

	return g < 1 ? 1 : g > (size_t)net->n ? net->n : (int)g;
}

/* free_acts' reverse, with the stash when the precision wants it; 0, or
 * -1 out of memory (what was allocated is left for free_acts) */
int cdp_net_alloc_acts(cdp_net *net)
{
	cdp_backend *be = net->be;

	net->stash = cdp_net_want_stash(net);
	if (net->stash || net->infer)
		return act_plan(net);
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		size_t bytes = cdp_layer_out_count(l, net) * sizeof(float);
		if (!(l->y = be->alloc(be, bytes)))
			return -1;
		net->act_bytes += bytes;
	}
	return 0;
}

/* Inference in passes (net.h, pass) on a backend that has them
 * (infer_pass_bytes not 0): CDP_INFER_PASS samples when set, else as many
 * as infer_pass_bytes holds of one sample's activations (the arena of a
 * batch of 1), at least 1, at most n; -1 with the reason in err for a
 * malformed CDP_INFER_PASS. */
static int infer_pass(cdp_net *net, char *err, size_t cap)
{
	const char *e = getenv("CDP_INFER_PASS");
	int n = net->n, nr;
	size_t budget, one;
	act_range *rg;
	act_range **live;

	budget = net->be->infer_pass_bytes(net->be);
	if (!budget)
		return n;         /* the batch whole (CUDA), whatever the variable */
	if (e && *e) {           /* as cdp_device_env_check checks it */
		int v;
		if (cdp_parse_int(e, 1, INT_MAX, &v) != 0) {
			snprintf(err, cap, "CDP_INFER_PASS: '%s': want a whole number of samples from 1",
			         e);
			return -1;
		}
		return v < n ? v : n;
	}
	if (n == 1)
		return n;
	rg = malloc((size_t)(2 * net->nlayers + 1) * sizeof *rg);
	live = malloc((size_t)(2 * net->nlayers + 1) * sizeof *live);
	net->n = 1;
	plan_virtual(net);
	one = rg && live ? plan_once(net, 0, rg, live, &nr) : SIZE_MAX;
	net->n = n;
	free(rg);
	free(live);
	if (one == SIZE_MAX || one == 0)
		return n;
	return budget / one < 1 ? 1 : budget / one >= (size_t)n ? n : (int)(budget / one);
}

int cdp_net_alloc_batch(cdp_net *net, char *err, size_t cap)
{
	cdp_backend *be = net->be;
	size_t in = (size_t)net->n * cdp_shape_numel(net->in) * sizeof(float);
	int n = net->n;

	net->x = be->alloc(be, in);
	net->dx = net->infer ? NULL : be->alloc(be, in);
	if (!net->x || (!net->infer && !net->dx))
		goto nomem;
	net->pass = n;
	if (net->infer && (net->pass = infer_pass(net, err, cap)) < 0) {
		cdp_net_free_batch(net);
		return -1;
	}
	if (net->pass < n) {    /* the output of all n; the rest sized for a pass */
		cdp_layer *o = &net->layers[net->out_layer];
		size_t ob = (size_t)n * cdp_shape_numel(o->out) * sizeof(float);
		if (!(net->out = be->alloc(be, ob)))
			goto nomem;
		net->n = net->pass;
	}
	if (!net->infer)
		plan_pool_fuse(net);
	if ((!net->infer && dy_slots(net) < 0) || cdp_net_alloc_acts(net) < 0)
		goto nomem;
	for (int i = 0; i < net->nlayers; i++) {
		cdp_layer *l = &net->layers[i];
		size_t ws;
		if (l->ops->alloc && l->ops->alloc(l, net) < 0)
			goto nomem;
		ws = l->ops->workspace ? l->ops->workspace(l, net) : 0;
		if (ws > net->ws_bytes)
			net->ws_bytes = ws;
	}
	if (net->ws_bytes && !(net->ws = be->alloc(be, net->ws_bytes)))
		goto nomem;
	if (net->out)
		net->act_bytes += (size_t)n * cdp_shape_numel(net->layers[net->out_layer].out) *
		                  sizeof(float);
	net->n = n;
	return 0;
nomem:
	net->n = n;
	snprintf(err, cap, "cannot allocate the activations for batch %d: out of memory", net->n);
	cdp_net_free_batch(net);
	return -1;
}
