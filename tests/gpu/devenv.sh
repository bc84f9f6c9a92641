# tests/gpu/devenv.sh: sourced with DEVDEPS=DIR (`DEVDEPS=.devdeps;
# . tests/gpu/devenv.sh`; sh's `.` takes no arguments) to put the libraries
# and Open MPI that scripts/device-deps.sh unpacked into DIR on the paths,
# for building and running without them installed:
#   - OpenBLAS, stored xz-compressed in DIR, is unpacked on first use
#     (into DEVDEPS_BLAS, outside DIR);
#   - LD_LIBRARY_PATH, PATH, MPIRUN (DIR's mpirun);
#   - Open MPI and PMIx relocated to DIR (OPAL_PREFIX, OPAL_SYSCONFDIR,
#     PMIX_*DIR), restricted to what one node needs (shared memory
#     and TCP; no InfiniBand, UCX, libfabric or PSM components, whose
#     libraries are not carried), and told not to look for ssh;
#   - cairo and the libraries it needs (DIR/fb, for cdp-train's loss.png):
#     DEVDEPS_FB (outside DIR) gets a link to each one this machine's
#     ld.so cache lacks, and libcairo.so for -lcairo; the machine's own
#     copies win where it has them (its Python may need their newer
#     versions). DEVENV_FB_ALL=1 links every one, as on a machine with
#     none (dryrun.sh). Without a fontconfig setup of the machine's own,
#     FONTCONFIG_FILE names one that finds the carried DejaVu Sans;
#   - on a C library older than 2.36, the arc4random functions of
#     tests/gpu/arc4random.c (built here with cc) are preloaded for
#     libevent (see tests/gpu/elf_weak_version.py).
# Sets DEVENV_ERR to a reason and returns 1 when DIR is unusable.
DEVENV_ERR=
devenv_d=$(cd "${DEVDEPS:-}" 2>/dev/null && pwd) || devenv_d=
devenv_l=$devenv_d/usr/lib/x86_64-linux-gnu
if [ -z "$devenv_d" ] || [ ! -d "$devenv_l/openmpi" ]; then
	DEVENV_ERR="no libraries unpacked in DEVDEPS='${DEVDEPS:-}' (run scripts/device-deps.sh)"
	return 1
fi
# OpenBLAS goes to a folder of its own outside DIR, so that DIR stays as
# small as it travelled; DEVDEPS_BLAS names it (for -L)
export DEVDEPS_BLAS="${DEVDEPS_UNPACK:-${TMPDIR:-/tmp}/cdpool-devdeps.$(id -u)}"
devenv_so=$(cat "$devenv_l/openblas-pthread/XZ" 2>/dev/null) ||
	{ DEVENV_ERR="no openblas-pthread/XZ in '$devenv_d'"; return 1; }
if [ ! -f "$DEVDEPS_BLAS/$devenv_so" ]; then
	mkdir -p "$DEVDEPS_BLAS" && {
		if command -v xz >/dev/null 2>&1; then
			xz -dc "$devenv_l/openblas-pthread/$devenv_so.xz" >"$DEVDEPS_BLAS/$devenv_so.tmp"
		else
			python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as i, open(sys.argv[2], "wb") as o:
    shutil.copyfileobj(i, o)' "$devenv_l/openblas-pthread/$devenv_so.xz" "$DEVDEPS_BLAS/$devenv_so.tmp"
		fi
	} && mv "$DEVDEPS_BLAS/$devenv_so.tmp" "$DEVDEPS_BLAS/$devenv_so" &&
		ln -sfn "$devenv_so" "$DEVDEPS_BLAS/libopenblas.so.0" &&
		ln -sfn "$devenv_so" "$DEVDEPS_BLAS/libopenblas.so" ||
		{ DEVENV_ERR="cannot unpack $devenv_so.xz into $DEVDEPS_BLAS"; return 1; }
