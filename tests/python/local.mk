# tests/python/: the Python package python/cdpool, installed into a fresh
# virtual environment, against the C tools (pools, pointer files,
# cdp-train's key order and checkpoints).
TESTS += tests/python/python.sh
EXTRA_DIST += tests/python python
