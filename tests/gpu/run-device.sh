#!/bin/sh
# tests/gpu/run-device.sh: the whole GPU check in one go, on a machine with
# a GPU, CUDA, cuDNN, NCCL, a C compiler and PyTorch but without GDAL,
# LMDB, OpenBLAS, Open MPI, autotools, pkg-config or a network.
#
# What it needs beside the source tree (tests/gpu/README has the `run`
# command that carries them):
#   .devdeps/     libraries and Open MPI, unpacked by scripts/device-deps.sh
#                 (with the road pool for two_ranks.sh in .devdeps/pool)
#   configure Makefile.in config.h.in aclocal.m4 build-aux/   from ./bootstrap
# Steps, each timed; a failed step does not stop the later ones:
#   env        the .devdeps paths (tests/gpu/devenv.sh), the CUDA toolkit,
#              cuDNN and NCCL found (the toolkit of nvcc, or CUDA_HOME;
#              cuDNN/NCCL there, in /usr, or in PyTorch's nvidia wheels)
#   configure  $src/configure in BUILD with every library given by its
#              _CFLAGS/_LIBS (no pkg-config), GDAL left out: nothing built
#              here needs it
#   build      cdp-train, cdp-keyshuffle, tests/gpu/test_ops, test_model,
#              bench/engine_bench, tests/engine/model_dump (make -j nproc)
#   test_ops, test_ops (cudnn find), test_model, two_ranks.sh, multi_gpu.sh
#              (NCCL, rendezvous, watchdog; skips on fewer than 2 GPUs), bench/gpu.sh
#              (with per-layer and per-operator profiles of both sides in
#              LOGS/profiles: bench/gpu.sh's BENCH_PROFILE_DIR)
# and prints a summary table last (step, result, seconds). Logs go to
# $OUT (if set) or BUILD/gpu-logs, one file per step.
#
# usage: tests/gpu/run-device.sh
# env: CDP_GPU_BUILD (default: build-gpu in the source tree), CUDA_HOME,
#      CDP_GPU_CUDA=no (build without CUDA: a dry run on a machine without
#      it, where the GPU steps skip), BENCH_* (bench/gpu.sh),
#      CDP_GPU_STEPS: the steps after the build to run, of "test_ops
#      test_ops_cudnn_find test_model two_ranks multi_gpu bench_gpu" (all by default;
#      a rerun after a fix need not repeat what passed)
# Exit: 0 when no step failed (skips are not failures), else 1.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${CDP_GPU_BUILD:-$src/build-gpu}
logs=${OUT:-$build/gpu-logs}
mkdir -p "$build" "$logs" || exit 1
summary=$logs/summary.txt
: >"$summary"
failed=0
t_all=$(date +%s)

# step NAME CMD...: runs CMD with its output in $logs/NAME.log and records
# PASS (0), SKIP (77) or FAIL; on failure shows the failed checks and the
# log's tail
step() {
	name=$1
	shift
	echo "=== $name"
	t0=$(date +%s)
	"$@" >"$logs/$name.log" 2>&1
	rc=$?
	t1=$(date +%s)
	case $rc in
	0) res=PASS ;;
	77) res=SKIP ;;
	*) res="FAIL ($rc)"; failed=1 ;;
	esac
	printf '%-22s %-10s %6d\n' "$name" "$res" $((t1 - t0)) >>"$summary"
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		grep -E '^FAIL|check failed|error' "$logs/$name.log" | head -30
		echo "--- last lines of $name.log"
		tail -15 "$logs/$name.log"
	else
		tail -3 "$logs/$name.log"
	fi
	return $rc
}

# --- env: the carried libraries, CUDA, cuDNN, NCCL -----------------------
find_env() {
	DEVDEPS=$src/.devdeps
	# shellcheck disable=SC1091
	. "$src/tests/gpu/devenv.sh" || { echo "run-device: $DEVENV_ERR"; return 1; }
	echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null); $(uname -srm)"
	command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
	if [ "${CDP_GPU_CUDA:-}" = no ]; then
		echo "CDP_GPU_CUDA=no: building without CUDA"
		return 0
	fi
	nv=$(command -v nvcc 2>/dev/null) || nv=
	for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
		[ -z "$nv" ] && [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && nv=$d/bin/nvcc
	done
	[ -n "$nv" ] || { echo "run-device: no nvcc (set CUDA_HOME)"; return 1; }
	cuda=$(cd "$(dirname "$(readlink -f "$nv")")/.." && pwd)
	"$nv" --version | tail -2
	# cuDNN and NCCL: the toolkit, the system, or PyTorch's wheels
	wheels=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null) ||
		wheels=
	extra_inc= extra_lib=
	for lib in cudnn nccl; do
		found=
		for d in "$cuda" /usr /usr/local ${wheels:+"$wheels/nvidia/$lib"}; do
			for inc in "$d/include" "$d/include/x86_64-linux-gnu"; do
				[ -z "$found" ] && [ -f "$inc/$lib.h" ] && found=$inc
			done
		done
		[ -n "$found" ] || { echo "run-device: no $lib.h under $cuda, /usr or $wheels"; return 1; }
		[ "$found" = "$cuda/include" ] || extra_inc="$extra_inc -I$found"
		ld=
		for l in "$cuda/lib64" "$cuda/lib" /usr/lib/x86_64-linux-gnu /usr/local/lib \
			"$(dirname "$found")/lib"; do
			[ -z "$ld" ] && ls "$l"/lib$lib.so* >/dev/null 2>&1 && ld=$l
		done
		[ -n "$ld" ] || { echo "run-device: no lib$lib.so for $found"; return 1; }
		if [ ! -e "$ld/lib$lib.so" ]; then
			# wheels ship only libX.so.N: link through an unversioned name
			mkdir -p "$build/cudalink"
			ln -sfn "$(ls "$ld"/lib$lib.so.* | sort | tail -1)" "$build/cudalink/lib$lib.so"
			extra_lib="$extra_lib -L$build/cudalink"
		fi
		[ "$ld" = "$cuda/lib64" ] || extra_lib="$extra_lib -L$ld"
		export LD_LIBRARY_PATH="$ld:$LD_LIBRARY_PATH"
		echo "$lib: $found, $ld"
	done
	echo "CUDA $cuda${extra_inc:+; CPPFLAGS$extra_inc}${extra_lib:+; LDFLAGS$extra_lib}"
}

