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
bmb=${BENCH_BUCKET_MB:-}
rounds=${BENCH_ROUNDS:-3}
CDPC_TMP=$D
trap 'cluster_down; rm -rf "$D"' EXIT
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

# summary: "samples/s grad_allreduce_last_s grad_exposed_last_s grad_exposed_s
# step/forward" from the step lines after the warm-up (median rate, mean
# times per step) (of RUNDIR, default node1's run directory). step/forward
# is that of `python -m cdpool trace` (python/cdpool/trace.py) for the
# run's --trace timeline: the median over the steps of the step's time over
# the slower rank's forward pass, which moves no gradients, so it is the
# speed of that rank's core at that moment, and the ratio is the step's
# length in units of it.
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
g = sum(r["grad_allreduce_last_s"] for r in rows) / n
e = sum(r["grad_exposed_last_s"] for r in rows) / n
w = sum(r["grad_exposed_s"] for r in rows) / n
print("%.2f %.4f %.4f %.4f %.4f" % (med, g, e, w, q or 0))
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
		set -- "$@" --model "$src/share/cdpool/models/unet.cfg:width=16,depth=4" --batch "$batch"
	else
		set -- "$@" --model "$src/share/cdpool/models/classifier.cfg" --batch "$cbatch"
	fi
	set -- "$@" -q --db "$N/$m" --keys "$N/$m.keys" --out "$N/run" --steps "$steps" \
		--threads 1 --log-every 1 --trace "$N/run/trace.json" --pad-last ${bmb:+--bucket-mb "$bmb"}
	rm -rf "$run_dir" "$run_dir2"
	if [ "$nh" = 1 ]; then
		cluster_run node1 cdp-train "$@"
	elif [ "$nh" = pair ]; then
		cluster_run node2 cdp-train "$@" &
		cluster_run node1 cdp-train "$@"
		wait $! || { echo "scaling.sh: the 1-host run on node2 failed" >&2; exit 1; }
	else
		# CDP_DIST_THREAD=0 set: compare with the progress engine
		cluster_mpirun -np 2 -x PATH ${CDP_DIST_THREAD:+-x CDP_DIST_THREAD} cdp-train "$@"
	fi
}

# Rounds: every round runs the 1-host line and then each 2-host line, and
# a 2-host line's efficiency is taken against its own round's 1-host rate;
# the line printed is the median over the rounds. The speed of this kind
# of machine drifts by 15-30% within minutes (doc/PERFORMANCE.md), which a
# single 1-host run at the start turns into the efficiency of every line.
R=$D/rounds
: >"$R"
for m in $models; do
	r=1
	while [ "$r" -le "$rounds" ]; do
		cluster_shape off
		train "$m" 1
		set -- $(summary)
		echo "$m 1-host $r $1 0 0 0 $5" >>"$R"
		echo "$m: round $r: 1 host: samples/s=$1" >&2
		# both hosts' cores busy, as in a 2-host run: the machine's own
		# cost of running two (they share its memory and caches)
		train "$m" pair
		a=$(summary | cut -d' ' -f1) b=$(summary "$run_dir2" | cut -d' ' -f1)
		echo "$m pair $r $(echo "$a $b" | awk '{ print $1 + $2 }') 0 0 0 0" >>"$R"
		echo "$m: round $r: 1 host on each of 2 at once: samples/s=$a + $b" >&2
		for rate in $rates; do
			cluster_shape "$rate"
			for ov in overlap serial; do
				extra=
				[ "$ov" = overlap ] || extra=--no-overlap
				train "$m" 2 $extra
				set -- $(summary)
				echo "$m $rate/$ov $r $1 $2 $3 $4 $5" >>"$R"
				echo "$m: round $r: 2 hosts, link $rate, $ov: samples/s=$1" >&2
			done
		done
		r=$((r + 1))
	done
	cluster_shape off
