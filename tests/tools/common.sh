# tests/tools/common.sh: sourced by the shell drivers. Sets up a temp dir that
# is removed on exit, and small assertion helpers that print what failed.
set -eu
: "${CDP_SRCDIR:?run under make check}" "${CDP_BUILDDIR:?run under make check}"
T=$(mktemp -d "${TMPDIR:-/tmp}/cdptest.XXXXXX")
trap 'rm -rf "$T"' EXIT
PYTHON=${PYTHON:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
need_python() { [ -n "$PYTHON" ] || { echo "SKIP: no Python with osgeo, numpy and lmdb" >&2; exit 77; }; }
# expect_fail CODE PATTERN CMD...: CMD must exit CODE with a one-line stderr matching PATTERN.
expect_fail() {
	code=$1 pat=$2; shift 2
	set +e; "$@" >"$T/out" 2>"$T/err"; rc=$?; set -e
	[ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code (stderr: $(cat "$T/err"))"
	grep -q -- "$pat" "$T/err" || fail "'$*' stderr lacks '$pat': $(cat "$T/err")"
}
