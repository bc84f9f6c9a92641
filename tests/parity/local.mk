# unet_parity.sh compares the engine with PyTorch (Debian's python3-torch
# under $(PYTHON)) through tests/engine/model_dump.
if HAVE_OPENBLAS
TESTS += tests/parity/unet_parity.sh
# bf16_parity.sh: the engine's bf16 (model_dump --precision bf16) no
# further from PyTorch float64 than twice PyTorch's bf16 autocast is
TESTS += tests/parity/bf16_parity.sh
# resnet_import.sh: torchvision's ResNets (python3-torchvision) imported by
# python3 -m cdpool import-torch equal the engine's resnet*.cfg
TESTS += tests/parity/resnet_import.sh
# unet_resnet.sh: unet-resnet{18,34,50}.cfg take torchvision ResNet weights
# for their encoder and run as the PyTorch twin does
TESTS += tests/parity/unet_resnet.sh
# fpn_deeplab.sh: fpn-resnet*.cfg and deeplabv3plus-resnet*.cfg take
# torchvision ResNet weights, their encoders' stages are torchvision's
# (dilated for DeepLabv3+) and they run as the PyTorch twin does
TESTS += tests/parity/fpn_deeplab.sh
# zoo_deep.sh: {unet,fpn,deeplabv3plus}-resnet{34,50}.cfg on torchvision
# ResNet weights run forward as the PyTorch twin does
TESTS += tests/parity/zoo_deep.sh
endif
EXTRA_DIST += tests/parity
