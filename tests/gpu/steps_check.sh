#!/bin/sh
# tests/gpu/steps_check.sh: run-device.sh's step runner (tests/gpu/steps.sh)
# with fake commands, on any machine: a hung step (with a child of its own,
# as mpirun has ranks) is killed at its timeout with its children and the
# next step still runs; a skip for want of a CUDA device fails where
# nvidia-smi lists a GPU and stays a skip where none is listed or the skip
# has another reason (multi_gpu.sh's "need 2"); a step the budget cannot
# fit is NOT RUN; and the header search finds cudnn.h and nccl.h in a
# PyTorch wheel's site-packages/nvidia/*/include when nothing else has them.
. "$CDP_SRCDIR/tests/tools/common.sh"
command -v timeout >/dev/null 2>&1 || { echo "SKIP: no timeout(1)" >&2; exit 77; }
set +e
. "$CDP_SRCDIR/tests/gpu/steps.sh"
logs=$T/logs summary=$T/summary step_min=1 gpus_listed=0 cuda_why=
mkdir -p "$logs"
: >"$summary"
budget_end=$(($(date +%s) + 600))
result() { sed -n "s/^$1  *\\(.*[^ ]\\)  *[0-9][0-9]*\$/\\1/p" "$summary"; }

# a hang: killed after 2 s with its child, and the summary goes on
failed=0
t0=$(date +%s)
step hang 2 sh -c 'sleep 300 & echo $! >"$0"; wait' "$T/child" >/dev/null
rc=$?
took=$(($(date +%s) - t0))
[ "$rc" -ne 0 ] && [ "$failed" -eq 1 ] || fail "a hung step returned $rc, failed=$failed"
[ "$(result hang)" = "TIMEOUT (2s)" ] || fail "hung step: '$(result hang)', want TIMEOUT (2s)"
[ "$took" -lt 15 ] || fail "the hung step took ${took}s to end"
sleep 1
# gone, or a zombie that no one has reaped yet
st=$(ps -o stat= -p "$(cat "$T/child")" 2>/dev/null)
case $st in '' | Z*) ;; *) fail "the hung step's child outlived its timeout (state $st)" ;; esac
step after 5 true >/dev/null || fail "the step after a timeout did not pass"
[ "$(result after)" = PASS ] || fail "step after the hang: '$(result after)'"
echo "a hung step: TIMEOUT after ${took}s, its child gone, the next step run"

# skips
noDev='echo "SKIP: no CUDA device (cdp_cuda_device_count() == 0: no CUDA-capable device is detected)"; exit 77'
failed=0
step nogpu 5 sh -c "$noDev" >/dev/null
[ "$(result nogpu)" = SKIP ] && [ "$failed" -eq 0 ] ||
	fail "no GPU listed: '$(result nogpu)', failed=$failed, want SKIP"
gpus_listed=1
step gpu_nodev 5 sh -c "$noDev" >"$T/out"
[ "$(result gpu_nodev)" = "FAIL (skip: no device)" ] && [ "$failed" -eq 1 ] ||
	fail "a GPU listed, skip for no device: '$(result gpu_nodev)', failed=$failed"
grep -q 'no CUDA-capable device is detected' "$T/out" || fail "the CUDA reason is not shown: $(cat "$T/out")"
failed=0
step need2 5 sh -c 'echo "SKIP: 1 CUDA device(s); these checks need 2" >&2; exit 77' >/dev/null
[ "$(result need2)" = SKIP ] && [ "$failed" -eq 0 ] ||
	fail "one GPU, a skip that needs two: '$(result need2)', want SKIP"
cuda_why="CUDA driver version is insufficient for CUDA runtime version"
step why 5 sh -c 'echo "SKIP: no pool" >&2; exit 77' >"$T/out"
[ "$(result why)" = "FAIL (skip: no device)" ] && grep -q 'driver version is insufficient' "$T/out" ||
	fail "a skip after the build saw no device: '$(result why)'"
gpus_listed=0 cuda_why=
step broken 5 sh -c 'echo "check failed: x"; exit 3' >/dev/null
[ "$(result broken)" = "FAIL (3)" ] || fail "exit 3: '$(result broken)'"
echo "skips: SKIP without a GPU or for want of a second, FAIL for no device on a GPU machine"

# the budget
failed=0
budget_end=$(($(date +%s) + 3)) step_min=5
step late 100 true >/dev/null
[ "$(result late)" = "NOT RUN (no time left)" ] && [ "$failed" -eq 1 ] ||
	fail "a step past the budget: '$(result late)', failed=$failed"
budget_end=$(($(date +%s) + 4)) step_min=1
t0=$(date +%s)
step capped 100 sleep 60 >/dev/null
[ "$(($(date +%s) - t0))" -lt 10 ] && case $(result capped) in "TIMEOUT ("[1-4]"s)") true ;; *) false ;; esac ||
	fail "a step's timeout is not cut to the budget left: '$(result capped)'"
echo "the budget: a step it cannot fit is NOT RUN, a longer timeout is cut to what is left"

# cudnn.h and nccl.h: the first folder that has them, wheels included
sp=$T/site-packages
mkdir -p "$sp/nvidia/cudnn/include" "$sp/nvidia/nccl/include" "$T/cuda/include" "$T/empty"
: >"$sp/nvidia/cudnn/include/cudnn.h"
: >"$sp/nvidia/nccl/include/nccl.h"
[ "$(find_inc cudnn "$T/cuda" "$T/empty" "$sp")" = "$sp/nvidia/cudnn/include" ] ||
	fail "cudnn.h in a wheel: '$(find_inc cudnn "$T/cuda" "$T/empty" "$sp")'"
[ "$(find_inc nccl "$T/cuda" "$sp")" = "$sp/nvidia/nccl/include" ] || fail "nccl.h in a wheel"
: >"$T/cuda/include/cudnn.h"
[ "$(find_inc cudnn "$T/cuda" "$sp")" = "$T/cuda/include" ] || fail "the toolkit's cudnn.h first"
! find_inc cublas_nope "$T/cuda" "$sp" >/dev/null || fail "a header that is nowhere was found"
# folders searched anyway are never put ahead of the carried libraries
for d in /usr/lib/x86_64-linux-gnu /usr/include/ /lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu; do
	sys_dir "$d" || fail "sys_dir: $d is searched anyway"
done
for d in "$sp/nvidia/cudnn/lib" /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu/openmpi/lib; do
	! sys_dir "$d" || fail "sys_dir: $d is not searched by default"
done
echo "headers: found in the toolkit first, else in site-packages/nvidia/*/include"
exit 0
