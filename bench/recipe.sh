#!/bin/sh
# bench/recipe.sh: what each piece of the training recipe buys (issue 30's
# "effect, measured"), on the demo's road task and on the scene chips, with
# the same step budget for every row and several seeds per row.
#
# Road task: three generated 3-band scenes with roads (genscene.py, roads
# about 2-3% of the pixels), scenes 1 and 2 cut into 128x128 tiles for
# training, scene 3 held out: predicted whole by cdp-predict and scored by
# cdp-evaluate (road IoU). Model unet.cfg width=8 depth=3, adamw, batch 8,
# BENCH_ROAD_STEPS steps. Chips: genscene's 5-class 64x64 scene chips,
# packed from class folders, a stratified fifth held out, classifier.cfg,
# batch 32, BENCH_CHIP_STEPS steps; the score is cdp-evaluate's accuracy of
# cdp-predict's CSV on the held-out chips.
#
# Rows: the shipped recipe (baseline), then one change each: focal loss,
# ce+dice, oversampled road tiles (cdp-keyshuffle --oversample 1:4),
# photometric augmentation (brightness, contrast, gamma, noise), EMA of the
# weights, test-time flips (cdp-predict --tta flips); for the chips label
# smoothing, mixup (mixup_alpha=0.2) and cutmix (cutmix_alpha=1.0). Then "combined":
# every change whose mean beat the baseline's, all at once (of the loss
# rows, which replace one another, only the best). The summary also names
# the changes that beat it by more than the larger of the two spreads (max
# - min over the seeds): only those may change a shipped default.
# Each run prints "ROW SEED SCORE S/STEP" as it ends (stderr), and each row
# the mean, min and max of the score over the seeds and the
# median wall time per training step (validation excluded: no --val-keys).
#   usage: bench/recipe.sh [BUILDDIR]
#   env: BENCH_SEEDS ("1 2 3"), BENCH_TASKS ("road chips"), BENCH_ROWS
#        (all: a space-separated subset of the row names below),
#        BENCH_ROAD_STEPS (300), BENCH_CHIP_STEPS (40: at 300 steps every row
#        scores 0.99-1.0 and the rows cannot differ), BENCH_THREADS (nproc),
#        BENCH_ROAD_SIZE (1024: scene side)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
seeds=${BENCH_SEEDS:-1 2 3}
tasks=${BENCH_TASKS:-road chips}
rows_only=${BENCH_ROWS:-}
road_steps=${BENCH_ROAD_STEPS:-300}
chip_steps=${BENCH_CHIP_STEPS:-40}
T=${BENCH_THREADS:-$(nproc)}
size=${BENCH_ROAD_SIZE:-1024}
PY=/usr/bin/python3
gen=$src/share/cdpool/examples/genscene.py
models=$src/share/cdpool/models
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
	[ -x "$build/$p" ] || { echo "recipe.sh: no '$build/$p' (build it first)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
photo=aug_brightness=0.2,aug_contrast=0.2,aug_gamma=0.2,aug_noise=0.05

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "seeds: $seeds; road: $road_steps steps, chips: $chip_steps steps; threads $T"

# which rows run: all, or those named in BENCH_ROWS (baseline always)
want() {
	[ -z "$rows_only" ] || [ "$1" = baseline ] || [ "$1" = combined ] && return 0
	case " $rows_only " in *" $1 "*) return 0 ;; esac
	return 1
}

