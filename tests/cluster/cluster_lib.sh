# tests/cluster/cluster_lib.sh: the cluster in a box (README). Sourced by
# cluster.sh and by the tests in this folder; plain POSIX sh, no bashisms.
#
# A cluster lives in a state directory $CDPC_DIR (made by cluster_up):
#   id        the cluster's name, cdpc-XXXXXX (the directory's own name);
#   netns     every network namespace it made, one a line, in creation order:
#             ID-br (the switch) and ID-h1 .. ID-hN (the hosts);
#   hosts     "NAME NETNS HOLDER-PID CORE ADDRESS" per host (node1 .. nodeN);
#   etc_hosts the /etc/hosts that every host sees (node names -> addresses);
#   hostfile  mpirun's hostfile, "nodeI slots=S";
#   agent     the rsh agent mpirun calls instead of ssh;
#   nodeI/    host I's node-local directory, bind-mounted over $CDPC_NODE
#             in host I's mount namespace (and seen nowhere else there).
# A host is a holder process (sleep) started by `ip netns exec ID-hI unshare
# --mount --uts --propagation private`: its network, mount and UTS
# namespaces are the host's, and every command on that host is entered into
# them with `nsenter -t PID -m -u -n`, pinned by taskset to the host's core.
# The rest of the filesystem (/tmp, the build tree) is shared, as an NFS home
# would be; only $CDPC_NODE is private. Hosts talk over eth0 (10.213.0.I/24)
# through veth pairs into a bridge in the switch namespace; nothing outside
# the cluster's namespaces is touched.

CDPC_NODE=${CDPC_NODE:-/tmp/cdp-cluster/node}
CDPC_NET=10.213.0
CDPC_IF=eth0
# a login shell's PATH: what ssh would give the remote command
CDPC_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

cdpc_die() { echo "cluster: $*" >&2; exit 1; }

# cluster_probe: prints why this machine cannot host a cluster, or nothing.
# A subshell, so that its trap (the probe namespace goes even when the
# probe is interrupted) leaves the caller's traps alone.
cluster_probe() (
	for cp_c in ip unshare nsenter taskset setsid; do
		command -v "$cp_c" >/dev/null 2>&1 || { echo "no '$cp_c' (util-linux, iproute2)"; exit 0; }
	done
	[ "$(id -u)" -eq 0 ] || { echo "not root: network namespaces need CAP_SYS_ADMIN"; exit 0; }
	cp_ns=cdpc-probe-$$
	trap 'ip netns del "$cp_ns" 2>/dev/null' EXIT
	trap 'exit 1' HUP INT TERM
	if ! cp_err=$(ip netns add "$cp_ns" 2>&1); then
		echo "cannot create a network namespace: $cp_err"
		exit 0
	fi
	cp_err=$(ip netns exec "$cp_ns" unshare --mount --uts --propagation private true 2>&1) ||
		echo "cannot create mount and UTS namespaces: $cp_err"
)

# cluster_host NAME: sets h_ns, h_pid, h_core, h_addr for host NAME of $CDPC_DIR
cluster_host() {
	ch_line=$(awk -v n="$1" '$1 == n' "$CDPC_DIR/hosts")
	[ -n "$ch_line" ] || cdpc_die "no host '$1' in $CDPC_DIR"
	# shellcheck disable=SC2086
	set -- $ch_line
	h_ns=$2 h_pid=$3 h_core=$4 h_addr=$5
}

# cluster_hosts: the host names, one a line
cluster_hosts() { awk '{ print $1 }' "$CDPC_DIR/hosts"; }

# cluster_up N [SLOTS]: makes a cluster of N hosts (SLOTS each in the
# hostfile, default 1) in a new state directory and sets CDPC_DIR to it
# (under $CDPC_TMP, default ${TMPDIR:-/tmp}). A failure part way removes
# what was made and ends the shell.
cluster_up() {
	cu_n=$1 cu_slots=${2:-1}
	case $cu_n$cu_slots in *[!0-9]*) cdpc_die "bad host or slot count '$cu_n' '$cu_slots'" ;; esac
	[ "$cu_n" -ge 1 ] && [ "$cu_n" -le 200 ] || cdpc_die "host count $cu_n is not in 1..200"
	CDPC_DIR=$(mktemp -d "${CDPC_TMP:-${TMPDIR:-/tmp}}/cdpc-XXXXXX") || cdpc_die "cannot make a state directory"
	export CDPC_DIR
	if ! cdpc_build "$cu_n" "$cu_slots"; then
		cluster_down
		cdpc_die "cannot bring the cluster up"
	fi
}

# cdpc_do CMD...: CMD, or a message naming it and status 1 (cdpc_build
# checks every step itself: set -e does not apply inside `if !`)
cdpc_do() { "$@" || { echo "cluster: '$*' failed" >&2; return 1; }; }

