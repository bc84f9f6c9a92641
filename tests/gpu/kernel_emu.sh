#!/bin/sh
# tests/gpu/kernel_emu.sh: our CUDA kernels (engine/cuda/cuda_kern_*.cu)
# against the CPU backend on any machine, GPU or not. tests/gpu/emu/mkemu.py
# rewrites the kernel sources for the host emulator tests/gpu/emu/emu.h
# (into the build tree), the configured C++ compiler builds them with
# tests/gpu/emu/kernel_check.cpp and the CPU backend (
# engine/libcdpengine.a), and kernel_check compares every launcher of
# engine/cuda/cuda_kern.h with the CPU op (tests/gpu/README).
# Passes when every comparison does and every launcher that cuda_kern.h
# declares is called by the checks.
# Exit 77 only without a C++ compiler, a Python 3 or CUDA's headers
# (cuda_runtime.h, cuda_fp16.h, cuda_bf16.h: the vector and 16-bit float
# types); a build that fails is a failure. Environment (from Makefile.am):
# CDP_EMU_CXX, CDP_EMU_CXXFLAGS, CDP_EMU_CUDA_DIR (configure's, may be
# empty), CDP_EMU_LIBS; CDP_GPU_TEST_SEED picks other random shapes.
. "$CDP_SRCDIR/tests/tools/common.sh"
S=$CDP_SRCDIR
E=$S/tests/gpu/emu
B=$CDP_BUILDDIR/tests/gpu/emu
CXX=${CDP_EMU_CXX:-}
skip() { echo "SKIP: $*" >&2; exit 77; }

# --- prerequisites -------------------------------------------------------------
[ -n "$CXX" ] || skip "no C++ compiler configured (CDP_EMU_CXX is empty; run under make check)"
command -v ${CXX%% *} >/dev/null 2>&1 || skip "no C++ compiler: '$CXX' not found (install g++)"
printf 'int main() { return 0; }\n' >"$T/t.cpp"
$CXX -o "$T/t" "$T/t.cpp" >"$T/cxx.err" 2>&1 ||
	skip "C++ compiler '$CXX' cannot build a program: $(head -3 "$T/cxx.err")"
PY=
for p in python3 ${PYTHON:-}; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 6))'; then
		PY=$p
		break
	fi
done
[ -n "$PY" ] || skip "no Python 3 to run tests/gpu/emu/mkemu.py"
# CUDA's headers compile on the host compiler; configure's toolkit first
printf '#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n' >"$T/h.cpp"
CUDA_INC=none
tried=
for d in ${CDP_EMU_CUDA_DIR:-} ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda; do
	[ -d "$d/include" ] || continue
	tried="$tried $d/include"
	if $CXX -std=c++17 -fsyntax-only -I"$d/include" "$T/h.cpp" >/dev/null 2>&1; then
		CUDA_INC="-I\"$d/include\""
		break
	fi
done
if [ "$CUDA_INC" = none ] && $CXX -std=c++17 -fsyntax-only "$T/h.cpp" >/dev/null 2>&1; then
	CUDA_INC=                         # on the compiler's own path (Debian's nvidia-cuda-toolkit)
fi
[ "$CUDA_INC" != none ] ||
	skip "no usable cuda_runtime.h, cuda_fp16.h, cuda_bf16.h (tried:${tried:- none} and the compiler's path)"
for f in engine/libcdpengine.a lib/libcdp.a; do
	[ -f "$CDP_BUILDDIR/$f" ] || fail "$CDP_BUILDDIR/$f is not built (run make first)"
done

# --- every launcher of cuda_kern.h is checked ------------------------------------
launchers=$(sed -n 's/^[a-z_ ]*[ *]\(cdk_[a-z0-9_]*\)(.*/\1/p' "$S/engine/cuda/cuda_kern.h")
[ -n "$launchers" ] || fail "no launcher found in engine/cuda/cuda_kern.h"
missing=
for l in $launchers; do
	grep -q "\\<$l(" "$E/kernel_check_ops.h" "$E/kernel_check.cpp" || missing="$missing $l"
done
[ -z "$missing" ] || fail "launchers of cuda_kern.h that tests/gpu/emu/kernel_check*.{cpp,h} never call:$missing"

# --- build (into the build tree) ---------------------------------------------------
# build.sh DIR OUT: kernel_check from the kernels rewritten into DIR (the
# kernels' unused parameters and helpers are not this test's concern);
# tests/gpu/emu/mutate.sh uses it too
mkdir -p "$B"
cat >"$B/build.sh" <<EOF
#!/bin/sh
# written by tests/gpu/kernel_emu.sh: build.sh DIR OUT builds kernel_check
# OUT from the kernel sources that mkemu.py rewrote into DIR
exec $CXX -std=c++17 ${CDP_EMU_CXXFLAGS:-} -Wall -Wno-unused-function -Wno-unused-parameter \\
	-I"\$1" $CUDA_INC -I"$E" -I"$S/engine" -I"$S/engine/cpu" -I"$S/lib" \\
	-o "\$2" "$E/kernel_check.cpp" \\
	"$CDP_BUILDDIR/engine/libcdpengine.a" "$CDP_BUILDDIR/lib/libcdp.a" \\
	${CDP_EMU_LIBS:-} -lpthread -lm
EOF
rm -rf "$B/gen"
"$PY" "$E/mkemu.py" "$S/engine/cuda" "$B/gen" || fail "mkemu.py could not rewrite the kernels"
if ! sh "$B/build.sh" "$B/gen" "$B/kernel_check" >"$T/build.err" 2>&1; then
	cat "$T/build.err" >&2
	fail "building tests/gpu/emu/kernel_check failed (compiler output above; $B/build.sh)"
fi
[ ! -s "$T/build.err" ] || { echo "compiler warnings:"; cat "$T/build.err"; }

# --- run ------------------------------------------------------------------------------
# a kernel that loops forever would hang make check: stop it after 10 minutes
TO=
command -v timeout >/dev/null 2>&1 && TO="timeout 600"
set +e
$TO "$B/kernel_check" >"$T/out" 2>"$T/err"
rc=$?
set -e
cat "$T/out"
[ ! -s "$T/err" ] || { echo "stderr:"; cat "$T/err"; }
[ "$rc" -ne 124 ] || fail "kernel_check ran for more than 10 minutes (a kernel that never ends?)"
[ "$rc" -eq 0 ] || fail "kernel_check exited $rc: $(grep '^FAIL' "$T/out" | head -5)$(tail -3 "$T/err")"
! grep -q '^FAIL' "$T/out" || fail "kernel_check exited 0 but printed FAIL lines"
grep -q '^# kernel_check: [1-9][0-9]* checks, 0 failed' "$T/out" || fail "kernel_check printed no summary"
exit 0