# road ROW SEED MODELOPTS SHUFFLEOPTS PREDICTOPTS: trains, predicts scene
# 3, appends "ROW SEED IOU SECONDS_PER_STEP" to $tmp/road.rows
road() {
	row=$1 s=$2 mo=$3 so=$4 po=$5 d=$tmp/road/$1.$2
	mkdir -p "$d"
	# shellcheck disable=SC2086
	"$build/cdp-keyshuffle" -q --seed "$s" $so -o "$d/keys" "$tmp/road/pool"
	t0=$(date +%s.%N)
	"$build/cdp-train" --db "$tmp/road/pool" --keys "$d/keys" --out "$d/run" --seed "$s" \
		--model "$models/unet.cfg:width=8,depth=3,in_h=128,in_w=128,warmup=20$mo" \
		--steps "$road_steps" --batch 8 --threads "$T" --lr 0.003 --log-every 1000 \
		>"$d/log" 2>&1 || { tail -3 "$d/log" >&2; exit 1; }
	t1=$(date +%s.%N)
	# shellcheck disable=SC2086
	"$build/cdp-predict" -q --threads "$T" $po "$d/run" "$tmp/road/scene3.tif" -o "$d/pred.tif"
	"$build/cdp-evaluate" --json "$d/pred.tif" "$tmp/road/scene3_mask.tif" >"$d/eval.json"
	"$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))["per_class"][1]
print(sys.argv[2], sys.argv[3], c["iou"], (float(sys.argv[5]) - float(sys.argv[4])) / int(sys.argv[6]))' \
		"$d/eval.json" "$row" "$s" "$t0" "$t1" "$road_steps" | tee -a "$tmp/road.rows" >&2
	rm -rf "$d"
}

chips() {
	row=$1 s=$2 mo=$3 so=$4 po=$5 d=$tmp/chips/$1.$2
	mkdir -p "$d"
	# shellcheck disable=SC2086
	"$build/cdp-keyshuffle" -q --seed "$s" --val 0.2 --stratify --val-out "$d/val" $so \
		-o "$d/keys" "$tmp/chips/pool"
	t0=$(date +%s.%N)
	"$build/cdp-train" --db "$tmp/chips/pool" --keys "$d/keys" --out "$d/run" --seed "$s" \
		--model "$models/classifier.cfg:classes=5$mo" --steps "$chip_steps" --batch 32 \
		--threads "$T" --log-every 1000 >"$d/log" 2>&1 || { tail -3 "$d/log" >&2; exit 1; }
	t1=$(date +%s.%N)
	tail -n +2 "$d/val" | sed "s|.*|$tmp/chips/scenes/&.tif|" >"$d/val.txt"
	# shellcheck disable=SC2086
	"$build/cdp-predict" -q --threads "$T" $po "$d/run" "$d/val.txt" -o "$d/val.csv"
	"$build/cdp-evaluate" --json "$d/val.csv" "$tmp/chips/scenes" >"$d/eval.json"
	"$PY" -c 'import json, sys
print(sys.argv[2], sys.argv[3], json.load(open(sys.argv[1]))["accuracy"],
      (float(sys.argv[5]) - float(sys.argv[4])) / int(sys.argv[6]))' \
		"$d/eval.json" "$row" "$s" "$t0" "$t1" "$chip_steps" | tee -a "$tmp/chips.rows" >&2
	rm -rf "$d"
}

# summary TASK: the table, and the names of the rows that beat the baseline
summary() {
	"$PY" - "$tmp/$1.rows" "$1" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, s, v, t = line.split()
    rows.setdefault(r, []).append((float(v), float(t)))
score = "road IoU" if sys.argv[2] == "road" else "accuracy"
print("\n%s: %-10s %8s %8s %8s %9s" % (sys.argv[2], "row", "mean", "min", "max", "s/step"),
      file=sys.stderr)
base = rows["baseline"]
bm, bs = statistics.mean(v for v, _ in base), max(v for v, _ in base) - min(v for v, _ in base)
better, clear, means = [], [], {}
for r, v in rows.items():
    vals = [x for x, _ in v]
    m, sp = statistics.mean(vals), max(vals) - min(vals)
    means[r] = m
    print("%s: %-10s %8.4f %8.4f %8.4f %9.3f%s" % (sys.argv[2], r, m, min(vals), max(vals),
          statistics.median(t for _, t in v), "  (%s, %d seeds)" % (score, len(vals))
          if r == "baseline" else ""), file=sys.stderr)
    if r not in ("baseline", "combined") and m > bm:
        better.append(r)
        if m - bm > max(sp, bs):
            clear.append(r)
if len(rows) > 1:
    print("%s: beat the baseline's mean: %s; by more than the seeds' spread (max - min of "
          "either row): %s" % (sys.argv[2], " ".join(better) or "none", " ".join(clear) or "none"),
          file=sys.stderr)
# the loss rows replace one another: only the best of them joins the rest
losses = sorted((r for r in better if r in ("focal", "cedice", "smooth")), key=means.get)
print(" ".join(r for r in better if r not in losses[:-1]))
PYEOF
}

