#!/bin/sh
# tests/train/trace.sh: cdp-train --trace FILE (issue 16), the Chrome
# trace event format Perfetto opens. Checked with Python's json module:
#  - a 2-rank run's trace parses; every step 1..6 has, on every rank
#    (pid), the spans data, forward, loss all-reduce, backward (with one
#    "bwd LAYER" span per layer inside it), grad all-reduce wait,
#    optimizer and at least one bucket; validation and checkpoint at
#    steps 3 and 6; process names name the rank;
#  - spans on one track (pid, tid) nest or are disjoint, as the format
#    wants (buckets in flight together go on separate all-reduce tracks);
#  - with overlap (the default) a bucket starts on every rank in every
#    step before the backward pass reaches its last layer; with
#    --no-overlap no bucket starts before the backward pass has ended;
#  - a trace does not change the run (the same losses as without);
#  - 1 process writes one too, in the RUNDIR it makes; an unwritable
#    FILE fails before training
#    (exit 1, one line) and leaves nothing behind;
#  - python -m cdpool trace reads them back: on a trace made here with
#    known spans, the step's median, step/forward, each rank's buckets in
#    flight, wait and hidden fraction, --skip and the equal-speed
#    efficiency against a 1-rank trace are the numbers worked out by hand;
#    on the runs above, 2 ranks and 6 steps, the host's name, and with
#    --no-overlap and the update after the last bucket nearly nothing
#    hidden (updated per bucket, the later buckets' flight hides behind
#    the earlier ones' updates even then); a file that is not a trace, a
#    --skip past the end (exit 1, one line naming the file) and a bad
#    --skip (exit 2) are refused.
. "$CDP_SRCDIR/tests/train/train_common.sh"
P="--db $T/pool --keys $T/train.keys --val-keys $T/val.keys --threads 1 -q --model $UNET"
P="$P --batch 4 --steps 6 --val-every 3 --checkpoint-every 3 --log-every 2 --bucket-mb 0.001"

# check FILE RANKS MODE: MODE overlap, serial or any
check() {
	"$PYTHON" - "$@" <<'PYEOF'
import json, sys
path, ranks, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def fail(msg):
    sys.exit("FAIL: %s: %s" % (path, msg))
d = json.load(open(path))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
for r in range(ranks):
    if not names.get(r, "").startswith("rank %d (" % r):
        fail("process %d is named %r" % (r, names.get(r)))
if {e["pid"] for e in x} != set(range(ranks)):
    fail("spans of pids %s, want 0..%d" % (sorted({e["pid"] for e in x}), ranks - 1))
for e in x:
    if e["dur"] < 0 or e["ts"] < 0:
        fail("span %r has a negative time" % e)
# spans on one track nest or are disjoint (1 ns of rounding allowed)
tracks = {}
for e in x:
    tracks.setdefault((e["pid"], e["tid"]), []).append(e)
for k, es in tracks.items():
    es.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in es:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 1e-3:
            stack.pop()
        if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + 1e-3:
            fail("track %s: %r overlaps %r without nesting" % (k, e, stack[-1]))
        stack.append(e)
want = ["step", "data", "forward", "loss all-reduce", "backward", "grad all-reduce wait",
        "optimizer"]
hidden = 0
for r in range(ranks):
    for s in range(1, 7):
        mine = [e for e in x if e["pid"] == r and e["args"]["step"] == s]
        kinds = {e["name"] for e in mine}
        for w in want + (["validation", "checkpoint"] if s % 3 == 0 else []):
            if w not in kinds:
                fail("rank %d step %d has no %r span (has %s)" % (r, s, w, sorted(kinds)))
        bwd = [e for e in mine if e["name"] == "backward"][0]
        layers = sorted((e for e in mine if e["name"].startswith("bwd ")), key=lambda e: e["ts"])
        buckets = [e for e in mine if e["name"].startswith("bucket ")]
        if len(layers) < 10 or not buckets:
            fail("rank %d step %d: %d layer spans, %d buckets" % (r, s, len(layers), len(buckets)))
        end = bwd["ts"] + bwd["dur"]
        for e in layers:
            if e["ts"] < bwd["ts"] - 1e-3 or e["ts"] + e["dur"] > end + 1e-3:
                fail("rank %d step %d: %r outside the backward span" % (r, s, e["name"]))
        first = min(e["ts"] for e in buckets)
        if mode == "overlap" and not first < layers[-1]["ts"]:
            fail("rank %d step %d: the first bucket starts at %.3f, after backward reached "
                 "its last layer at %.3f" % (r, s, first, layers[-1]["ts"]))
        if mode == "serial" and first < end:
            fail("rank %d step %d: bucket at %.3f inside backward (ends %.3f) with --no-overlap"
                 % (r, s, first, end))
        hidden += sum(max(0.0, min(end, e["ts"] + e["dur"]) - max(bwd["ts"], e["ts"]))
                      for e in buckets)
print("%s: %d spans, %d ranks x 6 steps with every phase; %s: %.0f us of bucket spans "
      "inside backward" % (path.rsplit("/", 1)[-1], len(x), ranks, mode, hidden))
PYEOF
}

