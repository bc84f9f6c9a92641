/* loss_host.c: the loss terms computed on the host (loss.c says how they
 * join the backend's): the batch's softmax or sigmoid probabilities in
 * double, then per pixel label-smoothed ce and focal, per class the
 * overlaps' sums (dice, jaccard, tversky) and per image the Lovasz hinge
 * (Berman et al., 2018), and their gradient through the probabilities'
 * Jacobian once per pixel.
 */
#include "loss.h"
#include "loss_host.h"
#include "cdp_num.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **p, size_t *have, size_t want, size_t size)
{
	void *q;

	if (want <= *have)
		return 0;
	if (!(q = realloc(*p, want * size)))
		return -1;
	*p = q;
	*have = want;
	return 0;
}

/* the batch on the host, with probabilities and log-probabilities */
int cdp_loss_host_fetch(const cdp_loss *l, int n, int hw, const float *logits,
                        const int32_t *labels)
{
	struct cdp_loss_host *h = l->host;
	size_t nx = (size_t)n * l->k * hw, ny = (size_t)n * hw, c0 = h->cap, c1 = h->cap, c2 = h->cap,
	       c3 = h->cap, c4 = h->cap;

	if (grow((void **)&h->x, &c0, nx, sizeof *h->x) || grow((void **)&h->g, &c1, nx, sizeof *h->g) ||
	    grow((void **)&h->pr, &c2, nx, sizeof *h->pr) ||
	    grow((void **)&h->lp, &c3, nx, sizeof *h->lp) ||
	    grow((void **)&h->dp, &c4, nx, sizeof *h->dp) ||
	    grow((void **)&h->y, &h->capy, ny, sizeof *h->y))
		return -1;
	if (nx > h->cap)
		h->cap = nx;
	l->be->to_host(l->be, h->x, logits, nx * sizeof *h->x);
	l->be->to_host(l->be, h->y, labels, ny * sizeof *h->y);
	for (int s = 0; s < n; s++)
		for (int p = 0; p < hw; p++) {
			const float *x = h->x + (size_t)s * l->k * hw + p;
			double *pr = h->pr + (size_t)s * l->k * hw + p, *lp = h->lp + (size_t)s * l->k * hw + p;
			if (l->k == 1) {
				/* lp: log sigmoid(z); pr: sigmoid(z) */
				double z = x[0];
				lp[0] = -(log1p(exp(-fabs(z))) + fmax(-z, 0.0));
				pr[0] = 1.0 / (1.0 + exp(-z));
				continue;
			}
			double mx = -INFINITY, se = 0;
			for (int c = 0; c < l->k; c++)
				mx = fmax(mx, x[(size_t)c * hw]);
			for (int c = 0; c < l->k; c++)
				se += exp(x[(size_t)c * hw] - mx);
			double lse = log(se);
			for (int c = 0; c < l->k; c++) {
				lp[(size_t)c * hw] = x[(size_t)c * hw] - mx - lse;
				pr[(size_t)c * hw] = exp(lp[(size_t)c * hw]);
			}
		}
	return 0;
}

int cdp_loss_counted(const cdp_loss *l, int32_t y)
{
	return y != l->ignore && y >= 0 && y < l->classes;
}

/* label smoothing ce on a softmax pixel: adds to sum/count, and to the
 * gradient g (K values, stride hw) times sc when g */
static void ce_ls_px(const cdp_loss *l, const double *pr, const double *lp, int hw, int y,
                     double *sum, double *count, float *g, double sc)
{
	const float *w = l->cw_host;
	double e = l->label_smoothing, wy = w ? w[y] : 1, ws = 0, v = 0;
	int k = l->k;

	for (int c = 0; c < k; c++) {
		double wc = w ? w[c] : 1;
		v -= wc * lp[(size_t)c * hw];
		ws += wc;
	}
	*sum += (1 - e) * wy * -lp[(size_t)y * hw] + e / k * v;
	*count += wy;
	if (g)
		for (int c = 0; c < k; c++) {
			double p = pr[(size_t)c * hw], wc = w ? w[c] : 1;
			g[(size_t)c * hw] += (float)(sc * ((1 - e) * wy * (p - (c == y)) +
			                                   e / k * (ws * p - wc)));
		}
}

/* focal loss of one pixel; its gradient times sc added to g when g */
static double focal_px(const cdp_loss *l, const double *pr, const double *lp, double z, int hw,
                       int y, float *g, double sc)
{
	double a = l->alpha[y], gm = l->gamma, pt, q, lpt, f, v;

	if (l->k == 1) {
		/* from the logit z: log sigmoid(-z) = log sigmoid(z) - z */
		if (y != 0) {
			lpt = lp[0];
			q = 1 / (1 + exp(z));
		} else {
			lpt = lp[0] - z;
			q = 1 / (1 + exp(-z));
		}
		pt = exp(lpt);
	} else {
		lpt = lp[(size_t)y * hw];
		pt = pr[(size_t)y * hw];
		q = 0;
		for (int c = 0; c < l->k; c++)
			if (c != y)
				q += pr[(size_t)c * hw];
	}
	v = -a * pow(q, gm) * lpt;
	if (!g)
		return v;
	f = -a * (pow(q, gm) - (gm == 0 || q <= 0 ? 0 : gm * pow(q, gm - 1) * pt * lpt));
	if (l->k == 1)
		g[0] += (float)(sc * (y != 0 ? 1 : -1) * f * q);
	else
		for (int c = 0; c < l->k; c++)
			g[(size_t)c * hw] += (float)(sc * f * ((c == y) - pr[(size_t)c * hw]));
	return v;
}

