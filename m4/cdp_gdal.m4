# CDP_CHECK_GDAL: GDAL, required: cdp-tile and cdp-lmdbpack read rasters
# through it (lib/libcdpraster.a). Sets GDAL_CFLAGS and GDAL_LIBS.
AC_DEFUN([CDP_CHECK_GDAL], [CDP_REQUIRE_PKG([GDAL], [gdal], [>= 3.0], [GDAL], [libgdal-dev])])