if [ -n "$MP" ]; then
	$MP cdp-train $P --out "$T/ov" --trace "$T/ov.json" || fail "2 ranks with --trace"
	check "$T/ov.json" 2 overlap
	CDP_TRAIN_STEP_PER_BUCKET=0 $MP cdp-train $P --out "$T/se" --trace "$T/se.json" --no-overlap ||
		fail "--no-overlap --trace"
	check "$T/se.json" 2 serial
	$MP cdp-train $P --out "$T/pl" || fail "2 ranks without --trace"
	losses "$T/ov/metrics.jsonl" >"$T/lo"
	losses "$T/pl/metrics.jsonl" >"$T/lp"
	cmp -s "$T/lo" "$T/lp" || fail "--trace changed the losses"
	ls "$T" | grep -q '\.cdp-tmp\.' && fail "a temporary trace was left: $(ls "$T")"
else
	echo "SKIP: 2-rank cases (no MPIRUN)"
fi
cdp-train $P --out "$T/one" --trace "$T/one/trace.json" || fail "1 process, --trace in a new RUNDIR"
check "$T/one/trace.json" 1 any
expect_fail 1 "cannot write trace '$T/no/such/t.json'" \
	cdp-train $P --out "$T/bad" --trace "$T/no/such/t.json"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "more than one line: $(cat "$T/err")"
[ ! -e "$T/bad" ] || fail "a refused run left its RUNDIR"

echo "== python -m cdpool trace"
cdptrace() { PYTHONPATH=$CDP_SRCDIR/python "$PYTHON" -m cdpool trace "$@"; }
# 2 ranks, 3 steps (us): rank 0's steps 400k, 500k, 900k, forward 100k,
# buckets in flight 150k-350k of each step, 20k left after backward; rank
# 1's steps 450k, forward 90k, 150k, 100k, buckets 100k-200k, 50k left.
# The slowest rank's step: 450k, 500k, 900k (median 0.5 s); over the
# slowest forward: 4.5, 3.33, 9 (median 4.5); --skip 1: 0.7 s and 6.1667.
# Hidden: 1 - 20/200 = 0.90 and 1 - 50/100 = 0.50. The 1-rank base: 300k
# over 100k, so equal-speed 3 / 4.5 = 0.6667.
"$PYTHON" - "$T/syn.json" "$T/base.json" <<'PYEOF'
import json, sys
def span(name, r, tid, ts, dur, step):
    return {"name": name, "cat": "train", "ph": "X", "pid": r, "tid": tid, "ts": ts, "dur": dur,
            "args": {"step": step}}
def trace(path, ranks):
    ev = []
    for r, (steps, fwds, bk, wait) in enumerate(ranks):
        ev.append({"name": "process_name", "ph": "M", "pid": r, "args": {"name": "rank %d (h%d)" % (r, r + 1)}})
        for s in (1, 2, 3):
            t = s * 1e6
            ev += [span("step", r, 0, t, steps[s - 1], s), span("forward", r, 0, t, fwds[s - 1], s),
                   span("backward", r, 0, t + 1e5, 2e5, s), span("bwd conv1", r, 0, t + 1e5, 5e4, s),
                   span("grad all-reduce wait", r, 0, t + 3e5, wait, s)]
            for b, (a, d) in enumerate(bk):
                ev.append(span("bucket %d" % b, r, b + 1, t + a, d, s))
    json.dump({"traceEvents": ev, "otherData": {"program": "cdp-train", "ranks": len(ranks),
                                                "complete": True}}, open(path, "w"))
