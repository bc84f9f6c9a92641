# unet_parity.sh compares the engine with PyTorch (Debian's python3-torch
# under $(PYTHON)) through tests/engine/model_dump.
TESTS += tests/parity/unet_parity.sh
EXTRA_DIST += tests/parity
