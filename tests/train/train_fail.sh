#!/bin/sh
# cdp-train's failure modes (train_common.sh builds the pool):
#  - bad pointer files (another pool's, a key the pool lacks, truncated, a
#    damaged checksum, a key on two lines) and a model whose head does not fit the labels are
#    errors naming the problem before training: exit 1, no metrics.jsonl;
#  - no output (the log, metrics.jsonl) may be an input (the model cfg,
#    the pointer file through a symlink);
#  - a checkpoint holding a NaN or infinity is refused on resume, naming
#    the tensor; a NaN loss stops the run naming the step, keeping the last
#    checkpoint, exit 1 (--nan-policy skip: logged, 100 in a row stop it;
#    stopped and resumed, at the uninterrupted run's step, the policy and
#    the count in a row the checkpoint's (RUN)); so does a batchnorm
#    running variance that overflows under a finite loss, naming the
#    buffer (skip undoes the step, statistics too); an AdamW moment that
#    overflows is named at the checkpoint write, with what the run keeps;
#  - a resume with another global batch than the checkpoint's is refused,
#    both named; one that adds --pad-last to a run without it, naming it
#    (a checkpoint without RUN: past the first epoch), and one without it
#    takes the checkpoint's; with accumulate=2 --pad-last makes whole steps
#    of the doubled global batch, reading every key each epoch, and a run
#    stopped inside an epoch resumes to the uninterrupted one's checkpoint;
#  - a pool with a constant band (std 0) trains, resumes and predicts; a
#    run whose checkpoint could not be written is refused before step 1;
#  - usage errors exit 2 (--min-delta without --patience, malformed
#    --class-weights, nesterov without momentum, sgd's options with adamw,
#    RHO beyond 1e6); a GPU that does not exist is a clear error;
#    --keep-best f1 or map on a single-label pool is refused; a cosine
#    warm-up longer than the run is cut to it and train.log says so;
#  - a meta whose label ignore value is not the records' is refused (by
#    PoolDataset too); a head larger than the labels is advised a size that
#    keeps the ignore id a class;
#  - a corrupt record stops the run naming its key; --skip-bad-records
#    counts and skips it instead;
#  - under 2 ranks: another model cfg or training setting on one rank is
#    refused before step 1, and so is another option of those every rank
#    must share (--seed, --pad-last, --steps, --sync, --allreduce,
#    --grad-compress, --val-keys or --resume on one rank only, ...), named
#    with both values before anything is made; a corrupt record brings the whole job down naming the
#    rank and the key, and kill -9 of one rank ends the job non-zero, each
#    within 30 s; a refusal every rank finds alike (--pad-last added on
#    resume) is said once, by rank 0. (Skipped when $MPIRUN is empty.)
. "$CDP_SRCDIR/tests/train/train_common.sh"
C0="--model $SMALL --out $T/run --threads 1 -q"
C="$C0 --steps 3"

echo "== bad pointer files"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" "$T/o.tif" --size 128 --seed 9 \
	--mask "$T/o_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/o.tif" | cdp-lmdbpack -q "$T/other"
cdp-keyshuffle -q -o "$T/other.keys" "$T/other"
head -c 200 "$T/train.keys" >"$T/trunc.keys"
"$PYTHON" - "$T/train.keys" "$T/missing.keys" "$T/crc.keys" "$T/dup.keys" <<'PYEOF'
import sys, zlib, re
lines = open(sys.argv[1]).read().split("\n")[:-1]
head, keys = lines[0], lines[1:]
def write(path, keys, crc=None):
    body = "".join(k + "\n" for k in keys).encode()
    h = re.sub(r"count=\d+", "count=%d" % len(keys), head)
    h = re.sub(r"crc32=[0-9a-f]+", "crc32=%08x" % (crc if crc is not None else zlib.crc32(body)), h)
    open(path, "wb").write(h.encode() + b"\n" + body)
write(sys.argv[2], keys[:-1] + ["c3_9_9"])
write(sys.argv[3], keys, crc=zlib.crc32(b"x"))
write(sys.argv[4], keys[:15] + [keys[1]] + keys[15:])
PYEOF
check_bad() {
	expect_fail 1 "$2" cdp-train --db "$T/pool" --keys "$T/$1" $C
	[ ! -e "$T/run/metrics.jsonl" ] || fail "$1: training started (metrics.jsonl written)"
	echo "$1: $(cat "$T/err")"
}
check_bad other.keys "'.*other.keys': made for pool"
check_bad missing.keys "c3_9_9"
check_bad trunc.keys "'.*trunc.keys': line [0-9]*: truncated"
check_bad crc.keys "'.*crc.keys'.*checksum"
check_bad dup.keys "^cdp-train: '.*dup.keys': key '$(sed -n 3p "$T/train.keys")' on lines 3 and 17\$"
expect_fail 1 "segmentation head" cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/run" \
	--model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg" -q
