#!/bin/sh
# tests/gpu/cpu_bf16_emu.sh: tests/gpu/cpu_bf16.sh on the emulated bf16
# kernels, which every CPU runs (see there).
BF16_EMU=1
. "$CDP_SRCDIR/tests/gpu/cpu_bf16.sh"
