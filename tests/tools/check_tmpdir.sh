#!/bin/sh
# tests/tools/check_tmpdir.sh: make check runs every test through
# tests/tmpdir.sh, in a TMPDIR of its own that is removed after it, so that
# what a test leaves in $TMPDIR (Open MPI's session folders above all)
# does not pile up in the user's: the status is kept, the folder goes.
. "$CDP_SRCDIR/tests/tools/common.sh"
W=$CDP_SRCDIR/tests/tmpdir.sh
# this test itself runs under the wrapper: its TMPDIR is a cdpcheck folder
case ${TMPDIR:-} in */cdpcheck.??????) ;; *) fail "the test's TMPDIR '${TMPDIR:-}' is not its own (Makefile.am's LOG_COMPILER)" ;; esac
mkdir "$T/outer"
set +e
TMPDIR="$T/outer" sh "$W" sh -c 'echo x >"$TMPDIR/left"; echo "$TMPDIR" >"$0"; exit 3' "$T/seen"
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "the wrapper exited $rc, the test 3"
case $(cat "$T/seen") in "$T/outer/cdpcheck."??????) ;; *) fail "the test's TMPDIR was '$(cat "$T/seen")'" ;; esac
[ -z "$(ls -A "$T/outer")" ] || fail "left in TMPDIR: $(ls -A "$T/outer")"
TMPDIR="$T/outer" sh "$W" true || fail "a passing test's status was lost"
set +e; TMPDIR="$T/outer" sh "$W" sh -c 'exit 77'; rc=$?; set -e
[ "$rc" -eq 77 ] || fail "a skip came back as $rc"
# an MPI singleton and an mpirun, which leave Open MPI 4.1's session folders
if [ -n "${MPIRUN:-}" ] && [ -x "$CDP_BUILDDIR/tests/dist/test_dist" ]; then
	TMPDIR="$T/outer" sh "$W" "$CDP_BUILDDIR/tests/dist/test_dist" >"$T/out" 2>&1 ||
		fail "test_dist as a singleton: $(cat "$T/out")"
	TMPDIR="$T/outer" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		sh "$W" $MPIRUN --oversubscribe -np 2 true >"$T/out" 2>&1 || fail "mpirun: $(cat "$T/out")"
	[ -z "$(ls -A "$T/outer")" ] || fail "MPI left in TMPDIR: $(ls -A "$T/outer")"
fi
echo "ok"
