#!/bin/sh
# bench/transfer.sh: what a pretrained encoder buys with few labels (issue
# 27's "value, measured honestly"). No ImageNet weights can be fetched here,
# so the pretraining is cdpool's own: a ResNet-18 trained by cdp-train as a
# scene-chip classifier, its encoder taken by the U-Net with --init.
#
# The labelled set: two generated 3-band road scenes (genscene.py, roads
# about 2-3% of the pixels, BENCH_SIZE px a side) cut into 64x64 tiles, of
# which a seeded BENCH_FRAC (10%) is kept for training; a third scene is
# held out, predicted whole by cdp-predict and scored by cdp-evaluate (road
# IoU). Each variant trains BENCH_STEPS steps of batch 8 (adamw at the
# cfg's lr 0.001, warmup 20, cosine; loss ce+dice: plain ce on 2-3% road
# pixels is bimodal over seeds at a few hundred steps, bench/recipe.sh),
# the same tiles per seed:
#   unet     unet.cfg (width 16, depth 4: 1.9M parameters) from scratch
#   r18      unet-resnet18.cfg (14.3M) from scratch
#   r18pre   unet-resnet18.cfg with --init from the classifier: every
#            encoder tensor (conv1, bn1, layer1..4, batchnorm statistics
#            included) taken, the decoder and head initialized as usual
# The classifier: resnet18.cfg:classes=5 on BENCH_CHIPS generated 64x64
# scene chips (5 classes: residential, road, green, lake, land; a larger
# set than the labelled tiles, with no road masks), BENCH_PRE_STEPS steps
# of batch 32, trained once (seed 1) for all seeds; its held-out accuracy
# (a stratified fifth) is printed.
# Prints one line per variant and seed (road IoU, seconds per training
# step), then each variant's mean, min and max over the seeds, and the
# wall time of the whole run. Scores do not depend on the machine's load;
# the times do.
# Time: within 30 minutes on 2 quiet cores at the defaults (3 seeds, 300
# steps; estimated from the step costs, ~0.3 s a unet-resnet18 step, not
# yet timed whole on a quiet machine); shrink it with BENCH_SEEDS="1",
# BENCH_STEPS, BENCH_PRE_STEPS, BENCH_CHIPS and BENCH_SIZE.
#   usage: bench/transfer.sh [BUILDDIR]
#   env: BENCH_SEEDS ("1 2 3"), BENCH_STEPS (300), BENCH_PRE_STEPS (300),
#        BENCH_CHIPS (2000), BENCH_SIZE (1024), BENCH_FRAC (0.1),
#        BENCH_VARIANTS ("unet r18 r18pre"), BENCH_THREADS (nproc)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
seeds=${BENCH_SEEDS:-1 2 3}
steps=${BENCH_STEPS:-300}
pre_steps=${BENCH_PRE_STEPS:-300}
nchips=${BENCH_CHIPS:-2000}
size=${BENCH_SIZE:-1024}
frac=${BENCH_FRAC:-0.1}
variants=${BENCH_VARIANTS:-unet r18 r18pre}
T=${BENCH_THREADS:-$(nproc)}
PY=/usr/bin/python3
gen=$src/share/cdpool/examples/genscene.py
models=$src/share/cdpool/models
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
	[ -x "$build/$p" ] || { echo "transfer.sh: no '$build/$p' (build it first)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "seeds: $seeds; $steps steps of batch 8 on $frac of the 64x64 road tiles of two" \
	"${size}px scenes; classifier: $pre_steps steps on $nchips chips; threads $T"

# the road scenes: 1 and 2 for training, 3 held out
for s in 1 2 3; do
	"$PY" "$gen" "$tmp/scene$s.tif" --size "$size" --seed "$((s + 20))" \
		--mask "$tmp/scene${s}_mask.tif" >/dev/null
done
"$build/cdp-tile" --size 64 --label-suffix _mask "$tmp/scene1.tif" "$tmp/scene2.tif" |
	"$build/cdp-lmdbpack" -q "$tmp/pool"

# the classifier, pretrained once on the chips
case " $variants " in *" r18pre "*)
	mkdir -p "$tmp/chips"
	(cd "$tmp/chips" && "$PY" "$gen" --scene-tiles gen --count "$nchips" --size 64 --seed 7 \
		>/dev/null)
	names="residential road green lake land"
	while read -r f k; do
		c=$(echo $names | cut -d' ' -f$((k + 1)))
		mkdir -p "$tmp/chips/scenes/$c"
		mv "$tmp/chips/gen/$f" "$tmp/chips/scenes/$c/"
	done <"$tmp/chips/gen/list.txt"
	"$build/cdp-lmdbpack" -q --folders "$tmp/chips/scenes" "$tmp/chips/pool"
	"$build/cdp-keyshuffle" -q --seed 1 --val 0.2 --stratify --val-out "$tmp/chips/val" \
		-o "$tmp/chips/keys" "$tmp/chips/pool"
	t0=$(date +%s.%N)
	"$build/cdp-train" --db "$tmp/chips/pool" --keys "$tmp/chips/keys" --out "$tmp/pre" \
		--seed 1 --model "$models/resnet18.cfg:classes=5,in_h=64,in_w=64,warmup=20" \
		--steps "$pre_steps" --batch 32 --threads "$T" --log-every 1000 \
		>"$tmp/pre.log" 2>&1 || { tail -3 "$tmp/pre.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	tail -n +2 "$tmp/chips/val" | sed "s|.*|$tmp/chips/scenes/&.tif|" >"$tmp/chips/val.txt"
	"$build/cdp-predict" -q --threads "$T" "$tmp/pre" "$tmp/chips/val.txt" -o "$tmp/val.csv"
	"$build/cdp-evaluate" --json "$tmp/val.csv" "$tmp/chips/scenes" >"$tmp/pre.json"
	"$PY" -c 'import json, sys
print("classifier: resnet18, held-out chip accuracy %.4f, %.3f s/step"
      % (json.load(open(sys.argv[1]))["accuracy"], (float(sys.argv[3]) - float(sys.argv[2]))
         / int(sys.argv[4])))' "$tmp/pre.json" "$t0" "$t1" "$pre_steps"
	;;
esac

# run VARIANT SEED: trains on the seed's tiles, predicts scene 3, appends
# "VARIANT SEED IOU SECONDS_PER_STEP" to $tmp/rows and prints it
run() {
	v=$1 s=$2 d=$tmp/$1.$2 init=
	mkdir -p "$d"
	case $v in
	unet) cfg=unet.cfg ;;
	r18) cfg=unet-resnet18.cfg ;;
	r18pre) cfg=unet-resnet18.cfg init="--init $tmp/pre/checkpoint.cdpt" ;;
	*) echo "transfer.sh: unknown variant '$v'" >&2; exit 1 ;;
	esac
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	"$build/cdp-train" --db "$tmp/pool" --keys "$tmp/keys.$s" --out "$d/run" --seed "$s" \
		--model "$models/$cfg:in_h=64,in_w=64,warmup=20,loss=ce+dice" $init --steps "$steps" --batch 8 \
		--threads "$T" --log-every 1000 >"$d/log" 2>&1 || { tail -3 "$d/log" >&2; exit 1; }
	t1=$(date +%s.%N)
	# what --init took (train.log's line), once
	[ -z "$init" ] || [ -f "$tmp/init.shown" ] ||
		{ grep -h "init:" "$d/run/train.log" | head -1 | cut -d";" -f1; : >"$tmp/init.shown"; }
	"$build/cdp-predict" -q --threads "$T" "$d/run" "$tmp/scene3.tif" -o "$d/pred.tif"
	"$build/cdp-evaluate" --json "$d/pred.tif" "$tmp/scene3_mask.tif" >"$d/eval.json"
	"$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))["per_class"][1]
