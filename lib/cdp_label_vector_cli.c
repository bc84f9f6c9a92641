/* cdp_label_vector_cli.c: the command-line options of vector labels
 * (cdp_label_vector.h), parsed once for every program that takes them.
 * Like cdp_cli.c, whose parsers it uses, it prints usage errors: its only
 * job is main.c's messages.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "cdp_cli.h"
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
	case CDP_LVO_BURN:
		if (cdp_cli_int(ch == CDP_LVO_BURN ? "--burn" : "--background", arg, 0, 65534, &v))
			return -1;
		*(ch == CDP_LVO_BURN ? &o->burn : &o->background) = (uint32_t)v;
		o->burn_given |= ch == CDP_LVO_BURN;
		return 0;
	case CDP_LVO_BUFFER:
		return cdp_cli_double("--buffer", arg, 0, HUGE_VAL, 0, &o->buffer) ? -1 : 0;
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

int cdp_label_vector_options_check(const cdp_label_vector_opts *o)
{
	const char *why = NULL;

	if (o->burn_given && o->field)
		why = "--burn and --label-field exclude each other";
	else if (o->buffer > 0 && o->buffer_field)
		why = "--buffer and --buffer-field exclude each other";
	if (why)
		fprintf(stderr, "%s: %s\n", cdp_cli_prog(), why);
	return why ? -1 : 0;
}
