#!/bin/sh
# tests/train/device.sh: where cdp-train and cdp-predict compute (--device,
# --precision, --allreduce) and the staged all-reduce path, on the CPU:
#  - --device: bad spellings are usage errors (exit 2); cuda:N beyond the
#    GPUs present is an error naming it; without a GPU --device cuda is an
#    error saying why, and --device auto trains on the CPU with the losses
#    of --device cpu, bit for bit;
#  - --precision: bad spellings exit 2; tf32 and fp16 on the CPU are
#    errors saying that it computes in fp32 and bf16 only, and bf16 where
#    the kernels have no AVX512_BF16 (CDP_CPU_ISA=avx512 caps them below it)
#    an error naming the instructions; fp32 is the default;
#  - --allreduce nccl on the CPU, and bad --allreduce / --loss-scale
#    spellings, are errors; a refused run writes no metrics;
#  - cdp-predict: the same --device and --precision errors, and --device
#    auto predicts what --device cpu does;
#  - a launch without MPI (CDP_RENDEZVOUS with RANK and WORLD_SIZE) on the
#    CPU is a clear error in one line that leaves no run directory, and so
#    is a malformed WORLD_SIZE or RANK (named with what it allows), or
#    WORLD_SIZE 2 without CDP_RENDEZVOUS (cdp-train and cdp-predict); under
#    mpirun -np 1 those variables are ignored (with $MPIRUN); torchrun's
#    (TORCHELASTIC_RUN_ID) under srun is that launch, whatever Slurm and
#    PMIx variables it inherited;
#  - a process that its launcher says is one of 2 (PMI_SIZE,
#    OMPI_COMM_WORLD_SIZE, SLURM_NTASKS in a job step) but that MPI_Init
#    leaves alone is refused, naming the variable; an sbatch script's
#    shell (SLURM_NTASKS without a step) trains as one process;
#  - staging (CDP_DIST_STAGE=1: the CPU backend's memory stands for a GPU's,
#    so gradients, averages and broadcasts go through the pinned mirror and
#    back as on a GPU with --allreduce mpi or ring): 2 ranks with mpi and
#    ring, --sync allreduce and average:3, give the losses of the unstaged
#    runs bit for bit, and train.log says the buffers were staged.
# The no-GPU cases skip where a GPU is present (tests/gpu covers those);
# the 2-rank cases skip without $MPIRUN.
. "$CDP_SRCDIR/tests/train/train_common.sh"
ngpu=$("$CDP_BUILDDIR/tests/gpu/test_ops" --count-devices 2>/dev/null || echo 0)
case $ngpu in ''|*[!0-9]*) ngpu=0 ;; esac
C="--db $T/pool --keys $T/train.keys --threads 1 -q --model $SMALL --batch 4 --steps 6"
C="$C --log-every 1"

echo "== --device"
for d in tpu cuda:x cuda: cuda:-1 CPU; do
	expect_fail 2 "--device: '$d' is not cpu, cuda, cuda:N or auto" cdp-train $C --out "$T/x" --device "$d"
done
if [ "$ngpu" -gt 0 ]; then
	expect_fail 1 "--device cuda:1023: device cuda:1023 does not exist ($ngpu GPU" \
		cdp-train $C --out "$T/x" --device cuda:1023
	CUDA_VISIBLE_DEVICES=0 expect_fail 1 "does not exist (1 GPU visible: CUDA_VISIBLE_DEVICES='0')" \
		cdp-train $C --out "$T/x" --device cuda:1
fi
cdp-train $C --out "$T/cpu" --device cpu || fail "--device cpu did not train"
grep -q 'device cpu, [0-9]* threads*, precision fp32 (kernels [a-z0-9-]*), loss scale 0, all-reduce mpi$' "$T/cpu/train.log" ||
	fail "train.log lacks the device line: $(grep device "$T/cpu/train.log")"
