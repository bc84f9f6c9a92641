#!/bin/sh
# tests/predict/evaluate_csv.sh: cdp-evaluate on a classifier's CSV
# (evaluate_csv.c), against a folder of class folders and a list file:
#  - the confusion matrix, per-class precision, recall, F1 and support,
#    accuracy, macro F1 and Cohen's kappa equal those computed here with
#    NumPy from the same labels (JSON), with classes numbered by the sorted
#    folder names and named by them, or by --classes names for a list;
#  - the text report states the same numbers; a kappa of -0 (-8.5e-17 in
#    doubles) prints as 0.0000, not -0.0000;
#  - paths match through the file system (a relative CSV path, a "./" one);
#    reference chips without a row are counted as not predicted;
#  - the CSV of cdp-predict (header path,class,p_NAME...; the class column a
#    name) and the older one (path,class,p0,...; ids) give the same report;
#  - class ids mean the checkpoint's: folders that lack one class (case 11
#    of issue 25: it was renumbered from the folders present, accuracy 0)
#    are matched by name and score as NumPy does; an older CSV without names
#    is refused against them, and accepted with --classes names;
#  - a path holding a comma, a quote and a newline (quoted as RFC 4180
#    writes it) and a UTF-8 byte order mark before the header or a list;
#  - refusals: a row that is not a reference chip, a row twice, a class
#    outside the CSV's, a class folder or list class the CSV does not name,
#    --classes names other than the header's, a --classes count other than
#    the CSV's columns (an older CSV's too, which was once scored as that
#    many classes, or refused naming the count as the CSV's), --png (a
#    CSV's report draws nothing).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
NAMES="green lake land residential road"
# 30 chips, 6 per class (empty files: only their paths matter)
for n in $NAMES; do
	mkdir -p "$T/F/$n"
	for i in 0 1 2 3 4 5; do : >"$T/F/$n/${n}_$i.tif"; done
done
# predictions: a fixed confusion drawn by Python, written as cdp-predict does
"$PYTHON" - "$T" <<'PYEOF'
import json, os, sys
import numpy as np
T = sys.argv[1]
names = "green lake land residential road".split()
rng = np.random.default_rng(3)
rows, truth, pred = [], [], []
# chip 0 of a class relative to the CSV, the others absolute with a "./"
# (the same file, however written); top is the folder tree, F or G
def chip(top, n, i):
    return "%s/%s/%s_%d.tif" % (top, n, n, i) if i == 0 else "%s/%s/%s/./%s_%d.tif" % (T, top, n, n, i)
for c, n in enumerate(names):
    for i in range(6):
        if n == "road" and i == 5:
            continue                       # one chip not predicted
        p = c if rng.random() < 0.6 else int(rng.integers(5))
        prob = np.full(5, 0.05); prob[p] = 0.8
        rows.append((chip("F", n, i), p, ",".join("%.6f" % x for x in prob), n, i))
        truth.append(c); pred.append(p)
open(os.path.join(T, "p.csv"), "w").write("path,class," + ",".join("p_" + n for n in names) + "\n"
     + "".join("%s,%s,%s\n" % (r[0], names[r[1]], r[2]) for r in rows))
open(os.path.join(T, "old.csv"), "w").write("path,class,p0,p1,p2,p3,p4\n"
     + "".join("%s,%d,%s\n" % r[:3] for r in rows))
# the folders without "land": its rows left out, the others' paths moved to G
G = [(r, t, q) for r, t, q in zip(rows, truth, pred) if names[t] != "land"]
open(os.path.join(T, "g.csv"), "w").write("path,class," + ",".join("p_" + n for n in names) + "\n"
     + "".join("%s,%s,%s\n" % (chip("G", r[3], r[4]), names[r[1]], r[2]) for r, t, q in G))
cg = np.zeros((5, 5), np.int64)
for r, t, q in G:
    cg[t, q] += 1
n = cg.sum()
po = np.trace(cg) / n
pe = (cg.sum(0) * cg.sum(1)).sum() / n ** 2
json.dump({"confusion": cg.tolist(), "accuracy": po, "kappa": (po - pe) / (1 - pe)},
          open(os.path.join(T, "g_want.json"), "w"))
