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
# Steps, each with a timeout (seconds; a step killed at its timeout reads
# TIMEOUT, and takes its process group with it: a hung mpirun cannot eat
# the slot), inside one time budget for the whole run (CDP_GPU_BUDGET,
# default 440 s, so that the summary comes out before the run tool's 480 s
# limit: a step that cannot get 20 s is NOT RUN); a failed step does not
# stop the later ones:
#   env        (in this shell, each probe with a timeout) the .devdeps paths
#              (tests/gpu/devenv.sh), the GPUs nvidia-smi lists, the CUDA
#              toolkit (of nvcc, or CUDA_HOME), cuDNN and NCCL: the
#              toolkit's, the system's, or PyTorch's wheels' (python3's
#              site-packages, then the usual pip folders:
#              site-packages/nvidia/{cudnn,nccl}/include)
#   configure  120  $src/configure in BUILD with every library given by its
#              _CFLAGS/_LIBS (no pkg-config), GDAL left out: nothing built
#              here needs it
#   build      300  cdp-train, cdp-keyshuffle, tests/gpu/test_ops,
#              test_model, bench/engine_bench, tests/engine/model_dump
#              (make -j nproc)
#   devices     30  the devices this build sees (test_ops --count-devices):
#              none while nvidia-smi lists a GPU is a failure, with the
#              CUDA runtime's reason
#   test_ops 120, test_ops_cudnn_find 150 (CDP_CUDNN_BENCHMARK=1, another
#              seed), test_ops_nhwc 120 (CDP_CUDNN_NHWC=1: tf32 staged
#              channels-last), test_ops_cudnn_bn 120 (CDP_CUDNN_BN=1:
#              cuDNN's training batchnorm), test_model 90, two_ranks 150, multi_gpu 150 (NCCL,
#              rendezvous, watchdog; skips on fewer than 2 GPUs), bench_gpu
#              240 (with per-layer and per-operator profiles of both sides
#              in LOGS/profiles: bench/gpu.sh's BENCH_PROFILE_DIR),
#              bench_variants 200 (the U-Net with CDP_CUDNN_BN=1 and with
#              CDP_CUDNN_NHWC=1, each against PyTorch again);
#   test_ops_blocking 150, optional: test_ops with CUDA_LAUNCH_BLOCKING=1,
#              which pins an asynchronous error on the launch that caused
#              it; run when named in CDP_GPU_STEPS, or when test_ops FAILed
# The test steps run with CDP_CUDNN_VERBOSE=1 (each conv plan's cuDNN
# algorithms in the log). A skip for "no CUDA device" on a machine whose
# nvidia-smi lists a GPU is a failure (tests/gpu/steps.sh). The summary
# table comes last (step, result, seconds), with what this machine could
# not check (two-rank NCCL and the rest of multi_gpu.sh need 2 GPUs; on one
# GPU two_ranks.sh's MPI and ring runs are the multi-rank cover). Logs go
# to $OUT (if set) or BUILD/gpu-logs, one file per step.
#
# usage: tests/gpu/run-device.sh
# env: CDP_GPU_BUILD (default: build-gpu in the source tree), CUDA_HOME,
#      CDP_GPU_CUDA=no (build without CUDA: a dry run on a machine without
#      it, where the GPU steps skip), CDP_GPU_BUDGET (seconds, default 440),
#      BENCH_* (bench/gpu.sh), CDP_GPU_STEPS: the steps after the build to
#      run, of "test_ops test_ops_cudnn_find test_ops_nhwc test_ops_cudnn_bn
#      test_model two_ranks multi_gpu bench_gpu bench_variants" (all by
#      default) and "test_ops_blocking" (a rerun after a fix need not
#      repeat what passed)
# Exit: 0 when no step failed, timed out or was not run (skips are not
# failures, but for want of a device on a GPU machine), else 1.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${CDP_GPU_BUILD:-$src/build-gpu}
logs=${OUT:-$build/gpu-logs}
mkdir -p "$build" "$logs" || exit 1
summary=$logs/summary.txt

# shellcheck source=tests/gpu/steps.sh
. "$src/tests/gpu/steps.sh"

# to SECS CMD...: a probe that must not hang the env step
to() { timeout -k 5 "$@"; }

# the folders where PyTorch's nvidia wheels may be: python3's sys.path
# (its site-packages), then the usual places of pip's installs
wheel_roots() {
	to 20 python3 -c 'import sys; print("\n".join(p for p in sys.path if p))' 2>/dev/null
	for d in /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
		/usr/lib/python3/dist-packages /opt/conda/lib/python3*/site-packages \
		"${HOME:-/nonexistent}"/.local/lib/python3*/site-packages; do
		[ -d "$d" ] && echo "$d"
	done
}

