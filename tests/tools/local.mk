# tests/tools/: the pipeline programs driven from the shell, with their
# failure cases and cross-checks against GDAL, LMDB's tools and Python.
TESTS += tests/tools/tile.sh tests/tools/lmdbpack.sh tests/tools/keyshuffle.sh \
	tests/tools/pipeline.sh tests/tools/failures.sh tests/tools/build.sh \
	tests/tools/hazards.sh
EXTRA_DIST += tests/tools
