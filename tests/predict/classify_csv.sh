#!/bin/sh
# tests/predict/classify_csv.sh: the CSV of cdp-predict's classifier as
# cdp-evaluate reads it back (without PyTorch: classify.sh checks the
# probabilities themselves):
#  - the header is path,class,p_NAME... with the checkpoint's class names
#    (the folders', from cdp-lmdbpack --folders), the class column the name
#    of the highest probability; a checkpoint without names gives p_0,...
#    and ids;
#  - class ids mean the checkpoint's (case 11 of issue 25): chips from
#    folders that lack a class score as the rows say, counted here from the
#    CSV against the folder each chip lies in (before, the folders present
#    were renumbered and the accuracy fell to 0);
#  - a chip whose name holds a comma, a quote and a newline is written
#    quoted and read back;
#  - a UTF-8 byte order mark before a list file is skipped; a list in the
#    current folder gives paths as the folder operand does (no "./");
#  - a head of 300 classes on labels 0 to 4: cdp-train warns in one line;
#    its CSV holds every class (a class map of uint8 ids is refused);
#  - refusals in one line: a raster where chips are expected with -o x.csv,
#    a binary file given as the list; --prob or --cog with a CSV (exit 2).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
. "$CDP_SRCDIR/tests/predict/chips.sh"
cat >"$T/check.py" <<'PYEOF'
import csv, sys
# check.py CSV HEADER...: the header, and every class the arg max by name
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == sys.argv[2:], rows[0]
names = [c[2:] for c in rows[0][2:]]
for r in rows[1:]:
    p = [float(v) for v in r[2:]]
    assert r[1] == names[p.index(max(p))], r
print("%d rows, classes %s" % (len(rows) - 1, names))
PYEOF

echo "== the checkpoint's class names in the header and the class column"
cdp-predict -q --threads 1 "$T/run" "$T/F" -o "$T/f.csv"
"$PYTHON" "$T/check.py" "$T/f.csv" path class p_green p_lake p_land p_residential p_road ||
	fail "named CSV: $(head -2 "$T/f.csv")"
cdp-evaluate --json "$T/f.csv" "$T/F" >"$T/f.json" || fail "cdp-evaluate of its own CSV"
grep -q '"chips":20,"unpredicted":0' "$T/f.json" || fail "$(cat "$T/f.json")"

