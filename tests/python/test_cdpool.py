"""test_cdpool.py: the installed cdpool package against the C tools'
fixtures that tests/python/python.sh makes in DIR.

    test_cdpool.py DIR

Each check prints "ok  NAME"; the first failure prints "FAIL NAME: why"
and exits 1. Checks that need torch say SKIP when it is absent.
"""
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import lmdb
import numpy as np
from osgeo import gdal

import cdpool
from cdpool import CdpError
from cdpool.model import fit_checkpoint, model_of

gdal.UseExceptions()
T = sys.argv[1]
SMALL = os.path.join(os.environ["CDP_SRCDIR"], "tests", "train", "small.cfg")
NP = {"u8": np.uint8, "u16": np.uint16, "i16": np.int16, "u32": np.uint32, "i32": np.int32,
      "f32": np.float32, "f64": np.float64}


class Fail(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Fail(why)


def ok(name):
    print("ok  ", name)


def refused(code, fn, *args, **kw):
    """fn(*args) must raise CdpError with code; returns it."""
    try:
        fn(*args, **kw)
    except CdpError as e:
        check(e.code == code, "%s: want %s, got %s (%s)" % (fn.__name__, code, e.code, e))
        return e
    raise Fail("%s(%.60s) accepted, want %s" % (fn.__name__, repr(args), code))


def c_says(err, *cmd):
    """The C tool cmd must exit 1 with err's message in its stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 1, "%s exited %d, want 1: %s" % (cmd[0], p.returncode, p.stderr))
    check(str(err) in p.stderr, "%s says %r, Python %r" % (cmd[0], p.stderr.strip(), str(err)))


def copy_pool(src, name):
    """A copy without the lock file: reading and closing the lock file of a
    pool this process has open would drop its fcntl lock, and LMDB would
    then take the process's reader slots for a dead one's."""
    dst = os.path.join(T, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lock.mdb"))
    return dst


def put(pool_dir, db, key, value):
    env = lmdb.open(pool_dir, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=env.open_db(db, txn=txn))
    env.close()


def raw(pool_dir, db, key):
    env = lmdb.open(pool_dir, max_dbs=2, readonly=True, lock=False)
    with env.begin() as txn:
        v = txn.get(key, db=env.open_db(db, txn=txn, create=False))
    env.close()
    return v


def recrc(rec):
    """A record with its CRC recomputed over the (modified) bytes."""
    return rec[:-4] + struct.pack("<I", zlib.crc32(rec[:-4]))


def meta_value(text):
    b = text.encode()
    return b + b"crc32=%08x\n" % zlib.crc32(b)


# ---- pools of every record dtype ------------------------------------------------------
def test_dtypes():
    for dt in NP:
        path = os.path.join(T, "p_" + dt)
        p = cdpool.Pool(path)
        check(p.dtype_name == dt and p.dtype == np.dtype(NP[dt]).newbyteorder("<"),
              "%s: dtype %s" % (dt, p.dtype_name))
        check(p.shape == (2, 32, 32) and len(p) == 4 and p.tiles == 4, "%s: shape" % dt)
        check(p.keys() == ["%s_%d_%d" % (dt, r, c) for r in (0, 1) for c in (0, 1)],
              "%s: keys %s" % (dt, p.keys()))
        check(re.fullmatch("[0-9a-f]{32}", p.uuid), "uuid")
        src = gdal.Open(os.path.join(T, "r", dt + ".tif"))
        full = src.ReadAsArray()                               # (C, 64, 64)
        nodata = src.GetRasterBand(1).GetNoDataValue()
        valid = np.ones(full.shape[1:], bool) if nodata is None else ~np.all(full == nodata, 0)
        check(len(p.sources) == 1 and p.sources[0]["path"].endswith(dt + ".tif")
              and p.sources[0]["width"] == 64 and p.sources[0]["dtype"] == dt, "sources")
        # the one source's exact sums: its raster's valid pixels, as the pool's
        m, sd, n = p.source_stats([0])
        want = [full[b][valid].astype(np.float64) for b in range(2)]
        want = [x[np.isfinite(x)] for x in want]
        check(n == [x.size for x in want] and np.allclose(m, [x.mean() for x in want], rtol=1e-12)
              and np.allclose(sd, [x.std() for x in want], rtol=1e-9)
              and np.allclose(m, p.mean, rtol=1e-15), "%s: source_stats %r %r" % (dt, m, sd))
        for key in p.keys():
            r, c = (int(x) for x in key.split("_")[1:])
            win = (slice(None), slice(32 * r, 32 * r + 32), slice(32 * c, 32 * c + 32))
            image, label = p[key]
            rec = p.record(key)
            check(image.dtype == NP[dt] and image.shape == (2, 32, 32), "%s %s" % (dt, key))
            check(np.array_equal(image, full[win]), "%s: %s differs from GDAL" % (dt, key))
            check((rec.x_off, rec.y_off) == (32 * c, 32 * r), "%s: offsets" % key)
            check(image.flags.writeable and image.flags.owndata, "pool[key] copies")
            if nodata is not None:
                check(rec.mask is not None and np.array_equal(rec.mask == 255, valid[win[1:]]),
                      "%s: mask" % key)
            if dt == "u8":
                lab = gdal.Open(os.path.join(T, "r", "u8_lab.tif")).ReadAsArray()
                check(p.label_kind == "u16" and label.dtype == np.uint16
                      and np.array_equal(label, lab[win[1:]]), "%s: label" % key)
            else:
                check(label is None and p.label_kind == "none", "%s: no label" % key)
            with p.view() as v:
                im2, _ = v[key]
                check(np.array_equal(im2, image), "view")
                zero_copy = not rec.compression
                check(im2.flags.owndata is False and (im2.flags.writeable is False), "view ro")
                base = im2
                while isinstance(base, np.ndarray) and base.base is not None:
                    base = base.base
                check(isinstance(base, memoryview) or not zero_copy,
                      "%s: view copies an uncompressed record" % key)
        check((p.record(p.keys()[0]).compression == 1) == (dt in ("u16", "f32")), "zlib")
        for b in range(2):
            x = full[b][valid].astype(np.float64)
            m, s = x.mean(), x.std()
            check(p.stats[b]["count"] == x.size, "%s: band %d count" % (dt, b + 1))
            check(abs(p.mean[b] - m) <= 1e-12 * abs(m) and abs(p.std[b] - s) <= 1e-9 * s,
                  "%s: band %d mean %r std %r, numpy %r %r" % (dt, b + 1, p.mean[b], p.std[b], m, s))
            check(p.stats[b]["min"] == x.min() and p.stats[b]["max"] == x.max(), "min max")
        if dt == "u8":
            lab = gdal.Open(os.path.join(T, "r", "u8_lab.tif")).ReadAsArray()
            want = {int(k): int(n) for k, n in zip(*np.unique(lab, return_counts=True))}
            check(p.classes == want, "classes %s, want %s" % (p.classes, want))
        p.close()
    ok("pools u8..f64: tiles, masks, u16 labels, zlib, statistics, classes equal GDAL's")

    p = cdpool.Pool(os.path.join(T, "p_class"))
    check(p.label_kind == "class" and sorted(p.keys()) == ["chip_a", "chip_b"], "class pool")
    for key, cls in (("chip_a", 0), ("chip_b", 2)):
        image, label = p[key]
        want = gdal.Open(os.path.join(T, "r", key + ".tif")).ReadAsArray()
        check(np.array_equal(image, want) and label.shape == () and int(label) == cls,
              "%s: class %s" % (key, label))
    check(p.classes == {0: 1, 2: 1}, "class histogram %s" % p.classes)
    ok("scalar-class chips")


# ---- refusals -------------------------------------------------------------------------
def test_record_refusals():
    pool = os.path.join(T, "pool")
    p = cdpool.Pool(pool)
    key = p.keys()[3]
    rec = raw(pool, b"tiles", key.encode())
    dec = cdpool.decode_record
    flip = bytearray(rec)
    flip[300] ^= 1
    refused("ECRC", dec, bytes(flip))
    refused("EMAGIC", dec, b"CDPX" + rec[4:])
    refused("EVERSION", dec, rec[:4] + b"\x03\x00" + rec[6:])
    refused("EFORMAT", dec, recrc(rec[:4] + b"\x02\x00" + rec[6:]))  # v2 is for kinds 4, 5
    refused("ETRUNC", dec, rec[:-10])
    refused("ETRUNC", dec, rec[:100])
    refused("EFORMAT", dec, rec + b"\0")                       # trailing bytes
    refused("EFORMAT", dec, recrc(rec[:100] + b"\1" + rec[101:]))   # reserved byte
    refused("EFORMAT", dec, recrc(rec[:8] + b"\x09" + rec[9:]))     # dtype 9
    zp = os.path.join(T, "p_u16")
    zrec = raw(zp, b"tiles", b"u16_0_0")
    bad = bytearray(zrec)
    bad[170] ^= 0xFF                                           # inside the deflate stream
    refused("EZLIB", dec, recrc(bytes(bad)))
    ok("record refusals: crc, magic, version, truncation, trailing bytes, fields, zlib")

    bad = copy_pool(pool, "badrec")
    put(bad, b"tiles", key.encode(), bytes(flip))
    e = refused("ECRC", cdpool.Pool(bad).__getitem__, key)
    check(str(e) == "'%s': record '%s': checksum mismatch" % (bad, key), str(e))
    c_says(e, "cdp-train", "--db", bad, "--keys", os.path.join(T, "train.keys"), "-q",
           "--threads", "1", "--model", SMALL + ":in_h=32,in_w=32", "--batch", "36",
           "--steps", "1", "--out", os.path.join(T, "badrun"))
    ok("a damaged record in a pool: the same message as cdp-train's")

    cases = [("stats", lambda t: t.replace(b"band.1.mean=", b"band.1.mean=9"), "ECRC"),
             ("count", lambda t: meta_value("tiles=99\n"), "EFORMAT"),
             ("format", lambda t: meta_value("format=cdpool-pool\nversion=3\n"), "EVERSION"),
             ("format", lambda t: meta_value("format=other\nversion=1\n"), "EFORMAT"),
             ("uuid", lambda t: meta_value("uuid=XYZ\n"), "EFORMAT"),
             ("stats", lambda t: meta_value(t[:-15].decode().replace("bands=3\n",
                                                                      "bands=3\nstale=1\n")),
              "EFORMAT")]
    for i, (name, change, code) in enumerate(cases):
        bad = copy_pool(pool, "badmeta%d" % i)
        put(bad, b"meta", name.encode(), change(raw(pool, b"meta", name.encode())))
        refused(code, cdpool.Pool, bad)
    ok("pool meta refusals: crc, count, version, format, uuid, stale stats")


def edit_meta(src, name, change, drop=()):
    """A copy of pool src whose meta value name (None: none) is change(its
    text) with a new crc line; the meta values in drop deleted."""
    dst = copy_pool(src, "edit_" + re.sub(r"\W", "_", "%s_%s" % (name, "_".join(drop))))
    env = lmdb.open(dst, max_dbs=2)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        if name:
            text = bytes(txn.get(name.encode(), db=meta))[:-15].decode()
            txn.put(name.encode(), meta_value(change(text)), db=meta)
        for d in drop:
            txn.delete(d.encode(), db=meta)
    env.close()
    return dst


def test_meta_consistency():
    """Meta damage the C readers refuse, Pool() and info refuse in their
    words: counts against the records (an absent one counts 0), repeated
    keys, missing shape or stats, integer sums no samples give, sources as
    cdp_source_parse reads them; mean= and std= lines are derived, never
    read."""
    pool = os.path.join(T, "pool")
    p = cdpool.Pool(pool)
    n, src = p.tiles, sorted({s["index"] for s in p.sources})
    train = ["cdp-train", "--keys", os.path.join(T, "train.keys"), "-q", "--threads", "1",
             "--model", SMALL + ":in_h=32,in_w=32", "--batch", "36", "--steps", "1",
             "--out", os.path.join(T, "metarun"), "--db"]
    sub = re.sub
    cases = [
        ("count", lambda t: "tiles=0\n", (), "count record says 0 tiles but the pool holds %d" % n),
        (None, None, ("count",), "no count record but the pool holds %d tiles" % n),
        ("count", lambda t: t + "tiles=%d\n" % n, (), "count record: repeated key 'tiles'"),
        ("shape", lambda t: t + "width=16\n", (), "shape record: repeated key 'width'"),
        ("shape", lambda t: sub(r"width=[0-9]+", "width=0", t), (),
         "shape record: width=0 is not a number in 1..65536"),
        (None, None, ("stats",), "no stats record but the pool holds %d tiles" % n),
        ("stats", lambda t: sub(r"band\.1\.min=[^\n]*", "band.1.min=300", t), (),
         "stats record: band 1: min 300 is above max %d" % p.stats[0]["max"]),
        ("stats", lambda t: sub(r"band\.1\.sumsq=[^\n]*", "band.1.sumsq=1", t), (),
         "stats record: band 1: sumsq 1 is below sum^2 / count (a negative variance)"),
        ("uuid", lambda t: t + t, (), "uuid record: repeated key 'uuid'"),
    ]
    for name, change, drop, why in cases:
        bad = edit_meta(pool, name, change, drop)
        e = refused("EFORMAT", cdpool.Pool, bad)
        check(str(e) == "'%s': %s" % (bad, why), "%s: %s, want %s" % (name or drop, e, why))
        r = info(bad)
        check(r.returncode == 1 and r.stderr == "cdpool: cannot read %s\n" % e,
              "info: %d %r" % (r.returncode, r.stderr))
        c_says(e, *train, bad)
        if name in ("count", None) and "stats" not in drop:
            c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "meta.keys"), bad)
    ok("meta damage: Pool, info, cdp-train and cdp-keyshuffle refuse it in one wording")

    # the sums decide, as in C: a mean= line of 1000 without per-source sums
    bad = edit_meta(pool, "stats", lambda t: sub(r"band\.1\.mean=[^\n]*", "band.1.mean=1000", t),
                    ["srcstats.%06d" % i for i in src])
    q = cdpool.Pool(bad)
    check(np.array_equal(q.mean, p.mean) and np.array_equal(q.std, p.std) and
          abs(q.mean[0] - 1000) > 1, "mean %s std %s, want %s %s" % (q.mean, q.std, p.mean, p.std))
    ok("the pool's mean and std derived from its sums, not read from mean= and std=")

    name = "srcstats.%06d" % src[0]
    for change, why in (
            (lambda t: sub(r"band\.1\.sum=[^\n]*", "band.1.sum=999999999999", t),
             "band 1: sum 999999999999 is outside count * min .. count * max"),
            (lambda t: sub(r"band\.1\.sumsq=[^\n]*", "band.1.sumsq=1", t),
             "band 1: sumsq 1 is below sum^2 / count (a negative variance)")):
        bad = edit_meta(pool, name, change)
        e = refused("EFORMAT", cdpool.Pool(bad).source_stats, src)
        want = "'%s': cannot combine the training sources' sums: meta '%s': %s" % (bad, name, why)
        check(str(e).startswith(want), "%s, want %s" % (e, want))
        c_says(e, *train, bad)
    ok("per-source sums no samples give: refused naming the source and band, as cdp-train")

    for change, why in (
            (lambda t: sub(r"width=[0-9]+", "width=0", t), "width=0: number out of range"),
            (lambda t: sub(r"name=([^\n]*)", "name=" + "n" * 300, t),
             "name is 300 bytes, longer than the 255 a name may have"),
            (lambda t: t + "height=5\n", "repeated key 'height'"),
            (lambda t: sub(r"\ngeotransform=[^\n]*", "", t), "no geotransform line")):
        bad = edit_meta(pool, "source.%06d" % src[0], change)
        e = refused("EFORMAT", cdpool.Pool, bad)
        want = "'%s': meta 'source.%06d': %s" % (bad, src[0], why)
        check(str(e) == want, "%s, want %s" % (e, want))
        c_says(e, *train, bad)
    ok("sources refused as cdp_source_parse refuses them, in cdp-train's words")

    # a record of another layout than the shape says: refused by pool[key]
    # in the loader's words (it served a (1, 32, 32) image from a pool whose
    # shape said (1, 32, 64))
    bad = edit_meta(pool, "shape", lambda t: sub(r"width=([0-9]+)", "width=64", t))
    q = cdpool.Pool(bad)
    k = q.keys()[0]
    e = refused("ESHAPE", q.__getitem__, k)
    want = "'%s': record '%s' is %s %dx%dx32 label %s, the pool's meta says %s %dx%dx64 label %s" % (
        bad, k, p.dtype_name, p.bands, p.height, p.label_kind, p.dtype_name, p.bands, p.height,
        p.label_kind)
    check(str(e) == want, "%s, want %s" % (e, want))
    c_says(str(e).split("' is ", 1)[1], *train, bad)      # the loader samples another key
    ok("a record unlike the pool's shape: refused by pool[key] as cdp-train refuses it")

    # the sources are numbered 0..n-1: a missing one is the pool's damage,
    # not LMDB's MDB_NOTFOUND (cdp-train) nor nothing at all (Pool)
    bad = edit_meta(pool, None, None, ["source.%06d" % src[0]])
    e = refused("EFORMAT", cdpool.Pool, bad)
    check(str(e) == "'%s': meta 'source.%06d' is missing (the pool holds %d tiles and describes "
          "no source)" % (bad, src[0], n), str(e))
    c_says(e, *train, bad)
    c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "meta.keys"), bad)
    ok("a missing source: refused by Pool, cdp-train and cdp-keyshuffle in one wording")

    # readers look sources up as source.%06d: another spelling of the
    # number would be read as missing, another index= names another source
    bad = copy_pool(pool, "edit_source_spelling")
    env = lmdb.open(bad, max_dbs=2)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        name = ("source.%06d" % src[0]).encode()
        txn.put(b"source.%d" % src[0], bytes(txn.get(name, db=meta)), db=meta)
        txn.delete(name, db=meta)
    env.close()
    e = refused("EFORMAT", cdpool.Pool, bad)
    check(str(e) == "'%s': meta 'source.%d': not a source name (source.NNNNNN, at least six "
          "digits, no extra leading zero)" % (bad, src[0]), str(e))
    c_says(e, *train, bad)
    bad = edit_meta(pool, "source.%06d" % src[0],
                    lambda t: sub(r"index=[0-9]+", "index=%d" % (src[0] + 7), t))
    e = refused("EFORMAT", cdpool.Pool, bad)
    check(str(e) == "'%s': meta 'source.%06d': index=%d is not the index of its name"
          % (bad, src[0], src[0] + 7), str(e))
    c_says(e, *train, bad)
    ok("a source named or indexed otherwise than readers look it up: refused as cdp-train does")

    # a CR a meta value quotes is shown as \r (it hid the start of the line)
    bad = edit_meta(pool, "count", lambda t: t.replace("\n", "\r\n"))
    e = refused("EFORMAT", cdpool.Pool, bad)
    check(str(e) == "'%s': count record: tiles=%d\\r is not a number" % (bad, n), str(e))
    c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "meta.keys"), bad)
    c_says(e, *train, bad)
    ok("control bytes of meta text escaped in messages, as the C readers escape them")


def write_keys(path, uuid, keys, seed=5, count=None, crc=None, header=None):
    body = "".join(k + "\n" for k in keys).encode()
    h = header or "#cdpool-keys 1 uuid=%s seed=%d count=%d crc32=%08x" % (
        uuid, seed, len(keys) if count is None else count,
        zlib.crc32(body) if crc is None else crc)
    with open(path, "wb") as f:
        f.write(h.encode() + b"\n" + body)
    return path


def test_keys():
    pool = cdpool.Pool(os.path.join(T, "pool"))
    kl = cdpool.read_keys(os.path.join(T, "train.keys"), pool=pool)
    check(kl.uuid == pool.uuid and kl.seed == 5 and sorted(kl) == pool.keys(), "train.keys")
    u, keys = kl.uuid, list(kl)
    d = os.path.join(T, "k")
    os.makedirs(d, exist_ok=True)
    cases = [
        ("magic", write_keys(d + "/a", u, keys, header="#cdpool-kez 1"), "EMAGIC", 1),
        ("version", write_keys(d + "/b", u, keys, header="#cdpool-keys 3 uuid=%s" % u),
         "EVERSION", 1),
        ("header", write_keys(d + "/c", u, keys, header="#cdpool-keys 1 uuid=%s seed=x" % u),
         "ESYNTAX", 1),
        ("crc", write_keys(d + "/d", u, keys, crc=zlib.crc32(b"x")), "ECRC", 0),
        ("fewer lines", write_keys(d + "/e", u, keys, count=len(keys) + 2), "ETRUNC",
         len(keys) + 2),
        ("more lines", write_keys(d + "/f", u, keys, count=len(keys) - 1), "EFORMAT",
         len(keys) + 1),
        ("a space", write_keys(d + "/g", u, keys[:3] + ["a b"] + keys[4:]), "ESYNTAX", 5),
    ]
    # the header is one exact form: its numbers without leading zeros or signs
    body = "".join(k + "\n" for k in keys).encode()
    for i, (v, seed, count) in enumerate((("01", "5", "%d"), ("1", "05", "%d"),
                                          ("1", "5", "00%d"), ("1", "5", "+%d"),
                                          ("1", "+5", "%d"), ("2", "5", "0%d"))):
        h = "#cdpool-keys %s uuid=%s seed=%s count=%s%s crc32=%08x" % (
            v, u, seed, count % len(keys), " repeats=0" if v == "2" else "", zlib.crc32(body))
        cases.append(("header %s" % h, write_keys(d + "/z%d" % i, u, keys, header=h),
                      "ESYNTAX", 1))
    with open(d + "/h", "wb") as f:              # no final line feed
        f.write(open(os.path.join(T, "train.keys"), "rb").read()[:-1])
    cases.append(("no final newline", d + "/h", "EFORMAT", len(keys) + 1))
    for name, path, code, line in cases:
        e = refused(code, cdpool.read_keys, path)
        check(e.line == line, "%s: line %d, want %d" % (name, e.line, line))
        c_says(e, "cdp-train", "--db", pool.path, "--keys", path, "-q", "--threads", "1",
               "--model", SMALL + ":in_h=32,in_w=32", "--batch", "4", "--steps", "1",
               "--out", os.path.join(T, "krun"))
    dup = write_keys(d + "/i", u, keys[:5] + keys[3:4] + keys[6:])
    e = refused("EDUPKEY", cdpool.read_keys, dup)
    check(e.line == 7, "duplicate key: line %d" % e.line)
    check("key '%s' on lines 5 and 7" % keys[3] in str(e), "duplicate key: %s" % e)
    c_says(e, "cdp-train", "--db", pool.path, "--keys", dup, "-q", "--threads", "1",
           "--model", SMALL + ":in_h=32,in_w=32", "--batch", "4", "--steps", "1",
           "--out", os.path.join(T, "krun"))
    # version 2, repeats=1: a key on two lines is meant (cdp-keyshuffle --oversample)
    rkeys = keys[:5] + keys[3:4] + keys[6:]
    rbody = "".join(k + "\n" for k in rkeys).encode()
    rep = write_keys(d + "/r", u, rkeys, header="#cdpool-keys 2 uuid=%s seed=5 count=%d "
                     "repeats=1 crc32=%08x" % (u, len(rkeys), zlib.crc32(rbody)))
    kr = cdpool.read_keys(rep, pool=pool)
    check(kr.repeats and list(kr) == rkeys and not kl.repeats, "repeats=1: %r" % kr)
    other = write_keys(d + "/j", "0" * 32, keys)
    cdpool.read_keys(other)
    e = refused("EMISMATCH", cdpool.read_keys, other, pool=pool)
    c_says(e, "cdp-train", "--db", pool.path, "--keys", other, "-q", "--threads", "1",
           "--model", SMALL + ":in_h=32,in_w=32", "--batch", "4", "--steps", "1",
           "--out", os.path.join(T, "krun"))
    ok("pointer files: the C reader's refusals, lines and messages; duplicates; uuid")


# ---- cdp-train's order -----------------------------------------------------------------
def key_log(path):
    """{(epoch, step): [keys]} of a CDP_TRAIN_LOG_KEYS file, in order."""
    out = {}
    for line in open(path):
        e, s, k = line.split()
        out.setdefault((int(e), int(s)), []).append(k)
    return out


def sampler_log(kl, sampler, epochs):
    out = {}
    for e in epochs:
        sampler.set_epoch(e)
        idx = list(sampler)
        b = sampler.batch
        for i in range(0, len(idx), b):
            out[(e, sampler.start_step + i // b)] = [kl[j] for j in idx[i:i + b]]
    return out


def test_sampler():
    kl = cdpool.read_keys(os.path.join(T, "train.keys"))
    n = len(kl)
    one = key_log(os.path.join(T, "k1.0"))
    s1 = cdpool.BlockSampler(kl, 4, 0, 1, seed=7)
    check(s1.steps == n // 4 and len(s1) == n // 4 * 4, "steps")
    check(sampler_log(kl, s1, (0, 1)) == one, "j=1: the sampler's keys differ from cdp-train's")
    for j in (2, 4):
        b = 4 // j
        logs = [os.path.join(T, "k%d.%d" % (j, r)) for r in range(j)]
        have = all(os.path.exists(f) for f in logs)
        for r in range(j):
            s = cdpool.BlockSampler(n, b, r, j, seed=7)
            got = sampler_log(kl, s, (0, 1))
            want = {es: keys[r * b:(r + 1) * b] for es, keys in one.items()}
            check(got == want, "j=%d rank %d: not block r + j*s of the 1-process order" % (j, r))
            if have:
                check(got == key_log(logs[r]), "j=%d rank %d: differs from cdp-train's log" % (j, r))
        print("ok   j=%d: every (epoch, step, rank)%s" % (
            j, " equals cdp-train's log" if have else " is block r + j*s (no MPI run)"))
    sp = cdpool.BlockSampler(n, 5, 0, 1, seed=7, pad_last=True)
    check(sp.steps == -(-n // 5), "pad_last steps")
    check(sampler_log(kl, sp, (0, 1)) == key_log(os.path.join(T, "kp.0")), "pad_last keys")
    # accumulate=2: whole steps of 2 batches of 8, the last filled from the
    # order's start (not ceil(n / 8) batches cut to whole steps)
    sa = cdpool.BlockSampler(n, 8, 0, 1, seed=7, pad_last=True, accumulate=2)
    check(sa.steps == 2 * -(-n // 16), "pad_last, accumulate=2: %d batches" % sa.steps)
    check(sampler_log(kl, sa, (0, 1)) == key_log(os.path.join(T, "kpa.0")),
          "pad_last, accumulate=2 keys")
    ck = cdpool.load_checkpoint(os.path.join(T, "step5.cdpt"))
    check((ck.step, ck.epoch, ck.data_pos) == (5, 0, 20), "step-5 checkpoint position")
    sr = cdpool.BlockSampler(n, 4, 0, 1, seed=ck.seed)
    sr.resume(ck)
    got = sampler_log(kl, sr, (0,))
    sr.set_epoch(1)
    got.update({k: v for k, v in sampler_log(kl, sr, (1,)).items() if k[1] < 5})
    check(got == key_log(os.path.join(T, "kr.0")), "resumed keys differ from cdp-train --resume")
    ok("j=1, --pad-last and --pad-last with accumulate=2 equal cdp-train's logs; resume(ckpt) "
       "continues as --resume")


# ---- checkpoints ------------------------------------------------------------------------
def test_checkpoint():
    pool = cdpool.Pool(os.path.join(T, "pool"))
    path = os.path.join(T, "run1", "checkpoint.cdpt")
    c = cdpool.load_checkpoint(path)
    check(c.version == 8 and c.in_shape == (3, 32, 32) and (c.step, c.epoch, c.data_pos) ==
          (18, 2, 0) and c.seed == 7, "progress %r" % c)
    check(c.pool_uuid == pool.uuid and c.bands == [1, 2, 3] and c.dtype == "u8", "data")
    # the road pool names no classes (classify.sh checks --folders' names)
    check(c.class_names == pool.class_names == [], "class names %r" % c.class_names)
    check((c.batch, c.batch_ranks, c.batch_accumulate) == (4, 1, 1), "global batch %r" %
          ((c.batch, c.batch_ranks, c.batch_accumulate),))
    check(np.array_equal(c.mean, pool.mean) and np.array_equal(c.std, pool.std), "stats")
    # every key trains: the sums of the pool's one source, which are its stats
    m, sd, _ = pool.source_stats(c.std_sources)
    check(c.std_from == "sources" and c.std_sources == [0] and np.array_equal(m, c.mean)
          and np.array_equal(sd, c.std), "standardization from %s %r" % (c.std_from, c.std_sources))
    gt = pool.sources[0]["geotransform"]
    check("UTM" in c.crs and c.crs == pool.sources[0]["crs"] and
          c.res == (math.hypot(gt[1], gt[4]), math.hypot(gt[2], gt[5])), "georeference %r" % (c.res,))
    check(c.cfg_text == open(SMALL).read() and c.overrides == ["in_h=32", "in_w=32"], "cfg")
    o = c.optim
    check(o["type"] == "sgd" and o["lr"] == np.float32(0.05) and o["momentum"] == np.float32(0.9)
          and o["step"] == 18 and o["m"] is None and o["v"].size == c.param_block().size,
          "optimizer %r" % {k: v for k, v in o.items() if k not in ("m", "v")})
    check(all(np.all(np.isfinite(t)) for t in c.params.values()), "finite")
    model = __import__("json").load(open(os.path.join(T, "small.json")))
    suffix = {"weight": "w", "bias": "b"}
    want = [(L["name"] + "." + suffix[q["name"]], tuple(q["shape"]))
            for L in model["layers"] for q in L["params"]]
    got = [(k, t.shape) for k, t in c.params.items()]
    check(got == want, "tensors %s, model_dump's model %s" % (got, want))
    check(c.param_block().size == model["nparams"] and not c.buffers, "parameter count")
    try:
        import torch  # noqa: F401
        from cdpool.torch_model import EngineNet
    except ImportError:
        print("SKIP torch twin (no torch)")
    else:
        net = EngineNet(model)
        check([tuple(p.shape) for p in net.parameters()] == [s for _, s in want], "twin shapes")
        check(c.param_block().size == sum(p.numel() for p in net.parameters()), "twin size")
    ok("a cdp-train checkpoint: every field, tensors of model_dump's model")
    test_to_torch(c, os.path.join(T, "run1", "checkpoint.cdpt"))
    test_to_torch(cdpool.load_checkpoint(os.path.join(T, "runu", "checkpoint.cdpt")),
                  os.path.join(T, "runu", "checkpoint.cdpt"))

    b = open(path, "rb").read()
    d = os.path.join(T, "ck")
    os.makedirs(d, exist_ok=True)

    def fixcrc(x):
        return x[:-4] + struct.pack("<I", zlib.crc32(x[:-4]))

    i = b.index(b"DATA") + 16 + 8 + 12 + 24           # the first std, f64
    nan_at = b.index(b"conv0.w") + 7 + 4 + 16         # conv0.w's first value
    cases = [("ECRC", b[:500] + bytes([b[500] ^ 1]) + b[501:]),
             ("ETRUNC", b[:-9]),
             ("EFORMAT", b + b"\0"),
             ("EMAGIC", b"CDPCKPX\n" + b[8:]),
             ("EVERSION", b[:8] + struct.pack("<I", 9) + b[12:]),
             ("EFORMAT", fixcrc(b[:i] + struct.pack("<d", -1.0) + b[i + 8:]))]
    # what each says besides the code: by how much the size is off, which field
    meta_c = b.index(b"META") + 16
    cases += [("EFORMAT", fixcrc(b[:meta_c] + struct.pack("<I", 0) + b[meta_c + 4:]))]
    says = {1: "truncated: %d bytes of the %d its size field gives" % (len(b) - 9, len(b)),
            2: "1 extra bytes after the %d its size field gives" % len(b),
            4: "'%s': format version 9; this build reads 1 to 8: written by a newer cdpool"
               % os.path.join(d, "bad4.cdpt"),
            6: "META's input shape 0x"}
    for k, (code, data) in enumerate(cases):
        f = os.path.join(d, "bad%d.cdpt" % k)
        open(f, "wb").write(data)
        e = refused(code, cdpool.load_checkpoint, f)
        check(k not in says or says[k] in str(e), "case %d: %s, want %r" % (k, e, says.get(k)))
        c_says(e, "cdp-predict", "-q", f, os.path.join(T, "r", "road.tif"),
               "-o", os.path.join(T, "pred.tif"))
    f = os.path.join(d, "nan.cdpt")
    open(f, "wb").write(fixcrc(b[:nan_at] + struct.pack("<f", float("nan")) + b[nan_at + 4:]))
    check(np.isnan(cdpool.load_checkpoint(f, finite=False).params["conv0.w"].flat[0]),
          "NaN read with finite=False")
    e = refused("EFORMAT", cdpool.load_checkpoint, f)
    check("parameter tensor 'conv0.w' holds NaN at element 0" in str(e), "NaN: %s" % e)
    c_says(e, "cdp-predict", "-q", f, os.path.join(T, "r", "road.tif"),
           "-o", os.path.join(T, "pred.tif"))
    # OPTM against META and cdp-checkpoint(5), as the C reader: steps taken
    # beyond META's step (before: read), negative (before: "holds N values
    # a block for N parameters") and an infinite clipping norm (before: read)
    optm = b.index(b"OPTM") + 16
    steps, clip = optm + 16 + 40 + 24, optm + 16 + 36
    check(struct.unpack_from("<q", b, steps)[0] == 18, "OPTM's steps taken")
    for k, (at, raw, says) in enumerate((
            (steps, struct.pack("<q", 1 << 60), "the optimizer's steps taken (OPTM) are "
             "1152921504606846976, 0 to META's step 18 expected"),
            (steps, struct.pack("<q", -3), "the optimizer's steps taken (OPTM) are -3, 0 to "
             "META's step 18 expected"),
            (clip, struct.pack("<f", float("inf")), "the optimizer's settings (OPTM): clipping "
             "norm is inf (every setting finite)"))):
        f = os.path.join(d, "optm%d.cdpt" % k)
        open(f, "wb").write(fixcrc(b[:at] + raw + b[at + len(raw):]))
        e = refused("EFORMAT", cdpool.load_checkpoint, f)
        check(says in str(e), "OPTM case %d: %s, want %r" % (k, e, says))
        c_says(e, "cdp-predict", "-q", f, os.path.join(T, "r", "road.tif"),
               "-o", os.path.join(T, "pred.tif"))
    f = os.path.join(d, "optm.cdpt")
    open(f, "wb").write(fixcrc(b[:steps] + struct.pack("<q", 17) + b[steps + 8:]))
    check(cdpool.load_checkpoint(f).optim["step"] == 17, "a step skipped: read")
    ok("damaged checkpoints: the refusals and messages of cdp-predict; NaN refused")


def _chunks(b):
    """A checkpoint's chunks: (tag, flags, payload) in file order."""
    out, o = [], 24
    for _ in range(struct.unpack_from("<I", b, 12)[0]):
        tag, flags, n = struct.unpack_from("<4sIQ", b, o)
        out.append((tag, flags, bytes(b[o + 16:o + 16 + n])))
        o += 16 + n
    return out


def _build(version, chunks):
    """A checkpoint of these chunks, its header and CRC made right."""
    body = b"".join(t + struct.pack("<IQ", f, len(p)) + p for t, f, p in chunks)
    b = b"CDPCKPT\n" + struct.pack("<IIQ", version, len(chunks), 24 + len(body) + 4) + body
    return b + struct.pack("<I", zlib.crc32(b))


def test_compat():
    """Version 8's chunk flags and BEST, as the C reader takes them: an unknown
    chunk marked skippable is skipped wherever it stands among the optional
    ones (cdp-predict reads the file too); an unknown chunk without the mark,
    another flag bit, the mark on a fixed chunk or on a known chunk without
    it, flags in a version 7 file, and a BEST of an unknown metric, a value
    that is not finite or a step after the checkpoint's are refused with
    cdp-predict's messages; BEST reads as ck.best and info prints it;
    encode_initial writes version 8 with every chunk's flags 0."""
    path = os.path.join(T, "run1", "checkpoint.cdpt")
    b = open(path, "rb").read()
    ref = cdpool.load_checkpoint(path)
    cs = _chunks(b)
    tags = [t for t, _, _ in cs]
    check(b[8] == 8 and all(f == 0 for _, f, _ in cs[:-1]) and cs[-1][1] == 1 and
          tags[-3:] == [b"SUMS", b"PLAN", b"RUN "] and ref.best is None,
          "run1's checkpoint: version %d, %r" % (b[8], tags))
    cs = cs[:-1]               # without RUN (test_run's), as written before it
    d = os.path.join(T, "ck8")
    os.makedirs(d, exist_ok=True)
    road, pred = os.path.join(T, "r", "road.tif"), os.path.join(d, "pred.tif")
    skip = (b"ZZZZ", 1, b"a later cdpool's note")
    for k, at in enumerate((7, 8, len(cs))):
        f = os.path.join(d, "skip%d.cdpt" % k)
        open(f, "wb").write(_build(8, cs[:at] + [skip] + cs[at:]))
        ck = cdpool.load_checkpoint(f)
        check(ck.step == ref.step and ck.sums == ref.sums and ck.plan == ref.plan and
              all(np.array_equal(ck.params[n], ref.params[n]) for n in ref.params),
              "a skipped chunk at %d: the checkpoint differs" % at)
        r = subprocess.run(["cdp-predict", "-q", f, road, "-o", pred], capture_output=True,
                           text=True)
        check(r.returncode == 0, "cdp-predict with a skipped chunk at %d: %s" % (at, r.stderr))
    cases = [
        ("EVERSION", _build(8, cs[:8] + [(b"ZZZZ", 0, b"x")] + cs[8:]),
         "chunk 'ZZZZ' is not known to this build: written by a newer cdpool (format version 8)"),
        ("EVERSION", _build(8, cs[:8] + [(b"\x01z'\\", 0, b"x")] + cs[8:]),
         "chunk '\\x01z\\x27\\x5c' is not known to this build: written by a newer cdpool "
         "(format version 8)"),
        ("EVERSION", _build(8, cs[:8] + [(b"ZZZZ", 3, b"x")] + cs[8:]),
         "chunk 'ZZZZ' has flags 0x3 that this build does not know: written by a newer "
         "cdpool (format version 8)"),
        ("EFORMAT", _build(8, [(cs[0][0], 1, cs[0][2])] + cs[1:]),
         "chunk 'META' is marked skippable, which none of the seven fixed chunks may be"),
        ("EFORMAT", _build(8, cs[:-1] + [(b"PLAN", 1, cs[-1][2])]),
         "chunk 'PLAN' is marked skippable, which it never is"),
        ("EFORMAT", _build(7, cs[:-1] + [(b"PLAN", 1, cs[-1][2])]),
         "chunk 'PLAN' has flags 0x1 (0 in format version 7)"),
        ("EFORMAT", _build(7, cs[:8] + [skip] + cs[8:]),
         "chunk 'ZZZZ' has flags 0x1 (0 in format version 7)"),
        ("EFORMAT", _build(7, cs[:8] + [(b"ZZZZ", 0, b"x")] + cs[8:]),
         "chunk 'ZZZZ' is not one of format version 7"),
    ]
    best = struct.pack("<IIdQ", 1, 0, 0.1 + 0.6, ref.step)
    cases += [
        ("EFORMAT", _build(8, cs + [(b"BEST", 0, best)]),
         "chunk 'BEST' is not marked skippable, which it always is"),
        ("EFORMAT", _build(8, cs + [(b"BEST", 1, struct.pack("<IIdQ", 8, 0, 0.5, 3))]),
         "the best validation (BEST): metric 8, value 0.5 at step 3 (a known metric, a finite "
         "value, at most the %d steps taken)" % ref.step),
        ("EFORMAT", _build(8, cs + [(b"BEST", 1, struct.pack("<IIdQ", 2, 0, math.inf, 3))]),
         "the best validation (BEST): metric 2, value inf at step 3 (a known metric, a finite "
         "value, at most the %d steps taken)" % ref.step),
        ("EFORMAT", _build(8, cs + [(b"BEST", 1, struct.pack("<IIdQ", 0, 0, 0.5, ref.step + 1))]),
         "the best validation (BEST): metric 0, value 0.5 at step %d (a known metric, a finite "
         "value, at most the %d steps taken)" % (ref.step + 1, ref.step)),
        ("EVERSION", b[:8] + struct.pack("<I", 9) + b[12:],
         "format version 9; this build reads 1 to 8: written by a newer cdpool"),
        ("EVERSION", b[:8] + struct.pack("<I", 0) + b[12:],
         "format version 0; this build reads 1 to 8"),
    ]
    for k, (code, data, want) in enumerate(cases):
        f = os.path.join(d, "bad%d.cdpt" % k)
        open(f, "wb").write(data)
        e = refused(code, cdpool.load_checkpoint, f)
        check(str(e) == "'%s': %s" % (f, want), "case %d: %s, want %r" % (k, e, want))
        c_says(e, "cdp-predict", "-q", f, road, "-o", pred)
    # BEST among the chunks, and a skippable one after it
    f = os.path.join(d, "best.cdpt")
    open(f, "wb").write(_build(8, cs + [(b"BEST", 1, best), skip]))
    ck = cdpool.load_checkpoint(f)
    check(ck.best == {"metric": "miou", "value": 0.1 + 0.6, "step": ref.step}, "best %r" % ck.best)
    r = info(f)
    check(r.returncode == 0 and "best: miou %.17g at step %d\n" % (0.1 + 0.6, ref.step) in r.stdout,
          "info of BEST: %d %r" % (r.returncode, r.stderr or r.stdout[-300:]))
    r = subprocess.run(["cdp-predict", "-q", f, road, "-o", pred], capture_output=True, text=True)
    check(r.returncode == 0, "cdp-predict with BEST: %s" % r.stderr)
    # the writer: version 8, flags 0
    w = cdpool.checkpoint.encode_initial("[net]\n", [], (1, 4, 4),
                                         {"c.w": np.ones((2, 1, 1, 1), np.float32)}, {})
    check(w[8:12] == struct.pack("<I", 8) and all(fl == 0 for _, fl, _ in _chunks(w)) and
          cdpool.checkpoint.decode_checkpoint(w).initial, "encode_initial: version %d" % w[8])
    ok("version 8: skippable chunks skipped, unknown ones and flags refused as C refuses "
       "them; BEST read, printed, validated")


def test_run():
    """RUN (version 8, skippable, after BEST): cdp-train records in every
    checkpoint and best.cdpt --pad-last, --nan-policy, the non-finite step
    counts, the threads and kernels and the --val-keys list (run1: none,
    runp: --pad-last, run_two: its validation list, as its pointer file's
    header says); each field out of range is refused with cdp-predict's
    message; a later layout's added bytes are skipped; a file without RUN
    reads with run None."""
    r1 = cdpool.load_checkpoint(os.path.join(T, "run1", "checkpoint.cdpt"))
    u = r1.run
    check(u is not None and u["pad_last"] is False and u["nan_policy"] == "stop" and
          u["nan_row"] == 0 and u["nan_skipped"] == 0 and u["threads"] >= 1 and
          re.fullmatch(r"[a-z0-9_]+", u["kernels"]) and u["val_count"] == 0 and
          u["val_uuid"] == "" and u["val_seed"] == 0 and u["val_crc32"] == 0, "run1: %r" % u)
    u = cdpool.load_checkpoint(os.path.join(T, "runp", "checkpoint.cdpt")).run
    check(u["pad_last"] is True, "runp: %r" % u)
    two = os.path.join(T, "run_two")
    hdr = dict(x.split("=", 1) for x in open(os.path.join(T, "two_val.keys")).readline().split()
               if "=" in x)
    for name in ("checkpoint.cdpt", "best.cdpt"):
        u = cdpool.load_checkpoint(os.path.join(two, name)).run
        check(u["val_count"] == int(hdr["count"]) and u["val_uuid"] == hdr["uuid"] and
              "%08x" % u["val_crc32"] == hdr["crc32"], "run_two's %s: %r, header %r"
              % (name, u, hdr))
    # python3 -m cdpool info shows them
    r = subprocess.run([sys.executable, "-m", "cdpool", "info", os.path.join(two, "best.cdpt")],
                       capture_output=True, text=True)
    want = ["run: --pad-last not given, --nan-policy stop, 0 non-finite steps in a row, 0 skipped",
            "run compute: %d threads, %s kernels" % (u["threads"], u["kernels"]),
            "run validation list: %s keys, uuid %s, seed %d, crc32 %s" % (
                hdr["count"], hdr["uuid"], u["val_seed"], hdr["crc32"])]
    check(r.returncode == 0 and all(w in r.stdout.split("\n") for w in want),
          "info of run_two's best.cdpt: %s%s, want %r" % (r.stdout, r.stderr, want))
    b = open(os.path.join(T, "run1", "checkpoint.cdpt"), "rb").read()
    cs = _chunks(b)
    base, payload = cs[:-1], bytearray(cs[-1][2])
    d = os.path.join(T, "ckrun")
    os.makedirs(d, exist_ok=True)
    road, pred = os.path.join(T, "r", "road.tif"), os.path.join(d, "pred.tif")
    f = os.path.join(d, "old.cdpt")
    open(f, "wb").write(_build(8, base))
    check(cdpool.load_checkpoint(f).run is None, "a file without RUN")

    def edit(at, fmt, v):
        p = bytearray(payload)
        struct.pack_into(fmt, p, at, v)
        return _build(8, base + [(b"RUN ", 1, bytes(p))])
    step, threads = r1.step, r1.run["threads"]
    kern = r1.run["kernels"]
    cases = [
        (edit(8, "<I", 3), "the run's settings (RUN): --pad-last 0, --nan-policy 3 (0 or 1, and "
         "1 stop or 2 skip)"),
        (edit(16, "<Q", 1), "the run's non-finite steps (RUN): 1 in a row, 0 skipped (in a row at "
         "most those skipped, at most the %d steps taken, none in a row under --nan-policy "
         "stop)" % step),
        (edit(24, "<Q", step + 1), "the run's non-finite steps (RUN): 0 in a row, %d skipped (in "
         "a row at most those skipped, at most the %d steps taken, none in a row under "
         "--nan-policy stop)" % (step + 1, step)),
        (edit(12, "<I", 65537), "the run's compute (RUN): 65537 threads (0 to 65536), kernels "
         "'%s' (1 to 15 printable characters)" % kern),
        (edit(88, "<Q", 5), "the run's validation list (RUN): 5 keys, uuid '' (none: 0 keys, no "
         "uuid, seed and crc32 0; else a uuid of 32 lowercase hex digits)"),
        (edit(4, "<I", 2), "chunk 'RUN ': invalid or inconsistent field"),
        (edit(100, "<I", 1), "chunk 'RUN ': invalid or inconsistent field"),
        (_build(8, base + [(b"RUN ", 0, bytes(payload))]),
         "chunk 'RUN ' is not marked skippable, which it always is"),
    ]
    for k, (data, want) in enumerate(cases):
        f = os.path.join(d, "bad%d.cdpt" % k)
        open(f, "wb").write(data)
        e = refused("EFORMAT", cdpool.load_checkpoint, f)
        check(want in str(e), "case %d: %s, want %r" % (k, e, want))
        c_says(e, "cdp-predict", "-q", f, road, "-o", pred)
    # a later layout: more bytes after layout 1's, and flags it adds
    p = bytearray(payload) + b"later"
    struct.pack_into("<II", p, 0, 2, 6)
    f = os.path.join(d, "layout2.cdpt")
    open(f, "wb").write(_build(8, base + [(b"RUN ", 1, bytes(p))]))
    check(cdpool.load_checkpoint(f).run == r1.run, "layout 2 read as layout 1")
    ok("RUN: pad-last, nan policy, threads, kernels and the validation list read; bad fields "
       "refused as C refuses them")


def test_best_kept():
    """A --keep-best run's best.cdpt (python.sh: run_two keeps miou) records in
    BEST the metric, its own step and that step's val line's value."""
    ck = cdpool.load_checkpoint(os.path.join(T, "run_two", "best.cdpt"))
    vals = [__import__("json").loads(x) for x in open(os.path.join(T, "run_two", "metrics.jsonl"))]
    vals = {v["step"]: v["miou"] for v in vals if v["type"] == "val"}
    check(ck.best is not None and ck.best["metric"] == "miou" and ck.best["step"] == ck.step and
          ck.best["value"] == vals.get(ck.step), "run_two's best.cdpt: %r, val lines %r"
          % (ck.best, vals))
    ok("cdp-train --keep-best miou: best.cdpt's BEST is its validation's miou")


def test_to_torch(c, path):
    """to_torch(ckpt), built from the cfg the checkpoint holds, gives cdp-predict --prob's
    probabilities on a raster of one window (--overlap 0: no mirrored context, no
    blending); export_onnx(ckpt, path) writes a model of raw bands that ONNX's checker
    accepts and that gives them too (run by ONNX Runtime where it is installed, and by
    onnx_eval.py, a NumPy reading of the ONNX operators, independent of torch)."""
    try:
        import torch
        from cdpool.torch_model import export_onnx, to_torch
    except ImportError:
        print("SKIP to_torch (no torch)")
        return
    net = to_torch(c)
    win = os.path.join(T, "win.tif")
    gdal.Translate(win, os.path.join(T, "r", "road.tif"), srcWin=[37, 61, 32, 32])
    out = os.path.join(T, "win_prob.tif")
    r = subprocess.run(["cdp-predict", "-q", "--prob", "--overlap", "0", "--threads", "1", path,
                        win, "-o", out],
                       capture_output=True, text=True)
    check(r.returncode == 0, "cdp-predict --prob: %s" % r.stderr)
    want = gdal.Open(out).ReadAsArray().astype(np.float64)            # (K, 32, 32)
    raw = gdal.Open(win).ReadAsArray()
    with torch.no_grad():
        got = torch.softmax(net(torch.from_numpy(c.standardize(raw)[None])), 1)[0].numpy()
    err = float(np.max(np.abs(got - want)))
    check(got.shape == want.shape and err <= 1e-5, "to_torch differs from cdp-predict --prob "
          "by %g" % err)
    name = os.path.basename(os.path.dirname(path))
    print("ok   to_torch(%s, %d buffers), the model read from its cfg: cdp-predict --prob's "
          "probabilities within %.1e" % (name, len(c.buffers), err))
    onnx_path = os.path.join(T, name + ".onnx")
    dep = export_onnx(c, onnx_path)
    with torch.no_grad():
        got = dep(torch.from_numpy(raw[None].astype(np.float32)))[0].numpy()
    err = float(np.max(np.abs(got - want)))
    check(err <= 1e-5, "Deployed (raw bands in) differs from cdp-predict --prob by %g" % err)
    try:
        import onnx
    except ImportError:
        print("SKIP the ONNX file's checks (no onnx in %s)" % sys.executable)
        return
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)
    # the opset asked for (13 by default), also under torch 2.x, whose dynamo
    # exporter would write its own (18)
    opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    check(opset == [13], "export_onnx wrote opset %s, not 13 (torch %s)" % (opset,
                                                                           torch.__version__))
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in (m.graph.input[0], m.graph.output[0])]
    check([v.name for v in m.graph.input] == ["bands"] and dims[0] == ["n", 3, "h", "w"] and
          [v.name for v in m.graph.output] == ["prob"] and dims[1] == ["n", want.shape[0], "h", "w"],
          "ONNX inputs and outputs: %s" % dims)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_eval
    two = np.stack([raw, raw[:, ::-1].copy()]).astype(np.float32)   # N = 2
    got = onnx_eval.run(m, {"bands": two})["prob"]
    with torch.no_grad():
        twin = dep(torch.from_numpy(two)).numpy()
    err = float(np.max(np.abs(got[0] - want)))
    err2 = float(np.max(np.abs(got - twin)))
    check(err <= 1e-5 and err2 <= 1e-5, "the ONNX graph (onnx_eval) differs from cdp-predict "
          "--prob by %g, from torch by %g" % (err, err2))
    print("ok   export_onnx(%s): checked by onnx %s; its graph run by onnx_eval gives "
          "cdp-predict's probabilities within %.1e" % (name, onnx.__version__, err))
    try:
        import onnxruntime
    except ImportError:
        print("SKIP export_onnx under ONNX Runtime: no onnxruntime in %s" % sys.executable)
        return
    sess = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"bands": raw[None].astype(np.float32)})[0][0]
    err = float(np.max(np.abs(got - want)))
    check(err <= 1e-5, "ONNX Runtime differs from cdp-predict --prob by %g" % err)
    ok("export_onnx: ONNX Runtime gives cdp-predict's probabilities")


