#!/bin/sh
# cdp-train's logs that cannot be written, on the generated road pool of
# train_common.sh:
#  - --log - into a pipe whose reader leaves (head -c 100): no death by
#    SIGPIPE; "cannot write standard output: Broken pipe", the checkpoint
#    of the step, exit 1, and --resume finishes the run; a standard error
#    whose reader leaves neither stops nor hangs the run;
#  - --log FIFO whose reader leaves, at 2 ranks: named, every rank exits 1,
#    the checkpoint written;
#  - a full file system (a tmpfs in a mount namespace of its own, skipped
#    without unshare -m): a --log on it that fills mid-run is named, the
#    checkpoint of that step is written, exit 1, and the log keeps whole
#    lines only; a RUNDIR on it that fills mid-run: exit 1, metrics.jsonl
#    holds whole JSON lines only, and once there is room again --resume
#    finishes the run with one step line a step;
#  - --resume drops the metrics.jsonl lines that are not one JSON object
#    (cut short, or spliced to another's tail, as an older cdp-train left
#    them on a full disk);
#  - loss.png that cannot be written: one warning on stderr for the whole
#    run, which goes on and exits 0.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --model $SMALL --threads 1 -q --batch 4"

# whole_lines FILE: every line of FILE is one JSON object, the last one too
whole_lines() {
	"$PYTHON" - "$1" <<'EOF' || fail "$1 holds a line that is not whole"
import json, sys
data = open(sys.argv[1], "rb").read()
if data and not data.endswith(b"\n"):
    sys.exit("the last line has no newline: %r" % data[-60:])
for line in data.decode().splitlines():
    try:
        if not isinstance(json.loads(line), dict):
            raise ValueError
    except ValueError:
        sys.exit("not a JSON object: %r" % line[:80])
EOF
}
# steps_once FILE N [S]: FILE's step lines are steps 1..N, each once
# (--log-every 1), but for step S's, which may be missing (the line whose
# write failed, in the step the checkpoint then kept)
steps_once() {
	"$PYTHON" - "$1" "$2" "${3:-0}" <<'EOF' || fail "$1: not one step line a step"
import json, sys
s = [d["step"] for d in map(json.loads, open(sys.argv[1])) if d["type"] == "step"]
want = list(range(1, int(sys.argv[2]) + 1))
if s != want and s != [x for x in want if x != int(sys.argv[3])]:
    sys.exit("step lines %s" % s)
EOF
}

echo "== --log - into a pipe whose reader leaves"
(set +e; cdp-train $C --steps 40 --log-every 1 --log - --out "$T/p" 2>"$T/p.err"
	echo $? >"$T/p.rc") | head -c 100 >/dev/null
[ "$(cat "$T/p.rc")" -eq 1 ] || fail "exit $(cat "$T/p.rc"): $(cat "$T/p.err")"
grep -qx 'cdp-train: cannot write standard output: Broken pipe' "$T/p.err" ||
	fail "the broken pipe not named: $(cat "$T/p.err")"
grep -q "^cdp-train: training stopped at step [0-9]*, checkpoint written to '$T/p/checkpoint.cdpt'\$" \
	"$T/p.err" || fail "no checkpoint said: $(cat "$T/p.err")"
[ -f "$T/p/checkpoint.cdpt" ] && [ ! -e "$T/p/.lock" ] || fail "checkpoint or .lock: $(ls -A "$T/p")"
whole_lines "$T/p/metrics.jsonl"
cdp-train $C --steps 40 --log-every 1 --out "$T/p" --resume || fail "resume after the pipe"
whole_lines "$T/p/metrics.jsonl"

echo "== standard error into a pipe whose reader leaves"
(set +e; cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --threads 1 --batch 4 \
	--steps 60 --out "$T/e" 2>&1; echo $? >"$T/e.rc") | head -c 10 >/dev/null
[ "$(cat "$T/e.rc")" -eq 0 ] || fail "a closed standard error: exit $(cat "$T/e.rc")"
grep -q 'done at step 60$' "$T/e/train.log" || fail "the run did not finish: $(tail -2 "$T/e/train.log")"

if [ -n "$MP" ]; then
	echo "== --log FIFO whose reader leaves, 2 ranks"
	mkfifo "$T/fifo"
	head -c 100 "$T/fifo" >/dev/null &
	set +e
	$MP sh -c 'cdp-train "$@"; echo $? >"'"$T"'/f.rc.$OMPI_COMM_WORLD_RANK"' sh \
		$C --steps 300 --log-every 1 --log "$T/fifo" --out "$T/f" 2>"$T/f.err"
	set -e
	wait
	for r in 0 1; do
		[ "$(cat "$T/f.rc.$r")" -eq 1 ] || fail "rank $r exited $(cat "$T/f.rc.$r"): $(cat "$T/f.err")"
	done
	grep -q "^cdp-train: cannot write '$T/fifo': Broken pipe\$" "$T/f.err" ||
		fail "the FIFO not named: $(cat "$T/f.err")"
	[ -f "$T/f/checkpoint.cdpt" ] || fail "no checkpoint at 2 ranks: $(cat "$T/f.err")"
else
	echo "no MPI: the 2-rank case is skipped"
fi

