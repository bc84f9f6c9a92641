# cdp-predict runs the engine on the ranks of engine/dist/: built with MPI.
if HAVE_MPI
bin_PROGRAMS += cdp-predict
dist_man_MANS += man/cdp-predict.1
else
EXTRA_DIST += man/cdp-predict.1
endif
cdp_predict_SOURCES = tools/predict/main.c tools/predict/predict.c tools/predict/predict.h \
	tools/predict/predict_setup.c tools/predict/predict_out.c tools/predict/predict_legend.c \
	tools/predict/predict_int.h tools/predict/predict_classify.c tools/predict/predict_tta.c
cdp_predict_CPPFLAGS = $(DIST_CPPFLAGS) $(GDAL_CFLAGS) $(PNG_CFLAGS)
cdp_predict_LDADD = $(RASTER_LIBS) $(DIST_LIBS)
