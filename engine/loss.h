/* loss.h: the training loss named by [net] loss=, on top of the backend's
 * loss ops (backend.h), for segmentation (logits (N,K,H,W), labels (N,H,W))
 * and classification (HW = 1).
 *
 *   ce        softmax cross-entropy over K = classes channels, as PyTorch's
 *             CrossEntropyLoss(weight=class_weights, ignore_index=ignore,
 *             reduction='mean'): sum_i w[y_i] l_i / sum_i w[y_i]
 *   bce       sigmoid binary cross-entropy on one channel, target label != 0,
 *             as BCEWithLogitsLoss (mean over the pixels not ignored)
 *   dice      soft Dice on one channel over the whole batch:
 *             1 - (2 sum(p t) + smooth) / (sum p + sum t + smooth)
 *   bce+dice  the sum of the two
 * Pixels labelled `ignore` count for nothing. When no pixel counts, the CE/BCE
 * term is 0 with a zero gradient (PyTorch would give NaN).
 *
 * [net] options read by cdp_loss_init_cfg (classes come from the built net,
 * net->classes, which is 2 for the binary losses):
 *   loss=ce|bce|dice|bce+dice   (default ce)
 *   ignore=I                    (default -1: no label is ignored)
 *   class_weights=w0,w1,...     (ce only; K values >= 0, not all 0)
 *   dice_smooth=S               (default 1)
 */
#ifndef CDP_LOSS_H
#define CDP_LOSS_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "cfg/cfg.h"

enum { CDP_LOSS_CE = 1, CDP_LOSS_BCE = 2, CDP_LOSS_DICE = 3, CDP_LOSS_BCE_DICE = 4 };

#define CDP_LOSS_MAX_CLASSES 65536

typedef struct cdp_loss {
	cdp_backend *be;
	int kind;           /* CDP_LOSS_* */
	int classes;        /* classes in labels and metrics: K for ce, 2 otherwise */
	int k;              /* channels of the logits: K for ce, 1 otherwise */
	int ignore;
	float smooth;
	float *class_w;     /* device (K) or NULL */
} cdp_loss;

typedef struct cdp_loss_result {
	double loss;        /* the value minimised: ce/bce mean (+ dice) */
	double sum;         /* ce/bce summed over counted pixels (weighted) */
	double count;       /* counted pixels (ce: their summed class weights) */
	double dice;        /* the Dice term, 0 when not used */
} cdp_loss_result;

/* CDP_LOSS_* for "ce", "bce", "dice", "bce+dice"; -1 otherwise. */
int cdp_loss_kind(const char *name);
const char *cdp_loss_name(int kind);

/* Sets up loss `name` for `classes` classes (2 for the binary losses);
 * class_w: nw weights (nw == classes) or NULL; copies them to the device.
 * Returns 0, or -1 with a reason in err. */
int cdp_loss_init(cdp_loss *l, cdp_backend *be, const char *name, int classes, int ignore,
                  const float *class_w, int nw, float smooth, char *err, size_t cap);
/* The same from the [net] section s of a parsed cfg (options above); marks
 * the options used. Errors read "PATH:LINE: option 'k': reason". */
int cdp_loss_init_cfg(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg, cdp_cfg_section *s,
                      int classes, char *err, size_t cap);
void cdp_loss_free(cdp_loss *l);

/* Host-side label check before upload: every label must be `ignore` or in
 * [0, classes). Returns 0, or -1 with the first bad index in *bad. */
int cdp_loss_check_labels(const cdp_loss *l, const int32_t *labels, size_t n, size_t *bad);

/* logits (N, k, HW) and labels (N, HW) on the device; writes dlogits
 * (N, k, HW) = d(loss)/d(logits) for this batch's mean and fills r.
 * cdp_loss_parts + cdp_loss_finish with this batch's own parts, gmul 1. */
void cdp_loss_compute(const cdp_loss *l, int n, int hw, const float *logits,
                      const int32_t *labels, float *dlogits, cdp_loss_result *r);

/* A batch split over ranks (cdp-train --sync allreduce) or over many
 * batches (validation): neither the CE/BCE mean nor Dice is a mean of the
 * parts' losses, but both are functions of sums over the parts. part[]:
 * the CE/BCE loss sum, the counted pixels (ce: their weights), and
 * Dice's sum p t, sum p, sum t (0 for the losses without Dice). */
#define CDP_LOSS_NPART 5

/* This batch's part[]; dlogits (N, k, HW) hold the CE/BCE gradient of the
 * loss sum (not yet divided by any count), 0 for loss=dice. */
void cdp_loss_parts(const cdp_loss *l, int n, int hw, const float *logits,
                    const int32_t *labels, float *dlogits, double part[CDP_LOSS_NPART]);
/* After cdp_loss_parts on the same batch, with part[] the totals of the
 * whole batch (every part's, added): dlogits = gmul * d(the whole batch's
 * loss)/d(this part's logits), and r the whole batch's loss. cdp-train
 * passes gmul = j, as the all-reduce then averages over j ranks. */
void cdp_loss_finish(const cdp_loss *l, int n, int hw, const float *logits,
                     const int32_t *labels, const double part[CDP_LOSS_NPART], double gmul,
                     float *dlogits, cdp_loss_result *r);
/* r = the loss of totals part[], without a gradient. */
void cdp_loss_of(const cdp_loss *l, const double part[CDP_LOSS_NPART], cdp_loss_result *r);

#endif
