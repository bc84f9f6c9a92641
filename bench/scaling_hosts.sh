# bench/scaling_hosts.sh: the cross-host mode of bench/scaling.sh
# (`scaling.sh --hosts`), sourced by it with src, build, D, steps, warm,
# batch, PY and PATH set and train_lib.sh sourced. See scaling.sh for what
# it prints.
. "$src/tests/cluster/cluster_lib.sh"
why=$(cluster_probe)
[ -z "$why" ] || { echo "scaling.sh: no simulated cluster: $why" >&2; exit 77; }
size=${BENCH_SIZE:-1024}
count=${BENCH_COUNT:-512}
cbatch=${BENCH_CBATCH:-32}
rates=${BENCH_RATES:-off 10gbit 1gbit}
models=${BENCH_MODELS:-unet classifier}
settings=${BENCH_SETTINGS:-default serial bf16 average:4 admm:4:0.01}
# BENCH_BN_SYNC=1: the models with synchronized batchnorm
bnsync=
[ "${BENCH_BN_SYNC:-0}" != 1 ] || bnsync=,bn_sync=1
bmb=${BENCH_BUCKET_MB:-}
rounds=${BENCH_ROUNDS:-5}
# a setting's cdp-train options (scaling.sh: BENCH_SETTINGS)
options_of() {
	case $1 in
	default|whole) ;;   # whole: CDP_TRAIN_STEP_PER_BUCKET=0 (train)
	serial) echo --no-overlap ;;
	auto) echo --overlap auto ;;
	overlap) echo --overlap on ;;
	none|fp16|bf16) echo "--grad-compress $1" ;;
	average:*|admm:*) echo "--sync $1" ;;
	--*) echo "$1" | tr , ' ' ;;
	*) echo "scaling.sh: BENCH_SETTINGS: unknown setting '$1'" >&2; exit 2 ;;
	esac
}
for st in $settings; do options_of "$st" >/dev/null || exit 2; done
CDPC_TMP=$D
# (set -e: a command that fails in the trap would end it before cluster_down)
trap '[ -z "${pp:-}" ] || kill -INT "$pp" 2>/dev/null || :; cluster_down; rm -rf "$D"' EXIT
trap 'exit 1' HUP INT TERM

# the pools, one copy per host (node-local, as tests/cluster does)
"$PY" "$src/share/cdpool/examples/genscene.py" "$D/s.tif" --size "$size" --seed 1 --mask "$D/s_mask.tif"
cdp-tile -q --size 128 --label-suffix _mask "$D/s.tif" | cdp-lmdbpack -q "$D/unet"
"$PY" "$src/share/cdpool/examples/genscene.py" --scene-tiles "$D/sc" --count "$count" --size 64 --seed 2
i=0
while read -r f c; do      # keys are NAME_ROW_COL
	mv "$D/sc/$f" "$D/sc/sc_${i}_0.tif"
	echo "sc_${i}_0.tif $c"
	i=$((i + 1))
done <"$D/sc/list.txt" >"$D/sc/keys.txt"
cdp-lmdbpack -q --list "$D/sc/keys.txt" "$D/classifier"
for p in unet classifier; do
	cdp-keyshuffle -q -o "$D/$p.keys" "$D/$p"
done
cluster_up 2 1
N=$CDPC_NODE
for h in $(cluster_hosts); do
	for p in unet classifier; do
		cp -r "$D/$p" "$D/$p.keys" "$(cluster_node "$h")/"
	done
done
run_dir=$(cluster_node node1)/run
run_dir2=$(cluster_node node2)/run

# summary [RUNDIR]: "samples/s grad_allreduce_last_s grad_exposed_last_s
# grad_exposed_s step/forward allreduce_s" from the step lines after the
# warm-up (median rate, mean times per step) of RUNDIR (default node1's run
# directory). allreduce_s is the slowest rank's time in every blocking
# communication call: with average and admm, whose buckets are idle, the
# parameter averaging. step/forward is that of `python -m cdpool trace`
# (python/cdpool/trace.py) for the run's --trace timeline: the median over
# the steps of the step's time over the slower rank's forward pass, which
# moves no gradients, so it is the speed of that rank's core at that
# moment, and the ratio is the step's length in units of it.
summary() {
	PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH} "$PY" - "${1:-$run_dir}/metrics.jsonl" "$warm" <<'PYEOF'
