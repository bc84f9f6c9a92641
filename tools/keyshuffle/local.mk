bin_PROGRAMS += cdp-keyshuffle
cdp_keyshuffle_SOURCES = tools/keyshuffle/main.c tools/keyshuffle/shuffle.c tools/keyshuffle/shuffle.h
cdp_keyshuffle_CPPFLAGS = $(AM_CPPFLAGS) $(LMDB_CFLAGS)
cdp_keyshuffle_LDADD = $(CDP_LIBS)
dist_man_MANS += man/cdp-keyshuffle.1 man/cdp-keys.5
