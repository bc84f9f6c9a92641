/* net.h: a network built from a model cfg, and its layers.
 *
 * As in darknet, every layer type is one file (layers/<type>.c) with the same
 * verbs: make (parse its cfg section, check and compute shapes, declare its
 * parameters), init (He initialisation), forward, backward. The net owns:
 *  - params: ONE contiguous float block with every layer's parameters, and
 *    grads: one block of the same size and layout, so data-parallel training
 *    all-reduces a few large buffers (bucketed by layer ranges);
 *  - buffers: one block of non-trained state (batchnorm running mean/var),
 *    checkpointed and averaged across ranks, never touched by the optimizer;
 *  - activations and their gradients, one (N, C, H, W) pair per layer
 *    (the gradients share buffers by liveness; in bf16 so do the
 *    activations, with bf16 copies of those backward reads: net_plan.c);
 *  - one workspace shared by all layers, sized for the largest need.
 * Parameter order in the block is layer order, and within a layer weight then
 * bias (conv/dense), gamma then beta (batchnorm) - the order of PyTorch's
 * named_parameters() for the same model, which the parity tests rely on.
 *
 * Shapes are per sample (C, H, W); the batch size N is fixed at cdp_net_build
 * and changed with cdp_net_resize (reallocates activations only).
 */
#ifndef CDP_NET_H
#define CDP_NET_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "cfg/cfg.h"

#define CDP_MAX_FROM 8
#define CDP_NET_MAX_LAYERS 10000   /* layers of a net at most (cdp-model(5)) */
#define CDP_LAYER_NAME 64

typedef struct cdp_net cdp_net;
typedef struct cdp_layer cdp_layer;

typedef struct cdp_shape { int c, h, w; } cdp_shape;

typedef struct cdp_layer_ops {
	const char *type;    /* cfg section name: "conv", "deconv", "bn", ... */
	/* Parse s, set l->out and declare params (cdp_net_param) and buffers;
	 * l->in[] is filled by the caller. On error write a one-line reason
	 * (without the layer name/line, the caller adds them) and return -1. */
	int  (*make)(cdp_layer *l, cdp_net *net, const cdp_cfg_section *s, char *err, size_t cap);
	/* Bytes of shared workspace needed at batch n (may be NULL) */
	size_t (*workspace)(cdp_layer *l, cdp_net *net);
	/* Allocate per-layer state at batch n (argmax, masks, saved stats); may be NULL */
	int  (*alloc)(cdp_layer *l, cdp_net *net);
	void (*init)(cdp_layer *l, cdp_net *net, uint64_t seed);
	void (*forward)(cdp_layer *l, cdp_net *net);
	/* From l->dy: writes input j's gradient with beta l->in_beta[j] (0
	 * overwrites, 1 adds) and adds to its parameter gradients in net->grads */
	void (*backward)(cdp_layer *l, cdp_net *net);
	void (*free)(cdp_layer *l, cdp_net *net);
	/* What backward reads besides dy (CDP_BWD_*), for the bf16 stash
	 * (net_plan.c): 0 means unknown, taken as CDP_BWD_X | CDP_BWD_Y, so a
	 * layer type that does not say keeps what it may need. */
	unsigned bwd_reads;
	/* NULL, or what backward reads for this layer and backend now
	 * (CDP_BWD_X, CDP_BWD_Y), in place of bwd_reads */
	unsigned (*bwd_reads_now)(const cdp_layer *l, const cdp_net *net);
	/* 1: backward passes dy to every input unchanged, so an input it alone
	 * reads may share its dy buffer (net_plan.c, dy_slots); backward then
	 * writes nothing for an input whose gradient is l->dy itself */
	int dy_through;
	/* What the layer type can do with the bf16 stash (net_plan.c, CDP_STASH_*):
	 * 0 for a type that reads and writes fp32 only */
	unsigned stash_io;
	/* With CDP_STASH_IN_*: 1 when this layer's ops read the copy as it is
	 * (the backend's conv_takes_xh), so the net need not size net->wide
	 * for it; NULL: never */
	int (*stash_direct)(const cdp_layer *l, const cdp_net *net);
	/* 1 when forward can write its output to its bf16 copy alone (l->y
	 * NULL) for this layer and backend now, from inputs it reads in fp32
	 * (batchnorm: its statistics need them) or as the stash_io says
	 * (a convolution); NULL: never */
	int (*stash_alone)(const cdp_layer *l, const cdp_net *net);
	/* 1 when forward, for this layer and backend now, can read its one
	 * input from the inputs of a concat where they lie (the backend's
	 * conv_takes_split), so that an inference net need not make the
	 * concat's output (net_plan.c, virt); NULL: never */
	int (*takes_split)(const cdp_layer *l, const cdp_net *net);
	/* The bf16 gradients (net_plan.c; in bf16 only): dy_h, 1 when backward,
	 * for this layer and backend now, reads its dy as bf16 (the
	 * backend's conv_takes_dyh, bn_takes_gh); dx_h, 1 when it writes its
	 * input's gradient as bf16 (conv_writes_dxh, bn_takes_gh) where it
	 * is the only writer (beta 0). NULL: never. */
	int (*dy_h)(const cdp_layer *l, const cdp_net *net);
	int (*dx_h)(const cdp_layer *l, const cdp_net *net);
} cdp_layer_ops;