# ---- samples and DataLoader -------------------------------------------------------------
def test_dataset():
    p = cdpool.Pool(os.path.join(T, "p_i16"))
    ds = cdpool.PoolDataset(p, os.path.join(T, "i16.keys"))
    src = gdal.Open(os.path.join(T, "r", "i16.tif")).ReadAsArray()
    m32, inv = p.mean.astype(np.float32), (1.0 / p.std).astype(np.float32)
    for i in range(len(ds)):
        r, c = (int(x) for x in ds.key(i).split("_")[1:])
        x = src[:, 32 * r:32 * r + 32, 32 * c:32 * c + 32]
        want = (x.astype(np.float32) - m32[:, None, None]) * inv[:, None, None]
        want[:, np.all(x == -7, 0)] = 0
        img = ds[i]
        check(isinstance(img, np.ndarray) and img.dtype == np.float32 and np.array_equal(img, want),
              "sample %d: not the standardized tile (alone: the pool has no labels) with invalid "
              "pixels 0" % i)
    ok("PoolDataset: float32 standardization, invalid pixels 0; a pool without labels gives "
       "the image alone")
    raw = cdpool.PoolDataset(p, os.path.join(T, "i16.keys"), standardize=False)
    r, c = (int(v) for v in raw.key(0).split("_")[1:])
    x = src[:, 32 * r:32 * r + 32, 32 * c:32 * c + 32]
    want = x.astype(np.float32)
    want[:, np.all(x == -7, 0)] = 0
    check(raw.stats_from is None and np.array_equal(raw[0], want),
          "standardize=False: stats_from %r (want None), or not the stored values"
          % (raw.stats_from,))
    ok("PoolDataset(standardize=False): the stored values, stats_from None")

    road = cdpool.Pool(os.path.join(T, "pool"))
    rd = cdpool.PoolDataset(road, os.path.join(T, "train.keys"), ignore=-1)
    img, lab = rd[0]
    rec = road.record(rd.key(0))
    check(lab.dtype == np.int64 and np.array_equal(lab, rec.label.astype(np.int64)), "labels")
    import pickle
    again = pickle.loads(pickle.dumps(rd))          # how spawned workers get it
    check(all(np.array_equal(a, b) for a, b in zip(again[5], rd[5])), "pickled dataset")
    nolock = copy_pool(road.path, "nolock")
    q = cdpool.Pool(nolock, lock=False)
    check(np.array_equal(q[rd.key(3)][0], rd.pool[rd.key(3)][0]), "lock=False")
    check(not os.path.exists(os.path.join(nolock, "lock.mdb")), "lock=False made a lock file")
    ok("a pickled PoolDataset (spawned workers); Pool(lock=False) leaves no lock file")
    try:
        import torch
        from torch.utils.data import DataLoader
    except ImportError:
        print("SKIP DataLoader (no torch)")
        return
    s = cdpool.BlockSampler(len(rd), 4, 0, 1, seed=7)
    dl = DataLoader(rd, batch_size=4, sampler=s, num_workers=2)
    idx = list(s)
    with road.view():                   # a parent transaction open while workers fork
        for k, (x, y) in enumerate(dl):
            want = np.stack([rd[j][0] for j in idx[4 * k:4 * k + 4]])
            check(x.dtype == torch.float32 and np.array_equal(x.numpy(), want), "batch %d" % k)
            check(y.dtype == torch.int64 and tuple(y.shape) == (4, 32, 32), "labels %d" % k)
    check(k + 1 == s.steps, "batches")
    ok("DataLoader(num_workers=2) with BlockSampler: cdp-train's batches")
    s = cdpool.BlockSampler(len(ds), 2, 0, 1, seed=7)
    x = next(iter(DataLoader(ds, batch_size=2, sampler=s)))
    check(isinstance(x, torch.Tensor) and tuple(x.shape) == (2, 2, 32, 32),
          "a pool without labels through a DataLoader: %r" % type(x))
    ok("a pool without labels through a DataLoader: batches of images")


