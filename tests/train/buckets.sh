#!/bin/sh
# tests/train/buckets.sh: gradient buckets (cdp-train --bucket-mb, issue 12).
#  - bucketing changes when sums happen, not what they are: 2 ranks with
#    tiny buckets (--bucket-mb 0.001, a layer each) give the
#    losses of the default cut (a 1 MiB first bucket, then 25 MiB: here
#    one bucket) bit for bit, with MPI's all-reduce and with the ring, and
#    equal to 1 process with the global batch (relative 1e-6);
#  - every step line has grad_allreduce_s (buckets in flight) and
#    grad_exposed_s (the part not hidden behind backward), the exposed part
#    never more than the total, all of it exposed with --no-overlap;
#  - --bucket-mb is range-checked (exit 2).
. "$CDP_SRCDIR/tests/train/train_common.sh"
# small.cfg has no batchnorm: 2 ranks compute what 1 process does
P="--db $T/pool --keys $T/train.keys --threads 1 -q --model $SMALL:depth=6,width=8 --steps 8 --log-every 1"

expect_fail 2 "--bucket-mb: '0' is not a number in" cdp-train $P --out "$T/x" --bucket-mb 0
expect_fail 2 "--bucket-mb: '5000' is not a number in" cdp-train $P --out "$T/x" --bucket-mb 5000
expect_fail 2 "--bucket-mb: 'lots' is not" cdp-train $P --out "$T/x" --bucket-mb lots

# fields FILE: every step line has both times, exposed <= total; prints
# "exposed total" summed over the lines
fields() {
	"$PYTHON" - "$1" <<'PYEOF'
import json, sys
e = g = 0.0
n = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["type"] != "step":
        continue
    n += 1
    for k in ("grad_allreduce_s", "grad_exposed_s"):
        if not isinstance(d.get(k), float) or d[k] < 0:
            sys.exit("FAIL: step %d: %s is %r" % (d["step"], k, d.get(k)))
    if d["grad_exposed_s"] > d["grad_allreduce_s"]:
        sys.exit("FAIL: step %d: exposed %r > total %r" % (d["step"], d["grad_exposed_s"],
                                                          d["grad_allreduce_s"]))
    e += d["grad_exposed_s"]
    g += d["grad_allreduce_s"]
if n == 0:
    sys.exit("FAIL: no step lines")
print("%.17g %.17g" % (e, g))
PYEOF
}

cdp-train $P --batch 8 --out "$T/one" --bucket-mb 0.001 || fail "1 process"
fields "$T/one/metrics.jsonl" >/dev/null
losses "$T/one/metrics.jsonl" >"$T/l1"
if [ -z "$MP" ]; then
	echo "SKIP: 2-rank cases (no MPIRUN)"
	exit 0
fi
for algo in mpi ring; do
	$MP cdp-train $P --batch 4 --allreduce $algo --out "$T/d.$algo" || fail "$algo: default buckets"
	$MP cdp-train $P --batch 4 --allreduce $algo --out "$T/t.$algo" --bucket-mb 0.001 ||
		fail "$algo: tiny buckets"
	losses "$T/d.$algo/metrics.jsonl" >"$T/ld"
	losses "$T/t.$algo/metrics.jsonl" >"$T/lt"
	[ "$(wc -l <"$T/ld")" -eq 8 ] || fail "$algo: want 8 losses"
	cmp -s "$T/ld" "$T/lt" || fail "$algo: tiny buckets changed the losses: $(diff "$T/ld" "$T/lt" | head -4)"
	losses_close "$T/l1" "$T/lt" 1e-6 || fail "$algo: 2 ranks differ from 1 process"
	set -- $(fields "$T/t.$algo/metrics.jsonl")
	echo "$algo: 8 losses equal with 0.001 MiB and 25 MiB buckets; exposed $1 s of $2 s in flight"
done
$MP cdp-train $P --batch 4 --out "$T/serial" --bucket-mb 0.001 --no-overlap || fail "--no-overlap"
cmp -s "$T/ld" "$(losses "$T/serial/metrics.jsonl" >"$T/ls"; echo "$T/ls")" ||
	fail "--no-overlap changed the losses"
set -- $(fields "$T/serial/metrics.jsonl")
[ "$1" = "$2" ] || fail "--no-overlap: exposed $1 s, in flight $2 s: want all of it exposed"
echo "--no-overlap: all $2 s exposed, the same losses"
echo "PASS: buckets.sh"
