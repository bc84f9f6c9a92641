#!/bin/sh
# bench/loader.sh: the training data loader (tools/train/loader.c) alone.
#  1. Warm page cache: batches/s of the loader (uint8 tiles 3x256x256, batch
#     32, standardized float output) against memcpy over the same batches,
#     of the stored bytes and of the float bytes (loader_bench speed: five
#     rounds of loader then memcpy, interleaved, medians reported);
#     target >= 0.5x memcpy of the stored bytes. Prints the ratios, also
#     by CPU time (immune to the threads being descheduled on a busy host),
#     then the conversion kernel alone against memcpy (loader_bench kernel).
#  2. Cold and warm random reads of whole values, per tile size (value
#     size), with readahead on (MADV_NORMAL) and off (MDB_NORDAHEAD), each
#     with and without MADV_WILLNEED one batch ahead (loader_bench read), and
#     the loader itself cold in the same four settings (loader_bench load),
#     then what CDP_RA_AUTO picks. Cold = page cache dropped before the run:
#     echo 3 > /proc/sys/vm/drop_caches (root), else POSIX_FADV_DONTNEED on
#     data.mdb.
#  3. The same loader runs with the page cache limited by a memory cgroup
#     (BENCH_CGROUP_MB, default 96) to stand in for a pool larger than RAM.
# The scene is BENCH_SIZE^2 x 3 uint8 random pixels (default 9216: 255 MB,
# one pool per tile size in BENCH_TILES, default "32 128 256 512").
#   usage: bench/loader.sh [BUILDDIR]
#   env: BENCH_SIZE, BENCH_TILES, BENCH_DIR (kept between runs), PYTHON,
#        BENCH_CGROUP_MB,
#        LOADER_BENCH (the driver; default BUILDDIR/bench/loader_bench)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
size=${BENCH_SIZE:-9216}
tiles=${BENCH_TILES:-32 128 256 512}
PY=${PYTHON:-/usr/bin/python3}
lb=${LOADER_BENCH:-$build/bench/loader_bench}
[ -x "$lb" ] || { echo "loader.sh: no driver at '$lb' (set LOADER_BENCH)" >&2; exit 1; }
for t in cdp-tile cdp-lmdbpack cdp-keyshuffle; do
	[ -x "$build/$t" ] || { echo "loader.sh: no '$build/$t'" >&2; exit 1; }
done
if [ -n "${BENCH_DIR:-}" ]; then dir=$BENCH_DIR; mkdir -p "$dir"
else dir=$(mktemp -d /var/tmp/cdpbench.XXXXXX); trap 'rm -rf "$dir"' EXIT; fi

# How pages are dropped, decided once before any header names it: the
# whole page cache where this user may (root, /proc/sys writable), else
# the pool's own pages.
sync
if { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
	how="echo 3 > /proc/sys/vm/drop_caches"
else
	how="POSIX_FADV_DONTNEED on data.mdb"
fi
drop() {   # drop cached pages of pool $1
	sync
	case $how in
	echo*) echo 3 >/proc/sys/vm/drop_caches ;;
	*) "$lb" drop "$1/data.mdb" ;;
	esac
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "block device readahead: $(cat /sys/block/*/queue/read_ahead_kb 2>/dev/null | sort -n | tail -1) KiB (largest)"
if [ ! -f "$dir/scene-$size.tif" ]; then
	"$PY" "$src/tests/tools/mkraster.py" "$dir/scene-$size.tif" --width "$size" --height "$size" \
		--bands 3 --dtype u8 --seed 1
fi
for t in $tiles; do
	if [ ! -f "$dir/pool-$t/data.mdb" ]; then
		rm -rf "$dir/pool-$t"
		"$build/cdp-tile" -q --size "$t" "$dir/scene-$size.tif" | "$build/cdp-lmdbpack" -q --no-sync "$dir/pool-$t"
		"$build/cdp-keyshuffle" -q --seed 1 -o "$dir/keys-$t" "$dir/pool-$t"
	fi
