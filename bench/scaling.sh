#!/bin/sh
# bench/scaling.sh: training throughput (samples/s) of cdp-train at 1 and 2
# ranks, one rank per core (--threads 1), the same per-rank batch, and the
# resulting efficiency = rate(2) / (2 rate(1)). Also 2 ranks with the ring
# and with the serial (--no-overlap) reduction. The rate is the median of
# the per-step rates metrics.jsonl logs after the first BENCH_WARM steps.
# Pool: one generated BENCH_SIZE^2 road scene (default 1024) in 128x128
# tiles; model unet.cfg at BENCH_MODEL overrides (default width=16,depth=3).
#   usage: bench/scaling.sh [BUILDDIR]
#   env: BENCH_SIZE, BENCH_MODEL, BENCH_STEPS (40), BENCH_WARM (5),
#        BENCH_BATCH (8), MPIRUN
#
# Across hosts: bench/scaling.sh --hosts [BUILDDIR] (as root: it makes a
# simulated cluster of 2 hosts, tests/cluster/README) runs 1 rank on host 1,
# then 1 rank on each of 2 hosts (1 thread each, each host on its own
# core, TCP between them), with the links unshaped and shaped by tc tbf to
# 10 Gbit/s and 1 Gbit/s, overlap on and --no-overlap, for the U-Net
# (width 16, depth 4, 128^2 tiles, batch 8 per rank) and the classifier
# (classifier.cfg, 64^2 scene tiles, batch BENCH_CBATCH, default 32). Each
# line prints samples/s, the weak-scaling efficiency against 1 host, the
# gradient all-reduce time per step and the part of it exposed, both of
# the rank that ended backward last (grad_allreduce_last_s: buckets in
# flight, grad_exposed_last_s: the network's part), the hidden fraction
# 1 - exposed / in flight and waited= (grad_exposed_s minus it: the
# faster rank's wait for the slower one); the --no-overlap line's exposed
# time is what overlapping saves from. Each host holds its own copy of
# the pool.
# BENCH_ROUNDS (3) rounds, each of the 1-host run and every 2-host run; a
# line is the median over the rounds, its efficiency the median of the
# efficiencies against each round's own 1-host run (progress per run goes
# to stderr). About 5 min a round. Each round also runs 1 host on each of
# the 2 hosts at once: side-by-side= is a 2-host line's rate against the
# sum of those two, the efficiency with the machine's own cost of two busy
# cores taken out (on a real cluster, where hosts share nothing, the two
# are the same), and a note says when that cost is over 5%. The
# efficiency is also the product of network= (1 - the exposed time's
# share of the 2-host step: what the link cost) and compute= (the rest:
# the slower rank, and the machine). Every run is traced (--trace), and
# equal-speed= is the efficiency at equal core speed: the 2-host step's
# length in forward passes of its slower rank against the 1-host step's
# in forward passes of its own (a forward pass moves no gradients, so it
# gauges a core's speed at that moment). What distributing costs stays in
# it; a core that runs slower, for a step or a spell, does not.
#   env: BENCH_STEPS, BENCH_WARM, BENCH_SIZE (U-Net scene, 1024),
#        BENCH_COUNT (classifier tiles, 512), BENCH_RATES ("off 10gbit
#        1gbit"), BENCH_MODELS ("unet classifier"), BENCH_BUCKET_MB
#        (--bucket-mb; unset: cdp-train's default),
#        CDP_DIST_THREAD (0: without the communication thread, cdp-train(1))
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
hosts=
if [ "${1:-}" = --hosts ]; then
	hosts=1
	shift
fi
build=$(cd "${1:-$src}" && pwd)
PATH=$build:$PATH
size=${BENCH_SIZE:-1024}
ov=${BENCH_MODEL:-width=16,depth=3}
steps=${BENCH_STEPS:-40}
warm=${BENCH_WARM:-5}
batch=${BENCH_BATCH:-8}
PY=${PYTHON:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
flags="--oversubscribe"
[ "$(id -u)" -ne 0 ] || flags="$flags --allow-run-as-root"
D=$(mktemp -d "${TMPDIR:-/tmp}/cdpscale.XXXXXX")
trap 'rm -rf "$D"' EXIT
. "$src/bench/train_lib.sh"
if [ -n "$hosts" ]; then
	. "$src/bench/scaling_hosts.sh"
	exit 0
fi
road_pool "$D" "$size"
# run LAUNCHER EXTRA: prints the median samples/s
run() {
	rm -rf "$D/run"
	# shellcheck disable=SC2086
	$1 cdp-train -q --db "$D/pool" --keys "$D/keys" --model "$src/share/cdpool/models/unet.cfg:$ov" \
		--out "$D/run" --batch "$batch" --steps "$steps" --threads 1 --log-every 1 --pad-last $2
	rate "$D/run/metrics.jsonl" "$warm"
}
r1=$(run "" "")
echo "ranks=1 batch=$batch samples/s=$r1"
for extra in "" "--allreduce ring" "--no-overlap"; do
	r2=$(run "$mpirun $flags -np 2" "$extra")
	echo "ranks=2 batch=$batch $extra samples/s=$r2 efficiency=$(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.2f", b / (2 * a) }')"
done
