#!/bin/sh
# Nothing lost, nothing silent (issue 14): the programs refuse what would
# destroy data or crash without a word.
#  - a data.mdb cut below LMDB's last page is refused at open, naming the
#    pool and both sizes, by cdp-keyshuffle, cdp-train and cdp-lmdbpack
#    --resume (before: SIGBUS, or exit 0 from cdp-keyshuffle);
#  - no output replaces a file the run reads (by any name: a symlink, a hard
#    link, a VRT's source): cdp-tile's tiles or stream over a source,
#    a file an option names (--label-map, --stats) among them;
#    cdp-keyshuffle's -o or --val-out over the pool or each other;
#  - a failed run leaves nothing it created: cdp-train no RUNDIR, a first
#    cdp-lmdbpack no pool; a cdp-tile that fails mid-read ends its stream
#    with an 'F' frame, which cdp-lmdbpack reports as the producer's
#    failure, keeping only whole batches committed before it.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
"$PYTHON" "$GEN" "$T/s.tif" --size 512 --seed 5 --mask "$T/s_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/s.tif" >"$T/s.cdps"
cdp-lmdbpack -q "$T/pool" <"$T/s.cdps"
cdp-keyshuffle -q --seed 1 -o "$T/train.keys" "$T/pool"

echo "== truncated data.mdb"
cp -r "$T/pool" "$T/cut"
size=$(wc -c <"$T/cut/data.mdb")
half=$((size / 2 / 4096 * 4096))
truncate -s "$half" "$T/cut/data.mdb"
want="'$T/cut': data.mdb is truncated: $half bytes, its last page ends at byte [0-9]*"
expect_fail 1 "cdp-keyshuffle: .*$want" cdp-keyshuffle -q -o "$T/cut.keys" "$T/cut"
[ ! -e "$T/cut.keys" ] || fail "cdp-keyshuffle wrote keys from a truncated pool"
expect_fail 1 "cdp-train: .*$want" cdp-train --db "$T/cut" --keys "$T/train.keys" \
	--model "$SMALL" --out "$T/run" --threads 1 -q --steps 1
expect_fail 1 "cdp-lmdbpack: .*$want" cdp-lmdbpack -q --resume "$T/cut" <"$T/s.cdps"
[ "$(wc -c <"$T/cut/data.mdb")" -eq "$half" ] || fail "cdp-lmdbpack --resume wrote to a truncated pool"
echo "truncated: $(cat "$T/err")"
# an empty data.mdb (a copy cut short): LMDB said "Bad file descriptor"
cp -r "$T/pool" "$T/zero"
: >"$T/zero/data.mdb"
want="'$T/zero': data.mdb is truncated: 0 bytes, shorter than LMDB's two meta pages ([0-9]* bytes)"
expect_fail 1 "^cdp-keyshuffle: cannot open $want\$" cdp-keyshuffle -q -o "$T/zero.keys" "$T/zero"
expect_fail 1 "^cdp-train: cannot open $want\$" cdp-train --db "$T/zero" --keys "$T/train.keys" \
	--model "$SMALL" --out "$T/run" --threads 1 -q --steps 1

echo "== outputs that are inputs"
mkdir "$T/o"
cp "$T/s.tif" "$T/o/s_0_0.tif"
cp "$T/s.tif" "$T/s.orig"
intact() { cmp -s "$1" "$T/s.orig" || fail "$2 changed '$1'"; }
expect_fail 1 "^cdp-tile: refusing to write '$T/o/s_0_0.tif': it is the input '$T/o/s_0_0.tif'\$" \
	cdp-tile -q --size 64 --format tif --name s -O "$T/o" "$T/o/s_0_0.tif"
intact "$T/o/s_0_0.tif" "cdp-tile -O over its source"
[ "$(ls "$T/o")" = s_0_0.tif ] || fail "a refused cdp-tile -O left tiles: $(ls "$T/o")"
rm "$T/o/s_0_0.tif"
ln -s ../s.tif "$T/o/s_0_0.png"
expect_fail 1 "refusing to write '$T/o/s_0_0.png': it is the input '$T/s.tif'" \
	cdp-tile -q --size 64 --format png -O "$T/o" "$T/s.tif"
intact "$T/s.tif" "cdp-tile -O through a symlink"
rm "$T/o/s_0_0.png"
gdalbuildvrt -q "$T/s.vrt" "$T/s.tif"
ln "$T/s.tif" "$T/o/s_0_0_label.png"
expect_fail 1 "refusing to write '$T/o/s_0_0_label.png': it is '.*s.tif', read through the input '$T/s.vrt'" \
	cdp-tile -q --size 64 --format png --label "$T/s_mask.tif" -O "$T/o" "$T/s.vrt"
intact "$T/s.tif" "cdp-tile -O over a hard link of a VRT's source"
# a tile's commit removes the side files of the tile it replaces: one
# that is an input (a label named like a mask) is refused, not deleted
cp "$T/s_mask.tif" "$T/o/s_0_0.tif.msk"
expect_fail 1 "^cdp-tile: refusing to write '$T/o/s_0_0.tif': its side file '$T/o/s_0_0.tif.msk' goes with it, and that is .*'$T/o/s_0_0.tif.msk'\$" \
	cdp-tile -q --size 64 --format tif --name s --label "$T/o/s_0_0.tif.msk" -O "$T/o" "$T/s.tif"
cmp -s "$T/s_mask.tif" "$T/o/s_0_0.tif.msk" || fail "cdp-tile -O removed an input as a tile's side file"
rm -f "$T/o/s_0_0.tif.msk" "$T/o/s_0_0.tif"
expect_fail 1 "refusing to write the record stream: standard output is the input '$T/s.tif'" \
	sh -c 'cdp-tile -q --size 64 "$1" >>"$1"' sh "$T/s.tif"
