/* cdp_error.h: the error codes every lib/ function returns.
 *
 * lib/ never prints and never exits. Each function returns 0 (CDP_OK) or one
 * of the codes below; cdp_strerror() turns a code into a short lowercase
 * phrase for the tool's "prog: cannot do 'x': phrase" message. Positive codes
 * are errno values passed through unchanged (ENOENT, ENOSPC, ...), so callers
 * can report system failures precisely. LMDB's own codes (MDB_KEYEXIST ..
 * MDB_LAST_ERRCODE, -30799..-30780) also pass through unchanged, and
 * cdp_strerror() gives mdb_strerror() for them.
 */
#ifndef CDP_ERROR_H
#define CDP_ERROR_H

#include <stddef.h>

enum {
	CDP_OK = 0,
	/* negative: our own codes; positive: errno */
	CDP_EINVAL   = -1000, /* invalid argument (a programming error) */
	CDP_ENOMEM   = -1001, /* allocation failed */
	CDP_ERANGE   = -1002, /* number out of range */
	CDP_ESYNTAX  = -1003, /* text not in the expected syntax */
	CDP_EMAGIC   = -1004, /* bad magic number: not our format */
	CDP_EVERSION = -1005, /* unsupported format version */
	CDP_ETRUNC   = -1006, /* data shorter than its header says */
	CDP_ECRC     = -1007, /* checksum mismatch */
	CDP_EFORMAT  = -1008, /* inconsistent or invalid field */
	CDP_EOVERFLOW= -1009, /* a size computation overflowed */
	CDP_EZLIB    = -1010, /* zlib failed or data did not inflate to its size */
	CDP_ELMDB    = -1011, /* an LMDB invariant failed (missing sub-database) */
	CDP_EKEY     = -1012, /* invalid key */
	CDP_EDUPKEY  = -1013, /* key already present */
	CDP_ESHAPE   = -1014, /* shape, dtype or band count differs */
	CDP_EEOF     = -1015, /* clean end of input */
	CDP_ETTY     = -1016, /* refused to write binary data to a terminal */
	CDP_EGDAL    = -1017, /* a GDAL call failed (details via CPLGetLastErrorMsg) */
	CDP_EUNSUP   = -1018, /* valid but unsupported (e.g. a data type) */
	CDP_EMISMATCH= -1019, /* two things that must agree do not (DB uuid, label size) */
	CDP_ECANCEL  = -1020, /* cancelled by the caller */
	CDP_ESPECIAL = -1021, /* an output that is a FIFO, device, socket or directory (cdp_out.h) */
	CDP_EKEEP    = -1022  /* an output that would replace a checkpoint or an LMDB database (cdp_out.h) */
};

/* Returns a static, lowercase phrase for rc (never NULL). For rc > 0 it is
 * strerror(rc). */
const char *cdp_strerror(int rc);

/* Rewrites the message msg[cap] (NUL-terminated) in place so that no
 * control byte of file text it quotes reaches a terminal: a tab, CR or LF
 * becomes \t, \r or \n, any other byte below 0x20 and DEL \xHH. A CR
 * would return the cursor and hide what came before it ("tiles=9\r is
 * not a number" showed " is not a number"), an LF split the one-line
 * message. Cut at cap - 1 bytes, never inside an escape. */
void cdp_msg_escape(char *msg, size_t cap);

#endif
