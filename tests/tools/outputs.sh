#!/bin/sh
# The output-path policy (cdpool(7), OUTPUTS; lib/cdp_out.h), issue 25:
#  - case 6: a FIFO, a character device (mknod c 1 3: a null device) and a
#    symbolic link made here as outputs: cdp-keyshuffle -o and cdp-predict's
#    CSV write a FIFO (to its reader) and a device in place; cdp-predict's
#    GeoTIFF refuses a device or a FIFO before anything is written (no
#    .aux.xml beside it), as cdp-lmdbpack does a FIFO named data.mdb; a
#    link is followed and stays a link; "-" is standard output;
#  - case 1: cdp-train --trace and --log refuse the pool's data.mdb, the
#    --keys file, the cfg, the run's own checkpoint, another run's
#    checkpoint and each other, and leave those files as they were;
#  - case 4: cdp-tile -O rerun over earlier tiles with a later raster
#    failing mid-read leaves the earlier tiles byte for byte;
#  - case 5: cdp-predict --vector OUT.gpkg leaves a user's
#    OUT.gpkg.classes.tif alone; SIGTERM and SIGHUP to cdp-predict leave no
#    temporary (nor -journal); a temporary of a process killed outright is
#    removed by the next cdp-train in that run directory, a live one's kept;
#  - a full file system (a 16 KiB tmpfs mounted in this test's folder, in a
#    mount namespace of its own; skipped without unshare -m) is reported as
#    "No space left on device", naming the file, also when it fills while
#    GDAL writes --cog's copies or SQLite --vector's GeoPackage.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
D="$CDP_SRCDIR/tests/predict"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
mk() { "$PYTHON" "$D/mkthreshold.py" "$@"; }
sum() { cksum <"$1"; }
# no_tmp DIR: nothing the policy (or an older scheme) names a temporary
no_tmp() {
	left=$(ls -A "$1" | grep -E '\.cdp-tmp\.|\.tmp\.|-journal$' || true)
	[ -z "$left" ] || fail "temporaries left in '$1': $left"
}
# reader FIFO OUT: copies what is written to FIFO into OUT, giving up
# after 30 s (a writer that replaced the FIFO never opens it)
reader() { timeout 30 cat "$1" >"$2" & }

mk "$T/a.tif" 128 128 1
mk "$T/b.tif" 200 170 2
cp "$SMALL" "$T/model.cfg"
cdp-tile -q --size 64 --label-suffix _mask "$T/a.tif" | cdp-lmdbpack -q "$T/pool"
cdp-keyshuffle -q --seed 1 -o "$T/keys" "$T/pool"
cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$T/model.cfg:channels=1" --out "$T/run" \
	--steps 2 --batch 2 --threads 1 || fail "training failed"
dev=
if mknod "$T/null" c 1 3 2>/dev/null; then dev="$T/null"; else echo "no mknod: device cases skipped"; fi

echo "== case 6: cdp-keyshuffle -o"
mkfifo "$T/k.fifo"
reader "$T/k.fifo" "$T/k.got"
rpid=$!
cdp-keyshuffle -q --seed 1 -o "$T/k.fifo" "$T/pool" || fail "cdp-keyshuffle onto a FIFO failed"
wait "$rpid" || fail "the FIFO's reader got nothing (the FIFO was replaced?)"
cmp -s "$T/k.got" "$T/keys" || fail "the FIFO's reader got other keys"
[ -p "$T/k.fifo" ] || fail "cdp-keyshuffle replaced the FIFO"
if [ -n "$dev" ]; then
	cdp-keyshuffle -q --seed 1 -o "$dev" "$T/pool" || fail "cdp-keyshuffle onto a device failed"
	[ -c "$dev" ] || fail "cdp-keyshuffle replaced the device node"
fi
echo old >"$T/real.keys"
ln -s real.keys "$T/link.keys"
cdp-keyshuffle -q --seed 1 -o "$T/link.keys" "$T/pool" || fail "cdp-keyshuffle onto a link failed"
[ -L "$T/link.keys" ] || fail "cdp-keyshuffle replaced the symbolic link"
cmp -s "$T/real.keys" "$T/keys" || fail "the link's target does not hold the keys"
cdp-keyshuffle -q --seed 1 -o - "$T/pool" >"$T/stdout.keys" || fail "-o - failed"
cmp -s "$T/stdout.keys" "$T/keys" || fail "-o - is not standard output"
[ ! -e "$T/-" ] || fail "-o - wrote a file named '-'"
mkdir "$T/kdir"
expect_fail 1 "^cdp-keyshuffle: refusing to write '$T/kdir': it is a directory, not a regular file\$" \
	cdp-keyshuffle -q -o "$T/kdir" "$T/pool"
no_tmp "$T"

