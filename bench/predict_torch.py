"""bench/predict_torch.py: the PyTorch peer of bench/predict.sh.

cdp-predict's sliding-window scheme (tools/predict/predict.h), written
with PyTorch and NumPy: square windows of SIZE pixels on a grid of stride
SIZE - OVERLAP that starts OVERLAP/2 pixels before the first row and
column, pixels outside the scene from numpy's "reflect" padding, each
window's probabilities weighted by w(x) w(y) with w the sin^2 ramp over
the first and last OVERLAP pixels, the weighted sums divided by the
summed weights, then the class of highest probability (K = 1: p > 0.5).
The model is cdpool.torch_model.Deployed (the checkpoint's net with its
standardization), so the peer computes what cdp-predict computes; only
the implementation differs.

  usage: predict_torch.py CKPT SCENE.npy OUT.npy --size S --overlap O
                          --batch B --threads T [--bf16] [--channels-last]
SCENE.npy is (C, H, W) raw band values; OUT.npy gets (H, W) uint8 classes.
The peer reads and writes .npy (the bench converts the GeoTIFF beforehand,
untimed), which favours it: cdp-predict's time includes reading the
GeoTIFF and writing a tiled GeoTIFF with overviews.
Prints one line "seconds S peak_rss_kib R" on stdout.
"""
import argparse
import math
import resource
import time

import numpy as np
import torch

import cdpool
from cdpool.torch_model import Deployed


def ramp(size, overlap):
    """The per-axis window weight w (size,), as pr_weights() computes it."""
    w = np.ones(size, np.float64)
    for i in range(size):
        d = min(i, size - 1 - i)
        if d < overlap:
            w[i] = math.sin(math.pi / 2 * (d + 0.5) / overlap) ** 2
    return w.astype(np.float32)


def starts(n, size, overlap):
    """The window origins covering [0, n) from -overlap/2 at stride
    size - overlap (the nx of pr_weights())."""
    m, t = overlap // 2, size - overlap
    count = 1 if n + m <= size else 1 + (n + m - size + t - 1) // t
    return [-m + i * t for i in range(count)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("scene")
    ap.add_argument("out")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--overlap", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    ck = cdpool.load_checkpoint(a.ckpt)
    model = Deployed(ck).eval()
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    scene = np.load(a.scene)
    c, h, w = scene.shape
    s, o = a.size, a.overlap
    xs, ys = starts(w, s, o), starts(h, s, o)
    m = o // 2
    # reflect padding covering every window (numpy's "reflect", no edge repeated)
    pad = ((0, 0), (m, max(0, ys[-1] + s - h)), (m, max(0, xs[-1] + s - w)))
    padded = np.pad(scene.astype(np.float32), pad, mode="reflect")
    w1 = torch.from_numpy(ramp(s, o))
    wwin = w1[:, None] * w1[None, :]
    acc = None
    wins = [(y, x) for y in ys for x in xs]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        for i in range(0, len(wins), a.batch):
            chunk = wins[i:i + a.batch]
            xb = torch.from_numpy(np.stack([padded[:, y + m:y + m + s, x + m:x + m + s]
                                            for y, x in chunk]))
            p = model(xb.contiguous(memory_format=fmt)).float() * wwin
            if acc is None:
                acc = torch.zeros(p.shape[1], h + 2 * s, w + 2 * s)
            for (y, x), pk in zip(chunk, p):
                acc[:, y + s:y + 2 * s, x + s:x + 2 * s] += pk
    acc = acc[:, s:s + h, s:s + w]
    nx = torch.zeros(w + 2 * s)
    ny = torch.zeros(h + 2 * s)
    for x in xs:
        nx[x + s:x + 2 * s] += w1
    for y in ys:
        ny[y + s:y + 2 * s] += w1
    prob = acc / (ny[s:s + h, None] * nx[None, s:s + w])
    cls = (prob[0] > 0.5) if prob.shape[0] == 1 else prob.argmax(0)
    np.save(a.out, cls.numpy().astype(np.uint8))
    dt = time.perf_counter() - t0
    print("seconds %.3f peak_rss_kib %d" % (dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


if __name__ == "__main__":
    main()
