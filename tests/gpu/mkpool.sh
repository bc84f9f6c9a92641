#!/bin/sh
# tests/gpu/mkpool.sh DIR: the small road pool of tests/train/train_common.sh
# (two generated 256x256 scenes cut into 32 tiles of 64x64 with road masks)
# in DIR/pool, with DIR/train.keys (24 keys) and DIR/val.keys (8). Needs
# cdp-tile, cdp-lmdbpack and cdp-keyshuffle on PATH and $PYTHON with GDAL;
# exits 77 without that Python. scripts/device-deps.sh runs it to carry a
# pool to GPU machines, which have neither GDAL nor its Python bindings.
set -eu
[ $# -eq 1 ] || { echo "usage: mkpool.sh DIR" >&2; exit 2; }
out=$1
src=${CDP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${PYTHON:-}
if [ -z "$PY" ] || ! "$PY" -c 'import osgeo.gdal, numpy' 2>/dev/null; then
	echo "SKIP: no Python with osgeo.gdal and numpy (PYTHON='$PY')" >&2
	exit 77
fi
mkdir -p "$out"
for s in 3 4; do
	"$PY" "$src/share/cdpool/examples/genscene.py" "$out/c$s.tif" --size 256 --seed "$s" \
		--mask "$out/c${s}_mask.tif"
done
rm -rf "$out/pool"
cdp-tile -q --size 64 --label-suffix _mask "$out/c3.tif" "$out/c4.tif" | cdp-lmdbpack -q "$out/pool"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$out/val.keys" -o "$out/train.keys" "$out/pool"
rm -f "$out"/c3*.tif "$out"/c4*.tif
