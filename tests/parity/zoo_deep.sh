#!/bin/sh
# zoo_deep.sh: the whole networks of the deeper zoo cfgs,
# share/cdpool/models/{unet,fpn,deeplabv3plus}-resnet{34,50}.cfg, equal
# cdpool.torch_model's twin. zoo_deep.py saves torchvision's resnet34 and
# resnet50 with seeded random weights and batchnorm statistics, imports each
# into the three cfgs (python3 -m cdpool import-torch, in-process), runs
# tests/engine/model_dump --init on them (3x64x64, batch 2; the decoder and
# head initialized as usual, every encoder tensor taken) and replays the
# forward in the twin in float64 and float32: the training-mode logits, the
# loss, every batchnorm's running statistics after that forward and the
# eval-mode logits equal float64's within 3e-4, or within three times
# PyTorch float32's own largest error against float64 where that is more
# (training-mode batchnorm over as few as 8 values, as in layer4 and
# deeplabv3plus-resnet50's ASPP at 4x4, magnifies float32 rounding: there
# PyTorch float32 strays ~3e-4 itself). unet-resnet50's eval logits scaled
# by 1.002 fail it.
# Gradients are not compared on these nets: over ~10^6 ReLUs a few
# pre-activations lie within float32 rounding of 0 (one at -9e-6 in
# unet-resnet18's decoder.blocks.3.conv1.1 at this size), take the other
# branch in any float32 run, and the batchnorm before them spreads that
# pixel's gradient over its whole channel: 0.5-1.6% on the upstream
# gradients, the engine's and PyTorch float32's alike, seed by seed
# (unet_parity.sh compares gradients on the small nets).
# Budget: about 60 s of CPU (measured 37 s user and 24 s system on 2
# cores: 6 imports and model_dump runs, 12 twin forwards).
# Needs torch and torchvision in $PYTHON (/usr/bin/python3); skips (77) without.
. "$(dirname "$0")/resnet_import.sh"
