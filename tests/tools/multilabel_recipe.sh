#!/bin/sh
# tests/tools/multilabel_recipe.sh: the multi-label recipe of README.md, its
# commands as written there, run in an empty folder on a smaller set: the
# block after "<!-- recipe: multi-label -->" with 800 chips made 160,
# 10 epochs 4 and batches of 32 16 (each substitution must match, so the
# recipe cannot drift from this test unnoticed). Then what a user relies
# on at each step: per-class counts of the stratified split, validation
# lines with micro F1 and mAP, a best.cdpt, a CSV row with a set per
# held-out chip, and a report of that many chips with per-class AP, micro
# and macro F1 and mAP.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
run_recipe multi-label "--count 800 " "--count 160 " "--epochs 10" "--epochs 4" \
	"--batch 32 " "--batch 16 "
W="$T/work"
grep -q "^cdp-keyshuffle: seed 1, 160 keys (1[23][0-9] train, [23][0-9] validation)\$" "$T/err" ||
	fail "split: $(grep keyshuffle "$T/err")"
for c in 0 1 2; do
	grep -q "^cdp-keyshuffle: class $c: [0-9]* train, [0-9]* validation\$" "$T/err" ||
		fail "no count of class $c: $(grep keyshuffle "$T/err")"
done
grep -q '"type":"val".*"micro_f1":.*"map":' "$W/run/metrics.jsonl" || fail "no multi-label validation"
grep -q "validation at step .* micro_f1=.* macro_f1=.* map=" "$W/run/train.log" ||
	fail "train.log: $(tail -3 "$W/run/train.log")"
[ -f "$W/run/best.cdpt" ] || fail "no best.cdpt"
nval=$(($(wc -l <"$W/val.keys") - 1))
[ "$(sed 1d "$W/val.csv" | wc -l)" -eq "$nval" ] || fail "$(sed 1d "$W/val.csv" | wc -l) CSV rows, want $nval"
grep -q "^path,classes,p_water,p_building,p_tree\$" "$W/val.csv" || fail "CSV header: $(head -1 "$W/val.csv")"
grep -q "^chips: $nval scored, $((160 - nval)) in the reference not predicted\$" "$T/out" ||
	fail "report: $(head -3 "$T/out")"
grep -q "^class  *precision  *recall  *f1  *ap  *support\$" "$T/out" || fail "no per-class table: $(cat "$T/out")"
for m in "micro f1" "macro f1" "map"; do
	grep -q "^$m [01]\.[0-9]*\$" "$T/out" || fail "no $m: $(cat "$T/out")"
done
echo "ok: $(tail -3 "$T/out" | tr '\n' ' ')"
