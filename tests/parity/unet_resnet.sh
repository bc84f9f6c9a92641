#!/bin/sh
# unet_resnet.sh: share/cdpool/models/unet-resnet{18,34,50}.cfg, smp's U-Net
# on torchvision's ResNets. unet_resnet.py saves torchvision's resnet18/34/50
# with seeded random weights and batchnorm statistics, imports each with
# python3 -m cdpool import-torch into the U-Net: the import succeeds with
# every encoder tensor matched (only the decoder and head left out, only fc
# unused) and the checkpoint holds torchvision's tensors bit for bit;
# tests/engine/model_dump --init (3x64x64, batch 2) takes all of them and
# initializes exactly the decoder and head; the parameter count is
# torchvision's encoder plus smp.Unet's decoder (decoder_channels
# 256,128,64,32,16, a 3x3 head); the skips join the right encoder outputs;
# and parity.py --forward-only replays the run in cdpool.torch_model's twin:
# the training-mode logits, loss, batchnorm running statistics and eval
# logits equal PyTorch float64's within 3e-4 (layer4's batch statistics
# are over 8 values at 64x64, batch 2) and PyTorch float32's within 1e-2
# (float32 PyTorch itself strays that far from float64 there); eval logits
# scaled by 1.001 fail it. Gradients and optimizer steps are not compared
# here (unet_parity.sh does on the small nets): at 64x64, batch 2, a fused
# ReLU's pre-activation can lie within float32 rounding of 0 (at seed 7, one
# element of decoder.blocks.3.conv1 is -9e-6 in float64 and just above 0 in
# the engine's float32), so one pixel's gradient passes where float64 blocks
# it, and through batchnorm's mean-of-gradient term every gradient upstream
# moves by 0.5-1.6%; flipping that element in float64 brings the whole
# gradient within 1.2e-5 (tests/parity/zoo_deep.sh's header has the analysis).
# Needs torch and torchvision in $PYTHON (/usr/bin/python3); skips (77) without.
. "$(dirname "$0")/resnet_import.sh"