expect_fail 1 "cannot open '$T/nopool'" cdp-train --db "$T/nopool" --keys "$T/train.keys" $C
# a meta whose ignore value is not its records' (CRC fixed up): training
# would mask another value than the tiles' (cdp-train and PoolDataset refuse)
cp -r "$T/pool" "$T/ign"
"$PYTHON" - "$T/ign" <<'PYEOF'
import sys, zlib, lmdb
env = lmdb.open(sys.argv[1], max_dbs=2)
with env.begin(write=True) as txn:
    meta = env.open_db(b"meta", txn=txn)
    t = bytes(txn.get(b"shape", db=meta))[:-15].decode()
    assert "ignore=255\n" in t, t
    b = t.replace("ignore=255\n", "ignore=0\n").encode()
    txn.put(b"shape", b + b"crc32=%08x\n" % zlib.crc32(b), db=meta)
PYEOF
expect_fail 1 "^cdp-train: '$T/ign': record '.*' has the label ignore value 255, the pool's meta says 0\$" \
	cdp-train --db "$T/ign" --keys "$T/train.keys" $C
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" - "$T/ign" "$T/train.keys" <<'PYEOF' ||
import sys
from cdpool import CdpError
from cdpool.data import PoolDataset
try:
    PoolDataset(sys.argv[1], sys.argv[2])[0]
except CdpError as e:
    # cdp-train's words (the Pool checks each record as its loader does)
    assert "has the label ignore value 255, the pool's meta says 0" in str(e), e
else:
    sys.exit("PoolDataset read a record of another ignore value than the meta's")
PYEOF
	fail "PoolDataset on a meta of another ignore value"
expect_fail 1 "^cdp-train: CDP_DIST_HEARTBEAT: 'soon': " env CDP_DIST_HEARTBEAT=soon \
	cdp-train --db "$T/pool" --keys "$T/train.keys" $C

echo "== outputs that are inputs"
cp "$SMALL" "$T/m.cfg"
expect_fail 1 "^cdp-train: refusing to write '$T/m.cfg': it is the --model cfg '$T/m.cfg'\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$T/m.cfg" --out "$T/r1" \
	--log "$T/m.cfg" --threads 1 -q --steps 1
cmp -s "$T/m.cfg" "$SMALL" || fail "--log appended to the model cfg"
cp "$T/train.keys" "$T/keys.orig"
mkdir "$T/r2"
ln -s ../train.keys "$T/r2/metrics.jsonl"
# a link at a run file's name is a run of its own (rundir.sh); with
# --overwrite, which would remove the link, it is still refused as the
# input it names, before anything is removed
expect_fail 1 "'$T/r2' holds a run without a checkpoint (metrics.jsonl)" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/r2" --threads 1 -q --steps 1
expect_fail 1 "refusing to write '$T/r2/metrics.jsonl': it is the --keys file '$T/train.keys'" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/r2" --threads 1 -q \
	--steps 1 --overwrite
[ -L "$T/r2/metrics.jsonl" ] || fail "a refused --overwrite removed the link"
cmp -s "$T/train.keys" "$T/keys.orig" || fail "metrics.jsonl replaced the pointer file"

echo "== non-finite numbers"
# a NaN weight (or an infinite moment) under a valid CRC is refused on
# resume, naming the file and the tensor
NAN="$CDP_SRCDIR/tests/train/ckpt_nan.py"
rm -rf "$T/nan"
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/nan" --threads 1 -q \
	--steps 3 || fail "training failed"
cp "$T/nan/checkpoint.cdpt" "$T/good.cdpt"
name=$("$PYTHON" "$NAN" "$T/good.cdpt" "$T/nan/checkpoint.cdpt")
expect_fail 1 "^cdp-train: cannot resume from '$T/nan/checkpoint.cdpt': parameter tensor '$name' holds NaN at element 0\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/nan" --threads 1 -q \
	--steps 6 --resume
"$PYTHON" "$NAN" "$T/good.cdpt" "$T/nan/checkpoint.cdpt" OPTM inf >/dev/null
expect_fail 1 "cannot resume from '$T/nan/checkpoint.cdpt': the optimizer's momentum holds +Inf at element 0\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/nan" --threads 1 -q \
	--steps 6 --resume
# a finite but huge weight: the forward pass overflows, the loss of step
# 4 is NaN, the run stops there naming the step, keeps the checkpoint of
# step 3 and exits 1 (before: it trained on "loss nan", exit 0)
"$PYTHON" "$NAN" "$T/good.cdpt" "$T/big.cdpt" PARM 3e38 >/dev/null
cp "$T/big.cdpt" "$T/nan/checkpoint.cdpt"
expect_fail 1 "^cdp-train: rank 0: step 4: the loss is -\?nan: training stopped (--nan-policy stop), '$T/nan/checkpoint.cdpt' keeps step 3\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/nan" --threads 1 -q \
	--steps 8 --resume --checkpoint-every 1