cdp-train $C --out "$T/dflt" || fail "the default device did not train"
cmp -s "$T/cpu/checkpoint.cdpt" "$T/dflt/checkpoint.cdpt" || fail "the default is not --device cpu"
if [ "$ngpu" -eq 0 ]; then
	# why there is no GPU, in words a user acts on (CUDA's own says "CUDA
	# driver version is insufficient" where there is no driver at all)
	why="cdp-train: --device cuda: "
	if ! grep -q 'HAVE_CUDA 1' "$CDP_BUILDDIR/config.h"; then
		why="${why}this build has no CUDA backend"
	elif [ ! -e /proc/driver/nvidia/version ]; then
		why="${why}no NVIDIA driver is loaded on this host"
	fi
	for d in cuda cuda:0 cuda:1023; do
		expect_fail 1 "${why#cdp-train: --device cuda: }" cdp-train $C --out "$T/x" --device $d
		case $d in
		cuda) w="--device cuda: " ;;
		*) w="--device $d: device $d does not exist: " ;;
		esac
		grep -q "^cdp-train: $w" "$T/err" || fail "--device $d: $(cat "$T/err")"
	done
	expect_fail 1 "$why" cdp-train $C --out "$T/x" --device cuda
	cdp-train $C --out "$T/auto" --device auto || fail "--device auto did not train"
	grep -q 'device cpu,' "$T/auto/train.log" || fail "--device auto did not fall back to the cpu"
	losses "$T/cpu/metrics.jsonl" >"$T/l.cpu"
	losses "$T/auto/metrics.jsonl" >"$T/l.auto"
	[ "$(wc -l <"$T/l.cpu")" -eq 6 ] || fail "want 6 step lines"
	cmp -s "$T/l.cpu" "$T/l.auto" || fail "--device auto and cpu differ: $(diff "$T/l.cpu" "$T/l.auto")"
else
	echo "SKIP: the no-GPU cases ($ngpu GPUs here)"
fi

echo "== --precision, --allreduce, --loss-scale"
expect_fail 2 "--precision: 'fp8' is not fp32, tf32, bf16 or fp16" cdp-train $C --out "$T/x" --precision fp8
for p in tf32 fp16; do
	expect_fail 1 "--precision $p: the cpu backend cannot compute in it (the cpu computes in fp32, and in bf16 with AVX512_BF16)" \
		cdp-train $C --out "$T/x" --device cpu --precision $p
done
expect_fail 1 "--precision bf16: the cpu backend cannot compute in it (bf16 on the cpu needs the AVX512_BF16 instructions" \
	env CDP_CPU_ISA=avx512 cdp-train $C --out "$T/x" --device cpu --precision bf16
cdp-train $C --out "$T/fp32" --device cpu --precision fp32 || fail "--precision fp32 did not train"
cmp -s "$T/cpu/checkpoint.cdpt" "$T/fp32/checkpoint.cdpt" || fail "fp32 is not the default"
expect_fail 2 "--allreduce: 'gloo' is not mpi, ring or nccl" cdp-train $C --out "$T/x" --allreduce gloo
expect_fail 1 "--allreduce nccl: needs a GPU (--device cuda)" \
	cdp-train $C --out "$T/x" --device cpu --allreduce nccl
for s in auto 0.5 -1 1e400 x; do
	expect_fail 2 "--loss-scale: '$s' is not dynamic, off or a number in 1\.\.1e300" \
		cdp-train $C --out "$T/x" --loss-scale "$s"
done
[ ! -e "$T/x/metrics.jsonl" ] || fail "a refused run wrote metrics.jsonl"

echo "== cdp-predict"
P="$T/cpu $T/c3.tif -o $T/p.tif"
expect_fail 2 "--device: 'tpu' is not cpu, cuda, cuda:N or auto" cdp-predict --device tpu $P
expect_fail 2 "--precision: 'half' is not fp32" cdp-predict --precision half $P
expect_fail 1 "--precision bf16: the cpu backend cannot compute in it (bf16 on the cpu needs" \
	env CDP_CPU_ISA=avx2 cdp-predict --device cpu --precision bf16 $P
