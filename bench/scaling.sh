#!/bin/sh
# bench/scaling.sh: training throughput (samples/s) of cdp-train at 1 and 2
# ranks, one rank per core (--threads 1), the same per-rank batch, and the
# resulting efficiency = rate(2) / (2 rate(1)). Also 2 ranks with the ring
# and with the serial (--no-overlap) reduction. The rate is the median of
# the per-step rates metrics.jsonl logs after the first BENCH_WARM steps.
# Pool: one generated BENCH_SIZE^2 road scene (default 1024) in 128x128
# tiles; model unet.cfg at BENCH_MODEL overrides (default width=16,depth=3).
# BENCH_BN_SYNC=1 adds the cost of [net] bn_sync=1 (synchronized batchnorm,
# cdp-model(5)) at 2 ranks: BENCH_BN_ROUNDS (3) rounds of a plain 2-rank
# run and a bn_sync=1 run back to back (so both see the same load), each
# round's rates, then their medians and the step times.
#   usage: bench/scaling.sh [BUILDDIR]
#   env: BENCH_SIZE, BENCH_MODEL, BENCH_STEPS (40), BENCH_WARM (5),
#        BENCH_BATCH (8), BENCH_BN_SYNC (0), BENCH_BN_ROUNDS (3), MPIRUN
#
# Across hosts: bench/scaling.sh --hosts [BUILDDIR] (as root: it makes a
# simulated cluster of 2 hosts, tests/cluster/README; it removes exactly
# the network namespaces it made, on any exit) runs 1 rank on each of 2
# hosts (1 thread each, each host on its own core, TCP between them), with
# the links unshaped and shaped by tc tbf to 10 Gbit/s and 1 Gbit/s, for
# the U-Net (width 16, depth 4, 128^2 tiles, batch 8 per rank) and the
# classifier (classifier.cfg, 64^2 scene tiles, batch BENCH_CBATCH, default
# 32), in each of BENCH_SETTINGS. Each host holds its own copy of the pool.
# The headline of a line is its efficiency against the side-by-side
# ceiling: the 2-host job's samples/s over those of two independent 1-rank
# jobs, one on each host, run at the same time (what the two cores deliver
# together, which on this machine is not twice one core alone). The
# ceiling and the jobs alternate within a round (1 host alone, ceiling,
# then each job followed by the ceiling again) and a job is held against
# the mean of the two ceilings around it; BENCH_ROUNDS (5) rounds, the
# median and the spread (lowest-highest) over them. Each line then gives,
# per step and from metrics.jsonl, the gradient all-reduce time in flight
# (grad_allreduce_last_s), the exposed time on the rank that waited most
# (grad_exposed_s, also as a share of the step) and on the one that waited
# least (grad_exposed_last_s: the network's part), and the slowest rank's
# blocking communication (allreduce_s: the parameter averaging of average
# and admm); then three diagnostics, labelled so: the efficiency against
# twice 1 host alone; equal-speed, the efficiency at equal core speed
# (the 2-host step in forward passes of its slower rank against the 1-host
# step in forward passes of its own, from --trace; it divides out every
# slowdown of the cores, communication's own cost on them included, so it
# is no headline); and the efficiency against the lockstep bound, the
# ceiling's rate had each of its steps waited for the slower core (the
# ceiling runs' steps paired, their median pair rate over the ceiling:
# what a synchronous job with free communication could make, printed per
# model; the job's efficiency over it is what communication costs once the
# cores' jitter is out). A markdown table of the headlines ends the output;
# progress goes to stderr. A round runs 2 + 2 x links x settings runs a
# model: 32 with the defaults, about an hour and a half in all for both
# models and 5 rounds; the knobs below run subsets.
#   env: BENCH_STEPS, BENCH_WARM, BENCH_ROUNDS (5), BENCH_SIZE (U-Net
#        scene, 1024), BENCH_COUNT (classifier tiles, 512),
#        BENCH_MODELS ("unet classifier": one model, e.g. "unet"),
#        BENCH_RATES ("off 10gbit 1gbit": one link, e.g. "1gbit"),
#        BENCH_SETTINGS ("default serial bf16 average:4 admm:4:0.01"): what
#        the 2-host jobs run, one word each: default (cdp-train's
#        defaults), serial (--no-overlap), auto (--overlap auto),
#        overlap (--overlap on: the reduction during backward), whole
#        (the optimizer after the last bucket, CDP_TRAIN_STEP_PER_BUCKET=0),
#        none|fp16|bf16
#        (--grad-compress), average:K and admm:K:RHO (--sync), or cdp-train
#        options joined by commas ("--grad-compress=bf16,--bucket-mb=2");
#        BENCH_BUCKET_MB (--bucket-mb for every run; unset: cdp-train's
#        default), BENCH_BN_SYNC (1: both models with bn_sync=1, every
#        line; compare with a run at 0), CDP_DIST_THREAD (0: without the
#        communication thread, cdp-train(1)), BENCH_PERF (a folder: `perf
#        record -a -g` of both cores through round 1's 2-host jobs and
#        ceilings, a file each; the threads are named, cdp-train(1)).
#   The smallest check: BENCH_MODELS=unet BENCH_RATES=1gbit
#   BENCH_SETTINGS=bf16 BENCH_ROUNDS=1 BENCH_STEPS=8 BENCH_WARM=2
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
machine
if [ -n "$hosts" ]; then
	. "$src/bench/scaling_hosts.sh"
	exit 0
fi
road_pool "$D" "$size"
# run LAUNCHER EXTRA [MODEL_OVERRIDES]: prints the median samples/s
run() {
	rm -rf "$D/run"
	# shellcheck disable=SC2086
	$1 cdp-train -q --db "$D/pool" --keys "$D/keys" \
		--model "$src/share/cdpool/models/unet.cfg:$ov${3:-}" \
		--out "$D/run" --batch "$batch" --steps "$steps" --threads 1 --log-every 1 --pad-last $2
	rate "$D/run/metrics.jsonl" "$warm"
}
r1=$(run "" "")
echo "ranks=1 batch=$batch samples/s=$r1"
for extra in "" "--allreduce ring" "--no-overlap"; do
	r2=$(run "$mpirun $flags -np 2" "$extra")
	echo "ranks=2 batch=$batch $extra samples/s=$r2 efficiency=$(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.2f", b / (2 * a) }')"
done
if [ "${BENCH_BN_SYNC:-0}" = 1 ]; then
	: >"$D/bn"
	r=1
	while [ "$r" -le "${BENCH_BN_ROUNDS:-3}" ]; do
		a=$(run "$mpirun $flags -np 2" "")
		b=$(run "$mpirun $flags -np 2" "" ",bn_sync=1")
		echo "$a $b" >>"$D/bn"
		echo "round $r: ranks=2 batch=$batch samples/s=$a, with bn_sync=1 $b"
		r=$((r + 1))
	done
	a=$(cut -d' ' -f1 "$D/bn" | median) b=$(cut -d' ' -f2 "$D/bn" | median)
	awk -v a="$a" -v b="$b" -v n="$((2 * batch))" 'BEGIN {
		printf "ranks=2 batch=%d bn_sync=1 samples/s=%s (plain %s) step_s=%.3f (plain %.3f, %+.1f%%)\n",
			n / 2, b, a, n / b, n / a, 100 * (a / b - 1) }'
fi
