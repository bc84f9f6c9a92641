#!/bin/sh
# bench/data.sh: dataset-building throughput of cdp-tile | cdp-lmdbpack
# against two peers measured in the same run:
#   retile+py  gdal_retile.py writing the same 256x256 tiles, then a Python
#              lmdb packer doing what the patent describes (read each tile
#              file, txn.put its bytes under NAME_ROW_COL);
#   raw GDAL   gdal_translate of the scene to a raw format (ENVI), the bound
#              for any tool that must read the scene through GDAL and write
#              its bytes once.
# For a plain and a tiled+DEFLATE GeoTIFF of BENCH_SIZE^2 x 3 x uint8
# (default 16384). Prints MB/s (scene bytes / wall time) and the ratios.
# Targets: >= 5x retile+py, >= 0.7x raw GDAL.
#   usage: bench/data.sh [BUILDDIR]     env: BENCH_SIZE, BENCH_DIR, PYTHON
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
size=${BENCH_SIZE:-16384}
PY=${PYTHON:-/usr/bin/python3}
# BENCH_DIR keeps the generated scenes between runs; a temporary one is removed.
if [ -n "${BENCH_DIR:-}" ]; then dir=$BENCH_DIR; mkdir -p "$dir"
else dir=$(mktemp -d /var/tmp/cdpbench.XXXXXX); trap 'rm -rf "$dir"' EXIT; fi
now() { date +%s.%N; }
mbps() { "$PY" -c "import sys; print('%.1f' % ($1 / 1e6 / ($3 - $2)))"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "scene: ${size}x${size}x3 uint8; tiles 256x256, no overlap; warm page cache; fsync on in every packer"
if [ ! -f "$dir/plain-$size.tif" ]; then
	"$PY" "$src/share/cdpool/examples/genscene.py" "$dir/plain-$size.tif" --size "$size" --seed 1
	gdal_translate -q -co TILED=YES -co COMPRESS=DEFLATE "$dir/plain-$size.tif" "$dir/tiled-$size.tif"
fi
bytes=$((size * size * 3))

cat >"$dir/pypack.py" <<'PYEOF'
# The patent's packer: read each tile file, put its array bytes.
import glob, os, sys, lmdb
from osgeo import gdal
tiles, db, name = sys.argv[1], sys.argv[2], sys.argv[3]
env = lmdb.open(db, map_size=1 << 40)
txn = env.begin(write=True)
for i, path in enumerate(sorted(glob.glob(os.path.join(tiles, "*.tif")))):
    r, c = os.path.basename(path)[:-4].split("_")[-2:]
    a = gdal.Open(path).ReadAsArray()
    txn.put(("%s_%s_%s" % (name, r, c)).encode(), a.tobytes())
    if i % 1000 == 999:
        txn.commit()
        txn = env.begin(write=True)
txn.commit()
env.sync()
PYEOF

printf '\n%-8s %12s %12s %12s %10s %10s\n' variant "cdp MB/s" "retile+py" "raw GDAL" "vs peer" "vs raw"
for v in plain tiled; do
	f="$dir/$v-$size.tif"
	cat "$f" >/dev/null   # warm the cache the same way for everyone
	rm -rf "$dir/pool" "$dir/raw.bin" "$dir/tiles" "$dir/pypool"
	t0=$(now); "$build/cdp-tile" -q --size 256 "$f" | "$build/cdp-lmdbpack" -q "$dir/pool"; t1=$(now)
	ours=$(mbps $bytes "$t0" "$t1")
	t0=$(now); gdal_translate -q -of ENVI "$f" "$dir/raw.bin"; sync; t1=$(now)
	raw=$(mbps $bytes "$t0" "$t1")
	mkdir "$dir/tiles"
	t0=$(now)
	"$PY" /usr/bin/gdal_retile.py -q -ps 256 256 -targetDir "$dir/tiles" "$f"
	"$PY" "$dir/pypack.py" "$dir/tiles" "$dir/pypool" "$v"
	t1=$(now)
	peer=$(mbps $bytes "$t0" "$t1")
	printf '%-8s %12s %12s %12s %9sx %9sx\n' "$v" "$ours" "$peer" "$raw" \
		"$("$PY" -c "print('%.2f' % ($ours / $peer))")" "$("$PY" -c "print('%.2f' % ($ours / $raw))")"
done
