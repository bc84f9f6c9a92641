#!/bin/sh
# Resource limits and other hostile surroundings (cdpool(7), ERRORS and
# OUTPUTS), audit 5A:
#  - under an address-space limit (ulimit -v: 300 MB, 1 GB for cdp-train
#    (2 GB for its training run: Open MPI maps its plugins),
#    1.5 GB for cdp-predict, whose libraries need that much to load) every
#    program ends: --version, and a pack that fails (its --map-size beyond
#    the limit). OpenBLAS's worker threads, started by its library
#    constructor, spun for ever there trying to map their buffers, and
#    exit() waited for them;
#  - under a file-size limit (ulimit -f) the programs fail with one line
#    saying "File too large", naming the file, and leave no temporary
#    (SIGXFSZ killed them with no word, exit 153): cdp-tile -O,
#    cdp-keyshuffle -o, cdp-evaluate --png, cdp-predict -o, and
#    cdp-lmdbpack both as it creates a pool and as it fills one (LMDB
#    reports the short write as "Input/output error"); Open MPI's start in
#    cdp-predict needs no file of its own above a block (it needed 8 MB);
#  - under ulimit -n 20 cdp-predict's first line names the limit before
#    Open MPI's own;
#  - cdp-lmdbpack creating a pool on a full file system (a 16 KiB tmpfs in
#    a mount namespace; skipped without unshare -m) says "No space left
#    on device" (it said "Input/output error" with a few blocks free, and
#    with none LMDB's first write to its new lock.mdb was a SIGBUS);
#  - cdp-train --log - and --trace - with standard output closed say "Bad
#    file descriptor"; an --out that is a file or a dangling link says so;
#    cdp-tile refuses a path with a newline in stream mode in one line.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
D="$CDP_SRCDIR/tests/predict"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
mk() { "$PYTHON" "$D/mkthreshold.py" "$@"; }
# no_tmp DIR: no temporary of the output policy left in DIR
no_tmp() {
	left=$(ls -A "$1" | grep -F '.cdp-tmp.' || true)
	[ -z "$left" ] || fail "temporaries left in '$1': $left"
}

mk "$T/a.tif" 512 512 1
mk "$T/b.tif" 200 170 2
cdp-tile -q --size 32 --label-suffix _mask "$T/a.tif" >"$T/a.cdps"
cdp-lmdbpack -q "$T/pool" <"$T/a.cdps"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$SMALL:channels=1,in_h=32,in_w=32" \
	--out "$T/run" --steps 2 --batch 2 --threads 1 || fail "training failed"
cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/pred.tif" || fail "cdp-predict failed"

echo "== ulimit -v"
# limited KB CMD...: CMD under ulimit -v KB, killed after 60 s (exit 124:
# it hung); stdout in $T/out, stderr in $T/err, the status in $rc
limited() {
	kb=$1
	shift
	set +e
	sh -c 'ulimit -v "$1" || exit 98; shift; exec timeout 60 "$@"' sh "$kb" "$@" \
		>"$T/out" 2>"$T/err"
	rc=$?
	set -e
	[ "$rc" -ne 124 ] || fail "'$*' under ulimit -v $kb hung: $(cat "$T/err")"
}
limited 300000 cdp-keyshuffle --version
if [ "$rc" -eq 98 ]; then
	echo "ulimit -v cannot be set here: skipped"
elif [ "$rc" -ne 0 ]; then
	# a sanitizer's shadow memory does not fit in 300 MB
	echo "the programs cannot start under ulimit -v (a sanitizer build?): skipped: $(head -c 200 "$T/err")"
else
	for p in cdp-tile cdp-lmdbpack cdp-evaluate; do
		limited 300000 "$p" --version
		[ "$rc" -eq 0 ] || fail "$p --version under ulimit -v exited $rc: $(cat "$T/err")"
	done
	limited 1000000 cdp-train --version
	[ "$rc" -eq 0 ] || fail "cdp-train --version under ulimit -v exited $rc: $(cat "$T/err")"
	limited 1500000 cdp-predict --version
	[ "$rc" -eq 0 ] || fail "cdp-predict --version under ulimit -v exited $rc: $(cat "$T/err")"
	# a pack that fails: the map cannot be reserved under the limit
	limited 300000 cdp-lmdbpack -q --map-size 1G "$T/vpool" <"$T/a.cdps"
	[ "$rc" -eq 1 ] || fail "a failing pack under ulimit -v exited $rc: $(cat "$T/err")"
	grep -q "^cdp-lmdbpack: cannot open '$T/vpool': --map-size 1 GiB" "$T/err" ||
		fail "a failing pack under ulimit -v: $(cat "$T/err")"
	[ ! -e "$T/vpool" ] || fail "a failing pack under ulimit -v left a pool"
	# and one that works, with OpenBLAS's count as cdp-train's default
	limited 2000000 cdp-train -q --db "$T/pool" --keys "$T/keys" \
		--model "$SMALL:channels=1,in_h=32,in_w=32" --out "$T/vrun" --steps 1 --batch 2
	[ "$rc" -eq 0 ] || fail "cdp-train under ulimit -v exited $rc: $(cat "$T/err")"
	cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$SMALL:channels=1,in_h=32,in_w=32" \
		--out "$T/urun" --steps 1 --batch 2 || fail "training failed"
	want=$(grep -o "device cpu, [0-9]* threads" "$T/urun/train.log")
	grep -q "$want" "$T/vrun/train.log" ||
		fail "cdp-train under ulimit -v: not $want: $(grep -o "device cpu, [0-9]* threads" "$T/vrun/train.log")"
fi