enum {
	/* forward reads an input whose fp32 is not live from its bf16 copy
	 * (cdp_layer_xh): a convolution, which rounds its operands anyway */
	CDP_STASH_IN_FWD = 1,
	/* backward likewise (a convolution's filter gradient) */
	CDP_STASH_IN_BWD = 2,
	/* forward writes its output to its bf16 copy alone where l->y is NULL
	 * (concat: its values are its inputs', so rounding them is all it
	 * does); it then reads its inputs from their copies too */
	CDP_STASH_OUT = 4,
	/* with CDP_STASH_IN_BWD or CDP_STASH_IN_EXACT: only where
	 * stash_direct says so (a batchnorm cannot run a group of samples at
	 * a time) */
	CDP_STASH_DIRECT_ONLY = 8,
	/* forward reads an input whose fp32 is not live from its bf16 copy
	 * where the copy holds the input's values themselves
	 * (CDP_STASH_EXACT: batchnorm, whose statistics must not change) */
	CDP_STASH_IN_EXACT = 16,
	/* what stash_alone writes is the output's values themselves, not a
	 * rounding of them (a bf16 convolution's output holds bf16 values:
	 * backend.h), so a CDP_STASH_IN_EXACT reader may take it */
	CDP_STASH_EXACT = 32
};

enum {
	CDP_BWD_X = 1,        /* its inputs' activations */
	CDP_BWD_Y = 2,        /* its own output */
	CDP_BWD_Y_ACT = 4,    /* its own output when it has a fused activation (l->act) */
	CDP_BWD_NONE = 8      /* neither (only dy and its own state) */
};

