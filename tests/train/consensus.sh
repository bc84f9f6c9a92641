#!/bin/sh
# The consensus modes' arithmetic, checked number by number: cdp-train at
# 2 ranks with --sync average:2 and admm:2:0.5 for 5 steps (two averaging
# rounds and one local step after them) on a one-layer classifier (a dense
# layer on 8x8 scene tiles, plain SGD), against consensus.py's NumPy
# replay of the same steps on the batches each rank logged
# (CDP_TRAIN_LOG_KEYS): the checkpoint's model and every rank's own
# parameters and ADMM dual within 1e-5. The replay starts from the
# parameters of a run at --lr 0. A replay without ADMM's dual update must
# not match (the check can fail). train.log's start line names the --sync
# mode. Needs MPI (skipped without) and NumPy in $PYTHON.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" >/dev/null 2>&1; then
	echo "SKIP: no MPIRUN"
	exit 77
fi
MP="$MPIRUN --oversubscribe -np 2"
[ "$(id -u)" -ne 0 ] || MP="$MPIRUN --allow-run-as-root --oversubscribe -np 2"
export CDP_DIST_TIMEOUT=60
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH

"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" --scene-tiles "$T/sc" --count 20 \
	--size 8 --seed 5
# chip i of the list becomes sc_i_0.tif, a key every tool parses
"$PYTHON" -c 'import os, sys
d = sys.argv[1]
with open(d + "/keys.txt", "w") as out:
    for i, line in enumerate(open(d + "/list.txt")):
        f, c = line.split()
        os.rename(os.path.join(d, f), "%s/sc_%d_0.tif" % (d, i))
        out.write("sc_%d_0.tif %s\n" % (i, c))' "$T/sc"
cdp-lmdbpack -q --classes residential,road,green,lake,land --list "$T/sc/keys.txt" "$T/pool"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
cat >"$T/tiny.cfg" <<'CFG'
[net]
channels=3
in_h=8
in_w=8
classes=5
loss=ce
optimizer=sgd
momentum=0
[dense]
output=5
CFG
R="--db $T/pool --keys $T/keys --model $T/tiny.cfg --threads 1 -q --schedule constant --warmup 0"
cdp-train $R --out "$T/init" --batch 8 --steps 1 --lr 0 || fail "the run at --lr 0 failed"
for sync in average:2 admm:2:0.5; do
	CDP_TRAIN_LOG_KEYS="$T/k.$sync" $MP cdp-train $R --out "$T/$sync" --batch 4 --steps 5 \
		--lr 0.2 --sync "$sync" || fail "$sync: training failed"
	grep -q "start at step 0 of 5 (.*), 2 ranks, global batch 8, --sync $sync\$" \
		"$T/$sync/train.log" ||
		fail "$sync: train.log does not name it: $(grep 'start at' "$T/$sync/train.log")"
	"$PYTHON" "$CDP_SRCDIR/tests/train/consensus.py" "$T/pool" "$T/init/checkpoint.cdpt" \
		"$T/$sync/checkpoint.cdpt" "$T/k.$sync" 0.2 || fail "$sync: cdp-train differs from the replay"
done
if "$PYTHON" "$CDP_SRCDIR/tests/train/consensus.py" "$T/pool" "$T/init/checkpoint.cdpt" \
	"$T/admm:2:0.5/checkpoint.cdpt" "$T/k.admm:2:0.5" 0.2 --drop-dual >"$T/neg"; then
	fail "ADMM without its dual update matched cdp-train"
fi
grep -q 'rank 0 u .*FAIL' "$T/neg" || fail "the negative control failed for another reason: $(cat "$T/neg")"
echo "negative control: ADMM without the dual update does not match"
exit 0
