#!/usr/bin/env python3
"""mkraster.py: deterministic GeoTIFF fixtures for cdpool's tests.

    mkraster.py OUT.tif --width W --height H --bands C
        --dtype u8|u16|i16|u32|i32|f32|f64 [--nodata V] [--nodata-frac F]
        [--nodata-rect X,Y,W,H] [--mask-rect X,Y,W,H] [--seed S]
        [--label OUTLABEL.tif --classes K [--label-dtype u8|u16]]
        [--gt x0,dx,0,y0,0,-dy] [--epsg 32633] [--tiled] [--compress]

Pixel values come from numpy's PCG64 seeded with --seed (default 1), so the
same arguments always give the same file. Values span the type's range for
integers and N(100, 50^2) for floats; no generated value equals the nodata
value, so exactly the pixels chosen by --nodata-frac (a random fraction of
all pixels) and --nodata-rect (a rectangle) have every band set to nodata.
--mask-rect adds an internal per-dataset GDAL mask (GMF_PER_DATASET) that
marks the rectangle invalid without touching the pixel values.

The label raster (--label) is band 1 class ids in [0, K) of the same size,
geotransform and CRS, u8 unless --label-dtype says otherwise.
"""
import argparse
import sys

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()

GDT = {
    "u8": (gdal.GDT_Byte, np.uint8),
    "u16": (gdal.GDT_UInt16, np.uint16),
    "i16": (gdal.GDT_Int16, np.int16),
    "u32": (gdal.GDT_UInt32, np.uint32),
    "i32": (gdal.GDT_Int32, np.int32),
    "f32": (gdal.GDT_Float32, np.float32),
    "f64": (gdal.GDT_Float64, np.float64),
}


def floats(text, n, what):
    try:
        v = [float(x) for x in text.split(",")]
    except ValueError:
        sys.exit("mkraster.py: %s: not a list of numbers: %r" % (what, text))
    if len(v) != n:
        sys.exit("mkraster.py: %s: need %d numbers, got %d" % (what, n, len(v)))
    return v


def rect(text, what):
    x, y, w, h = (int(v) for v in floats(text, 4, what))
    return slice(y, y + h), slice(x, x + w)


def pixels(rng, npt, shape):
    """Random samples of numpy type npt, shape (C, H, W)."""
    if np.issubdtype(npt, np.integer):
        info = np.iinfo(npt)
        return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=npt)
    return (rng.standard_normal(shape) * 50.0 + 100.0).astype(npt)


def create(path, w, h, c, gdt, args, gt, srs):
    opts = []
    if args.tiled:
        opts += ["TILED=YES", "BLOCKXSIZE=32", "BLOCKYSIZE=32"]
    if args.compress:
        opts += ["COMPRESS=DEFLATE"]
    ds = gdal.GetDriverByName("GTiff").Create(path, w, h, c, gdt, options=opts)
    ds.SetGeoTransform(gt)
    if srs is not None:
        ds.SetProjection(srs.ExportToWkt())
    return ds


def main():
    ap = argparse.ArgumentParser(prog="mkraster.py",
                                 description="write a deterministic test GeoTIFF")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--bands", type=int, default=1)
    ap.add_argument("--dtype", choices=sorted(GDT), default="u8")
    ap.add_argument("--nodata", type=float)
    ap.add_argument("--nodata-frac", type=float, default=0.0)
    ap.add_argument("--nodata-rect")
    ap.add_argument("--mask-rect")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--label")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--label-dtype", choices=["u8", "u16"], default="u8")
    ap.add_argument("--gt", default="500000,10,0,6000000,0,-10")
    ap.add_argument("--epsg", type=int, default=32633)
    ap.add_argument("--tiled", action="store_true")
    ap.add_argument("--compress", action="store_true")
    args = ap.parse_args()

    if args.width < 1 or args.height < 1 or args.bands < 1:
        sys.exit("mkraster.py: width, height and bands must be positive")
    if (args.nodata_frac or args.nodata_rect) and args.nodata is None:
        sys.exit("mkraster.py: --nodata-frac and --nodata-rect need --nodata")
    gdt, npt = GDT[args.dtype]
    gt = floats(args.gt, 6, "--gt")
    srs = None
    if args.epsg:
        srs = osr.SpatialReference()
        srs.ImportFromEPSG(args.epsg)

    rng = np.random.Generator(np.random.PCG64(args.seed))
    shape = (args.bands, args.height, args.width)
    data = pixels(rng, npt, shape)
    if args.nodata is not None:
        nd = args.nodata
        if np.issubdtype(npt, np.integer):
            # Move generated values off the nodata value so only the chosen
            # pixels are nodata.
            ndv = npt(nd)
            hit = data == ndv
            data[hit] = ndv + 1 if ndv < np.iinfo(npt).max else ndv - 1
        elif not np.isnan(nd):
            data[data == npt(nd)] = npt(nd + 1.0)
        chosen = np.zeros((args.height, args.width), dtype=bool)
        if args.nodata_frac > 0:
            chosen |= rng.random((args.height, args.width)) < args.nodata_frac
        if args.nodata_rect:
            chosen[rect(args.nodata_rect, "--nodata-rect")] = True
        data[:, chosen] = npt(nd)

    ds = create(args.out, args.width, args.height, args.bands, gdt, args, gt, srs)
    for b in range(args.bands):
        band = ds.GetRasterBand(b + 1)
        if args.nodata is not None:
            band.SetNoDataValue(args.nodata)
        band.WriteArray(data[b])
    if args.mask_rect:
        valid = np.full((args.height, args.width), 255, dtype=np.uint8)
        valid[rect(args.mask_rect, "--mask-rect")] = 0
        ds.CreateMaskBand(gdal.GMF_PER_DATASET)
        ds.GetRasterBand(1).GetMaskBand().WriteArray(valid)
    ds = None

    if args.label:
        if args.classes < 1:
            sys.exit("mkraster.py: --classes must be positive")
        lgdt, lnpt = GDT[args.label_dtype]
        lab = rng.integers(0, args.classes, size=(args.height, args.width),
                           dtype=lnpt)
        ds = create(args.label, args.width, args.height, 1, lgdt, args, gt, srs)
        ds.GetRasterBand(1).WriteArray(lab)
        ds = None


if __name__ == "__main__":
    main()
