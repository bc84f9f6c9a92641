# tests/gpu/steps.sh: sourced by run-device.sh (and tests/gpu/steps_check.sh,
# which checks it with fake commands): the step runner with its timeouts
# and time budget, the rule that a skip for "no device" is a failure on a
# machine that has a GPU, and the search for cuDNN's and NCCL's headers.
#
# Set before `step`: logs (a folder), summary (a file), budget_end (the
# epoch second by which every step must have ended), gpus_listed (the GPUs
# nvidia-smi lists, 0 without it), cuda_why (why the build sees no device,
# or empty), and optionally step_min (default 20: the fewest seconds worth
# starting a step with). step sets failed=1 on a failure.

# step NAME SECS CMD...: runs CMD (a program, or `sh run-device.sh --run
# FUNCTION` for a function of the script) with its output in
# $logs/NAME.log, killed with its whole process group after SECS or when
# the budget runs out (timeout(1) signals the group: mpirun and its ranks,
# make and its compilers), and records PASS (0), SKIP (77), TIMEOUT, or
# FAIL. A skip whose log says there is no CUDA device is a FAIL when
# nvidia-smi lists a GPU, with the CUDA runtime's reason. A step that
# could not get step_min seconds is NOT RUN (a failure: the check is
# missing).
# On failure it shows the failed checks and the log's tail.
step() {
	name=$1 secs=$2
	shift 2
	echo "=== $name"
	left=$((budget_end - $(date +%s)))
	[ "$secs" -le "$left" ] || secs=$left
	if [ "$secs" -lt "${step_min:-20}" ]; then
		printf '%-22s %-24s %6d\n' "$name" "NOT RUN (no time left)" 0 >>"$summary"
		echo "run-device: $name not run: ${left}s of the budget left"
		failed=1
		return 1
	fi
	t0=$(date +%s)
	timeout -k 10 "$secs" "$@" >"$logs/$name.log" 2>&1
	rc=$?
	t1=$(date +%s)
	case $rc in
	0) res=PASS ;;
	77) res=SKIP ;;
	124 | 137) res="TIMEOUT (${secs}s)"; failed=1 ;;
	*) res="FAIL ($rc)"; failed=1 ;;
	esac
	if [ "$rc" -eq 77 ] && [ "${gpus_listed:-0}" -gt 0 ] &&
		{ [ -n "${cuda_why:-}" ] || grep -qi 'no CUDA device' "$logs/$name.log"; }; then
		res="FAIL (skip: no device)"
		failed=1
		echo "run-device: $name skipped for want of a CUDA device, but nvidia-smi lists" \
			"$gpus_listed GPU(s): ${cuda_why:-see below}"
		grep -i 'skip' "$logs/$name.log" | head -3
	fi
	printf '%-22s %-24s %6d\n' "$name" "$res" $((t1 - t0)) >>"$summary"
	case $res in
	PASS | SKIP) tail -3 "$logs/$name.log" ;;
	*)
		grep -E '^FAIL|check failed|error' "$logs/$name.log" | head -30
		echo "--- last lines of $name.log"
		tail -15 "$logs/$name.log" ;;
	esac
	[ "$res" = PASS ] || [ "$res" = SKIP ]
}

# find_inc LIB DIR...: the first folder holding LIB.h among DIR/include,
# DIR/include/x86_64-linux-gnu and, for a Python site-packages DIR, the
# PyTorch wheels' DIR/nvidia/*/include (nvidia-cudnn-cu12, nvidia-nccl-cu12:
# the library beside it in ../lib); prints it, or returns 1
find_inc() {
	fi_lib=$1
	shift
	for fi_d in "$@"; do
		[ -n "$fi_d" ] || continue
		for fi_inc in "$fi_d/include" "$fi_d/include/x86_64-linux-gnu" "$fi_d"/nvidia/*/include; do
			if [ -f "$fi_inc/$fi_lib.h" ]; then
				echo "$fi_inc"
				return 0
			fi
		done
	done
	return 1
}

# sys_dir DIR: whether DIR is one the compiler, the linker and ld.so search
# anyway. Naming such a folder in -I, -L or LD_LIBRARY_PATH puts it ahead of
# the carried ones: on the H200 machine /usr/lib/x86_64-linux-gnu (where its
# cuDNN and NCCL are) then gave cdp-train the system's Open MPI and PMIx
# under .devdeps' components, and orted crashed in MPI_Init.
sys_dir() {
	case ${1%/} in
	/usr/include | /usr/include/x86_64-linux-gnu | /usr/local/include | /usr/lib | /lib | \
		/usr/lib/x86_64-linux-gnu | /lib/x86_64-linux-gnu | /usr/lib64 | /lib64) return 0 ;;
	esac
	return 1
}
