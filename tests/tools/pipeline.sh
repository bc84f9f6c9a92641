#!/bin/sh
# The whole dataset pipeline on generated scenes, cross-checked from outside:
#  - cdp-tile | cdp-lmdbpack, then every packed tile equals the window GDAL
#    reads at the offset its key implies (crosscheck.py);
#  - the Python reader printed in cdp-record(5), with the package in
#    python/ (cdpool), decodes the packed pool;
#  - LMDB's own tools read it; cdp-keyshuffle covers it exactly;
#  - the examples Makefile under make -j2 gives the same pool contents as
#    packing the scenes one after another.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
MK="$CDP_SRCDIR/tests/tools/mkraster.py"

mkdir "$T/scenes"
for s in 1 2 3; do
	"$PYTHON" "$GEN" "$T/scenes/s$s.tif" --size 300 --height 260 --seed "$s" --mask "$T/scenes/s${s}_mask.tif"
done

# 3-band u8 with labels, overlap, shift edges.
cdp-tile -q --size 64 --overlap 16 --label-suffix _mask "$T/scenes/s1.tif" "$T/scenes/s2.tif" \
	| cdp-lmdbpack -q "$T/pool"
"$PYTHON" "$CDP_SRCDIR/tests/tools/crosscheck.py" --db "$T/pool" --size 64 --overlap 16 --edge shift \
	--raster s1="$T/scenes/s1.tif" --raster s2="$T/scenes/s2.tif" \
	--label s1="$T/scenes/s1_mask.tif" --label s2="$T/scenes/s2_mask.tif"

# The reader in the man page, extracted verbatim.
sed -n '/^\.\\" BEGIN PYTHON READER/,/^\.\\" END PYTHON READER/p' "$CDP_SRCDIR/man/cdp-record.5" \
	| sed '1d;$d' | sed 's/\\e/\\/g' | grep -v '^\.E[XE]' >"$T/reader.py"
[ -s "$T/reader.py" ] || fail "no Python reader found in cdp-record.5"
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
"$PYTHON" "$T/reader.py" "$T/pool" >"$T/reader.out"
n=$(mdb_stat -s tiles "$T/pool" | awk '/Entries:/ {print $2}')
[ "$(grep -c '_' "$T/reader.out")" -eq "$n" ] || fail "man page reader printed $(grep -c _ "$T/reader.out") keys, pool has $n"
# Its image sums agree with numpy over the source windows.
"$PYTHON" - "$T/reader.out" "$T/scenes" <<'PYEOF'
import sys, re
from osgeo import gdal
lines = open(sys.argv[1]).read().split("\n")
checked = 0
for line in lines:
    m = re.match(r"^(s[12])_(\d+)_(\d+)\b.*?(\d+(?:\.\d+)?)\s*$", line)
    if not m:
        continue
    name, row, col, total = m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))
    ds = gdal.Open(sys.argv[2] + "/" + name + ".tif")
    stride = 48
    y = min(row * stride, ds.RasterYSize - 64); x = min(col * stride, ds.RasterXSize - 64)
    want = float(ds.ReadAsArray(x, y, 64, 64).astype("float64").sum())
    if abs(want - total) > 1e-6 * max(1.0, want):
        sys.exit("reader sum for %s_%s_%s is %s, GDAL window sums to %s" % (name, row, col, total, want))
    checked += 1
if checked == 0:
    sys.exit("no reader lines parsed")
PYEOF

# LMDB's own tools.
mdb_stat -a "$T/pool" | grep -q 'Status of tiles' || fail "mdb_stat -a does not list tiles"
[ "$(mdb_dump -s tiles "$T/pool" | grep -c '^ ')" -eq $((2 * n)) ] || fail "mdb_dump key/value count"

# A 6-band u16 scene with nodata, zlib records, padded edges.
"$PYTHON" "$MK" "$T/ms.tif" --width 150 --height 97 --bands 6 --dtype u16 --nodata 0 --nodata-frac 0.1 --seed 5
cdp-tile -q --size 40 --edge pad --zlib 6 "$T/ms.tif" | cdp-lmdbpack -q "$T/mspool"
"$PYTHON" "$CDP_SRCDIR/tests/tools/crosscheck.py" --db "$T/mspool" --size 40 --overlap 0 --edge pad --zlib \
	--raster ms="$T/ms.tif"
"$PYTHON" "$T/reader.py" "$T/mspool" >/dev/null

