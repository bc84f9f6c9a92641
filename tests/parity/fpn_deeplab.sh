#!/bin/sh
# fpn_deeplab.sh: share/cdpool/models/fpn-resnet{18,34,50}.cfg and
# deeplabv3plus-resnet{18,34,50}.cfg on torchvision's ResNets. fpn_deeplab.py
# saves torchvision's resnet18, 34 and 50 with seeded random weights and
# batchnorm statistics and imports each with python3 -m cdpool import-torch
# into both: every encoder tensor matched (the decoder and the head, the
# conv before the closing upsample, left out; only fc unused); the
# parameter count is torchvision's encoder plus the decoder's by its
# definition (smp.FPN's, GroupNorm counted as batchnorm; DeepLabv3+ with
# plain convolutions); the laterals, ASPP (rates 6, 12, 18, its pooled map
# broadcast) and skips join the right layers at the right sizes; and,
# except for the 34s and fpn-resnet50, tests/engine/model_dump --init (3x64x64, batch
# 2) takes every encoder tensor and its eval-mode outputs of layer1..layer4
# equal torchvision's on the same input within 1e-4 (for deeplabv3plus,
# torchvision's with replace_stride_with_dilation=[False, False, True]:
# layer4 at 1/16). For the 18s, parity.py --forward-only replays the run in
# cdpool.torch_model's twin: the training-mode logits, loss, batchnorm
# running statistics and eval logits equal PyTorch float64's within 3e-4
# and float32's within 1e-2 (see unet_resnet.sh), and fpn-resnet18's eval
# logits scaled by 1.001 fail it. (The 50s' decoders are the 18s' with
# other channel counts; left out for time.)
# Needs torch and torchvision in $PYTHON (/usr/bin/python3); skips (77) without.
. "$(dirname "$0")/resnet_import.sh"
