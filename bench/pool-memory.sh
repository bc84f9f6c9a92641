#!/bin/sh
# bench/pool-memory.sh: the sources' headline claim. Each rank's anonymous
# memory (RssAnon, the peak of what cdp-train logs per step in
# metrics.jsonl) with --load pool stays flat as the pool grows, while with
# --load copy (every rank first copies the dataset into its own memory) it
# grows with the pool. Also the page cache the pool occupies (fincore on
# data.mdb after the runs), which all ranks share once. File pages a rank
# touched alone show as Private_Clean in smaps but are reclaimable page
# cache, not a copy, so they are not counted.
# Pools: one generated 2048^2 RGB road scene (genscene.py, 12 MiB of u8)
# linked under N names and cut into 256x256 tiles (192 KiB each), N chosen
# for ~1 GB and ~4 GB times BENCH_SCALE (default 1; 0.05 for a quick run).
#   usage: bench/pool-memory.sh [BUILDDIR]
#   env: BENCH_SCALE, BENCH_RANKS (default "2 4"), BENCH_STEPS (default 20),
#        BENCH_DIR (kept between runs; default a temporary directory), MPIRUN
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
PATH=$build:$PATH
scale=${BENCH_SCALE:-1}
ranks=${BENCH_RANKS:-2 4}
steps=${BENCH_STEPS:-20}
PY=${PYTHON:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || { echo "pool-memory.sh: no mpirun" >&2; exit 1; }
flags="--oversubscribe"
[ "$(id -u)" -ne 0 ] || flags="$flags --allow-run-as-root"
if [ -n "${BENCH_DIR:-}" ]; then D=$BENCH_DIR; mkdir -p "$D"; else
	D=$(mktemp -d "${TMPDIR:-/tmp}/cdppoolmem.XXXXXX"); trap 'rm -rf "$D"' EXIT; fi
[ -f "$D/scene.tif" ] || "$PY" "$src/share/cdpool/examples/genscene.py" "$D/scene.tif" \
	--size 2048 --seed 1 --mask "$D/scene_mask.tif"
model="$src/share/cdpool/models/unet.cfg:width=4,depth=2,aug_rot90=0"
. "$src/bench/train_lib.sh"     # machine
machine
echo "pool_mb ranks load peak_rss_anon_kb_per_rank pool_page_cache_mb"
for gb in 1 4; do
	n=$(awk -v g=$gb -v s="$scale" 'BEGIN { n = int(g * 1e9 / (2048*2048*3) * s + 0.5); print (n < 1 ? 1 : n) }')
	pool=$D/pool$gb
	if [ ! -f "$pool/data.mdb" ]; then
		mkdir -p "$D/scenes$gb"
		i=0
		while [ $i -lt "$n" ]; do
			ln -sf "$D/scene.tif" "$D/scenes$gb/s$i.tif"
			ln -sf "$D/scene_mask.tif" "$D/scenes$gb/s${i}_mask.tif"
			i=$((i + 1))
		done
		# shellcheck disable=SC2046
		cdp-tile -q --size 256 --label-suffix _mask $(ls "$D/scenes$gb"/s*.tif | grep -v _mask) |
			cdp-lmdbpack -q "$pool"
		cdp-keyshuffle -q -o "$D/keys$gb" "$pool"
	fi
	mb=$(du -m "$pool/data.mdb" | cut -f1)
	for j in $ranks; do
		for load in pool copy; do
			rm -rf "$D/run"
			# shellcheck disable=SC2086
			"$mpirun" $flags -np "$j" cdp-train -q --db "$pool" --keys "$D/keys$gb" \
				--model "$model" --out "$D/run" --batch 2 --steps "$steps" --threads 1 \
				--load $load --log-every 1
			peak=$(sed -n 's/.*"rss_anon_kb":\[\([0-9,]*\)\].*/\1/p' "$D/run/metrics.jsonl" |
				awk -F, '{ for (i = 1; i <= NF; i++) if ($i > m[i]) m[i] = $i }
				END { for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), m[i] }')
			cache=$(fincore -b -n -o RES "$pool/data.mdb" 2>/dev/null | awk '{ printf "%.0f", $1 / 1048576 }')
			echo "$mb $j $load $peak ${cache:-?}"
		done
	done
done