# Keyshuffle covers the pool exactly.
cdp-keyshuffle -q --seed 3 -o "$T/all.keys" "$T/pool"
sed 1d "$T/all.keys" | sort >"$T/k1"
mdb_dump -s tiles -p "$T/pool" | sed -n 's/^ \([^ ]*_[0-9]*_[0-9]*\)$/\1/p' | sort >"$T/k2"
cmp -s "$T/k1" "$T/k2" || fail "pointer file keys differ from the pool's keys"

# The examples Makefile, in parallel, equals sequential packing of all three scenes.
# Built first without VAL_BY, then "make VAL_BY=s3" must reshuffle (it did
# nothing: train.keys did not depend on the settings, and val.keys was no target).
mk() { ( cd "$T" && make -s -j2 -f "$CDP_SRCDIR/share/cdpool/examples/Makefile" SCENES=scenes \
	POOL=mpool SIZE=64 OVERLAP=16 "$@" >/dev/null ); }
mk || fail "examples Makefile"
[ -s "$T/train.keys" ] && [ ! -e "$T/val.keys" ] || fail "examples Makefile without VAL_BY"
mk VAL_BY=s3 || fail "examples Makefile, VAL_BY=s3 after a build"
# Inode and nanosecond mtime, not "find -newer a stamp": on multigrain
# timestamps (Linux 6.13+) a file touched later can read older than one
# written before it, so a stamp proves nothing. A reshuffle renames a new
# file in (new inode); the val.keys rule touches (new mtime).
ids() { stat -c '%i %.9Y' "$T/train.keys" "$T/val.keys"; }
before=$(ids)
mk VAL_BY=s3 || fail "examples Makefile, run again"
[ "$(ids)" = "$before" ] || fail "examples Makefile: the same settings remade the keys"
for s in 1 2 3; do
	cdp-tile -q --size 64 --overlap 16 --label-suffix _mask "$T/scenes/s$s.tif" | cdp-lmdbpack -q "$T/spool"
done
"$PYTHON" - "$T/mpool" "$T/spool" <<'PYEOF'
import sys, lmdb
def load(p):
    env = lmdb.open(p, max_dbs=2, readonly=True, lock=False)
    t, m = env.open_db(b"tiles"), env.open_db(b"meta")
    with env.begin() as txn:
        tiles = dict(txn.cursor(db=t))
        meta = {k: v for k, v in txn.cursor(db=m)}
    return tiles, meta
(mt, mm), (st, sm) = load(sys.argv[1]), load(sys.argv[2])
if set(mt) != set(st):
    sys.exit("make -j pool keys differ from sequential packing")
for k in (b"shape", b"count", b"stats", b"classes"):
    if mm.get(k) != sm.get(k):
        sys.exit("meta %r differs: %r vs %r" % (k, mm.get(k), sm.get(k)))
PYEOF
[ -s "$T/train.keys" ] && [ -s "$T/val.keys" ] || fail "examples Makefile wrote no pointer files"
grep -q '^s3_' "$T/train.keys" && fail "held-out scene s3 in train.keys"
grep -q '^s3_' "$T/val.keys" || fail "val.keys lacks scene s3"

# A lost val.keys is made again by the shuffle (it was touched into an
# empty file, which cdp-train refuses); a failed reshuffle (VAL_BY naming
# no scene) leaves both pointer files as they were (val.keys was removed
# first).
cp "$T/val.keys" "$T/val.before"
cp "$T/train.keys" "$T/train.before"
rm "$T/val.keys"
mk VAL_BY=s3 || fail "examples Makefile, val.keys lost"
cmp -s "$T/val.keys" "$T/val.before" || fail "a lost val.keys made again: $(head -c 200 "$T/val.keys")"
if mk VAL_BY=s9 2>/dev/null; then fail "VAL_BY=s9 (no such scene) made the keys"; fi
cmp -s "$T/val.keys" "$T/val.before" && cmp -s "$T/train.keys" "$T/train.before" ||
	fail "a failed reshuffle changed the pointer files: $(ls "$T")"

# A changed scene or label raster is packed again, its tiles replacing the
# old ones (--resume skipped every key: the pool kept the old tiles); the
# pool then equals packing the scenes as they are now. PACK_FLAGS=--replace
# is accepted (it clashed with --resume).
sleep 1
"$PYTHON" "$GEN" "$T/scenes/s1.tif" --size 300 --height 260 --seed 9 --mask "$T/scenes/s1_mask.tif"
mk VAL_BY=s3 PACK_FLAGS=--replace || fail "examples Makefile, a scene changed"
rm -rf "$T/spool"
for s in 1 2 3; do
	cdp-tile -q --size 64 --overlap 16 --label-suffix _mask "$T/scenes/s$s.tif" | cdp-lmdbpack -q "$T/spool"
