#!/bin/sh
# tests/tools/makefile.sh: the build's test list names every test once (the
# fragments add to TESTS and UNIT_TESTS; a test listed twice runs twice and
# counts twice), every compiled test of UNIT_TESTS is in it, and every test
# script is distributed (automake does not add TESTS scripts to the tarball:
# one left out of EXTRA_DIST stops `make check` of the tarball).
. "$CDP_SRCDIR/tests/tools/common.sh"
mk() { env MAKEFLAGS= MFLAGS= MAKELEVEL= make -s --no-print-directory -C "$CDP_BUILDDIR" "$@"; }
mk list-tests >"$T/tests" || fail "make list-tests failed"
[ -s "$T/tests" ] || fail "make list-tests printed no test"
dups=$(sort "$T/tests" | uniq -d | tr '\n' ' ')
[ -z "$dups" ] || fail "listed more than once in TESTS: $dups"
for t in $(mk list-tests TESTS='$(UNIT_TESTS)'); do
	grep -qx "$t" "$T/tests" || fail "$t is in UNIT_TESTS but not in TESTS"
done
# DISTFILES: what `make dist` copies, files or whole folders
mk list-tests TESTS='$(DISTFILES)' >"$T/dist" || fail "make list-tests TESTS='\$(DISTFILES)' failed"
while read -r t; do
	case $t in *.sh) ;; *) continue ;; esac    # the others are compiled
	d=$t shipped=
	while [ -n "$d" ] && [ "$d" != . ]; do
		grep -qx "$d" "$T/dist" && { shipped=1; break; }
		case $d in */*) d=${d%/*} ;; *) d= ;; esac
	done
	[ -n "$shipped" ] || fail "$t is in TESTS but not in the distribution (EXTRA_DIST)"
done <"$T/tests"
echo "ok: $(wc -l <"$T/tests") tests, each listed once and distributed"
