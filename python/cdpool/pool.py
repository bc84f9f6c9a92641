"""pool.py: a cdpool pool (lib/cdp_pool.h, cdp-pool(5)) read from Python.

Pool(path) opens the LMDB environment read-only, after the checks of
cdp_pool_open(): a directory with a data.mdb that holds every page its
newest meta page counts (a truncated file would be mapped and fault,
SIGBUS, on the first read past its end), and loads its meta as
cdp_pool_info_load() does: every value's CRC line, the format name and
version, the uuid, the count against the tiles database's entries, the
shape, the statistics (refused when stale) and, beyond the C summary, the
class histogram and the sources. pool[key] decodes and checks one record
(record.py) and returns copies; pool.view() is the zero-copy form.

Processes. An LMDB environment must not be used across a fork, nor opened
twice in one process: a Pool opens its environment in the process that
first needs it, shared with every other Pool of the same directory there,
and again in any child that touches it afterwards (with py-lmdb 2 and
later after closing the parent's handle without ending any of the
parent's transactions, before that leaving it alone: _drop_inherited), so
a Pool can be handed to DataLoader workers, and it pickles without its
handle for spawned ones. Opening reclaims the reader slots of processes
that died in a read (mdb_reader_check).
The environment is closed when the last Pool of this process using it is
closed or garbage-collected. A Pool opened after the pool was rebuilt at
the same path (another data.mdb: another device and inode) gets a new
environment, never the one of the replaced pool, which Pools opened
before keep until they close. A Pool that opens the environment again (in
a worker, after close()) refuses a directory that now holds another pool
(another uuid): CdpError EMISMATCH, "rebuilt or replaced since it was
opened".
As with any LMDB reader, a process must not open and close the pool's
lock.mdb by other means (copying the directory, say) while it has the pool
open: that drops the process's lock on it, and other processes would then
reclaim its reader slots.
"""
import contextlib
import errno
import math
import os
import re
import struct
import weakref
import zlib

import numpy as np

from .errors import PHRASES, CdpError
from .keys import split_key
from .record import (DTYPE_CODES, DTYPE_NAMES, DTYPES, LABEL_CLASS, LABEL_NAMES, LABEL_U8,
                     LABEL_U16, decode)

FORMAT = "cdpool-pool"
VERSION = 2             # 2: float stats as scaled mean and M2 (version 1 sums still read)
CLASS_MAX = 65536
_envs = {}              # realpath -> this process's environment, its handles, its users,
                        # its data.mdb's (st_dev, st_ino)
_orphans = []           # environments inherited across a fork and not closed: never used


# LMDB's meta pages, page 0 and page 1 (liblmdb's MDB_page header, then
# MDB_meta, 64-bit builds, native byte order): mp_flags at byte 10 (with
# P_META), mm_magic at 16, mm_version at 20, the page size (the free DB's
# md_pad) at 40, mm_last_pg at 136 and mm_txnid at 144
_P_META, _MDB_MAGIC, _MDB_VERSION = 0x08, 0xBEEFC0DE, 1
_META = struct.Struct("=10xH4xII16xI92xQQ")
_META_LEN = _META.size


def _lmdb_meta(f, off):
    """(page size, last page number, txnid) of the meta page at off, or
    None when it is not one (short, no P_META flag, not LMDB's magic or
    data version)."""
    f.seek(off)
    b = f.read(_META_LEN)
    if len(b) < _META_LEN:
        return None
    flags, magic, version, psize, last, txnid = _META.unpack(b)
    if not flags & _P_META or magic != _MDB_MAGIC or version != _MDB_VERSION or psize < _META_LEN:
        return None
    return psize, last, txnid


def check_size(path):
    """cdp_lmdb_env_open's size check, before LMDB maps the file: raises
    CdpError ETRUNC "'POOL': data.mdb is truncated: N bytes, its last page
    ends at byte M" when data.mdb is shorter than the newest (higher txnid)
    of its two meta pages says, "... 0 bytes, shorter than LMDB's two meta
    pages (M bytes)" when it is empty. A file that is not LMDB's is
    left to lmdb.open to refuse."""
    with open(os.path.join(path, "data.mdb"), "rb") as f:
        m0 = _lmdb_meta(f, 0)
        m1 = m0 and _lmdb_meta(f, m0[0])
        size = os.fstat(f.fileno()).st_size
    # empty (a copy cut short): lmdb.open refuses it with EBADF, naming no
    # problem of the pool (a file cut inside the meta pages is MDB_INVALID)
    if size == 0:
        raise CdpError("ETRUNC", path, message="data.mdb is truncated: %d bytes, shorter than "
                       "LMDB's two meta pages (%d bytes)" % (size, 2 * os.sysconf("SC_PAGESIZE")))
    if not m0 or not m1:
        return
    psize, last, _ = m1 if m1[2] > m0[2] else m0
    need = (last + 1) * psize
    if size < need:
        raise CdpError("ETRUNC", path, message="data.mdb is truncated: %d bytes, its last page "
                       "ends at byte %d" % (size, need))


def _lmdb_text(path, e):
    """An lmdb.Error's text as mdb_strerror() gives it, without the prefix
    py-lmdb adds: the path ("pool: MDB_INVALID: ...") or the LMDB call
    ("mdb_dbi_open: MDB_PAGE_NOTFOUND: ...", "mdb_get: ...")."""
    text = str(e.args[0]) if e.args else str(e)
    if text.startswith(path + ": "):
        text = text[len(path) + 2:]
    return re.sub(r"^mdb_[a-z_]+: ", "", text)


# LMDB's codes that say the file is not a pool LMDB reads (its format, a
# damaged page, a missing database): every other one is said as it is
_FORMAT_CODES = ("MDB_INVALID", "MDB_CORRUPTED", "MDB_PAGE_NOTFOUND", "MDB_VERSION_MISMATCH",
                 "MDB_INCOMPATIBLE", "MDB_BAD_DBI", "MDB_NOTFOUND", "MDB_PROBLEM",
                 "MDB_BAD_CHECKSUM")


def _max_readers(path):
    """The reader slots of path's lock.mdb as LMDB sizes its table (a
    192-byte MDB_txninfo holding the first 64-byte slot, then the others),
    or None without a lock file."""
    try:
        size = os.stat(os.path.join(path, "lock.mdb")).st_size
    except OSError:
        return None
    return (size - 192) // 64 + 1 if size > 192 else None


def _lmdb_problem(path, e, text):
    """CdpError ELMDB for an LMDB error that is not about the pool's format,
    worded as what it is: a full reader table "LMDB reader table full (126
    readers): MDB_READERS_FULL: ...", any other "LMDB error: TEXT"."""
    if text.startswith("MDB_READERS_FULL") or type(e).__name__ == "ReadersFullError":
        n = _max_readers(path)
        return CdpError("ELMDB", path, message="LMDB reader table full (%s readers): %s (each "
                        "process reading the pool holds one; those of processes that died are "
                        "reclaimed when a pool is opened)" % (n if n else "all", text))
    return CdpError("ELMDB", path, message="LMDB error: %s" % text)


