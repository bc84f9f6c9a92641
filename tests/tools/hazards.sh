#!/bin/sh
# Nothing lost, nothing silent (issue 14): the programs refuse what would
# destroy data or crash without a word.
#  - a data.mdb cut below LMDB's last page is refused at open, naming the
#    pool and both sizes, by cdp-keyshuffle, cdp-train and cdp-lmdbpack
#    --resume (before: SIGBUS, or exit 0 from cdp-keyshuffle);
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
exit 0
