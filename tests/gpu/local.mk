# tests/gpu/: the CUDA backend against the CPU one, op by op, whole models
# and 2 ranks on one GPU; each exits 77 without a GPU. selfcheck.sh runs the
# two programs with a second CPU backend as the "device" (CDP_GPU_TEST_PEER).
# tests/gpu/run-device.sh runs all of it on a GPU machine (tests/gpu/README).
GPU_HARNESS = tests/gpu/gpu_harness.c tests/gpu/gpu_harness.h tests/unit/tap.h
tests_gpu_test_ops_SOURCES = tests/gpu/test_ops.c tests/gpu/test_ops.h tests/gpu/test_ops_layers.c \
	tests/gpu/test_ops_loss.c tests/gpu/test_ops_data.c $(GPU_HARNESS)
tests_gpu_test_ops_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_ops_LDADD = $(ENGINE_LIBS)
tests_gpu_test_model_SOURCES = tests/gpu/test_model.c $(GPU_HARNESS)
tests_gpu_test_model_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_model_LDADD = $(ENGINE_LIBS)
# the choice among cuDNN's algorithms (engine/cuda/cuda_algo.h, plain C):
# runs everywhere
tests_gpu_test_conv_algo_SOURCES = tests/gpu/test_conv_algo.c engine/cuda/cuda_algo.h \
	tests/unit/tap.h
tests_gpu_test_conv_algo_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
# a net's workspace after a precision change, on a CPU backend that sizes
# convolutions as the CUDA one does: runs everywhere
tests_gpu_test_ws_precision_SOURCES = tests/gpu/test_ws_precision.c tests/unit/tap.h
tests_gpu_test_ws_precision_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_gpu_test_ws_precision_LDADD = $(ENGINE_LIBS)
# the GPU taken before MPI_Init (engine/device.h): runs everywhere
tests_gpu_test_devsel_SOURCES = tests/gpu/test_devsel.c tests/unit/tap.h
tests_gpu_test_devsel_CPPFLAGS = $(ENGINE_TEST_CPPFLAGS)
tests_gpu_test_devsel_LDADD = $(ENGINE_LIBS)
# run-device.sh's step runner, on fake commands
TESTS += tests/gpu/steps_check.sh
check_PROGRAMS += tests/gpu/test_conv_algo
TESTS += tests/gpu/test_conv_algo
# the engine's tests (and kernel_emu.sh, below) with HAVE_OPENBLAS, the
# ranks' (cdp-train) with HAVE_MPI
if HAVE_OPENBLAS
check_PROGRAMS += tests/gpu/test_ops tests/gpu/test_model tests/gpu/test_ws_precision tests/gpu/test_devsel
TESTS += tests/gpu/test_ws_precision tests/gpu/test_devsel
TESTS += tests/gpu/test_ops tests/gpu/test_model tests/gpu/selfcheck.sh tests/gpu/kernel_emu.sh
# the CPU backend's bf16 against its fp32 with test_ops and test_model
TESTS += tests/gpu/cpu_bf16.sh tests/gpu/cpu_bf16_emu.sh
endif
if HAVE_MPI
TESTS += tests/gpu/two_ranks.sh tests/gpu/multi_gpu.sh
endif

# tests/gpu/kernel_emu.sh: our kernels (engine/cuda/cuda_kern_*.cu) on the
# host emulator of tests/gpu/emu/ against the CPU backend, on every machine.
# It builds tests/gpu/emu/kernel_check itself, with these (and skips only
# without a C++ compiler, Python 3 or CUDA's headers).
AM_TESTS_ENVIRONMENT += \
	CDP_EMU_CXX='$(CXX)'; CDP_EMU_CXXFLAGS='$(CXXFLAGS) $(SAN_FLAGS)'; \
	CDP_EMU_CUDA_DIR='$(CUDA_DIR)'; CDP_EMU_LIBS='$(OPENBLAS_LIBS) $(SAN_FLAGS)'; \
	export CDP_EMU_CXX CDP_EMU_CXXFLAGS CDP_EMU_CUDA_DIR CDP_EMU_LIBS;
EXTRA_DIST += tests/gpu/kernel_emu.sh tests/gpu/emu/emu.h tests/gpu/emu/mkemu.py \
	tests/gpu/emu/kernel_check.cpp tests/gpu/emu/kernel_check_emu.h \
	tests/gpu/emu/kernel_check_ops.h tests/gpu/emu/mutate.sh
CLEANFILES += tests/gpu/emu/kernel_check tests/gpu/emu/build.sh tests/gpu/emu/gen/*
EXTRA_DIST += tests/gpu/selfcheck.sh tests/gpu/cpu_bf16.sh tests/gpu/cpu_bf16_emu.sh tests/gpu/two_ranks.sh tests/gpu/multi_gpu.sh \
	tests/gpu/ranks_common.sh tests/gpu/mkpool.sh \
	tests/gpu/run-device.sh tests/gpu/steps.sh tests/gpu/steps_check.sh tests/gpu/dryrun.sh \
	tests/gpu/devenv.sh tests/gpu/arc4random.c \
	tests/gpu/elf_weak_version.py tests/gpu/README
