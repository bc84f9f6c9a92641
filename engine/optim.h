/* optim.h: the optimizer over the net's contiguous parameter block: its
 * settings, its state (moment blocks, step count), the learning-rate
 * schedule, clipping by global norm and gradient accumulation.
 *
 * One training step, with A = accumulate micro-batches:
 *   for each micro-batch: forward, loss, backward (grads add up);
 *       if (cdp_optim_micro_done(o)) { [all-reduce grads]; cdp_optim_step(o, ...); }
 * cdp_optim_step scales the summed grads by 1/A (the mean over micro-batches,
 * each already a mean over its pixels), computes the global L2 norm, clips
 * to clip_norm (PyTorch's clip_grad_norm_: g *= c / (norm + 1e-6) when
 * norm > c), applies SGD or AdamW (backend.h) at lr(step), counts the step
 * and zeroes grads for the next accumulation.
 *
 * Learning rate at 0-based step t (the t-th update), W = warmup:
 *   t < W:   lr * (f + (1 - f) * t / W)               f = warmup_factor
 *   t >= W:  with u = t - W, the policy:
 *     constant  lr
 *     step      lr * gamma^floor(u / step_size)
 *     cosine    min_lr + (lr - min_lr) (1 + cos(pi u / (T - W))) / 2 for
 *               u < T - W, then min_lr (T = total_steps)
 * This is PyTorch's SequentialLR([LinearLR(f, total_iters=W), policy],
 * milestones=[W]) with CosineAnnealingLR(T_max = T - W, eta_min = min_lr)
 * held at its minimum instead of rising again after T_max.
 *
 * [net] options (cdp_optim_cfg_parse), defaults after '=':
 *   optimizer=sgd|adamw   lr=0.01 (sgd), 0.001 (adamw)
 *   momentum=0.9  nesterov=0                           (sgd)
 *   beta1=0.9  beta2=0.999  adam_eps=1e-8              (adamw)
 *   weight_decay=0 (sgd), 0.01 (adamw)
 *   lr_policy=constant|step|cosine  lr_step=1000  lr_gamma=0.1  lr_min=0
 *   warmup=0  warmup_factor=0.1
 *   clip_norm=0 (off)  accumulate=1
 *
 * Fine-tuning (cdp_optim_set_layers): the parameter block is cut into
 * segments of layers alike in (frozen, lr_mult), and the update runs per
 * segment at lr(step) * lr_mult; a frozen segment is skipped, so its
 * weights take no decay and its moments no update (bitwise unchanged).
 * Its gradients are zero (the layers compute none), so they add nothing
 * to the norm used for clipping. A segment unfrozen later starts with
 * zero moments, which for SGD is PyTorch's first step (buf = g); AdamW's
 * bias correction counts the optimizer's steps, not the segment's.
 * total_steps (for cosine) is not a cfg key: the trainer knows the number of
 * steps from epochs and data size and sets it before cdp_optim_init.
 */
#ifndef CDP_OPTIM_H
#define CDP_OPTIM_H

#include <stddef.h>
#include "backend.h"
#include "cfg/cfg.h"

enum { CDP_OPT_SGD = 1, CDP_OPT_ADAMW = 2 };

/* The ranges of lr= and weight_decay=, [0, MAX], and of momentum=,
 * [0, CDP_OPTIM_MOMENTUM_END) as the float it is kept in (PyTorch's SGD
 * takes any momentum >= 0, but 1 sums every gradient forever and above 1
 * grows); cdp-train's --lr, --weight-decay and --momentum share them. */
#define CDP_OPTIM_LR_MAX       1e6
#define CDP_OPTIM_WD_MAX       1e6
#define CDP_OPTIM_MOMENTUM_END 1

enum { CDP_LR_CONSTANT = 0, CDP_LR_STEP = 1, CDP_LR_COSINE = 2 };

typedef struct cdp_optim_cfg {
	int type;               /* CDP_OPT_* */
	float lr;               /* base learning rate */
	float momentum;         /* sgd; 0: plain SGD */
	int nesterov;           /* sgd; needs momentum > 0 */
	float weight_decay;     /* sgd: L2 added to g; adamw: decoupled */
	float beta1, beta2, eps;/* adamw */
	int policy;             /* CDP_LR_* */
	long step_size;         /* step policy: steps between decays */
	float gamma;            /* step policy: decay factor */
	long total_steps;       /* cosine: T, counted from step 0, > warmup */
	float min_lr;           /* cosine floor */
	long warmup;            /* W: warm-up steps, 0 for none */
	float warmup_factor;    /* f: lr(0) = lr * f */
	float clip_norm;        /* 0: no clipping */
	int accumulate;         /* A >= 1 */
	float ema;              /* decay of the weights' moving average, 0: none;
	                         * kept by the trainer (tools/train), not here */
} cdp_optim_cfg;

/* A run of parameters updated alike (see above). */
typedef struct cdp_optim_seg { size_t off, len; float mult; int frozen; } cdp_optim_seg;

