# tests/unit/: lib/ on its own (TAP programs, tap.h).
UNIT_LIB_TESTS = tests/unit/test_error tests/unit/test_num tests/unit/test_cli tests/unit/test_progress \
	tests/unit/test_rng tests/unit/test_key tests/unit/test_dtype \
	tests/unit/test_crc32 tests/unit/test_sha256 tests/unit/test_record tests/unit/test_stream tests/unit/test_stats \
	tests/unit/test_lmdb tests/unit/test_pool tests/unit/test_ptrfile \
	tests/unit/test_png tests/unit/test_fuzz_regress tests/unit/test_raster tests/unit/test_file \
	tests/unit/test_out tests/unit/test_labelmap tests/unit/test_label_vector tests/unit/test_plot
# the corpus replays of the fuzz harnesses (tests/fuzz/, doc/FUZZING.md)
UNIT_LIB_TESTS += tests/unit/test_fuzz_ptrfile tests/unit/test_fuzz_meta \
	tests/unit/test_fuzz_labelmap
UNIT_TESTS += $(UNIT_LIB_TESTS)
check_PROGRAMS += $(UNIT_LIB_TESTS)
UNIT_LDADD = $(CDP_LIBS)
UNIT_CPPFLAGS = $(AM_CPPFLAGS) $(LMDB_CFLAGS) -DCDP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_error_SOURCES = tests/unit/test_error.c tests/unit/tap.h
tests_unit_test_error_LDADD = $(UNIT_LDADD)
tests_unit_test_num_SOURCES = tests/unit/test_num.c tests/unit/tap.h
tests_unit_test_num_LDADD = $(UNIT_LDADD)
tests_unit_test_cli_SOURCES = tests/unit/test_cli.c tests/unit/tap.h
tests_unit_test_cli_LDADD = $(UNIT_LDADD)
tests_unit_test_progress_SOURCES = tests/unit/test_progress.c tests/unit/tap.h
tests_unit_test_progress_LDADD = $(UNIT_LDADD)
tests_unit_test_rng_SOURCES = tests/unit/test_rng.c tests/unit/tap.h
tests_unit_test_rng_LDADD = $(UNIT_LDADD)
tests_unit_test_key_SOURCES = tests/unit/test_key.c tests/unit/tap.h
tests_unit_test_key_LDADD = $(UNIT_LDADD)
tests_unit_test_dtype_SOURCES = tests/unit/test_dtype.c tests/unit/tap.h
tests_unit_test_dtype_LDADD = $(UNIT_LDADD)
tests_unit_test_record_SOURCES = tests/unit/test_record.c tests/unit/tap.h
tests_unit_test_record_LDADD = $(UNIT_LDADD)
tests_unit_test_stream_SOURCES = tests/unit/test_stream.c tests/unit/tap.h
tests_unit_test_stream_LDADD = $(UNIT_LDADD)
tests_unit_test_stats_SOURCES = tests/unit/test_stats.c tests/unit/tap.h
tests_unit_test_stats_LDADD = $(UNIT_LDADD)
tests_unit_test_file_SOURCES = tests/unit/test_file.c tests/unit/tap.h
tests_unit_test_file_LDADD = $(UNIT_LDADD)
tests_unit_test_out_SOURCES = tests/unit/test_out.c tests/unit/tap.h
tests_unit_test_out_LDADD = $(UNIT_LDADD) -lpthread
tests_unit_test_ptrfile_SOURCES = tests/unit/test_ptrfile.c tests/unit/tap.h
tests_unit_test_ptrfile_LDADD = $(UNIT_LDADD)
tests_unit_test_sha256_SOURCES = tests/unit/test_sha256.c tests/unit/tap.h
tests_unit_test_sha256_LDADD = $(UNIT_LDADD)
tests_unit_test_crc32_SOURCES = tests/unit/test_crc32.c tests/unit/tap.h
tests_unit_test_crc32_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_unit_test_crc32_LDADD = $(UNIT_LDADD)
tests_unit_test_lmdb_SOURCES = tests/unit/test_lmdb.c tests/unit/tap.h
tests_unit_test_lmdb_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_lmdb_LDADD = $(UNIT_LDADD)
tests_unit_test_pool_SOURCES = tests/unit/test_pool.c tests/unit/tap.h
tests_unit_test_pool_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_pool_LDADD = $(UNIT_LDADD)
tests_unit_test_plot_SOURCES = tests/unit/test_plot.c tests/unit/tap.h
tests_unit_test_plot_LDADD = $(PLOT_LIBS) $(UNIT_LDADD)
tests_unit_test_png_SOURCES = tests/unit/test_png.c tests/unit/tap.h
tests_unit_test_png_CPPFLAGS = $(AM_CPPFLAGS) $(PNG_CFLAGS)
tests_unit_test_png_LDADD = $(UNIT_LDADD)
tests_unit_test_fuzz_regress_SOURCES = tests/unit/test_fuzz_regress.c tests/fuzz/fuzz_record_body.h tests/unit/tap.h
tests_unit_test_fuzz_regress_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fuzz_regress_LDADD = $(UNIT_LDADD)
tests_unit_test_raster_SOURCES = tests/unit/test_raster.c tests/unit/tap.h
tests_unit_test_raster_CPPFLAGS = $(AM_CPPFLAGS) $(GDAL_CFLAGS)
tests_unit_test_raster_LDADD = $(RASTER_LIBS) $(UNIT_LDADD)
tests_unit_test_label_vector_SOURCES = tests/unit/test_label_vector.c tests/unit/tap.h
tests_unit_test_label_vector_LDADD = $(RASTER_LIBS) $(UNIT_LDADD)
tests_unit_test_fuzz_ptrfile_SOURCES = tests/unit/test_fuzz_ptrfile.c tests/fuzz/fuzz_ptrfile_body.h \
	tests/fuzz/fuzz_replay.h tests/unit/tap.h
tests_unit_test_fuzz_ptrfile_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fuzz_ptrfile_LDADD = $(UNIT_LDADD)
tests_unit_test_labelmap_SOURCES = tests/unit/test_labelmap.c tests/unit/tap.h
tests_unit_test_labelmap_LDADD = $(UNIT_LDADD)
tests_unit_test_fuzz_labelmap_SOURCES = tests/unit/test_fuzz_labelmap.c \
	tests/fuzz/fuzz_labelmap_body.h tests/fuzz/fuzz_replay.h tests/unit/tap.h
tests_unit_test_fuzz_labelmap_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fuzz_labelmap_LDADD = $(UNIT_LDADD)
tests_unit_test_fuzz_meta_SOURCES = tests/unit/test_fuzz_meta.c tests/fuzz/fuzz_meta_body.h \
	tests/fuzz/fuzz_replay.h tests/unit/tap.h
tests_unit_test_fuzz_meta_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fuzz_meta_LDADD = $(UNIT_LDADD)