def _lmdb_refusal(path, e):
    """An lmdb.Error of opening or reading path's meta as the C tools word
    it: a code of the format (MDB_INVALID, MDB_CORRUPTED,
    MDB_PAGE_NOTFOUND, ...) is CdpError "'POOL': not a cdpool pool:
    MDB_INVALID: File is not an LMDB file"; a system error an OSError
    naming path; any other LMDB error (MDB_READERS_FULL, py-lmdb's own)
    CdpError ELMDB saying what it is (_lmdb_problem)."""
    text = _lmdb_text(path, e)
    if text.startswith(_FORMAT_CODES):
        return CdpError("ELMDB", path, message="not a cdpool pool: " + text)
    code = next((n for n in errno.errorcode if os.strerror(n) == text), None)
    if code is None or text.startswith("MDB_"):
        return _lmdb_problem(path, e, text)
    return OSError(code, text, path)


def _read_error(path, e):
    """An lmdb.Error of reading records or keys (a damaged page, an I/O
    error) as CdpError ELMDB "'POOL': MDB_PAGE_NOTFOUND: Requested page not
    found", what the C tools print after "cannot read "; a full reader
    table as _lmdb_problem words it."""
    text = _lmdb_text(path, e)
    if text.startswith("MDB_READERS_FULL") or type(e).__name__ == "ReadersFullError":
        return _lmdb_problem(path, e, text)
    return CdpError("ELMDB", path, message=text)


def _lmdb_version():
    """py-lmdb's version as a tuple of ints ((1, 4, 0)), (0,) unknown."""
    import lmdb
    return tuple(int(x) for x in re.findall(r"[0-9]+", lmdb.__version__)[:3]) or (0,)


def _drop_inherited(ent, path):
    """A forked child's way out of the environment it inherited (ent, the
    parent's entry of _envs).

    py-lmdb 2.0 and later refuse a second environment of the same files in
    one process ("already open in this process") and count the inherited one
    as open, so the child must close that one before it opens its own. But
    closing an environment aborts its live transactions, and aborting a read
    transaction frees its reader slot in the lock file the child shares with
    the parent: a transaction the parent had open at the fork (a pool.view()
    around a DataLoader loop) would lose its snapshot under a writer. So the
    child first lets go of each such transaction: a pool.view() holds its
    own in a box that the child empties, and py-lmdb (1.7 and later) frees a
    transaction inherited across a fork without aborting it. Only when none
    is left is the environment closed, and then LMDB (0.9.23 and later,
    ITS#8844) clears in mdb_env_close only the calling process's reader
    slots, none of the parent's; the child holds no lock on the lock file
    (fcntl locks are not inherited) until it opens its own environment,
    after this. A transaction still referenced elsewhere (one begun by
    another thread at the moment of the fork) is CdpError, not aborted.
    Older py-lmdb has no such guard: the inherited environment is then left
    alone, never closed, and kept from the garbage collector."""
    import lmdb
    env = ent["env"]
    if _lmdb_version() < (2,):
        _orphans.append(env)
        return
    if lmdb.version() < (0, 9, 23):
        _orphans.append(env)
        raise CdpError("ELMDB", path, message="py-lmdb %s over LMDB %d.%d.%d cannot open the "
                       "pool again in a forked process (LMDB before 0.9.23 clears the parent's "
                       "reader slots when the child closes the environment it inherited): use "
                       "py-lmdb's bundled LMDB, or spawn workers" % ((lmdb.__version__,)
                                                                      + lmdb.version()))
    for box in list(ent["boxes"]):
        box.txn = None
    if len(ent["txns"]):
        _orphans.append(env)
        raise CdpError("ELMDB", path, message="a read transaction of the parent (begun in "
                       "another thread as the process forked) is still open in this forked "
                       "process: py-lmdb %s cannot give it its own environment without ending "
                       "the parent's (fork the workers while no other thread reads the pool, "
                       "or spawn them)" % lmdb.__version__)
    env.close()


def _alive(txn):
    """Whether an lmdb.Transaction is still open (a finished one may be
    referenced a while: its id() then raises)."""
    import lmdb
    try:
        txn.id()
        return True
    except lmdb.Error:
        return False


def _identity(path):
    """(st_dev, st_ino) of path's data.mdb, None when it cannot be stat'ed.
    A pool rebuilt at path has another: the file of a pool whose
    environment this process holds open stays open, so no new file can
    take its inode meanwhile."""
    try:
        st = os.stat(os.path.join(path, "data.mdb"))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def meta_text(value, subject, name):
    """A meta value's text without its crc32 line, checked as meta_copy()."""
    v = bytes(value)
    body = v[:-15]
    if (len(v) < 15 or (body and body[-1:] != b"\n")
            or v[-15:] != b"crc32=%08x\n" % zlib.crc32(body)):
        raise CdpError("ECRC", subject, "meta value '%s'" % name)
    return body.decode("utf-8", "surrogateescape")


def meta_field(text, key):
    """The value of the line "key=..." of text (cdp_meta_field), or None;
    _Why "repeated key 'KEY'" when two lines have it (which would be
    meant?)."""
    got = [line[len(key) + 1:] for line in text.split("\n") if line.startswith(key + "=")]
    if len(got) > 1:
        raise _Why("repeated key '%s'" % key)
    return got[0] if got else None


def _field(text, what, key):
    """cdp_pool.c's field(): the value of key in record what's text, or
    _Why naming the record and the problem."""
    try:
        v = meta_field(text, key)
    except _Why as e:
        raise _Why("%s record: %s" % (what, e)) from None
    if v is None:
        raise _Why("%s record: no %s line" % (what, key))
    return v


def _uuid_of(meta):
    """The pool uuid of meta (a dict of meta texts), or _Why."""
    if "uuid" not in meta:
        raise _Why("not a cdpool pool: no uuid record")
    uuid = _field(meta["uuid"], "uuid", "uuid")
    if not re.fullmatch(r"[0-9a-f]{32}", uuid):
        raise _Why("uuid record: '%s' is not 32 lowercase hex digits" % uuid)
    return uuid


def _uint(v, lo=0, hi=(1 << 64) - 1):
    if v is None or not re.fullmatch(r"[0-9]+", v) or not lo <= int(v) <= hi:
        return None
    return int(v)


class _Why(Exception):
    """What is wrong with a meta text, in the words of lib/cdp_pool.c."""


_INT_RANGE = {"u8": (0, 255), "u16": (0, 65535), "i16": (-32768, 32767),
              "u32": (0, (1 << 32) - 1), "i32": (-(1 << 31), (1 << 31) - 1)}
# what strtod takes whole (decimal, hex, inf, nan), as cdp_stats_text.c's parse_dbl
_STRTOD = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|"
                     r"0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?|"
                     r"(?i:inf|infinity|nan))")


def _dbl(v):
    if not _STRTOD.fullmatch(v):
        raise ValueError("ESYNTAX")
    if v.lstrip("+-")[:2].lower() == "0x":
        neg = v.startswith("-")
        x = float.fromhex(v.lstrip("+-"))
        return -x if neg else x
    return float(v)


