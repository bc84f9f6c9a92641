#!/bin/sh
# tests/train/fpn_deeplab.sh: share/cdpool/models/fpn-resnet18.cfg and
# deeplabv3plus-resnet18.cfg train from imported torchvision weights.
# torchvision's resnet18 (seeded) is imported by python3 -m cdpool
# import-torch into each (the decoder and head left out); cdp-train --init
# runs 12 steps on train_common.sh's road pool (64x64 tiles, batch 4, AdamW
# lr 1e-3): train.log says the 100 encoder tensors came from the import,
# and the mean loss of the last 4 steps is below that of the first 4.
. "$CDP_SRCDIR/tests/train/train_common.sh"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
for m in fpn deeplabv3plus; do
	CFG="$CDP_SRCDIR/share/cdpool/models/$m-resnet18.cfg"
	import_r18 "$CFG" "$T/$m.cdpt"
	cdp-train -q --db "$T/pool" --keys "$T/train.keys" --out "$T/$m" --batch 4 --steps 12 \
		--log-every 1 --threads 2 --model "$CFG" --init "$T/$m.cdpt" || fail "$m: cdp-train --init"
	grep -q "init: 100 of the net's [0-9]* tensors from '$T/$m.cdpt'; initialized as usual: decoder\." \
		"$T/$m/train.log" || fail "$m: train.log: $(grep init: "$T/$m/train.log")"
	losses "$T/$m/metrics.jsonl" >"$T/l"
	[ "$(wc -l <"$T/l")" -eq 12 ] || fail "$m: $(wc -l <"$T/l") steps logged"
	awk 'NR <= 4 { a += $2 } NR > 8 { b += $2 } END { exit !(b < a) }' "$T/l" ||
		fail "$m: the loss did not fall: $(tr '\n' ' ' <"$T/l")"
	echo "$m-resnet18 from torchvision weights: losses $(awk '{ printf "%s ", $2 }' "$T/l")"
done
