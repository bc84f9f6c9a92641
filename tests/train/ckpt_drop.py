#!/usr/bin/env python3
"""ckpt_drop.py IN OUT TAG: copy checkpoint IN to OUT without its chunk TAG
("RUN "; padded to 4 characters), the chunk count, file size and CRC made
right, so OUT is IN as a cdpool from before that chunk wrote it (a test
compares two runs' models where only that chunk may differ, or resumes
from an older file). The layout is cdp-checkpoint(5)'s: a 24-byte header
(magic, version, chunk count, size), chunks of tag, u32 flags, u64 length
and payload, a CRC-32 of every byte before it."""
import struct
import sys
import zlib

src, dst, tag = sys.argv[1], sys.argv[2], sys.argv[3].ljust(4).encode()
b = open(src, "rb").read()
o, kept = 24, []
for _ in range(struct.unpack_from("<I", b, 12)[0]):
    t, n = b[o:o + 4], struct.unpack_from("<Q", b, o + 8)[0]
    if t != tag:
        kept.append(b[o:o + 16 + n])
    o += 16 + n
body = b"".join(kept)
head = b[:12] + struct.pack("<IQ", len(kept), 24 + len(body) + 4)
open(dst, "wb").write(head + body + struct.pack("<I", zlib.crc32(head + body)))