def test_val_standardize():
    """A validation set made with standardize=train_ds takes the training
    keys' statistics, as cdp-train validates (its checkpoint's mean and
    std); the default would take the held-out scene's own."""
    p = cdpool.Pool(os.path.join(T, "p_two"))
    tr = cdpool.PoolDataset(p, os.path.join(T, "two_train.keys"))
    va = cdpool.PoolDataset(p, os.path.join(T, "two_val.keys"), standardize=tr)
    own = cdpool.PoolDataset(p, os.path.join(T, "two_val.keys"))
    ck = cdpool.load_checkpoint(os.path.join(T, "run_two", "checkpoint.cdpt"))
    f32 = np.float32
    check(va.stats_from == "dataset" and va.mean.tobytes() == tr.mean.tobytes() and
          va.std.tobytes() == tr.std.tobytes() and va.inv.tobytes() == tr.inv.tobytes(),
          "standardize=train_ds: %s %s / %s, the training set's %s / %s" % (
              va.stats_from, va.mean, va.std, tr.mean, tr.std))
    check(va.mean.tobytes() == ck.mean.astype(f32).tobytes() and
          va.std.tobytes() == ck.std.astype(f32).tobytes(),
          "validation set: mean %s std %s, cdp-train's %s %s" % (va.mean, va.std, ck.mean, ck.std))
    check(va.inv.tobytes() == np.array([f32(1.0 / s) for s in ck.std], dtype=f32).tobytes(),
          "inv is not 1 / std")
    ckd = cdpool.PoolDataset(p, os.path.join(T, "two_val.keys"), standardize=ck)
    check(all(np.array_equal(va[i][0], ckd[i][0]) for i in range(len(va))),
          "validation samples differ from those standardized with the checkpoint's statistics")
    check(not np.array_equal(own.mean, va.mean), "the held-out scene has the training statistics")
    ok("PoolDataset(pool, val_keys, standardize=train_ds): the training keys' mean and std, "
       "cdp-train's validation statistics (.std beside .mean and .inv)")


def test_mix_tensor():
    """Mix on a DataLoader's torch tensors gives the tensors of what it gives
    on NumPy arrays, bit for bit, on CutMix and MixUp steps alike (torch
    has no negative strides: images[::-1] on a tensor raised ValueError)."""
    mix = cdpool.Mix(mixup_alpha=0.4, cutmix_alpha=1.0, seed=3)
    rng = np.random.default_rng(5)
    images = rng.standard_normal((5, 3, 16, 12)).astype(np.float32)
    labels = np.array([0, 3, 1, 4, 2], dtype=np.int64)
    kinds = set()
    for step in range(12):
        on, cut = mix.draw(0, step, 16, 12)[:2]
        kinds.add("cutmix" if cut else "mixup" if on else "none")
        x, ya, yb, lam = mix(images, labels, 0, step)
        check(isinstance(x, np.ndarray) and x.dtype == np.float32 and
              np.array_equal(yb, labels[::-1]), "NumPy step %d" % step)
    check({"cutmix", "mixup"} <= kinds, "steps 0-11 drew %s, not both kinds" % sorted(kinds))
    try:
        import torch
    except ImportError:
        print("SKIP Mix on torch tensors (no torch)")
        return
    ti, tl = torch.from_numpy(images), torch.from_numpy(labels)
    for step in range(12):
        x, ya, yb, lam = mix(images, labels, 0, step)
        tx, tya, tyb, tlam = mix(ti, tl, 0, step)
        check(isinstance(tx, torch.Tensor) and tx.dtype == torch.float32 and
              isinstance(tyb, torch.Tensor) and tyb.dtype == torch.int64 and
              np.array_equal(tx.numpy(), x) and np.array_equal(tya.numpy(), ya) and
              np.array_equal(tyb.numpy(), yb) and tlam == lam,
              "step %d (%s): tensors differ from the NumPy arrays" % (step, mix.draw(0, step,
                                                                                  16, 12)[:2]))
    check(torch.equal(ti, torch.from_numpy(images)), "Mix changed its input tensor")
    ok("Mix on torch tensors: tensors back, bit for bit the NumPy result (CutMix and MixUp)")


def c_batch(pool, keys, seed, b, rank, j, epoch, step, aug=(0, 0, 0, 0, 0), more=None):
    """tests/python/batch_dump: the C loader's batch, (images, labels or None, key indices);
    more: further [net] keys, "key=value,..." (the photometric aug_*)."""
    out = os.path.join(T, "cbatch")
    r = subprocess.run([os.path.join(os.environ["CDP_BUILDDIR"], "tests", "python", "batch_dump"),
                        pool, keys] + [str(v) for v in (seed, b, rank, j, epoch, step) + aug] +
                       [out] + ([more] if more else []), capture_output=True, text=True)
    check(r.returncode == 0, "batch_dump: %s" % r.stderr)
    head, *idx = r.stdout.split("\n")[:-1]
    shape = tuple(int(v) for v in head.split())
    x = np.fromfile(out + ".f32", "<f4").reshape(shape)
    y = np.fromfile(out + ".i32", "<i4")
    return x, (y.reshape(shape[0], shape[2], shape[3]) if y.size else None), [int(i) for i in idx]


def test_batches():
    """PoolDataset's float batch for (epoch, step, rank) is the C loader's bit for bit, at
    j = 1, 2, 4, for every record dtype (nodata masks, zlib), and with cdp-train's flips,
    turns and crops."""
    road = os.path.join(T, "pool")
    kl = cdpool.read_keys(os.path.join(T, "train.keys"))
    pool = cdpool.Pool(road)
    aug = cdpool.Augment(True, True, True, 24, 24, seed=7)
    n = 0
    # batch_dump is the bare loader, which standardizes by the pool's
    # statistics until cdp-train gives it its own (test_first_step checks those)
    for augment, flags in ((None, (0, 0, 0, 0, 0)), (aug, (1, 1, 1, 24, 24))):
        ds = cdpool.PoolDataset(pool, kl, augment=augment, standardize="pool")
        for j in (1, 2, 4):
            b = 4 // j
            for rank in range(j):
                s = cdpool.BlockSampler(len(kl), b, rank, j, seed=7, with_epoch=True)
                for epoch, step in ((0, 0), (1, 3), (2, s.steps - 1)):
                    x, y, idx = c_batch(road, os.path.join(T, "train.keys"), 7, b, rank, j, epoch,
                                        step, flags)
                    check(idx == list(s.step_indices(step, epoch)), "j=%d rank %d (%d, %d): keys %s, "
                          "the sampler's %s" % (j, rank, epoch, step, idx,
                                                list(s.step_indices(step, epoch))))
                    got = [ds[(epoch, i)] for i in idx]
                    gx = np.stack([g[0] for g in got])
                    gy = np.stack([g[1] for g in got])
                    check(gx.dtype == np.float32 and gx.shape == x.shape and
                          gx.tobytes() == x.tobytes(), "%s j=%d rank %d (%d, %d): images differ "
                          "from the C loader's (largest %g)" % ("aug" if augment else "plain", j,
                                                                rank, epoch, step,
                                                                np.max(np.abs(gx - x))))
                    check(np.array_equal(gy, y), "labels differ from the C loader's")
                    n += 1
    print("ok   %d batches at j = 1, 2, 4, plain and augmented: the C loader's bit for bit" % n)
    for dt in NP:
        path = os.path.join(T, "p_" + dt)
        keys = os.path.join(T, dt + ".keys")
        subprocess.run(["cdp-keyshuffle", "-q", "--seed", "3", "-o", keys, path], check=True)
        p = cdpool.Pool(path)
        ds = cdpool.PoolDataset(p, cdpool.read_keys(keys), standardize="pool")
        for epoch, rank in ((0, 0), (3, 1)):
            x, y, idx = c_batch(path, keys, 5, 1, rank, 2, epoch, 1)
            # a pool without labels gives the image alone
            gx = np.stack([ds[i][0] if y is not None else ds[i] for i in idx])
            check(gx.tobytes() == x.tobytes(), "%s: batch (%d, 1, rank %d) differs from the C "
                  "loader's" % (dt, epoch, rank))
            if y is not None:
                check(np.array_equal(np.stack([ds[i][1] for i in idx]), y), "%s: labels" % dt)
        p.close()
    ok("every record dtype u8..f64 (nodata masks, zlib, u16 labels): the C loader's batches")


