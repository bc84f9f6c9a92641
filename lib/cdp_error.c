/* cdp_error.c: phrases for the codes of cdp_error.h.
 *
 * Three ranges: our own negative codes (a table), LMDB's codes (given to
 * mdb_strerror(), which knows them), and positive errno values (strerror()).
 * Anything else gets a fixed "unknown error" phrase so that callers can always
 * print the result.
 */
#include "cdp_error.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by CDP_EINVAL - rc, so the order must follow the enum. */
static const char *const cdp_phrases[] = {
	"invalid argument",                     /* CDP_EINVAL */
	"out of memory",                        /* CDP_ENOMEM */
	"number out of range",                  /* CDP_ERANGE */
	"syntax error",                         /* CDP_ESYNTAX */
	"bad magic number (not a cdpool file)", /* CDP_EMAGIC */
	"unsupported format version",           /* CDP_EVERSION */
	"truncated data",                       /* CDP_ETRUNC */
	"checksum mismatch",                    /* CDP_ECRC */
	"invalid or inconsistent field",        /* CDP_EFORMAT */
	"size overflow",                        /* CDP_EOVERFLOW */
	"compressed data is corrupt",           /* CDP_EZLIB */
	"lmdb database is missing a part",      /* CDP_ELMDB */
	"invalid key",                          /* CDP_EKEY */
	"duplicate key",                        /* CDP_EDUPKEY */
	"shape, data type or band count differs", /* CDP_ESHAPE */
	"end of input",                         /* CDP_EEOF */
	"refusing to write binary data to a terminal", /* CDP_ETTY */
	"gdal error",                           /* CDP_EGDAL */
	"unsupported",                          /* CDP_EUNSUP */
	"mismatch",                             /* CDP_EMISMATCH */
	"cancelled",                            /* CDP_ECANCEL */
	"not a regular file",                   /* CDP_ESPECIAL */
	"a cdpool checkpoint or an LMDB database, which is not replaced", /* CDP_EKEEP */
};

const char *cdp_strerror(int rc)
{
	size_t n = sizeof cdp_phrases / sizeof cdp_phrases[0];

	if (rc == CDP_OK)
		return "success";
	if (rc > 0)
		return strerror(rc);
	if (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE)
		return mdb_strerror(rc);
	if (rc <= CDP_EINVAL && (size_t)(CDP_EINVAL - rc) < n)
		return cdp_phrases[CDP_EINVAL - rc];
	return "unknown error";
}

void cdp_msg_escape(char *msg, size_t cap)
{
	size_t n, extra = 0, i, o;
	char *src;

	if (!msg || cap == 0)
		return;
	n = strlen(msg);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)msg[i];
		if (c == '\t' || c == '\r' || c == '\n')
			extra += 1;
		else if (c < 0x20 || c == 0x7f)
			extra += 3;
	}
	if (extra == 0 || !(src = malloc(n + 1)))
		return;   /* without memory the message stays as it is */
	memcpy(src, msg, n + 1);
	for (i = o = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		char e[5];
		size_t k;

		if (c == '\t' || c == '\r' || c == '\n')
			k = (size_t)snprintf(e, sizeof e, "\\%c", c == '\t' ? 't' : c == '\r' ? 'r' : 'n');
		else if (c < 0x20 || c == 0x7f)
			k = (size_t)snprintf(e, sizeof e, "\\x%02x", c);
		else
			e[0] = (char)c, e[1] = '\0', k = 1;
		if (o + k > cap - 1)
			break;
		memcpy(msg + o, e, k);
		o += k;
	}
	msg[o] = '\0';
	free(src);
}
