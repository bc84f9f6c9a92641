/* backend.c: the backend-neutral part of backend.h, the descriptors' output
 * sizes. Every backend and every layer computes a shape through these, so
 * the CPU and CUDA backends cannot disagree on one (cuda_conv.c checks that
 * cuDNN agrees).
 */
#include "backend.h"

int cdp_conv_desc_init(cdp_conv_desc *d)
{
	long eh, ew;

	if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->f < 1 ||
	    d->kh < 1 || d->kw < 1 || d->stride < 1 || d->pad < 0 || d->dil < 1)
		return -1;
	eh = (long)d->dil * (d->kh - 1) + 1;
	ew = (long)d->dil * (d->kw - 1) + 1;
	if (d->h + 2L * d->pad < eh || d->w + 2L * d->pad < ew)
		return -1;
	d->oh = (int)((d->h + 2L * d->pad - eh) / d->stride + 1);
	d->ow = (int)((d->w + 2L * d->pad - ew) / d->stride + 1);
	return 0;
}

/* PyTorch's rule (ceil_mode=False): out = (in + 2 pad - k) / stride + 1,
 * and pad <= k/2 so that no window lies entirely in the padding. */
int cdp_pool_desc_init(cdp_pool_desc *d)
{
	if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 ||
	    d->stride < 1 || d->pad < 0 || d->pad > d->k / 2 ||
	    d->h + 2 * d->pad < d->k || d->w + 2 * d->pad < d->k)
		return -1;
	d->oh = (d->h + 2 * d->pad - d->k) / d->stride + 1;
	d->ow = (d->w + 2 * d->pad - d->k) / d->stride + 1;
	return 0;
}
