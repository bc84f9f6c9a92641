# cdp-evaluate needs only the formats and the metrics of lib/, not the engine.
bin_PROGRAMS += cdp-evaluate
cdp_evaluate_SOURCES = tools/evaluate/main.c tools/evaluate/evaluate.c tools/evaluate/evaluate.h \
	tools/evaluate/evaluate_csv.c tools/evaluate/evaluate_reg.c
cdp_evaluate_LDADD = $(RASTER_LIBS) $(PLOT_LIBS) $(CDP_LIBS)
dist_man_MANS += man/cdp-evaluate.1
