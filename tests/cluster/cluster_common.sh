# tests/cluster/cluster_common.sh: sourced by the tests in tests/cluster/.
# Skips (77, with the reason) where this machine cannot make namespaces or
# has no mpirun; then builds the road pool of tests/train/train_common.sh
# in $T, brings up a cluster of ${CDPC_HOSTS:-2} hosts (cluster_lib.sh)
# that the EXIT trap takes down, and copies the pool into every host's
# node-local directory. Names:
#   N      the node-local path every host sees ($CDPC_NODE), holding pool/
#   on     cluster_run: `on node2 CMD...`
#   CMP    cluster_mpirun with the environment every rank needs (PATH to
#          the built programs, CDP_DIST_TIMEOUT): `$CMP -np 2 cdp-train ...`
#   node_path HOST PATH: where PATH on HOST's node-local disk is seen from
#          outside the cluster (to read a run's files)
. "$CDP_SRCDIR/tests/cluster/cluster_lib.sh"
why=$(cluster_probe)
[ -z "$why" ] || { echo "SKIP: no simulated cluster: $why" >&2; exit 77; }
[ -n "${MPIRUN:-}" ] && command -v "$MPIRUN" >/dev/null 2>&1 ||
	{ echo "SKIP: no MPIRUN" >&2; exit 77; }
. "$CDP_SRCDIR/tests/train/train_common.sh"
CDPC_TMP=$T
trap 'cluster_down; rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
cluster_up "${CDPC_HOSTS:-2}" "${CDPC_SLOTS:-1}"
N=$CDPC_NODE
for h in $(cluster_hosts); do
	cp -r "$T/pool" "$(cluster_node "$h")/pool"
done
on() { cluster_run "$@"; }
CMP="cluster_mpirun -x PATH -x CDP_DIST_TIMEOUT"
# quiet FILE: FILE less Open MPI's benign launch race, "plm:rsh: Warning:
# setpgid(PID,PID) failed in parent with errno=Permission denied" (mpirun's
# parent calls setpgid after the child has already exec'd: seen under load),
# so a test that wants a run to say nothing checks only what cdpool said
quiet() {
	sed -i '/plm:rsh: Warning: setpgid(.*) failed in parent/d' "$1"
}
node_path() {
	case $2 in "$N"/*) ;; *) fail "node_path: '$2' is not under $N" ;; esac
	echo "$(cluster_node "$1")/${2#"$N"/}"
}
