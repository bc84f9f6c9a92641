#!/bin/sh
# cdp-lmdbpack and the pool's readers on the inputs of issue 25:
#  - a --map-size the machine cannot map is refused before anything is
#    created, and a pool whose stored map size cannot be mapped (left by an
#    older cdp-lmdbpack) still packs, shuffles and reads from Python;
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"

# --- case 7: a map size nobody can map ---------------------------------------
"$PYTHON" "$MK" "$T/a.tif" --width 64 --height 64 --bands 2 --dtype u8 --seed 1
cdp-tile -q --size 32 "$T/a.tif" >"$T/a.cdps"
expect_fail 1 "cdp-lmdbpack: cannot open '$T/huge': --map-size 1000 TiB (1099511627776000 bytes) is more than this process can map: Cannot allocate memory" \
	cdp-lmdbpack -q --map-size 1000T "$T/huge" <"$T/a.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "--map-size 1000T: more than one line"
[ ! -e "$T/huge" ] || fail "a refused --map-size left $(ls -A "$T/huge")"
# What an older cdp-lmdbpack left: data.mdb's meta pages hold the size.
"$PYTHON" - "$T/huge" <<'PY' || fail "could not make a pool with a 1000 TiB map size"
import errno, sys, lmdb
try:
    lmdb.open(sys.argv[1], map_size=1000 << 40, max_dbs=2)
except lmdb.Error as e:
    sys.exit(0 if "Cannot allocate memory" in str(e) else "unexpected: %s" % e)
sys.exit("a 1000 TiB map was allowed")
PY
cdp-lmdbpack -q "$T/huge" <"$T/a.cdps" || fail "packing into the old pool failed"
cdp-keyshuffle -q -o "$T/keys" "$T/huge" 2>"$T/err" || fail "cdp-keyshuffle: $(cat "$T/err")"
[ "$(grep -vc '^#' "$T/keys")" -eq 4 ] || fail "cdp-keyshuffle: want 4 keys: $(cat "$T/keys")"
"$PYTHON" -c "import cdpool, sys; p = cdpool.Pool(sys.argv[1]); assert p.tiles == 4 and p[next(iter(p.keys()))] is not None" "$T/huge" ||
	fail "Python cannot read the pool"
# A failed first pack removes everything it created.
expect_fail 1 "not a record stream" cdp-lmdbpack -q "$T/nopool" </dev/null
[ ! -e "$T/nopool" ] || fail "a failed first pack left the pool"

# --- case 12: statistics of extreme values ------------------------------------
cat >"$T/st.py" <<'PY'
import math, sys, zlib
import numpy as np

def make(path, dtype, spikes, seed):
    """A 64x64 2-band raster: noise, with band 1's pixels spikes {(r, c): v}."""
    from osgeo import gdal
    rng = np.random.default_rng(seed)
    a = (rng.random((2, 64, 64)) * 100 - 20).astype(dtype)
    for (r, c), v in spikes.items():
        a[0, r, c] = v
    gt = gdal.GDT_Float64 if dtype == "f8" else gdal.GDT_Float32
    ds = gdal.GetDriverByName("GTiff").Create(path, 64, 64, 2, gt)
    ds.SetGeoTransform((500000, 1, 0, 4000000, 0, -1))
    for b in range(2):
        ds.GetRasterBand(b + 1).WriteArray(a[b])
    ds = None

def ref(path):
    """Per band (mean, std) of a raster, scaled by its largest |x| so that
    the squares cannot overflow, in long double."""
    from osgeo import gdal
    out = []
    for x in gdal.Open(path).ReadAsArray().astype(np.float64):
        s = float(np.max(np.abs(x)))
        y = x.ravel().astype(np.longdouble) / s
        out.append((float(y.mean() * s), float(y.std() * s)))
    return out

def fields(text):
    return dict(l.split("=", 1) for l in text.splitlines() if "=" in l)

def check(pool, tifs):
    import cdpool
    want = ref(tifs[0]) if len(tifs) == 1 else None
    p = cdpool.Pool(pool)
    for name in [k for k in p.meta if k == "stats" or k.startswith("srcstats.")]:
        assert "inf" not in p.meta[name] and "nan" not in p.meta[name], "%s: %s" % (name, p.meta[name])
    for b, st in enumerate(p.stats):
        assert math.isfinite(st["mean"]) and math.isfinite(st["std"]) and st["std"] > 0, st
        if want:
            m, sd = want[b]
            assert abs(st["mean"] - m) <= 1e-9 * abs(m) and abs(st["std"] - sd) <= 1e-9 * sd, \
                "band %d: mean %r std %r, want %r %r" % (b + 1, st["mean"], st["std"], m, sd)
    m, sd, n = p.source_stats(range(len(p.sources)))
    assert np.allclose(m, p.mean, rtol=1e-12) and np.allclose(sd, p.std, rtol=1e-12), \
        "source_stats %r %r, pool %r %r" % (m, sd, p.mean, p.std)
    print("ok")

