/* loss.h: the training loss named by [net] loss=, on top of the backend's
 * loss ops (backend.h), for segmentation (logits (N,k,H,W), labels (N,H,W))
 * and classification (HW = 1).
 *
 * loss= is one term or a weighted sum of terms joined by '+' (at most
 * CDP_LOSS_MAX_TERMS, each once): loss=ce+dice, loss_weights=1,0.5 is
 * 1 ce + 0.5 dice. The head is either softmax over k = K = classes channels
 * (a term ce, or classes > 2 without bce) or sigmoid on k = 1 channel with
 * classes = 2 (a term bce, or classes = 2 without ce): the "binary forms".
 * Pixels labelled `ignore` count for nothing. With p the softmax (sigmoid)
 * probabilities, t the one-hot labels (t = label != 0), over the counted
 * pixels i of the whole batch:
 *
 *   ce       softmax cross-entropy, as PyTorch's CrossEntropyLoss(weight=
 *            class_weights, ignore_index=ignore, label_smoothing=e):
 *            l_i = (1-e) w[y_i] (-log p_{y_i}) + e/K sum_c w[c] (-log p_c),
 *            loss = sum_i l_i / sum_i w[y_i] (w = 1 without class_weights)
 *   bce      sigmoid binary cross-entropy, as BCEWithLogitsLoss (mean)
 *   focal    mean over the counted pixels of -a_t (1-p_t)^g log p_t, p_t
 *            the probability of the true class (sigmoid: p or 1-p),
 *            g = focal_gamma, a_t = focal_alpha[y] (one value per class) or
 *            a scalar a: softmax a_t = a, sigmoid a_t = a for label 1 and
 *            1-a for label 0 (torchvision's sigmoid_focal_loss); default 1
 *   dice, jaccard, tversky
 *            per class c: I_c = sum p_c t_c, P_c = sum p_c, T_c = sum t_c,
 *            s = dice_smooth, eps = 1e-7, A = tversky_alpha, B = tversky_beta:
 *              dice     (2 I + s) / max(P + T + s, eps)
 *              jaccard  (I + s) / max(P + T - I + s, eps)
 *              tversky  (I + s) / max(I + A (P - I) + B (T - I) + s, eps)
 *            softmax: loss = 1/K sum_c [T_c > 0] (1 - score_c), as smp's
 *            DiceLoss/JaccardLoss/TverskyLoss in multiclass mode (classes
 *            absent from the batch count 0, the mean is over all K);
 *            sigmoid: loss = 1 - score of the one class (label != 0), also
 *            when it is absent (the binary dice of earlier releases)
 *   lovasz   Lovasz-softmax (Berman et al. 2018) per image, mean over the
 *            images of the batch: per image, the mean over the classes present
 *            in its counted pixels of the Lovasz extension of the Jaccard loss
 *            on the errors |t_c - p_c| (sigmoid: the class label != 0 only,
 *            present or not); an image without counted pixels counts 0
 *
 * Regression (pixel values, a pool of value labels): one term alone, on
 * k = T = outputs channels of predictions against float targets (N, T, HW),
 * NaN where there is no target (not counted), with d = pred - target:
 *   mse      mean of d^2 (PyTorch's MSELoss)
 *   l1       mean of |d| (L1Loss)
 *   huber    mean of 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
 *            (HuberLoss(delta = huber_delta))
 * each the loss sum over the counted elements divided by their count
 * (cdp_loss_reg_parts, cdp_loss_reg_finish; backend op reg_loss).
 *
 * Every term is a function of sums over the batch (an image's Lovasz term
 * is one of them), so a batch split over ranks has the parts' sums added
 * (cdp_loss_parts, cdp_loss_finish). When no pixel counts, a mean term is
 * 0 with a zero gradient (PyTorch would give NaN). ce without label
 * smoothing, bce and sigmoid dice run as backend ops; the other terms on
 * the host (the logits copied there and the gradient back).
 *
 * [net] options read by cdp_loss_init_cfg (classes come from the built net,
 * net->classes):
 *   loss=TERM[+TERM...]         (default ce)
 *   loss_weights=w1,w2,...      (one number >= 0 per term, not all 0; default all 1)
 *   ignore=I                    (default -1: no label is ignored)
 *   class_weights=w0,w1,...     (ce only; K values >= 0, not all 0; of a
 *                               multi-label head: its K positive weights)
 *   label_smoothing=E           (ce only; 0 to 1, default 0)
 *   dice_smooth=S               (dice, jaccard, tversky; default 1)
 *   focal_gamma=G               (default 2, >= 0)
 *   focal_alpha=A or a0,a1,...  (one value per class; default none: 1)
 *   tversky_alpha=A, tversky_beta=B   (default 0.5 each, >= 0)
 *   huber_delta=D               (huber; > 0, default 1)
 */
