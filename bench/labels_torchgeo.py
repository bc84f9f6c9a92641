"""labels_torchgeo.py: the TorchGeo side of bench/labels.sh: its vector
path over the same scene and polygons as cdp-tile --label buildings.gpkg,
timed as labels.sh times cdp-tile, one line out: SAMPLES SECONDS LABELLED.

    python3 labels_torchgeo.py DIR TILE REPEAT

DIR holds scene.tif (the image, a RasterDataset) and buildings.gpkg (the
polygons in EPSG:4326, a VectorDataset with label_name "class", 1 on every
feature, so its masks are cdp-tile's burn 1); the two are intersected (&),
which reprojects the polygons' index into the scene's CRS and resolution,
and a GridGeoSampler of TILE x TILE pixels with stride TILE walks the
scene. A sample is ds[query] (the image window and the mask rasterized by
TorchGeo through rasterio.features.rasterize), read in this one process
with one torch thread (cdp-tile is one process); the best of REPEAT passes
counts. LABELLED: the mask pixels that are 1, over all samples.
"""
import contextlib
import sys
import time

import torch
from torchgeo.datasets import RasterDataset, VectorDataset
from torchgeo.samplers import GridGeoSampler


class Scene(RasterDataset):
    filename_glob = "scene.tif"
    is_image = True


class Buildings(VectorDataset):
    filename_glob = "buildings.gpkg"


def main(argv):
    d, tile, rep = argv[0], int(argv[1]), int(argv[2])
    torch.set_num_threads(1)
    with contextlib.redirect_stdout(sys.stderr):    # TorchGeo prints its reprojection
        ds = Scene(d) & Buildings(d, label_name="class")
    sampler = GridGeoSampler(ds, size=tile, stride=tile)
    best = None
    for _ in range(rep):
        t = time.perf_counter()
        n = ones = 0
        for q in sampler:
            s = ds[q]
            n += 1
            ones += int((s["mask"] == 1).sum())
        t = time.perf_counter() - t
        best = t if best is None or t < best else best
    print(n, best, ones)


if __name__ == "__main__":
    main(sys.argv[1:])
