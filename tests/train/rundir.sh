#!/bin/sh
# cdp-train's run directory and what ends a run (issue 25), on the
# generated road pool of train_common.sh:
#  - RUNDIR holding a run (any of checkpoint.cdpt, best.cdpt, metrics.jsonl,
#    train.log, loss.png, the --trace file) without --resume is refused in
#    one line naming what is there and both ways on, the files untouched;
#    --overwrite removes those files and nothing else; an empty directory or
#    one with only the user's files trains; --resume with --overwrite is a
#    usage error; --overwrite with --init naming one of the files it
#    removes (checkpoint.cdpt, best.cdpt, by inode) is refused, both kept;
#    a run refused before its first step leaves none behind;
#    a RUNDIR whose run stopped before its first checkpoint has nothing to
#    resume, which a run with or without --resume says, sweeping a dead
#    run's temporaries;
#  - a link at a run file's name counts as the run's (refused; --overwrite
#    removes the link, never what it names); a folder at checkpoint.cdpt
#    or best.cdpt is refused before step 1; --trace onto the run's own
#    checkpoint in a RUNDIR still to be made is the same file;
#  - a second cdp-train on a running run's RUNDIR (with --resume or
#    --overwrite) fails at once naming it and the holder's pid, and leaves
#    the running one's files; kill -9 of the holder leaves no stale lock;
#  - SIGTERM mid-epoch and --resume: every epoch and step line of
#    metrics.jsonl equals the uninterrupted run's (the checkpoint's SUMS
#    chunk), which Python's reader reads too;
#  - the run's end: --resume of a complete run says so, exits 0 and writes
#    nothing; a checkpoint past the run's end is refused naming both steps;
#    another pointer file is refused naming both identities; a stop on an
#    epoch's last step (CDP_TRAIN_STOP_AT) resumes to the uninterrupted
#    run's metrics.jsonl and best.cdpt; --steps off the --log-every grid
#    resumes to its step lines; --keep-best first given on a resume writes
#    best.cdpt; best.cdpt records the metric that kept it, its value and
#    step (BEST), and a resume with another --keep-best warns once and
#    writes it anew at its first validation, while the same metric (or a
#    best.cdpt without BEST) keeps it until beaten; a longer cosine run
#    warns that its schedule is re-planned;
#  - --resume without the optimizer's options continues with the
#    checkpoint's (lr, momentum, weight decay, warm-up, loss scale) bit for
#    bit; one given that differs is taken and said in one warning;
#  - --resume with another --threads or CDP_CPU_ISA than the checkpoint's
#    run (RUN) warns that the losses will not equal an uninterrupted run's
#    bit for bit, and with another --val-keys list that --keep-best and
#    --patience compare the two lists' scores; the same ones say nothing;
#  - --resume with --model naming the checkpoint's model in other words
#    (overrides in another order, a default spelled out) resumes, keeping
#    the checkpoint's text and overrides; another model is refused naming
#    the first difference;
#  - SIGHUP and SIGUSR1 stop the run as SIGTERM does (checkpoint, no .lock);
#  - a pool truncated while cdp-train reads it: one line naming the pool,
#    its new size and the record beyond it, the checkpoint of the last step
#    done (valid, and the last step line's), exit 1, no SIGBUS; at 1 and 2
#    ranks;
#  - a pool whose class histogram (meta "classes") holds labels the model
#    has no class for is refused before step 1 naming them and the
#    model's classes, exit 1, no metrics.jsonl;
#  - settings of the environment outside what cdp-train(1) allows, and a
#    --model override holding a newline, are refused in one line naming
#    them, before any RUNDIR is made.
. "$CDP_SRCDIR/tests/train/train_common.sh"
C="--db $T/pool --keys $T/train.keys --model $SMALL --threads 1 -q --batch 4"

echo "== a directory that holds a run"
cdp-train $C --out "$T/run" --steps 2 --trace "$T/run/t.json" || fail "first run failed"
echo mine >"$T/run/notes.txt"
for f in checkpoint.cdpt metrics.jsonl train.log loss.png t.json; do
	[ -s "$T/run/$f" ] || fail "the first run left no $f"
done
cp "$T/run/checkpoint.cdpt" "$T/ck.first"
expect_fail 1 "^cdp-train: '$T/run' holds a run (checkpoint.cdpt, metrics.jsonl, train.log, loss.png): --resume continues it, --overwrite starts over and removes those files\$" \
	cdp-train $C --out "$T/run" --steps 3
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "the refusal is not one line: $(cat "$T/err")"
cmp -s "$T/run/checkpoint.cdpt" "$T/ck.first" || fail "the refused run changed checkpoint.cdpt"
# the trace counts when it is this run's --trace in RUNDIR
expect_fail 1 "holds a run (checkpoint.cdpt, metrics.jsonl, train.log, loss.png, t.json)" \
	cdp-train $C --out "$T/run" --steps 3 --trace "$T/run/t.json"
# any one of them is a run
mkdir "$T/one"
: >"$T/one/train.log"
expect_fail 1 "'$T/one' holds a run without a checkpoint (train.log)" cdp-train $C --out "$T/one" --steps 1
# a run refused before its first step (after it began its logs) leaves no
# run behind in a directory that held none
mkdir "$T/gone"
expect_fail 1 "cannot create '$T/nodir/k.0'" env CDP_TRAIN_LOG_KEYS="$T/nodir/k" \
	cdp-train $C --out "$T/gone" --steps 1
[ -z "$(ls -A "$T/gone")" ] || fail "a refused run left $(ls -A "$T/gone")"
expect_fail 2 "^cdp-train: --resume and --overwrite exclude each other" \
	cdp-train $C --out "$T/run" --steps 3 --resume --overwrite
