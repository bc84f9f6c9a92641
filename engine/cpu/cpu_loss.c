/* cpu_loss.c: the CPU backend's losses, argmax and confusion counts
 * (backend.h gives the exact semantics, PyTorch's).
 *
 * logits are (N, K, HW) and labels (N, HW) int32. Work is cut into fixed
 * chunks of CHUNK pixels of one sample, each chunk writing its own gradient
 * slice and its own partial sums; the partials are then added in chunk
 * order. So the loss is bitwise identical for any thread count, and each
 * chunk's work does not depend on which thread runs it.
 *
 * Per pixel the loss is computed in double (log-sum-exp with the maximum
 * subtracted, log1p for the BCE tail), so the CPU values serve as the
 * reference for the CUDA kernels. In softmax_ce and confusion, labels
 * outside [0, K) other than `ignore` are skipped like ignored ones (no loss,
 * zero gradient, not counted): an op cannot fail, and loss.c validates
 * labels on the host before they get here. BCE and Dice take any non-zero
 * label as the positive class, as backend.h says.
 *
 * reg_loss (regression) takes float targets in place of labels, NaN for
 * none, its element's formula shared with CUDA (cdp_reg_elem, backend.h).
 *
 * Not done: label smoothing, BCE pos_weight, multi-class Dice.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"

#define CHUNK 4096      /* pixels per work item */
#define BLOCK 64        /* pixels per inner block (stack arrays) */

typedef struct loss_ctx {
	int n, k, hw, cpn;          /* cpn: chunks per sample */
	const float *x;
	const float *tgt;           /* regression targets, as x */
	int reg;                    /* regression: CDP_REG_* */
	float delta;
	const int32_t *lab;
	int32_t *pred;              /* argmax output (N, HW) */
	int ignore;
	const float *cw;
	float *dx;
	float gscale, smooth;
	double inter, psum, tsum;   /* dice: totals of the first pass */
} loss_ctx;

static int chunks_per_sample(int hw)
{
	return (hw + CHUNK - 1) / CHUNK;
}

/* Pixel range [*p0, *p1) of sample *s for work item i. */
static void chunk_range(const loss_ctx *c, int i, int *s, int *p0, int *p1)
{
	*s = i / c->cpn;
	*p0 = (i % c->cpn) * CHUNK;
	*p1 = *p0 + CHUNK < c->hw ? *p0 + CHUNK : c->hw;
}

typedef void (*chunk_fn)(const loss_ctx *c, int i, double out[3]);

typedef struct item_ctx { const loss_ctx *c; chunk_fn fn; double *part; } item_ctx;

static void run_item(void *v, int i)
{
	item_ctx *it = v;

	it->fn(it->c, i, it->part + 3 * (size_t)i);
}

/* Runs fn over every chunk of every sample and adds the three partial sums
 * in chunk order into tot. Without memory for the partials it runs the
 * chunks serially: slower, same result. */
static void run_chunks(cdp_backend *be, const loss_ctx *c, chunk_fn fn, double tot[3])
{
	int items = c->n * c->cpn;
	item_ctx it = { c, fn, malloc((size_t)items * 3 * sizeof(double) + 1) };

	tot[0] = tot[1] = tot[2] = 0;
	if (it.part) {
		cpu_parallel_for(be, items, run_item, &it);
		for (int i = 0; i < items; i++)
			for (int j = 0; j < 3; j++)
				tot[j] += it.part[3 * (size_t)i + j];
		free(it.part);
		return;
	}
	for (int i = 0; i < items; i++) {
		double out[3];
		fn(c, i, out);
		for (int j = 0; j < 3; j++)
			tot[j] += out[j];
	}
}

/* ---- softmax cross-entropy -------------------------------------------- */

static void ce_chunk(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1, k = c->k, hw = c->hw;
	double loss = 0, cnt = 0;

	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * k * hw;        /* (K, HW) of sample s */
	float *dx = c->dx + (size_t)s * k * hw;
	const int32_t *lab = c->lab + (size_t)s * hw;

	for (int b = p0; b < p1; b += BLOCK) {
		int m = p1 - b < BLOCK ? p1 - b : BLOCK;
		double mx[BLOCK], se[BLOCK];
		/* class-outer loops walk each (HW) plane contiguously */
		for (int j = 0; j < m; j++) {
			mx[j] = x[b + j];
			se[j] = 0;
		}
		for (int kk = 1; kk < k; kk++)
			for (int j = 0; j < m; j++)
				if (x[(size_t)kk * hw + b + j] > mx[j])
					mx[j] = x[(size_t)kk * hw + b + j];
		for (int kk = 0; kk < k; kk++)
			for (int j = 0; j < m; j++)
				se[j] += exp(x[(size_t)kk * hw + b + j] - mx[j]);
		for (int j = 0; j < m; j++) {
			int32_t y = lab[b + j];
			double w, g;
			if (y == c->ignore || y < 0 || y >= k) {
				for (int kk = 0; kk < k; kk++)
					dx[(size_t)kk * hw + b + j] = 0;
				continue;
			}
			w = c->cw ? c->cw[y] : 1.0;
			loss += w * (mx[j] + log(se[j]) - x[(size_t)y * hw + b + j]);
			cnt += w;
			g = c->gscale * w;
			for (int kk = 0; kk < k; kk++) {
				double p = exp(x[(size_t)kk * hw + b + j] - mx[j]) / se[j];
				dx[(size_t)kk * hw + b + j] = (float)(g * (p - (kk == y)));
			}
		}
	}
	out[0] = loss;
	out[1] = cnt;
	out[2] = 0;
}

