#!/bin/sh
# tests/python/python.sh: the Python package (python/cdpool) against the C
# tools. The package is installed from a copy of python/ into a fresh
# virtual environment over $PYTHON's site packages (numpy, lmdb, torch from
# Debian), with no index and no build isolation, so no network is needed;
# test_cdpool.py then runs under that environment's interpreter on
# fixtures made here by the C tools:
#   - one pool per record dtype (u8 .. f64; nodata masks, zlib, u16
#     labels) and a pool of scalar-class chips (cdp-lmdbpack --list);
#   - a road pool, its pointer file and cdp-train runs logging the keys
#     they read (CDP_TRAIN_LOG_KEYS): one process at global batch 4, 2
#     and 4 ranks with MPI (skipped without $MPIRUN), and a run resumed
#     from a step-5 checkpoint;
#   - one-step cdp-train runs and model_dump's initial weights for the
#     same seed, for the first step's loss (test_cdpool.py) and, under a
#     2-rank gloo DDP job, its gradient (ddp_grad.py);
#   - a pool of value labels (regression) and one-step mse runs on it,
#     plain and augmented, with model_dump's initial weights;
#   - one-step runs at --lr 0 of every kind of loss (a class pool with
#     ignored pixels, the value pool, a multi-label pool) for loss_fn;
# and test_cdpool.py compares PoolDataset's batches with those of the C
# loader (tests/python/batch_dump), and refuses what the C tools refuse
# (truncated pools, directories that are no pool, hostile cfgs and class
# names in checkpoints rewritten by tests/engine/ckpt_edit) with their
# messages. test_model.py checks the Python reader
# of the model cfg language against model_dump, and the ONNX export.
# Skips (77) when $PYTHON lacks numpy or lmdb, or cannot make a venv.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
if ! "$PYTHON" -c 'import numpy, lmdb, setuptools' 2>/dev/null; then
	echo "SKIP: $PYTHON lacks numpy, lmdb or setuptools" >&2
	exit 77
fi
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
SMALL="$CDP_SRCDIR/tests/train/small.cfg:in_h=32,in_w=32"

echo "== install into a fresh venv"
# pip builds in the tree it is given: a copy keeps the source tree clean
cp -R "$CDP_SRCDIR/python" "$T/src"
chmod -R u+w "$T/src"     # a read-only source tree (distcheck)
"$PYTHON" -m venv --system-site-packages --without-pip "$T/venv" ||
	{ echo "SKIP: $PYTHON cannot make a virtual environment" >&2; exit 77; }
VPY=$T/venv/bin/python
"$VPY" -m pip install -q --no-index --no-deps --no-build-isolation "$T/src" >"$T/pip.log" 2>&1 ||
	fail "pip install: $(tail -5 "$T/pip.log")"
rm -rf "$T/src"
where=$(cd "$T" && "$VPY" -c 'import cdpool; print(cdpool.__file__)')
case $where in
"$T/venv/"*) ;;
*) fail "cdpool imported from '$where', not the venv" ;;
esac
export PYTHONDONTWRITEBYTECODE=1

echo "== fixtures"
mkdir "$T/r"
for dt in u8 u16 i16 u32 i32 f32 f64; do
	extra= lab=
	case $dt in
	u8) extra="--label $T/r/$dt""_lab.tif --classes 7 --label-dtype u16" lab="--label-suffix _lab" ;;
	i16|f32) extra="--nodata -7 --nodata-frac 0.05" ;;
	esac
	# shellcheck disable=SC2086
	"$PYTHON" "$MK" "$T/r/$dt.tif" --width 64 --height 64 --bands 2 --dtype $dt --seed 3 $extra
	z=
	[ "$dt" = u16 ] || [ "$dt" = f32 ] && z="--zlib 6"
	# shellcheck disable=SC2086
	cdp-tile -q --size 32 $lab $z "$T/r/$dt.tif" | cdp-lmdbpack -q "$T/p_$dt"