def _u128(v):
    if not re.fullmatch(r"[0-9]+", v):
        raise ValueError("ESYNTAX")
    if int(v) >> 128:
        raise ValueError("ERANGE")
    return int(v)


def _i128(v):
    x = -_u128(v[1:]) if v.startswith("-") else _u128(v)
    if not -(1 << 127) <= x < (1 << 127):
        raise ValueError("ERANGE")
    return x


class _IntAcc:
    """One integer band's exact sums, as lib/cdp_stats.c keeps them."""

    def __init__(self, n, s1, s2, lo, hi):
        self.n, self.s1, self.s2, self.lo, self.hi = n, s1, s2, lo, hi

    def merge(self, o):
        return _IntAcc(self.n + o.n, self.s1 + o.s1, self.s2 + o.s2,
                       min(self.lo, o.lo), max(self.hi, o.hi))

    def result(self):
        """(mean, std) from the exact sums, as cdp_stats_result."""
        from fractions import Fraction
        return (float(Fraction(self.s1, self.n)),
                math.sqrt(float(Fraction(self.n * self.s2 - self.s1 ** 2, self.n * self.n))))


def parse_stats(text):
    """A stats or srcstats.NNNNNN meta text (cdp_stats.h's text form, its
    lines in their fixed order) as cdp_stats_parse_why reads it: (dtype,
    bands, stale, band accumulators, target accumulators), an accumulator
    None for an empty band, else _IntAcc or _FloatAcc, whose result() is
    the mean and std C derives (the text's mean= and std= lines are only
    checked for syntax, as C does). Integer sums must be what samples of
    the dtype give. _Why with C's words for what is wrong."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    state = {"pos": 0, "last": "", "val": "", "pre": "band"}

    def field(name):
        state["last"] = name
        i = state["pos"]
        if i >= len(lines) or not lines[i].startswith(name + "="):
            raise _Why("no %s line where it belongs" % name)
        v = lines[i][len(name) + 1:]
        if len(v.encode("utf-8", "surrogateescape")) >= 128 or "\0" in v:
            raise _Why("%s is too long or holds a NUL" % name)
        state["pos"], state["val"] = i + 1, v
        return v

    def num(conv, name):
        v = field(name)
        try:
            return conv(v)
        except ValueError as e:
            raise _Why("%s=%s: %s" % (name, v, PHRASES[str(e) if str(e) in PHRASES
                                                        else "ESYNTAX"])) from None

    def next_is(prefix):
        return state["pos"] < len(lines) and lines[state["pos"]].startswith(prefix)

    def band(pre, k, dt):
        p = "%s.%d." % (pre, k)
        n = num(_u128, p + "count")
        if n >> 64:
            raise _Why("%scount=%s: %s" % (p, n, PHRASES["ERANGE"]))
        is_float = dt in ("f32", "f64")
        stale = False
        if not is_float:
            s1, s2 = num(_i128, p + "sum"), num(_u128, p + "sumsq")
        elif next_is(p + "exp="):
            e = num(int, p + "exp")
            if not -1020 <= e <= 1024:
                raise _Why("%sexp=%d: %s" % (p, e, PHRASES["ESYNTAX"]))
            sm, s2 = num(_dbl, p + "smean"), num(_dbl, p + "sm2")
            if not (math.isfinite(s2) and s2 >= 0 and abs(sm) <= 1):
                raise _Why("%ssm2=%s: %s" % (p, s2, PHRASES["ESYNTAX"]))
            v1 = None
        else:       # pool version 1's compensated sums
            v1 = [num(_dbl, p + x) for x in ("sum", "sumc", "sumsq", "sumsqc")]
        ext = []
        for x in ("min", "max"):
            if not n:
                v = field(p + x)
                if v not in ("nan", "-nan"):
                    raise _Why("%s %d: count 0 but %s %s" % (pre, k, x, v))
                ext.append(None)
            elif is_float:
                ext.append(num(_dbl, p + x))
            else:
                v = num(_i128, p + x)
                if not -(1 << 63) <= v < (1 << 63):
                    raise _Why("%s%s=%d: %s" % (p, x, v, PHRASES["ERANGE"]))
                ext.append(v)
        num(_dbl, p + "mean")
        num(_dbl, p + "std")
        lo, hi = ext
        if not is_float:
            return _int_consistent(pre, k, dt, n, s1, s2, lo, hi), stale
        if not n:
            return None, stale
        if not (lo <= hi and math.isfinite(lo) and math.isfinite(hi)):
            raise _Why("%s %d: min %.17g and max %.17g are not finite and ordered"
                       % (pre, k, lo, hi))
        if v1 is None:
            return _FloatAcc(n, e, sm, s2, lo, hi), stale
        f = {"x.sum": v1[0], "x.sumc": v1[1], "x.sumsq": v1[2], "x.sumsqc": v1[3],
             "x.min": lo, "x.max": hi}
        acc = _FloatAcc.from_fields(f, "x.", n)
        return acc, acc is None     # sums that overflowed: stale

    def body():
        dt = field("dtype")
        if dt not in DTYPE_CODES:
            raise _Why("dtype=%s: %s" % (dt, PHRASES["ESYNTAX"]))
        nb = field("bands")
        if not re.fullmatch(r"[0-9]+", nb) or not 1 <= int(nb) <= 65536:
            raise _Why("bands=%s: %s" % (nb, PHRASES["ESYNTAX"]))
        stale = False
        if next_is("stale="):
            if field("stale") != "1":
                raise _Why("stale=%s: %s" % (state["val"], PHRASES["ESYNTAX"]))
            stale = True
        bands, targets = [], []
        for k in range(1, int(nb) + 1):
            acc, st = band("band", k, dt)
            bands.append(acc)
            stale |= st
        if next_is("targets="):
            T = field("targets")
            if not re.fullmatch(r"[1-9][0-9]*", T) or int(T) > 65536:
                raise _Why("targets=%s: %s" % (T, PHRASES["ESYNTAX"]))
            state["pre"] = "target"
            for t in range(1, int(T) + 1):
                acc, st = band("target", t, "f64")
                targets.append(acc)
                stale |= st
        if state["pos"] != len(lines):
            raise _Why("a line after the last %s's" % state["pre"])
        return dt, int(nb), stale, bands, targets

    return body()


def _int_consistent(pre, k, dt, n, s1, s2, lo, hi):
    """lib/cdp_stats_text.c's int_consistent: the sums that samples of dt
    in [lo, hi] can give (exact, as Python's integers are)."""
    if not n:
        if s1 or s2:
            raise _Why("%s %d: count 0 but sum %d and sumsq %d" % (pre, k, s1, s2))
        return None
    if lo > hi:
        raise _Why("%s %d: min %d is above max %d" % (pre, k, lo, hi))
    tlo, thi = _INT_RANGE[dt]
    if lo < tlo or hi > thi:
        raise _Why("%s %d: min %d or max %d is outside %s's range" % (pre, k, lo, hi, dt))
    if not n * lo <= s1 <= n * hi:
        raise _Why("%s %d: sum %d is outside count * min .. count * max (%d * %d .. %d)"
                   % (pre, k, s1, n, lo, hi))
    if s2 > n * max(lo * lo, hi * hi):
        raise _Why("%s %d: sumsq %d is above count * max(min^2, max^2)" % (pre, k, s2))
    if n * s2 < s1 * s1:
        raise _Why("%s %d: sumsq %d is below sum^2 / count (a negative variance)" % (pre, k, s2))
    return _IntAcc(n, s1, s2, lo, hi)


def _band_dict(acc):
    """{count, mean, std, min, max} of an accumulator (None: empty, NaNs)."""
    if acc is None:
        nan = float("nan")
        return dict(count=0, mean=nan, std=nan, min=nan, max=nan)
    mean, std = acc.result()
    return dict(count=acc.n, mean=mean, std=std, min=float(acc.lo), max=float(acc.hi))


_SOURCE_KEYS = ("index", "name", "path", "width", "height", "bands", "dtype", "geotransform",
                "crs", "band_list", "label", "label_options", "time", "band_names")
_SOURCE_REQUIRED = ("index", "path", "width", "height", "bands", "dtype", "geotransform")


def _source_u64(k, v, lo, hi):
    """cdp_parse_u64 of source line k=v, or _Why in cdp_source_parse_why's words."""
    shown = v[:40] + ("..." if len(v) > 40 else "")
    if not re.fullmatch(r"\+?[0-9]+", v):
        raise _Why("%s=%s: %s" % (k, shown, PHRASES["ESYNTAX"]))
    if not lo <= int(v) <= hi:
        raise _Why("%s=%s: %s" % (k, shown, PHRASES["ERANGE"]))
    return int(v)


def parse_source(text):
    """A source.NNNNNN meta value (cdp-record(5), "Source text") as a dict:
    index, width, height, bands (int), geotransform (6 floats), band_list
    (list of int or None), the strings name, path, dtype, crs, and label and
    label_options (the label file and how it was rasterized; None when
    absent); for a multi-date input (cdp-tile --time) time, its dates in
    time order, and band_names, each band's "tD:bB" (lists; None when
    absent). Checked as cdp_source_parse checks it (required and repeated
    keys, numbers and their ranges, a name of at most 255 bytes, band_list
    of bands entries >= 1, class.K names for K = 0..n-1): _Why in its
    words otherwise."""
    if "\0" in text:
        raise _Why("a NUL byte in the text")
    d, classes = {}, {}
    for line in text.split("\n"):
        if not line:
            continue
        if "=" not in line:
            raise _Why("a line without '=': '%.40s'" % line)
        k, v = line.split("=", 1)
        shown = v[:40] + ("..." if len(v) > 40 else "")
        if k.startswith("class."):
            c = _source_u64(k, k[6:], 0, 65534)
            if c in classes:
                raise _Why("repeated key '%.40s'" % k)
            try:
                from .checkpoint import _class_name
                _class_name(c, v.encode("utf-8", "surrogateescape"))
                if not v or len(v.encode("utf-8", "surrogateescape")) > 255:
                    raise ValueError
            except Exception:
                raise _Why("%.40s=%s: %s" % (k, shown, PHRASES["ESYNTAX"])) from None
            classes[c] = v
            continue
        if k not in _SOURCE_KEYS:
            continue            # a later version's line
        if k in d:
            raise _Why("repeated key '%s'" % k)
        d[k] = v
        if k == "name" and len(v.encode("utf-8", "surrogateescape")) > 255:
            raise _Why("name is %d bytes, longer than the 255 a name may have"
                       % len(v.encode("utf-8", "surrogateescape")))
        if k == "dtype" and v not in DTYPE_CODES:
            raise _Why("dtype=%s: %s" % (shown, PHRASES["EFORMAT"]))
    src = {"name": d.get("name", ""), "path": d.get("path"), "dtype": d.get("dtype"),
           "crs": d.get("crs", "")}
    for k, lo, hi in (("index", 0, (1 << 32) - 1), ("width", 1, (1 << 63) - 1),
                      ("height", 1, (1 << 63) - 1), ("bands", 1, (1 << 32) - 1)):
        src[k] = _source_u64(k, d[k], lo, hi) if k in d else None
    gt = d.get("geotransform")
    if gt is not None:
        try:
            src["geotransform"] = tuple(_dbl(x) for x in gt.split(","))
        except ValueError:
            src["geotransform"] = ()
        if len(src["geotransform"]) != 6 or not all(map(math.isfinite, src["geotransform"])):
            raise _Why("geotransform=%.40s: %s" % (gt, PHRASES["ESYNTAX"]))
    bl = d.get("band_list")
    src["band_list"] = None
    if bl is not None:
        items = bl.split(",")
        if not all(re.fullmatch(r"[+-]?[0-9]+", x) for x in items):
            raise _Why("band_list=%.40s: %s" % (bl, PHRASES["ESYNTAX"]))
        if not all(1 <= int(x) <= (1 << 31) - 1 for x in items):
            raise _Why("band_list=%.40s: %s" % (bl, PHRASES["ERANGE"]))
        src["band_list"] = [int(x) for x in items]
    for k in _SOURCE_REQUIRED:
        if k not in d:
            raise _Why("no %s line" % k)
    if src["band_list"] is not None and len(src["band_list"]) != src["bands"]:
        raise _Why("band_list names %d bands, bands=%d" % (len(src["band_list"]), src["bands"]))
    for c in range(len(classes)):
        if c not in classes:
            raise _Why("class.%d missing below class.%d" % (c, max(classes)))
    src["label"] = d.get("label")
    src["label_options"] = d.get("label_options")
    for k in ("time", "band_names"):
        src[k] = d[k].split(",") if d.get(k) else None
    return src


def _ldexp(x, e):
    """math.ldexp that saturates to +-inf as C's does."""
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def _scale_exp(maxabs):
    return max(math.frexp(maxabs)[1] if maxabs > 0 else 0, -1020)


class _FloatAcc:
    """One float band's statistics as lib/cdp_stats.c keeps them: count n,
    mean / 2**e and M2 / 2**(2e) (e bounds the largest |x|), min and max,
    merged as float_merge() does so the result is cdp-train's."""

    def __init__(self, n, e, sm, s2, lo, hi):
        self.n, self.e, self.sm, self.s2, self.lo, self.hi = n, e, sm, s2, lo, hi

    @classmethod
    def from_fields(cls, f, p, n):
        """From a srcstats text's fields of band prefix p (n > 0); None for
        version 1 sums that overflowed (C reads them as stale)."""
        lo, hi = float(f[p + "min"]), float(f[p + "max"])
        if p + "exp" in f:
            return cls(n, int(f[p + "exp"]), float(f[p + "smean"]), float(f[p + "sm2"]), lo, hi)
        s = float(f[p + "sum"]) + float(f[p + "sumc"])
        q = float(f[p + "sumsq"]) + float(f[p + "sumsqc"])
        if not (math.isfinite(s) and math.isfinite(q)):
            return None
        mean = s / n
        m2 = q - s * mean
        e = _scale_exp(max(abs(lo), abs(hi)))
        return cls(n, e, min(max(_ldexp(mean, -e), -1.0), 1.0),
                   _ldexp(m2, -2 * e) if m2 > 0 else 0.0, lo, hi)

    def merge(self, o):
        e = max(self.e, o.e)
        ma, qa = _ldexp(self.sm, self.e - e), _ldexp(self.s2, 2 * (self.e - e))
        mb, qb = _ldexp(o.sm, o.e - e), _ldexp(o.s2, 2 * (o.e - e))
        na, nb = float(self.n), float(o.n)
        n = na + nb
        delta = mb - ma
        return _FloatAcc(self.n + o.n, e, ma + delta * (nb / n),
                         qa + qb + delta * delta * (na / n * nb),
                         min(self.lo, o.lo), max(self.hi, o.hi))

    def result(self):
        """(mean, std), held within [min, max] and (max - min) / 2."""
        var = self.s2 / float(self.n)
        mean = min(max(_ldexp(self.sm, self.e), self.lo), self.hi)
        std = min(_ldexp(math.sqrt(max(var, 0.0)), self.e), self.hi / 2 - self.lo / 2)
        return mean, std


class Pool:
    """A pool opened read-only.

    path      the pool directory
    lock      LMDB's lock file: None (default) uses it unless the directory
              is not writable (a read-only medium), False never (safe only
              while no writer changes the pool), True always
    readahead False (default, as cdp-train's loader: MDB_NORDAHEAD) suits
              random access to a pool larger than memory

    Attributes: path, uuid, dtype (NumPy), dtype_name ("u8", ...), bands,
    height, width, shape (C, H, W), label_kind ("none", "u8", "u16",
    "class", "multi": pool[key]'s label the multi-hot uint8 vector (K)),
    label_ignore, label_len (K of a multi-label pool), tiles (count), stats (per band dicts count,
    mean, std, min, max), mean and std (float64 arrays (C)), classes
    ({class id: count}), sources (list of dicts, parse_source()), meta
    (every meta value's text), target_stats (a pool of value labels: per
    target plane dicts count, mean, std, min, max of its finite targets;
    else []). source_stats() combines the per-source sums
    (srcstats.NNNNNN, cdp-pool(5)) of chosen sources as cdp-train does,
    source_target_stats() those of a value pool's targets. close() (or the
    Pool's garbage collection) drops its use of the LMDB environment.
    """

    def __init__(self, path, lock=None, readahead=False):
        self.path = os.fspath(path)
        if lock is None:
            lock = os.access(self.path, os.W_OK)
        self._opts = dict(lock=bool(lock), readahead=bool(readahead))
        self._env = self._pid = self._tiles = self._meta = self._ent = None
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    # -- the environment, per process --------------------------------------
    def _open(self):
        """(env, tiles, meta, identity of the data.mdb env maps)."""
        import lmdb
        if not os.path.exists(self.path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self.path)
        if not os.path.isdir(self.path):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), self.path)
        if not os.path.exists(os.path.join(self.path, "data.mdb")):
            raise CdpError("EFORMAT", self.path, message="not a cdpool pool: no data.mdb")
        check_size(self.path)
        # the identity before and after the open agree unless the pool was
        # replaced meanwhile: then open the new one (a few tries)
        for _ in range(3):
            ident = _identity(self.path)
            try:
                # no spare transaction: it would hold a reader slot across a
                # fork (py-lmdb before 1.7 kept one by default)
                env = lmdb.open(self.path, readonly=True, max_dbs=2, subdir=True,
                                lock=self._opts["lock"], readahead=self._opts["readahead"],
                                max_spare_txns=0)
            except lmdb.Error as e:
                raise _lmdb_refusal(self.path, e) from None
            if self._opts["lock"]:
                # the slots of readers that died without closing (a
                # DataLoader worker ends by os._exit) are never freed
                # otherwise: 126 of them fill the table (MDB_READERS_FULL)
                try:
                    env.reader_check()
                except lmdb.Error:
                    pass
            if _identity(self.path) == ident:
                break
            env.close()
        try:
            return (env, env.open_db(b"tiles", create=False), env.open_db(b"meta", create=False),
                    ident)
        except lmdb.NotFoundError:
            env.close()
            raise CdpError("ELMDB", self.path,
                           message="not a cdpool pool: no tiles or meta database") from None
        except lmdb.Error as e:
            env.close()
            raise _lmdb_refusal(self.path, e) from None

    @property
    def env(self):
        """The process's lmdb.Environment of the pool (opened on first use
        in this process, and shared by every Pool of the same directory:
        LMDB forbids opening one environment twice in a process)."""
        pid = os.getpid()
        if self._env is not None and self._pid == pid:
            return self._env
        self._ent = None            # a parent's, after a fork: left alone
        key = os.path.realpath(self.path)
        ent = _envs.get(key)
        if ent is not None and ent["pid"] != pid:
            del _envs[key]
            _drop_inherited(ent, self.path)
            ent = None
        if ent is not None and ent["id"] != _identity(self.path):
            # the pool was replaced: the Pools of the old one keep their
            # environment (closed with the last of them), this one opens anew
            del _envs[key]
            ent = None
        if ent is None:
            env, tiles, meta, ident = self._open()
            ent = _envs[key] = dict(env=env, pid=pid, refs=0, tiles=tiles, meta=meta, id=ident,
                                    txns=weakref.WeakSet(), boxes=set(),
                                    key=key)
        ent["refs"] += 1
        self._ent = ent
        self._env, self._pid, self._tiles, self._meta = ent["env"], pid, ent["tiles"], ent["meta"]
        if getattr(self, "uuid", None) is not None:
            self._same_pool()       # opened again: in a worker, or after close()
        return self._env

    def _same_pool(self):
        """After this Pool opened the environment again (a forked or
        spawned worker, a read after close()): CdpError EMISMATCH when the
        directory now holds another pool (another uuid) than the one the
        Pool read, after dropping its use of the environment. Reading on
        would give another pool's records under this Pool's keys, shape and
        statistics (a pool rebuilt at the path keeps the scene names)."""
        import lmdb
        ent = self._ent
        if "uuid" not in ent:       # read once per environment
            try:
                with self._begin(buffers=True) as txn:
                    v = txn.get(b"uuid", db=self._meta)
                    text = None if v is None else meta_text(v, self.path, "uuid")
            except lmdb.Error as e:
                self.close()
                raise _read_error(self.path, e) from None
            except CdpError:
                self.close()
                raise
            try:
                ent["uuid"] = _uuid_of({} if text is None else {"uuid": text})
            except _Why as e:
                self.close()
                raise CdpError("EFORMAT", self.path, message=str(e)) from None
        if ent["uuid"] != self.uuid:
            now = ent["uuid"]
            self.close()
            raise self._replaced(now)

    def _replaced(self, now):
        return CdpError("EMISMATCH", self.path, message="rebuilt or replaced since it was opened: "
                        "the directory holds pool %s, not pool %s (open it again to read the "
                        "new one)" % (now, self.uuid))

    def close(self):
        """Drops this Pool's use of the environment, which is closed when no
        Pool of this process uses it any more (as when the Pool is
        garbage-collected). A closed Pool opens it again on its next read."""
        ent, self._ent, self._env = self._ent, None, None
        if ent is not None and ent["pid"] == os.getpid():
            ent["refs"] -= 1
            if ent["refs"] <= 0:
                if _envs.get(ent["key"]) is ent:
                    del _envs[ent["key"]]
                ent["env"].close()

    def __del__(self):
        try:
            self.close()
        except Exception:       # interpreter shutdown: os or lmdb already gone
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_env"] = d["_pid"] = d["_tiles"] = d["_meta"] = d["_ent"] = None
        return d

    def _begin(self, **kw):
        """self.env.begin(**kw), remembered (weakly) as a transaction of this
        process's environment (see _drop_inherited); when the reader table
        is full (MDB_READERS_FULL), once more after reclaiming the slots of
        readers that died (mdb_reader_check); when a writer (cdp-lmdbpack
        adding to the pool) grew the map beyond this process's
        (MDB_MAP_RESIZED), once more after adopting the new size, which LMDB
        allows only with no transaction of this process open on the
        environment: with one open (a view() or a PoolDataset, of any Pool
        of the directory) the error says to close it."""
        import lmdb
        env = self.env
        try:
            txn = env.begin(**kw)
        except lmdb.ReadersFullError:
            if not self._opts["lock"]:
                raise
            env.reader_check()
            txn = env.begin(**kw)
        except lmdb.MapResizedError:
            if any(_alive(t) for t in list(self._ent["txns"])):
                # the Pools of a directory share the environment: the
                # transaction may be another Pool's, a dataset made long ago
                raise CdpError("ELMDB", self.path,
                               message="the pool grew beyond this process's map (a "
                                       "cdp-lmdbpack packed into it) while an older view() or "
                                       "PoolDataset of it in this process holds a read "
                                       "transaction, and every Pool of the directory shares "
                                       "that map: close the older view or dataset "
                                       "(ds.close()) to read on") from None
            env.set_mapsize(0)      # 0: the size the writer left in the file
            txn = env.begin(**kw)
        self._ent["txns"].add(txn)
        return txn

    # -- meta --------------------------------------------------------------
    def _read_meta(self, txn):
        """(every meta value's checked text, the tiles database's entries)
        in transaction txn."""
        meta = {}
        for k, v in txn.cursor(db=self._meta):
            name = bytes(k).decode("utf-8", "surrogateescape")
            meta[name] = meta_text(v, self.path, name)
        return meta, txn.stat(self._tiles)["entries"]

    def _adopt(self, meta, entries):
        # the same environment, the same file: its uuid cannot change, but
        # a Pool must never take another pool's meta as its own
        if getattr(self, "uuid", None) is not None:
            try:
                now = _uuid_of(meta)
            except _Why as e:
                raise CdpError("EFORMAT", self.path, message=str(e)) from None
            if now != self.uuid:
                raise self._replaced(now)
        try:
            self._check(meta, entries)
        except _Why as e:
            raise CdpError("EFORMAT", self.path, message=str(e)) from None
        self.meta = meta

    def _load(self):
        import lmdb
        try:
            with self._begin(buffers=True) as txn:
                meta, entries = self._read_meta(txn)
        except lmdb.Error as e:
            raise _lmdb_refusal(self.path, e) from None
        self._adopt(meta, entries)

    def _sync(self, txn):
        """Takes the meta as transaction txn sees it when a writer changed
        it since this Pool read it (cdp-lmdbpack appending: new count,
        statistics, sources): True then. Its keys and records in txn then
        agree with tiles, stats, sources."""
        meta, entries = self._read_meta(txn)
        if meta == self.meta and entries == self.tiles:
            return False
        self._adopt(meta, entries)
        return True

    def refresh(self):
        """Reads the pool's meta again: True when a writer changed it since
        the Pool read it (the attributes then hold the new count,
        statistics, classes and sources). keys() and PoolDataset do it
        themselves, in the transaction that reads the keys."""
        import lmdb
        try:
            with self._begin(buffers=True) as txn:
                return self._sync(txn)
        except lmdb.Error as e:
            raise _read_error(self.path, e) from None

    def _check(self, meta, entries):
        """The meta's fields as cdp_pool_info_load checks them (the
        sources as cdp_source_parse, the classes and class names as their
        C parsers); _Why in lib/cdp_pool.c's words."""
        p = self.path
        fmt = meta.get("format")
        if fmt is None:
            raise _Why("not a cdpool pool: no format record")
        if meta_field(fmt, "format") != FORMAT:
            raise _Why("not a cdpool pool: wrong format record")
        ver = _uint(meta_field(fmt, "version"), 1)
        if ver is None:
            raise _Why("not a cdpool pool: bad version in the format record")
        if ver > VERSION:
            raise CdpError("EVERSION", p, message="pool version %d is newer than this program "
                           "reads (%d)" % (ver, VERSION))
        self.uuid = _uuid_of(meta)
        # no count: a pool never filled, which must then hold no record
        self.tiles = 0
        if "count" in meta:
            v = _field(meta["count"], "count", "tiles")
            self.tiles = _uint(v)
            if self.tiles is None:
                raise _Why("count record: tiles=%s is not a number" % v)
        if self.tiles != entries and "count" not in meta:
            raise _Why("no count record but the pool holds %d tiles" % entries)
        if self.tiles != entries:
            raise _Why("count record says %d tiles but the pool holds %d" % (self.tiles, entries))
        self.sources, seen = [], set()
        for k, v in sorted(meta.items()):
            if k.startswith("source."):
                idx = int(k[7:]) if re.fullmatch(r"[0-9]+", k[7:]) else 1 << 32
                # readers look sources up as source.%06d: "source.1" would be absent
                if idx >= 1 << 32 or k != "source.%06d" % idx:
                    raise _Why("meta '%.32s': not a source name (source.NNNNNN, at least six "
                               "digits, no extra leading zero)" % k)
                try:
                    self.sources.append(parse_source(v))
                except _Why as e:
                    raise _Why("meta '%s': %s" % (k, e)) from None
                if self.sources[-1]["index"] != idx:
                    raise _Why("meta '%s': index=%d is not the index of its name"
                               % (k, self.sources[-1]["index"]))
                seen.add(idx)
        # in index order: the names sort so only up to source.999999
        self.sources.sort(key=lambda src: src["index"])
        # records index the sources 0..n-1 (check_sources of lib/cdp_pool.c)
        if self.tiles and not seen:
            raise _Why("meta 'source.000000' is missing (the pool holds %d tiles and describes "
                       "no source)" % self.tiles)
        gap = next((i for i in range(len(seen)) if i not in seen), None)
        if self.tiles and gap is not None:
            raise _Why("meta 'source.%06d' is missing (the pool describes %d sources, up to "
                       "source.%06d)" % (gap, len(seen), max(seen)))
        self.classes = {}
        for line in meta.get("classes", "").split("\n"):
            m = re.fullmatch(r"class\.([0-9]+)=([0-9]+)", line)
            if m:
                self.classes[int(m.group(1))] = int(m.group(2))
            elif line:
                raise CdpError("EFORMAT", p, "classes")
        # class_names (cdp-pool(5)): "class.K=NAME" for K = 0.., from
        # cdp-lmdbpack --classes or --folders; [] when the pool has none
        names = {}
        for line in meta.get("class_names", "").split("\n"):
            m = re.fullmatch(r"class\.([0-9]+)=(.+)", line)
            if m and int(m.group(1)) not in names:
                names[int(m.group(1))] = m.group(2)
            elif line:
                raise CdpError("EFORMAT", p, "class_names")
        if sorted(names) != list(range(len(names))):
            raise CdpError("EFORMAT", p, "class_names")
        self.class_names = [names[k] for k in range(len(names))]
        self.dtype_name = self.dtype = self.label_kind = None
        self.bands = self.height = self.width = self.label_ignore = self.label_len = 0
        self.stats = []
        self.target_stats = []
        if "shape" not in meta:
            if self.tiles:
                raise _Why("no shape record but the pool holds %d tiles" % self.tiles)
            self.mean = self.std = np.zeros(0)
            return
        sh = meta["shape"]
        dt = _field(sh, "shape", "dtype")
        if dt not in DTYPE_CODES:
            raise _Why("shape record: unknown dtype '%s'" % dt)
        vals = []
        for k, hi in (("bands", 65536), ("height", 65536), ("width", 65536),
                      ("ignore", (1 << 32) - 1)):
            v = _field(sh, "shape", k)
            vals.append(_uint(v, 0 if k == "ignore" else 1, hi))
            if vals[-1] is None:
                raise _Why("shape record: %s=%s is not a number in %d..%d"
                           % (k, v, 0 if k == "ignore" else 1, hi))
        kind = _field(sh, "shape", "label")
        if kind not in LABEL_NAMES.values():
            raise _Why("shape record: unknown label kind '%s'" % kind)
        # label_len: the target planes (f32) or classes (multi), only for them
        if kind in ("f32", "multi"):
            v = _field(sh, "shape", "label_len")
            lablen = _uint(v, 1, 65536)
            if lablen is None:
                raise _Why("shape record: label_len=%s is not a number in 1..65536" % v)
        else:
            try:
                has_len = meta_field(sh, "label_len") is not None
            except _Why:
                has_len = True
            if has_len:
                raise _Why("shape record: label_len with label=%s" % kind)
            lablen = 0
        self.label_len = lablen
        self.dtype_name, self.dtype = dt, DTYPES[DTYPE_CODES[dt]]
        self.bands, self.height, self.width, ignore = vals
        self.label_kind, self.label_ignore = kind, ignore
        # the stats are written with the records: none is damage
        if "stats" not in meta and self.tiles:
            raise _Why("no stats record but the pool holds %d tiles" % self.tiles)
        bands, targets = [None] * self.bands, []
        if "stats" in meta:
            try:
                st_dt, st_bands, stale, bands, targets = parse_stats(meta["stats"])
            except _Why as e:
                raise _Why("stats record: %s" % e) from None
            if st_dt != dt or st_bands != self.bands:
                raise _Why("stats record: dtype %s and %d bands, the shape's %s and %d"
                           % (st_dt, st_bands, dt, self.bands))
            if stale:
                raise _Why("stats record: stale (a cdp-lmdbpack --replace into the pool has "
                           "not finished: it recomputes them when it ends, and an "
                           "interrupted one when re-run with --replace)")
        if kind == "f32" and len(targets) not in (0, self.label_len):
            raise _Why("stats record: %d targets, the shape's label_len %d"
                       % (len(targets), self.label_len))
        self.stats = [_band_dict(b) for b in bands]
        self.target_stats = [_band_dict(t) for t in targets]
        self.mean = np.array([b["mean"] for b in self.stats], dtype=np.float64)
        self.std = np.array([b["std"] for b in self.stats], dtype=np.float64)

    def _source_sums(self, i, why):
        """parse_stats of source i's srcstats.NNNNNN, None when it has none;
        CdpError EFORMAT in cdp_pool_source_stats' words when it is
        malformed, inconsistent or stale."""
        name = "srcstats.%06d" % i
        text = self.meta.get(name)
        if text is None:
            return None
        try:
            got = parse_stats(text)
        except _Why as e:
            raise CdpError("EFORMAT", self.path, message=why + "meta '%s': %s" % (name, e)) \
                from None
        if got[2]:
            raise CdpError("EFORMAT", self.path, message=why + "meta '%s': stale (a "
                           "cdp-lmdbpack --replace has not finished)" % name)
        return got

    def source_stats(self, sources):
        """The mean and std (float64 arrays (C)) and counts (list) of the
        records of the pool sources `sources` (indices), from their sums:
        integers combine exactly; floats as cdp_stats_merge does, their
        scaled means and M2 (or pool version 1's compensated sums,
        converted) merged by Chan's formulas in ascending source order.
        None when a source has no sums (a pool packed before they were
        kept); CdpError EFORMAT for stale, malformed or inconsistent ones,
        in cdp-train's words ("cannot combine the training sources' sums:
        meta 'srcstats.000000': band 1: min 300 is above max 244")."""
        why = "cannot combine the training sources' sums: "
        acc = [None] * self.bands
        for i in sorted(set(sources)):
            got = self._source_sums(i, why)
            if got is None:
                return None
            if got[0] != self.dtype_name or got[1] != self.bands:
                raise CdpError("EFORMAT", self.path, message=why + "meta 'srcstats.%06d': "
                               "dtype %s and %d bands, unlike the pool's" % (i, got[0], got[1]))
            for b, part in enumerate(got[3]):
                if part is not None:
                    acc[b] = part if acc[b] is None else acc[b].merge(part)
        mean, std = np.full(self.bands, np.nan), np.full(self.bands, np.nan)
        for b in range(self.bands):
            if acc[b] is not None:
                mean[b], std[b] = acc[b].result()
        return mean, std, [0 if a is None else a.n for a in acc]

    def source_target_stats(self, sources):
        """A pool of value labels: the mean and std (float64 arrays (T)) and
        counts (list) of the finite targets of the records of the pool
        sources `sources` (indices), merged from their sums as cdp-train's
        train_std.c merges them (cdp_pool_source_stats, in ascending source
        order). CdpError EFORMAT with cdp-train's message where it refuses
        them: a source without sums, stale or inconsistent sums ("cannot
        combine the training sources' target statistics: ..."), sums of
        another number of targets than the pool's."""
        T = self.label_len if self.label_kind == "f32" else 0
        why = "cannot combine the training sources' target statistics: "
        acc, have = [], 0
        for i in sorted(set(sources)):
            got = self._source_sums(i, why)
            if got is None:
                raise CdpError("EFORMAT", self.path, message=why + "a source has none")
            n = len(got[4])
            if n and have and n != have:
                raise CdpError("EFORMAT", self.path, message=why + "meta 'srcstats.%06d': "
                               "%d targets, unlike the sources before it" % (i, n))
            if n and not have:
                have, acc = n, [None] * n
            for t, part in enumerate(got[4]):
                if part is not None:
                    acc[t] = part if acc[t] is None else acc[t].merge(part)
        if have != T:
            raise CdpError("EFORMAT", self.path, message="the sources' sums have %d targets, "
                           "the pool %d" % (have, T))
        mean, std = np.full(T, np.nan), np.full(T, np.nan)
        for t in range(T):
            if acc[t] is not None:
                mean[t], std[t] = acc[t].result()
        return mean, std, [0 if a is None else a.n for a in acc]

    @property
    def shape(self):
        return (self.bands, self.height, self.width)

    # -- records -----------------------------------------------------------
    def __len__(self):
        return self.tiles

    def keys(self):
        """Every key in the pool's (byte) order, as str (bytes that are not
        UTF-8 as surrogates, "surrogateescape"), read in one transaction
        with the meta: when a writer changed the pool since the Pool read
        its meta (cdp-lmdbpack appending), the Pool takes the new meta
        (refresh()), so that len(keys()) is tiles and the statistics and
        sources are those of these keys. Each key is checked against the
        key grammar as cdp-keyshuffle checks it: CdpError "'POOL': invalid
        key '...' in the pool" (a damaged page can make one up)."""
        import lmdb
        try:
            with self._begin() as txn:
                raw = list(txn.cursor(db=self._tiles).iternext(values=False))
                self._sync(txn)
        except lmdb.Error as e:
            raise _read_error(self.path, e) from None
        out = []
        for k in raw:
            s = k.decode("utf-8", "surrogateescape")
            try:
                split_key(s)
            except CdpError:
                # as cdp-keyshuffle prints it: 80 bytes at most, to a NUL
                shown = k[:80].split(b"\0")[0].decode("utf-8", "surrogateescape")
                raise CdpError("EKEY", self.path, message="invalid key '%s' in the pool"
                               % shown) from None
            out.append(s)
        return out

    def __iter__(self):
        """The keys, as keys() gives them (a Pool is a mapping of keys)."""
        return iter(self.keys())

    def __contains__(self, key):
        import lmdb
        k = _key(key)
        if not k:
            return False        # LMDB has no empty key (MDB_BAD_VALSIZE, not "absent")
        try:
            with self._begin(buffers=True) as txn:
                return txn.get(k, db=self._tiles) is not None
        except lmdb.Error as e:
            raise _read_error(self.path, e) from None

    def record(self, key):
        """The decoded, checked Record of key (arrays copied)."""
        with self.view() as v:
            return v.record(key, copy=True)

    def __getitem__(self, key):
        """(image (C, H, W), label) of key, copied out of the map: label is
        the (H, W) u8/u16 array, a 0-d int64 array for a scalar class, or
        None. KeyError when the pool has no such key; CdpError when its
        record is damaged."""
        r = self.record(key)
        return r.image, _label(r)

    @contextlib.contextmanager
    def view(self):
        """A read transaction whose records view the memory map (no copy):

            with pool.view() as v:
                image, label = v[key]     # valid until the with block ends

        Arrays from it must not be used after the block: the map's pages
        may then be reused by a writer or unmapped (use pool[key] or
        np.array(image) to keep them)."""
        box = self._hold()
        try:
            yield _View(self, box)
        finally:
            self._let_go(box)

    def _hold(self):
        """A read transaction of this process in a _Box, for a view() or a
        PoolDataset's snapshot: only the box holds it, so that a forked
        child can let go of it without aborting it (_drop_inherited)."""
        import lmdb
        try:
            box = _Box(self._begin(buffers=True))
        except lmdb.Error as e:
            raise _read_error(self.path, e) from None
        box.boxes = self._ent["boxes"]
        box.boxes.add(box)
        return box

    def _let_go(self, box):
        """Ends box's transaction (_hold), unless it is a parent's, which a
        forked child never aborts (box.txn is then None already)."""
        box.boxes.discard(box)
        txn, box.txn = box.txn, None
        if txn is not None:
            txn.abort()

    def __repr__(self):
        return "<cdpool.Pool %r %d tiles %s %dx%dx%d label=%s>" % (
            self.path, self.tiles, self.dtype_name, self.bands, self.height, self.width,
            self.label_kind)


