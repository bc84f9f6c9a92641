#!/bin/sh
# cdp-train's failure modes (train_common.sh builds the pool):
#  - bad pointer files (another pool's, a key the pool lacks, truncated, a
#    damaged checksum, a key on two lines) and a model whose head does not fit the labels are
#    errors naming the problem before training: exit 1, no metrics.jsonl;
#  - no output (the log, metrics.jsonl) may be an input (the model cfg,
#    the pointer file through a symlink);
#  - usage errors exit 2; a GPU that does not exist is a clear error;
#  - a corrupt record stops the run naming its key; --skip-bad-records
#    counts and skips it instead;
#  - under 2 ranks: a corrupt record brings the whole job down naming the
#    rank and the key, and kill -9 of one rank ends the job non-zero, each
#    within 30 s. (Skipped when $MPIRUN is empty.)
. "$CDP_SRCDIR/tests/train/train_common.sh"
C0="--model $SMALL --out $T/run --threads 1 -q"
C="$C0 --steps 3"

echo "== bad pointer files"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" "$T/o.tif" --size 128 --seed 9 \
	--mask "$T/o_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/o.tif" | cdp-lmdbpack -q "$T/other"
cdp-keyshuffle -q -o "$T/other.keys" "$T/other"
head -c 200 "$T/train.keys" >"$T/trunc.keys"
"$PYTHON" - "$T/train.keys" "$T/missing.keys" "$T/crc.keys" "$T/dup.keys" <<'PYEOF'
import sys, zlib, re
lines = open(sys.argv[1]).read().split("\n")[:-1]
head, keys = lines[0], lines[1:]
def write(path, keys, crc=None):
    body = "".join(k + "\n" for k in keys).encode()
    h = re.sub(r"count=\d+", "count=%d" % len(keys), head)
    h = re.sub(r"crc32=[0-9a-f]+", "crc32=%08x" % (crc if crc is not None else zlib.crc32(body)), h)
    open(path, "wb").write(h.encode() + b"\n" + body)
write(sys.argv[2], keys[:-1] + ["c3_9_9"])
write(sys.argv[3], keys, crc=zlib.crc32(b"x"))
write(sys.argv[4], keys[:15] + [keys[1]] + keys[15:])
PYEOF
check_bad() {
	expect_fail 1 "$2" cdp-train --db "$T/pool" --keys "$T/$1" $C
	[ ! -e "$T/run/metrics.jsonl" ] || fail "$1: training started (metrics.jsonl written)"
	echo "$1: $(cat "$T/err")"
}
check_bad other.keys "'.*other.keys': made for pool"
check_bad missing.keys "c3_9_9"
check_bad trunc.keys "'.*trunc.keys': line [0-9]*: truncated"
check_bad crc.keys "'.*crc.keys'.*checksum"
check_bad dup.keys "^cdp-train: '.*dup.keys': key '$(sed -n 3p "$T/train.keys")' on lines 3 and 17\$"
expect_fail 1 "segmentation head" cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/run" \
	--model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg" -q
expect_fail 1 "cannot open '$T/nopool'" cdp-train --db "$T/nopool" --keys "$T/train.keys" $C

echo "== outputs that are inputs"
cp "$SMALL" "$T/m.cfg"
expect_fail 1 "^cdp-train: refusing to write '$T/m.cfg': it is the --model cfg '$T/m.cfg'\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$T/m.cfg" --out "$T/r1" \
	--log "$T/m.cfg" --threads 1 -q --steps 1
cmp -s "$T/m.cfg" "$SMALL" || fail "--log appended to the model cfg"
cp "$T/train.keys" "$T/keys.orig"
mkdir "$T/r2"
ln -s ../train.keys "$T/r2/metrics.jsonl"
expect_fail 1 "refusing to write '$T/r2/metrics.jsonl': it is the --keys file '$T/train.keys'" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/r2" --threads 1 -q --steps 1
cmp -s "$T/train.keys" "$T/keys.orig" || fail "metrics.jsonl replaced the pointer file"

