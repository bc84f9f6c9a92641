#!/bin/sh
# tests/train/threads.sh: cdp-train's threads carry names (lib/cdp_thread.h)
# that top -H, ps -L and perf show: the main thread stays cdp-train, the
# CPU backend's pool is cdp-cpu/N, the loader's prefetch cdp-prefetch;
# with 2 ranks the gradient buckets' cdp-comm, the watchdog of blocking
# MPI calls cdp-watchdog and the heartbeat cdp-heartbeat. The default
# --threads follows the CPU affinity (taskset -c 0: no cdp-cpu/N).
# ps and /proc/PID/cmdline show the command line as given: --model's
# PATH:k=v,k=v was split in place into "PATH k=v k=v".
. "$CDP_SRCDIR/tests/train/train_common.sh"
P="--db $T/pool --keys $T/train.keys -q --model $SMALL --steps 100000 --batch 4 --log-every 1"

# names PID: the names of PID's threads, sorted, one line
names() { cat /proc/"$1"/task/*/comm 2>/dev/null | sort | tr '\n' ' '; }
# has NAMES WANT...: every WANT is one of NAMES
has() {
	h_all=$1
	shift
	for h_w in "$@"; do
		case " $h_all " in
		*" $h_w "*) ;;
		*) return 1 ;;
		esac
	done
}

cdp-train $P --threads 2 --out "$T/one" --model "$SMALL:width=6,depth=2" & pid=$!
trap 'kill $pid 2>/dev/null || :; rm -rf "$T"' EXIT
wait_step $pid "$T/one/metrics.jsonl" 2 60
n=$(names $pid)
cmd=$(tr '\0' '\n' <"/proc/$pid/cmdline" | grep -A1 -x -- --model | tail -n 1)
[ "$cmd" = "$SMALL:width=6,depth=2" ] ||
	{ kill $pid; fail "/proc/PID/cmdline shows --model '$cmd', want '$SMALL:width=6,depth=2'"; }
kill $pid
wait $pid 2>/dev/null || :
has "$n" cdp-train cdp-cpu/1 cdp-prefetch || fail "1 process: threads '$n'"
echo "1 process: $n"

# the default --threads counts the CPUs the process may run on (its
# affinity, what nproc prints), not the node's: under taskset -c 0 one
# compute thread, the main one, and no cdp-cpu/N helper
if command -v taskset >/dev/null && [ "$(getconf _NPROCESSORS_ONLN)" -gt 1 ]; then
	taskset -c 0 cdp-train $P --out "$T/aff" & pid=$!
	wait_step $pid "$T/aff/metrics.jsonl" 2 60
	n=$(names $pid)
	kill $pid
	wait $pid 2>/dev/null || :
	has "$n" cdp-train cdp-prefetch || fail "taskset -c 0: threads '$n'"
	case " $n " in
	*" cdp-cpu/"*) fail "taskset -c 0: threads '$n', want no cdp-cpu/N (1 CPU)" ;;
	esac
	echo "taskset -c 0: $n"
else
	echo "SKIP: the affinity case (no taskset, or 1 CPU)"
fi

if [ -z "$MP" ]; then
	echo "SKIP: 2-rank case (no MPIRUN)"
	exit 0
fi
$MP cdp-train $P --threads 1 --out "$T/two" & pid=$!
wait_step $pid "$T/two/metrics.jsonl" 2 60
r=
for p in $(pgrep -P $pid cdp-train); do r=$p; done
[ -n "$r" ] || { kill $pid; fail "2 ranks: no rank among mpirun's children"; }
n=$(names "$r")
kill $pid
wait $pid 2>/dev/null || :
has "$n" cdp-train cdp-comm cdp-watchdog cdp-heartbeat cdp-prefetch ||
	fail "2 ranks: threads '$n'"
echo "a rank of 2: $n"