# cdpc_build N SLOTS: the body of cluster_up
cdpc_build() {
	cb_id=${CDPC_DIR##*/}
	echo "$cb_id" >"$CDPC_DIR/id" && : >"$CDPC_DIR/netns" && : >"$CDPC_DIR/hosts" &&
		: >"$CDPC_DIR/hostfile" && cdpc_do mkdir -p "$CDPC_NODE" || return 1
	cb_cores=$(nproc)
	cb_br=$cb_id-br
	cdpc_do ip netns add "$cb_br" || return 1
	echo "$cb_br" >>"$CDPC_DIR/netns"
	cdpc_do ip -n "$cb_br" link set lo up &&
		cdpc_do ip -n "$cb_br" link add br0 type bridge &&
		cdpc_do ip -n "$cb_br" link set br0 up || return 1
	printf '127.0.0.1\tlocalhost\n' >"$CDPC_DIR/etc_hosts"
	cb_i=1
	while [ "$cb_i" -le "$1" ]; do
		printf '%s.%d\tnode%d\n' "$CDPC_NET" "$cb_i" "$cb_i" >>"$CDPC_DIR/etc_hosts"
		echo "node$cb_i slots=$2" >>"$CDPC_DIR/hostfile"
		cb_i=$((cb_i + 1))
	done
	cb_i=1
	while [ "$cb_i" -le "$1" ]; do
		cb_ns=$cb_id-h$cb_i
		cdpc_do ip netns add "$cb_ns" || return 1
		echo "$cb_ns" >>"$CDPC_DIR/netns"
		cdpc_do ip -n "$cb_br" link add "v$cb_i" type veth peer name "$CDPC_IF" netns "$cb_ns" &&
			cdpc_do ip -n "$cb_br" link set "v$cb_i" master br0 &&
			cdpc_do ip -n "$cb_br" link set "v$cb_i" up &&
			cdpc_do ip -n "$cb_ns" link set lo up &&
			cdpc_do ip -n "$cb_ns" addr add "$CDPC_NET.$cb_i/24" dev "$CDPC_IF" &&
			cdpc_do ip -n "$cb_ns" link set "$CDPC_IF" up &&
			cdpc_do mkdir "$CDPC_DIR/node$cb_i" || return 1
		cb_core=$(((cb_i - 1) % cb_cores))
		# The holder: the host's hostname, node-local directory and
		# /etc/hosts, then sleep until cluster_down kills it.
		setsid taskset -c "$cb_core" ip netns exec "$cb_ns" \
			unshare --mount --uts --propagation private sh -c '
			hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" /etc/hosts &&
			echo $$ >"$5.tmp" && mv "$5.tmp" "$5" && exec sleep infinity' \
			holder "node$cb_i" "$CDPC_DIR/node$cb_i" "$CDPC_NODE" "$CDPC_DIR/etc_hosts" \
			"$CDPC_DIR/node$cb_i.pid" </dev/null >/dev/null 2>"$CDPC_DIR/node$cb_i.err" &
		cb_w=0
		while [ ! -s "$CDPC_DIR/node$cb_i.pid" ]; do
			cb_w=$((cb_w + 1))
			if [ "$cb_w" -gt 100 ]; then
				echo "cluster: host node$cb_i did not start: $(cat "$CDPC_DIR/node$cb_i.err")" >&2
				return 1
			fi
			sleep 0.1
		done
		echo "node$cb_i $cb_ns $(cat "$CDPC_DIR/node$cb_i.pid") $cb_core $CDPC_NET.$cb_i" \
			>>"$CDPC_DIR/hosts"
		cb_i=$((cb_i + 1))
	done
	cdpc_agent >"$CDPC_DIR/agent" && chmod +x "$CDPC_DIR/agent"
}

# cdpc_agent: the rsh agent script of $CDPC_DIR. Open MPI's rsh launcher
# runs `AGENT HOST WORD...` as it would `ssh HOST WORD...` (the words are
# one shell command, starting orted); like sshd, the agent runs it with a
# login-like environment (PATH, HOME, no variables of the caller), in the
# host's home directory, on the host's core.
cdpc_agent() {
	cat <<EOF
#!/bin/sh
# rsh agent for the cluster in $CDPC_DIR (written by cluster_lib.sh)
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
[ \$# -ge 2 ] || { echo "agent: usage: agent HOST COMMAND..." >&2; exit 255; }
line=\$(awk -v n="\$1" '\$1 == n' "$CDPC_DIR/hosts")
[ -n "\$line" ] || { echo "agent: no host '\$1' in $CDPC_DIR" >&2; exit 255; }
shift
set -- \$line "\$@"
pid=\$3 core=\$4
shift 5
exec taskset -c "\$core" nsenter -t "\$pid" -m -u -n -- \\
	env -i PATH=$CDPC_PATH HOME=/root USER=root LOGNAME=root SHELL=/bin/sh \\
	sh -c "cd /root 2>/dev/null || cd /; \$*"
EOF
}

# cluster_run HOST CMD...: CMD on HOST (its namespaces and core), in the
# caller's directory and environment (unlike the agent: this is a shell on
# that host, not a remote login)
cluster_run() {
	cluster_host "$1"
	shift
	taskset -c "$h_core" nsenter -t "$h_pid" -m -u -n -- \
		sh -c 'cd "$1" || exit 1; shift; exec "$@"' cdpc-run "$PWD" "$@"
}

# cluster_mpirun ARGS...: mpirun on node1 across the cluster's hosts,
# ranks filling each host's slots in turn (-np defaults to every slot).
# TCP only, over the cluster's network, no binding (each host has its core).
cluster_mpirun() {
	cm_root=
	[ "$(id -u)" -ne 0 ] || cm_root=--allow-run-as-root
	cluster_run node1 "${MPIRUN:-mpirun}" $cm_root --oversubscribe --bind-to none \
		--hostfile "$CDPC_DIR/hostfile" \
		--mca plm_rsh_agent "$CDPC_DIR/agent" \
		--mca pml ob1 --mca btl tcp,self \
		--mca oob_tcp_if_include "$CDPC_IF" --mca btl_tcp_if_include "$CDPC_IF" \
		"$@"
}

# cluster_node HOST: the path, seen from outside the cluster, of HOST's
# node-local directory (what HOST sees at $CDPC_NODE)
cluster_node() {
	cluster_host "$1"
	echo "$CDPC_DIR/${1}"
}

# cluster_shape RATE: every host's eth0 sends at most RATE (tc's units:
# 1gbit, 100mbit) through a token bucket; RATE "off" removes the limit.
cluster_shape() {
	if [ "$1" != off ]; then
		cs_bits=$(echo "$1" | awk '{
			n = $0 + 0; u = tolower(substr($0, length(n "") + 1))
			m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "bit" || u == "" ? 1 : 0
			if (n <= 0 || m == 0) exit 1; printf "%.0f\n", n * m }') ||
			cdpc_die "bad rate '$1' (want e.g. 1gbit, 100mbit)"
		# a bucket of 1 ms at the rate, at least 64 KiB (a TSO frame and
		# some): what passes faster than RATE. 10 ms at 10 Gbit/s let 12.5
		# MB through at the veth's own speed, more than a step's gradients
		cs_burst=$((cs_bits / 8000))
		[ "$cs_burst" -ge 65536 ] || cs_burst=65536
	fi
	for cs_h in $(cluster_hosts); do
		cluster_host "$cs_h"
		if [ "$1" = off ]; then
			ip netns exec "$h_ns" tc qdisc del dev "$CDPC_IF" root 2>/dev/null || :
		else
			ip netns exec "$h_ns" tc qdisc replace dev "$CDPC_IF" root tbf rate "$1" \
				burst "$cs_burst" latency 50ms || cdpc_die "tc on $cs_h failed"
		fi
	done
}

# cluster_down: ends every process in the cluster's namespaces, deletes the
# namespaces it made (those listed in $CDPC_DIR/netns, named after its id)
# and its state directory. Safe to call twice or on a half-built cluster.
cluster_down() {
	[ -n "${CDPC_DIR:-}" ] && [ -d "$CDPC_DIR" ] || return 0
	cd_id=${CDPC_DIR##*/}
	if [ -f "$CDPC_DIR/netns" ]; then
		for cd_sig in TERM KILL; do
			cd_left=
			for cd_ns in $(cat "$CDPC_DIR/netns"); do
				case $cd_ns in "$cd_id"-*) ;; *) continue ;; esac
				for cd_p in $(ip netns pids "$cd_ns" 2>/dev/null); do
					kill -"$cd_sig" "$cd_p" 2>/dev/null && cd_left=1
				done
			done
			[ -n "$cd_left" ] || break
			cd_w=0
			while [ "$cd_w" -lt 30 ]; do
				cd_any=
				for cd_ns in $(cat "$CDPC_DIR/netns"); do
					case $cd_ns in "$cd_id"-*) ;; *) continue ;; esac
					[ -z "$(ip netns pids "$cd_ns" 2>/dev/null)" ] || cd_any=1
				done
				[ -n "$cd_any" ] || break
				cd_w=$((cd_w + 1))
				sleep 0.1
			done
		done
		for cd_ns in $(cat "$CDPC_DIR/netns"); do
			case $cd_ns in "$cd_id"-*) ip netns del "$cd_ns" 2>/dev/null || : ;; esac
		done
	fi
	rm -rf "$CDPC_DIR"
	CDPC_DIR=
}