done
"$PYTHON" "$MK" "$T/r/chip_a.tif" --width 16 --height 16 --bands 3 --dtype u8 --seed 4
"$PYTHON" "$MK" "$T/r/chip_b.tif" --width 16 --height 16 --bands 3 --dtype u8 --seed 5
printf 'chip_a.tif 0\nchip_b.tif 2\n' >"$T/r/chips.list"
cdp-lmdbpack -q --list "$T/r/chips.list" "$T/p_class"
cdp-keyshuffle -q --seed 2 -o "$T/i16.keys" "$T/p_i16"

"$PYTHON" "$GEN" "$T/r/road.tif" --size 192 --seed 3 --mask "$T/r/road_mask.tif"
cdp-tile -q --size 32 --label-suffix _mask "$T/r/road.tif" | cdp-lmdbpack -q "$T/pool"
cdp-keyshuffle -q --seed 5 -o "$T/train.keys" "$T/pool"
# two scenes, the second held out: cdp-train validates it with the first's
# statistics (test_val_standardize), keeping best.cdpt by miou (test_compat)
"$PYTHON" "$GEN" "$T/r/two_a.tif" --size 96 --seed 8 --mask "$T/r/two_a_mask.tif"
"$PYTHON" "$GEN" "$T/r/two_b.tif" --size 96 --seed 9 --mask "$T/r/two_b_mask.tif"
cdp-tile -q --size 32 --label-suffix _mask "$T/r/two_a.tif" "$T/r/two_b.tif" | cdp-lmdbpack -q "$T/p_two"
cdp-keyshuffle -q --seed 5 --val-by two_b --val-out "$T/two_val.keys" -o "$T/two_train.keys" "$T/p_two"
C0="--db $T/pool --keys $T/train.keys --threads 1 -q --seed 7"
C="$C0 --model $SMALL"
cdp-train --db "$T/p_two" --keys "$T/two_train.keys" --val-keys "$T/two_val.keys" --threads 1 -q \
	--seed 7 --model "$SMALL" --batch 4 --steps 2 --keep-best miou --out "$T/run_two" ||
	fail "cdp-train --val-keys"
CDP_TRAIN_LOG_KEYS="$T/k1" cdp-train $C --batch 4 --epochs 2 --out "$T/run1" || fail "cdp-train"
CDP_TRAIN_LOG_KEYS="$T/kp" cdp-train $C --batch 5 --epochs 2 --pad-last --out "$T/runp" ||
	fail "cdp-train --pad-last"
CDP_TRAIN_LOG_KEYS="$T/kpa" cdp-train $C0 --model "$SMALL,accumulate=2" --batch 8 --epochs 2 \
	--pad-last --out "$T/runpa" || fail "cdp-train --pad-last with accumulate=2"
cdp-train $C --batch 4 --steps 5 --out "$T/runr" || fail "cdp-train --steps 5"
# LIVE of either kind for info (test_info): admm's z, ema='s trained weights
cdp-train $C --batch 4 --steps 2 --sync admm:2:0.1234567 --out "$T/runadmm" ||
	fail "cdp-train --sync admm"
cdp-train $C0 --model "$SMALL,ema=0.9" --batch 4 --steps 2 --out "$T/runema" || fail "cdp-train ema="
cp "$T/runr/checkpoint.cdpt" "$T/step5.cdpt"
CDP_TRAIN_LOG_KEYS="$T/kr" cdp-train $C --batch 4 --steps 14 --resume --out "$T/runr" ||
	fail "cdp-train --resume"
cdp-train $C0 --model "$CDP_SRCDIR/share/cdpool/models/unet.cfg:width=4,depth=2,in_h=32,in_w=32" \
	--batch 4 --steps 2 --out "$T/runu" || fail "cdp-train unet"
