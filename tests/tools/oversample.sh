#!/bin/sh
# cdp-keyshuffle --oversample (repeat-factor sampling) on a segmentation
# pool whose label raster holds a common class, a rare one and ignore
# pixels, checked against an independent Python computation on the same
# pool (cdpool.Pool's labels, NumPy):
#  - each training key appears floor(r) or ceil(r) times (as the seeded
#    draw documented decides, reproduced with cdpool.rng), its copies on
#    consecutive lines, r the largest of
#    its classes' factors r_c = max(1, sqrt(t / f_c)) (f_c: the fraction of
#    training keys holding c, ignore pixels not counted), CLASS:R setting a
#    class's factor by name or id; integer factors exactly;
#  - the validation list is never repeated (version 1 header), the two
#    lists are disjoint and cover the pool; the same seed gives the same bytes;
#  - the header says version 2 and repeats=1; cdpool.read_keys reads it;
#    the same lines under a header without the flag are refused (by
#    cdp-train, naming the key's two lines, and by Python);
#  - cdp-train trains on the oversampled list, and refuses it as a
#    validation list;
#  - failures: an unknown class, a bad item, a pool without labels.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"

# 256 x 256, tiles of 32: 64 keys. Label: 0 background; 1 "road" in 5 tiles;
# 2 "water" in the left half (32 tiles); 255 (ignored) in 10 tiles; a pixel
# of class 3 "rare" in 2 tiles (one of them a road tile).
"$PYTHON" "$MK" "$T/s.tif" --width 256 --height 256 --bands 2 --dtype u8 --seed 4
"$PYTHON" - "$T/s.tif" "$T/s_lab.tif" <<'EOF'
import sys, numpy as np
from osgeo import gdal
src = gdal.Open(sys.argv[1])
lab = np.zeros((256, 256), np.uint8)
lab[:, :128] = 2
for ty, tx in [(0, 5), (1, 6), (3, 3), (6, 7), (7, 0)]:
    lab[ty * 32 + 3:ty * 32 + 9, tx * 32 + 2:tx * 32 + 30] = 1
for ty, tx in [(0, 6), (2, 7), (4, 4), (5, 5), (6, 6), (7, 7), (2, 2), (3, 1), (4, 5), (5, 4)]:
    lab[ty * 32 + 10:ty * 32 + 20, tx * 32:tx * 32 + 32] = 255
lab[1 * 32 + 20, 6 * 32 + 20] = 3
lab[4 * 32 + 30, 2 * 32 + 1] = 3
d = gdal.GetDriverByName("GTiff").Create(sys.argv[2], 256, 256, 1, gdal.GDT_Byte)
d.SetGeoTransform(src.GetGeoTransform()); d.SetProjection(src.GetProjection())
d.GetRasterBand(1).WriteArray(lab)
d = None
EOF
cdp-tile -q --size 32 --label-suffix _lab --ignore 255 "$T/s.tif" |
	cdp-lmdbpack -q --classes bg,road,water,rare "$T/pool" || fail "packing failed"
P="$T/pool"

# check.py POOL TRAIN VAL SEED SPEC...: the factors of Python's own
# computation, and the copies of each key exactly as cdp-keyshuffle(1)
# documents the draw: floor(r), one more when a double of the stream
# derive(SEED, 'o', 0) (cdpool.rng), one per key in list order, is below
# r - floor(r)
cat >"$T/check.py" <<'EOF'
import math, re, sys, collections
import numpy as np
import cdpool
from cdpool.rng import Rng, derive
pool = cdpool.Pool(sys.argv[1])
train, val = cdpool.read_keys(sys.argv[2], pool), cdpool.read_keys(sys.argv[3], pool)
names = ["bg", "road", "water", "rare"] if "folders" not in sys.argv[1] else ["a", "b", "c"]
assert train.repeats and not val.repeats, "repeats flags"
assert open(sys.argv[2], "rb").readline().startswith(b"#cdpool-keys 2 "), "train header"
assert open(sys.argv[3], "rb").readline().startswith(b"#cdpool-keys 1 "), "val header"
n = collections.Counter(train)
assert len(set(val)) == len(val) and not set(val) & set(n), "val repeated or shared"
assert sorted(set(val) | set(n)) == sorted(pool.keys()), "lists do not cover the pool"
cls = {}
for k in n:
    r = pool.record(k)
    if r.label is None:               # a scalar class
        cls[k] = {int(r.class_id)}
        continue
    u = np.unique(np.asarray(r.label))
    cls[k] = set(int(c) for c in u if c != r.label_ignore)
