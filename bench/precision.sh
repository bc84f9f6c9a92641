#!/bin/sh
# bench/precision.sh: issue 28's "300-step demo in both precisions": the
# demo's road task trained and predicted in fp32 and in bf16 with the same
# seeds, and the held-out road IoU of each, so a user can see what
# `--precision bf16` costs in accuracy. Not a speed bench (engine.sh and
# predict.sh are); it prints the seconds per step only as a by-product.
#
# Task: three generated 3-band scenes with roads (genscene.py, as
# bench/recipe.sh), scenes 1 and 2 cut into 128x128 tiles for training,
# scene 3 held out, predicted whole by cdp-predict in the precision it was
# trained in and scored by cdp-evaluate. Model unet.cfg width=8 depth=3,
# loss ce+dice (plain ce is bimodal at this budget: recipe.sh found one
# seed in three learning the roads, so two precisions of one seed could
# land in different modes and say nothing about rounding), adamw,
# lr 0.003, batch 8, BENCH_STEPS steps.
#
# Prints per seed the IoU of both precisions and their difference, then
# the mean absolute difference against the stated tolerance
# BENCH_TOL (0.03 IoU): "within" or "OUTSIDE". On a CPU without
# AVX512_BF16, cdp-train refuses bf16; BENCH_EMU=1 runs the emulated
# kernels instead (CDP_CPU_BF16_EMU=1: the same rounding, many times slower).
#   usage: bench/precision.sh [BUILDDIR]
#   env: BENCH_SEEDS ("1 2 3"), BENCH_STEPS (300), BENCH_THREADS (nproc),
#        BENCH_SIZE (1024: scene side), BENCH_TOL (0.03), BENCH_EMU (0)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
seeds=${BENCH_SEEDS:-1 2 3}
steps=${BENCH_STEPS:-300}
T=${BENCH_THREADS:-$(nproc)}
size=${BENCH_SIZE:-1024}
tol=${BENCH_TOL:-0.03}
PY=/usr/bin/python3
gen=$src/share/cdpool/examples/genscene.py
models=$src/share/cdpool/models
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
	[ -x "$build/$p" ] || { echo "precision.sh: no '$build/$p' (build it first)" >&2; exit 1; }
done
[ "${BENCH_EMU:-0}" = 1 ] && { CDP_CPU_BF16_EMU=1; export CDP_CPU_BF16_EMU; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "cpu flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "seeds: $seeds; $steps steps; threads $T; tolerance $tol IoU"

for s in 1 2 3; do
	"$PY" "$gen" "$tmp/scene$s.tif" --size "$size" --seed "$((s + 20))" \
		--mask "$tmp/scene${s}_mask.tif" >/dev/null
done
"$build/cdp-tile" --size 128 --label-suffix _mask "$tmp/scene1.tif" "$tmp/scene2.tif" |
	"$build/cdp-lmdbpack" -q "$tmp/pool"

# run SEED PRECISION: prints "IOU SECONDS_PER_STEP"
run() {
	d=$tmp/$1.$2
	mkdir -p "$d"
	"$build/cdp-keyshuffle" -q --seed "$1" -o "$d/keys" "$tmp/pool"
	t0=$(date +%s.%N)
	if ! "$build/cdp-train" --db "$tmp/pool" --keys "$d/keys" --out "$d/run" --seed "$1" \
		--model "$models/unet.cfg:width=8,depth=3,in_h=128,in_w=128,warmup=20,loss=ce+dice" \
		--precision "$2" --steps "$steps" --batch 8 --threads "$T" --lr 0.003 \
		--log-every 1000 >"$d/log" 2>&1; then
		tail -3 "$d/log" >&2
		exit 1
	fi
	t1=$(date +%s.%N)
	"$build/cdp-predict" -q --threads "$T" --precision "$2" "$d/run" "$tmp/scene3.tif" \
		-o "$d/pred.tif"
	"$build/cdp-evaluate" --json "$d/pred.tif" "$tmp/scene3_mask.tif" >"$d/eval.json"
	"$PY" -c 'import json, sys
print(json.load(open(sys.argv[1]))["per_class"][1]["iou"], (float(sys.argv[3]) - float(sys.argv[2])) / int(sys.argv[4]))' \
		"$d/eval.json" "$t0" "$t1" "$steps"
	rm -rf "$d"
}

: >"$tmp/rows"
for s in $seeds; do
	a=$(run "$s" fp32)
	b=$(run "$s" bf16)
	echo "$s $a $b" >>"$tmp/rows"
	echo "seed $s: fp32 IoU $(echo "$a" | cut -d' ' -f1), bf16 IoU $(echo "$b" | cut -d' ' -f1)"
done
"$PY" - "$tmp/rows" "$tol" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
tol = float(sys.argv[2])
print("%-6s %9s %9s %9s %12s %12s" % ("seed", "fp32 IoU", "bf16 IoU", "bf16-fp32", "fp32 s/step", "bf16 s/step"))
d = []
for s, ia, ta, ib, tb in rows:
    d.append(float(ib) - float(ia))
    print("%-6s %9.4f %9.4f %+9.4f %12.3f %12.3f" % (s, float(ia), float(ib), d[-1], float(ta), float(tb)))
m = statistics.mean(abs(x) for x in d)
print("mean |bf16 - fp32| IoU: %.4f (tolerance %.3f): %s" % (m, tol, "within" if m <= tol else "OUTSIDE"))
print("mean IoU fp32 %.4f, bf16 %.4f" % (statistics.mean(float(r[1]) for r in rows),
                                         statistics.mean(float(r[3]) for r in rows)))
EOF