#ifndef CDP_LOSS_H
#define CDP_LOSS_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "cfg/cfg.h"

/* term kinds; CDP_LOSS_BCE_DICE is only a kind of the whole loss */
enum {
	CDP_LOSS_CE = 1, CDP_LOSS_BCE = 2, CDP_LOSS_DICE = 3, CDP_LOSS_BCE_DICE = 4,
	CDP_LOSS_JACCARD = 5, CDP_LOSS_TVERSKY = 6, CDP_LOSS_FOCAL = 7, CDP_LOSS_LOVASZ = 8,
	CDP_LOSS_SUM = 9, CDP_LOSS_MSE = 10, CDP_LOSS_L1 = 11, CDP_LOSS_HUBER = 12
};

#define CDP_LOSS_MAX_CLASSES 65536
#define CDP_LOSS_MAX_TERMS 4
#define CDP_LOSS_EPS 1e-7

typedef struct cdp_loss_term {
	int kind;           /* CDP_LOSS_CE .. CDP_LOSS_LOVASZ, not BCE_DICE */
	float weight;
	int off, np;        /* its sums: part[off .. off + np) */
	int host;           /* computed on the host (loss.c) */
} cdp_loss_term;

/* Everything cdp_loss_init_opt takes; cdp_loss_opt_default fills the
 * defaults above. The arrays are copied. */
typedef struct cdp_loss_opt {
	const char *name;
	int classes, ignore;
	const float *class_w; int nw;
	const float *weights; int nweights;   /* loss_weights, NULL: all 1 */
	const float *alpha; int nalpha;       /* focal_alpha, NULL: none */
	float smooth, gamma, tv_alpha, tv_beta, label_smoothing;
	float huber_delta;                    /* huber: > 0, default 1 */
} cdp_loss_opt;

typedef struct cdp_loss {
	cdp_backend *be;
	int kind;           /* the one term's CDP_LOSS_*, BCE_DICE, or SUM */
	char name[64];      /* loss= as given */
	int classes;        /* classes in labels and metrics: K, 2 for sigmoid */
	int k;              /* channels of the logits: K, or 1 for sigmoid */
	int ignore;
	float smooth, gamma, tv_alpha, tv_beta, label_smoothing;
	float huber_delta;
	int reg;            /* a regression loss: CDP_REG_* + 1 (backend.h), else 0 */
	int nterm, npart;   /* terms, and sums in part[] (cdp_loss_parts) */
	cdp_loss_term term[CDP_LOSS_MAX_TERMS];
	float *class_w;     /* device (K) or NULL */
	float *cw_host;     /* host copy (K) or NULL */
	int ncw;
	float *alpha;       /* host (classes): focal a_t by label */
	float *pos_w;       /* host (npos_w) or NULL: cdp_loss_set_pos_weight */
	int npos_w;
	struct cdp_loss_host *host;   /* host buffers of the host terms, or NULL */
} cdp_loss;

typedef struct cdp_loss_result {
	double loss;        /* the value minimised: sum of weight * term */
	double sum;         /* ce/bce summed over counted pixels (weighted) */
	double count;       /* counted pixels (ce: their summed class weights) */
	double dice;        /* the dice term, 0 when not used */
	double term[CDP_LOSS_MAX_TERMS];   /* each term's value, unweighted */
} cdp_loss_result;

/* CDP_LOSS_* of one term's name ("ce" .. "lovasz", "mse", "l1", "huber");
 * -1 otherwise. */
int cdp_loss_kind(const char *name);
const char *cdp_loss_name(int kind);

/* Splits loss= into term kinds: returns the number of terms (1 to
 * CDP_LOSS_MAX_TERMS), or -1 with a reason in err. *softmax: 1 when the
 * head is softmax over `classes` channels, 0 for a 1-channel sigmoid head
 * (classes <= 0: as decided by the terms alone, 2 for the binary losses)
 * and for a regression loss (then `classes` is the outputs T);
 * -1 in err when ce and bce are mixed, bce has classes > 2 or a regression
 * loss has company. */
int cdp_loss_parse(const char *name, int classes, int kind[CDP_LOSS_MAX_TERMS], int *softmax,
                   char *err, size_t cap);

void cdp_loss_opt_default(cdp_loss_opt *o);
/* Sets up the loss; copies class weights to the device. Returns 0, or -1
 * with a reason in err. */
int cdp_loss_init_opt(cdp_loss *l, cdp_backend *be, const cdp_loss_opt *o, char *err,
                      size_t cap);
/* The same with the other options at their defaults. */
int cdp_loss_init(cdp_loss *l, cdp_backend *be, const char *name, int classes, int ignore,
                  const float *class_w, int nw, float smooth, char *err, size_t cap);
