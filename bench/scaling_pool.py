#!/usr/bin/env python3
"""bench/scaling_pool.py: the rounds of several `scaling.sh --hosts` runs
pooled, one line per (model, link, setting).

    sh bench/scaling.sh --hosts BUILD 2> run1.log    # and run2.log, ...
    python3 bench/scaling_pool.py run1.log run2.log ...

scaling.sh prints one line per run it makes, on stderr ("MODEL: round R:
2 hosts, link RATE, SETTING: samples/s=X", each job between two ceilings
"...: ceiling, ...: samples/s=A + B"). A round's efficiency is the job's
samples/s over the mean of the ceilings before and after it, as
scaling.sh's own headline takes it; this prints, per line, the median
over every round of every log given (none left out), the spread, and the
number of rounds. On a machine whose speed drifts from minute to minute
a median over more rounds moves less than that of one run (scaling.sh's
header); the pooled line is that of one longer run.
"""
import re
import statistics
import sys

ROUND = re.compile(r"^(\S+): round (\d+): (.*)$")
CEIL = re.compile(r"samples/s=([\d.]+) \+ ([\d.]+)")
JOB = re.compile(r"^2 hosts, link (\S+), (.+): samples/s=([\d.]+)$")


def rounds(path):
    """(model, link, setting) -> list of efficiencies, from one log"""
    out = {}
    ceiling, job = None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROUND.match(line.rstrip("\n"))
            if not m:
                continue
            model, rest = m.group(1), m.group(3)
            if rest.startswith("1 host alone"):
                ceiling, job = None, None
            elif rest.startswith("ceiling"):
                c = CEIL.search(rest)
                if not c:
                    sys.exit(f"scaling_pool.py: '{path}': a ceiling line without two rates: "
                             f"{line.strip()}")
                now = float(c.group(1)) + float(c.group(2))
                if job is not None:
                    if ceiling is None:
                        sys.exit(f"scaling_pool.py: '{path}': a job without a ceiling before it")
                    out.setdefault(job[0], []).append(job[1] / ((ceiling + now) / 2))
                    job = None
                ceiling = now
            elif rest.startswith("2 hosts"):
                j = JOB.match(rest)
                if not j:
                    sys.exit(f"scaling_pool.py: '{path}': a job line it cannot read: "
                             f"{line.strip()}")
                job = ((model, j.group(1), j.group(2)), float(j.group(3)))
    return out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print("usage: python3 bench/scaling_pool.py LOG...", file=sys.stderr)
        return 2
    pooled = {}
    for path in argv[1:]:
        try:
            for k, v in rounds(path).items():
                pooled.setdefault(k, []).extend(v)
        except OSError as e:
            print(f"scaling_pool.py: cannot read '{path}': {e.strerror}", file=sys.stderr)
            return 1
    if not pooled:
        print("scaling_pool.py: no 2-host rounds in the logs", file=sys.stderr)
        return 1
    print("| model | link | setting | rounds | efficiency against the ceiling (median) | spread |")
    print("|---|---|---|---|---|---|")
    for (model, link, setting), v in sorted(pooled.items()):
        v.sort()
        print(f"| {model} | {link} | {setting} | {len(v)} | {statistics.median(v):.3f} | "
              f"{v[0]:.2f}-{v[-1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
