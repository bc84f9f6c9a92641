#!/bin/sh
# bench/blocks.sh: the block-training experiment of the second source
# (doc/PERFORMANCE.md "Block training"): a 5-class scene classifier trained
# by one process (the baseline) and by j ranks with --sync allreduce,
# average:K and admm:K:RHO, all at the same global batch and the same step
# budget, scored on a held-out test split.
#
# Data: genscene.py's scene tiles, BLOCKS_CHIPS per class (5 classes) of
# BLOCKS_SIDE^2 pixels, packed with cdp-lmdbpack --list (the chips are
# renamed sc_I_0, a key every cdpool version parses), split 80/20 by
# cdp-keyshuffle into training keys and test keys. The test keys are
# never trained on and select nothing: cdp-train validates on them once,
# after the last step, and that confusion matrix gives the test accuracy
# and macro F1 (the mean of the per-class F1 of metrics.jsonl's val line).
# Model: classifier.cfg at BLOCKS_MODEL overrides, SGD with its momentum,
# cosine schedule. Every run: --threads 1 per rank, global batch
# BLOCKS_BATCH (batch BLOCKS_BATCH/j per rank), BLOCKS_EPOCHS passes over
# the training keys, the same seed.
# Time per pass: the training seconds of the epochs before the last (whose
# epoch line also counts the test validation) over their number, from
# metrics.jsonl; speed-up = baseline time / time. With more ranks than
# cores (nproc) the ranks share cores: accuracy stays meaningful, time does
# not, and the table marks those rows.
# Accuracy needs the default size: at BLOCKS_CHIPS=40 BLOCKS_EPOCHS=2
# BLOCKS_BATCH=16 (20 steps, 40 test chips) one process scored 0.30, 0.60,
# 0.30, 0.85 over seeds 1-4 and two ranks with allreduce 0.83, 0.63, 0.33,
# 0.68, with training losses alike: a gap there is the seed's, not the
# sync's.
#   usage: bench/blocks.sh [BUILDDIR]
#   env (the size knobs first):
#     BLOCKS_CHIPS   chips per class (1000)     BLOCKS_EPOCHS  passes (4)
#     BLOCKS_SIDE    chip side in pixels (64)   BLOCKS_BATCH   global batch (64)
#     BLOCKS_MODEL   classifier.cfg overrides (width=8,blocks=3)
#     BLOCKS_RANKS   rank counts beside 1 (2 4)
#     BLOCKS_SYNCS   modes at each rank count
#                    (allreduce average:4 average:16 average:64 admm:4:0.01 admm:16:0.01 admm:16:0.1)
#     BLOCKS_DIR     keep the data and runs here (default: a temporary folder, removed)
#     MPIRUN, PYTHON
# Prints the machine line and a Markdown table on stdout, progress on
# stderr.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
PATH=$build:$PATH
chips=${BLOCKS_CHIPS:-1000}
side=${BLOCKS_SIDE:-64}
epochs=${BLOCKS_EPOCHS:-4}
gb=${BLOCKS_BATCH:-64}
model="$src/share/cdpool/models/classifier.cfg:${BLOCKS_MODEL:-width=8,blocks=3},in_h=$side,in_w=$side"
ranks=${BLOCKS_RANKS:-2 4}
syncs=${BLOCKS_SYNCS:-allreduce average:4 average:16 average:64 admm:4:0.01 admm:16:0.01 admm:16:0.1}
PY=${PYTHON:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
flags="--oversubscribe --bind-to none"
[ "$(id -u)" -ne 0 ] || flags="$flags --allow-run-as-root"
cores=$(nproc)
export CDP_DIST_TIMEOUT=600
if [ -n "${BLOCKS_DIR:-}" ]; then
	D=$BLOCKS_DIR
	mkdir -p "$D"
else
	D=$(mktemp -d "${TMPDIR:-/tmp}/cdpblocks.XXXXXX")
	trap 'rm -rf "$D"' EXIT
fi
say() { echo "blocks: $*" >&2; }
for j in $ranks; do
	[ $((gb % j)) -eq 0 ] || { say "the global batch $gb is not a multiple of $j ranks"; exit 2; }
done

if [ ! -s "$D/test.keys" ]; then
	say "generating $((5 * chips)) scene tiles of ${side}x$side"
	rm -rf "$D/chips" "$D/pool"
	"$PY" "$src/share/cdpool/examples/genscene.py" --scene-tiles "$D/chips" \
		--count $((5 * chips)) --size "$side" --seed 1
	# chip i of the list becomes sc_i_0.tif, a key every tool parses
	awk '{ print "sc_" NR - 1 "_0.tif", $2 }' "$D/chips/list.txt" >"$D/chips/keys.txt"
	(cd "$D/chips" && awk '{ print $1, "sc_" NR - 1 "_0.tif" }' list.txt | xargs -n 2 mv)
	cdp-lmdbpack -q --classes residential,road,green,lake,land --list "$D/chips/keys.txt" "$D/pool"
	cdp-keyshuffle -q --seed 1 --val 0.2 --val-out "$D/test.keys" -o "$D/train.keys" "$D/pool"
fi
ntrain=$(($(wc -l <"$D/train.keys") - 1))
ntest=$(($(wc -l <"$D/test.keys") - 1))
spe=$((ntrain / gb))
steps=$((spe * epochs))
say "$ntrain training and $ntest test chips, $steps steps ($epochs passes of $spe) at global batch $gb"

# run NAME J SYNC: one training run into $D/NAME
run() {
	rm -rf "${D:?}/$1"
	launch=
	[ "$2" -eq 1 ] || launch="$mpirun $flags -np $2"
	say "$1"
	# shellcheck disable=SC2086
	$launch cdp-train -q --db "$D/pool" --keys "$D/train.keys" --val-keys "$D/test.keys" \
		--model "$model" --out "$D/$1" --batch $((gb / $2)) --steps "$steps" \
		--val-every "$steps" --sync "$3" --threads 1 --log-every "$spe" --seed 1
}
# score NAME: "accuracy macro_f1 seconds_per_pass" of run NAME
score() {
	"$PY" - "$D/$1/metrics.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
val = [l for l in lines if l["type"] == "val"][-1]
f1 = [v for v in val["f1"] if v is not None]
ep = [l["seconds"] for l in lines if l["type"] == "epoch"]
per = ep[-2] / (len(ep) - 1) if len(ep) > 1 else ep[-1]
print("%.4f %.4f %.3f" % (val["accuracy"], sum(f1) / len(f1), per))
EOF
}

. "$src/bench/train_lib.sh"     # machine
run base 1 allreduce
# shellcheck disable=SC2046  # three numbers into $1 $2 $3
set -- $(score base)
bacc=$1 bt=$3
machine
echo
echo "| ranks | --sync | test accuracy | macro F1 | s per pass | speed-up | accuracy gap |"
echo "|---:|:---|---:|---:|---:|---:|---:|"
echo "| 1 | (one process) | $1 | $2 | $3 | 1.00 | 0.0000 |"
for j in $ranks; do
	for s in $syncs; do
		run "j$j.$s" "$j" "$s"
		# shellcheck disable=SC2046
		set -- $(score "j$j.$s")
		note=
		[ "$j" -le "$cores" ] || note=" (j > $cores cores)"
		awk -v j="$j" -v s="$s" -v a="$1" -v f="$2" -v t="$3" -v ba="$bacc" -v bt="$bt" -v n="$note" \
			'BEGIN { printf "| %d | %s | %s | %s | %s | %.2f%s | %+.4f |\n", j, s, a, f, t, bt / t, n, a - ba }'
	done
done
say "done: $ntrain training, $ntest test chips, $steps steps at global batch $gb, $(uptime)"
