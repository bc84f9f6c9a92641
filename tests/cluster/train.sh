#!/bin/sh
# cdp-train across 2 simulated hosts (cluster_common.sh: network, mount and
# UTS namespaces, TCP only, each host its own copy of the pool and its own
# run directory at the same node-local path):
#  - mpirun places rank r on host r+1;
#  - 2 hosts x 1 rank with batch 4 give the losses of 1 process with batch
#    8 (relative 1e-6), with --allreduce mpi and ring, and 2 hosts x 2 ranks
#    with batch 2 those of the same process (1e-5: four partial sums);
#  - the ranks of the 2 hosts read, between them, the samples of 1 process,
#    step by step (CDP_TRAIN_LOG_KEYS);
#  - only rank 0's host gets metrics.jsonl, train.log, loss.png and the
#    checkpoint; rank 1's host holds an empty run directory;
#  - --sync average:5 and admm:5:0.01 on 2 hosts x 1 rank give the losses
#    of 2 ranks on one host (1e-6);
#  - a pool per host must be a copy: another pool (another uuid, with a
#    pointer file made for it) or another pointer file on host 2 is refused
#    in one message naming rank 1, its host and both uuids (both pointer
#    file headers); copies train;
#  - one pool on read-only storage both hosts mount (a read-only bind
#    mount, no lock.mdb) trains, with the losses of 1 process.
# Skipped where namespaces cannot be made or without MPI.
# Cleanup: cluster_common.sh sets the EXIT trap (HUP, INT and TERM exit
# through it) before it brings the cluster up; the trap kills every
# process in the cluster's namespaces, mpirun's and the ranks', deletes
# those namespaces and removes $T.
. "$CDP_SRCDIR/tests/cluster/cluster_common.sh"

echo "== placement"
$CMP -np 2 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"' | sort >"$T/map"
printf '0 node1\n1 node2\n' | cmp -s - "$T/map" || fail "ranks placed as: $(cat "$T/map")"
cat "$T/map"

P="--db $N/pool --keys $T/train.keys --model $SMALL --steps 12 --log-every 1 --threads 1 -q"
echo "== 2 hosts x batch 4 = 1 process x batch 8"
CDP_TRAIN_LOG_KEYS="$T/k1" on node1 cdp-train $P --batch 8 --out "$N/one" || fail "1 process"
losses "$(node_path node1 "$N/one")/metrics.jsonl" >"$T/l1"
[ "$(wc -l <"$T/l1")" -eq 12 ] || fail "want 12 losses from 1 process"
for algo in mpi ring; do
	CDP_TRAIN_LOG_KEYS="$T/k.$algo" $CMP -x CDP_TRAIN_LOG_KEYS -np 2 \
		cdp-train $P --batch 4 --allreduce $algo --out "$N/two.$algo" || fail "2 hosts ($algo)"
	r0=$(node_path node1 "$N/two.$algo") r1=$(node_path node2 "$N/two.$algo")
	losses "$r0/metrics.jsonl" >"$T/l2"
	losses_close "$T/l1" "$T/l2" 1e-6 || fail "$algo: 2-host losses differ from 1 process"
	echo "$algo: 12 losses agree to 1e-6"
	for f in metrics.jsonl train.log loss.png checkpoint.cdpt; do
		[ -s "$r0/$f" ] || fail "$algo: rank 0's host has no $f"
	done
	[ -d "$r1" ] || fail "$algo: rank 1 made no run directory on node2"
	[ -z "$(ls -A "$r1")" ] || fail "$algo: rank 1 wrote to its host: $(ls -A "$r1")"
	sort "$T/k.$algo.0" "$T/k.$algo.1" >"$T/k2"
	sort "$T/k1.0" | cmp -s - "$T/k2" || fail "$algo: 2 hosts read other (epoch, step, key) than 1 process"
done
echo "rank 0's host holds the run's files, rank 1's an empty directory; the samples of each step are 1 process's"

echo "== 2 hosts x 2 ranks x batch 2 = 1 process x batch 8"
$CMP -np 4 --host node1:2,node2:2 cdp-train $P --batch 2 --allreduce ring --out "$N/four" ||
	fail "2 hosts x 2 ranks"
losses "$(node_path node1 "$N/four")/metrics.jsonl" >"$T/l4"
losses_close "$T/l1" "$T/l4" 1e-5 || fail "2x2: losses differ from 1 process"
echo "2x2: 12 losses agree to 1e-5"

