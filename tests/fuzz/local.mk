# tests/fuzz/: libFuzzer harnesses (--enable-fuzz, CC=clang); doc/FUZZING.md
# says how to run them. Each harness's body is a header shared with a
# regression test that replays its corpus on every build: fuzz_record with
# tests/unit/test_fuzz_regress (corpus/), the others with test_fuzz_NAME
# (tests/fuzz/NAME/) in tests/unit, tests/engine and tests/dist.
FUZZ_SAN = -fsanitize=fuzzer,address,undefined
if ENABLE_FUZZ
noinst_PROGRAMS += tests/fuzz/fuzz_record tests/fuzz/fuzz_ptrfile tests/fuzz/fuzz_meta \
	tests/fuzz/fuzz_rdv tests/fuzz/fuzz_labelmap
# The decoders' sources are compiled into the harnesses themselves, so they
# get the fuzzer's coverage instrumentation (the libraries do not); the
# libraries supply the rest.
tests_fuzz_fuzz_record_SOURCES = tests/fuzz/fuzz_record.c tests/fuzz/fuzz_record_body.h \
	lib/cdp_record.c lib/cdp_crc32.c lib/cdp_stream.c lib/cdp_num.c lib/cdp_dtype.c
tests_fuzz_fuzz_record_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_record_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_record_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_record_LDADD = $(CDP_LIBS)
tests_fuzz_fuzz_ptrfile_SOURCES = tests/fuzz/fuzz_ptrfile.c tests/fuzz/fuzz_ptrfile_body.h \
	lib/cdp_ptrfile.c
tests_fuzz_fuzz_ptrfile_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_ptrfile_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_ptrfile_LDADD = $(CDP_LIBS)
tests_fuzz_fuzz_labelmap_SOURCES = tests/fuzz/fuzz_labelmap.c tests/fuzz/fuzz_labelmap_body.h \
	lib/cdp_labelmap.c
tests_fuzz_fuzz_labelmap_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_labelmap_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_labelmap_LDADD = $(CDP_LIBS)
tests_fuzz_fuzz_meta_SOURCES = tests/fuzz/fuzz_meta.c tests/fuzz/fuzz_meta_body.h \
	lib/cdp_pool.c lib/cdp_stats.c lib/cdp_stats_text.c lib/cdp_classes.c lib/cdp_stream.c
tests_fuzz_fuzz_meta_CPPFLAGS = $(AM_CPPFLAGS) $(LMDB_CFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_meta_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_meta_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_meta_LDADD = $(CDP_LIBS)
# dist_rdv.c is plain C (no MPI), so this one needs no HAVE_MPI.
tests_fuzz_fuzz_rdv_SOURCES = tests/fuzz/fuzz_rdv.c tests/fuzz/fuzz_rdv_body.h \
	engine/dist/dist_rdv.c
tests_fuzz_fuzz_rdv_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/engine
tests_fuzz_fuzz_rdv_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_rdv_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_rdv_LDADD = $(CDP_LIBS)
if HAVE_OPENBLAS
noinst_PROGRAMS += tests/fuzz/fuzz_ckpt tests/fuzz/fuzz_cfg
endif
tests_fuzz_fuzz_ckpt_SOURCES = tests/fuzz/fuzz_ckpt.c tests/fuzz/fuzz_ckpt_body.h \
	engine/ckpt/checkpoint.c engine/ckpt/checkpoint_read.c engine/ckpt/checkpoint_rank.c
tests_fuzz_fuzz_ckpt_CPPFLAGS = $(ENGINE_CPPFLAGS)
tests_fuzz_fuzz_ckpt_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_ckpt_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_ckpt_LDADD = $(ENGINE_LIBS)
tests_fuzz_fuzz_cfg_SOURCES = tests/fuzz/fuzz_cfg.c tests/fuzz/fuzz_cfg_body.h \
	engine/cfg/cfg.c engine/cfg/cfg_expr.c engine/cfg/cfg_opt.c engine/cfg/cfg_read.c \
	engine/net.c
tests_fuzz_fuzz_cfg_CPPFLAGS = $(ENGINE_CPPFLAGS)
tests_fuzz_fuzz_cfg_CFLAGS = $(AM_CFLAGS) $(FUZZ_SAN)
tests_fuzz_fuzz_cfg_LDFLAGS = $(FUZZ_SAN)
tests_fuzz_fuzz_cfg_LDADD = $(ENGINE_LIBS)
endif
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/ptrfile tests/fuzz/meta tests/fuzz/rdv tests/fuzz/labelmap \
	tests/fuzz/ckpt tests/fuzz/cfg tests/fuzz/fuzz_replay.h
