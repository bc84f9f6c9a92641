/* test_model_doc.c: cdp-model(5) against the code it documents.
 *
 *  - every example cfg of the page (an .EX block after a line
 *    `.\" example NAME`) parses, builds on the CPU backend for 32x32 inputs
 *    at batch 2, runs forward, and its training options are accepted by
 *    the loss, the optimizer and the augmentation; every `.\" build NAME
 *    K=V,...` line builds example NAME again with those overrides;
 *  - the layer types of CDP_LAYERS (layers.h) are exactly the page's
 *    `.SS [type]` subsections of LAYERS;
 *  - the options each layer type reads are exactly the `.TP` keys of its
 *    subsection (plus those of the untitled subsection every layer takes:
 *    name=, from=), and the [net] keys the engine and cdp-train read are
 *    exactly the `.TP` keys of NET OPTIONS and of cfg/netkeys.h, the
 *    registry that refuses any other [net] key.
 *
 * What the code reads is seen, not listed: the test links with
 * -Wl,--wrap for cdp_cfg_str, cdp_cfg_int, cdp_cfg_float and
 * cdp_cfg_float_below, so every
 * lookup, by any layer or by loss.c, optim.c, net.c or cdp-train's
 * augment.c, is recorded with its section type. Each layer type is built
 * with one input and with two, with and without activation=leaky (slope=
 * is read only then), so every option its make() can read is asked for.
 *
 * Usage: test_model_doc [PAGE] (default: the source tree's man/cdp-model.5).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "layers.h"
#include "loss.h"
#include "optim.h"
#include "augment.h"
#include "tap.h"

#ifndef CDP_SRCDIR
#define CDP_SRCDIR "."
#endif

/* ---- what the code reads --------------------------------------------- */

#define MAX_NAMES 512

typedef struct names { char *s[MAX_NAMES]; int n; } names;

static names asked;             /* "type key" for every lookup */

static int names_has(const names *ns, const char *s)
{
	for (int i = 0; i < ns->n; i++)
		if (strcmp(ns->s[i], s) == 0)
			return 1;
	return 0;
}

static void names_add(names *ns, const char *s)
{
	if (names_has(ns, s))
		return;
	if (ns->n == MAX_NAMES) {
		fprintf(stderr, "test_model_doc: more than %d names\n", MAX_NAMES);
		exit(99);
	}
	if (!(ns->s[ns->n++] = strdup(s)))
		exit(99);
}

static void names_free(names *ns)
{
	for (int i = 0; i < ns->n; i++)
		free(ns->s[i]);
	ns->n = 0;
}

static void trace(const cdp_cfg_section *s, const char *key)
{
	char buf[256];

	snprintf(buf, sizeof buf, "%s %s", s ? s->type : "?", key);
	names_add(&asked, buf);
}

const char *__real_cdp_cfg_str(cdp_cfg_section *s, const char *key, const char *def);
int __real_cdp_cfg_int(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, int def,
                       int min, int max, int *out, char *err, size_t cap);
int __real_cdp_cfg_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                         float min, float max, float *out, char *err, size_t cap);
const char *__wrap_cdp_cfg_str(cdp_cfg_section *s, const char *key, const char *def);
int __wrap_cdp_cfg_int(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, int def,
                       int min, int max, int *out, char *err, size_t cap);
int __wrap_cdp_cfg_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                         float min, float max, float *out, char *err, size_t cap);
int __real_cdp_cfg_float_below(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key,
                               float def, float min, float end, float *out, char *err,
                               size_t cap);
int __wrap_cdp_cfg_float_below(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key,
                               float def, float min, float end, float *out, char *err,
                               size_t cap);

const char *__wrap_cdp_cfg_str(cdp_cfg_section *s, const char *key, const char *def)
{
	trace(s, key);
	return __real_cdp_cfg_str(s, key, def);
}

int __wrap_cdp_cfg_int(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, int def,
                       int min, int max, int *out, char *err, size_t cap)
{
	trace(s, key);
	return __real_cdp_cfg_int(cfg, s, key, def, min, max, out, err, cap);
}

int __wrap_cdp_cfg_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                         float min, float max, float *out, char *err, size_t cap)
{
	trace(s, key);
	return __real_cdp_cfg_float(cfg, s, key, def, min, max, out, err, cap);
}

int __wrap_cdp_cfg_float_below(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key,
                               float def, float min, float end, float *out, char *err,
                               size_t cap)
{
	trace(s, key);
	return __real_cdp_cfg_float_below(cfg, s, key, def, min, end, out, err, cap);
}

/* ---- what the page says ------------------------------------------------ */

#define MAX_EXAMPLES 32

typedef struct example { char name[64]; char *text; int line; } example;

