# bench/train_lib.sh: what the benchmarks share: the machine line every
# script prints beside its figures, the bf16 check, and the pools and runs
# of the cdp-train benchmarks (scaling.sh, scaling_hosts.sh, trace.sh);
# sourced. road_pool wants src, PY (a Python with GDAL) and the built
# programs on PATH; the rest wants nothing.

# machine: the line that says where the figures were taken
machine() {
	echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
}

# bf16_or_skip NAME CMD...: runs CMD, a small probe in bf16, and exits 77
# (cannot run here: a skip, bench/README) with its message under script
# NAME's when it fails, as on a CPU without AVX512_BF16 (unless
# CDP_CPU_BF16_EMU=1 lends the emulated kernels)
bf16_or_skip() {
	_n=$1
	shift
	if ! _e=$("$@" 2>&1 >/dev/null); then
		echo "$_n: SKIP: bf16 cannot run here: $(printf '%s\n' "$_e" | tail -n 1)" >&2
		exit 77
	fi
}

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
