# CDP_CHECK_LMDB: LMDB, required: the central pool is an LMDB environment
# (lib/cdp_lmdb.c). Sets LMDB_CFLAGS and LMDB_LIBS.
AC_DEFUN([CDP_CHECK_LMDB], [CDP_REQUIRE_PKG([LMDB], [lmdb], [], [LMDB], [liblmdb-dev])])
