#!/bin/sh
# tests/gpu/multi_gpu.sh: the multi-GPU checks that one GPU cannot make
# (NCCL puts one rank per GPU). On a machine with 2 or more GPUs:
#  1. NCCL against MPI: 2 ranks on GPUs 0 and 1, batch 4 each, with
#     --allreduce nccl and with --allreduce mpi, give the 12 losses of one
#     process with batch 8 (tests/train/small.cfg, width 8, no batchnorm:
#     a function of the global batch), within relative 1e-4 per step;
#  2. the rendezvous (cdp-rendezvous(5)): the same 2 ranks started without
#     mpirun (RANK, WORLD_SIZE, LOCAL_RANK, CDP_RENDEZVOUS, CDP_JOB_ID)
#     give the same losses, and the file is gone afterwards;
#  3. the watchdog: of 2 ranks started that way, rank 1 is killed (SIGKILL)
#     once training runs; rank 0 must end with status 1 and one line
#     naming its rank within CDP_DIST_TIMEOUT (10 s) + the abort's grace
#     (10 s) + 15 s, instead of hanging in a collective.
# Exit 77 with fewer than 2 GPUs, without mpirun or without a pool.
# --cpu-dry-run runs step 1's plumbing on the CPU (--allreduce ring against
# mpi; steps 2 and 3 need NCCL) so that the script can be checked on a
# machine without GPUs. The pool: $CDP_GPU_POOL or one made by mkpool.sh.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/train/metrics.sh"
dry=0
[ "${1:-}" != --cpu-dry-run ] || dry=1
if [ "$dry" -eq 0 ]; then
	n=$("$CDP_BUILDDIR/tests/gpu/test_ops" --count-devices) || fail "test_ops --count-devices failed"
	[ "$n" -ge 2 ] || { echo "SKIP: $n CUDA device(s); these checks need 2" >&2; exit 77; }
fi
. "$CDP_SRCDIR/tests/gpu/ranks_common.sh"
export CDP_DIST_TIMEOUT=120
dev=cuda algos="nccl mpi"
[ "$dry" -eq 0 ] || dev=cpu algos="ring mpi"
A="--db $P/pool --keys $P/train.keys --threads 1 -q"
A="$A --model $CDP_SRCDIR/tests/train/small.cfg:width=8 --log-every 1 --device $dev"

# --- 1. NCCL against MPI and one process ------------------------------------
# shellcheck disable=SC2086
cdp-train $A --steps 12 --batch 8 --out "$T/one" || fail "1 process"
losses "$T/one/metrics.jsonl" >"$T/l1"
[ "$(wc -l <"$T/l1")" -eq 12 ] || fail "1 process: $(wc -l <"$T/l1") losses, want 12"
for algo in $algos; do
	# shellcheck disable=SC2086
	$MP cdp-train $A --steps 12 --batch 4 --allreduce $algo --out "$T/two.$algo" ||
		fail "2 ranks, --allreduce $algo"
	losses "$T/two.$algo/metrics.jsonl" >"$T/l.$algo"
	[ "$(wc -l <"$T/l.$algo")" -eq 12 ] || fail "$algo: $(wc -l <"$T/l.$algo") losses, want 12"
	losses_close "$T/l1" "$T/l.$algo" 1e-4 || fail "$algo: 2 ranks differ from 1 process"
	echo "$algo: 12 losses of 2 ranks x 4 agree with 1 x 8 to 1e-4"
done
if [ "$dry" -eq 1 ]; then
	echo "dry run on the CPU: the NCCL steps (rendezvous, watchdog) were not run"
	exit 0
fi

# --- 2. the rendezvous, without mpirun ----------------------------------------
# rank R [ARGS...]: cdp-train as rank R of 2 in the background (the same
# arguments on both ranks, as mpirun gives them), stderr in $T/err.R; its
# pid in $pid_R
rank() {
	r=$1
	shift
	# shellcheck disable=SC2086
	RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 CDP_RENDEZVOUS="$T/rdv" \
		CDP_JOB_ID="multi_gpu.$$.$run" cdp-train $A --batch 4 "$@" 2>"$T/err.$r" &
	eval "pid_$r=\$!"
}
run=1
rank 0 --steps 12 --out "$T/rdv.out"
rank 1 --steps 12 --out "$T/rdv.out"
st0=0 st1=0
wait "$pid_0" || st0=$?
wait "$pid_1" || st1=$?
[ "$st0" -eq 0 ] && [ "$st1" -eq 0 ] ||
	fail "rendezvous: ranks exited $st0 and $st1: $(cat "$T/err.0" "$T/err.1")"
[ ! -e "$T/rdv" ] || fail "rendezvous: the file is still there after the run"
losses "$T/rdv.out/metrics.jsonl" >"$T/l.rdv"
losses_close "$T/l1" "$T/l.rdv" 1e-4 || fail "rendezvous: 2 ranks differ from 1 process"
echo "rendezvous: 12 losses of 2 ranks without mpirun agree with 1 x 8 to 1e-4"

# --- 3. the watchdog: a rank dies ---------------------------------------------
export CDP_DIST_TIMEOUT=10
run=2
rank 0 --steps 100000 --out "$T/wd.out"
rank 1 --steps 100000 --out "$T/wd.out"
# wait (up to 60 s) for training to run: rank 0 logs every step
i=0
until [ -s "$T/wd.out/metrics.jsonl" ] && grep -q '"type":"step"' "$T/wd.out/metrics.jsonl"; do
	i=$((i + 1))
	if [ "$i" -gt 600 ]; then
		kill -9 "$pid_0" "$pid_1" 2>/dev/null || true
		fail "watchdog: no step logged in 60 s: $(cat "$T/err.0")"
	fi
	sleep 0.1
done
kill -9 "$pid_1"
t0=$(date +%s)
# rank 0 must end by itself; a guard kills it at 35 s so the test cannot hang
( sleep 35; kill -9 "$pid_0" 2>/dev/null ) &
guard=$!
st0=0
wait "$pid_0" || st0=$?
t1=$(date +%s)
kill "$guard" 2>/dev/null || true
wait "$pid_1" 2>/dev/null || true
[ "$st0" -eq 1 ] || fail "watchdog: rank 0 exited $st0 after $((t1 - t0)) s, want 1: $(cat "$T/err.0")"
# one line of ours (NCCL or Open MPI may add their own)
[ "$(grep -c '^cdp-train:' "$T/err.0")" -eq 1 ] ||
	fail "watchdog: rank 0 printed $(grep -c '^cdp-train:' "$T/err.0") lines: $(cat "$T/err.0")"
grep -q "^cdp-train: rank 0: " "$T/err.0" ||
	fail "watchdog: the message does not name rank 0: $(cat "$T/err.0")"
echo "watchdog: rank 0 ended $((t1 - t0)) s after rank 1 died: $(grep "^cdp-train:" "$T/err.0")"
exit 0