done
"$PY" - "$R" "$batch" "$cbatch" <<'PYEOF'
import statistics as S, sys
# a row: model, line, round, samples/s, in flight and exposed on the rank
# that waited least, the most any rank waited (seconds per step), and the
# step over the slower rank's forward pass (summary)
rows = [l.split() for l in open(sys.argv[1])]
gbatch = {"unet": 2 * int(sys.argv[2]), "classifier": 2 * int(sys.argv[3])}
one = {(m, r): float(x) for m, k, r, x, g, e, w, q in rows if k == "1-host"}
oneq = {(m, r): float(q) for m, k, r, x, g, e, w, q in rows if k == "1-host"}
pair = {(m, r): float(x) for m, k, r, x, g, e, w, q in rows if k == "pair"}
order = []
for m, k, *_ in rows:
    if (m, k) not in order:
        order.append((m, k))
busy = {}
for m, k in order:
    got = [(r, float(x), float(g), float(e), float(w), float(q))
           for mm, kk, r, x, g, e, w, q in rows if (mm, kk) == (m, k)]
    rate = S.median(x for r, x, *_ in got)
    if k == "1-host":
        print("%s: 1 host: samples/s=%.2f step/forward=%.2f (rounds: %s)"
              % (m, rate, S.median(q for *_, q in got), " ".join("%.2f" % x for r, x, *_ in got)))
        continue
    if k == "pair":
        busy[m] = S.median(x / (2 * one[(m, r)]) for r, x, *_ in got)
        print("%s: 1 host on each of 2 at once: samples/s=%.2f together, %.2f of twice 1 host "
              "(rounds: %s)" % (m, rate, busy[m], " ".join("%.2f" % x for r, x, *_ in got)))
        continue
    effs = [x / (2 * one[(m, r)]) for r, x, *_ in got]
    # against the two 1-host runs side by side: what running distributed
    # cost, the machine's cost of two busy cores taken out
    sides = [x / pair[(m, r)] for r, x, *_ in got]
    # the exposed time's share of the step (gbatch / x s) is the network's
    # cost; the efficiency without it is the cores'
    nets = [max(1 - e * x / gbatch[m], 1e-9) for r, x, g, e, w, q in got]
    cs = [v / n for v, n in zip(effs, nets)]
    # the efficiency at equal core speed: a step measured in forward passes
    # of its slower rank against a 1-host step in forward passes of its
    # core. What a 2-host step costs beyond one host's (communication,
    # the thread, waiting within a step) stays in; the cores' speeds
    # cancel, the straggler's as well as a slow spell's.
    eqs = [oneq[(m, r)] / q for r, x, g, e, w, q in got if q > 0 and oneq[(m, r)] > 0]
    g = S.median(g for r, x, g, e, w, q in got)
    e = S.median(e for r, x, g, e, w, q in got)
    w = S.median(w - e for r, x, g, e, w, q in got)
    link, ov = k.split("/")
    print("%s: 2 hosts, link %s, %s: samples/s=%.2f efficiency=%.2f side-by-side=%.2f "
          "equal-speed=%.2f allreduce=%.4fs exposed=%.4fs hidden=%.2f waited=%.4fs network=%.2f "
          "compute=%.2f (efficiency by round: %s; side-by-side: %s; equal-speed: %s)"
          % (m, link, ov, rate, S.median(effs), S.median(sides), S.median(eqs) if eqs else 0, g, e,
             1 - e / g if g > 0 else 0, w, S.median(nets), S.median(cs),
             " ".join("%.2f" % v for v in effs), " ".join("%.2f" % v for v in sides),
             " ".join("%.2f" % v for v in eqs)))
for m, b in busy.items():
    if b < 0.95:
        print("%s: note: two 1-host runs at once made %.2f of twice one alone: this machine does not "
              "give two busy cores their full speed, which caps every efficiency= (side-by-side= "
              "takes it out)" % (m, b))
PYEOF
