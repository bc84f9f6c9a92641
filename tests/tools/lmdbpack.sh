#!/bin/sh
# cdp-lmdbpack, checked from outside with LMDB's tools and Python lmdb/numpy:
#  - the pool reads back (mdb_stat -a, mdb_dump, Python lmdb, a record
#    header); every record's CRC holds; meta count/shape/stats/classes equal
#    what Python recomputes exactly from the records, and the stats equal
#    numpy's over the source raster's valid pixels;
#  - duplicate keys (error naming the key, pool unchanged), --resume,
#    --replace (stats recomputed), shape mismatch, a corrupt record, a
#    truncated stream, usage errors, a terminal on stdin;
#  - --list with a label folder (same pool contents as the stream) and with
#    class names, also after a UTF-8 byte order mark (file or pipe); -O tiles keep their source's colours (a grey 4th band of
#    u8 is no alpha) and pack with --list to the stream's records;
#  - a full disk (tmpfs), kill -9 mid-pack then --resume (bit-identical meta,
#    f32 stats included), two packers at once, and a failed first pack
#    beside another packer that keeps the pool they both created; a failed
#    first pack into a folder that was there removes only its own files.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
PP="$T/pp.py"

cat >"$PP" <<'EOF'
import math, signal, struct, sys, time, zlib
from fractions import Fraction
import lmdb
import numpy as np

DT = {1: np.uint8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32, 7: np.float64}

def openpool(path):
    env = lmdb.open(path, max_dbs=2, readonly=True)
    return env, env.open_db(b"tiles", create=False), env.open_db(b"meta", create=False)

def meta(txn, db, name):
    v = txn.get(name.encode(), db=db)
    if v is None:
        return None
    body, crc = v[:-15], v[-15:]
    assert crc == b"crc32=%08x\n" % zlib.crc32(body), "meta %s: bad crc line" % name
    return body.decode()

def fields(text):
    return dict(l.split("=", 1) for l in text.splitlines())

def decode(k, v):
    assert v[:4] == b"CDPR", k
    assert struct.unpack_from("<I", v, len(v) - 4)[0] == zlib.crc32(v[:-4]), "%s: record crc" % k
    dt, lk, comp, flags = v[8], v[9], v[10], v[11]
    c, h, w = struct.unpack_from("<III", v, 12)
    src, ign, cls = struct.unpack_from("<III", v, 88)
    sizes = struct.unpack_from("<QQQ", v, 112)
    off, parts = 160, []
    for sz in sizes:
        b = v[off:off + sz]
        off += sz
        parts.append(zlib.decompress(b) if comp == 1 and sz else b)
    img = np.frombuffer(parts[0], dtype=DT[dt]).reshape(c, h, w)
    lab = None
    if lk in (1, 2):
        lab = np.frombuffer(parts[1], dtype=np.uint8 if lk == 1 else np.uint16).reshape(h, w)
    mask = np.frombuffer(parts[2], dtype=np.uint8).reshape(h, w) if flags & 2 else None
    return dict(dt=dt, lk=lk, c=c, h=h, w=w, src=src, ign=ign, cls=cls, img=img, lab=lab, mask=mask)

class Acc:
    def __init__(s, c):
        s.n = [0] * c; s.sum = [0] * c; s.sq = [0] * c; s.fs = [[] for _ in range(c)]
        s.lo = [None] * c; s.hi = [None] * c
    def add(s, b, x, isfloat):
        if isfloat:
            x = x[np.isfinite(x)].astype(np.float64)
            s.fs[b].append(x)
        else:
            x = x.astype(np.int64)
            s.sum[b] += int(x.sum()); s.sq[b] += int((x * x).sum())
        if x.size:
            lo, hi = x.min(), x.max()
            s.lo[b] = lo if s.lo[b] is None else min(s.lo[b], lo)
            s.hi[b] = hi if s.hi[b] is None else max(s.hi[b], hi)
        s.n[b] += int(x.size)
    def check(s, st, isfloat):
        for b in range(len(s.n)):
            p = "band.%d." % (b + 1)
            n = s.n[b]
            assert int(st[p + "count"]) == n, "%scount %s, want %d" % (p, st[p + "count"], n)
            if n == 0:
                continue
            assert float(st[p + "min"]) == s.lo[b] and float(st[p + "max"]) == s.hi[b], "%smin/max" % p
            if isfloat:
                x = np.concatenate(s.fs[b])
                mean = math.fsum(x) / n
                var = math.fsum((x - mean) ** 2) / n
                tol = 1e-9
            else:
                assert int(st[p + "sum"]) == s.sum[b], "%ssum %s, want %d" % (p, st[p + "sum"], s.sum[b])
                assert int(st[p + "sumsq"]) == s.sq[b], "%ssumsq" % p
                mean = float(Fraction(s.sum[b], n))
                var = float(Fraction(n * s.sq[b] - s.sum[b] ** 2, n * n))
                tol = 1e-12
            for what, want in (("mean", mean), ("std", math.sqrt(var))):
                got = float(st[p + what])
                assert abs(got - want) <= tol * max(abs(want), 1e-300), "%s%s %r, want %r" % (p, what, got, want)

def check(path):
    """Every record decodes; meta equals what the records imply."""
    env, tiles, mdb = openpool(path)
    with env.begin() as txn:
        shape = fields(meta(txn, mdb, "shape"))
        st = fields(meta(txn, mdb, "stats"))
        count = int(fields(meta(txn, mdb, "count"))["tiles"])
        classes = fields(meta(txn, mdb, "classes") or "")
        nsrc = sum(1 for k, _ in txn.cursor(db=mdb) if k.startswith(b"source."))
        assert "stale" not in st, "stats stale"
        isfloat = shape["dtype"] in ("f32", "f64")
        acc, hist, n = Acc(int(shape["bands"])), {}, 0
        per = [Acc(int(shape["bands"])) for _ in range(nsrc)]
        for k, v in txn.cursor(db=tiles):
            r = decode(k, v)
            n += 1
            assert r["src"] < nsrc, "%s: source %d of %d" % (k, r["src"], nsrc)
            assert (r["c"], r["h"], r["w"]) == (int(shape["bands"]), int(shape["height"]), int(shape["width"]))
            for b in range(r["c"]):
                x = r["img"][b]
                x = x[r["mask"] == 255] if r["mask"] is not None else x.ravel()
                acc.add(b, x, isfloat)
                per[r["src"]].add(b, x, isfloat)
            if r["lab"] is not None:
                ids, cnt = np.unique(r["lab"][r["lab"] != r["ign"]], return_counts=True)
                for i, c in zip(ids, cnt):
                    hist[int(i)] = hist.get(int(i), 0) + int(c)
            elif r["lk"] == 3:
                hist[r["cls"]] = hist.get(r["cls"], 0) + 1
        # every source's own sums (srcstats.N): what its records imply
        sst = [meta(txn, mdb, "srcstats.%06d" % i) for i in range(nsrc)]
    assert count == n, "count meta %d, %d records" % (count, n)
    acc.check(st, isfloat)
    for i, text in enumerate(sst):
        assert text is not None, "source %d has no srcstats meta" % i
        f = fields(text)
        assert "stale" not in f, "srcstats.%06d stale" % i
        per[i].check(f, isfloat)
    got = {int(k[6:]): int(v) for k, v in classes.items()}
    assert got == hist, "classes %r, want %r" % (got, hist)
    print("%d records ok" % n)

