/* cfg.h: model description files, INI-style as in darknet, with a small
 * preprocessor so one file describes a family (U-Net of any width and depth).
 *
 *   # comment            ; comment
 *   [net]                 the first section: input and training options
 *   classes=2             (netkeys.h), integer ones usable below as ${classes}
 *   [vars]                optional, directly after [net]: the cfg's own
 *   width=16              variables (integers), usable below as ${width}
 *   depth=4
 *   [conv]                a layer; its options follow, one key=value a line
 *   name=enc0             optional unique name, referenced by from=
 *   filters=${width}
 *   from=enc0,-1          inputs: names, or relative indices (-1 = previous)
 *
 * Preprocessor (applied before parsing, line numbers preserved for messages):
 *   ${EXPR}               integer expression: decimal integers, variables
 *                         ([net] and [vars] keys with integer values, loop
 *                         variables),
 *                         + - * / % ** ( ), unary -; / and % truncate toward 0
 *   @for VAR A B [STEP]   repeats the lines up to the matching @end with VAR
 *                         running from A to B inclusive (A, B, STEP may be
 *                         ${...} or integers; STEP may be negative, not 0)
 *   @end
 *   @if EXPR / @end       keeps the lines when EXPR != 0
 * Overrides "key=value" (from the command line) replace [net] or [vars]
 * keys before expansion, so `--model unet.cfg:width=32,depth=5` rebuilds
 * the family. A [net] key no part of the engine reads (not in
 * cfg/netkeys.h), in the file or in an override, is an error
 * "PATH:LINE: unknown [net] key 'k' (did you mean 'k2'?)". The old rule
 * (cfg language before [vars], checkpoints written before it) took any
 * [net] key as a variable: cdp_cfg_parse_rule with old_rule 1.
 *
 * Details (cfg.c): ** is right-associative and binds tighter than unary -
 * (-2**2 = -4, as in Python); overflow, division by zero and a negative
 * exponent are errors. Comments are whole lines. Loop variables may not
 * shadow a defined variable and end at their @end. An integer override is a
 * variable from the first line on; an override naming a key the [net]
 * section lacks is appended to it with line 0 (messages then say
 * "(override)"). Duplicate sections other than [net] are layers; a
 * duplicate key within one section is an error. Expansion stops with an
 * error beyond 1000000 lines or loop iterations. Directives nest at most
 * 64 deep, and so do '(', unary '-' and '**' within one expression
 * ("PATH:LINE: expression '...': nested deeper than 64").
 */
#ifndef CDP_CFG_H
#define CDP_CFG_H

#include <stddef.h>

typedef struct cdp_cfg_kv { char *key, *value; int line, used; } cdp_cfg_kv;
typedef struct cdp_cfg_section {
	char *type;            /* "net", "conv", ... */
	int line;              /* line of the [type] header */
	cdp_cfg_kv *kv;
	int nkv;
} cdp_cfg_section;
typedef struct cdp_cfg {
	cdp_cfg_section *s;
	int ns;
	char *path;            /* for messages */
	/* read under the old rule: the [net] keys that were its variables then
	 * and that the engine reads now, dropped from [net] so that they stay
	 * variables ("ema, lr_mult"); NULL: none */
	char *old_vars;
} cdp_cfg;

/* The largest cfg text read or stored (a checkpoint holds the text). */
#define CDP_CFG_TEXT_MAX (16u << 20)

/* Reads the cfg file at path into *text (NUL-terminated, malloc'ed: free
 * it), for cdp_cfg_parse or cdp_net_build with the same path. Errors in
 * err, returning -1 with *text NULL: "cannot open 'PATH': reason",
 * "cannot read 'PATH': reason" (over CDP_CFG_TEXT_MAX bytes: "too large"). */
int  cdp_cfg_read(const char *path, char **text, char *err, size_t cap);
/* Expands and parses text. Errors: "PATH:LINE: reason" in err, returns -1,
 * or CDP_CFG_EUNKNOWN when the only fault is an unknown [net] key (the text
 * then parses under the old rule). The [vars] section is not kept in cfg. */
#define CDP_CFG_EUNKNOWN (-2)
int  cdp_cfg_parse(const char *text, const char *path, const char *const *overrides,
                   int noverrides, cdp_cfg *cfg, char *err, size_t cap);
/* As cdp_cfg_parse; old_rule 1 accepts any [net] key (the rule before
 * [vars], for the cfg of an old checkpoint), and keeps a key the engine
 * came to read since (cdp_cfg_net_key_new) a variable: it is dropped from
 * [net] and named in cfg->old_vars. */
int  cdp_cfg_parse_rule(const char *text, const char *path, const char *const *overrides,
                        int noverrides, int old_rule, cdp_cfg *cfg, char *err, size_t cap);
/* The one-line warning of a cfg read under the old rule into buf (cap
 * bytes): why (the new rule's refusal, "unknown [net] key 'width'"), the
 * rule it is read under, and what became of cfg->old_vars (NULL: none):
 * "...; [net] ema was a variable when the checkpoint was written and
 * stays one, not the setting of that name now". */
void cdp_cfg_old_rule_warning(char *buf, size_t cap, const char *why, const char *old_vars);
/* 1 when the engine came to read [net] key `key` after the old rule
 * ended (netkeys.h's CDP_NETKEY_NEW). */
int  cdp_cfg_net_key_new(const char *key);
/* 1 when some part of the engine reads [net] key `key` (netkeys.h). */
int  cdp_cfg_net_key_known(const char *key);
/* The i-th key of netkeys.h, NULL past the last. */
const char *cdp_cfg_net_key(int i);
/* The known [net] key nearest to `key` (Damerau-Levenshtein distance at
 * most a third of its length, at least 1), or NULL. */
const char *cdp_cfg_net_key_nearest(const char *key);
void cdp_cfg_free(cdp_cfg *cfg);

/* Option lookup; each marks the key used. Missing -> def. A malformed or
 * out-of-range value is an error "PATH:LINE: option 'k': reason" (-1). */
const char *cdp_cfg_str(cdp_cfg_section *s, const char *key, const char *def);
int cdp_cfg_int(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, int def,
                int min, int max, int *out, char *err, size_t cap);
int cdp_cfg_float(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                  float min, float max, float *out, char *err, size_t cap);
/* As cdp_cfg_float over [min, end), end left out also when the value
 * only rounds to it as a float: "V is outside [MIN, END)". */
int cdp_cfg_float_below(const cdp_cfg *cfg, cdp_cfg_section *s, const char *key, float def,
                        float min, float end, float *out, char *err, size_t cap);
/* An error about option key of s that the lookups above could not see
 * (a word no list holds, a contradiction between options), into err[cap],
 * in their form: "PATH:LINE: WHAT: reason" with the key's line (the
 * section's when s lacks the key), or "PATH: WHAT (override): reason" for
 * a key only an override gave. WHAT is what (a phrase such as "[net]"), or
 * "option 'KEY'" when what is NULL. Returns -1. */
int cdp_cfg_fail(const cdp_cfg *cfg, const cdp_cfg_section *s, const char *key,
                 const char *what, char *err, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
/* After a section is consumed: an unused key is an error naming it. */
int cdp_cfg_check_used(const cdp_cfg *cfg, const cdp_cfg_section *s, char *err, size_t cap);

#endif
