#!/usr/bin/env python3
"""ckpt_nan.py IN OUT [CHUNK [VALUE]]: copy checkpoint IN to OUT with the
first value of CHUNK (PARM, the default, BUFS or OPTM) replaced by VALUE
(nan, the default, or inf) and the CRC recomputed, so the file is intact
but holds a non-finite number; prints the tensor's name (PARM, BUFS) or
the chunk. The layout is cdp-checkpoint(5)'s: a 24-byte header, chunks of
tag, u32 0, u64 length and payload, a CRC-32 of every byte before it."""
import struct
import sys
import zlib

src, dst = sys.argv[1], sys.argv[2]
chunk = (sys.argv[3] if len(sys.argv) > 3 else "PARM").ljust(4).encode()
value = float(sys.argv[4] if len(sys.argv) > 4 else "nan")
b = bytearray(open(src, "rb").read())
pos, nchunks = 24, struct.unpack_from("<I", b, 12)[0]
for _ in range(nchunks):
    tag, length = bytes(b[pos:pos + 4]), struct.unpack_from("<Q", b, pos + 8)[0]
    pos += 16
    if tag == chunk:
        break
    pos += length
else:
    sys.exit("ckpt_nan.py: no chunk %r" % chunk)
if chunk in (b"PARM", b"BUFS"):
    p = pos + 16                     # count, 0, total
    n = struct.unpack_from("<I", b, p)[0]
    name = b[p + 4:p + 4 + n].decode()
    p += 4 + n
    nd = struct.unpack_from("<I", b, p)[0]
    p += 4 + 4 * nd                  # the first float of the first tensor
elif chunk == b"OPTM":
    p = pos + 4 * 4 + 10 * 4 + 4 * 8 + 16  # settings, steps, blocks, 0, count
    name = "OPTM"
else:
    sys.exit("ckpt_nan.py: cannot patch %r" % chunk)
struct.pack_into("<f", b, p, value)
struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])) & 0xffffffff)
open(dst, "wb").write(b)
print(name)
