#!/bin/sh
# cdp-train's loss.png explains itself (plotcheck.py reads it with GDAL):
# 960x600 with a title naming the run, axes with tick values and labels, a
# legend, the training loss raw and smoothed, the validation loss and
# metric, the learning rate in its own small panel and a dashed line where
# the run was resumed (metrics.jsonl's "resume" line). The same run under
# two names gives plots that differ only in the title band, the longer name
# the wider title.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --val-keys $T/val.keys --threads 1 -q --batch 4 --lr 0.01 --warmup 2 --log-every 1"
for name in r a-much-longer-run-name; do
	cdp-train $C --model "$UNET" --out "$T/$name" --epochs 2 --checkpoint-every 6 ||
		fail "$name: training failed"
	cdp-train $C --out "$T/$name" --epochs 5 --resume || fail "$name: resume failed"
done
[ "$(grep -c '^{"type":"resume","step":12,"epoch":2}$' "$T/r/metrics.jsonl")" -eq 1 ] ||
	fail "metrics.jsonl records no resume at step 12: $(grep -v '"type":"step"' "$T/r/metrics.jsonl")"
"$PYTHON" "$CDP_SRCDIR/tests/train/plotcheck.py" "$T/r/loss.png" \
	"$T/a-much-longer-run-name/loss.png" 12 30 || fail "loss.png does not explain itself"
# A resume keeps the earlier run's lines whole, however long: a validation
# line of thousands of classes passes 64 KiB (it was cut there, its
# tail dropped, the file left with a line of broken JSON).
cdp-train $C --model "$UNET" --out "$T/long" --epochs 2 --checkpoint-every 6 ||
	fail "long: training failed"
pad=$(head -c 70000 /dev/zero | tr '\0' 'x')
long="{\"type\":\"val\",\"step\":6,\"epoch\":1,\"pad\":\"$pad\",\"loss\":0.5,\"metric\":0.25}"
printf '%s\n' "$long" >> "$T/long/metrics.jsonl"
cdp-train $C --out "$T/long" --epochs 3 --resume || fail "long: resume failed"
[ "$(grep -c -x -F "$long" "$T/long/metrics.jsonl")" -eq 1 ] ||
	fail "the 70 KB line did not survive the resume whole"
"$PYTHON" -c 'import json, sys
for l in open(sys.argv[1]): json.loads(l)' "$T/long/metrics.jsonl" ||
	fail "metrics.jsonl is not one JSON object a line after the resume"
