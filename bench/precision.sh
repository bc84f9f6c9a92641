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
# BENCH_TOL (0.03 IoU): "within" or "OUTSIDE" (how far one seed's two
# trajectories drift apart), and the difference of the two mean IoUs over
# the seeds against the same tolerance (what a side costs in accuracy;
# the seeds' own spread is larger than either). On a CPU without
# AVX512_BF16, cdp-train refuses bf16 and the script exits 77 (one probe
# step, before any seed); BENCH_EMU=1 runs the emulated kernels instead
# (CDP_CPU_BF16_EMU=1: the same rounding, many times slower).
#
# BENCH_GRADCOMP=1 compares gradient compression instead (issue 29's
# "--grad-compress bf16 reaches the same validation IoU as uncompressed,
# within 0.01"): both sides in fp32 on 2 ranks under mpirun (1 thread
# each, the batch of 8 per rank), `--grad-compress none` against
# `--grad-compress bf16`, the tolerance BENCH_TOL then 0.01 by default.
#   usage: bench/precision.sh [BUILDDIR]
#   env: BENCH_SEEDS ("1 2 3"), BENCH_STEPS (300), BENCH_THREADS (nproc),
#        BENCH_SIZE (1024: scene side), BENCH_TOL (0.03), BENCH_EMU (0),
#        BENCH_GRADCOMP (0), MPIRUN (mpirun)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
seeds=${BENCH_SEEDS:-1 2 3}
steps=${BENCH_STEPS:-300}
T=${BENCH_THREADS:-$(nproc)}
size=${BENCH_SIZE:-1024}
gc=${BENCH_GRADCOMP:-0}
if [ "$gc" = 1 ]; then
	tol=${BENCH_TOL:-0.01} A=none B=bf16 what="2 ranks, --grad-compress"
	mpi="${MPIRUN:-mpirun} --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || mpi="$mpi --allow-run-as-root"
else
	tol=${BENCH_TOL:-0.03} A=fp32 B=bf16 mpi= what=precision
fi
PY=/usr/bin/python3
gen=$src/share/cdpool/examples/genscene.py
models=$src/share/cdpool/models
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
	[ -x "$build/$p" ] || { echo "precision.sh: no '$build/$p' (build it first)" >&2; exit 1; }
done
[ "${BENCH_EMU:-0}" = 1 ] && { CDP_CPU_BF16_EMU=1; export CDP_CPU_BF16_EMU; }
. "$src/bench/train_lib.sh"     # machine, bf16_or_skip
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

machine
echo "cpu flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "seeds: $seeds; $steps steps; threads $T; tolerance $tol IoU; $what $A against $B"

for s in 1 2 3; do
	"$PY" "$gen" "$tmp/scene$s.tif" --size "$size" --seed "$((s + 20))" \
		--mask "$tmp/scene${s}_mask.tif" >/dev/null
done
"$build/cdp-tile" --size 128 --label-suffix _mask "$tmp/scene1.tif" "$tmp/scene2.tif" |
	"$build/cdp-lmdbpack" -q "$tmp/pool"
# without AVX512_BF16 (and without BENCH_EMU=1) cdp-train refuses bf16:
# one step of it says so before any seed runs
if [ "$gc" != 1 ]; then
	"$build/cdp-keyshuffle" -q --seed 1 -o "$tmp/probe.keys" "$tmp/pool"
	bf16_or_skip precision.sh "$build/cdp-train" -q --db "$tmp/pool" --keys "$tmp/probe.keys" \
		--out "$tmp/probe" --model "$models/unet.cfg:width=8,depth=3,in_h=128,in_w=128" \
		--steps 1 --batch 2 --threads 1 --precision bf16
	rm -rf "$tmp/probe" "$tmp/probe.keys"
fi

# run SEED SIDE: prints "IOU SECONDS_PER_STEP"; SIDE a precision, or
# with BENCH_GRADCOMP=1 a --grad-compress format
run() {
	d=$tmp/$1.$2
	mkdir -p "$d"
	"$build/cdp-keyshuffle" -q --seed "$1" -o "$d/keys" "$tmp/pool"
	seed=$1 prec=$2
	if [ "$gc" = 1 ]; then
		prec=fp32
		set -- --grad-compress "$2" --threads 1
	else
		set -- --threads "$T"
	fi
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	if ! $mpi "$build/cdp-train" --db "$tmp/pool" --keys "$d/keys" --out "$d/run" --seed "$seed" \
		--model "$models/unet.cfg:width=8,depth=3,in_h=128,in_w=128,warmup=20,loss=ce+dice" \
		--steps "$steps" --batch 8 --lr 0.003 --precision "$prec" "$@" \
		--log-every 1000 >"$d/log" 2>&1; then
		tail -3 "$d/log" >&2
		exit 1
	fi
	t1=$(date +%s.%N)
	"$build/cdp-predict" -q --threads "$T" --precision "$prec" "$d/run" "$tmp/scene3.tif" \
		-o "$d/pred.tif"
	"$build/cdp-evaluate" --json "$d/pred.tif" "$tmp/scene3_mask.tif" >"$d/eval.json"
	"$PY" -c 'import json, sys
print(json.load(open(sys.argv[1]))["per_class"][1]["iou"], (float(sys.argv[3]) - float(sys.argv[2])) / int(sys.argv[4]))' \
		"$d/eval.json" "$t0" "$t1" "$steps"
	rm -rf "$d"
}

: >"$tmp/rows"
for s in $seeds; do
	a=$(run "$s" "$A")
	b=$(run "$s" "$B")
	echo "$s $a $b" >>"$tmp/rows"
	echo "seed $s: $A IoU $(echo "$a" | cut -d' ' -f1), $B IoU $(echo "$b" | cut -d' ' -f1)"
done
"$PY" - "$tmp/rows" "$tol" "$A" "$B" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
tol, A, B = float(sys.argv[2]), sys.argv[3], sys.argv[4]
print("%-6s %9s %9s %9s %12s %12s" % ("seed", A + " IoU", B + " IoU", B + "-" + A, A + " s/step",
                                      B + " s/step"))
d = []
for s, ia, ta, ib, tb in rows:
    d.append(float(ib) - float(ia))
    print("%-6s %9.4f %9.4f %+9.4f %12.3f %12.3f" % (s, float(ia), float(ib), d[-1], float(ta), float(tb)))
m = statistics.mean(abs(x) for x in d)
print("mean |%s - %s| IoU: %.4f (tolerance %.3f): %s" % (B, A, m, tol, "within" if m <= tol else "OUTSIDE"))
ma, mb = (statistics.mean(float(r[k]) for r in rows) for k in (1, 3))
print("mean IoU %s %.4f, %s %.4f: difference of the means %+.4f (tolerance %.3f): %s"
      % (A, ma, B, mb, mb - ma, tol, "within" if abs(mb - ma) <= tol else "OUTSIDE"))
EOF
