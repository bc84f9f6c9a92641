#!/bin/sh
# tests/predict/init_norm.sh: the input normalization of initial weights
# and where they came from (cdp-train(1) --init-norm, cdp-checkpoint(5)
# NORM and FROM), on chips.sh's 20 u8 scene chips of 16x16:
#  - chips.sh's classifier saved as a PyTorch state dict, imported by
#    python3 -m cdpool import-torch --input-norm imagenet (values / 255,
#    the u8 range) and trained with --init-norm on the u8 chips, gives the
#    weights and the cdp-predict probabilities of the same import with
#    --input-norm none --input-scale 1 trained with --init-norm on the chips
#    normalized by hand ((v / 255 - mean) / std, f32): cdp-predict applies
#    the normalization the checkpoint records (origin init, mean 255 x
#    ImageNet's), on the host and the device data path alike, and
#    Checkpoint.standardize in Python applies it too;
#  - without --init-norm the pool's standardization is kept, train.log says
#    the weights record their own; --init-norm from a run's checkpoint
#    takes its standardization;
#  - the run's checkpoint names its initial weights and their source state
#    dict with their SHA-256 (python3 -m cdpool info), and --resume keeps it;
#  - --bands of another count than the pool's, or in another order, and
#    --init-norm without a normalization, are refused in one line;
#    --input-norm imagenet on 4 bands and --init-norm without --init too;
#  - initial weights (a NORM, no standardization) are refused by
#    cdp-predict, Deployed, export_onnx and Checkpoint.standardize in one
#    message.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# find_spec: found without the import's seconds of CPU
"$PYTHON" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null ||
	{ echo "SKIP: no torch" >&2; exit 77; }
. "$CDP_SRCDIR/tests/predict/chips.sh"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
CFG="$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=1"

# the classifier as a state dict; the chips normalized by hand in $T/N
"$PYTHON" -c '
import os, sys, numpy as np, torch
from osgeo import gdal
from cdpool import load_checkpoint
ck = load_checkpoint(sys.argv[1])
names = {"w": "weight", "b": "bias", "mean": "running_mean", "var": "running_var"}
sd = {}
for d in (ck.params, ck.buffers):
    for k, t in d.items():
        layer, suf = k.rsplit(".", 1)
        sd[layer + "." + names[suf]] = torch.from_numpy(np.array(t))
torch.save(sd, sys.argv[2])
m = np.array([0.485, 0.456, 0.406])[:, None, None]
s = np.array([0.229, 0.224, 0.225])[:, None, None]
src, dst = sys.argv[3], sys.argv[4]
for cls in sorted(os.listdir(src)):
    os.makedirs(os.path.join(dst, cls))
    for f in sorted(os.listdir(os.path.join(src, cls))):
        ds = gdal.Open(os.path.join(src, cls, f))
        v = ds.ReadAsArray().astype(np.float64)
        assert ds.GetRasterBand(1).DataType == gdal.GDT_Byte and v.shape[0] == 3
        x = ((v / 255 - m) / s).astype(np.float32)
        o = gdal.GetDriverByName("GTiff").Create(os.path.join(dst, cls, f), v.shape[2],
                                                 v.shape[1], 3, gdal.GDT_Float32)
        o.SetGeoTransform(ds.GetGeoTransform())
        o.SetProjection(ds.GetProjection())
        o.WriteArray(x)
        o = None' "$T/run/checkpoint.cdpt" "$T/sd.pth" "$T/F" "$T/N" || fail "fixtures"
imp() {
	"$PYTHON" -m cdpool import-torch "$T/sd.pth" --model "$CFG" "$@" 2>"$T/imp.err" ||
		fail "import-torch $*: $(cat "$T/imp.err")"
}
imp -o "$T/in.cdpt" --input-norm imagenet
imp -o "$T/id.cdpt" --input-norm none --input-scale 1
cdp-lmdbpack -q --folders "$T/N" "$T/npool"
cdp-keyshuffle -q -o "$T/k" "$T/pool"
cdp-keyshuffle -q -o "$T/nk" "$T/npool"
train() {
	out=$1 pool=$2 keys=$3
	shift 3
	cdp-train -q --db "$T/$pool" --keys "$T/$keys" --out "$T/$out" --batch 4 --threads 1 \
		--lr 0.05 --model "$CFG" "$@" || fail "cdp-train $out $*"
}

echo "== --init-norm equals the normalization by hand"
train a pool k --steps 3 --init "$T/in.cdpt" --init-norm
train b npool nk --steps 3 --init "$T/id.cdpt" --init-norm
# the device data path (raw batches standardized by prep_batch) too
CDP_TRAIN_DATA=device train a2 pool k --steps 3 --init "$T/in.cdpt" --init-norm
grep -q "standardization: the input normalization of the initial weights '$T/in.cdpt' (--init-norm: imagenet, values / 255, the largest of the pool's data type)" \
	"$T/a/train.log" || fail "train.log: $(cat "$T/a/train.log")"