# --- env: the carried libraries, CUDA, cuDNN, NCCL -----------------------
find_env() {
	DEVDEPS=$src/.devdeps
	# shellcheck disable=SC1091
	. "$src/tests/gpu/devenv.sh" || { echo "run-device: $DEVENV_ERR"; return 1; }
	echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null); $(uname -srm)"
	gpus_listed=0
	if command -v nvidia-smi >/dev/null 2>&1; then
		to 30 nvidia-smi -L >"$logs/nvidia-smi.txt" 2>&1
		cat "$logs/nvidia-smi.txt"
		gpus_listed=$(grep -c '^GPU [0-9]' "$logs/nvidia-smi.txt")
	fi
	echo "nvidia-smi lists $gpus_listed GPU(s)"
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
	to 30 "$nv" --version | tail -2
	# cuDNN and NCCL: the toolkit, the system, or PyTorch's wheels
	roots=$(wheel_roots)
	extra_inc= extra_lib=
	for lib in cudnn nccl; do
		# shellcheck disable=SC2086
		found=$(IFS='
'; find_inc "$lib" "$cuda" /usr /usr/local $roots) || {
			echo "run-device: no $lib.h under $cuda, /usr, /usr/local or the site-packages" \
				"of python3 ($(printf "%s " $roots)): nvidia/$lib/include"
			return 1
		}
		# a folder searched anyway is not named (sys_dir, tests/gpu/steps.sh)
		[ "$found" = "$cuda/include" ] || sys_dir "$found" || extra_inc="$extra_inc -I$found"
		ld=
		# the library beside the header first (a wheel's next to its include/)
		for l in "$(dirname "$found")/lib" "$cuda/lib64" "$cuda/lib" \
			/usr/lib/x86_64-linux-gnu /usr/local/lib; do
			[ -z "$ld" ] && ls "$l"/lib$lib.so* >/dev/null 2>&1 && ld=$l
		done
		[ -n "$ld" ] || { echo "run-device: no lib$lib.so for $found"; return 1; }
		if [ ! -e "$ld/lib$lib.so" ]; then
			# wheels ship only libX.so.N: link through an unversioned name
			mkdir -p "$build/cudalink"
			ln -sfn "$(ls "$ld"/lib$lib.so.* | sort | tail -1)" "$build/cudalink/lib$lib.so"
			extra_lib="$extra_lib -L$build/cudalink"
		fi
		if [ "$ld" != "$cuda/lib64" ] && ! sys_dir "$ld"; then
			extra_lib="$extra_lib -L$ld"
			export LD_LIBRARY_PATH="$ld:$LD_LIBRARY_PATH"
		fi
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
		CAIRO_CFLAGS="-I$D/fb/usr/include/cairo" CAIRO_LIBS="-L$DEVDEPS_FB -lcairo" \
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


# bench_variants: the U-Net with each setting that is not the default and
# was not yet timed on a GPU, against PyTorch in the same run: cuDNN's
# batchnorm (CDP_CUDNN_BN=1; ours is the default) and tf32 convolutions
# staged channels-last (CDP_CUDNN_NHWC=1)
do_bench_variants() {
	for v in "CDP_CUDNN_BN=1 tf32 bf16" "CDP_CUDNN_NHWC=1 tf32"; do
		set -- $v
		e=$1
		shift
		echo "== $e"
		env "$e" BENCH_MODELS=unet BENCH_PRECISIONS="$*" BENCH_REPEAT=1 \
			sh "$src/bench/gpu.sh" "$build" >"$logs/bench_${e%%=*}.log" 2>&1
		rc=$?
		tail -2 "$logs/bench_${e%%=*}.log"
		[ "$rc" -eq 0 ] || return "$rc"     # 77: no device (a skip)
		sed -n '/^model /,$p' "$logs/bench_${e%%=*}.log"
	done
}

# the devices this build sees; none while nvidia-smi lists a GPU fails
do_devices() {
	n=$("$build/tests/gpu/test_ops" --count-devices 2>"$logs/devices.why") || return 1
	echo "this build sees $n CUDA device(s); nvidia-smi lists $gpus_listed"
	[ "$n" -gt 0 ] && return 0
	cat "$logs/devices.why"
	[ "$gpus_listed" -eq 0 ] || return 1
	return 77
}

# sh run-device.sh --run FUNCTION: a step's function in a child process,
# which the step's timeout can end (the variables it needs are exported)
if [ "${1:-}" = --run ]; then
	shift
	"$@"
	exit $?
fi

: >"$summary"
failed=0
t_all=$(date +%s)