def v1(pool, overflow):
    """Rewrites a float pool's stats and srcstats as pool version 1 wrote
    them (Neumaier sums) and its format as version 1; with overflow, band 1's
    sum of squares as the inf that a 1e300 pixel gave."""
    import lmdb
    env = lmdb.open(pool, max_dbs=2)
    meta = env.open_db(b"meta", create=False)
    def put(txn, k, text):
        b = text.encode()
        txn.put(k.encode(), b + b"crc32=%08x\n" % zlib.crc32(b), db=meta)
    with env.begin(write=True) as txn:
        names = [bytes(k).decode() for k, _ in txn.cursor(db=meta)]
        for k in names:
            if k != "stats" and not k.startswith("srcstats."):
                continue
            f = fields(bytes(txn.get(k.encode(), db=meta))[:-15].decode())
            lines = ["dtype=" + f["dtype"], "bands=" + f["bands"]]
            for b in range(1, int(f["bands"]) + 1):
                p = "band.%d." % b
                n, e = int(f[p + "count"]), int(f[p + "exp"])
                mean = math.ldexp(float(f[p + "smean"]), e)
                if overflow and b == 1:
                    sq = "inf"
                else:
                    sq = repr(math.ldexp(float(f[p + "sm2"]), 2 * e) + n * mean * mean)
                lines += [p + "count=%d" % n, p + "sum=" + repr(n * mean), p + "sumc=0",
                          p + "sumsq=" + sq, p + "sumsqc=" + ("-nan" if sq == "inf" else "0")]
                lines += [p + w + "=" + f[p + w] for w in ("min", "max", "mean", "std")]
            put(txn, k, "\n".join(lines) + "\n")
        put(txn, "format", "format=cdpool-pool\nversion=1\n")

cmd = sys.argv[1]
try:
    if cmd == "make":
        make(sys.argv[2], sys.argv[3], {tuple(map(int, k.split(","))): float(v) for k, v in
                                        (a.split("=") for a in sys.argv[5:])}, int(sys.argv[4]))
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3:])
    elif cmd == "v1":
        v1(sys.argv[2], sys.argv[3] == "overflow")
    elif cmd == "field":
        import lmdb
        env = lmdb.open(sys.argv[2], max_dbs=2, readonly=True, lock=False)
        with env.begin() as txn:
            print(fields(bytes(txn.get(sys.argv[3].encode(), db=env.open_db(b"meta", txn=txn)))[:-15].decode())[sys.argv[4]])
except AssertionError as e:
    sys.exit("st.py %s: %s" % (cmd, e))
PY
st() { "$PYTHON" "$T/st.py" "$@"; }
# one 1e300 pixel (f64): sumsq was inf, sumsqc -nan, std 0; a -1e300 too
st make "$T/big.tif" f8 3 5,7=1e300 40,40=-1e300
cdp-tile -q --size 32 "$T/big.tif" >"$T/big.cdps"
cdp-lmdbpack -q "$T/big" <"$T/big.cdps" 2>"$T/err" || fail "pack of 1e300: $(cat "$T/err")"
grep -qx "cdp-lmdbpack: warning: '$T/big': band 1 ranges from -1e+300 to 1e+300 (std [0-9.e+]*): standardizing it is meaningless" "$T/err" ||
	fail "no warning naming band 1's range: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "1e300: want one warning line: $(cat "$T/err")"
