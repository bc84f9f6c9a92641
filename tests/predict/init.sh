#!/bin/sh
# tests/predict/init.sh: cdp-train --init from python3 -m cdpool import-torch
# on the 16x16 scene chips of chips.sh (5 classes):
#  - torchvision's resnet18 (seeded, 1000 classes) imported for resnet18.cfg
#    with classes=5: the head is left out; cdp-train --init trains 3 steps at
#    --lr 0 and its checkpoint holds torchvision's conv, batchnorm gamma/beta
#    and dense-free tensors exactly (lr 0: the weights stay as taken), train.log
#    names the two head tensors initialized as usual (stderr too, without -q);
#  - the same at --lr 0.05 trains (finite, changed weights);
#  - --init from a cdp-train checkpoint (chips.sh's classifier) takes all
#    its tensors; one whose tensors fit no tensor of the net, one whose
#    tensor other than the head's does not fit (a stem for 4 bands, a stem
#    of another width for 3, which is no advice on bands, a conv of another
#    model), naming it, one with tensors under a module the net
#    has but not in it (a deeper ResNet's layer1.2), and a missing file, are
#    refused; tensors of a module the net lacks (a decoder) are left over;
#  - --resume of a run directory whose checkpoint.cdpt is initial weights is
#    refused, so is cdp-predict on them, --init with --resume is a usage error.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/predict/r18_init.sh"
CFG=$R18
grep -q "head tensor fc.weight: (1000,512) in the state dict, the net has (5,512): left out" \
	"$T/imp.err" || fail "no note on the head: $(cat "$T/imp.err")"

echo "== --init at lr 0"
cdp-keyshuffle -q -o "$T/k" "$T/pool"
cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r0" --batch 4 --steps 3 --threads 1 \
	--lr 0 --model "$CFG:classes=5" --init "$T/init.cdpt" || fail "cdp-train --init"
grep -q "init: 100 of the net's 102 tensors from '$T/init.cdpt'; initialized as usual: fc.w, fc.b" \
	"$T/r0/train.log" || fail "train.log: $(cat "$T/r0/train.log")"
"$PYTHON" -c '
import sys, numpy as np, torch
from cdpool import load_checkpoint
sd = torch.load(sys.argv[1])
ck = load_checkpoint(sys.argv[2])
assert not ck.initial and ck.step == 3, (ck.initial, ck.step)
n = 0
for name, t in ck.params.items():
    layer, suf = name.rsplit(".", 1)
    key = layer + "." + {"w": "weight", "b": "bias"}[suf]
    if layer == "fc":
        assert t.shape != tuple(sd[key].shape)
        continue
    assert np.array_equal(t, sd[key].numpy()), name
    n += 1
assert n == 60, n' "$T/r18.pth" "$T/r0/checkpoint.cdpt" || fail "the weights taken differ from torchvision's"

echo "== --init trains"
# without -q the tensors initialized as usual are said on stderr too
cdp-train --db "$T/pool" --keys "$T/k" --out "$T/r1" --batch 4 --steps 3 --threads 1 \
	--lr 0.05 --model "$CFG:classes=5" --init "$T/init.cdpt" 2>"$T/r1.err" ||
	fail "cdp-train --init lr 0.05: $(cat "$T/r1.err")"
grep -q "^cdp-train: init: 100 of the net's 102 tensors from '$T/init.cdpt'; initialized as usual: fc.w, fc.b\$" \
	"$T/r1.err" || fail "stderr: $(cat "$T/r1.err")"
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
a, b = load_checkpoint(sys.argv[1]), load_checkpoint(sys.argv[2])
assert not np.array_equal(a.params["layer1.0.conv1.w"], b.params["layer1.0.conv1.w"])' \
	"$T/r0/checkpoint.cdpt" "$T/r1/checkpoint.cdpt" || fail "lr 0.05 changed nothing"

echo "== --init from a run's checkpoint"
# chips.sh's classifier run: every tensor taken, lr 0 keeps the weights
cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r3" --batch 4 --steps 2 --threads 1 \
	--lr 0 --model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=1" \
	--init "$T/run/checkpoint.cdpt" || fail "cdp-train --init a run's checkpoint"
grep -q "init: 17 of the net's 17 tensors from '$T/run/checkpoint.cdpt'; initialized as usual: none" \
	"$T/r3/train.log" || fail "train.log: $(grep init: "$T/r3/train.log")"
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
a, b = load_checkpoint(sys.argv[1]), load_checkpoint(sys.argv[2])
assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)' \
	"$T/run/checkpoint.cdpt" "$T/r3/checkpoint.cdpt" || fail "a run's weights not taken"