def test_photometric():
    """The photometric aug_* keys, aug_scale and aug_rotate: PoolDataset's batches equal the C
    loader's, bit for bit for brightness, contrast, band jitter, noise, scale and rotation (the
    same libm), within 1e-6 where gamma is on (numpy's power against C's pow); photometric
    changes leave the labels of the geometry alone; the warp's image is torch's grid_sample
    (bilinear) and its labels grid_sample's nearest where the source lies inside, the ignore
    label outside; from_cfg reads the keys as cdp-train does."""
    road = os.path.join(T, "pool")
    keys = os.path.join(T, "train.keys")
    kl = cdpool.read_keys(keys)
    pool = cdpool.Pool(road)
    geo = (1, 1, 1, 24, 24)
    cases = (("brightness=0.5", False), ("contrast=0.4", False), ("band_jitter=0.7", False),
             ("noise=0.3", False), ("gamma=0.6", True), ("scale=0.5", False),
             ("rotate=40", False),
             ("brightness=0.5,brightness_p=0.5,contrast=0.4,contrast_p=0.5,gamma=0.6,"
              "gamma_p=0.5,band_jitter=0.7,band_jitter_p=0.5,noise=0.3,noise_p=0.5,"
              "scale=0.3,scale_p=0.5,rotate=20,rotate_p=0.5", True))
    plain = cdpool.PoolDataset(pool, kl, standardize="pool",
                               augment=cdpool.Augment(*geo[:3], 24, 24, seed=7))
    n = warped = 0
    for text, gamma in cases:
        more = ",".join("aug_" + kv for kv in text.split(","))
        aug = cdpool.Augment.from_cfg("[net]\n" + more.replace(",", "\n") + "\n"
                                      "aug_hflip=1\naug_vflip=1\naug_rot90=1\ncrop_h=24\n"
                                      "crop_w=24\n", seed=7)
        check(aug.active and aug.hflip and aug.crop_h == 24, "from_cfg: %r" % aug)
        ds = cdpool.PoolDataset(pool, kl, augment=aug, standardize="pool")
        s = cdpool.BlockSampler(len(kl), 4, 0, 1, seed=7, with_epoch=True)
        for epoch, step in ((0, 0), (1, 2), (3, s.steps - 1)):
            x, y, idx = c_batch(road, keys, 7, 4, 0, 1, epoch, step, geo, more)
            got = [ds[(epoch, i)] for i in idx]
            gx = np.stack([g[0] for g in got])
            gy = np.stack([g[1] for g in got])
            err = float(np.max(np.abs(gx.astype(np.float64) - x)))
            check(gx.shape == x.shape and (err <= 1e-6 if gamma else gx.tobytes() == x.tobytes()),
                  "%s (%d, %d): images differ from the C loader's (largest %g)" % (text, epoch,
                                                                                 step, err))
            check(np.array_equal(gy, y), "%s: labels differ from the C loader's" % text)
            ts = [aug.draw(pool.height, pool.width, epoch, i) for i in idx]
            if not any(t[8] != 1.0 or t[9] != 0.0 for t in ts):
                py = np.stack([plain[(epoch, i)][1] for i in idx])
                check(np.array_equal(py, y), "%s: labels differ from the geometry's" % text)
            if text in ("scale=0.5", "rotate=40"):
                for k, i in enumerate(idx):
                    px, pl = plain[(epoch, i)]
                    warp_reference(ts[k], px, pl, gx[k], gy[k], ds.ignore, text)
                    warped += 1
            n += 1
    ok("photometric aug_* keys, aug_scale, aug_rotate: %d batches equal the C loader's, %d "
       "warps torch's grid_sample" % (n, warped))


def warp_reference(t, px, pl, gx, gy, ignore, text):
    """Augment.warp's output (gx, gy) of the geometry's sample (px, pl) under t against
    torch.nn.functional.grid_sample (align_corners=True): bilinear within 1e-5 where the
    source point lies within the pixel centres, the nearest label where it lies in the tile
    (away from rounding ties), 0 and the ignore label outside."""
    try:
        import torch
    except ImportError:
        return
    zoom, deg = t[8], t[9]
    oh, ow = px.shape[-2:]
    cy, cx = (oh - 1) / 2.0, (ow - 1) / 2.0
    a = np.radians(deg)
    dy, dx = np.meshgrid(np.arange(oh) - cy, np.arange(ow) - cx, indexing="ij")
    sy = cy + (np.cos(a) * dy - np.sin(a) * dx) / zoom
    sx = cx + (np.sin(a) * dy + np.cos(a) * dx) / zoom
    grid = torch.from_numpy(np.stack([2 * sx / (ow - 1) - 1, 2 * sy / (oh - 1) - 1], -1)[None])
    ref = torch.nn.functional.grid_sample(torch.from_numpy(px[None].astype(np.float64)), grid,
                                          mode="bilinear", align_corners=True)[0].numpy()
    lref = torch.nn.functional.grid_sample(torch.from_numpy(pl[None, None].astype(np.float64)),
                                           grid, mode="nearest", align_corners=True)[0, 0]
    core = (sy >= 0) & (sy <= oh - 1) & (sx >= 0) & (sx <= ow - 1)
    tile = (sy >= -0.5) & (sy < oh - 0.5) & (sx >= -0.5) & (sx < ow - 0.5)
    tie = (np.abs(sy - np.floor(sy) - 0.5) < 1e-6) | (np.abs(sx - np.floor(sx) - 0.5) < 1e-6)
    err = np.max(np.abs(ref - gx)[:, core]) if core.any() else 0.0
    check(err <= 1e-5, "%s: image off grid_sample by %g" % (text, err))
    m = tile & ~tie
    check(np.array_equal(gy[m], lref.numpy()[m].astype(gy.dtype)),
          "%s: labels are not the nearest pixel's" % text)
    check(np.all(gy[~tile] == ignore) and np.all(gx[:, ~tile] == 0),
          "%s: outside is not ignore and 0" % text)


def test_first_step():
    """PoolDataset's first batch, with cdp-train's augmentation or without,
    through the torch twin at model_dump's initial weights (the engine's
    init for the run seed), gives the loss cdp-train logs for step 1."""
    try:
        import torch
        from cdpool.torch_model import EngineNet, loss_fn
    except ImportError:
        print("SKIP first step (no torch)")
        return
    import json
    pool = cdpool.Pool(os.path.join(T, "pool"))
    kl = cdpool.read_keys(os.path.join(T, "train.keys"), pool=pool)
    for name in ("plain", "aug"):
        d = os.path.join(T, "init_" + name)
        model = json.load(open(os.path.join(d, "model.json")))
        ck = cdpool.load_checkpoint(os.path.join(T, "first_" + name, "checkpoint.cdpt"))
        aug = cdpool.Augment.from_checkpoint(ck)
        check(aug == (cdpool.Augment(True, True, True, 24, 24, seed=7) if name == "aug" else
                      cdpool.Augment(seed=7)), "Augment.from_checkpoint: %r" % aug)
        ds = cdpool.PoolDataset(pool, kl, augment=aug)
        # cdp-train's standardization for these keys, without reading it from the checkpoint
        ckd = cdpool.PoolDataset(pool, kl, standardize=ck)
        check(ckd.stats_from == "checkpoint" and
              ckd.mean.tobytes() == ck.mean.astype(np.float32).tobytes(),
              "standardize=checkpoint: %s, the checkpoint's %s" % (ckd.mean, ck.mean))
        check(ds.stats_from == ck.std_from == "sources" and
              ds.mean.tobytes() == ckd.mean.tobytes() and ds.inv.tobytes() == ckd.inv.tobytes(),
              "PoolDataset standardizes by %s %s / %s, cdp-train by %s %s / %s" % (
                  ds.stats_from, ds.mean, ds.inv, ck.std_from, ckd.mean, ckd.inv))
        s = cdpool.BlockSampler(len(kl), 4, 0, 1, seed=7, with_epoch=True)
        batch = [ds[next(it)] for it in [iter(s)] for _ in range(4)]
        x = torch.from_numpy(np.stack([b[0] for b in batch]))
        y = torch.from_numpy(np.stack([b[1] for b in batch])).reshape(4, -1)
        net = EngineNet(model)
        net.load_blocks(np.fromfile(os.path.join(d, "params0.f32"), "<f4"))
        got = float(loss_fn(model, net.train()(x), y))
        want = next(json.loads(line)["loss"] for line in
                    open(os.path.join(T, "first_" + name, "metrics.jsonl"))
                    if '"type":"step"' in line and '"step":1,' in line)
        check(abs(got - want) <= 1e-5 * abs(want), "%s: loss %r, cdp-train's %r" % (name, got,
                                                                                       want))
        if aug.active:               # the validation transform must differ
            ds.augment = cdpool.Augment(crop_h=24, crop_w=24, val=True)
            xv = torch.from_numpy(np.stack([ds[(0, i)][0] for i in s.step_indices(0, 0)]))
            check(not torch.equal(xv, x), "augmentation changed nothing")
        print("ok   first step %s: loss %.9g, cdp-train's %.9g" % (name, got, want))


def test_info():
    py = sys.executable
    good = [os.path.join(T, "pool"), os.path.join(T, "train.keys"),
            os.path.join(T, "run1", "checkpoint.cdpt")]
    r = subprocess.run([py, "-m", "cdpool", "info"] + good, capture_output=True, text=True)
    check(r.returncode == 0, "info: exit %d %s" % (r.returncode, r.stderr))
    for want in ("tiles: 36", "count: 36", "step: 18", "shape: 3x32x32", "tensor conv0.w: 4x3x3x3",
                 "model: 3 layers, ce loss, 2 classes", "layer 2 conv conv2: 4x32x32 -> 2x32x32"):
        check(want in r.stdout, "info lacks %r" % want)
    bad = os.path.join(T, "ck", "bad0.cdpt")
    r = subprocess.run([py, "-m", "cdpool", "info", bad], capture_output=True, text=True)
    check(r.returncode == 1 and r.stderr == "cdpool: cannot read '%s': checksum mismatch\n" % bad,
          "info on a damaged file: %d %r" % (r.returncode, r.stderr))
    r = subprocess.run([py, "-m", "cdpool", "info"], capture_output=True, text=True)
    check(r.returncode == 2, "info without a path: exit %d" % r.returncode)
    # the sync mode with K and RHO (in the digits that tell RHO apart, as
    # cdp-train says it), and what LIVE holds (before: "ranks: 1 (admm)")
    for run, want in (("runadmm", ["ranks: 1 (--sync admm:2:0.1234567)", "live: %d values, ADMM's "
                                   "z (PARM: the consensus estimate mean(w + u))"]),
                      ("runema", ["live: %d values, the trained weights (PARM: their moving "
                                  "average, ema=)"])):
        path = os.path.join(T, run, "checkpoint.cdpt")
        n = cdpool.load_checkpoint(path).live.size
        r = subprocess.run([py, "-m", "cdpool", "info", path], capture_output=True, text=True)
        lines = r.stdout.split("\n")
        check(r.returncode == 0 and all(w.replace("%d", str(n)) in lines for w in want),
              "info of %s: %s%s, want %r" % (run, r.stdout, r.stderr, want))
    check(cdpool.checkpoint.sync_name("admm", 3, 1e-9) == "admm:3:1e-9" and
          cdpool.checkpoint.sync_name("admm", 3, 0.1) == "admm:3:0.1" and
          cdpool.checkpoint.sync_name("admm", 3, 0.12345678901234) == "admm:3:0.12345678901234" and
          cdpool.checkpoint.sync_name("average", 4, 0) == "average:4", "sync_name")
    ok("python -m cdpool info (with the sync mode and LIVE)")


# ---- issue 25: hostile or damaged inputs are one line, never a crash --------------------
EDIT = os.path.join(os.environ.get("CDP_BUILDDIR", ""), "tests", "engine", "ckpt_edit")


def info(*paths):
    return subprocess.run([sys.executable, "-m", "cdpool", "info"] + list(paths),
                          capture_output=True, text=True)


def test_cfg_nesting():
    """${} nested past 64 levels: CfgError with cdp-train's message, never a
    RecursionError; 64 levels are the language's own."""
    from cdpool.cfg import CfgError, parse
    small = open(SMALL).read()
    line = small[:small.index("outputs=${classes}")].count("\n") + 1
    for op, n, cl in (("(", 60000, ")"), ("-", 1000000, ""), ("2**", 300000, ""),
                      ("(", 65, ")"), ("-(", 33, ")"), ("1**", 65, "")):
        path = os.path.join(T, "deep.cfg")
        with open(path, "w") as f:
            f.write(small.replace("outputs=${classes}",
                                  "outputs=${" + op * n + "classes" + cl * n + "}"))
        try:
            parse(open(path).read(), path)
        except CfgError as e:
            want = "%s:%d: expression '" % (path, line)
            check(str(e).startswith(want) and str(e).endswith("': nested deeper than 64"),
                  "%d x %r: %s" % (n, op, str(e)[-80:]))
            c_says(e, "cdp-train", "--db", os.path.join(T, "pool"), "--keys",
                   os.path.join(T, "train.keys"), "-q", "--threads", "1", "--model", path,
                   "--steps", "1", "--out", os.path.join(T, "deeprun"))
        else:
            raise Fail("%d x %r accepted" % (n, op))
    for op, n, cl, want in (("(", 64, ")", "2"), ("-", 64, "", "2"), ("1**", 64, "", "1")):
        secs = parse("[net]\nclasses=2\n[conv]\na=${" + op * n + "classes" + cl * n + "}\n")
        check(secs[1].find("a")[1] == want, "%d x %r = %s" % (n, op, secs[1].find("a")[1]))
    for n, ok_ in ((64, True), (65, False)):
        text = "[net]\n" + "@if 1\n" * n + "lr=1\n" + "@end\n" * n
        try:
            parse(text, "m.cfg")
            check(ok_, "65 nested @if accepted")
        except CfgError as e:
            check(not ok_ and str(e) == "m.cfg:66: directives nested deeper than 64", str(e))
    ok("cfg nesting: 64 levels, then cdp-train's one-line message (no RecursionError)")

    # the same cfg in a checkpoint's CFG chunk under a valid CRC
    path = os.path.join(T, "deep.cfg")
    with open(path, "w") as f:
        f.write(small.replace("outputs=${classes}", "outputs=${" + "(" * 60000 + "classes}"))
    bad = os.path.join(T, "ck", "deep.cdpt")
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    subprocess.run([EDIT, "-c", path, os.path.join(T, "run1", "checkpoint.cdpt"), bad],
                   check=True)
    c = cdpool.load_checkpoint(bad)
    try:
        model_of(c)
        raise Fail("model_of accepted a cfg nested 60000 deep")
    except CfgError as e:
        check(str(e).startswith("<checkpoint>:%d: expression '" % line) and
              str(e).endswith("nested deeper than 64"), str(e)[-80:])
    r = info(bad)
    check(r.returncode == 0 and r.stderr == "" and
          "model: the cfg is refused: <checkpoint>:%d: expression" % line in r.stdout,
          "info on a checkpoint with a deep cfg: %d %r" % (r.returncode, r.stderr[-200:]))
    ok("a checkpoint holding it: load_checkpoint reads it, model_of and info refuse its cfg")


def test_net_keys():
    """The [net] key rule (cdp-model(5)): cdpool.cfg knows the keys of
    engine/cfg/netkeys.h, refuses another with cdp-train's message and "did you
    mean", takes [vars]; model_of reads an old checkpoint's cfg under the old
    rule with a warning, into the same model."""
    import warnings
    from cdpool.cfg import NET_KEYS, NET_KEYS_NEW, CfgUnknownKey, parse
    h = open(os.path.join(os.environ["CDP_SRCDIR"], "engine", "cfg", "netkeys.h")).read()
    c_keys = tuple(re.findall(r"^CDP_NETKEY\((\w+)\)$", h, re.M))
    check(NET_KEYS == c_keys, "NET_KEYS %r, netkeys.h %r" % (NET_KEYS, c_keys))
    c_new = tuple(re.findall(r"^CDP_NETKEY_NEW\((\w+)\)$", h, re.M))
    check(NET_KEYS_NEW == c_new and set(c_new) <= set(c_keys),
          "NET_KEYS_NEW %r, netkeys.h %r" % (NET_KEYS_NEW, c_new))
    small = open(SMALL).read()
    train = ["cdp-train", "--db", os.path.join(T, "pool"), "--keys", os.path.join(T, "train.keys"),
             "-q", "--threads", "1", "--steps", "1", "--out", os.path.join(T, "keysrun")]
    for text, ov, want in (
            (small.replace("[net]\n", "[net]\naug_hue=1\n"), (),
             "unknown [net] key 'aug_hue' (no such key; "),
            (small.replace("loss=", "lsos="), (), "(did you mean 'loss'?)"),
            (small, ("lrr=0.1",), "key 'lrr' (override) (did you mean 'lr'?)")):
        path = os.path.join(T, "keys.cfg")
        with open(path, "w") as f:
            f.write(text)
        try:
            parse(text, path, ov)
            raise Fail("%s accepted" % want)
        except CfgUnknownKey as e:
            check(want in str(e), "%s, want %r" % (e, want))
            c_says(e, *(train + ["--model", path + (":" + ",".join(ov) if ov else "")]))
    secs = parse(small, SMALL, ("width=6",))
    check([s.type for s in secs][:2] == ["net", "conv"] and secs[1].find("filters")[1] == "6",
          "[vars] with an override: %r" % secs[:2])
    ok("[net] keys: NET_KEYS is netkeys.h's, unknown keys refused with cdp-train's message")

    old = os.path.join(T, "old.cfg")
    with open(old, "w") as f:
        f.write(small.replace("[vars]\n", ""))
    oldck = os.path.join(T, "ck", "old.cdpt")
    os.makedirs(os.path.dirname(oldck), exist_ok=True)
    new = cdpool.load_checkpoint(os.path.join(T, "run1", "checkpoint.cdpt"))
    subprocess.run([EDIT, "-c", old, os.path.join(T, "run1", "checkpoint.cdpt"), oldck],
                   check=True)
    c = cdpool.load_checkpoint(oldck)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = model_of(c)
    check(len(w) == 1 and "unknown [net] key 'width'" in str(w[0].message) and
          "old rule" in str(w[0].message), "warnings %r" % [str(x.message) for x in w])
    def nolines(x):     # the old cfg lacks the [vars] line: later lines are one less
        if isinstance(x, dict):
            return {k: nolines(v) for k, v in x.items() if k != "line"}
        return [nolines(v) for v in x] if isinstance(x, list) else x
    check(nolines(m) == nolines(model_of(new)), "the old cfg builds another model")
    # a key the engine came to read since (ema) was a variable there, and stays one
    oldema = os.path.join(T, "ck", "oldema.cdpt")
    with open(old + ".ema", "w") as f:
        f.write(small.replace("[vars]\n", "").replace("[net]\n", "[net]\nema=0.9\n", 1))
    subprocess.run([EDIT, "-c", old + ".ema", os.path.join(T, "run1", "checkpoint.cdpt"), oldema],
                   check=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m2 = model_of(cdpool.load_checkpoint(oldema))
    check(len(w) == 1 and "[net] ema was a variable when the checkpoint was written" in
          str(w[0].message), "warnings %r" % [str(x.message) for x in w])
    check(nolines(m2) == nolines(m), "ema= of an old cfg changed the model")
    check(parse(open(old + ".ema").read(), old, (), old_rule=True)[0].find("ema") is None,
          "the old rule keeps ema= in [net]")
    ok("model_of reads a checkpoint written before [vars] under the old rule, with a warning")


def test_pool_refusals():
    """A truncated data.mdb and directories that are no pool: the C readers'
    one-line refusals, before LMDB maps anything."""
    src = os.path.join(T, "pool")
    size = os.path.getsize(os.path.join(src, "data.mdb"))
    for cut in (size - 4096, size // 2, 3 * 4096):
        bad = copy_pool(src, "cut")
        os.truncate(os.path.join(bad, "data.mdb"), cut)
        e = refused("ETRUNC", cdpool.Pool, bad)
        check(str(e) == "'%s': data.mdb is truncated: %d bytes, its last page ends at byte %d"
              % (bad, cut, size), str(e))
        c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "cut.keys"), bad)
        r = info(bad)
        check(r.returncode == 1 and r.stderr == "cdpool: cannot read %s\n" % e,
              "info on a truncated pool: %d %r" % (r.returncode, r.stderr))
    bad = copy_pool(src, "cut")
    os.truncate(os.path.join(bad, "data.mdb"), 0)      # lmdb.open said EBADF
    e = refused("ETRUNC", cdpool.Pool, bad)
    check(str(e) == "'%s': data.mdb is truncated: 0 bytes, shorter than LMDB's two meta pages "
          "(%d bytes)" % (bad, 2 * os.sysconf("SC_PAGESIZE")), str(e))
    c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "cut.keys"), bad)
    r = info(bad)
    check(r.returncode == 1 and r.stderr == "cdpool: cannot read %s\n" % e,
          "info on an empty data.mdb: %d %r" % (r.returncode, r.stderr))
    ok("a truncated data.mdb: refused as cdp-keyshuffle refuses it, before any read")

    empty = os.path.join(T, "notpool_empty")
    junk = os.path.join(T, "notpool_junk")
    tiny = os.path.join(T, "notpool_tiny")
    for d in (empty, junk, tiny):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    with open(os.path.join(junk, "data.mdb"), "wb") as f:
        f.write(b"not lmdb\n" * 1000)
    with open(os.path.join(tiny, "data.mdb"), "wb") as f:
        f.write(open(os.path.join(src, "data.mdb"), "rb").read(100))
    invalid = "not a cdpool pool: MDB_INVALID: File is not an LMDB file"
    for d, code, why in ((empty, "EFORMAT", "not a cdpool pool: no data.mdb"),
                         (junk, "ELMDB", invalid), (tiny, "ELMDB", invalid)):
        e = refused(code, cdpool.Pool, d)
        check(str(e) == "'%s': %s" % (d, why), str(e))
        c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "np.keys"), d)
        r = info(d)
        check(r.returncode == 1 and r.stderr == "cdpool: cannot read '%s': %s\n" % (d, why),
              "info on %s: %d %r" % (d, r.returncode, r.stderr))
    ok("directories that are no pool: one line naming the path, as cdp-keyshuffle's")


