/* cdp_label_vector_cli.c: the command-line options of vector labels
 * (cdp_label_vector.h), parsed once for every program that takes them.
 * Like cdp_cli.c, whose parsers it uses, it prints usage errors: its only
 * job is main.c's messages.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_label_vector.h"
#include "cdp_record.h"

int cdp_label_vector_option(cdp_label_vector_opts *o, int ch, const char *arg)
{
	static const char *const types[] = { "u8", "u16", NULL };
	static const int type_of[] = { CDP_LABEL_U8, CDP_LABEL_U16 };
	int v;

	o->given = 1;
	switch (ch) {
	case CDP_LVO_ALL_TOUCHED:
		o->all_touched = 1;
		return 0;
	case CDP_LVO_BACKGROUND:
		o->background_given = 1;
		/* pixels no feature covers left out, as a NULL attribute is */
		o->background_ignore = strcmp(arg, "ignore") == 0;
		if (o->background_ignore) {
			o->background = 0;
			return 0;
		}
		/* fall through */
	case CDP_LVO_BURN:
		if (ch == CDP_LVO_BACKGROUND && strspn(arg, "0123456789") != strlen(arg)) {
			cdp_cli_bad("--background", arg, "an id in 0..65534 or ignore");
			return -1;
		}
		if (cdp_cli_int(ch == CDP_LVO_BURN ? "--burn" : "--background", arg, 0, 65534, &v))
			return -1;
		*(ch == CDP_LVO_BURN ? &o->burn : &o->background) = (uint32_t)v;
		o->burn_given |= ch == CDP_LVO_BURN;
		return 0;
	case CDP_LVO_BUFFER:
		/* finite, as every float option: GEOS fails on an infinite
		 * distance after the stream has begun */
		return cdp_cli_double("--buffer", arg, 0, 1e9, 0, &o->buffer) ? -1 : 0;
	case CDP_LVO_BUFFER_FIELD:
		o->buffer_field = arg;
		return 0;
	case CDP_LVO_LABEL_CRS:
		o->crs = arg;
		return 0;
	case CDP_LVO_LABEL_EXTENT:
		o->extent = arg;
		return 0;
	case CDP_LVO_LABEL_FIELD:
		o->field = arg;
		return 0;
	case CDP_LVO_LABEL_LAYER:
		o->layer = arg;
		return 0;
	case CDP_LVO_LABEL_TYPE:
		if (cdp_cli_keyword("--label-type", arg, types, &v))
			return -1;
		o->type = type_of[v];
		return 0;
	case CDP_LVO_LABEL_WHERE:
		o->where = arg;
		return 0;
	}
	return -1;
}

/* Appends " OPT" and, when v is not NULL, " V" shell-quoted where needed:
 * as it is when every byte is plain, else in '...', or in $'...' with
 * backslash escapes where V holds a control character (a --label-where
 * written on several lines, a pasted multi-line WKT): the record is one
 * line, and bash, zsh and a POSIX.1-2024 sh give the value back byte for
 * byte. 0, or -1 when out[cap] is full. */
static int put(char *out, size_t cap, size_t *n, const char *opt, const char *v)
{
	static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                            "0123456789._/:+-=,@%";
	int ansi = 0;
	size_t m;

	if (*n >= cap)
		return -1;
	m = (size_t)snprintf(out + *n, cap - *n, "%s%s", *n ? " " : "", opt);
	if ((*n += m) >= cap || !v)
		return *n >= cap ? -1 : 0;
	if (*v && strspn(v, plain) == strlen(v)) {
		*n += (size_t)snprintf(out + *n, cap - *n, " %s", v);
		return *n >= cap ? -1 : 0;
	}
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		ansi |= *p < 0x20 || *p == 0x7f;
	*n += (size_t)snprintf(out + *n, cap - *n, ansi ? " $'" : " '");
	for (const unsigned char *p = (const unsigned char *)v; *p && *n < cap; p++) {
		int c = *p;
		if (!ansi)
			m = (size_t)(c == '\'' ? snprintf(out + *n, cap - *n, "'\\''")
			                      : snprintf(out + *n, cap - *n, "%c", c));
		else if (c == '\'' || c == '\\')
			m = (size_t)snprintf(out + *n, cap - *n, "\\%c", c);
		else if (c == '\n' || c == '\t' || c == '\r')
			m = (size_t)snprintf(out + *n, cap - *n, "\\%c",
			                     c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else if (c < 0x20 || c == 0x7f)
			/* two digits always: a hex digit after it stays itself */
			m = (size_t)snprintf(out + *n, cap - *n, "\\x%02x", (unsigned)c);
		else
			m = (size_t)snprintf(out + *n, cap - *n, "%c", c);
		*n += m;
	}
	if (*n < cap)
		*n += (size_t)snprintf(out + *n, cap - *n, "'");
	return *n >= cap ? -1 : 0;
}

int cdp_label_vector_describe(const cdp_label_vector_opts *o, char *out, size_t cap)
{
	char num[32], bg[32], buf[32];
	size_t n = 0;
	int bad = 0;

	if (!cap)
		return CDP_ERANGE;
	out[0] = '\0';
	snprintf(num, sizeof num, "%u", (unsigned)o->burn);
	snprintf(bg, sizeof bg, "%u", (unsigned)o->background);
	snprintf(buf, sizeof buf, "%.17g", o->buffer);
	if (o->layer)
		bad |= put(out, cap, &n, "--label-layer", o->layer);
	bad |= o->field ? put(out, cap, &n, "--label-field", o->field)
	                : put(out, cap, &n, "--burn", num);
	if (o->where)
		bad |= put(out, cap, &n, "--label-where", o->where);
	if (o->all_touched)
		bad |= put(out, cap, &n, "--all-touched", NULL);
	bad |= put(out, cap, &n, "--background", o->background_ignore ? "ignore" : bg);
	if (o->crs)
		bad |= put(out, cap, &n, "--label-crs", o->crs);
	if (o->buffer_field)
		bad |= put(out, cap, &n, "--buffer-field", o->buffer_field);
	else if (o->buffer > 0)
		bad |= put(out, cap, &n, "--buffer", buf);
	if (o->extent)
		bad |= put(out, cap, &n, "--label-extent", o->extent);
	if (o->type)
		bad |= put(out, cap, &n, "--label-type", o->type == CDP_LABEL_U8 ? "u8" : "u16");
	if (bad)
		out[0] = '\0';
	return bad ? CDP_ERANGE : CDP_OK;
}

int cdp_label_vector_options_check(const cdp_label_vector_opts *o)
{
	const char *why = NULL;

	if (o->nclasses > 2 && !o->field && !o->burn_given) {
		fprintf(stderr, "%s: --classes names %zu classes but every feature burns %u "
		        "(--burn): give --label-field\n", cdp_cli_prog(), o->nclasses,
		        (unsigned)o->burn);
		return -1;
	}
	/* up front, also where the layer will declare a CRS of its own:
	 * garbage is a usage error whatever the label turns out to be */
	if (o->crs && cdp_label_vector_crs_check(o->crs) != CDP_OK) {
		cdp_cli_bad("--label-crs", o->crs, "a CRS (such as EPSG:32633, a WKT or a PROJ "
		            "string)");
		return -1;
	}
	if (o->burn_given && o->field)
		why = "--burn and --label-field exclude each other";
	else if (o->buffer > 0 && o->buffer_field)
		why = "--buffer and --buffer-field exclude each other";
	if (why)
		fprintf(stderr, "%s: %s\n", cdp_cli_prog(), why);
	return why ? -1 : 0;
}
