#!/bin/sh
# cdp-train --resume across 2 simulated hosts (cluster_common.sh), where the
# run directory is node-local, so only rank 0's host has the checkpoint:
#  - for --sync allreduce, average:5 and admm:5:0.01, 20 steps in one go
#    against 9 (not a multiple of K) then --resume to 20: every loss equal
#    bit for bit, the resume says nothing, and rank 1's host never holds a
#    checkpoint (rank 0 read it and sent each rank its state);
#  - the same with a run directory both hosts share;
#  - the same global batch on another number of hosts continues the same
#    run: 2 hosts x batch 4 to step 7, 1 host x batch 8 to 14, 2 hosts to
#    20 give the losses of 2 hosts throughout (1e-6);
#  - another global batch is refused (exit 1, the message names the step
#    and the global batch), even where the position in the epoch is a
#    whole number of its steps;
#  - --resume where rank 0's host has no checkpoint: one message, from rank
#    0, naming the file; exit 1.
# Skipped where namespaces cannot be made or without MPI.
# Cleanup: cluster_common.sh sets the EXIT trap (HUP, INT and TERM exit
# through it) before it brings the cluster up; the trap kills every
# process in the cluster's namespaces, mpirun's and the ranks', deletes
# those namespaces and removes $T.
. "$CDP_SRCDIR/tests/cluster/cluster_common.sh"
R="--db $N/pool --keys $T/train.keys --model $UNET --threads 1 -q --batch 4 --log-every 1"
R="$R --schedule constant --lr 0.01 --checkpoint-every 7"

# resume_same SYNC DIR: DIR.a 20 steps, DIR.b 9 + --resume to 20, on both
# hosts; the losses of DIR.a and DIR.b (on node1) must be equal
resume_same() {
	$CMP -np 2 cdp-train $R --sync "$1" --out "$2.a" --steps 20 || fail "$1: run a"
	$CMP -np 2 cdp-train $R --sync "$1" --out "$2.b" --steps 9 || fail "$1: run b"
	$CMP -np 2 cdp-train $R --sync "$1" --out "$2.b" --steps 20 --resume 2>"$T/err" ||
		fail "$1: resume: $(cat "$T/err")"
	quiet "$T/err"
	[ ! -s "$T/err" ] || fail "$1: the resume said: $(cat "$T/err")"
	losses "$(resume_path "$2.a")/metrics.jsonl" >"$T/la"
	losses "$(resume_path "$2.b")/metrics.jsonl" >"$T/lb"
	[ "$(wc -l <"$T/la")" -eq 20 ] || fail "$1: $(wc -l <"$T/la") step lines"
	cmp -s "$T/la" "$T/lb" || fail "$1: resumed losses differ: $(diff "$T/la" "$T/lb" | head -4)"
}
resume_path() { case $1 in "$N"/*) node_path node1 "$1" ;; *) echo "$1" ;; esac; }

for sync in allreduce average:5 admm:5:0.01; do
	echo "== $sync: node-local run directories, 20 steps against 9 + resume"
	d=$N/$(echo "$sync" | tr : _)
	resume_same "$sync" "$d"
	[ ! -e "$(node_path node2 "$d.b")/checkpoint.cdpt" ] || fail "$sync: node2 has a checkpoint"
	echo "$sync: 20 losses equal bit for bit; node2 never had the checkpoint"
done

echo "== average:5: a run directory both hosts share"
resume_same average:5 "$T/shared"
echo "average:5: 20 losses equal bit for bit"

echo "== another number of hosts, the same global batch"
S="--db $N/pool --keys $T/train.keys --model $SMALL --threads 1 -q --log-every 1"
S="$S --schedule constant --lr 0.01"
$CMP -np 2 cdp-train $S --batch 4 --out "$N/hx.a" --steps 20 || fail "2 hosts: run a"
$CMP -np 2 cdp-train $S --batch 4 --out "$N/hx.b" --steps 7 || fail "2 hosts: run b"
cp -r "$(node_path node1 "$N/hx.b")" "$T/hx.7"
on node1 cdp-train $S --batch 8 --out "$N/hx.b" --steps 14 --resume 2>"$T/err" ||
	fail "1 host from 2: $(cat "$T/err")"
quiet "$T/err"
[ ! -s "$T/err" ] || fail "1 host from 2 said: $(cat "$T/err")"
$CMP -np 2 cdp-train $S --batch 4 --out "$N/hx.b" --steps 20 --resume 2>"$T/err" ||
	fail "2 hosts from 1: $(cat "$T/err")"
losses "$(node_path node1 "$N/hx.a")/metrics.jsonl" >"$T/la"
losses "$(node_path node1 "$N/hx.b")/metrics.jsonl" >"$T/lb"
[ "$(wc -l <"$T/la")" -eq 20 ] || fail "hosts: $(wc -l <"$T/la") step lines"
losses_close "$T/la" "$T/lb" 1e-6 || fail "2 hosts, then 1 from step 7, then 2 from 14: other losses"
echo "2 hosts to step 7, 1 host to 14, 2 hosts to 20: the 20 losses of 2 hosts throughout (1e-6)"

echo "== another global batch"
set +e
$CMP -np 2 cdp-train $S --batch 2 --out "$T/hx.7" --steps 20 --resume >"$T/out" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "global batch 4 from 8: exit $rc, want 1: $(cat "$T/err")"
# every rank finds it: said once, by rank 0, without a rank
want="cdp-train: cannot resume '$T/hx.7/checkpoint.cdpt': it was trained with a global"
want="$want batch of 8 (4 x 2 ranks), this run has 4 (2 x 2 ranks)"
grep '^cdp-train' "$T/err" >"$T/msg" || :
[ "$(grep -c . "$T/msg")" -eq 1 ] && grep -qF "$want" "$T/msg" ||
	fail "global batch 4 from 8: want the one line '$want...', got: $(cat "$T/err")"
cat "$T/msg"

echo "== no checkpoint on rank 0's host"
on node1 mkdir -p "$N/none"
set +e
$CMP -np 2 cdp-train $R --out "$N/none" --steps 20 --resume >"$T/out" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "exit $rc, want 1: $(cat "$T/err")"
grep '^cdp-train' "$T/err" >"$T/msg" || :
want="cdp-train: rank 0: cannot resume: '$N/none' holds no checkpoint.cdpt, no run to resume (leave --resume out to start one)"
[ "$(cat "$T/msg")" = "$want" ] || fail "want the one line '$want', got: $(cat "$T/err")"
cat "$T/msg"
exit 0
