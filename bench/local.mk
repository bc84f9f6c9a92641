# bench/: ratios against a peer measured in the same run (bench/README).
# engine_bench with the engine, the others with MPI.
if HAVE_OPENBLAS
noinst_PROGRAMS += bench/engine_bench bench/conv_bench
endif
if HAVE_MPI
noinst_PROGRAMS += bench/allreduce_bench bench/loader_bench
endif
bench_engine_bench_SOURCES = bench/engine_bench.c
bench_engine_bench_CPPFLAGS = $(ENGINE_CPPFLAGS)
bench_engine_bench_LDADD = $(ENGINE_LIBS)
bench_conv_bench_SOURCES = bench/conv_bench.c
bench_conv_bench_CPPFLAGS = $(ENGINE_CPPFLAGS)
bench_conv_bench_LDADD = $(ENGINE_LIBS)
bench_loader_bench_SOURCES = bench/loader_bench.c bench/loader_kernel.c bench/loader_kernel.h
bench_loader_bench_CPPFLAGS = $(TRAIN_CPPFLAGS)
bench_loader_bench_LDADD = $(TRAIN_LIBS)
bench_allreduce_bench_SOURCES = bench/allreduce_bench.c
bench_allreduce_bench_CPPFLAGS = $(DIST_CPPFLAGS)
bench_allreduce_bench_LDADD = $(DIST_LIBS)
EXTRA_DIST += bench
