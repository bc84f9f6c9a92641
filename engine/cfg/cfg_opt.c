/* cfg_opt.c: typed option lookup in a parsed cfg (cfg.h). Every lookup
 * marks the key used, so cdp_cfg_check_used can name a key nothing read: a
 * misspelt option is an error rather than a silent default.
 */
#include "cfg/cfg.h"
#include "cdp_num.h"
#include "cdp_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Key key of s, or NULL (the parser refuses a key twice in a section). */
static const cdp_cfg_kv *find(const cdp_cfg_section *s, const char *key)
{
	for (int i = 0; s && key && i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

static cdp_cfg_kv *lookup(cdp_cfg_section *s, const char *key)
{
	/* s is the caller's to change: find only spares a const section */
	cdp_cfg_kv *kv = (cdp_cfg_kv *)find(s, key);

	if (kv)
		kv->used = 1;
	return kv;
}

static int vfail(const cdp_cfg *cfg, const cdp_cfg_section *s, const cdp_cfg_kv *kv,
                 const char *key, const char *what, char *err, size_t cap, const char *fmt,
                 va_list ap)
{
	const char *path = cfg && cfg->path ? cfg->path : "<cfg>";
	char opt[128];
	int n;

	if (!err || cap == 0)
		return -1;
	if (!what) {
		snprintf(opt, sizeof opt, "option '%s'", key);
		what = opt;
	}
	/* an override the file lacked has no line (0): say so, as the generic
	 * checks do, rather than cite line 0 */
	if (kv && kv->line <= 0)
		n = snprintf(err, cap, "%s: %s (override): ", path, what);
	else
		n = snprintf(err, cap, "%s:%d: %s: ", path, kv ? kv->line : s ? s->line : 0, what);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	vsnprintf(err + n, cap - (size_t)n, fmt, ap);
	return -1;
}

static int opt_fail(const cdp_cfg *cfg, const cdp_cfg_kv *kv, char *err, size_t cap,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int opt_fail(const cdp_cfg *cfg, const cdp_cfg_kv *kv, char *err, size_t cap,
                    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(cfg, NULL, kv, kv->key, NULL, err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

int cdp_cfg_fail(const cdp_cfg *cfg, const cdp_cfg_section *s, const char *key,
                 const char *what, char *err, size_t cap, const char *fmt, ...)
{
	const cdp_cfg_kv *kv = find(s, key);
	va_list ap;

	va_start(ap, fmt);
	vfail(cfg, s, kv, key ? key : "", what, err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

const char *cdp_cfg_str(cdp_cfg_section *s, const char *key, const char *def)
{
	cdp_cfg_kv *kv = lookup(s, key);

	return kv ? kv->value : def;
}

int cdp_cfg_int(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, int def,
                int min, int max, int *out, char *err, size_t cap)
{
	cdp_cfg_kv *kv = lookup(s, key);
	int rc;

	if (!kv) {
		*out = def;
		return 0;
	}
	rc = cdp_parse_int(kv->value, min, max, out);
	if (rc == CDP_ESYNTAX)
		return opt_fail(cfg, kv, err, cap, "'%.64s' is not an integer", kv->value);
	if (rc != CDP_OK)
		return opt_fail(cfg, kv, err, cap, "%.64s is outside [%d, %d]", kv->value, min, max);
	return 0;
}

/* cdp_cfg_float over [min, max], or [min, max) when below_max */
static int get_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                     float min, float max, int below_max, float *out, char *err, size_t cap)
{
	cdp_cfg_kv *kv = lookup(s, key);
	char lo[32], hi[32];
	float v;
	int rc;

	if (!kv) {
		*out = def;
		return 0;
	}
	/* compared as the float it is kept in, and printed as the man page
	 * writes it, so that a documented bound is accepted and named as such */
	rc = cdp_parse_float(kv->value, min, max, &v);
	if (rc == CDP_OK && below_max && v >= max)
		rc = CDP_ERANGE;
	if (rc == CDP_ESYNTAX)
		return opt_fail(cfg, kv, err, cap, "'%.64s' is not a number", kv->value);
	if (rc != CDP_OK)
		return opt_fail(cfg, kv, err, cap, "%.64s is outside [%s, %s%c", kv->value,
		                cdp_float_str(min, lo, sizeof lo), cdp_float_str(max, hi, sizeof hi),
		                below_max ? ')' : ']');
	*out = v;
	return 0;
}

int cdp_cfg_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                  float min, float max, float *out, char *err, size_t cap)
{
	return get_float(cfg, s, key, def, min, max, 0, out, err, cap);
}

int cdp_cfg_float_below(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                        float min, float end, float *out, char *err, size_t cap)
{
	return get_float(cfg, s, key, def, min, end, 1, out, err, cap);
}

int cdp_cfg_check_used(const cdp_cfg *cfg, const cdp_cfg_section *s, char *err, size_t cap)
{
	for (int i = 0; s && i < s->nkv; i++) {
		const cdp_cfg_kv *kv = &s->kv[i];
		const char *path = cfg && cfg->path ? cfg->path : "<cfg>";
		if (kv->used)
			continue;
		if (err && cap) {
			if (kv->line > 0)
				snprintf(err, cap, "%s:%d: unknown option '%s' in [%s]", path,
				         kv->line, kv->key, s->type);
			else
				snprintf(err, cap, "%s: unknown option '%s' in [%s] (override)",
				         path, kv->key, s->type);
		}
		return -1;
	}
	return 0;
}