assert all(255 not in c for c in cls.values())
f = collections.Counter(c for k in n for c in cls[k])
r_c = {c: 1.0 for c in f}
seed, specs = int(sys.argv[4]), sys.argv[5:]
for item in specs:
    what, _, v = item.partition(":")
    if what == "auto":
        t = float(v) if v else 0.001
        r_c = {c: max(1.0, math.sqrt(t / (f[c] / len(n)))) for c in f}
for item in specs:
    what, _, v = item.partition(":")
    if what != "auto":
        r_c[names.index(what) if what in names else int(what)] = float(v)
bad, up, rng, i = [], 0, Rng(derive(seed, ord("o"), 0)), 0
for k, m in n.items():             # first appearances, in list order
    r = max([1.0] + [r_c[c] for c in cls[k]])
    want = math.floor(r) + (rng.double() < r - math.floor(r))
    up += want == math.ceil(r) and r != math.floor(r)
    if m != want or train[i:i + m] != [k] * m:
        bad.append((k, sorted(cls[k]), r, m, want))
    i += m
assert not bad, "counts differ from the factors: %s" % bad[:5]
print("%d keys on %d lines; factors %s; %d rounded up" % (len(n), len(train),
      {names[c]: round(r, 3) for c, r in sorted(r_c.items())}, up))
EOF

echo "== auto:0.5 with road:4"
cdp-keyshuffle -q --seed 3 --val 0.25 --val-out "$T/val" --oversample auto:0.5,road:4 \
	-o "$T/train" "$P" || fail "--oversample failed"
"$PYTHON" "$T/check.py" "$P" "$T/train" "$T/val" 3 auto:0.5 road:4 ||
	fail "auto:0.5,road:4: the repeats differ from Python's factors"
cdp-keyshuffle -q --seed 3 --val 0.25 --val-out "$T/val2" --oversample auto:0.5 \
	--oversample road:4 -o "$T/train2" "$P"
cmp -s "$T/train" "$T/train2" && cmp -s "$T/val" "$T/val2" ||
	fail "the same seed (and the items split over two options) gave other lists"

echo "== integer factors by id, exactly; the report"
cdp-keyshuffle --seed 5 --val 0.25 --val-out "$T/vali" --oversample 3:3,1:2 -o "$T/traini" "$P" \
	2>"$T/report" || fail "--oversample 3:3,1:2 failed"
cat "$T/report"
grep -q "oversampled: 48 training keys on [0-9]* lines" "$T/report" || fail "no summary line"
grep -q "class 1 'road': in [0-9]* training keys, repeat factor 2$" "$T/report" ||
	fail "no class line"
"$PYTHON" "$T/check.py" "$P" "$T/traini" "$T/vali" 5 3:3 1:2 || fail "integer factors"
"$PYTHON" - "$T/traini" "$P" <<'EOF' || fail "integer factors are not exact"
import sys, collections, cdpool
pool = cdpool.Pool(sys.argv[2])
n = collections.Counter(cdpool.read_keys(sys.argv[1]))
for k, m in n.items():
    lab = pool.record(k).label
    want = 3 if (lab == 3).any() else 2 if (lab == 1).any() else 1
    assert m == want, (k, m, want)
EOF

