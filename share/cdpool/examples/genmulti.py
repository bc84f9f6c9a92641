#!/usr/bin/python3
"""genmulti.py: generated multi-label chips for cdpool's examples and tests.

genmulti.py DIR --count N [--size S] --seed S writes N chips DIR/c_I.tif
(S x S, 3 bands u8, EPSG:32633, side by side on a 1 m grid) each holding
any set of the objects water (a dark blue pool), building (a bright red
roof) and tree (a green crown) on a noisy ground, each drawn with
probability 0.45 at a random place, and DIR/list.txt with one line
"c_I.tif CLASS[,CLASS...]" per chip ("-" for none), in class order: the
input of 'cdp-lmdbpack --multi-label --classes water,building,tree --list'.
The chips are a function of the seed. Exit status: 0 ok, 1 failure, 2 usage
error."""
import argparse
import os
import sys

import numpy as np
from osgeo import gdal, osr

PROG = "genmulti.py"
NAMES = ("water", "building", "tree")
COLOUR = {"water": (20, 50, 150), "building": (230, 60, 40), "tree": (40, 150, 40)}


def chip(rng, size):
    """(3, size, size) u8 and the names it holds."""
    img = rng.normal(120, 12, (3, size, size))
    img[0] += 10                                  # brownish ground
    held = [n for n in NAMES if rng.random() < 0.45]
    yy, xx = np.mgrid[0:size, 0:size]
    for n in held:
        r = rng.uniform(2.0, 3.5) * size / 16
        cy, cx = rng.uniform(r, size - r, 2)
        if n == "tree":
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            inside = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
        for b in range(3):
            img[b][inside] = COLOUR[n][b] + rng.normal(0, 8, inside.sum())
    return np.clip(img, 0, 255).astype(np.uint8), held


def write(out, count, size, seed):
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
    tmp = os.path.join(out, ".list.txt.tmp%d" % os.getpid())
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, os.path.join(out, "list.txt"))


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1])
    p.add_argument("out", metavar="DIR", help="folder of the chips and list.txt")
    p.add_argument("--count", type=int, required=True, help="number of chips")
    p.add_argument("--size", type=int, default=16, help="chip side in pixels (default 16)")
    p.add_argument("--seed", type=int, required=True, help="random seed (0 .. 2^63-1)")
    a = p.parse_args(argv)
    if a.count < 1 or not 8 <= a.size <= 4096 or not 0 <= a.seed < 1 << 63:
        p.error("want --count >= 1, --size in 8..4096 and --seed in 0..2^63-1")
    gdal.UseExceptions()
    try:
        write(a.out, a.count, a.size, a.seed)
    except (OSError, RuntimeError) as e:
        sys.stderr.write("%s: cannot write '%s': %s\n" % (PROG, getattr(e, "filename", None) or a.out,
                                                         getattr(e, "strerror", None) or str(e).strip()))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