static void overlap_coef(int kind, const cdp_loss *l, double *m, double *a, double *b)
{
	*m = kind == CDP_LOSS_DICE ? 2 : 1;
	*a = kind == CDP_LOSS_TVERSKY ? l->tv_alpha : 1;
	*b = kind == CDP_LOSS_TVERSKY ? l->tv_beta : 1;
}

double cdp_loss_overlap_value(const cdp_loss *l, int kind, const double *part)
{
	double m, a, b, v = 0, s = l->smooth;
	int nc = l->k == 1 ? 1 : l->classes;

	overlap_coef(kind, l, &m, &a, &b);
	for (int c = 0; c < nc; c++) {
		double I = part[3 * c], P = part[3 * c + 1], T = part[3 * c + 2];
		double den = fmax((m - a - b) * I + a * P + b * T + s, CDP_LOSS_EPS);
		if (l->k == 1 || T > 0)
			v += 1 - (m * I + s) / den;
	}
	return v / nc;
}

static int lv_cmp(const void *a, const void *b)
{
	const struct lv *x = a, *y = b;

	if (x->e != y->e)
		return x->e > y->e ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Lovasz loss of image s; with dp, adds sc * d(loss)/d(p) to dp */
static double lovasz_image(const cdp_loss *l, int s, int hw, double *dp, double sc)
{
	struct cdp_loss_host *h = l->host;
	const int32_t *y = h->y + (size_t)s * hw;
	const double *pr = h->pr + (size_t)s * l->k * hw;
	int nc = l->k == 1 ? 1 : l->k, present = 0;
	double loss = 0;
	size_t m = 0;

	if (grow((void **)&h->sv, &h->capsv, (size_t)hw, sizeof *h->sv))
		return NAN;
	/* classes present first, for the mean's divisor */
	for (int c = 0; c < nc; c++) {
		int any = l->k == 1;
		for (int p = 0; p < hw && !any; p++)
			any = cdp_loss_counted(l, y[p]) && y[p] == c;
		present += any;
	}
	for (int c = 0; c < nc && present; c++) {
		double gts = 0, cfg = 0, cbg = 0, prev = 0;
		m = 0;
		for (int p = 0; p < hw; p++) {
			int fg;
			if (!cdp_loss_counted(l, y[p]))
				continue;
			fg = l->k == 1 ? y[p] != 0 : y[p] == c;
			h->sv[m].e = fabs(fg - pr[(size_t)(l->k == 1 ? 0 : c) * hw + p]);
			h->sv[m].i = p;
			h->sv[m].fg = fg;
			gts += fg;
			m++;
		}
		if (l->k != 1 && gts == 0)
			continue;
		qsort(h->sv, m, sizeof *h->sv, lv_cmp);
		for (size_t r = 0; r < m; r++) {
			double jac, gr;
			cfg += h->sv[r].fg;
			cbg += 1 - h->sv[r].fg;
			jac = 1 - (gts - cfg) / (gts + cbg);
			gr = jac - prev;
			prev = jac;
			loss += h->sv[r].e * gr / present;
			if (dp)
				dp[(size_t)(l->k == 1 ? 0 : c) * hw + h->sv[r].i] +=
					sc * gr / present * (h->sv[r].fg ? -1 : 1);
		}
	}
	return loss;
}

/* the host terms' sums into part[] */
void cdp_loss_host_parts(const cdp_loss *l, int n, int hw, double *part)
{
	struct cdp_loss_host *h = l->host;

	for (int t = 0; t < l->nterm; t++) {
		const cdp_loss_term *tm = &l->term[t];
		double *pt = part + tm->off;
		if (!tm->host)
			continue;
		for (int s = 0; s < n; s++) {
			const double *pr = h->pr + (size_t)s * l->k * hw, *lp = h->lp + (size_t)s * l->k * hw;
			if (tm->kind == CDP_LOSS_LOVASZ) {
				pt[0] += lovasz_image(l, s, hw, NULL, 0);
				pt[1] += 1;
				continue;
			}
			for (int p = 0; p < hw; p++) {
				int y = h->y[(size_t)s * hw + p];
				if (!cdp_loss_counted(l, y))
					continue;
				switch (tm->kind) {
				case CDP_LOSS_CE:
					ce_ls_px(l, pr + p, lp + p, hw, y, &pt[0], &pt[1], NULL, 0);
					break;
				case CDP_LOSS_FOCAL:
					pt[0] += focal_px(l, pr + p, lp + p, h->x[(size_t)s * l->k * hw + p], hw, y, NULL, 0);
					pt[1] += 1;
					break;
				case CDP_LOSS_BCE:   /* with pos_w; log(1 - s(z)) = log s(z) - z */
					pt[0] -= y ? l->pos_w[p % l->npos_w] * lp[p]
					           : lp[p] - h->x[(size_t)s * hw + p];
					pt[1] += 1;
					break;
				default:   /* dice, jaccard, tversky */
					if (l->k == 1) {
						pt[0] += pr[p] * (y != 0);
						pt[1] += pr[p];
						pt[2] += y != 0;
					} else {
						for (int c = 0; c < l->k; c++) {
							double q = pr[(size_t)c * hw + p];
							pt[3 * c] += q * (y == c);
							pt[3 * c + 1] += q;
							pt[3 * c + 2] += y == c;
						}
					}
				}
			}
		}
	}
}

/* the host terms' gradient (with the totals part[]) added to h->g */
void cdp_loss_host_grad(const cdp_loss *l, int n, int hw, const double *part, double gmul)
{
	struct cdp_loss_host *h = l->host;
	size_t nx = (size_t)n * l->k * hw;
	int byp = 0;

	memset(h->dp, 0, nx * sizeof *h->dp);
	for (int t = 0; t < l->nterm; t++) {
		const cdp_loss_term *tm = &l->term[t];
		const double *pt = part + tm->off;
		double sc = tm->weight * gmul, m, a, b, dummy[2];
		if (!tm->host)
			continue;
		if (tm->kind == CDP_LOSS_CE || tm->kind == CDP_LOSS_FOCAL || tm->kind == CDP_LOSS_LOVASZ ||
		    tm->kind == CDP_LOSS_BCE) {
			if (!(pt[1] > 0))
				continue;
			sc /= pt[1];
		}
		byp |= tm->kind != CDP_LOSS_CE && tm->kind != CDP_LOSS_FOCAL && tm->kind != CDP_LOSS_BCE;
		overlap_coef(tm->kind, l, &m, &a, &b);
		for (int s = 0; s < n; s++) {
			size_t o = (size_t)s * l->k * hw;
			if (tm->kind == CDP_LOSS_LOVASZ) {
				lovasz_image(l, s, hw, h->dp + o, sc);
				continue;
			}
			for (int p = 0; p < hw; p++) {
				int y = h->y[(size_t)s * hw + p];
				if (!cdp_loss_counted(l, y))
					continue;
				if (tm->kind == CDP_LOSS_CE) {
					ce_ls_px(l, h->pr + o + p, h->lp + o + p, hw, y, &dummy[0], &dummy[1],
					         h->g + o + p, sc);
				} else if (tm->kind == CDP_LOSS_FOCAL) {
					focal_px(l, h->pr + o + p, h->lp + o + p, h->x[o + p], hw, y, h->g + o + p, sc);
				} else if (tm->kind == CDP_LOSS_BCE) {
					/* d/dz: w (s - 1) for a positive, s for a negative */
					double q = h->pr[o + p];
					h->g[o + p] += (float)(sc * (y ? l->pos_w[p % l->npos_w] * (q - 1) : q));
				} else {
					int nc = l->k == 1 ? 1 : l->k;
					for (int c = 0; c < nc; c++) {
						double I = pt[3 * c], P = pt[3 * c + 1], T = pt[3 * c + 2], s0 = l->smooth;
						double raw = (m - a - b) * I + a * P + b * T + s0, num = m * I + s0;
						double tt = l->k == 1 ? y != 0 : y == c, d;
						if (l->k != 1 && !(T > 0))
							continue;
						if (raw > CDP_LOSS_EPS)
							d = (m * tt * raw - num * ((m - a - b) * tt + a)) / (raw * raw);
						else
							d = m * tt / CDP_LOSS_EPS;
						h->dp[o + (size_t)c * hw + p] -= sc * d / nc;
					}
				}
			}
		}
	}
	if (!byp)
		return;
	/* d/dp through the softmax (sigmoid) */
	for (int s = 0; s < n; s++)
		for (int p = 0; p < hw; p++) {
			size_t o = (size_t)s * l->k * hw + p;
			double dot = 0;
			if (l->k == 1) {
				h->g[o] += (float)(h->dp[o] * h->pr[o] * (1 - h->pr[o]));
				continue;
			}
			for (int c = 0; c < l->k; c++)
				dot += h->dp[o + (size_t)c * hw] * h->pr[o + (size_t)c * hw];
			for (int c = 0; c < l->k; c++)
				h->g[o + (size_t)c * hw] += (float)(h->pr[o + (size_t)c * hw] *
				                                    (h->dp[o + (size_t)c * hw] - dot));
		}
}
