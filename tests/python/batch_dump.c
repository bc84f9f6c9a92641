/* batch_dump.c: the float batch that cdp-train's loader (tools/train/loader.h,
 * the host path) gives rank R of J at (epoch, step), for
 * tests/python/test_cdpool.py to compare with PoolDataset's bit for bit.
 *
 * usage: batch_dump POOL KEYS SEED BATCH RANK J EPOCH STEP HFLIP VFLIP ROT90
 *                   CROP_H CROP_W OUT [KEY=VALUE,...]
 *
 * BATCH is per rank; HFLIP VFLIP ROT90 are 0 or 1 and CROP_H CROP_W 0 (no
 * crop) or the crop, as the cfg's aug_* and crop_* keys; the optional last
 * argument gives more [net] keys (the photometric aug_*). Writes OUT.f32,
 * the images (n, c, h, w) float32, and OUT.i32, the per-pixel labels
 * (n, h, w) int32 (empty for a pool without labels), raw little-endian
 * (a pool of per-pixel labels or none: not scalar classes), and prints
 * "n c h w" and then the batch's key indices, one a line.
 * Exit 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cdp_num.h"
#include "loader.h"
#include "cfg/cfg.h"

static int write_file(const char *out, const char *ext, const void *p, size_t bytes)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "%s.%s", out, ext);
	if (!(f = fopen(path, "wb"))) {
		fprintf(stderr, "batch_dump: cannot create '%s': %s\n", path, strerror(errno));
		return -1;
	}
	ok = fwrite(p, 1, bytes, f) == bytes;
	ok = fclose(f) == 0 && ok;
	if (!ok)
		fprintf(stderr, "batch_dump: cannot write '%s'\n", path);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	int v[10];
	uint64_t seed;
	cdp_loader_opts o;
	cdp_aug_cfg aug = { 0 };
	cdp_loader *l = NULL;
	cdp_batch b;
	char err[512];
	int rc = 1;

	if ((argc != 15 && argc != 16) || cdp_parse_u64(argv[3], 0, UINT64_MAX, &seed) != 0) {
		fprintf(stderr, "usage: batch_dump POOL KEYS SEED BATCH RANK J EPOCH STEP HFLIP VFLIP "
		        "ROT90 CROP_H CROP_W OUT [KEY=VALUE,...]\n");
		return 2;
	}
	for (int i = 0; i < 10; i++)
		if (cdp_parse_int(argv[4 + i], 0, 1 << 20, &v[i]) != 0) {
			fprintf(stderr, "batch_dump: bad number '%s'\n", argv[4 + i]);
			return 2;
		}
	cdp_loader_opts_init(&o);
	o.pool_path = argv[1];
	o.keys_path = argv[2];
	o.seed = seed;
	o.batch = v[0];
	o.rank = v[1];
	o.nranks = v[2];
	if (argc == 16) {
		char text[4096];
		cdp_cfg cfg;
		snprintf(text, sizeof text, "[net]\n%s\n", argv[15]);
		for (char *p = text; *p; p++)
			if (*p == ',')
				*p = '\n';
		if (cdp_cfg_parse(text, "keys", NULL, 0, &cfg, err, sizeof err) != 0 ||
		    cdp_aug_cfg_parse(&aug, &cfg, &cfg.s[0], err, sizeof err) != 0) {
			fprintf(stderr, "batch_dump: %s\n", err);
			return 2;
		}
		cdp_cfg_free(&cfg);
	}
	aug.hflip = v[5];
	aug.vflip = v[6];
	aug.rot90 = v[7];
	aug.crop_h = v[8];
	aug.crop_w = v[9];
	if (aug.hflip || aug.vflip || aug.rot90 || aug.crop_h || aug.crop_w || cdp_aug_host_only(&aug))
		o.aug = &aug;
	if (cdp_loader_open(&o, &l, err, sizeof err) != 0) {
		fprintf(stderr, "batch_dump: %s\n", err);
		return 1;
	}
	if (cdp_loader_start_epoch(l, (uint64_t)v[3], (uint64_t)v[4]) != 0 ||
	    cdp_loader_next(l, &b) != 0) {
		fprintf(stderr, "batch_dump: no batch at epoch %d step %d: %s\n", v[3], v[4],
		        cdp_loader_error(l));
		goto out;
	}
	if (write_file(argv[14], "f32", b.image, (size_t)b.n * b.c * b.h * b.w * sizeof(float)) < 0 ||
	    write_file(argv[14], "i32", b.label ? (const void *)b.label : "",
	               b.label ? (size_t)b.n * b.h * b.w * sizeof(int32_t) : 0) < 0)
		goto out;
	printf("%d %d %d %d\n", b.n, b.c, b.h, b.w);
	for (int i = 0; i < b.n; i++)
		printf("%zu\n", b.index[i]);
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	cdp_loader_close(l);
	return rc;
}