typedef struct page {
	names types;            /* "conv", ... */
	names keys;             /* "conv filters", "* name" (every layer), "net lr" */
	example ex[MAX_EXAMPLES];
	int nex;
	char *build[MAX_EXAMPLES];   /* "NAME K=V,..." */
	int nbuild;
} page;

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A line of an .EX block as the reader sees it: \- is '-', \e '\', \& is
 * nothing. Any other escape is refused, so an example cannot hold text
 * that this test would read differently from man(1). */
static int unescape(const char *in, char *out, size_t cap)
{
	size_t o = 0;

	for (; *in; in++) {
		char c = *in;
		if (c == '\\') {
			in++;
			if (*in == '-')
				c = '-';
			else if (*in == 'e')
				c = '\\';
			else if (*in == '&')
				continue;
			else
				return -1;
		}
		if (o + 2 > cap)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* The key of a .TP tag line (.B, .BI or .BR whose first argument starts
 * with KEY=), or "" when the line is not one. */
static void tag_key(const char *line, char *key, size_t cap)
{
	const char *p;
	size_t n = 0;

	key[0] = '\0';
	if (strncmp(line, ".B ", 3) == 0)
		p = line + 3;
	else if (strncmp(line, ".BI ", 4) == 0 || strncmp(line, ".BR ", 4) == 0)
		p = line + 4;
	else
		return;
	if (*p == '"')
		p++;
	while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || p[n] == '_')
		n++;
	if (n == 0 || p[n] != '=' || n >= cap)
		return;
	memcpy(key, p, n);
	key[n] = '\0';
}

enum { S_OTHER, S_NET, S_LAYERS };

static int page_parse(page *pg, char *text, const char *path)
{
	char *line, *next, type[64] = "", pending[64] = "";
	int sect = S_OTHER, after_tp = 0, no = 0, in_ex = 0, bad = 0;
	size_t exlen = 0;

	for (line = text; *line; line = next) {
		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		no++;
		if (in_ex) {
			example *e = &pg->ex[pg->nex - 1];
			char buf[1024];
			if (strcmp(line, ".EE") == 0) {
				in_ex = 0;
				continue;
			}
			if (unescape(line, buf, sizeof buf) < 0) {
				fprintf(stderr, "%s: example '%s': an escape other than \\- \\e \\& "
				        "in '%s'\n", path, e->name, line);
				bad++;
				continue;
			}
			e->text = realloc(e->text, exlen + strlen(buf) + 2);
			if (!e->text)
				exit(99);
			memcpy(e->text + exlen, buf, strlen(buf));
			exlen += strlen(buf);
			e->text[exlen++] = '\n';
			e->text[exlen] = '\0';
			continue;
		}
		if (strncmp(line, ".\\\" example ", 12) == 0) {
			snprintf(pending, sizeof pending, "%s", line + 12);
			continue;
		}
		if (strncmp(line, ".\\\" build ", 10) == 0) {
			if (pg->nbuild < MAX_EXAMPLES && !(pg->build[pg->nbuild++] = strdup(line + 10)))
				exit(99);
			continue;
		}
		if (strcmp(line, ".EX") == 0 && pending[0]) {
			example *e;
			if (pg->nex == MAX_EXAMPLES) {
				fprintf(stderr, "%s: more than %d examples\n", path, MAX_EXAMPLES);
				return -1;
			}
			e = &pg->ex[pg->nex++];
			snprintf(e->name, sizeof e->name, "%s", pending);
			e->text = NULL;
			e->line = no;
			exlen = 0;
			pending[0] = '\0';
			in_ex = 1;
			continue;
		}
		if (strncmp(line, ".SH", 3) == 0) {
			const char *t = line + 3;
			while (*t == ' ' || *t == '"')
				t++;
			sect = strncmp(t, "NET OPTIONS", 11) == 0 ? S_NET
			     : strncmp(t, "LAYERS", 6) == 0 ? S_LAYERS : S_OTHER;
			strcpy(type, sect == S_NET ? "net" : "*");
			continue;
		}
		if (strncmp(line, ".SS ", 4) == 0 && sect == S_LAYERS) {
			const char *t = line + 4, *end;
			while (*t == ' ' || *t == '"')
				t++;
			end = strchr(t, ']');
			if (t[0] == '[' && end) {
				snprintf(type, sizeof type, "%.*s", (int)(end - t - 1), t + 1);
				names_add(&pg->types, type);
			} else {
				strcpy(type, "*");
			}
			continue;
		}
		if (strcmp(line, ".TP") == 0 || strncmp(line, ".TP ", 4) == 0) {
			after_tp = 1;
			continue;
		}
		if (after_tp && sect != S_OTHER) {
			char key[64], buf[160];
			tag_key(line, key, sizeof key);
			if (!key[0]) {
				fprintf(stderr, "%s: .TP tag '%s' in %s is not KEY=...\n", path, line,
				        sect == S_NET ? "NET OPTIONS" : "LAYERS");
				bad++;
			} else {
				snprintf(buf, sizeof buf, "%s %s", type, key);
				names_add(&pg->keys, buf);
			}
		}
		after_tp = 0;
	}
	if (in_ex) {
		fprintf(stderr, "%s: example '%s' has no .EE\n", path, pg->ex[pg->nex - 1].name);
		bad++;
	}
	return bad ? -1 : 0;
}

/* ---- building ---------------------------------------------------------- */

static char err[1024];

/* Builds text as a model: 0, or -1 with err set. With run, also runs
 * forward once and the [net] consumers of cdp-train. */
static int build(cdp_backend *be, const char *text, const char *path,
                 const char *const *ov, int nov, int run)
{
	cdp_net net;
	cdp_cfg cfg;
	cdp_loss loss;
	cdp_optim_cfg oc;
	cdp_aug_cfg ac;
	int rc;

	if (cdp_net_build(&net, be, text, path, ov, nov, 0, run ? 32 : 0, run ? 32 : 0, 2,
	                  err, sizeof err) < 0)
		return -1;
	if (!run) {
		cdp_net_free(&net);
		return 0;
	}
	cdp_net_init(&net, 1);
	cdp_net_forward(&net);
	rc = cdp_cfg_parse(text, path, ov, nov, &cfg, err, sizeof err);
	if (rc == 0) {
		/* a multi-label head's loss is the binary bce over its K outputs,
		 * as cdp-train sets it up */
		rc = net.multi ? cdp_loss_init_cfg_multi(&loss, be, &cfg, &cfg.s[0], net.classes, err,
		                                         sizeof err)
		               : cdp_loss_init_cfg(&loss, be, &cfg, &cfg.s[0], net.classes, err,
		                                   sizeof err);
		if (rc == 0)
			cdp_loss_free(&loss);
		if (rc == 0)
			rc = cdp_optim_cfg_parse(&oc, &cfg, &cfg.s[0], err, sizeof err);
		if (rc == 0)
			rc = cdp_aug_cfg_parse(&ac, &cfg, &cfg.s[0], err, sizeof err);
		cdp_cfg_free(&cfg);
	}
	cdp_net_free(&net);
	return rc;
}

static void test_examples(cdp_backend *be, const page *pg)
{
	CHECK(pg->nex >= 4, "the page has %d marked examples, want at least 4", pg->nex);
	for (int i = 0; i < pg->nex; i++) {
		const example *e = &pg->ex[i];
		CHECK(e->text != NULL, "example '%s' is empty", e->name);
		if (e->text)
			CHECK(build(be, e->text, e->name, NULL, 0, 1) == 0,
			      "example '%s' (the page's line %d): %s", e->name, e->line, err);
	}
	CHECK(pg->nbuild >= 1, "the page builds no example with overrides");
	for (int i = 0; i < pg->nbuild; i++) {
		char buf[512], *sp, *ov[16], *save = NULL;
		const example *e = NULL;
		int nov = 0;
		snprintf(buf, sizeof buf, "%s", pg->build[i]);
		sp = strchr(buf, ' ');
		if (sp) {
			*sp = '\0';
			for (char *t = strtok_r(sp + 1, ",", &save); t && nov < 16;
			     t = strtok_r(NULL, ",", &save))
				ov[nov++] = t;
		}
		for (int j = 0; j < pg->nex; j++)
			if (strcmp(pg->ex[j].name, buf) == 0)
				e = &pg->ex[j];
		CHECK(e != NULL, "build '%s': no example named '%s'", pg->build[i], buf);
		if (e && e->text)
			CHECK(build(be, e->text, e->name, (const char *const *)ov, nov, 1) == 0,
			      "build '%s': %s", pg->build[i], err);
	}
}

/* Asks every layer type for every option it can read (see the top). */
static void ask_layers(cdp_backend *be)
{
	static const char *const from[] = { "a", "a,input" };
	static const char *const extra[] = { "", "activation=leaky\n" };
	static const char *const types[] = {
#define TYPE_NAME(type) #type,
		CDP_LAYERS(TYPE_NAME)
#undef TYPE_NAME
	};

	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
		for (int f = 0; f < 2; f++)
			for (int x = 0; x < 2; x++) {
				char text[512];
				snprintf(text, sizeof text, "[net]\nchannels=4\nin_h=8\nin_w=8\n"
				         "[conv]\nname=a\nfilters=4\n[%s]\nfrom=%s\n%s",
				         types[t], from[f], extra[x]);
				build(be, text, "probe.cfg", NULL, 0, 0);
			}
}

/* Asks every [net] consumer for its keys, on a [net] without options. */
static void ask_net(cdp_backend *be)
{
	CHECK(build(be, "[net]\nchannels=1\nin_h=4\nin_w=4\n[conv]\nfilters=2\nsize=1\n",
	            "net.cfg", NULL, 0, 1) == 0, "the [net] probe: %s", err);
}

static void test_types(const page *pg)
{
	static const struct { const char *name; const cdp_layer_ops *ops; } list[] = {
#define TYPE_OPS(type) { #type, &cdp_layer_##type },
		CDP_LAYERS(TYPE_OPS)
#undef TYPE_OPS
	};
	size_t n = sizeof list / sizeof list[0];

	for (size_t i = 0; i < n; i++) {
		CHECK(strcmp(list[i].ops->type, list[i].name) == 0,
		      "CDP_LAYERS entry %s: its table's type is '%s'", list[i].name, list[i].ops->type);
		CHECK(cdp_layer_ops_find(list[i].name) == list[i].ops,
		      "layer type '%s' is not in the registry", list[i].name);
		CHECK(names_has(&pg->types, list[i].name),
		      "layer type [%s] is not documented in cdp-model(5)", list[i].name);
	}
	for (int i = 0; i < pg->types.n; i++) {
		int found = 0;
		for (size_t j = 0; j < n; j++)
			found |= strcmp(pg->types.s[i], list[j].name) == 0;
		CHECK(found, "cdp-model(5) documents [%s], which is no layer type", pg->types.s[i]);
	}
}

static void test_keys(const page *pg)
{
	/* read by the code: documented for its type, or for every layer */
	for (int i = 0; i < asked.n; i++) {
		char type[128], common[160];
		const char *key = strchr(asked.s[i], ' ') + 1;
		snprintf(type, sizeof type, "%.*s", (int)(key - 1 - asked.s[i]), asked.s[i]);
		snprintf(common, sizeof common, "* %s", key);
		if (strcmp(type, "net") == 0) {
			CHECK(names_has(&pg->keys, asked.s[i]),
			      "[net] key '%s' is read by the code but not in NET OPTIONS", key);
			CHECK(cdp_cfg_net_key_known(key),
			      "[net] key '%s' is read by the code but not in cfg/netkeys.h", key);
		} else
			CHECK(names_has(&pg->keys, asked.s[i]) || names_has(&pg->keys, common),
			      "option '%s' of [%s] is read by the code but not documented", key, type);
	}
	/* the registry of [net] keys: each one read by the code */
	for (int i = 0; cdp_cfg_net_key(i); i++) {
		char buf[160];
		snprintf(buf, sizeof buf, "net %s", cdp_cfg_net_key(i));
		CHECK(names_has(&asked, buf), "cfg/netkeys.h lists '%s', which no [net] consumer "
		      "reads", cdp_cfg_net_key(i));
	}
	/* documented: read by the code, a common one by every type */
	for (int i = 0; i < pg->keys.n; i++) {
		const char *k = pg->keys.s[i], *key = strchr(k, ' ') + 1;
		if (k[0] != '*') {
			CHECK(names_has(&asked, k), "cdp-model(5) documents '%s' of [%.*s], which "
			      "the code does not read", key, (int)(key - 1 - k), k);
			continue;
		}
		for (int t = 0; t < pg->types.n; t++) {
			char buf[160];
			snprintf(buf, sizeof buf, "%s %s", pg->types.s[t], key);
			CHECK(names_has(&asked, buf), "cdp-model(5) says every layer reads '%s', "
			      "[%s] does not", key, pg->types.s[t]);
		}
	}
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : CDP_SRCDIR "/man/cdp-model.5";
	char *text = read_all(path);
	cdp_backend *be;
	page pg;

	memset(&pg, 0, sizeof pg);
	if (!text) {
		fprintf(stderr, "test_model_doc: cannot read '%s'\n", path);
		return 99;
	}
	CHECK(page_parse(&pg, text, path) == 0, "'%s' does not follow the page's conventions",
	      path);
	be = cdp_backend_cpu(1);
	if (!be) {
		fprintf(stderr, "test_model_doc: cannot create the CPU backend\n");
		return 99;
	}
	printf("# %s: %d examples, %d builds, %d layer types, %d keys\n", path, pg.nex,
	       pg.nbuild, pg.types.n, pg.keys.n);
	test_examples(be, &pg);
	ask_layers(be);
	ask_net(be);
	CHECK(pg.types.n > 0 && pg.keys.n > 0, "no layer types or keys found in '%s'", path);
	test_types(&pg);
	test_keys(&pg);
	be->destroy(be);
	for (int i = 0; i < pg.nex; i++)
		free(pg.ex[i].text);
	for (int i = 0; i < pg.nbuild; i++)
		free(pg.build[i]);
	names_free(&pg.types);
	names_free(&pg.keys);
	names_free(&asked);
	free(text);
	return tap_done();
}
