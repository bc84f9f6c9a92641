#!/bin/sh
# tests/tools/scene.sh: the scene-classification workflow's first steps on
# chips keyed by their file stems (cdp-keys(5), KEY GRAMMAR):
#  - the issue's command: chips named green_000.tif packed with --classes,
#    then cdp-keyshuffle --val, which refused the keys ("invalid key");
#  - --val-by on chip keys and CLASS/STEM keys, and its refusals; the
#    Python package's split_key;
#  - cdp-lmdbpack --folders DIR: classes from the sorted folder names in the
#    class_names meta, each chip's class, keys CLASS/STEM unique across
#    classes (one file name in two folders), and its refusals;
#  - cdp-keyshuffle --stratify: each class's share in the validation list,
#    the per-class report, the total that --val gives, and its refusals.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
NAMES="residential road green lake land"

"$PYTHON" "$GEN" --scene-tiles "$T/chips" --count 40 --size 16 --seed 4
# the list with class names, as a user writes it
while read -r f c; do
	echo "$f $(echo $NAMES | cut -d' ' -f$((c + 1)))"
done <"$T/chips/list.txt" >"$T/chips/named.txt"

echo "== chips keyed by their stems"
cdp-lmdbpack -q --classes residential,road,green,lake,land --list "$T/chips/named.txt" "$T/pool"
cdp-keyshuffle --seed 1 --val 0.2 --val-out "$T/val.keys" -o "$T/train.keys" "$T/pool" \
	2>"$T/ks.err" || fail "keyshuffle refused chip keys: $(cat "$T/ks.err")"
grep -q "40 keys (32 train, 8 validation)" "$T/ks.err" || fail "report: $(cat "$T/ks.err")"
{ sed 1d "$T/val.keys"; sed 1d "$T/train.keys"; } | sort >"$T/all.keys"
sed 's/\.tif .*//' "$T/chips/named.txt" | sort | cmp -s - "$T/all.keys" ||
	fail "the lists are not the chips' stems: $(head -3 "$T/all.keys")"
# a chip's scene is its whole key
first=$(sed -n 2p "$T/train.keys")
cdp-keyshuffle -q --val-by "$first" --val-out "$T/v1" -o "$T/t1" "$T/pool"
[ "$(sed 1d "$T/v1")" = "$first" ] || fail "--val-by $first held out $(sed 1d "$T/v1")"
expect_fail 2 "^cdp-keyshuffle: --val-by: 'a/b/c' is not a scene name$" \
	cdp-keyshuffle --val-by a/b/c --val-out "$T/v1" "$T/pool"

# the Python package reads keys by the same grammar
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - <<'EOF' || fail "cdpool.split_key"
from cdpool import split_key, CdpError
for k, want in (("dop_2020_03_07", ("dop_2020", 3, 7)), ("green_000", ("green_000", None, None)),
                ("lake/lake_017", ("lake/lake_017", None, None)), ("lake/img_1_2", ("lake/img", 1, 2))):
    assert split_key(k) == want, (k, split_key(k))
for k in ("a/b/c", "a b", "/a", "a/", ""):
    try:
        split_key(k)
        raise SystemExit("accepted %r" % k)
    except CdpError as e:
        assert e.code == "EKEY"
EOF

echo "== cdp-lmdbpack --folders"
for n in $NAMES; do mkdir -p "$T/F/$n"; done
while read -r f c; do
	cp "$T/chips/$f" "$T/F/$(echo $NAMES | cut -d' ' -f$((c + 1)))/"
done <"$T/chips/list.txt"
# one file name in two classes, a file that is not a .tif and a hidden one
cp "$T/F/lake/$(ls "$T/F/lake" | head -1)" "$T/F/road/"
echo notes >"$T/F/road/README"
cp "$T/F/land/$(ls "$T/F/land" | head -1)" "$T/F/land/.hidden.tif"
cdp-lmdbpack -q --folders "$T/F" "$T/fpool"
cat >"$T/meta.py" <<'EOF'
import sys, lmdb, struct
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=4)
with env.begin() as tx:
    meta = env.open_db(b"meta", txn=tx, create=False)
    tiles = env.open_db(b"tiles", txn=tx, create=False)
    print(tx.get(b"class_names", db=meta).decode().replace("\n", " ").split(" crc32=")[0])
    for k, v in tx.cursor(db=tiles):
        # record header: label kind (u8) at 9, class id (u32 LE) at 96 (cdp-record(5))
        print(k.decode(), v[9], struct.unpack_from("<I", v, 96)[0])
EOF
"$PYTHON" "$T/meta.py" "$T/fpool" >"$T/fmeta"
[ "$(head -1 "$T/fmeta")" = "class.0=green class.1=lake class.2=land class.3=residential class.4=road" ] ||
	fail "class_names: $(head -1 "$T/fmeta")"