# a run killed before its first checkpoint: nothing to resume, said so
# both ways (before: "--resume continues it", and --resume then failed on
# "No such file or directory"); a refused run sweeps a dead run's
# temporary too (before: only a run that trained did)
mkdir "$T/nock"
cp "$T/run/metrics.jsonl" "$T/run/train.log" "$T/nock/"
sh -c 'echo $$' >"$T/deadpid"
touch "$T/nock/.loss.png.cdp-tmp.$(cat "$T/deadpid").AbCdEf"
expect_fail 1 "^cdp-train: '$T/nock' holds a run without a checkpoint (metrics.jsonl, train.log), stopped before its first one: nothing to resume; --overwrite starts over and removes those files\$" \
	cdp-train $C --out "$T/nock" --steps 3
[ -z "$(ls -A "$T/nock" | grep cdp-tmp)" ] || fail "a refused run kept a dead run's temporary"
touch "$T/nock/.loss.png.cdp-tmp.$(cat "$T/deadpid").AbCdEf"
expect_fail 1 "^cdp-train: cannot resume: '$T/nock' holds no checkpoint.cdpt (metrics.jsonl, train.log of a run stopped before its first checkpoint): nothing to resume; --overwrite starts over and removes those files\$" \
	cdp-train $C --out "$T/nock" --steps 3 --resume
[ -z "$(ls -A "$T/nock" | grep cdp-tmp)" ] || fail "a refused resume kept a dead run's temporary"
# a run's own file's temporary marked elsewhere (a job killed on another
# node, its PID alive or not there) goes under the lock; another
# program's temporary marked elsewhere stays (before: both stayed, and a
# requeued job's checkpoint temporaries piled up for good)
touch "$T/nock/.checkpoint.cdpt.cdp-tmp.$$-0badf00d.AbCdEf" "$T/nock/.pred.tif.cdp-tmp.$(cat "$T/deadpid")-0badf00d.AbCdEf"
expect_fail 1 "holds a run without a checkpoint" cdp-train $C --out "$T/nock" --steps 3
[ ! -e "$T/nock/.checkpoint.cdpt.cdp-tmp.$$-0badf00d.AbCdEf" ] ||
	fail "a checkpoint temporary from another host was kept under the lock"
[ -e "$T/nock/.pred.tif.cdp-tmp.$(cat "$T/deadpid")-0badf00d.AbCdEf" ] ||
	fail "another program's temporary from another host was removed"
rm -f "$T/nock/.pred.tif.cdp-tmp."*
expect_fail 1 "^cdp-train: cannot resume: '$T/nock2' holds no checkpoint.cdpt, no run to resume (leave --resume out to start one)\$" \
	cdp-train $C --out "$T/nock2" --steps 3 --resume
[ ! -e "$T/nock2" ] || fail "a refused resume left the RUNDIR it made"
cdp-train $C --out "$T/nock" --steps 1 --overwrite || fail "--overwrite of a run without a checkpoint failed"

echo "== the run's files as links and folders, outputs onto them in a RUNDIR still to come"
# a link at checkpoint.cdpt into another run: a run of its own, refused
mkdir "$T/lnk"
ln -s ../run/checkpoint.cdpt "$T/lnk/checkpoint.cdpt"
expect_fail 1 "'$T/lnk' holds a run (checkpoint.cdpt)" cdp-train $C --out "$T/lnk" --steps 1
cmp -s "$T/run/checkpoint.cdpt" "$T/ck.first" || fail "a run wrote through a link into another run"
# --overwrite removes the link, and the other run's checkpoint stays
cdp-train $C --out "$T/lnk" --steps 1 --overwrite || fail "--overwrite over a link failed"
[ -f "$T/lnk/checkpoint.cdpt" ] && [ ! -L "$T/lnk/checkpoint.cdpt" ] ||
	fail "--overwrite kept the link checkpoint.cdpt"
cmp -s "$T/run/checkpoint.cdpt" "$T/ck.first" || fail "--overwrite wrote through a link into another run"
# a folder at checkpoint.cdpt (or best.cdpt with --keep-best): refused
# before the first step, not when the checkpoint is due
mkdir -p "$T/dirck/checkpoint.cdpt" "$T/dirbest/best.cdpt"
expect_fail 1 "^cdp-train: refusing to write '$T/dirck/checkpoint.cdpt': it is a directory, not a regular file\$" \
	cdp-train $C --out "$T/dirck" --steps 2
[ ! -e "$T/dirck/metrics.jsonl" ] || fail "a run refused for its checkpoint's path trained"
expect_fail 1 "^cdp-train: refusing to write '$T/dirbest/best.cdpt': it is a directory" \
	cdp-train $C --out "$T/dirbest" --steps 2 --val-keys "$T/val.keys" --keep-best loss
# --trace onto the run's own checkpoint in a RUNDIR not made yet: the same
# file before either exists (it was written over the checkpoint at the end)
expect_fail 1 "^cdp-train: '$T/newrun/checkpoint.cdpt' and --trace '$T/newrun/./checkpoint.cdpt' are the same file\$" \
	cdp-train $C --out "$T/newrun" --steps 1 --trace "$T/newrun/./checkpoint.cdpt"
[ ! -e "$T/newrun" ] || fail "a refused run made its RUNDIR"

