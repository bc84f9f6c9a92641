# CDP_CHECK_CUDA: --with-cuda=yes|no|DIR (default: check the toolkit of the
# nvcc on PATH). The engine's CUDA backend (engine/cuda/) needs the toolkit,
# cuDNN, cuBLAS and NCCL; it is part of the engine, so it needs OpenBLAS
# (CDP_CHECK_OPENBLAS) but not MPI: NCCL's half of the communication layer
# (engine/dist/dist_nccl.c) is built only with HAVE_MPI as well. Sets NVCC,
# NVCCFLAGS, CUDA_DIR, CUDA_CPPFLAGS, CUDA_LIBS, have_cuda, HAVE_CUDA in
# config.h and the conditional HAVE_CUDA.
AC_DEFUN([CDP_CHECK_CUDA], [
AC_REQUIRE([CDP_CHECK_OPENBLAS])
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=yes|no|DIR],
    [CUDA toolkit with cuDNN and NCCL (default: check the toolkit of the nvcc on PATH)])],
  [], [with_cuda=check])
have_cuda=no
CUDA_DIR=
AS_IF([test "x$with_cuda" != xno && test "$have_openblas" != yes], [
  AS_IF([test "x$with_cuda" = xcheck],
    [AC_MSG_WARN([no OpenBLAS, so no engine: the CUDA backend will not be built]); with_cuda=no],
    [AC_MSG_ERROR([--with-cuda=$with_cuda requested but the CUDA backend is part of the engine, which needs OpenBLAS])])])
AS_CASE([$with_cuda],
  [no], [],
  [yes|check], [AC_PATH_PROG([NVCC_ON_PATH], [nvcc], [])
                AS_IF([test -n "$NVCC_ON_PATH"],
                      [CUDA_DIR=`dirname "$NVCC_ON_PATH"`; CUDA_DIR=`dirname "$CUDA_DIR"`])],
  [CUDA_DIR=$with_cuda])
AS_IF([test "x$with_cuda" != xno], [
  cuda_fail=
  AS_IF([test -z "$CUDA_DIR"], [cuda_fail="no nvcc on PATH"],
        [test ! -x "$CUDA_DIR/bin/nvcc"], [cuda_fail="no $CUDA_DIR/bin/nvcc"])
  AS_IF([test -z "$cuda_fail"], [
    save_CPPFLAGS=$CPPFLAGS; save_LIBS=$LIBS; save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS -I$CUDA_DIR/include"
    LDFLAGS="$LDFLAGS -L$CUDA_DIR/lib64 -L$CUDA_DIR/lib"
    AC_CHECK_HEADER([cuda_runtime.h], [], [cuda_fail="cuda_runtime.h missing"])
    AC_CHECK_HEADER([cudnn.h], [], [cuda_fail="${cuda_fail:+$cuda_fail, }cudnn.h missing"])
    AC_CHECK_HEADER([nccl.h], [], [cuda_fail="${cuda_fail:+$cuda_fail, }nccl.h missing"])
    AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [:], [cuda_fail="${cuda_fail:+$cuda_fail, }libcudart missing"])
    AC_CHECK_LIB([cudnn], [cudnnCreate], [:], [cuda_fail="${cuda_fail:+$cuda_fail, }libcudnn missing"])
    AC_CHECK_LIB([nccl], [ncclGetVersion], [:], [cuda_fail="${cuda_fail:+$cuda_fail, }libnccl missing"])
    AC_CHECK_LIB([cublas], [cublasCreate_v2], [:], [cuda_fail="${cuda_fail:+$cuda_fail, }libcublas missing"])
    CPPFLAGS=$save_CPPFLAGS; LIBS=$save_LIBS; LDFLAGS=$save_LDFLAGS
  ])
  AS_IF([test -z "$cuda_fail"], [have_cuda=yes],
        [test "x$with_cuda" = xcheck],
          [AC_MSG_WARN([CUDA not usable ($cuda_fail); building the CPU backend only])],
          [AC_MSG_ERROR([--with-cuda=$with_cuda requested but CUDA is not usable: $cuda_fail])])
])
AS_IF([test "$have_cuda" = yes], [
  NVCC="$CUDA_DIR/bin/nvcc"
  CUDA_CPPFLAGS="-I$CUDA_DIR/include"
  CUDA_LIBS="-L$CUDA_DIR/lib64 -Wl,-rpath,$CUDA_DIR/lib64 -lcudnn -lcublas -lnccl -lcudart"
  AC_DEFINE([HAVE_CUDA], [1], [Build the CUDA backend])
])
AC_SUBST([NVCC])
AC_SUBST([CUDA_DIR])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([HAVE_CUDA], [test "$have_cuda" = yes])
# nvcc flags for the kernels: SASS for sm_80 (A100, and the sm_8x GPUs that
# run it) and sm_90 (H100/H200), and compute_90 PTX that newer GPUs JIT-compile.
AC_ARG_VAR([NVCCFLAGS], [nvcc flags for the CUDA kernels (default: -O2 -std=c++17, sm_80, sm_90 and compute_90 PTX)])
AS_IF([test "$have_cuda" = yes && test "x${NVCCFLAGS+set}" != xset],
  [NVCCFLAGS="-O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
])
