#!/bin/sh
# mix.sh: MixUp and CutMix of engine/augment.h against NumPy:
# tests/engine/mix_dump draws and mixes, mix_ref.py checks the draws'
# distributions against NumPy's Beta and timm's box rule, python/cdpool's
# Mix against every draw bit for bit, and the mixed batch against NumPy's
# bit for bit (mix_ref.py says what exactly).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
PYTHONPATH=$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
"$PYTHON" "$CDP_SRCDIR/tests/engine/mix_ref.py" "$CDP_BUILDDIR/tests/engine/mix_dump" "$T" ||
	fail "mix_ref.py"