struct cdp_layer {
	const cdp_layer_ops *ops;
	char name[CDP_LAYER_NAME];
	int index, cfg_line;
	int from[CDP_MAX_FROM];     /* input layer indices; -1 = the net input */
	int nfrom;
	cdp_shape in[CDP_MAX_FROM], out;
	/* hyper-parameters (meaning per type) */
	int filters, k, stride, pad, dil, bias, mode, act;
	float slope, p, momentum, eps;
	/* parameters and buffers: offsets (in floats) into the net's blocks */
	size_t w_off, w_len, b_off, b_len, buf_off, buf_len;
	/* activations (N, out.c, out.h, out.w) and their gradient, device memory.
	 * Layers whose gradients are never live at once share one dy buffer, so
	 * an inner layer's dy is valid only while backward runs through it; the
	 * output layer's dy is its own (the loss writes it before backward).
	 * In bf16 an inner dy may hold bf16 values (uint16_t, in the first
	 * half of its bytes) where cdp_layer_grad_h says so (layers.h). */
	float *y, *dy;
	/* The bf16 stash (net_plan.c; only while net->stash): y_fwd and y_bwd, the
	 * fp32 buffers y points at in forward and in backward (in net->act_arena,
	 * shared with other layers by liveness; y is NULL where it is not live), yh the bf16
	 * copy kept between them (NULL: backward does not read this tensor),
	 * fwd_end the last layer whose forward reads it in fp32 (-1: it has no
	 * fp32, its layer writes yh alone), bwd_first and bwd_last the first
	 * and last layers (in backward order) whose backward reads it in fp32
	 * (-1: none; a convolution reads yh). */
	float *y_fwd, *y_bwd;
	uint16_t *yh;
	int fwd_end, bwd_first, bwd_last;
	int keep;                   /* 1: yh is (to be) allocated */
	/* 1: a forward step of this pass already wrote yh from y (a batchnorm
	 * writes its input's and its own copy as it reads and writes them:
	 * cdp_layer_copy_*), so the stash does not round y again at fwd_end */
	int yh_fresh;
	void *state;                /* layer-private device/host state */
	/* beta for writing input j's gradient in backward: 0 (overwrite) when
	 * this layer is the first, in backward order, to write it, else 1. The
	 * net sets it so that no activation gradient needs zeroing per step. */
	float in_beta[CDP_MAX_FROM];
	int consumed;               /* 1: a later layer reads this one's output */
	/* the one layer that reads this one's output, once (its input 0),
	 * else -1 (none, several, or as another input): cdp_layer_grad_h */
	int dy_reader;
	/* fine-tuning (cdp_net_freeze, lr_mult=): a frozen layer computes no
	 * parameter gradient (they stay zero) and the optimizer skips its
	 * parameters; a frozen bn normalises with its running statistics in
	 * training too and leaves them as they are (FrozenBatchNorm2d), its
	 * backward passing dy * gamma / sqrt(running_var + eps) to its input.
	 * lr_mult scales the learning rate of the layer's parameters. */
	int frozen;
	float lr_mult;
	/* weights=SRC: 1 + the index of the earlier layer (of the same type
	 * and parameter shapes) whose parameters and buffers this one uses;
	 * 0 for its own. A sharing layer's w_off, b_off and buf_off point at
	 * SRC's and its w_len, b_len and buf_len are 0: it declares nothing,
	 * is not initialised, checkpointed or stepped by the optimizer on its
	 * own, and its backward adds its parameter gradients to SRC's (the
	 * sum of both uses, as PyTorch's for a module called twice). It
	 * follows SRC's --freeze. */
	int share;
	/* A net built by cdp_net_build_infer fuses a conv (no activation of
	 * its own) with the eval-mode bn that is its only reader (the
	 * backend's conv_fwd_bn): on the conv 1 + the bn's index, on the bn
	 * 1 + the conv's; 0 elsewhere. In eval mode (net->train 0) the conv
	 * then writes the bn's output and the bn's forward does nothing; the
	 * numbers are those of the two layers. */
	int fuse;
	/* 1: in a net built by cdp_net_build_infer, a concat whose every
	 * reader takes its inputs where they lie (takes_split): it has no
	 * output (y NULL), its forward does nothing, and its inputs live on
	 * until its last reader; set where the batch is laid out */
	int virt;
	/* A training net fuses a bn whose only reader is a max pool into that
	 * pool where the backend does (bn_pool_takes): on each 1 + the other's
	 * index, 0 elsewhere (set where the batch is laid out; the pool's
	 * output lives from the bn's step, and its gradient until the bn's).
	 * pool_on: the bn's last forward ran them as one (training, neither
	 * frozen nor synchronized), so the pool's forward and backward do
	 * nothing and the bn's backward reads the pool's gradient. The
	 * numbers are those of the two layers. */
	int pool_fuse, pool_on;
};

