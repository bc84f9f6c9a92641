/* test_labelmap.c: label maps (cdp_labelmap.h, man/cdp-labelmap.5): both
 * forms, names, every refusal with the line or item it must report, the
 * limits, and loading from a file. */
#include "tap.h"
#include "cdp_error.h"
#include "cdp_labelmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses text as a file; returns its code, leaving where and why. */
static size_t where;
static char why[256];

static int file(const char *text, cdp_labelmap *m)
{
	why[0] = '\0';
	return cdp_labelmap_parse(text, strlen(text), m, &where, why, sizeof why);
}

static int bad_file(const char *text)
{
	cdp_labelmap m;
	int rc = file(text, &m);

	CHECK(m.id == NULL && m.names == NULL, "a refused map is left empty");
	return rc;
}

static int bad_inline(const char *spec)
{
	cdp_labelmap m;
	int rc;

	why[0] = '\0';
	rc = cdp_labelmap_parse_inline(spec, &m, &where, why, sizeof why);
	CHECK(m.id == NULL, "a refused map is left empty");
	return rc;
}

int main(void)
{
	cdp_labelmap m;
	char path[] = "/tmp/test_labelmapXXXXXX";
	char *big;
	int fd;

	/* inline */
	CHECK_RC(cdp_labelmap_parse_inline("10:0,20:1, 30:2 ,40:1", &m, &where, why, sizeof why),
	         CDP_OK);
	CHECK(m.nvalues == 4 && m.max_id == 2 && m.names == NULL, "inline: %zu values", m.nvalues);
	CHECK(m.id[10] == 0 && m.id[20] == 1 && m.id[30] == 2 && m.id[40] == 1, "inline ids");
	CHECK(m.id[0] == CDP_LABELMAP_NONE && m.id[65535] == CDP_LABELMAP_NONE, "absent values");
	cdp_labelmap_free(&m);
	CHECK_RC(cdp_labelmap_parse_inline("65535:65534", &m, &where, why, sizeof why), CDP_OK);
	CHECK(m.id[65535] == 65534, "the largest value and id");
	cdp_labelmap_free(&m);
	CHECK_RC(bad_inline("1:0,65536:1"), CDP_ERANGE);
	CHECK(where == 2 && strstr(why, "above 65535"), "item %zu: %s", where, why);
	CHECK_RC(bad_inline("1:65535"), CDP_ERANGE);
	CHECK(where == 1 && strstr(why, "above 65534"), "item %zu: %s", where, why);
	CHECK_RC(bad_inline("1:0,2:1,1:2"), CDP_EDUPKEY);
	CHECK(where == 3 && strcmp(why, "value 1 is given twice (first at 1)") == 0, "%zu: %s",
	      where, why);
	CHECK_RC(bad_inline("1:0,"), CDP_ESYNTAX);
	CHECK(where == 2, "a trailing comma: item %zu", where);
	CHECK_RC(bad_inline("1-0"), CDP_ESYNTAX);
	CHECK_RC(bad_inline(""), CDP_ESYNTAX);
	CHECK_RC(bad_inline("+1:0"), CDP_ESYNTAX);
	CHECK_RC(bad_inline("0000001:0"), CDP_ERANGE);
	/* 7 digits are refused for their length, whatever their value */
	CHECK(where == 1 && strcmp(why, "a value of more than 6 digits") == 0, "%zu: %s", where, why);
	CHECK_RC(bad_inline("1:0000002"), CDP_ERANGE);
	CHECK(strcmp(why, "an id of more than 6 digits") == 0, "%s", why);
	CHECK_RC(cdp_labelmap_parse_inline("065535:065534", &m, &where, why, sizeof why), CDP_OK);
	cdp_labelmap_free(&m);
	CHECK(cdp_labelmap_is_inline("10:0, 20:1") && !cdp_labelmap_is_inline("map.txt") &&
	      !cdp_labelmap_is_inline("") && !cdp_labelmap_is_inline("./10"), "is_inline");

	/* files */
	CHECK_RC(file("# codes\n\n10 0 tree cover\n20\t1 water  \n30 1 water\r\n40 0\n", &m),
	         CDP_OK);
	CHECK(m.nvalues == 4 && m.max_id == 1 && m.names, "file: %zu values", m.nvalues);
	CHECK(m.names && strcmp(m.names[0], "tree cover") == 0 && strcmp(m.names[1], "water") == 0,
	      "names trimmed");
	CHECK(m.id[40] == 0 && m.id[30] == 1, "file ids");
	cdp_labelmap_free(&m);
	CHECK_RC(file("1 0\n2 1", &m), CDP_OK);
	CHECK(m.names == NULL && m.nvalues == 2, "no final newline, no names");
	cdp_labelmap_free(&m);
	CHECK_RC(bad_file("1 0 a\n\n1 1 b\n"), CDP_EDUPKEY);
	CHECK(where == 3 && strcmp(why, "value 1 is given twice (first at 1)") == 0, "%zu: %s",
	      where, why);
	CHECK_RC(bad_file("1 0 a\n2 0 b\n"), CDP_EFORMAT);
	CHECK(where == 2 && strcmp(why, "id 0 is named both 'a' and 'b'") == 0, "%zu: %s", where,
	      why);
	CHECK_RC(bad_file("1 0 a\n2 2 c\n"), CDP_EFORMAT);
	CHECK(where == 0 && strcmp(why, "names some ids but not id 1") == 0, "%zu: %s", where, why);
	CHECK_RC(bad_file("# only a comment\n"), CDP_EFORMAT);
	CHECK(strcmp(why, "maps no value") == 0, "%s", why);
	CHECK_RC(bad_file(""), CDP_EFORMAT);
	CHECK_RC(bad_file("1 0\n2\n"), CDP_ESYNTAX);
	CHECK(where == 2, "a missing id: line %zu", where);
	CHECK_RC(bad_file("1 0\n2 1x\n"), CDP_ESYNTAX);
	CHECK(where == 2, "1x: line %zu", where);
	CHECK_RC(bad_file("1:0\n"), CDP_ESYNTAX);
	CHECK_RC(bad_file("-1 0\n"), CDP_ESYNTAX);
	CHECK_RC(bad_file("65536 0\n"), CDP_ERANGE);
	CHECK(strcmp(why, "a value above 65535") == 0, "%s", why);
	CHECK_RC(bad_file("0000010 1\n"), CDP_ERANGE);
	CHECK(where == 1 && strcmp(why, "a value of more than 6 digits") == 0, "%zu: %s", where, why);
	CHECK_RC(bad_file("10 0000001\n"), CDP_ERANGE);
	CHECK(strcmp(why, "an id of more than 6 digits") == 0, "%s", why);
	CHECK_RC(bad_file("1 65535\n"), CDP_ERANGE);
	CHECK_RC(bad_file("1 0 a\tb\n"), CDP_ESYNTAX);
	CHECK(strstr(why, "the name of id 0") != NULL, "a control character: %s", why);
	CHECK_RC(cdp_labelmap_parse("1 0\n\0002 1\n", 8, &m, &where, why, sizeof why),
	         CDP_ESYNTAX);
	CHECK(where == 2 && strcmp(why, "has a NUL byte") == 0, "%zu: %s", where, why);
	/* limits: a line over CDP_LABELMAP_MAXLINE bytes, a file over the
	 * maximum (checked before anything is read) */
	big = malloc(CDP_LABELMAP_MAXLINE + 16);
	memcpy(big, "1 0 ", 4);
	memset(big + 4, 'x', CDP_LABELMAP_MAXLINE);
	big[CDP_LABELMAP_MAXLINE + 4] = '\0';
	CHECK_RC(bad_file(big), CDP_ERANGE);
	CHECK(where == 1, "a long line: line %zu", where);
	big[CDP_LABELMAP_MAXLINE] = '\0';
	CHECK_RC(file(big, &m), CDP_ESYNTAX);   /* a 4096-byte line is fine, its name not */
	CHECK(strstr(why, "the name of id 0") != NULL, "a name over 255 bytes: %s", why);
	free(big);
	CHECK_RC(cdp_labelmap_parse("", (size_t)CDP_LABELMAP_MAXFILE + 1, &m, &where, why,
	                            sizeof why), CDP_ERANGE);

	/* load */
	fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	CHECK(write(fd, "5 1 five\n4 0 four\n", 18) == 18, "write");
	close(fd);
	CHECK_RC(cdp_labelmap_load(path, &m, &where, why, sizeof why), CDP_OK);
	CHECK(m.names && strcmp(m.names[1], "five") == 0 && m.id[4] == 0, "loaded");
	cdp_labelmap_free(&m);
	/* a UTF-8 byte order mark an editor wrote before the first line */
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, "\xef\xbb\xbf" "5 1 five\n4 0 four\n", 21) == 21, "write");
	close(fd);
	CHECK_RC(cdp_labelmap_load(path, &m, &where, why, sizeof why), CDP_OK);
	CHECK(m.names && strcmp(m.names[1], "five") == 0 && m.id[5] == 1, "loaded past a BOM: %s",
	      why);
	cdp_labelmap_free(&m);
	unlink(path);
	CHECK_RC(cdp_labelmap_load(path, &m, &where, why, sizeof why), ENOENT);
	return tap_done();
}
