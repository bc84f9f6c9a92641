# seam.py REF.tif A.tif...: for each A, the largest mean |P_A - P_REF| of
# P(class 1) over one interior row or column (8 pixels from the edges).
# REF comes from one window covering the whole raster, so it has no tile
# border inside: what A adds at its window borders is the seam.
import sys, numpy as np
from osgeo import gdal
ref = gdal.Open(sys.argv[1]).ReadAsArray()[-1]
out = []
for path in sys.argv[2:]:
    e = np.abs(gdal.Open(path).ReadAsArray()[-1] - ref)[8:-8, 8:-8]
    out.append("%.6f" % max(np.nanmax(np.nanmean(e, axis=0)), np.nanmax(np.nanmean(e, axis=1))))
print(" ".join(out))