with open(os.path.join(T, "list.txt"), "w") as f:
    for c, n in enumerate(names):
        for i in range(6):
            f.write("F/%s/%s_%d.tif %s\n" % (n, n, i, n))
K = 5
conf = np.zeros((K, K), np.int64)
for t, p in zip(truth, pred):
    conf[t, p] += 1
tp = np.diag(conf).astype(float)
prec = [tp[c] / conf[:, c].sum() if conf[:, c].sum() else None for c in range(K)]
rec = tp / conf.sum(1)
f1 = 2 * tp / (conf.sum(0) + conf.sum(1))
n = conf.sum()
po = tp.sum() / n
pe = (conf.sum(0) * conf.sum(1)).sum() / n ** 2
json.dump({"confusion": conf.tolist(), "precision": prec, "recall": rec.tolist(),
           "f1": f1.tolist(), "support": conf.sum(1).tolist(), "accuracy": po,
           "macro_f1": f1.mean(), "kappa": (po - pe) / (1 - pe), "chips": int(n)},
          open(os.path.join(T, "want.json"), "w"))
PYEOF
cat >"$T/cmp.py" <<'PYEOF'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
near = lambda a, b: (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-6)
assert got["names"] == "green lake land residential road".split(), got["names"]
assert got["confusion"] == want["confusion"], (got["confusion"], want["confusion"])
assert got["chips"] == want["chips"] and got["unpredicted"] == 1, (got["chips"], got["unpredicted"])
for c, m in enumerate(got["per_class"]):
    for key in ("precision", "recall", "f1"):
        assert near(m[key], want[key][c]), (c, key, m[key], want[key][c])
    assert m["support"] == want["support"][c]
for key in ("accuracy", "macro_f1", "kappa"):
    assert near(got[key], want[key]), (key, got[key], want[key])
print("kappa %.4f, macro f1 %.4f, accuracy %.4f as NumPy's" % (got["kappa"], got["macro_f1"],
                                                              got["accuracy"]))
PYEOF
cd "$T"
echo "== against the folders"
cdp-evaluate --json p.csv F >"$T/f.json"
"$PYTHON" "$T/cmp.py" "$T/f.json" "$T/want.json" || fail "folder: $(cat "$T/f.json")"
echo "== against the list"
cdp-evaluate --json --classes green,lake,land,residential,road p.csv list.txt >"$T/l.json"
"$PYTHON" "$T/cmp.py" "$T/l.json" "$T/want.json" || fail "list: $(cat "$T/l.json")"
echo "== text"
cdp-evaluate p.csv F >"$T/f.txt"
"$PYTHON" - "$T/f.txt" "$T/want.json" <<'PYEOF' || fail "text: $(cat "$T/f.txt")"
import json, sys
txt, want = open(sys.argv[1]).read().split("\n"), json.load(open(sys.argv[2]))
assert txt[0] == "chips: 29 scored, 1 in the reference not predicted", txt[0]
rows = [l.split() for l in txt[3:8]]
assert [r[0] for r in rows] == "green lake land residential road".split()
assert [[int(x) for x in r[1:]] for r in rows] == want["confusion"]
for c, l in enumerate(txt[9:14]):
    f = l.split()
    assert f[3] == "%.4f" % want["f1"][c] and int(f[4]) == want["support"][c], l
tail = dict(l.rsplit(" ", 1) for l in txt[14:17])
for k, key in (("accuracy", "accuracy"), ("macro f1", "macro_f1"), ("kappa", "kappa")):
    assert tail[k] == "%.4f" % want[key], (k, tail[k])
PYEOF
echo "== the older CSV (p0,...), by position"
cdp-evaluate --json old.csv F >"$T/o.json"
"$PYTHON" "$T/cmp.py" "$T/o.json" "$T/want.json" || fail "old CSV, folders: $(cat "$T/o.json")"
cdp-evaluate --json --classes green,lake,land,residential,road old.csv list.txt >"$T/ol.json"
"$PYTHON" "$T/cmp.py" "$T/ol.json" "$T/want.json" || fail "old CSV, list: $(cat "$T/ol.json")"
echo "== the list's class names, from the header"
cdp-evaluate --json p.csv list.txt >"$T/n.json"
"$PYTHON" "$T/cmp.py" "$T/n.json" "$T/want.json" || fail "list by name: $(cat "$T/n.json")"
echo "== a byte order mark"
printf '\357\273\277' | cat - p.csv >bom.csv
printf '\357\273\277' | cat - list.txt >bom.txt
cdp-evaluate --json bom.csv bom.txt >"$T/b.json" || fail "BOM: $(cat "$T/b.json")"
"$PYTHON" "$T/cmp.py" "$T/b.json" "$T/want.json" || fail "BOM: $(cat "$T/b.json")"