echo "== case 6: cdp-lmdbpack's pool files"
mkdir "$T/fpool"
mkfifo "$T/fpool/data.mdb"
cdp-tile -q --size 64 "$T/a.tif" >"$T/a.cdps"
expect_fail 1 "^cdp-lmdbpack: refusing to write '$T/fpool/data.mdb': it is a FIFO, not a regular file\$" \
	timeout 30 cdp-lmdbpack -q "$T/fpool" <"$T/a.cdps"
[ -p "$T/fpool/data.mdb" ] && [ ! -e "$T/fpool/lock.mdb" ] || fail "cdp-lmdbpack touched the pool folder"

echo "== case 6: cdp-predict -o"
if [ -n "$dev" ]; then
	expect_fail 1 "^cdp-predict: refusing to write '$dev': it is a character device, not a regular file\$" \
		cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$dev"
	[ -c "$dev" ] || fail "cdp-predict replaced the device node"
fi
mkfifo "$T/p.fifo"
expect_fail 1 "^cdp-predict: refusing to write '$T/p.fifo': it is a FIFO, not a regular file\$" \
	cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/p.fifo"
[ -p "$T/p.fifo" ] || fail "cdp-predict replaced the FIFO"
expect_fail 1 "refusing to write '$T/p.fifo': it is a FIFO" \
	cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/ok.tif" --vector "$T/p.fifo"
[ ! -e "$T/ok.tif" ] || fail "a refused --vector left the GeoTIFF"
ls "$T" | grep -q '\.aux\.xml$' && fail "a refused output left an .aux.xml: $(ls "$T")"
echo old >"$T/real.tif"
ln -s real.tif "$T/link.tif"
cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/link.tif" || fail "cdp-predict onto a link failed"
[ -L "$T/link.tif" ] || fail "cdp-predict replaced the symbolic link"
"$PYTHON" -c "from osgeo import gdal; import sys; d = gdal.Open('$T/real.tif'); sys.exit(d.RasterXSize != 200)" ||
	fail "the link's target is not the prediction"
no_tmp "$T"

echo "== case 6: cdp-predict's CSV into a FIFO"
"$PYTHON" "$GEN" --scene-tiles "$T/chips" --count 6 --size 16 --seed 2
for n in a b c d e; do mkdir -p "$T/F/$n"; done
while read -r f c; do cp "$T/chips/$f" "$T/F/$(echo a b c d e | cut -d' ' -f$((c + 1)))/"; done <"$T/chips/list.txt"
cdp-lmdbpack -q --folders "$T/F" "$T/cpool"
cdp-keyshuffle -q -o "$T/c.keys" "$T/cpool"
cdp-train -q --db "$T/cpool" --keys "$T/c.keys" --out "$T/crun" --batch 2 --steps 2 --threads 1 \
	--model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=1" || fail "cdp-train (classifier)"
cdp-predict -q --threads 1 "$T/crun" "$T/F" -o "$T/c.csv" || fail "cdp-predict to a CSV failed"
mkfifo "$T/c.fifo.csv"
reader "$T/c.fifo.csv" "$T/c.got"
rpid=$!
cdp-predict -q --threads 1 "$T/crun" "$T/F" -o "$T/c.fifo.csv" || fail "cdp-predict's CSV onto a FIFO failed"
wait "$rpid" || fail "the CSV FIFO's reader got nothing"
cmp -s "$T/c.got" "$T/c.csv" || fail "the CSV FIFO's reader got another CSV"
[ -p "$T/c.fifo.csv" ] || fail "cdp-predict replaced the CSV FIFO"
no_tmp "$T"

echo "== case 1: cdp-train --trace and --log"
mkdir "$T/other"
cp "$T/run/checkpoint.cdpt" "$T/other/checkpoint.cdpt"
for f in "$T/pool/data.mdb" "$T/keys" "$T/model.cfg" "$T/run/checkpoint.cdpt" "$T/other/checkpoint.cdpt"; do
	sum "$f" >"$T/before"
	for opt in --trace --log; do
		set +e
		cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$T/model.cfg:channels=1" --out "$T/run" \
			--resume --steps 3 --batch 2 --threads 1 "$opt" "$f" >"$T/out" 2>"$T/err"
		rc=$?
		set -e
		[ "$rc" -eq 1 ] || fail "cdp-train $opt '$f' exited $rc: $(cat "$T/err")"
		grep -q "^cdp-train: refusing to write '$f': it is " "$T/err" ||
			fail "cdp-train $opt '$f': $(cat "$T/err")"
		[ "$(wc -l <"$T/err")" -eq 1 ] || fail "cdp-train $opt '$f': more than one line: $(cat "$T/err")"
		sum "$f" | cmp -s - "$T/before" || fail "cdp-train $opt changed '$f'"
	done