# want STEP: whether CDP_GPU_STEPS (default: all but the optional) names STEP
all_steps="test_ops test_ops_cudnn_find test_ops_nhwc test_ops_cudnn_bn test_model two_ranks
multi_gpu bench_gpu bench_variants"
for w in ${CDP_GPU_STEPS:-$all_steps}; do
	case " $(echo $all_steps) test_ops_blocking " in
	*" $w "*) ;;
	*) echo "run-device: unknown step '$w' in CDP_GPU_STEPS (steps: $all_steps test_ops_blocking)" >&2
		exit 2 ;;
	esac
done
want() { case " $(echo ${CDP_GPU_STEPS:-$all_steps}) " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
budget=${CDP_GPU_BUDGET:-440}
case $budget in '' | *[!0-9]*) echo "run-device: CDP_GPU_BUDGET='$budget' is not seconds" >&2; exit 2 ;; esac
budget_end=$((t_all + budget))

cuda= extra_inc= extra_lib= gpus_listed=0 cuda_why=
self=$src/tests/gpu/run-device.sh
# env runs in this shell (its exports are for the later steps): a function
# with a redirection runs here
echo "=== env"
if find_env >"$logs/env.log" 2>&1; then
	printf '%-22s %-24s %6d\n' env PASS $(($(date +%s) - t_all)) >>"$summary"
	tail -6 "$logs/env.log"
	env_ok=1
else
	printf '%-22s %-24s %6d\n' env FAIL $(($(date +%s) - t_all)) >>"$summary"
	failed=1 env_ok=0
	tail -15 "$logs/env.log"
fi
export src build logs cuda extra_inc extra_lib gpus_listed
if [ "$env_ok" -eq 1 ] && step configure 120 sh "$self" --run do_configure &&
	step build 300 sh "$self" --run do_build; then
	# the environment make check gives the tests (exported: step's timeout
	# runs programs, not functions), and each conv plan's cuDNN choice
	export CDP_BUILDDIR="$build" CDP_SRCDIR="$src" PATH="$build:$PATH" CDP_CUDNN_VERBOSE=1
	step devices 30 sh "$self" --run do_devices
	# no device while nvidia-smi lists one: every GPU step's skip is a failure
	[ "$gpus_listed" -eq 0 ] || [ ! -s "$logs/devices.why" ] ||
		cuda_why=$(cat "$logs/devices.why")
	want test_ops && step test_ops 120 "$build/tests/gpu/test_ops"
	want test_ops_cudnn_find && step test_ops_cudnn_find 150 env CDP_CUDNN_BENCHMARK=1 \
		CDP_GPU_TEST_SEED=7 "$build/tests/gpu/test_ops"
	want test_ops_nhwc && step test_ops_nhwc 120 env CDP_CUDNN_NHWC=1 \
		"$build/tests/gpu/test_ops"
	want test_ops_cudnn_bn && step test_ops_cudnn_bn 120 env CDP_CUDNN_BN=1 \
		"$build/tests/gpu/test_ops"
	if want test_ops_blocking || grep -q '^test_ops  *FAIL' "$summary"; then
		step test_ops_blocking 150 env CUDA_LAUNCH_BLOCKING=1 "$build/tests/gpu/test_ops"
	fi
	want test_model && step test_model 90 "$build/tests/gpu/test_model"
	pool=
	[ ! -d "$src/.devdeps/pool/pool" ] || pool=$src/.devdeps/pool
	want two_ranks && step two_ranks 150 env CDP_GPU_POOL="$pool" \
		sh "$src/tests/gpu/two_ranks.sh"
	want multi_gpu && step multi_gpu 150 env CDP_GPU_POOL="$pool" \
		sh "$src/tests/gpu/multi_gpu.sh"
	if want bench_gpu; then
		step bench_gpu 240 env BENCH_PROFILE_DIR="$logs/profiles" \
			sh "$src/bench/gpu.sh" "$build"
		sed -n '/^model /,$p' "$logs/bench_gpu.log"
	fi
	want bench_variants && step bench_variants 200 sh "$self" --run do_bench_variants
fi
echo
echo "=== summary ($(($(date +%s) - t_all)) s of a ${budget} s budget; logs in $logs)"
printf '%-22s %-24s %6s\n' step result seconds
cat "$summary"
if [ "$gpus_listed" -lt 2 ]; then
	echo "not checked with $gpus_listed GPU(s) listed: two-rank NCCL (--allreduce nccl), the"
	echo "  launch without mpirun (rendezvous file, NCCL only), the watchdog after a rank dies"
	echo "  (multi_gpu.sh: NCCL refuses two ranks on one GPU), and a rank per GPU; covered on"
	echo "  one GPU: 2 ranks sharing it with --allreduce mpi and ring (two_ranks)"
fi
exit $failed
