#!/bin/sh
# Failures across the pipeline: a producer that dies, a consumer that dies,
# input that is not a record stream, binary output to a terminal. Each must
# give one clear line, a non-zero exit, and leave the pool consistent.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
"$PYTHON" "$MK" "$T/a.tif" --width 400 --height 300 --bands 3 --dtype u8 --seed 1

# A stream cut short (the producer was killed): nothing of the partial batch
# lands, the message says the stream is truncated, and --resume completes it.
cdp-tile -q --size 32 "$T/a.tif" >"$T/full.cdps"
full=$(wc -c <"$T/full.cdps")
head -c $((full * 2 / 3)) "$T/full.cdps" >"$T/cut.cdps"
expect_fail 1 "truncated" cdp-lmdbpack -q --txn-records 20 "$T/pool" <"$T/cut.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "truncated stream: more than one line of error"
cdp-keyshuffle -q --no-shuffle -o "$T/partial.keys" "$T/pool"
partial=$(sed 1d "$T/partial.keys" | wc -l)
[ "$partial" -gt 0 ] && [ $((partial % 20)) -eq 0 ] || fail "partial pool holds $partial keys, want whole batches of 20"
cdp-lmdbpack -q --resume "$T/pool" <"$T/full.cdps"
cdp-lmdbpack -q "$T/ref" <"$T/full.cdps"
cdp-keyshuffle -q --no-shuffle -o "$T/resumed.keys" "$T/pool"
cdp-keyshuffle -q --no-shuffle -o "$T/ref.keys" "$T/ref"
[ "$(sed 1d "$T/resumed.keys")" = "$(sed 1d "$T/ref.keys")" ] || fail "resumed pool keys differ from a clean pack"

# Not a record stream at all.
head -c 1000 /dev/urandom >"$T/noise"
expect_fail 1 "cdp-lmdbpack: " cdp-lmdbpack -q "$T/pool2" <"$T/noise"
expect_fail 1 "cdp-lmdbpack: " cdp-lmdbpack -q "$T/pool2" </dev/null

# The consumer dies: cdp-tile reports the broken pipe and fails, no crash.
# (The scene's stream, ~9 MB, must outgrow the 1 MiB pipe cdp-tile asks for.)
"$PYTHON" "$MK" "$T/big.tif" --width 2000 --height 1500 --bands 3 --dtype u8 --seed 2
set +e
cdp-tile -q --size 16 "$T/big.tif" 2>"$T/tile.err" | head -c 100 >/dev/null
set -e
grep -q "cdp-tile: .*\(pipe\|Broken\)" "$T/tile.err" || fail "cdp-tile on a closed pipe: $(cat "$T/tile.err")"

# Binary records to a terminal are refused (script(1) gives us a pty).
if command -v script >/dev/null 2>&1; then
	script -qec "cdp-tile -q '$T/a.tif'" /dev/null >"$T/tty.out" 2>&1 && fail "cdp-tile wrote records to a terminal"
	grep -q "terminal" "$T/tty.out" || fail "cdp-tile on a terminal: $(cat "$T/tty.out")"
fi
exit 0
