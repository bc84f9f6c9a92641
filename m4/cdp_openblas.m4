# CDP_CHECK_OPENBLAS: --with-openblas=yes|no|DIR (default: check). The
# engine's CPU backend calls cblas_sgemm and openblas_set_num_threads, so the
# engine, and everything that links it, needs OpenBLAS; the pipeline
# (cdp-tile, cdp-lmdbpack, cdp-keyshuffle, cdp-evaluate) does not. DIR is an
# OpenBLAS prefix: its openblas.pc (CDP_PKG_IN_PREFIX), else DIR/include and
# DIR/lib. Whatever is found must link. Sets OPENBLAS_CFLAGS, OPENBLAS_LIBS,
# have_openblas, cdp_ver_OPENBLAS and the conditional HAVE_OPENBLAS.
AC_DEFUN([CDP_CHECK_OPENBLAS], [
AC_ARG_WITH([openblas],
  [AS_HELP_STRING([--with-openblas=yes|no|DIR],
    [OpenBLAS, for the engine and the programs and tests built on it (default: check)])],
  [], [with_openblas=check])
have_openblas=no
openblas_fail=
cdp_ver_OPENBLAS=no
AS_CASE([$with_openblas],
  [no], [],
  [yes|check], [PKG_CHECK_MODULES([OPENBLAS], [openblas],
    [cdp_ver_OPENBLAS=`$PKG_CONFIG --modversion openblas 2>/dev/null` || cdp_ver_OPENBLAS=yes],
    [openblas_fail="pkg-config finds no openblas (install libopenblas-dev)"])],
  [AS_IF([test -d "$with_openblas"], [
     CDP_PKG_IN_PREFIX([OPENBLAS], [openblas], [$with_openblas],
       [cdp_ver_OPENBLAS=`$PKG_CONFIG --modversion openblas 2>/dev/null` || cdp_ver_OPENBLAS=yes],
       [OPENBLAS_CFLAGS="-I$with_openblas/include"
        OPENBLAS_LIBS="-L$with_openblas/lib -Wl,-rpath,$with_openblas/lib -lopenblas"
        cdp_ver_OPENBLAS=$with_openblas])],
     [openblas_fail="no directory $with_openblas"])])
AS_IF([test "x$with_openblas" != xno && test -z "$openblas_fail"], [
  cdp_save_CPPFLAGS=$CPPFLAGS; cdp_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"; LIBS="$OPENBLAS_LIBS $LIBS"
  AC_MSG_CHECKING([whether OpenBLAS programs link])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
      [[openblas_set_num_threads(1); cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
        0, 0, 0, 1.0f, 0, 1, 0, 1, 0.0f, 0, 1);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); openblas_fail="cannot build with cblas.h and $OPENBLAS_LIBS"])
  CPPFLAGS=$cdp_save_CPPFLAGS; LIBS=$cdp_save_LIBS
])
AS_IF([test "x$with_openblas" = xno], [],
  [test -z "$openblas_fail"], [have_openblas=yes],
  [test "x$with_openblas" = xcheck],
    [AC_MSG_WARN([OpenBLAS not usable ($openblas_fail): the engine, cdp-train, cdp-predict and their tests will not be built])],
  [AC_MSG_ERROR([--with-openblas=$with_openblas requested but OpenBLAS is not usable: $openblas_fail])])
AS_IF([test "$have_openblas" != yes], [OPENBLAS_CFLAGS=; OPENBLAS_LIBS=; cdp_ver_OPENBLAS=no])
AC_SUBST([OPENBLAS_CFLAGS])
AC_SUBST([OPENBLAS_LIBS])
AM_CONDITIONAL([HAVE_OPENBLAS], [test "$have_openblas" = yes])
])
