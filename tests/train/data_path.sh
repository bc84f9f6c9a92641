#!/bin/sh
# tests/train/data_path.sh: cdp-train's two data paths (loader.h "The data
# path") train alike. On a GPU the loader hands out raw tiles and the backend
# converts, standardizes and augments them (prep_batch); CDP_TRAIN_DATA=device
# runs that path on the CPU backend, CDP_TRAIN_DATA=host the loader's float
# path. With flips, quarter turns and a crop drawn per sample:
#  - per pool, the two paths give the same losses and the same checkpoint,
#    bit for bit: uint8 roads (per-pixel labels), uint16 bands with nodata
#    pixels and a masked rectangle (invalid pixels: 0 in every band, labels
#    ignored by the loader), float32 and float64 with NaN as nodata and
#    values that are not finite as float32 in single bands, and uint8 scene
#    tiles with one class label each (a classifier with batchnorm); with
#    validation too, which stays on the host path;
#  - train.log names the path, and the bytes a batch sent to the device are
#    the raw tile and its int32 labels on the device path (fewer than the
#    floats of the host path for the uint8 roads);
#  - a label that is not a class of the model is refused before step 1 by
#    the pool's class histogram, and, in a pool without one, stops both
#    paths at the same record; a CDP_TRAIN_DATA that is neither host nor device is an error.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"

"$PYTHON" "$GEN" "$T/r.tif" --size 256 --seed 3 --mask "$T/r_mask.tif"
cdp-tile -q --size 64 --label-suffix _mask "$T/r.tif" | cdp-lmdbpack -q "$T/u8"
# uint16 chips packed by --list, whose labels keep their class at invalid
# pixels (cdp-tile would store the ignore value there): the loader ignores
# them
mkdir "$T/wc"
for i in 0 1 2 3 4 5 6 7 8; do
	"$PYTHON" "$MK" "$T/wc/w_${i}_0.tif" --width 64 --height 64 --bands 2 --dtype u16 \
		--nodata 0 --nodata-frac 0.05 --mask-rect 10,20,40,30 --seed "$i" \
		--label "$T/wc/l_$i.tif" --classes 3 >&2
	echo "w_${i}_0.tif l_$i.tif"
done >"$T/wc/list.txt"
cdp-lmdbpack -q --list "$T/wc/list.txt" "$T/u16"
# float bands: NaN as nodata in every band of 5% of the pixels (invalid),
# and in one band only NaN, +-inf and, for f64, +-1e39 (inf as a float32)
# at others (valid pixels with values the loader sets to 0)
"$PYTHON" - "$T" <<'PYEOF'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
for name, gdt, big in (("f32", gdal.GDT_Float32, np.inf), ("f64", gdal.GDT_Float64, 1e39)):
    rng = np.random.default_rng(5)
    a = rng.normal(100, 50, (3, 192, 192))
    a[:, rng.random((192, 192)) < 0.05] = np.nan
    a[1][rng.random((192, 192)) < 0.03] = np.nan
    a[2][rng.random((192, 192)) < 0.02] = big
    a[2][rng.random((192, 192)) < 0.02] = -big
    ds = gdal.GetDriverByName("GTiff").Create("%s/%s.tif" % (sys.argv[1], name), 192, 192, 3, gdt)
    ds.SetGeoTransform((500000, 0.5, 0, 5800000, 0, -0.5))
    for b in range(3):
        ds.GetRasterBand(b + 1).WriteArray(a[b])
        ds.GetRasterBand(b + 1).SetNoDataValue(float("nan"))
    ds = None
    lab = gdal.GetDriverByName("GTiff").Create("%s/%s_l.tif" % (sys.argv[1], name), 192, 192, 1,
                                               gdal.GDT_Byte)
    lab.SetGeoTransform((500000, 0.5, 0, 5800000, 0, -0.5))
    lab.GetRasterBand(1).WriteArray((rng.random((192, 192)) < 0.4).astype(np.uint8))
    lab = None
PYEOF
for p in f32 f64; do
	cdp-tile -q --size 64 --label "$T/${p}_l.tif" "$T/$p.tif" | cdp-lmdbpack -q "$T/$p"
