#!/bin/sh
# tests/train/unet_resnet.sh: share/cdpool/models/unet-resnet18.cfg trains
# from imported torchvision weights. torchvision's resnet18 (seeded) is
# imported by python3 -m cdpool import-torch (the decoder and head left
# out); cdp-train --init runs 12 steps on train_common.sh's road pool
# (64x64 tiles, batch 4, AdamW lr 1e-3): train.log says the 100 encoder
# tensors came from the import and the decoder and head were initialized
# as usual, the encoder's weights moved away from torchvision's, and the
# mean loss of the last 4 steps is below that of the first 4.
. "$CDP_SRCDIR/tests/train/train_common.sh"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
CFG="$CDP_SRCDIR/share/cdpool/models/unet-resnet18.cfg"
import_r18 "$CFG" "$T/init.cdpt"
grep -q "decoder tensor decoder.blocks.0.conv1.0.weight: missing: left out" "$T/imp.err" ||
	fail "no decoder note: $(cat "$T/imp.err")"
cdp-train -q --db "$T/pool" --keys "$T/train.keys" --out "$T/run" --batch 4 --steps 12 --log-every 1 \
	--threads 2 --model "$CFG" --init "$T/init.cdpt" || fail "cdp-train --init"
grep -q "init: 100 of the net's 152 tensors from '$T/init.cdpt'; initialized as usual: decoder.blocks.0.conv1.0.w," \
	"$T/run/train.log" || fail "train.log: $(grep init: "$T/run/train.log")"
losses "$T/run/metrics.jsonl" >"$T/l"
[ "$(wc -l <"$T/l")" -eq 12 ] || fail "$(wc -l <"$T/l") steps logged"
awk 'NR <= 4 { a += $2 } NR > 8 { b += $2 } END { print a / 4, b / 4; exit !(b < a) }' "$T/l" ||
	fail "the loss did not fall: $(cat "$T/l" | tr '\n' ' ')"
"$PYTHON" -c '
import sys, numpy as np, torch
from cdpool import load_checkpoint
sd = torch.load(sys.argv[1])
ck = load_checkpoint(sys.argv[2])
assert not ck.initial
assert not np.array_equal(ck.params["layer1.0.conv1.w"], sd["layer1.0.conv1.weight"].numpy())' \
	"$T/r18.pth" "$T/run/checkpoint.cdpt" || fail "the encoder did not train"
echo "unet-resnet18 from torchvision weights: losses $(awk '{ printf "%s ", $2 }' "$T/l")"
