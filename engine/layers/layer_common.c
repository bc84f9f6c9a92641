/* layer_common.c: helpers every layer file uses (layers.h): inputs and
 * input gradients, cfg options with defaults and ranges, the activation
 * option, and He initialisation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdp_rng.h"
#include "layers.h"

const float *cdp_layer_x(const cdp_net *net, const cdp_layer *l, int j)
{
	return l->from[j] < 0 ? net->x : net->layers[l->from[j]].y;
}

const uint16_t *cdp_layer_xh(const cdp_net *net, const cdp_layer *l, int j)
{
	const cdp_layer *in = l->from[j] < 0 ? NULL : &net->layers[l->from[j]];

	return in && !in->y ? in->yh : NULL;
}

uint16_t *cdp_layer_copy_in(cdp_net *net, const cdp_layer *l, int j)
{
	cdp_layer *in = l->from[j] < 0 ? NULL : &net->layers[l->from[j]];

	if (!in || !in->yh || !in->y || in->fwd_end != l->index)
		return NULL;
	in->yh_fresh = 1;
	return in->yh;
}

uint16_t *cdp_layer_copy_out(cdp_layer *l)
{
	if (l->yh && l->y)
		l->yh_fresh = 1;
	return l->yh;
}

float *cdp_layer_dx(const cdp_net *net, const cdp_layer *l, int j)
{
	if (l->from[j] < 0)
		return net->input_grad ? net->dx : NULL;
	return net->layers[l->from[j]].dy;
}

int cdp_lopt_int(cdp_net *net, const cdp_cfg_section *s, const char *key, int def,
                 int min, int max, int *out, char *err, size_t cap)
{
	/* the section belongs to net->cfg; reading marks the key used */
	return cdp_cfg_int(net->cfg, (cdp_cfg_section *)s, key, def, min, max, out, err, cap);
}

int cdp_lopt_float(cdp_net *net, const cdp_cfg_section *s, const char *key, float def,
                   float min, float max, float *out, char *err, size_t cap)
{
	return cdp_cfg_float(net->cfg, (cdp_cfg_section *)s, key, def, min, max, out, err, cap);
}

int cdp_lopt_act(cdp_net *net, const cdp_cfg_section *s, cdp_layer *l, char *err, size_t cap)
{
	const char *a = cdp_cfg_str((cdp_cfg_section *)s, "activation", "linear");

	l->slope = 0.0f;
	if (strcmp(a, "linear") == 0)
		l->act = 0;
	else if (strcmp(a, "relu") == 0)
		l->act = CDP_ACT_RELU;
	else if (strcmp(a, "leaky") == 0) {
		l->act = CDP_ACT_LEAKY;
		return cdp_lopt_float(net, s, "slope", 0.01f, 0.0f, 1.0f, &l->slope, err, cap);
	} else {
		snprintf(err, cap, "activation '%.32s' is not linear, relu or leaky", a);
		return -1;
	}
	return 0;
}

int cdp_layer_one_input(const cdp_layer *l, char *err, size_t cap)
{
	if (l->nfrom == 1)
		return 0;
	snprintf(err, cap, "takes one input, from= names %d", l->nfrom);
	return -1;
}

void cdp_layer_he_init(cdp_layer *l, cdp_net *net, uint64_t seed, size_t fan_in)
{
	cdp_backend *be = net->be;
	float buf[1024];
	double std = fan_in ? sqrt(2.0 / (double)fan_in) : 0.0;
	cdp_rng r;

	cdp_rng_seed(&r, cdp_rng_derive(seed, (uint64_t)l->index, 0));
	for (size_t done = 0; done < l->w_len; ) {
		size_t m = l->w_len - done < 1024 ? l->w_len - done : 1024;
		for (size_t i = 0; i < m; i++)
			buf[i] = (float)(cdp_rng_normal(&r) * std);
		be->to_device(be, net->params + l->w_off + done, buf, m * sizeof(float));
		done += m;
	}
	if (l->b_len)
		be->fill(be, net->params + l->b_off, 0.0f, l->b_len);
}
