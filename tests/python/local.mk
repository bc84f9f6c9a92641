# tests/python/: the Python package python/cdpool, installed into a fresh
# virtual environment, against the C tools (pools, pointer files,
# cdp-train's key order and checkpoints).
# It runs cdp-train, so it comes with it (HAVE_MPI).
if HAVE_MPI
TESTS += tests/python/python.sh
endif
EXTRA_DIST += tests/python python
