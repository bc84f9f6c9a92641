#!/bin/sh
# tests/dist/dist.sh: runs tests/dist/test_dist alone (an MPI singleton,
# rank 0 of 1) and under mpirun at 1, 2 and 3 ranks (2 again with
# CDP_DIST_THREAD=0: buckets without the communication thread), then the failure modes,
# each of which must end the whole job with a non-zero status within 30 s and
# a message naming the rank and the cause:
#   --kill   rank 1 dies of SIGKILL mid-reduction (mpirun notices), with
#            MPI_Allreduce and with the ring;
#   --hang   rank 1 stops answering, rank 0's watchdog fires after
#            CDP_DIST_TIMEOUT=2 s and MPI_Abort ends the job (both again);
#   --hang-bucket  the same while rank 0 waits for one gradient bucket that
#            the communication thread reduces (cdp-train's update per
#            bucket): that wait is timed too (both algorithms);
#   --stop   (3 ranks) rank 2 is stopped by SIGSTOP: rank 0's heartbeat
#            names it and its host after CDP_DIST_HEARTBEAT=2 s, the
#            watchdog ends the job; --kill at 3 ranks: the heartbeat names
#            rank 2 at once;
#   --abort  rank 1 calls cdp_dist_abort (a bad record, say), and is not
#            reported lost (it said goodbye);
#   --mismatch  rank 1 reduces fewer floats: the MPI error is reported with
#            file, line, call and MPI's text by the check macro;
# and one that must end 0 without blaming anyone wrongly:
#   --pause  rank 1, stopped for 4 s in a barrier under a 2 s watchdog and
#            a 2 s heartbeat, then continued: rank 0 may call it lost, but
#            rank 1 blames rank 0 for neither (the time it did not run).
# Exit 77 when mpirun is missing.
set -eu
: "${CDP_BUILDDIR:?run under make check}"
prog=$CDP_BUILDDIR/tests/dist/test_dist
mpirun=${MPIRUN:-$(command -v mpirun || true)}
if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
	echo "SKIP: no mpirun" >&2
	exit 77