echo "== a list in the current folder gives paths as a folder operand does"
# "F/lake/x.tif" from val.txt and ./val.txt as from the folder F, never
# "./F/lake/x.tif" (cdp-predict(1): the path as found)
(cd "$T" && LC_ALL=C ls F/lake/*.tif | head -2 >val.txt &&
	cdp-predict -q --threads 1 run val.txt -o - | sed 1d | cut -d, -f1 >l.paths &&
	cdp-predict -q --threads 1 run ./val.txt -o - | sed 1d | cut -d, -f1 >l2.paths &&
	cdp-predict -q --threads 1 run F -o - | sed 1d | cut -d, -f1 | grep '^F/lake/' | head -2 >f.paths) ||
	fail "cdp-predict of a list in the current folder"
cmp -s "$T/l.paths" "$T/val.txt" || fail "list paths: $(cat "$T/l.paths")"
cmp -s "$T/l2.paths" "$T/val.txt" || fail "./val.txt paths: $(cat "$T/l2.paths")"
cmp -s "$T/f.paths" "$T/val.txt" || fail "folder paths: $(cat "$T/f.paths")"

echo "== folders that lack a class"
# the chips of every class but the one predicted most, in folders without it
gone=$(sed 1d "$T/f.csv" | cut -d, -f2 | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }')
cp -r "$T/F" "$T/G" && rm -r "$T/G/$gone"
cdp-predict -q --threads 1 "$T/run" "$T/G" -o "$T/g.csv"
cdp-evaluate --json "$T/g.csv" "$T/G" >"$T/g.json" || fail "cdp-evaluate without '$gone'"
"$PYTHON" - "$T/g.csv" "$T/g.json" <<'PYEOF' || fail "without '$gone': $(cat "$T/g.json")"
import csv, json, os, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
names = [c[2:] for c in rows[0][2:]]
got = json.load(open(sys.argv[2]))
assert got["names"] == names, got["names"]
conf = [[0] * len(names) for _ in names]
for r in rows[1:]:
    conf[names.index(os.path.basename(os.path.dirname(r[0])))][names.index(r[1])] += 1
assert got["confusion"] == conf, (got["confusion"], conf)
acc = sum(conf[i][i] for i in range(len(names))) / float(len(rows) - 1)
assert abs(got["accuracy"] - acc) < 1e-6, (got["accuracy"], acc)
print("without a class: accuracy %.4f as the rows say" % acc)
PYEOF

echo "== a chip named with a comma, a quote and a newline"
mkdir -p "$T/H/lake" "$T/H/road"
cp "$T/F/lake/$(ls "$T/F/lake" | head -1)" "$T/H/lake/o,\"d
d.tif"
cp "$T/F/road/$(ls "$T/F/road" | head -1)" "$T/H/road/x.tif"
cdp-predict -q --threads 1 "$T/run" "$T/H" -o "$T/h.csv"
grep -q '^"[^"]*/H/lake/o,""d$' "$T/h.csv" || fail "not quoted: $(cat "$T/h.csv")"
cdp-evaluate --json "$T/h.csv" "$T/H" >"$T/h.json" || fail "cdp-evaluate of the odd name"
grep -q '"chips":2,"unpredicted":0' "$T/h.json" || fail "$(cat "$T/h.json")"

echo "== a checkpoint without class names; a list with a byte order mark"
cdp-lmdbpack -q --list "$T/chips/list.txt" "$T/lpool"
classifier lpool lrun
printf '\357\273\277' | cat - "$T/chips/list.txt" >"$T/chips/bom.txt"
cdp-predict -q --threads 1 "$T/lrun" "$T/chips/bom.txt" -o "$T/l.csv" || fail "BOM list"
"$PYTHON" "$T/check.py" "$T/l.csv" path class p_0 p_1 p_2 p_3 p_4 ||
	fail "unnamed CSV: $(head -2 "$T/l.csv")"
cdp-evaluate --json "$T/l.csv" "$T/chips/bom.txt" >"$T/l.json" || fail "cdp-evaluate, ids"
grep -q '"names":\["0","1","2","3","4"\],"chips":20,' "$T/l.json" || fail "$(cat "$T/l.json")"

echo "== a head of more classes than uint8 ids, larger than the labels"
# the pool's labels are 0 to 4: cdp-train warns of the head of 300 (a cfg's
# default classes= left as it was) and trains; its CSV holds 300 columns of
# probabilities (the uint8 limit is a raster's), a class map is refused
cdp-train -q --db "$T/pool" --keys "$T/run.keys" --out "$T/big" --batch 4 --steps 1 \
	--threads 1 --model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=1,classes=300" \
	2>"$T/big.err" || fail "cdp-train of 300 classes: $(cat "$T/big.err")"
[ "$(cat "$T/big.err")" = "cdp-train: warning: the model has 300 classes, the labels of '$T/pool' go up to 4 (meta 'classes'): give classes=5 (--model CFG:classes=5) unless the others are to come" ] ||
	fail "no warning of the head of 300: $(cat "$T/big.err")"
cdp-predict -q --threads 1 "$T/big" "$T/chips/list.txt" -o "$T/big.csv" || fail "CSV of 300 classes"
[ "$(head -1 "$T/big.csv" | tr ',' '\n' | wc -l)" -eq 302 ] && [ "$(wc -l <"$T/big.csv")" -eq 21 ] ||
	fail "the CSV of 300 classes: $(head -c 200 "$T/big.csv")"
expect_fail 1 "^cdp-predict: '$T/big/checkpoint.cdpt': 300 classes do not fit class ids of uint8 (use --prob)\$" \
	cdp-predict -q --threads 1 "$T/big" "$(ls "$T"/F/lake/*.tif | head -1)" -o "$T/big.tif"

echo "== refusals"
# options a CSV makes meaningless: usage errors (before: accepted, doing nothing)
expect_fail 2 "^cdp-predict: --prob is for a GeoTIFF output, not the CSV that -o '$T/x.csv' names (which holds every class's probability)\$" \
	cdp-predict -q --prob "$T/run" "$T/chips/list.txt" -o "$T/x.csv"
expect_fail 2 "^cdp-predict: --cog is for a GeoTIFF output, not the CSV that -o '-' names\$" \
	cdp-predict -q --cog "$T/run" "$T/chips/list.txt" -o -
[ ! -e "$T/x.csv" ] || fail "a refused run wrote '$T/x.csv'"
expect_fail 1 "^cdp-predict: '$T/F/lake/.*' is a raster, but -o '$T/x.csv' asks for a CSV of chips: give a folder of chips or a list file (IMAGE \[CLASS\] lines), or -o OUT.tif to classify the scene\$" \
	cdp-predict -q "$T/run" "$(ls "$T"/F/lake/*.tif | head -1)" -o "$T/x.csv"
# a TIFF's first bytes that GDAL cannot open: once "cannot open './II*'"
printf 'II*\000\010\000\000\000' >"$T/cut.tif"
expect_fail 1 "^cdp-predict: '$T/cut.tif': line 1: binary data, not a list of chips (IMAGE \[CLASS\] lines)\$" \
	cdp-predict -q "$T/run" "$T/cut.tif" -o "$T/x.csv"
! ls "$T"/x.csv* >/dev/null 2>&1 || fail "a failed run left $(ls "$T"/x.csv*)"
echo ok
