"""keys.py: the pointer file of lib/cdp_ptrfile.h and cdp-keys(5).

read_keys() validates a whole file as cdp_ptrfile_read() does, naming the
first offending line (the header is line 1): the magic, then the version,
then the header's fields, then each key line (1 to 255 bytes, no space,
control byte or DEL), the number of lines against count, the final line
feed, the CRC-32 (zlib's) of the key lines, and that no key appears twice
unless the header (version 2) says repeats=1, as an oversampled list of
cdp-keyshuffle --oversample does. Version 1 files are read as before.

split_key() reads a key by the grammar of lib/cdp_key.h (cdp-keys(5), KEY
GRAMMAR): [CLASS/]NAME_ROW_COL tiles and [CLASS/]NAME chips.
"""
import os
import re
import zlib

from .errors import CdpError

MAGIC = b"#cdpool-keys"
VERSION = 2          # the newest read; version 1 has no repeats= field
KEY_MAX = 255
# numbers as cdp_ptrfile.c's parse_dec: decimal, no sign, no leading zero
_DEC = rb"(0|[1-9][0-9]{0,19})"
_HEADER = re.compile(rb" uuid=([0-9a-f]{32}) seed=" + _DEC + rb" count=" + _DEC +
                     rb" crc32=([0-9a-f]{8})")
_HEADER2 = re.compile(rb" uuid=([0-9a-f]{32}) seed=" + _DEC + rb" count=" + _DEC +
                      rb" repeats=([01]) crc32=([0-9a-f]{8})")
_BADKEY = re.compile(rb"[\x00-\x20\x7f]")
_NAME = r"[A-Za-z0-9._+-]{1,200}"       # CDP_NAME_MAX bytes of the NAME alphabet
_NAME_RE = re.compile(_NAME)
_TILE = re.compile(r"(%s)_([0-9]{1,20})_([0-9]{1,20})" % _NAME)


def split_key(key):
    """(scene, row, col) of a pool key: row and col are None for a chip,
    whose scene is the whole key. Raises CdpError("EKEY") otherwise.
    cdp_key_scene()'s grammar: the key is below CDP_KEY_MAX (256) bytes,
    CLASS and NAME are 1 to 200 bytes each (the limit is NAME's, not the
    body's: cdp-tile writes NAME_ROW_COL with a NAME of 200 bytes), and a
    body that is no NAME_ROW_COL is a chip only when it is one NAME."""
    b = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
    if not 0 < len(b) < KEY_MAX + 1:
        raise CdpError("EKEY", key)
    try:
        k = b.decode("ascii")        # the NAME alphabet is ASCII
    except UnicodeDecodeError:
        raise CdpError("EKEY", key) from None
    pre, slash, body = k.rpartition("/")
    if slash and (not _NAME_RE.fullmatch(pre)):
        raise CdpError("EKEY", key)
    pre += slash
    t = _TILE.fullmatch(body)
    if t and int(t.group(2)) < 1 << 64 and int(t.group(3)) < 1 << 64:
        return pre + t.group(1), int(t.group(2)), int(t.group(3))
    if _NAME_RE.fullmatch(body):
        return k, None, None
    raise CdpError("EKEY", key)


class KeyList(list):
    """The keys (str) in file order, with the header's uuid, seed, repeats
    (True: a key may be on several lines, an oversampled list) and path."""

    def __init__(self, keys, uuid, seed, path, repeats=False):
        super().__init__(keys)
        self.uuid, self.seed, self.path, self.repeats = uuid, seed, path, repeats

    def __repr__(self):
        return "<cdpool.KeyList %r %d keys uuid=%s seed=%d%s>" % (
            self.path, len(self), self.uuid, self.seed, " repeats" if self.repeats else "")


def _header(h, path):
    if not h.startswith(MAGIC):
        raise CdpError("EMAGIC", path, line=1)
    rest = h[len(MAGIC):]
    if not rest:
        raise CdpError("ESYNTAX", path, line=1)
    if rest[:1] != b" ":
        raise CdpError("EMAGIC", path, line=1)
    m = re.match(rb" ([0-9]+)", rest)
    if (not m or len(m.group(1)) > 20 or int(m.group(1)) >= 1 << 64
            or (len(m.group(1)) > 1 and m.group(1)[:1] == b"0")):
        raise CdpError("ESYNTAX", path, line=1)
    version = int(m.group(1))
    if not 1 <= version <= VERSION:
        raise CdpError("EVERSION", path, line=1)
    f = (_HEADER if version == 1 else _HEADER2).fullmatch(rest, m.end())
    if not f or int(f.group(2)) >= 1 << 64 or int(f.group(3)) >= 1 << 64:
        raise CdpError("ESYNTAX", path, line=1)
    repeats = version >= 2 and f.group(4) == b"1"
    return (f.group(1).decode(), int(f.group(2)), int(f.group(3)), int(f.group(f.lastindex), 16),
            repeats)


def read_keys(path, pool=None):
    """The keys of a pointer file, checked; with pool (a Pool), also that
    the file was made for it (the uuids agree: "mismatch" otherwise)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    nl = data.find(b"\n")
    hl = nl if nl >= 0 else len(data)
    uuid, seed, count, crc, repeats = _header(data[:hl], path)
    if nl < 0:
        if count > 0:
            raise CdpError("ETRUNC", path, line=2)
        raise CdpError("EFORMAT", path, line=1)
    body = data[hl + 1:]
    lines = body.split(b"\n")
    last = lines.pop()             # b"" when the body ends in a line feed
    for i, k in enumerate(lines):
        if i >= count:
            raise CdpError("EFORMAT", path, line=i + 2)
        if not k or len(k) > KEY_MAX or _BADKEY.search(k):
            # cdp_ptrfile.c's key_why, in its words
            why = ("empty key line" if not k else "key longer than 255 bytes"
                   if len(k) > KEY_MAX else "key holds a space or a control byte")
            raise CdpError("ESYNTAX", path, line=i + 2, message=why)
    n = len(lines)
    if last:
        if n >= count:
            raise CdpError("EFORMAT", path, line=n + 2)
        raise CdpError("ETRUNC" if n + 1 < count else "EFORMAT", path, line=n + 2)
    if n < count:
        raise CdpError("ETRUNC", path, line=n + 2)
    if zlib.crc32(body) != crc:
        raise CdpError("ECRC", path)
    keys = [k.decode("utf-8", "surrogateescape") for k in lines]
    seen = {}
    for i, k in enumerate(() if repeats else keys):
        if k in seen:
            # as cdp-train words it (lib/cdp_ptrfile.c, both lines 1-based)
            raise CdpError("EDUPKEY", path, line=i + 2,
                           message="key '%s' on lines %d and %d" % (k, seen[k] + 2, i + 2))
        seen[k] = i
    if pool is not None and pool.uuid != uuid:
        raise CdpError("EMISMATCH", path, message="made for pool %s, '%s' is %s"
                       % (uuid, pool.path, pool.uuid))
    return KeyList(keys, uuid, seed, path, repeats)