done
# Record for record, the source named rather than numbered: make -j2's
# first build packed the scenes in either order, so their numbers differ.
"$PYTHON" - "$T/mpool" "$T/spool" <<'PYEOF' || fail "examples Makefile: a changed scene kept its old tiles"
import sys, cdpool
m, s = cdpool.Pool(sys.argv[1]), cdpool.Pool(sys.argv[2])
if sorted(m.keys()) != sorted(s.keys()):
    sys.exit("keys differ")
name = lambda p, r: next(x["name"] for x in p.sources if x["index"] == r.source)
for k in s.keys():
    a, b = m.record(k), s.record(k)
    if (a.image.tobytes(), a.label.tobytes(), name(m, a)) != \
            (b.image.tobytes(), b.label.tobytes(), name(s, b)):
        sys.exit("record %s differs" % k)
PYEOF
sleep 1; touch "$T/made"; sleep 1
touch "$T/scenes/s2_mask.tif"
mk VAL_BY=s3 || fail "examples Makefile, a mask changed"
[ -n "$(find "$T/mpool.stamps/s2.packed" -newer "$T/made")" ] || fail "a changed mask did not repack its scene"
[ -z "$(find "$T/mpool.stamps/s1.packed" "$T/mpool.stamps/s3.packed" -newer "$T/made")" ] ||
	fail "a changed mask repacked other scenes"

# A scene without its mask: cdp-tile's refusal names the missing file
# (make said "No rule to make target 'pool.stamps/s2.packed'").
mkdir "$T/nm" "$T/nm/scenes"
cp "$T/scenes/s1.tif" "$T/scenes/s1_mask.tif" "$T/scenes/s2.tif" "$T/nm/scenes/"
if ( cd "$T/nm" && make -s -f "$CDP_SRCDIR/share/cdpool/examples/Makefile" SCENES=scenes POOL=pool \
	SIZE=64 OVERLAP=0 >/dev/null 2>"$T/nm.err" ); then fail "a scene without its mask packed"; fi
grep -q "^cdp-tile: 'scenes/s2.tif': cannot open label 'scenes/s2_mask.tif': No such file" "$T/nm.err" ||
	fail "a scene without its mask: $(cat "$T/nm.err")"

# "make train": RUN/done only once cdp-train finished; a run without its
# marker (stopped) resumes from its checkpoint; the same settings again do
# nothing; other settings start over. The step counts say which happened:
# metrics.jsonl is kept and extended by --resume, rewritten by --overwrite.
mkt() { mk VAL_BY=s3 RUN="$T/run" MODEL="$CDP_SRCDIR/tests/train/small.cfg" "$@"; }
steps() { sed -n '/"type": *"step"/s/.*"step": *\([0-9]*\).*/\1/p' "$T/run/metrics.jsonl" | tr '\n' ' '; }
if mk VAL_BY=s3 RUN="$T/run" train 2>"$T/mk.err"; then fail "make train without MODEL succeeded"; fi
grep -q 'set MODEL' "$T/mk.err" || fail "make train without MODEL: $(cat "$T/mk.err")"
mkt train TRAIN_FLAGS="--steps 2 --log-every 1 --batch 2 --val-every 2" || fail "make train"
[ -e "$T/run/done" ] && [ -s "$T/run/checkpoint.cdpt" ] || fail "make train left no run/done or checkpoint"
[ "$(steps)" = "1 2 " ] || fail "make train: steps $(steps)"
# A second either side of the stamp: timestamps are not ordered within a
# few milliseconds (see ids above).
sleep 1; touch "$T/made"; sleep 1
mkt train TRAIN_FLAGS="--steps 2 --log-every 1 --batch 2 --val-every 2" || fail "make train, again"
[ -z "$(find "$T/run" -newer "$T/made")" ] || fail "make train with the same settings trained again"
# A run stopped before its end: no marker, a checkpoint at step 2 of 4.
rm "$T/run/done"
mkt train TRAIN_FLAGS="--steps 4 --log-every 1 --batch 2 --val-every 2" || fail "make train, resumed"
[ "$(steps)" = "1 2 3 4 " ] || fail "make train did not resume a stopped run: steps $(steps)"
sleep 1
mkt train TRAIN_FLAGS="--steps 3 --log-every 1 --batch 2 --val-every 3" || fail "make train, new settings"
[ "$(steps)" = "1 2 3 " ] || fail "make train with new settings did not start over: steps $(steps)"
exit 0
