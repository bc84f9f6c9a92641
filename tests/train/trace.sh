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
#    (exit 1, one line) and leaves nothing behind.
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
	$MP cdp-train $P --out "$T/se" --trace "$T/se.json" --no-overlap || fail "--no-overlap --trace"
	check "$T/se.json" 2 serial
	$MP cdp-train $P --out "$T/pl" || fail "2 ranks without --trace"
	losses "$T/ov/metrics.jsonl" >"$T/lo"
	losses "$T/pl/metrics.jsonl" >"$T/lp"
	cmp -s "$T/lo" "$T/lp" || fail "--trace changed the losses"
	ls "$T" | grep -q '\.tmp\.' && fail "a temporary trace was left: $(ls "$T")"
else
	echo "SKIP: 2-rank cases (no MPIRUN)"
fi
cdp-train $P --out "$T/one" --trace "$T/one/trace.json" || fail "1 process, --trace in a new RUNDIR"
check "$T/one/trace.json" 1 any
expect_fail 1 "cannot write trace '$T/no/such/t.json'" \
	cdp-train $P --out "$T/bad" --trace "$T/no/such/t.json"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "more than one line: $(cat "$T/err")"
[ ! -e "$T/bad" ] || fail "a refused run left its RUNDIR"
echo "PASS: trace.sh"