echo "== ulimit -f"
# fsize BLOCKS CMD...: CMD under ulimit -f BLOCKS (of the shell's unit), so
# that its output is cut short; the status in $rc, stderr in $T/err
fsize() {
	b=$1
	shift
	set +e
	sh -c 'ulimit -f "$1" || exit 98; shift; exec "$@"' sh "$b" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	set -e
}
# too_large FILE WHAT: the run failed with exit 1 and the one line for FILE
too_large() {
	[ "$rc" -ne 98 ] || { echo "ulimit -f cannot be set here: skipped"; exit 0; }
	[ "$rc" -eq 1 ] || fail "$2 under ulimit -f exited $rc (153: killed by SIGXFSZ): $(cat "$T/err")"
	grep -qx ".*: cannot [a-z]* '$1': File too large" "$T/err" || fail "$2 under ulimit -f: $(cat "$T/err")"
}
mkdir "$T/tiles"
fsize 1 cdp-tile -q --size 64 -O "$T/tiles" "$T/a.tif"
too_large "$T/tiles/a_0_0.tif" "cdp-tile -O"
no_tmp "$T/tiles"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "cdp-tile: more than a line: $(cat "$T/err")"

fsize 1 cdp-keyshuffle -q --seed 1 -o "$T/k2" "$T/pool"
too_large "$T/k2" "cdp-keyshuffle"
[ ! -e "$T/k2" ] || fail "cdp-keyshuffle left its keys"
no_tmp "$T"

fsize 1 cdp-evaluate --png "$T/cm.png" "$T/pred.tif" "$T/b_mask.tif"
too_large "$T/cm.png" "cdp-evaluate --png"
no_tmp "$T"

# Open MPI's singleton start wrote files of its own (PMIx's shared store,
# the shared-memory transport) that a limit below some 8 MB failed in
# dozens of lines: a process no launcher started has them off
fsize 1 cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/p2.tif"
too_large "$T/p2.tif" "cdp-predict"
[ ! -e "$T/p2.tif" ] || fail "cdp-predict left its map"
no_tmp "$T"

# a new pool: LMDB's first pages, then a later batch; a first pack that
# fails leaves no pool
fsize 20 cdp-lmdbpack -q "$T/fpool" <"$T/a.cdps"
too_large "$T/fpool" "cdp-lmdbpack (a new pool)"
[ ! -e "$T/fpool" ] || fail "a failed first pack left its pool"
fsize 100 cdp-lmdbpack -q --txn-records 4 "$T/fpool" <"$T/a.cdps"
too_large "$T/fpool" "cdp-lmdbpack (filling)"

echo "== ulimit -n"
# an open-file limit Open MPI's start-up cannot live within: its own lines
# follow, but the first says what is wrong
set +e
sh -c 'ulimit -n 20 && exec cdp-predict -q --threads 1 "$@"' sh "$T/run" "$T/b.tif" \
	-o "$T/p3.tif" >"$T/out" 2>"$T/err"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
	head -1 "$T/err" | grep -qx "cdp-predict: warning: the open-file limit is 20 (ulimit -n): MPI's start-up needs about 32 and may fail below that" ||
		fail "cdp-predict under ulimit -n 20: $(head -3 "$T/err")"
fi

echo "== a full file system"
# (inside the namespace, 97: the pool was left)
if on_full_fs "cdp-lmdbpack -q '$T/full/pool' <'$T/a.cdps'; r=\$?; [ ! -e '$T/full/pool' ] || exit 97; exit \$r"; then
	[ "$rc" -eq 1 ] || fail "cdp-lmdbpack on a full disk exited $rc: $(cat "$T/err")"
	grep -qx "cdp-lmdbpack: cannot [a-z]* '$T/full/pool': No space left on device" "$T/err" ||
		fail "a new pool on a full disk: $(cat "$T/err")"
else
	echo "no unshare -m: the full disk case is skipped"
fi

echo "== closed stdout, an --out that is no folder, a newline in a path"
TR="cdp-train -q --db $T/pool --keys $T/keys --model $SMALL:channels=1,in_h=32,in_w=32 --steps 1 --batch 2 --threads 1"
# a closed standard output is a write error, as cdpool(7) says (fdopen's
# "Invalid argument" was the message)
expect_fail 1 "^cdp-train: cannot write '-': Bad file descriptor\$" \
	sh -c "exec $TR --out '$T/c1' --log - >&-"
expect_fail 1 "^cdp-train: cannot write trace '-': Bad file descriptor\$" \
	sh -c "exec $TR --out '$T/c2' --trace - >&-"
# not "cannot lock 'FILE/.lock': Not a directory" / "No such file or directory"
echo x >"$T/plain"
expect_fail 1 "^cdp-train: cannot make the run directory '$T/plain': it is a regular file, not a directory\$" \
	$TR --out "$T/plain"
ln -s "$T/nowhere/run" "$T/dangling"
expect_fail 1 "^cdp-train: cannot make the run directory '$T/dangling': it is a symbolic link to '$T/nowhere/run', which does not exist\$" \
	$TR --out "$T/dangling"
# the stream's source frame holds paths one to a line: refused up front in
# one line, the newline escaped, with or without --name
nl="$T/$(printf 'nl\nname.tif')"
cp "$T/a.tif" "$nl"
for name in "" "--name ok"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-tile: '$T/nl\\\\nname.tif': a path with a newline cannot be recorded in the record stream (rename it, or write tiles with -O DIR)\$" \
		cdp-tile -q -s 32 $name "$nl"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "cdp-tile: more than a line: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "cdp-tile wrote a stream for a path with a newline"
done
exit 0
