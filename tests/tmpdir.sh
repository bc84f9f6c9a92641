#!/bin/sh
# tests/tmpdir.sh: make check's LOG_COMPILER and SH_LOG_COMPILER. Runs one
# test (its command line as arguments) with TMPDIR set to a new folder of
# its own under the caller's TMPDIR, then removes that folder, so nothing a
# test or a program under it leaves in $TMPDIR outlives the test: Open MPI
# 4.1's session folders (ompi.HOST.UID/, jf.N/, pid.N/), which its mpirun
# and singletons leave behind, among them. The test's exit status is kept
# (77 a skip, 99 a hard error); 99 when the folder cannot be made.
d=$(mktemp -d "${TMPDIR:-/tmp}/cdpcheck.XXXXXX") || {
	echo "tests/tmpdir.sh: cannot make a folder in '${TMPDIR:-/tmp}'" >&2
	exit 99
}
# as /tmp is: a test that runs a program as another user (readonly.sh:
# nobody) must reach its own folder inside this one
chmod 1777 "$d" || exit 99
# only the folder made above: its name is checked before every removal
clean() { case $d in */cdpcheck.??????) rm -rf -- "$d" ;; esac; }
trap 'clean; exit 130' INT
trap 'clean; exit 143' TERM
TMPDIR=$d
export TMPDIR
"$@"
rc=$?
clean
exit $rc
