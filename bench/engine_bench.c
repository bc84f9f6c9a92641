/* engine_bench.c: the speed of one training step of the engine, for
 * bench/engine.sh (CPU backend) and bench/gpu.sh (--device cuda).
 *
 * usage: engine_bench [-b N] [-d DEVICE] [-D KEY=VALUE]... [-i C,H,W]
 *                     [-n STEPS] [-p PRECISION] [-P FILE] [-t THREADS]
 *                     [-w WARMUP] CFG
 * DEVICE as cdp-train's --device (default cpu); PRECISION fp32 (default),
 * tf32, bf16 or fp16 (backend.h; the CPU has only fp32).
 *
 * A step is what cdp-train does per batch: forward, the cfg's loss,
 * backward, and an SGD step (lr 1e-3, momentum 0.9, weight decay 1e-4; the
 * same settings cdpool.torch_model gives torch.optim.SGD). The input is
 * N(0,1) and the labels uniform over the classes, fixed for all steps.
 * WARMUP steps (default 2) run first and are not timed; then STEPS
 * (default 5); each timed phase ends with be->sync, so on a GPU the
 * times are those of the work, not of queueing it. Prints one JSON line:
 * samples/s over the timed steps, the seconds spent in forward (with the
 * loss), backward and the optimizer,
 * and the peak resident memory of the whole process (getrusage ru_maxrss,
 * KiB) at the end and right after the backend started (base_kib); the
 * KiB the net allocated for activations (act_kib) and their gradients
 * (dact_kib), net.h's act_bytes and dact_bytes, and whether the bf16 stash
 * (net.c) was on (bf16_stash: 1 in bf16 unless CDP_BF16_STASH=0).
 *
 * -P FILE: after the timed steps, STEPS more steps with the net's per-layer
 * profile on (net.h: the device is waited for around every layer), and a
 * table in FILE: each layer's forward and backward milliseconds per step,
 * then the totals per layer type, each with its share of the profiled
 * step. It says where a step's time goes; its sum is above the plain
 * step's time by the cost of the waits, which the last line states.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "cdp_num.h"
#include "cdp_rng.h"
#include "device.h"
#include "loss.h"
#include "net.h"
#include "optim.h"

#define MAX_OVERRIDES 32

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long maxrss_kib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: engine_bench [-b N] [-d DEVICE] [-D KEY=VALUE]... [-i C,H,W]\n"
	           "                    [-n STEPS] [-p PRECISION] [-P FILE] [-t THREADS]\n"
	           "                    [-w WARMUP] CFG\n");
}

/* The -P table (see the top): per layer, then per type, in ms per step.
 * plain_s is one unprofiled step's seconds, for the last line. */
