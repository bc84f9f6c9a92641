#!/bin/sh
# tests/tools/makefile.sh: the build's test list names every test once (the
# fragments add to TESTS and UNIT_TESTS; a test listed twice runs twice and
# counts twice), and every compiled test of UNIT_TESTS is in it.
. "$CDP_SRCDIR/tests/tools/common.sh"
mk() { env MAKEFLAGS= MFLAGS= MAKELEVEL= make -s --no-print-directory -C "$CDP_BUILDDIR" "$@"; }
mk list-tests >"$T/tests" || fail "make list-tests failed"
[ -s "$T/tests" ] || fail "make list-tests printed no test"
dups=$(sort "$T/tests" | uniq -d | tr '\n' ' ')
[ -z "$dups" ] || fail "listed more than once in TESTS: $dups"
for t in $(mk list-tests TESTS='$(UNIT_TESTS)'); do
	grep -qx "$t" "$T/tests" || fail "$t is in UNIT_TESTS but not in TESTS"
done
echo "ok: $(wc -l <"$T/tests") tests, each listed once"