echo "== --overwrite"
mkdir "$T/run/sub"
ln -s notes.txt "$T/run/best.cdpt"
cdp-train $C --out "$T/run" --steps 3 --overwrite --seed 7 || fail "--overwrite failed"
# t.json is no file of this run (no --trace), so it stays as the user's
[ -s "$T/run/t.json" ] || fail "--overwrite removed a trace this run does not write"
[ "$(cat "$T/run/notes.txt")" = mine ] || fail "--overwrite touched the user's notes.txt"
[ -d "$T/run/sub" ] || fail "--overwrite removed what it did not write"
# a link at a run file's name is removed, not what it names (a --keep-best
# run would otherwise write through it into notes.txt)
[ ! -e "$T/run/best.cdpt" ] && [ ! -L "$T/run/best.cdpt" ] || fail "--overwrite left the link best.cdpt"
[ "$(grep -c '"type":"resume"' "$T/run/metrics.jsonl")" -eq 0 ] || fail "--overwrite resumed"
[ "$(losses "$T/run/metrics.jsonl" | tail -1 | cut -d' ' -f1)" = 3 ] ||
	fail "--overwrite: metrics.jsonl does not end at step 3"
[ ! -e "$T/run/.lock" ] || fail "a finished run left its .lock"
# a --trace in RUNDIR that is an input: refused before --overwrite removes
# anything (the trace is one of the files --overwrite removes)
cp "$T/train.keys" "$T/run/k.keys"
cp "$T/run/checkpoint.cdpt" "$T/ck.before"
expect_fail 1 "refusing to write '$T/run/k.keys'" cdp-train --db "$T/pool" --keys "$T/run/k.keys" \
	--model "$SMALL" --threads 1 -q --batch 4 --out "$T/run" --steps 3 --overwrite --trace "$T/run/k.keys"
cmp -s "$T/train.keys" "$T/run/k.keys" || fail "--overwrite --trace removed or changed an input"
cmp -s "$T/ck.before" "$T/run/checkpoint.cdpt" || fail "a refused --overwrite removed the run"
rm "$T/run/k.keys"
# --init from the checkpoint --overwrite removes (by its own name, another
# name of it, a link to it, or best.cdpt): refused before anything is
# removed (before: read, then deleted with the run it came from)
cp "$T/run/checkpoint.cdpt" "$T/run/best.cdpt"
ln "$T/run/checkpoint.cdpt" "$T/hard.cdpt"
ln -s run/best.cdpt "$T/soft.cdpt"
for i in "$T/run/checkpoint.cdpt=checkpoint" "$T/run/./best.cdpt=best" "$T/hard.cdpt=checkpoint" \
	"$T/soft.cdpt=best"; do
	expect_fail 1 "^cdp-train: --init '${i%=*}': it is the run's '$T/run/${i#*=}.cdpt', which --overwrite removes: copy it out of '$T/run' first, or continue the run with --resume\$" \
		cdp-train $C --out "$T/run" --steps 3 --overwrite --init "${i%=*}"
	cmp -s "$T/ck.before" "$T/run/checkpoint.cdpt" && cmp -s "$T/ck.before" "$T/run/best.cdpt" ||
		fail "--init '${i%=*}' --overwrite removed or changed it"
done
rm "$T/run/best.cdpt" "$T/hard.cdpt" "$T/soft.cdpt"

echo "== fresh, empty and user-only directories train"
mkdir "$T/empty" "$T/user"
echo keep >"$T/user/README"
for d in fresh empty user; do
	cdp-train $C --out "$T/$d" --steps 1 || fail "$d: training failed"
done
[ "$(cat "$T/user/README")" = keep ] || fail "the user's README changed"

echo "== one job a run directory"
cdp-train $C --out "$T/busy" --steps 100000 --log-every 1 &
pid=$!
wait_step $pid "$T/busy/metrics.jsonl" 2 60
lines=$(wc -l <"$T/busy/metrics.jsonl")
expect_fail 1 "^cdp-train: '$T/busy' is in use by another cdp-train (host .*, pid $pid): one job a run directory at a time\$" \
	cdp-train $C --out "$T/busy" --steps 5 --resume
expect_fail 1 "'$T/busy' is in use by another cdp-train" cdp-train $C --out "$T/busy" --steps 5 --overwrite
[ -s "$T/busy/metrics.jsonl" ] || fail "the second run removed the first's metrics.jsonl"
kill -9 $pid
set +e; wait $pid; set -e
[ -e "$T/busy/.lock" ] || fail "kill -9: the test wants the .lock file left behind"
# no stale lock: the killed run's directory is free at once
cdp-train $C --out "$T/busy" --steps 3 --overwrite || fail "kill -9 left a stale lock"
[ ! -e "$T/busy/.lock" ] || fail "the run after kill -9 left .lock"
echo "second run refused while the first ran ($lines lines); no stale lock after kill -9"

echo "== settings"
long=$(printf '%0400d' 0)
nl='
'
for e in CDP_DIST_THREAD=yes CDP_DIST_STAGE=2 CDP_CPU_ISA=junk CDP_JOB_ID=$long \
	CDP_CUDNN_BENCHMARK=on CDP_CUDNN_BN=cudnn CDP_CUDNN_NHWC=yes CDP_CPU_BF16_EMU=yes CDP_CPU_BF16=vnni \
	CDP_CPU_WINOGRAD=off CDP_BF16_STASH=2 CDP_BF16_GRADS=no CDP_DIST_TIMEOUT=soon CDP_DIST_HEARTBEAT=-1 \
	CDP_CPU_SPIN_US=1e3 CDP_CPU_SPIN_US=1000001; do
	name=${e%%=*} value=${e#*=}
	case $name in
	CDP_CPU_ISA) want='want \(amx, avx512bf16, avx512, avx2 or \)\?sse2' ;;
	CDP_JOB_ID) want='want 1 to 251 printable ASCII characters' ;;
	CDP_CPU_BF16) want='want dp or fma' ;;
	CDP_CPU_SPIN_US) want='want microseconds from 0 to 1000000' ;;
	CDP_DIST_TIMEOUT) want='want seconds, 0 (never) to 1e9' ;;
	CDP_DIST_HEARTBEAT) want='want seconds, 0 (no heartbeat) to 1e9' ;;
	*) want='want 0 or 1' ;;
	esac
	expect_fail 1 "^cdp-train: $name: '$value': $want\$" env "$e" cdp-train $C --out "$T/env" --steps 1
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$name: not one line: $(cat "$T/err")"
	[ ! -e "$T/env" ] || fail "$name: RUNDIR made"
