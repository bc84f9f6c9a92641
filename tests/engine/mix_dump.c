/* mix_dump.c: MixUp / CutMix draws and a mixed batch (engine/augment.h,
 * cdp_mix_draw and cdp_mix_apply), for tests/engine/mix.sh, which checks
 * them against NumPy (mix_ref.py).
 *
 *   mix_dump CFG H W SEED COUNT [N C IN OUT]
 *
 * CFG: a model cfg whose [net] section sets mixup_alpha= and the rest;
 * prints the draw for (H, W) images of seeds SEED .. SEED + COUNT - 1,
 * one a line: "on cut lam y0 y1 x0 x1" (lam %.17g). With N C IN OUT: reads
 * the batch (N, C, H, W) float32 from IN, mixes it by seed SEED's draw and
 * writes it to OUT. Exit 0, 1 on failure, 2 usage.
 */
#include "augment.h"
#include "cfg/cfg.h"

#include <stdio.h>
#include <stdlib.h>

static int mix_file(const cdp_mix *m, int n, int c, int h, int w, const char *in,
                    const char *out)
{
	size_t len = (size_t)n * c * h * w;
	float *x = malloc(len * sizeof *x);
	FILE *f;
	int ok;

	if (!x || !(f = fopen(in, "rb"))) {
		fprintf(stderr, "mix_dump: cannot read '%s'\n", in);
		free(x);
		return -1;
	}
	ok = fread(x, sizeof *x, len, f) == len;
	fclose(f);
	if (ok) {
		cdp_mix_apply(m, n, c, h, w, x);
		ok = (f = fopen(out, "wb")) != NULL;
		ok = ok && fwrite(x, sizeof *x, len, f) == len;
		ok = f && fclose(f) == 0 && ok;
	}
	if (!ok)
		fprintf(stderr, "mix_dump: cannot mix '%s' into '%s'\n", in, out);
	free(x);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	cdp_cfg cfg;
	cdp_aug_cfg a;
	cdp_mix m;
	char *text = NULL, err[512];
	int h, w, rc = 1;
	unsigned long long seed;
	long count;

	if (argc != 6 && argc != 10) {
		fprintf(stderr, "usage: mix_dump CFG H W SEED COUNT [N C IN OUT]\n");
		return 2;
	}
	h = atoi(argv[2]);
	w = atoi(argv[3]);
	seed = strtoull(argv[4], NULL, 10);
	count = atol(argv[5]);
	if (h < 1 || w < 1 || count < 0) {
		fprintf(stderr, "mix_dump: bad H, W or COUNT\n");
		return 2;
	}
	if (cdp_cfg_read(argv[1], &text, err, sizeof err) < 0 ||
	    cdp_cfg_parse(text, argv[1], NULL, 0, &cfg, err, sizeof err) < 0) {
		fprintf(stderr, "mix_dump: %s\n", err);
		free(text);
		return 1;
	}
	if (cdp_aug_cfg_parse(&a, &cfg, &cfg.s[0], err, sizeof err) < 0) {
		fprintf(stderr, "mix_dump: %s\n", err);
		goto out;
	}
	for (long i = 0; i < count; i++) {
		cdp_mix_draw(&a, h, w, seed + (unsigned long long)i, &m);
		printf("%d %d %.17g %d %d %d %d\n", m.on, m.cut, m.lam, m.y0, m.y1, m.x0, m.x1);
	}
	cdp_mix_draw(&a, h, w, seed, &m);
	rc = argc == 10 && mix_file(&m, atoi(argv[6]), atoi(argv[7]), h, w, argv[8], argv[9]) < 0;
out:
	cdp_cfg_free(&cfg);
	free(text);
	return rc;
}