fi
devenv_p=$DEVDEPS_BLAS:$devenv_l:$devenv_d/lib/x86_64-linux-gnu:$devenv_l/openmpi/lib
export LD_LIBRARY_PATH="$devenv_p:$devenv_l/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEVDEPS_FB="$DEVDEPS_BLAS/fb"
devenv_fl=$devenv_d/fb/usr/lib/x86_64-linux-gnu
if [ ! -e "$devenv_fl/libcairo.so" ]; then
	DEVENV_ERR="no fb/usr/lib/x86_64-linux-gnu/libcairo.so in '$devenv_d'"
	DEVENV_ERR="$DEVENV_ERR (run scripts/device-deps.sh again)"
	return 1
fi
rm -rf "$DEVDEPS_FB" && mkdir -p "$DEVDEPS_FB" ||
	{ DEVENV_ERR="cannot make $DEVDEPS_FB"; return 1; }
devenv_cache=$( { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null)
for devenv_f in "$devenv_fl"/lib*.so.* "$devenv_d"/fb/lib/x86_64-linux-gnu/lib*.so.*; do
	[ -e "$devenv_f" ] || continue
	devenv_n=${devenv_f##*/}
	if [ "${DEVENV_FB_ALL:-0}" = 1 ] ||
		! printf '%s\n' "$devenv_cache" | grep -q "^[[:space:]]*$devenv_n "; then
		ln -sfn "$devenv_f" "$DEVDEPS_FB/$devenv_n"
	fi
done
ln -sfn "$devenv_fl/libcairo.so" "$DEVDEPS_FB/libcairo.so"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$DEVDEPS_FB"
if [ "${DEVENV_FB_ALL:-0}" = 1 ] || [ ! -f /etc/fonts/fonts.conf ]; then
	printf '<?xml version="1.0"?>\n<fontconfig><dir>%s</dir><cachedir>%s</cachedir></fontconfig>\n' \
		"$devenv_d/fb/usr/share/fonts" "$DEVDEPS_FB/fc-cache" >"$DEVDEPS_FB/fonts.conf"
	export FONTCONFIG_FILE="$DEVDEPS_FB/fonts.conf"
fi
export PATH="$devenv_d/usr/bin:$PATH"
export MPIRUN="$devenv_d/usr/bin/mpirun"
export OPAL_PREFIX="$devenv_d/usr"
export OPAL_SYSCONFDIR="$devenv_d/etc/openmpi"
# PMIx's directories are compiled in as absolute paths: each is set
export PMIX_PREFIX="$devenv_l/pmix2"
export PMIX_LIBDIR="$devenv_l/pmix2/lib"
export PMIX_PKGLIBDIR="$devenv_l/pmix2/lib/pmix"
export PMIX_DATAROOTDIR="$devenv_l/pmix2/share"
export PMIX_DATADIR="$devenv_l/pmix2/share"
export PMIX_PKGDATADIR="$devenv_l/pmix2/share/pmix"
export PMIX_SYSCONFDIR="$devenv_l/pmix2/share"
export PMIX_MCA_mca_base_component_path="$devenv_l/pmix2/lib/pmix"
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mtl=^ofi,psm,psm2
export OMPI_MCA_plm_rsh_agent=false
export OMPI_MCA_mca_base_component_show_load_errors=0
export PMIX_MCA_mca_base_component_show_load_errors=0
devenv_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
case $devenv_glibc in
2.3[0-3]|2.3[0-3].*|2.[12][0-9]|2.[12][0-9].*|2.[0-9]|2.[0-9].*)
	DEVENV_ERR="glibc $devenv_glibc: the Debian 12 libraries in DEVDEPS need glibc >= 2.34"
	return 1 ;;
2.3[45]|2.3[45].*)
	devenv_src=${CDP_SRCDIR:-$devenv_d/..}
	if [ ! -f "$devenv_d/arc4random.so" ]; then
		cc -shared -fPIC -O2 -o "$devenv_d/arc4random.so" "$devenv_src/tests/gpu/arc4random.c" ||
			{ DEVENV_ERR="glibc $devenv_glibc: cannot build tests/gpu/arc4random.c"; return 1; }
	fi
	export LD_PRELOAD="$devenv_d/arc4random.so${LD_PRELOAD:+:$LD_PRELOAD}" ;;
esac
unset devenv_d devenv_l devenv_p devenv_so devenv_glibc devenv_src devenv_fl devenv_f devenv_n \
	devenv_cache
return 0
