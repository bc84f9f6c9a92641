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
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
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
"$PY" "$src/share/cdpool/examples/genscene.py" "$D/s.tif" --size "$size" --seed 1 --mask "$D/s_mask.tif"
cdp-tile -q --size 128 --label-suffix _mask "$D/s.tif" | cdp-lmdbpack -q "$D/pool"
cdp-keyshuffle -q -o "$D/keys" "$D/pool"
rate() {
	sed -n 's/.*"step":\([0-9]*\),.*"samples_per_s":\([^,]*\),.*/\1 \2/p' "$1" |
		awk -v w="$warm" '$1 > w { print $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# run LAUNCHER EXTRA: prints the median samples/s
run() {
	rm -rf "$D/run"
	# shellcheck disable=SC2086
	$1 cdp-train -q --db "$D/pool" --keys "$D/keys" --model "$src/share/cdpool/models/unet.cfg:$ov" \
		--out "$D/run" --batch "$batch" --steps "$steps" --threads 1 --log-every 1 --pad-last $2
	rate "$D/run/metrics.jsonl"
}
r1=$(run "" "")
echo "ranks=1 batch=$batch samples/s=$r1"
for extra in "" "--allreduce ring" "--no-overlap"; do
	r2=$(run "$mpirun $flags -np 2" "$extra")
	echo "ranks=2 batch=$batch $extra samples/s=$r2 efficiency=$(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.2f", b / (2 * a) }')"
done