expect_fail 1 "device cuda:1023 does not exist" cdp-predict --device cuda:1023 $P
[ ! -e "$T/p.tif" ] || fail "a refused prediction wrote p.tif"
cdp-predict -q --device cpu --prob "$T/cpu" "$T/c3.tif" -o "$T/p.cpu.tif" || fail "cdp-predict --device cpu"
if [ "$ngpu" -eq 0 ]; then
	expect_fail 1 "cdp-predict: --device cuda: " cdp-predict --device cuda $P
	cdp-predict -q --device auto --prob "$T/cpu" "$T/c3.tif" -o "$T/p.auto.tif" ||
		fail "cdp-predict --device auto"
	cmp -s "$T/p.cpu.tif" "$T/p.auto.tif" || fail "cdp-predict --device auto and cpu differ"
fi

echo "== launched without MPI"
R="env CDP_RENDEZVOUS=$T/rdv WORLD_SIZE=2"
# one line, and no run directory left holding its .lock (the failure's
# agreement went through NCCL, which ended the job without a GPU)
expect_fail 1 "launched without MPI (CDP_RENDEZVOUS), every collective goes through NCCL" \
	$R RANK=0 cdp-train $C --out "$T/nompi" --device cpu
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a launch without MPI on the cpu said: $(cat "$T/err")"
[ ! -e "$T/nompi" ] || fail "a refused launch without MPI left $(ls -A "$T/nompi")"
# torchrun under srun: its children inherit the srun task's Slurm and PMIx
# variables, which made each an MPI rank (PMIX_RANK) or made Open MPI's
# MPI_Init abort, taking it for a process srun started without PMI
for e in "SLURM_JOB_ID=7 SLURM_JOBID=7 SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODELIST=localhost SLURM_NTASKS=1 SLURM_STEP_NUM_TASKS=1" \
         "PMIX_RANK=0 PMIX_NAMESPACE=slurm.pmix.7.0 PMIX_SERVER_URI41=pmix-server.1;tcp4://127.0.0.1:9 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_JOBID=7 SLURM_NODELIST=localhost"; do
	# shellcheck disable=SC2086
	expect_fail 1 "launched without MPI (CDP_RENDEZVOUS), every collective goes through NCCL" \
		env $e TORCHELASTIC_RUN_ID=abc LOCAL_RANK=0 $R RANK=0 cdp-train $C --out "$T/nompi" --device cpu
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "torchrun under srun ($e): $(cat "$T/err")"
done
[ ! -e "$T/nompi" ] || fail "a refused torchrun launch under srun left $(ls -A "$T/nompi")"
# WORLD_SIZE above 1 without the rendezvous file: each would run alone
for r in 0 1; do
	expect_fail 1 "^cdp-train: CDP_RENDEZVOUS: '': want the rendezvous file of a launch without MPI: WORLD_SIZE is 2 and no mpirun or srun started this process\$" \
		env WORLD_SIZE=2 RANK=$r cdp-train $C --out "$T/nompi"
	expect_fail 1 "^cdp-predict: CDP_RENDEZVOUS: '': want the rendezvous file of a launch without MPI: WORLD_SIZE is 2" \
		env WORLD_SIZE=2 RANK=$r cdp-predict $P
done
[ ! -e "$T/nompi" ] && [ ! -e "$T/p.tif" ] || fail "WORLD_SIZE=2 without CDP_RENDEZVOUS wrote outputs"
env WORLD_SIZE=1 RANK=0 cdp-train $C --out "$T/ws1" || fail "WORLD_SIZE=1 did not train alone"
# each names the variable, its value and what it allows
expect_fail 1 "^cdp-train: WORLD_SIZE: 'two': want the number of ranks, an integer 1 to 1048576\$" \
	env CDP_RENDEZVOUS="$T/rdv" WORLD_SIZE=two RANK=0 cdp-train $C --out "$T/x"
expect_fail 1 "^cdp-train: RANK: '2': want this process's rank below WORLD_SIZE, an integer 0 to 1\$" \
	$R RANK=2 cdp-train $C --out "$T/x"
