#!/bin/sh
# cdp-train's standardization (issue 14) on the road pool of train_common.sh
# (scenes c3 and c4):
#  - with scene c4 held out (--val-by c4) the run standardizes with the
#    sums of its one training source, c3: the checkpoint's means and stds
#    are numpy's over c3.tif's pixels (not the pool's, which include c4),
#    it records where they came from, and train.log names the source;
#  - a pool without per-source sums (an older pool: srcstats removed)
#    falls back to the pool's statistics and says so;
#  - such a pool that grew (scene c5 appended) and is resumed keeps the
#    checkpoint's standardization and says so in one line on stderr and in
#    train.log, naming both; the checkpoint written on resume keeps it.
. "$CDP_SRCDIR/tests/train/train_common.sh"
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
cdp-keyshuffle -q --seed 1 --val-by c4 --val-out "$T/c4.keys" -o "$T/c3.keys" "$T/pool"
C="--db $T/pool --threads 1 -q --model $SMALL --batch 4"

# ckinfo RUNDIR: "from sources mean m1 m2 m3 std s1 s2 s3" of its checkpoint
ckinfo() {
	"$PYTHON" - "$1/checkpoint.cdpt" <<'EOF'
import sys
from cdpool.checkpoint import load_checkpoint
ck = load_checkpoint(sys.argv[1])
print(ck.version, ck.std_from, ck.std_sources, " ".join("%.17g" % x for x in ck.mean),
      " ".join("%.17g" % x for x in ck.std))
EOF
}

echo "== the training source's sums, not the pool's"
cdp-train $C --keys "$T/c3.keys" --val-keys "$T/c4.keys" --out "$T/src" --steps 2 ||
	fail "training on c3 failed"
"$PYTHON" - "$T/src/checkpoint.cdpt" "$T/c3.tif" "$T/pool" <<'EOF' || fail "checkpoint statistics"
import math, sys
import numpy as np
from osgeo import gdal
from cdpool.checkpoint import load_checkpoint
from cdpool.pool import Pool
ck = load_checkpoint(sys.argv[1])
ds = gdal.Open(sys.argv[2])
a = ds.ReadAsArray().astype(np.float64)
valid = ds.GetRasterBand(1).GetMaskBand().ReadAsArray() == 255
assert ck.version == 8 and ck.std_from == "sources", (ck.version, ck.std_from)
pool = Pool(sys.argv[3])
names = [s["name"] for s in pool.sources]
assert [names[i] for i in ck.std_sources] == ["c3"], (ck.std_sources, names)
for b in range(a.shape[0]):
    x = a[b][valid]
    m, sd = x.mean(), x.std()
    assert abs(ck.mean[b] - m) <= 1e-12 * abs(m), ("mean", b, ck.mean[b], m)
    assert abs(ck.std[b] - sd) <= 1e-9 * sd, ("std", b, ck.std[b], sd)
    # the pool's own statistics (c3 and c4) are another thing
    assert ck.mean[b] != pool.mean[b], ("the pool's mean", b)
m, sd, n = pool.source_stats(ck.std_sources)
assert np.array_equal(m, ck.mean) and np.allclose(sd, ck.std, rtol=1e-12, atol=0), (m, ck.mean)
# the georeference of the training source
assert "32633" in ck.crs or "UTM" in ck.crs, ck.crs[:80]
gt = ds.GetGeoTransform()
assert abs(ck.res[0] - math.hypot(gt[1], gt[4])) < 1e-12 and abs(ck.res[1] - math.hypot(gt[2], gt[5])) < 1e-12, ck.res
EOF
grep -q "standardization from the sums of the 1 training source (0 'c3'): band 1 mean " "$T/src/train.log" ||
	fail "train.log does not name the source: $(grep standardization "$T/src/train.log")"
grep -q "training data: CRS recorded, pixel size " "$T/src/train.log" ||
	fail "train.log does not give the georeference: $(cat "$T/src/train.log")"

echo "== an older pool (no per-source sums): the pool's statistics, said"
cp -r "$T/pool" "$T/old"
"$PYTHON" - "$T/old" <<'EOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=2)
meta = env.open_db(b"meta", create=False)
with env.begin(write=True) as txn:
    for k in [k for k, _ in txn.cursor(db=meta) if k.startswith(b"srcstats.")]:
        txn.delete(k, db=meta)
EOF
C="--db $T/old --threads 1 -q --model $SMALL --batch 4"
cdp-train $C --keys "$T/c3.keys" --val-keys "$T/c4.keys" --out "$T/old.run" --steps 2 ||
	fail "training on an older pool failed"
grep -q "standardization from the pool's statistics over every tile: source 0 has no per-source sums" \
	"$T/old.run/train.log" || fail "no fallback note: $(grep standardization "$T/old.run/train.log")"
"$PYTHON" - "$T/old.run/checkpoint.cdpt" "$T/old" <<'EOF' || fail "fallback statistics"
import sys
import numpy as np
from cdpool.checkpoint import load_checkpoint
from cdpool.pool import Pool
ck, pool = load_checkpoint(sys.argv[1]), Pool(sys.argv[2])
assert ck.std_from == "pool" and ck.std_sources == [], (ck.std_from, ck.std_sources)
assert np.array_equal(ck.mean, pool.mean) and np.array_equal(ck.std, pool.std)
assert pool.source_stats([0]) is None
EOF

echo "== the pool grew: resume keeps the checkpoint's standardization, and says so"
before=$(ckinfo "$T/old.run")
"$PYTHON" "$GEN" "$T/c5.tif" --size 256 --seed 5 --mask "$T/c5_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/c5.tif" | cdp-lmdbpack -q "$T/old" ||
	fail "appending c5 failed"
cdp-train $C --keys "$T/c3.keys" --val-keys "$T/c4.keys" --out "$T/old.run" --steps 4 --resume \
	2>"$T/err" || fail "resume failed: $(cat "$T/err")"
want="cdp-train: resume: using the checkpoint's standardization (band 1 mean [0-9.e+-]* std [0-9.e+-]*), not the pool's (mean [0-9.e+-]* std [0-9.e+-]*)"
grep -q "^$want\$" "$T/err" || fail "resume: stderr $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "resume: more than one line: $(cat "$T/err")"
grep -q "resume: using the checkpoint's standardization (band 1 mean" "$T/old.run/train.log" ||
	fail "train.log does not say the checkpoint's standardization won"
[ "$(ckinfo "$T/old.run")" = "$before" ] ||
	fail "resumed checkpoint's standardization changed: $before -> $(ckinfo "$T/old.run")"
exit 0