# the first step's loss, with and without augmentation, and model_dump's
# initial weights for the same seed
AUG=in_h=24,in_w=24,crop_h=24,crop_w=24,aug_hflip=1,aug_vflip=1,aug_rot90=1
for v in aug:$AUG plain:in_h=32,in_w=32; do
	name=${v%%:*} ov=${v#*:}
	cdp-train $C0 --model "$CDP_SRCDIR/tests/train/small.cfg:$ov" --batch 4 --steps 1 \
		--log-every 1 --out "$T/first_$name" || fail "cdp-train $name"
	mkdir "$T/init_$name"
	# shellcheck disable=SC2046
	"$CDP_BUILDDIR/tests/engine/model_dump" -s 7 -b 4 -p "$T/init_$name" \
		$(echo "$ov" | tr ',' '\n' | sed 's/^/-D /') "$CDP_SRCDIR/tests/train/small.cfg" \
		>"$T/init_$name/model.json" || fail "model_dump $name"
done
# a pool of value labels (pixel regression, 2 targets) with targets NaN in
# places and invalid pixels (nodata in every band), and one-step mse runs on
# it, plain and with every geometric augmentation (the warp too), with
# model_dump's initial weights: PoolDataset's targets give the loss cdp-train
# logs, and the plain run's checkpoint is a regression net for Deployed
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genvalue.py" --size 64 --seed 2 --targets 2 \
	"$T/r/val.tif" "$T/r/val_value.tif"
"$PYTHON" - "$T/r/val.tif" "$T/r/val_value.tif" <<'EOF'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
s = gdal.Open(sys.argv[1], 1)
a = s.ReadAsArray()
a[:, 3:6, 40:47] = -9999          # invalid: nodata in every band
a[1, 20, 20] = -9999              # in one band only: valid
for i in range(a.shape[0]):
    s.GetRasterBand(i + 1).WriteArray(a[i])
    s.GetRasterBand(i + 1).SetNoDataValue(-9999)
s = None
v = gdal.Open(sys.argv[2], 1)
b = v.ReadAsArray()
b[0, 10:13, 5:9] = np.nan         # no target
b[1, 50, 50:60] = np.nan
for i in range(b.shape[0]):
    v.GetRasterBand(i + 1).WriteArray(b[i])
v = None
EOF
cdp-tile -q --size 32 --label-suffix _value --label-bands 1,2 "$T/r/val.tif" |
	cdp-lmdbpack -q "$T/p_value"
cdp-keyshuffle -q --seed 2 -o "$T/value.keys" "$T/p_value"
for v in vaug:$AUG,aug_scale=0.3,aug_rotate=30 vplain:in_h=32,in_w=32; do
	name=${v%%:*} ov=${v#*:},loss=mse,classes=2
	cdp-train --db "$T/p_value" --keys "$T/value.keys" --threads 1 -q --seed 7 \
		--model "$CDP_SRCDIR/tests/train/small.cfg:$ov" --batch 4 --steps 1 --log-every 1 \
		--out "$T/first_$name" || fail "cdp-train $name"
	mkdir "$T/init_$name"
	# shellcheck disable=SC2046
	"$CDP_BUILDDIR/tests/engine/model_dump" -s 7 -b 4 -p "$T/init_$name" \
		$(echo "$ov" | tr ',' '\n' | sed 's/^/-D /') "$CDP_SRCDIR/tests/train/small.cfg" \
		>"$T/init_$name/model.json" || fail "model_dump $name"
done
# the loss of the torch twin (loss_fn) against cdp-train's for every kind of
# loss: one step at --lr 0 (the checkpoint holds the initial weights) of
#   - a class pool of 3 classes with ignored pixels (label 255, and invalid
#     ones), softmax and (class 2 then ignored) binary losses, options in
#     the cfg that the checkpoint holds;
#   - the value pool (l1, huber);
#   - a multi-label pool (bce with positive weights) on a tiny classifier,
#     also with its chips and label sets mixed (mixup_alpha, cutmix_alpha).
"$PYTHON" "$GEN" "$T/r/ign.tif" --size 64 --seed 5 --mask "$T/r/ign_mask.tif"
"$PYTHON" - "$T/r/ign.tif" "$T/r/ign_mask.tif" <<'EOF'
import sys
from osgeo import gdal
gdal.UseExceptions()
s = gdal.Open(sys.argv[1], 1)
a = s.ReadAsArray()
a[:, 3:9, 40:52] = 0              # invalid: nodata in every band
for i in range(a.shape[0]):
    s.GetRasterBand(i + 1).WriteArray(a[i])
    s.GetRasterBand(i + 1).SetNoDataValue(0)
s = None
m = gdal.Open(sys.argv[2], 1)
b = m.ReadAsArray()
b[20:30, 2:30] = 2                # a third class
b[40:44, 10:20] = 255             # the ignore value
m.GetRasterBand(1).WriteArray(b)
m = None
EOF
cdp-tile -q --size 32 --label-suffix _mask "$T/r/ign.tif" | cdp-lmdbpack -q "$T/p_ign"
cdp-keyshuffle -q --seed 2 -o "$T/ign.keys" "$T/p_ign"
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genmulti.py" "$T/multi" --count 8 --size 16 --seed 3 \
	>/dev/null
cdp-lmdbpack -q --multi-label --classes water,building,tree --list "$T/multi/list.txt" "$T/p_multi"
cdp-keyshuffle -q --seed 2 -o "$T/multi.keys" "$T/p_multi"
printf '%s\n' '[net]' channels=3 in_h=16 in_w=16 classes=3 loss=bce 'class_weights=2;0.5;1' \
	'[conv]' filters=4 activation=relu '[gap]' '[dense]' output=3 >"$T/multi.cfg"
S=$CDP_SRCDIR/tests/train/small.cfg:in_h=32,in_w=32
# NAME POOL KEYS MODEL
while read -r name pool keys model; do
	cdp-train --db "$T/$pool" --keys "$T/$keys" --threads 1 -q --seed 7 --model "$model" \
		--batch 4 --steps 1 --lr 0 --log-every 1 --out "$T/loss_$name" || fail "cdp-train $name"
done <<EOF
ce p_ign ign.keys $S,classes=3
cels p_ign ign.keys $S,classes=3,ignore=1,label_smoothing=0.1,class_weights=1;3;0.5
focal p_ign ign.keys $S,classes=3,loss=focal,focal_gamma=1.5,focal_alpha=0.25;1;2
cedice p_ign ign.keys $S,classes=3,loss=ce+dice,loss_weights=1;0.5,dice_smooth=0.5
lovasz p_ign ign.keys $S,classes=3,loss=lovasz+tversky,tversky_alpha=0.7,tversky_beta=0.3
bce p_ign ign.keys $S,classes=2,ignore=2,outputs=1,loss=bce
bdice p_ign ign.keys $S,classes=2,ignore=2,outputs=1,loss=bce+dice,loss_weights=0.5;2
l1 p_value value.keys $S,classes=2,loss=l1
huber p_value value.keys $S,classes=2,loss=huber,huber_delta=0.5,loss_weights=2
multi p_multi multi.keys $T/multi.cfg
mixml p_multi multi.keys $T/multi.cfg:mixup_alpha=0.4,cutmix_alpha=1
EOF
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	MP="$mpirun --oversubscribe"
	[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe"
	export CDP_DIST_TIMEOUT=60
	CDP_TRAIN_LOG_KEYS="$T/k2" $MP -np 2 cdp-train $C --batch 2 --epochs 2 --out "$T/run2" ||
		fail "cdp-train, 2 ranks"
	CDP_TRAIN_LOG_KEYS="$T/k4" $MP -np 4 cdp-train $C --batch 1 --epochs 2 --out "$T/run4" ||
		fail "cdp-train, 4 ranks"
else
	echo "SKIP: the 2 and 4 rank runs (no MPIRUN); the sampler is checked against 1 process"
fi
"$CDP_BUILDDIR/tests/engine/model_dump" -i 3,32,32 -b 4 -D in_h=32 -D in_w=32 \
	"$CDP_SRCDIR/tests/train/small.cfg" >"$T/small.json" || fail "model_dump"

echo "== test_model.py"
"$VPY" "$CDP_SRCDIR/tests/python/test_model.py" "$T"

echo "== test_cdpool.py"
"$VPY" "$CDP_SRCDIR/tests/python/test_cdpool.py" "$T"

if ! "$VPY" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
	echo "SKIP: the DDP runs: no torch.distributed in $VPY"
	exit 0
fi
# ddp2 NAME LAST SCRIPT ARGS...: SCRIPT as 2 ranks of a gloo job on this
# host, with torchrun's environment set by hand (Debian's torch 1.13
# torchrun fails under Python 3.11); rank r's output in $T/NAME.r. Each rank
# runs under timeout(1): ranks of torch 1.13 have finished their work
# (rank 0's last line, LAST, printed: every collective of every rank done)
# and then never exited, in gloo's teardown; such a rank is killed and the
# job counts by its output, which the caller checks; any other timeout or
# failure fails.
ddp2() {
	name=$1 last=$2
	shift 2
	port=$("$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	pids=
	for r in 0 1; do
		RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
			OMP_NUM_THREADS=1 timeout -k 5 240 "$VPY" "$@" >"$T/$name.$r" 2>&1 &
		pids="$pids $!"
	done
	r=0
	for p in $pids; do
		set +e; wait "$p"; rc=$?; set -e   # common.sh: set -e
		ddp_rank_ok "$name" "$last" $r $rc
		r=$((r + 1))
	done
	cat "$T/$name.0"
}
# ddp_rank_ok NAME LAST R RC: rank R of the job NAME exited RC: a timeout
# after rank 0 printed LAST is noted, any other failure fails
ddp_rank_ok() {
	if [ "$4" -eq 124 ] && grep -q "$2" "$T/$1.0"; then
		echo "note: $1: rank $3 finished (rank 0 printed '$2') but did not exit; killed after 240 s"
	elif [ "$4" -ne 0 ]; then
		fail "$1: rank $3 failed (exit $4): $(cat "$T/$1.0" "$T/$1.1")"
	fi
}
# ddp_doc NAME LAST POOL KEYS VALKEYS: the 2-rank launch of cdpool(7)
# (for Debian's torch 1.13, whose torchrun fails) as printed there and in
# python/README.md, its port made a free one and its python3 one that
# runs $VPY as ddp2 does, rank r's output in $T/NAME.r, its status in
# $T/NAME.rc.r, checked as ddp2 checks them
ddp_doc() {
	name=$1 last=$2
	sed -n '/^\.\\" BEGIN DDP LAUNCH/,/^\.\\" END DDP LAUNCH/p' "$CDP_SRCDIR/man/cdpool.7" |
		sed -e '1d;$d' -e 's/\\-/-/g' -e 's/\\e/\\/g' >"$T/launch.txt"
	[ -s "$T/launch.txt" ] || fail "no DDP launch in cdpool.7"
	while IFS= read -r l; do
		grep -qxF "    $l" "$CDP_SRCDIR/python/README.md" ||
			fail "python/README.md lacks cdpool(7)'s DDP launch line '$l'"
	done <"$T/launch.txt"
	port=$("$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cp "$T/launch.txt" "$T/launch.sh"
	for sub in "MASTER_PORT=29500|MASTER_PORT=$port" \
		"python3 train_ddp.py POOL KEYS VALKEYS|python3 $T/train_ddp.py $3 $4 $5"; do
		[ "$(grep -c -F -- "${sub%%|*}" "$T/launch.txt")" -eq 1 ] ||
			fail "cdpool(7)'s DDP launch changed: '${sub%%|*}' is not in it once: $(cat "$T/launch.txt")"
		sed -i "s|$sub|" "$T/launch.sh"
	done
	mkdir -p "$T/ddpbin"
	printf '#!/bin/sh\nOMP_NUM_THREADS=1 timeout -k 5 240 "%s" "$@" >"%s.$RANK" 2>&1\necho $? >"%s.rc.$RANK"\n' \
		"$VPY" "$T/$name" "$T/$name" >"$T/ddpbin/python3"
	chmod +x "$T/ddpbin/python3"
	rm -f "$T/$name.rc.0" "$T/$name.rc.1"
	(cd "$T" && PATH="$T/ddpbin:$PATH" sh -eu "$T/launch.sh") || fail "$name: the launch failed"
	for r in 0 1; do
		[ -s "$T/$name.rc.$r" ] || fail "$name: rank $r did not run: $(cat "$T/$name.$r" 2>/dev/null)"
		ddp_rank_ok "$name" "$last" $r "$(cat "$T/$name.rc.$r")"
	done
	cat "$T/$name.0"
}

echo "== DDP, 2 ranks, gloo: the first step's gradient against cdp-train's, then training"
ddp2 grad '^epoch 2 ' "$CDP_SRCDIR/tests/python/ddp_grad.py" "$T" 3
grep -q "^ok   rank 0 of 2: the first step's loss" "$T/grad.0" || fail "ddp_grad.py checked nothing"
awk '$1 == "epoch" {l[n++] = $4} END { if (n != 3 || !(l[2] < 0.8 * l[0])) exit 1 }' "$T/grad.0" ||
	fail "ddp_grad.py: the loss did not fall"

echo "== the DDP example of cdpool(7): 2 ranks, gloo, started by its launch for torch 1.13"
cdp-keyshuffle -q --seed 3 --val 0.25 --val-out "$T/ddp_val.keys" -o "$T/ddp_rest.keys" "$T/pool"
# a pool of 5 classes: a label raster of 0..4 in bands of rows
"$PYTHON" "$MK" "$T/r/five.tif" --width 128 --height 128 --bands 2 --dtype u8 --seed 6
"$PYTHON" - "$T/r/five.tif" "$T/r/five_lab.tif" <<'EOF'
import sys
import numpy as np
from osgeo import gdal
src = gdal.Open(sys.argv[1])
ds = gdal.GetDriverByName("GTiff").Create(sys.argv[2], 128, 128, 1, gdal.GDT_Byte)
ds.SetGeoTransform(src.GetGeoTransform())
ds.SetProjection(src.GetProjection())
ds.GetRasterBand(1).WriteArray((np.arange(128)[:, None] // 26 * np.ones((1, 128))).astype(np.uint8))
ds = None
EOF
cdp-tile -q --size 32 --label-suffix _lab "$T/r/five.tif" | cdp-lmdbpack -q "$T/p_five"
cdp-keyshuffle -q --seed 3 -o "$T/five.keys" "$T/p_five"
sed -n '/^\.\\" BEGIN DDP EXAMPLE/,/^\.\\" END DDP EXAMPLE/p' "$CDP_SRCDIR/man/cdpool.7" \
	| sed '1d;$d' | sed 's/\\e/\\/g' >"$T/train_ddp.py"
[ -s "$T/train_ddp.py" ] || fail "no DDP example in cdpool.7"
ddp_doc ddp '^validation 3 ' "$T/pool" "$T/train.keys" "$T/ddp_val.keys"
awk '$1 == "epoch" {l[n++] = $4} END { if (n != 4 || !(l[3] < 0.8 * l[0])) exit 1 }' "$T/ddp.0" ||
	fail "DDP example: the loss did not fall"
[ "$(grep -c '^validation [0-3] loss [0-9]' "$T/ddp.0")" -eq 4 ] ||
	fail "DDP example: no validation loss each epoch: $(cat "$T/ddp.0")"
# its head has the pool's classes: a 5-class pool (labels 0..4) once met a
# head of 2 (IndexError / 'Target 4 is out of bounds')
ddp2 ddp5 '^epoch 3 ' "$T/train_ddp.py" "$T/p_five" "$T/five.keys"