static int write_profile(const char *path, const cdp_net *net, const char *prec, int steps,
                         double plain_s)
{
	FILE *f = fopen(path, "w");
	double tot = 0, tf[64] = { 0 }, tb[64] = { 0 };
	const char *types[64];
	int nt = 0;

	if (!f)
		return -1;
	for (int i = 0; i <= net->out_layer; i++)
		tot += net->prof_fwd[i] + net->prof_bwd[i];
	tot = tot > 0 ? tot : 1e-30;
	fprintf(f, "# %s %s batch %d, %d profiled steps; ms per step\n", net->be->name, prec,
	        net->n, steps);
	fprintf(f, "%-4s %-16s %-8s %-16s %10s %10s %6s\n", "#", "layer", "type", "out (C,H,W)",
	        "fwd_ms", "bwd_ms", "share");
	for (int i = 0; i <= net->out_layer; i++) {
		const cdp_layer *l = &net->layers[i];
		double fw = net->prof_fwd[i], bw = net->prof_bwd[i];
		char shape[48];
		int t;
		snprintf(shape, sizeof shape, "%d,%d,%d", l->out.c, l->out.h, l->out.w);
		fprintf(f, "%-4d %-16s %-8s %-16s %10.3f %10.3f %5.1f%%\n", i, l->name,
		        l->ops->type, shape, 1e3 * fw / steps, 1e3 * bw / steps,
		        100 * (fw + bw) / tot);
		for (t = 0; t < nt && strcmp(types[t], l->ops->type); t++)
			;
		if (t == nt && nt < 64)
			types[nt++] = l->ops->type;
		if (t < 64) {
			tf[t] += fw;
			tb[t] += bw;
		}
	}
	fprintf(f, "\n%-8s %10s %10s %6s\n", "type", "fwd_ms", "bwd_ms", "share");
	for (int t = 0; t < nt; t++)
		fprintf(f, "%-8s %10.3f %10.3f %5.1f%%\n", types[t], 1e3 * tf[t] / steps,
		        1e3 * tb[t] / steps, 100 * (tf[t] + tb[t]) / tot);
	fprintf(f, "\nlayers, profiled: %.3f ms per step; a plain step (forward, loss, backward, "
	        "optimizer): %.3f ms\n", 1e3 * tot / steps, 1e3 * plain_s);
	return fclose(f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, 'b' },
		{ "define", required_argument, NULL, 'D' },
		{ "device", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "input", required_argument, NULL, 'i' },
		{ "precision", required_argument, NULL, 'p' },
		{ "profile", required_argument, NULL, 'P' },
		{ "steps", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' },
		{ "warmup", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ov[MAX_OVERRIDES], *path, *device = "cpu", *prof_path = NULL;
	int prec = CDP_PREC_FP32;
	int nov = 0, batch = 8, steps = 5, warmup = 2, threads = 0, shape[3] = { 0, 0, 0 };
	int ch, rc = 1, have_net = 0, have_cfg = 0, have_loss = 0, have_opt = 0, hw;
	size_t ns, nx, nl;
	char *text = NULL, err[512];
	cdp_backend *be = NULL;
	cdp_net net;
	cdp_cfg cfg;
	cdp_loss loss;
	cdp_optim_cfg oc;
	cdp_optim opt;
	cdp_loss_result res;
	int32_t *lab = NULL, *dlab = NULL;
	float *x = NULL;
	double t_fwd = 0, t_bwd = 0, t_opt = 0, t0, t1, start = 0, elapsed = 0, *prof = NULL;
	long base;
	cdp_rng r;

	while ((ch = getopt_long(argc, argv, "b:d:D:hi:n:p:P:t:w:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			if (cdp_parse_int(optarg, 1, 1 << 16, &batch) != 0)
				goto bad;
			break;
		case 'd':
			if (cdp_device_parse(optarg) != 0)
				goto bad;
			device = optarg;
			break;
		case 'p':
			if ((prec = cdp_precision_parse(optarg)) < 0)
				goto bad;
			break;
		case 'P':
			prof_path = optarg;
			break;
		case 'D':
			if (nov == MAX_OVERRIDES || !strchr(optarg, '='))
				goto bad;
			ov[nov++] = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'i':
			if (cdp_parse_int_list(optarg, 1, 1 << 16, shape, 3, &ns) != 0 || ns != 3)
				goto bad;
			break;
		case 'n':
			if (cdp_parse_int(optarg, 1, 1 << 20, &steps) != 0)
				goto bad;
			break;
		case 't':
			if (cdp_parse_int(optarg, 1, 256, &threads) != 0)
				goto bad;
			break;
		case 'w':
			if (cdp_parse_int(optarg, 0, 1 << 20, &warmup) != 0)
				goto bad;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	path = argv[optind];
	if (cdp_cfg_read(path, &text, err, sizeof err) < 0) {
		fprintf(stderr, "engine_bench: %s\n", err);
		return 1;
	}
	if (!(be = cdp_device_open(device, threads, 0, err, sizeof err))) {
		fprintf(stderr, "engine_bench: %s\n", err);
		goto out;
	}
	if (be->set_precision(be, prec) != 0) {
		snprintf(err, sizeof err, "the %s backend has no %s", be->name, cdp_precision_name(prec));
		goto fail;
	}
	base = maxrss_kib();
	if (cdp_net_build(&net, be, text, path, ov, nov, shape[0], shape[1], shape[2], batch,
	                  err, sizeof err) < 0)
		goto fail;
	have_net = 1;
	if (cdp_cfg_parse(text, path, ov, nov, &cfg, err, sizeof err) < 0)
		goto fail;
	have_cfg = 1;
	if (cdp_loss_init_cfg(&loss, be, &cfg, &cfg.s[0], net.classes, err, sizeof err) < 0)
		goto fail;
	have_loss = 1;
	cdp_optim_defaults(&oc);
	oc.type = CDP_OPT_SGD;
	oc.lr = 1e-3f;
	oc.momentum = 0.9f;
	oc.weight_decay = 1e-4f;
	if (cdp_optim_init(&opt, be, &oc, net.nparams, err, sizeof err) < 0)
		goto fail;
	have_opt = 1;
	hw = net.layers[net.out_layer].out.h * net.layers[net.out_layer].out.w;
	nx = (size_t)batch * net.in.c * net.in.h * net.in.w;
	nl = (size_t)batch * hw;
	x = malloc(nx * sizeof *x);
	lab = malloc(nl * sizeof *lab);
	dlab = be->alloc(be, nl * sizeof *dlab);
	if (!x || !lab || !dlab) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	cdp_rng_seed(&r, 1);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)cdp_rng_normal(&r);
	for (size_t i = 0; i < nl; i++)
		lab[i] = (int32_t)cdp_rng_below(&r, (uint64_t)loss.classes);
	be->to_device(be, net.x, x, nx * sizeof *x);
	be->to_device(be, dlab, lab, nl * sizeof *lab);
	cdp_net_init(&net, 1);
	cdp_net_zero_grad(&net);
	for (int s = 0; s < warmup + steps + (prof_path ? steps : 0); s++) {
		cdp_layer *out = &net.layers[net.out_layer];
		if (s == warmup) {
			t_fwd = t_bwd = t_opt = 0;
			start = now();
		}
		if (s == warmup + steps) {      /* the -P steps, after the timed ones */
			elapsed = now() - start;
			prof = calloc(2 * (size_t)net.nlayers, sizeof *prof);
			if (!prof) {
				snprintf(err, sizeof err, "out of memory");
				goto fail;
			}
			net.prof_fwd = prof;
			net.prof_bwd = prof + net.nlayers;
		}
		net.step_seed = cdp_rng_derive(1, 1, (uint64_t)s);
		t0 = now();
		cdp_net_forward(&net);
		cdp_loss_compute(&loss, net.n, hw, out->y, dlab, out->dy, &res);
		be->sync(be);
		t1 = now();
		if (!prof)
			t_fwd += t1 - t0;
		cdp_net_backward(&net, NULL, NULL);
		be->sync(be);
		t0 = now();
		if (!prof)
			t_bwd += t0 - t1;
		if (cdp_optim_micro_done(&opt) && cdp_optim_step(&opt, net.params, net.grads) != 0) {
			snprintf(err, sizeof err, "step %d: gradient norm %g", s, opt.last_norm);
			goto fail;
		}
		be->sync(be);
		if (!prof)
			t_opt += now() - t0;
	}
	t1 = prof ? elapsed : now() - start;
	printf("{\"impl\": \"cdpool %s\", \"precision\": \"%s\", \"layout\": \"nchw\", "
	       "\"threads\": %d, \"batch\": %d, "
	       "\"steps\": %d, \"seconds\": %.6f, \"samples_per_s\": %.4f, \"forward_s\": %.6f, "
	       "\"backward_s\": %.6f, \"optim_s\": %.6f, \"loss\": %.6f, \"nparams\": %zu, "
	       "\"maxrss_kib\": %ld, \"base_kib\": %ld, \"act_kib\": %zu, \"dact_kib\": %zu, "
	       "\"bf16_stash\": %d, \"kernels\": \"%s\"}\n", be->name, cdp_precision_name(prec), be->threads,
	       batch, steps, t1, steps * batch / t1, t_fwd, t_bwd, t_opt, res.loss, net.nparams, maxrss_kib(),
	       base, net.act_bytes >> 10, net.dact_bytes >> 10, net.stash, cdp_device_kernels(be));
	fflush(stdout);
	/* the profile after the result line: a failure here loses only itself */
	if (prof && write_profile(prof_path, &net, cdp_precision_name(prec), steps, t1 / steps) != 0) {
		snprintf(err, sizeof err, "cannot write '%s': %s", prof_path, strerror(errno));
		goto fail;
	}
	rc = 0;
	goto out;
bad:
	fprintf(stderr, "engine_bench: bad value '%s' for -%c\n", optarg, ch);
	free(text);
	return 2;
fail:
	fprintf(stderr, "engine_bench: %s\n", err);
out:
	if (dlab)
		be->free(be, dlab);
	free(x);
	free(lab);
	free(prof);
	if (have_opt)
		cdp_optim_free(&opt);
	if (have_loss)
		cdp_loss_free(&loss);
	if (have_cfg)
		cdp_cfg_free(&cfg);
	if (have_net)
		cdp_net_free(&net);
	if (be)
		be->destroy(be);
	free(text);
	return rc;
}