echo "== --resume drops lines that are not whole"
cdp-train $C --steps 12 --log-every 1 --out "$T/t" || fail "run to 12"
"$PYTHON" - "$T/t/metrics.jsonl" <<'EOF'
import sys
p = sys.argv[1]
lines = open(p).read().splitlines(True)
# step 3's line cut short and followed by step 5's tail, as a full disk
# freed again left it; a last line with no newline
lines[2] = lines[2][:40] + lines[4][-60:]
open(p, "w").write("".join(lines) + '{"type":"step","step":7,"epoch":1,"lo')
EOF
cdp-train $C --steps 18 --log-every 1 --out "$T/t" --resume || fail "resume to 18"
whole_lines "$T/t/metrics.jsonl"

if unshare -m true 2>/dev/null; then
	mkdir "$T/full"
	echo "== a --log on a file system that fills"
	set +e
	unshare -m sh -c "mount -t tmpfs -o size=64k tmpfs '$T/full' || exit 99
		dd if=/dev/zero of='$T/full/fill' bs=1k count=56 2>/dev/null
		cdp-train $C --steps 200 --log-every 1 --log '$T/full/log' --out '$T/l'
		rc=\$?; cp '$T/full/log' '$T/l.log'; exit \$rc" 2>"$T/l.err"
	rc=$?
	set -e
	[ "$rc" -ne 99 ] || fail "cannot mount a tmpfs in a mount namespace: $(cat "$T/l.err")"
	[ "$rc" -eq 1 ] || fail "a full --log: exit $rc: $(cat "$T/l.err")"
	grep -qx "cdp-train: cannot write '$T/full/log': No space left on device" "$T/l.err" ||
		fail "a full --log not named: $(cat "$T/l.err")"
	s=$(sed -n 's/^cdp-train: training stopped at step \([0-9]*\), checkpoint written.*/\1/p' "$T/l.err")
	[ -n "$s" ] && [ "$s" -lt 200 ] || fail "no stop said: $(cat "$T/l.err")"
	[ "$(tail -c 1 "$T/l.log" | od -An -c | tr -d ' ')" = '\n' ] ||
		fail "the log ends in a part of a line: $(tail -c 80 "$T/l.log")"
	# the checkpoint is the step's: the last step line is the stop's
	steps_once "$T/l/metrics.jsonl" "$s"
	cdp-train $C --steps 200 --log-every 1 --log "$T/l2.log" --out "$T/l" --resume ||
		fail "resume after a full --log"
	grep -q "start at step $s of 200" "$T/l2.log" || fail "not resumed at $s: $(head -3 "$T/l2.log")"
	steps_once "$T/l/metrics.jsonl" 200

	echo "== a RUNDIR on a file system that fills"
	set +e
	unshare -m sh -c "mount -t tmpfs -o size=256k tmpfs '$T/full' || exit 99
		dd if=/dev/zero of='$T/full/fill' bs=1k count=150 2>/dev/null
		cdp-train $C --steps 300 --log-every 1 --checkpoint-every 20 --out '$T/full/r'
		rc=\$?; rm -f '$T/full/fill'; cp -r '$T/full/r' '$T/r'; exit \$rc" 2>"$T/r.err"
	rc=$?
	set -e
	[ "$rc" -eq 1 ] || fail "a full RUNDIR: exit $rc: $(cat "$T/r.err")"
	grep -Eq "^cdp-train: cannot write '$T/full/r/(metrics.jsonl|train.log)': No space left on device\$" \
		"$T/r.err" || fail "a full RUNDIR not named: $(cat "$T/r.err")"
	whole_lines "$T/r/metrics.jsonl"
	cdp-train $C --steps 300 --log-every 1 --checkpoint-every 20 --out "$T/r" --resume ||
		fail "resume after a full RUNDIR"
	whole_lines "$T/r/metrics.jsonl"
	# the stop's checkpoint when it fitted, else the last one before
	s=$(sed -n 's/^cdp-train: training stopped at step \([0-9]*\), checkpoint written.*/\1/p' "$T/r.err")
	steps_once "$T/r/metrics.jsonl" 300 "$s"

	# the plot of step 6 (22 KiB) fits, the next two do not (its temporary
	# and the old one), the checkpoint does (5 KiB)
	echo "== loss.png that does not fit"
	set +e
	unshare -m sh -c "mount -t tmpfs -o size=64k tmpfs '$T/full' || exit 99
		dd if=/dev/zero of='$T/full/fill' bs=1k count=16 2>/dev/null
		cdp-train $C --steps 12 --out '$T/full/g'; rc=\$?
		ls -A '$T/full/g' >'$T/g.ls'; cp '$T/full/g/train.log' '$T/g.log'; exit \$rc" 2>"$T/g.err"
	rc=$?
	set -e
	[ "$rc" -eq 0 ] || fail "loss.png that does not fit: exit $rc: $(cat "$T/g.err")"
	[ "$(cat "$T/g.err")" = "cdp-train: warning: cannot write '$T/full/g/loss.png': No space left on device" ] ||
		fail "not one warning: $(cat "$T/g.err")"
	grep -qx checkpoint.cdpt "$T/g.ls" || fail "RUNDIR holds $(cat "$T/g.ls")"
	[ "$(grep -c "cannot write '$T/full/g/loss.png'" "$T/g.log")" -ge 2 ] ||
		fail "loss.png failed once only: $(grep loss.png "$T/g.log")"
else
	echo "no unshare -m: the full disk cases are skipped"
fi
exit 0