print(sys.argv[2], sys.argv[3], "%.4f" % c["iou"],
      "%.3f" % ((float(sys.argv[5]) - float(sys.argv[4])) / int(sys.argv[6])))' \
		"$d/eval.json" "$v" "$s" "$t0" "$t1" "$steps" >>"$tmp/rows"
	tail -1 "$tmp/rows"
	rm -rf "$d"
}

: >"$tmp/rows"
echo "variant seed road-IoU s/step"
for s in $seeds; do
	# the seed's labelled set: BENCH_FRAC of the tiles, the rest set aside
	# as cdp-keyshuffle's "validation" keys (unused), the same for every
	# variant
	"$build/cdp-keyshuffle" -q --seed "$s" --val "$("$PY" -c 'import sys
print(1 - float(sys.argv[1]))' "$frac")" --val-out "$tmp/rest.$s" -o "$tmp/keys.$s" "$tmp/pool"
	k=$(($(wc -l <"$tmp/keys.$s") - 1)) n=$(($(wc -l <"$tmp/rest.$s") - 1))
	[ "$s" = "$(echo $seeds | cut -d' ' -f1)" ] && echo "labelled tiles: $k of $((n + k))"
	for v in $variants; do run "$v" "$s"; done
done
"$PY" - "$tmp/rows" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    v, s, iou, t = line.split()
    rows.setdefault(v, []).append(float(iou))
print("\n%-8s %8s %8s %8s  (road IoU over %d seeds)" % ("variant", "mean", "min", "max",
      max(len(x) for x in rows.values())))
for v, x in rows.items():
    print("%-8s %8.4f %8.4f %8.4f" % (v, statistics.mean(x), min(x), max(x)))
PYEOF
echo "wall time: $(($(date +%s) - start)) s"
