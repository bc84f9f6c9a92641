#!/bin/sh
# The photometric aug_* keys, aug_scale and aug_rotate in cdp-train
# (engine/augment.h), on the road
# pool of train_common.sh with $SMALL:
#  - a run with them learns from other inputs than one without (its losses
#    differ from the same run's without the keys);
#  - cut at step 4 and resumed to 10, its losses equal the uninterrupted
#    run's bit for bit (the changes are drawn from the per-sample stream);
#  - CDP_TRAIN_DATA=device (the device's prep_batch, which has only the
#    geometry) is refused with a message naming the host path.
. "$CDP_SRCDIR/tests/train/train_common.sh"
PH="aug_brightness=0.3,aug_contrast=0.2,aug_gamma=0.3,aug_gamma_p=0.5,aug_band_jitter=0.2"
PH="$PH,aug_noise=0.1,aug_noise_p=0.5,aug_hflip=1,aug_scale=0.3,aug_rotate=30,aug_rotate_p=0.5"
R="--db $T/pool --keys $T/train.keys --threads 1 -q --seed 3 --batch 4 --log-every 1"
R="$R --schedule constant --lr 0.01 --checkpoint-every 2"
resumed_same "$R" "$SMALL:$PH" "$SMALL:aug_hflip=1" "the photometric keys"
CDP_TRAIN_DATA=device cdp-train $R --model "$SMALL:$PH" --steps 1 --out "$T/d" 2>"$T/err" &&
	fail "CDP_TRAIN_DATA=device with photometric keys ran"
grep -q "need the host data path" "$T/err" ||
	fail "device path: $(cat "$T/err")"
echo "CDP_TRAIN_DATA=device refused: $(cat "$T/err")"
