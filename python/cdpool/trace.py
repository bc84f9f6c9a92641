"""trace.py: a cdp-train --trace FILE read back (cdp-train(1), Timeline).

The file is the Chrome trace event format: one process (pid) per rank,
named "rank R (HOST)"; on tid 0 one "step" span per optimizer step holding
data, forward, loss all-reduce, backward, grad all-reduce wait, optimizer
(and sync, validation, checkpoint); on tids 1, 2, ... one "bucket B" span
per gradient bucket and step, from the start of its reduction to the
moment its completion was seen. ts and dur are microseconds; every span's
args.step is the step of metrics.jsonl.

summarize() gives what a run's timeline says about distributing it:
 - per rank, the mean seconds a step of each phase, the buckets' time in
   flight (from the first bucket's start to the last one's end, per step)
   and the hidden fraction 1 - wait / in flight, where wait is the grad
   all-reduce wait span (the reduction left after backward);
 - step/forward: per step, the slowest rank's step over the slowest
   rank's forward pass, the median over the steps. A forward pass moves no
   gradients, so it gauges its core's speed at that moment, and the ratio
   is a step's length in units of it: on machines whose cores change speed
   (cloud vCPUs), the ratio of a 1-rank run's step/forward to a J-rank
   run's is the weak-scaling efficiency at equal core speed, the premise
   of a scaling target (bench/README).
"""
import json
import math
import statistics

from .errors import CdpError

PHASES = ("data", "forward", "loss all-reduce", "backward", "grad all-reduce wait", "optimizer",
          "sync")


class Trace:
    """The spans of one trace file, checked as read.

    nranks: the job's ranks, 0..nranks-1, each with spans; ranks:
    {rank: host}; spans: {(rank, step): {name: seconds}} summed over
    the spans of that name (several forward passes with --accumulate);
    buckets: {(rank, step): (first start, last end)} in seconds, or absent
    for a step without buckets; complete: the file's otherData.complete.
    """

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise CdpError("EFORMAT", path, message="not JSON: %s" % e) from None
        except RecursionError:        # arrays or objects nested past the parser's stack
            raise CdpError("EFORMAT", path, message="not JSON: nested too deeply") from None
        other = doc.get("otherData") if isinstance(doc, dict) else None
        if not isinstance(other, dict) or other.get("program") != "cdp-train" or \
                not isinstance(doc.get("traceEvents"), list):
            raise CdpError("EFORMAT", path, message="not a cdp-train trace (no traceEvents, or "
                           "otherData.program is not cdp-train)")
        self.complete = other.get("complete") is True
        self.ranks, self.spans, self.buckets = {}, {}, {}
        for i, e in enumerate(doc["traceEvents"]):
            self._event(i, e)
        if not self.spans:
            raise CdpError("EFORMAT", path, message="no step spans")
        n, seen = other.get("ranks"), sorted({r for r, s in self.spans})
        if not _int(n) or seen != list(range(n)):
            raise CdpError("EFORMAT", path, message="spans of ranks %s, but otherData.ranks "
                           "is %r" % (seen, n))
        self.nranks = n

    def _event(self, i, e):
        def bad(what):
            raise CdpError("EFORMAT", self.path, message="event %d: %s" % (i, what))

        def number(v):
            """a finite JSON number (json reads NaN and Infinity too)"""
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return False
            try:
                return math.isfinite(v * 1e-6)
            except OverflowError:     # an integer beyond float's range
                return False
        if not isinstance(e, dict) or not _int(e.get("pid")) or e["pid"] < 0:
            bad("no rank (pid)")
        r, name = e["pid"], e.get("name")
        if e.get("ph") == "M":
            if name == "process_name":
                args = e.get("args", {})
                if not isinstance(args, dict):
                    bad("process_name whose args is not an object")
                label = str(args.get("name", ""))
                head = "rank %d (" % r
                self.ranks[r] = label[len(head):-1] if label.startswith(head) else label
            return
        if e.get("ph") != "X":
            return
        ts, dur, args = e.get("ts"), e.get("dur"), e.get("args")
        if not isinstance(name, str) or not number(ts) or not number(dur) or dur < 0 \
                or not isinstance(args, dict) or not _int(args.get("step")):
            bad("a span without name, ts, dur >= 0 or args.step")
        key = (r, args["step"])
        t0, t1 = ts * 1e-6, (ts + dur) * 1e-6
        if name.startswith("bucket "):
            a, b = self.buckets.get(key, (t0, t1))
            self.buckets[key] = (min(a, t0), max(b, t1))
        elif e.get("tid") == 0 and not name.startswith("bwd "):
            d = self.spans.setdefault(key, {})
            d[name] = d.get(name, 0.0) + dur * 1e-6