"$PYTHON" -c '
import os, sys, numpy as np
from cdpool import load_checkpoint
a, b = load_checkpoint(sys.argv[1]), load_checkpoint(sys.argv[2])
assert a.std_from == b.std_from == "init", (a.std_from, b.std_from)
assert np.allclose(a.mean, 255 * np.array([0.485, 0.456, 0.406]), rtol=1e-12), a.mean
assert np.allclose(a.std, 255 * np.array([0.229, 0.224, 0.225]), rtol=1e-12), a.std
assert np.array_equal(b.mean, [0, 0, 0]) and np.array_equal(b.std, [1, 1, 1]), (b.mean, b.std)
a2 = load_checkpoint(sys.argv[3])
for k in a.params:
    assert np.allclose(a.params[k], b.params[k], rtol=1e-4, atol=1e-5), k
    assert np.allclose(a.params[k], a2.params[k], rtol=1e-5, atol=1e-6), k
# Python applies what the checkpoint records as cdp-predict does
from osgeo import gdal
chip = sys.argv[4] + "/lake/" + sorted(os.listdir(sys.argv[4] + "/lake"))[0]
by_hand = gdal.Open(chip.replace(sys.argv[4], sys.argv[5])).ReadAsArray()
assert np.allclose(a.standardize(gdal.Open(chip).ReadAsArray()), by_hand, atol=1e-5)
print("weights agree")' "$T/a/checkpoint.cdpt" "$T/b/checkpoint.cdpt" "$T/a2/checkpoint.cdpt" \
	"$T/F" "$T/N" || fail "the runs differ"
cdp-predict -q --threads 1 "$T/a/checkpoint.cdpt" "$T/F" -o "$T/a.csv"
cdp-predict -q --threads 1 "$T/b/checkpoint.cdpt" "$T/N" -o "$T/b.csv"
"$PYTHON" -c '
import csv, sys
a = list(csv.reader(open(sys.argv[1])))
b = list(csv.reader(open(sys.argv[2])))
assert a[0] == b[0] and len(a) == len(b) == 21, (a[0], b[0], len(a), len(b))
n = 0
for ra, rb in zip(a[1:], b[1:]):
    assert ra[0].split("/")[-2:] == rb[0].split("/")[-2:], (ra[0], rb[0])
    for x, y in zip(ra[2:], rb[2:]):
        assert abs(float(x) - float(y)) <= 1e-4, (ra, rb)
        n += 1
print("%d probabilities agree" % n)' "$T/a.csv" "$T/b.csv" || fail "the predictions differ"

echo "== --init-norm on data of another scale: one warning"
# id.cdpt normalizes nothing (values / 1, mean 0 std 1): u8 chips come out
# at a mean near 100, which its weights never saw; in.cdpt's do not
train w pool k --steps 1 --init "$T/id.cdpt" --init-norm 2>"$T/err"
cat "$T/err"
grep -q "^cdp-train: warning: --init-norm: band [123] of the training data comes out at mean [0-9.e+]* std [0-9.e+]* under the initial weights' normalization (mean 0 std 1 in band values), far from the 0 and 1 they expect: were they imported with the --input-scale of this data (import-torch)?\$" \
	"$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ] || fail "no one-line warning: $(cat "$T/err")"
train w2 pool k --steps 1 --init "$T/in.cdpt" --init-norm 2>"$T/err"
[ ! -s "$T/err" ] || fail "a warning on data of the weights' scale: $(cat "$T/err")"

echo "== the pool's standardization by default; a run's as --init-norm"
train c pool k --steps 1 --init "$T/in.cdpt"
grep -q "init: '$T/in.cdpt' records its weights' own input normalization; this run standardizes with the pool's statistics" \
	"$T/c/train.log" || fail "train.log: $(cat "$T/c/train.log")"
train d pool k --steps 1 --init "$T/run/checkpoint.cdpt" --init-norm
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
c, d, r = (load_checkpoint(p) for p in sys.argv[1:4])
assert c.std_from == "sources", c.std_from
assert d.std_from == "init" and np.array_equal(d.mean, r.mean) and np.array_equal(d.std, r.std)
' "$T/c/checkpoint.cdpt" "$T/d/checkpoint.cdpt" "$T/run/checkpoint.cdpt" ||
	fail "the standardization of c or d"

