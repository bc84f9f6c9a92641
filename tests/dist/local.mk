# tests/dist/: the communication layer. test_dist runs under mpirun from
# dist.sh; test_rdv, test_watch and test_beat (the rendezvous file, the
# watchdog and the heartbeat's goodbye) need neither NCCL nor a GPU;
# test_nccl_mock runs dist_nccl.c itself on the CUDA and NCCL stand-ins of
# nccl_mock.c. All of it only with HAVE_MPI.
DIST_TESTS = tests/dist/test_rdv tests/dist/test_watch tests/dist/test_beat
# the corpus replay of fuzz_rdv (tests/fuzz/, doc/FUZZING.md)
DIST_TESTS += tests/dist/test_fuzz_rdv
if HAVE_MPI
UNIT_TESTS += $(DIST_TESTS)
check_PROGRAMS += $(DIST_TESTS) tests/dist/test_dist tests/dist/test_comp
TESTS += tests/dist/dist.sh tests/dist/comp.sh
if HAVE_CUDA
check_PROGRAMS += tests/dist/test_nccl_mock
TESTS += tests/dist/test_nccl_mock
endif
endif
EXTRA_DIST += tests/dist/dist.sh tests/dist/comp.sh tests/dist/comp_ref.py
DIST_TEST_CPPFLAGS = $(DIST_CPPFLAGS) -I$(top_srcdir)/tests/unit -DCDP_SRCDIR='"$(abs_top_srcdir)"'
tests_dist_test_dist_SOURCES = tests/dist/test_dist.c
tests_dist_test_dist_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_dist_LDADD = $(DIST_LIBS)
tests_dist_test_comp_SOURCES = tests/dist/test_comp.c
tests_dist_test_comp_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_comp_LDADD = $(DIST_LIBS)
tests_dist_test_rdv_SOURCES = tests/dist/test_rdv.c tests/dist/clock.h
tests_dist_test_rdv_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_rdv_LDADD = $(DIST_LIBS)
tests_dist_test_watch_SOURCES = tests/dist/test_watch.c tests/dist/clock.h
tests_dist_test_watch_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_watch_LDADD = $(DIST_LIBS)
tests_dist_test_beat_SOURCES = tests/dist/test_beat.c
tests_dist_test_beat_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_beat_LDADD = $(DIST_LIBS)
tests_dist_test_nccl_mock_SOURCES = tests/dist/test_nccl_mock.c tests/dist/nccl_mock.c \
	tests/dist/clock.h
tests_dist_test_nccl_mock_CPPFLAGS = $(DIST_TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_dist_test_nccl_mock_LDADD = $(DIST_LIBS)
tests_dist_test_fuzz_rdv_SOURCES = tests/dist/test_fuzz_rdv.c tests/fuzz/fuzz_rdv_body.h \
	tests/fuzz/fuzz_replay.h
tests_dist_test_fuzz_rdv_CPPFLAGS = $(DIST_TEST_CPPFLAGS)
tests_dist_test_fuzz_rdv_LDADD = $(DIST_LIBS)
