/* train_init.c: cdp-train --init (man/cdp-train.1): the weights of another
 * run's checkpoint taken by tensor name and shape over the seeded
 * initialization, as PyTorch's load_state_dict takes a state dict: rank 0
 * reads the file, every rank decodes the broadcast bytes; the tensors the
 * net has no place for are refused (strict), those of the net the file
 * lacks are listed in train.log, and where the weights came from (the
 * file's SHA-256 and the provenance it records) travels into this run's
 * checkpoints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_sha256.h"
#include "ckpt/checkpoint.h"
#include "dist/dist.h"
#include "train_int.h"

/* train.log's line on the net's tensors not taken, growing, and the first
 * of them that may not be left out (bad: its name and why, nbad: how many) */
typedef struct init_list {
	char *s;
	size_t len, cap;
	int n;
	const cdp_net *net;
	int head;                   /* the head: the last layer with parameters */
	/* bad_in: the first bad one is the weight of a layer that reads the
	 * input, and differs from the checkpoint's in its input channels only */
	int nbad, bad_in;
	char bad[CDP_LAYER_NAME + 200];
	const cdp_ckpt *ck;
} init_list;

/* The layer of tensor name (LAYER.w, .b, .mean, .var), or NULL. */
static const cdp_layer *init_layer(const cdp_net *net, const char *name)
{
	const char *dot = strrchr(name, '.');

	for (int i = 0; dot && i < net->nlayers; i++)
		if (strlen(net->layers[i].name) == (size_t)(dot - name) &&
		    strncmp(net->layers[i].name, name, (size_t)(dot - name)) == 0)
			return &net->layers[i];
	return NULL;
}

/* Whether weight tensor name of layer L (a conv's (F,C,K,K), a deconv's
 * (C,F,K,K)) has in ck another number of input channels C and else the
 * net's shape: weights for another number of input bands, which
 * import-torch --in-channels adapts. Another width (F) or kernel is
 * another model, whatever C is. */
static int init_other_bands(const cdp_ckpt *ck, const cdp_layer *L, const char *name)
{
	const char *type = L->ops ? L->ops->type : "", *dot = strrchr(name, '.');
	int d[4] = { L->filters, L->in[0].c, L->k, L->k }, c = 1;

	if (!dot || strcmp(dot, ".w") != 0)
		return 0;
	if (!strcmp(type, "deconv")) {
		d[0] = L->in[0].c;
		d[1] = L->filters;
		c = 0;
	} else if (strcmp(type, "conv") != 0) {
		return 0;
	}
	for (int j = 0; j < ck->nparams; j++) {
		const cdp_ckpt_tensor *t = &ck->params[j];
		if (strcmp(t->name, name) != 0)
			continue;
		if (t->ndim != 4 || t->dims[c] == d[c])
			return 0;
		for (int i = 0; i < 4; i++)
			if (i != c && t->dims[i] != d[i])
				return 0;
		return 1;
	}
	return 0;
}

/* A tensor not taken may be the head's (a head of another class count),
 * or a decoder's the checkpoint lacks (import-torch leaves a decoder out,
 * cdpool's python/README); any other is a checkpoint of another model. */
static void init_each(void *ctx, const char *name, const char *why)
{
	init_list *l = ctx;
	const cdp_layer *L;
	size_t need = strlen(name) + 3;

	if (!why || !l->s)
		return;
	L = init_layer(l->net, name);
	if (!L || (L->index != l->head &&
	           (strncmp(L->name, "decoder.", 8) != 0 || strcmp(why, "missing") != 0))) {
		if (l->nbad++ == 0) {
			snprintf(l->bad, sizeof l->bad, "%s: %s", name, why);
			for (int j = 0; L && j < L->nfrom; j++)
				l->bad_in |= L->from[j] == -1 && init_other_bands(l->ck, L, name);
		}
		return;
	}
	if (l->len + need >= l->cap) {
		char *p = realloc(l->s, l->cap * 2 + need);
		if (!p) {
			free(l->s);
			l->s = NULL;
			return;
		}
		l->s = p;
		l->cap = l->cap * 2 + need;
	}
	l->len += (size_t)snprintf(l->s + l->len, l->cap - l->len, "%s%s", l->n++ ? ", " : "", name);
}

/* Where this run's initial weights came from (t->prov's FROM): --init's
 * file (sha the SHA-256 of its bytes) and the FROM it records itself, or
 * the resumed checkpoint's, so a resumed run keeps it. */
int tr_init_provenance(trainer *t, const unsigned char *sha, char *err, size_t cap)
{
	const cdp_ckpt *up = t->have_ck ? &t->ck : &t->init_ck;
	int rc = CDP_OK;

	if (!t->have_ck)
		rc = cdp_ckpt_add_from(&t->prov, CDP_CKPT_FROM_CKPT, t->o->init, sha);
	for (int i = 0; rc == CDP_OK && i < up->nfrom && t->prov.nfrom < CDP_CKPT_FROM_MAX; i++)
		rc = cdp_ckpt_add_from(&t->prov, up->from[i].kind, up->from[i].name,
		                       up->from[i].sha256);
	if (rc == CDP_EINVAL)
		return tr_fail(err, cap, "--init '%s': a name of 1 to %d bytes expected", t->o->init,
		               CDP_CKPT_FROM_NAME_MAX);
	return rc ? tr_fail(err, cap, "out of memory") : 0;
}

/* --init: every rank reads the checkpoint (rank 0's bytes, broadcast)
 * into t->init_ck, before the standardization: --init-norm takes the
 * weights' input normalization from it, and its bands are checked there. */
