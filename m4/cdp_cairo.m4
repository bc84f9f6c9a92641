# CDP_CHECK_CAIRO: cairo, required: the plots (lib/cdp_plot.c: cdp-train's
# loss.png, cdp-evaluate --png) need text, which cairo renders with a real
# font and writes as PNG itself. Sets CAIRO_CFLAGS and CAIRO_LIBS.
AC_DEFUN([CDP_CHECK_CAIRO], [CDP_REQUIRE_PKG([CAIRO], [cairo], [>= 1.14], [cairo], [libcairo2-dev])])
