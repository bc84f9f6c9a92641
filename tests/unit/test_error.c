/* test_error.c: cdp_strerror() covers all three ranges of codes.
 *
 * Tools print "prog: cannot do 'x': PHRASE", so every code needs its own
 * non-empty phrase: lowercase for our codes, no full stop, and the system's or
 * LMDB's own text for errno and LMDB codes.
 */
#include "cdp_error.h"
#include "tap.h"

#include <errno.h>
#include <lmdb.h>
#include <string.h>

int main(void)
{
	const char *seen[CDP_EINVAL - CDP_EKEEP + 1];
	int n = 0;

	for (int rc = CDP_EINVAL; rc >= CDP_EKEEP; rc--) {
		const char *s = cdp_strerror(rc);
		size_t len;

		CHECK(s != NULL, "code %d has no phrase", rc);
		if (!s)
			continue;
		len = strlen(s);
		CHECK(len > 0, "code %d: empty phrase", rc);
		CHECK(strcmp(s, "unknown error") != 0, "code %d is unknown", rc);
		CHECK(len > 0 && s[0] >= 'a' && s[0] <= 'z',
		      "code %d: \"%s\" does not start lowercase", rc, s);
		CHECK(len > 0 && s[len - 1] != '.', "code %d: \"%s\" ends in '.'",
		      rc, s);
		for (int j = 0; j < n; j++)
			CHECK(strcmp(seen[j], s) != 0, "codes share \"%s\"", s);
		seen[n++] = s;
	}
	CHECK(strcmp(cdp_strerror(CDP_ECRC), "checksum mismatch") == 0,
	      "CDP_ECRC: \"%s\"", cdp_strerror(CDP_ECRC));
	CHECK(strcmp(cdp_strerror(CDP_OK), "success") == 0, "CDP_OK");

	/* errno values pass through to strerror(). */
	CHECK(strcmp(cdp_strerror(ENOENT), strerror(ENOENT)) == 0, "ENOENT");
	CHECK(strcmp(cdp_strerror(ENOSPC), strerror(ENOSPC)) == 0, "ENOSPC");

	/* LMDB codes, both ends of the range, go to mdb_strerror(). */
	CHECK(strcmp(cdp_strerror(MDB_KEYEXIST), mdb_strerror(MDB_KEYEXIST)) == 0,
	      "MDB_KEYEXIST: \"%s\"", cdp_strerror(MDB_KEYEXIST));
	CHECK(strcmp(cdp_strerror(MDB_MAP_FULL), mdb_strerror(MDB_MAP_FULL)) == 0,
	      "MDB_MAP_FULL");
	CHECK(strcmp(cdp_strerror(MDB_LAST_ERRCODE),
	             mdb_strerror(MDB_LAST_ERRCODE)) == 0, "MDB_LAST_ERRCODE");
	CHECK(strstr(cdp_strerror(MDB_MAP_FULL), "MDB_MAP_FULL") != NULL,
	      "MDB_MAP_FULL text: \"%s\"", cdp_strerror(MDB_MAP_FULL));

	/* Codes in no range still give something printable. */
	CHECK(strcmp(cdp_strerror(-1), "unknown error") == 0, "-1");
	CHECK(strcmp(cdp_strerror(CDP_EKEEP - 1), "unknown error") == 0,
	      "below the last code");
	CHECK(strcmp(cdp_strerror(MDB_KEYEXIST - 1), "unknown error") == 0,
	      "below LMDB's range");
	return tap_done();
}
