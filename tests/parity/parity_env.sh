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