done
expect_fail 1 "^cdp-train: CDP_JOB_ID: 'a?b': want" env CDP_JOB_ID="a${nl}b" cdp-train $C --out "$T/env" --steps 1
# the allowed values still train
env CDP_DIST_THREAD=0 CDP_DIST_STAGE=1 CDP_CPU_ISA=sse2 CDP_JOB_ID=job-7 CDP_CPU_BF16=dp \
	CDP_CPU_SPIN_US=0 cdp-train $C \
	--out "$T/env" --steps 1 || fail "allowed settings refused"
# an empty variable is unset, as cdp-train(1) says of every one
env CDP_DIST_TIMEOUT= CDP_DIST_HEARTBEAT= CDP_BF16_STASH= CDP_BF16_GRADS= CDP_CPU_ISA= cdp-train $C \
	--out "$T/env2" --steps 1 || fail "empty settings refused: $(cat "$T/env2/train.log" 2>&1)"
expect_fail 2 "^cdp-train: --model: an override holds control character 0x0a at byte [0-9]*: each KEY=VALUE is one line of the cfg\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL:width=4${nl}depth=9" --out "$T/nl" --steps 1
[ ! -e "$T/nl" ] || fail "an override with a newline made RUNDIR"
# every item that is not KEY=VALUE is a usage error, wherever it is short
# (an empty value went on to the cfg parser and exited 1)
for ov in 'width=' '=5' 'width=4,,depth=2' 'depth=2,width'; do
	expect_fail 2 "^cdp-train: $SMALL: override '[^']*': expected key=value\$" \
		cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL:$ov" --out "$T/ov" --steps 1
	[ ! -e "$T/ov" ] || fail "override '$ov' made RUNDIR"
done
# the last --model wins with its overrides (the first one's stayed: an
# unknown key of the first failed a run of the second)
cdp-train $C --model "$SMALL:nonesuch=1" --model "$SMALL" --out "$T/m2" --steps 1 ||
	fail "the first --model's override outlived a second --model"
# the text log and the trace both on standard output: one stream of two
# outputs, refused as any two outputs that are one file
expect_fail 1 "^cdp-train: --log '-' and --trace '-' are the same file, standard output\$" \
	cdp-train $C --out "$T/dash" --steps 1 --log - --trace -
[ ! -e "$T/dash" ] || fail "a refused --log - --trace - made RUNDIR"
echo "settings refused in one line each"

echo "== labels outside the model's classes"
"$PYTHON" - "$T/c3_mask.tif" "$T/l7_mask.tif" <<'PYEOF'
import sys
from osgeo import gdal
src = gdal.Open(sys.argv[1])
dst = gdal.GetDriverByName("GTiff").CreateCopy(sys.argv[2], src)
a = dst.GetRasterBand(1).ReadAsArray()
a[200:210, 10:20] = 7       # in the last row of tiles: 100 pixels of class 7
a[250:252, 100:101] = 5     # and 2 of class 5
dst.GetRasterBand(1).WriteArray(a)
dst = None
PYEOF
cp "$T/c3.tif" "$T/l7.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/l7.tif" | cdp-lmdbpack -q "$T/l7pool"
cdp-keyshuffle -q -o "$T/l7.keys" "$T/l7pool"
expect_fail 1 "^cdp-train: '$T/l7pool' holds labels 5 (2 pixels), 7 (100 pixels) (meta 'classes'), which the model (2 classes, 0 to 1, ignore 255) has no class for\$" \
	cdp-train --db "$T/l7pool" --keys "$T/l7.keys" --model "$SMALL" --threads 1 -q --out "$T/l7" --steps 1
[ ! -e "$T/l7" ] || fail "labels outside the classes: RUNDIR left behind"
expect_fail 1 "holds label 7 (100 pixels) (meta 'classes'), which the model (6 classes, 0 to 5, ignore 255) has no class for" \
	cdp-train --db "$T/l7pool" --keys "$T/l7.keys" --model "$SMALL:classes=6,outputs=6" --threads 1 -q \
	--out "$T/l7" --steps 1
cdp-train --db "$T/l7pool" --keys "$T/l7.keys" --model "$SMALL:classes=8,outputs=8" --threads 1 -q \
	--out "$T/l7" --steps 1 || fail "a model with 8 classes refused labels 5 and 7"