intact "$T/s.tif" "cdp-tile >> its source"
# a file an option names is read too: >> onto the --label-map file appended
# the stream to it (exit 0); the --stats file was refused already
printf '0 0 background\n1 1 object\n' >"$T/map.txt"
cp "$T/map.txt" "$T/map.orig"
expect_fail 1 "^cdp-tile: refusing to write the record stream: standard output is the --label-map file '$T/map.txt'\$" \
	sh -c 'cdp-tile -q --size 64 --label "$2" --label-map "$3" "$1" >>"$3"' sh "$T/s.tif" \
	"$T/s_mask.tif" "$T/map.txt"
cmp -s "$T/map.txt" "$T/map.orig" || fail "cdp-tile >> its --label-map file changed it"

cp "$T/pool/data.mdb" "$T/data.orig"
expect_fail 1 "^cdp-keyshuffle: refusing to write '$T/pool/data.mdb': it is '$T/pool/data.mdb' of the pool\$" \
	cdp-keyshuffle -q -o "$T/pool/data.mdb" "$T/pool"
cmp -s "$T/pool/data.mdb" "$T/data.orig" || fail "cdp-keyshuffle -o replaced the pool's data.mdb"
ln -s pool/data.mdb "$T/link.keys"
expect_fail 1 "refusing to write '$T/link.keys': it is '$T/pool/data.mdb' of the pool" \
	cdp-keyshuffle -q --val 0.25 --val-out "$T/link.keys" -o "$T/t.keys" "$T/pool"
cmp -s "$T/pool/data.mdb" "$T/data.orig" || fail "cdp-keyshuffle --val-out replaced data.mdb"
expect_fail 1 "^cdp-keyshuffle: -o '$T/t.keys' and --val-out '$T/./t.keys' are the same file\$" \
	cdp-keyshuffle -q --val 0.25 --val-out "$T/./t.keys" -o "$T/t.keys" "$T/pool"
cp "$T/train.keys" "$T/t.keys"
ln "$T/t.keys" "$T/v.keys"
expect_fail 1 "-o '$T/t.keys' and --val-out '$T/v.keys' are the same file" \
	cdp-keyshuffle -q --val 0.25 --val-out "$T/v.keys" -o "$T/t.keys" "$T/pool"
cmp -s "$T/t.keys" "$T/train.keys" || fail "a refused cdp-keyshuffle changed -o"
[ ! -e "$T/pool/t.keys" ] && [ -z "$(ls "$T" | grep 'keys\.')" ] || fail "temporaries left: $(ls "$T")"

echo "== leftovers"
expect_fail 1 "cdp-train: .*missing.keys" cdp-train --db "$T/pool" --keys "$T/missing.keys" \
	--model "$SMALL" --out "$T/newrun" --threads 1 -q --steps 1
[ ! -e "$T/newrun" ] || fail "a refused cdp-train left its new RUNDIR: $(ls -A "$T/newrun")"
mkdir "$T/oldrun"
expect_fail 1 "cdp-train: .*missing.keys" cdp-train --db "$T/pool" --keys "$T/missing.keys" \
	--model "$SMALL" --out "$T/oldrun" --threads 1 -q --steps 1
[ -d "$T/oldrun" ] || fail "a refused cdp-train removed a RUNDIR it did not create"

# a source that fails mid-read: its first strips read, the rest are cut off
sz=$(wc -c <"$T/s.tif")
cp "$T/s.tif" "$T/bad.tif"
truncate -s $((sz * 6 / 10)) "$T/bad.tif"
set +e
cdp-tile -q --size 32 "$T/bad.tif" >"$T/bad.cdps" 2>"$T/tile.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "cdp-tile on a source that fails mid-read exited $rc"
grep -q "^cdp-tile: cannot read '$T/bad.tif'" "$T/tile.err" || fail "cdp-tile: $(cat "$T/tile.err")"
"$PYTHON" - "$T/bad.cdps" <<'PY' || fail "the failed stream does not end with an 'F' frame"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
i, last = 8, None
while i < len(b):
    t, _, n, m = struct.unpack_from("<BBHI", b, i)
    assert zlib.crc32(b[i:i + 8 + n + m]) == struct.unpack_from("<I", b, i + 8 + n + m)[0]
    last = (chr(t), b[i + 8 + n:i + 8 + n + m])
    i += 12 + n + m
assert i == len(b) and last[0] == "F" and last[1].startswith(b"error=cannot read "), last
PY
expect_fail 1 "^cdp-lmdbpack: '<stdin>': the record stream's producer failed after [0-9]* records (cannot read '$T/bad.tif': .*); nothing was committed\$" \
	cdp-lmdbpack -q "$T/newpool" <"$T/bad.cdps"
[ ! -e "$T/newpool" ] || fail "a failed first pack left '$T/newpool': $(ls -A "$T/newpool")"
expect_fail 1 "producer failed after [0-9]* records (.*); the [0-9]* committed stay, re-run with --resume" \
	cdp-lmdbpack -q --txn-records 20 "$T/part" <"$T/bad.cdps"
kept=$(sed 's/.*; the \([0-9]*\) committed stay.*/\1/' "$T/err")
read=$(sed 's/.*failed after \([0-9]*\) records.*/\1/' "$T/err")
[ "$kept" -gt 0 ] && [ $((kept % 20)) -eq 0 ] && [ "$kept" -le "$read" ] && [ $((read - kept)) -lt 20 ] ||
	fail "kept $kept of $read records, want the whole batches of 20"
[ "$(cdp-keyshuffle -q --no-shuffle "$T/part" | sed 1d | wc -l)" -eq "$kept" ] ||
	fail "the partial pool does not hold the $kept committed records"
exit 0
