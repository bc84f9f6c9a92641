#!/bin/sh
# cdp-train when a host is lost mid-epoch, on 2 simulated hosts
# (cluster_common.sh): once rank 0 has logged step 5,
#  - kill: every process of host 2 is SIGKILLed (a host that dies);
#  - link: host 2's link goes down (a host that drops off the network);
#  - busy: the same while mpirun has a message under way to host 2's daemon
#    (standard input forwarded to every rank, 64 KiB written after the
#    link went down);
#  - stop: rank 1 is SIGSTOPped (a rank that hangs);
# each time the job ends within 30 s and exits non-zero, rank 0's heartbeat
# (CDP_DIST_HEARTBEAT=2) names rank 1 and host node2 (kill: "is gone", the
# connection closed; link, busy and stop: "is lost", no heartbeat for 2 s),
# and no process of the job is left on host 1. The job is ended by mpirun
# (kill, link, busy: it names the lost daemon's host) or by rank 0's
# watchdog (stop, CDP_DIST_TIMEOUT=10; 25 for link and busy). mpirun runs
# with the OOB keepalive that cdp-train(1) recommends, without which a lost
# link leaves mpirun waiting for TCP to give up (minutes). Keepalive probes
# go out only while nothing sent is unacknowledged: with a message under
# way (busy; once under a loaded make check, something of mpirun's own)
# TCP retransmits instead, for net.ipv4.tcp_retries2 tries (15: 15
# minutes), which host 1 has at 5 (about 13 s), as cdp-train(1)
# recommends. The heartbeat only reports, because MPI_Abort before mpirun
# has seen a daemon unreachable sends the daemon a kill order that is just
# such a message.
# Skipped where namespaces cannot be made or without MPI.
# Cleanup: cluster_common.sh sets the EXIT trap (HUP, INT and TERM exit
# through it) before it brings the cluster up; the trap kills every
# process in the cluster's namespaces, mpirun's and the ranks', deletes
# those namespaces and removes $T.
. "$CDP_SRCDIR/tests/cluster/cluster_common.sh"
export CDP_DIST_TIMEOUT=10 CDP_DIST_HEARTBEAT=2
KA="--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3"
P="--db $N/pool --keys $T/train.keys --model $SMALL --threads 1 -q --batch 2 --log-every 1"
P="$P --steps 1000000"
cluster_host node1
ip netns exec "$h_ns" sysctl -qw net.ipv4.tcp_retries2=5

# procs HOST: the processes on HOST but its namespaces' holder
procs() {
	cluster_host "$1"
	ip netns pids "$h_ns" | grep -vx "$h_pid" || :
}

lose() {
	echo "== $1"
	# link: mpirun's keepalive ends the job (about 7 s), busy: its
	# retransmissions (about 16 s); a watchdog that fired first would
	# abort while mpirun cannot reach the daemon yet
	CDP_DIST_TIMEOUT=10
	[ "$1" = stop ] || CDP_DIST_TIMEOUT=25
	d=$N/lose.$1
	rm -f "$T/in" && mkfifo "$T/in"
	$CMP $KA --stdin all -np 2 cdp-train $P --out "$d" <"$T/in" >"$T/lose.out" 2>"$T/lose.err" &
	pid=$!
	exec 7>"$T/in"
	wait_step $pid "$(node_path node1 "$d")/metrics.jsonl" 5 60
	cluster_host node2
	case $1 in
	kill) kill -9 $(procs node2) ;;
	link) ip -n "$h_ns" link set "$CDPC_IF" down ;;
	busy)
		ip -n "$h_ns" link set "$CDPC_IF" down
		# in the background: should mpirun stop reading, the job still ends
		# (and head with it, by EPIPE, on a failure too: the trap kills mpirun)
		head -c 65536 /dev/zero >&7 &
		;;
	stop)
		r1=
		for p in $(procs node2); do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" != cdp-train ] || r1="$r1 $p"
		done
		[ -n "$r1" ] || fail "stop: no cdp-train on node2"
		kill -STOP $r1
		;;
	esac
	t0=$(date +%s)
	i=0
	while kill -0 $pid 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "$1: the job still runs 30 s after losing node2: $(cat "$T/lose.err")"
		sleep 0.1
	done
	exec 7>&-
	set +e; wait $pid; rc=$?; set -e
	echo "$1: exit $rc after $(($(date +%s) - t0)) s"
	[ "$rc" -ne 0 ] || fail "$1: mpirun exited 0"
	case $1 in
	kill) want="rank 1 on host 'node2' is gone: its heartbeat connection closed" ;;
	*) want="rank 1 on host 'node2' is lost: no heartbeat for 2 s" ;;
	esac
	grep -q "^cdp-train: rank 0: $want" "$T/lose.err" ||
		fail "$1: rank 0 does not name the lost rank: $(cat "$T/lose.err")"
	[ "$1" != stop ] ||
		grep -q "^cdp-train: rank 0: .* did not finish within 10 s: rank 1 on host 'node2' died or hangs" "$T/lose.err" ||
		fail "stop: no timeout message: $(cat "$T/lose.err")"
	grep -e '^cdp-train' -e 'Remote daemon' "$T/lose.err" | head -3
	i=0
	while [ -n "$(procs node1)" ]; do
		i=$((i + 1))
		[ $i -lt 50 ] || fail "$1: left on node1: $(procs node1 | xargs ps -o pid,stat,args -p)"
		sleep 0.1
	done
	# host 2 back for the next case
	cluster_host node2
	case $1 in link | busy) ip -n "$h_ns" link set "$CDPC_IF" up ;; esac
	for p in $(procs node2); do kill -9 "$p" 2>/dev/null || :; done
}

lose kill
lose link
lose busy
lose stop
exit 0