echo "== SIGTERM mid-epoch, then --resume: the lines of an uninterrupted run"
# epochs FILE: "step epoch loss" of every epoch line
epochs() { sed -n 's/^{"type":"epoch","step":\([0-9]*\),"epoch":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2 \3/p' "$1"; }
E="$C --steps 60 --log-every 4 --schedule constant --lr 0.05"
cdp-train $E --out "$T/whole" || fail "the uninterrupted run failed"
for try in 1 2 3; do
	rm -rf "$T/cut"
	cdp-train $E --out "$T/cut" &
	pid=$!
	wait_step $pid "$T/cut/metrics.jsonl" 4 60
	kill -TERM $pid
	set +e; wait $pid; rc=$?; set -e
	[ "$rc" -eq 1 ] || fail "SIGTERM: exit $rc, want 1"
	at=$(sed -n 's/.*interrupted: checkpoint at step \([0-9]*\).*/\1/p' "$T/cut/train.log")
	[ -n "$at" ] || fail "SIGTERM: no checkpoint logged"
	# 24 keys at batch 4: 6 steps an epoch; the test wants a stop inside one
	[ $((at % 6)) -eq 0 ] || [ $((at % 4)) -eq 0 ] || break
done
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" - "$T/cut/checkpoint.cdpt" "$at" <<'PYEOF' ||
import sys
from cdpool.checkpoint import load_checkpoint
ck = load_checkpoint(sys.argv[1])
at = int(sys.argv[2])
assert ck.version == 8 and ck.step == at, (ck.version, ck.step)
assert ck.sums["epoch_steps"] == at % 6 and ck.sums["log_steps"] == at % 4, ck.sums
PYEOF
	fail "Python: the checkpoint's SUMS are not those of step $at"
cdp-train $E --out "$T/cut" --resume || fail "the resumed run failed"
epochs "$T/whole/metrics.jsonl" >"$T/e1"
epochs "$T/cut/metrics.jsonl" >"$T/e2"
[ "$(wc -l <"$T/e1")" -eq 10 ] || fail "want 10 epoch lines, got $(wc -l <"$T/e1")"
cmp -s "$T/e1" "$T/e2" || fail "stopped at step $at: epoch lines differ: $(diff "$T/e1" "$T/e2" | head -4)"
losses "$T/whole/metrics.jsonl" >"$T/l1"
losses "$T/cut/metrics.jsonl" >"$T/l2"
cmp -s "$T/l1" "$T/l2" || fail "stopped at step $at: step lines differ: $(diff "$T/l1" "$T/l2" | head -4)"
echo "stopped at step $at (epoch step $((at % 6)), log step $((at % 4))): 10 epoch and 15 step lines equal"

echo "== the pool truncated under the run"
# trunc NAME LAUNCHER...: truncate a copy of the pool after step 3
trunc() {
	name=$1; shift
	rm -rf "$T/tp" "$T/$name"
	cp -r "$T/pool" "$T/tp"
	"$@" cdp-train --db "$T/tp" --keys "$T/train.keys" --model "$SMALL" --threads 2 -q --batch 2 \
		--out "$T/$name" --steps 100000 --log-every 1 $V >"$T/out" 2>"$T/err" &
	pid=$!
	wait_step $pid "$T/$name/metrics.jsonl" 3 60
	truncate -s 65536 "$T/tp/data.mdb"
	set +e; wait $pid; rc=$?; set -e
	[ "$rc" -eq 1 ] || fail "$name: exit $rc, want 1: $(cat "$T/err")"
	grep -q "^cdp-train: \(rank [01]: \)\?'$T/tp': data.mdb shrank to 65536 bytes while training (record '[^']*' ends at byte [0-9]*): the pool changed under the run\$" "$T/err" ||
		fail "$name: no line naming the pool's change: $(cat "$T/err")"
	at=$(sed -n "s|^cdp-train: training stopped at step \([0-9]*\), checkpoint written to '$T/$name/checkpoint.cdpt'\$|\1|p" "$T/err")
	[ -n "$at" ] || fail "$name: no checkpoint said: $(cat "$T/err")"
	[ "$(losses "$T/$name/metrics.jsonl" | tail -1 | cut -d' ' -f1)" = "$at" ] ||
		fail "$name: the last step line is not step $at"
	PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" -c "
import sys
from cdpool.checkpoint import load_checkpoint
sys.exit(load_checkpoint(sys.argv[1]).step != int(sys.argv[2]))" "$T/$name/checkpoint.cdpt" "$at" ||
		fail "$name: the checkpoint is not a valid one of step $at"
	echo "$name: stopped at step $at with its checkpoint: $(grep "shrank" "$T/err")"
}
V=
trunc trunc1
# validating every step: the change may be found by either loader
V="--val-keys $T/val.keys --val-every 1"
trunc trunc1v
V=
if [ -n "$MP" ]; then
	trunc trunc2 $MP
else
	echo "SKIP: 2 ranks (no MPIRUN)"
fi

echo "== the run's end: complete, past it, another key list, a stop on a due validation"
# norm FILE: metrics.jsonl without timings and resume lines, for comparing
norm() {
	grep -v '"type":"resume"' "$1" | sed 's/"seconds":[^,}]*//; s/"samples_per_s":[^,]*//;
		s/"data_wait_s":[^,]*//; s/"allreduce_s":[^,]*//; s/"grad_[a-z_]*":[^,]*//g;
		s/"rss_anon_kb":\[[^]]*\]//'
}
K="$C --val-keys $T/val.keys --keep-best miou --schedule constant"
cdp-train $K --out "$T/end" --epochs 2 || fail "the 2-epoch run failed"
cp "$T/end/metrics.jsonl" "$T/end.m"; cp "$T/end/checkpoint.cdpt" "$T/end.c"; cp "$T/end/train.log" "$T/end.l"
# the same run again: nothing to do, nothing written (before: a second
# val line at step 12, which --patience then counted)
cdp-train $K --out "$T/end" --epochs 2 --resume 2>"$T/err" || fail "resuming a complete run: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-train: '$T/end' is complete: step 12 of 12, nothing to do" ] ||
	fail "a complete run's resume said: $(cat "$T/err")"
