# engine/: the network engine. The backend interface (backend.h) with the CPU
# backend (cpu/, the reference) and the CUDA backend (cuda/, only with
# HAVE_CUDA), the layers (layers/), the net, losses and optimizers, the model
# language (cfg/) and the checkpoint format (ckpt/). No MPI: the
# communication layer is engine/dist/ (dist/local.mk). Built with OpenBLAS
# (HAVE_OPENBLAS; HAVE_CUDA implies it).
if HAVE_OPENBLAS
noinst_LIBRARIES += engine/libcdpengine.a
dist_man_MANS += man/cdp-checkpoint.5 man/cdp-model.5
else
EXTRA_DIST += man/cdp-checkpoint.5 man/cdp-model.5
endif
ENGINE_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/engine $(OPENBLAS_CFLAGS) $(LMDB_CFLAGS) $(ZLIB_CFLAGS)
engine_libcdpengine_a_CPPFLAGS = $(ENGINE_CPPFLAGS) $(CUDA_CPPFLAGS)
engine_libcdpengine_a_SOURCES = \
	engine/backend.h engine/backend.c engine/net.h engine/net.c engine/net_plan.c \
	engine/net_plan.h engine/layers.h \
	engine/loss.c engine/loss.h engine/loss_host.c engine/loss_host.h engine/optim.c engine/optim.h \
	engine/device.h engine/device.c engine/precision.c engine/features.c \
	engine/augment.h engine/augment.c \
	engine/cpu/cpu.h engine/cpu/cpu_backend.c engine/cpu/cpu_bn.c engine/cpu/cpu_bn512.c engine/cpu/cpu_bn_pass.h engine/cpu/cpu_conv.c \
	engine/cpu/cpu_elem.c engine/cpu/cpu_gemm.c engine/cpu/cpu_gemm_kern.h engine/cpu/cpu_gemm_bf16.c engine/cpu/cpu_gemm_amx.c engine/cpu/cpu_bf16_pack.h engine/cpu/cpu_bf16_stash.c engine/cpu/cpu_gemm_bf16r.c engine/cpu/cpu_ops.c \
	engine/cpu/cpu_im2col.c engine/cpu/cpu_pool.c \
	engine/cpu/cpu_conv_implicit.c engine/cpu/cpu_conv_pairs.c engine/cpu/cpu_conv_grid_filter.c engine/cpu/cpu_amx.h engine/cpu/cpu_bf16x16.h engine/cpu/cpu_conv_kcol.c engine/cpu/cpu_conv_phase.c engine/cpu/cpu_conv_wino.c engine/cpu/cpu_wino_input.c engine/cpu/cpu_conv_winof.c engine/cpu/cpu_iconv.h engine/cpu/cpu_wino_vec.h \
	engine/cpu/cpu_loss.c engine/cpu/cpu_optim.c engine/cpu/cpu_data.c \
	engine/cpu/cpu_window.c \
	engine/layers/add.c engine/layers/avgpool.c engine/layers/bn.c \
	engine/layers/concat.c engine/layers/conv.c engine/layers/deconv.c \
	engine/layers/dense.c engine/layers/dropout.c engine/layers/gap.c \
	engine/layers/act.c engine/layers/maxpool.c \
	engine/layers/upsample.c engine/layers/slice.c engine/layers/pool_common.c engine/layers/layer_common.c \
	engine/layers/diff.c \
	engine/cfg/cfg.h engine/cfg/cfg.c engine/cfg/cfg_expr.c engine/cfg/cfg_opt.c \
	engine/cfg/cfg_int.h engine/cfg/cfg_read.c engine/cfg/cfg_keys.c engine/cfg/netkeys.h \
	engine/ckpt/checkpoint.c engine/ckpt/checkpoint_read.c engine/ckpt/checkpoint_net.c \
	engine/ckpt/checkpoint_rank.c engine/ckpt/checkpoint.h engine/ckpt/checkpoint_int.h

# engine/cuda/: cuDNN, cuBLAS and our kernels. The kernels (.cu) go through
# nvcc by the suffix rule below and into the library as extra objects.
CUDA_KERN_SRCS = engine/cuda/cuda_kern_data.cu engine/cuda/cuda_kern_elem.cu \
	engine/cuda/cuda_kern_layers.cu engine/cuda/cuda_kern_loss.cu \
	engine/cuda/cuda_kern_optim.cu engine/cuda/cuda_kern_pool.cu engine/cuda/cuda_kern_bn.cu \
	engine/cuda/cuda_kern_deconv.cu \
	engine/cuda/cuda_kern_prec.cu engine/cuda/cuda_kern_window.cu
CUDA_KERN_OBJS = $(CUDA_KERN_SRCS:.cu=.$(OBJEXT))
if HAVE_CUDA
noinst_LIBRARIES += engine/libcdpcuda.a
engine_libcdpcuda_a_CPPFLAGS = $(ENGINE_CPPFLAGS) $(CUDA_CPPFLAGS)
engine_libcdpcuda_a_SOURCES = engine/cuda/cuda.h engine/cuda/cuda_kern.h engine/cuda/cuda_algo.h \
	engine/cuda/cuda_backend.c engine/cuda/cuda_ops.c \
	engine/cuda/cuda_conv.c engine/cuda/cuda_dnn.c
engine_libcdpcuda_a_LIBADD = $(CUDA_KERN_OBJS)
engine_libcdpcuda_a_DEPENDENCIES = $(CUDA_KERN_OBJS)
# nvcc's host code may call the C++ runtime. The CUDA backend calls back
# into the engine (precision names, descriptors), which device.c's choice of
# the backend does not pull in: the engine comes again after it.
CUDA_LINK = engine/libcdpcuda.a engine/libcdpengine.a $(CUDA_LIBS) -lstdc++
else
CUDA_LINK =
endif
.cu.o:
	$(AM_V_GEN)$(MKDIR_P) $(@D) && $(NVCC) $(NVCCFLAGS) $(CUDA_CPPFLAGS) $(DEFS) \
	  -I$(top_builddir) -I$(top_srcdir)/lib -I$(top_srcdir)/engine \
	  -I$(top_srcdir)/engine/cuda -c -o $@ $<
$(CUDA_KERN_OBJS): $(top_srcdir)/engine/cuda/cuda_kern.h \
	$(top_srcdir)/engine/cuda/cuda_kern_int.cuh $(top_srcdir)/engine/backend.h
CLEANFILES += $(CUDA_KERN_OBJS)
EXTRA_DIST += $(CUDA_KERN_SRCS) engine/cuda/cuda_kern_int.cuh

# Everything that links the engine: the engine, the CUDA backend it may
# select (device.c), and what both use.
ENGINE_LIBS = engine/libcdpengine.a $(CUDA_LINK) $(CDP_LIBS) $(OPENBLAS_LIBS) -lpthread -lm