struct cdp_net {
	cdp_backend *be;
	int n;                      /* batch size */
	cdp_shape in;               /* input (C, H, W) */
	int nlayers;
	int input_consumed;         /* 1: some layer reads the net input */
	cdp_layer *layers;
	int out_layer;              /* index of the output layer (last by default) */
	int classes;                /* output channels of the head */
	/* 1: a multi-label head, K = classes independent sigmoids trained by
	 * loss=bce against a multi-hot vector: loss=bce alone and a head of
	 * classes= channels (cdp-model(5)); 0 otherwise */
	int multi;
	int train;                  /* 1: training mode (bn batch stats, dropout) */
	/* 1: built by cdp_net_build_infer: no gradients of activations or of
	 * the input, the outputs in act_arena by their forward uses only */
	int infer;
	/* An inference net runs its layers over the batch in passes of pass
	 * samples (<= n; the backend's infer_pass_bytes, or CDP_INFER_PASS):
	 * its arena, workspace and layer state are sized for a pass, so a
	 * large batch takes a pass's activation memory. x holds all n
	 * samples, and with pass < n the
	 * output does too, in out (its own buffer, counted in act_bytes);
	 * the logits do not depend on pass. n in every other net. */
	int pass;
	float *out;
	uint64_t step_seed;         /* per-step seed for dropout masks */
	float *x, *dx;              /* net input (N, C, H, W) on device */
	float *params, *grads;      /* contiguous blocks of nparams floats */
	float *buffers;             /* nbuffers floats */
	size_t nparams, nbuffers;
	void *ws; size_t ws_bytes;  /* shared workspace */
	/* 1: the activations backward reads are kept in bf16 between forward
	 * and backward (net_plan.c's "bf16 stash"): set when the batch is
	 * allocated with the backend in CDP_PREC_BF16, unless CDP_BF16_STASH=0
	 * is in the environment. act_arena: the fp32 outputs' shared block. */
	int stash;
	void *act_arena;
	/* With the stash: where a convolution widens the bf16 copy of its
	 * input, cdp_net_stash_group samples at a time (wide_floats floats;
	 * counted in act_bytes) */
	float *wide;
	size_t wide_floats;
	/* Bytes the net allocated for the activations of a batch: act_bytes
	 * for the layers' outputs (every y in fp32; with the stash its fp32
	 * buffers and the bf16 copies), dact_bytes for their gradients (the
	 * dy buffers). Not the net input, workspace or layer state. */
	size_t act_bytes, dact_bytes;
	char *cfg_text;             /* the cfg source (owned), stored in checkpoints */
	/* [net] options */
	char loss[64];              /* [net] loss= (loss.h) */
	int ignore;                 /* label ignore index */
	/* 1: backward also writes dx, the gradient of the net input (default 0:
	 * dx stays zero and the first layers skip that work) */
	int input_grad;
	/* [net] bn_sync=1: training-mode batchnorm takes its statistics, and
	 * its backward its two means, from per-channel sums that bn_reduce
	 * (when set: cdp-train sets it to the sum over ranks) adds up across
	 * the processes of a data-parallel run, in place (layers/bn.c) */
	int bn_sync;
	void (*bn_reduce)(double *sums, size_t n, void *ctx);
	void *bn_reduce_ctx;
	cdp_cfg *cfg;               /* the parsed cfg, only during cdp_net_build */
	/* Per-layer profile (bench/engine_bench -P), NULL when off: nlayers
	 * seconds each, added to by every forward / backward. Profiling waits
	 * for the device before and after each layer (be->sync), so a
	 * profiled step is slower than a plain one; the shares are the point. */
	double *prof_fwd, *prof_bwd;
};

/* Builds a net from cfg text (the contents of a cfg file; `path` only for
 * messages) for inputs of (in_c, in_h, in_w) at batch n, with overrides
 * "key=value" applied to the [net] section (e.g. width=16, depth=4,
 * classes=2). Errors name the layer and cfg line:
 *   "unet.cfg:42: layer 'up3' (concat): shapes (64,32,32) and (64,31,31) differ"
 * Returns 0, or -1 with the message in err (CDP_CFG_EUNKNOWN when the
 * cfg names a [net] key no part of the engine reads: cfg.h). */
int  cdp_net_build(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                   const char *const *overrides, int noverrides,
                   int in_c, int in_h, int in_w, int n, char *err, size_t cap);
/* As cdp_net_build, for the cfg stored in a checkpoint: a cfg that names
 * an unknown [net] key was written under the old rule (before [vars]; no
 * checkpoint written since can hold one, cdp-checkpoint(5)) and is built
 * under it, with a one-line warning in warn (else warn is ""). */
int  cdp_net_build_ckpt(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                        const char *const *overrides, int noverrides,
                        int in_c, int in_h, int in_w, int n, char *warn, size_t wcap,
                        char *err, size_t cap);
