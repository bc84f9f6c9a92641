bin_PROGRAMS += cdp-tile
cdp_tile_SOURCES = tools/tile/main.c tools/tile/tile.c tools/tile/tile.h tools/tile/tile_out.c tools/tile/tile_int.h
cdp_tile_LDADD = $(RASTER_LIBS) $(CDP_LIBS)
dist_man_MANS += man/cdp-tile.1 man/cdp-record.5 man/cdp-labelmap.5
