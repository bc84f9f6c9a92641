# mkthreshold.py OUT.tif W H SEED [--bands B] [--nodata-rect x,y,w,h]: a
# smooth u8 image (random Gaussian blobs plus noise, values 1..255, B equal
# bands) and OUT_mask.tif = (value > 128), both georeferenced in EPSG:32633
# at 0.5 m; the nodata rectangle is 0 in the image, which then declares
# nodata 0. A trivially learnable target for cdp-predict's tests.
import sys, numpy as np
from osgeo import gdal, osr
out, w, h, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
bands = 1; rect = None
a = sys.argv[5:]
for i in range(0, len(a), 2):
    if a[i] == "--bands": bands = int(a[i + 1])
    if a[i] == "--nodata-rect": rect = [int(v) for v in a[i + 1].split(",")]
rng = np.random.default_rng(seed)
yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
img = np.zeros((h, w))
for _ in range(12):
    cx, cy, s, amp = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(8, 30), rng.uniform(-1, 1)
    img += amp * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))
img = 128 + 90 * img / max(1e-9, np.abs(img).max()) + rng.normal(0, 6, (h, w))
img = np.clip(np.rint(img), 1, 255).astype(np.uint8)
lab = (img > 128).astype(np.uint8)
if rect:
    x, y, rw, rh = rect
    img[y:y + rh, x:x + rw] = 0
srs = osr.SpatialReference(); srs.ImportFromEPSG(32633)
gt = (500000.0, 0.5, 0.0, 5800000.0, 0.0, -0.5)
drv = gdal.GetDriverByName("GTiff")
def write(path, arr, nb, nodata):
    ds = drv.Create(path, w, h, nb, gdal.GDT_Byte)
    ds.SetGeoTransform(gt); ds.SetProjection(srs.ExportToWkt())
    for b in range(nb):
        ds.GetRasterBand(b + 1).WriteArray(arr)
        if nodata is not None: ds.GetRasterBand(b + 1).SetNoDataValue(nodata)
    ds = None
write(out, img, bands, 0 if rect else None)
write(out[:-4] + "_mask.tif", lab, 1, None)