def rstats(tif, path):
    """Meta stats equal numpy's over the raster's valid pixels (the tiles
    partition it exactly)."""
    from osgeo import gdal
    ds = gdal.Open(tif)
    a = ds.ReadAsArray()
    nd = ds.GetRasterBand(1).GetNoDataValue()
    # GDAL's mask band (an internal per-dataset mask, or nodata) and nodata.
    valid = ds.GetRasterBand(1).GetMaskBand().ReadAsArray() == 255
    if nd is not None:
        valid &= a[0] != nd
    env, tiles, mdb = openpool(path)
    with env.begin() as txn:
        st = fields(meta(txn, mdb, "stats"))
    acc = Acc(a.shape[0])
    for b in range(a.shape[0]):
        acc.add(b, a[b][valid], a.dtype.kind == "f")
    acc.check(st, a.dtype.kind == "f")

def dump(path, what):
    env, tiles, mdb = openpool(path)
    with env.begin() as txn:
        if what == "keys":
            for k, _ in txn.cursor(db=tiles):
                print(k.decode())
        elif what == "header":
            k, v = next(iter(txn.cursor(db=tiles)))
            r = decode(k, v)
            print(v[:4].decode(), struct.unpack_from("<H", v, 4)[0], r["dt"], r["c"], r["h"], r["w"])
        elif what == "srcof":
            for k, v in txn.cursor(db=tiles):
                print(k.decode(), decode(k, v)["src"])
        elif what == "payloads":
            for k, v in txn.cursor(db=tiles):
                r = decode(k, v)
                lab = r["lab"].tobytes() if r["lab"] is not None else b""
                mask = zlib.crc32(r["mask"].tobytes()) if r["mask"] is not None else None
                print(k.decode(), zlib.crc32(r["img"].tobytes()), zlib.crc32(lab), mask)
        else:
            for name in what.split(","):
                print(name, meta(txn, mdb, name))

def frames(data):
    off = 8
    while off < len(data):
        t, _, nl, bl = struct.unpack_from("<BBHI", data, off)
        yield t, data[off + 8:off + 8 + nl], off + 8 + nl, bl, off
        off += 8 + nl + bl + 4

def corrupt(src, dst, nth):
    """Flips a payload byte of the nth 'R' frame and re-CRCs the frame, so
    only the record's own CRC can catch it."""
    d = bytearray(open(src, "rb").read())
    i = 0
    for t, name, body, bl, start in frames(bytes(d)):
        if t == ord("R"):
            if i == nth:
                d[body + 200] ^= 0x55
                end = body + bl
                struct.pack_into("<I", d, end, zlib.crc32(bytes(d[start:end])))
                print(name.decode())
            i += 1
    open(dst, "wb").write(d)

def concat(dst, srcs):
    """One stream of the records of several streams of the same raster
    (duplicates kept), with the first one's source frames."""
    out, n = [open(srcs[0], "rb").read()[:8]], 0
    for i, src in enumerate(srcs):
        d = open(src, "rb").read()
        for t, name, body, bl, start in frames(d):
            if t == ord("R") or (t == ord("S") and i == 0):
                out.append(d[start:body + bl + 4])
                n += t == ord("R")
    b = b"count=%d\n" % n
    e = struct.pack("<BBHI", ord("E"), 0, 0, len(b)) + b
    out.append(e + struct.pack("<I", zlib.crc32(e)))
    open(dst, "wb").write(b"".join(out))