import json, os, sys
from cdpool.trace import Trace, summarize
rows = [json.loads(l) for l in open(sys.argv[1])]
tr = os.path.join(os.path.dirname(sys.argv[1]), "trace.json")
q = summarize(Trace(tr), int(sys.argv[2]))["step_forward"] if os.path.exists(tr) else None
rows = [r for r in rows if r["type"] == "step" and r["step"] > int(sys.argv[2])]
if not rows:
    sys.exit("scaling.sh: no step lines after the warm-up (raise BENCH_STEPS)")
rate = sorted(r["samples_per_s"] for r in rows)
n = len(rate)
med = rate[n // 2] if n % 2 else (rate[n // 2 - 1] + rate[n // 2]) / 2
mean = lambda k: sum(r.get(k) or 0 for r in rows) / n
print("%.2f %.4f %.4f %.4f %.4f %.4f" % (med, mean("grad_allreduce_last_s"),
      mean("grad_exposed_last_s"), mean("grad_exposed_s"), q or 0, mean("allreduce_s")))
PYEOF
}

# train MODEL HOSTS [OPTION...]: one run of MODEL on 1 host (node1) or on
# 2 (one rank each, mpirun from node1), its run directory on node1; HOSTS
# "pair": a 1-host run on node1 and another on node2 at the same time,
# each in its own node-local run directory
train() {
	m=$1 nh=$2
	shift 2
	if [ "$m" = unet ]; then
		set -- "$@" --model "$src/share/cdpool/models/unet.cfg:width=16,depth=4$bnsync" \
			--batch "$batch"
	else
		set -- "$@" --model "$src/share/cdpool/models/classifier.cfg${bnsync:+:bn_sync=1}" \
			--batch "$cbatch"
	fi
	set -- "$@" -q --db "$N/$m" --keys "$N/$m.keys" --out "$N/run" --steps "$steps" \
		--threads 1 --log-every 1 --trace "$N/run/trace.json" --pad-last ${bmb:+--bucket-mb "$bmb"}
	rm -rf "$run_dir" "$run_dir2"
	# BENCH_PERF=DIR: both cores recorded through round 1's 2-host jobs
	# and ceilings, one file each, numbered in the order they ran
	pf=
	if [ -n "${BENCH_PERF:-}" ] && [ "${r:-0}" = 1 ] && [ "$nh" != 1 ]; then
		pseq=$((${pseq:-0} + 1))
		pf=$BENCH_PERF/$m.$(printf %02d "$pseq").$([ "$nh" = pair ] && echo ceiling ||
			echo "${rate:-off}.${st:-default}").data
		perf record -q -a -g -F 499 -o "$pf" -- sleep 100000 2>/dev/null & pp=$!
	fi
	if [ "$nh" = 1 ]; then
		cluster_run node1 cdp-train "$@"
	elif [ "$nh" = pair ]; then
		cluster_run node2 cdp-train "$@" &
		cluster_run node1 cdp-train "$@"
		wait $! || { echo "scaling.sh: the 1-host run on node2 failed" >&2; exit 1; }
	else
		# CDP_DIST_THREAD=0 set: compare with the progress engine; the
		# setting whole: the optimizer after the last bucket
		CDP_TRAIN_STEP_PER_BUCKET=1
		[ "${st:-}" != whole ] || CDP_TRAIN_STEP_PER_BUCKET=0
		export CDP_TRAIN_STEP_PER_BUCKET
		cluster_mpirun -np 2 -x PATH -x CDP_TRAIN_STEP_PER_BUCKET \
			${CDP_DIST_THREAD:+-x CDP_DIST_THREAD} cdp-train "$@"
	fi
	if [ -n "$pf" ]; then
		kill -INT "$pp"
		wait "$pp" || :
		pp=
		echo "scaling.sh: perf: $pf (perf report -i $pf --sort cpu,comm,dso -g none)" >&2
	fi
}

