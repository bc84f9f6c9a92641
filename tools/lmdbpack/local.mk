bin_PROGRAMS += cdp-lmdbpack
cdp_lmdbpack_SOURCES = tools/lmdbpack/main.c tools/lmdbpack/pack.c tools/lmdbpack/pack.h \
	tools/lmdbpack/pack_int.h tools/lmdbpack/meta.c tools/lmdbpack/list.c \
	tools/lmdbpack/folders.c
cdp_lmdbpack_CPPFLAGS = $(AM_CPPFLAGS) $(LMDB_CFLAGS)
cdp_lmdbpack_LDADD = $(RASTER_LIBS) $(CDP_LIBS)
dist_man_MANS += man/cdp-lmdbpack.1 man/cdp-pool.5
