#!/bin/sh
# tests/tools/buildings_recipe.sh: the building-footprints recipe of
# README.md, its commands as written there, run in an empty folder on a
# smaller set: the block after "<!-- recipe: buildings -->" with the
# 2048-pixel scene made 512, the 1024-pixel held-out scene 256, the U-Net
# width 4 and 5 epochs 1 (each substitution must match once, so the recipe
# cannot drift from this test unnoticed; see run_recipe in common.sh).
# Then what a user relies on: the footprints in EPSG:4326 with 'house'
# features as ogrinfo reads them, the same bytes from the same arguments, a map of the held-out scene on its grid
# and CRS with classes 0 and 1, and a report whose accuracy is NumPy's
# against ogr2ogr + gdal_rasterize of the houses onto that grid.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
run_recipe buildings "town.tif --size 2048 " "town.tif --size 512 " \
	"east.tif --size 1024 " "east.tif --size 256 " \
	"unet.cfg:width=16,depth=4 " "unet.cfg:width=4,depth=4 " "--epochs 5 " "--epochs 1 "
W="$T/work"
# the footprints: EPSG:4326, some houses (else the labels would be all background)
ogrinfo -ro -so "$W/buildings.gpkg" buildings | grep -q 'ID\["EPSG",4326\]' ||
	fail "buildings.gpkg is not in EPSG:4326"
houses=$(ogrinfo -ro -q -where "building = 'house'" "$W/buildings.gpkg" buildings | grep -c '^OGRFeature')
[ "$houses" -gt 0 ] || fail "no house in buildings.gpkg"
# the same arguments give the same bytes, the GeoPackage's too (it holds a
# time of writing, which genscene.py fixes)
(cd "$W" && "$PYTHON" share/cdpool/examples/genscene.py again.tif --size 256 --seed 8 \
	--origin 501024,5800000 --buildings again.gpkg) || fail "genscene.py again"
cmp -s "$W/east.tif" "$W/again.tif" || fail "genscene.py: the same arguments, another scene"
cmp -s "$W/east_buildings.gpkg" "$W/again.gpkg" ||
	fail "genscene.py --buildings: the same arguments, another GeoPackage"
"$PYTHON" - "$W" <<'PYEOF' || fail "map or report"
import subprocess, sys
import numpy as np
from osgeo import gdal
w = sys.argv[1]
e, m = gdal.Open(w + "/east.tif"), gdal.Open(w + "/east_buildings.tif")
assert (m.RasterXSize, m.RasterYSize) == (e.RasterXSize, e.RasterYSize) == (256, 256)
assert m.GetGeoTransform() == e.GetGeoTransform(), m.GetGeoTransform()
assert m.GetProjection() == e.GetProjection()
pred = m.ReadAsArray()
assert set(np.unique(pred)) <= {0, 1}, np.unique(pred)
# the reference: ogr2ogr of the houses into the scene's CRS, then
# gdal_rasterize onto the map's grid
gt = e.GetGeoTransform()
utm = gdal.VectorTranslate(w + "/../utm.gpkg", w + "/east_buildings.gpkg", dstSRS=e.GetProjection(),
                           reproject=True)
utm = None
ref = gdal.Rasterize("", w + "/../utm.gpkg", format="MEM", outputBounds=(
    gt[0], gt[3] + 256 * gt[5], gt[0] + 256 * gt[1], gt[3]), width=256, height=256,
    outputType=gdal.GDT_Byte, burnValues=[1], where="building = 'house'").ReadAsArray()
assert ref.sum() > 0, "no house on the held-out scene"
cm = np.zeros((2, 2), int)
np.add.at(cm, (ref.ravel(), pred.ravel()), 1)
acc = np.trace(cm) / cm.sum()
out = open(w + "/../out").read()
assert "accuracy" in out, out
line = [l for l in out.splitlines() if l.startswith("accuracy")][0]
assert abs(float(line.split()[1]) - acc) < 5e-4, (line, acc, cm)
PYEOF
echo "ok: $houses houses; $(grep '^accuracy' "$T/out")"
