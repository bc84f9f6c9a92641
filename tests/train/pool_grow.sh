#!/bin/sh
# cdp-lmdbpack appending to the pool of a running cdp-train, its map
# doubling: the run reads every meta (checkpoints, standardization, labels)
# in its one read txn, so it never adopts the grown map under the loader's
# records (it crashed, or stopped with a false "data.mdb shrank"). The
# growth happens at a known point: the run is stopped (SIGSTOP) after step
# 2, the append grows the map, the run goes on for more steps, each a
# checkpoint, and SIGTERM ends it with a checkpoint (exit 1) and no error.
. "$CDP_SRCDIR/tests/train/train_common.sh"

# mapsize POOL: the map size mdb_stat records
mapsize() { mdb_stat -e "$1" | sed -n 's/^ *Map size: *//p'; }
command -v mdb_stat >/dev/null 2>&1 || { echo "no mdb_stat"; exit 77; }

"$PYTHON" "$GEN" "$T/g5.tif" --size 256 --seed 5 --mask "$T/g5_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/c3.tif" >"$T/a.cdps"
cdp-tile -q --size 64 --label-suffix _mask "$T/c4.tif" "$T/g5.tif" >"$T/b.cdps"
cdp-lmdbpack -q --map-size 64K "$T/gp" <"$T/a.cdps"
cdp-keyshuffle -q --seed 1 -o "$T/g.keys" "$T/gp"
before=$(mapsize "$T/gp")

cdp-train --db "$T/gp" --keys "$T/g.keys" --model "$SMALL" --threads 1 -q --batch 4 \
	--steps 100000 --log-every 1 --checkpoint-every 1 --out "$T/run" 2>"$T/err" &
pid=$!
wait_step $pid "$T/run/metrics.jsonl" 2 60
kill -STOP $pid
cdp-lmdbpack -q --map-size 64K "$T/gp" <"$T/b.cdps" || { kill -9 $pid; fail "the append failed"; }
after=$(mapsize "$T/gp")
[ "$after" -gt "$before" ] || { kill -9 $pid; fail "the append did not grow the map ($before)"; }
last=$(grep -c '"type":"step"' "$T/run/metrics.jsonl")
kill -CONT $pid
wait_step $pid "$T/run/metrics.jsonl" $((last + 3)) 60
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "exit $rc after the map grew, want 1 (SIGTERM): $(cat "$T/err")"
grep -q "interrupted: checkpoint at step" "$T/run/train.log" || fail "no checkpoint at SIGTERM"
! grep -q "^cdp-train: '" "$T/err" || fail "an error after the map grew: $(cat "$T/err")"
echo "map $before -> $after bytes under the run: $(grep -c '"type":"step"' "$T/run/metrics.jsonl") steps, no error"
exit 0
