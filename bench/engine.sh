#!/bin/sh
# bench/engine.sh: training-step throughput of the engine's CPU backend
# against PyTorch on the same model, the same batch and the same number of
# threads. One step = forward, loss (ce), backward, SGD step (momentum 0.9,
# weight decay 1e-4) for
#   unet           unet.cfg width=16 depth=4 (1,942,594 params), 3x256x256, batch 8
#   classifier     classifier.cfg (584,165 params), 3x64x64, batch 64
#   unet-resnet34  unet-resnet34.cfg (smp's U-Net on torchvision's ResNet-34,
#                  2 classes), 3x256x256, batch 8
#   resnet50       resnet50.cfg (torchvision's ResNet-50, 1000 classes,
#                  25,557,032 params), 3x224x224, batch 32
# BENCH_MODELS picks the lines to run, so the bench can be run in parts
# (BENCH_MODELS=resnet50 sh bench/engine.sh BUILDDIR); all four by default.
# Ours: bench/engine_bench with --threads T. PyTorch: cdpool.torch_model
# (the same model built from tests/engine/model_dump's JSON) with
# torch.set_num_threads(T), once in NCHW and once in channels_last; ours is
# compared with the better of the two (by median). Warm-up steps are not
# timed; each configuration runs BENCH_REPEAT times, interleaved (ours,
# torch NCHW, torch channels_last, then again), and the table shows the
# median and the best of the runs. On a shared machine the load changes
# from minute to minute, so the speed ratio is the median of the ratios of
# runs made back to back (ours against the same repeat's torch), which
# a quiet or a busy minute sways less than a ratio of medians or of bests.
# Peak memory is getrusage's ru_maxrss
# of each whole process (a fresh one per run), so torch's includes the
# ~0.5 GiB of its libraries; "base" is the peak before the model is built.
#   usage: bench/engine.sh [BUILDDIR]
# Makes tests/engine/model_dump, a check program that plain `make` leaves
# unbuilt, in BUILDDIR first.
# BENCH_PRECISION=bf16 runs ours with -p bf16 (bf16 operands of convolutions
# and GEMMs, fp32 sums and master weights: needs AVX512_BF16, else the
# script exits 77) against PyTorch under torch.autocast("cpu",
# dtype=torch.bfloat16), which does the same; the header then also prints
# the CPU's bf16 and AMX flags and the kernels ours uses.
#   env: BENCH_THREADS (default nproc), BENCH_STEPS (5), BENCH_WARMUP (2),
#        BENCH_REPEAT (3), BENCH_MODELS ("unet classifier unet-resnet34
#        resnet50"),
#        BENCH_PRECISION (fp32 or bf16), TORCH_PYTHON (python3 on PATH:
#        the newest torch, 2.x)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
T=${BENCH_THREADS:-$(nproc)}
steps=${BENCH_STEPS:-5}
warmup=${BENCH_WARMUP:-2}
repeat=${BENCH_REPEAT:-3}
models_run=${BENCH_MODELS:-unet classifier unet-resnet34 resnet50}
PY=${TORCH_PYTHON:-python3}
prec=${BENCH_PRECISION:-fp32}
case $prec in
fp32) tprec= ;;
bf16) tprec=--bf16 ;;
*) echo "engine.sh: BENCH_PRECISION '$prec' is not fp32 or bf16" >&2; exit 1 ;;
esac
dump=$build/tests/engine/model_dump
bench=$build/bench/engine_bench
models=$src/share/cdpool/models
# the torch twin is python/cdpool/torch_model.py, run from the tree
PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE

# model_dump is a check program, which plain `make` leaves unbuilt (or
# stale): build both here, in the tree where make ran
if ! make -s -C "$build" tests/engine/model_dump bench/engine_bench >&2; then
	echo "engine.sh: cannot make tests/engine/model_dump and bench/engine_bench in '$build'" \
		"(BUILDDIR: where configure and make ran)" >&2
	exit 1
fi
if ! tv=$("$PY" -c 'import torch, numpy; print(torch.__version__)' 2>/dev/null); then
	echo "engine.sh: $PY cannot import torch and numpy" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$src/bench/train_lib.sh"     # machine, bf16_or_skip