done

echo
echo "== 1. warm: loader alone vs memcpy (3x256x256 uint8, batch 32, 40 steps) =="
if [ -f "$dir/pool-256/data.mdb" ]; then
	cat "$dir/pool-256/data.mdb" >/dev/null
	for th in $(printf '%s\n' 1 2 "$(nproc)" | sort -nu); do
		for v in "" --verify-once; do
			"$lb" speed -b 32 -n 40 -t "$th" $v "$dir/pool-256" "$dir/keys-256"
			echo
		done
	done
	"$lb" speed -b 32 -n 40 -t 1 --mode copy "$dir/pool-256" "$dir/keys-256"
	echo
	echo "-- the uint8 kernel alone (the ceiling of one loader thread) --"
	"$lb" kernel -b 32 -n 40 "$dir/pool-256" "$dir/keys-256"
else
	echo "(no 256 tiles in BENCH_TILES)"
fi

# A memory cgroup (v1 or v2) limits the page cache to stand in for a pool
# larger than RAM; skipped where none can be made.
cg=
cgmb=${BENCH_CGROUP_MB:-96}
if [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/cdpbench.$$" 2>/dev/null; then
	cg=/sys/fs/cgroup/memory/cdpbench.$$
	echo "${cgmb}M" >"$cg/memory.limit_in_bytes"
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && mkdir "/sys/fs/cgroup/cdpbench.$$" 2>/dev/null; then
	cg=/sys/fs/cgroup/cdpbench.$$
	echo "${cgmb}M" >"$cg/memory.max" || { rmdir "$cg"; cg=; }
fi
[ -z "$cg" ] || trap 'rmdir "$cg" 2>/dev/null; [ -n "${BENCH_DIR:-}" ] || rm -rf "$dir"' EXIT
in_cg() { sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"; }

echo
echo "== 2. random reads of whole values, cold ($how) and warm =="
echo "   willneed: MADV_WILLNEED one batch (32) ahead, as the loader does"
for t in $tiles; do
	vs=$((3 * t * t + 164))
	# 128 MB of values, or the whole pool when it is smaller
	n=$(($(wc -l <"$dir/keys-$t") - 1))
	count=$((128 * 1048576 / vs))
	[ "$count" -le "$n" ] || count=$n
	echo "-- tiles 3x${t}x${t}: ${vs}-byte values, $count of $n read --"
	for ra in on off; do
		for wn in "" --no-willneed; do
			drop "$dir/pool-$t"
			printf 'cold '; "$lb" read -b 32 --count "$count" --readahead $ra $wn "$dir/pool-$t" "$dir/keys-$t"
			printf 'warm '; "$lb" read -b 32 --count "$count" --readahead $ra $wn "$dir/pool-$t" "$dir/keys-$t"
		done
	done
	echo "   the loader itself (batch 32, CRC on every read), cold:"
	for ra in on off; do
		for wn in "" --no-willneed; do
			drop "$dir/pool-$t"
			"$lb" load -b 32 --count "$count" --readahead $ra $wn "$dir/pool-$t" "$dir/keys-$t"
		done
	done
	if [ -n "$cg" ]; then
		c2=$((16 * 1048576 / vs))
		[ "$c2" -le "$n" ] || c2=$n
		echo "   the loader (batch 4) with the page cache limited to ${cgmb} MB, cold, $c2 values:"
		for ra in on off; do
			for wn in "" --no-willneed; do
				drop "$dir/pool-$t"
				in_cg "$lb" load -b 4 --count "$c2" --readahead $ra $wn "$dir/pool-$t" "$dir/keys-$t"
			done
		done
	fi
	for wn in "" --no-willneed; do
		echo "   CDP_RA_AUTO ${wn:-with willneed} picks readahead" \
			"$("$lb" load -b 32 --count 32 $wn "$dir/pool-$t" "$dir/keys-$t" | sed 's/.*readahead \([a-z]*\),.*/\1/')"
	done
done