trace(sys.argv[1], [([4e5, 5e5, 9e5], [1e5] * 3, [(1.5e5, 5e4), (2.5e5, 1e5)], 2e4),
                    ([4.5e5] * 3, [9e4, 1.5e5, 1e5], [(1e5, 1e5)], 5e4)])
trace(sys.argv[2], [([3e5] * 3, [1e5] * 3, [], 0)])
PYEOF
cdptrace --against "$T/base.json" "$T/syn.json" >"$T/syn.out" || fail "cdpool trace: $(cat "$T/syn.out")"
for want in "ranks: 2" "steps: 3 (1-3)" "step: 0.500000 s" "step/forward: 4.5000" \
	"rank 1: host h2" \
	"rank 0: buckets in flight 0.200000 s, after backward 0.020000 s, hidden 0.90" \
	"rank 1: buckets in flight 0.100000 s, after backward 0.050000 s, hidden 0.50" \
	"equal-speed: 0.6667 (against '$T/base.json': 1 rank(s), step/forward 3.0000)"; do
	grep -qxF "$want" "$T/syn.out" || fail "cdpool trace: no line '$want' in: $(cat "$T/syn.out")"
done
grep -q "^rank 0: data 0.000000 s, forward 0.100000 s, .*backward 0.200000 s" "$T/syn.out" ||
	fail "cdpool trace: rank 0's phases: $(grep '^rank 0: data' "$T/syn.out")"
cdptrace --skip 1 "$T/syn.json" >"$T/syn1.out" || fail "cdpool trace --skip 1"
for want in "steps: 2 (2-3)" "step: 0.700000 s" "step/forward: 6.1667"; do
	grep -qxF "$want" "$T/syn1.out" || fail "--skip 1: no line '$want' in: $(cat "$T/syn1.out")"
done
cdptrace "$T/base.json" | grep -qx "rank 0: buckets: none" || fail "1 rank: buckets not 'none'"
if [ -n "$MP" ]; then
	cdptrace "$T/ov.json" >"$T/ov.out" || fail "cdpool trace ov.json: $(cat "$T/ov.out")"
	cdptrace "$T/se.json" >"$T/se.out" || fail "cdpool trace se.json: $(cat "$T/se.out")"
	for w in "ranks: 2" "steps: 6 (1-6)" "rank 0: host $(hostname)" "rank 1: host $(hostname)"; do
		grep -qxF "$w" "$T/ov.out" || fail "cdpool trace ov.json: no '$w' in: $(cat "$T/ov.out")"
	done
	# --no-overlap: each bucket starts after backward, so its wait is its time
	# in flight (less the last bucket's completion, seen a little later)
	awk '/buckets in flight/ { n++; if ($NF + 0 > 0.05) bad = 1 } END { exit bad || n != 2 }' \
		"$T/se.out" || fail "--no-overlap: want nothing hidden: $(grep buckets "$T/se.out")"
	cdptrace --skip 1 --against "$T/one/trace.json" "$T/ov.json" >"$T/eq.out" ||
		fail "cdpool trace --against: $(cat "$T/eq.out")"
	grep -q "^equal-speed: [0-9.]* (against '$T/one/trace.json': 1 rank(s), step/forward " \
		"$T/eq.out" || fail "cdpool trace --against: $(grep equal "$T/eq.out")"
	echo "cdpool trace: $(grep -h 'hidden' "$T/ov.out" "$T/se.out" | tr '\n' ';')"
fi
expect_fail 1 "cdpool: cannot read '$T/one/metrics.jsonl': not JSON" cdptrace "$T/one/metrics.jsonl"
echo '{"traceEvents": []}' >"$T/other.json"
expect_fail 1 "cdpool: cannot read '$T/other.json': not a cdp-train trace" cdptrace "$T/other.json"
expect_fail 1 "cdpool: cannot read '$T/syn.json': no steps after the first 3" cdptrace --skip 3 "$T/syn.json"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "more than one line: $(cat "$T/err")"
expect_fail 1 "cdpool: cannot read '$T/none.json': No such file" cdptrace "$T/none.json"
expect_fail 2 "--skip: 'x' is not a number" cdptrace --skip x "$T/syn.json"
echo "PASS: trace.sh"