machine
if [ "$prec" = bf16 ]; then
	bf16_or_skip engine.sh "$bench" -t 1 -n 1 -w 0 -p bf16 -i 3,32,32 -b 2 "$models/classifier.cfg"
	echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
		grep -E '^(avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
	echo "ours: bf16 kernels $("$bench" -t 1 -n 1 -w 0 -p bf16 -i 3,32,32 -b 2 "$models/classifier.cfg" |
		sed 's/.*"kernels": "\([^"]*\)".*/\1/') (CDP_CPU_ISA=${CDP_CPU_ISA:-best}," \
		"CDP_CPU_BF16=${CDP_CPU_BF16:-default}); torch: autocast bf16" \
		"${ONEDNN_MAX_CPU_ISA:+(ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA)}"
fi
echo "threads: $T; steps: $warmup warm-up + $steps timed, $repeat runs each; torch $tv ($PY)"

# model NAME CFG ARGS...: model_dump's JSON, then the runs
model() {
	name=$1 cfg=$2
	shift 2
	"$dump" "$@" "$cfg" >"$tmp/$name.json"
	i=0
	while [ "$i" -lt "$repeat" ]; do
		"$bench" -t "$T" -n "$steps" -w "$warmup" -p "$prec" "$@" "$cfg" >>"$tmp/$name.runs"
		"$PY" -m cdpool.torch_model bench "$tmp/$name.json" --threads "$T" \
			--steps "$steps" --warmup "$warmup" $tprec >>"$tmp/$name.runs"
		"$PY" -m cdpool.torch_model bench "$tmp/$name.json" --threads "$T" \
			--steps "$steps" --warmup "$warmup" --channels-last $tprec >>"$tmp/$name.runs"
		i=$((i + 1))
	done
}

for m in $models_run; do
	case $m in
	unet) model unet "$models/unet.cfg" -D width=16 -D depth=4 -i 3,256,256 -b 8 ;;
	classifier) model classifier "$models/classifier.cfg" -i 3,64,64 -b 64 ;;
	unet-resnet34) model unet-resnet34 "$models/unet-resnet34.cfg" -i 3,256,256 -b 8 ;;
	resnet50) model resnet50 "$models/resnet50.cfg" -i 3,224,224 -b 32 ;;
	*) echo "engine.sh: unknown model '$m'" >&2; exit 1 ;;
	esac
done

"$PY" - "$tmp" $models_run <<'PYEOF'
import json, os, statistics, sys
tmp, names = sys.argv[1], sys.argv[2:]
print("\n%-13s %-22s %-14s %9s %9s %10s %10s" % ("model", "impl", "layout", "median/s",
                                               "best/s", "peak MiB", "base MiB"))
for name in names:
    runs = {}                   # (impl, layout) -> runs in repeat order
    with open(os.path.join(tmp, name + ".runs")) as f:
        for line in f:
            r = json.loads(line)
            runs.setdefault((r["impl"], r["layout"]), []).append(r)
    med = {k: statistics.median(r["samples_per_s"] for r in v) for k, v in runs.items()}
    ours_k = [k for k in runs if k[0].startswith("cdpool")][0]
    torch_k = [k for k in runs if k[0].startswith("torch")]
    peer_k = max(torch_k, key=lambda k: med[k])
    for k in [ours_k] + torch_k:
        v = runs[k]
        print("%-13s %-22s %-14s %9.2f %9.2f %10.0f %10.0f" % (name, k[0], k[1], med[k],
              max(r["samples_per_s"] for r in v), max(r["maxrss_kib"] for r in v) / 1024,
              v[0]["base_kib"] / 1024))
    ours, peer = runs[ours_k], runs[peer_k]
    ratios = [a["samples_per_s"] / b["samples_per_s"] for a, b in zip(ours, peer)]
    o = ours[0]
    print("%-13s ours / torch %s: speed %.2fx (median of %s), peak memory %.2fx "
          "(ours: forward %.0f%%, backward %.0f%%, optimizer %.0f%% of the step)" % (
              name, peer_k[1], statistics.median(ratios),
              " ".join("%.2f" % x for x in ratios),
              max(r["maxrss_kib"] for r in ours) / max(r["maxrss_kib"] for r in peer),
              100 * o["forward_s"] / o["seconds"], 100 * o["backward_s"] / o["seconds"],
              100 * o["optim_s"] / o["seconds"]))
PYEOF
