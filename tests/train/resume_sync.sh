#!/bin/sh
# tests/train/resume_sync.sh: exact --resume for --sync average:K and
# admm:K:RHO, and allreduce's batchnorm statistics, and SIGTERM under
# mpirun (train_common.sh builds the pool):
#  - mpirun -np 2 with average:5 and admm:5:0.01: 40 steps in one go against
#    17 steps (not a multiple of K; --checkpoint-every 7, not one either)
#    then --resume to 40 (--sync left out: the checkpoint's) : every step's
#    loss and every validation line equal bit for bit, and the resume prints
#    nothing (before: it switched to allreduce);
#  - allreduce on 2 ranks: the same 40 against 17 + resume, and a run
#    without validations or intermediate checkpoints: the same checkpoint
#    byte for byte (each rank's own batchnorm statistics are kept);
#  - the same checkpoint without its per-rank section, or resumed by one
#    process: one warning line, the run goes on from the consensus model,
#    and the losses after step 17 then differ (the section is what makes
#    the resume exact);
#  - an admm checkpoint resumed under --sync allreduce: one warning line
#    naming what is dropped (before: train.log only); under another RHO,
#    one naming both RHOs in the digits that tell them apart, as the start
#    line of train.log does (before: 6 digits, 0.01 for 0.01000001);
#  - --overlap, --no-overlap or --bucket-mb with --sync average/admm: a
#    usage error naming the option as typed, and an error on a resume that
#    takes admm from the checkpoint;
#  - a resume with another global batch (1 process x 4, 2 ranks x 2 after
#    2 ranks x 4) is refused naming both; 1 process x 8 resumes;
#  - a per-rank section damaged (its own CRC) or truncated inside an intact
#    file is a one-line error naming the file and the chunk, exit 1; on 2
#    ranks, which both decode it, said once, by rank 0 (before: per rank);
#  - SIGTERM to mpirun once steps are logged: the job exits non-zero within
#    30 s, leaving a valid checkpoint at the last logged step, and --resume
#    from it continues.
# Skipped without MPI ($MPIRUN empty).
. "$CDP_SRCDIR/tests/train/train_common.sh"
[ -n "$MP" ] || { echo "SKIP: no MPIRUN" >&2; exit 77; }
R="--db $T/pool --keys $T/train.keys --val-keys $T/val.keys --model $UNET --threads 1 -q"
R="$R --batch 4 --log-every 1 --val-every 10 --schedule constant --lr 0.01 --checkpoint-every 7"
# vals FILE: "step loss metric" of every validation line
vals() {
	sed -n 's/^{"type":"val","step":\([0-9]*\),.*"loss":\([^,]*\),"metric":\([^,]*\),.*/\1 \2 \3/p' "$1"
}
# ckpt FROM TO strip|flip|cut: a copy of checkpoint FROM without its RANK
# chunk (the rest as it was), with a bit of it flipped, or with 100 bytes cut from it (its own
# CRC and length redone); the file's size and CRC are always redone.
ckpt() {
	"$PYTHON" - "$@" <<'PYEOF'
import struct, sys, zlib
src, dst, mode = sys.argv[1:4]
b = bytearray(open(src, "rb").read())
pos, chunks = 24, {}
while pos < len(b) - 4:
    tag, _, n = struct.unpack_from("<4sIQ", b, pos)
    chunks[tag] = (pos, n)
    pos += 16 + n
assert b"RANK" in chunks, list(chunks)
pos, n = chunks[b"RANK"]
s = pos + 16
if mode == "strip":     # the optional chunks after it (SUMS) stay
    b = b[:pos] + b[s + n:]
    struct.pack_into("<I", b, 12, struct.unpack_from("<I", b, 12)[0] - 1)
elif mode == "flip":
    b[s + 200] ^= 1
else:
    body = b[s:s + n - 4 - 100]
    body += struct.pack("<I", zlib.crc32(body))
    b = b[:pos] + struct.pack("<4sIQ", b"RANK", 0, len(body)) + body + b[s + n:]
struct.pack_into("<Q", b, 16, len(b))
struct.pack_into("<I", b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
open(dst, "wb").write(b)
PYEOF
}
# ckstep FILE: the step of a checkpoint whose header and CRC are valid
ckstep() {
	"$PYTHON" - "$1" <<'PYEOF'
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
magic, version, nchunks, size = struct.unpack_from("<8sIIQ", b)
assert magic == b"CDPCKPT\n" and size == len(b), "bad header"
assert zlib.crc32(b[:-4]) == struct.unpack("<I", b[-4:])[0], "bad CRC"
assert b[24:28] == b"META"
print(struct.unpack_from("<Q", b, 56)[0])
PYEOF
}

for sync in average:5 admm:5:0.01; do
	echo "== $sync: 40 steps against 17 + resume"
	d=$T/$(echo "$sync" | tr : _)
	$MP cdp-train $R --sync "$sync" --out "$d.a" --steps 40 || fail "$sync: run a"
	$MP cdp-train $R --sync "$sync" --out "$d.b" --steps 17 || fail "$sync: run b"
	cp -r "$d.b" "$d.c"
	$MP cdp-train $R --out "$d.b" --steps 40 --resume 2>"$T/err" ||
		fail "$sync: resume: $(cat "$T/err")"
	[ ! -s "$T/err" ] || fail "$sync: the resume said: $(cat "$T/err")"
	losses "$d.a/metrics.jsonl" >"$T/la"
	losses "$d.b/metrics.jsonl" >"$T/lb"
	[ "$(wc -l <"$T/la")" -eq 40 ] || fail "$sync: $(wc -l <"$T/la") step lines"
	cmp -s "$T/la" "$T/lb" || fail "$sync: resumed losses differ: $(diff "$T/la" "$T/lb" | head -4)"
	vals "$d.a/metrics.jsonl" >"$T/va"
	vals "$d.b/metrics.jsonl" | grep -v '^17 ' >"$T/vb"
	[ "$(wc -l <"$T/va")" -eq 4 ] || fail "$sync: $(wc -l <"$T/va") validation lines"
	cmp -s "$T/va" "$T/vb" || fail "$sync: resumed validation differs: $(diff "$T/va" "$T/vb")"
	echo "$sync: 40 losses and 4 validations equal bit for bit after resuming at step 17"

	echo "== $sync: without the per-rank section"
	cp -r "$d.c" "$d.s"
	ckpt "$d.c/checkpoint.cdpt" "$d.s/checkpoint.cdpt" strip
	$MP cdp-train $R --sync "$sync" --out "$d.s" --steps 40 --resume 2>"$T/err" ||
		fail "$sync: resume without the section: $(cat "$T/err")"
	w="warning: '$d.s/checkpoint.cdpt' holds no per-rank state.*consensus"
	[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "$w" "$T/err" ||
		fail "$sync: want one warning line, got: $(cat "$T/err")"
	losses "$d.s/metrics.jsonl" >"$T/ls"
	[ "$(wc -l <"$T/ls")" -eq 40 ] || fail "$sync: $(wc -l <"$T/ls") step lines without the section"
	cmp -s "$T/la" "$T/ls" && fail "$sync: the same losses without the per-rank state"
	echo "$sync: without the section, a warning and other losses:" \
		"$(sed -n 18p "$T/la") vs $(sed -n 18p "$T/ls")"
done

echo "== allreduce: 40 steps against 17 + resume, and against no validation or checkpoint"
# each rank's batchnorm statistics move with its own batches; validating
# and checkpointing average them on a copy, and the per-rank section keeps
# each rank's own, so neither the checkpoints every 7 steps nor the resume
# changes a bit of the run (before: both rounded the statistics anew)
ad=$T/allreduce
$MP cdp-train $R --out "$ad.a" --steps 40 || fail "allreduce: run a"
$MP cdp-train $R --out "$ad.b" --steps 17 || fail "allreduce: run b"
$MP cdp-train $R --out "$ad.b" --steps 40 --resume 2>"$T/err" ||
	fail "allreduce: resume: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "allreduce: the resume said: $(cat "$T/err")"
vals "$ad.a/metrics.jsonl" >"$T/va"
vals "$ad.b/metrics.jsonl" | grep -v '^17 ' >"$T/vb"
[ "$(wc -l <"$T/va")" -eq 4 ] || fail "allreduce: $(wc -l <"$T/va") validation lines"
cmp -s "$T/va" "$T/vb" || fail "allreduce: resumed validation differs: $(diff "$T/va" "$T/vb")"
cmp -s "$ad.a/checkpoint.cdpt" "$ad.b/checkpoint.cdpt" || fail "allreduce: resumed checkpoint differs"
$MP cdp-train $(echo "$R" | sed 's/--val-keys [^ ]*//; s/--checkpoint-every 7/--checkpoint-every 40/') \
	--out "$ad.n" --steps 40 || fail "allreduce: run without validation"
# the model: all but RUN, which records the validation list ad.n lacks
for x in a n; do
	"$PYTHON" "$CDP_SRCDIR/tests/train/ckpt_drop.py" "$ad.$x/checkpoint.cdpt" "$T/model.$x" RUN
done
cmp -s "$T/model.a" "$T/model.n" ||
	fail "allreduce: validating and checkpointing every 7 steps changed the model"
echo "allreduce: 4 validations and the checkpoint equal bit for bit after resuming at step 17;" \
	"the same model without validations or checkpoints on the way"
# resumed by one process: train.log says so in words ("1 rank", not "1 ranks")
cp -r "$ad.a" "$ad.j"
cdp-train $R --out "$ad.j" --steps 41 --batch 8 --resume 2>/dev/null || fail "allreduce: 1 process from 2 ranks"
grep -q "per-rank state (2 ranks, --sync allreduce) is not this run's (1 rank, --sync allreduce)" \
	"$ad.j/train.log" || fail "allreduce: 1 process from 2 ranks: $(grep "per-rank" "$ad.j/train.log")"
grep -q "per epoch), 1 rank, global batch 8, --sync allreduce" "$ad.j/train.log" ||
	fail "allreduce: 1 process: $(grep "start at" "$ad.j/train.log")"

echo "== another j"
cp -r "$d.c" "$d.j"
cdp-train $R --sync admm:5:0.01 --out "$d.j" --steps 20 --batch 8 --resume 2>"$T/err" ||
	fail "1 process from 2 ranks: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q 'holds the local state of 2 ranks, this run has 1' "$T/err" ||
	fail "1 process from 2 ranks: want one warning line, got: $(cat "$T/err")"
cat "$T/err"

echo "== admm resumed under allreduce"
cp -r "$d.c" "$d.ar"
$MP cdp-train $R --sync allreduce --out "$d.ar" --steps 20 --resume 2>"$T/err" ||
	fail "admm under allreduce: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^cdp-train: warning: '$d.ar/checkpoint.cdpt' was written with --sync admm:5:0.01, this run uses allreduce: every rank resumes from the consensus model (the ranks' own parameters, optimizer moments, ADMM duals, batchnorm statistics are dropped)\$" "$T/err" ||
	fail "admm under allreduce: want one warning line, got: $(cat "$T/err")"
cat "$T/err"

echo "== admm resumed under another RHO"
cp -r "$d.c" "$d.rho"
$MP cdp-train $R --sync admm:5:0.01000001 --out "$d.rho" --steps 20 --resume 2>"$T/err" ||
	fail "another RHO: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "was written with --sync admm:5:0.01, this run uses admm:5:0.01000001: every rank resumes from the consensus model" "$T/err" ||
	fail "another RHO: want one warning line, got: $(cat "$T/err")"
grep -q "2 ranks, global batch 8, --sync admm:5:0.01000001\$" "$d.rho/train.log" ||
	fail "another RHO: $(grep "start at" "$d.rho/train.log")"
cat "$T/err"

echo "== allreduce's options with average/admm"
expect_fail 2 "^cdp-train: --overlap needs --sync allreduce (average and admm exchange the parameters whole, after the step)\$" \
	cdp-train $R --sync average:5 --overlap off --out "$T/ov" --steps 2
# named as typed (was --overlap for --no-overlap too)
expect_fail 2 "^cdp-train: --no-overlap needs --sync allreduce (average and admm exchange the parameters whole, after the step)\$" \
	cdp-train $R --sync average:5 --no-overlap --out "$T/ov" --steps 2
expect_fail 2 "^cdp-train: --bucket-mb needs --sync allreduce (average and admm exchange the parameters whole, after the step)\$" \
	cdp-train $R --sync admm:5:0.01 --bucket-mb 1 --out "$T/ov" --steps 2
cp -r "$d.c" "$d.ov"
expect_fail 1 "^cdp-train: cannot resume '$d.ov/checkpoint.cdpt' with --no-overlap: its run has --sync admm:5:0.01, where it does nothing (resume without --no-overlap, or give --sync allreduce)\$" \
	$MP cdp-train $R --no-overlap --out "$d.ov" --steps 20 --resume
cmp -s "$d.c/checkpoint.cdpt" "$d.ov/checkpoint.cdpt" || fail "a refused resume wrote"

echo "== another global batch"
# the checkpoint of 2 ranks x 4: 1 process x 4 and 2 ranks x 2 are refused
# with both numbers named (before: trained on); 1 process x 8, above, is
# the same global batch and resumes
cp -r "$d.c" "$d.g"
expect_fail 1 "^cdp-train: cannot resume '$d.g/checkpoint.cdpt': it was trained with a global batch of 8 (4 x 2 ranks), this run has 4 (4 x 1 rank)\$" \
	cdp-train $R --sync admm:5:0.01 --out "$d.g" --steps 20 --resume
# every rank finds it: rank 0 says it once, without a rank (before: per rank)
expect_fail 1 "^cdp-train: cannot resume '$d.g/checkpoint.cdpt': it was trained with a global batch of 8 (4 x 2 ranks), this run has 4 (2 x 2 ranks)\$" \
	$MP cdp-train $R --sync admm:5:0.01 --out "$d.g" --steps 20 --batch 2 --resume
[ "$(grep -c '^cdp-train' "$T/err")" -eq 1 ] || fail "another global batch on 2 ranks: $(cat "$T/err")"
cmp -s "$d.c/checkpoint.cdpt" "$d.g/checkpoint.cdpt" || fail "a refused resume wrote"

echo "== damaged per-rank section"
for mode in flip cut; do
	cp -r "$d.c" "$d.$mode"
	ckpt "$d.c/checkpoint.cdpt" "$d.$mode/checkpoint.cdpt" $mode
done
expect_fail 1 \
	"^cdp-train: cannot resume from '$d.flip/checkpoint.cdpt': chunk 'RANK': checksum mismatch$" \
	cdp-train $R --sync admm:5:0.01 --out "$d.flip" --steps 40 --resume
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "flip: $(cat "$T/err")"
cat "$T/err"
expect_fail 1 \
	"^cdp-train: cannot resume from '$d.cut/checkpoint.cdpt': chunk 'RANK': truncated data$" \
	cdp-train $R --sync admm:5:0.01 --out "$d.cut" --steps 40 --resume
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "cut: $(cat "$T/err")"
cat "$T/err"
# both ranks decode it and fail alike: rank 0 says so once
expect_fail 1 \
	"^cdp-train: cannot resume from '$d.flip/checkpoint.cdpt': chunk 'RANK': checksum mismatch$" \
	$MP cdp-train $R --out "$d.flip" --steps 40 --resume
[ "$(grep -c '^cdp-train' "$T/err")" -eq 1 ] || fail "flip on 2 ranks: $(cat "$T/err")"

echo "== SIGTERM to mpirun"
S="--db $T/pool --keys $T/train.keys --model $UNET --threads 1 -q --batch 4 --log-every 1"
S="$S --sync average:5 --schedule constant --out $T/sig"   # no re-planned cosine to warn of
$MP cdp-train $S --steps 1000000 >"$T/sig.out" 2>"$T/sig.err" &
pid=$!
wait_step $pid "$T/sig/metrics.jsonl" 5 60
kill -TERM $pid
t0=$(date +%s)
i=0
while kill -0 $pid 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 300 ] || { kill -9 $pid; fail "mpirun still running 30 s after SIGTERM"; }
	sleep 0.1
done
set +e; wait $pid; rc=$?; set -e
echo "exit $rc after $(($(date +%s) - t0)) s: $(cat "$T/sig.err" | head -3)"
[ "$rc" -ne 0 ] || fail "SIGTERM: mpirun exited 0"
last=$(losses "$T/sig/metrics.jsonl" | tail -1 | cut -d' ' -f1)
at=$(ckstep "$T/sig/checkpoint.cdpt") || fail "SIGTERM: no valid checkpoint"
[ "$at" = "$last" ] || fail "SIGTERM: checkpoint at step $at, last logged step $last"
$MP cdp-train $S --steps $((at + 3)) --resume 2>"$T/err" || fail "SIGTERM: resume: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "SIGTERM: the resume said: $(cat "$T/err")"
[ "$(losses "$T/sig/metrics.jsonl" | tail -1 | cut -d' ' -f1)" -eq $((at + 3)) ] ||
	fail "SIGTERM: the resumed run did not reach step $((at + 3))"
echo "stopped at step $at (the last logged), resumed to $((at + 3))"
exit 0