do_configure() {
	for f in configure Makefile.in config.h.in aclocal.m4 build-aux/test-driver; do
		[ -e "$src/$f" ] || { echo "run-device: no $f in the tree (carry it: tests/gpu/README)"; return 1; }
	done
	# make must not think the generated files older than their sources
	(cd "$src" && touch configure.ac Makefile.am && sleep 1 && touch aclocal.m4 &&
		touch configure && touch config.h.in Makefile.in)
	D=$src/.devdeps
	L=$D/usr/lib/x86_64-linux-gnu
	if [ "${CDP_GPU_CUDA:-}" = no ]; then
		with_cuda=no
	else
		with_cuda=$cuda
	fi
	(cd "$build" && "$src/configure" -q --with-cuda="$with_cuda" \
		CPPFLAGS="${extra_inc:-}" LDFLAGS="${extra_lib:-}" PKG_CONFIG=false \
		GDAL_CFLAGS=' ' GDAL_LIBS=' ' \
		LMDB_CFLAGS="-I$D/usr/include" LMDB_LIBS="-L$L -llmdb" \
		PNG_CFLAGS="-I$D/usr/include/libpng16" PNG_LIBS="-L$L -lpng16" \
		ZLIB_CFLAGS="-I$D/usr/include" ZLIB_LIBS="-L$L -lz" \
		OPENBLAS_CFLAGS="-I$D/usr/include/x86_64-linux-gnu/openblas-pthread" \
		OPENBLAS_LIBS="-L$DEVDEPS_BLAS -lopenblas" \
		MPI_CFLAGS="-I$L/openmpi/include" MPI_LIBS="-L$L/openmpi/lib -lmpi" \
		MPIRUN="$MPIRUN") || return 1
	grep -E 'CUDA backend|Open MPI|OpenBLAS' "$build/config.log" | head -3
	sed -n 's/^#define HAVE_CUDA.*/HAVE_CUDA: yes/p' "$build/config.h"
}

do_build() {
	make -C "$build" -j "$(nproc)" cdp-train cdp-keyshuffle tests/gpu/test_ops tests/gpu/test_model \
		bench/engine_bench tests/engine/model_dump
}

# the environment make check gives the tests
run_test() {
	CDP_BUILDDIR=$build CDP_SRCDIR=$src PATH=$build:$PATH "$@"
}

# want STEP: whether CDP_GPU_STEPS (default: all) names STEP
all_steps="test_ops test_ops_cudnn_find test_model two_ranks multi_gpu bench_gpu"
for w in ${CDP_GPU_STEPS:-$all_steps}; do
	case " $all_steps " in
	*" $w "*) ;;
	*) echo "run-device: unknown step '$w' in CDP_GPU_STEPS (steps: $all_steps)" >&2; exit 2 ;;
	esac
done
want() { case " ${CDP_GPU_STEPS:-$all_steps} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

cuda= extra_inc= extra_lib=
# (a function with a redirection runs in this shell: find_env's exports stay)
if step env find_env && step configure do_configure && step build do_build; then
	want test_ops && step test_ops run_test "$build/tests/gpu/test_ops"
	want test_ops_cudnn_find && step test_ops_cudnn_find env CDP_CUDNN_BENCHMARK=1 \
		CDP_GPU_TEST_SEED=7 CDP_BUILDDIR="$build" "$build/tests/gpu/test_ops"
	want test_model && step test_model run_test "$build/tests/gpu/test_model"
	pool=
	[ ! -d "$src/.devdeps/pool/pool" ] || pool=$src/.devdeps/pool
	want two_ranks && step two_ranks run_test env CDP_GPU_POOL="$pool" \
		sh "$src/tests/gpu/two_ranks.sh"
	want multi_gpu && step multi_gpu run_test env CDP_GPU_POOL="$pool" \
		sh "$src/tests/gpu/multi_gpu.sh"
	if want bench_gpu; then
		step bench_gpu run_test env BENCH_PROFILE_DIR="$logs/profiles" \
			sh "$src/bench/gpu.sh" "$build"
		sed -n '/^model /,$p' "$logs/bench_gpu.log"
	fi
fi
echo
echo "=== summary ($(($(date +%s) - t_all)) s; logs in $logs)"
printf '%-22s %-10s %6s\n' step result seconds
cat "$summary"
exit $failed