def _key(key):
    """A key's bytes: a str from a pointer file holds its bytes that are not
    UTF-8 as surrogates (read_keys), which go back to those bytes. Keys are
    str or bytes: TypeError for anything else (pool[3] is no record: a
    Pool is a mapping of keys, pool.keys()[3] the fourth key)."""
    if isinstance(key, str):
        return key.encode("utf-8", "surrogateescape")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise TypeError("a pool key is str or bytes, not %s (a Pool is indexed by key: "
                    "pool[pool.keys()[i]] is the i-th record)" % type(key).__name__)


def _label(r):
    if r.label_kind == LABEL_CLASS:
        return np.array(r.class_id, dtype=np.int64)
    return r.label


class _Box:
    """A view's transaction, the only reference to it, and the set of
    boxes of its environment it is in."""
    __slots__ = ("txn", "boxes", "__weakref__")

    def __init__(self, txn):
        self.txn = txn
        self.boxes = None


class _View:
    def __init__(self, pool, box):
        self._pool, self._box = pool, box

    @property
    def _txn(self):
        txn = self._box.txn
        if txn is None:
            raise CdpError("ELMDB", self._pool.path, message="a pool.view() of the parent "
                           "process used in a forked one (open a view in the child)")
        return txn

    def raw(self, key):
        """The record's bytes as a memoryview into the map, or KeyError."""
        import lmdb
        k = _key(key)
        if not k:
            raise KeyError(key)     # no record has it; LMDB calls it a bad size
        try:
            v = self._txn.get(k, db=self._pool._tiles)
        except lmdb.Error as e:
            raise _read_error(self._pool.path, e) from None
        if v is None:
            raise KeyError(key)
        return v

    def record(self, key, copy=False):
        k = key if isinstance(key, str) else _key(key).decode("utf-8", "surrogateescape")
        r = decode(self.raw(key), (self._pool.path, k), copy=copy)
        _check_record(self._pool, k, r)
        return r

    def __getitem__(self, key):
        r = self.record(key)
        return r.image, _label(r)


def _check_record(p, key, r):
    """Record r of key against the pool's shape, as cdp-train's loader
    checks it (tools/train/loader_open.c): a record of another layout than
    the meta says would be served as another shape than pool.shape; one
    of another label ignore value would have its ignored pixels learnt.
    CdpError ESHAPE in the loader's words."""
    if (r.dtype != DTYPE_CODES.get(p.dtype_name) or (r.bands, r.height, r.width) != p.shape
            or LABEL_NAMES[r.label_kind] != p.label_kind or r.label_len != p.label_len):
        raise CdpError("ESHAPE", p.path, message="record '%s' is %s %dx%dx%d label %s, the "
                       "pool's meta says %s %dx%dx%d label %s" % (
                           key, DTYPE_NAMES[r.dtype], r.bands, r.height, r.width,
                           LABEL_NAMES[r.label_kind], p.dtype_name, p.bands, p.height, p.width,
                           p.label_kind))
    if r.label_kind in (LABEL_U8, LABEL_U16) and r.label_ignore != p.label_ignore:
        raise CdpError("ESHAPE", p.path, message="record '%s' has the label ignore value %d, "
                       "the pool's meta says %d" % (key, r.label_ignore, p.label_ignore))