/* As cdp_net_build_ckpt, for inference only (cdp-predict): no gradient
 * buffers for the activations or the input, and the layers' outputs in
 * one arena, where tensors whose forward uses do not overlap share bytes
 * (the bf16 stash's plan without a backward pass): a U-Net's activations
 * then take about the two largest layers' outputs instead of all of them.
 * A concat read only by convolutions that take its inputs where they lie
 * (the CPU's 3x3 ones) is not made at all (cdp_layer.virt). The layers
 * run over the batch in passes of cdp_net.pass samples.
 * Only the output (cdp_net_output) stays valid after cdp_net_forward;
 * cdp_net_backward and train = 1 are not for such a net. */
int  cdp_net_build_infer(cdp_net *net, cdp_backend *be, const char *cfg_text, const char *path,
                         const char *const *overrides, int noverrides,
                         int in_c, int in_h, int in_w, int n, char *warn, size_t wcap,
                         char *err, size_t cap);
int  cdp_net_resize(cdp_net *net, int n, char *err, size_t cap);
/* Sets the backend's precision (CDP_PREC_*) for a built net and grows its
 * workspace to what every layer needs in it (a CUDA bf16/fp16 convolution
 * stages its operands there: a net sized in fp32 is too small for it).
 * Calling be->set_precision alone on a built net leaves the workspace as
 * it was, and the CUDA backend refuses a convolution it has not sized.
 * When the bf16 stash (net_plan.c) comes or goes with the precision, the
 * layers' outputs are laid out anew (their contents are lost; the input
 * net->x, the gradients and the layers' state stay).
 * Returns 0, or -1 with the reason in err (the backend refuses the
 * precision, or out of memory; the precision is then unchanged). */
int  cdp_net_set_precision(cdp_net *net, int prec, char *err, size_t cap);
void cdp_net_free(cdp_net *net);
/* He/Kaiming normal init of every weight (fan_in, gain sqrt(2)), biases 0,
 * bn gamma 1 beta 0, running var 1 mean 0; deterministic from seed. */
void cdp_net_init(cdp_net *net, uint64_t seed);
/* Forward over all layers; output logits at net->layers[out_layer].y */
void cdp_net_forward(cdp_net *net);
/* An inference net's forward (cdp_net_build_infer) of the first k samples
 * of x (1 <= k <= n): the first k of the output are those of
 * cdp_net_forward, the rest are not written. On a backend that runs the
 * batch whole (infer_pass_bytes 0) all n samples run; any other net runs
 * all n. */
void cdp_net_forward_n(cdp_net *net, int k);
/* Backward from net->layers[out_layer].dy (set by the loss). Activation
 * gradients are overwritten, never zeroed: the first writer of each, in
 * backward order, overwrites it and later ones add (cdp_layer.in_beta), and
 * one that no layer reads is filled with zeros. Parameter gradients are
 * added to grads, so call cdp_net_zero_grad between steps unless
 * accumulating micro-batches. on_layer_done, when set, is called after each
 * layer's backward with that layer's index, so a caller can start reducing
 * the gradient bucket of layers that are finished. (Layers with a fused
 * activation turn their own dy into the pre-activation gradient in place.
 * Batchnorm's backward uses the batch statistics of the last forward, so
 * call it after a training-mode forward.) */
void cdp_net_backward(cdp_net *net, void (*on_layer_done)(cdp_net *, int, void *), void *ctx);
void cdp_net_zero_grad(cdp_net *net);
/* Freezes the layers whose name matches one of the comma-separated
 * fnmatch(3) globs in patterns (e.g. "conv1,bn1,layer*"), and unfreezes the
 * rest; patterns NULL or "" unfreezes every layer. Grows the workspace for
 * the frozen batchnorm backward. Returns the number of layers frozen, or -1
 * with the reason in err: an empty or unmatched pattern, out of memory. */
int  cdp_net_freeze(cdp_net *net, const char *patterns, char *err, size_t cap);
const float *cdp_net_output(const cdp_net *net);

/* For layer makers: declare `len` parameter floats; returns the offset. */
size_t cdp_net_param(cdp_net *net, size_t len);
size_t cdp_net_buffer(cdp_net *net, size_t len);
/* The registry of layer types. */
const cdp_layer_ops *cdp_layer_ops_find(const char *type);

#endif
