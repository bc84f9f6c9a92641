#!/bin/sh
# tests/cluster/cluster.sh: the cluster in a box by hand (README).
#   eval "$(cluster.sh up [N [SLOTS]])"   N hosts (default 2), SLOTS each in
#                                          the hostfile; sets CDPC_DIR
#   cluster.sh run HOST CMD...           CMD on HOST (node1 .. nodeN)
#   cluster.sh mpirun ARGS...            mpirun on node1 across the hosts
#   cluster.sh node HOST                 the path of HOST's node-local
#                                          directory, seen from outside
#   cluster.sh shape RATE|off            shape every host's link (tc tbf)
#   cluster.sh down                      end it all and clean up
# Every command but up reads CDPC_DIR. Exit 77 (with the reason) where this
# machine cannot make namespaces.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cluster_lib.sh"

usage() {
	echo "usage: cluster.sh up [N [SLOTS]] | run HOST CMD... | mpirun ARGS... | node HOST |" >&2
	echo "       shape RATE|off | down" >&2
	exit 2
}
[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
up)
	[ $# -le 2 ] || usage
	why=$(cluster_probe)
	[ -z "$why" ] || { echo "cluster: cannot make a cluster here: $why" >&2; exit 77; }
	trap 'cluster_down' INT TERM
	cluster_up "${1:-2}" "${2:-1}"
	trap - INT TERM
	echo "CDPC_DIR=$CDPC_DIR; export CDPC_DIR"
	;;
run | mpirun | node | shape | down)
	: "${CDPC_DIR:?cluster: CDPC_DIR is not set (eval the output of cluster.sh up)}"
	[ -f "$CDPC_DIR/hosts" ] || cdpc_die "'$CDPC_DIR' is not a cluster"
	case $cmd in
	run) [ $# -ge 2 ] || usage; cluster_run "$@" ;;
	mpirun) cluster_mpirun "$@" ;;
	node) [ $# -eq 1 ] || usage; cluster_node "$1" ;;
	shape) [ $# -eq 1 ] || usage; cluster_shape "$1" ;;
	down) [ $# -eq 0 ] || usage; cluster_down ;;
	esac
	;;
*) usage ;;
esac