int tr_init_fetch(trainer *t, char *err, size_t cap)
{
	unsigned char *buf = NULL, sha[CDP_SHA256_BYTES];
	size_t len = 0;
	char why[256];
	int rc = 0;

	why[0] = '\0';
	if (cdp_dist_bcast_buf(t->rank == 0 ? cdp_ckpt_load_why(t->o->init, &buf, &len, why,
	                                                        sizeof why) : 0, &buf, &len,
	                       &rc) != 0)
		return rc ? tr_fail(err, cap, "--init: cannot read '%s': %s", t->o->init,
		                    why[0] ? why : cdp_strerror(rc)) : -1;
	cdp_sha256_of(buf, len, sha);
	rc = cdp_ckpt_decode_why(buf, len, CDP_CKPT_MAX_RANKS, &t->init_ck, why, sizeof why);
	free(buf);
	if (rc != 0)
		return tr_fail(err, cap, "--init: cannot read '%s': %s", t->o->init, why);
	t->have_init = 1;
	return tr_init_provenance(t, sha, err, cap);
}

/* --init: takes the tensors of the checkpoint tr_init_fetch read by name and
 * shape over the seeded initialization; nothing else of it (optimizer,
 * progress, RNG; its standardization only with --init-norm). */
/* The checkpoint's tensors that have no place in the net, as PyTorch's
 * strict load_state_dict refuses unexpected keys, but for those of the
 * checkpoint's head (a classifier's fc into a segmentation net) and of a
 * module the net lacks altogether (a U-Net's decoder.* into a classifier):
 * a name under a module the net has (layer1.2.conv1.w of a ResNet-34 into a
 * ResNet-18, whose layer1 ends at layer1.1) or a plain layer name it lacks
 * is a checkpoint of another, deeper model. Their count, the first in
 * first[cap]. */
static int init_unused(const cdp_ckpt *ck, const cdp_net *net, char *first, size_t cap)
{
	const char *last = ck->nparams ? ck->params[ck->nparams - 1].name : "";
	size_t hl = strrchr(last, '.') ? (size_t)(strrchr(last, '.') - last) : 0;
	int n = 0;

	for (int i = 0; i < ck->nparams + ck->nbuffers; i++) {
		const char *name = i < ck->nparams ? ck->params[i].name :
		                   ck->buffers[i - ck->nparams].name;
		const char *dot = strrchr(name, '.'), *top = strchr(name, '.');
		size_t ll = dot ? (size_t)(dot - name) : strlen(name), tl = (size_t)(top - name);
		int under = 0;

		if (init_layer(net, name) || (hl && ll == hl && strncmp(name, last, hl) == 0))
			continue;
		if (top && top < dot)       /* a module path: does the net have that module? */
			for (int j = 0; j < net->nlayers && !under; j++)
				under = strncmp(net->layers[j].name, name, tl + 1) == 0;
		if (top && top < dot && !under)
			continue;
		if (n++ == 0)
			snprintf(first, cap, "%s", name);
	}
	return n;
}

int tr_init_weights(trainer *t, char *err, size_t cap)
{
	init_list l = { malloc(256), 0, 256, 0, &t->net, -1, 0, 0, "", &t->init_ck };
	int rc, taken = 0, total = 0, unused;
	char more[48], extra[CDP_CKPT_NAME_MAX + 1] = "";
	size_t n;

	for (int i = 0; i < t->net.nlayers; i++)
		if (t->net.layers[i].w_len + t->net.layers[i].b_len > 0)
			l.head = i;
	rc = cdp_ckpt_take(&t->init_ck, &t->net, init_each, &l, &taken, &total);
	unused = rc == 0 ? init_unused(&t->init_ck, &t->net, extra, sizeof extra) : 0;
	cdp_ckpt_free(&t->init_ck);
	t->have_init = 0;
	if (rc != 0 || !l.s) {
		free(l.s);
		return tr_fail(err, cap, "--init '%s': %s", t->o->init,
		               rc ? cdp_strerror(rc) : "out of memory");
	}
	if (taken == 0) {
		free(l.s);
		return tr_fail(err, cap, "--init '%s': none of its tensors has a name and shape of "
		               "this net's", t->o->init);
	}
	if (l.nbad) {
		free(l.s);
		/* the advice only where the bands are all that differs */
		if (l.bad_in && l.nbad == 1)
			return tr_fail(err, cap, "--init '%s': %s: weights for another number of input "
			               "bands than the pool's %d (import them with python3 -m cdpool "
			               "import-torch --in-channels %d)", t->o->init, l.bad, t->net.in.c,
			               t->net.in.c);
		snprintf(more, sizeof more, " (and %d more tensors)", l.nbad - 1);
		return tr_fail(err, cap, "--init '%s': %s%s: a checkpoint of another model (only "
		               "the head, '%s', may differ)", t->o->init, l.bad, l.nbad > 1 ? more : "",
		               l.head >= 0 ? t->net.layers[l.head].name : "none");
	}
	if (unused) {
		free(l.s);
		snprintf(more, sizeof more, " (and %d more tensors)", unused - 1);
		return tr_fail(err, cap, "--init '%s': %s%s: not in this net: a checkpoint of "
		               "another, deeper model (only its head, and modules this net does "
		               "not have, may be left over)", t->o->init, extra,
		               unused > 1 ? more : "");
	}
	n = strlen(t->o->init) + l.len + 128;
	if ((t->init_note = malloc(n)))
		snprintf(t->init_note, n, "init: %d of the net's %d tensors from '%s'; initialized as "
		         "usual: %s", taken, total, t->o->init, l.n ? l.s : "none");
	free(l.s);
	if (!t->init_note)
		return tr_fail(err, cap, "out of memory");
	if (t->rank == 0 && !t->o->quiet && l.n)
		fprintf(stderr, "cdp-train: %s\n", t->init_note);
	return 0;
}
