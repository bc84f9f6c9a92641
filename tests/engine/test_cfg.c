/* test_cfg.c: the model cfg parser and its preprocessor (engine/cfg/cfg.h).
 *
 * Checks what a model author relies on: sections and options with their
 * source line numbers (also inside loops), ${} arithmetic with Python-like
 * precedence and C truncation, @for/@if expansion, command-line overrides,
 * typed lookups with range errors, one exact "PATH:LINE: reason"
 * message for each kind of mistake, nesting bounded at 64 (a hostile cfg
 * is an error, not a stack overflow), and reading a cfg file (cdp_cfg_read).
 */
#include "cfg/cfg.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512];

/* The language tests below use [net] as a scratch section with keys of
 * their own (w=7), so they parse under the old rule (any [net] key, a
 * variable), which differs from the rule only in that; test_net_keys
 * checks the rule itself with strict(). */
static int parse(const char *text, const char *const *ov, int nov, cdp_cfg *cfg)
{
	return cdp_cfg_parse_rule(text, "m.cfg", ov, nov, 1, cfg, err, sizeof(err));
}

static int strict(const char *text, const char *const *ov, int nov, cdp_cfg *cfg)
{
	return cdp_cfg_parse(text, "m.cfg", ov, nov, cfg, err, sizeof(err));
}