[ "$(st check "$T/big" "$T/big.tif")" = ok ] || fail "1e300: stats"
# one 3e38 pixel (f32): std finite, and the band named
st make "$T/f32.tif" f4 4 1,1=3e38
cdp-tile -q --size 32 "$T/f32.tif" >"$T/f32.cdps"
cdp-lmdbpack "$T/f32" <"$T/f32.cdps" 2>"$T/err" || fail "pack of 3e38: $(cat "$T/err")"
grep -q "warning: '$T/f32': band 1 ranges from -[0-9.e+]* to 3e+38" "$T/err" || fail "3e38: $(cat "$T/err")"
grep -q "band 2" "$T/err" && fail "3e38: band 2 named: $(cat "$T/err")"
[ "$(st check "$T/f32" "$T/f32.tif")" = ok ] || fail "3e38: stats"
# an ordinary raster: no warning; the pool is version 2
st make "$T/plain.tif" f4 5
cdp-tile -q --size 32 "$T/plain.tif" >"$T/plain.cdps"
cdp-lmdbpack -q "$T/plain" <"$T/plain.cdps" 2>"$T/err" && [ ! -s "$T/err" ] || fail "plain: $(cat "$T/err")"
[ "$(st field "$T/plain" format version)" = 2 ] || fail "a new pool is not version 2"
# version 1 pools: read, appended to (the pool becomes version 2, the
# untouched source keeps its version 1 sums), and sums that overflowed are
# stale until a pack rescans them
st v1 "$T/plain" ok
[ "$(st check "$T/plain" "$T/plain.tif")" = ok ] || fail "version 1 pool: stats"
cdp-lmdbpack -q "$T/plain" <"$T/f32.cdps" 2>/dev/null || fail "append to a version 1 pool"
[ "$(st field "$T/plain" format version)" = 2 ] || fail "append: the pool is not version 2"
st field "$T/plain" srcstats.000000 band.1.sumc >/dev/null || fail "append rewrote an untouched source"
[ "$(st check "$T/plain")" = ok ] || fail "mixed version 1 and 2 sums"
st v1 "$T/big" overflow
"$PYTHON" -c "import cdpool, sys; cdpool.Pool(sys.argv[1])" "$T/big" 2>"$T/err" && fail "overflowed version 1 sums were read"
grep -q "stats record: stale" "$T/err" || fail "overflowed version 1 sums: $(tail -1 "$T/err")"
cdp-lmdbpack -q --resume "$T/big" <"$T/big.cdps" 2>/dev/null || fail "--resume on overflowed sums"
[ "$(st check "$T/big" "$T/big.tif")" = ok ] || fail "rescan of overflowed sums"

# --- case 15: --folders keys and moved chips -----------------------------------
chip() { "$PYTHON" "$MK" "$1" --width 8 --height 8 --bands 1 --dtype u8 --seed "${2:-1}"; }
snapshot() { mdb_dump -a "$1" >"$2"; }
mkdir -p "$T/F/a" "$T/F/b"
chip "$T/F/a/k.tif" 1; chip "$T/F/a/m.tif" 2; chip "$T/F/a/s.tif" 3; chip "$T/F/b/s.tif" 4
chip "$T/F/b/x-y.tif" 5
cdp-lmdbpack -q --folders "$T/F" "$T/fp" 2>"$T/err" || fail "--folders: $(cat "$T/err")"
[ "$(mdb_stat -s tiles "$T/fp" | awk '/Entries:/ {print $2}')" -eq 5 ] || fail "--folders: want 5 records (a/s and b/s both)"
chip "$T/F/b/x y.tif" 6
snapshot "$T/fp" "$T/before"
expect_fail 1 "cdp-lmdbpack: '$T/F': '$T/F/b/x y.tif' and '$T/F/b/x-y.tif' both map to key 'b/x-y' (rename one)" \
	cdp-lmdbpack -q --resume --folders "$T/F" "$T/fp"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "collision: more than one line"
expect_fail 1 "'$T/F/b/x y.tif' and '$T/F/b/x-y.tif' both map to key 'b/x-y'" \
	cdp-lmdbpack -q --folders "$T/F" "$T/fp2"
[ ! -e "$T/fp2" ] || fail "a refused collision created the pool"
printf '%s\n' "$T/F/a/k.tif" "$T/F/b/s.tif" "$T/F/a/s.tif" >"$T/list.txt"
expect_fail 1 "'$T/F/b/s.tif' and '$T/F/a/s.tif' both map to key 's'" \
	cdp-lmdbpack -q --list "$T/list.txt" "$T/lp"
rm "$T/F/b/x y.tif"
mv "$T/F/a/m.tif" "$T/F/b/m.tif"
expect_fail 1 "cdp-lmdbpack: '$T/F': chip '$T/F/b/m.tif' is in class 'b' now, but the pool holds it as record 'a/m' of class 'a', which no longer has it" \
	cdp-lmdbpack -q --resume --folders "$T/F" "$T/fp"
