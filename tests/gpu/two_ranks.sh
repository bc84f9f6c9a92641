#!/bin/sh
# tests/gpu/two_ranks.sh: data-parallel training on the GPU. Two ranks on
# one GPU (--device cuda puts rank r on GPU r % count; --allreduce mpi and
# ring stage the gradients through pinned host memory, so ranks may share
# a device) with batch 4 each must give the loss curve of one process with
# batch 8: 12 SGD steps (momentum 0.9) of tests/train/small.cfg at width
# 8, batchnorm-free, whose result depends only on the global batch.
# Tolerance: relative 1e-4 per step. On the CPU the same comparison holds
# to 1e-6 (tests/train/train.sh); on the GPU cuDNN may choose other
# algorithms for batch 4 than for 8, whose float sums differ by ~1e-6 and
# grow over 12 momentum steps.
# The pool: $CDP_GPU_POOL (a directory made by tests/gpu/mkpool.sh, as
# scripts/device-deps.sh carries it to GPU machines without GDAL), else one
# made here. Exit 77 without a GPU, without mpirun or without a pool.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/train/metrics.sh"
n=$("$CDP_BUILDDIR/tests/gpu/test_ops" --count-devices 2>"$T/why") ||
	fail "test_ops --count-devices failed"
[ "$n" -gt 0 ] || { echo "SKIP: $(cat "$T/why")" >&2; exit 77; }
. "$CDP_SRCDIR/tests/gpu/ranks_common.sh"
export CDP_DIST_TIMEOUT=120
A="--db $P/pool --keys $P/train.keys --threads 1 -q --steps 12"
A="$A --model $CDP_SRCDIR/tests/train/small.cfg:width=8"
A="$A --log-every 1 --device cuda"

cdp-train $A --batch 8 --out "$T/one" || fail "1 process on the GPU"
losses "$T/one/metrics.jsonl" >"$T/l1"
[ "$(wc -l <"$T/l1")" -eq 12 ] || fail "1 process: $(wc -l <"$T/l1") losses, want 12"
for algo in mpi ring; do
	# shellcheck disable=SC2086
	$MP cdp-train $A --batch 4 --allreduce $algo --out "$T/two.$algo" ||
		fail "2 ranks on one GPU ($algo)"
	losses "$T/two.$algo/metrics.jsonl" >"$T/l2"
	[ "$(wc -l <"$T/l2")" -eq 12 ] || fail "$algo: $(wc -l <"$T/l2") losses, want 12"
	losses_close "$T/l1" "$T/l2" 1e-4 || fail "$algo: 2 ranks differ from 1 process"
	echo "$algo: 12 losses of 2 ranks x 4 on one GPU agree with 1 x 8 to 1e-4"
	paste "$T/l1" "$T/l2" | sed -n '1p;$p'
done
exit 0