[ "$(sed 1d "$T/fmeta" | wc -l)" -eq 41 ] || fail "$(sed 1d "$T/fmeta" | wc -l) records, want 41"
# the Python package reads them as ImageFolder's classes
got=$(PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
print(" ".join(cdpool.Pool(sys.argv[1], lock=False).class_names))' "$T/fpool") ||
	fail "cdpool.Pool on the folder pool: $got"
[ "$got" = "green lake land residential road" ] || fail "Pool.class_names: '$got'"
# every key is CLASS/STEM and its record holds that folder's class
sed 1d "$T/fmeta" | while read -r k kind id; do
	cls=${k%%/*}
	want=$(echo green lake land residential road | tr ' ' '\n' | grep -n "^$cls\$" | cut -d: -f1)
	[ -n "$want" ] && [ "$id" -eq $((want - 1)) ] || fail "key '$k' has class $id"
done
dup=$(ls "$T/F/lake" | head -1 | sed 's/\.tif$//')
grep -q "^lake/$dup " "$T/fmeta" && grep -q "^road/$dup " "$T/fmeta" ||
	fail "'$dup' is not in both lake/ and road/: $(grep "$dup" "$T/fmeta")"
! grep -q "hidden\|README" "$T/fmeta" || fail "a hidden or non-tif file was packed"
# --val-by names a CLASS/STEM chip
cdp-keyshuffle -q --val-by "road/$dup" --val-out "$T/v2" -o "$T/t2" "$T/fpool"
[ "$(sed 1d "$T/v2")" = "road/$dup" ] || fail "--val-by road/$dup held out $(sed 1d "$T/v2")"
# a second pack with other classes is refused; the same classes resume
mkdir -p "$T/G/alpha"
cp "$T/chips/$(sed -n '1s/ .*//p' "$T/chips/list.txt")" "$T/G/alpha/"
expect_fail 1 "these class names differ from the pool's" cdp-lmdbpack -q --folders "$T/G" "$T/fpool"
cdp-lmdbpack -q --resume --folders "$T/F" "$T/fpool"
mkdir -p "$T/H/empty" "$T/H/bad name"
expect_fail 1 "no .tif files in class 'bad name'\|class folder's name" \
	cdp-lmdbpack -q --folders "$T/H" "$T/hpool"
rmdir "$T/H/bad name"
expect_fail 1 "^cdp-lmdbpack: '$T/H/empty': no .tif files in class 'empty'\$" \
	cdp-lmdbpack -q --folders "$T/H" "$T/hpool"
[ ! -e "$T/hpool" ] || fail "a failed --folders left a pool"
expect_fail 2 "excludes --list" cdp-lmdbpack --folders "$T/F" --list "$T/chips/list.txt" "$T/x"

echo "== cdp-keyshuffle --stratify"
# 5 classes of 8 (41 with the copy: road has 9); 0.25 of each
cdp-keyshuffle -s 3 --val 0.25 --stratify --val-out "$T/sv" -o "$T/st" "$T/fpool" 2>"$T/s.err"
grep -q "41 keys (31 train, 10 validation)" "$T/s.err" || fail "report: $(cat "$T/s.err")"
for c in 0 1 2 3; do
	grep -q "^cdp-keyshuffle: class $c: 6 train, 2 validation\$" "$T/s.err" ||
		fail "class $c: $(cat "$T/s.err")"
done
grep -q "^cdp-keyshuffle: class 4: 7 train, 2 validation\$" "$T/s.err" || fail "$(cat "$T/s.err")"
for c in green lake land residential road; do
	[ "$(grep -c "^$c/" "$T/sv")" -eq 2 ] || fail "$c: $(grep -c "^$c/" "$T/sv") in validation"
done
# without --stratify the same seed's validation list is not balanced
cdp-keyshuffle -q -s 3 --val 0.25 --val-out "$T/rv" -o "$T/rt" "$T/fpool"
cmp -s "$T/rv" "$T/sv" && fail "--stratify changed nothing"
expect_fail 2 "^cdp-keyshuffle: --stratify needs --val\$" \
	cdp-keyshuffle --stratify --val-by road/$dup --val-out "$T/x" "$T/fpool"
"$PYTHON" "$MK" "$T/s.tif" --width 32 --height 32 --bands 1 --dtype u8 --seed 1 >&2
cdp-tile -q --size 16 "$T/s.tif" | cdp-lmdbpack -q "$T/tpool"
expect_fail 1 "^cdp-keyshuffle: '$T/tpool': --stratify needs one class or one set of classes (multi-label) per record; key 's_0_0' has no label\$" \
	cdp-keyshuffle --stratify --val 0.5 --val-out "$T/x" "$T/tpool"
echo "ok"