cmp -s "$T/end/metrics.jsonl" "$T/end.m" && cmp -s "$T/end/checkpoint.cdpt" "$T/end.c" &&
	cmp -s "$T/end/train.log" "$T/end.l" && [ ! -e "$T/end/.lock" ] ||
	fail "resuming a complete run changed its files"
expect_fail 1 "^cdp-train: '$T/end/checkpoint.cdpt': at step 12, past this run's last step 6 " \
	cdp-train $K --out "$T/end" --epochs 1 --resume
cmp -s "$T/end/metrics.jsonl" "$T/end.m" || fail "the refused resume changed metrics.jsonl"
# another pointer file: refused naming both (before: trained on, or a
# message about the global batch)
"$PYTHON" - "$T/train.keys" "$T/k20.keys" <<'PYEOF'
import sys, zlib
lines = open(sys.argv[1]).read().split("\n")
head, keys = lines[0].split(), [k for k in lines[1:] if k][:20]
body = "".join(k + "\n" for k in keys)
f = dict(x.split("=") for x in head[2:])
open(sys.argv[2], "w").write("#cdpool-keys 1 uuid=%s seed=0 count=20 crc32=%08x\n%s"
                             % (f["uuid"], zlib.crc32(body.encode()), body))
PYEOF
expect_fail 1 "^cdp-train: '$T/k20.keys': not the key list the checkpoint in '$T/end' was trained on (uuid [0-9a-f]*, seed 1, 24 keys, crc32 [0-9a-f]*; this one uuid [0-9a-f]*, seed 0, 20 keys, crc32 [0-9a-f]*)\$" \
	cdp-train $(echo "$K" | sed "s|--keys [^ ]*|--keys $T/k20.keys|") --out "$T/end" --epochs 4 --resume
# a stop on an epoch's last step, where a validation is due: the resumed
# run makes it first, so metrics.jsonl and best.cdpt equal the
# uninterrupted run's (before: that validation was lost for good)
cdp-train $K --out "$T/whole4" --epochs 4 --log-every 1 || fail "the 4-epoch run failed"
set +e; CDP_TRAIN_STOP_AT=12 cdp-train $K --out "$T/cut4" --epochs 4 --log-every 1 2>"$T/err"; rc=$?; set -e
[ "$rc" -eq 1 ] && grep -q "interrupted at step 12," "$T/err" || fail "CDP_TRAIN_STOP_AT=12: exit $rc: $(cat "$T/err")"
grep -q '"type":"val","step":12,' "$T/cut4/metrics.jsonl" && fail "the stopped run validated at step 12"
cdp-train $K --out "$T/cut4" --epochs 4 --log-every 1 --resume || fail "resuming the stop at step 12 failed"
norm "$T/whole4/metrics.jsonl" >"$T/mt1"; norm "$T/cut4/metrics.jsonl" >"$T/mt2"
cmp -s "$T/mt1" "$T/mt2" || fail "stopped at step 12: metrics.jsonl differs: $(diff "$T/mt1" "$T/mt2" | head -4)"
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" "$CDP_SRCDIR/tests/train/emastop.py" \
	same "$T/whole4/best.cdpt" "$T/cut4/best.cdpt" ||
	fail "stopped at step 12: best.cdpt differs"
# --steps ending off the --log-every grid, resumed: the step lines of the
# uninterrupted run (before: an extra line at step 6, and the next one
# averaged steps 7 and 8 only)
cdp-train $C --out "$T/s1" --epochs 2 --log-every 4 --schedule constant || fail "2 epochs failed"
cdp-train $C --out "$T/s2" --epochs 2 --steps 6 --log-every 4 --schedule constant || fail "--steps 6 failed"
cdp-train $C --out "$T/s2" --epochs 2 --log-every 4 --schedule constant --resume || fail "resuming --steps 6 failed"
losses "$T/s1/metrics.jsonl" >"$T/l1"; losses "$T/s2/metrics.jsonl" >"$T/l2"
cmp -s "$T/l1" "$T/l2" || fail "--steps 6 resumed: step lines differ: $(diff "$T/l1" "$T/l2" | head -4)"
# --keep-best first given on a resume writes best.cdpt (before: never,
# unless a validation beat the earlier val lines)
cdp-train $C --val-keys "$T/val.keys" --out "$T/kb" --epochs 1 || fail "1 epoch failed"
cdp-train $C --val-keys "$T/val.keys" --out "$T/kb" --epochs 2 --keep-best loss --resume ||
	fail "--keep-best on a resume failed"
