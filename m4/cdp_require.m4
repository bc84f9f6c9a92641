# CDP_REQUIRE_PKG(VARIABLE-PREFIX, MODULE, VERSION-CONDITION, NAME, DEBIAN-PACKAGE)
# A library that every build needs, found by pkg-config (or given by
# PREFIX_CFLAGS and PREFIX_LIBS): stops configure with the Debian package to
# install when it is missing. Sets cdp_ver_PREFIX to its version for the
# summary ("yes" when the flags were given and pkg-config cannot tell).
AC_DEFUN([CDP_REQUIRE_PKG], [
  PKG_CHECK_MODULES([$1], [$2 $3], [],
    [AC_MSG_ERROR([$4 not found: install the Debian package $5 (or run scripts/deps.sh)])])
  cdp_ver_$1=`$PKG_CONFIG --modversion $2 2>/dev/null` || cdp_ver_$1=yes
])
