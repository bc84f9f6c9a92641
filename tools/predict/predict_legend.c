/* predict_legend.c: the name and colour of each class of cdp-predict's
 * class map (the GeoTIFF's colour table, category names and attribute
 * table, the probability bands' descriptions, the polygons' "name").
 *
 * Class k is "class k" in the fixed palette below, or by the name the
 * checkpoint gives it (version 6: the training pool's class_names, from
 * cdp-lmdbpack --classes or --folders), unless --colors FILE says
 * otherwise. FILE is GDAL's color-relief text restricted to exact class
 * values: one class a line, "VALUE R G B [NAME]" (VALUE 0..254, R G B
 * 0..255, NAME the rest of the line, a class name as the checkpoint's:
 * UTF-8 without control characters, at most 255 bytes); blank lines and
 * lines starting with '#' are skipped. A control character anywhere (a
 * NUL, an escape) is refused, as is a second line for one class. A line
 * of FILE sets its class's colour, and its name when it gives one: FILE
 * wins over the checkpoint, class by class.
 */
#include "predict_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* a line of --colors: VALUE R G B and a name of up to 255 bytes fit */
#define PR_COLORS_LINE_MAX 510

/* ColorBrewer's "Set1" after a light grey for class 0 (usually the
 * background); beyond it, colours from a multiplicative hash of k */
static const uint8_t palette[10][3] = {
	{ 210, 210, 210 }, { 228, 26, 28 }, { 55, 126, 184 }, { 77, 175, 74 }, { 152, 78, 163 },
	{ 255, 127, 0 }, { 255, 255, 51 }, { 166, 86, 40 }, { 247, 129, 191 }, { 153, 153, 153 }
};

void pr_legend_free(pr_legend *l)
{
	free(l->name);
	free(l->rgb);
	memset(l, 0, sizeof *l);
}

/* "VALUE R G B [NAME]" of line `ln` into l; at[v], the line that gave
 * class v (0: none yet); 0 or -1 with err */
static int parse_line(pr_legend *l, int *at, char *s, const char *path, int ln, char *err,
                      size_t cap)
{
	long v[4];
	char *end, why[128];

	for (int i = 0; i < 4; i++) {
		errno = 0;
		v[i] = strtol(s, &end, 10);
		if (end == s || errno || (*end && !isspace((unsigned char)*end)) ||
		    v[i] < 0 || v[i] > (i ? 255 : 254))
			return pr_fail(err, cap, "'%s' line %d: want VALUE R G B [NAME] with VALUE "
			               "0..254 and R G B 0..255", path, ln);
		s = end;
	}
	if (v[0] >= l->k)
		return pr_fail(err, cap, "'%s' line %d: class %ld, but the model has %d classes",
		               path, ln, v[0], l->k);
	/* a second line for a class is a slip (a copied line whose value was
	 * not changed): the last one winning would hide it */
	if (at[v[0]])
		return pr_fail(err, cap, "'%s' line %d: class %ld again (line %d gave it)", path,
		               ln, v[0], at[v[0]]);
	at[v[0]] = ln;
	while (isspace((unsigned char)*s))
		s++;
	for (end = s + strlen(s); end > s && isspace((unsigned char)end[-1]);)
		*--end = '\0';
	if (*s && !cdp_ckpt_class_name_ok(s, why, sizeof why))
		return pr_fail(err, cap, "'%s' line %d: the name %s", path, ln, why);
	for (int c = 0; c < 3; c++)
		l->rgb[v[0]][c] = (uint8_t)v[c + 1];
	if (*s)
		snprintf(l->name[v[0]], PR_NAME_MAX, "%s", s);
	return 0;
}

int pr_legend_make(pr_legend *l, int k, const cdp_ckpt *ck, const char *colors, char *err,
                   size_t cap)
{
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	FILE *f = NULL;
	int ln = 0, rc = 0, *at;

	memset(l, 0, sizeof *l);
	l->k = k;
	l->name = calloc((size_t)k, sizeof *l->name);
	l->rgb = calloc((size_t)k, sizeof *l->rgb);
	if (!l->name || !l->rgb) {
		pr_legend_free(l);
		return pr_fail(err, cap, "out of memory");
	}
	for (int c = 0; c < k; c++) {
		uint32_t h = (uint32_t)c * 2654435761u;
		snprintf(l->name[c], PR_NAME_MAX, "class %d", c);
		for (int j = 0; j < 3; j++)
			l->rgb[c][j] = c < 10 ? palette[c][j] : (uint8_t)(40 + (h >> (8 * j)) % 200);
	}
	/* cdp_ckpt_to_net held the names to the model's classes */
	for (int c = 0; ck && ck->class_names && c < ck->nclass_names && c < k; c++)
		snprintf(l->name[c], PR_NAME_MAX, "%s", ck->class_names[c]);
	if (!colors)
		return 0;
	if (!(at = calloc((size_t)k, sizeof *at))) {
		pr_legend_free(l);
		return pr_fail(err, cap, "out of memory");
	}
	if (!(f = fopen(colors, "r"))) {
		free(at);
		pr_legend_free(l);
		return pr_fail(err, cap, "cannot open '%s': %s", colors, strerror(errno));
	}
	cdp_file_skip_bom(f);      /* an editor's mark is no part of the first name */
	while (rc == 0 && (len = getline(&line, &lcap, f)) >= 0) {
		char *s = line;
		size_t bad;
		ln++;
		/* a NUL or an escape would end or garble the name in every table
		 * and terminal that shows it; tabs and line ends only separate */
		for (bad = 0; bad < (size_t)len; bad++)
			if (((unsigned char)line[bad] < 0x20 && line[bad] != '\t' && line[bad] != '\r' &&
			     line[bad] != '\n') || line[bad] == 0x7f)
				break;
		if (bad < (size_t)len)
			rc = pr_fail(err, cap, "'%s' line %d: control character 0x%02x at byte %zu",
			             colors, ln, (unsigned char)line[bad], bad + 1);
		else if (len - (line[len - 1] == '\n') > PR_COLORS_LINE_MAX)
			rc = pr_fail(err, cap, "'%s' line %d: longer than %d bytes", colors, ln,
			             PR_COLORS_LINE_MAX);
		while (isspace((unsigned char)*s))
			s++;
		if (rc == 0 && *s && *s != '#')
			rc = parse_line(l, at, s, colors, ln, err, cap);
	}
	if (rc == 0 && ferror(f))
		rc = pr_fail(err, cap, "cannot read '%s': %s", colors, strerror(errno));
	free(line);
	free(at);
	fclose(f);
	if (rc)
		pr_legend_free(l);
	return rc;
}
