/* train_sync.c: how the ranks' models stay one model (--sync).
 *
 *  allreduce  synchronous SGD. Gradients are registered with dist.h in
 *             buckets cut at layer boundaries; the backward callback hands
 *             each finished layer to cdp_dist_layer_done, so a bucket's
 *             reduction starts while earlier layers still run backward, and
 *             tr_sync_grads waits for the rest before the optimizer step.
 *             The reduction averages over ranks; train.c has already
 *             scaled each rank's loss gradient by its share of the counted
 *             pixels, so the average is the mean over the global batch.
 *  average:K  every rank steps on its own gradients; after every K steps
 *             the parameters are averaged (block training).
 *  admm:K:RHO global-consensus ADMM: each rank minimises its loss plus
 *             rho/2 |w - z + u|^2 (gradient rho (w - z + u) added before
 *             the step) for K steps, then z = mean(w + u), u += w - z.
 * Batchnorm running statistics are buffers no optimizer touches; they are
 * averaged over ranks before every validation and checkpoint (and at every
 * averaging round of average/admm), so every rank evaluates and saves the
 * same model.
 */
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "dist.h"
#include "train_int.h"

int tr_sync_init(trainer *t, char *err, size_t cap)
{
	const cdp_net *net = &t->net;
	size_t n = net->nparams * sizeof(float);
	int rc;

	if (!(t->layer_off = calloc((size_t)net->nlayers + 1, sizeof *t->layer_off))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	/* layer l owns [layer_off[l], layer_off[l+1]): its parameters are
	 * contiguous and in layer order (net.h) */
	for (int l = 0; l < net->nlayers; l++) {
		const cdp_layer *ly = &net->layers[l];
		size_t end = t->layer_off[l];
		if (ly->w_len && ly->w_off + ly->w_len > end)
			end = ly->w_off + ly->w_len;
		if (ly->b_len && ly->b_off + ly->b_len > end)
			end = ly->b_off + ly->b_len;
		t->layer_off[l + 1] = end;
	}
	if (t->layer_off[net->nlayers] != net->nparams) {
		snprintf(err, cap, "parameter layout is not in layer order");
		return -1;
	}
	if ((rc = cdp_dist_set_algo((cdp_dist_algo)t->o->allreduce)) != 0 ||
	    (t->o->sync == CDP_SYNC_ALLREDUCE &&
	     (rc = cdp_dist_buckets(net->grads, t->layer_off, net->nlayers, 6553600, 0,
	                            t->o->overlap, 1)) < 0)) {
		snprintf(err, cap, "cannot register gradient buckets: %s", cdp_strerror(rc));
		return -1;
	}
	if (t->o->sync != CDP_SYNC_ALLREDUCE && !(t->save = t->be->alloc(t->be, n))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (t->o->sync == CDP_SYNC_ADMM &&
	    (!(t->z = t->be->alloc(t->be, n)) || !(t->u = t->be->alloc(t->be, n)))) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	return 0;
}

void tr_sync_begin(trainer *t)
{
	if (t->z)
		t->be->copy(t->be, t->z, t->net.params, t->net.nparams * sizeof(float));
}

void tr_sync_free(trainer *t)
{
	free(t->layer_off);
	t->layer_off = NULL;
	if (t->save)
		t->be->free(t->be, t->save);
	if (t->z)
		t->be->free(t->be, t->z);
	if (t->u)
		t->be->free(t->be, t->u);
	t->save = t->z = t->u = NULL;
}

void tr_on_layer_done(cdp_net *net, int l, void *ctx)
{
	trainer *t = ctx;
	(void)net;
	if (t->o->sync == CDP_SYNC_ALLREDUCE && t->last_micro)
		cdp_dist_layer_done(l);
}

void tr_sync_grads(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t n = net->nparams;

	if (t->o->sync == CDP_SYNC_ALLREDUCE) {
		cdp_dist_wait_all();
	} else if (t->o->sync == CDP_SYNC_ADMM) {
		/* grads hold the sum of A micro-batch means (the step divides
		 * by A), so the penalty gradient is added A times */
		be->copy(be, t->save, net->params, n * sizeof(float));
		be->axpy(be, -1.0f, t->z, t->save, n);
		be->axpy(be, 1.0f, t->u, t->save, n);
		be->axpy(be, (float)(t->accumulate * t->o->rho), t->save, net->grads, n);
	}
}

void tr_sync_after_step(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t n = net->nparams;

	if (t->o->sync == CDP_SYNC_ALLREDUCE || t->step % t->o->sync_k != 0)
		return;
	if (t->o->sync == CDP_SYNC_AVERAGE) {
		cdp_dist_average(net->params, n);
	} else {
		be->copy(be, t->z, net->params, n * sizeof(float));
		be->axpy(be, 1.0f, t->u, t->z, n);
		cdp_dist_average(t->z, n);                  /* z = mean(w + u) */
		be->axpy(be, 1.0f, net->params, t->u, n);   /* u += w - z */
		be->axpy(be, -1.0f, t->z, t->u, n);
	}
	if (net->nbuffers)
		cdp_dist_average(net->buffers, net->nbuffers);
}

void tr_eval_model_begin(trainer *t)
{
	cdp_backend *be = t->be;
	cdp_net *net = &t->net;
	size_t bytes = net->nparams * sizeof(float);

	if (net->nbuffers)
		cdp_dist_average(net->buffers, net->nbuffers);
	if (t->o->sync == CDP_SYNC_AVERAGE) {
		be->copy(be, t->save, net->params, bytes);
		cdp_dist_average(net->params, net->nparams);
	} else if (t->o->sync == CDP_SYNC_ADMM) {
		be->copy(be, t->save, net->params, bytes);
		be->copy(be, net->params, t->z, bytes);
	}
}

void tr_eval_model_end(trainer *t)
{
	if (t->save)
		t->be->copy(t->be, t->net.params, t->save, t->net.nparams * sizeof(float));
}
