#!/bin/sh
# A pool in a directory its reader cannot write: the C readers open it
# without LMDB's lock file (MDB_NOLOCK, as LMDB does on read-only media), as
# Python's Pool does with lock=False; a writer is still refused. Run as an
# unprivileged user: nobody through setpriv when root, else this user with
# the write bits taken away. Skips (77) when neither is possible.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"

"$PYTHON" "$MK" "$T/a.tif" --width 128 --height 96 --bands 3 --seed 4
cdp-tile -q -s 32 "$T/a.tif" | cdp-lmdbpack -q "$T/P"
cdp-keyshuffle -q --seed 7 -o - "$T/P" >"$T/want"
[ -s "$T/want" ] || fail "no keys from the owner"

if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null 2>&1 || { echo "SKIP: root without setpriv" >&2; exit 77; }
	as() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	chmod 755 "$T"
	chmod -R a+rX,go-w "$T/P"
	# the build tree must be readable by nobody
	as sh -c 'command -v cdp-keyshuffle' >/dev/null 2>&1 ||
		{ echo "SKIP: nobody cannot run the built programs" >&2; exit 77; }
else
	as() { "$@"; }
	chmod a-w "$T/P" "$T/P/lock.mdb"
	trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
	# a user the permission bits do not bind (CAP_DAC_OVERRIDE) proves nothing
	[ ! -w "$T/P" ] || { echo "SKIP: write bits do not bind this user" >&2; exit 77; }
fi

# lock.mdb there but not writable, then missing in an unwritable directory
for case in unwritable missing; do
	if [ $case = missing ]; then
		if [ "$(id -u)" = 0 ]; then rm "$T/P/lock.mdb"; else
			chmod u+w "$T/P"; rm -f "$T/P/lock.mdb"; chmod a-w "$T/P"; fi
	fi
	as cdp-keyshuffle -q --seed 7 -o - "$T/P" >"$T/got" 2>"$T/err" ||
		fail "$case lock: cdp-keyshuffle refused a read-only pool: $(cat "$T/err")"
	cmp -s "$T/want" "$T/got" || fail "$case lock: other keys than the owner's"
	[ ! -s "$T/err" ] || fail "$case lock: stderr: $(cat "$T/err")"
	[ $case = unwritable ] || [ ! -e "$T/P/lock.mdb" ] || fail "a reader created lock.mdb"
done
# a writer still needs the lock (and the directory)
set +e
cdp-tile -q -s 32 --name b "$T/a.tif" | as cdp-lmdbpack -q "$T/P" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a writer without write access exited $rc: $(cat "$T/err")"
grep -q "^cdp-lmdbpack: cannot open '$T/P': Permission denied" "$T/err" || fail "writer: $(cat "$T/err")"
