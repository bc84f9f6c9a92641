# CDP_CHECK_PNG: libpng, required: preview images and label masks
# (lib/cdp_png.c). Sets PNG_CFLAGS and PNG_LIBS.
AC_DEFUN([CDP_CHECK_PNG], [CDP_REQUIRE_PKG([PNG], [libpng], [>= 1.6], [libpng], [libpng-dev])])