# lockstep DIR1 DIR2: the lockstep bound of a ceiling, what its two cores
# would deliver if each step waited for the slower of them and
# communication were free: step i of the two runs paired (they start
# together and run the same steps), the pair's rate twice the slower one's,
# its median after the warm-up over the sum of the runs' medians. A
# synchronous job can do no better on these cores at these moments, so
# the gap between it and the ceiling is the cost of the cores' jitter,
# not of communication (a diagnostic: the headline stays the ceiling).
lockstep() {
	"$PY" - "$1/metrics.jsonl" "$2/metrics.jsonl" "$warm" <<'PYEOF'
import json, statistics as S, sys
w = int(sys.argv[3])
def rates(f):
    return {r["step"]: r["samples_per_s"] for r in map(json.loads, open(f))
            if r["type"] == "step" and r["step"] > w}
a, b = rates(sys.argv[1]), rates(sys.argv[2])
both = sorted(set(a) & set(b))
print("%.4f" % (S.median(2 * min(a[s], b[s]) for s in both) /
                (S.median(a.values()) + S.median(b.values())) if both else 0))
PYEOF
}

# ceiling MODEL ROUND: the side-by-side ceiling (two independent 1-host
# runs, one on each host, at once: what the two cores deliver together),
# one row of $R (its fifth field the lockstep bound)
ceiling() {
	train "$1" pair
	a=$(summary | cut -d' ' -f1) b=$(summary "$run_dir2" | cut -d' ' -f1)
	l=$(lockstep "$run_dir" "$run_dir2")
	echo "$1 pair $2 $(echo "$a $b" | awk '{ print $1 + $2 }') $l 0 0 0 0" >>"$R"
	echo "$1: round $2: ceiling, 1 host on each of 2 at once: samples/s=$a + $b (lockstep bound $l)" >&2
}

# Rounds. The speed of this kind of machine drifts by 15-30% within
# minutes (doc/PERFORMANCE.md), so a round alternates the ceiling and the
# jobs: the 1-host run alone (for the diagnostics), the ceiling, then each
# 2-host line followed by the ceiling again; a line is held against the
# mean of the two ceilings around it. What is printed is the median over
# the rounds and their spread.
R=$D/rounds
: >"$R"
for m in $models; do
	r=1
	while [ "$r" -le "$rounds" ]; do
		cluster_shape off
		train "$m" 1
		set -- $(summary)
		echo "$m 1-host $r $1 0 0 0 $5 0" >>"$R"
		echo "$m: round $r: 1 host alone: samples/s=$1" >&2
		ceiling "$m" "$r"
		for rate in $rates; do
			for st in $settings; do
				cluster_shape "$rate"
				# shellcheck disable=SC2046
				train "$m" 2 $(options_of "$st")
				set -- $(summary)
				echo "$m $rate/$st $r $1 $2 $3 $4 $5 $6" >>"$R"
				echo "$m: round $r: 2 hosts, link $rate, $st: samples/s=$1" >&2
				grep -h "overlap auto:" "$run_dir/train.log" | cut -d' ' -f2- >&2 || :
				cluster_shape off
				ceiling "$m" "$r"
			done
		done
		r=$((r + 1))
	done
	cluster_shape off
done
"$PY" - "$R" "$batch" "$cbatch" <<'PYEOF'
import statistics as S, sys
# a row: model, line, round, samples/s, in flight and exposed on the rank
# that waited least, the most any rank waited, the step over the slower
# rank's forward pass, the slowest rank's blocking communication (seconds
# per step; summary); ceilings ("pair") in the order they ran
rows = [l.split() for l in open(sys.argv[1])]
gbatch = {"unet": 2 * int(sys.argv[2]), "classifier": 2 * int(sys.argv[3])}
one = {(m, r): float(x) for m, k, r, x, *_ in rows if k == "1-host"}
oneq = {(m, r): float(row[7]) for row in rows for m, k, r in [row[:3]] if k == "1-host"}
# each 2-host row against the mean of the ceilings just before and after it
# (and their lockstep bounds, the pair rows' fifth field)
ceil, lock, last = {}, {}, {}
for i, row in enumerate(rows):
    m, k, r = row[:3]
    if k == "pair":
        last[m] = (float(row[3]), float(row[4]))
    elif k != "1-host":
        nxt = next(((float(x[3]), float(x[4])) for x in rows[i + 1:]
                    if x[0] == m and x[1] == "pair"), last[m])
        ceil[i] = (last[m][0] + nxt[0]) / 2
        lock[i] = (last[m][1] + nxt[1]) / 2
