#!/bin/sh
# tests/gpu/dryrun.sh: tests/gpu/run-device.sh on this machine as a GPU
# machine would see the tree, as far as a machine without a GPU allows.
# As root, in a private mount namespace, it hides the system's LMDB,
# OpenBLAS, libpng, zlib and cairo headers, Open MPI, PMIx, GDAL headers,
# pkg-config and autotools, then runs run-device.sh with a clean
# environment, so that only .devdeps (scripts/device-deps.sh) provides them.
# The build must succeed and the GPU steps skip (77). Then, with the same
# things hidden, what the GPU steps rest on runs on the CPU: the built test
# programs with the CPU peer (CDP_GPU_TEST_PEER=cpu; OpenBLAS from
# .devdeps), and cdp-train at 1 and 2 ranks (.devdeps' mpirun, the carried
# pool), whose losses must agree as in tests/train/train.sh.
#   usage: tests/gpu/dryrun.sh
#   env: CDP_GPU_CUDA=no builds without CUDA; CDP_GPU_BUILD as run-device.sh
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
self=$src/tests/gpu/dryrun.sh
A=/usr/lib/x86_64-linux-gnu

case ${1:-} in
--hidden)
	empty=$(mktemp -d)
	for d in $A/openmpi $A/pmix2 /usr/share/openmpi /etc/openmpi $A/openblas-pthread \
		/usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/libpng16 /usr/include/gdal \
		/usr/include/cairo $A/pkgconfig /usr/share/pkgconfig /usr/share/autoconf /usr/share/automake-1.16; do
		[ ! -d "$d" ] || mount --bind "$empty" "$d"
	done
	for f in /usr/include/lmdb.h /usr/include/zlib.h /usr/include/png.h $A/liblmdb.so \
		$A/liblmdb.so.0 $A/libpng16.so $A/libpng16.so.16 $A/libz.so $A/libcairo.so $A/libevent_core-2.1.so.7 \
		$A/libevent_pthreads-2.1.so.7 $A/libhwloc.so.15 $A/libmpi.so.40 $A/libopen-pal.so.40 \
		$A/libopen-rte.so.40 $A/libpmix.so.2 /usr/bin/mpirun /usr/bin/orterun /usr/bin/mpicc \
		/usr/bin/pkg-config /usr/bin/autoreconf /usr/bin/autoconf /usr/bin/automake \
		/usr/bin/aclocal; do
		[ ! -e "$f" ] || mount --bind /dev/null "$f"
	done
	exec env -i HOME="$empty" TMPDIR=/tmp PATH=/usr/local/cuda/bin:/usr/bin:/bin \
		DEVENV_FB_ALL=1 CDP_GPU_CUDA="${CDP_GPU_CUDA:-}" CDP_GPU_BUILD="${CDP_GPU_BUILD:-$src/build-gpu}" \
		sh "$self" --clean
	;;
--clean)
	sh "$src/tests/gpu/run-device.sh" || exit 1
	echo "=== the built programs on the CPU, with .devdeps only"
	DEVDEPS=$src/.devdeps
	# shellcheck disable=SC1091
	. "$src/tests/gpu/devenv.sh" || { echo "dryrun.sh: $DEVENV_ERR" >&2; exit 1; }
	b=$CDP_GPU_BUILD
	for p in test_ops test_model; do
		CDP_GPU_TEST_PEER=cpu CDP_SRCDIR=$src "$b/tests/gpu/$p" | tail -1
	done
	P=$src/.devdeps/pool
	set -- --db "$P/pool" --keys "$P/train.keys" --threads 1 -q \
		--model "$src/tests/train/small.cfg:depth=1" --steps 6 --log-every 1
	"$b/cdp-train" "$@" --batch 8 --out "$HOME/one" 2>"$HOME/one.err" ||
		{ cat "$HOME/one.err" >&2; exit 1; }
	# the carried cairo and font drew the plot, and fontconfig said nothing
	[ -s "$HOME/one/loss.png" ] && [ ! -s "$HOME/one.err" ] ||
		{ cat "$HOME/one.err" >&2; echo "dryrun.sh: no loss.png, or messages" >&2; exit 1; }
	"$MPIRUN" --allow-run-as-root --oversubscribe -np 2 "$b/cdp-train" "$@" --batch 4 \
		--allreduce mpi --out "$HOME/two"
	# shellcheck disable=SC1091
	. "$src/tests/train/metrics.sh"
	for r in one two; do
		losses "$HOME/$r/metrics.jsonl" >"$HOME/$r.l"
	done
	[ "$(wc -l <"$HOME/one.l")" -eq 6 ] || { echo "dryrun.sh: want 6 losses" >&2; exit 1; }
	losses_close "$HOME/one.l" "$HOME/two.l" 1e-6 ||
		{ echo "dryrun.sh: 2 ranks differ from 1 process" >&2; exit 1; }
	echo "cdp-train: 6 losses of 2 ranks (.devdeps mpirun) x 4 = 1 process x 8"
	;;
'')
	[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null ||
		{ echo "dryrun.sh: needs root and unshare -m" >&2; exit 77; }
	[ -d "$src/.devdeps/pool" ] ||
		{ echo "dryrun.sh: run scripts/device-deps.sh BUILDDIR first" >&2; exit 1; }
	exec unshare -m sh "$self" --hidden
	;;
*)
	echo "usage: tests/gpu/dryrun.sh" >&2
	exit 2
	;;
esac
