#!/bin/sh
# bench/labels.sh: cdp-tile with vector labels against the same scene with
# a pre-rasterized label raster (the fast path), in the same run. A u8
# scene of BENCH_SIZE^2 pixels at 0.5 m in EPSG:32633 gets about one
# building polygon (4-8 vertices, 4-20 m across) per 2700 pixels (100,000
# on a 16384^2 scene) stored in EPSG:4326 as a GeoPackage; the raster path
# reads the same polygons burned by gdal_rasterize onto the scene's grid.
# Both stream into /dev/null with 256-pixel tiles; the best of BENCH_REPEAT
# runs counts. Prints tiles/s of both and the ratio vector/raster (target
# >= 0.5). Then TorchGeo's vector path over the same files
# (bench/labels_torchgeo.py: RasterDataset & VectorDataset with label_name,
# a GridGeoSampler of the same tiles, one process) and the ratio of
# cdp-tile's vector tiles/s to its samples/s (target >= 10). TorchGeo comes
# from PyPI in a venv (bench/README); without one that imports torchgeo the
# peer is skipped with a line saying so.
#   usage: bench/labels.sh [BUILDDIR]
#   env:   BENCH_SIZE (default 4096; the issue's scene is 16384),
#          BENCH_REPEAT (default 3), PYTHON (with osgeo and numpy),
#          TORCHGEO_PYTHON (default python3: a Python that imports torchgeo)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
tile=$build/cdp-tile
py=${PYTHON:-python3}
size=${BENCH_SIZE:-4096}
rep=${BENCH_REPEAT:-3}
[ -x "$tile" ] || { echo "labels.sh: '$tile' not built" >&2; exit 1; }
"$py" -c 'import osgeo.gdal, numpy' 2>/dev/null ||
	{ echo "labels.sh: no Python with osgeo.gdal and numpy" >&2; exit 77; }
command -v gdal_rasterize >/dev/null || { echo "labels.sh: no gdal_rasterize" >&2; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/labels.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
. "$src/bench/train_lib.sh"     # machine
machine

"$py" - "$T" "$size" <<'EOF'
import sys
import numpy as np
from osgeo import gdal, ogr, osr
gdal.UseExceptions()
d, n = sys.argv[1], int(sys.argv[2])
gt = (500000.0, 0.5, 0.0, 6000000.0, 0.0, -0.5)
utm = osr.SpatialReference(); utm.ImportFromEPSG(32633)
ds = gdal.GetDriverByName("GTiff").Create(d + "/scene.tif", n, n, 1, gdal.GDT_Byte,
                                          ["TILED=YES"])
ds.SetGeoTransform(gt); ds.SetProjection(utm.ExportToWkt())
rng = np.random.default_rng(1)
for y in range(0, n, 1024):
    h = min(1024, n - y)
    ds.GetRasterBand(1).WriteArray(rng.integers(0, 255, (h, n), dtype=np.uint8), 0, y)
ds = None
ll = osr.SpatialReference(); ll.ImportFromEPSG(4326)
ll.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
utm.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
ct = osr.CoordinateTransformation(utm, ll)
v = ogr.GetDriverByName("GPKG").CreateDataSource(d + "/buildings.gpkg")
lay = v.CreateLayer("buildings", ll, ogr.wkbPolygon)
lay.CreateField(ogr.FieldDefn("class", ogr.OFTInteger))    # TorchGeo's label_name
lay.StartTransaction()
count = n * n // 2700
for i in range(count):
    cx, cy = rng.uniform(0, n * 0.5), rng.uniform(0, n * 0.5)
    k = int(rng.integers(4, 9))
    ang = np.sort(rng.uniform(0, 2 * np.pi, k))
    r = rng.uniform(2, 10, k)
    ring = ogr.Geometry(ogr.wkbLinearRing)
    for a, rr in zip(ang, r):
        ring.AddPoint_2D(gt[0] + cx + rr * np.cos(a), gt[3] - cy + rr * np.sin(a))
    ring.CloseRings()
    g = ogr.Geometry(ogr.wkbPolygon); g.AddGeometry(ring); g.Transform(ct)
    f = ogr.Feature(lay.GetLayerDefn()); f.SetGeometry(g); f.SetField("class", 1)
    lay.CreateFeature(f)
lay.CommitTransaction()
v = None
print("scene: %dx%d u8, %d building polygons in EPSG:4326" % (n, n, count))
EOF
# the fast path's label: the same polygons on the scene's grid
gdal_translate -q -ot Byte -scale 0 255 0 0 "$T/scene.tif" "$T/scene_lab.tif"
gdal_rasterize -q -burn 1 "$T/buildings.gpkg" "$T/scene_lab.tif"

# best RUN... seconds of `cdp-tile ARGS`, printed
best() {
	b=
	i=0
	while [ "$i" -lt "$rep" ]; do
		s=$(date +%s.%N)
		"$tile" -q "$@" "$T/scene.tif" >/dev/null
		e=$(date +%s.%N)
		b=$(echo "$s $e ${b:-}" | awk '{t = $2 - $1; if ($3 != "" && $3 < t) t = $3; print t}')
		i=$((i + 1))
	done
	echo "$b"
}
tiles=$(( (size / 256) * (size / 256) ))
r=$(best --label "$T/scene_lab.tif")
v=$(best --label "$T/buildings.gpkg")
echo "$r $v $tiles" | awk '{printf "raster label:  %8.1f tiles/s (%.2f s)\nvector label:  %8.1f tiles/s (%.2f s)\nratio vector/raster: %.2f (target >= 0.5)\n", $3 / $1, $1, $3 / $2, $2, $1 / $2}'

tg=${TORCHGEO_PYTHON:-python3}
if ! "$tg" -c 'import torchgeo' 2>/dev/null; then
	echo "torchgeo:      skipped: '$tg' cannot import torchgeo (set TORCHGEO_PYTHON; bench/README)"
	exit 0
fi
ref=$("$py" -c 'import sys
from osgeo import gdal
print(int((gdal.Open(sys.argv[1]).ReadAsArray() == 1).sum()))' "$T/scene_lab.tif")
out=$("$tg" "$src/bench/labels_torchgeo.py" "$T" 256 "$rep" 2>"$T/tg.err") ||
	{ echo "labels.sh: TorchGeo failed: $(tail -1 "$T/tg.err")" >&2; exit 1; }
echo "$out $v $tiles $ref" | awk '{
	if ($1 != $5) { printf "labels.sh: TorchGeo read %d samples, cdp-tile %d tiles\n", $1, $5; exit 1 }
	printf "torchgeo:      %8.1f samples/s (%.2f s; %d labelled pixels, gdal_rasterize %d)\n", $1 / $2, $2, $3, $6
	printf "ratio cdpool/torchgeo: %.1f (target >= 10)\n", $2 / $4 }'