def slow(src):
    """Writes the first half of a stream, then stalls (a slow producer)."""
    d = open(src, "rb").read()
    out = sys.stdout.buffer
    try:
        out.write(d[:len(d) // 2]); out.flush()
        time.sleep(60)
        out.write(d[len(d) // 2:]); out.flush()
    except BrokenPipeError:
        pass

signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # "| head -1" is fine
cmd = sys.argv[1]
try:
    if cmd == "check": check(sys.argv[2])
    elif cmd == "rstats": rstats(sys.argv[2], sys.argv[3])
    elif cmd == "dump": dump(sys.argv[2], sys.argv[3])
    elif cmd == "corrupt": corrupt(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "concat": concat(sys.argv[2], sys.argv[3:])
    elif cmd == "slow": slow(sys.argv[2])
except AssertionError as e:
    sys.exit("pp.py %s: %s" % (cmd, e))
EOF
pp() { "$PYTHON" "$PP" "$@"; }
entries() { mdb_stat -s tiles "$1" 2>/dev/null | awk '/Entries:/ {print $2}'; }
snapshot() { mdb_dump -a "$1" >"$2"; }

# --- pack and read back: u16, 4 bands, nodata, an internal mask, zlib -------
"$PYTHON" "$MK" "$T/ms.tif" --width 160 --height 96 --bands 4 --dtype u16 --nodata 0 \
	--nodata-frac 0.2 --mask-rect 10,10,30,20 --seed 5 --label "$T/ms_lab.tif" --classes 5
cdp-tile -q --size 32 --zlib 6 --label "$T/ms_lab.tif" "$T/ms.tif" >"$T/ms.cdps"
cdp-lmdbpack "$T/ms" <"$T/ms.cdps" 2>"$T/err" || fail "pack: $(cat "$T/err")"
grep -q '^cdp-lmdbpack: 15 records written, 0 skipped, .* MB in .* s (.* MB/s)$' "$T/err" ||
	fail "summary line: $(cat "$T/err")"
[ -f "$T/ms/data.mdb" ] && [ -f "$T/ms/lock.mdb" ] || fail "pool is not a directory with data.mdb and lock.mdb"
mdb_stat -a "$T/ms" >"$T/stat" || fail "mdb_stat -a failed"
grep -q '^Status of tiles' "$T/stat" && grep -q '^Status of meta' "$T/stat" || fail "mdb_stat -a: $(cat "$T/stat")"
[ "$(entries "$T/ms")" = 15 ] || fail "mdb_stat: $(entries "$T/ms") entries, want 15"
[ "$(mdb_dump -s tiles "$T/ms" | grep -c '^ ')" -eq 30 ] || fail "mdb_dump -s tiles: want 15 keys and 15 values"
[ "$(pp dump "$T/ms" keys | wc -l)" -eq 15 ] || fail "Python lmdb does not see 15 keys"
[ "$(pp dump "$T/ms" keys | head -1)" = ms_0_0 ] || fail "first key $(pp dump "$T/ms" keys | head -1)"
[ "$(pp dump "$T/ms" header)" = "CDPR 1 2 4 32 32" ] || fail "record header: $(pp dump "$T/ms" header)"
pp check "$T/ms" >/dev/null
pp rstats "$T/ms.tif" "$T/ms"
pp dump "$T/ms" shape,count | tr '\n' ' ' | grep -q 'dtype=u16 bands=4 height=32 width=32 label=u8 ignore=255 .*tiles=15' ||
	fail "shape/count meta: $(pp dump "$T/ms" shape,count)"
pp dump "$T/ms" uuid | grep -Eq '^uuid uuid=[0-9a-f]{32}$' || fail "uuid meta"
pp dump "$T/ms" cmdline | grep -q "cmd.1=.*Z cdp-lmdbpack $T/ms" || fail "cmdline meta: $(pp dump "$T/ms" cmdline)"
pp dump "$T/ms" source.000000 | grep -q "path=$T/ms.tif" || fail "source meta"
pp dump "$T/ms" source.000000 | grep -q 'crs=PROJCS\[.*32633' || fail "source meta lacks the CRS"

# --- f32 with nodata: compensated float stats --------------------------------
"$PYTHON" "$MK" "$T/f.tif" --width 128 --height 64 --bands 2 --dtype f32 --nodata -9999 \
	--nodata-frac 0.1 --seed 7
cdp-tile -q --size 32 "$T/f.tif" >"$T/f.cdps"
cdp-lmdbpack -q "$T/f" <"$T/f.cdps"
pp check "$T/f" >/dev/null
pp rstats "$T/f.tif" "$T/f"

# --- duplicates, --resume, --replace --------------------------------------------
snapshot "$T/ms" "$T/before"
expect_fail 1 "cdp-lmdbpack: '$T/ms': duplicate key 'ms_0_0' (use --resume to skip or --replace to overwrite)" \
	cdp-lmdbpack -q "$T/ms" <"$T/ms.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "duplicate: more than one line"
snapshot "$T/ms" "$T/after"
cmp -s "$T/before" "$T/after" || fail "a refused duplicate changed the pool"
cdp-lmdbpack --resume "$T/ms" <"$T/ms.cdps" 2>"$T/err"
grep -q ' 0 records written, 15 skipped' "$T/err" || fail "--resume: $(cat "$T/err")"
snapshot "$T/ms" "$T/after"
cmp -s "$T/before" "$T/after" || fail "--resume of a complete pack changed the pool"
# Duplicate keys within one stream.
pp concat "$T/twice.cdps" "$T/ms.cdps" "$T/ms.cdps"
expect_fail 1 "duplicate key 'ms_0_0'" cdp-lmdbpack -q "$T/dup" <"$T/twice.cdps"
# --replace with other pixels under the same keys: stats recomputed exactly.
mkdir "$T/other"
"$PYTHON" "$MK" "$T/other/ms.tif" --width 160 --height 96 --bands 4 --dtype u16 --nodata 0 \
	--nodata-frac 0.05 --seed 9 --label "$T/other/ms_lab.tif" --classes 3
cdp-tile -q --size 32 --label "$T/other/ms_lab.tif" "$T/other/ms.tif" >"$T/other.cdps"
cdp-lmdbpack --replace "$T/ms" <"$T/other.cdps" 2>"$T/err"
grep -q ' 15 records written, 0 skipped' "$T/err" || fail "--replace: $(cat "$T/err")"
pp check "$T/ms" >/dev/null
pp rstats "$T/other/ms.tif" "$T/ms"
cdp-lmdbpack -q "$T/fresh" <"$T/other.cdps"
[ "$(pp dump "$T/ms" stats,classes,count)" = "$(pp dump "$T/fresh" stats,classes,count)" ] ||
	fail "--replace: meta differs from a fresh pack of the new stream"
[ "$(pp dump "$T/ms" cmdline | grep -o 'cmd\.[0-9]*=' | tr '\n' ' ')" = "cmd.1= cmd.2= " ] ||
	fail "cmdline after --replace: $(pp dump "$T/ms" cmdline)"
# Its raster has another path: a second source, which the records now name.
[ "$(mdb_stat -s meta "$T/ms" | awk '/Entries:/ {print $2}')" -eq 11 ] || fail "--replace: want 2 sources (and their srcstats)"
pp dump "$T/ms" source.000001 | grep -q "path=$T/other/ms.tif" || fail "--replace: second source"
# An interrupted --replace says to re-run with --replace (it said --resume,
# which kept the old records under the keys not reached yet beside the new
# ones, and its rescan cleared the stale mark): --resume on the pool it
# left stale is refused, --replace completes it to a fresh pack's meta.
cdp-lmdbpack -q "$T/rp" <"$T/ms.cdps"
head -c 40000 "$T/other.cdps" >"$T/othercut.cdps"
expect_fail 1 "^cdp-lmdbpack: '<stdin>': truncated record stream (its producer died?) after [0-9]* records; the [1-9][0-9]* committed stay, re-run with --replace\$" \
	cdp-lmdbpack -q --replace --txn-records 2 "$T/rp" <"$T/othercut.cdps"
snapshot "$T/rp" "$T/before"
expect_fail 1 "^cdp-lmdbpack: '$T/rp': a cdp-lmdbpack --replace into it has not finished: wait for a running one to end, and re-run an interrupted one with --replace\$" \
	cdp-lmdbpack -q --resume "$T/rp" <"$T/other.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "stale --resume: more than one line"
cdp-tile -q --size 32 --name newkeys --label "$T/other/ms_lab.tif" "$T/other/ms.tif" >"$T/newkeys.cdps"
expect_fail 1 "^cdp-lmdbpack: '$T/rp': a cdp-lmdbpack --replace into it has not finished: wait for a running one to end, and re-run an interrupted one with --replace\$" \
	cdp-lmdbpack -q "$T/rp" <"$T/newkeys.cdps"
snapshot "$T/rp" "$T/after"
cmp -s "$T/before" "$T/after" || fail "a refused --resume changed the stale pool"
cdp-lmdbpack -q --replace "$T/rp" <"$T/other.cdps"
pp check "$T/rp" >/dev/null
[ "$(pp dump "$T/rp" payloads)" = "$(pp dump "$T/fresh" payloads)" ] &&
[ "$(pp dump "$T/rp" stats,classes,count)" = "$(pp dump "$T/fresh" stats,classes,count)" ] ||
	fail "--replace after an interrupted one: differs from a fresh pack of the new stream"
cdp-lmdbpack -q --resume "$T/rp" <"$T/other.cdps" || fail "--resume after a completed --replace"

# A source is one pool source only when all of its description matches, not
# just its path: the same relative path from another directory (another
# raster), and the same raster tiled with other --bands and --name, each get
# a source of their own; the same stream again (--resume) adds none.
mkdir "$T/sa" "$T/sb"
"$PYTHON" "$MK" "$T/sa/s.tif" --width 96 --height 64 --bands 3 --seed 21
"$PYTHON" "$MK" "$T/sb/s.tif" --width 64 --height 32 --bands 3 --seed 22
(cd "$T/sa" && cdp-tile -q -s 32 s.tif | cdp-lmdbpack -q "$T/sp") || fail "same path: pack a"
(cd "$T/sb" && cdp-tile -q -s 32 --name other s.tif | cdp-lmdbpack -q "$T/sp") || fail "same path: pack b"
(cd "$T/sa" && cdp-tile -q -s 32 --name rev --bands 3,2,1 s.tif | cdp-lmdbpack -q "$T/sp") ||
	fail "same path: pack rev"
(cd "$T/sa" && cdp-tile -q -s 32 s.tif | cdp-lmdbpack -q --resume "$T/sp") || fail "same path: resume"
pp check "$T/sp" >/dev/null
[ "$(pp dump "$T/sp" srcof | awk '{print substr($1, 1, index($1, "_") - 1), $2}' | sort -u | tr '\n' ' ')" = \
  "other 1 rev 2 s 0 " ] || fail "same path: sources $(pp dump "$T/sp" srcof | tr '\n' ' ')"
pp dump "$T/sp" source.000001 | tr '\n' ' ' | grep -q 'name=other path=s.tif width=64 ' ||
	fail "same path: source 1 $(pp dump "$T/sp" source.000001)"
pp dump "$T/sp" source.000002 | grep -q 'band_list=3,2,1' ||
	fail "same path: source 2 $(pp dump "$T/sp" source.000002)"
pp dump "$T/sp" source.000003 | grep -q 'None' || fail "same path: a fourth source"
# --resume skips a key only where the pool holds that very tile: another
# raster of the same name (sb/s.tif as s, other pixels) is refused naming
# the key, the pool unchanged (it was skipped without a word, the raster
# lost); the same raster by another path (a resume from another folder: a
# source of its own) is still skipped
snapshot "$T/sp" "$T/before"
expect_fail 1 "^cdp-lmdbpack: '$T/sp': key 's_0_0' holds another tile than the stream's (other pixels, place or bands): --resume skips only tiles packed before (two rasters of one name? cdp-tile --name renames one; --replace overwrites)\$" \
	sh -c "cd '$T/sb' && cdp-tile -q -s 32 s.tif | cdp-lmdbpack -q --resume '$T/sp'"
snapshot "$T/sp" "$T/after"
cmp -s "$T/before" "$T/after" || fail "a refused --resume changed the pool"
(cd "$T" && cdp-tile -q -s 32 sa/s.tif | cdp-lmdbpack --resume "$T/sp") 2>"$T/err" ||
	fail "the same raster by another path: resume refused: $(cat "$T/err")"
grep -q ' 0 records written, 6 skipped' "$T/err" || fail "another path: $(cat "$T/err")"

# --- concatenated streams: each with its own header and sources from 0 ---------
"$PYTHON" "$MK" "$T/ca.tif" --width 64 --height 64 --bands 2 --seed 31
"$PYTHON" "$MK" "$T/cb.tif" --width 96 --height 32 --bands 2 --seed 32
cdp-tile -q --size 32 "$T/ca.tif" >"$T/ca.cdps"
cdp-tile -q --size 32 "$T/cb.tif" >"$T/cb.cdps"
cat "$T/ca.cdps" "$T/cb.cdps" | cdp-lmdbpack -q "$T/cat" || fail "concatenated streams refused"
cdp-lmdbpack -q "$T/one" <"$T/ca.cdps"
cdp-lmdbpack -q "$T/one" <"$T/cb.cdps"
pp check "$T/cat" >/dev/null
[ "$(pp dump "$T/cat" payloads)" = "$(pp dump "$T/one" payloads)" ] &&
[ "$(pp dump "$T/cat" srcof)" = "$(pp dump "$T/one" srcof)" ] &&
[ "$(pp dump "$T/cat" shape,count,stats,classes,source.000000,source.000001)" = \
  "$(pp dump "$T/one" shape,count,stats,classes,source.000000,source.000001)" ] ||
	fail "a concatenation differs from packing its streams one by one"
{ cat "$T/ca.cdps"; echo junk; } >"$T/trail.cdps"
expect_fail 1 "'<stdin>': data after the end of record stream 1 is not a record stream (bad magic" \
	cdp-lmdbpack -q "$T/trail" <"$T/trail.cdps"
[ ! -e "$T/trail" ] || fail "trailing data: the pool was created"

# --- refused input: shape, corrupt record, truncation, usage, terminal -------------
snapshot "$T/f" "$T/before"
cdp-tile -q --size 16 "$T/f.tif" >"$T/f16.cdps"
expect_fail 1 "'$T/f': record 'f_0_0' is f32, 2 bands, 16x16, label none; the pool holds f32, 2 bands, 32x32" \
	cdp-lmdbpack -q "$T/f" <"$T/f16.cdps"
"$PYTHON" "$MK" "$T/f3.tif" --width 64 --height 64 --bands 3 --dtype f32 --seed 2
cdp-tile -q --size 32 "$T/f3.tif" >"$T/f3.cdps"
expect_fail 1 "record 'f3_0_0' is f32, 3 bands" cdp-lmdbpack -q "$T/f" <"$T/f3.cdps"
key=$(pp corrupt "$T/f.cdps" "$T/bad.cdps" 3)
expect_fail 1 "'<stdin>': record '$key': checksum mismatch" cdp-lmdbpack -q --resume "$T/f" <"$T/bad.cdps"
head -c 20000 "$T/f.cdps" >"$T/cut.cdps"
expect_fail 1 "truncated record stream.*re-run with --resume" cdp-lmdbpack -q --resume "$T/f" <"$T/cut.cdps"
snapshot "$T/f" "$T/after"
cmp -s "$T/before" "$T/after" || fail "refused input changed the pool"
expect_fail 1 "not a record stream" cdp-lmdbpack -q "$T/nopool" </dev/null
[ ! -e "$T/nopool" ] || fail "a bad stream created the pool"
expect_fail 2 "exclude each other" cdp-lmdbpack --resume --replace "$T/x" <"$T/f.cdps"
expect_fail 2 "'0' is not" cdp-lmdbpack --txn-records 0 "$T/x" <"$T/f.cdps"
expect_fail 2 "usage:" cdp-lmdbpack <"$T/f.cdps"
expect_fail 2 "^cdp-lmdbpack: --ignore needs --list\$" cdp-lmdbpack --ignore 5 "$T/x" <"$T/f.cdps"
expect_fail 2 "^cdp-lmdbpack: --zlib needs --list or --folders (a stream's records keep cdp-tile's -z)\$" \
	cdp-lmdbpack -z 5 "$T/x" <"$T/f.cdps"
cdp-lmdbpack -h | head -3 | tr '\n' ' ' | grep -q -- '^usage: cdp-lmdbpack \[-hqV\] \[--classes name\[,name...\]\] .* db < stream' ||
	fail "usage: the stream form lacks --classes: $(cdp-lmdbpack -h | head -3)"
cdp-lmdbpack -h | grep -q '^usage: cdp-lmdbpack' || fail "-h"
if command -v script >/dev/null 2>&1; then
	script -qec "cdp-lmdbpack '$T/tty'" /dev/null >"$T/tty.out" 2>&1 && fail "read a stream from a terminal"
	grep -q "terminal" "$T/tty.out" || fail "terminal stdin: $(cat "$T/tty.out")"
fi

# An LMDB environment of another program is not adopted (readers would refuse
# it): one with a 'tiles' of foreign records, one with plain keys; an empty one
# (no data yet) becomes a pool.
"$PYTHON" -c "
import lmdb, sys
e = lmdb.open(sys.argv[1], max_dbs=3); d = e.open_db(b'tiles')
with e.begin(write=True) as t: t.put(b'junk', b'not a record', db=d)
e = lmdb.open(sys.argv[2])
with e.begin(write=True) as t: t.put(b'k', b'v')
lmdb.open(sys.argv[3]).close()" "$T/foreign" "$T/plainenv" "$T/emptyenv"
for d in foreign plainenv; do
	snapshot "$T/$d" "$T/before"
	expect_fail 1 "cdp-lmdbpack: cannot open '$T/$d': not a cdpool pool" cdp-lmdbpack -q "$T/$d" <"$T/f.cdps"
	snapshot "$T/$d" "$T/after"
	cmp -s "$T/before" "$T/after" || fail "$d: a refused environment changed"
done
cdp-lmdbpack -q "$T/emptyenv" <"$T/f.cdps" || fail "an empty LMDB environment was refused"
pp check "$T/emptyenv" >/dev/null

# --- --list: a tile folder with labels equals the stream pack -------------------
"$PYTHON" "$MK" "$T/road.tif" --width 96 --height 64 --bands 3 --dtype u8 --seed 3 \
	--label "$T/road_mask.tif" --classes 2
cdp-tile -q --size 32 --label-suffix _mask -O "$T/chips" "$T/road.tif"
cdp-tile -q --size 32 --label-suffix _mask "$T/road.tif" | cdp-lmdbpack -q "$T/rs"
( cd "$T/chips" && echo "# road chips: IMAGE LABEL" && for f in *.tif; do
	case $f in *_label.tif) ;; *) printf '%s\t%s  # chip\n\n' "$f" "${f%.tif}_label.tif" ;; esac
done ) >"$T/chips/list.txt"
cdp-lmdbpack -q --list "$T/chips/list.txt" "$T/rl"
pp check "$T/rl" >/dev/null
pp dump "$T/rs" payloads >"$T/p1"
pp dump "$T/rl" payloads >"$T/p2"
cmp -s "$T/p1" "$T/p2" || fail "--list of tile files differs from the stream pack: $(diff "$T/p1" "$T/p2" | head -3)"
[ "$(pp dump "$T/rs" shape,stats,classes,count)" = "$(pp dump "$T/rl" shape,stats,classes,count)" ] ||
	fail "--list meta differs from the stream pack's"
[ "$(mdb_stat -s meta "$T/rl" | awk '/Entries:/ {print $2}')" -eq $((7 + 2 * 6)) ] || fail "--list: want one source (and its srcstats) per chip"

# --- -O tiles keep the records' masks: padding, nodata, an internal mask ----------
# and --standardize (no nodata: only the mask marks invalid pixels) pack with
# --list to the stream's records, masks included.
"$PYTHON" "$MK" "$T/mk.tif" --width 80 --height 50 --bands 3 --dtype u16 --nodata 0 \
	--nodata-frac 0.1 --mask-rect 5,5,20,10 --seed 13
for opt in "" --standardize; do
	rm -rf "$T/mo" "$T/ms_s" "$T/ms_l"
	cdp-tile -q --size 32 --edge pad $opt -O "$T/mo" "$T/mk.tif"
	cdp-tile -q --size 32 --edge pad $opt "$T/mk.tif" | cdp-lmdbpack -q "$T/ms_s"
	(cd "$T/mo" && ls *.tif) >"$T/mo/list.txt"
	cdp-lmdbpack -q --list "$T/mo/list.txt" "$T/ms_l"
	[ "$(pp dump "$T/ms_s" payloads)" = "$(pp dump "$T/ms_l" payloads)" ] ||
		fail "-O $opt: --list of the tiles differs from the stream: $(pp dump "$T/ms_l" payloads | head -2)"
	[ "$(pp dump "$T/ms_s" stats)" = "$(pp dump "$T/ms_l" stats)" ] || fail "-O $opt: stats differ"
	[ ! -e "$T/mo/mk_0_0.tif.msk" ] || fail "-O $opt: a .msk side-car instead of an internal mask"
done

# --- -O tiles keep their source's colours ------------------------------------
# 4 bands of u8, a quarter of each band 0: grey bands (a near infrared 4th)
# stay grey, where GTiff's default made them RGB and band 4 an alpha that
# hid its zeros; an RGBA source stays RGBA; --time's stacked dates of two
# grey bands are grey. Each packs with --list to the stream's records.
"$PYTHON" - "$T" <<'EOF'
import sys, numpy as np
from osgeo import gdal, osr
s = osr.SpatialReference()
s.ImportFromEPSG(32633)
rng = np.random.default_rng(3)
for name, opts in (("nir", ["PHOTOMETRIC=MINISBLACK"]), ("rgba", [])):
    d = gdal.GetDriverByName("GTiff").Create(sys.argv[1] + "/" + name + ".tif", 64, 64, 4,
                                             gdal.GDT_Byte, opts)
    d.SetGeoTransform((500000, 1, 0, 5800000, 0, -1))
    d.SetProjection(s.ExportToWkt())
    for b in range(4):
        d.GetRasterBand(b + 1).WriteArray((rng.integers(0, 4, (64, 64)) * 60).astype(np.uint8))
EOF
for c in "nir nir.tif" "rgba rgba.tif" "time --bands 1,2 --time nir.tif,nir.tif"; do
	n=${c%% *}
	# shellcheck disable=SC2086
	(cd "$T" && cdp-tile -q -s 32 -O "col_$n" ${c#* } && cdp-tile -q -s 32 ${c#* } >"col_$n.s")
	cdp-lmdbpack -q "$T/col_${n}_s" <"$T/col_$n.s"
	(cd "$T/col_$n" && ls *.tif) >"$T/col_$n/list.txt"
	cdp-lmdbpack -q --list "$T/col_$n/list.txt" "$T/col_${n}_l"
	[ "$(pp dump "$T/col_${n}_s" payloads)" = "$(pp dump "$T/col_${n}_l" payloads)" ] ||
		fail "-O of $n: --list of the tiles differs from the stream"
	[ "$(pp dump "$T/col_${n}_s" stats)" = "$(pp dump "$T/col_${n}_l" stats)" ] ||
		fail "-O of $n: --list of the tiles has other statistics"
done
"$PYTHON" - "$T" <<'EOF' || fail "-O tiles' colours"
import glob, sys
from osgeo import gdal
T = sys.argv[1]
def colours(t):
    d = gdal.Open(t)
    return [gdal.GetColorInterpretationName(d.GetRasterBand(b + 1).GetColorInterpretation())
            for b in range(d.RasterCount)], d.GetRasterBand(1).GetMaskFlags()
for t in glob.glob(T + "/col_nir/*.tif") + glob.glob(T + "/col_time/*.tif"):
    ci, f = colours(t)
    assert ci == ["Gray"] + ["Undefined"] * 3 and f == gdal.GMF_ALL_VALID, (t, ci, f)
# the alpha's zeros are invalid pixels: the tile's internal mask marks them
for t in glob.glob(T + "/col_rgba/*.tif"):
    ci, f = colours(t)
    assert ci == ["Red", "Green", "Blue", "Alpha"] and f == gdal.GMF_PER_DATASET, (t, ci, f)
EOF

# --- --list with class names ---------------------------------------------------
mkdir "$T/scenes"
i=0
for c in water road road field urban; do
	i=$((i + 1))
	"$PYTHON" "$MK" "$T/scenes/s$i.tif" --width 24 --height 24 --bands 3 --dtype u8 --seed "$i"
	echo "s$i.tif $c" >>"$T/scenes/list.txt"
done
echo "$T/scenes/s1.tif 4   # absolute path, class index" >"$T/scenes/abs.txt"
cdp-lmdbpack -q --classes water,road,forest,field,urban --list "$T/scenes/list.txt" "$T/cls"
pp check "$T/cls" >/dev/null
[ "$(pp dump "$T/cls" classes | tr '\n' ' ')" = "classes class.0=1 class.1=2 class.3=1 class.4=1  " ] || fail "class histogram: $(pp dump "$T/cls" classes)"
[ "$(pp dump "$T/cls" keys | tr '\n' ' ')" = "s1 s2 s3 s4 s5 " ] || fail "--list keys: $(pp dump "$T/cls" keys)"
pp dump "$T/cls" shape | grep -q 'label=class' || fail "class shape"
# A byte order mark, as Windows editors write, is no part of the first path.
printf '\357\273\277' | cat - "$T/scenes/list.txt" >"$T/scenes/bom.txt"
cdp-lmdbpack -q --classes water,road,forest,field,urban --list "$T/scenes/bom.txt" "$T/clsb" ||
	fail "a list with a byte order mark"
[ "$(pp dump "$T/clsb" keys | tr '\n' ' ')" = "s1 s2 s3 s4 s5 " ] || fail "BOM list keys: $(pp dump "$T/clsb" keys)"
{ printf '\357\273\277'; sed "s|^|$T/scenes/|" "$T/scenes/list.txt"; } |
	cdp-lmdbpack -q --classes water,road,forest,field,urban --list /dev/stdin "$T/clsp" ||
	fail "a list with a byte order mark from a pipe"
[ "$(pp dump "$T/clsp" keys | tr '\n' ' ')" = "s1 s2 s3 s4 s5 " ] || fail "piped BOM list keys: $(pp dump "$T/clsp" keys)"
expect_fail 1 "line 1: 'lake' is neither a class of --classes nor a file" \
	cdp-lmdbpack -q --classes lake2 --list /dev/stdin "$T/cls2" <<EOF
s1.tif lake
EOF
expect_fail 1 "duplicate key 's1'" cdp-lmdbpack -q --list "$T/scenes/abs.txt" "$T/cls"
cdp-lmdbpack -q --replace --list "$T/scenes/abs.txt" "$T/cls"
[ "$(pp dump "$T/cls" classes | tr '\n' ' ')" = "classes class.1=2 class.3=1 class.4=2  " ] ||
	fail "classes after --replace: $(pp dump "$T/cls" classes)"
expect_fail 1 "cannot open '$T/scenes/none.tif'" cdp-lmdbpack -q --list /dev/stdin "$T/cls3" <<EOF
$T/scenes/none.tif
EOF

# --- a full disk -----------------------------------------------------------------
mkdir "$T/small"
if mount -t tmpfs -o size=3m tmpfs "$T/small" 2>/dev/null; then
	trap 'umount "$T/small" 2>/dev/null || :; rm -rf "$T"' EXIT
	"$PYTHON" "$MK" "$T/big.tif" --width 640 --height 640 --bands 4 --dtype u16 --seed 4
	cdp-tile -q --size 64 "$T/big.tif" >"$T/big.cdps"
	expect_fail 1 "cdp-lmdbpack: cannot write '$T/small/pool': No space left on device" \
		cdp-lmdbpack -q --txn-records 10 "$T/small/pool" <"$T/big.cdps"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "full disk: more than one line"
	mdb_stat -a "$T/small/pool" >/dev/null || fail "the pool does not open after a full disk"
	n=$(entries "$T/small/pool")
	[ "$n" -gt 0 ] && [ "$n" -lt 100 ] && [ $((n % 10)) -eq 0 ] || fail "full disk left $n records"
	pp check "$T/small/pool" >/dev/null
	umount "$T/small"
else
	echo "note: cannot mount a tmpfs here; full-disk case skipped" >&2
fi

# --- kill -9 mid-pack, then --resume: identical to an uninterrupted pack --------
"$PYTHON" "$MK" "$T/k.tif" --width 256 --height 192 --bands 2 --dtype f32 --nodata=-1e30 \
	--nodata-frac 0.05 --seed 11 --label "$T/k_lab.tif" --classes 6
cdp-tile -q --size 16 --label "$T/k_lab.tif" "$T/k.tif" >"$T/k.cdps"
cdp-lmdbpack -q "$T/kref" <"$T/k.cdps"
mkfifo "$T/fifo"
"$PYTHON" "$PP" slow "$T/k.cdps" >"$T/fifo" &
ppid=$!
cdp-lmdbpack -q --txn-records 7 "$T/kpool" <"$T/fifo" &
kpid=$!
i=0
until [ "$(entries "$T/kpool")" -ge 70 ] 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -lt 300 ] || { kill -9 "$kpid" "$ppid" 2>/dev/null; fail "no commit seen within 30 s"; }
	sleep 0.1
done
kill -9 "$kpid"
kill "$ppid" 2>/dev/null || :
wait "$kpid" 2>/dev/null || :
wait "$ppid" 2>/dev/null || :
n=$(entries "$T/kpool")
[ "$n" -lt 192 ] && [ $((n % 7)) -eq 0 ] || fail "killed pack holds $n records (want whole batches of 7, not all 192)"
pp check "$T/kpool" >/dev/null
cdp-lmdbpack --resume "$T/kpool" <"$T/k.cdps" 2>"$T/err"
grep -q " $((192 - n)) records written, $n skipped" "$T/err" || fail "resume: $(cat "$T/err")"
pp check "$T/kpool" >/dev/null
[ "$(pp dump "$T/kpool" keys)" = "$(pp dump "$T/kref" keys)" ] || fail "resumed key set differs"
[ "$(pp dump "$T/kpool" payloads)" = "$(pp dump "$T/kref" payloads)" ] || fail "resumed records differ"
[ "$(pp dump "$T/kpool" shape,count,stats,classes,source.000000,srcstats.000000)" = \
  "$(pp dump "$T/kref" shape,count,stats,classes,source.000000,srcstats.000000)" ] ||
	fail "resumed meta differs from an uninterrupted pack: $(pp dump "$T/kpool" stats | head -5)"

# --- SIGTERM/SIGINT: cleaned up, then the exit status is the signal's -----------
# A first pack that committed nothing removes its pool (as any failed one
# does); one with commits keeps them, readable and resumable. The SIGINT
# pack is exec'd with SIGINT at its default: a background job of sh starts
# with it ignored, which the pack keeps.
DFLINT='import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
for sig in TERM INT; do
	for txn in 100000 7; do
		rm -rf "$T/sig" "$T/fifo"
		mkfifo "$T/fifo"
		"$PYTHON" "$PP" slow "$T/k.cdps" >"$T/fifo" &
		ppid=$!
		# (not a shell function: $! must be the pack's own pid)
		"$PYTHON" -c "$DFLINT" cdp-lmdbpack -q --txn-records $txn "$T/sig" <"$T/fifo" 2>"$T/err" &
		kpid=$!
		i=0
		# the first half (95 whole records) read: 13 batches of 7 committed
		until [ -e "$T/sig/data.mdb" ] && { [ $txn -gt 96 ] || [ "$(entries "$T/sig")" -ge 91 ] 2>/dev/null; }; do
			i=$((i + 1))
			[ "$i" -lt 300 ] || { kill -9 "$kpid" "$ppid" 2>/dev/null; fail "SIG$sig: the pack did not start"; }
			sleep 0.1
		done
		sleep 0.3
		kill -$sig "$kpid"
		set +e; wait "$kpid"; rc=$?; set -e
		kill "$ppid" 2>/dev/null || :
		wait "$ppid" 2>/dev/null || :
		[ "$rc" -eq $((128 + $(kill -l $sig))) ] || fail "SIG$sig: exit $rc, want the signal's"
		grep -q "^cdp-lmdbpack: '<stdin>': interrupted by signal $(kill -l $sig) after 9[0-9] records" "$T/err" ||
			fail "SIG$sig: $(cat "$T/err")"
		if [ $txn -gt 96 ]; then
			[ ! -e "$T/sig" ] || fail "SIG$sig: a first pack that committed nothing left $(ls "$T/sig")"
		else
			[ "$(entries "$T/sig")" -eq 91 ] || fail "SIG$sig: $(entries "$T/sig") records kept, want 91"
			pp check "$T/sig" >/dev/null
		fi
	done
done

# A signal while the read is blocked before the stream's header (its
# producer has not started) or after its E frame (the producer has not
# closed it yet) says so as above: it said "not a record stream:
# Interrupted system call" and "cannot read '<stdin>': Interrupted system
# call". The writers hold the FIFO open and write nothing more.
for at in header end; do
	rm -rf "$T/sig" "$T/fifo"
	mkfifo "$T/fifo"
	if [ $at = header ]; then
		sh -c 'exec sleep 60' >"$T/fifo" &
	else
		sh -c 'cat "$1"; exec sleep 60' sh "$T/k.cdps" >"$T/fifo" &
	fi
	ppid=$!
	"$PYTHON" -c "$DFLINT" cdp-lmdbpack -q --txn-records 1 "$T/sig" <"$T/fifo" 2>"$T/err" &
	kpid=$!
	i=0
	until if [ $at = header ]; then [ $i -ge 5 ]; else [ "$(entries "$T/sig")" = 192 ] 2>/dev/null; fi; do
		i=$((i + 1))
		[ "$i" -lt 300 ] || { kill -9 "$kpid" "$ppid" 2>/dev/null; fail "blocked at the $at: no progress"; }
		sleep 0.1
	done
	sleep 0.3
	kill -INT "$kpid"
	set +e; wait "$kpid"; rc=$?; set -e
	kill "$ppid" 2>/dev/null || :
	wait "$ppid" 2>/dev/null || :
	[ "$rc" -eq 130 ] || fail "SIGINT blocked at the $at: exit $rc, want 130: $(cat "$T/err")"
	if [ $at = header ]; then
		want="interrupted by signal 2 after 0 records; nothing was committed"
	else
		want="interrupted by signal 2 after 192 records; the 192 committed stay, re-run with --resume"
	fi
	[ "$(cat "$T/err")" = "cdp-lmdbpack: '<stdin>': $want" ] ||
		fail "SIGINT blocked at the $at: $(cat "$T/err")"
	[ $at = end ] || [ ! -e "$T/sig" ] || fail "SIGINT before the header left $(ls "$T/sig")"
done

# --- two packers at once equal one after the other ------------------------------
"$PYTHON" "$MK" "$T/c1.tif" --width 200 --height 120 --bands 3 --dtype i16 --seed 21
"$PYTHON" "$MK" "$T/c2.tif" --width 150 --height 150 --bands 3 --dtype i16 --seed 22
cdp-tile -q --size 16 "$T/c1.tif" >"$T/c1.cdps"
cdp-tile -q --size 16 "$T/c2.tif" >"$T/c2.cdps"
cdp-lmdbpack -q --txn-records 5 --no-sync "$T/conc" <"$T/c1.cdps" &
a=$!
cdp-lmdbpack -q --txn-records 5 --no-sync "$T/conc" <"$T/c2.cdps" &
b=$!
wait "$a" || fail "concurrent packer 1 failed"
wait "$b" || fail "concurrent packer 2 failed"
cdp-lmdbpack -q "$T/seq" <"$T/c1.cdps"
cdp-lmdbpack -q "$T/seq" <"$T/c2.cdps"
pp check "$T/conc" >/dev/null
[ "$(pp dump "$T/conc" keys)" = "$(pp dump "$T/seq" keys)" ] || fail "concurrent key set differs"
[ "$(pp dump "$T/conc" shape,count,stats)" = "$(pp dump "$T/seq" shape,count,stats)" ] ||
	fail "concurrent packers: meta differs from sequential packing"
[ "$(mdb_stat -s meta "$T/conc" | awk '/Entries:/ {print $2}')" -eq 11 ] || fail "concurrent: want 2 sources and their srcstats"

# A first pack that fails while another fills the pool it created keeps it
# (the other's first batch, not committed yet, was lost with the pool, and
# that packer exited 0). B creates the pool and stalls with nothing
# committed; A opens it and stalls in its first batch; B's stream is then
# cut short: B fails, A finishes into the pool.
rm -rf "$T/race" "$T/fa" "$T/fb" "$T/goa" "$T/gob"
mkfifo "$T/fa" "$T/fb"
held() { sh -c 'head -c 12000 "$1"; until [ -e "$2" ]; do sleep 0.05; done; [ -z "$3" ] || tail -c +12001 "$1"' sh "$@"; }
held "$T/c2.cdps" "$T/gob" "" >"$T/fb" &
pb=$!
cdp-lmdbpack -q --txn-records 100000 "$T/race" <"$T/fb" 2>"$T/errb" &
b=$!
i=0
until [ -e "$T/race/data.mdb" ]; do
	i=$((i + 1)); [ "$i" -lt 300 ] || fail "race: packer B did not create the pool"; sleep 0.05
done
held "$T/c1.cdps" "$T/goa" all >"$T/fa" &
pa=$!
cdp-lmdbpack -q --txn-records 100000 "$T/race" <"$T/fa" 2>"$T/erra" &
a=$!
i=0
until ls -l "/proc/$a/fd" 2>/dev/null | grep -q "$T/race/data.mdb"; do
	i=$((i + 1)); [ "$i" -lt 300 ] || fail "race: packer A did not open the pool"; sleep 0.05
done
touch "$T/gob"
set +e; wait "$b"; rc=$?; set -e
wait "$pb" || :
[ "$rc" -eq 1 ] && grep -q "truncated record stream.*nothing was committed" "$T/errb" ||
	fail "race: packer B: exit $rc: $(cat "$T/errb")"
[ -e "$T/race/data.mdb" ] || fail "race: a failed first pack removed the pool another packer fills"
touch "$T/goa"
wait "$a" || fail "race: packer A: $(cat "$T/erra")"
wait "$pa" || :
[ -e "$T/race/data.mdb" ] && [ "$(pp dump "$T/race" keys)" = "$(pp dump "$T/seq" keys | grep c1_)" ] ||
	fail "race: the pool does not hold packer A's records"

# A failed first pack into a folder that was there, empty or not, removes
# the data.mdb and lock.mdb it created there (only those): it left an empty
# pool, which cdp-keyshuffle called "pool has no tiles". Into a pool that
# was there, nothing goes.
head -c 700 "$T/c1.cdps" >"$T/c1cut.cdps"
mkdir "$T/ef"
expect_fail 1 "^cdp-lmdbpack: '<stdin>': truncated record stream (its producer died?) after 0 records; nothing was committed\$" \
	cdp-lmdbpack -q "$T/ef" <"$T/c1cut.cdps"
[ -d "$T/ef" ] && [ -z "$(ls -A "$T/ef")" ] || fail "a failed first pack into an empty folder left $(ls -A "$T/ef")"
echo mine >"$T/ef/notes.txt"
expect_fail 1 "nothing was committed\$" cdp-lmdbpack -q "$T/ef" <"$T/c1cut.cdps"
[ "$(ls -A "$T/ef")" = notes.txt ] || fail "a failed first pack beside a file left $(ls -A "$T/ef")"
cdp-lmdbpack -q --txn-records 5 "$T/ef" <"$T/c1.cdps" || fail "a pack into a folder with a file"
expect_fail 1 "nothing of it was committed, re-run with --resume\$" \
	cdp-lmdbpack -q "$T/ef" <"$T/c1cut.cdps"
[ "$(pp dump "$T/ef" keys)" = "$(pp dump "$T/seq" keys | grep c1_)" ] ||
	fail "a failed pack into a pool that was there changed it"

# A plain pack, and a --resume, while another's --replace is running (held
# after its first commits, which marked the stats stale) are refused as for
# an interrupted one, in words that fit both: it said "an interrupted
# --replace left it stale" of the running one.
rm -rf "$T/rr" "$T/fr" "$T/gor"
mkdir -p "$T/alt"
"$PYTHON" "$MK" "$T/alt/c1.tif" --width 200 --height 120 --bands 3 --dtype i16 --seed 23
cdp-tile -q --size 16 "$T/alt/c1.tif" >"$T/alt/c1.cdps"
cdp-lmdbpack -q "$T/rr" <"$T/c1.cdps"
mkfifo "$T/fr"
held "$T/alt/c1.cdps" "$T/gor" all >"$T/fr" &
pr=$!
cdp-lmdbpack -q --replace --txn-records 2 "$T/rr" <"$T/fr" 2>"$T/errr" &
r=$!
i=0
until pp dump "$T/rr" stats | grep -q stale; do
	i=$((i + 1))
	[ "$i" -lt 300 ] || { kill "$r" "$pr" 2>/dev/null; fail "running --replace: no stale mark"; }
	sleep 0.05
done
want="^cdp-lmdbpack: '$T/rr': a cdp-lmdbpack --replace into it has not finished: wait for a running one to end, and re-run an interrupted one with --replace\$"
expect_fail 1 "$want" cdp-lmdbpack -q "$T/rr" <"$T/c2.cdps"
expect_fail 1 "$want" cdp-lmdbpack -q --resume "$T/rr" <"$T/c1.cdps"
touch "$T/gor"
wait "$r" || fail "running --replace: $(cat "$T/errr")"
wait "$pr" || :
pp check "$T/rr" >/dev/null
[ "$(pp dump "$T/rr" keys)" = "$(pp dump "$T/seq" keys | grep c1_)" ] || fail "running --replace: keys"

# --- a --folders key over 255 bytes names the file and the key's length -----------
c200=$(printf '%0200d' 0 | tr 0 c)
s100=$(printf '%0100d' 0 | tr 0 s)
mkdir -p "$T/lf/$c200"
cp "$T/c1.tif" "$T/lf/$c200/$s100.tif"
expect_fail 1 "^cdp-lmdbpack: '$T/lf/$c200/$s100.tif': key 'cccccccccccccccccccc/ssssssssssssssssssss\.\.\.' would be 301 bytes, longer than 255\$" \
	cdp-lmdbpack -q --folders "$T/lf" "$T/lfpool"
[ ! -e "$T/lfpool" ] || fail "--folders with a long key left a pool"
# --- a stream that contradicts itself: refused naming the frame or record ---
# (an S frame of other bands or dtype than its records, one cut inside its
# last line, a repeated key; a record of a NaN geotransform or of version 2
# for its label kind): packed as is, or refused in generic words, before
cat >"$T/mut.py" <<'EOF'
import re, struct, sys, zlib
src = open(sys.argv[1], "rb").read(); how = sys.argv[3]
out = bytearray(src[:8]); o = 8; first = True
while o < len(src):
    t, r0, N, B = struct.unpack_from("<BBHI", src, o)
    nm = src[o + 8:o + 8 + N]; body = src[o + 8 + N:o + 8 + N + B]
    if chr(t) == "S":
        if how == "s-bands":
            body = re.sub(rb"\nbands=[0-9]+\n", b"\nbands=2\n", body)
            body = re.sub(rb"\nband_list=[0-9,]+\n", b"\nband_list=1,2\n", body)
        elif how == "s-dtype":
            body = body.replace(b"dtype=u16", b"dtype=u8")
        elif how == "s-nonl":
            body = body[:-1]
        elif how == "s-dup":
            body += re.search(rb"\nwidth=[0-9]+\n", body).group(0)[1:]
    if chr(t) == "R" and first and how.startswith("r-"):
        first = False
        body = bytearray(body)
        if how == "r-gt-nan":
            struct.pack_into("<d", body, 40, float("nan"))
        else:
            struct.pack_into("<H", body, 4, 2)
        body[-4:] = struct.pack("<I", zlib.crc32(bytes(body[:-4])))
        body = bytes(body)
    h = struct.pack("<BBHI", t, 0, len(nm), len(body)) + nm + body
    out += h + struct.pack("<I", zlib.crc32(h)); o += 12 + N + B
open(sys.argv[2], "wb").write(out)
EOF
for c in s-bands s-dtype s-nonl s-dup r-gt-nan r-ver2; do
	"$PYTHON" "$T/mut.py" "$T/ms.cdps" "$T/$c.cdps" "$c"
done
# refused CASE MESSAGE: the stream CASE.cdps is refused with that one line
refused() {
	expect_fail 1 "^cdp-lmdbpack: '<stdin>': $2\$" cdp-lmdbpack -q "$T/mut" <"$T/$1.cdps"
}
refused s-bands "record 'ms_0_0' is u16 with 4 bands, its source 0 'ms' says u16 with 2"
refused s-dtype "record 'ms_0_0' is u16 with 4 bands, its source 0 'ms' says u8 with 4"
refused s-nonl "source 'ms': its last line has no newline"
refused s-dup "source 'ms': repeated key 'width'"
refused r-gt-nan "record 'ms_0_0': geotransform\[0\] is nan, not a finite number"
refused r-ver2 "record 'ms_0_0': version 2, label kind u8 has version 1"
[ ! -e "$T/mut" ] || fail "a refused stream left a pool"
exit 0