echo "== usage"
expect_fail 2 "missing --db" cdp-train --keys "$T/train.keys" --model x --out "$T/run"
expect_fail 2 "--sync: 'admm:3' is not allreduce" cdp-train --db "$T/pool" --keys "$T/train.keys" $C --sync admm:3
expect_fail 2 "--batch: '0' is not an integer in 1\.\." cdp-train --db "$T/pool" --keys "$T/train.keys" $C --batch 0
expect_fail 1 "device cuda:1023 does not exist" cdp-train --db "$T/pool" --keys "$T/train.keys" $C \
	--device cuda:1023
cdp-train --db "$T/pool" --keys "$T/train.keys" $C --device auto || fail "--device auto did not run on the cpu"

echo "== a corrupt record"
bad=$(sed -n 5p "$T/train.keys")
cp -r "$T/pool" "$T/bad"
"$PYTHON" - "$T/bad" "$bad" <<'PYEOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=4, subdir=True)
db = env.open_db(b"tiles")
with env.begin(write=True, db=db) as txn:
    v = bytearray(txn.get(sys.argv[2].encode()))
    v[200] ^= 0xFF
    txn.put(sys.argv[2].encode(), bytes(v))
PYEOF
rm -rf "$T/run"
expect_fail 1 "record '$bad'" cdp-train --db "$T/bad" --keys "$T/train.keys" $C0 --batch 4 --epochs 1
rm -rf "$T/run"
cdp-train --db "$T/bad" --keys "$T/train.keys" $C0 --batch 4 --epochs 1 --skip-bad-records ||
	fail "--skip-bad-records did not skip"
grep -q '"skipped":[1-9]' "$T/run/metrics.jsonl" || fail "--skip-bad-records: nothing counted"

if [ -z "$MP" ]; then
	echo "SKIP: MPI cases (no MPIRUN)"
	exit 0
fi

# within30 PATTERN CMD...: CMD exits non-zero within 30 s with PATTERN on stderr
within30() {
	pat=$1; shift
	t0=$(date +%s)
	set +e; timeout 60 "$@" >"$T/out" 2>"$T/err"; rc=$?; set -e
	t1=$(date +%s)
	[ "$rc" -ne 124 ] || fail "the job hung"
	[ "$rc" -ne 0 ] || fail "the job exited 0"
	[ $((t1 - t0)) -le 30 ] || fail "the job took $((t1 - t0)) s to end"
	grep -q -- "$pat" "$T/err" || fail "stderr lacks '$pat': $(cat "$T/err")"
	echo "exit $rc after $((t1 - t0)) s: $(grep -m1 -- "$pat" "$T/err")"
}
echo "== a rank fails"
rm -rf "$T/run"
within30 "cdp-train: rank [01]: .*record '$bad'" $MP cdp-train --db "$T/bad" --keys "$T/train.keys" \
	$C0 --batch 4 --epochs 1
echo "== kill -9 of a rank"
rm -rf "$T/run"
$MP cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/run" \
	--steps 1000000 --threads 1 -q --log-every 1 >"$T/out" 2>"$T/err" &
job=$!
wait_step $job "$T/run/metrics.jsonl" 3 30
# the newest cdp-train child of this mpirun (one of its two ranks)
victim=$(pgrep -n -P $job cdp-train) || fail "kill -9: no rank of mpirun $job found"
t0=$(date +%s)
kill -9 "$victim"
( sleep 60; kill -9 $job 2>/dev/null ) &
wd=$!
set +e; wait $job; rc=$?; set -e
kill $wd 2>/dev/null || true
t1=$(date +%s)
[ "$rc" -ne 0 ] || fail "kill -9: the job exited 0"
[ $((t1 - t0)) -le 30 ] || fail "kill -9: the job took $((t1 - t0)) s to end"
echo "kill -9 of pid $victim: job exit $rc after $((t1 - t0)) s"
exit 0
