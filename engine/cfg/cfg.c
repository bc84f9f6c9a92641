/* cfg.c: model description files (cfg.h): the preprocessor and the parser.
 *
 * The text is split into numbered source lines once. The expander walks them
 * in order, repeats @for bodies, drops false @if bodies and replaces ${EXPR}
 * with a decimal integer; every line it keeps goes straight to the parser
 * with its source line number, so messages point at the line the user wrote
 * even inside a loop. Expansion and parsing are one pass because [net] and
 * [vars] keys become variables for the lines below them. The [vars] keys
 * are kept apart (pstate.vsec) and [net] keys are checked against the
 * registry (cfg_keys.c) once the section is complete.
 *
 * The expressions themselves are evaluated by cfg_expr.c and the parsed
 * options looked up by cfg_opt.c.
 *
 * Not done: string variables, @else, comparison operators; comments only as
 * whole lines (a '#' inside a value is part of the value).
 */
#include "cfg_int.h"
#include "cdp_num.h"
#include "cdp_error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A runaway @for (or a loop variable used as a bound) must not eat memory:
 * every kept line and every loop iteration counts against this budget. */
#define MAX_EXPANDED 1000000L

typedef struct src_line { char *s; int no; } src_line;
typedef struct var { const char *name; long long val; } var;

typedef struct pstate {
	const char *path;
	char *err;
	size_t cap;
	cdp_cfg *cfg;
	src_line *lines;
	int nlines;
	var *vars;              /* a stack: overrides, [net] keys, loop vars */
	int nvars, capvars;
	const char *const *ov;  /* overrides "key=value" */
	int nov;
	int *ov_used;
	long budget;
	int depth;
	int old_rule;           /* any [net] key is a variable (cfg.h) */
	int in_vars, had_vars;  /* inside / past the [vars] section */
	cdp_cfg_section vsec;   /* its keys, for duplicates; not kept in cfg */
} pstate;

enum { L_BLANK, L_TEXT, L_FOR, L_IF, L_END, L_BADDIR };