echo "== provenance, kept by --resume"
sin=$(sha256sum "$T/in.cdpt" | cut -d' ' -f1)
ssd=$(sha256sum "$T/sd.pth" | cut -d' ' -f1)
prov() {
	"$PYTHON" -m cdpool info "$1" >"$T/info" || fail "cdpool info $1"
	grep -qx "initial weights from: checkpoint '$T/in.cdpt' sha256 $sin" "$T/info" &&
		grep -qx "which came from: state dict '$T/sd.pth' sha256 $ssd" "$T/info" ||
		fail "$1: $(grep -i "from\|step" "$T/info")"
}
prov "$T/a/checkpoint.cdpt"
"$PYTHON" -m cdpool info "$T/in.cdpt" | grep -qx "initial weights from: state dict '$T/sd.pth' sha256 $ssd" ||
	fail "the import names no state dict"
cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/a" --batch 4 --threads 1 --steps 5 --resume ||
	fail "resume"
prov "$T/a/checkpoint.cdpt"
grep -qx "step: 5" "$T/info" || fail "not resumed: $(grep step "$T/info")"
grep -qx "standardization: the initial weights' input normalization (--init-norm)" "$T/info" ||
	fail "the resumed run's standardization: $(grep -A1 standardization "$T/info")"
"$PYTHON" -m cdpool info "$T/c/checkpoint.cdpt" | grep -q "^initial weights from: checkpoint '$T/in.cdpt'" ||
	fail "c names no initial weights"

echo "== refusals"
imp -o "$T/b4.cdpt" --in-channels 4 --input-norm 0:1 --bands B4,B3,B2,B8
expect_fail 1 "^cdp-train: --init '$T/b4.cdpt': the weights expect 4 bands (B4,B3,B2,B8), the pool '$T/pool' has 3\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/e" --batch 4 --steps 1 --threads 1 \
	--model "$CFG" --init "$T/b4.cdpt"
imp -o "$T/b321.cdpt" --input-norm imagenet --bands 3,2,1
expect_fail 1 "^cdp-train: --init '$T/b321.cdpt': the weights expect band 3 as input 1, cdp-train feeds the pool's 3 bands in their order" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/e" --batch 4 --steps 1 --threads 1 \
	--model "$CFG" --init "$T/b321.cdpt"
imp -o "$T/b123.cdpt" --input-norm imagenet --bands 1,2,3
train f pool k --steps 1 --init "$T/b123.cdpt"
grep -q "init: the weights expect the bands 1,2,3: the pool's bands 1 to 3" "$T/f/train.log" ||
	fail "train.log: $(cat "$T/f/train.log")"
# initial weights record a NORM but no standardization: cdp-predict, Deployed,
# export_onnx and Checkpoint.standardize refuse them alike (their scale is the
# training pool's type, which only cdp-train --init-norm resolves)
msg="'$T/in.cdpt' holds initial weights (python3 -m cdpool import-torch) without a standardization: train from them with cdp-train --init"
expect_fail 1 "^cdp-predict: $msg\$" cdp-predict -q --threads 1 "$T/in.cdpt" "$T/F" -o "$T/x.csv"
"$PYTHON" -c '
import sys, numpy as np
from cdpool import load_checkpoint
from cdpool.torch_model import Deployed, export_onnx
ck = load_checkpoint(sys.argv[1])
for what, f in (("Deployed", lambda: Deployed(ck)),
                ("export_onnx", lambda: export_onnx(ck, sys.argv[3])),
                ("standardize", lambda: ck.standardize(np.zeros((3, 4, 4))))):
    try:
        f()
    except ValueError as e:
        assert str(e) == sys.argv[2], (what, str(e))
    else:
        raise AssertionError(what + " accepted initial weights")' "$T/in.cdpt" "$msg" "$T/x.onnx" ||
	fail "Python applied initial weights without a standardization"
imp -o "$T/plain.cdpt"
expect_fail 1 "^cdp-train: --init-norm: '$T/plain.cdpt' records no input normalization (import it with python3 -m cdpool import-torch --input-norm)\$" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/e" --batch 4 --steps 1 --threads 1 \
	--model "$CFG" --init "$T/plain.cdpt" --init-norm
expect_fail 1 "^cdpool: cannot import '$T/sd.pth': --input-norm imagenet is for 3 bands (RGB), the net has 4" \
	"$PYTHON" -m cdpool import-torch "$T/sd.pth" --model "$CFG" --in-channels 4 \
	--input-norm imagenet -o "$T/x.cdpt"
expect_fail 1 "^cdpool: cannot import '$T/sd.pth': --bands names 2 bands, the net has 3\$" \
	"$PYTHON" -m cdpool import-torch "$T/sd.pth" --model "$CFG" --input-norm none \
	--bands R,G -o "$T/x.cdpt"
expect_fail 2 "^cdp-train: --init-norm needs --init" \
	cdp-train -q --db "$T/pool" --keys "$T/k" --out "$T/e" --model "$CFG" --init-norm
echo "PASS"
