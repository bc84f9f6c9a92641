#!/bin/sh
# tests/dist/comp.sh: compressed gradient buckets (dist.h, "Compression") at
# 2 ranks: tests/dist/test_comp reduces a known vector with ring and mpi, in
# fp16 and bf16, and comp_ref.py holds both ranks' results bit for bit
# against its NumPy reference of where each format rounds; the ring sends
# 2 bytes a value (N values per rank at 2 ranks). Skipped without mpirun or
# NumPy.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
mpirun=${MPIRUN:-}
[ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1 || { echo "SKIP: no mpirun" >&2; exit 77; }
MP="$mpirun --oversubscribe -np 2"
[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
export CDP_DIST_TIMEOUT=60
for algo in ring mpi; do
	for comp in fp16 bf16; do
		d=$T/$algo.$comp
		mkdir "$d"
		$MP "$CDP_BUILDDIR/tests/dist/test_comp" "$algo" "$comp" "$d" >"$T/out" 2>"$T/err" ||
			fail "$algo $comp: $(cat "$T/out" "$T/err")"
		"$PYTHON" "$CDP_SRCDIR/tests/dist/comp_ref.py" "$d" "$algo" "$comp" ||
			fail "$algo $comp: not the reference"
		if [ "$algo" = ring ]; then
			# 1537 values, 2 bytes each, sent once per rank (2(j-1)/j n)
			[ "$(grep -c 'ring_bytes 3074$' "$T/out")" -eq 2 ] ||
				fail "ring $comp: bytes sent: $(cat "$T/out")"
		fi
	done
done
