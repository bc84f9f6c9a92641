#!/usr/bin/python3
"""genvalue.py: a generated scene and a pixel-regression target for cdpool.

Writes a float32 GeoTIFF of 3 bands (UTM 33N, EPSG:32633, 10 m pixels):
each band a smooth random field (value noise) plus fine texture (pixel
noise), values about 0 to 1; and a float32 target raster on the same grid,
a known smooth function of the bands at each pixel:

    y = 1 + 3 b1 - 2 b2 + 4 b1 b3

so a small convolutional net can learn it exactly (R^2 near 1). With
--targets 2 the target raster has a second band, another function of
another offset and spread (about 190 to 230),

    y2 = 200 + 30 (b2 - b3) b1 + 20 b3

for training two targets at once (cdp-tile --label-bands 1,2). Every
random choice comes from --seed; needs only numpy and GDAL.

    genvalue.py --size 128 --seed 1 scene.tif scene_value.tif
"""
import argparse
import os
import sys

import numpy as np
from osgeo import gdal, osr

PROG = os.path.basename(sys.argv[0])


def smooth(rng, n, cell):
    """Value noise: a coarse random grid upsampled bilinearly, (n, n) in [0, 1]."""
    g = rng.random((n // cell + 2, n // cell + 2))
    t = np.arange(n) / cell
    i = t.astype(int)
    f = t - i
    fy, fx = f[:, None], f[None, :]
    a, b = g[i][:, i], g[i][:, i + 1]
    c, d = g[i + 1][:, i], g[i + 1][:, i + 1]
    return (1 - fy) * ((1 - fx) * a + fx * b) + fy * ((1 - fx) * c + fx * d)


def target(b):
    """The target of bands b (3, H, W)."""
    return 1 + 3 * b[0] - 2 * b[1] + 4 * b[0] * b[2]


def target2(b):
    """The second target of bands b (--targets 2)."""
    return 200 + 30 * (b[1] - b[2]) * b[0] + 20 * b[2]


def write(path, a, srs):
    d = gdal.GetDriverByName("GTiff").Create(path, a.shape[2], a.shape[1], a.shape[0],
                                             gdal.GDT_Float32)
    d.SetGeoTransform((500000.0, 10, 0, 5800000.0, 0, -10))
    d.SetProjection(srs.ExportToWkt())
    for i in range(a.shape[0]):
        d.GetRasterBand(i + 1).WriteArray(a[i])
    d = None


def main():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("scene")
    p.add_argument("value")
    p.add_argument("--size", type=int, default=128, help="pixels a side (>= 16)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--targets", type=int, default=1, help="bands of the target raster (1 or 2)")
    a = p.parse_args()
    if a.size < 16:
        print(f"{PROG}: --size {a.size}: want 16 or more", file=sys.stderr)
        return 2
    if a.targets not in (1, 2):
        print(f"{PROG}: --targets {a.targets}: want 1 or 2", file=sys.stderr)
        return 2
    gdal.UseExceptions()
    rng = np.random.default_rng(a.seed)
    b = np.stack([0.8 * smooth(rng, a.size, 16) + 0.1 + 0.1 * rng.standard_normal((a.size, a.size))
                  for _ in range(3)]).astype(np.float32)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    write(a.scene, b, srs)
    b64 = b.astype(np.float64)
    y = [target(b64)] + ([target2(b64)] if a.targets == 2 else [])
    write(a.value, np.stack(y).astype(np.float32), srs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
