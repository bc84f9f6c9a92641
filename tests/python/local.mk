# tests/python/: the Python package python/cdpool, installed into a fresh
# virtual environment, against the C tools (pools, pointer files,
# cdp-train's key order and checkpoints).
# It runs cdp-train, so it comes with it (HAVE_MPI).
if HAVE_MPI
TESTS += tests/python/python.sh
check_PROGRAMS += tests/python/batch_dump
endif
# the C loader's batch for a given (epoch, step, rank), for test_cdpool.py
tests_python_batch_dump_SOURCES = tests/python/batch_dump.c
tests_python_batch_dump_CPPFLAGS = $(TRAIN_CPPFLAGS)
tests_python_batch_dump_LDADD = $(TRAIN_LIBS)
EXTRA_DIST += tests/python python