static int fail(pstate *st, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(pstate *st, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!st->err || st->cap == 0)
		return -1;
	if (line > 0)
		n = snprintf(st->err, st->cap, "%s:%d: ", st->path, line);
	else
		n = snprintf(st->err, st->cap, "%s: ", st->path);
	if (n < 0 || (size_t)n >= st->cap)
		return -1;
	va_start(ap, fmt);
	vsnprintf(st->err + n, st->cap - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static int is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Directive word at the start of a trimmed line: "@for" must be followed by
 * white space or the end, so "@format" is an unknown directive, not @for. */
static int word_is(const char *s, const char *w)
{
	size_t n = strlen(w);

	return strncmp(s, w, n) == 0 && (s[n] == '\0' || s[n] == ' ' || s[n] == '\t');
}

static int classify(const char *t)
{
	if (*t == '\0' || *t == '#' || *t == ';')
		return L_BLANK;
	if (*t != '@')
		return L_TEXT;
	if (word_is(t, "@for"))
		return L_FOR;
	if (word_is(t, "@if"))
		return L_IF;
	if (word_is(t, "@end"))
		return L_END;
	return L_BADDIR;
}

/* Room for element n of an array that holds n elements: arrays grow to the
 * next power of two, so capacities need no field of their own and a long
 * expansion costs amortised O(1) per element. */
static void *grow(void *p, int n, size_t size)
{
	if (n > 0 && (n & (n - 1)) != 0)
		return p;
	return realloc(p, (size_t)(n ? 2 * n : 1) * size);
}

/* ---- variables ---------------------------------------------------------- */

static const var *var_find(const pstate *st, const char *name, size_t len)
{
	for (int i = st->nvars - 1; i >= 0; i--)
		if (strlen(st->vars[i].name) == len && memcmp(st->vars[i].name, name, len) == 0)
			return &st->vars[i];
	return NULL;
}

static int var_push(pstate *st, const char *name, long long val)
{
	if (st->nvars == st->capvars) {
		int nc = st->capvars ? 2 * st->capvars : 16;
		var *nv = realloc(st->vars, (size_t)nc * sizeof(*nv));
		if (!nv)
			return -1;
		st->vars = nv;
		st->capvars = nc;
	}
	st->vars[st->nvars].name = name;
	st->vars[st->nvars].val = val;
	st->nvars++;
	return 0;
}

/* Evaluates s[0..len) completely; on error writes "expression 'S': why". */
static int var_lookup(void *ctx, const char *name, size_t len, long long *v)
{
	const var *vr = var_find(ctx, name, len);

	if (!vr)
		return -1;
	*v = vr->val;
	return 0;
}

static int eval(pstate *st, int line, const char *s, size_t len, long long *v)
{
	cdp_cfg_experr e;
	int n = len > 200 ? 200 : (int)len;

	if (cdp_cfg_eval(s, len, var_lookup, st, v, &e) == 0)
		return 0;
	if (e.name[0])
		return fail(st, line, "expression '%.*s': unknown variable '%s'", n, s, e.name);
	return fail(st, line, "expression '%.*s': %s", n, s, e.why);
}

/* Replaces every ${EXPR} in s; returns a malloc'ed string or NULL. */
static char *expand(pstate *st, int line, const char *s)
{
	size_t cap = strlen(s) + 32, len = 0;
	char *out = malloc(cap);

	if (!out) {
		fail(st, line, "out of memory");
		return NULL;
	}
	while (*s) {
		char num[24];
		const char *piece = s;
		size_t plen = 1;
		if (s[0] == '$' && s[1] == '{') {
			const char *close = strchr(s + 2, '}');
			long long v;
			if (!close) {
				fail(st, line, "unterminated '${'");
				goto fail;
			}
			if (eval(st, line, s + 2, (size_t)(close - s - 2), &v) < 0)
				goto fail;
			plen = (size_t)snprintf(num, sizeof(num), "%lld", v);
			piece = num;
			s = close + 1;
		} else {
			s++;
		}
		if (len + plen + 1 > cap) {
			char *nb;
			cap = 2 * cap + plen;
			nb = realloc(out, cap);
			if (!nb) {
				fail(st, line, "out of memory");
				goto fail;
			}
			out = nb;
		}
		memcpy(out + len, piece, plen);
		len += plen;
	}
	out[len] = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

/* ---- building the cfg --------------------------------------------------- */

static cdp_cfg_section *cur_section(pstate *st)
{
	return st->cfg->ns ? &st->cfg->s[st->cfg->ns - 1] : NULL;
}

static int add_kv(pstate *st, cdp_cfg_section *sec, const char *k, const char *v, int line)
{
	cdp_cfg_kv *nkv = grow(sec->kv, sec->nkv, sizeof(*nkv));

	if (!nkv)
		return fail(st, line, "out of memory");
	sec->kv = nkv;
	nkv[sec->nkv].key = strdup(k);
	nkv[sec->nkv].value = strdup(v);
	nkv[sec->nkv].line = line;
	nkv[sec->nkv].used = 0;
	sec->nkv++;
	if (!nkv[sec->nkv - 1].key || !nkv[sec->nkv - 1].value)
		return fail(st, line, "out of memory");
	return 0;
}

static const cdp_cfg_kv *kv_find(const cdp_cfg_section *sec, const char *k)
{
	for (int i = 0; i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, k) == 0)
			return &sec->kv[i];
	return NULL;
}

/* Index of the override for key k (length n), or -1. */
static int ov_find(const pstate *st, const char *k, size_t n)
{
	for (int i = 0; i < st->nov; i++)
		if (strncmp(st->ov[i], k, n) == 0 && st->ov[i][n] == '=')
			return i;
	return -1;
}

/* Overrides naming keys the file's [net] lacks are added at its end (line
 * 0), so a consumer either uses them or reports them as unknown. */
static int close_net(pstate *st)
{
	cdp_cfg_section *net = &st->cfg->s[0];

	for (int i = 0; i < st->nov; i++) {
		const char *eq = strchr(st->ov[i], '=');
		char key[256];
		if (st->ov_used[i])
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - st->ov[i]), st->ov[i]);
		if (add_kv(st, net, key, eq + 1, 0) < 0)
			return -1;
		st->ov_used[i] = 1;
	}
	return 0;
}

