#!/bin/sh
# resnet_import.sh: share/cdpool/models/resnet{18,34,50}.cfg are
# torchvision's ResNets. resnet_import.py builds torchvision's models with
# seeded random weights (and batchnorm statistics), saves their state dicts
# (plain, under "state_dict" with a "module." prefix, under "model" with a
# "backbone." prefix), imports them with python3 -m cdpool import-torch and
# runs the engine on the checkpoint (tests/engine/model_dump --init, 3x64x64,
# batch 2): its logits in eval mode and in eval mode after the running
# statistics' update equal torchvision's (relative error <= 1e-4), in
# training mode (batch statistics over as few as 8 values) within 1e-3, and its parameter count is torchvision's. Also: a head of another
# shape is left out with a note, a missing encoder tensor refuses the import,
# --in-channels 4 adapts conv1 as timm's adapt_input_conv.
# Needs torch and torchvision in $PYTHON (/usr/bin/python3); skips (77) without.
# unet_resnet.sh sources this driver: it runs tests/parity/NAME.py for the
# NAME its $0 gives.
set -eu
name=$(basename "$0" .sh)
. "${CDP_SRCDIR:-$(dirname "$0")/../..}/tests/parity/parity_env.sh"
# find_spec finds the packages without importing them (torch's import costs
# seconds; the test's own Python imports it)
if ! "$PY" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("numpy", "torch", "torchvision")))' 2>/dev/null; then
	echo "$name: $PY has no torch/torchvision/numpy: skipped"
	exit 77
fi
[ -x "$dump" ] || { echo "$name: no $dump" >&2; exit 99; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" "$src/tests/parity/$name.py" "$dump" "$src/share/cdpool/models" "$tmp"
