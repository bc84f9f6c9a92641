# unet_parity.sh compares the engine with PyTorch (Debian's python3-torch
# under $(PYTHON)) through tests/engine/model_dump.
if HAVE_OPENBLAS
TESTS += tests/parity/unet_parity.sh
endif
EXTRA_DIST += tests/parity
