#!/bin/sh
# tests/tools/multilabel_pack.sh: cdp-lmdbpack --multi-label --list (issue
# 31): "IMAGE CLASS[,CLASS...]" and "IMAGE -" lines become multi-hot
# records (cdp-record(5) kind 5, K = the --classes names), the pool's shape
# says label=multi label_len=K, its class names and class histogram (the
# positives per class) are kept, and Python's Pool and PoolDataset give
# the vector; a UTF-8 byte order mark before the list is skipped; refusals in one line naming the list and the line (an
# unknown name, a name twice, an empty name, a missing set) before any pool
# is made; --folders, --ignore and a stream are refused with --multi-label,
# and so are class names holding a blank, '|' or '#';
# cdp-keyshuffle --stratify splits a multi-label pool by iterative
# stratification: 400 chips at --val 0.25 keep each class's share of
# validation keys within 0.02 of 0.25 (each class has about 180 keys), and
# the split is a function of the seed.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genmulti.py" "$T/chips" --count 12 --seed 3 --size 8
# a chip of every set of interest, whatever the generator drew
cat >"$T/chips/l.txt" <<'LEOF'
# image     classes
c_0000.tif water,building,tree
c_0001.tif tree
c_0002.tif -
c_0003.tif tree,water   # any order
c_0004.tif building
LEOF
cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/chips/l.txt" "$T/pool" ||
	fail "pack"

echo "== records, shape, class names and histogram"
cdp-keyshuffle -q --no-shuffle -o "$T/keys" "$T/pool"
"$PYTHON" - "$T/pool" "$T/keys" <<'PYEOF' || fail "the pool does not hold the sets"
import sys
import numpy as np
from cdpool import Pool, PoolDataset
p = Pool(sys.argv[1])
assert p.label_kind == "multi" and p.label_len == 3, (p.label_kind, p.label_len)
assert p.class_names == ["water", "building", "tree"], p.class_names
want = {"c_0000": [1, 1, 1], "c_0001": [0, 0, 1], "c_0002": [0, 0, 0],
        "c_0003": [1, 0, 1], "c_0004": [0, 1, 0]}
for k, v in want.items():
    img, lab = p[k]
    assert lab.dtype == np.uint8 and lab.tolist() == v, (k, lab)
assert p.classes == {0: 2, 1: 2, 2: 3}, p.classes
ds = PoolDataset(p, sys.argv[2])
x, y = ds[3]
assert y.dtype == np.float32 and y.tolist() == [1.0, 0.0, 1.0], y
assert x.shape == (3, 8, 8), x.shape
print("5 multi-hot records, classes", p.classes)
PYEOF

echo "== a UTF-8 byte order mark before the list is skipped"
printf '\357\273\277' | cat - "$T/chips/l.txt" >"$T/chips/bom.txt"
cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/chips/bom.txt" "$T/bpool" ||
	fail "a list with a byte order mark"
"$PYTHON" -c 'import sys; from cdpool import Pool; assert Pool(sys.argv[1]).classes == {0: 2, 1: 2, 2: 3}' \
	"$T/bpool" || fail "the BOM list's pool"

echo "== another set size into the same pool is another shape"
printf 'c_0005.tif water\n' >"$T/chips/k2.txt"
expect_fail 1 "label multi (2 classes); the pool holds .*label multi (3 classes)" \
	cdp-lmdbpack -q --multi-label --classes water,tree --list "$T/chips/k2.txt" "$T/pool"

echo "== refusals of the list, naming file and line, before the pool exists"
bad() {   # bad LINE PATTERN: a list whose second line is LINE is refused
	printf 'c_0000.tif water\n%s\n' "$1" >"$T/chips/bad.txt"
	expect_fail 1 "'$T/chips/bad.txt': line 2: $2" \
		cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/chips/bad.txt" \
		"$T/badpool"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "not one line: $(cat "$T/err")"
	[ ! -e "$T/badpool" ] || fail "'$1' made a pool"
}
bad "c_0001.tif road" "'road' is not a class of --classes"
bad "c_0001.tif tree,tree" "class 'tree' is listed twice"
bad "c_0001.tif water,,tree" "'water,,tree' is not a class set"
bad "c_0001.tif tree," "'tree,' is not a class set"
bad "c_0001.tif" "expected IMAGE CLASS\[,CLASS...\] or IMAGE -, found 1 field"
bad "c_0001.tif tree water" "expected .*, found 3 fields"

echo "== cdp-keyshuffle --stratify: iterative stratification"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genmulti.py" "$T/many" --count 400 --seed 5 --size 8
cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/many/list.txt" "$T/mpool"
for s in 1 2; do
	cdp-keyshuffle -q -s $s --val 0.25 --stratify --val-out "$T/v$s.keys" -o "$T/t$s.keys" \
		"$T/mpool" 2>"$T/ks.err" || fail "--stratify: $(cat "$T/ks.err")"
done
cdp-keyshuffle -q -s 1 --val 0.25 --stratify --val-out "$T/v1b.keys" -o "$T/t1b.keys" "$T/mpool"
cmp -s "$T/v1.keys" "$T/v1b.keys" || fail "--stratify -s 1 twice: two validation lists"
! cmp -s "$T/v1.keys" "$T/v2.keys" || fail "--stratify -s 1 and -s 2: one validation list"
"$PYTHON" - "$T" <<'PYEOF' || fail "--stratify does not keep the classes' shares"
import sys
import numpy as np
from cdpool import Pool
T = sys.argv[1]
p = Pool(T + "/mpool")
def keys(f):
    return [l.strip() for l in open(f) if l.strip() and not l.startswith("#")]
for s in (1, 2):
    t, v = keys("%s/t%d.keys" % (T, s)), keys("%s/v%d.keys" % (T, s))
    assert len(t) + len(v) == 400 and not set(t) & set(v), (len(t), len(v))
    assert abs(len(v) - 100) <= 2, len(v)
    yt = np.array([p[k][1] for k in t]).sum(0)
    yv = np.array([p[k][1] for k in v]).sum(0)
    share = yv / (yt + yv)
    assert (abs(share - 0.25) <= 0.02).all(), (s, yt, yv, share)
    print("seed %d: validation shares %s of %s keys a class" % (s, np.round(share, 4), yt + yv))
PYEOF

echo "== option refusals"
mkdir -p "$T/F/water"
cp "$T/chips/c_0000.tif" "$T/F/water/"
expect_fail 2 "excludes --folders" cdp-lmdbpack --multi-label --folders "$T/F" "$T/p2"
expect_fail 2 "needs --list and --classes" \
	cdp-lmdbpack --multi-label --list "$T/chips/l.txt" "$T/p2"
expect_fail 2 "excludes --folders .* and --ignore" \
	cdp-lmdbpack --multi-label --classes a,b --ignore 3 --list "$T/chips/l.txt" "$T/p2"
expect_fail 2 "needs --list" cdp-lmdbpack --multi-label --classes a,b "$T/p2" </dev/null
expect_fail 2 "class 1's name 'a|b' holds a blank, '|' or '#'" \
	cdp-lmdbpack --multi-label --classes 'x,a|b' --list "$T/chips/l.txt" "$T/p2"
expect_fail 2 "class 0's name 'a b' holds a blank" \
	cdp-lmdbpack --multi-label --classes 'a b,c' --list "$T/chips/l.txt" "$T/p2"
[ ! -e "$T/p2" ] || fail "a refused pack made a pool"
exit 0