expect_fail 1 "^cdp-train: RANK: '': want this process's rank below WORLD_SIZE, an integer 0 to 1\$" \
	$R cdp-train $C --out "$T/x"
expect_fail 1 "^cdp-train: LOCAL_RANK: '3': want this process's rank on its node, below LOCAL_WORLD_SIZE, an integer 0 to 1\$" \
	$R RANK=1 LOCAL_RANK=3 cdp-train $C --out "$T/x"
expect_fail 1 "not launched by CDP_RENDEZVOUS" $R RANK=1 cdp-predict $P
# a launcher Open MPI cannot join (another MPI's mpiexec, srun without
# --mpi=pmix) leaves each process a world of 1, which trained alone on
# the same outputs; an sbatch script's batch shell (SLURM_NTASKS, no step)
# still runs one process
for e in "PMI_RANK=1 PMI_SIZE=2:PMI_SIZE" "OMPI_COMM_WORLD_SIZE=2:OMPI_COMM_WORLD_SIZE" \
         "SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2:SLURM_NTASKS"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-train: ${e#*:}: '2': want 1, the size of the MPI world this process is in: Open MPI cannot join the launcher that set it" \
		env ${e%%:*} cdp-train $C --out "$T/x"
done
[ ! -e "$T/x" ] || fail "a process its launcher's MPI world left out wrote '$T/x'"
env SLURM_NTASKS=4 SLURM_JOB_ID=1 cdp-train $C --out "$T/sbatch" || fail "sbatch's shell: not one process"
[ ! -e "$T/rdv" ] || fail "a refused launch left the rendezvous file"

if [ -n "$MP" ]; then
	# under mpirun the launcher's variables are the user's leftovers: one
	# rank trains as one process does, without a rendezvous
	$R RANK=0 $(echo "$MP" | sed 's/-np 2/-np 1/') cdp-train $C --out "$T/mp1" ||
		fail "mpirun -np 1 with RANK, WORLD_SIZE and CDP_RENDEZVOUS set: not ignored"
	cmp -s "$T/cpu/checkpoint.cdpt" "$T/mp1/checkpoint.cdpt" ||
		fail "mpirun -np 1 did not train what one process does"
	[ ! -e "$T/rdv" ] || fail "mpirun -np 1 wrote the rendezvous file"
fi

if [ -z "$MP" ]; then
	echo "SKIP: staging at 2 ranks (no MPIRUN)"
	exit 0
fi
echo "== staged reductions at 2 ranks"
S="$C --batch 2 --steps 8"
for a in mpi ring; do
	for s in allreduce average:3; do
		n=$a.$(echo $s | tr : _)
		$MP cdp-train $S --out "$T/h.$n" --allreduce $a --sync $s || fail "$n: unstaged run"
		CDP_DIST_STAGE=1 $MP cdp-train $S --out "$T/s.$n" --allreduce $a --sync $s ||
			fail "$n: staged run"
		grep -q "all-reduce $a staged through host memory" "$T/s.$n/train.log" ||
			fail "$n: CDP_DIST_STAGE=1 did not stage: $(grep device "$T/s.$n/train.log")"
		! grep -q staged "$T/h.$n/train.log" || fail "$n: staged without CDP_DIST_STAGE"
		losses "$T/h.$n/metrics.jsonl" >"$T/lh"
		losses "$T/s.$n/metrics.jsonl" >"$T/ls"
		[ "$(wc -l <"$T/lh")" -eq 8 ] || fail "$n: $(wc -l <"$T/lh") step lines"
		cmp -s "$T/lh" "$T/ls" || fail "$n: staged losses differ: $(diff "$T/lh" "$T/ls" | head -4)"
		cmp -s "$T/h.$n/checkpoint.cdpt" "$T/s.$n/checkpoint.cdpt" ||
			fail "$n: staged checkpoint differs"
		echo "$n: staged = unstaged, bit for bit"
	done
done
exit 0