static int valid_key(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (!is_ident(*k) && *k != '.' && *k != '-')
			return 0;
	return 1;
}

static int parse_header(pstate *st, int line, char *t)
{
	size_t n = strlen(t);
	cdp_cfg_section *ns;
	char *type;

	if (t[n - 1] != ']')
		return fail(st, line, "bad section header '%.100s': missing ']'", t);
	t[n - 1] = '\0';
	type = trim(t + 1);
	if (!*type || !valid_key(type))
		return fail(st, line, "bad section name '%.100s'", type);
	if (st->cfg->ns == 0 && strcmp(type, "net") != 0)
		return fail(st, line, "the first section must be [net], not [%.64s]", type);
	if (st->cfg->ns > 0 && strcmp(type, "net") == 0)
		return fail(st, line, "duplicate [net] section (the first is at line %d)",
		            st->cfg->s[0].line);
	if (strcmp(type, "vars") == 0) {
		if (st->had_vars)
			return fail(st, line, "duplicate [vars] section (the first is at line %d)",
			            st->vsec.line);
		if (st->cfg->ns != 1)
			return fail(st, line, "[vars] must directly follow [net]");
		st->in_vars = st->had_vars = 1;
		st->vsec.line = line;
		return 0;
	}
	st->in_vars = 0;
	if (st->cfg->ns == 1 && close_net(st) < 0)
		return -1;
	ns = grow(st->cfg->s, st->cfg->ns, sizeof(*ns));
	if (!ns)
		return fail(st, line, "out of memory");
	st->cfg->s = ns;
	ns = &st->cfg->s[st->cfg->ns++];
	memset(ns, 0, sizeof(*ns));
	ns->line = line;
	ns->type = strdup(type);
	if (!ns->type)
		return fail(st, line, "out of memory");
	return 0;
}

/* One kept source line: raw is the trimmed text before ${} expansion. */
static int emit(pstate *st, int line, const char *raw)
{
	cdp_cfg_section *sec = st->in_vars ? &st->vsec : cur_section(st);
	const char *eq = strchr(raw, '=');
	const cdp_cfg_kv *dup;
	char *text, *t, *k, *v;
	int ov = -1, rc = -1;

	if (++st->budget > MAX_EXPANDED)
		return fail(st, line, "expansion exceeds %ld lines", MAX_EXPANDED);
	/* An overridden [net] key takes the override's value before expansion:
	 * the file's own value may refer to what the override replaces. */
	if (sec && st->cfg->ns == 1 && eq && raw[0] != '[') {
		size_t kn = (size_t)(eq - raw);
		while (kn > 0 && (raw[kn - 1] == ' ' || raw[kn - 1] == '\t'))
			kn--;
		ov = ov_find(st, raw, kn);
	}
	if (ov >= 0) {
		size_t kn = (size_t)(strchr(st->ov[ov], '=') - st->ov[ov]);
		text = malloc(strlen(st->ov[ov]) + 1);
		if (!text)
			return fail(st, line, "out of memory");
		strcpy(text, st->ov[ov]);
		text[kn] = '\0';
		k = text;
		v = text + kn + 1;
		st->ov_used[ov] = 1;
	} else {
		text = expand(st, line, raw);
		if (!text)
			return -1;
		t = trim(text);
		if (*t == '[') {
			rc = parse_header(st, line, t);
			goto out;
		}
		eq = strchr(t, '=');
		if (!eq) {
			fail(st, line, "expected '[section]' or 'key=value', not '%.100s'", t);
			goto out;
		}
		*(char *)eq = '\0';
		k = trim(t);
		v = trim((char *)eq + 1);
	}
	if (!valid_key(k)) {
		fail(st, line, "bad option name '%.100s'", k);
		goto out;
	}
	if (!sec) {
		fail(st, line, "option '%.64s' outside any section", k);
		goto out;
	}
	if (!*v) {
		fail(st, line, "option '%.64s' has no value", k);
		goto out;
	}
	dup = kv_find(sec, k);
	if (!dup && st->in_vars && (dup = kv_find(&st->cfg->s[0], k))) {
		fail(st, line, "[vars] key '%.64s' is also a [net] key (line %d)", k, dup->line);
		goto out;
	}
	if (dup) {
		fail(st, line, "duplicate option '%.64s' (first at line %d)", k, dup->line);
		goto out;
	}
	if (add_kv(st, sec, k, v, line) < 0)
		goto out;
	if (st->cfg->ns == 1) {
		int64_t iv;
		const cdp_cfg_kv *kv = &sec->kv[sec->nkv - 1];
		int isint = cdp_parse_i64(kv->value, INT64_MIN, INT64_MAX, &iv) == CDP_OK;
		if (st->in_vars && !isint) {
			fail(st, line, "[vars] key '%.64s': '%.64s' is not an integer", k, v);
			goto out;
		}
		if (isint && var_push(st, kv->key, (long long)iv) < 0) {
			fail(st, line, "out of memory");
			goto out;
		}
	}
	rc = 0;
out:
	free(text);
	return rc;
}

