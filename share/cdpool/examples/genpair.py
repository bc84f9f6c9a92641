#!/usr/bin/python3
"""genpair.py: a generated pair of dates for change detection with cdpool.

Writes two RGB uint8 GeoTIFFs of the same place (UTM 33N, EPSG:32633, 1 m
pixels) and the change mask between them: date 0 is a smooth, textured
ground with some buildings (roof-coloured rectangles) already standing;
date 1 is the same ground under other light (a gain, an offset and fresh
noise) with the old buildings still there and new ones built, and the mask
(uint8, 1 where a new building stands, else 0, on date 0's grid) marks the
new ones. With --warp, date 1 is written on another grid (a finer pixel,
shifted by a fraction of one), so cdp-tile --time warps it onto date 0's.
Every random choice comes from --seed; needs only numpy and GDAL.

    genpair.py --size 512 --seed 1 a.tif b.tif change.tif
"""
import argparse
import os
import sys

import numpy as np
from osgeo import gdal, osr

PROG = os.path.basename(sys.argv[0])
ROOFS = np.array([(150, 70, 50), (110, 50, 40), (70, 70, 75), (170, 170, 165),
                  (100, 80, 60)], np.float64)


def smooth(rng, h, w, cell):
    """Value noise: a coarse random grid upsampled bilinearly, (h, w) in [0, 1]."""
    gh, gw = h // cell + 2, w // cell + 2
    g = rng.random((gh, gw))
    y = np.arange(h) / cell
    x = np.arange(w) / cell
    y0, x0 = y.astype(int), x.astype(int)
    fy, fx = (y - y0)[:, None], (x - x0)[None, :]
    a, b = g[y0][:, x0], g[y0][:, x0 + 1]
    c, d = g[y0 + 1][:, x0], g[y0 + 1][:, x0 + 1]
    return (1 - fy) * ((1 - fx) * a + fx * b) + fy * ((1 - fx) * c + fx * d)


def buildings(rng, img, mask, n, size, taken):
    """Draws n rectangles of size[0]..size[1] pixels per side that overlap no
    earlier one (taken, dilated by 2), marking them in mask when given."""
    h, w = taken.shape
    for _ in range(n * 20):
        if n == 0:
            break
        bh, bw = rng.integers(size[0], size[1] + 1, 2)
        y, x = rng.integers(0, h - bh), rng.integers(0, w - bw)
        if taken[max(y - 2, 0):y + bh + 2, max(x - 2, 0):x + bw + 2].any():
            continue
        taken[y:y + bh, x:x + bw] = True
        img[:, y:y + bh, x:x + bw] = ROOFS[rng.integers(len(ROOFS))][:, None, None]
        if mask is not None:
            mask[y:y + bh, x:x + bw] = 1
        n -= 1


def write(path, a, gt, wkt):
    d = gdal.GetDriverByName("GTiff").Create(path, a.shape[2], a.shape[1], a.shape[0],
                                             gdal.GDT_Byte)
    d.SetGeoTransform(gt)
    d.SetProjection(wkt)
    for b in range(a.shape[0]):
        d.GetRasterBand(b + 1).WriteArray(a[b])
    d.FlushCache()


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("date0")
    ap.add_argument("date1")
    ap.add_argument("change")
    ap.add_argument("--size", type=int, default=512, help="side in pixels (64..8192)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--origin", default="500000,5800000", help="upper-left X,Y in metres")
    ap.add_argument("--old", type=int, default=None, help="buildings on both dates")
    ap.add_argument("--new", type=int, default=None, help="buildings built between them")
    ap.add_argument("--warp", action="store_true", help="date 1 on another grid")
    o = ap.parse_args()
    if not 64 <= o.size <= 8192:
        sys.exit("%s: --size %d: want 64 to 8192" % (PROG, o.size))
    try:
        x0, y0 = (float(v) for v in o.origin.split(","))
    except ValueError:
        sys.exit("%s: --origin '%s': want X,Y" % (PROG, o.origin))
    gdal.UseExceptions()
    rng = np.random.default_rng(o.seed)
    n = o.size
    per = n * n / 4096.0
    old = int(per * 1.5) if o.old is None else o.old
    new = int(per * 1.5) if o.new is None else o.new
    ground = 60 + 50 * smooth(rng, n, n, 32) + 15 * smooth(rng, n, n, 6)
    tint = np.array([1.0, 1.15, 0.8])[:, None, None]
    a = ground[None] * tint
    taken = np.zeros((n, n), bool)
    buildings(rng, a, None, old, (6, 14), taken)
    b = a.copy()
    change = np.zeros((n, n), np.uint8)
    buildings(rng, b, change, new, (6, 14), taken)
    a = a + rng.normal(0, 4, a.shape)
    b = 1.1 * b + 8 + rng.normal(0, 4, b.shape)
    s = osr.SpatialReference()
    s.ImportFromEPSG(32633)
    wkt = s.ExportToWkt()
    gt = (x0, 1.0, 0.0, y0, 0.0, -1.0)
    write(o.date0, np.clip(a, 0, 255).round().astype(np.uint8), gt, wkt)
    write(o.change, change[None], gt, wkt)
    b = np.clip(b, 0, 255).round().astype(np.uint8)
    if not o.warp:
        write(o.date1, b, gt, wkt)
        return
    mem = gdal.GetDriverByName("MEM").Create("", n, n, 3, gdal.GDT_Byte)
    mem.SetGeoTransform(gt)
    mem.SetProjection(wkt)
    for k in range(3):
        mem.GetRasterBand(k + 1).WriteArray(b[k])
    gdal.Warp(o.date1, mem, xRes=0.8, yRes=0.8, resampleAlg="cubic",
              outputBounds=(x0 - 0.3, y0 - n + 0.2, x0 + n - 0.3, y0 + 0.2))


if __name__ == "__main__":
    main()
