# engine/dist/: the communication layer (dist.h): MPI, our ring all-reduce,
# NCCL (with HAVE_CUDA), the rendezvous file and the watchdog. Built with
# MPI (HAVE_MPI, which implies the engine's HAVE_OPENBLAS).
if HAVE_MPI
noinst_LIBRARIES += engine/dist/libcdpdist.a
dist_man_MANS += man/cdp-rendezvous.5
else
EXTRA_DIST += man/cdp-rendezvous.5
endif
DIST_CPPFLAGS = $(ENGINE_CPPFLAGS) $(MPI_CFLAGS)
engine_dist_libcdpdist_a_CPPFLAGS = $(DIST_CPPFLAGS) $(CUDA_CPPFLAGS)
engine_dist_libcdpdist_a_SOURCES = \
	engine/dist/dist.h engine/dist/dist_int.h engine/dist/dist_mpi.c engine/dist/dist_ring.c \
	engine/dist/dist_comp.c \
	engine/dist/dist_dev.c engine/dist/dist_beat.c engine/dist/dist_rdv.h engine/dist/dist_rdv.c \
	engine/dist/dist_watch.h engine/dist/dist_watch.c engine/dist/dist_opts.c
if HAVE_CUDA
# the NCCL half of dist.h, plain C on CUDA's headers
engine_dist_libcdpdist_a_SOURCES += engine/dist/dist_nccl.c
endif
# dist_dev.c moves device buffers through the engine's backend: the engine
# comes after it.
DIST_LIBS = engine/dist/libcdpdist.a $(ENGINE_LIBS) $(MPI_LIBS)