[ -s "$T/kb/best.cdpt" ] || fail "--keep-best given on a resume wrote no best.cdpt"
# best.cdpt records the metric that kept it (BEST, cdp-checkpoint(5)).
# best RUNDIR METRIC: best.cdpt's BEST names METRIC, best.cdpt's own step
# and the value of METRIC's key on that step's val line; prints the step.
# (before: no record, so a resume with another --keep-best took the old
# file, kept by another metric, for the best so far)
best() {
	PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" - "$1" "$2" <<'PYEOF'
import json, sys
from cdpool.checkpoint import load_checkpoint
ck = load_checkpoint(sys.argv[1] + "/best.cdpt")
key = {"acc": "accuracy", "f1": "micro_f1"}.get(sys.argv[2], sys.argv[2])
vals = {}
for line in open(sys.argv[1] + "/metrics.jsonl"):
    v = json.loads(line)
    if v["type"] == "val":
        vals[v["step"]] = v[key]
b = ck.best
assert b is not None and b["metric"] == sys.argv[2] and b["step"] == ck.step and \
    b["value"] == vals[ck.step], (b, ck.step, vals)
print(ck.step)
PYEOF
}
# val loss through 6 steps at a learning rate that makes it rise again
KB="$C --val-keys $T/val.keys --val-every 1 --lr 0.5 --schedule constant"
cdp-train $KB --out "$T/bl" --steps 6 --keep-best loss 2>"$T/err" || fail "--keep-best loss: $(cat "$T/err")"
first=$(best "$T/bl" loss) || fail "best.cdpt's BEST is not the lowest validation loss's"
cp -R "$T/bl" "$T/bm"
cp -R "$T/bl" "$T/bo"
cp "$T/bl/best.cdpt" "$T/bl.best"
# the same metric: no warning, and at a learning rate that makes every
# later validation worse, best.cdpt stays
cdp-train $KB --out "$T/bl" --steps 9 --lr 20 --keep-best loss --resume 2>"$T/err" ||
	fail "resuming with --keep-best loss: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-train: warning: resume: the command line changes the checkpoint's optimizer settings: --lr 20 (the checkpoint's 0.5)" ] ||
	fail "resuming with the same --keep-best (and --lr 20) said: $(cat "$T/err")"
cmp -s "$T/bl/best.cdpt" "$T/bl.best" || fail "a worse validation replaced best.cdpt (loss)"
# another metric: one warning, and the first validation writes best.cdpt
cdp-train $KB --out "$T/bm" --steps 8 --keep-best miou --resume 2>"$T/err" ||
	fail "resuming with --keep-best miou: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-train: warning: best.cdpt was kept by loss; --keep-best miou keeps it anew from the next validation" ] ||
	fail "resuming with another --keep-best said: $(cat "$T/err")"
[ "$(grep -c 'best.cdpt was kept by loss; --keep-best miou keeps it anew' "$T/bm/train.log")" -eq 1 ] ||
	fail "train.log does not say once that best.cdpt is kept anew"
grep -q "best checkpoint at step 7: $T/bm/best.cdpt" "$T/bm/train.log" ||
	fail "the first validation after the resume did not write best.cdpt: $(grep best "$T/bm/train.log")"
at=$(best "$T/bm" miou) && [ "$at" -ge 7 ] || fail "best.cdpt's BEST after the resume: step ${at:-none}"
# a best.cdpt without BEST (an older cdp-train's): taken for this metric's,
# as before, so no warning
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" - "$T/bo/best.cdpt" <<'PYEOF' ||
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
n, o, body = struct.unpack_from("<I", b, 12)[0], 24, b""
for _ in range(n):
    tag, flags, size = struct.unpack_from("<4sIQ", b, o)
    if tag != b"BEST":
        body += b[o:o + 16 + size]
    o += 16 + size
h = b[:12] + struct.pack("<IQ", n - 1, 24 + len(body) + 4) + body
open(sys.argv[1], "wb").write(h + struct.pack("<I", zlib.crc32(h)))
PYEOF
	fail "cannot take BEST out of best.cdpt"
cdp-train $KB --out "$T/bo" --steps 8 --keep-best miou --resume 2>"$T/err" ||
	fail "resuming from a best.cdpt without BEST: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "a best.cdpt without BEST: $(cat "$T/err")"
# a longer cosine run from a checkpoint: one warning line
cdp-train $C --out "$T/cos" --steps 4 --schedule cosine || fail "4 cosine steps failed"
cdp-train $C --out "$T/cos" --steps 8 --schedule cosine --resume 2>"$T/err" || fail "resume to 8 failed"
[ "$(cat "$T/err")" = "cdp-train: warning: this run ends at step 8, the checkpoint's at step 4: the cosine learning-rate schedule is re-planned over 8 steps" ] ||
	fail "a longer cosine run said: $(cat "$T/err")"
echo "complete, past the end, another key list, a stop at step 12, --steps 6, --keep-best (best.cdpt $first, kept anew at $at), cosine: as documented"

echo "== --resume continues with the checkpoint's optimizer settings"
# none given again: the checkpoint's rate, momentum, weight decay, warm-up
# and loss scale, bit for bit as uninterrupted (before: the defaults, lr
# 0.05 and no loss scale from the resume on, silently); one given that
# differs is taken and said
O="--lr 0.01 --momentum 0.5 --warmup 15 --weight-decay 0.001 --loss-scale 1024"
cdp-train $C $O --out "$T/op1" --steps 12 || fail "the run of $O failed"
set +e; CDP_TRAIN_STOP_AT=6 cdp-train $C $O --out "$T/op2" --steps 12 --progress 2>"$T/err"; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "CDP_TRAIN_STOP_AT=6: exit $rc: $(cat "$T/err")"
# the progress line of an interrupted run claims no ", done" (it did, on
# the line before "interrupted at step 6")
grep -q "interrupted at step 6," "$T/err" && ! grep -q ", done" "$T/err" ||
	fail "CDP_TRAIN_STOP_AT=6 --progress: $(cat "$T/err")"
cp -R "$T/op2" "$T/op3"
cdp-train $C --out "$T/op2" --steps 12 --resume 2>"$T/err" || fail "the resume without $O failed"
[ ! -s "$T/err" ] || fail "the resume without the options said: $(cat "$T/err")"
cmp -s "$T/op1/checkpoint.cdpt" "$T/op2/checkpoint.cdpt" ||
	fail "resumed without $O, the checkpoint differs from the uninterrupted run's"
cdp-train $C --out "$T/op3" --steps 12 --resume --lr 0.02 --momentum 0.5 --loss-scale off 2>"$T/err" ||
	fail "the resume with --lr 0.02 failed"
