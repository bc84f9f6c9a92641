# bench/train_lib.sh: what the cdp-train benchmarks share (scaling.sh,
# scaling_hosts.sh, trace.sh); sourced, with PY (a Python with GDAL) and
# the built programs on PATH.

# road_pool DIR SIZE: a generated SIZE^2 road scene in 128x128 tiles as
# the pool DIR/pool with the pointer file DIR/keys
road_pool() {
	"$PY" "$src/share/cdpool/examples/genscene.py" "$1/s.tif" --size "$2" --seed 1 --mask "$1/s_mask.tif"
	cdp-tile -q --size 128 --label-suffix _mask "$1/s.tif" | cdp-lmdbpack -q "$1/pool"
	cdp-keyshuffle -q -o "$1/keys" "$1/pool"
}

# median: the median of the numbers on standard input, one a line ("%.2f")
median() {
	sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# rate FILE WARM: the median samples/s of a metrics.jsonl's step lines
# after step WARM
rate() {
	sed -n 's/.*"step":\([0-9]*\),.*"samples_per_s":\([^,]*\),.*/\1 \2/p' "$1" |
		awk -v w="$2" '$1 > w { print $2 }' | median
}