/* The same from the [net] section s of a parsed cfg (options above); marks
 * the options used. Errors read "PATH:LINE: option 'k': reason". */
int cdp_loss_init_cfg(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg, cdp_cfg_section *s,
                      int classes, char *err, size_t cap);
/* The same for a multi-label head of k outputs (net.h's multi): the
 * binary loss=bce (classes 2) over its k labels, class_weights= being k
 * positive weights (cdp_loss_set_pos_weight below), as cdp-train
 * --class-weights gives them. */
int cdp_loss_init_cfg_multi(cdp_loss *l, cdp_backend *be, const cdp_cfg *cfg,
                            cdp_cfg_section *s, int k, char *err, size_t cap);
/* A loss=bce alone weighs each positive label at position p of a sample's
 * HW by w[p] (HW = n at every call): PyTorch's BCEWithLogitsLoss(
 * pos_weight=w), l = -(w[p] y log s(z) + (1 - y) log(1 - s(z))), the mean
 * over the counted labels. For a multi-label head, whose HW is its K
 * classes (cdp-train), w is the per-class positive weight. The term then
 * runs on the host. 0, or -1 with a reason in err (another loss, a weight
 * not finite or < 0, out of memory). */
int cdp_loss_set_pos_weight(cdp_loss *l, const float *w, int n, char *err, size_t cap);
/* l set up again with class weights cw (K) in place of its own. */
int cdp_loss_reweight(cdp_loss *l, const float *cw, int nw, char *err, size_t cap);
void cdp_loss_free(cdp_loss *l);
/* 1 when a term of the loss is `kind` */
int cdp_loss_has(const cdp_loss *l, int kind);

/* Host-side label check before upload: every label must be `ignore` or in
 * [0, classes). Returns 0, or -1 with the first bad index in *bad. */
int cdp_loss_check_labels(const cdp_loss *l, const int32_t *labels, size_t n, size_t *bad);

/* logits (N, k, HW) and labels (N, HW) on the device; writes dlogits
 * (N, k, HW) = d(loss)/d(logits) for this batch and fills r.
 * cdp_loss_parts + cdp_loss_finish with this batch's own parts, gmul 1. */
void cdp_loss_compute(const cdp_loss *l, int n, int hw, const float *logits,
                      const int32_t *labels, float *dlogits, cdp_loss_result *r);

/* A batch split over ranks (cdp-train --sync allreduce) or over many
 * batches (validation): no term is a mean of the parts' losses, but each
 * is a function of sums over the parts. part[l->npart]: per term, ce/bce/
 * focal: the loss sum and the counted pixels (ce: their weights); dice,
 * jaccard, tversky: sum p t, sum p, sum t per class (sigmoid: one class);
 * lovasz: the sum of the images' losses and the number of images. */

/* This batch's part[]; dlogits (N, k, HW) hold the backend ce/bce term's
 * gradient of its loss sum (not yet divided by any count), else 0. */
void cdp_loss_parts(const cdp_loss *l, int n, int hw, const float *logits,
                    const int32_t *labels, float *dlogits, double *part);
/* After cdp_loss_parts on the same batch, with part[] the totals of the
 * whole batch (every part's, added): dlogits = gmul * d(the whole batch's
 * loss)/d(this part's logits), and r the whole batch's loss. cdp-train
 * passes gmul = j, as the all-reduce then averages over j ranks. */
void cdp_loss_finish(const cdp_loss *l, int n, int hw, const float *logits,
                     const int32_t *labels, const double *part, double gmul,
                     float *dlogits, cdp_loss_result *r);
/* r = the loss of totals part[], without a gradient. */
void cdp_loss_of(const cdp_loss *l, const double *part, cdp_loss_result *r);

/* 1 when kind (CDP_LOSS_*) is a regression loss. */
int cdp_loss_kind_is_reg(int kind);
/* Regression (l->reg): pred and target (N, T, HW) on the device, target NaN
 * where there is none. parts: part[0..2) = the loss sum and the count of
 * this batch, dpred its sum's gradient; finish, with part[] the whole
 * batch's totals: dpred *= gmul / count, r the whole batch's loss; compute
 * both for a batch of its own. */
void cdp_loss_reg_parts(const cdp_loss *l, int n, int hw, const float *pred,
                        const float *target, float *dpred, double *part);
void cdp_loss_reg_finish(const cdp_loss *l, int n, int hw, const double *part, double gmul,
                         float *dpred, cdp_loss_result *r);
void cdp_loss_reg_compute(const cdp_loss *l, int n, int hw, const float *pred,
                          const float *target, float *dpred, cdp_loss_result *r);

#endif