/* Index of the @end closing the directive at i, or -1. */
static int find_end(const pstate *st, int i, int hi)
{
	int depth = 0;

	for (int j = i + 1; j < hi; j++) {
		int c = classify(st->lines[j].s);
		if (c == L_FOR || c == L_IF)
			depth++;
		else if (c == L_END && depth-- == 0)
			return j;
	}
	return -1;
}

static int run(pstate *st, int lo, int hi);

/* @for VAR A B [STEP]: each bound is an expression without spaces, or
 * ${...} (expanded first). */
static int do_for(pstate *st, int i, int end)
{
	int line = st->lines[i].no, rc = -1, n = 0, li;
	char *text = expand(st, line, st->lines[i].s + 4), *tok[5], *save = NULL;
	long long b[3] = { 0, 0, 1 };
	const char *name;

	if (!text)
		return -1;
	for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 5)
			break;
		tok[n++] = w;
	}
	if (n < 3 || n > 4) {
		fail(st, line, "@for: expected 'VAR A B [STEP]'");
		goto out;
	}
	name = tok[0];
	for (const char *c = name; *c; c++)
		if (!is_ident(*c) || !is_ident_start(*name)) {
			fail(st, line, "@for: bad variable name '%.64s'", name);
			goto out;
		}
	if (var_find(st, name, strlen(name))) {
		fail(st, line, "@for: variable '%.64s' is already defined", name);
		goto out;
	}
	for (int j = 1; j < n; j++)
		if (eval(st, line, tok[j], strlen(tok[j]), &b[j - 1]) < 0)
			goto out;
	if (b[2] == 0) {
		fail(st, line, "@for: step is 0");
		goto out;
	}
	li = st->nvars;
	if (var_push(st, name, b[0]) < 0) {
		fail(st, line, "out of memory");
		goto out;
	}
	for (long long x = b[0]; b[2] > 0 ? x <= b[1] : x >= b[1]; ) {
		st->vars[li].val = x;
		if (++st->budget > MAX_EXPANDED) {
			fail(st, line, "expansion exceeds %ld lines", MAX_EXPANDED);
			goto pop;
		}
		if (run(st, i + 1, end) < 0)
			goto pop;
		if (__builtin_add_overflow(x, b[2], &x))
			break;
	}
	rc = 0;
pop:
	/* [net] keys defined in the body sit above the loop variable */
	memmove(&st->vars[li], &st->vars[li + 1], (size_t)(st->nvars - li - 1) * sizeof(var));
	st->nvars--;
out:
	free(text);
	return rc;
}

static int do_if(pstate *st, int i, int end)
{
	int line = st->lines[i].no;
	char *text = expand(st, line, st->lines[i].s + 3), *t;
	long long v;
	int rc;

	if (!text)
		return -1;
	t = trim(text);
	rc = eval(st, line, t, strlen(t), &v);
	free(text);
	if (rc < 0)
		return -1;
	return v != 0 ? run(st, i + 1, end) : 0;
}

