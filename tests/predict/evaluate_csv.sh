#!/bin/sh
# tests/predict/evaluate_csv.sh: cdp-evaluate on a classifier's CSV
# (evaluate_csv.c), against a folder of class folders and a list file:
#  - the confusion matrix, per-class precision, recall, F1 and support,
#    accuracy, macro F1 and Cohen's kappa equal those computed here with
#    NumPy from the same labels (JSON), with classes numbered by the sorted
#    folder names and named by them, or by --classes names for a list;
#  - the text report states the same numbers;
#  - paths match through the file system (a relative CSV path, a "./" one);
#    reference chips without a row are counted as not predicted;
#  - refusals: a row that is not a reference chip, a row twice, a class
#    outside the CSV's, names with a folder reference.
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
for c, n in enumerate(names):
    for i in range(6):
        if n == "road" and i == 5:
            continue                       # one chip not predicted
        p = c if rng.random() < 0.6 else int(rng.integers(5))
        prob = np.full(5, 0.05); prob[p] = 0.8
        path = "F/%s/%s_%d.tif" % (n, n, i) if i == 0 else "%s/F/%s/./%s_%d.tif" % (T, n, n, i)
        rows.append("%s,%d,%s" % (path, p, ",".join("%.6f" % x for x in prob)))
        truth.append(c); pred.append(p)
open(os.path.join(T, "p.csv"), "w").write("path,class,p0,p1,p2,p3,p4\n" + "\n".join(rows) + "\n")
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
echo "== refusals"
cp p.csv bad.csv
echo "elsewhere.tif,1,0.1,0.6,0.1,0.1,0.1" >>bad.csv
expect_fail 1 "^cdp-evaluate: 'bad.csv': line 31: 'elsewhere.tif' is not a chip of 'F'\$" \
	cdp-evaluate bad.csv F
cp p.csv twice.csv
sed -n 2p p.csv >>twice.csv
expect_fail 1 "^cdp-evaluate: 'twice.csv': line 31: 'F/green/green_0.tif' is scored twice\$" \
	cdp-evaluate twice.csv F
sed '2s/,[0-9],/,7,/' p.csv >cls.csv
expect_fail 1 "^cdp-evaluate: 'cls.csv': line 2: want path,class with a class 0 to 4\$" \
	cdp-evaluate cls.csv F
expect_fail 1 "^cdp-evaluate: --classes names: the folders of 'F' name the classes\$" \
	cdp-evaluate --classes a,b,c,d,e p.csv F
expect_fail 1 "line 1: want IMAGE CLASS" cdp-evaluate p.csv list.txt
echo ok
