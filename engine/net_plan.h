/* net_plan.h: the memory of a built net's batch (net_plan.c), private to
 * net.c and net_plan.c: every layer's output, the gradients between
 * layers, and with the bf16 stash the arena and the bf16 copies (net.c's
 * build and set_precision allocate them; resize and free free them).
 */
#ifndef CDP_NET_PLAN_H
#define CDP_NET_PLAN_H

#include <stddef.h>
#include "net.h"

/* 1: the net's input (src -1) or layer src's output is read by some layer */
int cdp_net_has_consumer(const cdp_net *net, int src);

/* 1: the batch is to be allocated with the stash (bf16, unless
 * CDP_BF16_STASH=0) */
int cdp_net_want_stash(const cdp_net *net);

/* The layers' outputs y (each its own, or the stash's arena and bf16
 * copies, act_plan): allocated for net->n samples; 0, or -1 out of memory
 * (what was allocated is left for cdp_net_free_acts) */
int cdp_net_alloc_acts(cdp_net *net);
void cdp_net_free_acts(cdp_net *net);

/* Everything a batch of net->n samples needs: the outputs
 * (cdp_net_alloc_acts), the gradient slots, the fused pools' indices, the
 * workspaces; 0, or -1 with err set (what was allocated is freed) */
int cdp_net_alloc_batch(cdp_net *net, char *err, size_t cap);
void cdp_net_free_batch(cdp_net *net);

#endif
