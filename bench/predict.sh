#!/bin/sh
# bench/predict.sh: sliding-window inference over a whole scene, cdp-predict
# against a PyTorch predictor of the same model (bench/predict_torch.py:
# cdpool.torch_model.Deployed, the same windows, reflected borders and sin^2
# blending), in the same run, with the same threads.
#
# Set-up (untimed): a generated SIZE x SIZE 3-band u8 scene with roads
# (share/cdpool/examples/genscene.py), a U-Net (unet.cfg width=16 depth=4)
# trained for BENCH_TRAIN_STEPS steps on 256x256 tiles of a 1024x1024 scene
# of the same kind, so that its class map is not trivial; the scene as .npy
# for the peer. Then BENCH_REPEAT rounds of: cdp-predict, the peer in
# NCHW, the peer in channels_last. Each run is a fresh process; the time is
# its wall time (ours: the whole command, reading the GeoTIFF and writing a
# tiled GeoTIFF with overviews; the peer: from loading the checkpoint to
# saving the .npy, which favours it), the memory its peak RSS. The ratio is
# the median over the rounds of ours against the faster peer layout of the
# same round. Agreement: the fraction of pixels where the class maps of
# cdp-predict and of the peer are equal (target >= 99.9%; they differ only
# where the probabilities of two classes are within rounding of each other).
#   usage: bench/predict.sh [BUILDDIR]
#   env: BENCH_SIZE (4096), BENCH_THREADS (nproc), BENCH_REPEAT (3),
#        BENCH_WINDOW (256), BENCH_OVERLAP (64), BENCH_BATCH (8),
#        BENCH_TRAIN_STEPS (30), BENCH_PRECISION (fp32 or bf16: ours with
#        --precision bf16, the peer under torch.autocast bf16; exits 77
#        where cdp-predict refuses bf16, i.e. a CPU without AVX512_BF16),
#        TORCH_PYTHON (python3 on PATH: pip's torch 2.x and numpy)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
N=${BENCH_SIZE:-4096}
T=${BENCH_THREADS:-$(nproc)}
repeat=${BENCH_REPEAT:-3}
S=${BENCH_WINDOW:-256}
O=${BENCH_OVERLAP:-64}
B=${BENCH_BATCH:-8}
steps=${BENCH_TRAIN_STEPS:-30}
prec=${BENCH_PRECISION:-fp32}
PY=${TORCH_PYTHON:-python3}
SYS=/usr/bin/python3          # GDAL and numpy for the set-up and the comparison
case $prec in
fp32) tprec= ;;
bf16) tprec=--bf16 ;;
*) echo "predict.sh: BENCH_PRECISION '$prec' is not fp32 or bf16" >&2; exit 1 ;;
esac
PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict; do
	[ -x "$build/$p" ] || { echo "predict.sh: no '$build/$p' (build it first)" >&2; exit 1; }
done
if ! tv=$("$PY" -c 'import torch, numpy; print(torch.__version__)' 2>/dev/null); then
	echo "predict.sh: $PY cannot import torch and numpy" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen=$src/share/cdpool/examples/genscene.py

# the wall time (s) and peak RSS (KiB) of a command, as "SECONDS KIB"
measure() {
	"$SYS" - "$@" <<'PYEOF'
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print("%.3f %d" % (time.perf_counter() - t,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PYEOF
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
	grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
echo "scene ${N}x${N}x3 u8; window $S, overlap $O, batch $B; threads $T; $prec; torch $tv ($PY)"

"$SYS" "$gen" "$tmp/train.tif" --size 1024 --seed 11 --mask "$tmp/train_mask.tif" >/dev/null
"$SYS" "$gen" "$tmp/scene.tif" --size "$N" --seed 12 --mask "$tmp/scene_mask.tif" >/dev/null
"$build/cdp-tile" --size 256 --label-suffix _mask "$tmp/train.tif" | "$build/cdp-lmdbpack" "$tmp/pool"
"$build/cdp-keyshuffle" --seed 1 -o "$tmp/keys" "$tmp/pool"
"$build/cdp-train" --db "$tmp/pool" --keys "$tmp/keys" --out "$tmp/run" --threads "$T" \
	--model "$src/share/cdpool/models/unet.cfg:width=16,depth=4" --steps "$steps" --batch 4 \
	--lr 0.01 --log-every "$steps" >/dev/null 2>&1
"$SYS" - "$tmp/scene.tif" "$tmp/scene.npy" <<'PYEOF'
import sys
import numpy as np
from osgeo import gdal
np.save(sys.argv[2], gdal.Open(sys.argv[1]).ReadAsArray())
PYEOF
if [ "$prec" = bf16 ] && ! "$build/cdp-predict" -q --precision bf16 --threads 1 \
	"$tmp/run" "$tmp/train.tif" -o "$tmp/probe.tif" 2>"$tmp/probe.err"; then
	echo "predict.sh: SKIP: $(cat "$tmp/probe.err")" >&2
	exit 77
fi

i=0
while [ "$i" -lt "$repeat" ]; do
	rm -f "$tmp/ours.tif"
	echo "ours $(measure "$build/cdp-predict" -q --threads "$T" --size "$S" --overlap "$O" \
		--batch "$B" --precision "$prec" "$tmp/run" "$tmp/scene.tif" -o "$tmp/ours.tif")" \
		>>"$tmp/runs"
	for lay in nchw channels_last; do
		flag=
		[ "$lay" = nchw ] || flag=--channels-last
		r=$("$PY" "$src/bench/predict_torch.py" "$tmp/run/checkpoint.cdpt" "$tmp/scene.npy" \
			"$tmp/peer_$lay.npy" --size "$S" --overlap "$O" --batch "$B" --threads "$T" \
			$tprec $flag)
		echo "$lay $r" | awk '{print $1, $3, $5}' >>"$tmp/runs"
	done
	i=$((i + 1))
done

"$SYS" - "$tmp" <<'PYEOF'
import os, statistics, sys
import numpy as np
from osgeo import gdal
tmp = sys.argv[1]
runs = {}
for line in open(os.path.join(tmp, "runs")):
    k, s, kib = line.split()
    runs.setdefault(k, []).append((float(s), int(kib)))
print("\n%-20s %10s %10s %10s" % ("impl", "median s", "best s", "peak MiB"))
for k, v in runs.items():
    print("%-20s %10.2f %10.2f %10.0f" % ("cdp-predict" if k == "ours" else "torch " + k,
          statistics.median(s for s, _ in v), min(s for s, _ in v), max(m for _, m in v) / 1024))
peer = min(("nchw", "channels_last"), key=lambda k: statistics.median(s for s, _ in runs[k]))
ratios = [p[0] / o[0] for o, p in zip(runs["ours"], runs[peer])]
print("speed ours / torch %s: %.2fx (median of %s), peak memory %.2fx" % (
    peer, statistics.median(ratios), " ".join("%.2f" % r for r in ratios),
    max(m for _, m in runs["ours"]) / max(m for _, m in runs[peer])))
ours = gdal.Open(os.path.join(tmp, "ours.tif")).ReadAsArray()
for k in ("nchw", "channels_last"):
    theirs = np.load(os.path.join(tmp, "peer_%s.npy" % k))
    print("class maps agree with torch %s on %.4f%% of %d pixels" % (
        k, 100.0 * np.mean(ours == theirs), ours.size))
PYEOF