def _fork_each(n, fn):
    """Forks n children one after another, each running fn(i) and ending
    by os._exit (as a DataLoader worker ends: no cleanup) with its status;
    the first status that is not 0 (and its child's index), or (0, n)."""
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(fn(i) or 0)
            except BaseException:
                os._exit(1)
        _, st = os.waitpid(pid, 0)
        st = os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128
        if st:
            return st, i
    return 0, n


def test_reader_slots():
    """Readers that die inside a read transaction (a DataLoader worker ends
    by os._exit) leave their LMDB reader slots taken: the 126 of the table
    filled after 126 worker starts. Opening a pool reclaims them (Python and
    the C tools, mdb_reader_check), and a full table is said as what it is,
    not "not a cdpool pool"."""
    pool_dir = copy_pool(os.path.join(T, "pool"), "readers")
    # another process keeps the pool open: without one, the next opener
    # takes the lock file alone and resets the table anyway
    holder = subprocess.Popen([sys.executable, "-c", "import lmdb, sys; e = lmdb.open(%r, "
                               "readonly=True, max_dbs=2); print(1, flush=True); sys.stdin.read()"
                               % pool_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()

        def leak(i):        # py-lmdb alone, no reclaim: dies holding a slot
            try:        # py-lmdb's open begins a transaction itself
                env = lmdb.open(pool_dir, readonly=True, max_dbs=2, max_spare_txns=0)
                txn = env.begin()
            except lmdb.ReadersFullError:
                return 7
            os._exit(0 if txn else 1)
        st, n = _fork_each(200, leak)
        check(st == 7 and n >= 120, "the reader table did not fill: status %d after %d" % (st, n))
        e = refused("ELMDB", cdpool.Pool, pool_dir)
        want = "'%s': LMDB reader table full (126 readers): MDB_READERS_FULL: " % pool_dir
        check(str(e).startswith(want), "a full reader table: %s" % e)
        ok("a full reader table: %s" % str(e).split(": ", 1)[1][:60])
        r = subprocess.run(["cdp-keyshuffle", "-q", "-o", os.path.join(T, "readers.keys"),
                            pool_dir], capture_output=True, text=True)
        check(r.returncode == 0, "cdp-keyshuffle on a table full of dead readers: %s" % r.stderr)
        pool = cdpool.Pool(pool_dir)
        key = pool.keys()[0]
        ok("cdp-keyshuffle reclaims the slots of dead readers (mdb_reader_check); Pool opens")

        def worker(i):      # a forked worker reading through the parent's Pool
            with pool.view() as v:
                v[key]
                return 0
        st, n = _fork_each(200, worker)
        check(st == 0, "forked reader %d of 200: status %d" % (n, st))
        r = subprocess.run([sys.executable, "-c", "import cdpool; print(cdpool.Pool(%r).tiles)"
                            % pool_dir], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.strip() == str(pool.tiles),
              "a new process after 200 dead workers: %s" % r.stderr)
        pool.close()
        ok("200 forked readers that end by os._exit: each Pool opening reclaims the dead ones' "
           "slots; the pool still opens")
    finally:
        holder.stdin.close()
        holder.wait()


def test_fork_parent_slot():
    """A forked child reads through the Pool it inherited (it opens its own
    environment: py-lmdb 2 and later refuse a second one while they count
    the inherited one as open, so the child closes that one first) while the
    parent is inside a read transaction: the parent's transaction and reader
    slot live on, whatever the child did with the inherited environment.
    Children end normally (their interpreter's cleanup) with py-lmdb 1.7 and
    later, which abort no transaction inherited across a fork; with older
    py-lmdb by os._exit, as DataLoader and multiprocessing workers end (its
    cleanup would abort the parent's transaction, python/README.md)."""
    pool = cdpool.Pool(os.path.join(T, "pool"))
    key = pool.keys()[0]
    img = pool[key][0]
    me = str(os.getpid())
    normal_exit = tuple(int(x) for x in re.findall("[0-9]+", lmdb.__version__)[:2]) >= (1, 7)
    with pool.view() as v:
        v[key]

        def child(i):
            return 0 if np.array_equal(pool[key][0], img) else 3
        for i in range(3):
            pid = os.fork()
            if pid == 0:        # a normal exit: the child's interpreter cleans up
                st = 1
                try:
                    st = child(i)
                finally:
                    sys.stdout.flush()
                    os._exit(st) if st or not normal_exit else sys.exit(0)
            _, st = os.waitpid(pid, 0)
            check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0,
                  "a forked child could not read the inherited pool (status %d, lmdb %s)"
                  % (st, lmdb.__version__))
        slots = [line.split() for line in pool.env.readers().splitlines()[1:]]
        check(any(s[0] == me for s in slots), "the parent's reader slot is gone: %s" % slots)
        check(np.array_equal(v[key][0], img), "the parent's transaction")
    pool.close()
    ok("forked children read the inherited Pool (py-lmdb %s); the parent's transaction and "
       "slot live on" % lmdb.__version__)


def test_pool_keys():
    """A Pool is a mapping of keys: str or bytes (TypeError otherwise, never an
    LMDB error or a 1 GB key made of pool[10**9]), iterating gives the keys; a
    file given as the pool is NotADirectoryError."""
    pool = cdpool.Pool(os.path.join(T, "pool"))
    keys = pool.keys()
    check(list(pool) == keys and keys[0] in pool and keys[0].encode() in pool
          and "nosuch_0_0" not in pool, "iteration or membership")
    for bad in (3, 10 ** 9, np.int64(2), 2.5, None):
        try:
            pool[bad]
            check(False, "pool[%r] accepted" % (bad,))
        except TypeError as e:
            check("a pool key is str or bytes" in str(e), "pool[%r]: %s" % (bad, e))
        for fn in (pool.record, pool.__contains__):
            try:
                fn(bad)
                check(False, "%s(%r) accepted" % (fn.__name__, bad))
            except TypeError:
                pass
    path = os.path.join(T, "train.keys")
    try:
        cdpool.Pool(path)
        check(False, "a file opened as a pool")
    except NotADirectoryError as e:
        check(e.errno == 20 and e.filename == path, "a file as the pool: %r" % e)
    ok("pool[3] TypeError with a hint; list(pool) is keys(); a file as the pool: errno 20")


def test_pool_append():
    """A Pool kept open while cdp-lmdbpack appends: keys() reads the meta
    in its transaction and takes the new one (count, statistics, sources),
    and PoolDataset standardizes by the statistics of the meta its keys
    were checked against, the ones a new Pool (and cdp-train) reads."""
    d = copy_pool(os.path.join(T, "pool"), "append")
    pool = cdpool.Pool(d)
    n0, src0 = pool.tiles, len(pool.sources)
    r = subprocess.run("cdp-tile -q --size 32 --name other --label-suffix _mask %s | "
                       "cdp-lmdbpack -q %s" % (os.path.join(T, "r", "road.tif"), d),
                       shell=True, capture_output=True, text=True)
    check(r.returncode == 0, "append: %s" % r.stderr)
    keys = pool.keys()
    fresh = cdpool.Pool(d)
    check(len(keys) == pool.tiles == fresh.tiles > n0 and len(pool.sources) == len(fresh.sources)
          > src0 and np.array_equal(pool.mean, fresh.mean), "after the append: %d keys, tiles %d "
          "(a new Pool %d), %d sources" % (len(keys), pool.tiles, fresh.tiles, len(pool.sources)))
    kf = os.path.join(T, "append.keys")
    subprocess.run(["cdp-keyshuffle", "-q", "-o", kf, d], check=True)
    old = cdpool.Pool(d)
    subprocess.run("cdp-tile -q --size 32 --name third --label-suffix _mask %s | "
                   "cdp-lmdbpack -q %s" % (os.path.join(T, "r", "road.tif"), d), shell=True,
                   check=True)
    ds = cdpool.PoolDataset(old, kf)
    want = cdpool.PoolDataset(cdpool.Pool(d), kf)
    check(old.tiles == cdpool.Pool(d).tiles and np.array_equal(ds.mean, want.mean)
          and np.array_equal(ds.inv, want.inv), "PoolDataset on a Pool opened before the append: "
          "mean %s, a new Pool's %s" % (ds.mean, want.mean))
    ok("a Pool open while cdp-lmdbpack appends: keys() and PoolDataset take the new meta")


def test_dataset_snapshot():
    """PoolDataset reads one snapshot of the pool, as cdp-train reads one
    read transaction from start to end: a cdp-lmdbpack --replace after the
    dataset was made leaves its records and statistics as they were (it
    read the replaced records, standardized by the old statistics), and a
    forked worker made before reads the same. A worker forked, or a read
    after close(), once the pool was written to begins a transaction of its
    own, which LMDB cannot begin at the old snapshot: it refuses
    (EMISMATCH) rather than read other records."""
    a, b = (os.path.join(T, "r", n + ".tif") for n in ("two_a", "two_b"))
    path = pack("snap", a, "--name", "snap", "--label-suffix", "_mask")
    kf = os.path.join(T, "snap.keys")
    subprocess.run(["cdp-keyshuffle", "-q", "-o", kf, path], check=True)
    ds = cdpool.PoolDataset(path, kf)
    x0, mean0 = ds[0][0].copy(), ds.mean.copy()
    st, _ = _fork_each(1, lambda i: 0 if np.array_equal(ds[0][0], x0) else 3)
    check(st == 0, "a worker forked before any write: status %d" % st)
    r = subprocess.run("cdp-tile -q --size 32 --name snap --label-suffix _mask %s | "
                       "cdp-lmdbpack -q --replace %s" % (b, path), shell=True,
                       capture_output=True, text=True)
    check(r.returncode == 0, "--replace: %s" % r.stderr)
    fresh = cdpool.PoolDataset(path, kf)
    check(not np.array_equal(fresh[0][0], x0) and not np.array_equal(fresh.mean, mean0),
          "the --replace changed nothing the test can see")
    check(np.array_equal(ds[0][0], x0) and np.array_equal(ds.mean, mean0),
          "the dataset made before the --replace read its records")

    def worker(i):
        try:
            ds[0]
            return 3
        except cdpool.CdpError as e:
            return 0 if e.code == "EMISMATCH" and "written to since the dataset was made" \
                in str(e) else 4
    st, _ = _fork_each(1, worker)
    check(st == 0, "a worker forked after the --replace: status %d" % st)
    ds.close()
    e = refused("EMISMATCH", ds.__getitem__, 0)
    check(str(e) == "'%s': written to since the dataset was made (a cdp-lmdbpack added or "
          "replaced records): this process would read other records than its snapshot; make "
          "the dataset again" % path, "a read after close(): %s" % e)
    check(np.array_equal(fresh[0][0], cdpool.PoolDataset(path, kf)[0][0]), "a new dataset")
    ok("PoolDataset reads one snapshot: a --replace leaves it as it was; a worker begun after "
       "it refuses")


def grow_pack(d, name):
    """cdp-tile --size 256 of T/grow_NAME.tif (small: one tile; big: 64
    tiles, 12 MiB, past the 10 MiB map a reader maps at least) packed into
    D at a 64 KiB map; returns the big raster's bands."""
    a = np.random.default_rng(5).integers(0, 256, (3, 2048, 2048), dtype=np.uint8)
    tif = os.path.join(T, "grow_%s.tif" % name)
    if not os.path.exists(tif):
        img = a[:, :256, :256] if name == "small" else a
        ds = gdal.GetDriverByName("GTiff").Create(tif, img.shape[2], img.shape[1], 3,
                                                  gdal.GDT_Byte)
        for b in range(3):
            ds.GetRasterBand(b + 1).WriteArray(img[b])
        ds = None
    subprocess.run("cdp-tile -q --size 256 %s | cdp-lmdbpack -q --map-size 64K %s" % (tif, d),
                   shell=True, check=True)
    return a


def test_pool_map_growth():
    """cdp-lmdbpack grows the map of a pool a Pool has open (past the 10
    MiB a reader maps at least): the Pool reads on after adopting the new
    size, a new Pool in the process opens it, and with a view() open, the
    one case LMDB forbids the remap, the error says to close it (it was
    MDB_MAP_RESIZED, and a new Pool called the pool 'not a cdpool pool')."""
    d = os.path.join(T, "grow")
    shutil.rmtree(d, ignore_errors=True)
    grow_pack(d, "small")
    pool = cdpool.Pool(d)
    check(pool.keys() == ["grow_small_0_0"], "the small pool: %s" % pool.keys())
    with pool.view() as v:
        a = grow_pack(d, "big")
        try:
            pool.keys()
            check(False, "keys() with a view open after the map grew: no error")
        except cdpool.CdpError as e:
            check("close the older view or dataset" in str(e), "with a view open: %s" % e)
        check(v.record("grow_small_0_0").image.shape == (3, 256, 256), "the view's snapshot")
    keys = pool.keys()
    check(len(keys) == 65 and pool.tiles == 65, "after the growth: %d keys" % len(keys))
    r = pool.record("grow_big_7_7")
    check(np.array_equal(r.image, a[:, 1792:, 1792:]), "a record past the old map")
    check(cdpool.Pool(d).tiles == 65, "a new Pool in the process")
    ok("a Pool reads on after cdp-lmdbpack grew the map (and says to close an open view)")


def test_dataset_map_growth():
    """A PoolDataset holds its read transaction for its life, and every
    Pool of a directory in a process shares one LMDB map: once cdp-lmdbpack
    grew the map, a new Pool or PoolDataset of the pool in the process is
    refused with a message saying to close the older dataset (it said "a
    view() or a PoolDataset", not that an older one blocks a new Pool), the
    dataset reads on in its snapshot, and after ds.close() a new Pool reads
    the grown pool."""
    d = os.path.join(T, "grow_ds")
    shutil.rmtree(d, ignore_errors=True)
    grow_pack(d, "small")
    kf = os.path.join(T, "grow_ds.keys")
    subprocess.run(["cdp-keyshuffle", "-q", "-o", kf, d], check=True)
    ds = cdpool.PoolDataset(d, kf, standardize=False)
    x0 = ds[0].copy()
    grow_pack(d, "big")
    for what, fn in (("Pool", lambda: cdpool.Pool(d)),
                     ("PoolDataset", lambda: cdpool.PoolDataset(d, kf))):
        e = refused("ELMDB", fn)
        check(str(e).startswith("'%s': " % d) and "close the older view or dataset (ds.close())"
              in str(e) and "\n" not in str(e), "a new %s: %s" % (what, e))
    check(np.array_equal(ds[0], x0), "the dataset's snapshot after the growth")
    ds.close()
    check(cdpool.Pool(d).tiles == 65, "a new Pool after ds.close()")
    ok("a pool grown while a PoolDataset is open: a new Pool says to close the older dataset")


def test_integer_args():
    """NumPy integers as epochs, indices and seeds (operator.index), and
    arguments checked when given, naming themselves."""
    keys = cdpool.read_keys(os.path.join(T, "train.keys"))
    ds = cdpool.PoolDataset(os.path.join(T, "pool"), keys,
                            augment=cdpool.Augment(hflip=True, crop_h=16, crop_w=16, seed=3))
    for a, b in ((np.int64(3), 3), ((np.int32(2), np.uint64(5)), (2, 5))):
        check(all(np.array_equal(x, y) for x, y in zip(ds[a], ds[b])), "ds[%r]" % (a,))
    check(cdpool.derive(np.uint64(7), np.int64(2), np.int32(1)) == cdpool.derive(7, 2, 1) and
          cdpool.epoch_order(np.int64(9), 1, np.int64(2)) == cdpool.epoch_order(9, 1, 2), "rng")
    s = cdpool.BlockSampler(np.int64(len(keys)), np.int64(4), 0, 1, epoch=np.int64(1))
    s.set_epoch(np.int64(2))
    check(list(s) == list(cdpool.BlockSampler(len(keys), 4, 0, 1, epoch=2)), "sampler")
    mix = cdpool.Mix(mixup_alpha=0.4, seed=2)
    check(mix.draw(np.int64(1), np.int64(2), 8, 8) == mix.draw(1, 2, 8, 8), "Mix.draw")
    ck = cdpool.load_checkpoint(os.path.join(T, "run1", "checkpoint.cdpt"))
    for fn, want in ((lambda: cdpool.BlockSampler(len(keys), 4, 0, 1, start_step=99),
                      (ValueError, "start_step")),
                     (lambda: cdpool.BlockSampler(len(keys), 4, 0, 1, epoch=-1),
                      (ValueError, "epoch")),
                     (lambda: s.set_epoch(-1), (ValueError, "epoch")),
                     (lambda: cdpool.BlockSampler(len(keys), 2.5, 0, 1), (TypeError, "batch")),
                     (lambda: cdpool.BlockSampler(len(keys), 4, 2, 2), (ValueError, "rank")),
                     (lambda: cdpool.Augment(crop_h=2.5, crop_w=2), (TypeError, "crop_h")),
                     (lambda: cdpool.Augment(crop_h=-2, crop_w=2), (ValueError, "crop_h")),
                     (lambda: ck.standardize(np.zeros((2, 4, 4))), (ValueError, "standardize"))):
        try:
            fn()
            check(False, "accepted, want %s naming %s" % (want[0].__name__, want[1]))
        except want[0] as e:
            check(str(e).startswith(want[1]), "%s: %s" % (want[1], e))
    ok("NumPy integers as index, epoch and seed; arguments range-checked, named")


def test_info_refusals():
    """info refuses what cdp-predict refuses, and a closed stdout ends it
    quietly."""
    good = os.path.join(T, "run1", "checkpoint.cdpt")
    d = os.path.join(T, "ck")
    os.makedirs(d, exist_ok=True)
    # a run folder is its checkpoint, as cdp-predict takes it (it was read
    # as a pool: "no data.mdb")
    r, g = info(os.path.join(T, "run1")), info(good)
    check(r.returncode == 0 and r.stdout == g.stdout and "kind: checkpoint" in r.stdout,
          "info RUN: %d %r" % (r.returncode, r.stderr))
    a, b = cdpool.load_checkpoint(os.path.join(T, "run1")), cdpool.load_checkpoint(good)
    check(a.step == b.step and all(np.array_equal(a.params[k], b.params[k]) for k in b.params),
          "load_checkpoint(RUN) is not RUN/checkpoint.cdpt")
    empty = os.path.join(T, "emptyrun")
    os.makedirs(empty, exist_ok=True)
    r = info(empty)
    check(r.returncode == 1 and "no data.mdb" in r.stderr, "info of a folder without a "
          "checkpoint: %d %r" % (r.returncode, r.stderr))
    two, three = os.path.join(d, "names2.cdpt"), os.path.join(d, "names3.cdpt")
    subprocess.run([EDIT, "-n", "road,other", good, two], check=True)
    subprocess.run([EDIT, "-n", "road,other,third", good, three], check=True)
    r = info(two)
    check(r.returncode == 0 and "class names: road, other" in r.stdout, "2 names for 2 classes")
    r = info(three)
    msg = "'%s': the checkpoint names 3 classes, the net has 2" % three
    check(r.returncode == 1 and r.stdout == "" and r.stderr == "cdpool: cannot read %s\n" % msg,
          "3 names for a 2-class net: %d %r" % (r.returncode, r.stderr))
    c_says(msg, "cdp-predict", "-q", three, os.path.join(T, "r", "road.tif"),
           "-o", os.path.join(T, "pred3.tif"))
    ck = cdpool.load_checkpoint(three)
    check(fit_checkpoint(ck, model_of(ck)) ==
          "the checkpoint names 3 classes, the net has 2", "fit_checkpoint")
    ok("info: more class names than the net's classes refused as cdp-predict refuses them")

    r_fd, w_fd = os.pipe()
    os.close(r_fd)                  # a reader that is gone, as after `| head -1`
    try:
        for args in (["info", os.path.join(T, "pool"), good, os.path.join(T, "train.keys")],
                     ["--help"], ["trace", "--help"]):
            p = subprocess.run([sys.executable, "-m", "cdpool"] + args, stdout=w_fd,
                               stderr=subprocess.PIPE, text=True)
            check(p.returncode == -13 and p.stderr == "",
                  "%s to a closed pipe: exit %d, %r" % (args[0], p.returncode, p.stderr[-200:]))
    finally:
        os.close(w_fd)
    ok("a closed stdout: every subcommand ends by SIGPIPE, without a traceback")


def test_seed_range():
    """Seeds outside cdp-train's and cdp-keyshuffle's [0, 2**64-1] are refused,
    not taken modulo 2**64."""
    top = (1 << 64) - 1
    for seed in (1 << 64, -1, (1 << 64) + 7):
        try:
            cdpool.BlockSampler(16, 4, 0, 1, seed=seed)
            raise Fail("BlockSampler took seed %d" % seed)
        except ValueError as e:
            check("[0, 2**64-1]" in str(e), str(e))
        try:
            cdpool.Augment(hflip=True, seed=seed)
            raise Fail("Augment took seed %d" % seed)
        except ValueError as e:
            check("[0, 2**64-1]" in str(e), str(e))
        p = subprocess.run(["cdp-keyshuffle", "-q", "--seed", str(seed), "-o",
                            os.path.join(T, "seed.keys"), os.path.join(T, "pool")],
                           capture_output=True, text=True)
        check(p.returncode == 2, "cdp-keyshuffle --seed %d: exit %d" % (seed, p.returncode))
    for seed in (True, False):
        try:
            cdpool.BlockSampler(16, 4, 0, 1, seed=seed)
            raise Fail("BlockSampler took seed=%r" % seed)
        except ValueError as e:
            check("is not an integer in [0, 2**64-1]" in str(e), str(e))
    s = cdpool.BlockSampler(16, 4, 0, 1, seed=top)
    check(s.seed == top and sorted(s) == list(range(16)), "seed 2**64-1")
    subprocess.run(["cdp-keyshuffle", "-q", "--seed", str(top), "-o",
                    os.path.join(T, "seed.keys"), os.path.join(T, "pool")], check=True)
    check(cdpool.read_keys(os.path.join(T, "seed.keys")).seed == top, "keyshuffle seed")
    ok("seeds: [0, 2**64-1] as cdp-keyshuffle and cdp-train take them, others ValueError")


# ---- audit B: pools rebuilt, value pools, refusals --------------------------------------
def pack(name, raster, *tile_args):
    """cdp-tile RASTER | cdp-lmdbpack T/NAME, a fresh directory."""
    path = os.path.join(T, name)
    shutil.rmtree(path, ignore_errors=True)
    tile = subprocess.Popen(["cdp-tile", "-q", "--size", "32"] + list(tile_args) + [raster],
                            stdout=subprocess.PIPE)
    subprocess.run(["cdp-lmdbpack", "-q", path], stdin=tile.stdout, check=True)
    tile.stdout.close()
    check(tile.wait() == 0, "cdp-tile %s" % raster)
    return path


def test_dataset_sources():
    """PoolDataset's training sources as cdp-train's loader finds them
    (test_loader_sources.c): from the keys' names, reading only the 64
    headers of the loader's open sample, equal to those of every record's
    header, on cdp-tile scenes a, a_1 (a_1_0 a tile of a, a_1_0_0 of a_1)
    and b, and on the same stream with the keys of a and b swapped, where
    the sample disagrees and every header is read."""
    import cdpool.data as cd
    mk = os.path.join(os.environ["CDP_SRCDIR"], "tests", "tools", "mkraster.py")
    r = [os.path.join(T, "src_%d.tif" % i) for i in range(3)]
    for path, side, seed in zip(r, (80, 64, 80), (1, 2, 3)):
        subprocess.run([sys.executable, mk, path, "--width", str(side), "--height", str(side),
                        "--seed", str(seed)], check=True)
    stream = subprocess.run(["cdp-tile", "-q", "--size", "8", "--name", "a", "--name", "a_1",
                             "--name", "b"] + r, stdout=subprocess.PIPE, check=True).stdout
    swapped, at = [stream[:8]], 8
    while at < len(stream):
        t, z, nl, bl = struct.unpack_from("<BBHI", stream, at)
        name, body = stream[at + 8:at + 8 + nl], stream[at + 8 + nl:at + 8 + nl + bl]
        m = re.fullmatch(rb"([ab])(_[0-9]+_[0-9]+)", name)
        if chr(t) == "R" and m:
            name = (b"b" if m.group(1) == b"a" else b"a") + m.group(2)
        f = struct.pack("<BBHI", t, z, len(name), bl) + name + body
        swapped.append(f + struct.pack("<I", zlib.crc32(f) & 0xffffffff))
        at += 12 + nl + bl
    orig, seen = cd.peek, [0]

    def counted(*a):
        seen[0] += 1
        return orig(*a)
    for name, data, val_by in (("src_names", stream, "a_1"),
                               ("src_swapped", b"".join(swapped), "b")):
        path = os.path.join(T, name)
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["cdp-lmdbpack", "-q", path], input=data, check=True)
        subprocess.run(["cdp-keyshuffle", "-q", "--val-by", val_by, "--val-out", path + ".val",
                        "-o", path + ".keys", path], check=True)
        for keys, want_n in ((path + ".keys", 200 if val_by == "a_1" else 164),
                             (path + ".val", 64 if val_by == "a_1" else 100)):
            ds = cdpool.PoolDataset(path, keys, standardize=False)
            with ds.pool.view() as v:
                want = {orig(v.raw(k))[0].source for k in ds.keys}
            seen[0] = 0
            cd.peek = counted
            try:
                got = ds._sources()
            finally:
                cd.peek = orig
            reads = min(64, len(ds.keys)) if name == "src_names" else len(ds.keys)
            check(len(ds.keys) == want_n and got == want and seen[0] == reads,
                  "%s %s: %d keys, sources %s, the records' %s, %d headers read (want %d)"
                  % (name, os.path.basename(keys), len(ds.keys), sorted(got), sorted(want),
                     seen[0], reads))
            ds.close()
    ok("PoolDataset sources: by the keys' names (64 headers read), every header when the "
       "names disagree")


