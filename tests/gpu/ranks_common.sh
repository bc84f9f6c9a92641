# tests/gpu/ranks_common.sh: sourced by two_ranks.sh and multi_gpu.sh after
# tests/tools/common.sh. Sets MP, the mpirun command for 2 ranks (as root
# with --allow-run-as-root), and P, the road pool ($CDP_GPU_POOL, a
# directory made by tests/gpu/mkpool.sh as scripts/device-deps.sh carries
# it to GPU machines without GDAL, else one made here); exits 77 without
# mpirun or without a way to make the pool.
# run alone it has no $T (common.sh's temporary folder) and would make its
# pool in /: refuse
[ -n "${T:-}" ] && [ -d "$T" ] ||
	{ echo "tests/gpu/ranks_common.sh: a fragment sourced by two_ranks.sh and multi_gpu.sh, not a test" >&2; exit 99; }
mpirun=${MPIRUN:-$(command -v mpirun || true)}
if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
	echo "SKIP: no mpirun" >&2
	exit 77
fi
MP="$mpirun --oversubscribe -np 2"
[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
P=${CDP_GPU_POOL:-}
if [ -z "$P" ]; then
	P=$T/fixture
	set +e
	sh "$CDP_SRCDIR/tests/gpu/mkpool.sh" "$P"
	rc=$?
	set -e
	[ "$rc" -ne 77 ] || exit 77
	[ "$rc" -eq 0 ] || fail "cannot make the pool"
fi
[ -d "$P/pool" ] && [ -s "$P/train.keys" ] || fail "no pool in '$P' (tests/gpu/mkpool.sh makes one)"
