#!/bin/sh
# tests/cluster/shape.sh: cluster_shape (cluster.sh shape) limits what each
# host sends. 4 MiB from node2 to node1 over TCP take at least 0.25 s at
# 100mbit (0.34 s at the rate, less what the 64 KiB bucket lets through at
# once), and "off" takes the limit away again (tc shows no tbf). A lower
# bound only: a loaded machine makes a transfer slower, never faster than
# the token bucket allows. Skipped where namespaces cannot be made.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/cluster/cluster_lib.sh"
why=$(cluster_probe)
[ -z "$why" ] || { echo "SKIP: no simulated cluster: $why" >&2; exit 77; }
need_python
CDPC_TMP=$T
trap 'cluster_down; rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
cluster_up 2 1

# send: 4 MiB from node2 to node1; prints the receiver's seconds from the
# first byte to the last
send() {
	rm -f "$T/got" "$T/ready"
	cluster_run node1 "$PYTHON" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 5555)); s.listen(1)
open(sys.argv[1], "w").close()
c, _ = s.accept()
n, t0 = 0, None
while n < 4 << 20:
    b = c.recv(1 << 16)
    if not b:
        break
    if t0 is None:
        t0 = time.monotonic()
    n += len(b)
open(sys.argv[2], "w").write("%d %.3f\n" % (n, time.monotonic() - t0))
' "$T/ready" "$T/got" &
	rx=$!
	i=0
	while [ ! -e "$T/ready" ]; do
		i=$((i + 1)); [ $i -lt 100 ] || fail "the receiver on node1 did not start"
		sleep 0.1
	done
	cluster_run node2 "$PYTHON" -c '
import socket
c = socket.create_connection(("node1", 5555))
c.sendall(bytes(4 << 20)); c.close()
' || fail "node2 could not send to node1"
	wait $rx || fail "the receiver on node1 failed"
	set -- $(cat "$T/got")
	[ "$1" -eq 4194304 ] || fail "node1 received $1 bytes of 4194304"
	echo "$2"
}

cluster_shape 100mbit
cluster_host node2
ip netns exec "$h_ns" tc qdisc show dev "$CDPC_IF" | grep -q "tbf .*rate 100Mbit" ||
	fail "no 100mbit tbf on node2: $(ip netns exec "$h_ns" tc qdisc show dev "$CDPC_IF")"
slow=$(send)
echo "100mbit: 4 MiB in $slow s"
awk -v t="$slow" 'BEGIN { exit !(t >= 0.25) }' || fail "100mbit: 4 MiB in $slow s, want >= 0.25 s"
cluster_shape off
cluster_host node2
! ip netns exec "$h_ns" tc qdisc show dev "$CDPC_IF" | grep -q tbf || fail "off left a tbf on node2"
echo "off: 4 MiB in $(send) s"
echo "PASS: shape.sh"
