# tools/train/: cdp-train. Its library holds the loader of the central pool
# (loader*.c) and the training loop (train*.c), which the tests
# and benchmarks link; main.c is the command line over cdp_train_run.
# Built with MPI (HAVE_MPI).
if HAVE_MPI
noinst_LIBRARIES += tools/train/libcdptrain.a
bin_PROGRAMS += cdp-train
dist_man_MANS += man/cdp-train.1
else
EXTRA_DIST += man/cdp-train.1
endif
TRAIN_CPPFLAGS = $(DIST_CPPFLAGS) -I$(top_srcdir)/tools/train $(PNG_CFLAGS)
tools_train_libcdptrain_a_CPPFLAGS = $(TRAIN_CPPFLAGS)
tools_train_libcdptrain_a_SOURCES = \
	tools/train/loader.h tools/train/loader_int.h tools/train/loader.c tools/train/loader_open.c \
	tools/train/loader_sample.c tools/train/loader_conv.c tools/train/loader_sources.c \
	tools/train/train.h tools/train/train_int.h \
	tools/train/train.c tools/train/train_setup.c tools/train/train_init.c \
	tools/train/train_agree.c tools/train/train_sync.c \
	tools/train/train_eval.c tools/train/train_log.c tools/train/train_std.c \
	tools/train/train_weights.c tools/train/train_rundir.c tools/train/train_trace.h tools/train/train_trace.c
TRAIN_LIBS = tools/train/libcdptrain.a $(PLOT_LIBS) $(DIST_LIBS)

cdp_train_SOURCES = tools/train/main.c
cdp_train_CPPFLAGS = $(TRAIN_CPPFLAGS)
cdp_train_LDADD = $(TRAIN_LIBS)
