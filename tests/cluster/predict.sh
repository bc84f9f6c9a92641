#!/bin/sh
# cdp-predict across 2 simulated hosts (cluster_common.sh), the checkpoint
# only in rank 0's node-local run directory and the raster on storage both
# hosts share:
#  - 2 hosts x 1 rank and 2 hosts x 2 ranks write one output, on rank 0's
#    host only, byte for byte that of 1 process;
#  - the strips go to rank 0 by a gather, so the peak memory of a rank
#    other than 0 does not grow with the number of ranks: at 4 ranks it is
#    within 4 MB of that at 2, where 2 more strip slots (an all-reduce of
#    one slot per rank, as before) would add 32 MB.
# Skipped where namespaces cannot be made or without MPI.
# Cleanup: cluster_common.sh sets the EXIT trap (HUP, INT and TERM exit
# through it) before it brings the cluster up; the trap kills every
# process in the cluster's namespaces, mpirun's and the ranks', deletes
# those namespaces and removes $T.
. "$CDP_SRCDIR/tests/cluster/cluster_common.sh"
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time" >&2; exit 77; }
on node1 cdp-train --db "$N/pool" --keys "$T/train.keys" --model "$SMALL" --threads 1 -q \
	--batch 4 --steps 3 --out "$N/run" || fail "training failed"
# 16000 x 200 pixels in windows of 128: a strip slot is 2 classes x 128 x
# 16000 floats = 16 MB, 3 rounds of strips at 2 ranks
"$PYTHON" "$CDP_SRCDIR/tests/predict/mkthreshold.py" "$T/wide.tif" 16000 200 5 --bands 3
X="-q --threads 1 --prob --size 128 $N/run $T/wide.tif"

on node1 /usr/bin/time -f %M -o "$T/rss1" cdp-predict $X -o "$N/one.tif" ||
	fail "1 process failed"
for j in 2 4; do
	echo "== $j ranks on 2 hosts"
	H=node1:$((j / 2)),node2:$((j / 2))
	$CMP -np $j --host $H sh -c '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" cdp-predict "$@"' \
		"$T/rss$j" $X -o "$N/p$j.tif" || fail "$j ranks failed"
	cmp "$(node_path node1 "$N/one.tif")" "$(node_path node1 "$N/p$j.tif")" ||
		fail "$j ranks: the output differs from 1 process"
	[ ! -e "$(node_path node2 "$N/p$j.tif")" ] || fail "$j ranks: node2 got an output"
	m=0
	r=1
	while [ $r -lt $j ]; do
		v=$(cat "$T/rss$j.$r")
		[ "$v" -le $m ] || m=$v
		r=$((r + 1))
	done
	eval "peak$j=$m"
	echo "$j ranks: byte for byte 1 process's output; peak RSS of ranks 1..$((j - 1)): $m KB," \
		"rank 0: $(cat "$T/rss$j.0") KB (1 process: $(cat "$T/rss1") KB)"
done
[ $((peak4 - peak2)) -lt 4096 ] ||
	fail "the peak memory of a rank grows with the ranks: $peak2 KB at 2, $peak4 KB at 4"
exit 0