cmp -s "$T/big.cdpt" "$T/nan/checkpoint.cdpt" || fail "a NaN step replaced the checkpoint"
grep -q "step 4: the loss is -\?nan: training stopped" "$T/nan/train.log" ||
	fail "train.log does not say why the run stopped"
# --nan-policy skip: each such step is logged and skipped, the weights
# stay as they were, and 100 in a row end the run
expect_fail 1 "step 103: the loss is -\?nan: 100 steps in a row were not finite, training stopped, '$T/nan/checkpoint.cdpt' keeps step 102\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/nan" --threads 1 -q \
	--steps 200 --resume --checkpoint-every 1 --nan-policy skip
grep -q "step 4: the loss is -\?nan, update skipped (1 in a row, 1 in this run)" "$T/nan/train.log" ||
	fail "--nan-policy skip: the skipped step is not logged"
grep -q "resume: the command line changes the checkpoint's run settings: --nan-policy skip (the checkpoint's stop)" "$T/nan/train.log" ||
	fail "--nan-policy skip on a resume of a stop run: not said"
# stopped (as by SIGTERM) at step 50 and resumed without --nan-policy: the
# checkpoint's skip and its 47 in a row go on, so the job ends at step 103
# as the uninterrupted one above (before: --nan-policy stop at step 51;
# given skip again, at step 150)
rm -rf "$T/nan2"
mkdir "$T/nan2"
cp "$T/big.cdpt" "$T/nan2/checkpoint.cdpt"
set +e
CDP_TRAIN_STOP_AT=50 cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" \
	--out "$T/nan2" --threads 1 -q --steps 200 --resume --nan-policy skip 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "interrupted at step 50" "$T/err" || fail "stop at 50: exit $rc: $(cat "$T/err")"
expect_fail 1 "^cdp-train: rank 0: step 103: the loss is -\?nan: 100 steps in a row were not finite, training stopped, '$T/nan2/checkpoint.cdpt' keeps step 50\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/nan2" --threads 1 -q \
	--steps 200 --resume
grep -q "step 103: the loss is -\?nan, update skipped (100 in a row, 100 in this run)" "$T/nan2/train.log" ||
	fail "the resumed nan-skip run's count: $(grep 'update skipped' "$T/nan2/train.log" | tail -1)"
# a batch of huge activations (--lr 1e6) overflows a batchnorm running
# variance while the loss stays finite: the run stops at that step naming
# the buffer, the checkpoint of the step before stays (before: it trained
# on and failed at its next checkpoint write, keeping none of the steps
# since the last); the AdamW moment that overflows alike, found at the
# write, says what the run keeps
VAR="--db $T/pool --keys $T/train.keys --model $UNET --optimizer sgd --lr 1e6 --schedule constant --warmup 0 --batch 4 --threads 1 -q --checkpoint-every 1 --steps 8"
rm -rf "$T/var" "$T/var2"
expect_fail 1 "^cdp-train: rank 0: step [0-9]*: buffer tensor 'enc0.var' is inf at element [0-9]*: training stopped (--nan-policy stop), '$T/var/checkpoint.cdpt' keeps step [0-9]*\$" \
	cdp-train $VAR --out "$T/var"
