# tests/tools/: the pipeline programs driven from the shell, with their
# failure cases and cross-checks against GDAL, LMDB's tools and Python;
# configure.sh builds the pipeline without MPI; build.sh installs all six
# programs, so it runs only in the build that has them all.
TESTS += tests/tools/tile.sh tests/tools/tile_inputs.sh tests/tools/lmdbpack.sh tests/tools/keyshuffle.sh tests/tools/oversample.sh \
	tests/tools/pipeline.sh tests/tools/scene.sh tests/tools/failures.sh tests/tools/configure.sh \
	tests/tools/makefile.sh tests/tools/deps.sh tests/tools/pool_fix.sh \
	tests/tools/label_grid.sh tests/tools/value_labels.sh \
	tests/tools/vector_labels.sh tests/tools/time.sh tests/tools/multilabel_pack.sh \
	tests/tools/readonly.sh
# check_tmpdir.sh: every test in a TMPDIR of its own, removed after it (tests/tmpdir.sh)
TESTS += tests/tools/check_tmpdir.sh
if HAVE_MPI
# hazards.sh: outputs over inputs, truncated pools, leftovers (cdp-train among them);
# outputs.sh: the output-path policy (cdpool(7)) in every program
TESTS += tests/tools/build.sh tests/tools/cli.sh tests/tools/hazards.sh tests/tools/outputs.sh
# limits.sh: ulimit -v, ulimit -f and a full disk in every program (cdp-train and cdp-predict among them)
TESTS += tests/tools/limits.sh
# scene_recipe.sh: README.md's scene-classification recipe, run (it trains)
TESTS += tests/tools/scene_recipe.sh
# buildings_recipe.sh: README.md's building-footprints recipe (vector labels), run (it trains)
TESTS += tests/tools/buildings_recipe.sh
# change_recipe.sh: README.md's change-detection recipe (cdp-tile --time), run (it trains)
TESTS += tests/tools/change_recipe.sh
# multilabel_recipe.sh: README.md's multi-label recipe, run (it trains)
TESTS += tests/tools/multilabel_recipe.sh
# regression_recipe.sh: README.md's pixel-regression recipe, run (it trains)
TESTS += tests/tools/regression_recipe.sh
endif
EXTRA_DIST += tests/tools
