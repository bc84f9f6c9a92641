/* cfg_expr.c: the integer expressions of the cfg preprocessor (cfg.h):
 * decimal integers, variables, + - * / % ** ( ) and unary -, evaluated in
 * 64-bit signed arithmetic where overflow is an error, not a wrap.
 *
 * Recursive descent, lowest precedence first: sum (+ -), product (* / %),
 * unary -, power (** right-associative), primary. So -2**2 is -4 and
 * 2**3**2 is 512, as in Python; / and % truncate toward zero, as in C.
 * Each '(', unary '-' and '**' is one more level of recursion, so nesting
 * is bounded (CDP_CFG_NEST_MAX): a cfg comes from checkpoints and other
 * users too, and 60,000 '(' must be an error, not a stack overflow.
 */
#include "cfg_int.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

static int is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static int is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

typedef struct expr {
	const char *p, *end;
	cdp_cfg_var_fn lookup;
	void *ctx;
	cdp_cfg_experr *err;
	int depth;              /* open '(', unary '-' and '**' */
} expr;

static int fail(expr *e, const char *why)
{
	e->err->why = why;
	return -1;
}

#define STR_(x) #x
#define STR(x)  STR_(x)

/* One more level before a recursive call; leave() undoes it after. */
static int enter(expr *e)
{
	if (e->depth >= CDP_CFG_NEST_MAX)
		return fail(e, "nested deeper than " STR(CDP_CFG_NEST_MAX));
	e->depth++;
	return 0;
}

static int leave(expr *e, int rc)
{
	e->depth--;
	return rc;
}

static void skip_ws(expr *e)
{
	while (e->p < e->end && (*e->p == ' ' || *e->p == '\t'))
		e->p++;
}

static int ex_sum(expr *e, long long *v);

static int ex_primary(expr *e, long long *v)
{
	skip_ws(e);
	if (e->p >= e->end)
		return fail(e, "expected a number, a variable or '('");
	if (*e->p == '(') {
		e->p++;
		if (enter(e) < 0 || leave(e, ex_sum(e, v)) < 0)
			return -1;
		skip_ws(e);
		if (e->p >= e->end || *e->p != ')')
			return fail(e, "missing ')'");
		e->p++;
		return 0;
	}
	if (isdigit((unsigned char)*e->p)) {
		long long x = 0;
		while (e->p < e->end && isdigit((unsigned char)*e->p)) {
			int d = *e->p - '0';
			if (x > (LLONG_MAX - d) / 10)
				return fail(e, "number too large");
			x = x * 10 + d;
			e->p++;
		}
		if (e->p < e->end && is_ident(*e->p))
			return fail(e, "bad number");
		*v = x;
		return 0;
	}
	if (is_ident_start(*e->p)) {
		const char *s = e->p;
		while (e->p < e->end && is_ident(*e->p))
			e->p++;
		if (e->lookup(e->ctx, s, (size_t)(e->p - s), v) != 0) {
			size_t n = (size_t)(e->p - s);
			if (n >= sizeof(e->err->name))
				n = sizeof(e->err->name) - 1;
			memcpy(e->err->name, s, n);
			e->err->name[n] = '\0';
			return fail(e, "unknown variable");
		}
		return 0;
	}
	return fail(e, "expected a number, a variable or '('");
}

static int ex_unary(expr *e, long long *v);

/* power := primary ['**' unary]: right-associative, and binds tighter than
 * a unary minus on its left but accepts one on its right (2**-1 is caught
 * as a negative exponent, not a syntax error). */
static int ex_power(expr *e, long long *v)
{
	long long b, x, r = 1;

	if (ex_primary(e, &b) < 0)
		return -1;
	skip_ws(e);
	if (e->end - e->p < 2 || e->p[0] != '*' || e->p[1] != '*') {
		*v = b;
		return 0;
	}
	e->p += 2;
	if (enter(e) < 0 || leave(e, ex_unary(e, &x)) < 0)
		return -1;
	if (x < 0)
		return fail(e, "negative exponent");
	/* 0, 1 and -1 never grow, so a huge exponent must not loop; any other
	 * base overflows within 63 multiplications. */
	if (b == 0)
		r = x == 0;
	else if (b == 1)
		r = 1;
	else if (b == -1)
		r = (x & 1) ? -1 : 1;
	else
		for (long long i = 0; i < x; i++)
			if (__builtin_mul_overflow(r, b, &r))
				return fail(e, "overflow");
	*v = r;
	return 0;
}

static int ex_unary(expr *e, long long *v)
{
	skip_ws(e);
	if (e->p < e->end && *e->p == '-') {
		e->p++;
		if (enter(e) < 0 || leave(e, ex_unary(e, v)) < 0)
			return -1;
		if (*v == LLONG_MIN)
			return fail(e, "overflow");
		*v = -*v;
		return 0;
	}
	return ex_power(e, v);
}

static int ex_product(expr *e, long long *v)
{
	long long r;

	if (ex_unary(e, v) < 0)
		return -1;
	for (;;) {
		char op;
		skip_ws(e);
		if (e->p >= e->end)
			return 0;
		op = *e->p;
		if ((op != '*' && op != '/' && op != '%') ||
		    (op == '*' && e->end - e->p >= 2 && e->p[1] == '*'))
			return 0;
		e->p++;
		if (ex_unary(e, &r) < 0)
			return -1;
		if (op == '*') {
			if (__builtin_mul_overflow(*v, r, v))
				return fail(e, "overflow");
			continue;
		}
		if (r == 0)
			return fail(e, "division by zero");
		if (*v == LLONG_MIN && r == -1)
			return fail(e, "overflow");
		*v = op == '/' ? *v / r : *v % r;
	}
}

static int ex_sum(expr *e, long long *v)
{
	long long r;

	if (ex_product(e, v) < 0)
		return -1;
	for (;;) {
		char op;
		skip_ws(e);
		if (e->p >= e->end)
			return 0;
		op = *e->p;
		if (op != '+' && op != '-')
			return 0;
		e->p++;
		if (ex_product(e, &r) < 0)
			return -1;
		if (op == '+' ? __builtin_add_overflow(*v, r, v)
		              : __builtin_sub_overflow(*v, r, v)) {
			return fail(e, "overflow");
		}
	}
}

int cdp_cfg_eval(const char *s, size_t len, cdp_cfg_var_fn lookup, void *ctx, long long *v,
                 cdp_cfg_experr *err)
{
	expr e = { .p = s, .end = s + len, .lookup = lookup, .ctx = ctx, .err = err };

	err->why = NULL;
	err->name[0] = '\0';
	if (ex_sum(&e, v) < 0)
		return -1;
	skip_ws(&e);
	if (e.p == e.end)
		return 0;
	return fail(&e, *e.p == ')' ? "unbalanced ')'" : "unexpected text after the expression");
}
