# tests/cluster/: cdp-train and cdp-predict across simulated hosts on this one machine (the
# cluster in a box: README, cluster.sh by hand, cluster_lib.sh sourced).
# Each test skips (77, with the reason) where namespaces cannot be made;
# slurm.sh (a real one-node Slurm) where its packages or root are missing;
# shape.sh (the link shaping of the benchmarks) needs no MPI.
if HAVE_MPI
TESTS += tests/cluster/train.sh tests/cluster/resume.sh tests/cluster/die.sh \
	tests/cluster/predict.sh tests/cluster/slurm.sh
endif
TESTS += tests/cluster/shape.sh
EXTRA_DIST += tests/cluster/README tests/cluster/cluster.sh tests/cluster/cluster_lib.sh \
	tests/cluster/cluster_common.sh tests/cluster/train.sh tests/cluster/resume.sh \
	tests/cluster/die.sh tests/cluster/predict.sh tests/cluster/slurm.sh tests/cluster/shape.sh