done
grep -q "it is a cdpool checkpoint" "$T/err" || fail "another run's checkpoint: $(cat "$T/err")"
expect_fail 1 "^cdp-train: --log '$T/t.json' and --trace '$T/t.json' are the same file\$" \
	cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$T/model.cfg:channels=1" --out "$T/run2" \
	--steps 1 --batch 2 --threads 1 --log "$T/t.json" --trace "$T/t.json"
[ ! -e "$T/t.json" ] || fail "a refused run wrote '$T/t.json'"

echo "== case 5: a dead run's temporary is swept, a live one's kept"
# Temporaries are marked with where their writer runs (host and PID
# namespace, cdpool(7)): one marked elsewhere is kept whatever its PID says
# here (the sweep removed the live temporary of a cdp-predict in a
# container, "cannot reopen '.pred.tif.cdp-tmp.323.kkYKWz'"); ours, and an
# old name with no mark, go once their PID is dead. Python computes the
# mark as the C tools do: the one it gives is taken as ours. The run's own
# files (loss.png) are cdp-train's alone under its lock: their
# temporaries go whatever their mark or PID (a job killed on another node).
sh -c 'echo $$' >"$T/deadpid"
dead=$(cat "$T/deadpid")
here=$("$PYTHON" -c "import importlib.util as u, sys; s = u.spec_from_file_location('o', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); print(m.where_mark())" "$CDP_SRCDIR/python/cdpool/out.py")
other=$(printf '%08x' $((0x$here ^ 1)))
touch "$T/run/.p.tif.cdp-tmp.$dead.AbCdEf" "$T/run/.p.tif.cdp-tmp.$$.GhIjKl" \
	"$T/run/.p.tif.cdp-tmp.$dead-$here.MnOpQr" "$T/run/.p.tif.cdp-tmp.$dead-$other.StUvWx" \
	"$T/run/.loss.png.cdp-tmp.$$-$other.StUvWx"
cdp-train -q --db "$T/pool" --keys "$T/keys" --model "$T/model.cfg:channels=1" --out "$T/run" \
	--resume --steps 3 --batch 2 --threads 1 || fail "the resumed run failed"
[ ! -e "$T/run/.p.tif.cdp-tmp.$dead.AbCdEf" ] || fail "a dead run's temporary was kept"
[ ! -e "$T/run/.p.tif.cdp-tmp.$dead-$here.MnOpQr" ] ||
	fail "a dead run's temporary marked here ($here) was kept"
[ -e "$T/run/.p.tif.cdp-tmp.$dead-$other.StUvWx" ] ||
	fail "a temporary marked elsewhere ($other) was removed"
[ -e "$T/run/.p.tif.cdp-tmp.$$.GhIjKl" ] || fail "a live process's temporary was removed"
[ ! -e "$T/run/.loss.png.cdp-tmp.$$-$other.StUvWx" ] ||
	fail "a temporary of the run's loss.png marked elsewhere was kept under the lock"
rm "$T/run/.p.tif.cdp-tmp.$$.GhIjKl" "$T/run/.p.tif.cdp-tmp.$dead-$other.StUvWx"
# A writer in another PID namespace (a container) marks its temporaries
# otherwise: its PID there is no process of ours, or another one.
if unshare -pf --mount-proc true 2>/dev/null; then
	there=$(unshare -pf --mount-proc "$PYTHON" -c "import importlib.util as u, sys; s = u.spec_from_file_location('o', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); print(m.where_mark())" "$CDP_SRCDIR/python/cdpool/out.py")
	[ -n "$there" ] && [ "$there" != "$here" ] || fail "another PID namespace's mark: '$there' (here '$here')"
else
	echo "SKIP (this case): unshare -pf cannot make a PID namespace"
fi

echo "== case 5: --vector and a user's OUT.gpkg.classes.tif"
echo "a user's file" >"$T/v.gpkg.classes.tif"
sum "$T/v.gpkg.classes.tif" >"$T/before"
cdp-predict -q --threads 1 "$T/run" "$T/b.tif" -o "$T/v.tif" --vector "$T/v.gpkg" ||
	fail "cdp-predict --vector failed"
sum "$T/v.gpkg.classes.tif" | cmp -s - "$T/before" || fail "cdp-predict touched OUT.gpkg.classes.tif"
[ -s "$T/v.gpkg" ] || fail "no GeoPackage"
no_tmp "$T"

echo "== case 5: SIGTERM and SIGHUP to cdp-predict"
mk "$T/big.tif" 1500 1500 3
mkdir "$T/sig"
# A signal ignored on entry stays ignored (cdp_out.c, as nohup expects), so
# under nohup only SIGTERM can be sent: SigIgn's bit 0 is SIGHUP.
sigs="TERM HUP"
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status 2>/dev/null || true)
if [ -n "$ign" ] && [ $((0x$ign & 1)) -eq 1 ]; then
	echo "SIGHUP is ignored here (nohup?): its case skipped"
	sigs=TERM