echo "== a pool of scalar classes (class folders): 12, 8 and 3 chips"
for c in a:12 b:8 c:3; do
	mkdir -p "$T/F/${c%:*}"
	i=0
	while [ $i -lt "${c#*:}" ]; do
		"$PYTHON" "$MK" "$T/F/${c%:*}/${c%:*}$i.tif" --width 8 --height 8 --bands 2 --seed $i
		i=$((i + 1))
	done
done
cdp-lmdbpack -q --folders "$T/F" "$T/folders" || fail "packing the folders failed"
cdp-keyshuffle -q --seed 2 --val 0.2 --stratify --val-out "$T/fval" --oversample auto:0.4 \
	-o "$T/ftrain" "$T/folders" || fail "--oversample on scalar classes failed"
"$PYTHON" "$T/check.py" "$T/folders" "$T/ftrain" "$T/fval" 2 auto:0.4 ||
	fail "scalar classes: the repeats differ from Python's factors"

echo "== the flag: a repeated key without it is refused"
"$PYTHON" - "$T/train" "$T/noflag" <<'EOF'
import sys, re
d = open(sys.argv[1], "rb").read()
h, body = d.split(b"\n", 1)
h = re.sub(rb"^#cdpool-keys 2 (.*) repeats=1 ", rb"#cdpool-keys 1 \1 ", h)
open(sys.argv[2], "wb").write(h + b"\n" + body)
EOF
head -1 "$T/noflag" | grep -q "^#cdpool-keys 1 uuid=.* count=[0-9]* crc32=" || fail "forged header"
"$PYTHON" -c "
import sys, cdpool
try:
    cdpool.read_keys(sys.argv[1]); sys.exit(1)
except cdpool.CdpError as e:
    assert e.code == 'EDUPKEY', e.code
" "$T/noflag" || fail "Python read a repeated key without the flag"

echo "== cdp-train"
M="$CDP_SRCDIR/tests/train/small.cfg:channels=2,classes=4,in_h=32,in_w=32"
expect_fail 1 "noflag': key '[^']*' on lines [0-9]* and [0-9]*" \
	cdp-train -q --db "$P" --keys "$T/noflag" --model "$M" --out "$T/r0" --steps 1 --batch 4 \
	--threads 1
expect_fail 1 "oversampled list (repeats=1) cannot be a validation list" \
	cdp-train -q --db "$P" --keys "$T/train" --val-keys "$T/train" --model "$M" --out "$T/r1" \
	--steps 1 --batch 4 --threads 1
cdp-train -q --db "$P" --keys "$T/train" --val-keys "$T/val" --model "$M" --out "$T/run" \
	--steps 6 --batch 4 --threads 1 || fail "cdp-train on the oversampled list failed"
[ -s "$T/run/checkpoint.cdpt" ] || fail "no checkpoint"

echo "== failures"
expect_fail 1 "oversample 'lake:2': '.*' has no such class" \
	cdp-keyshuffle -q --oversample lake:2 -o "$T/x" "$P"
expect_fail 1 "oversample 'road': want auto, auto:T" \
	cdp-keyshuffle -q --oversample road -o "$T/x" "$P"
expect_fail 1 "oversample 'road:0.5': want auto" \
	cdp-keyshuffle -q --oversample road:0.5 -o "$T/x" "$P"
expect_fail 1 "oversample 'auto:0': want auto" \
	cdp-keyshuffle -q --oversample auto:0 -o "$T/x" "$P"
expect_fail 2 "oversample" cdp-keyshuffle -q --oversample road:2,,auto -o "$T/x" "$P"
[ ! -e "$T/x" ] || fail "a refused run left '$T/x'"
cdp-tile -q --size 32 "$T/s.tif" | cdp-lmdbpack -q "$T/nolab" || fail "packing failed"
expect_fail 1 "oversample needs labels; key '[^']*' has no label" \
	cdp-keyshuffle -q --oversample auto -o "$T/x" "$T/nolab"
echo ok
