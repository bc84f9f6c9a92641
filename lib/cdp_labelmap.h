/* cdp_labelmap.h: label maps, the renumbering of label values into class
 * ids that cdp-tile's --label-map applies (man/cdp-labelmap.5).
 *
 * A map is given inline, "VALUE:ID[,VALUE:ID...]", or as a text file of
 * "VALUE ID [NAME]" lines (blank lines and lines starting with '#' are
 * skipped). VALUE is 0..65535 (a u8 or u16 label value) and appears once;
 * ID is 0..65534; several values may share an ID. When any line names its
 * ID, the map names every ID from 0 to the largest one (the pool's class
 * names are a dense list) and names an ID the same way on every line that
 * names it; a name is what cdp_class_name_ok accepts, without a leading or
 * trailing blank (the rest of the line after ID, blanks trimmed).
 * Limits: CDP_LABELMAP_MAXFILE bytes, CDP_LABELMAP_MAXLINE bytes a line,
 * no NUL byte.
 *
 * Errors: CDP_ESYNTAX (a malformed line or item), CDP_ERANGE (a number out
 * of range, a file or line too long), CDP_EDUPKEY (a value given twice),
 * CDP_EFORMAT (names that disagree or leave an ID unnamed, an empty map),
 * CDP_ENOMEM, or an errno from reading a file; where says the 1-based line
 * (file) or item (inline) at fault, 0 when none, and why (when not NULL)
 * a short reason ("value 10 is given twice (line 2)").
 */
#ifndef CDP_LABELMAP_H
#define CDP_LABELMAP_H

#include <stddef.h>
#include <stdint.h>

#define CDP_LABELMAP_MAXFILE (16u << 20)
#define CDP_LABELMAP_MAXLINE 4096
#define CDP_LABELMAP_NVALUES 65536
#define CDP_LABELMAP_MAXID   65534
#define CDP_LABELMAP_NONE    (-1)

typedef struct cdp_labelmap {
	int32_t *id;          /* [CDP_LABELMAP_NVALUES]: value -> id, or
	                         CDP_LABELMAP_NONE for a value absent */
	size_t nvalues;       /* values in the map, >= 1 */
	uint32_t max_id;      /* the largest id */
	char **names;         /* [max_id + 1] class names, or NULL without */
} cdp_labelmap;

/* "10:0,20:1,30:2" into m; where = the 1-based item at fault. */
int  cdp_labelmap_parse_inline(const char *spec, cdp_labelmap *m, size_t *where,
                               char *why, size_t cap);
/* A whole map file text[len] into m; where = the 1-based line at fault. */
int  cdp_labelmap_parse(const void *text, size_t len, cdp_labelmap *m, size_t *where,
                        char *why, size_t cap);
/* Reads and parses the file at path (CDP_ERANGE for one over
 * CDP_LABELMAP_MAXFILE bytes, an errno when it cannot be read). */
int  cdp_labelmap_load(const char *path, cdp_labelmap *m, size_t *where, char *why,
                       size_t cap);
/* 1 when arg is an inline map (only digits, ':', ',' and blanks), 0 when it
 * names a file. */
int  cdp_labelmap_is_inline(const char *arg);
void cdp_labelmap_free(cdp_labelmap *m);

#endif