double cpu_softmax_ce(cdp_backend *be, int n, int k, int hw, const float *logits,
                      const int32_t *labels, int ignore, const float *class_w,
                      float *dlogits, float gscale, double *count)
{
	loss_ctx c = { .n = n, .k = k, .hw = hw, .cpn = chunks_per_sample(hw), .x = logits,
	               .lab = labels, .ignore = ignore, .cw = class_w, .dx = dlogits,
	               .gscale = gscale };
	double tot[3];

	run_chunks(be, &c, ce_chunk, tot);
	*count = tot[1];
	return tot[0];
}

/* ---- sigmoid binary cross-entropy -------------------------------------- */

/* sigmoid without overflow for either sign of x */
static double sigmoid(double x)
{
	if (x >= 0)
		return 1.0 / (1.0 + exp(-x));
	double e = exp(x);
	return e / (1.0 + e);
}

static void bce_chunk(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1;
	double loss = 0, cnt = 0;

	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * c->hw;         /* (HW) of sample s, K = 1 */
	float *dx = c->dx + (size_t)s * c->hw;
	const int32_t *lab = c->lab + (size_t)s * c->hw;

	for (int p = p0; p < p1; p++) {
		double v = x[p], t;
		if (lab[p] == c->ignore) {
			dx[p] = 0;
			continue;
		}
		t = lab[p] != 0;
		/* max(x,0) - x t + log(1 + e^-|x|): never exp of a large positive */
		loss += (v > 0 ? v : 0) - v * t + log1p(exp(-fabs(v)));
		cnt += 1;
		dx[p] = (float)(c->gscale * (sigmoid(v) - t));
	}
	out[0] = loss;
	out[1] = cnt;
	out[2] = 0;
}

double cpu_bce_logits(cdp_backend *be, int n, int hw, const float *logits,
                      const int32_t *labels, int ignore, float *dlogits,
                      float gscale, double *count)
{
	loss_ctx c = { .n = n, .k = 1, .hw = hw, .cpn = chunks_per_sample(hw), .x = logits,
	               .lab = labels, .ignore = ignore, .dx = dlogits, .gscale = gscale };
	double tot[3];

	run_chunks(be, &c, bce_chunk, tot);
	*count = tot[1];
	return tot[0];
}

/* ---- regression ---------------------------------------------------------- */

/* A sample's (T, HW) values are its hw = T*HW "pixels" here. */
static void reg_chunk(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1;
	double loss = 0, cnt = 0, g;

	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * c->hw, *t = c->tgt + (size_t)s * c->hw;
	float *dx = c->dx + (size_t)s * c->hw;

	for (int p = p0; p < p1; p++) {
		if (isnan(t[p])) {
			dx[p] = 0.0f;
			continue;
		}
		loss += cdp_reg_elem(c->reg, (double)x[p] - t[p], c->delta, &g);
		cnt += 1;
		dx[p] = (float)(c->gscale * g);
	}
	out[0] = loss;
	out[1] = cnt;
	out[2] = 0;
}

double cpu_reg_loss(cdp_backend *be, int kind, int n, int t, int hw, const float *pred,
                    const float *target, float delta, float *dpred, float gscale,
                    double *count)
{
	loss_ctx c = { .n = n, .k = 1, .hw = t * hw, .cpn = chunks_per_sample(t * hw),
	               .x = pred, .tgt = target, .reg = kind, .delta = delta, .dx = dpred,
	               .gscale = gscale };
	double tot[3];

	run_chunks(be, &c, reg_chunk, tot);
	*count = tot[1];
	return tot[0];
}

/* ---- soft Dice ----------------------------------------------------------- */

