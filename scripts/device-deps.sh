#!/bin/sh
# scripts/device-deps.sh [BUILDDIR]: the libraries a GPU machine lacks, for
# tests/gpu/run-device.sh. Such a machine has CUDA, cuDNN, NCCL, a C
# compiler and PyTorch but no LMDB, OpenBLAS, zlib/libpng headers or Open
# MPI, and no network, so this script (run on a Debian machine with apt)
# fetches their Debian packages and unpacks them into .devdeps/ in the
# source tree, which travels with it:
#   - `apt-get download` of the packages below (libraries, their -dev
#     headers, Open MPI's launcher and runtime closure), `dpkg -x` of each;
#   - absolute symlinks rewritten to relative ones, so they resolve inside
#     .devdeps wherever it lands;
#   - docs, man pages, static libraries, Fortran/Java/C++/OpenSHMEM MPI
#     bindings and LAPACK dropped; OpenBLAS's 36 MB library (kernels for
#     every CPU) stored xz-compressed (4 MB), unpacked by run-device.sh;
#   - libevent (needed by Open MPI) patched to run on glibc 2.34/2.35: its
#     two arc4random calls are glibc 2.36's; run-device.sh supplies them
#     from tests/gpu/arc4random.c there (tests/gpu/elf_weak_version.py);
#   - with BUILDDIR (a configured and built tree with cdp-tile,
#     cdp-lmdbpack, cdp-keyshuffle and a $PYTHON with GDAL), the small road
#     pool of tests/gpu/mkpool.sh in .devdeps/pool, for tests/gpu/two_ranks.sh.
# Then it checks that Open MPI runs from .devdeps alone (a 2-rank hello
# with the system's Open MPI hidden in a private mount namespace, when run
# as root) and prints the total size (the device transfer takes 64 MiB
# for the tree and what it carries). .devdeps is ignored by git
# (.git/info/exclude).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
dest=$src/.devdeps
build=${1:-}
PKGS="liblmdb0 liblmdb-dev libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
zlib1g zlib1g-dev libpng16-16 libpng-dev libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common
libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2 libnuma1 libltdl7
libudev1"
# cairo (cdp-train's loss.png, lib/cdp_plot.c) and what it needs, in fb/: a
# fallback, not on the paths as a whole. The GPU machine's own copies of
# these (expat, bzip2, freetype, X11 ...) are newer and may be what its
# Python was built against, so devenv.sh links in only those the machine
# lacks (its ld.so cache says which), plus the one font the plots need.
FB_PKGS="libcairo2 libcairo2-dev libpixman-1-0 libfontconfig1 fonts-dejavu-core libfreetype6
libbrotli1 libbz2-1.0 libexpat1 libx11-6 libxau6 libxdmcp6 libbsd0 libmd0 libxcb1
libxcb-render0 libxcb-shm0 libxext6 libxrender1"
ARCH=x86_64-linux-gnu