def _int(v):
    """a JSON integer (not true or false, which Python counts as ints)"""
    return isinstance(v, int) and not isinstance(v, bool)


def summarize(trace, skip=0):
    """What trace says, from the steps after its first `skip`
    (the warm-up). Returns a dict: steps (sorted step numbers used),
    step_s (median over them of the slowest rank's step), step_forward
    (the median of step over forward, both the slowest rank's; None where
    no step has both), ranks: {rank: {"host", "phases": {name: mean s},
    "in_flight_s", "wait_s", "hidden" (None without buckets)}}."""
    first = min(s for r, s in trace.spans)
    steps = sorted({s for r, s in trace.spans
                    if s >= first + skip and "step" in trace.spans[(r, s)]})
    if not steps:
        raise CdpError("EFORMAT", trace.path, message="no steps after the first %d" % skip)
    rank_ids = range(trace.nranks)
    longest, ratio = [], []
    for s in steps:
        rows = [trace.spans.get((r, s), {}) for r in rank_ids]
        step = max(d.get("step", 0.0) for d in rows)
        fwd = max(d.get("forward", 0.0) for d in rows)
        longest.append(step)
        if fwd > 0:
            ratio.append(step / fwd)
    out = {"steps": steps, "step_s": statistics.median(longest),
           "step_forward": statistics.median(ratio) if ratio else None, "ranks": {}}
    for r in rank_ids:
        mine = [trace.spans.get((r, s), {}) for s in steps]
        phases = {p: sum(d.get(p, 0.0) for d in mine) / len(steps) for p in PHASES}
        fl = [trace.buckets[(r, s)] for s in steps if (r, s) in trace.buckets]
        flight = sum(b - a for a, b in fl) / len(steps)
        wait = phases["grad all-reduce wait"]
        out["ranks"][r] = {"host": trace.ranks.get(r, "?"), "phases": phases,
                           "in_flight_s": flight, "wait_s": wait,
                           "hidden": max(0.0, 1 - wait / flight) if fl and flight > 0 else None}
    return out


def report(path, out, skip=0, against=None):
    """The lines of `python -m cdpool trace PATH [--against BASE]` through
    out(line). The equal-speed efficiency is BASE's step/forward over this
    trace's: BASE a 1-rank run with the same batch per rank."""
    t = Trace(path)
    s = summarize(t, skip)
    out("kind: trace")
    out("complete: %s" % ("yes" if t.complete else "no (a rank ran out of memory for spans)"))
    out("ranks: %d" % len(s["ranks"]))
    out("steps: %d (%d-%d)" % (len(s["steps"]), s["steps"][0], s["steps"][-1]))
    out("step: %.6f s" % s["step_s"])
    for r, v in s["ranks"].items():
        out("rank %d: host %s" % (r, v["host"]))
        out("rank %d: %s" % (r, ", ".join("%s %.6f s" % (p, x) for p, x in v["phases"].items())))
        if v["hidden"] is None:
            out("rank %d: buckets: none" % r)
        else:
            out("rank %d: buckets in flight %.6f s, after backward %.6f s, hidden %.2f"
                % (r, v["in_flight_s"], v["wait_s"], v["hidden"]))
    sf = s["step_forward"]
    out("step/forward: %s" % ("%.4f" % sf if sf else "none (no forward spans)"))
    if against is not None:
        b = summarize(Trace(against), skip)
        if not sf or not b["step_forward"]:
            raise CdpError("EFORMAT", against if sf else path, message="no forward spans")
        out("equal-speed: %.4f (against '%s': %d rank(s), step/forward %.4f)"
            % (b["step_forward"] / sf, against, len(b["ranks"]), b["step_forward"]))
