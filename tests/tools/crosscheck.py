#!/usr/bin/env python3
"""crosscheck.py: check cdp-tile's output against GDAL, independently of C.

    crosscheck.py (--stream FILE | --db POOLDIR) --raster NAME=PATH [...]
        [--label NAME=PATH ...] --size N --overlap N --edge shift|pad|drop
        [--bands 1,2,3] [--nodata V] [--ignore V] [--max-nodata F]
        [--standardize [--stats FILE]] [--zlib]

Decodes every record with Python's struct and zlib following lib/cdp_record.h
(and the stream framing of lib/cdp_stream.h, or the pool's LMDB `tiles`
sub-database for --db), then recomputes each tile from the source raster read
whole with GDAL: pixels at the offsets implied by the key and the edge policy
(padding included), validity (nodata, GDAL's real mask, padding), mask
payload, label (ignore value where invalid), geotransform, flags, and the set
of keys, which must be exactly the expected grid minus the tiles the nodata
rule drops. --raster must list the inputs in the order cdp-tile got them
(their 0-based position is the record's source index). Exit 0 when all
agree, 1 with a message naming the first mismatch, 2 on usage errors.
"""
import argparse
import struct
import sys
import zlib

import numpy as np
from osgeo import gdal

gdal.UseExceptions()

DTYPES = {1: np.uint8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
          6: np.float32, 7: np.float64}
DTNAMES = {1: "u8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "f64"}
GDT2CDP = {gdal.GDT_Byte: 1, gdal.GDT_UInt16: 2, gdal.GDT_Int16: 3,
           gdal.GDT_UInt32: 4, gdal.GDT_Int32: 5, gdal.GDT_Float32: 6,
           gdal.GDT_Float64: 7}
HDR = struct.Struct("<4sHHBBBBIIIqq6dIIIId3Q24x")
assert HDR.size == 160


class Mismatch(Exception):
    pass


def fail(msg):
    raise Mismatch(msg)


def decode(key, buf):
    """One record -> dict with header fields and numpy payloads."""
    if len(buf) < HDR.size + 4:
        fail("%s: record of %d bytes is too short" % (key, len(buf)))
    f = HDR.unpack_from(buf)
    (magic, ver, hsz, dt, lk, comp, flags, c, h, w, xo, yo, *rest) = f
    gt, (src, ign, _cls, _res, nd, isz, lsz, msz) = rest[:6], rest[6:]
    if magic != b"CDPR" or ver != 1 or hsz != 160:
        fail("%s: bad magic/version/header size %r %d %d" % (key, magic, ver, hsz))
    crc = struct.unpack_from("<I", buf, len(buf) - 4)[0]
    if zlib.crc32(buf[:-4]) & 0xffffffff != crc:
        fail("%s: record CRC mismatch" % key)
    if 160 + isz + lsz + msz + 4 != len(buf):
        fail("%s: payload sizes %d+%d+%d do not add up to %d bytes"
             % (key, isz, lsz, msz, len(buf)))
    parts, pos = [], 160
    for n in (isz, lsz, msz):
        raw = bytes(buf[pos:pos + n])
        pos += n
        if comp == 1 and n:
            raw = zlib.decompress(raw)
        parts.append(raw)
    if dt not in DTYPES:
        fail("%s: unknown dtype %d" % (key, dt))
    img = np.frombuffer(parts[0], dtype=DTYPES[dt])
    if img.size != c * h * w:
        fail("%s: image payload has %d samples, want %d" % (key, img.size, c * h * w))
    lab = None
    if lk in (1, 2):
        lab = np.frombuffer(parts[1], dtype=np.uint8 if lk == 1 else np.uint16)
        if lab.size != h * w:
            fail("%s: label payload has %d samples, want %d" % (key, lab.size, h * w))
        lab = lab.reshape(h, w)
    elif lsz:
        fail("%s: label payload without a per-pixel label kind" % key)
    mask = None
    if flags & 2:
        mask = np.frombuffer(parts[2], dtype=np.uint8)
        if mask.size != h * w:
            fail("%s: mask payload has %d bytes, want %d" % (key, mask.size, h * w))
        mask = mask.reshape(h, w)
    elif msz:
        fail("%s: mask payload without flag bit1" % key)
    return dict(dtype=dt, label_kind=lk, comp=comp, flags=flags, bands=c,
                height=h, width=w, x_off=xo, y_off=yo, gt=gt, source=src,
                ignore=ign, nodata=nd, image=img.reshape(c, h, w), label=lab,
                mask=mask)


def read_stream(path):
    """-> (list of (key, record bytes), {name: (index, source text)})."""
    data = open(path, "rb").read()
    if data[:4] != b"CDPS" or struct.unpack_from("<HH", data, 4) not in ((1, 0), (2, 0)):
        fail("%s: not a version 1 or 2 record stream" % path)
    pos, recs, sources, count = 8, [], {}, None
    while pos < len(data):
        if pos + 8 > len(data):
            fail("%s: truncated frame header at byte %d" % (path, pos))
        typ, _r, nlen, blen = struct.unpack_from("<BBHI", data, pos)
        end = pos + 8 + nlen + blen
        if end + 4 > len(data):
            fail("%s: truncated frame at byte %d" % (path, pos))
        name = data[pos + 8:pos + 8 + nlen].decode()
        body = data[pos + 8 + nlen:end]
        if zlib.crc32(data[pos:end]) & 0xffffffff != struct.unpack_from("<I", data, end)[0]:
            fail("%s: frame CRC mismatch at byte %d" % (path, pos))
        pos = end + 4
        if typ == ord("S"):
            kv = dict(l.split("=", 1) for l in body.decode().splitlines())
            sources[name] = (int(kv["index"]), kv)
        elif typ == ord("R"):
            recs.append((name, body))
        elif typ == ord("E"):
            count = int(body.decode().strip().split("=")[1])
            if pos != len(data):
                fail("%s: %d bytes after the end frame" % (path, len(data) - pos))
            break
        else:
            fail("%s: unknown frame type %d" % (path, typ))
    if count is None:
        fail("%s: stream has no end frame" % path)
    if count != len(recs):
        fail("%s: end frame says %d records, stream has %d" % (path, count, len(recs)))
    return recs, sources


def read_db(path, names):
    import lmdb
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=2, subdir=True)
    tiles, meta = env.open_db(b"tiles", create=False), env.open_db(b"meta", create=False)
    recs, sources = [], {}
    with env.begin() as txn:
        for k, v in txn.cursor(db=tiles):
            key = k.decode()
            if key.rsplit("_", 2)[0] in names:
                recs.append((key, bytes(v)))
        for k, v in txn.cursor(db=meta):
            if k.startswith(b"source."):
                kv = dict(l.split("=", 1) for l in v.decode().splitlines() if "=" in l)
                sources[kv.get("name")] = (int(kv["index"]), kv)
    env.close()
    return recs, sources


