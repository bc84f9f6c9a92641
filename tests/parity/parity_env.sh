# tests/parity/parity_env.sh: sourced by the parity drivers. PY (the Python
# with torch, Debian's python3-torch), src (the source tree), dump
# (tests/engine/model_dump), PYTHONPATH with the tree's python/ (parity.py
# imports the torch twin, python/cdpool/torch_model.py), and need_torch.
PY=${PYTHON:-/usr/bin/python3}
src=${CDP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
dump=${CDP_BUILDDIR:-.}/tests/engine/model_dump
PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE

# need_torch NAME: skip (77) unless $PY imports numpy and torch
need_torch() {
	if ! "$PY" -c 'import numpy, torch' 2>/dev/null; then
		echo "$1: $PY has no torch/numpy: skipped"
		exit 77
	fi
}

# scale_f32 FILE K: the raw float32 FILE multiplied by K in place (a
# negative control's wrong result)
scale_f32() {
	"$PY" -c 'import numpy as np, sys
g = np.fromfile(sys.argv[1], "<f4"); (g * np.float32(sys.argv[2])).astype("<f4").tofile(sys.argv[1])' \
		"$1" "$2"
}

# must_fail WHAT PATTERN CMD...: CMD must fail and say PATTERN (grep, on
# its stdout and stderr); prints "ok   WHAT", else "FAIL WHAT: ..." and
# sets fail=1. Uses $tmp.
must_fail() {
	mf_what=$1 mf_pat=$2
	shift 2
	if "$@" >"$tmp/must_fail.out" 2>&1; then
		echo "FAIL $mf_what: it passed"
		fail=1
	elif grep -q -- "$mf_pat" "$tmp/must_fail.out"; then
		echo "ok   $mf_what"
	else
		echo "FAIL $mf_what: no '$mf_pat' in:"
		cat "$tmp/must_fail.out"
		fail=1
	fi
}
