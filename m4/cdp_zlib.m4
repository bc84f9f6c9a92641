# CDP_CHECK_ZLIB: zlib, required: record compression and crc32
# (lib/cdp_record.c, lib/cdp_crc32.c). Sets ZLIB_CFLAGS and ZLIB_LIBS.
AC_DEFUN([CDP_CHECK_ZLIB], [CDP_REQUIRE_PKG([ZLIB], [zlib], [], [zlib], [zlib1g-dev])])