/* depth counts the file itself as 1, so CDP_CFG_NEST_MAX directives may
 * nest inside it. */
static int run(pstate *st, int lo, int hi)
{
	if (++st->depth > CDP_CFG_NEST_MAX + 1) {
		st->depth--;
		return fail(st, st->lines[lo > 0 ? lo - 1 : 0].no,
		            "directives nested deeper than %d", CDP_CFG_NEST_MAX);
	}
	for (int i = lo; i < hi; i++) {
		const src_line *l = &st->lines[i];
		int c = classify(l->s), end, rc = 0;
		switch (c) {
		case L_BLANK:
			continue;
		case L_TEXT:
			rc = emit(st, l->no, l->s);
			break;
		case L_END:
			rc = fail(st, l->no, "@end without @for or @if");
			break;
		case L_BADDIR:
			rc = fail(st, l->no, "unknown directive '%.32s'", l->s);
			break;
		default:
			end = find_end(st, i, hi);
			if (end < 0) {
				rc = fail(st, l->no, "unterminated %s", c == L_FOR ? "@for" : "@if");
				break;
			}
			rc = c == L_FOR ? do_for(st, i, end) : do_if(st, i, end);
			i = end;
			break;
		}
		if (rc < 0) {
			st->depth--;
			return -1;
		}
	}
	st->depth--;
	return 0;
}

static int check_overrides(pstate *st)
{
	for (int i = 0; i < st->nov; i++) {
		const char *o = st->ov[i], *eq = o ? strchr(o, '=') : NULL;
		char key[256];
		int64_t iv;
		if (!eq || eq == o || !eq[1] || (size_t)(eq - o) >= sizeof(key))
			return fail(st, 0, "override '%.100s': expected key=value", o ? o : "");
		snprintf(key, sizeof(key), "%.*s", (int)(eq - o), o);
		if (!valid_key(key))
			return fail(st, 0, "override '%.100s': bad option name", o);
		if (ov_find(st, o, (size_t)(eq - o)) != i)
			return fail(st, 0, "override '%.64s' given twice", key);
		/* Integer overrides are variables from the first line on, so a
		 * key the file lacks (classes=5) can still appear in ${}. */
		if (cdp_parse_i64(eq + 1, INT64_MIN, INT64_MAX, &iv) == CDP_OK) {
			char *name = strdup(key);
			if (!name || var_push(st, name, (long long)iv) < 0) {
				free(name);
				return fail(st, 0, "out of memory");
			}
		}
	}
	return 0;
}

/* Every [net] key, from the file or an override, is one the engine reads:
 * 0, or CDP_CFG_EUNKNOWN naming the first that is not. */
static int check_net_keys(pstate *st)
{
	const cdp_cfg_section *net = &st->cfg->s[0];

	for (int i = 0; i < net->nkv; i++) {
		const cdp_cfg_kv *kv = &net->kv[i];
		const char *near;
		char hint[128];
		if (cdp_cfg_net_key_known(kv->key))
			continue;
		near = cdp_cfg_net_key_nearest(kv->key);
		if (near)
			snprintf(hint, sizeof hint, "did you mean '%s'?", near);
		else
			snprintf(hint, sizeof hint, "no such key; a cfg's own variables go in [vars]");
		fail(st, kv->line, "unknown [net] key '%.64s'%s (%s)", kv->key,
		     kv->line > 0 ? "" : " (override)", hint);
		return CDP_CFG_EUNKNOWN;
	}
	return 0;
}

/* The old rule: a [net] key the engine came to read since was a variable
 * of the cfg when it was written, read by nothing; dropped from [net] (its
 * ${} uses are expanded already) and named in cfg->old_vars. */
