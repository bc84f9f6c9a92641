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

/* The scores of one band's sums, or of every band's pooled (nb > 1): the
 * error sums and counts add, and R-squared is 1 - sum SS_res / sum SS_tot
 * with each band's SS_tot about its own mean (cdp_regm_pooled's). */
static void scores(const cdp_reg_sums *s, int nb, double v[4], uint64_t *count)
{
	double sum[3] = { 0, 0, 0 }, sst = 0, n;

	*count = 0;
	for (int b = 0; b < nb; b++) {
		*count += s[b].n;
		for (int k = 0; k < 3; k++)
			sum[k] += s[b].sum[k] + s[b].comp[k];
		sst += s[b].rm2;
	}
	n = (double)*count;
	v[0] = sqrt(sum[2] / n);
	v[1] = sum[1] / n;
	v[2] = sum[0] / n;
	v[3] = sst > 0 ? 1 - sum[2] / sst : NAN;
}

void cdp_reg_report(FILE *f, const cdp_reg_sums *s, const uint64_t *skipped, int nb, int json)
{
	static const char *const key[4] = { "rmse", "mae", "bias", "r2" };
	uint64_t n, nskip = 0;
	double v[4];

	for (int b = 0; b < nb; b++)
		nskip += skipped[b];
	scores(s, nb, v, &n);
	if (json)
		fprintf(f, "{\"task\":\"regression\",\"count\":%llu,\"skipped\":%llu",
		        (unsigned long long)n, (unsigned long long)nskip);
	else
		fprintf(f, "pixels: %llu counted, %llu skipped (invalid in either)\n",
		        (unsigned long long)n, (unsigned long long)nskip);
	for (int i = 0; i < 4; i++) {
		fprintf(f, json ? ",\"%s\":" : "%-5s ", key[i]);
		num(f, v[i], json);
		if (!json)
			fputc('\n', f);
	}
	/* several bands: each one's scores as well, in band order */
	if (nb > 1 && json)
		fputs(",\"targets\":[", f);
	for (int b = 0; b < nb && nb > 1; b++) {
		scores(&s[b], 1, v, &n);
		if (json)
			fprintf(f, "%s{\"band\":%d,\"count\":%llu,\"skipped\":%llu", b ? "," : "", b + 1,
			        (unsigned long long)n, (unsigned long long)skipped[b]);
		else
			fprintf(f, "band %d: %llu counted, %llu skipped", b + 1, (unsigned long long)n,
			        (unsigned long long)skipped[b]);
		for (int i = 0; i < 4; i++) {
			fprintf(f, json ? ",\"%s\":" : " %s ", key[i]);
			num(f, n ? v[i] : NAN, json);
		}
		fputs(json ? "}" : "\n", f);
	}
	if (json)
		fputs(nb > 1 ? "]}\n" : "}\n", f);
}
