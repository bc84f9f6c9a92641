#!/bin/sh
# bench/allreduce.sh: bus bandwidth of the mpi and ring all-reduce (dist.h)
# from 1 MiB to 256 MiB, busbw = 2(j-1)/j * bytes / time as nccl-tests define
# it, with the ratio ring/mpi (> 1: the ring is faster), then the exposed
# communication time of serial and overlapped bucketed reduction during a
# simulated backward. On one machine these are shared-memory numbers (Open
# MPI's vader transport), not network numbers.
#   usage: bench/allreduce.sh [BUILDDIR]
#   env:   BENCH_NP (ranks, default 2), BENCH_MAX (largest size, default
#          256M), BENCH_TIME (seconds per measurement, default 0.3),
#          BENCH_REPEAT (measurements per size, the best counts; default 3),
#          MPIRUN
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
bench=$build/bench/allreduce_bench
np=${BENCH_NP:-2}
mpirun=${MPIRUN:-$(command -v mpirun || true)}
[ -n "$mpirun" ] || { echo "allreduce.sh: mpirun not found (install openmpi-bin)" >&2; exit 1; }
[ -x "$bench" ] || { echo "allreduce.sh: '$bench' not built" >&2; exit 1; }
flags=
if "$mpirun" --version 2>&1 | grep -q 'Open MPI'; then
	flags=--oversubscribe
	[ "$(id -u)" -ne 0 ] || flags="$flags --allow-run-as-root"
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "mpi: $("$mpirun" --version 2>&1 | head -1); one node, so shared memory only"
# shellcheck disable=SC2086
"$mpirun" $flags -np "$np" "$bench" --min-size 1M --max-size "${BENCH_MAX:-256M}" \
	--time "${BENCH_TIME:-0.3}" --repeat "${BENCH_REPEAT:-3}"
echo
# shellcheck disable=SC2086
"$mpirun" $flags -np "$np" "$bench" --overlap --max-size 64M --layers 32 --buckets 8 \
	--compute 5 --steps 5