fi
command -v timeout >/dev/null 2>&1 || { echo "SKIP: no timeout(1)" >&2; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cdpdist.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Open MPI refuses root without this, and 3 ranks may exceed the cores.
flags=
if "$mpirun" --version 2>&1 | grep -q 'Open MPI'; then
	flags=--oversubscribe
	[ "$(id -u)" -ne 0 ] || flags="$flags --allow-run-as-root"
fi

# The watchdog must not fire in a healthy run on a loaded machine.
export CDP_DIST_TIMEOUT=60

echo "== singleton"
timeout 60 "$prog" >"$T/out" 2>"$T/err" || fail "singleton: $(cat "$T/err")"
grep -q '^1 ranks: .* 0 failed' "$T/out" || fail "singleton: $(cat "$T/out" "$T/err")"
cat "$T/out"

for np in 1 2 3; do
	echo "== mpirun -np $np"
	# shellcheck disable=SC2086
	timeout 120 "$mpirun" $flags -np "$np" "$prog" >"$T/out" 2>"$T/err" ||
		fail "-np $np: $(cat "$T/out" "$T/err")"
	grep -q "^$np ranks: .* 0 failed" "$T/out" || fail "-np $np: $(cat "$T/out" "$T/err")"
	cat "$T/out"
done

# The default --threads divides a rank's CPUs by the node's ranks that
# share them: none when mpirun binds each rank to a core of its own, both
# when neither is bound (cdp_dist_local_share).
if [ "$(nproc)" -ge 2 ] && "$mpirun" --version 2>&1 | grep -q 'Open MPI'; then
	for bind in core:1 none:2; do
		echo "== mpirun -np 2 --bind-to ${bind%:*}: ${bind#*:} ranks share each one's CPUs"
		# shellcheck disable=SC2086
		CDP_TEST_WANT_SHARE=${bind#*:} timeout 120 "$mpirun" $flags -x CDP_TEST_WANT_SHARE \
			--bind-to "${bind%:*}" -np 2 "$prog" >"$T/out" 2>"$T/err" ||
			fail "--bind-to ${bind%:*}: $(cat "$T/out" "$T/err")"
		grep -q "^2 ranks: .* 0 failed" "$T/out" || fail "--bind-to ${bind%:*}: $(cat "$T/out" "$T/err")"
	done
fi

echo "== mpirun -np 2, CDP_DIST_THREAD=0 (the progress engine)"
# shellcheck disable=SC2086
CDP_DIST_THREAD=0 timeout 120 "$mpirun" $flags -np 2 "$prog" >"$T/out" 2>"$T/err" ||
	fail "-np 2 without the thread: $(cat "$T/out" "$T/err")"
grep -q "^2 ranks: .* 0 failed" "$T/out" || fail "-np 2 without the thread: $(cat "$T/out" "$T/err")"
cat "$T/out"

# Rank 0's CDP_DIST_HEARTBEAT holds for all: a variable that reaches some
# ranks only (mpirun -x forgotten) must not leave them at odds at start-up.
echo "== CDP_DIST_HEARTBEAT=0 on rank 0 only"
# shellcheck disable=SC2086
timeout 120 "$mpirun" $flags -np 1 env CDP_DIST_HEARTBEAT=0 "$prog" : -np 1 "$prog" \
	>"$T/out" 2>"$T/err" || fail "heartbeat off on rank 0 only: $(cat "$T/out" "$T/err")"
grep -q "^2 ranks: .* 0 failed" "$T/out" || fail "heartbeat off on rank 0 only: $(cat "$T/out")"
cat "$T/out"

# failmode MODE ALGO PATTERN: the job must exit non-zero within 30 s, and
# stderr must match PATTERN.
failmode() {
	mode=$1 algo=$2 pat=$3
	echo "== $mode $algo"
	t0=$(date +%s)
	set +e
	# shellcheck disable=SC2086
	timeout 60 "$mpirun" $flags -np "${NP:-2}" "$prog" "$mode" "$algo" >"$T/out" 2>"$T/err"
	rc=$?
	set -e
	t1=$(date +%s)
	[ "$rc" -ne 124 ] || fail "$mode: the job hung (killed by timeout after 60 s)"
	[ "$rc" -ne 0 ] || fail "$mode: the job exited 0: $(cat "$T/out" "$T/err")"
	[ $((t1 - t0)) -le 30 ] || fail "$mode: the job took $((t1 - t0)) s to end, want <= 30"
	grep -q -- "$pat" "$T/err" || fail "$mode: stderr lacks '$pat': $(cat "$T/err")"
	echo "exit $rc after $((t1 - t0)) s: $(grep -m1 -- "$pat" "$T/err")"
}

failmode --kill mpi 'rank 1 .* exited on signal 9'
failmode --kill ring 'rank 1 .* exited on signal 9'
CDP_DIST_TIMEOUT=2 failmode --hang mpi 'test_dist: rank 0: MPI_Allreduce did not finish within 2 s'
CDP_DIST_TIMEOUT=2 failmode --hang ring 'test_dist: rank 0: ring all-reduce did not finish within 2 s'
CDP_DIST_TIMEOUT=2 failmode --hang-bucket ring \
	"test_dist: rank 0: waiting for a gradient reduction did not finish within 2 s: rank 1 on host"
CDP_DIST_TIMEOUT=2 failmode --hang-bucket mpi \
	"test_dist: rank 0: waiting for a gradient reduction did not finish within 2 s: rank 1 on host"
# 3 ranks: the watchdog cannot tell which peer is late, the heartbeat can
host=$(hostname)
NP=3 CDP_DIST_TIMEOUT=8 CDP_DIST_HEARTBEAT=2 failmode --stop ring \
	"test_dist: rank 0: rank 2 on host '$host' is lost: no heartbeat for 2 s"
NP=3 CDP_DIST_HEARTBEAT=2 failmode --kill mpi \
	"test_dist: rank 0: rank 2 on host '$host' is gone: its heartbeat connection closed"
failmode --abort ring "test_dist: rank 1: cannot decode record 'scene_3_4'"
grep -q "is gone\|is lost" "$T/err" && fail "--abort: rank 1 ended the job itself, yet: $(cat "$T/err")"
CDP_DIST_TIMEOUT=5 failmode --mismatch ring 'test_dist: rank 1: dist_mpi.c:[0-9]*: MPI_[A-Za-z]*: MPI_ERR_TRUNCATE'
echo "== --pause"
# shellcheck disable=SC2086
CDP_DIST_HEARTBEAT=2 timeout 60 "$mpirun" $flags -np 2 "$prog" --pause >"$T/out" 2>"$T/err" ||
	fail "--pause: a stopped and continued rank ended the job: $(cat "$T/err")"
! grep -q "rank 1: .*did not finish\|rank 1: rank 0 .* is lost" "$T/err" ||
	fail "--pause: rank 1 blamed rank 0 for its own stop: $(cat "$T/err")"
cat "$T/out"
exit 0