echo "== a kappa of -0 prints as 0"
# 4 chips of a (3 predicted a), 16 of b (4 predicted b): the prediction is
# independent of the reference, and (po - pe) / (1 - pe) is -8.5e-17 in
# doubles, once printed "kappa -0.0000"
mkdir -p K/a K/b
{
	echo "path,class,p_a,p_b"
	for i in 0 1 2 3; do
		: >"K/a/a_$i.tif"
		[ "$i" -lt 3 ] && echo "K/a/a_$i.tif,a,0.9,0.1" || echo "K/a/a_$i.tif,b,0.1,0.9"
	done
	for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
		: >"K/b/b_$i.tif"
		[ "$i" -lt 12 ] && echo "K/b/b_$i.tif,a,0.9,0.1" || echo "K/b/b_$i.tif,b,0.1,0.9"
	done
} >k.csv
cdp-evaluate k.csv K >"$T/k.txt" || fail "kappa 0: $(cat "$T/k.txt")"
grep -qx "kappa 0.0000" "$T/k.txt" || fail "kappa 0: $(grep kappa "$T/k.txt")"
cdp-evaluate --json k.csv K >"$T/k.json" || fail "kappa 0: $(cat "$T/k.json")"
grep -q '"kappa":0.000000}' "$T/k.json" || fail "kappa 0 (JSON): $(cat "$T/k.json")"

echo "== folders that lack a class"
cp -r F G && rm -r G/land
cdp-evaluate --json g.csv G >"$T/g.json" || fail "folders without land"
"$PYTHON" - "$T/g.json" "$T/g_want.json" <<'PYEOF' || fail "folders without land: $(cat "$T/g.json")"
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert got["names"] == "green lake land residential road".split(), got["names"]
assert got["confusion"] == want["confusion"], (got["confusion"], want["confusion"])
for key in ("accuracy", "kappa"):
    assert abs(got[key] - want[key]) < 1e-6, (key, got[key], want[key])
assert got["accuracy"] > 0.5, got["accuracy"]
print("without land: accuracy %.4f, kappa %.4f as NumPy's" % (got["accuracy"], got["kappa"]))
PYEOF
sed '1s/p_[a-z]*/p/g; 1s/p,p,p,p,p/p0,p1,p2,p3,p4/' g.csv >gold.csv
sed -i '2,$s/,green,/,0,/; 2,$s/,lake,/,1,/; 2,$s/,land,/,2,/; 2,$s/,residential,/,3,/; 2,$s/,road,/,4,/' gold.csv
expect_fail 1 "^cdp-evaluate: 'gold.csv' does not name its classes and 'G' has 4 class folders for its 5 classes: give --classes with their names in class order\$" \
	cdp-evaluate gold.csv G
cdp-evaluate --json --classes green,lake,land,residential,road gold.csv G >"$T/go.json" ||
	fail "older CSV with --classes names against G"
cmp -s "$T/g.json" "$T/go.json" || fail "older CSV with names: $(cat "$T/go.json")"
# a count is checked against the older CSV's columns as against a named one's
expect_fail 1 "^cdp-evaluate: --classes 4: 'gold.csv' has 5 classes\$" \
	cdp-evaluate --classes 4 gold.csv G
expect_fail 1 "^cdp-evaluate: --classes 2: 'old.csv' has 5 classes\$" \
	cdp-evaluate --classes 2 old.csv F
expect_fail 1 "^cdp-evaluate: 'gold.csv' does not name its classes and 'G' has 4 class folders for its 5 classes: give --classes with their names in class order\$" \
	cdp-evaluate --classes 5 gold.csv G
cdp-evaluate --json --classes 5 old.csv F >"$T/o5.json" || fail "older CSV with its own count"
cmp -s "$T/o.json" "$T/o5.json" || fail "older CSV, --classes 5: $(cat "$T/o5.json")"

