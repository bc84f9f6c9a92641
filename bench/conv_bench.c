/* conv_bench.c: the time of one convolution layer's forward, data
 * gradient and filter gradient on the CPU backend, for bench/conv.sh.
 *
 * usage: conv_bench [-b] [-k K] [-p PAD] [-r REPS] [-s STRIDE] [-t THREADS] N,C,H,F
 * x (N, C, H, H), F filters of K x K (default 3), stride STRIDE (default
 * 1), padding PAD (default K/2). Each op runs REPS times (default 5); prints one JSON line
 * with the best time of each in ms and the GF/s of the direct arithmetic
 * (2 N F C K^2 OH OW per op), whatever algorithm ran (so Winograd shows as
 * "effective" GF/s). -b: in bf16 (CDP_PREC_BF16: bf16 operands, fp32
 * sums). The environment chooses the algorithm and the kernels
 * (CDP_CPU_WINOGRAD, CDP_CPU_ISA, CDP_CPU_BF16 as in cdp-train(1)).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "cdp_num.h"
#include "cdp_progress.h"
#include "cpu/cpu.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: conv_bench [-b] [-k K] [-p PAD] [-r REPS] [-s STRIDE] [-t THREADS] "
	           "N,C,H,F\n");
}

static float *filled(cdp_backend *be, size_t n, int mod, float scale)
{
	float *p = be->alloc(be, n * sizeof *p);

	for (size_t i = 0; p && i < n; i++)
		p[i] = (float)((long)(i % mod) - mod / 2) * scale;
	return p;
}

int main(int argc, char **argv)
{
	int k = 3, pad = -1, reps = 5, stride = 1, threads = 1, bf16 = 0, n, c, h, f, opt, shape[4];
	size_t ns;

	while ((opt = getopt(argc, argv, "bk:p:r:s:t:h")) != -1) {
		if (opt == 'b') {
			bf16 = 1;
			continue;
		}
		int *dst = opt == 'k' ? &k : opt == 'p' ? &pad : opt == 'r' ? &reps :
		           opt == 's' ? &stride : &threads;
		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == '?' || cdp_parse_int(optarg, 0, 4096, dst) != 0) {
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc ||
	    cdp_parse_int_list(argv[optind], 1, 1 << 16, shape, 4, &ns) != 0 || ns != 4 ||
	    k < 1 || reps < 1 || stride < 1 || threads < 1) {
		usage(stderr);
		return 2;
	}
	n = shape[0], c = shape[1], h = shape[2], f = shape[3];
	cdp_backend *be = cdp_backend_cpu(threads);
	cdp_conv_desc d = { .n = n, .c = c, .h = h, .w = h, .f = f, .kh = k, .kw = k, .stride = stride,
	                    .pad = pad < 0 ? k / 2 : pad, .dil = 1 };
	if (!be || cdp_conv_desc_init(&d) < 0) {
		fprintf(stderr, "conv_bench: no backend, or a shape it refuses\n");
		return 1;
	}
	if (bf16 && be->set_precision(be, CDP_PREC_BF16) != 0) {
		fprintf(stderr, "conv_bench: this CPU has no bf16 kernels\n");
		return 1;
	}
	size_t nx = (size_t)n * c * h * h, ny = (size_t)n * f * d.oh * d.ow, nw = (size_t)f * c * k * k;
	float *x = filled(be, nx, 13, 0.1f), *w = filled(be, nw, 7, 0.01f), *dy = filled(be, ny, 5, 0.1f);
	float *y = filled(be, ny, 1, 0.0f), *dx = filled(be, nx, 1, 0.0f), *dw = filled(be, nw, 1, 0.0f);
	float *db = filled(be, (size_t)f, 1, 0.0f);
	void *ws = be->alloc(be, cpu_conv_workspace(be, &d) + 64);
	double best[3] = { 1e30, 1e30, 1e30 };

	if (!x || !w || !dy || !y || !dx || !dw || !db || !ws) {
		fprintf(stderr, "conv_bench: out of memory\n");
		return 1;
	}
	for (int r = 0; r < reps; r++) {
		double t[4];
		t[0] = cdp_now();
		cpu_conv_fwd(be, &d, x, w, NULL, y, ws);
		t[1] = cdp_now();
		cpu_conv_bwd_data(be, &d, dy, w, dx, 0.0f, ws);
		t[2] = cdp_now();
		cpu_conv_bwd_filter(be, &d, x, dy, dw, db, ws);
		t[3] = cdp_now();
		for (int i = 0; i < 3; i++)
			if (t[i + 1] - t[i] < best[i])
				best[i] = t[i + 1] - t[i];
	}
	double fl = 2.0 * n * f * c * k * k * d.oh * d.ow / 1e9;
	printf("{\"n\":%d,\"c\":%d,\"h\":%d,\"f\":%d,\"k\":%d,\"stride\":%d,\"threads\":%d,\"isa\":\"%s\","
	       "\"precision\":\"%s\","
	       "\"fwd_ms\":%.3f,\"data_ms\":%.3f,\"filter_ms\":%.3f,"
	       "\"fwd_gflops\":%.1f,\"data_gflops\":%.1f,\"filter_gflops\":%.1f}\n",
	       n, c, h, f, k, stride, threads, cpu_kgemm_isa(), bf16 ? cpu_kgemm_bf16() : "fp32", best[0] * 1e3, best[1] * 1e3, best[2] * 1e3,
	       fl / best[0], fl / best[1], fl / best[2]);
	return 0;
}
