#!/bin/sh
# cdp-train under a real one-node Slurm (Debian's slurmctld, slurmd,
# slurm-client and munge: scripts/deps.sh), started here in $T/slurm with
# its own slurm.conf (2 CPUs), munge key, state, spool and log directories
# and ports, as root (no namespaces: the daemons, the jobs and their
# ranks are processes of this host), and stopped by the EXIT trap (its
# jobs cancelled, then exactly the three daemons this test started, by
# pid). The man pages' scripts run as printed, but for what a 2-CPU node
# cannot give them: sbatch's command line overrides their #SBATCH
# geometry and time (--nodes=1 --ntasks-per-node=2 --cpus-per-task=1, or
# 1 task of 2 CPUs where the binding is checked, and --time=5, for 2 nodes
# x 4 tasks of 4 CPUs and hours) and gives the run's length as the
# scripts' "$@":
#  - cdp-train(1)'s sbatch script (and the same in cdpool(7)) gives the
#    losses and the checkpoint of `mpirun -np 2` byte for byte;
#  - so does `srun -n 2 cdp-train` (srun --mpi=pmix: Open MPI's ranks get
#    their world from Slurm's PMIx server); where Slurm or Open MPI has no
#    PMIx, that part says why and is skipped;
#  - under srun, a rank killed (SIGKILL) or stopped (SIGSTOP, found by
#    the watchdog, CDP_DIST_TIMEOUT=5) ends the job within 30 s, non-zero,
#    leaving neither rank running;
#  - the script's srun binds each rank to its --cpus-per-task CPUs
#    (task/affinity; SRUN_CPUS_PER_TASK, since srun of Slurm 22.05 no
#    longer inherits sbatch's);
#  - the same script with mpirun in place of srun, and salloc + mpirun:
#    Open MPI reads the allocation from Slurm and starts its 2 ranks;
#  - and cdp-train(1)'s requeue script (--signal=B:USR1@120): SIGUSR1 to
#    its batch shell (scancel --signal=USR1 --batch, at step 3) stops the
#    run with a checkpoint and requeues the job, whose next start resumes
#    the run to its end (the job COMPLETED, exit 0, after 1 restart; the
#    losses and checkpoint of the run never stopped); `scancel JOBID`
#    (Slurm's SIGTERM to mpirun and the ranks alike) at step 3 leaves a
#    checkpoint and no .lock (its mpirun gives them its
#    odls_base_sigkill_timeout), the script submitted again resumes the run
#    to the same end, and submitted on a run without a checkpoint starts it
#    over (--overwrite) instead of failing.
# Skipped where the packages are missing, without root or MPI, or where the
# daemons do not start (their log says why).
. "$CDP_SRCDIR/tests/tools/common.sh"
for c in slurmctld slurmd munged srun sbatch salloc squeue scancel sinfo; do
	command -v "$c" >/dev/null 2>&1 ||
		{ echo "SKIP: no '$c' (slurmctld slurmd slurm-client munge: scripts/deps.sh)" >&2; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: not root: slurmd must run as root" >&2; exit 77; }
[ -n "${MPIRUN:-}" ] && command -v "$MPIRUN" >/dev/null 2>&1 || { echo "SKIP: no MPIRUN" >&2; exit 77; }
. "$CDP_SRCDIR/tests/train/train_common.sh"

# No variable of an outer Slurm job (make check run under sbatch) may
# reach srun or sbatch: they would take it for their own allocation.
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
S=$T/slurm
mkdir -m 700 "$S" "$S/munge" "$S/state" "$S/spool" "$S/log"
export SLURM_CONF="$S/slurm.conf"
# mpirun as root (sbatch and salloc pass the environment on)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pids=
slurm_down() {
	if [ -n "$pids" ]; then
		scancel --full --signal=KILL --quiet --user=root 2>/dev/null || true
		sd_i=0
		while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ "$sd_i" -lt 50 ]; do
			sd_i=$((sd_i + 1)); sleep 0.2
		done
		# shellcheck disable=SC2086
		kill $pids 2>/dev/null || true
		for p in $pids; do wait "$p" 2>/dev/null || true; done
	fi
}
trap 'slurm_down; rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
started() { # NAME PID LOG: skip (77) with the log's last lines if PID died
	kill -0 "$2" 2>/dev/null ||
		{ echo "SKIP: $1 did not start: $(tail -n 3 "$3" | tr '\n' ' ')" >&2; exit 77; }
}

