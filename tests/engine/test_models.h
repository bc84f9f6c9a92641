/* test_models.h: the engine tests' reader of the shipped model cfgs, and
 * their CPU backend in bf16. */
#ifndef CDP_TEST_MODELS_H
#define CDP_TEST_MODELS_H

#include <stdio.h>
#include <stdlib.h>
#include "backend.h"
#include "cfg/cfg.h"

/* share/cdpool/models/NAME (under $CDP_SRCDIR, else the build's source
 * tree) through cdp_cfg_read; NULL with a message on stderr */
static inline char *read_model(const char *name)
{
	const char *dir = getenv("CDP_SRCDIR") ? getenv("CDP_SRCDIR") : CDP_SRCDIR;
	char path[4096], err[512], *text;

	snprintf(path, sizeof path, "%s/share/cdpool/models/%s", dir, name);
	if (cdp_cfg_read(path, &text, err, sizeof err) < 0)
		fprintf(stderr, "%s\n", err);
	return text;
}

/* A CPU backend of 2 threads set to bf16: its AVX512_BF16 kernels where
 * the CPU has them, else the emulated ones (CDP_CPU_BF16_EMU=1, read by a
 * fresh backend; "# emulated bf16 kernels" on stdout); NULL with a message
 * naming prog when it refuses bf16 even so. */
static inline cdp_backend *bf16_backend(const char *prog)
{
	cdp_backend *be = cdp_backend_cpu(2);

	if (be && be->set_precision(be, CDP_PREC_BF16) == 0)
		return be;
	if (be)
		be->destroy(be);
	setenv("CDP_CPU_BF16_EMU", "1", 1);
	be = cdp_backend_cpu(2);
	if (!be || be->set_precision(be, CDP_PREC_BF16) != 0) {
		fprintf(stderr, "%s: the CPU backend refuses bf16 even emulated\n", prog);
		if (be)
			be->destroy(be);
		return NULL;
	}
	printf("# emulated bf16 kernels\n");
	return be;
}

#endif
