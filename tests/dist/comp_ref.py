"""tests/dist/comp_ref.py DIR ALGO COMP: holds test_comp's compressed
2-rank reduction (DIR/in.R, DIR/out.R, DIR/buckets) against a NumPy
reference of dist.h's "Compression": h = x / 2 in float32, r() the rounding
to COMP and back (fp16: NumPy's float16; bf16: to 8 significant bits by
arithmetic, ties to even, not by bit tricks), sums in float32;
  mpi:  r(r(h0) + r(h1))
  ring: in each bucket's segment s (the first ceil(n/2) values are segment
        0), sent by rank s to its owner 1 - s: r(r(h_s) + h_owner).
Both ranks must hold the reference bit for bit; it must differ from the
float32 average somewhere (and with fp16 hold inf where the sum overflows).
"""
import sys
import numpy as np

d, algo, comp = sys.argv[1:4]
x = [np.fromfile(f"{d}/in.{r}", "<f4") for r in (0, 1)]
out = [np.fromfile(f"{d}/out.{r}", "<f4") for r in (0, 1)]
buckets = [tuple(map(int, line.split())) for line in open(f"{d}/buckets")]


def r16(v):
    v = np.asarray(v, np.float32)
    if comp == "fp16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16).astype(np.float32)
    w = v.astype(np.float64)
    _, e = np.frexp(w)
    ulp = np.ldexp(1.0, np.maximum(e - 8, -133))
    q = np.rint(w / ulp) * ulp
    q = np.where(np.abs(q) >= 2.0 ** 128, np.copysign(np.inf, w), q)
    return q.astype(np.float32)


h = [xr / np.float32(2) for xr in x]
if algo == "mpi":
    ref = r16(r16(h[0]) + r16(h[1]))
else:
    ref = np.empty_like(h[0])
    for off, n in buckets:
        cut = off + n - n // 2
        for s, (a, b) in enumerate(((off, cut), (cut, off + n))):
            ref[a:b] = r16(r16(h[s][a:b]) + h[1 - s][a:b])
bad = 0
for r in (0, 1):
    diff = np.nonzero(out[r].view("<u4") != ref.view("<u4"))[0]
    for i in diff[:5]:
        print(f"rank {r} [{i}]: {out[r][i]!r}, want {ref[i]!r} (inputs {x[0][i]!r}, {x[1][i]!r})")
    bad += len(diff)
exact = h[0] + h[1]
changed = int(np.sum(ref.view("<u4") != exact.view("<u4")))
print(f"{algo} {comp}: {len(ref)} values, {bad} off the reference, {changed} differ from float32")
if comp == "fp16" and not (np.isinf(ref[0]) and np.isinf(ref[1]) and np.isinf(ref[2])):
    print("fp16: no overflow where the test puts it")
    bad += 1
sys.exit(1 if bad or changed == 0 else 0)
