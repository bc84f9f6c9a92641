/* fuzz_labelmap_body.h: the fuzz target for label map files
 * (cdp_labelmap.h, man/cdp-labelmap.5).
 *
 * Shared by the libFuzzer harness (fuzz_labelmap.c) and the corpus replay
 * (tests/unit/test_fuzz_labelmap.c). The input is a whole map file, parsed
 * from memory (cdp_labelmap_parse); abort() marks a broken invariant:
 *   - an accepted map holds at least one value, every id at most max_id
 *     (<= CDP_LABELMAP_MAXID) and max_id reached, nvalues entries; its
 *     names, when any, name every id 0..max_id with a non-empty name;
 *     written again as "VALUE ID NAME" lines it parses to the same table
 *     and names;
 *   - a refusal leaves the map empty and names a line within the input
 *     (0 for the whole file) with a reason;
 *   - the input as an inline map (a NUL-free prefix) is refused or accepted
 *     likewise, without names.
 */
#ifndef CDP_FUZZ_LABELMAP_BODY_H
#define CDP_FUZZ_LABELMAP_BODY_H

#include "cdp_error.h"
#include "cdp_labelmap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cdp_fuzz_labelmap_check(const cdp_labelmap *m)
{
	size_t n = 0;
	int reached = 0;

	if (!m->id || m->nvalues == 0 || m->max_id > CDP_LABELMAP_MAXID)
		abort();
	for (size_t v = 0; v < CDP_LABELMAP_NVALUES; v++) {
		if (m->id[v] == CDP_LABELMAP_NONE)
			continue;
		if (m->id[v] < 0 || (uint32_t)m->id[v] > m->max_id)
			abort();
		reached |= (uint32_t)m->id[v] == m->max_id;
		n++;
	}
	if (n != m->nvalues || !reached)
		abort();
	for (uint32_t k = 0; m->names && k <= m->max_id; k++)
		if (!m->names[k] || !m->names[k][0])
			abort();
}

static int cdp_fuzz_labelmap_one(const uint8_t *p, size_t n)
{
	cdp_labelmap m, again;
	size_t where, lines = 1;
	char why[256] = "", *text, *spec;
	size_t len = 0, cap;
	int rc = cdp_labelmap_parse(p, n, &m, &where, why, sizeof why);

	for (size_t i = 0; i < n; i++)
		lines += p[i] == '\n';
	if (rc != CDP_OK) {
		if (m.id || m.names || where > lines || (rc != CDP_ENOMEM && !why[0]))
			abort();
	} else {
		cdp_fuzz_labelmap_check(&m);
		cap = CDP_LABELMAP_NVALUES * 16;
		for (size_t v = 0; v < CDP_LABELMAP_NVALUES; v++)
			if (m.id[v] != CDP_LABELMAP_NONE && m.names)
				cap += strlen(m.names[m.id[v]]) + 1;
		if (!(text = malloc(cap)))
			abort();
		for (size_t v = 0; v < CDP_LABELMAP_NVALUES; v++)
			if (m.id[v] != CDP_LABELMAP_NONE)
				len += (size_t)snprintf(text + len, cap - len, "%zu %d%s%s\n", v,
				                        (int)m.id[v], m.names ? " " : "",
				                        m.names ? m.names[m.id[v]] : "");
		if (cdp_labelmap_parse(text, len, &again, NULL, NULL, 0) != CDP_OK ||
		    again.nvalues != m.nvalues || again.max_id != m.max_id ||
		    memcmp(again.id, m.id, sizeof *m.id * CDP_LABELMAP_NVALUES) ||
		    !again.names != !m.names)
			abort();
		for (uint32_t k = 0; m.names && k <= m.max_id; k++)
			if (strcmp(again.names[k], m.names[k]))
				abort();
		free(text);
		cdp_labelmap_free(&again);
		cdp_labelmap_free(&m);
	}
	/* the same bytes as an inline map */
	if (!(spec = malloc(n + 1)))
		abort();
	memcpy(spec, p, n);
	spec[n] = '\0';
	if (cdp_labelmap_parse_inline(spec, &m, &where, why, sizeof why) == CDP_OK) {
		cdp_fuzz_labelmap_check(&m);
		if (m.names)
			abort();
		cdp_labelmap_free(&m);
	} else if (m.id || where == 0) {
		abort();
	}
	free(spec);
	return rc;
}

#endif
