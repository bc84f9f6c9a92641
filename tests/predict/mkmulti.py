"""mkmulti.py DIR COUNT SEED [SIZE]: COUNT multi-label chips DIR/c_I.tif
(SIZE x SIZE, 3 bands u8, EPSG:32633) each holding any set of the objects
water (a dark blue pool), building (a bright red roof) and tree (a green
crown) on a noisy ground, each drawn with probability 0.45 at a random
place; DIR/list.txt has one line "c_I.tif CLASS[,CLASS...]" per chip ("-"
for none), cdp-lmdbpack --multi-label's list, in class order."""
import os
import sys

import numpy as np
from osgeo import gdal, osr

NAMES = ("water", "building", "tree")
COLOUR = {"water": (20, 50, 150), "building": (230, 60, 40), "tree": (40, 150, 40)}


def chip(rng, size):
    img = rng.normal(120, 12, (3, size, size))
    img[0] += 10                                  # brownish ground
    held = [n for n in NAMES if rng.random() < 0.45]
    yy, xx = np.mgrid[0:size, 0:size]
    for n in held:
        r = rng.uniform(2.0, 3.5)
        cy, cx = rng.uniform(r, size - r, 2)
        if n == "tree":
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            inside = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
        for b in range(3):
            img[b][inside] = COLOUR[n][b] + rng.normal(0, 8, inside.sum())
    return np.clip(img, 0, 255).astype(np.uint8), held


def main(argv):
    out, count, seed = argv[0], int(argv[1]), int(argv[2])
    size = int(argv[3]) if len(argv) > 3 else 16
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    lines = []
    for i in range(count):
        img, held = chip(rng, size)
        name = "c_%04d.tif" % i
        ds = gdal.GetDriverByName("GTiff").Create(os.path.join(out, name), size, size, 3,
                                                  gdal.GDT_Byte)
        ds.SetGeoTransform((500000 + i * size, 1, 0, 5800000, 0, -1))
        ds.SetProjection(srs.ExportToWkt())
        ds.WriteArray(img)
        ds = None
        lines.append("%s %s\n" % (name, ",".join(held) or "-"))
    with open(os.path.join(out, "list.txt"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    gdal.UseExceptions()
    main(sys.argv[1:])
