#!/bin/sh
# cdp-lmdbpack and the pool's readers on the inputs of issue 25:
#  - a --map-size the machine cannot map is refused before anything is
#    created, and a pool whose stored map size cannot be mapped (left by an
#    older cdp-lmdbpack) still packs, shuffles and reads from Python;
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"

# --- case 7: a map size nobody can map ---------------------------------------
"$PYTHON" "$MK" "$T/a.tif" --width 64 --height 64 --bands 2 --dtype u8 --seed 1
cdp-tile -q --size 32 "$T/a.tif" >"$T/a.cdps"
expect_fail 1 "cdp-lmdbpack: cannot open '$T/huge': --map-size 1000 TiB (1099511627776000 bytes) is more than this process can map: Cannot allocate memory" \
	cdp-lmdbpack -q --map-size 1000T "$T/huge" <"$T/a.cdps"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "--map-size 1000T: more than one line"
[ ! -e "$T/huge" ] || fail "a refused --map-size left $(ls -A "$T/huge")"
# What an older cdp-lmdbpack left: data.mdb's meta pages hold the size.
"$PYTHON" - "$T/huge" <<'PY' || fail "could not make a pool with a 1000 TiB map size"
import errno, sys, lmdb
try:
    lmdb.open(sys.argv[1], map_size=1000 << 40, max_dbs=2)
except lmdb.Error as e:
    sys.exit(0 if "Cannot allocate memory" in str(e) else "unexpected: %s" % e)
sys.exit("a 1000 TiB map was allowed")
PY
cdp-lmdbpack -q "$T/huge" <"$T/a.cdps" || fail "packing into the old pool failed"
cdp-keyshuffle -q -o "$T/keys" "$T/huge" 2>"$T/err" || fail "cdp-keyshuffle: $(cat "$T/err")"
[ "$(grep -vc '^#' "$T/keys")" -eq 4 ] || fail "cdp-keyshuffle: want 4 keys: $(cat "$T/keys")"
"$PYTHON" -c "import cdpool, sys; p = cdpool.Pool(sys.argv[1]); assert p.tiles == 4 and p[next(iter(p.keys()))] is not None" "$T/huge" ||
	fail "Python cannot read the pool"
# A failed first pack removes everything it created.
expect_fail 1 "not a record stream" cdp-lmdbpack -q "$T/nopool" </dev/null
[ ! -e "$T/nopool" ] || fail "a failed first pack left the pool"