# run_rows TASK: every wanted row over the seeds, then the combination
run_rows() {
	task=$1
	: >"$tmp/$task.rows"
	for row in $rowlist; do
		want "$row" || continue
		eval "spec=\$spec_$row"
		mo=$(echo "$spec" | cut -d'|' -f1) so=$(echo "$spec" | cut -d'|' -f2)
		po=$(echo "$spec" | cut -d'|' -f3)
		for s in $seeds; do "$task" "$row" "$s" "$mo" "$so" "$po"; done
	done
	better=$(summary "$task" 2>/dev/null)
	if [ -n "$better" ]; then
		mo= so= po=
		for row in $better; do
			eval "spec=\$spec_$row"
			mo="$mo$(echo "$spec" | cut -d'|' -f1)"
			so="$so $(echo "$spec" | cut -d'|' -f2)"
			po="$po $(echo "$spec" | cut -d'|' -f3)"
		done
		echo "$task: combined = $better"
		for s in $seeds; do "$task" combined "$s" "$mo" "$so" "$po"; done
	else
		echo "$task: no single change beat the baseline's mean"
	fi
	summary "$task" >/dev/null
}

case " $tasks " in *" road "*)
	mkdir -p "$tmp/road"
	for s in 1 2 3; do
		"$PY" "$gen" "$tmp/road/scene$s.tif" --size "$size" --seed "$((s + 20))" \
			--mask "$tmp/road/scene${s}_mask.tif" >/dev/null
	done
	"$build/cdp-tile" --size 128 --label-suffix _mask "$tmp/road/scene1.tif" \
		"$tmp/road/scene2.tif" | "$build/cdp-lmdbpack" -q "$tmp/road/pool"
	# MODEL OVERRIDES | KEYSHUFFLE OPTIONS | PREDICT OPTIONS
	spec_baseline='||'
	spec_focal=',loss=focal,outputs=1||'
	spec_cedice=',loss=ce+dice||'
	spec_oversample='|--oversample 1:4|'
	spec_photo=",$photo||"
	spec_ema=',ema=0.99||'
	spec_tta='||--tta flips'
	rowlist="baseline focal cedice oversample photo ema tta"
	run_rows road
	;;
esac

case " $tasks " in *" chips "*)
	mkdir -p "$tmp/chips"
	(cd "$tmp/chips" && "$PY" "$gen" --scene-tiles chips --count 1000 --size 64 --seed 1 >/dev/null)
	names="residential road green lake land"
	while read -r f k; do
		c=$(echo $names | cut -d' ' -f$((k + 1)))
		mkdir -p "$tmp/chips/scenes/$c"
		mv "$tmp/chips/chips/$f" "$tmp/chips/scenes/$c/"
	done <"$tmp/chips/chips/list.txt"
	"$build/cdp-lmdbpack" -q --folders "$tmp/chips/scenes" "$tmp/chips/pool"
	spec_baseline='||'
	spec_focal=',loss=focal||'
	spec_smooth=',label_smoothing=0.1||'
	spec_photo=",$photo||"
	spec_ema=',ema=0.99||'
	spec_tta='||--tta flips'
	spec_mixup=',mixup_alpha=0.2||'
	spec_cutmix=',cutmix_alpha=1.0||'
	rowlist="baseline focal smooth photo ema tta mixup cutmix"
	run_rows chips
	;;
esac