static int old_vars(pstate *st)
{
	cdp_cfg_section *net = &st->cfg->s[0];
	size_t len = 0;
	int k = 0;

	for (int i = 0; i < net->nkv; i++)
		if (cdp_cfg_net_key_new(net->kv[i].key))
			len += strlen(net->kv[i].key) + 2;
	if (len == 0)
		return 0;
	if (!(st->cfg->old_vars = malloc(len + 1)))
		return fail(st, 0, "out of memory");
	st->cfg->old_vars[0] = '\0';
	for (int i = 0; i < net->nkv; i++) {
		cdp_cfg_kv *kv = &net->kv[i];
		if (!cdp_cfg_net_key_new(kv->key)) {
			net->kv[k++] = *kv;
			continue;
		}
		if (st->cfg->old_vars[0])
			strcat(st->cfg->old_vars, ", ");
		strcat(st->cfg->old_vars, kv->key);
		free(kv->key);
		free(kv->value);
	}
	net->nkv = k;
	return 0;
}

int cdp_cfg_parse(const char *text, const char *path, const char *const *overrides,
                  int noverrides, cdp_cfg *cfg, char *err, size_t cap)
{
	return cdp_cfg_parse_rule(text, path, overrides, noverrides, 0, cfg, err, cap);
}

int cdp_cfg_parse_rule(const char *text, const char *path, const char *const *overrides,
                       int noverrides, int old_rule, cdp_cfg *cfg, char *err, size_t cap)
{
	pstate st = { .path = path ? path : "<cfg>", .err = err, .cap = cap, .cfg = cfg,
	              .ov = overrides, .nov = overrides ? noverrides : 0,
	              .old_rule = old_rule };
	char *copy = NULL;
	int rc = -1, novvars = 0, no = 1;

	if (err && cap)
		err[0] = '\0';
	memset(cfg, 0, sizeof(*cfg));
	if (!text)
		return fail(&st, 0, "no text");
	cfg->path = strdup(st.path);
	copy = strdup(text);
	st.ov_used = calloc((size_t)st.nov + 1, sizeof(int));
	if (!cfg->path || !copy || !st.ov_used) {
		fail(&st, 0, "out of memory");
		goto out;
	}
	rc = check_overrides(&st);
	novvars = st.nvars;     /* the names check_overrides strdup'ed */
	if (rc < 0)
		goto out;
	rc = -1;
	/* Split into lines in place; line numbers are 1-based. */
	for (char *p = copy; ; no++) {
		char *nl = strchr(p, '\n');
		src_line *nlines;
		if (!nl && !*p)
			break;
		if (nl)
			*nl = '\0';
		nlines = grow(st.lines, st.nlines, sizeof(*nlines));
		if (!nlines) {
			fail(&st, no, "out of memory");
			goto out;
		}
		st.lines = nlines;
		st.lines[st.nlines].s = trim(p);
		st.lines[st.nlines].no = no;
		st.nlines++;
		if (!nl)
			break;
		p = nl + 1;
	}
	if (run(&st, 0, st.nlines) < 0)
		goto out;
	if (cfg->ns == 0) {
		fail(&st, 0, "no [net] section");
		goto out;
	}
	if (cfg->ns == 1 && close_net(&st) < 0)
		goto out;
	if (!st.old_rule && (rc = check_net_keys(&st)) < 0)
		goto out;
	if (st.old_rule && old_vars(&st) < 0)
		goto out;
	rc = 0;
out:
	for (int j = 0; j < st.vsec.nkv; j++) {
		free(st.vsec.kv[j].key);
		free(st.vsec.kv[j].value);
	}
	free(st.vsec.kv);
	for (int i = 0; i < novvars; i++)
		free((char *)st.vars[i].name);
	free(st.vars);
	free(st.lines);
	free(st.ov_used);
	free(copy);
	if (rc < 0)
		cdp_cfg_free(cfg);
	return rc;
}

void cdp_cfg_free(cdp_cfg *cfg)
{
	if (!cfg)
		return;
	for (int i = 0; i < cfg->ns; i++) {
		for (int j = 0; j < cfg->s[i].nkv; j++) {
			free(cfg->s[i].kv[j].key);
			free(cfg->s[i].kv[j].value);
		}
		free(cfg->s[i].kv);
		free(cfg->s[i].type);
	}
	free(cfg->s);
	free(cfg->path);
	free(cfg->old_vars);
	memset(cfg, 0, sizeof(*cfg));
}

