#!/bin/sh
# scripts/deps.sh: installs every Debian package cdpool needs to build, test,
# run its demo and its benchmarks. The one list of packages is here.
#   build:    autotools, a C compiler, GDAL, LMDB, libpng, zlib, Open MPI, OpenBLAS
#   tests:    lmdb-utils (mdb_stat, mdb_dump), gdal-bin, Python with GDAL, numpy, lmdb,
#             pip and setuptools (python/ installed into a venv by tests/python),
#             PyTorch (python3-torch) for the engine's parity test, torchvision
#             (python3-torchvision) for import-torch's ResNet equality test, ONNX (python3-onnx)
#             for python/'s export_onnx test; iproute2 and util-linux (ip, tc, unshare,
#             nsenter: tests/cluster), time (peak memory), strace (a signal injected
#             at a rename: tests/predict/outputs.sh), procps (pgrep, ps), groff-base
#             (the man pages' warnings: tests/tools/build.sh); slurmctld, slurmd,
#             slurm-client and munge (a one-node Slurm: tests/cluster/slurm.sh)
#   sanitizers/fuzzing: clang and its runtime
# It prints one line a step; apt-get's output goes to a log file that the
# step names ($CDP_DEPS_LOG, else a new file in $TMPDIR or /tmp), and a
# failed step shows the log's last lines and exits 1. Nothing is run when
# every package is installed.
set -eu
PACKAGES="
  build-essential autoconf automake libtool pkg-config
  libgdal-dev gdal-bin liblmdb-dev lmdb-utils libpng-dev zlib1g-dev libcairo2-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  python3 python3-gdal python3-numpy python3-lmdb python3-torch python3-torchvision python3-onnx
  python3-pip python3-setuptools
  iproute2 util-linux time strace procps groff-base
  slurmctld slurmd slurm-client munge
  clang libclang-rt-14-dev
"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
missing= n=0
for p in $PACKAGES; do
	n=$((n + 1))
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps.sh: all $n packages are installed"
	exit 0
fi
log=${CDP_DEPS_LOG:-$(mktemp "${TMPDIR:-/tmp}/cdpool-deps.XXXXXX")}
: >"$log"
# step WHAT CMD...: one line, CMD's output to the log; on failure its tail
step() {
	what=$1
	shift
	echo "deps.sh: $what (log: $log)"
	"$@" >>"$log" 2>&1 </dev/null || {
		echo "deps.sh: $what failed (exit status $?); the last lines of '$log':" >&2
		tail -n 15 "$log" >&2
		exit 1
	}
}
# wait up to 5 minutes for another apt-get or dpkg to finish
apt="apt-get -q -o DPkg::Lock::Timeout=300"
# shellcheck disable=SC2086
step "updating the package lists" $SUDO $apt update
# shellcheck disable=SC2086
step "installing$missing" $SUDO env DEBIAN_FRONTEND=noninteractive $apt install -y \
	--no-install-recommends $missing
echo "deps.sh: done"