/* First pass: sum p t, sum p, sum t over the counted pixels of a chunk. */
static void dice_sums(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1;
	double in = 0, ps = 0, ts = 0;

	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * c->hw;
	const int32_t *lab = c->lab + (size_t)s * c->hw;

	for (int p = p0; p < p1; p++) {
		double pr, t;
		if (lab[p] == c->ignore)
			continue;
		pr = sigmoid(x[p]);
		t = lab[p] != 0;
		in += pr * t;
		ps += pr;
		ts += t;
	}
	out[0] = in;
	out[1] = ps;
	out[2] = ts;
}

/* Second pass: with Nu = 2 I + s and D = P + T + s, loss = 1 - Nu/D and
 * dloss/dp_i = -(2 t_i D - Nu) / D^2; dp/dx = p (1 - p). */
static void dice_grad(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1;
	double nu = 2 * c->inter + c->smooth, d = c->psum + c->tsum + c->smooth;

	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * c->hw;
	float *dx = c->dx + (size_t)s * c->hw;
	const int32_t *lab = c->lab + (size_t)s * c->hw;

	for (int p = p0; p < p1; p++) {
		double pr, t, g;
		if (lab[p] == c->ignore)
			continue;
		pr = sigmoid(x[p]);
		t = lab[p] != 0;
		g = -(2 * t * d - nu) / (d * d) * pr * (1 - pr);
		dx[p] += (float)(c->gscale * g);
	}
	out[0] = out[1] = out[2] = 0;
}

void cpu_dice_sums(cdp_backend *be, int n, int hw, const float *logits,
                   const int32_t *labels, int ignore, double tot[3])
{
	loss_ctx c = { .n = n, .k = 1, .hw = hw, .cpn = chunks_per_sample(hw), .x = logits,
	               .lab = labels, .ignore = ignore };

	run_chunks(be, &c, dice_sums, tot);
}

double cpu_dice_logits(cdp_backend *be, int n, int hw, const float *logits,
                       const int32_t *labels, int ignore, float smooth, const double *tot,
                       float *dlogits, float gscale)
{
	loss_ctx c = { .n = n, .k = 1, .hw = hw, .cpn = chunks_per_sample(hw), .x = logits,
	               .lab = labels, .ignore = ignore, .dx = dlogits, .gscale = gscale,
	               .smooth = smooth };
	double own[3], d, unused[3];

	if (!tot) {
		cpu_dice_sums(be, n, hw, logits, labels, ignore, own);
		tot = own;
	}
	c.inter = tot[0];
	c.psum = tot[1];
	c.tsum = tot[2];
	d = c.psum + c.tsum + smooth;
	/* Only possible with smooth == 0 and every pixel ignored: no overlap
	 * to measure, so no loss and no gradient rather than 0/0. */
	if (d <= 0)
		return 0;
	run_chunks(be, &c, dice_grad, unused);
	return 1.0 - (2 * c.inter + smooth) / d;
}

/* ---- argmax and confusion -------------------------------------------- */

static void argmax_chunk(const loss_ctx *c, int i, double out[3])
{
	int s, p0, p1, k = c->k, hw = c->hw;
	chunk_range(c, i, &s, &p0, &p1);
	const float *x = c->x + (size_t)s * k * hw;
	int32_t *pred = c->pred + (size_t)s * hw;
	if (k == 1) {
		for (int p = p0; p < p1; p++)
			pred[p] = x[p] > 0;
	} else {
		for (int b = p0; b < p1; b += BLOCK) {
			int m = p1 - b < BLOCK ? p1 - b : BLOCK;
			float best[BLOCK];
			for (int j = 0; j < m; j++) {
				best[j] = x[b + j];
				pred[b + j] = 0;
			}
			/* strict '>' keeps the first maximum, as torch.argmax does */
			for (int kk = 1; kk < k; kk++)
				for (int j = 0; j < m; j++)
					if (x[(size_t)kk * hw + b + j] > best[j]) {
						best[j] = x[(size_t)kk * hw + b + j];
						pred[b + j] = kk;
					}
		}
	}
	out[0] = out[1] = out[2] = 0;
}

void cpu_argmax(cdp_backend *be, int n, int k, int hw, const float *logits, int32_t *pred)
{
	loss_ctx c = { .n = n, .k = k, .hw = hw, .cpn = chunks_per_sample(hw), .x = logits,
	               .pred = pred };
	double tot[3];

	run_chunks(be, &c, argmax_chunk, tot);
}

void cpu_confusion(cdp_backend *be, int n_elems, int k, const int32_t *labels,
                   const int32_t *pred, int ignore, uint64_t *conf_host)
{
	for (int i = 0; i < n_elems; i++) {
		int32_t y = labels[i], p = pred[i];
		/* out-of-range ids cannot be placed in a K x K matrix */
		if (y == ignore || y < 0 || y >= k || p < 0 || p >= k)
			continue;
		conf_host[(size_t)y * k + p]++;
	}
}