def grid(length, size, stride, edge):
    """Offsets of the tiles along one axis."""
    if length < size:
        return [0] if edge == "pad" else []
    if edge == "drop":
        n = (length - size) // stride + 1
    else:
        n = -(-(length - size) // stride) + 1
    offs = [i * stride for i in range(n)]
    if edge == "shift":
        offs = [min(o, length - size) for o in offs]
    return offs


def load(path, label_path, a):
    ds = gdal.Open(path)
    bands = a.bands or list(range(1, ds.RasterCount + 1))
    b1 = ds.GetRasterBand(bands[0])
    img = np.stack([ds.GetRasterBand(b).ReadAsArray() for b in bands])
    # each band's own nodata (--nodata's on every band)
    nds = [a.nodata if a.nodata is not None else ds.GetRasterBand(b).GetNoDataValue()
           for b in bands]
    one = all(v is not None for v in nds) and len({repr(v) for v in nds}) == 1
    nd = nds[0] if one else None
    valid = np.ones(img.shape[1:], dtype=bool)
    # nodata in every band; with --standardize or bands whose nodata differ
    # in any band (its output has no nodata value: each band of a valid
    # pixel must standardize)
    anyb = a.standardize or not one
    hit = np.zeros(img.shape, dtype=bool)
    for b, v in enumerate(nds):
        if v is None:
            continue
        if np.isnan(v):
            hit[b] = np.isnan(img[b])
        elif np.issubdtype(img.dtype, np.integer):
            # as GDAL's nodata mask: out of range matches nothing, else cast
            info = np.iinfo(img.dtype)
            if info.min <= v <= info.max:
                hit[b] = img[b] == img.dtype.type(v)
        else:
            hit[b] = img[b] == img.dtype.type(v)
    if any(v is not None for v in nds):
        valid &= ~(hit.any(axis=0) if anyb else hit.all(axis=0))
    flags = b1.GetMaskFlags()
    if not flags & (gdal.GMF_ALL_VALID | gdal.GMF_NODATA):
        valid &= b1.GetMaskBand().ReadAsArray() != 0
    lab = None
    if label_path:
        lds = gdal.Open(label_path)   # keep the dataset alive while reading
        lab = lds.GetRasterBand(1).ReadAsArray()
        lds = None
    return dict(ds=ds, img=img, valid=valid, nd=nd, nds=nds, lab=lab,
                gt=ds.GetGeoTransform(), dt=GDT2CDP[b1.DataType])


def standardization(src, a):
    if a.stats:
        rows = []
        for line in open(a.stats):
            line = line.split("#")[0].split()
            if line:
                rows.append((float(line[0]), float(line[1])))
        return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    x = src["img"][:, src["valid"]].astype(np.float64)
    std = x.std(axis=1)
    return x.mean(axis=1), np.where(std > 0, std, 1.0)


def expect_tile(src, x0, y0, S, a, stdz):
    """-> (image (C,S,S), valid (S,S), label (S,S) or None)."""
    img, valid = src["img"], src["valid"]
    C, H, W = img.shape
    th, tw = min(S, H - y0), min(S, W - x0)
    t = np.zeros((C, S, S), dtype=img.dtype)
    for b, nd in enumerate(src["nds"]):
        if nd is None:
            continue
        if np.issubdtype(img.dtype, np.integer):
            info = np.iinfo(img.dtype)
            t[b] = nd if (nd == int(nd) and info.min <= nd <= info.max) else 0
        else:
            t[b] = nd
    t[:, :th, :tw] = img[:, y0:y0 + th, x0:x0 + tw]
    v = np.zeros((S, S), dtype=bool)
    v[:th, :tw] = valid[y0:y0 + th, x0:x0 + tw]
    lab = None
    if src["lab"] is not None:
        ign = a.ignore if a.ignore is not None else np.iinfo(src["lab"].dtype).max
        lab = np.full((S, S), ign, dtype=src["lab"].dtype)
        lab[:th, :tw] = src["lab"][y0:y0 + th, x0:x0 + tw]
        lab[~v] = ign
    if stdz is not None:
        mean, std = stdz
        t = (t.astype(np.float64) - mean[:, None, None]) / std[:, None, None]
        t[:, ~v] = 0
    return t, v, lab


def check(a):
    S, T = a.size, a.size - a.overlap
    names = [r.split("=", 1)[0] for r in a.raster]
    paths = dict(r.split("=", 1) for r in a.raster)
    labels = dict(l.split("=", 1) for l in (a.label or []))
    if a.stream:
        recs, sources = read_stream(a.stream)
    else:
        recs, sources = read_db(a.db, set(names))
    got = {}
    for key, body in recs:
        if key in got:
            fail("key %s appears twice" % key)
        got[key] = body
    nchecked = 0
    for idx, name in enumerate(names):
        src = load(paths[name], labels.get(name), a)
        C, H, W = src["img"].shape
        stdz = standardization(src, a) if a.standardize else None
        if name not in sources:
            fail("%s: no source description for it" % name)
        sidx, kv = sources[name]
        want = dict(width=W, height=H, bands=C,
                    dtype="f32" if a.standardize else DTNAMES[src["dt"]])
        for k, v in want.items():
            if kv.get(k) != str(v):
                fail("%s: source %s is %r, want %r" % (name, k, kv.get(k), str(v)))
        if a.stream and sidx != idx:
            fail("%s: source index %d, want %d" % (name, sidx, idx))
        rows, cols = grid(H, S, T, a.edge), grid(W, S, T, a.edge)
        rd, cd = len(str(max(len(rows) - 1, 0))), len(str(max(len(cols) - 1, 0)))
        gt = src["gt"]
        for r, y0 in enumerate(rows):
            for c, x0 in enumerate(cols):
                key = "%s_%0*d_%0*d" % (name, rd, r, cd, c)
                t, v, lab = expect_tile(src, x0, y0, S, a, stdz)
                inval = v.size - int(v.sum())
                drop = inval == v.size if a.max_nodata is None else inval / v.size > a.max_nodata
                if drop:
                    if key in got:
                        fail("%s: tile should have been dropped (%d of %d pixels invalid)"
                             % (key, inval, v.size))
                    continue
                if key not in got:
                    fail("%s: missing from the output" % key)
                rec = decode(key, got.pop(key))
                nchecked += 1
                want_dt = 6 if a.standardize else src["dt"]
                head = dict(dtype=want_dt, bands=C, height=S, width=S, x_off=x0,
                            y_off=y0, source=sidx,
                            label_kind=0 if lab is None else (1 if lab.dtype == np.uint8 else 2),
                            comp=1 if a.zlib else 0)
                for k, want in head.items():
                    if rec[k] != want:
                        fail("%s: %s is %r, want %r" % (key, k, rec[k], want))
                wgt = (gt[0] + x0 * gt[1] + y0 * gt[2], gt[1], gt[2],
                       gt[3] + x0 * gt[4] + y0 * gt[5], gt[4], gt[5])
                if not np.allclose(rec["gt"], wgt, rtol=1e-12, atol=0):
                    fail("%s: geotransform %r, want %r" % (key, rec["gt"], wgt))
                has_nd = src["nd"] is not None and not a.standardize
                if bool(rec["flags"] & 1) != has_nd:
                    fail("%s: nodata flag is %d, want %d" % (key, rec["flags"] & 1, has_nd))
                if has_nd and not (rec["nodata"] == src["nd"] or
                                   (np.isnan(rec["nodata"]) and np.isnan(src["nd"]))):
                    fail("%s: nodata %r, want %r" % (key, rec["nodata"], src["nd"]))
                if (rec["mask"] is not None) != (inval > 0):
                    fail("%s: mask present=%s with %d invalid pixels"
                         % (key, rec["mask"] is not None, inval))
                if rec["mask"] is not None and not np.array_equal(rec["mask"] != 0, v):
                    bad = np.argwhere((rec["mask"] != 0) != v)[0]
                    fail("%s: mask differs at row %d col %d" % (key, bad[0], bad[1]))
                if rec["mask"] is not None and not set(np.unique(rec["mask"])) <= {0, 255}:
                    fail("%s: mask has values other than 0 and 255" % key)
                if a.standardize:
                    ok = np.allclose(rec["image"], t, rtol=1e-5, atol=1e-5)
                else:
                    ok = np.array_equal(rec["image"], t, equal_nan=t.dtype.kind == "f")
                if not ok:
                    bad = np.argwhere(~np.isclose(rec["image"], t, equal_nan=True))[0]
                    fail("%s: pixel band %d row %d col %d is %r, want %r"
                         % (key, bad[0] + 1, bad[1], bad[2],
                            rec["image"][tuple(bad)], t[tuple(bad)]))
                if lab is not None:
                    want_ign = np.iinfo(lab.dtype).max if a.ignore is None else a.ignore
                    if rec["ignore"] != want_ign:
                        fail("%s: ignore %d, want %d" % (key, rec["ignore"], want_ign))
                    if not np.array_equal(rec["label"], lab):
                        bad = np.argwhere(rec["label"] != lab)[0]
                        fail("%s: label row %d col %d is %d, want %d"
                             % (key, bad[0], bad[1], rec["label"][tuple(bad)], lab[tuple(bad)]))
    if got:
        fail("unexpected keys: %s" % ", ".join(sorted(got)[:5]))
    return nchecked


def main():
    ap = argparse.ArgumentParser(prog="crosscheck.py")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--stream")
    src.add_argument("--db")
    ap.add_argument("--raster", action="append", required=True)
    ap.add_argument("--label", action="append")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--overlap", type=int, default=0)
    ap.add_argument("--edge", choices=["shift", "pad", "drop"], default="shift")
    ap.add_argument("--bands", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--nodata", type=float)
    ap.add_argument("--ignore", type=int)
    ap.add_argument("--max-nodata", type=float)
    ap.add_argument("--standardize", action="store_true")
    ap.add_argument("--stats")
    ap.add_argument("--zlib", action="store_true")
    a = ap.parse_args()
    try:
        n = check(a)
    except Mismatch as e:
        print("crosscheck.py: %s" % e, file=sys.stderr)
        return 1
    if n == 0:
        print("crosscheck.py: no tiles to check", file=sys.stderr)
        return 1
    print("crosscheck.py: %d tiles match" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
