# CDP_PKG_IN_PREFIX(VARIABLE-PREFIX, MODULE, DIR, [ACTION-IF-FOUND], [ACTION-IF-NOT-FOUND])
# VARIABLE-PREFIX_CFLAGS and _LIBS from the MODULE.pc under the prefix DIR
# (lib/pkgconfig, lib64/pkgconfig or share/pkgconfig). A DIR the user names
# must be the one used, so a DIR without MODULE.pc is not found even where
# the system has one.
AC_DEFUN([CDP_PKG_IN_PREFIX], [
  cdp_pcdir=
  for cdp_d in "$3/lib/pkgconfig" "$3/lib64/pkgconfig" "$3/share/pkgconfig"; do
    AS_IF([test -z "$cdp_pcdir" && test -f "$cdp_d/$2.pc"], [cdp_pcdir=$cdp_d])
  done
  AS_IF([test -n "$cdp_pcdir"], [
    cdp_save_PKG_CONFIG_PATH=$PKG_CONFIG_PATH
    PKG_CONFIG_PATH="$cdp_pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export PKG_CONFIG_PATH
    PKG_CHECK_MODULES([$1], [$2], [$4], [$5])
    PKG_CONFIG_PATH=$cdp_save_PKG_CONFIG_PATH
  ], [$5])
])
