# CDP_CHECK_MPI: --with-mpi=yes|no|DIR (default: check). Open MPI, for the
# communication layer (engine/dist/) and what links it: cdp-train,
# cdp-predict, their tests, the dist tests and the MPI benchmarks. The rest
# builds without it. DIR is an Open MPI prefix (its ompi-c.pc, else its
# bin/mpicc) or an mpicc itself, whose --showme gives the flags. Whatever is
# found must link MPI_Init. engine/dist/ sits on the engine, so MPI is used
# only with OpenBLAS (CDP_CHECK_OPENBLAS). Sets MPI_CFLAGS, MPI_LIBS, MPIRUN
# (mpirun, for the tests), have_mpi, cdp_ver_MPI and the conditional HAVE_MPI.
AC_DEFUN([CDP_CHECK_MPI], [
AC_REQUIRE([CDP_CHECK_OPENBLAS])
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi=yes|no|DIR],
    [Open MPI, for cdp-train and cdp-predict; DIR is its prefix or its mpicc (default: check)])],
  [], [with_mpi=check])
have_mpi=no
mpi_fail=
mpi_path=$PATH
mpi_cc=
cdp_ver_MPI=no
AS_CASE([$with_mpi],
  [no], [],
  [yes|check], [PKG_CHECK_MODULES([MPI], [ompi-c],
    [cdp_ver_MPI=`$PKG_CONFIG --modversion ompi-c 2>/dev/null` || cdp_ver_MPI=yes],
    [mpi_fail="pkg-config finds no ompi-c (install libopenmpi-dev)"])],
  [AS_IF([test -f "$with_mpi" && test -x "$with_mpi"], [mpi_cc=$with_mpi],
     [test -d "$with_mpi"], [
       mpi_path="$with_mpi/bin$PATH_SEPARATOR$PATH"
       CDP_PKG_IN_PREFIX([MPI], [ompi-c], [$with_mpi],
         [cdp_ver_MPI=`$PKG_CONFIG --modversion ompi-c 2>/dev/null` || cdp_ver_MPI=yes],
         [AS_IF([test -x "$with_mpi/bin/mpicc"], [mpi_cc=$with_mpi/bin/mpicc],
            [mpi_fail="$with_mpi has neither lib/pkgconfig/ompi-c.pc nor bin/mpicc"])])],
     [mpi_fail="$with_mpi is neither a directory nor an mpicc"])])
AS_IF([test -n "$mpi_cc"], [
  AC_MSG_CHECKING([for the flags of $mpi_cc])
  AS_IF([MPI_CFLAGS=`"$mpi_cc" --showme:compile 2>/dev/null` &&
         MPI_LIBS=`"$mpi_cc" --showme:link 2>/dev/null`],
    [AC_MSG_RESULT([$MPI_CFLAGS $MPI_LIBS])
     cdp_ver_MPI=`"$mpi_cc" --showme:version 2>&1 | sed -n 's/.*Open MPI \([[^ ]]*\).*/\1/p'`
     test -n "$cdp_ver_MPI" || cdp_ver_MPI=yes],
    [AC_MSG_RESULT([none])
     mpi_fail="$mpi_cc --showme failed: not the mpicc of Open MPI"])])
AS_IF([test "x$with_mpi" != xno && test -z "$mpi_fail"], [
  cdp_save_CPPFLAGS=$CPPFLAGS; cdp_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
  AC_MSG_CHECKING([whether MPI programs link])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[return MPI_Init(0, 0);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); mpi_fail="cannot build with mpi.h and $MPI_LIBS"])
  CPPFLAGS=$cdp_save_CPPFLAGS; LIBS=$cdp_save_LIBS
])
AS_IF([test "x$with_mpi" != xno && test -z "$mpi_fail" && test "$have_openblas" != yes],
  [mpi_fail="the communication layer sits on the engine, which needs OpenBLAS"])
AS_IF([test "x$with_mpi" = xno],
    [AC_MSG_WARN([--without-mpi: cdp-train, cdp-predict, their tests, the dist tests and the MPI benchmarks will not be built])],
  [test -z "$mpi_fail"], [have_mpi=yes],
  [test "x$with_mpi" = xcheck],
    [AC_MSG_WARN([MPI not usable ($mpi_fail): cdp-train, cdp-predict, their tests, the dist tests and the MPI benchmarks will not be built])],
  [AC_MSG_ERROR([--with-mpi=$with_mpi requested but MPI is not usable: $mpi_fail])])
AS_IF([test "$have_mpi" = yes], [
  AC_PATH_PROG([MPIRUN], [mpirun], [], [$mpi_path])
  AS_IF([test -z "$MPIRUN"],
    [AC_MSG_WARN([mpirun not found: install openmpi-bin; MPI tests will be skipped])])
], [MPI_CFLAGS=; MPI_LIBS=; MPIRUN=; cdp_ver_MPI=no])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([MPIRUN])
AM_CONDITIONAL([HAVE_MPI], [test "$have_mpi" = yes])
])