order = []
for m, k, *_ in rows:
    if (m, k) not in order and k not in ("1-host", "pair"):
        order.append((m, k))
spread = lambda v: "%.2f-%.2f" % (min(v), max(v))
table = []
for m in dict.fromkeys(m for m, k in order):
    alone = [float(x[3]) for x in rows if x[0] == m and x[1] == "1-host"]
    pairs = [float(x[3]) for x in rows if x[0] == m and x[1] == "pair"]
    busy = [float(x[3]) / (2 * one[(m, x[2])]) for x in rows
            if x[0] == m and x[1] == "pair" and (m, x[2]) in one]
    bound = [float(x[4]) for x in rows if x[0] == m and x[1] == "pair"]
    print("%s: 1 host alone: samples/s=%.2f; ceiling (1 host on each of 2 at once): samples/s=%.2f, "
          "%.2f of twice alone (%d ceiling runs, %s); lockstep bound of the ceiling %.2f (%s)"
          % (m, S.median(alone), S.median(pairs), S.median(busy), len(pairs), spread(pairs),
             S.median(bound), spread(bound)))
    for mm, k in order:
        if mm != m:
            continue
        got = [(i, row) for i, row in enumerate(rows) if row[0] == m and row[1] == k]
        v = lambda j: [float(row[j]) for i, row in got]
        rate, g, e, w, q, c = v(3), v(4), v(5), v(6), v(7), v(8)
        eff = [float(row[3]) / ceil[i] for i, row in got]
        step = [gbatch[m] / x for x in rate]                     # seconds a step
        share = [ww / s for ww, s in zip(w, step)]
        alone2 = [float(row[3]) / (2 * one[(m, row[2])]) for i, row in got]
        eqs = [oneq[(m, row[2])] / float(row[7]) for i, row in got
               if float(row[7]) > 0 and oneq[(m, row[2])] > 0]
        # against the lockstep bound: what is left once the jitter is out
        unlock = [float(row[3]) / (ceil[i] * lock[i]) for i, row in got if lock[i] > 0]
        link, st = k.split("/", 1)
        # the headline, then the communication per step, then diagnostics
        print("%s: 2 hosts, link %s, %s: efficiency against the ceiling %.2f (%s over %d rounds); "
              "samples/s=%.2f; per step: in flight %.4fs, exposed %.4fs on the rank that waited "
              "most (%.0f%% of the step), %.4fs on the one that waited least, blocking "
              "communication %.4fs; diagnostics: against twice 1 host alone %.2f, equal-speed %.2f, "
              "against the lockstep bound %.2f"
              % (m, link, st, S.median(eff), spread(eff), len(eff), S.median(rate), S.median(g),
                 S.median(w), 100 * S.median(share), S.median(e), S.median(c), S.median(alone2),
                 S.median(eqs) if eqs else 0, S.median(unlock) if unlock else 0))
        table.append((m, link, st, S.median(eff), spread(eff), S.median(g), S.median(w),
                      100 * S.median(share), S.median(e), S.median(unlock) if unlock else 0))
print()
print("| model | link | setting | efficiency against the ceiling (median) | spread | in flight / step "
      "| exposed / step, most | share of the step | exposed / step, least "
      "| diagnostic: against the lockstep bound |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m, link, st, eff, sp, g, w, sh, e, u in table:
    print("| %s | %s | %s | %.2f | %s | %.0f ms | %.0f ms | %.0f%% | %.0f ms | %.2f |"
          % (m, link, st, eff, sp, 1e3 * g, 1e3 * w, sh, 1e3 * e, u))
PYEOF
