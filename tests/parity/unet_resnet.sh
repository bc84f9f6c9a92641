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
# here (unet_parity.sh does on the small nets): at 64x64, batch 2, they are
# ill-conditioned in float32 (layer4's batch statistics over 8 values), so
# PyTorch float32 itself strays up to ~0.5% from float64 on some seeds, as
# the engine does on others.
# Needs torch and torchvision in $PYTHON (/usr/bin/python3); skips (77) without.
. "$(dirname "$0")/resnet_import.sh"
