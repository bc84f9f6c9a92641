/* evaluate_reg.c: the scores of a pixel-regression map (evaluate.h):
 * RMSE, MAE, bias (mean of prediction - reference) and R-squared
 * (1 - SS_res / SS_tot, scikit-learn's r2_score), accumulated so that the
 * digits survive a map of 1e8 pixels; evaluate.c reads the rasters. */
#include "evaluate.h"

#include <math.h>
#include <stdio.h>

void cdp_reg_sums_init(cdp_reg_sums *s)
{
	*s = (cdp_reg_sums){ 0 };
	s->lo = INFINITY;
	s->hi = -INFINITY;
}

/* Neumaier's compensated sum: total t, compensation c. */
static void nadd(double *t, double *c, double x)
{
	double u = *t + x;
	*c += fabs(*t) >= fabs(x) ? (*t - u) + x : (x - u) + *t;
	*t = u;
}

void cdp_reg_sums_add(cdp_reg_sums *s, const double *p, const double *r, size_t n)
{
	double mean = 0, m2 = 0, sum[3] = { 0, 0, 0 };

	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		double d = p[i] - r[i], delta = r[i] - mean;
		mean += delta / (double)(i + 1);
		m2 += delta * (r[i] - mean);
		sum[0] += d;
		sum[1] += fabs(d);
		sum[2] += d * d;
		s->lo = fmin(s->lo, fmin(p[i], r[i]));
		s->hi = fmax(s->hi, fmax(p[i], r[i]));
	}
	/* Chan et al.: merge the block (n, mean, m2) into the total */
	double na = (double)s->n, nb = (double)n, nt = na + nb, delta = mean - s->rmean;
	s->rm2 += m2 + delta * delta * na * nb / nt;
	s->rmean += delta * nb / nt;
	s->n += n;
	for (int k = 0; k < 3; k++)
		nadd(&s->sum[k], &s->comp[k], sum[k]);
}

int cdp_reg_bin(double v, double lo, double hi, int nb)
{
	double f = (v - lo) / (hi - lo) * nb;   /* compared before the cast: no overflow */
	return !(f >= 0) ? 0 : f >= nb ? nb - 1 : (int)f;
}

static void num(FILE *f, double v, int json)
{
	if (isnan(v))
		fputs(json ? "null" : "undefined", f);
	else
		fprintf(f, json ? "%.17g" : "%.9g", v);
}

void cdp_reg_report(FILE *f, const cdp_reg_sums *s, uint64_t skipped, int json)
{
	double n = (double)s->n, bias = (s->sum[0] + s->comp[0]) / n,
	       mae = (s->sum[1] + s->comp[1]) / n, ssres = s->sum[2] + s->comp[2],
	       rmse = sqrt(ssres / n), r2 = s->rm2 > 0 ? 1 - ssres / s->rm2 : NAN;
	const char *key[4] = { "rmse", "mae", "bias", "r2" };
	const double v[4] = { rmse, mae, bias, r2 };

	if (json)
		fprintf(f, "{\"task\":\"regression\",\"count\":%llu,\"skipped\":%llu",
		        (unsigned long long)s->n, (unsigned long long)skipped);
	else
		fprintf(f, "pixels: %llu counted, %llu skipped (invalid in either)\n",
		        (unsigned long long)s->n, (unsigned long long)skipped);
	for (int i = 0; i < 4; i++) {
		fprintf(f, json ? ",\"%s\":" : "%-5s ", key[i]);
		num(f, v[i], json);
		if (!json)
			fputc('\n', f);
	}
	if (json)
		fputs("}\n", f);
}