[ "$(cat "$T/err")" = "cdp-train: warning: resume: the command line changes the checkpoint's optimizer settings: --lr 0.02 (the checkpoint's 0.01), --loss-scale off (the checkpoint's on)" ] ||
	fail "a resume with another --lr said: $(cat "$T/err")"
grep -q "optimizer sgd: lr 0.02, momentum 0.5, weight decay 0.001; schedule constant, warm-up 15 steps" "$T/op3/train.log" ||
	fail "the resume with --lr 0.02 did not keep the rest: $(grep 'optimizer sgd' "$T/op3/train.log" | tail -1)"
echo "resumed bit for bit without the options; --lr and --loss-scale given: taken and said"

echo "== --resume with another --threads or --val-keys: warned"
# the checkpoint's RUN chunk records the threads, kernels and validation
# list (before: each changed silently)
C2=$(printf '%s\n' "$C" | sed 's/--threads 1/--threads 2/')
cdp-train $C --val-keys "$T/val.keys" --out "$T/th" --steps 2 || fail "the 1-thread run failed"
kern=$(sed -n 's/.*device cpu, 1 thread, precision fp32 (kernels \([^)]*\)).*/\1/p' "$T/th/train.log")
[ -n "$kern" ] || fail "train.log names no kernels: $(grep device "$T/th/train.log")"
cdp-train $C --val-keys "$T/val.keys" --out "$T/th" --steps 3 --resume 2>"$T/err" ||
	fail "the same threads: resume failed"
[ ! -s "$T/err" ] || fail "a resume with the same threads and list said: $(cat "$T/err")"
cdp-train $C2 --val-keys "$T/val.keys" --out "$T/th" --steps 4 --resume 2>"$T/err" ||
	fail "--threads 2: resume failed"
[ "$(cat "$T/err")" = "cdp-train: warning: resume: this run computes with 2 threads and the $kern kernels, the checkpoint's run with 1 thread and the $kern kernels (--threads, CDP_CPU_ISA): the losses will not equal an uninterrupted run's bit for bit" ] ||
	fail "a resume with --threads 2 said: $(cat "$T/err")"
grep -q "resume: this run computes with 2 threads" "$T/th/train.log" || fail "train.log lacks the threads warning"
cdp-train $C2 --val-keys "$T/train.keys" --out "$T/th" --steps 5 --resume 2>"$T/err" ||
	fail "another --val-keys: resume failed"
grep -q "^cdp-train: warning: resume: '$T/train.keys' is not the validation list of the checkpoint's run (uuid [0-9a-f]*, seed 1, [0-9]* keys, crc32 [0-9a-f]*; this one uuid [0-9a-f]*, seed 1, [0-9]* keys, crc32 [0-9a-f]*): --keep-best and --patience compare its scores with the other list's\$" "$T/err" ||
	fail "a resume with another --val-keys said: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "another --val-keys: $(cat "$T/err")"
echo "another --threads and another --val-keys warned; the same ones silent"

echo "== --resume with --model: the same model however spelled, another named"
# overrides in another order and a variable's default spelled out build
# the checkpoint's model: resumed, with the checkpoint's text and overrides
# kept (before: refused as differing, saying nothing of how)
cdp-train $C --model "$SMALL:width=4,depth=2" --out "$T/mo" --steps 2 || fail "the run of width=4,depth=2 failed"
cdp-train $C --model "$SMALL:depth=2,width=4" --out "$T/mo" --steps 3 --resume ||
	fail "resuming with the overrides in another order failed"
cdp-train $C --model "$SMALL:depth=2,width=4,outputs=2" --out "$T/mo" --steps 4 --resume ||
	fail "resuming with a variable's default spelled out failed"
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" -c "
import sys
from cdpool.checkpoint import load_checkpoint
ck = load_checkpoint(sys.argv[1])
sys.exit(ck.step != 4 or ck.overrides != ['width=4', 'depth=2'])" "$T/mo/checkpoint.cdpt" ||
	fail "the resumed runs did not keep the checkpoint's overrides"
expect_fail 1 "^cdp-train: --model '$SMALL' differs from the model of the checkpoint in '$T/mo': section 2 \[conv\] sets filters=8, the checkpoint's 4 (leave --model out to resume with the checkpoint's)\$" \
	cdp-train $C --model "$SMALL:width=8,depth=2" --out "$T/mo" --steps 5 --resume
expect_fail 1 "differs from the model of the checkpoint in '$T/mo': it has 5 sections, the checkpoint's 4 " \
	cdp-train $C --model "$SMALL:depth=3" --out "$T/mo" --steps 5 --resume
echo "the same model in other words resumes; another is refused naming the first difference"

echo "== SIGHUP and SIGUSR1 stop the run as SIGTERM does"
for sig in HUP USR1; do
	rm -rf "$T/sig$sig"
	cdp-train $C --out "$T/sig$sig" --steps 100000 --log-every 1 2>"$T/err" &
	pid=$!
	wait_step $pid "$T/sig$sig/metrics.jsonl" 2 60
	kill -$sig $pid
	set +e; wait $pid; rc=$?; set -e
	[ "$rc" -eq 1 ] || fail "SIG$sig: exit $rc, want 1: $(cat "$T/err")"
	grep -q "^cdp-train: interrupted at step [0-9]*, checkpoint written to '$T/sig$sig/checkpoint.cdpt'\$" "$T/err" ||
		fail "SIG$sig: no checkpoint said: $(cat "$T/err")"
	[ ! -e "$T/sig$sig/.lock" ] || fail "SIG$sig left .lock"
done
echo "SIGHUP and SIGUSR1: checkpoint written, .lock removed, exit 1"