def test_pool_replaced():
    """A pool rebuilt at the same path is read anew (not through the environment of
    the pool it replaced), and an environment is closed when no Pool uses it."""
    from cdpool.pool import _envs
    u8, i16 = (os.path.join(T, "r", n + ".tif") for n in ("u8", "i16"))
    path = pack("rebuilt", u8)
    key = os.path.realpath(path)
    p = cdpool.Pool(path)
    first = p.uuid
    check(p.keys()[0] == "u8_0_0" and key in _envs, "the first pool")
    del p
    check(key not in _envs, "the environment outlives its last Pool")
    pack("rebuilt", i16)
    q = cdpool.Pool(path)
    check(q.uuid != first and q.keys()[0] == "i16_0_0",
          "a pool rebuilt at the path read stale: %s %s" % (q.uuid, q.keys()[0]))
    # rebuilt while a Pool of the old one is open: each reads its own
    pack("rebuilt", u8)
    r = cdpool.Pool(path)
    check(r.keys()[0] == "u8_0_0" and q.keys()[0] == "i16_0_0" and
          np.array_equal(r["u8_1_1"][0], cdpool.Pool(os.path.join(T, "p_u8"))["u8_1_1"][0]),
          "two pools at one path: %s %s" % (r.keys()[0], q.keys()[0]))
    env = q.env
    q.close()
    check(r.keys()[0] == "u8_0_0" and _envs[key]["env"] is r.env, "closing the old one")
    try:
        env.stat()
        raise Fail("the replaced pool's environment is still open after its last Pool closed")
    except Exception as e:
        check(not isinstance(e, Fail), str(e))
    del r
    ds = cdpool.PoolDataset(path, write_keys(os.path.join(T, "rebuilt.keys"),
                                             cdpool.Pool(path).uuid, ["u8_0_1", "u8_1_0"]),
                            standardize=False)
    check(ds[1].shape == (2, 32, 32) and key in _envs, "dataset")   # no labels: the image
    del ds
    check(key not in _envs, "PoolDataset's own Pool outlives the dataset")
    ok("a pool rebuilt at its path is read anew; environments close with their last Pool")


def test_pool_reopen_replaced():
    """A Pool that opens the environment again, in a worker (fork, spawn,
    forkserver) or on a read after close(), refuses a pool rebuilt at its
    path since it was opened (another uuid, the same keys): CdpError
    EMISMATCH naming the pool, never the new pool's records (which workers
    once served under the old pool's keys and statistics); keys() keeps
    the uuid. The process that kept it open reads the old pool on; a Pool
    closed while its pool was not rebuilt reads on after close()."""
    import multiprocessing
    import operator
    from cdpool.pool import _envs
    a, b = (os.path.join(T, "r", n + ".tif") for n in ("two_a", "two_b"))
    path = pack("reopened", a, "--name", "s")
    pool = cdpool.Pool(path)
    old = pool.uuid
    ds = cdpool.PoolDataset(pool, write_keys(path + ".keys", old, pool.keys()),
                            standardize=False)
    x0 = ds[0]
    pool.close()
    check(np.array_equal(ds[0], x0), "a closed Pool of a pool not rebuilt")
    # the Pool is open again: forked workers inherit its environment
    pack("reopened", b, "--name", "s")
    # its uuid read by another process: with a Pool of the new pool opened
    # and closed here, the old pool's Pool here fails its next read after
    # the fork below (MDB_BAD_RSLOT, py-lmdb 1.4; a defect of its own)
    new = subprocess.run([sys.executable, "-c", "import cdpool, sys; "
                          "print(cdpool.Pool(sys.argv[1]).uuid)", path], capture_output=True,
                         text=True, check=True).stdout.strip()
    want = ("'%s': rebuilt or replaced since it was opened: the directory holds pool %s, not "
            "pool %s (open it again to read the new one)" % (path, new, old))

    def refused_here(fn, *args):
        try:
            fn(*args)
        except CdpError as e:
            return e.code == "EMISMATCH" and str(e) == want
        return False

    def forked(i):
        return 0 if refused_here(operator.getitem, ds, 0) else 3
    st, _ = _fork_each(1, forked)
    check(st == 0, "a forked worker of the dataset: status %d, not the refusal" % st)
    for method in ("spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(1) as workers:
            try:
                workers.apply(operator.getitem, (ds, 0))
                raise Fail("a %s worker read the rebuilt pool" % method)
            except CdpError as e:
                check(e.code == "EMISMATCH" and str(e) == want, "%s worker: %s" % (method, e))
    try:
        import torch
        loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1)
        try:
            next(iter(loader))
            raise Fail("a DataLoader worker read the rebuilt pool")
        except RuntimeError as e:
            check("Caught CdpError in DataLoader worker" in str(e) and want in str(e),
                  "DataLoader: %s" % e)
    except ImportError:
        print("SKIP the DataLoader worker (no torch)")
    check(np.array_equal(ds[0], x0), "the Pool kept open no longer reads the pool it opened")
    pool.close()
    for fn, args in ((pool.__getitem__, ("s_0_0",)), (pool.keys, ()), (ds.__getitem__, (0,)),
                     (pool.refresh, ())):
        check(refused_here(fn, *args), "%s after close(): not refused" % fn.__name__)
    check(pool.uuid == old, "pool.uuid changed to %s" % pool.uuid)
    check(os.path.realpath(path) not in _envs, "the refused environment is still open")
    ok("a Pool opened again (forked, spawned, forkserver workers; after close()) refuses "
       "the pool rebuilt at its path: %s" % want.split(": ", 1)[1][:40])


def test_value_pool():
    """A pool of value labels (regression): PoolDataset's targets are standardized by
    the training sources' target statistics, which cdp-train stored in its checkpoint,
    NaN where there is no target and at invalid pixels; through the torch twin at
    model_dump's initial weights they give cdp-train's first mse loss, plain and with
    crops, flips, turns and the warp."""
    p = cdpool.Pool(os.path.join(T, "p_value"))
    keys = os.path.join(T, "value.keys")
    ck = cdpool.load_checkpoint(os.path.join(T, "first_vplain", "checkpoint.cdpt"))
    check(p.label_kind == "f32" and p.label_len == 2 and ck.task["task"] == "regression",
          "fixture: %s %r" % (p.label_kind, ck.task))
    ds = cdpool.PoolDataset(p, keys)
    tm, ts = ck.task["target_mean"], ck.task["target_std"]
    check(ds.target_stats_from == "sources" and
          ds.target_mean.tobytes() == tm.astype(np.float32).tobytes() and
          ds.target_inv.tobytes() == (1.0 / ts).astype(np.float32).tobytes(),
          "targets standardized by %s %s %s, cdp-train's %s %s" % (
              ds.target_stats_from, ds.target_mean, ds.target_inv, tm, ts))
    raw = cdpool.PoolDataset(p, keys, standardize=False)
    nan_seen = 0
    for i in range(len(ds)):
        x, y = ds[i]
        rec = p.record(ds.key(i))
        want = (rec.label - ds.target_mean[:, None, None]) * ds.target_inv[:, None, None]
        bad = ~np.isfinite(rec.label)
        if rec.mask is not None:
            bad |= (rec.mask == 0)[None]
        else:
            bad |= np.all(rec.image == rec.nodata, 0)[None]
        want[bad] = np.nan
        nan_seen += int(bad.sum())
        check(y.dtype == np.float32 and y.shape == (2, 32, 32) and
              np.array_equal(y, want.astype(np.float32), equal_nan=True), "sample %d" % i)
        ry = raw[i][1]
        check(np.array_equal(np.isnan(ry), bad) and np.array_equal(ry[~bad], rec.label[~bad]),
              "standardize=False: the stored targets")
    check(nan_seen > 0, "no sample without a target")
    check(cdpool.PoolDataset(p, keys, standardize=ck).target_stats_from == "checkpoint",
          "standardize=checkpoint")
    try:
        import torch
        from cdpool.torch_model import EngineNet
    except ImportError:
        print("SKIP value pool: the first step (no torch)")
        return
    import json
    for name in ("vplain", "vaug"):
        model = json.load(open(os.path.join(T, "init_" + name, "model.json")))
        run = cdpool.load_checkpoint(os.path.join(T, "first_" + name, "checkpoint.cdpt"))
        d = cdpool.PoolDataset(p, keys, augment=cdpool.Augment.from_checkpoint(run))
        s = cdpool.BlockSampler(len(d), 4, 0, 1, seed=7, with_epoch=True)
        batch = [d[j] for j in s.step_indices(0, 0)]
        x = torch.from_numpy(np.stack([b[0] for b in batch]))
        y = np.stack([b[1] for b in batch]).astype(np.float64)
        net = EngineNet(model)
        net.load_blocks(np.fromfile(os.path.join(T, "init_" + name, "params0.f32"), "<f4"))
        with torch.no_grad():
            z = net.train()(x).double().numpy()
        m = np.isfinite(y)
        got = float(((z - y)[m] ** 2).sum() / m.sum())
        want = next(json.loads(line)["loss"] for line in
                    open(os.path.join(T, "first_" + name, "metrics.jsonl"))
                    if '"type":"step"' in line and '"step":1,' in line)
        check(abs(got - want) <= 1e-6 * abs(want), "%s: mse %r, cdp-train's %r" % (name, got,
                                                                                    want))
        print("ok   value pool, first step %s: mse %.9g, cdp-train's %.9g" % (name, got, want))
    ok("a value pool: targets standardized as cdp-train's loader gives them")


def test_loss_twin():
    """loss_fn of model_of(checkpoint), on PoolDataset's batch through the
    checkpoint's net, is cdp-train's step-1 loss for every kind of loss (python.sh's
    --lr 0 runs, whose checkpoints hold the initial weights): ignored pixels
    (PoolDataset's 255, and the model's ignore= label) skipped, the cfg's loss options
    (carried in model["loss_opts"]) applied, the regression losses l1 and huber
    without the NaN targets, a multi-label head's bce with its positive weights, also
    on a batch that Mix mixed as cdp-train does."""
    try:
        import torch
        from cdpool.torch_model import loss_fn, to_torch
    except ImportError:
        print("SKIP loss twin (no torch)")
        return
    import json
    runs = (("ce", "p_ign", "ign"), ("cels", "p_ign", "ign"), ("focal", "p_ign", "ign"),
            ("cedice", "p_ign", "ign"), ("lovasz", "p_ign", "ign"), ("bce", "p_ign", "ign"),
            ("bdice", "p_ign", "ign"), ("l1", "p_value", "value"),
            ("huber", "p_value", "value"), ("multi", "p_multi", "multi"))
    for name, pool, keys in runs:
        d = os.path.join(T, "loss_" + name)
        ck = cdpool.load_checkpoint(os.path.join(d, "checkpoint.cdpt"))
        model = model_of(ck)
        p = cdpool.Pool(os.path.join(T, pool))
        ds = cdpool.PoolDataset(p, cdpool.read_keys(os.path.join(T, keys + ".keys"), pool=p))
        s = cdpool.BlockSampler(len(ds), 4, 0, 1, seed=7, with_epoch=True)
        batch = [ds[j] for j in s.step_indices(0, 0)]
        x = torch.from_numpy(np.stack([b[0] for b in batch]))
        y = torch.from_numpy(np.stack([b[1] for b in batch]))
        if name == "ce":
            check((y == 255).any(), "the batch has no ignored pixel")
        if name in ("l1", "huber"):
            check(torch.isnan(y).any(), "the batch has no missing target")
        net = to_torch(ck, model).train()
        z = net(x)
        yl = y if y.dtype.is_floating_point else y.reshape(4, -1)
        got = float(loss_fn(model, z, yl, ignore=ds.ignore))
        want = next(json.loads(line)["loss"] for line in open(os.path.join(d, "metrics.jsonl"))
                    if '"type":"step"' in line and '"step":1,' in line)
        check(abs(got - want) <= 1e-5 * abs(want), "%s (%s %s): loss %r, cdp-train's %r" % (
            name, model["loss"], model["loss_opts"], got, want))
        if name == "cels":
            # build() of the cfg (not only model_of) carries its loss options:
            # without them (the plain cfg's loss) the loss is another
            from cdpool.model import LOSS_OPTS, build
            plain = [o for o in ck.overrides if o.split("=")[0] not in LOSS_OPTS]
            check(len(plain) == len(ck.overrides) - 2, "cels overrides %s" % ck.overrides)
            for ov, same in ((ck.overrides, True), (plain, False)):
                m = build(ck.cfg_text, "<cfg>", ov, ck.in_shape)
                b = float(loss_fn(m, z, yl, ignore=ds.ignore))
                check((abs(b - want) <= 1e-5 * abs(want)) == same, "loss_fn(build(cfg, %s)): "
                      "%r, model_of's %r" % (ov, b, want))
    check(model_of(cdpool.load_checkpoint(os.path.join(T, "loss_cels", "checkpoint.cdpt")))
          ["loss_opts"] == {"label_smoothing": "0.1", "class_weights": "1;3;0.5"},
          "model_of: the cfg's loss options")
    # a multi-label batch mixed by Mix: cdp-train's loss is lam L(y) + (1 - lam) L(y'),
    # which bce makes the loss of the mixed multi-hot target; x, y: the last run's
    # batch, the same keys and seed
    d = os.path.join(T, "loss_mixml")
    ck = cdpool.load_checkpoint(os.path.join(d, "checkpoint.cdpt"))
    model = model_of(ck)
    xm, ya, yb, lam = cdpool.Mix.from_cfg(ck.cfg_text, ck.overrides, seed=7)(x.numpy(), y, 0, 0)
    check(lam < 1 and not torch.equal(ya, yb), "the multi-label batch was not mixed")
    z = to_torch(ck, model).train()(torch.from_numpy(xm))
    got = float(lam * loss_fn(model, z, ya) + (1 - lam) * loss_fn(model, z, yb))
    mixed = float(loss_fn(model, z, lam * ya + (1 - lam) * yb))
    want = next(json.loads(line)["loss"] for line in open(os.path.join(d, "metrics.jsonl"))
                if '"type":"step"' in line and '"step":1,' in line)
    check(abs(got - want) <= 1e-5 * want and abs(mixed - want) <= 1e-5 * want,
          "mixed multi-label batch: %r, of the mixed targets %r, cdp-train's %r" % (got, mixed,
                                                                                  want))
    ok("loss_fn of model_of(checkpoint): cdp-train's first loss for %d losses and a mixed "
       "multi-label batch" % len(runs))