s=$(sed -n 's/.*: step \([0-9]*\): buffer.*keeps step \([0-9]*\)$/\1 \2/p' "$T/err")
[ "${s% *}" -eq $((${s#* } + 1)) ] || fail "the buffer's step and the checkpoint kept: $(cat "$T/err")"
PYTHONPATH="$CDP_SRCDIR/python" "$PYTHON" -c 'import sys, cdpool
sys.exit(cdpool.load_checkpoint(sys.argv[1]).step != int(sys.argv[2]))' "$T/var/checkpoint.cdpt" "${s#* }" ||
	fail "the checkpoint kept is not that of step ${s#* }"
# skip: each such step is undone, its statistics too, and the run ends
# with a checkpoint a resume takes
cdp-train $VAR --out "$T/var2" --nan-policy skip || fail "--nan-policy skip on an infinite variance"
grep -q "step ${s% *}: buffer tensor 'enc0.var' is inf at element [0-9]*, update skipped (1 in a row, 1 in this run)" \
	"$T/var2/train.log" || fail "--nan-policy skip: the infinite variance's step is not logged"
cdp-train $VAR --out "$T/var2" --steps 9 --resume --nan-policy skip ||
	fail "the --nan-policy skip run's checkpoint does not resume"
rm -rf "$T/var"
expect_fail 1 "^cdp-train: rank 0: cannot write '$T/var/checkpoint.cdpt' at step [0-9]*: the optimizer's second moment holds +Inf at element [0-9]*: training stopped, '$T/var/checkpoint.cdpt' keeps step [0-9]*\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --optimizer adamw --lr 1e6 \
	--schedule constant --warmup 0 --batch 4 --threads 1 -q --checkpoint-every 1 --steps 8 --out "$T/var"
rm -rf "$T/var" "$T/var2"
expect_fail 2 "--nan-policy: 'ignore' is not" cdp-train --db "$T/pool" --keys "$T/train.keys" $C \
	--nan-policy ignore

echo "== resume with another global batch"
# the checkpoint records 4 x 1 rank; the data position counts in it, so
# --batch 2 (before: trained on, skipping nothing but misplaced) and
# --batch 8 (before: "start at step 6 of 3", exit 0) are refused
rm -rf "$T/gb"
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/gb" --threads 1 -q \
	--steps 3 --batch 4 || fail "training failed"
cp "$T/gb/checkpoint.cdpt" "$T/gb.cdpt"
for b in 2 8; do
	expect_fail 1 "^cdp-train: cannot resume '$T/gb/checkpoint.cdpt': it was trained with a global batch of 4 (4 x 1 rank), this run has $b ($b x 1 rank)\$" \
		cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/gb" --threads 1 -q \
		--steps 6 --batch $b --resume
	cmp -s "$T/gb.cdpt" "$T/gb/checkpoint.cdpt" || fail "--batch $b: the refused resume wrote"
done
# a position past the epoch's end (another pointer file's, or damage): said
# so, not "not a whole number of steps" of a position that is one
"$CDP_BUILDDIR/tests/engine/ckpt_edit" -p 1152921504606846976 "$T/gb.cdpt" "$T/gb/checkpoint.cdpt" ||
	fail "ckpt_edit -p"
expect_fail 1 "^cdp-train: the checkpoint in '$T/gb' stopped after 1152921504606846976 samples of epoch 0, past the end of an epoch of [0-9]* steps of 4 " \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/gb" --threads 1 -q --steps 6 \
	--batch 4 --resume
cp "$T/gb.cdpt" "$T/gb/checkpoint.cdpt"
cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/gb" --threads 1 -q --steps 6 \
	--batch 4 --resume || fail "the same global batch: resume failed"
# --pad-last added (24 keys of batch 5: 4 steps an epoch, 5 padded):
# refused naming --pad-last, within the first epoch too (before: taken,
# the epochs then ending elsewhere); a checkpoint without RUN (an older
# v8 file) past the first epoch as 32193b2 refused it; a run with
# --pad-last resumed without it takes the checkpoint's (before: its
# epochs ended at 4 steps from the resume on)
rm -rf "$T/pl"
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/pl" --threads 1 -q \
	--steps 3 --batch 5 || fail "training at batch 5 failed"
cp "$T/pl/checkpoint.cdpt" "$T/pl3.cdpt"
expect_fail 1 "^cdp-train: cannot resume '$T/pl/checkpoint.cdpt' with --pad-last: its run did not have it, and it changes where each epoch ends (resume without --pad-last)\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/pl" --threads 1 -q --steps 8 \
	--batch 5 --pad-last --resume
cmp -s "$T/pl3.cdpt" "$T/pl/checkpoint.cdpt" || fail "a refused --pad-last resume wrote"
cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/pl" --threads 1 -q --steps 6 \
	--batch 5 --resume || fail "resuming to step 6 failed"
"$PYTHON" "$CDP_SRCDIR/tests/train/ckpt_drop.py" "$T/pl/checkpoint.cdpt" "$T/pl/checkpoint.cdpt" RUN
expect_fail 1 "^cdp-train: the checkpoint in '$T/pl' is at step 6, 10 samples into epoch 1, where steps of 5 samples, 5 an epoch, do not lead (resume with the global batch it was trained with, --batch times ranks, and --pad-last as that run had it: this run gives --pad-last)\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/pl" --threads 1 -q --steps 8 \
	--batch 5 --pad-last --resume
rm -rf "$T/pp1" "$T/pp2"
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/pp1" --threads 1 -q \
	--steps 12 --batch 5 --pad-last || fail "the --pad-last run failed"
set +e
CDP_TRAIN_STOP_AT=3 cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" \
	--out "$T/pp2" --threads 1 -q --steps 12 --batch 5 --pad-last 2>/dev/null
set -e
cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/pp2" --threads 1 -q --steps 12 \
	--batch 5 --resume 2>"$T/err" || fail "resuming the --pad-last run without it: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "resuming the --pad-last run without it said: $(cat "$T/err")"
cmp -s "$T/pp1/checkpoint.cdpt" "$T/pp2/checkpoint.cdpt" ||
	fail "the --pad-last run resumed without it differs from the uninterrupted one"
# --pad-last with accumulate=2 at batch 5 (24 keys): steps of 10 samples,
# 3 an epoch, the last 6 filled from the order's start, as --batch 10
# without accumulation (before: 5 batches, cut to 2 steps, 4 keys never
# read); stopped at step 2 and resumed, epoch 1 ends where it would
rm -rf "$T/pa1" "$T/pa2"
CDP_TRAIN_LOG_KEYS="$T/pak" cdp-train --db "$T/pool" --keys "$T/train.keys" \
	--model "$SMALL:accumulate=2" --out "$T/pa1" --threads 1 -q --steps 6 --batch 5 --pad-last ||
	fail "the --pad-last run with accumulate=2 failed"
grep -q "start at step 0 of 6 (epoch 0, 3 steps per epoch), 1 rank, global batch 10" \
	"$T/pa1/train.log" || fail "accumulate=2 --pad-last: $(grep 'start at' "$T/pa1/train.log")"
[ "$(awk '$1 == 0 {print $3}' "$T/pak.0" | sort -u | wc -l)" -eq 24 ] &&
	[ "$(awk '$1 == 0' "$T/pak.0" | wc -l)" -eq 30 ] ||
	fail "accumulate=2 --pad-last: epoch 0 read $(awk '$1 == 0' "$T/pak.0" | wc -l) samples of $(awk '$1 == 0 {print $3}' "$T/pak.0" | sort -u | wc -l) keys, want 30 of 24"
set +e
CDP_TRAIN_STOP_AT=2 cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL:accumulate=2" \
	--out "$T/pa2" --threads 1 -q --steps 6 --batch 5 --pad-last 2>/dev/null
set -e
cdp-train --db "$T/pool" --keys "$T/train.keys" --out "$T/pa2" --threads 1 -q --steps 6 \
	--batch 5 --resume || fail "resuming the accumulate=2 --pad-last run failed"
cmp -s "$T/pa1/checkpoint.cdpt" "$T/pa2/checkpoint.cdpt" ||
	fail "the accumulate=2 --pad-last run resumed differs from the uninterrupted one"

echo "== a batchnorm over one value per channel"
# DeepLabV3+'s image-pooling branch normalizes 1x1 maps: at --batch 1 its
# batchnorm output beta whatever came in (it trained, learning nothing
# there); refused as PyTorch's BatchNorm refuses it, before any step, no
# RUNDIR left; --batch 2, or that layer frozen for the run, trains
DL="$CDP_SRCDIR/share/cdpool/models/deeplabv3plus-resnet18.cfg:in_h=64,in_w=64"
expect_fail 1 "^cdp-train: model '.*deeplabv3plus-resnet18.cfg': layer [0-9]* 'decoder.aspp.0.convs.4.2' (bn) normalizes 1 value per channel in training (--batch 1 of 1x1 maps): its statistics need more (a larger --batch or tile, bn_sync=1 over ranks, or --freeze it)\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$DL" --out "$T/bn1" --threads 1 -q \
	--steps 1 --batch 1
[ ! -e "$T/bn1" ] || fail "a run refused for its batchnorm left its RUNDIR"
# two values train, with a warning naming the first such layer (a
# ResNet's last stage on small tiles at --batch 2 had predicted NaN)
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$DL" --out "$T/bn2" --threads 1 -q \
	--steps 1 --batch 2 2>"$T/bn2.err" || fail "DeepLabV3+ at --batch 2: $(cat "$T/bn2.err")"
grep -q "^cdp-train: warning: model '.*deeplabv3plus-resnet18.cfg': layer [0-9]* '[^']*' (bn) normalizes only [2-7] values per channel in training (--batch 2 of [0-9]*x[0-9]* maps)\(, and [0-9]* more layers*\)*: noisy statistics" "$T/bn2.err" ||
	fail "no warning for a batchnorm over 2 values: $(cat "$T/bn2.err")"
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$DL" --out "$T/bn3" --threads 1 -q \
	--steps 1 --batch 1 --freeze 'decoder.aspp.0.convs.4.*' || fail "its pooling branch frozen"

echo "== a constant band"
# std 0 means centred, not scaled, in the loader, the checkpoint and
# cdp-predict alike: the run saves its checkpoint (before: it trained to
# the end, then "cannot write ...: invalid argument", the run lost)
"$PYTHON" - "$T/c3.tif" "$T/k.tif" <<'PYEOF'
import sys
from osgeo import gdal
src = gdal.Open(sys.argv[1])
d = gdal.GetDriverByName("GTiff").CreateCopy(sys.argv[2], src)
for b in range(1, d.RasterCount + 1):
    d.GetRasterBand(b).Fill(100 if b == 1 else 50)
d = None
PYEOF
cp "$T/c3_mask.tif" "$T/k_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/k.tif" | cdp-lmdbpack -q "$T/kpool"
cdp-keyshuffle -q --seed 1 -o "$T/k.keys" "$T/kpool"
rm -rf "$T/k"
cdp-train --db "$T/kpool" --keys "$T/k.keys" --model "$SMALL" --out "$T/k" --threads 1 -q \
	--steps 3 2>"$T/err" || fail "a constant band: $(cat "$T/err")"
cdp-train --db "$T/kpool" --keys "$T/k.keys" --out "$T/k" --threads 1 -q --steps 5 --resume ||
	fail "a constant band: resume failed"
cdp-predict -q "$T/k" "$T/k.tif" -o "$T/k.pred.tif" || fail "a constant band: cdp-predict failed"
# what no checkpoint can hold is refused before step 1, not after the last
# (before: trained, then "cannot write ...: invalid argument")
long="lr=0.05$(printf '%04100d' 0)"
rm -rf "$T/k"
expect_fail 1 "^cdp-train: this run could not save its checkpoint '$T/k/checkpoint.cdpt' (from pool '$T/kpool'): model override 1 has 4107 bytes, at most 4096 are kept\$" \
	cdp-train --db "$T/kpool" --keys "$T/k.keys" --model "$SMALL:$long" --out "$T/k" --threads 1 \
	-q --steps 3
[ ! -e "$T/k" ] || fail "a run refused at start left its RUNDIR"

echo "== usage"
expect_fail 2 "missing --db" cdp-train --keys "$T/train.keys" --model x --out "$T/run"
expect_fail 2 "--sync: 'admm:3' is not allreduce" cdp-train --db "$T/pool" --keys "$T/train.keys" $C --sync admm:3
expect_fail 2 "--batch: '0' is not an integer in 1\.\." cdp-train --db "$T/pool" --keys "$T/train.keys" $C --batch 0
# settings the run would otherwise drop or misread, refused before any pool
# is opened (exit 2), as torch.optim refuses nesterov without momentum
expect_fail 2 "^cdp-train: --min-delta needs --patience\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" $C --min-delta 0
for cw in abc 1, 1,nan ,1 -1; do
	expect_fail 2 "^cdp-train: --class-weights: '$cw' is not auto or numbers >= 0 separated by commas" \
		cdp-train --db "$T/pool" --keys "$T/train.keys" $C --class-weights "$cw"
done
expect_fail 2 "^cdp-train: --nesterov needs a momentum above 0 (--momentum 0 given)\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" $C --optimizer sgd --nesterov --momentum 0
expect_fail 2 "^cdp-train: --momentum applies to --optimizer sgd, not adamw\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" $C --optimizer adamw --momentum 0.5
# the cfg's optimizer (small.cfg: sgd) made adamw by an override: refused
# in setup (exit 1), naming the model
expect_fail 1 "^cdp-train: --nesterov applies to sgd; the optimizer of model '.*' is adamw" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL:optimizer=adamw" \
	--out "$T/run" --threads 1 -q --steps 3 --nesterov
expect_fail 1 "^cdp-train: --keep-best f1: a multi-label pool's metric; '$T/pool' is not one (keep miou, loss or acc)\$" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --val-keys "$T/val.keys" $C --keep-best f1
expect_fail 1 "^cdp-train: --keep-best map: a multi-label pool's metric" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" --val-keys "$T/val.keys" $C --keep-best map \
	--patience 2
# a cosine warm-up longer than the run is cut to it, and train.log says so
rm -rf "$T/run"
cdp-train --db "$T/pool" --keys "$T/train.keys" $C --schedule cosine --warmup 50 --lr 0.01 \
	--log-every 1 || fail "cosine with a long warm-up failed"
grep -q "optimizer sgd: lr 0.01, .*; schedule cosine to 0 at step 3, warm-up 2 steps from 0.1 of the rate (50 asked, cut to the run: no cosine decay)\$" \
	"$T/run/train.log" || fail "train.log lacks the cut warm-up: $(grep optimizer "$T/run/train.log")"
rm -rf "$T/run"
expect_fail 2 "^cdp-train: --sync: 'admm:2:1e7' is not allreduce, average:K or admm:K:RHO (K 1 to 2147483647, RHO above 0 to 1e6)" \
	cdp-train --db "$T/pool" --keys "$T/train.keys" $C --sync admm:2:1e7
expect_fail 1 "device cuda:1023 does not exist" cdp-train --db "$T/pool" --keys "$T/train.keys" $C \
	--device cuda:1023
cdp-train --db "$T/pool" --keys "$T/train.keys" $C --device auto || fail "--device auto did not run on the cpu"

echo "== a corrupt record"
bad=$(sed -n 5p "$T/train.keys")
cp -r "$T/pool" "$T/bad"
"$PYTHON" - "$T/bad" "$bad" <<'PYEOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=4, subdir=True)
db = env.open_db(b"tiles")
with env.begin(write=True, db=db) as txn:
    v = bytearray(txn.get(sys.argv[2].encode()))
    v[200] ^= 0xFF
    txn.put(sys.argv[2].encode(), bytes(v))
PYEOF
rm -rf "$T/run"
expect_fail 1 "record '$bad'" cdp-train --db "$T/bad" --keys "$T/train.keys" $C0 --batch 4 --epochs 1
# one process has no peers: one line, no MPI_ABORT banner after it
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a corrupt record: stderr is not one line: $(cat "$T/err")"
rm -rf "$T/run"
cdp-train --db "$T/bad" --keys "$T/train.keys" $C0 --batch 4 --epochs 1 --skip-bad-records ||
	fail "--skip-bad-records did not skip"
grep -q '"skipped":[1-9]' "$T/run/metrics.jsonl" || fail "--skip-bad-records: nothing counted"

echo "== a head larger than the labels, the ignore id among them"
# labels 0 and the ignore id 1 under a head of 3: the advice counts the
# ignore id (before: "go up to 0: give classes=1", putting it out of range)
for s in 3 4; do
	"$PYTHON" "$GEN" "$T/g$s.tif" --size 64 --seed "$s" --mask "$T/g${s}_mask.tif"
	echo "$T/g$s.tif $T/g${s}_mask.tif"
done >"$T/ig.txt"
cdp-lmdbpack -q --ignore 1 --list "$T/ig.txt" "$T/ig"
cdp-keyshuffle -q --seed 1 -o "$T/ig.keys" "$T/ig"
rm -rf "$T/run"
cdp-train --db "$T/ig" --keys "$T/ig.keys" --model "$UNET,classes=3" --out "$T/run" --threads 1 -q \
	--steps 1 --batch 2 2>"$T/err" || fail "the head of 3 over ignore 1: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-train: warning: the model has 3 classes, the labels of '$T/ig' go up to 1 (meta 'classes'): give classes=2 (--model CFG:classes=2) unless the others are to come" ] ||
	fail "the head of 3 over ignore 1: $(cat "$T/err")"

if [ -z "$MP" ]; then
	echo "SKIP: MPI cases (no MPIRUN)"
	exit 0
fi

# within30 PATTERN CMD...: CMD exits non-zero within 30 s with PATTERN on stderr
within30() {
	pat=$1; shift
	t0=$(date +%s)
	set +e; timeout 60 "$@" >"$T/out" 2>"$T/err"; rc=$?; set -e
	t1=$(date +%s)
	[ "$rc" -ne 124 ] || fail "the job hung"
	[ "$rc" -ne 0 ] || fail "the job exited 0"
	[ $((t1 - t0)) -le 30 ] || fail "the job took $((t1 - t0)) s to end"
	grep -q -- "$pat" "$T/err" || fail "stderr lacks '$pat': $(cat "$T/err")"
	echo "exit $rc after $((t1 - t0)) s: $(grep -m1 -- "$pat" "$T/err")"
}
echo "== ranks given another model or training setting"
# rank 1 gets another width (the first all-reduce would fail on its
# parameter count) or another rate (the ranks would train apart): refused
# before step 1, naming the rank, both values, no RUNDIR left
cat >"$T/rk.sh" <<'EOF'
#!/bin/sh
# rk.sh ARG0 ARG1 CMD...: CMD with rank r's ARGr appended
a=$1 b=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" -eq 0 ]; then exec "$@" "$a"; else exec "$@" "$b"; fi
EOF
rm -rf "$T/run"
O="--db $T/pool --keys $T/train.keys --out $T/run --threads 1 -q --steps 2"
expect_fail 1 "^cdp-train: rank 1 on host '.*': the model cfg (with its overrides) is not rank 0's: crc32 [0-9a-f]*, [0-9]* parameters here, crc32 [0-9a-f]*, [0-9]* parameters there\$" \
	$MP sh "$T/rk.sh" --model="$SMALL" --model="$SMALL:width=6" cdp-train $O
[ ! -e "$T/run" ] || fail "a refused job left its RUNDIR"
# the options themselves, before anything is made (not when the run dies
# of them: another seed trained on the wrong samples silently, other
# --steps or --sync gave MPI_ERR_TRUNCATE, --allreduce a hang until the
# watchdog); an option given on one rank only is said so (-q on the other)
ropt() {
	expect_fail 1 "^cdp-train: rank 1 on host '.*': $1 is not rank 0's: $2 here, $3 there (every rank must be given the same options)\$" \
		$MP sh "$T/rk.sh" "$4" "$5" cdp-train $O --model "$SMALL" --batch 2
	[ ! -e "$T/run" ] || fail "a job refused for $1 left its RUNDIR"
	echo "$1: $(grep -o "rank 1 .*" "$T/err")"
}
ropt --lr 0.5 0.05 --lr=0.05 --lr=0.5
ropt --seed 5 1 -q --seed=5
ropt --pad-last given "not given" -q --pad-last
ropt --steps 3 2 -q --steps=3
ropt --val-every 3 2 "--val-every=2" "--val-every=3"
ropt --sync average:3 average:2 --sync=average:2 --sync=average:3
ropt --allreduce ring mpi --allreduce=mpi --allreduce=ring
ropt --grad-compress none bf16 --grad-compress=bf16 -q
ropt --val-keys "not given" given "--val-keys=$T/val.keys" -q
# --resume on some ranks only: rank 0 read the checkpoint for ranks that
# did not come (a wrong "pool ... is" and a hang), or rank 1 waited out
# the timeout; the run is left as it was
$MP cdp-train $O --model "$SMALL" --batch 2 || fail "2 ranks, 2 steps"
cp "$T/run/checkpoint.cdpt" "$T/ck.before"
mv "$T/run" "$T/run.kept"
ropt_kept() {
	mv "$T/run.kept" "$T/run"
	set +e; timeout 60 $MP sh "$T/rk.sh" "$1" "$2" cdp-train $O --model "$SMALL" --batch 2 \
		>"$T/out" 2>"$T/err"; rc=$?; set -e
	mv "$T/run" "$T/run.kept"
	[ "$rc" -eq 1 ] || fail "--resume $3: exited $rc, want 1: $(cat "$T/err")"
	grep -q "^cdp-train: rank 1 on host '.*': --resume is not rank 0's: $4 here, $5 there" "$T/err" ||
		fail "--resume $3: $(cat "$T/err")"
	cmp -s "$T/ck.before" "$T/run.kept/checkpoint.cdpt" || fail "--resume $3: the checkpoint changed"
	echo "--resume $3: $(grep -o "rank 1 .*" "$T/err")"
}
ropt_kept --resume -q "on rank 0 only" "not given" given
ropt_kept -q --resume "on rank 1 only" given "not given"
# rank 0's RUNDIR refused (it holds a run), rank 1's fresh, with --init:
# rank 1 went on to --init's broadcast while rank 0 waited to agree on the
# failure (a hang until the watchdog); every rank now ends at once
rm -rf "$T/fresh"
within30 "^cdp-train: rank 0: '$T/run.kept' holds a run" $MP sh "$T/rk.sh" \
	"--out=$T/run.kept" "--out=$T/fresh" cdp-train $O --model "$SMALL" --batch 2 \
	--init "$T/ck.before"
cmp -s "$T/ck.before" "$T/run.kept/checkpoint.cdpt" || fail "a refused RUNDIR: the checkpoint changed"
[ ! -e "$T/fresh" ] || fail "a job refused on rank 0 left rank 1's RUNDIR"
rm -rf "$T/run.kept"

echo "== a refusal every rank finds: said once"
# each rank refuses --pad-last added on resume alike: rank 0 says it,
# without a rank (before: one line per rank)
rm -rf "$T/run"
$MP cdp-train $O --model "$SMALL" --batch 2 || fail "2 ranks, 2 steps"
expect_fail 1 "^cdp-train: cannot resume '$T/run/checkpoint.cdpt' with --pad-last: its run did not have it" \
	$MP cdp-train $O --model "$SMALL" --batch 2 --steps 4 --pad-last --resume
[ "$(grep -c '^cdp-train' "$T/err")" -eq 1 ] || fail "--pad-last on 2 ranks: $(cat "$T/err")"

echo "== a rank fails"
rm -rf "$T/run"
within30 "cdp-train: rank [01]: .*record '$bad'" $MP cdp-train --db "$T/bad" --keys "$T/train.keys" \
	$C0 --batch 4 --epochs 1
echo "== kill -9 of a rank"
rm -rf "$T/run"
$MP cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$SMALL" --out "$T/run" \
	--steps 1000000 --threads 1 -q --log-every 1 >"$T/out" 2>"$T/err" &
job=$!
wait_step $job "$T/run/metrics.jsonl" 3 30
# the newest cdp-train child of this mpirun (one of its two ranks)
victim=$(pgrep -n -P $job cdp-train) || fail "kill -9: no rank of mpirun $job found"
t0=$(date +%s)
kill -9 "$victim"
( sleep 60; kill -9 $job 2>/dev/null ) &
wd=$!
set +e; wait $job; rc=$?; set -e
kill $wd 2>/dev/null || true
t1=$(date +%s)
[ "$rc" -ne 0 ] || fail "kill -9: the job exited 0"
[ $((t1 - t0)) -le 30 ] || fail "kill -9: the job took $((t1 - t0)) s to end"
echo "kill -9 of pid $victim: job exit $rc after $((t1 - t0)) s"
exit 0
