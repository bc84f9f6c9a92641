# tests/fuzz/: libFuzzer harnesses (--enable-fuzz, CC=clang); the corpus's
# findings replay in tests/unit/test_fuzz_regress on every build.
if ENABLE_FUZZ
noinst_PROGRAMS += tests/fuzz/fuzz_record
# The decoder's sources are compiled into the harness itself, so they get the
# fuzzer's coverage instrumentation (libcdp.a does not).
tests_fuzz_fuzz_record_SOURCES = tests/fuzz/fuzz_record.c tests/fuzz/fuzz_record_body.h \
	lib/cdp_record.c lib/cdp_crc32.c lib/cdp_stream.c lib/cdp_num.c lib/cdp_dtype.c
tests_fuzz_fuzz_record_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_record_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_record_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_record_LDADD = $(ZLIB_LIBS) -lm
endif
EXTRA_DIST += tests/fuzz/corpus
