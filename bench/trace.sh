#!/bin/sh
# bench/trace.sh: what cdp-train --trace costs. The same run (U-Net width
# 16, depth 4, 128x128 tiles, batch 8, 1 thread) with and without
# --trace, BENCH_ROUNDS times alternately (default 3), 2 ranks under
# mpirun (1 process with MPIRUN set empty, or with no mpirun on PATH);
# prints the machine, then each run's median samples/s after BENCH_WARM
# steps, then the ratio traced / plain of the medians
# over the rounds (want >= 0.98: under 2% of a step) and the spans the
# trace holds per step and rank. Take numbers on an idle machine: on a
# loaded one the spread between rounds of the same kind (printed) is
# larger than the effect.
#   usage: bench/trace.sh [BUILDDIR]
#   env: BENCH_SIZE (scene, 1024), BENCH_STEPS (30), BENCH_WARM (5),
#        BENCH_ROUNDS (3), BENCH_MODEL (width=16,depth=4), MPIRUN
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
PATH=$build:$PATH
size=${BENCH_SIZE:-1024}
steps=${BENCH_STEPS:-30}
warm=${BENCH_WARM:-5}
rounds=${BENCH_ROUNDS:-3}
ov=${BENCH_MODEL:-width=16,depth=4}
PY=${PYTHON:-/usr/bin/python3}
# MPIRUN= (set, empty) asks for 1 process, as does no mpirun on PATH
mpirun=${MPIRUN-mpirun}
launch=
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	launch="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || launch="$launch --allow-run-as-root"
fi
D=$(mktemp -d "${TMPDIR:-/tmp}/cdptrace.XXXXXX")
trap 'rm -rf "$D"' EXIT
. "$src/bench/train_lib.sh"
machine
echo "ranks: $([ -n "$launch" ] && echo "2 ($launch)" || echo 1); scene ${size}^2;" \
	"$steps steps, median after $warm; $rounds rounds"
road_pool "$D" "$size"
# run EXTRA...: one run, prints its median samples/s
run() {
	rm -rf "$D/run" "$D/t.json"
	# shellcheck disable=SC2086
	$launch cdp-train -q --db "$D/pool" --keys "$D/keys" --model "$src/share/cdpool/models/unet.cfg:$ov" \
		--out "$D/run" --batch 8 --steps "$steps" --threads 1 --log-every 1 --pad-last "$@"
	rate "$D/run/metrics.jsonl" "$warm"
}
plain= traced=
i=1
while [ "$i" -le "$rounds" ]; do
	p=$(run)
	t=$(run --trace "$D/t.json")
	echo "round $i: plain samples/s=$p traced samples/s=$t"
	plain="$plain $p" traced="$traced $t"
	i=$((i + 1))
done
spans=$("$PY" -c 'import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
print("%.0f" % (len(ev) / float(sys.argv[2]) / len({e["pid"] for e in ev})))' "$D/t.json" "$steps")
# shellcheck disable=SC2086
mp=$(printf '%s\n' $plain | median) mt=$(printf '%s\n' $traced | median) lo=$(printf '%s\n' $plain | sort -g | head -1) \
	hi=$(printf '%s\n' $plain | sort -g | tail -1)
echo "median plain $mp, traced $mt samples/s: ratio $(awk -v a="$mp" -v b="$mt" 'BEGIN { printf "%.3f", b / a }')" \
	"(plain spread $lo..$hi); $spans spans per step and rank"