fi
for s in $sigs; do
	cdp-predict -q --threads 1 "$T/run" "$T/big.tif" -o "$T/sig/o.tif" \
		--vector "$T/sig/o.gpkg" 2>"$T/sig.err" &
	pid=$!
	i=0
	# the first file to appear is a temporary (outputs are renamed at the end)
	while [ -z "$(ls -A "$T/sig")" ]; do
		i=$((i + 1))
		[ "$i" -lt 600 ] || { kill -9 "$pid"; fail "no temporary seen in 60 s"; }
		sleep 0.1
	done
	kill -s "$s" "$pid"
	set +e
	wait "$pid"
	rc=$?
	set -e
	[ "$rc" -gt 128 ] || fail "SIG$s: cdp-predict exited $rc (finished before the signal?)"
	no_tmp "$T/sig"
	[ -z "$(ls -A "$T/sig")" ] || fail "SIG$s left: $(ls -A "$T/sig")"
done

echo "== case 4: cdp-tile -O rerun over earlier tiles, a later raster failing mid-read"
mk "$T/t1.tif" 256 256 7
mk "$T/t1new.tif" 256 256 8
cdp-tile -q --size 64 -O "$T/tiles" "$T/t1.tif"
(cd "$T/tiles" && ls | sort | xargs cksum) >"$T/tiles.before"
[ "$(wc -l <"$T/tiles.before")" -eq 16 ] || fail "$(wc -l <"$T/tiles.before") tiles, want 16"
cp "$T/t1new.tif" "$T/tiles.src.tif"
mk "$T/t2.tif" 512 512 9
sz=$(wc -c <"$T/t2.tif")
truncate -s $((sz * 6 / 10)) "$T/t2.tif"
expect_fail 1 "^cdp-tile: cannot read '$T/t2.tif'" \
	cdp-tile -q --size 64 -O "$T/tiles" --name t1 --name t2 "$T/tiles.src.tif" "$T/t2.tif"
(cd "$T/tiles" && ls -A | sort | xargs cksum) | cmp -s - "$T/tiles.before" ||
	fail "the earlier tiles changed: $(ls -A "$T/tiles" | head -5)"

echo "== a full file system"
if on_full_fs "cdp-predict -q --threads 1 '$T/run' '$T/b.tif' -o '$T/full/out.tif'"; then
	[ "$rc" -eq 1 ] || fail "cdp-predict on a full disk exited $rc: $(cat "$T/err")"
	grep -qx "cdp-predict: cannot write '$T/full/out.tif': No space left on device" "$T/err" ||
		fail "a full disk: $(cat "$T/err")"
	# a file system that fills while GDAL writes --cog's copies or SQLite
	# --vector's GeoPackage: a 1 MiB tmpfs holds a first run's outputs
	# (a failed run leaves them), then 0 to 640 KiB more are taken. GDAL
	# and SQLite reported it as what failed next, after freeing their
	# files ("TIFFAppendToStrip:Seek error at scanline 0",
	# "sqlite3_exec(COMMIT) failed: database or disk is full", "no such
	# table: gpkg_geometry_columns"); every failure must say what it is
	mkdir "$T/fill"
	for what in cog vector; do
		if [ $what = cog ]; then
			opts="--prob --cog" f=out.tif
		else
			opts="--vector '$T/fill/out.gpkg'" f=out.gpkg
		fi
		set +e
		unshare -m sh -c "mount -t tmpfs -o size=1m tmpfs '$T/fill' || exit 99
			cdp-predict -q --threads 1 '$T/run' '$T/b.tif' -o '$T/fill/out.tif' $opts || exit 98
			for k in 0 64 128 192 256 320 384 448 512 576 640; do
				dd if=/dev/zero of='$T/fill/fill' bs=1k count=\$k 2>/dev/null
				cdp-predict -q --threads 1 '$T/run' '$T/b.tif' -o '$T/fill/out.tif' $opts \\
					2>'$T/err1' && echo \"\$k ok\" ||
					echo \"\$k \$(cat '$T/err1')\"
				rm -f '$T/fill/fill'
			done" >"$T/scan" 2>"$T/err"
		rc=$?
		set -e
		[ "$rc" -eq 0 ] || fail "--$what on a full disk: the first run or the mount failed ($rc): $(cat "$T/err")"
		grep -q " cdp-predict: " "$T/scan" || fail "--$what never met a full disk: $(cat "$T/scan")"
		if grep -v " ok\$" "$T/scan" | grep -vx "[0-9]* cdp-predict: cannot write '$T/fill/$f': No space left on device"; then
			fail "--$what on a full disk (KiB taken, message) above"
		fi
	done
else
	echo "no unshare -m: the full disk case is skipped"
fi
exit 0
