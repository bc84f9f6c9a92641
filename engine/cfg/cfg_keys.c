/* cfg_keys.c: the registry of [net] keys (netkeys.h) and the nearest
 * known key for a "did you mean" (cfg.h).
 */
#include "cfg/cfg.h"

#include <stdio.h>
#include <string.h>

static const char *const net_keys[] = {
#define CDP_NETKEY(k) #k,
#include "cfg/netkeys.h"
#undef CDP_NETKEY
};
#define NKEYS ((int)(sizeof net_keys / sizeof net_keys[0]))

static const char *const new_keys[] = {
#define CDP_NETKEY(k)
#define CDP_NETKEY_NEW(k) #k,
#include "cfg/netkeys.h"
#undef CDP_NETKEY_NEW
#undef CDP_NETKEY
};

void cdp_cfg_old_rule_warning(char *buf, size_t cap, const char *why, const char *old_vars)
{
	int n = snprintf(buf, cap, "%s; read under the old rule (a checkpoint written before "
	                 "[vars]): [net] keys no part of the engine reads are variables", why);
	int many = old_vars && strchr(old_vars, ',') != NULL;

	if (old_vars && n >= 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, "; [net] %s %s when the checkpoint was written "
		         "and %s, not the setting%s of that name now", old_vars,
		         many ? "were variables" : "was a variable", many ? "stay so" : "stays one",
		         many ? "s" : "");
}

int cdp_cfg_net_key_new(const char *key)
{
	for (size_t i = 0; i < sizeof new_keys / sizeof new_keys[0]; i++)
		if (strcmp(new_keys[i], key) == 0)
			return 1;
	return 0;
}

int cdp_cfg_net_key_known(const char *key)
{
	for (int i = 0; i < NKEYS; i++)
		if (strcmp(net_keys[i], key) == 0)
			return 1;
	return 0;
}

/* Damerau-Levenshtein distance (optimal string alignment: insertions,
 * deletions, substitutions and swaps of neighbours cost 1); keys are
 * short, longer strings count as their first 63 bytes. */
static int osa(const char *a, const char *b)
{
	enum { M = 64 };
	int n = (int)strnlen(a, M - 1), m = (int)strnlen(b, M - 1);
	int d[M][M];

	for (int i = 0; i <= n; i++)
		d[i][0] = i;
	for (int j = 0; j <= m; j++)
		d[0][j] = j;
	for (int i = 1; i <= n; i++)
		for (int j = 1; j <= m; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < c)
				c = d[i - 2][j - 2] + 1;
			d[i][j] = c;
		}
	return d[n][m];
}

const char *cdp_cfg_net_key_nearest(const char *key)
{
	const char *best = NULL;
	int bd = 0, len = (int)strlen(key);
	/* at most a third of the key's letters wrong, and at least 1 allowed */
	int limit = len / 3 > 1 ? len / 3 : 1;

	for (int i = 0; i < NKEYS; i++) {
		int d = osa(key, net_keys[i]);
		if (d <= limit && (!best || d < bd)) {
			best = net_keys[i];
			bd = d;
		}
	}
	return best;
}

const char *cdp_cfg_net_key(int i)
{
	return i >= 0 && i < NKEYS ? net_keys[i] : NULL;
}