static const char *val(const cdp_cfg_section *s, const char *key)
{
	for (int i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return s->kv[i].value;
	return NULL;
}

static int line_of(const cdp_cfg_section *s, const char *key)
{
	for (int i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return s->kv[i].line;
	return -1;
}

/* Parses text that must fail with exactly `want`. */
static void expect_err(const char *text, const char *const *ov, int nov, const char *want)
{
	cdp_cfg cfg;
	int rc = parse(text, ov, nov, &cfg);

	CHECK(rc == -1, "parse of <<%s>> succeeded, want '%s'", text, want);
	CHECK(strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	CHECK(cfg.ns == 0 && cfg.s == NULL && cfg.path == NULL, "cfg not cleared on error");
	if (rc == 0)
		cdp_cfg_free(&cfg);
}

/* Evaluates ${expr} through a one-key [net] and returns the value text. */
static void expect_expr(const char *e, const char *want)
{
	char text[256];
	cdp_cfg cfg;

	snprintf(text, sizeof(text), "[net]\nw=7\nv=${%s}\n", e);
	if (parse(text, NULL, 0, &cfg) != 0) {
		CHECK(0, "${%s}: %s", e, err);
		return;
	}
	CHECK(strcmp(val(&cfg.s[0], "v"), want) == 0, "${%s} = %s, want %s", e,
	      val(&cfg.s[0], "v"), want);
	cdp_cfg_free(&cfg);
}

static void test_basic(void)
{
	const char *text =
		"# a model\n"
		"[net]\n"
		"  width = 16  \n"
		"; other comment style\n"
		"loss=ce\n"
		"\n"
		"[conv]\r\n"
		"name=enc0\n"
		"filters=${width}\n"
		"from=enc0,-1\n"
		"[ maxpool ]\n";
	cdp_cfg cfg;

	CHECK_RC(parse(text, NULL, 0, &cfg), 0);
	CHECK(err[0] == '\0', "err set on success: %s", err);
	CHECK(cfg.ns == 3, "ns %d", cfg.ns);
	CHECK(strcmp(cfg.path, "m.cfg") == 0, "path %s", cfg.path);
	CHECK(strcmp(cfg.s[0].type, "net") == 0 && cfg.s[0].line == 2, "net section");
	CHECK(cfg.s[0].nkv == 2, "net nkv %d", cfg.s[0].nkv);
	CHECK(strcmp(val(&cfg.s[0], "width"), "16") == 0, "trimmed value");
	CHECK(line_of(&cfg.s[0], "loss") == 5, "loss line %d", line_of(&cfg.s[0], "loss"));
	CHECK(strcmp(cfg.s[1].type, "conv") == 0 && cfg.s[1].line == 7, "conv header (CRLF)");
	CHECK(strcmp(val(&cfg.s[1], "filters"), "16") == 0, "variable expanded");
	CHECK(strcmp(val(&cfg.s[1], "from"), "enc0,-1") == 0, "from kept");
	CHECK(strcmp(cfg.s[2].type, "maxpool") == 0 && cfg.s[2].nkv == 0, "spaces in header");

	/* typed lookups mark keys used */
	{
		int v = 0;
		float f = 0;
		CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[1], err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg:8: unknown option 'name' in [conv]") == 0, "%s", err);
		CHECK(strcmp(cdp_cfg_str(&cfg.s[1], "name", "x"), "enc0") == 0, "str");
		CHECK(strcmp(cdp_cfg_str(&cfg.s[1], "nope", "dflt"), "dflt") == 0, "str default");
		CHECK_RC(cdp_cfg_int(&cfg, &cfg.s[1], "filters", 1, 1, 1024, &v, err, sizeof(err)), 0);
		CHECK(v == 16, "int %d", v);
		CHECK_RC(cdp_cfg_int(&cfg, &cfg.s[1], "stride", 3, 1, 8, &v, err, sizeof(err)), 0);
		CHECK(v == 3, "int default %d", v);
		CHECK_RC(cdp_cfg_int(&cfg, &cfg.s[1], "filters", 1, 1, 8, &v, err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg:9: option 'filters': 16 is outside [1, 8]") == 0, "%s", err);
		CHECK_RC(cdp_cfg_int(&cfg, &cfg.s[1], "from", 1, 1, 8, &v, err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg:10: option 'from': 'enc0,-1' is not an integer") == 0, "%s", err);
		CHECK_RC(cdp_cfg_float(&cfg, &cfg.s[0], "width", 0, 0, 100, &f, err, sizeof(err)), 0);
		CHECK(f == 16.0f, "float %g", f);
		CHECK_RC(cdp_cfg_float(&cfg, &cfg.s[0], "width", 0, 0, 1, &f, err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg:3: option 'width': 16 is outside [0, 1]") == 0, "%s", err);
		CHECK_RC(cdp_cfg_float(&cfg, &cfg.s[0], "loss", 0, 0, 1, &f, err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg:5: option 'loss': 'ce' is not a number") == 0, "%s", err);
		CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[1], err, sizeof(err)), 0);
		CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[0], err, sizeof(err)), 0);
	}
	cdp_cfg_free(&cfg);
	CHECK(cfg.s == NULL && cfg.ns == 0, "free clears");
	cdp_cfg_free(&cfg);     /* twice is harmless */
}

static void test_expressions(void)
{
	expect_expr("w", "7");
	expect_expr("2+3*4", "14");
	expect_expr("(2+3)*4", "20");
	expect_expr(" 10 - 4 - 3 ", "3");
	expect_expr("-2**2", "-4");
	expect_expr("2**3**2", "512");
	expect_expr("2**-0", "1");
	expect_expr("(-2)**3", "-8");
	expect_expr("0**0", "1");
	expect_expr("-1**1000000000001", "-1");
	expect_expr("7/2", "3");
	expect_expr("-7/2", "-3");
	expect_expr("-7%3", "-1");
	expect_expr("7%-3", "1");
	expect_expr("w*2**(3-1)", "28");
	expect_expr("--w", "7");
	expect_expr("9223372036854775807", "9223372036854775807");
	expect_expr("2*w/3", "4");
}

static void test_loops(void)
{
	const char *text =
		"[net]\n"                         /* 1 */
		"depth=3\n"                       /* 2 */
		"@for i 0 ${depth-1}\n"           /* 3 */
		"[conv]\n"                        /* 4 */
		"name=enc${i}\n"                  /* 5 */
		"filters=${16*2**i}\n"            /* 6 */
		"@if i\n"                         /* 7 */
		"from=enc${i-1}\n"                /* 8 */
		"@end\n"                          /* 9 */
		"@end\n"                          /* 10 */
		"@for j depth-1 0 -2\n"           /* 11 */
		"  @for k 1 2\n"                  /* 12 */
		"[up]\n"                          /* 13 */
		"id=${10*j+k}\n"                  /* 14 */
		"  @end\n"                        /* 15 */
		"@end\n"                          /* 16 */
		"@for e 5 4\n"                    /* 17: zero iterations */
		"[never]\n"
		"@end\n"
		"@if 0\n"
		"[never]\n"
		"x=${1/0}\n"                      /* not evaluated when false */
		"@end\n";
	static const char *ids[] = { "21", "22", "1", "2" };
	cdp_cfg cfg;

	CHECK_RC(parse(text, NULL, 0, &cfg), 0);
	if (cfg.ns != 8) {
		CHECK(0, "ns %d, want 8 (%s)", cfg.ns, err);
		cdp_cfg_free(&cfg);
		return;
	}
	for (int i = 0; i < 3; i++) {
		cdp_cfg_section *s = &cfg.s[1 + i];
		char name[16], f[16];
		snprintf(name, sizeof(name), "enc%d", i);
		snprintf(f, sizeof(f), "%d", 16 << i);
		CHECK(s->line == 4, "loop header line %d", s->line);
		CHECK(strcmp(val(s, "name"), name) == 0, "name %s", val(s, "name"));
		CHECK(strcmp(val(s, "filters"), f) == 0, "filters %s", val(s, "filters"));
		CHECK(line_of(s, "filters") == 6, "line inside loop %d", line_of(s, "filters"));
		CHECK((i == 0) == (val(s, "from") == NULL), "@if i at i=%d", i);
		if (i > 0)
			CHECK(line_of(s, "from") == 8, "from line");
	}
	for (int i = 0; i < 4; i++) {
		CHECK(strcmp(cfg.s[4 + i].type, "up") == 0, "up type");
		CHECK(strcmp(val(&cfg.s[4 + i], "id"), ids[i]) == 0, "id %s want %s",
		      val(&cfg.s[4 + i], "id"), ids[i]);
		CHECK(line_of(&cfg.s[4 + i], "id") == 14, "nested line");
	}
	cdp_cfg_free(&cfg);
}

static void test_overrides(void)
{
	const char *text =
		"[net]\n"
		"width=16\n"
		"half=${width/2}\n"
		"bad=${nosuch}\n"
		"[conv]\n"
		"filters=${half}\n"
		"n=${classes}\n";
	const char *ov[] = { "width=32", "bad=1", "classes=5", "loss=bce" };
	cdp_cfg cfg;

	CHECK_RC(parse(text, ov, 4, &cfg), 0);
	if (cfg.ns == 2) {
		CHECK(strcmp(val(&cfg.s[0], "width"), "32") == 0, "override replaces");
		CHECK(line_of(&cfg.s[0], "width") == 2, "override keeps the file's line");
		CHECK(strcmp(val(&cfg.s[0], "half"), "16") == 0, "later keys see the override");
		CHECK(strcmp(val(&cfg.s[0], "bad"), "1") == 0, "overridden value not expanded");
		CHECK(strcmp(val(&cfg.s[1], "filters"), "16") == 0, "filters %s", val(&cfg.s[1], "filters"));
		CHECK(strcmp(val(&cfg.s[1], "n"), "5") == 0, "new integer override is a variable");
		CHECK(strcmp(val(&cfg.s[0], "classes"), "5") == 0, "new key added to [net]");
		CHECK(line_of(&cfg.s[0], "classes") == 0, "added key has line 0");
		CHECK(strcmp(val(&cfg.s[0], "loss"), "bce") == 0, "string override added");
		cdp_cfg_str(&cfg.s[0], "width", NULL);
		cdp_cfg_str(&cfg.s[0], "half", NULL);
		cdp_cfg_str(&cfg.s[0], "bad", NULL);
		cdp_cfg_str(&cfg.s[0], "classes", NULL);
		CHECK_RC(cdp_cfg_check_used(&cfg, &cfg.s[0], err, sizeof(err)), -1);
		CHECK(strcmp(err, "m.cfg: unknown option 'loss' in [net] (override)") == 0, "%s", err);
		{
			int v;
			CHECK_RC(cdp_cfg_int(&cfg, &cfg.s[0], "loss", 0, 0, 9, &v, err, sizeof(err)), -1);
			CHECK(strcmp(err, "m.cfg: option 'loss' (override): 'bce' is not an integer") == 0,
			      "%s", err);
		}
	} else {
		CHECK(0, "ns %d: %s", cfg.ns, err);
	}
	cdp_cfg_free(&cfg);

	/* an override applies also when [net] is the only section */
	{
		const char *o1[] = { "depth=5" };
		CHECK_RC(parse("[net]\nwidth=1\n", o1, 1, &cfg), 0);
		CHECK(cfg.ns == 1 && strcmp(val(&cfg.s[0], "depth"), "5") == 0, "added at end");
		cdp_cfg_free(&cfg);
	}
	{
		const char *o2[] = { "width" };
		const char *o3[] = { "=3" };
		const char *o4[] = { "w=1", "w=2" };
		const char *o5[] = { "a b=1" };
		expect_err("[net]\n", o2, 1, "m.cfg: override 'width': expected key=value");
		expect_err("[net]\n", o3, 1, "m.cfg: override '=3': expected key=value");
		expect_err("[net]\n", o4, 2, "m.cfg: override 'w' given twice");
		expect_err("[net]\n", o5, 1, "m.cfg: override 'a b=1': bad option name");
	}
}

static void test_errors(void)
{
	expect_err("[net]\n@for i 0 3\n[conv]\n", NULL, 0, "m.cfg:2: unterminated @for");
	expect_err("[net]\n@for i 0 1\n@if i\n@end\n", NULL, 0, "m.cfg:2: unterminated @for");
	expect_err("[net]\n@if 1\n", NULL, 0, "m.cfg:2: unterminated @if");
	expect_err("[net]\n@end\n", NULL, 0, "m.cfg:2: @end without @for or @if");
	expect_err("[net]\n@format x\n", NULL, 0, "m.cfg:2: unknown directive '@format x'");
	expect_err("[net]\na=${2+}\n", NULL, 0,
	           "m.cfg:2: expression '2+': expected a number, a variable or '('");
	expect_err("[net]\na=${(2}\n", NULL, 0, "m.cfg:2: expression '(2': missing ')'");
	expect_err("[net]\na=${2)}\n", NULL, 0, "m.cfg:2: expression '2)': unbalanced ')'");
	expect_err("[net]\na=${2 3}\n", NULL, 0,
	           "m.cfg:2: expression '2 3': unexpected text after the expression");
	expect_err("[net]\na=${}\n", NULL, 0,
	           "m.cfg:2: expression '': expected a number, a variable or '('");
	expect_err("[net]\nx=4\n\na=${x/(x-4)}\n", NULL, 0,
	           "m.cfg:4: expression 'x/(x-4)': division by zero");
	expect_err("[net]\na=${5%0}\n", NULL, 0, "m.cfg:2: expression '5%0': division by zero");
	expect_err("[net]\na=${2**64}\n", NULL, 0, "m.cfg:2: expression '2**64': overflow");
	expect_err("[net]\na=${9223372036854775807+1}\n", NULL, 0,
	           "m.cfg:2: expression '9223372036854775807+1': overflow");
	expect_err("[net]\na=${99999999999999999999}\n", NULL, 0,
	           "m.cfg:2: expression '99999999999999999999': number too large");
	expect_err("[net]\na=${2**-1}\n", NULL, 0, "m.cfg:2: expression '2**-1': negative exponent");
	expect_err("[net]\na=${width}\n", NULL, 0,
	           "m.cfg:2: expression 'width': unknown variable 'width'");
	expect_err("[net]\nloss=ce\na=${loss}\n", NULL, 0,
	           "m.cfg:3: expression 'loss': unknown variable 'loss'");
	expect_err("[net]\na=${1\n", NULL, 0, "m.cfg:2: unterminated '${'");
	expect_err("[net]\n[conv]\n[net]\n", NULL, 0,
	           "m.cfg:3: duplicate [net] section (the first is at line 1)");
	expect_err("# c\nwidth=3\n[net]\n", NULL, 0, "m.cfg:2: option 'width' outside any section");
	expect_err("[conv]\n", NULL, 0, "m.cfg:1: the first section must be [net], not [conv]");
	expect_err("[net]\na=1\na=2\n", NULL, 0, "m.cfg:3: duplicate option 'a' (first at line 2)");
	expect_err("[net]\na=\n", NULL, 0, "m.cfg:2: option 'a' has no value");
	expect_err("[net]\n=1\n", NULL, 0, "m.cfg:2: bad option name ''");
	expect_err("[net]\njust words\n", NULL, 0,
	           "m.cfg:2: expected '[section]' or 'key=value', not 'just words'");
	expect_err("[net\n", NULL, 0, "m.cfg:1: bad section header '[net': missing ']'");
	expect_err("[]\n", NULL, 0, "m.cfg:1: bad section name ''");
	expect_err("", NULL, 0, "m.cfg: no [net] section");
	expect_err("# only a comment\n", NULL, 0, "m.cfg: no [net] section");
	expect_err("[net]\n@for i 0\n@end\n", NULL, 0, "m.cfg:2: @for: expected 'VAR A B [STEP]'");
	expect_err("[net]\n@for 1i 0 1\n@end\n", NULL, 0, "m.cfg:2: @for: bad variable name '1i'");
	expect_err("[net]\n@for i 0 3 0\n@end\n", NULL, 0, "m.cfg:2: @for: step is 0");
	expect_err("[net]\nd=2\n@for d 0 1\n@end\n", NULL, 0,
	           "m.cfg:3: @for: variable 'd' is already defined");
	expect_err("[net]\n@for i 0 1\n@for i 0 1\n@end\n@end\n", NULL, 0,
	           "m.cfg:3: @for: variable 'i' is already defined");
	expect_err("[net]\n@for i 0 2\n[c]\n@if i-1\nz=${i/(i-2)}\n@end\n@end\n", NULL, 0,
	           "m.cfg:5: expression 'i/(i-2)': division by zero");
	expect_err("[net]\n@if q\n@end\n", NULL, 0, "m.cfg:2: expression 'q': unknown variable 'q'");
	expect_err("[net]\n@for i 0 2000000\n@end\n", NULL, 0, "m.cfg:2: expansion exceeds 1000000 lines");
	expect_err("[net]\n@for i 1 1000\n@for j 1 1000\n[x]\n@end\n@end\n", NULL, 0,
	           "m.cfg:4: expansion exceeds 1000000 lines");
}

/* Loop variables go out of scope after @end; [net] keys inside a loop in
 * [net] stay defined. */
static void test_scope(void)
{
	cdp_cfg cfg;

	expect_err("[net]\n@for i 0 1\n@end\n[c]\nx=${i}\n", NULL, 0,
	           "m.cfg:5: expression 'i': unknown variable 'i'");
	CHECK_RC(parse("[net]\n@for i 1 2\nk${i}=${i*10}\n@end\n[c]\nx=${k1+k2}\n", NULL, 0, &cfg), 0);
	if (cfg.ns == 2)
		CHECK(strcmp(val(&cfg.s[1], "x"), "30") == 0, "x=%s", val(&cfg.s[1], "x"));
	else
		CHECK(0, "%s", err);
	cdp_cfg_free(&cfg);
	/* a too-small message buffer truncates, never overflows */
	{
		char small[8];
		CHECK_RC(cdp_cfg_parse("[conv]\n", "long/path.cfg", NULL, 0, &cfg, small, sizeof(small)), -1);
		CHECK(strlen(small) < sizeof(small), "truncated");
	}
}

/* "[net]\na=${" + n copies of open + mid + n copies of close + "}\n",
 * malloc'ed. */
static char *nested(const char *open, int n, const char *mid, const char *close)
{
	size_t lo = strlen(open), lc = strlen(close), len = 0;
	char *s = malloc(16 + strlen(mid) + (size_t)n * (lo + lc));

	if (!s)
		return NULL;
	len += (size_t)sprintf(s, "[net]\na=${");
	for (int i = 0; i < n; i++, len += lo)
		memcpy(s + len, open, lo);
	len += (size_t)sprintf(s + len, "%s", mid);
	for (int i = 0; i < n; i++, len += lc)
		memcpy(s + len, close, lc);
	strcpy(s + len, "}\n");
	return s;
}

/* Nesting is bounded at 64: each '(', unary '-' and '**' of an expression,
 * and each @for/@if, is one level. 64 are accepted, 65 refused with one
 * line; the inputs that overflowed the stack (SIGSEGV) before the bound
 * (60,000 '(', 1,000,000 unary minuses, 300,000 '2**') are refused the
 * same way. */
static void test_nesting(void)
{
	static const struct { const char *open, *mid, *close, *value; } f[] = {
		{ "(", "7", ")", "7" },
		{ "-", "7", "", "7" },          /* an even count */
		{ "1**", "2", "", "1" },
		{ "-(", "7", ")", "7" },        /* two levels each */
	};
	static const struct { const char *open; int n; } huge[] = {
		{ "(", 60000 }, { "-", 1000000 }, { "2**", 300000 }, { "(-", 100000 },
	};
	const char *tail = ": nested deeper than 64";
	cdp_cfg cfg;
	char *text;

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		int n = i == 3 ? 32 : 64;
		text = nested(f[i].open, n, f[i].mid, f[i].close);
		if (parse(text, NULL, 0, &cfg) != 0)
			CHECK(0, "%d x '%s': %s", n, f[i].open, err);
		else
			CHECK(strcmp(val(&cfg.s[0], "a"), f[i].value) == 0, "%d x '%s' = %s", n,
			      f[i].open, val(&cfg.s[0], "a"));
		cdp_cfg_free(&cfg);
		free(text);
		text = nested(f[i].open, n + 1, f[i].mid, f[i].close);
		CHECK_RC(parse(text, NULL, 0, &cfg), -1);
		CHECK(strncmp(err, "m.cfg:2: expression '", 21) == 0 &&
		      strlen(err) > strlen(tail) && strcmp(err + strlen(err) - strlen(tail), tail) == 0 &&
		      !strchr(err, '\n'), "%d x '%s': '%s'", n + 1, f[i].open, err);
		free(text);
	}
	for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
		text = nested(huge[i].open, huge[i].n, "1", "");
		CHECK_RC(parse(text, NULL, 0, &cfg), -1);
		CHECK(strncmp(err, "m.cfg:2: expression '", 21) == 0 &&
		      strcmp(err + strlen(err) - strlen(tail), tail) == 0,
		      "%d x '%s': '%s'", huge[i].n, huge[i].open, err);
		free(text);
	}
	/* directives: 64 nested @if accepted, 65 refused at the 65th */
	for (int n = 64; n <= 65; n++) {
		size_t len = 0;
		text = malloc((size_t)n * 12 + 32);
		len += (size_t)sprintf(text, "[net]\n");
		for (int i = 0; i < n; i++)
			len += (size_t)sprintf(text + len, "@if 1\n");
		len += (size_t)sprintf(text + len, "a=1\n");
		for (int i = 0; i < n; i++)
			len += (size_t)sprintf(text + len, "@end\n");
		if (n == 64) {
			CHECK_RC(parse(text, NULL, 0, &cfg), 0);
			cdp_cfg_free(&cfg);
		} else {
			CHECK_RC(parse(text, NULL, 0, &cfg), -1);
			CHECK(strcmp(err, "m.cfg:66: directives nested deeper than 64") == 0, "'%s'", err);
		}
		free(text);
	}
}

/* cdp_cfg_read: the whole file as text, or one message naming the path. */
static void test_read(void)
{
	char dir[] = "/tmp/cdp-cfg-XXXXXX", path[64], want[160], *text = (char *)"x";
	FILE *f;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/m.cfg", dir);
	f = fopen(path, "wb");
	CHECK(f && fputs("[net]\nwidth=4\n", f) >= 0 && fclose(f) == 0, "cannot write '%s'", path);
	CHECK_RC(cdp_cfg_read(path, &text, err, sizeof(err)), 0);
	CHECK(text && strcmp(text, "[net]\nwidth=4\n") == 0, "read '%s'", text ? text : "(null)");
	free(text);
	/* a NUL byte would end the C string early and drop every layer after it */
	f = fopen(path, "wb");
	CHECK(f && fwrite("[net]\nw=4\n#\0\n[conv]\n", 1, 20, f) == 20 && fclose(f) == 0,
	      "cannot write '%s'", path);
	CHECK_RC(cdp_cfg_read(path, &text, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:3: a NUL byte: a cfg is text", path);
	CHECK(text == NULL && strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	/* one byte over the limit (a sparse file) is refused before any read */
	CHECK_RC(truncate(path, (off_t)CDP_CFG_TEXT_MAX + 1), 0);
	CHECK_RC(cdp_cfg_read(path, &text, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "cannot read '%s': too large", path);
	CHECK(text == NULL && strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	unlink(path);
	CHECK_RC(cdp_cfg_read(path, &text, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "cannot open '%s': No such file or directory", path);
	CHECK(text == NULL && strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	/* fopen takes a directory */
	CHECK_RC(cdp_cfg_read(dir, &text, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "cannot read '%s': Is a directory", dir);
	CHECK(text == NULL && strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	rmdir(dir);
}

/* Strict parse of text that must fail with CDP_CFG_EUNKNOWN and `want`. */
static void expect_unknown(const char *text, const char *const *ov, int nov, const char *want)
{
	cdp_cfg cfg;
	int rc = strict(text, ov, nov, &cfg);

	CHECK(rc == CDP_CFG_EUNKNOWN, "strict parse of <<%s>> returned %d, want %d", text, rc,
	      CDP_CFG_EUNKNOWN);
	CHECK(strcmp(err, want) == 0, "message '%s', want '%s'", err, want);
	if (rc == 0)
		cdp_cfg_free(&cfg);
}

/* The rule: a [net] key is one the engine reads (cfg/netkeys.h), the
 * file's own variables are in [vars]; an old cfg parses under the old rule. */
static void test_net_keys(void)
{
	const char *vars =
		"[net]\n"             /* 1 */
		"classes=3\n"
		"loss=ce\n"
		"[vars]\n"            /* 4 */
		"width=4\n"
		"depth=${classes-1}\n"
		"\n"
		"[conv]\n"            /* 8 */
		"filters=${width*depth}\n";
	const char *ov_w[] = { "width=6" }, *ov_lr[] = { "lr=0.5", "depth=5" };
	const char *ov_bad[] = { "aug_hue=1" }, *ov_typo[] = { "lrr=0.1" };
	cdp_cfg cfg;

	CHECK(cdp_cfg_net_key_known("aug_hflip") && cdp_cfg_net_key_known("focal_gamma") &&
	      cdp_cfg_net_key_known("lr") && !cdp_cfg_net_key_known("width"), "known keys");
	/* a declared variable is accepted, not kept as a section */
	CHECK_RC(strict(vars, NULL, 0, &cfg), 0);
	CHECK(cfg.ns == 2 && cfg.s[0].nkv == 2 && strcmp(cfg.s[1].type, "conv") == 0 &&
	      cfg.s[1].line == 8, "ns %d", cfg.ns);
	CHECK(cfg.ns == 2 && strcmp(val(&cfg.s[1], "filters"), "8") == 0, "filters %s",
	      cfg.ns == 2 ? val(&cfg.s[1], "filters") : "?");
	cdp_cfg_free(&cfg);
	/* overrides reach [vars] and known [net] keys */
	CHECK_RC(strict(vars, ov_w, 1, &cfg), 0);
	CHECK(cfg.ns == 2 && strcmp(val(&cfg.s[1], "filters"), "12") == 0, "width=6");
	cdp_cfg_free(&cfg);
	CHECK_RC(strict(vars, ov_lr, 2, &cfg), 0);
	CHECK(cfg.ns == 2 && strcmp(val(&cfg.s[1], "filters"), "20") == 0 &&
	      strcmp(val(&cfg.s[0], "lr"), "0.5") == 0 && line_of(&cfg.s[0], "lr") == 0,
	      "lr=0.5,depth=5");
	cdp_cfg_free(&cfg);
	/* an unknown key, in the file or an override, with the nearest key */
	expect_unknown("[net]\nloss=ce\naug_hflp=1\n[conv]\nfilters=1\n", NULL, 0,
	               "m.cfg:3: unknown [net] key 'aug_hflp' (did you mean 'aug_hflip'?)");
	expect_unknown("[net]\nlsos=ce\n", NULL, 0,
	               "m.cfg:2: unknown [net] key 'lsos' (did you mean 'loss'?)");
	expect_unknown("[net]\nloss=ce\nwidth=4\n[conv]\nfilters=${width}\n", NULL, 0,
	               "m.cfg:3: unknown [net] key 'width' (no such key; a cfg's own variables go in [vars])");
	expect_unknown(vars, ov_bad, 1,
	               "m.cfg: unknown [net] key 'aug_hue' (override) "
	               "(no such key; a cfg's own variables go in [vars])");
	expect_unknown(vars, ov_typo, 1,
	               "m.cfg: unknown [net] key 'lrr' (override) (did you mean 'lr'?)");
	/* the old rule: the same text parses, the key a variable */
	CHECK_RC(parse("[net]\nloss=ce\nwidth=4\n[conv]\nfilters=${width}\n", NULL, 0, &cfg), 0);
	CHECK(cfg.ns == 2 && strcmp(val(&cfg.s[1], "filters"), "4") == 0, "old rule");
	cdp_cfg_free(&cfg);
	/* [vars] mistakes are ordinary errors */
	expect_err("[net]\nloss=ce\n[conv]\n[vars]\nw=1\n", NULL, 0,
	           "m.cfg:4: [vars] must directly follow [net]");
	expect_err("[net]\n[vars]\nw=1\n[vars]\n", NULL, 0,
	           "m.cfg:4: duplicate [vars] section (the first is at line 2)");
	expect_err("[net]\nclasses=2\n[vars]\nclasses=3\n", NULL, 0,
	           "m.cfg:4: [vars] key 'classes' is also a [net] key (line 2)");
	expect_err("[net]\n[vars]\nw=wide\n", NULL, 0,
	           "m.cfg:3: [vars] key 'w': 'wide' is not an integer");
	expect_err("[net]\n[vars]\nw=1\nw=2\n", NULL, 0,
	           "m.cfg:4: duplicate option 'w' (first at line 3)");
}

int main(void)
{
	test_net_keys();
	test_basic();
	test_expressions();
	test_loops();
	test_overrides();
	test_errors();
	test_scope();
	test_nesting();
	test_read();
	return tap_done();
}
