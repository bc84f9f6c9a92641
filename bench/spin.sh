#!/bin/sh
# bench/spin.sh: what the CPU backend's polling between jobs
# (CDP_CPU_SPIN_US, cpu_pool.c) gains, against sleeping at once
# (CDP_CPU_SPIN_US=0), on the training step of bench/engine.sh's U-Net
# (unet.cfg width=16 depth=4, 3x256x256, batch 8) and classifier
# (3x64x64, batch 64). bench/engine_bench runs BENCH_ROUNDS times with
# each setting, alternated (sleeping, polling, sleeping, ...), so that both
# see the same minutes of a shared machine; the ratio printed is the median
# of the back-to-back pairs' ratios (polling / sleeping samples/s), with
# the pairs listed. Target: >= 1.0 (a ratio below 1 would say that polling
# takes a CPU the work needs). On a 2-vCPU VM a sleeping worker woke late
# enough that the calling thread did 60-66% of a U-Net step's work alone
# (doc/PERFORMANCE.md, 2026-12-06).
#   usage: bench/spin.sh [BUILDDIR]
#   env: BENCH_THREADS (default nproc), BENCH_ROUNDS (8), BENCH_PRECISION
#        (bf16 where the CPU has AVX512_BF16, else fp32), BENCH_POLL_US
#        (the polling setting, default 1000, cpu_pool.c's default)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
T=${BENCH_THREADS:-$(nproc)}
rounds=${BENCH_ROUNDS:-8}
poll=${BENCH_POLL_US:-1000}
bench=$build/bench/engine_bench
models=$src/share/cdpool/models

if ! make -s -C "$build" bench/engine_bench >&2; then
	echo "spin.sh: cannot make bench/engine_bench in '$build'" >&2
	exit 1
fi
if [ "$T" -lt 2 ]; then
	echo "spin.sh: SKIP: one thread has no workers to wake (BENCH_THREADS=$T)" >&2
	exit 77
fi
prec=${BENCH_PRECISION:-}
if [ -z "$prec" ]; then
	if "$bench" -t 1 -n 1 -w 0 -p bf16 -i 3,32,32 -b 2 "$models/classifier.cfg" \
		>/dev/null 2>&1; then prec=bf16; else prec=fp32; fi
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "threads: $T; $prec; $rounds rounds each; polling CDP_CPU_SPIN_US=$poll against 0"

rate() { # the samples/s of one engine_bench run
	"$@" | sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p'
}

# one NAME ARGS...: the rounds, then the line of NAME
one() {
	name=$1
	shift
	list=
	i=0
	while [ "$i" -lt "$rounds" ]; do
		a=$(CDP_CPU_SPIN_US=0 rate "$bench" -t "$T" -n 3 -w 1 -p "$prec" "$@")
		b=$(CDP_CPU_SPIN_US=$poll rate "$bench" -t "$T" -n 3 -w 1 -p "$prec" "$@")
		list="$list $a:$b"
		i=$((i + 1))
	done
	python3 - "$name" $list <<'PYEOF'
import statistics, sys
name, pairs = sys.argv[1], [tuple(map(float, p.split(":"))) for p in sys.argv[2:]]
r = [b / a for a, b in pairs]
print("%-11s sleeping median %.2f best %.2f samples/s, polling median %.2f best %.2f: "
      "polling / sleeping %.2fx (median of %s)" % (
      name, statistics.median(a for a, _ in pairs), max(a for a, _ in pairs),
      statistics.median(b for _, b in pairs), max(b for _, b in pairs),
      statistics.median(r), " ".join("%.2f" % x for x in r)))
PYEOF
}

one unet -D width=16 -D depth=4 -i 3,256,256 -b 8 "$models/unet.cfg"
one classifier -i 3,64,64 -b 64 "$models/classifier.cfg"
