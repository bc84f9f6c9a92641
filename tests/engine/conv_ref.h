/* conv_ref.h: a naive double-precision convolution for the backend tests
 * (test_backend.c, test_bf16_sets.c): y = conv(x, w) + b, and the
 * gradients given dy: dx += conv_transpose(dy, w), dw += dW(x, dy), db +=
 * the sums of dy (y overwritten, the others accumulated). */
#ifndef CONV_REF_H
#define CONV_REF_H
#include "backend.h"

/* A convolution case: input (n, c, h, w), f filters of k x k, stride s,
 * padding p, dilation d */
typedef struct conv_case { int n, c, h, w, f, k, s, p, d; } conv_case;

/* cc's descriptor, filled by cdp_conv_desc_init (its return value) */
static inline int conv_case_desc(const conv_case *cc, cdp_conv_desc *d)
{
	*d = (cdp_conv_desc){ .n = cc->n, .c = cc->c, .h = cc->h, .w = cc->w, .f = cc->f,
	                      .kh = cc->k, .kw = cc->k, .stride = cc->s, .pad = cc->p,
	                      .dil = cc->d };
	return cdp_conv_desc_init(d);
}

static void conv_ref(const cdp_conv_desc *d, const float *x, const float *w, const float *b,
                     const float *dy, double *y, double *dx, double *dw, double *db)
{
	for (int n = 0; n < d->n; n++)
		for (int f = 0; f < d->f; f++)
			for (int oh = 0; oh < d->oh; oh++)
				for (int ow = 0; ow < d->ow; ow++) {
					size_t yi = (((size_t)n * d->f + f) * d->oh + oh) * d->ow + ow;
					double s = b ? b[f] : 0.0, g = dy[yi];
					for (int c = 0; c < d->c; c++)
						for (int i = 0; i < d->kh; i++)
							for (int j = 0; j < d->kw; j++) {
								int ih = oh * d->stride - d->pad + i * d->dil;
								int iw = ow * d->stride - d->pad + j * d->dil;
								if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
									continue;
								size_t xi = (((size_t)n * d->c + c) * d->h + ih) * d->w + iw;
								size_t wi = (((size_t)f * d->c + c) * d->kh + i) * d->kw + j;
								s += (double)x[xi] * w[wi];
								dx[xi] += g * w[wi];
								dw[wi] += g * x[xi];
							}
					y[yi] = s;
					db[f] += g;
				}
}

#endif