def test_regression_deployed():
    """Deployed (and export_onnx) of a regression checkpoint gives cdp-predict's values,
    output * target_std + target_mean, not probabilities."""
    try:
        import torch
        from cdpool.torch_model import Deployed, export_onnx
    except ImportError:
        print("SKIP Deployed of a regression net (no torch)")
        return
    path = os.path.join(T, "first_vplain", "checkpoint.cdpt")
    ck = cdpool.load_checkpoint(path)
    win = os.path.join(T, "vwin.tif")
    # a window without nodata pixels, which cdp-predict zeroes and Deployed leaves to
    # its caller
    gdal.Translate(win, os.path.join(T, "r", "val.tif"), srcWin=[0, 32, 32, 32])
    out = os.path.join(T, "vwin_value.tif")
    r = subprocess.run(["cdp-predict", "-q", "--size", "32", "--overlap", "0", "--threads", "1",
                        path, win, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "cdp-predict: %s" % r.stderr)
    want = gdal.Open(out).ReadAsArray().astype(np.float64)            # (2, 32, 32), NaN invalid
    raw = gdal.Open(win).ReadAsArray().astype(np.float32)
    dep = Deployed(ck)
    with torch.no_grad():
        got = dep(torch.from_numpy(raw[None]))[0].numpy()
    v = np.isfinite(want)
    err = float(np.max(np.abs(got - want)[v] / np.maximum(1.0, np.abs(want[v]))))
    check(got.shape == want.shape and v.sum() > 1000 and err <= 1e-5,
          "Deployed differs from cdp-predict's values by %g (values %g..%g, its %g..%g)" % (
              err, np.nanmin(want), np.nanmax(want), got.min(), got.max()))
    try:
        import onnx
    except ImportError:
        print("SKIP the regression ONNX file (no onnx)")
    else:
        onnx_path = os.path.join(T, "vplain.onnx")
        export_onnx(ck, onnx_path)
        m = onnx.load(onnx_path)
        onnx.checker.check_model(m, full_check=True)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import onnx_eval
        check([o.name for o in m.graph.output] == ["value"], "ONNX output name")
        g = onnx_eval.run(m, {"bands": raw[None]})["value"][0]
        e2 = float(np.max(np.abs(g - want)[v] / np.maximum(1.0, np.abs(want[v]))))
        check(e2 <= 1e-5, "the ONNX graph differs from cdp-predict's values by %g" % e2)
    # what cdp-predict refuses (tests/train/regression.sh), Deployed refuses with its
    # message: a TASK of other targets than the net's outputs (ckpt_edit -T 3), and a
    # regression TASK on a net whose output is 1x1 (the same weights, a [gap] head)
    bad3 = os.path.join(T, "vplain_t3.cdpt")
    gapcfg = os.path.join(T, "vplain_gap.cfg")
    with open(SMALL) as f, open(gapcfg, "w") as g:
        g.write(f.read() + "\n[gap]\n")
    gap = os.path.join(T, "vplain_gap.cdpt")
    for args, want in ((["-T", "3", path, bad3], "the checkpoint records 3 targets, the net gives 2"),
                       (["-c", gapcfg, path, gap],
                        "a regression net with a 1x1 output is not a segmentation model")):
        r = subprocess.run([EDIT] + args, capture_output=True, text=True)
        check(r.returncode == 0, "ckpt_edit %s: %s" % (args, r.stderr))
        try:
            Deployed(cdpool.load_checkpoint(args[-1]))
            check(False, "Deployed accepted %s" % args[-1])
        except ValueError as e:
            check(str(e) == want, "Deployed of %s: '%s', want '%s'" % (args[-1], e, want))
    ok("Deployed and export_onnx of a regression net: cdp-predict's values (within %.1e),"
       " and its refusals" % err)


def test_class_ignore():
    """ignore= on a scalar-class pool changes no label: its stored ignore 0 means "not in
    use" and class 0 is a class (the loader's stored ignore is -1 there)."""
    path = os.path.join(T, "p_class")
    keys = os.path.join(T, "class.keys")
    subprocess.run(["cdp-keyshuffle", "-q", "--seed", "1", "-o", keys, path], check=True)
    plain = cdpool.PoolDataset(path, keys)
    ign = cdpool.PoolDataset(path, keys, ignore=-100)
    want = {"chip_a": 0, "chip_b": 2}
    for i in range(len(plain)):
        a, b = int(plain[i][1]), int(ign[i][1])
        check(a == b == want[plain.key(i)], "%s: class %d, with ignore=-100 %d" % (
            plain.key(i), a, b))
    ok("a scalar-class pool: ignore= leaves class 0 alone, as the C loader")


def test_loss_ignore_default():
    """loss_fn's ignore= left out is 255, cdp-tile's ignore value of u8
    labels. A pool of u16 labels ignores 65535: without ignore= the loss
    refuses its ignored pixels (ValueError asking for ignore=) rather than
    count them, which a binary head did silently (class 1) and a softmax
    head failed on with torch's 'Target 65535 is out of bounds'; with
    ignore=ds.ignore it is the loss of the same labels ignored as 255."""
    try:
        import torch
        from cdpool.model import build
        from cdpool.torch_model import EngineNet, loss_fn
    except ImportError:
        print("SKIP loss ignore default (no torch)")
        return
    # python.sh's ign.tif (invalid pixels: nodata in every band), its label
    # made 0 and 1 only in a UInt16 raster: u16 labels, ignore 65535
    src = gdal.Open(os.path.join(T, "r", "ign_mask.tif"))
    lab = src.ReadAsArray()
    lab[lab > 1] = 0
    os.makedirs(os.path.join(T, "r16"), exist_ok=True)
    shutil.copy(os.path.join(T, "r", "ign.tif"), os.path.join(T, "r16", "ig16.tif"))
    out = gdal.GetDriverByName("GTiff").Create(os.path.join(T, "r16", "ig16_mask.tif"),
                                               lab.shape[1], lab.shape[0], 1, gdal.GDT_UInt16)
    out.SetGeoTransform(src.GetGeoTransform())
    out.SetProjection(src.GetProjection())
    out.GetRasterBand(1).WriteArray(lab)
    out = None
    path = pack("p_ig16", os.path.join(T, "r16", "ig16.tif"), "--label-suffix", "_mask")
    kf = os.path.join(T, "ig16.keys")
    subprocess.run(["cdp-keyshuffle", "-q", "-o", kf, path], check=True)
    ds = cdpool.PoolDataset(path, kf)
    check(ds.ignore == 65535, "u16 labels: ignore %d" % ds.ignore)
    x = torch.from_numpy(np.stack([ds[i][0] for i in range(len(ds))]))
    y = torch.from_numpy(np.stack([ds[i][1] for i in range(len(ds))])).reshape(len(ds), -1)
    check((y == 65535).any() and not ((y > 1) & (y != 65535)).any(), "labels %s" % y.unique())
    torch.manual_seed(3)
    for ov in (["classes=3"], ["classes=2", "loss=bce", "outputs=1"]):
        model = build(open(SMALL).read(), SMALL, ["in_h=32", "in_w=32"] + ov,
                      (x.shape[1], 32, 32))
        with torch.no_grad():
            z = EngineNet(model)(x)
            try:
                loss_fn(model, z, y)
                check(False, "%s: loss_fn without ignore= counted label 65535" % ov)
            except ValueError as e:
                check(str(e).startswith("loss_fn: label 65535 is not ignored") and
                      "pass ignore=" in str(e), "%s: %s" % (ov, e))
            got = float(loss_fn(model, z, y, ignore=ds.ignore))
            want = float(loss_fn(model, z, torch.where(y == 65535, 255, y)))
        check(got == want, "%s: loss %r, with the ignored pixels as 255 %r" % (ov, got, want))
    ok("loss_fn without ignore= refuses a u16 pool's ignored label 65535; with ds.ignore skips it")


def test_constant_band():
    """A band with std 0 (a constant band in training): cdp-predict only centres it
    (1 / std taken as 1) and sets non-finite values to 0; so do Deployed and
    Checkpoint.standardize."""
    b = open(os.path.join(T, "run1", "checkpoint.cdpt"), "rb").read()
    i = b.index(b"DATA") + 16 + 8 + 12 + 24           # the first std, f64
    body = b[:i] + struct.pack("<d", 0.0) + b[i + 8:]
    path = os.path.join(T, "ck", "std0.cdpt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(body[:-4] + struct.pack("<I", zlib.crc32(body[:-4])))
    ck = cdpool.load_checkpoint(path)
    check(ck.std[0] == 0 and ck.std[1] > 0, "std %r" % ck.std)
    x = np.full((3, 4, 4), 7.0, np.float32)
    x[0, 0, 0], x[1, 1, 1], x[2, 2, 2], x[0, 3, 3] = np.nan, np.inf, -np.inf, 3e38
    z = ck.standardize(x)
    m32 = ck.mean.astype(np.float32)
    check(np.all(np.isfinite(z[:, :3, :3])) and z[0, 0, 0] == 0 and z[1, 1, 1] == 0 and
          z[2, 2, 2] == 0 and z[0, 1, 0] == np.float32(7.0) - m32[0] and
          z[1, 0, 0] == (np.float32(7.0) - m32[1]) * np.float32(1.0 / ck.std[1]),
          "standardize: %r" % z[:, :3, :3])
    ok("Checkpoint.standardize: a constant band only centred, non-finite values 0")
    try:
        import torch
        from cdpool.torch_model import Deployed
    except ImportError:
        print("SKIP Deployed with a constant band (no torch)")
        return
    win = os.path.join(T, "win0.tif")
    gdal.Translate(win, os.path.join(T, "r", "road.tif"), srcWin=[37, 61, 32, 32])
    out = os.path.join(T, "win0_prob.tif")
    r = subprocess.run(["cdp-predict", "-q", "--prob", "--overlap", "0", "--threads", "1", path,
                        win, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "cdp-predict --prob: %s" % r.stderr)
    want = gdal.Open(out).ReadAsArray().astype(np.float64)
    raw = gdal.Open(win).ReadAsArray().astype(np.float32)
    with torch.no_grad():
        got = Deployed(ck)(torch.from_numpy(raw[None]))[0].numpy()
    err = float(np.max(np.abs(got - want)))
    check(err <= 1e-5, "Deployed with a constant band differs from cdp-predict --prob by %g" % err)
    ok("Deployed with a constant band: cdp-predict --prob's probabilities")


def test_split_key():
    """split_key reads the keys cdp-tile writes with a NAME of 200 bytes (the NAME is
    limited, not the body) as cdp-keyshuffle --val-by does; and cdp_key_scene's limits."""
    name = "n" * 200
    path = pack("longname", os.path.join(T, "r", "u8.tif"), "--name", name)
    keys = cdpool.Pool(path).keys()
    check(len(keys) == 4 and all(cdpool.split_key(k)[0] == name for k in keys),
          "split_key: %r" % [cdpool.split_key(k)[1:] for k in keys])
    r = subprocess.run(["cdp-keyshuffle", "--seed", "1", "--val-by", name, "--val-out",
                        os.path.join(T, "lnv.keys"), "-o", os.path.join(T, "ln.keys"), path],
                       capture_output=True, text=True)
    check("all 4 selected keys are held out" in r.stderr, "cdp-keyshuffle: %s" % r.stderr)
    for k, want in (("a" * 200 + "_1_2", ("a" * 200, 1, 2)),
                    ("c" * 40 + "/" + "a" * 200 + "_0_0", ("c" * 40 + "/" + "a" * 200, 0, 0)),
                    ("a" * 200, ("a" * 200, None, None)),
                    ("a" * 201 + "_1_2", None), ("a" * 201, None), ("a/b/c", None),
                    ("c" * 54 + "/" + "a" * 200, ("c" * 54 + "/" + "a" * 200, None, None)),
                    ("c" * 55 + "/" + "a" * 200, None), ("a_1_-2", ("a_1_-2", None, None))):
        try:
            got = cdpool.split_key(k)
        except CdpError:
            got = None
        check(got == want, "split_key(%.20r... %d bytes) = %r, want %r" % (k, len(k), got, want))
    ok("split_key: a NAME of 200 bytes in a tile key, as cdp-tile writes it")


def test_dataset_key_refusals():
    """A pointer file with a key line that is not UTF-8, and one with no keys:
    PoolDataset refuses them with cdp-train's messages."""
    pool = cdpool.Pool(os.path.join(T, "pool"))
    src = open(os.path.join(T, "train.keys"), "rb").read()
    body = b"\xff\xfe_0_0\n" + src.split(b"\n", 1)[1]
    bad = os.path.join(T, "k", "notutf8.keys")
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    with open(bad, "wb") as f:
        f.write(b"#cdpool-keys 1 uuid=%s seed=5 count=%d crc32=%08x\n" % (
            pool.uuid.encode(), body.count(b"\n"), zlib.crc32(body)) + body)
    e = refused("EKEY", cdpool.PoolDataset, pool, bad)
    check(e.line == 2, "line %d" % e.line)
    run = ["cdp-train", "--db", pool.path, "-q", "--threads", "1", "--model",
           SMALL + ":in_h=32,in_w=32", "--batch", "4", "--steps", "1", "--out",
           os.path.join(T, "krun"), "--keys"]
    p = subprocess.run(run + [bad], capture_output=True)
    check(p.returncode == 1 and str(e).encode("utf-8", "surrogateescape") in p.stderr,
          "cdp-train says %r, Python %r" % (p.stderr, str(e)))
    zero = write_keys(os.path.join(T, "k", "zero.keys"), pool.uuid, [])
    e = refused("EFORMAT", cdpool.PoolDataset, pool, zero)
    check(str(e) == "'%s': no keys" % zero, str(e))
    c_says(e, *(run + [zero]))
    ok("pointer files of a key that is not UTF-8 and of no keys: cdp-train's messages")


def test_dataset_key_list():
    """PoolDataset takes a list of keys (a slice of a KeyList is a list), each
    checked against the pool; what is no list of keys, and a standardize=
    of none of its forms, are TypeError or ValueError naming the argument."""
    pool = cdpool.Pool(os.path.join(T, "pool"))
    keys = cdpool.read_keys(os.path.join(T, "train.keys"), pool=pool)
    full = cdpool.PoolDataset(pool, keys, standardize="pool")
    for given in (keys[:8], tuple(keys[2:5]), [k.encode() for k in keys[:3]],
                  [keys[1], keys[1]]):
        ds = cdpool.PoolDataset(pool, given, standardize="pool")
        want = [keys.index(k if isinstance(k, str) else k.decode()) for k in given]
        check(len(ds) == len(given) and ds.keys.uuid == pool.uuid and
              all(np.array_equal(ds[i][0], full[j][0]) and np.array_equal(ds[i][1], full[j][1])
                  for i, j in enumerate(want)), "PoolDataset(pool, %r)" % (given,))
    for given, exc, why in (
            ([], ValueError, "keys: no keys"),
            (["nosuch_0_0"], ValueError, "keys[0]: key 'nosuch_0_0' is not in '%s'" % pool.path),
            # the empty key: absent, not LMDB's MDB_BAD_VALSIZE as a damaged pool's error
            ([keys[0], ""], ValueError, "keys[1]: key '' is not in '%s'" % pool.path),
            ([keys[0], 3], TypeError, "keys[1]: a key is str or bytes, not int"),
            (5, TypeError, "keys: int is not a KeyList, a pointer file's path or a list of keys"),
            (None, TypeError, "keys: NoneType is not a KeyList, a pointer file's path or a list "
             "of keys")):
        try:
            cdpool.PoolDataset(pool, given)
            raise Fail("PoolDataset(pool, %r) accepted" % (given,))
        except exc as e:
            check(str(e) == why and not isinstance(e, CdpError),
                  "keys=%r: %s %s, want %s" % (given, type(e).__name__, e, why))
    check("" not in pool and b"" not in pool, "the empty key in the pool")
    for k in ("", b""):
        try:
            pool[k]
            raise Fail("pool[%r] found a record" % (k,))
        except KeyError:
            pass
    forms = "True, False, 'pool', a PoolDataset, a Checkpoint or (mean, std)"
    for given, exc, why in ((None, TypeError, "standardize: None is not " + forms),
                            (1, TypeError, "standardize: 1 is not " + forms),
                            ((1, 2, 3), ValueError, "standardize: (1, 2, 3) is not a (mean, "
                             "std) pair"),
                            (("a", "b"), ValueError, "standardize: mean and std need 3 numbers "
                             "each"),
                            ("bogus", ValueError, "standardize: 'bogus' is not " + forms)):
        try:
            cdpool.PoolDataset(pool, keys, standardize=given)
            raise Fail("standardize=%r accepted" % (given,))
        except exc as e:
            check(str(e) == why, "standardize=%r: %s %s, want %s"
                  % (given, type(e).__name__, e, why))
    check(cdpool.PoolDataset(pool, keys, standardize=np.False_).stats_from is None,
          "standardize=np.False_")
    ok("PoolDataset(pool, keys[:8]): a list of keys, each in the pool; keys= and standardize= "
       "refusals name the argument")


def test_dataset_negative_index():
    """ds[-j] is ds[n - j], its augmentation drawn for key index n - j (as
    (epoch, -j) too); an index outside [-n, n) is IndexError."""
    pool = cdpool.Pool(os.path.join(T, "pool"))
    aug = cdpool.Augment(hflip=True, vflip=True, rot90=True, crop_h=24, crop_w=24, seed=1)
    ds = cdpool.PoolDataset(pool, os.path.join(T, "train.keys"), augment=aug)
    n = len(ds)
    for j in range(1, 7):
        for a, b in ((ds[-j], ds[n - j]), (ds[(3, -j)], ds[(3, n - j)])):
            check(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]),
                  "ds[-%d] is not ds[%d]" % (j, n - j))
    check(np.array_equal(ds[-n][0], ds[0][0]), "ds[-n]")
    for i in (n, -n - 1):
        try:
            ds[i]
            raise Fail("ds[%d] of %d keys accepted" % (i, n))
        except IndexError as e:
            check(str(e) == "dataset index %d is out of range (%d keys)" % (i, n), str(e))
    ok("PoolDataset: ds[-1] is ds[n - 1], augmentation included")


def test_lmdb_damage():
    """Damaged LMDB pages: CdpError naming the pool with the message of
    cdp-keyshuffle, never an lmdb, OS or KeyError: the main database's page (opening),
    the tiles database's page (reading keys and records), and a leaf page whose bounds
    make up keys."""
    import struct as st
    src = os.path.join(T, "pool")
    d = open(os.path.join(src, "data.mdb"), "rb").read()
    ps = st.unpack_from("=I", d, 40)[0]
    # the newer meta page (its txnid at byte 144), its main database's root at 128
    off = max((0, ps), key=lambda o: st.unpack_from("=Q", d, o + 144)[0])
    main = st.unpack_from("=Q", d, off + 128)[0]
    page = d[main * ps:(main + 1) * ps]
    at = page.index(b"tiles")                  # its node's data: the MDB_db, md_root at 40
    tiles = st.unpack_from("=Q", page, at + 5 + 40)[0]
    check(st.unpack_from("=H", d, tiles * ps + 10)[0] & 2, "the tiles root is no leaf page")
    key = cdpool.Pool(src).keys()[0]
    for name, pg, byte, code, want in (
            ("main", main, 10, "ELMDB", "not a cdpool pool: MDB_PAGE_NOTFOUND: Requested page "
             "not found"),
            ("tiles", tiles, 10, "ELMDB", "MDB_PAGE_NOTFOUND: Requested page not found"),
            ("bounds", tiles, 12, "EKEY", "invalid key '' in the pool")):
        bad = os.path.join(T, "damaged_" + name)
        shutil.rmtree(bad, ignore_errors=True)
        os.makedirs(bad)
        b = bytearray(d)
        b[pg * ps + byte] ^= 0xFF
        open(os.path.join(bad, "data.mdb"), "wb").write(b)
        if name == "main":
            e = refused(code, cdpool.Pool, bad)
        else:
            p = cdpool.Pool(bad)
            e = refused(code, p.keys)
            if name == "tiles":
                for fn in (p.__contains__, p.record, p.__getitem__):
                    check(refused(code, fn, key).args == e.args, "%s: %s" % (fn.__name__, e))
                refused(code, cdpool.PoolDataset, p, os.path.join(T, "train.keys"))
        check(str(e) == "'%s': %s" % (bad, want), str(e))
        c_says(e, "cdp-keyshuffle", "-q", "-o", os.path.join(T, "dmg.keys"), bad)
    ok("damaged LMDB pages: cdp-keyshuffle's messages, naming the pool")


def test_trace_refusals():
    """python -m cdpool trace refuses a malformed trace in one line, exit 1: a
    process_name whose args is a list, JSON nested past the parser, a dur of NaN."""
    import json
    good = {"otherData": {"program": "cdp-train", "ranks": 1, "complete": True},
            "traceEvents": [{"pid": 0, "ph": "M", "name": "process_name",
                             "args": {"name": "rank 0 (h)"}}] +
            [{"pid": 0, "tid": 0, "ph": "X", "name": n, "ts": 10 * s + j, "dur": 1,
              "args": {"step": s}} for s in (1, 2, 3) for j, n in enumerate(("step", "forward"))]}
    cases = [("good", json.dumps(good), None)]
    listargs = json.loads(json.dumps(good))
    listargs["traceEvents"][0]["args"] = ["x"]
    cases.append(("listargs", json.dumps(listargs), "event 0: process_name whose args is not "
                  "an object"))
    cases.append(("deep", "[" * 100000 + "]" * 100000, "not JSON: nested too deeply"))
    for v in ("NaN", "Infinity", "1e999", "true"):
        t = json.dumps(good).replace('"dur": 1,', '"dur": %s,' % v, 1)
        cases.append(("dur_" + v, t, "event 1: a span without name, ts, dur >= 0 or args.step"))
    for name, text, why in cases:
        path = os.path.join(T, "trace_%s.json" % name)
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([sys.executable, "-m", "cdpool", "trace", path], capture_output=True,
                           text=True)
        if why is None:
            check(r.returncode == 0 and "steps: 3" in r.stdout, "%s: %d %r" % (name, r.returncode,
                                                                            r.stderr[-300:]))
        else:
            check(r.returncode == 1 and r.stdout == "" and
                  r.stderr == "cdpool: cannot read '%s': %s\n" % (path, why),
                  "%s: exit %d, %r" % (name, r.returncode, r.stderr[-300:]))
    ok("trace: malformed traces refused in one line naming the file")


def test_import_torch_refusal():
    """import-torch on a file that torch.load does not give a state dict from says
    which kind of file it is in one line: text (not a PyTorch checkpoint), a pickled
    module (save model.state_dict()), a torch.save file cut short (truncated)."""
    try:
        import torch
    except ImportError:
        print("SKIP import-torch refusal (no torch)")
        return
    text, model, cut = (os.path.join(T, n) for n in ("notorch.pth", "module.pth", "cut.pth"))
    with open(text, "w") as f:
        f.write("not a checkpoint\n")
    torch.save(torch.nn.Linear(2, 2), model)
    torch.save(torch.nn.Linear(64, 64).state_dict(), cut)
    with open(cut, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    for path, why in ((text, "not a PyTorch checkpoint (neither torch.save's zip archive nor "
                             "a pickle)"),
                      (model, "a pickled model, not a state dict: save model.state_dict() (it "
                              "pickles torch.nn.modules.linear.Linear, which "
                              "torch.load(weights_only=True) does not load)"),
                      (cut, "truncated or damaged: its zip archive cannot be read")):
        r = subprocess.run([sys.executable, "-m", "cdpool", "import-torch", path, "--model",
                            SMALL + ":in_h=32,in_w=32", "-o", os.path.join(T, "nt.cdpt")],
                           capture_output=True, text=True)
        want = "cdpool: cannot read '%s': %s" % (path, why)
        check(r.returncode == 1 and r.stderr.startswith(want) and r.stderr.count("\n") == 1
              and "\x1b" not in r.stderr and not os.path.exists(os.path.join(T, "nt.cdpt")),
              "import-torch: %d %r, want %r" % (r.returncode, r.stderr, want))
        ok("import-torch on %s: %s" % (os.path.basename(path), r.stderr.split("': ", 1)[1].strip()))


def sd_of(cfg, overrides, key=lambda layer: layer):
    """A state dict (name -> float32 array, numpy: no torch needed) with the
    names and shapes of the PyTorch model a cfg of share/cdpool/models
    mirrors, each layer's keys named key(layer), random values."""
    from cdpool.model import build
    path = os.path.join(os.environ["CDP_SRCDIR"], "share", "cdpool", "models", cfg)
    with open(path) as f:
        model = build(f.read(), path, overrides, (3, 0, 0))
    rng = np.random.default_rng(7)
    return {"%s.%s" % (key(L["name"]), t["name"]): rng.standard_normal(t["shape"]).astype(np.float32)
            for L in model["layers"] for kind in ("params", "buffers") for t in L[kind]}


def test_import_layouts():
    """import-torch's importer (import_state_dict, which unwrap()s the keys) takes an
    smp model's own state_dict() (encoder.*, decoder.*, segmentation_head.*), also
    under DDP's module., for the smp-named cfgs, every tensor as it is; it refuses a
    deeper model's state dict (resnet34's for resnet18.cfg: encoder tensors the net has
    no place for) in one line, and takes a torchvision classifier's of another class
    count (its fc left out, noted)."""
    from cdpool.import_torch import ImportError_, import_state_dict
    path = os.path.join(os.environ["CDP_SRCDIR"], "share", "cdpool", "models", "unet-resnet18.cfg")
    with open(path) as f:
        text = f.read()
    smp = sd_of("unet-resnet18.cfg", ["classes=2"], lambda n: n if n.startswith(
        ("decoder.", "segmentation_head.")) else "encoder." + n)
    check(sum(k.startswith("encoder.") for k in smp) == 100 and
          sum(k.startswith("decoder.") for k in smp) > 20, "the smp layout: %s" % sorted(smp)[:3])
    for prefix in ("", "module."):
        notes = []
        params, buffers, model = import_state_dict({prefix + k: v for k, v in smp.items()},
                                                   text, path, ["classes=2"], note=notes.append)
        total = sum(len(L["params"]) + len(L["buffers"]) for L in model["layers"])
        check(not notes and len(params) + len(buffers) == total == len(smp),
              "smp's state dict (%r): %d of %d tensors, notes %s" % (
                  prefix, len(params) + len(buffers), total, notes[:3]))
        check(np.array_equal(params["decoder.blocks.0.conv1.0.w"],
                             smp["decoder.blocks.0.conv1.0.weight"]) and
              np.array_equal(params["conv1.w"], smp["encoder.conv1.weight"]),
              "smp's tensors not taken as they are")
    r34 = sd_of("resnet34.cfg", ["classes=1000"])
    r18 = os.path.join(os.path.dirname(path), "resnet18.cfg")
    with open(r18) as f:
        text = f.read()
    try:
        import_state_dict(r34, text, r18, ["classes=5"], note=lambda line: None)
        check(False, "resnet34's state dict imported for resnet18.cfg")
    except ImportError_ as e:
        check(str(e) == "80 state dict tensors the net has no place for (layer1.2.conv1.weight "
              "(64,64,3,3), layer1.2.bn1.weight (64), layer1.2.bn1.bias (64), ...): a state dict "
              "of another model, nothing written", "resnet34 into resnet18: %s" % e)
    notes = []
    params, _, _ = import_state_dict(sd_of("resnet18.cfg", ["classes=1000"]), text, r18,
                                     ["classes=5"], note=notes.append)
    check("fc.w" not in params and "unused tensor fc.weight (1000,512)" not in notes and
          any(n.startswith("head tensor fc.weight: (1000,512)") for n in notes),
          "a 1000-class head for 5 classes: %s" % notes)
    ok("import-torch: an smp state dict (also under module.) for unet-resnet18.cfg, every "
       "tensor as it is; resnet34's for resnet18.cfg refused; a head of 1000 classes left out")


def import_torch(*args):
    return subprocess.run([sys.executable, "-m", "cdpool", "import-torch"] + list(args),
                          capture_output=True, text=True)


def test_import_outputs():
    """import-torch -o follows the C tools' output policy (cdpool(7),
    OUTPUTS; cdpool.out): never over its input (the state dict, the cfg,
    also through a link), a pool's data.mdb, a run's checkpoint, a FIFO, a
    device or a directory; a symbolic link is written through, staying a
    link; its own initial weights are replaced."""
    d = os.path.join(T, "outs")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    sd_path = os.path.join(d, "sd.npz.pth")
    try:
        import torch
    except ImportError:
        print("SKIP import-torch outputs (no torch)")
        return
    from cdpool.model import build
    with open(SMALL) as f:
        text = f.read()
    model = build(text, SMALL, ["in_h=32", "in_w=32"], (3, 32, 32))
    torch.save({"%s.%s" % (L["name"], t["name"]): torch.zeros(t["shape"])
                for L in model["layers"] for t in L["params"] + L["buffers"]}, sd_path)
    cfg = os.path.join(d, "small.cfg")
    shutil.copy(SMALL, cfg)
    link = os.path.join(d, "sd_link.pth")
    os.symlink("sd.npz.pth", link)
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    pool_copy = copy_pool(os.path.join(T, "pool"), "outs_pool")
    run_ck = os.path.join(d, "run.cdpt")
    shutil.copy(os.path.join(T, "run1", "checkpoint.cdpt"), run_ck)
    kept = {p: open(p, "rb").read() for p in (sd_path, cfg, run_ck,
                                              os.path.join(pool_copy, "data.mdb"))}
    spec = cfg + ":in_h=32,in_w=32"
    for out, why in ((sd_path, "refusing to write '%s': it is the state dict '%s'" % (sd_path, sd_path)),
                     (link, "refusing to write '%s': it is the state dict '%s'" % (link, sd_path)),
                     (cfg, "refusing to write '%s': it is the model cfg '%s'" % (cfg, cfg)),
                     (os.path.join(pool_copy, "data.mdb"), "refusing to replace '%s': it is an "
                      "LMDB database file" % os.path.join(pool_copy, "data.mdb")),
                     (run_ck, "refusing to replace '%s': it is a cdpool checkpoint" % run_ck),
                     (fifo, "refusing to write '%s': it is a FIFO, not a regular file" % fifo),
                     ("/dev/full", "refusing to write '/dev/full': it is a character device, "
                      "not a regular file"),
                     (d, "refusing to write '%s': it is a directory, not a regular file" % d),
                     (os.path.join(d, "no", "x.cdpt"), "cannot create '%s': No such file or "
                      "directory" % os.path.join(d, "no", "x.cdpt"))):
        if out == "/dev/full" and not os.path.exists(out):
            continue
        r = import_torch(sd_path, "--model", spec, "-o", out)
        check(r.returncode == 1 and r.stderr == "cdpool: %s\n" % why,
              "-o %s: %d %r, want %r" % (out, r.returncode, r.stderr, why))
    check(all(open(p, "rb").read() == b for p, b in kept.items()) and
          stat_is_fifo(fifo), "an input, the pool or the run's checkpoint changed")
    init = os.path.join(d, "init.cdpt")
    target = os.path.join(d, "real_init.cdpt")
    os.symlink("real_init.cdpt", init)
    for _ in range(2):      # the second replaces the initial weights the first wrote
        r = import_torch(sd_path, "--model", spec, "-o", init)
        check(r.returncode == 0, "import-torch: %s" % r.stderr)
    check(os.path.islink(init) and cdpool.load_checkpoint(target).initial and
          not [n for n in os.listdir(d) if ".cdp-tmp." in n], "through the link: %s"
          % os.listdir(d))
    ok("import-torch -o: the output policy of the C tools (inputs, pools, runs, FIFOs, devices "
       "refused; a link written through; its own initial weights replaced)")


def stat_is_fifo(path):
    import stat
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_import_options():
    """import-torch's option errors are usage errors (exit 2) naming the
    option, before anything is read (a state dict that does not exist is not
    looked at); integer options digits only, as the C parsers take them."""
    missing = os.path.join(T, "no_such.pth")
    out = os.path.join(T, "opt.cdpt")
    for extra, why in ((["--input-norm", "bogus"], "--input-norm: 'bogus' is not imagenet, none or "
                        "MEAN,..:STD,.."),
                       (["--input-scale", "255"], "--input-scale: describes an --input-norm, and "
                        "none is given"),
                       (["--bands", "1,2,3"], "--bands: describes an --input-norm, and none is "
                        "given"),
                       (["--input-norm", "none", "--input-scale", " 255"], "--input-scale: ' 255' "
                        "is not dtype or a number > 0"),
                       (["--input-norm", "0.5:1_0"], "--input-norm: STD '1_0' is not a list of "
                        "numbers"),
                       (["--input-norm", "0.5:0"], "--input-norm: a deviation of 0 (> 0 "
                        "expected)")):
        r = import_torch(missing, "--model", SMALL, "-o", out, *extra)
        check(r.returncode == 2 and r.stderr == "cdpool: %s\n" % why,
              "%s: %d %r, want %r" % (extra, r.returncode, r.stderr, why))
    for v in (" 3", "1_0", "+3", "3 "):
        r = import_torch(missing, "--model", SMALL, "-o", out, "--in-channels", v)
        check(r.returncode == 2 and "--in-channels: '%s' is not a number" % v in r.stderr,
              "--in-channels %r: %d %r" % (v, r.returncode, r.stderr))
    ok("import-torch option errors: exit 2 naming the option, before reading anything")


def test_import_checkpoints():
    """A training checkpoint of torchvision's train.py ({"model": state
    dict, "args": argparse.Namespace, ...}) imports under torch 2.4 and
    later with weights_only=True (argparse.Namespace allowed); an older
    torch refuses it with the one-liner that extracts the state dict. A
    state dict of the package's own EngineNet (layers.N.*) imports back to
    a checkpoint whose net computes what the EngineNet did."""
    try:
        import torch
    except ImportError:
        print("SKIP import-torch checkpoints (no torch)")
        return
    import argparse
    from cdpool.model import build
    from cdpool.torch_model import EngineNet, to_torch
    spec = SMALL + ":in_h=32,in_w=32"
    with open(SMALL) as f:
        model = build(f.read(), SMALL, ["in_h=32", "in_w=32"], (3, 32, 32))
    torch.manual_seed(3)
    net = EngineNet(model).eval()
    sd_path = os.path.join(T, "engine_sd.pth")
    torch.save(net.state_dict(), sd_path)
    out = os.path.join(T, "engine_init.cdpt")
    r = import_torch(sd_path, "--model", spec, "-o", out)
    check(r.returncode == 0, "EngineNet's state dict: %s" % r.stderr)
    ck = cdpool.load_checkpoint(out)
    back = to_torch(ck).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        check(torch.equal(back(x), net(x)), "the imported EngineNet computes another function")
    ok("an EngineNet state dict (layers.N.*) imports back: the same forward")
    tv = os.path.join(T, "tv_train.pth")
    torch.save({"model": net.state_dict(), "optimizer": {}, "epoch": 3,
                "args": argparse.Namespace(lr=0.1, model="small")}, tv)
    r = import_torch(tv, "--model", spec, "-o", os.path.join(T, "tv_init.cdpt"))
    new = hasattr(torch.serialization, "add_safe_globals")
    if new:
        check(r.returncode == 0, "a train.py checkpoint under torch %s: %s"
              % (torch.__version__, r.stderr))
        ok("a torchvision train.py checkpoint (argparse.Namespace) imports, weights_only")
    else:
        want = ("cdpool: cannot read '%s': a training checkpoint that pickles argparse.Namespace "
                "besides its weights (torchvision's train.py), which torch %s does not load "
                "safely (torch 2.4 and later do): if you trust the file, extract its state dict "
                "with python3 -c 'import torch; torch.save(torch.load(\"%s\", "
                "weights_only=False)[\"model\"], \"%s\")' and import that\n"
                % (tv, torch.__version__, tv, os.path.join(T, "tv_train-model.pth")))
        check(r.returncode == 1 and r.stderr == want, "a train.py checkpoint under torch %s: "
              "%r, want %r" % (torch.__version__, r.stderr, want))
        ok("a torchvision train.py checkpoint under torch %s: refused with the one-liner"
           % torch.__version__)


def test_import_shared_weights():
    """The package's own EngineNet state dict of a cfg whose layers share
    weights (siamese-unet.cfg's date-1 encoder, weights=) imports: PyTorch
    lists the shared module under both indices, and the sharing layers'
    copies, equal to the owners', are left out; the imported net computes
    what the EngineNet did. Copies that differ are refused in one line."""
    try:
        import torch
    except ImportError:
        print("SKIP import-torch shared weights (no torch)")
        return
    from cdpool.import_torch import ImportError_, import_state_dict
    from cdpool.model import build
    from cdpool.torch_model import EngineNet, to_torch
    cfg = os.path.join(os.environ["CDP_SRCDIR"], "share", "cdpool", "models", "siamese-unet.cfg")
    ov = ["in_h=32", "in_w=32", "depth=2", "width=4"]
    with open(cfg) as f:
        text = f.read()
    model = build(text, cfg, ov, (6, 32, 32))
    torch.manual_seed(4)
    net = EngineNet(model).eval()
    sd = net.state_dict()
    sd_path = os.path.join(T, "siamese_sd.pth")
    torch.save(sd, sd_path)
    out = os.path.join(T, "siamese_init.cdpt")
    r = import_torch(sd_path, "--model", cfg + ":" + ",".join(ov), "-o", out)
    check(r.returncode == 0, "siamese-unet's EngineNet state dict: %s" % r.stderr)
    back = to_torch(cdpool.load_checkpoint(out)).eval()
    x = torch.randn(2, 6, 32, 32)
    with torch.no_grad():
        check(torch.equal(back(x), net(x)), "the imported siamese net computes another function")
    L = next(L for L in model["layers"] if "weights" in L)
    src = model["layers"][L["weights"]]
    bad = dict(sd)
    k = "layers.%d.weight" % L["index"]
    bad[k] = sd[k] + 1
    try:
        import_state_dict(bad, text, cfg, ov, note=lambda line: None)
        raise Fail("shared weights that differ imported")
    except ImportError_ as e:
        want = ("%s (layer '%s', which shares the weights of '%s') differs from layers.%d.weight, "
                "its owner's: not a state dict of this net's shared weights, nothing written"
                % (k, L["name"], src["name"], src["index"]))
        check(str(e) == want, "shared weights that differ: %s" % e)
    ok("import-torch: siamese-unet's EngineNet state dict (shared weights listed twice) "
       "imports back; copies that differ refused")


def test_cli_output():
    """The command line's stdout: --version, a write error in one line (exit
    1), SIGPIPE quiet also for the installed console scripts (cdpool and
    its alias cdpool-info)."""
    r = subprocess.run([sys.executable, "-m", "cdpool", "--version"], capture_output=True,
                       text=True)
    check(r.returncode == 0 and r.stdout == "cdpool (python) %s\n" % cdpool.__version__,
          "--version: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    if os.path.exists("/dev/full"):
        for args in (["info", os.path.join(T, "pool")], ["--help"], ["--version"]):
            with open("/dev/full", "w") as full:
                r = subprocess.run([sys.executable, "-m", "cdpool"] + args, stdout=full,
                                   stderr=subprocess.PIPE, text=True)
            check(r.returncode == 1 and r.stderr == "cdpool: write error: No space left on "
                  "device\n", "%s >/dev/full: %d %r" % (args, r.returncode, r.stderr))
    # a closed stdout (>&-): sys.stdout is None, which is a write error too
    for args in (["info", os.path.join(T, "pool")], ["--version"]):
        r = subprocess.run([sys.executable, "-m", "cdpool"] + args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: os.close(1))
        check(r.returncode == 1 and r.stderr == "cdpool: write error: Bad file descriptor\n",
              "%s >&-: %d %r" % (args, r.returncode, r.stderr))
    bindir = os.path.dirname(sys.executable)
    scripts = [os.path.join(bindir, n) for n in ("cdpool", "cdpool-info")]
    if not all(os.path.exists(p) for p in scripts):
        print("SKIP the console scripts (no %s: not an installed package)" % scripts[0])
    for script in scripts if all(os.path.exists(p) for p in scripts) else ():
        many = [os.path.join(T, "pool")] * 400
        p = subprocess.Popen([script, "info"] + many, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        rc = p.wait()
        check(rc == -13 and err == "", "%s info | head -1: %d %r" % (script, rc, err[-300:]))
    ok("--version; a write error on stdout in one line, exit 1; the console scripts end "
       "quietly by SIGPIPE")


def test_out_keeps_mode():
    """cdpool.out.write (import-torch -o, export_onnx): a regular file it
    replaces keeps its permission bits, and as root its owner and group,
    as the C tools' do (cdpool(7), OUTPUTS); a new file gets the umask's."""
    from cdpool import out
    path = os.path.join(T, "kept.bin")
    with open(path, "wb") as f:
        f.write(b"old")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, 4321, 4322)
    out.write(path, b"new")
    st = os.stat(path)
    with open(path, "rb") as f:
        check(f.read() == b"new", "not replaced")
    check(st.st_mode & 0o7777 == 0o600, "mode %o, want 600" % (st.st_mode & 0o7777))
    if os.geteuid() == 0:
        check((st.st_uid, st.st_gid) == (4321, 4322), "owner %d:%d" % (st.st_uid, st.st_gid))
    fresh = os.path.join(T, "fresh.bin")
    mask = os.umask(0o022)
    try:
        out.write(fresh, b"x")
    finally:
        os.umask(mask)
    check(os.stat(fresh).st_mode & 0o7777 == 0o644, "a new file: %o" % os.stat(fresh).st_mode)
    ok("out.write: a replaced file keeps its mode (and owner, as root)")


def test_out_vsi():
    """cdpool.out.check refuses a GDAL virtual file system's name, as the C
    tools' policy does (cdp_out_vsi), instead of "No such file or
    directory"."""
    from cdpool import out
    for path in ("/vsimem/x.cdpt", "/vsizip/z.zip/x.onnx"):
        try:
            out.write(path, b"x")
        except out.OutputError as e:
            check(str(e) == "refusing to write '%s': GDAL virtual file systems (/vsi...) are "
                  "not supported for outputs" % path, "message '%s'" % e)
        else:
            raise Fail("%s was written" % path)
    # "/vsi" alone is a plain name: refused for its missing folder only
    for path in ("/vsi-data/x.cdpt", "/vsi/x.cdpt"):
        try:
            out.check(path)
        except out.OutputError as e:
            check("virtual" not in str(e), "'%s': %s" % (path, e))
    ok("out.check: a GDAL virtual file system refused")


def run_tests(tests):
    """Runs each test; the first Fail prints "FAIL NAME: why" and gives 1."""
    for t in tests:
        try:
            t()
        except Fail as e:
            print("FAIL %s: %s" % (t.__name__, e))
            return 1
    return 0


def main():
    return run_tests([test_dtypes, test_record_refusals, test_keys, test_sampler,
                      test_checkpoint, test_compat, test_run, test_best_kept, test_dataset, test_val_standardize, test_batches, test_photometric,
                      test_first_step, test_info, test_cfg_nesting, test_net_keys,
                      test_pool_refusals, test_meta_consistency, test_info_refusals, test_seed_range,
                      test_pool_replaced, test_pool_reopen_replaced, test_value_pool,
                      test_loss_twin, test_regression_deployed,
                      test_class_ignore, test_loss_ignore_default, test_constant_band,
                      test_split_key,
                      test_dataset_key_refusals, test_dataset_key_list,
                      test_dataset_negative_index, test_lmdb_damage, test_trace_refusals,
                      test_import_torch_refusal, test_import_layouts, test_mix_tensor,
                      test_reader_slots, test_fork_parent_slot, test_pool_keys, test_pool_append,
                      test_pool_map_growth, test_dataset_map_growth, test_dataset_snapshot,
                      test_dataset_sources,
                      test_integer_args, test_import_outputs, test_import_options,
                      test_import_checkpoints, test_import_shared_weights, test_cli_output,
                      test_out_keeps_mode, test_out_vsi])


if __name__ == "__main__":
    sys.exit(main())