echo "== munge and Slurm in $S"
dd if=/dev/urandom of="$S/munge/key" bs=128 count=1 2>/dev/null
chmod 600 "$S/munge/key"
munged -F --force --key-file="$S/munge/key" --socket="$S/munge/socket" \
	--pid-file="$S/munge/pid" --seed-file="$S/munge/seed" --log-file="$S/log/munged.log" \
	>"$S/log/munged.out" 2>&1 &
pids="$!"
i=0
until [ -S "$S/munge/socket" ]; do
	i=$((i + 1)); [ "$i" -lt 50 ] || break; sleep 0.1
done
started munged "$!" "$S/log/munged.out"
# two free ports on loopback, for slurmctld and slurmd
set -- $("$PYTHON" -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')
host=$(hostname -s)
# cred_expire=15: a requeued job waits that long (and 1 s) before it starts
# again, 120 s by default, so that what its last start sent late cannot
# land on the next (the requeue script's test once made its second start
# at once, and the first start's exit status 1 failed it)
cat >"$SLURM_CONF" <<EOF
ClusterName=cdptest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/socket,cred_expire=15
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
PlugStackConfig=$S/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
NodeName=cdp1 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=cdp Nodes=cdp1 Default=YES MaxTime=10 State=UP
EOF
: >"$S/plugstack.conf"
slurmctld -D -i >"$S/log/slurmctld.out" 2>&1 &
pids="$pids $!"
ctld=$!
slurmd -D -N cdp1 >"$S/log/slurmd.out" 2>&1 &
pids="$pids $!"
slurmd=$!
i=0
until [ "$(sinfo -h -n cdp1 -o %t 2>/dev/null)" = idle ]; do
	started slurmctld "$ctld" "$S/log/slurmctld.out"
	started slurmd "$slurmd" "$S/log/slurmd.out"
	i=$((i + 1))
	[ "$i" -lt 100 ] || { echo "SKIP: node cdp1 not idle after 20 s: $(sinfo -h -o '%t %E' 2>&1)" >&2; exit 77; }
	sleep 0.2
done
sinfo -h -o '%P %D nodes %c CPUs %t'

# the run each launcher must reproduce: mpirun -np 2, 12 steps of batch 8
P="--steps 12 --log-every 1 -q"
W=$T/work
mkdir "$W"
cp -r "$T/pool" "$W/pool"
cp "$T/train.keys" "$W/train.keys"
cp "$SMALL" "$W/unet.cfg"
$MP cdp-train --db "$W/pool" --keys "$W/train.keys" --model "$W/unet.cfg" --out "$T/ref" \
	--batch 8 --threads 1 --checkpoint-every 500 $P || fail "mpirun -np 2"
losses "$T/ref/metrics.jsonl" >"$T/lref"
[ "$(wc -l <"$T/lref")" -eq 12 ] || fail "want 12 losses from mpirun -np 2"
same() { # NAME RUNDIR: the run in RUNDIR is mpirun -np 2's
	[ -s "$2/metrics.jsonl" ] || fail "$1: no metrics.jsonl in $2"
	losses "$2/metrics.jsonl" >"$T/l"
	losses_close "$T/lref" "$T/l" 0 || fail "$1: losses differ from mpirun -np 2"
	cmp -s "$T/ref/checkpoint.cdpt" "$2/checkpoint.cdpt" ||
		fail "$1: checkpoint differs from mpirun -np 2's"
	echo "$1: 12 losses and the checkpoint of mpirun -np 2"
}

# The man page's script as printed: the lines between the marks, with
# roff's \- and \e as the shell reads them; cdpool(7) prints the same
sbatch_script() {
	sed -n '/^\.\\" sbatch script begin/,/^\.\\" sbatch script end/p' "$CDP_SRCDIR/man/$1" |
		sed -e '/^\./d' -e 's/\\-/-/g' -e 's/\\e/\\/g'
}
sbatch_script cdp-train.1 >"$W/train.sbatch"
sbatch_script cdpool.7 | cmp -s - "$W/train.sbatch" ||
	fail "cdpool(7)'s sbatch script is not cdp-train(1)'s: $(sbatch_script cdpool.7 | diff - "$W/train.sbatch")"
grep -q '^srun --mpi=pmix cdp-train' "$W/train.sbatch" ||
	fail "no 'srun --mpi=pmix cdp-train' line in cdp-train(1)'s sbatch script: $(cat "$W/train.sbatch")"
sed 's/^srun --mpi=pmix cdp-train/mpirun cdp-train/' "$W/train.sbatch" >"$W/mpirun.sbatch"
# Each rank's affinity holds the script's --cpus-per-task: since Slurm
# 22.05 srun no longer takes it from sbatch (SRUN_CPUS_PER_TASK does), and
# without it a rank of 4 threads was bound to one CPU. The script's lines
# up to its srun, then srun with the rank's affinity in place of cdp-train,
# as 1 task of 2 CPUs (task/affinity, with srun's SLURM_CPU_BIND=cores,
# binds each task to its CPUs).
echo "== the sbatch script's ranks get its --cpus-per-task"
sed '/^srun --mpi=pmix cdp-train/,$d' "$W/train.sbatch" >"$W/aff.sbatch"
echo 'srun sh -c '"'"'nproc >"aff.$SLURM_PROCID"'"'" >>"$W/aff.sbatch"
job=$(cd "$W" && SLURM_CPU_BIND=cores sbatch --parsable --time=5 --nodes=1 --ntasks-per-node=1 \
	--cpus-per-task=2 aff.sbatch 2>"$T/sb") || fail "sbatch aff.sbatch: $(cat "$T/sb")"
i=0
while squeue -h -j "$job" -t PD,CF,R,CG -o %i 2>/dev/null | grep -q .; do
	i=$((i + 1)); [ "$i" -lt 600 ] || fail "aff.sbatch: job $job still running after 120 s"
	sleep 0.2
done
[ "$(cat "$W/aff.0" 2>/dev/null)" = 2 ] ||
	fail "sbatch --cpus-per-task=2: the rank runs on $(cat "$W/aff.0" 2>/dev/null) CPUs, want 2 ($(cat "$W/slurm-$job.out" 2>/dev/null))"
echo "rank 0 runs on 2 CPUs"
# submit SCRIPT DIR: the script on 1 node x 2 tasks (in place of its
# 2 nodes x 4), with the test's run length, from $W (where its relative
# paths lead); waits for the job's end (polling: sbatch --wait looks only
# every few seconds) and moves its run directory to DIR
submit() {
	job=$(cd "$W" && sbatch --parsable --time=5 --nodes=1 --ntasks-per-node=2 \
		--cpus-per-task=1 "$1" $P 2>"$T/sb") || fail "sbatch $1: $(cat "$T/sb")"
	i=0
	while squeue -h -j "$job" -t PD,CF,R,CG -o %i 2>/dev/null | grep -q .; do
		i=$((i + 1)); [ "$i" -lt 600 ] || fail "sbatch $1: job $job still running after 120 s"
		sleep 0.2
	done
	state=$(scontrol show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	[ "$state" = COMPLETED ] ||
		fail "sbatch $1: job $job $state: $(cat "$W/slurm-$job.out" 2>/dev/null)"
	[ -z "${2:-}" ] || mv "$W/run" "$2"
}

# srun starts Open MPI ranks only through PMIx: Open MPI 4.1 as Debian
# builds it has no PMI-1 or PMI-2 (OMPI_... "not built with SLURM's PMI
# support"), so srun's default --mpi=none and --mpi=pmi2 cannot
why=
srun --mpi=list 2>&1 | grep -qx '[[:space:]]*pmix' ||
	why="Slurm has no pmix plugin (srun --mpi=list: $(srun --mpi=list 2>&1 | tr -s '\n\t' '  '))"
[ -n "$why" ] || ompi_info --parsable 2>/dev/null | grep -q '^mca:pmix:ext' ||
	why="this Open MPI has no external PMIx client (ompi_info lists no 'MCA pmix: ext...'); it cannot take its world from srun's PMIx server"
if [ -z "$why" ]; then
	echo "== the sbatch script of cdp-train(1) (srun --mpi=pmix)"
	submit train.sbatch "$T/sbatch"
	same "sbatch + srun --mpi=pmix" "$T/sbatch"
	echo "== srun -n 2 cdp-train"
	timeout 120 srun --mpi=pmix -n 2 cdp-train --db "$W/pool" --keys "$W/train.keys" \
		--model "$W/unet.cfg" --out "$T/srun" --batch 8 --threads 1 --checkpoint-every 500 $P \
		>"$T/so" 2>&1 || fail "srun -n 2: $(cat "$T/so")"
	same "srun -n 2" "$T/srun"
	# a rank killed ends the step at once (Slurm's PMIx server sees it);
	# a rank stopped, through rank 0's watchdog after CDP_DIST_TIMEOUT
	for how in KILL STOP; do
		echo "== srun -n 2: rank 1 gets SIG$how at step 5"
		d=$T/lost.$how
		CDP_DIST_TIMEOUT=5 srun --mpi=pmix -n 2 sh -c 'echo $$ >"$0.$SLURM_PROCID"; exec "$@"' \
			"$T/pid" cdp-train --db "$W/pool" --keys "$W/train.keys" --model "$W/unet.cfg" \
			--out "$d" --batch 2 --threads 1 --steps 1000000 --log-every 1 -q >"$T/so" 2>&1 &
		sp=$!
		wait_step $sp "$d/metrics.jsonl" 5 60
		t0=$(date +%s)
		kill -$how "$(cat "$T/pid.1")"
		i=0
		while kill -0 $sp 2>/dev/null; do
			i=$((i + 1)); [ "$i" -lt 150 ] || { kill -9 $sp; fail "SIG$how: srun still running after 30 s"; }
			sleep 0.2
		done
		rc=0; wait $sp || rc=$?
		[ "$rc" -ne 0 ] || fail "SIG$how: srun exited 0"
		echo "srun exited $rc after $(($(date +%s) - t0)) s"
		for r in 0 1; do
			! kill -0 "$(cat "$T/pid.$r")" 2>/dev/null || fail "SIG$how: rank $r still runs"
		done
		[ $how = KILL ] || grep -q "^cdp-train: rank 0: .*rank 1 on host '.*' died or hangs" "$T/so" ||
			fail "SIGSTOP: no watchdog message: $(cat "$T/so")"
	done
else
	echo "SKIP (srun part): srun cannot start Open MPI ranks here: $why" >&2
fi

echo "== the sbatch script with mpirun in place of srun"
submit mpirun.sbatch "$T/sbatch-mpirun"
same "sbatch + mpirun" "$T/sbatch-mpirun"
echo "== salloc -n 2 mpirun cdp-train"
timeout 120 salloc -n 2 "$MPIRUN" cdp-train --db "$W/pool" --keys "$W/train.keys" \
	--model "$W/unet.cfg" --out "$T/salloc" --batch 8 --threads 1 --checkpoint-every 500 $P \
	>"$T/sa" 2>&1 || fail "salloc -n 2 mpirun: $(cat "$T/sa")"
same "salloc + mpirun" "$T/salloc"

# cdp-train(1)'s requeue script as printed (the lines between its marks),
# with the test's geometry and run: SIGUSR1 to the batch shell (what its
# --signal=B:USR1@120 sends ahead of the limit, sent here at step 3 by
# scancel) stops the run with a checkpoint and requeues the job; the job's
# second start resumes the run to its end, and the job ends COMPLETED,
# exit 0, after one restart, with the losses and checkpoint of the run
# never stopped
echo "== cdp-train(1)'s requeue script: SIGUSR1 at step 3, requeued, resumed"
sed -n '/^\.\\" requeue script begin/,/^\.\\" requeue script end/p' "$CDP_SRCDIR/man/cdp-train.1" |
	sed -e '/^\./d' -e 's/\\-/-/g' -e 's/\\e/\\/g' >"$W/requeue.sbatch"
grep -q '^#SBATCH .*--signal=B:USR1@' "$W/requeue.sbatch" ||
	fail "no requeue script with --signal=B:USR1 in cdp-train(1): $(cat "$W/requeue.sbatch")"
Q="--batch 8 --threads 1 --checkpoint-every 500 --steps 40 --log-every 1 -q"
$MP cdp-train --db "$W/pool" --keys "$W/train.keys" --model "$W/unet.cfg" --out "$T/qref" $Q ||
	fail "mpirun -np 2, 40 steps"
# qjob SCRIPT_ARGS...: submit the requeue script, job id in $job; with
# the ranks' kill timeout at KillWait (5 s here), as cdp-train(1) says to
# set it: the script's default of 30 s made mpirun linger 60 s after the
# SIGUSR1 stop (twice the timeout), a minute of every make check
qjob() {
	job=$(cd "$W" && OMPI_MCA_odls_base_sigkill_timeout=5 sbatch --parsable --time=5 --nodes=1 --ntasks-per-node=2 \
		--cpus-per-task=1 requeue.sbatch "$@" 2>"$T/sb") || fail "sbatch requeue.sbatch: $(cat "$T/sb")"
}
jobf() { scontrol show job "$job" | sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p"; }
# qstep3: wait (120 s at most) for the job's run to log step 3
qstep3() {
	i=0
	until grep -q '"step":3,' "$W/run/metrics.jsonl" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "requeue.sbatch: job $job logged no step 3 in 120 s: $(cat "$W/slurm-$job.out" 2>/dev/null)"
		sleep 0.2
	done
}
qjob $Q
qstep3
scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job"
t0=$(date +%s)
i=0
while state=$(jobf JobState); [ "$(jobf Restarts)" = 0 ] || [ "$state" != COMPLETED ]; do
	case $state in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
		fail "requeue.sbatch: job $job $state after $(jobf Restarts) restarts: $(cat "$W/slurm-$job.out" 2>/dev/null)" ;;
	esac
	i=$((i + 1))
	# its mpirun waits twice odls_base_sigkill_timeout (10 s) after the stop
	[ "$i" -lt 1200 ] || fail "requeue.sbatch: job $job $state after 240 s, $(jobf Restarts) restarts"
	sleep 0.2
done
[ "$(jobf Restarts)" = 1 ] && [ "$(jobf ExitCode)" = 0:0 ] ||
	fail "requeue.sbatch: job $job $state, $(jobf Restarts) restarts, exit $(jobf ExitCode), want 1 and 0:0"
grep -q 'interrupted: checkpoint at step [0-9]* written' "$W/run/train.log" ||
	fail "requeue.sbatch: the first start wrote no checkpoint at the signal: $(cat "$W/run/train.log")"
grep -q "^cdp-train: interrupted at step [0-9]*, checkpoint written" "$W/slurm-$job.out" ||
	fail "requeue.sbatch: slurm-$job.out lost the first start's output (--open-mode=append): $(cat "$W/slurm-$job.out")"
mv "$W/run" "$T/requeue"
losses "$T/qref/metrics.jsonl" >"$T/lq"
[ "$(wc -l <"$T/lq")" -eq 40 ] || fail "want 40 losses from mpirun -np 2"
losses "$T/requeue/metrics.jsonl" >"$T/l"
losses_close "$T/lq" "$T/l" 0 || fail "requeue.sbatch: losses differ from the run never stopped"
cmp -s "$T/qref/checkpoint.cdpt" "$T/requeue/checkpoint.cdpt" ||
	fail "requeue.sbatch: checkpoint differs from the run never stopped"
echo "requeue.sbatch: $(grep -o 'interrupted: checkpoint at step [0-9]*' "$T/requeue/train.log"), requeued once,"\
	"done $(($(date +%s) - t0)) s after the signal;"\
	"40 losses and the checkpoint of the run never stopped"

# The same script stopped by `scancel JOBID`: Slurm's SIGTERM to every
# process of the job (as at the time limit, on `scontrol requeue` and on
# preemption) reached mpirun too, which killed its ranks one second later,
# without a checkpoint and leaving run/.lock, so the requeued start found
# nothing to resume and failed. The ranks now write their checkpoint
# within KillWait (5 s here) and the script submitted again resumes the
# run to its end; a run that holds no checkpoint (its first start killed
# before one) starts over instead of failing.
# qend STATE: wait (120 s at most) for the job to end in STATE
qend() {
	i=0
	while squeue -h -j "$job" -o %i 2>/dev/null | grep -q .; do
		i=$((i + 1)); [ "$i" -lt 600 ] || fail "requeue.sbatch: job $job still queued after 120 s"
		sleep 0.2
	done
	[ "$(jobf JobState)" = "$1" ] ||
		fail "requeue.sbatch: job $job $(jobf JobState), want $1: $(cat "$W/slurm-$job.out" 2>/dev/null)"
}
echo "== cdp-train(1)'s requeue script: scancel at step 3, submitted again, resumed"
qjob $Q
qstep3
scancel "$job" || fail "scancel $job"
qend CANCELLED
grep -q 'interrupted: checkpoint at step [0-9]* written' "$W/run/train.log" ||
	fail "scancel: the ranks wrote no checkpoint: $(cat "$W/run/train.log") $(cat "$W/slurm-$job.out")"
[ ! -e "$W/run/.lock" ] || fail "scancel: the ranks were killed, leaving run/.lock"
qjob $Q
qend COMPLETED
grep -q 'start at step [1-9]' "$W/run/train.log" || fail "scancel: the next start did not resume: $(cat "$W/run/train.log")"
losses "$W/run/metrics.jsonl" >"$T/l"
losses_close "$T/lq" "$T/l" 0 || fail "scancel: losses differ from the run never stopped"
cmp -s "$T/qref/checkpoint.cdpt" "$W/run/checkpoint.cdpt" ||
	fail "scancel: checkpoint differs from the run never stopped"
# a run without a checkpoint: what its logs say, the checkpoint gone
rm "$W/run/checkpoint.cdpt"
qjob $Q
qend COMPLETED
cmp -s "$T/qref/checkpoint.cdpt" "$W/run/checkpoint.cdpt" ||
	fail "requeue.sbatch on a run without a checkpoint did not start it over: $(cat "$W/slurm-$job.out")"
echo "requeue.sbatch: scancel at step 3, checkpoint written, resumed to the end; a run without a checkpoint started over"
exit 0
