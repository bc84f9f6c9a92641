#!/bin/sh
# scripts/deps.sh: installs every Debian package cdpool needs to build, test,
# run its demo and its benchmarks. The one list of packages is here.
#   build:    autotools, a C compiler, GDAL, LMDB, libpng, zlib, Open MPI, OpenBLAS
#   tests:    lmdb-utils (mdb_stat, mdb_dump), gdal-bin, Python with GDAL, numpy, lmdb,
#             and PyTorch (python3-torch) for the engine's parity test; iproute2 and
#             util-linux (ip, tc, unshare, nsenter: tests/cluster), time (peak memory)
#   sanitizers/fuzzing: clang and its runtime
set -e
PACKAGES="
  build-essential autoconf automake libtool pkg-config
  libgdal-dev gdal-bin liblmdb-dev lmdb-utils libpng-dev zlib1g-dev libcairo2-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  python3 python3-gdal python3-numpy python3-lmdb python3-torch
  iproute2 util-linux time
  clang libclang-rt-14-dev
"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
missing=
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "deps.sh: installing:$missing" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
