"""record.py: the tile record of lib/cdp_record.h and cdp-record(5).

decode() validates a record as cdp_record_decode() does, in the same order
(so the same bytes give the same error code): the magic, the version, the
length, the header size, the fields, the reserved and unused fields, every
stored size against the length, the exact total length, the CRC (zlib's
crc32, the C code's polynomial), then each compressed payload inflating from
exactly its stored bytes to exactly its raw size.

Uncompressed payloads come back as NumPy arrays that view the buffer given
(no copy): from an LMDB memory map they are valid only as long as the read
transaction that produced the buffer (see Pool.view()). Labels and masks
may then be unaligned, which NumPy handles.
"""
import struct
import zlib

import numpy as np

from .errors import CdpError

HDR = 160
MAXDIM = 65536
DEFLATE_MAX_RATIO = 1032
HEADER = struct.Struct("<4sHHBBBBIIIqq6dIIIId3Q24s")
MAXLABEL = 65536
assert HEADER.size == HDR

DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 3: np.dtype("<i2"), 4: np.dtype("<u4"),
          5: np.dtype("<i4"), 6: np.dtype("<f4"), 7: np.dtype("<f8")}
DTYPE_NAMES = {1: "u8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "f64"}
DTYPE_CODES = {v: k for k, v in DTYPE_NAMES.items()}
LABEL_NAMES = {0: "none", 1: "u8", 2: "u16", 3: "class", 4: "f32", 5: "multi"}
LABEL_NONE, LABEL_U8, LABEL_U16, LABEL_CLASS, LABEL_F32, LABEL_MULTI = 0, 1, 2, 3, 4, 5
VERSION1, VERSION = 1, 2       # version 2 exactly for label kinds 4 and 5


def version_of(kind):
    return VERSION if kind in (LABEL_F32, LABEL_MULTI) else VERSION1
COMP_NONE, COMP_ZLIB = 0, 1
REC_NODATA, REC_MASK = 1, 2


class Record:
    """A decoded record: the header's fields and its payloads.

    image (C, H, W) of the record's dtype; label (H, W) u8/u16 for label
    kinds 1 and 2, (T, H, W) f32 targets for kind 4 (NaN: no target), (K,)
    u8 multi-hot for kind 5, else None (class_id holds a scalar class);
    label_len is T or K (else 0); mask (H, W) u8 (255 valid, 0 nodata or
    padding) or None.
    """

    __slots__ = ("dtype", "label_kind", "compression", "flags", "bands", "height", "width",
                 "x_off", "y_off", "geotransform", "source", "label_ignore", "class_id",
                 "label_len", "nodata", "image", "label", "mask")

    @property
    def has_nodata(self):
        return bool(self.flags & REC_NODATA)

    def __repr__(self):
        return "<Record %s %dx%dx%d label=%s%s>" % (
            DTYPE_NAMES[self.dtype], self.bands, self.height, self.width,
            LABEL_NAMES[self.label_kind], " zlib" if self.compression else "")


def _fail(code, subject):
    if isinstance(subject, tuple):      # (pool path, key)
        raise CdpError(code, subject[0], record=subject[1])
    raise CdpError(code, subject)


def peek(buf, subject="record"):
    """The header of buf, checked as cdp_record_peek() checks it (everything
    but the CRC and inflation). Returns (Record without payloads, raw sizes,
    stored sizes)."""
    n = len(buf)
    if n < 4:
        _fail("ETRUNC", subject)
    if bytes(buf[0:4]) != b"CDPR":
        _fail("EMAGIC", subject)
    if n < 6:
        _fail("ETRUNC", subject)
    version = struct.unpack_from("<H", buf, 4)[0]
    if version not in (VERSION1, VERSION):
        _fail("EVERSION", subject)
    if n < HDR + 4:
        _fail("ETRUNC", subject)
    (_, _, hsize, dtype, kind, comp, flags, c, h, w, xoff, yoff, g0, g1, g2, g3, g4, g5,
     source, ignore, class_id, lablen, nodata, s_img, s_lab, s_msk, res2) = HEADER.unpack_from(buf)
    if hsize != HDR:
        _fail("EFORMAT", subject)
    # check_fields(), then the raw sizes they imply
    if (dtype not in DTYPES or kind > LABEL_MULTI or comp > COMP_ZLIB
            or flags & ~(REC_NODATA | REC_MASK)
            or not (1 <= c <= MAXDIM and 1 <= h <= MAXDIM and 1 <= w <= MAXDIM)
            or (class_id != 0 and kind != LABEL_CLASS)
            or (not 1 <= lablen <= MAXLABEL if kind in (LABEL_F32, LABEL_MULTI) else lablen != 0)):
        _fail("EFORMAT", subject)
    hw = h * w
    lab = {LABEL_U8: hw, LABEL_U16: 2 * hw, LABEL_F32: 4 * hw * lablen, LABEL_MULTI: lablen}
    raw = (hw * c * DTYPES[dtype].itemsize, lab.get(kind, 0), hw if flags & REC_MASK else 0)
    if version != version_of(kind) or res2 != bytes(24):
        _fail("EFORMAT", subject)
    if not flags & REC_NODATA and bytes(buf[104:112]) != bytes(8):
        _fail("EFORMAT", subject)
    if kind not in (LABEL_U8, LABEL_U16) and ignore != 0:
        _fail("EFORMAT", subject)
    stored = (s_img, s_lab, s_msk)
    for r, s in zip(raw, stored):
        if s > n:
            _fail("ETRUNC", subject)
        if comp == COMP_NONE:
            if s != r:
                _fail("EFORMAT", subject)
        elif (s == 0) != (r == 0) or r // DEFLATE_MAX_RATIO > s:
            _fail("EFORMAT", subject)
    total = HDR + s_img + s_lab + s_msk + 4
    if total > n:
        _fail("ETRUNC", subject)
    if total < n:
        _fail("EFORMAT", subject)
    rec = Record()
    rec.dtype, rec.label_kind, rec.compression, rec.flags = dtype, kind, comp, flags
    rec.bands, rec.height, rec.width = c, h, w
    rec.x_off, rec.y_off = xoff, yoff
    rec.geotransform = (g0, g1, g2, g3, g4, g5)
    rec.source, rec.label_ignore, rec.class_id = source, ignore, class_id
    rec.label_len = lablen
    rec.nodata = nodata
    rec.image = rec.label = rec.mask = None
    return rec, raw, stored


def _inflate(part, raw, subject):
    d = zlib.decompressobj()
    try:
        out = d.decompress(part, raw + 1)
    except zlib.error:
        _fail("EZLIB", subject)
    if len(out) != raw or not d.eof or d.unused_data or d.unconsumed_tail:
        _fail("EZLIB", subject)
    return out


def decode(buf, subject="record", copy=True):
    """Validates and decodes one record (bytes, or a memoryview into a map).

    With copy=False the arrays of an uncompressed record view buf; with
    copy=True (the default) they own their memory and are writable.
    Raises CdpError with the code cdp_record_decode() returns; subject
    names the record in it (a (pool, key) pair: "'pool': record 'key'").
    """
    buf = memoryview(buf).cast("B")
    rec, raw, stored = peek(buf, subject)
    n = len(buf)
    if zlib.crc32(buf[:n - 4]) != struct.unpack_from("<I", buf, n - 4)[0]:
        _fail("ECRC", subject)
    parts, pos = [], HDR
    for r, s in zip(raw, stored):
        part = None
        if r:
            part = buf[pos:pos + s]
            if rec.compression == COMP_ZLIB:
                part = _inflate(part, r, subject)
        parts.append(part)
        pos += s
    h, w = rec.height, rec.width

    def arr(part, dt, shape):
        a = np.frombuffer(part, dtype=dt).reshape(shape)
        return a.copy() if copy else a

    rec.image = arr(parts[0], DTYPES[rec.dtype], (rec.bands, h, w))
    if rec.label_kind in (LABEL_U8, LABEL_U16):
        rec.label = arr(parts[1], "<u1" if rec.label_kind == LABEL_U8 else "<u2", (h, w))
    elif rec.label_kind == LABEL_F32:
        rec.label = arr(parts[1], "<f4", (rec.label_len, h, w))
    elif rec.label_kind == LABEL_MULTI:
        rec.label = arr(parts[1], np.uint8, (rec.label_len,))
        if (rec.label > 1).any():
            _fail("EFORMAT", subject)
    if rec.flags & REC_MASK:
        rec.mask = arr(parts[2], np.uint8, (h, w))
    return rec
