#!/bin/sh
# tests/train/step_per_bucket.sh: the optimizer applied to each gradient
# bucket as soon as it is reduced (--sync allreduce, issue 29).
#  - 2 ranks give the parameters and moments of the step after the last
#    bucket bit for bit (the checkpoints are equal), with sgd and adamw,
#    MPI's all-reduce and the ring, buckets reduced during and after
#    backward, and layers frozen (--freeze) so that a bucket cuts the
#    optimizer's segments;
#  - the trace shows it: every step has a wait and an optimizer span per
#    bucket, and bucket 0's update ends before the last bucket's wait;
#  - train.log says when the update runs, and why not per bucket where a
#    check needs the whole gradient first (clip_norm, --nan-policy skip,
#    accumulate=) or CDP_TRAIN_STEP_PER_BUCKET=0 turns it off;
#  - CDP_TRAIN_STEP_PER_BUCKET takes 0 or 1 (exit 1 and one line);
#  - rank 1 stopped by SIGSTOP: rank 0's watchdog ends the job after
#    CDP_DIST_TIMEOUT, also from the wait for one bucket.
. "$CDP_SRCDIR/tests/train/train_common.sh"
P="--db $T/pool --keys $T/train.keys --threads 1 -q --steps 6 --batch 4 --log-every 1"

CDP_TRAIN_STEP_PER_BUCKET=yes expect_fail 1 \
	"^cdp-train: CDP_TRAIN_STEP_PER_BUCKET: 'yes': want 0 or 1\$" cdp-train $P --model "$SMALL" --out "$T/x"
[ ! -e "$T/x" ] || fail "a refused run left '$T/x'"
if [ -z "$MP" ]; then
	echo "SKIP: 2-rank cases (no MPIRUN)"
	exit 0
fi

# same NAME OPTIONS...: the run per bucket (NAME.p) and after the last
# bucket (NAME.w) end with the same checkpoint; train.log says which ran
same() {
	s_n=$1
	shift
	$MP cdp-train $P "$@" --out "$T/$s_n.p" || fail "$s_n: per bucket"
	CDP_TRAIN_STEP_PER_BUCKET=0 $MP cdp-train $P "$@" --out "$T/$s_n.w" || fail "$s_n: whole"
	grep -q "optimizer: applied to each bucket as soon as it is reduced" "$T/$s_n.p/train.log" ||
		fail "$s_n: train.log does not say the update runs per bucket: $(grep optimizer: "$T/$s_n.p/train.log")"
	grep -q "optimizer: after the last bucket (CDP_TRAIN_STEP_PER_BUCKET=0)" "$T/$s_n.w/train.log" ||
		fail "$s_n: CDP_TRAIN_STEP_PER_BUCKET=0 not in train.log"
	cmp -s "$T/$s_n.p/checkpoint.cdpt" "$T/$s_n.w/checkpoint.cdpt" ||
		fail "$s_n: the update per bucket gave another model than after the last bucket"
	[ "$(losses "$T/$s_n.p/metrics.jsonl" | wc -l)" -eq 6 ] || fail "$s_n: want 6 steps"
	echo "$s_n: the same checkpoint per bucket and after the last bucket"
	rm -rf "$T/$s_n.p" "$T/$s_n.w"
}
S="$SMALL:depth=6,width=8"
same sgd --model "$S" --bucket-mb 0.001
same sgd.ring --model "$S" --bucket-mb 0.001 --allreduce ring
same sgd.serial --model "$S" --bucket-mb 0.001 --no-overlap
same adamw --model "$S" --bucket-mb 0.001 --optimizer adamw --weight-decay 0.05
# batchnorm, frozen first layers: a frozen segment and a bucket cut apart
same adamw.frozen --model "$UNET" --bucket-mb 0.002 --optimizer adamw --freeze 'conv0,bn1,conv2'

# the trace: per step, a wait and an update per bucket, in bucket order,
# bucket 0's update done before the last bucket's wait ends
$MP cdp-train $P --model "$S" --bucket-mb 0.001 --out "$T/tr" --trace "$T/tr.json" ||
	fail "--trace"
