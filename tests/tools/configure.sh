#!/bin/sh
# The pipeline builds without MPI and CUDA: a fresh out-of-tree build
# configured --without-mpi --without-cuda succeeds and says MPI is off,
# builds cdp-tile, cdp-lmdbpack, cdp-keyshuffle and cdp-evaluate (and only
# those, -j2: CI has 2 cores), none of which links libmpi, and would not
# build cdp-train or cdp-predict. An explicit --with-mpi=DIR that holds no
# MPI stops configure with an error that names the request.
. "$CDP_SRCDIR/tests/tools/common.sh"
# a build of its own, not a sub-make of the make check that runs this
unset MAKEFLAGS MFLAGS MAKELEVEL MPIRUN
progs="cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-evaluate"

src=$CDP_SRCDIR
if [ -f "$CDP_SRCDIR/config.status" ]; then
	# Configured in the source tree (as .ci/run does): configure refuses an
	# out-of-tree build of that tree, so configure a distribution copy.
	make -s -C "$CDP_BUILDDIR" distdir distdir="$T/src" >"$T/distdir" 2>&1 ||
		fail "make distdir failed: $(tail -n 5 "$T/distdir")"
	src=$T/src
fi

mkdir "$T/b"
(cd "$T/b" && "$src/configure" --without-mpi --without-cuda) >"$T/conf" 2>&1 ||
	fail "configure --without-mpi --without-cuda failed: $(tail -n 5 "$T/conf")"
grep -q '^ *Open MPI: *no ' "$T/conf" || fail "configure's summary does not say Open MPI is off: $(grep 'Open MPI' "$T/conf")"
grep -q 'WARNING: --without-mpi: cdp-train, cdp-predict' "$T/conf" ||
	fail "configure does not warn that cdp-train and cdp-predict will not be built"
grep -q "^ *programs: *$progs\$" "$T/conf" ||
	fail "configure's summary lists other programs: $(grep 'programs:' "$T/conf")"

# What `make all` would link, asked before anything is built: the four
# programs, and neither cdp-train nor cdp-predict (their rules exist in every
# build; bin_PROGRAMS decides).
(cd "$T/b" && make -n all) >"$T/all" 2>&1 || fail "make -n all failed: $(tail -n 5 "$T/all")"
grep -q -- '-o cdp-tile ' "$T/all" || fail "make all would not link cdp-tile"
for p in cdp-train cdp-predict; do
	! grep -q -- "-o $p " "$T/all" || fail "make all would link $p in a build without MPI"
done

(cd "$T/b" && make -j2 $progs) >"$T/make" 2>&1 || fail "make $progs failed: $(tail -n 20 "$T/make")"
for p in $progs; do
	[ -x "$T/b/$p" ] || fail "$p not built"
	"$T/b/$p" --help >/dev/null 2>&1 || fail "$p --help exited non-zero"
	readelf -d "$T/b/$p" >"$T/dyn" || fail "readelf -d $p failed"
	grep -q 'NEEDED.*libc\.so' "$T/dyn" || fail "readelf -d $p lists no libc: $(cat "$T/dyn")"
	! grep -q 'NEEDED.*libmpi' "$T/dyn" || fail "$p links libmpi: $(grep NEEDED "$T/dyn")"
done
for p in cdp-train cdp-predict; do
	[ ! -e "$T/b/$p" ] || fail "$p built without MPI"
done

# An explicit request that cannot be met stops configure, naming it.
mkdir "$T/b2" "$T/nompi"
for dir in /nonexistent "$T/nompi"; do
	set +e
	(cd "$T/b2" && "$src/configure" -q --without-cuda --with-mpi="$dir") >"$T/conf2" 2>&1
	rc=$?
	set -e
	[ "$rc" -ne 0 ] || fail "configure --with-mpi=$dir succeeded"
	grep -q "error: --with-mpi=$dir requested but MPI is not usable: " "$T/conf2" ||
		fail "configure --with-mpi=$dir: no clear error: $(tail -n 3 "$T/conf2")"
done
exit 0