typedef struct cdp_optim {
	cdp_optim_cfg cfg;
	cdp_backend *be;
	size_t n;               /* parameter floats */
	/* device blocks of n floats: adamw m and v; sgd keeps its momentum
	 * buffer in v (m NULL), none without momentum (both NULL) */
	float *m, *v;
	long step;              /* updates applied so far (AdamW's t - 1) */
	/* the schedule's position when >= 0 (the trainer's run step, which
	 * counts steps skipped for a non-finite loss or gradient, as a PyTorch
	 * scheduler stepped every iteration does); -1 (the default): step */
	long sched;
	int micro;              /* micro-batches in grads since the last update */
	double last_norm;       /* grad norm of the last update, before clipping */
	double last_lr;         /* lr of the last update */
	cdp_optim_seg *seg;     /* NULL: one segment, all parameters at lr */
	int nseg;
	double part_sq;         /* cdp_optim_part: the squares so far */
} cdp_optim;

/* SGD defaults as listed above. */
void cdp_optim_defaults(cdp_optim_cfg *c);
/* Reads the options above from section s (the [net] section), marking them
 * used. Errors: "PATH:LINE: option 'k': reason", -1. */
int  cdp_optim_cfg_parse(cdp_optim_cfg *c, const cdp_cfg *cfg, cdp_cfg_section *s,
                         char *err, size_t cap);
/* Consistency of a filled cfg (ranges, nesterov without momentum, cosine
 * without total_steps); 0 or -1 with a reason. */
int  cdp_optim_cfg_check(const cdp_optim_cfg *c, char *err, size_t cap);
/* The schedule above. */
double cdp_optim_lr(const cdp_optim_cfg *c, long step);
/* The rate of o's next update: cdp_optim_lr at o->sched, else at o->step. */
double cdp_optim_next_lr(const cdp_optim *o);
const char *cdp_optim_type_name(int type);
const char *cdp_optim_policy_name(int policy);
/* Number of n-float moment blocks type keeps (0, 1 or 2). */
int  cdp_optim_nblocks(const cdp_optim_cfg *c);

/* Checks c and allocates zeroed moment blocks for nparams parameters. */
int  cdp_optim_init(cdp_optim *o, cdp_backend *be, const cdp_optim_cfg *c, size_t nparams,
                    char *err, size_t cap);
void cdp_optim_free(cdp_optim *o);
struct cdp_net;
/* Segments from the net's layers' frozen flags and lr_mult (net.h); call
 * again after cdp_net_freeze. 0, or -1 (out of memory, or parameters no
 * layer owns) with the reason in err. */
int  cdp_optim_set_layers(cdp_optim *o, const struct cdp_net *net, char *err, size_t cap);
/* Call after each micro-batch's backward; returns 1 when the grads hold
 * `accumulate` micro-batches and cdp_optim_step is due, else 0. */
int  cdp_optim_micro_done(cdp_optim *o);
/* The update described above on params and grads (device, n floats each).
 * Returns 0, or CDP_ERANGE when the gradient norm is not finite: then the
 * params and moments are left as they were, grads are zeroed and the step
 * is not counted, so the caller can log and carry on. */
int  cdp_optim_step(cdp_optim *o, float *params, float *grads);

/* A proximal step after the update, for a penalty rho/2 |w - target|^2
 * that the update left out (cdp-train --sync admm): with d (device, n
 * floats) = target - params, params += c d on every segment that is not
 * frozen, c = eta rho / (1 + eta rho), eta the last update's rate
 * (last_lr) times the segment's lr_mult, as the update applied it. So
 * params = (params + eta rho target) / (1 + eta rho), the minimizer of
 * rho/2 |w - target|^2 + 1/(2 eta) |w - params|^2: stable for any rho,
 * as c < 1, where rho (w - target) added to the gradient makes SGD
 * diverge once eta rho > 2. d is left as it was. */
void cdp_optim_prox(cdp_optim *o, float *params, const float *d, double rho);

/* The same update in parts, for a caller that gets its gradients a range
 * at a time (cdp-train: each bucket of --sync allreduce as soon as it is
 * reduced, while later ones are still in flight). Only without clipping
 * and with accumulate 1 (cdp_optim_parts_ok), since clipping needs the
 * norm of the whole gradient first. cdp_optim_part updates params, grads
 * and moments in [off, off + len) at this step's lr and zeroes those
 * grads; once every float was in exactly one part, cdp_optim_parts_done
 * counts the step. The parameters and moments are those of
 * cdp_optim_step bit for bit (the updates are elementwise); last_norm
 * sums the parts' squares, so its last digits may differ. A gradient
 * that is not finite cannot be refused in advance here: parts_done
 * returns CDP_ERANGE with the step counted and the parameters updated, so
 * the caller must stop (cdp-train --nan-policy stop). */
int  cdp_optim_parts_ok(const cdp_optim *o);
void cdp_optim_part(cdp_optim *o, float *params, float *grads, size_t off, size_t len);
int  cdp_optim_parts_done(cdp_optim *o);

#endif