echo "== refusals"
expect_fail 1 "none of its tensors has a name and shape of this net's" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r4" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/run/checkpoint.cdpt"
expect_fail 1 "init: cannot read '$T/none.cdpt'" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r5" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/none.cdpt"
# a tensor other than the head's that does not fit: a stem for 4 bands on the
# 3-band pool (--freeze would keep a random stem frozen), and a conv of
# another shape (another model: resnet50's 1x1 where resnet18 has a 3x3)
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
from cdpool.checkpoint import encode_initial
ck = load_checkpoint(sys.argv[1])
for out, name, t in ((sys.argv[2], "conv1.w", np.tile(ck.params["conv1.w"], (1, 2, 1, 1))[:, :4]),
                     (sys.argv[3], "layer1.0.conv1.w", ck.params["layer1.0.conv1.w"][:, :, :1, :1]),
                     (sys.argv[4], "conv1.w", ck.params["conv1.w"][:32])):
    p = dict(ck.params)
    p[name] = np.ascontiguousarray(t)
    if name == "layer1.0.conv1.w":
        p["layer1.0.conv2.w"] = p["layer1.0.conv2.w"][:, :, :1, :1].copy()
    open(out, "wb").write(encode_initial(ck.cfg_text, ck.overrides, ck.in_shape, p, ck.buffers))
' "$T/init.cdpt" "$T/in4.cdpt" "$T/other.cdpt" "$T/narrow.cdpt" || fail "the misfit checkpoints"
expect_fail 1 "^cdp-train: --init '$T/in4.cdpt': conv1.w: (64,4,7,7) in the checkpoint, the net has (64,3,7,7): weights for another number of input bands than the pool's 3 (import them with python3 -m cdpool import-torch --in-channels 3)\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r6" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/in4.cdpt" --freeze 'conv1,bn1,layer*'
# a stem of another width for the same 3 bands: another model, not
# weights for other bands (before: the --in-channels advice)
expect_fail 1 "^cdp-train: --init '$T/narrow.cdpt': conv1.w: (32,3,7,7) in the checkpoint, the net has (64,3,7,7): a checkpoint of another model (only the head, 'fc', may differ)\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r6" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/narrow.cdpt"
expect_fail 1 "^cdp-train: --init '$T/other.cdpt': layer1.0.conv1.w: (64,64,1,1) in the checkpoint, the net has (64,64,3,3) (and 1 more tensors): a checkpoint of another model (only the head, 'fc', may differ)\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r6" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/other.cdpt"
# tensors with no place in the net, as PyTorch's strict load_state_dict
# refuses them: one under a module the net has (layer1.2 of a deeper
# ResNet) is another model; one of a module the net lacks (a decoder) is
# left over
"$PYTHON" -c '
import sys
from cdpool import load_checkpoint
from cdpool.checkpoint import encode_initial
ck = load_checkpoint(sys.argv[1])
for out, name in ((sys.argv[2], "layer1.2.conv1.w"), (sys.argv[3], "decoder.blocks.0.conv1.w")):
    p = {}                                 # in block order, after layer1.1
    for k, v in ck.params.items():
        p[k] = v
        if k == "layer1.1.bn2.b":
            p[name] = ck.params["layer1.1.conv1.w"].copy()
    assert name in p, list(p)
    open(out, "wb").write(encode_initial(ck.cfg_text, ck.overrides, ck.in_shape, p, ck.buffers))
' "$T/init.cdpt" "$T/deeper.cdpt" "$T/dec.cdpt" || fail "the checkpoints with extra tensors"
expect_fail 1 "^cdp-train: --init '$T/deeper.cdpt': layer1.2.conv1.w: not in this net: a checkpoint of another, deeper model (only its head, and modules this net does not have, may be left over)\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r6" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/deeper.cdpt"
[ ! -e "$T/r6" ] || fail "a refused --init left '$T/r6'"
cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r7" --batch 4 --steps 1 --threads 1 \
	--model "$CFG:classes=5" --init "$T/dec.cdpt" || fail "--init with a decoder the net lacks"
mkdir "$T/r2"
cp "$T/init.cdpt" "$T/r2/checkpoint.cdpt"
expect_fail 1 "cannot resume from '$T/r2/checkpoint.cdpt': it holds initial weights" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r2" --batch 4 --steps 3 --threads 1 --resume
expect_fail 1 "holds initial weights (python3 -m cdpool import-torch) without a standardization" \
	cdp-predict -q --threads 1 "$T/init.cdpt" "$T/F" -o "$T/x.csv"
expect_fail 2 "resume and --init exclude each other" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/r1" --resume --init "$T/init.cdpt"
echo "PASS"
