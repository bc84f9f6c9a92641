# tests/tools/common.sh: sourced by the shell drivers. Sets up a temp dir that
# is removed on exit, and small assertion helpers that print what failed.
set -eu
: "${CDP_SRCDIR:?run under make check}" "${CDP_BUILDDIR:?run under make check}"
T=$(mktemp -d "${TMPDIR:-/tmp}/cdptest.XXXXXX")
trap 'rm -rf "$T"' EXIT
PYTHON=${PYTHON:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
need_python() { [ -n "$PYTHON" ] || { echo "SKIP: no Python with osgeo, numpy and lmdb" >&2; exit 77; }; }
# sanitized PROG: PROG (on PATH) is built with AddressSanitizer or UBSan
# (configure --enable-asan, --enable-ubsan), whose shadow memory and
# quarantine make its peak RSS say nothing of cdpool's
sanitized() { ldd "$(command -v "$1")" 2>/dev/null | grep -q 'libasan\|libubsan'; }
# expect_fail CODE PATTERN CMD...: CMD must exit CODE with a one-line stderr matching PATTERN.
expect_fail() {
	code=$1 pat=$2; shift 2
	set +e; "$@" >"$T/out" 2>"$T/err"; rc=$?; set -e
	[ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code (stderr: $(cat "$T/err"))"
	grep -q -- "$pat" "$T/err" || fail "'$*' stderr lacks '$pat': $(cat "$T/err")"
}
# on_full_fs CMD: the shell command line CMD in a mount namespace of its
# own, where $T/full is a 16 KiB tmpfs filled to its last block; stderr in
# $T/err, the status in $rc. Returns 1, running nothing, without unshare -m.
on_full_fs() {
	unshare -m true 2>/dev/null || return 1
	mkdir -p "$T/full"
	set +e
	unshare -m sh -c "mount -t tmpfs -o size=16k tmpfs '$T/full' || exit 99
		dd if=/dev/zero of='$T/full/fill' bs=1k count=64 2>/dev/null
		$1" 2>"$T/err"
	rc=$?
	set -e
	[ "$rc" -ne 99 ] || fail "cannot mount a tmpfs in a mount namespace: $(cat "$T/err")"
}
# run_recipe NAME [FROM TO]...: runs the block of README.md after
# "<!-- recipe: NAME -->" as written there, each FROM (which must occur on
# exactly one line of it, so the recipe cannot drift from its test
# unnoticed) made TO, with sh -eu in the empty folder $T/work (share/ the
# tree's, python3 the test's Python); stdout in $T/out, stderr in $T/err.
run_recipe() {
	name=$1
	shift
	sed -n "/^<!-- recipe: $name -->\$/,/^\`\`\`\$/p" "$CDP_SRCDIR/README.md" |
		sed '1,2d;$d' >"$T/readme.sh"
	[ -s "$T/readme.sh" ] || fail "README.md has no $name recipe"
	cp "$T/readme.sh" "$T/recipe.sh"
	while [ $# -ge 2 ]; do
		[ "$(grep -c -F -- "$1" "$T/readme.sh")" -eq 1 ] ||
			fail "the recipe changed: '$1' is not in it once"
		sed -i "s|$1|$2|" "$T/recipe.sh"
		shift 2
	done
	mkdir "$T/bin" "$T/work"
	ln -s "$PYTHON" "$T/bin/python3"
	ln -s "$CDP_SRCDIR/share" "$T/work/share"
	(cd "$T/work" && PATH="$T/bin:$PATH" sh -eu "$T/recipe.sh") >"$T/out" 2>"$T/err" ||
		fail "the recipe failed: $(tail -5 "$T/err")"
}

# import_r18 CFG OUT: torchvision's resnet18, seeded with 5, saved as
# $T/r18.pth and imported by python3 -m cdpool import-torch (its main, in
# the same Python: each start that imports torch costs seconds) for the
# model CFG (a cfg path with its overrides) into OUT, the importer's notes
# in $T/imp.err; skips (77) without torchvision. The caller puts python/
# on PYTHONPATH.
import_r18() {
	rc=0
	"$PYTHON" -c '
import sys
try:
    import torch, torchvision
except ImportError:
    sys.exit(77)
from cdpool.__main__ import main
torch.manual_seed(5)
torch.save(torchvision.models.resnet18().state_dict(), sys.argv[1])
sys.exit(main(["import-torch", sys.argv[1], "--model", sys.argv[2], "-o", sys.argv[3]]))' \
		"$T/r18.pth" "$1" "$2" 2>"$T/imp.err" || rc=$?
	[ "$rc" -ne 77 ] || { echo "SKIP: no torchvision" >&2; exit 77; }
	[ "$rc" -eq 0 ] || fail "import-torch: $(cat "$T/imp.err")"
}

# change_pair: in the current folder, the generated pair of dates the
# change tests learn from (genpair.py, seed 1, 512x512: a.tif b.tif
# change.tif, tiled 64x64 with --time into 'pool', shuffled into 'keys')
# and the held-out pair (seed 2, 256x256: ha.tif hb.tif hchange.tif).
# G is left naming genpair.py.
change_pair() {
	G="$CDP_SRCDIR/share/cdpool/examples/genpair.py"
	"$PYTHON" "$G" --size 512 --seed 1 a.tif b.tif change.tif
	"$PYTHON" "$G" --size 256 --seed 2 --origin 501000,5800000 ha.tif hb.tif hchange.tif
	cdp-tile -q -s 64 --time a.tif,b.tif --label change.tif | cdp-lmdbpack -q pool
	cdp-keyshuffle -q --seed 1 -o keys pool
}

# change_train MODEL: the change tests' training run (150 steps of batch 8,
# warm-up 10, lr 0.003, 2 threads) of MODEL (a cfg path with its
# overrides) on change_pair's pool, into 'run'.
change_train() {
	cdp-train -q --db pool --keys keys --model "$1" \
		--batch 8 --steps 150 --warmup 10 --lr 0.003 --threads 2 --out run ||
		fail "training failed"
}
