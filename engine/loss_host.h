/* loss_host.h: what loss.c and loss_host.c share, private to them: the
 * host's buffers and the terms the backends have no op for (dice,
 * jaccard, tversky, focal, lovasz, label smoothing), computed in double
 * from the batch copied to the host.
 */
#ifndef CDP_LOSS_HOST_H
#define CDP_LOSS_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "loss.h"

/* the host buffers, grown to the batch (a failed allocation makes the
 * loss NaN, which cdp-train reports as such) */
struct cdp_loss_host {
	float *x, *g;        /* logits, gradient (N, k, HW) */
	int32_t *y;          /* labels (N, HW) */
	double *pr, *lp, *dp; /* probabilities, log-probabilities, d/dp (N, k, HW) */
	size_t cap, capy;
	struct lv { double e; int i, fg; } *sv;  /* Lovasz: one image's errors */
	size_t capsv;
};

/* the batch on the host (logits (N, k, HW), labels (N, HW)), with its
 * probabilities and log-probabilities; -1 when out of memory */
int cdp_loss_host_fetch(const cdp_loss *l, int n, int hw, const float *logits,
                        const int32_t *labels);
/* 1: label y counts (neither ignored nor out of the classes) */
int cdp_loss_counted(const cdp_loss *l, int32_t y);
/* the overlap term kind (dice, jaccard, tversky) from its per-class sums
 * part (I, P, T a class), averaged over the classes present */
double cdp_loss_overlap_value(const cdp_loss *l, int kind, const double *part);
/* the host terms' sums of the fetched batch into part (cdp_loss_parts),
 * and their gradient times gmul into the host's g (cdp_loss_finish) */
void cdp_loss_host_parts(const cdp_loss *l, int n, int hw, double *part);
void cdp_loss_host_grad(const cdp_loss *l, int n, int hw, const double *part, double gmul);

#endif
