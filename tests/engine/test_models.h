/* test_models.h: the engine tests' reader of the shipped model cfgs. */
#ifndef CDP_TEST_MODELS_H
#define CDP_TEST_MODELS_H

#include <stdio.h>
#include <stdlib.h>
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

#endif
