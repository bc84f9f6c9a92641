/* fuzz_cfg_body.h: the fuzz target for the model language (cfg/cfg.h,
 * engine/cfg/: the parser with its @for / @if and ${} expansion) and the
 * net built from it on the CPU backend (net.h).
 *
 * Shared by the libFuzzer harness (fuzz_cfg.c) and the corpus replay
 * (tests/engine/test_fuzz_cfg.c). The input is the text of a cfg file.
 * abort() marks a broken invariant:
 *   - a refusal has a message, "fuzz.cfg:LINE: reason" or "fuzz.cfg: ...";
 *   - an accepted cfg's sections have a type and keys with values.
 * A cfg that parses, has at most CDP_FUZZ_CFG_SECTIONS sections and a [net]
 * first is then built as a net (batch 1, the [net] section's channels, in_h
 * and in_w capped at 8, 32 and 32): the fuzzer should explore the language
 * and the layers' shape checks, not the allocator, so the backend's
 * allocations are held to CDP_FUZZ_CFG_BYTES in all for one build (an
 * allocation over it fails as out of memory would: the build must say so
 * and free what it holds). A refused build must have a message too. A cfg
 * naming an unknown [net] key is parsed and built under the old rule, as
 * cdp-predict reads a checkpoint written before [vars] (cdp_net_build_ckpt).
 * Returns 0 when the cfg parses (whatever the build says).
 */
#ifndef CDP_FUZZ_CFG_BODY_H
#define CDP_FUZZ_CFG_BODY_H

#include "augment.h"
#include "backend.h"
#include "cfg/cfg.h"
#include "net.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CDP_FUZZ_CFG_SECTIONS 128
#define CDP_FUZZ_CFG_BYTES    (64u << 20)

static void *(*cdp_fuzz_cpu_alloc)(cdp_backend *be, size_t bytes);
static size_t cdp_fuzz_cfg_used;

/* The CPU backend's allocator under the budget. */
static void *cdp_fuzz_capped_alloc(cdp_backend *be, size_t bytes)
{
	if (bytes > CDP_FUZZ_CFG_BYTES - cdp_fuzz_cfg_used)
		return NULL;
	cdp_fuzz_cfg_used += bytes;
	return cdp_fuzz_cpu_alloc(be, bytes);
}

static cdp_backend *cdp_fuzz_cfg_backend(void)
{
	static cdp_backend *be;

	if (!be) {
		if (!(be = cdp_backend_cpu(1)))
			abort();
		cdp_fuzz_cpu_alloc = be->alloc;
		be->alloc = cdp_fuzz_capped_alloc;
	}
	cdp_fuzz_cfg_used = 0;
	return be;
}

/* The [net] option key as an int in [1, max], else def. */
static int cdp_fuzz_cfg_dim(const cdp_cfg_section *s, const char *key, int max, int def)
{
	for (int i = 0; i < s->nkv; i++) {
		if (strcmp(s->kv[i].key, key) == 0) {
			char *end;
			long v = strtol(s->kv[i].value, &end, 10);
			if (*end || v < 1)
				return def;
			return v > max ? max : (int)v;
		}
	}
	return def;
}

static int cdp_fuzz_cfg_one(const uint8_t *p, size_t n)
{
	char err[512], *text = malloc(n + 1);
	cdp_cfg cfg;
	int rc;

	if (!text)
		abort();
	memcpy(text, p, n);
	text[n] = '\0';
	err[0] = '\0';
	memset(&cfg, 0, sizeof cfg);
	rc = cdp_cfg_parse(text, "fuzz.cfg", NULL, 0, &cfg, err, sizeof err);
	/* an unknown [net] key: the old rule a checkpoint's cfg may be read under */
	if (rc == CDP_CFG_EUNKNOWN)
		rc = cdp_cfg_parse_rule(text, "fuzz.cfg", NULL, 0, 1, &cfg, err, sizeof err);
	if (rc < 0) {
		if (strncmp(err, "fuzz.cfg", 8) != 0 || !err[8])
			abort();
		cdp_cfg_free(&cfg);
		free(text);
		return -1;
	}
	for (int i = 0; i < cfg.ns; i++) {
		if (!cfg.s[i].type || !cfg.s[i].type[0] || cfg.s[i].nkv < 0)
			abort();
		for (int k = 0; k < cfg.s[i].nkv; k++)
			if (!cfg.s[i].kv[k].key || !cfg.s[i].kv[k].key[0] ||
			    !cfg.s[i].kv[k].value)
				abort();
	}
	if (cfg.ns > 0 && cfg.ns <= CDP_FUZZ_CFG_SECTIONS &&
	    strcmp(cfg.s[0].type, "net") == 0) {
		cdp_backend *be = cdp_fuzz_cfg_backend();
		cdp_aug_cfg aug;
		cdp_net net;
		int c = cdp_fuzz_cfg_dim(&cfg.s[0], "channels", 8, 3);
		int h = cdp_fuzz_cfg_dim(&cfg.s[0], "in_h", 32, 32);
		int w = cdp_fuzz_cfg_dim(&cfg.s[0], "in_w", 32, 32);

		err[0] = '\0';
		if (cdp_aug_cfg_parse(&aug, &cfg, &cfg.s[0], err, sizeof err) < 0 && !err[0])
			abort();
		memset(&net, 0, sizeof net);
		err[0] = '\0';
		if (cdp_net_build_ckpt(&net, be, text, "fuzz.cfg", NULL, 0, c, h, w, 1, NULL, 0,
		                       err, sizeof err) < 0) {
			if (!err[0])
				abort();
		} else {
			if (net.nlayers < 1)
				abort();
			cdp_net_free(&net);
		}
	}
	cdp_cfg_free(&cfg);
	free(text);
	return 0;
}

#endif