command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
	{ echo "device-deps.sh: needs apt-get and dpkg (Debian 12)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== downloading $(echo $PKGS $FB_PKGS | wc -w) packages"
mkdir -p "$tmp/fb"
# shellcheck disable=SC2086
(cd "$tmp" && apt-get download $PKGS >/dev/null 2>"$tmp/apt.err" &&
	cd fb && apt-get download $FB_PKGS >/dev/null 2>"$tmp/apt.err") ||
	{ cat "$tmp/apt.err" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/fb"
for d in "$tmp"/*.deb; do
	dpkg -x "$d" "$dest"
	echo "$(basename "$d")" >>"$dest/PACKAGES"
done
for d in "$tmp"/fb/*.deb; do
	dpkg -x "$d" "$dest/fb"
	echo "fb/$(basename "$d")" >>"$dest/PACKAGES"
done
# the plots' two faces (sans-serif, normal and bold) are all they draw
find "$dest/fb/usr/share/fonts" -type f ! -name DejaVuSans.ttf ! -name DejaVuSans-Bold.ttf -exec rm -f {} +
rm -rf "$dest/fb/usr/share/doc" "$dest/fb/usr/share/lintian" "$dest/fb/usr/share/man" \
	"$dest/fb/usr/lib/$ARCH/pkgconfig" "$dest/fb/etc"

echo "== trimming"
L=$dest/usr/lib/$ARCH
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/usr/share/lintian" \
	"$dest/usr/share/java" "$L/fortran" "$L/cmake" "$L/openblas-pthread/cmake" \
	"$dest/usr/lib/$ARCH/openmpi/lib/openmpi3/mca_"*oshmem* "$dest/usr/share/doc-base"
find "$dest" \( -name '*.a' -o -name '*.la' \) -exec rm -f {} +
rm -f "$L"/libmpi_mpifh* "$L"/libmpi_usempi* "$L"/libmpi_java* "$L"/libmpi_cxx* \
	"$L"/liboshmem* "$L/openblas-pthread"/liblapack* "$L/openmpi/lib"/libmpi_mpifh* \
	"$L/openmpi/lib"/libmpi_usempi* "$L/openmpi/lib"/libmpi_java* "$L/openmpi/lib"/libmpi_cxx* \
	"$L/openmpi/lib"/liboshmem* "$dest/usr/bin"/*shmem* "$dest/usr/bin"/mpif* \
	"$dest/usr/bin"/mpijava* "$dest/usr/bin/shmemrun"

# Open MPI's developer headers (mpi.h needs only the C++ bindings' one)
# and the components for networks whose libraries are not carried
inc=$L/openmpi/include
mv "$inc/openmpi/ompi/mpi/cxx" "$tmp/cxx"
rm -rf "$inc/openmpi/ompi" "$inc/openmpi/opal" "$inc/openmpi/orte" "$inc/openmpi/oshmem" \
	"$inc/openshmem" "$inc/mpp" "$inc"/mpif* "$inc"/*shmem* "$inc/pshmem.h" "$inc/pshmemx.h"
mkdir -p "$inc/openmpi/ompi/mpi"
mv "$tmp/cxx" "$inc/openmpi/ompi/mpi/cxx"
rm -f "$L/openmpi/lib/openmpi3"/mca_*ucx* "$L/openmpi/lib/openmpi3"/mca_*ofi* \
	"$L/openmpi/lib/openmpi3"/mca_*openib* "$L/openmpi/lib/openmpi3"/mca_*psm* \
	"$L/openmpi/lib/openmpi3"/mca_*usnic* "$L"/libmca_common_verbs* "$L"/libmca_common_ofi* \
	"$L"/libmca_common_ucx* "$L/openmpi/lib"/libmca_common_verbs* "$L/openmpi/lib"/libmca_common_ucx*

# mpirun is an alternatives link made by the postinst, which dpkg -x skips
ln -sfn orterun "$dest/usr/bin/mpirun"

# OpenBLAS: 36 MB -> ~4 MB
blas=$(ls "$L/openblas-pthread"/libopenblasp-r*.so)
xz -T2 -6 "$blas"
echo "$(basename "$blas")" >"$L/openblas-pthread/XZ"

# absolute symlinks -> relative ones inside .devdeps (fb/ is a root of its
# own); dangling ones go
find "$dest" -type l | while read -r l; do
	t=$(readlink "$l")
	root=$dest
	case $l in "$dest"/fb/*) root=$dest/fb ;; esac
	case $t in
	/*)
		rel=$(realpath -m --relative-to="$(dirname "$l")" "$root$t")
		ln -sfn "$rel" "$l" ;;
	esac
	[ -e "$l" ] || rm -f "$l"
done

# libevent: the arc4random symbols lose their GLIBC_2.36 version
for f in "$L"/libevent_core-2.1.so.7.* ; do
	python3 "$src/tests/gpu/elf_weak_version.py" GLIBC_2.36 "$f"
done

if [ -n "$build" ]; then
	echo "== the road pool (tests/gpu/mkpool.sh)"
	build=$(cd "$build" && pwd)
	PYTHON=${PYTHON:-$(sed -n 's/^PYTHON = //p' "$build/Makefile")}
	PATH=$build:$PATH PYTHON=$PYTHON CDP_SRCDIR=$src sh "$src/tests/gpu/mkpool.sh" "$dest/pool"
fi

# ignored by git in this checkout
ex=$(git -C "$src" rev-parse --git-path info/exclude 2>/dev/null || true)
if [ -n "$ex" ]; then
	case $ex in /*) ;; *) ex=$src/$ex ;; esac
	mkdir -p "$(dirname "$ex")"
	grep -qx '/.devdeps/' "$ex" 2>/dev/null || echo '/.devdeps/' >>"$ex"
fi

echo "== Open MPI from .devdeps alone"
hello=$tmp/hello
cat >"$tmp/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int r, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("hello: %d ranks, sum of ranks %d\n", n, r);
	MPI_Finalize();
	return 0;
}
EOF
cc -o "$hello" "$tmp/hello.c" -I"$L/openmpi/include" -L"$L/openmpi/lib" -lmpi
run_hello() {
	# shellcheck disable=SC1091
	env -i HOME="$tmp" PATH=/usr/bin:/bin DEVDEPS="$dest" sh -c ". '$src/tests/gpu/devenv.sh' &&
		mpirun --allow-run-as-root --oversubscribe -np 2 '$hello'"
}
if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
	# hide the system's Open MPI, PMIx, libevent and hwloc from the test
	export tmp src dest hello
	unshare -m sh -c '
		set -e
		mkdir -p "$tmp/empty"
		for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
			/usr/share/openmpi /etc/openmpi /usr/share/pmix; do
			[ ! -d "$d" ] || mount --bind "$tmp/empty" "$d"
		done
		for f in /usr/bin/mpirun /usr/bin/orterun /usr/lib/x86_64-linux-gnu/libevent_core-2.1.so.7 \
			/usr/lib/x86_64-linux-gnu/libopen-pal.so.40 /usr/lib/x86_64-linux-gnu/libmpi.so.40 \
			/usr/lib/x86_64-linux-gnu/libhwloc.so.15 /usr/lib/x86_64-linux-gnu/libpmix.so.2; do
			[ ! -e "$f" ] || mount --bind /dev/null "$f"
		done
		env -i HOME="$tmp" PATH=/usr/bin:/bin DEVDEPS="$dest" sh -c ". \"$src/tests/gpu/devenv.sh\" &&
			mpirun --allow-run-as-root --oversubscribe -np 2 \"$hello\""' >"$tmp/hello.out" 2>&1 ||
		{ cat "$tmp/hello.out" >&2; echo "device-deps.sh: mpirun from .devdeps failed" >&2; exit 1; }
	echo "(system Open MPI hidden)"
else
	run_hello >"$tmp/hello.out" 2>&1 ||
		{ cat "$tmp/hello.out" >&2; echo "device-deps.sh: mpirun from .devdeps failed" >&2; exit 1; }
fi
cat "$tmp/hello.out"
grep -q 'hello: 2 ranks, sum of ranks 1' "$tmp/hello.out" ||
	{ echo "device-deps.sh: the 2-rank hello did not run" >&2; exit 1; }

echo "== .devdeps: $(du -sh "$dest" | cut -f1) ($(du -sb "$dest" | cut -f1) bytes)," \
	"the tree: $(du -sh --exclude=.git --exclude=.devdeps --exclude=autom4te.cache "$src" | cut -f1)"
