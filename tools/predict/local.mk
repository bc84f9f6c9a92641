bin_PROGRAMS += cdp-predict
cdp_predict_SOURCES = tools/predict/main.c tools/predict/predict.c tools/predict/predict.h \
	tools/predict/predict_setup.c tools/predict/predict_out.c tools/predict/predict_int.h
cdp_predict_CPPFLAGS = $(DIST_CPPFLAGS) $(GDAL_CFLAGS) $(PNG_CFLAGS)
cdp_predict_LDADD = $(RASTER_LIBS) $(DIST_LIBS)
dist_man_MANS += man/cdp-predict.1