expect_fail 1 "chip '$T/F/b/m.tif' is in class 'b' now" cdp-lmdbpack -q --folders "$T/F" "$T/fp"
snapshot "$T/fp" "$T/after"
cmp -s "$T/before" "$T/after" || fail "a refused --folders run changed the pool"
mv "$T/F/b/m.tif" "$T/F/a/m.tif"
cdp-lmdbpack -q --resume --folders "$T/F" "$T/fp" 2>"$T/err" || fail "--resume of unchanged folders: $(cat "$T/err")"

# --- case 17 and the --classes bullet: class names --------------------------------
"$PYTHON" - "$T/lab.tif" "$T/lab_label.tif" "$T/lac.tif" "$T/lac_label.tif" <<'PY'
import sys
import numpy as np
from osgeo import gdal
for path, vals in ((sys.argv[1], None), (sys.argv[2], (0, 1, 7, 254)),
                   (sys.argv[3], None), (sys.argv[4], (0, 1, 1, 0))):
    ds = gdal.GetDriverByName("GTiff").Create(path, 32, 32, 1, gdal.GDT_Byte)
    ds.SetGeoTransform((500000, 1, 0, 4000000, 0, -1))
    a = np.arange(32 * 32, dtype=np.uint8).reshape(32, 32)
    ds.GetRasterBand(1).WriteArray(a if vals is None else np.array(vals, np.uint8)[a % 4])
    ds = None
PY
cdp-tile -q --size 16 --label "$T/lab_label.tif" "$T/lab.tif" >"$T/lab.cdps"
expect_fail 1 "cdp-lmdbpack: '<stdin>': record 'lab_0_0' holds label values 7, 254, but --classes names only 2 classes (0..1)" \
	cdp-lmdbpack -q --classes bg,road "$T/cp" <"$T/lab.cdps"
[ ! -e "$T/cp" ] || fail "refused labels left the pool"
cdp-lmdbpack -q --classes a,b,c,d,e,f,g,h "$T/cp" <"$T/lab.cdps" 2>"$T/err" &&
	fail "label 254 accepted with 8 class names"
grep -q "holds label value 254, but --classes names only 8 classes (0..7)" "$T/err" || fail "8 names: $(cat "$T/err")"
# the pool's earlier labels, when names come later
cdp-lmdbpack -q "$T/cp" <"$T/lab.cdps"
cdp-tile -q --size 16 --label "$T/lac_label.tif" "$T/lac.tif" >"$T/lac.cdps"
snapshot "$T/cp" "$T/before"
expect_fail 1 "cdp-lmdbpack: '$T/cp': the pool holds label values 7, 254, but --classes names only 2 classes (0..1)" \
	cdp-lmdbpack -q --classes bg,road "$T/cp" <"$T/lac.cdps"
snapshot "$T/cp" "$T/after"
cmp -s "$T/before" "$T/after" || fail "refused names changed the pool"
# scalar classes of a list (refused as the list is read)
expect_fail 1 "'/dev/stdin': line 1: class 7 is out of range" \
	cdp-lmdbpack -q --classes bg,road --list /dev/stdin "$T/cl" <<EOF2
$T/F/a/k.tif 7
EOF2
# names the checkpoint would refuse
expect_fail 2 "cdp-lmdbpack: --classes: class 1's name 'r\\\\x01d' has a control character at byte 2" \
	cdp-lmdbpack -q --classes "bg,r$(printf '\001')d" "$T/cn" <"$T/lab.cdps"
expect_fail 2 "cdp-lmdbpack: --classes: class 0's name '\\\\xff' is not UTF-8 at byte 1" \
	cdp-lmdbpack -q --classes "$(printf '\377'),road" "$T/cn" <"$T/lab.cdps"
long=$(printf '%0300d' 0)
expect_fail 2 "cdp-lmdbpack: --classes: class 1's name '0000000000000000000000000000000000000000...' is longer than 255 bytes" \
	cdp-lmdbpack -q --classes "bg,$long" "$T/cn" <"$T/lab.cdps"
expect_fail 2 "cdp-lmdbpack: --classes: 'road' names both class 1 and class 2" \
	cdp-lmdbpack -q --classes bg,road,road "$T/cn" <"$T/lab.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "duplicate class: more than one line"
[ ! -e "$T/cn" ] || fail "refused class names created the pool"
cdp-lmdbpack -q --classes "bg,route,forêt,$(printf '%0255d' 0)" --list /dev/stdin "$T/cn" <<EOF2 || fail "good class names refused: $(cat "$T/err")"
$T/F/a/k.tif 2
EOF2
exit 0
