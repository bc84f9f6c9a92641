#!/bin/sh
# tests/train/profile.sh: bench/engine_bench -P, the per-layer profile that
# bench/gpu.sh asks for on a GPU (net.h's prof_fwd/prof_bwd). On a tiny
# U-Net: one row per layer in net order, per-type totals that add up to the
# layer rows, shares that add up to 100%, and a profiled run that computes
# exactly what a plain one does (the same loss after the same number of
# steps). An unwritable profile is a one-line error, exit 1.
. "$CDP_SRCDIR/tests/tools/common.sh"
B=$CDP_BUILDDIR/bench/engine_bench
M=$CDP_SRCDIR/share/cdpool/models/unet.cfg
[ -x "$B" ] || fail "no $B"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3" >&2; exit 77; }
set -- -i 3,32,32 -b 2 -t 1 -D width=4 -D depth=2 -w 1

"$B" "$@" -n 2 -P "$T/prof.txt" "$M" >"$T/prof.json"
"$B" "$@" -n 4 "$M" >"$T/plain.json"
"$CDP_BUILDDIR/tests/engine/model_dump" -b 2 -i 3,32,32 -D width=4 -D depth=2 "$M" >"$T/model.json"

python3 - "$T" <<'PYEOF'
import json, sys
t = sys.argv[1]
model = json.load(open(t + "/model.json"))
layers = [l for l in model["layers"]][: model["out_layer"] + 1]
rows, types, tail = [], {}, None
part = 0
for line in open(t + "/prof.txt"):
    f = line.split()
    if not f or line.startswith("#"):
        if not f:
            part += 1
        continue
    if part == 0:
        rows.append(f)
    elif part == 1 and f[0] != "type":
        types[f[0]] = (float(f[1]), float(f[2]), float(f[3].rstrip("%")))
    elif part == 2:
        tail = line
def fail(msg):
    sys.exit("FAIL: " + msg)
if len(rows) != len(layers):
    fail("%d profile rows for %d layers" % (len(rows), len(layers)))
for i, (r, l) in enumerate(zip(rows, layers)):
    if int(r[0]) != i or r[1] != l["name"] or r[2] != l["type"]:
        fail("row %d is %s, layer %d is %s (%s)" % (i, r[:3], i, l["name"], l["type"]))
    if r[3] != ",".join(str(v) for v in l["out"]):
        fail("row %d shape %s, layer's %s" % (i, r[3], l["out"]))
    if float(r[4]) < 0 or float(r[5]) < 0:
        fail("row %d has a negative time: %s" % (i, r))
if sum(float(r[4]) for r in rows) <= 0 or sum(float(r[5]) for r in rows) <= 0:
    fail("no forward or no backward time at all")
sums, count = {}, {}
for r in rows:
    a = sums.setdefault(r[2], [0.0, 0.0, 0.0])
    a[0] += float(r[4]); a[1] += float(r[5]); a[2] += float(r[6].rstrip("%"))
    count[r[2]] = count.get(r[2], 0) + 1
if set(sums) != set(types):
    fail("type rows %s, layer types %s" % (sorted(types), sorted(sums)))
# shares are printed to 0.1%: a type's sum of n rounded rows may miss its
# rounded total by n + 1 half-units (times, to 0.001 ms, keep the old bound)
for k, v in types.items():
    for j in range(3):
        tol = 0.05 * (count[k] + 1) if j == 2 else 0.01 * len(rows)
        if abs(v[j] - sums[k][j]) > tol + 1e-3 * abs(v[j]):
            fail("type %s column %d: %g, the layers add up to %g" % (k, j, v[j], sums[k][j]))
if abs(sum(v[2] for v in types.values()) - 100) > 0.5:
    fail("shares add up to %g%%" % sum(v[2] for v in types.values()))
if not tail or "ms per step" not in tail:
    fail("no totals line")
# the -P steps come after the timed ones: 1 + 2 + 2 steps as the plain 1 + 4
lp = json.load(open(t + "/prof.json"))["loss"]
ln = json.load(open(t + "/plain.json"))["loss"]
if lp != ln:
    fail("profiled run's loss %r, plain run's %r" % (lp, ln))
print("profile: %d layers, %d types, loss %r both ways" % (len(rows), len(types), lp))
PYEOF

expect_fail 1 "cannot write '$T/no/such/dir/p.txt'" "$B" "$@" -n 1 -P "$T/no/such/dir/p.txt" "$M"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "more than one line: $(cat "$T/err")"
echo "PASS: profile.sh"