echo "== a path with a comma, a quote and a newline"
"$PYTHON" - "$T" <<'PYEOF' || fail "cannot make the odd chip"
import csv, os, sys
T = sys.argv[1]
for c in ("a", "b"):
    os.makedirs(os.path.join(T, "H", c))
odd = os.path.join("H", "b", 'o,"d\nd.tif')
open(os.path.join(T, odd), "w").close()
open(os.path.join(T, "H", "a", "x.tif"), "w").close()
with open(os.path.join(T, "h.csv"), "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["path", "class", "p_a", "p_b"])
    w.writerow([odd, "b", "0.1", "0.9"])
    w.writerow(["H/a/x.tif", "a", "0.8", "0.2"])
PYEOF
cdp-evaluate --json h.csv H >"$T/h.json" || fail "odd path"
grep -q '"chips":2,"unpredicted":0,.*"accuracy":1.000000' "$T/h.json" || fail "odd path: $(cat "$T/h.json")"
echo "H/a/x.tif a" >h.txt
expect_fail 1 "^cdp-evaluate: 'h.csv': line 2: 'H/b/o,\"d?d.tif' is not a chip of 'h.txt'\$" \
	cdp-evaluate h.csv h.txt
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a message of $(wc -l <"$T/err") lines: $(cat "$T/err")"

echo "== refusals"
cp p.csv bad.csv
echo "elsewhere.tif,lake,0.1,0.6,0.1,0.1,0.1" >>bad.csv
expect_fail 1 "^cdp-evaluate: 'bad.csv': line 31: 'elsewhere.tif' is not a chip of 'F'\$" \
	cdp-evaluate bad.csv F
cp p.csv twice.csv
sed -n 2p p.csv >>twice.csv
expect_fail 1 "^cdp-evaluate: 'twice.csv': line 31: 'F/green/green_0.tif' is scored twice\$" \
	cdp-evaluate twice.csv F
sed '2s/,[0-9],/,7,/' old.csv >cls.csv
expect_fail 1 "^cdp-evaluate: 'cls.csv': line 2: want path,class with a class 0 to 4\$" \
	cdp-evaluate cls.csv F
sed '2s/,[a-z]*,/,desert,/' p.csv >cls2.csv
expect_fail 1 "^cdp-evaluate: 'cls2.csv': line 2: want path,class with a class of its header\$" \
	cdp-evaluate cls2.csv F
expect_fail 1 "^cdp-evaluate: --classes: 'p.csv' names its classes in its header (green, ...)\$" \
	cdp-evaluate --classes a,b,c,d,e p.csv F
expect_fail 1 "^cdp-evaluate: 'list.txt': line 1: class 'green' is not a class of 'old.csv' (an id 0 to 4, or a name of --classes)\$" \
	cdp-evaluate old.csv list.txt
mkdir G/desert
expect_fail 1 "^cdp-evaluate: 'G': class folder 'desert' is not a class of 'g.csv'\$" \
	cdp-evaluate g.csv G
sed 's/ road$/ desert/' list.txt >desert.txt
expect_fail 1 "^cdp-evaluate: 'desert.txt': line 25: class 'desert' is not a class of 'p.csv' (a name of its header or an id 0 to 4)\$" \
	cdp-evaluate p.csv desert.txt
expect_fail 2 "^cdp-evaluate: --png draws a raster map's matrix or histogram, not one of the CSV 'p.csv'\$" \
	cdp-evaluate --png m.png p.csv F
[ ! -e m.png ] && [ ! -s "$T/out" ] || fail "--png with a CSV wrote something"
# so are --ignore and the vector options, which a list of classes has no use for
expect_fail 2 "^cdp-evaluate: --ignore is for a raster or vector reference, not the CSV 'p.csv' (its reference is a list of classes)\$" \
	cdp-evaluate --ignore 0 p.csv F
for vo in "--burn 5" "--label-where x=1" "--all-touched" "--buffer 1"; do
	# shellcheck disable=SC2086
	expect_fail 2 "^cdp-evaluate: the vector options (--burn, --label-where, \.\.\.) are for a raster or vector reference, not the CSV 'p.csv'" \
		cdp-evaluate $vo p.csv F
	[ ! -s "$T/out" ] || fail "$vo with a CSV printed a report"
done
echo ok