for sync in average:5 admm:5:0.01; do
	echo "== --sync $sync: 2 hosts = 2 ranks on one host"
	d=$(echo "$sync" | tr : _)
	$CMP -np 2 --host node1:2 cdp-train $P --batch 4 --sync $sync --out "$N/$d.one" ||
		fail "$sync: 1 host"
	$CMP -np 2 cdp-train $P --batch 4 --sync $sync --out "$N/$d.two" || fail "$sync: 2 hosts"
	losses "$(node_path node1 "$N/$d.one")/metrics.jsonl" >"$T/la"
	losses "$(node_path node1 "$N/$d.two")/metrics.jsonl" >"$T/lb"
	[ "$(wc -l <"$T/la")" -eq 12 ] || fail "$sync: want 12 losses"
	losses_close "$T/la" "$T/lb" 1e-6 || fail "$sync: 2-host losses differ from 1 host"
	echo "$sync: 12 losses agree to 1e-6"
done
echo "== a pool per host that is not a copy"
# node1: a copy of the pool and its pointer file; node2: the same tiles
# packed again (another uuid) with a pointer file of its own, so each rank's
# pool and pointer file agree, but the hosts train on different pools
n1=$(node_path node1 "$N/other") n2=$(node_path node2 "$N/other")
cp -r "$T/pool" "$n1"
cp "$T/train.keys" "$n1.keys"
cdp-tile -q --size 64 --label-suffix _mask "$T/c3.tif" "$T/c4.tif" | cdp-lmdbpack -q "$n2"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$T/val2.keys" -o "$n2.keys" "$n2"
u1=$(sed -n '1s/.*uuid=\([0-9a-f]*\).*/\1/p' "$n1.keys") u2=$(sed -n '1s/.*uuid=\([0-9a-f]*\).*/\1/p' "$n2.keys")
[ -n "$u1" ] && [ -n "$u2" ] && [ "$u1" != "$u2" ] || fail "pools: uuids '$u1' '$u2'"
O="--db $N/other --keys $N/other.keys --model $SMALL --steps 2 --threads 1 -q --batch 4"
expect_fail 1 "^cdp-train: rank 1 on host 'node2': pool '$N/other' is $u2, rank 0's is $u1$" \
	$CMP -np 2 cdp-train $O --out "$N/other.run"
grep '^cdp-train' "$T/err"
[ "$(grep -c '^cdp-train' "$T/err")" -eq 1 ] || fail "pools: want one message: $(cat "$T/err")"

echo "== the same pool, another pointer file"
rm -rf "$n2" "$n2.keys"
cp -r "$T/pool" "$n2"
cdp-keyshuffle -q --seed 2 -o "$n2.keys" "$n2"
expect_fail 1 "^cdp-train: rank 1 on host 'node2': pointer file '$N/other.keys' is not rank 0's: '.*seed=2 .*' here, '.*seed=1 .*' there$" \
	$CMP -np 2 cdp-train $O --out "$N/other.run"
grep '^cdp-train' "$T/err"
cp "$n1.keys" "$n2.keys"
$CMP -np 2 cdp-train $O --out "$N/other.run" || fail "copies of the pool and pointer file refused"
echo "copies of the pool and its pointer file on each host train"

echo "== one pool on read-only shared storage"
# as a read-only NFS export: every host mounts the same directory read-only
# (here a read-only bind mount of one directory); without lock.mdb, which
# LMDB cannot create there and does without on a read-only filesystem
mkdir "$T/export"
cp "$T/pool/data.mdb" "$T/export/"
for h in node1 node2; do
	on $h sh -c "mkdir -p '$N/ro' && mount --bind '$T/export' '$N/ro' &&
		mount -o remount,ro,bind '$N/ro'" || fail "$h: cannot mount '$T/export' read-only"
done
on node2 sh -c ": >'$N/ro/probe'" 2>/dev/null && fail "the export is writable on node2"
$CMP -np 2 cdp-train --db "$N/ro" ${P#"--db $N/pool "} --batch 4 --out "$N/ro.run" ||
	fail "read-only pool"
losses "$(node_path node1 "$N/ro.run")/metrics.jsonl" >"$T/lr"
losses_close "$T/l1" "$T/lr" 1e-6 || fail "read-only pool: other losses"
[ "$(ls "$T/export")" = data.mdb ] || fail "the export changed: $(ls "$T/export")"
echo "2 hosts train from one read-only pool without a lock file: the losses of 1 process"
exit 0
