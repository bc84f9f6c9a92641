/* cfg_int.h: what the cfg sources share (cfg.c: preprocessor and parser,
 * cfg_expr.c: ${} expressions, cfg_opt.c: option lookup); private to them.
 */
#ifndef CDP_CFG_INT_H
#define CDP_CFG_INT_H

#include <stddef.h>
#include "cfg/cfg.h"

/* The deepest nesting of @for/@if directives, and of '(', unary '-' and
 * '**' within one ${} expression: both parsers recurse once a level, and a
 * cfg read from another user's checkpoint must not overflow the stack
 * (cdp-model(5); python/cdpool/cfg.py holds the same number). */
#define CDP_CFG_NEST_MAX 64

/* Value of variable name[0..len): 0, or -1 when there is none. */
typedef int (*cdp_cfg_var_fn)(void *ctx, const char *name, size_t len, long long *val);

typedef struct cdp_cfg_experr {
	const char *why;        /* static reason */
	char name[64];          /* the unknown variable, "" for other errors */
} cdp_cfg_experr;

/* Evaluates all of s[0..len) (cfg.h's grammar) into *v: 0, or -1 with *err
 * filled. */
int cdp_cfg_eval(const char *s, size_t len, cdp_cfg_var_fn lookup, void *ctx, long long *v,
                 cdp_cfg_experr *err);

#endif
