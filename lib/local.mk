# lib/: the on-disk formats and plain C shared by every tool (no MPI or
# CUDA). GDAL lives only in libcdpraster.a, cairo only in libcdpplot.a,
# each behind an opaque header.
noinst_LIBRARIES += lib/libcdp.a lib/libcdpraster.a lib/libcdpplot.a
lib_libcdp_a_CPPFLAGS = $(AM_CPPFLAGS) $(LMDB_CFLAGS) $(ZLIB_CFLAGS) $(PNG_CFLAGS)
lib_libcdp_a_SOURCES = \
	lib/cdp_error.c lib/cdp_error.h \
	lib/cdp_num.c lib/cdp_num.h \
	lib/cdp_cli.c lib/cdp_cli.h \
	lib/cdp_progress.c lib/cdp_progress.h \
	lib/cdp_rng.c lib/cdp_rng.h \
	lib/cdp_key.c lib/cdp_key.h \
	lib/cdp_dtype.c lib/cdp_dtype.h \
	lib/cdp_crc32.c lib/cdp_crc32.h \
	lib/cdp_sha256.c lib/cdp_sha256.h \
	lib/cdp_record.c lib/cdp_record.h \
	lib/cdp_stream.c lib/cdp_stream.h \
	lib/cdp_stats.c lib/cdp_stats_text.c lib/cdp_classes.c lib/cdp_stats.h lib/cdp_stats_int.h \
	lib/cdp_lmdb.c lib/cdp_lmdb.h \
	lib/cdp_pool.c lib/cdp_pool.h \
	lib/cdp_ptrfile.c lib/cdp_ptrfile.h \
	lib/cdp_png.c lib/cdp_png.h \
	lib/cdp_metrics.c lib/cdp_metrics.h \
	lib/cdp_file.c lib/cdp_file.h \
	lib/cdp_out.c lib/cdp_out.h \
	lib/cdp_labelmap.c lib/cdp_labelmap.h \
	lib/cdp_thread.c lib/cdp_thread.h
CDP_LIBS = lib/libcdp.a $(LMDB_LIBS) $(PNG_LIBS) $(ZLIB_LIBS) -lm

lib_libcdpraster_a_CPPFLAGS = $(AM_CPPFLAGS) $(GDAL_CFLAGS)
lib_libcdpraster_a_SOURCES = lib/cdp_raster.c lib/cdp_raster.h lib/cdp_raster_impl.h \
	lib/cdp_raster_write.c lib/cdp_raster_warp.c lib/cdp_label.c lib/cdp_label.h \
	lib/cdp_label_vector.c lib/cdp_label_vector_cli.c lib/cdp_label_vector.h
RASTER_LIBS = lib/libcdpraster.a $(GDAL_LIBS)

lib_libcdpplot_a_CPPFLAGS = $(AM_CPPFLAGS) $(CAIRO_CFLAGS)
lib_libcdpplot_a_SOURCES = lib/cdp_plot.c lib/cdp_plot.h
PLOT_LIBS = lib/libcdpplot.a $(CAIRO_LIBS)