done
"$PYTHON" "$GEN" --scene-tiles "$T/sc" --count 12 --size 64 --seed 6
# chips keyed by their stems (green_03, ...: cdp-keys(5))
cdp-lmdbpack -q --list "$T/sc/list.txt" "$T/cls"
for p in u8 u16 f32 f64 cls; do
	cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$T/$p.val" -o "$T/$p.keys" "$T/$p"
done

cat >"$T/seg.cfg" <<'CFG'
[net]
channels=3
in_h=48
in_w=48
classes=2
loss=ce
optimizer=sgd
lr=0.05
momentum=0.9
aug_hflip=1
aug_vflip=1
aug_rot90=1
crop_h=48
crop_w=48
[vars]
width=4
[conv]
filters=${width}
activation=relu
[conv]
filters=${width}
activation=relu
[conv]
filters=${classes}
size=1
CFG
CLS="$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=2"
CLS="$CLS,aug_hflip=1,aug_vflip=1,aug_rot90=1,crop_h=48,crop_w=48"
losses() { sed -n 's/^{"type":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
# bytes RUN: the bytes a batch sent to the device, from train.log
bytes() { sed -n 's/.*data path [a-z]*: \([0-9]*\) bytes a batch to the device.*/\1/p' "$T/$1/train.log"; }

# same NAME POOL MODEL [options]: both paths, compared
same() {
	n=$1 p=$2 m=$3
	shift 3
	for d in host device; do
		CDP_TRAIN_DATA=$d cdp-train --db "$T/$p" --keys "$T/$p.keys" --model "$m" \
			--out "$T/$n.$d" --batch 4 --steps 6 --log-every 1 --threads 1 --seed 7 -q "$@" ||
			fail "$n: the $d path did not train"
		losses "$T/$n.$d/metrics.jsonl" >"$T/$n.$d.l"
	done
	grep -q "data path host: float32 tiles, prepared by the loader" "$T/$n.host/train.log" ||
		fail "$n: train.log lacks the host path: $(grep 'data path' "$T/$n.host/train.log")"
	grep -q "data path device: raw $(echo "$p" | sed 's/cls/u8/') tiles, prepared by the cpu backend" \
		"$T/$n.device/train.log" ||
		fail "$n: train.log lacks the device path: $(grep 'data path' "$T/$n.device/train.log")"
	[ "$(wc -l <"$T/$n.host.l")" -eq 6 ] || fail "$n: $(wc -l <"$T/$n.host.l") step lines, want 6"
	! grep -q -i nan "$T/$n.host.l" || fail "$n: a loss is not a number: $(cat "$T/$n.host.l")"
	cmp -s "$T/$n.host.l" "$T/$n.device.l" ||
		fail "$n: the paths' losses differ: $(diff "$T/$n.host.l" "$T/$n.device.l" | head -4)"
	cmp -s "$T/$n.host/checkpoint.cdpt" "$T/$n.device/checkpoint.cdpt" ||
		fail "$n: the paths' checkpoints differ"
	echo "$n: host = device, bit for bit ($(bytes "$n.host") and $(bytes "$n.device") bytes a batch)"
}

echo "== the paths agree"
same u8 u8 "$T/seg.cfg"
same u16 u16 "$T/seg.cfg:channels=2,classes=3"
same f32 f32 "$T/seg.cfg"
same f64 f64 "$T/seg.cfg"
same cls cls "$CLS"
same val u8 "$T/seg.cfg" --val-keys "$T/u8.val" --val-every 3
for d in host device; do
	grep '"type":"val"' "$T/val.$d/metrics.jsonl" >"$T/val.$d.v"
done
[ "$(wc -l <"$T/val.host.v")" -eq 2 ] || fail "want 2 validation lines, got $(wc -l <"$T/val.host.v")"
cmp -s "$T/val.host.v" "$T/val.device.v" || fail "the paths validate differently"

echo "== bytes a batch"
# 4 tiles of 3x64x64 uint8 (1 byte a value) and 64x64 int32 labels on the
# device path; 3x48x48 float32 and 48x48 int32 labels after the crop on the
# host path; no invalid pixel in the roads, so no validity bytes
h=$(bytes u8.host) d=$(bytes u8.device)
[ "$d" -eq $((4 * (3 * 64 * 64 + 4 * 64 * 64))) ] || fail "device path: $d bytes a batch"
[ "$h" -eq $((4 * (4 * 3 * 48 * 48 + 4 * 48 * 48))) ] || fail "host path: $h bytes a batch"
[ "$d" -lt "$h" ] || fail "the device path sends $d bytes a batch, the host path $h"

echo "== a label that is not a class"
# the uint16 chips' labels 0..2 against a 2-class model: the pool's class
# histogram refuses them before step 1 on both paths
for d in host device; do
	expect_fail 1 "^cdp-train: '$T/u16' holds label 2 ([0-9]* pixels) (meta 'classes'), which the model (2 classes, 0 to 1, ignore 255) has no class for\$" \
		env CDP_TRAIN_DATA=$d cdp-train --db "$T/u16" --keys "$T/u16.keys" \
		--model "$T/seg.cfg:channels=2" --out "$T/x.$d" -q --steps 2 --batch 4
done
# without the histogram (a pool whose meta lacks it) both paths stop at the
# same record with the same message
"$PYTHON" - "$T/u16" <<'PYEOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=4)
with env.begin(write=True, db=env.open_db(b"meta")) as txn:
    assert txn.delete(b"classes")
PYEOF
for d in host device; do
	expect_fail 1 "cdp-train: rank 0: '$T/u16': record 'w_[0-9]_0': label 2 is not a class of the model" \
		env CDP_TRAIN_DATA=$d cdp-train --db "$T/u16" --keys "$T/u16.keys" \
		--model "$T/seg.cfg:channels=2" --out "$T/x.$d" -q --steps 2 --batch 4
	grep 'label 2' "$T/err" >"$T/err.$d"
done
cmp -s "$T/err.host" "$T/err.device" ||
	fail "the paths refuse differently: $(cat "$T/err.host" "$T/err.device")"

echo "== a bad CDP_TRAIN_DATA"
expect_fail 1 "cdp-train: CDP_TRAIN_DATA: 'gpu' is not host or device" env CDP_TRAIN_DATA=gpu \
	cdp-train --db "$T/u8" --keys "$T/u8.keys" --model "$T/seg.cfg" --out "$T/x" -q --steps 1
[ ! -e "$T/x/metrics.jsonl" ] || fail "a refused run wrote metrics.jsonl"

echo "== statistics out of float32 range (f64 near 1e300: the sum of squares overflows)"
"$PYTHON" - "$T/huge.tif" <<'PYEOF'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
a = np.random.default_rng(3).normal(1.0, 0.5, (3, 64, 64)) * 1e300
ds = gdal.GetDriverByName("GTiff").Create(sys.argv[1], 64, 64, 3, gdal.GDT_Float64)
ds.SetGeoTransform((500000, 0.5, 0, 5800000, 0, -0.5))
for b in range(3):
    ds.GetRasterBand(b + 1).WriteArray(a[b])
ds = None
lab = gdal.GetDriverByName("GTiff").Create(sys.argv[1][:-4] + "_l.tif", 64, 64, 1, gdal.GDT_Byte)
lab.SetGeoTransform((500000, 0.5, 0, 5800000, 0, -0.5))
lab.GetRasterBand(1).WriteArray((a[0] > 1e300).astype(np.uint8))
lab = None
PYEOF
cdp-tile -q --size 32 --label "$T/huge_l.tif" "$T/huge.tif" | cdp-lmdbpack -q "$T/huge"
cdp-keyshuffle -q --seed 1 -o "$T/huge.keys" "$T/huge"
expect_fail 1 "'$T/huge': band 1 statistics are out of float32 range" \
	cdp-train --db "$T/huge" --keys "$T/huge.keys" --model "$T/seg.cfg" --out "$T/xh" -q --steps 1
[ ! -e "$T/xh/checkpoint.cdpt" ] || fail "a refused run wrote a checkpoint"
exit 0
