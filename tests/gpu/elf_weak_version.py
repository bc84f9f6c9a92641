"""elf_weak_version.py VERSION FILE: lets a shared library load where the C
library lacks symbol version VERSION (e.g. GLIBC_2.36 on glibc 2.35).

scripts/device-deps.sh carries Debian 12's libevent to GPU machines; its only
GLIBC_2.36 symbols are arc4random and arc4random_buf. In FILE (an ELF64
little-endian shared object, patched in place) this marks the version
requirement VERSION weak (VER_FLG_WEAK: the loader no longer refuses a C
library without it) and makes the symbols that asked for it unversioned
(versym 1), so they bind to whichever object defines them: the C library
when it has them, else tests/gpu/arc4random.c preloaded by run-device.sh.
Prints the symbols it changed; exits 1 when FILE does not require VERSION.
"""
import struct
import sys

SHT_DYNSYM, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 11, 0x6FFFFFFE, 0x6FFFFFFF
VER_FLG_WEAK = 2


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: elf_weak_version.py VERSION FILE")
    want, path = sys.argv[1].encode(), sys.argv[2]
    with open(path, "rb") as f:
        b = bytearray(f.read())
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        sys.exit("%s: not a little-endian ELF64 file" % path)
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]

    def cstr(sec, off):
        start = secs[sec][4] + off
        return bytes(b[start:b.index(b"\0", start)])

    verneed = [s for s in secs if s[1] == SHT_GNU_VERNEED]
    versym = [s for s in secs if s[1] == SHT_GNU_VERSYM]
    dynsym = [s for s in secs if s[1] == SHT_DYNSYM]
    if len(verneed) != 1 or len(versym) != 1 or len(dynsym) != 1:
        sys.exit("%s: no single .gnu.version_r / .gnu.version / .dynsym" % path)
    vn, strsec = verneed[0][4], verneed[0][6]
    index = None
    while True:
        _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", b, vn)
        a = vn + aux
        for _ in range(cnt):
            _, flags, other, name, anext = struct.unpack_from("<IHHII", b, a)
            if cstr(strsec, name) == want:
                struct.pack_into("<H", b, a + 4, flags | VER_FLG_WEAK)
                index = other
            a += anext
        if not nxt:
            break
        vn += nxt
    if index is None:
        sys.exit("%s: does not require %s" % (path, want.decode()))
    vs, ds = versym[0], dynsym[0]
    changed = []
    for i in range(ds[5] // ds[9]):
        at = vs[4] + 2 * i
        if struct.unpack_from("<H", b, at)[0] & 0x7FFF == index:
            struct.pack_into("<H", b, at, 1)
            name, = struct.unpack_from("<I", b, ds[4] + i * ds[9])
            changed.append(cstr(ds[6], name).decode())
    with open(path, "wb") as f:
        f.write(b)
    print("%s: %s weak, unversioned: %s" % (path, want.decode(), " ".join(changed)))


if __name__ == "__main__":
    main()