"$PYTHON" - "$T/tr.json" <<'PYEOF' || fail "trace: the update is not per bucket"
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
nb = 1 + max(int(e["name"].split()[1]) for e in ev if e["name"].startswith("bucket "))
for rank in (0, 1):
    for step in range(1, 7):
        mine = [e for e in ev if e["pid"] == rank and e["args"].get("step") == step]
        waits = sorted((e for e in mine if e["name"] == "grad all-reduce wait" and "bucket" in e["args"]),
                       key=lambda e: e["ts"])
        ups = sorted((e for e in mine if e["name"] == "optimizer" and "bucket" in e["args"]),
                     key=lambda e: e["ts"])
        assert [e["args"]["bucket"] for e in waits] == list(range(nb)), (rank, step, waits)
        assert [e["args"]["bucket"] for e in ups] == list(range(nb)), (rank, step, ups)
        last = waits[-1]
        assert ups[0]["ts"] + ups[0]["dur"] <= last["ts"] + last["dur"], (rank, step)
print("trace: %d buckets, each updated after its own wait, bucket 0 before the last wait ends" % nb)
PYEOF

# where a check needs the whole gradient, the update stays after it
why() {
	w_n=$1
	w_want=$2
	shift 2
	$MP cdp-train $P --bucket-mb 0.001 --out "$T/$w_n" "$@" || fail "$w_n"
	grep -q "optimizer: after the last bucket ($w_want" "$T/$w_n/train.log" ||
		fail "$w_n: train.log: $(grep optimizer: "$T/$w_n/train.log"), want '$w_want'"
	echo "$w_n: after the last bucket ($w_want...)"
	rm -rf "$T/$w_n"
}
why clip "clip_norm needs" --model "$S,clip_norm=1"
why skip "--nan-policy skip" --model "$S" --nan-policy skip
why accumulate "accumulate= divides" --model "$S,accumulate=2"

# a rank stopped (SIGSTOP) mid-run: the other, waiting for one bucket
# while the communication thread reduces the rest, ends the job after
# CDP_DIST_TIMEOUT (it waited for ever about half the time, when the stop
# caught it in that wait); no heartbeat, so that the watchdog alone can
# (test_dist --hang-bucket in tests/dist/dist.sh stops there every time)
export CDP_DIST_TIMEOUT=4 CDP_DIST_HEARTBEAT=0
timeout 120 $MP cdp-train $P --model "$SMALL:depth=6,width=8" --bucket-mb 0.001 --steps 100000 \
	--out "$T/stop" >"$T/stop.out" 2>&1 & mp=$!
r1=
trap 'kill -CONT $r1 2>/dev/null; kill $mp 2>/dev/null; rm -rf "$T"' EXIT
wait_step $mp "$T/stop/metrics.jsonl" 3 60
for p in $(pgrep -P "$(pgrep -P $mp mpirun || echo $mp)" cdp-train); do
	! tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 || r1=$p
done
[ -n "$r1" ] || fail "stop: no rank 1 among mpirun's children"
kill -STOP "$r1"
t0=$(date +%s)
set +e
wait $mp
rc=$?
set -e
t1=$(date +%s)
kill -CONT "$r1" 2>/dev/null || :
trap 'rm -rf "$T"' EXIT
[ "$rc" -ne 124 ] && [ $((t1 - t0)) -le 30 ] ||
	fail "stop: rank 1 stopped, the job ran $((t1 - t0)) s more (rc $rc): $(cat "$T/stop.out")"
grep -q "rank 0: .* did not finish within 4 s: rank 1 on host" "$T/stop.out" ||
	fail "stop: the watchdog did not end it: $(cat "$T/stop.out")"
echo "stop: ended $((t1 - t0)) s after rank 1's SIGSTOP: $(grep -o "rank 0: .* did not finish within 4 s" "$T/stop.out")"
