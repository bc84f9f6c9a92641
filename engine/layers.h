/* layers.h: what the layer files (layers/<type>.c) share with net.c.
 * Private to the engine; users include net.h.
 *
 * Every layer file defines one `const cdp_layer_ops cdp_layer_<type>`
 * whose .type is "<type>", and adds X(<type>) to CDP_LAYERS below: the one
 * list that net.c's registry and the tests (tests/engine/test_model_doc.c
 * holds it against cdp-model(5)) read. The helpers below are implemented
 * in layer_common.c, except the pooling ones.
 */
#ifndef CDP_LAYERS_H
#define CDP_LAYERS_H

#include <stddef.h>
#include "net.h"

/* Every layer type, in the registry's order: X(type) names the cfg section
 * [type] and the table cdp_layer_type. */
#define CDP_LAYERS(X) \
	X(conv) X(deconv) X(bn) X(relu) X(leaky) X(maxpool) X(avgpool) X(gap) \
	X(upsample) X(concat) X(add) X(dropout) X(dense) X(slice) X(diff)

#define CDP_LAYER_DECLARE(type) extern const cdp_layer_ops cdp_layer_##type;
CDP_LAYERS(CDP_LAYER_DECLARE)
#undef CDP_LAYER_DECLARE

/* Elements of one sample of shape s, and of the whole batch. */
static inline size_t cdp_shape_numel(cdp_shape s) { return (size_t)s.c * s.h * s.w; }
static inline size_t cdp_layer_out_count(const cdp_layer *l, const cdp_net *net)
{
	return (size_t)net->n * cdp_shape_numel(l->out);
}

/* Input j's activations (the net input for from == -1) and the gradient
 * to accumulate into, or NULL when none is wanted (the net input while
 * net->input_grad is 0). Write it with beta = l->in_beta[j]. */
const float *cdp_layer_x(const cdp_net *net, const cdp_layer *l, int j);
float *cdp_layer_dx(const cdp_net *net, const cdp_layer *l, int j);
/* 1 when layer i's gradient (its dy, its reader's dx) is bf16 in this
 * backward (net_plan.c, "bf16 gradients"): in bf16, where the one layer that
 * reads i writes it as bf16 (dx_h) and i reads it so (dy_h);
 * CDP_BF16_GRADS=0 in the environment turns it off. i < 0 (the net
 * input): 0. */
int cdp_layer_grad_h(const cdp_net *net, int i);
/* With the bf16 stash (net_plan.c), for a layer type that says so in
 * stash_io: where cdp_layer_x is NULL (the input's fp32 is not live), its
 * bf16 copy (N, C, H, W), else NULL. */
const uint16_t *cdp_layer_xh(const cdp_net *net, const cdp_layer *l, int j);
/* Where forward of l may write the stash's copies itself as it reads and
 * writes the tensors (bn_fwd_train_h), and marks them written (yh_fresh):
 * cdp_layer_copy_in, input j's copy where l is the last forward step to
 * read it in fp32 (the stash would round it right after l's step);
 * cdp_layer_copy_out, l's own (rounded at its last reader's step
 * otherwise: y does not change in between; with l->y NULL the copy is
 * its only output). NULL: not to be written (no stash, or not kept). */
uint16_t *cdp_layer_copy_in(cdp_net *net, const cdp_layer *l, int j);
uint16_t *cdp_layer_copy_out(cdp_layer *l);
/* The samples a layer reading cdp_layer_xh widens into net->wide at once
 * (net_plan.c): 1..net->n */
int cdp_net_stash_group(const cdp_net *net, const cdp_layer *l);

/* Option readers for make(): the section being made, in net->cfg. They
 * mark the key used; errors read "PATH:LINE: option 'k': reason". */
int cdp_lopt_int(cdp_net *net, const cdp_cfg_section *s, const char *key, int def,
                 int min, int max, int *out, char *err, size_t cap);
int cdp_lopt_float(cdp_net *net, const cdp_cfg_section *s, const char *key, float def,
                   float min, float max, float *out, char *err, size_t cap);
/* activation=linear|relu|leaky (default linear) into l->act (0 for linear)
 * and, for leaky, slope= (default 0.01, PyTorch's) into l->slope. */
int cdp_lopt_act(cdp_net *net, const cdp_cfg_section *s, cdp_layer *l, char *err, size_t cap);
/* Exactly one input (the usual case): else an error. */
int cdp_layer_one_input(const cdp_layer *l, char *err, size_t cap);

/* Max and average pooling (layers/pool_common.c): the descriptor at batch n,
 * and make() for their shared options size=, stride=, pad=. */
cdp_pool_desc cdp_pool_layer_desc(const cdp_layer *l, int n);
/* A max pool layer's argmax (N, C, OH, OW), which a bn fused with it
 * writes and reads (net.h, pool_fuse) */
int32_t *cdp_maxpool_idx(const cdp_layer *l);
int cdp_pool_layer_make(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err,
                        size_t cap);

/* He normal: w[i] = N(0,1) * sqrt(2 / fan_in), drawn in order from
 * cdp_rng seeded with cdp_rng_derive(seed, layer index, 0), written to
 * params at w_off; the bias (b_off, b_len) is set to 0. */
void cdp_layer_he_init(cdp_layer *l, cdp_net *net, uint64_t seed, size_t fan_in);

#endif
